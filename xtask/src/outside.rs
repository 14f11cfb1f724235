//! The crates as a project outside this repository gets them: `cargo publish --dry-run` of
//! the workspace (cargo packages each crate and builds it from its package, in dependency
//! order, against a temporary registry), a project made by `cargo offload new --source
//! registry` in a temporary directory built and run against the packaged crates, and the
//! README's "Use it in your own project" commands run as written.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Result, cargo, cargo_home, output, root, run, target_dir};

/// The crates published from the workspace.
const PUBLISHED: &[&str] = &[
    "offload-format",
    "offload-toolchain",
    "offload-build",
    "offload-tools",
    "offload-rt",
    "offload-macros",
    "cargo-offload",
];

/// The README section whose first `sh` block is run.
const README_SECTION: &str = "## Use it in your own project";

/// `cargo publish --workspace --dry-run`: every crate packaged and verified. Uncommitted
/// changes are allowed so that a local run checks the tree as it is.
pub fn publish_dry_run() -> Result {
    forget_earlier_packages()?;
    run(cargo().args([
        "publish",
        "--workspace",
        "--dry-run",
        "--locked",
        "--allow-dirty",
    ]))
}

/// Forgets what an earlier dry run left of the packages of the same version: cargo keeps the
/// packages of its temporary (local) registry unpacked in its source cache, and the crates it
/// built from them in the target directory, where a package from a registry counts as fresh
/// whatever its files say. A later dry run would build the crates that depend on them against
/// the old sources, or link the old libraries.
fn forget_earlier_packages() -> Result {
    let cargo_home = cargo_home().ok_or("neither CARGO_HOME nor HOME is set")?;
    let version = workspace_version()?;
    let sources = cargo_home.join("registry").join("src");
    let mut unpacked_dirs = Vec::new();
    if let Ok(registries) = std::fs::read_dir(&sources) {
        for registry in registries.flatten() {
            // Local registries' directories are named `-<hash>`; crates.io's and other remote
            // ones' after their host.
            if registry.file_name().to_string_lossy().starts_with('-') {
                unpacked_dirs.push(registry.path());
            }
        }
    }
    for registry in &unpacked_dirs {
        for name in PUBLISHED {
            remove_dir(&registry.join(format!("{name}-{version}")))?;
        }
    }
    // The dry run verifies in the dev profile. A unit's dep-info (`deps/<crate>-<hash>.d`)
    // names its sources; removing its fingerprint (`.fingerprint/<package>-<hash>`) makes
    // cargo build it again.
    let profile = target_dir().join("debug");
    let Ok(deps) = std::fs::read_dir(profile.join("deps")) else {
        return Ok(());
    };
    for entry in deps.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(unit) = file.strip_suffix(".d") else {
            continue;
        };
        let Some((krate, hash)) = unit.rsplit_once('-') else {
            continue;
        };
        let Some(name) = PUBLISHED.iter().find(|n| n.replace('-', "_") == krate) else {
            continue;
        };
        let dep_info = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let built_from_package = unpacked_dirs.iter().any(|registry| {
            dep_info.contains(&*registry.join(format!("{name}-{version}")).to_string_lossy())
        });
        if built_from_package {
            remove_dir(&profile.join(".fingerprint").join(format!("{name}-{hash}")))?;
        }
    }
    Ok(())
}

/// Removes `dir` and what it holds; one that is not there is no error.
fn remove_dir(dir: &Path) -> Result {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("removing {}: {e}", dir.display())),
    }
}

/// A new project depending on the packaged crates by version (`offload-rt = "0.1.0"`), the
/// crates supplied by `[patch.crates-io]` in the temporary directory's cargo configuration
/// (what `cargo publish` would upload, unpacked), built and run by `cargo offload run`, then
/// as two MPI ranks by `cargo offload run --np 2`; its manifests and lock file must name
/// nothing in the checkout.
pub fn registry_project(path: &OsStr) -> Result {
    let version = workspace_version()?;
    // The `.crate` files `cargo publish` would upload (its dry run keeps them elsewhere).
    let mut package = cargo();
    package.args(["package", "--no-verify", "--locked", "--allow-dirty"]);
    for name in PUBLISHED {
        package.args(["-p", name]);
    }
    run(&mut package)?;
    let dir = Scratch::new("registry")?;
    let packaged = dir.0.join("packaged");
    std::fs::create_dir_all(&packaged).map_err(|e| format!("{}: {e}", packaged.display()))?;
    let mut patch = String::from("[patch.crates-io]\n");
    for name in PUBLISHED {
        let file = target_dir()
            .join("package")
            .join(format!("{name}-{version}.crate"));
        if !file.is_file() {
            return Err(format!(
                "{} is missing: `cargo package` should have written it",
                file.display()
            ));
        }
        run(Command::new("tar")
            .arg("-xzf")
            .arg(&file)
            .arg("-C")
            .arg(&packaged))?;
        let unpacked = packaged.join(format!("{name}-{version}"));
        patch.push_str(&format!("{name} = {{ path = {:?} }}\n", unpacked));
    }
    let config = dir.0.join(".cargo");
    std::fs::create_dir_all(&config).map_err(|e| format!("{}: {e}", config.display()))?;
    std::fs::write(config.join("config.toml"), patch)
        .map_err(|e| format!("{}: {e}", config.display()))?;
    run(Command::new("cargo")
        .current_dir(&dir.0)
        .env("PATH", path)
        .args(["offload", "new", "app", "--source", "registry"]))?;
    let app = dir.0.join("app");
    let offload_run = |args: &[&str]| {
        let mut cmd = Command::new("cargo");
        cmd.current_dir(&app)
            .env("PATH", path)
            .env(
                "CARGO_TARGET_DIR",
                target_dir().join("outside").join("registry"),
            )
            .args(["offload", "run"])
            .args(args);
        cmd
    };
    run(&mut offload_run(&[]))?;
    // `--np`: the program as two ranks under `mpirun`, each running the kernel.
    let ranks = output(
        offload_run(&["--np", "2"])
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
    )?;
    let ok = ranks.lines().filter(|l| l.ends_with("elements OK")).count();
    if ok != 2 {
        return Err(format!(
            "`cargo offload run --np 2` printed {ok} `elements OK` lines, not one per rank:\n{ranks}"
        ));
    }
    let expected = format!("offload-rt = \"{version}\"");
    let manifest = read(&app.join("Cargo.toml"))?;
    if !manifest.contains(&expected) {
        return Err(format!(
            "{}: no `{expected}` line:\n{manifest}",
            app.join("Cargo.toml").display()
        ));
    }
    names_nothing_in_the_checkout(&[
        app.join("Cargo.toml"),
        app.join("kernels/Cargo.toml"),
        app.join("Cargo.lock"),
    ])
}

