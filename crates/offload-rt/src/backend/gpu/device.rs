//! The RAII layer over a [`Driver`]: an opened device with its context and stream, device
//! buffers, modules, functions, events, streams and graphs, each released on drop.
//!
//! Every operation makes the device's context current on the calling thread first (unless
//! the driver says it is), so these values can move between threads and other code may
//! change the current context in between.

use std::ffi::{CStr, CString};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use super::driver::{DeviceInfo, Driver, Handle, PeerEnd};
use super::{GpuError, GpuImageKind};
use crate::launch::LaunchArgs;

struct Context<D: Driver> {
    driver: &'static D,
    info: D::Info,
    ctx: Handle,
    stream: Handle,
    /// The grid barrier word of cooperative launches on each stream (by its handle's
    /// address): a zeroed u32, back to zero after every launch that finishes.
    grid_barriers: Mutex<Vec<(usize, u64)>>,
    /// What lost the context, once it is lost (a fault the driver keeps reporting, or a
    /// reset): no handle of it reaches the driver afterwards.
    lost: OnceLock<String>,
    /// Whether the driver reset the context: its page-locked memory is unmapped.
    reset: AtomicBool,
    /// Held shared across every call on the context's handles, exclusively by a reset: no
    /// call that found the context live is still under way when the driver destroys it. A
    /// reset only tries for it (a plain wait on a kernel that never finishes holds it for
    /// ever) and goes ahead after [`RESET_GRACE`]; the wait then gets the driver's error.
    /// Never waited for, the lock cannot deadlock a thread that already holds it shared.
    gate: RwLock<()>,
    /// Page-locked buffers of [`GpuDevice::alloc_host`] alive, which a reset would unmap.
    pinned: AtomicUsize,
}

/// A context found live, kept from being reset while held.
type Live<'a> = RwLockReadGuard<'a, ()>;

/// How long a reset waits for the calls under way in the context to return.
const RESET_GRACE: Duration = Duration::from_millis(200);

// SAFETY: driver handles are process-wide and the driver APIs are thread-safe; every use
// goes through `bind`, which makes the context current on the calling thread.
unsafe impl<D: Driver> Send for Context<D> {}
// SAFETY: as above; no method mutates the Rust-side fields.
unsafe impl<D: Driver> Sync for Context<D> {}

impl<D: Driver> Context<D> {
    fn new(driver: &'static D, info: D::Info, ctx: Handle, stream: Handle) -> Self {
        Self {
            driver,
            info,
            ctx,
            stream,
            grid_barriers: Mutex::new(Vec::new()),
            lost: OnceLock::new(),
            reset: AtomicBool::new(false),
            gate: RwLock::new(()),
            pinned: AtomicUsize::new(0),
        }
    }

    /// [`GpuError::DeviceLost`] once the context is lost.
    fn check_live(&self) -> Result<(), GpuError> {
        match self.lost.get() {
            Some(cause) => Err(GpuError::DeviceLost {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Makes the context current on the calling thread, unless it is lost; the guard keeps it
    /// from being reset until dropped.
    fn bind(&self) -> Result<Live<'_>, GpuError> {
        // Checked first without the gate too: a reset waiting for the gate is not kept out
        // by calls that would only find the context lost.
        self.check_live()?;
        let live = self.gate.read().unwrap_or_else(PoisonError::into_inner);
        self.check_live()?;
        // SAFETY: `ctx` is from `context_open` for `info`, closed only on drop, and not reset
        // (not lost).
        unsafe { self.driver.context_bind(&self.info, self.ctx) }?;
        Ok(live)
    }

    /// Marks the context lost for `cause`, unless it already is.
    fn lose(&self, cause: String) {
        let _ = self.lost.set(cause);
    }

    /// `result`, noting a fault that loses the context.
    fn note<T>(&self, result: Result<T, GpuError>) -> Result<T, GpuError> {
        if let Err(GpuError::KernelFault {
            call,
            code,
            name,
            message,
        }) = &result
        {
            self.lose(format!("{call} reported {name} ({code}): {message}"));
        }
        result
    }

    /// Binds, runs `call` with the driver and notes a fault it reports.
    fn call<T>(&self, call: impl FnOnce(&'static D) -> Result<T, GpuError>) -> Result<T, GpuError> {
        let _live = self.bind()?;
        self.note(call(self.driver))
    }

    /// As [`Context::call`], for a call that waits for the device.
    fn wait(&self, call: impl FnOnce(&'static D) -> Result<(), GpuError>) -> Result<(), GpuError> {
        self.call(call)
    }

    /// The gate held exclusively once the calls under way have returned, or `None` after
    /// [`RESET_GRACE`] (a wait on a kernel that never finishes).
    fn exclusive(&self) -> Option<std::sync::RwLockWriteGuard<'_, ()>> {
        let start = Instant::now();
        loop {
            match self.gate.try_write() {
                Ok(guard) => return Some(guard),
                Err(std::sync::TryLockError::Poisoned(e)) => return Some(e.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) if start.elapsed() < RESET_GRACE => {
                    std::thread::sleep(Duration::from_micros(100));
                }
                Err(std::sync::TryLockError::WouldBlock) => return None,
            }
        }
    }

    fn wrong_device(&self, what: &'static str, owner: &Context<D>) -> GpuError {
        if let Some(cause) = owner.lost.get().or(self.lost.get()) {
            // An object made before a reset, used with one made after it.
            return GpuError::DeviceLost {
                cause: cause.clone(),
            };
        }
        GpuError::WrongDevice {
            api: D::API,
            what,
            owner: owner.info.ordinal(),
            used_with: self.info.ordinal(),
        }
    }
}

impl<D: Driver> Drop for Context<D> {
    fn drop(&mut self) {
        // Errors here have no one to go to: the context is being torn down.
        if self.bind().is_ok() {
            let barriers = self
                .grid_barriers
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner);
            for &(_, word) in barriers.iter() {
                // SAFETY: allocated in this context by `grid_barrier`; no launch is left
                // that uses it (every stream and module holds an `Arc` of this context).
                let _ = unsafe { self.driver.mem_free(word) };
            }
            // SAFETY: the stream was created in this context and nothing uses it any more
            // (every buffer, module, event and stream holds an `Arc` of this context).
            let _ = unsafe { self.driver.stream_destroy(self.stream) };
        }
        // SAFETY: pairs with `context_open` in `GpuDevice::open`; nothing holds the context.
        unsafe { self.driver.context_close(&self.info, self.ctx) };
    }
}

/// One GPU, opened: its context and the stream that orders its default work. Cheap to
/// clone.
pub struct GpuDevice<D: Driver> {
    ctx: Arc<Context<D>>,
}

impl<D: Driver> Clone for GpuDevice<D> {
    fn clone(&self) -> Self {
        Self {
            ctx: Arc::clone(&self.ctx),
        }
    }
}

impl<D: Driver> fmt::Debug for GpuDevice<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuDevice")
            .field("info", &self.ctx.info)
            .finish_non_exhaustive()
    }
}

impl<D: Driver> GpuDevice<D> {
    /// Opens device `ordinal`.
    ///
    /// # Errors
    /// Why the driver is unavailable, [`GpuError::DeviceOutOfRange`], or a driver failure.
    pub fn open(ordinal: usize) -> Result<Self, GpuError> {
        let driver = D::get()?;
        let count = driver.device_count()?;
        if ordinal >= count {
            return Err(if count == 0 {
                GpuError::NoDevices { api: D::API }
            } else {
                GpuError::DeviceOutOfRange {
                    api: D::API,
                    ordinal,
                    count,
                }
            });
        }
        let info = driver.device_info(ordinal)?;
        let ctx = driver.context_open(&info)?;
        let stream = match driver.stream_create() {
            Ok(s) => s,
            Err(e) => {
                // SAFETY: pairs with the open just above; nothing of the context escaped.
                unsafe { driver.context_close(&info, ctx) };
                return Err(e);
            }
        };
        Ok(Self {
            ctx: Arc::new(Context::new(driver, info, ctx, stream)),
        })
    }

