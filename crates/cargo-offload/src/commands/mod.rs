//! One module per subcommand: its arguments, parsed here and handed to `cargo_offload::ops`
//! (or, for the file-level tools, to `offload_tools::ops`).

mod bundle;
mod cargo;
mod doctor;
mod init;
mod inspect;
mod new;
mod option_error;
mod package;
mod profile;
mod response_files;
mod setup;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

pub use option_error::OptionError;

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
    /// Build as `run` does, run the program under its device's profiler and print a table of
    /// its kernels.
    ///
    /// Per kernel: launches, total and mean time, share, achieved bandwidth through its
    /// buffers and, where the program declares them (`offload_rt::profile::count_flops`),
    /// FLOP/s. The CPU device is timed by the runtime itself (no tool needed), with --detail sampled
    /// by perf for each kernel's hottest source lines; an NVIDIA GPU by Nsight Systems
    /// (nsys), with --detail Nsight Compute (ncu --import-source); an AMD GPU by rocprofv3. A
    /// self-contained HTML report (or SVG) shows the timeline of launches and copies per
    /// stream and a roofline of the kernels against the device's peak figures.
    Profile(profile::ProfileArgs),
    /// In a kernel crate: build its images and write them, with their source hash, to
    /// `offload/<lib>.offload`, so crates using it build without a device toolchain.
    #[command(disable_help_flag = true)]
    PackageKernels(DeviceArgs),
    /// In a kernel crate: rebuild its prebuilt bundle from source and compare byte for byte.
    #[command(disable_help_flag = true)]
    Verify(DeviceArgs),
    /// Check every prerequisite of builds and launches, with the command that fixes each.
    Doctor(doctor::DoctorArgs),
    /// Install what GPU images need (the CPU device needs none of it): the pinned nightly
    /// with rust-src through rustup and, with --system, clang, lld and LLVM 22 and ptxas.
    Setup(setup::SetupArgs),
    /// List the device images embedded in a binary, bundle or object.
    ///
    /// With --occupancy a table follows, one row per GPU kernel and architecture: the blocks
    /// (AMD: work-groups) resident per SM (CU; WGP from GFX10), the warps (waves) they make
    /// of the slots there, the occupancy and the resources that limit it. NVIDIA's follow
    /// CUDA's occupancy calculator: registers allocated per warp by 256 from each quarter of
    /// the register file, shared memory with the 1 KiB the driver reserves per block from
    /// sm_80 against the largest carveout, warp and block slots. AMD's follow LLVM's limits:
    /// VGPRs (AGPRs included), SGPRs on GFX9, LDS, wave slots and barriers, counting whole
    /// work-groups. A kernel's block is its launch bound where the image has one (PTX's
    /// .maxntid, a cubin's, an AMD kernel's flat work-group size below 1024), marked *.
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

/// The subcommand a program named after one of clang's offload tools stands for, so that
/// `cargo-offload` installed (or linked) as `clang-offload-bundler`, `llvm-offload-binary` or
/// `clang-offload-packager` is that tool.
pub fn tool_personality(program: &str) -> Option<&'static str> {
    match program {
        "clang-offload-bundler" => Some("bundle"),
        "llvm-offload-binary" | "clang-offload-packager" => Some("package"),
        _ => None,
    }
}

