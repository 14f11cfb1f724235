//! The binary layout (`__CLANG_OFFLOAD_BUNDLE__`, any `-bundle-align`): read from memory or a
//! `Read + Seek` stream, written streaming from `Read` sources of known size.

use std::borrow::Cow;
use std::io::{self, Read, Seek, SeekFrom, Write};

use super::entry::{BUNDLE_MAGIC, BundleEntry, BundleEntryInfo};
use super::id::BundleEntryId;
use crate::error::{Error, Result};
use crate::offload_binary::{copy_exact, write_zeros};

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
    /// The entry ID, written as given.
    pub id: String,
    /// Number of bytes `data` yields.
    pub size: u64,
    /// The entry's contents.
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
