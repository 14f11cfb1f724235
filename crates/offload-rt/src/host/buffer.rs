//! Device memory holding typed elements.

use std::marker::PhantomData;
use std::mem::size_of;

use super::Device;
use super::profile::{self, Direction};
use crate::backend::{DeviceKind, DevicePtr};
use crate::error::{Error, Result};
use crate::kernel::DeviceCopy;

/// `len` elements of `T` in a device's memory. Freed on drop.
pub struct DeviceBuffer<T: DeviceCopy> {
    device: Device,
    ptr: DevicePtr,
    len: usize,
    /// Allocated by the runtime, which frees it on drop; memory of another's
    /// ([`DeviceBuffer::from_raw_parts`]) is left to its owner.
    owned: bool,
    /// The device's generation when the buffer was made: after a reset its memory is gone.
    generation: u64,
    _elems: PhantomData<T>,
}

impl<T: DeviceCopy> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("device", &self.device.describe())
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}

fn as_bytes<T: DeviceCopy>(s: &[T]) -> &[u8] {
    #[allow(clippy::let_unit_value)]
    let () = T::__OFFLOAD_LAYOUT;
    // SAFETY: DeviceCopy types have no padding, so every byte of the slice is initialized.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), size_of_val(s)) }
}

/// The bytes of `s`, to be overwritten with bytes of device memory: the caller checks them
/// with [`check_values`] (and replaces them if they fail) before `s` is read as `T`s again.
fn as_bytes_mut<T: DeviceCopy>(s: &mut [T]) -> &mut [u8] {
    #[allow(clippy::let_unit_value)]
    let () = T::__OFFLOAD_LAYOUT;
    // SAFETY: as in `as_bytes`; bytes written that are no `T` are found by `check_values`
    // and replaced before any read of them as `T`.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), size_of_val(s)) }
}

/// [`Error::InvalidValue`] if `bytes`, copied from device memory as `T`s, hold an element that
/// is no value of `T`.
pub(crate) fn check_values<T: DeviceCopy>(bytes: &[u8]) -> Result<()> {
    match crate::kernel::first_invalid::<T>(bytes) {
        None => Ok(()),
        Some(index) => Err(Error::InvalidValue {
            type_name: std::any::type_name::<T>(),
            index,
        }),
    }
}

impl<T: DeviceCopy> DeviceBuffer<T> {
    /// `len` zeroed elements on `device`.
    pub fn zeroed(device: &Device, len: usize) -> Result<DeviceBuffer<T>> {
        #[allow(clippy::let_unit_value)]
        let () = T::__OFFLOAD_LAYOUT;
        let bytes = len.checked_mul(size_of::<T>()).ok_or(Error::SizeOverflow {
            len,
            elem_size: size_of::<T>(),
        })?;
        let (ptr, generation) = device
            .backend()
            .alloc_zeroed_in_generation(bytes)
            .map_err(|e| device.with_fault_context(e))?;
        Ok(DeviceBuffer {
            device: device.clone(),
            ptr,
            len,
            owned: true,
            generation,
            _elems: PhantomData,
        })
    }

    /// A buffer over `len` elements at `ptr` of `device` that another owner allocated (a
    /// library working on the same device: cuBLAS's workspace, a cudarc or HIP allocation,
    /// NCCL's buffers), so that kernels launch on it and copies reach it as on the runtime's
    /// own buffers. Dropping the buffer leaves the memory to its owner.
    ///
    /// # Safety
    /// `ptr` is the device address of `len` elements of `T`, aligned for `T`, in memory of
    /// `device`'s driver context (the CPU device: host memory), every bit pattern of which is
    /// a `T` the program may read; it stays allocated while the buffer lives, and nothing
    /// else writes it while a launch or a copy of the buffer may run (on a stream, until the
    /// stream has passed it).
    pub unsafe fn from_raw_parts(device: &Device, ptr: DevicePtr, len: usize) -> DeviceBuffer<T> {
        #[allow(clippy::let_unit_value)]
        let () = T::__OFFLOAD_LAYOUT;
        DeviceBuffer {
            device: device.clone(),
            ptr,
            len,
            owned: false,
            generation: device.generation(),
            _elems: PhantomData,
        }
    }

    /// A copy of `data` on `device`.
    pub fn from_slice(device: &Device, data: &[T]) -> Result<DeviceBuffer<T>> {
        let mut buf = DeviceBuffer::zeroed(device, data.len())?;
        buf.copy_from(data)?;
        Ok(buf)
    }

    /// Overwrites the buffer with `data` (same length), after the work queued before it on
    /// the device's default stream (and, on the CPU device, on all its streams).
    pub fn copy_from(&mut self, data: &[T]) -> Result<()> {
        self.check_len(data.len())?;
        self.check_live()?;
        self.device.quiesce_queues();
        let bytes = as_bytes(data);
        let cpu = || self.device.kind() == DeviceKind::Cpu;
        profile::copy(cpu, Direction::ToDevice, 0, bytes.len(), || {
            // SAFETY: the allocation holds `len` elements, as many bytes as `data`.
            unsafe { self.device.backend().copy_to_device(self.ptr, bytes) }
        })
        .map_err(|e| self.device.lost_or(self.generation, e))
    }

