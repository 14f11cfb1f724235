//! Warp-wide matrix multiply-accumulate on the GPUs' matrix units (feature `half`): a warp
//! (a wavefront on AMD) multiplies a 16×16 tile of A by a 16×16 tile of B, both `f16` or both
//! `bf16`, and adds the product to a 16×16 `f32` accumulator, as CUDA's `wmma` and
//! `mma.sync`, HIP's rocWMMA do.
//!
//! ```ignore
//! use offload_rt::kernel::half::f16;
//! use offload_rt::kernel::matrix::{Accumulator, FragmentA, FragmentB, TILE, mma};
//! let mut acc = Accumulator::zero();
//! for k in (0..n).step_by(TILE) {
//!     // SAFETY: the tiles at these places lie inside `a` (m×n, row-major) and `b` (n×p).
//!     let (fa, fb) = unsafe { (FragmentA::load(a.add(k), n), FragmentB::load(b.add(k * p), p)) };
//!     acc = mma(&fa, &fb, &acc);
//! }
//! // SAFETY: the tile lies inside `c`.
//! unsafe { acc.store(c, p) };
//! ```
//!
//! Every lane of the warp takes part in each call, with the same arguments: the fragments are
//! spread over the lanes, each holding the elements its target's instruction wants in it.
//! Tiles are row-major with a leading dimension (`A[row][k]` at `src[row * ld + k]`,
//! `B[k][col]` at `src[k * ld + col]`), in global or shared memory.
//!
//! | device | instruction | lanes | accumulation |
//! |---|---|---|---|
//! | NVIDIA sm_80+ | `mma.sync.aligned.m16n8k16` (`HMMA`), two per tile | 32 | the tensor core's |
//! | AMD gfx908, gfx90a, gfx94x, gfx950 | `v_mfma_f32_16x16x16` (bf16 from gfx90a) | 64 | the matrix core's |
//! | AMD gfx11 | `v_wmma_f32_16x16x16` | 32 | the matrix core's |
//! | CPU device | none: each lane keeps A's rows and B's columns its outputs need, then vector code | 32 | in `k` order, each sum rounded to `f32` |
//!
//! The products of two `f16` or two `bf16` values are exact in `f32`, so every device gives the
//! same result wherever the sums are exact too (integers below 2^24, for instance). Otherwise
//! the matrix units add the 16 products of a step in an order and at an internal precision of
//! their own: results stay within a few units in the last place of the largest partial sum of
//! the CPU device's. The device link refuses other processors with `LinkError::
//! MatrixUnsupported`.
//!
//! `m32n32k8` has the same operations for 32×32 accumulators over `k` steps of 8 (CDNA's
//! `v_mfma_f32_32x32x8`, which reads half the fragment bytes per product of the 16×16×16
//! shape).

use core::marker::PhantomData;

use super::half::{bf16, f16};
pub use super::matrix_loads::{
    ldmatrix_x1, ldmatrix_x1_trans, ldmatrix_x2, ldmatrix_x2_trans, ldmatrix_x4, ldmatrix_x4_trans,
    stmatrix_x1, stmatrix_x1_trans, stmatrix_x2, stmatrix_x2_trans, stmatrix_x4, stmatrix_x4_trans,
};
use super::matrix_loads::{word_to_halves, words_to_halves};
use super::mma_input::{FLOATS, HALVES, Layout, ROW_SLOTS};
pub use super::mma_input::{MmaInput, TILE};
use super::pipeline::SwizzledTile;

/// Runs `body` with `$e` bound to each of the literal indices, unrolled: a fragment indexed
/// by a loop counter would live in memory (LLVM unrolls these loops only in part), where each
/// index a constant keeps it in registers.
macro_rules! unrolled {
    ($e:ident in [$($i:literal),*] $body:block) => {
        $( { let $e: usize = $i; $body } )*
    };
}

/// Evaluates `$body` with `$layout` bound to the target's layout as a constant of each
/// branch. On AMD the wavefront size, and so the layout, is a constant of the device link,
/// unknown to rustc's optimizations: an array index derived from it (a row's value for an
/// element) would keep the array in scratch memory, where inside one branch it is a constant
/// and the array stays in registers. NVIDIA and the CPU device have one layout, and one
/// branch.
macro_rules! per_layout {
    ($layout:ident => $($body:tt)*) => {
        match layout() {
            Layout::Mma => {
                let $layout = Layout::Mma;
                $($body)*;
            }
            Layout::Mfma => {
                let $layout = Layout::Mfma;
                $($body)*;
            }
            Layout::Wmma => {
                let $layout = Layout::Wmma;
                $($body)*;
            }
        }
    };
}

