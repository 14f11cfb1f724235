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
//! then on. A kernel with barriers runs in region form when its image has a region entry
//! point (`#[kernel]` split its body at its barriers into loops over the block's threads) and
//! block 0 reached no barrier the region form cannot see (one in a function the kernel calls);
//! otherwise, or with `OFFLOAD_CPU_BARRIERS=coroutines`, each GPU thread of a block runs as a
//! coroutine on the worker's OS thread, switched at the barrier. Warp operations suspend a
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

mod level;
mod loader;
mod pool;
mod trap;

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use super::{Backend, DeviceKind, DevicePtr, KernelHandle, Module};
use crate::error::{Error, KernelPanicReport, Result};
use crate::kernel::MAX_SHARED_BYTES;
use crate::kernel::abi::{
    CPU_POSITION_SYMBOL, CPU_REGIONS_PREFIX, CPU_RUN_PREFIX, CPU_THREAD_PREFIX, CPU_WARP_SIZE,
    CpuLaunch, CpuPanic, CpuPositionFn, CpuRegionsFn, CpuRunFn, CpuThreadFn, PrintArg,
};
use crate::launch::{LaunchArgs, LaunchShape};
use crate::registry::{ImageInfo, RegisteredImage};

use loader::Library;
use pool::Pool;

/// Stack of each GPU thread run as a coroutine, unless `OFFLOAD_KERNEL_STACK` says otherwise.
const COROUTINE_STACK: usize = 128 * 1024;
/// Stack a worker runs kernels on outside coroutines (the GPU threads it runs one after
/// another each have all of it), unless `OFFLOAD_KERNEL_STACK` says otherwise: a thread's
/// default (memory is committed as it is touched).
const GUARD_STACK: usize = 8 * 1024 * 1024;
/// The smallest stack a GPU thread gets, whatever `OFFLOAD_KERNEL_STACK` says: room for the
/// runtime's callbacks (device prints, panic reports) and the kernel frames that call them.
const MIN_KERNEL_STACK: usize = 64 * 1024;

/// The stacks kernel code runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StackSizes {
    /// A GPU thread's coroutine stack.
    coroutine: usize,
    /// A worker's guard stack.
    guard: usize,
}

impl StackSizes {
    /// `bytes` for every GPU thread when given, else the defaults.
    fn new(bytes: Option<usize>) -> StackSizes {
        match bytes {
            Some(n) => {
                let n = n.max(MIN_KERNEL_STACK);
                StackSizes {
                    coroutine: n,
                    guard: n,
                }
            }
            None => StackSizes {
                coroutine: COROUTINE_STACK,
                guard: GUARD_STACK,
            },
        }
    }
}

/// The triple of CPU images this runtime can load: the one it was compiled for. The build
/// names the CPU image by the host crate's target, so the two agree on every Linux target;
/// elsewhere no CPU image fits and the device choice says why.
pub(crate) const HOST_TRIPLE: &str = if !cfg!(all(target_os = "linux", target_env = "gnu")) {
    "unsupported-host"
} else if cfg!(target_arch = "x86_64") {
    "x86_64-unknown-linux-gnu"
} else if cfg!(target_arch = "aarch64") {
    "aarch64-unknown-linux-gnu"
} else if cfg!(target_arch = "riscv64") {
    "riscv64gc-unknown-linux-gnu"
} else if cfg!(all(target_arch = "powerpc64", target_endian = "little")) {
    "powerpc64le-unknown-linux-gnu"
} else {
    "unsupported-host"
};

/// How the CPU device runs kernels with barriers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarrierMode {
    /// In region form where the image has it (loops over the block's threads between
    /// barriers), else with coroutines.
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

impl CpuBackend {
    /// A CPU device with `OFFLOAD_CPU_THREADS` worker threads, or as many as the host's
    /// available parallelism, running barriers as `OFFLOAD_CPU_BARRIERS` says (`coroutines`,
    /// or by default `regions`), each GPU thread with `OFFLOAD_KERNEL_STACK` bytes of stack
    /// (by default 8 MiB, 128 KiB for a GPU thread run as a coroutine). Threads start on the
    /// first launch.
    pub fn new() -> CpuBackend {
        let threads = std::env::var("OFFLOAD_CPU_THREADS")
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let barriers = match std::env::var("OFFLOAD_CPU_BARRIERS").as_deref() {
            Ok("coroutines") => BarrierMode::Coroutines,
            _ => BarrierMode::Regions,
        };
        CpuBackend::with_threads(threads)
            .with_barriers(barriers)
            .with_stack(super::kernel_stack())
            .with_level(std::env::var("OFFLOAD_CPU_LEVEL").ok())
    }

