//! Device images and the bundle that carries them.

use std::borrow::Cow;

use offload_format::offload_binary::KernelParams;
use offload_format::offload_binary::{KEY_ARCH, KEY_KERNELS, KEY_MODULE, KEY_TRIPLE};
use offload_format::{ImageKind, OffloadBinary, OffloadKind};

use crate::arch::OffloadArch;

/// One linked device image of one kernel crate for one architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceImage {
    pub arch: OffloadArch,
    pub image_kind: ImageKind,
    pub offload_kind: OffloadKind,
    /// The kernel crate's library name.
    pub module: String,
    pub kernels: Vec<String>,
    /// The parameter sizes of the kernels, where the build knows them (images of CUDA and HIP
    /// sources), stored under `KEY_KERNEL_PARAMS`.
    pub kernel_params: Vec<KernelParams>,
    pub bytes: Vec<u8>,
}

impl DeviceImage {
    /// The image wrapped as LLVM's tools expect it. `arch` comes before `triple`, the order
    /// `llvm-offload-binary` writes them in.
    pub fn to_offload_binary(&self) -> OffloadBinary<'_> {
        OffloadBinary {
            image_kind: self.image_kind,
            offload_kind: self.offload_kind,
            flags: 0,
            strings: vec![
                (Cow::Borrowed(KEY_ARCH), Cow::Owned(self.arch.name())),
                (Cow::Borrowed(KEY_TRIPLE), Cow::Borrowed(self.arch.triple())),
                (
                    Cow::Borrowed(KEY_MODULE),
                    Cow::Borrowed(self.module.as_str()),
                ),
                (
                    Cow::Owned(KEY_KERNELS.to_owned()),
                    Cow::Owned(self.kernels.join(",")),
                ),
            ],
            image: Cow::Borrowed(&self.bytes),
        }
    }

    /// File extension clang's tools use for this kind of image.
    pub fn extension(&self) -> &'static str {
        match self.image_kind {
            ImageKind::Ptx => "s",
            ImageKind::Cubin => "cubin",
            ImageKind::Fatbinary => "fatbin",
            ImageKind::Bitcode => "bc",
            _ => "o",
        }
    }
}

/// Concatenated OffloadBinaries, as in a `.llvm.offloading` section.
pub fn bundle(images: &[DeviceImage]) -> Vec<u8> {
    let mut out = Vec::new();
    for image in images {
        out.extend_from_slice(&image.to_offload_binary().to_bytes());
    }
    out
}

/// Kernel names declared in PTX (`.entry name(`), in order.
pub fn kernels_of_ptx(ptx: &str) -> Vec<String> {
    ptx.lines()
        .filter_map(|line| {
            let rest = line.trim_start();
            let rest = rest
                .strip_prefix(".visible ")
                .or_else(|| rest.strip_prefix(".weak "))
                .unwrap_or(rest)
                .trim_start();
            let name = rest.strip_prefix(".entry ")?.trim_start();
            let end = name
                .find(|c: char| c == '(' || c.is_whitespace())
                .unwrap_or(name.len());
            (end > 0).then(|| name[..end].to_owned())
        })
        .collect()
}

/// Prefix of the per-kernel entry points a CPU device image exports: the ABI constant
/// `offload_rt::device::abi::CPU_RUN_PREFIX`, repeated because the build does not depend on
/// the runtime.
pub const CPU_ENTRY_PREFIX: &str = "__offload_cpu_run_";

