//! What a GPU driver must provide: the small set of raw calls the generic layer
//! ([`super::GpuDevice`], [`super::GpuBackend`]) is written over. A new driver is one file
//! implementing this trait over its entry points.
//!
//! Handles are the driver's own (`CUstream`, `hipModule_t`, ...) as raw pointers; the
//! generic layer owns them through RAII types and calls these functions with the device's
//! context made current on the calling thread ([`Driver::context_bind`]) first.

use std::borrow::Cow;
use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::fmt;
use std::sync::OnceLock;

use super::{Api, GpuError, GpuImageKind, LoadError};
use crate::backend::{DeviceKind, DevicePeaks};
use crate::launch::LaunchArgs;
use crate::select::DeviceTarget;

/// A raw driver handle: a context, stream, module, function, event, graph or graph instance.
pub(crate) type Handle = *mut c_void;

/// `cuLaunchCooperativeKernel` and `hipModuleLaunchCooperativeKernel`, which share a C
/// signature: function, grid, block, dynamic shared bytes, stream, parameters.
pub(crate) type CooperativeLaunchFn = unsafe extern "C" fn(
    Handle,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    Handle,
    *mut *mut c_void,
) -> c_int;

/// `cuOccupancyMaxActiveBlocksPerMultiprocessor` and
/// `hipModuleOccupancyMaxActiveBlocksPerMultiprocessor`: blocks per multiprocessor of a
/// function at a block size and dynamic shared memory.
pub(crate) type OccupancyFn = unsafe extern "C" fn(*mut c_int, Handle, c_int, usize) -> c_int;

/// One end of a copy between two devices of a driver: an address, its device and that
/// device's context.
#[derive(Debug, Clone, Copy)]
pub struct PeerEnd<'a, I> {
    /// The device address.
    pub address: u64,
    /// The device.
    pub info: &'a I,
    /// The device's context.
    pub ctx: Handle,
}

/// What a driver says about one device, as the generic layer needs it.
pub trait DeviceInfo: Clone + fmt::Debug + Send + Sync + 'static {
    /// The ordinal (`cuda:N`, `hip:N`).
    fn ordinal(&self) -> usize;
    /// The marketing name.
    fn name(&self) -> &str;
    /// The architecture image selection matches: `sm_90`, `gfx90a:sramecc+:xnack-`.
    fn arch(&self) -> String;
    /// The device as image selection sees it.
    fn target(&self) -> DeviceTarget<'_>;
}

