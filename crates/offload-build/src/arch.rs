//! Offload architectures, chosen like clang's `--offload-arch`: `sm_80,gfx90a:xnack+,host`.

use std::fmt;
use std::sync::OnceLock;

use crate::env::Env;
use crate::error::{Error, Result};

use offload_format::target_id::{self, AmdTargetId, Sm};
pub use offload_format::triple::{AMDGCN_TRIPLE, HOST_ARCH, NVPTX_TRIPLE};

/// The triple the CPU device is built for: in a build script, the host crate's own target
/// (`TARGET`, so a cross build for `aarch64-unknown-linux-gnu` gets an aarch64 CPU image);
/// elsewhere the machine's (`<arch>-unknown-linux-gnu`).
pub fn host_triple() -> &'static str {
    static TRIPLE: OnceLock<String> = OnceLock::new();
    TRIPLE.get_or_init(|| {
        let env = Env::detect();
        env.build_script
            .then(|| env.get_untracked("TARGET"))
            .flatten()
            .unwrap_or_else(|| offload_format::triple::linux_gnu_triple(std::env::consts::ARCH))
    })
}

/// One device target of a build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OffloadArch {
    /// The host CPU as a device.
    Host,
    /// An NVIDIA GPU: `sm_NN` (compute capability N.N), `sm_90a` style suffixes included.
    Nvptx(Sm),
    /// An AMD GPU target ID (`gfx942:sramecc-:xnack+`).
    Amdgcn(AmdTargetId),
}

impl OffloadArch {
    pub fn triple(&self) -> &'static str {
        match self {
            OffloadArch::Host => host_triple(),
            OffloadArch::Nvptx(_) => NVPTX_TRIPLE,
            OffloadArch::Amdgcn(_) => AMDGCN_TRIPLE,
        }
    }

    /// The `arch` string stored with the image; AMD target IDs in canonical form.
    pub fn name(&self) -> String {
        self.to_string()
    }

    /// A file-name-safe form (`gfx942_xnack+`), as clang names device archive members.
    pub fn file_stem(&self) -> String {
        format!("{}-{}", self.triple(), self.name().replace(':', "_"))
    }
}

impl fmt::Display for OffloadArch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OffloadArch::Host => f.write_str(HOST_ARCH),
            OffloadArch::Nvptx(sm) => sm.fmt(f),
            OffloadArch::Amdgcn(id) => id.fmt(f),
        }
    }
}

/// Parses a comma-separated list (`sm_80,sm_90,gfx90a,gfx942:xnack+,host`), canonicalizes
/// AMD target IDs, removes duplicates and rejects combinations clang rejects.
/// `origin` names where the list came from, for error messages.
pub fn parse_list(list: &str, origin: &str) -> Result<Vec<OffloadArch>> {
    let mut archs: Vec<OffloadArch> = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let arch = parse_one(item, origin)?;
        if !archs.contains(&arch) {
            archs.push(arch);
        }
    }
    if archs.is_empty() {
        return Err(Error::EmptyArchList {
            origin: origin.to_owned(),
        });
    }
    check_conflicts(&archs, origin)?;
    Ok(archs)
}

fn parse_one(item: &str, origin: &str) -> Result<OffloadArch> {
    if item == HOST_ARCH || item == "cpu" {
        return Ok(OffloadArch::Host);
    }
    if item.starts_with("sm_") {
        return Sm::parse_offload_arch(item)
            .map(OffloadArch::Nvptx)
            .map_err(|_| unknown(item, origin));
    }
    if item.starts_with("gfx") {
        let id = offload_format::TargetId::parse(item).map_err(|e| Error::InvalidArch {
            name: item.to_owned(),
            origin: origin.to_owned(),
            reason: e.to_string(),
        })?;
        return AmdTargetId::from_target_id(&id)
            .map(OffloadArch::Amdgcn)
            .map_err(|_| unknown(item, origin));
    }
    Err(unknown(item, origin))
}

fn unknown(item: &str, origin: &str) -> Error {
    let mut known: Vec<&str> = vec![HOST_ARCH];
    known.extend(target_id::nvidia_offload_archs());
    known.extend(target_id::AMDGPU_PROCESSORS.iter().map(|p| p.name));
    Error::UnknownArch {
        name: item.to_owned(),
        origin: origin.to_owned(),
        known: known.join(", "),
    }
}

fn check_conflicts(archs: &[OffloadArch], origin: &str) -> Result<()> {
    let ids: Vec<offload_format::TargetId> = archs
        .iter()
        .filter_map(|a| match a {
            OffloadArch::Amdgcn(id) => Some(id.to_target_id()),
            _ => None,
        })
        .collect();
    if let Some((a, b)) = target_id::conflicting_combination(&ids) {
        return Err(Error::InvalidArch {
            name: format!("{},{}", a, b),
            origin: origin.to_owned(),
            reason: format!(
                "invalid offload arch combinations: '{a}' and '{b}' (for a specific \
                 processor, a feature should either exist in all offload archs, or not \
                 exist in any offload archs)"
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_canonicalizes_a_mixed_list() {
        let archs = parse_list("sm_80, gfx942:xnack+:sramecc-,host,sm_80", "test").unwrap();
        assert_eq!(
            archs,
            vec![
                OffloadArch::Nvptx(Sm::parse("sm_80").unwrap()),
                OffloadArch::Amdgcn(AmdTargetId::parse("gfx942:sramecc-:xnack+").unwrap()),
                OffloadArch::Host,
            ]
        );
    }

    #[test]
    fn unknown_name_lists_the_known_ones() {
        let err = parse_list("sm_80,gfx9999", "OFFLOAD_ARCH").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("`gfx9999`"), "{msg}");
        assert!(msg.contains("OFFLOAD_ARCH"), "{msg}");
        assert!(msg.contains("gfx90a") && msg.contains("sm_90"), "{msg}");
    }

    #[test]
    fn clang_conflict_rule_is_enforced() {
        let err = parse_list("gfx90a,gfx90a:xnack+", "test").unwrap_err();
        assert!(
            err.to_string()
                .contains("invalid offload arch combinations"),
            "{err}"
        );
        assert!(parse_list("gfx90a:xnack-,gfx90a:xnack+", "test").is_ok());
        assert_eq!(
            parse_list("gfx942:xnack+:sramecc-", "test").unwrap()[0].name(),
            "gfx942:sramecc-:xnack+"
        );
        assert!(parse_list("sm_120f", "test").is_err());
    }

    #[test]
    fn empty_list_is_an_error() {
        assert!(matches!(
            parse_list(" , ", "test"),
            Err(Error::EmptyArchList { .. })
        ));
    }
}