#[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
mod lane_operands;
pub mod m32n32k8;

/// What a lane holds of A: its part of the tile in the matrix instruction's layout on the
/// GPUs; on the CPU device the two rows its accumulator elements need ([`lane_operands`]).
#[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
type HeldA = [u16; HALVES];
#[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
type HeldA = lane_operands::LaneRows;
/// What a lane holds of B, as [`HeldA`]: on the CPU device four columns.
#[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
type HeldB = [u16; HALVES];
#[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
type HeldB = lane_operands::LaneColumns;

impl MmaInput for f16 {
    const BF16: bool = false;
    #[inline(always)]
    fn bits(self) -> u16 {
        self.to_bits()
    }
    #[inline(always)]
    fn widen(bits: u16) -> f32 {
        super::half::f16_to_f32(f16::from_bits(bits))
    }
    #[inline(always)]
    fn narrow(x: f32) -> u16 {
        super::half::f32_to_f16(x).to_bits()
    }
    #[inline(always)]
    fn narrow2(a: f32, b: f32) -> u32 {
        super::half::f32x2_to_f16x2(a, b)
    }
    #[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    #[inline(always)]
    fn mma(a: &[u16; HALVES], b: &[u16; HALVES], c: &mut [f32; FLOATS]) {
        imp::mma_f16(a, b, c);
    }
}

impl MmaInput for bf16 {
    const BF16: bool = true;
    #[inline(always)]
    fn bits(self) -> u16 {
        self.to_bits()
    }
    #[inline(always)]
    fn widen(bits: u16) -> f32 {
        f32::from_bits(u32::from(bits) << 16)
    }
    #[inline(always)]
    fn narrow(x: f32) -> u16 {
        super::half::f32_to_bf16(x).to_bits()
    }
    #[inline(always)]
    fn narrow2(a: f32, b: f32) -> u32 {
        super::half::f32x2_to_bf16x2(a, b)
    }
    #[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    #[inline(always)]
    fn mma(a: &[u16; HALVES], b: &[u16; HALVES], c: &mut [f32; FLOATS]) {
        imp::mma_bf16(a, b, c);
    }
}

/// This lane's part of a 16×16 tile of A (the left operand), `f16` or `bf16`.
#[derive(Clone, Copy, Debug)]
pub struct FragmentA<T: MmaInput> {
    held: HeldA,
    input: PhantomData<T>,
}

/// This lane's part of a 16×16 tile of B (the right operand), `f16` or `bf16`.
#[derive(Clone, Copy, Debug)]
pub struct FragmentB<T: MmaInput> {
    held: HeldB,
    input: PhantomData<T>,
}

/// This lane's part of a 16×16 `f32` accumulator tile.
#[derive(Clone, Copy, Debug)]
pub struct Accumulator {
    floats: [f32; FLOATS],
}

/// One value for each row of an accumulator tile, as the lanes that hold the row's elements
/// need it: what [`Accumulator::row_max`], [`Accumulator::row_sum`] and
/// [`Accumulator::row_reduce`] give and [`Accumulator::map_rows`] applies (a softmax's
/// running maximum and sum, a scale per row). A lane keeps the values of the rows it holds
/// elements of (2 on NVIDIA, 4 on CDNA, 8 on gfx11); two `RowValues` combine elementwise
/// ([`RowValues::zip`]) when they come from tiles of the same rows.
#[derive(Clone, Copy, Debug)]
pub struct RowValues {
    values: [f32; ROW_SLOTS],
}

impl RowValues {
    /// `x` for every row.
    #[inline(always)]
    pub fn splat(x: f32) -> RowValues {
        RowValues {
            values: [x; ROW_SLOTS],
        }
    }

    /// `f` of each row's value.
    #[inline(always)]
    pub fn map(&self, f: impl Fn(f32) -> f32) -> RowValues {
        let mut out = *self;
        per_layout!(layout => unrolled!(s in [0, 1, 2, 3, 4, 5, 6, 7] {
            if s < layout.row_slots() {
                out.values[s] = f(self.values[s]);
            }
        }));
        out
    }

