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
use super::addresses::{derived_from, sources};

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
    let (derived, escapes) = derived_from(&[buffer]);
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
    if !address.is_instruction() {
        return Some(Part::Several);
    }
    if !visiting.insert(address) {
        return None;
    }
    let mut found = None;
    for source in sources(address) {
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
