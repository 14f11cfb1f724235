#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_build::DeviceImage;
use offload_build::OffloadArch;
use offload_format::image::ptx::{
    entries, kernel_names, kernel_params, max_threads, parse_ptxas_verbose,
};
use offload_format::offload_binary::{
    KEY_KERNEL_RESOURCES, encode_kernel_params, parse_kernel_params, parse_kernel_resources,
};
use offload_format::{ImageKind, OffloadKind};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let found = entries(&text);
    let names = kernel_names(&text);
    assert_eq!(names.len(), found.len());
    for (name, entry) in names.iter().zip(&found) {
        assert_eq!(*name, entry.name);
        assert!(!name.is_empty() && !name.contains(|c: char| c == '(' || c.is_whitespace()));
    }
    // The build stores these as `offload.kernel-params`: the runtime must read them back.
    let params = kernel_params(&text);
    for p in &params {
        let entry = found
            .iter()
            .find(|e| e.name == p.kernel)
            .expect("a declared kernel");
        assert_eq!(entry.param_sizes().as_ref(), Some(&p.sizes));
    }
    let encoded = encode_kernel_params(&params);
    assert_eq!(
        parse_kernel_params(&encoded).expect("the runtime reads what the build writes"),
        params
    );
    // Launch bounds are named and never 0.
    for (name, bound) in max_threads(&text) {
        assert!(bound > 0 && !name.is_empty(), "{name}: {bound}");
    }
    let report = parse_ptxas_verbose(&text);
    for kernel in &report {
        assert!(!kernel.name.contains('\''));
    }
    // The build records the report as `offload.kernel-resources`: the tools must read it back.
    let image = DeviceImage {
        arch: OffloadArch::HOST,
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
