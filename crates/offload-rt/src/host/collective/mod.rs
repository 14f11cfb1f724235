//! Collectives over the ranks of a program: all-reduce, broadcast, all-gather, reduce-scatter
//! and send/receive on [`DeviceBuffer`]s, one API on every device.
//!
//! - On a CUDA GPU the calls are NCCL's, on a HIP GPU RCCL's (the same C API), each library
//!   loaded at run time as the drivers are. Calls are queued on the stream of the device the
//!   communicator was made with (or was given, [`Communicator::set_stream`]), in order with
//!   the kernels and copies queued there, and return at once.
//! - On the CPU device (feature `mpi`) the calls are MPI's own, on the device's host memory,
//!   after the work queued on the device's streams; they return when done.
//!
//! Ranks are started and found by MPI (feature `mpi`: `Communicator::from_mpi`, `cargo
//! offload run --np N`), or by any other means that hands every rank the same [`CommId`]
//! ([`Communicator::with_id`], GPUs only).

mod common;
mod nccl;

#[cfg(feature = "mpi")]
mod mpi_comm;
#[cfg(feature = "mpi")]
pub use mpi_comm::local_rank;

use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::size_of;

use super::Device;
use super::buffer::DeviceBuffer;
use crate::backend::{DeviceKind, DevicePtr};
use crate::error::{Error, Result};
use common::{Collectives, P2p, address};
use nccl::{NcclApi, NcclComm, NcclTransfer, NcclUniqueId};

pub use common::{CollectiveElement, ReduceOp};

/// The identity every rank of one communicator is made with, on GPUs: made once (by one
/// rank, [`CommId::new`]) and handed to every rank by the program's own means.
#[derive(Clone, Copy)]
pub struct CommId(NcclUniqueId);

impl std::fmt::Debug for CommId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CommId(..)")
    }
}

impl CommId {
    /// The size of an identity in bytes.
    pub const BYTES: usize = nccl::NCCL_UNIQUE_ID_BYTES;

    /// A new identity from the collectives library of `device`'s kind (NCCL or RCCL).
    ///
    /// # Errors
    /// [`Error::CollectivesUnavailable`] on the CPU device or where the library is missing;
    /// [`Error::Collective`] when it fails.
    pub fn new(device: &Device) -> Result<CommId> {
        let api = gpu_api(device)?;
        let mut id = NcclUniqueId {
            internal: [0; Self::BYTES],
        };
        // SAFETY: the out-pointer is a live `ncclUniqueId`.
        let code = unsafe { (api.ncclGetUniqueId)(&mut id) };
        api.check("ncclGetUniqueId", code, None)?;
        Ok(CommId(id))
    }

    /// The identity's bytes, to send to the other ranks.
    pub fn as_bytes(&self) -> &[u8; Self::BYTES] {
        &self.0.internal
    }

    /// The identity of `bytes` another rank sent.
    pub fn from_bytes(bytes: [u8; Self::BYTES]) -> CommId {
        CommId(NcclUniqueId { internal: bytes })
    }
}

/// One rank's member of a group of ranks that reduce, broadcast, gather and exchange
/// [`DeviceBuffer`]s together (see the [module](self) documentation). Every rank calls the
/// same collectives in the same order.
#[derive(Debug)]
pub struct Communicator {
    device: Device,
    rank: usize,
    size: usize,
    imp: Imp,
}

#[derive(Debug)]
enum Imp {
    Nccl(NcclMember),
    #[cfg(feature = "mpi")]
    Mpi(mpi_comm::MpiMember),
}

/// The one dispatch over a communicator's implementations: `$call` with `$m` bound to the
/// [`Collectives`] of `$imp`.
macro_rules! dispatch {
    ($imp:expr, |$m:ident| $call:expr) => {
        match $imp {
            Imp::Nccl($m) => $call,
            #[cfg(feature = "mpi")]
            Imp::Mpi($m) => $call,
        }
    };
}

/// An NCCL or RCCL communicator, destroyed on drop.
struct NcclMember {
    api: &'static NcclApi,
    comm: NcclComm,
}

impl std::fmt::Debug for NcclMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NcclMember")
            .field("library", &self.api.library)
            .finish_non_exhaustive()
    }
}

// SAFETY: an NCCL communicator may be used from any thread, one call at a time, which
// `&mut`/`&` of `Communicator` (not `Sync`) ensures.
unsafe impl Send for NcclMember {}

