//! The panic-site table of a GPU image: what the device link knows of each place a kernel can
//! panic (the kind of panic, its literal message, file, line and column), so that a panicking
//! GPU thread records only a site number and the panic's raw values. Copying strings on the
//! device costs every kernel that can panic registers it never uses on its hot path; the host
//! reads the table when it loads the module and words the report from it.
//!
//! The table is the global [`SYMBOL`], little-endian bytes:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `OPS1` |
//! | 4 | 4 | the table's ID ([`PanicSites::id`]): a hash of the rest, never 0 |
//! | 8 | 4 | number of sites |
//! | 12 | 4 | bytes of text after the entries |
//! | 16 | 24 × sites | entries: kind, line, column, message length, file length, text offset (each `u32`; the message's bytes then the file's, from the text's start) |
//! | … | | the text, UTF-8 |
//!
//! A thread records [`site_value`]: the table's ID in the high 32 bits, the site's index plus
//! one in the low ones, so the host finds the site whichever loaded module's table it is in.

use std::collections::HashMap;

use crate::error::{Error, Result};

/// Symbol of a GPU image's panic-site table.
pub const SYMBOL: &str = crate::abi::PANIC_SITES_SYMBOL;

const MAGIC: [u8; 4] = *b"OPS1";
const HEADER: usize = 16;
const ENTRY: usize = 24;

/// One place a kernel can panic.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PanicSite {
    /// What the record's values mean: offload-rt's `PanicKind` as `u32`.
    pub kind: u32,
    /// The literal message, empty when the kind's wording is the host's.
    pub message: String,
    /// The source file.
    pub file: String,
    /// Line, 1-based.
    pub line: u32,
    /// Column, 1-based.
    pub column: u32,
}

/// A module's panic sites, as the device link writes them and the runtime reads them.
#[derive(Debug, Clone, Default)]
pub struct PanicSites {
    sites: Vec<PanicSite>,
    /// Each distinct site's index in `sites`, for [`PanicSites::intern`].
    index: HashMap<PanicSite, usize>,
}

impl PartialEq for PanicSites {
    fn eq(&self, other: &Self) -> bool {
        self.sites == other.sites
    }
}

impl Eq for PanicSites {}

/// What a thread records for site `index` of the table `id`.
pub fn site_value(id: u32, index: usize) -> u64 {
    (u64::from(id) << 32) | (index as u64 + 1)
}

/// The table ID and site index of a recorded value; `None` for 0 (no site: the record holds
/// its own text).
pub fn split_site_value(value: u64) -> Option<(u32, usize)> {
    let index = (value & u64::from(u32::MAX)).checked_sub(1)?;
    Some(((value >> 32) as u32, index as usize))
}

impl PanicSites {
    /// The sites, in index order.
    pub fn sites(&self) -> &[PanicSite] {
        &self.sites
    }

    /// The site at `index`.
    pub fn get(&self, index: usize) -> Option<&PanicSite> {
        self.sites.get(index)
    }

    /// The index of `site`, added if it is new.
    pub fn intern(&mut self, site: PanicSite) -> usize {
        if let Some(&index) = self.index.get(&site) {
            return index;
        }
        let index = self.sites.len();
        self.index.insert(site.clone(), index);
        self.sites.push(site);
        index
    }

    /// The table's ID: FNV-1a of its entries and text, never 0. Two tables with one ID describe
    /// the same sites (or collide with a chance of one in four billion).
    pub fn id(&self) -> u32 {
        let (entries, text) = self.body();
        id_of(&entries, &text)
    }

