//! The CUDA driver, over the CUDA driver API loaded from `libcuda` at run time: the
//! `Driver` implementation for [`sys::DriverApi`], the device description, and the names
//! the rest of the runtime uses (`CudaDevice` is the generic `GpuDevice` over it, ...).
//!
//! The driver table is written here rather than taken from cudarc because cudarc's dynamic
//! loading panics when `libcuda` or one of its symbols is missing, and its bindings return
//! `CUresult` as a Rust enum, which is undefined behaviour for any code a newer driver adds.
//! Here both are plain errors.
//!
//! Each device uses its primary context and a stream of its own for its default work.
//!
//! `OFFLOAD_CUDA_LIBRARY` names the driver library to open instead of `libcuda.so.1`;
//! with `OFFLOAD_LOG=1`, why a device is not used and which image is loaded go to stderr.

#[allow(
    missing_docs,
    reason = "raw driver bindings: the names mirror cuda.h, documented there"
)]
pub mod sys;

use std::borrow::Cow;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr;

use sys::{CUdevice, CUresult, DriverApi};

use crate::backend::gpu::driver::{
    CooperativeLaunchFn, OccupancyFn, PeerEnd, block_size, c_chars, c_ordinal, forward_calls,
    initialized, static_c_str,
};
use crate::backend::gpu::driver_names;
use crate::backend::gpu::{self, DeviceInfo, Driver, GpuError, GpuImageKind, Handle};
use crate::backend::interface::GpuClocks;
use crate::backend::{DeviceKind, DevicePeaks};
use crate::launch::LaunchArgs;
use crate::select::DeviceTarget;

pub use crate::backend::image::{check_cubin, check_fatbin, ptx_with_nul};

/// The CUDA driver.
pub type Cuda = DriverApi;
driver_names!(
    Cuda,
    "CUDA",
    CudaDevice,
    CudaBuffer,
    CudaModule,
    CudaFunction,
    CudaEvent,
    CudaStream,
    CudaBackend,
    CudaError,
    CudaImageKind
);

/// What the driver says about one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaDeviceInfo {
    /// The ordinal (`cuda:N`).
    pub ordinal: usize,
    /// The marketing name.
    pub name: String,
    /// Compute capability (major, minor): `sm_90` is (9, 0).
    pub compute_capability: (u32, u32),
    /// Total device memory in bytes.
    pub total_memory: usize,
    /// Number of streaming multiprocessors.
    pub multiprocessors: u32,
    /// The driver's CUDA version (major, minor).
    pub driver_version: (u32, u32),
    /// Shared memory a block can use once a kernel opts in (attribute 97), in bytes.
    pub max_shared_per_block_optin: u32,
    /// The SMs' peak clock, in kHz (attribute 13; 0 where the driver does not say).
    pub clock_khz: u32,
    /// The memory's peak clock, in kHz (attribute 36; 0 where the driver does not say).
    pub memory_clock_khz: u32,
    /// The memory bus, in bits (attribute 37; 0 where the driver does not say).
    pub memory_bus_bits: u32,
    device: CUdevice,
}

impl CudaDeviceInfo {
    /// The device's peak figures from its attributes, where they are known: FP32 FLOP/s
    /// (SMs × FP32 lanes per SM of its compute capability × 2 for the fused multiply-add ×
    /// the SM clock) and memory bandwidth (the memory clock × 2 for the double data rate ×
    /// the bus width). An H100 SXM (132 SMs at 1.98 GHz, 2.62 GHz over 5120 bits) gives
    /// 66.9 TFLOP/s and 3.35 TB/s, its data sheet's figures.
    pub fn peaks(&self) -> Option<DevicePeaks> {
        let lanes: u64 = match self.compute_capability {
            (7, _) | (8, 0) => 64,
            (8, _) | (9, _) | (10, _) | (11, _) | (12, _) => 128,
            _ => return None,
        };
        let clocks = GpuClocks {
            units: self.multiprocessors,
            unit_name: "SMs",
            lanes,
            clock_khz: self.clock_khz,
            memory_clock_khz: self.memory_clock_khz,
            memory_bus_bits: self.memory_bus_bits,
        };
        let device = format!("{} ({}): FP32", self.name, self.arch());
        DevicePeaks::from_clocks(&device, &clocks, "the driver's attributes")
    }

    /// The device's architecture name, e.g. `sm_90`.
    pub fn arch(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }
}

impl DeviceInfo for CudaDeviceInfo {
    fn ordinal(&self) -> usize {
        self.ordinal
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn arch(&self) -> String {
        CudaDeviceInfo::arch(self)
    }

    fn target(&self) -> DeviceTarget<'_> {
        DeviceTarget::Cuda {
            major: self.compute_capability.0,
            minor: self.compute_capability.1,
        }
    }
}

