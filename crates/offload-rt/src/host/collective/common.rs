//! What a communicator and its implementations share: the elements and reductions of the
//! collectives, the [`Collectives`] each implementation provides, and the sends and receives
//! of a group.

use crate::backend::DevicePtr;
use crate::error::Result;
use crate::host::Device;
use crate::kernel::DeviceCopy;

/// How a reduction combines the ranks' elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReduceOp {
    /// The sum (integers wrap).
    Sum,
    /// The product (integers wrap).
    Prod,
    /// The largest.
    Max,
    /// The smallest.
    Min,
}

impl ReduceOp {
    /// `ncclRedOp_t`.
    pub(super) fn nccl(self) -> i32 {
        match self {
            ReduceOp::Sum => 0,
            ReduceOp::Prod => 1,
            ReduceOp::Max => 2,
            ReduceOp::Min => 3,
        }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// An element type the collectives move and reduce: the integers of 8, 32 and 64 bits, `f32`,
/// `f64` and, with the `half` feature, `f16` and `bf16` (the types NCCL and RCCL reduce).
pub trait CollectiveElement: DeviceCopy + sealed::Sealed {
    /// `ncclDataType_t`.
    #[doc(hidden)]
    const NCCL_TYPE: i32;
    /// `a` and `b` combined by `op`, as the CPU device reduces types MPI has no type for.
    #[doc(hidden)]
    fn combine(a: Self, b: Self, op: ReduceOp) -> Self;
    /// The MPI datatype, where MPI has one.
    #[cfg(feature = "mpi")]
    #[doc(hidden)]
    fn mpi_type() -> Option<mpi::ffi::MPI_Datatype>;
}

macro_rules! integer_elements {
    ($($t:ty => $nccl:expr, $mpi:ident;)*) => {$(
        impl sealed::Sealed for $t {}
        impl CollectiveElement for $t {
            const NCCL_TYPE: i32 = $nccl;
            fn combine(a: Self, b: Self, op: ReduceOp) -> Self {
                match op {
                    ReduceOp::Sum => a.wrapping_add(b),
                    ReduceOp::Prod => a.wrapping_mul(b),
                    ReduceOp::Max => a.max(b),
                    ReduceOp::Min => a.min(b),
                }
            }
            #[cfg(feature = "mpi")]
            fn mpi_type() -> Option<mpi::ffi::MPI_Datatype> {
                // SAFETY: a constant of the MPI library, set before `main`.
                Some(unsafe { mpi::ffi::$mpi })
            }
        }
    )*};
}

integer_elements! {
    i8 => 0, RSMPI_INT8_T;
    u8 => 1, RSMPI_UINT8_T;
    i32 => 2, RSMPI_INT32_T;
    u32 => 3, RSMPI_UINT32_T;
    i64 => 4, RSMPI_INT64_T;
    u64 => 5, RSMPI_UINT64_T;
}

macro_rules! float_elements {
    ($($t:ty => $nccl:expr, $mpi:ident;)*) => {$(
        impl sealed::Sealed for $t {}
        impl CollectiveElement for $t {
            const NCCL_TYPE: i32 = $nccl;
            fn combine(a: Self, b: Self, op: ReduceOp) -> Self {
                match op {
                    ReduceOp::Sum => a + b,
                    ReduceOp::Prod => a * b,
                    ReduceOp::Max => a.max(b),
                    ReduceOp::Min => a.min(b),
                }
            }
            #[cfg(feature = "mpi")]
            fn mpi_type() -> Option<mpi::ffi::MPI_Datatype> {
                // SAFETY: a constant of the MPI library, set before `main`.
                Some(unsafe { mpi::ffi::$mpi })
            }
        }
    )*};
}

float_elements! {
    f32 => 7, RSMPI_FLOAT;
    f64 => 8, RSMPI_DOUBLE;
}

#[cfg(feature = "half")]
macro_rules! half_elements {
    ($($t:ty => $nccl:expr;)*) => {$(
        impl sealed::Sealed for $t {}
        impl CollectiveElement for $t {
            const NCCL_TYPE: i32 = $nccl;
            fn combine(a: Self, b: Self, op: ReduceOp) -> Self {
                // Each step rounded to the type, as NCCL's reductions of it are.
                let (x, y) = (a.to_f32(), b.to_f32());
                <$t>::from_f32(match op {
                    ReduceOp::Sum => x + y,
                    ReduceOp::Prod => x * y,
                    ReduceOp::Max => x.max(y),
                    ReduceOp::Min => x.min(y),
                })
            }
            #[cfg(feature = "mpi")]
            fn mpi_type() -> Option<mpi::ffi::MPI_Datatype> {
                None
            }
        }
    )*};
}

#[cfg(feature = "half")]
half_elements! {
    half::f16 => 6;
    half::bf16 => 9;
}

/// What an implementation of a communicator does, once [`Communicator`] has checked the
/// arguments: NCCL's calls queued on the device's stream, or MPI's on the CPU device's host
/// memory once its queues drain.
///
/// # Safety (of the `unsafe` methods)
/// The pointers are of live buffers of `device` with the elements the operation reads and
/// writes (as [`Communicator`]'s checks establish), touched by nothing else but in the
/// device's stream order.
pub(super) trait Collectives {
    /// Which library carries the calls, with its version.
    fn library(&self, device: &Device) -> String;

    /// [`Communicator::all_reduce`]: `transfer` is (send, recv, element count).
    unsafe fn all_reduce<T: CollectiveElement>(
        &self,
        device: &Device,
        transfer: (DevicePtr, DevicePtr, usize),
        op: ReduceOp,
    ) -> Result<()>;

    /// [`Communicator::broadcast`]: `count` elements at `at`, from rank `root`.
    unsafe fn broadcast<T: CollectiveElement>(
        &self,
        device: &Device,
        at: DevicePtr,
        count: usize,
        root: usize,
    ) -> Result<()>;

    /// [`Communicator::all_gather`]: `transfer` is (from, to, element count sent).
    unsafe fn all_gather<T: CollectiveElement>(
        &self,
        device: &Device,
        transfer: (DevicePtr, DevicePtr, usize),
    ) -> Result<()>;

    /// [`Communicator::reduce_scatter`]: `transfer` is (from, to, element count received).
    unsafe fn reduce_scatter<T: CollectiveElement>(
        &self,
        device: &Device,
        transfer: (DevicePtr, DevicePtr, usize),
        op: ReduceOp,
    ) -> Result<()>;

    /// [`Communicator::group`]'s sends and receives, posted together.
    unsafe fn exchange(&self, device: &Device, ops: &[P2p]) -> Result<()>;
}

/// One send or receive of a [`P2pGroup`].
pub(super) struct P2p {
    pub(super) send: bool,
    pub(super) ptr: DevicePtr,
    pub(super) count: usize,
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(super) bytes: usize,
    pub(super) nccl_type: i32,
    pub(super) peer: usize,
}

/// The pointer at device address `at` (on the CPU device, a host address).
pub(super) fn address<T>(at: DevicePtr) -> *mut T {
    std::ptr::with_exposed_provenance_mut(at.0 as usize)
}
