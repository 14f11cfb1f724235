//! The CUDA backend on a real GPU (`OFFLOAD_GPU_TESTS=1`), results compared with the CPU;
//! and, on machines without CUDA, proof that the backend reports why instead of failing.

mod gpu_common;

use std::ffi::c_void;

use gpu_common::*;
use offload_format::ImageKind;
use offload_rt::__internal::cuda::{self, CudaBackend, CudaDevice, CudaError, CudaImageKind};
use offload_rt::__internal::{
    Backend, DeviceTarget, ImageDescriptor, LaunchArgs, RegisteredImage, select_image,
};
use offload_rt::{Device, DeviceBuffer, DevicePtr, Error, LaunchConfig};

fn open() -> CudaDevice {
    match CudaDevice::open(0) {
        Ok(d) => d,
        Err(e) => panic!("OFFLOAD_GPU_TESTS=1 but CUDA device 0 cannot be opened: {e}"),
    }
}

fn the_cubin_for(dev: &CudaDevice) -> Option<&'static [u8]> {
    match dev.info().compute_capability {
        (8, _) => Some(CUBIN_SM80),
        (9, _) => Some(CUBIN_SM90),
        _ => None,
    }
}

/// Without a GPU: no panic, no abort, a typed "unavailable" error with the reason, and the
/// runtime falls back to the CPU.
#[test]
fn without_cuda_the_backend_reports_why() {
    if std::env::var("OFFLOAD_GPU_TESTS").is_ok_and(|v| v == "1") {
        // A process loads the driver once: on a GPU machine the path without one is checked
        // in a child process of this test whose driver library does not exist.
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new(&exe)
            .args(["without_cuda_the_backend_reports_why", "--exact"])
            .env_remove("OFFLOAD_GPU_TESTS")
            .env("OFFLOAD_CUDA_LIBRARY", "/nonexistent/libcuda.so.1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.contains("1 passed") && !stderr.contains("skipped:"),
            "the test without a driver library, in a child process:\n{stdout}\n{stderr}"
        );
        return;
    }
    let err = match cuda::probe() {
        Ok(devices) => {
            skip(
                "without_cuda_the_backend_reports_why",
                &format!("a CUDA device is present: {devices:?}"),
            );
            return;
        }
        Err(e) => e,
    };
    assert!(
        matches!(
            err,
            CudaError::Unavailable { .. }
                | CudaError::NoDevice { .. }
                | CudaError::NoDevices { .. }
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.starts_with("CUDA unavailable: "), "{msg}");
    assert!(
        msg.len() > "CUDA unavailable: ".len() + 5,
        "no reason given: {msg}"
    );

    match CudaBackend::open(0) {
        Err(Error::BackendUnavailable {
            backend: "cuda",
            reason,
        }) => assert!(
            msg.ends_with(&reason) && !reason.contains("unavailable: "),
            "{reason}"
        ),
        other => panic!("expected BackendUnavailable, got {other:?}"),
    }
    let device = Device::best().expect("Device::best falls back to the CPU");
    assert_ne!(device.kind(), offload_rt::DeviceKind::Cuda);
}

/// The fixtures are what the loader accepts, so a GPU failure cannot be a fixture problem.
#[test]
fn fixtures_pass_the_image_checks() {
    for (name, cubin) in [
        ("sm_52", CUBIN_SM52),
        ("sm_80", CUBIN_SM80),
        ("sm_90", CUBIN_SM90),
    ] {
        cuda::check_cubin(cubin).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    for ptx in [PTX_SM70, PTX_SM52] {
        let p = cuda::ptx_with_nul(ptx).unwrap();
        assert_eq!(p.last(), Some(&0));
    }
    assert!(cuda::check_cubin(&CUBIN_SM90[..CUBIN_SM90.len() / 2]).is_err());
}

/// The fixtures registered as a bundle come back from the registry, and selection picks the
/// image each compute capability should run.
#[test]
fn registered_fixtures_select_per_compute_capability() {
    register_fixtures();
    let table = [
        ((9, 0), "sm_90", ImageKind::Cubin),
        ((8, 9), "sm_80", ImageKind::Cubin),
        ((8, 0), "sm_80", ImageKind::Cubin),
        ((7, 5), "sm_70", ImageKind::Ptx),
        ((10, 0), "sm_70", ImageKind::Ptx),
        ((12, 0), "sm_70", ImageKind::Ptx),
    ];
    offload_rt::__internal::with_module_images("gpu_fixtures", |images| {
        assert_eq!(images.len(), 4);
        let descriptors: Vec<ImageDescriptor<'_>> = images
            .iter()
            .map(|i| ImageDescriptor {
                triple: i.triple(),
                arch: i.arch(),
                kind: i.image_kind(),
            })
            .collect();
        for ((major, minor), arch, kind) in table {
            let s = select_image(&DeviceTarget::Cuda { major, minor }, &descriptors).unwrap();
            assert_eq!(
                (descriptors[s.index].arch, descriptors[s.index].kind),
                (arch, kind),
                "sm_{major}{minor}"
            );
        }
        let err =
            select_image(&DeviceTarget::Cuda { major: 6, minor: 1 }, &descriptors).unwrap_err();
        assert!(
            err.to_string()
                .contains("nvptx64-nvidia-cuda sm_52 (cubin)"),
            "{err}"
        );
        Ok(())
    })
    .unwrap();
}

#[test]
fn gpu_probe_describes_devices() {
    if !gpu_tests_enabled("gpu_probe_describes_devices") {
        return;
    }
    let devices = cuda::probe().unwrap_or_else(|e| panic!("{e}"));
    assert!(!devices.is_empty());
    for d in &devices {
        assert!(!d.name.is_empty());
        assert!(d.compute_capability.0 >= 3, "{d:?}");
        assert!(d.total_memory > 0 && d.multiprocessors > 0, "{d:?}");
        assert!(d.driver_version.0 >= 11, "{d:?}");
    }
    let dev = open();
    let (free, total) = dev.memory_info().unwrap();
    assert!(free <= total && total == dev.info().total_memory);
}

fn run_saxpy(dev: &CudaDevice, image: &[u8], kind: CudaImageKind, n: usize) {
    let module = dev
        .load_module(image, kind)
        .unwrap_or_else(|e| panic!("{kind}: {e}"));
    let f = module.function("saxpy").unwrap();
    let (x, y) = saxpy_inputs(n);
    let a = 2.5f32;
    let mut dx = dev.alloc(n * 4).unwrap();
    let mut dy = dev.alloc(n * 4).unwrap();
    dx.copy_from_host(0, &f32_bytes(&x)).unwrap();
    dy.copy_from_host(0, &f32_bytes(&y)).unwrap();
    let (mut nn, mut aa, mut px, mut py) = (n as u32, a, dx.device_ptr(), dy.device_ptr());
    let params: [*mut c_void; 4] = [
        (&raw mut nn).cast(),
        (&raw mut aa).cast(),
        (&raw mut px).cast(),
        (&raw mut py).cast(),
    ];
    let blocks = (n as u32).div_ceil(256);
    // SAFETY: saxpy(unsigned, float, const float*, float*): four parameters of those types;
    // both buffers hold n floats and outlive the synchronize below.
    unsafe {
        dev.launch(
            &f,
            &LaunchArgs::new(
                "saxpy",
                LaunchConfig {
                    grid: (blocks, 1, 1),
                    block: (256, 1, 1),
                    shared_mem_bytes: 0,
                    cluster: (1, 1, 1),
                },
                &params,
            ),
        )
    }
    .unwrap();
    dev.synchronize().unwrap();
    let mut out = vec![0u8; n * 4];
    dy.copy_to_host(0, &mut out).unwrap();
    check_saxpy(a, &x, &y, &f32s(&out)).unwrap_or_else(|e| panic!("{kind}: {e}"));
}

#[test]
fn gpu_saxpy_from_ptx_and_cubin_matches_cpu() {
    if !gpu_tests_enabled("gpu_saxpy_from_ptx_and_cubin_matches_cpu") {
        return;
    }
    let dev = open();
    let n = (1 << 20) + 3;
    run_saxpy(&dev, PTX_SM70, CudaImageKind::Ptx, n);
    match the_cubin_for(&dev) {
        Some(cubin) => run_saxpy(&dev, cubin, CudaImageKind::Cubin, n),
        None => skip(
            "cubin part",
            &format!("no fixture cubin for {}", dev.info().arch()),
        ),
    }
}

#[test]
fn gpu_bad_input_gets_typed_errors() {
    if !gpu_tests_enabled("gpu_bad_input_gets_typed_errors") {
        return;
    }
    let dev = open();
    // Out of memory.
    let too_much = dev.info().total_memory.saturating_mul(4);
    match dev.alloc(too_much) {
        Err(CudaError::OutOfMemory { bytes, message, .. }) => {
            assert_eq!(bytes, too_much);
            assert!(!message.is_empty());
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    // An image for the wrong architecture only.
    if dev.info().compute_capability.0 >= 6 {
        match dev.load_module(CUBIN_SM52, CudaImageKind::Cubin) {
            Err(CudaError::ModuleLoad { code, name, .. }) => {
                assert_eq!(code, cuda::sys::CUDA_ERROR_NO_BINARY_FOR_GPU, "{name}");
            }
            other => panic!("expected ModuleLoad, got {other:?}"),
        }
    }
    // PTX newer than any driver.
    let future = String::from_utf8(PTX_SM70.to_vec())
        .unwrap()
        .replace(".version 7.8", ".version 99.9");
    match dev.load_module(future.as_bytes(), CudaImageKind::Ptx) {
        Err(CudaError::PtxTooNew { message, .. }) => assert!(!message.is_empty()),
        Err(CudaError::ModuleLoad { code, message, .. }) => {
            assert_eq!(code, cuda::sys::CUDA_ERROR_INVALID_PTX, "{message}");
        }
        other => panic!("expected PtxTooNew, got {other:?}"),
    }
    // Damaged images never reach the driver.
    match dev.load_module(&CUBIN_SM90[..200], CudaImageKind::Cubin) {
        Err(CudaError::MalformedImage { .. }) => {}
        other => panic!("expected MalformedImage, got {other:?}"),
    }
    // Unknown kernel.
    let m = dev.load_module(PTX_SM70, CudaImageKind::Ptx).unwrap();
    match m.function("no_such_kernel") {
        Err(CudaError::KernelNotFound { kernel, .. }) => assert_eq!(kernel, "no_such_kernel"),
        other => panic!("expected KernelNotFound, got {other:?}"),
    }
    // Copies outside a buffer.
    let mut b = dev.alloc(16).unwrap();
    assert!(matches!(
        b.copy_from_host(8, &[0; 16]),
        Err(CudaError::CopyOutOfBounds { .. })
    ));
}

/// Selection and loading through the `Backend` trait, with every fixture image registered
/// as the build would register them.
#[test]
fn gpu_backend_selects_and_launches() {
    if !gpu_tests_enabled("gpu_backend_selects_and_launches") {
        return;
    }
    let backend = CudaBackend::open(0).unwrap();
    let binaries = fixture_images();
    let images: Vec<RegisteredImage<'_>> = binaries
        .iter()
        .enumerate()
        .map(|(index, binary)| RegisteredImage {
            source: "gpu_cuda",
            index,
            module: "gpu_fixtures",
            binary,
        })
        .collect();
    let module = backend.load_module("gpu_fixtures", &images).unwrap();
    let cc = backend.device().info().compute_capability;
    let want = match cc {
        (8, _) => ("sm_80", ImageKind::Cubin),
        (9, _) => ("sm_90", ImageKind::Cubin),
        _ => ("sm_70", ImageKind::Ptx),
    };
    assert_eq!(
        (module.image().arch.as_str(), module.image().image_kind),
        want
    );

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
    let (mut nn, mut a, mut px, mut py) = (n as u32, 0.5f32, dx.0, dy.0);
    let params: [*mut c_void; 4] = [
        (&raw mut nn).cast(),
        (&raw mut a).cast(),
        (&raw mut px).cast(),
        (&raw mut py).cast(),
    ];
    // SAFETY: saxpy's four parameters, buffers of n floats alive until freed below (free
    // waits for the launch).
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
    check_saxpy(0.5, &x, &y, &f32s(&out)).unwrap();
    // SAFETY: both came from alloc_zeroed and are not used afterwards.
    unsafe {
        backend.free(dx).unwrap();
        backend.free(dy).unwrap();
    }
    assert!(matches!(
        module.kernel("nope"),
        Err(Error::KernelNotFound { .. })
    ));
    // SAFETY: deliberately a pointer the backend never gave out; it must refuse.
    assert!(unsafe { backend.copy_to_device(DevicePtr(0x1000), &[1, 2, 3]) }.is_err());

    // Only a cubin for the wrong architecture: an error naming both sides.
    let only_old = [RegisteredImage {
        source: "gpu_cuda",
        index: 0,
        module: "gpu_fixtures",
        binary: &binaries[0],
    }];
    match backend.load_module("gpu_fixtures", &only_old) {
        Err(Error::NoCompatibleImage { tried, device, .. }) => {
            assert!(tried.contains("sm_52"), "{tried}");
            assert!(device.contains(&format!("sm_{}{}", cc.0, cc.1)), "{device}");
        }
        other => panic!("expected NoCompatibleImage, got {other:?}"),
    }
}

/// The public API (`Device`, `DeviceBuffer`) over the CUDA backend, against the CPU device.
#[test]
fn gpu_device_buffers_round_trip_like_the_cpu() {
    if !gpu_tests_enabled("gpu_device_buffers_round_trip_like_the_cpu") {
        return;
    }
    let gpu = Device::from_backend(Box::new(CudaBackend::open(0).unwrap()));
    let cpu = Device::cpu();
    let data: Vec<u32> = (0..1_000_003u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let on_gpu = DeviceBuffer::from_slice(&gpu, &data)
        .unwrap()
        .to_vec()
        .unwrap();
    let on_cpu = DeviceBuffer::from_slice(&cpu, &data)
        .unwrap()
        .to_vec()
        .unwrap();
    assert_eq!(on_gpu, data);
    assert_eq!(on_gpu, on_cpu);
    let zeros = DeviceBuffer::<u64>::zeroed(&gpu, 4097)
        .unwrap()
        .to_vec()
        .unwrap();
    assert!(zeros.iter().all(|&z| z == 0));
    assert!(gpu.describe().starts_with("cuda:0 "), "{}", gpu.describe());
}

/// Queues `saxpy(n, a, x, y)` on `device` (a stream's device queues it on the stream).
fn queue_saxpy(device: &Device, n: u32, a: f32, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>) {
    let (mut nn, mut aa, mut px, mut py) = (n, a, x.device_ptr().0, y.device_ptr().0);
    let params: [*mut c_void; 4] = [
        (&raw mut nn).cast(),
        (&raw mut aa).cast(),
        (&raw mut px).cast(),
        (&raw mut py).cast(),
    ];
    // SAFETY: saxpy(unsigned, float, const float*, float*); both buffers hold n floats and
    // outlive the work (the callers synchronize before dropping them); the driver copies the
    // parameter values at the call.
    unsafe {
        device.launch_raw(
            "gpu_fixtures",
            "saxpy",
            &LaunchConfig::for_num_elems(n),
            &params,
        )
    }
    .unwrap();
}

/// Streams, events, page-locked copies and graphs on the GPU give the CPU device's results.
#[test]
fn gpu_streams_events_and_graphs() {
    if !gpu_tests_enabled("gpu_streams_events_and_graphs") {
        return;
    }
    register_fixtures();
    let gpu = Device::from_backend(Box::new(CudaBackend::open(0).unwrap()));
    let n = (1u32 << 20) + 7;
    // Small integers: every order of work gives the same bits.
    let x: Vec<f32> = (0..n).map(|i| (i % 13) as f32).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 5) as f32).collect();

    // Copies and launches in order on one stream, page-locked both ways.
    let stream = gpu.stream().unwrap();
    let px = offload_rt::PinnedBuffer::from_slice(&gpu, &x).unwrap();
    let py = offload_rt::PinnedBuffer::from_slice(&gpu, &y).unwrap();
    let mut out = offload_rt::PinnedBuffer::<f32>::zeroed(&gpu, n as usize).unwrap();
    let mut dx = DeviceBuffer::<f32>::zeroed(&gpu, n as usize).unwrap();
    let mut dy = DeviceBuffer::<f32>::zeroed(&gpu, n as usize).unwrap();
    let start = stream.record().unwrap();
    stream.copy_to_device(&mut dx, &px).unwrap();
    stream.copy_to_device(&mut dy, &py).unwrap();
    for a in [1.0, 2.0, 3.0] {
        queue_saxpy(stream.device(), n, a, &dx, &mut dy);
    }
    stream.copy_to_host(&mut out, &dy).unwrap();
    let end = stream.record().unwrap();
    let got = out.as_slice().unwrap();
    assert!((0..n as usize).all(|i| got[i] == y[i] + 6.0 * x[i]));
    assert!(end.query().unwrap());
    assert!(end.elapsed_since(&start).unwrap() > std::time::Duration::ZERO);

    // A second stream waits on the first one's event.
    let other = gpu.stream().unwrap();
    queue_saxpy(stream.device(), n, -6.0, &dx, &mut dy);
    let done = stream.record().unwrap();
    other.wait(&done).unwrap();
    other.copy_to_host(&mut out, &dy).unwrap();
    other.synchronize().unwrap();
    assert_eq!(out.as_slice().unwrap(), &y[..]);

    // A graph of four launches, replayed three times.
    stream.begin_capture().unwrap();
    for _ in 0..4 {
        queue_saxpy(stream.device(), n, 1.0, &dx, &mut dy);
    }
    let graph = stream.end_capture().unwrap();
    stream.synchronize().unwrap();
    assert_eq!(dy.to_vec().unwrap(), y, "recording ran nothing");
    for _ in 0..3 {
        // SAFETY: `dx` and `dy` outlive the replays, synchronized below.
        unsafe { stream.launch_graph(&graph) }.unwrap();
    }
    stream.synchronize().unwrap();
    let got = dy.to_vec().unwrap();
    assert!((0..n as usize).all(|i| got[i] == y[i] + 12.0 * x[i]));
    // New parameters, recorded into the same graph (updated in place on CUDA 12+).
    let mut graph = graph;
    stream.begin_capture().unwrap();
    for _ in 0..4 {
        queue_saxpy(stream.device(), n, -3.0, &dx, &mut dy);
    }
    stream.end_capture_into(&mut graph).unwrap();
    // SAFETY: as above.
    unsafe { stream.launch_graph(&graph) }.unwrap();
    stream.synchronize().unwrap();
    assert_eq!(dy.to_vec().unwrap(), y);

    // Every device is listed, this GPU first.
    let all = Device::all();
    assert_eq!(all[0].spec, "cuda:0");
    assert_eq!(
        all[0].arch,
        gpu.describe()
            .rsplit('(')
            .next()
            .unwrap()
            .trim_end_matches(')')
    );
}

/// A clustered launch on a GPU of compute capability 9.0 or later: every block reads its rank
/// in its cluster and the cluster's size from the hardware (`%cluster_ctarank`,
/// `%cluster_nctarank`), for clusters of 2 and 4 blocks, of 16 (non-portable, opted in by the
/// runtime), and of one (a plain launch). Elsewhere the launch is refused, named.
#[test]
fn gpu_clusters_group_blocks() {
    if !gpu_tests_enabled("gpu_clusters_group_blocks") {
        return;
    }
    let dev = open();
    let device = Device::from_backend(Box::new(CudaBackend::open(0).unwrap()));
    if !device.supports_clusters() {
        let config = LaunchConfig::linear(2, 64).with_cluster((2, 1, 1));
        let module = dev.load_module(PTX_SM70, CudaImageKind::Ptx).unwrap();
        let f = module.function("empty").unwrap();
        // SAFETY: empty() takes no parameters.
        let err = unsafe { dev.launch(&f, &LaunchArgs::new("empty", config, &[])) }.unwrap_err();
        assert!(err.to_string().contains("compute capability 9.0"), "{err}");
        skip(
            "gpu_clusters_group_blocks",
            &format!("{} has no thread-block clusters", dev.info().arch()),
        );
        return;
    }
    let module = dev
        .load_module(CLUSTERS_SM90, CudaImageKind::Cubin)
        .unwrap();
    let f = module.function("cluster_ranks").unwrap();
    let blocks = 32u32;
    for cluster in [1u32, 2, 4, 16] {
        let mut out = dev.alloc(blocks as usize * 8).unwrap();
        out.copy_from_host(0, &[0xffu8; 256]).unwrap();
        let mut p = out.device_ptr();
        let params: [*mut c_void; 1] = [(&raw mut p).cast()];
        let config = LaunchConfig::linear(blocks, 64).with_cluster((cluster, 1, 1));
        // SAFETY: cluster_ranks(unsigned*): one pointer to 2 words a block, alive until the
        // synchronize below.
        unsafe { dev.launch(&f, &LaunchArgs::new("cluster_ranks", config, &params)) }
            .unwrap_or_else(|e| panic!("clusters of {cluster}: {e}"));
        dev.synchronize().unwrap();
        let mut bytes = [0u8; 256];
        out.copy_to_host(0, &mut bytes).unwrap();
        let words: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
            .collect();
        for block in 0..blocks {
            let (rank, size) = (words[2 * block as usize], words[2 * block as usize + 1]);
            assert_eq!(
                (rank, size),
                (block % cluster, cluster),
                "clusters of {cluster}: block {block}"
            );
        }
    }
}
