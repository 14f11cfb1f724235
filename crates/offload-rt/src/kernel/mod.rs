//! The device API: what kernels call, on every target. Needs only `core`.
//!
//! The same kernel source builds for the host CPU device, `nvptx64-nvidia-cuda` and
//! `amdgcn-amd-amdhsa`; everything target-specific is in one file per target, chosen here:
//!
//! | target | file |
//! |---|---|
//! | host CPU device (`--cfg offload_device` on x86_64/aarch64) | `cpu.rs` |
//! | `nvptx64` | `nvptx.rs` |
//! | `amdgpu` | `amdgpu.rs` |
//!
//! Each target file provides, with these exact names and types:
//! `thread_idx_{x,y,z}`, `block_idx_{x,y,z}`, `block_dim_{x,y,z}`, `grid_dim_{x,y,z}`
//! (all `fn() -> u32`, `#[inline(always)]`), `sync_threads()` (a block-wide barrier that also
//! orders memory, like `__syncthreads`), `trap() -> !` (abort the launch; used by the panic
//! handler), `dynamic_shared() -> *mut u8`, the warp primitives `lane_id`, `warp_size`, `shuffle_u32` / `shuffle_u64`
//! (`(warp::Shuffle, value, arg)`), `ballot`, `warp_any`, `warp_all` (see [`warp`]), and the
//! expansion of [`shared_array!`](crate::shared_array!) for its target (see there).
//!
//! Built for the host (without `offload_device`), the API describes a launch of a single
//! thread: indices 0, dimensions 1, `sync_threads()` returns at once. It exists there so
//! kernel bodies type-check with the host crate on stable Rust; kernels never run that way.
//!
//! # Atomics
//!
//! Use `core::sync::atomic` on device memory and shared memory alike, through
//! `AtomicU32::from_ptr` (and its siblings):
//!
//! ```ignore
//! use core::sync::atomic::{AtomicU64, Ordering};
//! // SAFETY: `out` points at a live, aligned u64 that is only accessed atomically during
//! // the launch.
//! let total = unsafe { AtomicU64::from_ptr(out) };
//! total.fetch_add(partial, Ordering::Relaxed);
//! ```
//!
//! # Warp operations
//!
//! [`warp`]: lane ids, shuffles, votes and warp reductions, the same on every device (the CPU
//! device runs warps of 32 lanes).
//!
//! # Math
//!
//! [`math`]: `sqrt`, `rsqrt`, `fma`, `exp`, `log`, `sin`, `cos`, `pow`, `floor`, `abs`, `min`,
//! `max` on `f32` and `f64`, with the same bits on every device.
//!
//! # Half precision
//!
//! With the `half` feature, `kernel::half`: the `half` crate's `f16` and `bf16` as buffer elements
//! and kernel parameters, and conversions to and from `f32` that GPUs run as instructions.
//!
//! # Printing and panics
//!
//! [`device_println!`](crate::device_println) and [`device_print!`](crate::device_print): Rust's
//! format syntax over scalar arguments ([`Printable`]); the host formats and prints the lines
//! after the launch, on every device. A panic (`panic!`, a failed `assert!`, a bad index) ends
//! the launch with `Error::KernelPanic`: its message, file, line, block and thread.
//!
//! # Shared memory
//!
//! [`shared_array!`](crate::shared_array!) declares a per-block array: every thread of a block sees the same
//! memory, each block its own. Its contents are undefined when a block starts.

#[cfg(all(
    offload_device,
    not(any(target_arch = "nvptx64", target_arch = "amdgpu"))
))]
pub mod cpu;
#[cfg(not(offload_device))]
mod host_stubs;

#[cfg(all(offload_device, target_arch = "amdgpu"))]
mod amdgpu;
#[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod gpu_channel;
#[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod gpu_tiles;
#[cfg(all(offload_device, target_arch = "nvptx64"))]
mod nvptx;

#[cfg(all(offload_device, target_arch = "amdgpu"))]
use amdgpu as arch;
#[cfg(all(
    offload_device,
    not(any(target_arch = "nvptx64", target_arch = "amdgpu"))
))]
use cpu as arch;
#[cfg(not(offload_device))]
use host_stubs as arch;
#[cfg(all(offload_device, target_arch = "nvptx64"))]
use nvptx as arch;

