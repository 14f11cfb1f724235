//! The HIP backend on a real AMD GPU (`OFFLOAD_HIP_TESTS=1`), results compared with the CPU;
//! and, on machines without HIP, proof that the backend reports why instead of failing.

mod gpu_common;

use std::ffi::c_void;

use gpu_common::{check_saxpy, f32_bytes, f32s, saxpy_inputs, skip};
use offload_format::{ImageKind, OffloadBinary, OffloadKind};
use offload_rt::__internal::hip::{self, HipBackend, HipDevice, HipError};
use offload_rt::__internal::{Backend, LaunchArgs, RegisteredImage};
use offload_rt::{Error, LaunchConfig};

const CODE_OBJECTS: &[(&str, &[u8])] = &[
    ("gfx90a", include_bytes!("gpu_fixtures/kernels.gfx90a.co")),
    ("gfx942", include_bytes!("gpu_fixtures/kernels.gfx942.co")),
    ("gfx1100", include_bytes!("gpu_fixtures/kernels.gfx1100.co")),
];

fn hip_tests_enabled(test: &str) -> bool {
    if std::env::var("OFFLOAD_HIP_TESTS").is_ok_and(|v| v == "1") {
        true
    } else {
        skip(
            test,
            "set OFFLOAD_HIP_TESTS=1 on a machine with an AMD GPU and ROCm 6 to run it",
        );
        false
    }
}

fn open() -> HipDevice {
    HipDevice::open(0)
        .unwrap_or_else(|e| panic!("OFFLOAD_HIP_TESTS=1 but HIP device 0 cannot be opened: {e}"))
}

#[test]
fn without_hip_the_backend_reports_why() {
    if std::env::var("OFFLOAD_HIP_TESTS").is_ok_and(|v| v == "1") {
        skip(
            "without_hip_the_backend_reports_why",
            "OFFLOAD_HIP_TESTS=1: this machine has a GPU",
        );
        return;
    }
    let err = match hip::probe() {
        Ok(devices) => {
            skip(
                "without_hip_the_backend_reports_why",
                &format!("a HIP device is present: {devices:?}"),
            );
            return;
        }
        Err(e) => e,
    };
    let msg = err.to_string();
    assert!(msg.starts_with("HIP unavailable: "), "{msg}");
    match HipBackend::open(0) {
        Err(Error::BackendUnavailable {
            backend: "hip",
            reason,
        }) => assert!(
            msg.ends_with(&reason) && !reason.contains("unavailable: "),
            "{reason}"
        ),
        other => panic!("expected BackendUnavailable, got {other:?}"),
    }
}

#[test]
fn code_object_fixtures_pass_the_checks() {
    for (arch, co) in CODE_OBJECTS {
        hip::check_code_object(co).unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert!(
            hip::check_code_object(&co[..co.len() / 3]).is_err(),
            "{arch}"
        );
    }
}

#[test]
fn gpu_hip_saxpy_matches_cpu_and_errors_are_typed() {
    if !hip_tests_enabled("gpu_hip_saxpy_matches_cpu_and_errors_are_typed") {
        return;
    }
    let dev = open();
    let info = dev.info().clone();
    assert!(
        offload_format::target_id::is_amdgpu_target_id_shaped(&info.target_id),
        "{info:?}"
    );
    let binaries: Vec<OffloadBinary<'static>> = CODE_OBJECTS
        .iter()
        .map(|(arch, co)| {
            OffloadBinary::new(ImageKind::Object, OffloadKind::Hip, *co)
                .with_string("arch", *arch)
                .with_string("triple", "amdgcn-amd-amdhsa")
                .with_string("offload.module", "gpu_fixtures")
                .with_string("offload.kernels", "empty,saxpy,store")
        })
        .collect();
    let images: Vec<RegisteredImage<'_>> = binaries
        .iter()
        .enumerate()
        .map(|(index, binary)| RegisteredImage {
            source: "gpu_hip",
            index,
            module: "gpu_fixtures",
            binary,
        })
        .collect();
    let processor = info.target_id.split(':').next().unwrap_or("").to_owned();
    let backend = HipBackend::open(0).unwrap();
    let module = match backend.load_module("gpu_fixtures", &images) {
        Ok(m) => m,
        Err(Error::NoCompatibleImage { tried, .. }) => {
            skip(
                "saxpy part",
                &format!(
                    "no fixture code object for {} (have {tried})",
                    info.target_id
                ),
            );
            return;
        }
        Err(e) => panic!("{e}"),
    };
    assert_eq!(module.image().arch, processor);

    let n = 100_003usize;
    let (x, y) = saxpy_inputs(n);
    let dx = backend.alloc_zeroed(n * 4).unwrap();
    let dy = backend.alloc_zeroed(n * 4).unwrap();
    // SAFETY: both allocations hold n * 4 bytes.
    unsafe {
        backend.copy_to_device(dx, &f32_bytes(&x)).unwrap();
        backend.copy_to_device(dy, &f32_bytes(&y)).unwrap();
    }
    let k = module.kernel("saxpy").unwrap();
    let (mut nn, mut a, mut px, mut py) = (n as u32, 1.5f32, dx.0, dy.0);
    let params: [*mut c_void; 4] = [
        (&raw mut nn).cast(),
        (&raw mut a).cast(),
        (&raw mut px).cast(),
        (&raw mut py).cast(),
    ];
    // SAFETY: saxpy(unsigned, float, const float*, float*), buffers of n floats that live
    // until freed below.
    unsafe {
        module.launch(
            k,
            &LaunchArgs::new("saxpy", LaunchConfig::for_num_elems(n as u32), &params),
        )
    }
    .unwrap();
    let mut out = vec![0u8; n * 4];
    // SAFETY: dy holds n * 4 bytes.
    unsafe { backend.copy_to_host(&mut out, dy) }.unwrap();
    check_saxpy(1.5, &x, &y, &f32s(&out)).unwrap();
    // SAFETY: from alloc_zeroed, not used afterwards.
    unsafe {
        backend.free(dx).unwrap();
        backend.free(dy).unwrap();
    }

    assert!(matches!(
        module.kernel("nope"),
        Err(Error::KernelNotFound { .. })
    ));
    match dev.alloc(info.total_memory.saturating_mul(4)) {
        Err(HipError::OutOfMemory { message, .. }) => assert!(!message.is_empty()),
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    let wrong = CODE_OBJECTS
        .iter()
        .find(|(arch, _)| *arch != processor)
        .map(|(_, co)| *co)
        .unwrap_or_default();
    match dev.load_module(wrong, hip::HipImageKind::CodeObject) {
        Err(HipError::ModuleLoad { message, .. }) => assert!(!message.is_empty()),
        other => {
            panic!("expected ModuleLoad for a code object of another processor, got {other:?}")
        }
    }
}
