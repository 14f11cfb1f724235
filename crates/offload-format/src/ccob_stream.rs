//! Streaming compression and decompression of CCOB blobs, for bundles too large to hold in
//! memory: [`CcobWriter`] compresses whatever is written to it and patches the header (which
//! records the compressed size and the hash of the uncompressed data) when finished;
//! [`decompress_stream`] checks size and hash while copying out.
//!
//! The MD5 hash runs on a second thread while the compressor works, so the two costs
//! overlap instead of adding up.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use crate::ccob::{CCOB_MAGIC, CcobHeader, CompressOptions, CompressionMethod};
use crate::error::{Error, Result};

/// Size of the pieces handed to the compressor and the hashing thread.
const CHUNK: usize = 1 << 20;

/// Counts the bytes going to the underlying writer.
#[derive(Debug)]
struct Counting<W> {
    inner: W,
    written: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

enum Encoder<W: Write> {
    Zstd(zstd::stream::Encoder<'static, Counting<W>>),
    Zlib(flate2::write::ZlibEncoder<Counting<W>>),
}

impl<W: Write> Encoder<W> {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Encoder::Zstd(e) => e.write_all(buf),
            Encoder::Zlib(e) => e.write_all(buf),
        }
    }
    fn finish(self) -> io::Result<Counting<W>> {
        match self {
            Encoder::Zstd(e) => e.finish(),
            Encoder::Zlib(e) => e.finish(),
        }
    }
}

/// MD5 on a thread of its own, fed full chunks; emptied buffers come back for reuse.
struct Hasher {
    to_hasher: Option<SyncSender<Vec<u8>>>,
    recycled: Receiver<Vec<u8>>,
    handle: Option<JoinHandle<[u8; 16]>>,
}

impl Hasher {
    fn spawn() -> io::Result<Hasher> {
        let (to_hasher, chunks) = sync_channel::<Vec<u8>>(2);
        let (give_back, recycled) = sync_channel::<Vec<u8>>(4);
        let handle = std::thread::Builder::new()
            .name("ccob-md5".into())
            .spawn(move || {
                let mut md5 = md5::Context::new();
                for mut chunk in chunks {
                    md5.consume(&chunk);
                    chunk.clear();
                    // The writer may have stopped taking buffers back; that is fine.
                    let _ = give_back.try_send(chunk);
                }
                md5.finalize().into()
            })?;
        Ok(Hasher {
            to_hasher: Some(to_hasher),
            recycled,
            handle: Some(handle),
        })
    }

    fn send(&mut self, chunk: Vec<u8>) -> io::Result<()> {
        self.to_hasher
            .as_ref()
            .and_then(|s| s.send(chunk).ok())
            .ok_or_else(|| io::Error::other("the hashing thread stopped"))
    }

    fn buffer(&self) -> Vec<u8> {
        self.recycled
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(CHUNK))
    }

    fn finish(mut self) -> io::Result<[u8; 16]> {
        drop(self.to_hasher.take());
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .ok_or_else(|| io::Error::other("the hashing thread stopped"))
    }
}

