//! The runtime under load on a real GPU (`OFFLOAD_GPU_TESTS=1`), faults injected: 16 threads,
//! each on a stream of its own, run 10,000 rounds of a copy in, a launch and a copy back,
//! every result checked, while a 17th thread makes a kernel fault every 4,000 rounds and
//! resets the device. Every round completes right in the end, every fault is survived, and
//! the device's free memory and the process's open files are as before. In a test binary of
//! its own: the faults reset the process's CUDA context. `OFFLOAD_STRESS_ROUNDS` sets the
//! rounds per thread. Then a kernel that never finishes: a wait with a limit reports it, and a
//! reset stops it.

mod gpu_common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use gpu_common::*;
use offload_format::{ImageKind, OffloadBinary, OffloadKind};
use offload_rt::__internal::cuda::CudaBackend;
use offload_rt::{Device, DeviceBuffer, Error, LaunchConfig, Stream};

const THREADS: u32 = 16;
const FAULT_EVERY: u32 = 4_000;

/// Free device memory, in bytes.
fn free_memory(device: &Device) -> usize {
    let backend = device.backend().as_any().downcast_ref::<CudaBackend>();
    backend.unwrap().device().memory_info().unwrap().0
}

fn open_files() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}

/// `store(p, value)` into `buffer` on `stream`, checked after a copy back.
fn round(stream: &Stream, buffer: &mut DeviceBuffer<i32>, value: i32) -> Result<(), Error> {
    buffer.copy_from(&[-1])?;
    let address = buffer.device_ptr_on(stream.device(), "store", 0)?.0;
    // SAFETY: the buffer's one `i32`, which outlives the stream's wait.
    unsafe { launch_store(stream.device(), address, value) }?;
    stream.synchronize()?;
    let got = buffer.to_vec()?;
    assert_eq!(got, [value], "a round on a usable device came back wrong");
    Ok(())
}

/// Waits out an error of a round: the injected fault, or the device lost to it.
fn tolerate(thread: u32, e: Error) {
    match e {
        Error::DeviceLost { .. } | Error::KernelFault { .. } => {
            std::thread::sleep(Duration::from_micros(200));
        }
        other => panic!("thread {thread}: {other}"),
    }
}

/// Makes `store` fault on the device's own stream (an address no allocation has).
fn inject_fault(device: &Device) -> Result<(), Error> {
    // SAFETY: an address no allocation has, on purpose.
    unsafe { launch_store(device, 0x10, 7) }?;
    device.synchronize()
}