pub mod abi;
pub mod cluster;
mod grid;
#[cfg(feature = "half")]
pub mod half;
pub mod math;
#[cfg(feature = "half")]
pub mod matrix;
pub mod mbarrier;
pub mod pipeline;
mod print;
mod slice;
pub mod tma;
pub mod warp;
#[cfg(feature = "half")]
pub mod wgmma;

#[cfg(feature = "bytemuck")]
pub use abi::Pod;
#[doc(hidden)]
pub use abi::first_invalid;
pub use abi::{DeviceCopy, KernelScalar};
pub use grid::Grid;
/// The `#[kernel]` attribute ([`crate::kernel`](macro@crate::kernel)), here too, so that one
/// `use offload_rt::kernel::{kernel, DisjointSlice, …}` brings the attribute with the device
/// API: `use offload_rt::kernel::{self, …}` imports the module alone, and the attribute of the
/// same name stays out of scope.
pub use offload_macros::kernel;
/// The `#[kernels]` module attribute ([`crate::kernels`](macro@crate::kernels)), here too.
pub use offload_macros::kernels;
pub use print::Printable;
#[doc(hidden)]
pub use slice::SliceParam;
pub use slice::{DisjointSlice, RowIndex, Rows, grid_thread_rank};
pub use warp::{
    WarpAdd, WarpValue, ballot, ballot_masked, lane_id, shuffle_down, shuffle_down_masked,
    shuffle_idx, shuffle_idx_masked, shuffle_up, shuffle_up_masked, shuffle_xor,
    shuffle_xor_masked, sync_warp, sync_warp_masked, warp_all, warp_all_masked, warp_any,
    warp_any_masked, warp_id, warp_max, warp_min, warp_size, warp_sum, warps_per_block,
};

/// Bytes of static shared memory ([`shared_array!`](crate::shared_array!)) one kernel may use, the same on every
/// device: CUDA refuses more in static declarations (`ptxas`), AMD GPUs have 64 KiB of LDS
/// per workgroup, and the CPU device's per-block arena is this size. The device link refuses
/// a GPU kernel over it, naming the kernel; on the CPU device the launch fails.
pub const MAX_STATIC_SHARED_BYTES: usize = offload_format::abi::MAX_STATIC_SHARED_BYTES;

/// Bytes of shared memory, static ([`shared_array!`](crate::shared_array!)) and dynamic ([`dynamic_shared`]) together,
/// that one block may use on every device: an AMD GPU's 64 KiB of LDS per workgroup (NVIDIA's
/// sm_70 and later give more, once the CUDA backend opts the kernel in above 48 KiB). The CPU
/// device refuses a launch over it with `Error::SharedMemoryLimit`, naming both figures.
pub const MAX_SHARED_BYTES: usize = offload_format::abi::MAX_SHARED_BYTES;

/// Alignment of [`dynamic_shared`]'s memory on every device.
pub const DYNAMIC_SHARED_ALIGN: usize = 16;

/// The block's dynamic shared memory (CUDA's `extern __shared__`): the
/// `LaunchConfig::shared_mem_bytes` bytes the launch asked for, shared by the block's threads,
/// [`DYNAMIC_SHARED_ALIGN`]-aligned, contents undefined when the block starts. Every call
/// returns the same address within a block; reading or writing past the launch's size is
/// undefined behaviour. `T` must be at most 16-aligned (checked at compile time).
#[inline(always)]
pub fn dynamic_shared<T: DeviceCopy>() -> *mut T {
    const {
        assert!(
            core::mem::align_of::<T>() <= DYNAMIC_SHARED_ALIGN,
            "dynamic_shared::<T>: T is aligned to more than the 16 bytes dynamic shared memory has"
        )
    };
    arch::dynamic_shared().cast()
}

/// Three extents or indices, as CUDA's `dim3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Dim3 {
    /// The fastest-varying component.
    pub x: u32,
    /// The second component.
    pub y: u32,
    /// The slowest-varying component.
    pub z: u32,
}

