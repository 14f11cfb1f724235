//! Thin `Result` wrappers over [`super::sys`], each turning a `hipError_t` into a
//! [`HipError`] with the runtime's own name and message.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::ptr;

use super::HipError;
use super::sys::{self, HipApi, hipDeviceProp_tR0600, hipError_t, hipFunction_t, hipModule_t};

/// The HIP table, or [`HipError::Unavailable`].
pub fn api() -> Result<&'static HipApi, HipError> {
    sys::api().map_err(HipError::Unavailable)
}

fn static_str(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: hipGetErrorName/hipGetErrorString return pointers to static NUL-terminated
    // strings.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// The runtime's name (`hipErrorOutOfMemory`) and message for `code`.
pub fn describe(api: &HipApi, code: hipError_t) -> (String, String) {
    // SAFETY: both take a code by value and return a static string (or null).
    let (name, message) = unsafe { ((api.hipGetErrorName)(code), (api.hipGetErrorString)(code)) };
    (
        static_str(name).unwrap_or_else(|| format!("HIP error {code}")),
        static_str(message).unwrap_or_else(|| "unknown error code".to_owned()),
    )
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

/// The [`HipError`] for a failing `code` returned by `call`.
pub fn error(api: &HipApi, call: &'static str, code: hipError_t) -> HipError {
    let (name, message) = describe(api, code);
    if is_kernel_fault(code) {
        HipError::KernelFault {
            call,
            code,
            name,
            message,
        }
    } else {
        HipError::Runtime {
            call,
            code,
            name,
            message,
        }
    }
}

/// `Ok` for `hipSuccess`, else [`error`].
pub fn check(api: &HipApi, call: &'static str, code: hipError_t) -> Result<(), HipError> {
    if code == sys::hipSuccess {
        Ok(())
    } else {
        Err(error(api, call, code))
    }
}

/// `hipInit(0)`; no device or an old driver become [`HipError::NoDevice`].
pub fn init(api: &HipApi) -> Result<(), HipError> {
    // SAFETY: takes flags (0) only.
    let code = unsafe { (api.hipInit)(0) };
    match code {
        sys::hipSuccess => Ok(()),
        sys::hipErrorNoDevice | sys::hipErrorInsufficientDriver => {
            let (name, message) = describe(api, code);
            Err(HipError::NoDevice {
                code,
                name,
                message,
            })
        }
        _ => check(api, "hipInit", code),
    }
}

/// The driver version number HIP reports.
pub fn driver_version(api: &HipApi) -> Result<i32, HipError> {
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    check(api, "hipDriverGetVersion", unsafe {
        (api.hipDriverGetVersion)(&raw mut v)
    })?;
    Ok(v)
}

/// Number of HIP devices; [`HipError::NoDevice`] is folded into 0.
pub fn device_count(api: &HipApi) -> Result<usize, HipError> {
    let mut n: c_int = 0;
    // SAFETY: writes one int.
    let code = unsafe { (api.hipGetDeviceCount)(&raw mut n) };
    if code == sys::hipErrorNoDevice {
        return Ok(0);
    }
    check(api, "hipGetDeviceCount", code)?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// The device current on the calling thread.
pub fn get_device(api: &HipApi) -> Result<c_int, HipError> {
    let mut ordinal: c_int = -1;
    // SAFETY: writes one int.
    check(api, "hipGetDevice", unsafe {
        (api.hipGetDevice)(&raw mut ordinal)
    })?;
    Ok(ordinal)
}

/// Makes `ordinal` the calling thread's current device.
pub fn set_device(api: &HipApi, ordinal: c_int) -> Result<(), HipError> {
    // SAFETY: takes an int.
    check(api, "hipSetDevice", unsafe { (api.hipSetDevice)(ordinal) })
}

/// The device's marketing name.
pub fn device_name(api: &HipApi, ordinal: c_int) -> Result<String, HipError> {
    let mut dev = 0;
    // SAFETY: writes one device handle.
    check(api, "hipDeviceGet", unsafe {
        (api.hipDeviceGet)(&raw mut dev, ordinal)
    })?;
    let mut buf = [0 as c_char; 256];
    // SAFETY: writes at most 256 bytes, NUL-terminated.
    check(api, "hipDeviceGetName", unsafe {
        (api.hipDeviceGetName)(buf.as_mut_ptr(), 256, dev)
    })?;
    Ok(c_chars(&buf))
}

/// Total device memory.
pub fn device_total_mem(api: &HipApi, ordinal: c_int) -> Result<usize, HipError> {
    let mut dev = 0;
    // SAFETY: writes one device handle.
    check(api, "hipDeviceGet", unsafe {
        (api.hipDeviceGet)(&raw mut dev, ordinal)
    })?;
    let mut v = 0usize;
    // SAFETY: writes one size_t.
    check(api, "hipDeviceTotalMem", unsafe {
        (api.hipDeviceTotalMem)(&raw mut v, dev)
    })?;
    Ok(v)
}

/// One integer attribute.
pub fn device_attribute(api: &HipApi, ordinal: c_int, attr: c_int) -> Result<i32, HipError> {
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    check(api, "hipDeviceGetAttribute", unsafe {
        (api.hipDeviceGetAttribute)(&raw mut v, attr, ordinal)
    })?;
    Ok(v)
}

/// `hipGetDevicePropertiesR0600`, into a zeroed buffer with slack after the struct.
pub fn device_properties(
    api: &HipApi,
    ordinal: c_int,
) -> Result<Box<hipDeviceProp_tR0600>, HipError> {
    #[repr(C)]
    struct Slack {
        props: hipDeviceProp_tR0600,
        _slack: [u8; 4096],
    }
    // SAFETY: every field of `Slack` is an integer, an array of integers or a raw pointer,
    // for which all-zero bytes are valid.
    let mut buf: Box<Slack> = Box::new(unsafe { std::mem::zeroed() });
    // SAFETY: the buffer is at least as large as the R0600 struct the call writes.
    check(api, "hipGetDevicePropertiesR0600", unsafe {
        (api.hipGetDevicePropertiesR0600)(&raw mut buf.props, ordinal)
    })?;
    // SAFETY: as above, all-zero is valid for the struct; it is immediately overwritten.
    let mut props: Box<hipDeviceProp_tR0600> = Box::new(unsafe { std::mem::zeroed() });
    // SAFETY: both are valid, distinct, and of the struct's size.
    unsafe { ptr::copy_nonoverlapping(&raw const buf.props, &raw mut *props, 1) };
    Ok(props)
}

/// A NUL-terminated `c_char` array as a string (lossy).
pub fn c_chars(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c.to_ne_bytes()[0])
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Allocates `bytes` (> 0) on the current device.
pub fn malloc(api: &HipApi, bytes: usize) -> Result<*mut c_void, HipError> {
    let mut p: *mut c_void = ptr::null_mut();
    // SAFETY: writes one pointer.
    let code = unsafe { (api.hipMalloc)(&raw mut p, bytes) };
    if code == sys::hipErrorOutOfMemory {
        let (_, message) = describe(api, code);
        let mut free = 0usize;
        let mut total = 0usize;
        // SAFETY: writes two size_t.
        let ok = unsafe { (api.hipMemGetInfo)(&raw mut free, &raw mut total) } == sys::hipSuccess;
        return Err(HipError::OutOfMemory {
            bytes,
            free: ok.then_some(free),
            message,
        });
    }
    check(api, "hipMalloc", code)?;
    Ok(p)
}

/// Frees device memory.
///
/// # Safety
/// `p` came from [`malloc`] and is not used afterwards.
pub unsafe fn free(api: &HipApi, p: *mut c_void) -> Result<(), HipError> {
    // SAFETY: per the caller.
    check(api, "hipFree", unsafe { (api.hipFree)(p) })
}

/// Sets `bytes` bytes at `dst` to `value`.
///
/// # Safety
/// The range lies in one live allocation.
pub unsafe fn memset(
    api: &HipApi,
    dst: *mut c_void,
    value: u8,
    bytes: usize,
) -> Result<(), HipError> {
    // SAFETY: per the caller.
    check(api, "hipMemset", unsafe {
        (api.hipMemset)(dst, c_int::from(value), bytes)
    })
}

/// Copies `src` to `dst` on the device.
///
/// # Safety
/// `dst .. dst + src.len()` lies in one live allocation.
pub unsafe fn memcpy_htod(api: &HipApi, dst: *mut c_void, src: &[u8]) -> Result<(), HipError> {
    // SAFETY: `src` is readable for its length (HIP's prototype is non-const but only
    // reads); the caller vouches for `dst`.
    check(api, "hipMemcpyHtoD", unsafe {
        (api.hipMemcpyHtoD)(dst, src.as_ptr().cast_mut().cast(), src.len())
    })
}

/// Copies device memory at `src` into `dst`.
///
/// # Safety
/// `src .. src + dst.len()` lies in one live allocation.
pub unsafe fn memcpy_dtoh(api: &HipApi, dst: &mut [u8], src: *mut c_void) -> Result<(), HipError> {
    // SAFETY: `dst` is writable for its length; the caller vouches for `src`.
    check(api, "hipMemcpyDtoH", unsafe {
        (api.hipMemcpyDtoH)(dst.as_mut_ptr().cast(), src, dst.len())
    })
}

/// Copies between device allocations.
///
/// # Safety
/// Both ranges lie in live allocations.
pub unsafe fn memcpy_dtod(
    api: &HipApi,
    dst: *mut c_void,
    src: *mut c_void,
    bytes: usize,
) -> Result<(), HipError> {
    // SAFETY: per the caller.
    check(api, "hipMemcpyDtoD", unsafe {
        (api.hipMemcpyDtoD)(dst, src, bytes)
    })
}

/// Waits for all work on the current device.
pub fn device_synchronize(api: &HipApi) -> Result<(), HipError> {
    // SAFETY: no arguments.
    check(api, "hipDeviceSynchronize", unsafe {
        (api.hipDeviceSynchronize)()
    })
}

/// Loads a code object on the current device.
///
/// # Safety
/// `image` is a complete code object: every offset in its headers lies inside the slice.
pub unsafe fn module_load_data(api: &HipApi, image: &[u8]) -> Result<hipModule_t, hipError_t> {
    let mut m: hipModule_t = ptr::null_mut();
    // SAFETY: per the caller; writes one module handle.
    let code = unsafe { (api.hipModuleLoadData)(&raw mut m, image.as_ptr().cast()) };
    if code == sys::hipSuccess {
        Ok(m)
    } else {
        Err(code)
    }
}

/// Looks up a kernel.
///
/// # Safety
/// `module` is live.
pub unsafe fn module_get_function(
    api: &HipApi,
    module: hipModule_t,
    name: &CStr,
) -> Result<hipFunction_t, hipError_t> {
    let mut f: hipFunction_t = ptr::null_mut();
    // SAFETY: `name` is NUL-terminated; `module` is live per the caller.
    let code = unsafe { (api.hipModuleGetFunction)(&raw mut f, module, name.as_ptr()) };
    if code == sys::hipSuccess {
        Ok(f)
    } else {
        Err(code)
    }
}

/// Unloads a module.
///
/// # Safety
/// `module` is live and none of its functions is used afterwards.
pub unsafe fn module_unload(api: &HipApi, module: hipModule_t) -> Result<(), HipError> {
    // SAFETY: per the caller.
    check(api, "hipModuleUnload", unsafe {
        (api.hipModuleUnload)(module)
    })
}

/// Launches `f` on the null stream of the current device.
///
/// # Safety
/// `f` belongs to a live module of the current device and `params` holds one pointer per
/// kernel parameter, each to a value of the parameter's type.
pub unsafe fn module_launch_kernel(
    api: &HipApi,
    f: hipFunction_t,
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem_bytes: u32,
    params: *const *mut c_void,
) -> Result<(), HipError> {
    // SAFETY: per the caller; HIP only reads `params`.
    let code = unsafe {
        (api.hipModuleLaunchKernel)(
            f,
            grid[0] as c_uint,
            grid[1] as c_uint,
            grid[2] as c_uint,
            block[0] as c_uint,
            block[1] as c_uint,
            block[2] as c_uint,
            shared_mem_bytes as c_uint,
            ptr::null_mut(),
            params.cast_mut(),
            ptr::null_mut(),
        )
    };
    check(api, "hipModuleLaunchKernel", code)
}
