//! Floating-point math for kernels, on `f32` and `f64`, giving the same bits on every device.
//!
//! ```ignore
//! use offload_rt::kernel::math;
//! let r = math::sqrt(math::fma(x, x, y * y));
//! let w = math::exp(-r) * math::cos(theta);
//! ```
//!
//! | function | result | NVIDIA | AMD | CPU device |
//! |---|---|---|---|---|
//! | [`sqrt`] | correctly rounded | `sqrt.rn` | `v_sqrt_f32` with its rounding correction; `v_rsq_f64` and Newton steps | `sqrtss` / `sqrtsd` |
//! | [`rsqrt`] | `1 / sqrt(x)`: two correctly rounded operations (within 1 ulp of the correctly rounded result) | `sqrt.rn`, `div.rn` | as `sqrt`, then IEEE division | as `sqrt`, `divss` |
//! | [`fma`] | `a * b + c` rounded once | `fma.rn` | `v_fma_f32` / `v_fma_f64` | FMA instruction or `libm`'s exact software |
//! | [`floor`], [`abs`] | exact | `cvt.rmi`, `abs` | `v_floor`, a sign-bit mask | `libm`, a sign-bit mask |
//! | [`min`], [`max`] | exact; a NaN operand is ignored; for `-0.0` against `+0.0` either zero | `min`, `max` | `v_min`, `v_max` | `minss`, `maxss` with a NaN check |
//! | [`exp`], [`log`], [`sin`], [`cos`], [`pow`] | `libm`'s (musl's algorithms): error below 1 ulp | software | software | software |
//!
//! The first group are LLVM intrinsics that both GPU backends lower to instructions. The
//! second is the `libm` crate's `no_std` code on every device, GPUs included, because neither
//! backend lowers them exactly (NVIDIA has only approximations such as `ex2.approx`, and
//! `f64` versions on no GPU): every device runs the same IEEE operations in the same order
//! (no contraction into fused multiply-adds), so results are bit-identical across devices
//! (NaN results excepted: NaN everywhere, with payload and sign bits that may differ).
//! Kernels may also depend on the `libm` crate themselves for the functions not here.

/// `f32` and `f64`: the types the functions of this module take. Sealed.
pub trait Float: Copy + sealed::Sealed {
    #[doc(hidden)]
    fn sqrt_(self) -> Self;
    #[doc(hidden)]
    fn rsqrt_(self) -> Self;
    #[doc(hidden)]
    fn fma_(self, b: Self, c: Self) -> Self;
    #[doc(hidden)]
    fn exp_(self) -> Self;
    #[doc(hidden)]
    fn log_(self) -> Self;
    #[doc(hidden)]
    fn sin_(self) -> Self;
    #[doc(hidden)]
    fn cos_(self) -> Self;
    #[doc(hidden)]
    fn pow_(self, y: Self) -> Self;
    #[doc(hidden)]
    fn floor_(self) -> Self;
    #[doc(hidden)]
    fn abs_(self) -> Self;
    #[doc(hidden)]
    fn min_(self, y: Self) -> Self;
    #[doc(hidden)]
    fn max_(self, y: Self) -> Self;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// The operations both GPU backends lower to instructions, as LLVM intrinsics.
#[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod prim {
    // SAFETY: LLVM's intrinsics of these names and types, defined for every input.
    unsafe extern "unadjusted" {
        #[link_name = "llvm.sqrt.f32"]
        pub(super) safe fn sqrt_f32(x: f32) -> f32;
        #[link_name = "llvm.sqrt.f64"]
        pub(super) safe fn sqrt_f64(x: f64) -> f64;
        #[link_name = "llvm.fma.f32"]
        pub(super) safe fn fma_f32(a: f32, b: f32, c: f32) -> f32;
        #[link_name = "llvm.fma.f64"]
        pub(super) safe fn fma_f64(a: f64, b: f64, c: f64) -> f64;
        #[link_name = "llvm.floor.f32"]
        pub(super) safe fn floor_f32(x: f32) -> f32;
        #[link_name = "llvm.floor.f64"]
        pub(super) safe fn floor_f64(x: f64) -> f64;
    }
}