    /// `f` of each row's value here and in `other`.
    #[inline(always)]
    pub fn zip(&self, other: &RowValues, f: impl Fn(f32, f32) -> f32) -> RowValues {
        let mut out = *self;
        per_layout!(layout => unrolled!(s in [0, 1, 2, 3, 4, 5, 6, 7] {
            if s < layout.row_slots() {
                out.values[s] = f(self.values[s], other.values[s]);
            }
        }));
        out
    }

    /// Stores row `r`'s value at `dst[r]` (a softmax's log-sum-exp, a row's norm); the lane
    /// that holds the row's column 0 writes it. Every lane of the warp calls it with the same
    /// `dst`.
    ///
    /// # Safety
    ///
    /// The 16 floats from `dst` are writable, and no other thread accesses them meanwhile.
    #[inline(always)]
    pub unsafe fn store(&self, dst: *mut f32) {
        let lane = super::lane_id() as usize;
        per_layout!(layout => unrolled!(e in [0, 1, 2, 3, 4, 5, 6, 7] {
            if e < layout.c_count() {
                let (row, col) = layout.c_place(lane, e);
                if col == 0 {
                    // SAFETY: `row < 16`: inside the 16 floats the caller vouches for.
                    unsafe { *dst.add(row) = self.values[layout.row_slot(e)] };
                }
            }
        }));
    }
}

impl<T: MmaInput> FragmentA<T> {
    /// A fragment of zeros.
    #[inline(always)]
    pub fn zero() -> FragmentA<T> {
        FragmentA {
            #[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            held: [0; HALVES],
            #[cfg(not(all(
                offload_device,
                any(target_arch = "nvptx64", target_arch = "amdgpu")
            )))]
            held: lane_operands::LaneRows::ZERO,
            input: PhantomData,
        }
    }

    /// Loads the 16×16 tile of A whose element `(row, k)` is at `src[row * ld + k]`. Every
    /// lane of the warp calls it with the same `src` and `ld`.
    ///
    /// # Safety
    ///
    /// The 16 rows of 16 elements from `src`, `ld` elements apart, are readable.
    #[inline(always)]
    pub unsafe fn load(src: *const T, ld: usize) -> FragmentA<T> {
        let lane = super::lane_id() as usize;
        #[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
        let held = lane_operands::LaneRows::from_chunks::<T>(lane, |row, k0| {
            // SAFETY: `row < 16`, `k0 + 8 <= 16`: inside the tile the caller vouches for.
            unsafe { src.add(row * ld + k0).cast::<[u16; 8]>().read_unaligned() }
        });
        #[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        let held = {
            let mut halves = [0u16; HALVES];
            unrolled!(e in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if e < layout().a_count() {
                    let (row, k) = layout().a_place(lane, e);
                    // SAFETY: `row, k < 16`: inside the tile the caller vouches for.
                    halves[e] = unsafe { *src.add(row * ld + k) }.bits();
                }
            });
            halves
        };
        FragmentA {
            held,
            input: PhantomData,
        }
    }
}

