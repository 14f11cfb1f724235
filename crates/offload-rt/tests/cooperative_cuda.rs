//! Cooperative launches (kernels taking a `Grid`) on the CUDA backend against the stand-in
//! driver (tests/fixtures/fake-cuda): `cuLaunchCooperativeKernel`, the grid checked against
//! the occupancy calculator, and each stream's grid barrier word passed as the `Grid`. One
//! test, because the driver library is chosen once per process through
//! `OFFLOAD_CUDA_LIBRARY`.

mod fake_driver;

use std::ffi::c_void;

use offload_format::offload_binary::{KEY_KERNEL_PARAMS, encode_kernel_params};
use offload_format::{ImageKind, OffloadBinary, OffloadKind};
use offload_rt::__private::LaunchArgs;
use offload_rt::{Device, Error, LaunchConfig};

/// A cooperative kernel as the NVIDIA device link writes it: the `Grid` (8 bytes) first.
const PTX: &str = "\
.version 8.7
.target sm_80
.address_size 64

.visible .entry phases(
\t.param .align 8 .b8 phases_param_0[8],
\t.param .u32 phases_param_1
)
{
\tret;
}
";

/// The grid barrier address and the count the stand-in saw at the last launch.
fn last_launch(library: &std::path::Path) -> (u64, u32) {
    let text = fake_driver::last_entry_launch(library);
    let hex = text.strip_prefix("phases ").expect(&text);
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    assert_eq!(bytes.len(), 12, "{text}");
    (
        u64::from_le_bytes(bytes[..8].try_into().unwrap()),
        u32::from_le_bytes(bytes[8..].try_into().unwrap()),
    )
}

/// Launches `phases` cooperatively on `device` with `blocks` blocks, as the typed handle of a
/// kernel taking `(grid: Grid, n: u32)` does.
fn launch(device: &Device, blocks: u32, n: u32) -> offload_rt::Result<()> {
    let grid = offload_rt::__private::GRID_PLACEHOLDER;
    let params = [
        (&raw const grid).cast_mut().cast::<c_void>(),
        (&raw const n).cast_mut().cast::<c_void>(),
    ];
    let sizes = [8, 4];
    let launch = LaunchArgs::new("phases", LaunchConfig::linear(blocks, 64), &params)
        .in_module("coop")
        .with_sizes(&sizes)
        .cooperative();
    // SAFETY: the stand-in runs nothing; the values are the kernel's parameters.
    unsafe { device.launch_args(&launch) }.map(|_| ())
}

#[test]
fn cooperative_launches_get_a_zeroed_barrier_per_stream_and_refuse_oversized_grids() {
    let library = fake_driver::build("fake-cuda");
    // SAFETY: the only test of this process, and no thread reads the environment yet.
    unsafe { std::env::set_var("OFFLOAD_CUDA_LIBRARY", &library) };
    let params = offload_format::image::ptx::kernel_params(PTX);
    let binary = OffloadBinary::new(ImageKind::Ptx, OffloadKind::Cuda, PTX.as_bytes())
        .with_string("triple", "nvptx64-nvidia-cuda")
        .with_string("arch", "sm_80")
        .with_string("offload.module", "coop")
        .with_string("offload.kernels", "phases")
        .with_string(KEY_KERNEL_PARAMS, encode_kernel_params(&params));
    fake_driver::register(&binary);

    let device = Device::from_spec("cuda:0").unwrap();
    let launches = fake_driver::counter(&library, "fake_cuda_launches");
    let cooperative = fake_driver::counter(&library, "fake_cuda_cooperative_launches");

    // The occupancy calculator's blocks per multiprocessor times the one multiprocessor.
    assert_eq!(
        device
            .max_cooperative_blocks("coop", "phases", 64, 0)
            .unwrap(),
        2
    );
    let err = device
        .max_cooperative_blocks("coop", "phases", 2048, 0)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidLaunch { .. }), "{err}");

    launch(&device, 2, 7).unwrap();
    assert_eq!((launches(), cooperative()), (1, 1));
    let (barrier, n) = last_launch(&library);
    assert_eq!(n, 7, "the launch's own arguments follow the grid");
    assert_ne!(
        barrier, 0,
        "the Grid is the stream's barrier word, not the placeholder"
    );
    device.synchronize().unwrap();
    // SAFETY: the stand-in's device memory is host memory; the word is 4 live bytes.
    let word = unsafe { *std::ptr::with_exposed_provenance::<u32>(barrier as usize) };
    assert_eq!(word, 0, "the barrier word starts zeroed");

    // The same stream keeps its word; another stream has its own.
    launch(&device, 1, 8).unwrap();
    assert_eq!(last_launch(&library), (barrier, 8));
    let stream = device.stream().unwrap();
    launch(stream.device(), 2, 9).unwrap();
    stream.synchronize().unwrap();
    let (other, n) = last_launch(&library);
    assert_eq!(n, 9);
    assert_ne!(other, barrier, "each stream has its own barrier word");
    assert_eq!(cooperative(), 3);

    // More blocks than stay resident: refused before the driver, with the figures.
    let err = launch(&device, 3, 1).unwrap_err();
    match &err {
        Error::CooperativeGridTooLarge {
            kernel,
            blocks,
            max,
            ..
        } => assert_eq!((kernel.as_str(), *blocks, *max), ("phases", 3, 2)),
        other => panic!("expected CooperativeGridTooLarge, got {other:?}"),
    }
    assert!(err.to_string().contains("at most 2"), "{err}");
    assert_eq!(
        (launches(), cooperative()),
        (3, 3),
        "nothing reached the driver"
    );
}
