//! 32×32 accumulator tiles over `k` steps of 8: CDNA's `v_mfma_f32_32x32x8` (one instruction a
//! step, twice the reuse of each fragment element the 16×16×16 shape gets), eight m16n8k8
//! `mma.sync` on NVIDIA, scalar code on the CPU device. The API is [`super`]'s for this shape:
//! a warp (a wavefront on AMD) multiplies a 32×8 tile of A by an 8×32 tile of B, both `f16`
//! or both `bf16`, and adds the product to a 32×32 `f32` accumulator.
//!
//! ```ignore
//! use offload_rt::kernel::matrix::m32n32k8::{Accumulator, FragmentA, FragmentB, K, mma};
//! let mut acc = Accumulator::zero();
//! for k in (0..n).step_by(K) {
//!     // SAFETY: the tiles at these places lie inside `a` (m×n, row-major) and `b` (n×p).
//!     let (fa, fb) = unsafe { (FragmentA::load(a.add(k), n), FragmentB::load(b.add(k * p), p)) };
//!     acc = mma(&fa, &fb, &acc);
//! }
//! ```
//!
//! | device | instruction | lanes | a lane's A, B, accumulator |
//! |---|---|---|---|
//! | NVIDIA sm_80+ | `mma.sync.aligned.m16n8k8` (`HMMA.1688`), eight per tile | 32 | 8, 8, 32 |
//! | AMD gfx908 (f16), gfx90a, gfx94x, gfx950 | `v_mfma_f32_32x32x8` | 64 | 4, 4, 16 |
//! | AMD gfx11 | `v_wmma_f32_16x16x16`, four per tile, `k` padded with zeros | 32 | 16, 16, 32 |
//! | CPU device | the warp's fragments exchanged, then scalar code | 32 | 8, 8, 32 |
//!
//! gfx11's WMMA has no 32×32×8 shape: there a step is four 16×16×16 products with half of
//! their depth zeros, at half the matrix unit's rate; use the 16×16 tiles where gfx11's speed
//! matters.

use core::marker::PhantomData;

use super::super::pipeline::SwizzledTile;
use super::{HALVES, MmaInput, ldmatrix_x4, ldmatrix_x4_trans, word_to_halves, words_to_halves};

/// Rows of A and of the accumulator.
pub const M: usize = 32;
/// Columns of B and of the accumulator.
pub const N: usize = 32;
/// The depth of one step: columns of A, rows of B.
pub const K: usize = 8;

/// Floats of the accumulator a lane holds at most (A and B hold at most `HALVES`, 16: gfx11's
/// two half-rows of 8, each padded to 16 for its instruction).
const WIDE_FLOATS: usize = 32;

/// Which lane holds which element of this shape's fragments.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
// Each target constructs its own variants.
#[allow(dead_code)]
enum Layout {
    /// m16n8k8 `mma.sync`'s, two 16-row halves of A by four 8-column quarters of B (NVIDIA,
    /// and the CPU device's warps of 32): `g = lane / 4`, `t = lane % 4`.
    Mma,
    /// `v_mfma_f32_32x32x8` on 64 lanes.
    Mfma,
    /// Four `v_wmma_f32_16x16x16` on 32 lanes: A's two 16-row halves and B's two 16-column
    /// halves, a lane holding its row (column) of each, lanes 16–31 repeating lanes 0–15;
    /// the accumulator's four 16×16 quarters in WMMA's layout.
    Wmma,
}

impl Layout {
    #[inline(always)]
    fn a_count(self) -> usize {
        match self {
            Layout::Mma => 8,
            Layout::Mfma => 4,
            Layout::Wmma => 16,
        }
    }

    #[inline(always)]
    fn c_count(self) -> usize {
        match self {
            Layout::Mma | Layout::Wmma => 32,
            Layout::Mfma => 16,
        }
    }

