//! PTX: ISA versions per `sm_XX`, and `ptxas`: what it can assemble, and assembling with it.

use std::path::PathBuf;
use std::process::Command;

use offload_format::image::ptx::parse_ptxas_verbose;
use offload_format::{DeviceFamily, Sm};

use super::error::{LinkError, Result, io_err};
use crate::command::run as run_command;

/// The ISA the device link targets at least: what clang-22 emits with CUDA 11.8, the newest
/// ISA that toolkit's `ptxas` reads.
const PTX_ISA_FLOOR: u32 = 78;

/// The PTX ISA version (`78` for 7.8) the device link targets for `arch` (`sm_80`, `sm_90a`,
/// `sm_120f`): 7.8, raised to the minimum LLVM 22 accepts for the processor
/// ([`offload_format::target_id::NvptxProcessor::min_ptx_isa`]). Asking LLVM for less makes it
/// abort the process, so an unknown processor is refused instead of guessed.
pub fn ptx_isa_version(arch: &str) -> Result<u32> {
    let invalid = |source| LinkError::BadTargetName {
        target: arch.to_owned(),
        source,
    };
    let processor = Sm::parse(arch)
        .and_then(Sm::llvm_processor)
        .map_err(invalid)?;
    Ok(processor.min_ptx_isa.max(PTX_ISA_FLOOR))
}

/// The LLVM feature string for `arch`, e.g. `+ptx78` for `sm_80`.
pub fn ptx_features(arch: &str) -> Result<String> {
    Ok(format!("+ptx{}", ptx_isa_version(arch)?))
}

/// What `ptxas -v` reports for one kernel; the build records it on the image
/// (`offload.kernel-resources`).
pub use offload_format::offload_binary::PtxasKernelInfo;

/// Where `ptxas` is: `$OFFLOAD_PTXAS`, else `PATH`, else the usual CUDA locations.
pub fn ptxas_path() -> Option<PathBuf> {
    super::common::find_tool(offload_toolchain::Tool::Ptxas).ok()
}

/// The `ptxas` found and what it can assemble, for the build and for a `doctor` report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxasInfo {
    /// The executable.
    pub path: PathBuf,
    /// The CUDA release it comes from, `11.8` (from `ptxas --version`).
    pub version: String,
    /// The real architectures it assembles for, in its own order (`sm_35` … `sm_90`): the
    /// `sm_*` values `ptxas --help` allows for `--gpu-name`.
    pub sms: Vec<String>,
}

impl PtxasInfo {
    /// Whether this `ptxas` can make a cubin for `sm`. An empty list means the help text was
    /// not understood; then ptxas itself is left to decide.
    pub fn knows(&self, sm: &str) -> bool {
        self.sms.is_empty() || self.sms.iter().any(|s| s == sm)
    }
}

/// The CUDA release in `ptxas --version`'s `Cuda compilation tools, release 11.8, V11.8.89`.
pub fn parse_ptxas_version(text: &str) -> Option<String> {
    let rest = text.split("release ").nth(1)?;
    let version: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    (!version.is_empty()).then_some(version)
}

/// The `sm_*` values `ptxas --help` lists as allowed for `--gpu-name`.
pub fn parse_ptxas_gpu_names(help: &str) -> Vec<String> {
    let Some(start) = help.find("--gpu-name") else {
        return Vec::new();
    };
    let section = &help[start..];
    // The option's paragraph ends where the next option's line starts.
    let end = section[1..].find("\n--").map_or(section.len(), |i| i + 1);
    let section = &section[..end];
    let allowed = section
        .split("Default value")
        .next()
        .unwrap_or(section)
        .split("Allowed values")
        .nth(1)
        .unwrap_or_default();
    allowed
        .split('\'')
        .skip(1)
        .step_by(2)
        .filter(|name| DeviceFamily::of_gpu_arch_name(name) == Some(DeviceFamily::Nvidia))
        .map(str::to_owned)
        .collect()
}

fn query_ptxas(path: &std::path::Path) -> Result<PtxasInfo> {
    let version_out = run_command(Command::new(path).arg("--version"))?;
    let help_out = run_command(Command::new(path).arg("--help"))?;
    let version_text = String::from_utf8_lossy(&version_out.stdout);
    Ok(PtxasInfo {
        path: path.to_owned(),
        version: parse_ptxas_version(&version_text).unwrap_or_else(|| "(unknown version)".into()),
        sms: parse_ptxas_gpu_names(&String::from_utf8_lossy(&help_out.stdout)),
    })
}

