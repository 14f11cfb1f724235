//! The executor: a [`BuildPlan`] carried out. Each kernel crate's images are taken from its
//! prebuilt bundle or built from source, one job per architecture (or, through
//! `cargo-offload-device`, per GPU triple), at most one per core, the first error in
//! architecture order the build's.

use std::path::Path;

use crate::arch::OffloadArch;
use crate::env::Env;
use crate::error::{Error, Result};
use crate::foreign::rdc::LinkedSources;
use crate::image::DeviceImage;
use crate::metadata::KernelCrate;
use crate::plan::{self, BuildPlan, BuildRequest, CompileTarget};
use crate::{device_linker, host_device, nested, parallel, prebuilt, status};

/// Every kernel crate's images: from its prebuilt bundle where that serves (see `prebuilt`),
/// else built from source, as one [`BuildPlan`] decides. Images come back crate by crate,
/// each in architecture order.
pub(crate) fn images_from_bundles_or_source(
    env: &Env,
    kernel_crates: &[KernelCrate],
    archs: &[OffloadArch],
    offload_dir: &Path,
) -> Result<Vec<DeviceImage>> {
    let policy = prebuilt::Policy::from_env(env)?;
    let gpu = archs.iter().any(OffloadArch::is_gpu);
    // Asked only when a bundle does not serve: a build without bundles runs no extra process.
    let can_build = std::cell::OnceCell::new();
    let can_build = || {
        *can_build.get_or_init(|| {
            // Only GPU images need the nightly (`nested::CpuToolchain`), and the device link:
            // in-process with the `llvm` feature, else the installed executable.
            !gpu || ((cfg!(feature = "llvm") || device_linker::find(env).is_ok())
                && nested::nightly_usable(env))
        })
    };
    let kernel_crates = with_panic_override(env, kernel_crates)?;
    let plan = BuildPlan::new(&kernel_crates, archs, policy, &can_build)?;
    execute(env, plan, offload_dir, None)
}

/// `kernel_crates` with `OFFLOAD_PANIC` applied ([`KernelCrate::apply_panic_override`]).
fn with_panic_override(env: &Env, kernel_crates: &[KernelCrate]) -> Result<Vec<KernelCrate>> {
    let mut out = kernel_crates.to_vec();
    for krate in &mut out {
        krate.apply_panic_override(env)?;
    }
    Ok(out)
}

/// Builds every (kernel crate, architecture) pair of `request` from source, each image
/// device-linked with its relocatable CUDA/HIP sources, at most as many jobs at once as there
/// are cores. Images come back in (crate, architecture) order.
///
/// With the `llvm` feature each architecture is one job, linked in this process. Without it,
/// each GPU triple is one job, whose architectures one `cargo-offload-device` process links
/// per kernel crate (`device_linker`); the CPU device is built here either way.
pub(crate) fn build_images(env: &Env, request: &BuildRequest<'_>) -> Result<Vec<DeviceImage>> {
    let kernel_crates = with_panic_override(env, request.kernel_crates)?;
    let plan = BuildPlan::from_source(&kernel_crates, request.archs)?;
    execute(env, plan, request.offload_dir, request.linked)
}

/// Carries out `plan`: each crate's bundle images taken, or its notes shown and it built
/// through the plan's compiles and links. Images come back crate by crate, each in
/// architecture order.
fn execute(
    env: &Env,
    plan: BuildPlan,
    offload_dir: &Path,
    linked: Option<&LinkedSources>,
) -> Result<Vec<DeviceImage>> {
    for planned in &plan.kernel_crates {
        match &planned.source {
            plan::ImageSource::Prebuilt { bundle, .. } => status::status(
                env,
                "Prebuilt",
                &format!("kernels {} ({})", planned.krate.package, bundle.display()),
            ),
            plan::ImageSource::FromSource { note } => {
                if let Some(note) = note {
                    env.warn(note);
                }
            }
        }
    }
    let to_build: Vec<KernelCrate> = plan.crates_from_source().cloned().collect();
    let mut built = if to_build.is_empty() {
        Vec::new()
    } else {
        let empty = LinkedSources::default();
        build_from_source(env, &plan, &to_build, offload_dir, linked.unwrap_or(&empty))?
    };
    let mut images = Vec::new();
    for planned in plan.kernel_crates {
        match planned.source {
            plan::ImageSource::Prebuilt {
                images: bundled, ..
            } => images.extend(bundled),
            plan::ImageSource::FromSource { .. } => {
                let (mine, rest): (Vec<_>, Vec<_>) = built
                    .into_iter()
                    .partition(|i| i.module == planned.krate.lib_name);
                images.extend(mine);
                built = rest;
            }
        }
    }
    Ok(images)
}

