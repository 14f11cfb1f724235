//! Types that cross the boundary between host and kernel: what may be a kernel parameter,
//! and the CPU device's entry-point ABI (shared by the runtime and every CPU image).

use core::ffi::c_void;
use core::sync::atomic::{AtomicU32, AtomicU64};

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
/// `half::bf16` too), `bool`, arrays of `DeviceCopy` values, `#[repr(C)]` structs of them and
/// fieldless `#[repr(u8)]`…`#[repr(i64)]` enums through `#[derive(DeviceCopy)]` (which checks
/// the rules below).
///
/// A type with invalid bit patterns (`bool`, enums, structs holding them) is checked wherever
/// the host reads device memory as the type ([`DeviceBuffer::copy_to`](crate::DeviceBuffer::copy_to),
/// `to_vec`, a pinned buffer's slices): bytes that are no value of it (a foreign kernel's `2`
/// in a `bool` buffer, say) give [`Error::InvalidValue`](crate::Error::InvalidValue) and are
/// never seen as the type.
///
/// # Safety
///
/// Implementors have no pointers into host memory, no `Drop`, no padding bytes, and all-zero
/// bytes are a valid value. Every bit pattern is a valid value, or `__OFFLOAD_ANY_BITS` is
/// `false` and `__offload_valid` accepts exactly the byte patterns that are values.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not `DeviceCopy`: it cannot be a kernel parameter or a device buffer's element",
    note = "kernel parameters are scalars (bool, u8..u128, i8..i128, usize, isize, f32, f64, and half::f16, half::bf16 with offload-rt's `half` feature), #[derive(DeviceCopy)] #[repr(C)] structs, arrays of these, tuples of these as parameters, slices `&[T]` and `DisjointSlice<T>` of these, or device pointers (*const T, *mut T)"
)]
pub unsafe trait DeviceCopy: Copy + 'static {
    /// Evaluated wherever memory of the type is allocated or viewed as bytes (device and
    /// pinned buffers, copies): `#[derive(DeviceCopy)]` on a generic struct makes it the
    /// padding check of each instantiation, which a definition cannot make for every type
    /// argument. (A value passed by value to a launch needs no check: its padding bytes are
    /// never read as a value.)
    #[doc(hidden)]
    const __OFFLOAD_LAYOUT: () = ();
    /// Whether every bit pattern is a value of the type (no check on reads needed).
    #[doc(hidden)]
    const __OFFLOAD_ANY_BITS: bool = true;
    /// Whether `bytes` (`size_of::<Self>()` of them, any alignment) hold a value of the type.
    #[doc(hidden)]
    #[inline]
    fn __offload_valid(bytes: &[u8]) -> bool {
        let _ = bytes;
        true
    }
}

/// The index of the first element of `bytes` (a whole number of `T`s) that is no value of
/// `T`.
#[doc(hidden)]
pub fn first_invalid<T: DeviceCopy>(bytes: &[u8]) -> Option<usize> {
    if T::__OFFLOAD_ANY_BITS || core::mem::size_of::<T>() == 0 {
        return None;
    }
    bytes
        .chunks_exact(core::mem::size_of::<T>())
        .position(|element| !T::__offload_valid(element))
}

impl sealed::Sealed for bool {}
impl KernelScalar for bool {}
// SAFETY: one byte, no pointers or padding; zero is `false`, and the check accepts exactly 0
// and 1.
unsafe impl DeviceCopy for bool {
    const __OFFLOAD_ANY_BITS: bool = false;
    #[inline]
    fn __offload_valid(bytes: &[u8]) -> bool {
        matches!(bytes, [0 | 1])
    }
}

scalars!(
    u8, u16, u32, u64, u128, i8, i16, i32, i64, i128, usize, isize, f32, f64
);
// The `half` crate's types are `#[repr(transparent)]` over a `u16`: every bit pattern is a value.
#[cfg(feature = "half")]
scalars!(::half::f16, ::half::bf16);

