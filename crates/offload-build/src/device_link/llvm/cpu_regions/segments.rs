//! A body cut at its barriers into segments.

use std::collections::HashMap;

use super::super::ir::{Block, Function, Instruction};

/// A piece of the body between barriers: from the start of `block` (or from the instruction
/// after a barrier) to its terminator or the next barrier.
#[derive(Clone, Copy, Debug)]
pub(super) struct Segment<'m> {
    pub(super) block: Block<'m>,
    /// The first instruction; `None` for the block's first.
    pub(super) start: Option<Instruction<'m>>,
    /// The barrier call that ends it, if one does.
    pub(super) barrier: Option<Instruction<'m>>,
}

/// The body cut at its barriers.
pub(super) struct Segments<'m> {
    pub(super) list: Vec<Segment<'m>>,
    pub(super) of_instruction: HashMap<Instruction<'m>, usize>,
    /// The segment after each barrier call.
    pub(super) after_barrier: HashMap<Instruction<'m>, usize>,
    /// Each segment's successors (after its terminator, or after its barrier).
    pub(super) successors: Vec<Vec<usize>>,
}

impl<'m> Segments<'m> {
    pub(super) fn of(
        body: Function<'m>,
        is_barrier: &dyn Fn(Instruction<'m>) -> bool,
    ) -> Segments<'m> {
        let mut list = Vec::new();
        let mut of_instruction = HashMap::new();
        let mut of_block = HashMap::new();
        let mut after_barrier = HashMap::new();
        for block in body.blocks() {
            of_block.insert(block, list.len());
            list.push(Segment {
                block,
                start: None,
                barrier: None,
            });
            let mut pending_after: Option<Instruction<'m>> = None;
            for i in block.instructions() {
                if let Some(barrier) = pending_after.take() {
                    after_barrier.insert(barrier, list.len());
                    list.push(Segment {
                        block,
                        start: Some(i),
                        barrier: None,
                    });
                }
                let current = list.len() - 1;
                of_instruction.insert(i, current);
                if is_barrier(i) {
                    list[current].barrier = Some(i);
                    pending_after = Some(i);
                }
            }
        }
        let successors = list
            .iter()
            .map(|s| match s.barrier {
                Some(b) => vec![after_barrier[&b]],
                None => s
                    .block
                    .terminator()
                    .map(|t| t.successors().map(|b| of_block[&b]).collect())
                    .unwrap_or_default(),
            })
            .collect();
        Segments {
            list,
            of_instruction,
            after_barrier,
            successors,
        }
    }

    /// The segments of the region starting at segment `start`: those reached from it without
    /// crossing a barrier, in order.
    pub(super) fn region(&self, start: usize) -> Vec<usize> {
        let mut region = Vec::new();
        let mut seen = vec![false; self.list.len()];
        let mut work = vec![start];
        while let Some(s) = work.pop() {
            if std::mem::replace(&mut seen[s], true) {
                continue;
            }
            region.push(s);
            if self.list[s].barrier.is_none() {
                work.extend(self.successors[s].iter().copied());
            }
        }
        region.sort_unstable();
        region
    }

    /// Whether a path leads from segment `from` to segment `to` without leaving segment
    /// `through` (where one is given): within one trip of a loop around its barrier.
    pub(super) fn leads_to_avoiding(&self, from: usize, to: usize, through: Option<usize>) -> bool {
        let mut seen = vec![false; self.list.len()];
        let mut stack = vec![from];
        while let Some(s) = stack.pop() {
            if s == to {
                return true;
            }
            if std::mem::replace(&mut seen[s], true) || Some(s) == through {
                continue;
            }
            stack.extend(self.successors[s].iter().copied());
        }
        false
    }

    /// `reach[a]` holds `b` when a path leads from segment `a` to segment `b` (`a` itself
    /// included).
    pub(super) fn reachability(&self) -> Vec<Vec<bool>> {
        let n = self.list.len();
        (0..n)
            .map(|from| {
                let mut seen = vec![false; n];
                let mut stack = vec![from];
                while let Some(s) = stack.pop() {
                    if std::mem::replace(&mut seen[s], true) {
                        continue;
                    }
                    stack.extend(self.successors[s].iter().copied());
                }
                seen
            })
            .collect()
    }
}