impl Drop for Hasher {
    fn drop(&mut self) {
        drop(self.to_hasher.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Tuning beyond [`CompressOptions`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamOptions {
    /// The number of bytes that will be written, when known: recorded in the zstd frame as
    /// `ZSTD_compress2` on a whole buffer does, and used to size the compressor's window.
    pub pledged_size: Option<u64>,
    /// Upper bound of zstd's window (log2 bytes). With long-distance matching zstd picks 27
    /// (128 MiB), which is also how much memory a streaming compressor then holds; a smaller
    /// bound trades some ratio on inputs with repeats further apart for memory. `None` keeps
    /// zstd's choice, as clang does.
    pub max_window_log: Option<u32>,
    /// zstd worker threads for inputs of at least [`MULTITHREAD_MIN`] bytes: the input is
    /// cut into jobs of [`JOB_SIZE`] compressed side by side (each job still sees the window
    /// before it), which costs a fraction of a percent in size. 0 or 1: one thread, and the
    /// bytes clang's one-shot compression gives.
    pub workers: u32,
}

/// Job size of multithreaded compression.
pub const JOB_SIZE: u32 = 8 << 20;
/// The smallest input compressed with several workers.
pub const MULTITHREAD_MIN: u64 = 4 * JOB_SIZE as u64;

/// A writer that compresses everything written to it into one CCOB blob (version 2 or 3)
/// on a seekable output. The header is written as a placeholder first and filled in by
/// [`CcobWriter::finish`]; dropping the writer without finishing leaves an invalid blob.
pub struct CcobWriter<W: Write + Seek> {
    encoder: Option<Encoder<W>>,
    hasher: Option<Hasher>,
    buf: Vec<u8>,
    len: u64,
    start: u64,
    opts: CompressOptions,
}

impl<W: Write + Seek> std::fmt::Debug for CcobWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CcobWriter")
            .field("len", &self.len)
            .field("start", &self.start)
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

impl<W: Write + Seek> CcobWriter<W> {
    /// Starts a blob at the output's current position.
    pub fn new(mut w: W, opts: CompressOptions, tuning: StreamOptions) -> Result<Self> {
        let header_size = match opts.version {
            2 | 3 => CcobHeader::size_for_version(opts.version).unwrap_or(32),
            v => {
                return Err(Error::CcobUnsupportedVersion {
                    offset: 4,
                    version: v,
                });
            }
        };
        let start = w.stream_position()?;
        w.write_all(&vec![0u8; header_size])?;
        let out = Counting {
            inner: w,
            written: header_size as u64,
        };
        let level = opts.level.unwrap_or(opts.method.default_level());
        let encoder = match opts.method {
            CompressionMethod::Zstd => {
                let mut e = zstd::stream::Encoder::new(out, level)?;
                e.long_distance_matching(true)?;
                if let Some(size) = tuning.pledged_size {
                    e.set_pledged_src_size(Some(size))?;
                    e.include_contentsize(true)?;
                }
                // Only when the bound bites: otherwise zstd sizes the window from the input
                // exactly as clang's one-shot call does, and small outputs stay identical.
                let natural = tuning
                    .pledged_size
                    .map_or(27, |s| 64 - s.max(1).leading_zeros())
                    .min(27);
                if let Some(max) = tuning.max_window_log
                    && natural > max
                {
                    e.window_log(max.max(10))?;
                }
                if tuning.workers > 1 && tuning.pledged_size.is_some_and(|s| s >= MULTITHREAD_MIN) {
                    e.multithread(tuning.workers)?;
                    e.set_parameter(zstd::stream::raw::CParameter::JobSize(JOB_SIZE))?;
                }
                Encoder::Zstd(e)
            }
            CompressionMethod::Zlib => {
                let level = flate2::Compression::new(level.clamp(0, 9) as u32);
                Encoder::Zlib(flate2::write::ZlibEncoder::new(out, level))
            }
        };
        let hasher = Hasher::spawn()?;
        let buf = hasher.buffer();
        Ok(CcobWriter {
            encoder: Some(encoder),
            hasher: Some(hasher),
            buf,
            len: 0,
            start,
            opts,
        })
    }

    fn flush_chunk(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let (Some(enc), Some(hasher)) = (self.encoder.as_mut(), self.hasher.as_mut()) else {
            return Err(io::Error::other(
                "compressed bundle writer already finished",
            ));
        };
        enc.write_all(&self.buf)?;
        let next = hasher.buffer();
        hasher.send(std::mem::replace(&mut self.buf, next))
    }

    /// Ends the compressed stream, writes the header and leaves the output positioned after
    /// the blob. Returns the output and the blob's size.
    pub fn finish(mut self) -> Result<(W, u64)> {
        self.flush_chunk()?;
        let (Some(enc), Some(hasher)) = (self.encoder.take(), self.hasher.take()) else {
            return Err(Error::Io(io::Error::other(
                "compressed bundle writer already finished",
            )));
        };
        let digest = hasher.finish()?;
        let out = enc.finish()?;
        let total = out.written;
        let mut w = out.inner;
        let mut a = [0u8; 8];
        a.copy_from_slice(&digest[..8]);
        let header = CcobHeader {
            version: self.opts.version,
            method: self.opts.method,
            total_size: Some(total),
            uncompressed_size: self.len,
            hash: u64::from_le_bytes(a),
        };
        let bytes = header.to_bytes().ok_or(Error::CcobTooLargeForVersion {
            version: self.opts.version,
            size: self.len.max(total),
        })?;
        w.flush()?;
        w.seek(SeekFrom::Start(self.start))?;
        w.write_all(&bytes)?;
        w.seek(SeekFrom::Start(self.start + total))?;
        Ok((w, total))
    }
}

impl<W: Write + Seek> Write for CcobWriter<W> {
    fn write(&mut self, mut data: &[u8]) -> io::Result<usize> {
        let n = data.len();
        while !data.is_empty() {
            let room = CHUNK - self.buf.len().min(CHUNK);
            let take = room.min(data.len());
            self.buf.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.buf.len() >= CHUNK {
                self.flush_chunk()?;
            }
        }
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Counts and hashes what passes through, refusing more than `limit` bytes.
struct Checked<W> {
    inner: W,
    md5: md5::Context,
    len: u64,
    limit: u64,
}

impl<W: Write> Write for Checked<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.len + buf.len() as u64 > self.limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "more data than the header's uncompressed size",
            ));
        }
        self.inner.write_all(buf)?;
        self.md5.consume(buf);
        self.len += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Reads a CCOB header from a stream, `available` bytes long from the header on; `base` is
/// the header's offset in the file (for error messages). Returns the header and its size.
pub fn read_header<R: Read>(mut r: R, base: u64, available: u64) -> Result<(CcobHeader, usize)> {
    let mut h = [0u8; 32];
    let truncated = |needed: u64| Error::CcobTruncated {
        offset: base,
        needed,
        available,
    };
    if available < 8 {
        return Err(truncated(8));
    }
    r.read_exact(&mut h[..8])?;
    if &h[..4] != CCOB_MAGIC {
        return Err(Error::CcobBadMagic { offset: base });
    }
    let version = u16::from_le_bytes([h[4], h[5]]);
    let size = CcobHeader::size_for_version(version).ok_or(Error::CcobUnsupportedVersion {
        offset: base + 4,
        version,
    })?;
    if available < size as u64 {
        return Err(truncated(size as u64));
    }
    r.read_exact(&mut h[8..size])?;
    let raw_method = u16::from_le_bytes([h[6], h[7]]);
    let method = CompressionMethod::from_u16(raw_method).ok_or(Error::CcobUnknownMethod {
        offset: base + 6,
        method: raw_method,
    })?;
    let u32_at =
        |at: usize| u64::from(u32::from_le_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]));
    let u64_at = |at: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&h[at..at + 8]);
        u64::from_le_bytes(a)
    };
    let (total_size, uncompressed_size, hash) = match version {
        1 => (None, u32_at(8), u64_at(12)),
        2 => (Some(u32_at(8)), u32_at(12), u64_at(16)),
        _ => (Some(u64_at(8)), u64_at(16), u64_at(24)),
    };
    if let Some(total) = total_size
        && (total < size as u64 || total > available)
    {
        return Err(Error::CcobTotalSizeOutOfRange {
            offset: base + 8,
            total_size: total,
            available,
        });
    }
    let header = CcobHeader {
        version,
        method,
        total_size,
        uncompressed_size,
        hash,
    };
    Ok((header, size))
}

