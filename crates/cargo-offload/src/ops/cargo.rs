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
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context, Result};
use offload_build::tooling::arch;
use offload_build::tooling::command;
use offload_build::tooling::diagnostics::{self, CargoMessage, JsonExt};
use offload_build::tooling::env::{
    Env, OFFLOAD_ARCH, OFFLOAD_CARGO_OFFLOAD, OFFLOAD_DEBUG_KERNELS, OFFLOAD_MESSAGE_DIR,
    OFFLOAD_NATIVE_ARCH, OFFLOAD_PREBUILT, OFFLOAD_SANITIZE_KERNELS,
};
use offload_format::DeviceFamily;
use offload_tools::inspect::{InspectedImage, PtxasFallback, inspect_with};

use super::build_status::{OFFLOAD_STATUS_DIR, StatusWatcher, Style};
use super::command_line::{CompileOptions, Debugger, NativeGpus, RunMode, Sanitize, canonical};

/// compute-sanitizer's tools, the first the default of `--sanitize` on an NVIDIA machine.
pub const SANITIZER_TOOLS: [&str; 4] = ["memcheck", "racecheck", "initcheck", "synccheck"];

/// `--sanitize=address`: the program and its CPU device's image built with AddressSanitizer,
/// run on the CPU device.
pub const ADDRESS_SANITIZER: &str = "address";

/// The list that comes before the package metadata, with its origin as build scripts name
/// it: `--offload-arch`, else `OFFLOAD_ARCH`.
fn explicit_list(archs: &[String], env: &Env) -> Option<(String, &'static str)> {
    if !archs.is_empty() {
        return Some((archs.join(","), "--offload-arch"));
    }
    env.get_untracked(OFFLOAD_ARCH)
        .map(|list| (list, "the OFFLOAD_ARCH environment variable"))
}

/// Runs `cargo SUBCOMMAND` as `options` ask, in the run mode they choose
/// ([`CompileOptions::run_mode`]): the action graphs printed, cargo's own command with the
/// offload architectures handed to the build scripts, or the program built and run under
/// mpirun, a debugger or a sanitizer.
pub fn run_cargo(subcommand: &str, options: &CompileOptions) -> Result<ExitCode> {
    match options.run_mode(subcommand)? {
        RunMode::Phases => print_phases(options),
        RunMode::Cargo => Ok(cargo(subcommand, options, &Runner::None)?.0),
        RunMode::Mpirun(ranks) => run_under_mpirun(ranks, options),
        RunMode::Debugger(debugger) => run_under_debugger(&debugger, options),
        RunMode::Sanitize(sanitize) => run_sanitized(&sanitize, options),
    }
}

/// `--print-phases`: each host crate's action graph, for the architectures given
/// (`--offload-arch`, else `OFFLOAD_ARCH`, resolved), else each crate's own; nothing built.
fn print_phases(options: &CompileOptions) -> Result<ExitCode> {
    let env = Env::detect();
    let native = NativeGpus::default();
    let archs = explicit_list(&options.offload.archs, &env)
        .map(|(list, origin)| native.resolve(&list, origin, options))
        .transpose()?;
    super::phases::print(options, archs.as_deref(), &native, &env)
}

/// `cargo offload run --sanitize[=TOOL]`: compute-sanitizer's tool where one is named or the
/// driver reports an NVIDIA GPU, else AddressSanitizer on the CPU device.
fn run_sanitized(sanitize: &Sanitize, options: &CompileOptions) -> Result<ExitCode> {
    // The GPUs are probed once, and not for AddressSanitizer named.
    let tool = match sanitize {
        Sanitize::Tool(tool) if tool == ADDRESS_SANITIZER => {
            return run_under_address_sanitizer(options);
        }
        Sanitize::Tool(tool) => tool.as_str(),
        Sanitize::ForThisMachine => SANITIZER_TOOLS[0],
    };
    match (has_nvidia_gpu(), sanitize) {
        (false, Sanitize::ForThisMachine) => run_under_address_sanitizer(options),
        (nvidia, _) => run_under_sanitizer(tool, nvidia, options),
    }
}

/// The program a `run` starts the built executable under, which decides how it is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Runner {
    /// None: cargo runs or builds as asked.
    None,
    /// A debugger: the CPU device's images are built for it ([`OFFLOAD_DEBUG_KERNELS`]).
    Debugger,
    /// compute-sanitizer: the images are built as for a plain run.
    Sanitizer,
    /// mpirun: the images are built as for a plain run.
    Mpirun,
    /// A profiler (`cargo offload profile`): the images are built as for a plain run.
    Profiler,
    /// AddressSanitizer: the host program and the CPU device's image built with it by the
    /// pinned nightly (`rustc`), the CPU device's alone.
    AddressSanitizer {
        /// The nightly's rustc, which builds the host crates.
        rustc: PathBuf,
    },
}

