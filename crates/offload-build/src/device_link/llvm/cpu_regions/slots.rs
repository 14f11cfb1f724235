//! Where the values and locals that live across barriers are kept.

use std::collections::{HashMap, HashSet};

use inkwell::values::InstructionOpcode;

use super::super::ir::{Block, Function, Instruction, Module, Value};
use super::hooks::{is_index_call, with_location};
use super::kinds::{Kind, Kinds};
use super::phi_groups::phi_groups;
use super::segments::Segments;

/// The body's slots: one per value or local that lives across a barrier (or is each thread's
/// own across segments), each in the thread's lane storage or, for a value every thread
/// computes alike, one for all.
pub(super) struct Slots<'m> {
    /// Allocas of the body kept per thread: type size in bytes and alignment.
    pub(super) per_thread: Vec<(Instruction<'m>, u64)>,
    /// Allocas of the body kept once (each thread's use ends before the next thread's).
    pub(super) single: Vec<Instruction<'m>>,
    /// Allocas of the body that live across barriers but hold the same value in every thread
    /// at each barrier ([`block_uniform_slots`]): kept once per block.
    pub(super) block: Vec<Instruction<'m>>,
    /// Those of `single` used on both sides of a barrier in a loop around it, each trip's
    /// value its own: candidates for `block` too, as they were when such an alloca was kept
    /// per thread.
    pub(super) scratch_in_loops: Vec<Instruction<'m>>,
}

/// Each phi of `body` made a slot: stored at the end of each predecessor, loaded where the
/// phi was. Returns each load with its slot.
///
/// A phi whose only use is another phi's value from a block that does nothing else
/// (an outer loop's header in front of an inner one's) gets no slot: its incoming values are
/// stored into the other phi's slot at the ends of its own predecessors. A loop counter
/// advanced before a branch on a thread's own condition, and carried to the next trip on both
/// ways, is then stored the same value on both, which the divergence analysis can see.
///
/// A phi that takes on a branch's way a value of its own slot group ([`phi_groups`]) stores
/// nothing there: the slot holds that value still.
pub(super) fn demote_phis<'m>(
    module: Module<'m>,
    body: Function<'m>,
    is_thread_x: &dyn Fn(Value<'m>) -> bool,
) -> HashMap<Instruction<'m>, Value<'m>> {
    let entry = body.entry_block().expect("checked: the body has blocks");
    let builder = module.builder();
    let phis: Vec<Instruction<'m>> = body
        .blocks()
        .flat_map(|b| b.instructions())
        .filter(|i| i.as_value().is_phi())
        .collect();
    let forwarded: HashSet<Instruction<'m>> = phis
        .iter()
        .copied()
        .filter(|phi| forwarded_phi(*phi).is_some())
        .collect();
    let groups = phi_groups(&phis, &forwarded, is_thread_x);
    let mut group_slots: HashMap<Instruction<'m>, Value<'m>> = HashMap::new();
    let mut slot_of = |member: Instruction<'m>, lead: Instruction<'m>| {
        *group_slots.entry(lead).or_insert_with(|| {
            builder.position_at_start(entry);
            let ty = member.as_value().ty();
            builder.build_alloca(ty, 0, c"phi.slot").as_value()
        })
    };
    // A value of a group that is no phi goes into the slot where it is made.
    for (&member, &lead) in &groups {
        if member.as_value().is_phi() {
            continue;
        }
        let slot = slot_of(member, lead);
        let after = member
            .next()
            .expect("a value is followed by its block's terminator");
        builder.position_before(after);
        builder.build_store(member.as_value(), slot);
    }
    let mut loads = Vec::new();
    for phi in phis.iter().filter(|phi| !forwarded.contains(*phi)) {
        let ty = phi.as_value().ty();
        let lead = groups.get(phi).copied();
        let slot = slot_of(*phi, lead.unwrap_or(*phi));
        let as_phi = phi.as_value().as_phi().expect("a phi");
        let incoming: Vec<(Value<'m>, Block<'m>)> = as_phi
            .incomings()
            .flat_map(|(value, pred)| match value.as_instruction() {
                Some(inner) if forwarded.contains(&inner) => {
                    let inner = inner.as_value().as_phi().expect("a phi");
                    inner.incomings().collect::<Vec<_>>()
                }
                _ => vec![(value, pred)],
            })
            .collect();
        for &(value, pred) in &incoming {
            // A value of the group: the slot holds it still.
            let shared = value
                .as_instruction()
                .is_some_and(|v| lead.is_some() && groups.get(&v).copied() == lead);
            if shared {
                continue;
            }
            // Where the predecessor's one predecessor stored the same value already, the slot
            // holds it: a store here would be the only one some threads run.
            let stored_before = pred
                .single_predecessor()
                .is_some_and(|before| incoming.iter().any(|&(v, p)| p == before && v == value));
            if stored_before {
                continue;
            }
            let terminator = pred.terminator().expect("a predecessor ends");
            builder.position_before(terminator.instruction());
            builder.build_store(value, slot);
        }
        loads.push((*phi, slot, ty));
    }
    let mut slot_of_load = HashMap::new();
    for (phi, slot, ty) in loads {
        let block = phi.block();
        let first = block
            .instructions()
            .find(|i| !i.as_value().is_phi())
            .expect("a block ends with a terminator");
        builder.position_before(first);
        let load = builder.build_load(ty, slot, c"phi.load");
        phi.as_value().replace_all_uses_with(load.as_value());
        slot_of_load.insert(load, slot);
    }
    // The phis a forwarded one feeds go first: until then they use it.
    for phi in phis.iter().filter(|phi| !forwarded.contains(*phi)) {
        phi.erase();
    }
    for phi in forwarded {
        phi.erase();
    }
    slot_of_load
}

