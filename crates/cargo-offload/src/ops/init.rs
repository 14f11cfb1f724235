//! `cargo offload init [PATH]`: an existing crate made a host crate with a kernel crate, laid
//! out as `new`'s default template lays them out, from that template's texts. Every check runs
//! and every file is staged before the first one is put in place, so a refusal or an error
//! leaves the crate as it was.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use offload_build::tooling::env::Env;
use toml_edit::{Array, DocumentMut, InlineTable, Item, Table, TableLike, Value};

use super::build_status::Style;
use super::dependency_source::DependencySource;
use super::new::{self, TEMPLATES};

#[derive(Debug, Clone)]
/// The crate `cargo offload init` sets up, and how.
pub struct InitOptions {
    /// The crate's directory (or its Cargo.toml).
    pub path: PathBuf,
    /// Name of the kernel crate created in `kernels/` (default: `<package>-kernels`).
    pub kernels_name: Option<String>,
    /// Device targets written to `[package.metadata.offload] arch`, like clang's
    /// --offload-arch: `sm_80,gfx90a,host`.
    pub arch: String,
    /// Where the crate gets offload-rt and offload-build: `registry` (the published crates),
    /// `git=URL[@TAG_OR_COMMIT]`, or `path=DIR` (a checkout; written relative to the crate
    /// unless DIR is absolute). Default: where this cargo-offload came from.
    pub source: Option<DependencySource>,
}

/// The kernel crate's directory, beside the host crate's manifest: the template's layout.
const KERNELS_DIR: &str = "kernels";

/// Why `init` leaves a crate alone.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    #[error(
        "no Cargo.toml in {dir}: `cargo offload init` sets up an existing crate (`cargo offload new PATH` creates one)"
    )]
    NoManifest { dir: String },
    #[error(
        "{manifest} is a virtual workspace manifest (it has no [package]): run `cargo offload init` in the member crate that is to launch kernels"
    )]
    VirtualManifest { manifest: String },
    #[error("{manifest} has no [package] with a `name`")]
    NotAPackage { manifest: String },
    #[error("{manifest} is set up for offload already: it has {found}")]
    AlreadySetUp { manifest: String, found: String },
    #[error(
        "{manifest} has a dependency named `{name}` already ({found}): choose the kernel crate's name with --kernels-name"
    )]
    NameTaken {
        manifest: String,
        name: String,
        found: String,
    },
    #[error(
        "the workspace has a package named `{name}` already: choose the kernel crate's name with --kernels-name"
    )]
    NameInWorkspace { name: String },
    #[error("{path} exists already: the kernel crate goes there; move it away first")]
    KernelsDirExists { path: String },
    #[error(
        "{script} does not call offload_build, and `init` does not edit a build script: add this line to its `main`, then run `cargo offload init` again\n\n    {line}"
    )]
    BuildScriptWithoutOffload { script: String, line: String },
    #[error(
        "{manifest} sets `package.build = {value}`, but the kernels are built and embedded by a build script: remove the setting and run `cargo offload init` again (it writes build.rs, which calls `{line}`)"
    )]
    UnsupportedBuild {
        manifest: String,
        value: String,
        line: String,
    },
}

/// Sets the crate up, or refuses with the crate left as it was.
pub fn init(options: &InitOptions) -> Result<ExitCode> {
    let env = Env::detect();
    let mut plan = plan(options, &env)?;
    let style = Style::for_stderr(&env);
    plan.commit()?;
    for (verb, what) in &plan.statuses {
        eprintln!("{}", style.status(verb, what));
    }
    print!("{}", plan.next_steps);
    Ok(ExitCode::SUCCESS)
}

/// Everything `init` writes, staged, and what it says once it has.
struct Plan {
    /// In the order they are put in place.
    writes: Vec<Staged>,
    statuses: Vec<(&'static str, String)>,
    next_steps: String,
}

enum Staged {
    Dir {
        staged: tempfile::TempDir,
        to: PathBuf,
    },
    File {
        staged: tempfile::NamedTempFile,
        to: PathBuf,
        /// The text it replaces, for putting it back when a later write fails.
        replaces: Option<String>,
    },
}

/// A manifest's text before and after, and the changes in words.
struct ManifestEdit {
    path: PathBuf,
    old: String,
    new: String,
    changes: Vec<String>,
}

fn read_manifest(path: &Path) -> Result<(String, DocumentMut)> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", shown(path)))?;
    let doc = text
        .parse()
        .with_context(|| format!("parsing {}", shown(path)))?;
    Ok((text, doc))
}

