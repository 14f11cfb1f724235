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

/// `a` and `b` rounded to `f16`, packed `a` low: one conversion on GPUs (`cvt.rn.f16x2.f32`).
#[inline(always)]
pub(crate) fn f32x2_to_f16x2(a: f32, b: f32) -> u32 {
    imp::f32x2_to_f16x2(a, b)
}

/// `a` and `b` rounded to `bf16`, packed `a` low: one conversion on GPUs
/// (`cvt.rn.bf16x2.f32`).
#[inline(always)]
pub(crate) fn f32x2_to_bf16x2(a: f32, b: f32) -> u32 {
    imp::f32x2_to_bf16x2(a, b)
}

/// Adds `value` to `*ptr` atomically and returns the value before (CUDA's
/// `atomicAdd(__half *, __half)`), rounded once to the nearest `f16`: native where the GPU has
/// it (`atom.add.noftz.f16` on NVIDIA), a compare-and-swap loop elsewhere (most AMD GPUs, the
/// CPU device). Relaxed ordering, as CUDA's. Sums of many threads depend on their order unless
/// every partial sum is exact (counts of ones up to 2048, say).
///
/// # Safety
/// `ptr` is valid, 2-aligned and, while the launch runs, accessed only atomically.
#[inline(always)]
pub unsafe fn atomic_add_f16(ptr: *mut f16, value: f16) -> f16 {
    // SAFETY: this function's contract.
    unsafe { imp::atomic_add_f16(ptr, value) }
}

/// [`atomic_add_f16`] for `bf16` (native `atom.add.noftz.bf16` from sm_90 on, a
/// compare-and-swap loop elsewhere); exact for counts up to 256.
///
/// # Safety
/// As for [`atomic_add_f16`].
#[inline(always)]
pub unsafe fn atomic_add_bf16(ptr: *mut bf16, value: bf16) -> bf16 {
    // SAFETY: this function's contract.
    unsafe { imp::atomic_add_bf16(ptr, value) }
}

#[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod imp {
    // `f16` below is Rust's primitive, whose `as` casts are LLVM's `fpext` and `fptrunc`.
    use ::half::{bf16, f16 as Half};

    // SAFETY: the device link defines this function on both GPU triples, with this signature,
    // for every input.
    unsafe extern "C" {
        /// Defined by the device link of every GPU image as `fptrunc float to bfloat`.
        #[link_name = offload_format::abi_name!(F32_TO_BF16)]
        safe fn __offload_f32_to_bf16(x: f32) -> u16;
        /// Defined by the device link as `fptrunc <2 x float> to <2 x half>`, packed.
        #[link_name = offload_format::abi_name!(F32X2_TO_F16X2)]
        safe fn __offload_f32x2_to_f16x2(a: f32, b: f32) -> u32;
        /// Defined by the device link as `fptrunc <2 x float> to <2 x bfloat>`, packed.
        #[link_name = offload_format::abi_name!(F32X2_TO_BF16X2)]
        safe fn __offload_f32x2_to_bf16x2(a: f32, b: f32) -> u32;
        /// Defined by the device link as `atomicrmw fadd half`; returns the old bits.
        #[link_name = offload_format::abi_name!(ATOMIC_ADD_F16)]
        fn __offload_atomic_add_f16(ptr: *mut u16, value: u16) -> u16;
        /// Defined by the device link as `atomicrmw fadd bfloat`; returns the old bits.
        #[link_name = offload_format::abi_name!(ATOMIC_ADD_BF16)]
        fn __offload_atomic_add_bf16(ptr: *mut u16, value: u16) -> u16;
    }

    /// # Safety
    /// As for [`super::atomic_add_f16`].
    #[inline(always)]
    pub(super) unsafe fn atomic_add_f16(ptr: *mut Half, value: Half) -> Half {
        // SAFETY: the caller's contract; the helper is an atomic add of the 16 bits at `ptr`.
        Half::from_bits(unsafe { __offload_atomic_add_f16(ptr.cast(), value.to_bits()) })
    }

    /// # Safety
    /// As for [`super::atomic_add_f16`].
    #[inline(always)]
    pub(super) unsafe fn atomic_add_bf16(ptr: *mut bf16, value: bf16) -> bf16 {
        // SAFETY: as in `atomic_add_f16`.
        bf16::from_bits(unsafe { __offload_atomic_add_bf16(ptr.cast(), value.to_bits()) })
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

    #[inline(always)]
    pub(super) fn f32x2_to_f16x2(a: f32, b: f32) -> u32 {
        __offload_f32x2_to_f16x2(a, b)
    }

    #[inline(always)]
    pub(super) fn f32x2_to_bf16x2(a: f32, b: f32) -> u32 {
        __offload_f32x2_to_bf16x2(a, b)
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

    #[inline(always)]
    pub(super) fn f32x2_to_f16x2(a: f32, b: f32) -> u32 {
        u32::from(f32_to_f16(a).to_bits()) | u32::from(f32_to_f16(b).to_bits()) << 16
    }

    #[inline(always)]
    pub(super) fn f32x2_to_bf16x2(a: f32, b: f32) -> u32 {
        u32::from(f32_to_bf16(a).to_bits()) | u32::from(f32_to_bf16(b).to_bits()) << 16
    }

    /// A compare-and-swap loop; the sum is made in `f64`, where the sum of two `f16`s is
    /// exact, so it is rounded once, as the GPUs' additions round.
    ///
    /// # Safety
    /// As for [`super::atomic_add_f16`].
    #[inline(always)]
    pub(super) unsafe fn atomic_add_f16(ptr: *mut f16, value: f16) -> f16 {
        // SAFETY: the caller's contract: valid, 2-aligned, accessed only atomically.
        let cell = unsafe { core::sync::atomic::AtomicU16::from_ptr(ptr.cast()) };
        let add =
            |bits: u16| (f16::from_f64(f16::from_bits(bits).to_f64() + value.to_f64())).to_bits();
        f16::from_bits(update(cell, add))
    }

    /// As [`atomic_add_f16`] for `bf16`: where the `f64` sum is not exact, the smaller
    /// addend is far below half a `bf16` step of the larger, and the rounding is the same.
    ///
    /// # Safety
    /// As for [`super::atomic_add_f16`].
    #[inline(always)]
    pub(super) unsafe fn atomic_add_bf16(ptr: *mut bf16, value: bf16) -> bf16 {
        // SAFETY: as in `atomic_add_f16`.
        let cell = unsafe { core::sync::atomic::AtomicU16::from_ptr(ptr.cast()) };
        let add =
            |bits: u16| (bf16::from_f64(bf16::from_bits(bits).to_f64() + value.to_f64())).to_bits();
        bf16::from_bits(update(cell, add))
    }

    /// Replaces the value of `cell` with `f` of it, atomically (relaxed); returns the old one.
    #[inline(always)]
    fn update(cell: &core::sync::atomic::AtomicU16, f: impl Fn(u16) -> u16) -> u16 {
        use core::sync::atomic::Ordering::Relaxed;
        let mut old = cell.load(Relaxed);
        loop {
            match cell.compare_exchange_weak(old, f(old), Relaxed, Relaxed) {
                Ok(previous) => return previous,
                Err(current) => old = current,
            }
        }
    }
}
