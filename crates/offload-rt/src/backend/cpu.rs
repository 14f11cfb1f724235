//! The host CPU as an offload device.
//!
//! A CPU image is an ELF shared object built from the kernel crate with `--cfg offload_device`.
//! It is loaded from memory (an anonymous `memfd` opened by `dlopen` through `/proc/self/fd`;
//! nothing is written to disk). For every kernel it exports two entry points (see
//! [`crate::kernel::abi`]): one running a range of blocks with the thread loop inside the image,
//! one running a single GPU thread.
//!
//! Blocks are spread over a persistent pool of worker threads. Whether a kernel reaches
//! barriers is found on its first launch: thread 0 of block 0 runs as a coroutine; if it
//! completes without reaching a barrier, the kernel takes the fast path (no coroutines) from
//! then on. A kernel with barriers runs in region form (loops over the block's threads between
//! its barriers) when its image has a region entry point: the CPU link's, formed on the image's
//! IR after inlining, in an image of the IR form; `#[kernel]`'s, its body split at the barriers
//! it sees in the source, in one of the source form, where block 0, run with coroutines first,
//! reached no barrier the macro did not see (one in a function the kernel calls). Otherwise, or
//! with `OFFLOAD_CPU_BARRIERS=coroutines`, each GPU thread of a block runs as a coroutine on
//! the worker's OS thread, switched at the barrier. Warp operations suspend a
//! coroutine too, at a warp barrier that opens when every live lane of the warp (32 threads)
//! has reached it.
//!
//! A panicking GPU thread (a failed `assert!`, a bad index) reports its message and location
//! through the launch record; the runtime then leaves the kernel by switching away from the
//! stack it runs on (every kernel runs on a coroutine stack: a GPU thread's own, or a worker's
//! guard stack on the fast path and in region form) and never resuming it, and the launch fails
//! with `Error::KernelPanic`. The abandoned frames are dropped without running destructors, as
//! a GPU abandons a trapped kernel; the process goes on.
//!
//! Every such stack has a guard page below it. A GPU thread that overflows its stack faults
//! there; the signal handler of [`trap`] makes its coroutine return, and the launch fails with
//! `Error::KernelStackOverflow`, the thread named by the image's index state, the process and
//! the device going on as after a panic. `OFFLOAD_KERNEL_STACK` sets the stacks' size.
//!
//! This file is the backend and its modules (kernels resolved, launches spread over the pool);
//! beneath it [`launch`] holds one launch's shared state, [`stacks`] the stacks kernel code runs
//! on, [`calls`] what the image calls in the runtime and the coroutine path's block, [`pool`]
//! the workers, [`loader`] and [`level`] the image's loading and choice, [`trap`] the signal
//! handling of stack overflows.

mod calls;
mod launch;
mod level;
mod loader;
mod pool;
mod stacks;
mod trap;

use std::ffi::c_void;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, Ordering};

use super::{Backend, DeviceKind, DevicePtr, KernelHandle, Module};
use crate::error::{Error, Result};
use crate::kernel::MAX_SHARED_BYTES;
use crate::kernel::abi::{
    CPU_IR_REGIONS_PREFIX, CPU_POSITION_SYMBOL, CPU_REGIONS_PREFIX, CPU_RUN_PREFIX,
    CPU_THREAD_PREFIX, CpuLaunch, CpuPositionFn, CpuRegionsFn, CpuRunFn, CpuThreadFn,
};
use crate::launch::{LaunchArgs, LaunchShape};
use crate::registry::{ImageInfo, RegisteredImage};

use calls::{
    cpu_barrier, cpu_grid_sync, cpu_panic, cpu_print, cpu_region_barrier, cpu_region_warp_sync,
    cpu_warp_sync, probe, run_block_with_barriers,
};
use launch::{GridBarrier, Launch, LaunchCtx, StackSizes};
use loader::Library;
use pool::Pool;
use stacks::{LauncherStacks, guarded};

/// How the CPU device runs kernels with barriers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarrierMode {
    /// In region form where the image has it (loops over the block's threads between
    /// barriers): the CPU link's, or in an image of the source form the `#[kernel]` macro's
    /// where it saw every barrier; else with coroutines.
    Regions,
    /// Always with one coroutine per GPU thread (`OFFLOAD_CPU_BARRIERS=coroutines`).
    Coroutines,
}

/// The CPU device.
#[derive(Debug)]
pub struct CpuBackend {
    pool: Pool,
    stacks: LauncherStacks,
    sizes: StackSizes,
    barriers: BarrierMode,
    /// `OFFLOAD_CPU_LEVEL`: the highest level of CPU image to run, where set.
    level: Option<String>,
    /// The first of the device's environment variables it could not read (the default taken
    /// instead): the error of every module load, as a bad `OFFLOAD_CPU_LEVEL` is.
    setting: Option<Setting>,
    /// Allocations made with `mmap` (address → mapped length); the rest came from `calloc`.
    mapped: Mutex<std::collections::HashMap<u64, usize>>,
    /// The handler that turns a stack overflow in kernel code into an error.
    _overflows: trap::Handler,
}

