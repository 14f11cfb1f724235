//! The crate's error type.

/// Everything that can go wrong while reading or writing an offloading format.
///
/// Parse errors name the absolute byte offset (from the start of the buffer or stream handed to
/// the parser) of the field or data that was wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading or writing the underlying stream failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),

    // ---- OffloadBinary ----
    /// Fewer bytes than an OffloadBinary header and entry need (72).
    #[error("OffloadBinary at offset {offset}: truncated: {available} bytes, at least 72 needed")]
    BinaryTruncated {
        /// Byte offset where the binary starts.
        offset: u64,
        /// Bytes available from `offset` to the end of the input.
        available: u64,
    },
    /// The buffer does not start with `10 FF 10 AD`.
    #[error("OffloadBinary at offset {offset}: bad magic {found:02x?}, expected [10, ff, 10, ad]")]
    BinaryBadMagic {
        /// Byte offset where the binary starts.
        offset: u64,
        /// The first four bytes of the input.
        found: [u8; 4],
    },
    /// A version other than 1.
    #[error(
        "OffloadBinary at offset {offset}: unsupported version {version} (only version 1 is supported)"
    )]
    BinaryUnsupportedVersion {
        /// Byte offset where the binary starts.
        offset: u64,
        /// The header's `Version` field.
        version: u32,
    },
    /// The header's `Size` is smaller than the fixed part or larger than the buffer.
    #[error(
        "OffloadBinary at offset {offset}: header Size {size} is out of range (minimum 72, {available} bytes available)"
    )]
    BinarySizeOutOfRange {
        /// Byte offset where the binary starts.
        offset: u64,
        /// The header's `Size` field, in bytes.
        size: u64,
        /// Bytes available from `offset` to the end of the input.
        available: u64,
    },
    /// `EntryOffset`/`EntrySize` do not describe a 40-byte entry inside the binary.
    #[error(
        "OffloadBinary at offset {offset}: entry at offset {entry_offset} with size {entry_size} does not fit in a binary of {size} bytes"
    )]
    BinaryEntryOutOfRange {
        /// Byte offset where the binary starts.
        offset: u64,
        /// The header's `EntryOffset`, from the start of the binary.
        entry_offset: u64,
        /// The header's `EntrySize`, in bytes.
        entry_size: u64,
        /// Size of the binary, in bytes, from its header.
        size: u64,
    },
    /// The string-entry array does not fit in the binary.
    #[error(
        "OffloadBinary at offset {offset}: {count} string entries at offset {string_offset} do not fit in a binary of {size} bytes"
    )]
    BinaryStringEntriesOutOfRange {
        /// Byte offset where the binary starts.
        offset: u64,
        /// The entry's `StringOffset`, from the start of the binary.
        string_offset: u64,
        /// The entry's `NumStrings`.
        count: u64,
        /// Size of the binary, in bytes, from its header.
        size: u64,
    },
    /// A key or value offset points outside the binary or its string has no NUL terminator.
    #[error(
        "OffloadBinary string {what} at offset {offset}: not a NUL-terminated string inside the binary"
    )]
    BinaryStringOutOfRange {
        /// Absolute byte offset of the string entry's offset field.
        offset: u64,
        /// Which string was wrong: `key` or `value`.
        what: &'static str,
    },
    /// A key or value is not UTF-8.
    #[error("OffloadBinary string {what} at offset {offset}: not valid UTF-8")]
    BinaryStringNotUtf8 {
        /// Byte offset where the string starts.
        offset: u64,
        /// Which string was wrong: `key` or `value`.
        what: &'static str,
    },
    /// The image does not fit in the binary.
    #[error(
        "OffloadBinary at offset {offset}: image at offset {image_offset} with size {image_size} does not fit in a binary of {size} bytes"
    )]
    BinaryImageOutOfRange {
        /// Byte offset where the binary starts.
        offset: u64,
        /// The entry's `ImageOffset`, from the start of the binary.
        image_offset: u64,
        /// The entry's `ImageSize`, in bytes.
        image_size: u64,
        /// Size of the binary, in bytes, from its header.
        size: u64,
    },
    /// The value of `offload.kernel-params` is not `kernel:size,…;…`.
    #[error("offload.kernel-params: {reason} at byte {offset}")]
    BadKernelParams {
        /// Byte offset in the value where it stopped parsing.
        offset: u64,
        /// What was expected there.
        reason: &'static str,
    },
    /// The value of `offload.kernel-resources` is not `kernel:field=n,…;…`.
    #[error("offload.kernel-resources: {reason} at byte {offset}")]
    BadKernelResources {
        /// Byte offset in the value where it stopped parsing.
        offset: u64,
        /// What was expected there.
        reason: &'static str,
    },
    /// A key or value to be written contains a NUL byte, which version 1 cannot represent.
    #[error("OffloadBinary string {0:?} contains a NUL byte, which version 1 cannot store")]
    BinaryStringHasNul(String),

    // ---- Target IDs ----
    /// An empty target ID.
    #[error("empty target ID")]
    TargetIdEmpty,
    /// A target ID with no processor before the first `:`.
    #[error("target ID {id:?} has no processor")]
    TargetIdNoProcessor {
        /// The ID as given.
        id: String,
    },
    /// A feature that does not end in `+` or `-`, or has no name.
    #[error("target ID {id:?}: feature {feature:?} must be a name followed by + or -")]
    TargetIdBadFeature {
        /// The ID as given.
        id: String,
        /// The feature as written, with its `+` or `-`.
        feature: String,
    },
    /// A feature named twice.
    #[error("target ID {id:?}: feature {feature:?} appears more than once")]
    TargetIdDuplicateFeature {
        /// The ID as given.
        id: String,
        /// The feature as written, with its `+` or `-`.
        feature: String,
    },
    /// A feature the processor does not support.
    #[error("target ID {id:?}: processor {processor} does not support feature {feature:?}")]
    TargetIdUnsupportedFeature {
        /// The ID as given.
        id: String,
        /// The processor, as LLVM names it.
        processor: &'static str,
        /// The feature's name.
        feature: String,
    },
    /// A processor clang does not know as an offload architecture.
    #[error("unknown offload architecture {name:?}; known: {known}")]
    UnknownOffloadArch {
        /// The architecture as given.
        name: String,
        /// Every architecture clang knows, comma-separated.
        known: String,
    },
    /// An AMDGPU target ID whose processor LLVM 22 does not know.
    #[error("target ID {id:?}: unknown AMDGPU processor")]
    UnknownAmdgpuProcessor {
        /// The target ID as given.
        id: String,
    },
    /// An NVIDIA architecture name that is not `sm_<number>[a|f]`.
    #[error("{name:?} is not an NVIDIA architecture: expected sm_<number>[a|f]")]
    BadSmName {
        /// The name as given.
        name: String,
    },
    /// An `sm_XX` LLVM 22's NVPTX back end does not know.
    #[error("{name:?}: LLVM 22 knows no such NVPTX processor")]
    UnknownNvptxProcessor {
        /// The name as given.
        name: String,
    },

    // ---- clang-offload-bundler bundles ----
    /// A bundle entry ID that does not split into 5 or 6 `-`-separated parts.
    #[error(
        "bundle entry ID {id:?} is malformed: expected <kind>-<arch>-<vendor>-<os>-<env>[-<target-id>]"
    )]
    BundleIdMalformed {
        /// The ID as given.
        id: String,
    },
    /// An offload kind other than host, openmp, hip, hipv4.
    #[error("bundle entry ID {id:?}: invalid offload kind (expected host, openmp, hip or hipv4)")]
    BundleInvalidKind {
        /// The ID as given.
        id: String,
    },
    /// The same ID given twice.
    #[error("Duplicate targets are not allowed: {id}")]
    BundleDuplicateId {
        /// The ID as given.
        id: String,
    },
    /// Two targets whose target IDs may not be bundled together.
    #[error("Cannot bundle inputs with conflicting targets: '{first}' and '{second}'")]
    BundleConflictingTargets {
        /// The first of the two entry IDs.
        first: String,
        /// The second of the two entry IDs.
        second: String,
    },
    /// Not exactly one host entry (none is allowed when every entry is hip/hipv4).
    #[error(
        "expecting exactly one host target but got {count} (a bundle of hip or hipv4 entries \
         only needs none)"
    )]
    BundleHostCount {
        /// Number of host entries found.
        count: usize,
    },
    /// The binary bundle magic is missing.
    #[error("bundle at offset {offset}: bad magic, expected __CLANG_OFFLOAD_BUNDLE__")]
    BundleBadMagic {
        /// Byte offset where the bundle starts.
        offset: u64,
    },
    /// The input ends inside the header.
    #[error(
        "bundle truncated at offset {offset} while reading the {what} (file has {file_len} bytes)"
    )]
    BundleTruncated {
        /// Byte offset where the incomplete field starts.
        offset: u64,
        /// The header field being read.
        what: &'static str,
        /// Length of the whole input, in bytes.
        file_len: u64,
    },
    /// An entry count that cannot fit in the file.
    #[error(
        "bundle entry count {count} at offset {offset} cannot fit in a file of {file_len} bytes"
    )]
    BundleCountTooLarge {
        /// Byte offset of the entry-count field.
        offset: u64,
        /// The header's entry count.
        count: u64,
        /// Length of the whole input, in bytes.
        file_len: u64,
    },
    /// An entry ID length past the end of the file.
    #[error(
        "bundle entry ID length {len} at offset {offset} runs past the end of a file of {file_len} bytes"
    )]
    BundleIdLengthOutOfRange {
        /// Byte offset of the ID-length field.
        offset: u64,
        /// The ID length field, in bytes.
        len: u64,
        /// Length of the whole input, in bytes.
        file_len: u64,
    },
    /// An entry ID that is not UTF-8.
    #[error("bundle entry ID at offset {offset} is not valid UTF-8")]
    BundleIdNotUtf8 {
        /// Byte offset where the ID starts.
        offset: u64,
    },
    /// An entry's offset+size past the end of the file, or wrapping around.
    #[error(
        "bundle entry {id:?} (header at offset {offset}): data at {start} with size {size} runs past the end of a file of {file_len} bytes"
    )]
    BundleEntryOutOfRange {
        /// Byte offset of the entry's header.
        offset: u64,
        /// The entry's ID.
        id: String,
        /// Byte offset of the entry's data, from its header.
        start: u64,
        /// The entry's data size, in bytes.
        size: u64,
        /// Length of the whole input, in bytes.
        file_len: u64,
    },
    /// An entry's data overlapping the header.
    #[error(
        "bundle entry {id:?}: data at offset {start} overlaps the header, which ends at {header_end}"
    )]
    BundleEntryOverlapsHeader {
        /// The entry's ID.
        id: String,
        /// Byte offset of the entry's data, from its header.
        start: u64,
        /// Byte offset where the bundle header ends.
        header_end: u64,
    },
    /// An entry index past the end.
    #[error("no bundle entry with index {index}")]
    BundleNoSuchEntry {
        /// The index asked for, from 0.
        index: usize,
    },
    /// An alignment that is zero or not a power of two.
    #[error("bundle alignment {align} is not a power of two")]
    BundleBadAlignment {
        /// The alignment asked for, in bytes.
        align: u64,
    },
    /// The bundle would be larger than 2^64 bytes.
    #[error("bundle larger than 2^64 bytes")]
    BundleTooLarge,
    /// A text type other than i ii cui hipi d ll s.
    #[error("{file_type:?} is not a text bundle type (i, ii, cui, hipi, d, ll, s)")]
    BundleUnknownTextType {
        /// The type as given.
        file_type: String,
    },
    /// A text start marker whose ID line does not end.
    #[error("text bundle: the entry ID at offset {offset} has no terminating newline")]
    TextBundleUnterminatedId {
        /// Byte offset where the ID starts.
        offset: u64,
    },
    /// A text entry with no end marker.
    #[error("text bundle: entry {id:?} starting at offset {offset} has no end marker")]
    TextBundleMissingEnd {
        /// Byte offset of the entry's start marker.
        offset: u64,
        /// The entry's ID.
        id: String,
    },
    /// Input that is neither a CCOB blob, a binary bundle nor an ELF object.
    #[error("not an offload bundle: no CCOB, __CLANG_OFFLOAD_BUNDLE__ or ELF magic at offset 0")]
    BundleUnrecognized,
    /// A CCOB blob whose decompressed contents are not a valid binary bundle.
    #[error("compressed blob {index}: {source}")]
    CompressedBundleContents {
        /// Index of the blob in the input, from 0.
        index: usize,
        /// The error found inside it.
        source: Box<Error>,
    },
    /// The host of an object bundle is not a readable object file.
    #[error("object bundle: not a readable object file: {reason}")]
    ObjectParse {
        /// What the object reader reported.
        reason: String,
    },
    /// A bundle section whose contents cannot be read.
    #[error("object bundle: section for {id:?} cannot be read: {reason}")]
    ObjectSection {
        /// The entry ID the section holds.
        id: String,
        /// What the object reader reported.
        reason: String,
    },

    // ---- Compressed bundles ----
    /// The CCOB magic is missing.
    #[error("compressed bundle at offset {offset}: bad magic, expected CCOB")]
    CcobBadMagic {
        /// Byte offset where the blob starts.
        offset: u64,
    },
    /// The input ends inside the header.
    #[error(
        "compressed bundle at offset {offset}: truncated header: {available} bytes, {needed} needed"
    )]
    CcobTruncated {
        /// Byte offset where the blob starts.
        offset: u64,
        /// Bytes the header needs.
        needed: u64,
        /// Bytes available from `offset` to the end of the input.
        available: u64,
    },
    /// A version other than 1, 2, 3 (or, when writing, other than 2, 3).
    #[error("compressed bundle: unsupported version {version} (field at offset {offset})")]
    CcobUnsupportedVersion {
        /// Byte offset of the version field.
        offset: u64,
        /// The version found (or asked for, when writing).
        version: u16,
    },
    /// A compression method other than zlib (0) or zstd (1).
    #[error("compressed bundle: unknown compression method {method} at offset {offset}")]
    CcobUnknownMethod {
        /// Byte offset of the method field.
        offset: u64,
        /// The method number found in the header.
        method: u16,
    },
    /// The total size is smaller than the header or larger than the input.
    #[error(
        "compressed bundle: total size {total_size} at offset {offset} is out of range ({available} bytes available)"
    )]
    CcobTotalSizeOutOfRange {
        /// Byte offset of the total-size field.
        offset: u64,
        /// The header's total-size field, in bytes.
        total_size: u64,
        /// Bytes available from the blob's start to the end of the input.
        available: u64,
    },
    /// The compressed data is corrupt.
    #[error("compressed bundle: data at offset {offset} does not decompress: {reason}")]
    CcobDecompress {
        /// Byte offset where the compressed data starts.
        offset: u64,
        /// What the decompressor reported.
        reason: String,
    },
    /// The decompressed size differs from the header's.
    #[error(
        "compressed bundle: uncompressed size field at offset {offset} says {expected}, data decompresses to {actual}"
    )]
    CcobSizeMismatch {
        /// Byte offset of the uncompressed-size field.
        offset: u64,
        /// The uncompressed size recorded in the header, in bytes.
        expected: u64,
        /// The size the data decompresses to, in bytes.
        actual: u64,
    },
    /// The MD5-based hash differs from the header's.
    #[error(
        "compressed bundle: hash field at offset {offset} is {expected:#018x}, data hashes to {actual:#018x}"
    )]
    CcobHashMismatch {
        /// Byte offset of the hash field.
        offset: u64,
        /// The hash recorded in the header.
        expected: u64,
        /// The hash of the decompressed data.
        actual: u64,
    },
    /// A size that does not fit the chosen version's 32-bit fields.
    #[error("compressed bundle version {version} cannot record a size of {size} bytes")]
    CcobTooLargeForVersion {
        /// The version asked for.
        version: u16,
        /// The size that does not fit, in bytes.
        size: u64,
    },

    // ---- Bitcode ----
    /// Bitcode whose block structure cannot be followed.
    #[error("bitcode: malformed block structure at byte {offset}")]
    BitcodeMalformed {
        /// Byte offset in the bitcode where it could not go on.
        offset: u64,
    },
    /// A bitcode symbol table whose fields point outside it or its string table.
    #[error("bitcode symbol table: field at offset {offset} is out of range")]
    BitcodeSymtabMalformed {
        /// Byte offset of the field, in the symbol table.
        offset: u64,
    },

    // ---- Archives ----
    /// Not an `ar` archive.
    #[error(
        "file too small to be an archive (LLVM's words for any file without the `!<arch>` magic)"
    )]
    ArchiveBadMagic,
    /// A thin archive, whose members live in other files.
    #[error("thin archives are not supported")]
    ArchiveThin,
    /// The input ends inside a member header.
    #[error("archive truncated: member header at offset {offset} is incomplete")]
    ArchiveTruncated {
        /// Byte offset where the member header starts.
        offset: u64,
    },
    /// A header field that is not a number (or a bad terminator).
    #[error("archive: bad {what} at offset {offset}")]
    ArchiveBadField {
        /// Byte offset where the member header starts.
        offset: u64,
        /// The header field that was wrong.
        what: &'static str,
    },
    /// A member name that cannot be decoded or points outside the long-name table.
    #[error("archive: bad member name in header at offset {offset}")]
    ArchiveBadName {
        /// Byte offset where the member header starts.
        offset: u64,
    },
    /// A member size past the end of the archive.
    #[error(
        "archive: member size {size} (field at offset {offset}) exceeds the {available} bytes left"
    )]
    ArchiveMemberOutOfRange {
        /// Byte offset of the size field.
        offset: u64,
        /// The member size, in bytes.
        size: u64,
        /// Bytes left in the archive after the header.
        available: u64,
    },
    /// A member name the GNU format cannot store.
    #[error("archive member name {name:?} cannot be stored (it contains a newline)")]
    ArchiveUnwritableName {
        /// The member name.
        name: String,
    },
    /// A member that starts beyond 4 GiB, which a 32-bit GNU symbol index cannot point at.
    #[error(
        "archive: a member with symbols starts beyond 4 GiB; the symbol index cannot be written"
    )]
    ArchiveTooLargeForIndex,
    /// A member whose bundle could not be read.
    #[error("archive member {member:?}: {source}")]
    ArchiveMember {
        /// Name of the archive member.
        member: String,
        /// The error reading the member's bundle.
        source: Box<Error>,
    },
    /// `--check-input-archive` found an invalid target-ID combination.
    #[error(
        "archive member {member:?}: bundle entries {first:?} and {second:?} are a conflicting target-ID combination"
    )]
    ArchiveConflictingTargetIds {
        /// Name of the archive member.
        member: String,
        /// The first of the two entry IDs.
        first: String,
        /// The second of the two entry IDs.
        second: String,
    },
    /// A target with no compatible entry (without `--allow-missing-bundles`).
    #[error(
        "no compatible code object found for the target {target:?} in the heterogeneous archive"
    )]
    ArchiveNoCompatibleEntry {
        /// The target ID asked for.
        target: String,
    },

    // ---- Device images ----
    /// A CPU device image (an ELF shared object) whose kernels or notes cannot be read.
    #[error("CPU device image: {reason}")]
    CpuImage {
        /// What is wrong with it.
        reason: String,
    },
    /// An image that is not a valid AMDGPU code object, or whose metadata note cannot be read.
    #[error("AMDGPU code object: {reason}")]
    AmdCodeObject {
        /// What is wrong with it.
        reason: String,
    },
    /// A GPU image's panic-site table that cannot be read.
    #[error("panic-site table at offset {offset}: {reason}")]
    PanicSites {
        /// Byte offset of the field or data that is wrong, from the table's start.
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },

    // ---- Occupancy ----
    /// An architecture whose occupancy limits [`crate::occupancy`] does not hold.
    #[error("no occupancy rules for {arch:?}: {known}")]
    UnknownOccupancyArch {
        /// The architecture as given.
        arch: String,
        /// The architectures that have rules.
        known: String,
    },
    /// A block (work-group) size outside 1 to 1024 threads, or a wavefront size other than 32
    /// or 64.
    #[error("{what} {value}: {expected}")]
    BadLaunchShape {
        /// `block size` or `wavefront size`.
        what: &'static str,
        /// The value given.
        value: u64,
        /// What is allowed.
        expected: &'static str,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Implements `code()` with one arm per variant and no wildcard, so that a new variant does not
/// compile until it has a code, and `all_codes()`, every variant's code, for the tests. Shared
/// by the error types of `offload-format`, `offload-build` and `offload-rt`; variants under
/// `delegate` only wrap another error and give its code.
#[doc(hidden)]
#[macro_export]
macro_rules! error_codes {
    ($ty:ident { $($v:ident => $code:literal,)* } $(delegate { $($(#[$dm:meta])* $dv:ident,)* })?) => {
        impl $ty {
            /// The error's stable code, `OFF` and four digits, listed with its meaning in the
            /// user guide's error-code index (`reference/error-codes.md`). An error that only
            /// wraps another gives that error's code.
            pub fn code(&self) -> &'static str {
                match self {
                    $(Self::$v { .. } => $code,)*
                    $($($(#[$dm])* Self::$dv(e) => e.code(),)*)?
                }
            }

            /// Every variant's name and code, in declaration order.
            #[cfg(test)]
            pub(crate) fn all_codes() -> Vec<(&'static str, &'static str)> {
                vec![$((stringify!($v), $code)),*]
            }
        }
    };
}

/// The tests' check of a crate's error codes: each is `prefix` and digits, seven characters,
/// given once, and listed in the guide's index (`index_path`), so that neither can drift from
/// the variants.
#[doc(hidden)]
pub fn check_error_codes(codes: &[(&str, &str)], prefix: &str, index_path: &str) {
    let index = std::fs::read_to_string(index_path).expect("the guide's error-code index");
    let mut seen = std::collections::HashSet::new();
    for (variant, code) in codes {
        assert!(
            code.len() == 7
                && code.starts_with(prefix)
                && code[3..].bytes().all(|b| b.is_ascii_digit()),
            "{variant}: malformed code {code}"
        );
        assert!(seen.insert(code), "{variant}: code {code} is given twice");
        assert!(
            index.contains(&format!("| `{code}` |")),
            "{variant}: code {code} is not in {index_path}"
        );
    }
}

error_codes! {
    Error {
        Io => "OFF1001",
        BinaryTruncated => "OFF1002",
        BinaryBadMagic => "OFF1003",
        BinaryUnsupportedVersion => "OFF1004",
        BinarySizeOutOfRange => "OFF1005",
        BinaryEntryOutOfRange => "OFF1006",
        BinaryStringEntriesOutOfRange => "OFF1007",
        BinaryStringOutOfRange => "OFF1008",
        BinaryStringNotUtf8 => "OFF1009",
        BinaryImageOutOfRange => "OFF1010",
        BadKernelParams => "OFF1011",
        BinaryStringHasNul => "OFF1012",
        TargetIdEmpty => "OFF1013",
        TargetIdNoProcessor => "OFF1014",
        TargetIdBadFeature => "OFF1015",
        TargetIdDuplicateFeature => "OFF1016",
        TargetIdUnsupportedFeature => "OFF1017",
        UnknownOffloadArch => "OFF1018",
        UnknownAmdgpuProcessor => "OFF1019",
        BadSmName => "OFF1020",
        UnknownNvptxProcessor => "OFF1021",
        BundleIdMalformed => "OFF1022",
        BundleInvalidKind => "OFF1023",
        BundleDuplicateId => "OFF1024",
        BundleConflictingTargets => "OFF1025",
        BundleHostCount => "OFF1026",
        BundleBadMagic => "OFF1027",
        BundleTruncated => "OFF1028",
        BundleCountTooLarge => "OFF1029",
        BundleIdLengthOutOfRange => "OFF1030",
        BundleIdNotUtf8 => "OFF1031",
        BundleEntryOutOfRange => "OFF1032",
        BundleEntryOverlapsHeader => "OFF1033",
        BundleNoSuchEntry => "OFF1034",
        BundleBadAlignment => "OFF1035",
        BundleTooLarge => "OFF1036",
        BundleUnknownTextType => "OFF1037",
        TextBundleUnterminatedId => "OFF1038",
        TextBundleMissingEnd => "OFF1039",
        BundleUnrecognized => "OFF1040",
        CompressedBundleContents => "OFF1041",
        ObjectParse => "OFF1042",
        ObjectSection => "OFF1043",
        CcobBadMagic => "OFF1044",
        CcobTruncated => "OFF1045",
        CcobUnsupportedVersion => "OFF1046",
        CcobUnknownMethod => "OFF1047",
        CcobTotalSizeOutOfRange => "OFF1048",
        CcobDecompress => "OFF1049",
        CcobSizeMismatch => "OFF1050",
        CcobHashMismatch => "OFF1051",
        CcobTooLargeForVersion => "OFF1052",
        BitcodeMalformed => "OFF1053",
        BitcodeSymtabMalformed => "OFF1054",
        ArchiveBadMagic => "OFF1055",
        ArchiveThin => "OFF1056",
        ArchiveTruncated => "OFF1057",
        ArchiveBadField => "OFF1058",
        ArchiveBadName => "OFF1059",
        ArchiveMemberOutOfRange => "OFF1060",
        ArchiveUnwritableName => "OFF1061",
        ArchiveTooLargeForIndex => "OFF1062",
        ArchiveMember => "OFF1063",
        ArchiveConflictingTargetIds => "OFF1064",
        ArchiveNoCompatibleEntry => "OFF1065",
        BadKernelResources => "OFF1066",
        CpuImage => "OFF1067",
        AmdCodeObject => "OFF1068",
        PanicSites => "OFF1069",
        UnknownOccupancyArch => "OFF1070",
        BadLaunchShape => "OFF1071",
    }
}

#[cfg(test)]
mod error_code_tests {
    #[test]
    fn error_codes_are_unique_and_indexed() {
        crate::error::check_error_codes(
            &super::Error::all_codes(),
            "OFF1",
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../docs/guide/src/reference/error-codes.md"
            ),
        );
    }
}
