//! The nested device builds under `RUSTC_WRAPPER=sccache`: every unit is one sccache keeps,
//! the kernel crate among them (an rlib for a GPU, a static library for the CPU device, not a
//! linked output), so a clean rebuild of the same target directories compiles nothing
//! (`sccache --show-stats`: no miss) and links the same images, and so does a build in another
//! target directory (another checkout's, another CI runner's): nothing the nested builds hand
//! rustc names the target directory where sccache hashes it. sccache runs a server of its own
//! here (its own directory and port), which the test starts and stops.
#![cfg(feature = "llvm")]

mod common;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use offload_build::OffloadArch;
use offload_build::tooling::arch::parse_list;
use offload_build::tooling::device_link;
use offload_build::tooling::env::Env;
use offload_build::tooling::host_device;
use offload_format::{CpuLevel, ImageKind};

fn gpu_image(arch: &OffloadArch, target_dir: &Path, kind: ImageKind) -> Vec<u8> {
    device_link::build_gpu_images(&Env::detect(), &common::rt_kernels(), arch, target_dir, &[])
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .find(|i| i.image_kind == kind)
        .unwrap_or_else(|| panic!("no {kind:?} image"))
        .bytes
}

fn cpu_image(target_dir: &Path) -> Vec<u8> {
    host_device::build(
        &Env::detect(),
        &common::rt_kernels(),
        CpuLevel::Baseline,
        target_dir,
        None,
    )
    .unwrap_or_else(|e| panic!("{e}"))
    .bytes
}

/// `sccache ARGS` with the test's server; its standard output.
fn sccache(program: &Path, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "sccache {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The number on the line of `--show-stats` that starts with `label`.
fn stat(stats: &str, label: &str) -> u64 {
    stats
        .lines()
        .find(|l| l.starts_with(label))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `{label}` in:\n{stats}"))
}

/// What rustc wrote under `dir`: libraries (rlibs and static libraries in `deps`
/// directories, one per library unit) and linked units (proc-macros in `deps`, build
/// scripts).
#[derive(Debug, Default, Clone, Copy)]
struct Units {
    libraries: u64,
    linked: u64,
}

fn units(dir: &Path) -> Units {
    let mut found = Units::default();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            let inner = units(&path);
            found.libraries += inner.libraries;
            found.linked += inner.linked;
            continue;
        }
        let in_deps = path.parent().is_some_and(|p| p.ends_with("deps"));
        let extension = path.extension().and_then(|e| e.to_str());
        match extension {
            Some("rlib" | "a") if in_deps => found.libraries += 1,
            Some("so") if in_deps => found.linked += 1,
            None if path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("build_script_build-")) =>
            {
                found.linked += 1;
            }
            _ => {}
        }
    }
    found
}

/// The test's own sccache server, run in the foreground as a child of the test (sccache's
/// `--start-server` gives up after ten seconds, which a loaded CI machine has overrun); stopped
/// and reaped however the test ends.
struct Server {
    program: PathBuf,
    child: Child,
}

impl Server {
    const STARTUP: Duration = Duration::from_secs(120);

    fn start(program: &Path, port: u16) -> Server {
        let child = Command::new(program)
            .env("SCCACHE_START_SERVER", "1")
            .env("SCCACHE_NO_DAEMON", "1")
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
        let mut server = Server {
            program: program.to_path_buf(),
            child,
        };
        let deadline = Instant::now() + Self::STARTUP;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!("the sccache server exited before listening on port {port}: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "the sccache server did not listen on port {port} within {:?}",
                Self::STARTUP
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new(&self.program).arg("--stop-server").output();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

#[test]
fn a_clean_rebuild_under_sccache_compiles_nothing_and_links_the_same_images() {
    if !common::nightly_ready() {
        return;
    }
    let program = offload_toolchain::Tool::Sccache
        .find()
        .unwrap_or_else(|e| panic!("{e}"));
    let scratch = tempfile::tempdir().unwrap();
    let port = free_port();
    // SAFETY: this test binary has this one test, and nothing else in it reads or writes the
    // environment meanwhile.
    unsafe {
        std::env::set_var("SCCACHE_DIR", scratch.path().join("sccache"));
        std::env::set_var("SCCACHE_SERVER_PORT", port.to_string());
        std::env::set_var("SCCACHE_IDLE_TIMEOUT", "0");
        std::env::set_var("RUSTC_WRAPPER", &program);
        // The device link's own cache would hide nothing here, but the units' would: off.
        std::env::set_var("OFFLOAD_BUILD_CACHE", "off");
    }
    let _server = Server::start(&program, port);

    let arch = parse_list("gfx90a", "the test").unwrap()[0];
    let gpu_target = scratch.path().join("target/amdgcn-amd-amdhsa");
    let cpu_target = scratch.path().join("target/host");
    let gpu_first = gpu_image(&arch, &gpu_target, ImageKind::Object);
    let cpu_first = cpu_image(&cpu_target);
    let cold = sccache(&program, &["--show-stats"]);
    assert!(stat(&cold, "Cache misses") > 0, "{cold}");

    sccache(&program, &["--zero-stats"]);
    std::fs::remove_dir_all(&gpu_target).unwrap();
    std::fs::remove_dir_all(&cpu_target).unwrap();
    let gpu_second = gpu_image(&arch, &gpu_target, ImageKind::Object);
    let cpu_second = cpu_image(&cpu_target);
    let warm = sccache(&program, &["--show-stats"]);
    assert_eq!(
        stat(&warm, "Cache misses"),
        0,
        "every unit from the cache:\n{warm}"
    );
    // Every library rustc wrote is a hit: for each target the device API's crates, their
    // build and macro dependencies and the kernel crate (and on the GPU, core and
    // compiler_builtins, built from source); build scripts' probes may add more. What sccache
    // turns away for its crate type is exactly the linked units, build scripts and
    // proc-macros: the kernel crate is not among them.
    let gpu = units(&gpu_target);
    let cpu = units(&cpu_target);
    let libraries = gpu.libraries + cpu.libraries;
    assert!(libraries >= 8, "{gpu:?} {cpu:?}");
    assert!(
        stat(&warm, "Cache hits") >= libraries,
        "{libraries} libraries:\n{warm}"
    );
    assert_eq!(
        stat(&warm, "crate-type"),
        gpu.linked + cpu.linked,
        "{gpu:?} {cpu:?}:\n{warm}"
    );
    assert_eq!(gpu_second, gpu_first, "the same code object");
    assert_eq!(cpu_second, cpu_first, "the same CPU device image");

    // Another target directory: its path reaches rustc in `--out-dir`, `-L`, `--extern` and
    // the build scripts' `OUT_DIR`, none of which sccache hashes for these crates (it would
    // hash `OUT_DIR` for a crate that reads it with `env!`).
    sccache(&program, &["--zero-stats"]);
    let elsewhere = scratch.path().join("elsewhere/target");
    let gpu_elsewhere = gpu_image(
        &arch,
        &elsewhere.join("amdgcn-amd-amdhsa"),
        ImageKind::Object,
    );
    let cpu_elsewhere = cpu_image(&elsewhere.join("host"));
    let moved = sccache(&program, &["--show-stats"]);
    assert_eq!(
        stat(&moved, "Cache misses"),
        0,
        "every unit from the cache in another target directory:\n{moved}"
    );
    assert!(
        stat(&moved, "Cache hits") >= libraries,
        "{libraries} libraries:\n{moved}"
    );
    assert_eq!(gpu_elsewhere, gpu_first, "the same code object elsewhere");
    assert_eq!(
        cpu_elsewhere, cpu_first,
        "the same CPU device image elsewhere"
    );
}
