//! The kernels of `gemm`: `C = A·B` for `f16` or `bf16` inputs with `f32` accumulators on
//! the matrix units, one source for every device.
//!
//! - [`gemm`], the fast one: 128×128 tiles of C per block, slices of A and B copied
//!   asynchronously into a three-stage pipeline of swizzled shared tiles, fragments loaded a
//!   matrix at a time (`ldmatrix` on NVIDIA), 64×32 of C per warp (64×64 per AMD wavefront of
//!   64) held in registers through the whole `k` loop.
//! - [`gemm_fragments_f16`], the first step of the ladder: 64×64 tiles staged through registers,
//!   fragments loaded element by element.
#![no_std]

use offload_rt::kernel::half::{bf16, f16};
use offload_rt::kernel::matrix::{Accumulator, FragmentA, FragmentB, MmaInput, TILE, mma};
use offload_rt::kernel::pipeline::{Pipeline, SwizzledTile, copy_async};
use offload_rt::kernel::{self, kernel};
use offload_rt::shared_array;

/// Runs `body` with `$i` bound to each of the literal indices: the fragments and accumulators
/// indexed by constants stay in registers, where a loop LLVM unrolls only in part would put
/// them in memory.
macro_rules! unroll {
    ($i:ident in [$($n:literal),*] $body:block) => {
        $( { let $i: usize = $n; $body } )*
    };
}

/// Rows of C a block of [`gemm`] computes.
pub const GEMM_BLOCK_M: usize = 128;
/// Columns of C a block of [`gemm`] computes.
pub const GEMM_BLOCK_N: usize = 128;
/// Depth of the slices of A and B one stage of [`gemm`]'s pipeline holds.
pub const GEMM_BLOCK_K: usize = 32;
/// Stages of [`gemm`]'s pipeline: two slices in flight while the third is multiplied.
pub const GEMM_STAGES: usize = 3;
/// Threads per block of [`gemm`]: 8 warps of 32 lanes, or 4 wavefronts of 64.
pub const GEMM_THREADS: u32 = 256;

/// 16×16 tiles of C down a warp's part (64 rows: the block's 128 rows in two).
const WARP_TILES_M: usize = 4;
/// 16×16 tiles of C across a warp's part, at most: 2 with 8 warps, 4 with 4 wavefronts.
const MAX_WARP_TILES_N: usize = 4;
/// 16-byte chunks of a stage, of A and of B alike.
const STAGE_CHUNKS: usize = GEMM_BLOCK_M * GEMM_BLOCK_K / 8;

/// The unit of the stages' shared memory: 16 bytes aligned to 16, as the copies and the
/// matrix loads want them.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Chunk([u32; 4]);

type StageA<T> = SwizzledTile<T, GEMM_BLOCK_M, GEMM_BLOCK_K>;
type StageB<T> = SwizzledTile<T, GEMM_BLOCK_K, GEMM_BLOCK_N>;

