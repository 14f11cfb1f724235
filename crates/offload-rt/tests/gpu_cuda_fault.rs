//! A kernel fault on a real GPU (`OFFLOAD_GPU_TESTS=1`) is a typed error with the driver's
//! message, not an abort. In a test binary of its own: a fault leaves the process's CUDA
//! context unusable.

mod gpu_common;

use std::ffi::c_void;

use gpu_common::*;
use offload_rt::__internal::LaunchArgs;
use offload_rt::__internal::cuda::{CudaDevice, CudaError, CudaImageKind, sys};
use offload_rt::LaunchConfig;

#[test]
fn gpu_kernel_fault_is_a_typed_error() {
    if !gpu_tests_enabled("gpu_kernel_fault_is_a_typed_error") {
        return;
    }
    let dev = CudaDevice::open(0).unwrap_or_else(|e| panic!("OFFLOAD_GPU_TESTS=1 but: {e}"));
    let module = dev.load_module(PTX_SM70, CudaImageKind::Ptx).unwrap();
    let store = module.function("store").unwrap();
    // An address no allocation has: the store faults.
    let (mut p, mut v) = (0x10u64, 7i32);
    let params: [*mut c_void; 2] = [(&raw mut p).cast(), (&raw mut v).cast()];
    // SAFETY: store(int*, int); the pointer is bad on purpose, which faults on the device
    // and cannot touch host memory.
    unsafe {
        dev.launch(
            &store,
            &LaunchArgs::new(
                "store",
                LaunchConfig {
                    grid: (1, 1, 1),
                    block: (1, 1, 1),
                    shared_mem_bytes: 0,
                    cluster: (1, 1, 1),
                },
                &params,
            ),
        )
    }
    .unwrap();
    match dev.synchronize() {
        Err(CudaError::KernelFault {
            code,
            name,
            message,
            ..
        }) => {
            assert_eq!(code, sys::CUDA_ERROR_ILLEGAL_ADDRESS, "{name}: {message}");
            assert!(!message.is_empty());
        }
        other => panic!("expected KernelFault, got {other:?}"),
    }
    // Later calls keep reporting it, still as errors.
    assert!(dev.synchronize().is_err());
}