    /// Whether `other` is this device opened at the same time (not across a reset).
    pub(crate) fn same_context(&self, other: &GpuDevice<D>) -> bool {
        Arc::ptr_eq(&self.ctx, &other.ctx)
    }

    /// What lost the device's context, once it is lost.
    pub fn lost(&self) -> Option<&str> {
        self.ctx.lost.get().map(String::as_str)
    }

    /// Marks the device's context lost for `cause` (unless it already is): nothing of it
    /// reaches the driver afterwards.
    pub fn lose(&self, cause: String) {
        self.ctx.lose(cause);
    }

    /// Resets the device: marks its context lost (every object made in it answers
    /// [`GpuError::DeviceLost`] from then on), has the driver destroy it, and opens the
    /// device anew; returns the device opened.
    ///
    /// # Errors
    /// [`GpuError::ResetRefused`] while page-locked buffers of the device are alive (the
    /// reset would unmap memory they lend out); the driver's failure to reset or open.
    pub fn reset(&self) -> Result<GpuDevice<D>, GpuError> {
        let ctx = &self.ctx;
        ctx.lose("the device was reset".to_owned());
        let _exclusive = ctx.exclusive();
        let pinned = ctx.pinned.load(Ordering::SeqCst);
        if pinned > 0 {
            return Err(GpuError::ResetRefused {
                reason: format!(
                    "{pinned} page-locked buffer(s) of it are alive, whose memory a reset would \
                     unmap; drop them and reset again"
                ),
            });
        }
        if !ctx.reset.load(Ordering::SeqCst) {
            // SAFETY: the context is lost, so no handle of it reaches the driver again, and
            // no call that found it live is under way (the gate is held exclusively), but
            // for a wait on a kernel that never finishes, which the driver fails.
            unsafe { ctx.driver.context_reset(&ctx.info) }?;
            ctx.reset.store(true, Ordering::SeqCst);
        }
        Self::open(ctx.info.ordinal())
    }

    /// What the driver says about this device.
    pub fn info(&self) -> &D::Info {
        &self.ctx.info
    }

    /// The driver's context handle (CUDA: the device's primary context).
    pub fn raw_context(&self) -> Handle {
        self.ctx.ctx
    }

    /// The driver's handle of the stream that orders the device's own work.
    pub fn raw_stream(&self) -> Handle {
        self.ctx.stream
    }

    /// The driver.
    pub fn driver(&self) -> &'static D {
        self.ctx.driver
    }

    /// (free, total) device memory in bytes.
    ///
    /// # Errors
    /// A driver failure.
    pub fn memory_info(&self) -> Result<(usize, usize), GpuError> {
        self.ctx.call(|driver| driver.mem_info())
    }

    /// Allocates `bytes` of device memory (a zero-size buffer allocates nothing).
    ///
    /// # Errors
    /// [`GpuError::OutOfMemory`] or a driver failure.
    pub fn alloc(&self, bytes: usize) -> Result<GpuBuffer<D>, GpuError> {
        let ptr = if bytes == 0 {
            0
        } else {
            self.ctx.call(|driver| driver.mem_alloc(bytes))?
        };
        Ok(GpuBuffer {
            ctx: Arc::clone(&self.ctx),
            ptr,
            len: bytes,
        })
    }

    /// Allocates `bytes` of page-locked host memory, zeroed, which asynchronous copies
    /// need.
    ///
    /// # Errors
    /// [`GpuError::OutOfMemory`] or a driver failure.
    pub fn alloc_host(&self, bytes: usize) -> Result<PinnedBytes<D>, GpuError> {
        let ptr = if bytes == 0 {
            std::ptr::NonNull::<u8>::dangling().as_ptr()
        } else {
            let _live = self.ctx.bind()?;
            let p = self.ctx.note(self.ctx.driver.host_alloc(bytes))?;
            // Counted while the context cannot be reset (the guard is held).
            self.ctx.pinned.fetch_add(1, Ordering::SeqCst);
            // SAFETY: the driver gave out `bytes` writable bytes at `p`.
            unsafe { std::ptr::write_bytes(p, 0, bytes) };
            p
        };
        Ok(PinnedBytes {
            ctx: Arc::clone(&self.ctx),
            ptr,
            len: bytes,
            device: None,
        })
    }

    /// Allocates `bytes` (> 0) of page-locked host memory, zeroed, that kernels can read and
    /// write too, at [`PinnedBytes::device_ptr`].
    ///
    /// # Errors
    /// [`GpuError::MissingEntryPoint`] or a driver failure.
    pub fn alloc_mapped(&self, bytes: usize) -> Result<PinnedBytes<D>, GpuError> {
        let (ptr, device) = self
            .ctx
            .call(|driver| driver.host_alloc_mapped(bytes.max(1)))?;
        // SAFETY: the driver gave out `bytes` writable bytes at `ptr`.
        unsafe { std::ptr::write_bytes(ptr, 0, bytes.max(1)) };
        Ok(PinnedBytes {
            ctx: Arc::clone(&self.ctx),
            ptr,
            len: bytes.max(1),
            device: Some(device),
        })
    }

