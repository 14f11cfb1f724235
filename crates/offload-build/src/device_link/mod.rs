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

mod common;
pub(crate) mod cpu_archive;
mod error;
#[cfg(feature = "llvm")]
mod link_cache;
#[cfg(feature = "llvm")]
mod llvm;
#[cfg(feature = "llvm")]
mod options;
#[cfg(feature = "llvm")]
mod pipeline;
mod ptx;
#[cfg(feature = "llvm")]
mod rlib_bitcode;

#[cfg(feature = "llvm")]
pub use llvm::{
    AmdgpuLinkOptions, HOST_GLOBALS, NvptxLinkOptions, amdgpu_code_object, check_llvm_versions,
    cpu_link, linked_llvm_major, nvptx_link,
};
#[cfg(feature = "llvm")]
pub use options::GpuLinkOptions;
#[cfg(feature = "llvm")]
pub use pipeline::{
    build_gpu_images, build_gpu_images_of_triple, device_inputs, gpu_images, parse_gpu_arch,
};
pub(crate) use ptx::check_cubin;
pub use ptx::{
    CubinPlan, cubin_plan, installed_ptxas, is_cubin, ptx_features, ptx_isa_version,
    ptxas_assemble, ptxas_for, ptxas_path, ptxas_supported_sms, ptxas_verbose,
};
#[cfg(feature = "llvm")]
pub use rlib_bitcode::DeviceInput;

pub use common::{AmdCodeObjectVersion, LLVM_MAJOR, find_tool};
pub use error::LinkError;
#[cfg(feature = "image-readers")]
pub(crate) use error::bad_code_object;

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
