//! The file-level tools behind `cargo offload`, apart from the build engine (`offload-build`)
//! so that a build script compiles none of them:
//!
//! - [`ops`]: `cargo offload bundle` and `cargo offload package`, the stand-ins for
//!   `clang-offload-bundler` and `llvm-offload-binary`;
//! - [`inspect`]: `cargo offload inspect`, the device images in any file (executables,
//!   bundles, archives, OffloadBinaries) and what they say about themselves.
#![deny(missing_docs)]

pub mod inspect;
pub mod ops;
