//! `cargo offload`'s command-line output as snapshots, in the manner of Cargo's own test
//! suite: what a user reads, fixed, so that a change to it is a visible diff.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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

/// `inspect --occupancy` on the images the build makes for `examples/gemm`'s kernel (its
/// launch bound, 256, and its `ptxas -v` figures on sm_80 and sm_90, recorded in the image),
/// a kernel without a bound at `--block-size`, and an architecture without known limits. The
/// figures are derived by hand in `offload-format`'s `occupancy` tests.
#[test]
fn inspect_occupancy_shows_each_kernel_per_architecture() {
    let dir = tempfile::tempdir().unwrap();
    let image = |sm: &str, resources: &str| {
        let ptx = format!(
            ".version 7.8\n.target {sm}\n.address_size 64\n\
             .visible .entry gemm__f16(\n\t.param .u64 p\n)\n.maxntid 256, 1, 1\n{{\n\tret;\n}}\n\
             .visible .entry saxpy(\n\t.param .u64 p\n)\n{{\n\tret;\n}}\n"
        );
        OffloadBinary::new(ImageKind::Ptx, OffloadKind::Cuda, ptx.into_bytes())
            .with_string("triple", "nvptx64-nvidia-cuda")
            .with_string("arch", sm)
            .with_string("offload.module", "gemm")
            .with_string("offload.kernels", "gemm__f16,saxpy")
            .with_string("offload.kernel-resources", resources)
            .to_bytes()
    };
    let figures = |kernel: &str, registers: u32, shared: u32| {
        format!(
            "{kernel}:registers={registers},shared={shared},stack=0,spill-stores=0,\
             spill-loads=0,constant=380"
        )
    };
    let mut bundle = image(
        "sm_80",
        &format!(
            "{};{}",
            figures("gemm__f16", 123, 49152),
            figures("saxpy", 16, 0)
        ),
    );
    bundle.extend(image("sm_90", &figures("gemm__f16", 122, 49152)));
    bundle.extend(image("sm_60", &figures("saxpy", 16, 0)));
    let file = dir.path().join("gemm.offload");
    std::fs::write(&file, bundle).unwrap();
    cargo_offload()
        .args(["inspect", "--occupancy", "--block-size", "128"])
        .arg(&file)
        .assert()
        .success()
        .stdout_eq(str![[r#"
[..]gemm.offload: 3 offload image(s)

[0] nvptx64-nvidia-cuda sm_80  kind ptx  producer cuda  size [..] bytes  (file[0])
    module   gemm
    kernels  gemm__f16, saxpy
      gemm__f16: registers 123, shared 49152, scratch 0, constant 380
      saxpy: registers 16, shared 0, scratch 0, constant 380

[1] nvptx64-nvidia-cuda sm_90  kind ptx  producer cuda  size [..] bytes  (file[1])
    module   gemm
    kernels  gemm__f16, saxpy
      gemm__f16: registers 122, shared 49152, scratch 0, constant 380

[2] nvptx64-nvidia-cuda sm_60  kind ptx  producer cuda  size [..] bytes  (file[2])
    module   gemm
    kernels  gemm__f16, saxpy
      saxpy: registers 16, shared 0, scratch 0, constant 380

Occupancy (0 bytes of dynamic shared memory per block; * the kernel's launch bound):
  arch   kernel     block  resident      warps (waves)  occupancy  limited by
  sm_80  gemm__f16  256*   2 blocks/SM   16 of 64           25.0%  registers
  sm_80  saxpy      128    16 blocks/SM  64 of 64          100.0%  warps
  sm_90  gemm__f16  256*   2 blocks/SM   16 of 64           25.0%  registers
  sm_60 saxpy: error[OFF1070]: no occupancy rules for "sm_60": [..]

PTX only, no cubin (the CUDA driver JIT-compiles it): sm_80, sm_90, sm_60

"#]]);
    // 32 KiB of dynamic shared memory per block: on sm_80 the GEMM's blocks take 82944 bytes,
    // two of them fit, as many as the registers allow.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cargo-offload"))
        .args([
            "offload",
            "inspect",
            "--json",
            "--occupancy",
            "--dynamic-shared",
            "32768",
        ])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gemm = &json[0]["occupancy"][0];
    assert_eq!(gemm["kernel"], "gemm__f16");
    assert_eq!(gemm["block_size_from"], "launch-bound");
    assert_eq!(gemm["blocks"], 2);
    assert_eq!(gemm["occupancy"], 0.25);
    assert_eq!(
        gemm["limited_by"],
        serde_json::json!(["registers", "shared-memory"])
    );
    assert_eq!(gemm["shared_allocated"], 82944);
    assert_eq!(json[0]["occupancy"][1]["block_size_from"], "default");
    assert!(json[2]["occupancy"][0]["error"].is_string());
    // The options need `--occupancy`; a block is 1 to 1024 threads.
    cargo_offload()
        .args(["inspect", "--block-size", "128"])
        .arg(&file)
        .assert()
        .failure();
    cargo_offload()
        .args(["inspect", "--occupancy", "--block-size", "1025"])
        .arg(&file)
        .assert()
        .failure()
        .stderr_eq(str![[r#"
error: invalid value '1025' for '--block-size <N>': 1025 is not in 1..=1024

For more information, try '--help'.

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
error: 'exe': invalid file type specified (known: i ii cui hipi d ll bc s o a gch ast)

"#]]);
}

/// A crate as `cargo new` makes it, with a comment and a dependency.
fn plain_crate(dir: &Path) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
         # Errors, the easy way.\n[dependencies]\nanyhow = \"1\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/main.rs"), "fn main() {}\n").unwrap();
}

/// Every file below `dir` with its bytes: what a refused `init` leaves as it found it.
fn contents(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                files.insert(path.strip_prefix(dir).unwrap().to_owned(), bytes);
            }
        }
    }
    files
}

/// Runs `cargo offload init` in `dir`, expects it to fail with `stderr`, and checks that
/// nothing in `dir` changed.
fn init_refused(dir: &Path, stderr: impl snapbox::IntoData) {
    let before = contents(dir);
    cargo_offload()
        .arg("init")
        .current_dir(dir)
        .assert()
        .failure()
        .stdout_eq(str![""])
        .stderr_eq(stderr);
    assert_eq!(contents(dir), before, "a refused init changed files");
}

#[test]
fn init_says_what_it_did_and_how_to_launch_a_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path().join("app");
    plain_crate(&app);
    cargo_offload()
        .arg("init")
        .current_dir(&app)
        .env_remove("CARGO_TERM_COLOR")
        .assert()
        .success()
        .stderr_eq(str![[r#"
note: offload-rt and offload-build from the checkout [..] (the checkout this cargo-offload was built from); `--source` chooses another
     Created kernel crate `app-kernels` in kernels
     Created build.rs
    Modified Cargo.toml: [package.metadata.offload] arch = "host", dependencies `app-kernels`, `offload-rt`, build-dependency `offload-build`, workspace member `kernels`, [workspace.lints.rust] check-cfg `cfg(offload_device)`

"#]])
        .stdout_eq(str![[r#"

Write kernels in kernels/src/lib.rs and launch them from the host crate:

    use offload_rt::{Device, DeviceBuffer, LaunchConfig, LaunchReport};

    /// `a * x + y` computed on `device`, and which image of the kernel ran.
    fn saxpy(
        device: &Device,
        a: f32,
        x: &[f32],
        y: &[f32],
    ) -> offload_rt::Result<(Vec<f32>, LaunchReport)> {
        let dx = DeviceBuffer::from_slice(device, x)?;
        let mut dy = DeviceBuffer::from_slice(device, y)?;
        let config = LaunchConfig::for_num_elems(y.len());
        let report = app_kernels::saxpy.launch(device, config, a, &dx, &mut dy)?;
        Ok((dy.to_vec()?, report))
    }

    let device = Device::best()?;
    let (out, report) = saxpy(&device, 2.0, &x, &y)?;

Then run it: cargo offload run

"#]]);
}

#[test]
fn init_leaves_a_build_script_alone_and_names_the_line_it_lacks() {
    let dir = tempfile::tempdir().unwrap();
    plain_crate(dir.path());
    std::fs::write(
        dir.path().join("build.rs"),
        "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n}\n",
    )
    .unwrap();
    init_refused(
        dir.path(),
        str![[r#"
error: build.rs does not call offload_build, and `init` does not edit a build script: add this line to its `main`, then run `cargo offload init` again

    offload_build::Build::new().compile();

"#]],
    );
}

#[test]
fn init_keeps_a_build_script_that_calls_offload_build() {
    let dir = tempfile::tempdir().unwrap();
    plain_crate(dir.path());
    let script = "fn main() {\n    cc::Build::new().file(\"src/a.c\").compile(\"a\");\n    \
                  offload_build::Build::new().compile();\n}\n";
    std::fs::write(dir.path().join("build.rs"), script).unwrap();
    cargo_offload()
        .args(["init", "--kernels-name", "gpu", "--arch", "sm_90,host"])
        .current_dir(dir.path())
        .env_remove("CARGO_TERM_COLOR")
        .assert()
        .success()
        .stderr_eq(str![[r#"
note: offload-rt and offload-build from the checkout [..] (the checkout this cargo-offload was built from); `--source` chooses another
     Created kernel crate `gpu` in kernels
    Modified Cargo.toml: [package.metadata.offload] arch = "sm_90,host", dependencies `gpu`, `offload-rt`, build-dependency `offload-build`, workspace member `kernels`, [workspace.lints.rust] check-cfg `cfg(offload_device)`
   Unchanged build.rs (it calls offload_build already)

"#]]);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("build.rs")).unwrap(),
        script
    );
}

#[test]
fn init_refuses_a_virtual_manifest() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[workspace]\nmembers = [\"app\"]\n",
    )
    .unwrap();
    plain_crate(&dir.path().join("app"));
    init_refused(
        dir.path(),
        str![[r#"
error: Cargo.toml is a virtual workspace manifest (it has no [package]): run `cargo offload init` in the member crate that is to launch kernels

"#]],
    );
}

#[test]
fn init_refuses_a_crate_set_up_already() {
    let dir = tempfile::tempdir().unwrap();
    plain_crate(dir.path());
    let manifest = dir.path().join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, format!("{text}offload-rt = \"0.1\"\n")).unwrap();
    init_refused(
        dir.path(),
        str![[r#"
error: Cargo.toml is set up for offload already: it has `offload-rt` in [dependencies]

"#]],
    );
}

#[test]
fn init_refuses_an_existing_kernels_directory() {
    let dir = tempfile::tempdir().unwrap();
    plain_crate(dir.path());
    std::fs::create_dir(dir.path().join("kernels")).unwrap();
    std::fs::write(dir.path().join("kernels/notes.txt"), "mine\n").unwrap();
    init_refused(
        dir.path(),
        str![[r#"
error: kernels exists already: the kernel crate goes there; move it away first

"#]],
    );
}

#[test]
fn init_refuses_a_directory_without_a_manifest() {
    let dir = tempfile::tempdir().unwrap();
    init_refused(
        dir.path(),
        str![[r#"
error: no Cargo.toml in .: `cargo offload init` sets up an existing crate (`cargo offload new PATH` creates one)

"#]],
    );
}

#[test]
fn init_refuses_a_crate_its_enclosing_workspace_does_not_list() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("Cargo.toml"), "[workspace]\nmembers = []\n").unwrap();
    let stray = dir.path().join("stray");
    plain_crate(&stray);
    init_refused(
        &stray,
        str![[r#"
error: finding the workspace the crate belongs to
  caused by: `[..] metadata --format-version 1 --manifest-path [..]/stray/Cargo.toml --no-deps` failed (exit status: 101):
error: current package believes it's in a workspace when it's not:
...
"#]],
    );
    assert!(!stray.join("kernels").exists());
}

/// Every command's `--help`: the options a user reads, each in `tests/snapshots/help/`.
/// `SNAPSHOTS=overwrite cargo test -p cargo-offload --test cli_snapshots` rewrites them after
/// an intended change.
#[test]
fn help_of_every_command() {
    let commands = [
        "",
        "build",
        "run",
        "test",
        "package-kernels",
        "verify",
        "doctor",
        "setup",
        "inspect",
        "new",
        "init",
        "bundle",
        "package",
    ];
    for command in commands {
        let name = if command.is_empty() {
            "offload"
        } else {
            command
        };
        let snapshot = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/snapshots/help")
            .join(format!("{name}.txt"));
        let mut cmd = cargo_offload();
        if !command.is_empty() {
            cmd = cmd.arg(command);
        }
        cmd.arg("--help")
            .assert()
            .success()
            .stdout_eq(snapbox::Data::read_from(&snapshot, None).raw());
    }
}

/// `setup --dry-run` prints the rustup command that installs the nightly of GPU builds and
/// runs nothing; with `--system` it adds this distribution's commands, or says what to install
/// where it does not know the distribution.
#[test]
fn setup_dry_run_prints_the_commands() {
    let nightly = "nightly-1999-01-01";
    cargo_offload()
        .args(["setup", "--dry-run"])
        .env("OFFLOAD_NIGHTLY_TOOLCHAIN", nightly)
        .assert()
        .success()
        .stdout_eq(str![[r#"
rustup toolchain install nightly-1999-01-01 --profile minimal --component rust-src

"#]]);
    let out = cargo_offload()
        .args(["setup", "--system", "--dry-run"])
        .env("OFFLOAD_NIGHTLY_TOOLCHAIN", nightly)
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.ends_with(&format!(
            "rustup toolchain install {nightly} --profile minimal --component rust-src\n"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("apt-get install -y -q --no-install-recommends clang-22 lld-22 llvm-22"),
        "{stdout}"
    );
}

/// A command line clap refuses: the error names the argument and says where to look.
#[test]
fn an_unknown_option_is_refused_with_usage() {
    cargo_offload()
        .args(["build", "--offload-archs", "sm_80"])
        .assert()
        .failure()
        .stderr_eq(str![[r#"
error: unexpected argument '--offload-archs' found

  tip: a similar argument exists: '--color'

Usage: cargo build --color <WHEN>

For more information, try '--help'.

"#]]);
}

/// `new` makes a git repository as `cargo new` does: not inside another work tree, not with
/// `--vcs none`; the lock file is not ignored (the project is a program).
#[test]
fn new_makes_a_repository_unless_told_or_inside_one() {
    let dir = tempfile::tempdir().unwrap();
    let new = |args: &[&str]| {
        cargo_offload()
            .arg("new")
            .args(args)
            .args(["--source", "registry"])
            .current_dir(dir.path())
            .assert()
            .success();
    };
    new(&["app"]);
    let app = dir.path().join("app");
    assert!(app.join(".git").is_dir(), "no repository made");
    let ignored = std::fs::read_to_string(app.join(".gitignore")).unwrap();
    assert_eq!(ignored, "/target\n");
    new(&["plain", "--vcs", "none"]);
    assert!(!dir.path().join("plain/.git").exists());
    // Inside `app`'s work tree: no repository of its own.
    cargo_offload()
        .args(["new", "inner", "--source", "registry"])
        .current_dir(&app)
        .assert()
        .success();
    assert!(app.join("inner/Cargo.toml").is_file());
    assert!(!app.join("inner/.git").exists());
}
