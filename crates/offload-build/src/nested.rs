//! Nested cargo invocations for device builds.
//!
//! A device build must not see the outer build's configuration: its own toolchain, its own
//! target directory, its own flags. Everything cargo and rustup set for the outer build is
//! removed; the flags the device build needs are passed in `CARGO_ENCODED_RUSTFLAGS`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::json::{CargoMessage, JsonExt};

use crate::arch::OffloadArch;
use crate::command::{self, CommandError};
use crate::env::Env;
use crate::error::{Error, Result};
use offload_toolchain::Tool;

/// Variables the outer cargo, rustup or a build script set that would leak into a nested build.
fn leaks_into_nested_build(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    const EXACT: &[&str] = &[
        "RUSTC",
        "RUSTDOC",
        // RUSTC_WRAPPER stays: `sccache` caches the nested builds' compiles too. The
        // workspace wrapper is the outer workspace's (`clippy-driver`).
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTFLAGS",
        "RUSTDOCFLAGS",
        "RUSTUP_TOOLCHAIN",
        "TARGET",
        "HOST",
        "OUT_DIR",
        "OPT_LEVEL",
        "PROFILE",
        "DEBUG",
        "NUM_JOBS",
        "RUSTC_LINKER",
        "CARGO",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_TARGET_DIR",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_BUILD_RUSTC",
        "CARGO_BUILD_RUSTC_WRAPPER",
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_MANIFEST_LINKS",
        "CARGO_PRIMARY_PACKAGE",
    ];
    EXACT.contains(&name)
        || name.starts_with("CARGO_FEATURE_")
        || name.starts_with("CARGO_CFG_")
        || name.starts_with("CARGO_PKG_")
        || name.starts_with("CARGO_BIN_")
        || name.starts_with("DEP_")
        || (name.starts_with("CARGO_TARGET_") && name.ends_with("_RUSTFLAGS"))
        || (name.starts_with("CARGO_TARGET_") && name.ends_with("_LINKER"))
        || name.starts_with("CARGO_PROFILE_")
}

/// `rustup run <toolchain> cargo <subcommand>` with a clean environment: the pinned nightly
/// of GPU builds.
pub fn cargo(env: &Env, subcommand: &str) -> Command {
    let mut cmd = env.tool(Tool::Rustup);
    cmd.args(["run", &env.nightly_toolchain(), "cargo", subcommand]);
    clean(&mut cmd);
    cmd
}

fn clean(cmd: &mut Command) {
    for (name, _) in std::env::vars_os() {
        if leaks_into_nested_build(&name) {
            cmd.env_remove(name);
        }
    }
}

/// The toolchain that runs the outer build, which builds the CPU device's images where the
/// nightly is not installed ([`CpuToolchain`]): no `rust-src` needed, the host target's `std`
/// comes with every toolchain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostToolchain {
    /// The cargo running the build (`CARGO`), else the toolchain's own.
    pub cargo: PathBuf,
    /// The toolchain's rustc, by its path in the sysroot where it has one, so that neither
    /// rustup's proxy nor a `rust-toolchain.toml` of the kernel crate picks another.
    pub rustc: PathBuf,
}

impl HostToolchain {
    /// The toolchain of the build this process belongs to: the rustc cargo hands build
    /// scripts (`RUSTC`; else `rustc` as rustup resolves it here, `RUSTUP_TOOLCHAIN` included),
    /// asked for its sysroot.
    pub fn find(env: &Env) -> Result<HostToolchain> {
        let outer = env
            .get_untracked("RUSTC")
            .map_or_else(|| PathBuf::from("rustc"), PathBuf::from);
        let out = command::run(Command::new(&outer).args(["--print", "sysroot"])).map_err(|e| {
            Error::Prerequisite(format!(
                "the CPU device builds with the Rust toolchain that runs the build, whose rustc \
                 ({}) does not run: {e}",
                outer.display()
            ))
        })?;
        let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        Ok(HostToolchain::in_sysroot(
            &sysroot,
            outer,
            env.get_untracked("CARGO").map(PathBuf::from),
        ))
    }

