//! What the package graph says: which dependencies are kernel crates, and the
//! `[package.metadata.offload]` settings of the host package.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::json::{JsonExt, JsonValue as Value};

use crate::command;
use crate::error::{Error, Result};

/// The runtime's package: with its `host` feature, it registers and launches the images.
const RUNTIME_PACKAGE: &str = "offload-rt";

/// A kernel crate: a `no_std` library whose `#[kernel]` functions become device code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelCrate {
    /// Package name (`saxpy-kernels`).
    pub package: String,
    /// Library name as rustc sees it (`saxpy_kernels`); images carry it as `offload.module`.
    pub lib_name: String,
    /// Path of its `Cargo.toml`.
    pub manifest_path: PathBuf,
    /// Directory of the kernel crate.
    pub root: PathBuf,
    /// Files and directories whose change must rebuild the images: the kernel crate's and
    /// those of every local (path) package it depends on, such as the device API.
    pub watch: Vec<PathBuf>,
    /// Every package the kernel crate depends on, directly or not (normal and build
    /// dependencies, proc macros included), sorted by name: what a prebuilt bundle's source
    /// hash covers besides the crate itself.
    pub deps: Vec<SourcePackage>,
    /// Whether its default features are on: its dependency declaration's
    /// `default-features`.
    pub default_features: bool,
    /// The features its host crate turns on, sorted: those its dependency declaration lists
    /// and those the host crate's enabled features name (`kernels/fast`, `kernels?/fast`).
    pub features: Vec<String>,
    /// How its GPU kernels end when they panic: its `[package.metadata.offload] panic`, or
    /// `OFFLOAD_PANIC` once a build has applied it ([`KernelCrate::apply_panic_override`]).
    pub panic: PanicStrategy,
}

impl KernelCrate {
    /// The options that give a nested build of the crate the features the host build gives
    /// it: `--no-default-features` and `--features a,b`, each when needed.
    pub fn feature_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if !self.default_features {
            args.push("--no-default-features".to_owned());
        }
        if !self.features.is_empty() {
            args.push("--features".to_owned());
            args.push(self.features.join(","));
        }
        args
    }

    /// Gives [`KernelCrate::panic`] the strategy of `OFFLOAD_PANIC` where it is set: the
    /// variable overrides every kernel crate's `panic` key. A build applies it once, where the
    /// kernel crates enter it, so that its device links, its link cache and its prebuilt
    /// bundles' source hashes agree; applying it again changes nothing.
    ///
    /// # Errors
    /// `OFFLOAD_PANIC` is set to something other than `report` or `trap`.
    pub fn apply_panic_override(&mut self, env: &crate::env::Env) -> Result<()> {
        if let Some(strategy) = PanicStrategy::from_env(env)? {
            self.panic = strategy;
        }
        Ok(())
    }
}

/// How a kernel crate's GPU kernels end when they panic: `[package.metadata.offload] panic =
/// "report"` or `"trap"` in the kernel crate's manifest, overridden for every kernel crate by
/// the environment variable `OFFLOAD_PANIC`. Either way every check stays: bounds checks,
/// `assert!`, and arithmetic overflow checks where the profile has them.
///
/// The strategy is the device link's (`device_link::llvm::panic_sites::trap_panics`): the nested
/// build, and so its bitcode and the shared build cache's units, is the same for both; the
/// link cache and prebuilt bundles key on it. The CPU device's image keeps reporting under
/// either: there a panic is a Rust panic caught by the runtime, which costs the kernel nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PanicStrategy {
    /// `report` (the default): the first panicking thread records its panic in the channel
    /// the runtime maps into the device and traps; the launch returns `Error::KernelPanic`
    /// with the message, file, line, block and thread.
    #[default]
    Report,
    /// `trap`: a failed check ends the kernel with the device's trap (`trap;` on NVIDIA,
    /// `s_trap 2` on AMD GPUs), writing nothing: no report, no panic-site table, no access to
    /// the channel. The launch returns `Error::KernelFault` naming the kernel (the driver's
    /// trap code), not the line.
    Trap,
}

impl PanicStrategy {
    /// The key of `[package.metadata.offload]` that sets it.
    pub const KEY: &str = "panic";

    /// The name the key and `OFFLOAD_PANIC` spell it with.
    pub fn name(self) -> &'static str {
        match self {
            Self::Report => "report",
            Self::Trap => "trap",
        }
    }

    /// `report` or `trap`; `None` for anything else.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "report" => Some(Self::Report),
            "trap" => Some(Self::Trap),
            _ => None,
        }
    }

    /// The strategy `OFFLOAD_PANIC` sets, if it is set.
    ///
    /// # Errors
    /// It is set to something other than `report` or `trap`.
    pub fn from_env(env: &crate::env::Env) -> Result<Option<Self>> {
        let Some(value) = env.get(crate::env::OFFLOAD_PANIC) else {
            return Ok(None);
        };
        Self::parse(value.trim()).map(Some).ok_or_else(|| {
            Error::Prerequisite(format!(
                "{}=`{value}`: expected `report` or `trap`",
                crate::env::OFFLOAD_PANIC
            ))
        })
    }
}

impl std::fmt::Display for PanicStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A package whose sources go into a kernel crate's images.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcePackage {
    /// The package name.
    pub name: String,
    /// The package version.
    pub version: String,
    /// The directory holding its `Cargo.toml`.
    pub root: PathBuf,
}

