//! What a `cargo offload build|run|test` command line asks: parsed once into
//! [`CompileOptions`] (`cargo offload`'s own options, what it reads of cargo's, the arguments
//! cargo gets), the run mode it chooses, and the architectures `native` stands for.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::Result;
use offload_build::OffloadArch;
use offload_build::tooling::arch;
use offload_build::tooling::env::NATIVE_NONE;
use offload_build::tooling::workspace::PackageSelection;

/// What `native` stands for: this machine's GPUs, probed through offload-rt's drivers at the
/// first list naming `native`, once.
#[derive(Debug, Default)]
pub(super) struct NativeGpus(std::cell::OnceCell<Vec<OffloadArch>>);

impl NativeGpus {
    pub(super) fn get(&self) -> &[OffloadArch] {
        self.0.get_or_init(|| {
            let found = offload_rt::__internal::native_archs();
            let (archs, notes) = arch::parse_found(&found.archs);
            for note in notes {
                eprintln!("note: {note}");
            }
            archs
        })
    }

    /// `list` parsed with `native` resolved, for the CPU device of the build `options` ask
    /// for (their `--target`); a note on stderr when `native` stands for `host`.
    #[expect(
        clippy::result_large_err,
        reason = "the probe's closure returns offload-build's error type, as its other callers do"
    )]
    pub(super) fn resolve(
        &self,
        list: &str,
        origin: &str,
        options: &CompileOptions,
    ) -> Result<Vec<OffloadArch>> {
        // The last `--target` given.
        let triple = options
            .targets
            .last()
            .cloned()
            .unwrap_or_else(|| arch::host_triple().to_owned());
        let resolved = arch::parse_list_for_triple(list, origin, &triple, || {
            Ok(arch::Native::Found(self.get().to_vec()))
        })?;
        if let Some(note) = &resolved.note {
            eprintln!("note: {note}");
        }
        Ok(resolved.archs)
    }

    /// `OFFLOAD_NATIVE_ARCH` for the build scripts, once probed.
    pub(super) fn env_value(&self) -> Option<String> {
        let archs = self.0.get()?;
        Some(if archs.is_empty() {
            NATIVE_NONE.to_owned()
        } else {
            canonical(archs)
        })
    }
}

/// An architecture list as build scripts read it: the names joined by commas.
pub(super) fn canonical(archs: &[OffloadArch]) -> String {
    archs
        .iter()
        .map(OffloadArch::name)
        .collect::<Vec<_>>()
        .join(",")
}

/// What `cargo offload` itself takes from a cargo command line, before `--`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OffloadOptions {
    /// Each `--offload-arch` value.
    pub archs: Vec<String>,
    /// `--print-phases`: print the action graphs instead of building.
    pub print_phases: bool,
    /// `run --debugger[=PROGRAM]`: the debugger to run the program under.
    pub debugger: Option<Debugger>,
    /// `run --sanitize[=TOOL]`: what to run the program under.
    pub sanitize: Option<Sanitize>,
    /// `run --np N`: the program started as `N` MPI ranks under `mpirun`.
    pub ranks: Option<u32>,
}

/// What `cargo offload run --debugger[=PROGRAM]` runs the program under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Debugger {
    /// `--debugger`: the GPU vendor's gdb where the program will run its kernels on a GPU
    /// that has one installed (`cuda-gdb`, `rocgdb`), else `gdb`
    /// ([`default_debugger`](super::cargo::default_debugger)).
    ForThisMachine,
    /// `--debugger=PROGRAM`: `gdb`, `lldb`, `cuda-gdb`, `rocgdb`, or any program taking gdb's
    /// or lldb's arguments.
    Program(String),
}

/// What `cargo offload run --sanitize[=TOOL]` checks the program with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sanitize {
    /// `--sanitize`: compute-sanitizer's `memcheck` where the driver reports an NVIDIA GPU,
    /// else AddressSanitizer on the CPU device.
    ForThisMachine,
    /// `--sanitize=TOOL`: one of [`SANITIZER_TOOLS`](super::cargo::SANITIZER_TOOLS) or
    /// [`ADDRESS_SANITIZER`](super::cargo::ADDRESS_SANITIZER).
    Tool(String),
}

