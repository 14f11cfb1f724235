//! clang-offload-bundler bundles: entry IDs, the binary layout, the text layout and reading
//! the object layout.

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Read, Seek, SeekFrom, Write};

use crate::error::{Error, Result};
use crate::offload_binary::{copy_exact, write_zeros};
use crate::target_id::{TargetId, conflicting_combination, is_known_offload_arch};

/// The 24-byte magic of the binary layout (no NUL).
pub const BUNDLE_MAGIC: &[u8; 24] = b"__CLANG_OFFLOAD_BUNDLE__";
/// Prefix of the section names in the object layout.
pub const OBJECT_SECTION_PREFIX: &str = "__CLANG_OFFLOAD_BUNDLE__";
/// Offload kinds the bundler accepts.
pub const OFFLOAD_KINDS: &[&str] = &["host", "openmp", "hip", "hipv4"];
/// The alignment clang's HIP fat-binary step uses.
pub const HIP_BUNDLE_ALIGN: u64 = 4096;

/// A bundle entry ID, `<kind>-<arch>-<vendor>-<os>-<env>[-<target-id>]`, normalized as the
/// bundler's `OffloadTargetInfo` does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BundleEntryId {
    /// `host`, `openmp`, `hip`, `hipv4` (others are kept but refused when bundling).
    pub kind: String,
    pub arch: String,
    pub vendor: String,
    pub os: String,
    pub env: String,
    /// The target ID, kept only when its processor is a known offload architecture.
    pub target_id: Option<String>,
}

impl BundleEntryId {
    /// Parses an ID as the bundler does: split on `-` into at most 6 parts, 5 or 6 required;
    /// the 5th part is the environment; a 6th part is the target ID, dropped when its processor
    /// is not an offload architecture clang knows.
    pub fn parse(s: &str) -> Result<BundleEntryId> {
        let parts: Vec<&str> = s.splitn(6, '-').collect();
        if parts.len() < 5 {
            return Err(Error::BundleIdMalformed { id: s.to_owned() });
        }
        let target_id = parts.get(5).and_then(|t| {
            let processor = t.split(':').next().unwrap_or_default();
            (!processor.is_empty() && is_known_offload_arch(processor)).then(|| (*t).to_owned())
        });
        let field = |s: &str| if s.is_empty() { "unknown" } else { s }.to_owned();
        let os = field(parts[3]);
        // The runtimes expect AMDHSA triples with an empty environment.
        let env = if os.starts_with("amdhsa") {
            String::new()
        } else {
            field(parts[4])
        };
        Ok(BundleEntryId {
            kind: parts[0].to_owned(),
            arch: field(parts[1]),
            vendor: field(parts[2]),
            os,
            env,
            target_id,
        })
    }

    /// Builds an ID from a kind, a triple (3 or 4 fields) and an optional target ID.
    pub fn new(kind: &str, triple: &str, target_id: Option<&str>) -> Result<BundleEntryId> {
        let mut fields: Vec<&str> = triple.splitn(4, '-').collect();
        if fields.len() < 3 {
            return Err(Error::BundleIdMalformed {
                id: format!("{kind}-{triple}"),
            });
        }
        fields.resize(4, "");
        let mut s = format!("{kind}-{}", fields.join("-"));
        if let Some(t) = target_id {
            s.push('-');
            s.push_str(t);
        }
        Self::parse(&s)
    }

    /// Whether the OS is AMDHSA (the triple is then written with 3 fields and an empty env).
    pub fn is_amdhsa(&self) -> bool {
        self.os.starts_with("amdhsa")
    }

    /// The triple as the bundler writes it: `amdgcn-amd-amdhsa-` for AMDHSA, otherwise four
    /// fields with `unknown` for empty ones.
    pub fn normalized_triple(&self) -> String {
        let f = |s: &str| {
            if s.is_empty() {
                "unknown".to_owned()
            } else {
                s.to_owned()
            }
        };
        if self.is_amdhsa() {
            format!("{}-{}-{}-", f(&self.arch), f(&self.vendor), self.os)
        } else {
            format!(
                "{}-{}-{}-{}",
                f(&self.arch),
                f(&self.vendor),
                f(&self.os),
                f(&self.env)
            )
        }
    }

