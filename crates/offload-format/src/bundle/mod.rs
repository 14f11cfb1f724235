//! clang-offload-bundler bundles: entry IDs ([`id`]), the binary layout ([`binary`]), the
//! text layout ([`text`]) and reading the object layout ([`object`]).

use crate::error::{Error, Result};

pub mod binary;
pub mod entry;
pub mod id;
pub mod object;
pub mod text;

pub use binary::{
    BundleInput, BundleReader, binary_bundle_to_vec, binary_layout, is_binary_bundle,
    parse_binary_bundle, read_binary_header, write_binary_bundle,
};
pub use entry::{
    BUNDLE_MAGIC, BundleEntry, BundleEntryInfo, HIP_BUNDLE_ALIGN, OBJECT_SECTION_PREFIX,
};
pub use id::{BundleEntryId, OFFLOAD_KINDS, check_bundle_targets};
pub use object::{host_objcopy_args, objcopy_args, parse_object_bundle};
pub use text::{TEXT_TYPES, parse_text_bundle, text_comment, write_text_bundle, write_text_entry};

/// Parses a bundle whatever its container: one or more CCOB blobs (decompressed, their
/// entries concatenated), the binary layout, or an ELF object layout.
pub fn parse_any_bundle(bytes: &[u8]) -> Result<Vec<BundleEntry<'_>>> {
    if crate::ccob::is_compressed(bytes) {
        let mut out = Vec::new();
        for (i, blob) in crate::ccob::decompress_all(bytes)?.into_iter().enumerate() {
            let entries =
                parse_binary_bundle(&blob).map_err(|e| Error::CompressedBundleContents {
                    index: i,
                    source: Box::new(e),
                })?;
            out.extend(entries.into_iter().map(BundleEntry::into_owned));
        }
        return Ok(out);
    }
    if is_binary_bundle(bytes) {
        return parse_binary_bundle(bytes);
    }
    if bytes.starts_with(b"\x7fELF") {
        return parse_object_bundle(bytes);
    }
    Err(Error::BundleUnrecognized)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_normalization_table() {
        let cases = [
            (
                "hip-amdgcn-amd-amdhsa--gfx90a",
                "hip-amdgcn-amd-amdhsa--gfx90a",
            ),
            (
                "hip-amdgcn-amd-amdhsa-unknown-gfx90a",
                "hip-amdgcn-amd-amdhsa--gfx90a",
            ),
            (
                "openmp-nvptx64-nvidia-cuda--sm_80",
                "openmp-nvptx64-nvidia-cuda-unknown-sm_80",
            ),
            (
                "host-x86_64-unknown-linux-gnu",
                "host-x86_64-unknown-linux-gnu-",
            ),
            ("openmp-x86_64-pc-linux-gnu", "openmp-x86_64-pc-linux-gnu-"),
            ("hip-amdgcn-amd-amdhsa-gfx90a", "hip-amdgcn-amd-amdhsa--"),
            ("hipv4-amdgcn-amd-amdhsa--foo", "hipv4-amdgcn-amd-amdhsa--"),
            (
                "hipv4-amdgcn-amd-amdhsa--gfx942:xnack+:sramecc-",
                "hipv4-amdgcn-amd-amdhsa--gfx942:xnack+:sramecc-",
            ),
            (
                "hip-amdgcn-amd-amdhsa--gfx9-4-generic",
                "hip-amdgcn-amd-amdhsa--gfx9-4-generic",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                BundleEntryId::parse(input).unwrap().to_string(),
                want,
                "{input}"
            );
        }
        assert!(BundleEntryId::parse("hip-amdgcn-amd").is_err());
    }

    #[test]
    fn compatibility_of_ids() {
        let id = |s| BundleEntryId::parse(s).unwrap();
        let cases = [
            (
                "hipv4-amdgcn-amd-amdhsa--gfx90a",
                "hip-amdgcn-amd-amdhsa--gfx90a:xnack+",
                false,
                true,
            ),
            (
                "hip-amdgcn-amd-amdhsa--gfx942:xnack+",
                "hip-amdgcn-amd-amdhsa--gfx942",
                false,
                false,
            ),
            (
                "hip-amdgcn-amd-amdhsa--gfx942:xnack+",
                "openmp-amdgcn-amd-amdhsa--gfx942:xnack+",
                false,
                false,
            ),
            (
                "hip-amdgcn-amd-amdhsa--gfx942:xnack+",
                "openmp-amdgcn-amd-amdhsa--gfx942:xnack+",
                true,
                true,
            ),
            (
                "openmp-nvptx64-nvidia-cuda--sm_80",
                "openmp-nvptx64-nvidia-cuda-unknown-sm_80",
                false,
                true,
            ),
            (
                "openmp-nvptx64-nvidia-cuda--sm_80",
                "openmp-nvptx64-nvidia-cuda--sm_90",
                false,
                false,
            ),
            (
                "openmp-amdgcn-amd-amdhsa--gfx90a",
                "openmp-nvptx64-nvidia-cuda--gfx90a",
                false,
                false,
            ),
        ];
        for (co, req, hip_omp, want) in cases {
            assert_eq!(
                id(co).is_compatible(&id(req), hip_omp),
                want,
                "{co} for {req}"
            );
        }
    }

    #[test]
    fn host_rules() {
        let ids = |v: &[&str]| {
            v.iter()
                .map(|s| BundleEntryId::parse(s).unwrap())
                .collect::<Vec<_>>()
        };
        assert!(
            check_bundle_targets(&ids(&[
                "host-x86_64-unknown-linux-gnu",
                "openmp-nvptx64-nvidia-cuda--sm_80"
            ]))
            .is_ok()
        );
        assert!(
            check_bundle_targets(&ids(&[
                "hip-amdgcn-amd-amdhsa--gfx90a",
                "hipv4-amdgcn-amd-amdhsa--gfx942"
            ]))
            .is_ok()
        );
        assert!(matches!(
            check_bundle_targets(&ids(&["openmp-nvptx64-nvidia-cuda--sm_80"])),
            Err(Error::BundleHostCount { count: 0 })
        ));
        assert!(matches!(
            check_bundle_targets(&ids(&[
                "host-x86_64-unknown-linux-gnu",
                "host-x86_64-pc-linux-gnu"
            ])),
            Err(Error::BundleHostCount { count: 2 })
        ));
        assert!(matches!(
            check_bundle_targets(&ids(&[
                "host-x86_64-unknown-linux-gnu",
                "cuda-nvptx64-nvidia-cuda--sm_80"
            ])),
            Err(Error::BundleInvalidKind { .. })
        ));
        assert!(matches!(
            check_bundle_targets(&ids(&[
                "hip-amdgcn-amd-amdhsa--gfx90a",
                "hip-amdgcn-amd-amdhsa-unknown-gfx90a"
            ])),
            Err(Error::BundleDuplicateId { .. })
        ));
    }

    #[test]
    fn binary_round_trip_with_alignment() {
        let entries: [(&str, &[u8]); 3] = [
            ("host-x86_64-unknown-linux-gnu-", b""),
            ("hipv4-amdgcn-amd-amdhsa--gfx90a", b"AAAA"),
            ("hipv4-amdgcn-amd-amdhsa--gfx942:xnack+", b"BBBBBB"),
        ];
        for align in [1u64, 8, 4096] {
            let bytes = binary_bundle_to_vec(&entries, align).unwrap();
            let parsed = parse_binary_bundle(&bytes).unwrap();
            assert_eq!(parsed.len(), 3);
            for ((id, data), e) in entries.iter().zip(&parsed) {
                assert_eq!((*id, *data), (e.id.as_str(), e.data.as_ref()));
            }
            let mut r = BundleReader::new(std::io::Cursor::new(&bytes)).unwrap();
            assert_eq!(r.read_entry(2).unwrap(), b"BBBBBB");
            if align == 4096 {
                assert_eq!(r.entries()[0].offset, 4096);
                assert_eq!(r.entries()[1].offset, 4096);
                assert_eq!(r.entries()[2].offset, 8192);
            }
        }
        assert!(binary_bundle_to_vec(&entries, 3).is_err());
    }

    #[test]
    fn binary_bad_input() {
        let good = binary_bundle_to_vec(
            &[
                ("host-x86_64-unknown-linux-gnu-", b"hh"),
                ("openmp-x-y-z-", b"dd"),
            ],
            1,
        )
        .unwrap();
        for cut in 0..good.len() {
            assert!(parse_binary_bundle(&good[..cut]).is_err(), "cut {cut}");
        }
        let mut bad = good.clone();
        bad[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            parse_binary_bundle(&bad),
            Err(Error::BundleCountTooLarge { offset: 24, .. })
        ));
        let mut bad = good.clone();
        bad[32..40].copy_from_slice(&(u64::MAX - 1).to_le_bytes());
        assert!(matches!(
            parse_binary_bundle(&bad),
            Err(Error::BundleEntryOutOfRange { offset: 32, .. })
        ));
        let mut bad = good.clone();
        bad[48..56].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            parse_binary_bundle(&bad),
            Err(Error::BundleIdLengthOutOfRange { offset: 48, .. })
        ));
        let mut bad = good.clone();
        bad[32..40].copy_from_slice(&8u64.to_le_bytes());
        assert!(matches!(
            parse_binary_bundle(&bad),
            Err(Error::BundleEntryOverlapsHeader { .. })
        ));
        let mut bad = good.clone();
        bad[56] = 0xff;
        assert!(matches!(
            parse_binary_bundle(&bad),
            Err(Error::BundleIdNotUtf8 { offset: 56 })
        ));
        bad[0] = b'X';
        assert!(matches!(
            parse_binary_bundle(&bad),
            Err(Error::BundleBadMagic { offset: 0 })
        ));
    }

    #[test]
    fn text_round_trip() {
        for (ty, _) in TEXT_TYPES {
            let entries: [(&str, &[u8]); 2] = [
                ("host-x86_64-unknown-linux-gnu-", b"int main() {}\n"),
                ("hip-amdgcn-amd-amdhsa--gfx90a", b""),
            ];
            let mut out = Vec::new();
            write_text_bundle(&mut out, ty, &entries).unwrap();
            let parsed = parse_text_bundle(&out, ty).unwrap();
            assert_eq!(parsed.len(), 2);
            assert_eq!(parsed[0].data.as_ref(), entries[0].1);
            assert_eq!(parsed[1].id, entries[1].0);
            assert!(parse_text_bundle(&out[..out.len() - 2], ty).is_err());
        }
        assert!(matches!(
            write_text_bundle(Vec::new(), "o", &[]),
            Err(Error::BundleUnknownTextType { .. })
        ));
    }
}
