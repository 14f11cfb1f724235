//! Status lines of the device builds (`Compiling kernels saxpy-kernels (sm_80, host)`), shown
//! by `cargo offload` in cargo's style while cargo runs the build script, whose own output
//! cargo keeps hidden.

use std::path::Path;

use crate::env::Env;

/// Where `cargo offload` reads status lines: each build script appends `verb\tmessage`
/// lines to `<dir>/<pid>.status`. Read untracked: its value changes with every run.
pub const OFFLOAD_STATUS_DIR: &str = "OFFLOAD_STATUS_DIR";

/// Reports one step (`verb` as cargo's: `Compiling`, `Linking`, `Embedding`) to
/// `cargo offload`, or to stderr under `OFFLOAD_BUILD_VERBOSE`; nowhere else.
pub fn status(env: &Env, verb: &str, message: &str) {
    let line = format!("{verb}\t{}\n", message.replace(['\n', '\t'], " "));
    if let Some(dir) = env.get_untracked(OFFLOAD_STATUS_DIR) {
        let written =
            crate::fsutil::append_for_this_process(Path::new(&dir), "status", line.as_bytes());
        if written.is_ok() {
            return;
        }
    }
    if env.verbose() {
        eprintln!("{verb:>12} {message}");
    }
}

/// `sm_80, sm_90, host`.
pub fn arch_list(archs: &[crate::arch::OffloadArch]) -> String {
    archs
        .iter()
        .map(|a| a.name().to_owned())
        .collect::<Vec<_>>()
        .join(", ")
}
