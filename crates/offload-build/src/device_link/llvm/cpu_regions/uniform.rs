//! Which of a kernel body's values kept across barriers are the block's, not each thread's:
//! loop counters and bounds of loops around barriers (`for step in 0..n / TILE`, a halving
//! offset), the same for every thread of a block because every thread computes them alike
//! under the same control flow.
//!
//! The region loops keep such a value once per block instead of once per thread, so it stays
//! invariant in the loop over the block's threads and LLVM computes what depends on it, and
//! the branches on it, once per region. That needs every live thread to run every region
//! together: every barrier is executed uniformly (under conditions the whole block shares), as
//! the CUDA and HIP programming guides require of `__syncthreads` anyway. A thread that leaves
//! on its own (an early `return`, a panic) without reaching a barrier or writing such a value
//! does not count against it: it is done, and the others go on together.
//!
//! A divergence analysis on the body after its phis are demoted to memory: optimistic (every
//! candidate the block's), then a candidate is dropped when a store to it writes a value a
//! thread computes for itself or sits in a block that is control-dependent on a branch with a
//! thread's own condition, until nothing changes.
//!
//! Warp barriers need only their warp's lanes (`if warp_id() == 0 { warp_scan(..) }`): the
//! threads of such a branch run its regions after the others have gone on to the next block
//! barrier, so a candidate is also dropped when a store to it may run between such a warp
//! barrier and the next block barrier (the others would have written it first).
#![forbid(unsafe_code)]

use std::collections::{HashMap, HashSet};

use inkwell::values::InstructionOpcode;

use super::super::ir::{Block, Function, Instruction, Value};

