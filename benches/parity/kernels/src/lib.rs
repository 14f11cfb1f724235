//! The Rust half of the parity benchmark: every kernel here has a twin of the same name and
//! algorithm in `../parity.cu` (CUDA C) and `../parity.hip` (HIP C). The Rust side is written
//! as this project's API invites (slices, `DisjointSlice`, indexing, `math`); the C side as a
//! CUDA programmer writes it. `crates/offload-build/tests/parity` compares their machine code.
#![no_std]

use core::sync::atomic::{AtomicU32, Ordering};

use offload_rt::kernel::{
    DisjointSlice, Rows, block_dim_x, block_idx_x, block_idx_y, block_stride_x, dynamic_shared,
    global_idx_x, grid_stride_x, lane_id, math, shuffle_down, sync_threads, thread_idx_x,
    thread_idx_y, warp_size,
};
use offload_rt::{DeviceCopy, kernel, shared_array};

/// Side of [`matmul`]'s square tiles (blocks of `TILE` x `TILE` threads).
pub const TILE: usize = 16;
/// Side of [`transpose`]'s tiles; its blocks are `TRANSPOSE_TILE` x [`TRANSPOSE_ROWS`].
pub const TRANSPOSE_TILE: usize = 32;
/// Rows of threads per [`transpose`] block: each thread moves `TRANSPOSE_TILE / TRANSPOSE_ROWS`
/// elements.
pub const TRANSPOSE_ROWS: usize = 8;
/// Threads per block of the reductions, [`histogram`] and [`scan`].
pub const BLOCK: usize = 256;
/// Bins of [`histogram`].
pub const BINS: usize = 256;

/// `y[i] += a * x[i]`, one fused multiply-add as clang contracts the C twin's.
#[kernel]
pub fn saxpy(a: f32, #[len(y.len())] x: &[f32], mut y: DisjointSlice<f32>) {
    if let Some((i, yi)) = y.for_thread_x()
        && let Some(&xi) = x.get(i)
    {
        *yi = math::fma(a, xi, *yi);
    }
}

/// `c = a * b` for `n` x `n` row-major matrices, [`TILE`] x [`TILE`] tiles staged in shared
/// memory. Blocks of `TILE` x `TILE` threads, a 2-D grid covering `c`. Indices are `u32`, as
/// the C twin's `int`: `Rows::new_u32` checks once that the matrices fit them.
#[kernel]
pub fn matmul(n: u32, a: &[f32], b: &[f32], mut c: DisjointSlice<f32>) {
    const T: u32 = TILE as u32;
    let tile_a: *mut f32 = shared_array!(f32, TILE * TILE);
    let tile_b: *mut f32 = shared_array!(f32, TILE * TILE);
    let (a, b) = (Rows::new_u32(a, n, n), Rows::new_u32(b, n, n));
    let (tx, ty) = (thread_idx_x(), thread_idx_y());
    let col = block_idx_x() * T + tx;
    let row = block_idx_y() * T + ty;
    let mut acc = 0.0f32;
    for t in 0..n.div_ceil(T) {
        let (ka, kb) = (t * T + tx, t * T + ty);
        let va = if row < n && ka < n {
            *a.at(ka, row)
        } else {
            0.0
        };
        let vb = if kb < n && col < n {
            *b.at(col, kb)
        } else {
            0.0
        };
        // SAFETY: `tx, ty < TILE`, the tiles' side.
        unsafe {
            *tile_a.add((ty * T + tx) as usize) = va;
            *tile_b.add((ty * T + tx) as usize) = vb;
        }
        sync_threads();
        for k in 0..T {
            // SAFETY: as above, `k < TILE`. `fma`, as C's compiler contracts `acc += a * b`.
            acc = math::fma(
                unsafe { *tile_a.add((ty * T + k) as usize) },
                unsafe { *tile_b.add((k * T + tx) as usize) },
                acc,
            );
        }
        sync_threads();
    }
    if let Some((_, out)) = c.for_thread_xy(n as usize) {
        *out = acc;
    }
}

