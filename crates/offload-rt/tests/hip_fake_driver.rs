//! The HIP backend against a stand-in runtime (tests/fixtures/fake-hip) that keeps the rules a
//! machine with an AMD GPU would: a device made current per thread, consistent device
//! properties, code objects only, empty grids refused, streams and graphs. Runs everywhere;
//! one test, because the runtime library is chosen once per process through
//! `OFFLOAD_HIP_LIBRARY`.

mod fake_driver;

use offload_format::{ImageKind, OffloadBinary, OffloadKind};
use offload_rt::__internal::Backend;
use offload_rt::__internal::hip::{self, HipBackend, HipDevice, HipError, HipImageKind};
use offload_rt::{Device, DeviceBuffer, DeviceKind, Error, LaunchConfig, RawDevice};

#[test]
fn the_hip_backend_keeps_the_runtimes_rules() {
    let library = fake_driver::build("fake-hip");
    // SAFETY: the only test of this process, and no thread reads the environment yet.
    unsafe {
        std::env::set_var("OFFLOAD_HIP_LIBRARY", &library);
        std::env::set_var("OFFLOAD_KERNEL_STACK", "24K");
    }

    // The device as the properties describe it, cross-checked against the other calls.
    let devices = hip::probe().unwrap();
    assert_eq!(devices.len(), 2);
    assert_eq!(devices[0].name, "Fake AMD GPU");
    assert_eq!(devices[0].target_id, "gfx90a:sramecc+:xnack-");
    assert_eq!(devices[0].compute_units, 104);

    // Work on another thread makes the device current there first.
    let dev = HipDevice::open(0).unwrap();
    // The stack a GPU thread gets is set when the device opens.
    let stack_limit = fake_driver::counter(&library, "fake_hip_stack_limit");
    assert_eq!(stack_limit(), 24 * 1024);
    assert!(matches!(
        dev.alloc(128 << 30),
        Err(HipError::OutOfMemory {
            free: Some(0x2000_0000),
            ..
        })
    ));
    let moved = dev.clone();
    std::thread::spawn(move || {
        let mut b = moved.alloc(8).unwrap();
        b.copy_from_host(0, &[7; 8]).unwrap();
        let mut back = [0u8; 8];
        b.copy_to_host(0, &mut back).unwrap();
        assert_eq!(back, [7; 8]);
    })
    .join()
    .unwrap();

    // Only code objects load; kernels are found by name.
    let module = dev
        .load_module(&fake_driver::amd_code_object(), HipImageKind::CodeObject)
        .unwrap();
    module.function("k").unwrap();
    assert!(matches!(
        module.function("missing"),
        Err(HipError::KernelNotFound { .. })
    ));
    assert!(matches!(
        dev.load_module(b"\x7fELF\x02\x01", HipImageKind::CodeObject),
        Err(HipError::MalformedImage { .. })
    ));

    // Through `Device`: selection by target ID, launches, streams and a graph.
    let binary = OffloadBinary::new(
        ImageKind::Object,
        OffloadKind::Hip,
        &*fake_driver::amd_code_object().leak(),
    )
    .with_string("triple", "amdgcn-amd-amdhsa")
    .with_string("arch", "gfx90a")
    .with_string("offload.module", "fake")
    .with_string("offload.kernels", "k");
    fake_driver::register(&binary);
    let backend = HipBackend::open(0).unwrap();
    assert_eq!(backend.kind(), DeviceKind::Hip);
    // The peak figures from HIP's attributes: 104 compute units of 64 FP32 lanes at 1.7 GHz,
    // memory at 1.6 GHz over 4096 bits.
    let peaks = backend.peaks().unwrap();
    assert_eq!(peaks.flops_per_second, 104.0 * 64.0 * 2.0 * 1.7e9);
    assert_eq!(peaks.bytes_per_second, 1.6e9 * 2.0 * 512.0);
    let device = Device::from_backend(Box::new(backend));
    assert_eq!(
        device.describe(),
        "hip:0 Fake AMD GPU (gfx90a:sramecc+:xnack-)"
    );
    let launches = fake_driver::counter(&library, "fake_hip_launches");
    let before = launches();
    // SAFETY: the stand-in runs nothing; the kernel takes no parameters.
    unsafe { device.launch_raw("fake", "k", &LaunchConfig::linear(2, 64), &[]) }.unwrap();
    assert_eq!(launches() - before, 1);
    // An empty grid runs nothing and succeeds, as on every device.
    // SAFETY: as above.
    unsafe { device.launch_raw("fake", "k", &LaunchConfig::linear(0, 64), &[]) }.unwrap();
    assert_eq!(launches() - before, 1);
    // SAFETY: as above.
    let err =
        unsafe { device.launch_raw("fake", "k", &LaunchConfig::linear(1, 0), &[]) }.unwrap_err();
    assert!(matches!(err, Error::InvalidLaunch { .. }), "{err}");

    // The block size is the runtime's `hipModuleOccupancyMaxPotentialBlockSize`, not one
    // computed from the code object, which has no metadata note (that would give 256).
    let potential = fake_driver::counter(&library, "fake_hip_potential_block_size")();
    assert_eq!(potential, 448);
    assert_eq!(device.best_block_size("fake", "k", 0).unwrap(), potential);
    let config = LaunchConfig::for_num_elems_on(&device, "fake", "k", 1000).unwrap();
    assert_eq!((config.grid, config.block), ((3, 1, 1), (potential, 1, 1)));
    // Over 32 KiB of dynamic LDS the stand-in finds no block that fits (it answers 0): the
    // runtime computes, and with nothing to compute from takes 256.
    assert_eq!(device.best_block_size("fake", "k", 48 << 10).unwrap(), 256);

    // A cooperative launch: the occupancy times the 104 compute units, checked before the
    // driver's cooperative launch.
    let cooperative = fake_driver::counter(&library, "fake_hip_cooperative_launches");
    assert_eq!(
        device.max_cooperative_blocks("fake", "k", 64, 0).unwrap(),
        208
    );
    let grid = offload_rt::__private::GRID_PLACEHOLDER;
    let params = [(&raw const grid).cast_mut().cast()];
    for (blocks, runs) in [(208, true), (209, false)] {
        let launch =
            offload_rt::__private::LaunchArgs::new("k", LaunchConfig::linear(blocks, 64), &params)
                .in_module("fake")
                .with_sizes(&[8])
                .cooperative();
        let (before, cooperative_before) = (launches(), cooperative());
        // SAFETY: the stand-in runs nothing.
        let result = unsafe { device.launch_args(&launch) };
        assert_eq!(result.is_ok(), runs, "{blocks} blocks: {result:?}");
        let ran = u32::from(runs);
        assert_eq!(
            (launches() - before, cooperative() - cooperative_before),
            (ran, ran)
        );
        if !runs {
            assert!(matches!(
                result.unwrap_err(),
                Error::CooperativeGridTooLarge {
                    max: 208,
                    blocks: 209,
                    ..
                }
            ));
        }
    }

    // AMD GPUs have no thread-block clusters: a clustered launch is refused before the driver.
    assert!(!device.supports_clusters());
    let no_params: [*mut std::ffi::c_void; 0] = [];
    let clustered = offload_rt::__private::LaunchArgs::new(
        "k",
        LaunchConfig::linear(2, 64).with_cluster((2, 1, 1)),
        &no_params,
    )
    .in_module("fake")
    .with_sizes(&[]);
    let before = launches();
    // SAFETY: the stand-in runs nothing.
    let err = unsafe { device.launch_args(&clustered) }.unwrap_err();
    assert!(
        matches!(&err, Error::InvalidLaunch { kernel, reason }
            if kernel == "k" && reason.contains("HIP devices have no thread-block clusters")),
        "{err}"
    );
    assert_eq!(launches(), before);

    let stream = device.stream().unwrap();
    // The driver's handles for a library on the same device: the ordinal, and each stream's.
    assert_eq!(device.raw(), RawDevice::Hip { ordinal: 0 });
    assert!(!device.raw_stream().is_null());
    assert!(!stream.device().raw_stream().is_null());
    let start = stream.record().unwrap();
    fake_driver::check_streams_and_graphs(&device, &stream, launches, 1);
    let end = stream.record().unwrap();
    assert!(end.elapsed_since(&start).unwrap() > std::time::Duration::ZERO);
    assert!(Device::all().iter().any(|d| d.spec == "hip:1"));

    // Between two GPUs, a peer copy; with the CPU device, staged through host memory.
    let peer_copies = fake_driver::counter(&library, "fake_hip_peer_copies");
    let second = Device::from_spec("hip:1").unwrap();
    let data: Vec<u64> = (0..1000).collect();
    let on_second = DeviceBuffer::from_slice(&second, &data).unwrap();
    let mut on_first = DeviceBuffer::<u64>::zeroed(&device, 1000).unwrap();
    on_first.copy_from_buffer(&on_second).unwrap();
    assert_eq!(peer_copies(), 1);
    assert_eq!(on_first.to_vec().unwrap(), data);
    let mut on_cpu = DeviceBuffer::<u64>::zeroed(&Device::cpu(), 1000).unwrap();
    on_cpu.copy_from_buffer(&on_second).unwrap();
    assert_eq!(on_cpu.to_vec().unwrap(), data);
    assert_eq!(peer_copies(), 1);
    let mut short = DeviceBuffer::<u64>::zeroed(&device, 999).unwrap();
    assert!(matches!(
        short.copy_from_buffer(&on_second),
        Err(Error::LengthMismatch { .. })
    ));
}