    /// Writes `bytes` at device address `address` (a module's global), after the work queued
    /// on the device's stream, and waits for it.
    ///
    /// # Safety
    /// `address .. address + bytes.len()` is device memory of this device that no kernel
    /// uses meanwhile.
    ///
    /// # Errors
    /// A kernel fault or a driver failure.
    pub unsafe fn write_device(&self, address: u64, bytes: &[u8]) -> Result<(), GpuError> {
        let stream = self.ctx.stream;
        // SAFETY: this function's contract; `bytes` stays borrowed until the stream is
        // synchronized.
        self.ctx.call(|driver| unsafe {
            driver.copy_htod(address, bytes.as_ptr(), bytes.len(), stream)
        })?;
        self.ctx.wait(|driver| {
            // SAFETY: the stream lives as long as the context.
            unsafe { driver.stream_synchronize(stream) }
        })
    }

    /// Reads `len` bytes at device address `address` (a module's global), after the work
    /// queued on the device's stream.
    ///
    /// # Safety
    /// `address .. address + len` is device memory of this device that no kernel writes
    /// meanwhile.
    ///
    /// # Errors
    /// A kernel fault or a driver failure.
    pub unsafe fn read_device(&self, address: u64, len: usize) -> Result<Vec<u8>, GpuError> {
        let stream = self.ctx.stream;
        let mut bytes = vec![0; len];
        self.ctx.call(|driver| {
            // SAFETY: this function's contract; `bytes` is not touched until the stream is
            // synchronized.
            unsafe { driver.copy_dtoh(bytes.as_mut_ptr(), address, len, stream) }
        })?;
        self.ctx.wait(|driver| {
            // SAFETY: the stream lives as long as the context.
            unsafe { driver.stream_synchronize(stream) }
        })?;
        Ok(bytes)
    }

    /// Loads a module from an image of the given kind. The image is checked first, so that
    /// the driver never reads past its end.
    ///
    /// # Errors
    /// [`GpuError::MalformedImage`], [`GpuError::PtxTooNew`], [`GpuError::ModuleLoad`].
    pub fn load_module(&self, image: &[u8], kind: GpuImageKind) -> Result<GpuModule<D>, GpuError> {
        let image = self.ctx.driver.prepare_image(image, kind)?;
        let module = self.ctx.call(|driver| {
            // SAFETY: `prepare_image` checked the image; the context is current.
            unsafe { driver.module_load(&image, kind, &self.ctx.info) }
        })?;
        Ok(GpuModule {
            inner: Arc::new(ModuleInner {
                ctx: Arc::clone(&self.ctx),
                module,
            }),
        })
    }

    /// Launches `function` on this device's stream as `launch` says (its grid, block,
    /// dynamic shared memory and parameters, unchecked); it runs asynchronously.
    ///
    /// # Safety
    /// `launch`'s parameters are one pointer per kernel parameter, each to a live value of
    /// exactly the parameter's type (device pointers as their 64-bit address), and every
    /// device pointer passed stays allocated until the kernel has finished.
    ///
    /// # Errors
    /// [`GpuError::WrongDevice`], [`GpuError::SharedMemoryLimit`] or the driver's launch
    /// failure.
    pub unsafe fn launch(
        &self,
        function: &GpuFunction<D>,
        launch: &LaunchArgs<'_>,
    ) -> Result<(), GpuError> {
        if !Arc::ptr_eq(&function.module.ctx, &self.ctx) {
            return Err(self.ctx.wrong_device("kernel", &function.module.ctx));
        }
        // SAFETY: forwarded from this function's contract; the function is of this device
        // and alive (held by `function`); the stream is this device's.
        unsafe { self.launch_handle(function.function, &function.name, self.ctx.stream, launch) }
    }

    /// As [`GpuDevice::launch`], on `stream`.
    ///
    /// # Safety
    /// As [`GpuDevice::launch`].
    ///
    /// # Errors
    /// As [`GpuDevice::launch`].
    pub unsafe fn launch_on(
        &self,
        stream: &GpuStream<D>,
        function: &GpuFunction<D>,
        launch: &LaunchArgs<'_>,
    ) -> Result<(), GpuError> {
        for (what, owner) in [("stream", &stream.ctx), ("kernel", &function.module.ctx)] {
            if !Arc::ptr_eq(owner, &self.ctx) {
                return Err(self.ctx.wrong_device(what, owner));
            }
        }
        // SAFETY: forwarded from this function's contract; the function is of this device
        // and alive (held by `function`); the stream is this device's.
        unsafe { self.launch_handle(function.function, &function.name, stream.stream, launch) }
    }

    /// Launches the raw `function` (kernel `name`, which errors name) on `stream`.
    ///
    /// # Safety
    /// As [`GpuDevice::launch`]; `function` belongs to a live module of this device and
    /// `stream` is a live stream of this device (or its default stream).
    pub(crate) unsafe fn launch_handle(
        &self,
        function: Handle,
        name: &str,
        stream: Handle,
        launch: &LaunchArgs<'_>,
    ) -> Result<(), GpuError> {
        let driver = self.ctx.driver;
        let _live = self.ctx.bind()?;
        // SAFETY: the function's module is alive and of this context (the caller's
        // contract), which is current.
        self.ctx.note(unsafe {
            driver.prepare_shared(
                function,
                name,
                launch.config.shared_mem_bytes,
                &self.ctx.info,
            )
        })?;
        if launch.config.is_clustered() {
            if launch.cooperative {
                return Err(GpuError::ClusterUnsupported {
                    reason: "a cooperative launch runs no thread-block clusters here: launch \
                             it with clusters of one block"
                        .to_owned(),
                });
            }
            // SAFETY: as above.
            let launched =
                unsafe { driver.launch_cluster(function, stream, launch, &self.ctx.info) };
            return self.ctx.note(launched);
        }
        if launch.cooperative {
            // SAFETY: as above.
            let launched = unsafe { self.launch_cooperative(function, stream, launch) };
            return self.ctx.note(launched);
        }
        // SAFETY: as above; the stream is this context's, and the caller vouches for the
        // parameters.
        let launched = unsafe { driver.launch(function, stream, launch) };
        self.ctx.note(launched)
    }

