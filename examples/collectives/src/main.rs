//! Every collective of `offload_rt::collective` between the ranks of an MPI program, checked
//! exactly on each rank: all-reduce (sum, product, max, min; into another buffer and in
//! place), broadcast, all-gather, reduce-scatter and a ring of sends and receives, for
//! integers of 8, 32 and 64 bits, `f32`, `f64`, `f16` and `bf16`. Each rank fills its buffers
//! with a kernel and the collectives follow on the same stream: NCCL's on a CUDA GPU, RCCL's
//! on a HIP GPU, MPI's on the CPU device.
//!
//! `cargo offload run -p collectives --np 4`; `OFFLOAD_DEVICE=cpu` runs every rank on the CPU
//! device. `-- --bench [MiB]` times an all-reduce of `f32`s (64 MiB by default) through the
//! communicator against `MPI_Allreduce` called directly on host memory.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use collectives_kernels::{Small, fill, pattern, ramp};
use offload_rt::collective::{
    CollectiveElement, Communicator, ReduceOp, device_for_local_rank, local_rank,
};
use offload_rt::kernel::half::{bf16, f16};
use offload_rt::mpi::collective::{CommunicatorCollectives, SystemOperation};
use offload_rt::mpi::topology::Communicator as _;
use offload_rt::{Device, DeviceBuffer, DeviceKind, LaunchConfig, Stream};

/// Elements per rank: odd, so that no length is a multiple of a warp or a vector.
const COUNT: usize = 1001;

fn main() -> ExitCode {
    let Some(universe) = offload_rt::mpi::initialize() else {
        eprintln!("error: MPI was initialized already");
        return ExitCode::FAILURE;
    };
    let world = universe.world();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("--bench") => {
            let mib = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(64);
            bench(&world, mib).map(|()| true)
        }
        _ => check_all(&world),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("rank {}: error: {e}", world.rank());
            ExitCode::FAILURE
        }
    }
}

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The element types of the checks, as the host computes their expected values.
trait Element: CollectiveElement + Small + PartialEq + std::fmt::Debug {
    const NAME: &'static str;
    const SIGNED: bool;
    /// `v` as this type, wrapping for integers (exact for floats: the values stay small).
    fn wrap(v: i64) -> Self;
    /// The typed launch of `fill::<Self>`.
    fn fill(on: &Device, rank: u32, first: u32, out: &mut DeviceBuffer<Self>) -> Result<()>;
}

macro_rules! elements {
    ($($t:ty => $signed:expr, |$v:ident| $wrap:expr;)*) => {$(
        impl Element for $t {
            const NAME: &'static str = stringify!($t);
            const SIGNED: bool = $signed;
            fn wrap($v: i64) -> Self {
                $wrap
            }
            fn fill(on: &Device, rank: u32, first: u32, out: &mut DeviceBuffer<Self>) -> Result<()> {
                let config = LaunchConfig::for_num_elems(out.len() as u32);
                fill::<$t>.launch(on, config, rank, first, Self::SIGNED, out)?;
                Ok(())
            }
        }
    )*};
}

elements! {
    i8 => true, |v| v as i8;
    u8 => false, |v| v as u8;
    i32 => true, |v| v as i32;
    u32 => false, |v| v as u32;
    i64 => true, |v| v;
    u64 => false, |v| v as u64;
    f32 => true, |v| v as f32;
    f64 => true, |v| v as f64;
    f16 => true, |v| f16::from_f32(v as f32);
    bf16 => true, |v| bf16::from_f32(v as f32);
}

fn check_all(world: &impl offload_rt::mpi::topology::Communicator) -> Result<bool> {
    let device = device_for_local_rank(local_rank(world))?;
    let stream = device.stream()?;
    let mut comm = Communicator::from_mpi(&device, world)?;
    comm.set_stream(&stream)?;
    let mut failures = Vec::new();
    let mut checked = 0;
    for (name, run) in [
        (
            i8::NAME,
            check::<i8> as fn(&Communicator, &Stream) -> Result<Vec<String>>,
        ),
        (u8::NAME, check::<u8>),
        (i32::NAME, check::<i32>),
        (u32::NAME, check::<u32>),
        (i64::NAME, check::<i64>),
        (u64::NAME, check::<u64>),
        (f32::NAME, check::<f32>),
        (f64::NAME, check::<f64>),
        (f16::NAME, check::<f16>),
        (bf16::NAME, check::<bf16>),
    ] {
        for failure in run(&comm, &stream)? {
            failures.push(format!("{name}: {failure}"));
        }
        checked += 1;
    }
    let rank = comm.rank();
    if rank == 0 {
        println!("device: {}", device.describe());
        println!("collectives: {}", comm.library());
    }
    for failure in &failures {
        eprintln!("rank {rank}: {failure}");
    }
    // Every rank's verdict, so rank 0 can say it for all.
    let mut all_ok = 0i32;
    world.all_reduce_into(
        &i32::from(failures.is_empty()),
        &mut all_ok,
        SystemOperation::min(),
    );
    if rank == 0 && all_ok == 1 {
        println!(
            "{} ranks: 9 collectives x {checked} element types exact on every rank",
            comm.size()
        );
    }
    Ok(all_ok == 1)
}