/// The phi `phi` only forwards to, where it does nothing else: `phi`'s block holds phis and a
/// branch to the other phi's block alone, `phi`'s one use is the other phi, its values are no
/// phis, and its predecessors are none of the other block's (whose ends then store one value
/// each).
fn forwarded_phi<'m>(phi: Instruction<'m>) -> Option<Instruction<'m>> {
    let block = phi.block();
    let terminator = block.terminator()?;
    if terminator.num_successors() != 1
        || block
            .instructions()
            .any(|i| !i.as_value().is_phi() && i != terminator.instruction())
    {
        return None;
    }
    let target = terminator.successor(0)?;
    let user = phi.as_value().single_use()?.user().as_instruction()?;
    if user.block() != target || !user.as_value().is_phi() || user == phi {
        return None;
    }
    let outer = user.as_value().as_phi()?;
    let own = phi.as_value().as_phi()?;
    let target_preds: HashSet<Block<'m>> = outer.incomings().map(|(_, b)| b).collect();
    if own
        .incomings()
        .any(|(value, pred)| target_preds.contains(&pred) || pred == block || value.is_phi())
    {
        return None;
    }
    Some(user)
}

/// Whether `users` of `load` (a phi's load at the start of its block) may load its `slot`
/// again instead: no store to the slot lies on a path from the load to one of them, short of
/// the load itself running again. A loop's accumulator then keeps one slot across the
/// barriers in its loop, rather than being copied into a second one at each trip.
fn slot_still_holds<'m>(load: Instruction<'m>, slot: Value<'m>, users: &[Instruction<'m>]) -> bool {
    let home = load.block();
    let mut stored_after: HashSet<Instruction<'m>> = HashSet::new();
    let mut blocks = Vec::new();
    let mut seen = HashSet::new();
    for store in slot.users().into_iter().filter_map(|u| u.as_instruction()) {
        if !(store.as_value().is_store() && store.operand(1) == Some(slot)) {
            continue;
        }
        let mut next = store.next();
        while let Some(i) = next {
            stored_after.insert(i);
            next = i.next();
        }
        blocks.extend(
            store
                .block()
                .terminator()
                .into_iter()
                .flat_map(|t| t.successors()),
        );
    }
    while let Some(block) = blocks.pop() {
        if block == home {
            // Up to the load, which reads the slot afresh.
            stored_after.extend(block.instructions().take_while(|i| *i != load));
            continue;
        }
        if !seen.insert(block) {
            continue;
        }
        stored_after.extend(block.instructions());
        blocks.extend(block.terminator().into_iter().flat_map(|t| t.successors()));
    }
    users.iter().all(|u| !stored_after.contains(u))
}