/// On the CPU device (and the host, where kernels only type-check) `libm`: without an FMA or
/// SSE4.1 target feature LLVM would turn `llvm.fma` and `llvm.floor` into calls to the C
/// library. On x86-64 the square root (SSE2, always there) and, at CPU levels with FMA, the
/// fused multiply-add are the compiler's own operations instead: `libm`'s are inline assembly
/// (a legacy-SSE `sqrtss` in AVX code, which costs a state transition at each call, and
/// nothing the vectorizer can widen) and an FMA chosen at run time through a function pointer.
#[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
mod prim {
    pub(super) use libm::{floor as floor_f64, floorf as floor_f32};
    #[cfg(not(all(target_arch = "x86_64", target_feature = "fma")))]
    pub(super) use libm::{fma as fma_f64, fmaf as fma_f32};
    #[cfg(not(target_arch = "x86_64"))]
    pub(super) use libm::{sqrt as sqrt_f64, sqrtf as sqrt_f32};
    #[cfg(target_arch = "x86_64")]
    pub(super) use x86_64::*;

    #[cfg(target_arch = "x86_64")]
    mod x86_64 {
        use core::arch::x86_64::{
            _mm_cvtsd_f64, _mm_cvtss_f32, _mm_set_sd, _mm_set_ss, _mm_sqrt_sd, _mm_sqrt_ss,
        };

        #[inline(always)]
        pub(in super::super) fn sqrt_f32(x: f32) -> f32 {
            // SAFETY: SSE is part of every x86-64 CPU (the target's baseline).
            unsafe { _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(x))) }
        }

        #[inline(always)]
        pub(in super::super) fn sqrt_f64(x: f64) -> f64 {
            // SAFETY: SSE2 is part of every x86-64 CPU (the target's baseline).
            unsafe {
                let x = _mm_set_sd(x);
                _mm_cvtsd_f64(_mm_sqrt_sd(x, x))
            }
        }

        #[cfg(target_feature = "fma")]
        #[inline(always)]
        pub(in super::super) fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
            use core::arch::x86_64::_mm_fmadd_ss;
            // SAFETY: this is compiled only for CPUs with FMA (`target_feature = "fma"`).
            unsafe { _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c))) }
        }

        #[cfg(target_feature = "fma")]
        #[inline(always)]
        pub(in super::super) fn fma_f64(a: f64, b: f64, c: f64) -> f64 {
            use core::arch::x86_64::_mm_fmadd_sd;
            // SAFETY: this is compiled only for CPUs with FMA (`target_feature = "fma"`).
            unsafe { _mm_cvtsd_f64(_mm_fmadd_sd(_mm_set_sd(a), _mm_set_sd(b), _mm_set_sd(c))) }
        }
    }
}

