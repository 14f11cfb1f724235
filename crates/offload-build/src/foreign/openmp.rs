//! C++ with OpenMP target offload, device-linked and wrapped at build time into one
//! relocatable object, archived, and linked into the host program with LLVM's offload
//! runtime (`libomptarget`).
//!
//! Each source is compiled with `-fopenmp -fopenmp-targets=<host triple>[,<GPU triples>]`,
//! which embeds its device code in the object's `.llvm.offloading` section. One
//! `clang -fopenmp -fopenmp-targets=… -r` over the objects then runs clang's linker wrapper in
//! relocatable mode: it links each device image, wraps it with the `__tgt_register_lib`
//! constructor and merges that into the output, so the host program's own link (rustc's) needs
//! no offload step. The host CPU is always an offload target (libomptarget's host plugin); a
//! GPU architecture is one only where LLVM has an OpenMP device runtime for it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use offload_format::{AmdTargetId, Sm};

use super::Clang;
use super::source::{Options, Source};
use crate::arch::{AMDGCN_TRIPLE, NVPTX_TRIPLE, OffloadArch};
use crate::command::{self, CommandLine};
use crate::env::Env;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::temp_file_beside;

/// The static library built from a build's OpenMP C++ sources, and how to link it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenmpLibrary {
    /// The directory holding `lib<link_name>.a`.
    pub dir: PathBuf,
    /// The name to pass to `-l` (see [`link_name`]).
    pub link_name: String,
    /// The directory of `libomptarget.so` and `libomp.so`, for the link search path and the
    /// run-time search path.
    pub runtime_dir: PathBuf,
    /// The files the library depends on (sources and the headers they include).
    pub watch: Vec<PathBuf>,
}

impl OpenmpLibrary {
    /// The `cargo:` lines that link the library and the offload runtime into the host program.
    pub fn cargo_directives(&self) -> Vec<String> {
        vec![
            format!("cargo:rustc-link-search=native={}", self.dir.display()),
            format!("cargo:rustc-link-lib=static={}", self.link_name),
            format!(
                "cargo:rustc-link-search=native={}",
                self.runtime_dir.display()
            ),
            "cargo:rustc-link-lib=dylib=omptarget".to_owned(),
            "cargo:rustc-link-lib=dylib=omp".to_owned(),
            // The host part of C++ code may use the C++ library; rustc links dynamic
            // libraries `--as-needed`, so one it does not use costs nothing.
            "cargo:rustc-link-lib=dylib=stdc++".to_owned(),
            format!(
                "cargo:rustc-link-arg=-Wl,-rpath,{}",
                self.runtime_dir.display()
            ),
        ]
    }
}

/// The library's `-l` name for host package `package`: `offload_openmp_<package>`, every
/// character that is not a letter or digit as `_`.
pub fn link_name(package: &str) -> String {
    let ident: String = package
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("offload_openmp_{ident}")
}

/// The offload targets of an OpenMP build: the host triple, and the GPU architectures for
/// which LLVM has an OpenMP device runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Targets {
    /// The host's target triple, which always has an OpenMP device.
    pub host: String,
    /// The NVIDIA architectures asked for that have a device runtime.
    pub nvptx: Vec<Sm>,
    /// The AMD architectures asked for that have a device runtime.
    pub amdgcn: Vec<AmdTargetId>,
}

impl Targets {
    /// The clang arguments that select the host and the offload targets, for the compiles and
    /// for the relocatable link: `--target=<host> -fopenmp -fopenmp-targets=<host>,…` and, per
    /// GPU triple, `-Xopenmp-target=<triple> --offload-arch=<archs>`.
    pub fn clang_args(&self) -> Vec<String> {
        let mut triples = vec![self.host.clone()];
        let mut per_triple = Vec::new();
        if !self.nvptx.is_empty() {
            triples.push(NVPTX_TRIPLE.to_owned());
            let archs: Vec<String> = self.nvptx.iter().map(|sm| sm.to_string()).collect();
            per_triple.push((NVPTX_TRIPLE, archs.join(",")));
        }
        if !self.amdgcn.is_empty() {
            triples.push(AMDGCN_TRIPLE.to_owned());
            let archs: Vec<String> = self.amdgcn.iter().map(|id| id.to_string()).collect();
            per_triple.push((AMDGCN_TRIPLE, archs.join(",")));
        }
        let mut args = vec![
            format!("--target={}", self.host),
            "-fopenmp".to_owned(),
            format!("-fopenmp-targets={}", triples.join(",")),
        ];
        for (triple, archs) in per_triple {
            args.push(format!("-Xopenmp-target={triple}"));
            args.push(format!("--offload-arch={archs}"));
        }
        args
    }