    /// The toolchain of `sysroot`: its programs where it has them, else `rustc` and `cargo`.
    fn in_sysroot(sysroot: &Path, rustc: PathBuf, cargo: Option<PathBuf>) -> HostToolchain {
        let program = |name: &str| {
            let path = sysroot
                .join("bin")
                .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
            path.is_file().then_some(path)
        };
        HostToolchain {
            cargo: cargo
                .or_else(|| program("cargo"))
                .unwrap_or_else(|| PathBuf::from("cargo")),
            rustc: program("rustc").unwrap_or(rustc),
        }
    }

    /// Its `cargo <subcommand>` with a clean environment and its rustc.
    pub fn cargo(&self, subcommand: &str) -> Command {
        let mut cmd = Command::new(&self.cargo);
        cmd.arg(subcommand);
        clean(&mut cmd);
        cmd.env("RUSTC", &self.rustc)
            // The CPU device keeps its index state and shared memory in `#[thread_local]`
            // statics of the no_std image (std's `thread_local!` is not there, and linking
            // std would bring its panic runtime, whose per-thread state a kernel panic, which
            // leaves its stack for good, would leave behind). The one attribute is allowed for
            // offload-rt alone; the kernel crates build as on any stable compiler.
            .env("RUSTC_BOOTSTRAP", "offload_rt");
        cmd
    }
}

/// The toolchain that builds the CPU device's images: the pinned nightly where it is
/// installed, as for GPU images, else the toolchain running the build (stable included), so
/// that the CPU device needs neither the nightly nor `rust-src`. The nightly comes first
/// because older compilers vectorize fewer of the CPU device's loops: rustc 1.95 leaves the
/// region-form loops of kernels with barriers scalar (BENCHMARKS.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuToolchain {
    /// The pinned nightly ([`Env::nightly_toolchain`]).
    Nightly,
    /// The toolchain running the build.
    Outer(HostToolchain),
}

impl CpuToolchain {
    /// The nightly when `rustup run <nightly> rustc -V` works, else the outer toolchain.
    pub fn find(env: &Env) -> Result<CpuToolchain> {
        if nightly_usable(env) {
            Ok(CpuToolchain::Nightly)
        } else {
            Ok(CpuToolchain::Outer(HostToolchain::find(env)?))
        }
    }

    /// Its `cargo <subcommand>` with a clean environment.
    pub fn cargo(&self, env: &Env, subcommand: &str) -> Command {
        match self {
            CpuToolchain::Nightly => cargo(env, subcommand),
            CpuToolchain::Outer(host) => host.cargo(subcommand),
        }
    }

    /// Its rustc's `rustc -vV` output.
    pub fn version(&self, env: &Env) -> Result<String> {
        let out = match self {
            CpuToolchain::Nightly => command::run(env.tool(Tool::Rustup).args([
                "run",
                &env.nightly_toolchain(),
                "rustc",
                "-vV",
            ]))?,
            CpuToolchain::Outer(host) => command::run(Command::new(&host.rustc).arg("-vV"))?,
        };
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// Whether the pinned nightly runs (`rust-src` aside). Asked once per toolchain and process:
/// each kernel crate's CPU image and the prebuilt-bundle decisions ask it again.
pub fn nightly_usable(env: &Env) -> bool {
    static KNOWN: std::sync::Mutex<Vec<(String, bool)>> = std::sync::Mutex::new(Vec::new());
    let toolchain = env.nightly_toolchain();
    let known = |toolchain: &str| {
        KNOWN
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(t, _)| t == toolchain)
            .map(|&(_, usable)| usable)
    };
    if let Some(usable) = known(&toolchain) {
        return usable;
    }
    let usable = crate::command::run(
        env.tool(Tool::Rustup)
            .args(["run", &toolchain, "rustc", "-V"]),
    )
    .is_ok();
    KNOWN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((toolchain, usable));
    usable
}

/// Joins rustc flags the way `CARGO_ENCODED_RUSTFLAGS` wants them.
pub fn encoded_rustflags<S: AsRef<str>>(flags: &[S]) -> String {
    flags
        .iter()
        .map(AsRef::as_ref)
        .collect::<Vec<_>>()
        .join("\u{1f}")
}

/// Checks that the nightly toolchain of GPU builds is installed with rust-src when `archs`
/// name a GPU, and returns its `rustc -vV` output; `None` for the CPU device alone, which
/// builds with the toolchain running the build.
pub fn check_toolchain(env: &Env, archs: &[OffloadArch]) -> Result<Option<String>> {
    let gpu: Vec<String> = archs
        .iter()
        .filter(|a| a.is_gpu())
        .map(OffloadArch::name)
        .collect();
    if gpu.is_empty() {
        return Ok(None);
    }
    let gpu = gpu.join(",");
    let toolchain = env.nightly_toolchain();
    let install = format!(
        "run `cargo offload setup`, or `rustup toolchain install {toolchain} --profile minimal \
         --component rust-src`"
    );
    let out = command::run(
        env.tool(Tool::Rustup)
            .args(["run", &toolchain, "rustc", "-vV"]),
    )
    .map_err(|e| {
        Error::Prerequisite(format!(
            "--offload-arch {gpu}: GPU images need the `{toolchain}` Rust toolchain (the \
                 CPU device, `host`, does not), which is not usable: {e}\n  fix: {install}"
        ))
    })?;
    let version = String::from_utf8_lossy(&out.stdout).into_owned();
    let sysroot = command::run(
        env.tool(Tool::Rustup)
            .args(["run", &toolchain, "rustc", "--print", "sysroot"]),
    )?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim());
    let src = sysroot.join("lib/rustlib/src/rust/library/Cargo.lock");
    if !src.is_file() {
        return Err(Error::Prerequisite(format!(
            "--offload-arch {gpu}: GPU images need the `rust-src` component of `{toolchain}` \
             ({} is missing)\n  fix: run `cargo offload setup`, or `rustup component add \
             rust-src --toolchain {toolchain}`",
            src.display()
        )));
    }
    Ok(Some(version))
}

