//! C++ with OpenMP target offload from a build script: `tests/fixtures/openmp-app` (a `.cpp`
//! with a target region, a header found through `Build::include`, a macro from
//! `Build::define`) built and run by cargo, its library read with LLVM's tools; a source that
//! does not compile, and a missing clang.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use offload_build::Error;
use offload_build::tooling::env::Env;
use offload_build::tooling::foreign::{self, Language, Options, Source};
use offload_toolchain::Tool;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openmp-app")
}

fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("openmp-fixture")
}

/// `cargo <args>` in the fixture, with the variables of this test's own build removed and
/// `vars` set.
fn cargo(args: &[&str], vars: &[(&str, &str)]) -> Output {
    #[expect(
        clippy::disallowed_methods,
        reason = "the test runs the cargo that runs it"
    )]
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cmd = Command::new(cargo);
    cmd.args(args)
        .arg("--target-dir")
        .arg(target_dir())
        .current_dir(fixture());
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "OFFLOAD_ARCH",
        "OFFLOAD_CLANG",
        "OMP_TARGET_OFFLOAD",
    ] {
        cmd.env_remove(var);
    }
    cmd.envs(vars.iter().copied());
    cmd.output().expect("cargo starts")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn tool(tool: Tool, args: &[&str], file: &Path) -> String {
    let path = tool.for_test().expect("checked by the caller");
    let out = Command::new(path).args(args).arg(file).output().unwrap();
    assert!(
        out.status.success(),
        "{tool} {args:?}: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// The fixture build's `OUT_DIR` (the newest, if several).
fn fixture_out_dir() -> PathBuf {
    let build = target_dir().join("debug/build");
    std::fs::read_dir(&build)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path().join("out")))
        .filter(|out| out.join("liboffload_openmp_openmp_app.a").is_file())
        .max_by_key(|out| std::fs::metadata(out).and_then(|m| m.modified()).ok())
        .expect("the fixture's OUT_DIR holds its OpenMP library")
}

#[test]
fn the_target_region_runs_offloaded_from_a_wrapped_relocatable_library() {
    let tools = [
        Tool::Clang,
        Tool::LlvmReadelf,
        Tool::LlvmObjdump,
        Tool::LlvmAr,
    ];
    if tools.iter().any(|t| t.for_test().is_none()) {
        return;
    }
    let out = cargo(&["run", "--quiet"], &[("OMP_TARGET_OFFLOAD", "MANDATORY")]);
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "the fixture failed ({}):\n{stdout}\n{}",
        out.status,
        text(&out.stderr)
    );
    assert!(stdout.contains("offloaded: yes"), "{stdout}");
    assert!(stdout.contains("scale: 10000 elements OK"), "{stdout}");

    // One member: the relocatable object holding the wrapped image and its registration.
    let out_dir = fixture_out_dir();
    let archive = out_dir.join("liboffload_openmp_openmp_app.a");
    assert_eq!(
        tool(Tool::LlvmAr, &["t"], &archive).trim(),
        "offload_openmp_openmp_app.o"
    );
    let sections = tool(Tool::LlvmReadelf, &["-S", "-W"], &archive);
    let entries = sections
        .lines()
        .find(|l| l.contains(" llvm_offload_entries_"))
        .unwrap_or_else(|| panic!("no offload entry section:\n{sections}"));
    let flags = entries.split_whitespace().nth(8).unwrap_or_default();
    assert!(flags.contains('R'), "entries not retained: {entries}");
    // The device code was linked here: the unlinked `.llvm.offloading` is gone, the linked
    // image is kept where the final link's linker wrapper would not look.
    assert!(!sections.contains(" .llvm.offloading "), "{sections}");
    assert!(
        sections.contains(" .llvm.offloading.relocatable "),
        "{sections}"
    );
    let symbols = tool(Tool::LlvmReadelf, &["-s", "-W"], &archive);
    for symbol in ["__tgt_register_lib", "__tgt_unregister_lib", "scale_all"] {
        assert!(symbols.contains(symbol), "{symbol} missing:\n{symbols}");
    }

    let exe = target_dir().join("debug/openmp-app");
    let images = tool(Tool::LlvmObjdump, &["--offloading"], &exe);
    assert!(images.contains("producer        openmp"), "{images}");
    assert!(
        images.contains(&format!(
            "triple          {}",
            offload_build::tooling::arch::host_triple()
        )),
        "{images}"
    );

    // The header the source includes is watched, found through clang's dependency file.
    let output = std::fs::read_to_string(out_dir.with_file_name("output")).unwrap();
    for file in ["cpp/scale.cpp", "include/scale.h"] {
        let line = format!("cargo:rerun-if-changed={}", fixture().join(file).display());
        assert!(output.lines().any(|l| l == line), "{line}:\n{output}");
    }
}

#[test]
fn a_source_that_does_not_compile_is_reported_with_its_file_and_command() {
    if Tool::Clang.for_test().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.cpp");
    std::fs::write(&path, "extern \"C\" int f() { return missing_name; }\n").unwrap();
    let source = Source {
        language: Language::OpenmpCpp,
        path: path.clone(),
        relocatable: false,
    };
    let err = foreign::build(
        &Env::detect(),
        &[source],
        &[offload_build::OffloadArch::HOST],
        &Options::default(),
        dir.path(),
        "broken-app",
    )
    .unwrap_err();
    let message = err.to_string();
    match &err {
        Error::ForeignCompile {
            path: failed,
            command,
            ..
        } => {
            assert_eq!(failed, &path);
            assert!(command.contains("-fopenmp-targets="), "{command}");
            assert!(command.contains(&path.display().to_string()), "{command}");
        }
        other => panic!("expected ForeignCompile, got {other:?}"),
    }
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(
        message.contains("clang's diagnostics are above"),
        "{message}"
    );
    // Nothing half-written is left where the object would be.
    let leftovers: Vec<_> = walk(&dir.path().join("offload-src"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "o" || e == "tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .flat_map(|e| {
            let path = e.path();
            if path.is_dir() {
                walk(&path)
            } else {
                vec![path]
            }
        })
        .collect()
}

#[test]
fn a_missing_clang_is_one_message_with_the_fix() {
    let out = cargo(&["build"], &[("OFFLOAD_CLANG", "/nonexistent/clang-22")]);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("clang-22 is needed to compile CUDA, HIP and C++ sources"),
        "{stderr}"
    );
    assert!(
        stderr.contains("$OFFLOAD_CLANG = /nonexistent/clang-22"),
        "{stderr}"
    );
    assert!(stderr.contains("apt-get install clang-22"), "{stderr}");
}
