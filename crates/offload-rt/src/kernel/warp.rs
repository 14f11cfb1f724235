//! Warp (AMD: wavefront) operations: lanes of one warp exchanging values without shared memory.
//!
//! A warp is [`warp_size()`] consecutive threads of a block by [`thread_rank`](super::thread_rank):
//! 32 on NVIDIA GPUs, 64 on AMD gfx9 (gfx90a, gfx942), 32 on AMD gfx10 and later (their default
//! wave32), and 32 on the CPU device, which emulates a warp's lanes with its barrier coroutines.
//!
//! Every operation here is collective, like CUDA's `*_sync` functions called with a full mask:
//! every lane of the warp must call it, with the same arguments where the documentation says
//! so. The `*_masked` forms take the mask: only its lanes call them (the lanes of a branch,
//! their mask from a [`ballot`] made before it). Give warp operations blocks of a whole number of warps (a multiple of 64 threads
//! serves every device): lanes that do not exist (the last warp of a block whose size is not
//! a multiple of the warp size) contribute nothing: a shuffle from such a lane returns an
//! unspecified value, so [`warp_sum`] and its siblings are wrong there, and [`ballot`] has
//! their bits clear.
//!
//! | operation | NVIDIA | AMD | CPU device |
//! |---|---|---|---|
//! | shuffles | `shfl.sync.{idx,up,down,bfly}.b32`, mask `0xffffffff` | `ds_bpermute_b32` | two exchange slots per thread, used in turn, one warp barrier |
//! | `*_masked` | the same with the mask's low 32 bits | the same, ballots ANDed with the mask | a slot per thread between two warp barriers |
//! | [`ballot`], [`warp_any`], [`warp_all`] | `vote.sync.{ballot,any,all}` | `llvm.amdgcn.ballot` | the same exchange |
//! | [`lane_id`] | `%laneid` | `v_mbcnt_{lo,hi}` | rank modulo 32 |
//! | [`sync_warp`] | `bar.warp.sync` | wavefront-scope fences around `wave_barrier` | a warp barrier |
//!
//! [`warp_sum`], [`warp_max`] and [`warp_min`] are butterflies of [`shuffle_xor`] from
//! `warp_size() / 2` down to 1, so every lane gets the same result, and a device with the same
//! warp size computes the same bits (floating-point sums too: each step adds the same two
//! values on both lanes of a pair).

use super::arch;
use super::shuffle::sealed;
#[doc(hidden)]
pub use super::shuffle::{Shuffle, warp_sum_step};
pub use super::shuffle::{WarpAdd, WarpValue};

macro_rules! warp_values {
    ($via:ident, $masked:ident, $bits:ty: $($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl WarpValue for $t {
            #[inline(always)]
            fn __shuffle(self, mode: Shuffle, arg: u32) -> Self {
                <$t>::from_bits_or_cast(arch::$via(mode, self.to_bits_or_cast(), arg))
            }
            #[inline(always)]
            fn __shuffle_masked(self, mask: u64, mode: Shuffle, arg: u32) -> Self {
                <$t>::from_bits_or_cast(arch::$masked(mask, mode, self.to_bits_or_cast(), arg))
            }
            #[inline(always)]
            fn __to_word(self) -> u64 {
                u64::from(Bits::<$bits>::to_bits_or_cast(self))
            }
            #[inline(always)]
            fn __from_word(word: u64) -> Self {
                <$t>::from_bits_or_cast(word as $bits)
            }
        }
    )*};
}

/// Bit-exact conversions between a value and the word that carries it.
trait Bits<W> {
    fn to_bits_or_cast(self) -> W;
    fn from_bits_or_cast(w: W) -> Self;
}

macro_rules! int_bits {
    ($w:ty: $($t:ty),*) => {$(
        impl Bits<$w> for $t {
            #[inline(always)]
            fn to_bits_or_cast(self) -> $w {
                self as $w
            }
            #[inline(always)]
            fn from_bits_or_cast(w: $w) -> Self {
                w as $t
            }
        }
    )*};
}
int_bits!(u32: u32, i32);
int_bits!(u64: u64, i64, usize, isize);

impl Bits<u32> for f32 {
    #[inline(always)]
    fn to_bits_or_cast(self) -> u32 {
        self.to_bits()
    }
    #[inline(always)]
    fn from_bits_or_cast(w: u32) -> Self {
        f32::from_bits(w)
    }
}