/// What the host crate's profile asks of its kernel crates' own code, as cargo tells the build
/// script: a profile with debug assertions (`dev`, by default) gets kernels with
/// `debug_assert!` and overflow checks on (cargo's default ties overflow checks to debug
/// assertions; an explicit `overflow-checks` of the host's profile is not told to build
/// scripts), and one with debug info gets line tables in the CPU device's image. Only the
/// kernel crate is built so: `core` and offload-rt stay as a release build has them, so the
/// nested builds' shared units serve both profiles, and a release profile's kernels are what
/// they always were.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KernelChecks {
    /// `debug_assert!` and overflow checks on.
    pub debug_assertions: bool,
    /// Line tables (DWARF `.debug_line`) in the image, where the device keeps them.
    pub line_info: bool,
    /// Built for a debugger (`OFFLOAD_DEBUG_KERNELS`, which `cargo offload run --debugger`
    /// sets): the CPU device's image unoptimized, with full debug information.
    pub debugger: bool,
    /// The CPU device's image built with AddressSanitizer (`OFFLOAD_SANITIZE_KERNELS=address`,
    /// which `cargo offload run --sanitize=address` sets).
    pub address_sanitizer: bool,
}

impl KernelChecks {
    /// From the host build's profile, in a build script; a release build's elsewhere.
    pub fn from_env(env: &Env) -> KernelChecks {
        if !env.build_script {
            return KernelChecks::default();
        }
        KernelChecks {
            debug_assertions: env.is_set_untracked("CARGO_CFG_DEBUG_ASSERTIONS"),
            line_info: env
                .get_untracked("DEBUG")
                .is_some_and(|d| !matches!(d.as_str(), "false" | "0" | "none")),
            debugger: env
                .get(crate::env::OFFLOAD_DEBUG_KERNELS)
                .is_some_and(|v| v != "0"),
            address_sanitizer: env
                .get(crate::env::OFFLOAD_SANITIZE_KERNELS)
                .is_some_and(|v| v == "address"),
        }
    }

