//! Miri and the sanitizers on the parts they can run: the byte formats and the runtime's
//! registry and image selection under Miri (undefined behaviour, out-of-bounds reads, misuse
//! of the registry's raw descriptor pointers), the CPU device's worker pool under
//! ThreadSanitizer (data races in its launch hand-off and shutdown), and a plugin with kernels
//! loaded and unloaded under AddressSanitizer (use after unload, leaks left by each unload).

use std::path::Path;
use std::process::Command;

use crate::{NIGHTLY, Result, root, run};

/// `cargo` of the device toolchain (see [`crate::with_nightly`]).
fn nightly_cargo() -> Command {
    crate::with_nightly("cargo")
}

/// Every run of this module: Miri, ThreadSanitizer, AddressSanitizer.
pub fn all() -> Result {
    miri()?;
    thread_sanitizer()?;
    address_sanitizer()
}

/// Installs Miri for the device toolchain when it is missing.
fn miri_installed() -> Result {
    let components = offload_toolchain::Tool::Rustup
        .command()
        .args(["component", "list", "--installed", "--toolchain", NIGHTLY])
        .output()
        .map_err(|e| format!("could not run rustup: {e}"))?;
    if !String::from_utf8_lossy(&components.stdout)
        .lines()
        .any(|l| l.starts_with("miri"))
    {
        run(offload_toolchain::Tool::Rustup.command().args([
            "component",
            "add",
            "miri",
            "--toolchain",
            NIGHTLY,
        ]))?;
    }
    run(nightly_cargo().args(["miri", "setup"]))
}

fn miri_test(flags: &str, args: &[&str]) -> Result {
    run(nightly_cargo()
        .env("MIRIFLAGS", flags)
        .args(["miri", "test", "--locked"])
        .args(args))
}

/// Every test of `offload-format` (those of the C codecs, zstd and zlib, are ignored under
/// Miri), and the runtime's registry and selection tests.
pub fn miri() -> Result {
    miri_installed()?;
    // Tests read fixtures and the repository's files; isolation would refuse them.
    miri_test(
        "-Zmiri-disable-isolation",
        &["-p", "offload-format", "--lib"],
    )?;
    // Registrations need data that lives for the process: the tests leak it on purpose.
    miri_test(
        "-Zmiri-disable-isolation -Zmiri-ignore-leaks",
        &["-p", "offload-rt", "--lib", "--", "registry", "select"],
    )
}

/// The worker pool's tests with ThreadSanitizer, the standard library instrumented too
/// (`-Zbuild-std`), so that its synchronization is seen.
pub fn thread_sanitizer() -> Result {
    let target = crate::host_triple()?;
    run(nightly_cargo()
        .env("RUSTFLAGS", "-Zsanitizer=thread")
        .env("RUSTDOCFLAGS", "-Zsanitizer=thread")
        .env("CARGO_TARGET_DIR", root().join("target/tsan"))
        .args([
            "test",
            "--locked",
            "-Zbuild-std",
            "--target",
            &target,
            "-p",
            "offload-rt",
            "--lib",
            "--",
            "pool",
        ]))
}

/// The reliability test's plugin program (`crates/cargo-offload/tests/fixtures/plugin`) built
/// with AddressSanitizer and run for 100 load/unload cycles: ASan reports any use of the
/// plugin's memory after `dlclose` and, through LeakSanitizer at exit, any allocation an
/// unload left behind; the program checks every cycle's results and that the plugin was
/// unmapped each time.
pub fn address_sanitizer() -> Result {
    let target = crate::host_triple()?;
    let work = root().join("target/asan");
    let project = work.join("plugin");
    let _ = std::fs::remove_dir_all(&project);
    let fixture = root().join("crates/cargo-offload/tests/fixtures/plugin");
    copy_fixture(&fixture, &project, &root().join("crates"))?;
    // The workspace's lock file pins the versions; cargo adds the fixture's own packages.
    std::fs::copy(root().join("Cargo.lock"), project.join("Cargo.lock"))
        .map_err(|e| format!("copying Cargo.lock into {}: {e}", project.display()))?;
    // `--target` keeps the sanitizer off build scripts (and so off the nested device builds
    // they run, whose images the runtime loads as they are).
    run(nightly_cargo()
        .current_dir(&project)
        .env("RUSTFLAGS", "-Zsanitizer=address")
        .env("CARGO_TARGET_DIR", work.join("target"))
        .args(["build", "-p", "app", "-p", "plugin", "--target", &target]))?;
    let bin = work.join("target").join(&target).join("debug");
    let cycles = "100";
    eprintln!("xtask: running the plugin program with AddressSanitizer, {cycles} cycles");
    let out = Command::new(bin.join("app"))
        .arg(bin.join("libplugin.so"))
        .arg(cycles)
        .env("OFFLOAD_DEVICE", "cpu")
        .output()
        .map_err(|e| format!("could not run {}: {e}", bin.join("app").display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let expected = format!("plugin cycles: {cycles} all right, unmapped after {cycles}");
    if !out.status.success() || !stdout.contains(&expected) {
        return Err(format!(
            "the plugin program under AddressSanitizer: {}\n{stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    eprintln!("xtask: {}", stdout.trim());
    Ok(())
}

/// Copies the fixture `from` to `to`, pointing its path dependencies (written relative to the
/// fixture's place in the repository) at `crates`.
fn copy_fixture(from: &Path, to: &Path, crates: &Path) -> Result {
    let err =
        |what: &str, path: &Path, e: std::io::Error| format!("{what} {}: {e}", path.display());
    std::fs::create_dir_all(to).map_err(|e| err("creating", to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| err("reading", from, e))? {
        let entry = entry.map_err(|e| err("reading", from, e))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if src.is_dir() {
            copy_fixture(&src, &dst, crates)?;
        } else if entry.file_name() == "Cargo.toml" {
            let text = std::fs::read_to_string(&src).map_err(|e| err("reading", &src, e))?;
            let text = text.replace("../../../../../", &format!("{}/", crates.display()));
            std::fs::write(&dst, text).map_err(|e| err("writing", &dst, e))?;
        } else {
            std::fs::copy(&src, &dst).map_err(|e| err("copying", &src, e))?;
        }
    }
    Ok(())
}
