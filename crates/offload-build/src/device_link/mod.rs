//! Device images for GPU targets: the nested nightly builds for `nvptx64-nvidia-cuda` and
//! `amdgcn-amd-amdhsa`, the device link (in-process LLVM 22 with the `llvm` feature), `ptxas`
//! and `ld.lld` for the final images (`ptxas` without the `llvm` feature too). What the images
//! say about their kernels is read by `offload_format::image`.
//!
//! The link follows what rustc's `llvm-bitcode-linker` would do: the kernel crate's bitcode plus
//! the bitcode members of its dependencies' rlibs, linked lazily, every symbol but the kernels
//! internalized, `default<O3>`, then code generation. It is also where globals a kernel declares
//! in the `SHARED_SECTION` link section move to address space 3 (`.shared` / LDS).
//!
//! Environment variables read here: `OFFLOAD_PTXAS` (the `ptxas` to use; default `ptxas` on
//! `PATH`, else `/usr/lib/cuda/bin/ptxas`), `OFFLOAD_REQUIRE_CUBIN` (`1`: an `sm_XX` the
//! `ptxas` found does not know, or no `ptxas` at all, fails the build instead of embedding its
//! PTX alone with a warning), `OFFLOAD_AMDGPU_CODE_OBJECT` (see `AmdCodeObjectVersion`),
//! `OFFLOAD_NIGHTLY_TOOLCHAIN` (through [`crate::nested`]). External tools are found by
//! [`find_tool`]; [`ptxas_supported_sms`] says which `sm_XX` the `ptxas` found can assemble.

#[cfg(feature = "llvm")]
mod link_cache;
#[cfg(feature = "llvm")]
mod llvm;
#[cfg(feature = "llvm")]
mod pipeline;
mod ptx;
#[cfg(feature = "llvm")]
mod rlib_bitcode;

#[cfg(feature = "llvm")]
pub use llvm::{
    AmdgpuLinkOptions, HOST_GLOBALS, NvptxLinkOptions, amdgpu_code_object, check_llvm_versions,
    linked_llvm_major, nvptx_link,
};
#[cfg(feature = "llvm")]
pub use pipeline::{
    GpuLinkOptions, build_gpu_images, build_gpu_images_of_triple, device_inputs, gpu_images,
    parse_gpu_arch,
};
pub(crate) use ptx::check_cubin;
pub use ptx::{
    CubinPlan, cubin_plan, installed_ptxas, is_cubin, ptx_features, ptx_isa_version,
    ptxas_assemble, ptxas_for, ptxas_path, ptxas_supported_sms, ptxas_verbose,
};
#[cfg(feature = "llvm")]
pub use rlib_bitcode::{DeviceInput, is_bitcode};

use std::path::PathBuf;

/// Link section that marks a static as per-block shared memory on GPU targets. The device link
/// moves every global of this section to address space 3 with an undefined initializer.
#[cfg(feature = "llvm")]
pub const SHARED_SECTION: &str = offload_format::abi::SHARED_SECTION;

/// The function `offload_rt::generic_shared_array!` calls on GPUs, which the device link
/// replaces call by call with a global in address space 3: one for each site (its first
/// argument, a static of the site) and array type (the second and third, the type's name).
#[cfg(feature = "llvm")]
pub const GENERIC_TILE_FUNCTION: &str = offload_format::abi::GENERIC_TILE_FUNCTION;

/// The link section of `offload_rt::constant!` statics, which the device link moves to
/// address space 4 (`.const` / AMD's constant memory).
#[cfg(feature = "llvm")]
pub const CONSTANT_SECTION: &str = offload_format::abi::CONSTANT_SECTION;

/// Bytes of constant memory an NVIDIA module has (its constant bank for user data), for all
/// its `constant!` statics together (`offload_format::abi::MAX_CONSTANT_BYTES`).
#[cfg(feature = "llvm")]
pub const MAX_CONSTANT_BYTES: u64 = offload_format::abi::MAX_CONSTANT_BYTES as u64;

