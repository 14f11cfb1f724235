//! Barriers in shared memory that count arrivals and bytes (`mbarrier`, NVIDIA sm_90 and
//! later): what the tensor memory accelerator's copies ([`super::tma`]) complete on, and how
//! the producer and consumer warps of a warp-specialized kernel hand stages to each other
//! without a barrier of the whole block.
//!
//! A barrier goes through phases. Each phase completes when the expected number of threads
//! have arrived *and* every byte announced with [`MBarrier::arrive_expect_tx`] or
//! [`MBarrier::expect_tx`] has landed; then the next phase begins with the same counts. A
//! waiter names the phase it waits for by its parity (0, 1, 0, …), as CUDA's
//! `mbarrier.try_wait.parity` does.
//!
//! ```ignore
//! let full = MBarrier::from_ptr(shared_array!(u64, 1));   // SAFETY: shared, 8-byte aligned
//! if kernel::thread_idx_x() == 0 { full.init(1); mbarrier::fence_init(); }
//! kernel::sync_threads();
//! if kernel::thread_idx_x() == 0 {
//!     full.arrive_expect_tx(TILE_BYTES);
//!     unsafe { tma::load_2d(tile, map, full, col, row) };
//! }
//! full.wait_parity(0);                                    // the tile has landed
//! ```
//!
//! | device | |
//! |---|---|
//! | NVIDIA sm_90 and later | `mbarrier.*` on shared memory |
//! | older NVIDIA, AMD GPUs | refused by the device link, naming the kernels |
//! | CPU device | a panic naming the feature (the kernel's launch fails with it) |

/// A barrier of 8 bytes in the block's shared memory. Copyable: it is the address.
#[derive(Clone, Copy, Debug)]
pub struct MBarrier {
    word: *mut u64,
}

impl MBarrier {
    /// The barrier at `word`.
    ///
    /// # Safety
    ///
    /// `word` is 8 bytes of the block's shared memory, aligned to 8, used as nothing else
    /// while the barrier is (a [`shared_array!`](crate::shared_array!) of one `u64`).
    #[inline(always)]
    pub unsafe fn from_ptr(word: *mut u64) -> Self {
        Self { word }
    }

    /// The barrier's address.
    #[inline(always)]
    pub fn as_ptr(self) -> *mut u64 {
        self.word
    }

    /// Starts the barrier's first phase, expecting `arrivals` arrivals a phase. One thread
    /// initializes; the others use the barrier after the block's barrier that follows (with
    /// [`fence_init`] before it when blocks of a cluster use it).
    #[inline(always)]
    pub fn init(self, arrivals: u32) {
        // SAFETY: `from_ptr`'s contract: shared memory of the barrier's own.
        unsafe { imp::init(self.word, arrivals) }
    }

    /// Arrives on the current phase; returns the phase's state, which nothing needs but
    /// `mbarrier.test_wait` (waiting by parity needs no token).
    #[inline(always)]
    pub fn arrive(self) -> u64 {
        // SAFETY: as `init`.
        unsafe { imp::arrive(self.word) }
    }

    /// Announces `bytes` more to land in the current phase (by copies completing on this
    /// barrier) and arrives: the producer's one call before it issues the copies.
    #[inline(always)]
    pub fn arrive_expect_tx(self, bytes: u32) -> u64 {
        // SAFETY: as `init`.
        unsafe { imp::arrive_expect_tx(self.word, bytes) }
    }

    /// Announces `bytes` more to land in the current phase, without arriving.
    #[inline(always)]
    pub fn expect_tx(self, bytes: u32) {
        // SAFETY: as `init`.
        unsafe { imp::expect_tx(self.word, bytes) }
    }

    /// Whether the phase of parity `parity` (0 or 1) has completed; may wait a while in
    /// hardware before it answers `false`.
    #[inline(always)]
    pub fn try_wait_parity(self, parity: u32) -> bool {
        // SAFETY: as `init`.
        unsafe { imp::try_wait_parity(self.word, parity & 1) }
    }

