//! The CPU device's A and B fragments (and host builds', where kernels only type-check): each
//! lane keeps every element of A and B that its own accumulator elements need, widened to
//! `f32` as it loads them, so that a multiply-accumulate is this lane's arithmetic alone.
//!
//! A GPU lane holds an eighth of each operand and the matrix unit brings the rest together; on
//! the CPU device bringing them together is a warp exchange, a barrier that splits a kernel's
//! loops into regions at every multiply (the GEMM example ran at 0.05x of a plain host loop so).
//! Reading four times A's and eight times B's elements from memory the cache already holds
//! costs far less.
//!
//! The accumulator keeps `mma.sync`'s layout (`Layout::Mma`): lane `4g + t` holds rows `g`
//! and `g + 8`, columns `2t`, `2t + 1`, `2t + 8` and `2t + 9`.

use super::super::mma_input::{FLOATS, MmaInput, TILE};

/// Rows of A and columns of B whose elements meet in one lane's accumulator elements.
const ROWS: usize = 2;
const COLUMNS: usize = 4;

/// The row of A (and of the accumulator) that is `lane`'s row `s` (0 or 1).
#[inline(always)]
pub(super) fn row(lane: usize, s: usize) -> usize {
    lane / 4 + 8 * s
}

/// The column of B (and of the accumulator) that is `lane`'s column `j` (0..4).
#[inline(always)]
pub(super) fn column(lane: usize, j: usize) -> usize {
    2 * (lane % 4) + j % 2 + 8 * (j / 2)
}

/// The row (0 or 1) and column (0..4) of the lane's accumulator element `e`.
#[inline(always)]
fn slots(e: usize) -> (usize, usize) {
    ((e >> 1) & 1, (e & 1) + 2 * (e >> 2))
}

/// A's rows `row(lane, 0)` and `row(lane, 1)`, widened, `k`-major: `at[k][s]` is A's
/// `(row(lane, s), k)`.
#[derive(Clone, Copy, Debug)]
pub(super) struct LaneRows {
    at: [[f32; ROWS]; TILE],
}

/// B's columns `column(lane, 0..4)`, widened, `k`-major: `at[k][j]` is B's
/// `(k, column(lane, j))`.
#[derive(Clone, Copy, Debug)]
pub(super) struct LaneColumns {
    at: [[f32; COLUMNS]; TILE],
}

impl LaneRows {
    pub(super) const ZERO: LaneRows = LaneRows {
        at: [[0.0; ROWS]; TILE],
    };

    /// The rows from `chunk(row, k0)`, A's elements `(row, k0..k0 + 8)` as bits (`k0` 0 or 8).
    #[inline(always)]
    pub(super) fn from_chunks<T: MmaInput>(
        lane: usize,
        chunk: impl Fn(usize, usize) -> [u16; 8],
    ) -> LaneRows {
        LaneRows {
            at: k_major_from_chunks::<T, ROWS>(|s| row(lane, s), chunk),
        }
    }

    /// The rows from `value(row, k)`, A's element `(row, k)` already widened.
    #[inline(always)]
    pub(super) fn from_values(lane: usize, value: impl Fn(usize, usize) -> f32) -> LaneRows {
        LaneRows {
            at: core::array::from_fn(|k| core::array::from_fn(|s| value(row(lane, s), k))),
        }
    }
}

impl LaneColumns {
    pub(super) const ZERO: LaneColumns = LaneColumns {
        at: [[0.0; COLUMNS]; TILE],
    };

    /// The columns from `element(k, col)`, B's element `(k, col)` as bits.
    #[inline(always)]
    pub(super) fn from_elements<T: MmaInput>(
        lane: usize,
        element: impl Fn(usize, usize) -> u16,
    ) -> LaneColumns {
        let mut cols = LaneColumns::ZERO;
        for k0 in (0..TILE).step_by(2) {
            let bits = core::array::from_fn(|i| element(k0 + i / 4, column(lane, i % 4)));
            // Columns `0..4` at `k0`, then at `k0 + 1`: copied as two rows, not value by value
            // (which went through the stack).
            let wide = widen8::<T>(bits);
            let (this, next) = wide.split_at(COLUMNS);
            cols.at[k0].copy_from_slice(this);
            cols.at[k0 + 1].copy_from_slice(next);
        }
        cols
    }