/// `pattern` of every rank in `ranks` at each of `len` indices from `first`, combined by `op`
/// in `i64`, then wrapped to `T`.
fn expected<T: Element>(
    ranks: std::ops::Range<u32>,
    first: usize,
    len: usize,
    op: ReduceOp,
) -> Vec<T> {
    (0..len)
        .map(|i| {
            let values = ranks
                .clone()
                .map(|r| i64::from(pattern(r, first + i, T::SIGNED)));
            T::wrap(match op {
                ReduceOp::Sum => values.sum(),
                ReduceOp::Prod => values.product(),
                ReduceOp::Max => values.max().unwrap_or(0),
                _ => values.min().unwrap_or(0),
            })
        })
        .collect()
}

fn compare<T: Element>(what: &str, got: &[T], want: &[T], failures: &mut Vec<String>) {
    if let Some(i) = (0..want.len()).find(|&i| got.get(i) != want.get(i)) {
        failures.push(format!(
            "{what}: element {i} is {:?}, expected {:?} ({} elements)",
            got.get(i),
            want[i],
            want.len()
        ));
    }
}

/// Each collective on `T`s; what differed from the host's values.
fn check<T: Element>(comm: &Communicator, stream: &Stream) -> Result<Vec<String>> {
    let on = stream.device();
    let (rank, size) = (comm.rank() as u32, comm.size() as u32);
    let mut failures = Vec::new();
    let mine = |len: usize, first: usize| -> Result<DeviceBuffer<T>> {
        let mut buf = DeviceBuffer::zeroed(on, len)?;
        T::fill(on, rank, first as u32, &mut buf)?;
        Ok(buf)
    };

    let send = mine(COUNT, 0)?;
    for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min] {
        let mut recv = DeviceBuffer::zeroed(on, COUNT)?;
        comm.all_reduce(&send, &mut recv, op)?;
        stream.synchronize()?;
        compare(
            &format!("all_reduce {op:?}"),
            &recv.to_vec()?,
            &expected::<T>(0..size, 0, COUNT, op),
            &mut failures,
        );
    }

    let mut in_place = mine(COUNT, 0)?;
    comm.all_reduce_in_place(&mut in_place, ReduceOp::Sum)?;
    stream.synchronize()?;
    compare(
        "all_reduce_in_place Sum",
        &in_place.to_vec()?,
        &expected::<T>(0..size, 0, COUNT, ReduceOp::Sum),
        &mut failures,
    );

    let root = size - 1;
    let mut cast = mine(COUNT, 0)?;
    comm.broadcast(&mut cast, root as usize)?;
    stream.synchronize()?;
    compare(
        "broadcast",
        &cast.to_vec()?,
        &expected::<T>(root..root + 1, 0, COUNT, ReduceOp::Sum),
        &mut failures,
    );

    let mut gathered = DeviceBuffer::zeroed(on, COUNT * size as usize)?;
    comm.all_gather(&send, &mut gathered)?;
    stream.synchronize()?;
    let want: Vec<T> = (0..size)
        .flat_map(|r| expected::<T>(r..r + 1, 0, COUNT, ReduceOp::Sum))
        .collect();
    compare("all_gather", &gathered.to_vec()?, &want, &mut failures);

    let whole = mine(COUNT * size as usize, 0)?;
    let mut part = DeviceBuffer::zeroed(on, COUNT)?;
    comm.reduce_scatter(&whole, &mut part, ReduceOp::Sum)?;
    stream.synchronize()?;
    compare(
        "reduce_scatter Sum",
        &part.to_vec()?,
        &expected::<T>(0..size, rank as usize * COUNT, COUNT, ReduceOp::Sum),
        &mut failures,
    );

    // A ring: each rank sends to the next and receives from the previous, posted together.
    let (next, previous) = ((rank + 1) % size, (rank + size - 1) % size);
    let mut received = DeviceBuffer::zeroed(on, COUNT)?;
    comm.group(|g| {
        g.send(&send, next as usize)?;
        g.recv(&mut received, previous as usize)
    })?;
    stream.synchronize()?;
    compare(
        "send/recv ring",
        &received.to_vec()?,
        &expected::<T>(previous..previous + 1, 0, COUNT, ReduceOp::Sum),
        &mut failures,
    );
    Ok(failures)
}