impl<T: MmaInput> FragmentA<T> {
    /// Loads the 16×16 tile of A whose element `(row, k)` is the swizzled tile's element
    /// `(row0 + row, col0 + k)`: on NVIDIA one `ldmatrix.x4` (`LDSM`) for the warp, 16 bytes a
    /// lane; on CDNA one 64-bit LDS read a lane (MFMA's layout); elsewhere element by element. Every lane of the warp calls it with the same
    /// arguments.
    ///
    /// # Safety
    ///
    /// `row0 + 16 <= ROWS`, `col0 + 16 <= COLS`, `col0` a multiple of 8; the tile's memory was
    /// written before the block's last barrier (for a [`Pipeline`](super::pipeline::Pipeline)
    /// stage: read through its `Stage`, after the barrier that follows the wait).
    #[inline(always)]
    pub unsafe fn load_tile<const ROWS: usize, const COLS: usize>(
        tile: SwizzledTile<T, ROWS, COLS>,
        row0: usize,
        col0: usize,
    ) -> FragmentA<T> {
        let lane = super::lane_id() as usize;
        #[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
        let held = lane_operands::LaneRows::from_chunks::<T>(lane, |row, k0| {
            // SAFETY: `row < 16`, `k0` 0 or 8 and `col0` a multiple of 8: one 16-byte chunk
            // of the tile the caller vouches for.
            unsafe {
                tile.ptr_from_row(row0, row, col0 + k0)
                    .cast::<[u16; 8]>()
                    .read()
            }
        });
        #[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        let held = if cfg!(all(offload_device, target_arch = "nvptx64")) {
            // Lanes 0–15 address rows 0–15 at `k` 0, lanes 16–31 at `k` 8: the four 8×8
            // matrices are `mma.sync`'s A registers in order.
            let row = tile.ptr_from_row(row0, lane % 16, col0 + lane / 16 * 8);
            // SAFETY: 16 bytes of one chunk of the tile the caller vouches for.
            words_to_halves(unsafe { ldmatrix_x4(row.cast()) })
        } else if layout() == Layout::Mfma {
            // A lane's 4 elements are consecutive in `k`, 8 bytes inside one 16-byte chunk: one
            // 64-bit LDS read (`ds_read_b64`).
            let (row, k) = layout().a_place(lane, 0);
            // SAFETY: 4 elements of one chunk of the tile the caller vouches for, at a column
            // that is a multiple of 4, so aligned to 8 bytes (the tile's chunks are aligned).
            word_to_halves(unsafe { tile.ptr_from_row(row0, row, col0 + k).cast::<u64>().read() })
        } else {
            let mut halves = [0u16; HALVES];
            unrolled!(e in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if e < layout().a_count() {
                    let (row, k) = layout().a_place(lane, e);
                    // SAFETY: `row, k < 16`: inside the tile the caller vouches for.
                    halves[e] = unsafe { *tile.ptr_from_row(row0, row, col0 + k) }.bits();
                }
            });
            halves
        };
        FragmentA {
            held,
            input: PhantomData,
        }
    }
}

impl<T: MmaInput> FragmentB<T> {
    /// Loads the 16×16 tile of B whose element `(k, col)` is the swizzled tile's element
    /// `(row0 + k, col0 + col)` (B row-major, as [`FragmentB::load`] reads it): on NVIDIA one
    /// `ldmatrix.x4.trans` (`LDSM.T`) for the warp; elsewhere element by element. Every lane
    /// of the warp calls it with the same arguments.
    ///
    /// # Safety
    ///
    /// As [`FragmentA::load_tile`].
    #[inline(always)]
    pub unsafe fn load_tile<const ROWS: usize, const COLS: usize>(
        tile: SwizzledTile<T, ROWS, COLS>,
        row0: usize,
        col0: usize,
    ) -> FragmentB<T> {
        let lane = super::lane_id() as usize;
        #[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
        let held = lane_operands::LaneColumns::from_elements::<T>(lane, |k, col| {
            // SAFETY: `k, col < 16`: inside the tile the caller vouches for.
            unsafe { *tile.ptr_from_row(row0, k, col0 + col) }.bits()
        });
        #[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        let held = if cfg!(all(offload_device, target_arch = "nvptx64")) {
            // Matrix `j` (lanes 8j..8j+7) is `k` 8·(j % 2).., columns 8·(j / 2)..: transposed,
            // the B registers of the left then the right 16×8 half.
            let row = tile.ptr_from_row(row0, lane / 8 % 2 * 8 + lane % 8, col0 + lane / 16 * 8);
            // SAFETY: 16 bytes of one chunk of the tile the caller vouches for.
            words_to_halves(unsafe { ldmatrix_x4_trans(row.cast()) })
        } else {
            let mut halves = [0u16; HALVES];
            unrolled!(e in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if e < layout().b_count() {
                    let (k, col) = layout().b_place(lane, e);
                    // SAFETY: `k, col < 16`: inside the tile the caller vouches for.
                    halves[e] = unsafe { *tile.ptr_from_row(row0, k, col0 + col) }.bits();
                }
            });
            halves
        };
        FragmentB {
            held,
            input: PhantomData,
        }
    }
}

