#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_build::OffloadArch;
use offload_build::tooling::arch::{mentions_native, parse_found, parse_list};

fuzz_target!(|data: &[u8]| {
    let Ok(list) = std::str::from_utf8(data) else {
        return;
    };
    match parse_list(list, "the fuzz input") {
        Ok(archs) => {
            assert!(!archs.is_empty());
            assert!(!mentions_native(list));
            for (i, a) in archs.iter().enumerate() {
                assert!(!archs[..i].contains(a), "{a} listed twice");
            }
            // The names written back (canonical target IDs) parse to the same list.
            let names: Vec<String> = archs.iter().map(OffloadArch::name).collect();
            assert_eq!(
                parse_list(&names.join(","), "the fuzz input").expect("re-parse"),
                archs
            );
        }
        // Every refusal says where the list came from.
        Err(e) => assert!(e.to_string().contains("the fuzz input"), "{e}"),
    }
    let names: Vec<String> = list.split(',').map(str::to_owned).collect();
    let (found, notes) = parse_found(&names);
    assert!(!found.iter().any(|a| matches!(a, OffloadArch::Host(_))));
    assert!(found.len() + notes.len() <= names.len());
});
