//! Hopper's asynchronous units, defined per image: offload-rt's `kernel::mbarrier`,
//! `kernel::tma`, `kernel::cluster` and `kernel::wgmma` declare `__offload_mbarrier_*`,
//! `__offload_tma_*`, `__offload_cluster_*`, `__offload_wgmma_*` and
//! `__offload_setmaxnreg_*`, `kernel::matrix`'s `stmatrix_*` declare `__offload_stmatrix_*`,
//! and `kernel::has_tma()`/`has_wgmma()`/`has_stmatrix()` declare
//! `__offload_has_tma`/`__offload_has_wgmma`/`__offload_has_stmatrix`.
//!
//! The queries are constants of every GPU image, so a kernel's Hopper branch folds away on the
//! other targets. The units are defined, over LLVM's intrinsics or inline PTX (Rust cannot
//! name the shared window the instructions take; inline PTX addresses it in 32 bits, as CUDA
//! C does), where the image has them: the memory
//! barriers' byte counts, the tensor memory accelerator and clusters on NVIDIA sm_90 and later
//! with PTX ISA 8.0 (an `sm_90a` image; CUDA 11.8's `ptxas`, which assembles plain `sm_90`,
//! reads PTX 7.8 at most), `wgmma` and `setmaxnreg` on `sm_90a` alone, `stmatrix` on sm_90 and
//! later (PTX ISA 7.8, so plain `sm_90` images too). After optimization a
//! kernel that still reaches a unit its image lacks is refused with
//! [`LinkError::FeatureUnsupported`], named.

#![forbid(unsafe_code)]

use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::targets::TargetMachine;
use offload_format::abi::{
    CLUSTER_ARRIVE, CLUSTER_BLOCK_RANK, CLUSTER_BLOCKS, CLUSTER_MAP_SHARED, CLUSTER_WAIT,
    FENCE_PROXY_ASYNC, HAS_STMATRIX, HAS_TMA, HAS_WGMMA, MBARRIER_ARRIVE,
    MBARRIER_ARRIVE_EXPECT_TX, MBARRIER_EXPECT_TX, MBARRIER_FENCE_INIT, MBARRIER_INIT,
    MBARRIER_TRY_WAIT_PARITY, SETMAXNREG_PREFIX, SHARED_ADDRESS, STMATRIX_PREFIX, TMA_LOAD_2D,
    TMA_LOAD_2D_MULTICAST, TMA_PREFETCH, TMA_STORE_2D, TMA_STORE_COMMIT, TMA_STORE_WAIT_PREFIX,
    WGMMA_COMMIT, WGMMA_FENCE, WGMMA_PREFIX, WGMMA_WAIT_PREFIX,
};
use offload_format::target_id::{Sm, SmSuffix};

use super::common::{cstr, is_amdgpu, is_nvptx, shared_address};
use super::helpers::{declared, link_helpers};
use super::matrix::kernels_reaching;
use crate::device_link::error::{LinkError, Result};

/// Deepest wait offload-rt asks for (`wgmma.wait_group`, `cp.async.bulk.wait_group`).
const MAX_WAIT_GROUP: u32 = 7;

/// What an image has of Hopper's units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Units {
    /// `mbarrier` byte counts, TMA, clusters: sm_90 and later, PTX ISA 8.0.
    tma: bool,
    /// `wgmma`, `setmaxnreg`: `sm_90a`.
    wgmma: bool,
    /// `stmatrix`: sm_90 and later, PTX ISA 7.8.
    stmatrix: bool,
}

impl Units {
    fn of(module: &Module<'_>, machine: &TargetMachine) -> Self {
        if !is_nvptx(module) {
            return Self {
                tma: false,
                wgmma: false,
                stmatrix: false,
            };
        }
        let cpu = cstr(&machine.get_cpu());
        let features = cstr(machine.get_feature_string());
        let isa = features
            .split(',')
            .filter_map(|f| f.strip_prefix("+ptx")?.parse::<u32>().ok())
            .max()
            .unwrap_or(0);
        let sm = Sm::parse(&cpu).ok();
        let number = sm.map_or(0, Sm::number);
        Self {
            tma: number >= 90 && isa >= 80,
            wgmma: number == 90
                && sm.and_then(Sm::suffix) == Some(SmSuffix::ArchSpecific)
                && isa >= 80,
            stmatrix: number >= 90 && isa >= 78,
        }
    }

