//! LLVM's OffloadBinary (magic `10 FF 10 AD`), version 1: one device image plus string metadata.
//!
//! The layout and the writer's string-table order follow `llvm/lib/Object/OffloadBinary.cpp`
//! so that [`OffloadBinary::write_to`] produces the same bytes as `llvm-offload-binary` when
//! the string entries are given in the same order.

use std::borrow::Cow;
use std::io::{self, Read, Write};

use crate::error::{Error, Result};

/// The four magic bytes every OffloadBinary starts with.
pub const OFFLOAD_BINARY_MAGIC: [u8; 4] = [0x10, 0xFF, 0x10, 0xAD];
/// The only version LLVM 22 reads and writes.
pub const OFFLOAD_BINARY_VERSION: u32 = 1;
/// Size of the header.
pub const HEADER_SIZE: u64 = 32;
/// Size of the (single) entry in version 1.
pub const ENTRY_SIZE: u64 = 40;
/// Size of one string entry (`{KeyOffset, ValueOffset}`).
pub const STRING_ENTRY_SIZE: u64 = 16;
/// Alignment of the image inside the binary and of the binary's total size.
pub const ALIGNMENT: u64 = 8;

/// String key of an image's target triple (LLVM's).
pub const KEY_TRIPLE: &str = "triple";
/// String key of an image's architecture: `sm_80`, a target ID, `host` (LLVM's).
pub const KEY_ARCH: &str = "arch";
/// String key of the library name of the kernel crate an image was built from (`-` replaced
/// by `_`), which cargo-offload adds.
pub const KEY_MODULE: &str = "offload.module";
/// String key of an image's comma-separated kernel names, which cargo-offload adds.
pub const KEY_KERNELS: &str = "offload.kernels";
/// String key of the parameter sizes of an image's kernels, which cargo-offload adds to
/// images of kernels written in CUDA, HIP or C++ so that a launch declared in Rust is checked
/// against them.
pub const KEY_KERNEL_PARAMS: &str = "offload.kernel-params";

/// String key of the CRC-32 of an image's bytes (8 lowercase hex digits), which cargo-offload
/// records when it packs the image and the runtime checks before a backend reads it: a
/// damaged image is refused by name rather than handed to a driver or the dynamic loader.
pub const KEY_IMAGE_CRC32: &str = "offload.image-crc32";

/// The value of [`KEY_IMAGE_CRC32`] for `image`.
pub fn image_crc32(image: &[u8]) -> String {
    format!("{:08x}", crc32fast::hash(image))
}

/// Checks `image` against a recorded [`KEY_IMAGE_CRC32`] value.
///
/// # Errors
/// A description of the mismatch, or of a recorded value that is not 8 hex digits.
pub fn check_image_crc32(image: &[u8], recorded: &str) -> std::result::Result<(), String> {
    if recorded.len() != 8 || !recorded.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "{KEY_IMAGE_CRC32} is `{recorded}`, not 8 hex digits"
        ));
    }
    let found = image_crc32(image);
    if !found.eq_ignore_ascii_case(recorded) {
        return Err(format!(
            "its bytes are damaged: CRC-32 {found}, recorded at build time as {recorded}"
        ));
    }
    Ok(())
}

/// One kernel's parameters as its image declares them: each one's size in bytes, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelParams {
    /// The kernel's symbol name (a C++ kernel's is mangled).
    pub kernel: String,
    /// The size in bytes of each explicit parameter, in order.
    pub sizes: Vec<u32>,
}

/// The value of [`KEY_KERNEL_PARAMS`]: one `kernel:size,size,…` entry per kernel, joined by
/// `;` (`scale:8,4,4;_Z5scalePffi:8,4,4`; a kernel without parameters is `name:`).
///
/// Kernel names are symbol names, C identifiers or Itanium-mangled C++ names, which hold none
/// of the separators `:`, `;`, `,`; [`parse_kernel_params`] rejects a name that would.
pub fn encode_kernel_params(params: &[KernelParams]) -> String {
    let mut out = String::new();
    for (i, p) in params.iter().enumerate() {
        if i > 0 {
            out.push(';');
        }
        out.push_str(&p.kernel);
        out.push(':');
        for (j, size) in p.sizes.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            out.push_str(&size.to_string());
        }
    }
    out
}

/// Whether [`KEY_KERNEL_PARAMS`] can hold a kernel named `name`: not empty, and none of the
/// key's separators (`:`, `;`, `,`) or whitespace, which no symbol name holds.
pub fn kernel_params_can_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(|c: char| matches!(c, ':' | ';' | ',') || c.is_whitespace())
}

/// Parses the value of [`KEY_KERNEL_PARAMS`] written by [`encode_kernel_params`].
///
/// # Errors
/// [`Error::BadKernelParams`] with the byte offset of the first thing wrong: an empty entry or
/// name, an entry without `:`, a name holding whitespace or a separator, a size that is not a
/// decimal `u32`, a kernel listed twice.
pub fn parse_kernel_params(text: &str) -> Result<Vec<KernelParams>> {
    let mut out: Vec<KernelParams> = Vec::new();
    if text.is_empty() {
        return Ok(out);
    }
    let bad = |offset: usize, reason: &'static str| Error::BadKernelParams {
        offset: offset as u64,
        reason,
    };
    let mut start = 0usize;
    for entry in text.split(';') {
        let Some((name, sizes)) = entry.split_once(':') else {
            return Err(bad(start, "an entry is not `kernel:sizes`"));
        };
        if name.is_empty() {
            return Err(bad(start, "an empty kernel name"));
        }
        if let Some(at) = name.find(|c: char| c == ',' || c.is_whitespace()) {
            return Err(bad(start + at, "a kernel name holds `,` or whitespace"));
        }
        if out.iter().any(|p| p.kernel == name) {
            return Err(bad(start, "a kernel is listed twice"));
        }
        let mut parsed = Vec::new();
        if !sizes.is_empty() {
            let mut at = start + name.len() + 1;
            for size in sizes.split(',') {
                let digits = !size.is_empty() && size.bytes().all(|b| b.is_ascii_digit());
                match size.parse::<u32>() {
                    Ok(n) if digits => parsed.push(n),
                    _ => return Err(bad(at, "a size is not a decimal number below 2^32")),
                }
                at += size.len() + 1;
            }
        }
        out.push(KernelParams {
            kernel: name.to_owned(),
            sizes: parsed,
        });
        start += entry.len() + 1;
    }
    Ok(out)
}

