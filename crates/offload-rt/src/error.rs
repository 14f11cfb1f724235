//! The runtime's errors.

use std::sync::Arc;

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the host runtime. Bad input (a damaged bundle, an unknown
/// kernel, a bad device name) is reported here, never by a panic.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A registered descriptor is not one this runtime can read.
    #[error("offload descriptor at {address:#x} is invalid: {reason}")]
    BadDescriptor {
        /// Address of the descriptor.
        address: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A registered bundle could not be parsed.
    #[error("the offload bundle embedded by `{name}` is damaged")]
    DamagedBundle {
        /// Name of the descriptor holding the bundle.
        name: String,
        /// What the parser found.
        #[source]
        source: Arc<offload_format::Error>,
    },
    /// No registered bundle holds an image of the module.
    #[error("no registered device image belongs to kernel module `{module}`")]
    NoImages {
        /// The kernel crate's library name.
        module: String,
    },
    /// Images of the module exist, but none runs on the device.
    #[error("none of the {candidates} image(s) of `{module}` runs on {device}: {tried}")]
    NoCompatibleImage {
        /// The kernel crate's library name.
        module: String,
        /// The device, as [`crate::Device::describe`] says it.
        device: String,
        /// How many images of the module were registered.
        candidates: usize,
        /// The images tried (triple/arch list).
        tried: String,
    },
    /// The module's image does not define the kernel.
    #[error("kernel `{kernel}` is not in the `{module}` image ({image})")]
    KernelNotFound {
        /// Kernel name.
        kernel: String,
        /// Module name.
        module: String,
        /// Which image was searched.
        image: String,
    },
    /// No image the device would run lists a foreign kernel (one declared with
    /// [`extern_kernels!`](crate::extern_kernels)) under its symbol name.
    #[error(
        "foreign kernel `{kernel}` is in none of the device images searched for {device}: {}",
        if searched.is_empty() { "no images are registered".to_owned() } else { searched.join(", ") }
    )]
    ForeignKernelNotFound {
        /// The kernel's symbol name.
        kernel: String,
        /// The device, as [`crate::Device::describe`] says it.
        device: String,
        /// The images whose kernel lists were searched, each `module/arch/triple`.
        searched: Vec<String>,
    },
    /// A foreign kernel's declared parameters differ from those its image records
    /// (`offload.kernel-params`): the launch would pass the kernel other bytes than it reads.
    #[error(
        "foreign kernel `{kernel}` is declared with parameters of {declared:?} bytes, but the \
         {image} image's kernel takes {found:?} bytes"
    )]
    KernelSignatureMismatch {
        /// The kernel's symbol name.
        kernel: String,
        /// The image, `module/arch/triple`.
        image: String,
        /// The size of each declared parameter, in order.
        declared: Vec<usize>,
        /// The size of each parameter the image records, in order.
        found: Vec<u32>,
    },
    /// A device image could not be loaded.
    #[error("loading the `{module}` image ({image}) failed: {reason}")]
    ImageLoad {
        /// Module name.
        module: String,
        /// Which image.
        image: String,
        /// The loader's message.
        reason: String,
    },
    /// A system call of the CPU backend failed.
    #[error("{call} failed")]
    Os {
        /// The call.
        call: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// `OFFLOAD_DEVICE` or a device name given to [`crate::Device::from_spec`] is not understood.
    #[error("unknown device `{spec}` (expected `cpu`, `cuda[:N]` or `hip[:N]`)")]
    UnknownDevice {
        /// What was given.
        spec: String,
    },
    /// A backend could not be opened (driver missing, no such device, ...).
    #[error("the {backend} backend is unavailable: {reason}")]
    BackendUnavailable {
        /// `cuda`, `hip`, `cpu`.
        backend: &'static str,
        /// Why.
        reason: String,
    },
    /// A driver call of a GPU backend failed.
    #[error("{backend} call {call} failed with code {code}: {message}")]
    Driver {
        /// `cuda` or `hip`.
        backend: &'static str,
        /// The driver function.
        call: &'static str,
        /// Its status code.
        code: i64,
        /// The driver's description of the code.
        message: String,
    },
    /// A kernel faulted on a GPU (an illegal address, a trap such as a panic, a timeout). The
    /// driver reports it at the next call after the launch, and the device's context is lost:
    /// later calls report [`Error::DeviceLost`] until [`Device::reset`](crate::Device::reset).
    #[error(
        "kernel fault on {device}{}: {call} reported {name} ({code}): {message}",
        match kernel { Some(k) => format!(" in or after kernel `{k}`"), None => String::new() }
    )]
    KernelFault {
        /// The device.
        device: String,
        /// The last kernel launched on the device (`module::kernel`), if any.
        kernel: Option<String>,
        /// The driver call that reported the fault.
        call: &'static str,
        /// The driver's status code.
        code: i64,
        /// The driver's name for the code.
        name: String,
        /// The driver's description of the code.
        message: String,
    },
    /// A kernel panicked (a failed `assert!`, an index out of bounds, `panic!`): the launch
    /// was abandoned. On the CPU device the device stays usable; on a GPU the panic traps,
    /// which, like any kernel fault, loses the device's context (later calls report
    /// [`Error::DeviceLost`] until [`Device::reset`](crate::Device::reset)), and is reported by
    /// the first call after the launch.
    #[error("kernel `{kernel}` panicked on {device} at {panic}")]
    KernelPanic {
        /// Kernel name.
        kernel: String,
        /// The device.
        device: String,
        /// What the panicking thread reported.
        panic: Box<KernelPanicReport>,
    },
    /// On the CPU device, a GPU thread overflowed its stack (deep or unbounded recursion, large
    /// locals): the launch was abandoned as for a panic, and the device stays usable.
    /// `OFFLOAD_KERNEL_STACK` sets the stack a GPU thread gets.
    #[error(
        "kernel `{kernel}` overflowed its stack of {stack_bytes} bytes on {device} (block ({}, {}, {}), thread ({}, {}, {})); OFFLOAD_KERNEL_STACK sets a GPU thread's stack",
        block[0], block[1], block[2], thread[0], thread[1], thread[2]
    )]
    KernelStackOverflow {
        /// Kernel name.
        kernel: String,
        /// The device.
        device: String,
        /// Index of the overflowing thread's block.
        block: [u32; 3],
        /// Index of the overflowing thread in its block.
        thread: [u32; 3],
        /// Bytes of the stack it overflowed.
        stack_bytes: usize,
    },
    /// Device memory could not be allocated: more than the device has free. The device stays
    /// usable, and the same allocation succeeds once enough buffers are dropped.
    #[error(
        "allocating {requested} bytes on {device} failed: out of memory ({})",
        match (free, total) {
            (Some(f), Some(t)) => format!("{f} of {t} bytes free"),
            (Some(f), None) => format!("{f} bytes free"),
            _ => "free memory unknown".to_owned(),
        }
    )]
    OutOfMemory {
        /// Requested size in bytes.
        requested: usize,
        /// The device's free memory when the allocation failed, if it could tell.
        free: Option<usize>,
        /// The device's memory, if it could tell.
        total: Option<usize>,
        /// The device.
        device: String,
    },
    /// The device's context was lost to a fault (a kernel's illegal address, a trap): the
    /// driver refuses all later work in it. Every buffer, stream, event, graph and module made
    /// before answers this error from then on, without calling the driver;
    /// [`Device::reset`](crate::Device::reset) makes the device usable again for new ones.
    #[error("{device} was lost ({cause}); `Device::reset` makes it usable again")]
    DeviceLost {
        /// The device.
        device: String,
        /// What lost it: the fault the driver reported, or a reset.
        cause: String,
    },
    /// A wait with a time limit ran out: work queued before it is still running (a kernel
    /// that loops forever, say). The device is not lost; [`Device::reset`](crate::Device::reset)
    /// stops such work on a GPU.
    #[error(
        "{device}: work still running after {waited:?}{}",
        if kernels.is_empty() { String::new() } else { format!(" (kernel `{}`)", kernels.join("`, `")) }
    )]
    Timeout {
        /// The device.
        device: String,
        /// The kernels that may still run: the last one launched before the wait, if known.
        kernels: Vec<String>,
        /// How long the wait lasted.
        waited: std::time::Duration,
    },
    /// [`Device::reset`](crate::Device::reset) cannot reset the device now; it stays lost until
    /// a reset succeeds.
    #[error("{device} cannot be reset: {reason}")]
    ResetRefused {
        /// The device.
        device: String,
        /// Why.
        reason: String,
    },
    /// A tensor map could not be made: the device has no tensor memory accelerator, the
    /// driver cannot encode maps, or the layout breaks one of the accelerator's rules (named).
    #[error("tensor map on {device}: {reason}")]
    TensorMap {
        /// The buffer's device.
        device: String,
        /// What stood in the way.
        reason: String,
    },
    /// A byte count overflowed `usize`.
    #[error("{len} elements of {elem_size} bytes overflow the address space")]
    SizeOverflow {
        /// Element count.
        len: usize,
        /// Element size.
        elem_size: usize,
    },
    /// A copy between host and device memory was given slices of different lengths.
    #[error("length mismatch: the device buffer has {device} elements, the host slice {host}")]
    LengthMismatch {
        /// Device buffer length.
        device: usize,
        /// Host slice length.
        host: usize,
    },
    /// Device memory read as a type with invalid bit patterns (`bool`, an enum, a struct holding
    /// them) held bytes that are no value of it, written by a foreign kernel or through a raw
    /// pointer. The host never sees them as the type.
    #[error(
        "element {index} of a copy of `{type_name}`s from device memory holds bytes that are no `{type_name}` (a kernel wrote them through a pointer of another type)"
    )]
    InvalidValue {
        /// The element type.
        type_name: &'static str,
        /// Index of the first invalid element.
        index: usize,
    },
    /// A buffer of one device was passed to a launch on another.
    #[error("kernel `{kernel}`: argument {index} is a buffer of another device")]
    WrongDevice {
        /// Kernel name.
        kernel: &'static str,
        /// Zero-based argument index.
        index: usize,
    },
    /// A buffer passed to a launch has fewer elements than the kernel's `#[len(..)]` for it.
    #[error(
        "kernel `{kernel}`: argument {index} (`{param}`) has {len} elements, the launch needs \
         {needed} (`#[len({needed_expr})]`)"
    )]
    BufferTooShort {
        /// Kernel name.
        kernel: &'static str,
        /// The parameter's name.
        param: &'static str,
        /// Zero-based argument index.
        index: usize,
        /// Elements the buffer has.
        len: usize,
        /// Elements the launch needs (`usize::MAX` for a negative or too large value).
        needed: usize,
        /// The kernel's expression for `needed`.
        needed_expr: &'static str,
    },
    /// The launch configuration is invalid.
    #[error("invalid launch configuration for `{kernel}`: {reason}")]
    InvalidLaunch {
        /// Kernel name.
        kernel: String,
        /// What is wrong.
        reason: String,
    },
    /// A launch asks for more shared memory, static and dynamic together, than every device
    /// gives a block ([`crate::kernel::MAX_SHARED_BYTES`]).
    #[error(
        "launch of `{kernel}`: {static_bytes} bytes of static shared memory and {dynamic_bytes} bytes of dynamic shared memory exceed the {limit} bytes every device gives a block"
    )]
    SharedMemoryLimit {
        /// Kernel name.
        kernel: String,
        /// The kernel's static shared memory (`shared_array!`).
        static_bytes: u64,
        /// `LaunchConfig::shared_mem_bytes`.
        dynamic_bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// On the CPU device, a kernel reached `sync_threads()` in a launch run without barrier
    /// support: its first thread never reached one, some other thread did.
    #[error(
        "kernel `{kernel}` reached a barrier the CPU device did not expect: in some thread although thread 0 of block 0 did not, or in a function the kernel calls while it ran split at the barriers of its body; barriers must be reached by every thread of a block (the next launch runs with one coroutine per thread)"
    )]
    DivergentBarrier {
        /// Kernel name.
        kernel: String,
    },
    /// An object of one device (a buffer, event or graph) used on another's stream.
    #[error("the {what} belongs to {owner}, not to {used_on}")]
    OtherDevice {
        /// What was passed.
        what: &'static str,
        /// Its device.
        owner: String,
        /// The device it was used on.
        used_on: String,
    },
    /// A graph recording (stream capture) was misused.
    #[error("stream capture: {reason}")]
    Capture {
        /// What went wrong.
        reason: String,
    },
    /// [`Device::stream_from_raw`](crate::Device::stream_from_raw) on a device without
    /// driver streams (the CPU device).
    #[error(
        "{device} has no driver streams to wrap: its streams are the runtime's own (`Device::stream`)"
    )]
    NoDriverStreams {
        /// The device, as `describe()` says it.
        device: String,
    },
    /// A cooperative launch (a kernel taking a `Grid`) with more blocks than the device keeps
    /// resident at once, which `Grid::sync` needs.
    #[error(
        "cooperative kernel `{kernel}`: a grid of {blocks} blocks, but {device} keeps at most {max} of its blocks resident at once (the kernel handle's `max_blocks` says how many for a block size)"
    )]
    CooperativeGridTooLarge {
        /// Kernel name.
        kernel: String,
        /// Blocks the launch asked for.
        blocks: u64,
        /// The most the device keeps resident for this kernel, block size and shared memory.
        max: u64,
        /// The device, as `describe()` says it.
        device: String,
    },
    /// On the CPU device, a block of a cooperative launch returned while others waited at
    /// `Grid::sync`, or reached one after another block had returned: on a GPU the launch
    /// would never finish.
    #[error(
        "cooperative kernel `{kernel}`: block {block} returned before a `Grid::sync` that other blocks reached; every thread of the grid must reach the same `Grid::sync` calls (on a GPU this launch would never finish)"
    )]
    GridSyncMismatch {
        /// Kernel name.
        kernel: String,
        /// The linear index of the block that returned.
        block: u64,
    },
    /// A communicator cannot be made on the device: the CPU device without MPI, or a GPU whose
    /// collectives library (NCCL, RCCL) could not be loaded.
    #[error("collectives are unavailable on {device}: {reason}")]
    CollectivesUnavailable {
        /// The device, as `describe()` says it.
        device: String,
        /// Why, with what was tried.
        reason: String,
    },
    /// A call of the collectives library (NCCL, RCCL, MPI) failed.
    #[error("{library}: {call} failed with code {code}: {message}")]
    Collective {
        /// The library, as it was opened (`libnccl.so.2`) or `MPI`.
        library: String,
        /// The call.
        call: &'static str,
        /// Its result code.
        code: i32,
        /// The library's message for it.
        message: String,
    },
    /// A collective's arguments do not fit together: a buffer of another device, lengths
    /// that do not match, a rank that is none.
    #[error("collective `{call}`: {reason}")]
    CollectiveArgs {
        /// The communicator's method.
        call: &'static str,
        /// What does not fit.
        reason: String,
    },
    /// A worker thread of the CPU device could not be started.
    #[error("starting CPU device worker thread failed")]
    Worker(#[source] std::io::Error),
    /// `OFFLOAD_CPU_LEVEL` names no level of the CPU device, or one this CPU does not have.
    #[error("OFFLOAD_CPU_LEVEL=`{value}`: {reason}")]
    CpuLevel {
        /// The variable's value.
        value: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// An environment variable of the CPU device (`OFFLOAD_CPU_THREADS`,
    /// `OFFLOAD_CPU_SPIN_US`, `OFFLOAD_CPU_BARRIERS`, `OFFLOAD_KERNEL_STACK`) is set to a value
    /// it cannot read.
    #[error("{variable}=`{value}`: not {expected}")]
    CpuSetting {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
        /// What it takes.
        expected: &'static str,
    },
}

impl Error {
    /// A copy of an error kept in the registry, to report it again.
    pub(crate) fn clone_for_report(&self) -> Error {
        match self {
            Error::BadDescriptor { address, reason } => Error::BadDescriptor {
                address: *address,
                reason: reason.clone(),
            },
            Error::DamagedBundle { name, source } => Error::DamagedBundle {
                name: name.clone(),
                source: Arc::clone(source),
            },
            other => Error::BadDescriptor {
                address: 0,
                reason: other.to_string(),
            },
        }
    }
}

/// What a panicking kernel thread reports: where, which thread, and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelPanicReport {
    /// The panic message.
    pub message: String,
    /// Source file of the panic, as the kernel crate's build names it.
    pub file: String,
    /// Line of the panic, 1-based.
    pub line: u32,
    /// Column of the panic, 1-based.
    pub column: u32,
    /// Index of the panicking thread's block.
    pub block: [u32; 3],
    /// Index of the panicking thread in its block.
    pub thread: [u32; 3],
}

