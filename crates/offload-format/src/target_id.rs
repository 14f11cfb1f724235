//! Target IDs (`<processor>(:<feature>(+|-))*`), their canonical form, conflicting
//! combinations and code-object compatibility, following clang's `TargetID.cpp` and the
//! clang-offload-bundler documentation; plus the processor tables clang 22 knows.

use std::fmt;

use crate::error::{Error, Result};

/// One AMDGPU processor as LLVM 22 describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AmdGpuProcessor {
    /// Primary (canonical) name, e.g. `gfx90a`.
    pub name: &'static str,
    /// `EF_AMDGPU_MACH_*` value (the low 8 bits of `e_flags`).
    pub mach: u8,
    /// Whether the `xnack` target feature may be named in a target ID.
    pub xnack: bool,
    /// Whether the `sramecc` target feature may be named in a target ID.
    pub sramecc: bool,
    /// Generic version for `gfx*-generic` targets (the high byte of `e_flags`), else 0.
    pub generic_version: u8,
}

impl AmdGpuProcessor {
    /// The target features this processor supports, in alphabetical order.
    pub fn features(&self) -> impl Iterator<Item = &'static str> {
        [(self.sramecc, "sramecc"), (self.xnack, "xnack")]
            .into_iter()
            .filter_map(|(on, name)| on.then_some(name))
    }

    /// The GFX major version: 9 for `gfx90a`, `gfx942` and `gfx9-4-generic`, 10 for `gfx1030`
    /// and `gfx10-3-generic`, 11 for `gfx1100`.
    pub fn gfx_major(&self) -> u32 {
        let rest = self.name.strip_prefix("gfx").unwrap_or(self.name);
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        // A generic target spells its major whole (`gfx10-1-generic`); a processor writes
        // major, minor and stepping as one digit each after a one- or two-digit major
        // (`gfx90a`, `gfx1201`).
        let major_digits = if rest[digits..].starts_with('-') || digits >= 4 {
            digits.min(2)
        } else {
            1
        };
        rest[..major_digits].parse().unwrap_or(0)
    }

    /// Lanes per wavefront code for this processor runs with when no `wavefrontsize`
    /// feature is asked for (LLVM's default): 64 up to GFX9, 32 from GFX10 on.
    pub fn default_wave_size(&self) -> u32 {
        if self.gfx_major() >= 10 { 32 } else { 64 }
    }

    /// FP32 lanes per compute unit, as AMD's data sheets count "FP32 vector" (unpacked
    /// operations): 128 on gfx94x, gfx950 and RDNA 3 and later (dual issue), 64 on the other
    /// GFX9 and GFX10 processors; `None` before GFX9.
    pub fn fp32_lanes_per_compute_unit(&self) -> Option<u32> {
        match self.name {
            "gfx940" | "gfx941" | "gfx942" | "gfx950" | "gfx9-4-generic" => Some(128),
            _ => match self.gfx_major() {
                9 | 10 => Some(64),
                11.. => Some(128),
                _ => None,
            },
        }
    }

    /// The matrix instructions of this processor that a wavefront-wide 16×16×16
    /// multiply-accumulate (f16 or bf16 inputs, f32 accumulators) runs on, if any: MFMA on
    /// CDNA (gfx908; gfx90a and the gfx94x/gfx950 family also for bf16), WMMA on RDNA 3
    /// (gfx11, wave32).
    pub fn matrix_unit(&self) -> Option<MatrixUnit> {
        match self.name {
            "gfx908" => Some(MatrixUnit::Mfma { bf16: false }),
            "gfx90a" | "gfx940" | "gfx941" | "gfx942" | "gfx950" | "gfx9-4-generic" => {
                Some(MatrixUnit::Mfma { bf16: true })
            }
            _ if self.gfx_major() == 11 => Some(MatrixUnit::Wmma),
            _ => None,
        }
    }
}

/// The matrix (tensor-core) instructions a target runs a warp-wide 16×16×16
/// multiply-accumulate of f16 or bf16 inputs into f32 accumulators on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatrixUnit {
    /// NVIDIA `mma.sync.aligned.m16n8k16` (sm_80 and newer), two per 16×16 tile.
    MmaSync,
    /// AMD CDNA `v_mfma_f32_16x16x16*` on a 64-lane wavefront; `bf16` where the processor
    /// has `v_mfma_f32_16x16x16bf16_1k`.
    Mfma {
        /// Whether bf16 inputs are supported.
        bf16: bool,
    },
    /// AMD RDNA 3 `v_wmma_f32_16x16x16_*` on a 32-lane wavefront, f16 and bf16.
    Wmma,
}

impl MatrixUnit {
    /// Whether the unit takes bf16 inputs (every unit takes f16).
    pub fn has_bf16(self) -> bool {
        !matches!(self, MatrixUnit::Mfma { bf16: false })
    }
}

const fn p(
    name: &'static str,
    mach: u8,
    xnack: bool,
    sramecc: bool,
    generic_version: u8,
) -> AmdGpuProcessor {
    AmdGpuProcessor {
        name,
        mach,
        xnack,
        sramecc,
        generic_version,
    }
}

