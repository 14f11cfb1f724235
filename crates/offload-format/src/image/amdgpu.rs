//! AMDGPU code objects: the ELF `e_flags` (read, and set to what a target ID says) and the
//! `amdhsa` metadata note (msgpack; with the `amdgpu-metadata` feature): the kernels, their
//! resources and arguments.

use object::elf;
use object::read::elf::FileHeader;
#[cfg(feature = "amdgpu-metadata")]
use object::read::elf::{SectionHeader, Sym};
#[cfg(feature = "amdgpu-metadata")]
use rmpv::Value;

use crate::aligned::object_bytes;
#[cfg(feature = "amdgpu-metadata")]
use crate::offload_binary::{KernelParams, kernel_params_can_name};
use crate::target_id::AmdTargetId;
use crate::{Error, Result};

const XNACK_MASK: u32 = 0x300;
const SRAMECC_MASK: u32 = 0xc00;
const MACH_MASK: u32 = 0xff;
const E_FLAGS_OFFSET: usize = 48;

fn bad(reason: String) -> Error {
    Error::AmdCodeObject { reason }
}

fn elf_header(
    image: &[u8],
) -> Result<(&elf::FileHeader64<object::Endianness>, object::Endianness)> {
    let header = elf::FileHeader64::<object::Endianness>::parse(image)
        .map_err(|e| bad(format!("not a 64-bit ELF: {e}")))?;
    let endian = header.endian().map_err(|e| bad(e.to_string()))?;
    if header.e_machine(endian) != elf::EM_AMDGPU {
        return Err(bad(format!(
            "e_machine is {}, not EM_AMDGPU (224)",
            header.e_machine(endian)
        )));
    }
    Ok((header, endian))
}

/// The `e_flags` of an AMDGPU code object.
///
/// # Errors
/// [`Error::AmdCodeObject`] when `image` is not a 64-bit ELF for `EM_AMDGPU`.
pub fn e_flags(image: &[u8]) -> Result<u32> {
    Ok(flags_and_byte_order(image)?.0)
}

/// The `e_flags` and the byte order of a code object at any address: the header is read from
/// an aligned copy where `image` is not aligned for it.
fn flags_and_byte_order(image: &[u8]) -> Result<(u32, object::Endianness)> {
    let image = object_bytes(image);
    let (header, endian) = elf_header(&image)?;
    Ok((header.e_flags(endian), endian))
}

/// Makes the code object's `e_flags` say what `target` says: the processor must match; the
/// xnack/sramecc bits are rewritten when they disagree (a code object must not claim `any`
/// where the target ID says `+` or `-`). Returns whether anything changed.
///
/// # Errors
/// [`Error::AmdCodeObject`] when `image` is not an AMDGPU code object or is one for another
/// processor.
pub fn fix_e_flags(image: &mut [u8], target: &AmdTargetId) -> Result<bool> {
    let (flags, endian) = flags_and_byte_order(image)?;
    let expected = target.e_flags();
    if flags & MACH_MASK != expected & MACH_MASK {
        return Err(bad(format!(
            "e_flags {flags:#x} name another processor than `{target}` ({expected:#x})"
        )));
    }
    let keep = !(XNACK_MASK | SRAMECC_MASK);
    let fixed = (flags & keep) | (expected & !keep);
    if fixed == flags {
        return Ok(false);
    }
    let bytes = match endian {
        object::Endianness::Little => fixed.to_le_bytes(),
        object::Endianness::Big => fixed.to_be_bytes(),
    };
    image[E_FLAGS_OFFSET..E_FLAGS_OFFSET + 4].copy_from_slice(&bytes);
    Ok(true)
}

/// One kernel argument as the metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmdKernelArg {
    /// Byte offset in the kernarg segment.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
    /// `by_value`, `global_buffer`, `hidden_block_count_x`, …
    pub value_kind: String,
    /// For pointers: `global`, `generic`, … when given.
    pub address_space: Option<String>,
}

