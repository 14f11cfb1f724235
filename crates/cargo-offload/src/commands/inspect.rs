//! `cargo offload inspect <file>`: the device images a binary carries.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};

#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// An executable, shared library, object, or bundle file.
    file: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn exec(args: InspectArgs) -> Result<ExitCode> {
    let bytes =
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let images = offload_build::inspect::inspect(&bytes)
        .with_context(|| format!("inspecting {}", args.file.display()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&images)?);
    } else {
        print!(
            "{}",
            offload_build::inspect::render_text(&args.file.display().to_string(), &images)
        );
    }
    Ok(ExitCode::SUCCESS)
}