/// The host package and the kernel crates it embeds.
#[derive(Debug, Clone)]
pub struct HostPackage {
    /// The package name.
    pub name: String,
    /// Path of its `Cargo.toml`.
    pub manifest_path: PathBuf,
    /// `[package.metadata.offload] arch`, if set.
    pub arch: Option<String>,
    /// Kernel crates among the direct dependencies, in dependency order.
    pub kernel_crates: Vec<KernelCrate>,
    /// The workspace's target directory as `cargo metadata` reports it.
    pub target_directory: PathBuf,
    /// Whether the package's normal dependencies, directly or not, include `offload-rt` with
    /// its `host` feature (the runtime that registers and launches embedded images), as the
    /// resolved graph of its workspace has it.
    pub host_runtime: bool,
}

/// Reads the package graph of the package at `manifest_path`.
///
/// `host_features` are the host crate's enabled features (a build script's
/// `CARGO_CFG_FEATURE`); `None` means its default ones. They decide the kernel crates'
/// features ([`KernelCrate::features`]).
pub fn host_package(
    manifest_path: &Path,
    cargo: Option<&Path>,
    host_features: Option<&[String]>,
) -> Result<HostPackage> {
    let meta = read_metadata(Some(manifest_path), cargo, false)?;
    let host = package_at(&meta, manifest_path)?;
    host_package_in(&meta, host, manifest_path, host_features)
}

fn host_package_in(
    meta: &Metadata,
    host: &Package,
    manifest_path: &Path,
    host_features: Option<&[String]>,
) -> Result<HostPackage> {
    let arch = declared_arch(host)?;
    let enabled = match host_features {
        Some(list) => list.to_vec(),
        None => host.default_features(),
    };
    let mut kernel_crates = Vec::new();
    for dep in &host.dependencies {
        if dep.kind != DependencyKind::Normal {
            continue;
        }
        let Some(pkg) = meta.resolved_dependency(host, &dep.name) else {
            continue;
        };
        if is_kernel_crate(pkg)? {
            let mut krate = kernel_crate_in(meta, pkg)?;
            krate.default_features = dep.uses_default_features;
            krate.features = host.features_turned_on(dep, &enabled);
            kernel_crates.push(krate);
        }
    }
    Ok(HostPackage {
        name: host.name.clone(),
        manifest_path: manifest_path.to_owned(),
        arch,
        kernel_crates,
        target_directory: meta.target_directory.clone(),
        host_runtime: meta.reaches_host_runtime(host),
    })
}

/// Which packages a `cargo build` compiles, as its package options say.
#[derive(Debug, Clone, Default)]
pub struct PackageSelection {
    /// `--manifest-path` (default: the current directory's `Cargo.toml`).
    pub manifest_path: Option<PathBuf>,
    /// `-p`/`--package`: names, or `name@version`.
    pub packages: Vec<String>,
    /// `--workspace` (`--all`).
    pub workspace: bool,
    /// `--exclude`, with `--workspace`.
    pub exclude: Vec<String>,
}

/// A host crate a build compiles, with the crate roots its compiles start from.
#[derive(Debug, Clone)]
pub struct HostCrate {
    /// The package and its kernel crates.
    pub host: HostPackage,
    /// Its library's crate root, else its first binary's.
    pub src_path: PathBuf,
    /// Whether that is a binary (linked into an executable) rather than a library.
    pub binary: bool,
    /// Each kernel crate's library root, in `host.kernel_crates` order.
    pub kernel_src_paths: Vec<PathBuf>,
}

/// The host crates a build of `selection` compiles: among the selected packages and their
/// normal dependencies, those whose build script runs offload-build (a build-dependency on
/// `offload-build`) and that depend on a kernel crate, found as `host_package` finds them,
/// in one `cargo metadata`. Sorted by name.
pub fn host_crates(selection: &PackageSelection, cargo: Option<&Path>) -> Result<Vec<HostCrate>> {
    let meta = read_metadata(selection.manifest_path.as_deref(), cargo, false)?;
    let mut stack: Vec<&str> = selected(&meta, selection)?;
    let mut seen: Vec<&str> = stack.clone();
    let mut out = Vec::new();
    while let Some(id) = stack.pop() {
        let Some(pkg) = meta.package(id) else {
            continue;
        };
        if runs_offload_build(pkg) {
            let host = host_package_in(&meta, pkg, &pkg.manifest_path, None)?;
            if !host.kernel_crates.is_empty() {
                out.push(host_crate(&meta, pkg, host)?);
            }
        }
        for (dep, normal) in meta.node(id).map(|n| n.deps.as_slice()).unwrap_or_default() {
            if *normal && !seen.contains(&dep.as_str()) {
                seen.push(dep);
                stack.push(dep);
            }
        }
    }
    out.sort_by(|a, b| a.host.name.cmp(&b.host.name));
    Ok(out)
}

