//! Which regions the threads that start them together also leave together: at the same
//! barrier, or all returning, whichever way a thread's own conditions take it. After such a
//! region's loop over the block's threads, any thread's state is every thread's, so the
//! scheduler's pass over the states is not needed.
//! And where the threads of each piece of a row leave ([`exit_states`]): where each piece's
//! threads leave at one state, the loop knows the states' summary without that pass either.
#![forbid(unsafe_code)]

use std::collections::{BTreeSet, HashMap};

use inkwell::values::InstructionOpcode;

use super::super::ir::{Instruction, Value};
use super::segments::Segments;
use super::trim::widened_thread_x;

/// Whether every thread that runs the region starting at segment `start` together with the
/// others leaves it where they do: each branch on a condition that may differ between threads
/// (`uniform` says which are the block's) leads to one and the same exit whichever way it
/// goes, as an `if` on the thread's index that joins again before the barrier does; or, in a
/// region without loops, its ways choose their exits by the same tests of conditions the
/// block shares ([`Decision`]; `same` says which conditions are one value). Exits are the
/// states of `state_of_barrier` and 0 for a return; a path that ends in `unreachable` (a
/// panic) leaves through none.
pub(super) fn leave_together<'m>(
    segments: &Segments<'m>,
    start: usize,
    state_of_barrier: &HashMap<Instruction<'m>, u64>,
    uniform: &mut dyn FnMut(Value<'m>) -> bool,
    same: &mut dyn FnMut(Value<'m>, Value<'m>) -> bool,
) -> bool {
    if each_way_leaves_alike(segments, start, state_of_barrier, uniform) {
        return true;
    }
    let mut ways = Ways {
        segments,
        state_of_barrier,
        uniform,
        same,
        memo: HashMap::new(),
    };
    ways.decision(start).is_some()
}

/// [`leave_together`]'s first test: each branch on a condition the threads may not share
/// reaches one exit at most.
fn each_way_leaves_alike<'m>(
    segments: &Segments<'m>,
    start: usize,
    state_of_barrier: &HashMap<Instruction<'m>, u64>,
    uniform: &mut dyn FnMut(Value<'m>) -> bool,
) -> bool {
    let region = segments.region(start);
    let mut exits: HashMap<usize, BTreeSet<u64>> = region
        .iter()
        .map(|&s| {
            let segment = segments.list[s];
            let own = match segment.barrier {
                Some(barrier) => state_of_barrier.get(&barrier).copied(),
                None => segment
                    .block
                    .terminator()
                    .is_some_and(|t| t.instruction().opcode() == InstructionOpcode::Return)
                    .then_some(0),
            };
            (s, own.into_iter().collect())
        })
        .collect();
    // Loops inside the region: the exits reachable from each segment, to a fixed point.
    let mut changed = true;
    while changed {
        changed = false;
        for &s in &region {
            if segments.list[s].barrier.is_some() {
                continue;
            }
            let reached: BTreeSet<u64> = segments.successors[s]
                .iter()
                .flat_map(|next| exits[next].iter().copied())
                .collect();
            let own = exits.get_mut(&s).expect("a segment of the region");
            let before = own.len();
            own.extend(reached);
            changed |= own.len() != before;
        }
    }
    region.iter().all(|&s| {
        let segment = segments.list[s];
        let mut ways: Vec<usize> = segments.successors[s].clone();
        ways.sort_unstable();
        ways.dedup();
        if segment.barrier.is_some() || ways.len() < 2 {
            return true;
        }
        let condition = segment
            .block
            .terminator()
            .and_then(|t| t.instruction().operand(0));
        condition.is_some_and(&mut *uniform) || exits[&s].len() <= 1
    })
}

/// How a thread's exit from a segment is chosen: one exit (`None` where the way leaves through
/// none, as a panic does), or by a condition every thread holds alike, between the decisions
/// of its two ways. A merged barrier's way (`hotspot`'s `if computed` after its step) is each
/// thread's own, but each of its ways leaves by the block's `if i == iteration - 1`.
#[derive(Clone)]
enum Decision<'m> {
    Exit(Option<u64>),
    On(Value<'m>, Box<[Decision<'m>; 2]>),
}

/// The facts [`Ways::decision`] reads.
struct Ways<'a, 'm> {
    segments: &'a Segments<'m>,
    state_of_barrier: &'a HashMap<Instruction<'m>, u64>,
    uniform: &'a mut dyn FnMut(Value<'m>) -> bool,
    same: &'a mut dyn FnMut(Value<'m>, Value<'m>) -> bool,
    /// Each segment's decision, `None` while it is computed (a loop) or where none holds.
    memo: HashMap<usize, Option<Decision<'m>>>,
}