/// Every AMDGPU processor of LLVM 22 (`llc -march=amdgcn -mcpu=help`), with the machine
/// number and feature support read back from the `e_flags` llc-22 writes for it.
pub const AMDGPU_PROCESSORS: &[AmdGpuProcessor] = &[
    p("gfx600", 0x20, false, false, 0),
    p("gfx601", 0x21, false, false, 0),
    p("gfx602", 0x3a, false, false, 0),
    p("gfx700", 0x22, false, false, 0),
    p("gfx701", 0x23, false, false, 0),
    p("gfx702", 0x24, false, false, 0),
    p("gfx703", 0x25, false, false, 0),
    p("gfx704", 0x26, false, false, 0),
    p("gfx705", 0x3b, false, false, 0),
    p("gfx801", 0x28, true, false, 0),
    p("gfx802", 0x29, false, false, 0),
    p("gfx803", 0x2a, false, false, 0),
    p("gfx805", 0x3c, false, false, 0),
    p("gfx810", 0x2b, true, false, 0),
    p("gfx900", 0x2c, true, false, 0),
    p("gfx902", 0x2d, true, false, 0),
    p("gfx904", 0x2e, true, false, 0),
    p("gfx906", 0x2f, true, true, 0),
    p("gfx908", 0x30, true, true, 0),
    p("gfx909", 0x31, true, false, 0),
    p("gfx90a", 0x3f, true, true, 0),
    p("gfx90c", 0x32, true, false, 0),
    p("gfx942", 0x4c, true, true, 0),
    p("gfx950", 0x4f, true, true, 0),
    p("gfx1010", 0x33, true, false, 0),
    p("gfx1011", 0x34, true, false, 0),
    p("gfx1012", 0x35, true, false, 0),
    p("gfx1013", 0x42, true, false, 0),
    p("gfx1030", 0x36, false, false, 0),
    p("gfx1031", 0x37, false, false, 0),
    p("gfx1032", 0x38, false, false, 0),
    p("gfx1033", 0x39, false, false, 0),
    p("gfx1034", 0x3e, false, false, 0),
    p("gfx1035", 0x3d, false, false, 0),
    p("gfx1036", 0x45, false, false, 0),
    p("gfx1100", 0x41, false, false, 0),
    p("gfx1101", 0x46, false, false, 0),
    p("gfx1102", 0x47, false, false, 0),
    p("gfx1103", 0x44, false, false, 0),
    p("gfx1150", 0x43, false, false, 0),
    p("gfx1151", 0x4a, false, false, 0),
    p("gfx1152", 0x55, false, false, 0),
    p("gfx1153", 0x58, false, false, 0),
    p("gfx1200", 0x48, false, false, 0),
    p("gfx1201", 0x4e, false, false, 0),
    p("gfx1250", 0x49, true, true, 0),
    p("gfx1251", 0x5a, true, true, 0),
    p("gfx9-generic", 0x51, true, false, 1),
    p("gfx9-4-generic", 0x5f, true, true, 1),
    p("gfx10-1-generic", 0x52, true, false, 1),
    p("gfx10-3-generic", 0x53, false, false, 1),
    p("gfx11-generic", 0x54, false, false, 1),
    p("gfx12-generic", 0x59, false, false, 1),
];

/// Alternative AMDGPU processor names and the primary name each stands for.
pub const AMDGPU_ALIASES: &[(&str, &str)] = &[
    ("tahiti", "gfx600"),
    ("pitcairn", "gfx601"),
    ("verde", "gfx601"),
    ("hainan", "gfx602"),
    ("oland", "gfx602"),
    ("kaveri", "gfx700"),
    ("hawaii", "gfx701"),
    ("kabini", "gfx703"),
    ("mullins", "gfx703"),
    ("bonaire", "gfx704"),
    ("carrizo", "gfx801"),
    ("iceland", "gfx802"),
    ("tonga", "gfx802"),
    ("fiji", "gfx803"),
    ("polaris10", "gfx803"),
    ("polaris11", "gfx803"),
    ("tongapro", "gfx805"),
    ("stoney", "gfx810"),
];

/// One NVPTX processor (`sm_XX`) as LLVM 22 describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NvptxProcessor {
    /// The name, e.g. `sm_90a`.
    pub name: &'static str,
    /// The lowest PTX ISA version (`87` for 8.7) LLVM 22's NVPTX back end accepts for it: the
    /// `.version` it emits when given no `+ptxNN` feature.
    pub min_ptx_isa: u32,
    /// Whether clang 22 accepts it as an offload architecture (`--offload-arch`): the
    /// family-specific `sm_XXXf` names are LLVM processors but not clang offload
    /// architectures.
    pub offload_arch: bool,
}

const fn nv(name: &'static str, min_ptx_isa: u32, offload_arch: bool) -> NvptxProcessor {
    NvptxProcessor {
        name,
        min_ptx_isa,
        offload_arch,
    }
}

/// Every NVPTX processor of LLVM 22 (`llc -march=nvptx64 -mcpu=help`).
pub const NVPTX_PROCESSORS: &[NvptxProcessor] = &[
    nv("sm_20", 32, true),
    nv("sm_21", 32, true),
    nv("sm_30", 32, true),
    nv("sm_32", 40, true),
    nv("sm_35", 32, true),
    nv("sm_37", 41, true),
    nv("sm_50", 40, true),
    nv("sm_52", 41, true),
    nv("sm_53", 42, true),
    nv("sm_60", 50, true),
    nv("sm_61", 50, true),
    nv("sm_62", 50, true),
    nv("sm_70", 60, true),
    nv("sm_72", 61, true),
    nv("sm_75", 63, true),
    nv("sm_80", 70, true),
    nv("sm_86", 71, true),
    nv("sm_87", 74, true),
    nv("sm_88", 90, true),
    nv("sm_89", 78, true),
    nv("sm_90", 78, true),
    nv("sm_90a", 80, true),
    nv("sm_100", 86, true),
    nv("sm_100a", 86, true),
    nv("sm_100f", 88, false),
    nv("sm_101", 86, true),
    nv("sm_101a", 86, true),
    nv("sm_101f", 88, false),
    nv("sm_103", 88, true),
    nv("sm_103a", 88, true),
    nv("sm_103f", 88, false),
    nv("sm_110", 90, true),
    nv("sm_110a", 90, true),
    nv("sm_110f", 90, false),
    nv("sm_120", 87, true),
    nv("sm_120a", 87, true),
    nv("sm_120f", 88, false),
    nv("sm_121", 88, true),
    nv("sm_121a", 88, true),
    nv("sm_121f", 88, false),
];

