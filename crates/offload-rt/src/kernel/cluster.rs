//! Thread-block clusters (NVIDIA sm_90 and later): blocks launched together on neighbouring
//! multiprocessors (a launch with a cluster shape; a launch without one runs each block as a
//! cluster of one), which synchronize with
//! [`sync`] and read and write each other's shared memory ([`map_shared`]). The tensor memory
//! accelerator's multicast loads ([`super::tma::load_2d_multicast`]) feed several blocks of a
//! cluster from one read of global memory.
//!
//! | device | |
//! |---|---|
//! | NVIDIA sm_90 and later | `barrier.cluster`, `mapa`, `%cluster_*` registers |
//! | older NVIDIA, AMD GPUs | refused by the device link, naming the kernels |
//! | CPU device | a panic naming the feature (the kernel's launch fails with it) |

/// Waits until every thread of every block of the cluster has called it; shared-memory
/// writes before it are visible to the cluster's blocks after it.
#[inline(always)]
pub fn sync() {
    arrive();
    wait();
}

/// The first half of [`sync`]: this thread has arrived (its earlier writes are released).
#[inline(always)]
pub fn arrive() {
    imp::arrive();
}

/// The second half of [`sync`]: waits for every thread of the cluster to [`arrive`].
#[inline(always)]
pub fn wait() {
    imp::wait();
}

/// This block's rank in its cluster, `0..blocks()`.
#[inline(always)]
pub fn block_rank() -> u32 {
    imp::block_rank()
}

/// The number of blocks in this block's cluster.
#[inline(always)]
pub fn blocks() -> u32 {
    imp::blocks()
}

/// The address of `ptr`'s place in the shared memory of the cluster's block of rank `rank`:
/// the same variable, another block's copy (distributed shared memory).
///
/// # Safety
///
/// `ptr` is in this block's shared memory and `rank` is below [`blocks`]; the other block's
/// memory is read or written only while it runs (between two [`sync`]s both take part in).
#[inline(always)]
pub unsafe fn map_shared<T>(ptr: *mut T, rank: u32) -> *mut T {
    // SAFETY: the caller's contract.
    unsafe { imp::map_shared(ptr.cast(), rank).cast() }
}

#[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod imp {
    unsafe extern "C" {
        // Defined by the device link for sm_90 and later; a kernel that reaches one on another
        // GPU is refused, named.
        #[link_name = offload_format::abi_name!(CLUSTER_ARRIVE)]
        fn __offload_cluster_arrive();
        #[link_name = offload_format::abi_name!(CLUSTER_WAIT)]
        fn __offload_cluster_wait();
        #[link_name = offload_format::abi_name!(CLUSTER_BLOCK_RANK)]
        fn __offload_cluster_block_rank() -> u32;
        #[link_name = offload_format::abi_name!(CLUSTER_BLOCKS)]
        fn __offload_cluster_blocks() -> u32;
        #[link_name = offload_format::abi_name!(CLUSTER_MAP_SHARED)]
        fn __offload_cluster_map_shared(ptr: *mut u8, rank: u32) -> *mut u8;
    }

    #[inline(always)]
    pub(super) fn arrive() {
        // SAFETY: a barrier of the cluster has no preconditions beyond uniform use.
        unsafe { __offload_cluster_arrive() }
    }

    #[inline(always)]
    pub(super) fn wait() {
        // SAFETY: as `arrive`.
        unsafe { __offload_cluster_wait() }
    }

    #[inline(always)]
    pub(super) fn block_rank() -> u32 {
        // SAFETY: reads a special register.
        unsafe { __offload_cluster_block_rank() }
    }

    #[inline(always)]
    pub(super) fn blocks() -> u32 {
        // SAFETY: reads a special register.
        unsafe { __offload_cluster_blocks() }
    }

    /// # Safety
    /// As [`super::map_shared`].
    #[inline(always)]
    pub(super) unsafe fn map_shared(ptr: *mut u8, rank: u32) -> *mut u8 {
        // SAFETY: the caller's contract.
        unsafe { __offload_cluster_map_shared(ptr, rank) }
    }
}

#[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
mod imp {
    use super::super::hopper_only;

    const FEATURE: &str = "thread-block clusters";

    pub(super) fn arrive() {
        hopper_only(FEATURE)
    }
    pub(super) fn wait() {
        hopper_only(FEATURE)
    }
    pub(super) fn block_rank() -> u32 {
        hopper_only(FEATURE)
    }
    pub(super) fn blocks() -> u32 {
        hopper_only(FEATURE)
    }
    pub(super) unsafe fn map_shared(_: *mut u8, _: u32) -> *mut u8 {
        hopper_only(FEATURE)
    }
}
