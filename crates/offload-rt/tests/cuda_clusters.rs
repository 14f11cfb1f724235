//! Thread-block clusters against the stand-in CUDA driver (tests/fixtures/fake-cuda) made a
//! compute capability 9.0 device: a clustered grid goes through `cuLaunchKernelEx` with the
//! cluster's shape, a cluster of more than 8 blocks opts the kernel in to non-portable sizes
//! first, a plain grid keeps `cuLaunchKernel`, and the shapes no device runs are refused
//! before the driver, naming the kernel; the device's peak figures come from its attributes.
//! One test, because the driver library is chosen once
//! per process through `OFFLOAD_CUDA_LIBRARY`.

mod fake_driver;

use std::ffi::c_void;

use offload_rt::__internal::cuda::CudaBackend;
use offload_rt::__internal::{Backend, KernelHandle, LaunchArgs};
use offload_rt::{Device, Error, LaunchConfig};

const PTX: &[u8] = b".version 8.0\n.target sm_90a\n.address_size 64\n";

/// The stand-in's record of a cluster: its blocks in x, y and z, a byte each.
fn packed(x: u32, y: u32, z: u32) -> u32 {
    x | y << 8 | z << 16
}

#[test]
fn clustered_grids_launch_through_cu_launch_kernel_ex() {
    let library = fake_driver::build("fake-cuda");
    // SAFETY: the only test of this process, and no thread reads the environment yet.
    unsafe {
        std::env::set_var("OFFLOAD_CUDA_LIBRARY", &library);
        std::env::set_var("FAKE_CUDA_COMPUTE_MAJOR", "9");
    }
    let clusters = fake_driver::counter(&library, "fake_cuda_cluster_launches");
    let last_cluster = fake_driver::counter(&library, "fake_cuda_last_cluster");
    let launches = fake_driver::counter(&library, "fake_cuda_launches");

    let device = Device::from_backend(Box::new(CudaBackend::open(0).unwrap()));
    assert!(device.supports_clusters());

    // The peak figures from the attributes: one SM of 128 FP32 lanes at 1.98 GHz, memory at
    // 2.619 GHz over 5120 bits.
    let backend = CudaBackend::open(0).unwrap();
    let peaks = backend.peaks().unwrap();
    assert_eq!(peaks.flops_per_second, 128.0 * 2.0 * 1.98e9);
    assert_eq!(peaks.bytes_per_second, 2.619e9 * 2.0 * 640.0);

    let binary = fake_driver::fake_ptx_image(PTX, "sm_90a", "k");
    let module = fake_driver::load_fake_module(&backend, "cuda_clusters", &binary);
    let handle: KernelHandle = module.kernel("k").unwrap();
    let params: [*mut c_void; 0] = [];
    // SAFETY: the stand-in driver runs nothing; the kernel takes no parameters.
    let launch = |config: LaunchConfig| unsafe {
        module.launch(handle, &LaunchArgs::new("k", config, &params))
    };

    // A plain grid keeps the plain launch.
    launch(LaunchConfig::linear(4, 128)).unwrap();
    assert_eq!((clusters(), launches()), (0, 1));

    // Clusters of 2 blocks along x, then 2×2×2.
    launch(LaunchConfig::linear(4, 128).with_cluster((2, 1, 1))).unwrap();
    assert_eq!(
        (clusters(), last_cluster(), launches()),
        (1, packed(2, 1, 1), 2)
    );
    let cube = LaunchConfig {
        grid: (4, 4, 2),
        ..LaunchConfig::linear(1, 64)
    };
    launch(cube.with_cluster((2, 2, 2))).unwrap();
    assert_eq!((clusters(), last_cluster()), (2, packed(2, 2, 2)));

    // 16 blocks: past the portable 8, the kernel is opted in first (the stand-in refuses it
    // otherwise).
    launch(LaunchConfig::linear(32, 128).with_cluster((16, 1, 1))).unwrap();
    assert_eq!((clusters(), last_cluster()), (3, packed(16, 1, 1)));

    // Shapes no device runs are refused before the driver, naming the kernel.
    for (config, words) in [
        (
            LaunchConfig::linear(6, 128).with_cluster((4, 1, 1)),
            "whole number of clusters",
        ),
        (
            LaunchConfig::linear(32, 128).with_cluster((32, 1, 1)),
            "more than 16 blocks",
        ),
    ] {
        let err = launch(config).unwrap_err();
        match &err {
            Error::InvalidLaunch { kernel, reason } => {
                assert_eq!(kernel, "k");
                assert!(reason.contains(words), "{config:?}: {reason}");
            }
            other => panic!("{config:?}: {other}"),
        }
    }
    assert_eq!(clusters(), 3, "nothing refused reached the driver");

    // A cooperative launch with clusters is refused, named.
    let mut grid_word = 0u64;
    let cooperative_params = [(&raw mut grid_word).cast::<c_void>()];
    // SAFETY: as above; the first parameter is the grid's placeholder.
    let err = unsafe {
        module.launch(
            handle,
            &LaunchArgs::new(
                "k",
                LaunchConfig::linear(2, 64).with_cluster((2, 1, 1)),
                &cooperative_params,
            )
            .cooperative(),
        )
    }
    .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidLaunch { kernel, reason }
            if kernel == "k" && reason.contains("cooperative")),
        "{err}"
    );
    assert_eq!(clusters(), 3);
}
