#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_format::bundle::{
    BundleEntryId, BundleReader, binary_bundle_to_vec, parse_any_bundle, parse_binary_bundle,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(entries) = parse_binary_bundle(data) {
        let pairs: Vec<(&str, &[u8])> = entries
            .iter()
            .map(|e| (e.id.as_str(), e.data.as_ref()))
            .collect();
        let again = binary_bundle_to_vec(&pairs, 1).expect("write");
        let back = parse_binary_bundle(&again).expect("re-parse");
        assert_eq!(back, entries);
        for e in &entries {
            let _ = BundleEntryId::parse(&e.id).map(|id| id.to_string());
        }
    }
    let _ = parse_any_bundle(data);
    if let Ok(mut r) = BundleReader::new(std::io::Cursor::new(data)) {
        for i in 0..r.entries().len() {
            r.read_entry(i).expect("entry checked by the header");
        }
    }
});