/// Each value used in another segment than its own made a slot (except the index hook's
/// calls and values computed once per block, which the loops have anyway).
pub(super) fn demote_across_segments<'m>(
    module: Module<'m>,
    body: Function<'m>,
    segments: &Segments<'m>,
    kinds: &mut Kinds<'_, 'm>,
    phi_slots: &HashMap<Instruction<'m>, Value<'m>>,
) -> std::result::Result<(), String> {
    let entry = body.entry_block().expect("checked: the body has blocks");
    let builder = module.builder();
    let instructions: Vec<Instruction<'m>> = body.blocks().flat_map(|b| b.instructions()).collect();
    let copies = compute_local_addresses_where_used(module, &instructions, segments);
    let segment_of = |i: &Instruction<'m>| {
        segments
            .of_instruction
            .get(i)
            .or_else(|| copies.get(i))
            .copied()
    };
    for i in instructions {
        let value = i.as_value();
        if value.ty().is_void()
            || value.is_alloca()
            || is_index_call(i, kinds.hooks)
            || kinds.of(value) != Kind::Varying
        {
            continue;
        }
        let users = users_elsewhere(i, segments.of_instruction[&i], segment_of);
        if users.is_empty() {
            continue;
        }
        if i.as_terminator().is_some() {
            return Err(with_location(
                "a value defined by a block's terminator lives across a barrier",
                i,
            ));
        }
        let ty = value.ty();
        let (slot, load_name) = match phi_slots.get(&i) {
            Some(&slot) if slot_still_holds(i, slot, &users) => (slot, c"phi.reload"),
            _ => {
                builder.position_at_start(entry);
                let slot = builder.build_alloca(ty, 0, c"live.slot").as_value();
                let next = i.next().expect("a non-terminator has a next instruction");
                builder.position_before(next);
                builder.build_store(value, slot);
                (slot, c"live.load")
            }
        };
        for user in users {
            builder.position_before(user);
            let load = builder.build_load(ty, slot, load_name);
            user.replace_operand(value, load.as_value());
        }
    }
    Ok(())
}

/// The instructions that use `i`'s value in another segment than `home`, as `segment_of`
/// tells an instruction's (those it knows nothing of among them).
fn users_elsewhere<'m>(
    i: Instruction<'m>,
    home: usize,
    segment_of: impl Fn(&Instruction<'m>) -> Option<usize>,
) -> Vec<Instruction<'m>> {
    i.as_value()
        .users()
        .into_iter()
        .filter_map(|u| u.as_instruction())
        .filter(|u| segment_of(u) != Some(home))
        .collect()
}

/// Whether `value` is an address in a local: a `getelementptr` of an alloca or of such an
/// address.
fn is_local_address(value: Value<'_>) -> bool {
    value.is_gep()
        && value
            .operands()
            .next()
            .is_some_and(|base| base.is_alloca() || is_local_address(base))
}

/// Each address in a local used in another segment than its own (LLVM hoists them to the
/// entry) computed again before each such use, the chain of addresses it derives from with it:
/// a slot would hold an address of the local and so hide its accesses from
/// `classify_allocas`. The indices stay as they are, for the slots of values to carry where
/// they vary. Returns each copy's segment.
fn compute_local_addresses_where_used<'m>(
    module: Module<'m>,
    instructions: &[Instruction<'m>],
    segments: &Segments<'m>,
) -> HashMap<Instruction<'m>, usize> {
    let builder = module.builder();
    let mut copies = HashMap::new();
    for &i in instructions {
        let value = i.as_value();
        if !is_local_address(value) {
            continue;
        }
        let home = segments.of_instruction[&i];
        let users = users_elsewhere(i, home, |u| segments.of_instruction.get(u).copied());
        for user in users {
            let Some(&segment) = segments.of_instruction.get(&user) else {
                continue;
            };
            let copy = copy_address(&builder, i, user, segment, &mut copies);
            user.replace_operand(value, copy.as_value());
        }
    }
    copies
}

