//! What the per-target modules and the warp operations share: how a shuffle picks its source
//! lane, the values lanes exchange, and the add of a warp sum.

use core::ops::Add;

/// How a shuffle picks its source lane.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shuffle {
    /// Lane `arg % warp_size`.
    Idx,
    /// Lane `lane - arg`; the caller's own value where that is below 0.
    Up,
    /// Lane `lane + arg`; the caller's own value where that is past the warp.
    Down,
    /// Lane `lane ^ arg`; the caller's own value where that is past the warp.
    Xor,
}

/// The source lane of a shuffle for `lane` in a warp of `size` lanes (a power of two), by
/// CUDA's rules; targets without a hardware shuffle mode per kind use it.
#[allow(
    dead_code,
    reason = "used by the targets without hardware shuffle modes"
)]
#[inline(always)]
pub(crate) fn source_lane(mode: Shuffle, lane: u32, arg: u32, size: u32) -> u32 {
    match mode {
        Shuffle::Idx => arg & (size - 1),
        Shuffle::Up => {
            if arg <= lane {
                lane - arg
            } else {
                lane
            }
        }
        Shuffle::Down => {
            if arg < size - lane {
                lane + arg
            } else {
                lane
            }
        }
        Shuffle::Xor => {
            let src = lane ^ arg;
            if src < size { src } else { lane }
        }
    }
}
pub(super) mod sealed {
    pub trait Sealed {}
}

/// A value lanes can exchange: 32-bit values move in one shuffle, 64-bit values in two (one on
/// the CPU device).
pub trait WarpValue: Copy + sealed::Sealed {
    #[doc(hidden)]
    fn __shuffle(self, mode: Shuffle, arg: u32) -> Self;
    #[doc(hidden)]
    fn __shuffle_masked(self, mask: u64, mode: Shuffle, arg: u32) -> Self;
    /// The value as the word a CPU device's lane exchanges.
    #[doc(hidden)]
    fn __to_word(self) -> u64;
    /// The value of a word `__to_word` made (any word gives some value).
    #[doc(hidden)]
    fn __from_word(word: u64) -> Self;
}

/// One step of [`warp_sum`](super::warp::warp_sum)'s butterfly: a lane's value and its partner's. The CPU device's
/// region form runs the butterfly with these steps too, for the same bits.
#[doc(hidden)]
#[inline(always)]
pub fn warp_sum_step<T: WarpAdd>(mine: T, partner: T) -> T {
    mine.warp_add(partner)
}
/// Addition as [`warp_sum`](super::warp::warp_sum) does it: wrapping for integers, IEEE addition for floats.
pub trait WarpAdd: sealed::Sealed {
    #[doc(hidden)]
    fn warp_add(self, other: Self) -> Self;
}

macro_rules! warp_add {
    (wrapping: $($t:ty),*) => {$(
        impl WarpAdd for $t {
            #[inline(always)]
            fn warp_add(self, other: Self) -> Self {
                self.wrapping_add(other)
            }
        }
    )*};
    (float: $($t:ty),*) => {$(
        impl WarpAdd for $t {
            #[inline(always)]
            fn warp_add(self, other: Self) -> Self {
                Add::add(self, other)
            }
        }
    )*};
}
warp_add!(wrapping: u32, i32, u64, i64, usize, isize);
warp_add!(float: f32, f64);