/// How a `cargo offload build|run|test` runs, as its options choose: each one operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunMode {
    /// `--print-phases`: the action graphs printed, nothing built.
    Phases,
    /// Cargo's own command, run as asked.
    Cargo,
    /// `run --np N`: the program started as `N` MPI ranks.
    Mpirun(u32),
    /// `run --debugger[=PROGRAM]`.
    Debugger(Debugger),
    /// `run --sanitize[=TOOL]`.
    Sanitize(Sanitize),
}

/// A command line `cargo offload` cannot take, said before cargo runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgsError {
    /// An option that needs a value came last, or before `--`.
    #[error("`{option}` needs a value, e.g. `{example}`")]
    MissingValue {
        /// The option, as cargo spells it.
        option: &'static str,
        /// The option with a value.
        example: &'static str,
    },
    /// `--np` with something else than a positive whole number.
    #[error("`--np {0}`: the number of ranks is a whole number from 1")]
    BadRanks(String),
    /// An option of `cargo offload run` given to another command.
    #[error("`{0}` is an option of `cargo offload run`")]
    OnlyForRun(&'static str),
    /// Two options that each run the program under their own tool.
    #[error("{0}: choose one")]
    Conflict(&'static str),
}

/// A `cargo offload build|run|test|profile` command line, parsed once: `cargo offload`'s own
/// options taken out, and what it reads of cargo's (profile, target, target directory,
/// package and target selection, features, messages) typed, beside the arguments cargo gets
/// as they were given.
#[derive(Debug, Clone, Default)]
pub struct CompileOptions {
    /// `--offload-arch`, `--print-phases` and the run modes.
    pub offload: OffloadOptions,
    /// Cargo's arguments before `--`, in order, as given (less `cargo offload`'s own).
    pub cargo_args: Vec<OsString>,
    /// The arguments after `--`, for the program or the test harness (`None`: no `--`).
    pub program_args: Option<Vec<OsString>>,
    /// The packages selected (`--manifest-path`, `-p`, `--workspace`, `--exclude`).
    pub selection: PackageSelection,
    /// `--release`.
    pub release: bool,
    /// `--profile NAME`.
    pub profile: Option<String>,
    /// `--target TRIPLE`, each given.
    pub targets: Vec<String>,
    /// `--target-dir DIR`.
    pub target_dir: Option<PathBuf>,
    /// `--bin NAME` (an empty name: `--bin` alone).
    pub bins: Vec<String>,
    /// `--example NAME` (an empty name: `--example` alone).
    pub examples: Vec<String>,
    /// `-F`/`--features`, each given.
    pub features: Vec<String>,
    /// `--all-features`.
    pub all_features: bool,
    /// `--no-default-features`.
    pub no_default_features: bool,
    /// `--message-format`, each given (comma-separated lists as written).
    pub message_format: Vec<String>,
    /// `--color WHEN`, the last given.
    pub color: Option<String>,
    /// `-q`/`--quiet`.
    pub quiet: bool,
    /// `-v`/`-vv`/`--verbose`.
    pub verbose: bool,
    /// `-h`/`--help`.
    pub help: bool,
}

/// Cargo's options that take a value, with the short form where there is one. `optional`:
/// the value may be left out (`--bin` alone lists the binaries), so the next argument is
/// taken only when it is no option.
struct ValueOption {
    long: &'static str,
    short: Option<&'static str>,
    optional: bool,
}

const VALUE_OPTIONS: &[ValueOption] = &[
    value("--package", Some("-p"), false),
    value("--exclude", None, false),
    value("--manifest-path", None, false),
    value("--lockfile-path", None, false),
    value("--target", None, false),
    value("--target-dir", None, false),
    value("--artifact-dir", None, false),
    value("--features", Some("-F"), false),
    value("--jobs", Some("-j"), false),
    value("--profile", None, false),
    value("--message-format", None, false),
    value("--color", None, false),
    value("--config", None, false),
    value("-Z", None, false),
    value("--bin", None, true),
    value("--example", None, true),
    value("--test", None, true),
    value("--bench", None, true),
];

const fn value(long: &'static str, short: Option<&'static str>, optional: bool) -> ValueOption {
    ValueOption {
        long,
        short,
        optional,
    }
}

/// An example of each value option `cargo offload` reads, for [`ArgsError::MissingValue`].
fn example(option: &str) -> &'static str {
    match option {
        "--package" => "--package app",
        "--exclude" => "--exclude app",
        "--manifest-path" => "--manifest-path app/Cargo.toml",
        "--target" => "--target x86_64-unknown-linux-gnu",
        "--target-dir" => "--target-dir target",
        "--features" => "--features f16",
        "--profile" => "--profile release",
        "--message-format" => "--message-format json",
        "--color" => "--color never",
        "--jobs" => "--jobs 2",
        _ => "",
    }
}

