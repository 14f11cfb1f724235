//! Device images for GPU targets: the nested nightly builds for `nvptx64-nvidia-cuda` and
//! `amdgcn-amd-amdhsa`, the device link (in-process LLVM 22 with the `llvm` feature), `ptxas`
//! and `ld.lld` for the final images, and pure readers that inspect the images (those, and
//! `ptxas`, without the `llvm` feature too).
//!
//! The link follows what rustc's `llvm-bitcode-linker` would do: the kernel crate's bitcode plus
//! the bitcode members of its dependencies' rlibs, linked lazily, every symbol but the kernels
//! internalized, `default<O3>`, then code generation. It is also where globals a kernel declares
//! in the [`SHARED_SECTION`] link section move to address space 3 (`.shared` / LDS).
//!
//! Environment variables read here: `OFFLOAD_PTXAS` (the `ptxas` to use; default `ptxas` on
//! `PATH`, else `/usr/lib/cuda/bin/ptxas`), `OFFLOAD_REQUIRE_CUBIN` (`1`: an `sm_XX` the
//! `ptxas` found does not know, or no `ptxas` at all, fails the build instead of embedding its
//! PTX alone with a warning), `OFFLOAD_AMDGPU_CODE_OBJECT` (see [`AmdCodeObjectVersion`]),
//! `OFFLOAD_NIGHTLY_TOOLCHAIN` (through [`crate::nested`]). External tools are found by
//! [`find_tool`]; [`ptxas_supported_sms`] says which `sm_XX` the `ptxas` found can assemble.

#[cfg(feature = "image-readers")]
mod amdgpu;
#[cfg(feature = "llvm")]
mod llvm;
#[cfg(feature = "llvm")]
mod pipeline;
mod ptx;
#[cfg(feature = "llvm")]
mod rlib_bitcode;

#[cfg(feature = "image-readers")]
pub use amdgpu::{
    AmdCodeObjectInfo, AmdCodeObjectVersion, AmdKernelArg, AmdKernelInfo, amd_kernel_params,
    amdgpu_e_flags, amdgpu_inspect, fix_amdgpu_e_flags,
};
#[cfg(feature = "llvm")]
pub use llvm::{
    AmdgpuLinkOptions, HOST_GLOBALS, LinkedObject, NvptxLinkOptions, amdgpu_code_object,
    amdgpu_link_object, amdgpu_wave_size, check_llvm_versions, linked_llvm_major, nvptx_link,
};
#[cfg(feature = "llvm")]
pub(crate) use pipeline::check_cubin;
#[cfg(feature = "llvm")]
pub use pipeline::{
    GpuTarget, NestedBuild, NestedBuildOutput, build_gpu_images, build_gpu_images_linked,
    device_inputs, gpu_images, gpu_images_with, nested_build,
};
pub use ptx::{
    CubinPlan, PtxKernelInfo, PtxasInfo, PtxasKernelInfo, cubin_plan, is_cubin,
    parse_ptxas_gpu_names, parse_ptxas_verbose, parse_ptxas_version, ptx_features, ptx_isa_version,
    ptx_kernel_names, ptxas_assemble, ptxas_path, ptxas_supported_sms, ptxas_verbose,
};
#[cfg(feature = "llvm")]
pub use rlib_bitcode::{DeviceInput, bitcode_members, is_bitcode};

use std::path::PathBuf;

/// Link section that marks a static as per-block shared memory on GPU targets. The device link
/// moves every global of this section to address space 3 with an undefined initializer.
pub const SHARED_SECTION: &str = ".offload.shared";

/// Bytes of static shared memory one GPU kernel may use, the limit of every device
/// (`offload_rt::kernel::MAX_STATIC_SHARED_BYTES`): `ptxas` refuses more in static
/// declarations, and the CPU device's arena is this size.
pub const MAX_STATIC_SHARED_BYTES: u64 = 48 * 1024;

/// LLVM major version this module links against and requires of rustc.
pub use offload_toolchain::LLVM_MAJOR;

/// What a device image holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GpuImageKind {
    /// PTX assembly text (NVIDIA), JIT-compiled by the driver.
    Ptx,
    /// A cubin assembled by `ptxas` for one `sm_XX`.
    Cubin,
    /// An AMDGPU code object (ELF shared object) for one target ID.
    AmdCodeObject,
}

/// One device image of a kernel crate for one GPU architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuImage {
    /// The image bytes.
    pub bytes: Vec<u8>,
    /// What the bytes are.
    pub kind: GpuImageKind,
    /// The target triple (`nvptx64-nvidia-cuda` or `amdgcn-amd-amdhsa`).
    pub triple: &'static str,
    /// `sm_NN` or the AMDGPU target ID, e.g. `gfx942:xnack+`.
    pub arch: String,
    /// Names of the kernels in the image.
    pub kernels: Vec<String>,
}

/// Errors of the GPU device build and link.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    /// An external command could not run or failed.
    #[error(transparent)]
    Command(#[from] crate::command::CommandError),
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
        "shared-memory static `{name}` is used where it cannot live in shared memory (the \
         address stored, passed to a function or merged with another pointer): `{instruction}`"
    )]
    SharedMemoryUse {
        /// The static's symbol.
        name: String,
        /// The instruction, as LLVM prints it.
        instruction: String,
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
        /// [`MAX_STATIC_SHARED_BYTES`].
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
    #[error("nested device build of `{}` for {target}: {message}", manifest.display())]
    NestedBuild {
        /// The kernel crate's manifest.
        manifest: PathBuf,
        /// The target.
        target: String,
        /// What went wrong (compiler messages included).
        message: String,
    },
}

/// Result of this module.
pub type Result<T, E = LinkError> = std::result::Result<T, E>;

pub(crate) fn io_err(
    action: &'static str,
    path: impl Into<PathBuf>,
) -> impl FnOnce(std::io::Error) -> LinkError {
    let path = path.into();
    move |source| LinkError::Io {
        action,
        path,
        source,
    }
}

/// The LLVM major of the nightly toolchain's rustc, from `rustc -vV`.
pub fn nightly_rustc_llvm_major(env: &crate::env::Env) -> Result<u32> {
    let output = crate::command::run(std::process::Command::new("rustup").args([
        "run",
        &env.nightly_toolchain(),
        "rustc",
        "-vV",
    ]))?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    crate::nested::rustc_llvm_major(&text).ok_or(LinkError::RustcVersion { output: text })
}

/// A new scratch directory for an external tool's files (`offload-<tag>-XXXXXX` in the
/// system's temporary directory), removed when dropped.
pub(crate) fn scratch_dir(tag: &str) -> Result<crate::fsutil::TempDir> {
    let base = std::env::temp_dir();
    crate::fsutil::TempDir::new_in(&base, &format!("offload-{tag}-"))
        .map_err(io_err("creating a directory in", base))
}

/// An external tool, found by `offload-toolchain`'s policy with the environment read through
/// [`crate::env::Env`] (so a build script reruns when an override changes).
pub fn find_tool(tool: offload_toolchain::Tool) -> Result<PathBuf> {
    let env = crate::env::Env::detect();
    Ok(tool.find_with(&|name| env.get(name).map(Into::into))?)
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
    }
}
