//! `cargo offload profile`: build as `run` does, run the program under the profiler of its
//! device, print a table of its kernels and write a report (`cargo_offload::ops::profile`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use cargo_offload::ops::command_line::CompileOptions;
use cargo_offload::ops::profile::{ProfileOptions, profile};

#[derive(Debug, clap::Args)]
#[command(disable_help_flag = true)]
pub struct ProfileArgs {
    /// `--detail` (the hottest source lines of the slowest kernels: `perf` on the CPU device,
    /// Nsight Compute with its source view on NVIDIA), `--json` (the summary as JSON on
    /// stdout, the program's output on stderr), `--report PATH` (the report: an SVG image for
    /// `.svg`, else HTML; default `offload-profile/<program>.html` beside the executable),
    /// `--offload-arch ARCHS`, then anything `cargo build` takes, and after `--` the
    /// program's arguments.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    args: Vec<OsString>,
}

pub(super) const HELP: &str = "\
Profile options (the rest is cargo build's own):
      --detail                also the hottest source lines of each kernel: on the
                              CPU device from perf's samples (Debian's linux-perf)
                              through the image's line tables (the dev profile keeps
                              them; a release profile needs debug =
                              \"line-tables-only\"); on NVIDIA from Nsight Compute
                              (ncu --import-source)
      --json                  the summary as JSON on stdout; the program's own output
                              goes to stderr
      --report <PATH>         where the report goes: .svg for an SVG image, else a
                              self-contained HTML page (default:
                              offload-profile/<program>.html beside the executable)
      --offload-arch <ARCHS>  device targets, as for `cargo offload run`
";

/// Takes `--detail`, `--json` and `--report` out of the arguments before `--`.
fn split_profile_args(args: Vec<OsString>) -> Result<(ProfileOptions, Vec<OsString>)> {
    let mut options = ProfileOptions::default();
    let mut rest = Vec::new();
    let mut iter = args.into_iter();
    while let Some(arg) = iter.next() {
        if arg == "--" {
            rest.push(arg);
            rest.extend(iter);
            break;
        }
        if arg == "--detail" {
            options.detail = true;
        } else if arg == "--json" {
            options.json = true;
        } else if arg == "--report" {
            let value = iter
                .next()
                .context("`--report` needs a path, e.g. `--report profile.html`")?;
            options.report = Some(PathBuf::from(value));
        } else if let Some(value) = arg.to_str().and_then(|a| a.strip_prefix("--report=")) {
            options.report = Some(PathBuf::from(value));
        } else {
            rest.push(arg);
        }
    }
    Ok((options, rest))
}

pub fn exec(args: ProfileArgs) -> Result<ExitCode> {
    let (profile_options, args) = split_profile_args(args.args)?;
    let compile = CompileOptions::parse(args)?;
    let options = &compile.offload;
    if compile.help {
        println!("{HELP}");
        return Ok(ExitCode::SUCCESS);
    }
    if options.print_phases || options.debugger.is_some() || options.sanitize.is_some() {
        anyhow::bail!(
            "`profile` runs the program under its profiler: `--print-phases`, `--debugger` and \
             `--sanitize` are options of `build` and `run`"
        );
    }
    if options.ranks.is_some() {
        anyhow::bail!("`--np` is an option of `cargo offload run`");
    }
    profile(&profile_options, &compile)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn profile_flags_are_taken_out_before_dashdash() {
        let (options, rest) = split_profile_args(os(&[
            "--detail",
            "-p",
            "saxpy",
            "--report=r.svg",
            "--json",
            "--",
            "--json",
        ]))
        .unwrap();
        assert!(options.detail && options.json);
        assert_eq!(options.report, Some(PathBuf::from("r.svg")));
        assert_eq!(rest, os(&["-p", "saxpy", "--", "--json"]));
        assert!(split_profile_args(os(&["--report"])).is_err());
    }
}