/// Dynamic shared memory a launch may ask for without opting in (`cuda.h`: above it,
/// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` must be raised first).
pub const DEFAULT_DYNAMIC_SHARED_BYTES: u32 = 48 * 1024;

/// What a launch with `dynamic` bytes of dynamic shared memory needs of a kernel with
/// `static_bytes` of static shared memory on a device whose opt-in maximum is `optin`:
/// nothing (`Ok(None)`), the kernel's maximum dynamic size raised to `dynamic` first
/// (`Ok(Some(dynamic))`), or a refusal naming the limit.
///
/// # Errors
/// The reason, when `static_bytes + dynamic` exceeds what the device gives a block.
pub fn dynamic_shared_opt_in(
    dynamic: u32,
    static_bytes: u32,
    optin: u32,
) -> Result<Option<u32>, String> {
    let limit = optin.max(DEFAULT_DYNAMIC_SHARED_BYTES);
    if u64::from(dynamic) + u64::from(static_bytes) > u64::from(limit) {
        return Err(format!(
            "{dynamic} bytes of dynamic shared memory and {static_bytes} of static shared \
             memory exceed the {limit} bytes this device gives a block"
        ));
    }
    Ok((dynamic > DEFAULT_DYNAMIC_SHARED_BYTES).then_some(dynamic))
}

/// Loads CUDA, initializes it and describes every device; an error says why it cannot be
/// used here.
///
/// # Errors
/// `GpuError::Unavailable`, `GpuError::NoDevice`, `GpuError::NoDevices` or a driver
/// failure.
pub fn probe() -> Result<Vec<CudaDeviceInfo>, GpuError> {
    gpu::probe::<Cuda>()
}

fn c_message(
    f: unsafe extern "C" fn(CUresult, *mut *const c_char) -> CUresult,
    code: CUresult,
) -> Option<String> {
    let mut p: *const c_char = ptr::null();
    // SAFETY: `f` is cuGetErrorName/cuGetErrorString, which write a pointer to a static
    // NUL-terminated string into `p` or fail for unknown codes.
    if unsafe { f(code, &raw mut p) } != sys::CUDA_SUCCESS {
        return None;
    }
    // SAFETY: on success the driver stored null or a static NUL-terminated string.
    unsafe { static_c_str(p) }
}

/// The 128 bytes of a 2-D tiled tensor map (`cuTensorMapEncodeTiled`, CUDA 12.0 and later) of
/// CUDA data type `data_type` at device address `address`: `dims` and `boxes` innermost first,
/// rows `row_stride_bytes` apart, `swizzle` CUDA's code, no interleave, L2 promotion of 128
/// bytes (as CUTLASS asks for its GEMMs' operands). Needs no context. Why not, in words.
pub(crate) fn encode_tensor_map_2d(
    data_type: c_int,
    address: u64,
    dims: [u64; 2],
    row_stride_bytes: u64,
    boxes: [u32; 2],
    swizzle: c_int,
) -> Result<[u64; 16], String> {
    let api = sys::api().map_err(|e| e.to_string())?;
    let encode = api.cuTensorMapEncodeTiled.ok_or_else(|| {
        "the CUDA driver has no `cuTensorMapEncodeTiled` (CUDA 12.0 and later do)".to_owned()
    })?;
    let strides = [row_stride_bytes];
    let element_strides = [1u32, 1];
    #[repr(C, align(64))]
    struct Map([u64; 16]);
    let mut map = Map([0; 16]);
    // SAFETY: `map` is 128 writable bytes aligned to 64; the arrays hold the rank's 2
    // dimensions, box sizes and element strides, and its 1 stride; the caller's address is a
    // device allocation the layout fits (the driver reads nothing there).
    let code = unsafe {
        encode(
            (&raw mut map).cast::<c_void>(),
            data_type,
            2,
            ptr::without_provenance_mut(address as usize),
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            0,
            swizzle,
            2,
            0,
        )
    };
    if code != sys::CUDA_SUCCESS {
        let (name, message) = api.describe(code);
        return Err(format!(
            "cuTensorMapEncodeTiled failed with {name}: {message}"
        ));
    }
    Ok(map.0)
}

/// Errors that mean a kernel faulted; the context is unusable afterwards.
pub fn is_kernel_fault(code: CUresult) -> bool {
    matches!(
        code,
        sys::CUDA_ERROR_ILLEGAL_ADDRESS
            | sys::CUDA_ERROR_LAUNCH_TIMEOUT
            | sys::CUDA_ERROR_ASSERT
            | sys::CUDA_ERROR_HARDWARE_STACK_ERROR..=sys::CUDA_ERROR_LAUNCH_FAILED
    )
}

