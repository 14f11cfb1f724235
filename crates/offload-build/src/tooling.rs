//! The engine as `cargo offload`, its device binary and `offload-tools` drive it: one module
//! per purpose, each a few entry points, everything else of the crate private. Not API:
//! versioned with `cargo-offload`, with no promise to other crates; a build script needs only
//! [`crate::Build`].
//!
//! `device_link`, `foreign` and `host_device` are the stages this crate's own
//! integration tests and benchmarks (and offload-rt's tests) exercise one by one; the command
//! does not use them.

use std::path::Path;

use crate::arch::OffloadArch;
use crate::env::Env;
use crate::error::Result;
use crate::image::DeviceImage;
use crate::metadata::KernelCrate;

/// External commands, run as the build runs them: the exact command in every error.
pub mod command {
    pub use crate::command::{CommandError, run, spawn, status_interactive};
}

/// What `cargo offload` and the build scripts it runs tell each other through the
/// environment, and the process settings they share.
pub mod env {
    pub use crate::device_linker::OFFLOAD_CARGO_OFFLOAD;
    pub use crate::diagnostics::OFFLOAD_MESSAGE_DIR;
    pub use crate::env::{
        Env, NATIVE_NONE, OFFLOAD_ARCH, OFFLOAD_DEBUG_KERNELS, OFFLOAD_NATIVE_ARCH,
        OFFLOAD_PREBUILT, OFFLOAD_SANITIZE_KERNELS,
    };
    pub use crate::fsutil::restrict_umask;
    pub use crate::status::OFFLOAD_STATUS_DIR;
}

/// Offload architecture lists (`--offload-arch`, `OFFLOAD_ARCH`, the packages' `arch`).
pub mod arch {
    pub use crate::arch::{
        Native, host_triple, mentions_native, parse_found, parse_list, parse_list_for_triple,
    };
}

/// The workspace as the build reads it (`cargo metadata`): host crates, kernel crates, the
/// packages a command line selects.
pub mod workspace {
    pub use crate::metadata::{
        HostCrate, KernelPackage, PackageSelection, host_crates, kernel_crates_to_test,
        kernel_package, workspace_archs, workspace_members,
    };
}

/// `--print-phases`: the plan of a host crate's device builds, the one a build carries out.
pub mod phases {
    pub use crate::plan::{BuildPlan, ImageSource, LinkOutputs};
    pub use crate::prebuilt::Policy;

    /// The plan of `kernel_crates`' device builds for `archs`: each crate's prebuilt bundle
    /// where `policy` takes it and it serves, else its build from source, whether or not this
    /// machine could run it.
    pub fn plan(
        kernel_crates: &[super::KernelCrate],
        archs: &[super::OffloadArch],
        policy: Policy,
    ) -> super::Result<BuildPlan> {
        BuildPlan::new(kernel_crates, archs, policy, &|| true)
    }
}

/// Cargo's JSON messages, and the device builds' diagnostics among them rendered as cargo
/// renders a host crate's.
pub mod diagnostics {
    #[cfg(feature = "llvm")]
    pub use crate::diagnostics::take_recorded;
    pub use crate::diagnostics::{DIAGNOSTICS_FILE, add_help, identity, level, rendered};
    pub use crate::json::{CargoMessage, JsonExt};

    /// A device build's diagnostic as cargo prints a host one, with a note naming the
    /// architectures whose builds gave it; `None` for a message with nothing rendered.
    pub fn render_device(message: &CargoMessage) -> Option<String> {
        let rendered = crate::diagnostics::rendered(message)?;
        let package = crate::diagnostics::package_name(message);
        let archs = crate::diagnostics::archs(message);
        Some(crate::diagnostics::with_archs_note(
            rendered, package, &archs,
        ))
    }
}

/// Kernel crates' prebuilt bundles (`offload/<lib>.offload`): built, written, read, checked.
pub mod prebuilt {
    pub use crate::prebuilt::{
        KEY_HASH, KEY_INPUTS, KEY_PRODUCER, KEY_TOOLCHAIN, PREBUILT_DIR, bundle_path, read_bundle,
        source_hash, toolchain_identity, write_bundle,
    };

