//! Builds that survive faults: `cargo offload build` killed with SIGKILL at moments spread
//! over its phases, builds of one project started at once, and two projects filling one
//! shared device-build cache at once. After each, the next build succeeds, embeds exactly the
//! device images an undisturbed build embeds, and its kernels give correct results.
//!
//! `OFFLOAD_KILLS` sets how many kills (default 4); `OFFLOAD_KILL_SEED` replays a run's
//! moments (each run prints its seed). RELIABILITY.md records a long run's figures.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;
use common::{cargo_offload_command, check, llvm_tool, new_project_in, target_dir};
use offload_toolchain::Tool;

/// GPU and CPU targets: every phase (nested builds, device link, ptxas, bundling, embedding)
/// has work to do.
const ARCHS: &str = "sm_80,gfx90a,host";

/// The `.llvm.offloading` section of a built binary: every device image it embeds.
fn embedded_bundle(binary: &Path) -> Vec<u8> {
    let objcopy = llvm_tool(Tool::LlvmObjcopy).expect("llvm-objcopy (CI installs it)");
    let out = binary.with_extension("offloading");
    let scratch = binary.with_extension("stripped");
    check(
        &Command::new(objcopy)
            .arg(format!(
                "--dump-section={}={}",
                offload_format::abi::OFFLOADING_SECTION,
                out.display()
            ))
            .arg(binary)
            .arg(&scratch)
            .output()
            .unwrap(),
        "llvm-objcopy --dump-section",
    );
    let bytes = std::fs::read(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&scratch);
    bytes
}

fn build(project: &Path, target: &Path) -> Command {
    let mut cmd = cargo_offload_command(
        project,
        &[
            "build",
            "--release",
            "--offload-arch",
            ARCHS,
            "--target-dir",
            &target.to_string_lossy(),
        ],
    );
    cmd.env("CARGO_TERM_COLOR", "never");
    cmd
}

/// Runs the project's binary (on the CPU device) and checks its kernels' results.
fn runs_correctly(project: &Path, target: &Path) {
    let name = project.file_name().unwrap().to_string_lossy().into_owned();
    let out = Command::new(target.join("release").join(&name))
        .env("OFFLOAD_DEVICE", "cpu")
        .output()
        .unwrap();
    let stdout = check(&out, &format!("{name} after the build"));
    assert!(stdout.contains("saxpy: 65536 elements OK"), "{stdout}");
}

/// A change the kernel crate is rebuilt for, and that leaves its code as it was.
fn touch_kernels(project: &Path, n: usize) {
    let lib = project.join("kernels/src/lib.rs");
    let mut text = std::fs::read_to_string(&lib).unwrap();
    text.push_str(&format!("// edit {n}\n"));
    std::fs::write(lib, text).unwrap();
}

/// The phase a build was in: the last status line it printed. After `Embedding`, the
/// host crate compiles and links with the images.
fn phase(lines: &[(Duration, String)]) -> &'static str {
    let Some((_, last)) = lines.iter().rev().find(|(_, l)| !l.trim().is_empty()) else {
        return "starting";
    };
    let word = last.split_whitespace().next().unwrap_or("");
    match word {
        "Compiling" if last.contains("Compiling kernels") => "nested device builds",
        "Compiling" => "host dependencies and build script",
        "Linking" => "device link and ptxas",
        "Embedding" => "embedding and host link",
        "Finished" | "Embedded" => "exiting",
        _ => "other",
    }
}

/// A build whose stderr lines are collected as they come, in a process group of its own so
/// that the whole tree (cargo, build script, nested cargo, rustc, ptxas) can be killed.
struct Watched {
    child: Child,
    /// Each line with when it came, from the start.
    lines: Arc<Mutex<Vec<(Duration, String)>>>,
    reader: std::thread::JoinHandle<()>,
}