/// `C = A·B`, row-major: A is `m×k`, B `k×n`, C `m×n`, `m` and `n` multiples of 128, `k` of
/// 32; one entry point per input type (`gemm__f16`, `gemm__bf16`). A block of
/// [`GEMM_THREADS`] computes a 128×128 part of C: its slices of A (128×32) and B (32×128) are
/// copied asynchronously, 16 bytes a copy, into the stages of a [`Pipeline`] two slices ahead
/// of the multiplication; each warp multiplies a 64×32 part (a wavefront of 64 a 64×64 part)
/// from fragments loaded out of the swizzled stages, its accumulators in registers from the
/// first slice to the last.
///
/// # Safety (of the launch)
///
/// `a`, `b` and `c` have `m·k`, `k·n` and `m·n` elements; the grid is `(n / 128, m / 128)`
/// blocks of [`GEMM_THREADS`], the kernel's launch bound (which leaves an AMD wavefront of 64
/// the registers for its 64×64 part of C).
#[kernel(T = f16 | bf16, max_threads = 256)]
pub unsafe fn gemm<T: MmaInput>(m: u32, n: u32, k: u32, a: *const T, b: *const T, c: *mut f32) {
    let (n, k) = (n as usize, k as usize);
    let _ = m;
    let a_stages = shared_array!(Chunk, GEMM_STAGES * STAGE_CHUNKS).cast::<T>();
    let b_stages = shared_array!(Chunk, GEMM_STAGES * STAGE_CHUNKS).cast::<T>();
    // SAFETY: each stage is `STAGE_CHUNKS` chunks of the arrays, aligned to 16 bytes.
    let stage_a =
        |s: usize| unsafe { StageA::<T>::from_ptr(a_stages.add(s * StageA::<T>::ELEMENTS)) };
    // SAFETY: as for A.
    let stage_b =
        |s: usize| unsafe { StageB::<T>::from_ptr(b_stages.add(s * StageB::<T>::ELEMENTS)) };
    let block_row = kernel::block_idx_y() as usize * GEMM_BLOCK_M;
    let block_col = kernel::block_idx_x() as usize * GEMM_BLOCK_N;
    let thread = kernel::thread_idx_x() as usize;
    let lanes = kernel::warp_size() as usize;
    let warps_n = GEMM_THREADS as usize / lanes / 2;
    let warp = thread / lanes;
    let warp_row = warp / warps_n * (WARP_TILES_M * TILE);
    let warp_cols = GEMM_BLOCK_N / warps_n;
    let warp_col = warp % warps_n * warp_cols;
    let tiles_n = warp_cols / TILE;
    // Slice `t` of A and B into stage `s`: 512 chunks of each, 2 per thread.
    let fill = |t: usize, s: usize| {
        let (sa, sb) = (stage_a(s), stage_b(s));
        for i in [thread, thread + GEMM_THREADS as usize] {
            let (row, col) = (i / 4, i % 4 * 8);
            // SAFETY: inside the 128×32 slice of A at (block_row, t·32) and the stage.
            unsafe {
                copy_async(
                    sa.ptr(row, col).cast::<Chunk>(),
                    a.add((block_row + row) * k + t * GEMM_BLOCK_K + col)
                        .cast::<Chunk>(),
                )
            };
            let (row, col) = (i / 16, i % 16 * 8);
            // SAFETY: inside the 32×128 slice of B at (t·32, block_col) and the stage.
            unsafe {
                copy_async(
                    sb.ptr(row, col).cast::<Chunk>(),
                    b.add((t * GEMM_BLOCK_K + row) * n + block_col + col)
                        .cast::<Chunk>(),
                )
            };
        }
    };
    let mut acc = [[Accumulator::zero(); MAX_WARP_TILES_N]; WARP_TILES_M];
    let slices = k / GEMM_BLOCK_K;
    let mut pipeline = Pipeline::<GEMM_STAGES>::new();
    for t in 0..GEMM_STAGES - 1 {
        if t < slices {
            fill(t, pipeline.producer_stage());
        }
        pipeline.producer_commit();
    }
    for t in 0..slices {
        let stage = pipeline.consumer_wait();
        kernel::sync_threads();
        let (sa, sb) = (stage_a(stage.index()), stage_b(stage.index()));
        unroll!(step in [0, 1] {
            let kk = step * TILE;
            let mut fa = [FragmentA::<T>::zero(); WARP_TILES_M];
            unroll!(i in [0, 1, 2, 3] {
                // SAFETY: a 16×16 tile of the stage, read after the barrier that follows its
                // wait.
                fa[i] = unsafe { FragmentA::load_tile(sa, warp_row + i * TILE, kk) };
            });
            let mut fb = [FragmentB::<T>::zero(); MAX_WARP_TILES_N];
            unroll!(j in [0, 1, 2, 3] {
                if j < tiles_n {
                    // SAFETY: as for A.
                    fb[j] = unsafe { FragmentB::load_tile(sb, kk, warp_col + j * TILE) };
                }
            });
            unroll!(i in [0, 1, 2, 3] {
                unroll!(j in [0, 1, 2, 3] {
                    if j < tiles_n {
                        acc[i][j] = mma(&fa[i], &fb[j], &acc[i][j]);
                    }
                });
            });
        });
        stage.release();
        if t + GEMM_STAGES - 1 < slices {
            fill(t + GEMM_STAGES - 1, pipeline.producer_stage());
        }
        pipeline.producer_commit();
    }
    unroll!(i in [0, 1, 2, 3] {
        unroll!(j in [0, 1, 2, 3] {
            if j < tiles_n {
                let (row, col) = (block_row + warp_row + i * TILE, block_col + warp_col + j * TILE);
                // SAFETY: the 16×16 tile of C at (row, col), this warp's alone.
                unsafe { acc[i][j].store(c.add(row * n + col), n) };
            }
        });
    });
}

/// Rows of C a block of [`gemm_fragments_f16`] computes.
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
pub unsafe fn gemm_fragments_f16(
    m: u32,
    n: u32,
    k: u32,
    a: *const f16,
    b: *const f16,
    c: *mut f32,
) {
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
