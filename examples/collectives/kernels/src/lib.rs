//! The kernels of `collectives`: each rank fills its buffers on the device before the
//! collectives, and scales what they gave it after, on the same stream.
#![no_std]

use offload_rt::kernel::half::{bf16, f16, f32_to_bf16, f32_to_f16};
use offload_rt::kernel::{DeviceCopy, DisjointSlice, kernel};

/// An element type of the example: made from a small integer, exactly, in every type.
pub trait Small: DeviceCopy {
    /// `v` as this type (`v` small enough for it).
    fn small(v: i32) -> Self;
}

macro_rules! small_by_cast {
    ($($t:ty),*) => {$(
        impl Small for $t {
            #[inline(always)]
            fn small(v: i32) -> Self {
                v as $t
            }
        }
    )*};
}

small_by_cast!(i8, u8, i32, u32, i64, u64, f32, f64);

impl Small for f16 {
    #[inline(always)]
    fn small(v: i32) -> Self {
        f32_to_f16(v as f32)
    }
}

impl Small for bf16 {
    #[inline(always)]
    fn small(v: i32) -> Self {
        f32_to_bf16(v as f32)
    }
}

/// What rank `rank` holds at `i`: a small value, in `-3..=3` where `signed`, else `0..=6`, so
/// that the sums and products of up to 4 ranks are exact in every type (or wrap as integers).
pub fn pattern(rank: u32, i: usize, signed: bool) -> i32 {
    let v = ((i as u64 * 3 + u64::from(rank) * 5 + i as u64 / 7) % 7) as i32;
    if signed { v - 3 } else { v }
}

/// `out[i] = pattern(rank, first + i)`.
#[kernel(T = i8 | u8 | i32 | u32 | i64 | u64 | f32 | f64 | f16 | bf16)]
pub fn fill<T: Small>(rank: u32, first: u32, signed: bool, mut out: DisjointSlice<T>) {
    if let Some((i, o)) = out.for_thread_x() {
        *o = T::small(pattern(rank, first as usize + i, signed));
    }
}

/// `out[i] = a * i + b` in `f32`, the all-reduce benchmark's data.
#[kernel]
pub fn ramp(a: f32, b: f32, mut out: DisjointSlice<f32>) {
    if let Some((i, o)) = out.for_thread_x() {
        *o = a * i as f32 + b;
    }
}