    /// The columns from `chunk(col, k0)`, B's elements `(k0..k0 + 8, col)` as bits (`k0` 0 or
    /// 8): B held transposed.
    #[inline(always)]
    pub(super) fn from_chunks<T: MmaInput>(
        lane: usize,
        chunk: impl Fn(usize, usize) -> [u16; 8],
    ) -> LaneColumns {
        LaneColumns {
            at: k_major_from_chunks::<T, COLUMNS>(|j| column(lane, j), chunk),
        }
    }
}

/// The `W` lines `line(0..W)` (rows of A, or columns of B) from `chunk(line, k0)`, their
/// elements `k0..k0 + 8` as bits (`k0` 0 or 8), widened and laid out `k`-major.
#[inline(always)]
fn k_major_from_chunks<T: MmaInput, const W: usize>(
    line: impl Fn(usize) -> usize,
    chunk: impl Fn(usize, usize) -> [u16; 8],
) -> [[f32; W]; TILE] {
    #[cfg(all(target_arch = "x86_64", not(target_feature = "avx2")))]
    return x86::k_major_from_chunks::<T, W>(line, chunk);
    #[cfg(not(all(target_arch = "x86_64", not(target_feature = "avx2"))))]
    {
        let mut at = [[0.0; W]; TILE];
        for k0 in [0, 8] {
            let wide: [[f32; 8]; W] = core::array::from_fn(|w| widen8::<T>(chunk(line(w), k0)));
            for (i, at) in at[k0..k0 + 8].iter_mut().enumerate() {
                *at = core::array::from_fn(|w| wide[w][i]);
            }
        }
        at
    }
}

/// `c += a × b` for this lane's accumulator elements, each a sum in `k` order rounded to `f32`
/// at every step (the products of widened halves are exact). The eight sums are independent:
/// reordered as row 0's four (elements 0, 1, 4, 5) and row 1's (2, 3, 6, 7), a step is A's two
/// values each times B's four, one vector multiply and add. Written with the target's vector
/// instructions, as the compiler's vectorizer does not follow a chain of 16 dependent adds.
/// The whole warp takes part, as on a GPU: a partial warp's launch fails.
#[inline(always)]
pub(super) fn mma(a: &LaneRows, b: &LaneColumns, c: &mut [f32; FLOATS]) {
    #[cfg(offload_device)]
    super::super::cpu::assert_whole_warp();
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
    // SAFETY: the image runs on processors with AVX2 (this `cfg`).
    unsafe {
        mma_avx2(a, b, c)
    };
    #[cfg(all(target_arch = "x86_64", not(target_feature = "avx2")))]
    mma_sse(a, b, c);
    #[cfg(target_arch = "aarch64")]
    mma_neon(a, b, c);
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    mma_scalar(a, b, c);
}

/// [`mma`] in scalar code, element by element.
#[cfg_attr(any(target_arch = "x86_64", target_arch = "aarch64"), allow(dead_code))]
#[inline(always)]
fn mma_scalar(a: &LaneRows, b: &LaneColumns, c: &mut [f32; FLOATS]) {
    for k in 0..TILE {
        for (e, x) in c.iter_mut().enumerate() {
            let (s, j) = slots(e);
            *x += a.at[k][s] * b.at[k][j];
        }
    }
}

/// [`mma`] in 8-wide AVX2 vectors: both rows' sums in one.
///
/// # Safety
///
/// The processor has AVX2.
#[cfg(target_arch = "x86_64")]
#[cfg_attr(not(target_feature = "avx2"), allow(dead_code))]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn mma_avx2(a: &LaneRows, b: &LaneColumns, c: &mut [f32; FLOATS]) {
    use core::arch::x86_64::*;
    // SAFETY: each load and store reads or writes floats of an array that has them (`a.at[k]`'s
    // two as one 64-bit load).
    unsafe {
        let (row0, row1) = by_row(_mm_loadu_ps(c.as_ptr()), _mm_loadu_ps(c[4..].as_ptr()));
        let mut sums = _mm256_insertf128_ps::<1>(_mm256_castps128_ps256(row0), row1);
        let spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
        for k in 0..TILE {
            let pair = _mm_castpd_ps(_mm_load_sd(a.at[k].as_ptr().cast()));
            let rows = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(pair), spread);
            let four = _mm_loadu_ps(b.at[k].as_ptr());
            let cols = _mm256_insertf128_ps::<1>(_mm256_castps128_ps256(four), four);
            sums = _mm256_add_ps(sums, _mm256_mul_ps(rows, cols));
        }
        let (first, second) = by_row(
            _mm256_castps256_ps128(sums),
            _mm256_extractf128_ps::<1>(sums),
        );
        _mm_storeu_ps(c.as_mut_ptr(), first);
        _mm_storeu_ps(c[4..].as_mut_ptr(), second);
    }
}

