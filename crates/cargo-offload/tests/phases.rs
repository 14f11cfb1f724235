//! `cargo offload build --print-phases` and `--offload-arch native`: the action graphs, exact,
//! on the examples and fixture projects, with `native` resolved through the stand-in CUDA
//! driver (offload-rt's tests/fixtures/fake-cuda) and with no driver at all.

use std::path::{Path, PathBuf};

use offload_build::OffloadArch;
use snapbox::cmd::Command;
use snapbox::str;

mod common;
use common::{check, fixture_as, target_dir, workspace_root};

#[path = "../../offload-rt/tests/fake_driver/library.rs"]
mod fake_driver;

/// A driver library path that does not exist: no GPU through that driver.
const NO_LIBRARY: &str = "/nonexistent/libdriver.so";

/// `cargo offload <args>` in `cwd`, with nothing of the surrounding environment choosing the
/// architectures, the devices or the prebuilt policy.
fn cargo_offload(cwd: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cargo-offload"))
        .arg("offload")
        .args(args)
        .current_dir(cwd);
    for var in [
        "RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_ENCODED_RUSTFLAGS",
        "OFFLOAD_ARCH",
        "OFFLOAD_NATIVE_ARCH",
        "OFFLOAD_PREBUILT",
        "OFFLOAD_REQUIRE_CUBIN",
    ] {
        cmd = cmd.env_remove(var);
    }
    cmd
}

