//! `cargo offload setup`: installs what GPU images need and the CPU device does not: the
//! pinned nightly with `rust-src` (through rustup), and with `--system` the distribution's
//! packages of clang, lld and LLVM 22 and of the CUDA toolkit's `ptxas`.
//!
//! The commands are planned first ([`plan`], a pure function of the options, the distribution
//! and what this machine already has), then printed (`--dry-run`) or run; when some need
//! `sudo`, the user is asked once, before any runs.

use std::process::ExitCode;

use anyhow::Result;
use cargo_offload::ops::setup::{self, SetupOptions};

#[derive(Debug, clap::Args)]
pub struct SetupArgs {
    /// Also install the distribution's packages: clang, lld and LLVM 22 with LLVM's
    /// development files, and the CUDA toolkit (`ptxas`), with CUDA 12.9's `ptxas` for
    /// `sm_90a` (from the Python package index, under /opt/cargo-offload/cuda). Debian and
    /// Ubuntu through apt-get; for other distributions the commands are printed.
    #[arg(long)]
    system: bool,
    /// Use `sudo` without asking first (needed without a terminal).
    #[arg(long, short = 'y')]
    yes: bool,
    /// Print the commands without running them.
    #[arg(long)]
    dry_run: bool,
}

pub fn exec(args: SetupArgs) -> Result<ExitCode> {
    setup::setup(&SetupOptions {
        system: args.system,
        yes: args.yes,
        dry_run: args.dry_run,
    })
}
