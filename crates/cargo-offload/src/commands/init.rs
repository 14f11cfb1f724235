//! `cargo offload init [PATH]`: an existing crate made a host crate with a kernel crate, laid
//! out as `new`'s default template lays them out, from that template's texts. Every check runs
//! and every file is staged before the first one is put in place, so a refusal or an error
//! leaves the crate as it was.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use cargo_offload::ops::dependency_source::DependencySource;
use cargo_offload::ops::init::{self, InitOptions};

#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// The crate's directory (or its Cargo.toml).
    #[arg(default_value = ".")]
    path: PathBuf,
    /// Name of the kernel crate created in `kernels/` (default: `<package>-kernels`).
    #[arg(long, value_name = "NAME")]
    kernels_name: Option<String>,
    /// Device targets written to `[package.metadata.offload] arch`, like clang's
    /// --offload-arch: `sm_80,gfx90a,host`.
    #[arg(long, value_name = "LIST", default_value = "host")]
    arch: String,
    /// Where the crate gets offload-rt and offload-build: `registry` (the published crates),
    /// `git=URL[@TAG_OR_COMMIT]`, or `path=DIR` (a checkout; written relative to the crate
    /// unless DIR is absolute). Default: where this cargo-offload came from.
    #[arg(long, value_name = "SOURCE")]
    source: Option<DependencySource>,
}

pub fn exec(args: InitArgs) -> Result<ExitCode> {
    init::init(&InitOptions {
        path: args.path,
        kernels_name: args.kernels_name,
        arch: args.arch,
        source: args.source,
    })
}
