//! `cargo xtask`: set-up and the project's own jobs. Its dependencies, `offload-toolchain` and
//! `flate2` (pure Rust), need nothing installed, so it builds on a bare machine before
//! anything else is.
//!
//! - `cargo xtask setup [--cuda]`: installs what is missing (the Debian packages of every tool in
//!   `offload-toolchain`'s table and the libraries beside them, the nightly toolchain with
//!   rust-src; with `--cuda` the CUDA toolkit for `ptxas`), then runs each tool and prints what
//!   it found. Under `CI` a tool that does not run fails the set-up.
//! - `cargo xtask tools`: the same check without installing anything.
//! - `cargo xtask which TOOL`: the path of a tool, for scripts.
//! - `cargo xtask lint-tools`: fails when a source file names a tool's path or program directly
//!   instead of asking `offload-toolchain`, so the tests cannot need a tool the set-up misses.
//! - `cargo xtask demo`: set-up, then `examples/saxpy` built and run through `cargo offload run`.
//! - `cargo xtask guide`: the user guide (`docs/guide`) built with the pinned mdBook, installed
//!   first when missing, and its links and anchors checked.
//! - `cargo xtask gpu-pack DIR`: everything a GPU can check, built and stripped into `DIR`
//!   (gzip-compressed, at most 60 MiB) with the `run.sh` that unpacks and runs it all on a
//!   GPU machine (see `gpu_pack`).
//! - `cargo xtask fuzz [SECONDS]`: every fuzz target (`fuzz/`) built with the pinned
//!   cargo-fuzz, installed first when missing, and run SECONDS each (default 20) from a copy of
//!   its corpus; a crash fails it.
//! - `cargo xtask outside`: the crates as another project gets them (see `outside`): the
//!   workspace's `cargo publish --dry-run`, a project made by `cargo offload new --source
//!   registry` built and run against the packaged crates, and the README's commands for a
//!   project of one's own run in a temporary directory.
//! - `cargo xtask test`: set-up (with the CUDA toolkit), the tool lint, then formatting, clippy,
//!   the API docs (`cargo doc`, warnings denied), the guide, every test, the examples run
//!   through `cargo offload run` (`openmp-cpp` with `OMP_TARGET_OFFLOAD=MANDATORY`), the
//!   `outside` checks, the GPU pack built and run on the CPU device, and the fuzz smoke
//!   (`cargo xtask fuzz`).

mod abi_lint;
mod code_map;
mod fuzz;
mod gpu_pack;
mod guide;
mod module_graph;
mod outside;
mod process_lint;
mod public_api;
mod sanitizers;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use offload_toolchain::{Origin, Tool};

const CUDA_PACKAGE: &str = Tool::Ptxas.package();
const NIGHTLY: &str = offload_toolchain::DEVICE_TOOLCHAIN;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("setup") => setup(args.iter().any(|a| a == "--cuda")),
        Some("tools") => check_tools(args.iter().any(|a| a == "--cuda")),
        Some("which") => which(args.get(1).map(String::as_str)),
        Some("lint-tools") => lint_tools(),
        Some("demo") => setup(false).and_then(|()| demo()),
        Some("guide") => guide::guide(),
        Some("gpu-pack") => match args.get(1) {
            Some(dir) => gpu_pack::gpu_pack(Path::new(dir)),
            None => Err("usage: cargo xtask gpu-pack DIR".to_owned()),
        },
        Some("sanitizers") => setup(false).and_then(|()| match args.get(1).map(String::as_str) {
            None => sanitizers::all(),
            Some("miri") => sanitizers::miri(),
            Some("thread") => sanitizers::thread_sanitizer(),
            Some("address") => sanitizers::address_sanitizer(),
            Some(other) => Err(format!(
                "`{other}` is not one of miri, thread, address; usage: cargo xtask sanitizers [miri | thread | address]"
            )),
        }),
        Some("fuzz") => match args.get(1).map(|s| s.parse::<u64>()) {
            None => fuzz::fuzz(fuzz::DEFAULT_SECONDS),
            Some(Ok(seconds)) if seconds > 0 => fuzz::fuzz(seconds),
            Some(_) => Err(format!(
                "`{}` is not a number of seconds; usage: cargo xtask fuzz [SECONDS]",
                args[1]
            )),
        },
        Some("outside") => path_with_cargo_offload().and_then(|path| {
            outside::publish_dry_run()?;
            outside::registry_project(&path)?;
            outside::readme_commands()
        }),
        Some("test") => setup(true)
            .and_then(|()| lint_tools())
            .and_then(|()| test()),
        _ => {
            eprintln!(
                "usage: cargo xtask <setup [--cuda] | tools [--cuda] | which TOOL | lint-tools | demo | guide | gpu-pack DIR | outside | sanitizers [miri | thread | address] | fuzz [SECONDS] | test>"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}

type Result<T = ()> = std::result::Result<T, String>;

/// Cargo's target directory for the workspace: `CARGO_TARGET_DIR`, else `target/`.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

/// Cargo's home: `CARGO_HOME`, else `~/.cargo`.
fn cargo_home() -> Option<PathBuf> {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_owned)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn run(cmd: &mut Command) -> Result {
    eprintln!("xtask: running {cmd:?}");
    let started = std::time::Instant::now();
    let status = cmd
        .status()
        .map_err(|e| format!("could not start {:?}: {e}", cmd.get_program()))?;
    // Where CI's time goes, step by step, in its log.
    eprintln!(
        "xtask: {:.0} s for {:?} {:?}",
        started.elapsed().as_secs_f64(),
        cmd.get_program(),
        cmd.get_args().take(4).collect::<Vec<_>>()
    );
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed ({status})"))
    }
}

