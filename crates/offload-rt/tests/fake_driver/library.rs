//! Builds a stand-in driver library (`tests/fixtures/fake-cuda`, `fake-hip`): for this crate's
//! fake-driver tests and, through `#[path]`, for cargo-offload's, which load it in place of a
//! driver through `OFFLOAD_CUDA_LIBRARY` / `OFFLOAD_HIP_LIBRARY`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn cargo() -> PathBuf {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")));
    match home.map(|h| h.join("bin/cargo")) {
        Some(p) if p.exists() => p,
        _ => PathBuf::from("cargo"),
    }
}

/// Builds fixture `fixtures/<name>` into `target_dir`; the library's path.
pub fn build(fixtures: &Path, name: &str, target_dir: &Path) -> PathBuf {
    let mut cmd = Command::new(cargo());
    // Nothing of the outer cargo (CARGO_*, RUSTFLAGS, RUSTUP_TOOLCHAIN) may leak in.
    cmd.env_clear();
    for keep in [
        "PATH",
        "HOME",
        "CARGO_HOME",
        "RUSTUP_HOME",
        "TMPDIR",
        "USER",
    ] {
        if let Some(v) = std::env::var_os(keep) {
            cmd.env(keep, v);
        }
    }
    let out = cmd
        .current_dir(fixtures.join(name))
        .args(["build", "--release", "--quiet", "--target-dir"])
        .arg(target_dir)
        .output()
        .expect("running cargo");
    assert!(
        out.status.success(),
        "building the stand-in driver {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    target_dir.join(format!("release/lib{}.so", name.replace('-', "_")))
}
