//! Helpers of the GPU device-link tests: the fixtures' nested builds, the tools that read
//! their images, and the skip-or-fail rule for a missing tool.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use offload_build::OffloadArch;
use offload_build::tooling::device_link;
use offload_build::tooling::diagnostics;
use offload_build::tooling::env::Env;
use offload_toolchain::Tool;

pub fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("gpu-fixture")
}

/// A tool the test needs: present, or a visible skip (a failure under CI).
#[expect(
    clippy::disallowed_methods,
    reason = "the test harness reads CI directly"
)]
pub fn require(tool: &str, present: bool) -> bool {
    if present {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("{tool} is required in CI but missing");
    }
    eprintln!("skipped: {tool} not found");
    false
}

/// Whether the device toolchain (nightly with rust-src) runs.
pub fn device_toolchain_present() -> bool {
    offload_toolchain::Tool::Rustup
        .command()
        .args([
            "run",
            offload_toolchain::DEVICE_TOOLCHAIN,
            "rustc",
            "--print",
            "sysroot",
        ])
        .output()
        .is_ok_and(|o| o.status.success())
}

pub fn nightly_ready() -> bool {
    require(
        "the device toolchain with rust-src",
        device_toolchain_present(),
    )
}

pub fn readelf(args: &[&str], file: &Path) -> String {
    let out = Command::new(Tool::LlvmReadelf.for_test().expect("llvm-readelf"))
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "llvm-readelf {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `llvm-objdump -d --mcpu=PROCESSOR` of a code object.
pub fn disassemble(image: &[u8], processor: &str, dir: &Path) -> String {
    let path = dir.join(format!("{processor}.elf"));
    std::fs::write(&path, image).unwrap();
    let out = Command::new(Tool::LlvmObjdump.for_test().expect("llvm-objdump"))
        .arg("-d")
        .arg(format!("--mcpu={processor}"))
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "llvm-objdump: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The instructions of one function of a disassembly (`<name>:` up to the next blank line).
pub fn function_body<'a>(disassembly: &'a str, name: &str) -> Vec<&'a str> {
    disassembly
        .lines()
        .skip_while(|l| !l.ends_with(&format!("<{name}>:")))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect()
}

/// The build-script fixture's kernel crate (`tests/fixtures/rt-kernels`) as a build sees it.
pub fn rt_kernels() -> offload_build::KernelCrate {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rt-kernels");
    offload_build::KernelCrate {
        package: "rt-fixture-kernels".to_owned(),
        lib_name: "rt_fixture_kernels".to_owned(),
        manifest_path: root.join("Cargo.toml"),
        root,
        watch: Vec::new(),
        deps: Vec::new(),
        default_features: true,
        features: Vec::new(),
        panic: offload_build::PanicStrategy::Report,
    }
}

/// The runtime's fixture kernels (every device-API feature the CPU device tests run).
pub fn rt_fixture_inputs(target: &OffloadArch) -> Vec<device_link::DeviceInput> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../offload-rt/tests/fixtures/kernels/Cargo.toml");
    let dir = target_dir().join(format!("offload-rt-kernels-{}", target.triple()));
    nested_inputs(&Env::detect(), &manifest, target, &dir)
}

/// The device-link inputs of the kernel crate at `manifest` for `target` (a nested build in
/// `dir`). A failed build panics with rustc's errors, which a build script would report
/// after its device links and a test would otherwise never show.
pub fn nested_inputs(
    env: &Env,
    manifest: &Path,
    target: &OffloadArch,
    dir: &Path,
) -> Vec<device_link::DeviceInput> {
    device_link::device_inputs(env, manifest, target, dir).unwrap_or_else(|e| {
        let errors: Vec<String> = diagnostics::take_recorded()
            .iter()
            .filter_map(|m| diagnostics::rendered(m).map(str::to_owned))
            .collect();
        panic!(
            "nested build of {} for {target}: {e}\nrustc said:\n{}",
            manifest.display(),
            errors.join("\n")
        )
    })
}

/// The lines of one `.entry` of a PTX module.
pub fn ptx_entry<'a>(ptx: &'a str, name: &str) -> Vec<&'a str> {
    ptx.lines()
        .skip_while(|l| !l.contains(&format!(".entry {name}(")))
        .take_while(|l| *l != "}")
        .map(str::trim)
        .collect()
}
