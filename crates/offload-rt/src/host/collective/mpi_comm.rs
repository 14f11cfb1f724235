//! The MPI side of the collectives (feature `mpi`): ranks found through an MPI communicator,
//! an NCCL/RCCL communicator bootstrapped over it on GPUs, and MPI's own calls on the CPU
//! device's host memory.

use std::ffi::{c_char, c_int, c_void};
use std::mem::size_of;

use mpi::collective::SystemOperation;
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::{Communicator as _, SimpleCommunicator};

use super::common::{CollectiveElement, Collectives, P2p, ReduceOp, address};
use crate::backend::DevicePtr;
use crate::error::{Error, Result};
use crate::host::Device;

/// The most elements (or bytes) one MPI call takes: its counts are `int`s.
const MAX_COUNT: usize = i32::MAX as usize;
/// The tag of every send and receive, on the communicator's own duplicate.
const TAG: c_int = 0x0ff1;

/// A duplicate of the program's MPI communicator, the CPU device's collectives.
pub(super) struct MpiMember {
    pub(super) comm: SimpleCommunicator,
}

impl std::fmt::Debug for MpiMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiMember").finish_non_exhaustive()
    }
}

/// This process's rank among the ranks of `comm` on the same node (sharing memory), from 0:
/// which of the node's GPUs it should use.
pub fn local_rank(comm: &impl mpi::topology::Communicator) -> usize {
    comm.split_shared(comm.rank()).rank() as usize
}

fn op_handle(op: ReduceOp) -> ffi::MPI_Op {
    match op {
        ReduceOp::Sum => SystemOperation::sum(),
        ReduceOp::Prod => SystemOperation::product(),
        ReduceOp::Max => SystemOperation::max(),
        ReduceOp::Min => SystemOperation::min(),
    }
    .as_raw()
}

fn byte_type() -> ffi::MPI_Datatype {
    // SAFETY: a constant of the MPI library, set before `main`.
    unsafe { ffi::RSMPI_UINT8_T }
}

/// The `(offset, length)` pieces of `total` elements (or bytes) that one MPI call each takes.
fn chunks(total: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..total.div_ceil(MAX_COUNT)).map(move |i| {
        let start = i * MAX_COUNT;
        (start, (total - start).min(MAX_COUNT))
    })
}

/// Element `at` of every rank's block of `stride` elements in `all` (the ranks' data, gathered
/// in rank order), combined by `op` in rank order.
fn fold_ranks<T: CollectiveElement>(all: &[T], stride: usize, at: usize, op: ReduceOp) -> T {
    let ranks = all.len() / stride.max(1);
    (1..ranks).fold(all[at], |acc, r| T::combine(acc, all[r * stride + at], op))
}

/// `Ok` for `MPI_SUCCESS`, else [`Error::Collective`] with MPI's message.
fn check(call: &'static str, code: c_int) -> Result<()> {
    if code == 0 {
        return Ok(());
    }
    let mut text = vec![0u8; 1024];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING (at most 1024 in Open MPI and MPICH)
    // bytes; `len` is a live int.
    unsafe { ffi::MPI_Error_string(code, text.as_mut_ptr().cast::<c_char>(), &mut len) };
    text.truncate(usize::try_from(len).unwrap_or(0).min(1024));
    Err(Error::Collective {
        library: "MPI".to_owned(),
        call,
        code,
        message: String::from_utf8_lossy(&text).into_owned(),
    })
}

fn too_large(call: &'static str, bytes: usize) -> Error {
    Error::CollectiveArgs {
        call,
        reason: format!(
            "{bytes} bytes per rank: MPI's collectives on the CPU device take at most {MAX_COUNT}"
        ),
    }
}

impl MpiMember {
    /// The MPI library's own words for itself, first line.
    fn library_version(&self) -> String {
        mpi::environment::library_version()
            .ok()
            .and_then(|v| v.lines().next().map(|l| l.trim().to_owned()))
            .unwrap_or_else(|| "(version unknown)".to_owned())
    }

    fn raw(&self) -> ffi::MPI_Comm {
        self.comm.as_raw()
    }

