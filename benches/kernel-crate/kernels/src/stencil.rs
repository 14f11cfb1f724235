//! Stencils in one, two and three dimensions, on row-major grids with flat indices.

use offload_rt::kernel::{
    DisjointSlice, block_dim_x, block_idx_x, block_idx_y, sync_threads, thread_idx_x, thread_idx_y,
};
use offload_rt::{kernel, shared_array};

use crate::{BLOCK, RADIUS, TILE};

/// `out[i] = (x[i - 1] + 2 x[i] + x[i + 1]) / 4`, the edges repeated.
#[kernel]
pub fn stencil3(#[len(out.len())] x: &[f32], mut out: DisjointSlice<f32>) {
    let last = x.len().wrapping_sub(1);
    if let Some((i, o)) = out.for_thread_x() {
        let l = at!(x, i.saturating_sub(1));
        let r = at!(x, if i < last { i + 1 } else { last });
        *o = 0.25 * (l + 2.0 * at!(x, i) + r);
    }
}

/// `out[i] = sum over k of weights[k] * x[i + k - RADIUS]` (zero outside `x`), the block's
/// part of `x` and its halo staged in shared memory; `weights` has `2 * RADIUS + 1`
/// elements. Blocks of [`BLOCK`] threads.
#[kernel]
pub fn stencil1d_halo(weights: &[f32], #[len(out.len())] x: &[f32], mut out: DisjointSlice<f32>) {
    let tile: *mut f32 = shared_array!(f32, BLOCK + 2 * RADIUS);
    let tid = thread_idx_x() as usize;
    let base = block_idx_x() as usize * block_dim_x() as usize;
    let n = x.len();
    let mut j = tid;
    while j < block_dim_x() as usize + 2 * RADIUS {
        let g = (base + j).wrapping_sub(RADIUS);
        let v = if g < n { at!(x, g) } else { 0.0 };
        // SAFETY: `j < block_dim_x() + 2 * RADIUS <= BLOCK + 2 * RADIUS`.
        unsafe { *tile.add(j) = v };
        j += block_dim_x() as usize;
    }
    sync_threads();
    if let Some((_, o)) = out.for_thread_x() {
        let mut acc = 0.0;
        for (k, &wk) in sub!(weights, ..=2 * RADIUS).iter().enumerate() {
            // SAFETY: `tid + k < BLOCK + 2 * RADIUS`, written before the barrier.
            acc += wk * unsafe { *tile.add(tid + k) };
        }
        *o = acc;
    }
}

/// The 5-point stencil on a `width` x `height` grid: `0.5 * centre + 0.125 * neighbours`
/// inside, a copy on the border.
#[kernel]
pub fn stencil5(width: u32, height: u32, input: &[f32], mut out: DisjointSlice<f32>) {
    let (w, h) = (width as usize, height as usize);
    if let Some(((x, y), o)) = out.for_thread_xy(w)
        && y < h
    {
        let c = at!(input, y * w + x);
        *o = if x > 0 && y > 0 && x + 1 < w && y + 1 < h {
            let sides = at!(input, y * w + x - 1)
                + at!(input, y * w + x + 1)
                + at!(input, (y - 1) * w + x)
                + at!(input, (y + 1) * w + x);
            0.5 * c + 0.125 * sides
        } else {
            c
        };
    }
}

/// One Jacobi sweep of Laplace's equation on a `width` x `height` grid, each block's tile and
/// its one-cell halo staged in shared memory: the mean of the four neighbours inside, a copy
/// on the border. Blocks of [`TILE`] x [`TILE`] threads, a 2-D grid covering the grid.
#[kernel]
pub fn jacobi(width: u32, height: u32, input: &[f32], mut out: DisjointSlice<f32>) {
    const P: usize = TILE + 2;
    let tile: *mut f32 = shared_array!(f32, (TILE + 2) * (TILE + 2));
    let (w, h) = (width as usize, height as usize);
    let (tx, ty) = (thread_idx_x() as usize, thread_idx_y() as usize);
    let (x0, y0) = (block_idx_x() as usize * TILE, block_idx_y() as usize * TILE);
    // The (TILE + 2)^2 cells of the tile and its halo, TILE * TILE at a time.
    let mut k = ty * TILE + tx;
    while k < P * P {
        let (gx, gy) = ((x0 + k % P).wrapping_sub(1), (y0 + k / P).wrapping_sub(1));
        let v = if gx < w && gy < h {
            at!(input, gy * w + gx)
        } else {
            0.0
        };
        // SAFETY: `k < P * P`.
        unsafe { *tile.add(k) = v };
        k += TILE * TILE;
    }
    sync_threads();
    if let Some(((x, y), o)) = out.for_thread_xy(w)
        && y < h
    {
        let c = (ty + 1) * P + tx + 1;
        // SAFETY: `c - P`, `c - 1`, `c + 1` and `c + P` are cells of the tile or its halo
        // (`tx, ty < TILE`), written before the barrier.
        *o = unsafe {
            if x > 0 && y > 0 && x + 1 < w && y + 1 < h {
                0.25 * (*tile.add(c - 1) + *tile.add(c + 1) + *tile.add(c - P) + *tile.add(c + P))
            } else {
                *tile.add(c)
            }
        };
    }
}

/// A 3 x 3 convolution with the row-major `weights` (9 elements) on a `width` x `height`
/// image, the edges repeated.
#[kernel]
pub fn conv3x3(
    width: u32,
    height: u32,
    weights: &[f32],
    input: &[f32],
    mut out: DisjointSlice<f32>,
) {
    let (w, h) = (width as usize, height as usize);
    if let Some(((x, y), o)) = out.for_thread_xy(w)
        && y < h
    {
        let mut acc = 0.0;
        for dy in 0..3 {
            let yy = (y + dy).saturating_sub(1).min(h - 1);
            for dx in 0..3 {
                let xx = (x + dx).saturating_sub(1).min(w - 1);
                acc += at!(weights, dy * 3 + dx) * at!(input, yy * w + xx);
            }
        }
        *o = acc;
    }
}

/// The 7-point stencil on an `nx` x `ny` x `nz` grid (x fastest): `0.4 * centre + 0.1 *
/// neighbours` inside, a copy on the border. A 2-D grid: x over `nx`, y over the `ny * nz`
/// rows.
#[kernel]
pub fn stencil7(nx: u32, ny: u32, nz: u32, input: &[f32], mut out: DisjointSlice<f32>) {
    let (nx, ny, nz) = (nx as usize, ny as usize, nz as usize);
    if let Some(((x, row), o)) = out.for_thread_xy(nx) {
        let (y, z) = (rem!(row, ny), div!(row, ny));
        let i = row * nx + x;
        let c = at!(input, i);
        let plane = nx * ny;
        *o = if x > 0 && y > 0 && z > 0 && x + 1 < nx && y + 1 < ny && z + 1 < nz {
            let s = at!(input, i - 1)
                + at!(input, i + 1)
                + at!(input, i - nx)
                + at!(input, i + nx)
                + at!(input, i - plane)
                + at!(input, i + plane);
            0.4 * c + 0.1 * s
        } else {
            c
        };
    }
}
