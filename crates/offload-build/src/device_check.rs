//! The kernel crates checked as device code under `cargo check` (and so clippy and
//! rust-analyzer): a `cargo check` of each for the CPU device (`--cfg offload_device`, the host
//! triple, the crate's features). A kernel crate is `no_std`, but its host build has `std` in
//! its crate graph (through the runtime), so a method only `std` has (`f32::sqrt`) type-checks
//! there and fails in every device build; checked as device code, with `core` alone, it fails
//! at check time, with the help the device build gives.

use std::path::Path;

use crate::arch::host_triple;
use crate::env::{Env, OFFLOAD_DEVICE_CHECK};
use crate::error::Result;
use crate::metadata::KernelCrate;
use crate::nested;

/// Checks each of `kernel_crates` as device code, in `offload_dir/check`; the first failure's
/// error (rustc's diagnostics go through [`crate::diagnostics`], each once).
/// `OFFLOAD_DEVICE_CHECK=0` skips it.
pub fn check(env: &Env, kernel_crates: &[KernelCrate], offload_dir: &Path) -> Result<()> {
    if env.get(OFFLOAD_DEVICE_CHECK).as_deref() == Some("0") || kernel_crates.is_empty() {
        return Ok(());
    }
    let toolchain = nested::CpuToolchain::find(env)?;
    let target_dir = offload_dir.join("check");
    for krate in kernel_crates {
        let mut cmd = toolchain.cargo(env, "check");
        cmd.arg("--manifest-path")
            .arg(&krate.manifest_path)
            .arg("--lib")
            .args(krate.feature_args())
            .arg("--target")
            .arg(host_triple())
            .arg("--target-dir")
            .arg(&target_dir)
            .env(
                "CARGO_ENCODED_RUSTFLAGS",
                nested::encoded_rustflags(&["--cfg", "offload_device", "-Cpanic=abort"]),
            );
        nested::run_for_artifacts(env, cmd, &krate.manifest_path, &krate.package, "host")?;
    }
    Ok(())
}
