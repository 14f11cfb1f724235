//! The CPU image's loops that range-check elimination split off, opened to the vectorizer
//! again. LLVM's `irce` splits a loop on a check of its counter against a bound (`if tid < s`,
//! `if i < n`) into a main loop where the check holds, free of it, and a pre- and a post-loop
//! for the counters below and above, each a copy of the loop that it marks never to be
//! unrolled or vectorized again: in the programs `irce` was written for, bounds checks, those
//! copies run a few trips. In a barrier kernel's thread loops they run most of the threads: a
//! tree reduction's level `if tid < 64` leaves 192 of 256 threads to the post-loop, a warp
//! stage 224, one scalar trip a thread. Each such copy gets the properties of the thread loop
//! it was copied from instead (parallel where every access in it belongs to an access group a
//! loop of the function is parallel over, one vector a trip), and the link's O3 pipeline
//! vectorizes it as it does the main loop.

#![forbid(unsafe_code)]

use std::collections::HashSet;

use inkwell::values::InstructionOpcode;
use offload_format::abi;

use super::cpu_regions::{ThreadLoops, parallel_over, thread_loop_id};
use super::ir::{Block, Function, Instruction, MetadataNode, Module};

/// The metadata kind LLVM's loop constrainer tags a pre- or post-loop's latch with.
const CLONED_LOOP: &str = "loop_constrainer.loop.clone";

/// Gives every pre- and post-loop of `irce` in the region stage's entry points of `module`
/// back to the loop optimizations; the number of loops reopened. Only there: in the
/// `#[kernel]` macro's loops, which the link optimizes too, reopening them made the block
/// reduction of `examples/reduce` 14% slower. A reopened loop is a thread loop, shaped as
/// `shape` says.
pub(super) fn reopen_constrained_loops(module: Module<'_>, shape: ThreadLoops) -> usize {
    let cloned = module.metadata_kind(CLONED_LOOP);
    let mut reopened = 0;
    let entry_points = module
        .functions()
        .filter(|f| f.name().starts_with(abi::CPU_IR_REGIONS_PREFIX.as_bytes()));
    for function in entry_points {
        let latches: Vec<Block<'_>> = function
            .blocks()
            .filter(|b| {
                b.terminator()
                    .is_some_and(|t| t.instruction().has_metadata(cloned))
            })
            .collect();
        if latches.is_empty() {
            continue;
        }
        let parallel_groups = parallel_groups(module, function);
        for latch in latches {
            if reopen(module, function, latch, &parallel_groups, shape) {
                reopened += 1;
            }
        }
    }
    reopened
}

/// The access groups some loop of `function` is parallel over (its `llvm.loop` node lists
/// `!{!"llvm.loop.parallel_accesses", group}`).
fn parallel_groups<'m>(module: Module<'m>, function: Function<'m>) -> HashSet<MetadataNode<'m>> {
    let loop_kind = module.metadata_kind("llvm.loop");
    let access_group = module.metadata_kind("llvm.access.group");
    let properties: HashSet<MetadataNode<'m>> = function
        .blocks()
        .filter_map(|b| b.terminator())
        .filter_map(|t| t.instruction().metadata(loop_kind))
        .flat_map(|id| id.node_operands())
        .collect();
    function
        .blocks()
        .flat_map(|b| b.instructions())
        .filter_map(|i| i.metadata(access_group))
        .filter(|group| properties.contains(&parallel_over(module, *group)))
        .collect()
}

/// Replaces the loop ID of the loop the block `latch` closes with one that allows unrolling and
/// vectorization: parallel over the one access group all its memory accesses belong to,
/// where a loop of the function is parallel over it. False where the loop is not one with a
/// single entry at its header.
fn reopen<'m>(
    module: Module<'m>,
    function: Function<'m>,
    latch: Block<'m>,
    parallel_groups: &HashSet<MetadataNode<'m>>,
    shape: ThreadLoops,
) -> bool {
    let Some(terminator) = latch.terminator() else {
        return false;
    };
    let loops: Vec<Vec<Block<'m>>> = terminator
        .successors()
        .filter_map(|header| function.loop_blocks(header, latch))
        .collect();
    let [blocks] = loops.as_slice() else {
        return false;
    };
    let access_group = module.metadata_kind("llvm.access.group");
    let mut groups = blocks
        .iter()
        .flat_map(|b| b.instructions())
        .filter(|i| touches_memory(*i))
        .map(|i| i.metadata(access_group));
    let group = match groups.next() {
        Some(Some(first)) if groups.all(|g| g == Some(first)) => Some(first),
        _ => None,
    }
    .filter(|g| parallel_groups.contains(g));
    terminator.instruction().set_metadata(
        module.metadata_kind("llvm.loop"),
        thread_loop_id(module, group, shape.of_loop(blocks)),
    );
    true
}

