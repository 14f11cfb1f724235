//! Helpers shared by the integration tests: the real tools they compare against.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::path::{Path, PathBuf};
use std::process::Output;

use offload_toolchain::Tool;

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/cargo-offload sits two levels below the workspace root")
        .to_owned()
}

/// A finished command's stdout, after asserting it succeeded (both streams on failure).
pub fn check(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A tool, or `None` after a visible skip line; in CI a missing tool fails, naming its package.
pub fn llvm_tool(tool: Tool) -> Option<PathBuf> {
    tool.for_test()
}

/// `ptxas`, or `None` after a visible skip line; in CI a missing one fails.
pub fn ptxas() -> Option<PathBuf> {
    Tool::Ptxas.for_test()
}
