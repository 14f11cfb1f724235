//! Every external program that cargo-offload's build, tests and benchmarks run, with the Debian
//! package that provides it, and one policy for finding it.
//!
//! The set-up (`cargo xtask setup`) installs the packages of [`Tool::ALL`] (but the GPU
//! vendors' profilers: [`Tool::installed_by_setup`]) and checks that each tool runs; test helpers ask for a [`Tool`], never for a path or a name, so a tool a test
//! needs cannot be missing from what the set-up installs.
//!
//! Finding a tool:
//! 1. its environment override (`OFFLOAD_CLANG`, `OFFLOAD_PTXAS`, …: [`Tool::env_var`]);
//! 2. LLVM tools: LLVM 22's binary directory ([`llvm_bin_dir`]: `OFFLOAD_LLVM_BIN`, else
//!    `llvm-config-22 --bindir`, else Debian's `/usr/lib/llvm-22/bin`); then the versioned name
//!    on `PATH` (`clang-22`). An unversioned `clang` on `PATH` may be another LLVM and is not used;
//! 3. CUDA tools: `PATH`, then the usual CUDA directories, then the newer CUDA tools the
//!    set-up installs from the Python package index under [`CUDA_PIP_PREFIX`] (last, so that
//!    [`Tool::find`] keeps the distribution's; [`Tool::find_all`] and [`Tool::find_newest`]
//!    see both);
//! 4. Rust's programs (`rustup`, `rustc`): `PATH`, then `$CARGO_HOME/bin` (`~/.cargo/bin`).
#![deny(missing_docs)]

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The LLVM major version device code is built with: rustc's, and the one Debian packages.
pub const LLVM_MAJOR: u32 = 22;

/// The Rust toolchain device builds use, pinned so that its LLVM major stays
/// [`LLVM_MAJOR`] whatever day a machine is set up: rustc's bitcode must be readable by the
/// LLVM the device link is linked with. `OFFLOAD_NIGHTLY_TOOLCHAIN` overrides it. Moving to a
/// newer nightly: pick one whose `rustc -vV` says `LLVM version: 22.x`, change this line, run
/// `cargo xtask setup` and the tests (`cargo offload doctor` checks the two LLVM majors).
pub const DEVICE_TOOLCHAIN: &str = "nightly-2026-05-20";

/// Debian's directory of LLVM 22's programs.
pub const DEBIAN_LLVM_BIN: &str = "/usr/lib/llvm-22/bin";

/// Debian packages of the libraries the device link is built against: LLVM's C API and what
/// `llvm-sys` links with it (what building `cargo-offload` needs, and `cargo offload setup
/// --system` installs).
pub const DEVICE_LINK_LIBRARY_PACKAGES: &[&str] = &[
    "llvm-22-dev",
    "libpolly-22-dev",
    "zlib1g-dev",
    "libzstd-dev",
];

/// The other Debian packages of libraries and headers the set-up installs: the compiler
/// runtimes, the OpenMP and offload runtimes for the OpenMP peers, the aarch64 cross C
/// library, and Open MPI's headers and `mpicc` for offload-rt's `mpi` feature.
pub const OTHER_LIBRARY_PACKAGES: &[&str] = &[
    "libclang-rt-22-dev",
    "libomp-22-dev",
    "liboffload-22-dev",
    "libc6-dev-arm64-cross",
    "libopenmpi-dev",
];

/// Where the set-up installs NVIDIA's newer CUDA tools ([`CUDA_PIP_PACKAGES`]), with `pip
/// install --target`: Debian's CUDA 11.8 `ptxas` knows no `sm_90a` (CUDA 12.0 added it, with
/// PTX 8.0's `wgmma`), and its `cuobjdump` cannot read what a newer `ptxas` writes.
pub const CUDA_PIP_PREFIX: &str = "/opt/cargo-offload/cuda";

/// The Python package index's CUDA tools the set-up installs under [`CUDA_PIP_PREFIX`]: CUDA
/// 12.9's `ptxas` (not newer than the drivers of CUDA 12.9 and later it must run on), and CUDA
/// 13's `cuobjdump` with the `nvdisasm` it runs, which read `sm_90a` cubins.
pub const CUDA_PIP_PACKAGES: &[&str] = &[
    "nvidia-cuda-nvcc-cu12==12.9.86",
    "nvidia-cuda-cuobjdump==13.2.86",
    "nvidia-cuda-nvdisasm==13.2.86",
];

