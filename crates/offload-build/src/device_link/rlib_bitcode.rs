//! Device inputs: bitcode buffers and the bitcode members of rlibs.

use std::collections::HashMap;

use object::read::archive::ArchiveFile;

use super::error::{LinkError, Result};

const BITCODE_MAGIC: [u8; 4] = *b"BC\xC0\xDE";
/// Bitcode wrapper header magic (`0x0B17C0DE`, little-endian), as Darwin tools write it.
const WRAPPER_MAGIC: [u8; 4] = [0xDE, 0xC0, 0x17, 0x0B];

/// One LLVM bitcode buffer to link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInput {
    /// A name for messages (file or `archive(member)`).
    pub name: String,
    /// The bitcode.
    pub bytes: Vec<u8>,
    /// Library members are linked only when they define a symbol still needed (`--only-needed`);
    /// the others (the kernel crate's own code) are linked whole.
    pub lazy: bool,
    /// The symbols a library member defines, from its archive's symbol map: the link reads a
    /// member only once it resolves one of them. `None` when unknown: the link then reads the
    /// member's module to find out.
    pub defines: Option<Vec<String>>,
}

impl DeviceInput {
    /// The kernel crate's own bitcode, linked whole.
    pub fn object(name: impl Into<String>, bytes: Vec<u8>) -> Self {
        Self {
            name: name.into(),
            bytes,
            lazy: false,
            defines: None,
        }
    }

    /// A library's bitcode, linked only as far as needed.
    pub fn library(name: impl Into<String>, bytes: Vec<u8>) -> Self {
        Self {
            name: name.into(),
            bytes,
            lazy: true,
            defines: None,
        }
    }

    /// A library's bitcode whose defined symbols are known (from an archive symbol map).
    pub fn library_defining(name: impl Into<String>, bytes: Vec<u8>, defines: Vec<String>) -> Self {
        Self {
            defines: Some(defines),
            ..Self::library(name, bytes)
        }
    }
}

/// Whether `bytes` start like LLVM bitcode (raw or wrapped).
pub fn is_bitcode(bytes: &[u8]) -> bool {
    bytes.starts_with(&BITCODE_MAGIC) || bytes.starts_with(&WRAPPER_MAGIC)
}

/// The bitcode members of an rlib (an `ar` archive), in archive order, as lazy inputs.
///
/// rustc's metadata members (`lib.rmeta`, `lib.rmeta-link`) and anything that is not bitcode
/// are skipped; `archive_name` only names the members in messages. When the archive has a
/// symbol map (rustc writes one), each member carries the symbols it defines, so the device
/// link parses only the members it needs.
pub fn bitcode_members(archive_name: &str, data: &[u8]) -> Result<Vec<DeviceInput>> {
    let archive_err = |message: String| LinkError::Archive {
        name: archive_name.to_owned(),
        message,
    };
    let archive = ArchiveFile::parse(data).map_err(|e| archive_err(e.to_string()))?;
    let symbol_map = member_symbols(&archive).map_err(archive_err)?;
    let mut inputs = Vec::new();
    for member in archive.members() {
        let member = member.map_err(|e| archive_err(e.to_string()))?;
        let member_name = String::from_utf8_lossy(member.name()).into_owned();
        if member_name.starts_with("lib.rmeta") {
            continue;
        }
        let bytes = member
            .data(data)
            .map_err(|e| archive_err(format!("member `{member_name}`: {e}")))?;
        if is_bitcode(bytes) {
            let name = format!("{archive_name}({member_name})");
            inputs.push(match &symbol_map {
                Some(map) => DeviceInput::library_defining(
                    name,
                    bytes.to_vec(),
                    map.get(&member.file_range().0).cloned().unwrap_or_default(),
                ),
                None => DeviceInput::library(name, bytes.to_vec()),
            });
        }
    }
    Ok(inputs)
}