/// One kernel of a code object: names, resources and arguments from the metadata.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AmdKernelInfo {
    /// `.name`.
    pub name: String,
    /// `.symbol` (`name.kd`).
    pub symbol: String,
    /// Whether the symbol table defines `.symbol`.
    pub has_descriptor_symbol: bool,
    /// `.vgpr_count`.
    pub vgpr_count: u64,
    /// `.sgpr_count`.
    pub sgpr_count: u64,
    /// `.agpr_count` (0 when absent).
    pub agpr_count: u64,
    /// `.group_segment_fixed_size`: static LDS bytes.
    pub group_segment_fixed_size: u64,
    /// `.private_segment_fixed_size`: scratch bytes per work-item.
    pub private_segment_fixed_size: u64,
    /// `.uses_dynamic_stack`: scratch of a size only known at run time (recursion, calls
    /// through pointers), beyond `private_segment_fixed_size`.
    pub uses_dynamic_stack: bool,
    /// `.vgpr_spill_count`.
    pub vgpr_spill_count: u64,
    /// `.sgpr_spill_count`.
    pub sgpr_spill_count: u64,
    /// `.kernarg_segment_size`.
    pub kernarg_segment_size: u64,
    /// `.wavefront_size`.
    pub wavefront_size: u64,
    /// `.max_flat_workgroup_size`.
    pub max_flat_workgroup_size: u64,
    /// `.args`, hidden arguments included.
    pub args: Vec<AmdKernelArg>,
}

impl AmdKernelInfo {
    /// The explicit (non-hidden) arguments.
    pub fn explicit_args(&self) -> impl Iterator<Item = &AmdKernelArg> {
        self.args
            .iter()
            .filter(|a| !a.value_kind.starts_with("hidden_"))
    }
}

/// What a code object says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmdCodeObjectInfo {
    /// The ELF `e_flags`.
    pub e_flags: u32,
    /// `EI_ABIVERSION` (code object V4 = 2, V5 = 3, V6 = 4).
    pub abi_version: u8,
    /// `amdhsa.target`, e.g. `amdgcn-amd-amdhsa--gfx942:xnack+`.
    pub target: String,
    /// `amdhsa.version`.
    pub version: Vec<u64>,
    /// The kernels.
    pub kernels: Vec<AmdKernelInfo>,
}

#[cfg(feature = "amdgpu-metadata")]
const NT_AMDGPU_METADATA: u32 = 32;

#[cfg(feature = "amdgpu-metadata")]
fn map_get<'v>(map: &'v [(Value, Value)], key: &str) -> Option<&'v Value> {
    map.iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

#[cfg(feature = "amdgpu-metadata")]
fn get_u64(map: &[(Value, Value)], key: &str) -> u64 {
    map_get(map, key).and_then(Value::as_u64).unwrap_or(0)
}

#[cfg(feature = "amdgpu-metadata")]
fn get_str(map: &[(Value, Value)], key: &str) -> Option<String> {
    map_get(map, key).and_then(Value::as_str).map(str::to_owned)
}

