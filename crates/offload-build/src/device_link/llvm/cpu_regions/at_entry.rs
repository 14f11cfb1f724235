//! Values every thread of a region holds alike from the region's start, though no value of
//! the block computes them once: what the block's slots hold as the region starts (a loop
//! counter around barriers, `hotspot`'s pyramid step `i`), a constant or block value the
//! region stores into such a slot before reading it (the first trip's `i = 0`), and pure
//! instructions over those (`i + 1`, `14 - i`). Where a row's cuts are computed they are
//! computed once for the row, so that `IN_RANGE(tx, i + 1, 14 - i)` cuts it as a test of `x`
//! against a block value does.
#![forbid(unsafe_code)]

use std::collections::{HashMap, HashSet};

use inkwell::values::InstructionOpcode;

use super::super::ir::{Block, Instruction, Value};
use super::emit::{Emitter, RegionCode, computed_once};
use super::kinds::Kinds;
use super::uniform::{is_pure, is_pure_call};

/// How deep [`Emitter::at_entry`] follows operands and stores.
const DEPTH: u32 = 8;

/// A value of a region as its start gives it to every thread.
pub(super) enum AtEntry<'m> {
    /// A constant, or a value the block computes once.
    Once(Value<'m>),
    /// What block slot `k` ([`Emitter::block_slots`]) holds as the region starts.
    Slot(usize),
    /// A pure instruction of the region, each operand such a value.
    Op(Instruction<'m>, Vec<AtEntry<'m>>),
}

impl<'m> AtEntry<'m> {
    /// The constant it is, if it is one.
    pub(super) fn constant(&self) -> Option<Value<'m>> {
        match self {
            Self::Once(v) if v.is_constant_int() => Some(*v),
            _ => None,
        }
    }

    /// Whether it is `other`'s value: the same values computed once and slots, through the
    /// same integer operations (two loads of a counter on two ways of a branch).
    pub(super) fn same_as(&self, other: &Self) -> bool {
        use InstructionOpcode as Op;
        match (self, other) {
            (Self::Once(a), Self::Once(b)) => a == b,
            (Self::Slot(a), Self::Slot(b)) => a == b,
            (Self::Op(i, a), Self::Op(j, b)) => {
                let alike = match (i.as_value().as_icmp(), j.as_value().as_icmp()) {
                    (Some(p), Some(q)) => p.predicate() == q.predicate(),
                    (None, None) => matches!(
                        i.opcode(),
                        Op::Add
                            | Op::Sub
                            | Op::Mul
                            | Op::And
                            | Op::Or
                            | Op::Xor
                            | Op::Shl
                            | Op::LShr
                            | Op::AShr
                            | Op::ZExt
                            | Op::SExt
                            | Op::Trunc
                    ),
                    _ => false,
                };
                (i == j
                    || alike && i.opcode() == j.opcode() && i.as_value().ty() == j.as_value().ty())
                    && a.len() == b.len()
                    && a.iter().zip(b).all(|(a, b)| a.same_as(b))
            }
            _ => false,
        }
    }
}

/// The block where a row's cuts are computed (the row's loops follow it), and what was
/// computed there: each body value's copy, and each value frozen.
pub(super) struct RowEntry<'m> {
    block: Block<'m>,
    made: HashMap<Value<'m>, Value<'m>>,
    frozen: HashMap<Value<'m>, Value<'m>>,
}

impl<'m> RowEntry<'m> {
    pub(super) fn new(block: Block<'m>) -> Self {
        RowEntry {
            block,
            made: HashMap::new(),
            frozen: HashMap::new(),
        }
    }
}

/// Whether `pointer`'s only uses are loads from it and stores to it: nothing else writes it.
fn only_loaded_and_stored(pointer: Value<'_>) -> bool {
    pointer.users().into_iter().all(|u| {
        u.as_instruction().is_some_and(|u| match u.opcode() {
            InstructionOpcode::Load => true,
            InstructionOpcode::Store => u.operand(0) != Some(pointer),
            _ => false,
        })
    })
}