/// `cmd`'s standard output; its failure an error with what it wrote to standard error.
fn output(cmd: &mut Command) -> Result<String> {
    eprintln!("xtask: running {cmd:?}");
    let out = cmd
        .output()
        .map_err(|e| format!("could not start {:?}: {e}", cmd.get_program()))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A tool `cargo install`ed at a pinned version: the one on `PATH` when its `--version`
/// prints `version_line`, else the one in a directory of its own under cargo's home
/// (`<crate>-<version>`), installed there first when missing (minutes, once per machine;
/// another version the machine has is left alone). `program` is both the crate and its binary.
fn pinned_tool(
    program: &str,
    version: &str,
    version_line: &str,
    install_args: &[&str],
) -> Result<PathBuf> {
    let is_wanted = |path: &Path| {
        Command::new(path)
            .arg("--version")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == version_line)
    };
    let on_path = PathBuf::from(program);
    if is_wanted(&on_path) {
        return Ok(on_path);
    }
    let cargo_home = cargo_home().ok_or_else(|| {
        format!("neither CARGO_HOME nor HOME is set: nowhere to install {program}")
    })?;
    let install_root = cargo_home.join(format!("{program}-{version}"));
    let installed = install_root.join("bin").join(program);
    if is_wanted(&installed) {
        return Ok(installed);
    }
    run(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
            .args(["install", program, "--locked", "--version", version])
            .args(install_args)
            .arg("--root")
            .arg(&install_root),
    )?;
    if is_wanted(&installed) {
        Ok(installed)
    } else {
        Err(format!(
            "installed {program} {version}, but {} does not say `{version_line}`",
            installed.display()
        ))
    }
}