    /// Each family with whether the image has it.
    fn families(self) -> [(Family, bool); 3] {
        [
            (tma_family(), self.tma),
            (wgmma_family(), self.wgmma),
            (stmatrix_family(), self.stmatrix),
        ]
    }
}

/// One kind of unit: the feature as an error names it, its helpers and their IR.
struct Family {
    feature: &'static str,
    /// What an NVIDIA image needs for it, as the refusal says.
    needs: &'static str,
    /// The query a kernel branches on for another path.
    query: &'static str,
    names: Vec<String>,
    ir: String,
}

/// `mbarrier`, the tensor memory accelerator and clusters.
fn tma_family() -> Family {
    let (w, dst, bar, src) = (
        shared_address("w", "s"),
        shared_address("dst", "d"),
        shared_address("bar", "b"),
        shared_address("src", "s"),
    );
    let mut ir = format!(
        "declare void @llvm.nvvm.barrier.cluster.arrive()
declare void @llvm.nvvm.barrier.cluster.wait()
declare i32 @llvm.nvvm.read.ptx.sreg.cluster.ctarank()
declare i32 @llvm.nvvm.read.ptx.sreg.cluster.nctarank()
declare ptr @llvm.nvvm.mapa(ptr, i32)
define void @{MBARRIER_INIT}(ptr %w, i32 %n) #0 {{
{w}  call void asm sideeffect \"mbarrier.init.shared.b64 [$0], $1;\", \"r,r,~{{memory}}\"(i32 %s, i32 %n)
  ret void
}}
define i64 @{MBARRIER_ARRIVE}(ptr %w) #0 {{
{w}  %r = call i64 asm sideeffect \"mbarrier.arrive.shared.b64 $0, [$1];\", \"=l,r,~{{memory}}\"(i32 %s)
  ret i64 %r
}}
define i64 @{MBARRIER_ARRIVE_EXPECT_TX}(ptr %w, i32 %bytes) #0 {{
{w}  %r = call i64 asm sideeffect \"mbarrier.arrive.expect_tx.shared::cta.b64 $0, [$1], $2;\", \"=l,r,r,~{{memory}}\"(i32 %s, i32 %bytes)
  ret i64 %r
}}
define void @{MBARRIER_EXPECT_TX}(ptr %w, i32 %bytes) #0 {{
{w}  call void asm sideeffect \"mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [$0], $1;\", \"r,r,~{{memory}}\"(i32 %s, i32 %bytes)
  ret void
}}
define i32 @{MBARRIER_TRY_WAIT_PARITY}(ptr %w, i32 %parity) #0 {{
{w}  %r = call i32 asm sideeffect \"{{\\0A\\09.reg .pred p;\\0A\\09mbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2;\\0A\\09selp.u32 $0, 1, 0, p;\\0A\\09}}\", \"=r,r,r,~{{memory}}\"(i32 %s, i32 %parity)
  ret i32 %r
}}
define void @{MBARRIER_FENCE_INIT}() #0 {{
  call void asm sideeffect \"fence.mbarrier_init.release.cluster;\", \"~{{memory}}\"()
  ret void
}}
define void @{TMA_LOAD_2D}(ptr %dst, ptr %map, ptr %bar, i32 %c0, i32 %c1) #0 {{
{dst}{bar}  call void asm sideeffect \"cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], [$1, {{$3, $4}}], [$2];\", \"r,l,r,r,r,~{{memory}}\"(i32 %d, ptr %map, i32 %b, i32 %c0, i32 %c1)
  ret void
}}
define void @{TMA_LOAD_2D_MULTICAST}(ptr %dst, ptr %map, ptr %bar, i32 %c0, i32 %c1, i16 %mask) #0 {{
{dst}{bar}  call void asm sideeffect \"cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [$0], [$1, {{$3, $4}}], [$2], $5;\", \"r,l,r,r,r,h,~{{memory}}\"(i32 %d, ptr %map, i32 %b, i32 %c0, i32 %c1, i16 %mask)
  ret void
}}
define void @{TMA_STORE_2D}(ptr %map, ptr %src, i32 %c0, i32 %c1) #0 {{
{src}  call void asm sideeffect \"cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [$0, {{$2, $3}}], [$1];\", \"l,r,r,r,~{{memory}}\"(ptr %map, i32 %s, i32 %c0, i32 %c1)
  ret void
}}
define void @{TMA_STORE_COMMIT}() #0 {{
  call void asm sideeffect \"cp.async.bulk.commit_group;\", \"~{{memory}}\"()
  ret void
}}
define void @{TMA_PREFETCH}(ptr %map) #0 {{
  call void asm sideeffect \"prefetch.tensormap [$0];\", \"l,~{{memory}}\"(ptr %map)
  ret void
}}
define void @{FENCE_PROXY_ASYNC}() #0 {{
  call void asm sideeffect \"fence.proxy.async.shared::cta;\", \"~{{memory}}\"()
  ret void
}}
define void @{CLUSTER_ARRIVE}() #0 {{
  call void @llvm.nvvm.barrier.cluster.arrive()
  ret void
}}
define void @{CLUSTER_WAIT}() #0 {{
  call void @llvm.nvvm.barrier.cluster.wait()
  ret void
}}
define i32 @{CLUSTER_BLOCK_RANK}() #0 {{
  %r = call i32 @llvm.nvvm.read.ptx.sreg.cluster.ctarank()
  ret i32 %r
}}
define i32 @{CLUSTER_BLOCKS}() #0 {{
  %r = call i32 @llvm.nvvm.read.ptx.sreg.cluster.nctarank()
  ret i32 %r
}}
define ptr @{CLUSTER_MAP_SHARED}(ptr %p, i32 %rank) #0 {{
  %r = call ptr @llvm.nvvm.mapa(ptr %p, i32 %rank)
  ret ptr %r
}}
",
    );
    let mut names: Vec<String> = [
        MBARRIER_INIT,
        MBARRIER_ARRIVE,
        MBARRIER_ARRIVE_EXPECT_TX,
        MBARRIER_EXPECT_TX,
        MBARRIER_TRY_WAIT_PARITY,
        MBARRIER_FENCE_INIT,
        TMA_LOAD_2D,
        TMA_LOAD_2D_MULTICAST,
        TMA_STORE_2D,
        TMA_STORE_COMMIT,
        TMA_PREFETCH,
        FENCE_PROXY_ASYNC,
        CLUSTER_ARRIVE,
        CLUSTER_WAIT,
        CLUSTER_BLOCK_RANK,
        CLUSTER_BLOCKS,
        CLUSTER_MAP_SHARED,
    ]
    .map(str::to_owned)
    .to_vec();
    for n in 0..=MAX_WAIT_GROUP {
        names.push(format!("{TMA_STORE_WAIT_PREFIX}{n}"));
        ir.push_str(&format!(
            "define void @{TMA_STORE_WAIT_PREFIX}{n}() #0 {{
  call void asm sideeffect \"cp.async.bulk.wait_group.read {n};\", \"~{{memory}}\"()
  ret void
}}
"
        ));
    }
    Family {
        needs: "an `sm_90a` image (`--offload-arch sm_90a`: PTX ISA 8.0 on sm_90)",
        query: "kernel::has_tma()",
        feature: "Hopper's memory barriers, tensor memory accelerator and clusters \
                  (`offload_rt::kernel::{mbarrier, tma, cluster}`)",
        names,
        ir,
    }
}

