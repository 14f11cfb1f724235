use std::path::PathBuf;

use crate::command::CommandError;

/// Everything that can stop an offload build.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An external program could not be run or failed.
    #[error(transparent)]
    Command(#[from] CommandError),

    /// A file operation failed.
    #[error("{what}: {path}: {source}")]
    Io {
        /// What was being done, e.g. `reading the manifest`.
        what: &'static str,
        /// The file or directory it was done on.
        path: PathBuf,
        /// The error the operating system reported.
        #[source]
        source: std::io::Error,
    },

    /// An environment variable the build needs (one cargo sets for build scripts) is not set.
    #[error("environment variable {name} is not set{context}")]
    MissingEnv {
        /// The variable's name.
        name: &'static str,
        /// Extra text after the message, e.g. that `Build` must run in a build script; may be
        /// empty.
        context: String,
    },

    /// An `--offload-arch` name that is no known architecture.
    #[error(
        "unknown offload architecture `{name}` in {origin}{}; known: {known}",
        suggestion.as_ref().map(|s| format!("; did you mean `{s}`?")).unwrap_or_default()
    )]
    UnknownArch {
        /// The name as given.
        name: String,
        /// Where the list came from, e.g. `OFFLOAD_ARCH`.
        origin: String,
        /// The known name closest to `name`, when one is close.
        suggestion: Option<String>,
        /// The known names in brief: `host`, `native` and the range of each GPU family.
        known: String,
    },

    /// An `--offload-arch` name that is known but malformed (e.g. a bad target-ID feature).
    #[error("invalid offload architecture `{name}` in {origin}: {reason}")]
    InvalidArch {
        /// The name as given.
        name: String,
        /// Where the list came from, e.g. `OFFLOAD_ARCH`.
        origin: String,
        /// What is wrong with it.
        reason: String,
    },

    /// An architecture list with no entries.
    #[error("{origin}: no offload architecture given (expected e.g. `sm_80,gfx90a,host`)")]
    EmptyArchList {
        /// Where the list came from, e.g. `OFFLOAD_ARCH`.
        origin: String,
    },

    /// `cargo metadata` failed or its output could not be read.
    #[error("could not read the package graph with `cargo metadata`: {reason}")]
    Metadata {
        /// What failed.
        reason: String,
    },

    /// A manifest's `[package.metadata.offload]` table is malformed.
    #[error("{manifest}: [package.metadata.offload] is malformed: {reason}")]
    BadMetadata {
        /// The manifest's path.
        manifest: PathBuf,
        /// What is wrong with the table.
        reason: String,
    },

    /// The host package has no kernel crate among its dependencies and none was named.
    #[error(
        "no kernel crate found for `{package}`: mark a dependency with \
         `[package.metadata.offload] kernels = true`, or name it with `Build::kernel_crate`"
    )]
    NoKernelCrates {
        /// The host package's name.
        package: String,
    },

    /// A package name that is not in the package graph.
    #[error("package `{name}` is not in the package graph (workspace members: {known})")]
    UnknownPackage {
        /// The name as given.
        name: String,
        /// The workspace members, comma-separated.
        known: String,
    },

    /// A kernel crate named with `Build::kernel_crate` that the host package does not depend on.
    #[error("kernel crate `{name}` is not a dependency of `{package}` (known: {known})")]
    UnknownKernelCrate {
        /// The name as given.
        name: String,
        /// The host package's name.
        package: String,
        /// The kernel crates it depends on, comma-separated.
        known: String,
    },

    /// A tool or setting the build needs is missing; the text says which and how to fix it.
    #[error("{0}")]
    Prerequisite(String),

    /// No clang of LLVM's major version was found to compile CUDA, HIP or C++ sources.
    #[error(
        "clang-{major} is needed to compile CUDA, HIP and C++ sources, and none was found \
         (tried {tried}). Fix: `cargo offload setup --system` (or `apt-get install clang-{major}`), or set \
         OFFLOAD_CLANG to its path",
        major = offload_toolchain::LLVM_MAJOR
    )]
    ClangNotFound {
        /// The places looked in.
        tried: String,
    },

    /// The clang found is not of LLVM's major version.
    #[error(
        "{path} is not clang {major} ({version:?}{found}); CUDA, HIP and C++ device code must be \
         compiled by the LLVM the Rust kernels are linked with. Fix: `apt-get install \
         clang-{major}` and set OFFLOAD_CLANG=/usr/lib/llvm-{major}/bin/clang",
        major = offload_toolchain::LLVM_MAJOR,
        found = found.map(|m| format!(", major {m}")).unwrap_or_default()
    )]
    ClangWrongMajor {
        /// The clang found.
        path: PathBuf,
        /// Its `--version` line.
        version: String,
        /// Its major version, when the line could be read.
        found: Option<u32>,
    },

    /// A CUDA, HIP or C++ source that cannot be compiled as given (e.g. missing, or a bad name).
    #[error("{language} source {path}: {reason}")]
    BadSource {
        /// The source's language: `CUDA`, `HIP` or `C++`.
        language: &'static str,
        /// The source file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// clang failed on a CUDA, HIP or C++ source; its diagnostics were printed before.
    #[error(
        "compiling the {language} source {path} for {arch} failed; clang's diagnostics are \
         above. Command: {command}"
    )]
    ForeignCompile {
        /// The source's language: `CUDA`, `HIP` or `C++`.
        language: &'static str,
        /// The source file.
        path: PathBuf,
        /// The offload architecture it was compiled for.
        arch: String,
        /// The clang command line, for running it by hand.
        command: String,
    },

    /// A prebuilt kernel bundle that cannot be read.
    #[error("prebuilt kernel bundle {path}: {reason}")]
    BadPrebuilt {
        /// The bundle file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// A kernel crate's prebuilt bundle cannot be used for this build (e.g. stale, or missing an
    /// architecture).
    #[error("kernel crate `{krate}`: prebuilt bundle not usable: {reason}")]
    Prebuilt {
        /// The kernel crate's name.
        krate: String,
        /// Why the bundle cannot be used.
        reason: String,
    },

    /// The nested cargo build of a kernel crate failed; rustc's errors are shown before.
    #[error("the device build of `{krate}` for {arch} failed: {why}")]
    DeviceBuild {
        /// The kernel crate's name.
        krate: String,
        /// The offload architectures it was built for.
        arch: String,
        /// Where rustc's errors are, or cargo's own words and the command.
        why: String,
    },

    /// A nested device build succeeded but left no file of the kind expected.
    #[error("the device build of `{krate}` for {arch} produced no {what}; command: {command}")]
    MissingArtifact {
        /// The kernel crate's name.
        krate: String,
        /// The offload architecture it was built for.
        arch: String,
        /// The kind of file expected, e.g. `shared object`.
        what: &'static str,
        /// The cargo command line, for running it by hand.
        command: String,
    },

    /// A device image that cannot be read or wrapped.
    #[error("device image {path}: {reason}")]
    BadImage {
        /// The image file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// The embedding object rustc compiled is not what the registration needs.
    #[error("embedding object {path}: {reason}")]
    BadEmbeddingObject {
        /// The object file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// No device link executable (`cargo-offload-device`) was found for a GPU build by an
    /// `offload-build` without its `llvm` feature.
    #[error(
        "GPU device links run in `cargo-offload-device` {version} (protocol {protocol}), and none \
         was found (tried {tried}). Fix: `cargo install cargo-offload --version {version} \
         --locked` (it installs `cargo-offload-device` beside `cargo-offload`), or set \
         OFFLOAD_DEVICE_LINKER to its path"
    )]
    DeviceLinkerMissing {
        /// The places looked in.
        tried: String,
        /// The version needed: `offload-build`'s.
        version: &'static str,
        /// The protocol needed.
        protocol: u32,
    },

    /// The device link executable found is of another version or protocol.
    #[error(
        "{} is `{found}`, but this build needs `cargo-offload-device` {version} (protocol \
         {protocol}) for its GPU device links. Fix: `cargo install cargo-offload --version \
         {version} --locked`, or set OFFLOAD_DEVICE_LINKER to a matching one", path.display()
    )]
    DeviceLinkerMismatch {
        /// The executable found.
        path: PathBuf,
        /// What it said its version is (`--device-link-protocol`), or why it said nothing.
        found: String,
        /// The version needed: `offload-build`'s.
        version: &'static str,
        /// The protocol needed.
        protocol: u32,
    },

    /// The device link process reported an error.
    #[error("the device link of `{krate}` for {arch} failed: error[{code}]: {message}")]
    DeviceLinkFailed {
        /// The kernel crate.
        krate: String,
        /// The architecture, or the architectures of the nested build, that failed.
        arch: String,
        /// The error's code, as the device link process gave it.
        code: String,
        /// The error's text, its causes on the lines after it.
        message: String,
    },

    /// The device link process ended without reporting its result: killed by a signal, or an
    /// exit status and no result file.
    #[error(
        "the device link of `{krate}` for {arch} ended abnormally: `{command}` {how}; its \
         standard error is above"
    )]
    DeviceLinkCrashed {
        /// The kernel crate.
        krate: String,
        /// The architectures of the nested build.
        arch: String,
        /// The command, for running it by hand.
        command: String,
        /// `was killed by signal 6 (SIGABRT)`, `exited with status 3 without a result`.
        how: String,
    },

    /// The device link process's result files cannot be read.
    #[error("the device link result {path}: {reason}")]
    DeviceLinkOutput {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// Reading or writing an offloading format failed.
    #[error(transparent)]
    Format(#[from] offload_format::Error),

    /// Linking a GPU image failed.
    #[error(transparent)]
    DeviceLink(#[from] LinkError),
}

/// `Result` with this crate's [`Error`].
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

offload_format::error_codes! {
    Error {
        Command => "OFF2001",
        Io => "OFF2002",
        MissingEnv => "OFF2003",
        UnknownArch => "OFF2004",
        InvalidArch => "OFF2005",
        EmptyArchList => "OFF2006",
        Metadata => "OFF2007",
        BadMetadata => "OFF2008",
        NoKernelCrates => "OFF2009",
        UnknownPackage => "OFF2010",
        UnknownKernelCrate => "OFF2011",
        Prerequisite => "OFF2012",
        ClangNotFound => "OFF2013",
        ClangWrongMajor => "OFF2014",
        BadSource => "OFF2015",
        ForeignCompile => "OFF2016",
        BadPrebuilt => "OFF2017",
        Prebuilt => "OFF2018",
        DeviceBuild => "OFF2019",
        MissingArtifact => "OFF2020",
        BadImage => "OFF2021",
        BadEmbeddingObject => "OFF2022",
        DeviceLinkerMissing => "OFF2023",
        DeviceLinkerMismatch => "OFF2024",
        DeviceLinkFailed => "OFF2025",
        DeviceLinkCrashed => "OFF2026",
        DeviceLinkOutput => "OFF2027",
    }
    delegate {
        Format,
        DeviceLink,
    }
}

/// Errors of the GPU device build and link.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    /// An external command could not run or failed.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// Reading or writing a file failed.
    #[error("{action} `{}`: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// An rlib (ar archive) could not be read.
    #[error("reading archive `{name}`: {message}")]
    Archive {
        /// The archive's name.
        name: String,
        /// What went wrong.
        message: String,
    },
    /// A device input is not LLVM bitcode.
    #[error("device input `{name}` is not LLVM bitcode")]
    NotBitcode {
        /// The input's name.
        name: String,
    },
    /// LLVM could not parse a bitcode input.
    #[error("parsing bitcode `{name}`: {message}")]
    ParseBitcode {
        /// The input's name.
        name: String,
        /// LLVM's message.
        message: String,
    },
    /// LLVM's linker rejected a module.
    #[error("linking `{name}`: {message}")]
    Link {
        /// The module being linked in.
        name: String,
        /// LLVM's message.
        message: String,
    },
    /// The linked module did not verify.
    #[error("linked module does not verify: {message}")]
    Verify {
        /// LLVM's message.
        message: String,
    },
    /// A shared-memory static is used in a way that cannot move to the shared address space.
    #[error(
        "{what} static `{name}` is used where it cannot live in its memory (the address \
         stored, passed to a function or merged with another pointer): `{instruction}`"
    )]
    SharedMemoryUse {
        /// `shared-memory` (`shared_array!`) or `constant-memory` (`constant!`).
        what: &'static str,
        /// The static's symbol.
        name: String,
        /// The instruction, as LLVM prints it.
        instruction: String,
    },
    /// A `generic_shared_array!` whose site, array type or size is not a constant where the
    /// device link reads it.
    #[error(
        "a `generic_shared_array!` in `{function}` has no constant site, array type and size \
         where the device link reads them (the macro's expansion called some other way?): \
         `{instruction}`"
    )]
    GenericTile {
        /// The function holding the call.
        function: String,
        /// The call, as LLVM prints it.
        instruction: String,
    },
    /// The kernels use `kernel::matrix` on a processor without matrix instructions for their
    /// input type.
    #[error(
        "kernels {kernels} multiply {input} matrix fragments (`offload_rt::kernel::matrix`), \
         which {arch} has no instructions for: {reason}; leave {arch} out of `--offload-arch` \
         or move those kernels to a kernel crate of their own"
    )]
    MatrixUnsupported {
        /// The processor.
        arch: String,
        /// The kernels that use them, comma-separated.
        kernels: String,
        /// `f16` or `bf16`.
        input: &'static str,
        /// Which processors have them.
        reason: String,
    },
    /// The kernels use a device feature the processor lacks (`cp.async` before sm_80,
    /// `ldmatrix` before sm_75).
    #[error(
        "kernels {kernels} use {feature}, which {arch} does not have: {reason}; leave {arch} \
         out of `--offload-arch` or move those kernels to a kernel crate of their own"
    )]
    FeatureUnsupported {
        /// The processor.
        arch: String,
        /// What the kernels use.
        feature: &'static str,
        /// The kernels that use it, comma-separated.
        kernels: String,
        /// Which processors have it.
        reason: String,
    },
    /// The `constant!` statics of an NVIDIA image take more than its constant bank.
    #[error(
        "the constant-memory statics ({statics}) take {bytes} bytes, over the {limit} bytes of \
         an NVIDIA module's constant bank: make the larger ones plain statics or buffers"
    )]
    ConstantMemoryLimit {
        /// Their bytes together.
        bytes: u64,
        /// 64 KiB.
        limit: u64,
        /// Their symbols.
        statics: String,
    },
    /// A kernel uses more static shared memory than every device allows.
    #[error(
        "kernel `{kernel}` uses {bytes} bytes of static shared memory (shared_array!), over \
         the limit of {limit} bytes that every device supports"
    )]
    SharedMemoryLimit {
        /// The kernel.
        kernel: String,
        /// Its static shared memory.
        bytes: u64,
        /// `MAX_STATIC_SHARED_BYTES`.
        limit: u64,
    },
    /// Symbols the kernels need are defined by no input.
    #[error("undefined symbols after the device link: {}", symbols.join(", "))]
    Undefined {
        /// The symbols.
        symbols: Vec<String>,
    },
    /// A requested kernel is not defined by the inputs.
    #[error("kernel `{name}` is not defined by the device inputs")]
    MissingKernel {
        /// The kernel's name.
        name: String,
    },
    /// The inputs define no kernel at all.
    #[error("the device inputs define no kernel")]
    NoKernels,
    /// The optimization pipeline failed.
    #[error("running `{pipeline}`: {message}")]
    Passes {
        /// The pass pipeline.
        pipeline: String,
        /// LLVM's message.
        message: String,
    },
    /// LLVM has no target machine for the request.
    #[error("no LLVM target machine for `{triple}` cpu `{cpu}` features `{features}`: {message}")]
    TargetMachine {
        /// The triple.
        triple: String,
        /// The CPU.
        cpu: String,
        /// The features.
        features: String,
        /// LLVM's message.
        message: String,
    },
    /// Code generation failed.
    #[error("code generation for `{cpu}`: {message}")]
    Codegen {
        /// The CPU.
        cpu: String,
        /// LLVM's message.
        message: String,
    },
    /// rustc's LLVM and the linked LLVM have different majors.
    #[error(
        "the device toolchain's rustc uses LLVM {rustc} but the device link uses LLVM {linked}: \
         its bitcode would not be readable; set OFFLOAD_NIGHTLY_TOOLCHAIN to a nightly whose \
         `rustc -vV` says LLVM {linked} (the default, {}, does)",
        offload_toolchain::DEVICE_TOOLCHAIN
    )]
    LlvmMismatch {
        /// rustc's LLVM major.
        rustc: u32,
        /// The linked LLVM's major.
        linked: u32,
    },
    /// `rustc -vV` did not say which LLVM it uses.
    #[error("the device toolchain's `rustc -vV` printed no `LLVM version:` line:\n{output}")]
    RustcVersion {
        /// What it printed.
        output: String,
    },
    /// An `sm_XX` / `gfx…` / target ID string is not understood.
    #[error("invalid GPU target `{target}`: {reason}")]
    InvalidTarget {
        /// The string.
        target: String,
        /// Why.
        reason: &'static str,
    },
    /// An `sm_XX` name or AMDGPU target ID that `offload-format` refuses.
    #[error("invalid GPU target `{target}`: {source}")]
    BadTargetName {
        /// The string.
        target: String,
        /// Why.
        source: offload_format::Error,
    },
    /// `OFFLOAD_REQUIRE_CUBIN` is set and no cubin can be made for an `sm_XX`.
    #[error(
        "no cubin can be made for {sm}: {reason}; OFFLOAD_REQUIRE_CUBIN is set, so PTX alone \
         is not accepted"
    )]
    CubinRequired {
        /// The architecture.
        sm: String,
        /// Why not.
        reason: String,
    },
    /// An external tool (`ptxas`, `ld.lld`, …) is not installed.
    #[error(transparent)]
    ToolNotFound(#[from] offload_toolchain::NotFound),
    /// `OFFLOAD_AMDGPU_CODE_OBJECT` is neither `5` nor `6`.
    #[error("OFFLOAD_AMDGPU_CODE_OBJECT is `{value}`; the code object versions built are 5 and 6")]
    InvalidCodeObjectVersion {
        /// The value given.
        value: String,
    },
    /// An image is not a valid AMDGPU code object.
    #[error("AMDGPU code object: {reason}")]
    BadCodeObject {
        /// Why.
        reason: String,
    },
    /// The nested cargo build failed or its output was not understood.
    #[error("the device build of `{}` for {target} failed: {message}", manifest.display())]
    NestedBuild {
        /// The kernel crate's manifest.
        manifest: PathBuf,
        /// The target.
        target: String,
        /// What went wrong (compiler messages included).
        message: String,
    },
    /// A native member of a CPU image's static library is an object file that does not read.
    #[error(
        "the CPU link of `{krate}`: reading the symbols of its native member `{member}`: {message}"
    )]
    CpuNativeMember {
        /// The kernel crate.
        krate: String,
        /// The archive member.
        member: String,
        /// What went wrong.
        message: String,
    },
    /// A step of the CPU image's IR link failed.
    #[error("the CPU link of `{krate}` failed {step}: {source}")]
    CpuLink {
        /// The kernel crate.
        krate: String,
        /// The step: `linking its bitcode`, `forming the regions`, …
        step: &'static str,
        /// What failed.
        source: Box<LinkError>,
    },
}