impl Bits<u64> for f64 {
    #[inline(always)]
    fn to_bits_or_cast(self) -> u64 {
        self.to_bits()
    }
    #[inline(always)]
    fn from_bits_or_cast(w: u64) -> Self {
        f64::from_bits(w)
    }
}

warp_values!(shuffle_u32, shuffle_u32_masked, u32: u32, i32, f32);
warp_values!(shuffle_u64, shuffle_u64_masked, u64: u64, i64, f64, usize, isize);

/// The calling thread's lane in its warp: `0..warp_size()`.
#[inline(always)]
pub fn lane_id() -> u32 {
    arch::lane_id()
}

/// The calling thread's warp in its block: `thread_rank() / warp_size()`. Code that gives one
/// warp a task (`if warp_id() == 0 { … warp_sum(…) … }`) stays right whatever the warp size,
/// where `if thread_idx_x() < 32` is half a wavefront on AMD's wave64 and breaks the rule that
/// every lane of a warp calls its warp operations.
#[inline(always)]
pub fn warp_id() -> u32 {
    super::thread_rank() / warp_size()
}

/// Warps in the calling thread's block: `block_size()` divided by `warp_size()`, rounded up.
#[inline(always)]
pub fn warps_per_block() -> u32 {
    super::block_size().div_ceil(warp_size())
}

/// Lanes per warp: 32 on NVIDIA, 64 on AMD gfx9 and 32 on AMD gfx10 and later, 32 on the
/// CPU device. A constant of the image (the AMD device link fixes it per target).
#[inline(always)]
pub fn warp_size() -> u32 {
    arch::warp_size()
}

/// The value of lane `src_lane % warp_size()` (`__shfl_sync`).
#[inline(always)]
pub fn shuffle_idx<T: WarpValue>(value: T, src_lane: u32) -> T {
    value.__shuffle(Shuffle::Idx, src_lane)
}

/// The value of lane `lane_id() - delta`, or `value` itself for the first `delta` lanes
/// (`__shfl_up_sync`).
#[inline(always)]
pub fn shuffle_up<T: WarpValue>(value: T, delta: u32) -> T {
    value.__shuffle(Shuffle::Up, delta)
}

/// The value of lane `lane_id() + delta`, or `value` itself for the last `delta` lanes
/// (`__shfl_down_sync`).
#[inline(always)]
pub fn shuffle_down<T: WarpValue>(value: T, delta: u32) -> T {
    value.__shuffle(Shuffle::Down, delta)
}

/// The value of lane `lane_id() ^ lane_mask`, or `value` itself where that lane is past the
/// warp (`__shfl_xor_sync`).
#[inline(always)]
pub fn shuffle_xor<T: WarpValue>(value: T, lane_mask: u32) -> T {
    value.__shuffle(Shuffle::Xor, lane_mask)
}

/// A barrier among the lanes of the calling warp (`__syncwarp()`): returns once every lane
/// of the warp has called it, and what each lane wrote to memory before it is visible to the
/// warp's lanes after it. The warp-synchronous step of a reduction through shared memory:
/// write, `sync_warp()`, read a neighbour's value. Every lane of the warp must call it, as for
/// the other warp operations; [`sync_threads`](super::sync_threads) is the barrier of the
/// whole block.
#[inline(always)]
pub fn sync_warp() {
    arch::sync_warp()
}

/// Bit `i` set when lane `i` passed `true` (`__ballot_sync`, widened to 64 bits for AMD's
/// wave64).
#[inline(always)]
pub fn ballot(predicate: bool) -> u64 {
    arch::ballot(predicate)
}

/// Whether any lane of the warp passed `true` (`__any_sync`).
#[inline(always)]
pub fn warp_any(predicate: bool) -> bool {
    arch::warp_any(predicate)
}

/// Whether every lane of the warp passed `true` (`__all_sync`).
#[inline(always)]
pub fn warp_all(predicate: bool) -> bool {
    arch::warp_all(predicate)
}

/// [`shuffle_idx`] among the lanes of `mask` (`__shfl_sync(mask, …)`): every lane of `mask`
/// calls it, with the same `mask`, and `src_lane` is one of them. The other lanes need not
/// call it: the lanes of a branch exchange values, their mask from a [`ballot`] made before
/// the branch. Bit `i` of a mask is lane `i`; lanes past the warp's are ignored.
#[inline(always)]
pub fn shuffle_idx_masked<T: WarpValue>(mask: u64, value: T, src_lane: u32) -> T {
    value.__shuffle_masked(mask, Shuffle::Idx, src_lane)
}

