//! Regions whose threads past a bound on their `x` index do nothing: the tree level of a
//! reduction (`if tid < stride { .. }` before the barrier) runs only its first `stride`
//! threads, as a GPU's idle lanes cost nothing. Such a region's loop over a row of threads
//! ends where the bound says, which the row's first thread computes. Regions whose threads
//! past the bound return or wait at a later barrier while the others go on ([`Park`]) run the
//! same way, the threads past it parked.
#![forbid(unsafe_code)]

use inkwell::IntPredicate;
use inkwell::values::InstructionOpcode;

use super::super::ir::{ICmp, Instruction, Value};
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
    /// Which way (successor 0 or 1) the threads below the bound go.
    pub(super) run_way: usize,
    /// Whether `X` is the thread's rank in the block, not its `x` index (only a [`Park`]'s).
    pub(super) by_rank: bool,
    /// `V` where the comparison does not hold it as an operand: `2^k` for `X >> k == 0`.
    pub(super) constant: Option<u64>,
}

/// What a region's trimming needs to know of the body's instructions.
pub(super) struct Facts<'f, 'm> {
    /// Whether a value is the same for every thread of the block.
    pub(super) uniform: &'f mut dyn FnMut(Value<'m>) -> bool,
    /// Whether a value is the thread's `x` index (a call of the index hook for it).
    pub(super) is_thread_x: &'f dyn Fn(Value<'m>) -> bool,
    /// Whether a value is the thread's rank in the block.
    pub(super) is_rank: &'f dyn Fn(Value<'m>) -> bool,
    /// Whether an instruction leaves nothing a later thread or region could see: a load, a
    /// store to a slot the block shares or to a local that does not outlive the segment, a
    /// call of the index hook or of an intrinsic without effects, arithmetic.
    pub(super) is_idle: &'f dyn Fn(Instruction<'m>) -> bool,
    /// Whether an instruction stores to a slot kept per thread: what only the thread itself
    /// reads again, after a barrier.
    pub(super) is_lane_store: &'f dyn Fn(Instruction<'m>) -> bool,
}

/// The trim branch of the region starting at segment `start`, if it has one.
pub(super) fn trim_branch<'m>(
    segments: &Segments<'m>,
    start: usize,
    facts: &mut Facts<'_, 'm>,
) -> Option<Trim<'m>> {
    let region = segments.region(start);
    let within = |s: usize| region.contains(&s);
    for trim in bound_branches(segments, &region, facts) {
        if trim.by_rank {
            continue;
        }
        let s = trim.segment;
        let ways: Vec<usize> = segments.successors[s].clone();
        let run_way = trim.run_way;
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
            return Some(trim);
        }
    }
    None
}

/// Where a region's threads leave it: a barrier, or their return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Exit<'m> {
    Barrier(Instruction<'m>),
    Return,
}

/// A region whose threads leave it apart, at a branch on `X < V` ([`Trim`]'s test): those
/// below the bound for one exit (`run`), the others, doing nothing on the way and storing
/// nothing, for another (`parked`: a barrier where they wait, or their return). A
/// reduction's last warp (`if tid < 32 { ..shuffles.. }`, the others returning) and a scan's
/// first (`if warp == 0 { .. }` before a block barrier) are such regions: the threads below
/// the bound can go on alone, the others parked where they are.
#[derive(Clone, Copy, Debug)]
pub(super) struct Park<'m> {
    pub(super) trim: Trim<'m>,
    pub(super) run: Exit<'m>,
    pub(super) parked: Exit<'m>,
}

