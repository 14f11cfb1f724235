//! The nested device builds under `RUSTC_WRAPPER=sccache`: every unit is one sccache keeps,
//! the kernel crate among them (an rlib, not a linked output), so a clean rebuild of the same
//! target directory compiles nothing (`sccache --show-stats`: no miss) and links the same
//! image. sccache runs a server of its own here (its own directory and port), which the test
//! stops at the end.
#![cfg(feature = "llvm")]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use offload_build::OffloadArch;
use offload_build::tooling::arch::parse_list;
use offload_build::tooling::device_link;
use offload_build::tooling::env::Env;
use offload_format::ImageKind;

fn image(arch: &OffloadArch, target_dir: &Path, kind: ImageKind) -> Vec<u8> {
    device_link::build_gpu_images(&Env::detect(), &common::rt_kernels(), arch, target_dir, &[])
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .find(|i| i.image_kind == kind)
        .unwrap_or_else(|| panic!("no {kind:?} image"))
        .bytes
}

/// `sccache ARGS` with the test's server; its standard output.
fn sccache(program: &Path, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "sccache {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The number on the line of `--show-stats` that starts with `label`.
fn stat(stats: &str, label: &str) -> u64 {
    stats
        .lines()
        .find(|l| l.starts_with(label))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `{label}` in:\n{stats}"))
}

/// Stops the test's sccache server however the test ends.
struct Server(PathBuf);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new(&self.0).arg("--stop-server").output();
    }
}

#[test]
fn a_clean_rebuild_under_sccache_compiles_nothing_and_links_the_same_images() {
    if !common::nightly_ready() {
        return;
    }
    let program = offload_toolchain::Tool::Sccache
        .find()
        .unwrap_or_else(|e| panic!("{e}"));
    let scratch = tempfile::tempdir().unwrap();
    // SAFETY: this test binary has this one test, and nothing else in it reads or writes the
    // environment meanwhile.
    unsafe {
        std::env::set_var("SCCACHE_DIR", scratch.path().join("sccache"));
        std::env::set_var(
            "SCCACHE_SERVER_PORT",
            (20_000 + std::process::id() % 20_000).to_string(),
        );
        std::env::set_var("SCCACHE_IDLE_TIMEOUT", "0");
        std::env::set_var("RUSTC_WRAPPER", &program);
        // The device link's own cache would hide nothing here, but the units' would: off.
        std::env::set_var("OFFLOAD_BUILD_CACHE", "off");
    }
    sccache(&program, &["--start-server"]);
    let _server = Server(program.clone());

    let arch = parse_list("gfx90a", "the test").unwrap()[0];
    let target = scratch.path().join("target/amdgcn-amd-amdhsa");
    let first = image(&arch, &target, ImageKind::Object);
    let cold = sccache(&program, &["--show-stats"]);
    assert!(stat(&cold, "Cache misses") > 0, "{cold}");

    sccache(&program, &["--zero-stats"]);
    std::fs::remove_dir_all(&target).unwrap();
    let second = image(&arch, &target, ImageKind::Object);
    let warm = sccache(&program, &["--show-stats"]);
    assert_eq!(
        stat(&warm, "Cache misses"),
        0,
        "every unit from the cache:\n{warm}"
    );
    // core, compiler_builtins, the device API's crates and the kernel crate, each a hit.
    assert!(stat(&warm, "Cache hits") >= 5, "{warm}");
    assert_eq!(second, first, "the same code object");
}
