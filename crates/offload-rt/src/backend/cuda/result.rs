//! Thin `Result` wrappers over [`super::sys`]: one function per driver call, each turning a
//! `CUresult` into a [`CudaError`] that carries the driver's own name and message.

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
use std::ptr;

use super::CudaError;
use super::sys::{
    self, CUcontext, CUdevice, CUdeviceptr, CUevent, CUfunction, CUmodule, CUresult, CUstream,
    DriverApi,
};

/// The driver table, or [`CudaError::Unavailable`].
pub fn api() -> Result<&'static DriverApi, CudaError> {
    sys::api().map_err(CudaError::Unavailable)
}

fn c_message(
    api: &DriverApi,
    f: unsafe extern "C" fn(CUresult, *mut *const c_char) -> CUresult,
    code: CUresult,
) -> Option<String> {
    let _ = api;
    let mut p: *const c_char = ptr::null();
    // SAFETY: `f` is cuGetErrorName/cuGetErrorString, which write a pointer to a static
    // NUL-terminated string into `p` or fail for unknown codes.
    let rc = unsafe { f(code, &raw mut p) };
    if rc != sys::CUDA_SUCCESS || p.is_null() {
        return None;
    }
    // SAFETY: on success the driver stored a pointer to a static NUL-terminated string.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// The driver's name (`CUDA_ERROR_OUT_OF_MEMORY`) and message (`out of memory`) for `code`.
pub fn describe(api: &DriverApi, code: CUresult) -> (String, String) {
    let name =
        c_message(api, api.cuGetErrorName, code).unwrap_or_else(|| format!("CUDA error {code}"));
    let message = c_message(api, api.cuGetErrorString, code)
        .unwrap_or_else(|| "unknown error code".to_owned());
    (name, message)
}

/// Turns the result of `call` into a [`CudaError`]; faults of an earlier kernel (reported
/// by whatever call comes next) become [`CudaError::KernelFault`].
pub fn check(api: &DriverApi, call: &'static str, code: CUresult) -> Result<(), CudaError> {
    if code == sys::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(error(api, call, code))
    }
}

