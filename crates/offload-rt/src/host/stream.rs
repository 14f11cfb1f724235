//! Asynchronous work with one API on every device: [`Stream`]s (ordered queues of launches
//! and copies), [`Event`]s (points in a stream's work: wait, query, time), [`Graph`]s
//! (recorded work, replayed cheaply) and [`PinnedBuffer`]s (page-locked host memory for
//! asynchronous copies).
//!
//! A GPU's streams are its driver's (CUDA or HIP streams, events and graphs). A device
//! without streams of its own, the CPU device, gets a queue: a thread per stream that runs
//! the stream's work in order, each launch on the device's worker pool, so code written for
//! GPUs runs unchanged.
//!
//! Host memory is never used by the device after safe code could reach it again: an
//! asynchronous copy notes its completion event in the [`PinnedBuffer`], whose accessors and
//! drop wait for it; on the CPU device, whose device memory is host memory, freeing a buffer
//! and the synchronous copies wait for the device's queues first.

use std::ffi::c_void;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use super::Device;
use super::buffer::DeviceBuffer;
use super::profile::{self, Direction};
use crate::backend::{BackendEvent, BackendGraph, BackendStream, HostMemory};
use crate::error::{Error, Result};
use crate::kernel::DeviceCopy;
use crate::launch::LaunchArgs;
use crate::os_thread;

/// An ordered queue of launches and copies on one device. Work queued on it returns at
/// once and runs in order; work on different streams may overlap. Launch on a stream by
/// passing [`Stream::device`] to a kernel's `launch`.
///
/// Dropping a stream lets its queued work finish.
#[derive(Debug)]
pub struct Stream {
    bound: Device,
}

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
type Op = Arc<dyn Fn() -> Result<()> + Send + Sync>;

#[derive(Default)]
struct QueueState {
    queued: u64,
    done: u64,
    error: Option<Error>,
    capture: Option<Vec<Op>>,
}

/// What a queue's worker and its owners share.
pub(crate) struct QueueShared {
    state: Mutex<QueueState>,
    changed: Condvar,
}

impl QueueShared {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
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
    id: u64,
    shared: Arc<QueueShared>,
    tx: Mutex<Option<Sender<Op>>>,
    worker: Mutex<Option<os_thread::JoinHandle>>,
}