    /// `(row, k)` of A's element `e` in `lane`.
    #[inline(always)]
    fn a_place(self, lane: usize, e: usize) -> (usize, usize) {
        match self {
            Layout::Mma => {
                let (half, i) = (e / 4, e % 4);
                (
                    16 * half + lane / 4 + 8 * (i >> 1),
                    2 * (lane % 4) + (i & 1),
                )
            }
            Layout::Mfma => (lane % 32, 4 * (lane / 32 % 2) + e),
            Layout::Wmma => (16 * (e / 8) + lane % 16, e % 8),
        }
    }

    /// `(k, col)` of B's element `e` in `lane`.
    #[inline(always)]
    fn b_place(self, lane: usize, e: usize) -> (usize, usize) {
        match self {
            Layout::Mma => (2 * (lane % 4) + e % 2, 8 * (e / 2) + lane / 4),
            Layout::Mfma => (4 * (lane / 32 % 2) + e, lane % 32),
            Layout::Wmma => (e % 8, 16 * (e / 8) + lane % 16),
        }
    }

    /// `(row, col)` of the accumulator's element `e` in `lane`.
    #[inline(always)]
    fn c_place(self, lane: usize, e: usize) -> (usize, usize) {
        match self {
            Layout::Mma => {
                let (half, quarter, i) = (e / 16, e / 4 % 4, e % 4);
                (
                    16 * half + lane / 4 + 8 * (i >> 1),
                    8 * quarter + 2 * (lane % 4) + (i & 1),
                )
            }
            Layout::Mfma => (8 * (e / 4) + 4 * (lane / 32 % 2) + e % 4, lane % 32),
            Layout::Wmma => {
                let (quarter, i) = (e / 8, e % 8);
                (
                    16 * (quarter / 2) + 2 * i + lane / 16 % 2,
                    16 * (quarter % 2) + lane % 16,
                )
            }
        }
    }
}

/// The layout of the target being built: on AMD by the image's wavefront size, a constant of
/// the device link; `mma.sync`'s elsewhere.
#[inline(always)]
fn layout() -> Layout {
    #[cfg(all(offload_device, target_arch = "amdgpu"))]
    return if super::super::warp_size() == 64 {
        Layout::Mfma
    } else {
        Layout::Wmma
    };
    #[cfg(not(all(offload_device, target_arch = "amdgpu")))]
    return Layout::Mma;
}

/// This lane's part of a 32×8 tile of A (the left operand), `f16` or `bf16`.
#[derive(Clone, Copy, Debug)]
pub struct FragmentA<T: MmaInput> {
    halves: [u16; HALVES],
    input: PhantomData<T>,
}

/// This lane's part of an 8×32 tile of B (the right operand), `f16` or `bf16`.
#[derive(Clone, Copy, Debug)]
pub struct FragmentB<T: MmaInput> {
    halves: [u16; HALVES],
    input: PhantomData<T>,
}

/// This lane's part of a 32×32 `f32` accumulator tile.
#[derive(Clone, Copy, Debug)]
pub struct Accumulator {
    floats: [f32; WIDE_FLOATS],
}

impl<T: MmaInput> FragmentA<T> {
    /// A fragment of zeros.
    #[inline(always)]
    pub fn zero() -> FragmentA<T> {
        FragmentA {
            halves: [0; HALVES],
            input: PhantomData,
        }
    }