/// The arguments of Python's that install [`CUDA_PIP_PACKAGES`] under [`CUDA_PIP_PREFIX`]
/// (`python3 -m pip install …`).
pub fn cuda_pip_install_args() -> Vec<&'static str> {
    let mut args = vec![
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "--target",
        CUDA_PIP_PREFIX,
    ];
    args.extend_from_slice(CUDA_PIP_PACKAGES);
    args
}

/// The directories of [`CUDA_PIP_PREFIX`] that hold the programs of [`CUDA_PIP_PACKAGES`].
pub const CUDA_PIP_BIN_DIRS: &[&str] = &["nvidia/cuda_nvcc/bin", "nvidia/cu13/bin"];

/// Whether the tools of [`CUDA_PIP_PACKAGES`] are installed.
pub fn cuda_pip_tools_installed() -> bool {
    let prefix = Path::new(CUDA_PIP_PREFIX);
    [
        "nvidia/cuda_nvcc/bin/ptxas",
        "nvidia/cu13/bin/cuobjdump",
        "nvidia/cu13/bin/nvdisasm",
    ]
    .iter()
    .all(|p| prefix.join(p).is_file())
}

/// Where the set-ups write the apt entry of Debian's `contrib non-free` components, which
/// hold the CUDA toolkit.
pub const DEBIAN_CONTRIB_NON_FREE_SOURCES: &str =
    "/etc/apt/sources.list.d/offload-contrib-non-free.sources";

/// The contents of apt's source lists (`/etc/apt/sources.list` and the `.list` and
/// `.sources` files of `sources.list.d`), those that can be read.
pub fn apt_sources() -> Vec<String> {
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    files.extend(
        std::fs::read_dir("/etc/apt/sources.list.d")
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "list" || e == "sources")),
    );
    files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .collect()
}

/// Whether one of apt's `sources` enables Debian's `contrib` and `non-free` components (on
/// one line, as both the one-line and the deb822 formats write them).
pub fn debian_contrib_non_free_enabled(sources: &[String]) -> bool {
    sources.iter().any(|s| {
        s.lines()
            .any(|l| l.contains("contrib") && l.contains("non-free"))
    })
}

/// The apt entry (deb822) of Debian's `contrib non-free` components for the release
/// `codename`.
pub fn debian_contrib_non_free_entry(codename: &str) -> String {
    format!(
        "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: {codename}\n\
         Components: contrib non-free\n\
         Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    )
}

/// Rust targets the set-up adds to the stable and the device toolchain: aarch64 Linux, so the
/// CPU device is proven on a second host architecture (cross-built, run under qemu).
pub const RUST_CROSS_TARGETS: &[&str] = &["aarch64-unknown-linux-gnu"];

/// The C library directory of the aarch64 cross toolchain, for qemu's `-L`.
pub const AARCH64_SYSROOT: &str = "/usr/aarch64-linux-gnu";

/// Where a tool comes from, which decides how it is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Part of LLVM 22: found in LLVM's binary directory.
    Llvm,
    /// Part of the CUDA toolkit (Debian's `nvidia-cuda-toolkit`): found on `PATH`.
    Cuda,
    /// A general system program: found on `PATH`.
    System,
    /// Part of AMD's ROCm: found on `PATH`, then in `/opt/rocm/bin`.
    Rocm,
    /// Rust's toolchain manager and its proxies: found on `PATH`, then in `$CARGO_HOME/bin`
    /// (`~/.cargo/bin` without it), where rustup installs them.
    Rustup,
}

