//! `cargo offload doctor` on this machine (which CI sets up completely) and with
//! prerequisites taken away through the overrides a user would use.

use std::process::{Command, Output};

use serde_json::Value;

fn doctor(envs: &[(&str, &str)]) -> (Output, Vec<Value>) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cargo-offload"));
    cmd.args(["offload", "doctor", "--json"])
        .envs(envs.iter().copied());
    let out = cmd.output().expect("cargo-offload starts");
    let findings: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor --json printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    (out, findings.as_array().expect("a JSON array").clone())
}

fn finding<'a>(findings: &'a [Value], check: &str) -> &'a Value {
    findings
        .iter()
        .find(|f| f["check"] == check)
        .unwrap_or_else(|| panic!("no `{check}` check in {findings:#?}"))
}

#[test]
fn every_prerequisite_is_checked_and_found_on_a_set_up_machine() {
    if offload_toolchain::Tool::LdLld.for_test().is_none() {
        return;
    }
    let (out, findings) = doctor(&[]);
    for check in [
        "host toolchain",
        "device toolchain",
        "rust-src",
        "LLVM versions",
        "ld.lld",
        "device linker",
    ] {
        assert_eq!(finding(&findings, check)["status"], "ok", "{findings:#?}");
    }
    for check in [
        "ptxas",
        "clang",
        "llvm-objcopy",
        "CUDA driver",
        "HIP driver",
    ] {
        let status = &finding(&findings, check)["status"];
        assert!(status == "ok" || status == "warning", "{check}: {status}");
    }
    assert_eq!(finding(&findings, "CPU device")["status"], "ok");
    if offload_toolchain::Tool::Ptxas.find().is_ok() {
        let detail = finding(&findings, "ptxas")["detail"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(detail.contains("sm_80"), "{detail}");
    }
    assert!(out.status.success(), "{findings:#?}");
}

#[test]
fn what_is_missing_fails_with_the_command_that_fixes_it() {
    let (out, findings) = doctor(&[
        ("OFFLOAD_LD_LLD", "/nonexistent/ld.lld"),
        ("OFFLOAD_PTXAS", "/nonexistent/ptxas"),
        ("OFFLOAD_NIGHTLY_TOOLCHAIN", "nightly-1999-01-01"),
    ]);
    assert_eq!(out.status.code(), Some(1), "{findings:#?}");

    // Only GPU images need the nightly: a warning, with the command that installs it.
    let toolchain = finding(&findings, "device toolchain");
    assert_eq!(toolchain["status"], "warning");
    assert!(
        toolchain["detail"]
            .as_str()
            .unwrap()
            .contains("GPU images (--offload-arch sm_*, gfx*) need it"),
        "{toolchain}"
    );
    assert_eq!(
        toolchain["fix"],
        "cargo offload setup  (or rustup toolchain install nightly-1999-01-01 --profile minimal \
         --component rust-src)"
    );

    let lld = finding(&findings, "ld.lld");
    assert_eq!(lld["status"], "error");
    assert!(
        lld["detail"]
            .as_str()
            .unwrap()
            .contains("$OFFLOAD_LD_LLD = /nonexistent/ld.lld"),
        "{lld}"
    );
    assert!(
        lld["fix"]
            .as_str()
            .unwrap()
            .contains("apt-get install lld-22")
    );

    // Without ptxas builds still work (PTX only): a warning, not an error.
    let ptxas = finding(&findings, "ptxas");
    assert_eq!(ptxas["status"], "warning");
    assert!(
        ptxas["fix"]
            .as_str()
            .unwrap()
            .contains("nvidia-cuda-toolkit")
    );
}

#[test]
fn text_output_ends_with_a_verdict() {
    let out = Command::new(env!("CARGO_BIN_EXE_cargo-offload"))
        .args(["offload", "doctor"])
        .env("OFFLOAD_LD_LLD", "/nonexistent/ld.lld")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("error") && l.contains("ld.lld")),
        "{text}"
    );
    assert!(text.contains("fix: sudo apt-get install lld-22"), "{text}");
    assert!(
        text.trim_end()
            .lines()
            .last()
            .unwrap()
            .starts_with("builds cannot work"),
        "{text}"
    );
}

#[test]
fn a_clang_of_another_major_gets_the_message_a_build_gets() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("clang");
    std::fs::write(&fake, "#!/bin/sh\necho 'clang version 19.1.7 (fake)'\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (_, findings) = doctor(&[("OFFLOAD_CLANG", fake.to_str().unwrap())]);
    let clang = finding(&findings, "clang");
    assert_eq!(clang["status"], "warning", "{clang:#?}");
    let detail = clang["detail"].as_str().unwrap();
    assert!(
        detail.contains("is not clang 22") && detail.contains("major 19"),
        "{detail}"
    );
    assert!(
        detail.contains("Fix: `apt-get install clang-22`"),
        "{detail}"
    );
}