/// The README's commands for a project of one's own, run as written in a temporary directory
/// with `<repository>` read as this checkout (cloned, so only committed files count).
/// `cargo install` installs into the directory, whose `bin` comes first on `PATH`; the builds
/// share a target directory under this checkout's, so that a second run is quick.
pub fn readme_commands() -> Result {
    let readme = read(&root().join("README.md"))?;
    let script = first_sh_block_after(&readme, README_SECTION)
        .ok_or_else(|| format!("README.md has no `sh` block under `{README_SECTION}`"))?;
    if !script.contains("<repository>") {
        return Err(format!(
            "README.md's `{README_SECTION}` block no longer clones `<repository>`"
        ));
    }
    let script = script.replace("<repository>", &root().display().to_string());
    let dir = Scratch::new("readme")?;
    let install = dir.0.join("install");
    let mut path = vec![install.join("bin")];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let path: OsString = std::env::join_paths(path).map_err(|e| e.to_string())?;
    run(Command::new("bash")
        .args(["-euxc", &script])
        .current_dir(&dir.0)
        .env("PATH", path)
        .env("CARGO_INSTALL_ROOT", &install)
        .env(
            "CARGO_TARGET_DIR",
            target_dir().join("outside").join("readme"),
        ))?;
    let app = dir.0.join("my-app");
    names_nothing_in_the_checkout(&[app.join("Cargo.toml"), app.join("kernels/Cargo.toml")])
}

/// The body of the first fenced `sh` block after the line `heading`.
fn first_sh_block_after(text: &str, heading: &str) -> Option<String> {
    let after = &text[text.find(&format!("\n{heading}\n"))?..];
    let body = &after[after.find("\n```sh\n")? + "\n```sh\n".len()..];
    Some(body[..body.find("\n```")?].to_owned())
}

fn names_nothing_in_the_checkout(files: &[PathBuf]) -> Result {
    let checkout = root()
        .canonicalize()
        .map_err(|e| format!("{}: {e}", root().display()))?;
    for file in files {
        let text = read(file)?;
        if text.contains(&*checkout.to_string_lossy()) || text.contains("path = \"/") {
            return Err(format!(
                "{} names a path into the checkout or an absolute path:\n{text}",
                file.display()
            ));
        }
    }
    Ok(())
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The workspace's version, from `[workspace.package]` of the root manifest.
fn workspace_version() -> Result<String> {
    let manifest = read(&root().join("Cargo.toml"))?;
    manifest
        .split("[workspace.package]")
        .nth(1)
        .and_then(|section| {
            section
                .lines()
                .take_while(|l| !l.starts_with('['))
                .find_map(|l| l.strip_prefix("version = \""))
        })
        .and_then(|v| v.strip_suffix('"'))
        .map(str::to_owned)
        .ok_or_else(|| "the root Cargo.toml has no [workspace.package] version".to_owned())
}

/// A new directory in the system's temporary directory (outside the checkout), removed when
/// dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Result<Scratch> {
        let dir =
            std::env::temp_dir().join(format!("offload-outside-{tag}-{}", std::process::id()));
        if dir.starts_with(root()) {
            return Err(format!("{} is inside the checkout", dir.display()));
        }
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_has_the_commands_and_they_clone_the_repository() {
        let readme = read(&root().join("README.md")).unwrap();
        let script = first_sh_block_after(&readme, README_SECTION).unwrap();
        assert!(script.starts_with("git clone <repository>"), "{script}");
        assert!(script.contains("cargo offload run"), "{script}");
    }

    #[test]
    fn the_version_is_read() {
        let version = workspace_version().unwrap();
        assert!(version.split('.').count() == 3, "{version}");
    }
}