/// One external program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tool {
    /// `clang`, LLVM's C/C++/CUDA/HIP compiler.
    Clang,
    /// `clang-offload-bundler`, for clang's offload bundles.
    ClangOffloadBundler,
    /// `clang-linker-wrapper`, which links OpenMP device images.
    ClangLinkerWrapper,
    /// `ld.lld`, LLVM's ELF linker (AMDGPU code objects).
    LdLld,
    /// `llvm-ar`, LLVM's archiver.
    LlvmAr,
    /// `llvm-config`, which names LLVM's directories and version.
    LlvmConfig,
    /// `llvm-link`, LLVM's bitcode linker.
    LlvmLink,
    /// `llvm-objcopy`, to copy and edit object files.
    LlvmObjcopy,
    /// `llvm-objdump`, to disassemble object files.
    LlvmObjdump,
    /// `llvm-offload-binary`, which packs and unpacks OffloadBinaries.
    LlvmOffloadBinary,
    /// `llvm-readelf`, to print ELF headers, sections and notes.
    LlvmReadelf,
    /// `clang-offload-packager`, the older name of `llvm-offload-binary`.
    ClangOffloadPackager,
    /// `lit`, LLVM's test runner, which runs LLVM's own tests of the offload tools.
    Lit,
    /// `FileCheck`, LLVM's pattern checker of test output (with `not`, `count` and
    /// `split-file` beside it, from the same package).
    FileCheck,
    /// `obj2yaml`, which prints object files as YAML.
    Obj2yaml,
    /// `llc`, LLVM's static compiler (IR to assembly or objects).
    Llc,
    /// `opt`, LLVM's IR optimizer.
    Opt,
    /// `ptxas`, NVIDIA's PTX assembler (PTX to cubin).
    Ptxas,
    /// `cuobjdump`, which disassembles cubins (SASS).
    Cuobjdump,
    /// `compute-sanitizer`, NVIDIA's memory and race checker of CUDA programs, which
    /// `cargo offload run --sanitize` runs the program under.
    ComputeSanitizer,
    /// GNU time, for peak-memory figures in benchmarks and tests.
    GnuTime,
    /// User-mode emulation of aarch64 Linux, to run cross-built programs.
    QemuAarch64,
    /// The aarch64 Linux cross linker.
    Aarch64Gcc,
    /// Python 3, which runs `lit`.
    Python3,
    /// Git, which fetches LLVM's tests of the offload tools and makes the repository of a
    /// project `cargo offload new` creates.
    Git,
    /// GDB, the debugger `cargo offload run --debugger` starts by default (and its test runs).
    Gdb,
    /// `mpirun`, which `cargo offload run --np N` starts a program's ranks with (Open MPI's
    /// here; MPICH's takes the same `-np`).
    Mpirun,
    /// `sccache`, the compiler cache whose hits on the nested device builds a test checks
    /// (`RUSTC_WRAPPER=sccache`).
    Sccache,
    /// `llvm-symbolizer`, which maps the addresses `perf` samples in a CPU device's image to
    /// source lines (`cargo offload profile --detail`).
    LlvmSymbolizer,
    /// `perf`, Linux's profiler, which samples the CPU device's kernels for `cargo offload
    /// profile --detail`.
    Perf,
    /// Chromium, run headless to check that `cargo offload profile`'s HTML report draws.
    Chromium,
    /// Nsight Systems' `nsys`, the profiler `cargo offload profile` runs a program under on
    /// an NVIDIA GPU. Not installed by the set-up (no GPU there).
    Nsys,
    /// Nsight Compute's `ncu`, the profiler of `cargo offload profile --detail` on an NVIDIA
    /// GPU (with `--import-source`). Not installed by the set-up.
    Ncu,
    /// ROCm's `rocprofv3`, the profiler `cargo offload profile` runs a program under on an
    /// AMD GPU. Not installed by the set-up.
    Rocprofv3,
    /// `rustup`, which installs and runs the pinned nightly of the device builds. Not
    /// installed by the set-up (it comes before it, with Rust).
    Rustup,
    /// `rustc`, the Rust compiler of the default toolchain (rustup's proxy where rustup
    /// installed it). Not installed by the set-up.
    Rustc,
    /// `sudo`, which the set-ups run the package manager under when not root. Not installed
    /// by the set-up.
    Sudo,
}

