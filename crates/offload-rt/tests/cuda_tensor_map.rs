//! Tensor maps against the stand-in CUDA driver (tests/fixtures/fake-cuda, whose
//! `cuTensorMapEncodeTiled` writes what it was given where the test reads it back): a map of a
//! buffer lands in device memory as the driver encoded it, the accelerator's rules are checked
//! before the driver with the rule named, and devices without the accelerator refuse. One test,
//! because the driver library is chosen once per process through `OFFLOAD_CUDA_LIBRARY`.

mod fake_driver;

use offload_rt::__internal::cuda::CudaBackend;
use offload_rt::kernel::half::f16;
use offload_rt::{Device, DeviceBuffer, Error, TensorMapLayout, TensorMapSwizzle};

#[test]
fn tensor_maps_are_encoded_by_the_driver_into_device_memory() {
    let library = fake_driver::build("fake-cuda");
    // SAFETY: the only test of this process, and no thread reads the environment yet.
    unsafe { std::env::set_var("OFFLOAD_CUDA_LIBRARY", &library) };
    let device = Device::from_backend(Box::new(CudaBackend::open(0).unwrap()));
    let a = DeviceBuffer::<f16>::zeroed(&device, 256 * 128).unwrap();
    let layout = TensorMapLayout {
        rows: 256,
        cols: 128,
        row_stride: 128,
        box_rows: 128,
        box_cols: 64,
        swizzle: TensorMapSwizzle::Bytes128,
    };
    let map = a.tensor_map_2d(layout).unwrap();
    assert_eq!(map.len(), 1);
    let words = map.to_vec().unwrap()[0].words;
    assert_eq!(words[0], a.device_ptr().0, "the buffer's address");
    assert_eq!((words[1], words[2]), (128, 256), "columns first, then rows");
    assert_eq!(words[3], 256, "the row stride in bytes");
    assert_eq!(words[4], 64 | 128 << 32, "the box, columns first");
    // FLOAT16, the 128-byte swizzle, L2 promotion of 128 bytes.
    assert_eq!(words[5], 6 | 3 << 8 | 2 << 16);

    let f32s = DeviceBuffer::<f32>::zeroed(&device, 64 * 64).unwrap();
    let map = f32s
        .tensor_map_2d(TensorMapLayout {
            rows: 64,
            cols: 64,
            row_stride: 64,
            box_rows: 64,
            box_cols: 32,
            swizzle: TensorMapSwizzle::Bytes128,
        })
        .unwrap();
    assert_eq!(map.to_vec().unwrap()[0].words[5] & 0xff, 7, "FLOAT32");

    // A box past what the swizzle spans, and a tensor past the buffer, never reach the driver.
    for (bad, wanted) in [
        (
            TensorMapLayout {
                box_cols: 128,
                ..layout
            },
            "256 bytes, more than the 128 bytes its swizzle spans",
        ),
        (
            TensorMapLayout {
                rows: 512,
                ..layout
            },
            "reach past the buffer's 32768",
        ),
    ] {
        match a.tensor_map_2d(bad) {
            Err(e @ Error::TensorMap { .. }) => {
                assert!(e.to_string().contains(wanted), "{e}");
                assert!(e.to_string().contains("Fake GPU"), "{e}");
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }

    // The CPU device has no tensor memory accelerator.
    let cpu = Device::cpu();
    let on_cpu = DeviceBuffer::<f16>::zeroed(&cpu, 256 * 128).unwrap();
    match on_cpu.tensor_map_2d(layout) {
        Err(e @ Error::TensorMap { .. }) => {
            assert!(e.to_string().contains("kernel::has_tma()"), "{e}");
            assert_eq!(e.code(), "OFF3038");
        }
        other => panic!("the CPU device made a tensor map: {other:?}"),
    }
}
