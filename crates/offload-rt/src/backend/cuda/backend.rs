//! [`Backend`] and [`Module`] over [`CudaDevice`].

use std::collections::{BTreeMap, HashMap};
use std::ffi::c_void;
use std::sync::{Mutex, PoisonError};

use super::{CudaBuffer, CudaDevice, CudaError, CudaFunction, CudaImageKind, CudaModule, result};
use crate::backend::{Backend, DeviceKind, DevicePtr, KernelHandle, Module};
use crate::error::{Error, Result};
use crate::launch::{LaunchConfig, LaunchShape};
use crate::registry::{ImageInfo, RegisteredImage};
use crate::select::{self, DeviceTarget, ImageDescriptor};
use offload_format::ImageKind;

/// Whether `OFFLOAD_LOG` asks for log lines (set, not empty, not `0`).
pub(crate) fn log_enabled() -> bool {
    std::env::var_os("OFFLOAD_LOG").is_some_and(|v| !v.is_empty() && v != "0")
}

/// One `offload-rt:` line on stderr when [`log_enabled`].
pub(crate) fn log(line: std::fmt::Arguments<'_>) {
    if log_enabled() {
        eprintln!("offload-rt: {line}");
    }
}

/// Converts a backend error into the runtime's error for `device`.
pub fn to_error(e: CudaError, device: &str) -> Error {
    match e {
        CudaError::Unavailable(_)
        | CudaError::NoDevice { .. }
        | CudaError::NoDevices
        | CudaError::DeviceOutOfRange { .. } => Error::BackendUnavailable {
            backend: "cuda",
            reason: e
                .to_string()
                .trim_start_matches("CUDA unavailable: ")
                .to_owned(),
        },
        CudaError::OutOfMemory { bytes, .. } => Error::OutOfMemory {
            bytes,
            device: format!("{device} ({e})"),
        },
        CudaError::Driver {
            call,
            code,
            ref name,
            ref message,
        } => Error::Driver {
            backend: "cuda",
            call,
            code: code.into(),
            message: format!("{name}: {message}"),
        },
        CudaError::KernelFault {
            call,
            code,
            name,
            message,
        } => Error::KernelFault {
            device: device.to_owned(),
            kernel: None,
            call,
            code: code.into(),
            name,
            message,
        },
        other => Error::Driver {
            backend: "cuda",
            call: "offload-rt",
            code: -1,
            message: other.to_string(),
        },
    }
}

/// The CUDA device as a [`Backend`]: allocations are tracked so that copies into memory
/// the backend did not give out are refused instead of reaching the driver.
pub struct CudaBackend {
    device: CudaDevice,
    description: String,
    allocations: Mutex<BTreeMap<u64, CudaBuffer>>,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend")
            .field("device", &self.description)
            .finish_non_exhaustive()
    }
}

/// Opens CUDA device `ordinal` as a boxed [`Backend`].
///
/// # Errors
/// [`Error::BackendUnavailable`] saying why, or a driver failure.
pub fn open_backend(ordinal: usize) -> Result<Box<dyn Backend>> {
    match CudaBackend::open(ordinal) {
        Ok(b) => {
            log(format_args!("opened {}", b.description));
            Ok(Box::new(b))
        }
        Err(e) => {
            log(format_args!("cuda:{ordinal} not used: {e}"));
            Err(e)
        }
    }
}

impl CudaBackend {
    /// Opens CUDA device `ordinal`.
    ///
    /// # Errors
    /// [`Error::BackendUnavailable`] saying why, or a driver failure.
    pub fn open(ordinal: usize) -> Result<Self> {
        let device =
            CudaDevice::open(ordinal).map_err(|e| to_error(e, &format!("cuda:{ordinal}")))?;
        let info = device.info();
        let description = format!("cuda:{} {} ({})", info.ordinal, info.name, info.arch());
        Ok(Self {
            device,
            description,
            allocations: Mutex::new(BTreeMap::new()),
        })
    }

    /// The device underneath.
    pub fn device(&self) -> &CudaDevice {
        &self.device
    }

    fn err(&self, e: CudaError) -> Error {
        to_error(e, &self.description)
    }