/// The raw calls of one GPU driver API.
///
/// # Safety of the `unsafe` methods
/// Unless a method says otherwise: every handle passed was created by this driver on the
/// device whose context is current on the calling thread, and is live; device address ranges
/// lie inside live allocations of that device; host pointers are valid for the length given
/// until the operation has completed (a stream synchronization or, for synchronous calls,
/// the return).
pub trait Driver: Send + Sync + Sized + 'static {
    /// The device kind its devices are.
    const KIND: DeviceKind;
    /// Which API this is.
    const API: Api = Api(Self::KIND);
    /// What it says about a device.
    type Info: DeviceInfo;

    /// The process-wide driver, loaded and initialized on first use; the error says why
    /// this machine cannot use it.
    fn get() -> Result<&'static Self, GpuError>;
    /// Why this machine can have no device of this driver, judged from the device nodes the
    /// driver needs (without loading it, which costs tens of milliseconds); `None` where a
    /// device may be present.
    fn missing_device_nodes() -> Option<String>;
    /// The driver's name and message for a status code.
    fn describe(&self, code: i32) -> (String, String);
    /// Whether a status code means that a kernel faulted (the context is lost
    /// afterwards).
    fn is_kernel_fault(code: i32) -> bool;
    /// The driver's success code.
    const SUCCESS: i32 = 0;

    /// The [`GpuError`] for a failing `code` returned by `call`; faults of an earlier kernel
    /// (reported by whatever call comes next) become [`GpuError::KernelFault`].
    fn error(&self, call: &'static str, code: i32) -> GpuError {
        let (name, message) = self.describe(code);
        if Self::is_kernel_fault(code) {
            GpuError::KernelFault {
                call,
                code,
                name,
                message,
            }
        } else {
            GpuError::Driver {
                call,
                code,
                name,
                message,
            }
        }
    }

    /// `Ok` for [`Driver::SUCCESS`], else [`Driver::error`].
    fn check(&self, call: &'static str, code: i32) -> Result<(), GpuError> {
        if code == Self::SUCCESS {
            Ok(())
        } else {
            Err(self.error(call, code))
        }
    }

    /// The driver's "out of memory" code.
    const OUT_OF_MEMORY: i32;
    /// The driver's "not complete yet" code (an event's or a stream's query).
    const NOT_READY: i32;
    /// Whether a code returned by a lookup by name means that nothing has that name.
    fn is_not_found(code: i32) -> bool;

    /// An allocation's status: out of memory becomes [`GpuError::OutOfMemory`] (saying how
    /// much device memory is free when `of_device` is set), any other failure
    /// [`Driver::error`].
    fn check_alloc(
        &self,
        call: &'static str,
        code: i32,
        bytes: usize,
        of_device: bool,
    ) -> Result<(), GpuError> {
        if code == Self::OUT_OF_MEMORY {
            let (free, total) = match self.mem_info() {
                Ok((free, total)) if of_device => (Some(free), Some(total)),
                _ => (None, None),
            };
            return Err(GpuError::OutOfMemory {
                bytes,
                free,
                total,
                message: self.describe(code).1,
            });
        }
        self.check(call, code)
    }

    /// A lookup by name's status: `Ok(true)` found, `Ok(false)` nothing has that name.
    fn check_found(&self, call: &'static str, code: i32) -> Result<bool, GpuError> {
        if Self::is_not_found(code) {
            Ok(false)
        } else {
            self.check(call, code).map(|()| true)
        }
    }

    /// A query's status: `Ok(true)` complete, `Ok(false)` not yet.
    fn check_ready(&self, call: &'static str, code: i32) -> Result<bool, GpuError> {
        if code == Self::NOT_READY {
            Ok(false)
        } else {
            self.check(call, code).map(|()| true)
        }
    }

    /// The [`GpuError::ModuleLoad`] for a failing `code` of `call`, with the JIT's log
    /// (empty where the driver keeps none).
    fn module_load_error(
        &self,
        call: &'static str,
        kind: GpuImageKind,
        code: i32,
        jit_log: String,
    ) -> GpuError {
        let (name, message) = self.describe(code);
        GpuError::ModuleLoad {
            call,
            kind,
            code,
            name,
            message,
            jit_log,
        }
    }

    /// Number of devices.
    fn device_count(&self) -> Result<usize, GpuError>;
    /// Describes device `ordinal` (< [`Driver::device_count`]).
    fn device_info(&self, ordinal: usize) -> Result<Self::Info, GpuError>;

    /// Makes the device usable by this process and current on the calling thread; returns
    /// its context (CUDA's primary context; null where the driver has none).
    fn context_open(&self, info: &Self::Info) -> Result<Handle, GpuError>;
    /// Undoes [`Driver::context_open`]; nothing of the context is used afterwards.
    unsafe fn context_close(&self, info: &Self::Info, ctx: Handle);
    /// Destroys everything made in the device's context by this process (its allocations,
    /// streams, events, modules, page-locked memory) and stops its work, so that a context
    /// a fault made unusable can be opened again (`cuDevicePrimaryCtxReset`,
    /// `hipDeviceReset`).
    ///
    /// # Safety
    /// Nothing of the context is used afterwards: every handle made in it is dead.
    unsafe fn context_reset(&self, info: &Self::Info) -> Result<(), GpuError>;
    /// Makes the device's context current on the calling thread unless the driver says it
    /// is: other code on the thread (cuBLAS, the runtime API) may have changed it. `ctx`
    /// came from [`Driver::context_open`] for `info` and was not closed.
    unsafe fn context_bind(&self, info: &Self::Info, ctx: Handle) -> Result<(), GpuError>;

    /// (free, total) device memory.
    fn mem_info(&self) -> Result<(usize, usize), GpuError>;
    /// Allocates `bytes` (> 0) of device memory.
    fn mem_alloc(&self, bytes: usize) -> Result<u64, GpuError>;
    /// Frees device memory from [`Driver::mem_alloc`]; waits for work using it.
    unsafe fn mem_free(&self, ptr: u64) -> Result<(), GpuError>;
    /// Allocates `bytes` (> 0) of page-locked host memory the device can copy from
    /// asynchronously.
    fn host_alloc(&self, bytes: usize) -> Result<*mut u8, GpuError>;
    /// Frees memory from [`Driver::host_alloc`].
    unsafe fn host_free(&self, ptr: *mut u8) -> Result<(), GpuError>;
    /// Allocates `bytes` (> 0) of page-locked host memory that kernels can access too; returns
    /// its host pointer and its device address. Freed by [`Driver::host_free`].
    fn host_alloc_mapped(&self, bytes: usize) -> Result<(*mut u8, u64), GpuError>;
    /// The device address and size of global variable `name` of `module`; `None` when the
    /// module has no such global (or the driver cannot say).
    unsafe fn module_global(
        &self,
        module: Handle,
        name: &CStr,
    ) -> Result<Option<(u64, usize)>, GpuError>;

    /// A new stream: an ordered queue of work, which may overlap other streams' work.
    fn stream_create(&self) -> Result<Handle, GpuError>;
    /// Destroys a stream (its queued work still completes).
    unsafe fn stream_destroy(&self, stream: Handle) -> Result<(), GpuError>;
    /// Waits for everything queued on `stream`; a kernel fault surfaces here.
    unsafe fn stream_synchronize(&self, stream: Handle) -> Result<(), GpuError>;
    /// Makes later work on `stream` wait until `event` has completed.
    unsafe fn stream_wait_event(&self, stream: Handle, event: Handle) -> Result<(), GpuError>;

    /// Queues a copy of `len` bytes from host `src` to device `dst` on `stream`.
    unsafe fn copy_htod(
        &self,
        dst: u64,
        src: *const u8,
        len: usize,
        stream: Handle,
    ) -> Result<(), GpuError>;
    /// Queues a copy of `len` bytes from device `src` to host `dst` on `stream`.
    unsafe fn copy_dtoh(
        &self,
        dst: *mut u8,
        src: u64,
        len: usize,
        stream: Handle,
    ) -> Result<(), GpuError>;
    /// Queues a copy of `len` bytes between device ranges on `stream`.
    unsafe fn copy_dtod(
        &self,
        dst: u64,
        src: u64,
        len: usize,
        stream: Handle,
    ) -> Result<(), GpuError>;
    /// Queues a copy of `len` bytes from `src` on another device of this driver to `dst` on
    /// `stream` (of the destination device): directly where the devices can reach each other,
    /// else staged by the driver.
    unsafe fn copy_peer(
        &self,
        dst: PeerEnd<'_, Self::Info>,
        src: PeerEnd<'_, Self::Info>,
        len: usize,
        stream: Handle,
    ) -> Result<(), GpuError>;
    /// Queues setting `len` bytes at `dst` to `value` on `stream`.
    unsafe fn memset(
        &self,
        dst: u64,
        value: u8,
        len: usize,
        stream: Handle,
    ) -> Result<(), GpuError>;

    /// The loader's kind for an image of `kind` (an offload image's kind).
    fn loader_kind(kind: offload_format::ImageKind) -> GpuImageKind;
    /// Checks an image of `kind` and returns the bytes to hand the loader, so that the
    /// driver never reads past its end.
    fn prepare_image<'a>(
        &self,
        image: &'a [u8],
        kind: GpuImageKind,
    ) -> Result<Cow<'a, [u8]>, GpuError>;
    /// Loads a module from bytes [`Driver::prepare_image`] returned.
    unsafe fn module_load(
        &self,
        image: &[u8],
        kind: GpuImageKind,
        info: &Self::Info,
    ) -> Result<Handle, GpuError>;
    /// Unloads a module none of whose functions is used afterwards.
    unsafe fn module_unload(&self, module: Handle) -> Result<(), GpuError>;
    /// Looks up kernel `name` (`c_name` is the same, NUL-terminated) in `module`;
    /// [`GpuError::KernelNotFound`] when absent.
    unsafe fn module_function(
        &self,
        module: Handle,
        name: &str,
        c_name: &CStr,
    ) -> Result<Handle, GpuError>;
    /// Before a launch of `function` with `dynamic` bytes of dynamic shared memory: checks
    /// them against the device, opting the kernel in where the driver needs it.
    unsafe fn prepare_shared(
        &self,
        function: Handle,
        kernel: &str,
        dynamic: u32,
        info: &Self::Info,
    ) -> Result<(), GpuError>;
    /// Queues `launch` of `function` on `stream`, with its grid, block and dynamic shared
    /// memory; its `params` hold one pointer per kernel parameter, each to a value of the
    /// parameter's type (the launch ABI).
    unsafe fn launch(
        &self,
        function: Handle,
        stream: Handle,
        launch: &LaunchArgs<'_>,
    ) -> Result<(), GpuError>;

    /// The device's peak figures, where its attributes tell them.
    fn peaks(info: &Self::Info) -> Option<DevicePeaks> {
        let _ = info;
        None
    }

    /// Whether the device runs thread-block clusters of more than one block.
    fn supports_clusters(info: &Self::Info) -> bool {
        let _ = info;
        false
    }

    /// Queues `launch`, whose blocks form clusters of more than one
    /// (`launch.config.cluster`), as [`Driver::launch`] does a plain one;
    /// [`GpuError::ClusterUnsupported`] where the device or its driver has no clusters.
    ///
    /// # Safety
    /// As [`Driver::launch`].
    unsafe fn launch_cluster(
        &self,
        function: Handle,
        stream: Handle,
        launch: &LaunchArgs<'_>,
        info: &Self::Info,
    ) -> Result<(), GpuError> {
        let _ = (function, stream, launch, info);
        Err(GpuError::ClusterUnsupported {
            reason: format!(
                "{} devices have no thread-block clusters (NVIDIA GPUs of compute capability \
                 9.0 and later have): launch clusters of one block where \
                 `Device::supports_clusters()` is false",
                Self::API
            ),
        })
    }

    /// The driver's cooperative launch and its name; `None` where the library lacks it.
    fn cooperative_launch_entry(&self) -> (&'static str, Option<CooperativeLaunchFn>);
    /// The driver's occupancy calculator and its name; `None` where the library lacks it.
    fn occupancy_entry(&self) -> (&'static str, Option<OccupancyFn>);
    /// The multiprocessors (SMs, compute units) of a device.
    fn multiprocessors(info: &Self::Info) -> u32;
    /// The block size at which `function` keeps the most threads resident with `shared`
    /// bytes of dynamic shared memory per block, as the driver's occupancy calculator picks
    /// it (`cuOccupancyMaxPotentialBlockSize`, `hipModuleOccupancyMaxPotentialBlockSize`,
    /// the function's launch bound respected); `None` where the library lacks the call or
    /// answers no block size of 1 to 1024 (no block fits).
    ///
    /// # Safety
    /// `function` is a live function of a context of this driver, current on this thread.
    unsafe fn potential_block_size(
        &self,
        function: Handle,
        shared: u32,
    ) -> Result<Option<u32>, GpuError>;

    /// Queues a cooperative launch of `function` on `stream` (all its blocks resident at once),
    /// as [`Driver::launch`] does a plain one; [`GpuError::MissingEntryPoint`] where the
    /// driver has no cooperative launch.
    ///
    /// # Safety
    /// As [`Driver::launch`].
    unsafe fn launch_cooperative(
        &self,
        function: Handle,
        stream: Handle,
        launch: &LaunchArgs<'_>,
    ) -> Result<(), GpuError> {
        let (call, entry) = self.cooperative_launch_entry();
        let Some(cooperative) = entry else {
            return Err(GpuError::MissingEntryPoint {
                api: Self::API,
                call,
            });
        };
        let (grid, block) = (launch.config.grid, launch.config.block);
        // SAFETY: this function's contract; the driver only reads `params` (the C prototype
        // is non-const).
        self.check(call, unsafe {
            cooperative(
                function,
                grid.0,
                grid.1,
                grid.2,
                block.0,
                block.1,
                block.2,
                launch.config.shared_mem_bytes,
                stream,
                launch.params.as_ptr().cast_mut(),
            )
        })
    }

    /// The blocks of `threads` threads with `shared` bytes of dynamic shared memory each that
    /// the device keeps resident at once for `function`: the driver's occupancy per
    /// multiprocessor times the multiprocessors; `None` where the driver has no occupancy
    /// calculator.
    ///
    /// # Safety
    /// `function` is a live function of a context of this driver, current on this thread.
    unsafe fn max_resident_blocks(
        &self,
        function: Handle,
        threads: u32,
        shared: u32,
        info: &Self::Info,
    ) -> Result<Option<u32>, GpuError> {
        let (call, entry) = self.occupancy_entry();
        let Some(occupancy) = entry else {
            return Ok(None);
        };
        let mut per_multiprocessor: c_int = 0;
        // SAFETY: `function` is live (this function's contract); writes one int.
        self.check(call, unsafe {
            occupancy(
                &raw mut per_multiprocessor,
                function,
                c_int::try_from(threads).unwrap_or(c_int::MAX),
                shared as usize,
            )
        })?;
        Ok(Some(
            u32::try_from(per_multiprocessor)
                .unwrap_or(0)
                .saturating_mul(Self::multiprocessors(info)),
        ))
    }

    /// A new event that can be timed.
    fn event_create(&self) -> Result<Handle, GpuError>;
    /// Destroys an event.
    unsafe fn event_destroy(&self, event: Handle) -> Result<(), GpuError>;
    /// Records `event` after the work queued so far on `stream`.
    unsafe fn event_record(&self, event: Handle, stream: Handle) -> Result<(), GpuError>;
    /// Waits until `event` has completed.
    unsafe fn event_synchronize(&self, event: Handle) -> Result<(), GpuError>;
    /// Whether `event` has completed, without waiting.
    unsafe fn event_query(&self, event: Handle) -> Result<bool, GpuError>;
    /// Milliseconds between two completed events.
    unsafe fn event_elapsed_ms(&self, start: Handle, end: Handle) -> Result<f32, GpuError>;

    /// Starts recording the work queued on `stream` into a graph instead of running it.
    unsafe fn capture_begin(&self, stream: Handle) -> Result<(), GpuError>;
    /// Ends the recording; returns the graph.
    unsafe fn capture_end(&self, stream: Handle) -> Result<Handle, GpuError>;
    /// An executable instance of `graph`.
    unsafe fn graph_instantiate(&self, graph: Handle) -> Result<Handle, GpuError>;
    /// Updates instance `exec` in place to run `graph` (the same work with other
    /// parameters); `Ok(false)` where the driver cannot (an older driver, or work of another
    /// shape), and the caller instantiates `graph` instead.
    unsafe fn graph_exec_update(&self, exec: Handle, graph: Handle) -> Result<bool, GpuError>;
    /// Queues one replay of an instance on `stream`.
    unsafe fn graph_launch(&self, exec: Handle, stream: Handle) -> Result<(), GpuError>;
    /// Destroys a graph.
    unsafe fn graph_destroy(&self, graph: Handle) -> Result<(), GpuError>;
    /// Destroys a graph instance.
    unsafe fn graph_exec_destroy(&self, exec: Handle) -> Result<(), GpuError>;
}

/// The process-wide driver from `loaded` (its table, or why it could not be loaded),
/// initialized once through `init` (whose status is remembered in `state`): a status for
/// which `no_device` gives a reason becomes [`GpuError::NoDevice`], naming `init_call`.
pub(crate) fn initialized<D: Driver>(
    state: &'static OnceLock<Result<(), GpuError>>,
    loaded: Result<&'static D, LoadError>,
    init_call: &'static str,
    init: impl FnOnce(&D) -> i32,
    no_device: fn(i32) -> Option<&'static str>,
) -> Result<&'static D, GpuError> {
    let api = loaded.map_err(|source| GpuError::Unavailable {
        api: D::API,
        source,
    })?;
    state
        .get_or_init(|| {
            let code = init(api);
            let Some(reason) = no_device(code) else {
                return api.check(init_call, code);
            };
            let (name, message) = api.describe(code);
            Err(GpuError::NoDevice {
                api: D::API,
                call: init_call,
                code,
                reason,
                name,
                message,
            })
        })
        .clone()?;
    Ok(api)
}