impl Tool {
    /// Every tool, in the order the set-up reports them.
    pub const ALL: &'static [Tool] = &[
        Tool::Clang,
        Tool::ClangOffloadBundler,
        Tool::ClangLinkerWrapper,
        Tool::LdLld,
        Tool::LlvmAr,
        Tool::LlvmConfig,
        Tool::LlvmLink,
        Tool::LlvmObjcopy,
        Tool::LlvmObjdump,
        Tool::LlvmOffloadBinary,
        Tool::LlvmReadelf,
        Tool::ClangOffloadPackager,
        Tool::Lit,
        Tool::FileCheck,
        Tool::Obj2yaml,
        Tool::Llc,
        Tool::Opt,
        Tool::Ptxas,
        Tool::Cuobjdump,
        Tool::ComputeSanitizer,
        Tool::GnuTime,
        Tool::QemuAarch64,
        Tool::Aarch64Gcc,
        Tool::Python3,
        Tool::Git,
        Tool::Gdb,
        Tool::Mpirun,
        Tool::Sccache,
        Tool::LlvmSymbolizer,
        Tool::Perf,
        Tool::Chromium,
        Tool::Nsys,
        Tool::Ncu,
        Tool::Rocprofv3,
        Tool::Rustup,
        Tool::Rustc,
        Tool::Sudo,
    ];

    /// The program's file name in its directory.
    pub const fn program(self) -> &'static str {
        match self {
            Tool::Clang => "clang",
            Tool::ClangOffloadBundler => "clang-offload-bundler",
            Tool::ClangLinkerWrapper => "clang-linker-wrapper",
            Tool::LdLld => "ld.lld",
            Tool::LlvmAr => "llvm-ar",
            Tool::LlvmConfig => "llvm-config",
            Tool::LlvmLink => "llvm-link",
            Tool::LlvmObjcopy => "llvm-objcopy",
            Tool::LlvmObjdump => "llvm-objdump",
            Tool::LlvmOffloadBinary => "llvm-offload-binary",
            Tool::LlvmReadelf => "llvm-readelf",
            Tool::ClangOffloadPackager => "clang-offload-packager",
            Tool::Lit => "lit",
            Tool::FileCheck => "FileCheck",
            Tool::Obj2yaml => "obj2yaml",
            Tool::Llc => "llc",
            Tool::Opt => "opt",
            Tool::Ptxas => "ptxas",
            Tool::Cuobjdump => "cuobjdump",
            Tool::ComputeSanitizer => "compute-sanitizer",
            Tool::GnuTime => "time",
            Tool::QemuAarch64 => "qemu-aarch64",
            Tool::Aarch64Gcc => "aarch64-linux-gnu-gcc",
            Tool::Python3 => "python3",
            Tool::Git => "git",
            Tool::Gdb => "gdb",
            Tool::Mpirun => "mpirun",
            Tool::Sccache => "sccache",
            Tool::LlvmSymbolizer => "llvm-symbolizer",
            Tool::Perf => "perf",
            Tool::Chromium => "chromium",
            Tool::Nsys => "nsys",
            Tool::Ncu => "ncu",
            Tool::Rocprofv3 => "rocprofv3",
            Tool::Rustup => "rustup",
            Tool::Rustc => "rustc",
            Tool::Sudo => "sudo",
        }
    }

    /// The Debian package that installs it.
    pub const fn package(self) -> &'static str {
        match self {
            Tool::Clang => "clang-22",
            Tool::ClangOffloadBundler | Tool::ClangLinkerWrapper | Tool::ClangOffloadPackager => {
                "clang-tools-22"
            }
            Tool::Lit | Tool::FileCheck => "llvm-22-tools",
            Tool::LdLld => "lld-22",
            Tool::LlvmAr
            | Tool::LlvmConfig
            | Tool::LlvmLink
            | Tool::LlvmObjcopy
            | Tool::LlvmObjdump
            | Tool::LlvmOffloadBinary
            | Tool::LlvmReadelf
            | Tool::Obj2yaml
            | Tool::Llc
            | Tool::Opt
            | Tool::LlvmSymbolizer => "llvm-22",
            Tool::Ptxas | Tool::Cuobjdump | Tool::ComputeSanitizer => "nvidia-cuda-toolkit",
            Tool::GnuTime => "time",
            Tool::QemuAarch64 => "qemu-user",
            Tool::Aarch64Gcc => "gcc-aarch64-linux-gnu",
            Tool::Python3 => "python3",
            Tool::Git => "git",
            Tool::Gdb => "gdb",
            Tool::Mpirun => "openmpi-bin",
            Tool::Sccache => "sccache",
            Tool::Perf => "linux-perf",
            Tool::Chromium => "chromium",
            Tool::Nsys => "nsight-systems",
            Tool::Ncu => "nsight-compute",
            Tool::Rocprofv3 => "rocprofiler-sdk",
            Tool::Rustup | Tool::Rustc => "rustup",
            Tool::Sudo => "sudo",
        }
    }

    /// Whether the set-up installs it: every tool but the GPU vendors' profilers, which
    /// serve only on a machine with their GPU (`nsight-systems` and `nsight-compute` from
    /// Debian's `non-free`, `rocprofiler-sdk` from AMD's ROCm repository), and what the set-up
    /// itself runs with (Rust's `rustup` and `rustc`, `sudo`).
    pub const fn installed_by_setup(self) -> bool {
        !matches!(
            self,
            Tool::Nsys | Tool::Ncu | Tool::Rocprofv3 | Tool::Rustup | Tool::Rustc | Tool::Sudo
        )
    }

    /// Where the program comes from, which decides how it is looked for.
    pub const fn origin(self) -> Origin {
        match self {
            Tool::Ptxas | Tool::Cuobjdump | Tool::ComputeSanitizer | Tool::Nsys | Tool::Ncu => {
                Origin::Cuda
            }
            Tool::Rocprofv3 => Origin::Rocm,
            Tool::GnuTime
            | Tool::QemuAarch64
            | Tool::Aarch64Gcc
            | Tool::Python3
            | Tool::Git
            | Tool::Gdb
            | Tool::Mpirun
            | Tool::Sccache
            | Tool::Perf
            | Tool::Chromium
            | Tool::Sudo => Origin::System,
            Tool::Rustup | Tool::Rustc => Origin::Rustup,
            _ => Origin::Llvm,
        }
    }

    /// The environment variable that names this tool's path, overriding the search:
    /// `OFFLOAD_` and the program name in upper case with `-` and `.` as `_`
    /// (`OFFLOAD_CLANG_OFFLOAD_BUNDLER`, `OFFLOAD_LD_LLD`, `OFFLOAD_PTXAS`).
    pub fn env_var(self) -> String {
        let name: String = self
            .program()
            .chars()
            .map(|c| match c {
                '-' | '.' => '_',
                c => c.to_ascii_uppercase(),
            })
            .collect();
        match self {
            Tool::GnuTime => "OFFLOAD_GNU_TIME".to_owned(),
            _ => format!("OFFLOAD_{name}"),
        }
    }

    /// Finds the tool with the process environment.
    pub fn find(self) -> Result<PathBuf, NotFound> {
        self.find_with(&|name| std::env::var_os(name))
    }

    /// Finds the tool, reading environment variables through `env` (so a build script can
    /// declare what it read).
    pub fn find_with(self, env: &dyn Fn(&str) -> Option<OsString>) -> Result<PathBuf, NotFound> {
        self.installed_with(env)
            .map(|mut found| found.swap_remove(0))
    }

    /// A [`Command`] that runs the tool, found with the process environment
    /// ([`Tool::command_with`]).
    pub fn command(self) -> Command {
        self.command_with(&|name| std::env::var_os(name))
    }

    /// A [`Command`] that runs the tool as [`Tool::find_with`] finds it; where it finds none,
    /// the program's name, so that starting it fails as starting a missing program does, with
    /// the name in the error.
    pub fn command_with(self, env: &dyn Fn(&str) -> Option<OsString>) -> Command {
        match self.find_with(env) {
            Ok(path) => Command::new(path),
            Err(_) => Command::new(self.program()),
        }
    }

    /// Every installation of the tool, in the order [`Tool::find`] prefers them (only the one
    /// its environment variable names, when that is set).
    pub fn find_all(self) -> Result<Vec<PathBuf>, NotFound> {
        self.find_all_with(&|name| std::env::var_os(name))
    }

    /// [`Tool::find_all`], reading environment variables through `env`.
    pub fn find_all_with(
        self,
        env: &dyn Fn(&str) -> Option<OsString>,
    ) -> Result<Vec<PathBuf>, NotFound> {
        self.installed_with(env)
    }

    /// Finds the newest of the tool's installations, by the version its `--version` prints
    /// (the first one found among those of the same version). For compute-sanitizer: one
    /// older than the driver's CUDA release cannot instrument a program, and a machine may
    /// have a distribution's CUDA toolkit beside NVIDIA's newer one.
    pub fn find_newest(self) -> Result<PathBuf, NotFound> {
        self.find_newest_with(&|name| std::env::var_os(name))
    }

    /// [`Tool::find_newest`], reading environment variables through `env`.
    pub fn find_newest_with(
        self,
        env: &dyn Fn(&str) -> Option<OsString>,
    ) -> Result<PathBuf, NotFound> {
        let found = self.installed_with(env)?;
        let mut newest: Option<(Vec<u64>, PathBuf)> = None;
        for path in found {
            let version = version_of(&path)
                .map(|line| version_numbers(&line))
                .unwrap_or_default();
            if newest.as_ref().is_none_or(|(best, _)| version > *best) {
                newest = Some((version, path));
            }
        }
        Ok(newest.expect("installed_with returns at least one path").1)
    }

    /// Every installation of the tool, in the order [`Tool::find_with`] prefers them: the one
    /// its environment variable names alone when that is set, else those of the tool's
    /// directories and `PATH` that hold it (at least one, or the places looked at).
    fn installed_with(
        self,
        env: &dyn Fn(&str) -> Option<OsString>,
    ) -> Result<Vec<PathBuf>, NotFound> {
        let mut tried = Vec::new();
        let var = self.env_var();
        if let Some(path) = env(&var) {
            let path = PathBuf::from(path);
            if path.is_file() {
                return Ok(vec![path]);
            }
            tried.push(format!("${var} = {}", path.display()));
            return Err(NotFound { tool: self, tried });
        }
        let path_dirs: Vec<PathBuf> = env("PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        let mut candidates: Vec<PathBuf> = match self.origin() {
            Origin::Llvm => {
                let versioned = format!("{}-{LLVM_MAJOR}", self.program());
                std::iter::once(llvm_bin_dir_with(env).join(self.program()))
                    .chain(path_dirs.iter().map(|d| d.join(&versioned)))
                    .collect()
            }
            Origin::Cuda => path_dirs
                .iter()
                .map(|d| d.join(self.program()))
                .chain(
                    ["/usr/lib/cuda/bin", "/usr/local/cuda/bin"]
                        .iter()
                        .map(|d| Path::new(d).join(self.program())),
                )
                .chain(
                    CUDA_PIP_BIN_DIRS
                        .iter()
                        .map(|d| Path::new(CUDA_PIP_PREFIX).join(d).join(self.program())),
                )
                .collect(),
            Origin::System => path_dirs
                .iter()
                .map(|d| d.join(self.program()))
                .chain(std::iter::once(Path::new("/usr/bin").join(self.program())))
                .collect(),
            Origin::Rocm => path_dirs
                .iter()
                .map(|d| d.join(self.program()))
                .chain(std::iter::once(
                    Path::new("/opt/rocm/bin").join(self.program()),
                ))
                .collect(),
            Origin::Rustup => {
                let cargo_home = env("CARGO_HOME")
                    .map(PathBuf::from)
                    .or_else(|| env("HOME").map(|home| Path::new(&home).join(".cargo")));
                path_dirs
                    .iter()
                    .map(|d| d.join(self.program()))
                    .chain(cargo_home.map(|home| home.join("bin").join(self.program())))
                    .collect()
            }
        };
        let mut seen = std::collections::HashSet::new();
        candidates.retain(|p| seen.insert(p.clone()));
        let found: Vec<PathBuf> = candidates.iter().filter(|p| p.is_file()).cloned().collect();
        if !found.is_empty() {
            return Ok(found);
        }
        tried.push(format!("${var} (unset)"));
        tried.extend(candidates.iter().map(|p| p.display().to_string()));
        Err(NotFound { tool: self, tried })
    }

    /// For tests: the tool's path, or `None` after a visible `skipped:` line. Under `CI` a
    /// missing tool fails the test, naming the package the set-up should have installed.
    pub fn for_test(self) -> Option<PathBuf> {
        match self.find() {
            Ok(path) => Some(path),
            Err(e) if std::env::var_os("CI").is_some() => {
                panic!("{e}; CI requires it (`cargo xtask setup --cuda` installs it)")
            }
            Err(e) => {
                eprintln!("skipped: {e}");
                None
            }
        }
    }
}