impl<'m> Ways<'_, 'm> {
    /// The decision of a thread's exit from segment `s`; `None` where a condition the threads
    /// may not share chooses it, or the way loops.
    fn decision(&mut self, s: usize) -> Option<Decision<'m>> {
        if let Some(known) = self.memo.get(&s) {
            return known.clone();
        }
        self.memo.insert(s, None);
        let decision = self.compute(s);
        self.memo.insert(s, decision.clone());
        decision
    }

    fn compute(&mut self, s: usize) -> Option<Decision<'m>> {
        let segment = self.segments.list[s];
        if let Some(barrier) = segment.barrier {
            return Some(Decision::Exit(self.state_of_barrier.get(&barrier).copied()));
        }
        let terminator = segment.block.terminator()?.instruction();
        if terminator.opcode() == InstructionOpcode::Return {
            return Some(Decision::Exit(Some(0)));
        }
        let ways = self.segments.successors[s].clone();
        let mut decisions = Vec::with_capacity(ways.len());
        for way in ways {
            decisions.push(self.decision(way)?);
        }
        let Some(first) = decisions.first().cloned() else {
            return Some(Decision::Exit(None));
        };
        let mut one = Some(first);
        for d in &decisions[1..] {
            one = one.and_then(|o| self.merged(&o, d));
        }
        if one.is_some() {
            return one;
        }
        let condition = terminator.operand(0)?;
        match <[Decision<'m>; 2]>::try_from(decisions) {
            Ok(two)
                if terminator.opcode() == InstructionOpcode::Br && (self.uniform)(condition) =>
            {
                Some(Decision::On(condition, Box::new(two)))
            }
            _ => None,
        }
    }

    /// One decision for both `a` and `b` where they choose alike (a way that leaves through
    /// none chooses as the other).
    fn merged(&mut self, a: &Decision<'m>, b: &Decision<'m>) -> Option<Decision<'m>> {
        match (a, b) {
            (Decision::Exit(None), other) | (other, Decision::Exit(None)) => Some(other.clone()),
            (Decision::Exit(x), Decision::Exit(y)) => (x == y).then(|| a.clone()),
            (Decision::On(c, ways), Decision::On(d, other)) if (self.same)(*c, *d) => {
                let first = self.merged(&ways[0], &other[0])?;
                let second = self.merged(&ways[1], &other[1])?;
                Some(Decision::On(*c, Box::new([first, second])))
            }
            _ => None,
        }
    }
}

/// The states a thread leaves the region starting at segment `start` with, on the ways open to
/// it: a branch whose condition `decide` answers goes that way alone (a comparison the
/// region's copy knows, a constant). Exits as [`leave_together`]'s.
pub(super) fn exit_states<'m>(
    segments: &Segments<'m>,
    start: usize,
    state_of_barrier: &HashMap<Instruction<'m>, u64>,
    decide: &mut dyn FnMut(Value<'m>) -> Option<bool>,
) -> BTreeSet<u64> {
    let mut states = BTreeSet::new();
    let mut seen = vec![false; segments.list.len()];
    let mut work = vec![start];
    while let Some(s) = work.pop() {
        if std::mem::replace(&mut seen[s], true) {
            continue;
        }
        let segment = segments.list[s];
        if let Some(barrier) = segment.barrier {
            states.extend(state_of_barrier.get(&barrier));
            continue;
        }
        let Some(terminator) = segment.block.terminator() else {
            continue;
        };
        if terminator.instruction().opcode() == InstructionOpcode::Return {
            states.insert(0);
            continue;
        }
        let ways = &segments.successors[s];
        let condition = terminator.as_branch().and_then(|b| b.condition());
        match condition.and_then(&mut *decide) {
            Some(true) => work.extend(ways.first()),
            Some(false) => work.extend(ways.get(1)),
            None => work.extend(ways.iter().copied()),
        }
    }
    states
}

/// What `condition` (an `i1`) is where the comparisons of `known` have their answers and the
/// thread's `x` is `x`, if given (`is_thread_x` names it); `None` where that does not decide
/// it.
pub(super) fn decided<'m>(
    condition: Value<'m>,
    known: &HashMap<Instruction<'m>, bool>,
    x: Option<u64>,
    is_thread_x: &dyn Fn(Value<'m>) -> bool,
) -> Option<bool> {
    use InstructionOpcode as Op;
    if let Some(c) = condition.const_zext_value() {
        return Some(c != 0);
    }
    let i = condition.as_instruction()?;
    if let Some(&answer) = known.get(&i) {
        return Some(answer);
    }
    let operand = |k: u32| i.operand(k).and_then(|v| decided(v, known, x, is_thread_x));
    match i.opcode() {
        Op::And => match (operand(0), operand(1)) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), Some(true)) => Some(true),
            _ => None,
        },
        Op::Or => match (operand(0), operand(1)) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), Some(false)) => Some(false),
            _ => None,
        },
        Op::Xor => Some(operand(0)? != operand(1)?),
        Op::Select => {
            let way = if operand(0)? { 1 } else { 2 };
            operand(way)
        }
        Op::ICmp => compared_with_x(i, x?, is_thread_x),
        _ => None,
    }
}

/// The answer of `compare`, of the thread's `x` (widened) with a constant, where `x` is `x`.
fn compared_with_x<'m>(
    compare: Instruction<'m>,
    x: u64,
    is_thread_x: &dyn Fn(Value<'m>) -> bool,
) -> Option<bool> {
    use inkwell::IntPredicate as P;
    let predicate = compare.as_value().as_icmp()?.predicate();
    let (a, b) = (compare.operand(0)?, compare.operand(1)?);
    // Each side as (unsigned, signed): `x` is a thread's index, far below any sign bit.
    let sides = |v: Value<'m>| Some((v.const_zext_value()?, signed_constant(v)?));
    let own = (x, x as i64);
    let ((u, s), (v, t)) = if widened_thread_x(a, is_thread_x) {
        (own, sides(b)?)
    } else if widened_thread_x(b, is_thread_x) {
        (sides(a)?, own)
    } else {
        return None;
    };
    Some(match predicate {
        P::EQ => u == v,
        P::NE => u != v,
        P::ULT => u < v,
        P::ULE => u <= v,
        P::UGT => u > v,
        P::UGE => u >= v,
        P::SLT => s < t,
        P::SLE => s <= t,
        P::SGT => s > t,
        P::SGE => s >= t,
    })
}

/// The constant integer `v` sign-extended from its width.
pub(super) fn signed_constant(v: Value<'_>) -> Option<i64> {
    let raw = v.const_zext_value()?;
    let shift = 64 - v.ty().int_width()?.min(64);
    Some(((raw << shift) as i64) >> shift)
}
