//! A GPU thread's claim on the channel's panic record, and what its report's writers share
//! ([`super::gpu_channel`]).

use core::sync::atomic::Ordering;

#[cfg(target_arch = "amdgpu")]
use super::abi::PANIC_EMPTY;
use super::abi::{PANIC_WRITING, PanicRecord, pack_thread};

/// The calling thread's index in its block as a panic records it ([`pack_thread`]).
#[inline(always)]
pub(super) fn packed_thread_index() -> u32 {
    pack_thread([
        super::thread::thread_idx_x(),
        super::thread::thread_idx_y(),
        super::thread::thread_idx_z(),
    ])
}

/// On AMD GPUs, keeps the scheduler from moving the report's stores together: it would give
/// each value its own vector registers, which the kernel pays for (the stores are ordered, the
/// moves of their values into vector registers are not).
#[inline(always)]
pub(super) fn one_store_at_a_time() {
    #[cfg(target_arch = "amdgpu")]
    // SAFETY: a scheduling barrier only; it changes no value and no memory.
    unsafe {
        core::arch::amdgpu::sched_barrier::<0>()
    }
}

/// Tries to claim the record for this thread: moves `state` from
/// [`PANIC_EMPTY`](super::abi::PANIC_EMPTY) to [`PANIC_WRITING`] if it can, and returns the
/// state it found ([`PANIC_EMPTY`](super::abi::PANIC_EMPTY): claimed).
///
/// # Safety
/// `record` is the channel's live panic record; `state` is only accessed atomically.
#[inline(always)]
pub(super) unsafe fn try_claim(record: *mut PanicRecord) -> u32 {
    // SAFETY: the caller's contract; no reference to the whole record is made.
    let state = unsafe { &(*record).state };
    // NVIDIA: one atomic OR, where a compare-and-swap takes two more registers of every
    // kernel that can panic; `PANIC_WRITTEN` includes `PANIC_WRITING`'s bit, so the OR
    // changes only an empty record. Relaxed: the claim orders nothing, as only the host reads
    // the record, after the writer's release store and fence. AMD GPUs keep the
    // compare-and-swap: there a system-scope OR becomes a loop of them.
    #[cfg(not(target_arch = "amdgpu"))]
    let before = state.fetch_or(PANIC_WRITING, Ordering::Relaxed);
    #[cfg(target_arch = "amdgpu")]
    let (Ok(before) | Err(before)) = state.compare_exchange(
        PANIC_EMPTY,
        PANIC_WRITING,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    before
}

/// A panicking thread (on AMD GPUs, wavefront) that found the record in state `before`,
/// claimed by another: while the other is writing its report, this one ends alone (PTX
/// `exit`; on AMD GPUs a return from the kernel) and the writer's trap ends the launch once
/// the report is whole; once the report is written, it traps. Either way nothing of the
/// kernel runs after the panic here, and nothing waits: a wait for the report would keep a
/// trap from ending the launch too early, at the cost of a loop in every kernel that can
/// panic.
#[inline(always)]
pub(super) fn leave(before: u32) -> ! {
    if before == PANIC_WRITING {
        super::arch::end_thread()
    }
    super::arch::trap()
}
