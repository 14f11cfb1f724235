//! Device code not written in Rust: CUDA (`.cu`) and HIP (`.hip`) kernels and C++ with OpenMP
//! target regions, compiled with clang-22 from a build script (see [`crate::Build::cuda`]).
//!
//! CUDA and HIP sources become device images beside the Rust kernel crates' images, one
//! module per source file (named after its stem, so `scale.cu` and `scale.hip` form one module
//! `scale` with NVIDIA and AMD images). OpenMP C++ becomes a static library linked into the
//! host program with LLVM's offload runtime.

pub mod clang;
pub mod cuda;
pub mod depfile;
pub mod hip;
pub mod openmp;
pub mod rdc;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use offload_format::{AmdTargetId, Sm};

use crate::arch::OffloadArch;
use crate::env::Env;
use crate::error::{Error, IoContext, Result};
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
    /// The language's name in messages: `CUDA`, `HIP` or `C++ (OpenMP)`.
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
    /// What the file is written in, which decides how clang compiles it.
    pub language: Language,
    /// The file, as given to the build (relative to the manifest directory, or absolute).
    pub path: PathBuf,
    /// Compiled as relocatable device code and device-linked with the Rust kernel crate
    /// (`rdc`) instead of into images of its own.
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
    /// Directories passed as `-I`.
    pub includes: Vec<PathBuf>,
    /// Macros passed as `-D`: a name, with a value or without.
    pub defines: Vec<(String, Option<String>)>,
    /// Further clang arguments, passed as given after the others.
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
    let hash = hmac_sha256::Hash::hash(source.path.as_os_str().as_encoded_bytes());
    let hex: String = hash[..6].iter().map(|b| format!("{b:02x}")).collect();
    out_dir
        .join("offload-src")
        .join(format!("{}-{hex}", source.module()))
}

/// What one CUDA or HIP source compiled to: its images and the files it depends on.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// One image per GPU architecture.
    pub images: Vec<DeviceImage>,
    /// The source and the headers clang read, from its dependency file.
    pub watch: Vec<PathBuf>,
}

impl Compiled {
    /// No images yet, watching `source` itself.
    fn watching(source: &Source) -> Compiled {
        Compiled {
            images: Vec::new(),
            watch: vec![source.path.clone()],
        }
    }
}

/// Runs one clang compile of `source` for `arch`, its diagnostics going straight to the
/// user; a failure names the source, the architecture and the command.
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

/// A build's foreign sources, checked to exist, with the clang that compiles them: found once
/// for the relocatable sources (compiled before the kernel crates' link) and the others.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The clang found for these sources.
    pub clang: Clang,
    /// The sources, in the order given.
    pub sources: Vec<Source>,
    /// Include directories, macros and flags for every clang command.
    pub options: Options,
    /// The build script's `OUT_DIR`, under which the intermediate files go.
    pub out_dir: PathBuf,
    /// The host package, which names the libraries.
    pub package: String,
}

impl Plan {
    /// Checks that every source exists and finds clang (saying which, in the build script's
    /// output).
    pub fn new(
        env: &Env,
        sources: &[Source],
        options: &Options,
        out_dir: &Path,
        package: &str,
    ) -> Result<Plan> {
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
        Ok(Plan {
            clang,
            sources: sources.to_vec(),
            options: options.clone(),
            out_dir: out_dir.to_owned(),
            package: package.to_owned(),
        })
    }