/// A `ptxas` that knows `sm_80` and `sm_90`, as CUDA 12's lists them, and assembles nothing.
fn fake_ptxas(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("ptxas");
    std::fs::write(
        &path,
        "#!/bin/sh\ncase \"$1\" in\n\
         --version) echo 'Cuda compilation tools, release 12.4, V12.4.131' ;;\n\
         --help) printf '%s\\n' '--gpu-name <gpu name>' \
         \"        Allowed values for this option:  'sm_80','sm_90'.\" \
         \"        Default value:  'sm_52'.\" ;;\n\
         esac\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn fake_cuda() -> PathBuf {
    fake_driver::build(
        &workspace_root().join("crates/offload-rt/tests/fixtures"),
        "fake-cuda",
        &target_dir("fake-cuda"),
    )
}

#[test]
fn print_phases_draws_saxpys_action_graph_in_clangs_form() {
    let dir = tempfile::tempdir().unwrap();
    cargo_offload(
        &workspace_root(),
        &[
            "build",
            "--print-phases",
            "-p",
            "saxpy",
            "--offload-arch",
            "sm_80,gfx90a,host",
            "--target",
            "x86_64-unknown-linux-gnu",
        ],
    )
    .env("OFFLOAD_PTXAS", fake_ptxas(dir.path()))
    .assert()
    .success()
    .stdout_eq(str![[r#"
saxpy (examples/saxpy): sm_80,gfx90a,host
      +- 0: input, "examples/saxpy/src/main.rs", rust, (host-cuda-hip-openmp)
      |  +- 1: input, "examples/saxpy/kernels/src/lib.rs", rust, (host-cuda-hip-openmp)
      |- 2: compiler, {1}, rlib, (host-cuda-hip-openmp)
   +- 3: compiler, {0, 2}, object, (host-cuda-hip-openmp)
   |                 +- 4: input, "examples/saxpy/kernels/src/lib.rs", rust, (device-cuda)
   |              +- 5: compiler, {4}, ir, (device-cuda)
   |           +- 6: linker, {5}, ir, (device-cuda, sm_80)
   |        +- 7: backend, {6}, assembler, (device-cuda, sm_80)
   |     +- 8: assembler, {7}, object, (device-cuda, sm_80)
   |  +- 9: offload, "device-cuda (nvptx64-nvidia-cuda:sm_80)" {8}, "device-cuda (nvptx64-nvidia-cuda:sm_80)" {7}, object
   |  |              +- 10: input, "examples/saxpy/kernels/src/lib.rs", rust, (device-hip)
   |  |           +- 11: compiler, {10}, ir, (device-hip)
   |  |        +- 12: linker, {11}, ir, (device-hip, gfx90a)
   |  |     +- 13: backend, {12}, object, (device-hip, gfx90a)
   |  |  +- 14: linker, {13}, image, (device-hip, gfx90a)
   |  |- 15: offload, "device-hip (amdgcn-amd-amdhsa:gfx90a)" {14}, image
   |  |        +- 16: input, "examples/saxpy/kernels/src/lib.rs", rust, (device-openmp, host)
   |  |     +- 17: compiler, {16}, ir, (device-openmp, host)
   |  |  +- 18: linker, {17}, image, (device-openmp, host)
   |  |- 19: offload, "device-openmp (x86_64-unknown-linux-gnu:host)" {18}, image
   |- 20: llvm-offload-binary, {9, 15, 19}, image, (device-cuda-hip-openmp)
+- 21: offload, "host-cuda-hip-openmp (x86_64-unknown-linux-gnu)" {3}, "device-cuda-hip-openmp (x86_64-unknown-linux-gnu)" {20}, object
22: linker, {21}, image, (host-cuda-hip-openmp)

"#]])
    .stderr_eq(str![""]);
}

/// The graph of saxpy for the stand-in CUDA device (`sm_80`), without `ptxas`: PTX only.
const SAXPY_FOR_THE_FAKE_GPU: &str = r#"saxpy (examples/saxpy): sm_80
      +- 0: input, "examples/saxpy/src/main.rs", rust, (host-cuda)
      |  +- 1: input, "examples/saxpy/kernels/src/lib.rs", rust, (host-cuda)
      |- 2: compiler, {1}, rlib, (host-cuda)
   +- 3: compiler, {0, 2}, object, (host-cuda)
   |              +- 4: input, "examples/saxpy/kernels/src/lib.rs", rust, (device-cuda)
   |           +- 5: compiler, {4}, ir, (device-cuda)
   |        +- 6: linker, {5}, ir, (device-cuda, sm_80)
   |     +- 7: backend, {6}, assembler, (device-cuda, sm_80)
   |  +- 8: offload, "device-cuda (nvptx64-nvidia-cuda:sm_80)" {7}, assembler
   |- 9: llvm-offload-binary, {8}, image, (device-cuda)
+- 10: offload, "host-cuda (x86_64-unknown-linux-gnu)" {3}, "device-cuda (x86_64-unknown-linux-gnu)" {9}, object
11: linker, {10}, image, (host-cuda)
"#;

#[test]
fn native_is_the_sm_of_the_gpu_the_cuda_driver_reports() {
    let cuda = fake_cuda();
    for (args, arch_var) in [
        (&["--offload-arch", "native"][..], None),
        (&[][..], Some("native")),
        (&["--offload-arch=native,sm_80"][..], None),
    ] {
        let mut cmd = cargo_offload(
            &workspace_root(),
            &[
                &["build", "--print-phases", "-p", "saxpy"][..],
                args,
                &["--target", "x86_64-unknown-linux-gnu"],
            ]
            .concat(),
        )
        .env("OFFLOAD_CUDA_LIBRARY", &cuda)
        .env("OFFLOAD_HIP_LIBRARY", NO_LIBRARY)
        .env("OFFLOAD_PTXAS", "/nonexistent/ptxas");
        if let Some(list) = arch_var {
            cmd = cmd.env("OFFLOAD_ARCH", list);
        }
        cmd.assert()
            .success()
            .stdout_eq(SAXPY_FOR_THE_FAKE_GPU)
            .stderr_eq(str![[r#"
note: sm_80 gets PTX only: no `ptxas` was found to assemble sm_80 (install a CUDA toolkit, or set OFFLOAD_PTXAS to its ptxas)

"#]]);
    }
}

#[test]
fn native_without_a_gpu_is_host_with_a_note() {
    cargo_offload(
        &workspace_root(),
        &[
            "build",
            "--print-phases",
            "-p",
            "saxpy",
            "--offload-arch",
            "native",
            "--target",
            "x86_64-unknown-linux-gnu",
        ],
    )
    .env("OFFLOAD_CUDA_LIBRARY", NO_LIBRARY)
    .env("OFFLOAD_HIP_LIBRARY", NO_LIBRARY)
    .assert()
    .success()
    .stdout_eq(str![[r#"
saxpy (examples/saxpy): host
      +- 0: input, "examples/saxpy/src/main.rs", rust, (host-openmp)
      |  +- 1: input, "examples/saxpy/kernels/src/lib.rs", rust, (host-openmp)
      |- 2: compiler, {1}, rlib, (host-openmp)
   +- 3: compiler, {0, 2}, object, (host-openmp)
   |           +- 4: input, "examples/saxpy/kernels/src/lib.rs", rust, (device-openmp, host)
   |        +- 5: compiler, {4}, ir, (device-openmp, host)
   |     +- 6: linker, {5}, image, (device-openmp, host)
   |  +- 7: offload, "device-openmp (x86_64-unknown-linux-gnu:host)" {6}, image
   |- 8: llvm-offload-binary, {7}, image, (device-openmp)
+- 9: offload, "host-openmp (x86_64-unknown-linux-gnu)" {3}, "device-openmp (x86_64-unknown-linux-gnu)" {8}, object
10: linker, {9}, image, (host-openmp)

"#]])
    .stderr_eq(str![[r#"
note: `native` in --offload-arch: no GPU found; building for `host`

"#]]);
}

/// Writes a prebuilt bundle for `kernel_crate` (its manifest) with a stand-in image for the
/// CPU device, hashed over its sources as `cargo offload package-kernels` hashes them.
fn write_prebuilt_bundle(manifest: &Path) {
    let krate = offload_build::tooling::workspace::kernel_package(manifest, None)
        .unwrap()
        .krate;
    let archs = [OffloadArch::HOST];
    let toolchain = "rustc 1.0.0-nightly (stand-in); LLVM version: 22.1.0";
    let hash = offload_build::tooling::prebuilt::source_hash(&krate, toolchain, &archs).unwrap();
    let image = offload_build::DeviceImage {
        arch: OffloadArch::HOST,
        image_kind: offload_format::ImageKind::Object,
        offload_kind: offload_format::OffloadKind::OpenMp,
        module: krate.lib_name.clone(),
        kernels: vec!["fill".to_owned()],
        kernel_params: Vec::new(),
        kernel_resources: Vec::new(),
        bytes: b"\x7fELF stand-in".to_vec(),
    };
    offload_build::tooling::prebuilt::write_bundle(&krate, &[image], &hash, toolchain).unwrap();
}

#[test]
fn every_host_crate_of_the_build_is_drawn_and_a_prebuilt_bundle_is_an_input() {
    let dir = fixture_as("two-crates", "two-crates-prebuilt");
    let extra = dir.join("kernels-a/src/extra.rs");
    if extra.exists() {
        std::fs::remove_file(&extra).unwrap();
    }
    write_prebuilt_bundle(&dir.join("kernels-a/Cargo.toml"));
    cargo_offload(
        &dir,
        &[
            "run",
            "--print-phases",
            "-p",
            "app",
            "--offload-arch",
            "host",
            "--target",
            "x86_64-unknown-linux-gnu",
        ],
    )
    .assert()
    .success()
    .stdout_eq(str![[r#"
app (app): host
      +- 0: input, "app/src/main.rs", rust, (host-openmp)
      |  +- 1: input, "kernels-b/src/lib.rs", rust, (host-openmp)
      |- 2: compiler, {1}, rlib, (host-openmp)
   +- 3: compiler, {0, 2}, object, (host-openmp)
   |           +- 4: input, "kernels-b/src/lib.rs", rust, (device-openmp, host)
   |        +- 5: compiler, {4}, ir, (device-openmp, host)
   |     +- 6: linker, {5}, image, (device-openmp, host)
   |  +- 7: offload, "device-openmp (x86_64-unknown-linux-gnu:host)" {6}, image
   |- 8: llvm-offload-binary, {7}, image, (device-openmp)
+- 9: offload, "host-openmp (x86_64-unknown-linux-gnu)" {3}, "device-openmp (x86_64-unknown-linux-gnu)" {8}, object
10: linker, {9}, image, (host-openmp)

mathlib (mathlib): host
   +- 0: input, "mathlib/src/lib.rs", rust, (host-openmp)
   |  +- 1: input, "kernels-a/src/lib.rs", rust, (host-openmp)
   |- 2: compiler, {1}, rlib, (host-openmp)
+- 3: compiler, {0, 2}, rlib, (host-openmp)
|     +- 4: input, "kernels-a/offload/kernels_a.offload", image, (device-openmp)
|  +- 5: offload, "device-openmp (x86_64-unknown-linux-gnu:host)" {4}, image
|- 6: llvm-offload-binary, {5}, image, (device-openmp)
7: offload, "host-openmp (x86_64-unknown-linux-gnu)" {3}, "device-openmp (x86_64-unknown-linux-gnu)" {6}, rlib

"#]])
    .stderr_eq(str![""]);

    // A changed source makes the bundle stale: built from source, with the build's warning.
    std::fs::write(&extra, "// not in the bundle's hash\n").unwrap();
    let out = cargo_offload(
        &dir,
        &[
            "build",
            "--print-phases",
            "-p",
            "mathlib",
            "--offload-arch=host",
        ],
    )
    .output()
    .unwrap();
    let stdout = check(&out, "print-phases with a stale bundle");
    assert!(
        stdout.contains(r#"input, "kernels-a/src/lib.rs", rust, (device-openmp, host)"#),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("its source hash does not match the crate's sources")
            && stderr.contains("kernels-a/src/extra.rs (new)"),
        "{stderr}"
    );
    std::fs::remove_file(&extra).unwrap();
}

#[test]
fn print_phases_names_what_is_wrong_with_its_input() {
    cargo_offload(
        &workspace_root(),
        &["build", "--print-phases", "-p", "no-such-package"],
    )
    .assert()
    .failure()
    .stderr_eq(str![[r#"
error: finding the host crates of the build
  caused by: package `no-such-package` is not in the package graph (workspace members: [..])

"#]]);
    cargo_offload(
        &workspace_root(),
        &[
            "test",
            "--print-phases",
            "-p",
            "saxpy",
            "--offload-arch",
            "sm_80,natve",
        ],
    )
    .assert()
    .failure()
    .stderr_eq(str![[r#"
error: unknown offload architecture `natve` in --offload-arch; did you mean `native`?; known: host, native, [..]

"#]]);
}

/// `native` in a package's metadata reaches its build script through OFFLOAD_NATIVE_ARCH:
/// with no GPU the build is for the CPU device, with the build script's warning; a build not
/// run through `cargo offload` cannot probe, and says so.
#[test]
fn native_in_package_metadata_builds_for_host_with_a_warning_where_no_gpu_is_found() {
    let dir = fixture_as("two-crates", "two-crates-native");
    let manifest = dir.join("app/Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    if !text.contains("[package.metadata.offload]") {
        std::fs::write(
            &manifest,
            text.replace(
                "[dependencies]",
                "[package.metadata.offload]\narch = \"native\"\n\n[dependencies]",
            ),
        )
        .unwrap();
    }
    let target = target_dir("e2e-fixtures");
    let out = cargo_offload(
        &dir,
        &[
            "run",
            "-p",
            "app",
            "--target-dir",
            &target.to_string_lossy(),
        ],
    )
    .env("OFFLOAD_CUDA_LIBRARY", NO_LIBRARY)
    .env("OFFLOAD_HIP_LIBRARY", NO_LIBRARY)
    .output()
    .unwrap();
    let stdout = check(&out, "cargo offload run with `native` and no GPU");
    assert!(stdout.contains("two crates: OK"), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "warning: app@0.1.0: `native` in [package.metadata.offload] arch of {}: no GPU \
             found; building for `host`",
            manifest.display()
        )),
        "{stderr}"
    );

    let out = std::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()))
        .args(["build", "-p", "app", "--target-dir"])
        .arg(&target)
        .current_dir(&dir)
        .env_remove("OFFLOAD_NATIVE_ARCH")
        .env_remove("OFFLOAD_ARCH")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .unwrap();
    check(&out, "cargo build with `native`");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "the GPUs are probed by `cargo offload`, and OFFLOAD_NATIVE_ARCH is unset (this \
             build did not run through it); building for `host`"
        ),
        "{stderr}"
    );
}
