//! The GPU driver layer, written once for every driver.
//!
//! - [`driver`]: the [`Driver`] trait, the raw calls a GPU driver provides (CUDA's in
//!   `backend::cuda`, HIP's in `backend::hip`, each one file over its entry points);
//! - [`library`]: the one loader of driver libraries (`dlopen` at run time);
//! - [`image`]: the one check of device images before a driver reads them;
//! - the RAII types over a driver ([`GpuDevice`], [`GpuBuffer`], [`GpuModule`],
//!   [`GpuFunction`], [`GpuEvent`], [`GpuStream`], [`GpuGraph`], [`PinnedBytes`]);
//! - [`GpuBackend`]: a GPU as the runtime's [`Backend`](crate::backend::Backend).
//!
//! Only this layer and the driver files call a GPU driver.

mod backend;
mod device;
pub mod driver;
mod error;
pub mod image;
pub mod library;

pub(crate) use backend::log;
pub use backend::{GpuBackend, open_backend, to_error};
pub use device::{
    GpuBuffer, GpuDevice, GpuEvent, GpuFunction, GpuGraph, GpuModule, GpuStream, PinnedBytes,
};
pub use driver::{DeviceInfo, Driver, Handle};
pub use error::{Api, GpuError, GpuImageKind};
pub use library::LoadError;

/// Loads driver `D`, initializes it and describes every device; an error says why it cannot
/// be used here.
///
/// # Errors
/// [`GpuError::Unavailable`], [`GpuError::NoDevice`], [`GpuError::NoDevices`] or a driver
/// failure.
pub fn probe<D: Driver>() -> Result<Vec<D::Info>, GpuError> {
    let driver = D::get()?;
    let count = driver.device_count()?;
    if count == 0 {
        return Err(GpuError::NoDevices { api: D::API });
    }
    (0..count).map(|i| driver.device_info(i)).collect()
}
