//! Offload architectures, chosen like clang's `--offload-arch`: `sm_80,gfx90a:xnack+,host`.

use std::fmt;
use std::sync::OnceLock;

use crate::env::{Env, NATIVE_NONE, OFFLOAD_NATIVE_ARCH};
use crate::error::{Error, Result};

use offload_format::target_id::{self, AmdTargetId, Sm};
pub use offload_format::triple::{AMDGCN_TRIPLE, HOST_ARCH, NVPTX_TRIPLE};
use offload_format::{CpuLevel, DeviceFamily};

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
    /// The host CPU as a device, its image built for one level of the instruction set:
    /// `host` (the baseline) or `x86-64-v2`/`-v3`/`-v4`.
    Host(CpuLevel),
    /// An NVIDIA GPU: `sm_NN` (compute capability N.N), `sm_90a` style suffixes included.
    Nvptx(Sm),
    /// An AMD GPU target ID (`gfx942:sramecc-:xnack+`).
    Amdgcn(AmdTargetId),
}

impl OffloadArch {
    /// The CPU device at its baseline level (`host`).
    pub const HOST: OffloadArch = OffloadArch::Host(CpuLevel::Baseline);

    /// The device family: every per-family fact (triple, offload kind, nested-build
    /// processor) comes from it.
    pub fn family(&self) -> DeviceFamily {
        match self {
            OffloadArch::Host(_) => DeviceFamily::Cpu,
            OffloadArch::Nvptx(_) => DeviceFamily::Nvidia,
            OffloadArch::Amdgcn(_) => DeviceFamily::Amd,
        }
    }

    /// The target triple the architecture's images are built for (the host's own for `host`).
    pub fn triple(&self) -> &'static str {
        self.family().device_triple().unwrap_or_else(host_triple)
    }

    /// Whether the architecture is a GPU's.
    pub fn is_gpu(&self) -> bool {
        self.family().is_gpu()
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
            OffloadArch::Host(level) => level.fmt(f),
            OffloadArch::Nvptx(sm) => sm.fmt(f),
            OffloadArch::Amdgcn(id) => id.fmt(f),
        }
    }
}

/// The name that stands for this machine's GPUs, as in clang's `--offload-arch=native`.
pub const NATIVE: &str = "native";

fn items(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// Whether `list` names `NATIVE`.
pub fn mentions_native(list: &str) -> bool {
    items(list).any(|item| item == NATIVE)
}

/// What `NATIVE` stands for where a list names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Native {
    /// The GPUs found; none makes `native` stand for `host`.
    Found(Vec<OffloadArch>),
    /// Nothing could probe them here (the reason, for the note): `native` stands for `host`.
    NotProbed(String),
}

/// An architecture list with [`NATIVE`] replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The architectures, `native` replaced by those found.
    pub archs: Vec<OffloadArch>,
    /// One line saying that `native` found no GPU and stands for `host`.
    pub note: Option<String>,
}

/// Parses a comma-separated list (`sm_80,sm_90,gfx90a,gfx942:xnack+,host`), canonicalizes
/// AMD target IDs, removes duplicates and rejects combinations clang rejects.
/// `origin` names where the list came from, for error messages. `native` is refused here:
/// `parse_list_with_native` resolves it.
pub fn parse_list(list: &str, origin: &str) -> Result<Vec<OffloadArch>> {
    parse_list_with_native(list, origin, || {
        Err(Error::InvalidArch {
            name: NATIVE.to_owned(),
            origin: origin.to_owned(),
            reason: "`native` (the GPUs of the machine) is taken by `cargo offload build`, `run` \
                     and `test` and by build scripts; name the architectures here"
                .to_owned(),
        })
    })
    .map(|resolved| resolved.archs)
}

/// [`parse_list`], with `native` standing for the GPUs `native()` gives (asked only when the
/// list names it), and for `host` when they are none, with a note: where clang stops
/// ("cannot determine … architecture"), a build here still has the CPU device.
pub fn parse_list_with_native(
    list: &str,
    origin: &str,
    native: impl FnOnce() -> Result<Native>,
) -> Result<Resolved> {
    parse_list_for_triple(list, origin, host_triple(), native)
}

