use std::path::PathBuf;

use crate::command::CommandError;

/// Everything that can stop an offload build.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error(transparent)]
    Command(#[from] CommandError),

    #[error("{what}: {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("environment variable {name} is not set{context}")]
    MissingEnv { name: &'static str, context: String },

    #[error("unknown offload architecture `{name}` in {origin}; known: {known}")]
    UnknownArch {
        name: String,
        origin: String,
        known: String,
    },

    #[error("invalid offload architecture `{name}` in {origin}: {reason}")]
    InvalidArch {
        name: String,
        origin: String,
        reason: String,
    },

    #[error("{origin}: no offload architecture given (expected e.g. `sm_80,gfx90a,host`)")]
    EmptyArchList { origin: String },

    #[error("could not read the package graph with `cargo metadata`: {reason}")]
    Metadata { reason: String },

    #[error("{manifest}: [package.metadata.offload] is malformed: {reason}")]
    BadMetadata { manifest: PathBuf, reason: String },

    #[error(
        "no kernel crate found for `{package}`: mark a dependency with \
         `[package.metadata.offload] kernels = true`, or name it with `Build::kernel_crate`"
    )]
    NoKernelCrates { package: String },

    #[error("package `{name}` is not in the package graph (workspace members: {known})")]
    UnknownPackage { name: String, known: String },

    #[error("kernel crate `{name}` is not a dependency of `{package}` (known: {known})")]
    UnknownKernelCrate {
        name: String,
        package: String,
        known: String,
    },

    #[error("{0}")]
    Prerequisite(String),

    #[error(
        "clang-{major} is needed to compile CUDA, HIP and C++ sources, and none was found \
         (tried {tried}). Fix: `apt-get install clang-{major}` (or `cargo xtask setup`), or set \
         OFFLOAD_CLANG to its path",
        major = offload_toolchain::LLVM_MAJOR
    )]
    ClangNotFound { tried: String },

    #[error(
        "{path} is not clang {major} ({version:?}{found}); CUDA, HIP and C++ device code must be \
         compiled by the LLVM the Rust kernels are linked with. Fix: `apt-get install \
         clang-{major}` and set OFFLOAD_CLANG=/usr/lib/llvm-{major}/bin/clang",
        major = offload_toolchain::LLVM_MAJOR,
        found = found.map(|m| format!(", major {m}")).unwrap_or_default()
    )]
    ClangWrongMajor {
        path: PathBuf,
        version: String,
        found: Option<u32>,
    },

    #[error("{language} source {path}: {reason}")]
    BadSource {
        language: &'static str,
        path: PathBuf,
        reason: String,
    },

    #[error(
        "compiling the {language} source {path} for {arch} failed; clang's diagnostics are \
         above. Command: {command}"
    )]
    ForeignCompile {
        language: &'static str,
        path: PathBuf,
        arch: String,
        command: String,
    },

    #[error("prebuilt kernel bundle {path}: {reason}")]
    BadPrebuilt { path: PathBuf, reason: String },

    #[error("kernel crate `{krate}`: prebuilt bundle not usable: {reason}")]
    Prebuilt { krate: String, reason: String },

    #[error(
        "the device build of `{krate}` for {arch} failed; rustc's diagnostics are above. \
         Command: {command}"
    )]
    DeviceBuild {
        krate: String,
        arch: String,
        command: String,
    },

    #[error("the device build of `{krate}` for {arch} produced no {what}; command: {command}")]
    MissingArtifact {
        krate: String,
        arch: String,
        what: &'static str,
        command: String,
    },

    #[error("device image {path}: {reason}")]
    BadImage { path: PathBuf, reason: String },

    #[error(transparent)]
    Format(#[from] offload_format::Error),

    #[cfg(feature = "llvm")]
    #[error(transparent)]
    DeviceLink(#[from] crate::device_link::LinkError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) trait IoContext<T> {
    fn io(self, what: &'static str, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn io(self, what: &'static str, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|source| Error::Io {
            what,
            path: path.into(),
            source,
        })
    }
}