/// Adds `input` into `*out`: a tree reduction in shared memory per block, then one atomic
/// add per block. Blocks of [`BLOCK`] threads.
#[kernel]
pub fn reduce_shared(input: &[u32], out: *mut u32) {
    let partial: *mut u32 = shared_array!(u32, BLOCK);
    let tid = thread_idx_x() as usize;
    // SAFETY: `tid < BLOCK`.
    unsafe { *partial.add(tid) = input.get(global_idx_x()).copied().unwrap_or(0) };
    sync_threads();
    let mut stride = block_dim_x() / 2;
    while stride > 0 {
        if tid < stride as usize {
            // SAFETY: `tid + stride < block_dim_x() <= BLOCK`.
            unsafe { *partial.add(tid) += *partial.add(tid + stride as usize) };
        }
        sync_threads();
        stride /= 2;
    }
    if tid == 0 {
        // SAFETY: `out` points at one u32 accessed only atomically during the launch;
        // `partial[0]` holds the block's sum after the last barrier.
        unsafe { AtomicU32::from_ptr(out).fetch_add(*partial, Ordering::Relaxed) };
    }
}

/// The CUDA idiom: `v += shuffle_down(v, offset)` for halving offsets; lane 0 gets the sum.
#[inline(always)]
fn warp_reduce(mut v: u32) -> u32 {
    let mut offset = warp_size() / 2;
    while offset > 0 {
        v += shuffle_down(v, offset);
        offset /= 2;
    }
    v
}

/// Adds `input` into `*out` with warp shuffles: each warp reduces in registers, its lane 0
/// leaves the sum in shared memory, the first warp reduces those and adds the block's sum
/// atomically. Blocks of [`BLOCK`] threads.
#[kernel]
pub fn reduce_warp(input: &[u32], out: *mut u32) {
    let sums: *mut u32 = shared_array!(u32, BLOCK / 32);
    let v = warp_reduce(input.get(global_idx_x()).copied().unwrap_or(0));
    let (lane, warp) = (lane_id(), thread_idx_x() / warp_size());
    if lane == 0 {
        // SAFETY: `warp < BLOCK / warp_size() <= BLOCK / 32`.
        unsafe { *sums.add(warp as usize) = v };
    }
    sync_threads();
    if warp == 0 {
        let warps = block_dim_x() / warp_size();
        let mine = if lane < warps {
            // SAFETY: each of the block's `warps` warps wrote its slot before the barrier.
            unsafe { *sums.add(lane as usize) }
        } else {
            0
        };
        let s = warp_reduce(mine);
        if lane == 0 {
            // SAFETY: `out` points at one u32 accessed only atomically during the launch.
            unsafe { AtomicU32::from_ptr(out).fetch_add(s, Ordering::Relaxed) };
        }
    }
}

/// `out = inputᵀ` for a `height` x `width` row-major `input`, through a shared tile padded
/// by one column against bank conflicts. Blocks of [`TRANSPOSE_TILE`] x [`TRANSPOSE_ROWS`].
///
/// # Safety
///
/// `out` has `width * height` elements.
#[kernel]
pub fn transpose(width: u32, height: u32, input: &[f32], out: *mut f32) {
    const TILE: u32 = TRANSPOSE_TILE as u32;
    const PITCH: u32 = TILE + 1;
    let tile: *mut f32 = shared_array!(f32, TRANSPOSE_TILE * (TRANSPOSE_TILE + 1));
    let input = Rows::new_u32(input, width, height);
    let (tx, ty) = (thread_idx_x(), thread_idx_y());
    let (bx, by) = (block_idx_x() * TILE, block_idx_y() * TILE);
    for j in (0..TILE).step_by(TRANSPOSE_ROWS) {
        let (x, y) = (bx + tx, by + ty + j);
        if x < width && y < height {
            // SAFETY: `ty + j < TILE`, `tx < PITCH`.
            unsafe { *tile.add(((ty + j) * PITCH + tx) as usize) = *input.at(x, y) };
        }
    }
    sync_threads();
    for j in (0..TILE).step_by(TRANSPOSE_ROWS) {
        let (x, y) = (by + tx, bx + ty + j);
        if x < height && y < width {
            // SAFETY: in the tile as above; `y * height + x < width * height`, `out`'s
            // length, which `Rows::new_u32` checked fits in `u32`.
            unsafe {
                *out.add((y * height + x) as usize) = *tile.add((tx * PITCH + ty + j) as usize)
            };
        }
    }
}

