#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_format::offload_binary::{KEY_IMAGE_CRC32, KEY_MODULE, image_crc32};
use offload_rt::__internal::{
    __offload_register_lib, __offload_unregister_lib, KernelEntry, OFFLOAD_DESCRIPTOR_MAGIC,
    OFFLOAD_DESCRIPTOR_VERSION, OffloadDescriptor, inventory, kernel_entry, modules_listing,
    registered_count, with_module_images,
};
use offload_rt::{Error, ImageInfo};

/// One image found by module, with each kernel it lists and what it records for it.
type Found = (ImageInfo, Vec<(String, Option<Option<Vec<u32>>>)>);

// Input: one byte of flags (bit 0: wrong magic, bit 1: wrong version, bit 2: null name,
// bit 3: null bundle), one byte of name length, the name, then the bundle.
fuzz_target!(|data: &[u8]| {
    let [flags, name_len, rest @ ..] = data else {
        return;
    };
    let (name, bundle) = rest.split_at(usize::from(*name_len).min(rest.len()));
    let desc = OffloadDescriptor {
        magic: OFFLOAD_DESCRIPTOR_MAGIC ^ u32::from(flags & 1),
        version: OFFLOAD_DESCRIPTOR_VERSION + u32::from(flags >> 1 & 1),
        name: if flags & 4 != 0 {
            std::ptr::null()
        } else {
            name.as_ptr()
        },
        name_len: name.len(),
        bundle: if flags & 8 != 0 {
            std::ptr::null()
        } else {
            bundle.as_ptr()
        },
        bundle_len: bundle.len(),
    };
    let well_formed = flags & 0b1011 == 0 && !bundle.is_empty();
    let parsed = offload_format::parse_all(bundle);
    let intact = well_formed && parsed.is_ok();
    assert_eq!(registered_count(), 0);
    // SAFETY: `desc`, `name` and `bundle` outlive the registration, which ends below before
    // they go out of scope, and nothing changes them meanwhile.
    unsafe { __offload_register_lib(&desc) };
    assert_eq!(registered_count(), 1);

    let modules: Vec<&str> = match &parsed {
        Ok(images) if intact => images.iter().filter_map(|b| b.get(KEY_MODULE)).collect(),
        _ => Vec::new(),
    };
    for module in modules.iter().copied().chain(["", "absent module"]) {
        let expected = modules.iter().filter(|m| **m == module).count();
        let found = with_module_images(module, |images| {
            Ok(images
                .iter()
                .map(|image| {
                    assert_eq!(image.module, module);
                    // The bytes a backend gets are the image's, and only when they match the
                    // CRC-32 recorded, if any.
                    let checked = image.checked_bytes();
                    let matches = image.binary.get(KEY_IMAGE_CRC32).is_none_or(|recorded| {
                        recorded.eq_ignore_ascii_case(&image_crc32(image.bytes()))
                    });
                    assert_eq!(checked.is_ok(), matches);
                    if let Ok(bytes) = checked {
                        assert!(std::ptr::eq(bytes, image.bytes()));
                    }
                    let kernels = image
                        .kernels()
                        .map(|k| (k.to_owned(), image.kernel_params(k).ok()))
                        .collect();
                    (image.describe(), kernels)
                })
                .collect::<Vec<Found>>())
        });
        match found {
            Ok(images) => {
                assert_eq!(images.len(), expected);
                for (info, kernels) in &images {
                    for (kernel, params) in kernels {
                        // Every lookup path agrees with the image's own keys.
                        match kernel_entry(info, kernel) {
                            Ok(KernelEntry::Listed(p)) => assert_eq!(Some(p), *params),
                            Ok(KernelEntry::Absent) => panic!("{kernel} listed but absent"),
                            Err(_) => assert!(params.is_none()),
                        }
                        let listing = modules_listing(kernel).expect("an intact bundle");
                        assert!(listing.contains(&info.module));
                    }
                    assert_eq!(
                        kernel_entry(info, "").expect("no lookup of params"),
                        KernelEntry::Absent
                    );
                }
            }
            Err(Error::NoImages { .. }) => assert!(intact && expected == 0),
            Err(Error::BadDescriptor { .. }) => assert!(!well_formed),
            Err(Error::DamagedBundle { .. }) => assert!(well_formed && parsed.is_err()),
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    let inv = inventory();
    assert_eq!(inv.len(), 1);
    match (&inv[0].1, &parsed) {
        (Ok(images), Ok(bins)) => assert!(intact && images.len() == bins.len()),
        (Err(_), _) => assert!(!intact),
        (Ok(_), Err(_)) => panic!("a damaged bundle inventoried"),
    }

    // SAFETY: `desc` was registered above.
    unsafe { __offload_unregister_lib(&desc) };
    assert_eq!(registered_count(), 0);
});
