//! The host CPU as a device: the kernel crate built for the host crate's own target with
//! `--cfg offload_device`, as a static library (which compiler caches such as sccache keep),
//! then linked here into an ELF shared object exporting the runtime's symbols. That shared
//! object is the device image.
//! The pinned nightly builds it where installed, else the toolchain that runs the outer build
//! ([`nested::CpuToolchain`]), stable included: the CPU device needs neither the nightly of
//! GPU builds nor `rust-src`.
//!
//! Two forms, by where kernels with barriers get their regions ([`BarriersForm`]):
//!
//! - The IR form, where the LLVM device link is at hand (in-process with the `llvm` feature,
//!   else `cargo-offload-device`, as for GPU images): the nested build adds
//!   `--cfg offload_cpu_ir`, `-Clinker-plugin-lto` (and neither jump threading through calls
//!   nor loop unswitching, which would copy barriers), so the static library holds the
//!   workspace crates as bitcode beside the standard library's native objects; the CPU link
//!   (`device_link::cpu_link`) links the bitcode, keeps external only the image's exports and
//!   what the native objects use, forms the regions, runs `default<O3>` for the level and emits
//!   one object, kept by the content of the library and the target (`cpu-links` of the shared
//!   build cache); the image is that object and the native members.
//! - The source form (no device link, or `OFFLOAD_CPU_BARRIERS_FORM=source`, or an image for
//!   a debugger or AddressSanitizer): rustc's fat LTO into one object, the `#[kernel]` macro's
//!   own region form of barriers, the whole static library linked.
//!
//! Each form has a target directory of its own, so that neither rebuilds the other's units.

use std::path::{Path, PathBuf};

use offload_format::CpuLevel;
use offload_format::image::elf;

use crate::arch::{OffloadArch, host_triple};
use crate::device_link::cpu_archive::{CpuArchive, CpuLinkOptions};
use crate::env::Env;
use crate::error::{Error, IoContext, Result};
use crate::image::DeviceImage;
use crate::metadata::KernelCrate;
use crate::nested;

/// Builds `krate` for the CPU device at `level` (rustc's `-Ctarget-cpu` of its name), in
/// `target_dir` (a directory of its own), the image linked with the static library `library`
/// (directory, link name) where there is one: the host side of relocatable CUDA/HIP sources.
/// The image is linked by the linker of the build (`RUSTC_LINKER`), else `cc`.
/// The form of its barriers is the IR form where the CPU link can run, unless
/// `OFFLOAD_CPU_BARRIERS_FORM` says `source`.
pub fn build(
    env: &Env,
    krate: &KernelCrate,
    level: CpuLevel,
    target_dir: &Path,
    library: Option<&(PathBuf, String)>,
) -> Result<DeviceImage> {
    let asked = env.get(crate::env::OFFLOAD_CPU_BARRIERS_FORM);
    build_in_form(env, krate, level, target_dir, library, asked.as_deref())
}

