//! The kernels of `attention`: the forward pass of scaled dot-product attention,
//! `O = softmax(Q·Kᵀ / √d)·V`, FlashAttention-2's way, on the matrix units, one source for
//! every device.
//!
//! A block takes 64 rows of Q (queries) of one head and walks over K and V (keys, values) 64
//! rows at a time. Each warp holds its 16 rows of Q as fragments for the whole walk, multiplies
//! them by the transposed tile of K into 16×64 scores, keeps each row's running maximum and sum
//! (the online softmax), turns the scores into probabilities in registers and multiplies them
//! by the tile of V into its 16×d part of O, rescaled whenever a row's maximum grows. Nothing
//! of the `seq × seq` score matrix is ever written to memory. The next tiles of K and of V are
//! copied asynchronously while the current ones are used.
//!
//! Entry points: [`attention_d64`] and [`attention_d128`] (head dimension 64 and 128), each for
//! `f16` and `bf16` (`attention_d64__f16`, …); causal or not is an argument.
#![no_std]

use offload_rt::kernel::half::{bf16, f16};
use offload_rt::kernel::math::{self, exp2_approx};
use offload_rt::kernel::matrix::{
    Accumulator, FragmentA, FragmentB, MmaInput, RowValues, TILE, mma, rows_reduce,
};
use offload_rt::kernel::pipeline::{SwizzledTile, commit_group, copy_async, wait_group};
use offload_rt::kernel::{self, kernel};
use offload_rt::shared_array;

/// Runs `body` with `$i` bound to each of the literal indices. On GPUs unrolled: fragments
/// and accumulators indexed by constants stay in registers.
#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
macro_rules! unroll {
    ($i:ident in [$($n:literal),*] $body:block) => {
        $( { let $i: usize = $n; $body } )*
    };
}

/// On the CPU device a loop: every unrolled copy of a warp-wide multiply would be inlined into
/// the kernel's loops over its threads, and the kernels' 256 of them made the CPU image's
/// build minutes long.
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
macro_rules! unroll {
    ($i:ident in [$($n:literal),*] $body:block) => {
        for $i in [$($n),*] {
            let $i: usize = $i;
            $body
        }
    };
}

/// Rows of Q (queries) a block computes.
pub const BLOCK_Q: usize = 64;
/// Rows of K and V (keys) a block takes at a time.
pub const BLOCK_KV: usize = 64;
/// Threads per block: 4 warps of 32 lanes, 16 query rows each, or 2 wavefronts of 64, 32 rows
/// each.
pub const THREADS: u32 = 128;

/// 16-row tiles of the block's queries a warp holds, at most (a wavefront of 64 holds 2).
const MAX_ROW_TILES: usize = 2;
/// 16-column tiles of a block's scores: one per 16 keys.
const KEY_TILES: usize = BLOCK_KV / TILE;

/// The unit of the shared tiles: 16 bytes aligned to 16, as the copies and the matrix loads
/// want them.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Chunk([u32; 4]);

/// `O = softmax(Q·Kᵀ·scale)·V` for head dimension 64: a block takes rows `64·x..` of Q of
/// head `y` (`x`, `y` the block's index, the heaviest causal blocks first) against every key,
/// or with `causal` non-zero only against the keys at or before each query. `scale_log2` is
/// the scores' scale times `log2(e)` (`log2(e) / √64` for attention's usual scale).
///
/// # Safety (of the launch)
///
/// `q`, `k`, `v` and `o` hold `heads × seq × 64` elements, each head's rows contiguous
/// (row-major `[head][row][64]`); `seq` is a multiple of 64; the grid is `(seq / 64, heads)`
/// blocks of [`THREADS`].
#[kernel(T = f16 | bf16, max_threads = 128)]
pub unsafe fn attention_d64<T: MmaInput>(
    seq: u32,
    scale_log2: f32,
    causal: u32,
    q: *const T,
    k: *const T,
    v: *const T,
    o: *mut T,
) {
    const CHUNKS: usize = BLOCK_Q * 64 * 2 / 16;
    let tiles = shared_array!(Chunk, 3 * CHUNKS).cast::<T>();
    // SAFETY: the launch's contract; `tiles` holds Q's, K's and V's 64×64 tiles.
    unsafe { forward::<T, 64>(tiles, seq, scale_log2, causal != 0, q, k, v, o) }
}

