//! The tensor memory accelerator (TMA, NVIDIA sm_90 and later): one thread starts the copy of
//! a whole tile between global and shared memory, described by a [`TensorMap`] the host
//! encoded once (the tensor's address, sizes and strides, the tile's box and the shared
//! memory's swizzle); the copy completes on an [`MBarrier`] as bytes, with no thread's
//! registers involved and no address computed per element.
//!
//! | device | |
//! |---|---|
//! | NVIDIA sm_90 and later | `cp.async.bulk.tensor` (`UTMALDG`/`UTMASTG`) |
//! | older NVIDIA, AMD GPUs | refused by the device link, naming the kernels |
//! | CPU device | a panic naming the feature (the kernel's launch fails with it) |

use super::mbarrier::MBarrier;

pub use super::tensor_map::TensorMap;

/// Starts copying the box of `map`'s tensor at element coordinates (`col`, `row`) (the
/// innermost dimension first, as the map was encoded) into shared memory at `dst`; the copy
/// completes on `barrier` as the box's bytes, which this or another thread announced with
/// [`MBarrier::arrive_expect_tx`]. Coordinates outside the tensor read zeros.
///
/// # Safety
///
/// `map` points to a [`TensorMap`] in global memory, 64-byte aligned, unchanged while the copy
/// runs; `dst` is shared memory of the box's size, aligned as the map's swizzle asks (128
/// bytes without one, 1024 with the 128-byte swizzle), not read or written until `barrier`'s
/// phase completes; `barrier` expects the bytes.
#[inline(always)]
pub unsafe fn load_2d<T>(
    dst: *mut T,
    map: *const TensorMap,
    barrier: MBarrier,
    col: i32,
    row: i32,
) {
    // SAFETY: the caller's contract.
    unsafe { imp::load_2d(dst.cast(), map, barrier.as_ptr(), col, row) }
}

/// [`load_2d`] into the shared memory at the same offset of each block of the cluster whose
/// rank's bit is set in `blocks`, completing on each one's barrier at `barrier`'s offset: one
/// load from global memory for several blocks.
///
/// # Safety
///
/// As [`load_2d`], for each block of `blocks` (ranks of the launch's cluster).
#[inline(always)]
pub unsafe fn load_2d_multicast<T>(
    dst: *mut T,
    map: *const TensorMap,
    barrier: MBarrier,
    col: i32,
    row: i32,
    blocks: u16,
) {
    // SAFETY: the caller's contract.
    unsafe { imp::load_2d_multicast(dst.cast(), map, barrier.as_ptr(), col, row, blocks) }
}

/// Starts copying the box at `src` in shared memory to `map`'s tensor at (`col`, `row`);
/// boxes reaching past the tensor write only what lies inside. Complete for reuse of `src`
/// after [`store_commit`] and [`store_wait`].
///
/// # Safety
///
/// As [`load_2d`] with the directions swapped; the block's writes of `src` are made visible to
/// the copy first ([`fence_proxy_async`] after them, then a barrier).
#[inline(always)]
pub unsafe fn store_2d<T>(map: *const TensorMap, src: *const T, col: i32, row: i32) {
    // SAFETY: the caller's contract.
    unsafe { imp::store_2d(map, src.cast(), col, row) }
}

/// Closes this thread's group of [`store_2d`]s.
#[inline(always)]
pub fn store_commit() {
    imp::store_commit();
}

/// Waits until at most `N` of this thread's store groups still read their shared memory
/// (`N` at most 7).
#[inline(always)]
pub fn store_wait<const N: usize>() {
    const { assert!(N <= 7, "store_wait: at most 7 groups in flight") };
    imp::store_wait(N);
}

/// Fetches `map` into the accelerator's cache ahead of its first copy.
///
/// # Safety
///
/// `map` points to a [`TensorMap`] in global memory.
#[inline(always)]
pub unsafe fn prefetch(map: *const TensorMap) {
    // SAFETY: the caller's contract.
    unsafe { imp::prefetch(map) }
}

/// Makes this thread's writes to shared memory visible to the asynchronous units (the
/// tensor memory accelerator's stores, `wgmma`'s reads) after the barrier that follows.
#[inline(always)]
pub fn fence_proxy_async() {
    imp::fence_proxy_async();
}

