//! The cargo-offload build engine, used from a host crate's `build.rs` and by `cargo offload`.
//!
//! One call in `build.rs` compiles every kernel crate the package depends on for every
//! requested offload architecture, packs the images as OffloadBinaries, and links an object
//! that embeds them in `.llvm.offloading` and registers them with `offload-rt` at start-up:
//!
//! ```no_run
//! // build.rs: fn main() { … }
//! offload_build::Build::new().compile();
//! ```
//!
//! Kernel crates are the dependencies marked `[package.metadata.offload] kernels = true`.
//! Architectures come from, in order: [`Build::offload_arch`], the `OFFLOAD_ARCH`
//! environment variable (`cargo offload build --offload-arch` sets it), the host package's
//! `[package.metadata.offload] arch`, else `host`. `native` in a list stands for the GPUs of
//! the machine, which `cargo offload` probes and hands over in `OFFLOAD_NATIVE_ARCH`; without
//! them (no GPU, or a build not run through `cargo offload`) it stands for `host`, with a
//! warning.
//!
//! [`Build::openmp_cpp`] adds C++ whose OpenMP `target` regions run through LLVM's offload
//! runtime: built into a static library at build time (see `foreign::openmp`); a package
//! with only such sources needs no kernel crate and no `offload-rt`.
//!
//! # Environment variables
//!
//! | variable | meaning |
//! |---|---|
//! | `OFFLOAD_ARCH` | comma-separated offload architectures: `sm_80,gfx90a:xnack+,host`, `native` |
//! | `OFFLOAD_NATIVE_ARCH` | what `native` stands for: the GPUs `cargo offload` found (`sm_80,gfx90a:sramecc+:xnack-`), `none` when it found none |
//! | `OFFLOAD_NIGHTLY_TOOLCHAIN` | toolchain for GPU device builds (default: the pinned `offload_toolchain::DEVICE_TOOLCHAIN`); the CPU device's too where installed, else the toolchain running the build builds it |
//! | `OFFLOAD_BUILD_VERBOSE` | `1` prints every nested command |
//! | `OFFLOAD_PREBUILT` | `auto` (default): use a kernel crate's prebuilt bundle when its source hash matches, else build from source; `require`: the bundle or an error naming what differs; `never`: always from source |
//! | `OFFLOAD_PTXAS` | the `ptxas` to use (default: `ptxas` on `PATH`, else none: PTX only) |
//! | `OFFLOAD_DEVICE_LINKER` | without the `llvm` feature, the `cargo-offload-device` that links GPU images and the CPU image's IR link (default: beside the `cargo-offload` running the build, else on `PATH`; see `device_linker`) |
//! | `OFFLOAD_CPU_BARRIERS_FORM` | `source`: the CPU device's image keeps the `#[kernel]` macro's region form of barriers (rustc's fat LTO, no CPU link); `ir`: its barriers are formed in the CPU link, and a build without one fails; unset: `ir` where the device link is found, else `source` |
//! | `OFFLOAD_CHECK_ONLY` | `1`: build no device images, as under `cargo check`; `0`: always build them |
//! | `OFFLOAD_DEVICE_CHECK` | `0`: a check does not check the kernel crates as device code |
//! | `OFFLOAD_PANIC` | `report` or `trap`: how every kernel crate's GPU kernels end when they panic, over each kernel crate's `[package.metadata.offload] panic` (see [`PanicStrategy`]) |
//! | `OFFLOAD_REQUIRE_CUBIN` | `1` fails the build when an `sm_XX` would get no cubin (no `ptxas`, or one that does not know the `sm`); otherwise such an `sm` gets PTX only, with a warning when a `ptxas` exists |
//!
//! Device builds go to `<target-dir>/offload/<triple>-<arch>/`, each a cargo target directory
//! of its own; cargo's own caching makes an unchanged kernel crate cost nothing, and the build
//! script is not rerun at all unless a kernel source, a local dependency or one of the
//! variables above changed.
#![deny(missing_docs)]

mod arch;
mod build_cache;
mod command;
mod device_check;
mod device_link;
mod device_linker;
mod diagnostics;
mod directives;
mod embed;
mod env;
mod error;
mod executor;
mod foreign;
mod fsutil;
mod host_device;
mod image;
mod json;
mod metadata;
mod nested;
mod parallel;
mod plan;
mod prebuilt;
mod status;

/// The engine's entry points for `cargo offload`, its device binary and `offload-tools` (and
/// this crate's own tests). Not API: see the module.
#[doc(hidden)]
pub mod tooling;

