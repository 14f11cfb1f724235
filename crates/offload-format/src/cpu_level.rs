//! Levels of the CPU device's instruction set. A bundle carries one host-CPU image per level,
//! as it carries one GPU image per `sm_XX`: `host`, the triple's baseline (on x86-64, SSE2),
//! and the x86-64 psABI's micro-architecture levels, each built with rustc's `-Ctarget-cpu`
//! of the same name. The runtime runs the highest level the CPU has.

use std::fmt;

/// One level; the order is that of the instruction sets (each level has all of the one
/// before).
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
}

impl CpuLevel {
    /// Every level, lowest first.
    pub const ALL: [CpuLevel; 4] = [
        CpuLevel::Baseline,
        CpuLevel::X86_64V2,
        CpuLevel::X86_64V3,
        CpuLevel::X86_64V4,
    ];

    /// The image's `arch` string (`host`, `x86-64-v3`).
    pub fn name(self) -> &'static str {
        match self {
            CpuLevel::Baseline => crate::triple::HOST_ARCH,
            CpuLevel::X86_64V2 => "x86-64-v2",
            CpuLevel::X86_64V3 => "x86-64-v3",
            CpuLevel::X86_64V4 => "x86-64-v4",
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

    /// rustc's `-Ctarget-cpu` for the level; none for the baseline, the target's default.
    pub fn target_cpu(self) -> Option<&'static str> {
        match self {
            CpuLevel::Baseline => None,
            level => Some(level.name()),
        }
    }

    /// The CPU architecture the level belongs to (as `std::env::consts::ARCH` names it); none
    /// for the baseline, which every architecture has.
    pub fn cpu_arch(self) -> Option<&'static str> {
        match self {
            CpuLevel::Baseline => None,
            _ => Some("x86_64"),
        }
    }

    /// The CPU features the level adds to the one below, as `is_x86_feature_detected!` names
    /// them (LAHF/SAHF, which every CPU with the others has, left out).
    pub fn added_features(self) -> &'static [&'static str] {
        match self {
            CpuLevel::Baseline => &[],
            CpuLevel::X86_64V2 => &["cmpxchg16b", "popcnt", "sse3", "ssse3", "sse4.1", "sse4.2"],
            CpuLevel::X86_64V3 => &[
                "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave",
            ],
            CpuLevel::X86_64V4 => &["avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"],
        }
    }

    /// Every feature the level needs: its own and those of the levels below.
    pub fn features(self) -> impl Iterator<Item = &'static str> {
        CpuLevel::ALL
            .into_iter()
            .filter(move |l| *l <= self)
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
    }
}
