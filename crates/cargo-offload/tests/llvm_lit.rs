//! LLVM's own regression tests of `clang-offload-bundler` and `llvm-offload-binary`, run by
//! LLVM's `lit` with LLVM 22's tools and again with `cargo offload bundle` / `package` in
//! their place, compared test file by test file and RUN line by RUN line against the reviewed
//! list `tests/llvm-lit/known-disagreements.txt` (see `tests/llvm-lit/README.md`).
//!
//! LLVM's files are not part of this repository: the test reads them from
//! `$OFFLOAD_LLVM_TESTS` (default: `llvm-tests` in the tests' target directory), a directory
//! laid out `<commit>/<path>` for each line of `tests/llvm-lit/sources.txt`, which
//! `tests/llvm-lit/README.md` says how to fill from an llvm-project clone. Where they are
//! absent the test is skipped with a `skipped:` line saying so; a missing tool fails under
//! `CI`, as every tool the set-up installs does.

use std::path::{Path, PathBuf};
use std::process::Command;

use offload_toolchain::Tool;

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

/// The files of `sources` that `cache` lacks.
fn missing<'a>(sources: &'a [(String, String)], cache: &Path) -> Vec<&'a (String, String)> {
    sources
        .iter()
        .filter(|(commit, path)| !cache.join(commit).join(path).is_file())
        .collect()
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
    ] {
        let Some(path) = tool.for_test() else { return };
        tools.push(path);
    }
    let [lit, _, clang, .., python] = &tools[..] else {
        unreachable!("one path per tool asked for")
    };

    let sources = sources();
    let cache = cache_dir();
    let absent = missing(&sources, &cache);
    if let Some((commit, path)) = absent.first() {
        eprintln!(
            "skipped: llvm_lit_tests_of_the_offload_tools: {} of LLVM's {} test files are not in \
             {} (the first: {commit}/{path}); set OFFLOAD_LLVM_TESTS to a directory holding \
             them as <commit>/<path> (tests/llvm-lit/README.md)",
            absent.len(),
            sources.len(),
            cache.display()
        );
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
