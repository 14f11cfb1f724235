#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_format::ccob;

fuzz_target!(|data: &[u8]| {
    let _ = ccob::CcobHeader::parse(data, 0);
    let _ = ccob::decompress_all(data);
    if let Ok((plain, _)) = ccob::decompress(data) {
        let again = ccob::compress(&plain, ccob::CompressOptions::default()).expect("compress");
        assert_eq!(ccob::decompress(&again).expect("round trip").0, plain);
    }
});