/// String key of the resources `ptxas -v` reported for each kernel of an NVIDIA image when
/// the build assembled the image's PTX for its `arch`: recorded on the cubin and the PTX of
/// every `sm` the build makes a cubin for, so that the tools read the figures instead of
/// running `ptxas` again. Images from other tools (clang's) record none.
pub const KEY_KERNEL_RESOURCES: &str = "offload.kernel-resources";

/// What `ptxas -v` reports for one kernel, as [`KEY_KERNEL_RESOURCES`] records it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PtxasKernelInfo {
    /// The kernel's name.
    pub name: String,
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes.
    pub shared_bytes: u64,
    /// Stack frame per thread, bytes.
    pub stack_bytes: u64,
    /// Spill stores, bytes.
    pub spill_store_bytes: u64,
    /// Spill loads, bytes.
    pub spill_load_bytes: u64,
    /// Constant memory, bytes, over every bank (`cmem[0]` holds the parameters).
    pub constant_bytes: u64,
}

/// The fields of one [`KEY_KERNEL_RESOURCES`] entry, in the order they are written.
const RESOURCE_FIELDS: [&str; 6] = [
    "registers",
    "shared",
    "stack",
    "spill-stores",
    "spill-loads",
    "constant",
];

/// The value of [`KEY_KERNEL_RESOURCES`]: one `kernel:field=n,…` entry per kernel, joined by
/// `;`, each with every field once, in this order:
/// `saxpy:registers=8,shared=0,stack=0,spill-stores=0,spill-loads=0,constant=372`.
///
/// Kernel names are PTX identifiers, which hold none of the separators `:`, `;`, `,`, `=`;
/// [`parse_kernel_resources`] rejects a name that would.
pub fn encode_kernel_resources(kernels: &[PtxasKernelInfo]) -> String {
    let mut out = String::new();
    for (i, k) in kernels.iter().enumerate() {
        if i > 0 {
            out.push(';');
        }
        let values = [
            u64::from(k.registers),
            k.shared_bytes,
            k.stack_bytes,
            k.spill_store_bytes,
            k.spill_load_bytes,
            k.constant_bytes,
        ];
        out.push_str(&k.name);
        out.push(':');
        for (j, (field, value)) in RESOURCE_FIELDS.iter().zip(values).enumerate() {
            if j > 0 {
                out.push(',');
            }
            out.push_str(field);
            out.push('=');
            out.push_str(&value.to_string());
        }
    }
    out
}

/// Parses the value of [`KEY_KERNEL_RESOURCES`] written by [`encode_kernel_resources`]. The
/// fields may stand in any order.
///
/// # Errors
/// [`Error::BadKernelResources`] with the byte offset of the first thing wrong: an empty entry
/// or name, an entry without `:`, a name holding whitespace or a separator, a field that is not
/// `name=n`, an unknown or repeated field, a missing one, a value that is not a decimal number
/// (below 2^32 for `registers`, 2^64 for the others), a kernel listed twice.
pub fn parse_kernel_resources(text: &str) -> Result<Vec<PtxasKernelInfo>> {
    let mut out: Vec<PtxasKernelInfo> = Vec::new();
    if text.is_empty() {
        return Ok(out);
    }
    let bad = |offset: usize, reason: &'static str| Error::BadKernelResources {
        offset: offset as u64,
        reason,
    };
    let mut start = 0usize;
    for entry in text.split(';') {
        let Some((name, fields)) = entry.split_once(':') else {
            return Err(bad(start, "an entry is not `kernel:fields`"));
        };
        if name.is_empty() {
            return Err(bad(start, "an empty kernel name"));
        }
        if let Some(at) = name.find(|c: char| matches!(c, ',' | '=') || c.is_whitespace()) {
            return Err(bad(
                start + at,
                "a kernel name holds `,`, `=` or whitespace",
            ));
        }
        if out.iter().any(|k| k.name == name) {
            return Err(bad(start, "a kernel is listed twice"));
        }
        let mut values: [Option<u64>; RESOURCE_FIELDS.len()] = [None; RESOURCE_FIELDS.len()];
        let mut at = start + name.len() + 1;
        for field in fields.split(',') {
            let Some((key, value)) = field.split_once('=') else {
                return Err(bad(at, "a field is not `name=number`"));
            };
            let Some(slot) = RESOURCE_FIELDS.iter().position(|f| *f == key) else {
                return Err(bad(at, "an unknown field"));
            };
            if values[slot].is_some() {
                return Err(bad(at, "a field is given twice"));
            }
            let digits = !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit());
            let parsed = value.parse::<u64>().ok().filter(|_| digits);
            let parsed = match (key, parsed) {
                ("registers", Some(n)) if u32::try_from(n).is_err() => None,
                (_, n) => n,
            };
            let Some(n) = parsed else {
                return Err(bad(
                    at + key.len() + 1,
                    "a value is not a decimal number in range",
                ));
            };
            values[slot] = Some(n);
            at += field.len() + 1;
        }
        let [
            Some(registers),
            Some(shared_bytes),
            Some(stack_bytes),
            Some(spill_store_bytes),
            Some(spill_load_bytes),
            Some(constant_bytes),
        ] = values
        else {
            return Err(bad(start, "a field is missing"));
        };
        out.push(PtxasKernelInfo {
            name: name.to_owned(),
            // Checked above.
            registers: u32::try_from(registers).unwrap_or(u32::MAX),
            shared_bytes,
            stack_bytes,
            spill_store_bytes,
            spill_load_bytes,
            constant_bytes,
        });
        start += entry.len() + 1;
    }
    Ok(out)
}

