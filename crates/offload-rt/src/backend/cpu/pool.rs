//! A persistent pool of worker threads that run the blocks of CPU launches.
//!
//! One launch at a time: the launching thread publishes a job (a range of block indices and
//! the function running a chunk of them), works on it itself, and returns once every worker
//! has left it. Workers start on the first launch that needs them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::os_thread;

type ChunkFn<'a> = dyn Fn(u64, u64) -> Result<()> + Sync + 'a;

struct Job {
    f: *const ChunkFn<'static>,
    next: AtomicU64,
    total: u64,
    chunk: u64,
    error: Mutex<Option<Error>>,
}

impl Job {
    fn work(&self) {
        loop {
            let begin = self.next.fetch_add(self.chunk, Ordering::Relaxed);
            if begin >= self.total {
                return;
            }
            let end = begin.saturating_add(self.chunk).min(self.total);
            // SAFETY: `f` points at the closure of the `Pool::run` call that published this
            // job, which does not return before every worker has left the job.
            let f = unsafe { &*self.f };
            if let Err(e) = f(begin, end) {
                let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
                slot.get_or_insert(e);
                // Stop handing out chunks.
                self.next.store(self.total, Ordering::Relaxed);
            }
        }
    }
}

struct JobPtr(*const Job);
// SAFETY: a Job is Sync (atomics and a mutex; `f` is a `Sync` closure) and outlives every
// worker's use of it (see `Pool::run`).
unsafe impl Send for JobPtr {}

#[derive(Default)]
struct State {
    job: Option<JobPtr>,
    shutdown: bool,
}

struct Inner {
    threads: usize,
    state: Mutex<State>,
    work: Condvar,
    done: Condvar,
    /// The launch counter (`u64::MAX` once shut down) and the workers still in the current
    /// launch: changed under `state`'s lock, read without it by a thread spinning before it
    /// sleeps.
    epoch: AtomicU64,
    active: AtomicUsize,
    /// How long a worker that finished its part of a launch, and the launching thread waiting
    /// for the others, spin before they sleep ([`SPIN`] unless set).
    spin: Duration,
}

