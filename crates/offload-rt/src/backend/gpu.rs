//! The GPU driver layer, written once for every driver.
//!
//! - [`driver`]: the [`Driver`] trait, the raw calls a GPU driver provides (CUDA's in
//!   `backend::cuda`, HIP's in `backend::hip`, each one file over its entry points);
//! - [`library`]: the one loader of driver libraries (`dlopen` at run time);
//! - [`image`](crate::backend::image) (beside this layer, shared with the CPU device): the one
//!   check of device images before a driver reads them;
//! - the RAII types over a driver ([`GpuDevice`], [`GpuBuffer`], [`GpuModule`],
//!   [`GpuFunction`], [`GpuEvent`], [`GpuStream`], [`GpuGraph`], [`PinnedBytes`]);
//! - `channel`: the mapped host memory through which kernels report panics and send prints;
//! - [`GpuBackend`]: a GPU as the runtime's [`Backend`](crate::backend::Backend).
//!
//! Only this layer and the driver files call a GPU driver.

mod backend;
mod channel;
mod device;
pub(crate) mod driver;
mod error;
pub(crate) mod library;
mod logging;

pub(crate) use backend::{GpuBackend, open_backend};
pub(crate) use device::{
    GpuBuffer, GpuDevice, GpuEvent, GpuFunction, GpuGraph, GpuModule, GpuStream, PinnedBytes,
};
pub(crate) use driver::{DeviceInfo, Driver, Handle};
pub(crate) use error::{Api, GpuError, GpuImageKind};
pub use library::LoadError;
pub(crate) use logging::log;

/// Loads driver `D`, initializes it and describes every device; an error says why it cannot
/// be used here.
///
/// # Errors
/// [`GpuError::Unavailable`], [`GpuError::NoDevice`], [`GpuError::NoDevices`] or a driver
/// failure.
pub(crate) fn probe<D: Driver>() -> Result<Vec<D::Info>, GpuError> {
    let driver = D::get()?;
    let count = driver.device_count()?;
    if count == 0 {
        return Err(GpuError::NoDevices { api: D::API });
    }
    (0..count).map(|i| driver.device_info(i)).collect()
}

/// Declares the names the rest of the runtime (and users) know a driver's types by:
/// `CudaDevice` is `GpuDevice<Cuda>`, and so on.
macro_rules! driver_names {
    ($driver:ty, $api:literal, $device:ident, $buffer:ident, $module:ident, $function:ident,
     $event:ident, $stream:ident, $backend:ident, $error:ident, $kind:ident) => {
        #[doc = concat!("An opened ", $api, " device.")]
        pub type $device = $crate::backend::gpu::GpuDevice<$driver>;
        #[doc = concat!($api, " device memory.")]
        pub type $buffer = $crate::backend::gpu::GpuBuffer<$driver>;
        #[doc = concat!("A loaded ", $api, " module.")]
        pub type $module = $crate::backend::gpu::GpuModule<$driver>;
        #[doc = concat!("A kernel of a ", $api, " module.")]
        pub type $function = $crate::backend::gpu::GpuFunction<$driver>;
        #[doc = concat!("A ", $api, " event.")]
        pub type $event = $crate::backend::gpu::GpuEvent<$driver>;
        #[doc = concat!("A ", $api, " stream.")]
        pub type $stream = $crate::backend::gpu::GpuStream<$driver>;
        #[doc = concat!("A ", $api, " device as the runtime's backend.")]
        pub type $backend = $crate::backend::gpu::GpuBackend<$driver>;
        #[doc = concat!("What can go wrong with ", $api, ".")]
        pub type $error = $crate::backend::gpu::GpuError;
        #[doc = concat!("The kinds of image the ", $api, " driver loads.")]
        pub type $kind = $crate::backend::gpu::GpuImageKind;
    };
}
pub(crate) use driver_names;
