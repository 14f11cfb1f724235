//! The CUDA backend, over the CUDA driver API loaded from `libcuda` at run time.
//!
//! Three layers, as in cudarc: [`sys`] (the entry points, loaded once, fallible),
//! [`result`] (one `Result`-returning wrapper per call) and the RAII types here
//! ([`CudaDevice`], [`CudaBuffer`], [`CudaModule`], [`CudaFunction`], [`CudaEvent`]).
//!
//! The driver table is written here rather than taken from cudarc because cudarc's
//! dynamic loading panics when `libcuda` or one of its symbols is missing, and its bindings
//! return `CUresult` as a Rust enum, which is undefined behaviour for any code a newer driver
//! adds. Here both are plain errors.
//!
//! Each device uses its primary context and one stream, which orders all its work; every
//! operation makes the context current on the calling thread first unless `cuCtxGetCurrent`
//! says it is, so handles can move between threads and other CUDA code may change the current
//! context in between.
//!
//! `OFFLOAD_CUDA_LIBRARY` names the driver library to open instead of `libcuda.so.1`;
//! with `OFFLOAD_LOG=1`, why a device is not used and which image is loaded go to stderr.

mod backend;
pub mod result;
pub mod sys;

pub(crate) use backend::log;
pub use backend::{CudaBackend, open_backend, to_error};

use std::ffi::c_void;
use std::fmt;
use std::sync::Arc;

use sys::{CUcontext, CUdevice, CUdeviceptr, CUevent, CUfunction, CUmodule, CUstream, DriverApi};

/// What can go wrong in the CUDA backend. Driver failures carry the driver's own error name
/// and message.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CudaError {
    /// The driver library could not be loaded.
    #[error("CUDA unavailable: {0}")]
    Unavailable(#[source] sys::LoadError),
    /// The driver loaded but reports no usable device (no GPU, stub library, user-mode and
    /// kernel drivers of different versions, ...): see [`result::no_device_reason`].
    #[error("CUDA unavailable: {reason}: cuInit failed: {name} ({code}): {message}")]
    NoDevice {
        /// The driver's code.
        code: i32,
        /// What the code means for this machine.
        reason: &'static str,
        /// The driver's error name.
        name: String,
        /// The driver's message.
        message: String,
    },
    /// The driver works but has no devices.
    #[error("CUDA unavailable: the driver reports no devices")]
    NoDevices,
    /// An ordinal past the last device.
    #[error("CUDA device {ordinal} does not exist ({count} present)")]
    DeviceOutOfRange {
        /// The ordinal asked for.
        ordinal: usize,
        /// The number of devices.
        count: usize,
    },
    /// A driver call failed.
    #[error("{call} failed: {name} ({code}): {message}")]
    Driver {
        /// The driver function.
        call: &'static str,
        /// The driver's code.
        code: i32,
        /// The driver's error name.
        name: String,
        /// The driver's message.
        message: String,
    },
    /// Device memory is exhausted.
    #[error("out of device memory allocating {bytes} bytes ({}): {message}", .free.map_or_else(|| "free memory unknown".to_owned(), |f| format!("{f} bytes free")))]
    OutOfMemory {
        /// The size asked for.
        bytes: usize,
        /// Free device memory when it failed, if the driver could tell.
        free: Option<usize>,
        /// The driver's message.
        message: String,
    },
    /// A kernel faulted (illegal address, trap, timeout, ...); the driver reports it at the
    /// next call, and the context cannot be used again.
    #[error("kernel fault reported by {call}: {name} ({code}): {message}")]
    KernelFault {
        /// The call that reported it.
        call: &'static str,
        /// The driver's code.
        code: i32,
        /// The driver's error name.
        name: String,
        /// The driver's message.
        message: String,
    },
    /// The image is not a well-formed cubin, fat binary or PTX text.
    #[error("malformed {kind} image: {reason}")]
    MalformedImage {
        /// cubin, fatbin or PTX.
        kind: CudaImageKind,
        /// What is wrong.
        reason: String,
    },
    /// The PTX needs a newer driver than the one installed.
    #[error("the driver (CUDA {}.{}) is too old for this PTX: {message}{}", .driver_version.0, .driver_version.1, log_suffix(.jit_log))]
    PtxTooNew {
        /// The driver's CUDA version.
        driver_version: (u32, u32),
        /// The driver's message.
        message: String,
        /// The JIT compiler's error log.
        jit_log: String,
    },
    /// The driver rejected the image (wrong architecture, invalid PTX, ...).
    #[error("cuModuleLoadDataEx rejected the {kind} image: {name} ({code}): {message}{}", log_suffix(.jit_log))]
    ModuleLoad {
        /// cubin, fatbin or PTX.
        kind: CudaImageKind,
        /// The driver's code.
        code: i32,
        /// The driver's error name.
        name: String,
        /// The driver's message.
        message: String,
        /// The JIT compiler's error log.
        jit_log: String,
    },
    /// The module has no kernel of this name.
    #[error("no kernel `{kernel}` in the module: {message}")]
    KernelNotFound {
        /// The kernel name.
        kernel: String,
        /// The driver's message.
        message: String,
    },
    /// A kernel name with an interior NUL byte.
    #[error("kernel name {name:?} contains a NUL byte")]
    InvalidKernelName {
        /// The name.
        name: String,
    },
    /// A copy whose source and destination sizes differ, or that leaves a buffer.
    #[error("copy of {len} bytes at offset {offset} does not fit a device buffer of {size} bytes")]
    CopyOutOfBounds {
        /// Bytes to copy.
        len: usize,
        /// Offset in the device buffer.
        offset: usize,
        /// The buffer's size.
        size: usize,
    },
    /// A launch asks for more shared memory than the device gives a block.
    #[error("launch of `{kernel}`: {reason}")]
    SharedMemoryLimit {
        /// The kernel.
        kernel: String,
        /// Which limit.
        reason: String,
    },
    /// An object of one device used with another.
    #[error("{what} belongs to CUDA device {owner}, not device {used_with}")]
    WrongDevice {
        /// What was passed.
        what: &'static str,
        /// Its device.
        owner: usize,
        /// The device it was used with.
        used_with: usize,
    },
}

