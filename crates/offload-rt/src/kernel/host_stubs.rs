//! The device API built for the host (no `offload_device`): kernel bodies type-check against
//! it, they never run on it. It describes a one-thread launch.

#[inline(always)]
pub(super) fn zero() -> u32 {
    0
}

#[inline(always)]
pub(super) fn one() -> u32 {
    1
}

pub(super) use one as block_dim_x;
pub(super) use one as block_dim_y;
pub(super) use one as block_dim_z;
pub(super) use one as grid_dim_x;
pub(super) use one as grid_dim_y;
pub(super) use one as grid_dim_z;
pub(super) use zero as block_idx_x;
pub(super) use zero as block_idx_y;
pub(super) use zero as block_idx_z;
pub(super) use zero as thread_idx_x;
pub(super) use zero as thread_idx_y;
pub(super) use zero as thread_idx_z;

/// A barrier among one thread.
#[inline(always)]
pub(super) fn sync_threads() {}

/// A grid barrier among one thread.
#[inline(always)]
pub(super) fn grid_sync() {}

/// A barrier among one lane.
#[inline(always)]
pub(super) fn sync_warp() {}

pub(super) fn trap() -> ! {
    panic!("offload_rt::kernel::trap() called outside a device launch")
}

/// Shared memory exists only in device launches: null here.
#[inline(always)]
pub fn shared_slot(_key: usize, _size: usize, _align: usize) -> *mut u8 {
    core::ptr::null_mut()
}

/// As [`shared_slot`]: null here.
#[inline(always)]
pub fn generic_shared_tile(
    _site: &'static u8,
    _type_name: &'static str,
    _size: usize,
    _align: usize,
) -> *mut u8 {
    core::ptr::null_mut()
}

/// The documented warp size of the CPU device, so host-side code sees the same constant.
#[inline(always)]
pub(super) fn warp_size() -> u32 {
    32
}

pub(super) use zero as lane_id;

/// A warp of one lane: every shuffle reads the caller's own value.
#[inline(always)]
pub(super) fn shuffle_u32(_: super::shuffle::Shuffle, value: u32, _: u32) -> u32 {
    value
}

/// As [`shuffle_u32`].
#[inline(always)]
pub(super) fn shuffle_u64(_: super::shuffle::Shuffle, value: u64, _: u32) -> u64 {
    value
}

#[inline(always)]
pub(super) fn ballot(predicate: bool) -> u64 {
    u64::from(predicate)
}

#[inline(always)]
pub(super) fn warp_any(predicate: bool) -> bool {
    predicate
}

#[inline(always)]
pub(super) fn warp_all(predicate: bool) -> bool {
    predicate
}

#[inline(always)]
pub(super) fn shuffle_u32_masked(
    _: u64,
    mode: super::shuffle::Shuffle,
    value: u32,
    arg: u32,
) -> u32 {
    shuffle_u32(mode, value, arg)
}

#[inline(always)]
pub(super) fn shuffle_u64_masked(
    _: u64,
    mode: super::shuffle::Shuffle,
    value: u64,
    arg: u32,
) -> u64 {
    shuffle_u64(mode, value, arg)
}

#[inline(always)]
pub(super) fn ballot_masked(mask: u64, predicate: bool) -> u64 {
    ballot(predicate) & mask
}

#[inline(always)]
pub(super) fn warp_any_masked(mask: u64, predicate: bool) -> bool {
    ballot_masked(mask, predicate) != 0
}

#[inline(always)]
pub(super) fn warp_all_masked(mask: u64, predicate: bool) -> bool {
    mask & 1 == 0 || predicate
}

#[inline(always)]
pub(super) fn sync_warp_masked(_: u64) {}

/// Shared memory exists only in device launches: null here.
#[inline(always)]
pub(super) fn dynamic_shared() -> *mut u8 {
    core::ptr::null_mut()
}
