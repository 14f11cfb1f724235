#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_format::offload_binary::{
    encode_kernel_params, encode_kernel_resources, parse_kernel_params, parse_kernel_resources,
};
use offload_format::{OffloadBinary, parse_all};

fuzz_target!(|data: &[u8]| {
    if let Ok((bin, used)) = OffloadBinary::parse(data) {
        assert!(used <= data.len());
        // What we parse we can write, and it reads back the same.
        let bytes = bin.to_bytes();
        if bin
            .strings
            .iter()
            .all(|(k, v)| !k.contains('\0') && !v.contains('\0'))
        {
            let (again, _) = OffloadBinary::parse(&bytes).expect("re-parse");
            assert_eq!(again, bin);
        }
    }
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(list) = parse_kernel_params(text)
    {
        assert_eq!(
            parse_kernel_params(&encode_kernel_params(&list)).unwrap(),
            list
        );
    }
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(list) = parse_kernel_resources(text)
    {
        assert_eq!(
            parse_kernel_resources(&encode_kernel_resources(&list)).unwrap(),
            list
        );
    }
    let _ = parse_all(data);
});