    /// The triple with empty trailing fields dropped (`amdgcn-amd-amdhsa`), for display.
    pub fn triple(&self) -> String {
        let t = self.normalized_triple();
        t.trim_end_matches('-').to_owned()
    }

    /// `host` kind.
    pub fn is_host(&self) -> bool {
        self.kind == "host"
    }

    /// `hip` or `hipv4`.
    pub fn is_hip(&self) -> bool {
        self.kind == "hip" || self.kind == "hipv4"
    }

    /// The bundler's `isOffloadKindCompatible`: equal, or `hip`/`hipv4` with each other, or
    /// with `hip_openmp_compatible`, hip* with openmp.
    pub fn kind_compatible(&self, other: &BundleEntryId, hip_openmp_compatible: bool) -> bool {
        if self.kind == other.kind || (self.is_hip() && other.is_hip()) {
            return true;
        }
        hip_openmp_compatible
            && ((self.kind.starts_with("hip") && other.kind == "openmp")
                || (self.kind == "openmp" && other.kind.starts_with("hip")))
    }

    fn triple_compatible(&self, other: &BundleEntryId) -> bool {
        let norm = |s: &str| if s.is_empty() { "unknown" } else { s }.to_owned();
        let env = |id: &BundleEntryId| {
            if id.is_amdhsa() {
                String::new()
            } else {
                norm(&id.env)
            }
        };
        norm(&self.arch) == norm(&other.arch)
            && norm(&self.vendor) == norm(&other.vendor)
            && norm(&self.os) == norm(&other.os)
            && env(self) == env(other)
    }

    /// The bundler's `isCodeObjectCompatible(self, requested)`: exact match, or compatible
    /// kinds and triples and compatible target IDs (see [`TargetId::is_compatible`]).
    pub fn is_compatible(&self, requested: &BundleEntryId, hip_openmp_compatible: bool) -> bool {
        if self == requested {
            return true;
        }
        if !self.kind_compatible(requested, hip_openmp_compatible)
            || !self.triple_compatible(requested)
        {
            return false;
        }
        let (Some(co), Some(req)) = (&self.target_id, &requested.target_id) else {
            return false;
        };
        match (TargetId::parse(co), TargetId::parse(req)) {
            (Ok(co), Ok(req)) => TargetId::is_compatible(&co, &req),
            _ => false,
        }
    }
}

impl fmt::Display for BundleEntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}-{}-{}",
            self.kind,
            self.normalized_triple(),
            self.target_id.as_deref().unwrap_or("")
        )
    }
}

impl std::str::FromStr for BundleEntryId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// Checks the bundler's rules for a list of targets to bundle: valid kinds, no duplicate IDs,
/// no conflicting target-ID combination (see [`conflicting_combination`]), and exactly one `host` entry unless every entry is `hip`/`hipv4` (then at most one).
pub fn check_bundle_targets(ids: &[BundleEntryId]) -> Result<()> {
    for id in ids {
        if !OFFLOAD_KINDS.contains(&id.kind.as_str()) {
            return Err(Error::BundleInvalidKind { id: id.to_string() });
        }
    }
    for (i, id) in ids.iter().enumerate() {
        if ids[..i].contains(id) {
            return Err(Error::BundleDuplicateId { id: id.to_string() });
        }
    }
    let target_ids: Vec<(TargetId, &BundleEntryId)> = ids
        .iter()
        .filter_map(|id| Some((TargetId::parse(id.target_id.as_deref()?).ok()?, id)))
        .collect();
    let only_ids: Vec<TargetId> = target_ids.iter().map(|(t, _)| t.clone()).collect();
    if let Some((a, b)) = conflicting_combination(&only_ids) {
        let find = |t: &TargetId| {
            target_ids
                .iter()
                .find(|(x, _)| x == t)
                .map(|(_, id)| id.to_string())
                .unwrap_or_default()
        };
        return Err(Error::BundleConflictingTargets {
            first: find(&a),
            second: find(&b),
        });
    }
    let hosts = ids.iter().filter(|id| id.is_host()).count();
    let all_hip = ids
        .iter()
        .filter(|id| !id.is_host())
        .all(BundleEntryId::is_hip);
    if hosts > 1 || (hosts == 0 && !all_hip) {
        return Err(Error::BundleHostCount { count: hosts });
    }
    Ok(())
}

