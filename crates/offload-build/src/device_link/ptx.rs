//! PTX: ISA versions per `sm_XX`, `ptxas`, and readers for PTX text and `ptxas -v`.

use std::path::PathBuf;
use std::process::Command;

use super::{Error, Result, io_err};
use crate::command::run as run_command;

/// The PTX ISA version (`78` for 7.8) the device link targets for `sm`: what clang-22 emits
/// with CUDA 11.8 (7.8), raised where an architecture needs a newer ISA.
/// Architecture-specific variants (`sm_90a`) need PTX 8.0.
pub fn ptx_isa_version(sm: u32, arch_specific: bool) -> u32 {
    let needed = match sm {
        0..=90 => 78,
        91..=99 => 80,
        100..=119 => 86,
        _ => 87,
    };
    if arch_specific {
        needed.max(80)
    } else {
        needed
    }
}

/// Splits `sm_90a` into its number and whether it is the architecture-specific variant.
pub fn parse_sm(arch: &str) -> Result<(u32, bool)> {
    let invalid = || Error::InvalidTarget {
        target: arch.to_owned(),
        reason: "expected sm_<number>[a]",
    };
    let digits = arch.strip_prefix("sm_").ok_or_else(invalid)?;
    let (digits, arch_specific) = match digits.strip_suffix('a') {
        Some(d) => (d, true),
        None => (digits, false),
    };
    let sm: u32 = digits.parse().map_err(|_| invalid())?;
    if !(20..=1000).contains(&sm) || digits.starts_with('0') {
        return Err(invalid());
    }
    Ok((sm, arch_specific))
}

/// The LLVM feature string for `sm`, e.g. `+ptx78` for `sm_80`.
pub fn ptx_features(arch: &str) -> Result<String> {
    let (sm, arch_specific) = parse_sm(arch)?;
    Ok(format!("+ptx{}", ptx_isa_version(sm, arch_specific)))
}

/// One `.entry` of a PTX module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxKernelInfo {
    /// The kernel's name.
    pub name: String,
    /// The PTX type of each parameter, e.g. `.u32`, `.f32`, `.u64` (pointers are `.u64`).
    pub params: Vec<String>,
}

/// The kernels (`.entry` functions) of a PTX module with their parameter types.
pub fn ptx_kernel_names(ptx: &str) -> Vec<PtxKernelInfo> {
    let mut kernels: Vec<PtxKernelInfo> = Vec::new();
    let mut in_params = false;
    for line in ptx.lines() {
        let line = line.trim();
        let tokens: Vec<&str> = line.split_whitespace().collect();
        if let Some(pos) = tokens.iter().position(|t| *t == ".entry") {
            if let Some(rest) = tokens.get(pos + 1) {
                let name = rest.split('(').next().unwrap_or(rest);
                kernels.push(PtxKernelInfo {
                    name: name.to_owned(),
                    params: Vec::new(),
                });
                in_params = line.ends_with('(') || !line.contains(')');
            }
            continue;
        }
        if in_params {
            if tokens.first() == Some(&".param")
                && let (Some(ty), Some(kernel)) = (tokens.get(1), kernels.last_mut())
            {
                kernel.params.push((*ty).to_owned());
            }
            if line.starts_with(')') || line.ends_with(')') {
                in_params = false;
            }
        }
    }
    kernels
}

/// What `ptxas -v` reports for one kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PtxasKernelInfo {
    /// The kernel's name.
    pub name: String,
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes.
    pub shared_bytes: u64,
    /// Stack frame per thread, bytes.
    pub stack_bytes: u64,
    /// Spill stores, bytes.
    pub spill_store_bytes: u64,
    /// Spill loads, bytes.
    pub spill_load_bytes: u64,
}

fn number_before(text: &str, unit: &str) -> Option<u64> {
    let end = text.find(unit)?;
    text[..end].split_whitespace().last()?.parse().ok()
}

/// Parses `ptxas -v`'s report (its stderr) into one entry per kernel.
pub fn parse_ptxas_verbose(report: &str) -> Vec<PtxasKernelInfo> {
    let mut kernels: Vec<PtxasKernelInfo> = Vec::new();
    let mut current: Option<usize> = None;
    for line in report.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_owned();
            kernels.push(PtxasKernelInfo {
                name,
                ..PtxasKernelInfo::default()
            });
            current = Some(kernels.len() - 1);
        } else if line.contains("Function properties for ") {
            let name = line
                .split("Function properties for ")
                .nth(1)
                .unwrap_or_default()
                .trim();
            current = kernels.iter().position(|k| k.name == name);
        } else if let Some(kernel) = current.and_then(|i| kernels.get_mut(i)) {
            if line.contains("bytes stack frame") {
                kernel.stack_bytes = number_before(line, "bytes stack frame").unwrap_or(0);
                kernel.spill_store_bytes = number_before(line, "bytes spill stores").unwrap_or(0);
                kernel.spill_load_bytes = number_before(line, "bytes spill loads").unwrap_or(0);
            } else if line.contains("Used ") && line.contains(" registers") {
                kernel.registers = number_before(line, " registers")
                    .and_then(|n| u32::try_from(n).ok())
                    .unwrap_or(0);
                kernel.shared_bytes = number_before(line, "bytes smem").unwrap_or(0);
            }
        }
    }
    kernels
}