/// The NVIDIA GPU architectures clang 22 accepts as offload architectures.
pub fn nvidia_offload_archs() -> impl Iterator<Item = &'static str> {
    NVPTX_PROCESSORS
        .iter()
        .filter(|p| p.offload_arch)
        .map(|p| p.name)
}

/// The NVPTX processor named `name` (`sm_90a`, `sm_120f`).
pub fn nvptx_processor(name: &str) -> Option<&'static NvptxProcessor> {
    NVPTX_PROCESSORS.iter().find(|p| p.name == name)
}

/// The suffix of an `sm_XX` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SmSuffix {
    /// `a`: architecture-specific, runs only on exactly this compute capability.
    ArchSpecific,
    /// `f`: family-specific.
    FamilySpecific,
}

impl SmSuffix {
    /// The letter: `a` or `f`.
    pub fn letter(self) -> char {
        match self {
            Self::ArchSpecific => 'a',
            Self::FamilySpecific => 'f',
        }
    }
}

/// An NVIDIA architecture name, `sm_<number>[a|f]` (`sm_80`, `sm_90a`, `sm_120f`), parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sm {
    number: u32,
    suffix: Option<SmSuffix>,
}

impl Sm {
    /// Parses `sm_<number>[a|f]`: a number from 20 to 1000 written without leading zeros.
    /// Whether LLVM knows the processor is [`Sm::processor`]'s question.
    pub fn parse(name: &str) -> Result<Sm> {
        let digits = name.strip_prefix("sm_").ok_or_else(|| Error::BadSmName {
            name: name.to_owned(),
        })?;
        Self::parse_digits(name, digits)
    }

    /// Parses a virtual architecture, `compute_<number>[a|f]`, by the rules of [`Sm::parse`].
    pub fn parse_compute(name: &str) -> Result<Sm> {
        let digits = name
            .strip_prefix("compute_")
            .ok_or_else(|| Error::BadSmName {
                name: name.to_owned(),
            })?;
        Self::parse_digits(name, digits)
    }

    /// Parses an NVIDIA image's architecture: `sm_<number>[a|f]` (a cubin, or PTX for that
    /// processor) or `compute_<number>[a|f]` (PTX for a virtual architecture).
    pub fn parse_image_arch(name: &str) -> Result<Sm> {
        Self::parse(name).or_else(|_| Self::parse_compute(name))
    }

    fn parse_digits(name: &str, digits: &str) -> Result<Sm> {
        let invalid = || Error::BadSmName {
            name: name.to_owned(),
        };
        let (digits, suffix) = match digits.char_indices().last() {
            Some((i, 'a')) => (&digits[..i], Some(SmSuffix::ArchSpecific)),
            Some((i, 'f')) => (&digits[..i], Some(SmSuffix::FamilySpecific)),
            _ => (digits, None),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        let number: u32 = digits.parse().map_err(|_| invalid())?;
        if !(20..=1000).contains(&number) || digits.starts_with('0') {
            return Err(invalid());
        }
        Ok(Sm { number, suffix })
    }

    /// Parses an `--offload-arch` NVIDIA name: one clang 22 accepts.
    pub fn parse_offload_arch(name: &str) -> Result<Sm> {
        let sm = Self::parse(name)?;
        match sm.processor() {
            Some(p) if p.offload_arch => Ok(sm),
            _ => Err(Error::UnknownOffloadArch {
                name: name.to_owned(),
                known: known_arch_list(),
            }),
        }
    }

    /// The matrix instructions of this architecture: `mma.sync` m16n8k16 from sm_80 on.
    pub fn matrix_unit(self) -> Option<MatrixUnit> {
        (self.number >= 80).then_some(MatrixUnit::MmaSync)
    }

    /// The number: `90` for `sm_90a`.
    pub fn number(self) -> u32 {
        self.number
    }

    /// The compute capability's major version: `9` for `sm_90a`, `12` for `sm_120`.
    pub fn major(self) -> u32 {
        self.number / 10
    }

    /// The compute capability's minor version.
    pub fn minor(self) -> u32 {
        self.number % 10
    }

    /// The suffix.
    pub fn suffix(self) -> Option<SmSuffix> {
        self.suffix
    }

    /// LLVM 22's processor of this name.
    pub fn processor(self) -> Option<&'static NvptxProcessor> {
        let name = self.to_string();
        nvptx_processor(&name)
    }

    /// LLVM 22's processor of this name, or an error saying LLVM 22 knows none.
    pub fn llvm_processor(self) -> Result<&'static NvptxProcessor> {
        self.processor()
            .ok_or_else(|| Error::UnknownNvptxProcessor {
                name: self.to_string(),
            })
    }
}