    /// Loads the 32×8 tile of A whose element `(row, k)` is at `src[row * ld + k]`. Every lane
    /// of the warp calls it with the same `src` and `ld`.
    ///
    /// # Safety
    ///
    /// The 32 rows of 8 elements from `src`, `ld` elements apart, are readable.
    #[inline(always)]
    pub unsafe fn load(src: *const T, ld: usize) -> FragmentA<T> {
        let lane = super::super::lane_id() as usize;
        let mut halves = [0u16; HALVES];
        unrolled!(e in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
            if e < layout().a_count() {
                let (row, k) = layout().a_place(lane, e);
                // SAFETY: `row < 32`, `k < 8`: inside the tile the caller vouches for.
                halves[e] = unsafe { *src.add(row * ld + k) }.bits();
            }
        });
        FragmentA {
            halves,
            input: PhantomData,
        }
    }

    /// Loads the 32×8 tile of A whose element `(row, k)` is the swizzled tile's element
    /// `(row0 + row, col0 + k)`: on NVIDIA one `ldmatrix.x4` (`LDSM`) for the warp, lane `l`
    /// addressing row `l`; on CDNA one 64-bit LDS read a lane; elsewhere element by element.
    /// Every lane of the warp calls it with the same arguments.
    ///
    /// # Safety
    ///
    /// `row0 + 32 <= ROWS`, `col0 + 8 <= COLS`, `col0` a multiple of 8; the tile's memory was
    /// written before the block's last barrier.
    #[inline(always)]
    pub unsafe fn load_tile<const ROWS: usize, const COLS: usize>(
        tile: SwizzledTile<T, ROWS, COLS>,
        row0: usize,
        col0: usize,
    ) -> FragmentA<T> {
        let lane = super::super::lane_id() as usize;
        let halves = if cfg!(all(offload_device, target_arch = "nvptx64")) {
            // The four 8×8 matrices are rows 0–7, 8–15, 16–23, 24–31: the A registers of the
            // upper 16-row half, then of the lower.
            let row = tile.ptr_from_row(row0, lane % 32, col0);
            // SAFETY: 16 bytes of one chunk of the tile the caller vouches for.
            words_to_halves(unsafe { ldmatrix_x4(row.cast()) })
        } else if layout() == Layout::Mfma {
            let (row, k) = layout().a_place(lane, 0);
            // SAFETY: 4 elements of one chunk of the tile the caller vouches for, at a column
            // that is a multiple of 4, so aligned to 8 bytes.
            word_to_halves(unsafe { tile.ptr_from_row(row0, row, col0 + k).cast::<u64>().read() })
        } else {
            let mut halves = [0u16; HALVES];
            unrolled!(e in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if e < layout().a_count() {
                    let (row, k) = layout().a_place(lane, e);
                    // SAFETY: `row < 32`, `k < 8`: inside the tile the caller vouches for.
                    halves[e] = unsafe { *tile.ptr_from_row(row0, row, col0 + k) }.bits();
                }
            });
            halves
        };
        FragmentA {
            halves,
            input: PhantomData,
        }
    }
}

impl<T: MmaInput> FragmentB<T> {
    /// A fragment of zeros.
    #[inline(always)]
    pub fn zero() -> FragmentB<T> {
        FragmentB {
            halves: [0; HALVES],
            input: PhantomData,
        }
    }