fn log_suffix(log: &str) -> String {
    if log.is_empty() {
        String::new()
    } else {
        format!("\nJIT log:\n{log}")
    }
}

/// The kinds of image the driver loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CudaImageKind {
    /// An ELF cubin for one `sm_NN`.
    Cubin,
    /// PTX text, compiled by the driver's JIT.
    Ptx,
    /// An NVIDIA fat binary (magic `0xBA55ED50`).
    Fatbin,
}

impl fmt::Display for CudaImageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Cubin => "cubin",
            Self::Ptx => "PTX",
            Self::Fatbin => "fatbin",
        })
    }
}

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

impl CudaDeviceInfo {
    /// The device's architecture name, e.g. `sm_90`.
    pub fn arch(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }
}

fn init_api() -> Result<&'static DriverApi, CudaError> {
    let api = result::api()?;
    result::init(api)?;
    Ok(api)
}

fn device_info(
    api: &DriverApi,
    ordinal: usize,
    driver_version: (u32, u32),
) -> Result<(CUdevice, CudaDeviceInfo), CudaError> {
    let dev = result::device_get(api, ordinal)?;
    let attr = |a| result::device_attribute(api, dev, a).map(|v| u32::try_from(v).unwrap_or(0));
    let info = CudaDeviceInfo {
        ordinal,
        name: result::device_name(api, dev)?,
        compute_capability: (
            attr(sys::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(sys::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        total_memory: result::device_total_mem(api, dev)?,
        multiprocessors: attr(sys::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        driver_version,
        max_shared_per_block_optin: attr(
            sys::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )?,
    };
    Ok((dev, info))
}

/// Loads the driver, initializes it and describes every device; an error says why CUDA
/// cannot be used here.
///
/// # Errors
/// [`CudaError::Unavailable`], [`CudaError::NoDevice`], [`CudaError::NoDevices`] or a
/// driver failure.
pub fn probe() -> Result<Vec<CudaDeviceInfo>, CudaError> {
    let api = init_api()?;
    let version = result::driver_version(api)?;
    let count = result::device_count(api)?;
    if count == 0 {
        return Err(CudaError::NoDevices);
    }
    (0..count)
        .map(|i| device_info(api, i, version).map(|(_, info)| info))
        .collect()
}

struct Context {
    api: &'static DriverApi,
    dev: CUdevice,
    ctx: CUcontext,
    stream: CUstream,
    info: CudaDeviceInfo,
}

// SAFETY: driver handles are process-wide and the driver API is thread-safe; every use goes
// through `bind`, which makes the context current on the calling thread.
unsafe impl Send for Context {}
// SAFETY: as above; no method mutates the Rust-side fields.
unsafe impl Sync for Context {}

impl Context {
    /// Makes the context current on the calling thread unless the driver says it is: other
    /// CUDA code on the thread (cuBLAS, the runtime API, ...) may have changed it since.
    fn bind(&self) -> Result<(), CudaError> {
        if result::ctx_get_current(self.api)? != self.ctx {
            // SAFETY: `self.ctx` is retained until `self` drops.
            unsafe { result::ctx_set_current(self.api, self.ctx)? };
        }
        Ok(())
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // Errors here have no one to go to: the context is being torn down.
        if self.bind().is_ok() {
            // SAFETY: the stream was created in this context and nothing uses it any more
            // (every buffer, module and event holds an `Arc` of this context).
            let _ = unsafe { result::stream_destroy(self.api, self.stream) };
        }
        // SAFETY: pairs with the retain in `CudaDevice::open`.
        let _ = unsafe { result::primary_ctx_release(self.api, self.dev) };
    }
}

/// One CUDA device, opened: its primary context and a stream. Cheap to clone.
#[derive(Clone)]
pub struct CudaDevice {
    ctx: Arc<Context>,
}

impl fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaDevice")
            .field("info", &self.ctx.info)
            .finish_non_exhaustive()
    }
}

impl CudaDevice {
    /// Opens device `ordinal`.
    ///
    /// # Errors
    /// Why CUDA is unavailable, [`CudaError::DeviceOutOfRange`], or a driver failure.
    pub fn open(ordinal: usize) -> Result<Self, CudaError> {
        let api = init_api()?;
        let count = result::device_count(api)?;
        if ordinal >= count {
            return Err(if count == 0 {
                CudaError::NoDevices
            } else {
                CudaError::DeviceOutOfRange { ordinal, count }
            });
        }
        let version = result::driver_version(api)?;
        let (dev, info) = device_info(api, ordinal, version)?;
        let ctx = result::primary_ctx_retain(api, dev)?;
        let release = |e| {
            // SAFETY: pairs with the retain just above; nothing of the context escaped.
            let _ = unsafe { result::primary_ctx_release(api, dev) };
            e
        };
        // SAFETY: `ctx` was just retained.
        unsafe { result::ctx_set_current(api, ctx) }.map_err(release)?;
        let stream = result::stream_create(api).map_err(release)?;
        Ok(Self {
            ctx: Arc::new(Context {
                api,
                dev,
                ctx,
                stream,
                info,
            }),
        })
    }

    /// What the driver says about this device.
    pub fn info(&self) -> &CudaDeviceInfo {
        &self.ctx.info
    }

    /// (free, total) device memory in bytes.
    ///
    /// # Errors
    /// A driver failure.
    pub fn memory_info(&self) -> Result<(usize, usize), CudaError> {
        self.ctx.bind()?;
        result::mem_get_info(self.ctx.api)
    }

    /// Allocates `bytes` of device memory (a zero-size buffer allocates nothing).
    ///
    /// # Errors
    /// [`CudaError::OutOfMemory`] or a driver failure.
    pub fn alloc(&self, bytes: usize) -> Result<CudaBuffer, CudaError> {
        let ptr = if bytes == 0 {
            0
        } else {
            self.ctx.bind()?;
            result::mem_alloc(self.ctx.api, bytes)?
        };
        Ok(CudaBuffer {
            ctx: Arc::clone(&self.ctx),
            ptr,
            len: bytes,
        })
    }

    /// Loads a module from an image of the given kind. The image is checked first, so that
    /// the driver never reads past its end.
    ///
    /// # Errors
    /// [`CudaError::MalformedImage`], [`CudaError::PtxTooNew`], [`CudaError::ModuleLoad`].
    pub fn load_module(&self, image: &[u8], kind: CudaImageKind) -> Result<CudaModule, CudaError> {
        let owned_ptx;
        let image = match kind {
            CudaImageKind::Cubin => {
                check_cubin(image).map_err(|reason| CudaError::MalformedImage { kind, reason })?;
                image
            }
            CudaImageKind::Fatbin => {
                check_fatbin(image).map_err(|reason| CudaError::MalformedImage { kind, reason })?;
                image
            }
            CudaImageKind::Ptx => {
                owned_ptx = ptx_with_nul(image)
                    .map_err(|reason| CudaError::MalformedImage { kind, reason })?;
                &owned_ptx[..]
            }
        };
        self.ctx.bind()?;
        let api = self.ctx.api;
        // SAFETY: the image was checked above to be complete (cubin, fatbin) or
        // NUL-terminated (PTX), and the context is current.
        match unsafe { result::module_load_data(api, image) } {
            Ok(module) => Ok(CudaModule {
                inner: Arc::new(ModuleInner {
                    ctx: Arc::clone(&self.ctx),
                    module,
                }),
            }),
            Err((code, jit_log)) => {
                let (name, message) = result::describe(api, code);
                Err(if code == sys::CUDA_ERROR_UNSUPPORTED_PTX_VERSION {
                    CudaError::PtxTooNew {
                        driver_version: self.ctx.info.driver_version,
                        message,
                        jit_log,
                    }
                } else {
                    CudaError::ModuleLoad {
                        kind,
                        code,
                        name,
                        message,
                        jit_log,
                    }
                })
            }
        }
    }

    /// Launches `function` on this device's stream; it runs asynchronously.
    ///
    /// # Safety
    /// `params` holds one pointer per kernel parameter, each to a live value of exactly the
    /// parameter's type (device pointers as their 64-bit address), and every device pointer
    /// passed stays allocated until the kernel has finished.
    ///
    /// # Errors
    /// [`CudaError::WrongDevice`] or the driver's launch failure.
    pub unsafe fn launch(
        &self,
        function: &CudaFunction,
        grid: [u32; 3],
        block: [u32; 3],
        shared_mem_bytes: u32,
        params: *const *mut c_void,
    ) -> Result<(), CudaError> {
        if !Arc::ptr_eq(&function.module.ctx, &self.ctx) {
            return Err(CudaError::WrongDevice {
                what: "kernel",
                owner: function.module.ctx.info.ordinal,
                used_with: self.ctx.info.ordinal,
            });
        }
        self.ctx.bind()?;
        // SAFETY: the function's module is alive (held by `function`) and of this context.
        unsafe { self.prepare_shared(function.function, &function.name, shared_mem_bytes)? };
        // SAFETY: the function's module is alive (held by `function`) and of this context,
        // the stream is this context's, and the caller vouches for `params`.
        unsafe {
            result::launch_kernel(
                self.ctx.api,
                function.function,
                grid,
                block,
                shared_mem_bytes,
                self.ctx.stream,
                params,
            )
        }
    }

    /// Checks `dynamic` bytes of dynamic shared memory against the device and raises the
    /// kernel's maximum when the launch needs more than the default 48 KiB.
    ///
    /// # Safety
    /// `f` belongs to a live module of this context, which is current.
    unsafe fn prepare_shared(
        &self,
        f: CUfunction,
        kernel: &str,
        dynamic: u32,
    ) -> Result<(), CudaError> {
        if dynamic == 0 {
            return Ok(());
        }
        let api = self.ctx.api;
        // SAFETY: per this function's contract.
        let static_bytes = unsafe {
            result::func_get_attribute(api, f, sys::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?
        };
        let static_bytes = u32::try_from(static_bytes).unwrap_or(0);
        match dynamic_shared_opt_in(
            dynamic,
            static_bytes,
            self.ctx.info.max_shared_per_block_optin,
        ) {
            Ok(None) => Ok(()),
            // SAFETY: per this function's contract; the value fits i32 (it is at most the
            // device's opt-in maximum).
            Ok(Some(bytes)) => unsafe {
                result::func_set_attribute(
                    api,
                    f,
                    sys::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    i32::try_from(bytes).unwrap_or(i32::MAX),
                )
            },
            Err(reason) => Err(CudaError::SharedMemoryLimit {
                kernel: kernel.to_owned(),
                reason,
            }),
        }
    }

    /// Waits until all work on this device's stream is done; a kernel fault surfaces here.
    ///
    /// # Errors
    /// [`CudaError::KernelFault`] or a driver failure.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.ctx.bind()?;
        // SAFETY: the stream lives as long as the context.
        unsafe { result::stream_synchronize(self.ctx.api, self.ctx.stream) }
    }

    /// Copies `len` bytes from `src` to `dst` on the stream (both on this device).
    ///
    /// # Errors
    /// [`CudaError::CopyOutOfBounds`], [`CudaError::WrongDevice`] or a driver failure.
    pub fn copy_device_to_device(
        &self,
        dst: &mut CudaBuffer,
        src: &CudaBuffer,
        len: usize,
    ) -> Result<(), CudaError> {
        for b in [&*dst, src] {
            if !Arc::ptr_eq(&b.ctx, &self.ctx) {
                return Err(CudaError::WrongDevice {
                    what: "buffer",
                    owner: b.ctx.info.ordinal,
                    used_with: self.ctx.info.ordinal,
                });
            }
            if len > b.len {
                return Err(CudaError::CopyOutOfBounds {
                    len,
                    offset: 0,
                    size: b.len,
                });
            }
        }
        if len == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: both ranges were checked to lie in live allocations of this context.
        unsafe { result::memcpy_dtod_async(self.ctx.api, dst.ptr, src.ptr, len, self.ctx.stream) }
    }

    /// A new event on this device, for timing work on its stream.
    ///
    /// # Errors
    /// A driver failure.
    pub fn event(&self) -> Result<CudaEvent, CudaError> {
        self.ctx.bind()?;
        let event = result::event_create(self.ctx.api)?;
        Ok(CudaEvent {
            ctx: Arc::clone(&self.ctx),
            event,
        })
    }

    /// The raw context and stream, for code that calls the driver directly (benchmarks).
    pub fn raw_handles(&self) -> (CUcontext, CUstream) {
        (self.ctx.ctx, self.ctx.stream)
    }
}

/// Device memory on one CUDA device, freed on drop.
pub struct CudaBuffer {
    ctx: Arc<Context>,
    ptr: CUdeviceptr,
    len: usize,
}

impl fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaBuffer")
            .field("device", &self.ctx.info.ordinal)
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .finish()
    }
}