    /// Compiles every source but the relocatable ones for the architectures its language
    /// serves: CUDA for the `sm_XX`, HIP for the AMD target IDs, OpenMP C++ for the host and
    /// its offload targets.
    pub fn build(&self, env: &Env, archs: &[OffloadArch]) -> Result<Built> {
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
        let (clang, options, out_dir) = (&self.clang, &self.options, self.out_dir.as_path());
        let mut built = Built::default();
        for source in self.sources.iter().filter(|s| !s.relocatable) {
            let targets: Vec<String> = match source.language {
                Language::Cuda => sms.iter().map(|s| s.to_string()).collect(),
                Language::Hip => amd.iter().map(|a| a.to_string()).collect(),
                Language::OpenmpCpp => vec![crate::arch::host_triple().to_owned()],
            };
            if !targets.is_empty() {
                crate::status::status(
                    env,
                    "Compiling",
                    &format!(
                        "{} {} ({})",
                        source.language.name(),
                        shown(&source.path),
                        targets.join(", ")
                    ),
                );
            }
            let compiled: Compiled = match source.language {
                Language::Cuda => cuda::build(env, clang, source, &sms, options, out_dir)?,
                #[cfg(feature = "image-readers")]
                Language::Hip => hip::build(env, clang, source, &amd, options, out_dir)?,
                #[cfg(not(feature = "image-readers"))]
                Language::Hip => {
                    if !amd.is_empty() {
                        return Err(Error::Prerequisite(format!(
                            "building the HIP source {} for AMD GPUs needs offload-build's \
                             `hip` feature (the reader of AMD code objects' metadata): \
                             `offload-build = {{ version = \"{}\", features = [\"hip\"] }}`",
                            source.path.display(),
                            env!("CARGO_PKG_VERSION")
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
        let openmp: Vec<&Source> = self
            .sources
            .iter()
            .filter(|s| s.language == Language::OpenmpCpp)
            .collect();
        if !openmp.is_empty() {
            let lib = openmp::build(env, clang, &openmp, archs, options, out_dir, &self.package)?;
            extend_unique(&mut built.watch, lib.watch.clone());
            built.openmp = Some(lib);
        }
        Ok(built)
    }

    /// Compiles the relocatable CUDA and HIP sources for the kernel crate's link (see
    /// [`rdc`]).
    pub fn build_linked(&self, env: &Env, archs: &[OffloadArch]) -> Result<rdc::LinkedSources> {
        let linked: Vec<&Source> = self.sources.iter().filter(|s| s.relocatable).collect();
        if linked.is_empty() {
            return Ok(rdc::LinkedSources::default());
        }
        for source in &linked {
            crate::status::status(
                env,
                "Compiling",
                &format!(
                    "{} {} (relocatable, {})",
                    source.language.name(),
                    shown(&source.path),
                    crate::status::arch_list(archs)
                ),
            );
        }
        rdc::build(
            env,
            &self.clang,
            &linked,
            archs,
            &self.options,
            &self.out_dir,
            &self.package,
        )
    }
}

/// `Plan::new` and `Plan::build` in one call.
pub fn build(
    env: &Env,
    sources: &[Source],
    archs: &[OffloadArch],
    options: &Options,
    out_dir: &Path,
    package: &str,
) -> Result<Built> {
    Plan::new(env, sources, options, out_dir, package)?.build(env, archs)
}

/// Writes `members` as a static library at `path`, with the symbol index a linker reads,
/// atomically: an interrupted build leaves the previous library or none.
pub(crate) fn write_static_library(
    path: &Path,
    members: &[offload_format::archive::ArchiveMember<'_>],
) -> Result<()> {
    let mut bytes = Vec::new();
    offload_format::archive::write_archive(&mut bytes, members)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).io("creating", dir)?;
    }
    crate::fsutil::write_atomic(path, &bytes)
}

fn extend_unique(into: &mut Vec<PathBuf>, paths: Vec<PathBuf>) {
    for path in paths {
        if !into.contains(&path) {
            into.push(path);
        }
    }
}

/// A source's path as a status line shows it: relative to the package (a build script's
/// working directory), where it lies inside it.
fn shown(path: &Path) -> String {
    std::env::current_dir()
        .ok()
        .and_then(|dir| path.strip_prefix(dir).ok().map(Path::to_owned))
        .unwrap_or_else(|| path.to_owned())
        .display()
        .to_string()
}
