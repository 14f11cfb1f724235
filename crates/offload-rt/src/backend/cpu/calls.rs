//! What a CPU image calls in the runtime (prints, panics, barriers, warp and grid
//! synchronization), and a block run with one coroutine per GPU thread, switched at those
//! barriers.

use std::cell::Cell;
use std::sync::atomic::Ordering;

use corosensei::{Coroutine, CoroutineResult};

use super::launch::{Failure, Launch, LaunchCtx};
use super::stacks::{
    CURRENT, GUARD, ThreadCoroutine, Wait, Yield, abandon, give_stack, take_guard_stack, take_stack,
};
use super::trap;
use crate::error::{KernelPanicReport, Result};
use crate::kernel::abi::{CPU_WARP_SIZE, CpuLaunch, CpuPanic, CpuThreadFn, PrintArg};

/// A device print: formatted now, printed when the launch is over.
///
/// # Safety
///
/// Called by image code with the launch record the runtime passed in, a UTF-8 template of
/// `template_len` bytes and `arg_count` arguments, valid for the call.
pub(super) unsafe extern "C" fn cpu_print(
    launch: *const CpuLaunch,
    template: *const u8,
    template_len: usize,
    args: *const PrintArg,
    arg_count: usize,
) {
    if trap::low_on_stack() {
        // Formatting allocates: an overflow in it would leave the allocator's lock taken.
        trap::mark_overflow();
        // SAFETY: this function's contract: called by kernel code on a kernel stack.
        unsafe { leave_kernel() }
    }
    // SAFETY: this function's contract.
    let (ctx, template, args) = unsafe {
        (
            LaunchCtx::of(launch),
            std::slice::from_raw_parts(template, template_len),
            std::slice::from_raw_parts(args, arg_count),
        )
    };
    let text = crate::print::render(&String::from_utf8_lossy(template), args);
    ctx.output
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push_str(&text);
}

/// A GPU thread's panic: records the report (the first one wins) and leaves the kernel.
///
/// # Safety
///
/// Called by image code with the launch record the runtime passed in and a valid report,
/// while running on a GPU-thread coroutine or a guard stack.
pub(super) unsafe extern "C" fn cpu_panic(launch: *const CpuLaunch, report: *const CpuPanic) -> ! {
    if trap::low_on_stack() {
        // Too little stack left to record the report (which allocates): an overflow.
        trap::mark_overflow();
        // SAFETY: this function's contract.
        unsafe { leave_kernel() }
    }
    {
        // SAFETY: this function's contract: the record's ctx is the launch's LaunchCtx, and
        // the report and its strings are valid for the call.
        let (ctx, r) = unsafe { (LaunchCtx::of(launch), &*report) };
        // SAFETY: as above; the image passes pointer and length of byte strings.
        let text = |ptr: *const u8, len: usize| unsafe {
            String::from_utf8_lossy(std::slice::from_raw_parts(ptr, len)).into_owned()
        };
        ctx.fail(|| {
            Failure::Panic(KernelPanicReport {
                message: text(r.message, r.message_len),
                file: text(r.file, r.file_len),
                line: r.line,
                column: r.column,
                block: r.block,
                thread: r.thread,
            })
        });
    }
    // SAFETY: this function's contract.
    unsafe { leave_kernel() }
}

/// Leaves the kernel running on this thread, as after a panic: suspends its coroutine, which
/// is then abandoned or reset, never resumed.
///
/// # Safety
///
/// Called by kernel code, on a GPU-thread coroutine or a guard stack.
pub(super) unsafe fn leave_kernel() -> ! {
    let current = CURRENT.with(Cell::get);
    if !current.is_null() {
        // SAFETY: CURRENT is the yielder of the coroutine running this code; it is never
        // resumed after `Wait::Panic`.
        unsafe { (*current).suspend(Wait::Panic) };
    } else {
        let guard = GUARD.with(Cell::get);
        if !guard.is_null() {
            // SAFETY: GUARD is the yielder of the guard coroutine running this code; it is
            // reset, never resumed.
            unsafe { (*guard).suspend(()) };
        }
    }
    // Kernel code only runs on the stacks above; a panic elsewhere cannot be left.
    eprintln!("offload-rt: a kernel panicked outside the CPU device's stacks");
    std::process::abort()
}