/// The `wgmma` helper of one shape, input type and pair of transposes: the accumulator read
/// from `%acc`, multiplied into in registers, written back (SROA keeps it in registers once
/// inlined).
fn wgmma_helper(n: u32, ty: &str, trans_a: bool, trans_b: bool) -> (String, String) {
    let floats = n / 2;
    let name = format!(
        "{WGMMA_PREFIX}m64n{n}k16_{ty}_{}{}",
        if trans_a { 't' } else { 'n' },
        if trans_b { 't' } else { 'n' }
    );
    let ret = format!("{{ {} }}", vec!["float"; floats as usize].join(", "));
    let mut body = String::new();
    let mut args = Vec::new();
    for i in 0..floats {
        body.push_str(&format!(
            "  %p{i} = getelementptr float, ptr %acc, i64 {i}\n  %v{i} = load float, ptr %p{i}, align 4\n"
        ));
        args.push(format!("float %v{i}"));
    }
    let outputs: Vec<String> = (0..floats).map(|i| format!("${i}")).collect();
    let text = format!(
        "{{\\0A\\09.reg .pred p;\\0A\\09setp.ne.b32 p, ${scale}, 0;\\0A\\09wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ty}.{ty} {{{}}}, ${a}, ${b}, p, 1, 1, {ta}, {tb};\\0A\\09}}",
        outputs.join(", "),
        a = floats,
        b = floats + 1,
        scale = floats + 2,
        ta = u32::from(trans_a),
        tb = u32::from(trans_b),
    );
    let mut constraints: Vec<String> = vec!["=f".to_owned(); floats as usize];
    constraints.extend(["l".to_owned(), "l".to_owned(), "r".to_owned()]);
    constraints.extend((0..floats).map(|i| i.to_string()));
    constraints.push("~{memory}".to_owned());
    body.push_str(&format!(
        "  %r = call {ret} asm sideeffect \"{text}\", \"{}\"(i64 %a, i64 %b, i32 %scale, {})\n",
        constraints.join(","),
        args.join(", ")
    ));
    for i in 0..floats {
        body.push_str(&format!(
            "  %o{i} = extractvalue {ret} %r, {i}\n  store float %o{i}, ptr %p{i}, align 4\n"
        ));
    }
    let ir = format!(
        "define void @{name}(ptr %acc, i64 %a, i64 %b, i32 %scale) #0 {{\n{body}  ret void\n}}\n"
    );
    (name, ir)
}