impl CompileOptions {
    /// Parses a `cargo offload build|run|test` command line: `--offload-arch X` /
    /// `--offload-arch=X`, `--print-phases`, `--debugger[=PROGRAM]`, `--sanitize[=TOOL]` and
    /// `--np N` taken out wherever they stand before `--`, the rest read as cargo reads it.
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Self, ArgsError> {
        let args: Vec<OsString> = args.into_iter().collect();
        let mut o = CompileOptions::default();
        let mut i = 0;
        while let Some(arg) = args.get(i) {
            i += 1;
            if arg == "--" {
                o.program_args = Some(args[i..].to_vec());
                break;
            }
            let text = arg.to_string_lossy();
            let next = args.get(i).map(|v| v.to_string_lossy());
            if let Some(taken) = o.offload.take(&text, next.as_deref())? {
                i += taken;
                continue;
            }
            o.cargo_args.push(arg.clone());
            match &*text {
                "--release" | "-r" => o.release = true,
                "--workspace" | "--all" => o.selection.workspace = true,
                "--all-features" => o.all_features = true,
                "--no-default-features" => o.no_default_features = true,
                "-q" | "--quiet" => o.quiet = true,
                "-v" | "-vv" | "--verbose" => o.verbose = true,
                "-h" | "--help" => o.help = true,
                _ => {
                    if let Some((option, value, taken)) = cargo_value(&text, next.as_deref())? {
                        o.cargo_args.extend(args[i..i + taken].iter().cloned());
                        i += taken;
                        o.set(option, value);
                    }
                }
            }
        }
        Ok(o)
    }

    fn set(&mut self, option: &str, value: String) {
        match option {
            "--package" => self.selection.packages.push(value),
            "--exclude" => self.selection.exclude.push(value),
            "--manifest-path" => self.selection.manifest_path = Some(PathBuf::from(value)),
            "--target" => self.targets.push(value),
            "--target-dir" => self.target_dir = Some(PathBuf::from(value)),
            "--features" => self.features.push(value),
            "--profile" => self.profile = Some(value),
            "--message-format" => self.message_format.push(value),
            "--color" => self.color = Some(value),
            "--bin" => self.bins.push(value),
            "--example" => self.examples.push(value),
            _ => {}
        }
    }

    /// The run mode the options choose for `subcommand`, or why they choose none: `--np`,
    /// `--debugger` and `--sanitize` are `run`'s and exclude each other; `--print-phases`
    /// outranks them all.
    pub fn run_mode(&self, subcommand: &str) -> Result<RunMode, ArgsError> {
        let o = &self.offload;
        if o.print_phases {
            return Ok(RunMode::Phases);
        }
        let only_run = |option| {
            if subcommand == "run" {
                Ok(())
            } else {
                Err(ArgsError::OnlyForRun(option))
            }
        };
        if let Some(ranks) = o.ranks {
            only_run("--np")?;
            if o.debugger.is_some() || o.sanitize.is_some() {
                return Err(ArgsError::Conflict(
                    "`--np` runs the program under mpirun, `--debugger` and `--sanitize` under \
                     their own tool",
                ));
            }
            return Ok(RunMode::Mpirun(ranks));
        }
        match (&o.debugger, &o.sanitize) {
            (Some(_), Some(_)) => Err(ArgsError::Conflict(
                "`--debugger` and `--sanitize` each run the program under their own tool",
            )),
            (Some(debugger), None) => {
                only_run("--debugger")?;
                Ok(RunMode::Debugger(debugger.clone()))
            }
            (None, Some(sanitize)) => {
                only_run("--sanitize")?;
                Ok(RunMode::Sanitize(sanitize.clone()))
            }
            (None, None) => Ok(RunMode::Cargo),
        }
    }

