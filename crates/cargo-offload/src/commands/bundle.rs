//! `cargo offload bundle`: a stand-in for `clang-offload-bundler`, taking its options in
//! either spelling (`-type=o` or `--type=o`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Parser;
use offload_format::{CompressOptions, CompressionMethod};
use offload_tools::ops::bundle::{self, BundleConfig};

/// The raw arguments; parsed by [`BundlerCli`] after the single-dash spelling is accepted.
#[derive(Debug, clap::Args)]
pub struct BundleArgs {
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "OPTIONS"
    )]
    args: Vec<OsString>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Method {
    Zstd,
    Zlib,
}

/// clang-offload-bundler's options, plus a few of this tool's own (marked).
#[derive(Debug, Parser)]
#[command(
    name = "cargo offload bundle",
    about = "Bundle, unbundle or list clang offload bundles, as clang-offload-bundler does",
    after_help = "Options may also be spelled with one dash, as clang-offload-bundler spells \
                  them: -type=o -targets=... -input=... -output=... -unbundle\n\
                  -### prints the llvm-objcopy command of the object layout instead of running \
                  it; @file reads more options from file"
)]
pub(super) struct BundlerCli {
    /// Type of the files: i ii cui hipi d ll bc s o a gch ast.
    #[arg(long = "type", value_name = "TYPE")]
    file_type: Option<String>,
    /// Bundle entry IDs, `<kind>-<triple>[-<target id>]`, comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    targets: Vec<String>,
    /// An input file (repeatable).
    #[arg(long, value_name = "FILE")]
    input: Vec<PathBuf>,
    /// Comma-separated input files (deprecated spelling).
    #[arg(long, value_delimiter = ',', value_name = "FILES")]
    inputs: Vec<PathBuf>,
    /// An output file (repeatable).
    #[arg(long, value_name = "FILE")]
    output: Vec<PathBuf>,
    /// Comma-separated output files (deprecated spelling).
    #[arg(long, value_delimiter = ',', value_name = "FILES")]
    outputs: Vec<PathBuf>,
    /// Unbundle the input into one output per target.
    #[arg(long)]
    unbundle: bool,
    /// List the bundle entry IDs of the input (file order).
    #[arg(long)]
    list: bool,
    /// Compress the bundle (CCOB, zstd level 3 with long-distance matching by default).
    #[arg(long)]
    compress: bool,
    /// Compression level.
    #[arg(
        long = "compression-level",
        value_name = "N",
        allow_hyphen_values = true
    )]
    compression_level: Option<i32>,
    /// Alignment of the entries in the binary layout.
    #[arg(long = "bundle-align", value_name = "N", default_value_t = 1)]
    bundle_align: u64,
    /// Create empty outputs for targets without an entry instead of failing.
    #[arg(long = "allow-missing-bundles")]
    allow_missing_bundles: bool,
    /// Check each archive member against the target-ID rules (-type=a).
    #[arg(long = "check-input-archive")]
    check_input_archive: bool,
    /// Let hip/hipv4 entries serve openmp targets and the reverse.
    #[arg(long = "hip-openmp-compatible")]
    hip_openmp_compatible: bool,
    /// Report each compressed bundle written or read (sizes, method, level, hash).
    #[arg(long)]
    verbose: bool,
    /// [this tool] CCOB version to write: 2 or 3.
    #[arg(long = "compression-version", value_name = "V")]
    compression_version: Option<u16>,
    /// [this tool] Compression method.
    #[arg(long = "compression-method", value_enum, default_value_t = Method::Zstd)]
    compression_method: Method,
    /// [this tool] Upper bound of zstd's window (log2 bytes) when compressing. 24 (16 MiB)
    /// keeps the compressor's and every reader's memory small; on large bundles of code the
    /// output grows by well under 1%. 27 is what clang gets with long-distance matching.
    #[arg(long = "max-window-log", value_name = "LOG", default_value_t = 24)]
    max_window_log: u32,
    /// [this tool] zstd worker threads for bundles of 32 MiB and more (default: the number
    /// of CPUs, at most 4; 1 gives exactly clang's single-threaded output).
    #[arg(long = "compression-threads", value_name = "N")]
    compression_threads: Option<u32>,
    /// [this tool] The llvm-objcopy to use for the object layout.
    #[arg(long, value_name = "PATH")]
    objcopy: Option<PathBuf>,
}