/// The packages to add to a `cargo test` of `selection` so that it tests the kernel crates of
/// the host crates it selects too, where those are workspace members it leaves out. Cargo's
/// own selection names one package at most when it names none, so where `selection` names
/// no package, the packages it selects by default come first. Empty where nothing is left
/// out (`--workspace` included): the command then stays as written.
pub fn kernel_crates_to_test(
    selection: &PackageSelection,
    cargo: Option<&Path>,
) -> Result<Vec<String>> {
    if selection.workspace {
        return Ok(Vec::new());
    }
    let meta = read_metadata(selection.manifest_path.as_deref(), cargo, false)?;
    let chosen = selected(&meta, selection)?;
    let mut names: Vec<String> = chosen
        .iter()
        .filter_map(|id| meta.package(id))
        .map(|p| p.name.clone())
        .collect();
    let mut kernels: Vec<String> = Vec::new();
    for pkg in chosen.iter().filter_map(|id| meta.package(id)) {
        if !runs_offload_build(pkg) {
            continue;
        }
        for krate in host_package_in(&meta, pkg, &pkg.manifest_path, None)?.kernel_crates {
            let member = meta
                .workspace_members
                .iter()
                .filter_map(|id| meta.package(id))
                .any(|p| p.manifest_path == krate.manifest_path);
            if member && !names.contains(&krate.package) {
                kernels.push(krate.package.clone());
                names.push(krate.package);
            }
        }
    }
    if kernels.is_empty() {
        return Ok(kernels);
    }
    if selection.packages.is_empty() {
        Ok(names)
    } else {
        Ok(kernels)
    }
}

/// Whether `pkg`'s build script runs offload-build (a build-dependency on it).
fn runs_offload_build(pkg: &Package) -> bool {
    pkg.dependencies
        .iter()
        .any(|d| d.kind == DependencyKind::Build && d.name == "offload-build")
}

/// The ids of the packages `selection` names.
fn selected<'m>(meta: &'m Metadata, selection: &PackageSelection) -> Result<Vec<&'m str>> {
    if !selection.packages.is_empty() {
        return selection
            .packages
            .iter()
            .map(|spec| {
                let (name, version) = match spec.split_once('@') {
                    Some((name, version)) => (name, Some(version)),
                    None => (spec.as_str(), None),
                };
                meta.packages
                    .iter()
                    .find(|p| p.name == name && version.is_none_or(|v| p.version == v))
                    .map(|p| p.id.as_str())
                    .ok_or_else(|| Error::UnknownPackage {
                        name: spec.clone(),
                        known: meta
                            .workspace_members
                            .iter()
                            .filter_map(|id| meta.package(id))
                            .map(|p| p.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    })
            })
            .collect();
    }
    let members = if selection.workspace {
        &meta.workspace_members
    } else if let Some(root) = &meta.root {
        return Ok(vec![root.as_str()]);
    } else {
        &meta.workspace_default_members
    };
    Ok(members
        .iter()
        .filter(|id| {
            meta.package(id)
                .is_none_or(|p| !selection.exclude.contains(&p.name))
        })
        .map(String::as_str)
        .collect())
}

fn host_crate(meta: &Metadata, pkg: &Package, host: HostPackage) -> Result<HostCrate> {
    let target = pkg
        .targets
        .iter()
        .find(|t| t.is_lib())
        .or_else(|| {
            pkg.targets
                .iter()
                .find(|t| t.kind.iter().any(|k| k == "bin"))
        })
        .ok_or_else(|| Error::BadMetadata {
            manifest: pkg.manifest_path.clone(),
            reason: "the package has neither a library nor a binary target".to_owned(),
        })?;
    let mut kernel_src_paths = Vec::new();
    for krate in &host.kernel_crates {
        let lib = meta
            .packages
            .iter()
            .find(|p| p.manifest_path == krate.manifest_path)
            .and_then(|p| p.targets.iter().find(|t| t.is_lib()))
            .ok_or_else(|| Error::BadMetadata {
                manifest: krate.manifest_path.clone(),
                reason: "a kernel crate must have a library target".to_owned(),
            })?;
        kernel_src_paths.push(lib.src_path.clone());
    }
    Ok(HostCrate {
        src_path: target.src_path.clone(),
        binary: !target.is_lib(),
        kernel_src_paths,
        host,
    })
}

/// Each workspace member's `[package.metadata.offload] arch`, as (package, list), from
/// `cargo metadata --no-deps`, which resolves no dependency.
pub fn workspace_archs(
    manifest_path: Option<&Path>,
    cargo: Option<&Path>,
) -> Result<Vec<(String, String)>> {
    let meta = read_metadata(manifest_path, cargo, true)?;
    let mut out = Vec::new();
    for pkg in &meta.packages {
        if let Some(arch) = declared_arch(pkg)? {
            out.push((pkg.name.clone(), arch));
        }
    }
    Ok(out)
}

/// A workspace as `cargo metadata --no-deps` reads it, without a resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceMembers {
    /// The workspace root: the directory of its root manifest.
    pub root: PathBuf,
    /// Each member's package name.
    pub names: Vec<String>,
}

/// The workspace the manifest at `manifest_path` belongs to.
pub fn workspace_members(manifest_path: &Path, cargo: Option<&Path>) -> Result<WorkspaceMembers> {
    let meta = read_metadata(Some(manifest_path), cargo, true)?;
    Ok(WorkspaceMembers {
        root: meta.workspace_root,
        names: meta.packages.into_iter().map(|p| p.name).collect(),
    })
}

fn offload_table(pkg: &Package) -> Result<Option<&HashMap<String, Value>>> {
    match pkg.metadata.get_key("offload") {
        None => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map)),
        Some(_) => Err(Error::BadMetadata {
            manifest: pkg.manifest_path.clone(),
            reason: "`offload` must be a table".to_owned(),
        }),
    }
}

