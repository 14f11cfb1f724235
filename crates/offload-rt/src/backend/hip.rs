//! The HIP backend, over `libamdhip64` loaded at run time (ROCm 6 or newer).
//!
//! Three layers: [`sys`] (entry points loaded once, fallible), [`result`] (one wrapper per
//! call) and the RAII types here. The device's full target ID (`gcnArchName`, e.g.
//! `gfx90a:sramecc+:xnack-`) is what image selection matches code objects against.
//!
//! HIP's current device is per thread: every operation first makes its device current on
//! the calling thread. Work goes to the device's null stream, which orders it.
//!
//! `OFFLOAD_HIP_LIBRARY` names the library to open instead of `libamdhip64.so`;
//! with `OFFLOAD_LOG=1`, why a device is not used and which image is loaded go to stderr.

mod backend;
pub mod result;
pub mod sys;

pub use backend::{HipBackend, open_backend, to_error};

use std::ffi::{CString, c_int, c_void};
use std::fmt;
use std::sync::Arc;

use sys::{HipApi, hipFunction_t, hipModule_t};

/// What can go wrong in the HIP backend. Runtime failures carry HIP's own error name and
/// message.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum HipError {
    /// The runtime library could not be loaded.
    #[error("HIP unavailable: {0}")]
    Unavailable(#[source] sys::LoadError),
    /// The runtime loaded but reports no usable device.
    #[error("HIP unavailable: hipInit failed: {name} ({code}): {message}")]
    NoDevice {
        /// HIP's code.
        code: i32,
        /// HIP's error name.
        name: String,
        /// HIP's message.
        message: String,
    },
    /// The runtime works but has no devices.
    #[error("HIP unavailable: the runtime reports no devices")]
    NoDevices,
    /// An ordinal past the last device.
    #[error("HIP device {ordinal} does not exist ({count} present)")]
    DeviceOutOfRange {
        /// The ordinal asked for.
        ordinal: usize,
        /// The number of devices.
        count: usize,
    },
    /// A runtime call failed.
    #[error("{call} failed: {name} ({code}): {message}")]
    Runtime {
        /// The HIP function.
        call: &'static str,
        /// HIP's code.
        code: i32,
        /// HIP's error name.
        name: String,
        /// HIP's message.
        message: String,
    },
    /// The device properties read back do not match what other calls report, so the
    /// `hipDeviceProp_tR0600` layout assumed here is not the runtime's.
    #[error(
        "device {ordinal}: hipGetDevicePropertiesR0600 disagrees with {check}; unsupported HIP ABI"
    )]
    PropertiesAbiMismatch {
        /// The device.
        ordinal: usize,
        /// What disagreed.
        check: String,
    },
    /// `gcnArchName` is not a target ID.
    #[error("device {ordinal}: gcnArchName {found:?} is not an AMD target ID")]
    BadArchName {
        /// The device.
        ordinal: usize,
        /// What was read.
        found: String,
    },
    /// Device memory is exhausted.
    #[error("out of device memory allocating {bytes} bytes ({}): {message}", .free.map_or_else(|| "free memory unknown".to_owned(), |f| format!("{f} bytes free")))]
    OutOfMemory {
        /// The size asked for.
        bytes: usize,
        /// Free memory when it failed, if known.
        free: Option<usize>,
        /// HIP's message.
        message: String,
    },
    /// A kernel faulted; HIP reports it at the next synchronizing call.
    #[error("kernel fault reported by {call}: {name} ({code}): {message}")]
    KernelFault {
        /// The call that reported it.
        call: &'static str,
        /// HIP's code.
        code: i32,
        /// HIP's error name.
        name: String,
        /// HIP's message.
        message: String,
    },
    /// The image is not a well-formed AMDGPU code object.
    #[error("malformed code object: {reason}")]
    MalformedImage {
        /// What is wrong.
        reason: String,
    },
    /// HIP rejected the code object (wrong target, ...).
    #[error("hipModuleLoadData rejected the code object: {name} ({code}): {message}")]
    ModuleLoad {
        /// HIP's code.
        code: i32,
        /// HIP's error name.
        name: String,
        /// HIP's message.
        message: String,
    },
    /// The module has no kernel of this name.
    #[error("no kernel `{kernel}` in the code object: {message}")]
    KernelNotFound {
        /// The kernel name.
        kernel: String,
        /// HIP's message.
        message: String,
    },
    /// A kernel name with an interior NUL byte.
    #[error("kernel name {name:?} contains a NUL byte")]
    InvalidKernelName {
        /// The name.
        name: String,
    },
    /// A copy that leaves a buffer.
    #[error("copy of {len} bytes at offset {offset} does not fit a device buffer of {size} bytes")]
    CopyOutOfBounds {
        /// Bytes to copy.
        len: usize,
        /// Offset in the buffer.
        offset: usize,
        /// The buffer's size.
        size: usize,
    },
    /// An object of one device used with another.
    #[error("{what} belongs to HIP device {owner}, not device {used_with}")]
    WrongDevice {
        /// What was passed.
        what: &'static str,
        /// Its device.
        owner: usize,
        /// The device it was used with.
        used_with: usize,
    },
}

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
}