// SAFETY: an array of DeviceCopy values has no padding between elements and no other bytes;
// it is valid where each element is.
unsafe impl<T: DeviceCopy, const N: usize> DeviceCopy for [T; N] {
    const __OFFLOAD_ANY_BITS: bool = T::__OFFLOAD_ANY_BITS;
    #[inline]
    fn __offload_valid(bytes: &[u8]) -> bool {
        first_invalid::<T>(bytes).is_none()
    }
}

// SAFETY: `Complex<T>` is `#[repr(C)]`, its two fields of one type `T`: no padding, no other
// bytes, zero where `T`'s zero is, valid where both parts are.
#[cfg(feature = "num-complex")]
unsafe impl<T: DeviceCopy> DeviceCopy for ::num_complex::Complex<T> {
    const __OFFLOAD_ANY_BITS: bool = T::__OFFLOAD_ANY_BITS;
    #[inline]
    fn __offload_valid(bytes: &[u8]) -> bool {
        first_invalid::<T>(bytes).is_none()
    }
}

/// A value of a type from another crate that implements [`bytemuck::Pod`] (glam's vectors,
/// nalgebra's matrices, num-complex's `Complex` with their `bytemuck` features): as a buffer
/// element or a kernel parameter, `DeviceCopy` without a `DeviceCopy` impl of its own, which
/// the orphan rule would refuse. `#[repr(transparent)]`, so `Pod::wrap_slice(&vectors)`
/// ([`bytemuck::TransparentWrapper`]) views a host slice as one without a copy; in a kernel
/// it derefs to the value.
///
/// ```ignore
/// #[kernel]
/// pub fn scale(a: f32, mut v: DisjointSlice<Pod<glam::Vec4>>) {
///     if let Some(p) = v.for_thread() { **p *= a; }
/// }
/// // host: DeviceBuffer::from_slice(&device, Pod::wrap_slice(&vectors))
/// ```
#[cfg(feature = "bytemuck")]
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
#[repr(transparent)]
pub struct Pod<T>(pub T);

// SAFETY: `bytemuck::Pod` promises what `DeviceCopy` asks: no padding, no pointers (it is
// `'static` and `Copy`, and any bit pattern is a value, zero included).
#[cfg(feature = "bytemuck")]
unsafe impl<T: ::bytemuck::Pod> DeviceCopy for Pod<T> {}

// SAFETY: `#[repr(transparent)]` over `T`.
#[cfg(feature = "bytemuck")]
unsafe impl<T: ::bytemuck::Zeroable> ::bytemuck::Zeroable for Pod<T> {}
// SAFETY: `#[repr(transparent)]` over a `Pod` `T`.
#[cfg(feature = "bytemuck")]
unsafe impl<T: ::bytemuck::Pod> ::bytemuck::Pod for Pod<T> {}
// SAFETY: `#[repr(transparent)]` over `T`, its only field.
#[cfg(feature = "bytemuck")]
unsafe impl<T> ::bytemuck::TransparentWrapper<T> for Pod<T> {}

#[cfg(feature = "bytemuck")]
impl<T> core::ops::Deref for Pod<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

#[cfg(feature = "bytemuck")]
impl<T> core::ops::DerefMut for Pod<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

#[cfg(feature = "bytemuck")]
impl<T> From<T> for Pod<T> {
    fn from(value: T) -> Pod<T> {
        Pod(value)
    }
}

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
    /// Called by the warp operations of a kernel body that the region form splits at, when
    /// the kernel runs on the coroutine path: suspends like `warp_sync`, which the runtime then
    /// knows was not called from elsewhere (a function the kernel calls).
    pub region_warp_sync: unsafe extern "C" fn(launch: *const CpuLaunch),
    /// Called by `Grid::sync()` in a cooperative launch; suspends the calling GPU thread until
    /// every thread of the grid reaches the grid barrier.
    pub grid_sync: unsafe extern "C" fn(launch: *const CpuLaunch),
    /// Called by a panicking GPU thread (a failed `assert!`, a bad index, `panic!`): records
    /// the report and leaves the kernel, abandoning the launch; never returns.
    pub panic: unsafe extern "C" fn(launch: *const CpuLaunch, report: *const CpuPanic) -> !,
    /// Called by `device_print!`/`device_println!`: the launch keeps the line, which the host
    /// prints when the launch is over. `template` is UTF-8, the arguments as [`PrintArg`].
    pub print: unsafe extern "C" fn(
        launch: *const CpuLaunch,
        template: *const u8,
        template_len: usize,
        args: *const PrintArg,
        arg_count: usize,
    ),
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

