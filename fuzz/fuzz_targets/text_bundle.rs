#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_format::bundle::{TEXT_TYPES, parse_text_bundle, write_text_bundle};

fuzz_target!(|data: &[u8]| {
    for (ty, _) in TEXT_TYPES {
        // What parses writes back and parses to the same entries.
        if let Ok(entries) = parse_text_bundle(data, ty) {
            let pairs: Vec<(&str, &[u8])> = entries
                .iter()
                .map(|e| (e.id.as_str(), e.data.as_ref()))
                .collect();
            let mut out = Vec::new();
            write_text_bundle(&mut out, ty, &pairs).expect("write");
            assert_eq!(parse_text_bundle(&out, ty).expect("re-parse"), entries);
        }
    }
});