    /// Every rank's gathered `count` elements at `from` (for types MPI has no type for).
    ///
    /// # Safety
    /// `from` is the host address of `count` live `T`s.
    unsafe fn gather_all<T: CollectiveElement>(
        &self,
        from: DevicePtr,
        count: usize,
    ) -> Result<Vec<T>> {
        let size = self.comm.size() as usize;
        let mut all: Vec<T> = Vec::with_capacity(count * size);
        // SAFETY: `all` has room for `size * count` elements, all written by the gather.
        unsafe {
            self.all_gather_host(
                from,
                DevicePtr(all.as_mut_ptr().expose_provenance() as u64),
                count * size_of::<T>(),
            )?;
            all.set_len(count * size);
        }
        Ok(all)
    }

    /// # Safety
    /// `send` and `recv` are the host addresses of `count` live `T`s each (maybe the same),
    /// touched by nothing else during the call.
    unsafe fn all_reduce_host<T: CollectiveElement>(
        &self,
        send: DevicePtr,
        recv: DevicePtr,
        count: usize,
        op: ReduceOp,
    ) -> Result<()> {
        let Some(datatype) = T::mpi_type() else {
            // SAFETY: the caller's contract.
            let all = unsafe { self.gather_all::<T>(send, count)? };
            let out = address::<T>(recv);
            for i in 0..count {
                // SAFETY: `recv` holds `count` elements.
                unsafe { out.add(i).write(fold_ranks(&all, count, i, op)) };
            }
            return Ok(());
        };
        // MPI has no portable in-place marker in these bindings: reduce from a copy.
        let copy: Vec<T>;
        let from: *const T = if send == recv {
            // SAFETY: the caller's contract.
            copy = unsafe { std::slice::from_raw_parts(address::<T>(send), count) }.to_vec();
            copy.as_ptr()
        } else {
            address::<T>(send)
        };
        let to = address::<T>(recv);
        for (done, n) in chunks(count) {
            // SAFETY: both ranges lie inside the caller's buffers; `n` fits an `int`.
            check("MPI_Allreduce", unsafe {
                ffi::MPI_Allreduce(
                    from.add(done).cast::<c_void>(),
                    to.add(done).cast::<c_void>(),
                    n as c_int,
                    datatype,
                    op_handle(op),
                    self.raw(),
                )
            })?;
        }
        Ok(())
    }

    /// # Safety
    /// `at` is the host address of `bytes` live bytes, touched by nothing else meanwhile.
    unsafe fn broadcast_host(&self, at: DevicePtr, bytes: usize, root: usize) -> Result<()> {
        let base = address::<u8>(at);
        for (done, n) in chunks(bytes) {
            // SAFETY: the range lies inside the caller's buffer; `n` fits an `int`.
            check("MPI_Bcast", unsafe {
                ffi::MPI_Bcast(
                    base.add(done).cast(),
                    n as c_int,
                    byte_type(),
                    root as c_int,
                    self.raw(),
                )
            })?;
        }
        Ok(())
    }

    /// # Safety
    /// `from` is the host address of `bytes` live bytes, `to` of `size * bytes`, touched by
    /// nothing else meanwhile.
    unsafe fn all_gather_host(&self, from: DevicePtr, to: DevicePtr, bytes: usize) -> Result<()> {
        let n = c_int::try_from(bytes).map_err(|_| too_large("all_gather", bytes))?;
        // SAFETY: the caller's contract.
        check("MPI_Allgather", unsafe {
            ffi::MPI_Allgather(
                address::<c_void>(from),
                n,
                byte_type(),
                address::<c_void>(to),
                n,
                byte_type(),
                self.raw(),
            )
        })
    }

    /// # Safety
    /// `from` is the host address of `size * count` live `T`s, `to` of `count`, touched by
    /// nothing else meanwhile.
    unsafe fn reduce_scatter_host<T: CollectiveElement>(
        &self,
        from: DevicePtr,
        to: DevicePtr,
        count: usize,
        op: ReduceOp,
    ) -> Result<()> {
        let size = self.comm.size() as usize;
        let Some(datatype) = T::mpi_type() else {
            // SAFETY: the caller's contract.
            let all = unsafe { self.gather_all::<T>(from, count * size)? };
            let own = self.comm.rank() as usize * count;
            let out = address::<T>(to);
            for i in 0..count {
                // SAFETY: `to` holds `count` elements.
                unsafe {
                    out.add(i)
                        .write(fold_ranks(&all, count * size, own + i, op))
                };
            }
            return Ok(());
        };
        let n = c_int::try_from(count)
            .map_err(|_| too_large("reduce_scatter", count * size_of::<T>()))?;
        // SAFETY: the caller's contract.
        check("MPI_Reduce_scatter_block", unsafe {
            ffi::MPI_Reduce_scatter_block(
                address::<c_void>(from),
                address::<c_void>(to),
                n,
                datatype,
                op_handle(op),
                self.raw(),
            )
        })
    }

