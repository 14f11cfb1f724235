#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_format::Error;
use offload_format::archive::{
    ArchiveUnbundleOptions, parse_archive, unbundle_archive, write_archive,
};
use offload_format::bundle::BundleEntryId;

fuzz_target!(|data: &[u8]| {
    if let Ok(members) = parse_archive(data) {
        let mut out = Vec::new();
        match write_archive(&mut out, &members) {
            Ok(()) => assert_eq!(parse_archive(&out).expect("re-parse"), members),
            // A BSD or padded name may hold a newline, which GNU names cannot.
            Err(Error::ArchiveUnwritableName { name }) => assert!(name.contains('\n')),
            Err(e) => panic!("write: {e}"),
        }
    }
    let targets = [BundleEntryId::parse("hip-amdgcn-amd-amdhsa--gfx90a:xnack+").expect("valid")];
    let _ = unbundle_archive(
        data,
        &targets,
        ArchiveUnbundleOptions {
            allow_missing_bundles: true,
            check_input_archive: true,
            hip_openmp_compatible: false,
        },
    );
});
