//! `cargo xtask`: set-up and the project's own jobs. No dependency, so it builds on a bare
//! machine before anything else is installed.
//!
//! - `cargo xtask setup [--cuda]`: installs what is missing (Debian's LLVM/clang 22 packages,
//!   the nightly toolchain with rust-src; with `--cuda` the CUDA toolkit for `ptxas`).
//! - `cargo xtask demo`: set-up, then `examples/saxpy` built and run through `cargo offload run`.
//! - `cargo xtask test`: set-up (with the CUDA toolkit), then formatting, clippy, every test,
//!   and both examples run through `cargo offload run`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Debian packages every build needs: LLVM 22 for the device link (same major as rustc's),
/// lld for AMD code objects, clang's offload tools and OpenMP runtime for the peer tests.
const APT_PACKAGES: &[&str] = &[
    "clang-22",
    "lld-22",
    "llvm-22",
    "llvm-22-dev",
    "libclang-rt-22-dev",
    "libomp-22-dev",
    "liboffload-22-dev",
    "libpolly-22-dev",
    "zlib1g-dev",
    "libzstd-dev",
];
const CUDA_PACKAGE: &str = "nvidia-cuda-toolkit";
const NIGHTLY: &str = "nightly";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("setup") => setup(args.iter().any(|a| a == "--cuda")),
        Some("demo") => setup(false).and_then(|()| demo()),
        Some("test") => setup(true).and_then(|()| test()),
        _ => {
            eprintln!("usage: cargo xtask <setup [--cuda] | demo | test>");
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

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_owned)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn run(cmd: &mut Command) -> Result {
    eprintln!("xtask: running {cmd:?}");
    let status = cmd
        .status()
        .map_err(|e| format!("could not start {:?}: {e}", cmd.get_program()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed ({status})"))
    }
}

fn succeeds(cmd: &mut Command) -> bool {
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

// ---------------------------------------------------------------- set-up

fn setup(cuda: bool) -> Result {
    let mut missing: Vec<&str> = APT_PACKAGES
        .iter()
        .copied()
        .filter(|p| !dpkg_installed(p))
        .collect();
    let want_cuda = cuda && !has_ptxas();
    if want_cuda {
        missing.push(CUDA_PACKAGE);
    }
    if !missing.is_empty() {
        if want_cuda {
            enable_contrib_non_free()?;
        }
        apt_install(&missing)?;
    }
    rust_toolchain()?;
    Ok(())
}

fn dpkg_installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
}

fn has_ptxas() -> bool {
    succeeds(Command::new("ptxas").arg("--version"))
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
        let mut c = Command::new("sudo");
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
    let path = "/etc/apt/sources.list.d/offload-contrib-non-free.sources";
    let already = std::fs::read_dir("/etc/apt/sources.list.d")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            std::fs::read_to_string(e.path())
                .is_ok_and(|s| s.contains("non-free") && s.contains("contrib"))
        })
        || std::fs::read_to_string("/etc/apt/sources.list").is_ok_and(|s| {
            s.lines()
                .any(|l| l.contains("contrib") && l.contains("non-free"))
        });
    if already {
        return Ok(());
    }
    let codename = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VERSION_CODENAME=").map(str::to_owned))
        })
        .unwrap_or_else(|| "bookworm".to_owned());
    let entry = format!(
        "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: {codename}\n\
         Components: contrib non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    );
    let tmp = std::env::temp_dir().join("offload-contrib-non-free.sources");
    std::fs::write(&tmp, entry).map_err(|e| format!("writing {}: {e}", tmp.display()))?;
    run(&mut privileged(&["cp", &tmp.to_string_lossy(), path]))
}

fn rust_toolchain() -> Result {
    let have_nightly = succeeds(Command::new("rustup").args(["run", NIGHTLY, "rustc", "-V"]));
    if !have_nightly {
        run(Command::new("rustup").args([
            "toolchain",
            "install",
            NIGHTLY,
            "--profile",
            "minimal",
            "--component",
            "rust-src",
        ]))?;
    }
    let components = Command::new("rustup")
        .args(["component", "list", "--installed", "--toolchain", NIGHTLY])
        .output()
        .map_err(|e| format!("could not run rustup: {e}"))?;
    if !String::from_utf8_lossy(&components.stdout).contains("rust-src") {
        run(Command::new("rustup").args(["component", "add", "rust-src", "--toolchain", NIGHTLY]))?;
    }
    Ok(())
}

// ---------------------------------------------------------------- jobs

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()));
    cmd.current_dir(root());
    cmd
}

/// Builds `cargo-offload` and returns a PATH on which `cargo offload` finds it.
fn path_with_cargo_offload() -> Result<std::ffi::OsString> {
    run(cargo().args(["build", "--release", "--locked", "-p", "cargo-offload"]))?;
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    let bin_dir = target_dir.join("release");
    let mut paths = vec![bin_dir];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).map_err(|e| e.to_string())
}

fn cargo_offload_run(path: &std::ffi::OsStr, example: &str) -> Result {
    run(cargo()
        .env("PATH", path)
        .args(["offload", "run", "--release", "--locked", "-p", example]))
}

fn demo() -> Result {
    let path = path_with_cargo_offload()?;
    cargo_offload_run(&path, "saxpy")
}

fn test() -> Result {
    run(cargo().args(["fmt", "--all", "--", "--check"]))?;
    run(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--locked",
        "--",
        "-D",
        "warnings",
    ]))?;
    let path = path_with_cargo_offload()?;
    run(cargo()
        .env("PATH", &path)
        .args(["test", "--workspace", "--locked", "--no-fail-fast"]))?;
    for example in ["saxpy", "reduce"] {
        cargo_offload_run(&path, example)?;
    }
    Ok(())
}