macro_rules! float {
    ($t:ty, $sqrt:path, $fma:path, $floor:path, $exp:path, $log:path, $sin:path, $cos:path,
     $pow:path) => {
        impl Float for $t {
            #[inline(always)]
            fn sqrt_(self) -> Self {
                $sqrt(self)
            }
            #[inline(always)]
            fn rsqrt_(self) -> Self {
                1.0 / $sqrt(self)
            }
            #[inline(always)]
            fn fma_(self, b: Self, c: Self) -> Self {
                $fma(self, b, c)
            }
            #[inline]
            fn exp_(self) -> Self {
                $exp(self)
            }
            #[inline]
            fn log_(self) -> Self {
                $log(self)
            }
            #[inline]
            fn sin_(self) -> Self {
                $sin(self)
            }
            #[inline]
            fn cos_(self) -> Self {
                $cos(self)
            }
            #[inline]
            fn pow_(self, y: Self) -> Self {
                $pow(self, y)
            }
            #[inline(always)]
            fn floor_(self) -> Self {
                $floor(self)
            }
            #[inline(always)]
            fn abs_(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn min_(self, y: Self) -> Self {
                <$t>::min(self, y)
            }
            #[inline(always)]
            fn max_(self, y: Self) -> Self {
                <$t>::max(self, y)
            }
        }
    };
}

float!(
    f32,
    prim::sqrt_f32,
    prim::fma_f32,
    prim::floor_f32,
    libm::expf,
    libm::logf,
    libm::sinf,
    libm::cosf,
    libm::powf
);
float!(
    f64,
    prim::sqrt_f64,
    prim::fma_f64,
    prim::floor_f64,
    libm::exp,
    libm::log,
    libm::sin,
    libm::cos,
    libm::pow
);

/// The square root, correctly rounded; NaN below zero.
#[inline(always)]
pub fn sqrt<T: Float>(x: T) -> T {
    x.sqrt_()
}

/// `1 / sqrt(x)`, two correctly rounded operations (not a hardware reciprocal-root
/// approximation, so that every device gives the same bits).
#[inline(always)]
pub fn rsqrt<T: Float>(x: T) -> T {
    x.rsqrt_()
}

/// `a * b + c` with one rounding.
#[inline(always)]
pub fn fma<T: Float>(a: T, b: T, c: T) -> T {
    a.fma_(b, c)
}

/// `e^x`, error below 1 ulp.
#[inline]
pub fn exp<T: Float>(x: T) -> T {
    x.exp_()
}

/// The natural logarithm, error below 1 ulp; NaN below zero, `-inf` at zero.
#[inline]
pub fn log<T: Float>(x: T) -> T {
    x.log_()
}

/// The sine of `x` radians, error below 1 ulp (exact argument reduction for every `x`).
#[inline]
pub fn sin<T: Float>(x: T) -> T {
    x.sin_()
}

/// The cosine of `x` radians, error below 1 ulp (exact argument reduction for every `x`).
#[inline]
pub fn cos<T: Float>(x: T) -> T {
    x.cos_()
}

/// `x^y` with C's special cases (`pow(x, 0) = 1`, NaN for a negative `x` and a non-integer
/// `y`), error below 1 ulp.
#[inline]
pub fn pow<T: Float>(x: T, y: T) -> T {
    x.pow_(y)
}

/// The largest integer not above `x`, exactly.
#[inline(always)]
pub fn floor<T: Float>(x: T) -> T {
    x.floor_()
}

/// `x` with its sign bit cleared.
#[inline(always)]
pub fn abs<T: Float>(x: T) -> T {
    x.abs_()
}

/// The smaller of `x` and `y`; the other one when one is NaN. Which zero `min(-0.0, 0.0)`
/// returns differs between devices.
#[inline(always)]
pub fn min<T: Float>(x: T, y: T) -> T {
    x.min_(y)
}

/// The larger of `x` and `y`; the other one when one is NaN. Which zero `max(-0.0, 0.0)`
/// returns differs between devices.
#[inline(always)]
pub fn max<T: Float>(x: T, y: T) -> T {
    x.max_(y)
}

/// `2^x` by the device's own approximation, for kernels that trade the last bits for speed
/// (a softmax's exponentials): NVIDIA's `ex2.approx.ftz.f32` (`MUFU.EX2`, relative error
/// below 2^-22, subnormal inputs and results flushed to zero), AMD's `v_exp_f32` (1 ulp,
/// subnormal results flushed), on the CPU device `libm`'s `exp2f`. Unlike the rest of this
/// module, devices may differ in the last bits; `exp2_approx(-inf)` is `0` and
/// `exp2_approx(0.0)` is `1` on every one.
#[inline(always)]
pub fn exp2_approx(x: f32) -> f32 {
    approx::exp2(x)
}

#[cfg(all(offload_device, target_arch = "nvptx64"))]
mod approx {
    // SAFETY: LLVM's intrinsic of this name and type, defined for every input.
    unsafe extern "unadjusted" {
        #[link_name = "llvm.nvvm.ex2.approx.ftz.f"]
        pub(super) safe fn exp2(x: f32) -> f32;
    }
}

#[cfg(all(offload_device, target_arch = "amdgpu"))]
mod approx {
    // SAFETY: LLVM's intrinsic of this name and type, defined for every input.
    unsafe extern "unadjusted" {
        #[link_name = "llvm.amdgcn.exp2.f32"]
        pub(super) safe fn exp2(x: f32) -> f32;
    }
}

#[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
mod approx {
    pub(super) use libm::exp2f as exp2;
}