/// A block size a driver's occupancy calculator answered, where it is one a launch may use:
/// a driver answers 0 when no block fits.
pub(crate) fn block_size(answer: c_int) -> Option<u32> {
    u32::try_from(answer)
        .ok()
        .filter(|n| (1..=crate::launch::MAX_THREADS_PER_BLOCK).contains(n))
}

/// A device ordinal as the C `int` drivers take.
pub(crate) fn c_ordinal<D: Driver>(ordinal: usize) -> Result<c_int, GpuError> {
    c_int::try_from(ordinal).map_err(|_| GpuError::DeviceOutOfRange {
        api: D::API,
        ordinal,
        count: 0,
    })
}

/// A NUL-terminated `c_char` array a driver filled (a device name), as a string (lossy);
/// the whole array when it holds no NUL.
pub(crate) fn c_chars(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c.to_ne_bytes()[0])
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A string a driver returned (an error's name or message), `None` for null.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string that lives as long as the process (the
/// drivers' error strings are static).
pub(crate) unsafe fn static_c_str(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null, NUL-terminated and static (the caller's contract).
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// Writes the [`Driver`] methods that hand their arguments to one entry point of the
/// implementing table and turn its status into a `Result` through the table's own
/// `check(call, code)`:
///
/// - `unsafe fn m(a: T) => entry(a, ...);` returns `Result<(), GpuError>`;
/// - `[unsafe] fn m(a: T) -> |out| entry(&raw mut out, ...);` returns the handle the entry
///   point writes to `out`;
/// - `unsafe fn m(a: T) -> |out: U = init| entry(&raw mut out, ...);` returns the `U` it
///   writes;
/// - `fn m() -> |a: T = init, b: U = init| entry(&raw mut a, &raw mut b);` returns both;
/// - `unsafe fn m(.., k: &str, ..) -> |out| kernel k in entry(&raw mut out, ...);` looks a
///   kernel up by name: a status [`Driver::is_not_found`] accepts becomes
///   [`GpuError::KernelNotFound`] naming kernel `k`.
///
/// The `unsafe` methods rely on the [`Driver`] contract (live handles of the current
/// context), which is exactly what the entry points require.
macro_rules! forward_calls {
    () => {};
    (unsafe fn $method:ident($($arg:ident: $ty:ty),*) -> |$out:ident| kernel $kernel:ident in $entry:ident($($call:expr),*); $($rest:tt)*) => {
        unsafe fn $method(&self, $($arg: $ty),*) -> Result<$crate::backend::gpu::Handle, $crate::backend::gpu::GpuError> {
            let mut $out: $crate::backend::gpu::Handle = std::ptr::null_mut();
            // SAFETY: the Driver trait's contract covers the module passed; the name is
            // NUL-terminated; the entry point writes one handle to `out`.
            let code = unsafe { (self.$entry)($($call),*) };
            if self.check_found(stringify!($entry), code)? {
                return Ok($out);
            }
            Err($crate::backend::gpu::GpuError::KernelNotFound {
                kernel: $kernel.to_owned(),
                message: self.describe(code).1,
            })
        }
        $crate::backend::gpu::driver::forward_calls!($($rest)*);
    };
    (unsafe fn $method:ident($($arg:ident: $ty:ty),*) => $entry:ident($($call:expr),*); $($rest:tt)*) => {
        unsafe fn $method(&self, $($arg: $ty),*) -> Result<(), $crate::backend::gpu::GpuError> {
            // SAFETY: the Driver trait's contract covers every handle and range passed.
            self.check(stringify!($entry), unsafe { (self.$entry)($($call),*) })
        }
        $crate::backend::gpu::driver::forward_calls!($($rest)*);
    };
    (unsafe fn $method:ident($($arg:ident: $ty:ty),*) -> |$out:ident| $entry:ident($($call:expr),*); $($rest:tt)*) => {
        unsafe fn $method(&self, $($arg: $ty),*) -> Result<$crate::backend::gpu::Handle, $crate::backend::gpu::GpuError> {
            let mut $out: $crate::backend::gpu::Handle = std::ptr::null_mut();
            // SAFETY: the Driver trait's contract covers every handle passed; the entry
            // point writes one handle to `out`.
            self.check(stringify!($entry), unsafe { (self.$entry)($($call),*) })?;
            Ok($out)
        }
        $crate::backend::gpu::driver::forward_calls!($($rest)*);
    };
    (unsafe fn $method:ident($($arg:ident: $ty:ty),*) -> |$out:ident: $out_ty:ty = $init:literal| $entry:ident($($call:expr),*); $($rest:tt)*) => {
        unsafe fn $method(&self, $($arg: $ty),*) -> Result<$out_ty, $crate::backend::gpu::GpuError> {
            let mut $out: $out_ty = $init;
            // SAFETY: the Driver trait's contract covers every handle passed; the entry
            // point writes one value to `out`.
            self.check(stringify!($entry), unsafe { (self.$entry)($($call),*) })?;
            Ok($out)
        }
        $crate::backend::gpu::driver::forward_calls!($($rest)*);
    };
    (fn $method:ident() -> |$a:ident: $a_ty:ty = $a_init:literal, $b:ident: $b_ty:ty = $b_init:literal| $entry:ident($($call:expr),*); $($rest:tt)*) => {
        fn $method(&self) -> Result<($a_ty, $b_ty), $crate::backend::gpu::GpuError> {
            let (mut $a, mut $b): ($a_ty, $b_ty) = ($a_init, $b_init);
            // SAFETY: the entry point only writes one value to each of `a` and `b`.
            self.check(stringify!($entry), unsafe { (self.$entry)($($call),*) })?;
            Ok(($a, $b))
        }
        $crate::backend::gpu::driver::forward_calls!($($rest)*);
    };
    (fn $method:ident($($arg:ident: $ty:ty),*) -> |$out:ident| $entry:ident($($call:expr),*); $($rest:tt)*) => {
        fn $method(&self, $($arg: $ty),*) -> Result<$crate::backend::gpu::Handle, $crate::backend::gpu::GpuError> {
            let mut $out: $crate::backend::gpu::Handle = std::ptr::null_mut();
            // SAFETY: the entry point only writes one new handle to `out`.
            self.check(stringify!($entry), unsafe { (self.$entry)($($call),*) })?;
            Ok($out)
        }
        $crate::backend::gpu::driver::forward_calls!($($rest)*);
    };
}
pub(crate) use forward_calls;