    /// A kernel crate's bundle as `cargo offload package-kernels` wrote it ([`package`]).
    #[derive(Debug)]
    pub struct Packaged {
        /// Where it was written (`offload/<lib>.offload` beside the crate's manifest).
        pub path: std::path::PathBuf,
        /// The images it holds, in architecture order.
        pub images: Vec<super::DeviceImage>,
        /// The hash over the crate's sources it is keyed by.
        pub hash: crate::prebuilt::SourceHash,
        /// The toolchain that built it.
        pub toolchain: String,
    }

    /// Packages `krate`'s prebuilt bundle for `archs`: its images built from source under
    /// `offload_dir`, keyed by its source hash and the toolchain, written beside its manifest.
    pub fn package(
        env: &super::Env,
        krate: &super::KernelCrate,
        archs: &[super::OffloadArch],
        offload_dir: &super::Path,
    ) -> super::Result<Packaged> {
        let toolchain = toolchain_identity(env, archs)?;
        let images = build_from_source(env, krate, archs, offload_dir)?;
        let hash = source_hash(krate, &toolchain, archs)?;
        let path = write_bundle(krate, &images, &hash, &toolchain)?;
        Ok(Packaged {
            path,
            images,
            hash,
            toolchain,
        })
    }

    /// `krate`'s images for `archs`, built from source under `offload_dir` as a build with no
    /// bundle builds them (with `OFFLOAD_PANIC` applied), in architecture order.
    pub fn build_from_source(
        env: &super::Env,
        krate: &super::KernelCrate,
        archs: &[super::OffloadArch],
        offload_dir: &super::Path,
    ) -> super::Result<Vec<super::DeviceImage>> {
        crate::executor::build_images(
            env,
            &crate::plan::BuildRequest {
                kernel_crates: std::slice::from_ref(krate),
                archs,
                offload_dir,
                linked: None,
            },
        )
    }
}

/// The GPU device link that `cargo-offload-device` runs for build scripts without LLVM: its
/// service, and how a build script finds it and checks its protocol.
pub mod device_linker {
    #[cfg(feature = "llvm")]
    pub use crate::device_linker::serve;
    pub use crate::device_linker::{PROTOCOL_FLAG, VERSION, find_with, protocol_line};
}

/// The device toolchain as `cargo offload doctor` and `inspect` ask about it: the nightly,
/// clang, LLVM's major, what `ptxas` knows and reports.
pub mod toolchain {
    pub use crate::device_link::{
        CubinPlan, LLVM_MAJOR, cubin_plan, ptxas_supported_sms, ptxas_verbose,
    };
    pub use crate::foreign::clang::find as find_clang;
    pub use crate::nested::{nightly_usable, rustc_llvm_major};
}

/// The GPU device link's stages, for this crate's tests and benchmarks.
pub mod device_link {
    pub use crate::device_link::{
        AmdCodeObjectVersion, CubinPlan, LLVM_MAJOR, LinkError, cubin_plan, find_tool,
        installed_ptxas, is_cubin, ptx_features, ptxas_assemble, ptxas_for, ptxas_path,
        ptxas_verbose,
    };
    #[cfg(feature = "llvm")]
    pub use crate::device_link::{
        AmdgpuLinkOptions, DeviceInput, GpuLinkOptions, HOST_GLOBALS, NvptxLinkOptions,
        amdgpu_code_object, build_gpu_images, check_llvm_versions, device_inputs, gpu_images,
        linked_llvm_major, nvptx_link, parse_gpu_arch,
    };
}

/// CUDA, HIP and OpenMP C++ sources built through clang, for this crate's tests.
pub mod foreign {
    pub use crate::foreign::{
        Built, Clang, Language, Options, Source, build, clang, cuda, hip, rdc,
    };
}

/// The CPU device's image, for this crate's and offload-rt's tests.
pub mod host_device {
    pub use crate::host_device::{build, build_in_form};
}
