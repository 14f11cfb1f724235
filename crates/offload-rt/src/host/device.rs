//! [`Device`]: one device of the runtime, its loaded modules and its launches.

use std::collections::HashMap;
use std::ffi::c_void;
use std::fmt;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::profile;
use super::queue::{QueueRef, StreamImpl, queue_launch};
use crate::backend::cpu::CpuBackend;
use crate::backend::{Backend, DeviceKind, KernelHandle, Module, RawDevice};
use crate::error::{Error, Result};
use crate::launch::{ElementCount, LaunchArgs, LaunchConfig};
use crate::registry::{self, ImageInfo, KernelEntry};
use offload_format::DeviceFamily;

/// A kernel resolved on a device, found by the addresses of its module and kernel names.
type Resolved = (Arc<Loaded>, KernelHandle);
/// A `&'static str` by address and length: equal keys are the same string.
type NameKey = (usize, usize);

fn name_key(name: &'static str) -> NameKey {
    (name.as_ptr().addr(), name.len())
}

/// Hashes the words of a key by multiply-and-rotate: the keys are a few addresses and
/// lengths of this process's own strings, never input, so a keyed hash buys nothing and a
/// launch should not pay for one.
#[derive(Default)]
struct AddressHasher(u64);

impl std::hash::Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_usize(&mut self, word: usize) {
        self.write_u64(word as u64);
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The device (by id) and generation of the last buffer made a launch argument on this
    /// thread, taken by the launch.
    static LAUNCH_ARGUMENTS: std::cell::Cell<Option<(u64, u64)>> =
        const { std::cell::Cell::new(None) };
}

/// A device kernels run on. Cheap to clone (clones share the device). The device of a
/// [`Stream`](crate::Stream) ([`Stream::device`](crate::Stream::device)) queues its launches
/// on that stream.
#[derive(Clone)]
pub struct Device {
    inner: Arc<Inner>,
    stream: Option<Arc<StreamImpl>>,
}

struct Inner {
    id: u64,
    description: Arc<str>,
    backend: Box<dyn Backend>,
    modules: Mutex<HashMap<&'static str, Arc<Loaded>>>,
    /// The module and kernel of the last launch (names only: a launch stores two words).
    last: Mutex<Option<(&'static str, &'static str)>>,
    queues: Mutex<Vec<QueueRef>>,
    /// Kernels already resolved (module loaded, function looked up), so that a launch of one
    /// costs a read lock and a hash of two addresses before the driver call.
    resolved: RwLock<HashMap<(NameKey, NameKey), Resolved, BuildHasherDefault<AddressHasher>>>,
    /// Foreign kernels already resolved, by symbol name.
    foreign: RwLock<HashMap<NameKey, Foreign, BuildHasherDefault<AddressHasher>>>,
    /// Held shared by launches while they are queued, exclusively by a reset.
    reset_gate: RwLock<()>,
}

/// A foreign kernel found by its symbol name.
struct Foreign {
    /// The parameter sizes it was checked with: a declaration with other sizes is checked
    /// again.
    sizes: Box<[usize]>,
    /// The module holding it.
    module: &'static str,
    resolved: Resolved,
}

struct Loaded {
    module: Arc<dyn Module>,
    image: Arc<ImageInfo>,
    kernels: Mutex<HashMap<&'static str, KernelHandle>>,
}

/// What ran a launch: the device and the image the kernel came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchReport {
    /// The kernel's name.
    pub kernel: &'static str,
    /// The kernel module: a kernel crate's library name, or a CUDA or HIP source's file stem.
    pub module: &'static str,
    /// [`Device::describe`] of the device.
    pub device: Arc<str>,
    /// The image the module was loaded from.
    pub image: Arc<ImageInfo>,
}

impl fmt::Display for LaunchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}::{} on {} from {}",
            self.module, self.kernel, self.device, self.image
        )
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("id", &self.inner.id)
            .field("device", &self.inner.description)
            .finish()
    }
}

impl Device {
    /// A device over any backend: the runtime's own, or a test's (backends are internal:
    /// `offload_rt::__internal`).
    #[doc(hidden)]
    pub fn from_backend(backend: Box<dyn Backend>) -> Device {
        Device {
            inner: Arc::new(Inner {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                description: backend.describe().into(),
                backend,
                modules: Mutex::new(HashMap::new()),
                last: Mutex::new(None),
                queues: Mutex::new(Vec::new()),
                resolved: RwLock::new(HashMap::default()),
                reset_gate: RwLock::new(()),
                foreign: RwLock::new(HashMap::default()),
            }),
            stream: None,
        }
    }