/// [`mma`] in 4-wide SSE vectors (x86-64's baseline), a vector a row.
#[cfg(target_arch = "x86_64")]
#[cfg_attr(target_feature = "avx2", allow(dead_code))]
#[inline(always)]
fn mma_sse(a: &LaneRows, b: &LaneColumns, c: &mut [f32; FLOATS]) {
    use core::arch::x86_64::*;
    // SAFETY: SSE is part of x86-64's baseline; each load and store reads or writes 4 floats
    // of an array that has them.
    unsafe {
        let (mut row0, mut row1) = by_row(_mm_loadu_ps(c.as_ptr()), _mm_loadu_ps(c[4..].as_ptr()));
        for k in 0..TILE {
            let cols = _mm_loadu_ps(b.at[k].as_ptr());
            row0 = _mm_add_ps(row0, _mm_mul_ps(_mm_set1_ps(a.at[k][0]), cols));
            row1 = _mm_add_ps(row1, _mm_mul_ps(_mm_set1_ps(a.at[k][1]), cols));
        }
        let (first, second) = by_row(row0, row1);
        _mm_storeu_ps(c.as_mut_ptr(), first);
        _mm_storeu_ps(c[4..].as_mut_ptr(), second);
    }
}

/// Elements 0–3 and 4–7 of an accumulator to its row 0 (0, 1, 4, 5) and row 1 (2, 3, 6, 7),
/// and back: the same exchange of pairs both ways.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn by_row(
    x: core::arch::x86_64::__m128,
    y: core::arch::x86_64::__m128,
) -> (core::arch::x86_64::__m128, core::arch::x86_64::__m128) {
    use core::arch::x86_64::_mm_shuffle_ps;
    // SAFETY: SSE is part of x86-64's baseline.
    unsafe {
        (
            _mm_shuffle_ps::<0b01_00_01_00>(x, y),
            _mm_shuffle_ps::<0b11_10_11_10>(x, y),
        )
    }
}

/// [`mma`] in 4-wide NEON vectors (AArch64's baseline), a vector a row.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
fn mma_neon(a: &LaneRows, b: &LaneColumns, c: &mut [f32; FLOATS]) {
    use core::arch::aarch64::*;
    // SAFETY: NEON is part of AArch64's baseline; each load and store reads or writes 4 floats
    // of an array that has them.
    unsafe {
        // Pairs of floats as one 64-bit lane: row 0 is the first pair of each half, row 1 the
        // second, and back.
        let by_row = |x: float32x4_t, y: float32x4_t| {
            let (x, y) = (vreinterpretq_f64_f32(x), vreinterpretq_f64_f32(y));
            (
                vreinterpretq_f32_f64(vzip1q_f64(x, y)),
                vreinterpretq_f32_f64(vzip2q_f64(x, y)),
            )
        };
        let (mut row0, mut row1) = by_row(vld1q_f32(c.as_ptr()), vld1q_f32(c[4..].as_ptr()));
        for k in 0..TILE {
            let cols = vld1q_f32(b.at[k].as_ptr());
            row0 = vaddq_f32(row0, vmulq_n_f32(cols, a.at[k][0]));
            row1 = vaddq_f32(row1, vmulq_n_f32(cols, a.at[k][1]));
        }
        let (first, second) = by_row(row0, row1);
        vst1q_f32(c.as_mut_ptr(), first);
        vst1q_f32(c[4..].as_mut_ptr(), second);
    }
}