impl<'m> Emitter<'_, 'm> {
    /// `v`, a value of `code`'s region, as every thread of the region has it from the
    /// region's start; `None` where a thread's own work, a branch or a memory other than the
    /// block's slots decides it.
    pub(super) fn at_entry(
        &self,
        v: Value<'m>,
        code: &RegionCode<'m>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> Option<AtEntry<'m>> {
        self.at_entry_within(v, code, kinds, DEPTH)
    }

    fn at_entry_within(
        &self,
        v: Value<'m>,
        code: &RegionCode<'m>,
        kinds: &mut Kinds<'_, 'm>,
        depth: u32,
    ) -> Option<AtEntry<'m>> {
        if computed_once(v, kinds) {
            return Some(AtEntry::Once(v));
        }
        let i = v.as_instruction()?;
        let segment = *self.segments.of_instruction.get(&i)?;
        if depth == 0 || code.segments.binary_search(&segment).is_err() {
            return None;
        }
        if i.opcode() == InstructionOpcode::Load {
            return self.loaded_at_entry(i, segment, code, kinds, depth);
        }
        if !is_pure(i.opcode()) && !is_pure_call(i) {
            return None;
        }
        let operands = (0..i.num_operands())
            .map(|k| self.at_entry_within(i.operand(k)?, code, kinds, depth - 1))
            .collect::<Option<Vec<_>>>()?;
        Some(AtEntry::Op(i, operands))
    }

    /// What the load `i` (in `segment`) reads, where it reads a block slot: the value the
    /// last store to the slot before it stores, on the one way the region reaches it, else
    /// the slot as the region starts.
    fn loaded_at_entry(
        &self,
        i: Instruction<'m>,
        segment: usize,
        code: &RegionCode<'m>,
        kinds: &mut Kinds<'_, 'm>,
        depth: u32,
    ) -> Option<AtEntry<'m>> {
        if i.is_volatile() || i.is_atomic() {
            return None;
        }
        let pointer = i.operand(0)?;
        let k = self.block_slots.iter().position(|s| s.body == pointer)?;
        if !only_loaded_and_stored(pointer) {
            return None;
        }
        let mut seen = HashSet::new();
        let (mut at, mut upto) = (segment, Some(i));
        loop {
            let s = self.segments.list[at];
            let mut next = s.start.or_else(|| s.block.first_instruction());
            let mut stored = None;
            while let Some(j) = next.filter(|&j| Some(j) != upto && Some(j) != s.barrier) {
                if j.opcode() == InstructionOpcode::Store && j.operand(1) == Some(pointer) {
                    stored = j.operand(0);
                }
                next = j.next();
            }
            if let Some(value) = stored {
                return self.at_entry_within(value, code, kinds, depth - 1);
            }
            if at == self.region_starts[code.region] {
                return Some(AtEntry::Slot(k));
            }
            if !seen.insert(at) {
                return None;
            }
            let mut before = code.segments.iter().copied().filter(|&p| {
                self.segments.list[p].barrier.is_none() && self.segments.successors[p].contains(&at)
            });
            let (Some(only), None) = (before.next(), before.next()) else {
                return None;
            };
            (at, upto) = (only, None);
        }
    }

    /// `value` computed for the row, frozen: once for the block where the block computes it
    /// ([`Emitter::frozen_once`]), else at the end of `row`'s block, once for each value.
    pub(super) fn frozen_at_row_entry(
        &mut self,
        value: &AtEntry<'m>,
        row: &mut RowEntry<'m>,
    ) -> std::result::Result<Value<'m>, String> {
        let v = self.materialize(value, row)?;
        if matches!(value, AtEntry::Once(_)) {
            return Ok(self.frozen_once(v));
        }
        if let Some(f) = row.frozen.get(&v) {
            return Ok(*f);
        }
        self.builder.position_at_end(row.block);
        let f = self.builder.build_freeze(v, c"");
        row.frozen.insert(v, f);
        Ok(f)
    }

    /// `value` computed at the end of `row`'s block, each body value of it once.
    fn materialize(
        &mut self,
        value: &AtEntry<'m>,
        row: &mut RowEntry<'m>,
    ) -> std::result::Result<Value<'m>, String> {
        match value {
            AtEntry::Once(v) => self.hoist(*v),
            AtEntry::Slot(k) => {
                let slot = self.block_slots[*k];
                self.builder.position_at_end(row.block);
                let current = self.builder.build_load(slot.ty, slot.current, c"at.entry");
                Ok(current.as_value())
            }
            AtEntry::Op(i, operands) => {
                if let Some(v) = row.made.get(&i.as_value()) {
                    return Ok(*v);
                }
                let mut values = Vec::with_capacity(operands.len());
                for (k, operand) in (0u32..).zip(operands) {
                    values.push((k, self.materialize(operand, row)?));
                }
                let copied = self.copy_at_end(row.block, *i, &values);
                row.made.insert(i.as_value(), copied);
                Ok(copied)
            }
        }
    }
}