fn is_kernel_crate(pkg: &Package) -> Result<bool> {
    match offload_table(pkg)?.and_then(|t| t.get("kernels")) {
        None => Ok(false),
        Some(Value::Boolean(b)) => Ok(*b),
        Some(_) => Err(Error::BadMetadata {
            manifest: pkg.manifest_path.clone(),
            reason: "`kernels` must be true or false".to_owned(),
        }),
    }
}

fn arch_value(value: &Value, pkg: &Package) -> Result<String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Array(items) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .map(|v| v.join(","))
            .ok_or_else(|| Error::BadMetadata {
                manifest: pkg.manifest_path.clone(),
                reason: "`arch` must be a string or an array of strings".to_owned(),
            }),
        _ => Err(Error::BadMetadata {
            manifest: pkg.manifest_path.clone(),
            reason: "`arch` must be a string or an array of strings".to_owned(),
        }),
    }
}

/// A kernel crate read on its own (for `cargo offload package-kernels` and `verify`).
#[derive(Debug, Clone)]
pub struct KernelPackage {
    /// The kernel crate, as a host build would see it.
    pub krate: KernelCrate,
    /// Its `[package.metadata.offload] arch`, if set.
    pub arch: Option<String>,
    /// The target directory its workspace builds into.
    pub target_directory: PathBuf,
}

/// The kernel crate at `manifest_path` itself.
pub fn kernel_package(manifest_path: &Path, cargo: Option<&Path>) -> Result<KernelPackage> {
    let meta = read_metadata(Some(manifest_path), cargo, false)?;
    let pkg = package_at(&meta, manifest_path)?;
    if !is_kernel_crate(pkg)? {
        return Err(Error::BadMetadata {
            manifest: pkg.manifest_path.clone(),
            reason: "not a kernel crate (`[package.metadata.offload] kernels = true` is missing)"
                .to_owned(),
        });
    }
    Ok(KernelPackage {
        krate: kernel_crate_in(&meta, pkg)?,
        arch: declared_arch(pkg)?,
        target_directory: meta.target_directory.clone(),
    })
}

/// `cargo metadata` for `manifest_path` (default: the current directory's): offline first
/// (only the dependency edges are needed), then online when a dependency is not in the local
/// cache yet. With `no_deps`, the workspace members alone, without a resolve.
fn read_metadata(
    manifest_path: Option<&Path>,
    cargo: Option<&Path>,
    no_deps: bool,
) -> Result<Metadata> {
    let run = |offline: bool| {
        let mut cmd = Command::new(cargo.unwrap_or(Path::new("cargo")));
        cmd.args(["metadata", "--format-version", "1"]);
        if let Some(manifest_path) = manifest_path {
            cmd.arg("--manifest-path").arg(manifest_path);
        }
        if no_deps {
            cmd.arg("--no-deps");
        }
        if offline {
            cmd.arg("--offline");
        }
        command::run(&mut cmd)
    };
    let output = if no_deps {
        run(false)?
    } else {
        run(true).or_else(|_| run(false))?
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let json = text
        .lines()
        .find(|line| line.starts_with('{'))
        .ok_or_else(|| Error::Metadata {
            reason: "it printed no JSON".to_owned(),
        })?;
    let value = crate::json::parse(json).map_err(|e| Error::Metadata {
        reason: e.to_string(),
    })?;
    Metadata::from_json(&value).ok_or_else(|| Error::Metadata {
        reason: "its JSON lacks a field this build reads (format version 1 expected)".to_owned(),
    })
}

/// The parts of `cargo metadata --format-version 1` the build reads.
#[derive(Debug)]
struct Metadata {
    packages: Vec<Package>,
    /// The resolved graph: each package's id and the ids it depends on.
    resolve: Option<Vec<Node>>,
    /// The package of the manifest, when it is not a virtual one (`resolve.root`).
    root: Option<String>,
    workspace_members: Vec<String>,
    workspace_default_members: Vec<String>,
    workspace_root: PathBuf,
    target_directory: PathBuf,
}

#[derive(Debug)]
struct Package {
    id: String,
    name: String,
    version: String,
    manifest_path: PathBuf,
    /// `None` for a local (path) package.
    source: Option<String>,
    dependencies: Vec<Dependency>,
    targets: Vec<Target>,
    metadata: Value,
    /// `[features]`: each feature and what it turns on.
    features: Vec<(String, Vec<String>)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DependencyKind {
    Normal,
    Development,
    Build,
}

#[derive(Debug)]
struct Dependency {
    name: String,
    kind: DependencyKind,
    optional: bool,
    /// The name the declaring package knows it by (`rename`, else `name`).
    key: String,
    uses_default_features: bool,
    features: Vec<String>,
}

#[derive(Debug)]
struct Target {
    name: String,
    kind: Vec<String>,
    src_path: PathBuf,
}

impl Target {
    fn is_lib(&self) -> bool {
        self.kind.iter().any(|k| k == "lib")
    }
}

#[derive(Debug)]
struct Node {
    id: String,
    /// (package id, whether a normal dependency edge leads there).
    deps: Vec<(String, bool)>,
    /// The package's features the resolved graph turns on.
    features: Vec<String>,
}

fn string(v: &Value, key: &str) -> Option<String> {
    v.str_at(&[key]).map(str::to_owned)
}

fn array<'v>(v: &'v Value, key: &str) -> Option<&'v [Value]> {
    v.get_key(key)?.as_array()
}