/// Eight values of `T` widened exactly from their bits. On x86-64 in vector instructions:
/// `bf16`'s bits interleaved with zeros, `f16` by one `vcvtph2ps` in images with F16C, else
/// by an exact multiply in SSE2, 18 instructions for the eight (the `half` crate's software
/// conversion branches on each value, and the compiler does not vectorize eight of it).
#[inline(always)]
fn widen8<T: MmaInput>(bits: [u16; 8]) -> [f32; 8] {
    #[cfg(target_arch = "x86_64")]
    return x86::widen8::<T>(bits);
    #[cfg(not(target_arch = "x86_64"))]
    if T::BF16 {
        core::array::from_fn(|i| f32::from_bits(u32::from(bits[i]) << 16))
    } else {
        core::array::from_fn(|i| f16_bits_to_f32(bits[i]))
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::*;

    use super::super::super::mma_input::MmaInput;

    #[inline(always)]
    pub(super) fn widen8<T: MmaInput>(bits: [u16; 8]) -> [f32; 8] {
        // SAFETY: two `__m128` are eight `f32`s.
        unsafe { core::mem::transmute::<[__m128; 2], [f32; 8]>(widen8_halves::<T>(bits)) }
    }

    /// [`widen8`] as two vectors of four.
    #[inline(always)]
    fn widen8_halves<T: MmaInput>(bits: [u16; 8]) -> [__m128; 2] {
        // SAFETY: SSE2 is part of x86-64's baseline, AVX and F16C of the images this `cfg`
        // says have them; the load reads the 16 bytes of `bits`; any bits are a valid `f32`.
        unsafe {
            let bits = _mm_loadu_si128(bits.as_ptr().cast());
            let zero = _mm_setzero_si128();
            if T::BF16 {
                return [
                    _mm_castsi128_ps(_mm_unpacklo_epi16(zero, bits)),
                    _mm_castsi128_ps(_mm_unpackhi_epi16(zero, bits)),
                ];
            }
            #[cfg(target_feature = "f16c")]
            {
                let wide = _mm256_cvtph_ps(bits);
                [
                    _mm256_castps256_ps128(wide),
                    _mm256_extractf128_ps::<1>(wide),
                ]
            }
            #[cfg(not(target_feature = "f16c"))]
            f16x8(bits).map(|half| _mm_castsi128_ps(half))
        }
    }

    /// [`super::k_major_from_chunks`] for two lines (A's rows) or four (B's columns): each
    /// four `k`s of the lines interleaved (two lines) or transposed (four) in vectors, where
    /// the compiler moved the widened values one by one through the stack. For images
    /// without AVX2, whose multiply-accumulate is [`super::mma_sse`]: with AVX2's the
    /// compiler's own layout of the values was faster (`examples/gemm`'s `gemm` about 0.8x as
    /// fast with this).
    #[cfg_attr(target_feature = "avx2", allow(dead_code))]
    #[inline(always)]
    pub(super) fn k_major_from_chunks<T: MmaInput, const W: usize>(
        line: impl Fn(usize) -> usize,
        chunk: impl Fn(usize, usize) -> [u16; 8],
    ) -> [[f32; W]; super::TILE] {
        const { assert!(W == 2 || W == 4) };
        let mut at = [[0.0; W]; super::TILE];
        let out: *mut f32 = at.as_mut_ptr().cast();
        for k0 in [0, 8] {
            let wide: [[__m128; 2]; W] =
                core::array::from_fn(|w| widen8_halves::<T>(chunk(line(w), k0)));
            for (half, k) in [(0, k0), (1, k0 + 4)] {
                // SAFETY: SSE is part of x86-64's baseline; `at` is `TILE` rows of `W` floats
                // and `k + 4 <= TILE`: each store writes four of the floats of rows
                // `k..k + 4`, which `out`, derived from all of `at`, reaches.
                unsafe {
                    let store = |row: usize, v: __m128| _mm_storeu_ps(out.add(row * W), v);
                    if W == 2 {
                        let [a, b] = [wide[0][half], wide[1][half]];
                        store(k, _mm_unpacklo_ps(a, b));
                        store(k + 2, _mm_unpackhi_ps(a, b));
                    } else {
                        let [c0, c1, c2, c3] = core::array::from_fn(|j| wide[j][half]);
                        let (low01, low23) = (_mm_unpacklo_ps(c0, c1), _mm_unpacklo_ps(c2, c3));
                        let (high01, high23) = (_mm_unpackhi_ps(c0, c1), _mm_unpackhi_ps(c2, c3));
                        store(k, _mm_movelh_ps(low01, low23));
                        store(k + 1, _mm_movehl_ps(low23, low01));
                        store(k + 2, _mm_movelh_ps(high01, high23));
                        store(k + 3, _mm_movehl_ps(high23, high01));
                    }
                }
            }
        }
        at
    }

    /// Eight `f16`s widened to `f32`'s bits as [`super::f16_bits_to_f32`] widens one, in 18
    /// instructions: the magnitude's bits moved to `f32`'s places and read as an `f32` are the
    /// value times 2^-112 (a subnormal `f16` an exact subnormal `f32`, not flushed: x86-64
    /// code keeps MXCSR's default), so one exact multiply by 2^112 widens normal numbers,
    /// zeros and subnormals alike; the sign, and for infinities and NaNs the all-ones exponent
    /// (NaNs quietened, as F16C and the `half` crate do), are the upper halves of the words,
    /// found for the eight at once.
    #[cfg_attr(target_feature = "f16c", allow(dead_code))]
    #[inline(always)]
    fn f16x8(h: __m128i) -> [__m128i; 2] {
        // SAFETY: SSE2 is part of x86-64's baseline.
        unsafe {
            let zero = _mm_setzero_si128();
            let magnitude = _mm_and_si128(h, _mm_set1_epi16(0x7fff));
            let inf_or_nan = _mm_cmpgt_epi16(magnitude, _mm_set1_epi16(0x7bff));
            let nan = _mm_cmpgt_epi16(magnitude, _mm_set1_epi16(0x7c00));
            let upper = _mm_or_si128(
                _mm_xor_si128(h, magnitude),
                _mm_or_si128(
                    _mm_and_si128(inf_or_nan, _mm_set1_epi16(0x7f80)),
                    _mm_and_si128(nan, _mm_set1_epi16(0x0040)),
                ),
            );
            let widen = |magnitude: __m128i, upper: __m128i| {
                let scaled = _mm_mul_ps(
                    _mm_castsi128_ps(_mm_slli_epi32::<13>(magnitude)),
                    _mm_castsi128_ps(_mm_set1_epi32((127 + 112) << 23)),
                );
                _mm_or_si128(_mm_castps_si128(scaled), upper)
            };
            [
                widen(
                    _mm_unpacklo_epi16(magnitude, zero),
                    _mm_unpacklo_epi16(zero, upper),
                ),
                widen(
                    _mm_unpackhi_epi16(magnitude, zero),
                    _mm_unpackhi_epi16(zero, upper),
                ),
            ]
        }
    }
}

/// An `f16`'s bits widened exactly to `f32` without a branch: normal numbers by moving the
/// exponent's bias, zeros and subnormals by an exact subtraction in `f32`, infinities and NaNs
/// (quietened, as F16C and the `half` crate do) by the all-ones exponent.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline(always)]
fn f16_bits_to_f32(h: u16) -> f32 {
    const EXPONENT: u32 = 0x7c00 << 13;
    let h = u32::from(h);
    let shifted = (h & 0x7fff) << 13;
    let rebiased = shifted + ((127 - 15) << 23);
    let magnitude = match shifted & EXPONENT {
        EXPONENT if shifted & !EXPONENT != 0 => (rebiased + ((128 - 16) << 23)) | 0x0040_0000,
        EXPONENT => rebiased + ((128 - 16) << 23),
        0 => (f32::from_bits(rebiased + (1 << 23)) - f32::from_bits(113 << 23)).to_bits(),
        _ => rebiased,
    };
    f32::from_bits(magnitude | (h & 0x8000) << 16)
}

/// Every lane's four words, as this lane's warp published them: one exchange.
#[cfg(offload_device)]
#[inline(always)]
pub(super) fn gather(words: [u64; 4]) -> &'static [[u64; 4]; 32] {
    super::super::cpu::warp_gather4(words)
}

