//! What the matrix units' fragments hold: the tiles' sizes, the input types and which lane
//! holds which element ([`super::matrix`]).

use super::half::{bf16, f16};

/// Rows, columns and depth of the tiles: a 16×16×16 multiply-accumulate.
pub const TILE: usize = 16;

/// Halves of A or B a lane holds at most (gfx11's whole row or column).
pub(super) const HALVES: usize = 16;
/// Floats of the accumulator a lane holds at most.
pub(super) const FLOATS: usize = 8;

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::f16 {}
    impl Sealed for super::bf16 {}
}

/// The input types of the matrix units: [`f16`](struct@f16) and [`bf16`].
pub trait MmaInput: Copy + sealed::Sealed {
    /// Whether the type is `bf16` (else `f16`): which instruction variant takes it.
    #[doc(hidden)]
    const BF16: bool;
    /// The value's bits.
    #[doc(hidden)]
    fn bits(self) -> u16;
    /// The value of `bits`, widened exactly.
    #[doc(hidden)]
    fn widen(bits: u16) -> f32;
    /// The bits of `x` rounded to this type (to nearest, ties to even).
    #[doc(hidden)]
    fn narrow(x: f32) -> u16;
    /// `a` and `b` rounded to this type, packed `a` low (one conversion on GPUs).
    #[doc(hidden)]
    fn narrow2(a: f32, b: f32) -> u32;
    /// `c` plus the product of `a` and `b` on this warp's matrix unit.
    #[doc(hidden)]
    fn mma(a: &[u16; HALVES], b: &[u16; HALVES], c: &mut [f32; FLOATS]);
}

/// Which lane holds which element of the fragments.
#[derive(Clone, Copy, PartialEq, Eq)]
// Each target constructs its own variants.
#[allow(dead_code)]
pub(super) enum Layout {
    /// `mma.sync` m16n8k16's (NVIDIA, and the CPU device's warps of 32): lanes in groups of
    /// 4, `g = lane / 4`, `t = lane % 4`.
    Mma,
    /// `v_mfma_f32_16x16x16` on 64 lanes.
    Mfma,
    /// `v_wmma_f32_16x16x16` on 32 lanes.
    Wmma,
}

impl Layout {
    #[inline(always)]
    pub(super) fn a_count(self) -> usize {
        match self {
            Layout::Mma => 8,
            Layout::Mfma => 4,
            Layout::Wmma => 16,
        }
    }

    #[inline(always)]
    pub(super) fn b_count(self) -> usize {
        self.a_count()
    }

    #[inline(always)]
    pub(super) fn c_count(self) -> usize {
        match self {
            Layout::Mma | Layout::Wmma => 8,
            Layout::Mfma => 4,
        }
    }

    /// `(row, k)` of A's element `e` in `lane`.
    #[inline(always)]
    pub(super) fn a_place(self, lane: usize, e: usize) -> (usize, usize) {
        match self {
            Layout::Mma => (
                lane / 4 + 8 * ((e >> 1) & 1),
                2 * (lane % 4) + (e & 1) + 8 * (e >> 2),
            ),
            Layout::Mfma => (lane % 16, 4 * (lane / 16 % 4) + e),
            Layout::Wmma => (lane % 16, e),
        }
    }

    /// `(k, col)` of B's element `e` in `lane`.
    #[inline(always)]
    pub(super) fn b_place(self, lane: usize, e: usize) -> (usize, usize) {
        match self {
            Layout::Mma => {
                let (half, i) = (e >> 2, e & 3);
                (2 * (lane % 4) + (i & 1) + 8 * (i >> 1), lane / 4 + 8 * half)
            }
            Layout::Mfma => (4 * (lane / 16 % 4) + e, lane % 16),
            Layout::Wmma => (e, lane % 16),
        }
    }

    /// `(row, col)` of the accumulator's element `e` in `lane`.
    #[inline(always)]
    pub(super) fn c_place(self, lane: usize, e: usize) -> (usize, usize) {
        match self {
            Layout::Mma => {
                let (half, i) = (e >> 2, e & 3);
                (lane / 4 + 8 * (i >> 1), 2 * (lane % 4) + (i & 1) + 8 * half)
            }
            Layout::Mfma => (4 * (lane / 16 % 4) + e, lane % 16),
            Layout::Wmma => (2 * e + lane / 16 % 2, lane % 16),
        }
    }
}