pub use crate::abi::{OFFLOAD_DESCRIPTOR_MAGIC, OFFLOAD_DESCRIPTOR_VERSION};

const FIXED_SIZE: u64 = HEADER_SIZE + ENTRY_SIZE;

/// The kind of the embedded image (`llvm::object::ImageKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImageKind {
    /// No image (0).
    None,
    /// A relocatable or shared object file (1).
    Object,
    /// LLVM bitcode (2).
    Bitcode,
    /// An NVIDIA cubin (3).
    Cubin,
    /// A CUDA fatbinary (4).
    Fatbinary,
    /// PTX assembly (5).
    Ptx,
    /// SPIR-V (6).
    Spirv,
    /// A value this crate does not know, kept as read.
    Unknown(u16),
}

impl ImageKind {
    /// The on-disk value.
    pub fn to_u16(self) -> u16 {
        match self {
            ImageKind::None => 0,
            ImageKind::Object => 1,
            ImageKind::Bitcode => 2,
            ImageKind::Cubin => 3,
            ImageKind::Fatbinary => 4,
            ImageKind::Ptx => 5,
            ImageKind::Spirv => 6,
            ImageKind::Unknown(v) => v,
        }
    }

    /// The kind for an on-disk value; values LLVM does not define become `Unknown`.
    pub fn from_u16(v: u16) -> Self {
        match v {
            0 => ImageKind::None,
            1 => ImageKind::Object,
            2 => ImageKind::Bitcode,
            3 => ImageKind::Cubin,
            4 => ImageKind::Fatbinary,
            5 => ImageKind::Ptx,
            6 => ImageKind::Spirv,
            v => ImageKind::Unknown(v),
        }
    }

    /// The name `llvm-objdump --offloading` prints for this kind (`elf`, `llvm ir`, `ptx`, ...).
    /// LLVM 22's objdump has no name for SPIR-V and prints `<none>` for it.
    pub fn name(self) -> &'static str {
        match self {
            ImageKind::Object => "elf",
            ImageKind::Bitcode => "llvm ir",
            ImageKind::Cubin => "cubin",
            ImageKind::Fatbinary => "fatbinary",
            ImageKind::Ptx => "ptx",
            ImageKind::None | ImageKind::Spirv | ImageKind::Unknown(_) => "<none>",
        }
    }

    /// The file extension LLVM uses for this kind (`getImageKindName`): `o`, `bc`, `cubin`,
    /// `fatbin`, `s`, `spv`; empty for `None` and unknown kinds.
    pub fn extension(self) -> &'static str {
        match self {
            ImageKind::Object => "o",
            ImageKind::Bitcode => "bc",
            ImageKind::Cubin => "cubin",
            ImageKind::Fatbinary => "fatbin",
            ImageKind::Ptx => "s",
            ImageKind::Spirv => "spv",
            ImageKind::None | ImageKind::Unknown(_) => "",
        }
    }

    /// The kind `llvm-offload-binary` infers from a file extension (`o`, `bc`, `cubin`,
    /// `fatbin`, `s`; `spv` as post-22 LLVM does); anything else is `None`.
    pub fn from_extension(ext: &str) -> Self {
        match ext {
            "o" => ImageKind::Object,
            "bc" => ImageKind::Bitcode,
            "cubin" => ImageKind::Cubin,
            "fatbin" => ImageKind::Fatbinary,
            "s" => ImageKind::Ptx,
            "spv" => ImageKind::Spirv,
            _ => ImageKind::None,
        }
    }
}

/// The offloading programming model (`llvm::object::OffloadKind`), with LLVM >= 21 values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OffloadKind {
    /// No programming model (0).
    None,
    /// OpenMP offloading (1).
    OpenMp,
    /// CUDA (2).
    Cuda,
    /// HIP (4).
    Hip,
    /// SYCL (8).
    Sycl,
    /// A value this crate does not know, kept as read.
    Unknown(u16),
}

impl OffloadKind {
    /// The on-disk value in LLVM >= 21 (HIP = 4, SYCL = 8).
    pub fn to_u16(self) -> u16 {
        match self {
            OffloadKind::None => 0,
            OffloadKind::OpenMp => 1,
            OffloadKind::Cuda => 2,
            OffloadKind::Hip => 4,
            OffloadKind::Sycl => 8,
            OffloadKind::Unknown(v) => v,
        }
    }

    /// The kind for an LLVM >= 21 on-disk value.
    pub fn from_u16(v: u16) -> Self {
        match v {
            0 => OffloadKind::None,
            1 => OffloadKind::OpenMp,
            2 => OffloadKind::Cuda,
            4 => OffloadKind::Hip,
            8 => OffloadKind::Sycl,
            v => OffloadKind::Unknown(v),
        }
    }

    /// The kind for an on-disk value written by LLVM 15–20, where HIP was 3.
    pub fn from_legacy_u16(v: u16) -> Self {
        match v {
            3 => OffloadKind::Hip,
            4 => OffloadKind::Unknown(4),
            v => Self::from_u16(v),
        }
    }

