//! `cargo offload package`: a stand-in for `llvm-offload-binary`. With `-o`, packs the
//! `--image`s into OffloadBinaries; with an input file, extracts the images matching each
//! `--image` from it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Parser;
use offload_tools::ops::package::{self, ImageSpec};

/// The raw arguments; parsed by [`PackageCli`] after the single-dash spelling is accepted.
#[derive(Debug, clap::Args)]
pub struct PackageArgs {
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "OPTIONS"
    )]
    args: Vec<OsString>,
}

#[derive(Debug, Parser)]
#[command(
    name = "cargo offload package",
    about = "Pack images into OffloadBinaries, or extract them, as llvm-offload-binary does",
    after_help = "Pack:    cargo offload package -o out.bin \
                  --image=file=k.o,triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=hip\n\
                  Extract: cargo offload package a.out --image=file=k.o,triple=amdgcn-amd-amdhsa"
)]
pub(super) struct PackageCli {
    /// A file to extract images from: an executable, object, archive or OffloadBinary file.
    input: Option<PathBuf>,
    /// `key=value,...`: `file` and `triple` required to pack; when extracting, every key but
    /// `file` selects images and `file` names the output.
    #[arg(long = "image", value_name = "KEY=VALUE,...")]
    images: Vec<String>,
    /// Output file when packing.
    #[arg(short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    /// Write the extracted images of each `--image` into one static archive at its `file`.
    #[arg(long)]
    archive: bool,
}

pub fn exec(args: PackageArgs) -> Result<ExitCode> {
    let mut argv = vec![OsString::from("cargo offload package")];
    argv.extend(super::bundle::double_dash(super::response_files::expand(
        args.args,
    )?));
    let cli = PackageCli::parse_from(argv);
    let images = cli
        .images
        .iter()
        .map(|s| ImageSpec::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    match (&cli.input, &cli.output) {
        (Some(input), _) => {
            let report = package::extract(input, &images, cli.archive)?;
            for w in &report.warnings {
                eprintln!("warning: {w}");
            }
        }
        (None, Some(output)) => {
            if images.is_empty() {
                bail!("nothing to pack: give at least one --image=file=..,triple=..");
            }
            package::pack(&images, output)?;
        }
        (None, None) => bail!("give an input file to extract from, or -o <file> to pack into"),
    }
    Ok(ExitCode::SUCCESS)
}
