//! The nested nightly `cargo` build of a kernel crate for a GPU triple, and the whole path from
//! kernel crate to device images.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use offload_format::{AmdTargetId, DeviceFamily, ImageKind, Sm};

use super::common::GpuImage;
use super::error::{LinkError, Result, io_err};
use super::llvm::{AmdgpuLinkOptions, NvptxLinkOptions, amdgpu_code_object, nvptx_link};
use super::options::GpuLinkOptions;
use super::ptx::{CubinPlan, check_cubin, cubin_plan, ptx_isa_version, ptxas_verbose};
use super::rlib_bitcode::{DeviceInput, bitcode_members};
use crate::arch::OffloadArch;
use crate::env::Env;
use crate::image::DeviceImage;
use crate::json::JsonExt;
use crate::metadata::KernelCrate;
use crate::{command, nested};

/// A GPU architecture by its name alone (`sm_90`, `gfx942:xnack+`), as the device link's own
/// callers (its tests and benchmarks) name one: an `sm` LLVM 22 emits PTX for, or an AMD
/// target ID. Builds parse `--offload-arch` lists with `crate::arch` instead.
pub fn parse_gpu_arch(arch: &str) -> Result<OffloadArch> {
    let invalid = |source| LinkError::BadTargetName {
        target: arch.to_owned(),
        source,
    };
    match DeviceFamily::of_gpu_arch_name(arch) {
        Some(DeviceFamily::Nvidia) => {
            ptx_isa_version(arch)?;
            Ok(OffloadArch::Nvptx(Sm::parse(arch).map_err(invalid)?))
        }
        Some(DeviceFamily::Amd) => AmdTargetId::parse(arch)
            .map(OffloadArch::Amdgcn)
            .map_err(invalid),
        Some(DeviceFamily::Cpu) | None => Err(LinkError::InvalidTarget {
            target: arch.to_owned(),
            reason: "neither sm_NN nor an AMDGPU target ID",
        }),
    }
}

/// The `-Ctarget-cpu` of the nested build for a GPU architecture's triple: its family's
/// baseline processor.
fn baseline_cpu(arch: &OffloadArch) -> &'static str {
    arch.family().baseline_cpu().unwrap_or_default()
}

/// A nested device build of a kernel crate for one triple.
#[derive(Debug, Clone)]
pub struct NestedBuild {
    /// The kernel crate's `Cargo.toml`.
    pub manifest: PathBuf,
    /// The triple: `nvptx64-nvidia-cuda` or `amdgcn-amd-amdhsa`.
    pub triple: String,
    /// `-Ctarget-cpu` for the build; the link re-targets the bitcode to each image's CPU.
    pub target_cpu: String,
    /// The target directory of this build (kept apart from the host build's).
    pub target_dir: PathBuf,
    /// Extra rustc flags for every crate of the build.
    pub extra_rustflags: Vec<String>,
    /// The kernel crate's feature options (`--no-default-features`, `--features a,b`), as
    /// [`KernelCrate::feature_args`] gives them.
    pub feature_args: Vec<String>,
    /// The architectures the build serves (`sm_80, sm_90`), as its diagnostics and errors
    /// name it (default: the triple).
    pub label: String,
    /// Cargo's `--config` options for the kernel crate's profile
    /// ([`nested::KernelChecks::config_args`]).
    pub config_args: Vec<String>,
}

impl NestedBuild {
    /// A release build (toolchain from [`Env::nightly_toolchain`]).
    pub fn new(
        manifest: impl Into<PathBuf>,
        triple: impl Into<String>,
        target_cpu: impl Into<String>,
        target_dir: impl Into<PathBuf>,
    ) -> Self {
        let triple = triple.into();
        Self {
            manifest: manifest.into(),
            label: triple.clone(),
            triple,
            target_cpu: target_cpu.into(),
            target_dir: target_dir.into(),
            extra_rustflags: Vec::new(),
            feature_args: Vec::new(),
            config_args: Vec::new(),
        }
    }

    fn rustflags(&self) -> Vec<String> {
        let mut flags = vec![
            format!("-Ctarget-cpu={}", self.target_cpu),
            "--cfg".into(),
            "offload_device".into(),
            "-Cpanic=abort".into(),
        ];
        match DeviceFamily::of_triple(&self.triple) {
            // Makes every rlib member bitcode, so the whole program goes through the device link.
            DeviceFamily::Amd => flags.push("-Clinker-plugin-lto".into()),
            // rustc's nvptx target emits bitcode rlibs already.
            DeviceFamily::Nvidia | DeviceFamily::Cpu => {}
        }
        flags.extend(self.extra_rustflags.iter().cloned());
        flags
    }

