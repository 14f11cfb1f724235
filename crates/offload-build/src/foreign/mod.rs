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
mod source;

use std::path::{Path, PathBuf};

use offload_format::{AmdTargetId, Sm};

use crate::arch::OffloadArch;
use crate::env::Env;
use crate::error::{Error, Result};
use crate::image::DeviceImage;

pub use clang::Clang;
use source::{Compiled, extend_unique};
pub use source::{Language, Options, Source};

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
