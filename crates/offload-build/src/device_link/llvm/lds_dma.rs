//! AMD's direct loads from global memory to LDS, defined per image: offload-rt's
//! `kernel::pipeline` declares `__offload_has_lds_dma()` (whether the processor has them: the
//! CDNA processors, gfx908 to gfx950), `__offload_amdgpu_lds_dma_4(dst, src)` (a wavefront's
//! `global_load_lds_dword`: each lane's 4 bytes at its `src` into consecutive words from the
//! wavefront's one LDS address `dst`, no registers on the way) and
//! `__offload_amdgpu_lds_dma_wait()` (the wait for them before the barrier that publishes
//! them). offload-rt calls the loads only where the query says so, which the optimization
//! folds, so other processors never reach them; the wait is `s_waitcnt vmcnt(0)` where the
//! module loads directly to LDS at all, and nothing elsewhere (its copies are complete when
//! they return).

#![forbid(unsafe_code)]

use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::targets::TargetMachine;
use offload_format::abi::{AMDGPU_LDS_DMA_4, AMDGPU_LDS_DMA_WAIT, HAS_LDS_DMA};
use offload_format::target_id::{MatrixUnit, amdgpu_processor};

use super::common::{cstr, is_amdgpu};
use super::helpers::{is_declared, link_helpers};
use crate::device_link::error::Result;

/// `s_waitcnt` with `vmcnt(0)` and the other counters at their maxima, in gfx9's encoding
/// (`expcnt` bits 6:4, `lgkmcnt` bits 11:8, `vmcnt` bits 3:0 and 15:14).
const GFX9_WAIT_VMCNT_0: u32 = 0x0f70;

/// Whether `processor` loads from global memory directly to LDS: the CDNA processors, where
/// offload-rt's pipelines want it (gfx9's other processors have the instruction too, but no
/// matrix cores for the tiles it feeds).
pub fn has_lds_dma(processor: &str) -> bool {
    amdgpu_processor(processor)
        .is_some_and(|p| matches!(p.matrix_unit(), Some(MatrixUnit::Mfma { .. })))
}

/// The helpers' IR for a processor with direct loads (`dma`) or without, the wait real when
/// the module loads directly at all (`loads`).
fn helpers_ir(dma: bool, loads: bool) -> String {
    let mut ir = format!("define i1 @{HAS_LDS_DMA}() #0 {{\n  ret i1 {dma}\n}}\n");
    let wait = if dma && loads {
        format!("  call void @llvm.amdgcn.s.waitcnt(i32 {GFX9_WAIT_VMCNT_0})\n")
    } else {
        String::new()
    };
    ir.push_str(&format!(
        "define void @{AMDGPU_LDS_DMA_WAIT}() #0 {{\n{wait}  ret void\n}}\n"
    ));
    if dma {
        ir.push_str(&format!(
            "define void @{AMDGPU_LDS_DMA_4}(ptr %dst, ptr %src) #0 {{
  %d = addrspacecast ptr %dst to ptr addrspace(3)
  %s = addrspacecast ptr %src to ptr addrspace(1)
  call void @llvm.amdgcn.global.load.lds(ptr addrspace(1) %s, ptr addrspace(3) %d, i32 4, i32 0, i32 0)
  ret void
}}
declare void @llvm.amdgcn.global.load.lds(ptr addrspace(1), ptr addrspace(3), i32 immarg, i32 immarg, i32 immarg)
"
        ));
    }
    ir.push_str("declare void @llvm.amdgcn.s.waitcnt(i32 immarg)\n");
    ir
}

/// Defines the direct-load helpers an AMD `module` declares for the processor of `machine`.
pub(super) fn link_lds_dma_helpers<'ctx>(
    context: &'ctx Context,
    module: &Module<'ctx>,
    machine: &TargetMachine,
) -> Result<()> {
    if !is_amdgpu(module) {
        return Ok(());
    }
    let dma = has_lds_dma(&cstr(&machine.get_cpu()));
    let loads = is_declared(module, AMDGPU_LDS_DMA_4);
    let mut names = vec![HAS_LDS_DMA, AMDGPU_LDS_DMA_WAIT];
    if dma {
        names.push(AMDGPU_LDS_DMA_4);
    }
    let ir = format!(
        "{}attributes #0 = {{ alwaysinline convergent nounwind }}\n",
        helpers_ir(dma, loads)
    );
    link_helpers(context, module, &names, &ir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cdna_processors_load_directly() {
        for p in ["gfx908", "gfx90a", "gfx942", "gfx950"] {
            assert!(has_lds_dma(p), "{p}");
        }
        for p in ["gfx900", "gfx1030", "gfx1100", "sm_80"] {
            assert!(!has_lds_dma(p), "{p}");
        }
    }

    /// Both forms of the helpers parse and define their names.
    #[test]
    fn every_helper_is_defined_in_ir_that_parses() {
        let all = [HAS_LDS_DMA, AMDGPU_LDS_DMA_WAIT, AMDGPU_LDS_DMA_4].map(str::to_owned);
        super::super::helpers::assert_defines("direct loads", &all, &helpers_ir(true, true));
        super::super::helpers::assert_defines("direct loads", &all[..2], &helpers_ir(false, false));
    }
}
