//! What the foreign sources' compiles share: the sources and their languages, the clang
//! options, each source's work directory, what one compile produced, and the clang run, the
//! static library and the watch list every language's compile uses.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::env::Env;
use crate::error::{Error, IoContext, Result};
use crate::image::DeviceImage;

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
    pub(super) fn watching(source: &Source) -> Compiled {
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

pub(crate) fn extend_unique(into: &mut Vec<PathBuf>, paths: Vec<PathBuf>) {
    for path in paths {
        if !into.contains(&path) {
            into.push(path);
        }
    }
}
