//! Projects of odd but ordinary shapes build and run: a path with spaces and non-ASCII
//! characters, a workspace with a plain member, a host crate with two kernel crates that both
//! define a kernel named `scale`, a kernel crate with its own no_std dependency from
//! crates.io, a feature passed through to a kernel crate, debug and release side by side, and
//! target directories outside the project given by `--target-dir` and by `CARGO_TARGET_DIR`.

use std::path::Path;
use std::process::Command;

mod common;
use common::{cargo_offload_command, check, fixture_as, target_dir};

fn runs(binary: &Path, factor: u32) {
    let out = Command::new(binary)
        .env("OFFLOAD_DEVICE", "cpu")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", binary.display()));
    let stdout = check(&out, &binary.display().to_string());
    assert!(
        stdout.contains(&format!("odd workspace: OK (factor {factor})")),
        "{stdout}"
    );
}

#[test]
fn an_odd_workspace_under_an_odd_path_builds_debug_and_release_side_by_side() {
    let project = fixture_as("odd-workspace", "odd dir/ünï côdé/odd-workspace");
    let outside = target_dir("odd targets");
    let debug_target = outside.join("cargo target dir");
    let release_target = outside.join("flag target dir ü");

    // Debug, with the feature, into CARGO_TARGET_DIR.
    let mut debug =
        cargo_offload_command(&project, &["build", "-p", "app", "--features", "triple"]);
    debug.env("CARGO_TARGET_DIR", &debug_target);
    let out = debug.output().unwrap();
    check(&out, "the debug build with `triple`, into CARGO_TARGET_DIR");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "Embedded app (6 device images; kernels_one: sm_80 cubin+ptx, host elf; \
             kernels_two: sm_80 cubin+ptx, host elf)"
        ),
        "both kernel crates embedded:\n{stderr}"
    );

    // Release, without it, into --target-dir.
    let out = cargo_offload_command(
        &project,
        &[
            "build",
            "--release",
            "-p",
            "app",
            "--target-dir",
            &release_target.to_string_lossy(),
        ],
    )
    .output()
    .unwrap();
    check(&out, "the release build into --target-dir");

    // Each binary keeps its own images: the feature reached the kernel crate in one only.
    runs(&debug_target.join("debug/app"), 3);
    runs(&release_target.join("release/app"), 2);
    assert!(
        !project.join("target").exists(),
        "nothing is built inside the project"
    );
}