/// Runs the compiles and links of `plan` for `kernel_crates`.
fn build_from_source(
    env: &Env,
    plan: &BuildPlan,
    kernel_crates: &[KernelCrate],
    offload_dir: &Path,
    linked: &LinkedSources,
) -> Result<Vec<DeviceImage>> {
    let archs = &plan.archs;
    nested::check_toolchain(env, archs)?;
    let gpu = archs.iter().any(OffloadArch::is_gpu);
    let linker = if gpu && !cfg!(feature = "llvm") {
        Some(device_linker::find(env)?)
    } else {
        None
    };
    for krate in kernel_crates {
        status::status(
            env,
            "Compiling",
            &format!("kernels {} ({})", krate.package, status::arch_list(archs)),
        );
    }
    let is_gpu =
        |compile: usize| matches!(plan.compiles[compile].target, CompileTarget::Gpu { .. });
    // Each job: the indices of its links. In-process, one job per link, the first of each
    // compile scheduled first, so that different triples build in parallel while cargo's
    // lock serializes the builds of one (all but the first find it fresh); through the device
    // link process, one job per GPU compile.
    let mut units: Vec<Vec<usize>> = Vec::new();
    for (i, link) in plan.links.iter().enumerate() {
        let together = linker.is_some() && is_gpu(link.compile);
        match units
            .iter_mut()
            .find(|u| together && plan.links[u[0]].compile == link.compile)
        {
            Some(unit) => unit.push(i),
            None => units.push(vec![i]),
        }
    }
    units.sort_by_key(|u| {
        plan.links[..u[0]]
            .iter()
            .any(|l| l.compile == plan.links[u[0]].compile)
    });
    let results = parallel::map(&units, |unit| {
        let unit_archs: Vec<OffloadArch> = unit.iter().map(|&i| plan.links[i].arch).collect();
        let compile = plan.links[unit[0]].compile;
        let target_dir = offload_dir.join(&plan.compiles[compile].dir_name);
        kernel_crates
            .iter()
            .map(|k| match &linker {
                Some(linker) if is_gpu(compile) => {
                    device_linker::link(env, linker, k, &unit_archs, &target_dir, linked)
                }
                _ => build_one(env, k, &unit_archs[0], &target_dir, linked),
            })
            .collect::<Result<Vec<Vec<DeviceImage>>>>()
            .map(|v| v.into_iter().flatten().collect())
    });
    // The first error in architecture order is the build's.
    let mut per_unit: Vec<(usize, Result<Vec<DeviceImage>>)> = units
        .iter()
        .zip(results)
        .map(|(unit, result)| {
            let result = result.unwrap_or_else(|| {
                Err(Error::Prerequisite(
                    "a device build job did not finish".into(),
                ))
            });
            (unit[0], result)
        })
        .collect();
    per_unit.sort_by_key(|(first, _)| *first);
    let mut images = Vec::new();
    for (_, result) in per_unit {
        images.extend(result?);
    }
    // Crate by crate, each in architecture order, the images of one architecture in the
    // order they were made (the sort is stable); moved, not copied.
    images.sort_by_key(|image| {
        (
            kernel_crates
                .iter()
                .position(|k| k.lib_name == image.module),
            archs.iter().position(|a| *a == image.arch),
        )
    });
    Ok(images)
}

fn build_one(
    env: &Env,
    krate: &KernelCrate,
    arch: &OffloadArch,
    target_dir: &Path,
    linked: &LinkedSources,
) -> Result<Vec<DeviceImage>> {
    match arch {
        OffloadArch::Host(level) => Ok(vec![host_device::build(
            env,
            krate,
            *level,
            target_dir,
            linked.cpu_library.as_ref(),
        )?]),
        #[cfg(feature = "llvm")]
        OffloadArch::Nvptx(_) | OffloadArch::Amdgcn(_) => {
            let extra: Vec<crate::device_link::DeviceInput> = linked
                .bitcode_for(arch)
                .map(|b| crate::device_link::DeviceInput::object(b.name.clone(), b.bytes.clone()))
                .collect();
            crate::device_link::build_gpu_images(env, krate, arch, target_dir, &extra)
        }
        #[cfg(not(feature = "llvm"))]
        OffloadArch::Nvptx(_) | OffloadArch::Amdgcn(_) => {
            // GPU architectures go to the device link process (`build_from_source`).
            let linker = device_linker::find(env)?;
            device_linker::link(
                env,
                &linker,
                krate,
                std::slice::from_ref(arch),
                target_dir,
                linked,
            )
        }
    }
}