impl std::fmt::Display for KernelPanicReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ([bx, by, bz], [tx, ty, tz]) = (self.block, self.thread);
        write!(
            f,
            "{}:{}:{} (block ({bx}, {by}, {bz}), thread ({tx}, {ty}, {tz})): {}",
            self.file, self.line, self.column, self.message
        )
    }
}

offload_format::error_codes! {
    Error {
        BadDescriptor => "OFF3001",
        DamagedBundle => "OFF3002",
        NoImages => "OFF3003",
        NoCompatibleImage => "OFF3004",
        KernelNotFound => "OFF3005",
        ForeignKernelNotFound => "OFF3006",
        KernelSignatureMismatch => "OFF3007",
        ImageLoad => "OFF3008",
        Os => "OFF3009",
        UnknownDevice => "OFF3010",
        BackendUnavailable => "OFF3011",
        Driver => "OFF3012",
        KernelFault => "OFF3013",
        KernelPanic => "OFF3014",
        OutOfMemory => "OFF3015",
        SizeOverflow => "OFF3016",
        LengthMismatch => "OFF3017",
        WrongDevice => "OFF3018",
        BufferTooShort => "OFF3019",
        InvalidLaunch => "OFF3020",
        SharedMemoryLimit => "OFF3021",
        DivergentBarrier => "OFF3022",
        OtherDevice => "OFF3023",
        Capture => "OFF3024",
        Worker => "OFF3025",
        KernelStackOverflow => "OFF3026",
        InvalidValue => "OFF3027",
        CpuLevel => "OFF3028",
        NoDriverStreams => "OFF3029",
        CooperativeGridTooLarge => "OFF3030",
        GridSyncMismatch => "OFF3031",
        CollectivesUnavailable => "OFF3032",
        Collective => "OFF3033",
        CollectiveArgs => "OFF3034",
        DeviceLost => "OFF3035",
        Timeout => "OFF3036",
        ResetRefused => "OFF3037",
        TensorMap => "OFF3038",
        CpuSetting => "OFF3039",
    }
}

#[cfg(test)]
mod error_code_tests {
    #[test]
    fn error_codes_are_unique_and_indexed() {
        offload_format::error::check_error_codes(
            &super::Error::all_codes(),
            "OFF3",
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../docs/guide/src/reference/error-codes.md"
            ),
        );
    }
}
