//! LLVM's side of the device link: target machines, pass pipelines and code generation.

#![forbid(unsafe_code)]

use std::sync::Once;

use inkwell::OptimizationLevel;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple,
};

use crate::device_link::error::{LinkError, Result};

fn init_targets() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let config = InitializationConfig::default();
        Target::initialize_nvptx(&config);
        Target::initialize_amd_gpu(&config);
        // The CPU device's image (`cpu_link`), for either host architecture it is built for.
        Target::initialize_x86(&config);
        Target::initialize_aarch64(&config);
        // x86's cmov conversion turns a select on a loop's critical path into a branch: in the
        // CPU device's loops over a block's threads the condition is each thread's own data
        // (an argmin over clusters), and the branch mispredicts (`kmeans` 2.6x slower).
        // Innermost loops start on a 64-byte line rather than x86's 16 bytes: a thread loop of
        // a few instructions that straddles two lines decodes from both on every trip, and
        // which loops straddled moved with every change of the image (`block_sum` 1.2x slower
        // for the same instructions 32 bytes further on).
        super::ir::process::set_llvm_options(&[
            "-x86-cmov-converter=false",
            "-x86-experimental-pref-innermost-loop-alignment=6",
        ]);
    });
}

pub(super) fn target_machine(triple: &str, cpu: &str, features: &str) -> Result<TargetMachine> {
    init_targets();
    let target_triple = TargetTriple::create(triple);
    let err = |message: String| LinkError::TargetMachine {
        triple: triple.to_owned(),
        cpu: cpu.to_owned(),
        features: features.to_owned(),
        message,
    };
    let target = Target::from_triple(&target_triple).map_err(|e| err(e.to_string()))?;
    target
        .create_target_machine(
            &target_triple,
            cpu,
            features,
            OptimizationLevel::Aggressive,
            RelocMode::PIC,
            CodeModel::Default,
        )
        .ok_or_else(|| err("LLVM returned no target machine".into()))
}

/// `default<O3>`; for NVIDIA (`nvptx`), then full unrolling of the loops that LLVM knows run
/// at most twice but not exactly how often (a loop over a two-element `chunk_for_thread`).
/// LLVM leaves such a loop alone, and ptxas unrolls a small one four times with a remainder
/// loop, five copies of its body (about 90 instructions for one load and one store, where C's
/// twin writes two `if`s). Two copies are never larger; with more (libm's loops of up to 4, in
/// `sin` and `cos`), the 48-kernel crate's cubins grew by 3 %. One pipeline, so the unrolling
/// reuses the analyses `default<O3>` leaves.
pub(super) fn optimize(module: &Module<'_>, machine: &TargetMachine, nvptx: bool) -> Result<()> {
    let pipeline = if nvptx { OPTIMIZE_NVPTX } else { OPTIMIZE };
    run_pipeline(module, pipeline, machine)
}

