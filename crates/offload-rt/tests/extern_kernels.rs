//! Kernels launched by symbol name (`extern_kernels!`) on the CPU device: the runtime's fixture
//! image registered by hand under module names of this test, one of them recording parameter
//! sizes (`offload.kernel-params`) as the build does for CUDA and HIP images, beside a PTX
//! image the CPU does not run.

mod cpu_common;

use std::borrow::Cow;

use offload_format::offload_binary::KEY_KERNEL_PARAMS;
use offload_format::{ImageKind, OffloadBinary, OffloadKind};
use offload_rt::{Device, DeviceBuffer, Error, LaunchConfig};

offload_rt::extern_kernels! {
    /// The fixture's `saxpy`, by its symbol.
    fn saxpy(n: u32, a: f32, #[len(n)] x: *const f32, #[len(n)] y: *mut f32);
    /// The fixture's `block_sum`, whose image records its sizes.
    #[link_name = "block_sum"]
    fn block_sum_checked(n: u32, input: *const u32, out: *mut u64);
    /// `block_sum` with a count wider than the kernel's.
    #[link_name = "block_sum"]
    fn block_sum_wide_count(n: u64, input: *const u32, out: *mut u64);
    /// Listed by an image whose recorded sizes are malformed.
    fn indices(out: *mut u32, count: *mut u32);
    /// Only in a PTX image.
    fn scale(x: *mut f32, a: f32, n: i32);
    /// In no image.
    fn no_such_kernel(x: *mut f32);
}

/// A CPU image of `module` listing `kernels`, with `params` as its `offload.kernel-params`.
fn cpu_image(module: &str, kernels: &str, params: Option<&str>, image: &[u8]) -> Vec<u8> {
    let mut binary = OffloadBinary::parse(&cpu_common::bundle(module, kernels, image))
        .unwrap()
        .0
        .into_owned();
    if let Some(params) = params {
        binary.strings.push((
            Cow::Borrowed(KEY_KERNEL_PARAMS),
            Cow::Owned(params.to_owned()),
        ));
    }
    binary.to_bytes()
}

/// Registers the images once; `false` (after saying why) where the fixture cannot be built.
fn setup() -> bool {
    static READY: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let ready = READY.get_or_init(|| {
        let (bytes, kernels) = cpu_common::build_image()?;
        let plain: Vec<&str> = kernels
            .iter()
            .map(String::as_str)
            .filter(|k| !["block_sum", "indices"].contains(k))
            .collect();
        let mut bundle = cpu_image("ext_fixture", &plain.join(","), None, &bytes);
        bundle.extend(cpu_image(
            "ext_checked",
            "block_sum",
            Some("block_sum:4,8,8"),
            &bytes,
        ));
        bundle.extend(cpu_image("ext_bad", "indices", Some("indices:8,"), &bytes));
        bundle.extend(
            OffloadBinary::new(ImageKind::Ptx, OffloadKind::Cuda, &b".version 8.7"[..])
                .with_string("triple", "nvptx64-nvidia-cuda")
                .with_string("arch", "sm_80")
                .with_string("offload.module", "ext_scale")
                .with_string("offload.kernels", "scale")
                .with_string(KEY_KERNEL_PARAMS, "scale:8,4,4")
                .to_bytes(),
        );
        offload_rt::__internal::register_bundle("extern_kernels_test", bundle);
        Ok(())
    });
    cpu_common::is_ready(ready)
}

#[test]
fn a_kernel_found_by_symbol_runs() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let n = 1000u32;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let dx = DeviceBuffer::from_slice(&dev, &x).unwrap();
    let mut dy = DeviceBuffer::from_slice(&dev, &vec![1.0f32; n as usize]).unwrap();
    // SAFETY: the buffers hold the `n` elements the kernel reaches.
    let report =
        unsafe { saxpy.launch(&dev, LaunchConfig::for_num_elems(n), n, 2.0, &dx, &mut dy) }
            .unwrap();
    assert_eq!((report.module, report.kernel), ("ext_fixture", "saxpy"));
    let got = dy.to_vec().unwrap();
    for (i, (&g, &xi)) in got.iter().zip(&x).enumerate() {
        assert_eq!(g, 2.0 * xi + 1.0, "element {i}");
    }
}

#[test]
fn recorded_sizes_are_checked_before_a_launch() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let n = 3000u32;
    let input: Vec<u32> = (0..n).collect();
    let din = DeviceBuffer::from_slice(&dev, &input).unwrap();
    let mut out = DeviceBuffer::<u64>::zeroed(&dev, 1).unwrap();
    let config = LaunchConfig::for_num_elems(n);

    let err = block_sum_wide_count.load(&dev).unwrap_err();
    match &err {
        Error::KernelSignatureMismatch {
            kernel,
            image,
            declared,
            found,
        } => {
            assert_eq!(kernel, "block_sum");
            assert!(image.starts_with("ext_checked/host/"), "{image}");
            assert_eq!(declared, &[8, 8, 8]);
            assert_eq!(found, &[4, 8, 8]);
        }
        other => panic!("expected a signature mismatch, got {other:?}"),
    }
    // SAFETY: refused before the launch.
    let err = unsafe { block_sum_wide_count.launch(&dev, config, u64::from(n), &din, &mut out) }
        .unwrap_err();
    assert!(
        matches!(err, Error::KernelSignatureMismatch { .. }),
        "{err}"
    );
    assert_eq!(out.to_vec().unwrap(), [0], "nothing ran");

    // The declaration that agrees runs, from the image that recorded the sizes.
    // SAFETY: the buffers hold the `n` elements and the one total the kernel reaches.
    let report = unsafe { block_sum_checked.launch(&dev, config, n, &din, &mut out) }.unwrap();
    assert_eq!((report.module, report.kernel), ("ext_checked", "block_sum"));
    assert_eq!(out.to_vec().unwrap(), [u64::from(n) * u64::from(n - 1) / 2]);

    // Malformed recorded sizes are a typed error naming the image, not an unchecked launch.
    let err = indices.load(&dev).unwrap_err();
    match &err {
        Error::ImageLoad { module, reason, .. } => {
            assert_eq!(module, "ext_bad");
            assert!(reason.starts_with("offload.kernel-params: "), "{reason}");
        }
        other => panic!("expected a bad image, got {other:?}"),
    }
}

#[test]
fn a_kernel_no_image_of_the_device_has() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    // Listed only by an image the CPU does not run: the module's own error says so.
    match scale.load(&dev).unwrap_err() {
        Error::NoCompatibleImage { module, tried, .. } => {
            assert_eq!(module, "ext_scale");
            assert!(tried.contains("nvptx64-nvidia-cuda sm_80"), "{tried}");
        }
        other => panic!("expected no compatible image, got {other:?}"),
    }
    // Listed by none: every registered image was searched, and the error names them.
    let err = no_such_kernel.load(&dev).unwrap_err();
    let Error::ForeignKernelNotFound {
        kernel, searched, ..
    } = &err
    else {
        panic!("expected not found, got {err:?}");
    };
    assert_eq!(kernel, "no_such_kernel");
    let host = offload_build::tooling::arch::host_triple();
    for image in [
        format!("ext_fixture/host/{host}"),
        format!("ext_checked/host/{host}"),
        "ext_scale/sm_80/nvptx64-nvidia-cuda".to_owned(),
    ] {
        assert!(searched.contains(&image), "{searched:?} lacks {image}");
        assert!(err.to_string().contains(&image), "{err}");
    }
}
