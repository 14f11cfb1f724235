//! The warp-wide matrix multiply-accumulate of offload-rt's `kernel::matrix`, defined per
//! processor. offload-rt declares `__offload_mma_f16(a, b, c)` and `__offload_mma_bf16(a, b,
//! c)`: one warp's 16×16×16 product of its A and B fragments added to its accumulator
//! fragment, each passed by address (16 halves, 16 halves, 8 floats, of which each target uses
//! its own count in its own lane layout); `__offload_mma_m32n32k8_*` likewise for the 32×32×8
//! shape of `kernel::matrix::m32n32k8` (8 halves, 8 halves, 32 floats). The link defines them
//! in IR over the processor's matrix instructions (`mma.sync` m16n8k16 and m16n8k8 on NVIDIA,
//! MFMA on CDNA, WMMA on RDNA 3), always inlined, so the fragments stay in registers; a
//! processor without such instructions, without bf16 ones or without the shape, is refused
//! here with [`LinkError::MatrixUnsupported`] rather than by LLVM's instruction selection.

#![forbid(unsafe_code)]

use std::collections::{BTreeSet, HashSet};

use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::targets::TargetMachine;
use offload_format::abi::{MMA_BF16, MMA_F16, MMA_M32N32K8_BF16, MMA_M32N32K8_F16};
use offload_format::target_id::{MatrixUnit, Sm, amdgpu_processor};

use super::common::{cstr, is_nvptx};
use super::helpers::{is_declared, link_helpers};
use super::ir;
use super::ir::call_conv::{AMDGPU_KERNEL as AMDGPU_KERNEL_CC, PTX_KERNEL as PTX_KERNEL_CC};
use crate::device_link::error::{LinkError, Result};

/// The tile shapes of `kernel::matrix`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// 16×16×16, every matrix unit.
    M16N16K16,
    /// 32×32×8: CDNA's `v_mfma_f32_32x32x8*`, eight m16n8k8 `mma.sync` on NVIDIA.
    M32N32K8,
}

/// The helpers, the input type each multiplies and its shape.
const MATRIX_HELPERS: &[(&str, &str, Shape)] = &[
    (MMA_F16, "f16", Shape::M16N16K16),
    (MMA_BF16, "bf16", Shape::M16N16K16),
    (MMA_M32N32K8_F16, "f16", Shape::M32N32K8),
    (MMA_M32N32K8_BF16, "bf16", Shape::M32N32K8),
];

/// The matrix unit of the processor `cpu` (`sm_80`, `gfx90a`) of an NVIDIA or AMD link.
fn matrix_unit(nvptx: bool, cpu: &str) -> Option<MatrixUnit> {
    if nvptx {
        Sm::parse(cpu).ok()?.matrix_unit()
    } else {
        amdgpu_processor(cpu)?.matrix_unit()
    }
}

/// Defines the matrix helpers `module` declares for the processor of `machine`; refuses a
/// processor without the instructions they need.
pub(super) fn link_matrix_helpers<'ctx>(
    context: &'ctx Context,
    module: &Module<'ctx>,
    machine: &TargetMachine,
) -> Result<()> {
    let used: Vec<(&str, &str, Shape)> = MATRIX_HELPERS
        .iter()
        .copied()
        .filter(|(name, _, _)| is_declared(module, name))
        .collect();
    if used.is_empty() {
        return Ok(());
    }
    let cpu = cstr(&machine.get_cpu());
    let nvptx = is_nvptx(module);
    let unit = matrix_unit(nvptx, &cpu);
    let mut ir = String::new();
    let mut defined = Vec::new();
    for &(name, input, shape) in &used {
        if unit == Some(MatrixUnit::Wmma) && shape == Shape::M32N32K8 {
            // offload-rt's gfx11 path is four 16×16×16 products, chosen by the wavefront size
            // the optimization folds: the helper is left to `refuse_unfolded_shapes`.
            continue;
        }
        defined.push(name);
        let body = match (unit, shape) {
            (Some(MatrixUnit::MmaSync), Shape::M16N16K16) => nvptx_body(input),
            (Some(MatrixUnit::MmaSync), Shape::M32N32K8) => nvptx_m32n32k8_body(input),
            (Some(unit @ MatrixUnit::Mfma { .. }), _) if unit.has_bf16() || input == "f16" => {
                mfma_body(input, shape)
            }
            (Some(MatrixUnit::Wmma), Shape::M16N16K16) => wmma_body(input),
            _ => {
                return Err(LinkError::MatrixUnsupported {
                    arch: cpu,
                    input,
                    kernels: kernels_reaching(module, name).join(", "),
                    reason: match unit {
                        Some(_) => "its MFMA instructions take f16 inputs, not bf16 (gfx90a and \
                                    later have bf16 ones)"
                            .to_owned(),
                        None if nvptx => {
                            "NVIDIA's m16n8k16 `mma.sync` needs sm_80 or later".to_owned()
                        }
                        None => "AMD's matrix instructions are on gfx908, gfx90a, gfx94x, \
                                 gfx950 (MFMA) and gfx11 (WMMA)"
                            .to_owned(),
                    },
                });
            }
        };
        ir.push_str(&format!(
            "define void @{name}(ptr %a, ptr %b, ptr %c) #0 {{\nentry:\n{body}  ret void\n}}\n"
        ));
    }
    ir.push_str(&declarations(unit));
    ir.push_str("attributes #0 = { alwaysinline convergent nounwind }\n");
    link_helpers(context, module, &defined, &ir)
}

