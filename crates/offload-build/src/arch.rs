//! Offload architectures, chosen like clang's `--offload-arch`: `sm_80,gfx90a:xnack+,host`.

use std::fmt;
use std::sync::OnceLock;

use crate::env::Env;
use crate::error::{Error, Result};

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
            .unwrap_or_else(|| {
                let arch = match std::env::consts::ARCH {
                    "riscv64" => "riscv64gc",
                    "powerpc64" => "powerpc64le",
                    arch => arch,
                };
                format!("{arch}-unknown-linux-gnu")
            })
    })
}
pub const NVPTX_TRIPLE: &str = "nvptx64-nvidia-cuda";
pub const AMDGCN_TRIPLE: &str = "amdgcn-amd-amdhsa";

/// One device target of a build.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OffloadArch {
    /// The host CPU as a device.
    Host,
    /// An NVIDIA GPU: `sm_NN` (compute capability N.N), `sm_90a` style suffixes included.
    Nvptx { sm: String },
    /// An AMD GPU target ID in canonical form (`gfx942:sramecc-:xnack+`).
    Amdgcn { target_id: String },
}

impl OffloadArch {
    pub fn triple(&self) -> &'static str {
        match self {
            OffloadArch::Host => host_triple(),
            OffloadArch::Nvptx { .. } => NVPTX_TRIPLE,
            OffloadArch::Amdgcn { .. } => AMDGCN_TRIPLE,
        }
    }

    /// The `arch` string stored with the image.
    pub fn name(&self) -> &str {
        match self {
            OffloadArch::Host => "host",
            OffloadArch::Nvptx { sm } => sm,
            OffloadArch::Amdgcn { target_id } => target_id,
        }
    }

    /// A file-name-safe form (`gfx942_xnack+`), as clang names device archive members.
    pub fn file_stem(&self) -> String {
        format!("{}-{}", self.triple(), self.name().replace(':', "_"))
    }
}

impl fmt::Display for OffloadArch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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
    if item == "host" || item == "cpu" {
        return Ok(OffloadArch::Host);
    }
    if item.starts_with("sm_") {
        return if offload_format::target_id::NVIDIA_SM_ARCHS.contains(&item) {
            Ok(OffloadArch::Nvptx {
                sm: item.to_owned(),
            })
        } else {
            Err(unknown(item, origin))
        };
    }
    if item.starts_with("gfx") {
        let id = offload_format::TargetId::parse(item).map_err(|e| Error::InvalidArch {
            name: item.to_owned(),
            origin: origin.to_owned(),
            reason: e.to_string(),
        })?;
        if offload_format::target_id::amdgpu_processor(id.processor()).is_none() {
            return Err(unknown(item, origin));
        }
        return Ok(OffloadArch::Amdgcn {
            target_id: id.canonical(),
        });
    }
    Err(unknown(item, origin))
}

fn unknown(item: &str, origin: &str) -> Error {
    let mut known: Vec<&str> = vec!["host"];
    known.extend(offload_format::target_id::NVIDIA_SM_ARCHS.iter().copied());
    known.extend(
        offload_format::target_id::AMDGPU_PROCESSORS
            .iter()
            .map(|p| p.name),
    );
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
            OffloadArch::Amdgcn { target_id } => offload_format::TargetId::parse(target_id).ok(),
            _ => None,
        })
        .collect();
    if let Some((a, b)) = offload_format::target_id::conflicting_combination(&ids) {
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
                OffloadArch::Nvptx { sm: "sm_80".into() },
                OffloadArch::Amdgcn {
                    target_id: "gfx942:sramecc-:xnack+".into()
                },
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
    }

    #[test]
    fn empty_list_is_an_error() {
        assert!(matches!(
            parse_list(" , ", "test"),
            Err(Error::EmptyArchList { .. })
        ));
    }
}
