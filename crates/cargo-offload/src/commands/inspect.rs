//! `cargo offload inspect <file>`: the device images a binary carries.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};

#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// Any file: executable, shared library, object, archive, bundle (plain or compressed),
    /// OffloadBinary.
    file: PathBuf,
    /// Print the images as a JSON array instead of text.
    #[arg(long)]
    json: bool,
    /// Print everything found (images and bundles, with CCOB header fields) as one JSON
    /// object `{"images": [...], "bundles": [...]}`.
    #[arg(long, conflicts_with = "json")]
    json_report: bool,
}

pub fn exec(args: InspectArgs) -> Result<ExitCode> {
    let input = offload_tools::ops::MappedInput::open(&args.file)?;
    let report = offload_tools::inspect::inspect_all(input.bytes())
        .with_context(|| format!("inspecting {}", args.file.display()))?;
    let text = if args.json {
        serde_json::to_string_pretty(&report.images)? + "\n"
    } else if args.json_report {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        offload_tools::inspect::render_report(&args.file.display().to_string(), &report)
    };
    super::bundle::print_stdout(&text)?;
    Ok(ExitCode::SUCCESS)
}