    /// Runs `f` on the allocation holding `ptr .. ptr + len`, with the offset into it.
    fn with_allocation<R>(
        &self,
        ptr: DevicePtr,
        len: usize,
        f: impl FnOnce(&mut CudaBuffer, usize) -> Result<R>,
    ) -> Result<R> {
        let mut map = self
            .allocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let found = map.range_mut(..=ptr.0).next_back().filter(|(start, buf)| {
            let offset = ptr.0 - **start;
            offset
                .checked_add(len as u64)
                .is_some_and(|end| end <= buf.len() as u64)
        });
        match found {
            Some((start, buf)) => {
                let offset = usize::try_from(ptr.0 - *start).unwrap_or(usize::MAX);
                f(buf, offset)
            }
            None => Err(Error::Driver {
                backend: "cuda",
                call: "offload-rt",
                code: -1,
                message: format!(
                    "{len} bytes at {:#x} are not inside one allocation of {}",
                    ptr.0, self.description
                ),
            }),
        }
    }
}

impl Backend for CudaBackend {
    fn kind(&self) -> DeviceKind {
        DeviceKind::Cuda
    }

    fn describe(&self) -> String {
        self.description.clone()
    }

    fn alloc_zeroed(&self, bytes: usize) -> Result<DevicePtr> {
        if bytes == 0 {
            return Ok(DevicePtr::NULL);
        }
        let mut buf = self.device.alloc(bytes).map_err(|e| self.err(e))?;
        buf.fill(0).map_err(|e| self.err(e))?;
        let ptr = buf.device_ptr();
        self.allocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(ptr, buf);
        Ok(DevicePtr(ptr))
    }

    unsafe fn free(&self, ptr: DevicePtr) -> Result<()> {
        if ptr == DevicePtr::NULL {
            return Ok(());
        }
        let buf = self
            .allocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&ptr.0);
        match buf {
            // Dropping frees; cuMemFree waits for launches still using the memory.
            Some(buf) => {
                drop(buf);
                Ok(())
            }
            None => Err(Error::Driver {
                backend: "cuda",
                call: "offload-rt",
                code: -1,
                message: format!(
                    "free of {:#x}, which is not an allocation of {}",
                    ptr.0, self.description
                ),
            }),
        }
    }

    unsafe fn copy_to_device(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        self.with_allocation(dst, src.len(), |buf, offset| {
            buf.copy_from_host(offset, src).map_err(|e| self.err(e))
        })
    }

    unsafe fn copy_to_host(&self, dst: &mut [u8], src: DevicePtr) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        self.with_allocation(src, dst.len(), |buf, offset| {
            buf.copy_to_host(offset, dst).map_err(|e| self.err(e))
        })
    }

    fn load_module(&self, module: &str, images: &[RegisteredImage<'_>]) -> Result<Box<dyn Module>> {
        let info = self.device.info();
        let target = DeviceTarget::Cuda {
            major: info.compute_capability.0,
            minor: info.compute_capability.1,
        };
        // Candidates still to try: when the driver rejects the best image (say, a cubin it
        // cannot run), the next best is tried, and the first refusal is reported if all fail.
        let mut left: Vec<usize> = (0..images.len()).collect();
        let mut first_failure = None;
        loop {
            let descriptors: Vec<ImageDescriptor<'_>> = left
                .iter()
                .map(|&i| ImageDescriptor {
                    triple: images[i].triple(),
                    arch: images[i].arch(),
                    kind: images[i].image_kind(),
                })
                .collect();
            let chosen = match select::select_image(&target, &descriptors) {
                Ok(s) => s,
                Err(no) => {
                    return Err(first_failure.unwrap_or_else(|| Error::NoCompatibleImage {
                        module: module.to_owned(),
                        device: format!("{} ({})", self.description, no.device),
                        candidates: images.len(),
                        tried: no.carried.join(", "),
                    }));
                }
            };
            let index = left.remove(chosen.index);
            let image = &images[index];
            let kind = match image.image_kind() {
                ImageKind::Cubin => CudaImageKind::Cubin,
                ImageKind::Ptx => CudaImageKind::Ptx,
                _ => CudaImageKind::Fatbin,
            };
            log(format_args!(
                "{}: module `{module}`: loading {} {} ({:?})",
                self.description,
                image.arch(),
                image.image_kind().name(),
                chosen.fit
            ));
            match self.device.load_module(image.bytes(), kind) {
                Ok(loaded) => {
                    return Ok(Box::new(CudaLoadedModule {
                        device: self.device.clone(),
                        module: loaded,
                        info: image.describe(),
                        kernels: Mutex::new(HashMap::new()),
                    }));
                }
                Err(e) => {
                    log(format_args!("{}: module `{module}`: {e}", self.description));
                    let info = image.describe();
                    first_failure.get_or_insert(Error::ImageLoad {
                        module: module.to_owned(),
                        image: format!("{} {} {}", info.triple, info.arch, info.image_kind.name()),
                        reason: e.to_string(),
                    });
                }
            }
        }
    }

    fn synchronize(&self) -> Result<()> {
        self.device.synchronize().map_err(|e| self.err(e))
    }
}