    /// The `cargo rustc` command of this build, environment cleaned by [`nested::cargo`].
    ///
    /// The kernel crate is compiled as an rlib, as its dependencies are: its member is bitcode
    /// (on NVIDIA as rustc's nvptx target writes every object, on AMD through
    /// `-Clinker-plugin-lto`), which the device link takes whole; nothing is linked by rustc.
    /// So every unit is one a compiler cache (`RUSTC_WRAPPER=sccache`) keeps, the kernel crate
    /// among them: it caches libraries, never linked outputs or `--emit=llvm-bc`.
    pub fn command(&self, env: &Env) -> Command {
        let mut cmd = nested::cargo(env, "rustc");
        cmd.arg("--manifest-path")
            .arg(&self.manifest)
            .args([
                "--lib",
                "--release",
                "-Zbuild-std=core",
                "--crate-type",
                "rlib",
            ])
            .args(&self.feature_args)
            .args(&self.config_args)
            .arg("--message-format=json")
            .arg("--target")
            .arg(&self.triple)
            .arg("--target-dir")
            .arg(&self.target_dir)
            .arg("--")
            .arg("-Ccodegen-units=1")
            // `#[kernel]` expands to `extern "gpu-kernel"` functions on GPU targets; only the
            // kernel crate needs the feature (it may enable it itself too).
            .args([
                "-Zcrate-attr=feature(abi_gpu_kernel)",
                "-Aduplicate_features",
            ])
            .env(
                "CARGO_ENCODED_RUSTFLAGS",
                nested::encoded_rustflags(&self.rustflags()),
            )
            // ptxas rejects optimized code with debug info ("Optimized debugging not supported").
            .env("CARGO_PROFILE_RELEASE_DEBUG", "false");
        cmd
    }
}

/// What a nested device build produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NestedBuildOutput {
    /// The kernel crate's rlib (`deps/lib<crate>-<hash>.rlib`), whose members are bitcode.
    pub kernel_rlib: PathBuf,
    /// The rlibs of its dependencies (core, compiler_builtins, offload-rt, …), dependents first.
    pub libraries: Vec<PathBuf>,
}

impl NestedBuildOutput {
    /// Reads the outputs as device-link inputs: the kernel crate's bitcode linked whole, its
    /// dependencies' members on demand.
    pub fn inputs(&self) -> Result<Vec<DeviceInput>> {
        let read = |rlib: &Path| -> Result<Vec<DeviceInput>> {
            let data = std::fs::read(rlib).map_err(io_err("reading", rlib))?;
            let name = rlib
                .file_name()
                .unwrap_or(rlib.as_os_str())
                .to_string_lossy();
            bitcode_members(&name, &data)
        };
        let mut inputs = read(&self.kernel_rlib)?;
        if inputs.is_empty() {
            return Err(LinkError::Archive {
                name: self.kernel_rlib.display().to_string(),
                message: "the kernel crate's rlib holds no bitcode".into(),
            });
        }
        for input in &mut inputs {
            input.lazy = false;
        }
        for rlib in &self.libraries {
            inputs.extend(read(rlib)?);
        }
        Ok(inputs)
    }
}