/// `program` run with the device toolchain, through rustup, from the repository root (`cargo
/// +toolchain` needs rustup's proxy; the `cargo` running this task is the stable one's binary,
/// and the variables it set would point the program's cargo back at it).
fn with_nightly(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Tool::Rustup.command();
    cmd.args(["run", NIGHTLY]).arg(program).current_dir(root());
    for var in [
        "CARGO",
        "RUSTC",
        "RUSTDOC",
        "RUSTUP_TOOLCHAIN",
        "RUSTC_WRAPPER",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// The host's triple, as `rustc -vV` names it.
fn host_triple() -> Result<String> {
    let out = Tool::Rustc
        .command()
        .arg("-vV")
        .output()
        .map_err(|e| format!("could not run rustc: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(str::to_owned)
        .ok_or_else(|| "`rustc -vV` names no host".to_owned())
}

fn succeeds(cmd: &mut Command) -> bool {
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

// ---------------------------------------------------------------- set-up

fn setup(cuda: bool) -> Result {
    // The CUDA toolkit may come from NVIDIA's own installer: a working `ptxas` is enough.
    let want_cuda = cuda && Tool::Ptxas.find().is_err();
    let missing: Vec<&str> = offload_toolchain::packages(want_cuda)
        .into_iter()
        .filter(|p| !dpkg_installed(p))
        .collect();
    if !missing.is_empty() {
        if missing.contains(&CUDA_PACKAGE) {
            enable_contrib_non_free()?;
        }
        apt_install(&missing)?;
    }
    if cuda && !offload_toolchain::cuda_pip_tools_installed() {
        cuda_pip_install()?;
    }
    rust_toolchain()?;
    check_tools(cuda)
}

/// Installs CUDA 12.9's `ptxas` and CUDA 13's `cuobjdump` for `sm_90a` under
/// [`offload_toolchain::CUDA_PIP_PREFIX`]: Debian's CUDA 11.8 knows no `sm_90a`.
fn cuda_pip_install() -> Result {
    let python = Tool::Python3.find().map_err(|e| e.to_string())?;
    let python = python.to_string_lossy();
    let mut args = vec![&*python];
    args.extend(offload_toolchain::cuda_pip_install_args());
    eprintln!(
        "xtask: installing {} under {}",
        offload_toolchain::CUDA_PIP_PACKAGES.join(" "),
        offload_toolchain::CUDA_PIP_PREFIX
    );
    run(&mut privileged(&args))
        .map_err(|e| format!("{e}\n  fix: install them by hand: sudo {}", args.join(" ")))?;
    if offload_toolchain::cuda_pip_tools_installed() {
        Ok(())
    } else {
        Err(format!(
            "pip installed {} but {} holds no ptxas, cuobjdump and nvdisasm",
            offload_toolchain::CUDA_PIP_PACKAGES.join(" "),
            offload_toolchain::CUDA_PIP_PREFIX
        ))
    }
}

/// Runs every tool of the table with `--version` and prints where it was found. A tool that
/// is missing or does not run is an error under `CI` (naming its package), a warning otherwise.
/// `ptxas` is checked only with `cuda`.
fn check_tools(cuda: bool) -> Result {
    let mut broken = Vec::new();
    for &tool in Tool::ALL {
        if tool.origin() == Origin::Cuda && !cuda || !tool.installed_by_setup() {
            continue;
        }
        match tool.find() {
            Ok(path) => match offload_toolchain::version_of(&path) {
                Ok(version) => {
                    eprintln!("xtask: found {tool:<22} {}  ({version})", path.display());
                    if let Some(owner) = dpkg_owner(&path)
                        && owner != tool.package()
                    {
                        broken.push(format!(
                            "{} belongs to package {owner}, but the tool table says {}",
                            path.display(),
                            tool.package()
                        ));
                    }
                }
                Err(e) => broken.push(format!(
                    "{} {e} (package {})",
                    path.display(),
                    tool.package()
                )),
            },
            Err(e) => broken.push(e.to_string()),
        }
    }
    if broken.is_empty() {
        return Ok(());
    }
    for b in &broken {
        eprintln!("xtask: missing: {b}");
    }
    if std::env::var_os("CI").is_some() {
        let packages: Vec<&str> = Tool::ALL
            .iter()
            .filter(|t| cuda || t.origin() != Origin::Cuda)
            .filter(|t| t.installed_by_setup() && t.find().is_err())
            .map(|t| t.package())
            .collect();
        return Err(format!(
            "{} tool(s) missing or broken; CI needs every one (apt-get install {})",
            broken.len(),
            packages.join(" ")
        ));
    }
    Ok(())
}

/// The Debian package that installed `path` (the link itself where dpkg knows it, else what
/// it resolves to), if dpkg knows either.
fn dpkg_owner(path: &Path) -> Option<String> {
    let owner = |p: &Path| {
        let out = Command::new("dpkg-query").arg("-S").arg(p).output().ok()?;
        let text = String::from_utf8(out.stdout).ok()?;
        // `diversion by linux-perf from: /usr/bin/perf` lines come before the owner's.
        let line = text.lines().find(|l| !l.starts_with("diversion by "))?;
        let package = line.split(':').next()?.trim().to_owned();
        (out.status.success() && !package.is_empty()).then_some(package)
    };
    owner(path).or_else(|| owner(&std::fs::canonicalize(path).ok()?))
}

fn which(name: Option<&str>) -> Result {
    let name = name.ok_or("usage: cargo xtask which TOOL")?;
    let tool = Tool::ALL
        .iter()
        .find(|t| t.program() == name)
        .ok_or_else(|| {
            let known: Vec<&str> = Tool::ALL.iter().map(|t| t.program()).collect();
            format!("unknown tool `{name}`; known: {}", known.join(", "))
        })?;
    let path = tool.find().map_err(|e| e.to_string())?;
    println!("{}", path.display());
    Ok(())
}

// ---------------------------------------------------------------- tool lint

/// Files that may name tools directly: the table itself, and this file.
/// Sources that may name a tool's path: the table itself, and this lint, whose patterns are
/// such paths. They still start no tool by its program name.
const LINT_ALLOWED: &[&str] = &["crates/offload-toolchain/src/lib.rs", "xtask/src/main.rs"];

/// Fails when a Rust source or shell script names a tool of the table by path
/// (`/usr/lib/llvm-22/bin/…`, `/usr/bin/clang-22`) or runs one by program name
/// (`Command::new("ptxas")`) rather than through `offload-toolchain`: such a tool could be
/// missing from what the set-up installs and checks.
fn lint_tools() -> Result {
    let mut findings = Vec::new();
    let mut files = Vec::new();
    for dir in ["crates", "benches", "examples", "templates", "xtask"] {
        collect_sources(&root().join(dir), &mut files);
    }
    let programs: Vec<&str> = Tool::ALL.iter().map(|t| t.program()).collect();
    for file in files {
        let rel = file
            .strip_prefix(root())
            .unwrap_or(&file)
            .to_string_lossy()
            .into_owned();
        let paths_allowed = LINT_ALLOWED.contains(&rel.as_str());
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") || code.starts_with('#') && !rel.ends_with(".rs") {
                continue;
            }
            let named_path = line.contains(offload_toolchain::DEBIAN_LLVM_BIN)
                || line.contains("/usr/bin/clang-")
                || line.contains("/usr/lib/cuda/bin");
            if named_path && !paths_allowed || starts_tool_by_name(line, &programs) {
                findings.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    if findings.is_empty() {
        eprintln!("xtask: lint-tools: every tool is found through offload-toolchain");
        return Ok(());
    }
    for f in &findings {
        eprintln!("xtask: lint-tools: {f}");
    }
    Err(format!(
        "{} place(s) name a tool directly; ask offload_toolchain::Tool (or `cargo xtask which`) \
         so that the set-up installs and checks it",
        findings.len()
    ))
}

/// Whether `line` starts one of the table's `programs` by its name (`Command::new("rustup")`,
/// `Command::new("clang-22")`) instead of through `offload_toolchain::Tool`.
fn starts_tool_by_name(line: &str, programs: &[&str]) -> bool {
    programs.iter().any(|p| {
        line.contains(&format!("Command::new(\"{p}\")"))
            || line.contains(&format!("Command::new(\"{p}-22\")"))
    })
}

fn collect_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            collect_sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs" || e == "sh") {
            out.push(path);
        }
    }
}

/// The Rust files under `dir`, for the tests that read the crates' sources.
#[cfg(test)]
fn rust_sources(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    collect_sources(dir, &mut files);
    files.retain(|f| f.extension().is_some_and(|e| e == "rs"));
    files
}

fn dpkg_installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `apt-get` as root directly, else through sudo; a clear message when neither is possible.
fn privileged(args: &[&str]) -> Command {
    let mut cmd = if is_root() {
        Command::new(args[0])
    } else {
        let mut c = Tool::Sudo.command();
        c.arg(args[0]);
        c
    };
    cmd.args(&args[1..])
        .env("DEBIAN_FRONTEND", "noninteractive");
    cmd
}

fn apt_install(packages: &[&str]) -> Result {
    eprintln!("xtask: installing {}", packages.join(" "));
    run(&mut privileged(&["apt-get", "update", "-q"]))?;
    let mut args = vec!["apt-get", "install", "-y", "-q", "--no-install-recommends"];
    args.extend_from_slice(packages);
    run(&mut privileged(&args)).map_err(|e| {
        format!(
            "{e}\n  fix: install them by hand: sudo apt-get install {}",
            packages.join(" ")
        )
    })
}

/// The CUDA toolkit lives in Debian's `contrib non-free` components.
fn enable_contrib_non_free() -> Result {
    if offload_toolchain::debian_contrib_non_free_enabled(&offload_toolchain::apt_sources()) {
        return Ok(());
    }
    let codename = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VERSION_CODENAME=").map(str::to_owned))
        })
        .unwrap_or_else(|| "bookworm".to_owned());
    let entry = offload_toolchain::debian_contrib_non_free_entry(&codename);
    let tmp = std::env::temp_dir().join("offload-contrib-non-free.sources");
    std::fs::write(&tmp, entry).map_err(|e| format!("writing {}: {e}", tmp.display()))?;
    run(&mut privileged(&[
        "cp",
        &tmp.to_string_lossy(),
        offload_toolchain::DEBIAN_CONTRIB_NON_FREE_SOURCES,
    ]))
}

fn rust_toolchain() -> Result {
    let have_nightly = succeeds(Tool::Rustup.command().args(["run", NIGHTLY, "rustc", "-V"]));
    if !have_nightly {
        run(Tool::Rustup.command().args([
            "toolchain",
            "install",
            NIGHTLY,
            "--profile",
            "minimal",
            "--component",
            "rust-src",
        ]))?;
    }
    let components = Tool::Rustup
        .command()
        .args(["component", "list", "--installed", "--toolchain", NIGHTLY])
        .output()
        .map_err(|e| format!("could not run rustup: {e}"))?;
    if !String::from_utf8_lossy(&components.stdout).contains("rust-src") {
        run(Tool::Rustup
            .command()
            .args(["component", "add", "rust-src", "--toolchain", NIGHTLY]))?;
    }
    // The active toolchain (the one `cargo` here runs) builds host crates; nightly builds the
    // CPU image inside them.
    for toolchain in [None, Some(NIGHTLY)] {
        let mut list = Tool::Rustup.command();
        list.current_dir(root())
            .args(["target", "list", "--installed"]);
        if let Some(t) = toolchain {
            list.args(["--toolchain", t]);
        }
        let installed = list
            .output()
            .map_err(|e| format!("could not run rustup: {e}"))?;
        let installed = String::from_utf8_lossy(&installed.stdout);
        for target in offload_toolchain::RUST_CROSS_TARGETS {
            if !installed.lines().any(|l| l.trim() == *target) {
                let mut add = Tool::Rustup.command();
                add.current_dir(root()).args(["target", "add", target]);
                if let Some(t) = toolchain {
                    add.args(["--toolchain", t]);
                }
                run(&mut add)?;
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- jobs

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()));
    cmd.current_dir(root());
    cmd
}

/// Builds `cargo-offload` (and `cargo-offload-device`, the device link process of build
/// scripts, beside it) and returns a PATH on which `cargo offload` and build scripts find them.
fn path_with_cargo_offload() -> Result<std::ffi::OsString> {
    run(cargo().args(["build", "--release", "--locked", "-p", "cargo-offload"]))?;
    let bin_dir = target_dir().join("release");
    let mut paths = vec![bin_dir];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).map_err(|e| e.to_string())
}

/// `cargo offload run --release --locked -p <example>` with `cargo-offload` on `path`; more
/// options and the environment go on the command.
fn cargo_offload_run(path: &std::ffi::OsStr, example: &str) -> Command {
    let mut cmd = cargo();
    cmd.env("PATH", path)
        .args(["offload", "run", "--release", "--locked", "-p", example]);
    cmd
}

/// `example` run through `cargo offload run` (its build's messages shown as they come), which
/// must succeed and say which device and which image ran its kernels: the `device: ` and
/// `image: ` lines every example prints.
fn run_example(path: &std::ffi::OsStr, example: &str) -> Result {
    let started = std::time::Instant::now();
    let stdout = output(cargo_offload_run(path, example).stderr(std::process::Stdio::inherit()))?;
    print!("{stdout}");
    eprintln!(
        "xtask: {:.0} s for the example {example}",
        started.elapsed().as_secs_f64()
    );
    for line in ["device: ", "image: "] {
        if !stdout.lines().any(|l| l.starts_with(line)) {
            return Err(format!(
                "example {example}: no `{line}` line in its output:\n{stdout}"
            ));
        }
    }
    Ok(())
}

fn demo() -> Result {
    let path = path_with_cargo_offload()?;
    run(&mut cargo_offload_run(&path, "saxpy"))
}

/// In CI, the tests' scratch projects and their nested builds (`target/tmp`, several GiB)
/// are removed once the tests pass: the steps after them need the space, not the files (the
/// GPU pack makes its parity images afresh). A local run keeps them for the next one.
fn release_test_scratch() -> Result {
    if std::env::var_os("CI").is_none() {
        return Ok(());
    }
    let scratch = target_dir().join("tmp");
    match std::fs::remove_dir_all(&scratch) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("removing {}: {e}", scratch.display())),
    }
}