/// Where `ptxas` is: `$OFFLOAD_PTXAS`, else `PATH`, else the usual CUDA locations.
pub fn ptxas_path() -> Option<PathBuf> {
    super::find_tool(offload_toolchain::Tool::Ptxas).ok()
}

fn run_ptxas(ptx: &str, sm: &str, verbose: bool) -> Result<(Vec<u8>, String)> {
    let ptxas = super::find_tool(offload_toolchain::Tool::Ptxas)?;
    let dir = tempfile_dir()?;
    let input = dir.join(format!("image.{sm}.ptx"));
    let output = dir.join(format!("image.{sm}.cubin"));
    let result = (|| {
        std::fs::write(&input, ptx).map_err(io_err("writing", &input))?;
        let mut cmd = Command::new(&ptxas);
        cmd.arg(format!("-arch={sm}")).arg("-O3");
        if verbose {
            cmd.arg("-v");
        }
        cmd.arg(&input).arg("-o").arg(&output);
        let out = run_command(&mut cmd)?;
        let cubin = std::fs::read(&output).map_err(io_err("reading", &output))?;
        Ok((cubin, String::from_utf8_lossy(&out.stderr).into_owned()))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn tempfile_dir() -> Result<PathBuf> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("offload-ptxas-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(io_err("creating", &dir))?;
    Ok(dir)
}

/// Assembles `ptx` into a cubin for `sm` (`sm_80`) with `ptxas`.
pub fn ptxas_assemble(ptx: &str, sm: &str) -> Result<Vec<u8>> {
    run_ptxas(ptx, sm, false).map(|(cubin, _)| cubin)
}

/// Assembles `ptx` for `sm` (`sm_80`) with `ptxas -v`: the cubin and the per-kernel resource
/// report.
pub fn ptxas_verbose(ptx: &str, sm: &str) -> Result<(Vec<u8>, Vec<PtxasKernelInfo>)> {
    let (cubin, report) = run_ptxas(ptx, sm, true)?;
    Ok((cubin, parse_ptxas_verbose(&report)))
}

/// Whether `bytes` look like a cubin (an ELF with `EM_CUDA`).
pub fn is_cubin(bytes: &[u8]) -> bool {
    bytes.len() > 20
        && bytes.starts_with(b"\x7fELF")
        && u16::from_le_bytes([bytes[18], bytes[19]]) == 190
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isa_versions_follow_clang_22() {
        assert_eq!(ptx_isa_version(70, false), 78);
        assert_eq!(ptx_isa_version(80, false), 78);
        assert_eq!(ptx_isa_version(90, false), 78);
        assert_eq!(ptx_isa_version(90, true), 80);
        assert_eq!(ptx_isa_version(100, false), 86);
    }

    #[test]
    fn sm_names() {
        assert_eq!(parse_sm("sm_80").unwrap(), (80, false));
        assert_eq!(parse_sm("sm_90a").unwrap(), (90, true));
        assert_eq!(ptx_features("sm_90a").unwrap(), "+ptx80");
        for bad in ["sm_", "80", "sm_x", "sm_08", "sm_5", "gfx90a"] {
            assert!(parse_sm(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn entries_and_params() {
        let ptx = "\
.version 7.8
.target sm_80
.address_size 64

.visible .entry saxpy(
\t.param .u32 saxpy_param_0,
\t.param .f32 saxpy_param_1,
\t.param .u64 .ptr .align 1 saxpy_param_2
)
{
\tret;
}
.entry empty()
{
}
";
        let k = ptx_kernel_names(ptx);
        assert_eq!(k.len(), 2);
        assert_eq!(k[0].name, "saxpy");
        assert_eq!(k[0].params, [".u32", ".f32", ".u64"]);
        assert_eq!(k[1].name, "empty");
        assert!(k[1].params.is_empty());
    }

    #[test]
    fn ptxas_report() {
        let report = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'block_sum' for 'sm_80'
ptxas info    : Function properties for block_sum
    0 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 12 registers, 2048 bytes smem, 376 bytes cmem[0]
ptxas info    : Compiling entry function 'saxpy' for 'sm_80'
ptxas info    : Function properties for saxpy
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, 372 bytes cmem[0]
";
        let k = parse_ptxas_verbose(report);
        assert_eq!(
            k[0],
            PtxasKernelInfo {
                name: "block_sum".into(),
                registers: 12,
                shared_bytes: 2048,
                stack_bytes: 0,
                spill_store_bytes: 4,
                spill_load_bytes: 8
            }
        );
        assert_eq!(k[1].registers, 8);
        assert_eq!(k[1].shared_bytes, 0);
        assert_eq!(k[1].stack_bytes, 16);
        assert!(parse_ptxas_verbose("garbage\n'''Used registers").is_empty());
    }
}