impl<T: MmaInput> FragmentB<T> {
    /// Loads the 16×16 tile of B whose element `(k, col)` is the swizzled tile's element
    /// `(row0 + col, col0 + k)`: B held transposed, as `Kᵀ` is in the rows of K (attention's
    /// `Q·Kᵀ`) or a column-major B. On NVIDIA one `ldmatrix.x4` (`LDSM`, without `.trans`)
    /// for the warp; on CDNA one 64-bit LDS read a lane; elsewhere element by element. Every
    /// lane of the warp calls it with the same arguments.
    ///
    /// # Safety
    ///
    /// As [`FragmentA::load_tile`].
    #[inline(always)]
    pub unsafe fn load_tile_transposed<const ROWS: usize, const COLS: usize>(
        tile: SwizzledTile<T, ROWS, COLS>,
        row0: usize,
        col0: usize,
    ) -> FragmentB<T> {
        let lane = super::lane_id() as usize;
        #[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
        let held = lane_operands::LaneColumns::from_chunks::<T>(lane, |col, k0| {
            // SAFETY: `col < 16`, `k0` 0 or 8 and `col0` a multiple of 8: one 16-byte chunk
            // of the tile the caller vouches for.
            unsafe {
                tile.ptr_from_row(row0, col, col0 + k0)
                    .cast::<[u16; 8]>()
                    .read()
            }
        });
        #[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        let held = if cfg!(all(offload_device, target_arch = "nvptx64")) {
            // Matrix `j` (lanes 8j..8j+7) is the tile's rows 8·(j / 2).., columns 8·(j % 2)..:
            // B's registers of the left 16×8 half, then of the right.
            let row = tile.ptr_from_row(row0, lane / 16 * 8 + lane % 8, col0 + lane / 8 % 2 * 8);
            // SAFETY: 16 bytes of one chunk of the tile the caller vouches for.
            words_to_halves(unsafe { ldmatrix_x4(row.cast()) })
        } else if layout() == Layout::Mfma {
            // A lane's 4 elements are consecutive in `k`, along one of the tile's rows.
            let (k, col) = layout().b_place(lane, 0);
            // SAFETY: 4 elements of one chunk of the tile the caller vouches for, at a column
            // that is a multiple of 4, so aligned to 8 bytes.
            word_to_halves(unsafe { tile.ptr_from_row(row0, col, col0 + k).cast::<u64>().read() })
        } else {
            let mut halves = [0u16; HALVES];
            unrolled!(e in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if e < layout().b_count() {
                    let (k, col) = layout().b_place(lane, e);
                    // SAFETY: `k, col < 16`: inside the tile the caller vouches for.
                    halves[e] = unsafe { *tile.ptr_from_row(row0, col, col0 + k) }.bits();
                }
            });
            halves
        };
        FragmentB {
            held,
            input: PhantomData,
        }
    }
}

impl<T: MmaInput> FragmentB<T> {
    /// A fragment of zeros.
    #[inline(always)]
    pub fn zero() -> FragmentB<T> {
        FragmentB {
            #[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            held: [0; HALVES],
            #[cfg(not(all(
                offload_device,
                any(target_arch = "nvptx64", target_arch = "amdgpu")
            )))]
            held: lane_operands::LaneColumns::ZERO,
            input: PhantomData,
        }
    }

    /// Loads the 16×16 tile of B whose element `(k, col)` is at `src[k * ld + col]`. Every
    /// lane of the warp calls it with the same `src` and `ld`.
    ///
    /// # Safety
    ///
    /// The 16 rows of 16 elements from `src`, `ld` elements apart, are readable.
    #[inline(always)]
    pub unsafe fn load(src: *const T, ld: usize) -> FragmentB<T> {
        let lane = super::lane_id() as usize;
        #[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
        let held = lane_operands::LaneColumns::from_elements::<T>(lane, |k, col| {
            // SAFETY: `k, col < 16`: inside the tile the caller vouches for.
            unsafe { *src.add(k * ld + col) }.bits()
        });
        #[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        let held = {
            let mut halves = [0u16; HALVES];
            unrolled!(e in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if e < layout().b_count() {
                    let (k, col) = layout().b_place(lane, e);
                    // SAFETY: `k, col < 16`: inside the tile the caller vouches for.
                    halves[e] = unsafe { *src.add(k * ld + col) }.bits();
                }
            });
            halves
        };
        FragmentB {
            held,
            input: PhantomData,
        }
    }
}

impl Accumulator {
    /// An accumulator of zeros.
    #[inline(always)]
    pub fn zero() -> Accumulator {
        Accumulator {
            floats: [0.0; FLOATS],
        }
    }