/// Accepts `-name` and `-name=value` for the long options, as LLVM's option parser does.
pub(crate) fn double_dash(args: Vec<OsString>) -> Vec<OsString> {
    args.into_iter()
        .map(|a| match a.to_str() {
            Some(s) if s.len() > 2 && s.starts_with('-') && !s.starts_with("--") => {
                let name = s[1..].split('=').next().unwrap_or("");
                // Negative numbers stay values (`-compression-level=-5` is one argument).
                if name.starts_with(|c: char| c.is_ascii_alphabetic()) {
                    OsString::from(format!("-{s}"))
                } else {
                    a
                }
            }
            _ => a,
        })
        .collect()
}

/// Writes to stdout; a reader that went away (`| head`) is not an error.
pub(crate) fn print_stdout(text: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing to stdout"),
        _ => Ok(()),
    }
}

/// Environment settings clang-offload-bundler honours, unless
/// `OFFLOAD_BUNDLER_IGNORE_ENV_VAR=1`.
struct EnvSettings {
    compress: bool,
    verbose: bool,
    level: Option<i32>,
    version: Option<u16>,
}

fn env_settings() -> EnvSettings {
    let env = offload_build::tooling::env::Env::detect();
    let get = |name: &str| env.get_untracked(name);
    if get("OFFLOAD_BUNDLER_IGNORE_ENV_VAR").is_some_and(|v| v == "1") {
        return EnvSettings {
            compress: false,
            verbose: false,
            level: None,
            version: None,
        };
    }
    EnvSettings {
        compress: get("OFFLOAD_BUNDLER_COMPRESS").is_some_and(|v| v == "1"),
        verbose: get("OFFLOAD_BUNDLER_VERBOSE").is_some_and(|v| v == "1"),
        level: get("OFFLOAD_BUNDLER_COMPRESSION_LEVEL").and_then(|v| v.parse().ok()),
        version: get("COMPRESSED_BUNDLE_FORMAT_VERSION").and_then(|v| v.parse().ok()),
    }
}

/// The checks clang-offload-bundler makes of its command line before reading any file, in its
/// order and words, so that scripts matching its messages match ours.
fn check_command_line(cli: &BundlerCli, file_type: &str) -> Result<()> {
    if !cli.input.is_empty() && !cli.inputs.is_empty() {
        bail!("-inputs and -input cannot be used together, use only -input instead");
    }
    if !cli.inputs.is_empty() {
        eprintln!("warning: -inputs is deprecated, use -input instead");
    }
    if !cli.output.is_empty() && !cli.outputs.is_empty() {
        bail!("-outputs and -output cannot be used together, use only -output instead");
    }
    if !cli.outputs.is_empty() {
        eprintln!("warning: -outputs is deprecated, use -output instead");
    }
    let inputs = cli.input.len() + cli.inputs.len();
    let outputs = cli.output.len() + cli.outputs.len();
    if cli.list {
        if cli.unbundle {
            bail!("-unbundle and -list cannot be used together");
        }
        if inputs != 1 {
            bail!("only one input file supported for -list\nnote: {inputs} given");
        }
        if outputs != 0 {
            bail!("-outputs option is invalid for -list");
        }
        if !cli.targets.is_empty() {
            bail!("-targets option is invalid for -list");
        }
        return Ok(());
    }
    if cli.check_input_archive {
        if !cli.unbundle {
            bail!("-check-input-archive cannot be used while bundling");
        }
        if file_type != "a" {
            bail!("-check-input-archive can only be used for unbundling archives (-type=a)");
        }
    }
    if outputs == 0 {
        bail!("no output file specified!");
    }
    if cli.targets.is_empty() {
        bail!("for the --targets option: must be specified at least once!");
    }
    let targets = cli.targets.len();
    if cli.unbundle {
        if inputs != 1 {
            bail!("only one input file supported in unbundling mode\nnote: {inputs} given");
        }
        if outputs != targets {
            bail!(
                "number of output files and targets should match in unbundling mode\n\
                 note: {outputs} output file(s), {targets} target(s)"
            );
        }
    } else {
        if file_type == "a" {
            bail!("Archive files are only supported for unbundling");
        }
        if outputs != 1 {
            bail!("only one output file supported in bundling mode\nnote: {outputs} given");
        }
        if inputs != targets {
            bail!(
                "number of input files and targets should match in bundling mode\n\
                 note: {inputs} input file(s), {targets} target(s)"
            );
        }
    }
    let mut hosts = 0;
    let mut hip_only = true;
    for (i, target) in cli.targets.iter().enumerate() {
        if cli.targets[..i].contains(target) {
            bail!("Duplicate targets are not allowed\nnote: {target} is given twice");
        }
        let (kind, triple) = target.split_once('-').unwrap_or((target, ""));
        let kind_known = offload_format::bundle::OFFLOAD_KINDS.contains(&kind);
        // The triple as the bundler reads it: up to four fields, the rest a target ID.
        let triple: String = triple.splitn(5, '-').take(4).collect::<Vec<_>>().join("-");
        let arch = triple.split('-').next().unwrap_or_default();
        let arch_known = offload_format::triple::is_llvm_arch(arch);
        if !kind_known || !arch_known {
            let mut message = format!("invalid target '{target}'");
            if !kind_known {
                message.push_str(&format!(", unknown offloading kind '{kind}'"));
            }
            if !arch_known {
                message.push_str(&format!(", unknown target triple '{triple}'"));
            }
            bail!("{message}\nnote: the kinds are host, openmp, hip and hipv4");
        }
        hosts += usize::from(kind == "host");
        hip_only &= kind == "hip" || kind == "hipv4";
    }
    if (cli.unbundle && hosts > 1) || (!cli.unbundle && hosts != 1 && !hip_only) {
        bail!("expecting exactly one host target but got {hosts}");
    }
    Ok(())
}