/// Why a `cuInit` result means that this machine has no usable CUDA device, for the codes
/// that mean so (`cuda.h`); `None` for success and every other failure.
pub fn no_device_reason(code: CUresult) -> Option<&'static str> {
    Some(match code {
        sys::CUDA_ERROR_STUB_LIBRARY => "the driver library is a stub, not a real driver",
        sys::CUDA_ERROR_DEVICE_UNAVAILABLE => "every device is busy or unavailable",
        sys::CUDA_ERROR_NO_DEVICE => "no CUDA-capable device is present",
        sys::CUDA_ERROR_SYSTEM_NOT_READY => "the system is not ready (fabric manager not running?)",
        sys::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH => {
            "the user-mode driver (libcuda) and the kernel driver are of different versions"
        }
        sys::CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE => {
            "the forward-compatibility driver does not support this device"
        }
        _ => return None,
    })
}

impl DriverApi {
    fn attribute(&self, dev: CUdevice, attr: c_int) -> Result<u32, GpuError> {
        let mut v: c_int = 0;
        // SAFETY: writes one int.
        self.check("cuDeviceGetAttribute", unsafe {
            (self.cuDeviceGetAttribute)(&raw mut v, attr, dev)
        })?;
        Ok(u32::try_from(v).unwrap_or(0))
    }

    fn driver_version(&self) -> Result<(u32, u32), GpuError> {
        let mut v: c_int = 0;
        // SAFETY: writes one int.
        self.check("cuDriverGetVersion", unsafe {
            (self.cuDriverGetVersion)(&raw mut v)
        })?;
        let v = u32::try_from(v).unwrap_or(0);
        Ok((v / 1000, (v % 1000) / 10))
    }
}

impl Driver for DriverApi {
    const KIND: DeviceKind = DeviceKind::Cuda;
    type Info = CudaDeviceInfo;

    fn describe(&self, code: CUresult) -> (String, String) {
        let name =
            c_message(self.cuGetErrorName, code).unwrap_or_else(|| format!("CUDA error {code}"));
        let message = c_message(self.cuGetErrorString, code)
            .unwrap_or_else(|| "unknown error code".to_owned());
        (name, message)
    }

    fn is_kernel_fault(code: CUresult) -> bool {
        is_kernel_fault(code)
    }

    const OUT_OF_MEMORY: CUresult = sys::CUDA_ERROR_OUT_OF_MEMORY;
    const NOT_READY: CUresult = sys::CUDA_ERROR_NOT_READY;

    fn is_not_found(code: CUresult) -> bool {
        code == sys::CUDA_ERROR_NOT_FOUND
    }

    fn missing_device_nodes() -> Option<String> {
        // `/dev/nvidiactl` can exist with no GPU (the driver package creates it); each GPU
        // has a node of its own, `/dev/nvidia<N>`.
        let any_gpu = std::fs::read_dir("/dev").is_ok_and(|entries| {
            entries.flatten().any(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_prefix("nvidia"))
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
        });
        (!any_gpu).then(|| "no /dev/nvidia<N> device node (no NVIDIA GPU)".to_owned())
    }

