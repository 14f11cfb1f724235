//! LLVM's own regression tests of `clang-offload-bundler` and `llvm-offload-binary`, run by
//! LLVM's `lit` with LLVM 22's tools and again with `cargo offload bundle` / `package` in
//! their place, compared test file by test file and RUN line by RUN line against the reviewed
//! list `tests/llvm-lit/known-disagreements.txt` (see `tests/llvm-lit/README.md`).
//!
//! The LLVM files are read with git from the revisions `tests/llvm-lit/sources.txt` names,
//! once, into the tests' target directory (or taken from `$OFFLOAD_LLVM_TESTS`, a directory
//! laid out `<commit>/<path>`). Where they cannot be had, or a tool is missing, the test is
//! skipped with a `skipped:` line, and fails under `CI`.

use std::path::{Path, PathBuf};
use std::process::Command;

use offload_toolchain::Tool;

const LLVM_PROJECT: &str = "https://github.com/llvm/llvm-project";

fn harness_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/llvm-lit")
}

/// `(commit, path)` of each LLVM file, from `sources.txt`.
fn sources() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(harness_dir().join("sources.txt")).unwrap();
    text.lines()
        .map(|line| line.split('#').next().unwrap_or("").trim())
        .filter(|line| !line.is_empty())
        .map(|line| {
            let (commit, path) = line
                .split_once(char::is_whitespace)
                .unwrap_or_else(|| panic!("sources.txt: `COMMIT PATH` expected: {line}"));
            assert!(
                commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()),
                "sources.txt: not a full commit hash: {commit}"
            );
            (commit.to_owned(), path.trim().to_owned())
        })
        .collect()
}

fn cache_dir() -> PathBuf {
    std::env::var_os("OFFLOAD_LLVM_TESTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("llvm-tests"))
}

fn git(git: &Path, repo: &Path, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = Command::new(git)
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
        .map_err(|e| format!("could not run git: {e}"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(format!(
            "git {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Reads every file of `sources` missing from `cache` from the LLVM repository: one shallow,
/// tree-less fetch per revision, then the file's blob (git fetches the trees and the blob it
/// needs, not the repository).
fn fill_cache(
    git_program: &Path,
    sources: &[(String, String)],
    cache: &Path,
) -> Result<(), String> {
    let missing: Vec<&(String, String)> = sources
        .iter()
        .filter(|(commit, path)| !cache.join(commit).join(path).is_file())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let repo = cache.join("llvm-project.git");
    if !repo.join("HEAD").is_file() {
        std::fs::create_dir_all(&repo).map_err(|e| e.to_string())?;
        git(git_program, &repo, &["init", "--quiet", "--bare"])?;
        for (key, value) in [
            ("core.repositoryformatversion", "1"),
            ("extensions.partialClone", "origin"),
            ("remote.origin.url", LLVM_PROJECT),
            ("remote.origin.promisor", "true"),
            ("remote.origin.partialclonefilter", "tree:0"),
        ] {
            git(git_program, &repo, &["config", key, value])?;
        }
    }
    let mut fetched = std::collections::HashSet::new();
    for (commit, path) in missing {
        if fetched.insert(commit) {
            git(
                git_program,
                &repo,
                &[
                    "fetch",
                    "--quiet",
                    "--depth=1",
                    "--filter=tree:0",
                    "origin",
                    commit,
                ],
            )?;
        }
        let blob = git(
            git_program,
            &repo,
            &["cat-file", "blob", &format!("{commit}:{path}")],
        )?;
        let target = cache.join(commit).join(path);
        std::fs::create_dir_all(target.parent().unwrap()).map_err(|e| e.to_string())?;
        std::fs::write(&target, blob).map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[test]
fn llvm_lit_tests_of_the_offload_tools() {
    let mut tools = Vec::new();
    for tool in [
        Tool::Lit,
        Tool::FileCheck,
        Tool::Clang,
        Tool::ClangOffloadBundler,
        Tool::ClangOffloadPackager,
        Tool::LlvmOffloadBinary,
        Tool::LlvmObjdump,
        Tool::LlvmObjcopy,
        Tool::LlvmAr,
        Tool::Obj2yaml,
        Tool::Python3,
        Tool::Git,
    ] {
        let Some(path) = tool.for_test() else { return };
        tools.push(path);
    }
    let [lit, _, clang, .., python, git_program] = &tools[..] else {
        unreachable!()
    };

    let sources = sources();
    let cache = cache_dir();
    if let Err(e) = fill_cache(git_program, &sources, &cache) {
        let message = format!(
            "LLVM's test files could not be read from {LLVM_PROJECT} into {} ({e}); \
             set OFFLOAD_LLVM_TESTS to a directory holding them as <commit>/<path>",
            cache.display()
        );
        if std::env::var_os("CI").is_some() {
            panic!("{message}");
        }
        eprintln!("skipped: {message}");
        return;
    }

    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("llvm-lit");
    let suite = scratch.join("suite");
    if suite.exists() {
        std::fs::remove_dir_all(&suite).unwrap();
    }
    for (commit, path) in &sources {
        let target = suite.join(path);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(cache.join(commit).join(path), &target).unwrap();
    }

    let harness = harness_dir();
    let out = Command::new(python)
        .arg(harness.join("run_llvm_tests.py"))
        .arg("--suite")
        .arg(&suite)
        .arg("--tests")
        .arg(harness.join("sources.txt"))
        .arg("--known")
        .arg(harness.join("known-disagreements.txt"))
        .arg("--cargo-offload")
        .arg(env!("CARGO_BIN_EXE_cargo-offload"))
        .arg("--llvm-bin")
        .arg(offload_toolchain::llvm_bin_dir())
        .arg("--lit")
        .arg(lit)
        .arg("--clang")
        .arg(clang)
        .arg("--work")
        .arg(scratch.join("work"))
        .arg("--json")
        .arg(scratch.join("results.json"))
        .output()
        .unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{report}");
    assert!(
        out.status.success(),
        "LLVM's lit tests of the offload tools differ from tests/llvm-lit/known-disagreements.txt \
         ({}; full results in {}):\n{report}",
        out.status,
        scratch.join("results.json").display()
    );
}