    /// The device named by `OFFLOAD_DEVICE` when set; otherwise the best device present:
    /// a CUDA GPU, a HIP GPU, else the CPU.
    pub fn best() -> Result<Device> {
        if let Ok(spec) = std::env::var("OFFLOAD_DEVICE") {
            return Device::from_spec(&spec);
        }
        let carried = carried_triples();
        for kind in DeviceFamily::GPUS.map(DeviceKind::of_family) {
            if let Some(reason) = gpu_not_worth_probing(kind, &carried) {
                log(format_args!("{}:0 not tried: {reason}", kind.name()));
                continue;
            }
            // The backend logs why it could not open, under OFFLOAD_LOG.
            if let Ok(backend) = crate::backend::open_gpu(kind, 0) {
                return Ok(Device::from_backend(backend));
            }
        }
        Ok(Device::cpu())
    }

    /// The host CPU as a device.
    pub fn cpu() -> Device {
        Device::from_backend(Box::new(CpuBackend::new()))
    }

    /// The device named by `spec`: `cpu`, `cuda`, `cuda:N`, `hip` or `hip:N`.
    pub fn from_spec(spec: &str) -> Result<Device> {
        let unknown = || Error::UnknownDevice {
            spec: spec.to_owned(),
        };
        let (kind, ordinal) = match spec.trim().split_once(':') {
            Some((k, n)) => (k, n.parse::<usize>().map_err(|_| unknown())?),
            None => (spec.trim(), 0),
        };
        let family = DeviceFamily::ALL
            .into_iter()
            .find(|family| family.runtime_name() == kind)
            .ok_or_else(unknown)?;
        match DeviceKind::of_family(family) {
            DeviceKind::Cpu if ordinal == 0 => Ok(Device::cpu()),
            DeviceKind::Cpu => Err(unknown()),
            gpu => Ok(Device::from_backend(crate::backend::open_gpu(
                gpu, ordinal,
            )?)),
        }
    }

    /// What the device is, in one line.
    pub fn describe(&self) -> &str {
        &self.inner.description
    }

    /// The device's kind.
    pub fn kind(&self) -> DeviceKind {
        self.inner.backend.kind()
    }

    /// Whether launches on this device may group their blocks into thread-block clusters of
    /// more than one ([`LaunchConfig::with_cluster`]): NVIDIA GPUs of compute capability 9.0
    /// and later. AMD GPUs and the CPU device have none.
    pub fn supports_clusters(&self) -> bool {
        self.inner.backend.supports_clusters()
    }

    /// The device's handles in its driver's API, for a library that works on the same device
    /// (cuBLAS, rocBLAS, NCCL through cudarc or its own bindings): the CUDA device's ordinal
    /// and primary context, the HIP device's ordinal, or [`RawDevice::Cpu`]. With
    /// [`Device::raw_stream`] and [`DeviceBuffer::device_ptr`](crate::DeviceBuffer::device_ptr)
    /// such a library's work and the kernels' are ordered on one stream.
    pub fn raw(&self) -> RawDevice {
        self.inner.backend.raw()
    }

    /// The driver stream (`CUstream`, `hipStream_t`) this device queues its launches and
    /// copies on: a [`Stream`](crate::Stream)'s for the device of one
    /// ([`Stream::device`](crate::Stream::device)), else the device's own. Null on the CPU
    /// device, whose streams are the runtime's. Work a library queues on it runs in order
    /// with the kernels queued there; the handle lives as long as the stream (or device).
    pub fn raw_stream(&self) -> *mut std::ffi::c_void {
        match self.stream.as_deref() {
            Some(StreamImpl::Driver(stream)) => stream.raw(),
            Some(StreamImpl::Queue(_)) => std::ptr::null_mut(),
            None => self.inner.backend.raw_stream(),
        }
    }

    /// The backend behind the device (internal, as backends are).
    #[doc(hidden)]
    pub fn backend(&self) -> &dyn Backend {
        &*self.inner.backend
    }

    /// Waits for every launch and copy issued so far.
    pub fn synchronize(&self) -> Result<()> {
        self.inner
            .backend
            .synchronize()
            .map_err(|e| self.with_fault_context(e))
    }

    /// As [`Device::synchronize`], giving up after `timeout`: [`Error::Timeout`] names the
    /// last kernel launched, which may still run (a kernel that loops forever). The device
    /// is not lost by it; on a GPU, [`Device::reset`] stops such work.
    ///
    /// On the CPU device launches finish before they return, so there is nothing to wait
    /// for (a kernel that never finishes keeps its launch from returning, and the worker
    /// threads running it cannot be stopped); a CPU [`Stream`](super::stream::Stream)'s queue
    /// is waited for with
    /// [`Stream::synchronize_timeout`](super::stream::Stream::synchronize_timeout).
    ///
    /// # Errors
    /// [`Error::Timeout`], or what [`Device::synchronize`] reports.
    pub fn synchronize_timeout(&self, timeout: std::time::Duration) -> Result<()> {
        self.inner
            .backend
            .synchronize_timeout(timeout)
            .map_err(|e| self.with_fault_context(e))
    }

