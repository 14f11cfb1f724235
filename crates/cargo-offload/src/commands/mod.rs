//! One module per subcommand: argument parsing here, the work in the libraries.

mod bundle;
mod cargo;
mod doctor;
mod inspect;
mod new;
mod package;
mod prebuilt;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "cargo offload",
    bin_name = "cargo offload",
    version,
    about = "Build, embed and run GPU and CPU-device kernels written in Rust",
    after_help = "Run `cargo offload <command> --help` for a command's options."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// `cargo build` with device images built and embedded for --offload-arch.
    Build(cargo::CargoArgs),
    /// `cargo run` with device images built and embedded for --offload-arch.
    Run(cargo::CargoArgs),
    /// `cargo test` with device images built and embedded for --offload-arch.
    Test(cargo::CargoArgs),
    /// In a kernel crate: build its images and write them, with their source hash, to
    /// `offload/<lib>.offload`, so crates using it build without a device toolchain.
    PackageKernels(prebuilt::PackageKernelsArgs),
    /// In a kernel crate: rebuild its prebuilt bundle from source and compare byte for byte.
    Verify(prebuilt::VerifyArgs),
    /// Check every prerequisite of builds and launches, with the command that fixes each.
    Doctor(doctor::DoctorArgs),
    /// List the device images embedded in a binary, bundle or object.
    Inspect(inspect::InspectArgs),
    /// Create a host crate and its kernel crate.
    New(new::NewArgs),
    /// Bundle, unbundle or list clang offload bundles (clang-offload-bundler's options).
    #[command(disable_help_flag = true)]
    Bundle(bundle::BundleArgs),
    /// Pack images into OffloadBinaries or extract them (llvm-offload-binary's options).
    #[command(disable_help_flag = true)]
    Package(package::PackageArgs),
}

pub fn exec(args: Vec<OsString>) -> Result<ExitCode> {
    let cli = Cli::parse_from(args);
    match cli.command {
        Command::Build(a) => cargo::exec("build", a),
        Command::Run(a) => cargo::exec("run", a),
        Command::Test(a) => cargo::exec("test", a),
        Command::Doctor(a) => doctor::exec(a),
        Command::PackageKernels(a) => prebuilt::package_kernels(a),
        Command::Verify(a) => prebuilt::verify(a),
        Command::Inspect(a) => inspect::exec(a),
        Command::New(a) => new::exec(a),
        Command::Bundle(a) => bundle::exec(a),
        Command::Package(a) => package::exec(a),
    }
}