/// [`shuffle_up`] among the lanes of `mask` (`__shfl_up_sync(mask, …)`), as
/// [`shuffle_idx_masked`].
#[inline(always)]
pub fn shuffle_up_masked<T: WarpValue>(mask: u64, value: T, delta: u32) -> T {
    value.__shuffle_masked(mask, Shuffle::Up, delta)
}

/// [`shuffle_down`] among the lanes of `mask` (`__shfl_down_sync(mask, …)`), as
/// [`shuffle_idx_masked`].
#[inline(always)]
pub fn shuffle_down_masked<T: WarpValue>(mask: u64, value: T, delta: u32) -> T {
    value.__shuffle_masked(mask, Shuffle::Down, delta)
}

/// [`shuffle_xor`] among the lanes of `mask` (`__shfl_xor_sync(mask, …)`), as
/// [`shuffle_idx_masked`].
#[inline(always)]
pub fn shuffle_xor_masked<T: WarpValue>(mask: u64, value: T, lane_mask: u32) -> T {
    value.__shuffle_masked(mask, Shuffle::Xor, lane_mask)
}

/// [`ballot`] among the lanes of `mask` (`__ballot_sync(mask, …)`): the bits of the lanes of
/// `mask` that passed `true`; every lane of `mask` calls it.
#[inline(always)]
pub fn ballot_masked(mask: u64, predicate: bool) -> u64 {
    arch::ballot_masked(mask, predicate)
}

/// Whether any lane of `mask` passed `true` (`__any_sync(mask, …)`).
#[inline(always)]
pub fn warp_any_masked(mask: u64, predicate: bool) -> bool {
    arch::warp_any_masked(mask, predicate)
}

/// Whether every lane of `mask` passed `true` (`__all_sync(mask, …)`).
#[inline(always)]
pub fn warp_all_masked(mask: u64, predicate: bool) -> bool {
    arch::warp_all_masked(mask, predicate)
}

/// [`sync_warp`] among the lanes of `mask` (`__syncwarp(mask)`).
#[inline(always)]
pub fn sync_warp_masked(mask: u64) {
    arch::sync_warp_masked(mask)
}

/// `value` combined over the warp with `op` by an xor butterfly; every lane gets the result.
#[inline(always)]
fn butterfly<T: WarpValue>(value: T, op: impl Fn(T, T) -> T) -> T {
    let mut v = value;
    let mut offset = warp_size() / 2;
    while offset > 0 {
        v = op(v, shuffle_xor(v, offset));
        offset /= 2;
    }
    v
}

/// The sum of `value` over the warp, on every lane. Integers wrap on overflow.
#[inline(always)]
pub fn warp_sum<T: WarpValue + WarpAdd>(value: T) -> T {
    butterfly(value, warp_sum_step)
}

/// The largest `value` of the warp, on every lane (for floats, a NaN loses to any number;
/// between `0.0` and `-0.0` lanes may differ).
#[inline(always)]
pub fn warp_max<T: WarpValue + PartialOrd>(value: T) -> T {
    butterfly(value, warp_max_step)
}

/// The smallest `value` of the warp, on every lane (as [`warp_max`] for NaN and zeros).
#[inline(always)]
pub fn warp_min<T: WarpValue + PartialOrd>(value: T) -> T {
    butterfly(value, warp_min_step)
}

/// One step of [`warp_max`]'s butterfly (see [`warp_sum_step`]).
#[doc(hidden)]
#[inline(always)]
pub fn warp_max_step<T: PartialOrd + Copy>(mine: T, partner: T) -> T {
    if partner > mine || is_nan(mine) {
        partner
    } else {
        mine
    }
}

/// One step of [`warp_min`]'s butterfly (see [`warp_sum_step`]).
#[doc(hidden)]
#[inline(always)]
pub fn warp_min_step<T: PartialOrd + Copy>(mine: T, partner: T) -> T {
    if partner < mine || is_nan(mine) {
        partner
    } else {
        mine
    }
}

#[inline(always)]
fn is_nan<T: PartialOrd>(v: T) -> bool {
    v.partial_cmp(&v).is_none()
}