impl CudaBuffer {
    /// The device address (0 for an empty buffer).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn check(&self, offset: usize, len: usize) -> Result<(), CudaError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(CudaError::CopyOutOfBounds {
                len,
                offset,
                size: self.len,
            }),
        }
    }

    /// Copies `src` into the buffer at `offset`, ordered after all work queued on the
    /// device's stream; `src` may be reused when this returns.
    ///
    /// # Errors
    /// [`CudaError::CopyOutOfBounds`], a kernel fault or a driver failure.
    pub fn copy_from_host(&mut self, offset: usize, src: &[u8]) -> Result<(), CudaError> {
        self.check(offset, src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: the range was checked to lie in this live allocation; the stream lives as
        // long as the context.
        unsafe { result::memcpy_htod(self.ctx.api, self.ptr + offset as u64, src, self.ctx.stream) }
    }

    /// Copies from the buffer at `offset` into `dst`, after all work queued on the device's
    /// stream.
    ///
    /// # Errors
    /// [`CudaError::CopyOutOfBounds`], a kernel fault or a driver failure.
    pub fn copy_to_host(&self, offset: usize, dst: &mut [u8]) -> Result<(), CudaError> {
        self.check(offset, dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: the range was checked to lie in this live allocation; the stream lives as
        // long as the context.
        unsafe { result::memcpy_dtoh(self.ctx.api, dst, self.ptr + offset as u64, self.ctx.stream) }
    }

    /// Sets every byte to `value`, ordered after all work queued on the device's stream.
    ///
    /// # Errors
    /// A kernel fault or a driver failure.
    pub fn fill(&mut self, value: u8) -> Result<(), CudaError> {
        if self.len == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: the whole live allocation, on this context's stream.
        unsafe { result::memset_d8(self.ctx.api, self.ptr, value, self.len, self.ctx.stream) }
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        if self.ptr != 0 && self.ctx.bind().is_ok() {
            // SAFETY: allocated in this context by `CudaDevice::alloc`; freed once, here.
            // cuMemFree waits for work using it to finish.
            let _ = unsafe { result::mem_free(self.ctx.api, self.ptr) };
        }
    }
}

// SAFETY: the buffer is a device address plus a shared context; see `Context`.
unsafe impl Send for CudaBuffer {}
// SAFETY: `&CudaBuffer` allows only reads of device memory (copy_to_host).
unsafe impl Sync for CudaBuffer {}

struct ModuleInner {
    ctx: Arc<Context>,
    module: CUmodule,
}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: the module was loaded in this context; every function holds an `Arc`
            // of this value, so none is left.
            let _ = unsafe { result::module_unload(self.ctx.api, self.module) };
        }
    }
}

