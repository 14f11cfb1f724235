//! Bundle entry IDs, normalized as the bundler's `OffloadTargetInfo::str()`, and the rules
//! for a list of them.

use std::fmt;

use crate::error::{Error, Result};
use crate::target_id::{TargetId, conflicting_combination, is_known_offload_arch};

/// Offload kinds the bundler accepts.
pub const OFFLOAD_KINDS: &[&str] = &["host", "openmp", "hip", "hipv4"];

/// A bundle entry ID, `<kind>-<arch>-<vendor>-<os>-<env>[-<target-id>]`, normalized as the
/// bundler's `OffloadTargetInfo` does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BundleEntryId {
    /// `host`, `openmp`, `hip`, `hipv4` (others are kept but refused when bundling).
    pub kind: String,
    /// The triple's architecture, e.g. `amdgcn` or `nvptx64`.
    pub arch: String,
    /// The triple's vendor, e.g. `amd`.
    pub vendor: String,
    /// The triple's OS, e.g. `amdhsa`.
    pub os: String,
    /// The triple's environment; empty for AMDHSA triples, as the runtimes expect.
    pub env: String,
    /// The target ID, kept only when its processor is a known offload architecture.
    pub target_id: Option<String>,
}

impl BundleEntryId {
    /// Parses an ID as the bundler does: split on `-` into at most 6 parts, 5 or 6 required;
    /// the 5th part is the environment; a 6th part is the target ID, dropped when its processor
    /// is not an offload architecture clang knows.
    pub fn parse(s: &str) -> Result<BundleEntryId> {
        let parts: Vec<&str> = s.splitn(6, '-').collect();
        if parts.len() < 5 {
            return Err(Error::BundleIdMalformed { id: s.to_owned() });
        }
        let target_id = parts.get(5).and_then(|t| {
            let processor = t.split(':').next().unwrap_or_default();
            (!processor.is_empty() && is_known_offload_arch(processor)).then(|| (*t).to_owned())
        });
        let field = |s: &str| if s.is_empty() { "unknown" } else { s }.to_owned();
        let os = field(parts[3]);
        // The runtimes expect AMDHSA triples with an empty environment.
        let env = if os.starts_with("amdhsa") {
            String::new()
        } else {
            field(parts[4])
        };
        Ok(BundleEntryId {
            kind: parts[0].to_owned(),
            arch: field(parts[1]),
            vendor: field(parts[2]),
            os,
            env,
            target_id,
        })
    }

    /// Builds an ID from a kind, a triple (3 or 4 fields) and an optional target ID.
    pub fn new(kind: &str, triple: &str, target_id: Option<&str>) -> Result<BundleEntryId> {
        let mut fields: Vec<&str> = triple.splitn(4, '-').collect();
        if fields.len() < 3 {
            return Err(Error::BundleIdMalformed {
                id: format!("{kind}-{triple}"),
            });
        }
        fields.resize(4, "");
        let mut s = format!("{kind}-{}", fields.join("-"));
        if let Some(t) = target_id {
            s.push('-');
            s.push_str(t);
        }
        Self::parse(&s)
    }

    /// Whether the OS is AMDHSA (the triple is then written with 3 fields and an empty env).
    pub fn is_amdhsa(&self) -> bool {
        self.os.starts_with("amdhsa")
    }

    /// The triple as the bundler writes it: `amdgcn-amd-amdhsa-` for AMDHSA, otherwise four
    /// fields with `unknown` for empty ones.
    pub fn normalized_triple(&self) -> String {
        let f = |s: &str| {
            if s.is_empty() {
                "unknown".to_owned()
            } else {
                s.to_owned()
            }
        };
        if self.is_amdhsa() {
            format!("{}-{}-{}-", f(&self.arch), f(&self.vendor), self.os)
        } else {
            format!(
                "{}-{}-{}-{}",
                f(&self.arch),
                f(&self.vendor),
                f(&self.os),
                f(&self.env)
            )
        }
    }

    /// The triple with empty trailing fields dropped (`amdgcn-amd-amdhsa`), for display.
    pub fn triple(&self) -> String {
        let t = self.normalized_triple();
        t.trim_end_matches('-').to_owned()
    }

