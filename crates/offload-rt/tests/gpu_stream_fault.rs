//! A kernel fault on a GPU stream (`OFFLOAD_GPU_TESTS=1`): the stream's `synchronize` returns
//! the typed fault naming the kernel, the device reports itself lost afterwards (the CUDA
//! fault is sticky) with a typed error, never an unrelated code, and `Device::reset` makes it
//! usable again. In a test binary of its own: a fault resets the process's CUDA context.

mod gpu_common;

use gpu_common::*;
use offload_rt::__internal::cuda::CudaBackend;
use offload_rt::{Device, DeviceBuffer, Error};

#[test]
fn gpu_stream_fault_is_typed_and_sticky() {
    if !gpu_tests_enabled("gpu_stream_fault_is_typed_and_sticky") {
        return;
    }
    register_fixtures();
    let gpu = Device::from_backend(Box::new(CudaBackend::open(0).unwrap()));
    let stream = gpu.stream().unwrap();
    // An address no allocation has: the store faults.
    // SAFETY: an address no allocation has, on purpose.
    unsafe { launch_store(stream.device(), 0x10, 7) }.unwrap();
    let fault = |e: Error| match e {
        Error::KernelFault { kernel, device, .. } => {
            assert!(device.starts_with("cuda:0"), "{device}");
            kernel
        }
        other => panic!("expected a kernel fault, got {other:?}"),
    };
    assert_eq!(
        fault(stream.synchronize().unwrap_err()).as_deref(),
        Some("gpu_fixtures::store")
    );
    // Sticky: later work on the device reports it lost.
    let lost = |e: Error| assert!(matches!(e, Error::DeviceLost { .. }), "{e:?}");
    lost(gpu.synchronize().unwrap_err());
    lost(DeviceBuffer::<u32>::zeroed(&gpu, 4).unwrap_err());
    lost(stream.synchronize().unwrap_err());
    // A reset makes it usable: the same store into a buffer of the new context is right.
    let reset = std::time::Instant::now();
    gpu.reset().unwrap();
    let buffer = DeviceBuffer::<i32>::zeroed(&gpu, 1).unwrap();
    let address = buffer.device_ptr_on(&gpu, "store", 0).unwrap().0;
    // SAFETY: the buffer's one `i32`, alive until the copy below.
    unsafe { launch_store(&gpu, address, 42) }.unwrap();
    gpu.synchronize().unwrap();
    let first_launch = reset.elapsed();
    assert_eq!(buffer.to_vec().unwrap(), [42]);
    println!("reset to the first completed launch: {first_launch:?}");
    lost(stream.synchronize().unwrap_err());
}
