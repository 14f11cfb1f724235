//! Which regions the threads that start them together also leave together: at the same
//! barrier, or all returning. After such a region's loop over the block's threads, any
//! thread's state is every thread's, so the scheduler's pass over the states is not needed.
#![forbid(unsafe_code)]

use std::collections::{BTreeSet, HashMap};

use inkwell::values::InstructionOpcode;

use super::super::ir::{Instruction, Value};
use super::segments::Segments;

/// Whether every thread that runs the region starting at segment `start` together with the
/// others leaves it where they do: each branch on a condition that may differ between threads
/// (`uniform` says which are the block's) leads to one and the same exit whichever way it
/// goes, as an `if` on the thread's index that joins again before the barrier does. Exits are
/// the states of `state_of_barrier` and 0 for a return; a path that ends in `unreachable` (a
/// panic) leaves through none.
pub(super) fn leave_together<'m>(
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