macro_rules! forward {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[inline(always)]
        pub fn $name() -> u32 {
            arch::$name()
        }
    )*};
}

forward! {
    /// Index of the calling thread in its block, x component (`threadIdx.x`).
    thread_idx_x;
    /// Index of the calling thread in its block, y component.
    thread_idx_y;
    /// Index of the calling thread in its block, z component.
    thread_idx_z;
    /// Index of the calling thread's block in the grid, x component (`blockIdx.x`).
    block_idx_x;
    /// Index of the calling thread's block in the grid, y component.
    block_idx_y;
    /// Index of the calling thread's block in the grid, z component.
    block_idx_z;
    /// Threads per block, x component (`blockDim.x`).
    block_dim_x;
    /// Threads per block, y component.
    block_dim_y;
    /// Threads per block, z component.
    block_dim_z;
    /// Blocks in the grid, x component (`gridDim.x`).
    grid_dim_x;
    /// Blocks in the grid, y component.
    grid_dim_y;
    /// Blocks in the grid, z component.
    grid_dim_z;
}

/// `threadIdx`.
#[inline(always)]
pub fn thread_idx() -> Dim3 {
    Dim3 {
        x: thread_idx_x(),
        y: thread_idx_y(),
        z: thread_idx_z(),
    }
}

/// `blockIdx`.
#[inline(always)]
pub fn block_idx() -> Dim3 {
    Dim3 {
        x: block_idx_x(),
        y: block_idx_y(),
        z: block_idx_z(),
    }
}

/// `blockDim`.
#[inline(always)]
pub fn block_dim() -> Dim3 {
    Dim3 {
        x: block_dim_x(),
        y: block_dim_y(),
        z: block_dim_z(),
    }
}

/// `gridDim`.
#[inline(always)]
pub fn grid_dim() -> Dim3 {
    Dim3 {
        x: grid_dim_x(),
        y: grid_dim_y(),
        z: grid_dim_z(),
    }
}

/// Global index in x: `blockIdx.x * blockDim.x + threadIdx.x`, as `usize`. Computed in 32
/// bits, as CUDA C computes it: every backend refuses a launch whose grid extent times block
/// extent passes `u32::MAX` in any dimension (`LaunchConfig::check`), so it cannot overflow.
#[inline(always)]
pub fn global_idx_x() -> usize {
    global_idx(block_idx_x(), block_dim_x(), thread_idx_x())
}

/// Global index in y (see [`global_idx_x`]).
#[inline(always)]
pub fn global_idx_y() -> usize {
    global_idx(block_idx_y(), block_dim_y(), thread_idx_y())
}

/// Global index in z (see [`global_idx_x`]).
#[inline(always)]
pub fn global_idx_z() -> usize {
    global_idx(block_idx_z(), block_dim_z(), thread_idx_z())
}

/// `block * dim + thread` of one dimension, in 32 bits: narrower index arithmetic than
/// `usize`'s, which costs a GPU kernel registers and instructions at every use.
#[inline(always)]
fn global_idx(block: u32, dim: u32, thread: u32) -> usize {
    // SAFETY: `block < grid extent` and `thread < dim`, so `block * dim + thread` is below
    // grid extent times block extent, which the launch rule of every backend keeps within
    // `u32` (`LaunchConfig::check`).
    unsafe { block.unchecked_mul(dim).unchecked_add(thread) as usize }
}