/// Runs the nested build and finds its bitcode and rlibs from cargo's JSON messages. rustc's
/// diagnostics go to the terminal.
pub fn nested_build(env: &Env, build: &NestedBuild) -> Result<NestedBuildOutput> {
    let failed = |message: String| LinkError::NestedBuild {
        manifest: build.manifest.clone(),
        target: build.label.clone(),
        message,
    };
    let mut cmd = build.command(env);
    if env.verbose() {
        eprintln!("running {}", command::CommandLine::of(&cmd));
    }
    let messages = match nested::run_json(env, &mut cmd, &build.label) {
        Ok(messages) => messages,
        Err(command::CommandError::Failed {
            command, stderr, ..
        }) => {
            return Err(failed(crate::diagnostics::failure_reason(
                &stderr,
                &command.to_string(),
            )));
        }
        Err(e) => return Err(e.into()),
    };
    // The kernel crate is the unit of the manifest built; every other rlib is a dependency.
    let manifest =
        std::fs::canonicalize(&build.manifest).unwrap_or_else(|_| build.manifest.clone());
    let mut kernel_rlib = None;
    let mut libraries = Vec::new();
    for message in &messages {
        if !message.is("compiler-artifact") {
            continue;
        }
        let message = message.json();
        let mut rlibs = message
            .strs_at(&["filenames"])
            .into_iter()
            .map(PathBuf::from)
            .filter(|f| f.extension() == Some(OsStr::new("rlib")));
        let of_manifest = message
            .str_at(&["manifest_path"])
            .is_some_and(|m| std::fs::canonicalize(m).is_ok_and(|m| m == manifest));
        let is_lib = message
            .strs_at(&["target", "kind"])
            .iter()
            .any(|k| *k == "lib" || *k == "rlib");
        if of_manifest && is_lib {
            kernel_rlib = rlibs.next_back();
        } else {
            libraries.extend(rlibs);
        }
    }
    let kernel_rlib = kernel_rlib.ok_or_else(|| {
        failed(format!(
            "cargo reported no rlib of the kernel crate `{}`",
            build.manifest.display()
        ))
    })?;
    // Artifacts arrive dependencies first; the link wants dependents first.
    libraries.reverse();
    Ok(NestedBuildOutput {
        kernel_rlib,
        libraries,
    })
}

/// Runs the nested build of a kernel crate for `target` and reads its device-link inputs.
pub fn device_inputs(
    env: &Env,
    manifest: &Path,
    target: &OffloadArch,
    target_dir: &Path,
) -> Result<Vec<DeviceInput>> {
    let build = NestedBuild::new(manifest, target.triple(), baseline_cpu(target), target_dir);
    nested_build(env, &build)?.inputs()
}

/// Links the images of one target from device-link inputs. NVIDIA targets give a cubin (where
/// the installed `ptxas` knows the `sm`, see [`cubin_plan`]) and PTX, in that order, both with
/// the figures of the one `ptxas -v` run that made the cubin; AMD
/// targets one code object of `opts`' code object version. Both are linked with `opts`' panic
/// strategy. A `ptxas` failure on an `sm` it knows is an error.
pub fn gpu_images(
    inputs: &[DeviceInput],
    target: &OffloadArch,
    opts: &GpuLinkOptions,
) -> Result<Vec<GpuImage>> {
    match target {
        OffloadArch::Nvptx(sm) => {
            let sm = &sm.to_string();
            let nvptx = NvptxLinkOptions {
                panic: opts.panic,
                ..NvptxLinkOptions::default()
            };
            let ptx = nvptx_link(inputs, sm, &nvptx)?;
            let kernels = offload_format::image::ptx::kernel_names(&ptx);
            let mut images = Vec::new();
            let mut resources = Vec::new();
            if cubin_plan(sm)? == CubinPlan::Assemble {
                // The one `ptxas` run of this image: its report is recorded, so that nothing
                // after the build runs `ptxas` for the figures.
                let (cubin, report) = ptxas_verbose(&ptx, sm)?;
                resources = report;
                images.push(GpuImage {
                    bytes: cubin,
                    kind: ImageKind::Cubin,
                    triple: target.triple(),
                    arch: target.to_string(),
                    kernels: kernels.clone(),
                    resources: resources.clone(),
                });
            }
            images.push(GpuImage {
                bytes: ptx.into_bytes(),
                kind: ImageKind::Ptx,
                triple: target.triple(),
                arch: target.to_string(),
                kernels,
                resources,
            });
            Ok(images)
        }
        OffloadArch::Amdgcn(id) => {
            let amd = AmdgpuLinkOptions {
                code_object_version: opts.code_object_version,
                panic: opts.panic,
                ..AmdgpuLinkOptions::default()
            };
            let (bytes, kernels) = amdgpu_code_object(inputs, id, &amd)?;
            Ok(vec![GpuImage {
                bytes,
                kind: ImageKind::Object,
                triple: target.triple(),
                arch: id.to_string(),
                kernels,
                resources: Vec::new(),
            }])
        }
        OffloadArch::Host(_) => Err(LinkError::InvalidTarget {
            target: target.name(),
            reason: "the host CPU is not a GPU target",
        }),
    }
}