    /// A cooperative launch: the grid checked against the blocks the device keeps resident,
    /// and the kernel's `Grid` (its first parameter) pointed at `stream`'s barrier word.
    ///
    /// # Safety
    /// As [`GpuDevice::launch_handle`], the context current.
    unsafe fn launch_cooperative(
        &self,
        function: Handle,
        stream: Handle,
        launch: &LaunchArgs<'_>,
    ) -> Result<(), GpuError> {
        let (grid, block) = (launch.config.grid, launch.config.block);
        let blocks = u64::from(grid.0) * u64::from(grid.1) * u64::from(grid.2);
        let threads = block.0 * block.1 * block.2;
        // SAFETY: the function is live (the caller's contract) and the context current.
        let max = unsafe {
            self.ctx.driver.max_resident_blocks(
                function,
                threads,
                launch.config.shared_mem_bytes,
                &self.ctx.info,
            )
        }?;
        if let Some(max) = max
            && blocks > u64::from(max)
        {
            return Err(GpuError::CooperativeGridTooLarge { blocks, max });
        }
        let barrier = self.grid_barrier(stream)?;
        let mut params = launch.params.to_vec();
        if let Some(grid) = params.first_mut() {
            *grid = (&raw const barrier).cast_mut().cast();
        }
        let launch = LaunchArgs {
            params: &params,
            ..*launch
        };
        // SAFETY: as [`GpuDevice::launch_handle`]; the first parameter is the `Grid`, a u64
        // barrier address, which `params[0]` now points at (the driver copies it at the call).
        unsafe {
            self.ctx
                .driver
                .launch_cooperative(function, stream, &launch)
        }
    }

    /// The blocks the device keeps resident at once for `function` with `threads` threads
    /// and `shared` bytes of dynamic shared memory per block; `None` where the driver cannot
    /// say.
    ///
    /// # Safety
    /// `function` is a live function of this context.
    pub(crate) unsafe fn max_resident_blocks(
        &self,
        function: Handle,
        threads: u32,
        shared: u32,
    ) -> Result<Option<u32>, GpuError> {
        // SAFETY: this function's contract.
        self.ctx.call(|driver| unsafe {
            driver.max_resident_blocks(function, threads, shared, &self.ctx.info)
        })
    }

    /// The block size the driver picks for `function` with `shared` bytes of dynamic shared
    /// memory per block ([`Driver::potential_block_size`]); `None` where it cannot say.
    ///
    /// # Safety
    /// `function` is a live function of this context.
    pub(crate) unsafe fn potential_block_size(
        &self,
        function: Handle,
        shared: u32,
    ) -> Result<Option<u32>, GpuError> {
        // SAFETY: this function's contract.
        self.ctx
            .call(|driver| unsafe { driver.potential_block_size(function, shared) })
    }

    /// `stream`'s grid barrier word, allocated and zeroed (in stream order) on its first
    /// cooperative launch.
    fn grid_barrier(&self, stream: Handle) -> Result<u64, GpuError> {
        let key = stream as usize;
        let mut barriers = self
            .ctx
            .grid_barriers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(&(_, word)) = barriers.iter().find(|(s, _)| *s == key) {
            return Ok(word);
        }
        let driver = self.ctx.driver;
        let word = driver.mem_alloc(4)?;
        // SAFETY: `word` is the 4 bytes just allocated; the stream is this context's.
        if let Err(e) = unsafe { driver.memset(word, 0, 4, stream) } {
            // SAFETY: allocated above, never used.
            let _ = unsafe { driver.mem_free(word) };
            return Err(e);
        }
        barriers.push((key, word));
        Ok(word)
    }

    /// Makes the device's context current on the calling thread.
    ///
    /// # Errors
    /// A driver failure.
    pub fn bind(&self) -> Result<(), GpuError> {
        self.ctx.bind().map(drop)
    }

    /// The device's default stream.
    pub(crate) fn default_stream(&self) -> Handle {
        self.ctx.stream
    }

    /// Waits until all work on this device's stream is done; a kernel fault surfaces here.
    ///
    /// # Errors
    /// [`GpuError::KernelFault`] or a driver failure.
    pub fn synchronize(&self) -> Result<(), GpuError> {
        let stream = self.ctx.stream;
        self.ctx.wait(|driver| {
            // SAFETY: the stream lives as long as the context.
            unsafe { driver.stream_synchronize(stream) }
        })
    }

    /// As [`GpuDevice::synchronize`], giving up after `timeout`.
    ///
    /// # Errors
    /// [`GpuError::Timeout`], [`GpuError::KernelFault`] or a driver failure.
    pub fn synchronize_timeout(&self, timeout: Duration) -> Result<(), GpuError> {
        wait_with_timeout(&self.ctx, self.ctx.stream, timeout)
    }

    /// Copies `len` bytes from `src` to `dst` on the device's stream (both on this device).
    ///
    /// # Errors
    /// [`GpuError::CopyOutOfBounds`], [`GpuError::WrongDevice`] or a driver failure.
    pub fn copy_device_to_device(
        &self,
        dst: &mut GpuBuffer<D>,
        src: &GpuBuffer<D>,
        len: usize,
    ) -> Result<(), GpuError> {
        for b in [&*dst, src] {
            if !Arc::ptr_eq(&b.ctx, &self.ctx) {
                return Err(self.ctx.wrong_device("buffer", &b.ctx));
            }
            b.check(0, len)?;
        }
        if len == 0 {
            return Ok(());
        }
        let stream = self.ctx.stream;
        self.ctx.call(|driver| {
            // SAFETY: both ranges were checked to lie in live allocations of this context.
            unsafe { driver.copy_dtod(dst.ptr, src.ptr, len, stream) }
        })
    }