/// The indices `start, start + step, start + 2 * step, …` below `end`: a strided loop (a
/// block- or grid-stride loop) as cheap as C's `for (i = start; i < end; i += step)`, where
/// `(start..end).step_by(step)` first divides to count its steps. A `step` of 0 counts as 1.
/// Indices above `usize::MAX - step` are not reached (no slice is that long): so the next
/// index is one add that cannot overflow, as in C.
///
/// On a GPU the loop counts in 32 bits, as C's `int` loops do, where the compiler can prove
/// that every index fits in `u32`: a start and step as a launch gives them and an `end` of
/// `u32` range (a shared array's length, a `u32` parameter). The 32-bit add saturates, so that
/// the loop ends where `end + step` would not fit (a grid's step near `u32::MAX`); the
/// optimizer drops the saturation where the sum is proven to fit (a block's step). A 64-bit
/// counter costs registers and an instruction at each step; where nothing is proven (an `end`
/// such as a slice's length) the loop counts in `usize`.
/// See [`block_stride_x`] and [`grid_stride_x`].
#[derive(Debug, Clone)]
pub struct Strided {
    wide: Span<usize>,
    /// The same indices, used instead of `wide` where `counts_in_u32`.
    narrow: Span<u32>,
    /// Every index and `end` are known to fit in `u32` when the kernel is compiled.
    counts_in_u32: bool,
}

/// `next, next + step, …` below `end`.
#[derive(Debug, Clone)]
struct Span<I> {
    next: I,
    end: I,
    step: I,
}

impl Strided {
    /// The indices from `start` below `end`, `step` apart.
    #[inline(always)]
    pub fn new(start: usize, end: usize, step: usize) -> Strided {
        const MAX: usize = u32::MAX as usize;
        let step = step.max(1);
        Strided {
            wide: Span {
                next: start,
                end: end.min(usize::MAX - step),
                step,
            },
            narrow: Span {
                next: start as u32,
                end: end as u32,
                step: step as u32,
            },
            counts_in_u32: known_true(start <= MAX && step <= MAX && end <= MAX),
        }
    }
}

impl Iterator for Strided {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        if self.counts_in_u32 {
            let Span { next, end, step } = &mut self.narrow;
            if *next >= *end {
                return None;
            }
            let i = *next;
            // Saturated, `u32::MAX` is at or past `end`: the loop ends.
            *next = i.saturating_add(*step);
            return Some(i as usize);
        }
        let Span { next, end, step } = &mut self.wide;
        if *next >= *end {
            return None;
        }
        let i = *next;
        // SAFETY: `i < end <= usize::MAX - step`.
        *next = unsafe { i.unchecked_add(*step) };
        Some(i)
    }
}

/// Whether `condition` holds and the compiler knows it: true only where it folds to a
/// constant when the kernel is compiled, so a branch on it costs nothing either way.
#[inline(always)]
fn known_true(condition: bool) -> bool {
    #[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    {
        core::intrinsics::is_val_statically_known(condition) && condition
    }
    #[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
    {
        let _ = condition;
        false
    }
}

/// The calling thread's share of `0..n` in a block-stride loop: `thread_idx_x()`, then every
/// `block_dim_x()`-th index below `n` (how a block clears or flushes a shared array).
#[inline(always)]
pub fn block_stride_x(n: usize) -> Strided {
    Strided::new(thread_idx_x() as usize, n, block_dim_x() as usize)
}

/// The calling thread's share of `0..n` in a grid-stride loop: [`global_idx_x`], then every
/// `grid_dim_x() * block_dim_x()`-th index below `n` (a 1-D launch of any size covers `n`).
#[inline(always)]
pub fn grid_stride_x(n: usize) -> Strided {
    // SAFETY: the launch rule of every backend keeps grid extent times block extent within
    // `u32` (`LaunchConfig::check`).
    let step = unsafe { grid_dim_x().unchecked_mul(block_dim_x()) };
    Strided::new(global_idx_x(), n, step as usize)
}

/// Linear index of the calling thread within its block: `x + y * dim.x + z * dim.x * dim.y`.
#[inline(always)]
pub fn thread_rank() -> u32 {
    thread_idx_x() + block_dim_x() * (thread_idx_y() + block_dim_y() * thread_idx_z())
}

/// Threads per block in total.
#[inline(always)]
pub fn block_size() -> u32 {
    block_dim_x() * block_dim_y() * block_dim_z()
}

/// Whether this image's device has the tensor memory accelerator, `mbarrier`'s byte counts and
/// thread-block clusters ([`tma`], [`mbarrier`], [`cluster`]: NVIDIA sm_90 and later). A
/// constant of each image, set by the device link: one kernel source branches on it for its
/// Hopper path, and the other images keep only the other branch (the device link refuses a
/// kernel whose image still reaches these units).
#[inline(always)]
pub fn has_tma() -> bool {
    features::tma()
}