/// `wgmma` and `setmaxnreg`.
fn wgmma_family() -> Family {
    let mut ir = format!(
        "declare void @llvm.nvvm.wgmma.fence.sync.aligned()
declare void @llvm.nvvm.wgmma.commit_group.sync.aligned()
declare void @llvm.nvvm.wgmma.wait_group.sync.aligned(i64 immarg)
declare void @llvm.nvvm.setmaxnreg.inc.sync.aligned.u32(i32 immarg)
declare void @llvm.nvvm.setmaxnreg.dec.sync.aligned.u32(i32 immarg)
define void @{WGMMA_FENCE}() #0 {{
  call void @llvm.nvvm.wgmma.fence.sync.aligned()
  ret void
}}
define void @{WGMMA_COMMIT}() #0 {{
  call void @llvm.nvvm.wgmma.commit_group.sync.aligned()
  ret void
}}
define i32 @{SHARED_ADDRESS}(ptr %p) #0 {{
  %s = addrspacecast ptr %p to ptr addrspace(3)
  %i = ptrtoint ptr addrspace(3) %s to i32
  ret i32 %i
}}
",
    );
    let mut names = vec![
        WGMMA_FENCE.to_owned(),
        WGMMA_COMMIT.to_owned(),
        SHARED_ADDRESS.to_owned(),
    ];
    for n in 0..=MAX_WAIT_GROUP {
        names.push(format!("{WGMMA_WAIT_PREFIX}{n}"));
        ir.push_str(&format!(
            "define void @{WGMMA_WAIT_PREFIX}{n}() #0 {{
  call void @llvm.nvvm.wgmma.wait_group.sync.aligned(i64 {n})
  ret void
}}
"
        ));
    }
    for regs in (24..=256).step_by(8) {
        for (way, intrinsic) in [("inc", "inc"), ("dec", "dec")] {
            names.push(format!("{SETMAXNREG_PREFIX}{way}_{regs}"));
            ir.push_str(&format!(
                "define void @{SETMAXNREG_PREFIX}{way}_{regs}() #0 {{
  call void @llvm.nvvm.setmaxnreg.{intrinsic}.sync.aligned.u32(i32 {regs})
  ret void
}}
"
            ));
        }
    }
    for n in [64, 128, 256] {
        for ty in ["f16", "bf16"] {
            for trans_a in [false, true] {
                for trans_b in [false, true] {
                    let (name, helper) = wgmma_helper(n, ty, trans_a, trans_b);
                    names.push(name);
                    ir.push_str(&helper);
                }
            }
        }
    }
    Family {
        needs: "an `sm_90a` image (`--offload-arch sm_90a`: `wgmma` and `setmaxnreg` on sm_90a \
                alone)",
        query: "kernel::has_wgmma()",
        feature: "warpgroup matrix multiplies (`wgmma`, `setmaxnreg`: \
                  `offload_rt::kernel::wgmma`)",
        names,
        ir,
    }
}

