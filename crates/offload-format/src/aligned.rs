//! Object files at an address the ELF reader accepts. The `object` crate reads ELF headers in
//! place and refuses data that is not aligned for them, but an archive member starts at any
//! even offset and a section's contents at any offset its object gives: such data is copied to
//! an 8-aligned buffer first, never skipped.

use std::ops::Deref;

/// The alignment of every ELF structure the reader maps (64-bit headers and symbols).
const ELF_ALIGN: usize = 8;

/// `bytes`, or an aligned copy of them. Dereferences to the bytes.
#[derive(Debug)]
pub enum ObjectBytes<'a> {
    /// The caller's bytes, already aligned.
    Borrowed(&'a [u8]),
    /// A copy at `buf[start..start + len]`, aligned.
    Copied {
        /// The allocation, `ELF_ALIGN - 1` bytes longer than the data.
        buf: Vec<u8>,
        /// Where the aligned copy starts in `buf`.
        start: usize,
        /// Bytes copied.
        len: usize,
    },
}

impl ObjectBytes<'_> {
    /// Whether the bytes had to be copied (anything borrowed from them must be made owned).
    pub fn is_copy(&self) -> bool {
        matches!(self, ObjectBytes::Copied { .. })
    }
}

impl Deref for ObjectBytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            ObjectBytes::Borrowed(b) => b,
            ObjectBytes::Copied { buf, start, len } => &buf[*start..*start + *len],
        }
    }
}

/// `bytes` where the ELF reader can parse them in place: borrowed when they are 8-aligned,
/// else copied (an archive member's data, a section inside another object).
pub fn object_bytes(bytes: &[u8]) -> ObjectBytes<'_> {
    if bytes.as_ptr().align_offset(ELF_ALIGN) == 0 {
        return ObjectBytes::Borrowed(bytes);
    }
    let mut buf = vec![0u8; bytes.len() + ELF_ALIGN - 1];
    // At run time `align_offset` on a byte pointer is exact and below `ELF_ALIGN`; the
    // fallback keeps any other answer in bounds (the reader then reports, never skips).
    let start = buf.as_ptr().align_offset(ELF_ALIGN).min(ELF_ALIGN - 1);
    buf[start..start + bytes.len()].copy_from_slice(bytes);
    ObjectBytes::Copied {
        buf,
        start,
        len: bytes.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misaligned_bytes_are_copied_aligned_and_equal() {
        let backing = [7u64; 4];
        let words: Vec<u8> = backing.iter().flat_map(|w| w.to_le_bytes()).collect();
        for skip in 0..8 {
            let data = &words[skip..];
            let aligned = object_bytes(data);
            assert_eq!(&*aligned, data);
            assert_eq!(aligned.as_ptr().align_offset(ELF_ALIGN), 0);
            assert_eq!(
                aligned.is_copy(),
                data.as_ptr().align_offset(ELF_ALIGN) != 0
            );
        }
    }
}