/// The allocas of `candidates` (each thread's slots of `body`) whose value every thread of a
/// block holds alike at every barrier; empty when a barrier may be reached by some threads
/// and not others. `is_barrier` tells the barrier calls; `is_block_value` values that are the
/// same for every thread whatever the control flow (parameters, block indices, constants).
pub fn block_uniform_slots<'m>(
    body: Function<'m>,
    candidates: &[Instruction<'m>],
    is_barrier: &dyn Fn(Instruction<'m>) -> bool,
    is_block_barrier: &dyn Fn(Instruction<'m>) -> bool,
    is_block_value: &mut dyn FnMut(Value<'m>) -> bool,
) -> Vec<Instruction<'m>> {
    let mut slots: HashSet<Value<'m>> = candidates
        .iter()
        .filter(|a| only_loaded_and_stored(a.as_value()))
        .map(|a| a.as_value())
        .collect();
    if slots.is_empty() {
        return Vec::new();
    }
    loop {
        // Which blocks only lead a thread out depends on the slots still taken as the block's.
        let graph = Graph::of(body, &slots, is_barrier);
        let mut values = Uniform {
            slots: &slots,
            is_block_value: &mut *is_block_value,
            memo: HashMap::new(),
        };
        let uniform_blocks = graph.uniformly_executed(&mut values);
        // Which warp barriers some threads reach while others go on, with the ways out
        // counted (a loop left only by a return still ends).
        let behind = graph.barrier_blocks_outside(&graph.executed_by_all(&mut values));
        let late = reached_before_block_barrier(&behind, is_block_barrier);
        let dropped: Vec<Value<'m>> = slots
            .iter()
            .copied()
            .filter(|slot| {
                stores_to(*slot).any(|store| {
                    !uniform_blocks.contains(&store.block())
                        || late.contains(&store.block())
                        || !store.operand(0).is_some_and(|v| values.of(v))
                })
            })
            .collect();
        if dropped.is_empty() {
            if graph
                .barrier_blocks_outside(&uniform_blocks)
                .iter()
                .any(|b| b.instructions().any(is_block_barrier))
            {
                return Vec::new();
            }
            break;
        }
        for slot in dropped {
            slots.remove(&slot);
        }
        if slots.is_empty() {
            return Vec::new();
        }
    }
    candidates
        .iter()
        .copied()
        .filter(|a| slots.contains(&a.as_value()))
        .collect()
}

/// The blocks a thread may run from `from` on before it reaches a block barrier: `from`
/// themselves, and the blocks with a block barrier it reaches (whose stores may come first).
fn reached_before_block_barrier<'m>(
    from: &[Block<'m>],
    is_block_barrier: &dyn Fn(Instruction<'m>) -> bool,
) -> HashSet<Block<'m>> {
    let mut reached: HashSet<Block<'m>> = from.iter().copied().collect();
    let mut stack: Vec<Block<'m>> = from.to_vec();
    while let Some(block) = stack.pop() {
        if block.instructions().any(is_block_barrier) && !from.contains(&block) {
            continue;
        }
        let successors = block.terminator().into_iter().flat_map(|t| t.successors());
        for next in successors {
            if reached.insert(next) {
                stack.push(next);
            }
        }
    }
    reached
}

/// Whether every use of `alloca` is a plain load from it or a plain store to it (not of it).
pub(super) fn only_loaded_and_stored(alloca: Value<'_>) -> bool {
    alloca.users().into_iter().all(|user| {
        let Some(i) = user.as_instruction() else {
            return false;
        };
        if i.is_volatile() || i.is_atomic() {
            return false;
        }
        match i.opcode() {
            InstructionOpcode::Load => true,
            InstructionOpcode::Store => {
                i.operand(1) == Some(alloca) && i.operand(0) != Some(alloca)
            }
            _ => false,
        }
    })
}

/// Whether `op` computes its result from its operands alone, without memory, and cannot trap.
pub fn is_pure(op: InstructionOpcode) -> bool {
    use InstructionOpcode as Op;
    matches!(
        op,
        Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Shl
            | Op::LShr
            | Op::AShr
            | Op::And
            | Op::Or
            | Op::Xor
            | Op::FAdd
            | Op::FSub
            | Op::FMul
            | Op::FNeg
            | Op::GetElementPtr
            | Op::ICmp
            | Op::FCmp
            | Op::Select
            | Op::ZExt
            | Op::SExt
            | Op::Trunc
            | Op::PtrToInt
            | Op::IntToPtr
            | Op::BitCast
            | Op::FPExt
            | Op::FPTrunc
            | Op::FPToSI
            | Op::FPToUI
            | Op::SIToFP
            | Op::UIToFP
            | Op::ExtractValue
            | Op::InsertValue
            | Op::ExtractElement
            | Op::InsertElement
            | Op::ShuffleVector
            | Op::Freeze
    )
}

/// Intrinsics that compute their result from their operands alone, without memory, and cannot
/// trap: LLVM computes them ahead of their branches freely, and so may the thread loops.
pub const PURE_INTRINSICS: [&[u8]; 16] = [
    b"llvm.umin.",
    b"llvm.umax.",
    b"llvm.smin.",
    b"llvm.smax.",
    b"llvm.abs.",
    b"llvm.ctpop.",
    b"llvm.ctlz.",
    b"llvm.cttz.",
    b"llvm.fshl.",
    b"llvm.fshr.",
    b"llvm.bswap.",
    b"llvm.fabs.",
    b"llvm.minnum.",
    b"llvm.maxnum.",
    b"llvm.fma.",
    b"llvm.fmuladd.",
];

/// Whether `i` calls one of the [`PURE_INTRINSICS`].
pub(super) fn is_pure_call(i: Instruction<'_>) -> bool {
    i.opcode() == InstructionOpcode::Call
        && i.as_value()
            .as_call()
            .and_then(|c| c.called_function())
            .is_some_and(|f| PURE_INTRINSICS.iter().any(|n| f.name().starts_with(n)))
}

/// Whether `op` is a division or remainder: pure like [`is_pure`]'s, but a division by zero
/// traps.
pub fn is_division(op: InstructionOpcode) -> bool {
    use InstructionOpcode as Op;
    matches!(
        op,
        Op::UDiv | Op::SDiv | Op::URem | Op::SRem | Op::FDiv | Op::FRem
    )
}

pub(super) fn stores_to<'m>(slot: Value<'m>) -> impl Iterator<Item = Instruction<'m>> {
    slot.users()
        .into_iter()
        .filter_map(|u| u.as_instruction())
        .filter(|i| i.opcode() == InstructionOpcode::Store)
}

/// The values every thread of a block computes alike, given the slots taken as the block's.
pub(super) struct Uniform<'a, 'm> {
    pub(super) slots: &'a HashSet<Value<'m>>,
    pub(super) is_block_value: &'a mut dyn FnMut(Value<'m>) -> bool,
    pub(super) memo: HashMap<Value<'m>, bool>,
}

