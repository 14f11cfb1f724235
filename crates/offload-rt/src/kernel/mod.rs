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
//! (`(shuffle::Shuffle, value, arg)`), `ballot`, `warp_any`, `warp_all` (see [`warp`]), and the
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
#[cfg(all(
    offload_device,
    not(any(target_arch = "nvptx64", target_arch = "amdgpu"))
))]
pub mod cpu_regions;
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
#[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod panic_claim;

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
mod dim;
mod features;
mod grid;
#[cfg(feature = "half")]
pub mod half;
mod limits;
pub mod math;
#[cfg(feature = "half")]
pub mod matrix;
#[cfg(feature = "half")]
mod matrix_loads;
pub mod mbarrier;
#[cfg(feature = "half")]
mod mma_input;
pub mod pipeline;
mod print;
mod shuffle;
mod slice;
mod tensor_map;
mod thread;
pub mod tma;
pub mod warp;
#[cfg(feature = "half")]
pub mod wgmma;

#[cfg(feature = "bytemuck")]
pub use abi::Pod;
#[doc(hidden)]
pub use abi::first_invalid;
pub use abi::{DeviceCopy, KernelScalar};
pub use dim::Dim3;
#[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
use features::hopper_only;
pub use features::{has_lds_dma, has_stmatrix, has_tma, has_wgmma};
pub use grid::Grid;
pub use limits::{
    DYNAMIC_SHARED_ALIGN, MAX_CONSTANT_BYTES, MAX_SHARED_BYTES, MAX_STATIC_SHARED_BYTES,
};
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
pub use thread::{
    Strided, block_dim, block_dim_x, block_dim_y, block_dim_z, block_idx, block_idx_x, block_idx_y,
    block_idx_z, block_size, block_stride_x, dynamic_shared, global_idx_x, global_idx_y,
    global_idx_z, grid_dim, grid_dim_x, grid_dim_y, grid_dim_z, grid_stride_x, sync_threads,
    thread_idx, thread_idx_x, thread_idx_y, thread_idx_z, thread_rank, trap,
};
pub use warp::{
    WarpAdd, WarpValue, ballot, ballot_masked, lane_id, shuffle_down, shuffle_down_masked,
    shuffle_idx, shuffle_idx_masked, shuffle_up, shuffle_up_masked, shuffle_xor,
    shuffle_xor_masked, sync_warp, sync_warp_masked, warp_all, warp_all_masked, warp_any,
    warp_any_masked, warp_id, warp_max, warp_min, warp_size, warp_sum, warps_per_block,
};

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
