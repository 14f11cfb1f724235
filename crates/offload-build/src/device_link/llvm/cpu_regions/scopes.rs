//! Alias scopes for the entry point's lane storage. The threads' states and each per-thread
//! local's lanes are parts of one buffer at offsets known only at run time, so LLVM cannot
//! tell them apart, nor from the block's shared arrays and the kernel's buffers: a region's
//! thread loop that copies a thread's value from one local to another, or stores a shared
//! tile beside a local, got run-time overlap checks, and loops of fewer threads than the
//! checks cost (24 on x86-64-v4) ran scalar. Each part gets a scope of its own; every access
//! through a part says so and that it touches no other part, and, where no address into the
//! buffer leaves the entry point's own loads and stores, every other access says it touches
//! none of them.

use std::collections::{HashMap, HashSet};

use inkwell::values::InstructionOpcode;

use super::super::ir::{Function, Instruction, MetadataNode, Module, Value};
use super::hooks::callee;

/// Intrinsics that take an address into the buffer without keeping or returning it.
const ADDRESS_ONLY_INTRINSICS: [&[u8]; 4] = [
    b"llvm.lifetime.",
    b"llvm.memcpy.",
    b"llvm.memmove.",
    b"llvm.memset.",
];

/// Which part of the buffer a pointer points into.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Part {
    /// The `n`th part.
    Of(usize),
    /// One of several (a phi or select of addresses into different parts).
    Several,
}

/// Tags the loads and stores of `function` (an entry point just emitted) for the buffer whose
/// parts start at `parts` (the first the buffer's start; each part's accesses go through
/// addresses computed from its start), naming the scopes after `function`.
pub(super) fn scope_lane_accesses<'m>(
    module: Module<'m>,
    function: Function<'m>,
    parts: &[Value<'m>],
) {
    let Some(&buffer) = parts.first() else {
        return;
    };
    let (derived, escapes) = addresses_into(buffer);
    let name = String::from_utf8_lossy(function.name()).into_owned();
    let domain = module.metadata_node(Some(&format!("{name} lanes")), &[]);
    let scopes: Vec<MetadataNode<'m>> = (0..parts.len())
        .map(|k| module.metadata_node(Some(&format!("{name} lanes {k}")), &[domain]))
        .collect();
    let alias_scope = module.metadata_kind("alias.scope");
    let noalias = module.metadata_kind("noalias");
    let starts: HashMap<Value<'m>, usize> =
        parts.iter().enumerate().map(|(k, v)| (*v, k)).collect();
    let mut part_of = HashMap::new();
    let accesses: Vec<Instruction<'m>> = function
        .blocks()
        .flat_map(|b| b.instructions())
        .filter(|i| {
            matches!(
                i.opcode(),
                InstructionOpcode::Load | InstructionOpcode::Store
            )
        })
        .collect();
    let add = |i: Instruction<'m>, kind, extra: Vec<MetadataNode<'m>>| {
        let mut list = i
            .metadata(kind)
            .map(|n| n.node_operands())
            .unwrap_or_default();
        list.extend(extra);
        i.set_metadata(kind, module.metadata_node(None, &list));
    };
    for access in accesses {
        let address_operand = u32::from(access.opcode() == InstructionOpcode::Store);
        let Some(address) = access.operand(address_operand) else {
            continue;
        };
        if address.is_alloca() {
            // The entry point's own locals, which LLVM tells apart from the rest itself.
            continue;
        }
        if derived.contains(&address) {
            let mut visiting = HashSet::new();
            if let Some(Part::Of(k)) = part(address, &starts, &mut part_of, &mut visiting) {
                let others = (0..parts.len()).filter(|&j| j != k).map(|j| scopes[j]);
                add(access, alias_scope, vec![scopes[k]]);
                add(access, noalias, others.collect());
            }
        } else if !escapes {
            add(access, noalias, scopes.clone());
        }
    }
}

/// The values that are addresses computed from `buffer` (through GEPs, casts, phis and
/// selects), and whether one of them leaves the function's loads, stores and comparisons:
/// stored, passed to a call, turned into an integer.
fn addresses_into(buffer: Value<'_>) -> (HashSet<Value<'_>>, bool) {
    let mut derived = HashSet::from([buffer]);
    let mut work = vec![buffer];
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
                Op::BitCast | Op::AddrSpaceCast | Op::Phi => true,
                Op::Select => true,
                Op::Load | Op::ICmp => false,
                Op::Store | Op::AtomicRMW => {
                    escapes |= i.operand(1) != Some(address) || i.operand(0) == Some(address);
                    false
                }
                Op::AtomicCmpXchg => {
                    escapes |= i.operand(0) != Some(address)
                        || i.operand(1) == Some(address)
                        || i.operand(2) == Some(address);
                    false
                }
                Op::Call => {
                    let name = user.as_call().and_then(callee).map(|f| f.name());
                    let address_only = name.is_some_and(|name| {
                        ADDRESS_ONLY_INTRINSICS.iter().any(|p| name.starts_with(p))
                    });
                    escapes |= !address_only;
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

/// The part `address` (one of the buffer's derived addresses) points into; `None` where only
/// a cycle of phis being visited leads to it.
fn part<'m>(
    address: Value<'m>,
    starts: &HashMap<Value<'m>, usize>,
    memo: &mut HashMap<Value<'m>, Option<Part>>,
    visiting: &mut HashSet<Value<'m>>,
) -> Option<Part> {
    if let Some(&k) = starts.get(&address) {
        return Some(Part::Of(k));
    }
    if let Some(&known) = memo.get(&address) {
        return known;
    }
    let Some(i) = address.as_instruction() else {
        return Some(Part::Several);
    };
    if !visiting.insert(address) {
        return None;
    }
    use InstructionOpcode as Op;
    let sources: Vec<Value<'m>> = match i.opcode() {
        Op::GetElementPtr | Op::BitCast | Op::AddrSpaceCast => i.operand(0).into_iter().collect(),
        Op::Select => [1, 2].into_iter().filter_map(|k| i.operand(k)).collect(),
        Op::Phi => address
            .as_phi()
            .map(|phi| phi.incomings().map(|(v, _)| v).collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    let mut found = None;
    for source in sources {
        found = match (found, part(source, starts, memo, visiting)) {
            (None, x) | (x, None) => x,
            (Some(a), Some(b)) if a == b => Some(a),
            _ => Some(Part::Several),
        };
    }
    let found = found.or(Some(Part::Several));
    visiting.remove(&address);
    // A result that leaned on a phi still being visited is not kept: it may change.
    if visiting.is_empty() {
        memo.insert(address, found);
    }
    found
}