/// After optimization: refuses a gfx11 link whose kernels still reach the 32×32×8 helpers,
/// which offload-rt's own layout choice leaves unreached there (WMMA has no such shape).
pub(super) fn refuse_unfolded_shapes(module: &Module<'_>, machine: &TargetMachine) -> Result<()> {
    for &(name, input, shape) in MATRIX_HELPERS {
        if shape != Shape::M32N32K8 || !is_declared(module, name) {
            continue;
        }
        let kernels = kernels_reaching(module, name);
        if kernels.is_empty() {
            continue;
        }
        return Err(LinkError::MatrixUnsupported {
            arch: cstr(&machine.get_cpu()),
            input,
            kernels: kernels.join(", "),
            reason: "its WMMA instructions are 16×16×16 only, which `kernel::matrix::m32n32k8` \
                     runs as four products on wavefronts of 32"
                .to_owned(),
        });
    }
    Ok(())
}

/// The kernels of `module` that call function `name`, directly or through other functions.
pub(super) fn kernels_reaching(module: &Module<'_>, name: &str) -> Vec<String> {
    let Some(start) = module.get_function(name) else {
        return Vec::new();
    };
    let mut seen = HashSet::new();
    let mut kernels = BTreeSet::new();
    let mut stack = vec![ir::Module::new(module).wrap_function(start)];
    while let Some(function) = stack.pop() {
        if !seen.insert(function) {
            continue;
        }
        // The use list, its users and their parents are read only, while nothing changes the
        // module.
        let cc = function.call_conv();
        if cc == PTX_KERNEL_CC || cc == AMDGPU_KERNEL_CC {
            kernels.insert(String::from_utf8_lossy(function.name()).into_owned());
        }
        for use_ in function.uses() {
            if let Some(instruction) = use_.user().as_instruction() {
                stack.push(instruction.function());
            }
        }
    }
    kernels.into_iter().collect()
}

