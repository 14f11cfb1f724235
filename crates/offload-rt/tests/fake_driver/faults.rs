//! The faults a GPU program must survive, played against a stand-in driver: a kernel's fault,
//! a kernel that never finishes, memory exhaustion, and faults injected while threads work.
//! The stand-ins count the calls given a handle of a context reset since; there must be none.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use offload_rt::{Device, DeviceBuffer, Error, LaunchConfig, PinnedBuffer, Stream};

/// The stand-in's counters: `<prefix>_dead_handle_calls`, `_live_handles`, `_resets`.
pub struct Counters {
    pub dead_handle_calls: extern "C" fn() -> u32,
    pub live_handles: extern "C" fn() -> u32,
    pub resets: extern "C" fn() -> u32,
}

/// Queues `kernel` (`k`, `trap` or `hang` of the stand-ins' module `fake`) on `device`.
fn launch(device: &Device, kernel: &'static str) -> Result<(), Error> {
    // SAFETY: the stand-in drivers run nothing; the kernels take no parameters.
    unsafe { device.launch_raw("fake", kernel, &LaunchConfig::linear(1, 32), &[]) }.map(drop)
}

fn assert_lost<T: std::fmt::Debug>(what: &str, result: Result<T, Error>) {
    match result {
        Err(Error::DeviceLost { .. }) => {}
        other => panic!("{what}: expected the device lost, got {other:?}"),
    }
}

/// One round of work that must be right on a usable device: a copy in, a launch on `stream`,
/// a copy back.
fn work(device: &Device, stream: &Stream, seed: u32) -> Result<(), Error> {
    let data: Vec<u32> = (0..64)
        .map(|i| seed.wrapping_mul(31).wrapping_add(i))
        .collect();
    let buffer = DeviceBuffer::from_slice(device, &data)?;
    launch(stream.device(), "k")?;
    stream.synchronize()?;
    assert_eq!(
        buffer.to_vec()?,
        data,
        "a copy on a usable device came back wrong"
    );
    Ok(())
}