    /// `none`, `openmp`, `cuda`, `hip`, `sycl`; `unknown` otherwise.
    pub fn name(self) -> &'static str {
        match self {
            OffloadKind::None => "none",
            OffloadKind::OpenMp => "openmp",
            OffloadKind::Cuda => "cuda",
            OffloadKind::Hip => "hip",
            OffloadKind::Sycl => "sycl",
            OffloadKind::Unknown(_) => "unknown",
        }
    }

    /// The kind named as `llvm-offload-binary`'s `kind=` accepts it.
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "none" => OffloadKind::None,
            "openmp" => OffloadKind::OpenMp,
            "cuda" => OffloadKind::Cuda,
            "hip" => OffloadKind::Hip,
            "sycl" => OffloadKind::Sycl,
            _ => return None,
        })
    }
}

/// One OffloadBinary: an image, its kinds, flags and string metadata.
///
/// `strings` keeps the on-disk order of the string entries; that order is part of the bytes
/// (see [`llvm_key_order`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffloadBinary<'a> {
    /// What the image is: object, bitcode, cubin, PTX, ….
    pub image_kind: ImageKind,
    /// The programming model it was compiled for.
    pub offload_kind: OffloadKind,
    /// The entry's `Flags` word, as read or to be written.
    pub flags: u32,
    /// Key/value string metadata (`triple`, `arch`, …), in on-disk order.
    pub strings: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    /// The image's bytes.
    pub image: Cow<'a, [u8]>,
}

/// The metadata part of an OffloadBinary, laid out for writing: everything but the image.
#[derive(Debug, Clone)]
pub struct BinaryLayout {
    /// The bytes before the image: header, entry, string entries, string table, padding.
    pub prefix: Vec<u8>,
    /// Zero bytes to write after the image.
    pub trailing_padding: u64,
    /// Total size of the binary (the header's `Size`).
    pub size: u64,
}

fn align8(v: u64) -> u64 {
    v.div_ceil(ALIGNMENT) * ALIGNMENT
}

fn rd_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn rd_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn rd_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// An ELF string table as LLVM's `StringTableBuilder(ELF)` + `finalize()` lays it out: byte 0
/// is NUL, strings sorted by their reversed bytes in descending order, and a string that is a
/// suffix of the one placed just before it shares that string's tail; the empty string is
/// the leading NUL.
///
/// Returns the table and each input string's offset (in input order; duplicates share one).
pub fn elf_string_table<S: AsRef<[u8]>>(strings: &[S]) -> (Vec<u8>, Vec<u64>) {
    let mut unique: Vec<&[u8]> = strings.iter().map(|s| s.as_ref()).collect();
    unique.sort_unstable();
    unique.dedup();
    // LLVM's multikey sort compares characters from the end, larger first, with "no more
    // characters" ranking below every byte: that is descending order of the reversed strings.
    unique.sort_by(|a, b| b.iter().rev().cmp(a.iter().rev()));
    let mut table = vec![0u8];
    let mut placed: Vec<(&[u8], u64)> = Vec::with_capacity(unique.len());
    let mut previous: &[u8] = &[];
    for s in unique {
        // The empty string is the table's leading NUL, as the tool lays it out.
        if s.is_empty() {
            placed.push((s, 0));
            continue;
        }
        if previous.ends_with(s) {
            placed.push((s, table.len() as u64 - s.len() as u64 - 1));
            continue;
        }
        placed.push((s, table.len() as u64));
        table.extend_from_slice(s);
        table.push(0);
        previous = s;
    }
    let offsets = strings
        .iter()
        .map(|s| {
            let s = s.as_ref();
            placed
                .iter()
                .find(|(p, _)| *p == s)
                .map_or(0, |&(_, off)| off)
        })
        .collect();
    (table, offsets)
}

/// The order in which `llvm-offload-binary` (LLVM 22) stores the string entries of an
/// `--image=` argument whose keys are `keys`, in command-line order: its `DenseMap` iteration
/// order (see [`crate::llvm_hash`]), e.g. `file, triple, arch, kind` → arch, triple. Pass
/// every key of the argument, `file` and `kind` included: they are in the map too and shape
/// its layout, but are not stored, so they are left out of the result. A repeated key counts
/// once, at its first position.
pub fn llvm_key_order<'k>(keys: &[&'k str]) -> Vec<&'k str> {
    crate::llvm_hash::dense_map_order(keys)
        .into_iter()
        .filter(|k| *k != "file" && *k != "kind")
        .collect()
}

impl<'a> OffloadBinary<'a> {
    /// A binary with no strings and no flags.
    pub fn new(
        image_kind: ImageKind,
        offload_kind: OffloadKind,
        image: impl Into<Cow<'a, [u8]>>,
    ) -> Self {
        OffloadBinary {
            image_kind,
            offload_kind,
            flags: 0,
            strings: Vec::new(),
            image: image.into(),
        }
    }

    /// Appends a string entry (builder style).
    pub fn with_string(
        mut self,
        key: impl Into<Cow<'a, str>>,
        value: impl Into<Cow<'a, str>>,
    ) -> Self {
        self.strings.push((key.into(), value.into()));
        self
    }