/// The intrinsics the bodies of `unit` call.
fn declarations(unit: Option<MatrixUnit>) -> String {
    match unit {
        Some(MatrixUnit::MmaSync) => "\
declare { float, float, float, float } @llvm.nvvm.mma.m16n8k16.row.col.f32.f32(<2 x half>, <2 x half>, <2 x half>, <2 x half>, <2 x half>, <2 x half>, float, float, float, float)
declare { float, float, float, float } @llvm.nvvm.mma.m16n8k16.row.col.bf16(i32, i32, i32, i32, i32, i32, float, float, float, float)
declare { float, float, float, float } @llvm.nvvm.mma.m16n8k8.row.col.f32.f32(<2 x half>, <2 x half>, <2 x half>, float, float, float, float)
declare { float, float, float, float } @llvm.nvvm.mma.m16n8k8.row.col.bf16(i32, i32, i32, float, float, float, float)
"
        .to_owned(),
        Some(MatrixUnit::Mfma { .. }) => "\
declare <4 x float> @llvm.amdgcn.mfma.f32.16x16x16f16(<4 x half>, <4 x half>, <4 x float>, i32 immarg, i32 immarg, i32 immarg)
declare <4 x float> @llvm.amdgcn.mfma.f32.16x16x16bf16.1k(<4 x i16>, <4 x i16>, <4 x float>, i32 immarg, i32 immarg, i32 immarg)
declare <16 x float> @llvm.amdgcn.mfma.f32.32x32x8f16(<4 x half>, <4 x half>, <16 x float>, i32 immarg, i32 immarg, i32 immarg)
declare <16 x float> @llvm.amdgcn.mfma.f32.32x32x8bf16.1k(<4 x i16>, <4 x i16>, <16 x float>, i32 immarg, i32 immarg, i32 immarg)
"
        .to_owned(),
        Some(MatrixUnit::Wmma) => "\
declare <8 x float> @llvm.amdgcn.wmma.f32.16x16x16.f16(<16 x half>, <16 x half>, <8 x float>)
declare <8 x float> @llvm.amdgcn.wmma.f32.16x16x16.bf16(<16 x i16>, <16 x i16>, <8 x float>)
"
        .to_owned(),
        None => String::new(),
    }
}

/// NVIDIA: the 16×16 tile as two m16n8k16 products sharing A. A lane's A fragment is its 8
/// halves in 4 registers of 2; its B fragment 4 halves per 8-column half of the tile; its
/// accumulator 4 floats per half (PTX ISA, "Matrix Fragments for mma.m16n8k16").
fn nvptx_body(input: &str) -> String {
    let (reg, intrinsic) = match input {
        "f16" => ("<2 x half>", "llvm.nvvm.mma.m16n8k16.row.col.f32.f32"),
        _ => ("i32", "llvm.nvvm.mma.m16n8k16.row.col.bf16"),
    };
    let mut ir = String::new();
    for (fragment, count) in [("a", 4), ("b", 4)] {
        for i in 0..count {
            ir.push_str(&format!(
                "  %p{fragment}{i} = getelementptr i8, ptr %{fragment}, i64 {off}\n  \
                 %{fragment}{i} = load {reg}, ptr %p{fragment}{i}, align 4\n",
                off = 4 * i
            ));
        }
    }
    for i in 0..8 {
        ir.push_str(&format!(
            "  %pc{i} = getelementptr i8, ptr %c, i64 {off}\n  %c{i} = load float, ptr %pc{i}, align 4\n",
            off = 4 * i
        ));
    }
    for half in 0..2 {
        let (b0, b1, c) = (2 * half, 2 * half + 1, 4 * half);
        ir.push_str(&format!(
            "  %d{half} = call {{ float, float, float, float }} @{intrinsic}({reg} %a0, {reg} %a1, \
             {reg} %a2, {reg} %a3, {reg} %b{b0}, {reg} %b{b1}, float %c{c}, float %c{c1}, \
             float %c{c2}, float %c{c3})\n",
            c1 = c + 1,
            c2 = c + 2,
            c3 = c + 3
        ));
        for j in 0..4 {
            ir.push_str(&format!(
                "  %e{half}{j} = extractvalue {{ float, float, float, float }} %d{half}, {j}\n  \
                 store float %e{half}{j}, ptr %pc{k}, align 4\n",
                k = c + j
            ));
        }
    }
    ir
}