/// How long the pool's threads spin before they sleep by default: a launch that follows
/// within it (a GPU program's launches, back to back) or a worker finishing within it costs no
/// wake-up, which took 7–50 µs on a virtual machine's cores. OpenMP's runtimes spin so too.
pub(super) const SPIN: Duration = Duration::from_micros(100);

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Spins up to `self.spin` while `waiting()` holds.
    fn spin_while(&self, waiting: impl Fn() -> bool) {
        if self.spin.is_zero() {
            return;
        }
        let deadline = Instant::now() + self.spin;
        let mut turns = 0u32;
        while waiting() {
            turns = turns.wrapping_add(1);
            if turns.is_multiple_of(64) {
                if Instant::now() >= deadline {
                    return;
                }
                // Another thread on this core (more workers than cores) gets its turn.
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

struct Handle {
    inner: Arc<Inner>,
    /// Serializes launches.
    launch: Mutex<()>,
    /// The workers, once started.
    workers: OnceLock<Vec<os_thread::JoinHandle>>,
}

impl Drop for Handle {
    /// Stops the workers and waits for them to exit: a pool in a library that is unloaded
    /// after its last device is dropped (a `cdylib` closed with `dlclose`) must leave no
    /// thread running its code.
    fn drop(&mut self) {
        {
            let mut st = self.inner.lock();
            st.shutdown = true;
            self.inner.epoch.store(u64::MAX, Ordering::Release);
        }
        self.inner.work.notify_all();
        // A worker cannot join itself; nor can it hold the last handle, short of kernel code
        // dropping a device.
        if on_worker_thread() {
            return;
        }
        for worker in self.workers.take().unwrap_or_default() {
            worker.join();
        }
    }
}

/// The worker pool of a CPU device.
#[derive(Clone)]
pub(super) struct Pool {
    handle: Arc<Handle>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("threads", &self.handle.inner.threads)
            .finish()
    }
}

impl Pool {
    /// A pool running launches on `threads` threads, the launching one included, which spin
    /// for [`SPIN`] before they sleep.
    pub(super) fn new(threads: usize) -> Pool {
        Pool::with_spin(threads, SPIN)
    }

    /// A pool whose threads spin for `spin` before they sleep (none for zero).
    pub(super) fn with_spin(threads: usize, spin: Duration) -> Pool {
        Pool {
            handle: Arc::new(Handle {
                inner: Arc::new(Inner {
                    threads,
                    state: Mutex::new(State::default()),
                    work: Condvar::new(),
                    done: Condvar::new(),
                    epoch: AtomicU64::new(0),
                    active: AtomicUsize::new(0),
                    spin,
                }),
                launch: Mutex::new(()),
                workers: OnceLock::new(),
            }),
        }
    }

    /// Threads running a launch, the launching one included.
    pub(super) fn threads(&self) -> usize {
        self.handle.inner.threads
    }

    /// Threads that run a launch at once, the launching one included: the pool's threads,
    /// less any worker that could not be started.
    pub(super) fn resident(&self) -> usize {
        1 + self.start_workers()
    }

    fn start_workers(&self) -> usize {
        self.handle
            .workers
            .get_or_init(|| {
                let mut started = Vec::new();
                for i in 1..self.handle.inner.threads {
                    let inner = Arc::clone(&self.handle.inner);
                    let spawned = os_thread::spawn(&format!("offload-cpu-{i}"), move || {
                        worker(&inner);
                    });
                    // With fewer workers than asked for, launches still run (slower).
                    match spawned {
                        Ok(handle) => started.push(handle),
                        Err(_) => break,
                    }
                }
                started
            })
            .len()
    }

    /// Calls `f(begin, end)` for consecutive chunks of `0..total` of `chunk` indices (the last
    /// may be shorter), spread over the pool; returns once all are done, with the first error.
    pub(super) fn run(&self, total: u64, chunk: u64, f: &ChunkFn<'_>) -> Result<()> {
        let chunk = chunk.max(1);
        if total == 0 {
            return Ok(());
        }
        let _serial = self.handle.launch.lock().unwrap_or_else(|p| p.into_inner());
        let workers = if total > chunk {
            self.start_workers()
        } else {
            0
        };
        // SAFETY: only the lifetime is erased. The pointer is used by workers only while the
        // job is published, and this function unpublishes it and waits for every worker to
        // leave it before returning (and so before `f` can be dropped).
        let f: *const ChunkFn<'static> =
            unsafe { std::mem::transmute::<*const ChunkFn<'_>, *const ChunkFn<'static>>(f) };
        let job = Job {
            f,
            next: AtomicU64::new(0),
            total,
            chunk,
            error: Mutex::new(None),
        };
        if workers == 0 {
            job.work();
        } else {
            let inner = &self.handle.inner;
            {
                let mut st = inner.lock();
                st.job = Some(JobPtr(&raw const job));
                inner.active.store(workers, Ordering::Relaxed);
                inner.epoch.fetch_add(1, Ordering::Release);
            }
            inner.work.notify_all();
            job.work();
            inner.spin_while(|| inner.active.load(Ordering::Acquire) > 0);
            let mut st = inner.lock();
            while inner.active.load(Ordering::Acquire) > 0 {
                st = inner.done.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            st.job = None;
        }
        match job.error.into_inner() {
            Ok(None) | Err(_) => Ok(()),
            Ok(Some(e)) => Err(e),
        }
    }
}

thread_local! {
    /// Whether this thread is a pool worker. No destructor: see `LENT_STACKS` (cpu.rs).
    static ON_WORKER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is a worker of some pool (not a thread that launches).
pub(crate) fn on_worker_thread() -> bool {
    ON_WORKER.with(std::cell::Cell::get)
}

fn worker(inner: &Inner) {
    ON_WORKER.with(|w| w.set(true));
    let mut seen = 0u64;
    loop {
        inner.spin_while(|| inner.epoch.load(Ordering::Acquire) == seen);
        let job = {
            let mut st = inner.lock();
            while inner.epoch.load(Ordering::Acquire) == seen && !st.shutdown {
                st = inner.work.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            if st.shutdown {
                return;
            }
            seen = inner.epoch.load(Ordering::Acquire);
            match &st.job {
                Some(j) => j.0,
                None => continue,
            }
        };
        // SAFETY: the job stays published (and alive) until `active` drops to zero, which
        // needs this worker's decrement below.
        unsafe { &*job }.work();
        // Under the lock: the launching thread tests `active` under it before it waits.
        let _st = inner.lock();
        if inner.active.fetch_sub(1, Ordering::AcqRel) == 1 {
            inner.done.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use super::*;

    #[test]
    fn dropping_the_last_handle_waits_for_every_worker_to_exit() {
        let pool = Pool::new(4);
        pool.run(64, 1, &|_, _| Ok(())).unwrap();
        assert_eq!(pool.start_workers(), 3);
        // Each worker holds the shared state until it has returned.
        let inner = Arc::downgrade(&pool.handle.inner);
        drop(pool);
        assert!(inner.upgrade().is_none(), "a worker outlived its pool");
    }

    #[test]
    fn every_index_runs_once() {
        let pool = Pool::new(4);
        for total in [0u64, 1, 7, 1000, 4096] {
            let hits: Vec<AtomicU64> = (0..total).map(|_| AtomicU64::new(0)).collect();
            pool.run(total, 3, &|b, e| {
                for i in b..e {
                    hits[i as usize].fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            })
            .unwrap();
            assert!(
                hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                "total {total}"
            );
        }
    }

    /// Launches back to back find the workers spinning; launches after a pause longer than
    /// the spin find them asleep: both run every index once, on more than one thread.
    #[test]
    fn workers_take_launches_whether_spinning_or_asleep() {
        let spinning = (Pool::new(2), SPIN * 20);
        let sleeping = (Pool::with_spin(2, Duration::ZERO), Duration::from_millis(2));
        for (pool, long) in [spinning, sleeping] {
            launches_after_pauses(&pool, long);
        }
    }

    fn launches_after_pauses(pool: &Pool, long: Duration) {
        for pause in [Duration::ZERO, Duration::ZERO, long, Duration::ZERO, long] {
            std::thread::sleep(pause);
            let hits: Vec<AtomicU64> = (0..64).map(|_| AtomicU64::new(0)).collect();
            let threads = Mutex::new(std::collections::HashSet::new());
            pool.run(64, 1, &|b, e| {
                threads.lock().unwrap().insert(std::thread::current().id());
                // Long enough for the worker to take a chunk however late it wakes.
                std::thread::sleep(Duration::from_millis(1));
                for i in b..e {
                    hits[i as usize].fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            })
            .unwrap();
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
            assert_eq!(threads.into_inner().unwrap().len(), 2, "after {pause:?}");
        }
    }

    #[test]
    fn first_error_is_returned() {
        let pool = Pool::new(3);
        let err = pool
            .run(100, 1, &|b, _| {
                if b == 42 {
                    Err(Error::InvalidLaunch {
                        kernel: "k".into(),
                        reason: "at 42".into(),
                    })
                } else {
                    Ok(())
                }
            })
            .unwrap_err();
        assert!(err.to_string().contains("at 42"));
    }
}