/// The [`CudaError`] for a failing `code` returned by `call`.
pub fn error(api: &DriverApi, call: &'static str, code: CUresult) -> CudaError {
    let (name, message) = describe(api, code);
    if is_kernel_fault(code) {
        CudaError::KernelFault {
            call,
            code,
            name,
            message,
        }
    } else {
        CudaError::Driver {
            call,
            code,
            name,
            message,
        }
    }
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

/// `cuInit(0)`; the codes of [`no_device_reason`] become [`CudaError::NoDevice`].
pub fn init(api: &DriverApi) -> Result<(), CudaError> {
    // SAFETY: cuInit takes flags (must be 0) and no pointers.
    let code = unsafe { (api.cuInit)(0) };
    if let Some(reason) = no_device_reason(code) {
        let (name, message) = describe(api, code);
        return Err(CudaError::NoDevice {
            code,
            reason,
            name,
            message,
        });
    }
    check(api, "cuInit", code)
}

/// The driver's CUDA version as (major, minor), e.g. (12, 4).
pub fn driver_version(api: &DriverApi) -> Result<(u32, u32), CudaError> {
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    check(api, "cuDriverGetVersion", unsafe {
        (api.cuDriverGetVersion)(&raw mut v)
    })?;
    let v = u32::try_from(v).unwrap_or(0);
    Ok((v / 1000, (v % 1000) / 10))
}

/// Number of CUDA devices.
pub fn device_count(api: &DriverApi) -> Result<usize, CudaError> {
    let mut n: c_int = 0;
    // SAFETY: writes one int.
    check(api, "cuDeviceGetCount", unsafe {
        (api.cuDeviceGetCount)(&raw mut n)
    })?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// The device handle of ordinal `ordinal`.
pub fn device_get(api: &DriverApi, ordinal: usize) -> Result<CUdevice, CudaError> {
    let ord =
        c_int::try_from(ordinal).map_err(|_| CudaError::DeviceOutOfRange { ordinal, count: 0 })?;
    let mut dev: CUdevice = 0;
    // SAFETY: writes one CUdevice.
    check(api, "cuDeviceGet", unsafe {
        (api.cuDeviceGet)(&raw mut dev, ord)
    })?;
    Ok(dev)
}

/// The device's marketing name.
pub fn device_name(api: &DriverApi, dev: CUdevice) -> Result<String, CudaError> {
    let mut buf = [0 as c_char; 256];
    // SAFETY: the driver writes at most `len` bytes, NUL-terminated, into `buf`.
    check(api, "cuDeviceGetName", unsafe {
        (api.cuDeviceGetName)(buf.as_mut_ptr(), 256, dev)
    })?;
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c.to_ne_bytes()[0])
        .collect();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// One integer device attribute.
pub fn device_attribute(api: &DriverApi, dev: CUdevice, attr: c_int) -> Result<i32, CudaError> {
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    check(api, "cuDeviceGetAttribute", unsafe {
        (api.cuDeviceGetAttribute)(&raw mut v, attr, dev)
    })?;
    Ok(v)
}

/// Total device memory in bytes.
pub fn device_total_mem(api: &DriverApi, dev: CUdevice) -> Result<usize, CudaError> {
    let mut v: usize = 0;
    // SAFETY: writes one size_t.
    check(api, "cuDeviceTotalMem_v2", unsafe {
        (api.cuDeviceTotalMem_v2)(&raw mut v, dev)
    })?;
    Ok(v)
}

/// Retains the device's primary context.
pub fn primary_ctx_retain(api: &DriverApi, dev: CUdevice) -> Result<CUcontext, CudaError> {
    let mut ctx: CUcontext = ptr::null_mut();
    // SAFETY: writes one context handle.
    check(api, "cuDevicePrimaryCtxRetain", unsafe {
        (api.cuDevicePrimaryCtxRetain)(&raw mut ctx, dev)
    })?;
    Ok(ctx)
}

/// Releases one reference to the device's primary context.
///
/// # Safety
/// Pairs with one successful [`primary_ctx_retain`]; nothing of the context is used after
/// the last release.
pub unsafe fn primary_ctx_release(api: &DriverApi, dev: CUdevice) -> Result<(), CudaError> {
    // SAFETY: the caller pairs this with a retain.
    check(api, "cuDevicePrimaryCtxRelease_v2", unsafe {
        (api.cuDevicePrimaryCtxRelease_v2)(dev)
    })
}

/// Makes `ctx` current on the calling thread.
///
/// # Safety
/// `ctx` is a live context.
pub unsafe fn ctx_set_current(api: &DriverApi, ctx: CUcontext) -> Result<(), CudaError> {
    // SAFETY: the caller guarantees `ctx` is live.
    check(api, "cuCtxSetCurrent", unsafe {
        (api.cuCtxSetCurrent)(ctx)
    })
}

/// The context current on the calling thread (null when none).
pub fn ctx_get_current(api: &DriverApi) -> Result<CUcontext, CudaError> {
    let mut ctx: CUcontext = ptr::null_mut();
    // SAFETY: writes one context handle.
    check(api, "cuCtxGetCurrent", unsafe {
        (api.cuCtxGetCurrent)(&raw mut ctx)
    })?;
    Ok(ctx)
}

/// Creates a stream in the current context. It is a blocking stream (it synchronizes with
/// the legacy default stream), so work others issue on the default stream stays ordered
/// with it.
pub fn stream_create(api: &DriverApi) -> Result<CUstream, CudaError> {
    let mut s: CUstream = ptr::null_mut();
    // SAFETY: writes one stream handle.
    check(api, "cuStreamCreate", unsafe {
        (api.cuStreamCreate)(&raw mut s, sys::CU_STREAM_DEFAULT)
    })?;
    Ok(s)
}

/// Waits for all work on `stream`.
///
/// # Safety
/// `stream` is live and its context current.
pub unsafe fn stream_synchronize(api: &DriverApi, stream: CUstream) -> Result<(), CudaError> {
    // SAFETY: the caller guarantees `stream` is live.
    check(api, "cuStreamSynchronize", unsafe {
        (api.cuStreamSynchronize)(stream)
    })
}

/// Destroys `stream`.
///
/// # Safety
/// `stream` is live and not used afterwards.
pub unsafe fn stream_destroy(api: &DriverApi, stream: CUstream) -> Result<(), CudaError> {
    // SAFETY: the caller guarantees `stream` is live and unused afterwards.
    check(api, "cuStreamDestroy_v2", unsafe {
        (api.cuStreamDestroy_v2)(stream)
    })
}

/// Allocates `bytes` (> 0) of device memory in the current context.
pub fn mem_alloc(api: &DriverApi, bytes: usize) -> Result<CUdeviceptr, CudaError> {
    let mut p: CUdeviceptr = 0;
    // SAFETY: writes one device pointer.
    let code = unsafe { (api.cuMemAlloc_v2)(&raw mut p, bytes) };
    if code == sys::CUDA_ERROR_OUT_OF_MEMORY {
        let (_, message) = describe(api, code);
        let free = mem_get_info(api).map(|(f, _)| f).ok();
        return Err(CudaError::OutOfMemory {
            bytes,
            free,
            message,
        });
    }
    check(api, "cuMemAlloc_v2", code)?;
    Ok(p)
}

/// Frees device memory.
///
/// # Safety
/// `p` came from [`mem_alloc`] in the current context and is not used afterwards.
pub unsafe fn mem_free(api: &DriverApi, p: CUdeviceptr) -> Result<(), CudaError> {
    // SAFETY: the caller guarantees `p` is a live allocation.
    check(api, "cuMemFree_v2", unsafe { (api.cuMemFree_v2)(p) })
}

/// (free, total) device memory of the current context's device.
pub fn mem_get_info(api: &DriverApi) -> Result<(usize, usize), CudaError> {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: writes two size_t.
    check(api, "cuMemGetInfo_v2", unsafe {
        (api.cuMemGetInfo_v2)(&raw mut free, &raw mut total)
    })?;
    Ok((free, total))
}

/// Copies `src` to device memory at `dst`, ordered on `stream`, and waits for the copy: the
/// driver does not promise that an asynchronous copy from pageable memory has read it all
/// when the call returns, and `src` may be freed as soon as this returns.
///
/// # Safety
/// `dst .. dst + src.len()` lies in one live allocation of the current context; `stream`
/// is live.
pub unsafe fn memcpy_htod(
    api: &DriverApi,
    dst: CUdeviceptr,
    src: &[u8],
    stream: CUstream,
) -> Result<(), CudaError> {
    // SAFETY: `src` is readable for its length and stays borrowed until the stream is
    // synchronized below; the caller vouches for `dst` and `stream`.
    check(api, "cuMemcpyHtoDAsync_v2", unsafe {
        (api.cuMemcpyHtoDAsync_v2)(dst, src.as_ptr().cast(), src.len(), stream)
    })?;
    // SAFETY: `stream` is live per the caller.
    unsafe { stream_synchronize(api, stream) }
}

/// Copies device memory at `src` into `dst`, ordered on `stream`; returns when the copy is
/// done (the destination is pageable memory, for which the driver copies synchronously),
/// and synchronizes `stream` to make sure.
///
/// # Safety
/// `src .. src + dst.len()` lies in one live allocation of the current context; `stream`
/// is live.
pub unsafe fn memcpy_dtoh(
    api: &DriverApi,
    dst: &mut [u8],
    src: CUdeviceptr,
    stream: CUstream,
) -> Result<(), CudaError> {
    // SAFETY: `dst` is writable for its length; the caller vouches for `src` and `stream`.
    check(api, "cuMemcpyDtoHAsync_v2", unsafe {
        (api.cuMemcpyDtoHAsync_v2)(dst.as_mut_ptr().cast(), src, dst.len(), stream)
    })?;
    // SAFETY: `stream` is live per the caller.
    unsafe { stream_synchronize(api, stream) }
}

/// Copies `bytes` between device allocations, ordered on `stream`.
///
/// # Safety
/// Both ranges lie in live allocations of the current context; `stream` is live.
pub unsafe fn memcpy_dtod_async(
    api: &DriverApi,
    dst: CUdeviceptr,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> Result<(), CudaError> {
    // SAFETY: the caller vouches for both ranges and the stream.
    check(api, "cuMemcpyDtoDAsync_v2", unsafe {
        (api.cuMemcpyDtoDAsync_v2)(dst, src, bytes, stream)
    })
}

/// Sets `bytes` bytes at `dst` to `value`, ordered on `stream`.
///
/// # Safety
/// The range lies in one live allocation of the current context; `stream` is live.
pub unsafe fn memset_d8(
    api: &DriverApi,
    dst: CUdeviceptr,
    value: u8,
    bytes: usize,
    stream: CUstream,
) -> Result<(), CudaError> {
    // SAFETY: the caller vouches for the range and the stream.
    check(api, "cuMemsetD8Async", unsafe {
        (api.cuMemsetD8Async)(dst, value, bytes, stream)
    })
}

/// Loads a module from a cubin, fat binary or NUL-terminated PTX image; on failure the JIT
/// error log comes back with the driver's code.
///
/// # Safety
/// `image` is a complete cubin or fat binary (every offset in its headers inside the slice),
/// or PTX text that ends with a NUL byte; the current context is live.
pub unsafe fn module_load_data(
    api: &DriverApi,
    image: &[u8],
) -> Result<CUmodule, (CUresult, String)> {
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
    let mut module: CUmodule = ptr::null_mut();
    // SAFETY: the caller vouches for the image; the log buffer outlives the call and its
    // size is passed alongside it; both option arrays have 2 entries.
    let code = unsafe {
        (api.cuModuleLoadDataEx)(
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
    Err((code, String::from_utf8_lossy(&log[..end]).trim().to_owned()))
}

/// Looks up a kernel in `module`.
///
/// # Safety
/// `module` is live.
pub unsafe fn module_get_function(
    api: &DriverApi,
    module: CUmodule,
    name: &CStr,
) -> Result<CUfunction, CUresult> {
    let mut f: CUfunction = ptr::null_mut();
    // SAFETY: `name` is NUL-terminated, `module` live per the caller.
    let code = unsafe { (api.cuModuleGetFunction)(&raw mut f, module, name.as_ptr()) };
    if code == sys::CUDA_SUCCESS {
        Ok(f)
    } else {
        Err(code)
    }
}

/// Unloads `module`.
///
/// # Safety
/// `module` is live and none of its functions is used afterwards.
pub unsafe fn module_unload(api: &DriverApi, module: CUmodule) -> Result<(), CudaError> {
    // SAFETY: per the caller.
    check(api, "cuModuleUnload", unsafe {
        (api.cuModuleUnload)(module)
    })
}

/// One attribute of a kernel (`CU_FUNC_ATTRIBUTE_*`).
///
/// # Safety
/// `f` belongs to a live module of the current context.
pub unsafe fn func_get_attribute(
    api: &DriverApi,
    f: CUfunction,
    attr: c_int,
) -> Result<i32, CudaError> {
    let mut v: c_int = 0;
    // SAFETY: per the caller; writes one int.
    check(api, "cuFuncGetAttribute", unsafe {
        (api.cuFuncGetAttribute)(&raw mut v, attr, f)
    })?;
    Ok(v)
}

/// Sets one attribute of a kernel (`CU_FUNC_ATTRIBUTE_*`).
///
/// # Safety
/// `f` belongs to a live module of the current context.
pub unsafe fn func_set_attribute(
    api: &DriverApi,
    f: CUfunction,
    attr: c_int,
    value: c_int,
) -> Result<(), CudaError> {
    // SAFETY: per the caller.
    check(api, "cuFuncSetAttribute", unsafe {
        (api.cuFuncSetAttribute)(f, attr, value)
    })
}

/// Launches `f` on `stream`.
///
/// # Safety
/// `f` belongs to a live module of the current context, `stream` is live, and `params` holds
/// one pointer per kernel parameter, each to a value of the parameter's type (the launch ABI).
pub unsafe fn launch_kernel(
    api: &DriverApi,
    f: CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem_bytes: u32,
    stream: CUstream,
    params: *const *mut c_void,
) -> Result<(), CudaError> {
    // SAFETY: per the caller; the driver only reads `params` (the C prototype is non-const).
    let code = unsafe {
        (api.cuLaunchKernel)(
            f,
            grid[0] as c_uint,
            grid[1] as c_uint,
            grid[2] as c_uint,
            block[0] as c_uint,
            block[1] as c_uint,
            block[2] as c_uint,
            shared_mem_bytes as c_uint,
            stream,
            params.cast_mut(),
            ptr::null_mut(),
        )
    };
    check(api, "cuLaunchKernel", code)
}

/// Creates an event in the current context.
pub fn event_create(api: &DriverApi) -> Result<CUevent, CudaError> {
    let mut e: CUevent = ptr::null_mut();
    // SAFETY: writes one event handle.
    check(api, "cuEventCreate", unsafe {
        (api.cuEventCreate)(&raw mut e, sys::CU_EVENT_DEFAULT)
    })?;
    Ok(e)
}

/// Records `event` on `stream`.
///
/// # Safety
/// Both are live and of the current context.
pub unsafe fn event_record(
    api: &DriverApi,
    event: CUevent,
    stream: CUstream,
) -> Result<(), CudaError> {
    // SAFETY: per the caller.
    check(api, "cuEventRecord", unsafe {
        (api.cuEventRecord)(event, stream)
    })
}

/// Waits for `event`.
///
/// # Safety
/// `event` is live.
pub unsafe fn event_synchronize(api: &DriverApi, event: CUevent) -> Result<(), CudaError> {
    // SAFETY: per the caller.
    check(api, "cuEventSynchronize", unsafe {
        (api.cuEventSynchronize)(event)
    })
}

/// Milliseconds between two completed events.
///
/// # Safety
/// Both events are live.
pub unsafe fn event_elapsed_ms(
    api: &DriverApi,
    start: CUevent,
    end: CUevent,
) -> Result<f32, CudaError> {
    let mut ms = 0f32;
    // SAFETY: per the caller; writes one float.
    check(api, "cuEventElapsedTime", unsafe {
        (api.cuEventElapsedTime)(&raw mut ms, start, end)
    })?;
    Ok(ms)
}

/// Destroys `event`.
///
/// # Safety
/// `event` is live and unused afterwards.
pub unsafe fn event_destroy(api: &DriverApi, event: CUevent) -> Result<(), CudaError> {
    // SAFETY: per the caller.
    check(api, "cuEventDestroy_v2", unsafe {
        (api.cuEventDestroy_v2)(event)
    })
}

/// A kernel name as a C string.
pub fn c_name(name: &str) -> Result<CString, CudaError> {
    CString::new(name).map_err(|_| CudaError::InvalidKernelName {
        name: name.to_owned(),
    })
}
