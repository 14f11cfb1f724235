//! The symbols an archive index lists for an LLVM bitcode member, read from the bitcode's own
//! symbol table (the `SYMTAB_BLOCK`/`STRTAB_BLOCK` blobs LLVM writes beside the module).
//!
//! `llvm-ar` and the archives clang-offload-bundler writes index a bitcode member by the
//! module's global, defined, not format-specific symbols (`isArchiveSymbol`), in module order.
//! The bitcode symbol table records exactly those symbols and flags, so the index can be
//! rebuilt without parsing the IR. Bitcode without one (written without a registered target)
//! yields `None`.

use crate::error::{Error, Result};

const BITCODE_MAGIC: &[u8; 4] = b"BC\xc0\xde";
const WRAPPER_MAGIC: &[u8; 4] = &[0xde, 0xc0, 0x17, 0x0b];
const STRTAB_BLOCK_ID: u64 = 23;
const SYMTAB_BLOCK_ID: u64 = 25;
const FB_UNDEFINED: u32 = 1 << 3;
const FB_GLOBAL: u32 = 1 << 10;
const FB_FORMAT_SPECIFIC: u32 = 1 << 11;

/// Whether `bytes` start like LLVM bitcode (plain or in the wrapper header).
pub fn is_bitcode(bytes: &[u8]) -> bool {
    bytes.starts_with(BITCODE_MAGIC) || bytes.starts_with(WRAPPER_MAGIC)
}

struct Bits<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Bits<'a> {
    fn bad(&self) -> Error {
        Error::BitcodeMalformed {
            offset: (self.pos / 8) as u64,
        }
    }

    fn read(&mut self, width: u32) -> Result<u64> {
        if width > 64 || self.pos + width as usize > self.data.len() * 8 {
            return Err(self.bad());
        }
        let mut v = 0u64;
        for i in 0..width as usize {
            let bit = (self.data[(self.pos + i) / 8] >> ((self.pos + i) % 8)) & 1;
            v |= u64::from(bit) << i;
        }
        self.pos += width as usize;
        Ok(v)
    }

    fn vbr(&mut self, width: u32) -> Result<u64> {
        if !(2..=32).contains(&width) {
            return Err(self.bad());
        }
        let hi = 1u64 << (width - 1);
        let mut v = 0u64;
        let mut shift = 0u32;
        loop {
            let piece = self.read(width)?;
            if shift >= 64 {
                return Err(self.bad());
            }
            v |= (piece & (hi - 1)) << shift;
            if piece & hi == 0 {
                return Ok(v);
            }
            shift += width - 1;
        }
    }

    fn align32(&mut self) {
        self.pos = self.pos.div_ceil(32) * 32;
    }

    fn bytes(&mut self, n: u64) -> Result<&'a [u8]> {
        let start = self.pos / 8;
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| start.checked_add(n))
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| self.bad())?;
        self.pos = end * 8;
        Ok(&self.data[start..end])
    }
}

#[derive(Clone, Copy)]
enum Op {
    Literal,
    Fixed(u32),
    Vbr(u32),
    Array,
    Char6,
    Blob,
}

/// The first blob record of the block whose `ENTER_SUBBLOCK` was just read.
fn block_blob<'a>(b: &mut Bits<'a>, width: u32) -> Result<Option<&'a [u8]>> {
    let mut abbrevs: Vec<Vec<Op>> = Vec::new();
    loop {
        match b.read(width)? {
            0 => {
                b.align32();
                return Ok(None);
            }
            1 => return Err(b.bad()),
            2 => {
                let n = b.vbr(5)?;
                let mut ops = Vec::new();
                for _ in 0..n {
                    let op = if b.read(1)? == 1 {
                        b.vbr(8)?;
                        Op::Literal
                    } else {
                        match b.read(3)? {
                            1 => Op::Fixed(b.vbr(5)? as u32),
                            2 => Op::Vbr(b.vbr(5)? as u32),
                            3 => Op::Array,
                            4 => Op::Char6,
                            5 => Op::Blob,
                            _ => return Err(b.bad()),
                        }
                    };
                    ops.push(op);
                }
                abbrevs.push(ops);
            }
            3 => {
                b.vbr(6)?;
                let n = b.vbr(6)?;
                for _ in 0..n {
                    b.vbr(6)?;
                }
            }
            id => {
                let ops = abbrevs
                    .get(id as usize - 4)
                    .cloned()
                    .ok_or_else(|| b.bad())?;
                let mut i = 0;
                while i < ops.len() {
                    match ops[i] {
                        Op::Literal => {}
                        Op::Fixed(w) => {
                            b.read(w)?;
                        }
                        Op::Vbr(w) => {
                            b.vbr(w)?;
                        }
                        Op::Char6 => {
                            b.read(6)?;
                        }
                        Op::Array => {
                            let n = b.vbr(6)?;
                            i += 1;
                            let elem = *ops.get(i).ok_or_else(|| b.bad())?;
                            // Zero-width elements would let a forged count spin forever.
                            if matches!(elem, Op::Fixed(0)) && n > 0 {
                                return Err(b.bad());
                            }
                            for _ in 0..n {
                                match elem {
                                    Op::Fixed(w) => b.read(w).map(drop)?,
                                    Op::Vbr(w) => b.vbr(w).map(drop)?,
                                    Op::Char6 => b.read(6).map(drop)?,
                                    _ => return Err(b.bad()),
                                }
                            }
                        }
                        Op::Blob => {
                            let n = b.vbr(6)?;
                            b.align32();
                            let blob = b.bytes(n)?;
                            b.align32();
                            return Ok(Some(blob));
                        }
                    }
                    i += 1;
                }
            }
        }
    }
}

