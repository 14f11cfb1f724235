//! GNU `ar` archives (read: GNU and BSD member names; write: GNU, with the symbol index `llvm-ar` writes) and the
//! unbundling of heterogeneous device archives (HDA) as clang-offload-bundler `-type=a` does.

use std::borrow::Cow;
use std::io::Write;

use crate::bundle::{
    BundleEntry, BundleEntryId, is_binary_bundle, parse_binary_bundle, parse_object_bundle,
};
use crate::ccob;
use crate::error::{Error, Result};
use crate::target_id::{TargetId, conflicting_combination};

/// The global archive header.
pub const AR_MAGIC: &[u8; 8] = b"!<arch>\n";
const THIN_MAGIC: &[u8; 8] = b"!<thin>\n";
const MEMBER_HEADER: usize = 60;

/// One archive member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveMember<'a> {
    /// The member's name, long names resolved.
    pub name: String,
    /// The member's contents.
    pub data: Cow<'a, [u8]>,
}

fn field_num(field: &[u8], radix: u32, offset: u64, what: &'static str) -> Result<u64> {
    let text = std::str::from_utf8(field).map_err(|_| Error::ArchiveBadField { offset, what })?;
    let text = text.trim_end_matches(' ');
    if text.is_empty() {
        return Ok(0);
    }
    u64::from_str_radix(text, radix).map_err(|_| Error::ArchiveBadField { offset, what })
}

/// Parses an archive in memory, borrowing member data. The symbol table (`/`, `/SYM64/`,
/// `__.SYMDEF`) and the GNU long-name table (`//`) are consumed, not returned.
pub fn parse_archive(bytes: &[u8]) -> Result<Vec<ArchiveMember<'_>>> {
    if bytes.starts_with(THIN_MAGIC) {
        return Err(Error::ArchiveThin);
    }
    if !bytes.starts_with(AR_MAGIC) {
        return Err(Error::ArchiveBadMagic);
    }
    let mut pos = AR_MAGIC.len();
    let mut long_names: &[u8] = &[];
    let mut out = Vec::new();
    while pos < bytes.len() {
        let at = pos as u64;
        if bytes.len() - pos < MEMBER_HEADER {
            return Err(Error::ArchiveTruncated { offset: at });
        }
        let h = &bytes[pos..pos + MEMBER_HEADER];
        if &h[58..60] != b"`\n" {
            return Err(Error::ArchiveBadField {
                offset: at + 58,
                what: "header terminator",
            });
        }
        let size = field_num(&h[48..58], 10, at + 48, "member size")?;
        let data_at = pos + MEMBER_HEADER;
        if size > (bytes.len() - data_at) as u64 {
            return Err(Error::ArchiveMemberOutOfRange {
                offset: at + 48,
                size,
                available: (bytes.len() - data_at) as u64,
            });
        }
        let mut data = &bytes[data_at..data_at + size as usize];
        let raw_name = std::str::from_utf8(&h[..16])
            .map_err(|_| Error::ArchiveBadName { offset: at })?
            .trim_end_matches(' ');
        pos = data_at + size as usize;
        pos += pos % 2;
        let name = if raw_name == "/" || raw_name == "/SYM64/" || raw_name.starts_with("__.SYMDEF")
        {
            continue;
        } else if raw_name == "//" {
            long_names = data;
            continue;
        } else if let Some(len) = raw_name.strip_prefix("#1/") {
            // BSD: the name is the first `len` bytes of the data.
            let len = field_num(len.as_bytes(), 10, at, "BSD name length")?;
            if len > data.len() as u64 {
                return Err(Error::ArchiveBadName { offset: at });
            }
            let (n, rest) = data.split_at(len as usize);
            data = rest;
            std::str::from_utf8(n)
                .map_err(|_| Error::ArchiveBadName {
                    offset: data_at as u64,
                })?
                .trim_end_matches('\0')
                .to_owned()
        } else if let Some(off) = raw_name.strip_prefix('/') {
            let off = field_num(off.as_bytes(), 10, at, "long-name offset")?;
            let start = usize::try_from(off)
                .ok()
                .filter(|&o| o < long_names.len())
                .ok_or(Error::ArchiveBadName { offset: at })?;
            let end = long_names[start..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(long_names.len(), |e| start + e);
            let n = std::str::from_utf8(&long_names[start..end])
                .map_err(|_| Error::ArchiveBadName { offset: at })?;
            n.strip_suffix('/').unwrap_or(n).to_owned()
        } else {
            // GNU names end at the first '/'; names without one are space-padded.
            raw_name.split('/').next().unwrap_or(raw_name).to_owned()
        };
        out.push(ArchiveMember {
            name,
            data: Cow::Borrowed(data),
        });
    }
    Ok(out)
}

