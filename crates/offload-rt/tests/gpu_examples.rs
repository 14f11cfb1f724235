//! Every example on the CUDA device (`OFFLOAD_GPU_TESTS=1`), its output compared with the
//! same binary's on the CPU device.
//!
//! The example binaries are looked up in `OFFLOAD_EXAMPLES_DIR` (default: the workspace's
//! `target/release`), so that binaries built on one machine can be run on another:
//! `cargo build --release -p saxpy -p reduce` builds them.

mod gpu_common;

use std::path::PathBuf;
use std::process::Command;

use gpu_common::gpu_tests_enabled;

const EXAMPLES: &[&str] = &["saxpy", "reduce"];

fn examples_dir() -> PathBuf {
    match std::env::var_os("OFFLOAD_EXAMPLES_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/release"),
    }
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
    let dir = examples_dir();
    for name in EXAMPLES {
        let exe = dir.join(name);
        assert!(
            exe.is_file(),
            "{} is missing: build the examples (`cargo build --release -p {name}`) or set OFFLOAD_EXAMPLES_DIR",
            exe.display()
        );
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