    /// Waits until the phase of parity `parity` (0 or 1) has completed: the copies that
    /// completed on it are then visible to this thread.
    #[inline(always)]
    pub fn wait_parity(self, parity: u32) {
        while !self.try_wait_parity(parity) {}
    }
}

/// Makes this thread's [`MBarrier::init`]s visible to the other blocks of its cluster (and
/// to the tensor memory accelerator) before the barrier that follows.
#[inline(always)]
pub fn fence_init() {
    imp::fence_init();
}

#[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod imp {
    unsafe extern "C" {
        // Defined by the device link for sm_90 and later (`mbarrier.*` on the shared window);
        // a kernel that reaches one on another GPU is refused, named.
        #[link_name = offload_format::abi_name!(MBARRIER_INIT)]
        fn __offload_mbarrier_init(word: *mut u64, arrivals: u32);
        #[link_name = offload_format::abi_name!(MBARRIER_ARRIVE)]
        fn __offload_mbarrier_arrive(word: *mut u64) -> u64;
        #[link_name = offload_format::abi_name!(MBARRIER_ARRIVE_EXPECT_TX)]
        fn __offload_mbarrier_arrive_expect_tx(word: *mut u64, bytes: u32) -> u64;
        #[link_name = offload_format::abi_name!(MBARRIER_EXPECT_TX)]
        fn __offload_mbarrier_expect_tx(word: *mut u64, bytes: u32);
        #[link_name = offload_format::abi_name!(MBARRIER_TRY_WAIT_PARITY)]
        fn __offload_mbarrier_try_wait_parity(word: *mut u64, parity: u32) -> u32;
        #[link_name = offload_format::abi_name!(MBARRIER_FENCE_INIT)]
        fn __offload_mbarrier_fence_init();
    }

    /// # Safety
    /// `word` is a barrier of the block's shared memory.
    #[inline(always)]
    pub(super) unsafe fn init(word: *mut u64, arrivals: u32) {
        // SAFETY: the caller's contract.
        unsafe { __offload_mbarrier_init(word, arrivals) }
    }

    /// # Safety
    /// As [`init`].
    #[inline(always)]
    pub(super) unsafe fn arrive(word: *mut u64) -> u64 {
        // SAFETY: the caller's contract.
        unsafe { __offload_mbarrier_arrive(word) }
    }

    /// # Safety
    /// As [`init`].
    #[inline(always)]
    pub(super) unsafe fn arrive_expect_tx(word: *mut u64, bytes: u32) -> u64 {
        // SAFETY: the caller's contract.
        unsafe { __offload_mbarrier_arrive_expect_tx(word, bytes) }
    }

    /// # Safety
    /// As [`init`].
    #[inline(always)]
    pub(super) unsafe fn expect_tx(word: *mut u64, bytes: u32) {
        // SAFETY: the caller's contract.
        unsafe { __offload_mbarrier_expect_tx(word, bytes) }
    }

    /// # Safety
    /// As [`init`].
    #[inline(always)]
    pub(super) unsafe fn try_wait_parity(word: *mut u64, parity: u32) -> bool {
        // SAFETY: the caller's contract.
        unsafe { __offload_mbarrier_try_wait_parity(word, parity) != 0 }
    }

    #[inline(always)]
    pub(super) fn fence_init() {
        // SAFETY: a fence has no preconditions.
        unsafe { __offload_mbarrier_fence_init() }
    }
}

#[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
mod imp {
    use super::super::hopper_only;

    const FEATURE: &str = "mbarrier";

    pub(super) unsafe fn init(_: *mut u64, _: u32) {
        hopper_only(FEATURE)
    }
    pub(super) unsafe fn arrive(_: *mut u64) -> u64 {
        hopper_only(FEATURE)
    }
    pub(super) unsafe fn arrive_expect_tx(_: *mut u64, _: u32) -> u64 {
        hopper_only(FEATURE)
    }
    pub(super) unsafe fn expect_tx(_: *mut u64, _: u32) {
        hopper_only(FEATURE)
    }
    pub(super) unsafe fn try_wait_parity(_: *mut u64, _: u32) -> bool {
        hopper_only(FEATURE)
    }
    pub(super) fn fence_init() {
        hopper_only(FEATURE)
    }
}
