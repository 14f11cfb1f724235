//! Phis that only restate a value. Where a kernel branches on `x == C` (`if tid == 0`), LLVM
//! may give a later phi the constant `C` on the edge from that branch and `x` on the others:
//! the phi is `x` on every edge, but it is no longer the thread's index to the stages that look
//! for it (a reduction's `if tid < stride` after an `if tid == 0`, the tree levels of a scan's
//! down-sweep, would not be trimmed). Each such phi is replaced by `x`.
#![forbid(unsafe_code)]

use inkwell::IntPredicate;
use inkwell::values::InstructionOpcode;

use super::super::ir::{Block, Function, Value};

/// Replaces each phi of `body` that equals one value on every edge (a constant coming only
/// where that value was just found equal to it) with the value.
pub(super) fn fold_phis_restating_a_value(body: Function<'_>) {
    let Some(entry) = body.entry_block() else {
        return;
    };
    let phis: Vec<_> = body
        .blocks()
        .flat_map(|b| b.instructions())
        .filter_map(|i| i.as_value().as_phi())
        .collect();
    for phi in phis {
        let incomings: Vec<(Value<'_>, Block<'_>)> = phi.incomings().collect();
        let mut values = incomings
            .iter()
            .map(|(v, _)| *v)
            .filter(|v| !v.is_constant_int());
        let Some(x) = values.next() else { continue };
        if values.any(|v| v != x) {
            continue;
        }
        // `x` must be there wherever the phi is: defined before any branch.
        let dominates =
            x.as_argument().is_some() || x.as_instruction().is_some_and(|i| i.block() == entry);
        let restated = incomings
            .iter()
            .filter(|(v, _)| v.is_constant_int())
            .all(|(c, from)| entered_only_equal(*from, x, *c));
        if dominates && restated {
            phi.as_value().replace_all_uses_with(x);
            phi.instruction().erase();
        }
    }
}

/// Whether `block` is entered only from a branch on `x == c` (or on `y == c` where `x` is `y`
/// zero-extended), on its equal way.
fn entered_only_equal<'m>(block: Block<'m>, x: Value<'m>, c: Value<'m>) -> bool {
    let Some(terminator) = block.single_predecessor().and_then(|p| p.terminator()) else {
        return false;
    };
    let Some(compare) = terminator
        .instruction()
        .as_value()
        .as_branch()
        .and_then(|b| b.condition())
        .and_then(|c| c.as_icmp())
    else {
        return false;
    };
    let ways = (terminator.successor(0), terminator.successor(1));
    let equal_way = match compare.predicate() {
        IntPredicate::EQ => ways.0 == Some(block) && ways.1 != Some(block),
        IntPredicate::NE => ways.1 == Some(block) && ways.0 != Some(block),
        _ => false,
    };
    let (Some(a), Some(b)) = (compare.operand(0), compare.operand(1)) else {
        return false;
    };
    let (y, k) = if b.is_constant_int() { (a, b) } else { (b, a) };
    let widened = x
        .as_instruction()
        .filter(|i| i.opcode() == InstructionOpcode::ZExt)
        .and_then(|i| i.operand(0));
    equal_way
        && (y == x || Some(y) == widened)
        && k.const_zext_value()
            .is_some_and(|k| Some(k) == c.const_zext_value())
}