fn plan(options: &InitOptions, env: &Env) -> Result<Plan> {
    let given = match options.path.file_name() {
        Some(n) if n == "Cargo.toml" && options.path.is_file() => options.path.parent(),
        _ => Some(options.path.as_path()),
    }
    .filter(|p| !p.as_os_str().is_empty())
    .unwrap_or(Path::new("."));
    if !given.join("Cargo.toml").is_file() {
        return Err(Refusal::NoManifest { dir: shown(given) }.into());
    }
    let dir = given
        .canonicalize()
        .with_context(|| format!("resolving {}", given.display()))?;
    let manifest = dir.join("Cargo.toml");
    let at = shown(&manifest);
    let (text, mut doc) = read_manifest(&manifest)?;

    let name = package_name(&doc, &at)?;
    let kernels_name = options
        .kernels_name
        .clone()
        .unwrap_or_else(|| format!("{name}-kernels"));
    new::check_package_name(&kernels_name)?;
    if kernels_name == name {
        bail!("the kernel crate needs a name of its own, not the host crate's `{name}`");
    }
    check_host(&doc, &at, &kernels_name)?;
    let arch = offload_build::tooling::arch::parse_list(&options.arch, "--arch")?
        .iter()
        .map(|a| a.name())
        .collect::<Vec<_>>()
        .join(",");
    let kernels_dir = dir.join(KERNELS_DIR);
    if kernels_dir.symlink_metadata().is_ok() {
        return Err(Refusal::KernelsDirExists {
            path: shown(&kernels_dir),
        }
        .into());
    }
    let build_script = build_script(&doc, &dir, &at)?;
    let workspace = workspace(&manifest, &dir, env)?;
    if workspace.members.contains(&kernels_name) {
        return Err(Refusal::NameInWorkspace { name: kernels_name }.into());
    }

    let template = default_template();
    let source = new::chosen_source(options.source.clone())?;
    let vars = new::variables(&name, &kernels_name, &source, &dir);
    let additions = Additions::new(template, &vars, &arch);
    let mut changes = edit_host(&mut doc, &additions, &at)?;
    let mut edits = Vec::new();
    match workspace.enclosing {
        None => changes.extend(edit_workspace(&mut doc, &additions, KERNELS_DIR, &at)?),
        Some(root) => {
            let path = root.join("Cargo.toml");
            let (old, mut root_doc) = read_manifest(&path)?;
            let member = member_path(&root, &kernels_dir)?;
            let changes = edit_workspace(&mut root_doc, &additions, &member, &shown(&path))?;
            if !changes.is_empty() {
                let new = checked(root_doc, &shown(&path))?;
                edits.push(ManifestEdit {
                    path,
                    old,
                    new,
                    changes,
                });
            }
        }
    }
    // Last, so that an interrupted `init` never leaves the manifest naming a kernel crate that
    // is not there.
    edits.push(ManifestEdit {
        new: checked(doc, &at)?,
        path: manifest.clone(),
        old: text,
        changes,
    });

    // Every check has passed: stage the files, which `commit` puts in place.
    let mut writes = vec![stage_kernel_crate(template, &vars, &dir, &kernels_dir)?];
    let mut statuses = vec![(
        "Created",
        format!("kernel crate `{kernels_name}` in {}", shown(&kernels_dir)),
    )];
    if let BuildScript::Write(path) = &build_script {
        let text = new::render(template_file(template, "build.rs"), &vars);
        writes.push(stage_file(path, &text, None, permissions(&manifest)?)?);
        statuses.push(("Created", shown(path)));
    }
    for edit in edits {
        let mode = permissions(&edit.path)?;
        writes.push(stage_file(&edit.path, &edit.new, Some(edit.old), mode)?);
        statuses.push((
            "Modified",
            format!("{}: {}", shown(&edit.path), edit.changes.join(", ")),
        ));
    }
    if let BuildScript::Keep(path) = &build_script {
        statuses.push((
            "Unchanged",
            format!("{} (it calls offload_build already)", shown(path)),
        ));
    }

    let next_steps = next_steps(
        &new::render(template_file(template, "src/main.rs"), &vars),
        &shown(&kernels_dir.join("src/lib.rs")),
        &dir,
    );
    Ok(Plan {
        writes,
        statuses,
        next_steps,
    })
}

fn permissions(path: &Path) -> Result<std::fs::Permissions> {
    Ok(std::fs::metadata(path)
        .with_context(|| format!("reading {}", shown(path)))?
        .permissions())
}

fn default_template() -> &'static new::Template {
    TEMPLATES
        .iter()
        .find(|t| t.name == "default")
        .expect("`new` has a default template")
}

fn template_file(template: &new::Template, path: &str) -> &'static str {
    template
        .file(path)
        .unwrap_or_else(|| panic!("the default template has {path}"))
}

/// `path` as the user would type it: relative to the current directory when below it.
fn shown(path: &Path) -> String {
    let relative = std::env::current_dir()
        .and_then(|cwd| cwd.canonicalize())
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_owned));
    match relative {
        Some(r) if r.as_os_str().is_empty() => ".".to_owned(),
        Some(r) => r.display().to_string(),
        None => path.display().to_string(),
    }
}

fn package_name(doc: &DocumentMut, manifest: &str) -> Result<String, Refusal> {
    let Some(package) = doc.get("package").and_then(Item::as_table_like) else {
        return Err(if doc.contains_key("workspace") {
            Refusal::VirtualManifest {
                manifest: manifest.to_owned(),
            }
        } else {
            Refusal::NotAPackage {
                manifest: manifest.to_owned(),
            }
        });
    };
    package
        .get("name")
        .and_then(Item::as_str)
        .map(str::to_owned)
        .ok_or_else(|| Refusal::NotAPackage {
            manifest: manifest.to_owned(),
        })
}