/// [`build`] with the form of barriers asked as `OFFLOAD_CPU_BARRIERS_FORM` asks it (`ir`,
/// `source`; `None`: chosen), the variable unread.
pub fn build_in_form(
    env: &Env,
    krate: &KernelCrate,
    level: CpuLevel,
    target_dir: &Path,
    library: Option<&(PathBuf, String)>,
    asked: Option<&str>,
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
    let form = BarriersForm::choose(env, &checks, &toolchain, asked)?;
    if let BarriersForm::Ir(_) = form {
        flags.extend(
            [
                "--cfg",
                offload_format::abi::CPU_IR_CFG,
                "-Clinker-plugin-lto",
                // No block with a call copied by jump threading before the CPU link: rustc's
                // pipeline gave a tree level's idle threads a chain of barriers of their own,
                // which the link merges back behind a switch per thread, and the level's
                // threads past its bound could no longer be skipped (`prescan` 2.3x slower).
                // A call counts 4 in LLVM's cost of copying a block, so 3 leaves the blocks
                // without calls; the link's own pipeline threads jumps once the barriers are
                // gone.
                "-Cllvm-args=-jump-threading-threshold=3",
                // Nor loops copied by unswitching on a condition inside them, which O3 does
                // on a thread's own: `hotspot`'s stepping loop became one copy for the threads
                // inside the tile and one for the others, each with barriers of its own that
                // the threads then waited at in turn, and the tiled transpose's loop over its
                // rows two copies on the thread's column (1.3-3x slower). The link's own
                // pipeline unswitches the thread loops once the barriers are gone.
                "-Cllvm-args=-unswitch-threshold=0",
            ]
            .map(str::to_owned),
        );
    }
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
    } else if let BarriersForm::Ir(_) = form {
        // The IR form's units (other flags, bitcode) beside the source form's.
        target_dir.join("cpu-ir")
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
        // at the speed of a plain loop: rustc's fat LTO, or in the IR form the CPU link's
        // (rustc's own LTO off, so that the library keeps each crate's bitcode).
        .env(
            "CARGO_PROFILE_RELEASE_LTO",
            match form {
                BarriersForm::Ir(_) => "off",
                BarriersForm::Source => "fat",
            },
        )
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")
        // In the IR form, line tables: a kernel that keeps its coroutines is reported with
        // the source line of the call that reaches its barrier (the image is stripped of them
        // unless asked for).
        .env(
            "CARGO_PROFILE_RELEASE_DEBUG",
            match form {
                BarriersForm::Ir(_) => "line-tables-only",
                BarriersForm::Source => "false",
            },
        );
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
    match &form {
        BarriersForm::Source => {
            link_shared_object(env, linker, None, archive, library, debug_info, so)?;
        }
        BarriersForm::Ir(cpu_linker) => {
            let bytes = std::fs::read(archive).io("reading the static library", archive)?;
            let members = CpuArchive::read(&krate.package, &bytes)?;
            let mut opts = CpuLinkOptions::for_level(host_triple(), level);
            if let Some((dir, name)) = library {
                // The host side of relocatable sources calls into the kernel crate.
                let path = dir.join(format!("lib{name}.a"));
                let bytes = std::fs::read(&path).io("reading the static library", &path)?;
                opts.keep = CpuArchive::read(name, &bytes)?
                    .native_undefined(name)?
                    .into_iter()
                    .collect();
            }
            let object = cpu_link_cached(env, cpu_linker, krate, level, archive, &bytes, &opts)?;
            let native = archive.with_extension("native.a");
            members.write_native(&native)?;
            link_shared_object(env, linker, Some(&object), &native, library, debug_info, so)?;
        }
    }
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

/// Where the image's kernels with barriers get their regions (see the module's comment).
#[derive(Debug)]
pub enum BarriersForm {
    /// In the CPU link, run by the linker given.
    Ir(CpuLinker),
    /// In the `#[kernel]` macro's expansion; rustc's fat LTO makes the image's object.
    Source,
}

/// What runs the CPU link.
#[derive(Debug)]
pub enum CpuLinker {
    /// This process (the `llvm` feature).
    #[cfg_attr(
        not(feature = "llvm"),
        allow(dead_code, reason = "linked in-process with the `llvm` feature only")
    )]
    InProcess,
    /// `cargo-offload-device`.
    Process(crate::device_linker::DeviceLinker),
}

