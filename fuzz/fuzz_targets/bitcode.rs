#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_format::bitcode::archive_symbols;
use offload_format::llvm_hash::dense_map_order;

fuzz_target!(|data: &[u8]| {
    let _ = archive_symbols(data);
    // The same bytes as `--image` keys: every distinct key comes out exactly once.
    let text = String::from_utf8_lossy(data);
    let keys: Vec<&str> = text.split(',').collect();
    let mut order = dense_map_order(&keys);
    let mut distinct = keys.clone();
    order.sort_unstable();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(order, distinct);
});
