#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_format::bundle::parse_object_bundle;

fuzz_target!(|data: &[u8]| {
    let _ = parse_object_bundle(data);
});
