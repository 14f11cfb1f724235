//! Device images and the bundle that carries them.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use offload_format::offload_binary::{
    KEY_ARCH, KEY_IMAGE_CRC32, KEY_KERNEL_PARAMS, KEY_KERNEL_RESOURCES, KEY_KERNELS, KEY_MODULE,
    KEY_TRIPLE, KernelParams, PtxasKernelInfo, encode_kernel_params, encode_kernel_resources,
    image_crc32, parse_kernel_params, parse_kernel_resources,
};
use offload_format::{ImageKind, OffloadBinary, OffloadKind};

use crate::arch::OffloadArch;

/// One linked device image of one kernel crate for one architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceImage {
    /// The architecture it was built for.
    pub arch: OffloadArch,
    /// What the bytes are: an object, a cubin, PTX, ….
    pub image_kind: ImageKind,
    /// The programming model recorded in its OffloadBinary.
    pub offload_kind: OffloadKind,
    /// The kernel crate's library name.
    pub module: String,
    /// The names of the kernels it defines, stored under `offload.kernels`.
    pub kernels: Vec<String>,
    /// The parameter sizes of the kernels, where the build knows them (images of CUDA and HIP
    /// sources), stored under `KEY_KERNEL_PARAMS`.
    pub kernel_params: Vec<KernelParams>,
    /// What `ptxas -v` reported for each kernel when the build assembled the image's `sm`
    /// (the cubin and the PTX of an `sm` that gets a cubin), stored under
    /// `KEY_KERNEL_RESOURCES` so that readers need not run `ptxas` again.
    pub kernel_resources: Vec<PtxasKernelInfo>,
    /// The image file's contents.
    pub bytes: Vec<u8>,
}

impl DeviceImage {
    /// An image as [`DeviceImage::to_offload_binary`] wrapped it, with its triple; the text
    /// says what is missing or malformed. `origin` names the file it came from.
    pub fn from_offload_binary(
        b: &OffloadBinary<'_>,
        origin: &str,
    ) -> Result<(String, DeviceImage), String> {
        let key = |k: &str| {
            b.get(k)
                .map(str::to_owned)
                .ok_or_else(|| format!("it lacks the `{k}` key"))
        };
        let triple = key(KEY_TRIPLE)?;
        let arch_name = key(KEY_ARCH)?;
        let arch = crate::arch::parse_list(&arch_name, origin)
            .map_err(|e| e.to_string())?
            .into_iter()
            .next()
            .ok_or_else(|| "it has an empty `arch`".to_owned())?;
        if !matches!(arch, OffloadArch::Host) && arch.triple() != triple {
            return Err(format!("`{arch_name}` is not an {triple} architecture"));
        }
        let kernel_params = match b.get(KEY_KERNEL_PARAMS) {
            Some(text) => parse_kernel_params(text).map_err(|e| e.to_string())?,
            None => Vec::new(),
        };
        let kernel_resources = match b.get(KEY_KERNEL_RESOURCES) {
            Some(text) => parse_kernel_resources(text).map_err(|e| e.to_string())?,
            None => Vec::new(),
        };
        let image = DeviceImage {
            arch,
            image_kind: b.image_kind,
            offload_kind: b.offload_kind,
            module: key(KEY_MODULE)?,
            kernels: key(KEY_KERNELS)?
                .split(',')
                .filter(|k| !k.is_empty())
                .map(str::to_owned)
                .collect(),
            kernel_params,
            kernel_resources,
            bytes: b.image.to_vec(),
        };
        Ok((triple, image))
    }