impl Drop for NcclMember {
    fn drop(&mut self) {
        // SAFETY: `comm` came from `ncclCommInitRank` and is destroyed once, here. The
        // library waits for the communicator's queued work. An error has no one to go to.
        let _ = unsafe { (self.api.ncclCommDestroy)(self.comm) };
    }
}

impl NcclMember {
    /// Queues `entry` (`ncclAllReduce`, `ncclBroadcast`, `ncclReduceScatter`: the same C
    /// signature) from `from` to `to`, `count` elements of `nccl_type`, with `arg` (the
    /// operation, or the root), on `device`'s stream.
    ///
    /// # Safety
    /// `from` and `to` are live buffers of `device`, as long as `entry` reads and writes with
    /// these arguments; the queued call uses them in stream order, as a launch would.
    unsafe fn transfer(
        &self,
        device: &Device,
        call: &'static str,
        entry: NcclTransfer,
        (from, to, count): (DevicePtr, DevicePtr, usize),
        nccl_type: i32,
        arg: i32,
    ) -> Result<()> {
        self.call(device, call, |stream| {
            // SAFETY: the caller's contract; `entry` is the library's, called with its own
            // communicator.
            unsafe {
                entry(
                    address(from),
                    address(to),
                    count,
                    nccl_type,
                    arg,
                    self.comm,
                    stream,
                )
            }
        })
    }

    /// Runs one library call with `device`'s context current and its stream.
    fn call(
        &self,
        device: &Device,
        call: &'static str,
        queue: impl FnOnce(*mut c_void) -> i32,
    ) -> Result<()> {
        device.backend().bind_to_thread()?;
        let code = queue(device.raw_stream());
        self.api.check(call, code, Some(self.comm))
    }
}

impl Collectives for NcclMember {
    fn library(&self, device: &Device) -> String {
        format!(
            "{} {} ({})",
            nccl::library_kind(device.kind()),
            self.api.version(),
            self.api.library
        )
    }

    unsafe fn all_reduce<T: CollectiveElement>(
        &self,
        device: &Device,
        transfer: (DevicePtr, DevicePtr, usize),
        op: ReduceOp,
    ) -> Result<()> {
        // SAFETY: the trait's contract.
        unsafe {
            self.transfer(
                device,
                "ncclAllReduce",
                self.api.ncclAllReduce,
                transfer,
                T::NCCL_TYPE,
                op.nccl(),
            )
        }
    }

    unsafe fn broadcast<T: CollectiveElement>(
        &self,
        device: &Device,
        at: DevicePtr,
        count: usize,
        root: usize,
    ) -> Result<()> {
        // SAFETY: the trait's contract; `root` is a rank.
        unsafe {
            self.transfer(
                device,
                "ncclBroadcast",
                self.api.ncclBroadcast,
                (at, at, count),
                T::NCCL_TYPE,
                root as i32,
            )
        }
    }

    unsafe fn all_gather<T: CollectiveElement>(
        &self,
        device: &Device,
        (from, to, count): (DevicePtr, DevicePtr, usize),
    ) -> Result<()> {
        self.call(device, "ncclAllGather", |stream| {
            // SAFETY: the trait's contract: `from` holds `count` and `to` `size * count`
            // elements, used in stream order.
            unsafe {
                (self.api.ncclAllGather)(
                    address(from),
                    address(to),
                    count,
                    T::NCCL_TYPE,
                    self.comm,
                    stream,
                )
            }
        })
    }

    unsafe fn reduce_scatter<T: CollectiveElement>(
        &self,
        device: &Device,
        transfer: (DevicePtr, DevicePtr, usize),
        op: ReduceOp,
    ) -> Result<()> {
        // SAFETY: the trait's contract.
        unsafe {
            self.transfer(
                device,
                "ncclReduceScatter",
                self.api.ncclReduceScatter,
                transfer,
                T::NCCL_TYPE,
                op.nccl(),
            )
        }
    }

    unsafe fn exchange(&self, device: &Device, ops: &[P2p]) -> Result<()> {
        let (api, comm) = (self.api, self.comm);
        self.call(device, "ncclGroupStart", |stream| {
            // SAFETY: the trait's contract: every op is `count` elements of a live buffer,
            // queued in stream order.
            unsafe {
                let code = (api.ncclGroupStart)();
                if code != 0 {
                    return code;
                }
                for op in ops {
                    let code = if op.send {
                        (api.ncclSend)(
                            address(op.ptr),
                            op.count,
                            op.nccl_type,
                            op.peer as i32,
                            comm,
                            stream,
                        )
                    } else {
                        (api.ncclRecv)(
                            address(op.ptr),
                            op.count,
                            op.nccl_type,
                            op.peer as i32,
                            comm,
                            stream,
                        )
                    };
                    if code != 0 {
                        // The group is left as the library left it: ended, so the next call
                        // starts clean.
                        let _ = (api.ncclGroupEnd)();
                        return code;
                    }
                }
                (api.ncclGroupEnd)()
            }
        })
    }
}

