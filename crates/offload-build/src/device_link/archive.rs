//! Device inputs: bitcode buffers and the bitcode members of rlibs.

use object::read::archive::ArchiveFile;

use super::{Error, Result};

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
}

impl DeviceInput {
    /// The kernel crate's own bitcode, linked whole.
    pub fn object(name: impl Into<String>, bytes: Vec<u8>) -> Self {
        Self {
            name: name.into(),
            bytes,
            lazy: false,
        }
    }

    /// A library's bitcode, linked only as far as needed.
    pub fn library(name: impl Into<String>, bytes: Vec<u8>) -> Self {
        Self {
            name: name.into(),
            bytes,
            lazy: true,
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
/// are skipped; `archive_name` only names the members in messages.
pub fn bitcode_members(archive_name: &str, data: &[u8]) -> Result<Vec<DeviceInput>> {
    let archive = ArchiveFile::parse(data).map_err(|e| Error::Archive {
        name: archive_name.to_owned(),
        message: e.to_string(),
    })?;
    let mut inputs = Vec::new();
    for member in archive.members() {
        let member = member.map_err(|e| Error::Archive {
            name: archive_name.to_owned(),
            message: e.to_string(),
        })?;
        let member_name = String::from_utf8_lossy(member.name()).into_owned();
        if member_name.starts_with("lib.rmeta") {
            continue;
        }
        let bytes = member.data(data).map_err(|e| Error::Archive {
            name: archive_name.to_owned(),
            message: format!("member `{member_name}`: {e}"),
        })?;
        if is_bitcode(bytes) {
            inputs.push(DeviceInput::library(
                format!("{archive_name}({member_name})"),
                bytes.to_vec(),
            ));
        }
    }
    Ok(inputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ar(members: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = b"!<arch>\n".to_vec();
        for (name, data) in members {
            let header = format!(
                "{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
                format!("{name}/"),
                0,
                0,
                0,
                644,
                data.len()
            );
            out.extend_from_slice(header.as_bytes());
            out.extend_from_slice(data);
            if data.len() % 2 == 1 {
                out.push(b'\n');
            }
        }
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

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(matches!(
            bitcode_members("x", b"not an archive"),
            Err(Error::Archive { .. })
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