/// Writes a GNU archive deterministically (dates, owners 0, mode 644), as
/// `llvm-ar`/`writeArchive` lay it out: a symbol index (`/`) when a member is LLVM bitcode
/// (see [`crate::bitcode::archive_symbols`]) or an ELF object (empty when none of them has a
/// global definition; other members, and members that cannot be read, add no symbols), then
/// the `//` table holding
/// names of 16 characters or more (or containing `/`), then the members. A name containing a
/// newline cannot be stored and is an error.
pub fn write_archive<W: Write>(mut w: W, members: &[ArchiveMember<'_>]) -> Result<()> {
    w.write_all(AR_MAGIC)?;
    let mut table = Vec::new();
    let mut headers_names = Vec::with_capacity(members.len());
    for m in members {
        if m.name.contains('\n') {
            return Err(Error::ArchiveUnwritableName {
                name: m.name.clone(),
            });
        }
        // Short names a reader would take for a symbol table or a BSD name go to the table.
        let special = m.name.is_empty() || m.name == "#1" || m.name.starts_with("__.SYMDEF");
        if m.name.len() < 16 && !m.name.contains('/') && !special {
            headers_names.push(format!("{}/", m.name));
        } else {
            headers_names.push(format!("/{}", table.len()));
            table.extend_from_slice(m.name.as_bytes());
            table.extend_from_slice(b"/\n");
        }
    }
    if table.len() % 2 == 1 {
        table.push(b'\n');
    }
    let (symbols, has_object) = member_symbols(members);
    let count: usize = symbols.iter().map(Vec::len).sum();
    if count > 0 || has_object {
        let names: usize = symbols.iter().flatten().map(|s| s.len() + 1).sum();
        // An empty index: the count, then a zero word where the names would be.
        let names = if count == 0 { 4 } else { names };
        let size = 4 + 4 * count + names;
        let size = size + size % 2;
        let mut at = (AR_MAGIC.len() + MEMBER_HEADER + size) as u64;
        if !table.is_empty() {
            at += (MEMBER_HEADER + table.len()) as u64;
        }
        let mut index = Vec::with_capacity(size);
        index.extend_from_slice(&(count as u32).to_be_bytes());
        for (m, syms) in members.iter().zip(&symbols) {
            let offset = u32::try_from(at).map_err(|_| Error::ArchiveTooLargeForIndex)?;
            for _ in syms {
                index.extend_from_slice(&offset.to_be_bytes());
            }
            at += (MEMBER_HEADER + m.data.len() + m.data.len() % 2) as u64;
        }
        for name in symbols.iter().flatten() {
            index.extend_from_slice(name.as_bytes());
            index.push(0);
        }
        index.resize(size, 0);
        w.write_all(&member_header("/", "0", "0", "0", "0", size))?;
        w.write_all(&index)?;
    }
    if !table.is_empty() {
        w.write_all(&member_header("//", "", "", "", "", table.len()))?;
        w.write_all(&table)?;
    }
    for (m, name) in members.iter().zip(headers_names) {
        w.write_all(&member_header(&name, "0", "0", "0", "644", m.data.len()))?;
        w.write_all(&m.data)?;
        if m.data.len() % 2 == 1 {
            w.write_all(b"\n")?;
        }
    }
    Ok(())
}

/// Each member's index symbols, and whether any member is an object file (bitcode with a
/// symbol table, or an ELF object the reader accepts): `llvm-ar` writes an empty index then, for tools that expect
/// one in any archive of objects. Other data, and members that cannot be read, add no
/// symbols: the archive is still a faithful container of the members.
fn member_symbols(members: &[ArchiveMember<'_>]) -> (Vec<Vec<String>>, bool) {
    let mut has_object = false;
    let symbols = members
        .iter()
        .map(|m| {
            if crate::bitcode::is_bitcode(&m.data) {
                // Only bitcode with a symbol table is known to be a module `llvm-ar` reads.
                let symbols = crate::bitcode::archive_symbols(&m.data).ok().flatten();
                has_object |= symbols.is_some();
                symbols.unwrap_or_default()
            } else if m.data.starts_with(b"\x7fELF") {
                let symbols = elf_symbols(&m.data);
                has_object |= symbols.is_some();
                symbols.unwrap_or_default()
            } else {
                Vec::new()
            }
        })
        .collect();
    (symbols, has_object)
}

/// The symbols `llvm-ar` indexes for an ELF object: `.symtab` entries in order that are not
/// local, not undefined, and not section or file symbols; `None` when the object cannot be
/// read.
fn elf_symbols(bytes: &[u8]) -> Option<Vec<String>> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let bytes = crate::aligned::object_bytes(bytes);
    let file = object::File::parse(&*bytes).ok()?;
    let symbols = file
        .symbols()
        .filter(|s| !s.is_local() && !s.is_undefined())
        .filter(|s| !matches!(s.kind(), SymbolKind::Section | SymbolKind::File))
        .filter_map(|s| s.name().ok().filter(|n| !n.is_empty()).map(str::to_owned))
        .collect();
    Some(symbols)
}

/// A 60-byte member header; fields are padded by bytes (a name may hold multi-byte UTF-8).
fn member_header(name: &str, date: &str, uid: &str, gid: &str, mode: &str, size: usize) -> Vec<u8> {
    let mut h = Vec::with_capacity(MEMBER_HEADER);
    let size = size.to_string();
    for (field, width) in [
        (name, 16),
        (date, 12),
        (uid, 6),
        (gid, 6),
        (mode, 8),
        (size.as_str(), 10),
    ] {
        h.extend_from_slice(field.as_bytes());
        h.resize(h.len() + width - field.len(), b' ');
    }
    h.extend_from_slice(b"`\n");
    h
}

/// Options of [`unbundle_archive`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArchiveUnbundleOptions {
    /// Give a target with no compatible entry an empty archive instead of failing.
    pub allow_missing_bundles: bool,
    /// Check each member's entries against the target-ID composition rule first.
    pub check_input_archive: bool,
    /// Let hip/hipv4 entries serve openmp targets and the reverse.
    pub hip_openmp_compatible: bool,
}