/// Bytes of static shared memory one GPU kernel may use, the limit of every device
/// (`offload_format::abi::MAX_STATIC_SHARED_BYTES`): `ptxas` refuses more in static
/// declarations, and the CPU device's arena is this size.
#[cfg(feature = "llvm")]
pub const MAX_STATIC_SHARED_BYTES: u64 = offload_format::abi::MAX_STATIC_SHARED_BYTES as u64;

/// LLVM major version this module links against and requires of rustc.
pub use offload_toolchain::LLVM_MAJOR;

/// One device image of a kernel crate for one GPU architecture.
#[cfg(feature = "llvm")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuImage {
    /// The image bytes.
    pub bytes: Vec<u8>,
    /// What the bytes are: `Ptx`, `Cubin`, or `Object` (an AMDGPU code object).
    pub kind: offload_format::ImageKind,
    /// The target triple (`nvptx64-nvidia-cuda` or `amdgcn-amd-amdhsa`).
    pub triple: &'static str,
    /// `sm_NN` or the AMDGPU target ID, e.g. `gfx942:xnack+`.
    pub arch: String,
    /// Names of the kernels in the image.
    pub kernels: Vec<String>,
    /// What `ptxas -v` reported for each kernel when it assembled the `sm`'s cubin: on the
    /// cubin and the PTX of an `sm` that gets one, empty otherwise.
    pub resources: Vec<offload_format::offload_binary::PtxasKernelInfo>,
}

/// The AMDGPU code object version of the images, `OFFLOAD_AMDGPU_CODE_OBJECT` (`5` or `6`).
///
/// V5 is the default: ROCm 6.0 and newer load it, while V6 (LLVM 22's own default) needs
/// ROCm 6.3 or newer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AmdCodeObjectVersion {
    /// Code object V5 (`EI_ABIVERSION` 3).
    #[default]
    V5,
    /// Code object V6 (`EI_ABIVERSION` 4).
    V6,
}

impl AmdCodeObjectVersion {
    /// The environment variable that chooses the version.
    pub const ENV: &str = "OFFLOAD_AMDGPU_CODE_OBJECT";

    /// Parses `5` or `6`.
    pub fn parse(value: &str) -> Result<Self> {
        match value.trim() {
            "5" => Ok(Self::V5),
            "6" => Ok(Self::V6),
            _ => Err(LinkError::InvalidCodeObjectVersion {
                value: value.to_owned(),
            }),
        }
    }

    /// The version from [`Self::ENV`], else the default.
    pub fn from_env(env: &crate::env::Env) -> Result<Self> {
        env.get(Self::ENV)
            .map_or(Ok(Self::default()), |v| Self::parse(&v))
    }

    /// The value of LLVM's `amdhsa_code_object_version` module flag.
    pub fn module_flag(self) -> u64 {
        match self {
            Self::V5 => 500,
            Self::V6 => 600,
        }
    }

    /// The ELF header's `EI_ABIVERSION` for this version.
    pub fn abi_version(self) -> u8 {
        match self {
            Self::V5 => 3,
            Self::V6 => 4,
        }
    }
}

pub use crate::error::LinkError;

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
#[cfg(feature = "llvm")]
pub fn nightly_rustc_llvm_major(env: &crate::env::Env) -> Result<u32> {
    let output = crate::command::run(env.tool(offload_toolchain::Tool::Rustup).args([
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

/// A code object `offload_format::image::amdgpu` refused, as the link reports it.
#[cfg(feature = "image-readers")]
pub(crate) fn bad_code_object(e: offload_format::Error) -> LinkError {
    let reason = match e {
        offload_format::Error::AmdCodeObject { reason } => reason,
        other => other.to_string(),
    };
    LinkError::BadCodeObject { reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_object_versions() {
        assert_eq!(AmdCodeObjectVersion::default(), AmdCodeObjectVersion::V5);
        assert_eq!(AmdCodeObjectVersion::parse("6").unwrap().abi_version(), 4);
        assert_eq!(AmdCodeObjectVersion::parse("5").unwrap().module_flag(), 500);
        for bad in ["4", "v5", ""] {
            let err = AmdCodeObjectVersion::parse(bad).unwrap_err();
            assert!(
                err.to_string().contains("OFFLOAD_AMDGPU_CODE_OBJECT"),
                "{err}"
            );
        }
    }
}