/// The strings of the array `key`, none when it is missing.
fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get_key(key).map(string_list).unwrap_or_default()
}

/// The strings of an array value, none when it is not one.
fn string_list(list: &Value) -> Vec<String> {
    list.strs_at(&[]).into_iter().map(str::to_owned).collect()
}

fn dependency_kind(v: &Value) -> Option<DependencyKind> {
    match v.get_key("kind")? {
        Value::Null => Some(DependencyKind::Normal),
        Value::String(s) if s == "dev" => Some(DependencyKind::Development),
        Value::String(s) if s == "build" => Some(DependencyKind::Build),
        _ => None,
    }
}

impl Metadata {
    fn from_json(v: &Value) -> Option<Metadata> {
        let packages = array(v, "packages")?
            .iter()
            .map(Package::from_json)
            .collect::<Option<Vec<_>>>()?;
        let resolve = match v.get_key("resolve") {
            None | Some(Value::Null) => None,
            Some(r) => Some(
                array(r, "nodes")?
                    .iter()
                    .map(Node::from_json)
                    .collect::<Option<Vec<_>>>()?,
            ),
        };
        let ids = |key: &str| -> Option<Vec<String>> {
            match v.get_key(key) {
                None | Some(Value::Null) => Some(Vec::new()),
                Some(list) => list
                    .as_array()?
                    .iter()
                    .map(|id| id.as_str().map(str::to_owned))
                    .collect(),
            }
        };
        let workspace_members = ids("workspace_members")?;
        let workspace_default_members = match ids("workspace_default_members")? {
            // Older cargo leaves it out: then every member is a default one.
            none if none.is_empty() => workspace_members.clone(),
            some => some,
        };
        Some(Metadata {
            packages,
            resolve,
            root: v.str_at(&["resolve", "root"]).map(str::to_owned),
            workspace_members,
            workspace_default_members,
            workspace_root: string(v, "workspace_root")?.into(),
            target_directory: string(v, "target_directory")?.into(),
        })
    }

    fn package(&self, id: &str) -> Option<&Package> {
        self.packages.iter().find(|p| p.id == id)
    }

    fn node(&self, id: &str) -> Option<&Node> {
        self.resolve.as_ref()?.iter().find(|n| n.id == id)
    }

    /// The package the resolve gives `pkg` for its declared dependency `name`.
    /// Whether `offload-rt` with its `host` feature is among the normal dependencies of `pkg`,
    /// directly or not. Without a resolved graph, assumed so.
    fn reaches_host_runtime(&self, pkg: &Package) -> bool {
        if self.resolve.is_none() {
            return true;
        }
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![pkg.id.as_str()];
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            let Some(node) = self.node(id) else {
                continue;
            };
            let is_runtime = self.package(id).is_some_and(|p| p.name == RUNTIME_PACKAGE);
            if is_runtime && node.features.iter().any(|f| f == "host") {
                return true;
            }
            stack.extend(
                node.deps
                    .iter()
                    .filter(|(_, normal)| *normal)
                    .map(|(dep, _)| dep.as_str()),
            );
        }
        false
    }

    fn resolved_dependency(&self, pkg: &Package, name: &str) -> Option<&Package> {
        self.node(&pkg.id)?
            .deps
            .iter()
            .find_map(|(id, _)| self.package(id).filter(|q| q.name == name))
    }
}

impl Package {
    fn from_json(v: &Value) -> Option<Package> {
        Some(Package {
            id: string(v, "id")?,
            name: string(v, "name")?,
            version: string(v, "version")?,
            manifest_path: string(v, "manifest_path")?.into(),
            source: string(v, "source"),
            dependencies: array(v, "dependencies")?
                .iter()
                .map(|d| {
                    let name = string(d, "name")?;
                    Some(Dependency {
                        key: string(d, "rename").unwrap_or_else(|| name.clone()),
                        name,
                        kind: dependency_kind(d)?,
                        optional: d.get_key("optional")?.as_bool()?,
                        uses_default_features: d
                            .get_key("uses_default_features")
                            .and_then(Value::as_bool)
                            .unwrap_or(true),
                        features: strings(d, "features"),
                    })
                })
                .collect::<Option<Vec<_>>>()?,
            targets: array(v, "targets")?
                .iter()
                .map(|t| {
                    Some(Target {
                        name: string(t, "name")?,
                        src_path: string(t, "src_path")?.into(),
                        kind: array(t, "kind")?
                            .iter()
                            .map(|k| k.as_str().map(str::to_owned))
                            .collect::<Option<Vec<_>>>()?,
                    })
                })
                .collect::<Option<Vec<_>>>()?,
            metadata: v.get_key("metadata").cloned().unwrap_or(Value::Null),
            features: match v.get_key("features") {
                Some(Value::Object(map)) => {
                    let mut features: Vec<_> = map
                        .iter()
                        .map(|(name, list)| (name.clone(), string_list(list)))
                        .collect();
                    // A hash map's order is not the manifest's: sorted, as cargo prints them.
                    features.sort();
                    features
                }
                _ => Vec::new(),
            },
        })
    }

    fn is_local(&self) -> bool {
        self.source.is_none()
    }