/// Builds the device images of `krate` for one GPU architecture: nested nightly build in
/// `target_dir`, device link, `ptxas` / `ld.lld`, the kernel crate's bitcode linked with
/// `extra` (the device bitcode of relocatable CUDA/HIP sources), whose kernels join the image.
/// The build engine's entry point.
pub fn build_gpu_images(
    env: &Env,
    krate: &KernelCrate,
    arch: &OffloadArch,
    target_dir: &Path,
    extra: &[DeviceInput],
) -> crate::error::Result<Vec<DeviceImage>> {
    gpu_target_checked(env, krate, arch)?;
    let opts = GpuLinkOptions::for_build(env, krate)?;
    let mut inputs = nested_inputs(env, krate, arch, std::slice::from_ref(arch), target_dir)?;
    inputs.extend(extra.iter().cloned());
    link_device_images(env, krate, arch, &inputs, &opts)
}

/// The images of `krate` for several architectures of one GPU triple from one nested build,
/// linked in parallel (at most as many links at once as there are cores): what one device
/// link process does for a nested build. Each architecture's image is linked with the
/// `extra` inputs of that architecture (relocatable CUDA/HIP sources' bitcode). Each
/// architecture's result comes back on its own, in the order of `archs`; an error before any
/// link (a refused architecture, the nested build) is the error of all.
pub fn build_gpu_images_of_triple(
    env: &Env,
    krate: &KernelCrate,
    archs: &[OffloadArch],
    target_dir: &Path,
    extra: &[(OffloadArch, DeviceInput)],
) -> crate::error::Result<Vec<(OffloadArch, crate::error::Result<Vec<DeviceImage>>)>> {
    for arch in archs {
        gpu_target_checked(env, krate, arch)?;
    }
    let Some(first) = archs.first() else {
        return Ok(Vec::new());
    };
    if let Some(other) = archs.iter().find(|t| t.triple() != first.triple()) {
        return Err(LinkError::InvalidTarget {
            target: other.to_string(),
            reason: "one nested build serves the architectures of one triple",
        }
        .into());
    }
    let opts = GpuLinkOptions::for_build(env, krate)?;
    let inputs = nested_inputs(env, krate, first, archs, target_dir)?;
    let results = crate::parallel::map(archs, |arch| {
        let mine: Vec<&DeviceInput> = extra
            .iter()
            .filter(|(a, _)| a == arch)
            .map(|(_, input)| input)
            .collect();
        if mine.is_empty() {
            link_device_images(env, krate, arch, &inputs, &opts)
        } else {
            let mut all = inputs.clone();
            all.extend(mine.into_iter().cloned());
            link_device_images(env, krate, arch, &all, &opts)
        }
    });
    Ok(archs
        .iter()
        .zip(results)
        .map(|(arch, result)| {
            let result = result.unwrap_or_else(|| {
                Err(crate::error::Error::Prerequisite(format!(
                    "the device link of {} for {arch} did not finish",
                    krate.package
                )))
            });
            (*arch, result)
        })
        .collect())
}

/// Refuses `arch` before any build when it is no GPU's or LLVM would abort on it, with the
/// cubin policy checked for an `sm`.
fn gpu_target_checked(
    env: &Env,
    krate: &KernelCrate,
    arch: &OffloadArch,
) -> crate::error::Result<()> {
    match *arch {
        OffloadArch::Nvptx(sm) => {
            ptx_isa_version(&sm.to_string())?;
            check_cubin(env, &krate.package, &sm.to_string())?;
        }
        OffloadArch::Amdgcn(_) => {}
        OffloadArch::Host(_) => {
            return Err(LinkError::InvalidTarget {
                target: arch.name(),
                reason: "the host CPU is not a GPU target",
            }
            .into());
        }
    }
    Ok(())
}

/// The nested build of `krate` for `target`'s triple (through the shared build cache) and its
/// device-link inputs.
fn nested_inputs(
    env: &Env,
    krate: &KernelCrate,
    target: &OffloadArch,
    archs: &[OffloadArch],
    target_dir: &Path,
) -> crate::error::Result<Vec<DeviceInput>> {
    let mut build = NestedBuild::new(
        &krate.manifest_path,
        target.triple(),
        baseline_cpu(target),
        target_dir,
    );
    build.feature_args = krate.feature_args();
    build.label = crate::status::arch_list(archs);
    // A dev build's GPU images keep the kernel crate's source lines; the rest of a GPU nested
    // build carries no debug information (see `NestedBuild::command`).
    let lines = match target.family() {
        DeviceFamily::Nvidia => nested::Lines::Directives,
        DeviceFamily::Amd | DeviceFamily::Cpu => nested::Lines::Tables,
    };
    build.config_args = nested::KernelChecks::from_env(env).config_args(&krate.package, lines);
    crate::build_cache::around(env, target_dir, &krate.package, || {
        Ok(nested_build(env, &build)?.inputs()?)
    })
}

