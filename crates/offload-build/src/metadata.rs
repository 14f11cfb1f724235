//! What the package graph says: which dependencies are kernel crates, and the
//! `[package.metadata.offload]` settings of the host package.

use std::path::{Path, PathBuf};

use cargo_metadata::{MetadataCommand, Package};

use crate::error::{Error, Result};

/// A kernel crate: a `no_std` library whose `#[kernel]` functions become device code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelCrate {
    /// Package name (`saxpy-kernels`).
    pub package: String,
    /// Library name as rustc sees it (`saxpy_kernels`); images carry it as `offload.module`.
    pub lib_name: String,
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
}

/// A package whose sources go into a kernel crate's images.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcePackage {
    pub name: String,
    pub version: String,
    /// The directory holding its `Cargo.toml`.
    pub root: PathBuf,
}

/// The host package and the kernel crates it embeds.
#[derive(Debug, Clone)]
pub struct HostPackage {
    pub name: String,
    pub manifest_path: PathBuf,
    /// `[package.metadata.offload] arch`, if set.
    pub arch: Option<String>,
    /// Kernel crates among the direct dependencies, in dependency order.
    pub kernel_crates: Vec<KernelCrate>,
    /// The workspace's target directory as `cargo metadata` reports it.
    pub target_directory: PathBuf,
}

/// Reads the package graph of the package at `manifest_path`.
pub fn host_package(manifest_path: &Path, cargo: Option<&Path>) -> Result<HostPackage> {
    let meta = read_metadata(manifest_path, cargo)?;
    let host = package_at(&meta, manifest_path)?;
    let arch = declared_arch(host)?;

    let mut kernel_crates = Vec::new();
    for dep in &host.dependencies {
        if dep.kind != cargo_metadata::DependencyKind::Normal {
            continue;
        }
        let Some(pkg) = meta.packages.iter().find(|p| {
            p.name.as_str() == dep.name
                && dep.req.matches(&p.version)
                && match &dep.path {
                    Some(path) => p.manifest_path.parent() == Some(path.as_path()),
                    None => true,
                }
        }) else {
            continue;
        };
        if is_kernel_crate(pkg)? {
            kernel_crates.push(kernel_crate_in(&meta, pkg)?);
        }
    }
    Ok(HostPackage {
        name: host.name.to_string(),
        manifest_path: manifest_path.to_owned(),
        arch,
        kernel_crates,
        target_directory: meta.target_directory.into_std_path_buf(),
    })
}

fn offload_table(pkg: &Package) -> Result<Option<&serde_json::Map<String, serde_json::Value>>> {
    match pkg.metadata.get("offload") {
        None => Ok(None),
        Some(serde_json::Value::Object(map)) => Ok(Some(map)),
        Some(_) => Err(Error::BadMetadata {
            manifest: pkg.manifest_path.clone().into_std_path_buf(),
            reason: "`offload` must be a table".to_owned(),
        }),
    }
}

fn is_kernel_crate(pkg: &Package) -> Result<bool> {
    match offload_table(pkg)?.and_then(|t| t.get("kernels")) {
        None => Ok(false),
        Some(serde_json::Value::Bool(b)) => Ok(*b),
        Some(_) => Err(Error::BadMetadata {
            manifest: pkg.manifest_path.clone().into_std_path_buf(),
            reason: "`kernels` must be true or false".to_owned(),
        }),
    }
}

fn arch_value(value: &serde_json::Value, pkg: &Package) -> Result<String> {
    match value {
        serde_json::Value::String(s) => Ok(s.clone()),
        serde_json::Value::Array(items) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .map(|v| v.join(","))
            .ok_or_else(|| Error::BadMetadata {
                manifest: pkg.manifest_path.clone().into_std_path_buf(),
                reason: "`arch` must be a string or an array of strings".to_owned(),
            }),
        _ => Err(Error::BadMetadata {
            manifest: pkg.manifest_path.clone().into_std_path_buf(),
            reason: "`arch` must be a string or an array of strings".to_owned(),
        }),
    }
}

/// A kernel crate read on its own (for `cargo offload package-kernels` and `verify`).
#[derive(Debug, Clone)]
pub struct KernelPackage {
    pub krate: KernelCrate,
    /// Its `[package.metadata.offload] arch`, if set.
    pub arch: Option<String>,
    /// The target directory its workspace builds into.
    pub target_directory: PathBuf,
}

/// The kernel crate at `manifest_path` itself.
pub fn kernel_package(manifest_path: &Path, cargo: Option<&Path>) -> Result<KernelPackage> {
    let meta = read_metadata(manifest_path, cargo)?;
    let pkg = package_at(&meta, manifest_path)?;
    if !is_kernel_crate(pkg)? {
        return Err(Error::BadMetadata {
            manifest: pkg.manifest_path.clone().into_std_path_buf(),
            reason: "not a kernel crate (`[package.metadata.offload] kernels = true` is missing)"
                .to_owned(),
        });
    }
    Ok(KernelPackage {
        krate: kernel_crate_in(&meta, pkg)?,
        arch: declared_arch(pkg)?,
        target_directory: meta.target_directory.clone().into_std_path_buf(),
    })
}

/// `cargo metadata` for `manifest_path`: offline first (only the dependency edges are needed),
/// then online when a dependency is not in the local cache yet.
fn read_metadata(manifest_path: &Path, cargo: Option<&Path>) -> Result<cargo_metadata::Metadata> {
    let command = |offline: bool| {
        let mut cmd = MetadataCommand::new();
        cmd.manifest_path(manifest_path);
        if let Some(cargo) = cargo {
            cmd.cargo_path(cargo);
        }
        if offline {
            cmd.other_options(vec!["--offline".to_owned()]);
        }
        cmd
    };
    Ok(command(true).exec().or_else(|_| command(false).exec())?)
}

