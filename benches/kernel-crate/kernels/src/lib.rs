//! A kernel crate of 48 kernels, the kind an application carries: elementwise maps,
//! reductions, scans, stencils, dense and sparse linear algebra, histograms, gathers and
//! scatters, small math kernels.
//!
//! One source, two variants:
//!
//! - **checked** (the default): ordinary safe Rust. Indexing is bounds-checked, `unwrap`s,
//!   divisions by run-time values, `f32::clamp` with run-time bounds and `assert!`s are kept,
//!   so every kernel has a path to a panic.
//! - **unchecked** (the `unchecked` feature): the same kernels with none of those checks
//!   (`get_unchecked`, `unwrap_unchecked`, `core::hint::assert_unchecked`), so no kernel can
//!   reach a panic. The kernels' preconditions (buffer lengths, non-zero divisors, ordered
//!   bounds) are then the caller's to keep, as in CUDA C: a bad launch is undefined behaviour.
//!
//! The macros below are where the two differ; the kernels use them for every operation that
//! checks something at run time.
#![no_std]

/// `at!(s, i)`: element `i` of the slice `s`, bounds-checked (checked) or not (unchecked).
#[cfg(not(feature = "unchecked"))]
macro_rules! at {
    ($s:expr, $i:expr) => {
        $s[$i]
    };
}
#[cfg(feature = "unchecked")]
macro_rules! at {
    ($s:expr, $i:expr) => {{
        let (s, i) = (&$s, $i);
        // SAFETY: the unchecked variant's precondition: `i < s.len()`.
        *unsafe { s.get_unchecked(i) }
    }};
}

/// `sub!(s, range)`: the sub-slice `&s[range]`, bounds-checked or not.
#[cfg(not(feature = "unchecked"))]
macro_rules! sub {
    ($s:expr, $r:expr) => {
        &$s[$r]
    };
}
#[cfg(feature = "unchecked")]
macro_rules! sub {
    ($s:expr, $r:expr) => {{
        let (s, r) = (&$s, $r);
        // SAFETY: the unchecked variant's precondition: `r` is in bounds of `s`.
        unsafe { s.get_unchecked(r) }
    }};
}

/// `div!(a, b)`: the integer quotient, panicking on a zero divisor or not.
#[cfg(not(feature = "unchecked"))]
macro_rules! div {
    ($a:expr, $b:expr) => {
        $a / $b
    };
}
#[cfg(feature = "unchecked")]
macro_rules! div {
    ($a:expr, $b:expr) => {{
        let (a, b) = ($a, $b);
        // SAFETY: the unchecked variant's precondition: a non-zero divisor.
        unsafe { core::hint::assert_unchecked(b != 0) };
        a / b
    }};
}

/// `rem!(a, b)`: the integer remainder, panicking on a zero divisor or not.
#[cfg(not(feature = "unchecked"))]
macro_rules! rem {
    ($a:expr, $b:expr) => {
        $a % $b
    };
}
#[cfg(feature = "unchecked")]
macro_rules! rem {
    ($a:expr, $b:expr) => {{
        let (a, b) = ($a, $b);
        // SAFETY: the unchecked variant's precondition: a non-zero divisor.
        unsafe { core::hint::assert_unchecked(b != 0) };
        a % b
    }};
}

/// `unwrap!(option)`: the value, panicking on `None` or not.
#[cfg(not(feature = "unchecked"))]
macro_rules! unwrap {
    ($e:expr) => {
        $e.unwrap()
    };
}
#[cfg(feature = "unchecked")]
macro_rules! unwrap {
    ($e:expr) => {{
        let e = $e;
        // SAFETY: the unchecked variant's precondition: the value is there.
        unsafe { e.unwrap_unchecked() }
    }};
}

/// `clamp!(v, lo, hi)`: `f32::clamp`, which panics unless `lo <= hi`, or `min(max(v, lo),
/// hi)`.
#[cfg(not(feature = "unchecked"))]
macro_rules! clamp {
    ($v:expr, $lo:expr, $hi:expr) => {
        f32::clamp($v, $lo, $hi)
    };
}
#[cfg(feature = "unchecked")]
macro_rules! clamp {
    ($v:expr, $lo:expr, $hi:expr) => {
        ::offload_rt::kernel::math::min(::offload_rt::kernel::math::max($v, $lo), $hi)
    };
}

/// `check!(condition)`: `assert!`, or a promise to the optimizer.
#[cfg(not(feature = "unchecked"))]
macro_rules! check {
    ($c:expr) => {
        assert!($c)
    };
}
#[cfg(feature = "unchecked")]
macro_rules! check {
    ($c:expr) => {{
        let c = $c;
        // SAFETY: the unchecked variant's precondition: the condition holds.
        unsafe { core::hint::assert_unchecked(c) }
    }};
}

pub mod dense;
pub mod map;
pub mod maths;
pub mod reduce;
pub mod scan;
pub mod sparse;
pub mod stencil;

/// Threads per block of the kernels written for a fixed block (reductions, scans, the
/// histogram, the 1-D stencil with a halo).
pub const BLOCK: usize = 256;
/// Side of the square tiles of the tiled matrix product and the 2-D stencil (blocks of
/// `TILE` x `TILE` threads).
pub const TILE: usize = 16;
/// Side of the tiled transpose's tiles; its blocks are `TILE_T` x [`ROWS_T`] threads.
pub const TILE_T: usize = 32;
/// Rows of threads per block of the tiled transpose.
pub const ROWS_T: usize = 8;
/// Bins of the histograms.
pub const BINS: usize = 256;
/// Radius of the 1-D stencil with a halo in shared memory.
pub const RADIUS: usize = 4;

/// Adds `v` to the `f32` at `p` with a compare-and-swap loop.
///
/// # Safety
///
/// `p` is valid, aligned, and accessed only atomically during the launch.
#[inline(always)]
unsafe fn atomic_add_f32(p: *mut f32, v: f32) {
    use core::sync::atomic::{AtomicU32, Ordering};
    // SAFETY: this function's contract.
    let a = unsafe { AtomicU32::from_ptr(p.cast()) };
    let mut old = a.load(Ordering::Relaxed);
    loop {
        let new = (f32::from_bits(old) + v).to_bits();
        match a.compare_exchange_weak(old, new, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break,
            Err(seen) => old = seen,
        }
    }
}
