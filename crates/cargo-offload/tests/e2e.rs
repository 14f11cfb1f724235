//! `cargo offload` end to end: the examples and fixture projects built, embedded, inspected
//! with LLVM's own tools, and run on the CPU device.
//!
//! Each test builds into a target directory of its own under `CARGO_TARGET_TMPDIR`, kept
//! between runs so that later runs are incremental.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::{
    cargo_offload_command, check, fixture, fixture_as, llvm_tool, new_project_in, ptxas,
    target_dir, walk, workspace_root,
};
use offload_toolchain::Tool;

/// `cargo offload <args>` run the way cargo runs a subcommand.
fn cargo_offload(cwd: &Path, args: &[&str]) -> Output {
    cargo_offload_env(cwd, args, &[])
}

/// [`cargo_offload`] with variables set (`Some`) or removed (`None`).
fn cargo_offload_env(cwd: &Path, args: &[&str], vars: &[(&str, Option<&str>)]) -> Output {
    let mut cmd = cargo_offload_command(cwd, args);
    for (var, value) in vars {
        match value {
            Some(v) => cmd.env(var, v),
            None => cmd.env_remove(var),
        };
    }
    cmd.output().expect("cargo-offload starts")
}

#[test]
fn examples_embed_every_image_and_llvm_tools_read_them() {
    let root = workspace_root();
    let target = target_dir("e2e-examples");
    let target_s = target.to_string_lossy().into_owned();
    check(
        &cargo_offload(
            &root,
            &[
                "build",
                "--offload-arch",
                "host",
                "--release",
                "-p",
                "saxpy",
                "-p",
                "reduce",
                "--target-dir",
                &target_s,
            ],
        ),
        "cargo offload build",
    );

    for (example, module, kernels) in [
        ("saxpy", "saxpy_kernels", "saxpy"),
        ("reduce", "reduce_kernels", "block_sum"),
    ] {
        let exe = target.join("release").join(example);
        let json = check(
            &cargo_offload(&root, &["inspect", "--json", &exe.to_string_lossy()]),
            "cargo offload inspect",
        );
        let images: serde_json::Value = serde_json::from_str(&json).unwrap();
        let images = images.as_array().unwrap();
        assert_eq!(images.len(), 1, "{json}");
        assert_eq!(images[0]["triple"], "x86_64-unknown-linux-gnu");
        assert_eq!(images[0]["arch"], "host");
        assert_eq!(images[0]["kind"], "elf");
        assert_eq!(images[0]["module"], module);
        assert_eq!(images[0]["kernels"][0], kernels, "{json}");

        let Some(objdump) = llvm_tool(Tool::LlvmObjdump) else {
            return;
        };
        let listing = check(
            &Command::new(&objdump)
                .arg("--offloading")
                .arg(&exe)
                .current_dir(&target)
                .output()
                .unwrap(),
            "llvm-objdump --offloading",
        );
        assert!(listing.contains("OFFLOADING IMAGE [0]"), "{listing}");
        assert!(!listing.contains("OFFLOADING IMAGE [1]"), "{listing}");
        assert!(
            listing.contains("triple          x86_64-unknown-linux-gnu"),
            "{listing}"
        );
        assert!(listing.contains("producer        openmp"), "{listing}");

        // LLVM's extraction gives back exactly the shared object the device build produced.
        let Some(offload_binary) = llvm_tool(Tool::LlvmOffloadBinary) else {
            return;
        };
        let extracted = target.join(format!("{example}-host.so"));
        check(
            &Command::new(&offload_binary)
                .arg(&exe)
                .arg(format!(
                    "--image=file={},triple=x86_64-unknown-linux-gnu",
                    extracted.display()
                ))
                .output()
                .unwrap(),
            "llvm-offload-binary",
        );
        // The image of the IR form of barriers (`cargo offload` brings the device link).
        let built = target
            .join("offload/x86_64-unknown-linux-gnu-host/cpu-ir/x86_64-unknown-linux-gnu/release")
            .join(format!("lib{module}.so"));
        assert_eq!(
            std::fs::read(&extracted).unwrap(),
            std::fs::read(&built).unwrap(),
            "{} differs from {}",
            extracted.display(),
            built.display()
        );
    }
}

/// The CPU device is not tied to x86_64: the examples cross-built for aarch64 Linux (the CPU
/// of Grace Hopper machines) carry aarch64 CPU images, the baseline and the SVE level, and run
/// under qemu with the results each example checks against its own host loop: the SVE image
/// on qemu's CPU (which has SVE and SVE2), the baseline on a Cortex-A72 (which has neither) and
/// where `OFFLOAD_CPU_LEVEL` says so, with the same output each time.
#[test]
fn examples_cross_built_for_aarch64_run_under_qemu() {
    const TRIPLE: &str = "aarch64-unknown-linux-gnu";
    let (Some(qemu), Some(gcc)) = (Tool::QemuAarch64.for_test(), Tool::Aarch64Gcc.for_test())
    else {
        return;
    };
    let root = workspace_root();
    let target = target_dir("e2e-aarch64");
    let target_s = target.to_string_lossy().into_owned();
    let mut build = Command::new(env!("CARGO_BIN_EXE_cargo-offload"));
    build
        .args([
            "offload",
            "build",
            "--offload-arch",
            "host,aarch64-sve",
            "--release",
        ])
        .args(["-p", "saxpy", "-p", "reduce", "--target", TRIPLE])
        .args(["--target-dir", &target_s])
        .env("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER", &gcc)
        .current_dir(&root);
    for var in ["RUSTFLAGS", "CARGO_TARGET_DIR", "CARGO_ENCODED_RUSTFLAGS"] {
        build.env_remove(var);
    }
    check(
        &build.output().unwrap(),
        "cargo offload build --target aarch64",
    );

    for example in ["saxpy", "reduce"] {
        let exe = target.join(TRIPLE).join("release").join(example);
        let json = check(
            &cargo_offload(&root, &["inspect", "--json", &exe.to_string_lossy()]),
            "cargo offload inspect",
        );
        let images: serde_json::Value = serde_json::from_str(&json).unwrap();
        let archs: Vec<&str> = (0..2).filter_map(|i| images[i]["arch"].as_str()).collect();
        assert_eq!(images[0]["triple"], TRIPLE, "{json}");
        assert_eq!(archs, ["host", "aarch64-sve"], "{json}");

        // (qemu's CPU model, OFFLOAD_CPU_LEVEL, the image the runtime must choose)
        let runs = [
            (None, None, "aarch64-sve"),
            (Some("cortex-a72"), None, "host"),
            (None, Some("host"), "host"),
        ];
        let mut outputs = Vec::new();
        for (cpu, level, want) in runs {
            let mut run = Command::new(&qemu);
            if let Some(cpu) = cpu {
                run.args(["-cpu", cpu]);
            }
            run.arg("-L")
                .arg(offload_toolchain::AARCH64_SYSROOT)
                .arg(&exe)
                .env("OFFLOAD_LOG", "1")
                .env_remove("OFFLOAD_CPU_LEVEL");
            if let Some(level) = level {
                run.env("OFFLOAD_CPU_LEVEL", level);
            }
            let run = run.output().unwrap();
            let what = format!("qemu-aarch64 {example} (cpu {cpu:?}, level {level:?})");
            let stdout = check(&run, &what);
            let stderr = String::from_utf8_lossy(&run.stderr);
            assert!(stdout.contains(" OK"), "{what}: {stdout}");
            assert!(
                stderr.contains("CPU image #") && stderr.contains(&format!("({want}) of")),
                "{what} did not run its {want} image:\n{stdout}\n{stderr}"
            );
            // The results, without the lines naming the device and image.
            let results: Vec<String> = stdout
                .lines()
                .filter(|l| !l.starts_with("device:") && !l.starts_with("image:"))
                .map(str::to_owned)
                .collect();
            outputs.push(results);
        }
        assert!(
            outputs.windows(2).all(|w| w[0] == w[1]),
            "{example}'s output differs between its images: {outputs:#?}"
        );
    }
}

/// The bundle the last build of `example` wrote (`OUT_DIR/offload_bundle.bin`).
fn built_bundle(target: &Path, example: &str) -> Vec<u8> {
    let build = target.join("release/build");
    let newest = std::fs::read_dir(&build)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{example}-"))
        })
        .map(|e| e.path().join("out/offload_bundle.bin"))
        .filter(|p| p.is_file())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .expect("the build script wrote a bundle");
    std::fs::read(newest).unwrap()
}

