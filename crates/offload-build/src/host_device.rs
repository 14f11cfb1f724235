//! The host CPU as a device: the kernel crate built for the host crate's own target with
//! `--cfg offload_device`, as a static library (one object after fat LTO, which compiler
//! caches such as sccache keep), then linked here into an ELF shared object exporting the
//! runtime's symbols. That shared object is the device image.
//! The pinned nightly builds it where installed, else the toolchain that runs the outer build
//! ([`nested::CpuToolchain`]), stable included: the CPU device needs neither the nightly of
//! GPU builds nor `rust-src`.

use std::path::{Path, PathBuf};

use offload_format::CpuLevel;
use offload_format::image::elf;

use crate::arch::{OffloadArch, host_triple};
use crate::env::Env;
use crate::error::{Error, IoContext, Result};
use crate::image::DeviceImage;
use crate::metadata::KernelCrate;
use crate::nested;

/// Builds `krate` for the CPU device at `level` (rustc's `-Ctarget-cpu` of its name), in
/// `target_dir` (a directory of its own), the image linked with the static library `library`
/// (directory, link name) where there is one: the host side of relocatable CUDA/HIP sources.
/// The image is linked by the linker of the build (`RUSTC_LINKER`), else `cc`.
pub fn build(
    env: &Env,
    krate: &KernelCrate,
    level: CpuLevel,
    target_dir: &Path,
    library: Option<&(PathBuf, String)>,
) -> Result<DeviceImage> {
    let mut flags: Vec<String> = [
        "--cfg",
        "offload_device",
        "-Cpanic=abort",
        // Inductive range-check elimination: a kernel's `if i < n` guard on an index
        // affine in the thread loop splits the loop into a check-free main part (which
        // the LTO pipeline vectorizes) and the few threads past the bound.
        "-Cpasses=function(irce)",
    ]
    .map(str::to_owned)
    .to_vec();
    if let Some(cpu) = level.target_cpu() {
        flags.push(format!("-Ctarget-cpu={cpu}"));
    }
    if let Some(features) = level.target_features() {
        flags.push(format!("-Ctarget-feature={features}"));
    }
    let checks = nested::KernelChecks::from_env(env);
    let toolchain = nested::CpuToolchain::find(env)?;
    // An image under AddressSanitizer: its own target directory, so that the plain image's
    // units are not rebuilt each time one or the other is asked for. The sanitizer's runtime
    // is the host program's (which `cargo offload run --sanitize=address` builds with it).
    let target_dir = &if checks.address_sanitizer {
        if toolchain != nested::CpuToolchain::Nightly {
            return Err(Error::Prerequisite(format!(
                "the CPU device's image under AddressSanitizer needs the nightly `{}` \
                 (`-Zsanitizer=address`), which does not run here: `rustup toolchain install {}`",
                env.nightly_toolchain(),
                env.nightly_toolchain()
            )));
        }
        flags.push("-Zsanitizer=address".to_owned());
        target_dir.join("address-sanitizer")
    } else {
        target_dir.to_path_buf()
    };
    let mut cmd = toolchain.cargo(env, "rustc");
    cmd.arg("--manifest-path")
        .arg(&krate.manifest_path)
        .args(["--lib", "--release", "--crate-type", "staticlib"])
        .args(krate.feature_args())
        .args(checks.config_args(&krate.package, nested::Lines::CpuImage))
        .arg("--target")
        .arg(host_triple())
        .arg("--target-dir")
        .arg(target_dir)
        .env("CARGO_ENCODED_RUSTFLAGS", nested::encoded_rustflags(&flags))
        // The thread loop inside the image must inline the device API across crates to run
        // at the speed of a plain loop.
        .env("CARGO_PROFILE_RELEASE_LTO", "fat")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false");
    // A cross build's linker (`target.<triple>.linker`), which cargo hands the build script
    // as `RUSTC_LINKER`, links the nested build's scripts and the CPU image too.
    let linker = env.get_untracked("RUSTC_LINKER");
    if let Some(linker) = &linker {
        let var = format!(
            "CARGO_TARGET_{}_LINKER",
            host_triple().to_ascii_uppercase().replace(['-', '.'], "_")
        );
        cmd.env(var, linker);
    }
    if env.verbose() {
        eprintln!("offload: {}", crate::command::CommandLine::of(&cmd));
    }
    let line = crate::command::CommandLine::of(&cmd).to_string();
    let files = crate::build_cache::around(env, target_dir, &krate.package, || {
        nested::run_for_artifacts(env, cmd, &krate.manifest_path, &krate.package, "host")
    })?;
    let archive = files
        .iter()
        .find(|f| f.extension().is_some_and(|e| e == "a"))
        .ok_or_else(|| Error::MissingArtifact {
            krate: krate.package.clone(),
            arch: level.name().to_owned(),
            what: "static library",
            command: line,
        })?;
    let so = &archive.with_extension("so");
    let debug_info = checks.line_info || checks.debugger;
    let linker = linker.as_deref().unwrap_or("cc");
    link_shared_object(env, linker, archive, library, debug_info, so)?;
    let bytes = std::fs::read(so).io("reading the CPU device image", so)?;
    let bad = |e| Error::BadImage {
        path: so.clone(),
        reason: match e {
            offload_format::Error::CpuImage { reason } => reason,
            other => other.to_string(),
        },
    };
    let kernels = elf::cpu_kernels(&bytes).map_err(bad)?;
    for (kernel, reason) in elf::cpu_coroutine_notes(&bytes).map_err(bad)? {
        env.warn(&format!(
            "kernel `{kernel}` of `{}` runs with one coroutine per GPU thread on the CPU \
             device, not as loops between its barriers: {reason}",
            krate.package
        ));
    }
    Ok(DeviceImage {
        arch: OffloadArch::Host(level),
        image_kind: offload_format::ImageKind::Object,
        offload_kind: offload_format::OffloadKind::OpenMp,
        module: krate.lib_name.clone(),
        kernels,
        kernel_params: Vec::new(),
        kernel_resources: Vec::new(),
        bytes,
    })
}

