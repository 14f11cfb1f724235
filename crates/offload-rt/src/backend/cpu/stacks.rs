//! The stacks kernel code runs on: a GPU thread's coroutine stack, a worker's guard stack
//! (kernel code outside coroutines, so that a panic can leave it), each kept between blocks by
//! the worker or lent to the launching thread.

use std::cell::{Cell, RefCell};
use std::sync::{Arc, Mutex};

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use super::launch::Launch;
use super::pool;
use super::trap;
use crate::error::{Error, Result};

/// Where a suspended GPU thread waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wait {
    /// At `sync_threads()`: for every thread of the block.
    Block,
    /// At a warp operation: for the live lanes of its warp.
    Warp,
    /// At `Grid::sync()`: for every thread of the grid.
    Grid,
    /// Panicked: never to be resumed.
    Panic,
}

pub(super) type Yield = Yielder<(), Wait>;

pub(super) type GuardYield = Yielder<(), ()>;

thread_local! {
    /// The yielder of the coroutine running on this OS thread, or null on the fast path.
    pub(super) static CURRENT: Cell<*const Yield> = const { Cell::new(std::ptr::null()) };
    /// The yielder of the guard coroutine running kernel code outside GPU-thread coroutines.
    pub(super) static GUARD: Cell<*const GuardYield> = const { Cell::new(std::ptr::null()) };
    /// A pool worker's stacks, kept for the next block it runs. Workers exit when their pool
    /// is dropped, running this destructor with them.
    static WORKER_STACKS: RefCell<StackCache> = const { RefCell::new(StackCache::new()) };
    /// On a thread that launches, the launching device's stacks while its launch runs. No
    /// destructor: one would keep a `cdylib` with kernels mapped after `dlclose` until this
    /// thread exits (see `os_thread`).
    static LENT_STACKS: Cell<*mut StackCache> = const { Cell::new(std::ptr::null_mut()) };
}

/// Stacks kept between blocks: mapping one costs more than a small block's work.
pub(super) struct StackCache {
    /// GPU threads' coroutine stacks.
    pub(super) coroutine: Vec<DefaultStack>,
    /// The guard stack.
    pub(super) guard: Option<DefaultStack>,
    /// The alternate signal stack of a thread that runs kernel code and had none, on which a
    /// stack overflow is handled.
    pub(super) signal: Option<trap::SignalStack>,
}

impl StackCache {
    pub(super) const fn new() -> StackCache {
        StackCache {
            coroutine: Vec::new(),
            guard: None,
            signal: None,
        }
    }
}

/// A device's stacks for the thread that launches on it (its workers keep their own).
#[derive(Clone)]
pub(super) struct LauncherStacks(Arc<Mutex<StackCache>>);

impl std::fmt::Debug for LauncherStacks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LauncherStacks")
    }
}

impl Default for LauncherStacks {
    fn default() -> LauncherStacks {
        LauncherStacks(Arc::new(Mutex::new(StackCache::new())))
    }
}

impl LauncherStacks {
    /// Runs `launch` with these stacks lent to the calling thread, locked once for the whole
    /// launch (a device's launches run one at a time anyway).
    pub(super) fn lend<R>(&self, launch: impl FnOnce() -> R) -> R {
        struct Restore(*mut StackCache);
        impl Drop for Restore {
            fn drop(&mut self) {
                LENT_STACKS.with(|l| l.set(self.0));
            }
        }
        let mut stacks = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // Declared after the guard, so dropped (the signal stack removed, the pointer reset)
        // before it unlocks.
        let _signal = trap::SignalStackLent::lend(&mut stacks.signal);
        let _restore = Restore(LENT_STACKS.with(|l| l.replace(&raw mut *stacks)));
        launch()
    }
}

/// Runs `f` on the calling thread's stack cache: a worker's own, or the stacks lent to a
/// launching thread; a thread with neither maps and unmaps stacks as it goes.
pub(super) fn with_stacks<R>(f: impl FnOnce(&mut StackCache) -> R) -> R {
    if pool::on_worker_thread() {
        return WORKER_STACKS.with_borrow_mut(|s| {
            trap::keep_signal_stack(&mut s.signal);
            f(s)
        });
    }
    let lent = LENT_STACKS.with(Cell::get);
    if lent.is_null() {
        return f(&mut StackCache::new());
    }
    // SAFETY: `LauncherStacks::lend` set the pointer to the cache behind the lock guard it
    // holds for as long as the pointer is set, on this thread only; no `f` here calls
    // `with_stacks` again, so this is the one reference to the cache while it lives.
    f(unsafe { &mut *lent })
}