/// Where the GPU thread an OS thread runs (or ran last) is, as a CPU image's index state says.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuPosition {
    /// Index of the block.
    pub block: [u32; 3],
    /// Index of the thread in its block.
    pub thread: [u32; 3],
}

/// `__offload_cpu_position`: the [`CpuPosition`] of the calling OS thread in the image; what
/// the runtime reports after a GPU thread overflowed its stack (read on the same OS thread,
/// before it runs any other kernel code).
pub type CpuPositionFn = unsafe extern "C" fn() -> CpuPosition;

// The symbols of the entry points ([`CpuRegionsFn`], [`CpuRunFn`], [`CpuThreadFn`]) by their
// prefixes, the coroutine note's, the ABI version's and the [`CpuPositionFn`]'s: the device
// ABI's one home.
pub use offload_format::abi::{
    CPU_ABI_SYMBOL, CPU_IR_REGIONS_PREFIX, CPU_NOTE_PREFIX, CPU_POSITION_SYMBOL,
    CPU_REGIONS_PREFIX, CPU_RUN_PREFIX, CPU_THREAD_PREFIX,
};
/// The CPU entry-point ABI described by this module.
pub const CPU_ABI_VERSION: u32 = 8;
/// Lanes of a warp on the CPU device.
pub const CPU_WARP_SIZE: u32 = 32;
/// Bytes of lane storage (per-thread copies of the values a kernel's regions share) each worker
/// thread of the CPU device has; a block whose values need more runs on the coroutine path.
pub const CPU_LANE_CAPACITY: usize = 1024 * 1024;
/// Bytes of dynamic shared memory a block can use on the CPU device.
pub const CPU_DYNAMIC_SHARED_CAPACITY: usize = super::limits::MAX_SHARED_BYTES;
/// Bytes of static shared memory a block can use on the CPU device.
pub const CPU_SHARED_CAPACITY: usize = super::limits::MAX_STATIC_SHARED_BYTES;

/// One argument of a device print: a scalar as its bits, with what it is.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrintArg {
    /// The [`PrintTag`] of the value, as its `u32`.
    pub tag: u32,
    /// Bytes of the value's type (`{:x}` of an `i8` shows two digits).
    pub size: u32,
    /// The value: integers sign- or zero-extended, floats and halves as their IEEE bits,
    /// `bool` as 0 or 1, `char` as its scalar value.
    pub bits: u64,
}

/// What a [`PrintArg`] holds.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrintTag {
    /// An unsigned integer (`u8` to `u64`, `usize`).
    Unsigned = 1,
    /// A signed integer (`i8` to `i64`, `isize`), sign-extended.
    Signed = 2,
    /// An `f32`, as its bits.
    F32 = 3,
    /// An `f64`, as its bits.
    F64 = 4,
    /// A `bool`.
    Bool = 5,
    /// A `char`.
    Char = 6,
    /// A `half::f16`, as its bits.
    F16 = 7,
    /// A `half::bf16`, as its bits.
    Bf16 = 8,
}

impl PrintTag {
    /// The tag a `u32` names, if any.
    pub fn from_u32(tag: u32) -> Option<PrintTag> {
        Some(match tag {
            1 => PrintTag::Unsigned,
            2 => PrintTag::Signed,
            3 => PrintTag::F32,
            4 => PrintTag::F64,
            5 => PrintTag::Bool,
            6 => PrintTag::Char,
            7 => PrintTag::F16,
            8 => PrintTag::Bf16,
            _ => return None,
        })
    }
}

