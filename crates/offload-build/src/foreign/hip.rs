//! HIP sources: one device-only compile with clang-22 for every AMD target ID of the build.
//! Clang returns an offload bundle (`hipv4-amdgcn-amd-amdhsa--<target id>` entries), which
//! `offload-format` unbundles; each code object is re-packed as an OffloadBinary.
//!
//! Headers: clang's own HIP wrapper (`__clang_hip_runtime_wrapper.h`, which defines
//! `__global__`, `__device__`, `__shared__`) with `-nogpuinc -nogpulib`, and the minimal
//! `hip/hip_runtime.h` of [`HIP_RUNTIME_H`] (the builtin variables, `__syncthreads`), so no
//! ROCm installation is needed. A source that needs ROCm's full headers gets them with
//! `Build::include` (and `Build::flag` for `--rocm-path`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::source::Source;
use super::{Clang, depfile};
use crate::env::Env;
use crate::error::{IoContext, Result};
#[cfg(feature = "image-readers")]
use {
    super::source::{Compiled, Options},
    crate::arch::OffloadArch,
    crate::device_link::{AmdCodeObjectVersion, bad_code_object},
    crate::error::Error,
    crate::image::DeviceImage,
    offload_format::image::amdgpu,
    offload_format::{AmdTargetId, ImageKind, OffloadKind},
};

/// The `hip/hip_runtime.h` HIP sources compile against: what kernels use of HIP's device API,
/// written with clang's AMDGPU builtins (which read code object V5's implicit arguments for
/// the block and grid sizes).
pub const HIP_RUNTIME_H: &str = include_str!("hip_runtime.h");

/// Writes [`HIP_RUNTIME_H`] as `include/hip/hip_runtime.h` under `dir`; returns the include
/// directory.
pub fn write_headers(dir: &Path) -> Result<std::path::PathBuf> {
    let include = dir.join("include");
    let header = include.join("hip").join("hip_runtime.h");
    std::fs::create_dir_all(header.parent().unwrap_or(&include)).io("creating", &include)?;
    crate::fsutil::write_atomic(&header, HIP_RUNTIME_H.as_bytes())?;
    Ok(include)
}

/// The arguments that make clang compile HIP with its own wrapper header and the
/// [`HIP_RUNTIME_H`] written under `dir` (no ROCm).
pub(crate) fn language_args(dir: &Path) -> Result<Vec<OsString>> {
    let include = write_headers(dir)?;
    Ok(vec![
        "-x".into(),
        "hip".into(),
        "-nogpulib".into(),
        "-nogpuinc".into(),
        "-include".into(),
        "__clang_hip_runtime_wrapper.h".into(),
        "-isystem".into(),
        include.into(),
    ])
}

/// The files `source` reads, from a depfile written to `dep_path`. A device-only HIP compile
/// ends in a device link and writes no depfile, so they come from the host side's
/// preprocessor, which reads the same files; `args` are the compile's own.
pub(crate) fn header_dependencies(
    env: &Env,
    clang: &Clang,
    source: &Source,
    args: &[OsString],
    dep_path: &Path,
    arch: &str,
) -> Result<Vec<PathBuf>> {
    let mut cmd = Command::new(&clang.path);
    cmd.args(args)
        .args(["--cuda-host-only", "-MM", "-MF"])
        .arg(dep_path)
        .arg("-MT")
        .arg(&source.path)
        .arg(&source.path);
    super::source::run_clang(env, &mut cmd, source, arch)?;
    let text = std::fs::read_to_string(dep_path).io("reading", dep_path)?;
    Ok(depfile::prerequisites(&text))
}

/// Compiles `source` for all of `targets` in one clang run and unbundles the result.
#[cfg(feature = "image-readers")]
pub fn build(
    env: &Env,
    clang: &Clang,
    source: &Source,
    targets: &[AmdTargetId],
    options: &Options,
    out_dir: &Path,
) -> Result<Compiled> {
    let mut compiled = Compiled::watching(source);
    if targets.is_empty() {
        return Ok(compiled);
    }
    let code_object = AmdCodeObjectVersion::from_env(env)?;
    let dir = super::source::work_dir(out_dir, source);
    let mut args = language_args(&dir)?;
    let module = source.module();
    let bundle_path = dir.join(format!("{module}.hipfb"));
    let dep_path = dir.join(format!("{module}.d"));
    let arch_list = targets
        .iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(",");
    args.push("-O3".into());
    args.push(format!("-mcode-object-version={}", code_object.module_flag() / 100).into());
    args.extend(targets.iter().map(|t| format!("--offload-arch={t}").into()));
    args.extend(options.clang_args());
    let mut cmd = Command::new(&clang.path);
    cmd.args(&args)
        .args(["--cuda-device-only", "-c"])
        .arg(&source.path)
        .arg("-o")
        .arg(&bundle_path);
    super::source::run_clang(env, &mut cmd, source, &arch_list)?;
    let deps = header_dependencies(env, clang, source, &args, &dep_path, &arch_list)?;
    super::source::extend_unique(&mut compiled.watch, deps);

    let bundle = std::fs::read(&bundle_path).io("reading", &bundle_path)?;
    let entries = offload_format::bundle::parse_any_bundle(&bundle)?;
    for target in targets {
        let id = format!("hipv4-amdgcn-amd-amdhsa--{target}");
        let object = entries
            .iter()
            .find(|e| e.id == id)
            .map(|e| e.data.to_vec())
            .ok_or_else(|| Error::BadSource {
                language: source.language.name(),
                path: source.path.clone(),
                reason: format!(
                    "clang's bundle {} has no entry `{id}`",
                    bundle_path.display()
                ),
            })?;
        let info = amdgpu::inspect(&object).map_err(bad_code_object)?;
        let mut kernels: Vec<String> = info.kernels.iter().map(|k| k.name.clone()).collect();
        kernels.sort();
        if kernels.is_empty() {
            env.warn(&format!(
                "{}: no `__global__` kernel for {target}",
                source.path.display()
            ));
        }
        compiled.images.push(DeviceImage {
            arch: OffloadArch::Amdgcn(*target),
            image_kind: ImageKind::Object,
            offload_kind: OffloadKind::Hip,
            module: module.clone(),
            kernels,
            kernel_params: amdgpu::kernel_params(&object).map_err(bad_code_object)?,
            kernel_resources: Vec::new(),
            bytes: object,
        });
    }
    Ok(compiled)
}
