//! Types that cross the boundary between host and kernel: what may be a kernel parameter,
//! and the CPU device's entry-point ABI (shared by the runtime and every CPU image).

use core::ffi::c_void;
use core::sync::atomic::AtomicU32;

mod sealed {
    pub trait Sealed {}
}

/// A scalar kernel parameter: passed by value.
pub trait KernelScalar: Copy + 'static + sealed::Sealed {}

macro_rules! scalars {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl KernelScalar for $t {}
        // SAFETY: a primitive number has no pointers, no padding and no invalid bit patterns.
        unsafe impl DeviceCopy for $t {}
    )*};
}

/// Plain data that may live in device memory, be copied bytewise between host and device, and
/// be a kernel parameter passed by value: the scalars (with the `half` feature `half::f16` and
/// `half::bf16` too), arrays of `DeviceCopy` values, and
/// `#[repr(C)]` structs of them through `#[derive(DeviceCopy)]` (which checks the rules below).
///
/// # Safety
///
/// Implementors have no pointers into host memory, no `Drop`, no padding bytes, and every bit
/// pattern is a valid value (device code may write any bytes into them).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not `DeviceCopy`: it cannot be a kernel parameter or a device buffer's element",
    note = "kernel parameters are scalars (u8..u64, i8..i64, usize, isize, f32, f64, and half::f16, half::bf16 with offload-rt's `half` feature), #[derive(DeviceCopy)] #[repr(C)] structs, arrays of these, slices `&[T]` and `DisjointSlice<T>` of these, or device pointers (*const T, *mut T)"
)]
pub unsafe trait DeviceCopy: Copy + 'static {}

scalars!(u8, u16, u32, u64, i8, i16, i32, i64, usize, isize, f32, f64);
// The `half` crate's types are `#[repr(transparent)]` over a `u16`: every bit pattern is a value.
#[cfg(feature = "half")]
scalars!(::half::f16, ::half::bf16);

// SAFETY: an array of DeviceCopy values has no padding between elements and no other bytes.
unsafe impl<T: DeviceCopy, const N: usize> DeviceCopy for [T; N] {}

/// What the CPU backend passes to a CPU image's entry points for one launch.
#[repr(C)]
#[derive(Debug)]
pub struct CpuLaunch {
    /// Blocks in the grid (x, y, z).
    pub grid: [u32; 3],
    /// Threads per block (x, y, z).
    pub block: [u32; 3],
    /// Called by `sync_threads()`; suspends the calling GPU thread until its block reaches
    /// the barrier.
    pub barrier: unsafe extern "C" fn(launch: *const CpuLaunch),
    /// Called by the barriers of a kernel body that the region form splits at, when the kernel
    /// runs on the coroutine path: suspends like `barrier`, which the runtime then knows was
    /// not called from elsewhere (a function the kernel calls).
    pub region_barrier: unsafe extern "C" fn(launch: *const CpuLaunch),
    /// Called by warp operations; suspends the calling GPU thread until every live lane of its
    /// warp (32 consecutive threads by rank) reaches a warp barrier too.
    pub warp_sync: unsafe extern "C" fn(launch: *const CpuLaunch),
    /// Called by a panicking GPU thread (a failed `assert!`, a bad index, `panic!`): records
    /// the report and leaves the kernel, abandoning the launch; never returns.
    pub panic: unsafe extern "C" fn(launch: *const CpuLaunch, report: *const CpuPanic) -> !,
    /// The runtime's state for this launch.
    pub ctx: *const c_void,
    /// Bytes of dynamic shared memory each block gets.
    pub dynamic_shared_bytes: u32,
    /// The most static shared memory (`shared_array!`) a block of the launch has used so far,
    /// raised by the image as blocks allocate their arrays.
    pub static_shared_bytes: AtomicU32,
}

/// What a panicking GPU thread of the CPU device reports: its message (cut at
/// [`CPU_PANIC_MESSAGE_CAPACITY`] bytes), where it panicked, and which thread it was. The
/// strings are UTF-8 and live until the callback returns (it does not).
#[repr(C)]
#[derive(Debug)]
pub struct CpuPanic {
    /// The formatted panic message.
    pub message: *const u8,
    /// Its length in bytes.
    pub message_len: usize,
    /// The source file of the panic, as `core::panic::Location` names it.
    pub file: *const u8,
    /// Its length in bytes.
    pub file_len: usize,
    /// Line of the panic, 1-based.
    pub line: u32,
    /// Column of the panic, 1-based.
    pub column: u32,
    /// Index of the panicking thread's block.
    pub block: [u32; 3],
    /// Index of the panicking thread in its block.
    pub thread: [u32; 3],
}

/// Bytes of a panic message a CPU image reports; a longer one is cut at a UTF-8 boundary.
pub const CPU_PANIC_MESSAGE_CAPACITY: usize = 1024;

/// `__offload_cpu_run_<kernel>`: runs blocks `begin..end` (linear block indices) with all
/// their threads one after another, skipping the first `skip` threads of block `begin`.
pub type CpuRunFn = unsafe extern "C" fn(
    launch: *const CpuLaunch,
    params: *const *mut c_void,
    begin: u64,
    end: u64,
    skip: u32,
);

/// `__offload_cpu_thread_<kernel>`: runs one thread (linear index in its block) of one block.
pub type CpuThreadFn = unsafe extern "C" fn(
    launch: *const CpuLaunch,
    params: *const *mut c_void,
    block: u64,
    thread: u32,
);

/// `__offload_cpu_regions_<kernel>`, exported for kernels with barriers in region form: runs
/// blocks `begin..end` with each region of the body as a loop over the block's threads.
/// Returns 0, or 1 without running anything when the block's locals do not fit the lane
/// storage (the runtime then runs those blocks on the coroutine path).
pub type CpuRegionsFn = unsafe extern "C" fn(
    launch: *const CpuLaunch,
    params: *const *mut c_void,
    begin: u64,
    end: u64,
) -> u32;

/// Symbol prefix of [`CpuRegionsFn`] entry points.
pub const CPU_REGIONS_PREFIX: &str = "__offload_cpu_regions_";
/// Symbol prefix of the note a CPU image carries for a kernel with barriers that runs on the
/// coroutine path: the reason, as UTF-8 bytes, which the build reports.
pub const CPU_NOTE_PREFIX: &str = "__offload_cpu_note_";
/// Symbol prefix of [`CpuRunFn`] entry points.
pub const CPU_RUN_PREFIX: &str = "__offload_cpu_run_";
/// Symbol prefix of [`CpuThreadFn`] entry points.
pub const CPU_THREAD_PREFIX: &str = "__offload_cpu_thread_";
/// Symbol of the `u32` CPU ABI version every CPU image exports.
pub const CPU_ABI_SYMBOL: &str = "__offload_cpu_abi_version";
/// The CPU entry-point ABI described by this module.
pub const CPU_ABI_VERSION: u32 = 4;
/// Lanes of a warp on the CPU device.
pub const CPU_WARP_SIZE: u32 = 32;
/// Bytes of dynamic shared memory a block can use on the CPU device.
pub const CPU_DYNAMIC_SHARED_CAPACITY: usize = super::MAX_SHARED_BYTES;
/// Bytes of static shared memory a block can use on the CPU device.
pub const CPU_SHARED_CAPACITY: usize = super::MAX_STATIC_SHARED_BYTES;
