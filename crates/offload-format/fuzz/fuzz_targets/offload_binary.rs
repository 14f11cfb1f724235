#![no_main]

use libfuzzer_sys::fuzz_target;
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
    let _ = parse_all(data);
});