/// Times an all-reduce (sum) of `mib` MiB of `f32`s: through the communicator on the
/// device's buffers, and `MPI_Allreduce` called directly on host vectors; rank 0 prints the
/// medians.
fn bench(world: &impl offload_rt::mpi::topology::Communicator, mib: usize) -> Result<()> {
    const RUNS: usize = 21;
    let device = device_for_local_rank(local_rank(world))?;
    let comm = Communicator::from_mpi(&device, world)?;
    let len = mib * (1 << 20) / 4;
    let mut send = DeviceBuffer::<f32>::zeroed(&device, len)?;
    ramp.launch(
        &device,
        LaunchConfig::for_num_elems(len as u32),
        0.5,
        comm.rank() as f32,
        &mut send,
    )?;
    let mut recv = DeviceBuffer::<f32>::zeroed(&device, len)?;
    let host_send = send.to_vec()?;
    let mut host_recv = vec![0f32; len];

    // On the CPU device, MPI_Allreduce is also timed on the device's own buffers (host
    // memory there), which tells the communicator's cost from the memory's.
    let same_memory = device.kind() == DeviceKind::Cpu;
    let on_device_memory = DeviceBuffer::<f32>::zeroed(&device, len)?;
    // The three alternate, after a first run of each, so that all see the same machine.
    let (mut ours, mut direct, mut direct_same) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..=RUNS {
        world.barrier();
        let start = Instant::now();
        comm.all_reduce(&send, &mut recv, ReduceOp::Sum)?;
        device.synchronize()?;
        let through_comm = start.elapsed();
        world.barrier();
        let start = Instant::now();
        world.all_reduce_into(&host_send[..], &mut host_recv[..], SystemOperation::sum());
        let through_mpi = start.elapsed();
        let mut through_mpi_same = Duration::ZERO;
        if same_memory {
            // SAFETY: on the CPU device a buffer's device address is the host address of its
            // `len` f32s; nothing else uses the two buffers during the call.
            let (from, to) = unsafe {
                (
                    std::slice::from_raw_parts(host_address(&send), len),
                    std::slice::from_raw_parts_mut(host_address(&on_device_memory).cast_mut(), len),
                )
            };
            world.barrier();
            let start = Instant::now();
            world.all_reduce_into(from, to, SystemOperation::sum());
            through_mpi_same = start.elapsed();
        }
        if run > 0 {
            ours.push(through_comm);
            direct.push(through_mpi);
            direct_same.push(through_mpi_same);
        }
    }
    let got = recv.to_vec()?;
    if got != host_recv || (same_memory && on_device_memory.to_vec()? != host_recv) {
        return Err("the communicator's all-reduce differs from MPI_Allreduce's".into());
    }
    if comm.rank() == 0 {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let (ours, direct, direct_same) = (median(ours), median(direct), median(direct_same));
        println!("device: {}", device.describe());
        println!("collectives: {}", comm.library());
        println!(
            "all_reduce {mib} MiB f32 over {} ranks (median of {RUNS}): communicator {:.2} ms, MPI_Allreduce on host vectors {:.2} ms: {:.2}x",
            comm.size(),
            ms(ours),
            ms(direct),
            direct.as_secs_f64() / ours.as_secs_f64()
        );
        if same_memory {
            println!(
                "  MPI_Allreduce on the device's own buffers {:.2} ms: {:.2}x",
                ms(direct_same),
                direct_same.as_secs_f64() / ours.as_secs_f64()
            );
        }
    }
    Ok(())
}

/// The host address of a CPU device buffer's elements.
fn host_address(buf: &DeviceBuffer<f32>) -> *const f32 {
    std::ptr::with_exposed_provenance(buf.device_ptr().0 as usize)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}