    /// Cargo's `--config` options that build `package` so in the `release` profile of a
    /// nested build, with the source lines the device's image keeps (`lines`).
    pub fn config_args(&self, package: &str, lines: Lines) -> Vec<String> {
        let mut settings = Vec::new();
        if self.debug_assertions {
            settings.push("debug-assertions=true");
            settings.push("overflow-checks=true");
        }
        match lines {
            Lines::CpuImage if self.debugger => {
                settings.push("opt-level=0");
                settings.push("debug=true");
            }
            Lines::CpuImage | Lines::Tables if self.line_info => {
                settings.push("debug=\"line-tables-only\"");
            }
            Lines::Directives if self.line_info => {
                settings.push("debug=\"line-directives-only\"");
            }
            _ => {}
        }
        settings
            .into_iter()
            .flat_map(|setting| {
                [
                    "--config".to_owned(),
                    format!("profile.release.package.\"{package}\".{setting}"),
                ]
            })
            .collect()
    }
}

/// The source lines a device's image keeps from a profile with debug information.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    not(feature = "llvm"),
    allow(dead_code, reason = "the GPU nested builds are the `llvm` feature's")
)]
pub enum Lines {
    /// The CPU device's image: DWARF line tables, or with `OFFLOAD_DEBUG_KERNELS` full debug
    /// information in an unoptimized image.
    CpuImage,
    /// DWARF line tables (AMD GPUs' code objects).
    Tables,
    /// Line directives only (NVIDIA: the PTX's `.loc`, which `ptxas -lineinfo` keeps; full
    /// debug information would need unoptimized code: "Optimized debugging not supported").
    Directives,
}

/// The LLVM major version in `rustc -vV` output.
pub fn rustc_llvm_major(version_output: &str) -> Option<u32> {
    version_output
        .lines()
        .find_map(|l| l.strip_prefix("LLVM version: "))
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.trim().parse().ok())
}

/// Runs a nested cargo build whose command asks for `--message-format=json` (before its `--`)
/// and returns cargo's JSON messages. Its diagnostics are recorded for
/// [`diagnostics::report`](crate::diagnostics::report), which shows each once with the
/// architectures (`arch`, a comma-separated list for a build that serves several) that gave
/// it. A failure's error carries cargo's own stderr only where rustc gave no error (a
/// manifest cargo cannot read, a dependency it cannot fetch): its status lines and lock
/// waits are noise beside rustc's errors.
pub fn run_json(
    env: &Env,
    cmd: &mut Command,
    arch: &str,
) -> std::result::Result<Vec<CargoMessage>, CommandError> {
    // Cargo's progress frames, asked for although its stderr is no terminal, tell how many
    // units the build has done of how many.
    cmd.env("CARGO_TERM_PROGRESS_WHEN", "always")
        .env("CARGO_TERM_PROGRESS_WIDTH", "120")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command::spawn(cmd)?;
    let progress = child.stderr.take().map(|stderr| {
        let (env, arch) = (*env, arch.to_owned());
        std::thread::spawn(move || {
            report_progress(stderr, &arch, |line| {
                crate::status::status(&env, "Compiling", line);
            })
        })
    });
    let mut stdout = Vec::new();
    let read = child.stdout.take().map_or(Ok(0), |mut out| {
        std::io::Read::read_to_end(&mut out, &mut stdout)
    });
    let status = child.wait();
    let stderr = progress
        .and_then(|thread| thread.join().ok())
        .unwrap_or_default();
    let failed = |source: std::io::Error| CommandError::Io {
        command: command::CommandLine::of(cmd),
        source,
    };
    read.map_err(failed)?;
    let status = status.map_err(failed)?;
    let messages: Vec<CargoMessage> = String::from_utf8_lossy(&stdout)
        .lines()
        .filter_map(CargoMessage::parse)
        .collect();
    crate::diagnostics::record(arch, &messages);
    if status.success() {
        return Ok(messages);
    }
    let rustc_errors = messages
        .iter()
        .any(|m| m.is("compiler-message") && crate::diagnostics::level(m) == Some("error"));
    Err(CommandError::Failed {
        command: command::CommandLine::of(cmd),
        status,
        stderr: if rustc_errors { String::new() } else { stderr },
    })
}