/// The one executable a `run` under `runner` builds (`cargo build` with the run's build
/// arguments) and the arguments after `--` for it, or the build's failing exit code.
pub(crate) fn build_the_executable(
    runner_name: &str,
    runner: Runner,
    options: &CompileOptions,
) -> Result<std::result::Result<(PathBuf, Vec<OsString>), ExitCode>> {
    if !options.message_format.is_empty() {
        anyhow::bail!("{runner_name} shows the build as cargo does: leave out `--message-format`");
    }
    let (status, executables) = cargo("build", &options.without_program_args(), &runner)?;
    if status != ExitCode::SUCCESS {
        return Ok(Err(status));
    }
    let program_args = options.program_args.clone().unwrap_or_default();
    match executables.as_slice() {
        [one] => Ok(Ok((one.clone(), program_args))),
        [] => anyhow::bail!("the build made no executable to run under {runner_name}"),
        several => anyhow::bail!(
            "the build made {} executables ({}): choose one with `--bin NAME`",
            several.len(),
            several
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `cargo offload run --sanitize[=TOOL]`: the program built as for `run`, then run under
/// NVIDIA's compute-sanitizer with `tool` (memory errors, races, reads of uninitialized device
/// memory, barrier misuse), its exit code 1 when the tool reports an error. It checks what runs
/// on a CUDA GPU, so it needs one (`nvidia`: the driver reports one).
fn run_under_sanitizer(tool: &str, nvidia: bool, options: &CompileOptions) -> Result<ExitCode> {
    if !SANITIZER_TOOLS.contains(&tool) {
        anyhow::bail!(
            "`--sanitize={tool}`: the tools are compute-sanitizer's {} (an NVIDIA GPU) and \
             `{ADDRESS_SANITIZER}` (AddressSanitizer, the CPU device)",
            SANITIZER_TOOLS.join(", ")
        );
    }
    let sanitizer = offload_toolchain::Tool::ComputeSanitizer.find_newest()?;
    if !nvidia {
        anyhow::bail!(
            "`--sanitize={tool}` runs the program under compute-sanitizer, which checks what \
             runs on an NVIDIA GPU, and this machine has none that its driver reports: \
             `--sanitize={ADDRESS_SANITIZER}` checks the CPU device's kernels"
        );
    }
    let (executable, program_args) =
        match build_the_executable("`--sanitize`", Runner::Sanitizer, options)? {
            Ok(built) => built,
            Err(status) => return Ok(status),
        };
    let mut cmd = Command::new(&sanitizer);
    cmd.args(["--tool", tool, "--error-exitcode", "1"]);
    // Debian's compute-sanitizer is told where its libraries are, and the loader too (one of
    // them needs another, by name alone); NVIDIA's finds them beside it.
    if let Some(injection) = offload_toolchain::compute_sanitizer_libraries(&sanitizer)
        && Some(injection.as_path()) != sanitizer.parent()
    {
        let inherited = std::env::var_os("LD_LIBRARY_PATH").unwrap_or_default();
        let library_path =
            std::iter::once(injection.clone()).chain(std::env::split_paths(&inherited));
        cmd.env("LD_LIBRARY_PATH", std::env::join_paths(library_path)?);
        cmd.arg("--injection-path").arg(injection);
    }
    cmd.arg(&executable).args(&program_args);
    let status = command::status_interactive(&mut cmd)
        .with_context(|| format!("could not run compute-sanitizer ({})", sanitizer.display()))?;
    Ok(exit_code(status))
}

/// `cargo offload run --np N`: the program built as for `run`, then started as `N` MPI ranks
/// by `mpirun -np N` (found as every tool is: `OFFLOAD_MPIRUN`, then `PATH`), each rank
/// making its communicator with `offload_rt::collective::Communicator::from_mpi`. Open MPI's
/// `mpirun` is also given `--oversubscribe` when `N` is more than the machine's cores (it
/// refuses otherwise); its exit code is the program's.
fn run_under_mpirun(ranks: u32, options: &CompileOptions) -> Result<ExitCode> {
    if ranks == 0 {
        anyhow::bail!("`--np 0`: a program runs as one rank or more");
    }
    let mpirun = offload_toolchain::Tool::Mpirun.find()?;
    let (executable, program_args) = match build_the_executable("`--np`", Runner::Mpirun, options)?
    {
        Ok(built) => built,
        Err(status) => return Ok(status),
    };
    let mut cmd = Command::new(&mpirun);
    cmd.arg("-np").arg(ranks.to_string());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if ranks as usize > cores && is_open_mpi(&mpirun) {
        cmd.arg("--oversubscribe");
    }
    cmd.arg(&executable).args(&program_args);
    let status = command::status_interactive(&mut cmd)
        .with_context(|| format!("could not run mpirun ({})", mpirun.display()))?;
    Ok(exit_code(status))
}

/// Whether `mpirun` is Open MPI's, by what its `--version` says.
fn is_open_mpi(mpirun: &std::path::Path) -> bool {
    command::run(Command::new(mpirun).arg("--version")).is_ok_and(|out| {
        let text = String::from_utf8_lossy(&out.stdout);
        text.contains("Open MPI") || text.contains("OpenRTE")
    })
}

/// Whether the driver reports an NVIDIA GPU here.
fn has_nvidia_gpu() -> bool {
    NativeGpus::default()
        .get()
        .iter()
        .any(|a| a.family() == DeviceFamily::Nvidia)
}

/// `cargo offload run --sanitize=address`: the program and its CPU device's images built with
/// AddressSanitizer by the pinned nightly, for the host's own triple (so that build scripts
/// and proc macros are built as usual), then run on the CPU device (`OFFLOAD_DEVICE=cpu`): an
/// out-of-bounds access, a use after free or a double free in a kernel or in the host code is
/// reported with its stack, and the exit code is AddressSanitizer's (1).
fn run_under_address_sanitizer(options: &CompileOptions) -> Result<ExitCode> {
    let env = Env::detect();
    let nightly = env.nightly_toolchain();
    if !offload_build::tooling::toolchain::nightly_usable(&env) {
        anyhow::bail!(
            "`--sanitize={ADDRESS_SANITIZER}` builds with the nightly `{nightly}` \
             (`-Zsanitizer=address`), which does not run here: `rustup toolchain install \
             {nightly}`"
        );
    }
    let out = command::run(offload_toolchain::Tool::Rustup.command().args([
        "which",
        "--toolchain",
        &nightly,
        "rustc",
    ]))
    .with_context(|| format!("finding the rustc of `{nightly}`"))?;
    let rustc = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let options = options.with_default_target(arch::host_triple());
    let runner = Runner::AddressSanitizer { rustc };
    let (executable, program_args) =
        match build_the_executable("`--sanitize=address`", runner, &options)? {
            Ok(built) => built,
            Err(status) => return Ok(status),
        };
    let mut cmd = Command::new(&executable);
    cmd.args(&program_args).env("OFFLOAD_DEVICE", "cpu");
    let status = command::status_interactive(&mut cmd)
        .with_context(|| format!("could not run {}", executable.display()))?;
    Ok(exit_code(status))
}

/// The debugger of `--debugger` without a program: where the program will run its kernels on
/// a GPU (the driver reports one, and `OFFLOAD_DEVICE`, `device_choice` here, does not name
/// the CPU device), its vendor's gdb when `find` finds it (`cuda-gdb` for NVIDIA, `rocgdb`
/// for AMD, in the order of `gpus`), which stops in the GPU's kernels; else `None`, for gdb,
/// which stops in the CPU device's.
pub fn default_debugger(
    device_choice: Option<&str>,
    gpus: &[DeviceFamily],
    find: impl Fn(&str) -> Option<PathBuf>,
) -> Option<PathBuf> {
    if device_choice.is_some_and(|d| d.trim().starts_with("cpu")) {
        return None;
    }
    gpus.iter().find_map(|family| match family {
        DeviceFamily::Nvidia => find("cuda-gdb"),
        DeviceFamily::Amd => find("rocgdb"),
        DeviceFamily::Cpu => None,
    })
}

/// `program` on `PATH`, else in the vendor's own place (`/usr/local/cuda/bin`,
/// `/opt/rocm/bin`).
fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/cuda/bin", "/opt/rocm/bin"].map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// `cargo offload run --debugger`: the program built with its CPU device's images made for a
/// debugger ([`OFFLOAD_DEBUG_KERNELS`]), then run under `debugger` with the images written
/// where it can read them (`OFFLOAD_CPU_IMAGE_DIR`), so that a breakpoint on a kernel's line
/// stops in a kernel thread and its locals can be printed.
fn run_under_debugger(debugger: &Debugger, options: &CompileOptions) -> Result<ExitCode> {
    let (executable, program_args) =
        match build_the_executable("`--debugger`", Runner::Debugger, options)? {
            Ok(built) => built,
            Err(status) => return Ok(status),
        };
    let images = executable
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .join("offload-cpu-images");
    // gdb is found as every tool is (`OFFLOAD_GDB`, then `PATH`), its error naming the
    // package to install; another program named is run as named.
    let program = match debugger {
        Debugger::ForThisMachine => {
            let families: Vec<DeviceFamily> = NativeGpus::default()
                .get()
                .iter()
                .map(|a| a.family())
                .collect();
            let device = std::env::var("OFFLOAD_DEVICE").ok();
            match default_debugger(device.as_deref(), &families, find_program) {
                Some(vendors) => vendors,
                None => offload_toolchain::Tool::Gdb.find()?,
            }
        }
        Debugger::Program(name) if name == "gdb" => offload_toolchain::Tool::Gdb.find()?,
        Debugger::Program(name) => PathBuf::from(name),
    };
    let debugger = program.display().to_string();
    let mut cmd = Command::new(&program);
    // lldb takes the program after `--`; gdb, cuda-gdb and rocgdb after `--args`.
    let lldb = program
        .file_name()
        .is_some_and(|name| name.to_string_lossy().contains("lldb"));
    cmd.arg(if lldb { "--" } else { "--args" })
        .arg(&executable)
        .args(&program_args)
        .env("OFFLOAD_CPU_IMAGE_DIR", &images);
    let status = command::status_interactive(&mut cmd).with_context(|| {
        format!("could not run the debugger `{debugger}` (`--debugger=PROGRAM` names another)")
    })?;
    Ok(exit_code(status))
}

/// The exit code that passes a child's exit status on: its code (255 at most), a failure when
/// a signal ended it.
pub fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::FAILURE,
    }
}

/// `cargo SUBCOMMAND` as `options` ask, with the offload architectures handed to the build
/// scripts and the build prepared for `runner`; its exit code and the executables the build
/// made for a `runner` (read from cargo's messages, which it then asks for even under `-q`).
fn cargo(
    subcommand: &str,
    options: &CompileOptions,
    runner: &Runner,
) -> Result<(ExitCode, Vec<PathBuf>)> {
    let env = Env::detect();
    let native = NativeGpus::default();
    let offload_arch = offload_arch_for_cargo(options, &native, &env)?;
    let cargo = env
        .get_untracked("CARGO")
        .unwrap_or_else(|| "cargo".to_owned());
    // `cargo test` of a host crate tests its kernel crates too (their host builds' tests),
    // where they are members of the workspace. A workspace cargo cannot read is cargo's to
    // report.
    let tested;
    let options = if subcommand == "test" {
        let kernels = offload_build::tooling::workspace::kernel_crates_to_test(
            &options.selection,
            env.get_untracked("CARGO").map(PathBuf::from).as_deref(),
        )
        .unwrap_or_default();
        tested = options.with_packages(&kernels);
        &tested
    } else {
        options
    };
    let mut cmd = Command::new(&cargo);
    cmd.arg(subcommand);
    target_dir_as_argument(&mut cmd, options, |name| std::env::var_os(name));
    cmd.args(options.to_cargo_args());
    if let Some(list) = offload_arch {
        cmd.env(OFFLOAD_ARCH, list);
    }
    if let Some(value) = native.env_value() {
        cmd.env(OFFLOAD_NATIVE_ARCH, value);
    }
    runner.prepare(&mut cmd, &env);
    // Build scripts find the device link executable installed beside this one first.
    if let Ok(me) = std::env::current_exe() {
        cmd.env(OFFLOAD_CARGO_OFFLOAD, me);
    }
    let messages = Messages {
        json: options.wants_json_messages(),
        summarize: subcommand == "build"
            && !options.wants_json_messages()
            && (*runner != Runner::None || !options.quiet && options.message_format.is_empty()),
        style: Style::for_stderr_with(&env, options.color.as_deref()),
        quiet: options.quiet,
        verbose: options.verbose,
    };
    messages
        .run(&mut cmd)
        .with_context(|| format!("could not run `{cargo} {subcommand}`"))
}

/// The `OFFLOAD_ARCH` the build scripts get: the list of `--offload-arch`, or of an
/// `OFFLOAD_ARCH` naming `native`, resolved and canonical; `None` leaves `OFFLOAD_ARCH` and
/// the packages' lists to them. Only the list is checked here: the toolchain is checked by the
/// build scripts, when and only when a device build runs, so a no-op build costs what a no-op
/// `cargo build` costs.
fn offload_arch_for_cargo(
    options: &CompileOptions,
    native: &NativeGpus,
    env: &Env,
) -> Result<Option<String>> {
    Ok(match explicit_list(&options.offload.archs, env) {
        Some((list, origin))
            if !options.offload.archs.is_empty() || arch::mentions_native(&list) =>
        {
            Some(canonical(&native.resolve(&list, origin, options)?))
        }
        Some(_) => None,
        None => {
            // `native` in a package's metadata is resolved by its build script from
            // OFFLOAD_NATIVE_ARCH: probed only when a workspace member names it (`cargo
            // metadata --no-deps` reads the manifests alone). A workspace that cannot be read
            // is cargo's to report.
            let cargo = env.get_untracked("CARGO").map(PathBuf::from);
            let lists = offload_build::tooling::workspace::workspace_archs(
                options.selection.manifest_path.as_deref(),
                cargo.as_deref(),
            )
            .unwrap_or_default();
            if lists.iter().any(|(_, list)| arch::mentions_native(list)) {
                native.get();
            }
            None
        }
    })
}

impl Runner {
    /// The build's environment for this runner.
    fn prepare(&self, cmd: &mut Command, env: &Env) {
        match self {
            Runner::Debugger => {
                cmd.env(OFFLOAD_DEBUG_KERNELS, "1");
            }
            Runner::AddressSanitizer { rustc } => {
                // The CPU device alone, built from source: a prebuilt bundle's image and the
                // GPUs' are not instrumented. The host crates' flags reach only the `--target`
                // crates; the program exports the sanitizer's runtime to the image it loads.
                let mut rustflags = env.get_untracked("RUSTFLAGS").unwrap_or_default();
                rustflags.push_str(" -Zsanitizer=address -Clink-arg=-Wl,--export-dynamic");
                cmd.env(OFFLOAD_ARCH, "host")
                    .env(OFFLOAD_SANITIZE_KERNELS, ADDRESS_SANITIZER)
                    .env(OFFLOAD_PREBUILT, "never")
                    .env("RUSTC", rustc)
                    .env("RUSTFLAGS", rustflags.trim_start());
            }
            Runner::None | Runner::Sanitizer | Runner::Mpirun | Runner::Profiler => {}
        }
    }
}

/// How cargo's messages are read while it runs.
struct Messages {
    /// Asked for as JSON: passed on, with an `offload-image` message per embedded image.
    json: bool,
    /// Read here for the diagnostics, `Embedded` lines and executables (`build`).
    summarize: bool,
    style: Style,
    quiet: bool,
    verbose: bool,
}

impl Messages {
    /// Runs `cmd` (cargo), reading its messages as `self` says; its exit code, and the
    /// executables it built when summarizing.
    fn run(&self, cmd: &mut Command) -> Result<(ExitCode, Vec<PathBuf>)> {
        let Messages {
            json,
            summarize,
            style,
            quiet,
            verbose,
        } = *self;
        // The build scripts hand over their status lines and device diagnostics through here.
        let message_dir = tempfile::tempdir().context("creating a directory for build messages")?;
        let _watcher = (!quiet).then(|| {
            cmd.env(OFFLOAD_STATUS_DIR, message_dir.path());
            StatusWatcher::start(message_dir.path(), style)
        });
        if summarize {
            // Artifacts and diagnostics come back as JSON on stdout, the diagnostics printed
            // here as cargo would, so the device builds' can be told from the host's; cargo's
            // status lines stay on stderr.
            cmd.arg(if style.color {
                "--message-format=json-diagnostic-rendered-ansi"
            } else {
                "--message-format=json"
            });
        }
        let mut built_executables = Vec::new();
        let status = if summarize || json {
            cmd.env(OFFLOAD_MESSAGE_DIR, message_dir.path());
            // Cargo's messages come through our hands: passed on with an `offload-image` message
            // per embedded image (JSON), or read for the diagnostics and `Embedded` lines (human).
            cmd.stdout(Stdio::piped());
            let mut child = command::spawn(cmd)?;
            let stdout = child.stdout.take().context("cargo's standard output")?;
            let mut out = std::io::stdout().lock();
            let mut summaries = Vec::new();
            let mut seen = std::collections::HashSet::new();
            let mut finished = None;
            let mut kept = Vec::new();
            for line in BufReader::new(stdout).lines() {
                let line = line.context("reading cargo's messages")?;
                let message = CargoMessage::parse(&line);
                if let Some(m) = message.as_ref().filter(|m| m.is("compiler-message")) {
                    seen.insert(diagnostics::identity(m));
                }
                // A fresh build script's device diagnostics, kept from its last run.
                if let Some(out_dir) = message
                    .as_ref()
                    .filter(|m| m.is("build-script-executed"))
                    .and_then(|m| m.json().str_at(&["out_dir"]))
                {
                    kept.push(std::path::Path::new(out_dir).join(diagnostics::DIAGNOSTICS_FILE));
                }
                if json {
                    if message.as_ref().is_some_and(|m| m.is("build-finished")) {
                        finished = Some(line);
                        continue;
                    }
                    writeln!(out, "{line}")?;
                    for image in message.iter().flat_map(image_messages) {
                        writeln!(out, "{image}")?;
                    }
                } else {
                    if let Some(mut diagnostic) =
                        message.clone().filter(|m| m.is("compiler-message"))
                    {
                        diagnostics::add_help(&mut diagnostic);
                        if let Some(text) = diagnostics::rendered(&diagnostic) {
                            eprint!("{text}");
                        }
                    }
                    summaries.extend(message.as_ref().and_then(embedded_summary));
                    if verbose {
                        summaries.extend(message.as_ref().and_then(occupancy_summary));
                    }
                    built_executables.extend(
                        message
                            .as_ref()
                            .filter(|m| m.is("compiler-artifact"))
                            .filter(|m| m.json().strs_at(&["target", "kind"]).contains(&"bin"))
                            .and_then(|m| m.json().str_at(&["executable"]))
                            .map(PathBuf::from),
                    );
                }
            }
            let status = child.wait();
            let device = device_messages(message_dir.path(), &kept, &seen);
            if json {
                // Before `build-finished`, which ends what some readers wait for.
                for message in &device {
                    writeln!(out, "{message}")?;
                }
                if let Some(line) = finished {
                    writeln!(out, "{line}")?;
                }
            } else {
                let mut err = std::io::stderr().lock();
                // A failed device build's errors (and their notes) are already on stderr, in
                // cargo's report.
                for message in device
                    .iter()
                    .filter(|m| diagnostics::level(m) == Some("warning"))
                {
                    write_device_diagnostic(&mut err, message)?;
                }
            }
            if status.as_ref().is_ok_and(|s| s.success()) && !summaries.is_empty() {
                let mut err = std::io::stderr().lock();
                for line in summaries {
                    match line.strip_prefix(OCCUPANCY_MARK) {
                        Some(table) => write!(err, "{table}")?,
                        None => writeln!(err, "{}", style.status("Embedded", &line))?,
                    }
                }
            }
            status.map_err(anyhow::Error::from)
        } else {
            command::status_interactive(cmd).map_err(anyhow::Error::from)
        }?;
        Ok((exit_code(status), built_executables))
    }
}

/// The device builds' `compiler-message`s: those the build scripts that ran left in `dir`,
/// then those fresh ones kept (`kept`), less those the host build already gave (`seen`, by
/// [`diagnostics::identity`]) and those two build scripts both gave (a kernel crate of two
/// host crates).
fn device_messages(
    dir: &std::path::Path,
    kept: &[std::path::PathBuf],
    seen: &std::collections::HashSet<String>,
) -> Vec<CargoMessage> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    files.extend(kept.iter().cloned());
    let mut seen = seen.clone();
    let mut out = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for line in text.lines() {
            let Some(message) = CargoMessage::parse(line) else {
                continue;
            };
            if seen.insert(diagnostics::identity(&message)) {
                out.push(message);
            }
        }
    }
    out
}