    /// Loads the 8×32 tile of B whose element `(k, col)` is at `src[k * ld + col]`. Every lane
    /// of the warp calls it with the same `src` and `ld`.
    ///
    /// # Safety
    ///
    /// The 8 rows of 32 elements from `src`, `ld` elements apart, are readable.
    #[inline(always)]
    pub unsafe fn load(src: *const T, ld: usize) -> FragmentB<T> {
        let lane = super::super::lane_id() as usize;
        let mut halves = [0u16; HALVES];
        unrolled!(e in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
            if e < layout().a_count() {
                let (k, col) = layout().b_place(lane, e);
                // SAFETY: `k < 8`, `col < 32`: inside the tile the caller vouches for.
                halves[e] = unsafe { *src.add(k * ld + col) }.bits();
            }
        });
        FragmentB {
            halves,
            input: PhantomData,
        }
    }

    /// Loads the 8×32 tile of B whose element `(k, col)` is the swizzled tile's element
    /// `(row0 + k, col0 + col)` (B row-major): on NVIDIA one `ldmatrix.x4.trans` (`LDSM.T`)
    /// for the warp; elsewhere element by element (a CDNA lane's elements lie down a column).
    /// Every lane of the warp calls it with the same arguments.
    ///
    /// # Safety
    ///
    /// `row0 + 8 <= ROWS`, `col0 + 32 <= COLS`, `col0` a multiple of 8; the tile's memory was
    /// written before the block's last barrier.
    #[inline(always)]
    pub unsafe fn load_tile<const ROWS: usize, const COLS: usize>(
        tile: SwizzledTile<T, ROWS, COLS>,
        row0: usize,
        col0: usize,
    ) -> FragmentB<T> {
        let lane = super::super::lane_id() as usize;
        let halves = if cfg!(all(offload_device, target_arch = "nvptx64")) {
            // Matrix `j` is columns 8·j..8·j + 7, transposed: the B register of quarter `j`.
            let row = tile.ptr_from_row(row0, lane % 8, col0 + lane / 8 % 4 * 8);
            // SAFETY: 16 bytes of one chunk of the tile the caller vouches for.
            words_to_halves(unsafe { ldmatrix_x4_trans(row.cast()) })
        } else {
            let mut halves = [0u16; HALVES];
            unrolled!(e in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if e < layout().a_count() {
                    let (k, col) = layout().b_place(lane, e);
                    // SAFETY: `k < 8`, `col < 32`: inside the tile the caller vouches for.
                    halves[e] = unsafe { *tile.ptr_from_row(row0, k, col0 + col) }.bits();
                }
            });
            halves
        };
        FragmentB {
            halves,
            input: PhantomData,
        }
    }

    /// Loads the 8×32 tile of B whose element `(k, col)` is the swizzled tile's element
    /// `(row0 + col, col0 + k)`: B held transposed (a column-major B, `Kᵀ` in the rows of K).
    /// On NVIDIA one `ldmatrix.x4` (`LDSM`) for the warp; on CDNA one 64-bit LDS read a lane;
    /// elsewhere element by element. Every lane of the warp calls it with the same arguments.
    ///
    /// # Safety
    ///
    /// `row0 + 32 <= ROWS`, `col0 + 8 <= COLS`, `col0` a multiple of 8; the tile's memory was
    /// written before the block's last barrier.
    #[inline(always)]
    pub unsafe fn load_tile_transposed<const ROWS: usize, const COLS: usize>(
        tile: SwizzledTile<T, ROWS, COLS>,
        row0: usize,
        col0: usize,
    ) -> FragmentB<T> {
        let lane = super::super::lane_id() as usize;
        let halves = if cfg!(all(offload_device, target_arch = "nvptx64")) {
            // Matrix `j` is the tile's rows 8·j.., B's columns of quarter `j`, as they are.
            let row = tile.ptr_from_row(row0, lane % 32, col0);
            // SAFETY: 16 bytes of one chunk of the tile the caller vouches for.
            words_to_halves(unsafe { ldmatrix_x4(row.cast()) })
        } else if layout() == Layout::Mfma {
            let (k, col) = layout().b_place(lane, 0);
            // SAFETY: 4 elements of one chunk of the tile the caller vouches for, at a column
            // that is a multiple of 4, so aligned to 8 bytes.
            word_to_halves(unsafe { tile.ptr_from_row(row0, col, col0 + k).cast::<u64>().read() })
        } else {
            let mut halves = [0u16; HALVES];
            unrolled!(e in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if e < layout().a_count() {
                    let (k, col) = layout().b_place(lane, e);
                    // SAFETY: `k < 8`, `col < 32`: inside the tile the caller vouches for.
                    halves[e] = unsafe { *tile.ptr_from_row(row0, col, col0 + k) }.bits();
                }
            });
            halves
        };
        FragmentB {
            halves,
            input: PhantomData,
        }
    }
}

/// Runs `body` with `e` bound to each of the accumulator's element indices a lane may hold.
macro_rules! each_float {
    ($e:ident $body:block) => {
        unrolled!($e in [
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
            16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31
        ] $body)
    };
}

impl Accumulator {
    /// An accumulator of zeros.
    #[inline(always)]
    pub fn zero() -> Accumulator {
        Accumulator {
            floats: [0.0; WIDE_FLOATS],
        }
    }