/// What `ptxas` at `path` is; asked once per executable and process.
fn ptxas_info(path: &std::path::Path) -> Result<PtxasInfo> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, PtxasInfo>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(info) = cache.lock().ok().and_then(|c| c.get(path).cloned()) {
        return Ok(info);
    }
    let info = query_ptxas(path)?;
    if let Ok(mut c) = cache.lock() {
        c.insert(path.to_owned(), info.clone());
    }
    Ok(info)
}

/// The `ptxas` found (as [`ptxas_path`]) with its CUDA release and the `sm_XX` it supports;
/// `None` when there is none.
pub fn ptxas_supported_sms() -> Result<Option<PtxasInfo>> {
    ptxas_path().map(|path| ptxas_info(&path)).transpose()
}

/// Every `ptxas` installed, in the order they are looked for (the one `OFFLOAD_PTXAS` names
/// alone when it is set), with what each assembles.
pub fn installed_ptxas() -> Result<Vec<PtxasInfo>> {
    let env = crate::env::Env::detect();
    let Ok(paths) =
        offload_toolchain::Tool::Ptxas.find_all_with(&|name| env.get(name).map(Into::into))
    else {
        return Ok(Vec::new());
    };
    paths.iter().map(|path| ptxas_info(path)).collect()
}

/// The `ptxas` that assembles `sm`: the first installed that knows it. The distribution's
/// CUDA 11.8 comes first, so the images of the architectures it knows keep its code; an
/// arch-specific `sm_90a` (and Blackwell's) goes to the newer CUDA the set-up installs beside
/// it.
pub fn ptxas_for(sm: &str) -> Result<Option<PtxasInfo>> {
    Ok(installed_ptxas()?.into_iter().find(|info| info.knows(sm)))
}

/// How the cubin of an `sm_XX` will be made.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CubinPlan {
    /// `ptxas` knows the architecture.
    Assemble,
    /// No `ptxas` is installed: the image is PTX only.
    NoPtxas,
    /// The `ptxas` found does not know the architecture: the image is PTX only.
    Unsupported(PtxasInfo),
}

impl CubinPlan {
    /// What stands in the way of a cubin for `sm`, in words; `None` when one will be made.
    pub fn obstacle(&self, sm: &str) -> Option<String> {
        match self {
            Self::Assemble => None,
            Self::NoPtxas => Some(format!(
                "no `ptxas` was found to assemble {sm} (install a CUDA toolkit, or set \
                 OFFLOAD_PTXAS to its ptxas)"
            )),
            Self::Unsupported(info) => Some(format!(
                "`{}` (CUDA {}) does not know {sm}; it knows {}. A CUDA toolkit that knows {sm} \
                 (`cargo offload setup --system` installs CUDA 12.9's under {}, or point \
                 OFFLOAD_PTXAS at its ptxas) would make a cubin",
                info.path.display(),
                info.version,
                info.sms.join(", "),
                offload_toolchain::CUDA_PIP_PREFIX
            )),
        }
    }
}

/// Whether an installed `ptxas` can assemble `sm` ([`ptxas_for`]).
pub fn cubin_plan(sm: &str) -> Result<CubinPlan> {
    let installed = installed_ptxas()?;
    Ok(match installed.iter().find(|info| info.knows(sm)) {
        Some(_) => CubinPlan::Assemble,
        None => match installed.into_iter().next() {
            None => CubinPlan::NoPtxas,
            Some(first) => CubinPlan::Unsupported(first),
        },
    })
}

/// Decides, before anything is built, what an `sm` that will get no cubin means: an error
/// under `OFFLOAD_REQUIRE_CUBIN`, else one warning when the `ptxas` found does not know it
/// (without any `ptxas`, PTX only is the documented default and stays quiet).
pub(crate) fn check_cubin(env: &crate::env::Env, owner: &str, sm: &str) -> Result<()> {
    // Read first, so that cargo reruns the build script when it changes.
    let require = env.require_cubin();
    let plan = cubin_plan(sm)?;
    let Some(obstacle) = plan.obstacle(sm) else {
        return Ok(());
    };
    if require {
        return Err(LinkError::CubinRequired {
            sm: sm.to_owned(),
            reason: obstacle,
        });
    }
    if matches!(plan, CubinPlan::Unsupported(_)) {
        env.warn(&format!(
            "{}: {sm} gets PTX only, JIT-compiled by the CUDA driver on the GPU: {obstacle}; \
             OFFLOAD_REQUIRE_CUBIN=1 makes this an error",
            owner
        ));
    }
    Ok(())
}