/// Links the images of one architecture from the nested build's inputs.
fn link_device_images(
    env: &Env,
    krate: &KernelCrate,
    arch: &OffloadArch,
    inputs: &[DeviceInput],
    opts: &GpuLinkOptions,
) -> crate::error::Result<Vec<DeviceImage>> {
    let cache = super::link_cache::LinkCache::from_env(env);
    // AMD images do not depend on ptxas.
    let ptxas = match arch {
        OffloadArch::Nvptx(sm) => super::ptx::ptxas_for(&sm.to_string())?.map(|info| info.path),
        OffloadArch::Amdgcn(_) | OffloadArch::Host(_) => None,
    };
    let target_name = arch.to_string();
    let key = super::link_cache::key(
        &krate.lib_name,
        &target_name,
        opts,
        ptxas.as_deref(),
        inputs,
    );
    if let Some(images) = cache
        .as_ref()
        .and_then(|c| c.load(&key, &krate.lib_name, &target_name))
    {
        crate::status::status(
            env,
            "Fresh",
            &format!(
                "{} ({arch}): the device link's images, from the cache",
                krate.package
            ),
        );
        return Ok(images);
    }
    crate::status::status(env, "Linking", &format!("{} ({arch})", krate.package));
    let images = gpu_images(inputs, arch, opts)?;
    // The parameter sizes come from the PTX (a cubin is assembled from it) or the AMD code
    // object's metadata, so `extern_kernels!` can check a relocatable CUDA/HIP kernel too.
    let kernel_params = match images.iter().find(|i| i.kind != ImageKind::Cubin) {
        Some(image) if image.kind == ImageKind::Ptx => {
            offload_format::image::ptx::kernel_params(&String::from_utf8_lossy(&image.bytes))
        }
        Some(image) => offload_format::image::amdgpu::kernel_params(&image.bytes)
            .map_err(super::error::bad_code_object)?,
        None => Vec::new(),
    };
    let images: Vec<DeviceImage> = images
        .into_iter()
        .map(|image| DeviceImage {
            arch: *arch,
            image_kind: image.kind,
            offload_kind: arch.family().offload_kind(),
            module: krate.lib_name.clone(),
            kernels: image.kernels,
            kernel_params: kernel_params.clone(),
            kernel_resources: image.resources,
            bytes: image.bytes,
        })
        .collect();
    if let Some(cache) = cache
        && let Err(e) = cache.store(&key, &images)
    {
        env.warn(&format!(
            "the device link's images of {} ({arch}) could not be cached ({e})",
            krate.package
        ));
    }
    Ok(images)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_targets() {
        assert_eq!(
            parse_gpu_arch("sm_90").unwrap(),
            OffloadArch::Nvptx(Sm::parse("sm_90").unwrap())
        );
        let amd = parse_gpu_arch("gfx942:xnack+").unwrap();
        assert_eq!(amd.triple(), "amdgcn-amd-amdhsa");
        assert_eq!(baseline_cpu(&amd), "gfx90a");
        assert_eq!(amd.to_string(), "gfx942:xnack+");
        for bad in ["sm_", "sm_x", "host", "gfx", "sm_5"] {
            assert!(parse_gpu_arch(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn nested_command_is_clean() {
        let build = NestedBuild::new("/k/Cargo.toml", "amdgcn-amd-amdhsa", "gfx90a", "/t");
        let cmd = build.command(&Env::detect());
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args[1], Env::detect().nightly_toolchain());
        assert_eq!([&args[0], &args[2], &args[3]], ["run", "cargo", "rustc"]);
        assert!(args.contains(&"-Zbuild-std=core".to_owned()));
        assert!(args.contains(&"rlib".to_owned()));
        assert!(
            !args
                .iter()
                .any(|a| a.starts_with("--emit") || a.starts_with("-Clinker=")),
            "nothing a compiler cache refuses: {args:?}"
        );
        let envs: Vec<(String, Option<String>)> = cmd
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect();
        let flags = envs
            .iter()
            .find(|(k, _)| k == "CARGO_ENCODED_RUSTFLAGS")
            .and_then(|(_, v)| v.clone())
            .unwrap();
        assert_eq!(
            flags.split('\x1f').collect::<Vec<_>>(),
            [
                "-Ctarget-cpu=gfx90a",
                "--cfg",
                "offload_device",
                "-Cpanic=abort",
                "-Clinker-plugin-lto"
            ]
        );
    }
}
