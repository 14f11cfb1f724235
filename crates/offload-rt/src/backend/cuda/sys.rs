//! Raw CUDA driver API, loaded from `libcuda` at run time.
//!
//! Every entry point is looked up once, when the library is first needed, and kept in a
//! table behind a `OnceLock`: a missing library or symbol is an error value, never a panic,
//! and nothing links against CUDA, so a binary starts on a machine without it.
//!
//! Return codes are plain `c_int` (`CUresult`), not a Rust enum: a newer driver may return
//! codes this table does not know, and an unknown value in a Rust enum would be undefined
//! behaviour.
//!
//! The symbol names are the ABI versions `cuda.h` (CUDA 11 and newer) maps its API names to
//! (`cuMemAlloc` is `cuMemAlloc_v2`, ...), without per-thread default stream.

#![expect(
    non_snake_case,
    non_camel_case_types,
    reason = "names of the CUDA driver API"
)]

use std::ffi::{c_char, c_float, c_int, c_uint, c_void};
use std::sync::OnceLock;

pub use crate::backend::gpu::LoadError;
use crate::backend::gpu::library::{candidate_names, entry_points};

pub type CUresult = c_int;
pub type CUdevice = c_int;
pub type CUdeviceptr = u64;
pub type CUcontext = *mut c_void;
pub type CUmodule = *mut c_void;
pub type CUfunction = *mut c_void;
pub type CUstream = *mut c_void;
pub type CUevent = *mut c_void;
pub type CUjit_option = c_int;
pub type CUgraph = *mut c_void;
pub type CUgraphExec = *mut c_void;
/// `CUoccupancyB2DSize`: dynamic shared memory for a block size.
pub type CUoccupancyB2DSize = unsafe extern "C" fn(c_int) -> usize;

/// `CUgraphExecUpdateResultInfo` (CUDA 12).
#[derive(Debug)]
#[repr(C)]
pub struct CUgraphExecUpdateResultInfo {
    pub result: c_int,
    pub errorNode: *mut c_void,
    pub errorFromNode: *mut c_void,
}

/// `CUlaunchAttribute`: an attribute id padded to 8 bytes, then a 64-byte value union (aligned
/// to 8: it holds pointers).
#[derive(Debug, Clone, Copy)]
#[repr(C, align(8))]
pub struct CUlaunchAttribute {
    pub id: c_int,
    pub pad: [u8; 4],
    pub value: [u32; 16],
}

/// `CUlaunchConfig` (CUDA 12.0): a launch's shape, stream and attributes.
#[derive(Debug)]
#[repr(C)]
pub struct CUlaunchConfig {
    pub gridDimX: c_uint,
    pub gridDimY: c_uint,
    pub gridDimZ: c_uint,
    pub blockDimX: c_uint,
    pub blockDimY: c_uint,
    pub blockDimZ: c_uint,
    pub sharedMemBytes: c_uint,
    pub hStream: CUstream,
    pub attrs: *mut CUlaunchAttribute,
    pub numAttrs: c_uint,
}

/// `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`: the value's first three words are the cluster's
/// blocks in x, y and z.
pub const CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: c_int = 4;
/// `CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED`: clusters of more than 8 blocks.
pub const CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: c_int = 14;

pub const CUDA_SUCCESS: CUresult = 0;
pub const CUDA_ERROR_OUT_OF_MEMORY: CUresult = 2;
pub const CUDA_ERROR_STUB_LIBRARY: CUresult = 34;
pub const CUDA_ERROR_DEVICE_UNAVAILABLE: CUresult = 46;
pub const CUDA_ERROR_NO_DEVICE: CUresult = 100;
pub const CUDA_ERROR_INVALID_IMAGE: CUresult = 200;
pub const CUDA_ERROR_NO_BINARY_FOR_GPU: CUresult = 209;
pub const CUDA_ERROR_INVALID_PTX: CUresult = 218;
pub const CUDA_ERROR_UNSUPPORTED_PTX_VERSION: CUresult = 222;
pub const CUDA_ERROR_NOT_FOUND: CUresult = 500;
pub const CU_MEMHOSTALLOC_PORTABLE: c_uint = 0x01;
pub const CU_MEMHOSTALLOC_DEVICEMAP: c_uint = 0x02;
pub const CUDA_ERROR_ILLEGAL_ADDRESS: CUresult = 700;
pub const CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: CUresult = 701;
pub const CUDA_ERROR_LAUNCH_TIMEOUT: CUresult = 702;
pub const CUDA_ERROR_ASSERT: CUresult = 710;
pub const CUDA_ERROR_HARDWARE_STACK_ERROR: CUresult = 714;
pub const CUDA_ERROR_LAUNCH_FAILED: CUresult = 719;
pub const CUDA_ERROR_SYSTEM_NOT_READY: CUresult = 802;
pub const CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: CUresult = 803;
pub const CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: CUresult = 804;

