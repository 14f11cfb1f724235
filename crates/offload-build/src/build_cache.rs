//! A cache of nested builds' units shared by every project on the machine, so a new project's
//! first device build does not rebuild `core` (and `compiler_builtins`, `offload-rt`, …) for
//! each GPU target when another project already built them with the same toolchain and flags.
//!
//! Cargo names each unit of a target directory by a hash of everything that went into it
//! (package, version, source, features, profile, target, flags, rustc): the unit
//! `core-ad5cc240d8901ad8` of one project's nested build is the one another project's would
//! build, as long as its sources cannot change under the same name: those of the toolchain's
//! `rust-src` (for `-Zbuild-std`) and of crates.io or git dependencies, unpacked under
//! `CARGO_HOME` once and for all. A path dependency's name stays when its files are edited, so
//! units compiled from any other file are never cached, the kernel crates among them.
//!
//! So the cache holds units by that name: after a nested build, each unit that is not yet
//! cached is copied in (outputs first, its fingerprint last, each renamed into place, so a
//! reader never sees half a unit); before one, each cached unit the target directory lacks is
//! copied out, modification times kept, and cargo finds it fresh. A unit cargo would build
//! differently has another name and is simply not used. Compiled outputs (`.rlib`, `.rmeta`,
//! `.so`) are hard-linked rather than copied where the file system allows; one build stores
//! at a time (a lock of the cache), and none seeds while one stores.
//!
//! Each unit's files are recorded with their SHA-256 when stored; a cached unit whose files
//! are not exactly those (changed since, or an entry the cache did not write) is refused.
//!
//! Location: [`OFFLOAD_BUILD_CACHE`], else `$XDG_CACHE_HOME/cargo-offload/nested`, else
//! `$HOME/.cache/cargo-offload/nested`; `OFFLOAD_BUILD_CACHE=off` turns it off.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::env::Env;
use crate::error::{IoContext, Result};

/// Where the cache lies (a directory), or `off`.
pub const OFFLOAD_BUILD_CACHE: &str = "OFFLOAD_BUILD_CACHE";

/// The shared cache of nested-build units.
#[derive(Debug, Clone)]
pub struct BuildCache {
    root: PathBuf,
    /// Directories whose files never change under the same name (see the module's docs).
    immutable: Vec<PathBuf>,
}

