//! What the device link's stages share: the device ABI's sections and limits as the link uses
//! them, a GPU image, the AMDGPU code object version, and the external tools and scratch
//! directories the link runs with.

use std::path::PathBuf;

use super::error::{LinkError, Result, io_err};

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

/// LLVM major version the device link links against and requires of rustc.
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