impl Watched {
    fn start(mut cmd: Command) -> Watched {
        cmd.process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = cmd.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push((started.elapsed(), line));
            }
        });
        Watched {
            child,
            lines,
            reader,
        }
    }

    /// SIGKILL to the whole group, as a power cut or the OOM killer would; returns the phase
    /// it was in, or `None` when the build had already ended.
    fn kill_after(mut self, delay: Duration) -> Option<&'static str> {
        let deadline = Instant::now() + delay;
        while Instant::now() < deadline {
            if self.child.try_wait().unwrap().is_some() {
                let _ = self.reader.join();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let phase = phase(&self.lines.lock().unwrap());
        let group = libc::pid_t::try_from(self.child.id()).expect("a pid fits pid_t");
        // SAFETY: kill(2) with a negative pid signals that process group: the build's own,
        // made by `process_group(0)` at spawn, whose leader has not been reaped yet.
        let killed = unsafe { libc::kill(-group, libc::SIGKILL) };
        assert_eq!(killed, 0, "SIGKILL to the build's process group");
        let _ = self.child.wait();
        let _ = self.reader.join();
        Some(phase)
    }

    fn finish(mut self) -> (std::process::ExitStatus, String) {
        let status = self.child.wait().unwrap();
        let _ = self.reader.join();
        let lines = self.lines.lock().unwrap();
        let text: Vec<&str> = lines.iter().map(|(_, l)| l.as_str()).collect();
        (status, text.join("\n"))
    }

    /// When the line starting with `word` came.
    fn finish_timing(self, word: &str) -> Duration {
        let lines = self.lines.clone();
        let (status, stderr) = self.finish();
        assert!(status.success(), "{stderr}");
        let lines = lines.lock().unwrap();
        lines
            .iter()
            .find(|(_, l)| l.trim_start().starts_with(word))
            .unwrap_or_else(|| panic!("no `{word}` line in:\n{stderr}"))
            .0
    }
}

/// xorshift64*: moments that a printed seed replays.
struct Moments(u64);