impl fmt::Display for Sm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sm_{}", self.number)?;
        if let Some(suffix) = self.suffix {
            write!(f, "{}", suffix.letter())?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Sm {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// Offload architectures clang 22 knows besides `gfx*` and `sm_*`.
pub const OTHER_OFFLOAD_ARCHS: &[&str] = &["generic", "amdgcnspirv", "graniterapids", "bmg_g21"];

/// The AMDGPU processor with this primary or alternative name.
pub fn amdgpu_processor(name: &str) -> Option<&'static AmdGpuProcessor> {
    let primary = AMDGPU_ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |&(_, primary)| primary);
    AMDGPU_PROCESSORS.iter().find(|p| p.name == primary)
}

/// The AMDGPU processor with this `EF_AMDGPU_MACH` value.
pub fn amdgpu_processor_by_mach(mach: u8) -> Option<&'static AmdGpuProcessor> {
    AMDGPU_PROCESSORS.iter().find(|p| p.mach == mach)
}

/// Whether clang 22 knows `name` as an offload architecture (its `StringToOffloadArch`):
/// the bundler keeps a target ID in a bundle entry ID only when this holds for its processor.
/// Alternative AMDGPU names (`fiji`) are not offload architectures.
pub fn is_known_offload_arch(name: &str) -> bool {
    AMDGPU_PROCESSORS.iter().any(|p| p.name == name)
        || nvidia_offload_archs().any(|n| n == name)
        || OTHER_OFFLOAD_ARCHS.contains(&name)
}

fn known_arch_list() -> String {
    AMDGPU_PROCESSORS
        .iter()
        .map(|p| p.name)
        .chain(nvidia_offload_archs())
        .chain(OTHER_OFFLOAD_ARCHS.iter().copied())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A parsed target ID. Features keep the order they were written in; [`TargetId::canonical`]
/// sorts them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TargetId {
    written: String,
    processor: String,
    features: Vec<(String, bool)>,
}

impl TargetId {
    /// Parses `<processor>(:<feature>(+|-))*`.
    ///
    /// Checks the syntax (non-empty processor, each feature ending in `+` or `-`, no feature
    /// twice). An alternative AMDGPU name is replaced by its primary name, and for a known
    /// AMDGPU processor every feature must be one the processor supports; NVIDIA and unknown
    /// processors take no such check (see [`TargetId::parse_offload_arch`] for a strict parse).
    pub fn parse(s: &str) -> Result<TargetId> {
        if s.is_empty() {
            return Err(Error::TargetIdEmpty);
        }
        let mut parts = s.split(':');
        let raw_processor = parts.next().unwrap_or_default();
        if raw_processor.is_empty() {
            return Err(Error::TargetIdNoProcessor { id: s.to_owned() });
        }
        let amd = amdgpu_processor(raw_processor);
        let processor = amd.map_or(raw_processor, |p| p.name).to_owned();
        let mut features: Vec<(String, bool)> = Vec::new();
        for f in parts {
            let (name, on) = match f.as_bytes().last() {
                Some(b'+') => (&f[..f.len() - 1], true),
                Some(b'-') => (&f[..f.len() - 1], false),
                _ => {
                    return Err(Error::TargetIdBadFeature {
                        id: s.to_owned(),
                        feature: f.to_owned(),
                    });
                }
            };
            if name.is_empty() {
                return Err(Error::TargetIdBadFeature {
                    id: s.to_owned(),
                    feature: f.to_owned(),
                });
            }
            if features.iter().any(|(n, _)| n == name) {
                return Err(Error::TargetIdDuplicateFeature {
                    id: s.to_owned(),
                    feature: name.to_owned(),
                });
            }
            if let Some(amd) = amd
                && !amd.features().any(|supported| supported == name)
            {
                return Err(Error::TargetIdUnsupportedFeature {
                    id: s.to_owned(),
                    processor: amd.name,
                    feature: name.to_owned(),
                });
            }
            features.push((name.to_owned(), on));
        }
        Ok(TargetId {
            written: s.to_owned(),
            processor,
            features,
        })
    }

    /// Parses an `--offload-arch` value: like [`TargetId::parse`], and the processor must be
    /// one clang 22 knows (alternative AMDGPU names allowed); NVIDIA and other architectures
    /// take no features. The error for an unknown name lists the known ones.
    pub fn parse_offload_arch(s: &str) -> Result<TargetId> {
        let id = Self::parse(s)?;
        if !is_known_offload_arch(&id.processor) {
            return Err(Error::UnknownOffloadArch {
                name: id.processor,
                known: known_arch_list(),
            });
        }
        if amdgpu_processor(&id.processor).is_none()
            && let Some((f, _)) = id.features.first()
        {
            return Err(Error::TargetIdUnsupportedFeature {
                id: s.to_owned(),
                processor: "non-AMDGPU",
                feature: f.clone(),
            });
        }
        Ok(id)
    }

    /// The processor, with an alternative AMDGPU name replaced by the primary one.
    pub fn processor(&self) -> &str {
        &self.processor
    }

    /// The features in the order written, `true` for `+`.
    pub fn features(&self) -> &[(String, bool)] {
        &self.features
    }