// SAFETY: module handles are process-wide; see `Context`.
unsafe impl Send for ModuleInner {}
// SAFETY: the module is immutable after loading.
unsafe impl Sync for ModuleInner {}

/// A loaded module, unloaded when the last clone and the last function of it drop.
#[derive(Clone)]
pub struct CudaModule {
    inner: Arc<ModuleInner>,
}

impl fmt::Debug for CudaModule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaModule")
            .field("device", &self.inner.ctx.info.ordinal)
            .finish_non_exhaustive()
    }
}

impl CudaModule {
    /// Looks up a kernel by its symbol name.
    ///
    /// # Errors
    /// [`CudaError::InvalidKernelName`] or [`CudaError::KernelNotFound`].
    pub fn function(&self, name: &str) -> Result<CudaFunction, CudaError> {
        let c = result::c_name(name)?;
        self.inner.ctx.bind()?;
        let api = self.inner.ctx.api;
        // SAFETY: the module is alive while `self` is.
        match unsafe { result::module_get_function(api, self.inner.module, &c) } {
            Ok(function) => Ok(CudaFunction {
                module: Arc::clone(&self.inner),
                function,
                name: name.to_owned(),
            }),
            Err(code) if code == sys::CUDA_ERROR_NOT_FOUND => Err(CudaError::KernelNotFound {
                kernel: name.to_owned(),
                message: result::describe(api, code).1,
            }),
            Err(code) => Err(result::error(api, "cuModuleGetFunction", code)),
        }
    }
}