/// Whether this image's device has Hopper's warpgroup matrix multiplies and `setmaxnreg`
/// (`kernel::wgmma`, with the `half` feature: NVIDIA `sm_90a`, an `--offload-arch sm_90a`
/// image); a constant of each image, as [`has_tma`].
#[inline(always)]
pub fn has_wgmma() -> bool {
    features::wgmma()
}

#[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod features {
    unsafe extern "C" {
        // Defined by the device link as constants of the image.
        #[link_name = offload_format::abi_name!(HAS_TMA)]
        fn __offload_has_tma() -> bool;
        #[link_name = offload_format::abi_name!(HAS_WGMMA)]
        fn __offload_has_wgmma() -> bool;
    }

    #[inline(always)]
    pub(super) fn tma() -> bool {
        // SAFETY: a constant of the image.
        unsafe { __offload_has_tma() }
    }

    #[inline(always)]
    pub(super) fn wgmma() -> bool {
        // SAFETY: a constant of the image.
        unsafe { __offload_has_wgmma() }
    }
}

#[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
mod features {
    #[inline(always)]
    pub(super) fn tma() -> bool {
        false
    }

    #[inline(always)]
    pub(super) fn wgmma() -> bool {
        false
    }
}

/// The CPU device's (and host builds') answer to a Hopper unit: the kernel stops with a panic
/// naming it, which its launch reports.
#[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
#[cold]
#[track_caller]
fn hopper_only(feature: &str) -> ! {
    panic!(
        "{feature} needs an NVIDIA GPU of sm_90 or later (wgmma: sm_90a); this device has none \
         (branch on kernel::has_tma() / has_wgmma())"
    )
}

/// Block-wide barrier (`__syncthreads()`): returns once every thread of the block has called
/// it; memory written by the block before the barrier is visible to the block after it.
/// Every thread of a block must reach the same barriers.
#[inline(always)]
pub fn sync_threads() {
    arch::sync_threads()
}

/// Aborts the launch.
#[inline(always)]
pub fn trap() -> ! {
    arch::trap()
}

#[doc(hidden)]
pub mod __private {
    #[cfg(all(
        offload_device,
        not(any(target_arch = "nvptx64", target_arch = "amdgpu"))
    ))]
    pub use super::cpu::{generic_shared_tile, shared_slot};
    #[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    pub use super::gpu_tiles::generic_shared_tile;
    #[cfg(not(offload_device))]
    pub use super::host_stubs::{generic_shared_tile, shared_slot};
    pub use super::print::{print, print_arg};

    /// Implemented by [`Grid`](super::Grid) alone: `#[kernel]` checks that a first parameter
    /// it takes for the grid of a cooperative launch is this crate's.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not `offload_rt::kernel::Grid`, which a kernel parameter of a type named `Grid` must be: the grid of a cooperative launch",
        label = "not `offload_rt::kernel::Grid`"
    )]
    pub trait IsGrid {}
    impl IsGrid for super::Grid {}
}

/// Bytes of constant memory ([`constant!`](crate::constant!)) a kernel crate may use, its
/// statics together: an NVIDIA module's constant bank for user data. The device link refuses
/// an NVIDIA image over it; one static over it does not compile.
pub const MAX_CONSTANT_BYTES: usize = offload_format::abi::MAX_CONSTANT_BYTES;