/// Refuses a crate that has offload set up already, or a dependency in the kernel crate's
/// name.
fn check_host(doc: &DocumentMut, manifest: &str, kernels_name: &str) -> Result<(), Refusal> {
    let already = |found: String| Refusal::AlreadySetUp {
        manifest: manifest.to_owned(),
        found,
    };
    let metadata = doc
        .get("package")
        .and_then(|p| p.get("metadata"))
        .and_then(|m| m.get("offload"));
    if metadata.is_some() {
        return Err(already("[package.metadata.offload]".to_owned()));
    }
    for package in ["offload-rt", "offload-build"] {
        if let Some(found) = find_dependency(doc, package) {
            return Err(already(format!("`{package}` in {found}")));
        }
    }
    if let Some(found) = find_dependency(doc, kernels_name) {
        return Err(Refusal::NameTaken {
            manifest: manifest.to_owned(),
            name: kernels_name.to_owned(),
            found,
        });
    }
    Ok(())
}

/// Where the manifest depends on `package` (by key or `package = …`): `[dependencies]`,
/// `[target.'cfg(unix)'.build-dependencies]`, ….
fn find_dependency(doc: &DocumentMut, package: &str) -> Option<String> {
    const KINDS: [&str; 5] = [
        "dependencies",
        "dev-dependencies",
        "build-dependencies",
        "dev_dependencies",
        "build_dependencies",
    ];
    let names = |table: &dyn TableLike| {
        table.iter().any(|(key, item)| {
            key == package || item.get("package").and_then(Item::as_str) == Some(package)
        })
    };
    for kind in KINDS {
        if doc
            .get(kind)
            .and_then(Item::as_table_like)
            .is_some_and(names)
        {
            return Some(format!("[{kind}]"));
        }
    }
    let targets = doc.get("target").and_then(Item::as_table_like)?;
    for (target, item) in targets.iter() {
        for kind in KINDS {
            if item
                .get(kind)
                .and_then(Item::as_table_like)
                .is_some_and(names)
            {
                return Some(format!("[target.'{target}'.{kind}]"));
            }
        }
    }
    None
}

enum BuildScript {
    Write(PathBuf),
    Keep(PathBuf),
}

/// The package's build script: to write from the template where there is none; kept where it
/// calls offload_build already; else a refusal that gives the line to add.
fn build_script(doc: &DocumentMut, dir: &Path, manifest: &str) -> Result<BuildScript> {
    let line = build_line();
    let path = match doc.get("package").and_then(|p| p.get("build")) {
        None => dir.join("build.rs"),
        Some(item) => match (item.as_bool(), item.as_str()) {
            (Some(true), _) => dir.join("build.rs"),
            (_, Some(path)) => dir.join(path),
            _ => {
                return Err(Refusal::UnsupportedBuild {
                    manifest: manifest.to_owned(),
                    value: item.to_string().trim().to_owned(),
                    line,
                }
                .into());
            }
        },
    };
    if !path.exists() {
        return Ok(BuildScript::Write(path));
    }
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", shown(&path)))?;
    if text.contains("offload_build") {
        Ok(BuildScript::Keep(path))
    } else {
        Err(Refusal::BuildScriptWithoutOffload {
            script: shown(&path),
            line,
        }
        .into())
    }
}

/// The call a host crate's `build.rs` makes, as the template's build.rs makes it.
fn build_line() -> String {
    template_file(default_template(), "build.rs")
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("offload_build::"))
        .expect("the default template's build.rs calls offload_build")
        .to_owned()
}

/// The crate's workspace, as cargo reads it.
struct Workspace {
    /// Its root, when that is not the crate itself.
    enclosing: Option<PathBuf>,
    /// Its members' package names.
    members: Vec<String>,
}

fn workspace(manifest: &Path, dir: &Path, env: &Env) -> Result<Workspace> {
    let cargo = env.get_untracked("CARGO").map(PathBuf::from);
    let workspace =
        offload_build::tooling::workspace::workspace_members(manifest, cargo.as_deref())
            .context("finding the workspace the crate belongs to")?;
    let root = workspace
        .root
        .canonicalize()
        .with_context(|| format!("resolving {}", workspace.root.display()))?;
    Ok(Workspace {
        enclosing: (root != dir).then_some(root),
        members: workspace.names,
    })
}

/// `kernels_dir` as a `members` entry of the workspace at `root`.
fn member_path(root: &Path, kernels_dir: &Path) -> Result<String> {
    let relative = kernels_dir.strip_prefix(root).with_context(|| {
        format!(
            "the workspace root {} is not a parent of {}: add the kernel crate to its members by hand",
            shown(root),
            shown(kernels_dir)
        )
    })?;
    let parts: Option<Vec<&str>> = relative.iter().map(|c| c.to_str()).collect();
    Ok(parts
        .with_context(|| format!("{} is not valid UTF-8", kernels_dir.display()))?
        .join("/"))
}

