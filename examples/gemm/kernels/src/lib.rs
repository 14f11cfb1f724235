//! The kernel of `gemm`: `C = A·B` for `f16` inputs with `f32` accumulators on the matrix
//! units, tiled through shared memory, one source for every device.
#![no_std]

use offload_rt::kernel::half::f16;
use offload_rt::kernel::matrix::{Accumulator, FragmentA, FragmentB, TILE, mma};
use offload_rt::kernel::{self, kernel};
use offload_rt::shared_array;

/// Rows of C a block computes.
pub const BLOCK_M: usize = 64;
/// Columns of C a block computes.
pub const BLOCK_N: usize = 64;
/// Depth of the slices of A and B a block stages in shared memory at a time.
pub const BLOCK_K: usize = 32;
/// Threads per block: 8 warps of 32 lanes, or 4 wavefronts of 64.
pub const THREADS: u32 = 256;

/// Row strides of the staged slices, padded by 8 halves so that the rows of a fragment fall
/// in different shared-memory banks.
const A_STRIDE: usize = BLOCK_K + 8;
const B_STRIDE: usize = BLOCK_N + 8;
/// The 16×16 tiles of a block's 64×64 part of C, in rows and columns.
const TILES: usize = BLOCK_M / TILE;

/// `C = A·B`, row-major: A is `m×k`, B `k×n`, C `m×n`; `m` and `n` multiples of 64, `k` of 32.
/// A block of [`THREADS`] threads computes a 64×64 part of C: it stages a 64×32 slice of A and
/// a 32×64 slice of B in shared memory, and each warp multiplies the fragments of its column
/// of 16×16 tiles (one B fragment shared by its tiles' A fragments), accumulating in `f32`.
///
/// # Safety (of the launch)
///
/// `a`, `b` and `c` have `m·k`, `k·n` and `m·n` elements; the grid is `(n / 64, m / 64)`
/// blocks of [`THREADS`].
#[kernel]
pub unsafe fn gemm_f16(m: u32, n: u32, k: u32, a: *const f16, b: *const f16, c: *mut f32) {
    let (n, k) = (n as usize, k as usize);
    let _ = m;
    let a_tile = shared_array!(f16, BLOCK_M * A_STRIDE);
    let b_tile = shared_array!(f16, BLOCK_K * B_STRIDE);
    let block_row = kernel::block_idx_y() as usize * BLOCK_M;
    let block_col = kernel::block_idx_x() as usize * BLOCK_N;
    let thread = kernel::thread_idx_x() as usize;
    let lanes = kernel::warp_size() as usize;
    let warps = THREADS as usize / lanes;
    let warp = thread / lanes;
    // This warp's tiles: one column of the 4×4, rows `first_row`, `+ row_step`, …
    let tile_col = warp % TILES * TILE;
    let (first_row, row_step) = (warp / TILES, warps / TILES);
    let mut acc = [Accumulator::zero(); TILES];
    for kb in (0..k).step_by(BLOCK_K) {
        // 2048 halves of each slice, 8 per thread.
        for i in 0..(BLOCK_M * BLOCK_K) / THREADS as usize {
            let at = thread + i * THREADS as usize;
            let (row, col) = (at / BLOCK_K, at % BLOCK_K);
            // SAFETY: inside the 64×32 slice of A at (block_row, kb) and the staged tile.
            unsafe { *a_tile.add(row * A_STRIDE + col) = *a.add((block_row + row) * k + kb + col) };
            let (row, col) = (at / BLOCK_N, at % BLOCK_N);
            // SAFETY: inside the 32×64 slice of B at (kb, block_col) and the staged tile.
            unsafe { *b_tile.add(row * B_STRIDE + col) = *b.add((kb + row) * n + block_col + col) };
        }
        kernel::sync_threads();
        for kt in (0..BLOCK_K).step_by(TILE) {
            // SAFETY: the 16×16 tile at (kt, tile_col) of the staged slice of B.
            let fb = unsafe { FragmentB::load(b_tile.add(kt * B_STRIDE + tile_col), B_STRIDE) };
            for (j, acc) in acc.iter_mut().enumerate() {
                let tile_row = (first_row + j * row_step) * TILE;
                if tile_row < BLOCK_M {
                    // SAFETY: the 16×16 tile at (tile_row, kt) of the staged slice of A.
                    let fa =
                        unsafe { FragmentA::load(a_tile.add(tile_row * A_STRIDE + kt), A_STRIDE) };
                    *acc = mma(&fa, &fb, acc);
                }
            }
        }
        kernel::sync_threads();
    }
    for (j, acc) in acc.iter().enumerate() {
        let tile_row = (first_row + j * row_step) * TILE;
        if tile_row < BLOCK_M {
            // SAFETY: the 16×16 tile of C at (block_row + tile_row, block_col + tile_col).
            unsafe { acc.store(c.add((block_row + tile_row) * n + block_col + tile_col), n) };
        }
    }
}