fn run_ptxas(ptx: &str, sm: &str, verbose: bool) -> Result<(Vec<u8>, String)> {
    let ptxas = match ptxas_for(sm)? {
        Some(info) => info.path,
        None => super::common::find_tool(offload_toolchain::Tool::Ptxas)?,
    };
    let dir = super::common::scratch_dir("ptxas")?;
    let input = dir.path().join(format!("image.{sm}.ptx"));
    let output = dir.path().join(format!("image.{sm}.cubin"));
    let result = (|| {
        std::fs::write(&input, with_file_stamps(ptx).as_ref())
            .map_err(io_err("writing", &input))?;
        let mut cmd = Command::new(&ptxas);
        cmd.arg(format!("-arch={sm}")).arg("-O3");
        if has_line_directives(ptx) {
            // Without it ptxas drops the `.loc` directives: no source lines in the cubin for
            // a debugger, a profiler or a sanitizer.
            cmd.arg("-lineinfo");
        }
        if verbose {
            cmd.arg("-v");
        }
        cmd.arg(&input).arg("-o").arg(&output);
        let out = run_command(&mut cmd)?;
        let cubin = std::fs::read(&output).map_err(io_err("reading", &output))?;
        Ok((cubin, String::from_utf8_lossy(&out.stderr).into_owned()))
    })();
    drop(dir);
    result
}

/// `ptx` with a modification time and size on each `.file` directive that has none: ptxas
/// `-lineinfo` looks them up on disk for such a file and writes them into the cubin's line
/// table, so the cubin would change with a checkout or a `touch` of the sources. The time is
/// 1 (0 would mean "look it up") and the size 0; a host object's DWARF line table records no
/// time either.
fn with_file_stamps(ptx: &str) -> std::borrow::Cow<'_, str> {
    let unstamped = |line: &str| {
        line.trim_start()
            .strip_prefix(".file")
            .is_some_and(|rest| rest.trim_end().ends_with('"'))
    };
    if !ptx.lines().any(unstamped) {
        return ptx.into();
    }
    let mut stamped = String::with_capacity(ptx.len() + 64);
    for line in ptx.split_inclusive('\n') {
        let body = line.trim_end();
        stamped.push_str(body);
        if unstamped(body) {
            stamped.push_str(", 1, 0");
        }
        stamped.push_str(&line[body.len()..]);
    }
    stamped.into()
}

/// Whether `ptx` carries source line directives (`.loc`), which a dev build's kernels have.
pub fn has_line_directives(ptx: &str) -> bool {
    ptx.lines().any(|l| l.trim_start().starts_with(".loc\t"))
}

/// Assembles `ptx` into a cubin for `sm` (`sm_80`) with `ptxas`.
pub fn ptxas_assemble(ptx: &str, sm: &str) -> Result<Vec<u8>> {
    run_ptxas(ptx, sm, false).map(|(cubin, _)| cubin)
}

/// Assembles `ptx` for `sm` (`sm_80`) with `ptxas -v`: the cubin and the per-kernel resource
/// report. The build assembles this way, once per image and `sm`, and records the report.
pub fn ptxas_verbose(ptx: &str, sm: &str) -> Result<(Vec<u8>, Vec<PtxasKernelInfo>)> {
    let (cubin, report) = run_ptxas(ptx, sm, true)?;
    Ok((cubin, parse_ptxas_verbose(&report)))
}

pub use offload_format::image::is_cubin;

#[cfg(test)]
mod tests {
    use super::*;

