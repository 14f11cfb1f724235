//! Target IDs (`<processor>(:<feature>(+|-))*`), their canonical form, conflicting
//! combinations and code-object compatibility, following clang's `TargetID.cpp` and the
//! clang-offload-bundler documentation; plus the processor tables clang 22 knows.

use std::fmt;

use crate::error::{Error, Result};

/// One AMDGPU processor as LLVM 22 describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// The NVIDIA GPU architectures clang 22 accepts as offload architectures.
pub const NVIDIA_SM_ARCHS: &[&str] = &[
    "sm_20", "sm_21", "sm_30", "sm_32", "sm_35", "sm_37", "sm_50", "sm_52", "sm_53", "sm_60",
    "sm_61", "sm_62", "sm_70", "sm_72", "sm_75", "sm_80", "sm_86", "sm_87", "sm_88", "sm_89",
    "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_101", "sm_101a", "sm_103", "sm_103a", "sm_110",
    "sm_110a", "sm_120", "sm_120a", "sm_121", "sm_121a",
];

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
        || NVIDIA_SM_ARCHS.contains(&name)
        || OTHER_OFFLOAD_ARCHS.contains(&name)
}

fn known_arch_list() -> String {
    AMDGPU_PROCESSORS
        .iter()
        .map(|p| p.name)
        .chain(NVIDIA_SM_ARCHS.iter().copied())
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