/// The host memory a GPU image reports through: a panic record and the print ring, followed by
/// the ring's bytes. The runtime maps it into the device and writes its device address into the
/// image's [`CHANNEL_SYMBOL`] when it loads the module; an image whose global is null (or that
/// has none) traps on a panic without a report and drops its prints.
#[repr(C)]
#[derive(Debug)]
pub struct DeviceChannel {
    /// The first panic of the device since the runtime last read it.
    pub panic: PanicRecord,
    /// Where prints go.
    pub print: PrintRing,
}

/// Symbol of the `*mut DeviceChannel` global of a GPU image (`offload_format::abi::CHANNEL`).
pub const CHANNEL_SYMBOL: &str = offload_format::abi::CHANNEL;

/// [`PanicRecord::state`]: no panic.
pub const PANIC_EMPTY: u32 = 0;
/// [`PanicRecord::state`]: a thread is writing its report.
pub const PANIC_WRITING: u32 = 1;
/// [`PanicRecord::state`]: the report is complete. It keeps [`PANIC_WRITING`]'s bit, so a
/// thread claims the record with one atomic OR of that bit, which changes neither later
/// state (a compare-and-swap would need two more registers in every kernel that can panic).
pub const PANIC_WRITTEN: u32 = 3;
const _: () = assert!(PANIC_WRITTEN & PANIC_WRITING == PANIC_WRITING);
/// Bytes of a panic's source file name a GPU records; a longer one keeps its end.
pub const PANIC_FILE_CAPACITY: usize = 256;
/// Bytes of a panic message a GPU records; a longer one is cut at a UTF-8 boundary.
pub const PANIC_MESSAGE_CAPACITY: usize = CPU_PANIC_MESSAGE_CAPACITY;

/// What a GPU panic record holds, so that the device formats nothing: its message text as it
/// is, or the raw values of one of core's panics, which the host formats with core's own
/// wording (`offload-build`'s device link makes core's panic functions report this way).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PanicKind {
    /// `message` is the whole message (`panic!`/`assert!`/`expect` with a literal message,
    /// overflow, division by zero, `unwrap` on `None`).
    Message = 0,
    /// `slice[index]` past the end: `values` are the index and the length.
    IndexOutOfBounds = 1,
    /// A range index of a slice out of order or past the end: `values` are the start, the
    /// end and the length.
    SliceRange = 2,
    /// `Result::unwrap`/`expect` on an `Err`: `message` is the text before the error, whose
    /// `Debug` form a GPU does not record.
    ResultErr = 3,
    /// A failed `assert_eq!`/`assert_ne!`/`assert_matches!`: `values[0]` is 0, 1, 2 for `==`,
    /// `!=`, `matches`; the operands' `Debug` forms are not recorded.
    AssertOperands = 4,
    /// A message that formats values (`panic!("{x}")`, a user `Display`): a GPU records
    /// neither the template nor the values, only that it was such a message.
    Formatted = 5,
    /// A string sliced out of bounds or off a character boundary: `values` are the range's
    /// start and end and the string's length in bytes.
    StrRange = 6,
}

impl PanicKind {
    /// The kind a record's `u32` names, if any.
    pub fn from_u32(kind: u32) -> Option<PanicKind> {
        Some(match kind {
            0 => PanicKind::Message,
            1 => PanicKind::IndexOutOfBounds,
            2 => PanicKind::SliceRange,
            3 => PanicKind::ResultErr,
            4 => PanicKind::AssertOperands,
            5 => PanicKind::Formatted,
            6 => PanicKind::StrRange,
            _ => return None,
        })
    }
}

