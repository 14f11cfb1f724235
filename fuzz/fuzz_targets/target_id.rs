#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_format::TargetId;
use offload_format::bundle::BundleEntryId;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let mut ids = Vec::new();
    for part in s.split(',') {
        if let Ok(id) = TargetId::parse(part) {
            // The canonical form parses to the same ID.
            let canon = TargetId::parse(&id.canonical()).expect("canonical re-parses");
            assert_eq!(canon.canonical(), id.canonical());
            assert!(TargetId::is_compatible(&id, &canon));
            ids.push(id);
        }
        let _ = TargetId::parse_offload_arch(part);
        if let Ok(b) = BundleEntryId::parse(part) {
            let again = BundleEntryId::parse(&b.to_string()).expect("normalized ID re-parses");
            assert_eq!(again, b);
        }
    }
    let _ = offload_format::conflicting_combination(&ids);
});