/// Reads an AMDGPU code object: `e_flags`, the msgpack `amdhsa` metadata note (kernels, their
/// resources and arguments) and whether each kernel's `.kd` symbol exists. A field the
/// metadata lacks reads as 0 or empty.
///
/// # Errors
/// [`Error::AmdCodeObject`] when `image` is not an AMDGPU code object, its sections or notes
/// cannot be read, it has no metadata note, or the note is not a msgpack map.
#[cfg(feature = "amdgpu-metadata")]
pub fn inspect(image: &[u8]) -> Result<AmdCodeObjectInfo> {
    let aligned = object_bytes(image);
    let image: &[u8] = &aligned;
    let (header, endian) = elf_header(image)?;
    let sections = header
        .sections(endian, image)
        .map_err(|e| bad(format!("sections: {e}")))?;
    let mut descriptor = None;
    for section in sections.iter() {
        let Some(mut notes) = section
            .notes(endian, image)
            .map_err(|e| bad(format!("notes: {e}")))?
        else {
            continue;
        };
        while let Some(note) = notes.next().map_err(|e| bad(format!("note: {e}")))? {
            if note.name() == b"AMDGPU" && note.n_type(endian) == NT_AMDGPU_METADATA {
                descriptor = Some(note.desc());
            }
        }
    }
    let descriptor = descriptor.ok_or_else(|| bad("no NT_AMDGPU_METADATA note".into()))?;
    let value = rmpv::decode::read_value(&mut &descriptor[..])
        .map_err(|e| bad(format!("metadata msgpack: {e}")))?;
    let root = value
        .as_map()
        .ok_or_else(|| bad("metadata is not a msgpack map".into()))?;

    let mut symbols = Vec::new();
    let symtab = sections
        .symbols(endian, image, elf::SHT_SYMTAB)
        .map_err(|e| bad(format!("symbols: {e}")))?;
    for sym in symtab.iter() {
        if sym.st_shndx(endian) != elf::SHN_UNDEF
            && let Ok(name) = symtab.symbol_name(endian, sym)
        {
            symbols.push(name.to_vec());
        }
    }

    let mut kernels = Vec::new();
    for kernel in map_get(root, "amdhsa.kernels")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(k) = kernel.as_map() else {
            return Err(bad("an amdhsa.kernels entry is not a map".into()));
        };
        let args = map_get(k, ".args")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_map)
            .map(|a| AmdKernelArg {
                offset: get_u64(a, ".offset"),
                size: get_u64(a, ".size"),
                value_kind: get_str(a, ".value_kind").unwrap_or_default(),
                address_space: get_str(a, ".address_space"),
            })
            .collect();
        let symbol = get_str(k, ".symbol").unwrap_or_default();
        kernels.push(AmdKernelInfo {
            name: get_str(k, ".name").unwrap_or_default(),
            has_descriptor_symbol: symbols.iter().any(|s| s == symbol.as_bytes()),
            symbol,
            vgpr_count: get_u64(k, ".vgpr_count"),
            sgpr_count: get_u64(k, ".sgpr_count"),
            agpr_count: get_u64(k, ".agpr_count"),
            group_segment_fixed_size: get_u64(k, ".group_segment_fixed_size"),
            private_segment_fixed_size: get_u64(k, ".private_segment_fixed_size"),
            uses_dynamic_stack: map_get(k, ".uses_dynamic_stack")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            vgpr_spill_count: get_u64(k, ".vgpr_spill_count"),
            sgpr_spill_count: get_u64(k, ".sgpr_spill_count"),
            kernarg_segment_size: get_u64(k, ".kernarg_segment_size"),
            wavefront_size: get_u64(k, ".wavefront_size"),
            max_flat_workgroup_size: get_u64(k, ".max_flat_workgroup_size"),
            args,
        });
    }
    Ok(AmdCodeObjectInfo {
        e_flags: header.e_flags(endian),
        abi_version: header.e_ident().abi_version,
        target: get_str(root, "amdhsa.target").unwrap_or_default(),
        version: map_get(root, "amdhsa.version")
            .and_then(Value::as_array)
            .map(|v| v.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default(),
        kernels,
    })
}

