//! Where the projects `new` and `init` write get `offload-rt` and `offload-build` from
//! (`--source registry | git=URL[@TAG_OR_COMMIT] | path=DIR`). By default, from where the running
//! `cargo-offload` came: the registry or the git repository `cargo install` recorded, else the
//! checkout it was built or installed from, named by a path relative to each manifest so that
//! the project can move with the checkout beside it. Never an absolute path the user did not
//! write.

use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

/// The crates' version: every crate of the workspace shares it.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where the offload crates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DependencySource {
    /// A registry (crates.io, or what `[source.crates-io]` is replaced with): `"0.1.0"`.
    Registry,
    /// A git repository holding the workspace, at a tag, branch or commit when one is given.
    Git { url: String, reference: GitRef },
    /// A checkout of the workspace (the directory holding `crates/offload-rt`). An absolute
    /// path is written as it is; a relative one (to the current directory) is written
    /// relative to each manifest.
    Path { checkout: PathBuf },
}

/// The revision of a git source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitRef {
    /// The default branch.
    Default,
    /// `tag = "…"`.
    Tag(String),
    /// `branch = "…"`.
    Branch(String),
    /// `rev = "…"`: a commit, or any reference cargo can fetch.
    Rev(String),
}

/// Why a `--source` value was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SourceError {
    #[error(
        "`{0}` is not a dependency source: use `registry`, `git=URL[@TAG_OR_COMMIT]` or `path=DIR` (a checkout of cargo-offload)"
    )]
    Unknown(String),
    #[error("`--source {0}` names no {1}")]
    Empty(String, &'static str),
    #[error(
        "`--source path={dir}`: {dir} is not a checkout of cargo-offload (it has no crates/offload-rt/Cargo.toml)"
    )]
    NotACheckout { dir: String },
}

impl FromStr for DependencySource {
    type Err = SourceError;

    fn from_str(text: &str) -> Result<Self, SourceError> {
        if text == "registry" {
            return Ok(DependencySource::Registry);
        }
        if let Some(rest) = text.strip_prefix("git=") {
            // `@` begins the revision only after the URL's own `user@host` part.
            let after_scheme = rest.find("://").map_or(0, |i| i + 3);
            let host_end = rest[after_scheme..]
                .find('/')
                .map_or(rest.len(), |i| after_scheme + i);
            let (url, reference) = match rest[host_end..].rfind('@') {
                Some(at) => {
                    let at = host_end + at;
                    let rev = &rest[at + 1..];
                    if rev.is_empty() {
                        return Err(SourceError::Empty(text.to_owned(), "revision after `@`"));
                    }
                    let is_commit = rev.len() >= 7 && rev.chars().all(|c| c.is_ascii_hexdigit());
                    let reference = if is_commit {
                        GitRef::Rev(rev.to_owned())
                    } else {
                        GitRef::Tag(rev.to_owned())
                    };
                    (&rest[..at], reference)
                }
                None => (rest, GitRef::Default),
            };
            if url.is_empty() {
                return Err(SourceError::Empty(text.to_owned(), "URL"));
            }
            return Ok(DependencySource::Git {
                url: url.to_owned(),
                reference,
            });
        }
        if let Some(dir) = text.strip_prefix("path=") {
            if dir.is_empty() {
                return Err(SourceError::Empty(text.to_owned(), "directory"));
            }
            return Ok(DependencySource::Path {
                checkout: PathBuf::from(dir),
            });
        }
        Err(SourceError::Unknown(text.to_owned()))
    }
}

impl fmt::Display for DependencySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DependencySource::Registry => write!(f, "the registry (version {VERSION})"),
            DependencySource::Git { url, reference } => {
                write!(f, "{url}")?;
                match reference {
                    GitRef::Default => Ok(()),
                    GitRef::Tag(r) | GitRef::Branch(r) | GitRef::Rev(r) => write!(f, " at {r}"),
                }
            }
            DependencySource::Path { checkout } => write!(f, "the checkout {}", checkout.display()),
        }
    }
}

/// A dependency line's value for one manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Crate {
    /// `offload-rt` with its default (host) features.
    Runtime,
    /// `offload-rt` for a kernel crate: `default-features = false`.
    RuntimeForKernels,
    /// `offload-build` for a build script.
    Build,
    /// `offload-build` with its `hip` feature (HIP sources for AMD GPUs).
    BuildWithHip,
}