#[test]
fn gpu_images_for_many_architectures_are_embedded_and_valid() {
    let root = workspace_root();
    let target = target_dir("e2e-gpu");
    let target_s = target.to_string_lossy().into_owned();
    check(
        &cargo_offload(
            &root,
            &[
                "build",
                "--offload-arch",
                "sm_80,sm_90,gfx90a,gfx942:xnack+,host",
                "--release",
                "-p",
                "reduce",
                "--target-dir",
                &target_s,
            ],
        ),
        "cargo offload build for five architectures",
    );
    let exe = target.join("release/reduce");
    let json = check(
        &cargo_offload(&root, &["inspect", "--json", &exe.to_string_lossy()]),
        "cargo offload inspect",
    );
    let images: serde_json::Value = serde_json::from_str(&json).unwrap();
    let mut seen: Vec<(String, String, String)> = images
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            assert_eq!(i["kernels"][0], "block_sum", "{i}");
            (
                i["triple"].as_str().unwrap().to_owned(),
                i["arch"].as_str().unwrap().to_owned(),
                i["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    seen.sort();
    let want = [
        ("amdgcn-amd-amdhsa", "gfx90a", "elf"),
        ("amdgcn-amd-amdhsa", "gfx942:xnack+", "elf"),
        ("nvptx64-nvidia-cuda", "sm_80", "cubin"),
        ("nvptx64-nvidia-cuda", "sm_80", "ptx"),
        ("nvptx64-nvidia-cuda", "sm_90", "cubin"),
        ("nvptx64-nvidia-cuda", "sm_90", "ptx"),
        ("x86_64-unknown-linux-gnu", "host", "elf"),
    ]
    .map(|(t, a, k)| (t.to_owned(), a.to_owned(), k.to_owned()));
    assert_eq!(seen, want, "{json}");

    // LLVM's own tool extracts, from the executable, exactly the images the build bundled.
    let (Some(offload_binary), Some(readelf)) = (
        llvm_tool(Tool::LlvmOffloadBinary),
        llvm_tool(Tool::LlvmReadelf),
    ) else {
        return;
    };
    let bundle = built_bundle(&target, "reduce");
    let built = offload_format::parse_all(&bundle).unwrap();
    assert_eq!(built.len(), 7);
    let out = target.join("extracted");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    for bin in &built {
        let (triple, arch) = (bin.triple().unwrap(), bin.arch().unwrap());
        check(
            &Command::new(&offload_binary)
                .arg(&exe)
                .arg(format!("--image=triple={triple},arch={arch}"))
                .current_dir(&out)
                .output()
                .unwrap(),
            "llvm-offload-binary",
        );
    }
    let extracted = walk(&out);
    assert_eq!(extracted.len(), 7, "{extracted:?}");
    for bin in &built {
        let matching: Vec<&PathBuf> = extracted
            .iter()
            .filter(|p| std::fs::read(p).unwrap() == *bin.image)
            .collect();
        assert_eq!(
            matching.len(),
            1,
            "image {} {} {:?} extracted once, byte for byte",
            bin.triple().unwrap(),
            bin.arch().unwrap(),
            bin.image_kind
        );
    }

    for path in &extracted {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".s") {
            let sm = if name.contains("sm_80") {
                "sm_80"
            } else {
                "sm_90"
            };
            let Some(ptxas) = ptxas() else { continue };
            let cubin = target.join(format!("{name}.cubin"));
            check(
                &Command::new(&ptxas)
                    .arg(format!("-arch={sm}"))
                    .arg(path)
                    .arg("-o")
                    .arg(&cubin)
                    .output()
                    .unwrap(),
                "ptxas",
            );
        } else if name.contains("amdgcn") {
            let header = check(
                &Command::new(&readelf)
                    .args(["-h", "-s"])
                    .arg(path)
                    .output()
                    .unwrap(),
                "llvm-readelf",
            );
            let want = if name.contains("gfx942") {
                "0x74c"
            } else {
                "0x53f"
            };
            let flags = header
                .lines()
                .find_map(|l| l.trim().strip_prefix("Flags:"))
                .and_then(|rest| rest.split(',').next())
                .map(str::trim)
                .unwrap_or_default();
            assert_eq!(flags, want, "{name}: e_flags\n{header}");
            assert!(header.contains("block_sum.kd"), "{name}:\n{header}");
        }
    }
}

/// The first of `candidates` that the installed `ptxas` refuses to assemble for.
fn an_sm_ptxas_refuses(ptxas: &Path, candidates: &[(&'static str, &str)]) -> Option<&'static str> {
    let dir = target_dir("ptxas-probe");
    std::fs::create_dir_all(&dir).unwrap();
    candidates.iter().find_map(|&(sm, isa)| {
        let ptx = dir.join(format!("{sm}.ptx"));
        let ptx_text = format!(
            ".version {isa}\n.target {sm}\n.address_size 64\n.visible .entry k()\n{{\nret;\n}}\n"
        );
        std::fs::write(&ptx, ptx_text).unwrap();
        let out = Command::new(ptxas)
            .arg(format!("-arch={sm}"))
            .arg(&ptx)
            .arg("-o")
            .arg(dir.join(format!("{sm}.cubin")))
            .output()
            .unwrap();
        (!out.status.success()).then_some(sm)
    })
}

/// The `.version` line of PTX text.
fn ptx_version(ptx: &str) -> Option<&str> {
    ptx.lines().find_map(|l| l.trim().strip_prefix(".version "))
}

#[test]
fn an_sm_the_installed_ptxas_does_not_know_gets_ptx_only() {
    let Some(ptxas) = ptxas() else { return };
    let Some(llc) = llvm_tool(Tool::Llc) else {
        return;
    };
    let Some(new_sm) = an_sm_ptxas_refuses(&ptxas, &[("sm_120", "8.7"), ("sm_121", "8.8")]) else {
        println!("skipped: {} assembles sm_120 and sm_121", ptxas.display());
        return;
    };
    let root = workspace_root();
    let target = target_dir("e2e-ptx-only");
    let target_s = target.to_string_lossy().into_owned();
    let archs = format!("sm_80,{new_sm}");
    let args = [
        "build",
        "--offload-arch",
        &archs,
        "--release",
        "-p",
        "reduce",
        "--target-dir",
        &target_s,
    ];

    // That `ptxas` alone: a newer one installed beside it (the set-up's CUDA 12.9) would
    // assemble the sm.
    let pinned = ptxas.to_string_lossy().into_owned();
    // A release pipeline that must ship cubins gets a clear error.
    let strict = cargo_offload_env(
        &root,
        &args,
        &[
            ("OFFLOAD_REQUIRE_CUBIN", Some("1")),
            ("OFFLOAD_PTXAS", Some(&pinned)),
        ],
    );
    let stderr = String::from_utf8_lossy(&strict.stderr);
    assert!(!strict.status.success(), "{stderr}");
    for part in [
        format!("no cubin can be made for {new_sm}"),
        format!("does not know {new_sm}"),
        "OFFLOAD_REQUIRE_CUBIN is set".to_owned(),
    ] {
        assert!(stderr.contains(&part), "`{part}` missing in:\n{stderr}");
    }

    let out = cargo_offload_env(
        &root,
        &args,
        &[
            ("OFFLOAD_REQUIRE_CUBIN", None),
            ("OFFLOAD_PTXAS", Some(&pinned)),
        ],
    );
    check(&out, "cargo offload build with an sm ptxas does not know");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning:") && l.contains("PTX only"))
        .collect();
    assert_eq!(warnings.len(), 1, "one warning:\n{stderr}");
    for part in [
        new_sm,
        "CUDA ",
        "JIT-compiled",
        "OFFLOAD_PTXAS",
        "OFFLOAD_REQUIRE_CUBIN",
    ] {
        assert!(
            warnings[0].contains(part),
            "`{part}` missing in: {}",
            warnings[0]
        );
    }

    let bundle = built_bundle(&target, "reduce");
    let built = offload_format::parse_all(&bundle).unwrap();
    let mut seen: Vec<(&str, offload_format::ImageKind)> = built
        .iter()
        .map(|b| (b.arch().unwrap(), b.image_kind))
        .collect();
    seen.sort_by_key(|(arch, kind)| (arch.to_string(), kind.name()));
    use offload_format::ImageKind::{Cubin, Ptx};
    let mut want = vec![("sm_80", Cubin), ("sm_80", Ptx), (new_sm, Ptx)];
    want.sort_by_key(|(arch, kind)| (arch.to_string(), kind.name()));
    assert_eq!(seen, want);
    for bin in &built {
        match (bin.arch().unwrap(), bin.image_kind) {
            ("sm_80", Cubin) => assert_eq!(
                (
                    &bin.image[..4],
                    u16::from_le_bytes([bin.image[18], bin.image[19]])
                ),
                (&b"\x7fELF"[..], 190),
                "sm_80's cubin is a CUDA ELF"
            ),
            (sm, Ptx) if sm == new_sm => {
                // The ISA is one LLVM 22 accepts for the sm: at least what llc chooses for it.
                let ptx = String::from_utf8_lossy(&bin.image);
                let ll = target.join("isa-probe.ll");
                std::fs::write(&ll, "target triple = \"nvptx64-nvidia-cuda\"\n").unwrap();
                let llc_ptx = check(
                    &Command::new(&llc)
                        .arg(format!("-mcpu={new_sm}"))
                        .arg(&ll)
                        .args(["-o", "-"])
                        .output()
                        .unwrap(),
                    "llc",
                );
                let isa = |v: Option<&str>| -> (u32, u32) {
                    let (major, minor) = v.and_then(|v| v.split_once('.')).unwrap();
                    (major.parse().unwrap(), minor.parse().unwrap())
                };
                assert!(
                    isa(ptx_version(&ptx)) >= isa(ptx_version(&llc_ptx)),
                    "{new_sm}: PTX .version {:?}, LLVM's minimum {:?}",
                    ptx_version(&ptx),
                    ptx_version(&llc_ptx)
                );
                assert!(ptx.contains(&format!(".target {new_sm}")), "{ptx}");
                assert!(ptx.contains(".entry block_sum"), "{ptx}");
            }
            _ => {}
        }
    }

    let exe = target.join("release/reduce");
    let text = check(
        &cargo_offload(&root, &["inspect", &exe.to_string_lossy()]),
        "cargo offload inspect",
    );
    let line = text
        .lines()
        .find(|l| l.starts_with("PTX only"))
        .unwrap_or_else(|| panic!("no PTX-only line:\n{text}"));
    assert!(line.ends_with(&format!(": {new_sm}")), "{line}");
}

/// A `ptxas` that appends each run's arguments to `ptxas.log` beside it, then runs `real`.
fn logging_ptxas(dir: &Path, real: &Path) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    let (wrapper, log) = (dir.join("ptxas"), dir.join("ptxas.log"));
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            real.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(&log, "").unwrap();
    (wrapper, log)
}

/// The runs `ptxas.log` holds, emptying it.
fn take_runs(log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap();
    std::fs::write(log, "").unwrap();
    text.lines().map(str::to_owned).collect()
}

/// The build runs `ptxas -v` once per image and `sm`, records what it reports in the images,
/// and nothing after it runs `ptxas` again: not the `Embedded` summary or the `offload-image`
/// messages of a no-op build, not `inspect`. Only an image that records no figures makes
/// `inspect` run it, and it says so.
#[test]
fn ptxas_runs_once_per_image_at_build_time_and_never_after() {
    let Some(real) = ptxas() else { return };
    let root = workspace_root();
    let target = target_dir("e2e-ptxas-once");
    let target_s = target.to_string_lossy().into_owned();
    // A new wrapper path each run changes `OFFLOAD_PTXAS`, which the build script watches, so
    // the first build below links (and assembles) again even in a kept target directory.
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let tools = target.join(format!("ptxas-{}-{nonce}", std::process::id()));
    let (wrapper, log) = logging_ptxas(&tools, &real);
    let wrapper_s = wrapper.to_string_lossy().into_owned();
    let vars = [("OFFLOAD_PTXAS", Some(wrapper_s.as_str()))];
    let build = [
        "build",
        "--offload-arch",
        "sm_80,sm_90",
        "--release",
        "-p",
        "saxpy",
        "--target-dir",
        &target_s,
    ];

    let out = cargo_offload_env(&root, &build, &vars);
    check(&out, "the first build");
    let runs = take_runs(&log);
    let mut assembled: Vec<&str> = runs
        .iter()
        .filter(|r| !matches!(r.as_str(), "--version" | "--help"))
        .map(String::as_str)
        .collect();
    assembled.sort_unstable();
    assert_eq!(assembled.len(), 2, "one run per sm: {runs:#?}");
    // A dev build: its PTX carries the kernels' line directives, which ptxas keeps.
    for (run, sm) in assembled.iter().zip(["sm_80", "sm_90"]) {
        assert!(
            run.starts_with(&format!("-arch={sm} -O3 -lineinfo -v ")),
            "{sm} assembled once, with -lineinfo and -v: {runs:#?}"
        );
    }

    // Nothing changed: cargo runs no build script, and the summary runs no ptxas.
    let out = cargo_offload_env(&root, &build, &vars);
    check(&out, "the no-op build");
    assert_eq!(take_runs(&log), Vec::<String>::new(), "no-op build");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Embedded saxpy (4 device images: sm_80 cubin+ptx, sm_90 cubin+ptx)"),
        "{stderr}"
    );

    // Nor do the `offload-image` messages, which carry the recorded figures.
    let out = cargo_offload_env(
        &root,
        &[&build[..], &["--message-format=json"]].concat(),
        &vars,
    );
    let stdout = check(&out, "the no-op build with JSON messages");
    assert_eq!(take_runs(&log), Vec::<String>::new(), "JSON messages");
    let images: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "offload-image")
        .map(|m| m["image"].clone())
        .collect();
    assert_eq!(images.len(), 4, "{stdout}");
    for image in &images {
        assert_eq!(image["resources_from"], "recorded", "{image}");
        assert_eq!(image["resources"][0]["kernel"], "saxpy", "{image}");
        assert!(
            image["resources"][0]["registers"].as_u64() > Some(0),
            "{image}"
        );
    }

    // `inspect` reads the figures from the images.
    let exe = target.join("release/saxpy");
    let exe_s = exe.to_string_lossy().into_owned();
    let json = check(
        &cargo_offload_env(&root, &["inspect", "--json", &exe_s], &vars),
        "cargo offload inspect --json",
    );
    assert_eq!(take_runs(&log), Vec::<String>::new(), "inspect");
    let inspected: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    assert_eq!(inspected, images, "inspect and the build's messages agree");
    let sm_80_cubin = inspected
        .iter()
        .find(|i| i["arch"] == "sm_80" && i["kind"] == "cubin")
        .unwrap();
    let recorded = &sm_80_cubin["resources"][0];
    let text = check(
        &cargo_offload_env(&root, &["inspect", &exe_s], &vars),
        "cargo offload inspect",
    );
    assert_eq!(take_runs(&log), Vec::<String>::new(), "inspect");
    assert!(
        text.contains(&format!("saxpy: registers {}", recorded["registers"])),
        "{text}"
    );
    assert!(!text.contains("run now"), "{text}");

    // An image that records none (as clang's tools make them): `inspect` runs ptxas for it,
    // says so, and finds what the build recorded.
    let bundle = built_bundle(&target, "saxpy");
    let mut stripped: Vec<u8> = Vec::new();
    for bin in offload_format::parse_all(&bundle).unwrap() {
        if bin.arch() == Some("sm_80") && bin.image_kind == offload_format::ImageKind::Ptx {
            let mut bare = bin.clone();
            bare.strings
                .retain(|(key, _)| key != "offload.kernel-resources");
            stripped.extend(bare.to_bytes());
        }
    }
    let file = tools.join("stripped.offload");
    std::fs::write(&file, &stripped).unwrap();
    let file_s = file.to_string_lossy().into_owned();
    let json = check(
        &cargo_offload_env(&root, &["inspect", "--json", &file_s], &vars),
        "cargo offload inspect of an image without figures",
    );
    let runs = take_runs(&log);
    assert_eq!(
        runs.iter()
            .filter(|r| r.starts_with("-arch=sm_80 -O3 -lineinfo -v "))
            .count(),
        1,
        "{runs:#?}"
    );
    let fallback: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    assert_eq!(fallback[0]["resources_from"], "ptxas", "{json}");
    assert_eq!(&fallback[0]["resources"][0], recorded, "{json}");
    let text = check(
        &cargo_offload_env(&root, &["inspect", &file_s], &vars),
        "cargo offload inspect of an image without figures",
    );
    assert!(
        text.contains("(the image records no figures: these are from `ptxas -v` run now)"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&tools);
}

/// `cargo offload run --np 4`: the collectives example as four MPI ranks of the CPU device
/// (Open MPI's `mpirun`, which CI installs), every collective of every element type checked
/// exactly on every rank; and what `--np` says without an `mpirun`.
#[test]
fn collectives_run_exactly_on_four_mpi_ranks_of_the_cpu_device() {
    let root = workspace_root();
    let target = target_dir("e2e-examples");
    let target_s = target.to_string_lossy().into_owned();
    let run = |ranks: &str, mpirun: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cargo-offload"));
        cmd.args(["offload", "run", "--offload-arch", "host", "--release"])
            .args([
                "-p",
                "collectives",
                "--np",
                ranks,
                "--target-dir",
                &target_s,
            ])
            .current_dir(&root)
            .env("OFFLOAD_DEVICE", "cpu")
            // Open MPI starts ranks as root (CI's user) only when told so.
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env_remove("RUSTFLAGS");
        if let Some(mpirun) = mpirun {
            cmd.env("OFFLOAD_MPIRUN", mpirun);
        }
        cmd.output().unwrap()
    };
    let out = run("4", None);
    let stdout = check(&out, "collectives --np 4");
    assert!(stdout.contains("device: cpu"), "{stdout}");
    assert!(stdout.contains("collectives: MPI: "), "{stdout}");
    assert!(
        stdout.contains("4 ranks: 9 collectives x 10 element types exact on every rank"),
        "{stdout}"
    );

    let out = run("2", Some("/nonexistent/mpirun"));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("mpirun") && stderr.contains("/nonexistent/mpirun"),
        "{stderr}"
    );
}

