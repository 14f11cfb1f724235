//! Tensor maps for the tensor memory accelerator: the 128-byte descriptor of a 2-D tile of a
//! device buffer that `kernel::tma`'s copies read, encoded by the CUDA driver
//! (`cuTensorMapEncodeTiled`, CUDA 12.0 and later) and placed in device memory, where a kernel
//! takes it as a `*const TensorMap` parameter.
//!
//! ```ignore
//! let a_map = a.tensor_map_2d(TensorMapLayout {
//!     rows: m, cols: k, row_stride: k, box_rows: 128, box_cols: 64,
//!     swizzle: TensorMapSwizzle::Bytes128,
//! })?;
//! unsafe { gemm_tma::<f16>.launch(&device, config, n, k, &a_map, &b_map, &mut c) }?;
//! ```

use std::ffi::c_int;

use crate::backend::DeviceKind;
use crate::error::{Error, Result};
use crate::host::buffer::DeviceBuffer;
use crate::kernel::DeviceCopy;
pub use crate::kernel::tma::TensorMap;

/// How the tensor memory accelerator lays a box out in shared memory: its rows' 16-byte chunks
/// XOR-swizzled within 32, 64 or 128 bytes (the layouts `kernel::wgmma`'s descriptors name),
/// or as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorMapSwizzle {
    /// Rows as they are.
    None,
    /// Within 32 bytes.
    Bytes32,
    /// Within 64 bytes.
    Bytes64,
    /// Within 128 bytes: a box row of at most 128 bytes, the shared tile aligned to 1024.
    Bytes128,
}

impl TensorMapSwizzle {
    /// The bytes a swizzled box row may span; `None` for no swizzle.
    fn span(self) -> Option<u64> {
        match self {
            Self::None => None,
            Self::Bytes32 => Some(32),
            Self::Bytes64 => Some(64),
            Self::Bytes128 => Some(128),
        }
    }

    /// CUDA's `CUtensorMapSwizzle`.
    fn code(self) -> c_int {
        match self {
            Self::None => 0,
            Self::Bytes32 => 1,
            Self::Bytes64 => 2,
            Self::Bytes128 => 3,
        }
    }
}

/// A row-major 2-D view of a buffer and the box one copy moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorMapLayout {
    /// Rows of the tensor.
    pub rows: u64,
    /// Elements of a row (the innermost dimension: a copy's first coordinate).
    pub cols: u64,
    /// Elements from one row's start to the next's, at least `cols`; `row_stride` elements
    /// are a multiple of 16 bytes.
    pub row_stride: u64,
    /// Rows of the box, 1 to 256.
    pub box_rows: u32,
    /// Elements of a box row, 1 to 256: a multiple of 16 bytes, and at most the swizzle's span.
    pub box_cols: u32,
    /// The box's layout in shared memory.
    pub swizzle: TensorMapSwizzle,
}

mod sealed {
    pub trait Sealed {}
}

/// An element type the tensor memory accelerator copies, with CUDA's
/// `CUtensorMapDataType` for it.
pub trait TensorMapElement: DeviceCopy + sealed::Sealed {
    /// CUDA's data type code.
    #[doc(hidden)]
    const DATA_TYPE: c_int;
}

macro_rules! elements {
    ($($t:ty => $code:literal),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl TensorMapElement for $t {
            const DATA_TYPE: c_int = $code;
        }
    )*};
}

elements!(u8 => 0, u16 => 1, u32 => 2, i32 => 3, u64 => 4, i64 => 5, f32 => 7, f64 => 8);
#[cfg(feature = "half")]
elements!(::half::f16 => 6, ::half::bf16 => 9);

