//! Compressed offload bundles ("CCOB"): versions 1, 2 and 3 read, 2 and 3 written; zlib and
//! zstd; the MD5-based hash written and checked.

use std::io::{Read, Write};

use crate::error::{Error, Result};

/// The four magic bytes.
pub const CCOB_MAGIC: &[u8; 4] = b"CCOB";
/// The version clang-22 writes by default.
pub const DEFAULT_VERSION: u16 = 3;

/// `llvm::compression::Format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompressionMethod {
    /// zlib, on-disk value 0.
    Zlib,
    /// zstd, on-disk value 1.
    Zstd,
}

impl CompressionMethod {
    /// The on-disk value: zlib 0, zstd 1.
    pub fn to_u16(self) -> u16 {
        match self {
            CompressionMethod::Zlib => 0,
            CompressionMethod::Zstd => 1,
        }
    }

    /// The method for an on-disk value.
    pub fn from_u16(v: u16) -> Option<Self> {
        match v {
            0 => Some(CompressionMethod::Zlib),
            1 => Some(CompressionMethod::Zstd),
            _ => None,
        }
    }

    /// The level LLVM uses by default: zstd 3, zlib 6.
    pub fn default_level(self) -> i32 {
        match self {
            CompressionMethod::Zlib => 6,
            CompressionMethod::Zstd => 3,
        }
    }
}

/// A parsed CCOB header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CcobHeader {
    /// Format version: 1, 2 or 3.
    pub version: u16,
    /// How the data is compressed.
    pub method: CompressionMethod,
    /// Header plus compressed data; absent in version 1.
    pub total_size: Option<u64>,
    /// Size of the decompressed bundle, in bytes.
    pub uncompressed_size: u64,
    /// `MD5(uncompressed)` bytes 0..8 as a little-endian u64.
    pub hash: u64,
}

impl CcobHeader {
    /// Header size of a version: 20, 24 or 32.
    pub fn size_for_version(version: u16) -> Option<usize> {
        match version {
            1 => Some(20),
            2 => Some(24),
            3 => Some(32),
            _ => None,
        }
    }

    /// Offset of the uncompressed-size field in a header of `version`: 8, 12 or 16.
    pub fn uncompressed_size_offset(version: u16) -> u64 {
        match version {
            1 => 8,
            2 => 12,
            _ => 16,
        }
    }

    /// Parses a header at the start of `bytes`; `base` is added to offsets in errors.
    pub fn parse(bytes: &[u8], base: u64) -> Result<(CcobHeader, usize)> {
        if !bytes.starts_with(CCOB_MAGIC) {
            return Err(Error::CcobBadMagic { offset: base });
        }
        let truncated = |needed: usize| Error::CcobTruncated {
            offset: base,
            needed: needed as u64,
            available: bytes.len() as u64,
        };
        if bytes.len() < 8 {
            return Err(truncated(8));
        }
        let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
        let u32_at = |at: usize| {
            u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        let u64_at = |at: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(a)
        };
        let version = u16_at(4);
        let header_size = Self::size_for_version(version).ok_or(Error::CcobUnsupportedVersion {
            offset: base + 4,
            version,
        })?;
        if bytes.len() < header_size {
            return Err(truncated(header_size));
        }
        let raw_method = u16_at(6);
        let method = CompressionMethod::from_u16(raw_method).ok_or(Error::CcobUnknownMethod {
            offset: base + 6,
            method: raw_method,
        })?;
        let (total_size, uncompressed_size, hash) = match version {
            1 => (None, u64::from(u32_at(8)), u64_at(12)),
            2 => (
                Some(u64::from(u32_at(8))),
                u64::from(u32_at(12)),
                u64_at(16),
            ),
            _ => (Some(u64_at(8)), u64_at(16), u64_at(24)),
        };
        if let Some(total) = total_size
            && (total < header_size as u64 || total > bytes.len() as u64)
        {
            return Err(Error::CcobTotalSizeOutOfRange {
                offset: base + 8,
                total_size: total,
                available: bytes.len() as u64,
            });
        }
        Ok((
            CcobHeader {
                version,
                method,
                total_size,
                uncompressed_size,
                hash,
            },
            header_size,
        ))
    }