/// One entry of a bundle as recorded in its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleEntryInfo {
    /// The ID exactly as stored in the file.
    pub id: String,
    /// Absolute offset of the data.
    pub offset: u64,
    pub size: u64,
}

impl BundleEntryInfo {
    /// The stored ID, parsed and normalized.
    pub fn entry_id(&self) -> Result<BundleEntryId> {
        BundleEntryId::parse(&self.id)
    }
}

/// One entry with its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleEntry<'a> {
    pub id: String,
    pub data: Cow<'a, [u8]>,
}

impl BundleEntry<'_> {
    /// A copy owning its data.
    pub fn into_owned(self) -> BundleEntry<'static> {
        BundleEntry {
            id: self.id,
            data: Cow::Owned(self.data.into_owned()),
        }
    }
}

/// Whether `bytes` start with the binary bundle magic.
pub fn is_binary_bundle(bytes: &[u8]) -> bool {
    bytes.starts_with(BUNDLE_MAGIC)
}

fn read_u64<R: Read>(r: &mut R, at: u64, file_len: u64, what: &'static str) -> Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)
        .map_err(|e| truncated_or_io(e, at, file_len, what))?;
    Ok(u64::from_le_bytes(b))
}

fn truncated_or_io(e: io::Error, offset: u64, file_len: u64, what: &'static str) -> Error {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        Error::BundleTruncated {
            offset,
            what,
            file_len,
        }
    } else {
        Error::Io(e)
    }
}

/// Reads the header of a binary-layout bundle from a stream positioned at the bundle start,
/// whose total length is `file_len`. Every entry's range is checked against `file_len`; no
/// allocation is sized by an unchecked field.
pub fn read_binary_header<R: Read>(mut r: R, file_len: u64) -> Result<Vec<BundleEntryInfo>> {
    let mut magic = [0u8; 24];
    r.read_exact(&mut magic)
        .map_err(|e| truncated_or_io(e, 0, file_len, "magic"))?;
    if &magic != BUNDLE_MAGIC {
        return Err(Error::BundleBadMagic { offset: 0 });
    }
    let count = read_u64(&mut r, 24, file_len, "entry count")?;
    // Each entry needs at least 24 header bytes, which bounds a believable count.
    if count > (file_len.saturating_sub(32)) / 24 {
        return Err(Error::BundleCountTooLarge {
            offset: 24,
            count,
            file_len,
        });
    }
    let mut pos = 32u64;
    let mut entries = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let entry_at = pos;
        let offset = read_u64(&mut r, pos, file_len, "entry offset")?;
        let size = read_u64(&mut r, pos + 8, file_len, "entry size")?;
        let id_len = read_u64(&mut r, pos + 16, file_len, "entry ID length")?;
        pos += 24;
        if id_len > file_len.saturating_sub(pos) {
            return Err(Error::BundleIdLengthOutOfRange {
                offset: pos - 8,
                len: id_len,
                file_len,
            });
        }
        let mut id = vec![0u8; id_len as usize];
        r.read_exact(&mut id)
            .map_err(|e| truncated_or_io(e, pos, file_len, "entry ID"))?;
        let id = String::from_utf8(id).map_err(|_| Error::BundleIdNotUtf8 { offset: pos })?;
        pos += id_len;
        if offset.checked_add(size).is_none_or(|end| end > file_len) {
            return Err(Error::BundleEntryOutOfRange {
                offset: entry_at,
                id,
                start: offset,
                size,
                file_len,
            });
        }
        entries.push(BundleEntryInfo { id, offset, size });
    }
    // Data may not overlap the header it is described by.
    for e in &entries {
        if e.size > 0 && e.offset < pos {
            return Err(Error::BundleEntryOverlapsHeader {
                id: e.id.clone(),
                start: e.offset,
                header_end: pos,
            });
        }
    }
    Ok(entries)
}