// Every pass pipeline the device link runs. A pipeline string's `instcombine` verifies by
// default that one iteration reached a fixpoint and stops LLVM with a fatal error where it
// did not, which ordinary kernels reach (a shared-memory histogram did); LLVM's own pipelines
// (`default<O3>`) turn the check off, and so does each pipeline here.
const OPTIMIZE: &str = "default<O3>";
/// The CPU link's first pipeline after the passes `first` (literals, each ending in a comma).
macro_rules! cpu_pre_link {
    ($($first:literal),*) => {
        concat!(
            $($first,)*
            "thinlto-pre-link<O3>,function(irce),",
            "function(loop-mssa(simple-loop-unswitch<nontrivial>))"
        )
    };
}
/// The CPU image's module (`cpu_link`), first: the O3 pipeline its crates' bitcode was built
/// for (rustc's per-crate pre-link pipeline, `-Clinker-plugin-lto`), now with the index hook
/// inlinable, then inductive range-check elimination, which splits a kernel's `if i < n` guard
/// off the thread loop as `-Cpasses=function(irce)` does in the source form, then loop
/// unswitching on the branches a thread loop keeps on what every thread of a row shares:
/// `jacobi5`'s halo rows (`if ty == 0 { .. }`, `if ty == 15 { .. }`), whose two stores LLVM had
/// sunk into one store through a phi of their addresses, a scatter in the vectorized loop for
/// every row (1.4x). Then (`constrained_loops` between) [`OPTIMIZE_CPU_LINK`].
pub(super) const OPTIMIZE_CPU_PRE_LINK: &str = cpu_pre_link!();
/// [`OPTIMIZE_CPU_PRE_LINK`] for an image whose thread loops LLVM may not peel
/// (`cpu_regions::Peeling::Never`), the regions as formed first cleaned up, their conditions
/// hoisted and unswitched: unpeeled, the O3 pipeline's jump threading and sinking merge
/// `jacobi5`'s two halo rows' stores into one that neither unswitching takes apart (1.7x
/// slower; the clean-up or the unswitching alone is not enough). Only there: on the baseline
/// image it made `nbody` 5% slower.
pub(super) const OPTIMIZE_CPU_PRE_LINK_UNPEELED: &str = cpu_pre_link!(
    "function(sroa,early-cse,instcombine<no-verify-fixpoint>,simplifycfg,",
    "loop-mssa(licm,simple-loop-unswitch<nontrivial>)),"
);
/// The O3 pipeline of a link (what rustc's fat LTO runs on its merged module), which
/// vectorizes the check-free loops. `default<O3>` alone leaves SAXPY's thread loop scalar (its
/// cost model weighs the range checks), and costs as much.
pub(super) const OPTIMIZE_CPU_LINK: &str = "lto<O3>";
const OPTIMIZE_NVPTX: &str =
    "default<O3>,function(loop-unroll<O3;no-runtime;no-partial;upperbound;full-unroll-max=2>)";
/// After the link's own rewrites of conditions (null tests, shared condition values).
pub(super) const CLEAN_UP: &str = "function(instcombine<no-verify-fixpoint>,simplifycfg)";
/// After the panic reporters are made inlinable: inlined, dropped when unused, cleaned up.
pub(super) const INLINE_AND_CLEAN_UP: &str =
    "always-inline,globaldce,function(sroa,instcombine<no-verify-fixpoint>,simplifycfg)";
/// Global pointers to generic ones (run by the NVPTX code generator but not by AMDGPU's).
pub(super) const INFER_ADDRESS_SPACES: &str = "function(infer-address-spaces)";
/// Drops the definitions nothing reaches.
pub(super) const DROP_UNUSED: &str = "globaldce";
/// Merges identical constants.
pub(super) const MERGE_CONSTANTS: &str = "constmerge";

pub(super) fn run_pipeline(
    module: &Module<'_>,
    pipeline: &str,
    machine: &TargetMachine,
) -> Result<()> {
    module
        .run_passes(pipeline, machine, PassBuilderOptions::create())
        .map_err(|e| LinkError::Passes {
            pipeline: pipeline.into(),
            message: e.to_string(),
        })
}

/// `module` compiled by `machine` to `file_type`; `cpu` is the processor, for errors.
pub(super) fn emit(
    machine: &TargetMachine,
    module: &Module<'_>,
    file_type: FileType,
    cpu: &str,
) -> Result<MemoryBuffer<'static>> {
    machine
        .write_to_memory_buffer(module, file_type)
        .map_err(|e| LinkError::Codegen {
            cpu: cpu.to_owned(),
            message: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use inkwell::context::Context;

    use super::*;

    /// `text` parsed into a module of `context`.
    fn parse<'c>(context: &'c Context, text: &str) -> Module<'c> {
        let buffer = MemoryBuffer::create_from_memory_range_copy(text.as_bytes(), "test");
        context.create_module_from_ir(buffer).expect("parses")
    }

    /// A thread loop of `jacobi5`'s entry point (the halo's rows), reduced by `llvm-reduce` to
    /// what keeps its stores scattered: branches on what the row's threads share around
    /// stores LLVM sinks into one.
    const HALO_ROWS: &str = r#"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

