//! Prebuilt kernel bundles end to end: a kernel crate packaged with `cargo offload
//! package-kernels` and `cargo package`, unpacked elsewhere, and used by a host crate built on
//! stable Rust with no device toolchain, no LLVM and no CUDA toolkit visible; then patched, and
//! refused with a message naming the changed file; and verified byte for byte.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{check, workspace_root};

/// A command with nothing of the test's own cargo build in its environment.
fn clean(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new(program);
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_") && !matches!(name.as_ref(), "CARGO_HOME")
            || matches!(
                name.as_ref(),
                "RUSTFLAGS" | "RUSTC" | "RUSTC_WRAPPER" | "RUSTUP_TOOLCHAIN" | "OUT_DIR"
            )
        {
            cmd.env_remove(name.as_ref());
        }
    }
    cmd
}

fn cargo_offload(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = clean(env!("CARGO_BIN_EXE_cargo-offload"));
    cmd.arg("offload").args(args).current_dir(dir);
    cmd
}

const KERNEL_SRC: &str = r#"#![no_std]
use offload_rt::kernel;

#[kernel]
pub fn scale_add(n: u32, a: f32, x: *const f32, y: *mut f32) {
    let i = kernel::global_idx_x();
    if i < n as usize {
        // SAFETY: the host passes buffers of at least `n` elements.
        unsafe { *y.add(i) = a * *x.add(i) + *y.add(i) };
    }
}
"#;

