//! [`Backend`] and [`Module`] over any [`Driver`]: what `Device` sees of a GPU.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError, RwLock};

use std::any::Any;
use std::time::Duration;

use super::channel::ChannelSlot;
use super::driver::{DeviceInfo, Driver};
use super::logging::log;
use super::{
    GpuBuffer, GpuDevice, GpuError, GpuEvent, GpuFunction, GpuGraph, GpuModule, GpuStream,
    PinnedBytes,
};
use crate::backend::{
    Backend, BackendEvent, BackendGraph, BackendStream, DeviceKind, DevicePtr, HostMemory,
    KernelHandle, Module, RawDevice,
};
use crate::error::{Error, Result};
use crate::launch::{LaunchArgs, LaunchShape};
use crate::registry::{ImageInfo, RegisteredImage};
use crate::select::{self, ImageDescriptor};

/// Converts a driver-layer error into the runtime's error for `device` of `kind`.
pub(crate) fn to_error(e: GpuError, kind: DeviceKind, device: &str) -> Error {
    let backend = kind.name();
    match e {
        GpuError::Unavailable { .. }
        | GpuError::NoDevice { .. }
        | GpuError::NoDevices { .. }
        | GpuError::DeviceOutOfRange { .. }
        | GpuError::PropertiesAbiMismatch { .. }
        | GpuError::BadArchName { .. } => {
            let text = e.to_string();
            let reason = text
                .split_once(" unavailable: ")
                .map_or(text.as_str(), |(_, r)| r)
                .to_owned();
            Error::BackendUnavailable { backend, reason }
        }
        GpuError::OutOfMemory {
            bytes, free, total, ..
        } => Error::OutOfMemory {
            requested: bytes,
            free,
            total,
            device: device.to_owned(),
        },
        GpuError::DeviceLost { cause } => Error::DeviceLost {
            device: device.to_owned(),
            cause,
        },
        GpuError::Timeout { waited } => Error::Timeout {
            device: device.to_owned(),
            kernels: Vec::new(),
            waited,
        },
        GpuError::ResetRefused { reason } => Error::ResetRefused {
            device: device.to_owned(),
            reason,
        },
        GpuError::Driver {
            call,
            code,
            name,
            message,
        } => Error::Driver {
            backend,
            call,
            code: code.into(),
            message: format!("{name}: {message}"),
        },
        GpuError::KernelFault {
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
            backend,
            call: "offload-rt",
            code: -1,
            message: other.to_string(),
        },
    }
}

/// A GPU as a [`Backend`]: allocations are tracked so that copies into memory the backend
/// did not give out are refused instead of reaching the driver.
pub struct GpuBackend<D: Driver> {
    /// The device as opened last: a reset opens it anew.
    device: RwLock<GpuDevice<D>>,
    description: String,
    allocations: Mutex<BTreeMap<u64, GpuBuffer<D>>>,
    /// Where kernels report panics and send prints; a reset starts a new one.
    channel: RwLock<ChannelSlot<D>>,
    /// Resets so far (see [`Backend::generation`]).
    generation: AtomicU64,
}

impl<D: Driver> Drop for GpuBackend<D> {
    fn drop(&mut self) {
        if let Some(channel) = self.channel().get() {
            channel.flush(false);
        }
    }
}

impl<D: Driver> std::fmt::Debug for GpuBackend<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuBackend")
            .field("device", &self.description)
            .finish_non_exhaustive()
    }
}

/// Opens GPU `ordinal` of driver `D` as a boxed [`Backend`], logging why when it cannot be
/// used.
pub(crate) fn open_backend<D: Driver>(ordinal: usize) -> Result<Box<dyn Backend>> {
    match GpuBackend::<D>::open(ordinal) {
        Ok(b) => {
            log(format_args!("opened {}", b.description));
            Ok(Box::new(b))
        }
        Err(e) => {
            log(format_args!("{}:{ordinal} not used: {e}", D::KIND.name()));
            Err(e)
        }
    }
}

