//! `build`, `run` and `test`: cargo's own commands, with the offload architectures handed to
//! the host crates' build scripts through `OFFLOAD_ARCH`, and what `native` stands for through
//! `OFFLOAD_NATIVE_ARCH` (the GPUs are probed here, through offload-rt's drivers, which build
//! scripts do not link). Every other flag (`--release`, `-p`, `--features`,
//! `--manifest-path`, `--target-dir`, `-- <program args>`) goes to cargo as is;
//! `--print-phases` builds nothing and prints the action graphs (`phases`).
//!
//! With `--message-format=json` (or one of its `json-…` forms) cargo's messages pass through
//! unchanged, and after each artifact that embeds device images come one
//! `{"reason":"offload-image",…}` message per image: target, arch, kind, size, module,
//! kernels and, where the image records them, each kernel's resource use (for NVIDIA images,
//! the figures of the build's own `ptxas -v` run: nothing here runs `ptxas`).

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::Result;
use cargo_offload::ops::cargo::run_cargo;
use cargo_offload::ops::command_line::CompileOptions;

#[derive(Debug, clap::Args)]
#[command(disable_help_flag = true)]
pub struct CargoArgs {
    /// `--offload-arch ARCHS` (like clang's: `sm_80,sm_90,gfx90a,gfx942:xnack+,host`, and
    /// `native` for the GPUs of this machine; may repeat; default: `OFFLOAD_ARCH`, else the
    /// package's `[package.metadata.offload] arch`, else `host`), `--print-phases` (print the
    /// action graphs, build nothing), then anything cargo takes, and after `--` the program's
    /// or test harness's arguments.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    args: Vec<OsString>,
}

pub(super) const HELP: &str = "\
Offload options (the rest is cargo's own, below):
      --offload-arch <ARCHS>  device targets, like clang's --offload-arch:
                              sm_80,sm_90,gfx90a,gfx942:xnack+,host (may repeat;
                              default: OFFLOAD_ARCH, else [package.metadata.offload]
                              arch, else host). `native`: the GPUs of this machine
                              (each CUDA device's sm_XX, each AMD device's target ID),
                              or host with a note where there is none; `native,host`
                              adds the CPU device
      --print-phases          print each host crate's action graph (host compile,
                              device compiles and links per architecture, images,
                              embedding, host link) like clang's -ccc-print-phases,
                              and build nothing
      --debugger[=PROGRAM]    (run) run the program under gdb (cuda-gdb or rocgdb
                              where its kernels run on such a GPU and it is
                              installed), or PROGRAM (lldb, gdb…), its CPU device's
                              kernels built unoptimized with full debug information,
                              so that `break kernels/src/lib.rs:14` stops in a kernel
                              thread
      --sanitize[=TOOL]       (run) check the program's memory accesses: under NVIDIA's
                              compute-sanitizer with TOOL memcheck (the default with
                              an NVIDIA GPU), racecheck, initcheck or synccheck; or
                              with TOOL address (the default without one), built with
                              AddressSanitizer and run on the CPU device; exit code 1
                              when it reports an error
      --np <N>                (run) start the program as N MPI ranks under mpirun
                              (OFFLOAD_MPIRUN, else on PATH); its collectives are
                              offload_rt::collective's (NCCL, RCCL, or MPI on the
                              CPU device)
";

pub fn exec(subcommand: &str, args: CargoArgs) -> Result<ExitCode> {
    let mut options = CompileOptions::parse(args.args)?;
    if options.help {
        // Cargo's help follows, from the cargo the command runs.
        println!("{HELP}");
        options.offload.print_phases = false;
        options.offload.debugger = None;
        options.offload.sanitize = None;
        options.offload.ranks = None;
    }
    run_cargo(subcommand, &options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cargo_offload::ops::command_line::{ArgsError, Sanitize};

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn parse(v: &[&str]) -> Result<CompileOptions, ArgsError> {
        CompileOptions::parse(os(v))
    }

    #[test]
    fn offload_arch_is_taken_out_wherever_it_stands_before_dashdash() {
        let options = parse(&[
            "--release",
            "--offload-arch",
            "sm_80,host",
            "-p",
            "saxpy",
            "--print-phases",
            "--offload-arch=gfx90a",
            "--",
            "--offload-arch",
            "x",
            "--print-phases",
        ])
        .unwrap();
        assert_eq!(options.offload.archs, vec!["sm_80,host", "gfx90a"]);
        assert!(options.offload.print_phases);
        assert_eq!(
            options.to_cargo_args(),
            os(&[
                "--release",
                "-p",
                "saxpy",
                "--",
                "--offload-arch",
                "x",
                "--print-phases"
            ])
        );
    }

    #[test]
    fn sanitize_takes_the_machine_default_and_a_named_tool() {
        let options = parse(&["--sanitize", "--", "--sanitize"]).unwrap();
        assert_eq!(options.offload.sanitize, Some(Sanitize::ForThisMachine));
        assert_eq!(options.to_cargo_args(), os(&["--", "--sanitize"]));
        let options = parse(&["--sanitize=racecheck"]).unwrap();
        assert_eq!(
            options.offload.sanitize,
            Some(Sanitize::Tool("racecheck".to_owned()))
        );
    }

    #[test]
    fn np_takes_a_positive_count_before_dashdash() {
        let options = parse(&["--np", "4", "--", "--np", "2"]).unwrap();
        assert_eq!(options.offload.ranks, Some(4));
        assert_eq!(options.to_cargo_args(), os(&["--", "--np", "2"]));
        assert_eq!(parse(&["--np=2"]).unwrap().offload.ranks, Some(2));
        for bad in [&["--np", "0"][..], &["--np=x"], &["--np"]] {
            let err = parse(bad).unwrap_err().to_string();
            assert!(err.contains("`--np"), "{err}");
        }
    }

    #[test]
    fn offload_arch_without_value_is_an_error() {
        assert!(parse(&["--offload-arch"]).is_err());
    }
}