/// `parse_list_with_native` for a build whose CPU device is `triple` (cargo's `--target`),
/// which the CPU levels of the list must belong to.
pub fn parse_list_for_triple(
    list: &str,
    origin: &str,
    triple: &str,
    native: impl FnOnce() -> Result<Native>,
) -> Result<Resolved> {
    let (gpus, note) = if mentions_native(list) {
        let (gpus, why) = match native()? {
            Native::Found(gpus) => (gpus, "no GPU found".to_owned()),
            Native::NotProbed(why) => (Vec::new(), why),
        };
        let note = gpus
            .is_empty()
            .then(|| format!("`{NATIVE}` in {origin}: {why}; building for `{HOST_ARCH}`"));
        (gpus, note)
    } else {
        (Vec::new(), None)
    };
    let mut archs: Vec<OffloadArch> = Vec::new();
    for item in items(list) {
        let expanded = match item {
            NATIVE if gpus.is_empty() => vec![OffloadArch::HOST],
            NATIVE => gpus.clone(),
            _ => vec![parse_one(item, origin, triple)?],
        };
        for arch in expanded {
            if !archs.contains(&arch) {
                archs.push(arch);
            }
        }
    }
    // A level's image runs only where the CPU has the level: the baseline comes with it, for
    // the CPUs that do not.
    let first_host = archs.iter().position(|a| !a.is_gpu());
    if let Some(at) = first_host
        && !archs.contains(&OffloadArch::HOST)
    {
        archs.insert(at, OffloadArch::HOST);
    }
    if archs.is_empty() {
        return Err(Error::EmptyArchList {
            origin: origin.to_owned(),
        });
    }
    check_conflicts(&archs, origin)?;
    Ok(Resolved { archs, note })
}

/// What `native` stands for in a build script: [`OFFLOAD_NATIVE_ARCH`], the GPUs `cargo
/// offload` found (it probes them through offload-rt's drivers, which a build script does
/// not link); unset, `native` stands for `host`.
pub fn native_from_env(env: &Env) -> Result<Native> {
    match env.get(OFFLOAD_NATIVE_ARCH) {
        None => Ok(Native::NotProbed(format!(
            "the GPUs are probed by `cargo offload`, and {OFFLOAD_NATIVE_ARCH} is unset (this \
             build did not run through it)"
        ))),
        Some(value) if value.trim() == NATIVE_NONE => Ok(Native::Found(Vec::new())),
        Some(value) => parse_list(
            &value,
            &format!("the {OFFLOAD_NATIVE_ARCH} environment variable"),
        )
        .map(Native::Found),
    }
}

/// The GPU architectures a probe reported (`sm_80`, `gfx90a:sramecc+:xnack-`), parsed, each
/// once; those this build cannot target are left out, each with a note.
pub fn parse_found(names: &[String]) -> (Vec<OffloadArch>, Vec<String>) {
    let mut archs = Vec::new();
    let mut notes = Vec::new();
    for name in names {
        match parse_one(name, "the GPUs found", host_triple()) {
            Ok(OffloadArch::Host(_)) | Err(_) => notes.push(format!(
                "`{NATIVE}`: a GPU of this machine is `{name}`, which is no offload architecture \
                 this build knows; left out"
            )),
            Ok(arch) if !archs.contains(&arch) => archs.push(arch),
            Ok(_) => {}
        }
    }
    (archs, notes)
}

/// One architecture as an image names it (`sm_80`, `gfx942:xnack+`, `host`, `x86-64-v3`):
/// unlike [`parse_list`], a CPU level comes alone, without the baseline a list adds.
pub fn parse_arch(name: &str, origin: &str) -> Result<OffloadArch> {
    parse_one(name.trim(), origin, host_triple())
}

fn parse_one(item: &str, origin: &str, triple: &str) -> Result<OffloadArch> {
    if item == HOST_ARCH || item == "cpu" {
        return Ok(OffloadArch::HOST);
    }
    if let Some(level) = CpuLevel::from_arch(item) {
        return match level.cpu_arch() {
            Some(arch) if !triple.starts_with(&format!("{arch}-")) => Err(Error::InvalidArch {
                name: item.to_owned(),
                origin: origin.to_owned(),
                reason: format!(
                    "a level of {arch} CPUs, and this build's CPU device is {triple}; \
                     `{HOST_ARCH}` is the baseline of every CPU"
                ),
            }),
            _ => Ok(OffloadArch::Host(level)),
        };
    }
    match DeviceFamily::of_gpu_arch_name(item) {
        Some(DeviceFamily::Nvidia) => Sm::parse_offload_arch(item)
            .map(OffloadArch::Nvptx)
            .map_err(|_| unknown(item, origin)),
        Some(DeviceFamily::Amd) => {
            let id = offload_format::TargetId::parse(item).map_err(|e| Error::InvalidArch {
                name: item.to_owned(),
                origin: origin.to_owned(),
                reason: e.to_string(),
            })?;
            AmdTargetId::from_target_id(&id)
                .map(OffloadArch::Amdgcn)
                .map_err(|_| unknown(item, origin))
        }
        Some(DeviceFamily::Cpu) | None => Err(unknown(item, origin)),
    }
}