    /// The `.version` LLVM emits for `cpu` with `features`, from the LLVM this crate links.
    #[cfg(feature = "llvm")]
    fn llvm_ptx_version(cpu: &str, features: &str) -> String {
        use inkwell::OptimizationLevel;
        use inkwell::context::Context;
        use inkwell::targets::{
            CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetTriple,
        };
        Target::initialize_nvptx(&InitializationConfig::default());
        let triple = TargetTriple::create("nvptx64-nvidia-cuda");
        let machine = Target::from_triple(&triple)
            .unwrap()
            .create_target_machine(
                &triple,
                cpu,
                features,
                OptimizationLevel::None,
                RelocMode::PIC,
                CodeModel::Default,
            )
            .unwrap();
        let context = Context::create();
        let module = context.create_module("isa");
        module.set_triple(&triple);
        let ptx = machine
            .write_to_memory_buffer(&module, FileType::Assembly)
            .unwrap();
        let ptx = String::from_utf8_lossy(ptx.as_slice()).into_owned();
        let target = ptx
            .lines()
            .find_map(|l| l.strip_prefix(".target "))
            .unwrap_or_default();
        assert_eq!(target, cpu, "LLVM knows `{cpu}`:\n{ptx}");
        ptx.lines()
            .find_map(|l| l.strip_prefix(".version "))
            .unwrap_or_default()
            .to_owned()
    }

    fn isa_text(isa: u32) -> String {
        format!("{}.{}", isa / 10, isa % 10)
    }

    /// The table against the linked LLVM: each row is the `.version` LLVM chooses for the
    /// processor on its own, and every architecture the build accepts is in the table and
    /// gets the version the link asks for.
    #[cfg(feature = "llvm")]
    #[test]
    fn isa_table_matches_the_linked_llvm() {
        for p in offload_format::target_id::NVPTX_PROCESSORS {
            let (sm, min) = (p.name, p.min_ptx_isa);
            assert_eq!(
                llvm_ptx_version(sm, ""),
                isa_text(min),
                "{sm}: LLVM's minimum"
            );
            let ours = ptx_isa_version(sm).unwrap();
            assert_eq!(ours, min.max(PTX_ISA_FLOOR), "{sm}");
            assert_eq!(
                llvm_ptx_version(sm, &ptx_features(sm).unwrap()),
                isa_text(ours),
                "{sm}: the link's features"
            );
        }
        for sm in offload_format::target_id::nvidia_offload_archs() {
            assert!(
                ptx_isa_version(sm).is_ok(),
                "{sm} is accepted but has no ISA"
            );
        }
    }

