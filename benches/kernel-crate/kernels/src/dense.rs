//! Dense linear algebra on row-major matrices: transposes, matrix products, a matrix-vector
//! product and a row-wise softmax.

use offload_rt::kernel::{
    DisjointSlice, block_dim_x, block_idx_x, block_idx_y, block_stride_x, lane_id, math,
    sync_threads, thread_idx_x, thread_idx_y, warp_max, warp_size, warp_sum,
};
use offload_rt::{kernel, shared_array};

use crate::{BLOCK, ROWS_T, TILE, TILE_T};

/// `out = inputᵀ` for a `height` x `width` `input`, one element per thread: a 2-D grid over
/// `out`'s `height` columns and `width` rows.
#[kernel]
pub fn transpose_naive(width: u32, height: u32, input: &[f32], mut out: DisjointSlice<f32>) {
    let (w, h) = (width as usize, height as usize);
    if let Some(((x, y), o)) = out.for_thread_xy(h) {
        *o = at!(input, x * w + y);
    }
}

/// `out = inputᵀ` for a `height` x `width` `input`, through a shared tile padded by one
/// column against bank conflicts. Blocks of [`TILE_T`] x [`ROWS_T`] threads; `out` has
/// `width * height` elements.
#[kernel]
pub fn transpose_tiled(width: u32, height: u32, input: &[f32], #[len(input.len())] out: *mut f32) {
    const PITCH: usize = TILE_T + 1;
    let tile: *mut f32 = shared_array!(f32, TILE_T * (TILE_T + 1));
    let (w, h) = (width as usize, height as usize);
    let (tx, ty) = (thread_idx_x() as usize, thread_idx_y() as usize);
    let (bx, by) = (
        block_idx_x() as usize * TILE_T,
        block_idx_y() as usize * TILE_T,
    );
    for j in (0..TILE_T).step_by(ROWS_T) {
        let (x, y) = (bx + tx, by + ty + j);
        if x < w && y < h {
            let v = at!(input, y * w + x);
            // SAFETY: `ty + j < TILE_T`, `tx < PITCH`.
            unsafe { *tile.add((ty + j) * PITCH + tx) = v };
        }
    }
    sync_threads();
    for j in (0..TILE_T).step_by(ROWS_T) {
        let (x, y) = (by + tx, bx + ty + j);
        if x < h && y < w {
            let i = y * h + x;
            check!(i < input.len());
            // SAFETY: in the tile as above; `i < width * height`, `out`'s length.
            unsafe { *out.add(i) = *tile.add(tx * PITCH + ty + j) };
        }
    }
}

/// `c = a * b` for `n` x `n` matrices, one element of `c` per thread, a 2-D grid.
#[kernel]
pub fn matmul_naive(n: u32, a: &[f32], b: &[f32], mut c: DisjointSlice<f32>) {
    let n = n as usize;
    if let Some(((col, row), o)) = c.for_thread_xy(n) {
        let mut acc = 0.0;
        for k in 0..n {
            acc = math::fma(at!(a, row * n + k), at!(b, k * n + col), acc);
        }
        *o = acc;
    }
}

/// `c = a * b` for `n` x `n` matrices, [`TILE`] x [`TILE`] tiles of `a` and `b` staged in
/// shared memory. Blocks of `TILE` x `TILE` threads, a 2-D grid covering `c`.
#[kernel]
pub fn matmul_tiled(n: u32, a: &[f32], b: &[f32], mut c: DisjointSlice<f32>) {
    let tile_a: *mut f32 = shared_array!(f32, TILE * TILE);
    let tile_b: *mut f32 = shared_array!(f32, TILE * TILE);
    let n = n as usize;
    let (tx, ty) = (thread_idx_x() as usize, thread_idx_y() as usize);
    let col = block_idx_x() as usize * TILE + tx;
    let row = block_idx_y() as usize * TILE + ty;
    let mut acc = 0.0f32;
    for t in 0..n.div_ceil(TILE) {
        let (ka, kb) = (t * TILE + tx, t * TILE + ty);
        let va = if row < n && ka < n {
            at!(a, row * n + ka)
        } else {
            0.0
        };
        let vb = if kb < n && col < n {
            at!(b, kb * n + col)
        } else {
            0.0
        };
        // SAFETY: `tx, ty < TILE`, the tiles' side.
        unsafe {
            *tile_a.add(ty * TILE + tx) = va;
            *tile_b.add(ty * TILE + tx) = vb;
        }
        sync_threads();
        for k in 0..TILE {
            // SAFETY: as above, `k < TILE`.
            let (x, y) = unsafe { (*tile_a.add(ty * TILE + k), *tile_b.add(k * TILE + tx)) };
            acc = math::fma(x, y, acc);
        }
        sync_threads();
    }
    if let Some((_, o)) = c.for_thread_xy(n) {
        *o = acc;
    }
}

/// `y = a x` for a row-major `a` `cols` wide, one thread per row.
#[kernel]
pub fn matvec(cols: u32, a: &[f32], x: &[f32], mut y: DisjointSlice<f32>) {
    let c = cols as usize;
    if let Some((r, o)) = y.for_thread_x() {
        let row = sub!(a, r * c..(r + 1) * c);
        *o = row
            .iter()
            .zip(sub!(x, ..c))
            .fold(0.0, |acc, (&m, &v)| math::fma(m, v, acc));
    }
}

/// The softmax of each row of a row-major `x` `cols` wide, one block per row, written to
/// `out` (as long as `x`). Blocks of [`BLOCK`] threads.
#[kernel]
pub fn softmax_rows(cols: u32, x: &[f32], #[len(x.len())] out: *mut f32) {
    let slots: *mut f32 = shared_array!(f32, BLOCK / 32);
    let c = cols as usize;
    let base = block_idx_x() as usize * c;
    let mut m = f32::NEG_INFINITY;
    for j in block_stride_x(c) {
        m = math::max(m, at!(x, base + j));
    }
    // The row's maximum: each warp's, then the first `warps` slots' in every thread.
    let (lane, warp) = (lane_id(), thread_idx_x() / warp_size());
    let warps = block_dim_x() / warp_size();
    let wm = warp_max(m);
    if lane == 0 {
        // SAFETY: `warp < BLOCK / warp_size() <= BLOCK / 32`.
        unsafe { *slots.add(warp as usize) = wm };
    }
    sync_threads();
    let mut m = f32::NEG_INFINITY;
    for k in 0..warps {
        // SAFETY: each warp wrote its slot before the barrier.
        m = math::max(m, unsafe { *slots.add(k as usize) });
    }
    sync_threads();
    let mut s = 0.0;
    for j in block_stride_x(c) {
        s += math::exp(at!(x, base + j) - m);
    }
    // The row's sum, likewise.
    let ws = warp_sum(s);
    if lane == 0 {
        // SAFETY: as above.
        unsafe { *slots.add(warp as usize) = ws };
    }
    sync_threads();
    let mut s = 0.0;
    for k in 0..warps {
        // SAFETY: as above.
        s += unsafe { *slots.add(k as usize) };
    }
    let inv = 1.0 / s;
    for j in block_stride_x(c) {
        let e = math::exp(at!(x, base + j) - m) * inv;
        check!(base + j < x.len());
        // SAFETY: `base + j < x.len()`, `out`'s length; each index is one thread's.
        unsafe { *out.add(base + j) = e };
    }
}