/// Suspends the calling GPU thread at `wait`; on the fast path (no coroutine) marks the launch
/// divergent instead.
///
/// # Safety
///
/// Called by image code with the launch record the runtime passed in.
pub(super) unsafe fn suspend(launch: *const CpuLaunch, wait: Wait) {
    let y = CURRENT.with(Cell::get);
    if y.is_null() {
        // SAFETY: `launch` is this launch's record; its ctx is the LaunchCtx alive for the
        // whole launch.
        let ctx = unsafe { LaunchCtx::of(launch) };
        ctx.divergent.store(true, Ordering::Relaxed);
        return;
    }
    // SAFETY: CURRENT holds the yielder of the coroutine running this code (set when it
    // started or came back from its last suspension), which outlives it.
    unsafe { (*y).suspend(wait) };
    CURRENT.with(|c| c.set(y));
}

/// Records that the launch reached a barrier the region form did not split at.
///
/// # Safety
///
/// As [`suspend`].
pub(super) unsafe fn unmarked(launch: *const CpuLaunch) {
    // SAFETY: `launch` is this launch's record; its ctx is the LaunchCtx alive for the
    // whole launch.
    let ctx = unsafe { LaunchCtx::of(launch) };
    ctx.unmarked.store(true, Ordering::Relaxed);
}

/// `sync_threads()` on the CPU device.
///
/// # Safety
///
/// As [`suspend`].
pub(super) unsafe extern "C" fn cpu_barrier(launch: *const CpuLaunch) {
    // SAFETY: this function's contract.
    unsafe {
        unmarked(launch);
        suspend(launch, Wait::Block)
    }
}

/// A barrier of the kernel body that the region form splits at, on the coroutine path.
///
/// # Safety
///
/// As [`suspend`].
pub(super) unsafe extern "C" fn cpu_region_barrier(launch: *const CpuLaunch) {
    // SAFETY: this function's contract.
    unsafe { suspend(launch, Wait::Block) }
}

/// The warp barrier of a warp operation of the kernel body that the region form splits at,
/// on the coroutine path.
///
/// # Safety
///
/// As [`suspend`].
pub(super) unsafe extern "C" fn cpu_region_warp_sync(launch: *const CpuLaunch) {
    // SAFETY: this function's contract.
    unsafe { suspend(launch, Wait::Warp) }
}

/// `Grid::sync()` on the CPU device: the block barrier, after which the block waits for the
/// grid (see [`run_block_with_barriers`]).
///
/// # Safety
///
/// As [`suspend`].
pub(super) unsafe extern "C" fn cpu_grid_sync(launch: *const CpuLaunch) {
    // SAFETY: this function's contract.
    unsafe { suspend(launch, Wait::Grid) }
}

/// The warp barrier of warp operations on the CPU device.
///
/// # Safety
///
/// As [`suspend`].
pub(super) unsafe extern "C" fn cpu_warp_sync(launch: *const CpuLaunch) {
    // SAFETY: this function's contract.
    unsafe {
        unmarked(launch);
        suspend(launch, Wait::Warp)
    }
}

/// Runs thread 0 of block 0 as a coroutine, on the guard stack (the stack the other threads
/// get on the fast path). Returns whether it reached a barrier; if so, runs the rest of block 0
/// with barriers, resuming that coroutine as thread 0.
///
/// # Safety
///
/// Running every thread of the launch is sound.
pub(super) unsafe fn probe(l: &Launch, thread: CpuThreadFn) -> Result<bool> {
    let stack = take_guard_stack(l)?;
    let info = trap::StackInfo::of(&stack);
    let (launch, params) = (l.launch, l.params);
    let mut co = Coroutine::with_stack(stack, move |y: &Yield, ()| {
        CURRENT.with(|c| c.set(y));
        // SAFETY: the caller's contract.
        unsafe { thread(launch, params, 0, 0) };
        CURRENT.with(|c| c.set(std::ptr::null()));
    });
    let (result, overflowed) = trap::resume(&mut co, info);
    if overflowed {
        CURRENT.with(|c| c.set(std::ptr::null()));
        l.ctx().overflowed(info.bytes);
    }
    match result {
        CoroutineResult::Return(()) => {
            give_stack(l, co.into_stack());
            Ok(false)
        }
        CoroutineResult::Yield(Wait::Panic) => {
            abandon(l, co);
            Ok(false)
        }
        CoroutineResult::Yield(wait) => {
            // SAFETY: `launch` is alive for the launch.
            let [bx, by, bz] = unsafe { (*l.launch).block };
            // SAFETY: the caller's contract.
            unsafe { run_block_with_barriers(l, thread, 0, bx * by * bz, Some((co, info, wait))) }?;
            Ok(true)
        }
    }
}

