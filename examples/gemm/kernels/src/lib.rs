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
use offload_rt::kernel::mbarrier::{self, MBarrier};
use offload_rt::kernel::pipeline::{Pipeline, SwizzledTile, copy_async};
use offload_rt::kernel::tma::{self, TensorMap};
use offload_rt::kernel::wgmma::{self, SharedMatrixDescriptor, Swizzle};
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
    let a_stages = shared_array!(Chunk, GEMM_STAGES * STAGE_CHUNKS);
    let b_stages = shared_array!(Chunk, GEMM_STAGES * STAGE_CHUNKS);
    // SAFETY: the launch's contract; the stages are the block's shared arrays.
    unsafe { pipelined::<T, false>(m, n, k, a, b, c, a_stages, b_stages) }
}

/// [`gemm`] with B column-major: `bt` holds Bᵀ row-major (`n×k`, the layout of a column-major
/// B, of PyTorch's `linear` weights); one entry point per input type (`gemm_bt__f16`,
/// `gemm_bt__bf16`). Its slices of Bᵀ are copied as A's are, and B's fragments are read from
/// them transposed (`FragmentB::load_tile_transposed`: `ldmatrix` without `.trans` on NVIDIA,
/// one 64-bit LDS read a lane on CDNA).
///
/// # Safety (of the launch)
///
/// As [`gemm`]'s, `bt` with `n·k` elements.
#[kernel(T = f16 | bf16, max_threads = 256)]
pub unsafe fn gemm_bt<T: MmaInput>(m: u32, n: u32, k: u32, a: *const T, bt: *const T, c: *mut f32) {
    let a_stages = shared_array!(Chunk, GEMM_STAGES * STAGE_CHUNKS);
    let b_stages = shared_array!(Chunk, GEMM_STAGES * STAGE_CHUNKS);
    // SAFETY: the launch's contract; the stages are the block's shared arrays.
    unsafe { pipelined::<T, true>(m, n, k, a, bt, c, a_stages, b_stages) }
}