fn c_ordinal(ordinal: usize) -> Result<c_int, HipError> {
    c_int::try_from(ordinal).map_err(|_| HipError::DeviceOutOfRange { ordinal, count: 0 })
}

fn device_info(
    api: &HipApi,
    ordinal: usize,
    driver_version: i32,
) -> Result<HipDeviceInfo, HipError> {
    let ord = c_ordinal(ordinal)?;
    let name = result::device_name(api, ord)?;
    let total_memory = result::device_total_mem(api, ord)?;
    let props = result::device_properties(api, ord)?;
    let props_name = result::c_chars(&props.name);
    if props_name != name {
        return Err(HipError::PropertiesAbiMismatch {
            ordinal,
            check: format!("hipDeviceGetName ({name:?} vs {props_name:?})"),
        });
    }
    if props.totalGlobalMem != total_memory {
        return Err(HipError::PropertiesAbiMismatch {
            ordinal,
            check: format!(
                "hipDeviceTotalMem ({total_memory} vs {})",
                props.totalGlobalMem
            ),
        });
    }
    let target_id = result::c_chars(&props.gcnArchName);
    if !offload_format::target_id::is_amdgpu_target_id_shaped(&target_id) {
        return Err(HipError::BadArchName {
            ordinal,
            found: target_id,
        });
    }
    let cus = result::device_attribute(api, ord, sys::hipDeviceAttributeMultiprocessorCount)?;
    Ok(HipDeviceInfo {
        ordinal,
        name,
        target_id,
        total_memory,
        compute_units: u32::try_from(cus).unwrap_or(0),
        driver_version,
    })
}

fn init_api() -> Result<&'static HipApi, HipError> {
    let api = result::api()?;
    result::init(api)?;
    Ok(api)
}

/// Loads HIP, initializes it and describes every device; an error says why HIP cannot be
/// used here.
///
/// # Errors
/// [`HipError::Unavailable`], [`HipError::NoDevice`], [`HipError::NoDevices`] or a runtime
/// failure.
pub fn probe() -> Result<Vec<HipDeviceInfo>, HipError> {
    let api = init_api()?;
    let version = result::driver_version(api)?;
    let count = result::device_count(api)?;
    if count == 0 {
        return Err(HipError::NoDevices);
    }
    (0..count).map(|i| device_info(api, i, version)).collect()
}

struct Context {
    api: &'static HipApi,
    ordinal: c_int,
    info: HipDeviceInfo,
}

impl Context {
    /// Makes the device current on the calling thread unless HIP says it is: other HIP code
    /// on the thread may have changed it since.
    fn bind(&self) -> Result<(), HipError> {
        if result::get_device(self.api)? != self.ordinal {
            result::set_device(self.api, self.ordinal)?;
        }
        Ok(())
    }
}

/// One HIP device, opened. Cheap to clone.
#[derive(Clone)]
pub struct HipDevice {
    ctx: Arc<Context>,
}

