//! A HIP device survives its faults, against the stand-in runtime (tests/fixtures/fake-hip),
//! as `cuda_fault_recovery.rs` checks a CUDA device. One test, because the runtime library is
//! chosen once per process through `OFFLOAD_HIP_LIBRARY`.

mod fake_driver;

use fake_driver::faults::{Counters, check_fault_recovery};
use offload_format::{ImageKind, OffloadBinary, OffloadKind};
use offload_rt::__internal::hip::HipBackend;
use offload_rt::Device;

#[test]
fn a_hip_device_survives_its_faults() {
    let library = fake_driver::build("fake-hip");
    // SAFETY: the only test of this process, and no thread reads the environment yet.
    unsafe { std::env::set_var("OFFLOAD_HIP_LIBRARY", &library) };
    let binary = OffloadBinary::new(
        ImageKind::Object,
        OffloadKind::Hip,
        &*fake_driver::amd_code_object().leak(),
    )
    .with_string("triple", "amdgcn-amd-amdhsa")
    .with_string("arch", "gfx90a")
    .with_string("offload.module", "fake")
    .with_string("offload.kernels", "k,trap,hang");
    fake_driver::register(&binary);
    let device = Device::from_backend(Box::new(HipBackend::open(0).unwrap()));
    let counter = |name| fake_driver::counter(&library, name);
    let slowest = check_fault_recovery(
        &device,
        &Counters {
            dead_handle_calls: counter("fake_hip_dead_handle_calls"),
            live_handles: counter("fake_hip_live_handles"),
            resets: counter("fake_hip_resets"),
        },
    );
    eprintln!("slowest reset to a completed launch on the stand-in: {slowest:?}");
}
