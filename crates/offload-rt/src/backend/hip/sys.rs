//! Raw HIP runtime API, loaded from `libamdhip64` at run time.
//!
//! Entry points are looked up once and kept behind a `OnceLock`; a missing library or
//! symbol is an error value. Return codes are plain `c_int` (`hipError_t`).
//!
//! ABI: ROCm 6.0 or newer. Device properties are read with `hipGetDevicePropertiesR0600`
//! into [`hipDeviceProp_tR0600`], whose layout (as `hip_runtime_api.h` of ROCm 6 defines it)
//! puts `gcnArchName` at byte 1160; the struct here spells out the fields before it that the
//! runtime uses and covers the others with padding of the exact size, checked by constant
//! assertions. The safe layer cross-checks the result against `hipDeviceGetName` and
//! `hipDeviceTotalMem` before trusting it.

#![expect(
    non_snake_case,
    non_camel_case_types,
    non_upper_case_globals,
    reason = "names of the HIP runtime API"
)]

use std::ffi::{c_char, c_float, c_int, c_uint, c_void};
use std::mem::offset_of;
use std::sync::OnceLock;

pub use crate::backend::gpu::LoadError;
use crate::backend::gpu::library::{candidate_names, entry_points};

pub type hipError_t = c_int;
pub type hipDevice_t = c_int;
pub type hipDeviceptr_t = *mut c_void;
pub type hipModule_t = *mut c_void;
pub type hipFunction_t = *mut c_void;
pub type hipStream_t = *mut c_void;
pub type hipEvent_t = *mut c_void;
pub type hipGraph_t = *mut c_void;
pub type hipGraphExec_t = *mut c_void;

pub const hipSuccess: hipError_t = 0;
pub const hipLimitStackSize: c_int = 0;
pub const hipErrorOutOfMemory: hipError_t = 2;
pub const hipErrorInsufficientDriver: hipError_t = 35;
pub const hipErrorInvalidDeviceFunction: hipError_t = 98;
pub const hipErrorNoDevice: hipError_t = 100;
pub const hipErrorNotFound: hipError_t = 500;
pub const hipHostMallocPortable: c_uint = 0x1;
pub const hipHostMallocMapped: c_uint = 0x2;
pub const hipHostMallocCoherent: c_uint = 0x4000_0000;
pub const hipErrorNotReady: hipError_t = 600;
pub const hipErrorIllegalAddress: hipError_t = 700;
pub const hipErrorLaunchTimeOut: hipError_t = 702;
pub const hipErrorAssert: hipError_t = 710;
pub const hipErrorLaunchFailure: hipError_t = 719;

pub const hipDeviceAttributeClockRate: c_int = 5;
pub const hipDeviceAttributeMemoryBusWidth: c_int = 59;
pub const hipDeviceAttributeMemoryClockRate: c_int = 60;
pub const hipDeviceAttributeMultiprocessorCount: c_int = 63;
pub const hipStreamCaptureModeThreadLocal: c_int = 1;

/// Byte offset of `gcnArchName` in `hipDeviceProp_tR0600`.
pub const GCN_ARCH_NAME_OFFSET: usize = 1160;

/// `hipDeviceProp_tR0600` of ROCm 6 (1472 bytes).
#[repr(C)]
pub struct hipDeviceProp_tR0600 {
    pub name: [c_char; 256],
    pub uuid: [u8; 16],
    pub luid: [c_char; 8],
    pub luidDeviceNodeMask: c_uint,
    pub totalGlobalMem: usize,
    /// `sharedMemPerBlock` through `hipReserved[32]`.
    pub cuda_compatible_fields: [u8; GCN_ARCH_NAME_OFFSET - 296],
    pub gcnArchName: [c_char; 256],
    pub maxSharedMemoryPerMultiProcessor: usize,
    pub clockInstructionRate: c_int,
    pub arch: c_uint,
    pub hdpMemFlushCntl: *mut c_uint,
    pub hdpRegFlushCntl: *mut c_uint,
    pub cooperativeMultiDeviceUnmatched: [c_int; 4],
    pub isLargeBar: c_int,
    pub asicRevision: c_int,
}