    /// The table lists exactly the processors `llc` (the same LLVM release) lists, so a
    /// processor LLVM adds or drops is noticed.
    #[test]
    fn isa_table_lists_every_llvm_processor() {
        let Some(llc) = offload_toolchain::Tool::Llc.for_test() else {
            return;
        };
        let out = Command::new(llc)
            .args(["-march=nvptx64", "-mcpu=help"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        let cpus = text
            .split("Available CPUs for this target:")
            .nth(1)
            .and_then(|t| t.split("Available features").next())
            .unwrap_or_default();
        let mut listed: Vec<&str> = cpus
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|w| DeviceFamily::of_gpu_arch_name(w) == Some(DeviceFamily::Nvidia))
            .collect();
        let mut ours: Vec<&str> = offload_format::target_id::NVPTX_PROCESSORS
            .iter()
            .map(|p| p.name)
            .collect();
        listed.sort_unstable();
        ours.sort_unstable();
        assert_eq!(ours, listed, "llc -mcpu=help:\n{text}");
    }

    #[test]
    fn isa_versions() {
        let table = [
            ("sm_70", 78),
            ("sm_80", 78),
            ("sm_88", 90),
            ("sm_90", 78),
            ("sm_90a", 80),
            ("sm_100", 86),
            ("sm_100f", 88),
            ("sm_103", 88),
            ("sm_110", 90),
            ("sm_120", 87),
            ("sm_120a", 87),
            ("sm_121", 88),
        ];
        for (sm, isa) in table {
            assert_eq!(ptx_isa_version(sm).unwrap(), isa, "{sm}");
        }
        for unknown in ["sm_130", "sm_90f", "sm_99", "sm_80a"] {
            assert!(
                matches!(
                    ptx_isa_version(unknown),
                    Err(LinkError::BadTargetName { .. })
                ),
                "{unknown}"
            );
        }
    }

    #[test]
    fn sm_names() {
        assert_eq!(ptx_features("sm_90a").unwrap(), "+ptx80");
        assert_eq!(ptx_features("sm_120").unwrap(), "+ptx87");
        for bad in [
            "sm_", "80", "sm_x", "sm_08", "sm_5", "gfx90a", "sm_a", "sm_90af", "sm_9é",
        ] {
            assert!(ptx_isa_version(bad).is_err(), "{bad}");
        }
    }

    /// `ptxas --help` of CUDA 11.8, abridged around `--gpu-name`.
    const PTXAS_11_8_HELP: &str = "\
--fmad <true|false>                                 (-fmad)
        Enables (disables) the contraction.
        Default value:  true.

--gpu-name <gpu name>                               (-arch)
        Specify name of NVIDIA GPU to generate code for. This option also takes virtual
        compute architectures, in which case code generation is suppressed. This
        can be used for parsing only.
        Allowed values for this option:  'compute_35','compute_37','compute_50',
        'compute_52','compute_53','compute_60','compute_61','compute_62','compute_70',
        'compute_72','compute_75','compute_80','compute_86','compute_87','compute_89',
        'compute_90','lto_35','lto_37','lto_50','lto_52','lto_53','lto_60','lto_61',
        'lto_62','lto_70','lto_72','lto_75','lto_80','lto_86','lto_87','lto_89',
        'lto_90','sm_35','sm_37','sm_50','sm_52','sm_53','sm_60','sm_61','sm_62',
        'sm_70','sm_72','sm_75','sm_80','sm_86','sm_87','sm_89','sm_90'.
        Default value:  'sm_52'.

--help                                              (-h)
        Print this help information on this tool.
        Allowed values for this option:  'sm_999'.
";

    #[test]
    fn ptxas_help_and_version() {
        let sms = parse_ptxas_gpu_names(PTXAS_11_8_HELP);
        assert_eq!(sms.first().map(String::as_str), Some("sm_35"));
        assert_eq!(sms.last().map(String::as_str), Some("sm_90"));
        assert_eq!(sms.len(), 16, "{sms:?}");
        let info = PtxasInfo {
            path: "/usr/bin/ptxas".into(),
            version: "11.8".into(),
            sms,
        };
        assert!(info.knows("sm_80") && info.knows("sm_90"));
        for sm in ["sm_90a", "sm_100", "sm_120", "sm_30"] {
            assert!(!info.knows(sm), "{sm}");
        }
        let why = CubinPlan::Unsupported(info).obstacle("sm_120").unwrap();
        for part in [
            "/usr/bin/ptxas",
            "CUDA 11.8",
            "sm_120",
            "sm_35",
            "sm_90",
            "OFFLOAD_PTXAS",
        ] {
            assert!(why.contains(part), "`{part}` missing in: {why}");
        }
        assert_eq!(CubinPlan::Assemble.obstacle("sm_80"), None);
        let why = CubinPlan::NoPtxas.obstacle("sm_80").unwrap();
        assert!(
            why.contains("no `ptxas`") && why.contains("OFFLOAD_PTXAS"),
            "{why}"
        );

        // A newer toolkit's spelling: family and architecture-specific names in one list.
        let newer = "--gpu-name <gpu name> (-arch)\n        Allowed values for this option: \
                     'compute_100','sm_100','sm_100a','sm_100f','sm_120',\n        'sm_120a'.\n";
        assert_eq!(
            parse_ptxas_gpu_names(newer),
            ["sm_100", "sm_100a", "sm_100f", "sm_120", "sm_120a"]
        );
        // Not understood: nothing listed, so ptxas is left to decide.
        assert!(parse_ptxas_gpu_names("usage: ptxas [options] file").is_empty());
        assert!(
            PtxasInfo {
                path: "ptxas".into(),
                version: "12.9".into(),
                sms: Vec::new()
            }
            .knows("sm_120")
        );

        let version = "ptxas: NVIDIA (R) Ptx optimizing assembler\n\
                       Cuda compilation tools, release 11.8, V11.8.89\n\
                       Build cuda_11.8.r11.8/compiler.31833905_0\n";
        assert_eq!(parse_ptxas_version(version).as_deref(), Some("11.8"));
        assert_eq!(parse_ptxas_version("release , V"), None);
        assert_eq!(parse_ptxas_version(""), None);
    }

    /// What the installed `ptxas` say they know is what they assemble: an sm on the first one's
    /// list makes a cubin, one only a later one knows (CUDA 12.9's `sm_90a`) is assembled by
    /// that one, and the first sm LLVM knows beyond every list is refused.
    #[test]
    fn installed_ptxas_assembles_what_it_lists() {
        if offload_toolchain::Tool::Ptxas.for_test().is_none() {
            return;
        }
        let info = ptxas_supported_sms().unwrap().unwrap();
        assert!(!info.version.starts_with('('), "{info:?}");
        assert!(info.knows("sm_80"), "{info:?}");
        let ptx = |sm: &str| {
            format!(
                ".version {}\n.target {sm}\n.address_size 64\n.visible .entry k()\n{{\nret;\n}}\n",
                isa_text(ptx_isa_version(sm).unwrap())
            )
        };
        assert!(is_cubin(&ptxas_assemble(&ptx("sm_80"), "sm_80").unwrap()));
        // A real error in the PTX, on an sm ptxas knows, is an error with its message and
        // the command.
        let bad = ptx("sm_80").replace("ret;", "bogus.u32 %r1;\nret;");
        let err = ptxas_assemble(&bad, "sm_80").unwrap_err().to_string();
        for part in ["-arch=sm_80", "image.sm_80.ptx", "'bogus'"] {
            assert!(err.contains(part), "`{part}` missing in: {err}");
        }
        // An sm the first ptxas does not know goes to the first installed one that does.
        let installed = installed_ptxas().unwrap();
        assert_eq!(installed.first(), Some(&info));
        for sm in ["sm_90a", "sm_100", "sm_120"] {
            if !info.knows(sm) && installed.iter().any(|i| i.knows(sm)) {
                assert_eq!(cubin_plan(sm).unwrap(), CubinPlan::Assemble, "{sm}");
                assert!(is_cubin(&ptxas_assemble(&ptx(sm), sm).unwrap()), "{sm}");
                assert!(ptxas_for(sm).unwrap().is_some_and(|i| i.path != info.path));
            }
        }
        let Some(unknown) = ["sm_90a", "sm_100", "sm_120", "sm_121"]
            .into_iter()
            .find(|sm| installed.iter().all(|i| !i.knows(sm)))
        else {
            println!(
                "skipped: the installed ptxas ({}) know every sm tried",
                installed
                    .iter()
                    .map(|i| format!("CUDA {}", i.version))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            return;
        };
        let err = ptxas_assemble(&ptx(unknown), unknown).unwrap_err();
        assert!(matches!(err, LinkError::Command(_)), "{unknown}: {err}");
        assert_eq!(
            cubin_plan(unknown).unwrap(),
            CubinPlan::Unsupported(info.clone())
        );
        assert_eq!(cubin_plan("sm_80").unwrap(), CubinPlan::Assemble);
    }

    /// Each `.file` without a time and size gets them; stamped ones, other lines and the
    /// line ends are left as they are.
    #[test]
    fn file_directives_get_a_fixed_stamp() {
        let ptx = ".version 7.8\n\t.file\t1 \"/k/src/lib.rs\"\r\n.file 2 \"/k/a b.rs\", 5, 9\n\
                   \t.loc\t1 4 5\n.file 3 \"/k/\\\"q\\\".rs\"";
        assert_eq!(
            with_file_stamps(ptx),
            ".version 7.8\n\t.file\t1 \"/k/src/lib.rs\", 1, 0\r\n.file 2 \"/k/a b.rs\", 5, 9\n\
             \t.loc\t1 4 5\n.file 3 \"/k/\\\"q\\\".rs\", 1, 0"
        );
        let plain = ".version 7.8\n.target sm_80\n";
        assert!(matches!(with_file_stamps(plain), std::borrow::Cow::Borrowed(p) if p == plain));
    }

    /// A cubin with line information does not depend on when its source was last written.
    #[test]
    fn cubins_do_not_depend_on_source_times() {
        if offload_toolchain::Tool::Ptxas.for_test().is_none() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("lib.rs");
        std::fs::write(&source, "// a kernel\n").unwrap();
        let ptx = format!(
            ".version 7.8\n.target sm_80\n.address_size 64\n.file\t1 \"{}\"\n\
             .visible .entry k(.param .u64 p)\n{{\n.reg .b64 %rd<3>;\n.loc\t1 1 1\n\
             ld.param.u64 %rd1, [p];\ncvta.to.global.u64 %rd2, %rd1;\n.loc\t1 2 1\n\
             st.global.u32 [%rd2], 7;\nret;\n}}\n",
            source.display()
        );
        let touched = |seconds| {
            let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds);
            let file = std::fs::File::options().write(true).open(&source).unwrap();
            file.set_modified(time).unwrap();
            ptxas_assemble(&ptx, "sm_80").unwrap()
        };
        assert_eq!(touched(1_000_000_000), touched(1_700_000_000));
    }
}