fn word(blob: &[u8], at: usize) -> Option<u32> {
    let b = blob.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// The archive-index symbols of a bitcode file, in module order; `None` when it carries no
/// bitcode symbol table.
pub fn archive_symbols(bytes: &[u8]) -> Result<Option<Vec<String>>> {
    let data = if bytes.starts_with(WRAPPER_MAGIC) {
        let off = word(bytes, 8).ok_or(Error::BitcodeMalformed { offset: 8 })? as usize;
        let size = word(bytes, 12).ok_or(Error::BitcodeMalformed { offset: 12 })? as usize;
        off.checked_add(size)
            .and_then(|end| bytes.get(off..end))
            .ok_or(Error::BitcodeMalformed { offset: 8 })?
    } else {
        bytes
    };
    if !data.starts_with(BITCODE_MAGIC) {
        return Err(Error::BitcodeMalformed { offset: 0 });
    }
    let mut b = Bits { data, pos: 32 };
    let (mut symtab, mut strtab) = (None, None);
    while b.pos + 32 <= data.len() * 8 {
        match b.read(2)? {
            1 => {}
            // Zero padding after the last block.
            0 => break,
            _ => return Err(b.bad()),
        }
        let id = b.vbr(8)?;
        let width = b.vbr(4)? as u32;
        b.align32();
        let words = b.read(32)?;
        let body_end = (b.pos / 8) as u64 + words * 4;
        if body_end > data.len() as u64 {
            return Err(b.bad());
        }
        match id {
            SYMTAB_BLOCK_ID => symtab = block_blob(&mut b, width)?,
            STRTAB_BLOCK_ID => strtab = block_blob(&mut b, width)?,
            _ => {}
        }
        b.pos = body_end as usize * 8;
    }
    let (Some(symtab), Some(strtab)) = (symtab, strtab) else {
        return Ok(None);
    };
    // irsymtab::storage::Header: Version, then {offset, size} word pairs: Producer, Modules,
    // Comdats, Symbols; each Symbol is Name, IRName (Str), ComdatIndex, Flags.
    let bad = |offset: usize| Error::BitcodeSymtabMalformed {
        offset: offset as u64,
    };
    let sym_off = word(symtab, 28).ok_or(bad(28))? as usize;
    let sym_count = word(symtab, 32).ok_or(bad(32))? as usize;
    let mut out = Vec::new();
    for i in 0..sym_count {
        let at = sym_off + i * 24;
        let name_off = word(symtab, at).ok_or(bad(at))? as usize;
        let name_len = word(symtab, at + 4).ok_or(bad(at + 4))? as usize;
        let flags = word(symtab, at + 20).ok_or(bad(at + 20))?;
        if flags & FB_GLOBAL == 0 || flags & (FB_UNDEFINED | FB_FORMAT_SPECIFIC) != 0 {
            continue;
        }
        let name = name_off
            .checked_add(name_len)
            .and_then(|end| strtab.get(name_off..end))
            .ok_or(bad(at))?;
        out.push(String::from_utf8_lossy(name).into_owned());
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damaged_bitcode_is_an_error_not_a_panic() {
        assert!(archive_symbols(b"BC").is_err());
        assert!(matches!(archive_symbols(b"BC\xc0\xde"), Ok(None)));
        let mut forged = b"BC\xc0\xde".to_vec();
        forged.extend_from_slice(&[0x35, 0x14, 0, 0, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff]);
        for cut in 0..forged.len() {
            let _ = archive_symbols(&forged[..cut]);
        }
        assert!(archive_symbols(&[0xde, 0xc0, 0x17, 0x0b, 0, 0, 0, 0, 0xff, 0, 0, 0, 9]).is_err());
    }
}
