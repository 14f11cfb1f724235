//! The CUDA backend against a stand-in driver (tests/fixtures/fake-cuda) that enforces the
//! driver's rules a GPU machine would: the current context, pageable host copies, the
//! dynamic shared-memory opt-in, empty grids, streams and graphs, a kernel's fault. Runs
//! everywhere; one test, because the driver library is chosen once per process through
//! `OFFLOAD_CUDA_LIBRARY`.

mod fake_driver;

use std::ffi::c_void;

use offload_rt::__internal::cuda::{self, CudaBackend, CudaDevice, CudaError, CudaImageKind};
use offload_rt::__internal::{Backend, KernelHandle, LaunchArgs};
use offload_rt::{Device, DeviceBuffer, Error, LaunchConfig, RawDevice};

const PTX: &[u8] = b".version 7.8\n.target sm_80\n.address_size 64\n";

/// What another library on the thread (cuBLAS, the runtime API) does: make its own context
/// current.
fn switch_to_another_context() {
    let api = cuda::sys::api().unwrap();
    // SAFETY: the stand-in driver takes any handle as a context.
    let code = unsafe { (api.cuCtxSetCurrent)(std::ptr::without_provenance_mut(0x9999)) };
    assert_eq!(code, 0);
}

#[test]
fn the_cuda_backend_keeps_the_drivers_rules() {
    let library = fake_driver::build("fake-cuda");
    // SAFETY: the only test of this process, and no thread reads the environment yet.
    unsafe {
        std::env::set_var("OFFLOAD_CUDA_LIBRARY", &library);
        std::env::set_var("OFFLOAD_KERNEL_STACK", "24K");
    }

    let dev = CudaDevice::open(0).unwrap();
    // The stack a GPU thread gets is set when the device opens.
    let stack_limit = fake_driver::counter(&library, "fake_cuda_stack_limit");
    assert_eq!(stack_limit(), 24 * 1024);
    assert_eq!(dev.info().name, "Fake GPU");

    // More than the device has: the driver's code becomes a typed error with the free memory.
    assert!(matches!(
        dev.alloc(2 << 30),
        Err(CudaError::OutOfMemory {
            bytes: 0x8000_0000,
            free: Some(0x2000_0000),
            ..
        })
    ));

    // A host-to-device copy has read its source when it returns.
    let mut buffer = dev.alloc(16).unwrap();
    let mut source = vec![1u8; 16];
    buffer.copy_from_host(0, &source).unwrap();
    source.fill(9);
    let mut back = [0u8; 16];
    buffer.copy_to_host(0, &mut back).unwrap();
    assert_eq!(back, [1; 16], "the copy read its source after returning");

    // Another context made current in between is noticed.
    switch_to_another_context();
    buffer.copy_from_host(0, &[2; 16]).unwrap();
    switch_to_another_context();
    buffer.copy_to_host(0, &mut back).unwrap();
    assert_eq!(back, [2; 16]);

    // Dynamic shared memory over 48 KiB opts in; over the device's maximum it is refused.
    let module = dev.load_module(PTX, CudaImageKind::Ptx).unwrap();
    let k = module.function("k").unwrap();
    switch_to_another_context();
    let launch_with_shared = |shared_mem_bytes: u32| {
        let config = LaunchConfig {
            grid: (1, 1, 1),
            block: (64, 1, 1),
            shared_mem_bytes,
            cluster: (1, 1, 1),
        };
        // SAFETY: the stand-in driver runs nothing; the kernel takes no parameters.
        unsafe { dev.launch(&k, &LaunchArgs::new("k", config, &[])) }
    };
    launch_with_shared(96 * 1024).unwrap();
    let err = launch_with_shared(98 * 1024).unwrap_err();
    match err {
        CudaError::SharedMemoryLimit { kernel, reason } => {
            assert_eq!(kernel, "k");
            assert!(
                reason.contains("101376 bytes this device gives a block"),
                "{reason}"
            );
        }
        other => panic!("{other}"),
    }

    // Through the `Backend` trait: an empty grid runs nothing and succeeds, as on the CPU;
    // an invalid block is the same typed error as on the CPU.
    let backend = CudaBackend::open(0).unwrap();
    let binary = fake_driver::fake_ptx_image(PTX, "sm_80", "k,trap");
    let module = fake_driver::load_fake_module(&backend, "cuda_fake_driver", &binary);
    let handle: KernelHandle = module.kernel("k").unwrap();
    let params: [*mut c_void; 0] = [];
    for grid in [(0, 1, 1), (1, 0, 1), (1, 1, 0)] {
        let config = LaunchConfig {
            grid,
            ..LaunchConfig::linear(1, 64)
        };
        // SAFETY: the stand-in driver runs nothing; the kernel takes no parameters.
        unsafe { module.launch(handle, &LaunchArgs::new("k", config, &params)) }.unwrap();
    }
    // SAFETY: as above.
    let err = unsafe {
        module.launch(
            handle,
            &LaunchArgs::new("k", LaunchConfig::linear(1, 0), &params),
        )
    }
    .unwrap_err();
    match err {
        Error::InvalidLaunch { kernel, reason } => {
            assert_eq!(kernel, "k");
            assert_eq!(Some(reason), LaunchConfig::linear(1, 0).check().err());
        }
        other => panic!("{other}"),
    }
    // SAFETY: as above.
    unsafe {
        module.launch(
            handle,
            &LaunchArgs::new("k", LaunchConfig::linear(2, 64), &params),
        )
    }
    .unwrap();
    // The stand-in is a compute capability 8.0 device: no clusters.
    assert!(!backend.supports_clusters());
    // SAFETY: as above.
    let err = unsafe {
        module.launch(
            handle,
            &LaunchArgs::new(
                "k",
                LaunchConfig::linear(2, 64).with_cluster((2, 1, 1)),
                &params,
            ),
        )
    }
    .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidLaunch { kernel, reason }
            if kernel == "k" && reason.contains("compute capability 9.0") && reason.contains("is 8.0")),
        "{err}"
    );

    // Streams: page-locked copies round-trip through a stream, and a captured graph replays
    // as many launches as were recorded, each time.
    fake_driver::register(&binary);
    let device = Device::from_backend(Box::new(CudaBackend::open(0).unwrap()));
    let launches = fake_driver::counter(&library, "fake_cuda_launches");

    // The block size is the driver's `cuOccupancyMaxPotentialBlockSize`, not one computed
    // from the image, which records no `ptxas -v` figures (that would give 256).
    let potential = fake_driver::counter(&library, "fake_cuda_potential_block_size")();
    assert_eq!(potential, 512);
    assert_eq!(device.best_block_size("fake", "k", 0).unwrap(), potential);
    let config = LaunchConfig::for_num_elems_on(&device, "fake", "k", 1000).unwrap();
    assert_eq!((config.grid, config.block), ((2, 1, 1), (potential, 1, 1)));
    // Over 48 KiB of dynamic shared memory the stand-in finds no block that fits (it answers
    // 0): the runtime computes, and without figures takes 256.
    assert_eq!(device.best_block_size("fake", "k", 64 << 10).unwrap(), 256);
    let stream = device.stream().unwrap();
    fake_driver::check_streams_and_graphs(&device, &stream, launches, 2);

    // The driver's handles, for a library working on the same device and stream: the primary
    // context, and the stream the launches are queued on (the stand-in numbers its streams
    // from 0x2000).
    assert_eq!(
        device.raw(),
        RawDevice::Cuda {
            ordinal: 0,
            context: std::ptr::without_provenance_mut(0x1000),
        }
    );
    assert!(device.raw_stream().addr() >= 0x2000);
    assert!(stream.device().raw_stream().addr() >= 0x2000);
    assert_ne!(stream.device().raw_stream(), device.raw_stream());
    // Memory allocated by another owner, wrapped: copies reach it, and dropping the buffer
    // leaves it allocated (the stand-in counts frees).
    let frees = fake_driver::counter(&library, "fake_cuda_frees");
    let theirs = DeviceBuffer::<u32>::zeroed(&device, 4).unwrap();
    {
        // SAFETY: `theirs` holds 4 `u32`s of this device and outlives the wrapper.
        let mut wrapped =
            unsafe { DeviceBuffer::<u32>::from_raw_parts(&device, theirs.device_ptr(), 4) };
        wrapped.copy_from(&[1, 2, 3, 4]).unwrap();
        let before = frees();
        drop(wrapped);
        assert_eq!(frees(), before, "a wrapped buffer frees nothing");
    }
    assert_eq!(theirs.to_vec().unwrap(), [1, 2, 3, 4]);
    drop(theirs);
    // Another owner's stream wrapped: launches and copies queue on it, and dropping the
    // wrapper leaves it to its owner.
    let destroys = fake_driver::counter(&library, "fake_cuda_stream_destroys");
    let before = destroys();
    // SAFETY: the device's own stream, alive while `device` is.
    let theirs = unsafe { device.stream_from_raw(device.raw_stream()) }.unwrap();
    assert_eq!(theirs.device().raw_stream(), device.raw_stream());
    fake_driver::check_streams_and_graphs(&device, &theirs, launches, 1);
    drop(theirs);
    assert_eq!(destroys(), before, "a wrapped stream is not destroyed");

    // A kernel's fault comes back from the next call, here a copy, as a typed error naming
    // the device and the kernel launched last; later calls report the device lost by it. A
    // trap without a report is this too: what a panic gives with `panic = "trap"`,
    // `CUDA_ERROR_LAUNCH_FAILED`.
    let buffer = DeviceBuffer::<u32>::zeroed(&device, 4).unwrap();
    drop(stream);
    // SAFETY: the stand-in driver runs nothing; the kernels take no parameters.
    unsafe { device.launch_raw("fake", "k", &LaunchConfig::linear(1, 32), &[]) }.unwrap();
    // SAFETY: as above.
    unsafe { device.launch_raw("fake", "trap", &LaunchConfig::linear(1, 32), &[]) }.unwrap();
    let err = buffer.to_vec().unwrap_err();
    {
        match &err {
            Error::KernelFault {
                device: on,
                kernel,
                code,
                ..
            } => {
                assert_eq!(on, "cuda:0 Fake GPU (sm_80)");
                assert_eq!(kernel.as_deref(), Some("fake::trap"));
                assert_eq!(*code, 719);
            }
            other => panic!("expected a kernel fault, got {other:?}"),
        }
        assert!(
            err.to_string().starts_with(
                "kernel fault on cuda:0 Fake GPU (sm_80) in or after kernel `fake::trap`: "
            ),
            "{err}"
        );
    }
    match device.synchronize().unwrap_err() {
        Error::DeviceLost { device: on, cause } => {
            assert_eq!(on, "cuda:0 Fake GPU (sm_80)");
            assert!(cause.contains("(719)"), "{cause}");
        }
        other => panic!("expected the device lost, got {other:?}"),
    }
    // Asking the driver for a block size on the lost device is the same typed error.
    assert!(matches!(
        device.best_block_size("fake", "k", 0),
        Err(Error::DeviceLost { .. })
    ));
}