/// Statics in the device's constant memory, CUDA's `__constant__`: read-only tables every
/// thread of every launch reads, at compile-time values.
///
/// ```ignore
/// offload_rt::constant! {
///     /// A 5-tap binomial filter.
///     pub static WEIGHTS: [f32; 5] = [0.0625, 0.25, 0.375, 0.25, 0.0625];
/// }
/// ```
///
/// Each is an ordinary `static` of the kernel crate (read it as one), of a `DeviceCopy` type.
/// On NVIDIA GPUs it lives in the module's constant bank (`.const`, `ld.const`): one read
/// serves every thread of a warp that reads the same element. On AMD GPUs it is constant
/// memory (address space 4): a read every lane of a wavefront makes alike is one scalar load.
/// On the CPU device it is a plain static. Their bytes together may not exceed
/// [`MAX_CONSTANT_BYTES`] (the device link checks it for NVIDIA images). A table threads index
/// by their own values reads better as a buffer (`&[T]`): constant memory serves the threads
/// of a warp one distinct address at a time.
#[macro_export]
macro_rules! constant {
    ($($(#[$meta:meta])* $vis:vis static $name:ident: $ty:ty = $value:expr;)+) => {$(
        const _: () = {
            fn constant_is_device_copy<T: $crate::DeviceCopy>() {}
            let _ = constant_is_device_copy::<$ty>;
            assert!(
                ::core::mem::size_of::<$ty>() <= $crate::kernel::MAX_CONSTANT_BYTES,
                "constant!: more constant memory than an NVIDIA module has \
                 (offload_rt::kernel::MAX_CONSTANT_BYTES)"
            );
        };
        $crate::__for_target! {
            cpu {
                $(#[$meta])* $vis static $name: $ty = $value;
            }
            gpu {
                $(#[$meta])*
                #[unsafe(link_section = $crate::__private::abi_name!(CONSTANT_SECTION))]
                $vis static $name: $ty = $value;
            }
            host {
                $(#[$meta])* $vis static $name: $ty = $value;
            }
        }
    )+};
}

/// A per-block array in shared memory: `let tile: *mut u32 = shared_array!(u32, 256);`.
///
/// Evaluates to a `*mut T` to `N` elements (`N` a constant) that all threads of the block
/// share; its contents are undefined at block start. An array over
/// [`MAX_STATIC_SHARED_BYTES`] does not compile; the device link refuses a GPU kernel whose
/// arrays together exceed it. Each invocation site is its own array.
/// On GPUs the array is a static in the link section `.offload.shared`, which the device link
/// moves to the shared address space (`.shared` / LDS, address space 3); on the CPU device it
/// is a slot of the per-block arena of the worker thread running the block.
#[macro_export]
macro_rules! shared_array {
    ($ty:ty, $len:expr) => {{
        // An item, not an inline const: items are evaluated by `cargo check` and host builds too.
        const _: () = assert!(
            ::core::mem::size_of::<[$ty; $len]>() <= $crate::kernel::MAX_STATIC_SHARED_BYTES,
            "shared_array!: more static shared memory than the 48 KiB every device supports \
             (offload_rt::kernel::MAX_STATIC_SHARED_BYTES)"
        );
        let ptr: *mut $ty = $crate::__for_target! {
            cpu {{
                static KEY: u8 = 0;
                $crate::kernel::__private::shared_slot(
                    &raw const KEY as usize,
                    ::core::mem::size_of::<[$ty; $len]>(),
                    ::core::mem::align_of::<$ty>(),
                )
                .cast::<$ty>()
            }}
            gpu {{
                #[unsafe(link_section = $crate::__private::abi_name!(SHARED_SECTION))]
                static mut SHARED: ::core::mem::MaybeUninit<[$ty; $len]> =
                    ::core::mem::MaybeUninit::uninit();
                (&raw mut SHARED).cast::<$ty>()
            }}
            host {{
                $crate::kernel::__private::shared_slot(
                    0,
                    ::core::mem::size_of::<[$ty; $len]>(),
                    ::core::mem::align_of::<$ty>(),
                )
                .cast::<$ty>()
            }}
        };
        ptr
    }};
}

/// [`shared_array!`] for a generic function that is not a kernel, whose element type or length
/// is a parameter of the function: `generic_shared_array!(T, BLOCK)` (a Rust `static` cannot
/// name the parameters of the function around it, so `shared_array!` does not compile there).
///
/// Evaluates to a `*mut T` to `N` elements shared by the block's threads, one array for each
/// invocation site and each instantiation of the function (as a `__shared__` array in a C++
/// template), its contents undefined at block start. An array over
/// [`MAX_STATIC_SHARED_BYTES`] fails the build of the instantiation (`cargo check` does not
/// instantiate); the device link refuses a GPU kernel whose arrays together exceed it. On GPUs
/// each site is a call the device link replaces with an array in the shared address space; on
/// the CPU device it is a slot of the block's arena, as for `shared_array!`.
///
/// ```ignore
/// fn block_sum<T: Copy + core::ops::Add<Output = T>, const BLOCK: usize>(v: T) -> T {
///     let tile: *mut T = generic_shared_array!(T, BLOCK);
///     // ...
/// }
/// ```
#[macro_export]
macro_rules! generic_shared_array {
    ($ty:ty, $len:expr) => {{
        const {
            assert!(
                ::core::mem::size_of::<[$ty; $len]>() <= $crate::kernel::MAX_STATIC_SHARED_BYTES,
                "generic_shared_array!: more static shared memory than the 48 KiB every device \
                 supports (offload_rt::kernel::MAX_STATIC_SHARED_BYTES)"
            )
        };
        static SITE: u8 = 0;
        let ptr: *mut $ty = $crate::kernel::__private::generic_shared_tile(
            &SITE,
            ::core::any::type_name::<[$ty; $len]>(),
            ::core::mem::size_of::<[$ty; $len]>(),
            ::core::mem::align_of::<$ty>(),
        )
        .cast::<$ty>();
        ptr
    }};
}

/// A kernel's panic: on the CPU device a report of the message and location to the runtime,
/// which fails the launch with them; on GPUs the report is written to the channel the runtime
/// mapped, then the thread traps, which ends the launch.
#[cfg(all(offload_device, not(feature = "host")))]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    {
        cpu::panic(info)
    }
    #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
    {
        gpu_channel::panic(info)
    }
}

#[cfg(test)]
mod strided_tests {
    use super::Strided;

    #[test]
    fn strided_indices_stop_below_the_end() {
        assert_eq!(Strided::new(3, 20, 5).collect::<Vec<_>>(), [3, 8, 13, 18]);
        assert_eq!(Strided::new(7, 7, 1).count(), 0);
        assert_eq!(Strided::new(9, 4, 2).count(), 0);
        // A step of 0 counts as 1; near the end of `usize` the indices stop at
        // `usize::MAX - step`, never wrap.
        assert_eq!(Strided::new(0, 3, 0).collect::<Vec<_>>(), [0, 1, 2]);
        let near_end = usize::MAX - 10;
        assert_eq!(
            Strided::new(near_end, usize::MAX, 4).collect::<Vec<_>>(),
            [near_end, near_end + 4]
        );
        assert_eq!(Strided::new(1, usize::MAX, usize::MAX).count(), 0);
    }

    /// The 32-bit count a GPU kernel takes where it is proven gives the same indices.
    #[test]
    fn counting_in_u32_gives_the_same_indices() {
        let in_u32 = |start, end, step| {
            let mut strided = Strided::new(start, end, step);
            strided.counts_in_u32 = true;
            strided.collect::<Vec<_>>()
        };
        for (start, end, step) in [(3, 20, 5), (7, 7, 1), (9, 4, 2), (0, 3, 0), (5, 64, 1024)] {
            assert_eq!(
                in_u32(start, end, step),
                Strided::new(start, end, step).collect::<Vec<_>>(),
                "{start}..{end} by {step}"
            );
        }
        // A step near `u32::MAX` (a grid's) with an end of `u32` range: the add saturates and
        // the loop ends where a 32-bit add would have wrapped to a small index.
        let max = u32::MAX as usize;
        for (start, end, step) in [
            (10, max, max - 5),
            (0, max, 1 << 31),
            (max - 1500, max, 1024),
            (max - 1, max, max),
        ] {
            assert_eq!(
                in_u32(start, end, step),
                Strided::new(start, end, step).collect::<Vec<_>>(),
                "{start}..{end} by {step}"
            );
        }
        assert_eq!(in_u32(10, max, max - 5), [10]);
        assert_eq!(in_u32(0, max, 1 << 31), [0, 1 << 31]);
    }
}