    /// Loads the 16×16 tile whose element `(row, col)` is at `src[row * ld + col]`. Every
    /// lane of the warp calls it with the same `src` and `ld`.
    ///
    /// # Safety
    ///
    /// The 16 rows of 16 floats from `src`, `ld` apart, are readable.
    #[inline(always)]
    pub unsafe fn load(src: *const f32, ld: usize) -> Accumulator {
        let lane = super::lane_id() as usize;
        let mut floats = [0.0; FLOATS];
        unrolled!(e in [0, 1, 2, 3, 4, 5, 6, 7] {
            if e < layout().c_count() {
                let (row, col) = layout().c_place(lane, e);
                // SAFETY: `row, col < 16`: inside the tile the caller vouches for.
                floats[e] = unsafe { *src.add(row * ld + col) };
            }
        });
        Accumulator { floats }
    }

    /// Stores the tile, element `(row, col)` at `dst[row * ld + col]`; each lane writes the
    /// elements it holds. Every lane of the warp calls it with the same `dst` and `ld`.
    ///
    /// # Safety
    ///
    /// The 16 rows of 16 floats from `dst`, `ld` apart, are writable, and no other thread
    /// accesses them meanwhile.
    #[inline(always)]
    pub unsafe fn store(&self, dst: *mut f32, ld: usize) {
        let lane = super::lane_id() as usize;
        unrolled!(e in [0, 1, 2, 3, 4, 5, 6, 7] {
            if e < layout().c_count() {
                let (row, col) = layout().c_place(lane, e);
                // SAFETY: `row, col < 16`: inside the tile the caller vouches for.
                unsafe { *dst.add(row * ld + col) = self.floats[e] };
            }
        });
    }

    /// Stores the tile rounded to `T` into the swizzled tile, element `(row, col)` at the
    /// tile's `(row0 + row, col0 + col)`: the epilogue that hands a result to a TMA store or
    /// to the next multiply. On NVIDIA sm_90 and later one `stmatrix.x4` (`STSM`) for the
    /// warp, 16 bytes a lane ([`has_stmatrix`](super::has_stmatrix)); elsewhere element by
    /// element. Every lane of the warp calls it with the same arguments.
    ///
    /// # Safety
    ///
    /// `row0 + 16 <= ROWS`, `col0 + 16 <= COLS`, `col0` a multiple of 8; no other thread
    /// accesses those elements until the block's next barrier.
    #[inline(always)]
    pub unsafe fn store_tile<T: MmaInput, const ROWS: usize, const COLS: usize>(
        &self,
        tile: SwizzledTile<T, ROWS, COLS>,
        row0: usize,
        col0: usize,
    ) {
        let lane = super::lane_id() as usize;
        if cfg!(all(offload_device, target_arch = "nvptx64")) && super::has_stmatrix() {
            // `mma.sync`'s accumulator is stmatrix.x4's four 8×8 matrices in order: rows 0–7
            // then 8–15 of columns 0–7, then of columns 8–15; lane `8·i + r` addresses row `r`
            // of matrix `i`.
            let (i, r) = (lane / 8 % 4, lane % 8);
            let row = tile.ptr_from_row(row0, r + 8 * (i % 2), col0 + 8 * (i / 2));
            let mut words = [0u32; 4];
            unrolled!(w in [0, 1, 2, 3] {
                words[w] = T::narrow2(self.floats[2 * w], self.floats[2 * w + 1]);
            });
            // SAFETY: 16 bytes of one chunk of the tile the caller vouches for.
            unsafe { stmatrix_x4(row.cast(), words) };
        } else {
            unrolled!(e in [0, 1, 2, 3, 4, 5, 6, 7] {
                if e < layout().c_count() {
                    let (row, col) = layout().c_place(lane, e);
                    // SAFETY: `row, col < 16`: inside the tile the caller vouches for.
                    unsafe {
                        *tile.ptr_from_row(row0, row, col0 + col).cast::<u16>() =
                            T::narrow(self.floats[e]);
                    }
                }
            });
        }
    }

    /// Applies `f` to every element (a scale, an activation): elementwise operations need not
    /// know which lane holds which element.
    #[inline(always)]
    pub fn map(&self, f: impl Fn(f32) -> f32) -> Accumulator {
        let mut out = *self;
        unrolled!(e in [0, 1, 2, 3, 4, 5, 6, 7] {
            if e < layout().c_count() {
                out.floats[e] = f(out.floats[e]);
            }
        });
        out
    }

