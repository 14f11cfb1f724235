//! Which CPU image the CPU device runs: a module may carry one per level of the instruction
//! set (`host`, `x86-64-v3`, …), and the device runs the highest level this CPU has, or the
//! highest at most `OFFLOAD_CPU_LEVEL`.

use offload_format::CpuLevel;

use crate::error::{Error, Result};
use crate::registry::RegisteredImage;

/// The triple of CPU images this runtime can load: the one it was compiled for. The build
/// names the CPU image by the host crate's target, so the two agree on every Linux target;
/// elsewhere no CPU image fits and the device choice says why.
pub(crate) const HOST_TRIPLE: &str = if !cfg!(all(target_os = "linux", target_env = "gnu")) {
    "unsupported-host"
} else if cfg!(target_arch = "x86_64") {
    "x86_64-unknown-linux-gnu"
} else if cfg!(target_arch = "aarch64") {
    "aarch64-unknown-linux-gnu"
} else if cfg!(target_arch = "riscv64") {
    "riscv64gc-unknown-linux-gnu"
} else if cfg!(all(target_arch = "powerpc64", target_endian = "little")) {
    "powerpc64le-unknown-linux-gnu"
} else {
    "unsupported-host"
};

/// The level the device runs at most, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LevelLimit {
    /// The highest level an image may have.
    pub(crate) level: CpuLevel,
    /// Why: the CPU's features, or the variable.
    pub(crate) why: String,
}

/// The features of `level` this CPU lacks (all of them on another architecture).
pub(crate) fn missing_features(level: CpuLevel) -> Vec<&'static str> {
    if level
        .cpu_arch()
        .is_some_and(|arch| arch != std::env::consts::ARCH)
    {
        return level.features().collect();
    }
    level.features().filter(|f| !has_feature(f)).collect()
}

/// The highest level whose features this CPU has.
pub(crate) fn detected() -> CpuLevel {
    CpuLevel::ALL
        .into_iter()
        .rev()
        .find(|l| missing_features(*l).is_empty())
        .unwrap_or_default()
}

/// The limit `OFFLOAD_CPU_LEVEL` sets (`value`), or without it the CPU's own level.
///
/// # Errors
/// [`Error::CpuLevel`] for a value that names no level, or a level this CPU lacks.
pub(crate) fn limit(value: Option<&str>) -> Result<LevelLimit> {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        let level = detected();
        return Ok(LevelLimit {
            level,
            why: format!("this CPU's highest level is {level}"),
        });
    };
    let error = |reason: String| Error::CpuLevel {
        value: value.to_owned(),
        reason,
    };
    let Some(level) = CpuLevel::from_arch(value) else {
        let names: Vec<&str> = CpuLevel::ALL.iter().map(|l| l.name()).collect();
        return Err(error(format!(
            "no level of the CPU device; the levels are {}",
            names.join(", ")
        )));
    };
    let missing = missing_features(level);
    if !missing.is_empty() {
        return Err(error(format!(
            "this CPU ({}) lacks {}, which {level} code uses: it would stop at an illegal \
             instruction; its highest level is {}",
            std::env::consts::ARCH,
            missing.join(", "),
            detected()
        )));
    }
    Ok(LevelLimit {
        level,
        why: format!("OFFLOAD_CPU_LEVEL={level}"),
    })
}

/// The level of an image this runtime's CPU device can load: its triple, an object, and an
/// `arch` that is a level of this CPU's architecture.
pub(crate) fn image_level(image: &RegisteredImage<'_>) -> Option<CpuLevel> {
    if image.triple() != HOST_TRIPLE || image.image_kind() != offload_format::ImageKind::Object {
        return None;
    }
    CpuLevel::from_arch(image.arch()).filter(|l| {
        l.cpu_arch()
            .is_none_or(|arch| arch == std::env::consts::ARCH)
    })
}

/// The image to run among `images`: the highest level at most `limit.level` (the first of
/// equals), with its index.
pub(crate) fn choose<'a, 'b>(
    images: &'b [RegisteredImage<'a>],
    limit: &LevelLimit,
) -> Option<(usize, &'b RegisteredImage<'a>, CpuLevel)> {
    let mut best: Option<(usize, &RegisteredImage<'a>, CpuLevel)> = None;
    for (index, image) in images.iter().enumerate() {
        let Some(level) = image_level(image) else {
            continue;
        };
        if level <= limit.level && best.is_none_or(|(_, _, b)| level > b) {
            best = Some((index, image, level));
        }
    }
    best
}

/// Whether this CPU has `feature` (as `is_x86_feature_detected!` names it).
#[cfg(target_arch = "x86_64")]
fn has_feature(feature: &str) -> bool {
    use std::arch::is_x86_feature_detected as has;
    match feature {
        "cmpxchg16b" => has!("cmpxchg16b"),
        "popcnt" => has!("popcnt"),
        "sse3" => has!("sse3"),
        "ssse3" => has!("ssse3"),
        "sse4.1" => has!("sse4.1"),
        "sse4.2" => has!("sse4.2"),
        "avx" => has!("avx"),
        "avx2" => has!("avx2"),
        "bmi1" => has!("bmi1"),
        "bmi2" => has!("bmi2"),
        "f16c" => has!("f16c"),
        "fma" => has!("fma"),
        "lzcnt" => has!("lzcnt"),
        "movbe" => has!("movbe"),
        "xsave" => has!("xsave"),
        "avx512f" => has!("avx512f"),
        "avx512bw" => has!("avx512bw"),
        "avx512cd" => has!("avx512cd"),
        "avx512dq" => has!("avx512dq"),
        "avx512vl" => has!("avx512vl"),
        _ => false,
    }
}

/// Whether this CPU has `feature` (as `is_aarch64_feature_detected!` names it).
#[cfg(target_arch = "aarch64")]
fn has_feature(feature: &str) -> bool {
    use std::arch::is_aarch64_feature_detected as has;
    match feature {
        "sve" => has!("sve"),
        "sve2" => has!("sve2"),
        _ => false,
    }
}

/// No level above the baseline exists outside x86-64 and aarch64.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn has_feature(_feature: &str) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_has_its_detected_level_and_the_variable_caps_it() {
        let cpu = detected();
        assert!(missing_features(cpu).is_empty());
        assert_eq!(limit(None).unwrap().level, cpu);
        assert_eq!(limit(Some("host")).unwrap().level, CpuLevel::Baseline);
        assert_eq!(limit(Some(cpu.name())).unwrap().level, cpu);
        let err = limit(Some("x86-64-v9")).unwrap_err().to_string();
        assert!(err.contains("the levels are host, x86-64-v2"), "{err}");
        if let Some(above) = CpuLevel::ALL.into_iter().find(|l| *l > cpu) {
            let err = limit(Some(above.name())).unwrap_err().to_string();
            assert!(err.contains("lacks"), "{err}");
        }
    }
}
