//! AMDGPU code objects: target IDs, ELF `e_flags`, and the `amdhsa` metadata note.

use std::fmt;

use object::elf;
use object::read::elf::{FileHeader, SectionHeader, Sym};
use rmpv::Value;

use super::{Error, Result};

/// The setting of a target-ID feature (`xnack`, `sramecc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AmdFeature {
    /// Not named in the target ID: the code object works either way.
    #[default]
    Any,
    /// `feature+`.
    On,
    /// `feature-`.
    Off,
}

/// An AMDGPU target ID such as `gfx942:sramecc-:xnack+`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AmdTargetId {
    /// The processor, e.g. `gfx90a`.
    pub processor: String,
    /// The `xnack` setting.
    pub xnack: AmdFeature,
    /// The `sramecc` setting.
    pub sramecc: AmdFeature,
}

impl AmdTargetId {
    /// Parses `gfxNNN[:feature±]*`; the processor must be one LLVM 22 knows.
    pub fn parse(id: &str) -> Result<Self> {
        let invalid = |reason| Error::InvalidTarget {
            target: id.to_owned(),
            reason,
        };
        let mut parts = id.split(':');
        let processor = parts.next().unwrap_or_default();
        if amdgpu_mach(processor).is_none() {
            return Err(invalid("unknown AMDGPU processor"));
        }
        let mut target = Self {
            processor: processor.to_owned(),
            xnack: AmdFeature::Any,
            sramecc: AmdFeature::Any,
        };
        for feature in parts {
            let (name, setting) = match feature.as_bytes().last() {
                Some(b'+') => (&feature[..feature.len() - 1], AmdFeature::On),
                Some(b'-') => (&feature[..feature.len() - 1], AmdFeature::Off),
                _ => return Err(invalid("a target-ID feature must end in `+` or `-`")),
            };
            let (slot, supported) = match name {
                "xnack" => (&mut target.xnack, supports_xnack(processor)),
                "sramecc" => (&mut target.sramecc, supports_sramecc(processor)),
                _ => {
                    return Err(invalid(
                        "unknown target-ID feature (xnack and sramecc exist)",
                    ));
                }
            };
            if !supported {
                return Err(invalid("the processor does not support this feature"));
            }
            if *slot != AmdFeature::Any {
                return Err(invalid("a feature is named twice"));
            }
            *slot = setting;
        }
        Ok(target)
    }

    /// LLVM's target-feature string for this ID, e.g. `+xnack,-sramecc`.
    pub fn llvm_features(&self) -> String {
        let mut features = Vec::new();
        for (name, setting) in [("sramecc", self.sramecc), ("xnack", self.xnack)] {
            match setting {
                AmdFeature::Any => {}
                AmdFeature::On => features.push(format!("+{name}")),
                AmdFeature::Off => features.push(format!("-{name}")),
            }
        }
        features.join(",")
    }
}

impl fmt::Display for AmdTargetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.processor)?;
        // Clang's canonical order: features sorted by name.
        for (name, setting) in [("sramecc", self.sramecc), ("xnack", self.xnack)] {
            match setting {
                AmdFeature::Any => {}
                AmdFeature::On => write!(f, ":{name}+")?,
                AmdFeature::Off => write!(f, ":{name}-")?,
            }
        }
        Ok(())
    }
}

/// The AMDGPU code object version of the images, `OFFLOAD_AMDGPU_CODE_OBJECT` (`5` or `6`).
///
/// V5 is the default: ROCm 6.0 and newer load it, while V6 (LLVM 22's own default) needs
/// ROCm 6.3 or newer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AmdCodeObjectVersion {
    /// Code object V5 (`EI_ABIVERSION` 3).
    #[default]
    V5,
    /// Code object V6 (`EI_ABIVERSION` 4).
    V6,
}

impl AmdCodeObjectVersion {
    /// The environment variable that chooses the version.
    pub const ENV: &str = "OFFLOAD_AMDGPU_CODE_OBJECT";

    /// Parses `5` or `6`.
    pub fn parse(value: &str) -> Result<Self> {
        match value.trim() {
            "5" => Ok(Self::V5),
            "6" => Ok(Self::V6),
            _ => Err(Error::InvalidCodeObjectVersion {
                value: value.to_owned(),
            }),
        }
    }

    /// The version from [`Self::ENV`], else the default.
    pub fn from_env(env: &crate::env::Env) -> Result<Self> {
        env.get(Self::ENV)
            .map_or(Ok(Self::default()), |v| Self::parse(&v))
    }

    /// The value of LLVM's `amdhsa_code_object_version` module flag.
    pub fn module_flag(self) -> u64 {
        match self {
            Self::V5 => 500,
            Self::V6 => 600,
        }
    }

