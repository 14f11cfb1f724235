//! The device API on AMD GPUs (`amdgcn-amd-amdhsa`): work-item and work-group ids from
//! hardware registers, sizes from the HSA kernel dispatch packet (through
//! `__offload_amdgpu_dispatch_field`, which the AMD device link must define).

use core::arch::amdgpu;

unsafe extern "C" {
    /// Field of the HSA kernel dispatch packet: `workgroup_size_{x,y,z}` for `dim` 0, 1, 2,
    /// then `grid_size_{x,y,z}` for 3, 4, 5. Rust cannot name `llvm.amdgcn.dispatch.ptr`
    /// (it returns an address-space-4 pointer), so the AMD device link defines this
    /// function in IR over that intrinsic.
    fn __offload_amdgpu_dispatch_field(dim: u32) -> u32;
    /// `s_barrier` between workgroup-scope release and acquire fences, defined by the AMD
    /// device link: Rust's fences are system-scope, and each would write back and invalidate
    /// the whole L2 cache.
    fn __offload_amdgpu_sync_threads();
}

#[inline(always)]
fn packet(dim: u32) -> u32 {
    // SAFETY: a pure read of the running dispatch's packet, defined by the device link.
    unsafe { __offload_amdgpu_dispatch_field(dim) }
}

#[inline(always)]
pub(super) fn thread_idx_x() -> u32 {
    amdgpu::workitem_id_x()
}
#[inline(always)]
pub(super) fn thread_idx_y() -> u32 {
    amdgpu::workitem_id_y()
}
#[inline(always)]
pub(super) fn thread_idx_z() -> u32 {
    amdgpu::workitem_id_z()
}
#[inline(always)]
pub(super) fn block_idx_x() -> u32 {
    amdgpu::workgroup_id_x()
}
#[inline(always)]
pub(super) fn block_idx_y() -> u32 {
    amdgpu::workgroup_id_y()
}
#[inline(always)]
pub(super) fn block_idx_z() -> u32 {
    amdgpu::workgroup_id_z()
}
#[inline(always)]
pub(super) fn block_dim_x() -> u32 {
    packet(0)
}
#[inline(always)]
pub(super) fn block_dim_y() -> u32 {
    packet(1)
}
#[inline(always)]
pub(super) fn block_dim_z() -> u32 {
    packet(2)
}
/// HSA grid sizes count work-items; CUDA's gridDim counts blocks.
#[inline(always)]
pub(super) fn grid_dim_x() -> u32 {
    packet(3).div_ceil(block_dim_x())
}
#[inline(always)]
pub(super) fn grid_dim_y() -> u32 {
    packet(4).div_ceil(block_dim_y())
}
#[inline(always)]
pub(super) fn grid_dim_z() -> u32 {
    packet(5).div_ceil(block_dim_z())
}

/// `__syncthreads()`: workgroup-scope release fence, `s_barrier`, workgroup-scope acquire
/// fence.
#[inline(always)]
pub(super) fn sync_threads() {
    // SAFETY: a barrier every thread of the block reaches (the device API's contract).
    unsafe { __offload_amdgpu_sync_threads() }
}

/// `llvm.trap` (`s_trap 2`): the dispatch ends with an error, where `s_endpgm` would end the
/// wave as if it had finished.
pub(super) fn trap() -> ! {
    core::intrinsics::abort()
}
