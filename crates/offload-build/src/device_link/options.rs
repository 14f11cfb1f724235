//! The options of a build's GPU device link, which the link cache's key holds.

use super::common::AmdCodeObjectVersion;
use super::error::Result;
use crate::env::Env;
use crate::metadata::{KernelCrate, PanicStrategy};

/// What a build's device link of one target is made with, besides its inputs: what the
/// environment and the kernel crate choose. Every kernel is kept, and the `ld.lld` found links.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct GpuLinkOptions {
    /// The AMD code object version (a build takes the one [`AmdCodeObjectVersion::from_env`]
    /// picks); NVIDIA images do not depend on it.
    pub code_object_version: AmdCodeObjectVersion,
    /// How the kernels end when they panic (a build takes [`KernelCrate::panic`]).
    pub panic: PanicStrategy,
}

impl GpuLinkOptions {
    /// The options of a build of `krate`: the code object version of `env`, the crate's panic
    /// strategy.
    pub(super) fn for_build(env: &Env, krate: &KernelCrate) -> Result<Self> {
        Ok(Self {
            code_object_version: AmdCodeObjectVersion::from_env(env)?,
            panic: krate.panic,
        })
    }
}