/// A kernel of a loaded module; keeps the module loaded.
#[derive(Clone)]
pub struct CudaFunction {
    module: Arc<ModuleInner>,
    function: CUfunction,
    name: String,
}

impl fmt::Debug for CudaFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaFunction")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl CudaFunction {
    /// The kernel's symbol name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The raw function handle, for code that calls the driver directly (benchmarks).
    pub fn raw_handle(&self) -> CUfunction {
        self.function
    }
}

// SAFETY: function handles are process-wide and immutable; see `Context`.
unsafe impl Send for CudaFunction {}
// SAFETY: as above.
unsafe impl Sync for CudaFunction {}

/// An event on a device's stream, for timing.
pub struct CudaEvent {
    ctx: Arc<Context>,
    event: CUevent,
}

impl fmt::Debug for CudaEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaEvent")
            .field("device", &self.ctx.info.ordinal)
            .finish_non_exhaustive()
    }
}

impl CudaEvent {
    /// Records the event after the work queued so far on the device's stream.
    ///
    /// # Errors
    /// A driver failure.
    pub fn record(&self) -> Result<(), CudaError> {
        self.ctx.bind()?;
        // SAFETY: the event and stream are of this live context.
        unsafe { result::event_record(self.ctx.api, self.event, self.ctx.stream) }
    }

