//! One module per subcommand: argument parsing here, the work in the libraries.

mod build_status;
mod bundle;
mod cargo;
mod doctor;
mod init;
mod inspect;
mod new;
mod package;
mod phases;

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
    #[command(disable_help_flag = true)]
    PackageKernels(DeviceArgs),
    /// In a kernel crate: rebuild its prebuilt bundle from source and compare byte for byte.
    #[command(disable_help_flag = true)]
    Verify(DeviceArgs),
    /// Check every prerequisite of builds and launches, with the command that fixes each.
    Doctor(doctor::DoctorArgs),
    /// List the device images embedded in a binary, bundle or object.
    Inspect(inspect::InspectArgs),
    /// Create a project: a host crate and its kernel crate, or another `--template`.
    New(new::NewArgs),
    /// Set up an existing crate to launch Rust kernels: a kernel crate in `kernels/`, the
    /// dependencies, build.rs and workspace entries `new` would have written.
    Init(init::InitArgs),
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
        Command::PackageKernels(a) => run_device_binary("package-kernels", a),
        Command::Verify(a) => run_device_binary("verify", a),
        Command::Inspect(a) => inspect::exec(a),
        Command::New(a) => new::exec(a),
        Command::Init(a) => init::exec(a),
        Command::Bundle(a) => bundle::exec(a),
        Command::Package(a) => package::exec(a),
    }
}

/// The arguments of a subcommand that `cargo-offload-device` parses (`--help` included).
#[derive(Debug, clap::Args)]
struct DeviceArgs {
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    args: Vec<OsString>,
}

/// Runs `subcommand` in `cargo-offload-device`, the binary beside this one that links LLVM
/// for in-process device builds, and returns its exit status.
fn run_device_binary(subcommand: &str, args: DeviceArgs) -> Result<ExitCode> {
    use anyhow::Context as _;
    let me = std::env::current_exe().context("locating the cargo-offload executable")?;
    let device = me.with_file_name(format!(
        "cargo-offload-device{}",
        std::env::consts::EXE_SUFFIX
    ));
    let status = std::process::Command::new(&device)
        .arg(subcommand)
        .args(&args.args)
        .status()
        .with_context(|| {
            format!(
                "running {} (it is installed beside cargo-offload; reinstall cargo-offload)",
                device.display()
            )
        })?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}