use std::path::{Path, PathBuf};

pub use arch::OffloadArch;
pub use error::{Error, Result};
pub use image::DeviceImage;
pub use metadata::{KernelCrate, PanicStrategy, SourcePackage};

use env::Env;
use plan::BuildRequest;

/// Builds and embeds the device images of a host crate. See the crate documentation.
#[derive(Debug, Clone, Default)]
pub struct Build {
    offload_arch: Option<String>,
    kernel_crates: Vec<String>,
    manifest_dir: Option<PathBuf>,
    sources: Vec<foreign::Source>,
    options: foreign::Options,
}

/// What a build produced.
#[derive(Debug, Clone)]
pub struct BuildOutput {
    /// The architectures built for, in the order of the list.
    pub archs: Vec<OffloadArch>,
    /// Every device image embedded, kernel crates' and foreign sources'.
    pub images: Vec<DeviceImage>,
    /// The concatenated OffloadBinaries that were embedded.
    pub bundle_path: PathBuf,
}

impl Build {
    /// A build with nothing set: the architectures and the kernel crates then come from the
    /// environment and the manifests (see the crate documentation).
    pub fn new() -> Self {
        Self::default()
    }

    /// Overrides the architecture list (`"sm_80,gfx90a,host"`).
    pub fn offload_arch(&mut self, list: impl Into<String>) -> &mut Self {
        self.offload_arch = Some(list.into());
        self
    }

    /// Names a kernel crate (package name) instead of discovering them from the metadata.
    pub fn kernel_crate(&mut self, package: impl Into<String>) -> &mut Self {
        self.kernel_crates.push(package.into());
        self
    }