#[cfg(not(offload_device))]
pub(super) fn gather(_words: [u64; 4]) -> &'static [[u64; 4]; 32] {
    panic!("kernel::matrix runs in device launches only")
}

#[cfg(test)]
mod tests {
    use super::{COLUMNS, ROWS, column, f16_bits_to_f32, row, slots, widen8};
    use crate::kernel::half::{bf16, f16};
    use crate::kernel::mma_input::{FLOATS, Layout, MmaInput, TILE};

    type Multiply = fn(&super::LaneRows, &super::LaneColumns, &mut [f32; FLOATS]);

    /// `mma` and each of its forms this processor runs.
    fn implementations() -> Vec<(&'static str, Multiply)> {
        let mut all: Vec<(&'static str, Multiply)> =
            vec![("mma", super::mma), ("scalar", super::mma_scalar)];
        #[cfg(target_arch = "x86_64")]
        {
            all.push(("sse", super::mma_sse));
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the processor has AVX2 (detected above).
                all.push(("avx2", |a, b, c| unsafe { super::mma_avx2(a, b, c) }));
            } else {
                eprintln!("AVX2 form not tested: this processor has no AVX2");
            }
        }
        #[cfg(target_arch = "aarch64")]
        all.push(("neon", super::mma_neon));
        all
    }

