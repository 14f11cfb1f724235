//! Prefix sums within a block, the pass that adds the blocks' offsets, and a stream
//! compaction.

use offload_rt::kernel::{
    DisjointSlice, block_dim_x, block_idx_x, global_idx_x, lane_id, shuffle_up, sync_threads,
    thread_idx_x, warp_size,
};
use offload_rt::{kernel, shared_array};

use crate::BLOCK;

/// Blelloch's exclusive scan of each block's `2 * block_dim_x()` elements of `input[..n]`
/// (up-sweep, then down-sweep, in shared memory). Blocks of [`BLOCK`] threads, two elements
/// per thread.
#[kernel]
pub fn scan_blelloch(n: u32, input: &[u32], mut out: DisjointSlice<u32>) {
    let temp: *mut u32 = shared_array!(u32, 2 * BLOCK);
    let tid = thread_idx_x() as usize;
    let len = 2 * block_dim_x() as usize;
    let base = block_idx_x() as usize * len;
    let n = n as usize;
    let (i0, i1) = (base + 2 * tid, base + 2 * tid + 1);
    let v0 = if i0 < n { at!(input, i0) } else { 0 };
    let v1 = if i1 < n { at!(input, i1) } else { 0 };
    // SAFETY: `2 * tid + 1 < len <= 2 * BLOCK` for every index of `temp` below.
    unsafe {
        *temp.add(2 * tid) = v0;
        *temp.add(2 * tid + 1) = v1;
    }
    let mut offset = 1;
    let mut d = len / 2;
    while d > 0 {
        sync_threads();
        if tid < d {
            let (ai, bi) = (offset * (2 * tid + 1) - 1, offset * (2 * tid + 2) - 1);
            // SAFETY: `ai < bi < len`.
            unsafe { *temp.add(bi) += *temp.add(ai) };
        }
        offset *= 2;
        d /= 2;
    }
    if tid == 0 {
        // SAFETY: `len - 1 < len`.
        unsafe { *temp.add(len - 1) = 0 };
    }
    d = 1;
    while d < len {
        offset /= 2;
        sync_threads();
        if tid < d {
            let (ai, bi) = (offset * (2 * tid + 1) - 1, offset * (2 * tid + 2) - 1);
            // SAFETY: `ai < bi < len`.
            unsafe {
                let t = *temp.add(ai);
                *temp.add(ai) = *temp.add(bi);
                *temp.add(bi) += t;
            }
        }
        d *= 2;
    }
    sync_threads();
    for (k, o) in out.chunk_for_thread(2).iter_mut().enumerate() {
        // SAFETY: `2 * tid + k < len`.
        *o = unsafe { *temp.add(2 * tid + k) };
    }
}

/// The inclusive scan of each block's part of `input[..n]`, Hillis and Steele's, double
/// buffered in shared memory. Blocks of [`BLOCK`] threads.
#[kernel]
pub fn scan_hillis_steele(n: u32, input: &[f32], mut out: DisjointSlice<f32>) {
    let buf: *mut f32 = shared_array!(f32, 2 * BLOCK);
    let tid = thread_idx_x() as usize;
    let i = global_idx_x();
    let v = if i < n as usize { at!(input, i) } else { 0.0 };
    // SAFETY: `tid < BLOCK`.
    unsafe { *buf.add(tid) = v };
    let mut src = 0;
    let mut offset = 1;
    while offset < block_dim_x() as usize {
        sync_threads();
        let dst = BLOCK - src;
        // SAFETY: `src + tid`, `src + tid - offset` and `dst + tid` are below `2 * BLOCK`.
        unsafe {
            let mut s = *buf.add(src + tid);
            if tid >= offset {
                s += *buf.add(src + tid - offset);
            }
            *buf.add(dst + tid) = s;
        }
        src = dst;
        offset *= 2;
    }
    sync_threads();
    if let Some((_, o)) = out.for_thread_x() {
        // SAFETY: as above.
        *o = unsafe { *buf.add(src + tid) };
    }
}

/// The inclusive scan of each warp's part of `input[..n]` with `shuffle_up`, then of the
/// warps' totals, for each block. Blocks of [`BLOCK`] threads.
#[kernel]
pub fn scan_warp(n: u32, input: &[u32], mut out: DisjointSlice<u32>) {
    let totals: *mut u32 = shared_array!(u32, BLOCK / 32);
    let i = global_idx_x();
    let mut v = if i < n as usize { at!(input, i) } else { 0 };
    let lane = lane_id();
    let mut d = 1;
    while d < warp_size() {
        let up = shuffle_up(v, d);
        if lane >= d {
            v += up;
        }
        d *= 2;
    }
    let warp = thread_idx_x() / warp_size();
    if lane == warp_size() - 1 {
        // SAFETY: `warp < BLOCK / warp_size() <= BLOCK / 32`.
        unsafe { *totals.add(warp as usize) = v };
    }
    sync_threads();
    let mut before = 0;
    for w in 0..warp {
        // SAFETY: `w < warp`, a slot written before the barrier.
        before += unsafe { *totals.add(w as usize) };
    }
    if let Some((_, o)) = out.for_thread_x() {
        *o = v + before;
    }
}

/// `data[i] += offsets[block]`: the second pass of a multi-block scan, `offsets` one per
/// block of the launch.
#[kernel]
pub fn add_block_offsets(offsets: &[u32], mut data: DisjointSlice<u32>) {
    if let Some((_, d)) = data.for_thread_x() {
        *d += at!(offsets, block_idx_x() as usize);
    }
}

/// Copies the elements of `x` whose flag is set to `out[positions[i]]`, `positions` the
/// exclusive scan of `flags`; `out` has `out_len` elements, enough for them all.
#[kernel]
pub fn compact(
    #[len(x.len())] flags: &[u32],
    #[len(x.len())] positions: &[u32],
    x: &[f32],
    out_len: u32,
    #[len(out_len)] out: *mut f32,
) {
    let i = global_idx_x();
    if i < x.len() && at!(flags, i) != 0 {
        let p = at!(positions, i) as usize;
        check!(p < out_len as usize);
        let v = at!(x, i);
        // SAFETY: `p < out_len`; distinct set flags have distinct positions.
        unsafe { *out.add(p) = v };
    }
}