    /// Posts every send and receive of `ops` without waiting, then waits for all.
    ///
    /// # Safety
    /// Each op's address is the host address of its `bytes` live bytes, touched by nothing
    /// else meanwhile.
    unsafe fn exchange_host(&self, ops: &[P2p]) -> Result<()> {
        // SAFETY: an `MPI_Request` is a plain handle; every slot is written before the wait.
        let mut requests: Vec<ffi::MPI_Request> = Vec::new();
        let mut posted = Ok(());
        'ops: for op in ops {
            let base = address::<u8>(op.ptr);
            // One request per chunk of an `int`'s count; a zero-length message still goes.
            let pieces = chunks(op.bytes).chain((op.bytes == 0).then_some((0, 0)));
            for (done, n) in pieces {
                // SAFETY: `MPI_Request` is a plain C handle (a pointer or an int).
                let mut request: ffi::MPI_Request = unsafe { std::mem::zeroed() };
                // SAFETY: the range lies inside the op's buffer; the request is written.
                let code = unsafe {
                    if op.send {
                        ffi::MPI_Isend(
                            base.add(done).cast(),
                            n as c_int,
                            byte_type(),
                            op.peer as c_int,
                            TAG,
                            self.raw(),
                            &mut request,
                        )
                    } else {
                        ffi::MPI_Irecv(
                            base.add(done).cast(),
                            n as c_int,
                            byte_type(),
                            op.peer as c_int,
                            TAG,
                            self.raw(),
                            &mut request,
                        )
                    }
                };
                if let Err(e) = check(if op.send { "MPI_Isend" } else { "MPI_Irecv" }, code) {
                    posted = Err(e);
                    break 'ops;
                }
                requests.push(request);
            }
        }
        // What was posted is waited for even after a failure: MPI still uses the buffers.
        let count = c_int::try_from(requests.len()).unwrap_or(c_int::MAX);
        // SAFETY: `requests` holds `count` requests of this process's.
        let waited = check("MPI_Waitall", unsafe {
            ffi::MPI_Waitall(count, requests.as_mut_ptr(), ffi::RSMPI_STATUSES_IGNORE)
        });
        posted.and(waited)
    }
}

/// MPI's calls on the CPU device's host memory, once the device's queues drain (the
/// addresses of its buffers are host addresses, which nothing else touches then).
impl Collectives for MpiMember {
    fn library(&self, _: &Device) -> String {
        format!("MPI: {}", self.library_version())
    }

    unsafe fn all_reduce<T: CollectiveElement>(
        &self,
        device: &Device,
        (send, recv, count): (DevicePtr, DevicePtr, usize),
        op: ReduceOp,
    ) -> Result<()> {
        device.quiesce_queues();
        // SAFETY: the trait's contract, the queues drained.
        unsafe { self.all_reduce_host::<T>(send, recv, count, op) }
    }

    unsafe fn broadcast<T: CollectiveElement>(
        &self,
        device: &Device,
        at: DevicePtr,
        count: usize,
        root: usize,
    ) -> Result<()> {
        device.quiesce_queues();
        // SAFETY: the trait's contract, the queues drained.
        unsafe { self.broadcast_host(at, count * size_of::<T>(), root) }
    }

    unsafe fn all_gather<T: CollectiveElement>(
        &self,
        device: &Device,
        (from, to, count): (DevicePtr, DevicePtr, usize),
    ) -> Result<()> {
        device.quiesce_queues();
        // SAFETY: the trait's contract, the queues drained.
        unsafe { self.all_gather_host(from, to, count * size_of::<T>()) }
    }

    unsafe fn reduce_scatter<T: CollectiveElement>(
        &self,
        device: &Device,
        (from, to, count): (DevicePtr, DevicePtr, usize),
        op: ReduceOp,
    ) -> Result<()> {
        device.quiesce_queues();
        // SAFETY: the trait's contract, the queues drained.
        unsafe { self.reduce_scatter_host::<T>(from, to, count, op) }
    }

    unsafe fn exchange(&self, device: &Device, ops: &[P2p]) -> Result<()> {
        device.quiesce_queues();
        // SAFETY: the trait's contract, the queues drained.
        unsafe { self.exchange_host(ops) }
    }
}