/// One unit of a profile directory (`<target>/release`, `<target>/<triple>/release`).
impl Unit {
    fn package(&self) -> &str {
        self.name
            .strip_suffix(&self.hash_suffix)
            .unwrap_or(&self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Unit {
    /// `core-ad5cc240d8901ad8`: the name of its `.fingerprint` directory.
    name: String,
    /// The `-ad5cc240d8901ad8` its outputs' names carry.
    hash_suffix: String,
}

impl BuildCache {
    /// The cache the environment asks for; `None` when turned off or no home is known.
    pub fn from_env(env: &Env) -> Option<BuildCache> {
        let root = match env.get(OFFLOAD_BUILD_CACHE) {
            Some(v) if v == "off" || v == "0" => return None,
            Some(path) => PathBuf::from(path),
            None => env
                .get_untracked("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| {
                    env.get_untracked("HOME")
                        .map(|h| PathBuf::from(h).join(".cache"))
                })?
                .join("cargo-offload/nested"),
        };
        let cargo_home = env
            .get_untracked("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| {
                env.get_untracked("HOME")
                    .map(|h| PathBuf::from(h).join(".cargo"))
            });
        let rustup_home = env
            .get_untracked("RUSTUP_HOME")
            .map(PathBuf::from)
            .or_else(|| {
                env.get_untracked("HOME")
                    .map(|h| PathBuf::from(h).join(".rustup"))
            });
        let immutable = [
            cargo_home.as_ref().map(|h| h.join("registry")),
            cargo_home.as_ref().map(|h| h.join("git")),
            rustup_home.map(|h| h.join("toolchains")),
        ]
        .into_iter()
        .flatten()
        .collect();
        Some(BuildCache::at(root, immutable))
    }

    /// A cache at `root` that takes the units compiled from files under `immutable` only.
    pub fn at(root: impl Into<PathBuf>, immutable: Vec<PathBuf>) -> BuildCache {
        BuildCache {
            // The layout's version: a later one never reads this one's units.
            root: root.into().join("v2"),
            immutable,
        }
    }

    /// The directory of this layout's files.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The cache's copy of the nested target directory `target_dir` (by its name:
    /// `nvptx64-nvidia-cuda`, `x86_64-unknown-linux-gnu-host`).
    fn mirror(&self, target_dir: &Path) -> PathBuf {
        self.root.join(target_dir.file_name().unwrap_or_default())
    }

    /// Copies into `target_dir` every cached unit it lacks; returns how many, and the units
    /// refused because their files are not those the cache recorded when it stored them
    /// (changed, added or removed since). Cargo's lock of the directory is held meanwhile, so
    /// no cargo builds there as units arrive.
    pub fn seed(&self, target_dir: &Path) -> Result<(usize, Vec<String>)> {
        let mirror = self.mirror(target_dir);
        let mut seeded = 0;
        let mut refused = Vec::new();
        let profiles = profile_dirs(&mirror);
        if profiles.is_empty() {
            return Ok((0, refused));
        }
        let _lock = cargo_lock(&target_dir.join("release"))?;
        // No unit is read while another build is storing it.
        let _cache = cache_lock(&mirror, Lock::Shared)?;
        for profile in profiles {
            let to = target_dir.join(profile.strip_prefix(&mirror).unwrap_or(&profile));
            std::fs::create_dir_all(&to).io("creating", &to)?;
            for unit in units(&profile, &[])? {
                if to.join(".fingerprint").join(&unit.name).exists() {
                    continue;
                }
                if !verified(&profile, &unit) {
                    refused.push(unit.name.clone());
                    continue;
                }
                if copy_unit(&profile, &to, &unit, None).is_ok() {
                    seeded += 1;
                }
            }
        }
        Ok((seeded, refused))
    }

    /// Copies into the cache every unit of `target_dir` it lacks, and those named in `refused`
    /// (what [`BuildCache::seed_reporting`] refused before this build), but those of the
    /// packages `excluded` (the kernel crates); returns how many.
    pub fn store(&self, target_dir: &Path, excluded: &[&str], refused: &[String]) -> Result<usize> {
        let mirror = self.mirror(target_dir);
        // One build stores at a time: two builds' files of one unit differ (dep-info names
        // each build's target directory), so a unit stored by two at once would mix them.
        let _lock = cache_lock(&mirror, Lock::Exclusive)?;
        let mut stored = 0;
        for profile in profile_dirs(target_dir) {
            let to = mirror.join(profile.strip_prefix(target_dir).unwrap_or(&profile));
            let all = units(&profile, excluded)?;
            for unit in &all {
                if !self.cacheable(&profile, unit, &all) {
                    continue;
                }
                if to.join(".fingerprint").join(&unit.name).exists() {
                    // A refused entry is replaced by this build's good copy, so that one bad
                    // write does not cost every later build the unit. (Refused by the seed
                    // under a shared lock: it may have been repaired since, which this
                    // exclusive lock makes safe to check.)
                    if !refused.contains(&unit.name)
                        || verified(&to, unit)
                        || remove_unit(&to, unit).is_err()
                    {
                        continue;
                    }
                }
                std::fs::create_dir_all(&to).io("creating", &to)?;
                let Ok(manifest) = manifest(&profile, unit) else {
                    continue;
                };
                if copy_unit(&profile, &to, unit, Some(&manifest)).is_ok() {
                    stored += 1;
                }
            }
        }
        Ok(stored)
    }
}

impl BuildCache {
    /// Whether `unit` was compiled from immutable files only, by its dep-info (`deps/*.d`,
    /// `build/<unit>/*.d`); a unit without one (a build script's run) as its package's
    /// others are.
    fn cacheable(&self, profile: &Path, unit: &Unit, all: &[Unit]) -> bool {
        match self.sources_immutable(profile, unit) {
            Some(answer) => answer,
            None => {
                let siblings: Vec<Option<bool>> = all
                    .iter()
                    .filter(|u| u.package() == unit.package() && u.name != unit.name)
                    .map(|u| self.sources_immutable(profile, u))
                    .collect();
                siblings.contains(&Some(true)) && !siblings.contains(&Some(false))
            }
        }
    }