    /// What lost the device's context, once a fault (or a reset) lost it: everything made in
    /// it answers [`Error::DeviceLost`] from then on, until [`Device::reset`]. `None` while
    /// the device is usable, and always on the CPU device, whose faults are typed errors that
    /// leave it usable.
    pub fn lost(&self) -> Option<String> {
        self.inner.backend.lost()
    }

    /// Makes a GPU usable again after a fault lost its context (an illegal address, a trap
    /// other than a reported panic), or stops work that never finishes (see
    /// [`Device::synchronize_timeout`]): the driver destroys the context
    /// (`cuDevicePrimaryCtxReset`, `hipDeviceReset`) and the device is opened anew.
    ///
    /// Every buffer, stream, event, graph and loaded module made before answers
    /// [`Error::DeviceLost`] from then on, without a driver call, and frees nothing when
    /// dropped (the reset freed it); kernels' modules are loaded again on their next launch.
    /// The runtime never resets by itself: a reset invalidates buffers other threads may
    /// hold, which only the program can decide. Page-locked buffers
    /// ([`PinnedBuffer`](crate::PinnedBuffer)) of the device must be dropped first, since a
    /// reset unmaps their memory ([`Error::ResetRefused`]).
    ///
    /// On the CPU device there is nothing to reset: this returns `Ok(())` and everything
    /// stays valid.
    ///
    /// # Errors
    /// [`Error::ResetRefused`], or the driver's failure to reset or open the device.
    pub fn reset(&self) -> Result<()> {
        if self.kind() == DeviceKind::Cpu {
            // Its launches run to the end before they return: one may never return.
            return Ok(());
        }
        // Launches hold the gate only while they are queued: never long on a GPU.
        let _exclusive = self
            .inner
            .reset_gate
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if !self.inner.backend.reset()? {
            return Ok(());
        }
        self.inner
            .resolved
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.inner
            .foreign
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.inner
            .modules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        *self.inner.last.lock().unwrap_or_else(|e| e.into_inner()) = None;
        Ok(())
    }

    /// Notes that a buffer of generation `generation` was just made an argument of a launch
    /// on this thread ([`DeviceBuffer::device_ptr_on`](crate::DeviceBuffer::device_ptr_on)),
    /// for [`Device::launch_guard`] to check.
    pub(crate) fn note_launch_argument(&self, generation: u64) {
        LAUNCH_ARGUMENTS.set(Some((self.inner.id, generation)));
    }

