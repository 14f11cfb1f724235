//! A body's dominator tree (Cooper, Harvey and Kennedy's iterative algorithm over the blocks in
//! reverse postorder): the C API has none.
#![forbid(unsafe_code)]

use std::collections::HashMap;

use super::super::ir::{Block, Function, Value};

/// The immediate dominator of each block reachable from a function's entry.
pub(super) struct Dominators<'m> {
    /// The reachable blocks in reverse postorder, the entry first.
    order: Vec<Block<'m>>,
    position: HashMap<Block<'m>, usize>,
    /// Each block's immediate dominator, as a position in `order` (the entry's is itself).
    idom: Vec<usize>,
}

impl<'m> Dominators<'m> {
    pub(super) fn of(function: Function<'m>) -> Self {
        let order = reverse_postorder(function);
        let position: HashMap<Block<'m>, usize> =
            order.iter().enumerate().map(|(k, b)| (*b, k)).collect();
        let mut preds = vec![Vec::new(); order.len()];
        for (k, block) in order.iter().enumerate() {
            for succ in block.terminator().into_iter().flat_map(|t| t.successors()) {
                preds[position[&succ]].push(k);
            }
        }
        const UNKNOWN: usize = usize::MAX;
        let mut idom = vec![UNKNOWN; order.len()];
        if !order.is_empty() {
            idom[0] = 0;
        }
        let mut changed = true;
        while changed {
            changed = false;
            for k in 1..order.len() {
                let mut known = preds[k].iter().copied().filter(|&p| idom[p] != UNKNOWN);
                let Some(first) = known.next() else { continue };
                let new = known.fold(first, |d, p| nearest_common(&idom, p, d));
                if idom[k] != new {
                    idom[k] = new;
                    changed = true;
                }
            }
        }
        Dominators {
            order,
            position,
            idom,
        }
    }

    /// Whether every path from the entry to `b` passes through `a` (both reachable).
    pub(super) fn dominates(&self, a: Block<'m>, b: Block<'m>) -> bool {
        let (Some(&a), Some(&b)) = (self.position.get(&a), self.position.get(&b)) else {
            return false;
        };
        let mut at = b;
        loop {
            if at == a {
                return true;
            }
            if at == 0 || at < a {
                return false;
            }
            at = self.idom[at];
        }
    }

    /// The branch that decides which of two blocks a thread comes from: the condition of
    /// their nearest common dominator's conditional branch, and whether its true way leads to
    /// `froms[0]` (else to `froms[1]`). Each way must lead to its block only: the way's block
    /// has the branch as its only predecessor and dominates the block. The last time a thread
    /// took the branch before leaving one of the blocks, it went that block's way.
    pub(super) fn deciding_branch(&self, froms: [Block<'m>; 2]) -> Option<(Value<'m>, bool)> {
        if froms[0] == froms[1] {
            return None;
        }
        let (a, b) = (
            *self.position.get(&froms[0])?,
            *self.position.get(&froms[1])?,
        );
        let branch = self.order[nearest_common(&self.idom, a, b)];
        let terminator = branch.terminator()?;
        let condition = terminator.as_branch().and_then(|b| b.condition())?;
        let (on_true, on_false) = (terminator.successor(0)?, terminator.successor(1)?);
        if on_true == on_false {
            return None;
        }
        let only_to = |way: Block<'m>, from: Block<'m>| {
            way.single_predecessor() == Some(branch) && self.dominates(way, from)
        };
        if only_to(on_true, froms[0]) && only_to(on_false, froms[1]) {
            Some((condition, true))
        } else if only_to(on_true, froms[1]) && only_to(on_false, froms[0]) {
            Some((condition, false))
        } else {
            None
        }
    }
}

/// The nearest common dominator of the blocks at positions `a` and `b` of the reverse
/// postorder, where `idom` holds each (known) block's immediate dominator.
fn nearest_common(idom: &[usize], mut a: usize, mut b: usize) -> usize {
    while a != b {
        while a > b {
            a = idom[a];
        }
        while b > a {
            b = idom[b];
        }
    }
    a
}

/// The blocks reachable from the entry, in reverse postorder.
fn reverse_postorder<'m>(function: Function<'m>) -> Vec<Block<'m>> {
    let Some(entry) = function.entry_block() else {
        return Vec::new();
    };
    let successors = |b: Block<'m>| -> Vec<Block<'m>> {
        b.terminator()
            .map(|t| t.successors().collect())
            .unwrap_or_default()
    };
    let mut seen = std::collections::HashSet::from([entry]);
    let mut stack = vec![(entry, successors(entry), 0usize)];
    let mut postorder = Vec::new();
    while let Some((block, succs, next)) = stack.last_mut() {
        if let Some(&succ) = succs.get(*next) {
            *next += 1;
            if seen.insert(succ) {
                let s = successors(succ);
                stack.push((succ, s, 0));
            }
        } else {
            postorder.push(*block);
            stack.pop();
        }
    }
    postorder.reverse();
    postorder
}
