//! The CPU image's static library as the IR link reads it: a nested build with
//! `-Clinker-plugin-lto` leaves the workspace crates' members as LLVM bitcode and the
//! precompiled standard library's (`core`, `alloc`, `compiler_builtins`) as native ELF objects.
//! The bitcode goes through the CPU link; the native members are linked into the image beside
//! its object, and what they use of the bitcode stays external there.
//!
//! No LLVM here: the build that runs the link in `cargo-offload-device` writes the native
//! members' archive itself.

use std::collections::BTreeSet;
use std::path::Path;

use object::{Object as _, ObjectSymbol as _};
use offload_format::archive::{ArchiveMember, parse_archive, write_archive};

use super::error::{LinkError, Result};

/// The target of a CPU image's link: what rustc's `-Ctarget-cpu` and `-Ctarget-feature`
/// say for its level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuLinkOptions {
    /// The host crate's target triple.
    pub triple: String,
    /// The processor (`x86-64`, `x86-64-v3`, `generic`).
    pub cpu: String,
    /// LLVM's feature string (`+sve,+sve2`), empty for the processor's own.
    pub features: String,
    /// Symbols the image's other objects use (the host side of relocatable CUDA/HIP sources,
    /// linked beside the library), which the link keeps external as it keeps what the
    /// library's native members use.
    pub keep: Vec<String>,
}

impl CpuLinkOptions {
    /// The target of `level`'s image for `triple`: the level's processor, else the one rustc
    /// defaults to for the triple's architecture (`x86-64`, `generic`), and its features.
    pub fn for_level(triple: &str, level: offload_format::CpuLevel) -> CpuLinkOptions {
        let cpu = level.target_cpu().unwrap_or_else(|| {
            if triple.split('-').next() == Some("x86_64") {
                "x86-64"
            } else {
                "generic"
            }
        });
        CpuLinkOptions {
            triple: triple.to_owned(),
            cpu: cpu.to_owned(),
            features: level.target_features().unwrap_or_default().to_owned(),
            keep: Vec::new(),
        }
    }
}

/// The members of a CPU image's static library, split by kind, in archive order.
#[derive(Debug)]
pub struct CpuArchive<'a> {
    /// The LLVM bitcode members.
    #[cfg_attr(
        not(feature = "llvm"),
        allow(dead_code, reason = "linked in-process with the `llvm` feature only")
    )]
    pub bitcode: Vec<ArchiveMember<'a>>,
    /// Everything else: native objects, linked as they are.
    pub native: Vec<ArchiveMember<'a>>,
}

impl<'a> CpuArchive<'a> {
    /// Splits the static library `bytes` of kernel crate `krate` (for messages).
    pub fn read(krate: &str, bytes: &'a [u8]) -> Result<CpuArchive<'a>> {
        let members = parse_archive(bytes).map_err(|e| LinkError::Archive {
            name: format!("the static library of `{krate}`"),
            message: e.to_string(),
        })?;
        let (bitcode, native) = members
            .into_iter()
            .partition(|m| offload_format::bitcode::is_bitcode(&m.data));
        Ok(CpuArchive { bitcode, native })
    }

    /// The symbols the native members leave undefined: what they need of the bitcode
    /// (`rust_eh_personality`, the panic handler, the allocator's functions), which the link
    /// keeps external. A member that is not an object file adds none; an object file that does
    /// not read is an error.
    pub fn native_undefined(&self, krate: &str) -> Result<BTreeSet<String>> {
        let mut undefined = BTreeSet::new();
        for member in &self.native {
            let data = offload_format::aligned::object_bytes(&member.data);
            if !data.starts_with(b"\x7fELF") {
                continue;
            }
            let file = object::File::parse(&*data).map_err(|e| LinkError::CpuNativeMember {
                krate: krate.to_owned(),
                member: member.name.clone(),
                message: e.to_string(),
            })?;
            for symbol in file.symbols() {
                if symbol.is_undefined()
                    && let Ok(name) = symbol.name()
                    && !name.is_empty()
                {
                    undefined.insert(name.to_owned());
                }
            }
        }
        Ok(undefined)
    }

    /// Writes the native members as an archive at `path` (whole, renamed into place), for the
    /// image's link to take with `--whole-archive` as it takes the static library otherwise.
    pub fn write_native(&self, path: &Path) -> crate::error::Result<()> {
        let mut bytes = Vec::new();
        write_archive(&mut bytes, &self.native).map_err(|e| {
            crate::error::Error::DeviceLink(LinkError::Archive {
                name: path.display().to_string(),
                message: e.to_string(),
            })
        })?;
        crate::fsutil::write_atomic(path, &bytes)
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    #[test]
    fn bitcode_and_native_members_are_told_apart() {
        let members = [
            ArchiveMember {
                name: "k.k.0.rcgu.o".into(),
                data: Cow::Borrowed(b"BC\xc0\xde rest"),
            },
            ArchiveMember {
                name: "core-1.o".into(),
                data: Cow::Borrowed(b"\x7fELF not really"),
            },
            ArchiveMember {
                name: "notes.txt".into(),
                data: Cow::Borrowed(b"text"),
            },
        ];
        let mut bytes = Vec::new();
        write_archive(&mut bytes, &members).unwrap();
        let archive = CpuArchive::read("k", &bytes).unwrap();
        assert_eq!(archive.bitcode.len(), 1);
        assert_eq!(archive.bitcode[0].name, "k.k.0.rcgu.o");
        let native: Vec<&str> = archive.native.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(native, ["core-1.o", "notes.txt"]);
        let err = archive.native_undefined("k").unwrap_err();
        assert!(
            matches!(&err, LinkError::CpuNativeMember { krate, member, .. } if krate == "k" && member == "core-1.o"),
            "{err}"
        );
        let err = CpuArchive::read("k", b"not an archive").unwrap_err();
        assert!(err.to_string().contains("`k`"), "{err}");
    }
}