    /// Held by a launch until it is queued, so that a reset cannot come between the check of
    /// its buffers' generation (their addresses were taken just before, on this thread) and
    /// the driver's launch: a launch with the old context's addresses would fault in the new
    /// one. [`Error::DeviceLost`] when the device was reset since.
    fn launch_guard(&self) -> Result<std::sync::RwLockReadGuard<'_, ()>> {
        let arguments = LAUNCH_ARGUMENTS.take();
        let guard = self
            .inner
            .reset_gate
            .read()
            .unwrap_or_else(|e| e.into_inner());
        match arguments {
            Some((id, generation)) if id == self.inner.id => {
                self.check_generation(generation)?;
            }
            _ => {}
        }
        Ok(guard)
    }

    /// How many times the device was reset.
    pub(crate) fn generation(&self) -> u64 {
        self.inner.backend.generation()
    }

    /// [`Error::DeviceLost`] for an object made in generation `generation` of the device,
    /// before a later reset.
    pub(crate) fn check_generation(&self, generation: u64) -> Result<()> {
        if generation == self.generation() {
            Ok(())
        } else {
            Err(Error::DeviceLost {
                device: self.describe().to_owned(),
                cause: "the device was reset after this buffer was made".to_owned(),
            })
        }
    }

    /// `e`, or [`Error::DeviceLost`] when the device was reset since generation
    /// `generation`: an operation racing a reset may find its memory forgotten.
    pub(crate) fn lost_or(&self, generation: u64, e: Error) -> Error {
        match self.check_generation(generation) {
            Ok(()) => self.with_fault_context(e),
            Err(lost) => lost,
        }
    }

    /// Names this device and the last kernel launched on it in a kernel fault its backend
    /// reported: a GPU reports a fault at the next call after the launch, which may be a copy.
    /// A fault that was a kernel's panic becomes [`Error::KernelPanic`] with its report.
    pub(crate) fn with_fault_context(&self, e: Error) -> Error {
        if matches!(e, Error::KernelFault { .. })
            && let Some(panic) = self.inner.backend.take_kernel_panic()
        {
            let kernel = self
                .last_launch()
                .map_or_else(|| "(unknown)".to_owned(), |r| r.kernel.to_owned());
            return Error::KernelPanic {
                kernel,
                device: self.describe().to_owned(),
                panic: Box::new(panic),
            };
        }
        match e {
            Error::KernelFault {
                kernel: None,
                call,
                code,
                name,
                message,
                ..
            } => Error::KernelFault {
                device: self.describe().to_owned(),
                kernel: self
                    .last_launch()
                    .map(|r| format!("{}::{}", r.module, r.kernel)),
                call,
                code,
                name,
                message,
            },
            Error::Timeout {
                device,
                kernels,
                waited,
            } if kernels.is_empty() => Error::Timeout {
                device,
                kernels: self
                    .last_launch()
                    .map(|r| format!("{}::{}", r.module, r.kernel))
                    .into_iter()
                    .collect(),
                waited,
            },
            other => other,
        }
    }

    /// The report of the last launch on this device.
    pub fn last_launch(&self) -> Option<LaunchReport> {
        let (module, kernel) = (*self.inner.last.lock().unwrap_or_else(|e| e.into_inner()))?;
        let (loaded, _) = self.resolve(module, kernel).ok()?;
        Some(LaunchReport {
            kernel,
            module,
            device: Arc::clone(&self.inner.description),
            image: Arc::clone(&loaded.image),
        })
    }

    /// Loads `module` now (launches load it on first use); returns the image chosen.
    pub fn load_module(&self, module: &'static str) -> Result<Arc<ImageInfo>> {
        Ok(Arc::clone(&self.module(module)?.image))
    }

    pub(crate) fn same_device(&self, other: &Device) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// This device, its launches queued on `stream`.
    pub(crate) fn bound_to(&self, stream: Arc<StreamImpl>) -> Device {
        Device {
            inner: Arc::clone(&self.inner),
            stream: Some(stream),
        }
    }

    /// This device, not bound to a stream.
    pub(crate) fn unbound(&self) -> Device {
        Device {
            inner: Arc::clone(&self.inner),
            stream: None,
        }
    }

    /// The stream this handle queues its launches on, if any.
    pub(crate) fn stream_impl(&self) -> Option<&StreamImpl> {
        self.stream.as_deref()
    }

    pub(crate) fn register_queue(&self, queue: QueueRef) {
        let mut queues = self.inner.queues.lock().unwrap_or_else(|e| e.into_inner());
        queues.retain(|q| q.strong_count() > 0);
        queues.push(queue);
    }

    /// Waits for the work queued on this device's queues (the CPU device's streams): its
    /// device memory is host memory, which must not be freed or copied while a queued
    /// launch or copy may use it.
    pub(crate) fn quiesce_queues(&self) {
        let queues: Vec<_> = {
            let queues = self.inner.queues.lock().unwrap_or_else(|e| e.into_inner());
            queues.iter().filter_map(std::sync::Weak::upgrade).collect()
        };
        for queue in queues {
            queue.drain();
        }
    }

    fn module(&self, module: &'static str) -> Result<Arc<Loaded>> {
        let mut modules = self.inner.modules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = modules.get(module) {
            return Ok(Arc::clone(m));
        }
        let loaded = registry::with_module_images(module, |images| {
            self.inner.backend.load_module(module, images)
        })?;
        if let Some(recorder) = profile::recorder() {
            recorder.image(loaded.image());
            if let Some(peaks) = self.inner.backend.peaks() {
                recorder.note_peaks(self.describe(), &peaks);
            }
        }
        let loaded = Arc::new(Loaded {
            image: Arc::new(loaded.image().clone()),
            module: Arc::from(loaded),
            kernels: Mutex::new(HashMap::new()),
        });
        modules.insert(module, Arc::clone(&loaded));
        Ok(loaded)
    }

    /// Launches kernel `kernel` of kernel module `module` (its crate's library name) with the
    /// launch ABI's parameter array.
    ///
    /// # Safety
    ///
    /// `params` has one pointer per kernel parameter, in order, each pointing at a value of
    /// exactly the parameter's type (device pointers as `u64` addresses); every device pointer
    /// points into a live allocation of this device, large enough for all the kernel's
    /// accesses under `config`, not freed before the launch finishes, and not accessed by the
    /// host meanwhile.
    pub unsafe fn launch_raw(
        &self,
        module: &'static str,
        kernel: &'static str,
        config: &LaunchConfig,
        params: &[*mut c_void],
    ) -> Result<LaunchReport> {
        let launch = LaunchArgs::new(kernel, *config, params).in_module(module);
        // SAFETY: forwarded from this function's contract.
        unsafe { self.launch_args(&launch) }
    }

    /// Finds the kernel whose symbol name is `kernel` (a foreign kernel, declared with
    /// [`extern_kernels!`](crate::extern_kernels)) in the images this device loads, and checks
    /// that `param_sizes`, the size of each declared parameter, are those its image records
    /// (`offload.kernel-params`, which the build writes for CUDA and HIP kernels). Returns the
    /// image. Launches do this on first use; call it to have a wrong declaration reported
    /// before any launch.
    ///
    /// The kernel modules whose images list the symbol are loaded in registration order until
    /// one whose loaded image lists it: a symbol in two modules is the first one's.
    ///
    /// # Errors
    /// [`Error::ForeignKernelNotFound`] naming the images searched,
    /// [`Error::KernelSignatureMismatch`], and what loading a module reports.
    pub fn load_foreign(
        &self,
        kernel: &'static str,
        param_sizes: &[usize],
    ) -> Result<Arc<ImageInfo>> {
        let (_, (loaded, _)) = self.resolve_foreign(kernel, param_sizes)?;
        Ok(Arc::clone(&loaded.image))
    }

    /// Launches the foreign kernel whose symbol name is `kernel` with the launch ABI's
    /// parameter array, found and checked as [`Device::load_foreign`] does with `sizes` as the
    /// declared parameter sizes. The handles made by
    /// [`extern_kernels!`](crate::extern_kernels) call this.
    ///
    /// # Errors
    /// As [`Device::load_foreign`]; [`Error::InvalidLaunch`] when `params` and `sizes` differ
    /// in length; what the device reports.
    ///
    /// # Safety
    /// As [`Device::launch_raw`], and `params[i]` points at `sizes[i]` bytes. Nothing checks
    /// what the foreign kernel does: that its parameters are of the declared types (the
    /// recorded sizes catch only a different count or size) and that it accesses only memory
    /// the launch gives it are the caller's responsibility.
    pub unsafe fn launch_foreign(
        &self,
        kernel: &'static str,
        config: &LaunchConfig,
        params: &[*mut c_void],
        sizes: &[usize],
    ) -> Result<LaunchReport> {
        let launch = LaunchArgs::new(kernel, *config, params).with_sizes(sizes);
        // SAFETY: forwarded from this function's contract.
        unsafe { self.launch_args(&launch) }
    }

    /// Launches `launch`, on this handle's stream if it has one: its kernel found in its
    /// module, or by its symbol name as [`Device::launch_foreign`] does. The typed handles
    /// made by `#[kernel]` and [`extern_kernels!`](crate::extern_kernels) call this.
    ///
    /// # Errors
    /// [`Error::InvalidLaunch`] when the parameters and their sizes differ in length; what
    /// finding the kernel reports; what the device reports.
    ///
    /// # Safety
    /// As [`Device::launch_raw`] for its parameters; with sizes, `params[i]` points at
    /// `sizes[i]` bytes; for a foreign kernel, as [`Device::launch_foreign`].
    #[doc(hidden)]
    pub unsafe fn launch_args(&self, launch: &LaunchArgs<'_>) -> Result<LaunchReport> {
        let kernel = launch.kernel;
        let _not_reset = self.launch_guard()?;
        if let Some(sizes) = launch.sizes
            && sizes.len() != launch.params.len()
        {
            return Err(launch.invalid(format!(
                "{} parameter values with {} parameter sizes",
                launch.params.len(),
                sizes.len()
            )));
        }
        let (module, (loaded, handle)) = match launch.module {
            Some(module) => (module, self.resolve(module, kernel)?),
            None => self.resolve_foreign(kernel, launch.sizes.unwrap_or_default())?,
        };
        match self.stream.as_deref() {
            None => match profile::recorder() {
                // SAFETY: forwarded from this function's contract; `handle` is of this module.
                None => unsafe { loaded.module.launch(handle, launch) },
                Some(recorder) => {
                    recorder.note_device(self.describe());
                    let timed = self.kind() == DeviceKind::Cpu;
                    let start = std::time::Instant::now();
                    // SAFETY: as above.
                    let ran = unsafe { loaded.module.launch(handle, launch) };
                    let times = timed.then(|| (start, std::time::Instant::now()));
                    if ran.is_ok() {
                        let (config, bytes) = (&launch.config, launch.bytes);
                        recorder.launch(kernel, module, 0, config, bytes, times);
                    }
                    ran
                }
            },
            // SAFETY: as above; the stream is this device's.
            Some(stream) => unsafe {
                queue_launch(stream, &loaded.module, handle, &launch.in_module(module))
            },
        }
        .map_err(|e| self.with_fault_context(e))?;
        let report = LaunchReport {
            kernel,
            module,
            device: Arc::clone(&self.inner.description),
            image: Arc::clone(&loaded.image),
        };
        *self.inner.last.lock().unwrap_or_else(|e| e.into_inner()) = Some((module, kernel));
        Ok(report)
    }

    /// The most blocks of `threads_per_block` threads, with `shared_mem_bytes` of dynamic
    /// shared memory each, that a cooperative launch of kernel `kernel` of kernel module
    /// `module` may have on this device: the blocks it keeps resident at once. Cooperative
    /// kernels' handles call this (`max_blocks`).
    ///
    /// # Errors
    /// [`Error::InvalidLaunch`] for a block size no device runs; what finding the kernel
    /// reports; what the device reports.
    #[doc(hidden)]
    pub fn max_cooperative_blocks(
        &self,
        module: &'static str,
        kernel: &'static str,
        threads_per_block: u32,
        shared_mem_bytes: u32,
    ) -> Result<u32> {
        let config = LaunchConfig {
            grid: (1, 1, 1),
            block: (threads_per_block, 1, 1),
            shared_mem_bytes,
            cluster: (1, 1, 1),
        };
        config.check().map_err(|reason| Error::InvalidLaunch {
            kernel: kernel.to_owned(),
            reason,
        })?;
        let (loaded, handle) = self.resolve(module, kernel)?;
        loaded
            .module
            .max_cooperative_blocks(handle, threads_per_block, shared_mem_bytes)
            .map_err(|e| self.with_fault_context(e))
    }

    /// The threads per block at which kernel `kernel` of kernel module `module` keeps the
    /// most threads resident on this device, with `dynamic_shared_bytes` of dynamic shared
    /// memory per block; of several such sizes, the largest.
    ///
    /// - **NVIDIA**: the driver's answer, `cuOccupancyMaxPotentialBlockSize` (no size
    ///   callback, no limit beyond the kernel's own launch bound). Where the driver lacks it
    ///   or finds no block that fits, CUDA's occupancy calculator
    ///   (`offload_format::occupancy`) over the registers and static shared memory the
    ///   kernel's image records (the build's `ptxas -v` figures) and its launch bound
    ///   (`.maxntid`), trying every multiple of the warp (32) up to it.
    /// - **AMD**: the HIP runtime's answer, `hipModuleOccupancyMaxPotentialBlockSize`. Where
    ///   the runtime lacks it or finds no block that fits, and offload-rt is built with its
    ///   `amdgpu-metadata` feature, `offload_format::occupancy`'s AMD rules over the VGPRs,
    ///   AGPRs, SGPRs and static LDS the code object's metadata note records, trying every
    ///   multiple of the kernel's wavefront (64 on GFX9, 32 from GFX10 unless it was built for
    ///   wave64) up to its `.max_flat_workgroup_size`.
    /// - **CPU device**: [`LaunchConfig::DEFAULT_BLOCK`] (256): a block is a loop on one
    ///   worker thread, and any size keeps every worker busy.
    ///
    /// A GPU kernel for which neither the driver nor the image says gets
    /// [`LaunchConfig::DEFAULT_BLOCK`] too.
    ///
    /// # Errors
    /// What finding the kernel reports; what the driver's call reports (a fault of an earlier
    /// kernel among them).
    pub fn best_block_size(
        &self,
        module: &'static str,
        kernel: &'static str,
        dynamic_shared_bytes: u32,
    ) -> Result<u32> {
        let kind = self.kind();
        if kind == DeviceKind::Cpu {
            return Ok(LaunchConfig::DEFAULT_BLOCK);
        }
        let (loaded, handle) = self.resolve(module, kernel)?;
        let asked = loaded
            .module
            .driver_block_size(handle, dynamic_shared_bytes)
            .map_err(|e| self.with_fault_context(e))?;
        if let Some(block) = asked {
            return Ok(block);
        }
        let info = &loaded.image;
        let computed = registry::with_module_images(module, |images| {
            Ok(computed_block_size(
                kind,
                images,
                info,
                kernel,
                u64::from(dynamic_shared_bytes),
            ))
        })?;
        Ok(computed.unwrap_or(LaunchConfig::DEFAULT_BLOCK))
    }

    /// The module and handle of `kernel`, resolved once per device.
    fn resolve(&self, module: &'static str, kernel: &'static str) -> Result<Resolved> {
        let key = (name_key(module), name_key(kernel));
        if let Some(found) = self
            .inner
            .resolved
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(found.clone());
        }
        let loaded = self.module(module)?;
        let handle = kernel_handle(&loaded, kernel)?;
        let resolved = (loaded, handle);
        self.inner
            .resolved
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, resolved.clone());
        Ok(resolved)
    }

    /// The module and handle of foreign kernel `kernel` declared with `sizes`, resolved and
    /// checked once per device and declaration.
    fn resolve_foreign(
        &self,
        kernel: &'static str,
        sizes: &[usize],
    ) -> Result<(&'static str, Resolved)> {
        let key = name_key(kernel);
        if let Some(found) = self
            .inner
            .foreign
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            && *found.sizes == *sizes
        {
            return Ok((found.module, found.resolved.clone()));
        }
        let modules = registry::modules_listing(kernel)?;
        let mut searched = Vec::new();
        let mut first_error = None;
        for module in &modules {
            let module = intern(module);
            let loaded = match self.module(module) {
                Ok(loaded) => loaded,
                Err(e) => {
                    first_error.get_or_insert(e);
                    continue;
                }
            };
            let recorded = match registry::kernel_entry(&loaded.image, kernel)? {
                KernelEntry::Absent => {
                    searched.push(short_name(&loaded.image));
                    continue;
                }
                KernelEntry::Listed(recorded) => recorded,
            };
            if let Some(found) = recorded
                && !sizes
                    .iter()
                    .map(|&s| s as u64)
                    .eq(found.iter().map(|&s| u64::from(s)))
            {
                return Err(Error::KernelSignatureMismatch {
                    kernel: kernel.to_owned(),
                    image: short_name(&loaded.image),
                    declared: sizes.to_vec(),
                    found,
                });
            }
            let handle = kernel_handle(&loaded, kernel)?;
            let resolved = (loaded, handle);
            self.inner
                .foreign
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(
                    key,
                    Foreign {
                        sizes: sizes.into(),
                        module,
                        resolved: resolved.clone(),
                    },
                );
            return Ok((module, resolved));
        }
        if modules.is_empty() {
            searched = registry::inventory()
                .into_iter()
                .filter_map(|(_, images)| images.ok())
                .flatten()
                .map(|image| short_name(&image))
                .collect();
        } else if searched.is_empty()
            && let Some(e) = first_error
        {
            // No module listing the kernel has an image this device runs: that is the news.
            return Err(e);
        }
        Err(Error::ForeignKernelNotFound {
            kernel: kernel.to_owned(),
            device: self.describe().to_owned(),
            searched,
        })
    }
}