    /// The features a build with no feature options turns on: `default` and what it turns on,
    /// transitively.
    fn default_features(&self) -> Vec<String> {
        let mut on: Vec<String> = Vec::new();
        let mut stack = vec!["default".to_owned()];
        while let Some(name) = stack.pop() {
            let Some((_, turns_on)) = self.features.iter().find(|(n, _)| *n == name) else {
                continue;
            };
            if on.contains(&name) {
                continue;
            }
            on.push(name);
            stack.extend(
                turns_on
                    .iter()
                    .filter(|f| !f.contains('/') && !f.starts_with("dep:"))
                    .cloned(),
            );
        }
        on
    }

    /// The features of dependency `dep` that this package turns on with its features
    /// `enabled`: those `dep` is declared with and each `dep/f` or `dep?/f` an enabled
    /// feature lists. Sorted.
    fn features_turned_on(&self, dep: &Dependency, enabled: &[String]) -> Vec<String> {
        let mut out = dep.features.clone();
        for (name, turns_on) in &self.features {
            if !enabled.contains(name) {
                continue;
            }
            for entry in turns_on {
                let Some((key, feature)) = entry.split_once('/') else {
                    continue;
                };
                if key.trim_end_matches('?') == dep.key {
                    out.push(feature.to_owned());
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }
}

impl Node {
    fn from_json(v: &Value) -> Option<Node> {
        Some(Node {
            id: string(v, "id")?,
            deps: array(v, "deps")?
                .iter()
                .map(|d| {
                    let normal = array(d, "dep_kinds")?
                        .iter()
                        .any(|k| dependency_kind(k) == Some(DependencyKind::Normal));
                    Some((string(d, "pkg")?, normal))
                })
                .collect::<Option<Vec<_>>>()?,
            features: strings(v, "features"),
        })
    }
}

/// The package whose manifest is `manifest_path` (as given, or with links resolved).
fn package_at<'a>(meta: &'a Metadata, manifest_path: &Path) -> Result<&'a Package> {
    let canonical = std::fs::canonicalize(manifest_path).ok();
    meta.packages
        .iter()
        .find(|p| {
            let path = p.manifest_path.as_path();
            path == manifest_path || Some(path) == canonical.as_deref()
        })
        .ok_or_else(|| Error::BadMetadata {
            manifest: manifest_path.to_owned(),
            reason: "the package is not in `cargo metadata`'s output".to_owned(),
        })
}

/// `[package.metadata.offload] panic` of a kernel crate: [`PanicStrategy::Report`] when unset.
fn declared_panic(pkg: &Package) -> Result<PanicStrategy> {
    let bad = |what: String| Error::BadMetadata {
        manifest: pkg.manifest_path.clone(),
        reason: format!(
            "`{}` must be \"report\" or \"trap\", not {what}",
            PanicStrategy::KEY
        ),
    };
    match offload_table(pkg)?.and_then(|t| t.get(PanicStrategy::KEY)) {
        None => Ok(PanicStrategy::Report),
        Some(Value::String(s)) => PanicStrategy::parse(s).ok_or_else(|| bad(format!("{s:?}"))),
        Some(other) => Err(bad(other
            .stringify()
            .unwrap_or_else(|_| "a value of another type".to_owned()))),
    }
}

/// `[package.metadata.offload] arch` of a package, if set.
fn declared_arch(pkg: &Package) -> Result<Option<String>> {
    offload_table(pkg)?
        .and_then(|t| t.get("arch").cloned())
        .map(|v| arch_value(&v, pkg))
        .transpose()
}

fn kernel_crate_in(meta: &Metadata, pkg: &Package) -> Result<KernelCrate> {
    let mut krate = kernel_crate(pkg)?;
    let (watch, deps) = dependency_closure(meta, pkg);
    krate.watch = watch;
    krate.deps = deps;
    Ok(krate)
}

fn kernel_crate(pkg: &Package) -> Result<KernelCrate> {
    let lib = pkg
        .targets
        .iter()
        .find(|t| t.is_lib())
        .ok_or_else(|| Error::BadMetadata {
            manifest: pkg.manifest_path.clone(),
            reason: "a kernel crate must have a library target".to_owned(),
        })?;
    let manifest_path = pkg.manifest_path.clone();
    let root = manifest_path
        .parent()
        .map(Path::to_owned)
        .unwrap_or_default();
    Ok(KernelCrate {
        package: pkg.name.clone(),
        lib_name: lib.name.replace('-', "_"),
        watch: vec![root.clone()],
        deps: Vec::new(),
        default_features: true,
        features: Vec::new(),
        panic: declared_panic(pkg)?,
        manifest_path,
        root,
    })
}

/// What `pkg`'s images depend on: the manifests and source directories of it and of every
/// local package it depends on (to watch), and the packages its device builds compile (to
/// hash).
fn dependency_closure(meta: &Metadata, pkg: &Package) -> (Vec<PathBuf>, Vec<SourcePackage>) {
    if meta.resolve.is_none() {
        return (package_sources(pkg), Vec::new());
    }
    let mut seen = vec![pkg.id.clone()];
    let mut stack = vec![pkg.id.clone()];
    let mut watch = Vec::new();
    while let Some(id) = stack.pop() {
        let Some(p) = meta.package(&id) else {
            continue;
        };
        if p.is_local() {
            watch.extend(package_sources(p));
        }
        if let Some(node) = meta.node(&id) {
            for (dep, normal) in &node.deps {
                if *normal && !seen.contains(dep) {
                    seen.push(dep.clone());
                    stack.push(dep.clone());
                }
            }
        }
    }
    (watch, compiled_dependencies(meta, pkg))
}

/// The packages a device build of `pkg` compiles, found along declared, non-optional normal
/// and build dependencies. `cargo metadata`'s resolve unifies features over the whole
/// workspace (a host crate turns on `offload-rt`'s host runtime), so its edges would differ
/// between the crate's author and its users; declared edges do not.
fn compiled_dependencies(meta: &Metadata, pkg: &Package) -> Vec<SourcePackage> {
    let mut seen = vec![pkg.id.clone()];
    let mut stack = vec![pkg.id.clone()];
    let mut out = Vec::new();
    while let Some(id) = stack.pop() {
        let Some(p) = meta.package(&id) else {
            continue;
        };
        for declared in &p.dependencies {
            let compiled = !declared.optional
                && matches!(
                    declared.kind,
                    DependencyKind::Normal | DependencyKind::Build
                );
            if !compiled {
                continue;
            }
            let Some(dep) = meta.resolved_dependency(p, &declared.name) else {
                continue;
            };
            if seen.contains(&dep.id) {
                continue;
            }
            seen.push(dep.id.clone());
            stack.push(dep.id.clone());
            out.push(SourcePackage {
                name: dep.name.clone(),
                version: dep.version.clone(),
                root: dep
                    .manifest_path
                    .parent()
                    .map(Path::to_owned)
                    .unwrap_or_default(),
            });
        }
    }
    out.sort_by(|a, b| (&a.name, &a.version).cmp(&(&b.name, &b.version)));
    out
}

fn package_sources(pkg: &Package) -> Vec<PathBuf> {
    let manifest = pkg.manifest_path.clone();
    let dir = manifest.parent().map(Path::to_owned).unwrap_or_default();
    let mut out = vec![manifest];
    let src = dir.join("src");
    if src.is_dir() {
        out.push(src);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> Value {
        crate::json::parse(text).unwrap()
    }

    #[test]
    fn the_host_runtime_is_found_through_normal_dependencies_only() {
        let package = |name: &str| {
            Package::from_json(&json(&format!(
                r#"{{"id": "{name}", "name": "{name}", "version": "0.1.0",
                    "manifest_path": "/w/{name}/Cargo.toml", "source": null, "metadata": null,
                    "targets": [], "features": {{}}, "dependencies": []}}"#
            )))
            .unwrap()
        };
        let node = |id: &str, deps: &[(&str, &str)], features: &[&str]| {
            let deps: Vec<String> = deps
                .iter()
                .map(|(pkg, kind)| {
                    format!(r#"{{"pkg": "{pkg}", "dep_kinds": [{{"kind": {kind}}}]}}"#)
                })
                .collect();
            Node::from_json(&json(&format!(
                r#"{{"id": "{id}", "deps": [{}], "features": [{}]}}"#,
                deps.join(","),
                features
                    .iter()
                    .map(|f| format!("\"{f}\""))
                    .collect::<Vec<_>>()
                    .join(",")
            )))
            .unwrap()
        };
        let meta = |runtime_features: &[&str], app_to_wrapper: &str| Metadata {
            packages: ["app", "wrapper", "kernels", "offload-rt"]
                .map(package)
                .into(),
            resolve: Some(vec![
                node(
                    "app",
                    &[("kernels", "null"), ("wrapper", app_to_wrapper)],
                    &[],
                ),
                node("wrapper", &[("offload-rt", "null")], &[]),
                node("kernels", &[("offload-rt", "null")], &[]),
                node("offload-rt", &[], runtime_features),
            ]),
            root: None,
            workspace_members: Vec::new(),
            workspace_default_members: Vec::new(),
            workspace_root: PathBuf::new(),
            target_directory: PathBuf::new(),
        };
        let reaches = |m: &Metadata| m.reaches_host_runtime(m.package("app").unwrap());
        assert!(reaches(&meta(&["default", "host"], "null")));
        assert!(!reaches(&meta(&["half"], "null")), "the device API only");
        // Only through a development dependency: the program does not link the runtime.
        let mut through_dev = meta(&["host"], "\"dev\"");
        through_dev.resolve.as_mut().unwrap()[0]
            .deps
            .retain(|(d, _)| d != "kernels");
        assert!(!reaches(&through_dev));
        through_dev.resolve.as_mut().unwrap()[0].deps[0].1 = true;
        assert!(reaches(&through_dev), "through a wrapper library");
    }

    #[test]
    fn a_kernel_crate_gets_the_features_its_host_crate_turns_on() {
        let host = Package::from_json(&json(
            r#"{
                "id": "app 0.1.0", "name": "app", "version": "0.1.0",
                "manifest_path": "/w/app/Cargo.toml", "source": null, "metadata": null,
                "targets": [],
                "features": {
                    "default": ["fast"], "fast": ["k/simd"], "all": ["fast", "k?/wide", "dep:k"],
                    "other": ["unrelated/x"]
                },
                "dependencies": [{
                    "name": "kernels", "rename": "k", "kind": null, "optional": false,
                    "uses_default_features": false, "features": ["base"]
                }]
            }"#,
        ))
        .unwrap();
        let dep = &host.dependencies[0];
        assert_eq!(dep.key, "k");
        assert!(!dep.uses_default_features);
        assert_eq!(host.default_features(), ["default", "fast"]);
        let on = |enabled: &[&str]| {
            let enabled: Vec<String> = enabled.iter().map(|s| s.to_string()).collect();
            host.features_turned_on(dep, &enabled)
        };
        assert_eq!(on(&[]), ["base"]);
        assert_eq!(on(&["default", "fast"]), ["base", "simd"]);
        assert_eq!(on(&["all", "fast", "other"]), ["base", "simd", "wide"]);

        let mut krate = KernelCrate {
            package: "kernels".into(),
            lib_name: "kernels".into(),
            manifest_path: "/w/k/Cargo.toml".into(),
            root: "/w/k".into(),
            watch: Vec::new(),
            deps: Vec::new(),
            default_features: true,
            features: Vec::new(),
            panic: PanicStrategy::Report,
        };
        assert!(krate.feature_args().is_empty());
        krate.default_features = false;
        krate.features = on(&["all"]);
        assert_eq!(
            krate.feature_args(),
            ["--no-default-features", "--features", "base,wide"]
        );
    }