/// One GPU thread of a block run with barriers.
pub(super) struct Lane {
    pub(super) co: Option<ThreadCoroutine>,
    /// Its stack.
    pub(super) stack: trap::StackInfo,
    /// Where it waits; `None` when it can run.
    pub(super) wait: Option<Wait>,
}

/// Runs one block, each GPU thread a coroutine. Warp by warp (32 threads by rank), the lanes
/// that can run are taken in order to their next suspension; lanes at a warp barrier go on
/// once no lane of their warp can run, so a warp operation sees every live lane's value. Once
/// every warp waits at `sync_threads()` (or has finished), the block barrier opens. `first` is
/// thread 0 already started (by [`probe`]) and where it waits.
///
/// # Safety
///
/// Running every thread of the block is sound.
pub(super) unsafe fn run_block_with_barriers(
    l: &Launch,
    thread: CpuThreadFn,
    block: u64,
    threads: u32,
    first: Option<(ThreadCoroutine, trap::StackInfo, Wait)>,
) -> Result<()> {
    let mut lanes: Vec<Lane> = Vec::with_capacity(threads as usize);
    let start = u32::from(first.is_some());
    if let Some((co, stack, wait)) = first {
        lanes.push(Lane {
            co: Some(co),
            stack,
            wait: Some(wait),
        });
    }
    // All stacks are taken before any thread runs: a failure cannot strand suspended threads.
    let mut stacks = Vec::with_capacity(threads as usize);
    for _ in start..threads {
        match take_stack(l) {
            Ok(s) => stacks.push(s),
            Err(e) => {
                stacks.into_iter().for_each(|s| give_stack(l, s));
                if let Some(Lane { co: Some(co), .. }) = lanes.pop() {
                    // A suspended coroutine cannot be dropped without unwinding image frames.
                    std::mem::forget(co);
                }
                return Err(e);
            }
        }
    }
    let launch = l.launch;
    let params = l.params;
    for (t, stack) in (start..threads).zip(stacks) {
        let info = trap::StackInfo::of(&stack);
        lanes.push(Lane {
            stack: info,
            co: Some(Coroutine::with_stack(stack, move |y: &Yield, ()| {
                CURRENT.with(|c| c.set(y));
                // SAFETY: the caller's contract.
                unsafe { thread(launch, params, block, t) };
                CURRENT.with(|c| c.set(std::ptr::null()));
            })),
            wait: None,
        });
    }
    let mut live = lanes.len();
    'block: while live > 0 {
        for warp in lanes.chunks_mut(CPU_WARP_SIZE as usize) {
            loop {
                for lane in warp.iter_mut() {
                    if lane.wait.is_some() {
                        continue;
                    }
                    let Some(co) = &mut lane.co else { continue };
                    let (result, overflowed) = trap::resume(co, lane.stack);
                    if overflowed {
                        CURRENT.with(|c| c.set(std::ptr::null()));
                        l.ctx().overflowed(lane.stack.bytes);
                        break 'block;
                    }
                    match result {
                        CoroutineResult::Yield(Wait::Panic) => break 'block,
                        CoroutineResult::Yield(wait) => lane.wait = Some(wait),
                        CoroutineResult::Return(()) => {
                            if let Some(done) = lane.co.take() {
                                give_stack(l, done.into_stack());
                            }
                            live -= 1;
                        }
                    }
                }
                let mut at_warp_barrier = false;
                for lane in warp.iter_mut() {
                    if lane.wait == Some(Wait::Warp) {
                        lane.wait = None;
                        at_warp_barrier = true;
                    }
                }
                if !at_warp_barrier {
                    break;
                }
            }
        }
        let at_grid_barrier = lanes.iter().any(|lane| lane.wait == Some(Wait::Grid));
        if at_grid_barrier {
            let passed = match l.grid() {
                Some(grid) => grid.wait(l.ctx()),
                None => {
                    // A raw launch of a cooperative kernel (typed launches are cooperative).
                    l.ctx().fail(|| Failure::NotCooperative);
                    false
                }
            };
            if !passed {
                // The launch failed: the block is abandoned, as after a panic.
                break 'block;
            }
        }
        for lane in &mut lanes {
            lane.wait = None;
        }
    }
    // Left early only by a panic: the block's other threads are abandoned with it.
    lanes
        .into_iter()
        .filter_map(|lane| lane.co)
        .for_each(|co| abandon(l, co));
    Ok(())
}