/// Parses a whole binary-layout bundle held in memory, borrowing the entries' data.
pub fn parse_binary_bundle(bytes: &[u8]) -> Result<Vec<BundleEntry<'_>>> {
    let infos = read_binary_header(bytes, bytes.len() as u64)?;
    Ok(infos
        .into_iter()
        .map(|i| BundleEntry {
            // Checked against the length by read_binary_header.
            data: Cow::Borrowed(&bytes[i.offset as usize..(i.offset + i.size) as usize]),
            id: i.id,
        })
        .collect())
}

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

/// A binary-layout bundle opened on a seekable stream; entries are copied out on demand.
#[derive(Debug)]
pub struct BundleReader<R> {
    inner: R,
    base: u64,
    entries: Vec<BundleEntryInfo>,
}

impl<R: Read + Seek> BundleReader<R> {
    /// Reads the header of the bundle starting at the stream's current position and
    /// extending to its end.
    pub fn new(mut inner: R) -> Result<Self> {
        let base = inner.stream_position()?;
        let end = inner.seek(SeekFrom::End(0))?;
        inner.seek(SeekFrom::Start(base))?;
        let entries = read_binary_header(&mut inner, end - base)?;
        Ok(BundleReader {
            inner,
            base,
            entries,
        })
    }

    /// The entries in file order.
    pub fn entries(&self) -> &[BundleEntryInfo] {
        &self.entries
    }

    /// Copies the data of entry `index` to `w`.
    pub fn copy_entry<W: Write + ?Sized>(&mut self, index: usize, w: &mut W) -> Result<()> {
        let e = self
            .entries
            .get(index)
            .ok_or(Error::BundleNoSuchEntry { index })?;
        let (offset, size) = (e.offset, e.size);
        self.inner.seek(SeekFrom::Start(self.base + offset))?;
        copy_exact(&mut self.inner, size, w)?;
        Ok(())
    }

    /// The data of entry `index`, in memory.
    pub fn read_entry(&mut self, index: usize) -> Result<Vec<u8>> {
        let mut v = Vec::new();
        self.copy_entry(index, &mut v)?;
        Ok(v)
    }

    /// The first entry whose normalized ID equals `id`'s.
    pub fn find(&self, id: &BundleEntryId) -> Option<usize> {
        self.entries
            .iter()
            .position(|e| e.entry_id().is_ok_and(|e| e == *id))
    }

    /// Entries a device requested as `target` can use (see [`BundleEntryId::is_compatible`]).
    pub fn compatible(&self, target: &BundleEntryId, hip_openmp_compatible: bool) -> Vec<usize> {
        (0..self.entries.len())
            .filter(|&i| {
                self.entries[i]
                    .entry_id()
                    .is_ok_and(|e| e.is_compatible(target, hip_openmp_compatible))
            })
            .collect()
    }

    /// The underlying stream.
    pub fn into_inner(self) -> R {
        self.inner
    }
}

/// One input to [`write_binary_bundle`]: an ID, the data size and a reader yielding exactly
/// that many bytes.
#[derive(Debug)]
pub struct BundleInput<R> {
    pub id: String,
    pub size: u64,
    pub data: R,
}

/// Offsets the binary layout gives entries of these (ID, size) pairs in order, and the total
/// size, for an alignment (1 = packed; HIP uses 4096).
pub fn binary_layout(entries: &[(&str, u64)], align: u64) -> Result<(Vec<u64>, u64)> {
    if align == 0 || !align.is_power_of_two() {
        return Err(Error::BundleBadAlignment { align });
    }
    let mut cur = 32u64;
    for (id, _) in entries {
        cur += 24 + id.len() as u64;
    }
    let mut offsets = Vec::with_capacity(entries.len());
    for (_, size) in entries {
        cur = cur.div_ceil(align) * align;
        offsets.push(cur);
        cur = cur.checked_add(*size).ok_or(Error::BundleTooLarge)?;
    }
    Ok((offsets, cur))
}