impl<'m> Uniform<'_, 'm> {
    pub(super) fn of(&mut self, value: Value<'m>) -> bool {
        if let Some(known) = self.memo.get(&value) {
            return *known;
        }
        // No phis are left, so a cycle runs through memory, which loads end.
        self.memo.insert(value, false);
        let uniform = self.compute(value);
        self.memo.insert(value, uniform);
        uniform
    }

    pub(super) fn compute(&mut self, value: Value<'m>) -> bool {
        if (self.is_block_value)(value) {
            return true;
        }
        let Some(i) = value.as_instruction() else {
            return value.is_constant();
        };
        use InstructionOpcode as Op;
        match i.opcode() {
            Op::Load => {
                !i.is_volatile()
                    && !i.is_atomic()
                    && i.operand(0).is_some_and(|p| self.slots.contains(&p))
            }
            _ if is_pure_call(i) => {
                let operands: Vec<Value<'m>> = i.as_value().operands().collect();
                operands.into_iter().all(|op| self.of(op))
            }
            op if is_pure(op) || is_division(op) => {
                let operands: Vec<Value<'m>> = i.as_value().operands().collect();
                operands.into_iter().all(|op| self.of(op))
            }
            _ => false,
        }
    }
}

/// The body's control flow with the blocks that only lead a thread out (to a return or a
/// panic, past no barrier and no store to a candidate slot) taken away: a branch into one of
/// them does not divide the threads that go on.
pub(super) struct Graph<'m> {
    pub(super) blocks: Vec<Block<'m>>,
    /// Successors that do not only lead out; `None` for a block that only leads out.
    pub(super) successors: Vec<Option<Vec<usize>>>,
    /// Each block's terminator's condition, where it has two ways on that do not only lead out.
    pub(super) conditions: Vec<Option<Value<'m>>>,
    /// The blocks with a successor that only leads out.
    pub(super) leaves: Vec<bool>,
    /// Post-dominators (the virtual exit, index `blocks.len()`, included) with a way to the
    /// exit from each block of `leaves`.
    pub(super) post_dominators_leaving: Vec<Vec<bool>>,
    pub(super) barrier_blocks: Vec<Block<'m>>,
}