    /// The value of the first string entry named `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.strings
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_ref())
    }

    /// The `triple` string.
    pub fn triple(&self) -> Option<&str> {
        self.get(KEY_TRIPLE)
    }

    /// The `arch` string.
    pub fn arch(&self) -> Option<&str> {
        self.get(KEY_ARCH)
    }

    /// Sets `key` to `value`, replacing an existing entry in place or appending a new one.
    pub fn set(&mut self, key: impl Into<Cow<'a, str>>, value: impl Into<Cow<'a, str>>) {
        let key = key.into();
        let value = value.into();
        match self.strings.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.strings.push((key, value)),
        }
    }

    /// Reorders the string entries as `llvm-offload-binary` stores them when given
    /// `--image=file=..,kind=..,` followed by these keys in their current order.
    pub fn apply_llvm_key_order(&mut self) {
        let keys: Vec<String> = self.strings.iter().map(|(k, _)| k.to_string()).collect();
        let mut spec: Vec<&str> = vec!["file", "kind"];
        spec.extend(keys.iter().map(String::as_str));
        let order: Vec<String> = llvm_key_order(&spec)
            .into_iter()
            .map(str::to_owned)
            .collect();
        let mut old = std::mem::take(&mut self.strings);
        for key in order {
            if let Some(pos) = old.iter().position(|(k, _)| *k == key) {
                self.strings.push(old.remove(pos));
            }
        }
        // Keys the tool cannot store (`file`, `kind`) stay, at the end.
        self.strings.append(&mut old);
    }

    /// Total size of the serialized binary (the header's `Size`).
    pub fn serialized_size(&self) -> u64 {
        let (table, _) = elf_string_table(&self.string_refs());
        let data =
            align8(FIXED_SIZE + STRING_ENTRY_SIZE * self.strings.len() as u64 + table.len() as u64);
        align8(data + self.image.len() as u64)
    }

    fn string_refs(&self) -> Vec<&str> {
        self.strings
            .iter()
            .flat_map(|(k, v)| [k.as_ref(), v.as_ref()])
            .collect()
    }

    /// Lays out everything but the image for an image of `image_size` bytes.
    ///
    /// With [`BinaryLayout::prefix`], then the image, then `trailing_padding` zeros, a caller
    /// can stream a large image from a reader instead of holding it in memory.
    pub fn layout(&self, image_size: u64) -> Result<BinaryLayout> {
        for s in self.string_refs() {
            if s.as_bytes().contains(&0) {
                return Err(Error::BinaryStringHasNul(s.to_owned()));
            }
        }
        let refs = self.string_refs();
        let (table, offsets) = elf_string_table(&refs);
        let n = self.strings.len() as u64;
        let string_offset = FIXED_SIZE;
        let table_offset = string_offset + STRING_ENTRY_SIZE * n;
        let image_offset = align8(table_offset + table.len() as u64);
        let size = align8(image_offset + image_size);

        let mut p = Vec::with_capacity(image_offset as usize);
        p.extend_from_slice(&OFFLOAD_BINARY_MAGIC);
        p.extend_from_slice(&OFFLOAD_BINARY_VERSION.to_le_bytes());
        p.extend_from_slice(&size.to_le_bytes());
        p.extend_from_slice(&HEADER_SIZE.to_le_bytes());
        p.extend_from_slice(&ENTRY_SIZE.to_le_bytes());
        p.extend_from_slice(&self.image_kind.to_u16().to_le_bytes());
        p.extend_from_slice(&self.offload_kind.to_u16().to_le_bytes());
        p.extend_from_slice(&self.flags.to_le_bytes());
        p.extend_from_slice(&string_offset.to_le_bytes());
        p.extend_from_slice(&n.to_le_bytes());
        p.extend_from_slice(&image_offset.to_le_bytes());
        p.extend_from_slice(&image_size.to_le_bytes());
        for off in &offsets {
            p.extend_from_slice(&(table_offset + off).to_le_bytes());
        }
        p.extend_from_slice(&table);
        p.resize(image_offset as usize, 0);
        Ok(BinaryLayout {
            prefix: p,
            trailing_padding: size - image_offset - image_size,
            size,
        })
    }

    /// Writes the binary; the bytes equal `llvm-offload-binary`'s for the same string order.
    ///
    /// Fails with `InvalidInput` when a key or value contains a NUL byte.
    pub fn write_to<W: Write>(&self, mut w: W) -> io::Result<()> {
        let layout = self
            .layout(self.image.len() as u64)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        w.write_all(&layout.prefix)?;
        w.write_all(&self.image)?;
        write_zeros(&mut w, layout.trailing_padding)
    }

    /// Writes the binary with its image taken from `image`, which must yield exactly
    /// `image_size` bytes; `self.image` is ignored. Returns the number of bytes written.
    pub fn write_streaming<W: Write, R: Read>(
        &self,
        image: R,
        image_size: u64,
        mut w: W,
    ) -> Result<u64> {
        let layout = self.layout(image_size)?;
        w.write_all(&layout.prefix)?;
        copy_exact(image, image_size, &mut w)?;
        write_zeros(&mut w, layout.trailing_padding)?;
        Ok(layout.size)
    }

    /// The serialized bytes, as [`OffloadBinary::write_to`] writes them.
    ///
    /// Version 1 cannot store a NUL inside a key or value; such a string is cut at its first
    /// NUL here (as a C reader would see it), where `write_to` reports an error instead.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(usize::try_from(self.serialized_size()).unwrap_or(0));
        if self.write_to(&mut v).is_ok() {
            return v;
        }
        let cut = |s: &str| s.split('\0').next().unwrap_or("").to_owned();
        let trimmed = OffloadBinary {
            strings: self
                .strings
                .iter()
                .map(|(k, v)| (Cow::Owned(cut(k)), Cow::Owned(cut(v))))
                .collect(),
            image: Cow::Borrowed(self.image.as_ref()),
            ..*self
        };
        let mut v = Vec::new();
        // Cannot fail: no string has a NUL any more and writing to a Vec does not fail.
        let _ = trimmed.write_to(&mut v);
        v
    }

    /// Parses one binary at the start of `bytes`, borrowing strings and image from it.
    ///
    /// Returns the binary and the number of bytes it occupies (its header `Size`). The
    /// buffer need not be 8-aligned.
    pub fn parse(bytes: &'a [u8]) -> Result<(OffloadBinary<'a>, usize)> {
        Self::parse_at(bytes, 0)
    }

    /// Like [`OffloadBinary::parse`], with `base` added to every offset in errors.
    pub fn parse_at(bytes: &'a [u8], base: u64) -> Result<(OffloadBinary<'a>, usize)> {
        let available = bytes.len() as u64;
        if bytes.len() < 4 || bytes[..4] != OFFLOAD_BINARY_MAGIC {
            let mut found = [0u8; 4];
            let n = bytes.len().min(4);
            found[..n].copy_from_slice(&bytes[..n]);
            return Err(Error::BinaryBadMagic {
                offset: base,
                found,
            });
        }
        if available < FIXED_SIZE {
            return Err(Error::BinaryTruncated {
                offset: base,
                available,
            });
        }
        let version = rd_u32(bytes, 4);
        if version != OFFLOAD_BINARY_VERSION {
            return Err(Error::BinaryUnsupportedVersion {
                offset: base + 4,
                version,
            });
        }
        let size = rd_u64(bytes, 8);
        if size < FIXED_SIZE || size > available {
            return Err(Error::BinarySizeOutOfRange {
                offset: base + 8,
                size,
                available,
            });
        }
        let entry_offset = rd_u64(bytes, 16);
        let entry_size = rd_u64(bytes, 24);
        if entry_offset < HEADER_SIZE
            || entry_offset > size - ENTRY_SIZE
            || entry_size < ENTRY_SIZE
            || entry_size > size - HEADER_SIZE
        {
            return Err(Error::BinaryEntryOutOfRange {
                offset: base + 16,
                entry_offset,
                entry_size,
                size,
            });
        }
        // In range: entry_offset + 40 <= size <= bytes.len().
        let data = &bytes[..size as usize];
        let e = entry_offset as usize;
        let image_kind = ImageKind::from_u16(rd_u16(data, e));
        let offload_kind = OffloadKind::from_u16(rd_u16(data, e + 2));
        let flags = rd_u32(data, e + 4);
        let string_offset = rd_u64(data, e + 8);
        let num_strings = rd_u64(data, e + 16);
        let image_offset = rd_u64(data, e + 24);
        let image_size = rd_u64(data, e + 32);

        let strings_fit = num_strings
            .checked_mul(STRING_ENTRY_SIZE)
            .and_then(|len| string_offset.checked_add(len))
            .is_some_and(|end| end <= size);
        if !strings_fit {
            return Err(Error::BinaryStringEntriesOutOfRange {
                offset: base + entry_offset + 16,
                string_offset,
                count: num_strings,
                size,
            });
        }
        let image_end = image_offset.checked_add(image_size);
        if image_end.is_none_or(|end| end > size) {
            return Err(Error::BinaryImageOutOfRange {
                offset: base + entry_offset + 32,
                image_offset,
                image_size,
                size,
            });
        }
        // num_strings * 16 <= size fits in memory, so this capacity is bounded by the input.
        let mut strings = Vec::with_capacity(num_strings as usize);
        for i in 0..num_strings {
            let at = string_offset + i * STRING_ENTRY_SIZE;
            let key = read_cstr(data, rd_u64(data, at as usize), base + at, "key")?;
            let value = read_cstr(data, rd_u64(data, at as usize + 8), base + at + 8, "value")?;
            strings.push((Cow::Borrowed(key), Cow::Borrowed(value)));
        }
        let image = &data[image_offset as usize..(image_offset + image_size) as usize];
        Ok((
            OffloadBinary {
                image_kind,
                offload_kind,
                flags,
                strings,
                image: Cow::Borrowed(image),
            },
            size as usize,
        ))
    }

    /// A copy that owns its strings and image.
    pub fn into_owned(self) -> OffloadBinary<'static> {
        OffloadBinary {
            image_kind: self.image_kind,
            offload_kind: self.offload_kind,
            flags: self.flags,
            strings: self
                .strings
                .into_iter()
                .map(|(k, v)| (Cow::Owned(k.into_owned()), Cow::Owned(v.into_owned())))
                .collect(),
            image: Cow::Owned(self.image.into_owned()),
        }
    }
}