/// The launch shapes that need a device to be chosen.
impl LaunchConfig {
    /// A 1-D launch with at least `n` threads in blocks of the size at which `kernel` (of
    /// kernel module `module`: a handle's `MODULE` and `NAME`) keeps the most threads
    /// resident on `device`, as [`Device::best_block_size`](crate::Device::best_block_size)
    /// finds it with no dynamic shared memory: the driver's `cuOccupancyMaxPotentialBlockSize`
    /// on an NVIDIA GPU and `hipModuleOccupancyMaxPotentialBlockSize` on an AMD GPU, computed
    /// from the kernel's image where the driver lacks the call (see there), 256 on the CPU
    /// device.
    ///
    /// # Errors
    /// What finding the kernel on `device` reports.
    pub fn for_num_elems_on(
        device: &Device,
        module: &'static str,
        kernel: &'static str,
        n: impl ElementCount,
    ) -> Result<LaunchConfig> {
        let block = device.best_block_size(module, kernel, 0)?;
        let blocks = n.count().div_ceil(u64::from(block)).max(1);
        Ok(LaunchConfig {
            grid: (u32::try_from(blocks).unwrap_or(u32::MAX), 1, 1),
            block: (block, 1, 1),
            shared_mem_bytes: 0,
            cluster: (1, 1, 1),
        })
    }
}