/// What the image exports, as a version script: the runtime's entry points, positions and notes
/// (all `offload_format::abi::CPU_SYMBOL_PREFIX*`). Everything else stays inside the image, as
/// in a `cdylib`.
fn version_script() -> String {
    let prefix = offload_format::abi::CPU_SYMBOL_PREFIX;
    format!("{{\n  global:\n    {prefix}*;\n  local:\n    *;\n}};\n")
}

/// Links the kernel crate's static library `archive` whole, with `library` (the host side of
/// relocatable CUDA/HIP sources) where there is one, into the shared object `so`, as rustc
/// links a `cdylib`: no default libraries (the image's few C symbols, `memcpy` and the like,
/// come from the program that loads it) and unused sections dropped. Debug information is
/// stripped unless `debug_info` (the nested build gave the kernel crate line tables or full
/// debug information): the archive's `compiler_builtins` objects bring theirs, 750 KB of it,
/// whatever the kernel crate's. Written beside `so` and
/// renamed over it, so an interrupted link leaves the last image whole.
fn link_shared_object(
    env: &Env,
    linker: &str,
    archive: &Path,
    library: Option<&(PathBuf, String)>,
    debug_info: bool,
    so: &Path,
) -> Result<()> {
    let exports = archive.with_extension("exports");
    crate::fsutil::write_atomic(&exports, version_script().as_bytes())?;
    let out = crate::fsutil::temp_file_beside(so).io("creating a temporary file beside", so)?;
    let mut cmd = std::process::Command::new(linker);
    cmd.args(["-shared", "-nodefaultlibs", "-o"])
        .arg(&*out)
        .arg("-Wl,--whole-archive")
        .arg(archive)
        .arg("-Wl,--no-whole-archive");
    if let Some((dir, name)) = library {
        cmd.arg(format!("-L{}", dir.display()))
            .arg(format!("-l{name}"));
    }
    cmd.arg(format!("-Wl,--version-script={}", exports.display()))
        .args([
            "-Wl,--gc-sections",
            "-Wl,--as-needed",
            "-Wl,-z,relro,-z,now",
            "-Wl,-z,noexecstack",
            "-Wl,--eh-frame-hdr",
            "-Wl,-O1",
        ]);
    if !debug_info {
        cmd.arg("-Wl,--strip-debug");
    }
    if env.verbose() {
        eprintln!("offload: {}", crate::command::CommandLine::of(&cmd));
    }
    crate::command::run(&mut cmd)?;
    out.persist(so).io("renaming the CPU device image to", so)
}
