#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_format::panic_sites::PanicSites;

// The runtime reads a GPU image's panic-site table when it loads the module.
fuzz_target!(|data: &[u8]| {
    if let Ok((_, sites)) = PanicSites::parse(data) {
        // Its sites are ones the device link can write (the bytes may lay out the text
        // otherwise: strings shared or bytes unused, which the ID, a hash of them, covers).
        let bytes = sites.to_bytes().expect("a table that was read fits");
        let (id, again) = PanicSites::parse(&bytes).expect("written tables read");
        assert_eq!((id, &again), (sites.id(), &sites));
    }
});