/// [`Device::best_block_size`] where the driver does not answer: the occupancy rules over the
/// figures the loaded image `info` (one of `images`, the module's) records for `kernel` on a
/// GPU of `kind`; `None` where it records none (or, for AMD, where offload-rt is built
/// without `amdgpu-metadata`).
fn computed_block_size(
    kind: DeviceKind,
    images: &[registry::RegisteredImage<'_>],
    info: &ImageInfo,
    kernel: &str,
    dynamic_shared_bytes: u64,
) -> Option<u32> {
    let image = images
        .iter()
        .find(|i| i.source == info.source && i.index == info.index)?;
    match kind {
        DeviceKind::Cuda => {
            let ptx = images
                .iter()
                .find(|i| i.binary.image_kind == offload_format::ImageKind::Ptx)
                .map(|i| i.binary);
            crate::launch::image_block_size(
                image.binary,
                ptx,
                &info.arch,
                kernel,
                dynamic_shared_bytes,
            )
        }
        #[cfg(feature = "amdgpu-metadata")]
        DeviceKind::Hip => crate::launch::code_object_block_size(
            image.bytes(),
            &info.arch,
            kernel,
            dynamic_shared_bytes,
        ),
        _ => None,
    }
}

/// The handle of `kernel` in a loaded module, looked up once.
fn kernel_handle(loaded: &Loaded, kernel: &'static str) -> Result<KernelHandle> {
    let mut kernels = loaded.kernels.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&h) = kernels.get(kernel) {
        return Ok(h);
    }
    let h = loaded.module.kernel(kernel)?;
    kernels.insert(kernel, h);
    Ok(h)
}

