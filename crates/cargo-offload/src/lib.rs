//! The work behind `cargo offload`, shared by its two executables: `cargo-offload`, whose
//! `commands/` parse each subcommand's arguments and call [`ops`], and
//! `cargo-offload-device`, which links LLVM and runs the in-process device builds.
//!
//! This library is versioned with those executables and makes no promise to other crates:
//! the engine's API is `offload-build`'s, the runtime's `offload-rt`'s.

pub mod ops;