/// Writes a binary-layout bundle, streaming each input's data. IDs are written as given;
/// normalize them first with [`BundleEntryId`] (`to_string()`) to match the bundler.
/// Returns the number of bytes written.
pub fn write_binary_bundle<W: Write, R: Read>(
    mut w: W,
    inputs: Vec<BundleInput<R>>,
    align: u64,
) -> Result<u64> {
    let pairs: Vec<(&str, u64)> = inputs.iter().map(|i| (i.id.as_str(), i.size)).collect();
    let (offsets, total) = binary_layout(&pairs, align)?;
    let mut header = Vec::new();
    header.extend_from_slice(BUNDLE_MAGIC);
    header.extend_from_slice(&(inputs.len() as u64).to_le_bytes());
    for (input, off) in inputs.iter().zip(&offsets) {
        header.extend_from_slice(&off.to_le_bytes());
        header.extend_from_slice(&input.size.to_le_bytes());
        header.extend_from_slice(&(input.id.len() as u64).to_le_bytes());
        header.extend_from_slice(input.id.as_bytes());
    }
    w.write_all(&header)?;
    let mut pos = header.len() as u64;
    for (input, off) in inputs.into_iter().zip(offsets) {
        write_zeros(&mut w, off - pos)?;
        copy_exact(input.data, input.size, &mut w)?;
        pos = off + input.size;
    }
    Ok(total)
}

/// Writes a binary-layout bundle from in-memory entries.
pub fn binary_bundle_to_vec(entries: &[(&str, &[u8])], align: u64) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let inputs = entries
        .iter()
        .map(|(id, data)| BundleInput {
            id: (*id).to_owned(),
            size: data.len() as u64,
            data: *data,
        })
        .collect();
    write_binary_bundle(&mut out, inputs, align)?;
    Ok(out)
}

/// The text file types and their comment markers.
pub const TEXT_TYPES: &[(&str, &str)] = &[
    ("i", "//"),
    ("ii", "//"),
    ("cui", "//"),
    ("hipi", "//"),
    ("d", "#"),
    ("ll", ";"),
    ("s", "#"),
];

/// The comment marker for a text file type (`i ii cui hipi d ll s`).
pub fn text_comment(file_type: &str) -> Result<&'static str> {
    TEXT_TYPES
        .iter()
        .find(|(t, _)| *t == file_type)
        .map(|&(_, c)| c)
        .ok_or_else(|| Error::BundleUnknownTextType {
            file_type: file_type.to_owned(),
        })
}

fn start_marker(comment: &str) -> String {
    format!("\n{comment} __CLANG_OFFLOAD_BUNDLE____START__ ")
}
fn end_marker(comment: &str) -> String {
    format!("\n{comment} __CLANG_OFFLOAD_BUNDLE____END__ ")
}

/// Writes one text-layout entry.
pub fn write_text_entry<W: Write + ?Sized>(
    w: &mut W,
    comment: &str,
    id: &str,
    data: &[u8],
) -> io::Result<()> {
    w.write_all(start_marker(comment).as_bytes())?;
    w.write_all(id.as_bytes())?;
    w.write_all(b"\n")?;
    w.write_all(data)?;
    w.write_all(end_marker(comment).as_bytes())?;
    w.write_all(id.as_bytes())?;
    w.write_all(b"\n")
}