define i32 @k(ptr %halo, i32 %width, i64 %n, ptr %left, i1 %inside, ptr %input, ptr %tile, i1 %top, i1 %not_bottom) {
entry:
  br label %y
y:
  br label %x
x:
  %x32 = phi i32 [ 0, %y ], [ %next, %latch ]
  %wide = zext i32 %x32 to i64
  %below = icmp ugt i64 %n, %wide
  %in = and i1 %inside, %below
  br i1 %in, label %cell, label %latch
cell:
  %slot = getelementptr float, ptr %tile, i64 %wide
  store float 0.000000e+00, ptr %slot, align 4, !llvm.access.group !0
  %first = icmp eq i32 %x32, 0
  %first_top = and i1 %first, %top
  br i1 %first_top, label %corner, label %row
corner:
  store float 0.000000e+00, ptr %left, align 4
  br label %row
row:
  br i1 %top, label %up, label %after_up
up:
  store float 0.000000e+00, ptr %halo, align 4, !llvm.access.group !0
  br label %after_up
after_up:
  br i1 %not_bottom, label %latch, label %down
down:
  %odd = or i64 %wide, 1
  %from = getelementptr float, ptr %input, i64 %odd
  %v = load float, ptr %from, align 4, !llvm.access.group !0
  store float %v, ptr %left, align 4, !llvm.access.group !0
  br label %latch
latch:
  %next = add i32 %x32, 1
  %more = icmp ult i32 %next, %width
  br i1 %more, label %x, label %y, !llvm.loop !1
}

!0 = distinct !{}
!1 = distinct !{!1, !2, !3}
!2 = !{!"llvm.loop.parallel_accesses", !0}
!3 = !{!"llvm.loop.interleave.count", i32 1}
"#;

    /// How many scatters `HALO_ROWS` keeps through `pre_link` and the link's pipeline.
    fn halo_scatters(pre_link: &str) -> usize {
        let context = Context::create();
        let module = parse(&context, HALO_ROWS);
        let machine = target_machine("x86_64-unknown-linux-gnu", "x86-64-v4", "").unwrap();
        run_pipeline(&module, pre_link, &machine).unwrap();
        run_pipeline(&module, OPTIMIZE_CPU_LINK, &machine).unwrap();
        module
            .print_to_string()
            .to_string()
            .matches("call void @llvm.masked.scatter")
            .count()
    }

    #[test]
    fn branches_on_what_a_row_shares_leave_no_scatter_in_the_cpu_link() {
        assert_ne!(halo_scatters("thinlto-pre-link<O3>,function(irce)"), 0);
        assert_eq!(halo_scatters(OPTIMIZE_CPU_PRE_LINK), 0);
        assert_eq!(halo_scatters(OPTIMIZE_CPU_PRE_LINK_UNPEELED), 0);
    }

    /// A row of a stencil's tile load (`jacobi5`'s): each thread stages its cell, the row's
    /// first thread the halo cell before it. `{unpeeled}` is the loop ID's last property.
    const HALO_COLUMN: &str = r#"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

define void @row(ptr noalias %tile, ptr noalias %input, i32 %width, i1 %inside) {
entry:
  br label %x
x:
  %x32 = phi i32 [ 0, %entry ], [ %next, %latch ]
  %wide = zext i32 %x32 to i64
  %from = getelementptr float, ptr %input, i64 %wide
  %v = load float, ptr %from, align 4, !llvm.access.group !0
  %slot = getelementptr float, ptr %tile, i64 %wide
  %cell = getelementptr i8, ptr %slot, i64 4
  store float %v, ptr %cell, align 4, !llvm.access.group !0
  %first = icmp eq i32 %x32, 0
  %edge = and i1 %first, %inside
  br i1 %edge, label %halo, label %latch
halo:
  %before = getelementptr i8, ptr %from, i64 -4
  %h = load float, ptr %before, align 4, !llvm.access.group !0
  store float %h, ptr %slot, align 4, !llvm.access.group !0
  br label %latch
latch:
  %next = add i32 %x32, 1
  %more = icmp ult i32 %next, %width
  br i1 %more, label %x, label %exit, !llvm.loop !1
exit:
  ret void
}