    /// Milliseconds from `start` to `self`, waiting for `self` to complete.
    ///
    /// # Errors
    /// A driver failure (e.g. an event never recorded).
    pub fn elapsed_ms_since(&self, start: &CudaEvent) -> Result<f32, CudaError> {
        self.ctx.bind()?;
        // SAFETY: both events are alive.
        unsafe {
            result::event_synchronize(self.ctx.api, self.event)?;
            result::event_elapsed_ms(self.ctx.api, start.event, self.event)
        }
    }
}

impl Drop for CudaEvent {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: created in this context; destroyed once.
            let _ = unsafe { result::event_destroy(self.ctx.api, self.event) };
        }
    }
}

// SAFETY: event handles are process-wide; see `Context`.
unsafe impl Send for CudaEvent {}
// SAFETY: as above.
unsafe impl Sync for CudaEvent {}

fn rd<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// Checks that `image` is a 64-bit little-endian ELF for `EM_CUDA` whose headers and tables
/// all lie inside the slice.
///
/// # Errors
/// A description of the first problem.
pub fn check_cubin(image: &[u8]) -> Result<(), String> {
    const EM_CUDA: u16 = 190;
    if image.get(..4) != Some(b"\x7fELF") {
        return Err("no ELF magic".into());
    }
    if image.get(4) != Some(&2) || image.get(5) != Some(&1) {
        return Err("not a 64-bit little-endian ELF".into());
    }
    let too_short = || "truncated ELF header".to_owned();
    let machine = u16::from_le_bytes(rd(image, 18).ok_or_else(too_short)?);
    if machine != EM_CUDA {
        return Err(format!("e_machine is {machine}, not EM_CUDA (190)"));
    }
    let u64_at = |at| rd(image, at).map(u64::from_le_bytes).ok_or_else(too_short);
    let u16_at = |at| {
        rd(image, at)
            .map(u16::from_le_bytes)
            .map(u64::from)
            .ok_or_else(too_short)
    };
    let tables = [
        ("program", u64_at(32)?, u16_at(56)?, u16_at(54)?),
        ("section", u64_at(40)?, u16_at(60)?, u16_at(58)?),
    ];
    for (what, off, num, entsize) in tables {
        let end = off
            .checked_add(num * entsize)
            .ok_or_else(|| format!("{what} header table offset overflows"))?;
        if end > image.len() as u64 {
            return Err(format!(
                "{what} header table ends at {end}, past the image's {} bytes",
                image.len()
            ));
        }
    }
    Ok(())
}

