//! Every example, and every kernel of the runtime's test fixtures (`offload-rt-kernel-run`), on
//! the CUDA device (`OFFLOAD_GPU_TESTS=1`), its output compared with the same binary's on the
//! CPU device; and a kernel's panic on the GPU coming back as an error.
//!
//! The binaries are looked up in `OFFLOAD_EXAMPLES_DIR` (default: the workspace's
//! `target/release`), so that binaries built on one machine can be run on another:
//! `cargo build --release -p saxpy -p reduce -p half-sum -p offload-rt-kernel-run` builds them.

mod gpu_common;

use std::path::PathBuf;
use std::process::Command;

use gpu_common::gpu_tests_enabled;

const EXAMPLES: &[&str] = &["saxpy", "reduce", "half-sum", "offload-rt-kernel-run"];

fn examples_dir() -> PathBuf {
    match std::env::var_os("OFFLOAD_EXAMPLES_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/release"),
    }
}

fn example(name: &str) -> PathBuf {
    let exe = examples_dir().join(name);
    assert!(
        exe.is_file(),
        "{} is missing: build it (`cargo build --release -p {name}`) or set OFFLOAD_EXAMPLES_DIR",
        exe.display()
    );
    exe
}

/// Runs `offload-rt-kernel-run MODE` on `cuda:0`: (exit status, stdout, stderr).
fn kernel_run_on_cuda(mode: &str) -> (Option<i32>, String, String) {
    let exe = example("offload-rt-kernel-run");
    let out = Command::new(&exe)
        .arg(mode)
        .env("OFFLOAD_DEVICE", "cuda:0")
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", exe.display()));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `exe` on `device`: (stdout without its `device:` and `image:` lines, the `device:`
/// line).
fn run_on(exe: &PathBuf, device: &str) -> (Vec<String>, String) {
    let out = Command::new(exe)
        .env("OFFLOAD_DEVICE", device)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", exe.display()));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{} on {device}: {}\nstdout:\n{stdout}\nstderr:\n{}",
        exe.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let device_line = stdout
        .lines()
        .find(|l| l.starts_with("device:"))
        .unwrap_or("")
        .to_owned();
    let rest = stdout
        .lines()
        .filter(|l| !l.starts_with("device:") && !l.starts_with("image:"))
        .map(str::to_owned)
        .collect();
    (rest, device_line)
}

#[test]
fn gpu_examples_match_the_cpu_device() {
    if !gpu_tests_enabled("gpu_examples_match_the_cpu_device") {
        return;
    }
    for name in EXAMPLES {
        let exe = example(name);
        let (gpu, gpu_device) = run_on(&exe, "cuda:0");
        let (cpu, cpu_device) = run_on(&exe, "cpu");
        assert!(
            gpu_device.starts_with("device: cuda:0"),
            "{name}: ran on `{gpu_device}`"
        );
        assert!(
            cpu_device.starts_with("device: cpu"),
            "{name}: ran on `{cpu_device}`"
        );
        assert_eq!(gpu, cpu, "{name}: CUDA and CPU outputs differ");
    }
}

/// `lookup` with an index past its table panics in the kernel: on the GPU the panic traps, and
/// the launch (or the copy after it) returns the kernel's panic with its message.
#[test]
fn gpu_kernel_panic_is_an_error() {
    if !gpu_tests_enabled("gpu_kernel_panic_is_an_error") {
        return;
    }
    let (status, stdout, stderr) = kernel_run_on_cuda("lookup-past-the-table");
    assert_eq!(
        status,
        Some(1),
        "exit status of a panicking kernel\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("device: cuda:0"), "{stdout}");
    assert!(
        stderr.starts_with("error: kernel `lookup` panicked on cuda:0")
            && stderr.contains("index out of bounds"),
        "the error should be the kernel's panic with its message:\n{stderr}"
    );
}

/// `lookup` with every one of 8,192 threads indexing past its table: every thread panics, one
/// writes the report and the others end without one; the report comes back whole (its index
/// and length, not a report cut short).
#[test]
fn gpu_panic_in_every_thread_is_one_whole_report() {
    if !gpu_tests_enabled("gpu_panic_in_every_thread_is_one_whole_report") {
        return;
    }
    let (status, stdout, stderr) = kernel_run_on_cuda("panic-everywhere");
    assert_eq!(
        status,
        Some(1),
        "exit status of a panicking kernel\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.starts_with("error: kernel `lookup` panicked on cuda:0")
            && stderr.contains("index out of bounds: the len is 4 but the index is")
            && !stderr.contains("before its report was complete"),
        "the error should be one thread's whole report:\n{stderr}"
    );
}

/// `copy_offset` indexing past its `&[u32]`: the slice's bounds check panics on the GPU too,
/// and the launch fails with the panic's report.
#[test]
fn gpu_slice_index_past_the_end_is_an_error() {
    if !gpu_tests_enabled("gpu_slice_index_past_the_end_is_an_error") {
        return;
    }
    let (status, stdout, stderr) = kernel_run_on_cuda("copy-past-the-end");
    assert_eq!(
        status,
        Some(1),
        "exit status of a panicking kernel\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // Thread 35 of block 1 is the only one past the end: the report is its own.
    assert!(
        stderr.starts_with("error: kernel `copy_offset` panicked on cuda:0")
            && stderr.contains("src/lib.rs:")
            && stderr.ends_with(
                "(block (1, 0, 0), thread (35, 0, 0)): index out of bounds: the len is 100 but \
                 the index is 100\n"
            ),
        "the error should be the kernel's panic with its place and message:\n{stderr}"
    );
}

/// `device_println!` on a GPU: every thread's line reaches standard output once, formatted as
/// `format!` does on the host; lines printed before a panic come out too, and the panic is
/// reported with its message.
#[test]
fn gpu_device_prints_reach_the_host() {
    if !gpu_tests_enabled("gpu_device_prints_reach_the_host") {
        return;
    }
    let (status, stdout, stderr) = kernel_run_on_cuda("print");
    assert_eq!(status, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let (values_part, panic_part) = stdout
        .split_once("--- print_then_panic\n")
        .unwrap_or_else(|| panic!("{stdout}"));
    let mut lines: Vec<&str> = values_part.lines().skip(1).collect();
    lines.sort_unstable();
    let scale = 0.125f32;
    let mut expected: Vec<String> = (0..100)
        .map(|i| {
            let v = i * 37 - 1500;
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
    assert!(panic_part.contains("thread 5\n"), "{panic_part}");
    // A GPU records no formatted message (the CPU device does: `device_print.rs`).
    assert!(
        panic_part.contains("error: kernel `print_then_panic` panicked on cuda:0")
            && panic_part.contains("block (0, 0, 0), thread (5, 0, 0)")
            && panic_part.contains("a panic message that formats values"),
        "{panic_part}"
    );
}
