#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_format::archive::{ArchiveUnbundleOptions, parse_archive, unbundle_archive, write_archive};
use offload_format::bundle::BundleEntryId;

fuzz_target!(|data: &[u8]| {
    if let Ok(members) = parse_archive(data) {
        let mut out = Vec::new();
        write_archive(&mut out, &members).expect("write");
        let back = parse_archive(&out).expect("re-parse");
        assert_eq!(back, members);
    }
    let targets = [BundleEntryId::parse("hip-amdgcn-amd-amdhsa--gfx90a:xnack+").expect("valid")];
    let _ = unbundle_archive(
        data,
        &targets,
        ArchiveUnbundleOptions { allow_missing_bundles: true, check_input_archive: true, hip_openmp_compatible: false },
    );
});
