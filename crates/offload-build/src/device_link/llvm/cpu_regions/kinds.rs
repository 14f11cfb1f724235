//! What each value of a body is to the thread loops: each thread's own, computed again, or
//! computed once per block.

use std::collections::HashMap;

use inkwell::values::InstructionOpcode;
use offload_format::abi;

use super::super::ir::{Instruction, Value};
use super::hooks::{Complete, callee};
use super::uniform::{is_division, is_pure, is_pure_call};

/// What a value of the body is to the thread loops.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Kind {
    /// Each thread's own, from memory or control flow: kept in a slot where it lives across a
    /// barrier.
    Varying,
    /// Computed from the thread's indices and per-block values alone, without memory: computed
    /// again where a region uses it rather than kept.
    Recomputed,
    /// The same for every thread of a block and safe to compute before the loops: computed
    /// once per block.
    Hoistable,
}

/// The kinds of the body's values, memoized.
pub(super) struct Kinds<'a, 'm> {
    pub(super) hooks: &'a Complete<'m>,
    pub(super) params: Value<'m>,
    pub(super) memo: HashMap<Value<'m>, Kind>,
}

impl<'m> Kinds<'_, 'm> {
    pub(super) fn of(&mut self, value: Value<'m>) -> Kind {
        if let Some(kind) = self.memo.get(&value) {
            return *kind;
        }
        // A cycle through phis is varying: the memo says so while the value is computed.
        self.memo.insert(value, Kind::Varying);
        let kind = self.compute(value);
        self.memo.insert(value, kind);
        kind
    }

    pub(super) fn compute(&mut self, value: Value<'m>) -> Kind {
        let Some(i) = value.as_instruction() else {
            return if value.is_argument() && value != self.params {
                Kind::Varying
            } else {
                Kind::Hoistable
            };
        };
        let operands = |this: &mut Self, i: Instruction<'m>| {
            let mut kind = Kind::Hoistable;
            for op in i.instruction().as_value().operands() {
                match this.of(op) {
                    Kind::Varying => return Kind::Varying,
                    Kind::Recomputed => kind = Kind::Recomputed,
                    Kind::Hoistable => {}
                }
            }
            kind
        };
        use InstructionOpcode as Op;
        match i.opcode() {
            _ if is_pure_call(i) => operands(self, i),
            Op::Call => {
                let call = i.as_value().as_call().expect("a call");
                let Some(f) = callee(call) else {
                    return Kind::Varying;
                };
                if f == self.hooks.index {
                    let which = call.arg(0).and_then(|a| a.const_zext_value());
                    return match which {
                        Some(0..3) => Kind::Recomputed,
                        Some(3..12) => Kind::Hoistable,
                        Some(w) if w == u64::from(abi::CPU_IR_RANK) => Kind::Recomputed,
                        _ => Kind::Varying,
                    };
                }
                if self.hooks.gives_block_memory(f)
                    && call.args().all(|a| a.is_constant() || !a.is_instruction())
                {
                    return Kind::Hoistable;
                }
                Kind::Varying
            }
            Op::Load => {
                let pointer = i.operand(0).expect("a load's pointer");
                if i.is_volatile() || i.is_atomic() {
                    return Kind::Varying;
                }
                if self.is_parameter_memory(pointer, 2) {
                    Kind::Hoistable
                } else {
                    Kind::Varying
                }
            }
            op if is_pure(op) => operands(self, i),
            // Not computed before the loops (a division by zero the body guards against would
            // trap), but again where used: the body computed it before with the same operands.
            op if is_division(op) => match operands(self, i) {
                Kind::Varying => Kind::Varying,
                _ => Kind::Recomputed,
            },
            _ => Kind::Varying,
        }
    }

    /// Whether `pointer` points into the launch's parameters: the parameter array (`depth`
    /// 1) or a parameter's value (`depth` 2), both unchanged during the launch.
    pub(super) fn is_parameter_memory(&mut self, pointer: Value<'m>, depth: u32) -> bool {
        if pointer == self.params {
            return true;
        }
        let Some(i) = pointer.as_instruction() else {
            return false;
        };
        match i.opcode() {
            InstructionOpcode::GetElementPtr => {
                let base = i.operand(0).expect("a GEP's base");
                i.as_value()
                    .operands()
                    .skip(1)
                    .all(|idx| self.of(idx) == Kind::Hoistable)
                    && self.is_parameter_memory(base, depth)
            }
            InstructionOpcode::Load if depth > 1 => {
                let inner = i.operand(0).expect("a load's pointer");
                !i.is_volatile() && self.is_parameter_memory(inner, depth - 1)
            }
            _ => false,
        }
    }
}
