//! Global atomic adds summed by the worker before one add: a block reduction's last step
//! (`if tid == 0 { total.fetch_add(block_sum) }`) adds to one address from every block, and
//! the workers that run a launch's blocks then took that address's line from each other once
//! a block (`block_sum` spent two fifths of its time at two threads in the `lock add`). Where
//! nothing the blocks do can tell, each worker sums its blocks' adds in a local and adds the
//! sum once, as it leaves its run of blocks.
//!
//! What nothing can tell means here, in an entry point with no fence, no compare-and-swap
//! and no atomic load or store: every read-modify-write of its memory is the same integer
//! operation that combines (`add`, `sub`, `and`, `or`, `xor`, `max`, `min`, `umax`, `umin`),
//! relaxed, whose result nothing uses, at an address that is the same for every block
//! (computed from a kernel parameter alone), and after which the block reads and writes no
//! memory but its own (its locals, lanes, shared memory) before its end. Another block could
//! only read the address while the adds go on by racing with them; the launch's end, where
//! the host reads the total, comes after every worker's add.
#![forbid(unsafe_code)]

use std::collections::HashSet;

use inkwell::values::InstructionOpcode as Op;
use inkwell::{AtomicOrdering, IntPredicate};

use super::super::ir::{AtomicRmwOp, Block, Function, Instruction, Module, Value};
use super::hooks::{Complete, callee};

/// Loads from the parameters' record to a parameter's value: the record holds a pointer to
/// each value.
const PARAMETER_LOADS: u32 = 2;

/// Whether the atomic adds of `body` (one GPU thread, its parameters' record `params`) can
/// be summed per worker: the body has no fence, no compare-and-swap and no atomic load or
/// store, every read-modify-write in it can be summed ([`combining`]), and after each the
/// thread reads and writes no memory but its block's own up to its return (in program order,
/// across barriers: what the block's other threads do after them too).
pub(super) fn adds_can_be_summed<'m>(
    body: Function<'m>,
    params: Value<'m>,
    hooks: &Complete<'m>,
) -> bool {
    let mut adds = Vec::new();
    for i in body.blocks().flat_map(|b| b.instructions()) {
        match i.opcode() {
            Op::Fence | Op::AtomicCmpXchg => return false,
            Op::AtomicRMW if combining(i, params).is_some() => adds.push(i),
            Op::AtomicRMW => return false,
            Op::Load | Op::Store if i.is_atomic() => return false,
            _ => {}
        }
    }
    // Two operations on what may be one address do not commute (an add, then a max).
    let one_operation = adds
        .windows(2)
        .all(|w| w[0].atomic_rmw_op() == w[1].atomic_rmw_op());
    !adds.is_empty() && one_operation && adds.iter().all(|&add| unobserved_after(add, hooks))
}

/// Makes the atomic adds of `entry` (the region entry point of a body whose adds
/// [`adds_can_be_summed`]) local sums, each added once before each return; returns how many.
pub(super) fn sum_adds_per_worker<'m>(module: Module<'m>, entry: Function<'m>) -> usize {
    let Some(params) = entry.params().nth(1).map(|p| p.as_value()) else {
        return 0;
    };
    let instructions: Vec<Instruction<'m>> =
        entry.blocks().flat_map(|b| b.instructions()).collect();
    // Every add, or none: each one's combination is known before the entry changes.
    let Some(adds) = instructions
        .iter()
        .filter(|i| i.opcode() == Op::AtomicRMW)
        .map(|&add| Some((add, combining(add, params)?)))
        .collect::<Option<Vec<_>>>()
    else {
        return 0;
    };
    let returns: Vec<Instruction<'m>> = instructions
        .iter()
        .copied()
        .filter(|i| i.opcode() == Op::Return)
        .collect();
    let Some(first) = entry.entry_block().and_then(|b| b.first_instruction()) else {
        return 0;
    };
    let builder = module.builder();
    let ptr_ty = module.ptr_type(0);
    for &(add, combine) in &adds {
        let ty = combine.value.ty();
        builder.position_before(first);
        let sum = builder.build_alloca(ty, 8, c"worker.sum").as_value();
        let at = builder.build_alloca(ptr_ty, 8, c"worker.sum.at").as_value();
        // Where the sum goes when no block added: a local, so that the add at the end needs
        // no branch.
        let nowhere = builder.build_alloca(ty, 8, c"worker.sum.none").as_value();
        builder.build_store(ty.const_int(combine.identity(), false), sum);
        builder.build_store(nowhere, at);
        for &ret in &returns {
            builder.position_before(ret);
            let address = builder.build_load(ptr_ty, at, c"sum.at").as_value();
            let total = builder.build_load(ty, sum, c"sum").as_value();
            let flush = builder.insert_clone(add);
            flush.set_operand(0, address);
            flush.set_operand(1, total);
        }
        builder.position_before(add);
        builder.build_store(combine.address, at);
        let before = builder.build_load(ty, sum, c"sum").as_value();
        let after = match combine.with {
            Combined::Binary(op) => builder.build_binop(op, before, combine.value, c"sum.added"),
            Combined::Keep(keeps_old) => {
                let keep = builder.build_icmp(keeps_old, before, combine.value, c"sum.keeps");
                builder.build_select(keep, before, combine.value, c"sum.added")
            }
        };
        builder.build_store(after, sum);
        add.erase();
    }
    adds.len()
}

/// How a worker combines the values of one summable read-modify-write.
#[derive(Clone, Copy)]
struct Combine<'m> {
    address: Value<'m>,
    value: Value<'m>,
    bits: u32,
    with: Combined,
}

