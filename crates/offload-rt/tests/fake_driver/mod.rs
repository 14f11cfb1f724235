//! Builds the stand-in driver libraries (`tests/fixtures/fake-cuda`, `fake-hip`) that the
//! fake-driver tests load instead of a real driver.

use std::path::{Path, PathBuf};
use std::process::Command;

use offload_format::OffloadBinary;
use offload_rt::registry::{
    __offload_register_lib, OFFLOAD_DESCRIPTOR_MAGIC, OFFLOAD_DESCRIPTOR_VERSION, OffloadDescriptor,
};

fn cargo() -> PathBuf {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")));
    match home.map(|h| h.join("bin/cargo")) {
        Some(p) if p.exists() => p,
        _ => PathBuf::from("cargo"),
    }
}

/// Builds the stand-in driver library of fixture `name` (`tests/fixtures/<name>`); its path.
pub fn build(name: &str) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let target_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
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
        .current_dir(&fixture)
        .args(["build", "--release", "--quiet", "--target-dir"])
        .arg(&target_dir)
        .output()
        .expect("running cargo");
    assert!(
        out.status.success(),
        "building the stand-in driver {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    target_dir.join(format!("release/lib{}.so", name.replace('-', "_")))
}

/// Registers `binary` as the embedded images of a program would be (once per process).
pub fn register(binary: &OffloadBinary<'_>) {
    let bundle: &'static [u8] = binary.to_bytes().leak();
    let name: &'static [u8] = b"fake_driver";
    let desc: &'static OffloadDescriptor = Box::leak(Box::new(OffloadDescriptor {
        magic: OFFLOAD_DESCRIPTOR_MAGIC,
        version: OFFLOAD_DESCRIPTOR_VERSION,
        name: name.as_ptr(),
        name_len: name.len(),
        bundle: bundle.as_ptr(),
        bundle_len: bundle.len(),
    }));
    // SAFETY: the descriptor, its name and its bundle are leaked: valid for the rest of the
    // process.
    unsafe { __offload_register_lib(desc) };
}