/// About what a whole `test` run writes under `target/` (builds, nested device builds, the
/// tests' scratch projects, the GPU pack) on a machine that starts without it.
const TEST_RUN_DISK_GIB: u64 = 25;

/// Says how much space the filesystem of `target/` has left, and warns when it is less than a
/// run may write: a full disk fails a run's later steps with errors that do not say so.
fn report_free_space() {
    let dir = target_dir();
    let probe = if dir.exists() { dir } else { root() };
    let Ok(df) = output(Command::new("df").args(["-Pk"]).arg(&probe)) else {
        return;
    };
    let Some(free_kib) = df
        .lines()
        .nth(1)
        .and_then(|line| line.split_whitespace().nth(3))
        .and_then(|field| field.parse::<u64>().ok())
    else {
        return;
    };
    let free_gib = free_kib / (1024 * 1024);
    if free_gib < TEST_RUN_DISK_GIB {
        eprintln!(
            "xtask: warning: {free_gib} GiB free for {}; a whole run writes about \
             {TEST_RUN_DISK_GIB} GiB there, and a full disk fails its later steps",
            probe.display()
        );
    } else {
        eprintln!("xtask: {free_gib} GiB free for {}", probe.display());
    }
}

fn test() -> Result {
    report_free_space();
    run(cargo().args(["fmt", "--all", "--", "--check"]))?;
    // Each lint and API-doc run for the workspace, then for the build-script crate as a host
    // crate using prebuilt bundles builds it: without LLVM, and for the runtime with the AMD
    // code-object reader no workspace member turns on. The docs' links must resolve (the
    // crates deny missing docs themselves).
    for selection in [
        &["--workspace"][..],
        &["-p", "offload-build", "--no-default-features"],
        &["-p", "offload-rt", "--features", "amdgpu-metadata"],
    ] {
        run(cargo()
            .args(["clippy", "--all-targets", "--locked"])
            .args(selection)
            .args(["--", "-D", "warnings"]))?;
        run(cargo()
            .env("RUSTDOCFLAGS", "-D warnings")
            .args(["doc", "--no-deps", "--locked"])
            .args(selection))?;
    }
    // The fuzz crate is a workspace of its own: linted here, so that a change that breaks a
    // fuzz target fails in minutes, not when the targets are built at the end.
    run(cargo().args([
        "clippy",
        "--manifest-path",
        "fuzz/Cargo.toml",
        "--bins",
        "--locked",
        "--",
        "-D",
        "warnings",
    ]))?;
    guide::guide()?;
    let path = path_with_cargo_offload()?;
    run(cargo()
        .env("PATH", &path)
        .args(["test", "--workspace", "--locked", "--no-fail-fast"]))?;
    run(cargo().args([
        "test",
        "-p",
        "offload-rt",
        "--lib",
        "--locked",
        "--features",
        "amdgpu-metadata",
    ]))?;
    // The CPU device's tests again with the fixture's image of the source form (the fallback
    // of a build without the CPU link): every fixture kernel with barriers runs in
    // `#[kernel]`'s loops where the macro can split it, checked against the host's results.
    run(cargo().env("OFFLOAD_CPU_BARRIERS_FORM", "source").args([
        "test",
        "-p",
        "offload-rt",
        "--test",
        "cpu_device",
        "--locked",
    ]))?;
    release_test_scratch()?;
    sanitizers::all()?;
    for example in [
        "saxpy",
        "reduce",
        "half-sum",
        "mixed",
        "blas-interop",
        "gemm",
        "attention",
    ] {
        run_example(&path, example)?;
    }
    // The collectives example runs as four MPI ranks in `e2e`'s
    // `collectives_run_exactly_on_four_mpi_ranks_of_the_cpu_device`, which checks its output
    // line; a second run here would only repeat it.
    // The crates as another project gets them: packaged and verified, a project made by
    // `new` against the packages, and the README's commands for one's own project.
    outside::publish_dry_run()?;
    outside::registry_project(&path)?;
    outside::readme_commands()?;
    // The GPU pack, built and size-checked, its runner run on the CPU device: what a GPU
    // machine will run, ready whenever one is lent.
    let pack = target_dir().join("gpu-pack");
    gpu_pack::gpu_pack(&pack)?;
    gpu_pack::run_on_cpu(&pack)?;
    // The OpenMP example checks its result and that its target region ran on an offload
    // device; MANDATORY makes libomptarget fail rather than run the region on the host.
    run(cargo_offload_run(&path, "openmp-cpp").env("OMP_TARGET_OFFLOAD", "MANDATORY"))?;
    fuzz::fuzz(fuzz::DEFAULT_SECONDS)
}