/// Runs `f` (kernel code of launch `l` outside GPU-thread coroutines) on this thread's guard
/// stack, so that a panic in it can leave it: `calls::cpu_panic` suspends the guard, which is
/// then reset, not resumed; a stack overflow makes it return (see `trap`). After either the
/// launch's ctx holds the report.
pub(super) fn guarded<F: FnOnce()>(l: &Launch, f: F) -> Result<()> {
    let stack = take_guard_stack(l)?;
    let info = trap::StackInfo::of(&stack);
    let body = move |y: &GuardYield, ()| {
        GUARD.with(|g| g.set(y));
        f();
        GUARD.with(|g| g.set(std::ptr::null()));
    };
    // SAFETY: `body` borrows from this frame, and the coroutine does not outlive it: it either
    // completes in the `resume` below or is reset there.
    let mut co = unsafe { Coroutine::with_stack_unchecked(stack, body) };
    let (result, overflowed) = trap::resume(&mut co, info);
    if overflowed {
        GUARD.with(|g| g.set(std::ptr::null()));
        l.ctx().overflowed(info.bytes);
    }
    if let CoroutineResult::Yield(()) = result {
        GUARD.with(|g| g.set(std::ptr::null()));
        CURRENT.with(|c| c.set(std::ptr::null()));
        // SAFETY: the coroutine is suspended in `cpu_panic`, on frames of the kernel (image
        // code, built with `-Cpanic=abort`, so it has no unwinding cleanups to skip; its
        // locals' destructors are not run, as on a GPU) and of this closure, which holds
        // nothing to drop but `f`'s borrows.
        unsafe { co.force_reset() };
    }
    give_stack(l, co.into_stack());
    Ok(())
}

/// This thread's guard stack, mapped on first use.
pub(super) fn take_guard_stack(l: &Launch) -> Result<DefaultStack> {
    match with_stacks(|s| s.guard.take()) {
        Some(stack) => Ok(stack),
        None => DefaultStack::new(l.sizes.guard).map_err(|source| Error::Os {
            call: "mmap (guard stack)",
            source,
        }),
    }
}

pub(super) type ThreadCoroutine = Coroutine<(), Wait, (), DefaultStack>;

/// Drops a GPU thread's coroutine whatever its state, keeping its stack; after a panic in the
/// block.
pub(super) fn abandon(l: &Launch, mut co: ThreadCoroutine) {
    // A thread not started yet (after the block's panicking one) is reset too: only a finished
    // coroutine gives its stack back.
    if !co.done() {
        // SAFETY: the coroutine is suspended in image code (built with `-Cpanic=abort`, no
        // cleanups to skip; its locals' destructors are not run, as on a GPU) under the
        // thread closure of `run_block_with_barriers`/`probe`, which holds nothing to drop, or
        // has not started, its closure holding only copied pointers and indices.
        unsafe { co.force_reset() };
    }
    CURRENT.with(|c| c.set(std::ptr::null()));
    give_stack(l, co.into_stack());
}

pub(super) fn take_stack(l: &Launch) -> Result<DefaultStack> {
    let cached = with_stacks(|s| s.coroutine.pop());
    match cached {
        Some(s) => Ok(s),
        None => DefaultStack::new(l.sizes.coroutine).map_err(|source| Error::Os {
            call: "mmap (coroutine stack)",
            source,
        }),
    }
}

/// Keeps `stack` for the next use: one of the guard stack's size (as `calls::probe` and
/// [`guarded`] use) as this thread's guard stack while it has none, the others for GPU threads'
/// coroutines (where the sizes differ, a second guard-sized stack is unmapped).
pub(super) fn give_stack(l: &Launch, stack: DefaultStack) {
    let bytes = trap::StackInfo::of(&stack).bytes;
    with_stacks(|s| {
        if bytes >= l.sizes.guard && s.guard.is_none() {
            s.guard = Some(stack);
        } else if bytes < l.sizes.guard || l.sizes.coroutine >= l.sizes.guard {
            s.coroutine.push(stack);
        }
    });
}