    /// `[package.metadata.offload] panic`: `report` when unset, `"report"` or `"trap"`, and a
    /// typed error naming the key and the manifest for anything else.
    #[test]
    fn the_panic_key_is_report_or_trap() {
        let kernel_crate_with = |offload: &str| {
            let pkg = Package::from_json(&json(&format!(
                r#"{{"id": "k 0.1.0", "name": "k", "version": "0.1.0",
                    "manifest_path": "/w/k/Cargo.toml", "source": null,
                    "metadata": {{"offload": {{"kernels": true{offload}}}}},
                    "targets": [{{"name": "k", "kind": ["lib"], "src_path": "/w/k/src/lib.rs"}}],
                    "features": {{}}, "dependencies": []}}"#
            )))
            .unwrap();
            kernel_crate(&pkg)
        };
        assert_eq!(kernel_crate_with("").unwrap().panic, PanicStrategy::Report);
        for (value, strategy) in [
            ("report", PanicStrategy::Report),
            ("trap", PanicStrategy::Trap),
        ] {
            let krate = kernel_crate_with(&format!(r#", "panic": "{value}""#)).unwrap();
            assert_eq!(krate.panic, strategy);
            assert_eq!(PanicStrategy::parse(value), Some(strategy));
            assert_eq!(strategy.to_string(), value);
        }
        for (bad, shown) in [(r#""abort""#, r#""abort""#), ("true", "true")] {
            let err = kernel_crate_with(&format!(r#", "panic": {bad}"#)).unwrap_err();
            assert!(matches!(err, Error::BadMetadata { .. }), "{err}");
            assert_eq!(
                err.to_string(),
                format!(
                    "/w/k/Cargo.toml: [package.metadata.offload] is malformed: `panic` must be \
                     \"report\" or \"trap\", not {shown}"
                )
            );
        }
        assert_eq!(PanicStrategy::parse("Trap"), None);
        assert_eq!(PanicStrategy::default(), PanicStrategy::Report);
    }

    /// A workspace of `app` (default member) and `lib`, and `dep` outside it.
    fn metadata(root: Option<&str>) -> Metadata {
        let package = |name: &str| {
            format!(
                r#"{{
                    "id": "{name} 0.1.0", "name": "{name}", "version": "0.1.0",
                    "manifest_path": "/w/{name}/Cargo.toml", "source": null,
                    "dependencies": [], "metadata": null,
                    "targets": [{{"name": "{name}", "kind": ["lib"], "src_path": "/w/{name}/src/lib.rs"}}]
                }}"#
            )
        };
        let root = root.map_or("null".to_owned(), |id| format!("\"{id}\""));
        let value = json(&format!(
            r#"{{
                "packages": [{}, {}, {}],
                "workspace_members": ["app 0.1.0", "lib 0.1.0"],
                "workspace_default_members": ["app 0.1.0"],
                "resolve": {{"nodes": [], "root": {root}}},
                "workspace_root": "/w",
                "target_directory": "/w/target"
            }}"#,
            package("app"),
            package("lib"),
            package("dep"),
        ));
        Metadata::from_json(&value).unwrap()
    }

    fn names(ids: Vec<&str>) -> Vec<&str> {
        ids.into_iter()
            .map(|id| id.split(' ').next().unwrap())
            .collect()
    }

    #[test]
    fn the_packages_a_build_selects_are_cargos() {
        let meta = metadata(None);
        let select = |selection: PackageSelection| names(selected(&meta, &selection).unwrap());
        assert_eq!(select(PackageSelection::default()), ["app"]);
        let all = PackageSelection {
            workspace: true,
            ..Default::default()
        };
        assert_eq!(select(all.clone()), ["app", "lib"]);
        let exclude = PackageSelection {
            exclude: vec!["app".into()],
            ..all
        };
        assert_eq!(select(exclude), ["lib"]);
        let named = PackageSelection {
            packages: vec!["dep@0.1.0".into(), "lib".into()],
            ..Default::default()
        };
        assert_eq!(select(named), ["dep", "lib"]);
        let meta = metadata(Some("lib 0.1.0"));
        assert_eq!(
            names(selected(&meta, &PackageSelection::default()).unwrap()),
            ["lib"]
        );
        let err = selected(
            &meta,
            &PackageSelection {
                packages: vec!["dep@9.9.9".into()],
                ..Default::default()
            },
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "package `dep@9.9.9` is not in the package graph (workspace members: app, lib)"
        );
    }
}