/// The 5-point stencil on a `width`-wide row-major grid: `0.5 * centre + 0.125 * neighbours`
/// inside, a copy on the border. A 2-D grid covering `out`.
///
/// The centre is read once, before the border test, which is in `u32` as C's is in `int`:
/// read in each branch, NVIDIA's code branched around the neighbours' loads where C's
/// predicates them, and 64-bit tests held register pairs (on an H200, C's time over Rust's
/// 0.916 before, 0.957 after).
#[kernel]
pub fn stencil5(width: u32, height: u32, input: &[f32], mut out: DisjointSlice<f32>) {
    let (w, h) = (width as usize, height as usize);
    let input = Rows::new(input, w, h);
    if let Some(((x, y), o)) = out.for_thread_xy(w)
        && y < h
    {
        let at = |x, y| *input.at(x, y);
        let centre = at(x, y);
        // `x < width` and `y < height`: both fit in `u32`, and adding 1 cannot wrap.
        let (x32, y32) = (x as u32, y as u32);
        let inside = x32 > 0 && y32 > 0 && x32 + 1 < width && y32 + 1 < height;
        *o = if inside {
            // `fma`, as C's compiler contracts `0.5f * c + ...`; `0.5 * centre` is exact, so
            // the result is the same as two operations'.
            let neighbours = at(x - 1, y) + at(x + 1, y) + at(x, y - 1) + at(x, y + 1);
            math::fma(centre, 0.5, 0.125 * neighbours)
        } else {
            centre
        };
    }
}

/// Counts the bytes of `data` into 256 `bins`: per-block counts with atomics on shared
/// memory, then one global atomic per non-empty bin. A grid-stride loop.
#[kernel]
pub fn histogram(data: &[u8], bins: *mut u32) {
    let local: *mut u32 = shared_array!(u32, BINS);
    for b in block_stride_x(BINS) {
        // SAFETY: `b < BINS`.
        unsafe { *local.add(b) = 0 };
    }
    sync_threads();
    for i in grid_stride_x(data.len()) {
        let v = data[i];
        // SAFETY: `v < 256 = BINS`; the bins are accessed only atomically until the barrier.
        unsafe { AtomicU32::from_ptr(local.add(v as usize)).fetch_add(1, Ordering::Relaxed) };
    }
    sync_threads();
    for b in block_stride_x(BINS) {
        // SAFETY: `b < BINS`; `bins` has BINS elements, accessed only atomically.
        unsafe {
            let count = *local.add(b);
            if count != 0 {
                AtomicU32::from_ptr(bins.add(b)).fetch_add(count, Ordering::Relaxed);
            }
        }
    }
}

