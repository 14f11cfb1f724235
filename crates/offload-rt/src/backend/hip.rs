//! The HIP driver, over `libamdhip64` loaded at run time (ROCm 6 or newer): the `Driver`
//! implementation for [`sys::HipApi`], the device description, and the names the rest of the
//! runtime uses (`HipDevice` is the generic `GpuDevice` over it, ...). The device's full
//! target ID (`gcnArchName`, e.g. `gfx90a:sramecc+:xnack-`) is what image selection matches
//! code objects against.
//!
//! HIP's current device is per thread: every operation first makes its device current on
//! the calling thread. Each device's default work goes to a stream of its own.
//!
//! `OFFLOAD_HIP_LIBRARY` names the library to open instead of `libamdhip64.so`;
//! with `OFFLOAD_LOG=1`, why a device is not used and which image is loaded go to stderr.

#[allow(
    missing_docs,
    reason = "raw runtime bindings: the names mirror hip_runtime_api.h, documented there"
)]
pub mod sys;

use std::borrow::Cow;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr;

use sys::{HipApi, hipDeviceProp_tR0600, hipError_t};

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

pub use crate::backend::image::check_code_object;

/// The HIP driver.
pub type Hip = HipApi;
driver_names!(
    Hip,
    "HIP",
    HipDevice,
    HipBuffer,
    HipModule,
    HipFunction,
    HipEvent,
    HipStream,
    HipBackend,
    HipError,
    HipImageKind
);

/// What HIP says about one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HipDeviceInfo {
    /// The ordinal (`hip:N`).
    pub ordinal: usize,
    /// The marketing name.
    pub name: String,
    /// The full target ID, e.g. `gfx90a:sramecc+:xnack-`.
    pub target_id: String,
    /// Total device memory in bytes.
    pub total_memory: usize,
    /// Number of compute units.
    pub compute_units: u32,
    /// The driver version number HIP reports.
    pub driver_version: i32,
    /// The compute units' peak clock, in kHz (0 where HIP does not say).
    pub clock_khz: u32,
    /// The memory's peak clock, in kHz (0 where HIP does not say).
    pub memory_clock_khz: u32,
    /// The memory bus, in bits (0 where HIP does not say).
    pub memory_bus_bits: u32,
}

impl HipDeviceInfo {
    /// The device's peak figures from its attributes, where they are known: FP32 FLOP/s
    /// (compute units × FP32 lanes per compute unit of its processor × 2 for the fused
    /// multiply-add × the clock; the lanes of unpacked vector operations, as AMD's data sheets
    /// count "FP32 vector": 64 on GFX9 and GFX10, 128 on gfx94x, gfx950 and RDNA 3 and later)
    /// and memory bandwidth (the memory clock × 2 × the bus width). One MI250X die (110 compute
    /// units at 1.7 GHz, 1.6 GHz over 4096 bits) gives 23.9 TFLOP/s and 1.64 TB/s, half its
    /// data sheet's two-die figures.
    pub fn peaks(&self) -> Option<DevicePeaks> {
        let target = offload_format::target_id::TargetId::parse(&self.target_id).ok()?;
        let clocks = GpuClocks {
            units: self.compute_units,
            unit_name: "compute units",
            lanes: u64::from(target.amdgpu()?.fp32_lanes_per_compute_unit()?),
            clock_khz: self.clock_khz,
            memory_clock_khz: self.memory_clock_khz,
            memory_bus_bits: self.memory_bus_bits,
        };
        let device = format!("{} ({}): FP32 vector", self.name, target.processor());
        DevicePeaks::from_clocks(&device, &clocks, "HIP's attributes")
    }
}

impl DeviceInfo for HipDeviceInfo {
    fn ordinal(&self) -> usize {
        self.ordinal
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn arch(&self) -> String {
        self.target_id.clone()
    }

    fn target(&self) -> DeviceTarget<'_> {
        DeviceTarget::Amd {
            target_id: &self.target_id,
        }
    }
}

/// Loads HIP, initializes it and describes every device; an error says why it cannot be
/// used here.
///
/// # Errors
/// `GpuError::Unavailable`, `GpuError::NoDevice`, `GpuError::NoDevices` or a driver
/// failure.
pub fn probe() -> Result<Vec<HipDeviceInfo>, GpuError> {
    gpu::probe::<Hip>()
}