#[test]
fn two_host_crates_in_one_binary_each_register_their_kernels() {
    let dir = fixture("two-crates");
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
    );
    let stdout = check(&out, "two crates");
    assert!(stdout.contains("two crates: OK"), "{stdout}");
}

#[test]
fn a_kernel_crate_that_does_not_compile_shows_rustc_diagnostics() {
    let broken = fixture_as("two-crates", "two-crates-broken");
    std::fs::write(
        broken.join("kernels-b/src/lib.rs"),
        "#![no_std]\n#[offload_rt::kernel]\npub fn fill(n: u32) { let x: u32 = \"text\"; }\n",
    )
    .unwrap();
    let out = cargo_offload(
        &broken,
        &[
            "build",
            "-p",
            "app",
            "--target-dir",
            &target_dir("e2e-fixtures").to_string_lossy(),
        ],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("mismatched types"), "{stderr}");
}

#[test]
fn an_unknown_offload_arch_is_refused_with_the_known_ones() {
    let out = cargo_offload(
        &workspace_root(),
        &["build", "--offload-arch", "sm_80,GFX90A", "-p", "saxpy"],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown offload architecture `GFX90A`"),
        "{stderr}"
    );
    assert!(stderr.contains("did you mean `gfx90a`?"), "{stderr}");
    assert!(stderr.contains("AMD `gfxNNN` (gfx600"), "{stderr}");
}

