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
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::Device;
use super::buffer::DeviceBuffer;
use super::profile::{self, Direction};
use super::queue::{Op, Queue, SendPtr, StreamImpl};
use crate::backend::{BackendEvent, BackendGraph, HostMemory};
use crate::error::{Error, Result};
use crate::kernel::DeviceCopy;

/// An ordered queue of launches and copies on one device. Work queued on it returns at
/// once and runs in order; work on different streams may overlap. Launch on a stream by
/// passing [`Stream::device`] to a kernel's `launch`.
///
/// Dropping a stream lets its queued work finish.
#[derive(Debug)]
pub struct Stream {
    bound: Device,
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
