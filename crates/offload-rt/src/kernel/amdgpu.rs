//! The device API on AMD GPUs (`amdgcn-amd-amdhsa`): work-item and work-group ids from
//! hardware registers, sizes from the HSA kernel dispatch packet (through
//! `__offload_amdgpu_dispatch_field`, which the AMD device link must define).

use core::arch::amdgpu;

use super::shuffle::{Shuffle, source_lane};

unsafe extern "C" {
    /// `workgroup_size_{x,y,z}` of the HSA kernel dispatch packet for `dim` 0, 1, 2, then the
    /// grid's block counts in x, y, z for 3, 4, 5 (code object V5's hidden kernel arguments,
    /// as HIP's `gridDim` reads them). Rust cannot name `llvm.amdgcn.dispatch.ptr` or
    /// `llvm.amdgcn.implicitarg.ptr` (they return address-space-4 pointers), so the AMD device
    /// link defines this function in IR over them.
    #[link_name = offload_format::abi_name!(AMDGPU_DISPATCH_FIELD)]
    fn __offload_amdgpu_dispatch_field(dim: u32) -> u32;
    /// `s_barrier` between workgroup-scope release and acquire fences, defined by the AMD
    /// device link: Rust's fences are system-scope, and each would write back and invalidate
    /// the whole L2 cache.
    #[link_name = offload_format::abi_name!(AMDGPU_SYNC_THREADS)]
    fn __offload_amdgpu_sync_threads();
    /// `wave_barrier` between wavefront-scope release and acquire fences, defined by the AMD
    /// device link (a wavefront runs in lockstep: the barrier keeps the compiler from moving
    /// the lanes' memory accesses across it, the fences order them).
    #[link_name = offload_format::abi_name!(AMDGPU_SYNC_WARP)]
    fn __offload_amdgpu_sync_warp();
    /// Lanes per wavefront of the image's target (64 on gfx9, 32 on gfx10 and later), defined
    /// by the AMD device link: one device build serves every target of the triple, and rustc
    /// would fold `llvm.amdgcn.wavefrontsize` for the build's baseline CPU.
    #[link_name = offload_format::abi_name!(AMDGPU_WAVE_SIZE)]
    fn __offload_amdgpu_wave_size() -> u32;
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
/// Blocks, as CUDA's gridDim counts them (HSA's grid sizes count work-items).
#[inline(always)]
pub(super) fn grid_dim_x() -> u32 {
    packet(3)
}
#[inline(always)]
pub(super) fn grid_dim_y() -> u32 {
    packet(4)
}
#[inline(always)]
pub(super) fn grid_dim_z() -> u32 {
    packet(5)
}

/// `__syncthreads()`: workgroup-scope release fence, `s_barrier`, workgroup-scope acquire
/// fence.
#[inline(always)]
pub(super) fn sync_threads() {
    // SAFETY: a barrier every thread of the block reaches (the device API's contract).
    unsafe { __offload_amdgpu_sync_threads() }
}

/// `__syncwarp()`: see `__offload_amdgpu_sync_warp`.
#[inline(always)]
pub(super) fn sync_warp() {
    // SAFETY: a barrier every lane of the wavefront reaches (the device API's contract).
    unsafe { __offload_amdgpu_sync_warp() }
}

/// `llvm.trap` (`s_trap 2`): the dispatch ends with an error, where `s_endpgm` would end the
/// wave as if it had finished.
pub(super) fn trap() -> ! {
    core::intrinsics::abort()
}

/// Ends the calling wavefront, all its lanes (`s_endpgm`); the rest of the launch goes on. In
/// a kernel the device link makes it a return, for which AMDGPU's structurizer adds no flow:
/// that ends only the lanes that reach it, and the wavefront's other lanes go on.
#[inline(always)]
pub(super) fn end_thread() -> ! {
    // LLVM's intrinsic itself, so as not to depend on which nightlies' `core::arch::amdgpu`
    // has `endpgm`.
    unsafe extern "unadjusted" {
        #[link_name = "llvm.amdgcn.endpgm"]
        safe fn endpgm() -> !;
    }
    endpgm()
}

#[inline(always)]
pub(super) fn warp_size() -> u32 {
    // SAFETY: a constant, defined by the device link.
    unsafe { __offload_amdgpu_wave_size() }
}

#[inline(always)]
pub(super) fn lane_id() -> u32 {
    amdgpu::mbcnt_hi(u32::MAX, amdgpu::mbcnt_lo(u32::MAX, 0))
}

/// `ds_bpermute_b32` from the source lane computed by CUDA's rules (it addresses lanes in
/// bytes, and spans the whole wave on gfx9's wave64 and gfx10+'s wave32).
#[inline(always)]
pub(super) fn shuffle_u32(mode: Shuffle, value: u32, arg: u32) -> u32 {
    let src = source_lane(mode, lane_id(), arg, warp_size());
    // SAFETY: `src` is a lane of this wave; `ds_bpermute` only reads other lanes' registers.
    unsafe { amdgpu::ds_bpermute(src * 4, value) }
}

#[inline(always)]
pub(super) fn shuffle_u64(mode: Shuffle, value: u64, arg: u32) -> u64 {
    let src = source_lane(mode, lane_id(), arg, warp_size());
    // SAFETY: as in `shuffle_u32`.
    let (lo, hi) = unsafe {
        (
            amdgpu::ds_bpermute(src * 4, value as u32),
            amdgpu::ds_bpermute(src * 4, (value >> 32) as u32),
        )
    };
    u64::from(hi) << 32 | u64::from(lo)
}

#[inline(always)]
pub(super) fn ballot(predicate: bool) -> u64 {
    amdgpu::ballot(predicate)
}

#[inline(always)]
pub(super) fn warp_any(predicate: bool) -> bool {
    amdgpu::ballot(predicate) != 0
}

#[inline(always)]
pub(super) fn warp_all(predicate: bool) -> bool {
    amdgpu::ballot(predicate) == amdgpu::ballot(true)
}

// A wavefront runs in lockstep: the lanes of a mask need no synchronization, and a lane that
// does not run the operation leaves its bit of `ballot` clear. A shuffle reads from a lane of
// the mask (the caller's contract), which runs it too.

#[inline(always)]
pub(super) fn shuffle_u32_masked(_mask: u64, mode: Shuffle, value: u32, arg: u32) -> u32 {
    shuffle_u32(mode, value, arg)
}

#[inline(always)]
pub(super) fn shuffle_u64_masked(_mask: u64, mode: Shuffle, value: u64, arg: u32) -> u64 {
    shuffle_u64(mode, value, arg)
}

#[inline(always)]
pub(super) fn ballot_masked(mask: u64, predicate: bool) -> u64 {
    amdgpu::ballot(predicate) & mask
}

#[inline(always)]
pub(super) fn warp_any_masked(mask: u64, predicate: bool) -> bool {
    ballot_masked(mask, predicate) != 0
}

#[inline(always)]
pub(super) fn warp_all_masked(mask: u64, predicate: bool) -> bool {
    ballot_masked(mask, predicate) == ballot_masked(mask, true)
}

#[inline(always)]
pub(super) fn sync_warp_masked(_mask: u64) {
    sync_warp()
}

unsafe extern "C" {
    /// The generic address of the block's dynamic shared memory, defined by the device link
    /// (Rust cannot declare the zero-length address-space-3 array it points at).
    #[link_name = offload_format::abi_name!(DYNAMIC_SHARED)]
    fn __offload_dynamic_shared() -> *mut u8;
}

#[inline(always)]
pub(super) fn dynamic_shared() -> *mut u8 {
    // SAFETY: returns a constant address, defined by the device link.
    unsafe { __offload_dynamic_shared() }
}
