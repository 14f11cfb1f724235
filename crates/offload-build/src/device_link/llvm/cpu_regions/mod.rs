//! The CPU device's barriers in IR form. A kernel's body function
//! (`offload_format::abi::CPU_BODY_PREFIX<kernel>`: one GPU thread, its parameters read) has
//! everything that reaches a barrier inlined into it, whatever the source looked like (generic
//! helpers, closures, `?`, shared arrays in helpers), and becomes the kernel's
//! `CPU_IR_REGIONS_PREFIX<kernel>` entry point: the body cut at its barriers into segments, each
//! region (the segments reachable from the kernel's start or from one barrier without crossing
//! another) cloned into a loop over the block's threads, `x` innermost, with the thread's index
//! the loop's counters.
//!
//! Between regions each thread's place is a state (the barrier it waits at, or done), kept per
//! thread, so that threads that return early, or wait at different barriers, run as a GPU runs
//! them: a warp operation's barrier first (its lanes all reached it), then, once every live
//! thread waits at a block barrier, each of those barriers' threads in turn. When every live
//! thread waits at the same barrier (the common case) the region's loop runs without a test,
//! and where the threads can only leave that region together ([`exits`]: every branch on a
//! thread's own condition joins again before the region's barrier or return, or its ways
//! choose their exits by the same tests of what the block shares) they leave no
//! states and the next region's loop follows at once. In such a region, threads whose `x`
//! index is past a bound the block shares and that then only wait for the barrier ([`trim`]:
//! a reduction's `if tid < stride`) are not run: each row's first thread records the bound.
//! Where such threads return or wait at a later barrier instead, while the others go on alone
//! through regions they leave together to that barrier (a reduction's last warp, a scan's
//! first), they are parked: the loops until then run the live threads only ([`trim::Park`]).
//! Block- and grid-stride loops in a formed body run trip by trip ([`answer_interleaved`]):
//! the top of each trip is cut at like a barrier.
//!
//! Values live across a barrier are kept per thread, in the OS thread's lane storage
//! (`CPU_IR_LANES`); values every thread computes alike (from the parameters, the block's
//! indices, shared arrays' addresses) are computed once per block instead, before the loops,
//! and values every thread holds alike at each barrier (loop counters around barriers:
//! [`uniform`]) are kept once per block.
//! Locals whose memory lives across a barrier get a copy per thread there too.
//!
//! A kernel the form cannot take (a barrier reached through recursion, an `invoke`) keeps one
//! coroutine per GPU thread and gets a `CPU_NOTE_PREFIX<kernel>` note saying why, with the
//! barrier's source line where debug information has one, which the build reports.
#![forbid(unsafe_code)]

mod addresses;
mod ahead;
mod at_entry;
mod atomics;
mod cuts;
mod dominators;
mod emit;
mod equal_phis;
mod exits;
mod hooks;
mod inline;
mod kinds;
mod known;
mod merge;
mod parallel;
mod phi_groups;
mod piece_exits;
mod ranges;
mod scopes;
mod segments;
mod slots;
mod strides;
#[cfg(test)]
mod tests;
mod trim;
mod turns;
mod uniform;
mod warps;

use std::collections::{HashMap, HashSet};

use inkwell::module::Linkage;
use inkwell::values::InstructionOpcode;
use offload_format::abi;

use super::ir::{AttributeIndex, Function, Instruction, Module, Value};
use crate::device_link::error::Result;
use emit::Emitter;
use equal_phis::fold_phis_restating_a_value;
use hooks::{Complete, Hooks, barrier_calls, callee, with_location};
use inline::{inline_calls_of, inline_what_reaches_barriers, recursive_callee, run_passes};
use kinds::{Kind, Kinds};
use merge::merge_alternative_barriers;
pub use parallel::{Peeling, ThreadLoops};
pub(super) use parallel::{parallel_over, thread_loop_id};
use segments::Segments;
use slots::{classify_allocas, demote_across_segments, demote_phis};
use turns::keep_warp_turns_in_locals;
use uniform::block_uniform_slots;

