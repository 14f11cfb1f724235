//! Regions whose threads past a bound on their `x` index do nothing: the tree level of a
//! reduction (`if tid < stride { .. }` before the barrier) runs only its first `stride`
//! threads, as a GPU's idle lanes cost nothing. Such a region's loop over a row of threads
//! ends where the bound says, which the row's first thread computes.
#![forbid(unsafe_code)]

use inkwell::IntPredicate;
use inkwell::values::InstructionOpcode;

use super::super::ir::{Instruction, Value};
use super::segments::Segments;

/// A branch of a region on `X < V` (or `X <= V`), `X` the thread's `x` index (widened or
/// not) and `V` a value the block shares, such that a thread that does not go the `X < V` way
/// does nothing until it leaves the region, and every thread reaches the branch the way the
/// row's first thread does.
#[derive(Clone, Copy, Debug)]
pub(super) struct Trim<'m> {
    /// The branch, in the body.
    pub(super) branch: Instruction<'m>,
    /// The segment it ends.
    pub(super) segment: usize,
    /// Which of the comparison's operands is `X`.
    pub(super) x_operand: u32,
    /// Whether threads with `X == V` go the running way too.
    pub(super) inclusive: bool,
}

/// What a region's trimming needs to know of the body's instructions.
pub(super) struct Facts<'f, 'm> {
    /// Whether a value is the same for every thread of the block.
    pub(super) uniform: &'f mut dyn FnMut(Value<'m>) -> bool,
    /// Whether a value is the thread's `x` index (a call of the index hook for it).
    pub(super) is_thread_x: &'f dyn Fn(Value<'m>) -> bool,
    /// Whether an instruction leaves nothing a later thread or region could see: a load, a
    /// store to a slot the block shares or to a local that does not outlive the segment, a
    /// call of the index hook or of an intrinsic without effects, arithmetic.
    pub(super) is_idle: &'f dyn Fn(Instruction<'m>) -> bool,
}

/// The trim branch of the region starting at segment `start`, if it has one.
pub(super) fn trim_branch<'m>(
    segments: &Segments<'m>,
    start: usize,
    facts: &mut Facts<'_, 'm>,
) -> Option<Trim<'m>> {
    let region = segments.region(start);
    let within = |s: usize| region.contains(&s);
    for &s in &region {
        let segment = segments.list[s];
        if segment.barrier.is_some() {
            continue;
        }
        let Some(terminator) = segment.block.terminator() else {
            continue;
        };
        let branch = terminator.instruction();
        let Some((x_operand, inclusive, run_way)) = bound_test(branch, facts) else {
            continue;
        };
        let ways: Vec<usize> = segments.successors[s].clone();
        if ways.len() != 2 || ways[0] == ways[1] {
            continue;
        }
        let skip = ways[1 - run_way];
        // Every thread reaches the branch as the row's first does, doing nothing on the way,
        // and not twice.
        let before = segments_before(segments, &region, s);
        if segments.successors[s]
            .iter()
            .any(|&n| reaches(segments, n, s, &within))
        {
            continue;
        }
        let prefix_ok = before.iter().all(|&a| {
            idle_segment(segments, a, s, facts)
                && (a == s
                    || segments.successors[a].iter().all(|n| before.contains(n))
                    || segments.list[a]
                        .block
                        .terminator()
                        .and_then(|t| t.instruction().operand(0))
                        .is_some_and(&mut *facts.uniform))
        });
        if !prefix_ok {
            continue;
        }
        // The other way does nothing until the region's exit.
        let after_skip: Vec<usize> = region
            .iter()
            .copied()
            .filter(|&d| reaches(segments, skip, d, &within))
            .collect();
        if after_skip
            .iter()
            .all(|&d| idle_segment(segments, d, usize::MAX, facts))
        {
            return Some(Trim {
                branch,
                segment: s,
                x_operand,
                inclusive,
            });
        }
    }
    None
}