impl Queue {
    fn new() -> Result<Queue> {
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
    fn push(&self, op: Op) -> Result<()> {
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

    fn synchronize(&self) -> Result<()> {
        self.shared.drain();
        match self.shared.lock().error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// As [`Queue::synchronize`], giving up after `timeout` (the work goes on).
    fn synchronize_timeout(&self, timeout: Duration, device: &str) -> Result<()> {
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

    fn capturing(&self) -> bool {
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
struct SendPtr(*mut u8);
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

impl Device {
    /// A new stream on this device.
    ///
    /// # Errors
    /// A driver failure, or [`Error::Worker`] when the CPU device's queue thread cannot
    /// start.
    pub fn stream(&self) -> Result<Stream> {
        let imp = match self.backend().create_stream()? {
            Some(stream) => StreamImpl::Driver(stream),
            None => {
                let queue = Queue::new()?;
                self.register_queue(Arc::downgrade(&queue.shared));
                StreamImpl::Queue(queue)
            }
        };
        Ok(Stream {
            bound: self.bound_to(Arc::new(imp)),
        })
    }

    /// A stream another owner created on this device (`CUstream`, `hipStream_t`: a library's,
    /// cudarc's, one the CUDA runtime API made) as a [`Stream`], so that kernels and copies
    /// queue on it in order with that owner's work; it is not destroyed on drop.
    ///
    /// # Errors
    /// [`Error::NoDriverStreams`] on the CPU device, whose streams are the runtime's.
    ///
    /// # Safety
    /// `raw` is a live stream of this device's driver context (CUDA: the primary context of
    /// [`Device::raw`]), and it outlives the stream returned and every clone of its device.
    pub unsafe fn stream_from_raw(&self, raw: *mut c_void) -> Result<Stream> {
        // SAFETY: the caller's contract.
        match unsafe { self.backend().wrap_stream(raw) } {
            Some(stream) => Ok(Stream {
                bound: self.bound_to(Arc::new(StreamImpl::Driver(stream))),
            }),
            None => Err(Error::NoDriverStreams {
                device: self.describe().to_owned(),
            }),
        }
    }
}

impl Stream {
    /// The device, bound to this stream: a kernel's `launch` with it queues the launch here.
    pub fn device(&self) -> &Device {
        &self.bound
    }

    fn imp(&self) -> &StreamImpl {
        self.bound
            .stream_impl()
            .expect("a Stream's device is bound to it")
    }

    /// Waits for everything queued so far; the first error of its work (a kernel fault on a
    /// GPU) comes back here.
    ///
    /// # Errors
    /// The work's first error.
    pub fn synchronize(&self) -> Result<()> {
        match self.imp() {
            StreamImpl::Driver(s) => s.synchronize(),
            StreamImpl::Queue(q) => q.synchronize(),
        }
        .map_err(|e| self.bound.with_fault_context(e))
    }

    /// As [`Stream::synchronize`], giving up after `timeout`: [`Error::Timeout`] names the
    /// last kernel launched on the device, which may still run (a kernel that loops
    /// forever). On a GPU, [`Device::reset`] stops such work. On the CPU device the stream's
    /// worker thread cannot be stopped: it keeps running the kernel, later work on the stream
    /// waits behind it, and dropping the stream waits for it.
    ///
    /// # Errors
    /// [`Error::Timeout`], or what [`Stream::synchronize`] reports.
    pub fn synchronize_timeout(&self, timeout: Duration) -> Result<()> {
        match self.imp() {
            StreamImpl::Driver(s) => s.synchronize_timeout(timeout),
            StreamImpl::Queue(q) => q.synchronize_timeout(timeout, self.bound.describe()),
        }
        .map_err(|e| self.bound.with_fault_context(e))
    }

    /// An event recorded after the work queued so far.
    ///
    /// # Errors
    /// A driver failure, or [`Error::Capture`] while recording a graph on the CPU device.
    pub fn record(&self) -> Result<Event> {
        let imp = match self.imp() {
            StreamImpl::Driver(s) => EventImpl::Driver(s.record()?),
            StreamImpl::Queue(q) => {
                if q.capturing() {
                    return Err(Error::Capture {
                        reason: "an event cannot be recorded into a graph".into(),
                    });
                }
                let mark = Arc::new(Mark::default());
                let set = Arc::clone(&mark);
                q.push(Arc::new(move || {
                    set.complete();
                    Ok(())
                }))?;
                EventImpl::Queue(mark)
            }
        };
        Ok(Event {
            device: self.bound.unbound(),
            imp,
        })
    }

    /// Makes the work queued after this call wait until `event` has completed.
    ///
    /// # Errors
    /// [`Error::WrongDevice`]-like [`Error::OtherDevice`] when the event is another
    /// device's, or a driver failure.
    pub fn wait(&self, event: &Event) -> Result<()> {
        self.same_device(&event.device, "event")?;
        match (self.imp(), &event.imp) {
            (StreamImpl::Driver(s), EventImpl::Driver(e)) => s.wait(e.as_ref()),
            (StreamImpl::Queue(q), EventImpl::Queue(mark)) => {
                let mark = Arc::clone(mark);
                q.push(Arc::new(move || {
                    mark.wait();
                    Ok(())
                }))
            }
            _ => Err(self.other_device("event", event.device.describe())),
        }
    }

    /// Queues a copy of `src` into `dst`; `src` is not written until the copy is done (its
    /// accessors wait).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`], [`Error::OtherDevice`], or a driver failure.
    pub fn copy_to_device<T: DeviceCopy>(
        &self,
        dst: &mut DeviceBuffer<T>,
        src: &PinnedBuffer<T>,
    ) -> Result<()> {
        self.same_device(dst.device(), "destination buffer")?;
        self.same_device(&src.device, "pinned buffer")?;
        if dst.len() != src.len {
            return Err(Error::LengthMismatch {
                device: dst.len(),
                host: src.len,
            });
        }
        let (to, from, bytes) = (dst.live_ptr()?, src.ptr(), src.bytes());
        if bytes != 0 {
            match self.imp() {
                // SAFETY: `to` is `dst`'s allocation of this device, `bytes` long; `from` is
                // `src`'s memory, kept alive and unwritten until the event noted below has
                // completed (its accessors and drop wait).
                StreamImpl::Driver(s) => unsafe { s.copy_to_device(to, from, bytes) }?,
                StreamImpl::Queue(q) => {
                    let (device, from) = (self.bound.unbound(), SendPtr(from));
                    let stream = q.id;
                    q.push(Arc::new(move || {
                        let from = from;
                        profile::copy(
                            || true,
                            Direction::ToDevice,
                            stream,
                            bytes,
                            || {
                                // SAFETY: as above; `to` stays allocated until the queue has run
                                // (freeing waits for the device's queues).
                                unsafe {
                                    device.backend().copy_to_device(
                                        to,
                                        std::slice::from_raw_parts(from.0, bytes),
                                    )
                                }
                            },
                        )
                    }))?;
                }
            }
        }
        src.note_pending(self)
    }

    /// Queues a copy of `src` into `dst`; `dst` is not read or written by the host until
    /// the copy is done (its accessors wait).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`], [`Error::OtherDevice`], or a driver failure.
    pub fn copy_to_host<T: DeviceCopy>(
        &self,
        dst: &mut PinnedBuffer<T>,
        src: &DeviceBuffer<T>,
    ) -> Result<()> {
        self.same_device(src.device(), "source buffer")?;
        self.same_device(&dst.device, "pinned buffer")?;
        if src.len() != dst.len {
            return Err(Error::LengthMismatch {
                device: src.len(),
                host: dst.len,
            });
        }
        let (to, from, bytes) = (dst.ptr(), src.live_ptr()?, dst.bytes());
        if bytes != 0 {
            match self.imp() {
                // SAFETY: `from` is `src`'s allocation of this device; `to` is `dst`'s
                // memory, which the host does not touch until the event noted below has
                // completed (its accessors and drop wait).
                StreamImpl::Driver(s) => unsafe { s.copy_to_host(to, from, bytes) }?,
                StreamImpl::Queue(q) => {
                    let (device, to) = (self.bound.unbound(), SendPtr(to));
                    let stream = q.id;
                    q.push(Arc::new(move || {
                        let to = to;
                        profile::copy(
                            || true,
                            Direction::ToHost,
                            stream,
                            bytes,
                            || {
                                // SAFETY: as above.
                                unsafe {
                                    device.backend().copy_to_host(
                                        std::slice::from_raw_parts_mut(to.0, bytes),
                                        from,
                                    )
                                }
                            },
                        )
                    }))?;
                }
            }
        }
        dst.note_pending(self)
    }

    /// Starts recording: until [`Stream::end_capture`], launches and copies queued on this
    /// stream are recorded into a graph instead of running.
    ///
    /// # Errors
    /// [`Error::Capture`] when already recording, or a driver failure.
    pub fn begin_capture(&self) -> Result<()> {
        match self.imp() {
            StreamImpl::Driver(s) => s.begin_capture(),
            StreamImpl::Queue(q) => {
                let mut st = q.shared.lock();
                if st.capture.is_some() {
                    return Err(Error::Capture {
                        reason: "the stream is already recording".into(),
                    });
                }
                st.capture = Some(Vec::new());
                Ok(())
            }
        }
    }

    /// Ends the recording begun by [`Stream::begin_capture`]; the graph replays it.
    ///
    /// # Errors
    /// [`Error::Capture`] when not recording, or a driver failure (work that cannot be
    /// recorded was queued).
    pub fn end_capture(&self) -> Result<Graph> {
        let imp = match self.imp() {
            StreamImpl::Driver(s) => GraphImpl::Driver(s.end_capture()?),
            StreamImpl::Queue(q) => match q.shared.lock().capture.take() {
                Some(ops) => GraphImpl::Queue(ops),
                None => {
                    return Err(Error::Capture {
                        reason: "the stream is not recording".into(),
                    });
                }
            },
        };
        Ok(Graph {
            device: self.bound.unbound(),
            imp,
        })
    }

    /// Ends the recording begun by [`Stream::begin_capture`] and makes `graph` replay it from
    /// now on: the way to change a graph's parameters between replays (record the same
    /// launches with the new values). A GPU graph's executable is updated in place where the
    /// driver can (CUDA 12 and newer, HIP), else instantiated anew.
    ///
    /// # Errors
    /// [`Error::Capture`] when not recording, [`Error::OtherDevice`], or a driver failure.
    pub fn end_capture_into(&self, graph: &mut Graph) -> Result<()> {
        self.same_device(&graph.device, "graph")?;
        match (self.imp(), &mut graph.imp) {
            (StreamImpl::Driver(s), GraphImpl::Driver(g)) => s.end_capture_into(g.as_mut()),
            (StreamImpl::Queue(q), GraphImpl::Queue(ops)) => match q.shared.lock().capture.take() {
                Some(recorded) => {
                    *ops = recorded;
                    Ok(())
                }
                None => Err(Error::Capture {
                    reason: "the stream is not recording".into(),
                }),
            },
            _ => Err(self.other_device("graph", graph.device.describe())),
        }
    }

    /// Queues one replay of `graph`.
    ///
    /// # Safety
    /// Every buffer the recorded work uses (device buffers and pinned host buffers) is
    /// still alive and not accessed by the host until the replay is done: a graph keeps raw
    /// addresses, not the buffers.
    ///
    /// # Errors
    /// [`Error::OtherDevice`], or a driver failure.
    pub unsafe fn launch_graph(&self, graph: &Graph) -> Result<()> {
        self.same_device(&graph.device, "graph")?;
        match (self.imp(), &graph.imp) {
            (StreamImpl::Driver(s), GraphImpl::Driver(g)) => s.launch_graph(g.as_ref()),
            (StreamImpl::Queue(q), GraphImpl::Queue(ops)) => {
                for op in ops {
                    q.push(Arc::clone(op))?;
                }
                Ok(())
            }
            _ => Err(self.other_device("graph", graph.device.describe())),
        }
    }

    fn same_device(&self, other: &Device, what: &'static str) -> Result<()> {
        if self.bound.same_device(other) {
            Ok(())
        } else {
            Err(self.other_device(what, other.describe()))
        }
    }

    fn other_device(&self, what: &'static str, other: &str) -> Error {
        Error::OtherDevice {
            what,
            owner: other.to_owned(),
            used_on: self.bound.describe().to_owned(),
        }
    }

    /// Queues `launch` of `kernel` of `module` (the typed handles call this through
    /// [`Device::launch_args`]).
    ///
    /// # Safety
    /// As [`Device::launch_args`].
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
}

/// A point in a stream's work, recorded by [`Stream::record`].
#[derive(Debug)]
pub struct Event {
    device: Device,
    imp: EventImpl,
}

#[derive(Debug)]
enum EventImpl {
    Driver(Box<dyn BackendEvent>),
    Queue(Arc<Mark>),
}

/// The completion of a queue's event.
#[derive(Debug, Default)]
struct Mark {
    at: Mutex<Option<Instant>>,
    set: Condvar,
}

impl Mark {
    fn complete(&self) {
        *self.at.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        self.set.notify_all();
    }

    fn wait(&self) -> Instant {
        let mut at = self.at.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(t) = *at {
                return t;
            }
            at = self.set.wait(at).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl Event {
    /// Waits until the work before the event has completed.
    ///
    /// # Errors
    /// A kernel fault or a driver failure.
    pub fn synchronize(&self) -> Result<()> {
        match &self.imp {
            EventImpl::Driver(e) => e.synchronize(),
            EventImpl::Queue(mark) => {
                mark.wait();
                Ok(())
            }
        }
        .map_err(|e| self.device.with_fault_context(e))
    }

    /// Whether the work before the event has completed.
    ///
    /// # Errors
    /// A kernel fault or a driver failure.
    pub fn query(&self) -> Result<bool> {
        match &self.imp {
            EventImpl::Driver(e) => e.query(),
            EventImpl::Queue(mark) => Ok(mark
                .at
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some()),
        }
    }

    /// Time from `start` to this event, once both have completed (this waits).
    ///
    /// # Errors
    /// [`Error::OtherDevice`] for events of two devices, or a driver failure.
    pub fn elapsed_since(&self, start: &Event) -> Result<Duration> {
        if !self.device.same_device(&start.device) {
            return Err(Error::OtherDevice {
                what: "event",
                owner: start.device.describe().to_owned(),
                used_on: self.device.describe().to_owned(),
            });
        }
        match (&self.imp, &start.imp) {
            (EventImpl::Driver(end), EventImpl::Driver(start)) => end.elapsed_since(start.as_ref()),
            (EventImpl::Queue(end), EventImpl::Queue(start)) => {
                Ok(end.wait().saturating_duration_since(start.wait()))
            }
            _ => Err(Error::OtherDevice {
                what: "event",
                owner: start.device.describe().to_owned(),
                used_on: self.device.describe().to_owned(),
            }),
        }
    }
}

/// Launches and copies recorded from a stream ([`Stream::begin_capture`] …
/// [`Stream::end_capture`]), replayed by [`Stream::launch_graph`] at the cost of one
/// submission (a CUDA or HIP graph on a GPU, the recorded list on the CPU device).
/// To change parameters, record the launches again into it with [`Stream::end_capture_into`].
pub struct Graph {
    device: Device,
    imp: GraphImpl,
}

enum GraphImpl {
    Driver(Box<dyn BackendGraph>),
    Queue(Vec<Op>),
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Graph");
        d.field("device", &self.device.describe());
        if let GraphImpl::Queue(ops) = &self.imp {
            d.field("steps", &ops.len());
        }
        d.finish_non_exhaustive()
    }
}

/// `len` elements of `T` in host memory that a device copies from and to asynchronously:
/// page-locked memory of the GPU's driver, ordinary memory on the CPU device. Its contents
/// are reachable only once the asynchronous copies using it are done: the accessors wait.
pub struct PinnedBuffer<T: DeviceCopy> {
    device: Device,
    memory: HostBytes,
    len: usize,
    pending: Mutex<Vec<Event>>,
    _elems: std::marker::PhantomData<T>,
}

enum HostBytes {
    Driver(Box<dyn HostMemory>),
    Heap {
        ptr: *mut u8,
        layout: std::alloc::Layout,
    },
}

// SAFETY: the memory is owned by the buffer (a driver allocation or a heap block) and
// reached only through `&self`/`&mut self` after the pending copies are done.
unsafe impl<T: DeviceCopy> Send for PinnedBuffer<T> {}
// SAFETY: `&PinnedBuffer` gives only shared reads (and queues copies that read it).
unsafe impl<T: DeviceCopy> Sync for PinnedBuffer<T> {}

impl<T: DeviceCopy> std::fmt::Debug for PinnedBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("device", &self.device.describe())
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl<T: DeviceCopy> PinnedBuffer<T> {
    /// `len` zeroed elements of page-locked host memory for `device`.
    ///
    /// # Errors
    /// [`Error::SizeOverflow`], [`Error::OutOfMemory`] or a driver failure.
    pub fn zeroed(device: &Device, len: usize) -> Result<PinnedBuffer<T>> {
        #[allow(clippy::let_unit_value)]
        let () = T::__OFFLOAD_LAYOUT;
        let bytes = len.checked_mul(size_of::<T>()).ok_or(Error::SizeOverflow {
            len,
            elem_size: size_of::<T>(),
        })?;
        let memory = match device.backend().alloc_host(bytes.max(1))? {
            Some(memory) => HostBytes::Driver(memory),
            None => {
                let layout =
                    std::alloc::Layout::from_size_align(bytes.max(1), align_of::<T>().max(64))
                        .map_err(|_| Error::SizeOverflow {
                            len,
                            elem_size: size_of::<T>(),
                        })?;
                // SAFETY: the layout has a non-zero size.
                let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
                if ptr.is_null() {
                    return Err(Error::OutOfMemory {
                        requested: bytes,
                        free: None,
                        total: None,
                        device: "host memory".into(),
                    });
                }
                HostBytes::Heap { ptr, layout }
            }
        };
        Ok(PinnedBuffer {
            device: device.unbound(),
            memory,
            len,
            pending: Mutex::new(Vec::new()),
            _elems: std::marker::PhantomData,
        })
    }

    /// A page-locked copy of `data` for `device`.
    ///
    /// # Errors
    /// As [`PinnedBuffer::zeroed`].
    pub fn from_slice(device: &Device, data: &[T]) -> Result<PinnedBuffer<T>> {
        let mut b = PinnedBuffer::zeroed(device, data.len())?;
        b.as_mut_slice()?.copy_from_slice(data);
        Ok(b)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn ptr(&self) -> *mut u8 {
        match &self.memory {
            HostBytes::Driver(m) => m.as_ptr(),
            HostBytes::Heap { ptr, .. } => *ptr,
        }
    }

    fn bytes(&self) -> usize {
        self.len * size_of::<T>()
    }

    /// Notes that work queued on `stream` so far uses this buffer.
    fn note_pending(&self, stream: &Stream) -> Result<()> {
        let event = stream.record()?;
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.retain(|e| !e.query().unwrap_or(true));
        pending.push(event);
        Ok(())
    }

    /// Waits for the asynchronous copies using this buffer; their first error.
    fn settle(&self) -> Result<()> {
        let pending =
            std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
        let mut first = None;
        for event in pending {
            if let Err(e) = event.synchronize() {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// [`Error::InvalidValue`] if a copy from the device left bytes that are no `T` (only
    /// possible for types with invalid bit patterns: `bool`, enums); the bytes stay as they
    /// are, never seen as `T`, until the next copy into the buffer.
    fn check_values(&self) -> Result<()> {
        if T::__OFFLOAD_ANY_BITS {
            return Ok(());
        }
        // SAFETY: `bytes()` initialized bytes owned by `self`; no copy uses them now (settled),
        // and no `&mut` to them exists while `&self` does.
        let bytes = unsafe { std::slice::from_raw_parts(self.ptr(), self.bytes()) };
        super::buffer::check_values::<T>(bytes)
    }

    /// The elements, once the copies using the buffer are done.
    ///
    /// # Errors
    /// The first error of those copies (a kernel fault on the stream, say), or
    /// [`Error::InvalidValue`] when a copy from the device left bytes that are no `T`.
    pub fn as_slice(&self) -> Result<&[T]> {
        self.settle()?;
        self.check_values()?;
        // SAFETY: `len` elements of initialized memory (zeroed, then written as `T` values or
        // by copies from the device, checked to be `T` values above), owned by `self`; no copy
        // uses them now.
        Ok(unsafe { std::slice::from_raw_parts(self.ptr().cast::<T>(), self.len) })
    }

    /// The elements, writable, once the copies using the buffer are done.
    ///
    /// # Errors
    /// As [`PinnedBuffer::as_slice`].
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.settle()?;
        self.check_values()?;
        // SAFETY: as in `as_slice`, and `&mut self` is the only access.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr().cast::<T>(), self.len) })
    }
}

impl<T: DeviceCopy> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        // The memory must outlive the copies using it, whatever they report.
        let _ = self.settle();
        if let HostBytes::Heap { ptr, layout } = self.memory {
            // SAFETY: allocated in `zeroed` with this layout; freed once, here.
            unsafe { std::alloc::dealloc(ptr, layout) };
        }
    }
}

/// One device as [`Device::all`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceEntry {
    /// What [`Device::from_spec`] opens it by: `cuda:0`, `hip:1`, `cpu`.
    pub spec: String,
    /// Its kind.
    pub kind: crate::backend::DeviceKind,
    /// The marketing name (the CPU's architecture for the CPU device).
    pub name: String,
    /// The architecture images are chosen by: `sm_90`, `gfx90a:sramecc+:xnack-`, `host`.
    pub arch: String,
    /// Device memory in bytes (`None` for the CPU device, whose memory is the host's).
    pub memory: Option<usize>,
    /// Streaming multiprocessors, compute units, or the CPU device's worker threads.
    pub compute_units: u32,
}

impl Device {
    /// Every device of this machine: each CUDA GPU, each HIP GPU, then the CPU. A driver
    /// that is missing or finds no device adds nothing (`OFFLOAD_LOG=1` says why).
    pub fn all() -> Vec<DeviceEntry> {
        use crate::backend::gpu::DeviceInfo;
        let mut all = Vec::new();
        match crate::backend::cuda::probe() {
            Ok(devices) => all.extend(devices.into_iter().map(|d| DeviceEntry {
                spec: format!("cuda:{}", d.ordinal),
                kind: crate::backend::DeviceKind::Cuda,
                arch: d.arch(),
                memory: Some(d.total_memory),
                compute_units: d.multiprocessors,
                name: d.name,
            })),
            Err(e) => crate::backend::gpu::log(format_args!("cuda: {e}")),
        }
        match crate::backend::hip::probe() {
            Ok(devices) => all.extend(devices.into_iter().map(|d| DeviceEntry {
                spec: format!("hip:{}", d.ordinal),
                kind: crate::backend::DeviceKind::Hip,
                arch: d.arch(),
                memory: Some(d.total_memory),
                compute_units: d.compute_units,
                name: d.name,
            })),
            Err(e) => crate::backend::gpu::log(format_args!("hip: {e}")),
        }
        all.push(DeviceEntry {
            spec: "cpu".into(),
            kind: crate::backend::DeviceKind::Cpu,
            name: std::env::consts::ARCH.into(),
            arch: "host".into(),
            memory: None,
            compute_units: u32::try_from(crate::backend::cpu::CpuBackend::new().threads())
                .unwrap_or(u32::MAX),
        });
        all
    }
}

/// A queue as the device keeps track of it (to wait for its work before freeing memory).
pub(crate) type QueueRef = Weak<QueueShared>;