/// Reads a nested cargo's stderr to its end: each crate it starts compiling becomes a
/// `Compiling` status line naming the architectures the build serves and, from cargo's
/// progress frames, how many of its units are done (`core v0.0.0 (sm_80, sm_90) 3/41`), so
/// that a long device build is not silent. Returns the rest of what cargo said (no progress
/// frames, no lock waits), for an error where rustc gave none.
fn report_progress(
    mut stderr: impl std::io::Read,
    arch: &str,
    mut compiling: impl FnMut(&str),
) -> String {
    let mut kept: Vec<String> = Vec::new();
    let mut done: Option<String> = None;
    let mut pending = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = match stderr.read(&mut chunk) {
            Ok(0) => 0,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => 0,
        };
        let end = n == 0;
        pending.extend_from_slice(&chunk[..n]);
        // Whole lines and frames only, but everything at the end.
        let cut = if end {
            pending.len()
        } else {
            match pending.iter().rposition(|&b| b == b'\r' || b == b'\n') {
                Some(at) => at + 1,
                None => continue,
            }
        };
        let ready: Vec<u8> = pending.drain(..cut).collect();
        for line in String::from_utf8_lossy(&ready)
            .split(['\r', '\n'])
            .map(str::trim)
        {
            if let Some(frame) = line.strip_prefix("Building [") {
                done = frame
                    .split_once("] ")
                    .and_then(|(_, rest)| rest.split(':').next())
                    .map(str::to_owned);
            } else if let Some(what) = line.strip_prefix("Compiling ") {
                let krate = what.split(" (").next().unwrap_or(what);
                let count = done.as_deref().map(|d| format!(" {d}")).unwrap_or_default();
                compiling(&format!("{krate} ({arch}){count}"));
            } else if !line.is_empty() && !line.starts_with("Blocking waiting for file lock") {
                kept.push(line.to_owned());
            }
        }
        if end {
            return kept.join("\n");
        }
    }
}