    /// Loads the 32×32 tile whose element `(row, col)` is at `src[row * ld + col]`. Every
    /// lane of the warp calls it with the same `src` and `ld`.
    ///
    /// # Safety
    ///
    /// The 32 rows of 32 floats from `src`, `ld` apart, are readable.
    #[inline(always)]
    pub unsafe fn load(src: *const f32, ld: usize) -> Accumulator {
        let lane = super::super::lane_id() as usize;
        let mut floats = [0.0; WIDE_FLOATS];
        each_float!(e {
            if e < layout().c_count() {
                let (row, col) = layout().c_place(lane, e);
                // SAFETY: `row, col < 32`: inside the tile the caller vouches for.
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
    /// The 32 rows of 32 floats from `dst`, `ld` apart, are writable, and no other thread
    /// accesses them meanwhile.
    #[inline(always)]
    pub unsafe fn store(&self, dst: *mut f32, ld: usize) {
        let lane = super::super::lane_id() as usize;
        each_float!(e {
            if e < layout().c_count() {
                let (row, col) = layout().c_place(lane, e);
                // SAFETY: `row, col < 32`: inside the tile the caller vouches for.
                unsafe { *dst.add(row * ld + col) = self.floats[e] };
            }
        });
    }

    /// Stores the tile rounded to `T` into the swizzled tile, element `(row, col)` at the
    /// tile's `(row0 + row, col0 + col)`, element by element. Every lane of the warp calls it
    /// with the same arguments.
    ///
    /// # Safety
    ///
    /// `row0 + 32 <= ROWS`, `col0 + 32 <= COLS`; no other thread accesses those elements
    /// until the block's next barrier.
    #[inline(always)]
    pub unsafe fn store_tile<T: MmaInput, const ROWS: usize, const COLS: usize>(
        &self,
        tile: SwizzledTile<T, ROWS, COLS>,
        row0: usize,
        col0: usize,
    ) {
        let lane = super::super::lane_id() as usize;
        each_float!(e {
            if e < layout().c_count() {
                let (row, col) = layout().c_place(lane, e);
                // SAFETY: `row, col < 32`: inside the tile the caller vouches for.
                unsafe {
                    *tile.ptr_from_row(row0, row, col0 + col).cast::<u16>() =
                        T::narrow(self.floats[e]);
                }
            }
        });
    }

    /// Applies `f` to every element (a scale, an activation).
    #[inline(always)]
    pub fn map(&self, f: impl Fn(f32) -> f32) -> Accumulator {
        let mut out = *self;
        each_float!(e {
            if e < layout().c_count() {
                out.floats[e] = f(out.floats[e]);
            }
        });
        out
    }

    /// Applies `f(row, col, x)` to every element `x` at `(row, col)` of the tile: a mask by
    /// position, a bias by row or column.
    #[inline(always)]
    pub fn map_at(&self, f: impl Fn(usize, usize, f32) -> f32) -> Accumulator {
        let lane = super::super::lane_id() as usize;
        let mut out = *self;
        each_float!(e {
            if e < layout().c_count() {
                let (row, col) = layout().c_place(lane, e);
                out.floats[e] = f(row, col, out.floats[e]);
            }
        });
        out
    }
}

/// `c + a × b` on the warp's matrix unit. Every lane of the warp calls it.
#[inline(always)]
pub fn mma<T: MmaInput>(a: &FragmentA<T>, b: &FragmentB<T>, c: &Accumulator) -> Accumulator {
    let mut out = *c;
    #[cfg(all(offload_device, target_arch = "amdgpu"))]
    if layout() == Layout::Wmma {
        // Each quarter of the accumulator from its half of A and of B, `k` 8..16 zeros.
        unrolled!(quarter in [0, 1, 2, 3] {
            let (row_half, col_half) = (quarter / 2, quarter % 2);
            let pad = |halves: &[u16; HALVES], half: usize| -> [u16; HALVES] {
                core::array::from_fn(|e| if e < 8 { halves[8 * half + e] } else { 0 })
            };
            let mut floats: [f32; super::FLOATS] =
                core::array::from_fn(|e| out.floats[8 * quarter + e]);
            T::mma(&pad(&a.halves, row_half), &pad(&b.halves, col_half), &mut floats);
            unrolled!(e in [0, 1, 2, 3, 4, 5, 6, 7] {
                out.floats[8 * quarter + e] = floats[e];
            });
        });
        return out;
    }
    product::<T>(&a.halves, &b.halves, &mut out.floats);
    out
}

/// `c += a × b` for the warp on a GPU: the device link's helper for the image's processor
/// (`llvm.nvvm.mma.m16n8k8.*`, `llvm.amdgcn.mfma.f32.32x32x8*`), which Rust cannot name with
/// their vector types.
#[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
#[inline(always)]
fn product<T: MmaInput>(a: &[u16; HALVES], b: &[u16; HALVES], c: &mut [f32; WIDE_FLOATS]) {
    unsafe extern "C" {
        #[link_name = offload_format::abi_name!(MMA_M32N32K8_F16)]
        fn __offload_mma_m32n32k8_f16(a: *const u16, b: *const u16, c: *mut f32);
        #[link_name = offload_format::abi_name!(MMA_M32N32K8_BF16)]
        fn __offload_mma_m32n32k8_bf16(a: *const u16, b: *const u16, c: *mut f32);
    }
    // SAFETY: the helpers read at most 8 halves of each fragment and read and write at most
    // 32 floats of the accumulator, all of them this lane's own arrays.
    unsafe {
        if T::BF16 {
            __offload_mma_m32n32k8_bf16(a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
        } else {
            __offload_mma_m32n32k8_f16(a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
        }
    }
}

/// `c += a × b` for the warp on the CPU device (and host builds, where kernels only
/// type-check): the warp's fragments gathered in every lane, then this lane's outputs computed
/// in `k` order.
#[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
#[inline(never)]
fn product<T: MmaInput>(a: &[u16; HALVES], b: &[u16; HALVES], c: &mut [f32; WIDE_FLOATS]) {
    /// Word `w` (0 or 1) of a fragment's first 8 halves.
    fn word(halves: &[u16; HALVES], w: usize) -> u64 {
        (0..4).fold(0, |acc, i| acc | u64::from(halves[4 * w + i]) << (16 * i))
    }
    /// The half at element `e` (0..8) of the fragment whose words start at `words[first]`.
    fn half(words: &[u64; 4], first: usize, e: usize) -> u16 {
        (words[first + e / 4] >> (16 * (e % 4))) as u16
    }
    let warp = super::lane_operands::gather([word(a, 0), word(a, 1), word(b, 0), word(b, 1)]);
    let lane = super::super::lane_id() as usize;
    for (e, v) in c.iter_mut().enumerate() {
        let (row, col) = Layout::Mma.c_place(lane, e);
        for k in 0..K {
            let (la, ea) = a_holder(row, k);
            let (lb, eb) = b_holder(k, col);
            *v += T::widen(half(&warp[la], 0, ea)) * T::widen(half(&warp[lb], 2, eb));
        }
    }
}

/// The lane and element of `Layout::Mma` that hold A's `(row, k)`: the inverse of its
/// `a_place`.
#[cfg_attr(
    all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")),
    allow(dead_code)
)]
fn a_holder(row: usize, k: usize) -> (usize, usize) {
    (
        4 * (row % 8) + k / 2,
        4 * (row / 16) + 2 * (row / 8 % 2) + k % 2,
    )
}

/// The lane and element of `Layout::Mma` that hold B's `(k, col)`: the inverse of its
/// `b_place`.
#[cfg_attr(
    all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")),
    allow(dead_code)
)]
fn b_holder(k: usize, col: usize) -> (usize, usize) {
    (4 * (col % 8) + k / 2, 2 * (col / 8) + k % 2)
}

#[cfg(test)]
mod tests {
    use super::{K, Layout, M, N, a_holder, b_holder};

    /// For each layout: the lanes' elements cover A, B and the accumulator once each (gfx11's
    /// repeated lanes aside), and `mma.sync`'s holders invert its places.
    #[test]
    fn the_layouts_cover_each_tile_once_and_the_holders_invert_them() {
        for (layout, lanes) in [(Layout::Mma, 32), (Layout::Mfma, 64), (Layout::Wmma, 32)] {
            let (mut a, mut b, mut c) = ([[0; K]; M], [[0; N]; K], [[0; N]; M]);
            for lane in 0..lanes {
                // gfx11's lanes 16–31 repeat 0–15's fragments of A and B.
                let repeats = layout == Layout::Wmma && lane >= 16;
                for e in 0..layout.a_count() {
                    if repeats {
                        assert_eq!(layout.a_place(lane, e), layout.a_place(lane - 16, e));
                        assert_eq!(layout.b_place(lane, e), layout.b_place(lane - 16, e));
                        continue;
                    }
                    let (row, a_k) = layout.a_place(lane, e);
                    a[row][a_k] += 1;
                    let (b_k, col) = layout.b_place(lane, e);
                    b[b_k][col] += 1;
                    if layout == Layout::Mma {
                        assert_eq!(a_holder(row, a_k), (lane, e));
                        assert_eq!(b_holder(b_k, col), (lane, e));
                    }
                }
                for e in 0..layout.c_count() {
                    let (row, col) = layout.c_place(lane, e);
                    c[row][col] += 1;
                }
            }
            let once = |n: &i32| *n == 1;
            assert!(a.iter().flatten().all(once), "{layout:?} A: {a:?}");
            assert!(b.iter().flatten().all(once), "{layout:?} B: {b:?}");
            assert!(c.iter().flatten().all(once), "{layout:?} C: {c:?}");
        }
    }

    /// gfx11's layout: each accumulator quarter is WMMA's 16×16 layout, fed by the A half of
    /// its rows and the B half of its columns.
    #[test]
    fn wmma_quarters_are_the_16x16_layout() {
        use super::super::super::mma_input::Layout as Tile;
        for lane in 0..32 {
            for e in 0..32 {
                let (quarter, i) = (e / 8, e % 8);
                let (row, col) = Layout::Wmma.c_place(lane, e);
                let (r, c) = Tile::Wmma.c_place(lane, i);
                assert_eq!((row, col), (16 * (quarter / 2) + r, 16 * (quarter % 2) + c));
                for k in 0..8 {
                    let (a_row, a_k) = Layout::Wmma.a_place(lane, 8 * (quarter / 2) + k);
                    assert_eq!((a_row % 16, a_k), Tile::Wmma.a_place(lane, k));
                    let (b_k, b_col) = Layout::Wmma.b_place(lane, 8 * (quarter % 2) + k);
                    assert_eq!((b_k, b_col % 16), Tile::Wmma.b_place(lane, k));
                }
            }
        }
    }

    /// `mma.sync`'s layout: the accumulator element `e` of a lane is at the place m16n8k8
    /// gives its quarter's product, A's rows of the same half and B's columns of the same
    /// quarter: the products the device link makes line up.
    #[test]
    fn mma_sync_products_line_up() {
        for lane in 0..32 {
            for e in 0..32 {
                let (row, col) = Layout::Mma.c_place(lane, e);
                let (half, quarter) = (e / 16, e / 4 % 4);
                assert_eq!(row / 16, half);
                assert_eq!(col / 8, quarter);
                // The lane's own A elements of this half hold this row, its B elements of this
                // quarter this column (m16n8k8: c's row is a's, c's column b's group).
                let a_rows: Vec<usize> = (0..4)
                    .map(|i| Layout::Mma.a_place(lane, 4 * half + i).0)
                    .collect();
                assert!(a_rows.contains(&row), "{lane} {e}");
                let b_col = Layout::Mma.b_place(lane, 2 * quarter).1;
                assert_eq!(b_col / 8, quarter);
            }
        }
    }
}