    /// Each lane's multiply (in every form) gives its accumulator elements of `C + A·B`, from
    /// A's rows read in chunks and B's columns read by element or in chunks (transposed).
    #[test]
    fn each_lane_multiplies_into_its_own_accumulator_elements() {
        use super::{LaneColumns, LaneRows};
        let a = |r: usize, k: usize| ((r * 7 + k * 3) % 11) as f32 / 4.0 - 1.0;
        let b = |k: usize, c: usize| ((k * 5 + c * 2) % 13) as f32 / 8.0 - 0.75;
        let bits = |x: f32| (x.to_bits() >> 16) as u16;
        for lane in 0..32 {
            let rows = LaneRows::from_chunks::<bf16>(lane, |r, k0| {
                core::array::from_fn(|i| bits(a(r, k0 + i)))
            });
            let by_element = LaneColumns::from_elements::<bf16>(lane, |k, c| bits(b(k, c)));
            let by_chunk = LaneColumns::from_chunks::<bf16>(lane, |c, k0| {
                core::array::from_fn(|i| bits(b(k0 + i, c)))
            });
            for cols in [by_element, by_chunk] {
                for (name, multiply) in implementations() {
                    let mut sums = core::array::from_fn(|e| e as f32);
                    multiply(&rows, &cols, &mut sums);
                    for (e, &sum) in sums.iter().enumerate() {
                        let (r, c) = Layout::Mma.c_place(lane, e);
                        let expected = (0..TILE).fold(e as f32, |acc, k| acc + a(r, k) * b(k, c));
                        assert_eq!(sum, expected, "{name}: lane {lane} element {e}");
                    }
                }
            }
        }
    }

    /// Every `f16` and `bf16` widens as `MmaInput::widen` (the `half` crate) widens it, NaNs
    /// quietened alike, eight at a time and one by one.
    #[test]
    fn widened_halves_are_the_half_crates_values() {
        for first in (0..=u16::MAX).step_by(8) {
            let bits: [u16; 8] = core::array::from_fn(|i| first + i as u16);
            for (i, (x, y)) in widen8::<f16>(bits)
                .iter()
                .zip(widen8::<bf16>(bits))
                .enumerate()
            {
                assert_eq!(
                    x.to_bits(),
                    f16::widen(bits[i]).to_bits(),
                    "{:#06x}",
                    bits[i]
                );
                assert_eq!(
                    y.to_bits(),
                    bf16::widen(bits[i]).to_bits(),
                    "{:#06x}",
                    bits[i]
                );
                assert_eq!(
                    f16_bits_to_f32(bits[i]).to_bits(),
                    x.to_bits(),
                    "{:#06x}",
                    bits[i]
                );
            }
        }
    }

    /// The rows and columns a lane keeps are those of its accumulator elements, in the order
    /// `mma` pairs them.
    #[test]
    fn each_lane_keeps_the_rows_and_columns_of_its_accumulator_elements() {
        for lane in 0..32 {
            for e in 0..FLOATS {
                let (r, c) = Layout::Mma.c_place(lane, e);
                let (s, j) = slots(e);
                assert_eq!((row(lane, s), column(lane, j)), (r, c));
            }
            assert!((0..ROWS).all(|s| row(lane, s) < TILE));
            assert!((0..COLUMNS).all(|j| column(lane, j) < TILE));
        }
    }
}