/// Errors that mean a kernel faulted.
pub fn is_kernel_fault(code: hipError_t) -> bool {
    matches!(
        code,
        sys::hipErrorIllegalAddress
            | sys::hipErrorLaunchTimeOut
            | sys::hipErrorAssert
            | sys::hipErrorLaunchFailure
    )
}

/// Why a `hipInit` status means that this machine has no usable AMD GPU, for the codes that
/// mean so; `None` for success and every other failure.
pub fn no_device_reason(code: hipError_t) -> Option<&'static str> {
    match code {
        sys::hipErrorNoDevice => Some("no AMD GPU is present"),
        sys::hipErrorInsufficientDriver => Some("the kernel driver is too old for this HIP"),
        _ => None,
    }
}

/// A device address as HIP's pointer type.
fn device_ptr(address: u64) -> *mut c_void {
    std::ptr::with_exposed_provenance_mut(address as usize)
}

/// `hipGetDevicePropertiesR0600`, into a zeroed buffer with slack after the struct.
fn device_properties(api: &HipApi, ordinal: c_int) -> Result<Box<hipDeviceProp_tR0600>, GpuError> {
    #[repr(C)]
    struct Slack {
        props: hipDeviceProp_tR0600,
        _slack: [u8; 4096],
    }
    // SAFETY: every field of `Slack` is an integer, an array of integers or a raw pointer,
    // for which all-zero bytes are valid.
    let mut buf: Box<Slack> = Box::new(unsafe { std::mem::zeroed() });
    // SAFETY: the buffer is at least as large as the R0600 struct the call writes.
    api.check("hipGetDevicePropertiesR0600", unsafe {
        (api.hipGetDevicePropertiesR0600)(&raw mut buf.props, ordinal)
    })?;
    // SAFETY: as above, all-zero is valid for the struct; it is immediately overwritten.
    let mut props: Box<hipDeviceProp_tR0600> = Box::new(unsafe { std::mem::zeroed() });
    // SAFETY: both are valid, distinct, and of the struct's size.
    unsafe { ptr::copy_nonoverlapping(&raw const buf.props, &raw mut *props, 1) };
    Ok(props)
}

impl HipApi {
    fn device_handle(&self, ordinal: c_int) -> Result<c_int, GpuError> {
        let mut dev = 0;
        // SAFETY: writes one device handle.
        self.check("hipDeviceGet", unsafe {
            (self.hipDeviceGet)(&raw mut dev, ordinal)
        })?;
        Ok(dev)
    }
}

impl Driver for HipApi {
    const KIND: DeviceKind = DeviceKind::Hip;
    type Info = HipDeviceInfo;

    fn describe(&self, code: hipError_t) -> (String, String) {
        // SAFETY: both take a code by value and return a static string (or null).
        let (name, message) = unsafe {
            (
                static_c_str((self.hipGetErrorName)(code)),
                static_c_str((self.hipGetErrorString)(code)),
            )
        };
        (
            name.unwrap_or_else(|| format!("HIP error {code}")),
            message.unwrap_or_else(|| "unknown error code".to_owned()),
        )
    }

    fn is_kernel_fault(code: hipError_t) -> bool {
        is_kernel_fault(code)
    }

    const OUT_OF_MEMORY: hipError_t = sys::hipErrorOutOfMemory;
    const NOT_READY: hipError_t = sys::hipErrorNotReady;

    fn is_not_found(code: hipError_t) -> bool {
        matches!(
            code,
            sys::hipErrorNotFound | sys::hipErrorInvalidDeviceFunction
        )
    }

    fn missing_device_nodes() -> Option<String> {
        (!std::path::Path::new("/dev/kfd").exists())
            .then(|| "/dev/kfd does not exist (no AMD GPU driver loaded)".to_owned())
    }