/// The park branch of the region starting at segment `start`, if it has one: every thread
/// reaches the branch, doing nothing on the way, and leaves it as [`Park`] says. Branches on
/// `X == C` below the bound (`if tid == 0 { .. }`) are not taken by the parked threads.
pub(super) fn park_branch<'m>(
    segments: &Segments<'m>,
    start: usize,
    facts: &mut Facts<'_, 'm>,
) -> Option<Park<'m>> {
    let region = segments.region(start);
    let within = |s: usize| region.contains(&s);
    for trim in bound_branches(segments, &region, facts) {
        let (s, run_way) = (trim.segment, trim.run_way);
        let ways = &segments.successors[s];
        if ways.len() != 2
            || ways[0] == ways[1]
            || ways.iter().any(|&n| reaches(segments, n, s, &within))
        {
            continue;
        }
        let bound = trim.constant.or_else(|| {
            trim.branch
                .operand(0)
                .and_then(|c| c.as_instruction())
                .and_then(|c| c.operand(1 - trim.x_operand))
                .and_then(|v| v.const_zext_value())
        });
        let inclusive = trim.inclusive;
        let below = |c: u64| bound.is_some_and(|v| if inclusive { c <= v } else { c < v });
        let is_index = if trim.by_rank {
            facts.is_rank
        } else {
            facts.is_thread_x
        };
        let is_x = |v: Value<'m>| widened_thread_x(v, is_index);
        let skipped = reached_past(segments, ways[1 - run_way], &within, &|a| {
            not_taken_below(
                segments.list[a].block.terminator()?.instruction(),
                &is_x,
                &below,
            )
        });
        let is_idle = facts.is_idle;
        let stores_nothing = skipped
            .iter()
            .all(|&d| idle_segment_by(segments, d, usize::MAX, &|i| is_idle(i) && !i.is_store()));
        if !stores_nothing {
            continue;
        }
        let running = reached_past(segments, ways[run_way], &within, &|_| None);
        let (Some(parked), Some(run)) =
            (one_exit(segments, &skipped), one_exit(segments, &running))
        else {
            continue;
        };
        // Every path from the region's start passes the branch, doing nothing on the way; a
        // thread that returns may skip what it keeps for itself after a barrier.
        let is_lane_store = facts.is_lane_store;
        let returns = parked == Exit::Return;
        let idle = |i: Instruction<'m>| is_idle(i) || (returns && is_lane_store(i));
        let before = segments_before(segments, &region, s);
        let prefix_ok = before.iter().all(|&a| {
            idle_segment_by(segments, a, s, &idle)
                && (a == s || segments.successors[a].iter().all(|n| before.contains(n)))
        });
        if prefix_ok && parked != run {
            return Some(Park { trim, run, parked });
        }
    }
    None
}

/// The segments a path inside the region reaches from `from`, not following the successor
/// `skip` names for a segment.
fn reached_past(
    segments: &Segments<'_>,
    from: usize,
    within: &dyn Fn(usize) -> bool,
    skip: &dyn Fn(usize) -> Option<usize>,
) -> Vec<usize> {
    let mut seen = vec![false; segments.list.len()];
    let mut found = Vec::new();
    let mut work = vec![from];
    while let Some(s) = work.pop() {
        if !within(s) || std::mem::replace(&mut seen[s], true) {
            continue;
        }
        found.push(s);
        if segments.list[s].barrier.is_none() {
            let not_taken = skip(s);
            work.extend(
                segments.successors[s]
                    .iter()
                    .enumerate()
                    .filter(|&(k, _)| Some(k) != not_taken)
                    .map(|(_, &n)| n),
            );
        }
    }
    found
}

/// For a branch on `X == C` (or `X != C`) with `C` below the bound: the way (successor index)
/// a thread past the bound does not take.
fn not_taken_below<'m>(
    branch: Instruction<'m>,
    is_x: &dyn Fn(Value<'m>) -> bool,
    below: &dyn Fn(u64) -> bool,
) -> Option<usize> {
    if branch.opcode() != InstructionOpcode::Br || branch.num_operands() != 3 {
        return None;
    }
    let compare = branch.operand(0)?.as_icmp()?;
    let (a, b) = (compare.operand(0)?, compare.operand(1)?);
    let c = match (is_x(a), is_x(b)) {
        (true, false) => b.const_zext_value()?,
        (false, true) => a.const_zext_value()?,
        _ => return None,
    };
    if !below(c) {
        return None;
    }
    match compare.predicate() {
        IntPredicate::EQ => Some(0),
        IntPredicate::NE => Some(1),
        _ => None,
    }
}

/// The one exit the threads in `reached` leave by, where there is one.
pub(super) fn one_exit<'m>(segments: &Segments<'m>, reached: &[usize]) -> Option<Exit<'m>> {
    let mut exits = reached.iter().filter_map(|&d| {
        let segment = segments.list[d];
        match segment.barrier {
            Some(barrier) => Some(Exit::Barrier(barrier)),
            None => segment
                .block
                .terminator()
                .is_some_and(|t| t.instruction().opcode() == InstructionOpcode::Return)
                .then_some(Exit::Return),
        }
    });
    let first = exits.next()?;
    exits.all(|e| e == first).then_some(first)
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
    idle_segment_by(segments, s, branch_segment, facts.is_idle)
}