/// What `init` adds to manifests: the default template's `Cargo.toml` rendered for this crate,
/// and the architectures.
struct Additions {
    template: DocumentMut,
    kernels_name: String,
    arch: String,
}

impl Additions {
    fn new(template: &new::Template, vars: &[(&str, String)], arch: &str) -> Additions {
        let text = new::render(template_file(template, "Cargo.toml"), vars);
        let kernels_name = vars
            .iter()
            .find(|(k, _)| *k == "kernels_name")
            .map(|(_, v)| v.clone())
            .expect("the variables name the kernel crate");
        Additions {
            template: text
                .parse()
                .expect("the default template's Cargo.toml is TOML"),
            kernels_name,
            arch: arch.to_owned(),
        }
    }

    /// The template's item at `path`.
    fn item(&self, path: &[&str]) -> &Item {
        path.iter()
            .try_fold(self.template.as_item(), |item, key| item.get(key))
            .unwrap_or_else(|| panic!("the default template has {}", path.join(".")))
    }
}

/// Adds `[package.metadata.offload] arch`, the kernel crate and offload-rt as dependencies and
/// offload-build as a build dependency; returns what it changed, in words.
fn edit_host(doc: &mut DocumentMut, add: &Additions, manifest: &str) -> Result<Vec<String>> {
    let offload = add
        .item(&["package", "metadata", "offload"])
        .as_table()
        .expect("[package.metadata.offload] is a table in the template");
    let mut table = Table::new();
    *table.decor_mut() = offload.decor().clone();
    table.insert("arch", toml_edit::value(add.arch.as_str()));
    table_at(doc.as_item_mut(), &["package", "metadata"], manifest)?
        .insert("offload", Item::Table(table));

    let dependencies = table_at(doc.as_item_mut(), &["dependencies"], manifest)?;
    for key in [add.kernels_name.as_str(), "offload-rt"] {
        dependencies.insert(key, add.item(&["dependencies", key]).clone());
    }
    table_at(doc.as_item_mut(), &["build-dependencies"], manifest)?.insert(
        "offload-build",
        add.item(&["build-dependencies", "offload-build"]).clone(),
    );
    // An inline table keeps its spacing in its last entry: lay it out afresh.
    for kind in ["dependencies", "build-dependencies"] {
        if let Some(table) = doc.get_mut(kind).and_then(Item::as_inline_table_mut) {
            table.fmt();
        }
    }
    Ok(vec![
        format!("[package.metadata.offload] arch = \"{}\"", add.arch),
        format!("dependencies `{}`, `offload-rt`", add.kernels_name),
        "build-dependency `offload-build`".to_owned(),
    ])
}

/// Makes `member` a member of the workspace whose root manifest is `doc` (its `[workspace]`
/// made where there is none), and adds the `cfg(offload_device)` check-cfg to its
/// `[workspace.lints.rust]`, which the kernel crate inherits.
fn edit_workspace(
    doc: &mut DocumentMut,
    add: &Additions,
    member: &str,
    manifest: &str,
) -> Result<Vec<String>> {
    let mut changes = Vec::new();
    let workspace = table_at(doc.as_item_mut(), &["workspace"], manifest)?;
    match workspace.get_mut("members") {
        None => {
            // As the template has it when the package is the root; else the member alone,
            // the root package being a member whether listed or not.
            let members = if member == KERNELS_DIR {
                add.item(&["workspace", "members"]).clone()
            } else {
                toml_edit::value(Array::from_iter([member]))
            };
            workspace.insert("members", members);
            changes.push(format!("workspace member `{member}`"));
        }
        Some(item) => {
            let members = item
                .as_array_mut()
                .with_context(|| format!("`workspace.members` in {manifest} is not an array"))?;
            let listed = members.iter().any(|m| {
                m.as_str()
                    .is_some_and(|m| m.trim_start_matches("./").trim_end_matches('/') == member)
            });
            if !listed {
                push_like_the_last(members, member);
                changes.push(format!("workspace member `{member}`"));
            }
        }
    }

    let lint = add.item(&["workspace", "lints", "rust", "unexpected_cfgs"]);
    let check_cfg = lint
        .get("check-cfg")
        .and_then(Item::as_array)
        .expect("the template's unexpected_cfgs has a check-cfg array");
    let rust = table_at(doc.as_item_mut(), &["workspace", "lints", "rust"], manifest)?;
    let added = match rust.get_mut("unexpected_cfgs") {
        None => {
            rust.insert("unexpected_cfgs", lint.clone());
            true
        }
        Some(item) => {
            if let Some(level) = item.as_str() {
                // A bare level: the same level, with the check-cfg list.
                let mut table = lint
                    .as_inline_table()
                    .expect("the template's unexpected_cfgs is an inline table")
                    .clone();
                table.insert("level", Value::from(level));
                let decor = item.as_value().map(|v| v.decor().clone());
                let mut value = Value::InlineTable(table);
                if let Some(decor) = decor {
                    *value.decor_mut() = decor;
                }
                *item = Item::Value(value);
                true
            } else if let Some(table) = item.as_table_like_mut() {
                match table.get_mut("check-cfg") {
                    None => {
                        table.insert("check-cfg", toml_edit::value(check_cfg.clone()));
                        true
                    }
                    Some(list) => {
                        let list = list.as_array_mut().with_context(|| {
                            format!(
                                "`workspace.lints.rust.unexpected_cfgs.check-cfg` in {manifest} is not an array"
                            )
                        })?;
                        let mut added = false;
                        for cfg in check_cfg.iter().filter_map(Value::as_str) {
                            if !list.iter().any(|c| c.as_str() == Some(cfg)) {
                                push_like_the_last(list, cfg);
                                added = true;
                            }
                        }
                        added
                    }
                }
            } else {
                bail!(
                    "`workspace.lints.rust.unexpected_cfgs` in {manifest} is neither a level nor a table"
                );
            }
        }
    };
    if added {
        let cfgs: Vec<&str> = check_cfg.iter().filter_map(Value::as_str).collect();
        changes.push(format!(
            "[workspace.lints.rust] check-cfg `{}`",
            cfgs.join("`, `")
        ));
    }
    Ok(changes)
}