/// `O = softmax(Q·Kᵀ·scale)·V` for head dimension 128: a block takes rows `64·x..` of Q of
/// head `y` (`x`, `y` the block's index, the heaviest causal blocks first) against every key,
/// or with `causal` non-zero only against the keys at or before each query. `scale_log2` is
/// the scores' scale times `log2(e)` (`log2(e) / √128` for attention's usual scale).
///
/// # Safety (of the launch)
///
/// `q`, `k`, `v` and `o` hold `heads × seq × 128` elements, each head's rows contiguous
/// (row-major `[head][row][128]`); `seq` is a multiple of 64; the grid is `(seq / 64, heads)`
/// blocks of [`THREADS`].
#[kernel(T = f16 | bf16, max_threads = 128)]
pub unsafe fn attention_d128<T: MmaInput>(
    seq: u32,
    scale_log2: f32,
    causal: u32,
    q: *const T,
    k: *const T,
    v: *const T,
    o: *mut T,
) {
    const CHUNKS: usize = BLOCK_Q * 128 * 2 / 16;
    let tiles = shared_array!(Chunk, 3 * CHUNKS).cast::<T>();
    // SAFETY: the launch's contract; `tiles` holds Q's, K's and V's 64×128 tiles.
    unsafe { forward::<T, 128>(tiles, seq, scale_log2, causal != 0, q, k, v, o) }
}

