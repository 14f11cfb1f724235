//! What an image's device has of Hopper's units and of AMD's direct loads to shared memory, a
//! constant of each image.

/// Whether this image's device has the tensor memory accelerator, `mbarrier`'s byte counts and
/// thread-block clusters ([`tma`](super::tma), [`mbarrier`](super::mbarrier),
/// [`cluster`](super::cluster): NVIDIA sm_90 and later). A constant of each image, set by the
/// device link: one kernel source branches on it for its Hopper path, and the other images keep
/// only the other branch (the device link refuses a kernel whose image still reaches these
/// units).
#[inline(always)]
pub fn has_tma() -> bool {
    imp::tma()
}

/// Whether this image's device has Hopper's warpgroup matrix multiplies and `setmaxnreg`
/// (`kernel::wgmma`, with the `half` feature: NVIDIA `sm_90a`, an `--offload-arch sm_90a`
/// image); a constant of each image, as [`has_tma`].
#[inline(always)]
pub fn has_wgmma() -> bool {
    imp::wgmma()
}

/// Whether this image's device stores matrices from the lanes' registers in one instruction
/// (`stmatrix`: NVIDIA sm_90 and later); a constant of each image, as [`has_tma`].
/// `kernel::matrix`'s `stmatrix_*` work on every device and use the instruction where this
/// says so.
#[inline(always)]
pub fn has_stmatrix() -> bool {
    imp::stmatrix()
}

/// Whether this image's device loads from global memory directly into shared memory, without
/// registers on the way (AMD CDNA, gfx908 to gfx950: `global_load_lds_dword`); a constant of
/// each image, as [`has_tma`]. [`pipeline::copy_async_warp`](super::pipeline::copy_async_warp)
/// and [`SwizzledTile::copy_async_from`](super::pipeline::SwizzledTile::copy_async_from) use
/// them where this says so.
#[inline(always)]
pub fn has_lds_dma() -> bool {
    #[cfg(all(offload_device, target_arch = "amdgpu"))]
    {
        unsafe extern "C" {
            // Defined by the device link as a constant of the image.
            #[link_name = offload_format::abi_name!(HAS_LDS_DMA)]
            fn __offload_has_lds_dma() -> bool;
        }
        // SAFETY: a constant of the image.
        unsafe { __offload_has_lds_dma() }
    }
    #[cfg(not(all(offload_device, target_arch = "amdgpu")))]
    false
}

#[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod imp {
    unsafe extern "C" {
        // Defined by the device link as constants of the image.
        #[link_name = offload_format::abi_name!(HAS_TMA)]
        fn __offload_has_tma() -> bool;
        #[link_name = offload_format::abi_name!(HAS_WGMMA)]
        fn __offload_has_wgmma() -> bool;
        #[link_name = offload_format::abi_name!(HAS_STMATRIX)]
        fn __offload_has_stmatrix() -> bool;
    }

    #[inline(always)]
    pub(super) fn tma() -> bool {
        // SAFETY: a constant of the image.
        unsafe { __offload_has_tma() }
    }

    #[inline(always)]
    pub(super) fn wgmma() -> bool {
        // SAFETY: a constant of the image.
        unsafe { __offload_has_wgmma() }
    }

    #[inline(always)]
    pub(super) fn stmatrix() -> bool {
        // SAFETY: a constant of the image.
        unsafe { __offload_has_stmatrix() }
    }
}

#[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
mod imp {
    #[inline(always)]
    pub(super) fn tma() -> bool {
        false
    }

    #[inline(always)]
    pub(super) fn wgmma() -> bool {
        false
    }

    #[inline(always)]
    pub(super) fn stmatrix() -> bool {
        false
    }
}

/// The CPU device's (and host builds') answer to a Hopper unit: the kernel stops with a panic
/// naming it, which its launch reports.
#[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
#[cold]
#[track_caller]
pub(super) fn hopper_only(feature: &str) -> ! {
    panic!(
        "{feature} needs an NVIDIA GPU of sm_90 or later (wgmma: sm_90a); this device has none \
         (branch on kernel::has_tma() / has_wgmma())"
    )
}
