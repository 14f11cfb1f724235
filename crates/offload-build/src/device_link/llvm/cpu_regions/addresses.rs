//! Addresses in an entry point: what one is computed from, and which are computed from a set of
//! memory objects and whether one of those leaves the loads and stores (for the `scopes` and
//! `parallel` steps).

use std::collections::HashSet;

use inkwell::values::InstructionOpcode;

use super::super::ir::Value;
use super::hooks::callee;

/// Intrinsics that copy or fill memory through their pointer arguments.
pub(super) const COPY_INTRINSICS: [&[u8]; 3] = [b"llvm.memcpy.", b"llvm.memmove.", b"llvm.memset."];

/// Whether the intrinsic `name` takes an address without keeping or returning it: a lifetime
/// marker or one of the [`COPY_INTRINSICS`].
pub(super) fn takes_address_only(name: &[u8]) -> bool {
    name.starts_with(b"llvm.lifetime.") || COPY_INTRINSICS.iter().any(|p| name.starts_with(p))
}

/// The addresses `address` is computed from: a GEP's or cast's base, a select's two values, a
/// phi's incoming values; none for anything else (an object, an argument, a loaded address).
pub(super) fn sources(address: Value<'_>) -> Vec<Value<'_>> {
    let Some(i) = address.as_instruction() else {
        return Vec::new();
    };
    use InstructionOpcode as Op;
    match i.opcode() {
        Op::GetElementPtr | Op::BitCast | Op::AddrSpaceCast => i.operand(0).into_iter().collect(),
        Op::Select => [1, 2].into_iter().filter_map(|k| i.operand(k)).collect(),
        Op::Phi => address
            .as_phi()
            .map(|phi| phi.incomings().map(|(v, _)| v).collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// The addresses computed from `roots` (through GEPs, casts, phis and selects), the roots
/// among them, and whether one of them leaves the function's memory accesses and comparisons:
/// stored as a value, passed to a call other than those [`takes_address_only`], turned
/// into an integer, returned.
pub(super) fn derived_from<'m>(roots: &[Value<'m>]) -> (HashSet<Value<'m>>, bool) {
    let mut derived: HashSet<Value<'m>> = roots.iter().copied().collect();
    let mut work = roots.to_vec();
    let mut escapes = false;
    while let Some(address) = work.pop() {
        for user in address.users() {
            let Some(i) = user.as_instruction() else {
                escapes = true;
                continue;
            };
            use InstructionOpcode as Op;
            let follows = match i.opcode() {
                Op::GetElementPtr => i.operand(0) == Some(address),
                Op::BitCast | Op::AddrSpaceCast | Op::Phi | Op::Select => true,
                Op::Load | Op::ICmp => false,
                // A store's address is its operand 1, an atomic's its operand 0; the address
                // stored as a value leaves.
                Op::Store => {
                    escapes |= i.operand(0) == Some(address);
                    false
                }
                Op::AtomicRMW | Op::AtomicCmpXchg => {
                    escapes |= i.as_value().operands().skip(1).any(|o| o == address);
                    false
                }
                Op::Call => {
                    let name = user.as_call().and_then(callee).map(|f| f.name());
                    escapes |= !name.is_some_and(takes_address_only);
                    false
                }
                _ => {
                    escapes = true;
                    false
                }
            };
            if follows && derived.insert(user) {
                work.push(user);
            }
        }
    }
    (derived, escapes)
}
