//! The report `clang-offload-bundler -verbose` (or `OFFLOAD_BUNDLER_VERBOSE=1`) prints to
//! stderr for each compressed bundle it writes or reads, line for line: users read it to
//! check what compression a build used.

use std::time::Duration;

use offload_format::ccob::{CcobHeader, CompressOptions, CompressionMethod};

fn method_name(method: CompressionMethod) -> &'static str {
    match method {
        CompressionMethod::Zstd => "zstd",
        CompressionMethod::Zlib => "zlib",
    }
}

/// `before / after`, and `after / before` in percent, as clang prints them.
fn rates(before: u64, after: u64) -> (f64, f64) {
    let (b, a) = (before as f64, after.max(1) as f64);
    (b / a, a / b.max(1.0) * 100.0)
}

/// `20183` as `20,183`: clang prints sizes with `formatv("{0:n}")`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn speed(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / 1e6 / elapsed.as_secs_f64().max(1e-9)
}

/// After writing a compressed bundle: `header` is the one written, `opts` what was asked.
pub(super) fn compression(header: &CcobHeader, opts: CompressOptions, elapsed: Duration) {
    let total = header.total_size.unwrap_or(0);
    let header_size = CcobHeader::size_for_version(header.version).unwrap_or(0) as u64;
    let compressed = total.saturating_sub(header_size);
    let (rate, ratio) = rates(header.uncompressed_size, compressed);
    eprintln!(
        "Compressed bundle format version: {}\n\
         Total file size (including headers): {} bytes\n\
         Compression method used: {}\n\
         Compression level: {}\n\
         Binary size before compression: {} bytes\n\
         Binary size after compression: {} bytes\n\
         Compression rate: {rate:.2}\n\
         Compression ratio: {ratio:.2}%\n\
         Compression speed: {:.2} MB/s\n\
         Truncated MD5 hash: {:#018x}",
        header.version,
        grouped(total),
        method_name(header.method),
        opts.level.unwrap_or(opts.method.default_level()),
        grouped(header.uncompressed_size),
        grouped(compressed),
        speed(header.uncompressed_size, elapsed),
        header.hash,
    );
}

/// After reading a compressed bundle of `blob_len` bytes whose contents hashed to `hash`.
pub(super) fn decompression(header: &CcobHeader, blob_len: u64, hash: u64, elapsed: Duration) {
    let header_size = CcobHeader::size_for_version(header.version).unwrap_or(0) as u64;
    let compressed = blob_len.saturating_sub(header_size);
    let (rate, ratio) = rates(header.uncompressed_size, compressed);
    let total = match header.total_size {
        Some(t) => format!("Total file size (from header): {} bytes\n", grouped(t)),
        None => String::new(),
    };
    eprintln!(
        "Compressed bundle format version: {}\n\
         {total}Decompression method: {}\n\
         Size before decompression: {} bytes\n\
         Size after decompression: {} bytes\n\
         Compression rate: {rate:.2}\n\
         Compression ratio: {ratio:.2}%\n\
         Decompression speed: {:.2} MB/s\n\
         Stored hash: {:#018x}\n\
         Recalculated hash: {hash:#018x}\n\
         Hashes match: {}",
        header.version,
        method_name(header.method),
        grouped(compressed),
        grouped(header.uncompressed_size),
        speed(header.uncompressed_size, elapsed),
        header.hash,
        if hash == header.hash { "Yes" } else { "No" },
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_are_grouped_by_thousands() {
        for (n, text) in [(0, "0"), (999, "999"), (1000, "1,000"), (17907, "17,907")] {
            assert_eq!(super::grouped(n), text);
        }
        assert_eq!(super::grouped(1_234_567_890), "1,234,567,890");
    }
}