/// The table at `path` below `root`, made where missing: implicit, so that a header is
/// written only for a table that holds values, and inline below an inline table.
fn table_at<'a>(
    root: &'a mut Item,
    path: &[&str],
    manifest: &str,
) -> Result<&'a mut dyn TableLike> {
    let mut item = root;
    for (depth, key) in path.iter().enumerate() {
        let inline = item.is_inline_table();
        let table = item.as_table_like_mut().with_context(|| {
            format!("`{}` in {manifest} is not a table", path[..depth].join("."))
        })?;
        item = table.entry(key).or_insert_with(|| {
            if inline {
                Item::Value(Value::InlineTable(InlineTable::new()))
            } else {
                let mut table = Table::new();
                table.set_implicit(true);
                Item::Table(table)
            }
        });
    }
    item.as_table_like_mut()
        .with_context(|| format!("`{}` in {manifest} is not a table", path.join(".")))
}

/// Appends `text` to `array` laid out as its last element is: on a line of its own in a
/// multi-line array, after a space in a one-line one; a comment after the last element stays
/// on that element's line.
fn push_like_the_last(array: &mut Array, text: &str) {
    let raw =
        |s: Option<&toml_edit::RawString>| s.and_then(|s| s.as_str()).unwrap_or("").to_owned();
    let mut value = Value::from(text);
    let Some(last) = array.iter_mut().last() else {
        array.push_formatted(value);
        return;
    };
    let indent = match raw(last.decor().prefix()).rfind('\n') {
        Some(at) => format!("\n{}", &raw(last.decor().prefix())[at + 1..]),
        None => " ".to_owned(),
    };
    // Without a trailing comma, what stands between the last element and `]` is that
    // element's suffix: move it after the new one.
    let mut trailing = raw(Some(array.trailing()));
    if !array.trailing_comma() {
        let last = array.iter_mut().last().expect("the array is not empty");
        trailing = raw(last.decor().suffix()) + &trailing;
        last.decor_mut().set_suffix("");
    }
    let prefix = match trailing.rfind('\n') {
        Some(at) => {
            let (comment, close) = (&trailing[..at], &trailing[at + 1..]);
            let prefix = if indent.starts_with('\n') {
                format!("{comment}{indent}")
            } else {
                format!("{comment}\n")
            };
            trailing = format!("\n{close}");
            prefix
        }
        None => indent,
    };
    value.decor_mut().set_prefix(prefix);
    array.push_formatted(value);
    array.set_trailing(trailing);
}

/// The manifest's new text, once it reads back as TOML.
fn checked(doc: DocumentMut, manifest: &str) -> Result<String> {
    let text = doc.to_string();
    text.parse::<DocumentMut>()
        .with_context(|| format!("the edited {manifest} would not be valid TOML:\n{text}"))?;
    Ok(text)
}

/// The template's kernel crate (its files under `kernels/`), written to a temporary directory
/// beside the manifest.
fn stage_kernel_crate(
    template: &new::Template,
    vars: &[(&str, String)],
    dir: &Path,
    kernels_dir: &Path,
) -> Result<Staged> {
    let staged = tempfile::Builder::new()
        .prefix(".kernels-")
        .tempdir_in(dir)
        .with_context(|| format!("creating a temporary directory in {}", shown(dir)))?;
    std::fs::set_permissions(staged.path(), permissions(dir)?)
        .with_context(|| format!("setting the permissions of {}", staged.path().display()))?;
    let prefix = format!("{KERNELS_DIR}/");
    for (rel, text) in template.files {
        let Some(rel) = rel.strip_prefix(&prefix) else {
            continue;
        };
        let dest = staged.path().join(rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&dest, new::render(text, vars))
            .with_context(|| format!("writing {}", dest.display()))?;
    }
    Ok(Staged::Dir {
        staged,
        to: kernels_dir.to_owned(),
    })
}

