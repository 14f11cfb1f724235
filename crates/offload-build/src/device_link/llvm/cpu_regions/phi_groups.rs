//! Values that share a phi's slot: a value updated under a branch (`if t < s { sum += x }`, a
//! reduction's tree level) is a phi of its old value and the new one, and with a slot of its
//! own each thread copies the old value into it on the way that does not update, which makes
//! a region whose other threads would do nothing past the branch do something (no trimming).
//! Where the old value is stored into the phi's slot where it is made instead (or is a phi of
//! the same slot), that copy is left out: the slot holds the old value still. Only copies on
//! the way of the threads past a bound on their `x` index are left out so: elsewhere the
//! shared slots made kernels slower (a loop's value at its exit in its loop's slot).
#![forbid(unsafe_code)]

use std::collections::{HashMap, HashSet};

use super::super::ir::{Block, Instruction, Value};
use super::trim::widened_thread_x;

/// Whether `block` ends in a branch on a comparison of the thread's `x` index (widened or
/// not) with another value.
fn branches_on_thread_x<'m>(block: Block<'m>, is_thread_x: &dyn Fn(Value<'m>) -> bool) -> bool {
    let Some(terminator) = block.terminator() else {
        return false;
    };
    if terminator.num_successors() != 2 {
        return false;
    }
    let Some(compare) = terminator
        .instruction()
        .operand(0)
        .and_then(|c| c.as_icmp())
    else {
        return false;
    };
    [compare.operand(0), compare.operand(1)]
        .into_iter()
        .flatten()
        .any(|v| widened_thread_x(v, is_thread_x))
}

/// The slot groups of `phis` (none of `forwarded`): each phi, and each value stored into its
/// group's slot where it is made, to its group's first member. A phi `Q` joins the group of
/// a value `W` among its incoming values where, in the group so made, no store to the slot
/// lies on a way from where `W` is made to the end of a block from which `Q` takes `W`
/// ([`copies_hold`]).
pub(super) fn phi_groups<'m>(
    phis: &[Instruction<'m>],
    forwarded: &HashSet<Instruction<'m>>,
    is_thread_x: &dyn Fn(Value<'m>) -> bool,
) -> HashMap<Instruction<'m>, Instruction<'m>> {
    let mut lead: HashMap<Instruction<'m>, Instruction<'m>> = HashMap::new();
    let mut members: HashMap<Instruction<'m>, Vec<Instruction<'m>>> = HashMap::new();
    let groupable = |phi: &Instruction<'m>| {
        !forwarded.contains(phi)
            && phi.as_value().as_phi().is_some_and(|p| {
                p.incomings()
                    .all(|(v, _)| v.as_instruction().is_none_or(|i| !forwarded.contains(&i)))
            })
    };
    for &q in phis.iter().filter(|q| groupable(q)) {
        let Some(as_phi) = q.as_value().as_phi() else {
            continue;
        };
        // Only copies on the way of the threads past a bound on their `x` index, which the
        // copy keeps from being trimmed: elsewhere a group's slot made `sum_and_max` (a
        // loop's value at its exit) 1.3x and `hotspot` 1.06x slower.
        let olds: Vec<Instruction<'m>> = as_phi
            .incomings()
            .filter(|(_, pred)| branches_on_thread_x(*pred, is_thread_x))
            .filter_map(|(value, _)| value.as_instruction())
            .filter(|w| {
                *w != q
                    && w.as_value().ty() == q.as_value().ty()
                    && if w.as_value().is_phi() {
                        groupable(w)
                    } else {
                        // Calls stay apart: the index and turn hooks' are values the CPU
                        // link makes again in each loop, not slots' contents.
                        w.as_terminator().is_none()
                            && !w.as_value().is_alloca()
                            && w.as_value().as_call().is_none()
                    }
            })
            .collect();
        for w in olds {
            let (a, b) = (*lead.get(&w).unwrap_or(&w), *lead.get(&q).unwrap_or(&q));
            if a == b {
                continue;
            }
            let of = |l: Instruction<'m>| members.get(&l).cloned().unwrap_or_else(|| vec![l]);
            let merged: Vec<Instruction<'m>> = of(a).into_iter().chain(of(b)).collect();
            if !copies_hold(&merged) {
                continue;
            }
            for &m in &merged {
                lead.insert(m, a);
            }
            members.remove(&b);
            members.insert(a, merged);
        }
    }
    lead
}

/// Where a store into a group's slot lies.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Store<'m> {
    /// At a block's end (a phi's incoming value).
    End(Block<'m>),
    /// Right after an instruction (a value of the group where it is made).
    After(Instruction<'m>),
}

/// Whether every copy a slot shared by `group` leaves out reads the value it copies: for each
/// phi of the group taking another member `W` from a block `X`, no other store into the slot
/// reaches `X`'s end from where `W` is made short of making `W` again, and none is at `X`'s
/// end (stores at one block's end are in no known order).
fn copies_hold<'m>(group: &[Instruction<'m>]) -> bool {
    let in_group: HashSet<Instruction<'m>> = group.iter().copied().collect();
    let mut stores: Vec<Store<'m>> = Vec::new();
    let mut copies: Vec<(Instruction<'m>, Block<'m>)> = Vec::new();
    for &member in group {
        match member.as_value().as_phi() {
            Some(phi) => {
                for (value, pred) in phi.incomings() {
                    match value.as_instruction().filter(|w| in_group.contains(w)) {
                        Some(w) => copies.push((w, pred)),
                        None => stores.push(Store::End(pred)),
                    }
                }
            }
            None => stores.push(Store::After(member)),
        }
    }
    copies.iter().all(|&(w, at)| {
        stores
            .iter()
            .filter(|s| **s != Store::After(w))
            .all(|&s| !reaches(s, at, w))
    })
}

/// Whether a store at `from` reaches the end of block `at` without passing where `made` is
/// made (its block: a phi is made at its block's start, and any other value before the
/// block's end).
fn reaches<'m>(from: Store<'m>, at: Block<'m>, made: Instruction<'m>) -> bool {
    let home = made.block();
    let start = match from {
        Store::End(block) => {
            if block == at {
                return true;
            }
            block
        }
        Store::After(i) => {
            let block = i.block();
            // `made` after `i` in its block is made again before the block's end.
            let made_after = block == home
                && !made.as_value().is_phi()
                && std::iter::successors(i.next(), |n| n.next()).any(|n| n == made);
            if made_after {
                return false;
            }
            if block == at {
                return true;
            }
            block
        }
    };
    let mut seen = HashSet::new();
    let mut next: Vec<Block<'m>> = start
        .terminator()
        .into_iter()
        .flat_map(|t| t.successors())
        .collect();
    while let Some(block) = next.pop() {
        if block == home || !seen.insert(block) {
            continue;
        }
        if block == at {
            return true;
        }
        next.extend(block.terminator().into_iter().flat_map(|t| t.successors()));
    }
    false
}