/// The forward pass of one block, as [`attention_d64`] and [`attention_d128`] describe it, for
/// head dimension `D`; the exponentials are powers of two.
///
/// # Safety
///
/// The kernels' launch contract with `D` for the head dimension; `tiles` is the block's shared
/// memory for three `64 × D` tiles, aligned to 16 bytes.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn forward<T: MmaInput, const D: usize>(
    tiles: *mut T,
    seq: u32,
    scale_log2: f32,
    causal: bool,
    q: *const T,
    k: *const T,
    v: *const T,
    o: *mut T,
) {
    let seq = seq as usize;
    // SAFETY: the three tiles of `tiles`, each 64×D elements, aligned to 16 bytes.
    let (q_tile, k_tile, v_tile) = unsafe {
        (
            SwizzledTile::<T, BLOCK_Q, D>::from_ptr(tiles),
            SwizzledTile::<T, BLOCK_KV, D>::from_ptr(tiles.add(BLOCK_Q * D)),
            SwizzledTile::<T, BLOCK_KV, D>::from_ptr(tiles.add((BLOCK_Q + BLOCK_KV) * D)),
        )
    };
    let query_block = (kernel::grid_dim_x() - 1 - kernel::block_idx_x()) as usize;
    let head = kernel::block_idx_y() as usize * seq * D;
    let thread = kernel::thread_idx_x() as usize;
    let lanes = kernel::warp_size() as usize;
    let row_tiles = BLOCK_Q / TILE / (THREADS as usize / lanes);
    let warp_row = thread / lanes * row_tiles * TILE;
    let key_blocks = if causal {
        query_block + 1
    } else {
        seq / BLOCK_KV
    };

    // The 64×D rows of `src` from `row0` into `tile`, 16 bytes a copy, a constant number of
    // copies a thread (a loop LLVM unrolls).
    let fill = |tile: SwizzledTile<T, BLOCK_Q, D>, src: *const T, row0: usize| {
        for j in 0..BLOCK_Q * D / 8 / THREADS as usize {
            let i = thread + j * THREADS as usize;
            let (row, col) = (i / (D / 8), i % (D / 8) * 8);
            // SAFETY: inside the head's rows (the launch's contract) and the tile.
            unsafe {
                copy_async(
                    tile.ptr(row, col).cast::<Chunk>(),
                    src.add(head + (row0 + row) * D + col).cast::<Chunk>(),
                )
            };
        }
    };

    fill(q_tile, q, query_block * BLOCK_Q);
    commit_group();
    fill(k_tile, k, 0);
    commit_group();
    fill(v_tile, v, 0);
    commit_group();
    wait_group::<2>();
    kernel::sync_threads();

    let mut q_frags = [[FragmentA::<T>::zero(); 8]; MAX_ROW_TILES];
    unroll!(r in [0, 1] {
        if r < row_tiles {
            unroll!(kk in [0, 1, 2, 3, 4, 5, 6, 7] {
                if kk < D / TILE {
                    // SAFETY: a 16×16 tile of Q's, read after the barrier that follows its
                    // copy.
                    q_frags[r][kk] =
                        unsafe { FragmentA::load_tile(q_tile, warp_row + r * TILE, kk * TILE) };
                }
            });
        }
    });

    let mut row_max = [RowValues::splat(f32::NEG_INFINITY); MAX_ROW_TILES];
    let mut row_sum = [RowValues::splat(0.0); MAX_ROW_TILES];
    let mut out = [[Accumulator::zero(); 8]; MAX_ROW_TILES];
    for key_block in 0..key_blocks {
        // K's tile of this block of keys is complete (V's may still be in flight).
        wait_group::<1>();
        kernel::sync_threads();
        let mut scores = [[Accumulator::zero(); KEY_TILES]; MAX_ROW_TILES];
        unroll!(kk in [0, 1, 2, 3, 4, 5, 6, 7] {
            if kk < D / TILE {
                unroll!(c in [0, 1, 2, 3] {
                    // SAFETY: a 16×16 tile of K's, read after the barrier that follows its
                    // copy; as Kᵀ.
                    let kt = unsafe { FragmentB::load_tile_transposed(k_tile, c * TILE, kk * TILE) };
                    unroll!(r in [0, 1] {
                        if r < row_tiles {
                            scores[r][c] = mma(&q_frags[r][kk], &kt, &scores[r][c]);
                        }
                    });
                });
            }
        });
        // Every warp is done with K's tile: the next one is copied while this one's scores
        // become probabilities and meet V.
        kernel::sync_threads();
        if key_block + 1 < key_blocks {
            fill(k_tile, k, (key_block + 1) * BLOCK_KV);
        }
        commit_group();

        let diagonal = causal && key_block == query_block;
        let mut probs = [[Accumulator::zero(); KEY_TILES]; MAX_ROW_TILES];
        unroll!(r in [0, 1] {
            if r < row_tiles {
                if diagonal {
                    // Queries and keys of this block share their offsets: a key after the
                    // query is masked.
                    unroll!(c in [0, 1, 2, 3] {
                        let first = warp_row + r * TILE;
                        scores[r][c] = scores[r][c].map_at(|row, col, x| {
                            if c * TILE + col > first + row { f32::NEG_INFINITY } else { x }
                        });
                    });
                }
                // The online softmax, in powers of two: each row's new maximum (scaled), the
                // factor its earlier sum and output shrink by, this tile's probabilities.
                let tile_max = rows_reduce(&scores[r], f32::max);
                let new_max = row_max[r].zip(&tile_max, |m, x| m.max(x * scale_log2));
                let rescale = row_max[r].zip(&new_max, |old, new| exp2_approx(old - new));
                unroll!(c in [0, 1, 2, 3] {
                    probs[r][c] = scores[r][c]
                        .map_rows(&new_max, |x, m| exp2_approx(math::fma(x, scale_log2, -m)));
                });
                let tile_sum = rows_reduce(&probs[r], |a, b| a + b);
                row_sum[r] = row_sum[r]
                    .zip(&rescale, |s, f| s * f)
                    .zip(&tile_sum, |s, t| s + t);
                row_max[r] = new_max;
                unroll!(d in [0, 1, 2, 3, 4, 5, 6, 7] {
                    if d < D / TILE {
                        out[r][d] = out[r][d].map_rows(&rescale, |x, f| x * f);
                    }
                });
            }
        });

        // V's tile is complete (the next K's may still be in flight).
        wait_group::<1>();
        kernel::sync_threads();
        unroll!(c in [0, 1, 2, 3] {
            let mut p = [FragmentA::<T>::zero(); MAX_ROW_TILES];
            unroll!(r in [0, 1] {
                if r < row_tiles {
                    p[r] = probs[r][c].to_fragment_a::<T>();
                }
            });
            unroll!(d in [0, 1, 2, 3, 4, 5, 6, 7] {
                if d < D / TILE {
                    // SAFETY: a 16×16 tile of V's, read after the barrier that follows its
                    // copy.
                    let vf = unsafe { FragmentB::load_tile(v_tile, c * TILE, d * TILE) };
                    unroll!(r in [0, 1] {
                        if r < row_tiles {
                            out[r][d] = mma(&p[r], &vf, &out[r][d]);
                        }
                    });
                }
            });
        });
        kernel::sync_threads();
        if key_block + 1 < key_blocks {
            fill(v_tile, v, (key_block + 1) * BLOCK_KV);
        }
        commit_group();
    }

    // O's rows divided by their sums, rounded to `T` into Q's tile (each warp its own rows),
    // then copied out 16 bytes a thread at a time.
    let inverse = row_sum.map(|sums| sums.map(|s| 1.0 / s));
    unroll!(r in [0, 1] {
        if r < row_tiles {
            unroll!(d in [0, 1, 2, 3, 4, 5, 6, 7] {
                if d < D / TILE {
                    let result = out[r][d].map_rows(&inverse[r], |x, i| x * i);
                    // SAFETY: this warp's 16×16 tile of Q's, which no warp reads any more
                    // (each holds its fragments since the first barrier).
                    unsafe { result.store_tile::<T, BLOCK_Q, D>(q_tile, warp_row + r * TILE, d * TILE) };
                }
            });
        }
    });
    kernel::sync_threads();
    for j in 0..BLOCK_Q * D / 8 / THREADS as usize {
        let i = thread + j * THREADS as usize;
        let (row, col) = (i / (D / 8), i % (D / 8) * 8);
        // SAFETY: a chunk of the tile, written before the barrier, and of the block's rows
        // of O (the launch's contract).
        unsafe {
            let chunk = q_tile.ptr(row, col).cast::<Chunk>().read();
            o.add(head + (query_block * BLOCK_Q + row) * D + col)
                .cast::<Chunk>()
                .write(chunk);
        }
    }
}