pub fn exec(args: BundleArgs) -> Result<ExitCode> {
    let mut argv = vec![OsString::from("cargo offload bundle")];
    let mut print_commands = false;
    for arg in double_dash(super::response_files::expand(args.args)?) {
        // `-###` is no name clap takes.
        if arg == "-###" || arg == "--###" {
            print_commands = true;
        } else {
            argv.push(arg);
        }
    }
    let cli = BundlerCli::parse_from(argv);
    let Some(file_type) = cli.file_type.clone() else {
        return Err(super::option_error::OptionError(
            "for the --type option: must be specified at least once!\n\
             note: -type=<i|ii|cui|hipi|d|ll|bc|s|o|a|gch|ast>"
                .to_owned(),
        )
        .into());
    };
    check_command_line(&cli, &file_type)?;
    let env = env_settings();
    let method = match cli.compression_method {
        Method::Zstd => CompressionMethod::Zstd,
        Method::Zlib => CompressionMethod::Zlib,
    };
    let compress = (cli.compress || env.compress).then(|| CompressOptions {
        version: cli
            .compression_version
            .or(env.version)
            .unwrap_or(offload_format::ccob::DEFAULT_VERSION),
        method,
        level: cli.compression_level.or(env.level),
    });
    let mut inputs = cli.input;
    inputs.extend(cli.inputs);
    let mut outputs = cli.output;
    outputs.extend(cli.outputs);
    let cfg = BundleConfig {
        file_type,
        targets: cli.targets,
        inputs,
        outputs,
        bundle_align: cli.bundle_align,
        compress,
        max_window_log: Some(cli.max_window_log),
        compression_threads: cli.compression_threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, |n| n.get().min(4) as u32)
        }),
        allow_missing_bundles: cli.allow_missing_bundles,
        check_input_archive: cli.check_input_archive,
        hip_openmp_compatible: cli.hip_openmp_compatible,
        objcopy: cli.objcopy,
        print_commands,
        verbose: cli.verbose || env.verbose,
    };
    if cli.list {
        let Some(input) = cfg.inputs.first() else {
            bail!("only one input file supported for -list");
        };
        let ids = bundle::list(&cfg.file_type, input, cfg.verbose)?;
        let mut text = String::new();
        for id in ids {
            text.push_str(&id);
            text.push('\n');
        }
        print_stdout(&text)?;
    } else if cli.unbundle {
        bundle::unbundle(&cfg)?;
    } else {
        bundle::bundle(&cfg)?;
    }
    Ok(ExitCode::SUCCESS)
}