    /// The CPU device's triple of the build: the first `--target`, else this machine's.
    pub fn target_triple(&self) -> String {
        self.targets
            .first()
            .cloned()
            .unwrap_or_else(|| arch::host_triple().to_owned())
    }

    /// Whether cargo is asked for JSON messages (a `--message-format` naming a `json…` form).
    pub fn wants_json_messages(&self) -> bool {
        self.message_format
            .iter()
            .any(|v| v.split(',').any(|f| f.starts_with("json")))
    }

    /// The whole command line cargo gets: its arguments, then `--` and the program's.
    pub fn to_cargo_args(&self) -> Vec<OsString> {
        let mut out = self.cargo_args.clone();
        if let Some(program) = &self.program_args {
            out.push("--".into());
            out.extend(program.iter().cloned());
        }
        out
    }

    /// The same build with `-p NAME` for each of `packages` (before any `--`).
    pub fn with_packages(&self, packages: &[String]) -> CompileOptions {
        let mut out = self.clone();
        for name in packages {
            out.cargo_args.push("-p".into());
            out.cargo_args.push(name.into());
            out.selection.packages.push(name.clone());
        }
        out
    }

    /// The same build for `triple` (`--target TRIPLE` first) unless a `--target` is given.
    pub fn with_default_target(&self, triple: &str) -> CompileOptions {
        let mut out = self.clone();
        if out.targets.is_empty() {
            out.cargo_args
                .splice(0..0, [OsString::from("--target"), OsString::from(triple)]);
            out.targets.push(triple.to_owned());
        }
        out
    }

    /// The build alone: the arguments after `--` are the program's, kept apart by the runs
    /// that start it themselves.
    pub fn without_program_args(&self) -> CompileOptions {
        CompileOptions {
            program_args: None,
            ..self.clone()
        }
    }
}

impl OffloadOptions {
    /// Takes `arg` when it is one of `cargo offload`'s own options, with `next` when that is
    /// its value: how many arguments after `arg` it took, or `None` for another option.
    fn take(&mut self, arg: &str, next: Option<&str>) -> Result<Option<usize>, ArgsError> {
        let value = |option, example| next.ok_or(ArgsError::MissingValue { option, example });
        match arg {
            "--offload-arch" => {
                let list = value("--offload-arch", "--offload-arch sm_80,host")?;
                self.archs.push(list.to_owned());
                return Ok(Some(1));
            }
            "--np" => {
                self.ranks = Some(parse_ranks(value("--np", "--np 4")?)?);
                return Ok(Some(1));
            }
            "--print-phases" => self.print_phases = true,
            "--debugger" => self.debugger = Some(Debugger::ForThisMachine),
            "--sanitize" => self.sanitize = Some(Sanitize::ForThisMachine),
            _ => {
                if let Some(list) = arg.strip_prefix("--offload-arch=") {
                    self.archs.push(list.to_owned());
                } else if let Some(program) = arg.strip_prefix("--debugger=") {
                    self.debugger = Some(Debugger::Program(program.to_owned()));
                } else if let Some(tool) = arg.strip_prefix("--sanitize=") {
                    self.sanitize = Some(Sanitize::Tool(tool.to_owned()));
                } else if let Some(ranks) = arg.strip_prefix("--np=") {
                    self.ranks = Some(parse_ranks(ranks)?);
                } else {
                    return Ok(None);
                }
            }
        }
        Ok(Some(0))
    }
}