/// A device build's diagnostic as cargo prints a host one, with a note naming the
/// architectures whose builds gave it.
fn write_device_diagnostic(err: &mut impl Write, message: &CargoMessage) -> std::io::Result<()> {
    match diagnostics::render_device(message) {
        Some(text) => write!(err, "{text}"),
        None => Ok(()),
    }
}

/// The variables that name cargo's target directory, the first outranking the second.
const TARGET_DIR_VARIABLES: [&str; 2] = ["CARGO_TARGET_DIR", "CARGO_BUILD_TARGET_DIR"];

/// Passes the target directory the environment names (`CARGO_TARGET_DIR`, else
/// `CARGO_BUILD_TARGET_DIR`; `var` reads a variable) to `cmd` as `--target-dir` instead, unless
/// `options` name one, and keeps both variables from cargo. Cargo hands its environment to
/// every rustc it runs, and sccache keys each compile on every `CARGO_*` variable: with the
/// variable, a build in another target directory missed for every host crate (BENCHMARKS.md,
/// "sccache across target directories"). Cargo builds in the same directory either way: the
/// flag outranks both variables, and a relative path is taken from the current directory in
/// all three. Build scripts and the programs cargo runs no longer see the variables. An empty
/// variable is left to cargo to report.
fn target_dir_as_argument(
    cmd: &mut Command,
    options: &CompileOptions,
    var: impl Fn(&str) -> Option<OsString>,
) {
    let named: Vec<(&str, OsString)> = TARGET_DIR_VARIABLES
        .iter()
        .filter_map(|&name| var(name).map(|value| (name, value)))
        .collect();
    if named.iter().any(|(_, value)| value.is_empty()) {
        return;
    }
    if let Some((_, dir)) = named.first()
        && options.target_dir.is_none()
    {
        cmd.arg("--target-dir").arg(dir);
    }
    for (name, _) in &named {
        cmd.env_remove(name);
    }
}

