//! Device code not written in Rust: CUDA (`.cu`) and HIP (`.hip`) kernels and C++ with OpenMP
//! target regions, compiled with clang-22 from a build script (see [`crate::Build::cuda`]).
//!
//! CUDA and HIP sources become device images beside the Rust kernel crates' images, one
//! module per source file (named after its stem, so `scale.cu` and `scale.hip` form one module
//! `scale` with NVIDIA and AMD images). OpenMP C++ becomes a static library linked into the
//! host program with LLVM's offload runtime.

pub mod clang;
#[cfg(feature = "llvm")]
pub mod cuda;
pub mod depfile;
#[cfg(feature = "llvm")]
pub mod hip;
pub mod openmp;
#[cfg(feature = "llvm")]
pub mod rdc;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use offload_format::{AmdTargetId, Sm};

use crate::arch::OffloadArch;
use crate::env::Env;
use crate::error::{Error, Result};
use crate::image::DeviceImage;

pub use clang::Clang;

/// The language of a source file given to [`crate::Build`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    /// CUDA: device code for every `sm_XX` of the build.
    Cuda,
    /// HIP: device code for every AMD target ID of the build.
    Hip,
    /// C++ with `#pragma omp target` regions, offloaded through LLVM's offload runtime.
    OpenmpCpp,
}

impl Language {
    pub fn name(self) -> &'static str {
        match self {
            Language::Cuda => "CUDA",
            Language::Hip => "HIP",
            Language::OpenmpCpp => "C++ (OpenMP)",
        }
    }
}

/// One source file given to the build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub language: Language,
    pub path: PathBuf,
    /// Compiled as relocatable device code and device-linked with the Rust kernel crate
    /// ([`rdc`]) instead of into images of its own.
    pub relocatable: bool,
}

impl Source {
    /// The kernel module its images belong to: the file stem (`kernels/scale.cu` → `scale`).
    pub fn module(&self) -> String {
        self.path
            .file_stem()
            .map(|s| s.to_string_lossy().replace(['-', '.'], "_"))
            .unwrap_or_default()
    }
}

/// What every clang command of a build gets: include directories, macro definitions and
/// extra flags, in the order given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    pub includes: Vec<PathBuf>,
    pub defines: Vec<(String, Option<String>)>,
    pub flags: Vec<String>,
}

impl Options {
    /// `-I`, `-D` and the extra flags as clang arguments.
    pub fn clang_args(&self) -> Vec<OsString> {
        let mut args = Vec::new();
        for dir in &self.includes {
            let mut arg = OsString::from("-I");
            arg.push(dir);
            args.push(arg);
        }
        for (name, value) in &self.defines {
            args.push(match value {
                Some(v) => format!("-D{name}={v}").into(),
                None => format!("-D{name}").into(),
            });
        }
        args.extend(self.flags.iter().map(OsString::from));
        args
    }
}

/// The directory of a build's intermediate files for one source: `<out>/offload-src/<stem>-<hash>`
/// (the hash of the path keeps two `scale.cu` in different directories apart).
pub fn work_dir(out_dir: &Path, source: &Source) -> PathBuf {
    use sha2::Digest;
    let hash = sha2::Sha256::digest(source.path.as_os_str().as_encoded_bytes());
    let hex: String = hash[..6].iter().map(|b| format!("{b:02x}")).collect();
    out_dir
        .join("offload-src")
        .join(format!("{}-{hex}", source.module()))
}

/// What one CUDA or HIP source compiled to: its images and the files it depends on.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub images: Vec<DeviceImage>,
    pub watch: Vec<PathBuf>,
}

/// Runs one clang compile of `source` for `arch`, its diagnostics going straight to the
/// user; a failure names the source, the architecture and the command.
#[cfg_attr(
    not(feature = "llvm"),
    expect(dead_code, reason = "CUDA and HIP compiles need LLVM")
)]
pub(crate) fn run_clang(env: &Env, cmd: &mut Command, source: &Source, arch: &str) -> Result<()> {
    let line = crate::command::CommandLine::of(cmd);
    if env.verbose() {
        eprintln!("offload-build: running {line}");
    }
    match crate::command::run_stderr_inherited(cmd) {
        Ok(_) => Ok(()),
        Err(crate::command::CommandError::Failed { .. }) => Err(Error::ForeignCompile {
            language: source.language.name(),
            path: source.path.clone(),
            arch: arch.to_owned(),
            command: line.to_string(),
        }),
        Err(e) => Err(e.into()),
    }
}