impl Crate {
    fn name(self) -> &'static str {
        match self {
            Crate::Runtime | Crate::RuntimeForKernels => "offload-rt",
            Crate::Build | Crate::BuildWithHip => "offload-build",
        }
    }
}

impl DependencySource {
    /// Checks what can be checked before anything is written: a path source is a checkout.
    pub(crate) fn check(&self) -> Result<(), SourceError> {
        if let DependencySource::Path { checkout } = self
            && !checkout.join("crates/offload-rt/Cargo.toml").is_file()
        {
            return Err(SourceError::NotACheckout {
                dir: checkout.display().to_string(),
            });
        }
        Ok(())
    }

    /// The TOML inline value of `krate`'s dependency in the manifest in `manifest_dir` (the
    /// directory, which need not exist yet).
    pub(crate) fn spec(&self, krate: Crate, manifest_dir: &Path) -> String {
        let defaults_off = krate == Crate::RuntimeForKernels;
        let hip = krate == Crate::BuildWithHip;
        let mut fields = match self {
            DependencySource::Registry => {
                if !defaults_off && !hip {
                    return format!("\"{VERSION}\"");
                }
                vec![format!("version = \"{VERSION}\"")]
            }
            DependencySource::Git { url, reference } => {
                let mut fields = vec![format!("git = {}", toml_string(url))];
                match reference {
                    GitRef::Default => {}
                    GitRef::Tag(t) => fields.push(format!("tag = {}", toml_string(t))),
                    GitRef::Branch(b) => fields.push(format!("branch = {}", toml_string(b))),
                    GitRef::Rev(r) => fields.push(format!("rev = {}", toml_string(r))),
                }
                fields
            }
            DependencySource::Path { checkout } => {
                let target = checkout.join("crates").join(krate.name());
                let path = if checkout.is_absolute() {
                    target
                } else {
                    relative_to(&absolute(&target), &absolute(manifest_dir))
                };
                vec![format!(
                    "path = {}",
                    toml_string(&path.to_string_lossy().replace('\\', "/"))
                )]
            }
        };
        if defaults_off {
            fields.push("default-features = false".to_owned());
        }
        if hip {
            fields.push("features = [\"hip\"]".to_owned());
        }
        format!("{{ {} }}", fields.join(", "))
    }
}

/// The source the running `cargo-offload` stands for, and a line saying why.
pub(crate) fn default_source() -> (DependencySource, String) {
    let exe = std::env::current_exe().ok();
    if let Some(exe) = &exe
        && let Some((source, record)) = install_record(exe)
    {
        return (
            source,
            format!(
                "as `cargo install` recorded for {}: {record}",
                exe.display()
            ),
        );
    }
    // Built in a checkout: its crates.
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if checkout.join("crates/offload-rt/Cargo.toml").is_file() {
        let checkout = checkout.canonicalize().unwrap_or(checkout);
        let checkout = relative_to(&checkout, &absolute(Path::new(".")));
        return (
            DependencySource::Path { checkout },
            "the checkout this cargo-offload was built from".to_owned(),
        );
    }
    (
        DependencySource::Registry,
        "the version of this cargo-offload".to_owned(),
    )
}

/// What `cargo install` recorded for the binary `exe`, when it lies in an install root's
/// `bin/`: cargo's `.crates2.json` there names each installed package with its source.
fn install_record(exe: &Path) -> Option<(DependencySource, String)> {
    let bin = exe.parent()?;
    if bin.file_name()? != "bin" {
        return None;
    }
    let text = std::fs::read_to_string(bin.parent()?.join(".crates2.json")).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    let exe_name = exe.file_name()?.to_str()?;
    let (key, _) = json
        .get("installs")?
        .as_object()?
        .iter()
        .find(|(key, entry)| {
            key.starts_with("cargo-offload ")
                && entry
                    .get("bins")
                    .and_then(|b| b.as_array())
                    .is_some_and(|bins| bins.iter().any(|b| b.as_str() == Some(exe_name)))
        })?;
    let source = parse_source_id(key)?;
    Some((source, key.clone()))
}

