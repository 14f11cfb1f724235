//! `cargo-offload-device`: the subcommands that run device builds in-process
//! (`package-kernels`, `verify`), and the GPU device link of build scripts whose
//! `offload-build` links no LLVM (`device-link`, hidden; `--device-link-protocol` prints the
//! version it speaks, see `offload_build::tooling::device_linker`). They link LLVM for the device link;
//! keeping them in a binary of their own keeps `cargo-offload` from loading LLVM at every
//! start. `cargo offload package-kernels …` and `cargo offload verify …` run this binary, found
//! beside `cargo-offload`.

use std::process::ExitCode;

use cargo_offload::ops::prebuilt;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "cargo offload", bin_name = "cargo offload", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// In a kernel crate: build its images and write them, with their source hash, to
    /// `offload/<lib>.offload`, so crates using it build without a device toolchain.
    PackageKernels(prebuilt::PackageKernelsOptions),
    /// In a kernel crate: rebuild its prebuilt bundle from source and compare byte for byte.
    Verify(prebuilt::VerifyOptions),
    /// Serves one device link request of a build script: the request and the results in DIR.
    #[command(hide = true)]
    DeviceLink {
        /// The exchange directory (`request.json` in, images and `result.json` out).
        dir: std::path::PathBuf,
    },
}

fn main() -> ExitCode {
    use offload_build::tooling::device_linker;
    let mut args = std::env::args_os().skip(1);
    if let (Some(flag), None) = (args.next(), args.next())
        && flag == device_linker::PROTOCOL_FLAG
    {
        println!("{}", device_linker::protocol_line());
        return ExitCode::SUCCESS;
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::PackageKernels(a) => prebuilt::package_kernels(a),
        Command::Verify(a) => prebuilt::verify(a),
        Command::DeviceLink { dir } => {
            return if device_linker::serve(&dir) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err}");
            for cause in err.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::FAILURE
        }
    }
}
