#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_format::AmdTargetId;
use offload_format::image::amdgpu::{e_flags, fix_e_flags, inspect, kernel_params};
use offload_format::offload_binary::{encode_kernel_params, parse_kernel_params};
use offload_format::target_id::amdgpu_processor_by_mach;

/// `e_flags` bits that name the processor, xnack and sramecc.
const SETTINGS_MASK: u32 = 0xfff;

fuzz_target!(|data: &[u8]| {
    let info = inspect(data);
    let params = kernel_params(data);
    let flags = e_flags(data);
    let Ok(info) = info else {
        assert!(
            params.is_err(),
            "kernel params of an unreadable code object"
        );
        return;
    };
    assert_eq!(flags.ok(), Some(info.e_flags));
    if let Ok(params) = params {
        // What the build records for these kernels, the runtime reads back.
        assert_eq!(params.len(), info.kernels.len());
        for (p, k) in params.iter().zip(&info.kernels) {
            assert_eq!(p.kernel, k.name);
            assert_eq!(p.sizes.len(), k.explicit_args().count());
        }
        let text = encode_kernel_params(&params);
        assert_eq!(parse_kernel_params(&text).expect("re-parse"), params);
    }
    // Rewriting xnack/sramecc to a target ID of the same processor: the bits follow the ID,
    // nothing else changes, and a second rewrite finds nothing to do.
    let Some(processor) = amdgpu_processor_by_mach(info.e_flags as u8) else {
        return;
    };
    let features = ["", ":xnack+", ":xnack-", ":sramecc+:xnack-", ":sramecc-"];
    let pick = data.last().map_or(0, |b| usize::from(*b) % features.len());
    let Ok(target) = AmdTargetId::parse(&format!("{}{}", processor.name, features[pick])) else {
        return;
    };
    let mut copy = data.to_vec();
    if fix_e_flags(&mut copy, &target).is_ok() {
        let fixed = e_flags(&copy).expect("still a code object");
        assert_eq!(fixed & SETTINGS_MASK, target.e_flags() & SETTINGS_MASK);
        assert_eq!(copy[..48], data[..48]);
        assert_eq!(copy[52..], data[52..]);
        assert_eq!(fix_e_flags(&mut copy, &target).ok(), Some(false));
    }
});