    /// The table's bytes.
    ///
    /// # Errors
    /// [`Error::PanicSites`] when the text passes 4 GiB.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let (entries, text) = self.body();
        let too_large = || Error::PanicSites {
            offset: 0,
            reason: "the sites' text passes 4 GiB".into(),
        };
        let count = u32::try_from(self.sites.len()).map_err(|_| too_large())?;
        let text_len = u32::try_from(text.len()).map_err(|_| too_large())?;
        let mut out = Vec::with_capacity(HEADER + entries.len() + text.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&id_of(&entries, &text).to_le_bytes());
        out.extend_from_slice(&count.to_le_bytes());
        out.extend_from_slice(&text_len.to_le_bytes());
        out.extend_from_slice(&entries);
        out.extend_from_slice(&text);
        Ok(out)
    }

    fn body(&self) -> (Vec<u8>, Vec<u8>) {
        let mut entries = Vec::with_capacity(self.sites.len() * ENTRY);
        let mut text = Vec::new();
        for site in &self.sites {
            let offset = text.len() as u32;
            text.extend_from_slice(site.message.as_bytes());
            text.extend_from_slice(site.file.as_bytes());
            for field in [
                site.kind,
                site.line,
                site.column,
                site.message.len() as u32,
                site.file.len() as u32,
                offset,
            ] {
                entries.extend_from_slice(&field.to_le_bytes());
            }
        }
        (entries, text)
    }

    /// Reads a table, returning its ID and sites. Bytes after the text (a global's padding)
    /// are ignored.
    ///
    /// # Errors
    /// [`Error::PanicSites`] naming the offset of what is wrong: the magic, an entry or the
    /// text out of the bytes, a string out of the text or not UTF-8, an ID that is not the
    /// hash of the rest.
    pub fn parse(bytes: &[u8]) -> Result<(u32, PanicSites)> {
        let bad = |offset: usize, reason: String| Error::PanicSites {
            offset: offset as u64,
            reason,
        };
        let word = |offset: usize| -> Result<u32> {
            bytes
                .get(offset..offset + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .ok_or_else(|| {
                    bad(
                        offset,
                        format!("truncated: {} bytes, a field needs 4", bytes.len()),
                    )
                })
        };
        if bytes.get(..4) != Some(&MAGIC[..]) {
            return Err(bad(0, "not a panic-site table (no `OPS1` magic)".into()));
        }
        let (id, count, text_len) = (word(4)?, word(8)?, word(12)? as usize);
        let entries_end = (count as usize)
            .checked_mul(ENTRY)
            .and_then(|n| n.checked_add(HEADER))
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| {
                bad(
                    8,
                    format!(
                        "{count} sites do not fit in a table of {} bytes",
                        bytes.len()
                    ),
                )
            })?;
        let text = entries_end
            .checked_add(text_len)
            .and_then(|end| bytes.get(entries_end..end))
            .ok_or_else(|| {
                bad(
                    12,
                    format!(
                        "{text_len} bytes of text from offset {entries_end} do not fit in a table of {} bytes",
                        bytes.len()
                    ),
                )
            })?;
        if id != id_of(&bytes[HEADER..entries_end], text) {
            return Err(bad(4, format!("ID {id:#010x} is not the table's hash")));
        }
        let mut sites = Vec::with_capacity(count as usize);
        for entry in (HEADER..entries_end).step_by(ENTRY) {
            let [kind, line, column, message_len, file_len, offset] =
                [0, 4, 8, 12, 16, 20].map(|at| word(entry + at));
            let (message_len, file_len, offset) =
                (message_len? as usize, file_len? as usize, offset? as usize);
            let string = |start: usize, len: usize| -> Result<String> {
                let slice = start
                    .checked_add(len)
                    .and_then(|end| text.get(start..end))
                    .ok_or_else(|| {
                        bad(
                            entry + 20,
                            format!(
                                "a string at {start}..+{len} passes the text's {text_len} bytes"
                            ),
                        )
                    })?;
                String::from_utf8(slice.to_vec())
                    .map_err(|_| bad(entries_end + start, "a string is not UTF-8".into()))
            };
            sites.push(PanicSite {
                kind: kind?,
                line: line?,
                column: column?,
                message: string(offset, message_len)?,
                file: string(offset.saturating_add(message_len), file_len)?,
            });
        }
        let mut index = HashMap::with_capacity(sites.len());
        for (i, site) in sites.iter().enumerate() {
            index.entry(site.clone()).or_insert(i);
        }
        Ok((id, PanicSites { sites, index }))
    }
}

fn id_of(entries: &[u8], text: &[u8]) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for &byte in entries.iter().chain(text) {
        hash = (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193);
    }
    hash.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sites() -> PanicSites {
        let mut sites = PanicSites::default();
        sites.intern(PanicSite {
            kind: 1,
            message: String::new(),
            file: "src/lib.rs".into(),
            line: 12,
            column: 9,
        });
        sites.intern(PanicSite {
            kind: 0,
            message: "attempt to divide by zero".into(),
            file: "src/lib.rs".into(),
            line: 40,
            column: 5,
        });
        sites
    }

    #[test]
    fn tables_read_back_as_written() {
        let sites = sites();
        let bytes = sites.to_bytes().unwrap();
        let (id, read) = PanicSites::parse(&bytes).unwrap();
        assert_eq!((id, &read), (sites.id(), &sites));
        // A global's padding after the text is ignored.
        let mut padded = bytes.clone();
        padded.extend_from_slice(&[0; 5]);
        assert_eq!(PanicSites::parse(&padded).unwrap().1, sites);
    }

    #[test]
    fn the_same_site_is_interned_once() {
        let mut sites = sites();
        let again = sites.sites()[1].clone();
        assert_eq!(sites.intern(again), 1);
        assert_eq!(sites.sites().len(), 2);
    }

    #[test]
    fn site_values_name_the_table_and_the_site() {
        let value = site_value(0xdead_beef, 0);
        assert_eq!(value, 0xdead_beef_0000_0001);
        assert_eq!(split_site_value(value), Some((0xdead_beef, 0)));
        assert_eq!(split_site_value(0), None);
    }

    #[test]
    fn damaged_tables_are_typed_errors_naming_the_offset() {
        let bytes = sites().to_bytes().unwrap();
        let offset_of = |bytes: &[u8]| match PanicSites::parse(bytes) {
            Err(Error::PanicSites { offset, .. }) => offset,
            other => panic!("expected a PanicSites error, got {other:?}"),
        };
        assert_eq!(offset_of(b"ELF\0"), 0);
        assert_eq!(offset_of(&bytes[..6]), 4);
        assert_eq!(offset_of(&bytes[..HEADER + 3]), 8);
        assert_eq!(offset_of(&bytes[..bytes.len() - 1]), 12);
        let mut changed = bytes.clone();
        *changed.last_mut().unwrap() ^= 1;
        assert_eq!(offset_of(&changed), 4);
        // Every prefix and every one-byte change is an error or a table, never a panic.
        for len in 0..bytes.len() {
            let _ = PanicSites::parse(&bytes[..len]);
        }
        for at in 0..bytes.len() {
            let mut changed = bytes.clone();
            changed[at] = changed[at].wrapping_add(0x41);
            let _ = PanicSites::parse(&changed);
        }
    }
}
