//! Kernels of the reduction example.
#![no_std]

use core::sync::atomic::{AtomicU64, Ordering};

use offload_rt::kernel::{
    block_dim_x, global_idx_x, lane_id, sync_threads, thread_idx_x, warp_size, warp_sum,
};
use offload_rt::{kernel, shared_array};

/// Threads per block [`block_sum`] is written for (a power of two).
pub const BLOCK: u32 = 256;

/// Adds `input[..n]` into `*out`: each block sums its part in shared memory (a tree
/// reduction with `sync_threads()` between levels), then thread 0 adds the block's sum to
/// `*out` atomically. Launch with blocks of [`BLOCK`] threads.
#[kernel]
pub fn block_sum(n: u32, input: *const u32, out: *mut u64) {
    let partial: *mut u64 = shared_array!(u64, BLOCK as usize);
    let tid = thread_idx_x() as usize;
    let i = global_idx_x();
    let value = if i < n as usize {
        // SAFETY: `input` has at least `n` elements.
        u64::from(unsafe { *input.add(i) })
    } else {
        0
    };
    // SAFETY: `tid < BLOCK`, the shared array's length.
    unsafe { *partial.add(tid) = value };
    sync_threads();
    let mut stride = block_dim_x() as usize / 2;
    while stride > 0 {
        if tid < stride {
            // SAFETY: `tid + stride < block_dim_x() <= BLOCK`.
            unsafe { *partial.add(tid) += *partial.add(tid + stride) };
        }
        sync_threads();
        stride /= 2;
    }
    if tid == 0 {
        // SAFETY: `out` points at one u64, accessed only atomically during the launch.
        let total = unsafe { AtomicU64::from_ptr(out) };
        // SAFETY: `partial` holds the block's sum at index 0 after the last barrier.
        total.fetch_add(unsafe { *partial }, Ordering::Relaxed);
    }
}

/// Adds `input[..n]` into `*out` with warp shuffles: each warp sums its values in registers
/// ([`warp_sum`], a butterfly of `shuffle_xor`), its first lane leaves the warp's sum in shared
/// memory, and after one barrier the first warp sums those. One barrier instead of
/// [`block_sum`]'s nine. Launch with blocks of [`BLOCK`] threads.
#[kernel]
pub fn warp_shuffle_sum(n: u32, input: *const u32, out: *mut u64) {
    // One slot per warp: BLOCK / 32 on NVIDIA and the CPU device, fewer on wave64 AMD GPUs.
    let sums: *mut u64 = shared_array!(u64, BLOCK as usize / 32);
    let i = global_idx_x();
    let value = if i < n as usize {
        // SAFETY: `input` has at least `n` elements.
        u64::from(unsafe { *input.add(i) })
    } else {
        0
    };
    let warp_total = warp_sum(value);
    let warp = thread_idx_x() / warp_size();
    if lane_id() == 0 {
        // SAFETY: `warp < BLOCK / warp_size() <= BLOCK / 32`, the array's length.
        unsafe { *sums.add(warp as usize) = warp_total };
    }
    sync_threads();
    if warp == 0 {
        let warps = block_dim_x().div_ceil(warp_size());
        let mine = if lane_id() < warps {
            // SAFETY: each of the block's warps wrote its slot before the barrier.
            unsafe { *sums.add(lane_id() as usize) }
        } else {
            0
        };
        let block_total = warp_sum(mine);
        if lane_id() == 0 {
            // SAFETY: `out` points at one u64, accessed only atomically during the launch.
            let total = unsafe { AtomicU64::from_ptr(out) };
            total.fetch_add(block_total, Ordering::Relaxed);
        }
    }
}

/// The reduction as CUDA's samples write it, with the warp's and the block's steps in
/// functions the kernel calls. `#[kernels]` lets the CPU device see their barriers and warp
/// operations and run the kernel as loops over the block's threads, as it does
/// [`warp_shuffle_sum`]; without it, a barrier in a called function keeps the kernel on one
/// coroutine per GPU thread.
#[offload_rt::kernels]
pub mod helpers {
    use core::sync::atomic::{AtomicU64, Ordering};

    use offload_rt::kernel::{
        block_dim_x, global_idx_x, kernel, lane_id, shuffle_down, sync_threads, thread_idx_x,
        warp_size,
    };
    use offload_rt::shared_array;

    use super::BLOCK;

    /// The sum of the warp's values, in its lane 0: the samples' `warpReduceSum`.
    fn warp_reduce(value: u64) -> u64 {
        let mut value = value;
        let mut offset = warp_size() / 2;
        while offset > 0 {
            value += shuffle_down(value, offset);
            offset /= 2;
        }
        value
    }

    /// The block's sum, in thread 0: each warp's sum through `sums` (a slot per warp), then
    /// the first warp's sum of those.
    fn block_reduce(sums: *mut u64, value: u64) -> u64 {
        let warp_total = warp_reduce(value);
        let warp = thread_idx_x() / warp_size();
        if lane_id() == 0 {
            // SAFETY: `warp < BLOCK / warp_size() <= BLOCK / 32`, the slots `sums` has.
            unsafe { *sums.add(warp as usize) = warp_total };
        }
        sync_threads();
        let warps = block_dim_x().div_ceil(warp_size());
        let mine = if lane_id() < warps {
            // SAFETY: each of the block's warps wrote its slot before the barrier.
            unsafe { *sums.add(lane_id() as usize) }
        } else {
            0
        };
        warp_reduce(mine)
    }

    /// Adds `input[..n]` into `*out` as [`warp_shuffle_sum`](super::warp_shuffle_sum) does,
    /// through `block_reduce`. Launch with blocks of [`BLOCK`] threads.
    #[kernel]
    pub fn helper_sum(n: u32, input: *const u32, out: *mut u64) {
        let sums: *mut u64 = shared_array!(u64, BLOCK as usize / 32);
        let i = global_idx_x();
        let value = if i < n as usize {
            // SAFETY: `input` has at least `n` elements.
            u64::from(unsafe { *input.add(i) })
        } else {
            0
        };
        let block_total = block_reduce(sums, value);
        if thread_idx_x() == 0 {
            // SAFETY: `out` points at one u64, accessed only atomically during the launch.
            let total = unsafe { AtomicU64::from_ptr(out) };
            total.fetch_add(block_total, Ordering::Relaxed);
        }
    }
}