impl<'m> Graph<'m> {
    pub(super) fn of(
        body: Function<'m>,
        slots: &HashSet<Value<'m>>,
        is_barrier: &dyn Fn(Instruction<'m>) -> bool,
    ) -> Graph<'m> {
        let blocks: Vec<Block<'m>> = body.blocks().collect();
        let index: HashMap<Block<'m>, usize> =
            blocks.iter().enumerate().map(|(i, b)| (*b, i)).collect();
        let all_successors: Vec<Vec<usize>> = blocks
            .iter()
            .map(|b| {
                b.terminator()
                    .map(|t| t.successors().map(|s| index[&s]).collect())
                    .unwrap_or_default()
            })
            .collect();
        let barrier_blocks: Vec<Block<'m>> = blocks
            .iter()
            .copied()
            .filter(|b| b.instructions().any(is_barrier))
            .collect();
        let matters = |b: Block<'m>| {
            b.instructions().any(|i| {
                is_barrier(i)
                    || (i.opcode() == InstructionOpcode::Store
                        && i.operand(1).is_some_and(|p| slots.contains(&p)))
            })
        };
        // A block stays when it reaches a block that matters.
        let n = blocks.len();
        let mut stays: Vec<bool> = blocks.iter().map(|b| matters(*b)).collect();
        let mut changed = true;
        while changed {
            changed = false;
            for b in 0..n {
                if !stays[b] && all_successors[b].iter().any(|&s| stays[s]) {
                    stays[b] = true;
                    changed = true;
                }
            }
        }
        let successors: Vec<Option<Vec<usize>>> = (0..n)
            .map(|b| {
                stays[b].then(|| {
                    let mut kept: Vec<usize> = all_successors[b]
                        .iter()
                        .copied()
                        .filter(|&s| stays[s])
                        .collect();
                    kept.dedup();
                    kept
                })
            })
            .collect();
        let conditions = (0..n)
            .map(|b| {
                let kept = successors[b].as_ref()?;
                let distinct: HashSet<usize> = kept.iter().copied().collect();
                if distinct.len() < 2 {
                    return None;
                }
                blocks[b].terminator()?.instruction().operand(0)
            })
            .collect();
        let leaves: Vec<bool> = (0..n)
            .map(|b| stays[b] && all_successors[b].iter().any(|&s| !stays[s]))
            .collect();
        let leaving = post_dominators(&successors, &leaves);
        Graph {
            blocks,
            successors,
            conditions,
            leaves,
            post_dominators_leaving: leaving,
            barrier_blocks,
        }
    }

    /// The blocks every live thread runs alike: control-dependent on no branch whose
    /// condition is a thread's own. A way out taken by the whole block (a loop's exit on a
    /// condition the block shares) counts as one; one taken by some threads (a thread's early
    /// `return`) does not, as those threads are done. (A loop left only by ways out the
    /// graph drops would have no end, and every block in it would seem to post-dominate every
    /// branch in it, a thread's own among them.)
    pub(super) fn uniformly_executed(&self, values: &mut Uniform<'_, 'm>) -> HashSet<Block<'m>> {
        let left_together: Vec<bool> = self
            .blocks
            .iter()
            .zip(&self.leaves)
            .map(|(block, &leaves)| {
                leaves
                    && block
                        .terminator()
                        .is_some_and(|t| t.instruction().operand(0).is_some_and(|c| values.of(c)))
            })
            .collect();
        let post_dominators = post_dominators(&self.successors, &left_together);
        self.not_control_dependent(values, &post_dominators)
    }

    /// The blocks every thread that does not leave runs, the ways out counted: control-dependent
    /// on no branch whose condition is a thread's own, with post-dominators in which a loop
    /// left only by a return still ends. (Without the ways out, such a loop has no end and
    /// every block seems to post-dominate it, which [`Graph::uniformly_executed`] may take for
    /// barriers every thread reaches, as programs with block barriers under block-uniform
    /// control flow make no difference; a warp barrier under a thread's own branch does.)
    pub(super) fn executed_by_all(&self, values: &mut Uniform<'_, 'm>) -> HashSet<Block<'m>> {
        self.not_control_dependent(values, &self.post_dominators_leaving)
    }

    /// The blocks with a barrier that are not in `blocks`.
    fn barrier_blocks_outside(&self, blocks: &HashSet<Block<'m>>) -> Vec<Block<'m>> {
        self.barrier_blocks
            .iter()
            .copied()
            .filter(|b| !blocks.contains(b))
            .collect()
    }

    fn not_control_dependent(
        &self,
        values: &mut Uniform<'_, 'm>,
        post_dominators: &[Vec<bool>],
    ) -> HashSet<Block<'m>> {
        let n = self.blocks.len();
        let divergent: Vec<usize> = (0..n)
            .filter(|&b| self.conditions[b].is_some_and(|c| !values.of(c)))
            .collect();
        (0..n)
            .filter(|&b| self.successors[b].is_some())
            .filter(|&b| {
                divergent.iter().all(|&branch| {
                    let strictly = post_dominators[branch][b] && b != branch;
                    strictly
                        || !self.successors[branch]
                            .as_deref()
                            .unwrap_or_default()
                            .iter()
                            .any(|&s| post_dominators[s][b])
                })
            })
            .map(|b| self.blocks[b])
            .collect()
    }
}

/// `result[b][d]`: `d` post-dominates `b`, on the blocks that stay (`Some` successors); a
/// block without successors that stay, or one that `leaves`, leads to the virtual exit,
/// index `successors.len()`.
pub(super) fn post_dominators(
    successors: &[Option<Vec<usize>>],
    leaves: &[bool],
) -> Vec<Vec<bool>> {
    let n = successors.len();
    let exit = n;
    let mut sets: Vec<Vec<bool>> = vec![vec![true; n + 1]; n + 1];
    sets[exit] = vec![false; n + 1];
    sets[exit][exit] = true;
    let mut changed = true;
    while changed {
        changed = false;
        for b in (0..n).rev() {
            let Some(next) = &successors[b] else {
                continue;
            };
            let mut meet = vec![true; n + 1];
            let mut targets: Vec<usize> = next.clone();
            if next.is_empty() || leaves[b] {
                targets.push(exit);
            }
            for s in targets {
                for (m, d) in meet.iter_mut().zip(&sets[s]) {
                    *m &= *d;
                }
            }
            meet[b] = true;
            if meet != sets[b] {
                sets[b] = meet;
                changed = true;
            }
        }
    }
    sets
}
