//! Backends: what a device kind must provide to run kernels.
//!
//! [`crate::Device`] holds one `Box<dyn Backend>`. The CPU backend lives in [`cpu`]; every GPU
//! is [`gpu::GpuBackend`] over a [`gpu::Driver`]: CUDA's in [`cuda`], HIP's in [`hip`] (each
//! driver loaded at run time); [`native_archs`] asks both for this machine's GPUs. Image
//! selection for GPU backends (which registered image fits the device) is in `crate::select`.
//!
//! Ordering: launches on one backend may be asynchronous, but every operation of a backend
//! is ordered after the operations issued before it on the same backend (one stream):
//! `copy_to_host` sees the results of earlier launches and `free` waits for launches that
//! may still use the memory.

use crate::error::Result;

pub(crate) mod cpu;
pub mod cuda;
pub(crate) mod gpu;
pub mod hip;
pub mod image;
mod interface;
mod native;
mod stack_size;

pub use interface::{
    Backend, BackendEvent, BackendGraph, BackendStream, DeviceKind, DevicePeaks, DevicePtr,
    HostMemory, KernelHandle, Module, RawDevice,
};
pub use native::{NativeArchs, native_archs};
pub(crate) use stack_size::kernel_stack;

/// Why no device of GPU kind `kind` can be present, judged from the device nodes its driver
/// needs, without loading the driver; `None` where one may be (and for the CPU).
pub(crate) fn missing_device_nodes(kind: DeviceKind) -> Option<String> {
    match kind {
        DeviceKind::Cuda => <cuda::Cuda as gpu::Driver>::missing_device_nodes(),
        DeviceKind::Hip => <hip::Hip as gpu::Driver>::missing_device_nodes(),
        DeviceKind::Cpu => None,
    }
}

/// Opens GPU `ordinal` of `kind` (CUDA or HIP).
pub(crate) fn open_gpu(kind: DeviceKind, ordinal: usize) -> Result<Box<dyn Backend>> {
    match kind {
        DeviceKind::Cuda => gpu::open_backend::<cuda::Cuda>(ordinal),
        DeviceKind::Hip => gpu::open_backend::<hip::Hip>(ordinal),
        DeviceKind::Cpu => Err(crate::error::Error::BackendUnavailable {
            backend: kind.name(),
            reason: format!("device {ordinal}: the CPU is not a GPU backend"),
        }),
    }
}