const _: () = {
    assert!(offset_of!(hipDeviceProp_tR0600, totalGlobalMem) == 288);
    assert!(offset_of!(hipDeviceProp_tR0600, gcnArchName) == GCN_ARCH_NAME_OFFSET);
    assert!(offset_of!(hipDeviceProp_tR0600, maxSharedMemoryPerMultiProcessor) == 1416);
    assert!(offset_of!(hipDeviceProp_tR0600, asicRevision) == 1468);
    assert!(size_of::<hipDeviceProp_tR0600>() == 1472);
};

impl std::fmt::Debug for hipDeviceProp_tR0600 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("hipDeviceProp_tR0600")
            .field("name", &super::c_chars(&self.name))
            .field("totalGlobalMem", &self.totalGlobalMem)
            .field("gcnArchName", &super::c_chars(&self.gcnArchName))
            .finish_non_exhaustive()
    }
}

/// The library names tried, in order.
pub const LIBRARY_NAMES: &[&str] = &[
    "libamdhip64.so",
    "libamdhip64.so.7",
    "libamdhip64.so.6",
    "/opt/rocm/lib/libamdhip64.so",
];

entry_points! {
    /// The HIP entry points this runtime uses, loaded from `libamdhip64`; the HIP
    /// `Driver`.
    HipApi {
    hipInit: fn(c_uint) -> hipError_t;
    hipDriverGetVersion: fn(*mut c_int) -> hipError_t;
    hipGetErrorName: fn(hipError_t) -> *const c_char;
    hipGetErrorString: fn(hipError_t) -> *const c_char;
    hipGetDeviceCount: fn(*mut c_int) -> hipError_t;
    hipDeviceGet: fn(*mut hipDevice_t, c_int) -> hipError_t;
    hipDeviceGetName: fn(*mut c_char, c_int, hipDevice_t) -> hipError_t;
    hipDeviceGetAttribute: fn(*mut c_int, c_int, c_int) -> hipError_t;
    hipDeviceTotalMem: fn(*mut usize, hipDevice_t) -> hipError_t;
    hipGetDevicePropertiesR0600: fn(*mut hipDeviceProp_tR0600, c_int) -> hipError_t;
    hipSetDevice: fn(c_int) -> hipError_t;
    hipGetDevice: fn(*mut c_int) -> hipError_t;
    hipDeviceSynchronize: fn() -> hipError_t;
    hipMalloc: fn(*mut *mut c_void, usize) -> hipError_t;
    hipFree: fn(*mut c_void) -> hipError_t;
    hipMemGetInfo: fn(*mut usize, *mut usize) -> hipError_t;
    hipMemset: fn(*mut c_void, c_int, usize) -> hipError_t;
    hipMemcpyHtoD: fn(hipDeviceptr_t, *mut c_void, usize) -> hipError_t;
    hipMemcpyDtoH: fn(*mut c_void, hipDeviceptr_t, usize) -> hipError_t;
    hipMemcpyDtoD: fn(hipDeviceptr_t, hipDeviceptr_t, usize) -> hipError_t;
    hipModuleLoadData: fn(*mut hipModule_t, *const c_void) -> hipError_t;
    hipModuleGetFunction: fn(*mut hipFunction_t, hipModule_t, *const c_char) -> hipError_t;
    hipModuleUnload: fn(hipModule_t) -> hipError_t;
    hipModuleLaunchKernel: fn(hipFunction_t, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, hipStream_t, *mut *mut c_void, *mut *mut c_void) -> hipError_t;
    hipStreamCreate: fn(*mut hipStream_t) -> hipError_t;
    hipStreamDestroy: fn(hipStream_t) -> hipError_t;
    hipStreamSynchronize: fn(hipStream_t) -> hipError_t;
    hipStreamWaitEvent: fn(hipStream_t, hipEvent_t, c_uint) -> hipError_t;
    hipEventCreate: fn(*mut hipEvent_t) -> hipError_t;
    hipEventDestroy: fn(hipEvent_t) -> hipError_t;
    hipEventRecord: fn(hipEvent_t, hipStream_t) -> hipError_t;
    hipEventSynchronize: fn(hipEvent_t) -> hipError_t;
    hipEventQuery: fn(hipEvent_t) -> hipError_t;
    hipEventElapsedTime: fn(*mut c_float, hipEvent_t, hipEvent_t) -> hipError_t;
    hipMemcpyHtoDAsync: fn(hipDeviceptr_t, *mut c_void, usize, hipStream_t) -> hipError_t;
    hipMemcpyDtoHAsync: fn(*mut c_void, hipDeviceptr_t, usize, hipStream_t) -> hipError_t;
    hipMemcpyDtoDAsync: fn(hipDeviceptr_t, hipDeviceptr_t, usize, hipStream_t) -> hipError_t;
    hipMemsetD8Async: fn(hipDeviceptr_t, u8, usize, hipStream_t) -> hipError_t;
    hipHostMalloc: fn(*mut *mut c_void, usize, c_uint) -> hipError_t;
    hipHostFree: fn(*mut c_void) -> hipError_t;
    hipStreamBeginCapture: fn(hipStream_t, c_int) -> hipError_t;
    hipStreamEndCapture: fn(hipStream_t, *mut hipGraph_t) -> hipError_t;
    hipGraphInstantiateWithFlags: fn(*mut hipGraphExec_t, hipGraph_t, u64) -> hipError_t;
    hipGraphLaunch: fn(hipGraphExec_t, hipStream_t) -> hipError_t;
    hipGraphDestroy: fn(hipGraph_t) -> hipError_t;
    hipGraphExecDestroy: fn(hipGraphExec_t) -> hipError_t;
    hipMemcpyPeerAsync: fn(*mut c_void, c_int, *const c_void, c_int, usize, hipStream_t) -> hipError_t;
    @optional
    // Device prints and panic reports (a fake driver may lack them).
    hipHostGetDevicePointer: fn(*mut *mut c_void, *mut c_void, c_uint) -> hipError_t;
    hipModuleGetGlobal: fn(*mut hipDeviceptr_t, *mut usize, hipModule_t, *const c_char) -> hipError_t;
    hipGraphExecUpdate: fn(hipGraphExec_t, hipGraph_t, *mut *mut c_void, *mut c_int) -> hipError_t;
    // Cooperative launches (ROCm 6 and newer; a fake runtime may lack them).
    hipModuleLaunchCooperativeKernel: fn(hipFunction_t, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, hipStream_t, *mut *mut c_void) -> hipError_t;
    hipModuleOccupancyMaxActiveBlocksPerMultiprocessor: fn(*mut c_int, hipFunction_t, c_int, usize) -> hipError_t;
    // The runtime's choice of block size for a module's function
    // (`hipOccupancyMaxPotentialBlockSize` takes a host kernel stub); a fake runtime may lack it.
    hipModuleOccupancyMaxPotentialBlockSize: fn(*mut c_int, *mut c_int, hipFunction_t, usize, c_int) -> hipError_t;
    // A fake runtime may lack it.
    hipDeviceSetLimit: fn(c_int, usize) -> hipError_t;
    // Recovery after a fault (a fake runtime may lack it).
    hipDeviceReset: fn() -> hipError_t;
    }
}

/// The process-wide HIP table, loaded on first use.
///
/// # Errors
/// The [`LoadError`] of the first (and only) load attempt.
pub fn api() -> Result<&'static HipApi, LoadError> {
    static API: OnceLock<Result<HipApi, LoadError>> = OnceLock::new();
    API.get_or_init(|| HipApi::load(&candidate_names("OFFLOAD_HIP_LIBRARY", LIBRARY_NAMES)))
        .as_ref()
        .map_err(Clone::clone)
}