/// The collectives library of a GPU device; the CPU device has none.
fn gpu_api(device: &Device) -> Result<&'static NcclApi> {
    match device.kind() {
        DeviceKind::Cpu => Err(Error::CollectivesUnavailable {
            device: device.describe().to_owned(),
            reason: if cfg!(feature = "mpi") {
                "the CPU device's collectives are MPI's: make the communicator with `Communicator::from_mpi`".to_owned()
            } else {
                "the CPU device's collectives are MPI's: build offload-rt with its `mpi` feature and make the communicator with `Communicator::from_mpi`".to_owned()
            },
        }),
        kind => nccl::api(kind, device.describe()),
    }
}

/// Sends and receives posted together ([`Communicator::group`]): none waits for another, so
/// ranks that exchange with each other in any order do not deadlock. The buffers are borrowed
/// until the group is posted.
pub struct P2pGroup<'b> {
    device: Device,
    comm_size: usize,
    ops: Vec<P2p>,
    _buffers: PhantomData<&'b mut ()>,
}

impl std::fmt::Debug for P2pGroup<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("P2pGroup")
            .field("ops", &self.ops.len())
            .finish()
    }
}

impl<'b> P2pGroup<'b> {
    /// Sends `buf` to rank `peer`, which receives it with a `recv` of as many elements.
    ///
    /// # Errors
    /// [`Error::CollectiveArgs`] when `peer` is no rank.
    pub fn send<T: CollectiveElement>(
        &mut self,
        buf: &'b DeviceBuffer<T>,
        peer: usize,
    ) -> Result<()> {
        self.push(true, buf, peer, "send")
    }

    /// Receives into `buf` what rank `peer` sends with a `send` of as many elements.
    ///
    /// # Errors
    /// [`Error::CollectiveArgs`] when `peer` is no rank.
    pub fn recv<T: CollectiveElement>(
        &mut self,
        buf: &'b mut DeviceBuffer<T>,
        peer: usize,
    ) -> Result<()> {
        self.push(false, buf, peer, "recv")
    }

    fn push<T: CollectiveElement>(
        &mut self,
        send: bool,
        buf: &DeviceBuffer<T>,
        peer: usize,
        call: &'static str,
    ) -> Result<()> {
        check_buffer(call, &self.device, buf.device())?;
        if peer >= self.comm_size {
            return Err(Error::CollectiveArgs {
                call,
                reason: format!(
                    "peer {peer} is no rank of a communicator of {}",
                    self.comm_size
                ),
            });
        }
        self.ops.push(P2p {
            send,
            ptr: buf.device_ptr(),
            count: buf.len(),
            bytes: buf.len() * size_of::<T>(),
            nccl_type: T::NCCL_TYPE,
            peer,
        });
        Ok(())
    }
}

impl Communicator {
    /// Rank `rank` of the `size` ranks made with `id` on `device` (a GPU): every rank calls
    /// this with the same `id` and `size`; it returns when all have.
    ///
    /// # Errors
    /// [`Error::CollectivesUnavailable`] on the CPU device or where NCCL/RCCL is missing,
    /// [`Error::CollectiveArgs`] for a rank outside `0..size`, [`Error::Collective`] when the
    /// library fails.
    pub fn with_id(device: &Device, id: &CommId, rank: usize, size: usize) -> Result<Communicator> {
        let api = gpu_api(device)?;
        let (Ok(nranks), Ok(rank_c)) = (i32::try_from(size), i32::try_from(rank)) else {
            return Err(rank_error(rank, size));
        };
        if rank >= size {
            return Err(rank_error(rank, size));
        }
        device.backend().bind_to_thread()?;
        let mut comm: NcclComm = std::ptr::null_mut();
        // SAFETY: the out-pointer is live; `id` is an `ncclUniqueId` of this library's (or
        // bytes another rank's copy of it sent); the device's context is current.
        let code = unsafe { (api.ncclCommInitRank)(&mut comm, nranks, id.0, rank_c) };
        api.check("ncclCommInitRank", code, None)?;
        Ok(Communicator {
            device: device.clone(),
            rank,
            size,
            imp: Imp::Nccl(NcclMember { api, comm }),
        })
    }