/// The source of a `.crates2.json` key, `cargo-offload 0.1.0 (<source id>)`.
fn parse_source_id(key: &str) -> Option<DependencySource> {
    let id = key.split_once(" (")?.1.strip_suffix(')')?;
    let (kind, rest) = id.split_once('+')?;
    match kind {
        "registry" | "sparse" => Some(DependencySource::Registry),
        "git" => {
            let url_and_query = rest.split('#').next()?;
            let (url, query) = match url_and_query.split_once('?') {
                Some((url, query)) => (url, Some(query)),
                None => (url_and_query, None),
            };
            let reference = match query.and_then(|q| q.split_once('=')) {
                Some(("tag", t)) => GitRef::Tag(t.to_owned()),
                Some(("branch", b)) => GitRef::Branch(b.to_owned()),
                Some(("rev", r)) => GitRef::Rev(r.to_owned()),
                _ => match rest.split_once('#') {
                    Some((_, commit)) if !commit.is_empty() => GitRef::Rev(commit.to_owned()),
                    _ => GitRef::Default,
                },
            };
            Some(DependencySource::Git {
                url: url.to_owned(),
                reference,
            })
        }
        "path" => {
            // The package's directory, `<checkout>/crates/cargo-offload`.
            let dir = PathBuf::from(rest.strip_prefix("file://")?);
            let checkout = dir.parent()?.parent()?;
            checkout
                .join("crates/offload-rt/Cargo.toml")
                .is_file()
                .then(|| DependencySource::Path {
                    checkout: relative_to(checkout, &absolute(Path::new("."))),
                })
        }
        _ => None,
    }
}

/// `path` made absolute against the current directory, `.` and `..` resolved lexically, and
/// the longest existing ancestor's symbolic links resolved (so that two spellings of one
/// place compare equal).
fn absolute(path: &Path) -> PathBuf {
    let joined = std::env::current_dir()
        .map(|cwd| cwd.join(path))
        .unwrap_or_else(|_| path.to_owned());
    let mut lexical = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::ParentDir => {
                lexical.pop();
            }
            Component::CurDir => {}
            other => lexical.push(other),
        }
    }
    let mut existing = lexical.as_path();
    let mut rest = Vec::new();
    while !existing.exists() {
        let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
            return lexical;
        };
        rest.push(name.to_owned());
        existing = parent;
    }
    let mut resolved = existing
        .canonicalize()
        .unwrap_or_else(|_| existing.to_owned());
    resolved.extend(rest.iter().rev());
    resolved
}