/// Decompresses one CCOB blob read from `r` (positioned at its header, `available` bytes
/// long from there) into `w`, checking the uncompressed size and the hash. Memory stays
/// bounded by the compressor's window, not the data. Returns the header and the blob's
/// length.
pub fn decompress_stream<R: Read, W: Write>(
    mut r: R,
    w: W,
    base: u64,
    available: u64,
) -> Result<(CcobHeader, u64)> {
    let (h, header_size) = read_header(&mut r, base, available)?;
    let blob_len = h.total_size.unwrap_or(available);
    let payload = (&mut r).take(blob_len - header_size as u64);
    let data_at = base + header_size as u64;
    let mut out = Checked {
        inner: w,
        md5: md5::Context::new(),
        len: 0,
        limit: h.uncompressed_size,
    };
    let res = match h.method {
        CompressionMethod::Zstd => zstd::stream::read::Decoder::new(payload).and_then(|mut d| {
            d.window_log_max(31)?;
            io::copy(&mut d, &mut out)
        }),
        CompressionMethod::Zlib => io::copy(&mut flate2::read::ZlibDecoder::new(payload), &mut out),
    };
    if let Err(e) = res {
        if e.kind() == io::ErrorKind::InvalidData && out.len >= h.uncompressed_size {
            return Err(Error::CcobSizeMismatch {
                offset: base + CcobHeader::uncompressed_size_offset(h.version),
                expected: h.uncompressed_size,
                actual: out.len + 1,
            });
        }
        return Err(Error::CcobDecompress {
            offset: data_at,
            reason: e.to_string(),
        });
    }
    if out.len != h.uncompressed_size {
        return Err(Error::CcobSizeMismatch {
            offset: base + CcobHeader::uncompressed_size_offset(h.version),
            expected: h.uncompressed_size,
            actual: out.len,
        });
    }
    let digest = out.md5.finalize();
    let mut a = [0u8; 8];
    a.copy_from_slice(&digest[..8]);
    let hash = u64::from_le_bytes(a);
    if hash != h.hash {
        return Err(Error::CcobHashMismatch {
            offset: base + header_size as u64 - 8,
            expected: h.hash,
            actual: hash,
        });
    }
    out.inner.flush()?;
    Ok((h, blob_len))
}

