#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_format::bundle::{TEXT_TYPES, parse_text_bundle};

fuzz_target!(|data: &[u8]| {
    for (ty, _) in TEXT_TYPES {
        let _ = parse_text_bundle(data, ty);
    }
});
