//! The device API on NVIDIA GPUs (`nvptx64-nvidia-cuda`): PTX special registers.

use core::arch::nvptx;

use super::shuffle::Shuffle;

/// Every lane of the warp: the mask of each `*.sync` warp operation.
const FULL_MASK: u32 = u32::MAX;

// `core::arch::nvptx` has no warp intrinsics; these are LLVM's, which the NVPTX backend lowers
// to `shfl.sync` / `vote.sync` (sm_70+, PTX 6.0+).
#[allow(improper_ctypes)]
unsafe extern "unadjusted" {
    #[link_name = "llvm.nvvm.shfl.sync.idx.i32"]
    safe fn shfl_sync_idx(mask: u32, value: u32, lane: u32, clamp: u32) -> u32;
    #[link_name = "llvm.nvvm.shfl.sync.up.i32"]
    safe fn shfl_sync_up(mask: u32, value: u32, delta: u32, clamp: u32) -> u32;
    #[link_name = "llvm.nvvm.shfl.sync.down.i32"]
    safe fn shfl_sync_down(mask: u32, value: u32, delta: u32, clamp: u32) -> u32;
    #[link_name = "llvm.nvvm.shfl.sync.bfly.i32"]
    safe fn shfl_sync_bfly(mask: u32, value: u32, lane_mask: u32, clamp: u32) -> u32;
    #[link_name = "llvm.nvvm.vote.ballot.sync"]
    safe fn vote_ballot_sync(mask: u32, predicate: bool) -> u32;
    #[link_name = "llvm.nvvm.vote.any.sync"]
    safe fn vote_any_sync(mask: u32, predicate: bool) -> bool;
    #[link_name = "llvm.nvvm.vote.all.sync"]
    safe fn vote_all_sync(mask: u32, predicate: bool) -> bool;
    #[link_name = "llvm.nvvm.read.ptx.sreg.laneid"]
    safe fn read_laneid() -> u32;
    #[link_name = "llvm.nvvm.bar.warp.sync"]
    safe fn bar_warp_sync(mask: u32);
    #[link_name = "llvm.nvvm.exit"]
    safe fn nvvm_exit() -> !;
}

macro_rules! sreg {
    ($($name:ident => $intrinsic:ident;)*) => {$(
        #[inline(always)]
        pub(super) fn $name() -> u32 {
            // SAFETY: reading a PTX special register has no preconditions.
            unsafe { nvptx::$intrinsic() }
        }
    )*};
}

sreg! {
    thread_idx_x => _thread_idx_x;
    thread_idx_y => _thread_idx_y;
    thread_idx_z => _thread_idx_z;
    block_idx_x => _block_idx_x;
    block_idx_y => _block_idx_y;
    block_idx_z => _block_idx_z;
    block_dim_x => _block_dim_x;
    block_dim_y => _block_dim_y;
    block_dim_z => _block_dim_z;
    grid_dim_x => _grid_dim_x;
    grid_dim_y => _grid_dim_y;
    grid_dim_z => _grid_dim_z;
}

/// `bar.sync 0`, which also orders the block's memory accesses.
#[inline(always)]
pub(super) fn sync_threads() {
    // SAFETY: a barrier every thread of the block reaches (the device API's contract).
    unsafe { nvptx::_syncthreads() }
}

/// `bar.warp.sync 0xffffffff`, which also orders the warp's memory accesses.
#[inline(always)]
pub(super) fn sync_warp() {
    bar_warp_sync(FULL_MASK)
}

pub(super) fn trap() -> ! {
    // SAFETY: `trap` aborts the kernel; it has no preconditions.
    unsafe { nvptx::trap() }
}

/// Ends the calling thread alone (PTX `exit`); the rest of the launch goes on.
#[inline(always)]
pub(super) fn end_thread() -> ! {
    nvvm_exit()
}

#[inline(always)]
pub(super) fn lane_id() -> u32 {
    read_laneid()
}

#[inline(always)]
pub(super) fn warp_size() -> u32 {
    32
}

/// `shfl.sync` over the whole warp: the clamp operand is 31 (a segment of 32 lanes) except for
/// `up`, whose lower bound is lane 0 (PTX ISA, `shfl.sync`).
#[inline(always)]
pub(super) fn shuffle_u32(mode: Shuffle, value: u32, arg: u32) -> u32 {
    shuffle_u32_masked(u64::from(FULL_MASK), mode, value, arg)
}

#[inline(always)]
pub(super) fn shuffle_u64(mode: Shuffle, value: u64, arg: u32) -> u64 {
    shuffle_u64_masked(u64::from(FULL_MASK), mode, value, arg)
}

/// `shfl.sync` among the lanes of `mask` (its low 32 bits: a warp has 32 lanes).
#[inline(always)]
pub(super) fn shuffle_u32_masked(mask: u64, mode: Shuffle, value: u32, arg: u32) -> u32 {
    let mask = mask as u32;
    match mode {
        Shuffle::Idx => shfl_sync_idx(mask, value, arg, 0x1f),
        Shuffle::Up => shfl_sync_up(mask, value, arg, 0),
        Shuffle::Down => shfl_sync_down(mask, value, arg, 0x1f),
        Shuffle::Xor => shfl_sync_bfly(mask, value, arg, 0x1f),
    }
}

#[inline(always)]
pub(super) fn shuffle_u64_masked(mask: u64, mode: Shuffle, value: u64, arg: u32) -> u64 {
    let lo = shuffle_u32_masked(mask, mode, value as u32, arg);
    let hi = shuffle_u32_masked(mask, mode, (value >> 32) as u32, arg);
    u64::from(hi) << 32 | u64::from(lo)
}

#[inline(always)]
pub(super) fn ballot(predicate: bool) -> u64 {
    ballot_masked(u64::from(FULL_MASK), predicate)
}

#[inline(always)]
pub(super) fn ballot_masked(mask: u64, predicate: bool) -> u64 {
    u64::from(vote_ballot_sync(mask as u32, predicate))
}

#[inline(always)]
pub(super) fn warp_any(predicate: bool) -> bool {
    vote_any_sync(FULL_MASK, predicate)
}

#[inline(always)]
pub(super) fn warp_any_masked(mask: u64, predicate: bool) -> bool {
    vote_any_sync(mask as u32, predicate)
}

#[inline(always)]
pub(super) fn warp_all(predicate: bool) -> bool {
    vote_all_sync(FULL_MASK, predicate)
}

#[inline(always)]
pub(super) fn warp_all_masked(mask: u64, predicate: bool) -> bool {
    vote_all_sync(mask as u32, predicate)
}

/// `bar.warp.sync mask`.
#[inline(always)]
pub(super) fn sync_warp_masked(mask: u64) {
    bar_warp_sync(mask as u32)
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