/// What a build's foreign sources produced.
#[derive(Debug, Clone, Default)]
pub struct Built {
    /// The device images of the CUDA and HIP sources, source by source, each in architecture
    /// order.
    pub images: Vec<DeviceImage>,
    /// The library of the OpenMP C++ sources, if any.
    pub openmp: Option<openmp::OpenmpLibrary>,
    /// Every file the outputs depend on: the sources and the headers clang read.
    pub watch: Vec<PathBuf>,
}

/// Compiles every source for the architectures its language serves: CUDA for the `sm_XX`,
/// HIP for the AMD target IDs, OpenMP C++ for the host and its offload targets. `package`
/// names the host package, for the OpenMP library.
pub fn build(
    env: &Env,
    sources: &[Source],
    archs: &[OffloadArch],
    options: &Options,
    out_dir: &Path,
    package: &str,
) -> Result<Built> {
    if sources.iter().all(|s| s.relocatable) {
        return Ok(Built::default());
    }
    for source in sources {
        if !source.path.is_file() {
            return Err(Error::BadSource {
                language: source.language.name(),
                path: source.path.clone(),
                reason: "no such file".to_owned(),
            });
        }
    }
    let clang = clang::find(env)?;
    println!(
        "offload-build: compiling CUDA/HIP/C++ sources with {} ({}, found through {})",
        clang.path.display(),
        clang.version,
        clang.found_via
    );
    let sms: Vec<Sm> = archs
        .iter()
        .filter_map(|a| match a {
            OffloadArch::Nvptx(sm) => Some(*sm),
            _ => None,
        })
        .collect();
    let amd: Vec<AmdTargetId> = archs
        .iter()
        .filter_map(|a| match a {
            OffloadArch::Amdgcn(id) => Some(*id),
            _ => None,
        })
        .collect();
    let mut built = Built::default();
    for source in sources.iter().filter(|s| !s.relocatable) {
        let compiled: Compiled = match source.language {
            #[cfg(feature = "llvm")]
            Language::Cuda => cuda::build(env, &clang, source, &sms, options, out_dir)?,
            #[cfg(feature = "llvm")]
            Language::Hip => hip::build(env, &clang, source, &amd, options, out_dir)?,
            #[cfg(not(feature = "llvm"))]
            Language::Cuda | Language::Hip => {
                if !sms.is_empty() || !amd.is_empty() {
                    return Err(Error::Prerequisite(format!(
                        "building {} for a GPU needs offload-build's `llvm` feature (LLVM 22: \
                     `apt-get install llvm-22-dev`, then enable the feature)",
                        source.path.display()
                    )));
                }
                Compiled {
                    images: Vec::new(),
                    watch: Vec::new(),
                }
            }
            Language::OpenmpCpp => continue,
        };
        built.images.extend(compiled.images);
        extend_unique(&mut built.watch, compiled.watch);
    }
    let openmp: Vec<&Source> = sources
        .iter()
        .filter(|s| s.language == Language::OpenmpCpp)
        .collect();
    if !openmp.is_empty() {
        let lib = openmp::build(env, &clang, &openmp, archs, options, out_dir, package)?;
        extend_unique(&mut built.watch, lib.watch.clone());
        built.openmp = Some(lib);
    }
    Ok(built)
}

/// Compiles the relocatable CUDA and HIP sources of `sources` for the kernel crate's link
/// (see [`rdc`]); nothing, and no clang, when there are none.
#[cfg(feature = "llvm")]
pub fn build_linked(
    env: &Env,
    sources: &[Source],
    archs: &[OffloadArch],
    options: &Options,
    out_dir: &Path,
    package: &str,
) -> Result<rdc::LinkedSources> {
    let linked: Vec<&Source> = sources.iter().filter(|s| s.relocatable).collect();
    if linked.is_empty() {
        return Ok(rdc::LinkedSources::default());
    }
    let clang = clang::find(env)?;
    rdc::build(env, &clang, &linked, archs, options, out_dir, package)
}

fn extend_unique(into: &mut Vec<PathBuf>, paths: Vec<PathBuf>) {
    for path in paths {
        if !into.contains(&path) {
            into.push(path);
        }
    }
}