/// `stmatrix`: a warp's 8×8 matrices of 16-bit elements from the lanes' registers into shared
/// memory, `STMATRIX_PREFIX x<count>[_trans](dst, words)`.
fn stmatrix_family() -> Family {
    let mut ir = String::new();
    let mut names = Vec::new();
    for count in [1, 2, 4] {
        for trans in ["", ".trans"] {
            let name = format!("{STMATRIX_PREFIX}x{count}{}", trans.replace('.', "_"));
            let mut body = shared_address("dst", "d");
            let mut args = vec!["i32 %d".to_owned()];
            for i in 0..count {
                body.push_str(&format!(
                    "  %p{i} = getelementptr i32, ptr %words, i64 {i}\n  %w{i} = load i32, ptr %p{i}, align 4\n"
                ));
                args.push(format!("i32 %w{i}"));
            }
            let registers = (1..=count)
                .map(|i| format!("${i}"))
                .collect::<Vec<_>>()
                .join(", ");
            let constraints = vec!["r"; count + 1].join(",");
            ir.push_str(&format!(
                "define void @{name}(ptr %dst, ptr %words) #0 {{\n{body}  call void asm sideeffect \
                 \"stmatrix.sync.aligned.m8n8.x{count}{trans}.shared.b16 [$0], {{{registers}}};\", \
                 \"{constraints},~{{memory}}\"({}) #1\n  ret void\n}}\n",
                args.join(", ")
            ));
            names.push(name);
        }
    }
    // The stores' call sites: warp-wide, convergent as clang marks CUDA's inline assembly.
    ir.push_str("attributes #1 = { convergent nounwind }\n");
    Family {
        needs: "sm_90 or later",
        query: "kernel::has_stmatrix()",
        feature: "matrix stores (`stmatrix`, `offload_rt::kernel::matrix`)",
        names,
        ir,
    }
}

/// The IR of the queries `kernel::has_tma()`, `has_wgmma()` and `has_stmatrix()`, constants
/// of the image.
fn queries_ir(units: Units) -> String {
    format!(
        "define i1 @{HAS_TMA}() #0 {{\n  ret i1 {}\n}}\n\
         define i1 @{HAS_WGMMA}() #0 {{\n  ret i1 {}\n}}\n\
         define i1 @{HAS_STMATRIX}() #0 {{\n  ret i1 {}\n}}\n\
         attributes #0 = {{ alwaysinline nounwind }}\n",
        units.tma, units.wgmma, units.stmatrix
    )
}

const QUERIES: &[&str] = &[HAS_TMA, HAS_WGMMA, HAS_STMATRIX];

/// Defines the queries on every GPU image and the units the image has; what it lacks stays
/// declared, for [`refuse_missing_units`] to name once optimization has dropped the branches
/// the queries rule out.
pub(super) fn link_hopper_helpers<'ctx>(
    context: &'ctx Context,
    module: &Module<'ctx>,
    machine: &TargetMachine,
) -> Result<()> {
    if !is_nvptx(module) && !is_amdgpu(module) {
        return Ok(());
    }
    let units = Units::of(module, machine);
    link_helpers(context, module, QUERIES, &queries_ir(units))?;
    if units.wgmma {
        bound_register_handoffs(context, module, machine)?;
    }
    for (family, present) in units.families() {
        if !present {
            continue;
        }
        let declared = declared(module, &family.names);
        if declared.is_empty() {
            continue;
        }
        let ir = format!(
            "{}attributes #0 = {{ alwaysinline convergent nounwind }}\n",
            family.ir
        );
        link_helpers(context, module, &declared, &ir)?;
    }
    Ok(())
}

