//! The device API on NVIDIA GPUs (`nvptx64-nvidia-cuda`): PTX special registers.

use core::arch::nvptx;

macro_rules! sreg {
    ($($name:ident => $intrinsic:ident;)*) => {$(
        #[inline(always)]
        pub(super) fn $name() -> u32 {
            // SAFETY: reading a PTX special register has no preconditions.
            unsafe { nvptx::$intrinsic() }
        }
    )*};
}

sreg! {
    thread_idx_x => _thread_idx_x;
    thread_idx_y => _thread_idx_y;
    thread_idx_z => _thread_idx_z;
    block_idx_x => _block_idx_x;
    block_idx_y => _block_idx_y;
    block_idx_z => _block_idx_z;
    block_dim_x => _block_dim_x;
    block_dim_y => _block_dim_y;
    block_dim_z => _block_dim_z;
    grid_dim_x => _grid_dim_x;
    grid_dim_y => _grid_dim_y;
    grid_dim_z => _grid_dim_z;
}

/// `bar.sync 0`, which also orders the block's memory accesses.
#[inline(always)]
pub(super) fn sync_threads() {
    // SAFETY: a barrier every thread of the block reaches (the device API's contract).
    unsafe { nvptx::_syncthreads() }
}

pub(super) fn trap() -> ! {
    // SAFETY: `trap` aborts the kernel; it has no preconditions.
    unsafe { nvptx::trap() }
}