    fn get() -> Result<&'static Self, GpuError> {
        static INIT: std::sync::OnceLock<Result<(), GpuError>> = std::sync::OnceLock::new();
        // SAFETY: takes flags (0) only.
        let init = |api: &Self| unsafe { (api.hipInit)(0) };
        initialized(&INIT, sys::api(), "hipInit", init, no_device_reason)
    }

    fn device_count(&self) -> Result<usize, GpuError> {
        let mut n: c_int = 0;
        // SAFETY: writes one int.
        let code = unsafe { (self.hipGetDeviceCount)(&raw mut n) };
        if code == sys::hipErrorNoDevice {
            return Ok(0);
        }
        self.check("hipGetDeviceCount", code)?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    fn device_info(&self, ordinal: usize) -> Result<HipDeviceInfo, GpuError> {
        let ord = c_ordinal::<Self>(ordinal)?;
        let dev = self.device_handle(ord)?;
        let mut buf = [0 as c_char; 256];
        // SAFETY: writes at most 256 bytes, NUL-terminated.
        self.check("hipDeviceGetName", unsafe {
            (self.hipDeviceGetName)(buf.as_mut_ptr(), 256, dev)
        })?;
        let name = c_chars(&buf);
        let mut total_memory = 0usize;
        // SAFETY: writes one size_t.
        self.check("hipDeviceTotalMem", unsafe {
            (self.hipDeviceTotalMem)(&raw mut total_memory, dev)
        })?;
        let props = device_properties(self, ord)?;
        let props_name = c_chars(&props.name);
        if props_name != name {
            return Err(GpuError::PropertiesAbiMismatch {
                ordinal,
                check: format!("hipDeviceGetName ({name:?} vs {props_name:?})"),
            });
        }
        if props.totalGlobalMem != total_memory {
            return Err(GpuError::PropertiesAbiMismatch {
                ordinal,
                check: format!(
                    "hipDeviceTotalMem ({total_memory} vs {})",
                    props.totalGlobalMem
                ),
            });
        }
        let target_id = c_chars(&props.gcnArchName);
        if !offload_format::target_id::is_amdgpu_target_id_shaped(&target_id) {
            return Err(GpuError::BadArchName {
                ordinal,
                found: target_id,
            });
        }
        let mut cus: c_int = 0;
        // SAFETY: writes one int.
        self.check("hipDeviceGetAttribute", unsafe {
            (self.hipDeviceGetAttribute)(
                &raw mut cus,
                sys::hipDeviceAttributeMultiprocessorCount,
                ord,
            )
        })?;
        let mut driver_version: c_int = 0;
        // SAFETY: writes one int.
        self.check("hipDriverGetVersion", unsafe {
            (self.hipDriverGetVersion)(&raw mut driver_version)
        })?;
        // The clocks and the bus only feed the peak figures: a HIP that does not answer leaves
        // them unknown (0) rather than the device unusable.
        let optional = |attribute: c_int| {
            let mut value: c_int = 0;
            // SAFETY: writes one int.
            let status = unsafe { (self.hipDeviceGetAttribute)(&raw mut value, attribute, ord) };
            if status == sys::hipSuccess {
                u32::try_from(value).unwrap_or(0)
            } else {
                0
            }
        };
        Ok(HipDeviceInfo {
            ordinal,
            name,
            target_id,
            total_memory,
            compute_units: u32::try_from(cus).unwrap_or(0),
            driver_version,
            clock_khz: optional(sys::hipDeviceAttributeClockRate),
            memory_clock_khz: optional(sys::hipDeviceAttributeMemoryClockRate),
            memory_bus_bits: optional(sys::hipDeviceAttributeMemoryBusWidth),
        })
    }

    fn context_open(&self, info: &HipDeviceInfo) -> Result<Handle, GpuError> {
        // HIP has no context to hold: a device is made current per thread.
        // SAFETY: HIP's binding reads no context.
        unsafe { self.context_bind(info, ptr::null_mut())? };
        // The stack of a GPU thread, when `OFFLOAD_KERNEL_STACK` sets it (else the runtime's).
        if let (Some(bytes), Some(set_limit)) =
            (crate::backend::kernel_stack(), self.hipDeviceSetLimit)
        {
            // SAFETY: the device is current; the call takes a limit and a value.
            self.check("hipDeviceSetLimit", unsafe {
                set_limit(sys::hipLimitStackSize, bytes)
            })?;
        }
        Ok(ptr::null_mut())
    }

    unsafe fn context_close(&self, _info: &HipDeviceInfo, _ctx: Handle) {}

    unsafe fn context_reset(&self, info: &HipDeviceInfo) -> Result<(), GpuError> {
        let Some(reset) = self.hipDeviceReset else {
            return Err(GpuError::MissingEntryPoint {
                api: Self::API,
                call: "hipDeviceReset",
            });
        };
        // SAFETY: HIP's binding reads no context; `hipDeviceReset` resets the device current
        // on the thread, just bound, and nothing of it is used afterwards (the caller's
        // contract).
        unsafe { self.context_bind(info, ptr::null_mut())? };
        // SAFETY: as above.
        self.check("hipDeviceReset", unsafe { reset() })
    }

    unsafe fn context_bind(&self, info: &HipDeviceInfo, _ctx: Handle) -> Result<(), GpuError> {
        let ordinal = c_ordinal::<Self>(info.ordinal)?;
        let mut current: c_int = -1;
        // SAFETY: writes one int.
        self.check("hipGetDevice", unsafe {
            (self.hipGetDevice)(&raw mut current)
        })?;
        if current != ordinal {
            // SAFETY: takes an int.
            self.check("hipSetDevice", unsafe { (self.hipSetDevice)(ordinal) })?;
        }
        Ok(())
    }

    fn mem_alloc(&self, bytes: usize) -> Result<u64, GpuError> {
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: writes one pointer.
        let code = unsafe { (self.hipMalloc)(&raw mut p, bytes) };
        self.check_alloc("hipMalloc", code, bytes, true)?;
        Ok(p.expose_provenance() as u64)
    }

    fn host_alloc(&self, bytes: usize) -> Result<*mut u8, GpuError> {
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: writes one pointer; flags 0 (hipHostMallocDefault).
        let code = unsafe { (self.hipHostMalloc)(&raw mut p, bytes, 0) };
        self.check_alloc("hipHostMalloc", code, bytes, false)?;
        Ok(p.cast())
    }

    fn host_alloc_mapped(&self, bytes: usize) -> Result<(*mut u8, u64), GpuError> {
        let Some(device_pointer) = self.hipHostGetDevicePointer else {
            return Err(GpuError::MissingEntryPoint {
                api: Self::API,
                call: "hipHostGetDevicePointer",
            });
        };
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: writes one pointer. Coherent: the host reads what kernels write without
        // waiting for them to end (a panic's report, after the trap).
        let code = unsafe {
            (self.hipHostMalloc)(
                &raw mut p,
                bytes,
                sys::hipHostMallocPortable | sys::hipHostMallocMapped | sys::hipHostMallocCoherent,
            )
        };
        self.check("hipHostMalloc", code)?;
        let mut device: *mut c_void = ptr::null_mut();
        // SAFETY: `p` is the mapped allocation just made; writes one pointer.
        let code = unsafe { device_pointer(&raw mut device, p, 0) };
        if let Err(e) = self.check("hipHostGetDevicePointer", code) {
            // SAFETY: allocated above, not used.
            let _ = unsafe { (self.hipHostFree)(p) };
            return Err(e);
        }
        Ok((p.cast(), device.expose_provenance() as u64))
    }

    unsafe fn module_global(
        &self,
        module: Handle,
        name: &CStr,
    ) -> Result<Option<(u64, usize)>, GpuError> {
        let Some(get_global) = self.hipModuleGetGlobal else {
            return Ok(None);
        };
        let (mut address, mut size): (*mut c_void, usize) = (ptr::null_mut(), 0);
        // SAFETY: `module` is live (the trait's contract); `name` is NUL-terminated.
        let code = unsafe { get_global(&raw mut address, &raw mut size, module, name.as_ptr()) };
        Ok(self
            .check_found("hipModuleGetGlobal", code)?
            .then(|| (address.expose_provenance() as u64, size)))
    }

    forward_calls! {
        fn mem_info() -> |free: usize = 0, total: usize = 0| hipMemGetInfo(&raw mut free, &raw mut total);
        unsafe fn mem_free(ptr: u64) => hipFree(device_ptr(ptr));
        unsafe fn host_free(ptr: *mut u8) => hipHostFree(ptr.cast());
        fn stream_create() -> |s| hipStreamCreate(&raw mut s);
        unsafe fn stream_destroy(stream: Handle) => hipStreamDestroy(stream);
        unsafe fn stream_synchronize(stream: Handle) => hipStreamSynchronize(stream);
        unsafe fn stream_wait_event(stream: Handle, event: Handle) => hipStreamWaitEvent(stream, event, 0);
        // HIP only reads `src` (its prototype is non-const).
        unsafe fn copy_htod(dst: u64, src: *const u8, len: usize, stream: Handle) => hipMemcpyHtoDAsync(device_ptr(dst), src.cast_mut().cast(), len, stream);
        unsafe fn copy_dtoh(dst: *mut u8, src: u64, len: usize, stream: Handle) => hipMemcpyDtoHAsync(dst.cast(), device_ptr(src), len, stream);
        unsafe fn copy_dtod(dst: u64, src: u64, len: usize, stream: Handle) => hipMemcpyDtoDAsync(device_ptr(dst), device_ptr(src), len, stream);
        unsafe fn memset(dst: u64, value: u8, len: usize, stream: Handle) => hipMemsetD8Async(device_ptr(dst), value, len, stream);
        unsafe fn module_unload(module: Handle) => hipModuleUnload(module);
        unsafe fn module_function(module: Handle, name: &str, c_name: &CStr) -> |f| kernel name in hipModuleGetFunction(&raw mut f, module, c_name.as_ptr());
        fn event_create() -> |e| hipEventCreate(&raw mut e);
        unsafe fn event_destroy(event: Handle) => hipEventDestroy(event);
        unsafe fn event_record(event: Handle, stream: Handle) => hipEventRecord(event, stream);
        unsafe fn event_synchronize(event: Handle) => hipEventSynchronize(event);
        unsafe fn capture_begin(stream: Handle) => hipStreamBeginCapture(stream, sys::hipStreamCaptureModeThreadLocal);
        unsafe fn capture_end(stream: Handle) -> |graph| hipStreamEndCapture(stream, &raw mut graph);
        unsafe fn graph_instantiate(graph: Handle) -> |exec| hipGraphInstantiateWithFlags(&raw mut exec, graph, 0);
        unsafe fn graph_launch(exec: Handle, stream: Handle) => hipGraphLaunch(exec, stream);
        unsafe fn graph_destroy(graph: Handle) => hipGraphDestroy(graph);
        unsafe fn graph_exec_destroy(exec: Handle) => hipGraphExecDestroy(exec);
        // The driver only reads `params` (the C prototype is non-const).
        unsafe fn launch(function: Handle, stream: Handle, launch: &LaunchArgs<'_>) => hipModuleLaunchKernel(function, launch.config.grid.0, launch.config.grid.1, launch.config.grid.2, launch.config.block.0, launch.config.block.1, launch.config.block.2, launch.config.shared_mem_bytes, stream, launch.params.as_ptr().cast_mut(), ptr::null_mut());
        unsafe fn event_elapsed_ms(start: Handle, end: Handle) -> |ms: f32 = 0.0| hipEventElapsedTime(&raw mut ms, start, end);
    }

    unsafe fn copy_peer(
        &self,
        dst: PeerEnd<'_, HipDeviceInfo>,
        src: PeerEnd<'_, HipDeviceInfo>,
        len: usize,
        stream: Handle,
    ) -> Result<(), GpuError> {
        let (to, from) = (
            c_ordinal::<Self>(dst.info.ordinal)?,
            c_ordinal::<Self>(src.info.ordinal)?,
        );
        // SAFETY: the trait's contract.
        self.check("hipMemcpyPeerAsync", unsafe {
            (self.hipMemcpyPeerAsync)(
                device_ptr(dst.address),
                to,
                device_ptr(src.address).cast_const(),
                from,
                len,
                stream,
            )
        })
    }

    fn peaks(info: &HipDeviceInfo) -> Option<DevicePeaks> {
        info.peaks()
    }

    fn cooperative_launch_entry(&self) -> (&'static str, Option<CooperativeLaunchFn>) {
        (
            "hipModuleLaunchCooperativeKernel",
            self.hipModuleLaunchCooperativeKernel,
        )
    }

    fn occupancy_entry(&self) -> (&'static str, Option<OccupancyFn>) {
        (
            "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor",
            self.hipModuleOccupancyMaxActiveBlocksPerMultiprocessor,
        )
    }

    fn multiprocessors(info: &HipDeviceInfo) -> u32 {
        info.compute_units
    }

    unsafe fn potential_block_size(
        &self,
        function: Handle,
        shared: u32,
    ) -> Result<Option<u32>, GpuError> {
        let Some(potential) = self.hipModuleOccupancyMaxPotentialBlockSize else {
            return Ok(None);
        };
        let (mut grid, mut block): (c_int, c_int) = (0, 0);
        // SAFETY: the trait's contract; writes two ints. A limit of 0 leaves the function's
        // own.
        self.check("hipModuleOccupancyMaxPotentialBlockSize", unsafe {
            potential(&raw mut grid, &raw mut block, function, shared as usize, 0)
        })?;
        Ok(block_size(block))
    }

    unsafe fn graph_exec_update(&self, exec: Handle, graph: Handle) -> Result<bool, GpuError> {
        let Some(update) = self.hipGraphExecUpdate else {
            return Ok(false);
        };
        let (mut node, mut result): (*mut c_void, c_int) = (ptr::null_mut(), 0);
        // SAFETY: the trait's contract; writes the failing node and the result.
        let code = unsafe { update(exec, graph, &raw mut node, &raw mut result) };
        Ok(code == sys::hipSuccess)
    }

    fn loader_kind(_kind: offload_format::ImageKind) -> GpuImageKind {
        GpuImageKind::CodeObject
    }

    fn prepare_image<'a>(
        &self,
        image: &'a [u8],
        kind: GpuImageKind,
    ) -> Result<Cow<'a, [u8]>, GpuError> {
        check_code_object(image).map_err(|reason| GpuError::MalformedImage { kind, reason })?;
        Ok(Cow::Borrowed(image))
    }

    unsafe fn module_load(
        &self,
        image: &[u8],
        kind: GpuImageKind,
        _info: &HipDeviceInfo,
    ) -> Result<Handle, GpuError> {
        let mut m: Handle = ptr::null_mut();
        // SAFETY: `prepare_image` checked the code object's header tables (the trait's
        // contract); writes one module handle.
        let code = unsafe { (self.hipModuleLoadData)(&raw mut m, image.as_ptr().cast()) };
        if code == sys::hipSuccess {
            return Ok(m);
        }
        Err(self.module_load_error("hipModuleLoadData", kind, code, String::new()))
    }

    unsafe fn prepare_shared(
        &self,
        _function: Handle,
        _kernel: &str,
        _dynamic: u32,
        _info: &HipDeviceInfo,
    ) -> Result<(), GpuError> {
        // HIP checks dynamic LDS against the device at launch and needs no opt-in.
        Ok(())
    }

    unsafe fn event_query(&self, event: Handle) -> Result<bool, GpuError> {
        // SAFETY: the trait's contract.
        self.check_ready("hipEventQuery", unsafe { (self.hipEventQuery)(event) })
    }
}