#[test]
fn conflicting_target_ids_get_clangs_error() {
    let out = cargo_offload(
        &workspace_root(),
        &[
            "build",
            "--offload-arch",
            "gfx90a,gfx90a:xnack+",
            "-p",
            "saxpy",
        ],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid offload arch combinations: 'gfx90a' and 'gfx90a:xnack+'"),
        "{stderr}"
    );
}

/// A project `cargo offload new <args>` writes (the last argument its name) under
/// `new-projects`, anew.
fn new_project(args: &[&str]) -> PathBuf {
    new_project_in(&target_dir("new-projects"), args)
}

#[test]
fn a_new_project_from_the_template_builds_and_runs() {
    let project = new_project(&["hello-offload"]);
    let out = cargo_offload(
        &project,
        &[
            "run",
            "--target-dir",
            &target_dir("e2e-fixtures").to_string_lossy(),
        ],
    );
    let stdout = check(&out, "the new project");
    assert!(stdout.contains("saxpy: 65536 elements OK"), "{stdout}");

    // A build says what it embedded, in Cargo's style.
    let out = cargo_offload(
        &project,
        &[
            "build",
            "--target-dir",
            &target_dir("e2e-fixtures").to_string_lossy(),
        ],
    );
    check(&out, "the new project's build");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("    Embedded hello-offload (1 device image: host elf)"),
        "{stderr}"
    );

    // JSON messages: cargo's own, then one `offload-image` message per embedded image.
    let out = cargo_offload(
        &project,
        &[
            "build",
            "--message-format=json",
            "--target-dir",
            &target_dir("e2e-fixtures").to_string_lossy(),
        ],
    );
    let stdout = check(&out, "the new project's JSON build");
    let messages: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(messages.iter().any(|m| m["reason"] == "build-finished"));
    let images: Vec<&serde_json::Value> = messages
        .iter()
        .filter(|m| m["reason"] == "offload-image")
        .collect();
    assert!(
        images
            .iter()
            .any(|m| m["image"]["arch"] == "host" && m["image"]["kernels"][0] == "saxpy"),
        "{stdout}"
    );

    // An edit of the `[package.metadata.offload] arch` list reruns the build script: the next
    // build embeds what the list now names.
    let manifest = project.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    assert!(text.contains("arch = \"host\""), "{text}");
    std::fs::write(
        &manifest,
        text.replace("arch = \"host\"", "arch = \"sm_80,host\""),
    )
    .unwrap();
    let out = cargo_offload(
        &project,
        &[
            "build",
            "--target-dir",
            &target_dir("e2e-fixtures").to_string_lossy(),
        ],
    );
    check(&out, "the new project's build after its arch list changed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("    Embedded hello-offload (") && stderr.contains("sm_80"),
        "{stderr}"
    );
    std::fs::write(&manifest, text).unwrap();

    // `cargo offload test`: the template's test, and the kernel crate's tests with it (a
    // workspace member cargo would leave out when run in the host crate).
    assert!(project.join("README.md").is_file());
    let kernels_lib = project.join("kernels/src/lib.rs");
    let kernels_source = std::fs::read_to_string(&kernels_lib).unwrap();
    std::fs::write(
        &kernels_lib,
        format!(
            "{kernels_source}\n#[cfg(test)]\nmod tests {{\n    #[test]\n    \
             fn the_kernel_crates_own_test() {{}}\n}}\n"
        ),
    )
    .unwrap();
    let out = cargo_offload(
        &project,
        &[
            "test",
            "--target-dir",
            &target_dir("e2e-fixtures").to_string_lossy(),
        ],
    );
    let stdout = check(&out, "the new project's tests");
    for test in ["saxpy_matches_the_host", "the_kernel_crates_own_test"] {
        assert!(
            stdout.contains(&format!("{test} ... ok")),
            "{test}:\n{stdout}"
        );
    }
    std::fs::write(&kernels_lib, kernels_source).unwrap();

    let again = cargo_offload(project.parent().unwrap(), &["new", "hello-offload"]);
    assert!(
        !again.status.success(),
        "an existing directory must be refused"
    );
}

#[test]
fn a_host_only_project_builds_and_runs_without_the_nightly_and_a_gpu_arch_names_it() {
    let project = new_project(&["stable-only"]);
    let target = target_dir("stable-only");
    let target = target.to_string_lossy();
    // The nightly of GPU builds made unusable: the CPU device builds with the stable toolchain
    // that runs the build.
    let stable_only = [
        ("RUSTUP_TOOLCHAIN", Some("stable")),
        ("OFFLOAD_NIGHTLY_TOOLCHAIN", Some("no-such-nightly")),
        ("OFFLOAD_ARCH", None),
    ];
    let out = cargo_offload_env(&project, &["run", "--target-dir", &target], &stable_only);
    let stdout = check(&out, "the host-only project on stable");
    assert!(stdout.contains("saxpy: 65536 elements OK"), "{stdout}");

    let out = cargo_offload_env(
        &project,
        &[
            "build",
            "--offload-arch",
            "sm_80,host",
            "--target-dir",
            &target,
        ],
        &stable_only,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a GPU build without its nightly: {stderr}"
    );
    assert!(
        stderr
            .contains("--offload-arch sm_80: GPU images need the `no-such-nightly` Rust toolchain"),
        "{stderr}"
    );
    assert!(stderr.contains("cargo offload setup"), "{stderr}");
}

/// Plain `cargo <args>` in `cwd`, as rust-analyzer or a user runs it without `cargo offload`.
fn cargo(cwd: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.args(args).current_dir(cwd);
    for var in [
        "RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_ENCODED_RUSTFLAGS",
        "OFFLOAD_CHECK_ONLY",
    ] {
        cmd.env_remove(var);
    }
    cmd.output().unwrap()
}