/// For a value option of cargo's (`--long V`, `--long=V`, `-sV`, `-s V`), its long name, its
/// value and how many arguments after `arg` the value took (`next`, where it stands apart).
fn cargo_value(
    arg: &str,
    next: Option<&str>,
) -> Result<Option<(&'static str, String, usize)>, ArgsError> {
    for option in VALUE_OPTIONS {
        let attached = arg
            .strip_prefix(option.long)
            .and_then(|r| r.strip_prefix('='))
            .or_else(|| {
                option
                    .short
                    .and_then(|s| arg.strip_prefix(s))
                    .filter(|v| !v.is_empty())
            });
        if let Some(value) = attached {
            return Ok(Some((option.long, value.to_owned(), 0)));
        }
        if arg != option.long && option.short != Some(arg) {
            continue;
        }
        return match next {
            Some(value) if !(option.optional && value.starts_with('-')) => {
                Ok(Some((option.long, value.to_owned(), 1)))
            }
            _ if option.optional => Ok(Some((option.long, String::new(), 0))),
            // Not one `cargo offload` reads: cargo's to report.
            _ if example(option.long).is_empty() => Ok(None),
            _ => Err(ArgsError::MissingValue {
                option: option.long,
                example: example(option.long),
            }),
        };
    }
    Ok(None)
}

