//! Damaged copies of valid files: every parser returns a typed error or a result, never
//! panics, and never trusts a size field for an allocation.

use offload_format::archive::{
    ArchiveMember, ArchiveUnbundleOptions, parse_archive, unbundle_archive, write_archive,
};
use offload_format::bundle::{
    BundleEntryId, BundleReader, binary_bundle_to_vec, parse_binary_bundle, parse_text_bundle,
    write_text_bundle,
};
use offload_format::{OffloadBinary, ccob, parse_all};

/// Every single-byte corruption, every truncation, and every u64 field set to extreme
/// values at every 8-aligned offset.
fn damaged(good: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for cut in 0..good.len() {
        out.push(good[..cut].to_vec());
    }
    for i in 0..good.len().min(512) {
        for v in [0x00, 0xff, 0x7f, 0x80] {
            let mut d = good.to_vec();
            d[i] = v;
            out.push(d);
        }
    }
    for i in (0..good.len().saturating_sub(8)).step_by(8).take(64) {
        for v in [
            u64::MAX,
            u64::MAX - 7,
            1 << 63,
            good.len() as u64,
            good.len() as u64 + 1,
            0,
        ] {
            let mut d = good.to_vec();
            d[i..i + 8].copy_from_slice(&v.to_le_bytes());
            out.push(d);
        }
    }
    out
}

fn bundle() -> Vec<u8> {
    binary_bundle_to_vec(
        &[
            ("host-x86_64-unknown-linux-gnu-", b""),
            ("hipv4-amdgcn-amd-amdhsa--gfx90a", b"AAAAAAAA"),
            ("hipv4-amdgcn-amd-amdhsa--gfx942:xnack+", b"BBBB"),
        ],
        16,
    )
    .unwrap()
}

#[test]
fn damaged_offload_binaries() {
    let mut good = OffloadBinary::new(
        offload_format::ImageKind::Object,
        offload_format::OffloadKind::Hip,
        vec![1u8; 24],
    )
    .with_string("triple", "amdgcn-amd-amdhsa")
    .with_string("arch", "gfx90a")
    .to_bytes();
    good.extend(good.clone());
    let mut errors = 0;
    for d in damaged(&good) {
        if let Err(e) = parse_all(&d) {
            errors += 1;
            assert!(!e.to_string().is_empty());
        }
    }
    assert!(errors > 100);
}

/// Every truncation and single-byte change of a kernel-params value: a typed error or a list
/// that encodes back to text that parses to the same list.
#[test]
fn damaged_kernel_params() {
    use offload_format::offload_binary::{encode_kernel_params, parse_kernel_params};
    let good = "scale:8,4,4;_Z9scale_cppPffi:8,4,4;noargs:;s:16,1,4294967295";
    let mut errors = 0;
    let mut texts: Vec<Vec<u8>> = (0..good.len())
        .map(|cut| good.as_bytes()[..cut].to_vec())
        .collect();
    for i in 0..good.len() {
        for v in [b':', b';', b',', b' ', b'0', b'9', b'x', 0xff] {
            let mut d = good.as_bytes().to_vec();
            d[i] = v;
            texts.push(d);
        }
    }
    for d in texts {
        let Ok(text) = std::str::from_utf8(&d) else {
            continue;
        };
        match parse_kernel_params(text) {
            Ok(list) => assert_eq!(
                parse_kernel_params(&encode_kernel_params(&list)).unwrap(),
                list
            ),
            Err(e) => {
                errors += 1;
                assert!(e.to_string().starts_with("offload.kernel-params: "), "{e}");
            }
        }
    }
    assert!(errors > 100, "{errors}");
}

#[test]
fn damaged_binary_bundles() {
    let good = bundle();
    let mut errors = 0;
    for d in damaged(&good) {
        let a = parse_binary_bundle(&d);
        let b = BundleReader::new(std::io::Cursor::new(&d));
        assert_eq!(a.is_ok(), b.is_ok());
        if let Err(e) = a {
            errors += 1;
            assert!(
                e.to_string().contains("offset") || e.to_string().contains("UTF-8"),
                "{e}"
            );
        }
    }
    assert!(errors > 100);
}

#[test]
fn damaged_text_bundles() {
    let mut good = Vec::new();
    write_text_bundle(
        &mut good,
        "ll",
        &[
            ("host-x86_64-unknown-linux-gnu-", b"define void @f() {}"),
            ("hip-amdgcn-amd-amdhsa--gfx90a", b"x"),
        ],
    )
    .unwrap();
    for d in damaged(&good) {
        let _ = parse_text_bundle(&d, "ll");
    }
    let mut bad = good.clone();
    let at = good.windows(6).position(|w| w == b"host-x").unwrap();
    bad[at] = 0xff;
    assert!(matches!(
        parse_text_bundle(&bad, "ll"),
        Err(offload_format::Error::BundleIdNotUtf8 { .. })
    ));
}

#[test]
fn damaged_compressed_bundles() {
    let plain = bundle();
    for opts in [
        ccob::CompressOptions::default(),
        ccob::CompressOptions {
            version: 2,
            method: ccob::CompressionMethod::Zlib,
            level: None,
        },
    ] {
        let good = ccob::compress(&plain, opts).unwrap();
        let mut rejected = 0;
        for d in damaged(&good) {
            match ccob::decompress_all(&d) {
                // A change the size and hash checks cannot see (e.g. in a frame header field
                // the decoder ignores) still yields exactly the original bundle.
                Ok(all) => assert!(
                    all.iter().all(|p| *p == plain),
                    "damaged copy accepted with other contents"
                ),
                Err(_) => rejected += 1,
            }
        }
        assert!(rejected > 100);
    }
    // A huge claimed size allocates nothing up front and is reported.
    let mut good = ccob::compress(&plain, Default::default()).unwrap();
    good[16..24].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
    assert!(matches!(
        ccob::decompress(&good),
        Err(offload_format::Error::CcobSizeMismatch { .. })
    ));
}

#[test]
fn damaged_archives() {
    let mut good = Vec::new();
    write_archive(
        &mut good,
        &[
            ArchiveMember {
                name: "a-long-member-name.o".into(),
                data: bundle().into(),
            },
            ArchiveMember {
                name: "b.o".into(),
                data: ccob::compress(&bundle(), Default::default())
                    .unwrap()
                    .into(),
            },
        ],
    )
    .unwrap();
    let t = [BundleEntryId::parse("hip-amdgcn-amd-amdhsa--gfx90a").unwrap()];
    for d in damaged(&good) {
        let _ = parse_archive(&d);
        let _ = unbundle_archive(
            &d,
            &t,
            ArchiveUnbundleOptions {
                check_input_archive: true,
                ..Default::default()
            },
        );
    }
    let out = unbundle_archive(&good, &t, ArchiveUnbundleOptions::default()).unwrap();
    assert_eq!(out[0].len(), 2);
}