impl BarriersForm {
    /// The form of an image built with `checks` by `toolchain`: the IR form where the CPU link
    /// can run and read the toolchain's bitcode, unless `asked` (`OFFLOAD_CPU_BARRIERS_FORM`)
    /// says `source` or the image is for a debugger (unoptimized) or AddressSanitizer (whose
    /// instrumentation is rustc's); `asked` `ir` makes a missing link an error.
    pub fn choose(
        env: &Env,
        checks: &nested::KernelChecks,
        toolchain: &nested::CpuToolchain,
        asked: Option<&str>,
    ) -> Result<BarriersForm> {
        let required = match asked {
            None | Some("") => false,
            Some("source") => return Ok(BarriersForm::Source),
            Some("ir") => true,
            Some(other) => {
                return Err(Error::Prerequisite(format!(
                    "{} is `{other}`; the forms are `ir` and `source`",
                    crate::env::OFFLOAD_CPU_BARRIERS_FORM
                )));
            }
        };
        if checks.debugger || checks.address_sanitizer {
            return Ok(BarriersForm::Source);
        }
        let unavailable = |why: String| {
            if required {
                Err(Error::Prerequisite(format!(
                    "{}=ir, but {why}",
                    crate::env::OFFLOAD_CPU_BARRIERS_FORM
                )))
            } else {
                if env.verbose() {
                    eprintln!("offload: the CPU image keeps the source form of barriers: {why}");
                }
                Ok(BarriersForm::Source)
            }
        };
        // A build script links in `cargo-offload-device` where there is one, even with the
        // `llvm` feature (which `cargo test --workspace` unifies into build scripts): a build
        // script's several CPU levels would otherwise link at once in its unoptimized process.
        let in_process = cfg!(feature = "llvm");
        let linker = if in_process && !env.build_script {
            CpuLinker::InProcess
        } else {
            match crate::device_linker::find(env) {
                Ok(linker) => CpuLinker::Process(linker),
                Err(_) if in_process => CpuLinker::InProcess,
                Err(e) => return unavailable(format!("no device link: {e}")),
            }
        };
        // The link reads the toolchain's bitcode: its LLVM must be the link's.
        let version = toolchain.version(env)?;
        match nested::rustc_llvm_major(&version) {
            Some(major) if major == crate::device_link::LLVM_MAJOR => Ok(BarriersForm::Ir(linker)),
            major => unavailable(format!(
                "the CPU device's rustc uses LLVM {}, the device link LLVM {}",
                major.map_or("(unknown)".to_owned(), |m| m.to_string()),
                crate::device_link::LLVM_MAJOR
            )),
        }
    }
}

/// The CPU link's object for the static library `archive` (its `bytes`) of `krate`, `opts`'s
/// target: from the cache of CPU links where the same library was linked for the same target
/// by the same linker, else linked by `linker` and kept. Returns the object's path in the
/// cache (`cpu-links` of the shared build cache, else of the library's directory).
fn cpu_link_cached(
    env: &Env,
    linker: &CpuLinker,
    krate: &KernelCrate,
    level: CpuLevel,
    archive: &Path,
    bytes: &[u8],
    opts: &CpuLinkOptions,
) -> Result<PathBuf> {
    let dir = crate::build_cache::BuildCache::from_env(env).map_or_else(
        || archive.parent().unwrap_or(Path::new(".")).join("cpu-links"),
        |cache| cache.root().join("cpu-links"),
    );
    let key = cpu_link_key(linker, opts, bytes);
    let path = dir.join(format!("{key}.o"));
    if path.is_file() {
        return Ok(path);
    }
    let object = match linker {
        #[cfg(feature = "llvm")]
        CpuLinker::InProcess => crate::device_link::cpu_link(&krate.package, bytes, opts)?,
        #[cfg(not(feature = "llvm"))]
        CpuLinker::InProcess => unreachable!("chosen with the `llvm` feature only"),
        CpuLinker::Process(linker) => {
            crate::device_linker::cpu_link(env, linker, krate, level.name(), archive, opts)?
        }
    };
    std::fs::create_dir_all(&dir).io("creating the CPU link cache", &dir)?;
    crate::fsutil::write_atomic(&path, &object)?;
    Ok(path)
}