fn unknown(item: &str, origin: &str) -> Error {
    let nvidia: Vec<&str> = target_id::nvidia_offload_archs().collect();
    let amd: Vec<&str> = target_id::AMDGPU_PROCESSORS
        .iter()
        .map(|p| p.name)
        .collect();
    let family = |names: &[&str], vendor: &str| match (names.first(), names.last()) {
        (Some(first), Some(last)) => format!("{} {vendor} ({first} … {last})", names.len()),
        _ => String::new(),
    };
    let levels: Vec<&str> = CpuLevel::ALL[1..].iter().map(|l| l.name()).collect();
    let known = format!(
        "{HOST_ARCH}, {NATIVE}, CPU levels ({}), {}, {}",
        levels.join(", "),
        family(&nvidia, "NVIDIA `sm_XX`"),
        family(&amd, "AMD `gfxNNN`")
    );
    let levels = CpuLevel::ALL.into_iter().map(CpuLevel::name);
    let candidates = levels.chain([NATIVE]).chain(nvidia).chain(amd);
    Error::UnknownArch {
        name: item.to_owned(),
        origin: origin.to_owned(),
        suggestion: closest(item, candidates).map(str::to_owned),
        known,
    }
}

/// The candidate closest to `name` (case and `_`/`-` aside, then by edit distance), if it is
/// within two edits.
fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let squash = |s: &str| -> String {
        s.chars()
            .filter(|c| !matches!(c, '_' | '-'))
            .flat_map(char::to_lowercase)
            .collect()
    };
    let wanted = squash(name);
    candidates
        .map(|c| {
            let squashed = squash(c);
            let distance = if squashed == wanted {
                0
            } else {
                1 + edit_distance(&squashed, &wanted)
            };
            (distance, c)
        })
        .filter(|&(d, _)| d <= 2)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// Edit distance between `a` and `b` by characters, a swap of two neighbours counting as one
