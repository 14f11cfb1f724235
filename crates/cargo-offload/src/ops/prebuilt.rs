//! `cargo offload package-kernels` and `cargo offload verify`: a kernel crate's prebuilt
//! bundle (`offload/<lib>.offload`), written and checked. The format and the hash are
//! `offload_build::tooling::prebuilt`'s.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use offload_build::OffloadArch;
use offload_build::tooling::env::{Env, OFFLOAD_ARCH};
use offload_build::tooling::prebuilt;
use offload_build::tooling::workspace::KernelPackage;

// `package-kernels`' options, also the command line `cargo-offload-device` parses (no doc
// comment: clap would print it as the command's about text).
#[derive(Debug, Clone, clap::Args)]
pub struct PackageKernelsOptions {
    /// Device targets to build (`sm_80,sm_90,gfx90a,host`); default: the kernel crate's
    /// `[package.metadata.offload] arch`, else `OFFLOAD_ARCH`.
    #[arg(long, value_name = "ARCHS")]
    pub offload_arch: Option<String>,
    /// The kernel crate's `Cargo.toml` (default: `./Cargo.toml`).
    #[arg(long, value_name = "PATH")]
    pub manifest_path: Option<PathBuf>,
}

// `verify`'s options, also the command line `cargo-offload-device` parses.
#[derive(Debug, Clone, clap::Args)]
pub struct VerifyOptions {
    /// The kernel crate's `Cargo.toml` (default: `./Cargo.toml`).
    #[arg(long, value_name = "PATH")]
    pub manifest_path: Option<PathBuf>,
}

fn kernel_package(manifest_path: Option<&Path>) -> Result<KernelPackage> {
    let manifest = match manifest_path {
        Some(p) => p.to_owned(),
        None => std::env::current_dir()?.join("Cargo.toml"),
    };
    if !manifest.is_file() {
        bail!(
            "{} does not exist: run in a kernel crate or pass --manifest-path",
            manifest.display()
        );
    }
    let env = Env::detect();
    let cargo = env.get_untracked("CARGO").map(PathBuf::from);
    let mut package =
        offload_build::tooling::workspace::kernel_package(&manifest, cargo.as_deref())
            .with_context(|| format!("reading {}", manifest.display()))?;
    // The bundle's images and source hash follow `OFFLOAD_PANIC`, as a build's do.
    package.krate.apply_panic_override(&env)?;
    Ok(package)
}

/// Builds the kernel crate's images and writes its prebuilt bundle.
pub fn package_kernels(args: PackageKernelsOptions) -> Result<ExitCode> {
    let env = Env::detect();
    let KernelPackage {
        krate,
        arch,
        target_directory,
    } = kernel_package(args.manifest_path.as_deref())?;
    let (list, origin) = match (args.offload_arch, arch) {
        (Some(list), _) => (list, "--offload-arch".to_owned()),
        (None, Some(list)) => (
            list,
            format!(
                "[package.metadata.offload] arch of {}",
                krate.manifest_path.display()
            ),
        ),
        (None, None) => match env.get(OFFLOAD_ARCH) {
            Some(list) => (list, "OFFLOAD_ARCH".to_owned()),
            None => bail!(
                "name the targets to package: --offload-arch sm_80,gfx90a,host, or \
                 `arch` under [package.metadata.offload] in {}",
                krate.manifest_path.display()
            ),
        },
    };
    let archs = offload_build::tooling::arch::parse_list(&list, &origin)?;
    let prebuilt::Packaged {
        path,
        images,
        hash,
        toolchain,
    } = prebuilt::package(&env, &krate, &archs, &target_directory.join("offload"))?;
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!(
        "wrote {} ({} images for {}, {size} bytes)\n  source hash {} over {} inputs\n  toolchain   {toolchain}",
        path.display(),
        images.len(),
        archs
            .iter()
            .map(OffloadArch::name)
            .collect::<Vec<_>>()
            .join(","),
        hash.hash,
        hash.inputs.len(),
    );
    println!(
        "  `cargo package` includes it unless a .gitignore or `exclude` leaves out `{}/`",
        prebuilt::PREBUILT_DIR
    );
    Ok(ExitCode::SUCCESS)
}

/// Rebuilds the prebuilt bundle from source and compares it byte for byte.
pub fn verify(args: VerifyOptions) -> Result<ExitCode> {
    let env = Env::detect();
    let krate = kernel_package(args.manifest_path.as_deref())?.krate;
    let path = prebuilt::bundle_path(&krate);
    let bundle = prebuilt::read_bundle(&path)?;
    let mut archs: Vec<OffloadArch> = Vec::new();
    for (_, image) in &bundle.images {
        if !archs.contains(&image.arch) {
            archs.push(image.arch);
        }
    }
    let mut ok = true;
    let current = prebuilt::source_hash(&krate, &bundle.toolchain, &archs)?;
    if current.hash == bundle.hash {
        println!("source hash   matches ({})", bundle.hash);
    } else {
        ok = false;
        println!(
            "source hash   DIFFERS: {}",
            current.differences(&bundle.inputs).join(", ")
        );
    }
    let toolchain = prebuilt::toolchain_identity(&env, &archs)?;
    if toolchain != bundle.toolchain {
        println!(
            "toolchain     the bundle was built by `{}`, this machine has `{toolchain}`: images may differ",
            bundle.toolchain
        );
    }
    let scratch = tempfile::tempdir().context("creating a scratch target directory")?;
    let rebuilt = prebuilt::build_from_source(&env, &krate, &archs, scratch.path())?;
    let host = offload_build::tooling::arch::host_triple();
    for (triple, image) in &bundle.images {
        let label = format!("{} {:?} ({triple})", image.arch.name(), image.image_kind);
        if matches!(image.arch, OffloadArch::Host(_)) && triple != host {
            println!("{label:<40} not checked: built for another host than {host}");
            continue;
        }
        match rebuilt
            .iter()
            .find(|r| r.arch == image.arch && r.image_kind == image.image_kind)
        {
            Some(r) if r.bytes == image.bytes => {
                println!("{label:<40} identical ({} bytes)", image.bytes.len())
            }
            Some(r) => {
                ok = false;
                println!(
                    "{label:<40} DIFFERS: {} bytes in the bundle, {} rebuilt",
                    image.bytes.len(),
                    r.bytes.len()
                );
            }
            None => {
                ok = false;
                println!("{label:<40} DIFFERS: the rebuild made no such image");
            }
        }
    }
    println!(
        "{}: {}",
        path.display(),
        if ok {
            "verified, byte for byte"
        } else {
            "does NOT match its sources"
        }
    );
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
