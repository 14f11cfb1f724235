//! A CUDA device survives its faults, against the stand-in driver
//! (tests/fixtures/fake-cuda): a kernel's fault loses the context until `Device::reset`, a
//! kernel that never finishes is a timeout, memory runs out and comes back, and faults
//! injected while threads work are survived, without a call on a dead handle. One test,
//! because the driver library is chosen once per process through `OFFLOAD_CUDA_LIBRARY`.

mod fake_driver;

use fake_driver::faults::{Counters, check_fault_recovery};
use offload_format::{ImageKind, OffloadBinary, OffloadKind};
use offload_rt::__internal::cuda::CudaBackend;
use offload_rt::Device;

const PTX: &[u8] = b".version 7.8\n.target sm_80\n.address_size 64\n";

#[test]
fn a_cuda_device_survives_its_faults() {
    let library = fake_driver::build("fake-cuda");
    // SAFETY: the only test of this process, and no thread reads the environment yet.
    unsafe { std::env::set_var("OFFLOAD_CUDA_LIBRARY", &library) };
    let binary = OffloadBinary::new(ImageKind::Ptx, OffloadKind::Cuda, PTX)
        .with_string("triple", "nvptx64-nvidia-cuda")
        .with_string("arch", "sm_80")
        .with_string("offload.module", "fake")
        .with_string("offload.kernels", "k,trap,hang");
    fake_driver::register(&binary);
    let device = Device::from_backend(Box::new(CudaBackend::open(0).unwrap()));
    let counter = |name| fake_driver::counter(&library, name);
    let slowest = check_fault_recovery(
        &device,
        &Counters {
            dead_handle_calls: counter("fake_cuda_dead_handle_calls"),
            live_handles: counter("fake_cuda_live_handles"),
            resets: counter("fake_cuda_resets"),
        },
    );
    eprintln!("slowest reset to a completed launch on the stand-in: {slowest:?}");
}