/// The package whose manifest is `manifest_path` (as given, or with links resolved).
fn package_at<'a>(meta: &'a cargo_metadata::Metadata, manifest_path: &Path) -> Result<&'a Package> {
    let canonical = std::fs::canonicalize(manifest_path).ok();
    meta.packages
        .iter()
        .find(|p| {
            let path = p.manifest_path.as_std_path();
            path == manifest_path || Some(path) == canonical.as_deref()
        })
        .ok_or_else(|| Error::BadMetadata {
            manifest: manifest_path.to_owned(),
            reason: "the package is not in `cargo metadata`'s output".to_owned(),
        })
}

/// `[package.metadata.offload] arch` of a package, if set.
fn declared_arch(pkg: &Package) -> Result<Option<String>> {
    offload_table(pkg)?
        .and_then(|t| t.get("arch").cloned())
        .map(|v| arch_value(&v, pkg))
        .transpose()
}

fn kernel_crate_in(meta: &cargo_metadata::Metadata, pkg: &Package) -> Result<KernelCrate> {
    let mut krate = kernel_crate(pkg)?;
    let (watch, deps) = dependency_closure(meta, pkg);
    krate.watch = watch;
    krate.deps = deps;
    Ok(krate)
}

pub(crate) fn kernel_crate(pkg: &Package) -> Result<KernelCrate> {
    let lib = pkg
        .targets
        .iter()
        .find(|t| t.is_lib())
        .ok_or_else(|| Error::BadMetadata {
            manifest: pkg.manifest_path.clone().into_std_path_buf(),
            reason: "a kernel crate must have a library target".to_owned(),
        })?;
    let manifest_path = pkg.manifest_path.clone().into_std_path_buf();
    let root = manifest_path
        .parent()
        .map(Path::to_owned)
        .unwrap_or_default();
    Ok(KernelCrate {
        package: pkg.name.to_string(),
        lib_name: lib.name.replace('-', "_"),
        watch: vec![root.clone()],
        deps: Vec::new(),
        manifest_path,
        root,
    })
}

/// What `pkg`'s images depend on: the manifests and source directories of it and of every
/// local package it depends on (to watch), and the packages its device builds compile (to
/// hash).
fn dependency_closure(
    meta: &cargo_metadata::Metadata,
    pkg: &Package,
) -> (Vec<PathBuf>, Vec<SourcePackage>) {
    let Some(resolve) = &meta.resolve else {
        return (package_sources(pkg), Vec::new());
    };
    let mut seen = vec![pkg.id.clone()];
    let mut stack = vec![pkg.id.clone()];
    let mut watch = Vec::new();
    while let Some(id) = stack.pop() {
        let Some(p) = meta.packages.iter().find(|p| p.id == id) else {
            continue;
        };
        if p.source.is_none() {
            watch.extend(package_sources(p));
        }
        if let Some(node) = resolve.nodes.iter().find(|n| n.id == id) {
            for dep in &node.deps {
                let normal = dep
                    .dep_kinds
                    .iter()
                    .any(|k| k.kind == cargo_metadata::DependencyKind::Normal);
                if normal && !seen.contains(&dep.pkg) {
                    seen.push(dep.pkg.clone());
                    stack.push(dep.pkg.clone());
                }
            }
        }
    }
    (watch, compiled_dependencies(meta, resolve, pkg))
}

/// The packages a device build of `pkg` compiles, found along declared, non-optional normal
/// and build dependencies. `cargo metadata`'s resolve unifies features over the whole
/// workspace (a host crate turns on `offload-rt`'s host runtime), so its edges would differ
/// between the crate's author and its users; declared edges do not.
fn compiled_dependencies(
    meta: &cargo_metadata::Metadata,
    resolve: &cargo_metadata::Resolve,
    pkg: &Package,
) -> Vec<SourcePackage> {
    let mut seen = vec![pkg.id.clone()];
    let mut stack = vec![pkg.id.clone()];
    let mut out = Vec::new();
    while let Some(id) = stack.pop() {
        let (Some(p), Some(node)) = (
            meta.packages.iter().find(|p| p.id == id),
            resolve.nodes.iter().find(|n| n.id == id),
        ) else {
            continue;
        };
        for declared in &p.dependencies {
            let compiled = !declared.optional
                && matches!(
                    declared.kind,
                    cargo_metadata::DependencyKind::Normal | cargo_metadata::DependencyKind::Build
                );
            if !compiled {
                continue;
            }
            let resolved = node.deps.iter().find_map(|d| {
                meta.packages
                    .iter()
                    .find(|q| q.id == d.pkg && q.name.as_str() == declared.name)
            });
            let Some(dep) = resolved else { continue };
            if seen.contains(&dep.id) {
                continue;
            }
            seen.push(dep.id.clone());
            stack.push(dep.id.clone());
            out.push(SourcePackage {
                name: dep.name.to_string(),
                version: dep.version.to_string(),
                root: dep
                    .manifest_path
                    .parent()
                    .map(|d| d.as_std_path().to_owned())
                    .unwrap_or_default(),
            });
        }
    }
    out.sort_by(|a, b| (&a.name, &a.version).cmp(&(&b.name, &b.version)));
    out
}

fn package_sources(pkg: &Package) -> Vec<PathBuf> {
    let manifest = pkg.manifest_path.clone().into_std_path_buf();
    let dir = manifest.parent().map(Path::to_owned).unwrap_or_default();
    let mut out = vec![manifest];
    let src = dir.join("src");
    if src.is_dir() {
        out.push(src);
    }
    out
}
