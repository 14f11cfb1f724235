//! One launch on the CPU device as its workers share it: the record's pointers and stack
//! sizes ([`Launch`]), its state (a failure, the prints, whether a barrier was reached where no
//! coroutine runs: [`LaunchCtx`]) and a cooperative launch's grid barrier.

use std::ffi::c_void;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, KernelPanicReport, Result};
use crate::kernel::abi::{CpuLaunch, CpuPositionFn};

/// Stack of each GPU thread run as a coroutine, unless `OFFLOAD_KERNEL_STACK` says otherwise.
pub(super) const COROUTINE_STACK: usize = 128 * 1024;

/// Stack a worker runs kernels on outside coroutines (the GPU threads it runs one after
/// another each have all of it), unless `OFFLOAD_KERNEL_STACK` says otherwise: a thread's
/// default (memory is committed as it is touched).
pub(super) const GUARD_STACK: usize = 8 * 1024 * 1024;

/// The smallest stack a GPU thread gets, whatever `OFFLOAD_KERNEL_STACK` says: room for the
/// runtime's callbacks (device prints, panic reports) and the kernel frames that call them.
pub(super) const MIN_KERNEL_STACK: usize = 64 * 1024;

/// The stacks kernel code runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct StackSizes {
    /// A GPU thread's coroutine stack.
    pub(super) coroutine: usize,
    /// A worker's guard stack.
    pub(super) guard: usize,
}

impl StackSizes {
    /// `bytes` for every GPU thread when given, else the defaults.
    pub(super) fn new(bytes: Option<usize>) -> StackSizes {
        match bytes {
            Some(n) => {
                let n = n.max(MIN_KERNEL_STACK);
                StackSizes {
                    coroutine: n,
                    guard: n,
                }
            }
            None => StackSizes {
                coroutine: COROUTINE_STACK,
                guard: GUARD_STACK,
            },
        }
    }
}

pub(super) struct LaunchCtx {
    /// A barrier was reached where no coroutine runs (the fast path or the region form).
    pub(super) divergent: AtomicBool,
    /// A barrier or warp operation the region form did not split at was reached (one in a
    /// function the kernel calls).
    pub(super) unmarked: AtomicBool,
    /// A GPU thread panicked or overflowed its stack: workers start no more blocks.
    pub(super) panicked: AtomicBool,
    /// The first panic's report or stack overflow.
    pub(super) failure: Mutex<Option<Failure>>,
    /// What the launch's device prints wrote, printed when the launch is over.
    pub(super) output: Mutex<String>,
    /// The image's [`CpuPositionFn`].
    pub(super) position: CpuPositionFn,
}

/// How a GPU thread ended a launch.
pub(super) enum Failure {
    Panic(KernelPanicReport),
    /// A block of a cooperative launch returned before a grid barrier others reached.
    GridSync {
        block: u64,
    },
    /// `Grid::sync` in a launch that is not cooperative (a raw launch of a cooperative
    /// kernel).
    NotCooperative,
    /// It overflowed its stack of `stack_bytes`, at this position.
    Overflow {
        block: [u32; 3],
        thread: [u32; 3],
        stack_bytes: usize,
    },
}

impl Drop for LaunchCtx {
    fn drop(&mut self) {
        crate::print::emit(self.output.get_mut().unwrap_or_else(|p| p.into_inner()));
    }
}

impl LaunchCtx {
    /// The state of the launch whose record is `launch`.
    ///
    /// # Safety
    ///
    /// `launch` is a record the runtime made for a launch still running, whose `ctx` is its
    /// `LaunchCtx`.
    pub(super) unsafe fn of<'a>(launch: *const CpuLaunch) -> &'a LaunchCtx {
        // SAFETY: this function's contract.
        unsafe { &*(*launch).ctx.cast::<LaunchCtx>() }
    }

    pub(super) fn panicked(&self) -> bool {
        self.panicked.load(Ordering::Relaxed)
    }