enum Decoder<R: Read> {
    Zstd(Box<zstd::stream::read::Decoder<'static, io::BufReader<io::Take<R>>>>),
    Zlib(Box<flate2::read::ZlibDecoder<io::Take<R>>>),
}

/// A reader of the uncompressed contents of one CCOB blob. The size and the hash are
/// checked as the data goes by; when the end is reached and either is wrong, `read` fails
/// with an [`io::Error`] carrying the [`Error`] (see [`into_format_error`]).
pub struct CcobReader<R: Read> {
    decoder: Decoder<R>,
    header: CcobHeader,
    header_size: usize,
    base: u64,
    hasher: Option<Hasher>,
    pending: Vec<u8>,
    len: u64,
    done: bool,
}

impl<R: Read> std::fmt::Debug for CcobReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CcobReader")
            .field("header", &self.header)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

fn format_error(e: Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// The [`Error`] inside an I/O error from [`CcobReader`], or the I/O error itself.
pub fn into_format_error(e: io::Error) -> Error {
    if e.get_ref().is_some_and(|inner| inner.is::<Error>()) {
        match e.into_inner().map(|inner| inner.downcast::<Error>()) {
            Some(Ok(err)) => *err,
            Some(Err(other)) => Error::Io(io::Error::other(other)),
            None => Error::Io(io::Error::other("unreadable error")),
        }
    } else {
        Error::Io(e)
    }
}

impl<R: Read> CcobReader<R> {
    /// Reads the header of the blob at the reader's position (`base` in the file, for error
    /// messages; `available` bytes from there to the end of the file).
    pub fn new(mut r: R, base: u64, available: u64) -> Result<Self> {
        let (header, header_size) = read_header(&mut r, base, available)?;
        let payload = r.take(header.total_size.unwrap_or(available) - header_size as u64);
        let decoder = match header.method {
            CompressionMethod::Zstd => {
                let mut d = zstd::stream::read::Decoder::new(payload)?;
                d.window_log_max(31)?;
                Decoder::Zstd(Box::new(d))
            }
            CompressionMethod::Zlib => {
                Decoder::Zlib(Box::new(flate2::read::ZlibDecoder::new(payload)))
            }
        };
        let hasher = Hasher::spawn()?;
        let pending = hasher.buffer();
        Ok(CcobReader {
            decoder,
            header,
            header_size,
            base,
            hasher: Some(hasher),
            pending,
            len: 0,
            done: false,
        })
    }

    /// The blob's header.
    pub fn header(&self) -> &CcobHeader {
        &self.header
    }

    fn check_end(&mut self) -> Result<()> {
        if self.len != self.header.uncompressed_size {
            return Err(Error::CcobSizeMismatch {
                offset: self.base + CcobHeader::uncompressed_size_offset(self.header.version),
                expected: self.header.uncompressed_size,
                actual: self.len,
            });
        }
        let mut hasher = self
            .hasher
            .take()
            .ok_or_else(|| Error::Io(io::Error::other("the hashing thread stopped")))?;
        hasher.send(std::mem::take(&mut self.pending))?;
        let digest = hasher.finish()?;
        let mut a = [0u8; 8];
        a.copy_from_slice(&digest[..8]);
        let hash = u64::from_le_bytes(a);
        if hash != self.header.hash {
            return Err(Error::CcobHashMismatch {
                offset: self.base + self.header_size as u64 - 8,
                expected: self.header.hash,
                actual: hash,
            });
        }
        Ok(())
    }
}

impl<R: Read> Read for CcobReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        let res = match &mut self.decoder {
            Decoder::Zstd(d) => d.read(buf),
            Decoder::Zlib(d) => d.read(buf),
        };
        let n = res.map_err(|e| {
            format_error(Error::CcobDecompress {
                offset: self.base + self.header_size as u64,
                reason: e.to_string(),
            })
        })?;
        if n == 0 {
            self.done = true;
            self.check_end().map_err(format_error)?;
            return Ok(0);
        }
        self.len += n as u64;
        if self.len > self.header.uncompressed_size {
            self.done = true;
            return Err(format_error(Error::CcobSizeMismatch {
                offset: self.base + CcobHeader::uncompressed_size_offset(self.header.version),
                expected: self.header.uncompressed_size,
                actual: self.len,
            }));
        }
        self.pending.extend_from_slice(&buf[..n]);
        if self.pending.len() >= CHUNK
            && let Some(hasher) = self.hasher.as_mut()
        {
            let next = hasher.buffer();
            hasher.send(std::mem::replace(&mut self.pending, next))?;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccob;
    use std::io::Cursor;

    fn sample(n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n);
        let mut x = 0x1234_5678u32;
        while v.len() < n {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            v.extend_from_slice(b"__CLANG_OFFLOAD_BUNDLE__ text ");
            v.push((x % 7) as u8);
        }
        v.truncate(n);
        v
    }

    #[test]
    #[cfg_attr(miri, ignore = "zstd and zlib are C code, which Miri cannot run")]
    fn streamed_blob_reads_back_with_the_in_memory_reader() {
        for (version, method) in [
            (3, CompressionMethod::Zstd),
            (2, CompressionMethod::Zstd),
            (3, CompressionMethod::Zlib),
            (2, CompressionMethod::Zlib),
        ] {
            let data = sample(3 * CHUNK + 17);
            let opts = CompressOptions {
                version,
                method,
                level: None,
            };
            let mut w = CcobWriter::new(
                Cursor::new(Vec::new()),
                opts,
                StreamOptions {
                    pledged_size: Some(data.len() as u64),
                    max_window_log: Some(20),
                    workers: 0,
                },
            )
            .unwrap();
            for piece in data.chunks(1000) {
                w.write_all(piece).unwrap();
            }
            let (cursor, total) = w.finish().unwrap();
            let blob = cursor.into_inner();
            assert_eq!(blob.len() as u64, total);
            let (back, used) = ccob::decompress(&blob).unwrap();
            assert_eq!(used, blob.len());
            assert_eq!(back, data);
            let mut out = Vec::new();
            let (h, len) =
                decompress_stream(Cursor::new(&blob), &mut out, 0, blob.len() as u64).unwrap();
            assert_eq!((h.version, h.method, len), (version, method, total));
            assert_eq!(out, data);
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "zstd and zlib are C code, which Miri cannot run")]
    fn reader_checks_size_and_hash() {
        let data = sample(100_000);
        let blob = ccob::compress(&data, CompressOptions::default()).unwrap();
        let mut back = Vec::new();
        CcobReader::new(Cursor::new(&blob), 0, blob.len() as u64)
            .unwrap()
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, data);
        let mut bad = blob.clone();
        bad[24] ^= 1;
        let err = CcobReader::new(Cursor::new(&bad), 0, bad.len() as u64)
            .unwrap()
            .read_to_end(&mut Vec::new())
            .unwrap_err();
        assert!(matches!(
            into_format_error(err),
            Error::CcobHashMismatch { offset: 24, .. }
        ));
        let mut bad = blob;
        bad[16..24].copy_from_slice(&5u64.to_le_bytes());
        let err = CcobReader::new(Cursor::new(&bad), 0, bad.len() as u64)
            .unwrap()
            .read_to_end(&mut Vec::new())
            .unwrap_err();
        assert!(matches!(
            into_format_error(err),
            Error::CcobSizeMismatch { expected: 5, .. }
        ));
    }

