//! CUDA and HIP sources compiled as relocatable device code and device-linked with a Rust
//! kernel crate: a Rust kernel calls a `__device__` function written in CUDA or HIP, and a
//! CUDA or HIP kernel calls an `extern "C"` function written in Rust, in one image.
//!
//! For each GPU architecture the source becomes LLVM bitcode (`-fgpu-rdc -emit-llvm`, the
//! device side of clang's `-fgpu-rdc --offload-new-driver -foffload-lto`), which the device
//! link reads beside the kernel crate's bitcode. For the CPU device the source's host side
//! (its `__host__ __device__` functions) is compiled for the host with `OFFLOAD_CPU_DEVICE`
//! defined and linked into the CPU image; kernels there are for GPUs, so a source keeps
//! them out of that compile with `#ifndef OFFLOAD_CPU_DEVICE`.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::source::{Language, Options, Source};
use super::{Clang, depfile};
use crate::arch::{OffloadArch, host_triple};
use crate::env::Env;
use crate::error::{IoContext, Result};

/// One source's device bitcode for one GPU architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceBitcode {
    /// The GPU architecture it was compiled for.
    pub arch: OffloadArch,
    /// The source it came from, for messages.
    pub name: String,
    /// The LLVM bitcode.
    pub bytes: Vec<u8>,
}

/// What the kernel crate's images are linked with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkedSources {
    /// Every relocatable source's bitcode, for every GPU architecture.
    pub bitcode: Vec<DeviceBitcode>,
    /// The static library (directory, link name) of the sources' host side, for the CPU
    /// device image.
    pub cpu_library: Option<(PathBuf, String)>,
    /// The sources and the headers clang read.
    pub watch: Vec<PathBuf>,
}

impl LinkedSources {
    /// Whether there is nothing to link: no bitcode and no host library.
    pub fn is_empty(&self) -> bool {
        self.bitcode.is_empty() && self.cpu_library.is_none()
    }

    /// The bitcode for `arch`.
    pub fn bitcode_for<'a>(
        &'a self,
        arch: &'a OffloadArch,
    ) -> impl Iterator<Item = &'a DeviceBitcode> {
        self.bitcode.iter().filter(move |b| &b.arch == arch)
    }
}

/// Compiles `sources` (CUDA and HIP, relocatable) for every architecture of `archs` their
/// language serves, and the CPU device's library when `archs` has `host`.
pub fn build(
    env: &Env,
    clang: &Clang,
    sources: &[&Source],
    archs: &[OffloadArch],
    options: &Options,
    out_dir: &Path,
    package: &str,
) -> Result<LinkedSources> {
    let mut linked = LinkedSources::default();
    let mut host_objects = Vec::new();
    // The sources' CPU side is one library, at the baseline, for every CPU level.
    let mut unique: Vec<OffloadArch> = Vec::new();
    for arch in archs {
        let arch = if arch.is_gpu() {
            *arch
        } else {
            OffloadArch::HOST
        };
        if !unique.contains(&arch) {
            unique.push(arch);
        }
    }
    let archs = unique.as_slice();
    for source in sources {
        super::source::extend_unique(&mut linked.watch, vec![source.path.clone()]);
        let dir = super::source::work_dir(out_dir, source);
        std::fs::create_dir_all(&dir).io("creating", &dir)?;
        let module = source.module();
        let language = match source.language {
            Language::Cuda => super::cuda::language_args(env)?,
            Language::Hip => super::hip::language_args(&dir)?,
            Language::OpenmpCpp => Vec::new(),
        };
        let dep_path = dir.join(format!("{module}.d"));
        let mut compiled = false;
        for arch in archs {
            let serves = matches!(
                (source.language, arch),
                (Language::Cuda, OffloadArch::Nvptx(_))
                    | (Language::Hip, OffloadArch::Amdgcn(_))
                    | (_, OffloadArch::Host(_))
            );
            // The CPU device takes a function written for each vendor once: from the CUDA
            // file when a HIP file of the same name exists.
            let twin = *arch == OffloadArch::HOST
                && source.language == Language::Hip
                && sources
                    .iter()
                    .any(|s| s.language == Language::Cuda && s.module() == module);
            if !serves || twin {
                continue;
            }
            let stem = format!("{module}.{}", arch.name().replace(':', "_"));
            let host = *arch == OffloadArch::HOST;
            let output = dir.join(format!("{stem}.{}", if host { "o" } else { "bc" }));
            let mut cmd = Command::new(&clang.path);
            cmd.args(&language);
            match arch {
                OffloadArch::Host(_) => {
                    cmd.arg(format!("--target={}", host_triple())).args([
                        "--cuda-host-only",
                        "-fPIC",
                        "-O2",
                        "-DOFFLOAD_CPU_DEVICE=1",
                    ]);
                    if source.language == Language::Cuda {
                        // No GPU architecture is compiled; any one satisfies the driver.
                        cmd.arg("--offload-arch=sm_80");
                    } else {
                        cmd.arg("--offload-arch=gfx90a");
                    }
                }
                OffloadArch::Nvptx(sm) => {
                    cmd.args(super::cuda::sm_args(sm)?).args([
                        "--cuda-device-only",
                        "-fgpu-rdc",
                        "-emit-llvm",
                        "-O2",
                    ]);
                }
                OffloadArch::Amdgcn(id) => {
                    let version = crate::device_link::AmdCodeObjectVersion::from_env(env)?;
                    cmd.arg(format!("--offload-arch={id}"))
                        .args(["--cuda-device-only", "-fgpu-rdc", "-emit-llvm", "-O2"])
                        .arg("--no-gpu-bundle-output")
                        .arg(format!(
                            "-mcode-object-version={}",
                            version.module_flag() / 100
                        ));
                }
            }
            cmd.args(options.clang_args())
                .arg("-c")
                .arg(&source.path)
                .arg("-o")
                .arg(&output);
            // HIP's device-only compiles write no depfile (see `hip::header_dependencies`).
            if host || source.language == Language::Cuda {
                cmd.arg("-MMD").arg("-MF").arg(&dep_path);
            }
            super::source::run_clang(env, &mut cmd, source, &arch.name())?;
            compiled = true;
            if host {
                host_objects.push(output);
            } else {
                let bytes = std::fs::read(&output).io("reading", &output)?;
                linked.bitcode.push(DeviceBitcode {
                    arch: *arch,
                    name: format!("{} ({arch})", source.path.display()),
                    bytes,
                });
            }
        }
        if !compiled {
            continue;
        }
        let deps = if source.language == Language::Hip {
            let mut args = language.clone();
            args.extend(options.clang_args());
            super::hip::header_dependencies(env, clang, source, &args, &dep_path, "host")?
        } else {
            let text = std::fs::read_to_string(&dep_path).io("reading", &dep_path)?;
            depfile::prerequisites(&text)
        };
        super::source::extend_unique(&mut linked.watch, deps);
    }
    if !host_objects.is_empty() {
        let link_name = format!("offload_linked_{}", package.replace('-', "_"));
        let lib_dir = out_dir.join("offload-src");
        archive(&host_objects, &lib_dir.join(format!("lib{link_name}.a")))?;
        linked.cpu_library = Some((lib_dir, link_name));
    }
    Ok(linked)
}

/// Writes `objects` as the static library at `path`.
fn archive(objects: &[PathBuf], path: &Path) -> Result<()> {
    let mut members = Vec::with_capacity(objects.len());
    for object in objects {
        members.push(offload_format::archive::ArchiveMember {
            name: object
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            data: std::fs::read(object).io("reading", object)?.into(),
        });
    }
    super::source::write_static_library(path, &members)
}