fn member_ext(name: &str) -> &str {
    match name.rfind('.') {
        Some(i) if i > 0 => &name[i..],
        _ => "",
    }
}

fn member_stem(name: &str) -> &str {
    match name.rfind('.') {
        Some(i) if i > 0 => &name[..i],
        _ => name,
    }
}

/// The name clang 22 gives an entry extracted from archive member `member` with stored ID
/// `id`: `<stem>-<id><stem><ext>` with `:` replaced by `_` (the stem really appears twice, as
/// `getDeviceLibraryFileName` appends it); `<ext>` is `.bc` when the target ID contains `gfx`,
/// `.cubin` when it contains `sm_`, else the member's own extension.
pub fn device_member_name(member: &str, id: &str, target_id: Option<&str>) -> String {
    let file = member.rsplit('/').next().unwrap_or(member);
    let t = target_id.unwrap_or("");
    let ext = if t.contains("gfx") {
        ".bc"
    } else if t.contains("sm_") {
        ".cubin"
    } else {
        member_ext(file)
    };
    let stem = member_stem(file);
    format!("{stem}-{id}{stem}{ext}").replace(':', "_")
}

/// Unbundles a heterogeneous device archive: every bundle entry of every member goes into the
/// archive of each requested target it is compatible with (see
/// [`BundleEntryId::is_compatible`]), host entries included, as clang 22 does. Returns one
/// member list per target, in `targets` order. Members are bundles in the binary layout
/// (compressed ones are decompressed first) or ELF objects in the object layout; other members
/// are skipped. A host entry of an object-layout member is the member without its bundle
/// sections, which `llvm-objcopy` makes: that needs [`unbundle_archive_with`], and is an error
/// here.
pub fn unbundle_archive(
    archive: &[u8],
    targets: &[BundleEntryId],
    opts: ArchiveUnbundleOptions,
) -> Result<Vec<Vec<ArchiveMember<'static>>>> {
    unbundle_archive_with(archive, targets, opts, &mut |_| {
        Err(Error::Io(std::io::Error::other(
            "its host object is the member without its bundle sections, which only \
             llvm-objcopy makes (see unbundle_archive_with)",
        )))
    })
}