    /// This rank, from 0.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// How many ranks there are.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The device the buffers are on, whose stream the calls are queued on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Which library carries the calls, with its version (`NCCL 2.21.5
    /// (libnccl.so.2)`, `MPI: Open MPI v4.1.4, ...`).
    pub fn library(&self) -> String {
        dispatch!(&self.imp, |m| m.library(&self.device))
    }

    /// Queues the calls from now on on `stream` (of the communicator's device).
    ///
    /// # Errors
    /// [`Error::CollectiveArgs`] when the stream is of another device.
    pub fn set_stream(&mut self, stream: &crate::host::stream::Stream) -> Result<()> {
        if !stream.device().same_device(&self.device) {
            return Err(Error::CollectiveArgs {
                call: "set_stream",
                reason: format!(
                    "the stream is of {}, the communicator of {}",
                    stream.device().describe(),
                    self.device.describe()
                ),
            });
        }
        self.device = stream.device().clone();
        Ok(())
    }

    /// Every rank's `send` combined element by element by `op`, into every rank's `recv`
    /// (as long as `send`).
    ///
    /// # Errors
    /// [`Error::CollectiveArgs`] for buffers of another device or of other lengths,
    /// [`Error::Collective`] when the library fails.
    pub fn all_reduce<T: CollectiveElement>(
        &self,
        send: &DeviceBuffer<T>,
        recv: &mut DeviceBuffer<T>,
        op: ReduceOp,
    ) -> Result<()> {
        const CALL: &str = "all_reduce";
        self.check_buffer(CALL, send.device())?;
        self.check_buffer(CALL, recv.device())?;
        same_len(CALL, "recv", recv.len(), "send", send.len())?;
        self.all_reduce_raw::<T>(send.device_ptr(), recv.device_ptr(), send.len(), op)
    }

    /// [`all_reduce`](Self::all_reduce) with the result in `buf` itself.
    ///
    /// # Errors
    /// As [`all_reduce`](Self::all_reduce).
    pub fn all_reduce_in_place<T: CollectiveElement>(
        &self,
        buf: &mut DeviceBuffer<T>,
        op: ReduceOp,
    ) -> Result<()> {
        self.check_buffer("all_reduce_in_place", buf.device())?;
        self.all_reduce_raw::<T>(buf.device_ptr(), buf.device_ptr(), buf.len(), op)
    }

    fn all_reduce_raw<T: CollectiveElement>(
        &self,
        send: DevicePtr,
        recv: DevicePtr,
        count: usize,
        op: ReduceOp,
    ) -> Result<()> {
        // SAFETY: `send` and `recv` are `count` elements of live buffers of the communicator's
        // device (checked by the callers).
        dispatch!(&self.imp, |m| unsafe {
            m.all_reduce::<T>(&self.device, (send, recv, count), op)
        })
    }

    /// Rank `root`'s `buf` into every rank's `buf` (each as long as the root's).
    ///
    /// # Errors
    /// [`Error::CollectiveArgs`] for a buffer of another device or a root that is no rank,
    /// [`Error::Collective`] when the library fails.
    pub fn broadcast<T: CollectiveElement>(
        &self,
        buf: &mut DeviceBuffer<T>,
        root: usize,
    ) -> Result<()> {
        const CALL: &str = "broadcast";
        self.check_buffer(CALL, buf.device())?;
        if root >= self.size {
            return Err(Error::CollectiveArgs {
                call: CALL,
                reason: format!("root {root} is no rank of a communicator of {}", self.size),
            });
        }
        let (at, count) = (buf.device_ptr(), buf.len());
        // SAFETY: `at` is `count` elements of a live buffer of the communicator's device;
        // `root` is a rank (both checked).
        dispatch!(&self.imp, |m| unsafe {
            m.broadcast::<T>(&self.device, at, count, root)
        })
    }