!0 = distinct !{}
!1 = distinct !{!1, !2, !3{unpeeled}}
!2 = !{!"llvm.loop.parallel_accesses", !0}
!3 = !{!"llvm.loop.interleave.count", i32 1}
!4 = !{!"llvm.loop.peeled.count", i32 2147483647}
"#;

    /// `HALO_COLUMN` through the CPU link's pipelines for `cpu`, its loop ID ending in
    /// `unpeeled`: the module's text.
    fn halo_column(cpu: &str, unpeeled: &str) -> String {
        let context = Context::create();
        let module = parse(&context, &HALO_COLUMN.replace("{unpeeled}", unpeeled));
        let machine = target_machine("x86_64-unknown-linux-gnu", cpu, "").unwrap();
        let pre_link = if unpeeled.is_empty() {
            OPTIMIZE_CPU_PRE_LINK
        } else {
            OPTIMIZE_CPU_PRE_LINK_UNPEELED
        };
        run_pipeline(&module, pre_link, &machine).unwrap();
        run_pipeline(&module, OPTIMIZE_CPU_LINK, &machine).unwrap();
        module.print_to_string().to_string()
    }

    /// LLVM peels a row's first thread off the loop to drop the halo's test, unless the loop
    /// says it peeled as many as it peels (the region stage's `Peeling::Never`); the row then
    /// runs as whole vectors, the halo a masked store.
    #[test]
    fn a_thread_loop_that_says_it_was_peeled_keeps_its_first_thread() {
        const PEELED: &str = "!{!\"llvm.loop.peeled.count\", i32 1}";
        let peeled = halo_column("x86-64-v4", "");
        assert!(peeled.contains(PEELED), "{peeled}");
        let whole = halo_column("x86-64-v4", ", !4");
        assert!(!whole.contains(PEELED), "{whole}");
        assert!(whole.contains("call void @llvm.masked.store"), "{whole}");
    }

    /// The CPU image's innermost loops start on a 64-byte line (the x86 default is 16).
    #[test]
    fn the_cpu_images_innermost_loops_start_on_a_cache_line() {
        let context = Context::create();
        let module = parse(&context, &HALO_COLUMN.replace("{unpeeled}", ""));
        let machine = target_machine("x86_64-unknown-linux-gnu", "x86-64-v3", "").unwrap();
        run_pipeline(&module, OPTIMIZE_CPU_LINK, &machine).unwrap();
        let assembly = emit(&machine, &module, FileType::Assembly, "x86-64-v3").unwrap();
        let assembly = String::from_utf8_lossy(assembly.as_slice());
        assert!(assembly.contains(".p2align\t6"), "{assembly}");
    }

    /// Every pipeline string of the device link's sources, the constants above and any other:
    /// none asks for `instcombine` with its fixpoint verification.
    #[test]
    fn no_pipeline_verifies_the_instcombine_fixpoint() {
        for pipeline in [
            OPTIMIZE,
            OPTIMIZE_CPU_PRE_LINK,
            OPTIMIZE_CPU_PRE_LINK_UNPEELED,
            OPTIMIZE_CPU_LINK,
            OPTIMIZE_NVPTX,
            CLEAN_UP,
            INLINE_AND_CLEAN_UP,
            INFER_ADDRESS_SPACES,
            DROP_UNUSED,
            MERGE_CONSTANTS,
        ] {
            assert!(verifies_no_fixpoint(pipeline), "{pipeline}");
        }
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = vec![dir.clone()];
        let mut seen = 0;
        while let Some(path) = files.pop() {
            if path.is_dir() {
                files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for literal in text.split('"').skip(1).step_by(2) {
                if literal.contains("instcombine") && !literal.contains(' ') {
                    seen += 1;
                    assert!(
                        verifies_no_fixpoint(literal),
                        "{}: `{literal}` asks for instcombine's fixpoint verification",
                        path.display()
                    );
                }
            }
        }
        assert!(seen >= 2, "the pipelines' literals were not found");
    }

    /// Whether each `instcombine` of `pipeline` has `no-verify-fixpoint`.
    fn verifies_no_fixpoint(pipeline: &str) -> bool {
        pipeline
            .match_indices("instcombine")
            .all(|(at, _)| pipeline[at..].starts_with("instcombine<no-verify-fixpoint>"))
    }

    #[test]
    fn the_fixpoint_check_reads_each_instcombine() {
        assert!(verifies_no_fixpoint(
            "function(instcombine<no-verify-fixpoint>)"
        ));
        assert!(!verifies_no_fixpoint("function(instcombine,simplifycfg)"));
        assert!(!verifies_no_fixpoint(
            "function(instcombine<no-verify-fixpoint>),function(sroa,instcombine)"
        ));
        assert!(!verifies_no_fixpoint(
            "function(instcombine<max-iterations=1>)"
        ));
    }
}
