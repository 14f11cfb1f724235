//! Half-precision floats in kernels (feature `half`): the `half` crate's [`f16`](struct@f16) (IEEE binary16)
//! and [`bf16`] (bfloat16) as buffer elements and kernel parameters, and their conversions to
//! and from `f32`, with the same bits on every device.
//!
//! ```ignore
//! use offload_rt::kernel::half::{f16, f16_to_f32, f32_to_f16};
//! // SAFETY: the host passes buffers of at least `n` elements.
//! let (x, y) = unsafe { (f16_to_f32(*x.add(i)), f16_to_f32(*y.add(i))) };
//! unsafe { *out.add(i) = f32_to_f16(x * y) };
//! ```
//!
//! | function | result | NVIDIA | AMD | CPU device |
//! |---|---|---|---|---|
//! | [`f16_to_f32`] | exact | `cvt.f32.f16` | `v_cvt_f32_f16` | the `half` crate |
//! | [`f32_to_f16`] | round to nearest even; overflow to infinity, subnormals kept | `cvt.rn.f16.f32` | `v_cvt_f16_f32` | the `half` crate |
//! | [`bf16_to_f32`] | exact | a 16-bit shift | a 16-bit shift | a 16-bit shift |
//! | [`f32_to_bf16`] | round to nearest even; subnormals kept | `cvt.rn.bf16.f32` (sm_80+; integer operations before) | integer operations (`v_cvt_pk_bf16_f32` on gfx950) | the `half` crate |
//!
//! The `half` crate's own `to_f32` / `from_f32` are software everywhere but on x86 and aarch64
//! CPUs with half-precision instructions, so on GPUs these functions use what the backends
//! lower to instructions: Rust's `f16` primitive (`fpext` / `fptrunc` of LLVM's `half`) and,
//! as Rust has no `bf16` primitive, `__offload_f32_to_bf16`, which the device link defines as
//! `fptrunc float to bfloat` and which each image's processor lowers its own way. A NaN stays
//! NaN on every device; its payload and sign bits may differ between devices.

pub use ::half::{bf16, f16};

/// `x` widened to `f32`, exactly.
#[inline(always)]
pub fn f16_to_f32(x: f16) -> f32 {
    imp::f16_to_f32(x)
}

/// `x` rounded to the nearest `f16` (ties to even): beyond 65504 (after rounding) it is
/// infinite, below 2^-14 subnormal.
#[inline(always)]
pub fn f32_to_f16(x: f32) -> f16 {
    imp::f32_to_f16(x)
}

/// `x` widened to `f32`, exactly: bfloat16 is the high half of an `f32`.
#[inline(always)]
pub fn bf16_to_f32(x: bf16) -> f32 {
    f32::from_bits(u32::from(x.to_bits()) << 16)
}

/// `x` rounded to the nearest `bf16` (ties to even): `f32`'s range, 8 significant bits.
#[inline(always)]
pub fn f32_to_bf16(x: f32) -> bf16 {
    imp::f32_to_bf16(x)
}

#[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod imp {
    // `f16` below is Rust's primitive, whose `as` casts are LLVM's `fpext` and `fptrunc`.
    use ::half::{bf16, f16 as Half};

    // SAFETY: the device link defines this function on both GPU triples, with this signature,
    // for every input.
    unsafe extern "C" {
        /// Defined by the device link of every GPU image as `fptrunc float to bfloat`.
        safe fn __offload_f32_to_bf16(x: f32) -> u16;
    }

    #[inline(always)]
    pub(super) fn f16_to_f32(x: Half) -> f32 {
        f16::from_bits(x.to_bits()) as f32
    }

    #[inline(always)]
    pub(super) fn f32_to_f16(x: f32) -> Half {
        Half::from_bits((x as f16).to_bits())
    }

    #[inline(always)]
    pub(super) fn f32_to_bf16(x: f32) -> bf16 {
        bf16::from_bits(__offload_f32_to_bf16(x))
    }
}

/// The CPU device, and the host, where kernels only type-check: the `half` crate, whose
/// software rounds as the GPUs do.
#[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
mod imp {
    use super::{bf16, f16};

    #[inline(always)]
    pub(super) fn f16_to_f32(x: f16) -> f32 {
        x.to_f32()
    }

    #[inline(always)]
    pub(super) fn f32_to_f16(x: f32) -> f16 {
        f16::from_f32(x)
    }

    #[inline(always)]
    pub(super) fn f32_to_bf16(x: f32) -> bf16 {
        bf16::from_f32(x)
    }
}
