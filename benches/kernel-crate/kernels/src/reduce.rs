//! Reductions: trees in shared memory, warp shuffles, atomics, and one thread per row or
//! segment.

use core::sync::atomic::{AtomicU32, Ordering};

use offload_rt::kernel::{
    DisjointSlice, ballot, block_dim_x, global_idx_x, grid_stride_x, lane_id, math, shuffle_down,
    sync_threads, thread_idx_x, warp_max, warp_size, warp_sum,
};
use offload_rt::{kernel, shared_array};

use crate::{BLOCK, atomic_add_f32};

/// Adds `input[..n]` into `*out`: a tree reduction in shared memory per block, then one
/// atomic add per block. Blocks of [`BLOCK`] threads.
#[kernel]
pub fn reduce_sum(n: u32, input: &[f32], out: *mut f32) {
    let partial: *mut f32 = shared_array!(f32, BLOCK);
    let tid = thread_idx_x() as usize;
    let i = global_idx_x();
    let v = if i < n as usize { at!(input, i) } else { 0.0 };
    // SAFETY: `tid < BLOCK`.
    unsafe { *partial.add(tid) = v };
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
        // SAFETY: `out` is one f32 accessed only atomically; `partial[0]` is the block's sum.
        unsafe { atomic_add_f32(out, *partial) };
    }
}

/// The sum of the warp's values in its lane 0, by `shuffle_down`.
#[inline(always)]
fn warp_reduce(mut v: f32) -> f32 {
    let mut offset = warp_size() / 2;
    while offset > 0 {
        v += shuffle_down(v, offset);
        offset /= 2;
    }
    v
}

/// Adds `input[..n]` into `*out` with warp shuffles: each warp's sum through shared memory,
/// then the first warp's. Blocks of [`BLOCK`] threads.
#[kernel]
pub fn reduce_warp(n: u32, input: &[f32], out: *mut f32) {
    let sums: *mut f32 = shared_array!(f32, BLOCK / 32);
    let i = global_idx_x();
    let v = warp_reduce(if i < n as usize { at!(input, i) } else { 0.0 });
    let (lane, warp) = (lane_id(), thread_idx_x() / warp_size());
    if lane == 0 {
        // SAFETY: `warp < BLOCK / warp_size() <= BLOCK / 32`.
        unsafe { *sums.add(warp as usize) = v };
    }
    sync_threads();
    if warp == 0 {
        let warps = block_dim_x() / warp_size();
        let mine = if lane < warps {
            // SAFETY: each of the block's warps wrote its slot before the barrier.
            unsafe { *sums.add(lane as usize) }
        } else {
            0.0
        };
        let s = warp_reduce(mine);
        if lane == 0 {
            // SAFETY: `out` is one f32 accessed only atomically during the launch.
            unsafe { atomic_add_f32(out, s) };
        }
    }
}

/// `*out = max(*out, input[..n])`, a warp maximum then one atomic per warp.
#[kernel]
pub fn reduce_max(n: u32, input: &[u32], out: *mut u32) {
    let i = global_idx_x();
    let v = if i < n as usize { at!(input, i) } else { 0 };
    let m = warp_max(v);
    if lane_id() == 0 {
        // SAFETY: `out` is one u32 accessed only atomically during the launch.
        unsafe { AtomicU32::from_ptr(out).fetch_max(m, Ordering::Relaxed) };
    }
}

/// Adds `x · y` into `*out`: a grid-stride loop per thread, a warp sum, an atomic per warp.
/// `y` is at least as long as `x`.
#[kernel]
pub fn dot(x: &[f32], y: &[f32], out: *mut f32) {
    let mut acc = 0.0f32;
    for i in grid_stride_x(x.len()) {
        acc = math::fma(at!(x, i), at!(y, i), acc);
    }
    let s = warp_sum(acc);
    if lane_id() == 0 {
        // SAFETY: `out` is one f32 accessed only atomically during the launch.
        unsafe { atomic_add_f32(out, s) };
    }
}

/// `out[r] = sum of row r` of a row-major matrix `cols` wide, one thread per row.
#[kernel]
pub fn row_sums(cols: u32, m: &[f32], mut out: DisjointSlice<f32>) {
    let c = cols as usize;
    if let Some((r, o)) = out.for_thread_x() {
        *o = sub!(m, r * c..(r + 1) * c).iter().sum();
    }
}

/// `out[b] = the index of the largest of input[..n]` in block `b`'s part (the first of
/// equals), a tree reduction of (value, index) pairs. Blocks of [`BLOCK`] threads.
#[kernel]
pub fn block_argmax(n: u32, input: &[f32], mut out: DisjointSlice<u32>) {
    let vals: *mut f32 = shared_array!(f32, BLOCK);
    let idxs: *mut u32 = shared_array!(u32, BLOCK);
    let tid = thread_idx_x() as usize;
    let i = global_idx_x();
    let v = if i < n as usize {
        at!(input, i)
    } else {
        f32::NEG_INFINITY
    };
    // SAFETY: `tid < BLOCK`.
    unsafe {
        *vals.add(tid) = v;
        *idxs.add(tid) = i as u32;
    }
    sync_threads();
    let mut stride = block_dim_x() as usize / 2;
    while stride > 0 {
        if tid < stride {
            // SAFETY: `tid + stride < block_dim_x() <= BLOCK`.
            unsafe {
                let (a, b) = (*vals.add(tid), *vals.add(tid + stride));
                if b > a {
                    *vals.add(tid) = b;
                    *idxs.add(tid) = *idxs.add(tid + stride);
                }
            }
        }
        sync_threads();
        stride /= 2;
    }
    if let Some(o) = out.for_block() {
        // SAFETY: slot 0 holds the block's result after the last barrier.
        *o = unsafe { *idxs };
    }
}

/// Adds the number of non-zero elements of `x[..n]` to `*out`: a ballot per warp.
#[kernel]
pub fn count_nonzero(n: u32, x: &[f32], out: *mut u32) {
    let i = global_idx_x();
    let p = i < n as usize && at!(x, i) != 0.0;
    let mask = ballot(p);
    if lane_id() == 0 {
        // SAFETY: `out` is one u32 accessed only atomically during the launch.
        unsafe { AtomicU32::from_ptr(out).fetch_add(mask.count_ones(), Ordering::Relaxed) };
    }
}

/// `out[s] = |x[offsets[s]..offsets[s + 1]]|`, the Euclidean norm of each segment; `offsets`
/// has one more element than `out`, ascending.
#[kernel]
pub fn segment_norms(offsets: &[u32], x: &[f32], mut out: DisjointSlice<f32>) {
    if let Some((s, o)) = out.for_thread_x() {
        let (start, end) = (at!(offsets, s) as usize, at!(offsets, s + 1) as usize);
        let sq: f32 = sub!(x, start..end).iter().map(|v| v * v).sum();
        *o = math::sqrt(sq);
    }
}