    /// Records `failure` unless a thread failed first, and stops the launch.
    pub(super) fn fail(&self, failure: impl FnOnce() -> Failure) {
        let mut slot = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(failure());
        }
        self.panicked.store(true, Ordering::Relaxed);
    }

    /// Records that the GPU thread the calling OS thread ran last overflowed its stack of
    /// `stack_bytes`; called on the runtime's stack right after the kernel's coroutine left,
    /// before this thread runs other kernel code (the image's index state names the thread).
    pub(super) fn overflowed(&self, stack_bytes: usize) {
        // SAFETY: the image's position function reads its thread-local index state.
        let position = unsafe { (self.position)() };
        self.fail(|| Failure::Overflow {
            block: position.block,
            thread: position.thread,
            stack_bytes,
        });
    }

    /// [`Error::KernelPanic`] or [`Error::KernelStackOverflow`] for kernel `name` if one of its
    /// threads panicked or overflowed its stack.
    pub(super) fn check_failure(&self, name: &str) -> Result<()> {
        if !self.panicked() {
            return Ok(());
        }
        let failure = self
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        match failure {
            None => Ok(()),
            Some(Failure::Panic(report)) => Err(Error::KernelPanic {
                kernel: name.to_owned(),
                device: "cpu".to_owned(),
                panic: Box::new(report),
            }),
            Some(Failure::GridSync { block }) => Err(Error::GridSyncMismatch {
                kernel: name.to_owned(),
                block,
            }),
            Some(Failure::NotCooperative) => Err(Error::InvalidLaunch {
                kernel: name.to_owned(),
                reason: "it reached `Grid::sync` in a launch that is not cooperative; launch \
                         a kernel taking a `Grid` through its typed handle"
                    .to_owned(),
            }),
            Some(Failure::Overflow {
                block,
                thread,
                stack_bytes,
            }) => Err(Error::KernelStackOverflow {
                kernel: name.to_owned(),
                device: "cpu".to_owned(),
                block,
                thread,
                stack_bytes,
            }),
        }
    }
}

/// Pointers to a launch's record and parameters, shared with the worker threads, and the
/// device's stack sizes.
pub(super) struct Launch {
    pub(super) launch: *const CpuLaunch,
    pub(super) params: *const *mut c_void,
    pub(super) sizes: StackSizes,
    /// The grid barrier of a cooperative launch, or null.
    pub(super) grid: *const GridBarrier,
}

impl Launch {
    pub(super) fn ctx(&self) -> &LaunchCtx {
        // SAFETY: the record and its ctx are alive for the launch.
        unsafe { LaunchCtx::of(self.launch) }
    }

    pub(super) fn panicked(&self) -> bool {
        self.ctx().panicked()
    }

    pub(super) fn grid(&self) -> Option<&GridBarrier> {
        // SAFETY: when set, the barrier lives on the launching frame for the whole launch.
        unsafe { self.grid.as_ref() }
    }
}

/// The grid barrier of a cooperative launch on the CPU device: each block (on a worker of its
/// own) waits here once all its threads have reached `Grid::sync`.
pub(super) struct GridBarrier {
    pub(super) blocks: u64,
    pub(super) state: Mutex<GridState>,
    pub(super) opened: std::sync::Condvar,
}

#[derive(Default)]
pub(super) struct GridState {
    /// Blocks waiting at the current barrier.
    pub(super) arrived: u64,
    /// Barriers opened so far.
    pub(super) generation: u64,
    /// The first block that returned.
    pub(super) returned: Option<u64>,
    /// The launch failed: waiting blocks leave.
    pub(super) aborted: bool,
}

impl GridBarrier {
    pub(super) fn new(blocks: u64) -> GridBarrier {
        GridBarrier {
            blocks,
            state: Mutex::new(GridState::default()),
            opened: std::sync::Condvar::new(),
        }
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, GridState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A block arrives; returns once every block has, or `false` when the launch failed (a
    /// panic, or a block that returned and will never arrive).
    pub(super) fn wait(&self, ctx: &LaunchCtx) -> bool {
        let mut state = self.lock();
        if state.aborted || ctx.panicked() {
            return false;
        }
        if let Some(returned) = state.returned {
            drop(state);
            self.mismatch(ctx, returned);
            return false;
        }
        state.arrived += 1;
        if state.arrived == self.blocks {
            state.arrived = 0;
            state.generation += 1;
            self.opened.notify_all();
            return true;
        }
        let generation = state.generation;
        while state.generation == generation && !state.aborted {
            state = self.opened.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state.generation != generation
    }

    /// Block `block` has returned (or left after a failure).
    pub(super) fn leave(&self, ctx: &LaunchCtx, block: u64) {
        let mut state = self.lock();
        state.returned.get_or_insert(block);
        let waiting = state.arrived > 0 && !state.aborted;
        drop(state);
        if ctx.panicked() {
            self.abort();
        } else if waiting {
            self.mismatch(ctx, block);
        }
    }

    /// Fails the launch: block `returned` returned before a grid barrier others reached.
    pub(super) fn mismatch(&self, ctx: &LaunchCtx, returned: u64) {
        ctx.fail(|| Failure::GridSync { block: returned });
        self.abort();
    }

    /// Wakes every waiting block to leave.
    pub(super) fn abort(&self) {
        self.lock().aborted = true;
        self.opened.notify_all();
    }
}