    #[test]
    #[cfg_attr(miri, ignore = "zstd and zlib are C code, which Miri cannot run")]
    fn damaged_blobs_are_typed_errors() {
        let data = sample(5000);
        let blob = ccob::compress(&data, CompressOptions::default()).unwrap();
        let n = blob.len() as u64;
        let run = |b: &[u8]| decompress_stream(Cursor::new(b), Vec::new(), 0, b.len() as u64);
        for cut in 0..blob.len() {
            assert!(run(&blob[..cut]).is_err(), "cut {cut}");
        }
        let mut bad = blob.clone();
        bad[16] ^= 1;
        assert!(matches!(run(&bad), Err(Error::CcobSizeMismatch { .. })));
        let mut bad = blob.clone();
        bad[24] ^= 1;
        assert!(matches!(
            run(&bad),
            Err(Error::CcobHashMismatch { offset: 24, .. })
        ));
        let mut bad = blob.clone();
        bad[8..16].copy_from_slice(&(n + 1).to_le_bytes());
        assert!(matches!(
            run(&bad),
            Err(Error::CcobTotalSizeOutOfRange { offset: 8, .. })
        ));
        let mut bad = blob.clone();
        bad[4] = 9;
        assert!(matches!(
            run(&bad),
            Err(Error::CcobUnsupportedVersion { offset: 4, .. })
        ));
        let mut bad = blob;
        let last = bad.len() - 3;
        bad[40..last].iter_mut().for_each(|b| *b = 0xa5);
        assert!(run(&bad).is_err());
    }
}