    /// The host package's directory (default: `CARGO_MANIFEST_DIR`).
    pub fn manifest_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.manifest_dir = Some(dir.into());
        self
    }

    /// Adds a CUDA source (`.cu`), compiled with clang-22 for every `sm_XX` of the build. Its
    /// kernels join the module named after the file stem, and are launched through
    /// `offload_rt::extern_kernels!`. A relative path is relative to the package directory.
    pub fn cuda(&mut self, path: impl Into<PathBuf>) -> &mut Self {
        self.source(foreign::Language::Cuda, path)
    }

    /// Adds a HIP source (`.hip`), compiled with clang-22 for every AMD target ID of the
    /// build; as [`Build::cuda`] otherwise.
    pub fn hip(&mut self, path: impl Into<PathBuf>) -> &mut Self {
        self.source(foreign::Language::Hip, path)
    }

    /// Adds a C++ source with OpenMP `target` regions: compiled with `-fopenmp` for the host
    /// and its offload targets, device-linked at build time and linked into the host program
    /// with LLVM's offload runtime. Its `extern "C"` functions are called from Rust.
    pub fn openmp_cpp(&mut self, path: impl Into<PathBuf>) -> &mut Self {
        self.source(foreign::Language::OpenmpCpp, path)
    }

    /// Adds a CUDA source compiled as relocatable device code and device-linked with the
    /// kernel crate: its `__device__` functions are callable from Rust kernels (declared in an
    /// `extern "C"` block), its kernels call `#[no_mangle] extern "C"` Rust functions, and its
    /// kernels join the kernel crate's module. On the CPU device its host side is linked in
    /// (`__host__ __device__` functions; kernels belong in `#ifndef OFFLOAD_CPU_DEVICE`).
    /// Needs exactly one kernel crate.
    pub fn cuda_rdc(&mut self, path: impl Into<PathBuf>) -> &mut Self {
        self.source(foreign::Language::Cuda, path);
        self.mark_last_relocatable()
    }

    /// Adds a HIP source compiled as relocatable device code; as [`Build::cuda_rdc`].
    pub fn hip_rdc(&mut self, path: impl Into<PathBuf>) -> &mut Self {
        self.source(foreign::Language::Hip, path);
        self.mark_last_relocatable()
    }

    fn mark_last_relocatable(&mut self) -> &mut Self {
        if let Some(last) = self.sources.last_mut() {
            last.relocatable = true;
        }
        self
    }

    fn source(&mut self, language: foreign::Language, path: impl Into<PathBuf>) -> &mut Self {
        self.sources.push(foreign::Source {
            language,
            path: path.into(),
            relocatable: false,
        });
        self
    }

    /// Adds an include directory (`-I`) for CUDA, HIP and C++ sources.
    pub fn include(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.options.includes.push(dir.into());
        self
    }

    /// Defines a macro (`-DNAME` or `-DNAME=VALUE`) for CUDA, HIP and C++ sources.
    pub fn define<'a>(&mut self, name: &str, value: impl Into<Option<&'a str>>) -> &mut Self {
        self.options
            .defines
            .push((name.to_owned(), value.into().map(str::to_owned)));
        self
    }

    /// Adds a clang flag for CUDA, HIP and C++ sources.
    pub fn flag(&mut self, flag: impl Into<String>) -> &mut Self {
        self.options.flags.push(flag.into());
        self
    }

    /// Like [`Build::try_compile`], but prints the error as one clear message and exits the
    /// build script with a failure, the way a build script reports problems.
    pub fn compile(&self) -> BuildOutput {
        match self.try_compile() {
            Ok(out) => out,
            Err(e) => {
                eprintln!("error[{}]: offload build failed: {e}", e.code());
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    eprintln!("  caused by: {s}");
                    source = s.source();
                }
                std::process::exit(1);
            }
        }
    }

    /// Builds every kernel crate for every architecture and links the embedding object.
    /// Must run inside a build script.
    pub fn try_compile(&self) -> Result<BuildOutput> {
        fsutil::restrict_umask();
        let env = Env::detect();
        if env.build_script {
            directives::hold();
        }
        let result = self.build(&env);
        diagnostics::report(&env);
        directives::release(result.is_ok());
        result
    }

    fn build(&self, env: &Env) -> Result<BuildOutput> {
        let env = *env;
        let need = |name: &'static str| {
            env.get_untracked(name).ok_or(Error::MissingEnv {
                name,
                context: " (offload_build::Build must run inside a build script)".to_owned(),
            })
        };
        let out_dir = PathBuf::from(need("OUT_DIR")?);
        let target = need("TARGET")?;
        let rustc = PathBuf::from(need("RUSTC")?);
        let manifest_dir = match &self.manifest_dir {
            Some(d) => d.clone(),
            None => PathBuf::from(need("CARGO_MANIFEST_DIR")?),
        };
        let cargo = env.get_untracked("CARGO").map(PathBuf::from);
        let manifest = manifest_dir.join("Cargo.toml");

        // Cargo lists the host crate's enabled features here, and leaves the variable out when
        // none is (CARGO_FEATURE_* loses their spelling); they decide which features its
        // kernel crates are built with.
        let host_features: Vec<String> = env
            .get_untracked("CARGO_CFG_FEATURE")
            .unwrap_or_default()
            .split(',')
            .filter(|f| !f.is_empty())
            .map(str::to_owned)
            .collect();
        let host = metadata::host_package(&manifest, cargo.as_deref(), Some(&host_features))?;
        let archs = self.resolve_archs(&env, &host)?;
        diagnostics::set_arch_order(&archs);
        let offload_dir = target_dir_of(&out_dir)
            .unwrap_or_else(|| host.target_directory.clone())
            .join("offload");
        let mut kernel_crates = if self.sources.is_empty() || !self.kernel_crates.is_empty() {
            self.select_kernel_crates(&host)?
        } else {
            host.kernel_crates.clone()
        };
        for krate in &mut kernel_crates {
            krate.apply_panic_override(&env)?;
        }
        if env.check_only() {
            device_check::check(&env, &kernel_crates, &offload_dir)?;
            return Self::check_only_output(&env, &host.name, &out_dir, archs);
        }
        if !host.host_runtime && self.sources.is_empty() && !kernel_crates.is_empty() {
            // Nothing could launch the kernels: build no image for nothing.
            warn_no_host_runtime(&env, &host.name);
            kernel_crates.clear();
        }
        for krate in &kernel_crates {
            for path in &krate.watch {
                directives::emit(format!("cargo:rerun-if-changed={}", path.display()));
            }
            // Only an existing path: cargo reruns the script every time for a missing one.
            let bundle = prebuilt::bundle_path(krate);
            if bundle.is_file() {
                directives::emit(format!("cargo:rerun-if-changed={}", bundle.display()));
            }
        }
        directives::emit("cargo:rerun-if-changed=build.rs".to_owned());
        // The host's `[package.metadata.offload]` (its `arch` list) is read from here: an edit
        // must rerun the script, which declaring any file stops cargo from assuming.
        directives::emit(format!("cargo:rerun-if-changed={}", manifest.display()));

        let sources: Vec<foreign::Source> = self
            .sources
            .iter()
            .map(|s| foreign::Source {
                path: manifest_dir.join(&s.path),
                ..s.clone()
            })
            .collect();
        let options = foreign::Options {
            includes: self
                .options
                .includes
                .iter()
                .map(|d| manifest_dir.join(d))
                .collect(),
            ..self.options.clone()
        };
        let plan = if sources.is_empty() {
            None
        } else {
            Some(foreign::Plan::new(
                &env, &sources, &options, &out_dir, &host.name,
            )?)
        };
        let mut images = self.kernel_crate_images(
            &env,
            &kernel_crates,
            &archs,
            &offload_dir,
            plan.as_ref(),
            &host.name,
        )?;
        leave_out_kernel_crates_without_kernels(&env, &kernel_crates, &mut images);
        if let Some(plan) = &plan {
            let built = plan.build(&env, &archs)?;
            for path in &built.watch {
                directives::emit(format!("cargo:rerun-if-changed={}", path.display()));
            }
            if let Some(lib) = &built.openmp {
                for line in lib.cargo_directives() {
                    directives::emit(line);
                }
            }
            images.extend(built.images);
        }
        let bundle_path = out_dir.join("offload_bundle.bin");
        if !host.host_runtime && !images.is_empty() {
            warn_no_host_runtime(&env, &host.name);
            images.clear();
        }
        if images.is_empty() {
            // Only OpenMP C++ sources: nothing to register with offload-rt, which such a
            // package need not depend on, so no embedding object refers to it.
            fsutil::write_atomic(&bundle_path, &[])?;
        } else {
            let bundle = image::bundle(&images);
            status::status(
                &env,
                "Embedding",
                &format!(
                    "{} device image{} into {} ({} bytes)",
                    images.len(),
                    if images.len() == 1 { "" } else { "s" },
                    host.name,
                    bundle.len()
                ),
            );
            let lib =
                embed::build_embedding_library(&out_dir, &host.name, &bundle, &rustc, &target)?;
            directives::emit(format!(
                "cargo:rustc-link-search=native={}",
                lib.dir.display()
            ));
            directives::emit(format!(
                "cargo:rustc-link-lib=static:+whole-archive={}",
                lib.link_name
            ));
        }
        Ok(BuildOutput {
            archs,
            images,
            bundle_path,
        })
    }

    /// Under `cargo check` (see [`Env::check_only`]): no device build and no link directive,
    /// since nothing links; kernel bodies type-check as host code, the kernel crate being an
    /// ordinary dependency, and as device code in [`device_check`]. The script is declared stale (a path that never exists), so the
    /// next `cargo build`, which shares this script's run with `check`, builds the images.
    fn check_only_output(
        env: &Env,
        host: &str,
        out_dir: &Path,
        archs: Vec<OffloadArch>,
    ) -> Result<BuildOutput> {
        directives::emit(format!(
            "cargo:rerun-if-changed={}",
            out_dir.join("device-images-not-built").display()
        ));
        env.warn(&format!(
            "{host}: checking only, so no device images were built (kernels type-check as \
             host code); `cargo build` builds them"
        ));
        let bundle_path = out_dir.join("offload_bundle.bin");
        fsutil::write_atomic(&bundle_path, &[])?;
        Ok(BuildOutput {
            archs,
            images: Vec::new(),
            bundle_path,
        })
    }

    /// The kernel crates' images: from prebuilt bundles or built, or, with relocatable
    /// CUDA/HIP sources, always built and device-linked with them.
    fn kernel_crate_images(
        &self,
        env: &Env,
        kernel_crates: &[KernelCrate],
        archs: &[OffloadArch],
        offload_dir: &Path,
        plan: Option<&foreign::Plan>,
        package: &str,
    ) -> Result<Vec<DeviceImage>> {
        let Some(plan) = plan.filter(|p| p.sources.iter().any(|s| s.relocatable)) else {
            return executor::images_from_bundles_or_source(env, kernel_crates, archs, offload_dir);
        };
        if kernel_crates.len() != 1 {
            return Err(Error::Prerequisite(format!(
                "relocatable CUDA/HIP sources (`Build::cuda_rdc`, `Build::hip_rdc`) are \
                 device-linked with one kernel crate, and `{package}` has {}{}; name it with \
                 `Build::kernel_crate`",
                kernel_crates.len(),
                if kernel_crates.is_empty() {
                    String::new()
                } else {
                    format!(
                        " ({})",
                        kernel_crates
                            .iter()
                            .map(|k| k.package.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            )));
        }
        let linked = plan.build_linked(env, archs)?;
        for path in &linked.watch {
            directives::emit(format!("cargo:rerun-if-changed={}", path.display()));
        }
        executor::build_images(
            env,
            &BuildRequest {
                kernel_crates,
                archs,
                offload_dir,
                linked: Some(&linked),
            },
        )
    }

    fn resolve_archs(&self, env: &Env, host: &metadata::HostPackage) -> Result<Vec<OffloadArch>> {
        let (list, origin) = if let Some(list) = &self.offload_arch {
            (list.clone(), "Build::offload_arch".to_owned())
        } else if let Some(list) = env.get(env::OFFLOAD_ARCH) {
            (list, "the OFFLOAD_ARCH environment variable".to_owned())
        } else if let Some(list) = &host.arch {
            (
                list.clone(),
                format!(
                    "[package.metadata.offload] arch of {}",
                    host.manifest_path.display()
                ),
            )
        } else {
            return Ok(vec![OffloadArch::HOST]);
        };
        let resolved = arch::parse_list_with_native(&list, &origin, || arch::native_from_env(env))?;
        if let Some(note) = &resolved.note {
            env.warn(note);
        }
        Ok(resolved.archs)
    }

    fn select_kernel_crates(&self, host: &metadata::HostPackage) -> Result<Vec<KernelCrate>> {
        if self.kernel_crates.is_empty() {
            if host.kernel_crates.is_empty() {
                return Err(Error::NoKernelCrates {
                    package: host.name.clone(),
                });
            }
            return Ok(host.kernel_crates.clone());
        }
        self.kernel_crates
            .iter()
            .map(|name| {
                host.kernel_crates
                    .iter()
                    .find(|k| &k.package == name || &k.lib_name == name)
                    .cloned()
                    .ok_or_else(|| Error::UnknownKernelCrate {
                        name: name.clone(),
                        package: host.name.clone(),
                        known: host
                            .kernel_crates
                            .iter()
                            .map(|k| k.package.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    })
            })
            .collect()
    }
}

/// Warns that `package`'s images are neither built nor embedded: no crate of its graph turns
/// on offload-rt's host runtime, whose registration functions the embedding object calls (the
/// program would fail to link with an undefined `__offload_register_lib`), and without which
/// nothing could launch the kernels.
fn warn_no_host_runtime(env: &Env, package: &str) {
    env.warn(&format!(
        "`{package}` does not depend on `offload-rt` with its `host` feature (the runtime that \
         registers and launches kernels), so no device image is built or embedded: add \
         `offload-rt = \"{}\"` to the [dependencies] of `{package}` to launch its kernels",
        concat!(
            env!("CARGO_PKG_VERSION_MAJOR"),
            ".",
            env!("CARGO_PKG_VERSION_MINOR")
        )
    ));
}

/// Leaves out, with a warning, the images of each kernel crate that carry no kernel: a
/// function without `#[kernel]` cannot be launched, so they would be embedded for nothing
/// (and register with a runtime the program need not link).
fn leave_out_kernel_crates_without_kernels(
    env: &Env,
    kernel_crates: &[KernelCrate],
    images: &mut Vec<DeviceImage>,
) {
    for krate in kernel_crates {
        let mut own = images
            .iter()
            .filter(|i| i.module == krate.lib_name)
            .peekable();
        if own.peek().is_some() && own.all(|i| i.kernels.is_empty()) {
            env.warn(&format!(
                "kernel crate `{}` defines no kernel, so none of its images is embedded: a \
                 function is launched only if it is marked `#[kernel]` \
                 (`#[offload_rt::kernel]`, or `use offload_rt::kernel::kernel`)",
                krate.package
            ));
            images.retain(|i| i.module != krate.lib_name);
        }
    }
}

/// What relocatable CUDA/HIP sources give the kernel crate's link.
pub use foreign::rdc::LinkedSources;

/// The target directory a build script's `OUT_DIR` lies in: the nearest ancestor holding the
/// `CACHEDIR.TAG` cargo writes at a target directory's root. `cargo metadata` cannot know it
/// when the outer build was given `--target-dir`.
fn target_dir_of(out_dir: &Path) -> Option<PathBuf> {
    out_dir
        .ancestors()
        .skip(1)
        .find(|dir| dir.join("CACHEDIR.TAG").is_file())
        .map(Path::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_dir_is_found_above_out_dir() {
        let root = tempfile::tempdir().unwrap();
        let out = root
            .path()
            .join("x86_64-unknown-linux-gnu/release/build/app-0123/out");
        std::fs::create_dir_all(&out).unwrap();
        assert_eq!(target_dir_of(&out), None);
        std::fs::write(root.path().join("CACHEDIR.TAG"), "Signature").unwrap();
        assert_eq!(target_dir_of(&out).as_deref(), Some(root.path()));
    }
}