    /// Every rank's `send` into every rank's `recv`, in rank order: `recv` holds
    /// `size() * send.len()` elements, rank `r`'s at `r * send.len()`.
    ///
    /// # Errors
    /// [`Error::CollectiveArgs`] for buffers of another device or of other lengths,
    /// [`Error::Collective`] when the library fails.
    pub fn all_gather<T: CollectiveElement>(
        &self,
        send: &DeviceBuffer<T>,
        recv: &mut DeviceBuffer<T>,
    ) -> Result<()> {
        const CALL: &str = "all_gather";
        self.check_buffer(CALL, send.device())?;
        self.check_buffer(CALL, recv.device())?;
        let total = self.times_size(CALL, send.len())?;
        same_len(CALL, "recv", recv.len(), "size() × send", total)?;
        let (from, to, count) = (send.device_ptr(), recv.device_ptr(), send.len());
        // SAFETY: `from` holds `count` and `to` `size * count` elements of live buffers of the
        // communicator's device (checked).
        dispatch!(&self.imp, |m| unsafe {
            m.all_gather::<T>(&self.device, (from, to, count))
        })
    }

    /// Every rank's `send` combined element by element by `op`, and the result scattered:
    /// rank `r`'s `recv` gets elements `r * recv.len()..(r + 1) * recv.len()`; `send` holds
    /// `size() * recv.len()` elements.
    ///
    /// # Errors
    /// [`Error::CollectiveArgs`] for buffers of another device or of other lengths,
    /// [`Error::Collective`] when the library fails.
    pub fn reduce_scatter<T: CollectiveElement>(
        &self,
        send: &DeviceBuffer<T>,
        recv: &mut DeviceBuffer<T>,
        op: ReduceOp,
    ) -> Result<()> {
        const CALL: &str = "reduce_scatter";
        self.check_buffer(CALL, send.device())?;
        self.check_buffer(CALL, recv.device())?;
        let total = self.times_size(CALL, recv.len())?;
        same_len(CALL, "send", send.len(), "size() × recv", total)?;
        let (from, to, count) = (send.device_ptr(), recv.device_ptr(), recv.len());
        // SAFETY: `from` holds `size * count` and `to` `count` elements of live buffers of the
        // communicator's device (checked).
        dispatch!(&self.imp, |m| unsafe {
            m.reduce_scatter::<T>(&self.device, (from, to, count), op)
        })
    }

    /// Sends `buf` to rank `peer`, which receives it with [`recv`](Self::recv) of as many
    /// elements. Ranks that send to each other at once use [`group`](Self::group).
    ///
    /// # Errors
    /// As [`group`](Self::group).
    pub fn send<T: CollectiveElement>(&self, buf: &DeviceBuffer<T>, peer: usize) -> Result<()> {
        self.group(|g| g.send(buf, peer))
    }

    /// Receives into `buf` what rank `peer` sends with [`send`](Self::send).
    ///
    /// # Errors
    /// As [`group`](Self::group).
    pub fn recv<T: CollectiveElement>(&self, buf: &mut DeviceBuffer<T>, peer: usize) -> Result<()> {
        self.group(|g| g.recv(buf, peer))
    }

    /// The sends and receives `post` adds, posted together (NCCL's `ncclGroupStart` …
    /// `ncclGroupEnd`; MPI's non-blocking sends and receives, then a wait for all).
    ///
    /// # Errors
    /// What `post` returns; [`Error::CollectiveArgs`] for a buffer of another device or a
    /// peer that is no rank; [`Error::Collective`] when the library fails.
    pub fn group<'b>(&self, post: impl FnOnce(&mut P2pGroup<'b>) -> Result<()>) -> Result<()> {
        let mut group = P2pGroup {
            device: self.device.clone(),
            comm_size: self.size,
            ops: Vec::new(),
            _buffers: PhantomData,
        };
        post(&mut group)?;
        self.post_group(&group.ops)
    }

    fn post_group(&self, ops: &[P2p]) -> Result<()> {
        // SAFETY: every op is `count` elements of a live buffer of the group's device, borrowed
        // for the group's lifetime, which outlives this call.
        dispatch!(&self.imp, |m| unsafe { m.exchange(&self.device, ops) })
    }

    fn check_buffer(&self, call: &'static str, device: &Device) -> Result<()> {
        check_buffer(call, &self.device, device)
    }

    fn times_size(&self, call: &'static str, len: usize) -> Result<usize> {
        len.checked_mul(self.size).ok_or(Error::CollectiveArgs {
            call,
            reason: format!("{len} elements times {} ranks overflows", self.size),
        })
    }
}

