//! `cargo offload doctor`: every prerequisite of a build and of a launch, found or not, with
//! the command that fixes what is missing. Exits 1 when builds cannot work.

use std::process::ExitCode;

use anyhow::Result;
use cargo_offload::ops::doctor::{self, DoctorOptions};

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Print the checks as a JSON array (`check`, `status`, `detail`, `fix`).
    #[arg(long)]
    json: bool,
}

pub fn exec(args: DoctorArgs) -> Result<ExitCode> {
    doctor::doctor(&DoctorOptions { json: args.json })
}
