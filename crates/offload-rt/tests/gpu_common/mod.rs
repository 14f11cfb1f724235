//! Shared by the GPU test files: the gate, the kernel fixtures and reference results.
//!
//! GPU tests run only with `OFFLOAD_GPU_TESTS=1`. Without it each prints `skipped: <reason>`
//! straight to the process's stderr (not through the test harness's capture, so it is seen)
//! and returns; with it and no usable device they fail with the driver's reason.

#![allow(dead_code, reason = "each test file uses part of this module")]

use std::io::Write;

use offload_format::{ImageKind, OffloadBinary, OffloadKind};
use offload_rt::__internal::register_bundle;

pub const PTX_SM70: &[u8] = include_bytes!("../gpu_fixtures/kernels.sm_70.ptx");
pub const PTX_SM52: &[u8] = include_bytes!("../gpu_fixtures/kernels.sm_52.ptx");
pub const CUBIN_SM52: &[u8] = include_bytes!("../gpu_fixtures/kernels.sm_52.cubin");
pub const CUBIN_SM80: &[u8] = include_bytes!("../gpu_fixtures/kernels.sm_80.cubin");
pub const CUBIN_SM90: &[u8] = include_bytes!("../gpu_fixtures/kernels.sm_90.cubin");
/// `cluster_ranks` (clusters.cu) for compute capability 9.0 and later.
pub const CLUSTERS_SM90: &[u8] = include_bytes!("../gpu_fixtures/clusters.sm_90.cubin");
pub const NVPTX: &str = "nvptx64-nvidia-cuda";

/// Says on stderr, past the harness's capture, that `test` was skipped and why.
pub fn skip(test: &str, reason: &str) {
    // One write, so that lines of tests running in parallel do not interleave.
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("skipped: {test}: {reason}\n").as_bytes());
}

/// Whether GPU tests are asked for (`OFFLOAD_GPU_TESTS=1`); prints the skip line if not.
pub fn gpu_tests_enabled(test: &str) -> bool {
    if std::env::var("OFFLOAD_GPU_TESTS").is_ok_and(|v| v == "1") {
        true
    } else {
        skip(
            test,
            "set OFFLOAD_GPU_TESTS=1 on a machine with an NVIDIA GPU to run it",
        );
        false
    }
}

/// The fixture images as OffloadBinaries: (arch, kind, bytes).
pub fn fixture_images() -> Vec<OffloadBinary<'static>> {
    [
        ("sm_52", ImageKind::Cubin, CUBIN_SM52),
        ("sm_70", ImageKind::Ptx, PTX_SM70),
        ("sm_80", ImageKind::Cubin, CUBIN_SM80),
        ("sm_90", ImageKind::Cubin, CUBIN_SM90),
    ]
    .into_iter()
    .map(|(arch, kind, bytes)| nv_image(arch, kind, bytes))
    .collect()
}

pub fn nv_image(
    arch: &'static str,
    kind: ImageKind,
    bytes: &'static [u8],
) -> OffloadBinary<'static> {
    OffloadBinary::new(kind, OffloadKind::Cuda, bytes)
        .with_string("arch", arch)
        .with_string("triple", NVPTX)
        .with_string("offload.module", "gpu_fixtures")
        .with_string("offload.kernels", "empty,saxpy,store")
}

/// Registers [`fixture_images`] as one bundle, as an embedding object would (once per
/// process).
pub fn register_fixtures() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        register_bundle(
            "gpu_fixtures",
            fixture_images()
                .iter()
                .flat_map(OffloadBinary::to_bytes)
                .collect(),
        );
    });
}

/// Inputs of the SAXPY checks.
pub fn saxpy_inputs(n: usize) -> (Vec<f32>, Vec<f32>) {
    let x = (0..n).map(|i| (i % 1024) as f32 * 0.25).collect();
    let y = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
    (x, y)
}

/// Compares a device result with `a * x + y` computed here on the CPU; the device may fuse
/// the multiply-add, so one rounding step of difference is allowed.
pub fn check_saxpy(a: f32, x: &[f32], y: &[f32], got: &[f32]) -> Result<(), String> {
    assert_eq!(got.len(), x.len());
    let bad: Vec<String> = got
        .iter()
        .zip(x.iter().zip(y))
        .enumerate()
        .filter(|(_, (g, (xi, yi)))| {
            let want = a * **xi + **yi;
            (**g - want).abs() > want.abs() * 1e-6 + 1e-6
        })
        .take(5)
        .map(|(i, (g, (xi, yi)))| format!("[{i}] got {g}, expected {}", a * xi + yi))
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(bad.join("; "))
    }
}

pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|f| f.to_le_bytes()).collect()
}

pub fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Queues the fixtures' `store(int* p, int v)` on `device` (a stream's device: on that
/// stream), one thread writing `value` at `address`.
///
/// # Safety
///
/// `address` is the device address of an `i32` alive until the work has passed it, or one no
/// allocation has, to make the kernel fault on purpose (which cannot touch host memory).
pub unsafe fn launch_store(
    device: &offload_rt::Device,
    address: u64,
    value: i32,
) -> offload_rt::Result<()> {
    let (mut p, mut v) = (address, value);
    let params: [*mut std::ffi::c_void; 2] = [(&raw mut p).cast(), (&raw mut v).cast()];
    // SAFETY: store(int*, int) takes the two parameters; the caller's contract covers the
    // address.
    unsafe {
        device.launch_raw(
            "gpu_fixtures",
            "store",
            &offload_rt::LaunchConfig::linear(1, 1),
            &params,
        )
    }
    .map(drop)
}