impl fmt::Debug for HipDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HipDevice")
            .field("info", &self.ctx.info)
            .finish_non_exhaustive()
    }
}

impl HipDevice {
    /// Opens device `ordinal`.
    ///
    /// # Errors
    /// Why HIP is unavailable, [`HipError::DeviceOutOfRange`], or a runtime failure.
    pub fn open(ordinal: usize) -> Result<Self, HipError> {
        let api = init_api()?;
        let count = result::device_count(api)?;
        if ordinal >= count {
            return Err(if count == 0 {
                HipError::NoDevices
            } else {
                HipError::DeviceOutOfRange { ordinal, count }
            });
        }
        let info = device_info(api, ordinal, result::driver_version(api)?)?;
        let ctx = Context {
            api,
            ordinal: c_ordinal(ordinal)?,
            info,
        };
        ctx.bind()?;
        Ok(Self { ctx: Arc::new(ctx) })
    }

    /// What HIP says about this device.
    pub fn info(&self) -> &HipDeviceInfo {
        &self.ctx.info
    }

    /// Allocates `bytes` of device memory (a zero-size buffer allocates nothing).
    ///
    /// # Errors
    /// [`HipError::OutOfMemory`] or a runtime failure.
    pub fn alloc(&self, bytes: usize) -> Result<HipBuffer, HipError> {
        let ptr = if bytes == 0 {
            std::ptr::null_mut()
        } else {
            self.ctx.bind()?;
            result::malloc(self.ctx.api, bytes)?
        };
        Ok(HipBuffer {
            ctx: Arc::clone(&self.ctx),
            ptr,
            len: bytes,
        })
    }

    /// Loads a code object, checked first so that HIP never reads past its end.
    ///
    /// # Errors
    /// [`HipError::MalformedImage`] or [`HipError::ModuleLoad`].
    pub fn load_module(&self, image: &[u8]) -> Result<HipModule, HipError> {
        check_code_object(image).map_err(|reason| HipError::MalformedImage { reason })?;
        self.ctx.bind()?;
        // SAFETY: the code object's header tables were checked to lie inside `image`.
        match unsafe { result::module_load_data(self.ctx.api, image) } {
            Ok(module) => Ok(HipModule {
                inner: Arc::new(ModuleInner {
                    ctx: Arc::clone(&self.ctx),
                    module,
                }),
            }),
            Err(code) => {
                let (name, message) = result::describe(self.ctx.api, code);
                Err(HipError::ModuleLoad {
                    code,
                    name,
                    message,
                })
            }
        }
    }

    /// Launches `function`; it runs asynchronously.
    ///
    /// # Safety
    /// `params` holds one pointer per kernel parameter, each to a live value of exactly the
    /// parameter's type, and every device pointer passed stays allocated until the kernel
    /// has finished.
    ///
    /// # Errors
    /// [`HipError::WrongDevice`] or HIP's launch failure.
    pub unsafe fn launch(
        &self,
        function: &HipFunction,
        grid: [u32; 3],
        block: [u32; 3],
        shared_mem_bytes: u32,
        params: *const *mut c_void,
    ) -> Result<(), HipError> {
        if !Arc::ptr_eq(&function.module.ctx, &self.ctx) {
            return Err(HipError::WrongDevice {
                what: "kernel",
                owner: function.module.ctx.info.ordinal,
                used_with: self.ctx.info.ordinal,
            });
        }
        self.ctx.bind()?;
        // SAFETY: the module is alive (held by `function`) and of this device; the caller
        // vouches for `params`.
        unsafe {
            result::module_launch_kernel(
                self.ctx.api,
                function.function,
                grid,
                block,
                shared_mem_bytes,
                params,
            )
        }
    }

    /// Waits for all work on this device; a kernel fault surfaces here.
    ///
    /// # Errors
    /// [`HipError::KernelFault`] or a runtime failure.
    pub fn synchronize(&self) -> Result<(), HipError> {
        self.ctx.bind()?;
        result::device_synchronize(self.ctx.api)
    }
}

/// Device memory on one HIP device, freed on drop.
pub struct HipBuffer {
    ctx: Arc<Context>,
    ptr: *mut c_void,
    len: usize,
}

