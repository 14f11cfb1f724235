//! What a device kind must provide to run kernels: the [`Backend`] of a device, its streams,
//! events, graphs and page-locked memory, its loaded [`Module`]s, and the values they pass
//! ([`DeviceKind`], [`DevicePtr`], [`KernelHandle`], [`RawDevice`]).

use std::any::Any;
use std::fmt;
use std::time::Duration;

use offload_format::DeviceFamily;

use crate::error::Result;
use crate::launch::LaunchArgs;
use crate::registry::{ImageInfo, RegisteredImage};

/// The kind of a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeviceKind {
    /// The host CPU as an offload device.
    Cpu,
    /// An NVIDIA GPU through the CUDA driver API.
    Cuda,
    /// An AMD GPU through HIP.
    Hip,
}

impl DeviceKind {
    /// The device family, which holds every per-family fact (triple, driver API, name).
    pub const fn family(self) -> DeviceFamily {
        match self {
            DeviceKind::Cpu => DeviceFamily::Cpu,
            DeviceKind::Cuda => DeviceFamily::Nvidia,
            DeviceKind::Hip => DeviceFamily::Amd,
        }
    }

    /// The kind of the devices of `family`.
    pub const fn of_family(family: DeviceFamily) -> DeviceKind {
        match family {
            DeviceFamily::Cpu => DeviceKind::Cpu,
            DeviceFamily::Nvidia => DeviceKind::Cuda,
            DeviceFamily::Amd => DeviceKind::Hip,
        }
    }

    /// `cpu`, `cuda` or `hip`.
    pub const fn name(self) -> &'static str {
        self.family().runtime_name()
    }
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A device address, as the kernel sees it (64-bit on every target). On the CPU device it is
/// a host address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct DevicePtr(pub u64);

impl DevicePtr {
    /// The null device pointer.
    pub const NULL: DevicePtr = DevicePtr(0);

    /// `self` advanced by `bytes`.
    pub fn offset(self, bytes: usize) -> DevicePtr {
        DevicePtr(self.0.wrapping_add(bytes as u64))
    }
}

/// An opaque kernel handle given out by a [`Module`] (a `CUfunction`, `hipFunction_t`, or an
/// index into the module's table), valid as long as the module is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelHandle(pub u64);

/// A device's handles in its driver's API, for libraries that work on the same memory and
/// streams as the runtime (cuBLAS, rocBLAS, NCCL, cudarc…): see [`crate::Device::raw`].
/// Device memory is shared through [`DevicePtr`]s
/// ([`crate::DeviceBuffer::device_ptr`], [`crate::DeviceBuffer::from_raw_parts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RawDevice {
    /// A CUDA device: its ordinal (`CUdevice`) and its primary context (`CUcontext`), which
    /// the CUDA runtime API and the libraries built on it use for the device too.
    Cuda {
        /// The device's ordinal.
        ordinal: i32,
        /// The primary context, retained by the runtime while the device is open.
        context: *mut std::ffi::c_void,
    },
    /// A HIP device: its ordinal (`hipDevice_t`, what `hipSetDevice` takes).
    Hip {
        /// The device's ordinal.
        ordinal: i32,
    },
    /// The CPU device: no driver; its device pointers are host addresses.
    Cpu,
}

/// One device: memory, modules, synchronization.
pub trait Backend: Send + Sync + fmt::Debug {
    /// Which kind of device this is.
    fn kind(&self) -> DeviceKind;

    /// A one-line description: kind, ordinal, name, architecture
    /// (e.g. `cuda:0 NVIDIA H100 (sm_90)`, `cpu: x86_64 up to x86-64-v3 (16 threads)`).
    fn describe(&self) -> String;

    /// Allocates `bytes` of device memory, zeroed. `bytes` may be 0 (a unique non-null
    /// pointer or [`DevicePtr::NULL`] is returned; either may be passed to `free`).
    fn alloc_zeroed(&self, bytes: usize) -> Result<DevicePtr>;

    /// Frees memory from [`Backend::alloc_zeroed`].
    ///
    /// # Safety
    ///
    /// `ptr` came from `alloc_zeroed` of this backend and was not freed before; nothing uses
    /// the memory afterwards (launches issued before are waited for by the backend).
    unsafe fn free(&self, ptr: DevicePtr) -> Result<()>;