    /// `host` kind.
    pub fn is_host(&self) -> bool {
        self.kind == "host"
    }

    /// `hip` or `hipv4`.
    pub fn is_hip(&self) -> bool {
        self.kind == "hip" || self.kind == "hipv4"
    }

    /// The bundler's `isOffloadKindCompatible`: equal, or `hip`/`hipv4` with each other, or
    /// with `hip_openmp_compatible`, hip* with openmp.
    pub fn kind_compatible(&self, other: &BundleEntryId, hip_openmp_compatible: bool) -> bool {
        if self.kind == other.kind || (self.is_hip() && other.is_hip()) {
            return true;
        }
        hip_openmp_compatible
            && ((self.kind.starts_with("hip") && other.kind == "openmp")
                || (self.kind == "openmp" && other.kind.starts_with("hip")))
    }

    fn triple_compatible(&self, other: &BundleEntryId) -> bool {
        let norm = |s: &str| if s.is_empty() { "unknown" } else { s }.to_owned();
        let env = |id: &BundleEntryId| {
            if id.is_amdhsa() {
                String::new()
            } else {
                norm(&id.env)
            }
        };
        norm(&self.arch) == norm(&other.arch)
            && norm(&self.vendor) == norm(&other.vendor)
            && norm(&self.os) == norm(&other.os)
            && env(self) == env(other)
    }

    /// The bundler's `isCodeObjectCompatible(self, requested)`: exact match, or compatible
    /// kinds and triples and compatible target IDs (see [`TargetId::is_compatible`]).
    pub fn is_compatible(&self, requested: &BundleEntryId, hip_openmp_compatible: bool) -> bool {
        if self == requested {
            return true;
        }
        if !self.kind_compatible(requested, hip_openmp_compatible)
            || !self.triple_compatible(requested)
        {
            return false;
        }
        let (Some(co), Some(req)) = (&self.target_id, &requested.target_id) else {
            return false;
        };
        match (TargetId::parse(co), TargetId::parse(req)) {
            (Ok(co), Ok(req)) => TargetId::is_compatible(&co, &req),
            _ => false,
        }
    }
}

impl fmt::Display for BundleEntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}-{}-{}",
            self.kind,
            self.normalized_triple(),
            self.target_id.as_deref().unwrap_or("")
        )
    }
}

impl std::str::FromStr for BundleEntryId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// Checks the bundler's rules for a list of targets to bundle: valid kinds, no duplicate IDs,
/// no conflicting target-ID combination (see [`conflicting_combination`]), and exactly one `host`
/// entry unless every entry is `hip`/`hipv4` (then at most one).
pub fn check_bundle_targets(ids: &[BundleEntryId]) -> Result<()> {
    for id in ids {
        if !OFFLOAD_KINDS.contains(&id.kind.as_str()) {
            return Err(Error::BundleInvalidKind { id: id.to_string() });
        }
    }
    for (i, id) in ids.iter().enumerate() {
        if ids[..i].contains(id) {
            return Err(Error::BundleDuplicateId { id: id.to_string() });
        }
    }
    let target_ids: Vec<(TargetId, &BundleEntryId)> = ids
        .iter()
        .filter_map(|id| Some((TargetId::parse(id.target_id.as_deref()?).ok()?, id)))
        .collect();
    let only_ids: Vec<TargetId> = target_ids.iter().map(|(t, _)| t.clone()).collect();
    if let Some((a, b)) = conflicting_combination(&only_ids) {
        let find = |t: &TargetId| {
            target_ids
                .iter()
                .find(|(x, _)| x == t)
                .map(|(_, id)| id.to_string())
                .unwrap_or_default()
        };
        return Err(Error::BundleConflictingTargets {
            first: find(&a),
            second: find(&b),
        });
    }
    let hosts = ids.iter().filter(|id| id.is_host()).count();
    let all_hip = ids
        .iter()
        .filter(|id| !id.is_host())
        .all(BundleEntryId::is_hip);
    if hosts > 1 || (hosts == 0 && !all_hip) {
        return Err(Error::BundleHostCount { count: hosts });
    }
    Ok(())
}
