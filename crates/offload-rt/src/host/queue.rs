//! The streams of a device without streams of its own (the CPU device): a queue, a thread
//! per stream running its work in order; and how a launch is queued on any stream.

use std::ffi::c_void;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use super::profile;
use crate::backend::BackendStream;
use crate::error::{Error, Result};
use crate::launch::LaunchArgs;
use crate::os_thread;

/// How a stream queues its work.
pub(crate) enum StreamImpl {
    /// The device's own stream (a GPU driver's).
    Driver(Box<dyn BackendStream>),
    /// A queue of the runtime's (the CPU device).
    Queue(Queue),
}

impl std::fmt::Debug for StreamImpl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamImpl::Driver(s) => s.fmt(f),
            StreamImpl::Queue(_) => f.write_str("Queue"),
        }
    }
}

/// One step of a queue's work; replayable, for graphs.
pub(super) type Op = Arc<dyn Fn() -> Result<()> + Send + Sync>;

#[derive(Default)]
pub(super) struct QueueState {
    queued: u64,
    done: u64,
    error: Option<Error>,
    pub(super) capture: Option<Vec<Op>>,
}

/// What a queue's worker and its owners share.
pub(crate) struct QueueShared {
    state: Mutex<QueueState>,
    changed: Condvar,
}

impl QueueShared {
    pub(super) fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until everything queued so far has run.
    pub(crate) fn drain(&self) {
        let mut st = self.lock();
        while st.done < st.queued {
            st = self
                .changed
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// A thread running one stream's work in order.
pub(crate) struct Queue {
    /// The stream's number in the profile's record.
    pub(super) id: u64,
    pub(super) shared: Arc<QueueShared>,
    tx: Mutex<Option<Sender<Op>>>,
    worker: Mutex<Option<os_thread::JoinHandle>>,
}

impl Queue {
    pub(super) fn new() -> Result<Queue> {
        let shared = Arc::new(QueueShared {
            state: Mutex::new(QueueState::default()),
            changed: Condvar::new(),
        });
        let (tx, rx) = mpsc::channel::<Op>();
        let worker_shared = Arc::clone(&shared);
        let worker = os_thread::spawn("offload-stream", move || {
            for op in rx {
                let result = op();
                let mut st = worker_shared.lock();
                if let Err(e) = result {
                    st.error.get_or_insert(e);
                }
                st.done += 1;
                drop(st);
                worker_shared.changed.notify_all();
            }
        })
        .map_err(Error::Worker)?;
        Ok(Queue {
            id: super::profile::next_stream(),
            shared,
            tx: Mutex::new(Some(tx)),
            worker: Mutex::new(Some(worker)),
        })
    }

    /// Queues `op`, or records it when a capture is in progress.
    pub(super) fn push(&self, op: Op) -> Result<()> {
        let mut st = self.shared.lock();
        if let Some(capture) = st.capture.as_mut() {
            capture.push(op);
            return Ok(());
        }
        st.queued += 1;
        drop(st);
        let sent = self
            .tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|tx| tx.send(op).is_ok());
        if sent {
            Ok(())
        } else {
            let mut st = self.shared.lock();
            st.queued -= 1;
            Err(Error::Worker(std::io::Error::other(
                "the stream's worker thread has stopped",
            )))
        }
    }

    pub(super) fn synchronize(&self) -> Result<()> {
        self.shared.drain();
        match self.shared.lock().error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// As [`Queue::synchronize`], giving up after `timeout` (the work goes on).
    pub(super) fn synchronize_timeout(&self, timeout: Duration, device: &str) -> Result<()> {
        let start = Instant::now();
        let mut st = self.shared.lock();
        let target = st.queued;
        while st.done < target {
            let waited = start.elapsed();
            if waited >= timeout {
                return Err(Error::Timeout {
                    device: device.to_owned(),
                    kernels: Vec::new(),
                    waited,
                });
            }
            st = self
                .shared
                .changed
                .wait_timeout(st, timeout - waited)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        match st.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    pub(super) fn capturing(&self) -> bool {
        self.shared.lock().capture.is_some()
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        // Closing the channel ends the worker once it has run what is queued.
        drop(
            self.tx
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        if let Some(worker) = self
            .worker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            worker.join();
        }
    }
}

/// Raw pointers an [`Op`] carries to memory whose owner keeps it valid until the op has run
/// (see the module's documentation).
#[derive(Clone, Copy)]
pub(super) struct SendPtr(pub(super) *mut u8);
// SAFETY: the pointer is only dereferenced by the op, while its owner guarantees the memory
// (see each use).
unsafe impl Send for SendPtr {}
// SAFETY: as above.
unsafe impl Sync for SendPtr {}

/// A launch's parameter values, copied so that a queued launch can run after the caller's
/// values are gone: one 16-byte-aligned box per parameter.
struct OwnedParams {
    values: Vec<Box<[u128]>>,
}

impl OwnedParams {
    /// # Safety
    /// `params[i]` points at `sizes[i]` readable bytes.
    unsafe fn copy(params: &[*mut c_void], sizes: &[usize]) -> OwnedParams {
        let values = params
            .iter()
            .zip(sizes)
            .map(|(&p, &size)| {
                let mut value = vec![0u128; size.div_ceil(16)].into_boxed_slice();
                // SAFETY: the caller's contract; the box has at least `size` bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        p.cast::<u8>(),
                        value.as_mut_ptr().cast::<u8>(),
                        size,
                    );
                };
                value
            })
            .collect();
        OwnedParams { values }
    }

    fn pointers(&self) -> Vec<*mut c_void> {
        self.values
            .iter()
            .map(|v| v.as_ptr().cast_mut().cast::<c_void>())
            .collect()
    }
}

/// Queues `launch` of `kernel` of `module` (the typed handles call this through
/// [`Device::launch_args`](crate::Device::launch_args)).
///
/// # Safety
/// As [`Device::launch_args`](crate::Device::launch_args).
pub(crate) unsafe fn queue_launch(
    imp: &StreamImpl,
    module: &Arc<dyn crate::backend::Module>,
    kernel: crate::backend::KernelHandle,
    launch: &LaunchArgs<'_>,
) -> Result<()> {
    match imp {
        StreamImpl::Driver(s) => {
            // SAFETY: forwarded; the driver copies the parameter values at the call.
            unsafe { s.launch(module.as_ref(), kernel, launch) }?;
            if let Some(recorder) = profile::recorder() {
                let module = launch.module.unwrap_or("");
                let (config, bytes) = (&launch.config, launch.bytes);
                recorder.launch(launch.kernel, module, 0, config, bytes, None);
            }
            Ok(())
        }
        StreamImpl::Queue(q) => {
            launch.check()?;
            if launch.config.is_clustered() {
                return Err(launch.invalid(crate::backend::cpu::NO_CLUSTERS.to_owned()));
            }
            match launch.sizes {
                Some(sizes) => {
                    // SAFETY: the caller's contract.
                    let owned = unsafe { OwnedParams::copy(launch.params, sizes) };
                    let module = Arc::clone(module);
                    let (name, config) = (launch.kernel, launch.config);
                    let (cooperative, bytes) = (launch.cooperative, launch.bytes);
                    let (module_name, stream) = (launch.module.unwrap_or(""), q.id);
                    q.push(Arc::new(move || {
                        let pointers = owned.pointers();
                        let mut copy = LaunchArgs::new(name, config, &pointers);
                        copy.cooperative = cooperative;
                        let recorder = profile::recorder();
                        let start = recorder.map(|_| Instant::now());
                        // SAFETY: the values are copies of the caller's; the device
                        // addresses among them stay allocated until the queue has run
                        // (freeing waits for the device's queues).
                        let ran = unsafe { module.launch(kernel, &copy) };
                        if let (Some(recorder), Some(start), Ok(())) = (recorder, start, &ran) {
                            let times = Some((start, Instant::now()));
                            recorder.launch(name, module_name, stream, &config, bytes, times);
                        }
                        ran
                    }))
                }
                // Without the parameters' sizes the values cannot outlive the call: run
                // the launch now, after the work queued before it.
                None if q.capturing() => Err(Error::Capture {
                    reason: format!(
                        "`{}` was launched without its parameters' sizes (launch_raw); \
                         use the kernel's typed launch to record it",
                        launch.kernel
                    ),
                }),
                None => {
                    q.synchronize()?;
                    // SAFETY: forwarded; the values are alive for this call.
                    unsafe { module.launch(kernel, launch) }
                }
            }
        }
    }
}

/// A queue as the device keeps track of it (to wait for its work before freeing memory).
pub(crate) type QueueRef = Weak<QueueShared>;