/// `text` in a temporary file beside `to`, with the permissions `to` is to have.
fn stage_file(
    to: &Path,
    text: &str,
    replaces: Option<String>,
    mode: std::fs::Permissions,
) -> Result<Staged> {
    use std::io::Write as _;
    let dir = to.parent().unwrap_or(Path::new("."));
    let mut staged = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("creating a temporary file in {}", shown(dir)))?;
    staged
        .write_all(text.as_bytes())
        .and_then(|()| staged.as_file().sync_all())
        .and_then(|()| std::fs::set_permissions(staged.path(), mode))
        .with_context(|| format!("writing {}", staged.path().display()))?;
    Ok(Staged::File {
        staged,
        to: to.to_owned(),
        replaces,
    })
}

impl Plan {
    /// Puts every staged file in place; when one fails, takes back those before it.
    fn commit(&mut self) -> Result<()> {
        let mut done: Vec<(PathBuf, Option<Option<String>>)> = Vec::new();
        for staged in std::mem::take(&mut self.writes) {
            let result = match staged {
                Staged::Dir { staged, to } => std::fs::rename(staged.path(), &to)
                    .map(|()| {
                        let _ = staged.keep();
                        done.push((to.clone(), None));
                    })
                    .with_context(|| format!("creating {}", shown(&to))),
                Staged::File {
                    staged,
                    to,
                    replaces,
                } => {
                    let persisted = match &replaces {
                        Some(_) => staged.persist(&to),
                        None => staged.persist_noclobber(&to),
                    };
                    persisted
                        .map(|_| done.push((to.clone(), Some(replaces))))
                        .with_context(|| format!("writing {}", shown(&to)))
                }
            };
            if let Err(err) = result {
                for (path, undo) in done.into_iter().rev() {
                    let _ = match undo {
                        None => std::fs::remove_dir_all(&path),
                        Some(None) => std::fs::remove_file(&path),
                        Some(Some(text)) => std::fs::write(&path, text),
                    };
                }
                return Err(err);
            }
        }
        Ok(())
    }
}

/// Where to write kernels and how to launch one: the default template's `main.rs`, its
/// launching function and the lines calling it.
fn next_steps(main_rs: &str, kernels_lib: &str, dir: &Path) -> String {
    let mut text =
        format!("\nWrite kernels in {kernels_lib} and launch them from the host crate:\n\n");
    if let Some(snippet) = launch_snippet(main_rs) {
        for line in snippet.lines() {
            if line.is_empty() {
                text.push('\n');
            } else {
                text.push_str(&format!("    {line}\n"));
            }
        }
        text.push('\n');
    }
    let here = std::env::current_dir()
        .and_then(|cwd| cwd.canonicalize())
        .is_ok_and(|cwd| cwd == dir);
    if here {
        text.push_str("Then run it: cargo offload run\n");
    } else {
        text.push_str(&format!(
            "Then run it: cd {} && cargo offload run\n",
            shown(dir)
        ));
    }
    text
}