fn parse_ranks(value: &str) -> Result<u32, ArgsError> {
    value
        .parse::<u32>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| ArgsError::BadRanks(value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn parse(v: &[&str]) -> CompileOptions {
        CompileOptions::parse(os(v)).unwrap()
    }

    #[test]
    fn packages_are_added_before_the_test_binaries_arguments() {
        let names = ["app".to_owned(), "app-kernels".to_owned()];
        assert_eq!(
            parse(&["--release", "--", "--nocapture"])
                .with_packages(&names)
                .to_cargo_args(),
            os(&[
                "--release",
                "-p",
                "app",
                "-p",
                "app-kernels",
                "--",
                "--nocapture"
            ])
        );
        assert_eq!(
            parse(&[]).with_packages(&names[1..]).to_cargo_args(),
            os(&["-p", "app-kernels"])
        );
        let options = parse(&["-p", "app", "--", "--workspace"]);
        assert_eq!(options.selection.packages, ["app"]);
        assert!(!options.selection.workspace);
    }

    #[test]
    fn cargo_options_are_read_in_every_spelling_before_dashdash() {
        let options = parse(&[
            "-p",
            "a",
            "--package=b",
            "-pc",
            "--package",
            "d",
            "--",
            "-p",
            "e",
        ]);
        assert_eq!(options.selection.packages, ["a", "b", "c", "d"]);
        assert_eq!(
            options.cargo_args,
            os(&["-p", "a", "--package=b", "-pc", "--package", "d"])
        );
        assert_eq!(options.program_args, Some(os(&["-p", "e"])));
        assert_eq!(
            parse(&["--manifest-path", "x/Cargo.toml"])
                .selection
                .manifest_path,
            Some(PathBuf::from("x/Cargo.toml"))
        );
    }

    #[test]
    fn one_parse_reads_what_the_operations_need() {
        let options = parse(&[
            "--release",
            "--target",
            "aarch64-unknown-linux-gnu",
            "--target-dir=t",
            "--bin",
            "demo",
            "--example",
            "--features",
            "half",
            "-F",
            "mpi",
            "--no-default-features",
            "--message-format",
            "short,json-render-diagnostics",
            "--color=never",
            "-q",
            "-vv",
            "--workspace",
            "--exclude",
            "x",
            "--",
            "--quiet",
            "--help",
        ]);
        assert!(options.release && options.quiet && options.verbose);
        assert!(options.no_default_features && !options.all_features);
        assert!(!options.help, "after `--` is the program's");
        assert_eq!(options.target_triple(), "aarch64-unknown-linux-gnu");
        assert_eq!(options.target_dir, Some(PathBuf::from("t")));
        // `--example` alone (cargo lists the examples) takes no option as its value.
        assert_eq!(options.bins, ["demo"]);
        assert_eq!(options.examples, [""]);
        assert_eq!(options.features, ["half", "mpi"]);
        assert_eq!(options.color.as_deref(), Some("never"));
        assert!(options.wants_json_messages());
        assert!(options.selection.workspace);
        assert_eq!(options.selection.exclude, ["x"]);
        assert_eq!(options.program_args, Some(os(&["--quiet", "--help"])));
        // Everything but `cargo offload`'s own options reaches cargo as given.
        let all = os(&[
            "-p",
            "a",
            "--offload-arch",
            "host",
            "--print-phases",
            "--",
            "x",
        ]);
        assert_eq!(
            CompileOptions::parse(all).unwrap().to_cargo_args(),
            os(&["-p", "a", "--", "x"])
        );
        assert!(parse(&["--message-format=json"]).wants_json_messages());
        assert!(parse(&["--message-format", "json-diagnostic-short"]).wants_json_messages());
        assert!(!parse(&["--message-format=short"]).wants_json_messages());
        assert!(!parse(&["--", "--message-format=json"]).wants_json_messages());
        assert!(!parse(&["--quietly"]).quiet);
        assert!(!parse(&["--", "-q"]).quiet);
        assert!(parse(&["-q"]).quiet && parse(&["--verbose"]).verbose);
    }

    #[test]
    fn the_default_target_goes_first_and_only_without_one() {
        assert_eq!(
            parse(&["--release", "--", "a"])
                .with_default_target("x86_64-unknown-linux-gnu")
                .to_cargo_args(),
            os(&[
                "--target",
                "x86_64-unknown-linux-gnu",
                "--release",
                "--",
                "a"
            ])
        );
        let given = parse(&["--target=aarch64-unknown-linux-gnu"]);
        assert_eq!(
            given.with_default_target("x").to_cargo_args(),
            given.to_cargo_args()
        );
        assert_eq!(
            parse(&["-r", "--", "a"])
                .without_program_args()
                .to_cargo_args(),
            os(&["-r"])
        );
    }

    #[test]
    fn bad_command_lines_are_typed_errors() {
        let err = |v: &[&str]| CompileOptions::parse(os(v)).unwrap_err();
        assert_eq!(
            err(&["--offload-arch"]),
            ArgsError::MissingValue {
                option: "--offload-arch",
                example: "--offload-arch sm_80,host"
            }
        );
        assert_eq!(
            err(&["--target"]).to_string(),
            "`--target` needs a value, e.g. `--target x86_64-unknown-linux-gnu`"
        );
        assert!(matches!(
            err(&["-p"]),
            ArgsError::MissingValue {
                option: "--package",
                ..
            }
        ));
        assert_eq!(err(&["--np", "0"]), ArgsError::BadRanks("0".to_owned()));
        assert_eq!(
            err(&["--np=x"]).to_string(),
            "`--np x`: the number of ranks is a whole number from 1"
        );
        assert!(matches!(err(&["--np"]), ArgsError::MissingValue { .. }));
        // A value option `cargo offload` does not read is cargo's to report.
        assert_eq!(parse(&["--config"]).cargo_args, os(&["--config"]));
    }

    #[test]
    fn the_run_mode_is_chosen_once_and_conflicts_are_refused() {
        let mode = |v: &[&str], sub: &str| parse(v).run_mode(sub);
        assert_eq!(mode(&["--release"], "build"), Ok(RunMode::Cargo));
        assert_eq!(mode(&["--np", "2"], "run"), Ok(RunMode::Mpirun(2)));
        assert_eq!(
            mode(&["--debugger=lldb"], "run"),
            Ok(RunMode::Debugger(Debugger::Program("lldb".to_owned())))
        );
        assert_eq!(
            mode(&["--sanitize"], "run"),
            Ok(RunMode::Sanitize(Sanitize::ForThisMachine))
        );
        // `--print-phases` outranks the run modes.
        assert_eq!(
            mode(&["--print-phases", "--np", "2", "--debugger"], "test"),
            Ok(RunMode::Phases)
        );
        assert_eq!(
            mode(&["--np", "2"], "build"),
            Err(ArgsError::OnlyForRun("--np"))
        );
        assert_eq!(
            mode(&["--sanitize"], "test").unwrap_err().to_string(),
            "`--sanitize` is an option of `cargo offload run`"
        );
        assert!(matches!(
            mode(&["--np", "2", "--sanitize"], "run"),
            Err(ArgsError::Conflict(_))
        ));
        assert!(
            mode(&["--debugger", "--sanitize"], "run")
                .unwrap_err()
                .to_string()
                .ends_with("choose one")
        );
    }
}