/// Whether `i` may read or write memory: a load, a store, an atomic, a fence or a call of
/// anything but a function that touches none.
fn touches_memory(i: Instruction<'_>) -> bool {
    use InstructionOpcode as Op;
    match i.opcode() {
        Op::Load | Op::Store | Op::AtomicRMW | Op::AtomicCmpXchg | Op::Fence | Op::VAArg => true,
        Op::Call | Op::Invoke | Op::CallBr => i
            .as_value()
            .as_call()
            .and_then(|c| c.called_function())
            .is_none_or(|f| !f.accesses_no_memory()),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;
    use inkwell::values::AnyValue;

    use super::super::codegen::{
        OPTIMIZE_CPU_LINK, OPTIMIZE_CPU_PRE_LINK, run_pipeline, target_machine,
    };
    use super::*;

    /// A region's loop over the threads as the region stage makes it, parallel over `!0`: the
    /// threads below `active` add a partial sum, each thread stores its next state. `{group}`
    /// is the state store's access group, if any.
    const THREADS: &str = r#"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

define void @{name}(ptr noalias %sums, ptr noalias %states, i32 %n32, i32 %active32) {
entry:
  %n = zext i32 %n32 to i64
  %active = zext i32 %active32 to i64
  %any = icmp ult i64 0, %n
  br i1 %any, label %x, label %done
x:
  %i = phi i64 [ 0, %entry ], [ %next, %latch ]
  %in = icmp ult i64 %i, %active
  br i1 %in, label %add, label %latch
add:
  %upper = add i64 %i, %active
  %pu = getelementptr i32, ptr %sums, i64 %upper
  %u = load i32, ptr %pu, !llvm.access.group !0
  %p = getelementptr i32, ptr %sums, i64 %i
  %v = load i32, ptr %p, !llvm.access.group !0
  %s = add i32 %u, %v
  store i32 %s, ptr %p, !llvm.access.group !0
  br label %latch
latch:
  %state = phi i32 [ 5, %add ], [ 0, %x ]
  %ps = getelementptr i32, ptr %states, i64 %i
  store i32 %state, ptr %ps{group}
  %next = add nuw i64 %i, 1
  %more = icmp ult i64 %next, %n
  br i1 %more, label %x, label %done, !llvm.loop !1
done:
  ret void
}
!0 = distinct !{}
!1 = distinct !{!1, !2, !3}
!2 = !{!"llvm.loop.parallel_accesses", !0}
!3 = !{!"llvm.loop.interleave.count", i32 1}
"#;

    struct Linked {
        /// Loops reopened.
        reopened: usize,
        /// Whether the post-loop's ID says parallel after reopening.
        parallel: bool,
        /// The optimized function's text.
        text: String,
    }

    const ENTRY_POINT: &str = concat!(offload_format::abi_name!(CPU_IR_REGIONS_PREFIX), "k");

    /// `THREADS` as the function `name` through the CPU link's pipelines, reopening the loops
    /// between them or not.
    fn link(name: &str, state_group: bool, reopening: bool) -> Linked {
        let context = Context::create();
        let text = THREADS.replace("{name}", name).replace(
            "{group}",
            if state_group {
                ", !llvm.access.group !0"
            } else {
                ""
            },
        );
        let buffer = MemoryBuffer::create_from_memory_range_copy(text.as_bytes(), "threads");
        let module = context.create_module_from_ir(buffer).expect("parses");
        let machine = target_machine("x86_64-unknown-linux-gnu", "x86-64-v4", "").unwrap();
        run_pipeline(&module, OPTIMIZE_CPU_PRE_LINK, &machine).unwrap();
        let ir = Module::new(&module);
        let cloned = ir.metadata_kind(CLONED_LOOP);
        let post_latch = || {
            let f = ir
                .functions()
                .find(|f| f.name() == name.as_bytes())
                .unwrap();
            f.blocks()
                .filter_map(|b| b.terminator())
                .map(|t| t.instruction())
                .find(|t| t.has_metadata(cloned))
                .expect("range-check elimination made a post-loop")
        };
        let reopened = if reopening {
            reopen_constrained_loops(ir, ThreadLoops::NARROW)
        } else {
            0
        };
        let id = post_latch()
            .metadata(ir.metadata_kind("llvm.loop"))
            .unwrap();
        let f = ir
            .functions()
            .find(|f| f.name() == name.as_bytes())
            .unwrap();
        let parallel = parallel_groups(ir, f).iter().any(|g| {
            id.node_operands()
                .contains(&ir.metadata_node(Some("llvm.loop.parallel_accesses"), &[*g]))
        });
        run_pipeline(&module, OPTIMIZE_CPU_LINK, &machine).unwrap();
        let text = module
            .get_function(name)
            .unwrap()
            .print_to_string()
            .to_string();
        Linked {
            reopened,
            parallel,
            text,
        }
    }

    fn vector_stores(text: &str) -> usize {
        text.lines().filter(|l| l.contains("store <")).count()
    }

    #[test]
    fn the_threads_past_a_range_check_run_as_vectors_again() {
        let closed = link(ENTRY_POINT, true, false);
        let reopened = link(ENTRY_POINT, true, true);
        assert_eq!(reopened.reopened, 1);
        assert!(reopened.parallel);
        assert!(
            vector_stores(&reopened.text) > vector_stores(&closed.text),
            "closed:\n{}\nreopened:\n{}",
            closed.text,
            reopened.text
        );
    }

    #[test]
    fn a_reopened_loop_is_parallel_only_where_all_its_accesses_are() {
        let linked = link(ENTRY_POINT, false, true);
        assert_eq!(linked.reopened, 1);
        assert!(!linked.parallel);
    }

    #[test]
    fn loops_outside_the_region_entry_points_stay_closed() {
        let name = format!("{}k", abi::CPU_REGIONS_PREFIX);
        assert_eq!(link(&name, true, true).reopened, 0);
    }
}