impl Moments {
    fn next_fraction(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn project(name: &str) -> (PathBuf, PathBuf) {
    let parent = target_dir("reliability");
    let project = new_project_in(&parent, &[name]);
    (project, parent.join(format!("{name}-target")))
}

#[test]
fn builds_killed_at_any_moment_leave_nothing_the_next_build_trusts() {
    let kills: usize = std::env::var("OFFLOAD_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let seed: u64 = std::env::var("OFFLOAD_KILL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    println!("{kills} kills, OFFLOAD_KILL_SEED={seed}");
    let mut moments = Moments(seed);

    let (project, target) = project("killed");
    let binary = target.join("release/killed");
    check(
        &build(&project, &target).output().unwrap(),
        "the first build",
    );
    runs_correctly(&project, &target);
    let reference = embedded_bundle(&binary);

    // How long a rebuild after a kernel change takes, undisturbed, to its `Finished` line:
    // the span kills fall in.
    touch_kernels(&project, 0);
    let span = Watched::start(build(&project, &target)).finish_timing("Finished");
    println!("an undisturbed rebuild finishes after {span:?}");

    let mut tally: Vec<(&str, usize)> = Vec::new();
    for i in 0..kills {
        touch_kernels(&project, i + 1);
        // Stratified: the i-th kill falls in the i-th slice of the span, so every phase is hit.
        let fraction = (i as f64 + moments.next_fraction()) / kills as f64;
        let delay = span.mul_f64(fraction);
        let phase = Watched::start(build(&project, &target))
            .kill_after(delay)
            .unwrap_or("after the build ended");
        println!("kill {}: after {delay:?}, in {phase}", i + 1);
        match tally.iter_mut().find(|(p, _)| *p == phase) {
            Some((_, n)) => *n += 1,
            None => tally.push((phase, 1)),
        }

        let out = build(&project, &target).output().unwrap();
        check(&out, &format!("the build after kill {}", i + 1));
        runs_correctly(&project, &target);
        assert!(
            embedded_bundle(&binary) == reference,
            "after kill {} ({phase}), the binary embeds other device images than an \
             undisturbed build",
            i + 1
        );
    }
    println!("kills survived, by phase: {tally:?}");
}

#[test]
fn builds_of_one_project_started_at_once_both_succeed() {
    let (project, target) = project("twice");
    check(
        &build(&project, &target).output().unwrap(),
        "the first build",
    );
    let reference = embedded_bundle(&target.join("release/twice"));
    for round in 1..=2 {
        touch_kernels(&project, round);
        let a = Watched::start(build(&project, &target));
        let b = Watched::start(build(&project, &target));
        for (which, watched) in [("first", a), ("second", b)] {
            let (status, stderr) = watched.finish();
            assert!(
                status.success(),
                "the {which} of two builds at once failed:\n{stderr}"
            );
        }
        runs_correctly(&project, &target);
        assert!(embedded_bundle(&target.join("release/twice")) == reference);
    }
}

#[test]
fn two_projects_filling_one_device_build_cache_at_once_both_succeed() {
    let cache = target_dir("reliability").join("shared-cache");
    if cache.exists() {
        std::fs::remove_dir_all(&cache).unwrap();
    }
    let one = project("cache-one");
    let two = project("cache-two");
    let three = project("cache-three");
    for (_, target) in [&one, &two, &three] {
        if target.exists() {
            std::fs::remove_dir_all(target).unwrap();
        }
    }
    let start = |(project, target): &(PathBuf, PathBuf)| {
        let mut cmd = build(project, target);
        cmd.env("OFFLOAD_BUILD_CACHE", &cache);
        Watched::start(cmd)
    };
    // Both store into the empty cache at once; a third project then builds from what they
    // stored.
    let running = [start(&one), start(&two)];
    for (watched, (project, _)) in running.into_iter().zip([&one, &two]) {
        let (status, stderr) = watched.finish();
        assert!(
            status.success(),
            "{} failed while another project filled the cache:\n{stderr}",
            project.display()
        );
        assert!(
            !stderr.contains("could not be"),
            "the cache was not usable:\n{stderr}"
        );
    }
    let (status, stderr) = start(&three).finish();
    assert!(status.success(), "{stderr}");
    assert!(
        !stderr.contains("differ from what it recorded"),
        "the cache holds damaged units:\n{stderr}"
    );
    for (project, target) in [&one, &two, &three] {
        runs_correctly(project, target);
    }
}

#[test]
fn a_plugin_with_kernels_loaded_and_unloaded_100_times_leaves_nothing_behind() {
    let project = common::fixture("plugin");
    let target = target_dir("reliability").join("plugin-target");
    let _ = std::fs::remove_dir_all(&target);
    let mut build = cargo_offload_command(
        &project,
        &[
            "build",
            "-p",
            "app",
            "-p",
            "plugin",
            "--target-dir",
            &target.to_string_lossy(),
        ],
    );
    // The most open file-creation mask a user can have: what the build writes must still not
    // be writable by others.
    // SAFETY: umask(2) is async-signal-safe and touches no memory of the parent.
    unsafe {
        build.pre_exec(|| {
            libc::umask(0);
            Ok(())
        });
    }
    check(&build.output().unwrap(), "the program and its plugin");
    let open: Vec<_> = walk_all(&target)
        .into_iter()
        .filter(|(_, mode)| mode & 0o022 != 0)
        .collect();
    assert!(
        open.is_empty(),
        "written group- or world-writable under umask 0: {open:?}"
    );
    let plugin = target.join("debug/libplugin.so");
    let out = Command::new(target.join("debug/app"))
        .arg(&plugin)
        .arg("100")
        .env("OFFLOAD_DEVICE", "cpu")
        .output()
        .unwrap();
    let stdout = check(&out, "100 load/unload cycles of the plugin");
    println!("{stdout}");
    // Every cycle's kernels, the plugin's and the program's, give right results, and each
    // `dlclose` unmaps the plugin: nothing of it (a thread, a thread-local destructor on the
    // loading thread, a registration in the program's runtime) outlives it.
    assert!(
        stdout.contains("plugin cycles: 100 all right, unmapped after 100"),
        "{stdout}"
    );
}

/// Every file and directory under `dir` (not following links), with its permission bits.
fn walk_all(dir: &Path) -> Vec<(PathBuf, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let meta = entry.path().symlink_metadata().unwrap();
            if meta.is_symlink() {
                continue;
            }
            out.push((entry.path(), meta.permissions().mode() & 0o7777));
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    out
}