/// Allocations from this size on are mapped on their own, 2 MiB-aligned and advised to use
/// transparent huge pages: a buffer then costs a few page faults instead of one per 4 KiB,
/// which is most of the start-up time of a program that moves a few MiB to the device.
const HUGE_PAGE: usize = 2 << 20;

/// Maps `bytes` (> 0) of zeroed memory aligned to [`HUGE_PAGE`]; returns the address and the
/// mapped length, or `None` when the system refuses.
fn map_huge(bytes: usize) -> Option<(*mut c_void, usize)> {
    let len = bytes.checked_next_multiple_of(HUGE_PAGE)?;
    let padded = len.checked_add(HUGE_PAGE)?;
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no
    // existing memory.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            padded,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return None;
    }
    let start = (base as usize).next_multiple_of(HUGE_PAGE);
    let head = start - base as usize;
    let tail = padded - head - len;
    // SAFETY: the head and tail ranges lie inside the mapping just made and are not used.
    unsafe {
        if head > 0 {
            libc::munmap(base, head);
        }
        if tail > 0 {
            libc::munmap((start + len) as *mut c_void, tail);
        }
        // Advice only: without transparent huge pages the mapping works as it is.
        libc::madvise(start as *mut c_void, len, libc::MADV_HUGEPAGE);
    }
    Some((start as *mut c_void, len))
}

/// An environment variable of the CPU device set to a value it cannot read.
#[derive(Debug, Clone)]
struct Setting {
    variable: &'static str,
    value: String,
    expected: &'static str,
}

impl Setting {
    fn error(&self) -> Error {
        Error::CpuSetting {
            variable: self.variable,
            value: self.value.clone(),
            expected: self.expected,
        }
    }
}

/// The CPU device's environment variables as [`CpuBackend::new`] reads them, each looked up
/// by `lookup`.
struct Settings<'a> {
    lookup: &'a dyn Fn(&str) -> Option<std::ffi::OsString>,
    first_unread: Option<Setting>,
}

impl Settings<'_> {
    /// `variable`'s value as `parse` reads it (trimmed); `None` where it is unset or empty,
    /// or where `parse` cannot read it, which is remembered with what was `expected`.
    fn read<T>(
        &mut self,
        variable: &'static str,
        expected: &'static str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Option<T> {
        let value = (self.lookup)(variable)?;
        let text = value.to_string_lossy();
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        // `text` is the value itself where it is Unicode, which `parse` needs.
        let parsed = value.to_str().and_then(|_| parse(text));
        if parsed.is_none() && self.first_unread.is_none() {
            self.first_unread = Some(Setting {
                variable,
                value: text.to_owned(),
                expected,
            });
        }
        parsed
    }
}

impl CpuBackend {
    /// A CPU device with `OFFLOAD_CPU_THREADS` worker threads, or as many as the host's
    /// available parallelism, which spin for `OFFLOAD_CPU_SPIN_US` microseconds before they
    /// sleep (by default 100), running barriers as `OFFLOAD_CPU_BARRIERS` says (`coroutines`,
    /// or by default `regions`), each GPU thread with `OFFLOAD_KERNEL_STACK`
    /// bytes of stack (by default 8 MiB, 128 KiB for a GPU thread run as a coroutine). Threads
    /// start on the first launch.
    ///
    /// A variable set to a value it cannot read leaves its default and is the error of every
    /// module load ([`Error::CpuSetting`]).
    pub fn new() -> CpuBackend {
        CpuBackend::from_environment(&|variable| std::env::var_os(variable))
    }