/// `target` relative to the directory `base`, both absolute.
fn relative_to(target: &Path, base: &Path) -> PathBuf {
    let target: Vec<_> = target.components().collect();
    let base: Vec<_> = base.components().collect();
    let common = target.iter().zip(&base).take_while(|(a, b)| a == b).count();
    let mut relative: PathBuf = base[common..].iter().map(|_| "..").collect();
    relative.extend(target[common..].iter().map(|c| c.as_os_str()));
    if relative.as_os_str().is_empty() {
        relative.push(".");
    }
    relative
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    toml_edit::Value::from(text).to_string().trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse() {
        assert_eq!("registry".parse(), Ok(DependencySource::Registry));
        assert_eq!(
            "git=https://example.org/o/cargo-offload@v0.1.0".parse(),
            Ok(DependencySource::Git {
                url: "https://example.org/o/cargo-offload".into(),
                reference: GitRef::Tag("v0.1.0".into()),
            })
        );
        assert_eq!(
            "git=https://example.org/o/cargo-offload@0123abcd".parse(),
            Ok(DependencySource::Git {
                url: "https://example.org/o/cargo-offload".into(),
                reference: GitRef::Rev("0123abcd".into()),
            })
        );
        assert_eq!(
            "git=ssh://git@example.org/o/cargo-offload".parse(),
            Ok(DependencySource::Git {
                url: "ssh://git@example.org/o/cargo-offload".into(),
                reference: GitRef::Default,
            })
        );
        assert_eq!(
            "path=../cargo-offload".parse(),
            Ok(DependencySource::Path {
                checkout: "../cargo-offload".into()
            })
        );
        assert!(matches!(
            "crates.io".parse::<DependencySource>(),
            Err(SourceError::Unknown(_))
        ));
        assert!(matches!(
            "git=".parse::<DependencySource>(),
            Err(SourceError::Empty(..))
        ));
        assert!(matches!(
            "git=https://example.org/x@".parse::<DependencySource>(),
            Err(SourceError::Empty(..))
        ));
        assert!(matches!(
            "path=".parse::<DependencySource>(),
            Err(SourceError::Empty(..))
        ));
    }

    #[test]
    fn registry_and_git_specs() {
        let dir = Path::new("/nowhere/app");
        let registry = DependencySource::Registry;
        assert_eq!(registry.spec(Crate::Runtime, dir), format!("\"{VERSION}\""));
        assert_eq!(
            registry.spec(Crate::RuntimeForKernels, dir),
            format!("{{ version = \"{VERSION}\", default-features = false }}")
        );
        let git = DependencySource::Git {
            url: "https://example.org/o/cargo-offload".into(),
            reference: GitRef::Tag("v0.1.0".into()),
        };
        assert_eq!(
            git.spec(Crate::Build, dir),
            "{ git = \"https://example.org/o/cargo-offload\", tag = \"v0.1.0\" }"
        );
        assert_eq!(
            registry.spec(Crate::BuildWithHip, dir),
            format!("{{ version = \"{VERSION}\", features = [\"hip\"] }}")
        );
        assert_eq!(
            git.spec(Crate::RuntimeForKernels, dir),
            "{ git = \"https://example.org/o/cargo-offload\", tag = \"v0.1.0\", default-features = false }"
        );
    }

    #[test]
    fn relative_paths_are_relative_to_each_manifest() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("co/crates/offload-rt")).unwrap();
        std::fs::write(root.join("co/crates/offload-rt/Cargo.toml"), "").unwrap();
        let checkout = relative_to(&root.join("co"), &absolute(Path::new(".")));
        let source = DependencySource::Path { checkout };
        source.check().unwrap();
        let app = root.join("work/app");
        assert_eq!(
            source.spec(Crate::Runtime, &app),
            "{ path = \"../../co/crates/offload-rt\" }"
        );
        assert_eq!(
            source.spec(Crate::RuntimeForKernels, &app.join("kernels")),
            "{ path = \"../../../co/crates/offload-rt\", default-features = false }"
        );
        let absolute = DependencySource::Path {
            checkout: root.join("co"),
        };
        assert_eq!(
            absolute.spec(Crate::Build, &app),
            format!(
                "{{ path = \"{}\" }}",
                root.join("co/crates/offload-build").display()
            )
        );
        let not_a_checkout = DependencySource::Path {
            checkout: root.join("work"),
        };
        assert!(matches!(
            not_a_checkout.check(),
            Err(SourceError::NotACheckout { .. })
        ));
    }

    #[test]
    fn install_records_name_their_source() {
        assert_eq!(
            parse_source_id(
                "cargo-offload 0.1.0 (registry+https://github.com/rust-lang/crates.io-index)"
            ),
            Some(DependencySource::Registry)
        );
        assert_eq!(
            parse_source_id(
                "cargo-offload 0.1.0 (git+https://example.org/o/cargo-offload?tag=v0.1.0#0123abcd)"
            ),
            Some(DependencySource::Git {
                url: "https://example.org/o/cargo-offload".into(),
                reference: GitRef::Tag("v0.1.0".into()),
            })
        );
        assert_eq!(
            parse_source_id(
                "cargo-offload 0.1.0 (git+https://example.org/o/cargo-offload#0123abcd)"
            ),
            Some(DependencySource::Git {
                url: "https://example.org/o/cargo-offload".into(),
                reference: GitRef::Rev("0123abcd".into()),
            })
        );
        assert_eq!(parse_source_id("cargo-offload 0.1.0"), None);
    }

    #[test]
    fn relative_to_walks_up_and_down() {
        assert_eq!(
            relative_to(Path::new("/a/b/c"), Path::new("/a/d")),
            PathBuf::from("../b/c")
        );
        assert_eq!(
            relative_to(Path::new("/a"), Path::new("/a")),
            PathBuf::from(".")
        );
    }
}
