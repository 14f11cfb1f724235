//! Helpers shared by the integration tests: the real tools they compare against.

use std::path::PathBuf;

use offload_toolchain::Tool;

/// A tool, or `None` after a visible skip line; in CI a missing tool fails, naming its package.
pub fn llvm_tool(tool: Tool) -> Option<PathBuf> {
    tool.for_test()
}

/// `ptxas`, or `None` after a visible skip line; in CI a missing one fails.
#[allow(
    dead_code,
    reason = "not every test binary that includes this module uses it"
)]
pub fn ptxas() -> Option<PathBuf> {
    Tool::Ptxas.for_test()
}
