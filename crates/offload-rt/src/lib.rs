//! The cargo-offload runtime.
//!
//! - [`kernel`](mod@kernel) (always, `no_std`): what kernels call on every target: thread and block
//!   indices, `sync_threads()`, shared memory, atomics, warp operations, math.
//! - With the `host` feature (default): [`Device`] (the CPU device; CUDA and HIP GPUs),
//!   [`DeviceBuffer`], [`LaunchConfig`] and the typed kernel handles made by
//!   [`#[kernel]`](macro@kernel) and, for CUDA and HIP kernels built by `offload-build`, by
//!   [`extern_kernels!`], over the device images the program registers at start-up.
//! - [`collective`] (with `host`; on the CPU device with `mpi`): all-reduce, broadcast,
//!   all-gather, reduce-scatter and send/receive between a program's ranks, on NCCL, RCCL or
//!   MPI.
//!
//! # Environment
//!
//! - `OFFLOAD_DEVICE`: the device [`Device::best`] opens: `cpu`, `cuda[:N]` or `hip[:N]`.
//! - `OFFLOAD_CPU_THREADS`: worker threads of the CPU device (default: available parallelism).
//! - `OFFLOAD_CPU_SPIN_US`: microseconds the CPU device's threads spin between launches before
//!   they sleep (default 100; 0 sleeps at once).
//! - `OFFLOAD_CPU_BARRIERS=coroutines`: run kernels with barriers on the CPU device with one
//!   coroutine per GPU thread instead of as loops between their barriers.
//! - `OFFLOAD_KERNEL_STACK`: the stack of each GPU thread (bytes, or with a `K`, `M` or `G`
//!   suffix) on every device; on the CPU device an overflow is `Error::KernelStackOverflow`.
//! - `OFFLOAD_CPU_IMAGE_DIR`: a directory where the CPU device writes each image it loads (and
//!   loads it from there), so that a debugger finds the kernels' symbols and lines; `cargo
//!   offload run --debugger` sets it.
//! - `OFFLOAD_CPU_LEVEL`: the highest level of CPU image the CPU device runs (`host`,
//!   `x86-64-v2`, `x86-64-v3`, `x86-64-v4`); unset, the highest level the CPU has.
//! - `OFFLOAD_PROFILE`: a file where the CPU device's launches and copies are recorded, timed,
//!   written when the program exits ([`profile`]); `cargo offload profile` sets it.
//! - `OFFLOAD_LOG=1`: log lines on stderr saying why a GPU backend was not used, which image
//!   was loaded (on the CPU device, which level and why), and how the CPU device runs each
//!   kernel with barriers.
//! - `OFFLOAD_CUDA_LIBRARY`, `OFFLOAD_HIP_LIBRARY`: the driver library to open instead of
//!   `libcuda.so.1` / `libamdhip64.so`.
//! - `OFFLOAD_NCCL_LIBRARY`, `OFFLOAD_RCCL_LIBRARY`: the collectives library to open instead
//!   of `libnccl.so.2` / `librccl.so.1` ([`collective`]).
//! - `OFFLOAD_GPU_TESTS=1`, `OFFLOAD_HIP_TESTS=1` (tests only): run the GPU test suites.
#![deny(missing_docs)]
#![cfg_attr(not(feature = "host"), no_std)]
// The CPU image is no_std, without `thread_local!`; offload-build allows this one attribute to
// offload-rt alone on a stable compiler (`RUSTC_BOOTSTRAP=offload_rt`).
#![cfg_attr(
    all(
        offload_device,
        not(any(target_arch = "nvptx64", target_arch = "amdgpu"))
    ),
    feature(thread_local)
)]
#![cfg_attr(
    all(offload_device, target_arch = "nvptx64"),
    feature(stdarch_nvptx, core_intrinsics, link_llvm_intrinsics, abi_unadjusted),
    allow(internal_features)
)]
#![cfg_attr(
    all(offload_device, target_arch = "amdgpu"),
    feature(stdarch_amdgpu, core_intrinsics, link_llvm_intrinsics, abi_unadjusted),
    allow(internal_features)
)]
#![cfg_attr(
    all(
        feature = "half",
        offload_device,
        any(target_arch = "nvptx64", target_arch = "amdgpu")
    ),
    feature(f16)
)]

pub mod kernel;