    /// This device running the CPU images of at most `level` (`host`, `x86-64-v3`, …), or with
    /// `None` of the highest level this CPU has.
    pub fn with_level(mut self, level: Option<String>) -> CpuBackend {
        self.level = level;
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
const MODE_REGIONS: u8 = 3;

#[derive(Debug)]
struct CpuKernel {
    name: String,
    run: CpuRunFn,
    thread: CpuThreadFn,
    regions: Option<CpuRegionsFn>,
    mode: AtomicU8,
    /// The most static shared memory a block of this kernel has used in a launch so far.
    static_shared: AtomicU32,
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
        // SAFETY: the image was built by `#[kernel]`, whose entry points with these prefixes
        // have exactly the types `CpuRunFn` / `CpuThreadFn` / `CpuRegionsFn` (checked by the
        // ABI version).
        let (run, thread, regions) = unsafe {
            (
                std::mem::transmute::<*mut c_void, CpuRunFn>(run),
                std::mem::transmute::<*mut c_void, CpuThreadFn>(thread),
                regions.map(|r| std::mem::transmute::<*mut c_void, CpuRegionsFn>(r)),
            )
        };
        kernels.push(CpuKernel {
            name: name.to_owned(),
            run,
            thread,
            regions,
            mode: AtomicU8::new(MODE_UNKNOWN),
            static_shared: AtomicU32::new(0),
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
        let (run, thread, regions, mode, known_static) = {
            let kernels = self.kernels();
            let k = kernels
                .get(kernel.0 as usize)
                .ok_or_else(|| invalid(format!("unknown kernel handle {}", kernel.0)))?;
            (
                k.run,
                k.thread,
                k.regions,
                k.mode.load(Ordering::Relaxed),
                k.static_shared.load(Ordering::Relaxed),
            )
        };
        let (blocks, threads) = match config.check().map_err(invalid)? {
            LaunchShape::Empty => return Ok(()),
            LaunchShape::Blocks { blocks, threads } => (blocks, threads),
        };
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
            let mode = if regions.is_some() {
                // The body has barriers. Block 0 runs with coroutines, which see every
                // barrier; barriers the region form cannot see (in functions the kernel
                // calls) keep the kernel there.
                // SAFETY: the caller's contract covers running any thread of this launch.
                unsafe { run_block_with_barriers(&launch_ref, thread, 0, threads, None) }?;
                ctx.check_failure(name)?;
                if ctx.unmarked.load(Ordering::Relaxed) || self.barriers == BarrierMode::Coroutines
                {
                    MODE_BARRIER
                } else {
                    MODE_REGIONS
                }
            } else {
                // SAFETY: as above.
                let reached_barrier = unsafe { probe(&launch_ref, thread) }?;
                ctx.check_failure(name)?;
                if reached_barrier {
                    // Thread 0 of block 0 reached a barrier inside `probe`, which then
                    // finished block 0.
                    MODE_BARRIER
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
                    _ if regions.is_none() =>
                        "runs with one coroutine per GPU thread (no region form in its image)",
                    _ if self.barriers == BarrierMode::Coroutines =>
                        "runs with one coroutine per GPU thread (OFFLOAD_CPU_BARRIERS=coroutines)",
                    _ =>
                        "runs with one coroutine per GPU thread (it reached a barrier or a warp operation outside its body, in a function it calls: `#[offload_rt::kernels]` on a module of the kernel and its functions lets the region form see them)",
                }
            ));
            let regions = regions.filter(|_| mode == MODE_REGIONS);
            // SAFETY: as above; block 0 has run.
            unsafe { self.run_barrier(&launch_ref, regions, thread, threads, 1, blocks) }?;
            mode
        } else if mode == MODE_PLAIN {
            // SAFETY: as above.
            unsafe { self.run_plain(&launch_ref, run, blocks, 0) }?;
            mode
        } else {
            let regions = regions.filter(|_| mode == MODE_REGIONS);
            // SAFETY: as above.
            unsafe { self.run_barrier(&launch_ref, regions, thread, threads, 0, blocks) }?;
            mode
        };
        self.finish(kernel, name, &launch, &ctx, mode, known_static)
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
        if matches!(mode, MODE_PLAIN | MODE_REGIONS) && ctx.divergent.load(Ordering::Relaxed) {
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
    /// storage.
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
    ) -> Result<()> {
        if first >= blocks {
            return Ok(());
        }
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
            }
            for b in begin..end {
                // SAFETY: as in `run_plain`.
                unsafe { run_block_with_barriers(l, thread, b, threads, None) }?;
                if l.panicked() {
                    break;
                }
            }
            Ok(())
        })
    }
}

