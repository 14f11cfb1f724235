//! The runtime's fixture kernels (tests/fixtures/kernels) built for the CPU device by the build
//! engine (`offload_build::tooling::host_device`, as `build.rs` builds them) and wrapped for
//! registration, shared by the CPU-device tests.
#![allow(dead_code)]

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use offload_format::{ImageKind, OffloadBinary, OffloadKind};

/// The fixture's kernel module (its library name).
pub const MODULE: &str = "offload_rt_test_kernels";

pub fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernels")
}

/// The fixture's CPU image (bytes, exported kernels), or `Err(why it cannot be built here)`
/// when the device toolchain is missing. Every test binary builds it in the same directory.
pub fn build_image() -> Result<(Vec<u8>, Vec<String>), String> {
    build_image_at(offload_format::CpuLevel::Baseline)
}

/// [`build_image`] for a level of the instruction set (`-Ctarget-cpu`), each level in a
/// directory of its own, in the form of barriers [`image_form`] says.
pub fn build_image_at(level: offload_format::CpuLevel) -> Result<(Vec<u8>, Vec<String>), String> {
    build_image_in_form(level, Some(image_form()))
}

/// The form of barriers of the fixture's image: `OFFLOAD_CPU_BARRIERS_FORM` where it says
/// `source` (the fallback of builds without the CPU link, tested so in a run of its own),
/// else `ir`, the CPU device's path, whose build fails where the CPU link is missing.
pub fn image_form() -> &'static str {
    match std::env::var("OFFLOAD_CPU_BARRIERS_FORM").as_deref() {
        Ok("source") => "source",
        _ => "ir",
    }
}

/// [`build_image_at`] with the form of barriers `form` (`ir`, `source`), as
/// `OFFLOAD_CPU_BARRIERS_FORM` would ask for it; `None`: the build's choice.
pub fn build_image_in_form(
    level: offload_format::CpuLevel,
    form: Option<&str>,
) -> Result<(Vec<u8>, Vec<String>), String> {
    let toolchain = offload_toolchain::DEVICE_TOOLCHAIN;
    let present = offload_toolchain::Tool::Rustup
        .command()
        .args(["run", toolchain, "rustc", "-V"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !present {
        return Err(format!(
            "the device toolchain `{toolchain}` is not installed"
        ));
    }
    let krate = offload_build::KernelCrate {
        package: "offload-rt-test-kernels".to_owned(),
        lib_name: MODULE.to_owned(),
        manifest_path: fixture_dir().join("Cargo.toml"),
        root: fixture_dir(),
        watch: Vec::new(),
        deps: Vec::new(),
        default_features: true,
        features: Vec::new(),
        panic: offload_build::PanicStrategy::Report,
    };
    let dir = match level {
        offload_format::CpuLevel::Baseline => "cpu-device".to_owned(),
        level => format!("cpu-device-{level}"),
    };
    let target_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(dir);
    let image = offload_build::tooling::host_device::build_in_form(
        &offload_build::tooling::env::Env::detect(),
        &krate,
        level,
        &target_dir,
        None,
        form,
    )
    .unwrap_or_else(|e| panic!("device build of the fixture failed: {e}"));
    Ok((image.bytes, image.kernels))
}

/// A CPU image as a bundle of kernel module `module` exporting `kernels` (comma-separated).
pub fn bundle(module: &str, kernels: &str, image: &[u8]) -> Vec<u8> {
    bundle_at(module, kernels, image, "host")
}

/// [`bundle`] of an image of CPU level `arch` (`host`, `x86-64-v3`).
pub fn bundle_at(module: &str, kernels: &str, image: &[u8], arch: &str) -> Vec<u8> {
    OffloadBinary {
        image_kind: ImageKind::Object,
        offload_kind: OffloadKind::OpenMp,
        flags: 0,
        strings: vec![
            (
                Cow::Borrowed("triple"),
                Cow::Borrowed(offload_build::tooling::arch::host_triple()),
            ),
            (Cow::Borrowed("arch"), Cow::Owned(arch.to_owned())),
            (
                Cow::Borrowed("offload.module"),
                Cow::Owned(module.to_owned()),
            ),
            (
                Cow::Borrowed("offload.kernels"),
                Cow::Owned(kernels.to_owned()),
            ),
        ],
        image: Cow::Borrowed(image),
    }
    .to_bytes()
}

/// Prints why a test cannot run here; under CI that is a failure.
/// Builds the fixture's CPU image and registers it once per test process, under descriptor
/// name `name`; `false` (after printing why) when the device toolchain is missing, which fails
/// under CI.
pub fn register_fixture(name: &'static str) -> bool {
    static READY: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let ready = READY.get_or_init(|| {
        let (bytes, kernels) = build_image()?;
        let bundle = bundle(MODULE, &kernels.join(","), &bytes);
        offload_rt::__internal::register_bundle(name, bundle);
        Ok(())
    });
    is_ready(ready)
}

/// Whether a test's set-up `ready` succeeded; if not, prints why (a failure under CI).
pub fn is_ready(ready: &Result<(), String>) -> bool {
    match ready {
        Ok(()) => true,
        Err(why) => {
            skip(why);
            false
        }
    }
}

pub fn skip(why: &str) {
    assert!(std::env::var_os("CI").is_none(), "CI: {why}");
    eprintln!("skipped: {why}");
}