#[cfg(feature = "mpi")]
impl Communicator {
    /// This process's member of the ranks of MPI communicator `comm` (`universe.world()`
    /// for every rank of the program), on `device`: NCCL or RCCL on a GPU, bootstrapped over
    /// `comm`; MPI itself on the CPU device. Every rank of `comm` calls this; it returns when
    /// all have.
    ///
    /// On a node with several GPUs each rank opens its own, e.g. by
    /// [`local_rank`](crate::collective::local_rank).
    ///
    /// # Errors
    /// [`Error::CollectivesUnavailable`] where this rank (or another) could not load NCCL or
    /// RCCL, [`Error::Collective`] when the library fails.
    pub fn from_mpi(
        device: &Device,
        comm: &impl mpi::topology::Communicator,
    ) -> Result<Communicator> {
        use mpi::collective::{CommunicatorCollectives as _, Root as _, SystemOperation};
        use mpi::topology::Communicator as _;
        let comm = comm.duplicate();
        let (rank, size) = (comm.rank() as usize, comm.size() as usize);
        if device.kind() == DeviceKind::Cpu {
            return Ok(Communicator {
                device: device.clone(),
                rank,
                size,
                imp: Imp::Mpi(mpi_comm::MpiMember { comm }),
            });
        }
        // Every rank goes on only if every rank has the library; else each returns an error
        // rather than waiting for the others forever.
        let api = gpu_api(device);
        let mut all_loaded = 0i32;
        comm.all_reduce_into(
            &i32::from(api.is_ok()),
            &mut all_loaded,
            SystemOperation::min(),
        );
        api?;
        if all_loaded == 0 {
            return Err(Error::CollectivesUnavailable {
                device: device.describe().to_owned(),
                reason:
                    "another rank could not load its collectives library (its own error says why)"
                        .to_owned(),
            });
        }
        // Rank 0 makes the identity and sends it with a byte saying whether it could.
        let mut message = [0u8; 1 + CommId::BYTES];
        let mut own_error = None;
        if rank == 0 {
            match CommId::new(device) {
                Ok(id) => {
                    message[0] = 1;
                    message[1..].copy_from_slice(id.as_bytes());
                }
                Err(e) => own_error = Some(e),
            }
        }
        comm.process_at_rank(0).broadcast_into(&mut message[..]);
        if let Some(e) = own_error {
            return Err(e);
        }
        if message[0] == 0 {
            return Err(Error::CollectivesUnavailable {
                device: device.describe().to_owned(),
                reason:
                    "rank 0 could not make the communicator's identity (its own error says why)"
                        .to_owned(),
            });
        }
        let mut bytes = [0u8; CommId::BYTES];
        bytes.copy_from_slice(&message[1..]);
        Communicator::with_id(device, &CommId::from_bytes(bytes), rank, size)
    }
}

/// [`Error::CollectiveArgs`] unless a buffer of `buffer` is on the communicator's `device`.
fn check_buffer(call: &'static str, device: &Device, buffer: &Device) -> Result<()> {
    if buffer.same_device(device) {
        Ok(())
    } else {
        Err(Error::CollectiveArgs {
            call,
            reason: format!(
                "a buffer of {}, the communicator is of {}",
                buffer.describe(),
                device.describe()
            ),
        })
    }
}

/// The device a rank with node-local rank `local_rank` (0 for the first rank on each node,
/// see `local_rank`) should use: the one `OFFLOAD_DEVICE` names when set; else, where the best
/// device is a GPU, the GPU of that kind numbered `local_rank` modulo their count, so that
/// the ranks of a node spread over its GPUs (NCCL refuses two ranks on one GPU); else the CPU
/// device.
///
/// # Errors
/// The device named by `OFFLOAD_DEVICE` cannot be opened, or the GPU cannot.
pub fn device_for_local_rank(local_rank: usize) -> Result<Device> {
    let best = Device::best()?;
    if std::env::var_os("OFFLOAD_DEVICE").is_some() || best.kind() == DeviceKind::Cpu {
        return Ok(best);
    }
    let kind = best.kind();
    let count = Device::all().iter().filter(|d| d.kind == kind).count();
    match local_rank % count.max(1) {
        0 => Ok(best),
        ordinal => Device::from_spec(&format!("{}:{ordinal}", kind.name())),
    }
}

fn rank_error(rank: usize, size: usize) -> Error {
    Error::CollectiveArgs {
        call: "with_id",
        reason: format!("rank {rank} of {size} ranks (ranks are 0..size, size at most i32::MAX)"),
    }
}

fn same_len(
    call: &'static str,
    what: &str,
    len: usize,
    want_what: &str,
    want: usize,
) -> Result<()> {
    if len == want {
        Ok(())
    } else {
        Err(Error::CollectiveArgs {
            call,
            reason: format!("{what} has {len} elements, {want_what} is {want}"),
        })
    }
}
