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
    /// Add each GPU kernel's occupancy on its image's architecture: resident blocks and warps
    /// per SM (AMD: work-groups and waves per CU), occupancy and limiting resource
    #[arg(long)]
    occupancy: bool,
    /// With --occupancy: threads per block of a kernel without a launch bound, 1 to 1024
    /// [default: 256]
    #[arg(long, value_name = "N", requires = "occupancy",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    block_size: Option<u32>,
    /// With --occupancy: dynamic shared memory (AMD: LDS) of each block, in bytes [default: 0]
    #[arg(long, value_name = "BYTES", requires = "occupancy")]
    dynamic_shared: Option<u64>,
}

pub fn exec(args: InspectArgs) -> Result<ExitCode> {
    let input = offload_tools::ops::MappedInput::open(&args.file)?;
    let mut report = offload_tools::inspect::inspect_all(input.bytes())
        .with_context(|| format!("inspecting {}", args.file.display()))?;
    if args.occupancy {
        let options = offload_tools::inspect::OccupancyOptions {
            block_size: args.block_size,
            dynamic_shared_bytes: args.dynamic_shared.unwrap_or(0),
        };
        offload_tools::inspect::add_occupancy(&mut report.images, &options);
    }
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