/// The archive's symbol map as the symbols of each member, keyed by the offset of the member's
/// data; `None` when the archive has no symbol map.
fn member_symbols(
    archive: &ArchiveFile<'_>,
) -> std::result::Result<Option<HashMap<u64, Vec<String>>>, String> {
    let Some(symbols) = archive.symbols().map_err(|e| format!("symbol map: {e}"))? else {
        return Ok(None);
    };
    let mut by_header: HashMap<u64, u64> = HashMap::new();
    let mut map: HashMap<u64, Vec<String>> = HashMap::new();
    for symbol in symbols {
        let symbol = symbol.map_err(|e| format!("symbol map: {e}"))?;
        let header = symbol.offset().0;
        let start = match by_header.get(&header) {
            Some(&start) => start,
            None => {
                let member = archive
                    .member(symbol.offset())
                    .map_err(|e| format!("symbol map entry at offset {header}: {e}"))?;
                let start = member.file_range().0;
                by_header.insert(header, start);
                start
            }
        };
        map.entry(start)
            .or_default()
            .push(String::from_utf8_lossy(symbol.name()).into_owned());
    }
    Ok(Some(map))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ar(members: &[(&str, &[u8])]) -> Vec<u8> {
        let members: Vec<offload_format::archive::ArchiveMember<'_>> = members
            .iter()
            .map(|(name, data)| offload_format::archive::ArchiveMember {
                name: (*name).to_owned(),
                data: (*data).into(),
            })
            .collect();
        let mut out = Vec::new();
        offload_format::archive::write_archive(&mut out, &members).unwrap();
        out
    }

    #[test]
    fn keeps_bitcode_members_only() {
        let data = ar(&[
            ("lib.rmeta", b"rust metadata"),
            ("a.rcgu.o", b"BC\xC0\xDEabc"),
            ("b.o", b"\x7fELF...."),
            ("c.rcgu.o", b"BC\xC0\xDE1"),
        ]);
        let inputs = bitcode_members("libx.rlib", &data).unwrap();
        let names: Vec<_> = inputs.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["libx.rlib(a.rcgu.o)", "libx.rlib(c.rcgu.o)"]);
        assert!(inputs.iter().all(|i| i.lazy));
        assert_eq!(inputs[1].bytes, b"BC\xC0\xDE1");
    }

    /// A GNU archive with a symbol map (`/` member) listing `symbols` as (name, member index).
    fn ar_with_map(members: &[(&str, &[u8])], symbols: &[(&str, usize)]) -> Vec<u8> {
        let header = |name: &str, size: usize| {
            format!("{name:<16}{:<12}{:<6}{:<6}{:<8}{size:<10}`\n", 0, 0, 0, 644)
        };
        let mut map_len =
            4 + 4 * symbols.len() + symbols.iter().map(|(n, _)| n.len() + 1).sum::<usize>();
        map_len += map_len % 2;
        let mut offsets = Vec::new();
        let mut at = 8 + 60 + map_len;
        for (_, data) in members {
            offsets.push(at as u32);
            at += 60 + data.len() + data.len() % 2;
        }
        let mut map = (symbols.len() as u32).to_be_bytes().to_vec();
        for (_, member) in symbols {
            map.extend_from_slice(&offsets[*member].to_be_bytes());
        }
        for (name, _) in symbols {
            map.extend_from_slice(name.as_bytes());
            map.push(0);
        }
        map.resize(map_len, b'\n');
        let mut out = b"!<arch>\n".to_vec();
        out.extend_from_slice(header("/", map.len()).as_bytes());
        out.extend_from_slice(&map);
        for (name, data) in members {
            out.extend_from_slice(header(&format!("{name}/"), data.len()).as_bytes());
            out.extend_from_slice(data);
            if data.len() % 2 == 1 {
                out.push(b'\n');
            }
        }
        out
    }

    #[test]
    fn symbol_map_names_what_each_member_defines() {
        let data = ar_with_map(
            &[
                ("a.rcgu.o", b"BC\xC0\xDEabc"),
                ("lib.rmeta", b"rust metadata"),
                ("b.rcgu.o", b"BC\xC0\xDE12"),
                ("c.rcgu.o", b"BC\xC0\xDE3456"),
            ],
            &[("alpha", 0), ("beta", 2), ("gamma", 0)],
        );
        let inputs = bitcode_members("libx.rlib", &data).unwrap();
        let defines: Vec<_> = inputs.iter().map(|i| i.defines.clone()).collect();
        assert_eq!(
            defines,
            [
                Some(vec!["alpha".to_owned(), "gamma".to_owned()]),
                Some(vec!["beta".to_owned()]),
                // In the map, defining nothing: never needed.
                Some(vec![]),
            ]
        );
        assert_eq!(inputs[1].bytes, b"BC\xC0\xDE12");
        // Without a map the link has to read the members to know.
        let plain = bitcode_members("x", &ar(&[("a.o", b"BC\xC0\xDE1")])).unwrap();
        assert_eq!(plain[0].defines, None);
    }

    #[test]
    fn bad_symbol_map_is_an_error_not_a_panic() {
        let mut data = ar_with_map(&[("a.o", b"BC\xC0\xDE1")], &[("alpha", 0)]);
        // Point the only symbol past the end of the archive.
        let at = 8 + 60 + 4;
        data[at..at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(
            bitcode_members("x", &data),
            Err(LinkError::Archive { .. })
        ));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(matches!(
            bitcode_members("x", b"not an archive"),
            Err(LinkError::Archive { .. })
        ));
        let mut truncated = ar(&[("a.o", b"BC\xC0\xDEabcdef")]);
        truncated.truncate(70);
        assert!(bitcode_members("x", &truncated).is_err());
    }

    #[test]
    fn bitcode_magic() {
        assert!(is_bitcode(b"BC\xC0\xDE\x35"));
        assert!(is_bitcode(&[0xDE, 0xC0, 0x17, 0x0B, 0]));
        assert!(!is_bitcode(b"\x7fELF"));
        assert!(!is_bitcode(b"BC"));
    }
}