/// A module loaded on a CUDA device.
struct CudaLoadedModule {
    device: CudaDevice,
    module: CudaModule,
    info: ImageInfo,
    kernels: Mutex<HashMap<String, CudaFunction>>,
}

impl std::fmt::Debug for CudaLoadedModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaLoadedModule")
            .field("image", &self.info)
            .finish_non_exhaustive()
    }
}

impl Module for CudaLoadedModule {
    fn image(&self) -> &ImageInfo {
        &self.info
    }

    fn kernel(&self, name: &str) -> Result<KernelHandle> {
        let mut kernels = self.kernels.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(f) = kernels.get(name) {
            return Ok(KernelHandle(f.raw_handle().expose_provenance() as u64));
        }
        let f = self.module.function(name).map_err(|e| match e {
            CudaError::KernelNotFound { .. } | CudaError::InvalidKernelName { .. } => {
                Error::KernelNotFound {
                    kernel: name.to_owned(),
                    module: self.info.module.clone(),
                    image: format!("{} {}", self.info.triple, self.info.arch),
                }
            }
            other => to_error(other, self.device.info().name.as_str()),
        })?;
        let handle = KernelHandle(f.raw_handle().expose_provenance() as u64);
        kernels.insert(name.to_owned(), f);
        Ok(handle)
    }

    unsafe fn launch(
        &self,
        kernel: KernelHandle,
        name: &str,
        config: &LaunchConfig,
        params: &[*mut c_void],
    ) -> Result<()> {
        if config.check().map_err(|reason| Error::InvalidLaunch {
            kernel: name.to_owned(),
            reason,
        })? == LaunchShape::Empty
        {
            return Ok(());
        }
        let (g, b) = (config.grid, config.block);
        let api = self.device.ctx.api;
        self.device.ctx.bind().map_err(|e| to_error(e, name))?;
        let function = std::ptr::with_exposed_provenance_mut(kernel.0 as usize);
        // SAFETY: `kernel` is a CUfunction of `self.module` (the caller's contract), of the
        // context just made current.
        unsafe {
            self.device
                .prepare_shared(function, name, config.shared_mem_bytes)
        }
        .map_err(|e| match e {
            CudaError::SharedMemoryLimit { reason, .. } => Error::InvalidLaunch {
                kernel: name.to_owned(),
                reason,
            },
            other => to_error(other, name),
        })?;
        // SAFETY: `kernel` is a CUfunction of `self.module` (the caller's contract), which
        // stays loaded while `self` lives; the stream is this device's; the caller vouches
        // for `params`, one pointer per kernel parameter.
        unsafe {
            result::launch_kernel(
                api,
                function,
                [g.0, g.1, g.2],
                [b.0, b.1, b.2],
                config.shared_mem_bytes,
                self.device.ctx.stream,
                params.as_ptr(),
            )
        }
        .map_err(|e| match e {
            CudaError::Driver {
                code,
                name: err_name,
                message,
                ..
            } => Error::InvalidLaunch {
                kernel: name.to_owned(),
                reason: format!("cuLaunchKernel: {err_name} ({code}): {message}"),
            },
            other => to_error(other, name),
        })
    }
}