    /// Copies all of `src`, a buffer of another device of this driver, into `dst` (of this
    /// device, as long), and waits for it: directly between the devices where they can reach
    /// each other, else staged by the driver.
    ///
    /// # Errors
    /// [`GpuError::CopyOutOfBounds`], [`GpuError::WrongDevice`] or a driver failure.
    pub fn copy_peer(&self, dst: &mut GpuBuffer<D>, src: &GpuBuffer<D>) -> Result<(), GpuError> {
        if !Arc::ptr_eq(&dst.ctx, &self.ctx) {
            return Err(self.ctx.wrong_device("buffer", &dst.ctx));
        }
        dst.check(0, src.len)?;
        if src.len == 0 {
            return Ok(());
        }
        let _source_live = src.ctx.gate.read().unwrap_or_else(PoisonError::into_inner);
        src.ctx.check_live()?;
        let stream = self.ctx.stream;
        // SAFETY: both ranges lie in live allocations of their devices, checked above (the
        // source's context is kept from a reset by its guard); `stream` is this (the
        // destination) device's; waited for before returning.
        self.ctx.call(|driver| unsafe {
            driver.copy_peer(
                PeerEnd {
                    address: dst.ptr,
                    info: &self.ctx.info,
                    ctx: self.ctx.ctx,
                },
                PeerEnd {
                    address: src.ptr,
                    info: &src.ctx.info,
                    ctx: src.ctx.ctx,
                },
                src.len,
                stream,
            )
        })?;
        self.ctx.wait(|driver| {
            // SAFETY: the stream lives as long as the context.
            unsafe { driver.stream_synchronize(stream) }
        })
    }

    /// A new event on this device, for ordering and timing work.
    ///
    /// # Errors
    /// A driver failure.
    pub fn event(&self) -> Result<GpuEvent<D>, GpuError> {
        let event = self.ctx.call(|driver| driver.event_create())?;
        Ok(GpuEvent {
            ctx: Arc::clone(&self.ctx),
            event,
        })
    }

    /// A new stream on this device.
    ///
    /// # Errors
    /// A driver failure.
    pub fn stream(&self) -> Result<GpuStream<D>, GpuError> {
        let stream = self.ctx.call(|driver| driver.stream_create())?;
        Ok(GpuStream {
            ctx: Arc::clone(&self.ctx),
            stream,
            owned: true,
        })
    }

    /// A stream of this device that another owner created (`stream`, a driver handle), which
    /// is not destroyed on drop.
    ///
    /// # Safety
    /// `stream` is a live stream of this device's context and outlives the value returned.
    pub unsafe fn wrap_stream(&self, stream: Handle) -> GpuStream<D> {
        GpuStream {
            ctx: Arc::clone(&self.ctx),
            stream,
            owned: false,
        }
    }

    /// The raw context and default stream, for code that calls the driver directly
    /// (benchmarks).
    pub fn raw_handles(&self) -> (Handle, Handle) {
        (self.ctx.ctx, self.ctx.stream)
    }
}

/// Device memory on one GPU, freed on drop.
pub struct GpuBuffer<D: Driver> {
    ctx: Arc<Context<D>>,
    ptr: u64,
    len: usize,
}

impl<D: Driver> fmt::Debug for GpuBuffer<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuBuffer")
            .field("device", &self.ctx.info.ordinal())
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .finish()
    }
}

impl<D: Driver> GpuBuffer<D> {
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

    fn check(&self, offset: usize, len: usize) -> Result<(), GpuError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(GpuError::CopyOutOfBounds {
                len,
                offset,
                size: self.len,
            }),
        }
    }

    /// Copies `src` into the buffer at `offset`, ordered after all work queued on the
    /// device's stream, and waits for it: a driver need not have read pageable memory when
    /// an asynchronous copy returns, and `src` may be reused when this returns.
    ///
    /// # Errors
    /// [`GpuError::CopyOutOfBounds`], a kernel fault or a driver failure.
    pub fn copy_from_host(&mut self, offset: usize, src: &[u8]) -> Result<(), GpuError> {
        self.check(offset, src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        let (address, stream) = (self.ptr + offset as u64, self.ctx.stream);
        self.ctx.call(|driver| {
            // SAFETY: the range was checked to lie in this live allocation; `src` stays borrowed
            // until the stream is synchronized.
            unsafe { driver.copy_htod(address, src.as_ptr(), src.len(), stream) }
        })?;
        self.ctx.wait(|driver| {
            // SAFETY: the stream lives as long as the context.
            unsafe { driver.stream_synchronize(stream) }
        })
    }

    /// Copies from the buffer at `offset` into `dst`, after all work queued on the device's
    /// stream.
    ///
    /// # Errors
    /// [`GpuError::CopyOutOfBounds`], a kernel fault or a driver failure.
    pub fn copy_to_host(&self, offset: usize, dst: &mut [u8]) -> Result<(), GpuError> {
        self.check(offset, dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        let (address, stream) = (self.ptr + offset as u64, self.ctx.stream);
        // SAFETY: the range was checked to lie in this live allocation; `dst` stays borrowed
        // until the stream is synchronized.
        self.ctx.call(|driver| unsafe {
            driver.copy_dtoh(dst.as_mut_ptr(), address, dst.len(), stream)
        })?;
        self.ctx.wait(|driver| {
            // SAFETY: the stream lives as long as the context.
            unsafe { driver.stream_synchronize(stream) }
        })
    }

    /// Sets every byte to `value`, ordered after all work queued on the device's stream.
    ///
    /// # Errors
    /// A kernel fault or a driver failure.
    pub fn fill(&mut self, value: u8) -> Result<(), GpuError> {
        if self.len == 0 {
            return Ok(());
        }
        let (ptr, len, stream) = (self.ptr, self.len, self.ctx.stream);
        self.ctx.call(|driver| {
            // SAFETY: the whole live allocation, on this context's stream.
            unsafe { driver.memset(ptr, value, len, stream) }
        })
    }
}

impl<D: Driver> Drop for GpuBuffer<D> {
    fn drop(&mut self) {
        if self.ptr == 0 {
            return;
        }
        if let Ok(_live) = self.ctx.bind() {
            // SAFETY: allocated in this context by `GpuDevice::alloc`; freed once, here. The
            // drivers' free waits for work using it to finish.
            let _ = unsafe { self.ctx.driver.mem_free(self.ptr) };
        }
    }
}

// SAFETY: the buffer is a device address plus a shared context; see `Context`.
unsafe impl<D: Driver> Send for GpuBuffer<D> {}
// SAFETY: `&GpuBuffer` allows only reads of device memory (copy_to_host).
unsafe impl<D: Driver> Sync for GpuBuffer<D> {}

/// Page-locked host memory of one GPU's driver, freed on drop.
pub struct PinnedBytes<D: Driver> {
    ctx: Arc<Context<D>>,
    ptr: *mut u8,
    len: usize,
    /// The device address of the bytes, when they are mapped into the device.
    device: Option<u64>,
}

impl<D: Driver> fmt::Debug for PinnedBytes<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedBytes")
            .field("device", &self.ctx.info.ordinal())
            .field("len", &self.len)
            .finish()
    }
}

