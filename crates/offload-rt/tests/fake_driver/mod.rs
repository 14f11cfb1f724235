//! Builds the stand-in driver libraries (`tests/fixtures/fake-cuda`, `fake-hip`) that the
//! fake-driver tests load instead of a real driver, and the checks both drivers' tests share.
// Each test binary uses what it needs of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use offload_format::OffloadBinary;
use offload_rt::{Device, DeviceBuffer, LaunchConfig, PinnedBuffer, Stream};

pub mod faults;
mod library;

/// Builds the stand-in driver library of fixture `name` (`tests/fixtures/<name>`); its path.
pub fn build(name: &str) -> PathBuf {
    library::build(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"),
        name,
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join(name),
    )
}

/// The smallest code object the HIP loader's check accepts: an ELF header for `EM_AMDGPU`.
pub fn amd_code_object() -> Vec<u8> {
    let mut elf = vec![0u8; 64];
    elf[..4].copy_from_slice(b"\x7fELF");
    elf[4] = 2;
    elf[5] = 1;
    elf[18..20].copy_from_slice(&224u16.to_le_bytes());
    elf
}

/// The PTX image `ptx` of kernel module `fake` for `arch`, with `kernels`, as a build embeds it.
pub fn fake_ptx_image(
    ptx: &'static [u8],
    arch: &'static str,
    kernels: &'static str,
) -> OffloadBinary<'static> {
    OffloadBinary::new(
        offload_format::ImageKind::Ptx,
        offload_format::OffloadKind::Cuda,
        ptx,
    )
    .with_string("triple", "nvptx64-nvidia-cuda")
    .with_string("arch", arch)
    .with_string("offload.module", "fake")
    .with_string("offload.kernels", kernels)
}

/// Loads `binary` into `backend` as kernel module `fake`, registered by test `source`.
pub fn load_fake_module(
    backend: &dyn offload_rt::__internal::Backend,
    source: &'static str,
    binary: &OffloadBinary<'_>,
) -> Box<dyn offload_rt::__internal::Module> {
    let images = [offload_rt::__internal::RegisteredImage {
        source,
        index: 0,
        module: "fake",
        binary,
    }];
    backend.load_module("fake", &images).unwrap()
}

/// Registers `binary` as the embedded images of a program would be (once per process).
pub fn register(binary: &OffloadBinary<'_>) {
    offload_rt::__internal::register_bundle("fake_driver", binary.to_bytes());
}

/// A counter the stand-in driver at `library` exports (`extern "C" fn() -> u32`, such as
/// `fake_cuda_launches`).
pub fn counter(library: &Path, symbol: &str) -> extern "C" fn() -> u32 {
    // SAFETY: the stand-in, already loaded by the runtime; leaked, so it stays open while the
    // counter is used.
    let lib = Box::leak(Box::new(
        unsafe { libloading::Library::new(library) }.unwrap(),
    ));
    // SAFETY: the stand-ins export their counters with this signature.
    *unsafe { lib.get::<extern "C" fn() -> u32>(symbol.as_bytes()) }.unwrap()
}

/// What the stand-in saw at the last launch of a PTX kernel: its name and parameter bytes.
pub fn last_entry_launch(library: &std::path::Path) -> String {
    // SAFETY: the stand-in, already loaded by the runtime; leaked, so it stays open.
    let lib = Box::leak(Box::new(
        unsafe { libloading::Library::new(library) }.unwrap(),
    ));
    // SAFETY: the stand-in exports it with this signature.
    let f = unsafe {
        lib.get::<extern "C" fn() -> *const std::ffi::c_char>(b"fake_cuda_last_entry_launch")
    }
    .unwrap();
    let text = f();
    assert!(!text.is_null(), "no PTX kernel was launched");
    // SAFETY: a NUL-terminated string the stand-in keeps until the next launch.
    unsafe { std::ffi::CStr::from_ptr(text) }
        .to_str()
        .unwrap()
        .to_owned()
}

/// Queues a launch of the stand-ins' parameterless kernel `k` of module `fake` on `device`.
fn launch_k(device: &Device) {
    // SAFETY: the stand-in drivers run nothing; `k` takes no parameters.
    unsafe { device.launch_raw("fake", "k", &LaunchConfig::linear(1, 32), &[]) }.unwrap();
}

/// On `stream` of `device` (registered module `fake`): page-locked copies round-trip; a graph
/// of 3 launches replayed `replays` times runs 3 launches each time (`launches` counts what
/// reached the driver); recorded again into the same graph with one launch, it replays that.
pub fn check_streams_and_graphs(
    device: &Device,
    stream: &Stream,
    launches: extern "C" fn() -> u32,
    replays: u32,
) {
    let pinned = PinnedBuffer::from_slice(device, &[1u32, 2, 3]).unwrap();
    let mut on_device = DeviceBuffer::<u32>::zeroed(device, 3).unwrap();
    let mut back = PinnedBuffer::<u32>::zeroed(device, 3).unwrap();
    stream.copy_to_device(&mut on_device, &pinned).unwrap();
    stream.copy_to_host(&mut back, &on_device).unwrap();
    assert_eq!(back.as_slice().unwrap(), [1, 2, 3]);
    assert_eq!(on_device.to_vec().unwrap(), [1, 2, 3]);

    stream.begin_capture().unwrap();
    for _ in 0..3 {
        launch_k(stream.device());
    }
    let mut graph = stream.end_capture().unwrap();
    let before = launches();
    for _ in 0..replays {
        // SAFETY: the recorded launches use no memory.
        unsafe { stream.launch_graph(&graph) }.unwrap();
    }
    stream.synchronize().unwrap();
    assert_eq!(launches() - before, 3 * replays);

    stream.begin_capture().unwrap();
    launch_k(stream.device());
    stream.end_capture_into(&mut graph).unwrap();
    let before = launches();
    // SAFETY: as above.
    unsafe { stream.launch_graph(&graph) }.unwrap();
    stream.synchronize().unwrap();
    assert_eq!(launches() - before, 1);
}