/// The directory of the libraries compute-sanitizer injects into the program it checks, for
/// the compute-sanitizer at `program`: beside it (NVIDIA's layout), or under
/// `lib/nvidia-cuda-toolkit/compute-sanitizer` of its prefix (Debian's, whose program does not
/// find them by itself). `None` when neither holds them.
pub fn compute_sanitizer_libraries(program: &Path) -> Option<PathBuf> {
    let dir = program.parent()?;
    let debian = dir
        .parent()
        .map(|prefix| prefix.join("lib/nvidia-cuda-toolkit/compute-sanitizer"));
    [debian, Some(dir.to_path_buf())]
        .into_iter()
        .flatten()
        .find(|d| d.join("libsanitizer-collection.so").is_file())
}

/// The numbers of a version line, in order: `[2022, 3, 0]` for `Version 2022.3.0`, `[11, 8]`
/// for `Cuda compilation tools, release 11.8, V11.8.89` (only the first dotted number counts).
pub fn version_numbers(line: &str) -> Vec<u64> {
    let Some(start) = line
        .as_bytes()
        .windows(3)
        .position(|w| w[0].is_ascii_digit() && w[1] == b'.' && w[2].is_ascii_digit())
    else {
        return Vec::new();
    };
    let start = line[..start]
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    line[start..]
        .split(|c: char| !c.is_ascii_digit() && c != '.')
        .next()
        .unwrap_or("")
        .split('.')
        .map_while(|n| n.parse().ok())
        .collect()
}