#[test]
fn cargo_check_builds_no_device_image_and_the_next_build_builds_them() {
    let project = new_project(&["hello-check"]);
    let target = target_dir("e2e-check");
    if target.exists() {
        std::fs::remove_dir_all(&target).unwrap();
    }
    let target_s = target.to_string_lossy().into_owned();
    let nested = target.join("offload");
    let said = "checking only, so no device images were built";

    // Only the device check's directory: no device image is built.
    let nested_dirs = || -> Vec<String> {
        std::fs::read_dir(&nested)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    };
    for args in [&["check"][..], &["clippy"], &["check", "--release"]] {
        let out = cargo(&project, &[args, &["--target-dir", &target_s]].concat());
        check(&out, &args.join(" "));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.matches(said).count(), 1, "said once:\n{stderr}");
        assert_eq!(
            nested_dirs(),
            ["check"],
            "`cargo {}` ran a device build",
            args.join(" ")
        );
    }

    // A method only `std` has passes the host's type check but no device build's: the check
    // of the kernel crate as device code finds it, with the help the device build gives.
    let lib = project.join("kernels/src/lib.rs");
    let source = std::fs::read_to_string(&lib).unwrap();
    std::fs::write(
        &lib,
        format!("{source}\npub fn norm(x: f32, y: f32) -> f32 {{ (x * x + y * y).sqrt() }}\n"),
    )
    .unwrap();
    let out = cargo(&project, &["check", "--target-dir", &target_s]);
    assert!(!out.status.success(), "std's `sqrt` passed the check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no method named `sqrt` found for type `f32`")
            && stderr.contains("offload_rt::kernel::math"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("no method named `sqrt`").count(),
        1,
        "once:\n{stderr}"
    );

    // A float method through a reference, and `shared_array!` in a generic function (which
    // stops rustc before type checking, so apart): rustc's own suggestions lead nowhere, the
    // help names what kernels write instead.
    for (added, error, help) in [
        (
            "pub fn sine(v: &mut f32) { *v = v.sin(); }",
            "no method named `sin` found for mutable reference `&mut f32`",
            "offload_rt::kernel::math",
        ),
        (
            "pub fn tile<T: Copy>() -> *mut T { offload_rt::shared_array!(T, 64) }",
            "can't use generic parameters from outer item",
            "offload_rt::generic_shared_array!(T, N)",
        ),
    ] {
        std::fs::write(&lib, format!("{source}\n{added}\n")).unwrap();
        let out = cargo(&project, &["check", "--target-dir", &target_s]);
        assert!(!out.status.success(), "`{added}` passed the check");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(error) && stderr.contains(help),
            "`{added}`: no `{help}`:\n{stderr}"
        );
    }
    std::fs::write(&lib, source).unwrap();

    // The release profile has no debuginfo, so `check --release` and `build --release` share
    // one run of the build script: the build must still rerun it and build the images.
    let out = cargo_offload(&project, &["run", "--release", "--target-dir", &target_s]);
    let stdout = check(
        &out,
        "cargo offload run --release after cargo check --release",
    );
    assert!(stdout.contains("saxpy: 65536 elements OK"), "{stdout}");
    assert!(nested.exists(), "the device build ran");
    let out = cargo_offload(&project, &["build", "--release", "--target-dir", &target_s]);
    check(&out, "the build again");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Embedded hello-check (1 device image"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_new_project_links_no_llvm_and_runs_the_installed_device_linker() {
    let project = new_project(&["hello-devlink"]);
    // What a build script of the project compiles: no LLVM, no C library of zstd's.
    let mut tree = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    tree.args(["tree", "--offline", "-e", "normal,build"])
        .current_dir(&project);
    let graph = check(&tree.output().unwrap(), "cargo tree of the new project");
    assert!(graph.contains("offload-build v"), "{graph}");
    for heavy in ["llvm-sys", "inkwell", "zstd-sys", "zstd v"] {
        assert!(
            !graph.contains(heavy),
            "`{heavy}` in the new project's graph:\n{graph}"
        );
    }

    // A plain `cargo build` for a GPU: the device link runs in the executable named, and
    // without one, the error says what to install.
    let target = target_dir("e2e-fixtures");
    let build = |linker: &str| {
        let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        cmd.args(["build", "--target-dir", &target.to_string_lossy()])
            .current_dir(&project)
            .env("OFFLOAD_ARCH", "sm_80")
            .env("OFFLOAD_DEVICE_LINKER", linker);
        for var in ["RUSTFLAGS", "CARGO_TARGET_DIR", "CARGO_ENCODED_RUSTFLAGS"] {
            cmd.env_remove(var);
        }
        cmd.output().unwrap()
    };
    let missing = target.join("no-such-cargo-offload-device");
    let out = build(&missing.to_string_lossy());
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for part in [
        "error[OFF2023]",
        &format!(
            "cargo install cargo-offload --version {}",
            env!("CARGO_PKG_VERSION")
        ),
        "OFFLOAD_DEVICE_LINKER",
        &missing.to_string_lossy(),
    ] {
        assert!(stderr.contains(part), "`{part}` missing in:\n{stderr}");
    }
    check(
        &build(env!("CARGO_BIN_EXE_cargo-offload-device")),
        "a plain cargo build through cargo-offload-device",
    );
    // The device link process's `cargo:` lines reached cargo as the build script's: the
    // cubin policy, which only it reads, reruns the script when it changes.
    let outputs: Vec<String> = std::fs::read_dir(target.join("debug/build"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("hello-devlink-")
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("output")).ok())
        .collect();
    assert!(
        outputs
            .iter()
            .any(|o| o.contains("cargo:rerun-if-env-changed=OFFLOAD_REQUIRE_CUBIN")),
        "{outputs:#?}"
    );
    // The images are the device link's output too: another executable (a reinstall, a newer
    // build of it) reruns the script.
    let rerun = format!(
        "cargo:rerun-if-changed={}",
        env!("CARGO_BIN_EXE_cargo-offload-device")
    );
    assert!(outputs.iter().any(|o| o.contains(&rerun)), "{outputs:#?}");
}

/// Kernel code with a warning in code both builds compile, and one only device builds see.
const WARNING_KERNELS: &str = "
pub fn both() -> u32 {
    let unused_everywhere = 1;
    2
}

#[cfg(offload_device)]
pub fn device_only() -> u32 {
    let unused_on_device = 1;
    3
}
";