/// Gives each kernel that reaches `setmaxnreg` the one-block-per-multiprocessor bound
/// (`.minnctapersm 1`, CUDA's `__launch_bounds__(N, 1)`): without it, or without the kernel's
/// own `max_threads` (`.maxntid`), `ptxas` drops the instruction without a word. A kernel
/// without `max_threads` is refused, named.
fn bound_register_handoffs(
    context: &Context,
    module: &Module<'_>,
    machine: &TargetMachine,
) -> Result<()> {
    use inkwell::attributes::AttributeLoc;
    let mut kernels: Vec<String> = (24..=256)
        .step_by(8)
        .flat_map(|regs| ["inc", "dec"].map(|way| format!("{SETMAXNREG_PREFIX}{way}_{regs}")))
        .flat_map(|name| kernels_reaching(module, &name))
        .collect();
    kernels.sort();
    kernels.dedup();
    let mut unbounded = Vec::new();
    for name in &kernels {
        let Some(kernel) = module.get_function(name) else {
            continue;
        };
        if kernel
            .get_string_attribute(AttributeLoc::Function, "nvvm.maxntid")
            .is_none()
        {
            unbounded.push(name.clone());
            continue;
        }
        if kernel
            .get_string_attribute(AttributeLoc::Function, "nvvm.minctasm")
            .is_none()
        {
            kernel.add_attribute(
                AttributeLoc::Function,
                context.create_string_attribute("nvvm.minctasm", "1"),
            );
        }
    }
    if unbounded.is_empty() {
        return Ok(());
    }
    Err(LinkError::FeatureUnsupported {
        arch: cstr(&machine.get_cpu()),
        feature: "register hand-over between warpgroups (`setmaxnreg`, \
                  `offload_rt::kernel::wgmma::warpgroup_reg_alloc`/`_dealloc`)",
        kernels: unbounded.join(", "),
        reason: "`ptxas` keeps `setmaxnreg` only in a kernel with a launch bound: give each \
                 `#[kernel(max_threads = N)]`"
            .to_owned(),
    })
}