    /// The ELF header's `EI_ABIVERSION` for this version.
    pub fn abi_version(self) -> u8 {
        match self {
            Self::V5 => 3,
            Self::V6 => 4,
        }
    }
}

/// `EF_AMDGPU_MACH` for a processor name (`llvm/BinaryFormat/ELF.h`, LLVM 22).
pub fn amdgpu_mach(processor: &str) -> Option<u32> {
    Some(match processor {
        "gfx600" => 0x20,
        "gfx601" => 0x21,
        "gfx602" => 0x3a,
        "gfx700" => 0x22,
        "gfx701" => 0x23,
        "gfx702" => 0x24,
        "gfx703" => 0x25,
        "gfx704" => 0x26,
        "gfx705" => 0x3b,
        "gfx801" => 0x28,
        "gfx802" => 0x29,
        "gfx803" => 0x2a,
        "gfx805" => 0x3c,
        "gfx810" => 0x2b,
        "gfx900" => 0x2c,
        "gfx902" => 0x2d,
        "gfx904" => 0x2e,
        "gfx906" => 0x2f,
        "gfx908" => 0x30,
        "gfx909" => 0x31,
        "gfx90c" => 0x32,
        "gfx90a" => 0x3f,
        "gfx942" => 0x4c,
        "gfx950" => 0x4f,
        "gfx1010" => 0x33,
        "gfx1011" => 0x34,
        "gfx1012" => 0x35,
        "gfx1013" => 0x42,
        "gfx1030" => 0x36,
        "gfx1031" => 0x37,
        "gfx1032" => 0x38,
        "gfx1033" => 0x39,
        "gfx1034" => 0x3e,
        "gfx1035" => 0x3d,
        "gfx1036" => 0x45,
        "gfx1100" => 0x41,
        "gfx1101" => 0x46,
        "gfx1102" => 0x47,
        "gfx1103" => 0x44,
        "gfx1150" => 0x43,
        "gfx1151" => 0x4a,
        "gfx1152" => 0x55,
        "gfx1153" => 0x58,
        "gfx1200" => 0x48,
        "gfx1201" => 0x4e,
        "gfx1250" => 0x49,
        "gfx1251" => 0x5a,
        "gfx9-generic" => 0x51,
        "gfx10-1-generic" => 0x52,
        "gfx10-3-generic" => 0x53,
        "gfx11-generic" => 0x54,
        "gfx12-generic" => 0x59,
        "gfx9-4-generic" => 0x5f,
        _ => return None,
    })
}

fn supports_xnack(processor: &str) -> bool {
    matches!(
        processor,
        "gfx801"
            | "gfx810"
            | "gfx900"
            | "gfx902"
            | "gfx904"
            | "gfx906"
            | "gfx908"
            | "gfx909"
            | "gfx90c"
            | "gfx90a"
            | "gfx942"
            | "gfx950"
            | "gfx1010"
            | "gfx1011"
            | "gfx1012"
            | "gfx1013"
            | "gfx9-generic"
            | "gfx9-4-generic"
            | "gfx10-1-generic"
    )
}

fn supports_sramecc(processor: &str) -> bool {
    matches!(
        processor,
        "gfx906" | "gfx908" | "gfx90a" | "gfx942" | "gfx950" | "gfx9-4-generic"
    )
}

const XNACK_MASK: u32 = 0x300;
const SRAMECC_MASK: u32 = 0xc00;
const MACH_MASK: u32 = 0xff;
const E_FLAGS_OFFSET: usize = 48;

/// The `e_flags` a code object (V4 and later) for `target` must carry.
pub fn expected_e_flags(target: &AmdTargetId) -> Option<u32> {
    let mach = amdgpu_mach(&target.processor)?;
    let setting = |supported: bool, s: AmdFeature, any, off, on| match (supported, s) {
        (false, _) => 0,
        (true, AmdFeature::Any) => any,
        (true, AmdFeature::Off) => off,
        (true, AmdFeature::On) => on,
    };
    let xnack = setting(
        supports_xnack(&target.processor),
        target.xnack,
        0x100,
        0x200,
        0x300,
    );
    let sramecc = setting(
        supports_sramecc(&target.processor),
        target.sramecc,
        0x400,
        0x800,
        0xc00,
    );
    let generic = if target.processor.ends_with("-generic") {
        1 << 24
    } else {
        0
    };
    Some(mach | xnack | sramecc | generic)
}

