#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_build::device_link::{parse_ptxas_verbose, ptx_kernel_names};
use offload_build::image::{kernels_of_ptx, ptx_kernel_params};
use offload_format::offload_binary::{encode_kernel_params, parse_kernel_params};

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
    for kernel in parse_ptxas_verbose(&text) {
        assert!(!kernel.name.contains('\''));
    }
});