/// The explicit parameter sizes of each kernel of an AMD code object, from its metadata note
/// (`amdhsa.kernels[].{.name, .args[].size}`), the hidden arguments (`.value_kind`
/// `hidden_*`, which the runtime fills) left out. `.name` is the kernel's symbol name.
///
/// # Errors
/// What [`inspect`] reports, and [`Error::AmdCodeObject`] for a kernel name that
/// `offload.kernel-params` cannot hold, a kernel listed twice or an argument size above
/// `u32::MAX`.
#[cfg(feature = "amdgpu-metadata")]
pub fn kernel_params(code_object: &[u8]) -> Result<Vec<KernelParams>> {
    let kernels = inspect(code_object)?.kernels;
    let mut names = std::collections::HashSet::new();
    kernels
        .into_iter()
        .map(|kernel| {
            if !kernel_params_can_name(&kernel.name) {
                return Err(bad(format!(
                    "kernel name {:?} is empty or holds `:`, `;`, `,` or whitespace",
                    kernel.name
                )));
            }
            if !names.insert(kernel.name.clone()) {
                return Err(bad(format!(
                    "the metadata lists kernel `{}` twice",
                    kernel.name
                )));
            }
            let sizes = kernel
                .explicit_args()
                .map(|arg| {
                    u32::try_from(arg.size).map_err(|_| {
                        bad(format!(
                            "kernel `{}` has an argument of {} bytes",
                            kernel.name, arg.size
                        ))
                    })
                })
                .collect::<Result<Vec<u32>>>()?;
            Ok(KernelParams {
                kernel: kernel.name,
                sizes,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal_elf(machine: u16, flags: u32) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[6] = 1;
        h[7] = 64;
        h[8] = 3;
        h[16..18].copy_from_slice(&3u16.to_le_bytes());
        h[18..20].copy_from_slice(&machine.to_le_bytes());
        h[20..24].copy_from_slice(&1u32.to_le_bytes());
        h[48..52].copy_from_slice(&flags.to_le_bytes());
        h[52..54].copy_from_slice(&64u16.to_le_bytes());
        h
    }

    #[test]
    fn fixes_any_to_the_requested_setting() {
        let mut image = minimal_elf(224, 0x54c);
        let target = AmdTargetId::parse("gfx942:xnack+").unwrap();
        assert!(fix_e_flags(&mut image, &target).unwrap());
        assert_eq!(e_flags(&image).unwrap(), 0x74c);
        assert!(!fix_e_flags(&mut image, &target).unwrap());
        let other = AmdTargetId::parse("gfx90a").unwrap();
        assert!(matches!(
            fix_e_flags(&mut image, &other),
            Err(Error::AmdCodeObject { .. })
        ));
        let mut not_amd = minimal_elf(62, 0);
        assert!(fix_e_flags(&mut not_amd, &target).is_err());
    }

    #[cfg(feature = "amdgpu-metadata")]
    /// A code object holding only a metadata note: the ELF header, the note, the section
    /// names, then the section headers (null, note, names).
    fn code_object_with_metadata(metadata: &Value) -> Vec<u8> {
        let mut desc = Vec::new();
        rmpv::encode::write_value(&mut desc, metadata).unwrap();
        let mut image = minimal_elf(224, 0x74c);
        let note_at = image.len() as u64;
        image.extend_from_slice(&7u32.to_le_bytes());
        image.extend_from_slice(&(desc.len() as u32).to_le_bytes());
        image.extend_from_slice(&NT_AMDGPU_METADATA.to_le_bytes());
        image.extend_from_slice(b"AMDGPU\0\0");
        image.extend_from_slice(&desc);
        image.resize(image.len().next_multiple_of(4), 0);
        let note_size = image.len() as u64 - note_at;
        let names: &[u8] = b"\0.note\0.shstrtab\0";
        let names_at = image.len() as u64;
        image.extend_from_slice(names);
        image.resize(image.len().next_multiple_of(8), 0);
        let shoff = image.len() as u64;
        let header = |name: u32, kind: u32, offset: u64, size: u64| {
            let mut h = [0u8; 64];
            h[..4].copy_from_slice(&name.to_le_bytes());
            h[4..8].copy_from_slice(&kind.to_le_bytes());
            h[24..32].copy_from_slice(&offset.to_le_bytes());
            h[32..40].copy_from_slice(&size.to_le_bytes());
            h[48..56].copy_from_slice(&4u64.to_le_bytes());
            h
        };
        image.extend_from_slice(&[0; 64]);
        image.extend_from_slice(&header(1, elf::SHT_NOTE, note_at, note_size));
        image.extend_from_slice(&header(7, elf::SHT_STRTAB, names_at, names.len() as u64));
        image[40..48].copy_from_slice(&shoff.to_le_bytes());
        image[58..60].copy_from_slice(&64u16.to_le_bytes());
        image[60..62].copy_from_slice(&3u16.to_le_bytes());
        image[62..64].copy_from_slice(&2u16.to_le_bytes());
        image
    }

    #[cfg(feature = "amdgpu-metadata")]
    fn kernel(name: &str, arg_size: u64) -> Value {
        let arg = |size: u64, kind: &str| {
            Value::Map(vec![
                (".size".into(), size.into()),
                (".value_kind".into(), kind.into()),
            ])
        };
        Value::Map(vec![
            (".name".into(), name.into()),
            (".symbol".into(), format!("{name}.kd").into()),
            (
                ".args".into(),
                Value::Array(vec![
                    arg(arg_size, "by_value"),
                    arg(8, "hidden_block_count_x"),
                ]),
            ),
        ])
    }

    #[cfg(feature = "amdgpu-metadata")]
    fn metadata(kernels: Vec<Value>) -> Value {
        Value::Map(vec![("amdhsa.kernels".into(), Value::Array(kernels))])
    }

    #[cfg(feature = "amdgpu-metadata")]
    #[test]
    fn kernel_params_from_the_metadata() {
        let image = code_object_with_metadata(&metadata(vec![kernel("a", 4), kernel("b", 16)]));
        let params = |kernel: &str, size: u32| KernelParams {
            kernel: kernel.to_owned(),
            sizes: vec![size],
        };
        assert_eq!(
            kernel_params(&image).unwrap(),
            [params("a", 4), params("b", 16)]
        );
    }

    #[cfg(feature = "amdgpu-metadata")]
    /// Found by fuzzing: `offload.kernel-params` cannot list a kernel twice (the runtime
    /// refuses the key whole), so metadata that does is a damaged code object.
    #[test]
    fn kernel_listed_twice_is_a_bad_code_object() {
        let image = code_object_with_metadata(&metadata(vec![kernel("a", 4), kernel("a", 4)]));
        assert_eq!(inspect(&image).unwrap().kernels.len(), 2);
        let err = kernel_params(&image).unwrap_err();
        assert!(
            matches!(&err, Error::AmdCodeObject { reason } if reason.contains("`a` twice")),
            "{err}"
        );
    }

    #[cfg(feature = "amdgpu-metadata")]
    #[test]
    fn inspect_rejects_garbage() {
        assert!(inspect(b"").is_err());
        assert!(inspect(&[0x7f, b'E', b'L', b'F', 2, 1, 1]).is_err());
        assert!(matches!(
            inspect(&minimal_elf(224, 0x74c)),
            Err(Error::AmdCodeObject { .. })
        ));
    }

    /// A code object inside an archive or a bundle starts at any offset: it reads the same
    /// there as at an aligned address.
    #[cfg(feature = "amdgpu-metadata")]
    #[test]
    fn reads_a_code_object_at_any_address() {
        let image = code_object_with_metadata(&metadata(vec![kernel("a", 4)]));
        let mut backing = vec![0u8; image.len() + 8];
        for offset in 1..8 {
            let shifted = &mut backing[offset..offset + image.len()];
            shifted.copy_from_slice(&image);
            assert_eq!(e_flags(shifted).unwrap(), e_flags(&image).unwrap());
            assert_eq!(inspect(shifted).unwrap(), inspect(&image).unwrap());
            let target = AmdTargetId::parse("gfx942:xnack-").unwrap();
            let mut fixed = image.clone();
            assert_eq!(
                fix_e_flags(shifted, &target).unwrap(),
                fix_e_flags(&mut fixed, &target).unwrap()
            );
            assert_eq!(&*shifted, &fixed[..]);
        }
    }
}