/// A kernel with barriers that keeps one coroutine per GPU thread, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoroutineKernel {
    /// The kernel's name.
    pub kernel: String,
    /// Why, with the source line of the barrier where debug information has one.
    pub reason: String,
}

/// Forms the regions of every kernel body in `module` (the CPU image's bitcode, linked and
/// internalized) and drops the bodies; makes the hooks calls of which remain (the index, the
/// current thread's, the warp turn's: in the thread entries, kernels without barriers and
/// kernels kept on coroutines) inline everywhere else; `shape` is how the image's vectors
/// run the thread loops. Returns the kernels with barriers that keep their coroutines.
pub fn form_regions(module: Module<'_>, shape: ThreadLoops) -> Result<Vec<CoroutineKernel>> {
    let hooks = Hooks::find(module);
    let bodies: Vec<(String, Function<'_>)> = module
        .functions()
        .filter(|f| !f.is_declaration())
        .filter_map(|f| {
            let name = std::str::from_utf8(f.name()).ok()?;
            let kernel = name.strip_prefix(abi::CPU_BODY_PREFIX)?;
            Some((kernel.to_owned(), f))
        })
        .collect();
    let mut kept = Vec::new();
    let mut to_form = Vec::new();
    if !hooks.barriers().is_empty() && !bodies.is_empty() {
        let recursive = inline_what_reaches_barriers(module, &hooks)?;
        for (kernel, body) in &bodies {
            match recursive_callee(*body, &recursive) {
                Some(reason) => kept.push((kernel, Err(reason))),
                None if barrier_calls(*body, &hooks).is_empty() => {}
                None => to_form.push((kernel, *body)),
            }
        }
    }
    let formed_bodies: HashSet<Function<'_>> = to_form.iter().map(|(_, body)| *body).collect();
    answer_interleaved(module, &hooks, &formed_bodies)?;
    keep_warp_turns_in_locals(module, &hooks, formed_bodies.iter().copied())?;
    for body in &formed_bodies {
        fold_phis_restating_a_value(*body);
    }
    for (kernel, body) in to_form {
        let formed = hooks
            .complete()
            .and_then(|hooks| form_kernel(module, &hooks, kernel, body, shape));
        kept.push((kernel, formed));
    }
    let mut coroutines = Vec::new();
    for (kernel, formed) in kept {
        if let Err(reason) = formed {
            let symbol = format!("{}{kernel}", abi::CPU_NOTE_PREFIX);
            module.add_constant_bytes(&symbol, reason.as_bytes());
            coroutines.push(CoroutineKernel {
                kernel: kernel.clone(),
                reason,
            });
        }
    }
    for (_, body) in bodies {
        if !body.has_uses() {
            body.delete();
        }
    }
    for hook in [hooks.index, hooks.set_thread, hooks.warp_turn]
        .into_iter()
        .flatten()
    {
        hook.remove_enum_attribute(AttributeIndex::Function, "noinline");
        hook.add_enum_attribute(AttributeIndex::Function, "alwaysinline");
        hook.set_linkage(Linkage::Internal);
        inline_calls_of(hook);
    }
    Ok(coroutines)
}

/// Answers the question of every block- and grid-stride loop ([`abi::CPU_IR_INTERLEAVED`]):
/// `true` in the bodies whose regions are formed next, where each trip's top becomes a place
/// regions are cut at, so that the block's threads run the loop trip by trip (consecutive
/// threads on consecutive elements, as a GPU's warps) instead of each thread its whole
/// strided share in turn; `false` everywhere else. The branches decided are folded before
/// the bodies are cut.
fn answer_interleaved<'m>(
    module: Module<'m>,
    hooks: &Hooks<'m>,
    formed: &HashSet<Function<'m>>,
) -> Result<()> {
    let Some(hook) = hooks.interleaved else {
        return Ok(());
    };
    let calls: Vec<_> = hook
        .as_value()
        .users()
        .into_iter()
        .filter_map(|user| user.as_call())
        .filter(|call| callee(*call) == Some(hook))
        .collect();
    if calls.is_empty() {
        return Ok(());
    }
    let i1 = module.i1_type();
    for call in calls {
        let inside = formed.contains(&call.instruction().function());
        call.as_value()
            .replace_all_uses_with(i1.const_int(u64::from(inside), false));
        call.instruction().erase();
    }
    run_passes(module, "function(instsimplify,simplifycfg)")
}