/// Refuses the kernels that, after optimization, still reach a unit their image lacks.
pub(super) fn refuse_missing_units(module: &Module<'_>, machine: &TargetMachine) -> Result<()> {
    if !is_nvptx(module) && !is_amdgpu(module) {
        return Ok(());
    }
    let units = Units::of(module, machine);
    let cpu = cstr(&machine.get_cpu());
    for (family, present) in units.families() {
        if present {
            continue;
        }
        let mut kernels: Vec<String> = family
            .names
            .iter()
            .flat_map(|name| kernels_reaching(module, name))
            .collect();
        if kernels.is_empty() {
            continue;
        }
        kernels.sort();
        kernels.dedup();
        let query = family.query;
        let reason = if is_amdgpu(module) {
            format!("AMD GPUs have no such units; branch on `{query}` for another path")
        } else {
            format!(
                "they need {}; branch on `{query}` for another path on the other architectures",
                family.needs
            )
        };
        return Err(LinkError::FeatureUnsupported {
            arch: cpu,
            feature: family.feature,
            kernels: kernels.join(", "),
            reason,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::bitcode;
    use super::*;
    use crate::device_link::llvm::{NvptxLinkOptions, nvptx_link};
    use crate::device_link::rlib_bitcode::DeviceInput;

    /// A kernel that multiplies with `wgmma` when `has_wgmma()` says so, and `@plain`, which
    /// does so without asking.
    fn kernels() -> Vec<DeviceInput> {
        let ir = "declare zeroext i1 @__offload_has_wgmma()
declare void @__offload_wgmma_fence()
declare void @__offload_wgmma_commit()
declare void @__offload_wgmma_wait_0()
define ptx_kernel void @guarded(ptr %out) {
  %has = call zeroext i1 @__offload_has_wgmma()
  br i1 %has, label %hopper, label %other
hopper:
  call void @__offload_wgmma_fence()
  call void @__offload_wgmma_commit()
  call void @__offload_wgmma_wait_0()
  store i32 1, ptr %out
  ret void
other:
  store i32 2, ptr %out
  ret void
}
define ptx_kernel void @plain(ptr %out) {
  call void @__offload_wgmma_fence()
  store i32 3, ptr %out
  ret void
}
";
        vec![DeviceInput::object("k.bc", bitcode("k", ir))]
    }

    /// On sm_90a the guarded kernel keeps its `wgmma` branch; elsewhere the branch folds away,
    /// and a kernel that reaches `wgmma` regardless is refused, named with the feature.
    #[test]
    fn queries_fold_per_image_and_unguarded_units_are_refused() {
        let only = |name: &str| NvptxLinkOptions {
            kernels: Some(vec![name.to_owned()]),
            ..Default::default()
        };
        let ptx = nvptx_link(&kernels(), "sm_90a", &NvptxLinkOptions::default()).unwrap();
        assert!(ptx.contains("wgmma.fence.sync.aligned"), "{ptx}");
        let spaced = ptx.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(spaced.contains("wgmma.wait_group.sync.aligned 0;"), "{ptx}");
        for sm in ["sm_80", "sm_90"] {
            let ptx = nvptx_link(&kernels(), sm, &only("guarded")).unwrap();
            assert!(!ptx.contains("wgmma"), "{sm}: {ptx}");
            let err = nvptx_link(&kernels(), sm, &NvptxLinkOptions::default()).unwrap_err();
            match &err {
                LinkError::FeatureUnsupported {
                    arch,
                    kernels,
                    feature,
                    ..
                } => {
                    assert_eq!((arch.as_str(), kernels.as_str()), (sm, "plain"));
                    assert!(feature.contains("wgmma"), "{feature}");
                }
                other => panic!("{sm}: expected FeatureUnsupported, got {other}"),
            }
            assert!(err.to_string().contains("sm_90a"), "{err}");
        }
    }

    /// Each family's IR parses and defines every name it lists.
    #[test]
    fn every_helper_is_defined_in_ir_that_parses() {
        for family in [tma_family(), wgmma_family(), stmatrix_family()] {
            super::super::helpers::assert_defines(family.feature, &family.names, &family.ir);
        }
        let context = Context::create();
        let buffer = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(
            queries_ir(Units {
                tma: true,
                wgmma: false,
                stmatrix: true,
            })
            .as_bytes(),
            "queries",
        );
        context.create_module_from_ir(buffer).unwrap();
    }

    /// `stmatrix` is defined on sm_90 (plain, PTX ISA 7.8) and sm_90a, its query folds to
    /// false on sm_80, and a kernel reaching it regardless there is refused, named.
    #[test]
    fn stmatrix_is_defined_from_sm_90_and_refused_before() {
        let ir = "declare zeroext i1 @__offload_has_stmatrix()
declare void @__offload_stmatrix_x4_trans(ptr, ptr)
define ptx_kernel void @guarded(ptr %dst, ptr %words, ptr %out) {
  %has = call zeroext i1 @__offload_has_stmatrix()
  br i1 %has, label %stsm, label %other
stsm:
  call void @__offload_stmatrix_x4_trans(ptr %dst, ptr %words)
  ret void
other:
  store i32 2, ptr %out
  ret void
}
define ptx_kernel void @plain(ptr %dst, ptr %words) {
  call void @__offload_stmatrix_x4_trans(ptr %dst, ptr %words)
  ret void
}
";
        let inputs = vec![DeviceInput::object("k.bc", bitcode("k", ir))];
        for sm in ["sm_90", "sm_90a"] {
            let ptx = nvptx_link(&inputs, sm, &NvptxLinkOptions::default()).unwrap();
            let spaced = ptx.split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(
                spaced.contains("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16"),
                "{sm}: {ptx}"
            );
        }
        let guarded = NvptxLinkOptions {
            kernels: Some(vec!["guarded".to_owned()]),
            ..Default::default()
        };
        let ptx = nvptx_link(&inputs, "sm_80", &guarded).unwrap();
        assert!(!ptx.contains("stmatrix"), "{ptx}");
        let err = nvptx_link(&inputs, "sm_80", &NvptxLinkOptions::default()).unwrap_err();
        match &err {
            LinkError::FeatureUnsupported {
                arch,
                kernels,
                feature,
                reason,
            } => {
                assert_eq!((arch.as_str(), kernels.as_str()), ("sm_80", "plain"));
                assert!(feature.contains("stmatrix"), "{feature}");
                assert!(reason.contains("sm_90 or later"), "{reason}");
                assert!(reason.contains("has_stmatrix"), "{reason}");
            }
            other => panic!("expected FeatureUnsupported, got {other}"),
        }
    }
}