/// [`unbundle_archive`], with `host_object` making the host object of a fat object (an
/// object-layout member) from the member's bytes: clang runs `llvm-objcopy --regex
/// --remove-section=__CLANG_OFFLOAD_BUNDLE__.*` on it.
pub fn unbundle_archive_with(
    archive: &[u8],
    targets: &[BundleEntryId],
    opts: ArchiveUnbundleOptions,
    host_object: &mut dyn FnMut(&[u8]) -> Result<Vec<u8>>,
) -> Result<Vec<Vec<ArchiveMember<'static>>>> {
    let members = parse_archive(archive)?;
    let mut outputs: Vec<Vec<ArchiveMember<'static>>> = vec![Vec::new(); targets.len()];
    for m in &members {
        let in_member = |e: Error| Error::ArchiveMember {
            member: m.name.clone(),
            source: Box::new(e),
        };
        let decompressed;
        let bundle: &[u8] = if ccob::is_compressed(&m.data) {
            decompressed = ccob::decompress(&m.data).map_err(in_member)?.0;
            &decompressed
        } else {
            &m.data
        };
        // Relocatable objects (`clang -fgpu-rdc -c`) carry their entries in
        // `__CLANG_OFFLOAD_BUNDLE__<id>` sections.
        let object_layout = !is_binary_bundle(bundle);
        let entries: Vec<BundleEntry<'_>> = if !object_layout {
            parse_binary_bundle(bundle).map_err(in_member)?
        } else if bundle.starts_with(b"\x7fELF") {
            parse_object_bundle(bundle).map_err(in_member)?
        } else {
            continue;
        };
        let ids: Vec<BundleEntryId> = entries
            .iter()
            .map(|e| BundleEntryId::parse(&e.id))
            .collect::<Result<_>>()
            .map_err(|e| Error::ArchiveMember {
                member: m.name.clone(),
                source: Box::new(e),
            })?;
        if opts.check_input_archive {
            let tids: Vec<TargetId> = ids
                .iter()
                .filter_map(|id| id.target_id.as_deref())
                .filter_map(|t| TargetId::parse(t).ok())
                .collect();
            if let Some((a, b)) = conflicting_combination(&tids) {
                return Err(Error::ArchiveConflictingTargetIds {
                    member: m.name.clone(),
                    first: a.as_written().to_owned(),
                    second: b.as_written().to_owned(),
                });
            }
        }
        for (entry, id) in entries.iter().zip(&ids) {
            let wanted: Vec<usize> = (0..targets.len())
                .filter(|&t| id.is_compatible(&targets[t], opts.hip_openmp_compatible))
                .collect();
            if wanted.is_empty() {
                continue;
            }
            // The object layout marks the host entry with one zero byte: its contents are the
            // object itself, less the bundle sections.
            let data = if object_layout && id.is_host() && *entry.data == [0] {
                host_object(bundle).map_err(in_member)?
            } else {
                entry.data.to_vec()
            };
            let name = device_member_name(&m.name, &entry.id, id.target_id.as_deref());
            for t in wanted {
                outputs[t].push(ArchiveMember {
                    name: name.clone(),
                    data: Cow::Owned(data.clone()),
                });
            }
        }
    }
    for (out, target) in outputs.iter().zip(targets) {
        if out.is_empty() && !opts.allow_missing_bundles {
            return Err(Error::ArchiveNoCompatibleEntry {
                target: target.to_string(),
            });
        }
    }
    Ok(outputs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::binary_bundle_to_vec;

    #[test]
    fn archive_round_trip_with_long_names() {
        let members = vec![
            ArchiveMember {
                name: "a.o".into(),
                data: Cow::Borrowed(b"odd"),
            },
            ArchiveMember {
                name: "a-very-long-member-name-hip.bc".into(),
                data: Cow::Borrowed(b"even"),
            },
            ArchiveMember {
                name: "exactly16chars.o".into(),
                data: Cow::Borrowed(b""),
            },
        ];
        let mut out = Vec::new();
        write_archive(&mut out, &members).unwrap();
        assert_eq!(parse_archive(&out).unwrap(), members);
        let mut bad = out.clone();
        bad[8 + 48] = b'x';
        assert!(matches!(
            parse_archive(&bad),
            Err(Error::ArchiveBadField { offset: 56, .. })
        ));
        assert!(matches!(
            parse_archive(b"!<thin>\n"),
            Err(Error::ArchiveThin)
        ));
        assert!(matches!(
            parse_archive(b"garbage!"),
            Err(Error::ArchiveBadMagic)
        ));
        // Found by fuzzing: a multi-byte UTF-8 name is padded by bytes.
        let utf8 = [ArchiveMember {
            name: "m1\u{490}".into(),
            data: Cow::Borrowed(b"x"),
        }];
        let mut out = Vec::new();
        write_archive(&mut out, &utf8).unwrap();
        assert_eq!(parse_archive(&out).unwrap(), utf8);
        // Found by fuzzing: names that look like BSD or symbol-table names as short names.
        let tricky: Vec<ArchiveMember<'_>> = ["#1", "", "__.SYMDEF", "     "]
            .into_iter()
            .map(|n| ArchiveMember {
                name: n.into(),
                data: Cow::Borrowed(b"abc"),
            })
            .collect();
        let mut out = Vec::new();
        write_archive(&mut out, &tricky).unwrap();
        assert_eq!(parse_archive(&out).unwrap(), tricky);
        // Found by fuzzing: text after the GNU terminator is not part of the name.
        let mut odd =
            b"!<arch>\nm2.o/ !<thin>\n  0           0     0     644     2         `\nab".to_vec();
        assert_eq!(parse_archive(&odd).unwrap()[0].name, "m2.o");
        odd[8 + 4] = b'\n';
        let names = parse_archive(&odd).unwrap();
        assert!(matches!(
            write_archive(Vec::new(), &names),
            Err(Error::ArchiveUnwritableName { .. })
        ));
    }

    #[test]
    fn member_names() {
        assert_eq!(
            device_member_name(
                "func_1.o",
                "openmp-amdgcn-amd-amdhsa--gfx906:sramecc+:xnack+",
                Some("gfx906:sramecc+:xnack+")
            ),
            "func_1-openmp-amdgcn-amd-amdhsa--gfx906_sramecc+_xnack+func_1.bc"
        );
        assert_eq!(
            device_member_name(
                "f.o",
                "openmp-nvptx64-nvidia-cuda-unknown-sm_80",
                Some("sm_80")
            ),
            "f-openmp-nvptx64-nvidia-cuda-unknown-sm_80f.cubin"
        );
        assert_eq!(
            device_member_name("f.o", "openmp-x86_64-pc-linux-gnu-", None),
            "f-openmp-x86_64-pc-linux-gnu-f.o"
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "zstd and zlib are C code, which Miri cannot run")]
    fn hda_unbundle_rules() {
        let b1 = binary_bundle_to_vec(
            &[
                ("host-x86_64-unknown-linux-gnu-", b"host"),
                ("openmp-amdgcn-amd-amdhsa--gfx906:sramecc-:xnack+", b"A"),
                ("openmp-amdgcn-amd-amdhsa--gfx906:sramecc+:xnack+", b"B"),
                ("openmp-nvptx64-nvidia-cuda-unknown-sm_80", b"C"),
            ],
            1,
        )
        .unwrap();
        let b2 = binary_bundle_to_vec(
            &[
                ("host-x86_64-unknown-linux-gnu-", b""),
                ("openmp-amdgcn-amd-amdhsa--gfx906", b"D"),
            ],
            1,
        )
        .unwrap();
        let mut ar = Vec::new();
        write_archive(
            &mut ar,
            &[
                ArchiveMember {
                    name: "f1.o".into(),
                    data: Cow::Owned(b1),
                },
                ArchiveMember {
                    name: "f2.o".into(),
                    data: Cow::Owned(ccob::compress(&b2, Default::default()).unwrap()),
                },
                ArchiveMember {
                    name: "notes.txt".into(),
                    data: Cow::Borrowed(b"not a bundle"),
                },
            ],
        )
        .unwrap();
        let t = |s: &str| BundleEntryId::parse(s).unwrap();
        let targets = [
            t("openmp-amdgcn-amd-amdhsa--gfx906:sramecc+:xnack+"),
            t("openmp-nvptx64-nvidia-cuda--sm_80"),
            t("openmp-amdgcn-amd-amdhsa--gfx908"),
        ];
        let err = unbundle_archive(&ar, &targets, ArchiveUnbundleOptions::default()).unwrap_err();
        assert!(
            matches!(err, Error::ArchiveNoCompatibleEntry { ref target } if target.contains("gfx908"))
        );
        let out = unbundle_archive(
            &ar,
            &targets,
            ArchiveUnbundleOptions {
                allow_missing_bundles: true,
                ..Default::default()
            },
        )
        .unwrap();
        let names = |v: &Vec<ArchiveMember<'_>>| {
            v.iter()
                .map(|m| (m.name.clone(), m.data.to_vec()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(&out[0]),
            vec![
                (
                    "f1-openmp-amdgcn-amd-amdhsa--gfx906_sramecc+_xnack+f1.bc".to_owned(),
                    b"B".to_vec()
                ),
                (
                    "f2-openmp-amdgcn-amd-amdhsa--gfx906f2.bc".to_owned(),
                    b"D".to_vec()
                ),
            ]
        );
        assert_eq!(
            names(&out[1]),
            vec![(
                "f1-openmp-nvptx64-nvidia-cuda-unknown-sm_80f1.cubin".to_owned(),
                b"C".to_vec()
            )]
        );
        assert!(out[2].is_empty());
        let err = unbundle_archive(
            &ar,
            &targets[..1],
            ArchiveUnbundleOptions {
                check_input_archive: true,
                ..Default::default()
            },
        );
        assert!(
            err.is_ok(),
            "f1 is consistent, f2 alone is consistent: {err:?}"
        );
    }
}