/// Plays every fault on `device` (a GPU of the stand-in) and checks that the device comes
/// back each time, with no call on a dead handle and as many handles alive at the end as at
/// the start. Returns the longest time from a reset to the first launch that completed after
/// it.
pub fn check_fault_recovery(device: &Device, counters: &Counters) -> Duration {
    let stream = device.stream().unwrap();
    work(device, &stream, 1).unwrap();
    drop(stream);
    let live_at_start = (counters.live_handles)();
    let mut slowest = Duration::ZERO;

    // A kernel's fault: reported once, then everything made before answers `DeviceLost`
    // until a reset, and still after it; new objects work.
    for round in 0..3 {
        let mut buffer = DeviceBuffer::from_slice(device, &[1u32, 2, 3, 4]).unwrap();
        let stream = device.stream().unwrap();
        let event = stream.record().unwrap();
        stream.begin_capture().unwrap();
        launch(stream.device(), "k").unwrap();
        let graph = stream.end_capture().unwrap();
        launch(device, "trap").unwrap();
        match device.synchronize() {
            Err(Error::KernelFault { kernel, .. }) => {
                assert_eq!(kernel.as_deref(), Some("fake::trap"));
            }
            other => panic!("round {round}: expected the fault, got {other:?}"),
        }
        assert!(
            device
                .lost()
                .is_some_and(|cause| cause.contains("reported"))
        );
        assert_lost("a copy", buffer.to_vec());
        assert_lost("a copy in", buffer.copy_from(&[0; 4]));
        assert_lost("a launch", launch(device, "k"));
        assert_lost("a launch on a stream", launch(stream.device(), "k"));
        assert_lost("a stream's wait", stream.synchronize());
        assert_lost("an event", event.synchronize());
        // SAFETY: the recorded launch uses no memory.
        assert_lost("a graph", unsafe { stream.launch_graph(&graph) });
        assert_lost("an allocation", DeviceBuffer::<u32>::zeroed(device, 4));
        assert_lost("a new stream", device.stream());
        assert_lost("the device's wait", device.synchronize());

        let reset = Instant::now();
        device.reset().unwrap();
        assert_eq!(device.lost(), None);
        let fresh = device.stream().unwrap();
        work(device, &fresh, round).unwrap();
        slowest = slowest.max(reset.elapsed());

        // What was made before the reset stays lost, and drops without a driver call.
        assert_lost("a copy after the reset", buffer.to_vec());
        assert_lost(
            "an old buffer as a launch argument",
            buffer.device_ptr_on(device, "k", 0),
        );
        assert_lost("a launch on an old stream", launch(stream.device(), "k"));
        assert_lost("an old stream's wait", stream.synchronize());
        assert_lost("an old event", event.query());
        // SAFETY: as above.
        assert_lost("an old graph", unsafe { fresh.launch_graph(&graph) });
        drop((buffer, stream, event, graph));
        work(device, &fresh, round + 10).unwrap();
    }
    assert_eq!((counters.dead_handle_calls)(), 0, "calls on dead handles");

    // A kernel that never finishes: a wait with a limit says so, naming it; a reset stops
    // it.
    let stream = device.stream().unwrap();
    launch(stream.device(), "hang").unwrap();
    let started = Instant::now();
    match stream.synchronize_timeout(Duration::from_millis(50)) {
        Err(Error::Timeout {
            kernels, waited, ..
        }) => {
            assert_eq!(kernels, ["fake::hang"]);
            assert!(waited >= Duration::from_millis(50));
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    match device.synchronize_timeout(Duration::from_millis(20)) {
        Err(e @ Error::Timeout { .. }) => {
            assert!(e.to_string().contains("`fake::hang`"), "{e}");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(device.lost(), None, "a timeout does not lose the device");
    let reset = Instant::now();
    device.reset().unwrap();
    let fresh = device.stream().unwrap();
    work(device, &fresh, 7).unwrap();
    fresh.synchronize_timeout(Duration::from_secs(5)).unwrap();
    device.synchronize_timeout(Duration::from_secs(5)).unwrap();
    slowest = slowest.max(reset.elapsed());
    assert_lost("the hung stream", stream.synchronize());
    drop((stream, fresh));

    // Memory exhaustion: a typed error saying what is free, the device usable, and the same
    // allocation made once memory is freed.
    let (_, total) = {
        let probe = DeviceBuffer::<u8>::zeroed(device, 1 << 40);
        match probe {
            Err(Error::OutOfMemory {
                requested,
                free: Some(free),
                total: Some(total),
                ..
            }) => {
                assert_eq!(requested, 1 << 40);
                assert!(free < total);
                (free, total)
            }
            other => panic!("expected out of memory, got {other:?}"),
        }
    };
    let third = total / 3;
    let first = DeviceBuffer::<u8>::zeroed(device, third).unwrap();
    match DeviceBuffer::<u8>::zeroed(device, third) {
        Err(Error::OutOfMemory {
            requested, free, ..
        }) => {
            assert_eq!(requested, third);
            assert!(free.is_some_and(|f| f < third));
        }
        other => panic!("expected out of memory, got {other:?}"),
    }
    work(device, &device.stream().unwrap(), 8).unwrap();
    drop(first);
    let second = DeviceBuffer::<u8>::zeroed(device, third).unwrap();
    drop(second);
    assert_eq!(
        device.lost(),
        None,
        "running out of memory does not lose the device"
    );

    // Page-locked buffers lend out memory a reset unmaps: the reset waits for them.
    let pinned = PinnedBuffer::<u32>::zeroed(device, 4).unwrap();
    match device.reset() {
        Err(Error::ResetRefused { reason, .. }) => {
            assert!(reason.contains("page-locked"), "{reason}");
        }
        other => panic!("expected the reset refused, got {other:?}"),
    }
    assert!(
        device.lost().is_some(),
        "a refused reset leaves the device lost"
    );
    drop(pinned);
    device.reset().unwrap();
    work(device, &device.stream().unwrap(), 9).unwrap();

    slowest = slowest.max(faults_under_load(device, counters));

    let stream = device.stream().unwrap();
    work(device, &stream, 11).unwrap();
    drop(stream);
    assert_eq!((counters.dead_handle_calls)(), 0, "calls on dead handles");
    assert_eq!(
        (counters.live_handles)(),
        live_at_start,
        "handles left alive after the faults"
    );
    slowest
}

/// Four threads work on streams of their own while a fifth makes kernels fault and resets
/// the device, in turns: every round that completes is right, the others fail with the
/// fault or the device lost, and every thread gets back to work after each reset. Returns
/// the longest time from a reset to the first round completed after it.
fn faults_under_load(device: &Device, counters: &Counters) -> Duration {
    const THREADS: u32 = 4;
    const FAULTS: u32 = 8;
    let resets_before = (counters.resets)();
    let done = AtomicBool::new(false);
    let completed = AtomicU32::new(0);
    let slowest = std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let (done, completed) = (&done, &completed);
            scope.spawn(move || {
                let mut stream = None;
                let mut round = 0u32;
                while !done.load(Ordering::SeqCst) {
                    round += 1;
                    let result = match &stream {
                        Some(stream) => work(device, stream, thread * 100_000 + round),
                        None => device.stream().map(|s| stream = Some(s)),
                    };
                    match result {
                        Ok(()) => {
                            completed.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(Error::DeviceLost { .. } | Error::KernelFault { .. }) => {
                            stream = None;
                            std::thread::yield_now();
                        }
                        Err(other) => panic!("thread {thread}: {other}"),
                    }
                }
            });
        }
        let mut slowest = Duration::ZERO;
        for _ in 0..FAULTS {
            let before = completed.load(Ordering::SeqCst);
            while completed.load(Ordering::SeqCst) < before + 20 {
                std::thread::yield_now();
            }
            match launch(device, "trap").and_then(|()| device.synchronize()) {
                Err(Error::KernelFault { .. } | Error::DeviceLost { .. }) => {}
                other => panic!("expected the fault, got {other:?}"),
            }
            let reset = Instant::now();
            device.reset().unwrap();
            let after = completed.load(Ordering::SeqCst);
            while completed.load(Ordering::SeqCst) < after + THREADS {
                std::thread::yield_now();
            }
            slowest = slowest.max(reset.elapsed());
        }
        done.store(true, Ordering::SeqCst);
        slowest
    });
    assert_eq!((counters.resets)() - resets_before, FAULTS);
    slowest
}