/// Writes a text-layout bundle of `file_type` (`i ii cui hipi d ll s`).
pub fn write_text_bundle<W: Write>(
    mut w: W,
    file_type: &str,
    entries: &[(&str, &[u8])],
) -> Result<()> {
    let comment = text_comment(file_type)?;
    for (id, data) in entries {
        write_text_entry(&mut w, comment, id, data)?;
    }
    Ok(())
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > hay.len() {
        return None;
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// Parses a text-layout bundle of `file_type`: each entry's ID runs from the start marker to
/// the end of its line, its contents up to the matching end marker. A file without any start
/// marker has no entries.
pub fn parse_text_bundle<'a>(bytes: &'a [u8], file_type: &str) -> Result<Vec<BundleEntry<'a>>> {
    let comment = text_comment(file_type)?;
    let start = start_marker(comment);
    let end = end_marker(comment);
    let mut out = Vec::new();
    let mut pos = 0usize;
    while let Some(s) = find(bytes, start.as_bytes(), pos) {
        let id_at = s + start.len();
        let nl = bytes[id_at..].iter().position(|&b| b == b'\n').ok_or(
            Error::TextBundleUnterminatedId {
                offset: id_at as u64,
            },
        )?;
        let id = std::str::from_utf8(&bytes[id_at..id_at + nl])
            .map_err(|_| Error::BundleIdNotUtf8 {
                offset: id_at as u64,
            })?
            .to_owned();
        let data_at = id_at + nl + 1;
        let mut end_line = end.clone().into_bytes();
        end_line.extend_from_slice(id.as_bytes());
        end_line.push(b'\n');
        let e = find(bytes, &end_line, data_at).ok_or_else(|| Error::TextBundleMissingEnd {
            offset: s as u64,
            id: id.clone(),
        })?;
        out.push(BundleEntry {
            id,
            data: Cow::Borrowed(&bytes[data_at..e]),
        });
        pos = e + end_line.len();
    }
    Ok(out)
}

/// The entries of an object-layout bundle: every section named `__CLANG_OFFLOAD_BUNDLE__<id>`
/// of an ELF object, in section order. The host entry's section holds a single zero byte; its
/// real contents are the object without these sections (see [`objcopy_args`]).
pub fn parse_object_bundle(bytes: &[u8]) -> Result<Vec<BundleEntry<'_>>> {
    // The ELF reader needs aligned headers; archive members are only 2-aligned. A fresh
    // allocation is aligned for any ELF structure.
    if bytes.as_ptr().align_offset(8) != 0 {
        let copy = bytes.to_vec();
        return Ok(parse_aligned_object_bundle(&copy)?
            .into_iter()
            .map(BundleEntry::into_owned)
            .collect());
    }
    parse_aligned_object_bundle(bytes)
}

fn parse_aligned_object_bundle(bytes: &[u8]) -> Result<Vec<BundleEntry<'_>>> {
    use object::{Object, ObjectSection};
    let file = object::File::parse(bytes).map_err(|e| Error::ObjectParse {
        reason: e.to_string(),
    })?;
    let mut out = Vec::new();
    for section in file.sections() {
        let Ok(name) = section.name_bytes() else {
            continue;
        };
        let Some(id) = name.strip_prefix(OBJECT_SECTION_PREFIX.as_bytes()) else {
            continue;
        };
        let offset = section.file_range().map_or(0, |(o, _)| o);
        let id = std::str::from_utf8(id)
            .map_err(|_| Error::BundleIdNotUtf8 { offset })?
            .to_owned();
        let data = section.data().map_err(|e| Error::ObjectSection {
            id: id.clone(),
            reason: e.to_string(),
        })?;
        out.push(BundleEntry {
            id,
            data: Cow::Borrowed(data),
        });
    }
    Ok(out)
}

/// The `llvm-objcopy` arguments clang-offload-bundler uses to write the object layout: add
/// one `__CLANG_OFFLOAD_BUNDLE__<id>` section per entry (file given as the path of the entry's
/// data; for the host entry a file holding one zero byte), marked `readonly,exclude`, then the
/// host object and the output. This crate does not run tools; the caller runs
/// `llvm-objcopy` with these arguments.
pub fn objcopy_args(
    entries: &[(&str, &std::path::Path)],
    host_object: &std::path::Path,
    output: &std::path::Path,
) -> Vec<std::ffi::OsString> {
    let mut args = Vec::new();
    for (id, path) in entries {
        let mut a = std::ffi::OsString::from(format!("--add-section={OBJECT_SECTION_PREFIX}{id}="));
        a.push(path.as_os_str());
        args.push(a);
        args.push(
            format!("--set-section-flags={OBJECT_SECTION_PREFIX}{id}=readonly,exclude").into(),
        );
    }
    args.push("--".into());
    args.push(host_object.as_os_str().to_owned());
    args.push(output.as_os_str().to_owned());
    args
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
