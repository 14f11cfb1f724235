//! Miri and ThreadSanitizer on the parts they can run: the byte formats and the runtime's
//! registry and image selection under Miri (undefined behaviour, out-of-bounds reads, misuse
//! of the registry's raw descriptor pointers), the CPU device's worker pool under
//! ThreadSanitizer (data races in its launch hand-off and shutdown).

use std::process::Command;

use crate::{NIGHTLY, Result, root, run};

/// `cargo` of the device toolchain (see [`crate::with_nightly`]).
fn nightly_cargo() -> Command {
    crate::with_nightly("cargo")
}

/// Installs Miri for the device toolchain when it is missing.
fn miri_installed() -> Result {
    let components = Command::new("rustup")
        .args(["component", "list", "--installed", "--toolchain", NIGHTLY])
        .output()
        .map_err(|e| format!("could not run rustup: {e}"))?;
    if !String::from_utf8_lossy(&components.stdout)
        .lines()
        .any(|l| l.starts_with("miri"))
    {
        run(Command::new("rustup").args(["component", "add", "miri", "--toolchain", NIGHTLY]))?;
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