#[test]
fn device_build_diagnostics_are_shown_once_as_cargo_shows_them_and_as_json() {
    let project = new_project(&["hello-diagnostics"]);
    let lib = project.join("kernels/src/lib.rs");
    let source = std::fs::read_to_string(&lib).unwrap();
    std::fs::write(&lib, format!("{source}{WARNING_KERNELS}")).unwrap();
    let target = target_dir("e2e-fixtures");
    let target = target.to_string_lossy();
    let build = |extra: &[&str]| {
        let args = [
            &[
                "build",
                "--offload-arch",
                "sm_80,host",
                "--target-dir",
                &target,
            ],
            extra,
        ];
        cargo_offload_env(
            &project,
            &args.concat(),
            &[("CARGO_TERM_COLOR", Some("never"))],
        )
    };

    // Human: each warning once, the device-only one with the architectures that gave it;
    // again when nothing is rebuilt, as cargo replays rustc's warnings.
    for run in ["first build", "fresh build"] {
        let out = build(&[]);
        check(&out, run);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            stderr
                .matches("unused variable: `unused_everywhere`")
                .count(),
            1,
            "{run}:\n{stderr}"
        );
        assert_eq!(
            stderr
                .matches("unused variable: `unused_on_device`")
                .count(),
            1,
            "{run}:\n{stderr}"
        );
        assert!(stderr.contains("--> kernels/src/lib.rs:"), "{stderr}");
        // Cargo-style status lines while the device build runs; none when nothing is rebuilt.
        let statuses = [
            "   Compiling kernels hello-diagnostics-kernels (sm_80, host)",
            "     Linking hello-diagnostics-kernels (sm_80)",
            "   Embedding ",
        ];
        for status in statuses {
            assert_eq!(
                stderr.lines().any(|l| l.starts_with(status)),
                run == "first build",
                "{run}: {status}\n{stderr}"
            );
        }
        let note = stderr
            .lines()
            .find(|l| l.contains("in the device build of"))
            .unwrap_or("");
        assert!(
            note.ends_with("in the device build of `hello-diagnostics-kernels` for sm_80, host"),
            "{run}:\n{stderr}"
        );
    }

    // Under a plain `cargo build` (no `--offload-arch`: the script reruns), one
    // `cargo:warning` line sums each device diagnostic up.
    let out = cargo(&project, &["build", "--target-dir", &target]);
    check(&out, "plain cargo build");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "hello-diagnostics-kernels: device build (host): warning: unused variable: \
             `unused_on_device` at kernels/src/lib.rs:"
        ),
        "{stderr}"
    );

    // `-q`: the script reruns (other architectures than the plain build's), silently.
    let out = build(&["-q"]);
    check(&out, "quiet build");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("Compiling kernels"), "{stderr}");

    // JSON: one compiler-message per diagnostic, the device one naming its architectures,
    // all before `build-finished`.
    let out = build(&["--message-format=json"]);
    let stdout = check(&out, "JSON build");
    let messages: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let about = |what: &str| -> Vec<&serde_json::Value> {
        messages
            .iter()
            .filter(|m| m["reason"] == "compiler-message")
            .filter(|m| {
                m["message"]["message"]
                    .as_str()
                    .unwrap_or("")
                    .contains(what)
            })
            .collect()
    };
    assert_eq!(about("unused_everywhere").len(), 1, "{stdout}");
    let device = about("unused_on_device");
    assert_eq!(device.len(), 1, "{stdout}");
    assert_eq!(
        device[0]["offload_archs"].as_array().map(Vec::len),
        Some(2),
        "{stdout}"
    );
    assert_eq!(
        device[0]["message"]["spans"][0]["file_name"],
        "kernels/src/lib.rs"
    );
    assert_eq!(messages.last().unwrap()["reason"], "build-finished");

    // A device-only error: the build fails, and an IDE reading JSON gets it at its line.
    std::fs::write(
        &lib,
        format!("{source}\n#[cfg(offload_device)]\npub fn broken() -> u32 {{ \"no\" }}\n"),
    )
    .unwrap();
    let out = build(&["--message-format=json"]);
    assert!(!out.status.success());
    let errors: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-message" && m["message"]["level"] == "error")
        .collect();
    assert!(
        errors
            .iter()
            .any(|m| m["message"]["code"]["code"] == "E0308"
                && m["message"]["spans"][0]["file_name"] == "kernels/src/lib.rs"),
        "{errors:?}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Human: the error once, in cargo's report of the build script, with the architectures
    // whose builds gave it; none of the script's `cargo:` lines or the nested cargo's own
    // output around it.
    let out = build(&[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("mismatched types").count(),
        1,
        "the error is shown once:\n{stderr}"
    );
    assert!(
        stderr
            .contains("= note: in the device build of `hello-diagnostics-kernels` for sm_80, host"),
        "{stderr}"
    );
    assert!(
        stderr.contains("failed: rustc's errors are shown above"),
        "the failing build is named by its architectures:\n{stderr}"
    );
    for noise in [
        "cargo:rerun-if",
        "--- stdout",
        "could not compile `hello-diagnostics-kernels`",
    ] {
        assert!(!stderr.contains(noise), "{noise}:\n{stderr}");
    }
}

#[test]
fn kernel_crate_mistakes_get_a_help_naming_what_kernels_use() {
    let project = new_project(&["hello-mistakes"]);
    let lib = project.join("kernels/src/lib.rs");
    let main = project.join("src/main.rs");
    let source = std::fs::read_to_string(&lib).unwrap();
    let target = target_dir("e2e-fixtures");
    let build = || {
        cargo_offload_env(
            &project,
            &["build", "--target-dir", &target.to_string_lossy()],
            &[("CARGO_TERM_COLOR", Some("never"))],
        )
    };

    // A heap type in a kernel crate: rustc's error once, with what kernels use instead.
    std::fs::write(
        &lib,
        format!("{source}\npub fn sizes(n: usize) -> usize {{ let v: Vec<u32> = Vec::new(); v.len() + n }}\n"),
    )
    .unwrap();
    let out = build();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot find type `Vec` in this scope"),
        "{stderr}"
    );
    assert!(
        stderr.contains("= help: kernel crates are `no_std` and a device has no heap"),
        "{stderr}"
    );

    // `#[kernel]` forgotten: its parameters' `#[len]` is unknown, and the host's `launch`
    // error says what gives a function `launch`.
    let unmarked = source.replace("#[kernel]\n", "");
    std::fs::write(&lib, &unmarked).unwrap();
    let out = build();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("= help: `#[len(…)]` is read by `#[kernel]`"),
        "{stderr}"
    );
    std::fs::write(&lib, unmarked.replace("#[len(y.len())] ", "")).unwrap();
    let out = build();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no method named `launch`"), "{stderr}");
    assert!(
        stderr.contains("= help: `launch` is what `#[kernel]` gives"),
        "{stderr}"
    );

    // Nothing launches it either: the build succeeds, and says the crate has no kernel.
    let main_source = std::fs::read_to_string(&main).unwrap();
    std::fs::write(&main, "fn main() {}\n").unwrap();
    let out = build();
    check(&out, "a kernel crate without kernels");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("kernel crate `hello-mistakes-kernels` defines no kernel"),
        "{stderr}"
    );
    std::fs::write(&lib, &source).unwrap();

    // A program that does not depend on the runtime: it links (nothing refers to the
    // runtime's registration), and the warning says what to add to launch the kernels.
    let manifest = project.join("Cargo.toml");
    let manifest_source = std::fs::read_to_string(&manifest).unwrap();
    let without_runtime: String = manifest_source
        .lines()
        .filter(|l| !l.starts_with("offload-rt "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(without_runtime, manifest_source, "{manifest_source}");
    std::fs::write(&manifest, without_runtime).unwrap();
    let out = build();
    check(&out, "a program without the runtime");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`hello-mistakes` does not depend on `offload-rt` with its `host` feature")
            && stderr
                .contains("add `offload-rt = \"0.1\"` to the [dependencies] of `hello-mistakes`"),
        "{stderr}"
    );
    assert!(!stderr.contains("Embedding"), "{stderr}");
    std::fs::write(&manifest, manifest_source).unwrap();
    std::fs::write(&main, main_source).unwrap();
}

/// The CPU device images of the nested builds under `dir`.
fn cpu_images(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "so") {
                found.push(path);
            }
        }
    }
    found
}

#[test]
fn a_dev_build_checks_kernels_and_a_release_build_does_not() {
    let project = new_project(&["hello-checks"]);
    std::fs::write(
        project.join("kernels/src/lib.rs"),
        "#![no_std]\nuse offload_rt::kernel::{DisjointSlice, kernel};\n\n#[kernel]\n\
         pub fn add(n: u32, mut y: DisjointSlice<u32>) {\n    if let Some((_, yi)) = \
         y.for_thread_x() {\n        debug_assert!(n != 7, \"seven\");\n        *yi += n;\n    \
         }\n}\n",
    )
    .unwrap();
    std::fs::write(
        project.join("src/main.rs"),
        "use offload_rt::{Device, DeviceBuffer, LaunchConfig};\n\nfn main() {\n    let n: u32 = \
         std::env::args().nth(1).unwrap().parse().unwrap();\n    let device = Device::cpu();\n    \
         let mut y = DeviceBuffer::from_slice(&device, &[u32::MAX]).unwrap();\n    match \
         hello_checks_kernels::add.launch(&device, LaunchConfig::for_num_elems(1usize), n, &mut y) \
         {\n        Ok(_) => println!(\"y = {}\", y.to_vec().unwrap()[0]),\n        Err(e) => \
         println!(\"error: {e}\"),\n    }\n}\n",
    )
    .unwrap();
    // A target directory of its own: the CPU images it holds are this project's.
    let target = target_dir("e2e-checks");
    let run = |profile: &[&str], n: &str| {
        let mut args = vec!["run", "--target-dir", target.to_str().unwrap()];
        args.extend_from_slice(profile);
        args.extend(["--", n]);
        check(&cargo_offload(&project, &args), "the checks project")
    };
    let dev = run(&[], "1");
    assert!(
        dev.contains("attempt to add with overflow"),
        "a dev build's kernel checks overflow:\n{dev}"
    );
    let dev = run(&[], "7");
    assert!(
        dev.contains("seven"),
        "a dev build's debug_assert! fires:\n{dev}"
    );
    let images = cpu_images(&target.join("debug/build"));
    let images: Vec<PathBuf> = images
        .into_iter()
        .chain(cpu_images(&target.join("offload")))
        .filter(|p| p.to_string_lossy().contains("hello_checks_kernels"))
        .collect();
    assert!(
        images.iter().any(|p| {
            std::fs::read(p).is_ok_and(|b| b.windows(11).any(|w| w == b".debug_line"))
        }),
        "a dev build's CPU image has line tables: {images:?}"
    );
    let release = run(&["--release"], "1");
    assert!(
        release.contains("y = 0"),
        "a release build's kernel wraps:\n{release}"
    );
    let release = run(&["--release"], "7");
    assert!(release.contains("y = 6"), "{release}");
    // The nested build's image, now the release build's: no debug information, not even the
    // runtime library's that its archive carries.
    let release_images: Vec<PathBuf> = cpu_images(&target.join("offload"))
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("hello_checks_kernels"))
        .collect();
    assert!(!release_images.is_empty(), "no CPU image");
    for image in &release_images {
        let bytes = std::fs::read(image).unwrap();
        assert!(
            !bytes.windows(11).any(|w| w == b".debug_info"),
            "a release build's CPU image has no debug information: {}",
            image.display()
        );
    }
}