fn chunk_size(blocks: u64, threads: usize) -> u64 {
    // Several chunks per thread balance uneven blocks; more would cost atomics.
    (blocks / (threads as u64 * 8)).max(1)
}

struct LaunchCtx {
    /// A barrier was reached where no coroutine runs (the fast path or the region form).
    divergent: AtomicBool,
    /// A barrier or warp operation the region form did not split at was reached (one in a
    /// function the kernel calls).
    unmarked: AtomicBool,
    /// A GPU thread panicked or overflowed its stack: workers start no more blocks.
    panicked: AtomicBool,
    /// The first panic's report or stack overflow.
    failure: Mutex<Option<Failure>>,
    /// What the launch's device prints wrote, printed when the launch is over.
    output: Mutex<String>,
    /// The image's [`CpuPositionFn`].
    position: CpuPositionFn,
}

/// How a GPU thread ended a launch.
enum Failure {
    Panic(KernelPanicReport),
    /// A block of a cooperative launch returned before a grid barrier others reached.
    GridSync {
        block: u64,
    },
    /// `Grid::sync` in a launch that is not cooperative (a raw launch of a cooperative
    /// kernel).
    NotCooperative,
    /// It overflowed its stack of `stack_bytes`, at this position.
    Overflow {
        block: [u32; 3],
        thread: [u32; 3],
        stack_bytes: usize,
    },
}

impl Drop for LaunchCtx {
    fn drop(&mut self) {
        crate::print::emit(self.output.get_mut().unwrap_or_else(|p| p.into_inner()));
    }
}

impl LaunchCtx {
    /// The state of the launch whose record is `launch`.
    ///
    /// # Safety
    ///
    /// `launch` is a record the runtime made for a launch still running, whose `ctx` is its
    /// `LaunchCtx`.
    unsafe fn of<'a>(launch: *const CpuLaunch) -> &'a LaunchCtx {
        // SAFETY: this function's contract.
        unsafe { &*(*launch).ctx.cast::<LaunchCtx>() }
    }

    fn panicked(&self) -> bool {
        self.panicked.load(Ordering::Relaxed)
    }

    /// Records `failure` unless a thread failed first, and stops the launch.
    fn fail(&self, failure: impl FnOnce() -> Failure) {
        let mut slot = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(failure());
        }
        self.panicked.store(true, Ordering::Relaxed);
    }

    /// Records that the GPU thread the calling OS thread ran last overflowed its stack of
    /// `stack_bytes`; called on the runtime's stack right after the kernel's coroutine left,
    /// before this thread runs other kernel code (the image's index state names the thread).
    fn overflowed(&self, stack_bytes: usize) {
        // SAFETY: the image's position function reads its thread-local index state.
        let position = unsafe { (self.position)() };
        self.fail(|| Failure::Overflow {
            block: position.block,
            thread: position.thread,
            stack_bytes,
        });
    }

    /// [`Error::KernelPanic`] or [`Error::KernelStackOverflow`] for kernel `name` if one of its
    /// threads panicked or overflowed its stack.
    fn check_failure(&self, name: &str) -> Result<()> {
        if !self.panicked() {
            return Ok(());
        }
        let failure = self
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        match failure {
            None => Ok(()),
            Some(Failure::Panic(report)) => Err(Error::KernelPanic {
                kernel: name.to_owned(),
                device: "cpu".to_owned(),
                panic: Box::new(report),
            }),
            Some(Failure::GridSync { block }) => Err(Error::GridSyncMismatch {
                kernel: name.to_owned(),
                block,
            }),
            Some(Failure::NotCooperative) => Err(Error::InvalidLaunch {
                kernel: name.to_owned(),
                reason: "it reached `Grid::sync` in a launch that is not cooperative; launch \
                         a kernel taking a `Grid` through its typed handle"
                    .to_owned(),
            }),
            Some(Failure::Overflow {
                block,
                thread,
                stack_bytes,
            }) => Err(Error::KernelStackOverflow {
                kernel: name.to_owned(),
                device: "cpu".to_owned(),
                block,
                thread,
                stack_bytes,
            }),
        }
    }
}

/// Pointers to a launch's record and parameters, shared with the worker threads, and the
/// device's stack sizes.
struct Launch {
    launch: *const CpuLaunch,
    params: *const *mut c_void,
    sizes: StackSizes,
    /// The grid barrier of a cooperative launch, or null.
    grid: *const GridBarrier,
}

// SAFETY: the record and the parameter values are only read during the launch, and the
// launching thread keeps them alive until every worker is done with them.
unsafe impl Sync for Launch {}

