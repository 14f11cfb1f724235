//! `build`, `run` and `test`: cargo's own commands, with the offload architectures handed to
//! the host crates' build scripts through `OFFLOAD_ARCH`. Every other flag (`--release`, `-p`,
//! `--features`, `--manifest-path`, `--target-dir`, `-- <program args>`) goes to cargo as is.

use std::ffi::OsString;
use std::process::{Command, ExitCode};

use anyhow::{Context, Result};
use offload_build::env::{Env, OFFLOAD_ARCH};

#[derive(Debug, clap::Args)]
#[command(disable_help_flag = true)]
pub struct CargoArgs {
    /// `--offload-arch ARCHS` (like clang's: `sm_80,sm_90,gfx90a,gfx942:xnack+,host`; may
    /// repeat; default: the package's `[package.metadata.offload] arch`, else `host`), then
    /// anything cargo takes, and after `--` the program's or test harness's arguments.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    args: Vec<OsString>,
}

/// Takes `--offload-arch X` / `--offload-arch=X` out of the arguments before `--`.
fn split_offload_args(args: Vec<OsString>) -> Result<(Vec<String>, Vec<OsString>)> {
    let mut archs = Vec::new();
    let mut rest = Vec::new();
    let mut iter = args.into_iter();
    while let Some(arg) = iter.next() {
        if arg == "--" {
            rest.push(arg);
            rest.extend(iter);
            break;
        }
        if arg == "--offload-arch" {
            let value = iter
                .next()
                .context("`--offload-arch` needs a value, e.g. `--offload-arch sm_80,host`")?;
            archs.push(value.to_string_lossy().into_owned());
        } else if let Some(value) = arg.to_str().and_then(|a| a.strip_prefix("--offload-arch=")) {
            archs.push(value.to_owned());
        } else {
            rest.push(arg);
        }
    }
    Ok((archs, rest))
}

const HELP: &str = "\
Offload options (the rest is cargo's own, below):
      --offload-arch <ARCHS>  device targets, like clang's --offload-arch:
                              sm_80,sm_90,gfx90a,gfx942:xnack+,host (may repeat;
                              default: [package.metadata.offload] arch, else host)
";

pub fn exec(subcommand: &str, args: CargoArgs) -> Result<ExitCode> {
    let env = Env::detect();
    let (offload_arch, cargo_args) = split_offload_args(args.args)?;
    let wants_help = cargo_args
        .iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "-h" || a == "--help");
    if wants_help {
        println!("{HELP}");
    }
    // Only the list is checked here: the toolchain is checked by the build scripts, when and
    // only when a device build runs, so a no-op build costs what a no-op `cargo build` costs.
    let canonical = if offload_arch.is_empty() {
        None
    } else {
        let archs = offload_build::arch::parse_list(&offload_arch.join(","), "--offload-arch")?;
        Some(
            archs
                .iter()
                .map(|a| a.name().to_owned())
                .collect::<Vec<_>>()
                .join(","),
        )
    };

    let cargo = env
        .get_untracked("CARGO")
        .unwrap_or_else(|| "cargo".to_owned());
    let mut cmd = Command::new(&cargo);
    cmd.arg(subcommand).args(&cargo_args);
    if let Some(list) = canonical {
        cmd.env(OFFLOAD_ARCH, list);
    }
    let status = cmd
        .status()
        .with_context(|| format!("could not run `{cargo} {subcommand}`"))?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn offload_arch_is_taken_out_wherever_it_stands_before_dashdash() {
        let (archs, rest) = split_offload_args(os(&[
            "--release",
            "--offload-arch",
            "sm_80,host",
            "-p",
            "saxpy",
            "--offload-arch=gfx90a",
            "--",
            "--offload-arch",
            "x",
        ]))
        .unwrap();
        assert_eq!(archs, vec!["sm_80,host", "gfx90a"]);
        assert_eq!(
            rest,
            os(&["--release", "-p", "saxpy", "--", "--offload-arch", "x"])
        );
    }

    #[test]
    fn offload_arch_without_value_is_an_error() {
        assert!(split_offload_args(os(&["--offload-arch"])).is_err());
    }
}