/// The `use offload_rt` line of `main_rs`, its function that launches the kernel (with its
/// doc comment), and the lines of `run` that open the device and call that function,
/// unindented; blank lines between.
fn launch_snippet(main_rs: &str) -> Option<String> {
    let lines: Vec<&str> = main_rs.lines().collect();
    let import = lines.iter().find(|l| l.starts_with("use offload_rt"))?;
    let signature = lines.iter().position(|l| l.starts_with("fn saxpy("))?;
    let first = lines[..signature]
        .iter()
        .rposition(|l| !l.starts_with("///"))
        .map_or(0, |i| i + 1);
    let last = signature + lines[signature..].iter().position(|l| *l == "}")?;
    let device = lines.iter().find(|l| l.contains("Device::best()?"))?;
    let call = lines.iter().find(|l| l.contains("= saxpy(&device"))?;
    let mut snippet = format!("{import}\n\n");
    for line in &lines[first..=last] {
        snippet.push_str(line);
        snippet.push('\n');
    }
    snippet.push('\n');
    for line in [device, call] {
        snippet.push_str(line.trim_start());
        snippet.push('\n');
    }
    Some(snippet)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The additions with fixed dependency specs, so that the expected texts do not depend on
    /// where the checkout is.
    fn additions(name: &str, arch: &str) -> Additions {
        let vars = new::variables(
            name,
            &format!("{name}-kernels"),
            &DependencySource::Registry,
            Path::new(name),
        );
        Additions::new(default_template(), &vars, arch)
    }

    fn edited(text: &str, workspace_member: Option<&str>) -> String {
        let add = additions("app", "host");
        let mut doc: DocumentMut = text.parse().unwrap();
        check_host(&doc, "Cargo.toml", &add.kernels_name).unwrap();
        edit_host(&mut doc, &add, "Cargo.toml").unwrap();
        if let Some(member) = workspace_member {
            edit_workspace(&mut doc, &add, member, "Cargo.toml").unwrap();
        }
        checked(doc, "Cargo.toml").unwrap()
    }

    #[test]
    fn a_plain_crate_keeps_its_text_and_gets_the_templates_additions() {
        let text = r#"[package]
name = "app"   # the app
version = "0.3.0"
edition = "2024"

# Errors, the easy way.
[dependencies]
anyhow = "1"        # aligned

[profile.release]
lto = true
"#;
        assert_eq!(
            edited(text, Some(KERNELS_DIR)),
            r#"[package]
name = "app"   # the app
version = "0.3.0"
edition = "2024"

# Device targets, like clang's --offload-arch. `host` is the CPU as a device; add e.g.
# "sm_80", "sm_90", "gfx90a", "gfx942:xnack+" for GPUs.
[package.metadata.offload]
arch = "host"

# Errors, the easy way.
[dependencies]
anyhow = "1"        # aligned
app-kernels = { path = "kernels" }
offload-rt = "0.1.0"

[profile.release]
lto = true

[build-dependencies]
offload-build = "0.1.0"

[workspace]
members = [".", "kernels"]

[workspace.lints.rust]
unexpected_cfgs = { level = "warn", check-cfg = ['cfg(offload_device)'] }
"#
        );
    }

    #[test]
    fn a_workspace_root_gets_the_member_in_its_own_layout_and_keeps_its_lints() {
        let text = r#"[package]
name = "app"
version = "0.1.0"

[package.metadata.docs.rs]
all-features = true

[workspace]
members = [
    ".",
    "tools", # helpers
]

[workspace.lints.rust]
unsafe_code = "forbid"
unexpected_cfgs = "deny"

[workspace.lints.clippy]
pedantic = "warn"
"#;
        assert_eq!(
            edited(text, Some(KERNELS_DIR)),
            r#"[package]
name = "app"
version = "0.1.0"

[package.metadata.docs.rs]
all-features = true

# Device targets, like clang's --offload-arch. `host` is the CPU as a device; add e.g.
# "sm_80", "sm_90", "gfx90a", "gfx942:xnack+" for GPUs.
[package.metadata.offload]
arch = "host"

[workspace]
members = [
    ".",
    "tools", # helpers
    "kernels",
]

[workspace.lints.rust]
unsafe_code = "forbid"
unexpected_cfgs = { level = "deny", check-cfg = ['cfg(offload_device)'] }

[workspace.lints.clippy]
pedantic = "warn"

[dependencies]
app-kernels = { path = "kernels" }
offload-rt = "0.1.0"

[build-dependencies]
offload-build = "0.1.0"
"#
        );
    }

    #[test]
    fn check_cfg_lists_are_merged() {
        let add = additions("app", "host");
        let root = r#"[workspace]
members = ["app"]
[workspace.lints.rust]
unexpected_cfgs = { level = "warn", check-cfg = ['cfg(tokio_unstable)'] }
"#;
        let mut doc: DocumentMut = root.parse().unwrap();
        let changes = edit_workspace(&mut doc, &add, "app/kernels", "Cargo.toml").unwrap();
        assert_eq!(
            changes,
            [
                "workspace member `app/kernels`",
                "[workspace.lints.rust] check-cfg `cfg(offload_device)`"
            ]
        );
        let text = checked(doc, "Cargo.toml").unwrap();
        assert_eq!(
            text,
            r#"[workspace]
members = ["app", "app/kernels"]
[workspace.lints.rust]
unexpected_cfgs = { level = "warn", check-cfg = ['cfg(tokio_unstable)', "cfg(offload_device)"] }
"#
        );
        // A second time changes nothing.
        let mut doc: DocumentMut = text.parse().unwrap();
        assert!(
            edit_workspace(&mut doc, &add, "app/kernels", "Cargo.toml")
                .unwrap()
                .is_empty()
        );
        assert_eq!(doc.to_string(), text);
    }

    #[test]
    fn an_enclosing_workspace_without_members_or_lints_gets_both() {
        let add = additions("app", "sm_80,host");
        let mut doc: DocumentMut = "[workspace]\nresolver = \"3\"\n".parse().unwrap();
        edit_workspace(&mut doc, &add, "crates/app/kernels", "Cargo.toml").unwrap();
        assert_eq!(
            checked(doc, "Cargo.toml").unwrap(),
            r#"[workspace]
resolver = "3"
members = ["crates/app/kernels"]

[workspace.lints.rust]
unexpected_cfgs = { level = "warn", check-cfg = ['cfg(offload_device)'] }
"#
        );
    }

    #[test]
    fn inline_dependency_tables_stay_inline() {
        let out = edited(
            "dependencies = { anyhow = \"1\" }\n\n[package]\nname = \"app\"\n",
            None,
        );
        assert!(
            out.starts_with(
                "dependencies = { anyhow = \"1\", app-kernels = { path = \"kernels\" }, offload-rt = \"0.1.0\" }\n"
            ),
            "{out}"
        );
    }

    #[test]
    fn a_crate_set_up_already_or_a_taken_name_is_refused() {
        let refused = |text: &str| {
            let doc: DocumentMut = text.parse().unwrap();
            check_host(&doc, "Cargo.toml", "app-kernels")
                .unwrap_err()
                .to_string()
        };
        let base = "[package]\nname = \"app\"\n";
        assert_eq!(
            refused(&format!(
                "{base}[package.metadata.offload]\narch = \"host\"\n"
            )),
            "Cargo.toml is set up for offload already: it has [package.metadata.offload]"
        );
        assert_eq!(
            refused(&format!(
                "{base}[dependencies]\nrt = {{ package = \"offload-rt\", version = \"0.1\" }}\n"
            )),
            "Cargo.toml is set up for offload already: it has `offload-rt` in [dependencies]"
        );
        assert_eq!(
            refused(&format!(
                "{base}[target.'cfg(unix)'.build-dependencies]\noffload-build = \"0.1\"\n"
            )),
            "Cargo.toml is set up for offload already: it has `offload-build` in \
             [target.'cfg(unix)'.build-dependencies]"
        );
        assert!(
            refused(&format!("{base}[dev-dependencies]\napp-kernels = \"1\"\n"))
                .starts_with("Cargo.toml has a dependency named `app-kernels` already")
        );
    }

    #[test]
    fn a_virtual_manifest_is_refused() {
        let doc: DocumentMut = "[workspace]\nmembers = [\"a\"]\n".parse().unwrap();
        assert!(matches!(
            package_name(&doc, "Cargo.toml"),
            Err(Refusal::VirtualManifest { .. })
        ));
    }

    #[test]
    fn the_templates_agree_with_what_init_reads_from_them() {
        assert_eq!(build_line(), "offload_build::Build::new().compile();");
        let add = additions("app", "host");
        assert_eq!(
            add.item(&["dependencies", "app-kernels", "path"]).as_str(),
            Some(KERNELS_DIR)
        );
        let vars = new::variables(
            "app",
            "app-kernels",
            &DependencySource::Registry,
            Path::new("app"),
        );
        let main_rs = new::render(template_file(default_template(), "src/main.rs"), &vars);
        let snippet = launch_snippet(&main_rs).unwrap();
        assert!(snippet.starts_with("use offload_rt::"), "{snippet}");
        assert!(
            snippet.contains("let device = Device::best()?;"),
            "{snippet}"
        );
        assert!(snippet.contains("app_kernels::saxpy.launch("), "{snippet}");
        assert!(
            snippet.contains("Ok((dy.to_vec()?, report))\n}\n"),
            "{snippet}"
        );
        assert!(
            snippet.ends_with("let (out, report) = saxpy(&device, 2.0, &x, &y)?;\n"),
            "{snippet}"
        );
    }

    #[test]
    fn a_write_that_fails_takes_back_those_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let vars = new::variables(
            "app",
            "app-kernels",
            &DependencySource::Registry,
            Path::new("app"),
        );
        let kernels = dir.path().join(KERNELS_DIR);
        let manifest = dir.path().join("Cargo.toml");
        std::fs::write(&manifest, "[package]\n").unwrap();
        let mode = permissions(&manifest).unwrap();
        let script = dir.path().join("build.rs");
        let mut plan = Plan {
            writes: vec![
                stage_kernel_crate(default_template(), &vars, dir.path(), &kernels).unwrap(),
                stage_file(
                    &manifest,
                    "edited",
                    Some("[package]\n".into()),
                    mode.clone(),
                )
                .unwrap(),
                stage_file(&script, "fn main() {}", None, mode).unwrap(),
            ],
            statuses: Vec::new(),
            next_steps: String::new(),
        };
        // Written by someone else since the checks: not to be overwritten.
        std::fs::write(&script, "theirs").unwrap();
        assert!(plan.commit().is_err());
        assert!(!kernels.exists());
        assert_eq!(std::fs::read_to_string(&manifest).unwrap(), "[package]\n");
        assert_eq!(std::fs::read_to_string(&script).unwrap(), "theirs");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 2, "temporary files left: {left:?}");
    }

    #[test]
    fn array_pushes_follow_the_layout() {
        let mut doc: DocumentMut = "a = []\nb = [\"x\"]\nc = [\n  \"x\", # one\n  \"y\"\n]\n"
            .parse()
            .unwrap();
        for key in ["a", "b", "c"] {
            push_like_the_last(doc[key].as_array_mut().unwrap(), "z");
        }
        assert_eq!(
            doc.to_string(),
            "a = [\"z\"]\nb = [\"x\", \"z\"]\nc = [\n  \"x\", # one\n  \"y\",\n  \"z\"\n]\n"
        );
        let mut doc: DocumentMut = "a = [\"x\", # one\n]\nb = [ \"x\" ]\n".parse().unwrap();
        for key in ["a", "b"] {
            push_like_the_last(doc[key].as_array_mut().unwrap(), "z");
        }
        assert_eq!(
            doc.to_string(),
            "a = [\"x\", # one\n\"z\",\n]\nb = [ \"x\", \"z\" ]\n"
        );
    }
}
