//! Kernels of the half-precision example: `f16` and `bf16` data, arithmetic and sums in `f32`.
#![no_std]

use offload_rt::kernel::half::{bf16, bf16_to_f32, f16, f16_to_f32, f32_to_f16};
use offload_rt::kernel::{DisjointSlice, block_dim_x, global_idx_x, sync_threads, thread_idx_x};
use offload_rt::{kernel, shared_array};

/// Threads per block of the sums (a power of two).
pub const BLOCK: u32 = 256;

/// `x[i] = a * x[i]`, computed in `f32` and rounded once to `f16`.
#[kernel]
pub fn scale_f16(a: f16, mut x: DisjointSlice<f16>) {
    if let Some(xi) = x.for_thread() {
        *xi = f32_to_f16(f16_to_f32(a) * f16_to_f32(*xi));
    }
}

/// `partial[b]` is block `b`'s part of the dot product of `x` and `y`: the products
/// of the widened values (exact in `f32`) added in `f32` by a shared-memory tree, so every
/// device adds in the same order. Launch with blocks of [`BLOCK`] threads.
#[kernel]
pub fn dot_f16(x: &[f16], #[len(x.len())] y: &[f16], mut partial: DisjointSlice<f32>) {
    let tile: *mut f32 = shared_array!(f32, BLOCK as usize);
    let tid = thread_idx_x() as usize;
    let i = global_idx_x();
    let value = match (x.get(i), y.get(i)) {
        (Some(&a), Some(&b)) => f16_to_f32(a) * f16_to_f32(b),
        _ => 0.0,
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
    if let Some(p) = partial.for_block() {
        // SAFETY: the tile holds the block's sum at 0.
        *p = unsafe { *tile };
    }
}

/// `partial[b]` is the sum of block `b`'s elements of `x`, widened and added in `f32` as
/// in [`dot_f16`]. Launch with blocks of [`BLOCK`] threads.
#[kernel]
pub fn sum_bf16(x: &[bf16], mut partial: DisjointSlice<f32>) {
    let tile: *mut f32 = shared_array!(f32, BLOCK as usize);
    let tid = thread_idx_x() as usize;
    let value = x.get(global_idx_x()).map_or(0.0, |&v| bf16_to_f32(v));
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
    if let Some(p) = partial.for_block() {
        // SAFETY: the tile holds the block's sum at 0.
        *p = unsafe { *tile };
    }
}