pub use offload_macros::{
    DeviceCopy, device_print, device_println, extern_kernels, kernel, kernels,
};

#[cfg(feature = "host")]
mod backend;
#[cfg(feature = "host")]
mod error;
#[cfg(feature = "host")]
mod host;
#[cfg(feature = "host")]
mod launch;
#[cfg(feature = "host")]
mod os_thread;
#[cfg(feature = "host")]
mod registry;
#[cfg(feature = "host")]
mod select;

#[cfg(feature = "host")]
mod print;

#[cfg(feature = "host")]
pub use backend::{DeviceKind, DevicePtr, RawDevice};
#[cfg(feature = "host")]
pub use error::{Error, KernelPanicReport, Result};
#[cfg(feature = "host")]
pub use host::buffer::DeviceBuffer;
#[cfg(feature = "host")]
pub use host::collective;
#[cfg(feature = "host")]
pub use host::profile;
#[cfg(feature = "host")]
pub use host::stream::{DeviceEntry, Event, Graph, PinnedBuffer, Stream};
#[cfg(feature = "host")]
pub use host::tensor_map::{TensorMap, TensorMapElement, TensorMapLayout, TensorMapSwizzle};
#[cfg(feature = "host")]
pub use host::{Device, LaunchReport};
#[cfg(feature = "host")]
pub use launch::{
    ElementCount, LaunchConfig, LaunchShape, MAX_BLOCK_DIM, MAX_CLUSTER_SIZE, MAX_GRID_DIM,
    MAX_PORTABLE_CLUSTER_SIZE, MAX_THREADS_PER_BLOCK,
};
/// The MPI bindings the collectives use (feature `mpi`): `mpi::initialize()` starts a
/// program's ranks.
#[cfg(feature = "mpi")]
pub use mpi;
#[cfg(feature = "host")]
pub use print::{PrintSink, set_print_sink};
#[cfg(feature = "host")]
pub use registry::ImageInfo;

/// The runtime's internals: backends, drivers, the image registry and image selection.
///
/// Not an API and under no semver promise: only this crate's tests, benchmarks and examples,
/// `cargo-offload` and the workspace's fuzz targets use it, and it changes with them.
#[cfg(feature = "host")]
#[doc(hidden)]
pub mod __internal {
    pub use crate::backend::cpu::{BarrierMode, CpuBackend};
    pub use crate::backend::{
        Backend, KernelHandle, Module, NativeArchs, cuda, hip, image, native_archs,
    };
    pub use crate::launch::LaunchArgs;
    pub use crate::registry::{
        __offload_register_lib, __offload_unregister_lib, KernelEntry, OFFLOAD_DESCRIPTOR_MAGIC,
        OFFLOAD_DESCRIPTOR_VERSION, OffloadDescriptor, RegisteredImage, inventory, kernel_entry,
        modules_listing, register_bundle, registered_count, with_module_images,
    };
    pub use crate::select::{
        DeviceTarget, ImageDescriptor, NoCompatibleImage, Selection, select_image,
    };
}

#[cfg(feature = "bytemuck")]
pub use kernel::Pod;
pub use kernel::{DeviceCopy, KernelScalar};