pub const CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: c_int = 16;
pub const CU_DEVICE_ATTRIBUTE_CLOCK_RATE: c_int = 13;
pub const CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: c_int = 36;
pub const CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: c_int = 37;
pub const CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: c_int = 97;
pub const CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: c_int = 1;
pub const CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: c_int = 8;
pub const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
pub const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: c_int = 76;

pub const CU_JIT_ERROR_LOG_BUFFER: CUjit_option = 5;
pub const CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: CUjit_option = 6;

pub const CU_LIMIT_STACK_SIZE: c_int = 0;

pub const CU_STREAM_DEFAULT: c_uint = 0;
pub const CU_EVENT_DEFAULT: c_uint = 0;
pub const CU_STREAM_NON_BLOCKING: c_uint = 1;
pub const CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: c_int = 1;
pub const CUDA_ERROR_NOT_READY: CUresult = 600;

/// The library names tried, in order.
pub const LIBRARY_NAMES: &[&str] = &["libcuda.so.1", "libcuda.so"];

entry_points! {
    /// The CUDA driver entry points this runtime uses, loaded from `libcuda`; the CUDA
    /// `Driver`.
    DriverApi {
    cuInit: fn(c_uint) -> CUresult;
    cuDriverGetVersion: fn(*mut c_int) -> CUresult;
    cuGetErrorString: fn(CUresult, *mut *const c_char) -> CUresult;
    cuGetErrorName: fn(CUresult, *mut *const c_char) -> CUresult;
    cuDeviceGetCount: fn(*mut c_int) -> CUresult;
    cuDeviceGet: fn(*mut CUdevice, c_int) -> CUresult;
    cuDeviceGetName: fn(*mut c_char, c_int, CUdevice) -> CUresult;
    cuDeviceGetAttribute: fn(*mut c_int, c_int, CUdevice) -> CUresult;
    cuDeviceTotalMem_v2: fn(*mut usize, CUdevice) -> CUresult;
    cuDevicePrimaryCtxRetain: fn(*mut CUcontext, CUdevice) -> CUresult;
    cuDevicePrimaryCtxRelease_v2: fn(CUdevice) -> CUresult;
    cuCtxSetCurrent: fn(CUcontext) -> CUresult;
    cuCtxGetCurrent: fn(*mut CUcontext) -> CUresult;
    cuCtxSynchronize: fn() -> CUresult;
    cuStreamCreate: fn(*mut CUstream, c_uint) -> CUresult;
    cuStreamSynchronize: fn(CUstream) -> CUresult;
    cuStreamDestroy_v2: fn(CUstream) -> CUresult;
    cuMemAlloc_v2: fn(*mut CUdeviceptr, usize) -> CUresult;
    cuMemFree_v2: fn(CUdeviceptr) -> CUresult;
    cuMemGetInfo_v2: fn(*mut usize, *mut usize) -> CUresult;
    cuMemcpyHtoDAsync_v2: fn(CUdeviceptr, *const c_void, usize, CUstream) -> CUresult;
    cuMemcpyDtoHAsync_v2: fn(*mut c_void, CUdeviceptr, usize, CUstream) -> CUresult;
    cuMemcpyDtoDAsync_v2: fn(CUdeviceptr, CUdeviceptr, usize, CUstream) -> CUresult;
    cuMemsetD8Async: fn(CUdeviceptr, u8, usize, CUstream) -> CUresult;
    cuModuleLoadDataEx: fn(*mut CUmodule, *const c_void, c_uint, *mut CUjit_option, *mut *mut c_void) -> CUresult;
    cuModuleGetFunction: fn(*mut CUfunction, CUmodule, *const c_char) -> CUresult;
    cuModuleUnload: fn(CUmodule) -> CUresult;
    cuFuncGetAttribute: fn(*mut c_int, c_int, CUfunction) -> CUresult;
    cuFuncSetAttribute: fn(CUfunction, c_int, c_int) -> CUresult;
    cuLaunchKernel: fn(CUfunction, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, CUstream, *mut *mut c_void, *mut *mut c_void) -> CUresult;
    cuEventCreate: fn(*mut CUevent, c_uint) -> CUresult;
    cuEventRecord: fn(CUevent, CUstream) -> CUresult;
    cuEventSynchronize: fn(CUevent) -> CUresult;
    cuEventElapsedTime: fn(*mut c_float, CUevent, CUevent) -> CUresult;
    cuEventDestroy_v2: fn(CUevent) -> CUresult;
    cuStreamWaitEvent: fn(CUstream, CUevent, c_uint) -> CUresult;
    cuEventQuery: fn(CUevent) -> CUresult;
    cuMemHostAlloc: fn(*mut *mut c_void, usize, c_uint) -> CUresult;
    cuMemFreeHost: fn(*mut c_void) -> CUresult;
    cuStreamBeginCapture_v2: fn(CUstream, c_int) -> CUresult;
    cuStreamEndCapture: fn(CUstream, *mut CUgraph) -> CUresult;
    cuGraphInstantiateWithFlags: fn(*mut CUgraphExec, CUgraph, u64) -> CUresult;
    cuGraphLaunch: fn(CUgraphExec, CUstream) -> CUresult;
    cuGraphDestroy: fn(CUgraph) -> CUresult;
    cuGraphExecDestroy: fn(CUgraphExec) -> CUresult;
    cuMemcpyPeerAsync: fn(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, usize, CUstream) -> CUresult;
    @optional
    // Device prints and panic reports (a fake driver may lack them).
    cuMemHostGetDevicePointer_v2: fn(*mut CUdeviceptr, *mut c_void, c_uint) -> CUresult;
    cuModuleGetGlobal_v2: fn(*mut CUdeviceptr, *mut usize, CUmodule, *const c_char) -> CUresult;
    // A fake driver may lack it.
    cuCtxSetLimit: fn(c_int, usize) -> CUresult;
    // Cooperative launches (a fake driver may lack them).
    cuLaunchCooperativeKernel: fn(CUfunction, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, CUstream, *mut *mut c_void) -> CUresult;
    cuOccupancyMaxActiveBlocksPerMultiprocessor: fn(*mut c_int, CUfunction, c_int, usize) -> CUresult;
    // The driver's choice of block size (a fake driver may lack it).
    cuOccupancyMaxPotentialBlockSize: fn(*mut c_int, *mut c_int, CUfunction, Option<CUoccupancyB2DSize>, usize, c_int) -> CUresult;
    // CUDA 12 and newer.
    cuGraphExecUpdate_v2: fn(CUgraphExec, CUgraph, *mut CUgraphExecUpdateResultInfo) -> CUresult;
    // Recovery after a fault (a fake driver may lack it).
    cuDevicePrimaryCtxReset_v2: fn(CUdevice) -> CUresult;
    // Launches with attributes: thread-block clusters (CUDA 12.0 and later).
    cuLaunchKernelEx: fn(*const CUlaunchConfig, CUfunction, *mut *mut c_void, *mut *mut c_void) -> CUresult;
    // Tensor maps of the tensor memory accelerator (CUDA 12.0 and later).
    cuTensorMapEncodeTiled: fn(*mut c_void, c_int, c_uint, *mut c_void, *const u64, *const u64, *const c_uint, *const c_uint, c_int, c_int, c_int, c_int) -> CUresult;
    }
}

/// The process-wide driver table, loaded on first use.
///
/// # Errors
/// The [`LoadError`] of the first (and only) load attempt.
pub fn api() -> Result<&'static DriverApi, LoadError> {
    static API: OnceLock<Result<DriverApi, LoadError>> = OnceLock::new();
    API.get_or_init(|| DriverApi::load(&candidate_names("OFFLOAD_CUDA_LIBRARY", LIBRARY_NAMES)))
        .as_ref()
        .map_err(Clone::clone)
}