    /// Applies `f(row, col, x)` to every element `x` at `(row, col)` of the tile: a mask by
    /// position (attention's causal mask), a bias by row or column.
    #[inline(always)]
    pub fn map_at(&self, f: impl Fn(usize, usize, f32) -> f32) -> Accumulator {
        let lane = super::lane_id() as usize;
        let mut out = *self;
        unrolled!(e in [0, 1, 2, 3, 4, 5, 6, 7] {
            if e < layout().c_count() {
                let (row, col) = layout().c_place(lane, e);
                out.floats[e] = f(row, col, out.floats[e]);
            }
        });
        out
    }

    /// Applies `f(x, v)` to every element `x`, `v` its row's value in `rows`: a row's scale,
    /// a softmax's `exp(x - max)`.
    #[inline(always)]
    pub fn map_rows(&self, rows: &RowValues, f: impl Fn(f32, f32) -> f32) -> Accumulator {
        let mut out = *self;
        per_layout!(layout => unrolled!(e in [0, 1, 2, 3, 4, 5, 6, 7] {
            if e < layout.c_count() {
                out.floats[e] = f(out.floats[e], rows.values[layout.row_slot(e)]);
            }
        }));
        out
    }

    /// Each row's elements combined by `op`, as [`rows_reduce`] of this one tile.
    #[inline(always)]
    pub fn row_reduce(&self, op: impl Fn(f32, f32) -> f32) -> RowValues {
        rows_reduce(core::array::from_ref(self), op)
    }

    /// Each row's largest element (NaNs ignored, as `f32::max` does): [`rows_reduce`] of
    /// this tile by `f32::max`.
    #[inline(always)]
    pub fn row_max(&self) -> RowValues {
        self.row_reduce(f32::max)
    }

    /// Each row's sum, in an order of the device's: [`rows_reduce`] of this tile by `+`.
    #[inline(always)]
    pub fn row_sum(&self) -> RowValues {
        self.row_reduce(|a, b| a + b)
    }

    /// The tile rounded to `T` as the left operand of the next multiply: attention's
    /// probabilities `P` times `V`, a chain of products kept in registers. On NVIDIA and the
    /// NVIDIA the accumulator's layout is A's, so each lane converts its own elements
    /// (`cvt.rn.f16x2.f32` pairs); on AMD the elements move between lanes (one exchange per
    /// element of A and of the accumulator: 16 on CDNA, 128 on gfx11); on the CPU device each
    /// lane rounds its own, then takes its two rows from the three other lanes that hold them
    /// (one exchange). Every lane of the warp calls it.
    #[inline(always)]
    pub fn to_fragment_a<T: MmaInput>(&self) -> FragmentA<T> {
        #[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
        let held = {
            let mut words = [0u64; 4];
            unrolled!(w in [0, 1, 2, 3] {
                let pair = T::narrow2(self.floats[2 * w], self.floats[2 * w + 1]);
                words[w / 2] |= u64::from(pair) << (32 * (w % 2));
            });
            let warp = lane_operands::gather(words);
            lane_operands::LaneRows::from_values(super::lane_id() as usize, |row, k| {
                let (holder, e) = Layout::Mma.c_holder(row, k);
                T::widen((warp[holder][e / 4] >> (16 * (e % 4))) as u16)
            })
        };
        #[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        let held = {
            let mut halves = [0u16; HALVES];
            if layout() == Layout::Mma {
                unrolled!(w in [0, 1, 2, 3] {
                    let pair = T::narrow2(self.floats[2 * w], self.floats[2 * w + 1]);
                    halves[2 * w] = pair as u16;
                    halves[2 * w + 1] = (pair >> 16) as u16;
                });
            } else {
                let lane = super::lane_id() as usize;
                unrolled!(e in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                    if e < layout().a_count() {
                        let (row, k) = layout().a_place(lane, e);
                        let (source, element) = layout().c_holder(row, k);
                        let mut value = 0.0;
                        unrolled!(s in [0, 1, 2, 3, 4, 5, 6, 7] {
                            if s < layout().c_count() {
                                let x = super::shuffle_idx(self.floats[s], source as u32);
                                if s == element {
                                    value = x;
                                }
                            }
                        });
                        halves[e] = T::narrow(value);
                    }
                });
            }
            halves
        };
        FragmentA {
            held,
            input: PhantomData,
        }
    }
}

