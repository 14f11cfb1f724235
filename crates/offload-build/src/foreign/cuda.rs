//! CUDA sources: a device-only compile with clang-22 per `sm_XX` to PTX (at the PTX ISA the
//! Rust kernels of the same `sm` get), and a cubin where `ptxas` knows the `sm`, whose
//! `ptxas -v` figures both images record.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use offload_format::image::ptx;
use offload_format::{ImageKind, OffloadKind, Sm};

use super::source::{Compiled, Options, Source};
use super::{Clang, depfile};
use crate::arch::OffloadArch;
use crate::device_link::{CubinPlan, cubin_plan, ptx_isa_version, ptxas_verbose};
use crate::env::Env;
use crate::error::{Error, IoContext, Result};
use crate::image::DeviceImage;

/// Where the CUDA headers come from: `OFFLOAD_CUDA_PATH`, else the first CUDA installation
/// clang would find among the usual directories (Debian's `nvidia-cuda-toolkit` is
/// `/usr/lib/cuda`).
pub fn cuda_path(env: &Env) -> Result<PathBuf> {
    if let Some(path) = env.get("OFFLOAD_CUDA_PATH") {
        return Ok(PathBuf::from(path));
    }
    ["/usr/lib/cuda", "/usr/local/cuda"]
        .iter()
        .map(PathBuf::from)
        .find(|dir| dir.join("bin").is_dir() || dir.join("include/cuda.h").is_file())
        .ok_or_else(|| {
            Error::Prerequisite(
                "CUDA sources need the CUDA headers, and no CUDA installation was found in \
                 /usr/lib/cuda or /usr/local/cuda. Fix: `apt-get install nvidia-cuda-toolkit` \
                 (Debian's contrib non-free; `cargo offload setup --system` does it), or set \
                 OFFLOAD_CUDA_PATH to a CUDA installation"
                    .to_owned(),
            )
        })
}

/// The arguments that make clang compile CUDA against the headers of `cuda_path`.
pub(crate) fn language_args(env: &Env) -> Result<Vec<OsString>> {
    Ok(vec![
        "-x".into(),
        "cuda".into(),
        format!("--cuda-path={}", cuda_path(env)?.display()).into(),
        // Debian's CUDA 11.8 predates sm_100 and later: clang would refuse them, and would ask
        // LLVM for its PTX ISA 7.8, which those processors do not accept.
        "--no-cuda-version-check".into(),
    ])
}

/// The arguments that target `sm`, at the PTX ISA the Rust kernels of that `sm` get.
pub(crate) fn sm_args(sm: &Sm) -> Result<Vec<OsString>> {
    let isa = ptx_isa_version(&sm.to_string())?;
    Ok(vec![
        format!("--offload-arch={sm}").into(),
        "-Xclang".into(),
        "-target-feature".into(),
        "-Xclang".into(),
        format!("+ptx{isa}").into(),
    ])
}

/// Compiles `source` for each of `sms`: PTX, and before it a cubin where `ptxas` can make one.
pub fn build(
    env: &Env,
    clang: &Clang,
    source: &Source,
    sms: &[Sm],
    options: &Options,
    out_dir: &Path,
) -> Result<Compiled> {
    let mut compiled = Compiled::watching(source);
    if sms.is_empty() {
        return Ok(compiled);
    }
    let language = language_args(env)?;
    let dir = super::source::work_dir(out_dir, source);
    std::fs::create_dir_all(&dir).io("creating", &dir)?;
    let module = source.module();
    for sm in sms {
        let sm_name = sm.to_string();
        let target = sm_args(sm)?;
        crate::device_link::check_cubin(env, &source.path.display().to_string(), &sm_name)?;
        let ptx_path = dir.join(format!("{module}.{sm_name}.ptx"));
        let dep_path = dir.join(format!("{module}.{sm_name}.d"));
        let mut cmd = Command::new(&clang.path);
        cmd.args(&language)
            .args(&target)
            .args(["--cuda-device-only", "-O3", "-S"])
            .args(options.clang_args())
            .arg("-MMD")
            .arg("-MF")
            .arg(&dep_path)
            .arg(&source.path)
            .arg("-o")
            .arg(&ptx_path);
        super::source::run_clang(env, &mut cmd, source, &sm_name)?;
        let ptx = std::fs::read_to_string(&ptx_path).io("reading", &ptx_path)?;
        let deps = std::fs::read_to_string(&dep_path).io("reading", &dep_path)?;
        super::source::extend_unique(&mut compiled.watch, depfile::prerequisites(&deps));
        let kernels = ptx::kernel_names(&ptx);
        if kernels.is_empty() {
            env.warn(&format!(
                "{}: no `__global__` kernel for {sm_name}",
                source.path.display()
            ));
        }
        let kernel_params = ptx::kernel_params(&ptx);
        let arch = OffloadArch::Nvptx(*sm);
        let mut kernel_resources = Vec::new();
        if cubin_plan(&sm_name)? == CubinPlan::Assemble {
            let (cubin, report) = ptxas_verbose(&ptx, &sm_name).map_err(|e| Error::BadSource {
                language: source.language.name(),
                path: source.path.clone(),
                reason: format!("ptxas refused clang's PTX for {sm_name}: {e}"),
            })?;
            kernel_resources = report;
            compiled.images.push(DeviceImage {
                arch,
                image_kind: ImageKind::Cubin,
                offload_kind: OffloadKind::Cuda,
                module: module.clone(),
                kernels: kernels.clone(),
                kernel_params: kernel_params.clone(),
                kernel_resources: kernel_resources.clone(),
                bytes: cubin,
            });
        }
        compiled.images.push(DeviceImage {
            arch,
            image_kind: ImageKind::Ptx,
            offload_kind: OffloadKind::Cuda,
            module: module.clone(),
            kernels,
            kernel_params,
            kernel_resources,
            bytes: ptx.into_bytes(),
        });
    }
    Ok(compiled)
}