fn read_cstr<'a>(data: &'a [u8], at: u64, field: u64, what: &'static str) -> Result<&'a str> {
    let start = usize::try_from(at).ok().filter(|&s| s < data.len()).ok_or(
        Error::BinaryStringOutOfRange {
            offset: field,
            what,
        },
    )?;
    let len = data[start..]
        .iter()
        .position(|&b| b == 0)
        .ok_or(Error::BinaryStringOutOfRange {
            offset: field,
            what,
        })?;
    std::str::from_utf8(&data[start..start + len])
        .map_err(|_| Error::BinaryStringNotUtf8 { offset: at, what })
}

/// Parses binaries stored back to back, as LLVM reads a `.llvm.offloading` section: each one
/// starts `Size` bytes after the previous. Trailing zero bytes (section padding) are ignored.
pub fn parse_all(bytes: &[u8]) -> Result<Vec<OffloadBinary<'_>>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        if rest.iter().all(|&b| b == 0) {
            break;
        }
        let (bin, used) = OffloadBinary::parse_at(rest, pos as u64)?;
        out.push(bin);
        pos += used;
    }
    Ok(out)
}

/// Writes `n` zero bytes.
pub(crate) fn write_zeros<W: Write + ?Sized>(w: &mut W, mut n: u64) -> io::Result<()> {
    const ZEROS: [u8; 4096] = [0; 4096];
    while n > 0 {
        let k = n.min(ZEROS.len() as u64) as usize;
        w.write_all(&ZEROS[..k])?;
        n -= k as u64;
    }
    Ok(())
}