    /// The image wrapped as LLVM's tools expect it. `arch` comes before `triple`, the order
    /// `llvm-offload-binary` writes them in; then the kernel crate, its kernels and the
    /// image's CRC-32, which the runtime checks before loading it. `offload.kernel-params` is
    /// written only for an image that has kernel parameter sizes, `offload.kernel-resources`
    /// only for one with `ptxas` figures (a kernel the key cannot name, or a repeated one,
    /// left out).
    pub fn to_offload_binary(&self) -> OffloadBinary<'_> {
        let mut strings = vec![
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
        ];
        strings.push((
            Cow::Borrowed(KEY_IMAGE_CRC32),
            Cow::Owned(image_crc32(&self.bytes)),
        ));
        if !self.kernel_params.is_empty() {
            strings.push((
                Cow::Borrowed(KEY_KERNEL_PARAMS),
                Cow::Owned(encode_kernel_params(&self.kernel_params)),
            ));
        }
        let mut named: HashSet<&str> = HashSet::new();
        let resources: Vec<PtxasKernelInfo> = self
            .kernel_resources
            .iter()
            .filter(|k| {
                kernel_params_can_name(&k.name) && !k.name.contains('=') && named.insert(&k.name)
            })
            .cloned()
            .collect();
        if !resources.is_empty() {
            strings.push((
                Cow::Borrowed(KEY_KERNEL_RESOURCES),
                Cow::Owned(encode_kernel_resources(&resources)),
            ));
        }
        OffloadBinary {
            image_kind: self.image_kind,
            offload_kind: self.offload_kind,
            flags: 0,
            strings,
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

/// The parameter sizes of each kernel (`.entry`) of a PTX module, in order: 1 byte for
/// `.u8`/`.s8`/`.b8`, 2 for the 16-bit types, 4 for the 32-bit ones, 8 for the 64-bit ones
/// (pointers are `.u64`), 16 for `.b128`, and N elements for an array `name[N]` (how a struct
/// passed by value is declared). A kernel with a parameter of another type is left out: its
/// launches are not checked, rather than checked against a wrong size. So is a kernel declared
/// twice with different parameters (one declared twice alike is listed once), and one whose
/// name `offload.kernel-params` cannot hold (empty, or holding `:`, `;`, `,` or whitespace): the
/// runtime reads the key back and refuses it whole if it lists a kernel twice or such a name.
pub fn ptx_kernel_params(ptx: &str) -> Vec<KernelParams> {
    let code: Vec<&str> = ptx
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect();
    let code = code.join("\n");
    let mut found: Vec<(&str, Option<Vec<u32>>)> = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = find_entry(rest) {
        let after = rest[at + ".entry".len()..].trim_start();
        let name_end = after
            .find(|c: char| c == '(' || c == '{' || c == ';' || c.is_whitespace())
            .unwrap_or(after.len());
        let name = &after[..name_end];
        let tail = after[name_end..].trim_start();
        let (list, next) = match tail.strip_prefix('(') {
            Some(list) => {
                let close = list.find(')').unwrap_or(list.len());
                (&list[..close], &list[close..])
            }
            None => ("", tail),
        };
        let sizes: Option<Vec<u32>> = list
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(ptx_param_size)
            .collect();
        if !name.is_empty() {
            found.push((name, sizes));
        }
        rest = next;
    }
    let mut first: HashMap<&str, &Option<Vec<u32>>> = HashMap::new();
    let mut conflicting: HashSet<&str> = HashSet::new();
    for (name, sizes) in &found {
        if *first.entry(name).or_insert(sizes) != sizes {
            conflicting.insert(name);
        }
    }
    let mut listed: HashSet<&str> = HashSet::new();
    let mut out = Vec::new();
    for (name, sizes) in found {
        if let Some(sizes) = sizes
            && kernel_params_can_name(name)
            && !conflicting.contains(name)
            && listed.insert(name)
        {
            out.push(KernelParams {
                kernel: name.to_owned(),
                sizes,
            });
        }
    }
    out
}

/// Whether `offload.kernel-params` can hold a kernel named `name`: not empty, and none of the
/// key's separators (`:`, `;`, `,`) or whitespace, which no symbol name holds.
pub(crate) fn kernel_params_can_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(|c: char| matches!(c, ':' | ';' | ',') || c.is_whitespace())
}

/// The offset of the next `.entry` directive (a whole word) in `text`.
fn find_entry(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(".entry") {
        let at = from + i;
        let before = text[..at].chars().next_back();
        let after = text[at + ".entry".len()..].chars().next();
        if before.is_none_or(char::is_whitespace) && after.is_some_and(char::is_whitespace) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// The size of one parameter declaration, `.param [.align N] .type [.ptr [.space] [.align N]]
/// name[[N]]`; `None` for a type not known here.
fn ptx_param_size(param: &str) -> Option<u32> {
    let mut tokens = param.split_whitespace();
    if tokens.next()? != ".param" {
        return None;
    }
    let (mut element, mut name) = (None, None);
    while let Some(token) = tokens.next() {
        match token.strip_prefix('.') {
            Some("align") => {
                tokens.next();
            }
            Some(directive) => {
                if let Some(size) = ptx_type_size(directive) {
                    element = Some(size);
                }
            }
            None => name = Some(token),
        }
    }
    let (element, name) = (element?, name?);
    match name.split_once('[') {
        None => Some(element),
        Some((_, count)) => element.checked_mul(count.strip_suffix(']')?.parse().ok()?),
    }
}

fn ptx_type_size(ty: &str) -> Option<u32> {
    Some(match ty {
        "u8" | "s8" | "b8" => 1,
        "u16" | "s16" | "b16" | "f16" | "bf16" => 2,
        "u32" | "s32" | "b32" | "f32" | "f16x2" | "bf16x2" => 4,
        "u64" | "s64" | "b64" | "f64" => 8,
        "b128" => 16,
        _ => return None,
    })
}

/// Prefix of the per-kernel entry points a CPU device image exports: the ABI constant
/// `offload_rt::kernel::abi::CPU_RUN_PREFIX`, repeated because the build does not depend on
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
/// coroutine per GPU thread (`offload_rt::kernel::abi::CPU_NOTE_PREFIX`).
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

    fn params(kernel: &str, sizes: &[u32]) -> KernelParams {
        KernelParams {
            kernel: kernel.to_owned(),
            sizes: sizes.to_vec(),
        }
    }

    /// The forms clang-22 writes (see also tests/foreign_params.rs, which runs it), a
    /// comment holding `.entry`, a kernel on one line, and a type this reader does not know.
    #[test]
    fn ptx_param_sizes() {
        let ptx = "\
.version 8.7
.target sm_80
// .entry commented_out(.param .u32 x)
.visible .entry scale(
	.param .u64 .ptr .align 1 scale_param_0,
	.param .f32 scale_param_1,
	.param .u32 scale_param_2,
	.param .align 8 .b8 scale_param_3[16],
	.param .u8 scale_param_4,
	.param .u16 scale_param_5,
	.param .f64 scale_param_6,
	.param .u64 .ptr .global .align 8 scale_param_7
)                                       // @scale
{
	ret;
}
.visible .entry noargs()                // @noargs
{
}
.weak .entry _Z1kILi3EEvPi(.param .u64 .ptr .align 1 _Z1kILi3EEvPi_param_0, .param .align 4 .b8 _Z1kILi3EEvPi_param_1[12]) { ret; }
.visible .entry odd(
	.param .u256 odd_param_0
)
{
}
.func helper(.param .u32 helper_param_0) { ret; }
";
        assert_eq!(
            ptx_kernel_params(ptx),
            [
                params("scale", &[8, 4, 4, 16, 1, 2, 8, 8]),
                params("noargs", &[]),
                params("_Z1kILi3EEvPi", &[8, 12]),
            ]
        );
    }

    /// Found by fuzzing: what the build writes as `offload.kernel-params`, the runtime must
    /// read back, so a kernel declared twice and a name holding a separator are left out.
    #[test]
    fn ptx_params_the_runtime_can_read() {
        let ptx = "\
.entry twice(.param .u32 a) { }
.entry twice(.param .u32 a) { }
.entry clash(.param .u32 a) { }
.entry clash(.param .u64 a) { }
.entry unknown(.param .u32 a) { }
.entry unknown(.param .u256 a) { }
.entry a,b(.param .u32 a) { }
.entry c:4(.param .u32 a) { }
.entry ok(.param .u8 a) { }
";
        let found = ptx_kernel_params(ptx);
        assert_eq!(found, [params("twice", &[4]), params("ok", &[1])]);
        let text = encode_kernel_params(&found);
        assert_eq!(
            offload_format::offload_binary::parse_kernel_params(&text).unwrap(),
            found
        );
    }

    #[test]
    fn kernel_params_are_written_only_when_known() {
        let mut image = DeviceImage {
            arch: OffloadArch::Nvptx(offload_format::Sm::parse("sm_80").unwrap()),
            image_kind: ImageKind::Ptx,
            offload_kind: OffloadKind::Cuda,
            module: "scale".into(),
            kernels: vec!["scale".into(), "_Z9scale_cppPffi".into()],
            kernel_params: Vec::new(),
            kernel_resources: Vec::new(),
            bytes: b"ptx".to_vec(),
        };
        let without = image.to_offload_binary();
        assert_eq!(without.get(KEY_KERNEL_PARAMS), None);
        assert_eq!(without.strings.len(), 5);
        image.kernel_params = vec![
            params("scale", &[8, 4, 4]),
            params("_Z9scale_cppPffi", &[8, 4, 4]),
        ];
        let bytes = image.to_offload_binary().to_bytes();
        let (parsed, _) = OffloadBinary::parse(&bytes).unwrap();
        let text = parsed.get(KEY_KERNEL_PARAMS).unwrap();
        assert_eq!(text, "scale:8,4,4;_Z9scale_cppPffi:8,4,4");
        assert_eq!(
            offload_format::offload_binary::parse_kernel_params(text).unwrap(),
            image.kernel_params
        );
    }

    /// The figures of the build's `ptxas -v` run come back from the packed image as they went
    /// in; a kernel the key cannot name, or a repeated one, is left out rather than making the
    /// value unreadable.
    #[test]
    fn kernel_resources_round_trip_through_the_image() {
        use offload_format::offload_binary::parse_kernel_resources;
        let figures = |name: &str, registers: u32| PtxasKernelInfo {
            name: name.into(),
            registers,
            shared_bytes: 2048,
            stack_bytes: 16,
            spill_store_bytes: 4,
            spill_load_bytes: 8,
            constant_bytes: 380,
        };
        let mut image = DeviceImage {
            arch: OffloadArch::Nvptx(offload_format::Sm::parse("sm_80").unwrap()),
            image_kind: ImageKind::Cubin,
            offload_kind: OffloadKind::Cuda,
            module: "reduce_kernels".into(),
            kernels: vec!["block_sum".into(), "saxpy".into()],
            kernel_params: Vec::new(),
            kernel_resources: Vec::new(),
            bytes: b"\x7fELF cubin".to_vec(),
        };
        assert_eq!(image.to_offload_binary().get(KEY_KERNEL_RESOURCES), None);
        image.kernel_resources = vec![
            figures("block_sum", 12),
            figures("saxpy", 8),
            figures("block_sum", 99),
            figures("a=b", 1),
            figures("a;b", 1),
        ];
        let bytes = bundle(std::slice::from_ref(&image));
        let parsed = offload_format::parse_all(&bytes).unwrap();
        let text = parsed[0].get(KEY_KERNEL_RESOURCES).unwrap();
        assert_eq!(
            parse_kernel_resources(text).unwrap(),
            [figures("block_sum", 12), figures("saxpy", 8)]
        );
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
            kernel_resources: Vec::new(),
            bytes: b"ptx".to_vec(),
        };
        let bytes = bundle(std::slice::from_ref(&image));
        let parsed = offload_format::parse_all(&bytes).unwrap();
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].triple(), Some("nvptx64-nvidia-cuda"));
        assert_eq!(parsed[0].arch(), Some("sm_80"));
        assert_eq!(parsed[0].get(KEY_MODULE), Some("saxpy_kernels"));
        assert_eq!(parsed[0].get(KEY_KERNELS), Some("a,b"));
        assert_eq!(
            parsed[0].get(KEY_IMAGE_CRC32),
            Some(image_crc32(b"ptx").as_str())
        );
        assert_eq!(&*parsed[0].image, b"ptx");
    }
}