/// An image as errors about foreign kernels name it: `module/arch/triple`.
fn short_name(image: &ImageInfo) -> String {
    format!("{}/{}/{}", image.module, image.arch, image.triple)
}

/// `name` as a `&'static str`, one allocation per distinct name for the process: module names
/// found at run time (those of foreign kernels) key the per-device tables as the names of
/// `#[kernel]` modules, which are literals, do. There are as many as registered modules.
fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&known) = names.iter().find(|&&n| n == name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.push(leaked);
    leaked
}

fn log(line: std::fmt::Arguments<'_>) {
    crate::backend::gpu::log(line);
}

/// The triples of every image the program carries.
fn carried_triples() -> Vec<String> {
    let mut triples: Vec<String> = crate::registry::inventory()
        .into_iter()
        .filter_map(|(_, images)| images.ok())
        .flatten()
        .map(|image| image.triple)
        .collect();
    triples.sort();
    triples.dedup();
    triples
}

/// Why [`Device::best`] need not start a GPU driver at all, if it need not: starting one
/// (`cuInit`, `hipInit`) costs tens of milliseconds even when it finds nothing. A driver
/// cannot find a device without its device nodes, and a device is of no use to a program
/// that carries no image for it. `OFFLOAD_DEVICE=cuda:N|hip:N` still asks the driver itself.
/// (With a GPU behind a device node the driver is asked as before.)
fn gpu_not_worth_probing(kind: DeviceKind, carried: &[String]) -> Option<String> {
    let triple = kind.family().device_triple()?;
    if !carried.iter().any(|t| t == triple) {
        return Some(format!("the program carries no {triple} image"));
    }
    crate::backend::missing_device_nodes(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kernel names often lie side by side in read-only data: no two different names may
    /// share a key (an address folded with the length would let `block_sum` find `saxpy`).
    #[test]
    fn names_side_by_side_have_different_keys() {
        static NAMES: &str = "saxpyblock_sumindicesreverse_blocks";
        let names: Vec<&'static str> = (0..NAMES.len())
            .flat_map(|i| (i + 1..=NAMES.len()).map(move |j| &NAMES[i..j]))
            .collect();
        let mut keys: Vec<NameKey> = names.iter().map(|n| name_key(n)).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), names.len());
    }

    /// Where the driver does not answer, an NVIDIA image's recorded `ptxas -v` figures give
    /// the block size by CUDA's occupancy calculator; without figures, or on another kind of
    /// device, there is nothing to compute from.
    #[test]
    fn without_the_drivers_answer_the_block_size_is_computed_from_the_image() {
        use offload_format::offload_binary::{
            KEY_KERNEL_RESOURCES, PtxasKernelInfo, encode_kernel_resources,
        };
        use offload_format::{ImageKind, OffloadBinary, OffloadKind};
        // 128 registers on sm_80: 16 warps fit, 512 threads in one block is the largest that
        // keeps them (launch.rs has the arithmetic).
        let resources = encode_kernel_resources(&[PtxasKernelInfo {
            name: "heavy".into(),
            registers: 128,
            ..Default::default()
        }]);
        let cubin = OffloadBinary::new(ImageKind::Cubin, OffloadKind::Cuda, b"cubin")
            .with_string("triple", "nvptx64-nvidia-cuda")
            .with_string("arch", "sm_80")
            .with_string(KEY_KERNEL_RESOURCES, &resources);
        let images = [registry::RegisteredImage {
            source: "test",
            index: 0,
            module: "m",
            binary: &cubin,
        }];
        let info = images[0].describe();
        let computed = |kind, kernel| computed_block_size(kind, &images, &info, kernel, 0);
        assert_eq!(computed(DeviceKind::Cuda, "heavy"), Some(512));
        assert_eq!(computed(DeviceKind::Cuda, "unrecorded"), None);
        assert_eq!(computed(DeviceKind::Cpu, "heavy"), None);
        // Not an AMD code object: nothing to read.
        assert_eq!(computed(DeviceKind::Hip, "heavy"), None);
        // An image that is not among the module's.
        let other = ImageInfo {
            index: 1,
            ..info.clone()
        };
        assert_eq!(
            computed_block_size(DeviceKind::Cuda, &images, &other, "heavy", 0),
            None
        );
    }

    /// The CPU device's best block is the documented default, whatever the kernel.
    #[test]
    fn the_cpu_devices_best_block_is_the_default() {
        let cpu = Device::cpu();
        assert_eq!(cpu.best_block_size("any", "kernel", 0).unwrap(), 256);
        let config = LaunchConfig::for_num_elems_on(&cpu, "any", "kernel", 1000).unwrap();
        assert_eq!((config.grid, config.block), ((4, 1, 1), (256, 1, 1)));
    }
}