impl fmt::Debug for HipBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HipBuffer")
            .field("device", &self.ctx.info.ordinal)
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}

impl HipBuffer {
    /// The device address (0 for an empty buffer).
    pub fn device_ptr(&self) -> u64 {
        self.ptr as u64
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn range(&self, offset: usize, len: usize) -> Result<*mut c_void, HipError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(self.ptr.wrapping_byte_add(offset)),
            _ => Err(HipError::CopyOutOfBounds {
                len,
                offset,
                size: self.len,
            }),
        }
    }

    /// Copies `src` into the buffer at `offset` (after earlier work on the device).
    ///
    /// # Errors
    /// [`HipError::CopyOutOfBounds`], a kernel fault or a runtime failure.
    pub fn copy_from_host(&mut self, offset: usize, src: &[u8]) -> Result<(), HipError> {
        let dst = self.range(offset, src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: the range was checked to lie in this live allocation.
        unsafe { result::memcpy_htod(self.ctx.api, dst, src) }
    }

    /// Copies from the buffer at `offset` into `dst` (after earlier work on the device).
    ///
    /// # Errors
    /// [`HipError::CopyOutOfBounds`], a kernel fault or a runtime failure.
    pub fn copy_to_host(&self, offset: usize, dst: &mut [u8]) -> Result<(), HipError> {
        let src = self.range(offset, dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: the range was checked to lie in this live allocation.
        unsafe { result::memcpy_dtoh(self.ctx.api, dst, src) }
    }

    /// Copies `len` bytes from `src` (same device) to the start of this buffer.
    ///
    /// # Errors
    /// [`HipError::CopyOutOfBounds`], [`HipError::WrongDevice`] or a runtime failure.
    pub fn copy_from_device(&mut self, src: &HipBuffer, len: usize) -> Result<(), HipError> {
        if !Arc::ptr_eq(&self.ctx, &src.ctx) {
            return Err(HipError::WrongDevice {
                what: "buffer",
                owner: src.ctx.info.ordinal,
                used_with: self.ctx.info.ordinal,
            });
        }
        let dst = self.range(0, len)?;
        let from = src.range(0, len)?;
        if len == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: both ranges were checked to lie in live allocations of this device.
        unsafe { result::memcpy_dtod(self.ctx.api, dst, from, len) }
    }

    /// Sets every byte to `value`.
    ///
    /// # Errors
    /// A kernel fault or a runtime failure.
    pub fn fill(&mut self, value: u8) -> Result<(), HipError> {
        if self.len == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: the whole live allocation.
        unsafe { result::memset(self.ctx.api, self.ptr, value, self.len) }
    }
}

impl Drop for HipBuffer {
    fn drop(&mut self) {
        if !self.ptr.is_null() && self.ctx.bind().is_ok() {
            // SAFETY: allocated by `HipDevice::alloc`; freed once, here. hipFree waits for
            // the device's work to finish.
            let _ = unsafe { result::free(self.ctx.api, self.ptr) };
        }
    }
}

// SAFETY: a device address plus a shared context; HIP is thread-safe and every use binds
// the device on the calling thread.
unsafe impl Send for HipBuffer {}
// SAFETY: `&HipBuffer` allows only reads of device memory.
unsafe impl Sync for HipBuffer {}

struct ModuleInner {
    ctx: Arc<Context>,
    module: hipModule_t,
}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: loaded on this device; every function holds an `Arc` of this value.
            let _ = unsafe { result::module_unload(self.ctx.api, self.module) };
        }
    }
}

// SAFETY: module handles are process-wide and immutable after loading.
unsafe impl Send for ModuleInner {}
// SAFETY: as above.
unsafe impl Sync for ModuleInner {}

/// A loaded code object, unloaded when the last clone and the last function of it drop.
#[derive(Clone)]
pub struct HipModule {
    inner: Arc<ModuleInner>,
}

impl fmt::Debug for HipModule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HipModule")
            .field("device", &self.inner.ctx.info.ordinal)
            .finish_non_exhaustive()
    }
}