    /// The targets as the diagnostics name them: `x86_64-unknown-linux-gnu, sm_80`.
    pub fn describe(&self) -> String {
        let mut names = vec![self.host.clone()];
        names.extend(self.nvptx.iter().map(|sm| sm.to_string()));
        names.extend(self.amdgcn.iter().map(|id| id.to_string()));
        names.join(", ")
    }
}

/// The OpenMP device runtime clang links into a GPU triple's device code, as clang names it.
fn device_runtime(triple: &str) -> &'static str {
    if triple == NVPTX_TRIPLE {
        "libomptarget-nvptx.bc"
    } else {
        "libomptarget-amdgpu.bc"
    }
}

/// The targets for `archs`: the host always; each GPU architecture whose device runtime lies in
/// `runtime_dir`. The GPU architectures left out are reported in one warning.
pub fn offload_targets(
    env: &Env,
    host: &str,
    archs: &[OffloadArch],
    runtime_dir: &Path,
) -> Targets {
    let has_runtime = |triple: &str| runtime_dir.join(device_runtime(triple)).is_file();
    let mut targets = Targets {
        host: host.to_owned(),
        nvptx: Vec::new(),
        amdgcn: Vec::new(),
    };
    let mut skipped: Vec<(String, &'static str)> = Vec::new();
    for arch in archs {
        match arch {
            OffloadArch::Host(_) => {}
            OffloadArch::Nvptx(sm) if has_runtime(NVPTX_TRIPLE) => targets.nvptx.push(*sm),
            OffloadArch::Amdgcn(id) if has_runtime(AMDGCN_TRIPLE) => targets.amdgcn.push(*id),
            OffloadArch::Nvptx(_) | OffloadArch::Amdgcn(_) => {
                skipped.push((arch.to_string(), device_runtime(arch.triple())));
            }
        }
    }
    if !skipped.is_empty() {
        let names: Vec<&str> = skipped.iter().map(|(name, _)| name.as_str()).collect();
        let mut missing: Vec<&str> = Vec::new();
        for (_, lib) in &skipped {
            if !missing.contains(lib) {
                missing.push(lib);
            }
        }
        env.warn(&format!(
            "OpenMP C++ sources are not offloaded to {}: LLVM {}'s OpenMP device runtime for \
             them ({}) is not in {} (Debian ships none); their target regions run on the \
             host CPU device ({host}) instead",
            names.join(", "),
            offload_toolchain::LLVM_MAJOR,
            missing.join(", "),
            runtime_dir.display(),
        ));
    }
    targets
}

/// LLVM's library directory, holding the offload runtime: the sibling `lib` of LLVM 22's binary
/// directory, checked to hold `libomptarget.so` and `libomp.so`.
pub fn runtime_dir(env: &Env) -> Result<PathBuf> {
    let lookup = |name: &str| env.get(name).map(Into::into);
    let bin = offload_toolchain::llvm_bin_dir_with(&lookup);
    let dir = bin.parent().map(|p| p.join("lib")).unwrap_or_default();
    let missing: Vec<&str> = ["libomptarget.so", "libomp.so"]
        .into_iter()
        .filter(|lib| !dir.join(lib).is_file())
        .collect();
    if missing.is_empty() {
        return Ok(dir);
    }
    let major = offload_toolchain::LLVM_MAJOR;
    Err(Error::Prerequisite(format!(
        "OpenMP C++ sources need LLVM {major}'s offload runtime, and {} is not in {} (the \
         library directory beside LLVM's binary directory {}). Fix: `apt-get install \
         libomp-{major}-dev liboffload-{major}-dev`",
        missing.join(" and "),
        dir.display(),
        bin.display(),
    )))
}

/// Compiles `sources` with `-fopenmp` for the host and the offload targets `archs` allows,
/// and builds the library. `package` names it.
pub fn build(
    env: &Env,
    clang: &Clang,
    sources: &[&Source],
    archs: &[OffloadArch],
    options: &Options,
    out_dir: &Path,
    package: &str,
) -> Result<OpenmpLibrary> {
    let host = crate::arch::host_triple();
    let machine = offload_format::triple::linux_gnu_triple(std::env::consts::ARCH);
    if host != machine {
        return Err(Error::Prerequisite(format!(
            "OpenMP C++ sources are built for the machine the build runs on ({machine}), whose \
             offload runtime is installed, not for {host}"
        )));
    }
    let runtime_dir = runtime_dir(env)?;
    let targets = offload_targets(env, host, archs, &runtime_dir);
    let mut objects = Vec::with_capacity(sources.len());
    let mut watch: Vec<PathBuf> = Vec::new();
    for source in sources {
        let (object, deps) = compile(env, clang, source, &targets, options, out_dir)?;
        objects.push(object);
        super::source::extend_unique(&mut watch, deps);
    }
    let link_name = link_name(package);
    let merged = out_dir.join("offload-src").join(format!("{link_name}.o"));
    relocatable_link(env, clang, &targets, &objects, &runtime_dir, &merged)?;

    let mut object = std::fs::read(&merged).io("reading", &merged)?;
    retain_offload_entries(&mut object).map_err(|reason| Error::BadImage {
        path: merged.clone(),
        reason,
    })?;
    super::source::write_static_library(
        &out_dir.join(format!("lib{link_name}.a")),
        &[offload_format::archive::ArchiveMember {
            name: format!("{link_name}.o"),
            data: object.into(),
        }],
    )?;
    Ok(OpenmpLibrary {
        dir: out_dir.to_owned(),
        link_name,
        runtime_dir,
        watch,
    })
}

/// Compiles one source to an object whose `.llvm.offloading` section holds its device code.
/// Returns the object and the files it was compiled from (the source first).
fn compile(
    env: &Env,
    clang: &Clang,
    source: &Source,
    targets: &Targets,
    options: &Options,
    out_dir: &Path,
) -> Result<(PathBuf, Vec<PathBuf>)> {
    let dir = super::source::work_dir(out_dir, source);
    std::fs::create_dir_all(&dir).io("creating directory", &dir)?;
    let object = dir.join(format!("{}.o", source.module()));
    let depfile = dir.join(format!("{}.d", source.module()));
    let tmp = temp_file_beside(&object).io("creating a temporary file beside", &object)?;
    let mut cmd = Command::new(&clang.path);
    cmd.args(targets.clang_args())
        .args(["-O2", "-fPIC"])
        .args(options.clang_args())
        .arg("-MMD")
        .arg("-MF")
        .arg(&depfile)
        .args(["-c", "-o"])
        .arg(&*tmp)
        .args(["-x", "c++"])
        .arg(&source.path);
    super::source::run_clang(env, &mut cmd, source, &targets.describe())?;
    tmp.persist(&object).io("renaming into place", &object)?;
    let text = std::fs::read_to_string(&depfile).io("reading", &depfile)?;
    let mut deps = vec![source.path.clone()];
    super::source::extend_unique(&mut deps, super::depfile::prerequisites(&text));
    Ok((object, deps))
}

/// The libraries the device code of the host target links against, as the host program's own
/// link would give them: the OpenMP runtime, the C++ library and libm (`--as-needed`, so an
/// image records only those it uses).
fn host_device_link_args(host: &str, runtime_dir: &Path) -> Vec<OsString> {
    let mut search = OsString::from("-L");
    search.push(runtime_dir);
    let per_target = format!("-Xoffload-linker-{host}");
    [
        OsString::from("--as-needed"),
        search,
        "-lomp".into(),
        "-lstdc++".into(),
        "-lm".into(),
    ]
    .into_iter()
    .flat_map(|arg| [OsString::from(&per_target), arg])
    .collect()
}

/// `clang -fopenmp -fopenmp-targets=… -r objects -o merged`: clang's linker wrapper links each
/// target's device code, wraps the images with their registration and merges all into one
/// relocatable object.
fn relocatable_link(
    env: &Env,
    clang: &Clang,
    targets: &Targets,
    objects: &[PathBuf],
    runtime_dir: &Path,
    merged: &Path,
) -> Result<()> {
    let tmp = temp_file_beside(merged).io("creating a temporary file beside", merged)?;
    let mut cmd = Command::new(&clang.path);
    cmd.args(targets.clang_args())
        .arg("-r")
        .args(objects)
        .args(host_device_link_args(&targets.host, runtime_dir))
        .arg("-o")
        .arg(&*tmp);
    if env.verbose() {
        eprintln!("offload-build: running {}", CommandLine::of(&cmd));
    }
    command::run(&mut cmd)?;
    tmp.persist(merged).io("renaming into place", merged)?;
    Ok(())
}

/// The prefix of the sections holding the offload entries (`__tgt_offload_entry`), which the
/// registration finds through `__start_<section>`/`__stop_<section>`.
const OFFLOAD_ENTRIES_SECTION: &[u8] = b"llvm_offload_entries";

/// Marks the offload-entry sections of a 64-bit ELF object `SHF_GNU_RETAIN`, returning how many
/// it marked. rustc links with `--gc-sections`, and its default linker (lld) keeps a section
/// that is referenced only through `__start_`/`__stop_` symbols just when the section says so;
/// clang's links do not collect sections, so clang does not mark them.
pub fn retain_offload_entries(object: &mut [u8]) -> std::result::Result<usize, String> {
    use object::Endianness;
    use object::elf::{FileHeader64, SHF_GNU_RETAIN};
    use object::read::elf::{FileHeader, SectionHeader};

    let header = FileHeader64::<Endianness>::parse(&*object)
        .map_err(|e| format!("not a 64-bit ELF object: {e}"))?;
    let endian = header.endian().map_err(|e| e.to_string())?;
    let table = usize::try_from(header.e_shoff(endian)).map_err(|e| e.to_string())?;
    let entry_size = usize::from(header.e_shentsize(endian));
    let sections = header
        .sections(endian, &*object)
        .map_err(|e| e.to_string())?;
    let mut patches = Vec::new();
    for (index, section) in sections.iter().enumerate() {
        let name = sections
            .section_name(endian, section)
            .map_err(|e| e.to_string())?;
        if name.starts_with(OFFLOAD_ENTRIES_SECTION) {
            let flags = section.sh_flags(endian) | u64::from(SHF_GNU_RETAIN);
            // `sh_flags` follows the 4-byte `sh_name` and `sh_type` in an `Elf64_Shdr`.
            let at = table + index * entry_size + 8;
            let bytes = if endian == Endianness::Little {
                flags.to_le_bytes()
            } else {
                flags.to_be_bytes()
            };
            patches.push((at, bytes));
        }
    }
    for (at, bytes) in &patches {
        object
            .get_mut(*at..*at + 8)
            .ok_or("a section header lies past the end")?
            .copy_from_slice(bytes);
    }
    Ok(patches.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sm(name: &str) -> Sm {
        Sm::parse_offload_arch(name).unwrap()
    }

    #[test]
    fn host_only_targets_name_the_host_triple_twice() {
        let targets = Targets {
            host: "x86_64-unknown-linux-gnu".to_owned(),
            nvptx: Vec::new(),
            amdgcn: Vec::new(),
        };
        assert_eq!(
            targets.clang_args(),
            [
                "--target=x86_64-unknown-linux-gnu",
                "-fopenmp",
                "-fopenmp-targets=x86_64-unknown-linux-gnu",
            ]
        );
        assert_eq!(targets.describe(), "x86_64-unknown-linux-gnu");
    }

    #[test]
    fn gpu_targets_get_their_archs_through_xopenmp_target() {
        let id = offload_format::TargetId::parse("gfx90a:xnack+").unwrap();
        let targets = Targets {
            host: "x86_64-unknown-linux-gnu".to_owned(),
            nvptx: vec![sm("sm_80"), sm("sm_90")],
            amdgcn: vec![AmdTargetId::from_target_id(&id).unwrap()],
        };
        assert_eq!(
            targets.clang_args(),
            [
                "--target=x86_64-unknown-linux-gnu",
                "-fopenmp",
                "-fopenmp-targets=x86_64-unknown-linux-gnu,nvptx64-nvidia-cuda,amdgcn-amd-amdhsa",
                "-Xopenmp-target=nvptx64-nvidia-cuda",
                "--offload-arch=sm_80,sm_90",
                "-Xopenmp-target=amdgcn-amd-amdhsa",
                "--offload-arch=gfx90a:xnack+",
            ]
        );
        assert_eq!(
            targets.describe(),
            "x86_64-unknown-linux-gnu, sm_80, sm_90, gfx90a:xnack+"
        );
    }

    #[test]
    fn gpu_archs_without_a_device_runtime_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let archs = crate::arch::parse_list("sm_80,gfx90a,host", "test").unwrap();
        let env = Env {
            build_script: false,
        };
        let targets = offload_targets(&env, "x86_64-unknown-linux-gnu", &archs, dir.path());
        assert!(targets.nvptx.is_empty() && targets.amdgcn.is_empty());

        std::fs::write(dir.path().join("libomptarget-nvptx.bc"), b"").unwrap();
        let targets = offload_targets(&env, "x86_64-unknown-linux-gnu", &archs, dir.path());
        assert_eq!(targets.nvptx, [sm("sm_80")]);
        assert!(targets.amdgcn.is_empty());
    }

    #[test]
    fn device_link_libraries_go_to_the_host_target_only() {
        let args = host_device_link_args("x86_64-unknown-linux-gnu", Path::new("/llvm/lib"));
        let args: Vec<&str> = args.iter().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            args.chunks(2).map(|pair| pair[1]).collect::<Vec<_>>(),
            ["--as-needed", "-L/llvm/lib", "-lomp", "-lstdc++", "-lm"]
        );
        assert!(
            args.chunks(2)
                .all(|pair| pair[0] == "-Xoffload-linker-x86_64-unknown-linux-gnu")
        );
    }

    #[test]
    fn link_names_are_identifiers() {
        assert_eq!(link_name("openmp-cpp"), "offload_openmp_openmp_cpp");
    }
}