/// What is wrong with `layout` for a buffer of `len` elements of `size` bytes at `address`,
/// before the driver is asked.
fn check(layout: &TensorMapLayout, len: usize, size: u64, address: u64) -> Option<String> {
    let TensorMapLayout {
        rows,
        cols,
        row_stride,
        box_rows,
        box_cols,
        swizzle,
    } = *layout;
    if rows == 0 || cols == 0 {
        return Some(format!(
            "the tensor is {rows}×{cols}: both must be at least 1"
        ));
    }
    if row_stride < cols {
        return Some(format!(
            "the row stride, {row_stride} elements, is less than a row's {cols}"
        ));
    }
    if rows > 1 && !(row_stride * size).is_multiple_of(16) {
        return Some(format!(
            "the row stride, {row_stride} elements of {size} bytes, is not a multiple of 16 bytes"
        ));
    }
    if !address.is_multiple_of(16) {
        return Some(format!(
            "the buffer's address {address:#x} is not 16-byte aligned"
        ));
    }
    let needed = (rows - 1)
        .checked_mul(row_stride)
        .and_then(|n| n.checked_add(cols));
    if needed.is_none_or(|n| n > len as u64) {
        return Some(format!(
            "{rows} rows of {cols} elements {row_stride} apart reach past the buffer's {len}"
        ));
    }
    for (what, value) in [("rows", box_rows), ("columns", box_cols)] {
        if !(1..=256).contains(&value) {
            return Some(format!("the box has {value} {what}: 1 to 256"));
        }
    }
    let row_bytes = u64::from(box_cols) * size;
    match swizzle.span() {
        Some(span) if row_bytes > span => Some(format!(
            "a box row is {row_bytes} bytes, more than the {span} bytes its swizzle spans"
        )),
        None if !row_bytes.is_multiple_of(16) => Some(format!(
            "a box row is {row_bytes} bytes, not a multiple of 16"
        )),
        _ => None,
    }
}

impl<T: TensorMapElement> DeviceBuffer<T> {
    /// The tensor map of this buffer seen as `layout`, in a device buffer of its own on the
    /// same device: pass it to a kernel's `*const TensorMap` parameter. The map holds this
    /// buffer's address, so a kernel may use it only while this buffer lives.
    ///
    /// # Errors
    ///
    /// [`Error::TensorMap`] when the device has no tensor memory accelerator (AMD GPUs, the
    /// CPU device), the CUDA driver cannot encode maps (before CUDA 12.0), `layout` does not fit
    /// the buffer or the accelerator's rules (named), or the driver refuses it; the errors of
    /// an allocation and a copy.
    pub fn tensor_map_2d(&self, layout: TensorMapLayout) -> Result<DeviceBuffer<TensorMap>> {
        let device = self.device();
        let refuse = |reason: String| Error::TensorMap {
            device: device.describe().to_owned(),
            reason,
        };
        if device.kind() != DeviceKind::Cuda {
            return Err(refuse(
                "tensor maps are NVIDIA's (sm_90 and later); branch on `kernel::has_tma()` for \
                 another path here"
                    .to_owned(),
            ));
        }
        let size = size_of::<T>() as u64;
        let address = self.device_ptr().0;
        if let Some(reason) = check(&layout, self.len(), size, address) {
            return Err(refuse(reason));
        }
        let words = crate::backend::cuda::encode_tensor_map_2d(
            T::DATA_TYPE,
            address,
            [layout.cols, layout.rows],
            layout.row_stride * size,
            [layout.box_cols, layout.box_rows],
            layout.swizzle.code(),
        )
        .map_err(|reason| refuse(format!("{reason} ({layout:?})")))?;
        DeviceBuffer::from_slice(device, &[TensorMap { words }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> TensorMapLayout {
        TensorMapLayout {
            rows: 256,
            cols: 128,
            row_stride: 128,
            box_rows: 128,
            box_cols: 64,
            swizzle: TensorMapSwizzle::Bytes128,
        }
    }

    /// Each rule of the accelerator is checked before the driver, named.
    #[test]
    fn layouts_are_checked_before_the_driver() {
        assert_eq!(check(&layout(), 256 * 128, 2, 0x1000), None);
        let with = |f: fn(&mut TensorMapLayout)| {
            let mut l = layout();
            f(&mut l);
            check(&l, 256 * 128, 2, 0x1000).unwrap()
        };
        assert!(with(|l| l.rows = 0).contains("at least 1"));
        assert!(with(|l| l.row_stride = 100).contains("less than a row"));
        assert!(
            with(|l| {
                l.cols = 100;
                l.row_stride = 100;
            })
            .contains("multiple of 16 bytes")
        );
        assert!(with(|l| l.rows = 300).contains("reach past the buffer's 32768"));
        assert!(with(|l| l.box_rows = 257).contains("257 rows"));
        assert!(with(|l| l.box_cols = 128).contains("256 bytes, more than the 128"));
        assert!(
            with(|l| {
                l.swizzle = TensorMapSwizzle::None;
                l.box_cols = 4;
            })
            .contains("8 bytes, not a multiple of 16")
        );
        assert!(
            check(&layout(), 256 * 128, 2, 0x1008)
                .unwrap()
                .contains("not 16-byte aligned")
        );
    }
}