    fn sources_immutable(&self, profile: &Path, unit: &Unit) -> Option<bool> {
        let in_deps = std::fs::read_dir(profile.join("deps"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.extension().is_some_and(|e| e == "d")
                    && p.file_stem()
                        .is_some_and(|s| s.to_string_lossy().ends_with(&unit.hash_suffix))
            });
        let in_build = || {
            std::fs::read_dir(profile.join("build").join(&unit.name))
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|e| e == "d"))
        };
        let text = std::fs::read_to_string(in_deps.or_else(in_build)?).ok()?;
        let sources = dep_info_sources(&text);
        // A build script's output (`build/<unit>/out/…`) travels with its unit.
        let target_dir = profile.ancestors().nth(2).unwrap_or(profile);
        Some(
            !sources.is_empty()
                && sources.iter().all(|s| {
                    s.starts_with(target_dir) || self.immutable.iter().any(|dir| s.starts_with(dir))
                }),
        )
    }
}

/// The sources a makefile-style dep-info file lists (after the first target's `:`; `\ ` is
/// a space within a path).
fn dep_info_sources(text: &str) -> Vec<PathBuf> {
    let Some(first) = text.lines().find(|l| !l.trim().is_empty()) else {
        return Vec::new();
    };
    let Some((_, rest)) = first.split_once(": ") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = rest.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => {
                current.push(' ');
                chars.next();
            }
            ' ' => {
                if !current.is_empty() {
                    out.push(PathBuf::from(std::mem::take(&mut current)));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        out.push(PathBuf::from(current));
    }
    out
}

/// Runs the nested build `build` in `target_dir` between the cache's [`BuildCache::seed`] and
/// [`BuildCache::store`] (after a success only; `kernel_crate` is not stored). The cache
/// only ever saves time: a failure to use it is a warning.
pub fn around<T>(
    env: &Env,
    target_dir: &Path,
    kernel_crate: &str,
    build: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let Some(cache) = BuildCache::from_env(env) else {
        return build();
    };
    let warn = |what: &str, e: crate::error::Error| {
        env.warn(&format!(
            "the shared build cache {} could not be {what} ({e}); building without it",
            cache.root.display()
        ));
    };
    let refused = match cache.seed(target_dir) {
        Ok((_, refused)) => refused,
        Err(e) => {
            warn("read", e);
            Vec::new()
        }
    };
    if !refused.is_empty() {
        env.warn(&format!(
            "the shared build cache {} holds units whose files differ from what it recorded \
             ({}); they were not used, and this build's copies replace them",
            cache.root.display(),
            refused.join(", ")
        ));
    }
    let built = build()?;
    if let Err(e) = cache.store(target_dir, &[kernel_crate], &refused) {
        warn("written", e);
    }
    Ok(built)
}

/// The profile directories of a nested target directory: `release` and `<triple>/release`.
fn profile_dirs(target_dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut visit = |dir: PathBuf| {
        if dir.join(".fingerprint").is_dir() {
            out.push(dir);
        }
    };
    visit(target_dir.join("release"));
    for entry in std::fs::read_dir(target_dir)
        .into_iter()
        .flatten()
        .flatten()
    {
        let path = entry.path();
        if path.is_dir() && path.file_name().is_some_and(|n| n != "release") {
            visit(path.join("release"));
        }
    }
    out
}

/// The units of a profile directory, less those of the packages `excluded`.
fn units(profile: &Path, excluded: &[&str]) -> Result<Vec<Unit>> {
    let dir = profile.join(".fingerprint");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).io("reading", &dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((package, hash)) = name.rsplit_once('-') else {
            continue;
        };
        if hash.len() != 16 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        if excluded
            .iter()
            .any(|e| *e == package || e.replace('-', "_") == package)
        {
            continue;
        }
        out.push(Unit {
            hash_suffix: format!("-{hash}"),
            name,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Where the cache keeps a unit's manifest: one `<sha256>  <path>` line per file, the paths
/// relative to the profile directory, written before the unit's fingerprint.
fn manifest_path(profile: &Path, unit: &Unit) -> PathBuf {
    profile.join(".offload-manifest").join(&unit.name)
}

/// The files of a unit, relative to its profile directory, sorted: its outputs in `deps/`,
/// its build-script directory and its fingerprint.
fn unit_files(profile: &Path, unit: &Unit) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(profile.join("deps"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name
            .split('.')
            .next()
            .unwrap_or("")
            .ends_with(&unit.hash_suffix)
        {
            out.push(Path::new("deps").join(name));
        }
    }
    for dir in [Path::new("build"), Path::new(".fingerprint")] {
        let root = dir.join(&unit.name);
        let mut stack = vec![root];
        while let Some(rel) = stack.pop() {
            let path = profile.join(&rel);
            if path.is_dir() {
                for entry in std::fs::read_dir(&path).into_iter().flatten().flatten() {
                    stack.push(rel.join(entry.file_name()));
                }
            } else if path.is_file() {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

/// The manifest of a unit as its files are now.
fn manifest(profile: &Path, unit: &Unit) -> std::io::Result<String> {
    let mut text = String::new();
    for rel in unit_files(profile, unit) {
        let bytes = std::fs::read(profile.join(&rel))?;
        let digest = hmac_sha256::Hash::hash(&bytes);
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        text.push_str(&format!("{hex}  {}\n", rel.display()));
    }
    Ok(text)
}

/// Whether a cached unit's files are exactly those its manifest records: an entry the cache
/// did not write, or one changed since, is not used.
fn verified(profile: &Path, unit: &Unit) -> bool {
    let Ok(recorded) = std::fs::read_to_string(manifest_path(profile, unit)) else {
        return false;
    };
    manifest(profile, unit).is_ok_and(|now| now == recorded)
}

/// Copies one unit from the profile directory `from` to `to`: its outputs in `deps/`, its
/// build-script directory in `build/`, its manifest (into the cache), then its fingerprint,
/// each through a temporary name.
fn copy_unit(from: &Path, to: &Path, unit: &Unit, manifest: Option<&str>) -> std::io::Result<()> {
    for rel in unit_files(from, unit) {
        if rel.starts_with("deps") {
            copy_into_place(&from.join(&rel), &to.join(&rel))?;
        }
    }
    let build = from.join("build").join(&unit.name);
    if build.is_dir() {
        copy_into_place(&build, &to.join("build").join(&unit.name))?;
    }
    if let Some(manifest) = manifest {
        let path = manifest_path(to, unit);
        std::fs::create_dir_all(path.parent().unwrap_or(to))?;
        let temp = path.with_extension(format!("{}.partial", std::process::id()));
        std::fs::write(&temp, manifest)?;
        std::fs::rename(&temp, &path)?;
    }
    copy_into_place(
        &from.join(".fingerprint").join(&unit.name),
        &to.join(".fingerprint").join(&unit.name),
    )
}

/// Removes a unit from the cache's profile directory `profile`, its fingerprint first, so
/// that a unit whose removal stops half-way is one the cache lacks, not one it refuses.
/// Target directories seeded with its files keep them: they hold links, not the names.
fn remove_unit(profile: &Path, unit: &Unit) -> std::io::Result<()> {
    remove_any(&profile.join(".fingerprint").join(&unit.name))?;
    for rel in unit_files(profile, unit) {
        remove_any(&profile.join(rel))?;
    }
    match std::fs::remove_file(manifest_path(profile, unit)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Copies a file or directory tree to `to` under a temporary name, then renames it there; an
/// existing `to` is kept. Modification times are kept: cargo compares them.
fn copy_into_place(from: &Path, to: &Path) -> std::io::Result<()> {
    if to.exists() {
        return Ok(());
    }
    let parent = to.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let temp = parent.join(format!(
        ".{}.{}.partial",
        to.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let _ = remove_any(&temp);
    let copied = copy_tree(from, &temp).and_then(|()| match std::fs::rename(&temp, to) {
        // A directory renamed onto one that appeared meanwhile: theirs is as good.
        Err(_) if to.exists() => remove_any(&temp),
        other => other,
    });
    if copied.is_err() {
        let _ = remove_any(&temp);
    }
    copied
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(from)?;
    if meta.is_dir() {
        std::fs::create_dir(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
    } else if meta.is_file() {
        if shares_inode(from) && std::fs::hard_link(from, to).is_ok() {
            return Ok(());
        }
        std::fs::copy(from, to)?;
    } else {
        return Ok(());
    }
    let times = std::fs::FileTimes::new()
        .set_modified(meta.modified()?)
        .set_accessed(meta.accessed()?);
    // Directories cannot be opened for writing; their times matter less to cargo.
    if meta.is_file() {
        File::options().write(true).open(to)?.set_times(times)?;
    }
    Ok(())
}

/// Whether a file may be hard-linked rather than copied: rustc's and the linker's outputs,
/// which they replace by renaming a new file over the old rather than rewrite in place, so a
/// link never sees another build's writes. Dep-info and fingerprints are rewritten in place
/// and are copied. A changed link would also fail the manifest check on the next seed.
fn shares_inode(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("rlib" | "rmeta" | "so")
    )
}

fn remove_any(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Cargo's lock of a target directory: `release/.cargo-lock`, which cargo holds for a whole
/// `--release` build, `--target` units included.
fn cargo_lock(profile: &Path) -> Result<File> {
    lock_file(profile, ".cargo-lock", Lock::Exclusive)
}

/// The cache's lock of the mirror of one nested target directory: held exclusively while a
/// build stores units, shared while one seeds from it.
fn cache_lock(mirror: &Path, kind: Lock) -> Result<File> {
    lock_file(mirror, ".offload-cache-lock", kind)
}

#[derive(Clone, Copy)]
enum Lock {
    Shared,
    Exclusive,
}

/// Locks `dir/name` (created if missing) as `kind` says; the lock lasts as long as the file.
fn lock_file(dir: &Path, name: &str, kind: Lock) -> Result<File> {
    std::fs::create_dir_all(dir).io("creating", dir)?;
    let path = dir.join(name);
    let file = File::options()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .io("opening", &path)?;
    match kind {
        Lock::Shared => file.lock_shared(),
        Lock::Exclusive => file.lock(),
    }
    .io("locking", &path)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// A nested target directory whose units were compiled from files under `sources`:
    /// `toolchains/` and `registry/` (immutable) and `work/` (a path dependency's).
    fn a_nested_target_dir(root: &Path, sources: &Path) {
        let src = |p: &str| sources.join(p).display().to_string();
        let profile = root.join("nvptx64-nvidia-cuda/release");
        touch(
            &profile.join(".fingerprint/core-ad5cc240d8901ad8/lib-core"),
            "h",
        );
        touch(&profile.join("deps/libcore-ad5cc240d8901ad8.rlib"), "core");
        touch(
            &profile.join("deps/core-ad5cc240d8901ad8.d"),
            &format!(
                "/t/libcore.rlib: {} {}\n",
                src("toolchains/core/lib.rs"),
                src("toolchains/core/a\\ b.rs")
            ),
        );
        touch(
            &profile.join(".fingerprint/offload-rt-1111111111111111/lib"),
            "h",
        );
        touch(
            &profile.join("deps/liboffload_rt-1111111111111111.rlib"),
            "rt",
        );
        touch(
            &profile.join("deps/offload_rt-1111111111111111.d"),
            &format!(
                "/t/x.rlib: {} {}\n",
                src("registry/x.rs"),
                src("work/offload-rt/src/lib.rs")
            ),
        );
        touch(
            &profile.join(".fingerprint/k-kernels-0123456789abcdef/lib"),
            "k",
        );
        touch(&profile.join("deps/k_kernels.bc"), "bitcode");
        touch(
            &profile.join("deps/libk_kernels-0123456789abcdef.rlib"),
            "k",
        );
        let host = root.join("release");
        touch(&host.join(".fingerprint/libm-1bf77fcf8902382d/run"), "r");
        touch(
            &host.join("build/libm-1bf77fcf8902382d/output"),
            "cargo:rustc-cfg=x",
        );
        touch(&host.join(".fingerprint/libm-2bf77fcf8902382d/lib"), "l");
        touch(
            &host.join("deps/libm-2bf77fcf8902382d.d"),
            &format!("/t/libm.rlib: {}\n", src("registry/libm/src/lib.rs")),
        );
    }

    #[test]
    fn immutable_units_go_in_and_out_whole_with_their_times() {
        let dir = tempfile::tempdir().unwrap();
        let sources = dir.path().join("src");
        let a = dir.path().join("a/nvptx64-nvidia-cuda");
        a_nested_target_dir(&a, &sources);
        let rlib = a.join("nvptx64-nvidia-cuda/release/deps/libcore-ad5cc240d8901ad8.rlib");
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        File::options()
            .write(true)
            .open(&rlib)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let cache = BuildCache::at(
            dir.path().join("cache"),
            vec![sources.join("toolchains"), sources.join("registry")],
        );
        // core, and libm's library and build-script run; not the kernel crate, not a unit
        // with a path dependency's source.
        assert_eq!(cache.store(&a, &["k-kernels"], &[]).unwrap(), 3);
        assert_eq!(
            cache.store(&a, &["k-kernels"], &[]).unwrap(),
            0,
            "already cached"
        );

        let b = dir.path().join("b/nvptx64-nvidia-cuda");
        assert_eq!(cache.seed(&b).unwrap().0, 3);
        let seeded = b.join("nvptx64-nvidia-cuda/release");
        let copy = seeded.join("deps/libcore-ad5cc240d8901ad8.rlib");
        assert_eq!(std::fs::read(&copy).unwrap(), b"core");
        assert_eq!(std::fs::metadata(&copy).unwrap().modified().unwrap(), old);
        assert!(seeded.join("deps/core-ad5cc240d8901ad8.d").is_file());
        // Outputs share the cache's storage; dep-info, rewritten in place by cargo, does not.
        use std::os::unix::fs::MetadataExt;
        let cached = dir
            .path()
            .join("cache/v2/nvptx64-nvidia-cuda/nvptx64-nvidia-cuda/release");
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        assert_eq!(
            ino(&copy),
            ino(&cached.join("deps/libcore-ad5cc240d8901ad8.rlib"))
        );
        assert_ne!(
            ino(&seeded.join("deps/core-ad5cc240d8901ad8.d")),
            ino(&cached.join("deps/core-ad5cc240d8901ad8.d"))
        );
        assert!(
            seeded
                .join(".fingerprint/core-ad5cc240d8901ad8/lib-core")
                .is_file()
        );
        assert!(!seeded.join("deps/k_kernels.bc").exists());
        assert!(
            !seeded
                .join(".fingerprint/k-kernels-0123456789abcdef")
                .exists()
        );
        assert!(
            !seeded
                .join(".fingerprint/offload-rt-1111111111111111")
                .exists()
        );
        assert!(
            b.join("release/build/libm-1bf77fcf8902382d/output")
                .is_file()
        );
        assert_eq!(cache.seed(&b).unwrap().0, 0, "nothing lacking");

        // An entry changed in the cache, or one it did not write, is refused.
        // (A new file: the cached one is a link of `a`'s, which a write in place would change.)
        std::fs::remove_file(cached.join("deps/libcore-ad5cc240d8901ad8.rlib")).unwrap();
        std::fs::write(cached.join("deps/libcore-ad5cc240d8901ad8.rlib"), "evil").unwrap();
        touch(
            &cached.join(".fingerprint/alloc-0000000000000001/lib"),
            "forged",
        );
        let c = dir.path().join("c/nvptx64-nvidia-cuda");
        let (seeded, mut refused) = cache.seed(&c).unwrap();
        refused.sort();
        assert_eq!(refused, ["alloc-0000000000000001", "core-ad5cc240d8901ad8"]);
        assert_eq!(seeded, 2, "libm's two units are still good");
        assert!(
            !c.join("nvptx64-nvidia-cuda/release/deps/libcore-ad5cc240d8901ad8.rlib")
                .exists()
        );
        let leftovers: Vec<_> = walk(dir.path())
            .into_iter()
            .filter(|p| p.to_string_lossy().ends_with(".partial"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");

        // The next build with a good copy of a refused unit replaces it in the cache, and the
        // build after it is seeded with it again; a unit no build has stays refused.
        assert_eq!(
            cache.store(&a, &["k-kernels"], &refused).unwrap(),
            1,
            "core repaired"
        );
        assert_eq!(
            std::fs::read(cached.join("deps/libcore-ad5cc240d8901ad8.rlib")).unwrap(),
            b"core"
        );
        let d = dir.path().join("d/nvptx64-nvidia-cuda");
        let (seeded, refused) = cache.seed(&d).unwrap();
        assert_eq!(
            (seeded, &refused[..]),
            (3, &["alloc-0000000000000001".to_owned()][..])
        );
        assert_eq!(
            cache.store(&a, &["k-kernels"], &refused).unwrap(),
            0,
            "nothing left to repair"
        );
    }

    #[test]
    fn dep_info_sources_are_read_with_escaped_spaces() {
        assert_eq!(
            dep_info_sources("/o/x.rlib: /a/b.rs /a/c\\ d.rs\n\n/a/b.rs:\n"),
            [PathBuf::from("/a/b.rs"), PathBuf::from("/a/c d.rs")]
        );
        assert!(dep_info_sources("").is_empty());
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.extend(walk(&path));
            }
            out.push(path);
        }
        out
    }
}
