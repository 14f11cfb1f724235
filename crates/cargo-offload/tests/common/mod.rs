//! Helpers shared by the integration tests: the real tools they compare against.

use std::path::{Path, PathBuf};

pub const LLVM_BIN: &str = "/usr/lib/llvm-22/bin";

/// An LLVM 22 tool, or `None` after a visible skip line; in CI a missing tool fails.
pub fn llvm_tool(name: &str) -> Option<PathBuf> {
    present_or_skip(
        Some(Path::new(LLVM_BIN).join(name)).filter(|p| p.is_file()),
        name,
    )
}

/// `ptxas` from `PATH`, or `None` after a visible skip line; in CI a missing one fails.
#[allow(
    dead_code,
    reason = "not every test binary that includes this module uses it"
)]
pub fn ptxas() -> Option<PathBuf> {
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("ptxas"))
        .find(|p| p.is_file());
    present_or_skip(found, "ptxas")
}

fn present_or_skip(found: Option<PathBuf>, name: &str) -> Option<PathBuf> {
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{name} is required in CI (run `cargo xtask setup --cuda`)"
        );
        eprintln!("skipped: {name} not installed");
    }
    found
}