    /// Serializes the header; `None` when a size does not fit the version's field.
    pub fn to_bytes(&self) -> Option<Vec<u8>> {
        let mut h = Vec::with_capacity(32);
        h.extend_from_slice(CCOB_MAGIC);
        h.extend_from_slice(&self.version.to_le_bytes());
        h.extend_from_slice(&self.method.to_u16().to_le_bytes());
        match self.version {
            1 => h.extend_from_slice(&u32::try_from(self.uncompressed_size).ok()?.to_le_bytes()),
            2 => {
                h.extend_from_slice(&u32::try_from(self.total_size?).ok()?.to_le_bytes());
                h.extend_from_slice(&u32::try_from(self.uncompressed_size).ok()?.to_le_bytes());
            }
            3 => {
                h.extend_from_slice(&self.total_size?.to_le_bytes());
                h.extend_from_slice(&self.uncompressed_size.to_le_bytes());
            }
            _ => return None,
        }
        h.extend_from_slice(&self.hash.to_le_bytes());
        Some(h)
    }
}

/// The hash stored in CCOB headers: the first 8 bytes of the MD5 digest, little-endian.
pub fn ccob_hash(data: &[u8]) -> u64 {
    let digest = md5::compute(data);
    let mut a = [0u8; 8];
    a.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(a)
}

/// Whether `bytes` start with the CCOB magic.
pub fn is_compressed(bytes: &[u8]) -> bool {
    bytes.starts_with(CCOB_MAGIC)
}

/// How to compress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompressOptions {
    /// 2 or 3.
    pub version: u16,
    /// How to compress the data.
    pub method: CompressionMethod,
    /// `None` for the method's default (zstd 3, zlib 6).
    pub level: Option<i32>,
}

impl Default for CompressOptions {
    /// What clang-22 writes: version 3, zstd level 3.
    fn default() -> Self {
        CompressOptions {
            version: DEFAULT_VERSION,
            method: CompressionMethod::Zstd,
            level: None,
        }
    }
}

struct HashingReader<R> {
    inner: R,
    md5: md5::Context,
    len: u64,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.md5.consume(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
}

/// Compresses a bundle read from `data` into one CCOB blob written to `w`, in one pass over
/// the input (the compressed bytes are buffered, since the header that precedes them holds
/// their size). Returns the number of bytes written.
pub fn compress_stream<R: Read, W: Write>(data: R, mut w: W, opts: CompressOptions) -> Result<u64> {
    if opts.version != 2 && opts.version != 3 {
        return Err(Error::CcobUnsupportedVersion {
            offset: 4,
            version: opts.version,
        });
    }
    let level = opts.level.unwrap_or(opts.method.default_level());
    let mut src = HashingReader {
        inner: data,
        md5: md5::Context::new(),
        len: 0,
    };
    let mut compressed = Vec::new();
    compress_payload(opts.method, level, &mut src, &mut compressed)?;
    let digest = src.md5.finalize();
    let mut a = [0u8; 8];
    a.copy_from_slice(&digest[..8]);
    let header_size = CcobHeader::size_for_version(opts.version).unwrap_or(32) as u64;
    let total = header_size + compressed.len() as u64;
    let header = CcobHeader {
        version: opts.version,
        method: opts.method,
        total_size: Some(total),
        uncompressed_size: src.len,
        hash: u64::from_le_bytes(a),
    };
    let bytes = header.to_bytes().ok_or(Error::CcobTooLargeForVersion {
        version: opts.version,
        size: src.len.max(total),
    })?;
    w.write_all(&bytes)?;
    w.write_all(&compressed)?;
    Ok(total)
}

#[cfg(feature = "compression")]
fn compress_payload(
    method: CompressionMethod,
    level: i32,
    src: &mut impl Read,
    compressed: &mut Vec<u8>,
) -> std::io::Result<()> {
    match method {
        CompressionMethod::Zstd => {
            let mut enc = zstd::stream::Encoder::new(compressed, level)?;
            enc.long_distance_matching(true)?;
            std::io::copy(src, &mut enc)?;
            enc.finish()?;
        }
        CompressionMethod::Zlib => {
            let level = flate2::Compression::new(level.clamp(0, 9) as u32);
            let mut enc = flate2::write::ZlibEncoder::new(compressed, level);
            std::io::copy(src, &mut enc)?;
            enc.finish()?;
        }
    }
    Ok(())
}

#[cfg(feature = "compression")]
fn decompress_payload(
    method: CompressionMethod,
    payload: &[u8],
    limit: u64,
    out: &mut Vec<u8>,
) -> std::io::Result<usize> {
    match method {
        CompressionMethod::Zstd => {
            zstd::stream::Decoder::with_buffer(payload).and_then(|d| d.take(limit).read_to_end(out))
        }
        CompressionMethod::Zlib => flate2::read::ZlibDecoder::new(payload)
            .take(limit)
            .read_to_end(out),
    }
}

#[cfg(not(feature = "compression"))]
fn without_compression() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "offload-format was built without its `compression` feature",
    )
}