/// Each row's elements across `tiles` (accumulators of the same 16 rows, side by side: a row
/// of a warp's tiles) combined by `op`, as every lane holding the row needs the result. `op`
/// is associative and commutative: each lane combines its own elements, tile after tile,
/// then the lanes of a row exchange their partial results (2 exchanges on NVIDIA and the CPU
/// device, 4 on AMD, however many tiles), in an order of the device's. Every lane of the warp
/// calls it.
#[inline(always)]
pub fn rows_reduce<const N: usize>(
    tiles: &[Accumulator; N],
    op: impl Fn(f32, f32) -> f32,
) -> RowValues {
    let mut values = [0.0; ROW_SLOTS];
    // Indices, not a slice iterator: the iterator's non-null assumption on the array's
    // address is a use AMD's private address space never folds away, which keeps the
    // accumulators in scratch memory.
    per_layout!(layout => {
        #[allow(clippy::needless_range_loop)]
        for t in 0..N {
            let tile = &tiles[t];
            unrolled!(e in [0, 1, 2, 3, 4, 5, 6, 7] {
                if e < layout.c_count() {
                    let s = layout.row_slot(e);
                    let first = t == 0 && (0..e).all(|earlier| layout.row_slot(earlier) != s);
                    values[s] = if first { tile.floats[e] } else { op(values[s], tile.floats[e]) };
                }
            });
        }
        unrolled!(s in [0, 1, 2, 3, 4, 5, 6, 7] {
            if s < layout.row_slots() {
                for &mask in layout.row_lane_masks() {
                    values[s] = op(values[s], super::shuffle_xor(values[s], mask));
                }
            }
        });
    });
    RowValues { values }
}

/// `c + a × b` on the warp's matrix unit. Every lane of the warp calls it.
#[inline(always)]
pub fn mma<T: MmaInput>(a: &FragmentA<T>, b: &FragmentB<T>, c: &Accumulator) -> Accumulator {
    let mut out = *c;
    #[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    T::mma(&a.held, &b.held, &mut out.floats);
    #[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
    lane_operands::mma(&a.held, &b.held, &mut out.floats);
    out
}

/// The layout of the target being built; on AMD GPUs by the image's wavefront size, a
/// constant of the device link.
#[inline(always)]
fn layout() -> Layout {
    #[cfg(all(offload_device, target_arch = "amdgpu"))]
    return if super::warp_size() == 64 {
        Layout::Mfma
    } else {
        Layout::Wmma
    };
    #[cfg(not(all(offload_device, target_arch = "amdgpu")))]
    return Layout::Mma;
}

#[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod imp {
    use super::{FLOATS, HALVES};

    unsafe extern "C" {
        /// `c += a × b` for the warp, `f16` inputs, defined by the device link for the image's
        /// processor over its matrix instructions (`llvm.nvvm.mma.*`, `llvm.amdgcn.mfma.*`,
        /// `llvm.amdgcn.wmma.*`), which Rust cannot name with their vector types.
        #[link_name = offload_format::abi_name!(MMA_F16)]
        fn __offload_mma_f16(a: *const u16, b: *const u16, c: *mut f32);
        /// As `__offload_mma_f16`, `bf16` inputs.
        #[link_name = offload_format::abi_name!(MMA_BF16)]
        fn __offload_mma_bf16(a: *const u16, b: *const u16, c: *mut f32);
    }

    #[inline(always)]
    pub(super) fn mma_f16(a: &[u16; HALVES], b: &[u16; HALVES], c: &mut [f32; FLOATS]) {
        // SAFETY: the helper reads at most 16 halves of each fragment and reads and writes at
        // most 8 floats of the accumulator, all of them this lane's own arrays.
        unsafe { __offload_mma_f16(a.as_ptr(), b.as_ptr(), c.as_mut_ptr()) }
    }

    #[inline(always)]
    pub(super) fn mma_bf16(a: &[u16; HALVES], b: &[u16; HALVES], c: &mut [f32; FLOATS]) {
        // SAFETY: as in `mma_f16`.
        unsafe { __offload_mma_bf16(a.as_ptr(), b.as_ptr(), c.as_mut_ptr()) }
    }
}