    /// [`CpuBackend::new`] with the environment's variables looked up by `lookup`.
    fn from_environment(lookup: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> CpuBackend {
        let mut settings = Settings {
            lookup,
            first_unread: None,
        };
        let threads = settings
            .read(
                "OFFLOAD_CPU_THREADS",
                "a number of threads, 1 or more",
                |s| s.parse::<usize>().ok().filter(|&n| n > 0),
            )
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let spin = settings
            .read("OFFLOAD_CPU_SPIN_US", "a number of microseconds", |s| {
                s.parse::<u64>().ok()
            })
            .map_or(pool::SPIN, std::time::Duration::from_micros);
        let barriers = settings
            .read(
                "OFFLOAD_CPU_BARRIERS",
                "`regions` or `coroutines`",
                |s| match s {
                    "regions" => Some(BarrierMode::Regions),
                    "coroutines" => Some(BarrierMode::Coroutines),
                    _ => None,
                },
            )
            .unwrap_or(BarrierMode::Regions);
        let stack = settings.read(
            "OFFLOAD_KERNEL_STACK",
            "a number of bytes, or of KiB, MiB or GiB with a `K`, `M` or `G` suffix",
            super::stack_size::parse_stack_size,
        );
        let mut backend = CpuBackend::with_threads(threads)
            .with_spin(spin)
            .with_barriers(barriers)
            .with_stack(stack)
            .with_level(lookup("OFFLOAD_CPU_LEVEL").and_then(|v| v.into_string().ok()));
        backend.setting = settings.first_unread;
        backend
    }

    /// This device running the CPU images of at most `level` (`host`, `x86-64-v3`, …), or with
    /// `None` of the highest level this CPU has.
    pub fn with_level(mut self, level: Option<String>) -> CpuBackend {
        self.level = level;
        self
    }

    /// This device with threads that spin for `spin` before they sleep between launches (none
    /// for zero: each launch then wakes the workers).
    pub fn with_spin(mut self, spin: std::time::Duration) -> CpuBackend {
        self.pool = Pool::with_spin(self.pool.threads(), spin);
        self
    }

    /// A CPU device running launches on `threads` threads (the launching thread included).
    pub fn with_threads(threads: usize) -> CpuBackend {
        CpuBackend {
            pool: Pool::new(threads.max(1)),
            stacks: LauncherStacks::default(),
            sizes: StackSizes::new(None),
            barriers: BarrierMode::Regions,
            level: None,
            setting: None,
            mapped: Mutex::new(std::collections::HashMap::new()),
            _overflows: trap::Handler::acquire(),
        }
    }

    /// This device, giving each GPU thread `bytes` of stack (at least 64 KiB), or with `None`
    /// the defaults: 8 MiB, 128 KiB for a GPU thread run as a coroutine.
    pub fn with_stack(mut self, bytes: Option<usize>) -> CpuBackend {
        self.sizes = StackSizes::new(bytes);
        self
    }

    /// This device, running kernels with barriers as `mode` says.
    pub fn with_barriers(mut self, mode: BarrierMode) -> CpuBackend {
        self.barriers = mode;
        self
    }

    /// Threads that run a launch.
    pub fn threads(&self) -> usize {
        self.pool.threads()
    }
}

impl Default for CpuBackend {
    fn default() -> Self {
        CpuBackend::new()
    }
}

/// (available, total) bytes of the machine's memory; `usize::MAX` for a total the system
/// cannot tell.
fn host_memory() -> (usize, usize) {
    // SAFETY: sysconf takes a name and reads nothing of the caller's.
    let [page, total, free] = [
        libc::_SC_PAGESIZE,
        libc::_SC_PHYS_PAGES,
        libc::_SC_AVPHYS_PAGES,
    ]
    .map(|name| usize::try_from(unsafe { libc::sysconf(name) }).unwrap_or(0));
    if page == 0 || total == 0 {
        return (usize::MAX, usize::MAX);
    }
    (free.saturating_mul(page), total.saturating_mul(page))
}

impl Backend for CpuBackend {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn kind(&self) -> DeviceKind {
        DeviceKind::Cpu
    }

    fn describe(&self) -> String {
        // The level its images run at (a bad `OFFLOAD_CPU_LEVEL` is the first launch's error).
        let level = level::limit(self.level.as_deref())
            .map(|limit| format!(" up to {}", limit.level))
            .unwrap_or_default();
        format!(
            "cpu: {}{level} ({} threads)",
            std::env::consts::ARCH,
            self.pool.threads()
        )
    }

    fn alloc_zeroed(&self, bytes: usize) -> Result<DevicePtr> {
        // The kernel overcommits: without this check an allocation larger than the machine's
        // memory would succeed here and kill the process when touched.
        let (free, total) = host_memory();
        if bytes > total {
            return Err(Error::OutOfMemory {
                requested: bytes,
                free: Some(free),
                total: Some(total),
                device: self.describe(),
            });
        }
        if bytes >= HUGE_PAGE
            && let Some((p, len)) = map_huge(bytes)
        {
            self.mapped
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(p as u64, len);
            return Ok(DevicePtr(p as u64));
        }
        // calloc maps large blocks lazily: zeroing is free until the memory is touched.
        // SAFETY: calloc with a non-zero size has no preconditions.
        let p = unsafe { libc::calloc(bytes.max(1), 1) };
        if p.is_null() {
            return Err(Error::OutOfMemory {
                requested: bytes,
                free: Some(free),
                total: Some(total),
                device: self.describe(),
            });
        }
        Ok(DevicePtr(p as u64))
    }