#[cfg(not(feature = "compression"))]
fn compress_payload(
    _: CompressionMethod,
    _: i32,
    _: &mut impl Read,
    _: &mut Vec<u8>,
) -> std::io::Result<()> {
    Err(without_compression())
}

#[cfg(not(feature = "compression"))]
fn decompress_payload(
    _: CompressionMethod,
    _: &[u8],
    _: u64,
    _: &mut Vec<u8>,
) -> std::io::Result<usize> {
    Err(without_compression())
}

/// Compresses an in-memory bundle into one CCOB blob.
pub fn compress(data: &[u8], opts: CompressOptions) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    compress_stream(data, &mut out, opts)?;
    Ok(out)
}

/// Decompresses the CCOB blob at the start of `bytes`, checking its size and hash. Returns
/// the data and the blob's length (the rest of the buffer for version 1, which records none).
pub fn decompress(bytes: &[u8]) -> Result<(Vec<u8>, usize)> {
    decompress_at(bytes, 0)
}

fn decompress_at(bytes: &[u8], base: u64) -> Result<(Vec<u8>, usize)> {
    let (h, header_size) = CcobHeader::parse(bytes, base)?;
    let end = h.total_size.map_or(bytes.len(), |t| t as usize);
    let payload = &bytes[header_size..end];
    let data_at = base + header_size as u64;
    // Never allocate by the header's claim: read at most one byte more than it to detect a
    // mismatch, growing the buffer only as real data arrives.
    let limit = h.uncompressed_size.saturating_add(1);
    let mut out = Vec::new();
    decompress_payload(h.method, payload, limit, &mut out).map_err(|e| Error::CcobDecompress {
        offset: data_at,
        reason: e.to_string(),
    })?;
    if out.len() as u64 != h.uncompressed_size {
        return Err(Error::CcobSizeMismatch {
            offset: base + CcobHeader::uncompressed_size_offset(h.version),
            expected: h.uncompressed_size,
            actual: out.len() as u64,
        });
    }
    let hash = ccob_hash(&out);
    if hash != h.hash {
        return Err(Error::CcobHashMismatch {
            offset: base + header_size as u64 - 8,
            expected: h.hash,
            actual: hash,
        });
    }
    Ok((out, end))
}