const MAIN_SRC: &str = r#"use offload_rt::{Device, DeviceBuffer, LaunchConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = Device::best()?;
    let n = 4096u32;
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let ys: Vec<f32> = (0..n).map(|i| 1.0 + i as f32).collect();
    let x = DeviceBuffer::from_slice(&device, &xs)?;
    let mut y = DeviceBuffer::from_slice(&device, &ys)?;
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    unsafe { pre_kernels::scale_add.launch(&device, LaunchConfig::for_num_elems(n), n, 3.0, &x, &mut y) }?;
    let got = y.to_vec()?;
    for i in 0..n as usize {
        assert_eq!(got[i], 3.0 * xs[i] + ys[i], "element {i}");
    }
    println!("prebuilt scale_add OK on {}", device.describe());
    Ok(())
}
"#;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_packaged_kernel_crate_builds_on_stable_with_no_device_tools() {
    let ptxas = offload_toolchain::Tool::Ptxas.for_test();
    let root = workspace_root();
    let crates = root.join("crates");
    let tmp = tempfile::tempdir().unwrap();
    // A persistent target directory for the author's side keeps reruns incremental.
    let author_target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("prebuilt-author");

    // The author's kernel crate, with offload-rt as a crates.io dependency patched to this
    // workspace (as it would be published).
    let kernels = tmp.path().join("author/pre-kernels");
    write(
        &kernels.join("Cargo.toml"),
        &format!(
            r#"[package]
name = "pre-kernels"
version = "0.1.0"
edition = "2024"
description = "kernels shipped with their device images"
license = "MIT"

[package.metadata.offload]
kernels = true
arch = ["sm_80", "host"]

[dependencies]
offload-rt = {{ version = "0.1.0", default-features = false }}

[patch.crates-io]
offload-rt = {{ path = "{rt}" }}

[workspace]
"#,
            rt = crates.join("offload-rt").display(),
        ),
    );
    write(&kernels.join("src/lib.rs"), KERNEL_SRC);
    let out = check(
        &cargo_offload(&kernels, &["package-kernels"])
            .env("CARGO_TARGET_DIR", &author_target)
            .output()
            .unwrap(),
        "cargo offload package-kernels",
    );
    assert!(out.contains("images for sm_80,host"), "{out}");
    let bundle = kernels.join("offload/pre_kernels.offload");
    assert!(bundle.is_file());

    // What `inspect` shows of it: each image, and the provenance.
    let json = check(
        &cargo_offload(&kernels, &["inspect", "--json", &bundle.to_string_lossy()])
            .output()
            .unwrap(),
        "cargo offload inspect",
    );
    let images: serde_json::Value = serde_json::from_str(&json).unwrap();
    let images = images.as_array().unwrap();
    let kinds: Vec<&str> = images.iter().map(|i| i["kind"].as_str().unwrap()).collect();
    let expected: &[&str] = if ptxas.is_some() {
        &["cubin", "ptx", "elf"]
    } else {
        &["ptx", "elf"]
    };
    assert_eq!(kinds, expected, "{json}");
    let first = &images[0]["strings"];
    assert!(
        first["offload.prebuilt.toolchain"]
            .as_str()
            .unwrap()
            .contains("LLVM version: 22")
    );
    assert!(
        first["offload.prebuilt.inputs"]
            .as_str()
            .unwrap()
            .contains("pre-kernels/src/lib.rs "),
        "{json}"
    );

    let text = check(
        &cargo_offload(&kernels, &["inspect", &bundle.to_string_lossy()])
            .output()
            .unwrap(),
        "cargo offload inspect (text)",
    );
    for line in [
        "source hash ",
        "toolchain   rustc ",
        "producer    offload-build ",
        "inputs ",
    ] {
        assert!(text.contains(line), "`{line}` missing from:\n{text}");
    }

    // `cargo offload verify`: a rebuild in another target directory gives the same bytes.
    let verified = check(
        &cargo_offload(&kernels, &["verify"])
            .env("CARGO_TARGET_DIR", &author_target)
            .output()
            .unwrap(),
        "cargo offload verify",
    );
    assert!(verified.contains("verified, byte for byte"), "{verified}");

    // `cargo package`, then unpacked where a user's registry would put it.
    check(
        &clean("cargo")
            .args([
                "package",
                "--no-verify",
                "--allow-dirty",
                "--exclude-lockfile",
            ])
            .env("CARGO_TARGET_DIR", tmp.path().join("package-target"))
            .current_dir(&kernels)
            .output()
            .unwrap(),
        "cargo package",
    );
    let crate_file = tmp
        .path()
        .join("package-target/package/pre-kernels-0.1.0.crate");
    let unpacked = tmp.path().join("registry");
    std::fs::create_dir_all(&unpacked).unwrap();
    check(
        &Command::new("tar")
            .arg("xzf")
            .arg(&crate_file)
            .arg("-C")
            .arg(&unpacked)
            .output()
            .unwrap(),
        "tar",
    );
    let published = unpacked.join("pre-kernels-0.1.0");
    assert!(
        published.join("offload/pre_kernels.offload").is_file(),
        "`cargo package` left out the bundle"
    );

    // The user's host crate: offload-build without its `llvm` feature.
    let app = tmp.path().join("user/app");
    write(
        &app.join("Cargo.toml"),
        &format!(
            r#"[package]
name = "app"
version = "0.1.0"
edition = "2024"

[package.metadata.offload]
arch = "sm_80,host"

[dependencies]
pre-kernels = {{ path = "{published}" }}
offload-rt = {{ path = "{rt}" }}

[build-dependencies]
offload-build = {{ path = "{build}", default-features = false }}

[patch.crates-io]
offload-rt = {{ path = "{rt}" }}

[workspace]
"#,
            published = published.display(),
            rt = crates.join("offload-rt").display(),
            build = crates.join("offload-build").display(),
        ),
    );
    write(
        &app.join("build.rs"),
        "fn main() { offload_build::Build::new().compile(); }\n",
    );
    write(&app.join("src/main.rs"), MAIN_SRC);

    let tree = check(
        &clean("cargo")
            .args(["tree", "-e", "normal,build", "--prefix", "none"])
            .current_dir(&app)
            .output()
            .unwrap(),
        "cargo tree",
    );
    // LLVM and the C libraries, and the crates whose compile time a user's first build would
    // pay for nothing (serde's JSON, the `digest` family under `sha2`/`md-5`, `tempfile`'s
    // `rustix`): see the prebuilt bundles' cold build in BENCHMARKS.md.
    for heavy in [
        "llvm-sys", "inkwell", "zstd-sys", "serde", "typenum", "digest", "rustix",
    ] {
        assert!(
            !tree.contains(heavy),
            "{heavy} is in the user's graph:\n{tree}"
        );
    }

    // Stable only; no device toolchain, LLVM, lld or ptxas to be found.
    let restricted = |cmd: &mut Command| {
        let cargo_bin = Path::new(&std::env::var_os("CARGO_HOME").map_or_else(
            || Path::new(&std::env::var_os("HOME").unwrap()).join(".cargo"),
            PathBuf::from,
        ))
        .join("bin");
        cmd.env("PATH", format!("{}:/usr/bin:/bin", cargo_bin.display()))
            .env("RUSTUP_TOOLCHAIN", "stable")
            .env("OFFLOAD_NIGHTLY_TOOLCHAIN", "no-such-device-toolchain")
            .env("OFFLOAD_LLVM_BIN", "/nonexistent/llvm/bin")
            .env("OFFLOAD_PTXAS", "/nonexistent/ptxas")
            .env("OFFLOAD_LD_LLD", "/nonexistent/ld.lld")
            .env("OFFLOAD_DEVICE", "cpu")
            .env("CARGO_TARGET_DIR", tmp.path().join("user-target"))
            .current_dir(&app);
    };
    let mut run = clean("cargo");
    run.args(["run", "--release"]);
    restricted(&mut run);
    let out = check(&run.output().unwrap(), "the user's cargo run");
    assert!(out.contains("prebuilt scale_add OK on cpu"), "{out}");

    // The binary carries the author's images, GPU ones included.
    let exe = tmp.path().join("user-target/release/app");
    let json = check(
        &cargo_offload(&app, &["inspect", "--json", &exe.to_string_lossy()])
            .output()
            .unwrap(),
        "inspect of the user's binary",
    );
    let embedded: serde_json::Value = serde_json::from_str(&json).unwrap();
    let archs: Vec<&str> = embedded
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["arch"].as_str().unwrap())
        .collect();
    assert!(
        archs.contains(&"sm_80") && archs.contains(&"host"),
        "{json}"
    );

    // A patched kernel source: the bundle no longer matches and, with no device toolchain,
    // the build stops naming the file.
    write(
        &published.join("src/lib.rs"),
        &KERNEL_SRC.replace("a * *x.add(i)", "a * *x.add(i) + 1.0"),
    );
    let mut patched = clean("cargo");
    patched.args(["build", "--release"]);
    restricted(&mut patched);
    let out = patched.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a patched crate built without its toolchain"
    );
    assert!(
        stderr.contains("pre-kernels/src/lib.rs (changed)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("cannot be built from source here"),
        "{stderr}"
    );
}