#[cfg(test)]
mod tests {
    use super::HipDeviceInfo;

    fn info(target_id: &str, compute_units: u32, clocks: [u32; 3]) -> HipDeviceInfo {
        HipDeviceInfo {
            ordinal: 0,
            name: "AMD Instinct".to_owned(),
            target_id: target_id.to_owned(),
            total_memory: 1 << 36,
            compute_units,
            driver_version: 60_000_000,
            clock_khz: clocks[0],
            memory_clock_khz: clocks[1],
            memory_bus_bits: clocks[2],
        }
    }

    /// The data sheets' figures from the attributes HIP reports: one MI250X die (half the
    /// card's 47.9 TFLOP/s FP32 vector and 3.2768 TB/s), an MI300X's 163.4 TFLOP/s FP32
    /// vector; none where HIP does not say, or for a processor without a known lane count.
    #[test]
    fn peaks_follow_the_data_sheets() {
        let mi250x_die = info("gfx90a:sramecc+:xnack-", 110, [1_700_000, 1_600_000, 4096])
            .peaks()
            .unwrap();
        assert!(
            (mi250x_die.flops_per_second / 1e12 - 47.9 / 2.0).abs() < 0.05,
            "{mi250x_die:?}"
        );
        assert!(
            (mi250x_die.bytes_per_second / 1e12 - 3.2768 / 2.0).abs() < 0.001,
            "{mi250x_die:?}"
        );
        assert!(
            mi250x_die
                .source
                .contains("110 compute units × 64 lanes × 2 at 1.70 GHz"),
            "{}",
            mi250x_die.source
        );
        let mi300x = info("gfx942:sramecc+:xnack-", 304, [2_100_000, 2_600_000, 8192])
            .peaks()
            .unwrap();
        assert!(
            (mi300x.flops_per_second / 1e12 - 163.4).abs() < 0.05,
            "{mi300x:?}"
        );
        assert_eq!(info("gfx90a", 110, [0, 1_600_000, 4096]).peaks(), None);
        assert_eq!(
            info("gfx803", 64, [1_000_000, 1_000_000, 2048]).peaks(),
            None
        );
    }
}