/// Support for the code `#[kernel]` generates; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use core::ffi::c_void;
    pub use offload_format::abi_name;

    pub use crate::kernel::abi::CpuLaunch;
    #[cfg(all(
        offload_device,
        not(any(target_arch = "nvptx64", target_arch = "amdgpu"))
    ))]
    pub use crate::kernel::cpu::{
        block_atomic, region_barrier, region_warp_op, run_blocks, run_thread,
    };
    #[cfg(all(
        offload_device,
        not(any(target_arch = "nvptx64", target_arch = "amdgpu"))
    ))]
    pub use crate::kernel::cpu_regions::{
        RegionThread, WarpExchange, WarpSlot, begin_region_block, block_stride_trips,
        enter_regions, for_each_thread, for_each_thread_in, for_each_thread_span,
        grid_stride_trips, guard_span, lane_read, lane_write, lanes, lanes_fit, thread_range_and,
        thread_range_eq, thread_range_lt, thread_ranges_miss, uniform, warp_butterfly,
        warp_exchange, warp_put, warp_put_predicate, warp_sum_tree, warp_take, warp_take_bool,
        warp_take_mask,
    };
    #[cfg(all(
        offload_device,
        not(any(target_arch = "nvptx64", target_arch = "amdgpu"))
    ))]
    pub use crate::kernel::warp::{Shuffle, warp_max_step, warp_min_step, warp_sum_step};

    /// How a GPU entry point takes a by-value parameter: itself on NVIDIA (rustc passes
    /// structs `byval`, the parameter's bytes), a reference on AMDGPU, which the AMD device
    /// link turns into a `byref` kernel argument (the bytes in the kernel argument segment),
    /// since rustc would pass a struct there as a pointer to a copy or as split scalars.
    #[cfg(all(offload_device, target_arch = "amdgpu"))]
    pub type GpuParam<T> = &'static T;
    /// See the AMDGPU definition.
    #[cfg(not(all(offload_device, target_arch = "amdgpu")))]
    pub type GpuParam<T> = T;

    pub use crate::kernel::SliceParam;
    #[cfg(feature = "host")]
    pub use crate::launch::LaunchArgs;

    /// The `Grid` a cooperative kernel's typed launch passes, replaced by the runtime's.
    pub const GRID_PLACEHOLDER: crate::kernel::Grid = crate::kernel::Grid::PLACEHOLDER;

    /// How a tuple parameter crosses the launch: its elements in a `#[repr(C)]` struct
    /// ([`Tuple1`] to [`Tuple12`]), whose layout the host and every device agree on, where a
    /// tuple's own layout is each compiler's choice (the host and the device builds may be
    /// built by different ones).
    pub trait TupleParam: Copy {
        /// The `#[repr(C)]` struct of the elements, in order.
        type Abi: Copy;
        /// The tuple as the launch passes it.
        fn into_abi(self) -> Self::Abi;
        /// The tuple the kernel gets.
        fn from_abi(abi: Self::Abi) -> Self;
    }

    macro_rules! tuple_params {
        ($($abi:ident($($t:ident $i:tt),+);)*) => {$(
            /// A tuple parameter's launch ABI value (see [`TupleParam`]).
            #[repr(C)]
            #[derive(Debug, Clone, Copy)]
            pub struct $abi<$($t),+>($(pub $t),+);

            impl<$($t: Copy),+> TupleParam for ($($t,)+) {
                type Abi = $abi<$($t),+>;
                #[inline(always)]
                fn into_abi(self) -> Self::Abi {
                    $abi($(self.$i),+)
                }
                #[inline(always)]
                fn from_abi(abi: Self::Abi) -> Self {
                    ($(abi.$i,)+)
                }
            }
        )*};
    }

    tuple_params! {
        Tuple1(A 0);
        Tuple2(A 0, B 1);
        Tuple3(A 0, B 1, C 2);
        Tuple4(A 0, B 1, C 2, D 3);
        Tuple5(A 0, B 1, C 2, D 3, E 4);
        Tuple6(A 0, B 1, C 2, D 3, E 4, F 5);
        Tuple7(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
        Tuple8(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
        Tuple9(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
        Tuple10(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
        Tuple11(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
        Tuple12(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);
    }

    /// The launch ABI value of a slice parameter over a buffer at `ptr` of `len` elements:
    /// never a null address (an empty buffer's is `align_of::<T>()`, as Rust's empty
    /// slices'), so kernels need no test of their own.
    #[cfg(feature = "host")]
    #[inline]
    pub fn slice_param<T>(ptr: crate::DevicePtr, len: usize) -> SliceParam<T> {
        const { assert!(core::mem::size_of::<SliceParam<u8>>() == 16) };
        let address = match ptr.0 {
            0 => core::mem::align_of::<T>(),
            address => address as usize,
        };
        SliceParam {
            ptr: core::ptr::without_provenance_mut(address),
            len,
        }
    }

    /// A `#[len(..)]` value as a length; a negative or too large one needs more than any
    /// buffer has.
    #[cfg(feature = "host")]
    #[inline]
    pub fn needed_len<N: TryInto<usize>>(n: N) -> usize {
        n.try_into().unwrap_or(usize::MAX)
    }

    /// [`Error::BufferTooShort`](crate::Error::BufferTooShort) when argument `index` has fewer
    /// elements than its `#[len(..)]`.
    #[cfg(feature = "host")]
    pub fn check_len(
        kernel: &'static str,
        param: &'static str,
        index: usize,
        len: usize,
        needed: usize,
        needed_expr: &'static str,
    ) -> crate::Result<()> {
        if len >= needed {
            return Ok(());
        }
        Err(crate::Error::BufferTooShort {
            kernel,
            param,
            index,
            len,
            needed,
            needed_expr,
        })
    }

    /// The value of a [`GpuParam`].
    #[inline(always)]
    pub fn gpu_param<T: Copy>(param: GpuParam<T>) -> T {
        #[cfg(all(offload_device, target_arch = "amdgpu"))]
        return *param;
        #[cfg(not(all(offload_device, target_arch = "amdgpu")))]
        return param;
    }
}

/// Expands to the tokens of the target this crate is built for: the CPU device, a GPU, or the
/// host. The choice is made by `cfg`s evaluated here, in offload-rt, so kernel crates need not
/// declare `offload_device` themselves.
#[cfg(all(
    offload_device,
    not(any(target_arch = "nvptx64", target_arch = "amdgpu"))
))]
#[doc(hidden)]
#[macro_export]
macro_rules! __for_target {
    (cpu { $($cpu:tt)* } gpu { $($gpu:tt)* } host { $($host:tt)* }) => { $($cpu)* };
}

#[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
#[doc(hidden)]
#[macro_export]
macro_rules! __for_target {
    (cpu { $($cpu:tt)* } gpu { $($gpu:tt)* } host { $($host:tt)* }) => { $($gpu)* };
}

#[cfg(not(offload_device))]
#[doc(hidden)]
#[macro_export]
macro_rules! __for_target {
    (cpu { $($cpu:tt)* } gpu { $($gpu:tt)* } host { $($host:tt)* }) => { $($host)* };
}

/// Expands to the CPU device's items for one form of barriers: `ir` in an image built for the
/// IR form (the CPU link forms the regions from each kernel's body function), `source` in one
/// built without it (the `#[kernel]` macro's own region form and coroutine notes).
#[cfg(offload_cpu_ir)]
#[doc(hidden)]
#[macro_export]
macro_rules! __cpu_barriers {
    (ir { $($ir:tt)* } source { $($source:tt)* }) => { $($ir)* };
}

/// As the other `__cpu_barriers!`, in an image built without the IR form.
#[cfg(not(offload_cpu_ir))]
#[doc(hidden)]
#[macro_export]
macro_rules! __cpu_barriers {
    (ir { $($ir:tt)* } source { $($source:tt)* }) => { $($source)* };
}

/// Implements a kernel handle's `launch`: a safe function, or an `unsafe` one with the given
/// safety section for a kernel taking raw pointers. The first word says how the kernel is
/// found: `module`, a `#[kernel]` by its crate and name; `foreign`, an `extern_kernels!`
/// declaration by its symbol name alone (its handle also gets `PARAM_SIZES` and `load`).
/// `@generic [params] [bounds]` before the handle makes the impl generic and `launch` bounded
/// (a generic kernel's handle, whose name is then an expression of `Self`): a launch of an
/// instantiation the bounds refuse is then an error of the bounds, not a missing method.
/// With the `host` feature off (a kernel crate built alone), handles have no `launch`.
#[cfg(feature = "host")]
#[doc(hidden)]
#[macro_export]
macro_rules! __kernel_launch_impl {
    (@impl [$lookup:ident] [$($unsafety:tt)?] [$(#[$safety:meta])*] [$($coop:ident)?],
        $(@generic [$($generics:tt)*] [$($bounds:tt)*])? $handle:ty, $name:expr, $(
        ($arg:ident : $kind:ident $ty:ty, $idx:literal $(, len = ($len:expr) $len_text:literal)?)
    ),* $(,)?) => {
        impl $(<$($generics)*>)? $handle {
            /// Launches the kernel on `device` with `config`. Returns which device and image
            /// ran it.
            ///
            /// # Errors
            ///
            /// [`Error::WrongDevice`]($crate::Error::WrongDevice) for a buffer of another
            /// device, [`Error::BufferTooShort`]($crate::Error::BufferTooShort) for a buffer
            /// shorter than its `#[len(..)]`, what finding the kernel reports, and what the
            /// device reports.
            $(#[$safety])*
            #[allow(clippy::too_many_arguments)]
            pub $($unsafety)? fn launch(
                &self,
                device: &$crate::Device,
                config: $crate::LaunchConfig,
                $( $arg: $crate::__kernel_arg_type!($kind $ty), )*
            ) -> $crate::Result<$crate::LaunchReport> $(where $($bounds)*)? {
                $($(
                    $crate::__private::check_len(
                        $name,
                        stringify!($arg),
                        $idx,
                        $arg.len(),
                        $crate::__private::needed_len($len),
                        $len_text,
                    )?;
                )?)*
                // The bytes of the buffers passed (what a profile counts as the launch's traffic).
                #[allow(unused_mut)]
                let mut buffer_bytes = 0u64;
                $( let $arg = $crate::__kernel_arg_value!($kind $arg, $ty, device, $name, $idx, buffer_bytes); )*
                // A cooperative kernel's first parameter, its `Grid`: a placeholder the
                // runtime replaces with the launch's own.
                let grid = $crate::__private::GRID_PLACEHOLDER;
                let params: &[*mut $crate::__private::c_void] = &[
                    $( { let _ = stringify!($coop); (&raw const grid).cast_mut().cast::<$crate::__private::c_void>() }, )?
                    $( (&raw const $arg).cast_mut().cast::<$crate::__private::c_void>(), )*
                ];
                let sizes: &[usize] = &[
                    $( { let _ = stringify!($coop); ::core::mem::size_of_val(&grid) }, )?
                    $( ::core::mem::size_of_val(&$arg), )*
                ];
                let launch = $crate::__kernel_launch_impl!(
                    @args $lookup $crate::__private::LaunchArgs::new($name, config, params)
                        .with_sizes(sizes)
                        .with_buffer_bytes(buffer_bytes)
                );
                $( let launch = { let _ = stringify!($coop); launch.cooperative() }; )?
                // SAFETY: `params` holds one pointer per parameter, in order, to a value of
                // the parameter's launch ABI type, `sizes[i]` bytes: this impl is generated
                // from the kernel's signature (scalars by value, device pointers as the u64
                // address, slices as address and length, of a buffer checked to belong to
                // `device`). A slice parameter's buffer is borrowed shared (`&[T]`) or
                // exclusively (`DisjointSlice<T>`) for this call, and freeing a buffer is
                // ordered after the launch by the backend, so a Rust kernel without raw
                // pointers cannot reach memory outside its buffers; what a kernel does with
                // raw pointers, and anything a foreign kernel does, is this function's
                // `unsafe` contract.
                unsafe { device.launch_args(&launch) }
            }

        }
        $crate::__kernel_launch_impl! {
            @max_blocks [$($coop)?] [$($($generics)*)?] [$($($bounds)*)?] $handle, $name
        }
        $crate::__kernel_launch_impl! { @items $lookup $handle, $name, $($kind $ty),* }
    };
    (@max_blocks [] $($rest:tt)*) => {};
    (@max_blocks [cooperative] [$($generics:tt)*] [$($bounds:tt)*] $handle:ty, $name:expr) => {
        impl<$($generics)*> $handle {
            /// The most blocks of `threads_per_block` threads, with `shared_mem_bytes` of
            /// dynamic shared memory each, that a launch of this cooperative kernel on
            /// `device` may have: the blocks the device keeps resident at once. A larger
            /// grid is refused with
            /// [`Error::CooperativeGridTooLarge`]($crate::Error::CooperativeGridTooLarge).
            ///
            /// # Errors
            ///
            /// What finding the kernel reports, and what the device reports.
            pub fn max_blocks(
                &self,
                device: &$crate::Device,
                threads_per_block: u32,
                shared_mem_bytes: u32,
            ) -> $crate::Result<u32> where $($bounds)* {
                device.max_cooperative_blocks(
                    env!("CARGO_CRATE_NAME"),
                    $name,
                    threads_per_block,
                    shared_mem_bytes,
                )
            }
        }
    };
    (@args module $launch:expr) => {
        $launch.in_module(env!("CARGO_CRATE_NAME"))
    };
    (@args foreign $launch:expr) => {
        $launch
    };
    (@items module $($rest:tt)*) => {};
    (@items foreign $handle:ty, $name:expr, $($kind:ident $ty:ty),*) => {
        impl $handle {
            /// The size of each parameter a launch passes, in order (a device pointer is its
            /// 8-byte address): what is checked against the sizes the kernel's image records.
            pub const PARAM_SIZES: &'static [usize] = &[ $( $crate::__kernel_abi_size!($kind $ty) ),* ];

            /// Finds the kernel by its symbol name in the images `device` loads (loading its
            /// module) and checks [`Self::PARAM_SIZES`] against the sizes its image records,
            /// as the first launch would. Returns the image.
            ///
            /// # Errors
            ///
            /// [`Error::ForeignKernelNotFound`]($crate::Error::ForeignKernelNotFound) naming
            /// the images searched,
            /// [`Error::KernelSignatureMismatch`]($crate::Error::KernelSignatureMismatch), and
            /// what loading the module reports.
            pub fn load(
                &self,
                device: &$crate::Device,
            ) -> $crate::Result<::std::sync::Arc<$crate::ImageInfo>> {
                device.load_foreign($name, Self::PARAM_SIZES)
            }
        }
    };
    ($lookup:ident cooperative $($rest:tt)*) => {
        $crate::__kernel_launch_impl! { @safety [$lookup] [cooperative] $($rest)* }
    };
    ($lookup:ident $($rest:tt)*) => {
        $crate::__kernel_launch_impl! { @safety [$lookup] [] $($rest)* }
    };
    (@safety [$lookup:ident] [$($coop:ident)?] safe, $($rest:tt)*) => {
        $crate::__kernel_launch_impl! { @impl [$lookup] [] [] [$($coop)?], $($rest)* }
    };
    (@safety [$lookup:ident] [$($coop:ident)?] unsafe $safety:literal, $($rest:tt)*) => {
        $crate::__kernel_launch_impl! {
            @impl [$lookup] [unsafe] [
                #[doc = ""]
                #[doc = "# Safety"]
                #[doc = ""]
                #[doc = $safety]
            ] [$($coop)?],
            $($rest)*
        }
    };
}

#[cfg(not(feature = "host"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __kernel_launch_impl {
    ($($t:tt)*) => {};
}

#[cfg(feature = "host")]
#[doc(hidden)]
#[macro_export]
macro_rules! __kernel_arg_type {
    (scalar $ty:ty) => { $ty };
    (tuple $ty:ty) => { $ty };
    (ptr_const $ty:ty) => { &$crate::DeviceBuffer<$ty> };
    (ptr_mut $ty:ty) => { &mut $crate::DeviceBuffer<$ty> };
    (slice $ty:ty) => { &$crate::DeviceBuffer<$ty> };
    (slice_mut $ty:ty) => { &mut $crate::DeviceBuffer<$ty> };
}

/// The size of a parameter's launch ABI value.
#[cfg(feature = "host")]
#[doc(hidden)]
#[macro_export]
macro_rules! __kernel_abi_size {
    (scalar $ty:ty) => {
        ::core::mem::size_of::<$ty>()
    };
    (ptr_const $ty:ty) => {
        ::core::mem::size_of::<u64>()
    };
    (ptr_mut $ty:ty) => {
        ::core::mem::size_of::<u64>()
    };
}

#[cfg(feature = "host")]
#[doc(hidden)]
#[macro_export]
macro_rules! __kernel_arg_value {
    (scalar $arg:ident, $ty:ty, $dev:ident, $name:expr, $idx:literal, $bytes:ident) => {
        $arg
    };
    (tuple $arg:ident, $ty:ty, $dev:ident, $name:expr, $idx:literal, $bytes:ident) => {
        $crate::__private::TupleParam::into_abi($arg)
    };
    (ptr_const $arg:ident, $ty:ty, $dev:ident, $name:expr, $idx:literal, $bytes:ident) => {
        $arg.device_ptr_for_launch($dev, $name, $idx, &mut $bytes)?.0
    };
    (ptr_mut $($rest:tt)*) => {
        $crate::__kernel_arg_value!(ptr_const $($rest)*)
    };
    (slice $arg:ident, $ty:ty, $dev:ident, $name:expr, $idx:literal, $bytes:ident) => {
        $crate::__private::slice_param::<$ty>(
            $arg.device_ptr_for_launch($dev, $name, $idx, &mut $bytes)?,
            $arg.len(),
        )
    };
    (slice_mut $($rest:tt)*) => {
        $crate::__kernel_arg_value!(slice $($rest)*)
    };
}