/// Runs a nested `cargo rustc … --message-format=json` ([`run_json`]) and returns the
/// artifacts of `package`'s library.
pub fn run_for_artifacts(
    env: &Env,
    mut cmd: Command,
    package_manifest: &Path,
    krate: &str,
    arch: &str,
) -> Result<Vec<PathBuf>> {
    cmd.arg("--message-format=json");
    let line = command::CommandLine::of(&cmd).to_string();
    let messages = match run_json(env, &mut cmd, arch) {
        Ok(messages) => messages,
        Err(CommandError::Failed { stderr, .. }) => {
            return Err(Error::DeviceBuild {
                krate: krate.to_owned(),
                arch: arch.to_owned(),
                why: crate::diagnostics::failure_reason(&stderr, &line),
            });
        }
        Err(e) => return Err(e.into()),
    };
    let mut files = Vec::new();
    for message in &messages {
        let json = message.json();
        if message.is("compiler-artifact")
            && json.str_at(&["manifest_path"]).map(Path::new) == Some(package_manifest)
        {
            files.extend(json.strs_at(&["filenames"]).into_iter().map(PathBuf::from));
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargos_progress_becomes_status_lines_and_the_rest_is_kept() {
        let stderr = "    Blocking waiting for file lock on package cache\n   Compiling core v0.0.0 \
                      (/s/library/core)\n    Building [=>    ] 1/3: core\r    Building [===> ] \
                      2/3: compiler_builtins\r   Compiling k v0.1.0 (/k)\nerror: no matching \
                      package named `nope` found\n";
        let mut lines = Vec::new();
        let kept = report_progress(stderr.as_bytes(), "sm_80, sm_90", |l| {
            lines.push(l.to_owned())
        });
        assert_eq!(
            lines,
            ["core v0.0.0 (sm_80, sm_90)", "k v0.1.0 (sm_80, sm_90) 2/3"]
        );
        assert_eq!(kept, "error: no matching package named `nope` found");
    }

    #[test]
    fn a_checked_profile_reaches_the_kernel_crate_alone() {
        assert!(
            KernelChecks::default()
                .config_args("k", Lines::CpuImage)
                .is_empty()
        );
        let dev = KernelChecks {
            debug_assertions: true,
            line_info: true,
            debugger: false,
            address_sanitizer: false,
        };
        assert_eq!(
            KernelChecks {
                line_info: false,
                ..dev
            }
            .config_args("my-kernels", Lines::Tables),
            [
                "--config",
                "profile.release.package.\"my-kernels\".debug-assertions=true",
                "--config",
                "profile.release.package.\"my-kernels\".overflow-checks=true",
            ]
        );
        assert_eq!(
            dev.config_args("k", Lines::Tables)
                .last()
                .map(String::as_str),
            Some("profile.release.package.\"k\".debug=\"line-tables-only\"")
        );
        // The debugger's unoptimized build is the CPU device's alone.
        let debugger = KernelChecks {
            debugger: true,
            ..dev
        };
        assert!(
            debugger
                .config_args("k", Lines::CpuImage)
                .contains(&"profile.release.package.\"k\".opt-level=0".to_owned())
        );
        assert_eq!(
            debugger
                .config_args("k", Lines::Tables)
                .last()
                .map(String::as_str),
            Some("profile.release.package.\"k\".debug=\"line-tables-only\"")
        );
        assert_eq!(
            dev.config_args("k", Lines::Directives)
                .last()
                .map(String::as_str),
            Some("profile.release.package.\"k\".debug=\"line-directives-only\"")
        );
    }

    #[test]
    fn outer_build_variables_are_stripped() {
        for leaking in [
            "RUSTFLAGS",
            "CARGO_FEATURE_STD",
            "CARGO_CFG_TARGET_OS",
            "CARGO_TARGET_DIR",
            "RUSTUP_TOOLCHAIN",
            "CARGO_ENCODED_RUSTFLAGS",
            "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS",
        ] {
            assert!(leaks_into_nested_build(OsStr::new(leaking)), "{leaking}");
        }
        for kept in [
            "PATH",
            "HOME",
            "CARGO_HOME",
            "RUSTUP_HOME",
            "CARGO_MAKEFLAGS",
            "RUSTC_WRAPPER",
        ] {
            assert!(!leaks_into_nested_build(OsStr::new(kept)), "{kept}");
        }
    }

    #[test]
    fn the_host_toolchain_is_the_sysroots_own() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let exe = |name: &str| bin.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
        // Without programs in the sysroot: what the build named.
        let bare = HostToolchain::in_sysroot(dir.path(), PathBuf::from("my-rustc"), None);
        assert_eq!(bare.rustc, PathBuf::from("my-rustc"));
        assert_eq!(bare.cargo, PathBuf::from("cargo"));
        std::fs::write(exe("rustc"), "").unwrap();
        std::fs::write(exe("cargo"), "").unwrap();
        let own = HostToolchain::in_sysroot(dir.path(), PathBuf::from("rustc"), None);
        assert_eq!(
            (own.rustc.clone(), own.cargo.clone()),
            (exe("rustc"), exe("cargo"))
        );
        // The cargo that runs the build comes first.
        let outer = HostToolchain::in_sysroot(
            dir.path(),
            PathBuf::from("rustc"),
            Some(PathBuf::from("/outer/cargo")),
        );
        assert_eq!(outer.cargo, PathBuf::from("/outer/cargo"));

        let cmd = own.cargo("rustc");
        let envs: Vec<_> = cmd.get_envs().collect();
        assert!(envs.contains(&(OsStr::new("RUSTC"), Some(exe("rustc").as_os_str()))));
        assert!(envs.contains(&(
            OsStr::new("RUSTC_BOOTSTRAP"),
            Some(OsStr::new("offload_rt"))
        )));
        assert_eq!(cmd.get_program(), exe("cargo"));
        assert_eq!(cmd.get_args().collect::<Vec<_>>(), ["rustc"]);
    }

    #[test]
    fn the_cpu_device_alone_needs_no_nightly() {
        let env = Env {
            build_script: false,
        };
        assert_eq!(check_toolchain(&env, &[OffloadArch::HOST]).unwrap(), None);
        assert_eq!(check_toolchain(&env, &[]).unwrap(), None);
    }

    #[test]
    fn llvm_major_is_read_from_rustc_version() {
        let out = "rustc 1.97.0-nightly\nbinary: rustc\nLLVM version: 22.1.4\n";
        assert_eq!(rustc_llvm_major(out), Some(22));
        assert_eq!(rustc_llvm_major("rustc 1.0"), None);
    }

    #[test]
    fn rustflags_are_joined_with_unit_separators() {
        assert_eq!(
            encoded_rustflags(&["--cfg", "offload_device", "-Cpanic=abort"]),
            "--cfg\u{1f}offload_device\u{1f}-Cpanic=abort"
        );
    }
}