#[test]
fn gpu_survives_faults_under_load() {
    if !gpu_tests_enabled("gpu_survives_faults_under_load") {
        return;
    }
    let rounds: u32 = std::env::var("OFFLOAD_STRESS_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    register_fixtures();
    let device = Device::from_backend(Box::new(CudaBackend::open(0).unwrap()));
    // Warm: the module loaded, a stream made, so the figures below start from a used device.
    let stream = device.stream().unwrap();
    round(&stream, &mut DeviceBuffer::zeroed(&device, 1).unwrap(), 1).unwrap();
    drop(stream);
    let (free_before, files_before) = (free_memory(&device), open_files());

    let completed = AtomicU32::new(0);
    let finished = AtomicU32::new(0);
    let started = Instant::now();
    let (injected, survived, slowest) = std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let (device, completed, finished) = (&device, &completed, &finished);
            scope.spawn(move || {
                let mut mine: Option<(Stream, DeviceBuffer<i32>)> = None;
                let mut left = rounds;
                while left > 0 {
                    let Some((stream, buffer)) = &mut mine else {
                        match device
                            .stream()
                            .and_then(|s| Ok((s, DeviceBuffer::zeroed(device, 1)?)))
                        {
                            Ok(made) => mine = Some(made),
                            Err(e) => tolerate(thread, e),
                        }
                        continue;
                    };
                    let value = i32::try_from(thread * 1_000_000 + left).unwrap();
                    match round(stream, buffer, value) {
                        Ok(()) => {
                            left -= 1;
                            completed.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(e) => {
                            mine = None;
                            tolerate(thread, e);
                        }
                    }
                }
                finished.fetch_add(1, Ordering::SeqCst);
            });
        }
        let (mut injected, mut survived, mut slowest) = (0u32, 0u32, Duration::ZERO);
        while finished.load(Ordering::SeqCst) < THREADS {
            let next = completed.load(Ordering::SeqCst) + FAULT_EVERY;
            while completed.load(Ordering::SeqCst) < next
                && finished.load(Ordering::SeqCst) < THREADS
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            if finished.load(Ordering::SeqCst) == THREADS {
                break;
            }
            match inject_fault(&device) {
                Err(Error::KernelFault { .. } | Error::DeviceLost { .. }) => injected += 1,
                other => panic!("expected the injected fault, got {other:?}"),
            }
            let reset = Instant::now();
            device.reset().unwrap();
            let after = completed.load(Ordering::SeqCst);
            while completed.load(Ordering::SeqCst) == after
                && finished.load(Ordering::SeqCst) < THREADS
            {
                std::thread::yield_now();
            }
            slowest = slowest.max(reset.elapsed());
            survived += 1;
        }
        (injected, survived, slowest)
    });
    let elapsed = started.elapsed();
    let launches = completed.load(Ordering::SeqCst);
    assert_eq!(launches, THREADS * rounds);
    assert_eq!(survived, injected);
    assert!(
        injected > 0 || rounds * THREADS < FAULT_EVERY,
        "no fault was injected"
    );

    // The device usable, its memory and the process's files as before.
    let stream = device.stream().unwrap();
    round(&stream, &mut DeviceBuffer::zeroed(&device, 1).unwrap(), 2).unwrap();
    drop(stream);
    let (free_after, files_after) = (free_memory(&device), open_files());
    println!(
        "stress: {launches} launches right on {THREADS} threads in {elapsed:.1?}; faults \
         injected {injected}, survived {survived}; slowest reset to a completed round \
         {slowest:?}; free device memory {free_before} -> {free_after} bytes; open files \
         {files_before} -> {files_after}"
    );
    assert!(
        free_after + (64 << 20) >= free_before,
        "device memory leaked: {free_before} -> {free_after} bytes free"
    );
    assert!(
        files_after <= files_before + 2,
        "files leaked: {files_before} -> {files_after}"
    );
}

/// A kernel that never finishes, as PTX for the driver's JIT.
const SPIN_PTX: &[u8] = b".version 6.0
.target sm_52
.address_size 64

.visible .entry spin()
{
SPIN:
	bra.uni 	SPIN;
	ret;
}
";

/// Runs after `gpu_survives_faults_under_load` (tests run in name order, one at a time): if a
/// reset cannot stop a running kernel, this one is what hangs.
#[test]
fn stuck_kernel_times_out_and_a_reset_stops_it() {
    if !gpu_tests_enabled("stuck_kernel_times_out_and_a_reset_stops_it") {
        return;
    }
    register_fixtures();
    let spin = OffloadBinary::new(ImageKind::Ptx, OffloadKind::Cuda, SPIN_PTX)
        .with_string("arch", "sm_52")
        .with_string("triple", NVPTX)
        .with_string("offload.module", "gpu_spin")
        .with_string("offload.kernels", "spin");
    offload_rt::__internal::register_bundle("gpu_spin", spin.to_bytes());
    let device = Device::from_backend(Box::new(CudaBackend::open(0).unwrap()));
    let stream = device.stream().unwrap();
    // SAFETY: the kernel takes no parameters and touches no memory.
    unsafe {
        stream
            .device()
            .launch_raw("gpu_spin", "spin", &LaunchConfig::linear(1, 1), &[])
    }
    .unwrap();
    match stream.synchronize_timeout(Duration::from_millis(200)) {
        Err(Error::Timeout { kernels, .. }) => assert_eq!(kernels, ["gpu_spin::spin"]),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(device.lost(), None);
    let reset = Instant::now();
    device.reset().unwrap();
    let fresh = device.stream().unwrap();
    round(&fresh, &mut DeviceBuffer::zeroed(&device, 1).unwrap(), 3).unwrap();
    println!(
        "reset of a stuck kernel to a completed round: {:?}",
        reset.elapsed()
    );
    assert!(matches!(
        stream.synchronize(),
        Err(Error::DeviceLost { .. })
    ));
}
