//! Grid-wide synchronization: [`Grid`], a cooperative kernel's handle on its whole grid.
//!
//! A kernel that takes a `Grid` as its first parameter is *cooperative*: every launch of it is
//! a cooperative launch (`cuLaunchCooperativeKernel`, `hipModuleLaunchCooperativeKernel`; on
//! the CPU device, one worker thread per block), whose blocks are all resident at once, so
//! that [`Grid::sync`] can wait for all of them. The launch refuses a grid larger than the
//! device can hold at once with `Error::CooperativeGridTooLarge`; the kernel handle's
//! `max_blocks` says how many blocks that is.
//!
//! On GPUs the barrier is a 32-bit word of device memory the runtime gives each stream (zero
//! between launches): the first thread of each block adds 1 to it, block 0 adds
//! `0x8000_0000 - (blocks - 1)`, so the top bit flips exactly when the last block has arrived
//! and the low bits are back where they started (CUDA's cooperative groups use the same
//! scheme). On the CPU device the runtime holds the barrier.

/// The grid of a cooperative launch: the first parameter of a kernel that synchronizes all its
/// blocks.
///
/// ```ignore
/// #[kernel]
/// pub fn two_phases(grid: Grid, mut partial: DisjointSlice<u32>, out: *mut u32) {
///     // … each block writes its partial result …
///     grid.sync();
///     // … every block's partial result is visible to every block …
/// }
/// ```
///
/// The host handle's `launch` takes no argument for it: the runtime supplies it. It is
/// `Copy`: pass it to the functions the kernel calls that synchronize the grid.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Grid {
    /// On GPUs, the address of the launch's barrier word; unused on the CPU device.
    barrier: u64,
}

impl Grid {
    /// What a typed launch passes for the runtime to replace: bytes alike on every target.
    pub(crate) const PLACEHOLDER: Grid = Grid { barrier: 0 };

    /// Grid-wide barrier (cooperative groups' `grid.sync()`): returns once every thread of
    /// every block of the launch has called it; memory any of them wrote before it is visible
    /// to all of them after it. Every thread of the grid must reach the same grid barriers: a
    /// block that returns while others wait would keep a GPU waiting for ever (the CPU device
    /// reports it as `Error::GridSyncMismatch`).
    #[inline(always)]
    pub fn sync(&self) {
        #[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        gpu_sync(self.barrier);
        #[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
        {
            let _ = self.barrier;
            super::arch::grid_sync();
        }
    }

    /// Blocks in the grid.
    #[inline(always)]
    pub fn blocks(&self) -> u32 {
        blocks()
    }

    /// Threads in the grid.
    #[inline(always)]
    pub fn threads(&self) -> u64 {
        u64::from(self.blocks()) * u64::from(super::block_size())
    }

    /// The calling thread's rank in the grid: its block's linear index times the block size
    /// plus its rank in the block.
    #[inline(always)]
    pub fn thread_rank(&self) -> u64 {
        u64::from(block_rank()) * u64::from(super::block_size()) + u64::from(super::thread_rank())
    }
}

/// Blocks in the grid: cooperative grids hold at most as many as a device keeps resident, far
/// below `u32::MAX`.
#[inline(always)]
fn blocks() -> u32 {
    let g = super::grid_dim();
    g.x * g.y * g.z
}

/// The calling block's linear index in the grid.
#[inline(always)]
fn block_rank() -> u32 {
    let (b, g) = (super::block_idx(), super::grid_dim());
    b.x + g.x * (b.y + g.y * b.z)
}

#[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
#[inline(never)]
fn gpu_sync(barrier: u64) {
    use core::sync::atomic::{AtomicU32, Ordering, fence};
    const FLIP: u32 = 0x8000_0000;
    super::sync_threads();
    if super::thread_rank() == 0 {
        let add = if block_rank() == 0 {
            FLIP - (blocks() - 1)
        } else {
            1
        };
        // SAFETY: the runtime passes the address of a live, 4-aligned u32 of device memory
        // that, during the launch, only this function touches, atomically.
        let word = unsafe { AtomicU32::from_ptr(barrier as usize as *mut u32) };
        // The block's writes (ordered before thread 0 by the block barrier) are published to
        // the device before the arrival…
        fence(Ordering::SeqCst);
        let old = word.fetch_add(add, Ordering::Relaxed);
        while (old ^ word.load(Ordering::Acquire)) & FLIP == 0 {
            core::hint::spin_loop();
        }
        // …and every other block's are seen after the departure.
        fence(Ordering::SeqCst);
    }
    super::sync_threads();
}