/// Copies exactly `n` bytes from `r` to `w`; a short source is an `UnexpectedEof` error.
pub(crate) fn copy_exact<R: Read, W: Write + ?Sized>(r: R, n: u64, w: &mut W) -> io::Result<()> {
    let copied = io::copy(&mut r.take(n), w)?;
    if copied != n {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("source ended after {copied} of {n} bytes"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_crc32_is_the_ieee_crc_and_a_damaged_image_fails_its_check() {
        // The CRC-32 (IEEE 802.3) check value.
        assert_eq!(image_crc32(b"123456789"), "cbf43926");
        assert_eq!(check_image_crc32(b"123456789", "CBF43926"), Ok(()));
        let damaged = check_image_crc32(b"123456780", "cbf43926").unwrap_err();
        assert!(
            damaged.contains("recorded at build time as cbf43926"),
            "{damaged}"
        );
        assert!(check_image_crc32(b"", "cbf4392").is_err());
        assert!(check_image_crc32(b"", "cbf4392g").is_err());
    }

    #[test]
    fn string_table_matches_llvm_example() {
        let (t, off) = elf_string_table(&["arch", "gfx90a", "triple", "amdgcn-amd-amdhsa"]);
        assert_eq!(t, b"\0arch\0triple\0amdgcn-amd-amdhsa\0gfx90a\0");
        assert_eq!(off, vec![1, 31, 6, 13]);
    }

    #[test]
    fn string_table_tail_merges() {
        let (t, off) = elf_string_table(&["bc", "abc", "c"]);
        assert_eq!(t, b"\0abc\0");
        assert_eq!(off, vec![2, 1, 3]);
    }

    #[test]
    fn formats_md_example_bytes() {
        let bin = OffloadBinary::new(ImageKind::None, OffloadKind::OpenMp, &b"12345678"[..])
            .with_string("arch", "gfx90a")
            .with_string("triple", "amdgcn-amd-amdhsa");
        let bytes = bin.to_bytes();
        assert_eq!(bytes.len(), 0x98);
        assert_eq!(bin.serialized_size(), 0x98);
        assert_eq!(rd_u64(&bytes, 0x48), 0x69);
        assert_eq!(rd_u64(&bytes, 0x50), 0x87);
        assert_eq!(rd_u64(&bytes, 0x58), 0x6e);
        assert_eq!(rd_u64(&bytes, 0x60), 0x75);
        assert_eq!(rd_u64(&bytes, 0x38), 0x90);
        let (back, used) = OffloadBinary::parse(&bytes).unwrap();
        assert_eq!(used, 0x98);
        assert_eq!(back, bin);
    }

    #[test]
    fn parse_unaligned_and_back_to_back() {
        let a = OffloadBinary::new(ImageKind::Ptx, OffloadKind::Cuda, &b"ptx"[..])
            .with_string("triple", "nvptx64-nvidia-cuda")
            .with_string("arch", "sm_80");
        let b = OffloadBinary::new(ImageKind::Object, OffloadKind::Hip, &[][..])
            .with_string("triple", "amdgcn-amd-amdhsa");
        let mut buf = vec![0xEEu8];
        a.write_to(&mut buf).unwrap();
        b.write_to(&mut buf).unwrap();
        buf.extend_from_slice(&[0; 16]);
        let all = parse_all(&buf[1..]).unwrap();
        assert_eq!(all, vec![a, b]);
    }

    #[test]
    fn rejects_bad_input() {
        let bin =
            OffloadBinary::new(ImageKind::Ptx, OffloadKind::Cuda, &b"x"[..]).with_string("k", "v");
        let good = bin.to_bytes();
        for cut in 0..good.len() {
            assert!(OffloadBinary::parse(&good[..cut]).is_err(), "cut {cut}");
        }
        let mut bad = good.clone();
        bad[0x30..0x38].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            OffloadBinary::parse(&bad),
            Err(Error::BinaryStringEntriesOutOfRange { offset: 0x30, .. })
        ));
        let mut bad = good.clone();
        bad[0x40..0x48].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            OffloadBinary::parse(&bad),
            Err(Error::BinaryImageOutOfRange { offset: 0x40, .. })
        ));
        let mut bad = good.clone();
        bad[4] = 2;
        assert!(matches!(
            OffloadBinary::parse(&bad),
            Err(Error::BinaryUnsupportedVersion {
                version: 2,
                offset: 4
            })
        ));
        let mut bad = good.clone();
        bad[0x48..0x50].copy_from_slice(&(good.len() as u64).to_le_bytes());
        assert!(matches!(
            OffloadBinary::parse(&bad),
            Err(Error::BinaryStringOutOfRange { what: "key", .. })
        ));
    }

    fn params(kernel: &str, sizes: &[u32]) -> KernelParams {
        KernelParams {
            kernel: kernel.to_owned(),
            sizes: sizes.to_vec(),
        }
    }

    #[test]
    fn kernel_params_round_trip() {
        let cases: Vec<(Vec<KernelParams>, &str)> = vec![
            (vec![], ""),
            (vec![params("scale", &[8, 4, 4])], "scale:8,4,4"),
            (
                vec![
                    params("scale", &[8, 4, 4]),
                    params("_Z9scale_cppPffi", &[8, 4, 4]),
                    params("noargs", &[]),
                    params("_ZN2ns2tkIdEEvPT_S1_", &[8, 8]),
                    params("big", &[0, u32::MAX]),
                ],
                "scale:8,4,4;_Z9scale_cppPffi:8,4,4;noargs:;_ZN2ns2tkIdEEvPT_S1_:8,8;big:0,4294967295",
            ),
            (vec![params("only", &[])], "only:"),
        ];
        for (list, text) in cases {
            assert_eq!(encode_kernel_params(&list), text);
            assert_eq!(parse_kernel_params(text).unwrap(), list, "{text}");
        }
    }

    #[test]
    fn malformed_kernel_params_are_typed_errors() {
        let cases: &[(&str, u64)] = &[
            ("scale", 0),
            (";", 0),
            ("a:4;", 4),
            ("a:4;;b:4", 4),
            (":4", 0),
            ("a:4,", 4),
            ("a:,4", 2),
            ("a:4,,8", 4),
            ("a:x", 2),
            ("a:-4", 2),
            ("a:+4", 2),
            ("a: 4", 2),
            ("a:4294967296", 2),
            ("a:4;b:8,99999999999", 8),
            ("a b:4", 1),
            ("a,b:4", 1),
            ("a:4:4", 2),
            ("a:4;a:8", 4),
        ];
        for &(text, want) in cases {
            match parse_kernel_params(text) {
                Err(Error::BadKernelParams { offset, .. }) => assert_eq!(offset, want, "{text:?}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    fn figures(name: &str, values: [u64; 6]) -> PtxasKernelInfo {
        PtxasKernelInfo {
            name: name.to_owned(),
            registers: u32::try_from(values[0]).unwrap(),
            shared_bytes: values[1],
            stack_bytes: values[2],
            spill_store_bytes: values[3],
            spill_load_bytes: values[4],
            constant_bytes: values[5],
        }
    }

    #[test]
    fn kernel_resources_round_trip() {
        let cases: Vec<(Vec<PtxasKernelInfo>, &str)> = vec![
            (vec![], ""),
            (
                vec![figures("saxpy", [8, 0, 0, 0, 0, 372])],
                "saxpy:registers=8,shared=0,stack=0,spill-stores=0,spill-loads=0,constant=372",
            ),
            (
                vec![
                    figures("block_sum", [12, 2048, 16, 4, 8, 380]),
                    figures("_Z5scalePffi", [u64::from(u32::MAX), 0, u64::MAX, 0, 0, 0]),
                ],
                "block_sum:registers=12,shared=2048,stack=16,spill-stores=4,spill-loads=8,\
                 constant=380;_Z5scalePffi:registers=4294967295,shared=0,\
                 stack=18446744073709551615,spill-stores=0,spill-loads=0,constant=0",
            ),
        ];
        for (list, text) in cases {
            assert_eq!(encode_kernel_resources(&list), text);
            assert_eq!(parse_kernel_resources(text).unwrap(), list, "{text}");
        }
        // Fields in another order read the same.
        assert_eq!(
            parse_kernel_resources(
                "k:constant=1,spill-loads=2,spill-stores=3,stack=4,shared=5,registers=6"
            )
            .unwrap(),
            [figures("k", [6, 5, 4, 3, 2, 1])]
        );
    }

    #[test]
    fn malformed_kernel_resources_are_typed_errors() {
        const ALL: &str = "registers=1,shared=2,stack=3,spill-stores=4,spill-loads=5,constant=6";
        let with = |text: &str| text.replace("ALL", ALL);
        // `k:ALL` ends at byte `END`.
        const END: u64 = 2 + ALL.len() as u64;
        let cases: &[(&str, u64)] = &[
            ("k", 0),
            (";", 0),
            (":ALL", 0),
            ("k:ALL;", END + 1),
            ("k:ALL;;j:ALL", END + 1),
            ("k:", 2),
            ("k:ALL,", END + 1),
            ("k:registers", 2),
            ("k:registers=1", 0),
            ("k:ALL,registers=1", END + 1),
            ("k:ALL,colour=1", END + 1),
            (
                "k:registers=x,shared=2,stack=3,spill-stores=4,spill-loads=5,constant=6",
                12,
            ),
            (
                "k:registers=-1,shared=2,stack=3,spill-stores=4,spill-loads=5,constant=6",
                12,
            ),
            (
                "k:registers=+1,shared=2,stack=3,spill-stores=4,spill-loads=5,constant=6",
                12,
            ),
            (
                "k:registers=,shared=2,stack=3,spill-stores=4,spill-loads=5,constant=6",
                12,
            ),
            (
                "k:registers=4294967296,shared=2,stack=3,spill-stores=4,spill-loads=5,constant=6",
                12,
            ),
            (
                "k:registers=1,shared=18446744073709551616,stack=3,spill-stores=4,spill-loads=5,\
                 constant=6",
                21,
            ),
            ("k j:ALL", 1),
            ("k,j:ALL", 1),
            ("k=j:ALL", 1),
            ("k:ALL:x", END - 1),
            ("k:ALL;k:ALL", END + 1),
        ];
        for &(text, want) in cases {
            let text = with(text);
            match parse_kernel_resources(&text) {
                Err(Error::BadKernelResources { offset, .. }) => {
                    assert_eq!(offset, want, "{text:?}")
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn key_order() {
        let order = |k: &[&'static str]| llvm_key_order(k);
        assert_eq!(
            order(&["file", "triple", "arch", "kind"]),
            ["arch", "triple"]
        );
        assert_eq!(
            order(&["file", "kind", "triple", "arch", "foo", "bar"]),
            ["arch", "bar", "triple", "foo"]
        );
        assert_eq!(order(&["arch", "arch"]), ["arch"]);
    }
}
