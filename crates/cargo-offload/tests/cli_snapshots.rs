//! `cargo offload`'s command-line output as snapshots, in the manner of Cargo's own test
//! suite: what a user reads, fixed, so that a change to it is a visible diff.

use snapbox::cmd::Command;
use snapbox::str;

use offload_format::{ImageKind, OffloadBinary, OffloadKind};

fn cargo_offload() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cargo-offload")).arg("offload")
}

#[test]
fn inspect_prints_each_image() {
    let dir = tempfile::tempdir().unwrap();
    let ptx = OffloadBinary::new(
        ImageKind::Ptx,
        OffloadKind::Cuda,
        &b".version 7.8\n.target sm_90\n"[..],
    )
    .with_string("triple", "nvptx64-nvidia-cuda")
    .with_string("arch", "sm_90")
    .with_string("offload.module", "demo")
    .with_string("offload.kernels", "saxpy");
    let file = dir.path().join("demo.offload");
    std::fs::write(&file, ptx.to_bytes()).unwrap();
    cargo_offload()
        .arg("inspect")
        .arg(&file)
        .current_dir(dir.path())
        .assert()
        .success()
        .stdout_eq(str![[r#"
[..]demo.offload: 1 offload image(s)

[0] nvptx64-nvidia-cuda sm_90  kind ptx  producer cuda  size 27 bytes  (file[0])
    module   demo
    kernels  saxpy

PTX only, no cubin (the CUDA driver JIT-compiles it): sm_90

"#]]);
}

#[test]
fn inspect_of_a_damaged_file_says_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let ptx = OffloadBinary::new(ImageKind::Ptx, OffloadKind::Cuda, &b".version 7.8\n"[..])
        .with_string("arch", "sm_90");
    let mut bytes = ptx.to_bytes();
    bytes.truncate(bytes.len() - 5);
    let file = dir.path().join("cut.offload");
    std::fs::write(&file, bytes).unwrap();
    cargo_offload()
        .arg("inspect")
        .arg(&file)
        .assert()
        .failure()
        .stderr_eq(str![[r#"
error: inspecting [..]cut.offload
  caused by: section file: OffloadBinary at offset 8: header Size 120 is out of range (minimum 72, 115 bytes available)

"#]]);
}

#[test]
fn an_unknown_bundle_type_is_refused_with_the_known_ones() {
    cargo_offload()
        .args([
            "bundle",
            "-type=exe",
            "-targets=host-x86_64-unknown-linux-gnu",
            "-input=a",
            "-output=b",
        ])
        .assert()
        .failure()
        .stderr_eq(str![[r#"
error: bundling
  caused by: 'exe': invalid file type specified (known: i ii cui hipi d ll bc s o a gch ast)

"#]]);
}