/// The segments of the region starting at `start` on the way to its trim branch, the
/// branch's own among them: what the row's first thread runs to find the bound.
pub(super) fn trim_prefix(segments: &Segments<'_>, start: usize, trim: &Trim<'_>) -> Vec<usize> {
    segments_before(segments, &segments.region(start), trim.segment)
}

/// The segments of `region` from which a path inside it leads to segment `s`.
fn segments_before(segments: &Segments<'_>, region: &[usize], s: usize) -> Vec<usize> {
    let within = |a: usize| region.contains(&a);
    region
        .iter()
        .copied()
        .filter(|&a| reaches(segments, a, s, &within))
        .collect()
}

/// Whether a path inside the region leads from segment `from` to segment `to` (`from`
/// itself included).
fn reaches(
    segments: &Segments<'_>,
    from: usize,
    to: usize,
    within: &dyn Fn(usize) -> bool,
) -> bool {
    let mut seen = vec![false; segments.list.len()];
    let mut work = vec![from];
    while let Some(s) = work.pop() {
        if s == to {
            return true;
        }
        if !within(s) || std::mem::replace(&mut seen[s], true) {
            continue;
        }
        if segments.list[s].barrier.is_none() {
            work.extend(segments.successors[s].iter().copied());
        }
    }
    false
}

/// Whether segment `s` does nothing a later thread could see; for the branch's own segment
/// (`s == branch_segment`), up to the branch.
fn idle_segment<'m>(
    segments: &Segments<'m>,
    s: usize,
    branch_segment: usize,
    facts: &Facts<'_, 'm>,
) -> bool {
    let segment = segments.list[s];
    let mut next = segment.start.or_else(|| segment.block.first_instruction());
    while let Some(i) = next {
        if Some(i) == segment.barrier {
            return true;
        }
        if i.as_terminator().is_some() {
            return s == branch_segment || (facts.is_idle)(i);
        }
        if !(facts.is_idle)(i) {
            return false;
        }
        next = i.next();
    }
    true
}

/// For a conditional branch on `icmp` of the thread's `x` index against a value the block
/// shares: which operand is the index, whether equality runs, and which way (successor 0 or
/// 1) the threads below the bound go.
fn bound_test<'m>(
    branch: Instruction<'m>,
    facts: &mut Facts<'_, 'm>,
) -> Option<(u32, bool, usize)> {
    if branch.opcode() != InstructionOpcode::Br || branch.num_operands() != 3 {
        return None;
    }
    let compare = branch.operand(0)?.as_icmp()?;
    let (a, b) = (compare.operand(0)?, compare.operand(1)?);
    let is_x = |v: Value<'m>| widened_thread_x(v, facts.is_thread_x);
    let x_operand = if is_x(a) && (facts.uniform)(b) {
        0
    } else if is_x(b) && (facts.uniform)(a) {
        1
    } else {
        return None;
    };
    use IntPredicate as P;
    // The predicate as `X p V`.
    let predicate = match (compare.predicate(), x_operand) {
        (p, 0) => p,
        (P::ULT, _) => P::UGT,
        (P::ULE, _) => P::UGE,
        (P::UGT, _) => P::ULT,
        (P::UGE, _) => P::ULE,
        _ => return None,
    };
    // Successor 0 of a conditional branch is its true way.
    match predicate {
        P::ULT => Some((x_operand, false, 0)),
        P::ULE => Some((x_operand, true, 0)),
        P::UGE => Some((x_operand, false, 1)),
        P::UGT => Some((x_operand, true, 1)),
        _ => None,
    }
}

/// Whether `v` is the thread's `x` index, zero-extended or not.
pub(super) fn widened_thread_x<'m>(v: Value<'m>, is_thread_x: &dyn Fn(Value<'m>) -> bool) -> bool {
    if is_thread_x(v) {
        return true;
    }
    v.as_instruction().is_some_and(|i| {
        i.opcode() == InstructionOpcode::ZExt
            && i.operand(0)
                .is_some_and(|inner| widened_thread_x(inner, is_thread_x))
    })
}