/// A GPU thread's panic: the first thread to move `state` from [`PANIC_EMPTY`] to
/// [`PANIC_WRITING`] writes the rest, then stores [`PANIC_WRITTEN`] and traps. A panic at a site
/// the device link described in the module's panic-site table (`offload_format::panic_sites`)
/// records the site and the values only; any other records its kind, text and location.
#[repr(C)]
#[derive(Debug)]
pub struct PanicRecord {
    /// [`PANIC_EMPTY`], [`PANIC_WRITING`] or [`PANIC_WRITTEN`].
    pub state: AtomicU32,
    /// What `message` and `values` hold: a [`PanicKind`] as `u32` (without a site).
    pub kind: u32,
    /// Index of the panicking thread's block, as [`pack_block`] writes it.
    pub block: [u32; 3],
    /// Index of the panicking thread in its block, as [`pack_thread`] writes it.
    pub thread: u32,
    /// The site in a loaded module's panic-site table (`offload_format::panic_sites::site_value`),
    /// or 0: the kind, text and location are the fields below.
    pub site: u64,
    /// The raw values of a panic whose message the host formats ([`PanicKind`]).
    pub values: [u64; 3],
    /// Line of the panic, 1-based.
    pub line: u32,
    /// Column of the panic, 1-based.
    pub column: u32,
    /// Bytes of `file` used.
    pub file_len: u32,
    /// Bytes of `message` used.
    pub message_len: u32,
    /// The source file, UTF-8.
    pub file: [u8; PANIC_FILE_CAPACITY],
    /// The message, UTF-8.
    pub message: [u8; PANIC_MESSAGE_CAPACITY],
}

/// [`PanicRecord::block`]`[2]` when `[1]` holds the y and z indices, 16 bits each (NVIDIA,
/// whose grids are at most 65,535 blocks high and deep): one register fewer in the code that
/// records a panic. No block's z index is `u32::MAX`.
pub const BLOCK_YZ_PACKED: u32 = u32::MAX;

/// A thread's index in its block as a panic records it: x, y and z in 10 bits each (a GPU's
/// block is at most 1,024 threads in any dimension). Unlike a rank, it needs no block extents:
/// the code that records a panic neither reads nor stores them, which every kernel that can
/// panic pays for in registers or instructions.
pub const fn pack_thread([x, y, z]: [u32; 3]) -> u32 {
    (x & 0x3ff) | (y & 0x3ff) << 10 | (z & 0x3ff) << 20
}

/// The thread index [`pack_thread`] packed.
pub const fn unpack_thread(thread: u32) -> [u32; 3] {
    [thread & 0x3ff, thread >> 10 & 0x3ff, thread >> 20 & 0x3ff]
}

/// A block's index as a panic records it: as it is, or with y and z packed (see
/// [`BLOCK_YZ_PACKED`]).
pub const fn pack_block([x, y, z]: [u32; 3], packed: bool) -> [u32; 3] {
    if packed {
        [x, (y & 0xffff) | z << 16, BLOCK_YZ_PACKED]
    } else {
        [x, y, z]
    }
}

/// The block index [`pack_block`] packed.
pub const fn unpack_block(block: [u32; 3]) -> [u32; 3] {
    match block {
        [x, yz, BLOCK_YZ_PACKED] => [x, yz & 0xffff, yz >> 16],
        block => block,
    }
}

/// The print ring's header; its `capacity` bytes follow the [`DeviceChannel`]. A print reserves
/// a record's bytes by adding them to `head`, writes the record, and stores its first word last
/// (`PRINT_RECORD_READY` set). A record that does not fit is dropped and counted.
///
/// A record: `u32` size in bytes (a multiple of 8, [`PRINT_RECORD_READY`] set once written),
/// `u32` template length, `u32` argument count, `u32` zero, the template's UTF-8 bytes padded
/// with zeros to a multiple of 8, then the arguments as [`PrintArg`]s.
#[repr(C)]
#[derive(Debug)]
pub struct PrintRing {
    /// Bytes reserved since the runtime last emptied the ring (may pass `capacity`).
    pub head: AtomicU64,
    /// Prints dropped for lack of room since the runtime last emptied the ring.
    pub dropped: AtomicU32,
    /// Bytes of ring after the channel (a multiple of 8).
    pub capacity: u32,
}

/// Set in a print record's first word once the record is complete.
pub const PRINT_RECORD_READY: u32 = 1 << 31;
/// Bytes of a print record before its template.
pub const PRINT_RECORD_HEADER: usize = 16;

/// Bytes of the print record for a template of `template_len` bytes and `arg_count` arguments.
pub const fn print_record_size(template_len: usize, arg_count: usize) -> usize {
    PRINT_RECORD_HEADER
        + template_len.next_multiple_of(8)
        + arg_count * core::mem::size_of::<PrintArg>()
}