    /// Copies `src` to device memory at `dst`.
    ///
    /// # Safety
    ///
    /// `dst..dst + src.len()` lies inside one live allocation of this backend.
    unsafe fn copy_to_device(&self, dst: DevicePtr, src: &[u8]) -> Result<()>;

    /// Copies device memory at `src` to `dst`, after every earlier launch has finished.
    ///
    /// # Safety
    ///
    /// `src..src + dst.len()` lies inside one live allocation of this backend.
    unsafe fn copy_to_host(&self, dst: &mut [u8], src: DevicePtr) -> Result<()>;

    /// Loads a module from the registered images of one kernel module (all images whose
    /// `offload.module` is `module`, every target). The backend picks the image that fits
    /// the device, or returns [`crate::Error::NoCompatibleImage`].
    fn load_module(&self, module: &str, images: &[RegisteredImage<'_>]) -> Result<Box<dyn Module>>;

    /// Waits until every operation issued so far has finished.
    fn synchronize(&self) -> Result<()>;

    /// As [`Backend::synchronize`], giving up with [`crate::Error::Timeout`] after `timeout`.
    /// The CPU device's launches finish before they return, so it has nothing to wait for.
    fn synchronize_timeout(&self, timeout: Duration) -> Result<()> {
        let _ = timeout;
        self.synchronize()
    }

    /// What lost the device's context, once a fault lost it; `None` while it is usable (and
    /// always on the CPU device, which has none to lose).
    fn lost(&self) -> Option<String> {
        None
    }

    /// Resets the device: every object made before answers [`crate::Error::DeviceLost`],
    /// and the device is usable again for new ones. `Ok(false)` where there is nothing to
    /// reset (the CPU device, whose objects stay valid).
    fn reset(&self) -> Result<bool> {
        Ok(false)
    }

    /// How many times the device was reset: memory allocated in an earlier generation is
    /// gone. Bumped by a reset before it forgets the old allocations, so that an operation
    /// that missed one because of a reset finds the generation changed.
    fn generation(&self) -> u64 {
        0
    }

    /// [`Backend::alloc_zeroed`], and the generation the memory belongs to.
    fn alloc_zeroed_in_generation(&self, bytes: usize) -> Result<(DevicePtr, u64)> {
        Ok((self.alloc_zeroed(bytes)?, self.generation()))
    }

    /// The device's handles in its driver's API ([`RawDevice::Cpu`] for the CPU device).
    fn raw(&self) -> RawDevice {
        RawDevice::Cpu
    }

    /// The driver stream the device's own work is queued on; null where there is none.
    fn raw_stream(&self) -> *mut std::ffi::c_void {
        std::ptr::null_mut()
    }

    /// Makes the device's driver context current on the calling thread, for a library that
    /// works on the thread's current device (NCCL, RCCL); nothing where there is none.
    fn bind_to_thread(&self) -> Result<()> {
        Ok(())
    }

    /// The report of the kernel panic behind a kernel fault this backend reported, if a
    /// panicking kernel wrote one (GPUs: through the device's channel). Taken once.
    fn take_kernel_panic(&self) -> Option<crate::error::KernelPanicReport> {
        None
    }

    /// A stream of the device's own (a GPU driver's), or `None` where the device has none:
    /// then [`crate::Stream`] queues the backend's synchronous operations in order on a
    /// thread of its own (the CPU device).
    fn create_stream(&self) -> Result<Option<Box<dyn BackendStream>>> {
        Ok(None)
    }

    /// The driver stream `raw` of another owner as a stream of this device, not destroyed on
    /// drop; `None` where the device has no driver streams.
    ///
    /// # Safety
    /// `raw` is a live stream of this device's driver context and outlives the value returned.
    unsafe fn wrap_stream(&self, raw: *mut std::ffi::c_void) -> Option<Box<dyn BackendStream>> {
        let _ = raw;
        None
    }

    /// Copies `len` bytes at `src` of another device's backend `from` to `dst` of this one
    /// directly (a GPU driver's peer copy), waiting for it; `Ok(false)` where this backend
    /// cannot, and the caller stages the copy through host memory.
    ///
    /// # Safety
    /// `dst..dst + len` lies in one live allocation of this backend, `src..src + len` in one
    /// of `from`.
    unsafe fn copy_from_peer(
        &self,
        dst: DevicePtr,
        from: &dyn Backend,
        src: DevicePtr,
        len: usize,
    ) -> Result<bool> {
        let _ = (dst, from, src, len);
        Ok(false)
    }

    /// For downcasting to the backend's own type (peer copies between two of its devices).
    fn as_any(&self) -> &dyn Any;

    /// `bytes` (> 0) of zeroed page-locked host memory the device copies from and to
    /// asynchronously, or `None` where ordinary memory serves (the CPU device).
    fn alloc_host(&self, bytes: usize) -> Result<Option<Box<dyn HostMemory>>> {
        let _ = bytes;
        Ok(None)
    }

    /// Whether launches may group blocks into thread-block clusters of more than one.
    fn supports_clusters(&self) -> bool {
        false
    }

    /// The device's peak figures, where the driver tells them (the CPU device's are measured
    /// by `cargo offload profile` itself).
    fn peaks(&self) -> Option<DevicePeaks> {
        None
    }
}

/// A device's peak figures: what a roofline is drawn against.
#[derive(Debug, Clone, PartialEq)]
pub struct DevicePeaks {
    /// Memory bandwidth, in bytes a second.
    pub bytes_per_second: f64,
    /// Floating-point operations a second.
    pub flops_per_second: f64,
    /// Where the figures come from, said in words.
    pub source: String,
}

/// A GPU's attributes that its peak figures follow from.
pub(crate) struct GpuClocks<'a> {
    /// Streaming multiprocessors or compute units.
    pub units: u32,
    /// What a unit is called ("SMs", "compute units").
    pub unit_name: &'a str,
    /// FP32 lanes per unit.
    pub lanes: u64,
    /// The units' peak clock, kHz (0 where the driver does not say).
    pub clock_khz: u32,
    /// The memory's peak clock, kHz (0 where the driver does not say).
    pub memory_clock_khz: u32,
    /// The memory bus, bits (0 where the driver does not say).
    pub memory_bus_bits: u32,
}

impl DevicePeaks {
    /// FP32 FLOP/s (units × lanes × 2 for the fused multiply-add × the clock) and memory
    /// bandwidth (the memory clock × 2 for the double data rate × the bus width) from `clocks`;
    /// `None` where an attribute is unknown. `device` and `whose` frame the source: "`device`,
    /// 132 SMs × 128 lanes × 2 at 1.98 GHz; memory … (`whose`)".
    pub(crate) fn from_clocks(device: &str, clocks: &GpuClocks<'_>, whose: &str) -> Option<Self> {
        if clocks.units == 0
            || clocks.clock_khz == 0
            || clocks.memory_clock_khz == 0
            || clocks.memory_bus_bits == 0
        {
            return None;
        }
        let clock = f64::from(clocks.clock_khz) * 1e3;
        let memory_clock = f64::from(clocks.memory_clock_khz) * 1e3;
        Some(DevicePeaks {
            flops_per_second: f64::from(clocks.units) * clocks.lanes as f64 * 2.0 * clock,
            bytes_per_second: memory_clock * 2.0 * f64::from(clocks.memory_bus_bits) / 8.0,
            source: format!(
                "{device}, {} {} × {} lanes × 2 at {:.2} GHz; memory {:.2} GHz × 2 over {} bits \
                 ({whose})",
                clocks.units,
                clocks.unit_name,
                clocks.lanes,
                clock / 1e9,
                memory_clock / 1e9,
                clocks.memory_bus_bits
            ),
        })
    }
}

/// Host memory a backend gave out for asynchronous copies; freed on drop.
pub trait HostMemory: Send + Sync + fmt::Debug {
    /// The first byte.
    fn as_ptr(&self) -> *mut u8;
    /// Size in bytes.
    fn len(&self) -> usize;
    /// Whether it has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A device's own ordered queue of work (a CUDA or HIP stream).
///
/// # Safety of the `unsafe` methods
/// As for [`Module::launch`] and the [`Backend`] copies, except that the work is only
/// queued: every device range and host range passed stays valid, and host memory
/// untouched by anything else, until the stream has passed the operation (see
/// [`BackendStream::synchronize`] and [`BackendStream::record`]).
pub trait BackendStream: Send + Sync + fmt::Debug {
    /// The driver's stream handle (`CUstream`, `hipStream_t`).
    fn raw(&self) -> *mut std::ffi::c_void;