/// [`idle_segment`], with `is_idle` saying what leaves nothing.
fn idle_segment_by<'m>(
    segments: &Segments<'m>,
    s: usize,
    branch_segment: usize,
    is_idle: &dyn Fn(Instruction<'m>) -> bool,
) -> bool {
    let segment = segments.list[s];
    let mut next = segment.start.or_else(|| segment.block.first_instruction());
    while let Some(i) = next {
        if Some(i) == segment.barrier {
            return true;
        }
        if i.as_terminator().is_some() {
            return s == branch_segment || is_idle(i);
        }
        if !is_idle(i) {
            return false;
        }
        next = i.next();
    }
    true
}

/// The branches of `region`'s segments on a test of the thread's index against a bound.
fn bound_branches<'m>(
    segments: &Segments<'m>,
    region: &[usize],
    facts: &mut Facts<'_, 'm>,
) -> Vec<Trim<'m>> {
    region
        .iter()
        .filter_map(|&s| {
            let segment = segments.list[s];
            if segment.barrier.is_some() {
                return None;
            }
            let branch = segment.block.terminator()?.instruction();
            bound_test(branch, s, facts)
        })
        .collect()
}

/// For a conditional branch on `icmp` of the thread's `x` index (or rank) against a value the
/// block shares, or of the index shifted right against 0 (a warp's number: `warp == 0`).
fn bound_test<'m>(
    branch: Instruction<'m>,
    segment: usize,
    facts: &mut Facts<'_, 'm>,
) -> Option<Trim<'m>> {
    if branch.opcode() != InstructionOpcode::Br || branch.num_operands() != 3 {
        return None;
    }
    let compare = branch.operand(0)?.as_icmp()?;
    let (a, b) = (compare.operand(0)?, compare.operand(1)?);
    let is_x = |v: Value<'m>| widened_thread_x(v, facts.is_thread_x);
    let is_rank = |v: Value<'m>| widened_thread_x(v, facts.is_rank);
    use IntPredicate as P;
    if let Some((run_way, by_rank, constant)) = shift_test(compare, &is_x, &is_rank) {
        return Some(Trim {
            branch,
            segment,
            x_operand: 0,
            inclusive: false,
            run_way,
            by_rank,
            constant: Some(constant),
        });
    }
    let (x_operand, by_rank) = if is_x(a) && (facts.uniform)(b) {
        (0, false)
    } else if is_x(b) && (facts.uniform)(a) {
        (1, false)
    } else if is_rank(a) && (facts.uniform)(b) {
        (0, true)
    } else if is_rank(b) && (facts.uniform)(a) {
        (1, true)
    } else {
        return None;
    };
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
    let (inclusive, run_way) = match predicate {
        P::ULT => (false, 0),
        P::ULE => (true, 0),
        P::UGE => (false, 1),
        P::UGT => (true, 1),
        _ => return None,
    };
    Some(Trim {
        branch,
        segment,
        x_operand,
        inclusive,
        run_way,
        by_rank,
        constant: None,
    })
}

/// `X >> k == 0` (or `!= 0`), `X` the thread's `x` index or rank: `X < 2^k`. Which way the
/// threads below the bound go, whether `X` is the rank, and `2^k`.
fn shift_test<'m>(
    compare: ICmp<'m>,
    is_x: &dyn Fn(Value<'m>) -> bool,
    is_rank: &dyn Fn(Value<'m>) -> bool,
) -> Option<(usize, bool, u64)> {
    if !compare.operand(1)?.is_const_int(0) {
        return None;
    }
    let shift = compare
        .operand(0)?
        .as_instruction()
        .filter(|i| i.opcode() == InstructionOpcode::LShr)?;
    let (index, k) = (shift.operand(0)?, shift.operand(1)?.const_zext_value()?);
    let by_rank = if is_x(index) {
        false
    } else if is_rank(index) {
        true
    } else {
        return None;
    };
    let run_way = match compare.predicate() {
        IntPredicate::EQ => 0,
        IntPredicate::NE => 1,
        _ => return None,
    };
    (k < 32).then_some((run_way, by_rank, 1 << k))
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