#[test]
fn run_debugger_stops_in_a_kernel_thread_on_the_cpu_device_and_prints_a_local() {
    let gdb = offload_toolchain::Tool::Gdb
        .find()
        .expect("gdb, which the set-up installs");
    let project = new_project(&["hello-debugger"]);
    let lib = std::fs::read_to_string(project.join("kernels/src/lib.rs")).unwrap();
    let line = lib
        .lines()
        .position(|l| l.contains("*yi += a * xi;"))
        .expect("the template's kernel line")
        + 1;
    // gdb in batch mode, as a user would drive it: a breakpoint on the kernel's line, pending
    // until the CPU image is loaded, then the kernel's parameter and thread index printed.
    let script = project.join("debug.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec '{}' -batch -ex 'set breakpoint pending on' -ex 'break \
             kernels/src/lib.rs:{line}' -ex run -ex 'print a' -ex 'print i' -ex 'info sharedlibrary' -ex kill \"$@\"\n",
            gdb.display()
        ),
    )
    .unwrap();
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&script, mode).unwrap();
    let out = cargo_offload_env(
        &project,
        &[
            "run",
            &format!("--debugger={}", script.display()),
            "--target-dir",
            &target_dir("e2e-fixtures").to_string_lossy(),
        ],
        &[("OFFLOAD_DEVICE", Some("cpu"))],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("hello_debugger_kernels::__offload_kernel_saxpy (a=2")
            && stdout.contains(&format!("at kernels/src/lib.rs:{line}")),
        "the breakpoint is hit in the kernel:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("$1 = 2\n"), "`a` is printed:\n{stdout}");
    assert!(stdout.contains("$2 = "), "`i` is printed:\n{stdout}");
    assert!(
        stdout.contains("offload-cpu-images/libhello_debugger_kernels-"),
        "the CPU image is loaded from a file the debugger reads:\n{stdout}"
    );
}

/// `run --sanitize` takes compute-sanitizer's tools by name and is an option of `run` alone;
/// without an NVIDIA GPU it says so before building, since compute-sanitizer checks only what
/// runs on one. (On a GPU machine the GPU pack runs the programs under compute-sanitizer.)
#[test]
fn run_sanitize_names_its_tools_and_needs_an_nvidia_gpu() {
    let Some(_) = Tool::ComputeSanitizer.for_test() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let stderr = |out: &Output| String::from_utf8_lossy(&out.stderr).into_owned();
    let out = cargo_offload(dir.path(), &["run", "--sanitize=leakcheck"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("memcheck, racecheck, initcheck, synccheck"),
        "{}",
        stderr(&out)
    );
    let out = cargo_offload(dir.path(), &["build", "--sanitize"]);
    assert!(
        stderr(&out).contains("`--sanitize` is an option of `cargo offload run`"),
        "{}",
        stderr(&out)
    );
    let out = cargo_offload(dir.path(), &["run", "--sanitize", "--debugger"]);
    assert!(stderr(&out).contains("choose one"), "{}", stderr(&out));
    if Path::new("/dev/nvidia0").exists() {
        eprintln!("skipped: the no-GPU refusal (this machine has an NVIDIA GPU)");
        return;
    }
    let out = cargo_offload(dir.path(), &["run", "--sanitize=memcheck"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("which checks what runs on an NVIDIA GPU, and this machine has none"),
        "{}",
        stderr(&out)
    );
}

/// `run --sanitize=address` (the default of `--sanitize` without an NVIDIA GPU) builds the
/// program and its CPU device's image with AddressSanitizer and runs it on the CPU device: a
/// kernel's write past its buffer, through a raw pointer in an `unsafe` launch, is reported
/// with the kernel in its stack, and the program fails; the template's safe kernel runs clean.
#[test]
fn run_sanitize_address_reports_a_kernel_writing_past_its_buffer() {
    let project = new_project(&["hello-asan"]);
    let lib = project.join("kernels/src/lib.rs");
    let mut kernels = std::fs::read_to_string(&lib).unwrap();
    kernels.push_str(
        "\n/// Writes one element past the `n` of `out`.\n\
         #[kernel]\n\
         pub unsafe fn poke_past(out: *mut f32, n: u32) {\n\
             if kernel::thread_idx_x() == 0 {\n\
                 // SAFETY: none: the element at `n` is past the buffer.\n\
                 unsafe { *out.add(n as usize) = 1.0 };\n\
             }\n\
         }\n",
    );
    std::fs::write(&lib, kernels).unwrap();
    let main = project.join("src/main.rs");
    let template = std::fs::read_to_string(&main).unwrap();
    let poke = "fn run() -> Result<(), Box<dyn std::error::Error>> {\n\
        if std::env::args().any(|a| a == \"poke\") {\n\
            let device = Device::best()?;\n\
            let mut out = DeviceBuffer::<f32>::zeroed(&device, 16)?;\n\
            // SAFETY: none: the kernel writes past `out`, for the sanitizer to report.\n\
            unsafe { hello_asan_kernels::poke_past.launch(&device, LaunchConfig::linear(1, 1), &mut out, 16)? };\n\
            return Ok(());\n\
        }";
    std::fs::write(
        &main,
        template.replacen(
            "fn run() -> Result<(), Box<dyn std::error::Error>> {",
            poke,
            1,
        ),
    )
    .unwrap();
    let sanitize = if Path::new("/dev/nvidia0").exists() {
        "--sanitize=address"
    } else {
        "--sanitize"
    };
    let target = target_dir("e2e-fixtures");
    let run = |args: &[&str]| {
        let mut all = vec!["run", sanitize, "--target-dir", target.to_str().unwrap()];
        all.extend_from_slice(args);
        cargo_offload(&project, &all)
    };
    let out = run(&[]);
    let stdout = check(&out, "the template under AddressSanitizer");
    assert!(stdout.contains("device: cpu"), "{stdout}");
    assert!(stdout.contains("saxpy: 65536 elements OK"), "{stdout}");

    let out = run(&["--", "poke"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("ERROR: AddressSanitizer: heap-buffer-overflow"),
        "{stderr}"
    );
    assert!(
        stderr.contains("poke_past"),
        "the kernel is in the stack:\n{stderr}"
    );
}

/// Whether `cargo build -v` output shows the package's build script running.
fn build_script_ran(out: &Output) -> bool {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .any(|l| l.contains("Running `") && l.contains("build-script-build"))
}

#[test]
fn editing_a_header_a_cuda_source_includes_rebuilds_it_and_nothing_else_does() {
    if Tool::Clang.for_test().is_none() {
        return;
    }
    let dir = fixture("cuda-rebuild");
    let target = target_dir("e2e-cuda-rebuild");
    let target_s = target.to_string_lossy().into_owned();
    let build = || cargo_offload(&dir, &["build", "-v", "--target-dir", &target_s]);
    let ptx = || {
        let path = walk(&target.join("debug/build"))
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "ptx"))
            .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
            .expect("a PTX file under the build script's OUT_DIR");
        std::fs::read_to_string(path).unwrap()
    };
    check(&build(), "first build");
    let fresh = build();
    check(&fresh, "unchanged build");
    assert!(!build_script_ran(&fresh), "nothing changed, nothing reruns");

    std::fs::write(dir.join("app/include/unused.h"), "#define UNUSED 2\n").unwrap();
    let unrelated = build();
    check(&unrelated, "after editing a header no source includes");
    assert!(
        !build_script_ran(&unrelated),
        "an unrelated header reruns nothing"
    );

    std::fs::write(dir.join("app/include/factor.h"), "#define FACTOR 7.0f\n").unwrap();
    let edited = build();
    check(&edited, "after editing the included header");
    assert!(
        build_script_ran(&edited),
        "the included header reruns the CUDA compile"
    );
    assert!(
        ptx().contains("0f40E00000"),
        "the PTX has the new factor 7.0"
    );
}

#[test]
fn a_new_openmp_project_runs_its_target_region_on_an_offload_device() {
    if llvm_tool(Tool::Clang).is_none() {
        return;
    }
    let project = new_project(&["--template", "openmp", "hello-openmp"]);
    assert!(project.join("cpp/saxpy.cpp").is_file());
    assert!(!project.join("kernels").exists());
    let target = target_dir("e2e-openmp");
    let target = target.to_string_lossy();
    let out = cargo_offload_env(
        &project,
        &["run", "--target-dir", &target],
        &[("OMP_TARGET_OFFLOAD", Some("MANDATORY"))],
    );
    let stdout = check(&out, "the new OpenMP project");
    assert!(
        stdout.contains("target region: ran on an offload device"),
        "{stdout}"
    );
    assert!(stdout.contains("saxpy: 65536 elements OK"), "{stdout}");

    // The wrapped OpenMP image is in the executable, where `cargo offload` finds it.
    let out = cargo_offload(&project, &["build", "--target-dir", &target]);
    check(&out, "the new OpenMP project's build");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let host = offload_build::tooling::arch::host_triple();
    assert!(
        stderr.contains(&format!(
            "    Embedded hello-openmp (1 device image: {host} elf)"
        )),
        "{stderr}"
    );

    let unknown = cargo_offload(
        project.parent().unwrap(),
        &["new", "--template", "nope", "other"],
    );
    assert!(!unknown.status.success());
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        stderr.contains("default") && stderr.contains("openmp"),
        "{stderr}"
    );
}