/// Blelloch's work-efficient exclusive scan of each block's `2 * block_dim_x()` elements
/// (up-sweep, then down-sweep, in shared memory). Blocks of [`BLOCK`] threads, two elements
/// per thread.
#[kernel]
pub fn scan(input: &[u32], mut out: DisjointSlice<u32>) {
    let temp: *mut u32 = shared_array!(u32, 2 * BLOCK);
    let tid = thread_idx_x() as usize;
    let n = 2 * block_dim_x() as usize;
    let base = block_idx_x() as usize * n;
    // SAFETY: `2 * tid + 1 < n <= 2 * BLOCK` for every index of `temp` below.
    unsafe {
        *temp.add(2 * tid) = input.get(base + 2 * tid).copied().unwrap_or(0);
        *temp.add(2 * tid + 1) = input.get(base + 2 * tid + 1).copied().unwrap_or(0);
    }
    let mut offset = 1;
    let mut d = n / 2;
    while d > 0 {
        sync_threads();
        if tid < d {
            let (ai, bi) = (offset * (2 * tid + 1) - 1, offset * (2 * tid + 2) - 1);
            // SAFETY: `bi < n`.
            unsafe { *temp.add(bi) += *temp.add(ai) };
        }
        offset *= 2;
        d /= 2;
    }
    if tid == 0 {
        // SAFETY: `n - 1 < n`.
        unsafe { *temp.add(n - 1) = 0 };
    }
    d = 1;
    while d < n {
        offset /= 2;
        sync_threads();
        if tid < d {
            let (ai, bi) = (offset * (2 * tid + 1) - 1, offset * (2 * tid + 2) - 1);
            // SAFETY: `ai < bi < n`.
            unsafe {
                let t = *temp.add(ai);
                *temp.add(ai) = *temp.add(bi);
                *temp.add(bi) += t;
            }
        }
        d *= 2;
    }
    sync_threads();
    // The thread's two elements: `base + 2 * tid` and the next, in a 1-D launch.
    for (k, o) in out.chunk_for_thread(2).iter_mut().enumerate() {
        // SAFETY: `2 * tid + k < n`.
        *o = unsafe { *temp.add(2 * tid + k) };
    }
}

/// `out[i] = src[idx[i]]`, every index checked (the C twin checks none).
#[kernel]
pub fn gather(src: &[f32], idx: &[u32], mut out: DisjointSlice<f32>) {
    if let Some((i, o)) = out.for_thread_x() {
        *o = src[idx[i] as usize];
    }
}

/// `y[i] = fma(exp(-x²/2), sqrt(|x|), floor(x))`: `libm`'s `expf` in software (the C twin
/// carries the same algorithm), `sqrt`, `fma` and `floor` as instructions.
#[kernel]
pub fn gauss(x: &[f32], mut y: DisjointSlice<f32>) {
    if let Some((i, o)) = y.for_thread_x()
        && let Some(&v) = x.get(i)
    {
        *o = math::fma(
            math::exp(-0.5 * v * v),
            math::sqrt(math::abs(v)),
            math::floor(v),
        );
    }
}

/// [`affine`]'s parameters, passed by value.
#[derive(Debug, Clone, Copy, PartialEq, DeviceCopy)]
#[repr(C)]
pub struct Affine {
    /// Multiplies each element.
    pub scale: f32,
    /// Added after scaling.
    pub bias: f32,
    /// Lower clamp.
    pub lo: f32,
    /// Upper clamp.
    pub hi: f32,
}

/// `y[i] = clamp(x[i] * p.scale + p.bias, p.lo, p.hi)`, the parameters a struct by value.
#[kernel]
pub fn affine(p: Affine, x: &[f32], mut y: DisjointSlice<f32>) {
    if let Some((i, o)) = y.for_thread_x()
        && let Some(&v) = x.get(i)
    {
        *o = math::min(math::max(v * p.scale + p.bias, p.lo), p.hi);
    }
}

/// `q[i] = a[i] / b[i]`: a zero divisor panics (the C twin traps).
#[kernel]
pub fn divide(a: &[u32], b: &[u32], mut q: DisjointSlice<u32>) {
    if let Some((i, o)) = q.for_thread_x()
        && let (Some(&x), Some(&d)) = (a.get(i), b.get(i))
    {
        *o = x / d;
    }
}

/// Reverses each block's part of `input` through dynamic shared memory (`block_dim_x()` f32s).
#[kernel]
pub fn reverse(input: &[f32], mut out: DisjointSlice<f32>) {
    let tile = dynamic_shared::<f32>();
    let (t, n) = (thread_idx_x() as usize, block_dim_x() as usize);
    // SAFETY: the launch gives `n` f32s of dynamic shared memory; `t < n`.
    unsafe { *tile.add(t) = input.get(global_idx_x()).copied().unwrap_or(0.0) };
    sync_threads();
    if let Some((_, o)) = out.for_thread_x() {
        // SAFETY: as above, `n - 1 - t < n`.
        *o = unsafe { *tile.add(n - 1 - t) };
    }
}
