#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_build::device_link::{parse_ptxas_verbose, ptx_kernel_names};
use offload_build::image::{kernels_of_ptx, ptx_kernel_params};
use offload_build::DeviceImage;
use offload_build::arch::OffloadArch;
use offload_format::offload_binary::{
    KEY_KERNEL_RESOURCES, encode_kernel_params, parse_kernel_params, parse_kernel_resources,
};
use offload_format::{ImageKind, OffloadKind};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for name in kernels_of_ptx(&text) {
        assert!(!name.is_empty() && !name.contains(|c: char| c == '(' || c.is_whitespace()));
    }
    // The build stores these as `offload.kernel-params`: the runtime must read them back.
    let params = ptx_kernel_params(&text);
    let encoded = encode_kernel_params(&params);
    assert_eq!(
        parse_kernel_params(&encoded).expect("the runtime reads what the build writes"),
        params
    );
    for kernel in ptx_kernel_names(&text) {
        assert!(!kernel.name.contains('('));
    }
    let report = parse_ptxas_verbose(&text);
    for kernel in &report {
        assert!(!kernel.name.contains('\''));
    }
    // The build records the report as `offload.kernel-resources`: the tools must read it back.
    let image = DeviceImage {
        arch: OffloadArch::Host,
        image_kind: ImageKind::Cubin,
        offload_kind: OffloadKind::Cuda,
        module: "m".to_owned(),
        kernels: Vec::new(),
        kernel_params: Vec::new(),
        kernel_resources: report,
        bytes: Vec::new(),
    };
    if let Some(recorded) = image.to_offload_binary().get(KEY_KERNEL_RESOURCES) {
        let back = parse_kernel_resources(recorded).expect("the tools read what the build writes");
        assert!(back.iter().all(|k| image.kernel_resources.contains(k)));
    }
});