    /// The setting of one feature: `None` means "any".
    pub fn feature(&self, name: &str) -> Option<bool> {
        self.features
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, on)| on)
    }

    /// The string as it was parsed.
    pub fn as_written(&self) -> &str {
        &self.written
    }

    /// The canonical form: primary processor name, features in alphabetical order
    /// (`gfx90a:sramecc-:xnack+`).
    pub fn canonical(&self) -> String {
        let mut features: Vec<&(String, bool)> = self.features.iter().collect();
        features.sort_by(|a, b| a.0.cmp(&b.0));
        let mut s = self.processor.clone();
        for (name, on) in features {
            s.push(':');
            s.push_str(name);
            s.push(if *on { '+' } else { '-' });
        }
        s
    }

    /// The AMDGPU processor entry, when the processor is one.
    pub fn amdgpu(&self) -> Option<&'static AmdGpuProcessor> {
        amdgpu_processor(&self.processor)
    }

    /// Whether a code object built for `code_object` may run on a device requested as
    /// `requested`: same processor; the code object names no more features than the request;
    /// every feature the code object names appears in the request with the same sign (a
    /// feature the code object leaves out means "any").
    pub fn is_compatible(code_object: &TargetId, requested: &TargetId) -> bool {
        if code_object.processor != requested.processor {
            return false;
        }
        if code_object.features.len() > requested.features.len() {
            return false;
        }
        code_object
            .features
            .iter()
            .all(|(name, on)| requested.feature(name) == Some(*on))
    }
}

impl fmt::Display for TargetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

impl std::str::FromStr for TargetId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// The setting of an AMDGPU target-ID feature (`xnack`, `sramecc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum FeatureSetting {
    /// Not named in the target ID: the code object works either way.
    #[default]
    Any,
    /// `feature+`.
    On,
    /// `feature-`.
    Off,
}

/// An AMDGPU target ID of a processor LLVM 22 knows, e.g. `gfx942:sramecc-:xnack+`: what a
/// build targets and what a code object's `e_flags` say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AmdTargetId {
    processor: &'static AmdGpuProcessor,
    xnack: FeatureSetting,
    sramecc: FeatureSetting,
}

const XNACK_ANY: u32 = 0x100;
const XNACK_OFF: u32 = 0x200;
const XNACK_ON: u32 = 0x300;
const SRAMECC_ANY: u32 = 0x400;
const SRAMECC_OFF: u32 = 0x800;
const SRAMECC_ON: u32 = 0xc00;

impl AmdTargetId {
    /// Parses `<processor>(:<feature>(+|-))*` by [`TargetId::parse`]'s rules; the processor must
    /// be an AMDGPU processor LLVM 22 knows (an alternative name stands for its primary one).
    pub fn parse(s: &str) -> Result<AmdTargetId> {
        Self::from_target_id(&TargetId::parse(s)?)
    }

    /// The AMDGPU target ID a parsed [`TargetId`] names, if its processor is an AMDGPU one.
    pub fn from_target_id(id: &TargetId) -> Result<AmdTargetId> {
        let processor = id.amdgpu().ok_or_else(|| Error::UnknownAmdgpuProcessor {
            id: id.as_written().to_owned(),
        })?;
        let setting = |name| match id.feature(name) {
            None => FeatureSetting::Any,
            Some(true) => FeatureSetting::On,
            Some(false) => FeatureSetting::Off,
        };
        // `TargetId::parse` admits only the features the processor supports, and those are
        // `xnack` and `sramecc`.
        Ok(AmdTargetId {
            processor,
            xnack: setting("xnack"),
            sramecc: setting("sramecc"),
        })
    }

    /// The processor.
    pub fn processor(&self) -> &'static AmdGpuProcessor {
        self.processor
    }

    /// The `xnack` setting.
    pub fn xnack(&self) -> FeatureSetting {
        self.xnack
    }

    /// The `sramecc` setting.
    pub fn sramecc(&self) -> FeatureSetting {
        self.sramecc
    }

    fn named_features(&self) -> impl Iterator<Item = (&'static str, bool)> {
        // Alphabetical: clang's canonical order.
        [("sramecc", self.sramecc), ("xnack", self.xnack)]
            .into_iter()
            .filter_map(|(name, setting)| match setting {
                FeatureSetting::Any => None,
                FeatureSetting::On => Some((name, true)),
                FeatureSetting::Off => Some((name, false)),
            })
    }

    /// LLVM's target-feature string for this ID, e.g. `-sramecc,+xnack`.
    pub fn llvm_features(&self) -> String {
        self.named_features()
            .map(|(name, on)| format!("{}{name}", if on { '+' } else { '-' }))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The `e_flags` a code object (V4 and later) for this target ID carries: the machine,
    /// the xnack and sramecc settings where the processor supports them, and the generic
    /// version.
    pub fn e_flags(&self) -> u32 {
        let p = self.processor;
        let setting =
            |supported: bool, s: FeatureSetting, [any, off, on]: [u32; 3]| match (supported, s) {
                (false, _) => 0,
                (true, FeatureSetting::Any) => any,
                (true, FeatureSetting::Off) => off,
                (true, FeatureSetting::On) => on,
            };
        u32::from(p.mach)
            | setting(p.xnack, self.xnack, [XNACK_ANY, XNACK_OFF, XNACK_ON])
            | setting(
                p.sramecc,
                self.sramecc,
                [SRAMECC_ANY, SRAMECC_OFF, SRAMECC_ON],
            )
            | (u32::from(p.generic_version) << 24)
    }

    /// This ID as a general [`TargetId`].
    pub fn to_target_id(&self) -> TargetId {
        TargetId {
            written: self.to_string(),
            processor: self.processor.name.to_owned(),
            features: self
                .named_features()
                .map(|(name, on)| (name.to_owned(), on))
                .collect(),
        }
    }
}

impl fmt::Display for AmdTargetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.processor.name)?;
        for (name, on) in self.named_features() {
            write!(f, ":{name}{}", if on { '+' } else { '-' })?;
        }
        Ok(())
    }
}