/// Decompresses every CCOB blob stored back to back (as when several compressed bundles end
/// up in one section); zero padding between and after blobs is skipped.
pub fn decompress_all(bytes: &[u8]) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        let Some(skip) = rest.iter().position(|&b| b != 0) else {
            break;
        };
        pos += skip;
        let (data, used) = decompress_at(&bytes[pos..], pos as u64)?;
        out.push(data);
        pos += used;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut v = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
        v.extend((0..20000u32).map(|i| (i % 251) as u8));
        v
    }

    #[test]
    #[cfg_attr(miri, ignore = "zstd and zlib are C code, which Miri cannot run")]
    fn round_trip_every_version_and_method() {
        let data = sample();
        for version in [2, 3] {
            for method in [CompressionMethod::Zlib, CompressionMethod::Zstd] {
                let blob = compress(
                    &data,
                    CompressOptions {
                        version,
                        method,
                        level: None,
                    },
                )
                .unwrap();
                let (h, hs) = CcobHeader::parse(&blob, 0).unwrap();
                assert_eq!(hs, CcobHeader::size_for_version(version).unwrap());
                assert_eq!(h.total_size, Some(blob.len() as u64));
                assert_eq!(h.uncompressed_size, data.len() as u64);
                assert_eq!(h.hash, ccob_hash(&data));
                let (back, used) = decompress(&blob).unwrap();
                assert_eq!((back, used), (data.clone(), blob.len()));
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "zstd and zlib are C code, which Miri cannot run")]
    fn version_one_is_read() {
        let data = sample();
        let payload = zstd::bulk::compress(&data, 3).unwrap();
        let h = CcobHeader {
            version: 1,
            method: CompressionMethod::Zstd,
            total_size: None,
            uncompressed_size: data.len() as u64,
            hash: ccob_hash(&data),
        };
        let mut blob = h.to_bytes().unwrap();
        assert_eq!(blob.len(), 20);
        blob.extend_from_slice(&payload);
        assert_eq!(decompress(&blob).unwrap().0, data);
    }

    #[test]
    #[cfg_attr(miri, ignore = "zstd and zlib are C code, which Miri cannot run")]
    fn several_blobs_back_to_back() {
        let a = compress(b"first", CompressOptions::default()).unwrap();
        let b = compress(
            b"second",
            CompressOptions {
                version: 2,
                method: CompressionMethod::Zlib,
                level: None,
            },
        )
        .unwrap();
        let mut all = a;
        all.extend_from_slice(&[0, 0, 0]);
        all.extend_from_slice(&b);
        all.extend_from_slice(&[0; 5]);
        assert_eq!(
            decompress_all(&all).unwrap(),
            vec![b"first".to_vec(), b"second".to_vec()]
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "zstd and zlib are C code, which Miri cannot run")]
    fn bad_input() {
        let data = sample();
        let blob = compress(&data, CompressOptions::default()).unwrap();
        for cut in 0..blob.len() {
            assert!(decompress(&blob[..cut]).is_err(), "cut {cut}");
        }
        let mut bad = blob.clone();
        bad[24] ^= 1;
        assert!(matches!(
            decompress(&bad),
            Err(Error::CcobHashMismatch { offset: 24, .. })
        ));
        let mut bad = blob.clone();
        bad[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            decompress(&bad),
            Err(Error::CcobSizeMismatch { offset: 16, .. })
        ));
        let mut bad = blob.clone();
        bad[8..16].copy_from_slice(&(blob.len() as u64 + 1).to_le_bytes());
        assert!(matches!(
            decompress(&bad),
            Err(Error::CcobTotalSizeOutOfRange { offset: 8, .. })
        ));
        let mut bad = blob.clone();
        bad[6] = 7;
        assert!(matches!(
            decompress(&bad),
            Err(Error::CcobUnknownMethod {
                offset: 6,
                method: 7
            })
        ));
        let mut bad = blob.clone();
        bad[4] = 9;
        assert!(matches!(
            decompress(&bad),
            Err(Error::CcobUnsupportedVersion {
                offset: 4,
                version: 9
            })
        ));
        let mut bad = blob.clone();
        let n = bad.len();
        bad[n - 3] ^= 0x55;
        assert!(decompress(&bad).is_err());
        assert!(
            compress(
                b"x",
                CompressOptions {
                    version: 1,
                    ..Default::default()
                }
            )
            .is_err()
        );
    }
}