/// A copy of the local address `address` (and of the addresses it derives from) just before
/// `before`, in `segment`.
fn copy_address<'m>(
    builder: &super::super::ir::Builder<'m>,
    address: Instruction<'m>,
    before: Instruction<'m>,
    segment: usize,
    copies: &mut HashMap<Instruction<'m>, usize>,
) -> Instruction<'m> {
    let base = address.operand(0).expect("a getelementptr has a base");
    let base_copy = match base.as_instruction() {
        Some(inner) if is_local_address(base) => {
            Some(copy_address(builder, inner, before, segment, copies))
        }
        _ => None,
    };
    builder.position_before(before);
    let copy = builder.insert_clone(address);
    if let Some(inner) = base_copy {
        copy.replace_operand(base, inner.as_value());
    }
    copies.insert(copy, segment);
    copy
}

/// Where the memory of each alloca of `body` goes: per thread when it is live across a barrier
/// (read after the barrier before a store of all of it or the start of its lifetime), once
/// otherwise: a local used only between two barriers of a loop around them is the loop's
/// scratch, not a thread's state. Where its address escapes (is stored somewhere) its
/// accesses cannot all be seen: per thread when a barrier lies on a path between two of them.
pub(super) fn classify_allocas<'m>(
    module: Module<'m>,
    body: Function<'m>,
    segments: &Segments<'m>,
) -> std::result::Result<Slots<'m>, String> {
    let reach = segments.reachability();
    let position: HashMap<Instruction<'m>, usize> = body
        .blocks()
        .flat_map(|b| b.instructions())
        .enumerate()
        .map(|(n, i)| (i, n))
        .collect();
    let mut predecessors = vec![Vec::new(); segments.list.len()];
    for (s, next) in segments.successors.iter().enumerate() {
        for &t in next {
            predecessors[t].push(s);
        }
    }
    let crossings: Vec<(usize, usize)> = segments
        .list
        .iter()
        .enumerate()
        .filter_map(|(s, seg)| Some((s, segments.after_barrier[&seg.barrier?])))
        .collect();
    let entry = body.entry_block().expect("checked: the body has blocks");
    let allocas: Vec<Instruction<'m>> = entry
        .instructions()
        .filter(|i| i.as_value().is_alloca())
        .collect();
    let mut slots = Slots {
        per_thread: Vec::new(),
        single: Vec::new(),
        block: Vec::new(),
        scratch_in_loops: Vec::new(),
    };
    for alloca in allocas {
        let (ty, align) = alloca.alloca_type().expect("an alloca");
        if align > 64 {
            return Err(with_location(
                "a local aligned to more than 64 bytes lives across a barrier",
                alloca,
            ));
        }
        let count = alloca
            .operand(0)
            .and_then(|n| n.const_zext_value())
            .ok_or_else(|| with_location("a local of a dynamic length", alloca))?;
        let bytes = module.abi_size(ty) * count;
        let uses = local_uses(alloca.as_value());
        let escapes = uses.escapes;
        let accesses: Vec<usize> = uses
            .users
            .iter()
            .filter_map(|(i, _)| segments.of_instruction.get(i).copied())
            .collect();
        let on_a_path_through_a_barrier = || {
            crossings.iter().any(|&(before, after)| {
                accesses.iter().any(|&a| reach[a][before])
                    && accesses.iter().any(|&b| reach[after][b])
            })
        };
        let crosses = match segment_uses(module, &uses, alloca, bytes, segments, &position) {
            Some(uses) => live_across_a_barrier(&uses, segments, &predecessors),
            None => on_a_path_through_a_barrier(),
        };
        if !crosses && !escapes && on_a_path_through_a_barrier() {
            slots.scratch_in_loops.push(alloca);
        }
        if crosses || escapes {
            slots.per_thread.push((alloca, bytes.max(1)));
        } else {
            slots.single.push(alloca);
        }
    }
    Ok(slots)
}

/// How a segment uses an alloca's memory.
#[derive(Clone, Copy, Default)]
struct SegmentUse {
    /// It reads the memory (or may: any access that does not replace it all) before anything
    /// replaces it: the segment reads what it enters with.
    reads_first: bool,
    /// It replaces the memory: a store of the whole alloca, or the start or end of the local's
    /// lifetime (`llvm.lifetime.*`, after which the memory holds nothing).
    writes: bool,
}

