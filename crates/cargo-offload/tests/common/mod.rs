//! Helpers shared by the integration tests: the real tools they compare against.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use offload_toolchain::Tool;

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/cargo-offload sits two levels below the workspace root")
        .to_owned()
}

/// A scratch directory of the tests, kept between runs so that later builds are incremental.
pub fn target_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

/// `cargo offload <args>` in `cwd`, run the way cargo runs a subcommand; the tests' own
/// build's variables do not leak into the builds it starts.
pub fn cargo_offload_command(cwd: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cargo-offload"));
    cmd.arg("offload").args(args).current_dir(cwd);
    for var in ["RUSTFLAGS", "CARGO_TARGET_DIR", "CARGO_ENCODED_RUSTFLAGS"] {
        cmd.env_remove(var);
    }
    cmd
}

/// A project `cargo offload new <args>` writes (the last argument its name) under `parent`,
/// anew, with the workspace's lock file so it builds offline.
pub fn new_project_in(parent: &Path, args: &[&str]) -> PathBuf {
    let project = parent.join(args.last().expect("a project name"));
    if project.exists() {
        std::fs::remove_dir_all(&project).unwrap();
    }
    std::fs::create_dir_all(parent).unwrap();
    check(
        &cargo_offload_command(parent, &[&["new"][..], args].concat())
            .output()
            .expect("cargo-offload starts"),
        &format!("cargo offload new {}", args.join(" ")),
    );
    std::fs::copy(
        workspace_root().join("Cargo.lock"),
        project.join("Cargo.lock"),
    )
    .unwrap();
    project
}

/// Copies a fixture project to a scratch directory with the workspace's lockfile, so that its
/// dependencies resolve to the versions the workspace uses.
pub fn fixture(name: &str) -> PathBuf {
    fixture_as(name, name)
}

/// [`fixture`] into a directory of its own, `copy`, for a test that changes it (tests running
/// at once must not rewrite one copy).
pub fn fixture_as(name: &str, copy: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let dst = target_dir("fixtures").join(copy);
    copy_dir(&src, &dst);
    let rt = workspace_root().join("crates");
    for manifest in walk(&dst).into_iter().filter(|p| p.ends_with("Cargo.toml")) {
        let text = std::fs::read_to_string(&manifest).unwrap();
        let text = text.replace("../../../../../", &format!("{}/", rt.display()));
        std::fs::write(&manifest, text).unwrap();
    }
    std::fs::copy(workspace_root().join("Cargo.lock"), dst.join("Cargo.lock")).unwrap();
    dst
}

pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

pub fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let to = dst.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &to);
        } else {
            let bytes = std::fs::read(entry.path()).unwrap();
            if std::fs::read(&to).ok().as_ref() != Some(&bytes) {
                std::fs::write(&to, bytes).unwrap();
            }
        }
    }
}

/// A finished command's stdout, after asserting it succeeded (both streams on failure).
pub fn check(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A tool, or `None` after a visible skip line; in CI a missing tool fails, naming its package.
pub fn llvm_tool(tool: Tool) -> Option<PathBuf> {
    tool.for_test()
}

/// `ptxas`, or `None` after a visible skip line; in CI a missing one fails.
pub fn ptxas() -> Option<PathBuf> {
    Tool::Ptxas.for_test()
}
