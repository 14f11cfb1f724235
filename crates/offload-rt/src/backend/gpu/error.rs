//! The one error type of the GPU driver layer, for every driver.

use std::fmt;

use super::library::LoadError;
use crate::backend::DeviceKind;

/// Which driver API an error or a device belongs to: that of a GPU device kind's family
/// (`CUDA`, `HIP`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Api(pub DeviceKind);

impl fmt::Display for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.family().driver_api().unwrap_or("no driver API"))
    }
}

/// The kinds of image a GPU driver loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpuImageKind {
    /// An NVIDIA ELF cubin for one `sm_NN`.
    Cubin,
    /// PTX text, compiled by the CUDA driver's JIT.
    Ptx,
    /// An NVIDIA fat binary (magic `0xBA55ED50`).
    Fatbin,
    /// An AMDGPU ELF code object.
    CodeObject,
}

impl fmt::Display for GpuImageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Cubin => "cubin",
            Self::Ptx => "PTX",
            Self::Fatbin => "fatbin",
            Self::CodeObject => "code object",
        })
    }
}

/// What can go wrong in a GPU backend. Driver failures carry the driver's own error name and
/// message.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum GpuError {
    /// The driver library could not be loaded.
    #[error("{api} unavailable: {source}")]
    Unavailable {
        /// The driver API.
        api: Api,
        /// Why.
        #[source]
        source: LoadError,
    },
    /// The driver loaded but reports no usable device (no GPU, stub library, user-mode and
    /// kernel drivers of different versions, ...).
    #[error("{api} unavailable: {reason}: {call} failed: {name} ({code}): {message}")]
    NoDevice {
        /// The driver API.
        api: Api,
        /// The initializing call.
        call: &'static str,
        /// The driver's code.
        code: i32,
        /// What the code means for this machine.
        reason: &'static str,
        /// The driver's error name.
        name: String,
        /// The driver's message.
        message: String,
    },
    /// The driver works but has no devices.
    #[error("{api} unavailable: the driver reports no devices")]
    NoDevices {
        /// The driver API.
        api: Api,
    },
    /// An ordinal past the last device.
    #[error("{api} device {ordinal} does not exist ({count} present)")]
    DeviceOutOfRange {
        /// The driver API.
        api: Api,
        /// The ordinal asked for.
        ordinal: usize,
        /// The number of devices.
        count: usize,
    },
    /// The driver library lacks an entry point a feature needs.
    #[error("the {api} driver library has no `{call}`")]
    MissingEntryPoint {
        /// Which API.
        api: Api,
        /// The entry point.
        call: &'static str,
    },
    /// A driver call failed.
    #[error("{call} failed: {name} ({code}): {message}")]
    Driver {
        /// The driver function.
        call: &'static str,
        /// The driver's code.
        code: i32,
        /// The driver's error name.
        name: String,
        /// The driver's message.
        message: String,
    },
    /// Device (or page-locked host) memory is exhausted.
    #[error("out of memory allocating {bytes} bytes ({}): {message}", .free.map_or_else(|| "free memory unknown".to_owned(), |f| format!("{f} bytes free")))]
    OutOfMemory {
        /// The size asked for.
        bytes: usize,
        /// Free device memory when it failed, if the driver could tell.
        free: Option<usize>,
        /// The device's memory, if the driver could tell.
        total: Option<usize>,
        /// The driver's message.
        message: String,
    },
    /// A kernel faulted (illegal address, trap, timeout, ...); the driver reports it at the
    /// next call, and the device's context is lost until it is reset.
    #[error("kernel fault reported by {call}: {name} ({code}): {message}")]
    KernelFault {
        /// The call that reported it.
        call: &'static str,
        /// The driver's code.
        code: i32,
        /// The driver's error name.
        name: String,
        /// The driver's message.
        message: String,
    },
    /// The device's context was lost (a kernel fault the driver keeps reporting, or a reset):
    /// nothing of it reaches the driver again.
    #[error("the device's context is lost: {cause}")]
    DeviceLost {
        /// What lost it.
        cause: String,
    },
    /// A wait with a time limit ran out with work still running.
    #[error("work still running after {waited:?}")]
    Timeout {
        /// How long the wait lasted.
        waited: std::time::Duration,
    },
    /// A reset cannot be done now.
    #[error("{reason}")]
    ResetRefused {
        /// Why.
        reason: String,
    },
    /// The image is not well formed for its kind.
    #[error("malformed {kind} image: {reason}")]
    MalformedImage {
        /// Its kind.
        kind: GpuImageKind,
        /// What is wrong.
        reason: String,
    },
    /// The PTX needs a newer driver than the one installed.
    #[error("the driver (CUDA {}.{}) is too old for this PTX: {message}{}", .driver_version.0, .driver_version.1, log_suffix(.jit_log))]
    PtxTooNew {
        /// The driver's CUDA version.
        driver_version: (u32, u32),
        /// The driver's message.
        message: String,
        /// The JIT compiler's error log.
        jit_log: String,
    },
    /// The driver rejected the image (wrong architecture, invalid PTX, ...).
    #[error("{call} rejected the {kind} image: {name} ({code}): {message}{}", log_suffix(.jit_log))]
    ModuleLoad {
        /// The loading call.
        call: &'static str,
        /// The image's kind.
        kind: GpuImageKind,
        /// The driver's code.
        code: i32,
        /// The driver's error name.
        name: String,
        /// The driver's message.
        message: String,
        /// The JIT compiler's error log (empty where the driver has none).
        jit_log: String,
    },
    /// The module has no kernel of this name.
    #[error("no kernel `{kernel}` in the module: {message}")]
    KernelNotFound {
        /// The kernel name.
        kernel: String,
        /// The driver's message.
        message: String,
    },
    /// A kernel name with an interior NUL byte.
    #[error("kernel name {name:?} contains a NUL byte")]
    InvalidKernelName {
        /// The name.
        name: String,
    },
    /// A copy that leaves a buffer.
    #[error("copy of {len} bytes at offset {offset} does not fit a buffer of {size} bytes")]
    CopyOutOfBounds {
        /// Bytes to copy.
        len: usize,
        /// Offset in the buffer.
        offset: usize,
        /// The buffer's size.
        size: usize,
    },
    /// A launch asks for more shared memory than the device gives a block.
    #[error("launch of `{kernel}`: {reason}")]
    SharedMemoryLimit {
        /// The kernel.
        kernel: String,
        /// Which limit.
        reason: String,
    },
    /// A launch with thread-block clusters of more than one block where the device, its
    /// driver or the launch has none.
    #[error("{reason}")]
    ClusterUnsupported {
        /// Why.
        reason: String,
    },
    /// A cooperative launch with more blocks than the device keeps resident at once.
    #[error("a cooperative grid of {blocks} blocks; the device keeps at most {max} resident")]
    CooperativeGridTooLarge {
        /// Blocks asked for.
        blocks: u64,
        /// The most the device keeps resident for the kernel and block.
        max: u32,
    },
    /// An object of one device used with another.
    #[error("{what} belongs to {api} device {owner}, not device {used_with}")]
    WrongDevice {
        /// The driver API.
        api: Api,
        /// What was passed.
        what: &'static str,
        /// Its device.
        owner: usize,
        /// The device it was used with.
        used_with: usize,
    },
    /// The device properties read back do not match what other calls report, so the
    /// `hipDeviceProp_tR0600` layout assumed here is not the runtime's.
    #[error(
        "device {ordinal}: hipGetDevicePropertiesR0600 disagrees with {check}; unsupported HIP ABI"
    )]
    PropertiesAbiMismatch {
        /// The device.
        ordinal: usize,
        /// What disagreed.
        check: String,
    },
    /// `gcnArchName` is not a target ID.
    #[error("device {ordinal}: gcnArchName {found:?} is not an AMD target ID")]
    BadArchName {
        /// The device.
        ordinal: usize,
        /// What was read.
        found: String,
    },
}

fn log_suffix(log: &str) -> String {
    if log.is_empty() {
        String::new()
    } else {
        format!("\nJIT log:\n{log}")
    }
}