/// edit (optimal string alignment).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
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
    fn a_misspelt_architecture_gets_a_suggestion_and_a_short_list() {
        for (typo, meant) in [
            ("sm80", "sm_80"),
            ("SM_90", "sm_90"),
            ("gfx90A", "gfx90a"),
            ("gfx9422", "gfx942"),
            ("hots", "host"),
            ("natve", "native"),
        ] {
            let err = parse_list(typo, "--offload-arch").unwrap_err();
            let text = err.to_string();
            assert!(
                text.contains(&format!("did you mean `{meant}`?")),
                "{typo}: {text}"
            );
            assert!(text.len() < 300, "{typo}: {} bytes: {text}", text.len());
        }
        let text = parse_list("quantum", "--offload-arch")
            .unwrap_err()
            .to_string();
        assert!(!text.contains("did you mean"), "{text}");
        assert!(
            text.contains("NVIDIA `sm_XX`") && text.contains("AMD `gfxNNN`"),
            "{text}"
        );
    }

    #[test]
    fn parses_and_canonicalizes_a_mixed_list() {
        let archs = parse_list("sm_80, gfx942:xnack+:sramecc-,host,sm_80", "test").unwrap();
        assert_eq!(
            archs,
            vec![
                OffloadArch::Nvptx(Sm::parse("sm_80").unwrap()),
                OffloadArch::Amdgcn(AmdTargetId::parse("gfx942:sramecc-:xnack+").unwrap()),
                OffloadArch::HOST,
            ]
        );
    }

    #[test]
    fn cpu_levels_are_architectures_and_bring_the_baseline() {
        let v3 = OffloadArch::Host(CpuLevel::X86_64V3);
        let v4 = OffloadArch::Host(CpuLevel::X86_64V4);
        if host_triple().starts_with("x86_64-") {
            let sm80 = OffloadArch::Nvptx(Sm::parse("sm_80").unwrap());
            assert_eq!(
                parse_list("sm_80,x86-64-v4,x86-64-v3", "test").unwrap(),
                vec![sm80, OffloadArch::HOST, v4, v3]
            );
            assert_eq!(
                parse_list("x86-64-v3,host", "test").unwrap(),
                vec![v3, OffloadArch::HOST]
            );
            assert_eq!(v3.name(), "x86-64-v3");
            assert_eq!(parse_arch("x86-64-v3", "an image").unwrap(), v3);
            assert_eq!(v3.triple(), host_triple());
            assert_ne!(v3.file_stem(), OffloadArch::HOST.file_stem());
        } else {
            let err = parse_list("x86-64-v3", "test").unwrap_err().to_string();
            assert!(err.contains("a level of x86_64 CPUs"), "{err}");
        }
        let err = parse_list("x86-64-v5", "test").unwrap_err().to_string();
        assert!(err.contains("did you mean `x86-64-v"), "{err}");
    }

    #[test]
    fn unknown_name_lists_the_known_ones() {
        let err = parse_list("sm_80,gfx9999", "OFFLOAD_ARCH").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("`gfx9999`"), "{msg}");
        assert!(msg.contains("OFFLOAD_ARCH"), "{msg}");
        assert!(msg.contains("NVIDIA `sm_XX` (sm_20"), "{msg}");
        assert!(msg.contains("AMD `gfxNNN` (gfx600"), "{msg}");
        assert!(msg.contains("host, native"), "{msg}");
        assert!(
            msg.contains("CPU levels (x86-64-v2, x86-64-v3, x86-64-v4, aarch64-sve, aarch64-sve2)"),
            "{msg}"
        );
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
    fn native_stands_for_the_gpus_found_deduplicated_where_it_stands() {
        let sm80 = OffloadArch::Nvptx(Sm::parse("sm_80").unwrap());
        let gfx = OffloadArch::Amdgcn(AmdTargetId::parse("gfx90a:sramecc+:xnack-").unwrap());
        let resolved = parse_list_with_native("host,native,sm_80", "test", || {
            Ok(Native::Found(vec![sm80, gfx]))
        })
        .unwrap();
        assert_eq!(resolved.archs, vec![OffloadArch::HOST, sm80, gfx]);
        assert_eq!(resolved.note, None);
        let mut asked = false;
        parse_list_with_native("sm_80", "test", || {
            asked = true;
            Ok(Native::Found(Vec::new()))
        })
        .unwrap();
        assert!(
            !asked,
            "the GPUs are probed only for a list naming `native`"
        );
    }

    #[test]
    fn native_without_a_gpu_is_host_with_a_note_never_an_error() {
        let resolved =
            parse_list_with_native("native", "OFFLOAD_ARCH", || Ok(Native::Found(Vec::new())))
                .unwrap();
        assert_eq!(resolved.archs, vec![OffloadArch::HOST]);
        assert_eq!(
            resolved.note.as_deref(),
            Some("`native` in OFFLOAD_ARCH: no GPU found; building for `host`")
        );
        let resolved = parse_list_with_native("native,host", "x", || {
            Ok(Native::NotProbed("nothing probed the GPUs".to_owned()))
        })
        .unwrap();
        assert_eq!(resolved.archs, vec![OffloadArch::HOST]);
        assert_eq!(
            resolved.note.as_deref(),
            Some("`native` in x: nothing probed the GPUs; building for `host`")
        );
    }

    #[test]
    fn native_where_it_cannot_be_resolved_is_a_typed_error() {
        let err = parse_list("sm_80,native", "the bundle").unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArch { name, origin, .. } if name == "native" && origin == "the bundle"),
            "{err}"
        );
        // A list naming `native` with a GPU that conflicts with another entry gets clang's rule.
        let gfx = OffloadArch::Amdgcn(AmdTargetId::parse("gfx90a:xnack-").unwrap());
        let err = parse_list_with_native("gfx90a,native", "test", || Ok(Native::Found(vec![gfx])))
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("invalid offload arch combinations"),
            "{err}"
        );
    }

    #[test]
    fn found_names_are_parsed_and_unknown_ones_left_out_with_a_note() {
        let names = [
            "sm_80",
            "gfx90a:xnack-:sramecc+",
            "sm_80",
            "sm_1234",
            "host",
        ]
        .map(str::to_owned);
        let (archs, notes) = parse_found(&names);
        assert_eq!(
            archs.iter().map(OffloadArch::name).collect::<Vec<_>>(),
            ["sm_80", "gfx90a:sramecc+:xnack-"]
        );
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("`sm_1234`"), "{notes:?}");
    }

    #[test]
    fn empty_list_is_an_error() {
        assert!(matches!(
            parse_list(" , ", "test"),
            Err(Error::EmptyArchList { .. })
        ));
    }
}
