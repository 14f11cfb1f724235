//! The text layout, for `i ii cui hipi d ll s`: entries between comment markers.

use std::borrow::Cow;
use std::io::{self, Write};

use super::entry::BundleEntry;
use crate::error::{Error, Result};

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