    /// Queues `launch` of `kernel` (from `module`, loaded on this stream's device).
    unsafe fn launch(
        &self,
        module: &dyn Module,
        kernel: KernelHandle,
        launch: &LaunchArgs<'_>,
    ) -> Result<()>;
    /// Queues a copy of `len` bytes from host `src` to device `dst`.
    unsafe fn copy_to_device(&self, dst: DevicePtr, src: *const u8, len: usize) -> Result<()>;
    /// Queues a copy of `len` bytes from device `src` to host `dst`.
    unsafe fn copy_to_host(&self, dst: *mut u8, src: DevicePtr, len: usize) -> Result<()>;
    /// An event recorded after the work queued so far.
    fn record(&self) -> Result<Box<dyn BackendEvent>>;
    /// Makes later work wait for `event` (of the same device).
    fn wait(&self, event: &dyn BackendEvent) -> Result<()>;
    /// Waits for everything queued; a kernel fault surfaces here.
    fn synchronize(&self) -> Result<()>;
    /// As [`BackendStream::synchronize`], giving up with [`crate::Error::Timeout`] after
    /// `timeout`.
    fn synchronize_timeout(&self, timeout: Duration) -> Result<()>;
    /// Starts recording the queued work into a graph instead of running it.
    fn begin_capture(&self) -> Result<()>;
    /// Ends the recording.
    fn end_capture(&self) -> Result<Box<dyn BackendGraph>>;
    /// Ends the recording and makes `graph` (of the same device) run it instead of what it
    /// ran: updated in place where the driver can, else replaced.
    fn end_capture_into(&self, graph: &mut dyn BackendGraph) -> Result<()>;
    /// Queues one replay of `graph` (of the same device).
    fn launch_graph(&self, graph: &dyn BackendGraph) -> Result<()>;
}

/// A point in a [`BackendStream`]'s work.
pub trait BackendEvent: Send + Sync + fmt::Debug {
    /// Waits until the work before it has completed.
    fn synchronize(&self) -> Result<()>;
    /// Whether the work before it has completed.
    fn query(&self) -> Result<bool>;
    /// Time from `start` (of the same device) to this event, both completed.
    fn elapsed_since(&self, start: &dyn BackendEvent) -> Result<Duration>;
    /// For downcasting to the backend's own type.
    fn as_any(&self) -> &dyn Any;
}

/// Work recorded from a [`BackendStream`], to replay.
pub trait BackendGraph: Send + Sync + fmt::Debug {
    /// For downcasting to the backend's own type.
    fn as_any(&self) -> &dyn Any;
    /// For downcasting to the backend's own type, to update it.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// A loaded device image.
pub trait Module: Send + Sync + fmt::Debug {
    /// Which registered image was loaded.
    fn image(&self) -> &ImageInfo;