/// Kernel names a CPU device image exports, read from its dynamic symbol table.
pub fn kernels_of_cpu_image(elf: &[u8]) -> Result<Vec<String>, String> {
    use object::{Object, ObjectSymbol};
    let file = object::File::parse(elf).map_err(|e| format!("not an ELF object: {e}"))?;
    let mut names: Vec<String> = file
        .dynamic_symbols()
        .filter(|s| s.is_definition())
        .filter_map(|s| {
            s.name()
                .ok()?
                .strip_prefix(CPU_ENTRY_PREFIX)
                .map(str::to_owned)
        })
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

/// Prefix of the note a CPU image carries for a kernel with barriers that runs with one
/// coroutine per GPU thread (`offload_rt::device::abi::CPU_NOTE_PREFIX`).
pub const CPU_NOTE_PREFIX: &str = "__offload_cpu_note_";

/// The kernels of a CPU image that keep the coroutine path for their barriers, each with the
/// reason `#[kernel]` recorded, sorted by kernel.
pub fn coroutine_notes_of_cpu_image(elf: &[u8]) -> Result<Vec<(String, String)>, String> {
    use object::{Object, ObjectSection, ObjectSymbol};
    let file = object::File::parse(elf).map_err(|e| format!("not an ELF object: {e}"))?;
    let mut notes = Vec::new();
    for symbol in file.dynamic_symbols().filter(|s| s.is_definition()) {
        let Some(kernel) = symbol
            .name()
            .ok()
            .and_then(|n| n.strip_prefix(CPU_NOTE_PREFIX))
        else {
            continue;
        };
        let bytes = symbol
            .section_index()
            .and_then(|i| file.section_by_index(i).ok())
            .and_then(|section| {
                section
                    .data_range(symbol.address(), symbol.size())
                    .ok()
                    .flatten()
            })
            .ok_or_else(|| format!("the note of kernel `{kernel}` is not in the image's data"))?;
        notes.push((
            kernel.to_owned(),
            String::from_utf8_lossy(bytes).into_owned(),
        ));
    }
    notes.sort();
    Ok(notes)
}

/// Prefix of the target-region entry points clang's OpenMP offloading gives a device image
/// (`__omp_offloading_<device>_<file>_<function>_l<line>`).
pub const OPENMP_ENTRY_PREFIX: &str = "__omp_offloading_";

/// The target-region entry points an OpenMP offload image for a host-CPU target exports: its
/// defined dynamic functions named `__omp_offloading_...`, sorted. Outlined helpers
/// (`....omp_outlined`) are local and the `.offloading.entry.` records are data, so neither
/// is listed.
pub fn kernels_of_openmp_image(elf: &[u8]) -> Vec<String> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let Ok(file) = object::File::parse(elf) else {
        return Vec::new();
    };
    let mut names: Vec<String> = file
        .dynamic_symbols()
        .filter(|s| s.is_definition() && s.kind() == SymbolKind::Text)
        .filter_map(|s| s.name().ok().map(str::to_owned))
        .filter(|n| n.starts_with(OPENMP_ENTRY_PREFIX))
        .collect();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_entries_are_found() {
        let ptx = ".version 7.8\n.target sm_80\n.visible .entry saxpy(\n\t.param .u32 saxpy_param_0\n)\n{\n}\n.entry other (\n)\n.func helper(\n";
        assert_eq!(kernels_of_ptx(ptx), vec!["saxpy", "other"]);
    }

    #[test]
    fn offload_binary_carries_the_contract_keys() {
        let image = DeviceImage {
            arch: OffloadArch::Nvptx(offload_format::Sm::parse("sm_80").unwrap()),
            image_kind: ImageKind::Ptx,
            offload_kind: OffloadKind::Cuda,
            module: "saxpy_kernels".into(),
            kernels: vec!["a".into(), "b".into()],
            kernel_params: Vec::new(),
            bytes: b"ptx".to_vec(),
        };
        let bytes = bundle(std::slice::from_ref(&image));
        let parsed = offload_format::parse_all(&bytes).unwrap();
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].triple(), Some("nvptx64-nvidia-cuda"));
        assert_eq!(parsed[0].arch(), Some("sm_80"));
        assert_eq!(parsed[0].get(KEY_MODULE), Some("saxpy_kernels"));
        assert_eq!(parsed[0].get(KEY_KERNELS), Some("a,b"));
        assert_eq!(&*parsed[0].image, b"ptx");
    }
}