impl Launch {
    fn ctx(&self) -> &LaunchCtx {
        // SAFETY: the record and its ctx are alive for the launch.
        unsafe { LaunchCtx::of(self.launch) }
    }

    fn panicked(&self) -> bool {
        self.ctx().panicked()
    }

    fn grid(&self) -> Option<&GridBarrier> {
        // SAFETY: when set, the barrier lives on the launching frame for the whole launch.
        unsafe { self.grid.as_ref() }
    }
}

/// The grid barrier of a cooperative launch on the CPU device: each block (on a worker of its
/// own) waits here once all its threads have reached `Grid::sync`.
struct GridBarrier {
    blocks: u64,
    state: Mutex<GridState>,
    opened: std::sync::Condvar,
}

#[derive(Default)]
struct GridState {
    /// Blocks waiting at the current barrier.
    arrived: u64,
    /// Barriers opened so far.
    generation: u64,
    /// The first block that returned.
    returned: Option<u64>,
    /// The launch failed: waiting blocks leave.
    aborted: bool,
}

impl GridBarrier {
    fn new(blocks: u64) -> GridBarrier {
        GridBarrier {
            blocks,
            state: Mutex::new(GridState::default()),
            opened: std::sync::Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GridState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A block arrives; returns once every block has, or `false` when the launch failed (a
    /// panic, or a block that returned and will never arrive).
    fn wait(&self, ctx: &LaunchCtx) -> bool {
        let mut state = self.lock();
        if state.aborted || ctx.panicked() {
            return false;
        }
        if let Some(returned) = state.returned {
            drop(state);
            self.mismatch(ctx, returned);
            return false;
        }
        state.arrived += 1;
        if state.arrived == self.blocks {
            state.arrived = 0;
            state.generation += 1;
            self.opened.notify_all();
            return true;
        }
        let generation = state.generation;
        while state.generation == generation && !state.aborted {
            state = self.opened.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state.generation != generation
    }

    /// Block `block` has returned (or left after a failure).
    fn leave(&self, ctx: &LaunchCtx, block: u64) {
        let mut state = self.lock();
        state.returned.get_or_insert(block);
        let waiting = state.arrived > 0 && !state.aborted;
        drop(state);
        if ctx.panicked() {
            self.abort();
        } else if waiting {
            self.mismatch(ctx, block);
        }
    }

    /// Fails the launch: block `returned` returned before a grid barrier others reached.
    fn mismatch(&self, ctx: &LaunchCtx, returned: u64) {
        ctx.fail(|| Failure::GridSync { block: returned });
        self.abort();
    }

    /// Wakes every waiting block to leave.
    fn abort(&self) {
        self.lock().aborted = true;
        self.opened.notify_all();
    }
}

/// Where a suspended GPU thread waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// At `sync_threads()`: for every thread of the block.
    Block,
    /// At a warp operation: for the live lanes of its warp.
    Warp,
    /// At `Grid::sync()`: for every thread of the grid.
    Grid,
    /// Panicked: never to be resumed.
    Panic,
}

type Yield = Yielder<(), Wait>;
type GuardYield = Yielder<(), ()>;

thread_local! {
    /// The yielder of the coroutine running on this OS thread, or null on the fast path.
    static CURRENT: Cell<*const Yield> = const { Cell::new(std::ptr::null()) };
    /// The yielder of the guard coroutine running kernel code outside GPU-thread coroutines.
    static GUARD: Cell<*const GuardYield> = const { Cell::new(std::ptr::null()) };
    /// A pool worker's stacks, kept for the next block it runs. Workers exit when their pool
    /// is dropped, running this destructor with them.
    static WORKER_STACKS: RefCell<StackCache> = const { RefCell::new(StackCache::new()) };
    /// On a thread that launches, the launching device's stacks while its launch runs. No
    /// destructor: one would keep a `cdylib` with kernels mapped after `dlclose` until this
    /// thread exits (see `os_thread`).
    static LENT_STACKS: Cell<*mut StackCache> = const { Cell::new(std::ptr::null_mut()) };
}

/// Stacks kept between blocks: mapping one costs more than a small block's work.
struct StackCache {
    /// GPU threads' coroutine stacks.
    coroutine: Vec<DefaultStack>,
    /// The guard stack.
    guard: Option<DefaultStack>,
    /// The alternate signal stack of a thread that runs kernel code and had none, on which a
    /// stack overflow is handled.
    signal: Option<trap::SignalStack>,
}

impl StackCache {
    const fn new() -> StackCache {
        StackCache {
            coroutine: Vec::new(),
            guard: None,
            signal: None,
        }
    }
}

/// A device's stacks for the thread that launches on it (its workers keep their own).
#[derive(Clone)]
struct LauncherStacks(Arc<Mutex<StackCache>>);

impl std::fmt::Debug for LauncherStacks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LauncherStacks")
    }
}

impl Default for LauncherStacks {
    fn default() -> LauncherStacks {
        LauncherStacks(Arc::new(Mutex::new(StackCache::new())))
    }
}

impl LauncherStacks {
    /// Runs `launch` with these stacks lent to the calling thread, locked once for the whole
    /// launch (a device's launches run one at a time anyway).
    fn lend<R>(&self, launch: impl FnOnce() -> R) -> R {
        struct Restore(*mut StackCache);
        impl Drop for Restore {
            fn drop(&mut self) {
                LENT_STACKS.with(|l| l.set(self.0));
            }
        }
        let mut stacks = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // Declared after the guard, so dropped (the signal stack removed, the pointer reset)
        // before it unlocks.
        let _signal = trap::SignalStackLent::lend(&mut stacks.signal);
        let _restore = Restore(LENT_STACKS.with(|l| l.replace(&raw mut *stacks)));
        launch()
    }
}

/// Runs `f` on the calling thread's stack cache: a worker's own, or the stacks lent to a
/// launching thread; a thread with neither maps and unmaps stacks as it goes.
fn with_stacks<R>(f: impl FnOnce(&mut StackCache) -> R) -> R {
    if pool::on_worker_thread() {
        return WORKER_STACKS.with_borrow_mut(|s| {
            trap::keep_signal_stack(&mut s.signal);
            f(s)
        });
    }
    let lent = LENT_STACKS.with(Cell::get);
    if lent.is_null() {
        return f(&mut StackCache::new());
    }
    // SAFETY: `LauncherStacks::lend` set the pointer to the cache behind the lock guard it
    // holds for as long as the pointer is set, on this thread only; no `f` here calls
    // `with_stacks` again, so this is the one reference to the cache while it lives.
    f(unsafe { &mut *lent })
}

/// Runs `f` (kernel code of launch `l` outside GPU-thread coroutines) on this thread's guard
/// stack, so that a panic in it can leave it: [`cpu_panic`] suspends the guard, which is then
/// reset, not resumed; a stack overflow makes it return (see `trap`). After either the
/// launch's ctx holds the report.
fn guarded<F: FnOnce()>(l: &Launch, f: F) -> Result<()> {
    let stack = take_guard_stack(l)?;
    let info = trap::StackInfo::of(&stack);
    let body = move |y: &GuardYield, ()| {
        GUARD.with(|g| g.set(y));
        f();
        GUARD.with(|g| g.set(std::ptr::null()));
    };
    // SAFETY: `body` borrows from this frame, and the coroutine does not outlive it: it either
    // completes in the `resume` below or is reset there.
    let mut co = unsafe { Coroutine::with_stack_unchecked(stack, body) };
    let (result, overflowed) = trap::resume(&mut co, info);
    if overflowed {
        GUARD.with(|g| g.set(std::ptr::null()));
        l.ctx().overflowed(info.bytes);
    }
    if let CoroutineResult::Yield(()) = result {
        GUARD.with(|g| g.set(std::ptr::null()));
        CURRENT.with(|c| c.set(std::ptr::null()));
        // SAFETY: the coroutine is suspended in `cpu_panic`, on frames of the kernel (image
        // code, built with `-Cpanic=abort`, so it has no unwinding cleanups to skip; its
        // locals' destructors are not run, as on a GPU) and of this closure, which holds
        // nothing to drop but `f`'s borrows.
        unsafe { co.force_reset() };
    }
    give_stack(l, co.into_stack());
    Ok(())
}

/// This thread's guard stack, mapped on first use.
fn take_guard_stack(l: &Launch) -> Result<DefaultStack> {
    match with_stacks(|s| s.guard.take()) {
        Some(stack) => Ok(stack),
        None => DefaultStack::new(l.sizes.guard).map_err(|source| Error::Os {
            call: "mmap (guard stack)",
            source,
        }),
    }
}

/// A device print: formatted now, printed when the launch is over.
///
/// # Safety
///
/// Called by image code with the launch record the runtime passed in, a UTF-8 template of
/// `template_len` bytes and `arg_count` arguments, valid for the call.
unsafe extern "C" fn cpu_print(
    launch: *const CpuLaunch,
    template: *const u8,
    template_len: usize,
    args: *const PrintArg,
    arg_count: usize,
) {
    if trap::low_on_stack() {
        // Formatting allocates: an overflow in it would leave the allocator's lock taken.
        trap::mark_overflow();
        // SAFETY: this function's contract: called by kernel code on a kernel stack.
        unsafe { leave_kernel() }
    }
    // SAFETY: this function's contract.
    let (ctx, template, args) = unsafe {
        (
            LaunchCtx::of(launch),
            std::slice::from_raw_parts(template, template_len),
            std::slice::from_raw_parts(args, arg_count),
        )
    };
    let text = crate::print::render(&String::from_utf8_lossy(template), args);
    ctx.output
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push_str(&text);
}

/// A GPU thread's panic: records the report (the first one wins) and leaves the kernel.
///
/// # Safety
///
/// Called by image code with the launch record the runtime passed in and a valid report,
/// while running on a GPU-thread coroutine or a guard stack.
unsafe extern "C" fn cpu_panic(launch: *const CpuLaunch, report: *const CpuPanic) -> ! {
    if trap::low_on_stack() {
        // Too little stack left to record the report (which allocates): an overflow.
        trap::mark_overflow();
        // SAFETY: this function's contract.
        unsafe { leave_kernel() }
    }
    {
        // SAFETY: this function's contract: the record's ctx is the launch's LaunchCtx, and
        // the report and its strings are valid for the call.
        let (ctx, r) = unsafe { (LaunchCtx::of(launch), &*report) };
        // SAFETY: as above; the image passes pointer and length of byte strings.
        let text = |ptr: *const u8, len: usize| unsafe {
            String::from_utf8_lossy(std::slice::from_raw_parts(ptr, len)).into_owned()
        };
        ctx.fail(|| {
            Failure::Panic(KernelPanicReport {
                message: text(r.message, r.message_len),
                file: text(r.file, r.file_len),
                line: r.line,
                column: r.column,
                block: r.block,
                thread: r.thread,
            })
        });
    }
    // SAFETY: this function's contract.
    unsafe { leave_kernel() }
}

/// Leaves the kernel running on this thread, as after a panic: suspends its coroutine, which
/// is then abandoned or reset, never resumed.
///
/// # Safety
///
/// Called by kernel code, on a GPU-thread coroutine or a guard stack.
unsafe fn leave_kernel() -> ! {
    let current = CURRENT.with(Cell::get);
    if !current.is_null() {
        // SAFETY: CURRENT is the yielder of the coroutine running this code; it is never
        // resumed after `Wait::Panic`.
        unsafe { (*current).suspend(Wait::Panic) };
    } else {
        let guard = GUARD.with(Cell::get);
        if !guard.is_null() {
            // SAFETY: GUARD is the yielder of the guard coroutine running this code; it is
            // reset, never resumed.
            unsafe { (*guard).suspend(()) };
        }
    }
    // Kernel code only runs on the stacks above; a panic elsewhere cannot be left.
    eprintln!("offload-rt: a kernel panicked outside the CPU device's stacks");
    std::process::abort()
}

/// Suspends the calling GPU thread at `wait`; on the fast path (no coroutine) marks the launch
/// divergent instead.
///
/// # Safety
///
/// Called by image code with the launch record the runtime passed in.
unsafe fn suspend(launch: *const CpuLaunch, wait: Wait) {
    let y = CURRENT.with(Cell::get);
    if y.is_null() {
        // SAFETY: `launch` is this launch's record; its ctx is the LaunchCtx alive for the
        // whole launch.
        let ctx = unsafe { LaunchCtx::of(launch) };
        ctx.divergent.store(true, Ordering::Relaxed);
        return;
    }
    // SAFETY: CURRENT holds the yielder of the coroutine running this code (set when it
    // started or came back from its last suspension), which outlives it.
    unsafe { (*y).suspend(wait) };
    CURRENT.with(|c| c.set(y));
}

/// Records that the launch reached a barrier the region form did not split at.
///
/// # Safety
///
/// As [`suspend`].
unsafe fn unmarked(launch: *const CpuLaunch) {
    // SAFETY: `launch` is this launch's record; its ctx is the LaunchCtx alive for the
    // whole launch.
    let ctx = unsafe { LaunchCtx::of(launch) };
    ctx.unmarked.store(true, Ordering::Relaxed);
}

/// `sync_threads()` on the CPU device.
///
/// # Safety
///
/// As [`suspend`].
unsafe extern "C" fn cpu_barrier(launch: *const CpuLaunch) {
    // SAFETY: this function's contract.
    unsafe {
        unmarked(launch);
        suspend(launch, Wait::Block)
    }
}

/// A barrier of the kernel body that the region form splits at, on the coroutine path.
///
/// # Safety
///
/// As [`suspend`].
unsafe extern "C" fn cpu_region_barrier(launch: *const CpuLaunch) {
    // SAFETY: this function's contract.
    unsafe { suspend(launch, Wait::Block) }
}

/// The warp barrier of a warp operation of the kernel body that the region form splits at,
/// on the coroutine path.
///
/// # Safety
///
/// As [`suspend`].
unsafe extern "C" fn cpu_region_warp_sync(launch: *const CpuLaunch) {
    // SAFETY: this function's contract.
    unsafe { suspend(launch, Wait::Warp) }
}

/// `Grid::sync()` on the CPU device: the block barrier, after which the block waits for the
/// grid (see [`run_block_with_barriers`]).
///
/// # Safety
///
/// As [`suspend`].
unsafe extern "C" fn cpu_grid_sync(launch: *const CpuLaunch) {
    // SAFETY: this function's contract.
    unsafe { suspend(launch, Wait::Grid) }
}

/// The warp barrier of warp operations on the CPU device.
///
/// # Safety
///
/// As [`suspend`].
unsafe extern "C" fn cpu_warp_sync(launch: *const CpuLaunch) {
    // SAFETY: this function's contract.
    unsafe {
        unmarked(launch);
        suspend(launch, Wait::Warp)
    }
}

/// Runs thread 0 of block 0 as a coroutine, on the guard stack (the stack the other threads
/// get on the fast path). Returns whether it reached a barrier; if so, runs the rest of block 0
/// with barriers, resuming that coroutine as thread 0.
///
/// # Safety
///
/// Running every thread of the launch is sound.
unsafe fn probe(l: &Launch, thread: CpuThreadFn) -> Result<bool> {
    let stack = take_guard_stack(l)?;
    let info = trap::StackInfo::of(&stack);
    let (launch, params) = (l.launch, l.params);
    let mut co = Coroutine::with_stack(stack, move |y: &Yield, ()| {
        CURRENT.with(|c| c.set(y));
        // SAFETY: the caller's contract.
        unsafe { thread(launch, params, 0, 0) };
        CURRENT.with(|c| c.set(std::ptr::null()));
    });
    let (result, overflowed) = trap::resume(&mut co, info);
    if overflowed {
        CURRENT.with(|c| c.set(std::ptr::null()));
        l.ctx().overflowed(info.bytes);
    }
    match result {
        CoroutineResult::Return(()) => {
            give_stack(l, co.into_stack());
            Ok(false)
        }
        CoroutineResult::Yield(Wait::Panic) => {
            abandon(l, co);
            Ok(false)
        }
        CoroutineResult::Yield(wait) => {
            // SAFETY: `launch` is alive for the launch.
            let [bx, by, bz] = unsafe { (*l.launch).block };
            // SAFETY: the caller's contract.
            unsafe { run_block_with_barriers(l, thread, 0, bx * by * bz, Some((co, info, wait))) }?;
            Ok(true)
        }
    }
}

type ThreadCoroutine = Coroutine<(), Wait, (), DefaultStack>;

/// One GPU thread of a block run with barriers.
struct Lane {
    co: Option<ThreadCoroutine>,
    /// Its stack.
    stack: trap::StackInfo,
    /// Where it waits; `None` when it can run.
    wait: Option<Wait>,
}

/// Runs one block, each GPU thread a coroutine. Warp by warp (32 threads by rank), the lanes
/// that can run are taken in order to their next suspension; lanes at a warp barrier go on
/// once no lane of their warp can run, so a warp operation sees every live lane's value. Once
/// every warp waits at `sync_threads()` (or has finished), the block barrier opens. `first` is
/// thread 0 already started (by [`probe`]) and where it waits.
///
/// # Safety
///
/// Running every thread of the block is sound.
unsafe fn run_block_with_barriers(
    l: &Launch,
    thread: CpuThreadFn,
    block: u64,
    threads: u32,
    first: Option<(ThreadCoroutine, trap::StackInfo, Wait)>,
) -> Result<()> {
    let mut lanes: Vec<Lane> = Vec::with_capacity(threads as usize);
    let start = u32::from(first.is_some());
    if let Some((co, stack, wait)) = first {
        lanes.push(Lane {
            co: Some(co),
            stack,
            wait: Some(wait),
        });
    }
    // All stacks are taken before any thread runs: a failure cannot strand suspended threads.
    let mut stacks = Vec::with_capacity(threads as usize);
    for _ in start..threads {
        match take_stack(l) {
            Ok(s) => stacks.push(s),
            Err(e) => {
                stacks.into_iter().for_each(|s| give_stack(l, s));
                if let Some(Lane { co: Some(co), .. }) = lanes.pop() {
                    // A suspended coroutine cannot be dropped without unwinding image frames.
                    std::mem::forget(co);
                }
                return Err(e);
            }
        }
    }
    let launch = l.launch;
    let params = l.params;
    for (t, stack) in (start..threads).zip(stacks) {
        let info = trap::StackInfo::of(&stack);
        lanes.push(Lane {
            stack: info,
            co: Some(Coroutine::with_stack(stack, move |y: &Yield, ()| {
                CURRENT.with(|c| c.set(y));
                // SAFETY: the caller's contract.
                unsafe { thread(launch, params, block, t) };
                CURRENT.with(|c| c.set(std::ptr::null()));
            })),
            wait: None,
        });
    }
    let mut live = lanes.len();
    'block: while live > 0 {
        for warp in lanes.chunks_mut(CPU_WARP_SIZE as usize) {
            loop {
                for lane in warp.iter_mut() {
                    if lane.wait.is_some() {
                        continue;
                    }
                    let Some(co) = &mut lane.co else { continue };
                    let (result, overflowed) = trap::resume(co, lane.stack);
                    if overflowed {
                        CURRENT.with(|c| c.set(std::ptr::null()));
                        l.ctx().overflowed(lane.stack.bytes);
                        break 'block;
                    }
                    match result {
                        CoroutineResult::Yield(Wait::Panic) => break 'block,
                        CoroutineResult::Yield(wait) => lane.wait = Some(wait),
                        CoroutineResult::Return(()) => {
                            if let Some(done) = lane.co.take() {
                                give_stack(l, done.into_stack());
                            }
                            live -= 1;
                        }
                    }
                }
                let mut at_warp_barrier = false;
                for lane in warp.iter_mut() {
                    if lane.wait == Some(Wait::Warp) {
                        lane.wait = None;
                        at_warp_barrier = true;
                    }
                }
                if !at_warp_barrier {
                    break;
                }
            }
        }
        let at_grid_barrier = lanes.iter().any(|lane| lane.wait == Some(Wait::Grid));
        if at_grid_barrier {
            let passed = match l.grid() {
                Some(grid) => grid.wait(l.ctx()),
                None => {
                    // A raw launch of a cooperative kernel (typed launches are cooperative).
                    l.ctx().fail(|| Failure::NotCooperative);
                    false
                }
            };
            if !passed {
                // The launch failed: the block is abandoned, as after a panic.
                break 'block;
            }
        }
        for lane in &mut lanes {
            lane.wait = None;
        }
    }
    // Left early only by a panic: the block's other threads are abandoned with it.
    lanes
        .into_iter()
        .filter_map(|lane| lane.co)
        .for_each(|co| abandon(l, co));
    Ok(())
}

