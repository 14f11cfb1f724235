//! What the stages share: the globals the runtime writes, and the accessors every stage
//! reads a module and its values with.

#![forbid(unsafe_code)]

use std::ffi::CStr;

use inkwell::module::{Linkage, Module};

/// Globals of the device API that the runtime writes after loading an image (see
/// `offload_rt::kernel::abi::CHANNEL_SYMBOL`): the device link keeps them external.
pub const HOST_GLOBALS: &[&str] = &[offload_format::abi::CHANNEL];

/// The device family of `module`'s triple.
fn family(module: &Module<'_>) -> offload_format::DeviceFamily {
    offload_format::DeviceFamily::of_target_triple(&module.get_triple().as_str().to_string_lossy())
}

/// Whether `module` is for AMD GPUs (`amdgcn-amd-amdhsa`).
pub(super) fn is_amdgpu(module: &Module<'_>) -> bool {
    family(module) == offload_format::DeviceFamily::Amd
}

/// Whether `module` is for NVIDIA GPUs (`nvptx64-nvidia-cuda`).
pub(super) fn is_nvptx(module: &Module<'_>) -> bool {
    family(module) == offload_format::DeviceFamily::Nvidia
}

pub(super) fn cstr(s: &CStr) -> String {
    s.to_string_lossy().into_owned()
}

pub(super) fn has_local_linkage(linkage: Linkage) -> bool {
    matches!(
        linkage,
        Linkage::Internal | Linkage::Private | Linkage::AvailableExternally | Linkage::Appending
    )
}

/// IR that gives `%{name}` the 32-bit shared-memory address of the generic pointer
/// `%{pointer}`, as CUDA C's `(unsigned)__cvta_generic_to_shared(p)`: the NVPTX back end's
/// pointers to shared memory are 64-bit, and a tile's addresses kept across a loop in pairs of
/// registers cost a kernel at the register ceiling its last registers (spills where the C
/// twin has none), so the instructions take their addresses through inline assembly.
pub(super) fn shared_address(pointer: &str, name: &str) -> String {
    format!(
        "  %{name}.shared = addrspacecast ptr %{pointer} to ptr addrspace(3)\n\
         \x20 %{name}.wide = ptrtoint ptr addrspace(3) %{name}.shared to i64\n\
         \x20 %{name} = trunc i64 %{name}.wide to i32\n"
    )
}