    unsafe fn free(&self, ptr: DevicePtr) -> Result<()> {
        // Launches are synchronous on the CPU device, so nothing can still use the memory.
        let mapped = self
            .mapped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&ptr.0);
        match mapped {
            // SAFETY: `ptr` and `len` are a mapping made by `map_huge`, unmapped once.
            Some(len) => unsafe {
                libc::munmap(ptr.0 as *mut c_void, len);
            },
            // SAFETY: `ptr` came from calloc in `alloc_zeroed` and is freed once (our contract).
            None => unsafe { libc::free(ptr.0 as *mut c_void) },
        }
        Ok(())
    }

    unsafe fn copy_to_device(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        // SAFETY: `dst` is a live allocation of at least `src.len()` bytes (our contract);
        // host slices never overlap device allocations.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.0 as *mut u8, src.len()) };
        Ok(())
    }

    unsafe fn copy_to_host(&self, dst: &mut [u8], src: DevicePtr) -> Result<()> {
        // SAFETY: as in `copy_to_device`.
        unsafe { std::ptr::copy_nonoverlapping(src.0 as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    fn load_module(&self, module: &str, images: &[RegisteredImage<'_>]) -> Result<Box<dyn Module>> {
        if let Some(setting) = &self.setting {
            return Err(setting.error());
        }
        let limit = level::limit(self.level.as_deref())?;
        let Some((index, image, chosen)) = level::choose(images, &limit) else {
            return Err(Error::NoCompatibleImage {
                module: module.to_owned(),
                device: format!("{} ({})", self.describe(), limit.why),
                candidates: images.len(),
                tried: images
                    .iter()
                    .map(|i| format!("{} {} {}", i.triple(), i.arch(), i.image_kind().name()))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let carried: Vec<&str> = images
            .iter()
            .filter(|i| level::image_level(i).is_some())
            .map(|i| i.arch())
            .collect();
        crate::backend::gpu::log(format_args!(
            "module `{module}`: CPU image #{index} ({chosen}) of [{}]: {}",
            carried.join(", "),
            limit.why
        ));
        let info = image.describe();
        let bytes = image.checked_bytes()?;
        super::image::check_host_shared_object(bytes).map_err(|reason| Error::ImageLoad {
            module: module.to_owned(),
            image: info.to_string(),
            reason,
        })?;
        Ok(Box::new(CpuModule::load(
            info,
            bytes,
            self.pool.clone(),
            self.stacks.clone(),
            self.sizes,
            self.barriers,
        )?))
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
}

const MODE_UNKNOWN: u8 = 0;
const MODE_PLAIN: u8 = 1;
const MODE_BARRIER: u8 = 2;
/// The source form's region entry point (`#[kernel]`'s).
const MODE_REGIONS: u8 = 3;
/// The CPU link's region entry point (the IR form).
const MODE_IR_REGIONS: u8 = 4;

#[derive(Debug)]
struct CpuKernel {
    name: String,
    run: CpuRunFn,
    thread: CpuThreadFn,
    regions: Option<CpuRegionsFn>,
    ir_regions: Option<CpuRegionsFn>,
    mode: AtomicU8,
    /// The most static shared memory a block of this kernel has used in a launch so far.
    static_shared: AtomicU32,
    /// Whether the log has said that this kernel's regions did not fit the lane storage.
    lanes_logged: AtomicBool,
}

/// The region entry point a kernel runs in `mode`: the source form's, the CPU link's, or none
/// (coroutines).
fn entry_of(
    mode: u8,
    regions: Option<CpuRegionsFn>,
    ir_regions: Option<CpuRegionsFn>,
) -> Option<CpuRegionsFn> {
    match mode {
        MODE_REGIONS => regions,
        MODE_IR_REGIONS => ir_regions,
        _ => None,
    }
}

/// A CPU image loaded in this process.
#[derive(Debug)]
pub(crate) struct CpuModule {
    info: ImageInfo,
    pool: Pool,
    stacks: LauncherStacks,
    sizes: StackSizes,
    barriers: BarrierMode,
    /// The image's [`CpuPositionFn`].
    position: CpuPositionFn,
    kernels: Mutex<Vec<CpuKernel>>,
    // Declared last: the library is unloaded after everything pointing into it is gone.
    lib: Library,
}

/// Why the CPU device refuses a launch with clusters of more than one block.
pub(crate) const NO_CLUSTERS: &str = "the CPU device has no thread-block clusters (NVIDIA GPUs \
     of compute capability 9.0 and later have): launch clusters of one block where \
     `Device::supports_clusters()` is false";

impl CpuModule {
    /// Loads a CPU image from memory.
    fn load(
        info: ImageInfo,
        bytes: &[u8],
        pool: Pool,
        stacks: LauncherStacks,
        sizes: StackSizes,
        barriers: BarrierMode,
    ) -> Result<CpuModule> {
        let lib = Library::load_from_memory(&info, bytes)?;
        let Some(position) = lib.symbol(CPU_POSITION_SYMBOL) else {
            return Err(Error::ImageLoad {
                module: info.module.clone(),
                image: info.to_string(),
                reason: format!("the CPU image does not define `{CPU_POSITION_SYMBOL}`"),
            });
        };
        // SAFETY: the image's `__offload_cpu_position` has this type (the ABI version says).
        let position = unsafe { std::mem::transmute::<*mut c_void, CpuPositionFn>(position) };
        Ok(CpuModule {
            info,
            pool,
            stacks,
            sizes,
            barriers,
            position,
            kernels: Mutex::new(Vec::new()),
            lib,
        })
    }

    fn kernels(&self) -> std::sync::MutexGuard<'_, Vec<CpuKernel>> {
        self.kernels.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Module for CpuModule {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn image(&self) -> &ImageInfo {
        &self.info
    }

    fn kernel(&self, name: &str) -> Result<KernelHandle> {
        let mut kernels = self.kernels();
        if let Some(i) = kernels.iter().position(|k| k.name == name) {
            return Ok(KernelHandle(i as u64));
        }
        let not_found = || Error::KernelNotFound {
            kernel: name.to_owned(),
            module: self.info.module.clone(),
            image: self.info.to_string(),
        };
        let run = self
            .lib
            .symbol(&format!("{CPU_RUN_PREFIX}{name}"))
            .ok_or_else(not_found)?;
        let thread = self
            .lib
            .symbol(&format!("{CPU_THREAD_PREFIX}{name}"))
            .ok_or_else(not_found)?;
        let regions = self.lib.symbol(&format!("{CPU_REGIONS_PREFIX}{name}"));
        let ir_regions = self.lib.symbol(&format!("{CPU_IR_REGIONS_PREFIX}{name}"));
        // SAFETY: the image was built by `#[kernel]`, whose entry points with these prefixes
        // have exactly the types `CpuRunFn` / `CpuThreadFn` / `CpuRegionsFn` (checked by the
        // ABI version).
        let (run, thread, regions, ir_regions) = unsafe {
            (
                std::mem::transmute::<*mut c_void, CpuRunFn>(run),
                std::mem::transmute::<*mut c_void, CpuThreadFn>(thread),
                regions.map(|r| std::mem::transmute::<*mut c_void, CpuRegionsFn>(r)),
                ir_regions.map(|r| std::mem::transmute::<*mut c_void, CpuRegionsFn>(r)),
            )
        };
        kernels.push(CpuKernel {
            name: name.to_owned(),
            run,
            thread,
            regions,
            ir_regions,
            mode: AtomicU8::new(MODE_UNKNOWN),
            static_shared: AtomicU32::new(0),
            lanes_logged: AtomicBool::new(false),
        });
        Ok(KernelHandle(kernels.len() as u64 - 1))
    }

    unsafe fn launch(&self, kernel: KernelHandle, launch: &LaunchArgs<'_>) -> Result<()> {
        // SAFETY: this function's contract, passed on.
        self.stacks
            .lend(|| unsafe { self.launch_with_stacks(kernel, launch) })
    }

    /// One block per thread of the pool (the launching one included), whatever the block's
    /// size: each block runs on a thread of its own.
    fn max_cooperative_blocks(
        &self,
        _kernel: KernelHandle,
        _threads: u32,
        _shared: u32,
    ) -> Result<u32> {
        Ok(u32::try_from(self.pool.resident()).unwrap_or(u32::MAX))
    }

    /// No driver: any block size keeps every worker busy.
    fn driver_block_size(&self, _kernel: KernelHandle, _shared: u32) -> Result<Option<u32>> {
        Ok(None)
    }
}

impl CpuModule {
    /// [`Module::launch`] with the device's stacks lent to the calling thread.
    ///
    /// # Safety
    ///
    /// As [`Module::launch`].
    unsafe fn launch_with_stacks(&self, kernel: KernelHandle, args: &LaunchArgs<'_>) -> Result<()> {
        let (name, config, params) = (args.kernel, &args.config, args.params);
        let invalid = |reason: String| args.invalid(reason);
        let (run, thread, regions, ir_regions, mode, known_static) = {
            let kernels = self.kernels();
            let k = kernels
                .get(kernel.0 as usize)
                .ok_or_else(|| invalid(format!("unknown kernel handle {}", kernel.0)))?;
            (
                k.run,
                k.thread,
                k.regions,
                k.ir_regions,
                k.mode.load(Ordering::Relaxed),
                k.static_shared.load(Ordering::Relaxed),
            )
        };
        let (blocks, threads) = match config.check().map_err(invalid)? {
            LaunchShape::Empty => return Ok(()),
            LaunchShape::Blocks { blocks, threads } => (blocks, threads),
        };
        if config.is_clustered() {
            return Err(invalid(NO_CLUSTERS.to_owned()));
        }
        // The kernel's static shared memory is known once a launch has run it; the first
        // launch is checked after it ran (on the CPU device the two kinds of shared memory
        // are apart, so running it was harmless) and gets the same error.
        self.shared_limit(name, known_static, config.shared_mem_bytes)?;
        let (gx, gy, gz) = config.grid;
        let (bx, by, bz) = config.block;

        let ctx = LaunchCtx {
            divergent: AtomicBool::new(false),
            unmarked: AtomicBool::new(false),
            panicked: AtomicBool::new(false),
            failure: Mutex::new(None),
            output: Mutex::new(String::new()),
            position: self.position,
        };
        let launch = CpuLaunch {
            grid: [gx, gy, gz],
            block: [bx, by, bz],
            barrier: cpu_barrier,
            region_barrier: cpu_region_barrier,
            warp_sync: cpu_warp_sync,
            region_warp_sync: cpu_region_warp_sync,
            grid_sync: cpu_grid_sync,
            panic: cpu_panic,
            print: cpu_print,
            ctx: (&raw const ctx).cast(),
            dynamic_shared_bytes: config.shared_mem_bytes,
            static_shared_bytes: AtomicU32::new(0),
        };
        let grid = args.cooperative.then(|| GridBarrier::new(blocks));
        let launch_ref = Launch {
            launch: &raw const launch,
            params: params.as_ptr(),
            sizes: self.sizes,
            grid: grid.as_ref().map_or(std::ptr::null(), |g| &raw const *g),
        };
        if args.cooperative {
            let max = self.pool.resident();
            if blocks > max as u64 {
                return Err(Error::CooperativeGridTooLarge {
                    kernel: name.to_owned(),
                    blocks,
                    max: max as u64,
                    device: "the CPU device".to_owned(),
                });
            }
            // Every block on a worker of its own, its threads coroutines: all blocks are
            // resident, and `Grid::sync` suspends at any depth of calls.
            // SAFETY: the caller's contract covers running every thread of the launch.
            let run = unsafe { self.run_barrier_blocks(&launch_ref, thread, threads, blocks) };
            run?;
            self.set_mode(kernel, MODE_BARRIER);
            return self.finish(kernel, name, &launch, &ctx, MODE_BARRIER, known_static);
        }

        let mode = if mode == MODE_UNKNOWN {
            let (mode, ran) = if ir_regions.is_some() && self.barriers == BarrierMode::Regions {
                // The CPU link formed the regions after inlining: it saw every barrier.
                (MODE_IR_REGIONS, 0)
            } else if regions.is_some() || ir_regions.is_some() {
                // The body has barriers. Block 0 runs with coroutines, which see every
                // barrier; one the source form cannot see (in a function the kernel calls)
                // leaves the kernel to coroutines.
                // SAFETY: the caller's contract covers running any thread of this launch.
                unsafe { run_block_with_barriers(&launch_ref, thread, 0, threads, None) }?;
                ctx.check_failure(name)?;
                let unmarked = ctx.unmarked.load(Ordering::Relaxed);
                let mode =
                    if self.barriers == BarrierMode::Regions && regions.is_some() && !unmarked {
                        MODE_REGIONS
                    } else {
                        MODE_BARRIER
                    };
                (mode, 1)
            } else {
                // SAFETY: as above.
                let reached_barrier = unsafe { probe(&launch_ref, thread) }?;
                ctx.check_failure(name)?;
                if reached_barrier {
                    // Thread 0 of block 0 reached a barrier inside `probe`, which then
                    // finished block 0.
                    (MODE_BARRIER, 1)
                } else {
                    // SAFETY: as above; thread 0 of block 0 has run.
                    unsafe { self.run_plain(&launch_ref, run, blocks, 1) }?;
                    self.set_mode(kernel, MODE_PLAIN);
                    return self.finish(kernel, name, &launch, &ctx, MODE_PLAIN, known_static);
                }
            };
            self.set_mode(kernel, mode);
            crate::backend::gpu::log(format_args!(
                "cpu: kernel `{name}` has barriers; {}",
                match mode {
                    MODE_REGIONS => "runs as loops over each block's threads between them",
                    MODE_IR_REGIONS =>
                        "runs as loops over each block's threads between them (formed by the CPU link)",
                    _ if regions.is_none() && ir_regions.is_none() =>
                        "runs with one coroutine per GPU thread (no region form in its image)",
                    _ if self.barriers == BarrierMode::Coroutines =>
                        "runs with one coroutine per GPU thread (OFFLOAD_CPU_BARRIERS=coroutines)",
                    _ =>
                        "runs with one coroutine per GPU thread (it reached a barrier or a warp operation outside its body, in a function it calls: `#[offload_rt::kernels]` on a module of the kernel and its functions lets the region form see them)",
                }
            ));
            let regions = entry_of(mode, regions, ir_regions);
            // SAFETY: as above; the first `ran` blocks have run.
            let fitted =
                unsafe { self.run_barrier(&launch_ref, regions, thread, threads, ran, blocks) }?;
            self.log_lanes_overflow(kernel, name, fitted, threads);
            mode
        } else if mode == MODE_PLAIN {
            // SAFETY: as above.
            unsafe { self.run_plain(&launch_ref, run, blocks, 0) }?;
            mode
        } else {
            let regions = entry_of(mode, regions, ir_regions);
            // SAFETY: as above.
            let fitted =
                unsafe { self.run_barrier(&launch_ref, regions, thread, threads, 0, blocks) }?;
            self.log_lanes_overflow(kernel, name, fitted, threads);
            mode
        };
        self.finish(kernel, name, &launch, &ctx, mode, known_static)
    }

    /// Says once per kernel (`OFFLOAD_LOG`) that a launch's blocks ran with coroutines because
    /// the values its regions keep per thread did not fit a worker's lane storage.
    fn log_lanes_overflow(&self, kernel: KernelHandle, name: &str, fitted: bool, threads: u32) {
        if fitted {
            return;
        }
        let said = self
            .kernels()
            .get(kernel.0 as usize)
            .is_none_or(|k| k.lanes_logged.swap(true, Ordering::Relaxed));
        if said {
            return;
        }
        crate::backend::gpu::log(format_args!(
            "cpu: kernel `{name}`: the values its regions keep per thread do not fit the {} KiB \
             of lane storage a worker has at {threads} threads a block; its blocks run with one \
             coroutine per GPU thread",
            crate::kernel::abi::CPU_LANE_CAPACITY / 1024,
        ));
    }

    /// What a launch that ran in `mode` reports: a barrier reached where no coroutine ran, or
    /// more shared memory than a block has.
    fn finish(
        &self,
        kernel: KernelHandle,
        name: &str,
        launch: &CpuLaunch,
        ctx: &LaunchCtx,
        mode: u8,
        known_static: u32,
    ) -> Result<()> {
        ctx.check_failure(name)?;
        let used = launch.static_shared_bytes.load(Ordering::Relaxed);
        if used > known_static
            && let Some(k) = self.kernels().get(kernel.0 as usize)
        {
            k.static_shared.fetch_max(used, Ordering::Relaxed);
        }
        let without_coroutines = matches!(mode, MODE_PLAIN | MODE_REGIONS | MODE_IR_REGIONS);
        if without_coroutines && ctx.divergent.load(Ordering::Relaxed) {
            self.set_mode(kernel, MODE_BARRIER);
            return Err(Error::DivergentBarrier {
                kernel: name.to_owned(),
            });
        }
        self.shared_limit(name, used, launch.dynamic_shared_bytes)
    }

    /// The shared memory a block of `kernel` uses against the limit of every device.
    fn shared_limit(&self, kernel: &str, static_bytes: u32, dynamic_bytes: u32) -> Result<()> {
        let dynamic = u64::from(dynamic_bytes);
        let limit = MAX_SHARED_BYTES as u64;
        if u64::from(static_bytes) + dynamic > limit {
            return Err(Error::SharedMemoryLimit {
                kernel: kernel.to_owned(),
                static_bytes: u64::from(static_bytes),
                dynamic_bytes: dynamic,
                limit,
            });
        }
        Ok(())
    }

    fn set_mode(&self, kernel: KernelHandle, mode: u8) {
        if let Some(k) = self.kernels().get(kernel.0 as usize) {
            k.mode.store(mode, Ordering::Relaxed);
        }
    }

    /// Blocks `0..blocks` on the fast path; the first `skip` threads of block 0 have run.
    ///
    /// # Safety
    ///
    /// Running every thread of the launch is sound (the caller's launch contract).
    unsafe fn run_plain(&self, l: &Launch, run: CpuRunFn, blocks: u64, skip: u32) -> Result<()> {
        let chunk = chunk_size(blocks, self.pool.threads());
        self.pool.run(blocks, chunk, &|begin, end| {
            if l.panicked() {
                return Ok(());
            }
            let skip = if begin == 0 { skip } else { 0 };
            // SAFETY: `l` points at the launch record and parameters, alive until `Pool::run`
            // returns; the kernel's contract is the caller's.
            guarded(l, || unsafe { run(l.launch, l.params, begin, end, skip) })
        })
    }

    /// Blocks `0..blocks` of a cooperative launch, each on a thread of its own with a coroutine
    /// per GPU thread (the caller checked that the pool has a thread for each).
    ///
    /// # Safety
    ///
    /// As [`CpuModule::run_plain`].
    unsafe fn run_barrier_blocks(
        &self,
        l: &Launch,
        thread: CpuThreadFn,
        threads: u32,
        blocks: u64,
    ) -> Result<()> {
        self.pool.run(blocks, 1, &|begin, _| {
            // SAFETY: as in `run_plain`.
            let run = unsafe { run_block_with_barriers(l, thread, begin, threads, None) };
            if let Some(grid) = l.grid() {
                grid.leave(l.ctx(), begin);
            }
            run
        })
    }

    /// Blocks `first..blocks` of a kernel with barriers: in region form when `regions` is
    /// given, with coroutines otherwise and for a range whose locals do not fit the lane
    /// storage. Returns whether every range given to the region form fitted.
    ///
    /// # Safety
    ///
    /// As [`CpuModule::run_plain`].
    unsafe fn run_barrier(
        &self,
        l: &Launch,
        regions: Option<CpuRegionsFn>,
        thread: CpuThreadFn,
        threads: u32,
        first: u64,
        blocks: u64,
    ) -> Result<bool> {
        if first >= blocks {
            return Ok(true);
        }
        let overflowed = AtomicBool::new(false);
        let chunk = chunk_size(blocks - first, self.pool.threads());
        self.pool.run(blocks - first, chunk, &|begin, end| {
            let (begin, end) = (first + begin, first + end);
            if l.panicked() {
                return Ok(());
            }
            if let Some(regions) = regions {
                let mut fits = false;
                guarded(l, || {
                    // SAFETY: as in `run_plain`.
                    fits = unsafe { regions(l.launch, l.params, begin, end) } == 0;
                })?;
                if fits || l.panicked() {
                    return Ok(());
                }
                overflowed.store(true, Ordering::Relaxed);
            }
            for b in begin..end {
                // SAFETY: as in `run_plain`.
                unsafe { run_block_with_barriers(l, thread, b, threads, None) }?;
                if l.panicked() {
                    break;
                }
            }
            Ok(())
        })?;
        Ok(!overflowed.into_inner())
    }
}

fn chunk_size(blocks: u64, threads: usize) -> u64 {
    // Several chunks per thread balance uneven blocks; more would cost atomics.
    (blocks / (threads as u64 * 8)).max(1)
}

// SAFETY: the record and the parameter values are only read during the launch, and the
// launching thread keeps them alive until every worker is done with them.
unsafe impl Sync for Launch {}

#[cfg(test)]
mod settings_tests {
    use super::{BarrierMode, CpuBackend};
    use crate::backend::Backend;
    use crate::error::Error;

    fn backend(vars: &[(&str, &str)]) -> CpuBackend {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        CpuBackend::from_environment(&|name| {
            vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.into())
        })
    }

    #[test]
    fn settings_are_read_with_surrounding_blanks_and_empty_ones_ignored() {
        let b = backend(&[
            ("OFFLOAD_CPU_THREADS", " 3 "),
            ("OFFLOAD_CPU_SPIN_US", "0"),
            ("OFFLOAD_CPU_BARRIERS", "coroutines"),
            ("OFFLOAD_KERNEL_STACK", "1M"),
            ("OFFLOAD_CPU_LEVEL", ""),
        ]);
        assert!(b.setting.is_none(), "{:?}", b.setting);
        assert_eq!((b.threads(), b.barriers), (3, BarrierMode::Coroutines));
    }

    #[test]
    fn a_setting_that_cannot_be_read_is_named_with_what_it_takes() {
        for (variable, value, expected) in [
            ("OFFLOAD_CPU_THREADS", "0", "a number of threads"),
            ("OFFLOAD_CPU_THREADS", "four", "a number of threads"),
            ("OFFLOAD_CPU_SPIN_US", "-5", "a number of microseconds"),
            (
                "OFFLOAD_CPU_BARRIERS",
                "coroutine",
                "`regions` or `coroutines`",
            ),
            ("OFFLOAD_KERNEL_STACK", "lots", "a number of bytes"),
        ] {
            let b = backend(&[(variable, value)]);
            let message = b.setting.as_ref().map(|s| s.error().to_string());
            let message = message.unwrap_or_default();
            assert!(
                message.starts_with(&format!("{variable}=`{value}`: not {expected}")),
                "{variable}={value}: {message}"
            );
        }
        // The first one that cannot be read is the one reported; the defaults stand.
        let b = backend(&[("OFFLOAD_CPU_THREADS", "x"), ("OFFLOAD_CPU_SPIN_US", "y")]);
        let message = b.setting.as_ref().map(|s| s.error().to_string());
        let message = message.unwrap_or_default();
        assert!(message.starts_with("OFFLOAD_CPU_THREADS=`x`"), "{message}");
        assert_eq!(b.barriers, BarrierMode::Regions);
        // Loading a module is where a program hears of it.
        let loaded = b.load_module("kernels", &[]);
        assert!(
            matches!(
                loaded,
                Err(Error::CpuSetting {
                    variable: "OFFLOAD_CPU_THREADS",
                    ..
                })
            ),
            "{:?}",
            loaded.err()
        );
    }
}
