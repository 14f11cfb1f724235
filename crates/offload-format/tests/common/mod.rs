//! Helpers shared by the tests that run clang-22's offload tools.
#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::path::{Path, PathBuf};
use std::process::Command;

pub const LLVM_BIN: &str = "/usr/lib/llvm-22/bin";

/// The path of an LLVM 22 tool, or `None` after printing a visible skip notice. When `CI` is
/// set a missing tool is a test failure.
pub fn tool(name: &str) -> Option<PathBuf> {
    let path = Path::new(LLVM_BIN).join(name);
    if path.is_file() {
        return Some(path);
    }
    if std::env::var_os("CI").is_some() {
        panic!("{} is required when CI is set", path.display());
    }
    eprintln!("skipped: {} not found", path.display());
    None
}

/// Runs a command, panicking with its stderr when it fails; returns stdout.
pub fn run(cmd: &mut Command) -> Vec<u8> {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed with {}:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Runs a command expected to fail; returns its stderr.
pub fn run_fail(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    assert!(!out.status.success(), "{cmd:?} unexpectedly succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}
