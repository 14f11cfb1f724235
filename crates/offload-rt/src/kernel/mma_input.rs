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
    /// `c` plus the product of `a` and `b` on this warp's matrix unit (the CPU device has none:
    /// its lanes multiply their own rows and columns, `matrix::lane_operands`).
    #[doc(hidden)]
    #[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
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

/// Where A's and B's elements lie, which the CPU device does not use: its lanes keep whole rows
/// and columns (`matrix::lane_operands`).
#[cfg_attr(
    not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))),
    allow(dead_code)
)]
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
}

impl Layout {
    #[inline(always)]
    pub(super) fn c_count(self) -> usize {
        match self {
            Layout::Mma | Layout::Wmma => 8,
            Layout::Mfma => 4,
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

    /// The lane and element of the accumulator that hold its `(row, col)`: the inverse of
    /// [`c_place`](Self::c_place).
    #[inline(always)]
    pub(super) fn c_holder(self, row: usize, col: usize) -> (usize, usize) {
        match self {
            Layout::Mma => (
                4 * (row % 8) + col % 8 / 2,
                col % 2 + 2 * (row / 8) + 4 * (col / 8),
            ),
            Layout::Mfma => (col + 16 * (row / 4), row % 4),
            Layout::Wmma => (col + 16 * (row % 2), row / 2),
        }
    }

    /// Rows of the accumulator a lane holds elements of.
    #[inline(always)]
    pub(super) fn row_slots(self) -> usize {
        match self {
            Layout::Mma => 2,
            Layout::Mfma => 4,
            Layout::Wmma => 8,
        }
    }

    /// Which of its rows ([`row_slots`](Self::row_slots)) a lane's accumulator element `e`
    /// lies in: the same for every lane.
    #[inline(always)]
    pub(super) fn row_slot(self, e: usize) -> usize {
        match self {
            Layout::Mma => (e >> 1) & 1,
            Layout::Mfma | Layout::Wmma => e,
        }
    }

    /// The lane masks whose exchanges (`shuffle_xor`) join the lanes that hold one row of the
    /// accumulator: `mma.sync`'s groups of 4, the matrix cores' 16 lanes of one row.
    #[inline(always)]
    pub(super) fn row_lane_masks(self) -> &'static [u32] {
        match self {
            Layout::Mma => &[1, 2],
            Layout::Mfma | Layout::Wmma => &[1, 2, 4, 8],
        }
    }
}

/// Rows of the accumulator a lane holds elements of, at most.
pub(super) const ROW_SLOTS: usize = 8;

#[cfg(test)]
mod tests {
    use super::{Layout, ROW_SLOTS, TILE};

    /// For each layout: its lanes and elements cover the accumulator once, `c_holder` finds
    /// them, each element's row is its lane's `row_slot`, and the lanes of one row are those
    /// the row masks join.
    #[test]
    fn the_accumulator_layouts_invert_and_their_rows_are_joined_by_the_masks() {
        for (layout, lanes) in [(Layout::Mma, 32), (Layout::Mfma, 64), (Layout::Wmma, 32)] {
            let mut seen = [[0u32; TILE]; TILE];
            for lane in 0..lanes {
                let mut slot_rows = [usize::MAX; ROW_SLOTS];
                for e in 0..layout.c_count() {
                    let (row, col) = layout.c_place(lane, e);
                    seen[row][col] += 1;
                    // gfx11's WMMA duplicates nothing in its accumulator: each place once.
                    assert_eq!(layout.c_holder(row, col), (lane, e));
                    let slot = layout.row_slot(e);
                    assert!(slot < layout.row_slots());
                    assert!(slot_rows[slot] == usize::MAX || slot_rows[slot] == row);
                    slot_rows[slot] = row;
                }
                let joined = layout.row_lane_masks().iter().fold(0, |m, &x| m | x) as usize;
                for other in 0..lanes {
                    let same_row = layout.c_place(other, 0).0 == layout.c_place(lane, 0).0;
                    assert_eq!(
                        same_row,
                        other & !joined == lane & !joined,
                        "{lane} {other}"
                    );
                }
            }
            assert!(seen.iter().flatten().all(|&n| n == 1));
        }
    }
}
