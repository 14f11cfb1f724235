//! File-level operations behind `cargo offload bundle` and `cargo offload package`: the
//! stand-ins for `clang-offload-bundler` and `llvm-offload-binary`.
//!
//! Inputs are streamed (bundling copies each input through the kernel with
//! `copy_file_range` where the platform has it) or memory-mapped (text and object layouts),
//! so memory does not grow with the data. Every output is written to a temporary file
//! beside it and renamed into place, so a failed run leaves no half-written output.

pub mod bundle;
pub mod error;
pub mod files;
pub mod package;
mod verbose;

pub use error::{OpsError, Result};
pub use files::{AtomicOutput, MappedInput, find_objcopy};
