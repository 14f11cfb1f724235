//! Kernels of the half-precision example: `f16` and `bf16` data, arithmetic and sums in `f32`.
#![no_std]

use offload_rt::device::half::{bf16, bf16_to_f32, f16, f16_to_f32, f32_to_f16};
use offload_rt::device::{block_dim_x, block_idx_x, global_idx_x, sync_threads, thread_idx_x};
use offload_rt::{kernel, shared_array};

/// Threads per block of the sums (a power of two).
pub const BLOCK: u32 = 256;

/// `x[i] = a * x[i]`, computed in `f32` and rounded once to `f16`.
#[kernel]
pub fn scale_f16(n: u32, a: f16, x: *mut f16) {
    let i = global_idx_x();
    if i < n as usize {
        // SAFETY: `x` has at least `n` elements.
        unsafe { *x.add(i) = f32_to_f16(f16_to_f32(a) * f16_to_f32(*x.add(i))) };
    }
}

/// `partial[b]` is block `b`'s part of the dot product of `x[..n]` and `y[..n]`: the products
/// of the widened values (exact in `f32`) added in `f32` by a shared-memory tree, so every
/// device adds in the same order. Launch with blocks of [`BLOCK`] threads.
#[kernel]
pub fn dot_f16(n: u32, x: *const f16, y: *const f16, partial: *mut f32) {
    let tile: *mut f32 = shared_array!(f32, BLOCK as usize);
    let tid = thread_idx_x() as usize;
    let i = global_idx_x();
    let value = if i < n as usize {
        // SAFETY: `x` and `y` have at least `n` elements.
        unsafe { f16_to_f32(*x.add(i)) * f16_to_f32(*y.add(i)) }
    } else {
        0.0
    };
    // SAFETY: `tid < BLOCK`, the shared array's length.
    unsafe { *tile.add(tid) = value };
    sync_threads();
    let mut stride = block_dim_x() as usize / 2;
    while stride > 0 {
        if tid < stride {
            // SAFETY: `tid + stride < block_dim_x() <= BLOCK`.
            unsafe { *tile.add(tid) += *tile.add(tid + stride) };
        }
        sync_threads();
        stride /= 2;
    }
    if tid == 0 {
        // SAFETY: `partial` has one element per block; the tile holds the block's sum at 0.
        unsafe { *partial.add(block_idx_x() as usize) = *tile };
    }
}

/// `partial[b]` is the sum of block `b`'s elements of `x[..n]`, widened and added in `f32` as
/// in [`dot_f16`]. Launch with blocks of [`BLOCK`] threads.
#[kernel]
pub fn sum_bf16(n: u32, x: *const bf16, partial: *mut f32) {
    let tile: *mut f32 = shared_array!(f32, BLOCK as usize);
    let tid = thread_idx_x() as usize;
    let i = global_idx_x();
    let value = if i < n as usize {
        // SAFETY: `x` has at least `n` elements.
        bf16_to_f32(unsafe { *x.add(i) })
    } else {
        0.0
    };
    // SAFETY: `tid < BLOCK`, the shared array's length.
    unsafe { *tile.add(tid) = value };
    sync_threads();
    let mut stride = block_dim_x() as usize / 2;
    while stride > 0 {
        if tid < stride {
            // SAFETY: `tid + stride < block_dim_x() <= BLOCK`.
            unsafe { *tile.add(tid) += *tile.add(tid + stride) };
        }
        sync_threads();
        stride /= 2;
    }
    if tid == 0 {
        // SAFETY: `partial` has one element per block; the tile holds the block's sum at 0.
        unsafe { *partial.add(block_idx_x() as usize) = *tile };
    }
}