/// Drops a GPU thread's coroutine whatever its state, keeping its stack; after a panic in the
/// block.
fn abandon(l: &Launch, mut co: ThreadCoroutine) {
    // A thread not started yet (after the block's panicking one) is reset too: only a finished
    // coroutine gives its stack back.
    if !co.done() {
        // SAFETY: the coroutine is suspended in image code (built with `-Cpanic=abort`, no
        // cleanups to skip; its locals' destructors are not run, as on a GPU) under the
        // thread closure of `run_block_with_barriers`/`probe`, which holds nothing to drop, or
        // has not started, its closure holding only copied pointers and indices.
        unsafe { co.force_reset() };
    }
    CURRENT.with(|c| c.set(std::ptr::null()));
    give_stack(l, co.into_stack());
}

fn take_stack(l: &Launch) -> Result<DefaultStack> {
    let cached = with_stacks(|s| s.coroutine.pop());
    match cached {
        Some(s) => Ok(s),
        None => DefaultStack::new(l.sizes.coroutine).map_err(|source| Error::Os {
            call: "mmap (coroutine stack)",
            source,
        }),
    }
}

/// Keeps `stack` for the next use: one of the guard stack's size (as [`probe`] and
/// [`guarded`] use) as this thread's guard stack while it has none, the others for GPU threads'
/// coroutines (where the sizes differ, a second guard-sized stack is unmapped).
fn give_stack(l: &Launch, stack: DefaultStack) {
    let bytes = trap::StackInfo::of(&stack).bytes;
    with_stacks(|s| {
        if bytes >= l.sizes.guard && s.guard.is_none() {
            s.guard = Some(stack);
        } else if bytes < l.sizes.guard || l.sizes.coroutine >= l.sizes.guard {
            s.coroutine.push(stack);
        }
    });
}