impl<D: Driver> PinnedBytes<D> {
    /// The host address of the bytes, for access that may race with kernels (mapped memory).
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// The device address of the bytes, for memory from [`GpuDevice::alloc_mapped`].
    pub fn device_ptr(&self) -> Option<u64> {
        self.device
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `len` initialized bytes (zeroed at allocation) owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` is the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// A guard while the bytes are mapped: `None` once the device was reset, which unmaps
    /// them. Only memory of [`GpuDevice::alloc_mapped`] can be: a reset waits for the
    /// memory of [`GpuDevice::alloc_host`] to be dropped.
    pub(crate) fn mapped(&self) -> Option<Live<'_>> {
        let live = self.ctx.gate.read().unwrap_or_else(PoisonError::into_inner);
        (!self.ctx.reset.load(Ordering::SeqCst)).then_some(live)
    }
}

impl<D: Driver> Drop for PinnedBytes<D> {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        if let Ok(_live) = self.ctx.bind() {
            // SAFETY: from `host_alloc` of this driver; freed once, here. The owner of this
            // value waited for copies using it (the borrow of an async copy ends only when
            // its stream was synchronized).
            let _ = unsafe { self.ctx.driver.host_free(self.ptr) };
        }
        if self.device.is_none() {
            self.ctx.pinned.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

// SAFETY: host memory owned by this value; the context is shared; see `Context`.
unsafe impl<D: Driver> Send for PinnedBytes<D> {}
// SAFETY: `&PinnedBytes` gives only shared reads.
unsafe impl<D: Driver> Sync for PinnedBytes<D> {}

struct ModuleInner<D: Driver> {
    ctx: Arc<Context<D>>,
    module: Handle,
}

impl<D: Driver> Drop for ModuleInner<D> {
    fn drop(&mut self) {
        if let Ok(_live) = self.ctx.bind() {
            // SAFETY: the module was loaded in this context; every function holds an `Arc`
            // of this value, so none is left.
            let _ = unsafe { self.ctx.driver.module_unload(self.module) };
        }
    }
}

// SAFETY: module handles are process-wide; see `Context`.
unsafe impl<D: Driver> Send for ModuleInner<D> {}
// SAFETY: the module is immutable after loading.
unsafe impl<D: Driver> Sync for ModuleInner<D> {}

/// A loaded module, unloaded when the last clone and the last function of it drop.
pub struct GpuModule<D: Driver> {
    inner: Arc<ModuleInner<D>>,
}

impl<D: Driver> Clone for GpuModule<D> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<D: Driver> fmt::Debug for GpuModule<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuModule")
            .field("device", &self.inner.ctx.info.ordinal())
            .finish_non_exhaustive()
    }
}

impl<D: Driver> GpuModule<D> {
    /// The device address and size of the module's global variable `name`, if it has one.
    ///
    /// # Errors
    /// A driver failure.
    pub fn global(&self, name: &CStr) -> Result<Option<(u64, usize)>, GpuError> {
        let module = self.inner.module;
        self.inner.ctx.call(|driver| {
            // SAFETY: the module is alive while `self` is, and of the context just made current.
            unsafe { driver.module_global(module, name) }
        })
    }

    /// Looks up a kernel by its symbol name.
    ///
    /// # Errors
    /// [`GpuError::InvalidKernelName`] or [`GpuError::KernelNotFound`].
    pub fn function(&self, name: &str) -> Result<GpuFunction<D>, GpuError> {
        let c_name = CString::new(name).map_err(|_| GpuError::InvalidKernelName {
            name: name.to_owned(),
        })?;
        let module = self.inner.module;
        let function = self.inner.ctx.call(|driver| {
            // SAFETY: the module is alive while `self` is, and of the context just made current.
            unsafe { driver.module_function(module, name, &c_name) }
        })?;
        Ok(GpuFunction {
            module: Arc::clone(&self.inner),
            function,
            name: name.to_owned(),
        })
    }
}

/// A kernel of a loaded module; keeps the module loaded.
pub struct GpuFunction<D: Driver> {
    module: Arc<ModuleInner<D>>,
    function: Handle,
    name: String,
}

impl<D: Driver> Clone for GpuFunction<D> {
    fn clone(&self) -> Self {
        Self {
            module: Arc::clone(&self.module),
            function: self.function,
            name: self.name.clone(),
        }
    }
}

impl<D: Driver> fmt::Debug for GpuFunction<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuFunction")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<D: Driver> GpuFunction<D> {
    /// The kernel's symbol name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The raw function handle, for code that calls the driver directly (benchmarks).
    pub fn raw_handle(&self) -> Handle {
        self.function
    }
}

// SAFETY: function handles are process-wide and immutable; see `Context`.
unsafe impl<D: Driver> Send for GpuFunction<D> {}
// SAFETY: as above.
unsafe impl<D: Driver> Sync for GpuFunction<D> {}

/// An event of one device: a point in a stream's work to wait for or time.
pub struct GpuEvent<D: Driver> {
    ctx: Arc<Context<D>>,
    event: Handle,
}

impl<D: Driver> fmt::Debug for GpuEvent<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuEvent")
            .field("device", &self.ctx.info.ordinal())
            .finish_non_exhaustive()
    }
}

impl<D: Driver> GpuEvent<D> {
    /// Records the event after the work queued so far on the device's stream.
    ///
    /// # Errors
    /// A driver failure.
    pub fn record(&self) -> Result<(), GpuError> {
        let (event, stream) = (self.event, self.ctx.stream);
        self.ctx.call(|driver| {
            // SAFETY: the event and stream are of this live context.
            unsafe { driver.event_record(event, stream) }
        })
    }

    /// Records the event after the work queued so far on `stream`.
    ///
    /// # Errors
    /// [`GpuError::WrongDevice`] or a driver failure.
    pub fn record_on(&self, stream: &GpuStream<D>) -> Result<(), GpuError> {
        if !Arc::ptr_eq(&stream.ctx, &self.ctx) {
            return Err(self.ctx.wrong_device("stream", &stream.ctx));
        }
        let (event, stream) = (self.event, stream.stream);
        self.ctx.call(|driver| {
            // SAFETY: the event and stream are of this live context.
            unsafe { driver.event_record(event, stream) }
        })
    }

    /// Waits until the work before the event's last recording has completed.
    ///
    /// # Errors
    /// A kernel fault or a driver failure.
    pub fn synchronize(&self) -> Result<(), GpuError> {
        let event = self.event;
        self.ctx.wait(|driver| {
            // SAFETY: the event is alive.
            unsafe { driver.event_synchronize(event) }
        })
    }

    /// Whether the work before the event's last recording has completed.
    ///
    /// # Errors
    /// A kernel fault or a driver failure.
    pub fn query(&self) -> Result<bool, GpuError> {
        let event = self.event;
        // SAFETY: the event is alive.
        self.ctx.call(|driver| unsafe { driver.event_query(event) })
    }

    /// Milliseconds from `start` to `self`, waiting for `self` to complete.
    ///
    /// # Errors
    /// A driver failure (e.g. an event never recorded).
    pub fn elapsed_ms_since(&self, start: &GpuEvent<D>) -> Result<f32, GpuError> {
        if !Arc::ptr_eq(&start.ctx, &self.ctx) {
            return Err(self.ctx.wrong_device("event", &start.ctx));
        }
        self.synchronize()?;
        let (start, end) = (start.event, self.event);
        self.ctx.call(|driver| {
            // SAFETY: both events are alive and of this context.
            unsafe { driver.event_elapsed_ms(start, end) }
        })
    }
}

impl<D: Driver> Drop for GpuEvent<D> {
    fn drop(&mut self) {
        if let Ok(_live) = self.ctx.bind() {
            // SAFETY: created in this context; destroyed once.
            let _ = unsafe { self.ctx.driver.event_destroy(self.event) };
        }
    }
}

// SAFETY: event handles are process-wide; see `Context`.
unsafe impl<D: Driver> Send for GpuEvent<D> {}
// SAFETY: as above.
unsafe impl<D: Driver> Sync for GpuEvent<D> {}

/// A stream of one device: an ordered queue of work that may overlap other streams' work.
pub struct GpuStream<D: Driver> {
    ctx: Arc<Context<D>>,
    stream: Handle,
    /// Created here, and destroyed on drop; a stream of another owner's
    /// ([`GpuDevice::wrap_stream`]) is left to it.
    owned: bool,
}

impl<D: Driver> fmt::Debug for GpuStream<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuStream")
            .field("device", &self.ctx.info.ordinal())
            .finish_non_exhaustive()
    }
}

impl<D: Driver> GpuStream<D> {
    /// The driver's stream handle.
    pub fn raw(&self) -> Handle {
        self.stream
    }

    /// Waits for everything queued on the stream; a kernel fault surfaces here.
    ///
    /// # Errors
    /// [`GpuError::KernelFault`] or a driver failure.
    pub fn synchronize(&self) -> Result<(), GpuError> {
        let stream = self.stream;
        self.ctx.wait(|driver| {
            // SAFETY: the stream is alive.
            unsafe { driver.stream_synchronize(stream) }
        })
    }

    /// As [`GpuStream::synchronize`], giving up after `timeout`.
    ///
    /// # Errors
    /// [`GpuError::Timeout`], [`GpuError::KernelFault`] or a driver failure.
    pub fn synchronize_timeout(&self, timeout: Duration) -> Result<(), GpuError> {
        wait_with_timeout(&self.ctx, self.stream, timeout)
    }

    /// [`GpuError::DeviceLost`] once the stream's context is lost.
    pub(crate) fn check_live(&self) -> Result<(), GpuError> {
        self.ctx.check_live()
    }

    /// Makes later work on this stream wait for `event`'s last recording.
    ///
    /// # Errors
    /// [`GpuError::WrongDevice`] or a driver failure.
    pub fn wait(&self, event: &GpuEvent<D>) -> Result<(), GpuError> {
        if !Arc::ptr_eq(&event.ctx, &self.ctx) {
            return Err(self.ctx.wrong_device("event", &event.ctx));
        }
        let (stream, event) = (self.stream, event.event);
        self.ctx.call(|driver| {
            // SAFETY: both are alive and of this context.
            unsafe { driver.stream_wait_event(stream, event) }
        })
    }

    /// Queues a copy of `len` bytes from host `src` to device `dst` on this stream.
    ///
    /// # Safety
    /// `dst..dst + len` lies in a live allocation of this device; `src` is readable for
    /// `len` bytes, page-locked (or the copy is synchronous), and neither freed nor written
    /// until the stream has passed the copy.
    ///
    /// # Errors
    /// A driver failure.
    pub unsafe fn copy_htod(&self, dst: u64, src: *const u8, len: usize) -> Result<(), GpuError> {
        let stream = self.stream;
        self.ctx.call(|driver| {
            // SAFETY: the caller's contract.
            unsafe { driver.copy_htod(dst, src, len, stream) }
        })
    }

    /// Queues a copy of `len` bytes from device `src` to host `dst` on this stream.
    ///
    /// # Safety
    /// `src..src + len` lies in a live allocation of this device; `dst` is writable for
    /// `len` bytes, page-locked (or the copy is synchronous), and neither freed nor accessed
    /// until the stream has passed the copy.
    ///
    /// # Errors
    /// A driver failure.
    pub unsafe fn copy_dtoh(&self, dst: *mut u8, src: u64, len: usize) -> Result<(), GpuError> {
        let stream = self.stream;
        self.ctx.call(|driver| {
            // SAFETY: the caller's contract.
            unsafe { driver.copy_dtoh(dst, src, len, stream) }
        })
    }

    /// Starts recording the work queued on this stream into a graph instead of running it.
    ///
    /// # Errors
    /// A driver failure (e.g. already recording).
    pub fn begin_capture(&self) -> Result<(), GpuError> {
        let stream = self.stream;
        self.ctx.call(|driver| {
            // SAFETY: the stream is alive.
            unsafe { driver.capture_begin(stream) }
        })
    }

    /// Ends the recording begun by [`GpuStream::begin_capture`] and instantiates it.
    ///
    /// # Errors
    /// A driver failure (e.g. an operation that cannot be captured was queued).
    pub fn end_capture(&self) -> Result<GpuGraph<D>, GpuError> {
        let _live = self.ctx.bind()?;
        let driver = self.ctx.driver;
        // SAFETY: the stream is alive and recording.
        let graph = self.ctx.note(unsafe { driver.capture_end(self.stream) })?;
        // SAFETY: `graph` was just made by the driver.
        let exec = match unsafe { driver.graph_instantiate(graph) } {
            Ok(exec) => exec,
            Err(e) => {
                // SAFETY: as above; not used afterwards.
                let _ = unsafe { driver.graph_destroy(graph) };
                return Err(e);
            }
        };
        Ok(GpuGraph {
            ctx: Arc::clone(&self.ctx),
            graph,
            exec,
        })
    }

    /// Ends the recording begun by [`GpuStream::begin_capture`] and makes `graph` run it: the
    /// instance is updated in place where the driver can (the same work with other
    /// parameters), else the recording is instantiated anew.
    ///
    /// # Errors
    /// [`GpuError::WrongDevice`] or a driver failure.
    pub fn end_capture_into(&self, graph: &mut GpuGraph<D>) -> Result<(), GpuError> {
        if !Arc::ptr_eq(&graph.ctx, &self.ctx) {
            return Err(self.ctx.wrong_device("graph", &graph.ctx));
        }
        let _live = self.ctx.bind()?;
        let driver = self.ctx.driver;
        // SAFETY: the stream is alive and recording.
        let recorded = self.ctx.note(unsafe { driver.capture_end(self.stream) })?;
        // SAFETY: both are alive; `graph.exec` is not replaying on the host's behalf while
        // `&mut` is held (replays already queued keep the driver's own reference).
        let updated = match unsafe { driver.graph_exec_update(graph.exec, recorded) } {
            Ok(updated) => updated,
            Err(e) => {
                // SAFETY: made just above; not used afterwards.
                let _ = unsafe { driver.graph_destroy(recorded) };
                return Err(e);
            }
        };
        let exec = if updated {
            graph.exec
        } else {
            // SAFETY: `recorded` was just made by the driver.
            match unsafe { driver.graph_instantiate(recorded) } {
                Ok(exec) => {
                    // SAFETY: the old instance is replaced and not used afterwards.
                    let _ = unsafe { driver.graph_exec_destroy(graph.exec) };
                    exec
                }
                Err(e) => {
                    // SAFETY: as above.
                    let _ = unsafe { driver.graph_destroy(recorded) };
                    return Err(e);
                }
            }
        };
        // SAFETY: the old graph is replaced; the instance no longer needs it.
        let _ = unsafe { driver.graph_destroy(graph.graph) };
        graph.graph = recorded;
        graph.exec = exec;
        Ok(())
    }

    /// Queues one replay of `graph` on this stream.
    ///
    /// # Errors
    /// [`GpuError::WrongDevice`] or a driver failure.
    pub fn launch_graph(&self, graph: &GpuGraph<D>) -> Result<(), GpuError> {
        if !Arc::ptr_eq(&graph.ctx, &self.ctx) {
            return Err(self.ctx.wrong_device("graph", &graph.ctx));
        }
        let (exec, stream) = (graph.exec, self.stream);
        self.ctx.call(|driver| {
            // SAFETY: both are alive and of this context.
            unsafe { driver.graph_launch(exec, stream) }
        })
    }

    /// The raw stream handle.
    pub fn raw_handle(&self) -> Handle {
        self.stream
    }
}

impl<D: Driver> Drop for GpuStream<D> {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        if let Ok(_live) = self.ctx.bind() {
            // SAFETY: created in this context; destroyed once (queued work still completes).
            let _ = unsafe { self.ctx.driver.stream_destroy(self.stream) };
        }
    }
}

// SAFETY: stream handles are process-wide; see `Context`.
unsafe impl<D: Driver> Send for GpuStream<D> {}
// SAFETY: the driver's stream calls are thread-safe.
unsafe impl<D: Driver> Sync for GpuStream<D> {}

/// A recorded sequence of work and its executable instance, replayed with
/// [`GpuStream::launch_graph`].
pub struct GpuGraph<D: Driver> {
    ctx: Arc<Context<D>>,
    graph: Handle,
    exec: Handle,
}

impl<D: Driver> fmt::Debug for GpuGraph<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuGraph")
            .field("device", &self.ctx.info.ordinal())
            .finish_non_exhaustive()
    }
}

impl<D: Driver> Drop for GpuGraph<D> {
    fn drop(&mut self) {
        if let Ok(_live) = self.ctx.bind() {
            // SAFETY: made in this context; destroyed once. Replays already queued keep
            // their own reference in the driver.
            unsafe {
                let _ = self.ctx.driver.graph_exec_destroy(self.exec);
                let _ = self.ctx.driver.graph_destroy(self.graph);
            }
        }
    }
}

// SAFETY: graph handles are process-wide; see `Context`.
unsafe impl<D: Driver> Send for GpuGraph<D> {}
// SAFETY: replays only read the instance.
unsafe impl<D: Driver> Sync for GpuGraph<D> {}

/// Waits for the work queued so far on `stream` of `ctx`, for at most `timeout`: an event
/// recorded after it is polled, so that a kernel that never finishes leaves the caller
/// [`GpuError::Timeout`] instead of a wait without end (the drivers' own waits have no time
/// limit).
fn wait_with_timeout<D: Driver>(
    ctx: &Context<D>,
    stream: Handle,
    timeout: Duration,
) -> Result<(), GpuError> {
    let start = Instant::now();
    let event = ctx.call(|driver| driver.event_create())?;
    let destroy = |event| {
        ctx.call(|driver| {
            // SAFETY: the event was just made in this context and is destroyed once, here.
            unsafe { driver.event_destroy(event) }
        })
        .map(drop)
    };
    // SAFETY: the event and the stream are of this live context.
    let recorded = ctx.call(|driver| unsafe { driver.event_record(event, stream) });
    let mut pause = Duration::from_micros(20);
    let result = recorded.and_then(|()| {
        loop {
            // SAFETY: as above.
            if ctx.call(|driver| unsafe { driver.event_query(event) })? {
                break Ok(());
            }
            let waited = start.elapsed();
            if waited >= timeout {
                break Err(GpuError::Timeout { waited });
            }
            std::thread::sleep(pause.min(timeout - waited));
            pause = (pause * 2).min(Duration::from_millis(2));
        }
    });
    // A lost context's event is left to the driver's reset.
    let _ = destroy(event);
    result
}