#[test]
fn a_new_mixed_project_builds_its_cuda_sources_and_runs_on_the_cpu_device() {
    if llvm_tool(Tool::Clang).is_none() {
        return;
    }
    let project = new_project(&["--template", "mixed", "hello-mixed"]);
    for file in [
        "cuda/poly.cu",
        "cuda/scale.cu",
        "hip/poly.hip",
        "kernels/src/lib.rs",
    ] {
        assert!(project.join(file).is_file(), "{file}");
    }
    let target = target_dir("e2e-mixed-template");
    let target = target.to_string_lossy();
    let out = cargo_offload_env(
        &project,
        &["run", "--target-dir", &target],
        &[("OFFLOAD_DEVICE", Some("cpu"))],
    );
    let stdout = check(&out, "the new mixed project");
    assert!(stdout.contains("polynomial: 1000 elements OK"), "{stdout}");
    assert!(stdout.contains("needs an NVIDIA or AMD GPU"), "{stdout}");

    // The template's `sm_80,host`: the Rust kernels (linked with the relocatable CUDA source)
    // for both, and the CUDA `scale` module for sm_80, cubin and PTX where ptxas knows sm_80.
    let out = cargo_offload(&project, &["build", "--target-dir", &target]);
    check(&out, "the new mixed project's build");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let embedded = stderr
        .lines()
        .find(|l| l.trim_start().starts_with("Embedded hello-mixed"))
        .unwrap_or_else(|| panic!("no Embedded line:\n{stderr}"));
    let ptxas_knows_sm_80 = ptxas().is_some();
    let sm_80 = if ptxas_knows_sm_80 {
        "sm_80 cubin+ptx"
    } else {
        "sm_80 ptx"
    };
    let count = if ptxas_knows_sm_80 { 5 } else { 3 };
    assert!(
        embedded.ends_with(&format!(
            "Embedded hello-mixed ({count} device images; hello_mixed_kernels: {sm_80}, \
             host elf; scale: {sm_80})"
        )),
        "{embedded}"
    );
}

/// `examples/mixed` embeds the Rust kernel crate's images (device-linked with the relocatable
/// CUDA/HIP sources) and the CUDA/HIP kernels' own images side by side, as LLVM reads them.
#[test]
fn mixed_example_embeds_rust_and_cuda_hip_images_together() {
    let Some(objdump) = llvm_tool(Tool::LlvmObjdump) else {
        return;
    };
    if Tool::Clang.for_test().is_none() {
        return;
    }
    let root = workspace_root();
    let target = target_dir("e2e-mixed");
    let target_s = target.to_string_lossy().into_owned();
    check(
        &cargo_offload(
            &root,
            &[
                "build",
                "--offload-arch",
                "sm_80,gfx90a,host",
                "--release",
                "-p",
                "mixed",
                "--target-dir",
                &target_s,
            ],
        ),
        "cargo offload build -p mixed",
    );
    let exe = target.join("release/mixed");
    let json = check(
        &cargo_offload(&root, &["inspect", "--json", &exe.to_string_lossy()]),
        "cargo offload inspect",
    );
    let images: serde_json::Value = serde_json::from_str(&json).unwrap();
    let modules: Vec<(String, String)> = images
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["module"].as_str().unwrap_or("").to_owned(),
                i["arch"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    for (module, arch) in [
        ("mixed_kernels", "sm_80"),
        ("mixed_kernels", "gfx90a"),
        ("mixed_kernels", "host"),
        ("scale", "sm_80"),
        ("scale", "gfx90a"),
    ] {
        assert!(
            modules.iter().any(|(m, a)| m == module && a == arch),
            "{module} for {arch} in {modules:?}"
        );
    }
    let listing = check(
        &Command::new(&objdump)
            .arg("--offloading")
            .arg(&exe)
            .output()
            .unwrap(),
        "llvm-objdump --offloading",
    );
    for arch in ["sm_80", "gfx90a", "host"] {
        assert!(
            listing.contains(&format!("arch            {arch}")),
            "{listing}"
        );
    }
    assert!(listing.contains("kind            ptx"), "{listing}");
}

/// A crate as a user has it before `cargo offload init`: a comment and a dependency of its own.
fn write_plain_crate(dir: &Path, name: &str) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
             # Errors, the easy way.\n[dependencies]\nanyhow = \"1\" # any version 1\n"
        ),
    )
    .unwrap();
    std::fs::write(dir.join("src/main.rs"), "fn main() {}\n").unwrap();
}

/// The default template's main.rs, which launches the template kernel crate's `saxpy`, for the
/// kernel crate `kernels_name`.
fn template_main(kernels_name: &str) -> String {
    let text = std::fs::read_to_string(
        workspace_root().join("crates/cargo-offload/templates/default/src/main.rs.tmpl"),
    )
    .unwrap()
    .replace("{{kernels_ident}}", &kernels_name.replace('-', "_"));
    assert!(!text.contains("{{"), "main.rs keeps a placeholder:\n{text}");
    text
}

#[test]
fn init_sets_up_an_existing_crate_that_then_runs_its_kernel() {
    // Outside the repository, so that the crate belongs to no workspace: `init` gives it one.
    let scratch = tempfile::Builder::new()
        .prefix("offload-init-")
        .tempdir()
        .unwrap();
    let project = scratch.path().join("init-app");
    write_plain_crate(&project, "init-app");

    let out = cargo_offload(&project, &["init"]);
    let stdout = check(&out, "cargo offload init");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("     Created kernel crate `init-app-kernels` in kernels\n"),
        "{stderr}"
    );
    assert!(stderr.contains("     Created build.rs\n"), "{stderr}");
    assert!(stderr.contains("    Modified Cargo.toml: "), "{stderr}");
    assert!(
        stdout.contains("init_app_kernels::saxpy.launch(") && stdout.contains("kernels/src/lib.rs"),
        "{stdout}"
    );
    let manifest = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
    for kept in [
        "# Errors, the easy way.\n[dependencies]\n",
        "anyhow = \"1\" # any version 1\n",
    ] {
        assert!(manifest.contains(kept), "{kept:?} lost:\n{manifest}");
    }
    for added in [
        "[package.metadata.offload]\narch = \"host\"\n",
        "init-app-kernels = { path = \"kernels\" }\n",
        "[workspace]\nmembers = [\".\", \"kernels\"]\n",
        "check-cfg = ['cfg(offload_device)']",
    ] {
        assert!(manifest.contains(added), "{added:?} missing:\n{manifest}");
    }

    std::fs::write(
        project.join("src/main.rs"),
        template_main("init-app-kernels"),
    )
    .unwrap();
    let out = cargo_offload(
        &project,
        &[
            "run",
            "--target-dir",
            &target_dir("e2e-fixtures").to_string_lossy(),
        ],
    );
    let stdout = check(&out, "the initialised crate");
    assert!(stdout.contains("saxpy: 65536 elements OK"), "{stdout}");

    let again = cargo_offload(&project, &["init"]);
    assert!(!again.status.success(), "a second init must be refused");
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains("Cargo.toml is set up for offload already"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(project.join("Cargo.toml")).unwrap(),
        manifest
    );
}

#[test]
fn init_in_a_member_of_a_workspace_adds_the_kernel_crate_to_that_workspace() {
    let root = target_dir("new-projects").join("init-workspace");
    if root.exists() {
        std::fs::remove_dir_all(&root).unwrap();
    }
    std::fs::create_dir_all(&root).unwrap();
    let root_manifest = "# The workspace of a crate that `init` sets up.\n[workspace]\n\
                         resolver = \"3\"\nmembers = [\n    \"crates/app\", # the program\n]\n";
    std::fs::write(root.join("Cargo.toml"), root_manifest).unwrap();
    let app = root.join("crates/app");
    write_plain_crate(&app, "init-member");

    let out = cargo_offload(&root, &["init", "crates/app"]);
    check(&out, "cargo offload init crates/app");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("    Modified Cargo.toml: workspace member `crates/app/kernels`"),
        "{stderr}"
    );
    let edited = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(
        edited.starts_with(
            "# The workspace of a crate that `init` sets up.\n[workspace]\nresolver = \"3\"\n\
             members = [\n    \"crates/app\", # the program\n    \"crates/app/kernels\",\n]\n"
        ),
        "{edited}"
    );
    assert!(
        edited.contains("[workspace.lints.rust]\nunexpected_cfgs"),
        "{edited}"
    );
    let member = std::fs::read_to_string(app.join("Cargo.toml")).unwrap();
    assert!(!member.contains("[workspace"), "{member}");
    assert!(app.join("kernels/src/lib.rs").is_file());
    assert!(app.join("build.rs").is_file());

    std::fs::write(
        app.join("src/main.rs"),
        template_main("init-member-kernels"),
    )
    .unwrap();
    std::fs::copy(workspace_root().join("Cargo.lock"), root.join("Cargo.lock")).unwrap();
    let out = cargo_offload(
        &root,
        &[
            "run",
            "-p",
            "init-member",
            "--target-dir",
            &target_dir("e2e-fixtures").to_string_lossy(),
        ],
    );
    let stdout = check(&out, "the initialised workspace member");
    assert!(stdout.contains("saxpy: 65536 elements OK"), "{stdout}");
}
