//! Levels of the CPU device's instruction set. A bundle carries one host-CPU image per level,
//! as it carries one GPU image per `sm_XX`: `host`, the triple's baseline (on x86-64, SSE2; on
//! aarch64, Advanced SIMD), the x86-64 psABI's micro-architecture levels, each built with
//! rustc's `-Ctarget-cpu` of the same name, and aarch64's scalable vectors (SVE, SVE2), built
//! with `-Ctarget-feature`. The runtime runs the highest level of its architecture the CPU
//! has.

use std::fmt;

/// One level; within an architecture the order is that of the instruction sets (each level
/// has all of the one before it of the same architecture).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum CpuLevel {
    /// The triple's baseline, on every CPU of the architecture (`arch` = `host`).
    #[default]
    Baseline,
    /// `x86-64-v2`: SSE4.2, SSSE3, POPCNT, CMPXCHG16B.
    X86_64V2,
    /// `x86-64-v3`: AVX2, FMA, BMI1/2, F16C, LZCNT, MOVBE.
    X86_64V3,
    /// `x86-64-v4`: AVX-512 F, BW, CD, DQ, VL.
    X86_64V4,
    /// `aarch64-sve`: the Scalable Vector Extension (Graviton3, A64FX).
    Aarch64Sve,
    /// `aarch64-sve2`: SVE and SVE2 (Neoverse V2: Grace, Graviton4).
    Aarch64Sve2,
}

impl CpuLevel {
    /// Every level, lowest first.
    pub const ALL: [CpuLevel; 6] = [
        CpuLevel::Baseline,
        CpuLevel::X86_64V2,
        CpuLevel::X86_64V3,
        CpuLevel::X86_64V4,
        CpuLevel::Aarch64Sve,
        CpuLevel::Aarch64Sve2,
    ];

    /// The image's `arch` string (`host`, `x86-64-v3`).
    pub fn name(self) -> &'static str {
        match self {
            CpuLevel::Baseline => crate::triple::HOST_ARCH,
            CpuLevel::X86_64V2 => "x86-64-v2",
            CpuLevel::X86_64V3 => "x86-64-v3",
            CpuLevel::X86_64V4 => "x86-64-v4",
            CpuLevel::Aarch64Sve => "aarch64-sve",
            CpuLevel::Aarch64Sve2 => "aarch64-sve2",
        }
    }

    /// The level an image's `arch` names; an empty `arch` is the baseline (images written
    /// before the levels).
    pub fn from_arch(arch: &str) -> Option<CpuLevel> {
        if arch.is_empty() {
            return Some(CpuLevel::Baseline);
        }
        CpuLevel::ALL.into_iter().find(|l| l.name() == arch)
    }

    /// rustc's `-Ctarget-cpu` for the level; none for the baseline, the target's default, and
    /// for the levels made of features ([`CpuLevel::target_features`]).
    pub fn target_cpu(self) -> Option<&'static str> {
        match self {
            CpuLevel::X86_64V2 | CpuLevel::X86_64V3 | CpuLevel::X86_64V4 => Some(self.name()),
            _ => None,
        }
    }

    /// rustc's `-Ctarget-feature` for the level, where a set of features names it rather than
    /// a CPU (aarch64's `+sve`).
    pub fn target_features(self) -> Option<&'static str> {
        match self {
            CpuLevel::Aarch64Sve => Some("+sve"),
            CpuLevel::Aarch64Sve2 => Some("+sve,+sve2"),
            _ => None,
        }
    }

    /// The CPU architecture the level belongs to (as `std::env::consts::ARCH` names it); none
    /// for the baseline, which every architecture has.
    pub fn cpu_arch(self) -> Option<&'static str> {
        match self {
            CpuLevel::Baseline => None,
            CpuLevel::X86_64V2 | CpuLevel::X86_64V3 | CpuLevel::X86_64V4 => Some("x86_64"),
            CpuLevel::Aarch64Sve | CpuLevel::Aarch64Sve2 => Some("aarch64"),
        }
    }

    /// The CPU features the level adds to the one below, as `is_x86_feature_detected!` and
    /// `is_aarch64_feature_detected!` name them (LAHF/SAHF, which every CPU with the others
    /// has, left out).
    pub fn added_features(self) -> &'static [&'static str] {
        match self {
            CpuLevel::Baseline => &[],
            CpuLevel::X86_64V2 => &["cmpxchg16b", "popcnt", "sse3", "ssse3", "sse4.1", "sse4.2"],
            CpuLevel::X86_64V3 => &[
                "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave",
            ],
            CpuLevel::X86_64V4 => &["avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"],
            CpuLevel::Aarch64Sve => &["sve"],
            CpuLevel::Aarch64Sve2 => &["sve2"],
        }
    }

    /// Every feature the level needs: its own and those of the levels below it of its
    /// architecture.
    pub fn features(self) -> impl Iterator<Item = &'static str> {
        CpuLevel::ALL
            .into_iter()
            .filter(move |l| *l <= self && l.cpu_arch().is_none_or(|a| Some(a) == self.cpu_arch()))
            .flat_map(|l| l.added_features().iter().copied())
    }
}

impl fmt::Display for CpuLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_order_follows_the_instruction_sets() {
        for level in CpuLevel::ALL {
            assert_eq!(CpuLevel::from_arch(level.name()), Some(level));
        }
        assert_eq!(CpuLevel::from_arch(""), Some(CpuLevel::Baseline));
        assert_eq!(CpuLevel::from_arch("sm_80"), None);
        assert!(CpuLevel::Baseline < CpuLevel::X86_64V3);
        assert_eq!(CpuLevel::X86_64V3.target_cpu(), Some("x86-64-v3"));
        assert_eq!(CpuLevel::Baseline.target_cpu(), None);
    }

    #[test]
    fn a_level_needs_the_features_of_those_below() {
        let v4: Vec<&str> = CpuLevel::X86_64V4.features().collect();
        assert!(v4.contains(&"sse4.2") && v4.contains(&"avx2") && v4.contains(&"avx512vl"));
        assert_eq!(CpuLevel::Baseline.features().count(), 0);
        // Only those of its own architecture.
        let sve2: Vec<&str> = CpuLevel::Aarch64Sve2.features().collect();
        assert_eq!(sve2, ["sve", "sve2"]);
        assert_eq!(CpuLevel::Aarch64Sve.cpu_arch(), Some("aarch64"));
        assert_eq!(CpuLevel::Aarch64Sve.target_cpu(), None);
        assert_eq!(CpuLevel::Aarch64Sve2.target_features(), Some("+sve,+sve2"));
        assert_eq!(CpuLevel::X86_64V3.target_features(), None);
    }
}
