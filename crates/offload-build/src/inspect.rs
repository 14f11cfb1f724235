//! What a file carries: the device images embedded in an executable, object or shared
//! library (`.llvm.offloading` sections), or a bare bundle of OffloadBinaries.

use std::collections::BTreeMap;

use offload_format::{ImageKind, OffloadBinary};
use serde::Serialize;

use crate::image::{KEY_KERNELS, KEY_MODULE, kernels_of_cpu_image, kernels_of_ptx};

/// ELF section type of `.llvm.offloading` (`SHT_LLVM_OFFLOADING`).
pub const SHT_LLVM_OFFLOADING: u32 = 0x6fff_4c0b;

/// One embedded image, as `cargo offload inspect` shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ImageInfo {
    /// Where it was found: a section name, or `file`.
    pub container: String,
    pub index: usize,
    pub triple: String,
    pub arch: String,
    /// Image kind as `llvm-objdump --offloading` names it (`elf`, `ptx`, `cubin`, …).
    pub kind: String,
    /// Offload kind (`openmp`, `cuda`, `hip`), `llvm-objdump`'s "producer".
    pub producer: String,
    pub size: u64,
    pub module: Option<String>,
    pub kernels: Vec<String>,
    /// Every string entry of the OffloadBinary.
    pub strings: BTreeMap<String, String>,
    /// Per-kernel resource figures, where the image format records them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<KernelResources>,
}

/// Resource use of one kernel (AMDGPU metadata; NVPTX through `ptxas -v`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct KernelResources {
    pub kernel: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vgprs: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sgprs: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registers: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scratch_bytes: Option<u64>,
}

/// Why a file could not be inspected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InspectError {
    #[error("section {section}: {source}")]
    Section {
        section: String,
        #[source]
        source: offload_format::Error,
    },
    #[error(transparent)]
    Format(#[from] offload_format::Error),
}

/// Finds and describes every offload image in `bytes`.
pub fn inspect(bytes: &[u8]) -> Result<Vec<ImageInfo>, InspectError> {
    let mut out = Vec::new();
    if bytes.starts_with(&offload_format::OFFLOAD_BINARY_MAGIC) {
        for (i, bin) in offload_format::parse_all(bytes)?.iter().enumerate() {
            out.push(describe(bin, "file", i));
        }
        return Ok(out);
    }
    if let Ok(file) = object::File::parse(bytes) {
        use object::{Object, ObjectSection};
        for section in file.sections() {
            let name = section.name().unwrap_or("").to_owned();
            let is_offloading = match section.flags() {
                object::SectionFlags::Elf { .. } => {
                    elf_section_type(&file, section.index()) == Some(SHT_LLVM_OFFLOADING)
                }
                _ => name.starts_with(".llvm.offloading"),
            };
            if !is_offloading {
                continue;
            }
            let Ok(data) = section.data() else { continue };
            let bins = offload_format::parse_all(data).map_err(|source| InspectError::Section {
                section: name.clone(),
                source,
            })?;
            for (i, bin) in bins.iter().enumerate() {
                out.push(describe(bin, &name, i));
            }
        }
    }
    Ok(out)
}

fn elf_section_type(file: &object::File<'_>, index: object::SectionIndex) -> Option<u32> {
    use object::read::elf::SectionHeader;
    match file {
        object::File::Elf64(elf) => {
            let endian = elf.endian();
            let header = elf.elf_section_table().section(index).ok()?;
            Some(header.sh_type(endian))
        }
        object::File::Elf32(elf) => {
            let endian = elf.endian();
            let header = elf.elf_section_table().section(index).ok()?;
            Some(header.sh_type(endian))
        }
        _ => None,
    }
}

/// Describes one OffloadBinary, reading the kernel list from the image when no key carries it.
pub fn describe(bin: &OffloadBinary<'_>, container: &str, index: usize) -> ImageInfo {
    let strings: BTreeMap<String, String> = bin
        .strings
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut kernels: Vec<String> = bin
        .get(KEY_KERNELS)
        .map(|k| {
            k.split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let resources = image_resources(bin);
    if kernels.is_empty() {
        kernels = match bin.image_kind {
            ImageKind::Ptx => kernels_of_ptx(&String::from_utf8_lossy(&bin.image)),
            ImageKind::Object if !resources.is_empty() => {
                resources.iter().map(|r| r.kernel.clone()).collect()
            }
            ImageKind::Object => kernels_of_cpu_image(&bin.image).unwrap_or_default(),
            _ => Vec::new(),
        };
    }
    ImageInfo {
        container: container.to_owned(),
        index,
        triple: bin.triple().unwrap_or("").to_owned(),
        arch: bin.arch().unwrap_or("").to_owned(),
        kind: bin.image_kind.name().to_owned(),
        producer: bin.offload_kind.name().to_owned(),
        size: bin.image.len() as u64,
        module: bin.get(KEY_MODULE).map(str::to_owned),
        kernels,
        strings,
        resources,
    }
}

#[cfg(feature = "llvm")]
fn image_resources(bin: &OffloadBinary<'_>) -> Vec<KernelResources> {
    crate::device_link::image_resources(bin)
}

#[cfg(not(feature = "llvm"))]
fn image_resources(_bin: &OffloadBinary<'_>) -> Vec<KernelResources> {
    Vec::new()
}

/// The human-readable listing.
pub fn render_text(path: &str, images: &[ImageInfo]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "{path}: {} offload image(s)", images.len());
    for (n, img) in images.iter().enumerate() {
        let _ = writeln!(
            s,
            "\n[{n}] {} {}  kind {}  producer {}  size {} bytes  ({}[{}])",
            img.triple, img.arch, img.kind, img.producer, img.size, img.container, img.index
        );
        if let Some(m) = &img.module {
            let _ = writeln!(s, "    module   {m}");
        }
        let _ = writeln!(
            s,
            "    kernels  {}",
            if img.kernels.is_empty() {
                "(none found)".to_owned()
            } else {
                img.kernels.join(", ")
            }
        );
        for r in &img.resources {
            let mut parts = Vec::new();
            let fields = [
                ("vgpr", r.vgprs),
                ("sgpr", r.sgprs),
                ("registers", r.registers),
                ("shared", r.shared_bytes),
                ("scratch", r.scratch_bytes),
            ];
            for (label, v) in fields {
                if let Some(v) = v {
                    parts.push(format!("{label} {v}"));
                }
            }
            let _ = writeln!(s, "      {}: {}", r.kernel, parts.join(", "));
        }
    }
    s
}