pub fn exec(args: Vec<OsString>) -> Result<ExitCode> {
    let cli = Cli::parse_from(args);
    // Before anything is written, by this process or the cargo it runs. Not for the commands
    // that run the user's programs, which must see the user's own mask; their build scripts
    // restrict it for everything `offload-build` and the device builds write.
    if !matches!(
        cli.command,
        Command::Run(_) | Command::Test(_) | Command::Profile(_)
    ) {
        offload_build::tooling::env::restrict_umask();
    }
    match cli.command {
        Command::Build(a) => cargo::exec("build", a),
        Command::Run(a) => cargo::exec("run", a),
        Command::Test(a) => cargo::exec("test", a),
        Command::Profile(a) => profile::exec(a),
        Command::Doctor(a) => doctor::exec(a),
        Command::Setup(a) => setup::exec(a),
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
    let status = offload_build::tooling::command::status_interactive(
        std::process::Command::new(&device)
            .arg(subcommand)
            .args(&args.args),
    )
    .with_context(|| {
        format!(
            "running {} (it is installed beside cargo-offload; reinstall cargo-offload)",
            device.display()
        )
    })?;
    Ok(cargo_offload::ops::cargo::exit_code(status))
}

#[cfg(test)]
mod tests {
    use clap::{Args as _, CommandFactory as _};

    use super::*;

    /// The user guide's command reference, from the workspace root.
    const REFERENCE: &str = "docs/guide/src/reference/commands.md";

    /// The one command that rewrites [`REFERENCE`].
    const BLESS: &str =
        "OFFLOAD_BLESS=1 cargo test -p cargo-offload --bin cargo-offload command_reference";

    /// Help text as `--help` prints it (trailing spaces left out).
    fn help(mut command: clap::Command) -> String {
        command = command.term_width(100);
        let text = command.render_long_help().to_string();
        let lines: Vec<&str> = text.trim_end().lines().map(str::trim_end).collect();
        lines.join("\n")
    }

    /// A shell transcript: `$ command` and what it prints.
    fn transcript(command: &str, output: &str) -> String {
        format!("```text\n$ {command}\n{output}\n```\n")
    }

    /// The body of `cargo offload NAME`'s section: what `--help` prints, from the definitions
    /// that print it. Clap's for most commands; for `build`, `run` and `test`, which hand
    /// `--help` on to cargo, the offload options printed before cargo's help (clap's text is
    /// `cargo offload help NAME`); for the commands whose options another parser reads, that
    /// parser's.
    fn subcommand_help(sub: &clap::Command) -> String {
        let name = sub.get_name();
        let own_help = |text: String| transcript(&format!("cargo offload {name} --help"), &text);
        let device = |name: &'static str, args: fn(clap::Command) -> clap::Command| {
            let mut command = clap::Command::new(name).bin_name(format!("cargo offload {name}"));
            if let Some(about) = sub.get_about() {
                command = command.about(about.clone());
            }
            if let Some(about) = sub.get_long_about() {
                command = command.long_about(about.clone());
            }
            own_help(help(args(command)))
        };
        match name {
            "build" | "run" | "test" => format!(
                "{}\nfollowed by what `cargo {name} --help` prints: every other option is \
                 cargo's own and passes through.\n\n{}",
                own_help(cargo::HELP.trim_end().to_owned()),
                transcript(&format!("cargo offload help {name}"), &help(sub.clone())),
            ),
            "profile" => own_help(profile::HELP.trim_end().to_owned()),
            "package-kernels" => device(
                "package-kernels",
                cargo_offload::ops::prebuilt::PackageKernelsOptions::augment_args,
            ),
            "verify" => device(
                "verify",
                cargo_offload::ops::prebuilt::VerifyOptions::augment_args,
            ),
            "bundle" => own_help(help(bundle::BundlerCli::command())),
            "package" => own_help(help(package::PackageCli::command())),
            other => {
                assert!(
                    !sub.is_disable_help_flag_set(),
                    "`cargo offload {other}` parses its own --help: say here where its help \
                     text comes from"
                );
                own_help(help(sub.clone()))
            }
        }
    }

    /// The command reference, in Markdown.
    fn command_reference() -> String {
        let mut cli = Cli::command();
        cli.build();
        let mut md = format!(
            "# Command reference\n\n\
             <!-- Generated from the argument definitions of `cargo offload` by the test \
             `command_reference_is_current` (crates/cargo-offload/src/commands/mod.rs). Do not \
             edit: run `{BLESS}`. -->\n\n\
             Every `cargo offload` command, with what its `--help` prints.\n\n{}",
            transcript("cargo offload --help", &help(cli.clone()))
        );
        // `help` (clap's) prints what the sections below show.
        for sub in cli.get_subcommands().filter(|s| s.get_name() != "help") {
            md.push_str(&format!("\n## `cargo offload {}`\n\n", sub.get_name()));
            if let Some(about) = sub.get_long_about().or(sub.get_about()) {
                md.push_str(&format!("{}\n\n", about.to_string().trim_end()));
            }
            md.push_str(&subcommand_help(sub));
        }
        md
    }

    #[test]
    fn command_reference_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(REFERENCE);
        let expected = command_reference();
        if std::env::var_os("OFFLOAD_BLESS").is_some_and(|v| v == "1") {
            std::fs::write(&path, &expected).expect("writing the command reference");
            return;
        }
        let found = std::fs::read_to_string(&path).unwrap_or_default();
        if found != expected {
            let line = found
                .lines()
                .zip(expected.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| found.lines().count().min(expected.lines().count()));
            panic!(
                "{REFERENCE} does not match the command-line definitions of `cargo offload` \
                 (first difference at line {}). It is generated from them: run\n\n    {BLESS}\n\n\
                 and commit the result.",
                line + 1
            );
        }
    }
}