offload_format::error_codes! {
    LinkError {
        Command => "OFF2101",
        Io => "OFF2102",
        Archive => "OFF2103",
        NotBitcode => "OFF2104",
        ParseBitcode => "OFF2105",
        Link => "OFF2106",
        Verify => "OFF2107",
        SharedMemoryUse => "OFF2108",
        SharedMemoryLimit => "OFF2109",
        Undefined => "OFF2110",
        MissingKernel => "OFF2111",
        NoKernels => "OFF2112",
        Passes => "OFF2113",
        TargetMachine => "OFF2114",
        Codegen => "OFF2115",
        LlvmMismatch => "OFF2116",
        RustcVersion => "OFF2117",
        InvalidTarget => "OFF2118",
        BadTargetName => "OFF2119",
        CubinRequired => "OFF2120",
        ToolNotFound => "OFF2121",
        InvalidCodeObjectVersion => "OFF2122",
        BadCodeObject => "OFF2123",
        NestedBuild => "OFF2124",
        ConstantMemoryLimit => "OFF2125",
        GenericTile => "OFF2126",
        MatrixUnsupported => "OFF2127",
        FeatureUnsupported => "OFF2128",
        CpuNativeMember => "OFF2129",
        CpuLink => "OFF2130",
    }
}

#[cfg(test)]
mod error_code_tests {
    fn link_codes() -> Vec<(&'static str, &'static str)> {
        super::LinkError::all_codes()
    }

    #[test]
    fn error_codes_are_unique_and_indexed() {
        offload_format::error::check_error_codes(
            &super::Error::all_codes()
                .into_iter()
                .chain(link_codes())
                .collect::<Vec<_>>(),
            "OFF2",
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../docs/guide/src/reference/error-codes.md"
            ),
        );
    }
}