/// The products as NVIDIA's `mma.sync` m16n8k8, eight per 32×32×8 tile: A's two 16-row
/// halves, each 2 registers of 2 halves a lane (rows `g`, `g + 8`, `k` `2t`, `2t + 1`, with `g =
/// lane / 4`, `t = lane % 4`); B's four 8-column quarters, each 1 register (`k` `2t`, `2t + 1`,
/// column `g`); the accumulator's 4 floats for each (half, quarter), half-major (PTX ISA,
/// "Matrix Fragments for mma.m16n8k8").
fn nvptx_m32n32k8_body(input: &str) -> String {
    let (reg, intrinsic) = match input {
        "f16" => ("<2 x half>", "llvm.nvvm.mma.m16n8k8.row.col.f32.f32"),
        _ => ("i32", "llvm.nvvm.mma.m16n8k8.row.col.bf16"),
    };
    let mut ir = String::new();
    for fragment in ["a", "b"] {
        for i in 0..4 {
            ir.push_str(&format!(
                "  %p{fragment}{i} = getelementptr i8, ptr %{fragment}, i64 {off}\n  \
                 %{fragment}{i} = load {reg}, ptr %p{fragment}{i}, align 4\n",
                off = 4 * i
            ));
        }
    }
    for i in 0..32 {
        ir.push_str(&format!(
            "  %pc{i} = getelementptr i8, ptr %c, i64 {off}\n  %c{i} = load float, ptr %pc{i}, align 4\n",
            off = 4 * i
        ));
    }
    for half in 0..2 {
        for quarter in 0..4 {
            let (a0, a1, c) = (2 * half, 2 * half + 1, 4 * (4 * half + quarter));
            let d = format!("d{half}{quarter}");
            ir.push_str(&format!(
                "  %{d} = call {{ float, float, float, float }} @{intrinsic}({reg} %a{a0}, \
                 {reg} %a{a1}, {reg} %b{quarter}, float %c{c}, float %c{c1}, float %c{c2}, \
                 float %c{c3})\n",
                c1 = c + 1,
                c2 = c + 2,
                c3 = c + 3
            ));
            for j in 0..4 {
                ir.push_str(&format!(
                    "  %e{d}{j} = extractvalue {{ float, float, float, float }} %{d}, {j}\n  \
                     store float %e{d}{j}, ptr %pc{k}, align 4\n",
                    k = c + j
                ));
            }
        }
    }
    ir
}

/// AMD CDNA on a 64-lane wavefront. 16×16×16: one `v_mfma_f32_16x16x16`, each lane holding 4
/// halves of A (row `lane % 16`, columns `4 * (lane / 16)..+4`), 4 of B (the transposed
/// places) and 4 floats of the accumulator (rows `4 * (lane / 16)..+4`, column `lane % 16`).
/// 32×32×8: one `v_mfma_f32_32x32x8`, 4 halves of A (row `lane % 32`, columns `4 * (lane /
/// 32)..+4`), 4 of B, 16 floats (rows `8 * (i / 4) + 4 * (lane / 32) + i % 4`, column `lane %
/// 32`).
fn mfma_body(input: &str, shape: Shape) -> String {
    let (instruction, floats) = match shape {
        Shape::M16N16K16 => ("16x16x16", 4),
        Shape::M32N32K8 => ("32x32x8", 16),
    };
    match input {
        "f16" => amd_body(
            "<4 x half>",
            &format!("llvm.amdgcn.mfma.f32.{instruction}f16"),
            floats,
            ", i32 0, i32 0, i32 0",
        ),
        _ => amd_body(
            "<4 x i16>",
            &format!("llvm.amdgcn.mfma.f32.{instruction}bf16.1k"),
            floats,
            ", i32 0, i32 0, i32 0",
        ),
    }
}

/// AMD RDNA 3: one `v_wmma_f32_16x16x16` on a 32-lane wavefront, each lane holding a whole
/// row of A and column of B (16 halves each, lanes 16–31 repeating lanes 0–15) and 8 floats
/// of the accumulator (rows `2 * i + lane / 16`, column `lane % 16`).
fn wmma_body(input: &str) -> String {
    match input {
        "f16" => amd_body("<16 x half>", "llvm.amdgcn.wmma.f32.16x16x16.f16", 8, ""),
        _ => amd_body("<16 x i16>", "llvm.amdgcn.wmma.f32.16x16x16.bf16", 8, ""),
    }
}

/// One AMD matrix instruction over whole vectors: A and B as `vector`, the accumulator as
/// `floats` floats, `extra` the instruction's constant operands.
fn amd_body(vector: &str, intrinsic: &str, floats: usize, extra: &str) -> String {
    let acc = format!("<{floats} x float>");
    format!(
        "  %va = load {vector}, ptr %a, align 4\n  %vb = load {vector}, ptr %b, align 4\n  \
         %vc = load {acc}, ptr %c, align 4\n  \
         %d = call {acc} @{intrinsic}({vector} %va, {vector} %vb, {acc} %vc{extra})\n  \
         store {acc} %d, ptr %c, align 4\n"
    )
}
