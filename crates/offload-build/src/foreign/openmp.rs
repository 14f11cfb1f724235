//! C++ with OpenMP target offload, device-linked and wrapped at build time into one
//! relocatable object, archived, and linked into the host program with LLVM's offload
//! runtime (`libomptarget`).

use std::path::{Path, PathBuf};

use super::{Clang, Options, Source};
use crate::arch::OffloadArch;
use crate::env::Env;
use crate::error::{Error, Result};

/// The static library built from a build's OpenMP C++ sources, and how to link it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenmpLibrary {
    /// The directory holding `lib<link_name>.a`.
    pub dir: PathBuf,
    pub link_name: String,
    /// The directory of `libomptarget.so` and `libomp.so`, for the link search path and the
    /// run-time search path.
    pub runtime_dir: PathBuf,
    /// The files the library depends on (sources and the headers they include).
    pub watch: Vec<PathBuf>,
}

impl OpenmpLibrary {
    /// The `cargo:` lines that link the library and the offload runtime into the host program.
    pub fn cargo_directives(&self) -> Vec<String> {
        vec![
            format!("cargo:rustc-link-search=native={}", self.dir.display()),
            format!("cargo:rustc-link-lib=static={}", self.link_name),
            format!(
                "cargo:rustc-link-search=native={}",
                self.runtime_dir.display()
            ),
            "cargo:rustc-link-lib=dylib=omptarget".to_owned(),
            "cargo:rustc-link-lib=dylib=omp".to_owned(),
            format!(
                "cargo:rustc-link-arg=-Wl,-rpath,{}",
                self.runtime_dir.display()
            ),
        ]
    }
}

/// Compiles `sources` with `-fopenmp` for the host and the offload targets `archs` allows,
/// and builds the library. `package` names it.
pub fn build(
    _env: &Env,
    _clang: &Clang,
    _sources: &[&Source],
    _archs: &[OffloadArch],
    _options: &Options,
    _out_dir: &Path,
    _package: &str,
) -> Result<OpenmpLibrary> {
    Err(Error::Prerequisite(
        "OpenMP C++ sources are not supported yet".to_owned(),
    ))
}
