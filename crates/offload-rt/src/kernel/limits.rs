//! The shared and constant memory every device gives a kernel.

/// Bytes of static shared memory ([`shared_array!`](crate::shared_array!)) one kernel may use, the same on every
/// device: CUDA refuses more in static declarations (`ptxas`), AMD GPUs have 64 KiB of LDS
/// per workgroup, and the CPU device's per-block arena is this size. The device link refuses
/// a GPU kernel over it, naming the kernel; on the CPU device the launch fails.
pub const MAX_STATIC_SHARED_BYTES: usize = offload_format::abi::MAX_STATIC_SHARED_BYTES;

/// Bytes of shared memory, static ([`shared_array!`](crate::shared_array!)) and dynamic ([`dynamic_shared`](super::dynamic_shared)) together,
/// that one block may use on every device: an AMD GPU's 64 KiB of LDS per workgroup (NVIDIA's
/// sm_70 and later give more, once the CUDA backend opts the kernel in above 48 KiB). The CPU
/// device refuses a launch over it with `Error::SharedMemoryLimit`, naming both figures.
pub const MAX_SHARED_BYTES: usize = offload_format::abi::MAX_SHARED_BYTES;

/// Alignment of [`dynamic_shared`](super::dynamic_shared)'s memory on every device.
pub const DYNAMIC_SHARED_ALIGN: usize = 16;

/// Bytes of constant memory ([`constant!`](crate::constant!)) a kernel crate may use, its
/// statics together: an NVIDIA module's constant bank for user data. The device link refuses
/// an NVIDIA image over it; one static over it does not compile.
pub const MAX_CONSTANT_BYTES: usize = offload_format::abi::MAX_CONSTANT_BYTES;