/// The body of [`gemm`] (`B_TRANSPOSED` false: `b` holds B row-major) and [`gemm_bt`] (true:
/// `b` holds Bᵀ row-major), over the block's stages of A and of B.
///
/// # Safety
///
/// The kernels' launch contracts; `a_stages` and `b_stages` are the block's shared arrays of
/// `GEMM_STAGES * STAGE_CHUNKS` chunks.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn pipelined<T: MmaInput, const B_TRANSPOSED: bool>(
    m: u32,
    n: u32,
    k: u32,
    a: *const T,
    b: *const T,
    c: *mut f32,
    a_stages: *mut Chunk,
    b_stages: *mut Chunk,
) {
    let (n, k) = (n as usize, k as usize);
    let _ = m;
    let (a_stages, b_stages) = (a_stages.cast::<T>(), b_stages.cast::<T>());
    // SAFETY: each stage is `STAGE_CHUNKS` chunks of the arrays, aligned to 16 bytes.
    let stage_a =
        |s: usize| unsafe { StageA::<T>::from_ptr(a_stages.add(s * StageA::<T>::ELEMENTS)) };
    // SAFETY: as for A.
    let stage_b =
        |s: usize| unsafe { StageB::<T>::from_ptr(b_stages.add(s * StageB::<T>::ELEMENTS)) };
    // SAFETY: as for A; Bᵀ's stages are the same memory, 128×32 like A's.
    let stage_bt =
        |s: usize| unsafe { StageA::<T>::from_ptr(b_stages.add(s * StageA::<T>::ELEMENTS)) };
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
            if B_TRANSPOSED {
                let (row, col) = (i / 4, i % 4 * 8);
                // SAFETY: inside the 128×32 slice of Bᵀ at (block_col, t·32) and the stage.
                unsafe {
                    copy_async(
                        stage_bt(s).ptr(row, col).cast::<Chunk>(),
                        b.add((block_col + row) * k + t * GEMM_BLOCK_K + col)
                            .cast::<Chunk>(),
                    )
                };
            } else {
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
        let (sa, sb, sbt) = (
            stage_a(stage.index()),
            stage_b(stage.index()),
            stage_bt(stage.index()),
        );
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
                    fb[j] = unsafe {
                        if B_TRANSPOSED {
                            FragmentB::load_tile_transposed(sbt, warp_col + j * TILE, kk)
                        } else {
                            FragmentB::load_tile(sb, kk, warp_col + j * TILE)
                        }
                    };
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

/// Rows of C a block of [`gemm_tma`] computes: 64 for each of its two consumer warpgroups.
pub const TMA_BLOCK_M: usize = 128;
/// Columns of C a block of [`gemm_tma`] computes: one `wgmma` of N = 128 per 16 of `k`.
pub const TMA_BLOCK_N: usize = 128;
/// Depth of the slices of A and B one stage of [`gemm_tma`] holds: 64 elements, the 128-byte
/// rows the tensor memory accelerator swizzles.
pub const TMA_BLOCK_K: usize = 64;
/// Stages of [`gemm_tma`]'s ring of shared slices.
pub const TMA_STAGES: usize = 4;
/// Threads per block of [`gemm_tma`]: a producer warpgroup and two consumer warpgroups.
pub const TMA_THREADS: u32 = 384;
/// Bytes of one stage's slice of A (or of B): 128 rows of 64 16-bit elements.
const TMA_SLICE_BYTES: usize = TMA_BLOCK_M * TMA_BLOCK_K * 2;
/// Two neighbouring values of C, aligned so that one 64-bit store writes them (`col` is even
/// and `n` a multiple of 128).
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Pair([f32; 2]);

/// Dynamic shared memory a launch of [`gemm_tma`] asks for: the stages, and room to align
/// them to the 1024 bytes of the 128-byte swizzle's pattern.
pub const TMA_SHARED_BYTES: u32 = (TMA_STAGES * 2 * TMA_SLICE_BYTES + 1024) as u32;

/// Stage `s`'s slice of A (or of B, `b_side`) in the 1024-aligned stages: A's slices first,
/// then B's, 16 KiB each.
#[inline(always)]
fn slice(stages: *mut u8, s: usize, b_side: bool) -> *mut u8 {
    stages.wrapping_add((usize::from(b_side) * TMA_STAGES + s) * TMA_SLICE_BYTES)
}

/// The ring's barriers in shared memory: a `full` one per stage (its slices have landed) and
/// an `empty` one (both consumers are done with it).
#[derive(Clone, Copy)]
struct Barriers(*mut u64);

impl Barriers {
    /// The barriers at `words`.
    ///
    /// # Safety
    ///
    /// `words` is `2 * TMA_STAGES` words of the block's shared memory, aligned to 8, used as
    /// nothing else.
    #[inline(always)]
    unsafe fn new(words: *mut u64) -> Self {
        Self(words)
    }

    #[inline(always)]
    fn full(self, s: usize) -> MBarrier {
        // SAFETY: `new`'s contract: word `s` of the array is a barrier of its own.
        unsafe { MBarrier::from_ptr(self.0.add(s)) }
    }

    #[inline(always)]
    fn empty(self, s: usize) -> MBarrier {
        // SAFETY: as for `full`, word `TMA_STAGES + s`.
        unsafe { MBarrier::from_ptr(self.0.add(TMA_STAGES + s)) }
    }
}

/// `C = A·Bᵀ` on Hopper (`sm_90a` images; elsewhere the kernel does nothing, as
/// `kernel::has_wgmma()` says): A is `m×k` row-major, Bᵀ is `n×k` row-major (B column-major,
/// the "TN" layout), C `m×n` row-major f32; `m` and `n` multiples of 128, `k` of 64. `a_map`
/// and `b_map` are tensor maps of A and Bᵀ with 64×128 boxes (64 along `k`) and the 128-byte
/// swizzle.
///
/// Warp-specialized: the first warpgroup gives up its registers (`setmaxnreg`) and one of its
/// threads feeds a ring of [`TMA_STAGES`] shared slices with the tensor memory accelerator,
/// each completing on the stage's `full` barrier; the two others take registers, wait for a
/// stage, multiply it with `wgmma` m64n128k16 straight from shared memory into 64 f32
/// accumulators a thread, and hand it back through its `empty` barrier.
///
/// # Safety (of the launch)
///
/// The maps describe A and Bᵀ as above, in device memory; `c` has `m·n` elements; the grid is
/// `(n / 128, m / 128)` blocks of [`TMA_THREADS`] with [`TMA_SHARED_BYTES`] of dynamic shared
/// memory.
#[kernel(T = f16 | bf16, max_threads = 384)]
pub unsafe fn gemm_tma<T: MmaInput>(
    n: u32,
    k: u32,
    a_map: *const TensorMap,
    b_map: *const TensorMap,
    c: *mut f32,
) {
    if !kernel::has_wgmma() {
        return;
    }
    let (n, k) = (n as usize, k as usize);
    let raw = kernel::dynamic_shared::<u8>();
    let pad = (1024 - wgmma::shared_address(raw) as usize % 1024) % 1024;
    // SAFETY: the launch's dynamic shared memory holds the padding and the stages.
    let stages = unsafe { raw.add(pad) };
    // SAFETY: an array of the block's shared memory for the barriers alone.
    let bars = unsafe { Barriers::new(shared_array!(u64, 2 * TMA_STAGES)) };
    let thread = kernel::thread_idx_x() as usize;
    let group = thread / 128;
    if thread == 0 {
        for s in 0..TMA_STAGES {
            bars.full(s).init(1);
            bars.empty(s).init(2);
        }
        mbarrier::fence_init();
    }
    kernel::sync_threads();
    let block_row = kernel::block_idx_y() as usize * TMA_BLOCK_M;
    let block_col = kernel::block_idx_x() as usize * TMA_BLOCK_N;
    let slices = k / TMA_BLOCK_K;
    if group == 0 {
        wgmma::warpgroup_reg_dealloc::<40>();
        if thread == 0 {
            // Stage `s` in round `phase` (its parity): the consumers' release of the stage's
            // use in the round before, which in the first round is the phase before the
            // barrier's first, complete from the start.
            let (mut s, mut phase) = (0, 0u32);
            for t in 0..slices {
                bars.empty(s).wait_parity(phase ^ 1);
                let full = bars.full(s);
                full.arrive_expect_tx(2 * TMA_SLICE_BYTES as u32);
                let kk = (t * TMA_BLOCK_K) as i32;
                // SAFETY: the maps are the launch's; the stage's slices are 16 KiB of shared
                // memory aligned to 1024, released by both consumers (or never used).
                unsafe {
                    tma::load_2d(slice(stages, s, false), a_map, full, kk, block_row as i32);
                    tma::load_2d(slice(stages, s, true), b_map, full, kk, block_col as i32);
                }
                s += 1;
                if s == TMA_STAGES {
                    (s, phase) = (0, phase ^ 1);
                }
            }
        }
        return;
    }
    wgmma::warpgroup_reg_alloc::<232>();
    let consumer = group - 1;
    let mut acc = [0.0f32; 64];
    let (mut s, mut phase) = (0, 0u32);
    for _ in 0..slices {
        bars.full(s).wait_parity(phase);
        // This consumer's 64 rows of A's slice: 8 swizzled rows of 128 bytes per 1024.
        let a_rows = slice(stages, s, false).wrapping_add(consumer * 64 * 128);
        wgmma::fence();
        unroll!(step in [0, 1, 2, 3] {
            let da = SharedMatrixDescriptor::new(a_rows, 16, 1024, Swizzle::Bytes128)
                .offset(step as u32 * 32);
            let db = SharedMatrixDescriptor::new(slice(stages, s, true), 16, 1024, Swizzle::Bytes128)
                .offset(step as u32 * 32);
            // SAFETY: the warpgroup runs it alike; the stage landed (its `full` phase), and
            // is handed back only after the wait below.
            unsafe { wgmma::mma_async_m64n128k16::<T, false, false>(&mut acc, da, db, true) };
        });
        wgmma::commit_group();
        wgmma::wait_group::<0>();
        if thread.is_multiple_of(128) {
            bars.empty(s).arrive();
        }
        s += 1;
        if s == TMA_STAGES {
            (s, phase) = (0, phase ^ 1);
        }
    }
    let local = thread % 128;
    let (warp, lane) = (local / 32, local % 32);
    let row = block_row + consumer * 64 + 16 * warp + lane / 4;
    unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
        let col = block_col + 8 * j + 2 * (lane % 4);
        // SAFETY: (row, col..col + 2) and (row + 8, col..col + 2) are this thread's values of
        // C, inside its m×n elements.
        unsafe {
            c.add(row * n + col).cast::<Pair>().write(Pair([acc[4 * j], acc[4 * j + 1]]));
            c.add((row + 8) * n + col)
                .cast::<Pair>()
                .write(Pair([acc[4 * j + 2], acc[4 * j + 3]]));
        }
    });
}