/// Each segment's use of `alloca` (of `bytes` bytes) from its `uses`; `None` where its address
/// escapes, so that its accesses cannot all be found.
fn segment_uses<'m>(
    module: Module<'m>,
    uses: &LocalUses<'m>,
    alloca: Instruction<'m>,
    bytes: u64,
    segments: &Segments<'m>,
    position: &HashMap<Instruction<'m>, usize>,
) -> Option<Vec<SegmentUse>> {
    use InstructionOpcode as Op;
    if uses.escapes {
        return None;
    }
    let base = alloca.as_value();
    let mut first: Vec<Option<(usize, bool)>> = vec![None; segments.list.len()];
    let mut by_segment = vec![SegmentUse::default(); segments.list.len()];
    for &(i, pointer) in &uses.users {
        let replaces = match i.opcode() {
            op if derives_an_address(op) => continue,
            Op::Store => pointer == base && module.abi_size(i.operand(0)?.ty()) == bytes,
            Op::Call => {
                let name = i.as_value().as_call()?.callee_name();
                pointer == base && name.starts_with(b"llvm.lifetime.")
            }
            _ => false,
        };
        let s = *segments.of_instruction.get(&i)?;
        let at = *position.get(&i)?;
        by_segment[s].writes |= replaces;
        if first[s].is_none_or(|(earliest, _)| at < earliest) {
            first[s] = Some((at, replaces));
        }
    }
    for (s, first) in first.into_iter().enumerate() {
        by_segment[s].reads_first = first.is_some_and(|(_, replaces)| !replaces);
    }
    Some(by_segment)
}

/// Whether the memory of an alloca used as `uses` says is live across a barrier: read after it
/// (in the segment that follows, or further on) before anything replaces it.
/// `predecessors` are the segments' own, the inverse of `segments.successors`.
fn live_across_a_barrier(
    uses: &[SegmentUse],
    segments: &Segments<'_>,
    predecessors: &[Vec<usize>],
) -> bool {
    let mut live_in: Vec<bool> = uses.iter().map(|u| u.reads_first).collect();
    let mut work: Vec<usize> = (0..uses.len()).filter(|&s| live_in[s]).collect();
    while let Some(t) = work.pop() {
        for &s in &predecessors[t] {
            if !live_in[s] && !uses[s].writes {
                live_in[s] = true;
                work.push(s);
            }
        }
    }
    segments
        .list
        .iter()
        .filter_map(|segment| segment.barrier)
        .any(|barrier| live_in[segments.after_barrier[&barrier]])
}

/// The instructions that use the memory at an alloca, or an address derived from it, each with
/// the address it uses; and whether the address escapes (is stored, made an integer, or used
/// by something other than an instruction).
struct LocalUses<'m> {
    users: Vec<(Instruction<'m>, Value<'m>)>,
    escapes: bool,
}

/// Whether an instruction of opcode `op` derives an address from its operand (one it then uses
/// in turn), rather than accessing the memory there.
fn derives_an_address(op: InstructionOpcode) -> bool {
    use InstructionOpcode as Op;
    matches!(
        op,
        Op::GetElementPtr | Op::BitCast | Op::AddrSpaceCast | Op::Select | Op::Phi
    )
}

/// The [`LocalUses`] of `pointer`, an alloca.
fn local_uses<'m>(pointer: Value<'m>) -> LocalUses<'m> {
    let mut uses = LocalUses {
        users: Vec::new(),
        escapes: false,
    };
    let mut stack = vec![pointer];
    let mut seen = HashSet::new();
    while let Some(p) = stack.pop() {
        if !seen.insert(p) {
            continue;
        }
        for user in p.users() {
            let Some(i) = user.as_instruction() else {
                uses.escapes = true;
                continue;
            };
            uses.users.push((i, p));
            use InstructionOpcode as Op;
            match i.opcode() {
                op if derives_an_address(op) => stack.push(user),
                Op::Store if i.operand(0) == Some(p) => uses.escapes = true,
                Op::PtrToInt => uses.escapes = true,
                _ => {}
            }
        }
    }
    uses
}