fn elf_header(
    image: &[u8],
) -> Result<(&elf::FileHeader64<object::Endianness>, object::Endianness)> {
    let bad = |reason: String| Error::BadCodeObject { reason };
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
pub fn amdgpu_e_flags(image: &[u8]) -> Result<u32> {
    let (header, endian) = elf_header(image)?;
    Ok(header.e_flags(endian))
}

/// Makes the code object's `e_flags` say what `target` says: the processor must match; the
/// xnack/sramecc bits are rewritten when they disagree (a code object must not claim `any`
/// where the target ID says `+` or `-`). Returns whether anything changed.
pub fn fix_amdgpu_e_flags(image: &mut [u8], target: &AmdTargetId) -> Result<bool> {
    let flags = amdgpu_e_flags(image)?;
    let expected = expected_e_flags(target).ok_or_else(|| Error::InvalidTarget {
        target: target.to_string(),
        reason: "unknown AMDGPU processor",
    })?;
    if flags & MACH_MASK != expected & MACH_MASK {
        return Err(Error::BadCodeObject {
            reason: format!(
                "e_flags {flags:#x} name another processor than `{target}` ({expected:#x})"
            ),
        });
    }
    let keep = !(XNACK_MASK | SRAMECC_MASK);
    let fixed = (flags & keep) | (expected & !keep);
    if fixed == flags {
        return Ok(false);
    }
    let (_, endian) = elf_header(image)?;
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

const NT_AMDGPU_METADATA: u32 = 32;

fn map_get<'v>(map: &'v [(Value, Value)], key: &str) -> Option<&'v Value> {
    map.iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

fn get_u64(map: &[(Value, Value)], key: &str) -> u64 {
    map_get(map, key).and_then(Value::as_u64).unwrap_or(0)
}

fn get_str(map: &[(Value, Value)], key: &str) -> Option<String> {
    map_get(map, key).and_then(Value::as_str).map(str::to_owned)
}

/// Reads an AMDGPU code object: `e_flags`, the msgpack `amdhsa` metadata note (kernels, their
/// resources and arguments) and whether each kernel's `.kd` symbol exists.
pub fn amdgpu_inspect(image: &[u8]) -> Result<AmdCodeObjectInfo> {
    let bad = |reason: String| Error::BadCodeObject { reason };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_object_versions() {
        assert_eq!(AmdCodeObjectVersion::default(), AmdCodeObjectVersion::V5);
        assert_eq!(AmdCodeObjectVersion::parse("6").unwrap().abi_version(), 4);
        assert_eq!(AmdCodeObjectVersion::parse("5").unwrap().module_flag(), 500);
        for bad in ["4", "v5", ""] {
            let err = AmdCodeObjectVersion::parse(bad).unwrap_err();
            assert!(
                err.to_string().contains("OFFLOAD_AMDGPU_CODE_OBJECT"),
                "{err}"
            );
        }
    }

    #[test]
    fn target_ids_and_flags_match_clang() {
        let cases = [
            ("gfx90a", 0x53f),
            ("gfx90a:xnack-", 0x63f),
            ("gfx942:xnack+", 0x74c),
            ("gfx942:sramecc-:xnack+", 0xb4c),
            ("gfx1100", 0x41),
            ("gfx9-4-generic", 0x0100_055f),
        ];
        for (id, flags) in cases {
            let target = AmdTargetId::parse(id).unwrap();
            assert_eq!(expected_e_flags(&target), Some(flags), "{id}");
            assert_eq!(target.to_string(), id);
        }
        assert_eq!(
            AmdTargetId::parse("gfx942:xnack+:sramecc-")
                .unwrap()
                .to_string(),
            "gfx942:sramecc-:xnack+"
        );
        assert_eq!(
            AmdTargetId::parse("gfx942:xnack+:sramecc-")
                .unwrap()
                .llvm_features(),
            "-sramecc,+xnack"
        );
    }

    #[test]
    fn bad_target_ids() {
        for id in [
            "",
            "sm_80",
            "gfx942:xnack",
            "gfx942:foo+",
            "gfx1100:xnack+",
            "gfx942:xnack+:xnack-",
            "gfx9999",
        ] {
            assert!(
                matches!(AmdTargetId::parse(id), Err(Error::InvalidTarget { .. })),
                "{id}"
            );
        }
    }

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
        assert!(fix_amdgpu_e_flags(&mut image, &target).unwrap());
        assert_eq!(amdgpu_e_flags(&image).unwrap(), 0x74c);
        assert!(!fix_amdgpu_e_flags(&mut image, &target).unwrap());
        let other = AmdTargetId::parse("gfx90a").unwrap();
        assert!(matches!(
            fix_amdgpu_e_flags(&mut image, &other),
            Err(Error::BadCodeObject { .. })
        ));
        let mut not_amd = minimal_elf(62, 0);
        assert!(fix_amdgpu_e_flags(&mut not_amd, &target).is_err());
    }

    #[test]
    fn inspect_rejects_garbage() {
        assert!(amdgpu_inspect(b"").is_err());
        assert!(amdgpu_inspect(&[0x7f, b'E', b'L', b'F', 2, 1, 1]).is_err());
        assert!(matches!(
            amdgpu_inspect(&minimal_elf(224, 0x74c)),
            Err(Error::BadCodeObject { .. })
        ));
    }
}