impl<D: Driver> GpuBackend<D> {
    /// Opens device `ordinal`.
    ///
    /// # Errors
    /// [`Error::BackendUnavailable`] saying why, or a driver failure.
    pub fn open(ordinal: usize) -> Result<Self> {
        let device = GpuDevice::<D>::open(ordinal)
            .map_err(|e| to_error(e, D::KIND, &format!("{}:{ordinal}", D::KIND.name())))?;
        let info = device.info();
        let description = format!(
            "{}:{} {} ({})",
            D::KIND.name(),
            info.ordinal(),
            info.name(),
            info.arch()
        );
        Ok(Self {
            device: RwLock::new(device),
            description,
            allocations: Mutex::new(BTreeMap::new()),
            channel: RwLock::new(ChannelSlot::new()),
            generation: AtomicU64::new(0),
        })
    }

    /// The device underneath, as opened last.
    pub fn device(&self) -> GpuDevice<D> {
        self.device
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The device's channel, of the context opened last.
    fn channel(&self) -> ChannelSlot<D> {
        self.channel
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn err(&self, e: GpuError) -> Error {
        to_error(e, D::KIND, &self.description)
    }

    fn allocations(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, GpuBuffer<D>>> {
        self.allocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn not_allocated(&self, what: String) -> Error {
        Error::Driver {
            backend: D::KIND.name(),
            call: "offload-rt",
            code: -1,
            message: format!("{what} of {}", self.description),
        }
    }

    /// Runs `f` on the allocation holding `ptr .. ptr + len`, with the offset into it.
    fn with_allocation<R>(
        &self,
        ptr: DevicePtr,
        len: usize,
        f: impl FnOnce(&mut GpuBuffer<D>, usize) -> Result<R>,
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
            None => Err(self.not_allocated(format!(
                "{len} bytes at {:#x} are not inside one allocation",
                ptr.0
            ))),
        }
    }
}

impl<D: Driver> GpuBackend<D> {
    /// `stream` of this device as the runtime's stream, reporting as the device does.
    fn backend_stream(&self, device: GpuDevice<D>, stream: GpuStream<D>) -> Box<dyn BackendStream> {
        Box::new(GpuStreamImpl {
            device,
            description: self.description.clone(),
            stream,
            channel: self.channel(),
        })
    }
}

impl<D: Driver> Backend for GpuBackend<D> {
    fn kind(&self) -> DeviceKind {
        D::KIND
    }

    fn raw(&self) -> RawDevice {
        let device = self.device();
        // Ordinals are below the driver's device count, an `int`.
        let ordinal = device.info().ordinal() as i32;
        match D::KIND {
            DeviceKind::Hip => RawDevice::Hip { ordinal },
            _ => RawDevice::Cuda {
                ordinal,
                context: device.raw_context(),
            },
        }
    }

    fn raw_stream(&self) -> *mut std::ffi::c_void {
        self.device().raw_stream()
    }

    fn bind_to_thread(&self) -> Result<()> {
        self.device().bind().map_err(|e| self.err(e))
    }

    fn lost(&self) -> Option<String> {
        self.device().lost().map(str::to_owned)
    }

    fn reset(&self) -> Result<bool> {
        let mut current = self.device.write().unwrap_or_else(PoisonError::into_inner);
        let old = current.clone();
        // Nothing of the old context may reach the driver once it is reset: its buffers are
        // forgotten (dropped with the context lost, they free nothing), and its channel with
        // them (streams made before keep theirs, which reads nothing once unmapped). A
        // refused reset keeps them: the device stays lost, its buffers answering so.
        old.lose("the device was reset".to_owned());
        if let Some(channel) = self.channel().get() {
            channel.flush(false);
        }
        let started = std::time::Instant::now();
        *current = old.reset().map_err(|e| self.err(e))?;
        self.generation.fetch_add(1, Ordering::SeqCst);
        drop(std::mem::take(&mut *self.allocations()));
        *self.channel.write().unwrap_or_else(PoisonError::into_inner) = ChannelSlot::new();
        log(format_args!(
            "{}: reset in {:?}",
            self.description,
            started.elapsed()
        ));
        Ok(true)
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    fn synchronize_timeout(&self, timeout: Duration) -> Result<()> {
        let result = self
            .device()
            .synchronize_timeout(timeout)
            .map_err(|e| self.err(e));
        if let Some(channel) = self.channel().get() {
            channel.flush(result.is_ok());
        }
        result
    }

    fn describe(&self) -> String {
        self.description.clone()
    }

    fn alloc_zeroed(&self, bytes: usize) -> Result<DevicePtr> {
        self.alloc_zeroed_in_generation(bytes).map(|(ptr, _)| ptr)
    }

    fn alloc_zeroed_in_generation(&self, bytes: usize) -> Result<(DevicePtr, u64)> {
        if bytes == 0 {
            return Ok((DevicePtr::NULL, self.generation()));
        }
        // Held until the buffer is recorded: a reset, which forgets the recorded buffers,
        // cannot come in between and leave one of the old context recorded.
        let device = self.device.read().unwrap_or_else(PoisonError::into_inner);
        let mut buf = device.alloc(bytes).map_err(|e| self.err(e))?;
        buf.fill(0).map_err(|e| self.err(e))?;
        let ptr = buf.device_ptr();
        self.allocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(ptr, buf);
        // Bumped only under the exclusive lock, so the generation of this context.
        Ok((DevicePtr(ptr), self.generation()))
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
            // Dropping frees; the driver's free waits for launches still using the memory.
            Some(buf) => {
                drop(buf);
                Ok(())
            }
            None => {
                Err(self.not_allocated(format!("free of {:#x}, which is not an allocation", ptr.0)))
            }
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
        })?;
        // A copy to the host waits for the launches before it, as CUDA's printf output
        // appears at one.
        if let Some(channel) = self.channel().get() {
            channel.flush(false);
        }
        Ok(())
    }

    fn load_module(&self, module: &str, images: &[RegisteredImage<'_>]) -> Result<Box<dyn Module>> {
        let device = self.device();
        let slot = self.channel();
        let target = device.info().target();
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
            log(format_args!(
                "{}: module `{module}`: loading {} {} ({:?})",
                self.description,
                image.arch(),
                image.image_kind().name(),
                chosen.fit
            ));
            let kind = D::loader_kind(image.image_kind());
            let bytes = match image.checked_bytes() {
                Ok(bytes) => bytes,
                Err(damaged) => {
                    log(format_args!("{}: {damaged}", self.description));
                    first_failure.get_or_insert(damaged);
                    continue;
                }
            };
            match device.load_module(bytes, kind) {
                Ok(loaded) => {
                    if let Some(channel) = slot.get_or_open(&device, &self.description) {
                        match channel.attach(&device, &loaded, bytes, kind) {
                            Ok(true) => {}
                            Ok(false) => log(format_args!(
                                "{}: module `{module}` has no channel global: its panics \
                                 fault without a report",
                                self.description
                            )),
                            Err(e) => return Err(self.err(e)),
                        }
                    }
                    return Ok(Box::new(GpuLoadedModule {
                        device: device.clone(),
                        description: self.description.clone(),
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
        let result = self.device().synchronize().map_err(|e| self.err(e));
        if let Some(channel) = self.channel().get() {
            channel.flush(result.is_ok());
        }
        result
    }

    fn take_kernel_panic(&self) -> Option<crate::error::KernelPanicReport> {
        let slot = self.channel();
        let channel = slot.get()?;
        channel.flush(false);
        channel.take_panic()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    unsafe fn copy_from_peer(
        &self,
        dst: DevicePtr,
        from: &dyn Backend,
        src: DevicePtr,
        len: usize,
    ) -> Result<bool> {
        let Some(from) = from.as_any().downcast_ref::<GpuBackend<D>>() else {
            return Ok(false);
        };
        if std::ptr::eq(self, from) {
            return Ok(false);
        }
        // Both maps are held during the copy; taken in address order, so that copies both
        // ways between two devices at once cannot deadlock.
        let (mut mine, theirs) =
            if std::ptr::from_ref(self).addr() < std::ptr::from_ref(from).addr() {
                let mine = self.allocations();
                (mine, from.allocations())
            } else {
                let theirs = from.allocations();
                (self.allocations(), theirs)
            };
        // Whole allocations only: what `DeviceBuffer::copy_from_buffer` asks for.
        let (Some(dst_buf), Some(src_buf)) = (mine.get_mut(&dst.0), theirs.get(&src.0)) else {
            return Ok(false);
        };
        if dst_buf.len() != len || src_buf.len() != len {
            return Ok(false);
        }
        self.device()
            .copy_peer(dst_buf, src_buf)
            .map(|()| true)
            .map_err(|e| self.err(e))
    }

    fn create_stream(&self) -> Result<Option<Box<dyn BackendStream>>> {
        let device = self.device();
        let stream = device.stream().map_err(|e| self.err(e))?;
        Ok(Some(self.backend_stream(device, stream)))
    }

    unsafe fn wrap_stream(&self, raw: *mut std::ffi::c_void) -> Option<Box<dyn BackendStream>> {
        let device = self.device();
        // SAFETY: the caller's contract: a live stream of this device, outliving the wrapper.
        let stream = unsafe { device.wrap_stream(raw) };
        Some(self.backend_stream(device, stream))
    }

    fn alloc_host(&self, bytes: usize) -> Result<Option<Box<dyn HostMemory>>> {
        let memory = self.device().alloc_host(bytes).map_err(|e| self.err(e))?;
        Ok(Some(Box::new(memory)))
    }

    fn supports_clusters(&self) -> bool {
        D::supports_clusters(self.device().info())
    }

    fn peaks(&self) -> Option<crate::backend::DevicePeaks> {
        D::peaks(self.device().info())
    }
}

impl<D: Driver> HostMemory for PinnedBytes<D> {
    fn as_ptr(&self) -> *mut u8 {
        self.as_slice().as_ptr().cast_mut()
    }

    fn len(&self) -> usize {
        self.as_slice().len()
    }
}

/// A driver stream as a [`BackendStream`].
struct GpuStreamImpl<D: Driver> {
    device: GpuDevice<D>,
    description: String,
    stream: GpuStream<D>,
    channel: ChannelSlot<D>,
}

impl<D: Driver> std::fmt::Debug for GpuStreamImpl<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuStream")
            .field("device", &self.description)
            .finish_non_exhaustive()
    }
}

impl<D: Driver> GpuStreamImpl<D> {
    fn err(&self, e: GpuError) -> Error {
        to_error(e, D::KIND, &self.description)
    }

    fn foreign(&self, what: &str) -> Error {
        Error::Driver {
            backend: D::KIND.name(),
            call: "offload-rt",
            code: -1,
            message: format!(
                "{what} of another device used on a stream of {}",
                self.description
            ),
        }
    }
}

impl<D: Driver> BackendStream for GpuStreamImpl<D> {
    fn raw(&self) -> *mut std::ffi::c_void {
        self.stream.raw()
    }

    unsafe fn launch(
        &self,
        module: &dyn Module,
        kernel: KernelHandle,
        launch: &LaunchArgs<'_>,
    ) -> Result<()> {
        let Some(module) = module.as_any().downcast_ref::<GpuLoadedModule<D>>() else {
            return Err(self.foreign("a module"));
        };
        // A stream made before a reset with a module loaded after it: the stream is lost.
        self.stream.check_live().map_err(|e| self.err(e))?;
        if !module.device.same_context(&self.device) {
            // A module loaded before a reset, with a stream made after it.
            return Err(match module.device.lost() {
                Some(cause) => self.err(GpuError::DeviceLost {
                    cause: cause.to_owned(),
                }),
                None => self.foreign("a module"),
            });
        }
        // SAFETY: forwarded from this function's contract; the stream is of the module's
        // context, which `launch_on` finds live before any driver call.
        unsafe { module.launch_on(self.stream.raw_handle(), kernel, launch) }
    }

    unsafe fn copy_to_device(&self, dst: DevicePtr, src: *const u8, len: usize) -> Result<()> {
        // SAFETY: the trait's contract: `dst` is inside an allocation of this device and
        // `src` stays valid until the stream has passed the copy.
        unsafe { self.stream.copy_htod(dst.0, src, len) }.map_err(|e| self.err(e))
    }

    unsafe fn copy_to_host(&self, dst: *mut u8, src: DevicePtr, len: usize) -> Result<()> {
        // SAFETY: as above.
        unsafe { self.stream.copy_dtoh(dst, src.0, len) }.map_err(|e| self.err(e))
    }

    fn record(&self) -> Result<Box<dyn BackendEvent>> {
        let event = self.device.event().map_err(|e| self.err(e))?;
        event.record_on(&self.stream).map_err(|e| self.err(e))?;
        Ok(Box::new(GpuEventImpl {
            description: self.description.clone(),
            event,
        }))
    }

    fn wait(&self, event: &dyn BackendEvent) -> Result<()> {
        let Some(event) = event.as_any().downcast_ref::<GpuEventImpl<D>>() else {
            return Err(self.foreign("an event"));
        };
        self.stream.wait(&event.event).map_err(|e| self.err(e))
    }

    fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(|e| self.err(e))?;
        if let Some(channel) = self.channel.get() {
            channel.flush(false);
        }
        Ok(())
    }

    fn synchronize_timeout(&self, timeout: Duration) -> Result<()> {
        self.stream
            .synchronize_timeout(timeout)
            .map_err(|e| self.err(e))?;
        if let Some(channel) = self.channel.get() {
            channel.flush(false);
        }
        Ok(())
    }

    fn begin_capture(&self) -> Result<()> {
        self.stream.begin_capture().map_err(|e| self.err(e))
    }

    fn end_capture(&self) -> Result<Box<dyn BackendGraph>> {
        let graph = self.stream.end_capture().map_err(|e| self.err(e))?;
        Ok(Box::new(GpuGraphImpl { graph }))
    }

    fn end_capture_into(&self, graph: &mut dyn BackendGraph) -> Result<()> {
        let Some(graph) = graph.as_any_mut().downcast_mut::<GpuGraphImpl<D>>() else {
            return Err(self.foreign("a graph"));
        };
        self.stream
            .end_capture_into(&mut graph.graph)
            .map_err(|e| self.err(e))
    }

    fn launch_graph(&self, graph: &dyn BackendGraph) -> Result<()> {
        let Some(graph) = graph.as_any().downcast_ref::<GpuGraphImpl<D>>() else {
            return Err(self.foreign("a graph"));
        };
        self.stream
            .launch_graph(&graph.graph)
            .map_err(|e| self.err(e))
    }
}

/// A driver event as a [`BackendEvent`].
struct GpuEventImpl<D: Driver> {
    description: String,
    event: GpuEvent<D>,
}

impl<D: Driver> std::fmt::Debug for GpuEventImpl<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuEvent")
            .field("device", &self.description)
            .finish_non_exhaustive()
    }
}

impl<D: Driver> BackendEvent for GpuEventImpl<D> {
    fn synchronize(&self) -> Result<()> {
        self.event
            .synchronize()
            .map_err(|e| to_error(e, D::KIND, &self.description))
    }

    fn query(&self) -> Result<bool> {
        self.event
            .query()
            .map_err(|e| to_error(e, D::KIND, &self.description))
    }

    fn elapsed_since(&self, start: &dyn BackendEvent) -> Result<Duration> {
        let err = |e| to_error(e, D::KIND, &self.description);
        let Some(start) = start.as_any().downcast_ref::<GpuEventImpl<D>>() else {
            return Err(Error::Driver {
                backend: D::KIND.name(),
                call: "offload-rt",
                code: -1,
                message: format!(
                    "timing an event of {} against another device's",
                    self.description
                ),
            });
        };
        let ms = self.event.elapsed_ms_since(&start.event).map_err(err)?;
        Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A driver graph as a [`BackendGraph`].
struct GpuGraphImpl<D: Driver> {
    graph: GpuGraph<D>,
}

impl<D: Driver> std::fmt::Debug for GpuGraphImpl<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.graph.fmt(f)
    }
}

impl<D: Driver> BackendGraph for GpuGraphImpl<D> {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A module loaded on a GPU.
struct GpuLoadedModule<D: Driver> {
    device: GpuDevice<D>,
    description: String,
    module: GpuModule<D>,
    info: ImageInfo,
    kernels: Mutex<HashMap<String, GpuFunction<D>>>,
}

impl<D: Driver> std::fmt::Debug for GpuLoadedModule<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuLoadedModule")
            .field("image", &self.info)
            .finish_non_exhaustive()
    }
}

impl<D: Driver> GpuLoadedModule<D> {
    fn err(&self, e: GpuError) -> Error {
        to_error(e, D::KIND, &self.description)
    }

    /// Launches `kernel` of this module on `stream` (the device's default stream or one of
    /// its streams).
    ///
    /// # Safety
    /// As [`Module::launch`]; `stream` is a live stream of this module's device.
    unsafe fn launch_on(
        &self,
        stream: super::Handle,
        kernel: KernelHandle,
        launch: &LaunchArgs<'_>,
    ) -> Result<()> {
        if launch.check()? == LaunchShape::Empty {
            return Ok(());
        }
        if launch.cooperative && launch.params.is_empty() {
            return Err(launch.invalid(
                "a cooperative launch passes the kernel's `Grid` as its first parameter".into(),
            ));
        }
        // SAFETY: `kernel` is a function of `self.module` (the caller's contract), which
        // stays loaded while `self` lives, on `self.device`; the caller vouches for the
        // parameters, one pointer per kernel parameter.
        unsafe {
            self.device.launch_handle(
                std::ptr::with_exposed_provenance_mut(kernel.0 as usize),
                launch.kernel,
                stream,
                launch,
            )
        }
        .map_err(|e| match e {
            GpuError::SharedMemoryLimit { reason, .. }
            | GpuError::ClusterUnsupported { reason } => launch.invalid(reason),
            GpuError::CooperativeGridTooLarge { blocks, max } => Error::CooperativeGridTooLarge {
                kernel: launch.kernel.to_owned(),
                blocks,
                max: u64::from(max),
                device: self.description.clone(),
            },
            GpuError::Driver {
                call,
                code,
                name: err_name,
                message,
            } if call.ends_with("LaunchKernel")
                || call.ends_with("LaunchKernelEx")
                || call.ends_with("LaunchCooperativeKernel") =>
            {
                launch.invalid(format!("{call}: {err_name} ({code}): {message}"))
            }
            other => self.err(other),
        })
    }
}

impl<D: Driver> Module for GpuLoadedModule<D> {
    fn image(&self) -> &ImageInfo {
        &self.info
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn kernel(&self, name: &str) -> Result<KernelHandle> {
        let mut kernels = self.kernels.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(f) = kernels.get(name) {
            return Ok(KernelHandle(f.raw_handle().expose_provenance() as u64));
        }
        let f = self.module.function(name).map_err(|e| match e {
            GpuError::KernelNotFound { .. } | GpuError::InvalidKernelName { .. } => {
                Error::KernelNotFound {
                    kernel: name.to_owned(),
                    module: self.info.module.clone(),
                    image: format!("{} {}", self.info.triple, self.info.arch),
                }
            }
            other => self.err(other),
        })?;
        let handle = KernelHandle(f.raw_handle().expose_provenance() as u64);
        kernels.insert(name.to_owned(), f);
        Ok(handle)
    }

    unsafe fn launch(&self, kernel: KernelHandle, launch: &LaunchArgs<'_>) -> Result<()> {
        // SAFETY: forwarded from this function's contract; the default stream is this
        // device's.
        unsafe { self.launch_on(self.device.default_stream(), kernel, launch) }
    }

    fn max_cooperative_blocks(
        &self,
        kernel: KernelHandle,
        threads: u32,
        shared_mem_bytes: u32,
    ) -> Result<u32> {
        // SAFETY: `kernel` is a function of this module (from `Module::kernel`), which stays
        // loaded while `self` lives.
        let max = unsafe {
            self.device.max_resident_blocks(
                std::ptr::with_exposed_provenance_mut(kernel.0 as usize),
                threads,
                shared_mem_bytes,
            )
        }
        .map_err(|e| self.err(e))?;
        max.ok_or_else(|| {
            self.err(GpuError::MissingEntryPoint {
                api: D::API,
                call: match D::KIND {
                    DeviceKind::Hip => "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor",
                    _ => "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                },
            })
        })
    }

    fn driver_block_size(
        &self,
        kernel: KernelHandle,
        shared_mem_bytes: u32,
    ) -> Result<Option<u32>> {
        // SAFETY: `kernel` is a function of this module (from `Module::kernel`), which stays
        // loaded while `self` lives.
        unsafe {
            self.device.potential_block_size(
                std::ptr::with_exposed_provenance_mut(kernel.0 as usize),
                shared_mem_bytes,
            )
        }
        .map_err(|e| self.err(e))
    }
}