#[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod imp {
    use super::TensorMap;

    unsafe extern "C" {
        // Defined by the device link for sm_90 and later (`cp.async.bulk.tensor`); a kernel
        // that reaches one on another GPU is refused, named.
        #[link_name = offload_format::abi_name!(TMA_LOAD_2D)]
        fn __offload_tma_load_2d(
            dst: *mut u8,
            map: *const TensorMap,
            bar: *mut u64,
            col: i32,
            row: i32,
        );
        #[link_name = offload_format::abi_name!(TMA_LOAD_2D_MULTICAST)]
        fn __offload_tma_load_2d_multicast(
            dst: *mut u8,
            map: *const TensorMap,
            bar: *mut u64,
            col: i32,
            row: i32,
            blocks: u16,
        );
        #[link_name = offload_format::abi_name!(TMA_STORE_2D)]
        fn __offload_tma_store_2d(map: *const TensorMap, src: *const u8, col: i32, row: i32);
        #[link_name = offload_format::abi_name!(TMA_STORE_COMMIT)]
        fn __offload_tma_store_commit();
        #[link_name = concat!(offload_format::abi_name!(TMA_STORE_WAIT_PREFIX), "0")]
        fn __offload_tma_store_wait_0();
        #[link_name = concat!(offload_format::abi_name!(TMA_STORE_WAIT_PREFIX), "1")]
        fn __offload_tma_store_wait_1();
        #[link_name = concat!(offload_format::abi_name!(TMA_STORE_WAIT_PREFIX), "2")]
        fn __offload_tma_store_wait_2();
        #[link_name = concat!(offload_format::abi_name!(TMA_STORE_WAIT_PREFIX), "3")]
        fn __offload_tma_store_wait_3();
        #[link_name = concat!(offload_format::abi_name!(TMA_STORE_WAIT_PREFIX), "4")]
        fn __offload_tma_store_wait_4();
        #[link_name = concat!(offload_format::abi_name!(TMA_STORE_WAIT_PREFIX), "5")]
        fn __offload_tma_store_wait_5();
        #[link_name = concat!(offload_format::abi_name!(TMA_STORE_WAIT_PREFIX), "6")]
        fn __offload_tma_store_wait_6();
        #[link_name = concat!(offload_format::abi_name!(TMA_STORE_WAIT_PREFIX), "7")]
        fn __offload_tma_store_wait_7();
        #[link_name = offload_format::abi_name!(TMA_PREFETCH)]
        fn __offload_tma_prefetch(map: *const TensorMap);
        #[link_name = offload_format::abi_name!(FENCE_PROXY_ASYNC)]
        fn __offload_fence_proxy_async();
    }

    /// # Safety
    /// As [`super::load_2d`].
    #[inline(always)]
    pub(super) unsafe fn load_2d(
        dst: *mut u8,
        map: *const TensorMap,
        bar: *mut u64,
        col: i32,
        row: i32,
    ) {
        // SAFETY: the caller's contract.
        unsafe { __offload_tma_load_2d(dst, map, bar, col, row) }
    }

    /// # Safety
    /// As [`super::load_2d_multicast`].
    #[inline(always)]
    pub(super) unsafe fn load_2d_multicast(
        dst: *mut u8,
        map: *const TensorMap,
        bar: *mut u64,
        col: i32,
        row: i32,
        blocks: u16,
    ) {
        // SAFETY: the caller's contract.
        unsafe { __offload_tma_load_2d_multicast(dst, map, bar, col, row, blocks) }
    }

    /// # Safety
    /// As [`super::store_2d`].
    #[inline(always)]
    pub(super) unsafe fn store_2d(map: *const TensorMap, src: *const u8, col: i32, row: i32) {
        // SAFETY: the caller's contract.
        unsafe { __offload_tma_store_2d(map, src, col, row) }
    }

    #[inline(always)]
    pub(super) fn store_commit() {
        // SAFETY: closing a group has no preconditions.
        unsafe { __offload_tma_store_commit() }
    }

    /// `n` is a constant wherever it is inlined, so one wait is left.
    #[inline(always)]
    pub(super) fn store_wait(n: usize) {
        // SAFETY: waiting has no preconditions.
        unsafe {
            match n {
                0 => __offload_tma_store_wait_0(),
                1 => __offload_tma_store_wait_1(),
                2 => __offload_tma_store_wait_2(),
                3 => __offload_tma_store_wait_3(),
                4 => __offload_tma_store_wait_4(),
                5 => __offload_tma_store_wait_5(),
                6 => __offload_tma_store_wait_6(),
                _ => __offload_tma_store_wait_7(),
            }
        }
    }

    /// # Safety
    /// As [`super::prefetch`].
    #[inline(always)]
    pub(super) unsafe fn prefetch(map: *const TensorMap) {
        // SAFETY: the caller's contract.
        unsafe { __offload_tma_prefetch(map) }
    }

    #[inline(always)]
    pub(super) fn fence_proxy_async() {
        // SAFETY: a fence has no preconditions.
        unsafe { __offload_fence_proxy_async() }
    }
}

#[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
mod imp {
    use super::super::hopper_only;
    use super::TensorMap;

    const FEATURE: &str = "the tensor memory accelerator (TMA)";

    pub(super) unsafe fn load_2d(_: *mut u8, _: *const TensorMap, _: *mut u64, _: i32, _: i32) {
        hopper_only(FEATURE)
    }
    pub(super) unsafe fn load_2d_multicast(
        _: *mut u8,
        _: *const TensorMap,
        _: *mut u64,
        _: i32,
        _: i32,
        _: u16,
    ) {
        hopper_only(FEATURE)
    }
    pub(super) unsafe fn store_2d(_: *const TensorMap, _: *const u8, _: i32, _: i32) {
        hopper_only(FEATURE)
    }
    pub(super) fn store_commit() {
        hopper_only(FEATURE)
    }
    pub(super) fn store_wait(_: usize) {
        hopper_only(FEATURE)
    }
    pub(super) unsafe fn prefetch(_: *const TensorMap) {
        hopper_only(FEATURE)
    }
    pub(super) fn fence_proxy_async() {
        hopper_only(FEATURE)
    }
}