impl HipModule {
    /// Looks up a kernel by its symbol name.
    ///
    /// # Errors
    /// [`HipError::InvalidKernelName`] or [`HipError::KernelNotFound`].
    pub fn function(&self, name: &str) -> Result<HipFunction, HipError> {
        let c = CString::new(name).map_err(|_| HipError::InvalidKernelName {
            name: name.to_owned(),
        })?;
        let api = self.inner.ctx.api;
        self.inner.ctx.bind()?;
        // SAFETY: the module is alive while `self` is.
        match unsafe { result::module_get_function(api, self.inner.module, &c) } {
            Ok(function) => Ok(HipFunction {
                module: Arc::clone(&self.inner),
                function,
                name: name.to_owned(),
            }),
            Err(code @ (sys::hipErrorNotFound | sys::hipErrorInvalidDeviceFunction)) => {
                Err(HipError::KernelNotFound {
                    kernel: name.to_owned(),
                    message: result::describe(api, code).1,
                })
            }
            Err(code) => Err(result::error(api, "hipModuleGetFunction", code)),
        }
    }
}

/// A kernel of a loaded code object; keeps it loaded.
#[derive(Clone)]
pub struct HipFunction {
    module: Arc<ModuleInner>,
    function: hipFunction_t,
    name: String,
}

impl fmt::Debug for HipFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HipFunction")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl HipFunction {
    /// The kernel's symbol name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The raw function handle.
    pub fn raw_handle(&self) -> hipFunction_t {
        self.function
    }
}

// SAFETY: function handles are process-wide and immutable.
unsafe impl Send for HipFunction {}
// SAFETY: as above.
unsafe impl Sync for HipFunction {}

/// Checks that `image` is a 64-bit little-endian ELF for `EM_AMDGPU` whose header tables lie
/// inside the slice.
///
/// # Errors
/// A description of the first problem.
pub fn check_code_object(image: &[u8]) -> Result<(), String> {
    const EM_AMDGPU: u16 = 224;
    fn rd<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
        b.get(at..at.checked_add(N)?)?.try_into().ok()
    }
    if image.get(..4) != Some(b"\x7fELF") {
        return Err("no ELF magic".into());
    }
    if image.get(4) != Some(&2) || image.get(5) != Some(&1) {
        return Err("not a 64-bit little-endian ELF".into());
    }
    let too_short = || "truncated ELF header".to_owned();
    let machine = u16::from_le_bytes(rd(image, 18).ok_or_else(too_short)?);
    if machine != EM_AMDGPU {
        return Err(format!("e_machine is {machine}, not EM_AMDGPU (224)"));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_object_checks() {
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        elf[18..20].copy_from_slice(&224u16.to_le_bytes());
        assert_eq!(check_code_object(&elf), Ok(()));
        elf[40..48].copy_from_slice(&64u64.to_le_bytes());
        elf[58..60].copy_from_slice(&64u16.to_le_bytes());
        elf[60..62].copy_from_slice(&3u16.to_le_bytes());
        assert!(check_code_object(&elf).unwrap_err().contains("ends at 256"));
        elf.resize(256, 0);
        assert_eq!(check_code_object(&elf), Ok(()));
        elf[18] = 190;
        assert!(check_code_object(&elf).unwrap_err().contains("EM_AMDGPU"));
        assert!(
            check_code_object(b"__CLANG_OFFLOAD_BUNDLE__")
                .unwrap_err()
                .contains("magic")
        );
        assert!(
            check_code_object(b"\x7fELF\x02\x01\0")
                .unwrap_err()
                .contains("truncated")
        );
    }

    #[test]
    fn missing_library_is_an_error() {
        let err = sys::HipApi::load(&["libamdhip64-not-here.so"]).unwrap_err();
        assert!(err.to_string().contains("libamdhip64-not-here.so"), "{err}");
        let err = sys::HipApi::load(&["libc.so.6"]).unwrap_err();
        assert!(
            matches!(
                err,
                sys::LoadError::MissingSymbol {
                    symbol: "hipInit",
                    ..
                }
            ),
            "{err}"
        );
    }
}
