//! Upper bounds of unsigned integer values from their arithmetic: enough to tell that the
//! sum of a thread's `x` and a block's offset (`block * dim + x`, a global index) never wraps,
//! so that a test `x + C < V` is a test `x < V - C` that cuts a row of threads.

use inkwell::values::InstructionOpcode;

use super::super::ir::{Instruction, Value};

/// How deep [`most`] follows operands.
const DEPTH: u32 = 8;

/// The largest value `v` (an integer) may take, read unsigned; its type's largest where
/// nothing tighter is known.
fn most(v: Value<'_>, depth: u32) -> u128 {
    let Some(width) = v.ty().int_width().filter(|&w| w <= 64) else {
        return u128::MAX;
    };
    let all = (1u128 << width) - 1;
    if let Some(c) = v.const_zext_value() {
        return u128::from(c);
    }
    let Some(i) = v.as_instruction().filter(|_| depth > 0) else {
        return all;
    };
    let operand = |k: u32| i.operand(k).map_or(all, |o| most(o, depth - 1));
    let constant = |k: u32| i.operand(k).and_then(|o| o.const_zext_value());
    use InstructionOpcode as Op;
    let bound = match i.opcode() {
        Op::ZExt => operand(0),
        Op::Add => operand(0).saturating_add(operand(1)),
        Op::Mul => operand(0).saturating_mul(operand(1)),
        Op::Shl => match constant(1) {
            Some(k) if k < 64 => operand(0).saturating_mul(1 << k),
            _ => all,
        },
        Op::LShr => match constant(1) {
            Some(k) if k < 64 => operand(0) >> k,
            _ => operand(0),
        },
        Op::UDiv => operand(0),
        Op::URem => match constant(1) {
            Some(k) if k > 0 => operand(0).min(u128::from(k) - 1),
            _ => operand(0),
        },
        Op::And => operand(0).min(operand(1)),
        Op::Select => operand(1).max(operand(2)),
        _ => all,
    };
    // A result past the type's largest wrapped somewhere, unless marked `nuw` (its operands'
    // bounds are loose then): nothing is known but the type's.
    if bound > all { all } else { bound }
}

/// Whether the addition `add` never wraps: marked `nuw`, or its operands' largest values
/// summed.
pub(super) fn adds_without_wrapping(add: Instruction<'_>) -> bool {
    if add.has_no_unsigned_wrap() {
        return true;
    }
    let (Some(a), Some(b)) = (add.operand(0), add.operand(1)) else {
        return false;
    };
    let Some(width) = add.as_value().ty().int_width().filter(|&w| w <= 64) else {
        return false;
    };
    most(a, DEPTH).saturating_add(most(b, DEPTH)) < (1u128 << width)
}