/// Runs `program --version` and returns the line that names its version (the first line with a
/// dotted number, `22.1.8` or `release 11.8`), or why it did not run.
pub fn version_of(program: &Path) -> Result<String, String> {
    let out = Command::new(program)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot be run: {e}"))?;
    if !out.status.success() {
        return Err(format!("`--version` exited with {}", out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let dotted = |line: &&str| {
        line.as_bytes()
            .windows(3)
            .any(|w| w[0].is_ascii_digit() && w[1] == b'.' && w[2].is_ascii_digit())
    };
    Ok(text
        .lines()
        .find(dotted)
        .or_else(|| text.lines().find(|l| !l.trim().is_empty()))
        .unwrap_or("")
        .trim()
        .to_owned())
}

impl fmt::Display for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.program())
    }
}

/// A tool that is not installed, with every place looked at.
#[derive(Debug, Clone)]
pub struct NotFound {
    /// The program that was looked for.
    pub tool: Tool,
    /// Every place looked at, in order (overrides, directories, `PATH`).
    pub tried: Vec<String>,
}

impl fmt::Display for NotFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` not found (Debian package `{}`; looked at: {})",
            self.tool,
            self.tool.package(),
            self.tried.join(", ")
        )
    }
}

impl std::error::Error for NotFound {}

/// LLVM 22's binary directory, with the process environment.
pub fn llvm_bin_dir() -> PathBuf {
    llvm_bin_dir_with(&|name| std::env::var_os(name))
}

/// LLVM 22's binary directory: `$OFFLOAD_LLVM_BIN`, else what `llvm-config-22 --bindir`
/// prints, else Debian's `/usr/lib/llvm-22/bin`.
pub fn llvm_bin_dir_with(env: &dyn Fn(&str) -> Option<OsString>) -> PathBuf {
    if let Some(dir) = env("OFFLOAD_LLVM_BIN") {
        return PathBuf::from(dir);
    }
    static FROM_LLVM_CONFIG: OnceLock<Option<PathBuf>> = OnceLock::new();
    FROM_LLVM_CONFIG
        .get_or_init(|| {
            let out = Command::new(format!("llvm-config-{LLVM_MAJOR}"))
                .arg("--bindir")
                .output()
                .ok()?;
            let dir = String::from_utf8(out.stdout).ok()?;
            let dir = dir.trim();
            (out.status.success() && !dir.is_empty()).then(|| PathBuf::from(dir))
        })
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEBIAN_LLVM_BIN))
}

/// Every Debian package the set-up installs: the tools' packages (`nvidia-cuda-toolkit` only
/// when `cuda`), then [`DEVICE_LINK_LIBRARY_PACKAGES`] and [`OTHER_LIBRARY_PACKAGES`], each
/// once.
pub fn packages(cuda: bool) -> Vec<&'static str> {
    let mut all: Vec<&'static str> = Vec::new();
    let tools = Tool::ALL
        .iter()
        .filter(|t| t.installed_by_setup())
        .filter(|t| cuda || t.origin() != Origin::Cuda)
        .map(|t| t.package());
    let libraries = DEVICE_LINK_LIBRARY_PACKAGES
        .iter()
        .chain(OTHER_LIBRARY_PACKAGES)
        .copied();
    for package in tools.chain(libraries) {
        if !all.contains(&package) {
            all.push(package);
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_var_names() {
        assert_eq!(Tool::Ptxas.env_var(), "OFFLOAD_PTXAS");
        assert_eq!(Tool::LdLld.env_var(), "OFFLOAD_LD_LLD");
        assert_eq!(
            Tool::ClangOffloadBundler.env_var(),
            "OFFLOAD_CLANG_OFFLOAD_BUNDLER"
        );
    }

    #[test]
    fn every_tool_is_listed_once_with_a_package() {
        for (i, tool) in Tool::ALL.iter().enumerate() {
            assert!(!Tool::ALL[..i].contains(tool), "{tool} listed twice");
            assert_eq!(
                packages(true).contains(&tool.package()),
                tool.installed_by_setup(),
                "{tool}"
            );
        }
        assert!(packages(true).contains(&"clang-tools-22"));
        assert!(!packages(false).contains(&"nvidia-cuda-toolkit"));
        assert!(packages(false).contains(&"chromium"));
        assert!(!packages(true).contains(&"nsight-systems"));
    }

    #[test]
    fn override_wins_and_a_bad_override_is_reported() {
        let here = std::env::current_exe().unwrap();
        let env = |name: &str| (name == "OFFLOAD_CLANG").then(|| here.clone().into_os_string());
        assert_eq!(Tool::Clang.find_with(&env).unwrap(), here);
        let env =
            |name: &str| (name == "OFFLOAD_CLANG").then(|| OsString::from("/nonexistent/clang"));
        let err = Tool::Clang.find_with(&env).unwrap_err();
        assert!(
            err.to_string()
                .contains("$OFFLOAD_CLANG = /nonexistent/clang"),
            "{err}"
        );
        assert!(err.to_string().contains("clang-22"), "{err}");
    }

    #[test]
    fn llvm_tools_are_looked_for_versioned_on_path() {
        let env = |name: &str| match name {
            "OFFLOAD_LLVM_BIN" => Some(OsString::from("/nonexistent/llvm")),
            "PATH" => Some(OsString::from("/nonexistent/bin")),
            _ => None,
        };
        let err = Tool::LlvmAr.find_with(&env).unwrap_err();
        assert_eq!(
            err.tried,
            [
                "$OFFLOAD_LLVM_AR (unset)",
                "/nonexistent/llvm/llvm-ar",
                "/nonexistent/bin/llvm-ar-22"
            ]
        );
    }

    #[test]
    fn version_numbers_are_read_from_version_lines() {
        assert_eq!(version_numbers("Version 2022.3.0"), [2022, 3, 0]);
        assert_eq!(
            version_numbers("Version 2025.3.1.0 (build 36400806) (public-release)"),
            [2025, 3, 1, 0]
        );
        assert_eq!(
            version_numbers("Cuda compilation tools, release 11.8, V11.8.89"),
            [11, 8]
        );
        assert_eq!(version_numbers("Debian clang version 22.1.8"), [22, 1, 8]);
        assert!(version_numbers("no version").is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn the_newest_installation_is_found_wherever_it_is_on_path() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let install = |dir: &str, version: &str| {
            let bin = root.path().join(dir);
            std::fs::create_dir(&bin).unwrap();
            let program = bin.join("compute-sanitizer");
            std::fs::write(
                &program,
                format!(
                    "#!/bin/sh\necho 'NVIDIA (R) Compute Sanitizer'\necho 'Version {version}'\n"
                ),
            )
            .unwrap();
            std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
            bin
        };
        let old = install("old", "2022.3.0");
        let new = install("new", "2025.3.1.0");
        let path = std::env::join_paths([&old, &new]).unwrap();
        let env = |name: &str| (name == "PATH").then(|| path.clone());
        let tool = Tool::ComputeSanitizer;
        assert_eq!(tool.find_with(&env).unwrap(), old.join("compute-sanitizer"));
        assert_eq!(
            tool.find_newest_with(&env).unwrap(),
            new.join("compute-sanitizer")
        );
    }
}