/// The operation that combines two values of a read-modify-write: its own, but an add for a
/// `sub` (a sum of what is subtracted, subtracted once).
#[derive(Clone, Copy)]
enum Combined {
    /// `add`, `and`, `or`, `xor`.
    Binary(Op),
    /// `max`, `min`, `umax`, `umin`: the comparison that keeps the first value.
    Keep(IntPredicate),
}

impl Combine<'_> {
    /// The value the combination leaves unchanged.
    fn identity(self) -> u64 {
        let ones = u64::MAX >> (64 - self.bits);
        let sign = 1u64 << (self.bits - 1);
        match self.with {
            Combined::Binary(Op::And) | Combined::Keep(IntPredicate::ULE) => ones,
            Combined::Keep(IntPredicate::SGE) => sign,
            Combined::Keep(IntPredicate::SLE) => sign - 1,
            _ => 0,
        }
    }
}

/// How `i` combines where it is a read-modify-write that can be summed: an integer operation
/// that combines, relaxed, not volatile, its result unused, its address computed from the
/// parameters alone.
fn combining<'m>(i: Instruction<'m>, params: Value<'m>) -> Option<Combine<'m>> {
    let with = match i.atomic_rmw_op()? {
        AtomicRmwOp::Binary(Op::Sub) => Combined::Binary(Op::Add),
        AtomicRmwOp::Binary(op @ (Op::Add | Op::And | Op::Or | Op::Xor)) => Combined::Binary(op),
        AtomicRmwOp::Keep(keeps_old) => Combined::Keep(keeps_old),
        _ => return None,
    };
    let (address, value) = (i.operand(0)?, i.operand(1)?);
    let bits = value
        .ty()
        .int_width()
        .filter(|bits| (1..=64).contains(bits))?;
    let summable = i.atomic_ordering() == Some(AtomicOrdering::Monotonic)
        && !i.is_volatile()
        && !i.as_value().has_uses()
        && loads_from_parameters(address, params, &mut HashSet::new())
            .is_some_and(|loads| loads <= PARAMETER_LOADS);
    summable.then_some(Combine {
        address,
        value,
        bits,
        with,
    })
}

/// How many loads deep `v` reads the parameters' record `params` where it is computed from it
/// and constants alone (through address and integer arithmetic); `None` where it is not.
fn loads_from_parameters<'m>(
    v: Value<'m>,
    params: Value<'m>,
    seen: &mut HashSet<Value<'m>>,
) -> Option<u32> {
    if v == params || v.is_constant() {
        return Some(0);
    }
    if !seen.insert(v) {
        return None;
    }
    let i = v.as_instruction()?;
    let operands = |seen: &mut HashSet<Value<'m>>| {
        (0..i.num_operands()).try_fold(0, |deepest: u32, k| {
            let loads = loads_from_parameters(i.operand(k)?, params, seen)?;
            Some(deepest.max(loads))
        })
    };
    match i.opcode() {
        Op::Load if !i.is_volatile() && !i.is_atomic() => {
            loads_from_parameters(i.operand(0)?, params, seen).map(|loads| loads + 1)
        }
        Op::GetElementPtr
        | Op::BitCast
        | Op::AddrSpaceCast
        | Op::ZExt
        | Op::SExt
        | Op::Trunc
        | Op::Add
        | Op::Sub
        | Op::Mul
        | Op::Shl => operands(seen),
        _ => None,
    }
}

/// Whether the thread that makes `add` reads and writes no memory but its block's own after
/// it, up to its return.
fn unobserved_after<'m>(add: Instruction<'m>, hooks: &Complete<'m>) -> bool {
    let mut seen: HashSet<Block<'m>> = HashSet::new();
    let mut work: Vec<Instruction<'m>> = add.next().into_iter().collect();
    while let Some(first) = work.pop() {
        let mut at = Some(first);
        while let Some(i) = at {
            if !touches_only_its_own(i, hooks) {
                return false;
            }
            at = i.next();
        }
        let Some(terminator) = first.block().terminator() else {
            continue;
        };
        for next in terminator.successors() {
            if seen.insert(next) {
                work.extend(next.first_instruction());
            }
        }
    }
    true
}

/// Whether `i` reads and writes no memory but the block's own: a plain load or store of a
/// local, shared memory or a thread-local, a summable add, a hook or an intrinsic without
/// memory.
fn touches_only_its_own<'m>(i: Instruction<'m>, hooks: &Complete<'m>) -> bool {
    match i.opcode() {
        Op::Load => !i.is_atomic() && i.operand(0).is_some_and(|a| is_own(a, hooks)),
        Op::Store => !i.is_atomic() && i.operand(1).is_some_and(|a| is_own(a, hooks)),
        Op::AtomicRMW => true,
        Op::Call => i.as_value().as_call().and_then(callee).is_some_and(|f| {
            hooks.is_hook(f)
                || f.accesses_no_memory()
                || [&b"llvm.lifetime."[..], b"llvm.prefetch", b"llvm.assume"]
                    .iter()
                    .any(|p| f.name().starts_with(p))
        }),
        Op::Fence | Op::AtomicCmpXchg | Op::Invoke => false,
        _ => true,
    }
}

/// Whether `address` is in the block's own memory: computed (through GEPs, casts, selects
/// and phis) from allocas, shared memory or the image's thread-locals alone.
fn is_own<'m>(address: Value<'m>, hooks: &Complete<'m>) -> bool {
    let mut seen = HashSet::new();
    let mut work = vec![address];
    while let Some(a) = work.pop() {
        if !seen.insert(a) {
            continue;
        }
        let sources = super::addresses::sources(a);
        if !sources.is_empty() {
            work.extend(sources);
            continue;
        }
        let own = a.is_alloca()
            || a.as_call()
                .and_then(callee)
                .is_some_and(|f| hooks.gives_block_memory(f));
        if !own {
            return false;
        }
    }
    true
}