    /// Copies the buffer into `out` (same length), after every earlier launch on the
    /// device's default stream (and, on the CPU device, on all its streams); work on a GPU
    /// stream is waited for with [`Stream::synchronize`](crate::Stream::synchronize) or an
    /// event.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`], a failure of the device, or [`Error::InvalidValue`] when `T`
    /// has invalid bit patterns (`bool`, an enum) and the buffer holds one (`out` is then
    /// zeroed).
    pub fn copy_to(&self, out: &mut [T]) -> Result<()> {
        self.check_len(out.len())?;
        self.check_live()?;
        self.device.quiesce_queues();
        let bytes = as_bytes_mut(out);
        let cpu = || self.device.kind() == DeviceKind::Cpu;
        profile::copy(cpu, Direction::ToHost, 0, bytes.len(), || {
            // SAFETY: the allocation holds `len` elements, as many bytes as `out`.
            unsafe { self.device.backend().copy_to_host(bytes, self.ptr) }
        })
        .map_err(|e| self.device.lost_or(self.generation, e))?;
        // Invalid elements are replaced by zero bytes (a valid `T`): `out` stays sound.
        check_values::<T>(bytes).inspect_err(|_| bytes.fill(0))
    }

    /// The buffer's contents, after every earlier launch.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut out: Vec<T> = Vec::with_capacity(self.len);
        // SAFETY: the capacity is `len`; all-zero bytes are a valid `T` (DeviceCopy), so the
        // elements are initialized before `set_len`.
        unsafe {
            std::ptr::write_bytes(out.as_mut_ptr(), 0, self.len);
            out.set_len(self.len);
        }
        self.copy_to(&mut out)?;
        Ok(out)
    }

    /// Overwrites the buffer with the contents of `src` (same length), which may live on
    /// another device: a peer copy between two GPUs of one driver (direct where they can
    /// reach each other), else staged through host memory.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] or a failure of either device.
    pub fn copy_from_buffer(&mut self, src: &DeviceBuffer<T>) -> Result<()> {
        self.check_len(src.len)?;
        self.check_live()?;
        src.check_live()?;
        let bytes = self.len * size_of::<T>();
        if !self.device.same_device(&src.device) && bytes != 0 {
            // SAFETY: both are whole live allocations of their devices, `bytes` long.
            let direct = unsafe {
                self.device
                    .backend()
                    .copy_from_peer(self.ptr, src.device.backend(), src.ptr, bytes)
            }
            .map_err(|e| self.device.lost_or(self.generation, e))?;
            if direct {
                return Ok(());
            }
        }
        let staged = src.to_vec()?;
        self.copy_from(&staged)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device the buffer lives on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The buffer's device address.
    pub fn device_ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// The device address for argument `index` of a launch of `kernel` on `device`, or
    /// [`Error::WrongDevice`].
    #[doc(hidden)]
    pub fn device_ptr_on(
        &self,
        device: &Device,
        kernel: &'static str,
        index: usize,
    ) -> Result<DevicePtr> {
        if self.device.same_device(device) {
            let ptr = self.live_ptr()?;
            device.note_launch_argument(self.generation);
            Ok(ptr)
        } else {
            Err(Error::WrongDevice { kernel, index })
        }
    }

    /// [`DeviceBuffer::device_ptr_on`] for a typed launch, adding the buffer's bytes to
    /// `bytes` (what a profile counts as the launch's traffic).
    #[doc(hidden)]
    pub fn device_ptr_for_launch(
        &self,
        device: &Device,
        kernel: &'static str,
        index: usize,
        bytes: &mut u64,
    ) -> Result<DevicePtr> {
        let ptr = self.device_ptr_on(device, kernel, index)?;
        *bytes = bytes.saturating_add((self.len() as u64).saturating_mul(size_of::<T>() as u64));
        Ok(ptr)
    }

    /// [`Error::DeviceLost`] when the device was reset after the buffer was made.
    fn check_live(&self) -> Result<()> {
        self.device.check_generation(self.generation)
    }

    /// The buffer's device address, unless the device was reset after the buffer was made.
    pub(crate) fn live_ptr(&self) -> Result<DevicePtr> {
        self.check_live().map(|()| self.ptr)
    }

    fn check_len(&self, host: usize) -> Result<()> {
        if host == self.len {
            Ok(())
        } else {
            Err(Error::LengthMismatch {
                device: self.len,
                host,
            })
        }
    }
}

impl<T: DeviceCopy> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        // The CPU device's queued work may still use the memory; GPU drivers' free waits for
        // work using it by itself.
        self.device.quiesce_queues();
        if !self.owned || self.check_live().is_err() {
            return;
        }
        // SAFETY: `ptr` came from this device's `alloc_zeroed` and is freed only here. A free
        // failing (a GPU context already lost) leaves nothing else to do.
        let _ = unsafe { self.device.backend().free(self.ptr) };
    }
}

impl Device {
    /// `len` zeroed elements on this device.
    pub fn alloc_zeroed<T: DeviceCopy>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        DeviceBuffer::zeroed(self, len)
    }

    /// A copy of `data` on this device.
    pub fn copy_from_slice<T: DeviceCopy>(&self, data: &[T]) -> Result<DeviceBuffer<T>> {
        DeviceBuffer::from_slice(self, data)
    }
}