    fn get() -> Result<&'static Self, GpuError> {
        static INIT: std::sync::OnceLock<Result<(), GpuError>> = std::sync::OnceLock::new();
        // SAFETY: cuInit takes flags (must be 0) and no pointers.
        let init = |api: &Self| unsafe { (api.cuInit)(0) };
        initialized(&INIT, sys::api(), "cuInit", init, no_device_reason)
    }

    fn device_count(&self) -> Result<usize, GpuError> {
        let mut n: c_int = 0;
        // SAFETY: writes one int.
        self.check("cuDeviceGetCount", unsafe {
            (self.cuDeviceGetCount)(&raw mut n)
        })?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    fn device_info(&self, ordinal: usize) -> Result<CudaDeviceInfo, GpuError> {
        let ord = c_ordinal::<Self>(ordinal)?;
        let mut dev: CUdevice = 0;
        // SAFETY: writes one CUdevice.
        self.check("cuDeviceGet", unsafe {
            (self.cuDeviceGet)(&raw mut dev, ord)
        })?;
        let mut buf = [0 as c_char; 256];
        // SAFETY: the driver writes at most `len` bytes, NUL-terminated, into `buf`.
        self.check("cuDeviceGetName", unsafe {
            (self.cuDeviceGetName)(buf.as_mut_ptr(), 256, dev)
        })?;
        let mut total_memory = 0usize;
        // SAFETY: writes one size_t.
        self.check("cuDeviceTotalMem_v2", unsafe {
            (self.cuDeviceTotalMem_v2)(&raw mut total_memory, dev)
        })?;
        Ok(CudaDeviceInfo {
            ordinal,
            name: c_chars(&buf),
            compute_capability: (
                self.attribute(dev, sys::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                self.attribute(dev, sys::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            ),
            total_memory,
            multiprocessors: self.attribute(dev, sys::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            driver_version: self.driver_version()?,
            max_shared_per_block_optin: self.attribute(
                dev,
                sys::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )?,
            clock_khz: self.attribute(dev, sys::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?,
            memory_clock_khz: self.attribute(dev, sys::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?,
            memory_bus_bits: self
                .attribute(dev, sys::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?,
            device: dev,
        })
    }

    fn context_open(&self, info: &CudaDeviceInfo) -> Result<Handle, GpuError> {
        let mut ctx: Handle = ptr::null_mut();
        // SAFETY: writes one context handle.
        self.check("cuDevicePrimaryCtxRetain", unsafe {
            (self.cuDevicePrimaryCtxRetain)(&raw mut ctx, info.device)
        })?;
        // SAFETY: `ctx` was just retained.
        let current = self.check("cuCtxSetCurrent", unsafe { (self.cuCtxSetCurrent)(ctx) });
        // The stack of a GPU thread, when `OFFLOAD_KERNEL_STACK` sets it (else the driver's).
        let stack = match (current, crate::backend::kernel_stack(), self.cuCtxSetLimit) {
            (Err(e), _, _) => Err(e),
            (Ok(()), Some(bytes), Some(set_limit)) => self.check("cuCtxSetLimit", {
                // SAFETY: the context is current; the call takes a limit and a value.
                unsafe { set_limit(sys::CU_LIMIT_STACK_SIZE, bytes) }
            }),
            (Ok(()), _, _) => Ok(()),
        };
        if let Err(e) = stack {
            // SAFETY: pairs with the retain just above; nothing of the context escaped.
            unsafe { self.context_close(info, ctx) };
            return Err(e);
        }
        Ok(ctx)
    }

    unsafe fn context_close(&self, info: &CudaDeviceInfo, _ctx: Handle) {
        // SAFETY: pairs with the retain in `context_open` (the caller's contract).
        let _ = unsafe { (self.cuDevicePrimaryCtxRelease_v2)(info.device) };
    }

    unsafe fn context_reset(&self, info: &CudaDeviceInfo) -> Result<(), GpuError> {
        let Some(reset) = self.cuDevicePrimaryCtxReset_v2 else {
            return Err(GpuError::MissingEntryPoint {
                api: Self::API,
                call: "cuDevicePrimaryCtxReset_v2",
            });
        };
        // SAFETY: takes a device; nothing of the context is used afterwards (the caller's
        // contract). The retain of `context_open` stays counted and is released as before.
        self.check("cuDevicePrimaryCtxReset_v2", unsafe { reset(info.device) })
    }

    unsafe fn context_bind(&self, _info: &CudaDeviceInfo, ctx: Handle) -> Result<(), GpuError> {
        let mut current: Handle = ptr::null_mut();
        // SAFETY: writes one context handle.
        self.check("cuCtxGetCurrent", unsafe {
            (self.cuCtxGetCurrent)(&raw mut current)
        })?;
        if current != ctx {
            // SAFETY: `ctx` is a retained, live context (the trait's contract).
            self.check("cuCtxSetCurrent", unsafe { (self.cuCtxSetCurrent)(ctx) })?;
        }
        Ok(())
    }

    fn mem_alloc(&self, bytes: usize) -> Result<u64, GpuError> {
        let mut p = 0u64;
        // SAFETY: writes one device pointer.
        let code = unsafe { (self.cuMemAlloc_v2)(&raw mut p, bytes) };
        self.check_alloc("cuMemAlloc_v2", code, bytes, true)?;
        Ok(p)
    }

    fn host_alloc(&self, bytes: usize) -> Result<*mut u8, GpuError> {
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: writes one pointer; flags 0 (portable to this context only).
        let code = unsafe { (self.cuMemHostAlloc)(&raw mut p, bytes, 0) };
        self.check_alloc("cuMemHostAlloc", code, bytes, false)?;
        Ok(p.cast())
    }

    fn host_alloc_mapped(&self, bytes: usize) -> Result<(*mut u8, u64), GpuError> {
        let Some(device_pointer) = self.cuMemHostGetDevicePointer_v2 else {
            return Err(GpuError::MissingEntryPoint {
                api: Self::API,
                call: "cuMemHostGetDevicePointer_v2",
            });
        };
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: writes one pointer; the memory is mapped into every context's address space.
        let code = unsafe {
            (self.cuMemHostAlloc)(
                &raw mut p,
                bytes,
                sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP,
            )
        };
        self.check("cuMemHostAlloc", code)?;
        let mut device = 0;
        // SAFETY: `p` is the mapped allocation just made; writes one device pointer.
        let code = unsafe { device_pointer(&raw mut device, p, 0) };
        if let Err(e) = self.check("cuMemHostGetDevicePointer_v2", code) {
            // SAFETY: allocated above, not used.
            let _ = unsafe { (self.cuMemFreeHost)(p) };
            return Err(e);
        }
        Ok((p.cast(), device))
    }

    unsafe fn module_global(
        &self,
        module: Handle,
        name: &CStr,
    ) -> Result<Option<(u64, usize)>, GpuError> {
        let Some(get_global) = self.cuModuleGetGlobal_v2 else {
            return Ok(None);
        };
        let (mut address, mut size) = (0, 0);
        // SAFETY: `module` is live (the trait's contract); `name` is NUL-terminated.
        let code = unsafe { get_global(&raw mut address, &raw mut size, module, name.as_ptr()) };
        Ok(self
            .check_found("cuModuleGetGlobal_v2", code)?
            .then_some((address, size)))
    }

    forward_calls! {
        fn mem_info() -> |free: usize = 0, total: usize = 0| cuMemGetInfo_v2(&raw mut free, &raw mut total);
        unsafe fn mem_free(ptr: u64) => cuMemFree_v2(ptr);
        unsafe fn host_free(ptr: *mut u8) => cuMemFreeHost(ptr.cast());
        // A blocking stream (it synchronizes with the legacy default stream), so work others
        // issue on the default stream stays ordered with it.
        fn stream_create() -> |s| cuStreamCreate(&raw mut s, sys::CU_STREAM_DEFAULT);
        unsafe fn stream_destroy(stream: Handle) => cuStreamDestroy_v2(stream);
        unsafe fn stream_synchronize(stream: Handle) => cuStreamSynchronize(stream);
        unsafe fn stream_wait_event(stream: Handle, event: Handle) => cuStreamWaitEvent(stream, event, 0);
        unsafe fn copy_htod(dst: u64, src: *const u8, len: usize, stream: Handle) => cuMemcpyHtoDAsync_v2(dst, src.cast(), len, stream);
        unsafe fn copy_dtoh(dst: *mut u8, src: u64, len: usize, stream: Handle) => cuMemcpyDtoHAsync_v2(dst.cast(), src, len, stream);
        unsafe fn copy_dtod(dst: u64, src: u64, len: usize, stream: Handle) => cuMemcpyDtoDAsync_v2(dst, src, len, stream);
        unsafe fn memset(dst: u64, value: u8, len: usize, stream: Handle) => cuMemsetD8Async(dst, value, len, stream);
        unsafe fn module_unload(module: Handle) => cuModuleUnload(module);
        unsafe fn module_function(module: Handle, name: &str, c_name: &CStr) -> |f| kernel name in cuModuleGetFunction(&raw mut f, module, c_name.as_ptr());
        fn event_create() -> |e| cuEventCreate(&raw mut e, sys::CU_EVENT_DEFAULT);
        unsafe fn event_destroy(event: Handle) => cuEventDestroy_v2(event);
        unsafe fn event_record(event: Handle, stream: Handle) => cuEventRecord(event, stream);
        unsafe fn event_synchronize(event: Handle) => cuEventSynchronize(event);
        // Thread-local mode: only this thread's unsafe calls (such as a synchronous copy)
        // are refused while recording.
        unsafe fn capture_begin(stream: Handle) => cuStreamBeginCapture_v2(stream, sys::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
        unsafe fn capture_end(stream: Handle) -> |graph| cuStreamEndCapture(stream, &raw mut graph);
        unsafe fn graph_instantiate(graph: Handle) -> |exec| cuGraphInstantiateWithFlags(&raw mut exec, graph, 0);
        unsafe fn graph_launch(exec: Handle, stream: Handle) => cuGraphLaunch(exec, stream);
        unsafe fn graph_destroy(graph: Handle) => cuGraphDestroy(graph);
        unsafe fn graph_exec_destroy(exec: Handle) => cuGraphExecDestroy(exec);
        // The driver only reads `params` (the C prototype is non-const).
        unsafe fn launch(function: Handle, stream: Handle, launch: &LaunchArgs<'_>) => cuLaunchKernel(function, launch.config.grid.0, launch.config.grid.1, launch.config.grid.2, launch.config.block.0, launch.config.block.1, launch.config.block.2, launch.config.shared_mem_bytes, stream, launch.params.as_ptr().cast_mut(), ptr::null_mut());
        unsafe fn event_elapsed_ms(start: Handle, end: Handle) -> |ms: f32 = 0.0| cuEventElapsedTime(&raw mut ms, start, end);
    }

    unsafe fn copy_peer(
        &self,
        dst: PeerEnd<'_, CudaDeviceInfo>,
        src: PeerEnd<'_, CudaDeviceInfo>,
        len: usize,
        stream: Handle,
    ) -> Result<(), GpuError> {
        // SAFETY: the trait's contract.
        self.check("cuMemcpyPeerAsync", unsafe {
            (self.cuMemcpyPeerAsync)(dst.address, dst.ctx, src.address, src.ctx, len, stream)
        })
    }

    fn cooperative_launch_entry(&self) -> (&'static str, Option<CooperativeLaunchFn>) {
        ("cuLaunchCooperativeKernel", self.cuLaunchCooperativeKernel)
    }

    fn peaks(info: &CudaDeviceInfo) -> Option<DevicePeaks> {
        info.peaks()
    }

    fn supports_clusters(info: &CudaDeviceInfo) -> bool {
        info.compute_capability.0 >= 9
    }

    unsafe fn launch_cluster(
        &self,
        function: Handle,
        stream: Handle,
        launch: &LaunchArgs<'_>,
        info: &CudaDeviceInfo,
    ) -> Result<(), GpuError> {
        if !Self::supports_clusters(info) {
            let (major, minor) = info.compute_capability;
            return Err(GpuError::ClusterUnsupported {
                reason: format!(
                    "thread-block clusters need compute capability 9.0 or later; device {} ({}) \
                     is {major}.{minor}: launch clusters of one block where \
                     `Device::supports_clusters()` is false",
                    info.ordinal, info.name
                ),
            });
        }
        let Some(launch_ex) = self.cuLaunchKernelEx else {
            return Err(GpuError::MissingEntryPoint {
                api: Self::API,
                call: "cuLaunchKernelEx",
            });
        };
        let config = &launch.config;
        let (cx, cy, cz) = config.cluster;
        if config
            .cluster_size()
            .is_some_and(|size| size > crate::launch::MAX_PORTABLE_CLUSTER_SIZE)
        {
            // SAFETY: `function` is live and its context current (the trait's contract).
            self.check("cuFuncSetAttribute", unsafe {
                (self.cuFuncSetAttribute)(
                    function,
                    sys::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                    1,
                )
            })?;
        }
        let mut value = [0u32; 16];
        value[..3].copy_from_slice(&[cx, cy, cz]);
        let mut attribute = sys::CUlaunchAttribute {
            id: sys::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
            pad: [0; 4],
            value,
        };
        let ex = sys::CUlaunchConfig {
            gridDimX: config.grid.0,
            gridDimY: config.grid.1,
            gridDimZ: config.grid.2,
            blockDimX: config.block.0,
            blockDimY: config.block.1,
            blockDimZ: config.block.2,
            sharedMemBytes: config.shared_mem_bytes,
            hStream: stream,
            attrs: &raw mut attribute,
            numAttrs: 1,
        };
        // SAFETY: the trait's contract (a live function of the current context, a live stream,
        // `params` one pointer per kernel parameter); `ex` and its one attribute outlive the
        // call, and the driver only reads them and `params` (the C prototype is non-const).
        self.check("cuLaunchKernelEx", unsafe {
            launch_ex(
                &raw const ex,
                function,
                launch.params.as_ptr().cast_mut(),
                ptr::null_mut(),
            )
        })
    }

    fn occupancy_entry(&self) -> (&'static str, Option<OccupancyFn>) {
        (
            "cuOccupancyMaxActiveBlocksPerMultiprocessor",
            self.cuOccupancyMaxActiveBlocksPerMultiprocessor,
        )
    }

    fn multiprocessors(info: &CudaDeviceInfo) -> u32 {
        info.multiprocessors
    }

    unsafe fn potential_block_size(
        &self,
        function: Handle,
        shared: u32,
    ) -> Result<Option<u32>, GpuError> {
        let Some(potential) = self.cuOccupancyMaxPotentialBlockSize else {
            return Ok(None);
        };
        let (mut grid, mut block): (c_int, c_int) = (0, 0);
        // SAFETY: the trait's contract; writes two ints. With no size callback the driver
        // takes `shared` for every block size, and a limit of 0 leaves the function's own.
        self.check("cuOccupancyMaxPotentialBlockSize", unsafe {
            potential(
                &raw mut grid,
                &raw mut block,
                function,
                None,
                shared as usize,
                0,
            )
        })?;
        Ok(block_size(block))
    }

    unsafe fn graph_exec_update(&self, exec: Handle, graph: Handle) -> Result<bool, GpuError> {
        let Some(update) = self.cuGraphExecUpdate_v2 else {
            return Ok(false);
        };
        let mut info = sys::CUgraphExecUpdateResultInfo {
            result: 0,
            errorNode: ptr::null_mut(),
            errorFromNode: ptr::null_mut(),
        };
        // SAFETY: the trait's contract; writes the result record.
        let code = unsafe { update(exec, graph, &raw mut info) };
        // CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE: the shapes differ; instantiate instead.
        Ok(code == sys::CUDA_SUCCESS)
    }

    fn loader_kind(kind: offload_format::ImageKind) -> GpuImageKind {
        match kind {
            offload_format::ImageKind::Cubin => GpuImageKind::Cubin,
            offload_format::ImageKind::Ptx => GpuImageKind::Ptx,
            _ => GpuImageKind::Fatbin,
        }
    }

    fn prepare_image<'a>(
        &self,
        image: &'a [u8],
        kind: GpuImageKind,
    ) -> Result<Cow<'a, [u8]>, GpuError> {
        let malformed = |reason| GpuError::MalformedImage { kind, reason };
        match kind {
            GpuImageKind::Cubin => check_cubin(image).map_err(malformed)?,
            GpuImageKind::Fatbin => check_fatbin(image).map_err(malformed)?,
            GpuImageKind::Ptx => return ptx_with_nul(image).map(Cow::Owned).map_err(malformed),
            GpuImageKind::CodeObject => {
                return Err(malformed("an AMD code object, not a CUDA image".into()));
            }
        }
        Ok(Cow::Borrowed(image))
    }

    unsafe fn module_load(
        &self,
        image: &[u8],
        kind: GpuImageKind,
        info: &CudaDeviceInfo,
    ) -> Result<Handle, GpuError> {
        let mut log = vec![0u8; 16 * 1024];
        let mut options = [
            sys::CU_JIT_ERROR_LOG_BUFFER,
            sys::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        // The driver reads option values as pointer-sized integers or pointers.
        let mut values: [*mut c_void; 2] = [
            log.as_mut_ptr().cast(),
            ptr::without_provenance_mut(log.len()),
        ];
        let mut module: Handle = ptr::null_mut();
        // SAFETY: `prepare_image` checked the image (the trait's contract); the log buffer
        // outlives the call and its size is passed alongside it; both option arrays have 2
        // entries.
        let code = unsafe {
            (self.cuModuleLoadDataEx)(
                &raw mut module,
                image.as_ptr().cast(),
                2,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        if code == sys::CUDA_SUCCESS {
            return Ok(module);
        }
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let jit_log = String::from_utf8_lossy(&log[..end]).trim().to_owned();
        Err(if code == sys::CUDA_ERROR_UNSUPPORTED_PTX_VERSION {
            GpuError::PtxTooNew {
                driver_version: info.driver_version,
                message: self.describe(code).1,
                jit_log,
            }
        } else {
            self.module_load_error("cuModuleLoadDataEx", kind, code, jit_log)
        })
    }

    unsafe fn prepare_shared(
        &self,
        function: Handle,
        kernel: &str,
        dynamic: u32,
        info: &CudaDeviceInfo,
    ) -> Result<(), GpuError> {
        if dynamic == 0 {
            return Ok(());
        }
        let mut static_bytes: c_int = 0;
        // SAFETY: `function` is live (the trait's contract); writes one int.
        self.check("cuFuncGetAttribute", unsafe {
            (self.cuFuncGetAttribute)(
                &raw mut static_bytes,
                sys::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                function,
            )
        })?;
        let static_bytes = u32::try_from(static_bytes).unwrap_or(0);
        match dynamic_shared_opt_in(dynamic, static_bytes, info.max_shared_per_block_optin) {
            Ok(None) => Ok(()),
            // SAFETY: as above; the value fits i32 (it is at most the device's opt-in
            // maximum).
            Ok(Some(bytes)) => self.check("cuFuncSetAttribute", unsafe {
                (self.cuFuncSetAttribute)(
                    function,
                    sys::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    i32::try_from(bytes).unwrap_or(i32::MAX),
                )
            }),
            Err(reason) => Err(GpuError::SharedMemoryLimit {
                kernel: kernel.to_owned(),
                reason,
            }),
        }
    }

    unsafe fn event_query(&self, event: Handle) -> Result<bool, GpuError> {
        // SAFETY: the trait's contract.
        self.check_ready("cuEventQuery", unsafe { (self.cuEventQuery)(event) })
    }
}

#[cfg(test)]
mod tests {

    fn info(
        compute_capability: (u32, u32),
        multiprocessors: u32,
        clocks: [u32; 3],
    ) -> CudaDeviceInfo {
        CudaDeviceInfo {
            ordinal: 0,
            name: "test".to_owned(),
            compute_capability,
            total_memory: 0,
            multiprocessors,
            driver_version: (12, 0),
            max_shared_per_block_optin: 0,
            clock_khz: clocks[0],
            memory_clock_khz: clocks[1],
            memory_bus_bits: clocks[2],
            device: 0,
        }
    }

    /// The data sheets' figures from the attributes the driver reports: H100 SXM 66.9 TFLOP/s
    /// FP32 and 3.35 TB/s; A100 SXM 40 GB 19.5 TFLOP/s and 1.56 TB/s.
    #[test]
    fn peaks_follow_the_data_sheets() {
        let h100 = info((9, 0), 132, [1_980_000, 2_619_000, 5120])
            .peaks()
            .unwrap();
        assert!(
            (h100.flops_per_second / 1e12 - 66.9).abs() < 0.05,
            "{h100:?}"
        );
        assert!(
            (h100.bytes_per_second / 1e12 - 3.35).abs() < 0.01,
            "{h100:?}"
        );
        assert!(
            h100.source.contains("132 SMs × 128 lanes"),
            "{}",
            h100.source
        );
        let a100 = info((8, 0), 108, [1_410_000, 1_215_000, 5120])
            .peaks()
            .unwrap();
        assert!(
            (a100.flops_per_second / 1e12 - 19.5).abs() < 0.05,
            "{a100:?}"
        );
        assert!(
            (a100.bytes_per_second / 1e12 - 1.555).abs() < 0.01,
            "{a100:?}"
        );
        // A driver that does not say, or an architecture without a known lane count.
        assert_eq!(info((9, 0), 132, [0, 2_619_000, 5120]).peaks(), None);
        assert_eq!(info((6, 1), 20, [1_000_000, 1_000_000, 256]).peaks(), None);
    }

    use super::*;

    #[test]
    fn dynamic_shared_memory_over_48_kib_opts_in_up_to_the_device_maximum() {
        // sm_80: 163 KiB opt-in; sm_75: 64 KiB.
        let a100 = 166_912;
        assert_eq!(dynamic_shared_opt_in(0, 2048, a100), Ok(None));
        assert_eq!(dynamic_shared_opt_in(48 * 1024, 0, a100), Ok(None));
        assert_eq!(
            dynamic_shared_opt_in(100 * 1024, 2048, a100),
            Ok(Some(100 * 1024))
        );
        let err = dynamic_shared_opt_in(64 * 1024, 2048, 65_536).unwrap_err();
        assert!(
            err.contains("65536 bytes this device gives a block"),
            "{err}"
        );
        assert!(dynamic_shared_opt_in(u32::MAX, u32::MAX, a100).is_err());
    }

    #[test]
    fn codes_that_mean_no_usable_device() {
        // cuda.h: STUB_LIBRARY 34, DEVICE_UNAVAILABLE 46, NO_DEVICE 100, SYSTEM_NOT_READY 802,
        // SYSTEM_DRIVER_MISMATCH 803, COMPAT_NOT_SUPPORTED_ON_DEVICE 804.
        for (code, words) in [
            (34, "stub"),
            (46, "busy"),
            (100, "no CUDA-capable device"),
            (802, "not ready"),
            (803, "different versions"),
            (804, "forward-compatibility"),
        ] {
            let reason = no_device_reason(code).unwrap_or_else(|| panic!("{code}"));
            assert!(reason.contains(words), "{code}: {reason}");
        }
        // 35 is the runtime API's cudaErrorInsufficientDriver; as a CUresult it means nothing.
        for code in [0, 1, 3, 35, 101, 999] {
            assert_eq!(no_device_reason(code), None, "{code}");
        }
    }

    #[test]
    fn kernel_fault_codes() {
        for c in [700, 702, 710, 714, 715, 716, 717, 718, 719] {
            assert!(is_kernel_fault(c), "{c}");
        }
        for c in [0, 1, 2, 200, 209, 222, 701, 999] {
            assert!(!is_kernel_fault(c), "{c}");
        }
    }
}