    /// For downcasting to the backend's own type (a stream launches the modules of its
    /// device).
    fn as_any(&self) -> &dyn Any;

    /// Looks up a kernel by name; [`crate::Error::KernelNotFound`] when absent.
    fn kernel(&self, name: &str) -> Result<KernelHandle>;

    /// Launches `kernel` as `launch` says (its module name, if any, is not looked at).
    ///
    /// # Safety
    ///
    /// `kernel` came from [`Module::kernel`] of this module; `launch.params` holds one pointer
    /// per kernel parameter (`cuLaunchKernel`'s `kernelParams`), each pointing at a value of
    /// the parameter's exact type, valid until this call returns; device pointers among the
    /// values point into live allocations of the backend that loaded this module, large
    /// enough for every access the kernel makes for the launch's configuration, and stay live
    /// until the launch has finished (see the ordering rule of [`Backend`]).
    unsafe fn launch(&self, kernel: KernelHandle, launch: &LaunchArgs<'_>) -> Result<()>;

    /// The most blocks of `threads` threads with `shared_mem_bytes` of dynamic shared memory
    /// each that a cooperative launch of `kernel` may have: the blocks the device keeps
    /// resident at once.
    fn max_cooperative_blocks(
        &self,
        kernel: KernelHandle,
        threads: u32,
        shared_mem_bytes: u32,
    ) -> Result<u32>;

    /// The block size the driver picks for `kernel` with `shared_mem_bytes` of dynamic shared
    /// memory per block, the one that keeps the most threads resident
    /// (`cuOccupancyMaxPotentialBlockSize`, `hipModuleOccupancyMaxPotentialBlockSize`);
    /// `None` where there is no driver to ask (the CPU device), the driver lacks the call, or
    /// it finds no block that fits.
    fn driver_block_size(&self, kernel: KernelHandle, shared_mem_bytes: u32)
    -> Result<Option<u32>>;
}
