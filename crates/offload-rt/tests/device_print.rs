//! `device_print!` / `device_println!` on the CPU device: the fixture's printing kernels
//! (tests/fixtures/kernels) launched with a print sink that collects, the lines checked against
//! `format!` on the host. One test per process state: the sink is process-wide.

use std::sync::{Arc, Mutex};

mod cpu_common;

use offload_rt::{Device, DeviceBuffer, Error, LaunchConfig};
use offload_rt_test_kernels as k;

fn setup() -> bool {
    cpu_common::register_fixture("print_test")
}

/// Collects what the runtime prints.
fn collect() -> Arc<Mutex<Vec<String>>> {
    let chunks = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&chunks);
    offload_rt::set_print_sink(Some(Box::new(move |text: &str| {
        sink.lock().unwrap().push(text.to_owned());
    })));
    chunks
}

#[test]
fn device_prints_reach_the_host_after_the_launch() {
    if !setup() {
        return;
    }
    let chunks = collect();
    let dev = Device::cpu();
    let values: Vec<i32> = (0..100).map(|v| v * 37 - 1500).collect();
    let buf = DeviceBuffer::from_slice(&dev, &values).unwrap();
    let scale = 0.125f32;
    k::print_values
        .launch(&dev, LaunchConfig::linear(4, 32), scale, &buf)
        .unwrap();

    // One chunk per launch, whole lines.
    let chunks = std::mem::take(&mut *chunks.lock().unwrap());
    assert_eq!(chunks.len(), 1, "{chunks:?}");
    let text = &chunks[0];
    assert!(text.ends_with('\n'));
    let mut lines: Vec<&str> = text.lines().collect();
    // Threads run in any order; each call's text comes out whole.
    lines.sort_unstable();
    let mut expected: Vec<String> = values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            format!(
                "[{i:>3}] {v} {v:#x} {:+.1e} {}{}",
                v as f32 * scale,
                v < 0,
                if v < 0 { '!' } else { '.' }
            )
        })
        .collect();
    expected.push(format!("launch: 4 blocks of 32, scale {scale:.2}"));
    expected.sort_unstable();
    assert_eq!(lines, expected);

    // A launch that prints nothing sends nothing.
    let empty = DeviceBuffer::<i32>::zeroed(&dev, 0).unwrap();
    let before = collect();
    k::print_values
        .launch(&dev, LaunchConfig::linear(1, 32), 1.0, &empty)
        .unwrap();
    assert_eq!(
        *before.lock().unwrap(),
        vec!["launch: 1 blocks of 32, scale 1.00\n".to_owned()]
    );

    // What threads printed before a panic is printed, and the panic is the launch's error.
    let chunks = collect();
    let err = k::print_then_panic
        .launch(&dev, LaunchConfig::linear(1, 8), 5)
        .unwrap_err();
    match &err {
        Error::KernelPanic { kernel, panic, .. } => {
            assert_eq!(kernel, "print_then_panic");
            assert_eq!(panic.message, "thread 5 was told to panic");
        }
        other => panic!("{other}"),
    }
    let text = chunks.lock().unwrap().concat();
    assert!(text.contains("thread 5\n"), "{text}");
    assert!(text.lines().all(|l| l.starts_with("thread ")), "{text}");

    // A thread that prints with too little stack left overflows there (printing allocates,
    // and must not overflow half-way); what it printed before comes out, and printing works
    // on afterwards.
    let small = Device::from_backend(Box::new(
        offload_rt::__internal::CpuBackend::with_threads(1).with_stack(Some(64 << 10)),
    ));
    let chunks = collect();
    let err = k::print_deep
        .launch(&small, LaunchConfig::linear(1, 1), 100_000)
        .unwrap_err();
    assert!(
        matches!(&err, Error::KernelStackOverflow { kernel, thread: [0, 0, 0], stack_bytes: 65536, .. } if kernel == "print_deep"),
        "{err}"
    );
    let text = chunks.lock().unwrap().concat();
    assert!(text.starts_with("depth 100000\ndepth 99999\n"), "{text}");
    let chunks = collect();
    k::print_deep
        .launch(&small, LaunchConfig::linear(1, 1), 3)
        .unwrap();
    assert_eq!(
        chunks.lock().unwrap().concat(),
        "depth 3\ndepth 2\ndepth 1\ndepth 0\n"
    );

    // On a stream, the lines come once the launch has run.
    let chunks = collect();
    let stream = dev.stream().unwrap();
    k::print_values
        .launch(stream.device(), LaunchConfig::linear(1, 32), 2.0, &buf)
        .unwrap();
    stream.synchronize().unwrap();
    let text = chunks.lock().unwrap().concat();
    assert_eq!(text.lines().count(), 33, "{text}");
    assert!(
        text.contains("[ 31] -353 0xfffffe9f -7.1e2 true!\n"),
        "{text}"
    );
    offload_rt::set_print_sink(None);
}
