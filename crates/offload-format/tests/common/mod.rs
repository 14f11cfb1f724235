//! Helpers shared by the tests that run clang-22's offload tools.
#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::path::PathBuf;
use std::process::Command;

use offload_toolchain::Tool;

/// The path of a tool, or `None` after printing a visible skip notice. When `CI` is set a
/// missing tool is a test failure naming its package.
pub fn tool(tool: Tool) -> Option<PathBuf> {
    tool.for_test()
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