/// Checks that `image` is an NVIDIA fat binary whose declared size fits the slice.
///
/// # Errors
/// A description of the first problem.
pub fn check_fatbin(image: &[u8]) -> Result<(), String> {
    const MAGIC: u32 = 0xBA55_ED50;
    let magic = rd(image, 0)
        .map(u32::from_le_bytes)
        .ok_or("truncated fat binary header")?;
    if magic != MAGIC {
        return Err(format!("magic {magic:#x}, not {MAGIC:#x}"));
    }
    let header = rd(image, 6)
        .map(u16::from_le_bytes)
        .ok_or("truncated fat binary header")?;
    let size = rd(image, 8)
        .map(u64::from_le_bytes)
        .ok_or("truncated fat binary header")?;
    let end = u64::from(header)
        .checked_add(size)
        .ok_or("fat binary size overflows")?;
    if end > image.len() as u64 {
        return Err(format!(
            "fat binary declares {end} bytes, the image has {}",
            image.len()
        ));
    }
    Ok(())
}

/// PTX text with exactly one trailing NUL, as the driver reads it.
///
/// # Errors
/// When the text has a NUL before its end or does not look like PTX.
pub fn ptx_with_nul(image: &[u8]) -> Result<Vec<u8>, String> {
    let text = image.strip_suffix(&[0]).unwrap_or(image);
    let text = match text.iter().rposition(|&b| b != 0) {
        Some(last) => &text[..=last],
        None => return Err("empty PTX".into()),
    };
    if let Some(at) = text.iter().position(|&b| b == 0) {
        return Err(format!("NUL byte at offset {at} inside the PTX text"));
    }
    if !text.windows(8).any(|w| w == b".version") {
        return Err("no `.version` directive: not PTX text".into());
    }
    let mut v = Vec::with_capacity(text.len() + 1);
    v.extend_from_slice(text);
    v.push(0);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elf(machine: u16, shoff: u64, shnum: u16) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[18..20].copy_from_slice(&machine.to_le_bytes());
        b[40..48].copy_from_slice(&shoff.to_le_bytes());
        b[58..60].copy_from_slice(&64u16.to_le_bytes());
        b[60..62].copy_from_slice(&shnum.to_le_bytes());
        b
    }

    #[test]
    fn cubin_checks() {
        let mut ok = elf(190, 64, 2);
        ok.resize(64 + 128, 0);
        assert_eq!(check_cubin(&ok), Ok(()));
        assert!(
            check_cubin(&elf(62, 64, 0))
                .unwrap_err()
                .contains("EM_CUDA")
        );
        assert!(
            check_cubin(&elf(190, 64, 2))
                .unwrap_err()
                .contains("past the image")
        );
        assert!(
            check_cubin(&elf(190, u64::MAX, 2))
                .unwrap_err()
                .contains("overflows")
        );
        assert!(
            check_cubin(b"\x7fELF\x02\x01")
                .unwrap_err()
                .contains("truncated")
        );
        assert!(check_cubin(b"// PTX").unwrap_err().contains("magic"));
    }

    #[test]
    fn fatbin_checks() {
        let mut fb = Vec::new();
        fb.extend_from_slice(&0xBA55_ED50u32.to_le_bytes());
        fb.extend_from_slice(&1u16.to_le_bytes());
        fb.extend_from_slice(&16u16.to_le_bytes());
        fb.extend_from_slice(&8u64.to_le_bytes());
        assert!(check_fatbin(&fb).unwrap_err().contains("declares 24"));
        fb.extend_from_slice(&[0; 8]);
        assert_eq!(check_fatbin(&fb), Ok(()));
        assert!(check_fatbin(&fb[..10]).is_err());
        assert!(
            check_fatbin(b"\x7fELF............")
                .unwrap_err()
                .contains("magic")
        );
    }

    #[test]
    fn ptx_gets_one_nul() {
        let p = b".version 7.8\n.target sm_80\n";
        let mut want = p.to_vec();
        want.push(0);
        assert_eq!(ptx_with_nul(p).unwrap(), want);
        let mut padded = p.to_vec();
        padded.extend_from_slice(&[0, 0, 0]);
        assert_eq!(ptx_with_nul(&padded).unwrap(), want);
        assert!(
            ptx_with_nul(b".version 7.8\0junk")
                .unwrap_err()
                .contains("offset 12")
        );
        assert!(ptx_with_nul(b"").is_err());
        assert!(ptx_with_nul(b"hello").unwrap_err().contains("not PTX"));
    }

    #[test]
    fn missing_library_is_an_error_listing_the_names() {
        let err =
            sys::DriverApi::load(&["libdoes-not-exist-offload.so.1", "/nonexistent/libcuda.so"])
                .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("libdoes-not-exist-offload.so.1"), "{msg}");
        assert!(msg.contains("/nonexistent/libcuda.so"), "{msg}");
    }

    #[test]
    fn library_without_the_symbols_is_missing_symbol() {
        // libc opens everywhere and has no CUDA entry points.
        let err = sys::DriverApi::load(&["libc.so.6"]).unwrap_err();
        assert!(
            matches!(
                err,
                sys::LoadError::MissingSymbol {
                    symbol: "cuInit",
                    ..
                }
            ),
            "{err}"
        );
    }

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
            let reason = result::no_device_reason(code).unwrap_or_else(|| panic!("{code}"));
            assert!(reason.contains(words), "{code}: {reason}");
        }
        // 35 is the runtime API's cudaErrorInsufficientDriver; as a CUresult it means nothing.
        for code in [0, 1, 3, 35, 101, 999] {
            assert_eq!(result::no_device_reason(code), None, "{code}");
        }
    }

    #[test]
    fn kernel_fault_codes() {
        for c in [700, 702, 710, 714, 715, 716, 717, 718, 719] {
            assert!(result::is_kernel_fault(c), "{c}");
        }
        for c in [0, 1, 2, 200, 209, 222, 701, 999] {
            assert!(!result::is_kernel_fault(c), "{c}");
        }
    }
}