/// For a `compiler-artifact` message of a linked output that embeds device images, one line
/// naming the artifact and its images by target (the arch, else the triple): `demo (4 device
/// images: sm_80 cubin+ptx, gfx90a elf, host elf)`; with images of several modules, each
/// module's targets after its name: `demo (5 device images; demo_kernels: sm_80 cubin+ptx,
/// host elf; scale: sm_80 cubin+ptx)`.
fn embedded_summary(message: &CargoMessage) -> Option<String> {
    /// Each target (arch or triple) with the kinds of its images.
    type TargetKinds<'a> = Vec<(&'a str, Vec<&'a str>)>;
    let (file, images) = artifact_images(message).into_iter().next()?;
    // module -> [(target, kinds)], in the order the images stand.
    let mut modules: Vec<(&str, TargetKinds)> = Vec::new();
    for image in &images {
        let module = image.module.as_deref().unwrap_or("");
        // clang's OpenMP images for a CPU name no arch, only their triple.
        let target = if image.arch.is_empty() {
            image.triple.as_str()
        } else {
            image.arch.as_str()
        };
        let targets = match modules.iter_mut().find(|(m, _)| *m == module) {
            Some((_, targets)) => targets,
            None => {
                modules.push((module, Vec::new()));
                &mut modules.last_mut()?.1
            }
        };
        match targets.iter_mut().find(|(t, _)| *t == target) {
            Some((_, kinds)) => kinds.push(&image.kind),
            None => targets.push((target, vec![&image.kind])),
        }
    }
    let list = |targets: &TargetKinds| {
        targets
            .iter()
            .map(|(target, kinds)| format!("{target} {}", kinds.join("+")))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let name = std::path::Path::new(file)
        .file_name()
        .map_or(file.to_owned(), |n| n.to_string_lossy().into_owned());
    let count = format!(
        "{} device image{}",
        images.len(),
        if images.len() == 1 { "" } else { "s" }
    );
    Some(match modules.as_slice() {
        [(_, targets)] => format!("{name} ({count}: {})", list(targets)),
        _ => {
            let per_module: Vec<String> = modules
                .iter()
                .map(|(module, targets)| format!("{module}: {}", list(targets)))
                .collect();
            format!("{name} ({count}; {})", per_module.join("; "))
        }
    })
}

/// What starts an occupancy table among the summary lines, which are otherwise `Embedded`
/// lines.
const OCCUPANCY_MARK: &str = "\0occupancy";

/// With `--verbose`, for a `compiler-artifact` message of a linked output that embeds GPU
/// images, the occupancy of each kernel on each architecture (as `inspect --occupancy` prints
/// it, blocks of 256 threads where a kernel has no launch bound), after [`OCCUPANCY_MARK`].
fn occupancy_summary(message: &CargoMessage) -> Option<String> {
    let (_, mut images) = artifact_images(message).into_iter().next()?;
    let options = offload_tools::inspect::OccupancyOptions {
        block_size: None,
        dynamic_shared_bytes: 0,
    };
    offload_tools::inspect::add_occupancy(&mut images, &options);
    let mut table = String::new();
    offload_tools::inspect::render_occupancy(&mut table, &images);
    (!table.is_empty()).then(|| format!("{OCCUPANCY_MARK}{}", table.trim_start_matches('\n')))
}

/// The `offload-image` messages for a `compiler-artifact` message whose files embed device
/// images (none for other messages, or files without images).
fn image_messages(message: &CargoMessage) -> Vec<String> {
    let mut out = Vec::new();
    for (file, images) in artifact_images(message) {
        for image in images {
            out.push(
                serde_json::json!({
                    "reason": "offload-image",
                    "package_id": message.json().str_at(&["package_id"]),
                    "artifact": file,
                    "image": image,
                })
                .to_string(),
            );
        }
    }
    out
}

/// The linked outputs of a `compiler-artifact` message that embed device images, with their
/// images (nothing for other messages). This runs after every build, no-op builds included,
/// so it runs no `ptxas`: an image's resource figures are those the build recorded in it.
fn artifact_images(message: &CargoMessage) -> Vec<(&str, Vec<InspectedImage>)> {
    if !message.is("compiler-artifact") {
        return Vec::new();
    }
    message
        .json()
        .strs_at(&["filenames"])
        .into_iter()
        // Only linked outputs carry the `.llvm.offloading` section; an rlib's does not count.
        .filter(|f| !(f.ends_with(".rlib") || f.ends_with(".rmeta") || f.ends_with(".d")))
        .filter_map(|f| {
            let images = inspect_with(&std::fs::read(f).ok()?, PtxasFallback::Never).ok()?;
            (!images.is_empty()).then_some((f, images))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_directory_of_the_environment_reaches_cargo_as_its_flag() {
        let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let run = |args: &[OsString], vars: &[(&str, &str)]| {
            let mut cmd = Command::new("cargo");
            cmd.arg("build");
            let options = CompileOptions::parse(args.to_vec()).unwrap();
            target_dir_as_argument(&mut cmd, &options, |name| {
                vars.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| OsString::from(v))
            });
            let args: Vec<String> = cmd
                .get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            let mut envs: Vec<(String, Option<String>)> = cmd
                .get_envs()
                .map(|(k, v)| {
                    (
                        k.to_string_lossy().into_owned(),
                        v.map(|v| v.to_string_lossy().into_owned()),
                    )
                })
                .collect();
            envs.sort();
            (args, envs)
        };
        let removed = |names: &[&str]| {
            names
                .iter()
                .map(|n| ((*n).to_owned(), None))
                .collect::<Vec<_>>()
        };
        // The variable becomes the flag, and cargo does not see it.
        assert_eq!(
            run(&os(&["--release"]), &[("CARGO_TARGET_DIR", "t/a")]),
            (
                vec!["build".into(), "--target-dir".into(), "t/a".into()],
                removed(&["CARGO_TARGET_DIR"])
            )
        );
        // CARGO_TARGET_DIR outranks CARGO_BUILD_TARGET_DIR, as in cargo.
        let both = [("CARGO_TARGET_DIR", "/a"), ("CARGO_BUILD_TARGET_DIR", "/b")];
        assert_eq!(
            run(&[], &both),
            (
                vec!["build".into(), "--target-dir".into(), "/a".into()],
                removed(&["CARGO_BUILD_TARGET_DIR", "CARGO_TARGET_DIR"])
            )
        );
        // The flag given outranks both: only the variables go.
        for args in [&["--target-dir", "/c"][..], &["--target-dir=/c"]] {
            assert_eq!(
                run(&os(args), &both),
                (
                    vec!["build".into()],
                    removed(&["CARGO_BUILD_TARGET_DIR", "CARGO_TARGET_DIR"])
                )
            );
        }
        // A flag after `--` is the program's.
        assert_eq!(
            run(&os(&["--", "--target-dir", "/c"]), &both).0,
            ["build", "--target-dir", "/a"]
        );
        // Neither set, or one empty (cargo's to report): nothing changes.
        assert_eq!(run(&[], &[]), (vec!["build".into()], vec![]));
        assert_eq!(
            run(&[], &[("CARGO_TARGET_DIR", "")]),
            (vec!["build".into()], vec![])
        );
    }

    #[test]
    fn the_default_debugger_is_the_gpu_vendors_where_kernels_run_on_its_gpu() {
        let installed = |names: &'static [&'static str]| {
            move |program: &str| {
                names
                    .contains(&program)
                    .then(|| PathBuf::from(format!("/opt/bin/{program}")))
            }
        };
        let both = installed(&["cuda-gdb", "rocgdb"]);
        let nvidia = [DeviceFamily::Nvidia];
        assert_eq!(
            default_debugger(None, &nvidia, both),
            Some(PathBuf::from("/opt/bin/cuda-gdb"))
        );
        assert_eq!(
            default_debugger(Some("cuda:0"), &[DeviceFamily::Amd], both),
            Some(PathBuf::from("/opt/bin/rocgdb"))
        );
        // The CPU device chosen, no GPU, or no vendor's gdb installed: gdb.
        assert_eq!(default_debugger(Some("cpu"), &nvidia, both), None);
        assert_eq!(default_debugger(None, &[], both), None);
        assert_eq!(
            default_debugger(None, &nvidia, installed(&["rocgdb"])),
            None
        );
    }

    /// As the message loop calls it: a line that is not a JSON message gives nothing.
    fn image_messages(line: &str) -> Vec<String> {
        CargoMessage::parse(line)
            .map(|m| super::image_messages(&m))
            .unwrap_or_default()
    }

    /// As the message loop calls it, on one line of cargo's output.
    fn embedded_summary(line: &str) -> Option<String> {
        super::embedded_summary(&CargoMessage::parse(line)?)
    }

    #[test]
    fn artifacts_with_images_get_one_message_per_image() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = offload_format::OffloadBinary::new(
            offload_format::ImageKind::Ptx,
            offload_format::OffloadKind::Cuda,
            &b".version 7.8\n"[..],
        )
        .with_string("triple", "nvptx64-nvidia-cuda")
        .with_string("arch", "sm_80")
        .with_string("offload.module", "k")
        .with_string("offload.kernels", "saxpy")
        .with_string(
            "offload.kernel-resources",
            "saxpy:registers=8,shared=0,stack=0,spill-stores=0,spill-loads=0,constant=372",
        )
        .to_bytes();
        let file = dir.path().join("app.offload");
        std::fs::write(&file, bundle).unwrap();
        let artifact = serde_json::json!({
            "reason": "compiler-artifact",
            "package_id": "app 0.1.0",
            "filenames": [file, dir.path().join("libapp.rlib")],
        })
        .to_string();
        let messages = image_messages(&artifact);
        assert_eq!(messages.len(), 1);
        let m: serde_json::Value = serde_json::from_str(&messages[0]).unwrap();
        assert_eq!(m["reason"], "offload-image");
        assert_eq!(m["package_id"], "app 0.1.0");
        assert_eq!(m["image"]["arch"], "sm_80");
        assert_eq!(m["image"]["kernels"][0], "saxpy");
        // The figures the build recorded, read without running ptxas.
        assert_eq!(m["image"]["resources_from"], "recorded");
        assert_eq!(m["image"]["resources"][0]["registers"], 8);
        assert_eq!(m["image"]["resources"][0]["constant_bytes"], 372);
        assert!(image_messages(r#"{"reason":"build-finished","success":true}"#).is_empty());
        let executable = serde_json::json!({
            "reason": "compiler-artifact",
            "executable": file,
            "filenames": [file],
        })
        .to_string();
        assert_eq!(
            embedded_summary(&executable).as_deref(),
            Some("app.offload (1 device image: sm_80 ptx)")
        );
        assert_eq!(
            Style { color: false }.status("Embedded", "x"),
            "    Embedded x"
        );
        // `--verbose`: the kernels' occupancy on each architecture.
        let occupancy = occupancy_summary(&CargoMessage::parse(&executable).unwrap()).unwrap();
        let table = occupancy.strip_prefix(OCCUPANCY_MARK).unwrap();
        assert!(table.starts_with("Occupancy ("), "{table}");
        assert!(
            table.contains("sm_80  saxpy   256    8 blocks/SM"),
            "{table}"
        );
        assert!(table.contains("100.0%"), "{table}");
        assert!(image_messages("not json").is_empty());
    }

    #[test]
    fn the_summary_names_each_module_when_there_are_several() {
        let image = |kind, offload_kind, arch: &str, module: &str| {
            offload_format::OffloadBinary::new(kind, offload_kind, &b"\0"[..])
                .with_string("triple", "t")
                .with_string("arch", arch)
                .with_string("offload.module", module)
                .to_bytes()
        };
        use offload_format::{ImageKind, OffloadKind};
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mixed");
        let bytes = [
            image(ImageKind::Cubin, OffloadKind::Cuda, "sm_80", "k"),
            image(ImageKind::Ptx, OffloadKind::Cuda, "sm_80", "k"),
            image(ImageKind::Object, OffloadKind::OpenMp, "host", "k"),
            image(ImageKind::Cubin, OffloadKind::Cuda, "sm_80", "scale"),
            image(ImageKind::Ptx, OffloadKind::Cuda, "sm_80", "scale"),
        ]
        .concat();
        std::fs::write(&file, bytes).unwrap();
        let artifact = serde_json::json!({
            "reason": "compiler-artifact",
            "filenames": [file],
        })
        .to_string();
        assert_eq!(
            embedded_summary(&artifact).as_deref(),
            Some("mixed (5 device images; k: sm_80 cubin+ptx, host elf; scale: sm_80 cubin+ptx)")
        );
    }
}