/// The key of a CPU link, in hex: a SHA-256 over the layout's version, the linker (the
/// executable linking, by path, size and modification time, and its LLVM major), the target
/// and the static library's bytes.
fn cpu_link_key(linker: &CpuLinker, opts: &CpuLinkOptions, bytes: &[u8]) -> String {
    let mut h = hmac_sha256::Hash::new();
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(b"offload CPU link cache 1");
    let executable = match linker {
        CpuLinker::InProcess => std::env::current_exe().ok(),
        CpuLinker::Process(linker) => Some(linker.path.clone()),
    };
    match executable.as_deref().map(|p| (p, std::fs::metadata(p))) {
        Some((path, Ok(meta))) => {
            field(path.as_os_str().as_encoded_bytes());
            field(&meta.len().to_le_bytes());
            let modified = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            field(&modified.to_le_bytes());
        }
        _ => field(b"(unknown linker)"),
    }
    field(&crate::device_link::LLVM_MAJOR.to_le_bytes());
    field(opts.triple.as_bytes());
    field(opts.cpu.as_bytes());
    field(opts.features.as_bytes());
    field(&(opts.keep.len() as u64).to_le_bytes());
    for symbol in &opts.keep {
        field(symbol.as_bytes());
    }
    field(bytes);
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// What the image exports, as a version script: the runtime's entry points, positions and notes
/// (all `offload_format::abi::CPU_SYMBOL_PREFIX*`). Everything else stays inside the image, as
/// in a `cdylib`.
fn version_script() -> String {
    let prefix = offload_format::abi::CPU_SYMBOL_PREFIX;
    format!("{{\n  global:\n    {prefix}*;\n  local:\n    *;\n}};\n")
}

/// Links `object` (the CPU link's, in the IR form) and the kernel crate's static library
/// `archive` (in the IR form its native members alone) whole, with `library` (the host side of
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
    object: Option<&Path>,
    archive: &Path,
    library: Option<&(PathBuf, String)>,
    debug_info: bool,
    so: &Path,
) -> Result<()> {
    let exports = archive.with_extension("exports");
    crate::fsutil::write_atomic(&exports, version_script().as_bytes())?;
    let out = crate::fsutil::temp_file_beside(so).io("creating a temporary file beside", so)?;
    let mut cmd = std::process::Command::new(linker);
    cmd.args(["-shared", "-nodefaultlibs", "-o"]).arg(&*out);
    if let Some(object) = object {
        cmd.arg(object);
    }
    cmd.arg("-Wl,--whole-archive")
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPU link's cache key follows the library's bytes, the target and the symbols kept,
    /// and nothing else.
    #[test]
    fn the_cpu_link_key_follows_the_library_and_the_target() {
        let linker = CpuLinker::InProcess;
        let opts = CpuLinkOptions::for_level("x86_64-unknown-linux-gnu", CpuLevel::Baseline);
        assert_eq!(opts.cpu, "x86-64");
        assert_eq!(
            CpuLinkOptions::for_level("aarch64-unknown-linux-gnu", CpuLevel::Aarch64Sve).features,
            "+sve"
        );
        let base = cpu_link_key(&linker, &opts, b"!<arch>\n1");
        assert_eq!(base, cpu_link_key(&linker, &opts, b"!<arch>\n1"));
        let v3 = CpuLinkOptions::for_level("x86_64-unknown-linux-gnu", CpuLevel::X86_64V3);
        let mut kept = opts.clone();
        kept.keep.push("rust_twice".into());
        for other in [
            cpu_link_key(&linker, &opts, b"!<arch>\n2"),
            cpu_link_key(&linker, &v3, b"!<arch>\n1"),
            cpu_link_key(&linker, &kept, b"!<arch>\n1"),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn an_unknown_form_is_refused() {
        let env = Env::detect();
        let toolchain = nested::CpuToolchain::Nightly;
        let checks = nested::KernelChecks::default();
        let err = BarriersForm::choose(&env, &checks, &toolchain, Some("regions")).unwrap_err();
        assert!(err.to_string().contains("`ir` and `source`"), "{err}");
        let form = BarriersForm::choose(&env, &checks, &toolchain, Some("source")).unwrap();
        assert!(matches!(form, BarriersForm::Source));
        let debugger = nested::KernelChecks {
            debugger: true,
            ..Default::default()
        };
        let form = BarriersForm::choose(&env, &debugger, &toolchain, Some("ir")).unwrap();
        assert!(
            matches!(form, BarriersForm::Source),
            "an image for a debugger"
        );
    }
}