impl std::str::FromStr for AmdTargetId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

impl PartialOrd for AmdTargetId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for AmdTargetId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.processor.name, self.xnack, self.sramecc).cmp(&(
            other.processor.name,
            other.xnack,
            other.sramecc,
        ))
    }
}

/// Whether `s` has the shape of an AMDGPU target ID as a driver reports it (HIP's
/// `gcnArchName`): `gfx` and a processor of letters, digits and `-`, then `:<feature>(+|-)`
/// parts named by letters and digits. Processors and features are not looked up, so a device
/// newer than this table still passes.
pub fn is_amdgpu_target_id_shaped(s: &str) -> bool {
    let mut parts = s.split(':');
    let processor = parts.next().unwrap_or("");
    let processor_ok = processor.len() > 3
        && processor.starts_with("gfx")
        && processor
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-');
    processor_ok
        && parts.all(|f| {
            f.len() > 1
                && (f.ends_with('+') || f.ends_with('-'))
                && f[..f.len() - 1].bytes().all(|b| b.is_ascii_alphanumeric())
        })
}

/// Checks the composition rule for a set of target IDs: for one processor, a feature must be
/// named in every ID or in none (an "any" entry cannot sit next to an on/off entry).
///
/// Returns the first offending pair: the first ID seen for that processor and the ID that
/// disagrees with it.
pub fn conflicting_combination(ids: &[TargetId]) -> Option<(TargetId, TargetId)> {
    let mut firsts: Vec<&TargetId> = Vec::new();
    for id in ids {
        match firsts.iter().find(|f| f.processor == id.processor) {
            None => firsts.push(id),
            Some(first) => {
                let mut a: Vec<&str> = first.features.iter().map(|(n, _)| n.as_str()).collect();
                let mut b: Vec<&str> = id.features.iter().map(|(n, _)| n.as_str()).collect();
                a.sort_unstable();
                b.sort_unstable();
                if a != b {
                    return Some(((*first).clone(), id.clone()));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> TargetId {
        TargetId::parse(s).unwrap()
    }

    /// FP32 vector lanes per compute unit as the data sheets count them: 64 on MI100, MI200
    /// and RDNA 2; 128 on MI300, MI355 and RDNA 3 and 4; unknown before GFX9.
    #[test]
    fn fp32_lanes_follow_the_data_sheets() {
        for (name, lanes) in [
            ("gfx908", Some(64)),
            ("gfx90a", Some(64)),
            ("gfx1030", Some(64)),
            ("gfx942", Some(128)),
            ("gfx950", Some(128)),
            ("gfx1100", Some(128)),
            ("gfx1201", Some(128)),
            ("gfx803", None),
        ] {
            let processor = amdgpu_processor(name).unwrap();
            assert_eq!(processor.fp32_lanes_per_compute_unit(), lanes, "{name}");
        }
    }

    #[test]
    fn matrix_units_by_target() {
        let amd = |name: &str| amdgpu_processor(name).unwrap().matrix_unit();
        assert_eq!(amd("gfx908"), Some(MatrixUnit::Mfma { bf16: false }));
        assert_eq!(amd("gfx90a"), Some(MatrixUnit::Mfma { bf16: true }));
        assert_eq!(amd("gfx942"), Some(MatrixUnit::Mfma { bf16: true }));
        assert_eq!(amd("gfx1100"), Some(MatrixUnit::Wmma));
        assert_eq!(amd("gfx1151"), Some(MatrixUnit::Wmma));
        for none in ["gfx906", "gfx1030", "gfx1201", "gfx803"] {
            assert_eq!(amd(none), None, "{none}");
        }
        assert!(!MatrixUnit::Mfma { bf16: false }.has_bf16());
        assert!(MatrixUnit::Wmma.has_bf16());
        let nv = |name: &str| Sm::parse(name).unwrap().matrix_unit();
        assert_eq!(nv("sm_75"), None);
        assert_eq!(nv("sm_80"), Some(MatrixUnit::MmaSync));
        assert_eq!(nv("sm_90a"), Some(MatrixUnit::MmaSync));
    }

    #[test]
    fn gfx_major_and_wave_size_of_every_processor() {
        for (name, major, wave) in [
            ("gfx600", 6, 64),
            ("gfx906", 9, 64),
            ("gfx90a", 9, 64),
            ("gfx90c", 9, 64),
            ("gfx942", 9, 64),
            ("gfx950", 9, 64),
            ("gfx9-generic", 9, 64),
            ("gfx9-4-generic", 9, 64),
            ("gfx1030", 10, 32),
            ("gfx10-1-generic", 10, 32),
            ("gfx10-3-generic", 10, 32),
            ("gfx1100", 11, 32),
            ("gfx11-generic", 11, 32),
            ("gfx1201", 12, 32),
        ] {
            let p = amdgpu_processor(name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(
                (p.gfx_major(), p.default_wave_size()),
                (major, wave),
                "{name}"
            );
        }
        for p in AMDGPU_PROCESSORS {
            assert!((6..=12).contains(&p.gfx_major()), "{}", p.name);
        }
    }

    #[test]
    fn nvidia_image_archs() {
        type Row = (&'static str, Option<(u32, u32, Option<SmSuffix>)>);
        let table: &[Row] = &[
            ("sm_80", Some((8, 0, None))),
            ("sm_90a", Some((9, 0, Some(SmSuffix::ArchSpecific)))),
            ("sm_120f", Some((12, 0, Some(SmSuffix::FamilySpecific)))),
            ("compute_75", Some((7, 5, None))),
            ("sm_8", None),
            ("gfx90a", None),
            ("", None),
        ];
        for (arch, want) in table {
            let got = Sm::parse_image_arch(arch)
                .ok()
                .map(|sm| (sm.major(), sm.minor(), sm.suffix()));
            assert_eq!(got, *want, "{arch}");
        }
    }

    #[test]
    fn parse_and_canonical_table() {
        let cases: &[(&str, &str, &str)] = &[
            ("gfx90a", "gfx90a", "gfx90a"),
            ("gfx90a:xnack+", "gfx90a", "gfx90a:xnack+"),
            ("gfx90a:xnack+:sramecc-", "gfx90a", "gfx90a:sramecc-:xnack+"),
            ("fiji", "gfx803", "gfx803"),
            ("carrizo:xnack-", "gfx801", "gfx801:xnack-"),
            ("sm_80", "sm_80", "sm_80"),
            (
                "gfx9-4-generic:sramecc+",
                "gfx9-4-generic",
                "gfx9-4-generic:sramecc+",
            ),
        ];
        for &(input, proc_, canon) in cases {
            let id = t(input);
            assert_eq!(id.processor(), proc_, "{input}");
            assert_eq!(id.canonical(), canon, "{input}");
        }
    }

    #[test]
    fn parse_errors_table() {
        type Check = fn(&Error) -> bool;
        let cases: &[(&str, Check)] = &[
            ("", |e| matches!(e, Error::TargetIdEmpty)),
            (":xnack+", |e| {
                matches!(e, Error::TargetIdNoProcessor { .. })
            }),
            ("gfx90a:xnack", |e| {
                matches!(e, Error::TargetIdBadFeature { .. })
            }),
            ("gfx90a:+", |e| {
                matches!(e, Error::TargetIdBadFeature { .. })
            }),
            ("gfx90a:", |e| matches!(e, Error::TargetIdBadFeature { .. })),
            ("gfx90a:xnack+:xnack-", |e| {
                matches!(e, Error::TargetIdDuplicateFeature { .. })
            }),
            ("gfx1100:xnack+", |e| {
                matches!(e, Error::TargetIdUnsupportedFeature { .. })
            }),
            ("gfx900:sramecc+", |e| {
                matches!(e, Error::TargetIdUnsupportedFeature { .. })
            }),
            ("gfx90a:foo+", |e| {
                matches!(e, Error::TargetIdUnsupportedFeature { .. })
            }),
        ];
        for (input, check) in cases {
            let err = TargetId::parse(input).unwrap_err();
            assert!(check(&err), "{input}: {err}");
        }
    }

    #[test]
    fn offload_arch_strict() {
        assert!(TargetId::parse_offload_arch("sm_90a").is_ok());
        assert!(TargetId::parse_offload_arch("gfx942:xnack+").is_ok());
        assert!(TargetId::parse_offload_arch("fiji").is_ok());
        let e = TargetId::parse_offload_arch("sm_99").unwrap_err();
        assert!(
            matches!(&e, Error::UnknownOffloadArch { known, .. } if known.contains("sm_80") && known.contains("gfx90a"))
        );
        assert!(TargetId::parse_offload_arch("gfx940").is_err());
        assert!(TargetId::parse_offload_arch("sm_80:xnack+").is_err());
        assert!(TargetId::parse("foo").is_ok());
    }

    #[test]
    fn compatibility_table() {
        // (code object, requested, compatible)
        let cases = [
            ("gfx90a", "gfx90a", true),
            ("gfx90a", "gfx90a:xnack+", true),
            ("gfx90a", "gfx90a:xnack-", true),
            ("gfx90a", "gfx90a:sramecc+:xnack+", true),
            ("gfx942:xnack+", "gfx942:xnack+:sramecc+", true),
            ("gfx942:xnack+", "gfx942:xnack+", true),
            ("gfx942:xnack+", "gfx942", false),
            ("gfx942:xnack+", "gfx942:xnack-", false),
            ("gfx942:xnack+", "gfx942:sramecc+", false),
            ("gfx942:sramecc+:xnack+", "gfx942:xnack+", false),
            ("gfx942:sramecc-:xnack+", "gfx942:xnack+:sramecc-", true),
            ("gfx90a", "gfx942", false),
            ("fiji", "gfx803", true),
            ("sm_80", "sm_80", true),
            ("sm_80", "sm_90", false),
        ];
        for (co, req, want) in cases {
            assert_eq!(
                TargetId::is_compatible(&t(co), &t(req)),
                want,
                "{co} for {req}"
            );
        }
    }

    #[test]
    fn conflict_table() {
        type Case<'a> = (&'a [&'a str], Option<(&'a str, &'a str)>);
        let cases: &[Case<'_>] = &[
            (&["gfx90a", "gfx942"], None),
            (&["gfx90a:xnack+", "gfx90a:xnack-"], None),
            (
                &["gfx90a", "gfx90a:xnack+"],
                Some(("gfx90a", "gfx90a:xnack+")),
            ),
            (
                &["gfx90a:xnack+", "gfx90a"],
                Some(("gfx90a:xnack+", "gfx90a")),
            ),
            (
                &["gfx90a:xnack+", "gfx90a:sramecc+"],
                Some(("gfx90a:xnack+", "gfx90a:sramecc+")),
            ),
            (
                &["gfx90a:sramecc+:xnack+", "gfx90a:xnack+"],
                Some(("gfx90a:sramecc+:xnack+", "gfx90a:xnack+")),
            ),
            (
                &["gfx90a:xnack+:sramecc-", "gfx90a:sramecc+:xnack-", "gfx942"],
                None,
            ),
            (&["sm_80", "sm_80"], None),
        ];
        for (ids, want) in cases {
            let parsed: Vec<TargetId> = ids.iter().map(|s| t(s)).collect();
            let got = conflicting_combination(&parsed);
            let got = got.as_ref().map(|(a, b)| (a.as_written(), b.as_written()));
            assert_eq!(got, *want, "{ids:?}");
        }
    }

    #[test]
    fn amd_target_ids_and_e_flags_match_clang() {
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
            assert_eq!(target.e_flags(), flags, "{id}");
            assert_eq!(target.to_string(), id);
            assert_eq!(target.to_target_id().canonical(), id);
        }
        let id = AmdTargetId::parse("gfx942:xnack+:sramecc-").unwrap();
        assert_eq!(id.to_string(), "gfx942:sramecc-:xnack+");
        assert_eq!(id.llvm_features(), "-sramecc,+xnack");
        assert_eq!(
            (id.xnack(), id.sramecc()),
            (FeatureSetting::On, FeatureSetting::Off)
        );
        assert_eq!(AmdTargetId::parse("gfx90a").unwrap().llvm_features(), "");
    }

    #[test]
    fn bad_amd_target_ids() {
        for id in [
            "",
            "sm_80",
            "gfx942:xnack",
            "gfx942:foo+",
            "gfx1100:xnack+",
            "gfx942:xnack+:xnack-",
            "gfx9999",
        ] {
            assert!(AmdTargetId::parse(id).is_err(), "{id}");
        }
        assert!(matches!(
            AmdTargetId::parse("gfx9999"),
            Err(Error::UnknownAmdgpuProcessor { .. })
        ));
    }

    #[test]
    fn amd_target_id_shapes() {
        for ok in [
            "gfx90a",
            "gfx90a:sramecc+:xnack-",
            "gfx942:xnack+",
            "gfx1100",
            "gfx9-4-generic",
            "gfx10-3-generic:xnack-",
        ] {
            assert!(is_amdgpu_target_id_shaped(ok), "{ok}");
        }
        for bad in [
            "",
            "gfx",
            "sm_80",
            "gfx90a:",
            "gfx90a:xnack",
            "gfx90a:xnack*",
            "gfx 90a",
            "\u{1}gfx90a",
            "gfx90a::xnack+",
        ] {
            assert!(!is_amdgpu_target_id_shaped(bad), "{bad}");
        }
    }

    #[test]
    fn sm_names() {
        let cases: &[(&str, u32, u32, Option<SmSuffix>)] = &[
            ("sm_80", 8, 0, None),
            ("sm_86", 8, 6, None),
            ("sm_90a", 9, 0, Some(SmSuffix::ArchSpecific)),
            ("sm_100", 10, 0, None),
            ("sm_120f", 12, 0, Some(SmSuffix::FamilySpecific)),
        ];
        for &(name, major, minor, suffix) in cases {
            let sm = Sm::parse(name).unwrap();
            assert_eq!(
                (sm.major(), sm.minor(), sm.suffix()),
                (major, minor, suffix)
            );
            assert_eq!(sm.to_string(), name);
        }
        let compute = Sm::parse_compute("compute_75").unwrap();
        assert_eq!((compute.major(), compute.minor()), (7, 5));
        for bad in [
            "sm_",
            "80",
            "sm_x",
            "sm_08",
            "sm_5",
            "sm_8",
            "sm_8x",
            "gfx90a",
            "sm_a",
            "sm_90af",
            "sm_9é",
            "",
            "compute_75",
        ] {
            assert!(
                matches!(Sm::parse(bad), Err(Error::BadSmName { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn nvptx_processor_table() {
        assert_eq!(
            Sm::parse("sm_90a")
                .unwrap()
                .llvm_processor()
                .unwrap()
                .min_ptx_isa,
            80
        );
        assert!(Sm::parse("sm_120f").unwrap().processor().is_some());
        assert!(matches!(
            Sm::parse("sm_130").unwrap().llvm_processor(),
            Err(Error::UnknownNvptxProcessor { .. })
        ));
        assert!(Sm::parse_offload_arch("sm_90a").is_ok());
        assert!(Sm::parse_offload_arch("sm_120f").is_err());
        assert!(is_known_offload_arch("sm_121a") && !is_known_offload_arch("sm_121f"));
        for p in NVPTX_PROCESSORS {
            let sm = Sm::parse(p.name).unwrap();
            assert_eq!(sm.to_string(), p.name);
            assert_eq!(
                p.offload_arch,
                sm.suffix() != Some(SmSuffix::FamilySpecific),
                "{}",
                p.name
            );
        }
    }

    #[test]
    fn processor_table() {
        let g = amdgpu_processor("gfx942").unwrap();
        assert_eq!((g.mach, g.xnack, g.sramecc), (0x4c, true, true));
        assert_eq!(amdgpu_processor("gfx1100").unwrap().mach, 0x41);
        assert_eq!(amdgpu_processor_by_mach(0x3f).unwrap().name, "gfx90a");
        assert_eq!(amdgpu_processor("polaris10").unwrap().name, "gfx803");
        for p in AMDGPU_PROCESSORS {
            assert_eq!(
                amdgpu_processor_by_mach(p.mach).map(|q| q.name),
                Some(p.name)
            );
        }
    }
}