/// Forms `kernel`'s regions from `body`; the reason it cannot, otherwise.
fn form_kernel<'m>(
    module: Module<'m>,
    hooks: &Complete<'m>,
    kernel: &str,
    body: Function<'m>,
    shape: ThreadLoops,
) -> std::result::Result<(), String> {
    let params = body
        .params()
        .next()
        .map(|p| p.as_value())
        .ok_or("the body function has no parameter")?;
    let is_barrier = |i: Instruction<'m>| hooks.is_barrier(i);
    check_supported(body)?;
    let summable = atomics::adds_can_be_summed(body, params, hooks);
    let mut kinds = Kinds {
        hooks,
        params,
        memo: HashMap::new(),
    };
    let is_thread_x = |v: Value<'m>| emit::is_thread_x(v, hooks);
    let phi_slots = demote_phis(module, body, &is_thread_x);
    let segments = Segments::of(body, &is_barrier);
    demote_across_segments(module, body, &segments, &mut kinds, &phi_slots)?;
    let recomputed = &mut |c| kinds.of(c) != Kind::Varying;
    if merge_alternative_barriers(module, body, hooks, recomputed) > 0 {
        // The merge erased instructions whose handles the memo may still hold.
        kinds.memo.clear();
    }
    let segments = Segments::of(body, &is_barrier);
    let mut slots = classify_allocas(module, body, &segments)?;
    // A slot kept once that a loop around a barrier uses on both sides of it (a loop counter
    // written after the barrier and tested before the next) is a candidate too: the block's,
    // it tells the regions that the branches on it are the block's.
    let candidates: Vec<Instruction<'m>> = slots
        .per_thread
        .iter()
        .map(|(a, _)| *a)
        .chain(slots.scratch_in_loops.iter().copied())
        .collect();
    let is_block_barrier = |i: Instruction<'m>| hooks.is_block_barrier(i);
    slots.block = block_uniform_slots(
        body,
        &candidates,
        &is_barrier,
        &is_block_barrier,
        &mut |v| kinds.of(v) == Kind::Hoistable,
    );
    slots
        .per_thread
        .retain(|(alloca, _)| !slots.block.contains(alloca));
    slots.single.retain(|alloca| !slots.block.contains(alloca));
    let name = format!("{}{kernel}", abi::CPU_IR_REGIONS_PREFIX);
    if module.function(&name).is_some() {
        return Err(format!("`{name}` is already defined"));
    }
    let region_fn = Emitter::emit(
        module, hooks, body, &name, &segments, &slots, &mut kinds, shape,
    );
    match region_fn {
        Ok(entry) => {
            if summable {
                atomics::sum_adds_per_worker(module, entry);
            }
            Ok(())
        }
        Err(e) => {
            if let Some(f) = module.function(&name) {
                f.delete();
            }
            Err(e)
        }
    }
}

/// Refuses what the form does not take.
fn check_supported(body: Function<'_>) -> std::result::Result<(), String> {
    let entry = body.entry_block().ok_or("the body has no blocks")?;
    for block in body.blocks() {
        for i in block.instructions() {
            use InstructionOpcode as Op;
            match i.opcode() {
                Op::Invoke | Op::CallBr | Op::IndirectBr | Op::Resume | Op::CatchSwitch => {
                    return Err(with_location(
                        "the body unwinds or branches indirectly after inlining",
                        i,
                    ));
                }
                Op::Alloca if block != entry => {
                    return Err(with_location("the body allocates stack dynamically", i));
                }
                _ => {}
            }
        }
    }
    Ok(())
}
