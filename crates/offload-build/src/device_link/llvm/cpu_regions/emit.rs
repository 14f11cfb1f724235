//! The region entry point: each region cloned into a loop over the block's threads, and the
//! scheduler between regions.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use inkwell::IntPredicate;
use inkwell::values::InstructionOpcode;
use offload_format::abi;

use super::super::ir::{
    AtomicRmwOp, Block, Builder, Function, Instruction, Module, Phi, Type, Value,
};
use super::exits::{decided, leave_together};
use super::hooks::{Complete, callee, index_of, is_index_call, with_location};
use super::kinds::{Kind, Kinds};
use super::known::{Cuts, Decided};
use super::parallel::{Alone, ThreadLoops, mark_in_turn, mark_thread_loops_parallel};
use super::scopes::scope_lane_accesses;
use super::segments::Segments;
use super::slots::Slots;
use super::trim::{
    Exit, Facts, Park, Trim, one_exit, park_branch, trim_branch, trim_prefix, widened_thread_x,
};
use super::uniform::PURE_INTRINSICS;
use super::uniform::Uniform;
use super::warps::{
    WarpAt, asks_for_its_warp, lane_against, one_per_warp, warp_part, warp_pieces, warp_value,
};

/// The bit a thread's state carries once it ran in a round of block barriers.
pub(super) const RAN_THIS_ROUND: u64 = 1 << 31;

/// A slot of the body that every thread holds alike at each barrier: each thread of a region
/// starts from `current` in a local of its own (so that a read after the thread's own write
/// sees it) and leaves its value at a barrier in `next`, all threads the same value; the
/// scheduler makes `next` current between regions. Reads of `current` are invariant in the
/// loop over the threads, and so is what is computed from them.
#[derive(Clone, Copy)]
pub(super) struct BlockSlot<'m> {
    pub(super) body: Value<'m>,
    pub(super) ty: Type<'m>,
    pub(super) current: Value<'m>,
    pub(super) next: Value<'m>,
    pub(super) local: Value<'m>,
}

/// The loop counters of one thread of a region's loop.
#[derive(Clone, Copy)]
pub(super) struct ThreadAt<'m> {
    pub(super) xyz: [Value<'m>; 3],
    /// The thread's state.
    pub(super) state: Value<'m>,
    /// `RAN_THIS_ROUND` in a round, else 0: or-ed into the states threads leave with.
    pub(super) flag: Value<'m>,
    /// Where a thread goes once it reached a barrier or returned.
    pub(super) latch: Block<'m>,
    /// The warp of every thread of the loop, where it runs one warp's threads.
    pub(super) warp: Option<WarpAt<'m>>,
}

/// What a clone of a trimmed region for a row's first thread runs: the way to the trim branch,
/// where it records the bound, then on to `rest`; `rest` too where it leaves that way (a
/// branch on a value the block shares), with no bound recorded.
pub(super) struct Probe<'m> {
    trim: Trim<'m>,
    /// The segments on the way, as [`Emitter::clone_region`] keys its copies.
    prefix: HashSet<(Block<'m>, Option<Instruction<'m>>)>,
    rest: Block<'m>,
}

/// Whether a branch of `region` on `compare` (equality where `equal`, else inequality) leads
/// the way of equality to a block that stores to an address the threads share (`shared`).
fn guards_a_uniform_store<'m>(
    compare: Instruction<'m>,
    equal: bool,
    region: &HashSet<Instruction<'m>>,
    shared: &mut dyn FnMut(Value<'m>) -> bool,
) -> bool {
    compare.as_value().users().into_iter().any(|user| {
        let Some(branch) = user
            .as_instruction()
            .filter(|u| u.opcode() == InstructionOpcode::Br && region.contains(u))
        else {
            return false;
        };
        let Some(way) = branch
            .block()
            .terminator()
            .and_then(|t| t.successors().nth(usize::from(!equal)))
        else {
            return false;
        };
        way.instructions()
            .any(|i| i.is_store() && i.operand(1).is_some_and(&mut *shared))
    })
}

/// A row of threads a region's loop runs.
#[derive(Clone, Copy)]
struct Row<'m> {
    /// The region.
    r: usize,
    run: RegionRun,
    y: Value<'m>,
    z: Value<'m>,
    /// The rank of the row's first thread (`i64`).
    row: Value<'m>,
    flag: Value<'m>,
    /// The warp of the row's threads, where the loop runs one warp's threads.
    warp: Option<WarpAt<'m>>,
}

/// The threads of a row that run a region alone ([`Emitter::split_row`]): the values `V` of
/// its comparisons `x == V` or, in a loop over one warp's threads, `lane == V` (at most two),
/// and those comparisons with what each is for the other threads.
#[derive(Default)]
struct SingleThreads<'m> {
    at: Vec<SingleAt<'m>>,
    forced: Decided<'m>,
    /// `V - C` of the comparisons `x + C == V`, by the hoisted `(V, C)`: one thread for each
    /// pair however many comparisons name it.
    differences: Vec<((Value<'m>, Value<'m>), Value<'m>)>,
}

/// A region's instructions, for the analyses of its rows: its own, each of its segments up to
/// its barrier ([`Emitter::region_instructions`]), then those of other regions it computes
/// again ([`Kind::Recomputed`]) where it uses their values (a test of a global index made
/// before a barrier, `let inside = i < n;`, is the region's own test of `x` after it), and all
/// of them as a set.
pub(super) struct RegionCode<'m> {
    pub(super) instructions: Vec<Instruction<'m>>,
    own: usize,
    pub(super) set: HashSet<Instruction<'m>>,
    /// The region, and its segments in order.
    pub(super) region: usize,
    pub(super) segments: Vec<usize>,
}

impl<'m> RegionCode<'m> {
    /// The region's own instructions.
    pub(super) fn own(&self) -> &[Instruction<'m>] {
        &self.instructions[..self.own]
    }
}

/// Whether `v` is one value for the whole block: a constant, or computed once per block.
pub(super) fn computed_once<'m>(v: Value<'m>, kinds: &mut Kinds<'_, 'm>) -> bool {
    v.is_constant_int() || kinds.of(v) == Kind::Hoistable
}

/// Which thread of a row, or of a warp's piece of it, runs a region alone.
#[derive(Clone, Copy, PartialEq)]
enum SingleAt<'m> {
    /// `x == V`.
    X(Value<'m>),
    /// `lane == V`, the lane of the rank or of `x` ([`WarpAt::lane_from_x`]).
    Lane { value: Value<'m>, of_x: bool },
}

/// Of the operands `a`, `b` of a comparison: the other one `V` where one is the thread's `x`
/// (widened), or `V` and `C` where one is `x + C`, in which case the comparison holds for
/// `x == V - C` alone.
fn thread_x_against<'m>(
    a: Value<'m>,
    b: Value<'m>,
    is_thread_x: &dyn Fn(Value<'m>) -> bool,
) -> Option<(Value<'m>, Option<Value<'m>>)> {
    for (x, v) in [(a, b), (b, a)] {
        if widened_thread_x(x, is_thread_x) {
            return Some((v, None));
        }
    }
    for (sum, v) in [(a, b), (b, a)] {
        let Some(add) = sum
            .as_instruction()
            .filter(|i| i.opcode() == InstructionOpcode::Add)
        else {
            continue;
        };
        let (Some(p), Some(q)) = (add.operand(0), add.operand(1)) else {
            continue;
        };
        for (x, c) in [(p, q), (q, p)] {
            if widened_thread_x(x, is_thread_x) {
                return Some((v, Some(c)));
            }
        }
    }
    None
}

/// Whether `compare` decides a branch or a switch of `region` (its instructions and the values
/// it computes again), alone or through `and`s, `or`s, `select`s and extensions of conditions
/// (a merged barrier's way computed again, `select i1 %inside, i32 1, i32 0`), and `known`'s
/// answers do not decide that branch's condition alone (`tx == 0 && col > 0` where the piece
/// knows `tx == 0` is false).
pub(super) fn decides_a_branch<'m>(
    compare: Instruction<'m>,
    region: &HashSet<Instruction<'m>>,
    known: &HashMap<Instruction<'m>, bool>,
) -> bool {
    let mut conditions = vec![compare.as_value()];
    for _ in 0..4 {
        let mut next = Vec::new();
        for c in conditions {
            for user in c.users() {
                let Some(u) = user.as_instruction().filter(|u| region.contains(u)) else {
                    continue;
                };
                match u.opcode() {
                    InstructionOpcode::Br => {
                        let open = u
                            .operand(0)
                            .is_none_or(|c| decided(c, known, None, &|_| false).is_none());
                        if open {
                            return true;
                        }
                    }
                    InstructionOpcode::Switch => return true,
                    InstructionOpcode::And
                    | InstructionOpcode::Or
                    | InstructionOpcode::Select
                    | InstructionOpcode::ZExt => next.push(u.as_value()),
                    _ => {}
                }
            }
        }
        conditions = next;
    }
    false
}

/// The threads of a row a guarded loop tests together: a warp of the CPU device.
const GUARDED_PIECE: u64 = 32;

/// The blocks and values of [`Emitter::guarded_chunks`]' loop over a row's pieces.
#[derive(Clone, Copy)]
struct GuardedChunks<'m> {
    /// The first piece's test.
    head: Block<'m>,
    /// Where a piece with a thread at the barrier goes on to its loop over the threads.
    found: Block<'m>,
    /// Where a piece whose every thread is at the barrier goes on to its loop over them, as
    /// an unguarded one.
    whole: Block<'m>,
    /// The next piece, or the row's end.
    latch: Block<'m>,
    /// The piece's first `x`.
    start: Value<'m>,
    /// Past its last.
    end: Value<'m>,
}

/// Where the threads of a piece of an unguarded region's row leave (`Emitter::piece_exit`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum PieceExit {
    /// At one state, added to the summary.
    Known,
    /// At one state its warp decides: its first thread's, once the piece ran.
    OfItsWarp,
    /// At states that differ between its threads.
    Unknown,
}

/// Which threads a region's loop runs, and where they leave their states.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum RegionRun {
    /// Those whose state is the region's; each leaves its state.
    Guarded,
    /// All, every one at the region's start; each leaves its state.
    Unguarded,
    /// All, every one at the region's start, and they leave it together: in one local.
    Together,
}

/// One region's clone for one thread, under construction.
pub(super) struct RegionClone<'c, 'm> {
    pub(super) at: ThreadAt<'m>,
    /// The per-thread locals' addresses for this thread.
    pub(super) locals: &'c HashMap<Value<'m>, Value<'m>>,
    /// The body's values in the block being cloned: copies, and values computed again.
    pub(super) values: HashMap<Value<'m>, Value<'m>>,
    /// The block being filled.
    pub(super) current: Block<'m>,
}

/// Intrinsics a thread may skip besides the [`PURE_INTRINSICS`]: no memory written, nothing
/// that traps.
const IDLE_INTRINSICS: [&[u8]; 4] = [
    b"llvm.lifetime.",
    b"llvm.dbg.",
    b"llvm.assume",
    b"llvm.experimental.noalias.scope.decl",
];

/// Whether the body's instruction `i` leaves nothing a later thread or region could see: a
/// load, a store to a slot the block shares or to a local no barrier separates from its uses,
/// a call of the index hook or of an intrinsic in [`IDLE_INTRINSICS`], arithmetic.
fn idle_instruction<'m>(
    i: Instruction<'m>,
    hooks: &Complete<'m>,
    block_slots: &HashSet<Value<'m>>,
    single: &HashMap<Value<'m>, Value<'m>>,
) -> bool {
    use InstructionOpcode as Op;
    match i.opcode() {
        Op::Store => {
            !i.is_volatile()
                && !i.is_atomic()
                && i.operand(1)
                    .is_some_and(|p| block_slots.contains(&p) || single.contains_key(&p))
        }
        Op::Load => !i.is_volatile(),
        Op::Call => i.as_value().as_call().and_then(callee).is_some_and(|f| {
            f == hooks.index
                || IDLE_INTRINSICS
                    .iter()
                    .chain(&PURE_INTRINSICS)
                    .any(|n| f.name().starts_with(n))
        }),
        Op::AtomicRMW | Op::AtomicCmpXchg | Op::Fence | Op::Invoke | Op::CallBr => false,
        _ => true,
    }
}

/// Whether `v` is the thread's `x` index: a call of the index hook asking for it.
pub(super) fn is_thread_x<'m>(v: Value<'m>, hooks: &Complete<'m>) -> bool {
    asks_for(v, 0, hooks)
}

/// Whether `v` is the thread's rank in the block: a call of the index hook asking for it.
fn is_rank<'m>(v: Value<'m>, hooks: &Complete<'m>) -> bool {
    asks_for(v, u64::from(abi::CPU_IR_RANK), hooks)
}

/// Whether `v` is a call of the index hook asking for index `which`.
fn asks_for<'m>(v: Value<'m>, which: u64, hooks: &Complete<'m>) -> bool {
    v.as_instruction()
        .is_some_and(|i| is_index_call(i, hooks) && index_of(i) == Ok(which))
}

/// What the region loops fetch ahead of the worker's next block (`ahead.rs`).
pub(super) struct FetchAhead<'m> {
    /// Each region's accesses: the pointer, and whether it is written.
    pub(super) accesses: Vec<Vec<(Value<'m>, bool)>>,
    /// The block's `x` index plus one.
    pub(super) next_block_x: Value<'m>,
}

/// The region entry point under construction.
pub(super) struct Emitter<'a, 'm> {
    pub(super) module: Module<'m>,
    pub(super) hooks: &'a Complete<'m>,
    pub(super) function: Function<'m>,
    pub(super) builder: Builder<'m>,
    pub(super) segments: &'a Segments<'m>,
    pub(super) i32_ty: Type<'m>,
    pub(super) i64_ty: Type<'m>,
    /// The body's parameter array, and the entry point's.
    pub(super) body_params: Value<'m>,
    pub(super) params: Value<'m>,
    /// Where per-block values go: before the end of the block's start.
    pub(super) hoist_point: Instruction<'m>,
    /// Per-block values: the body's values computed once per block.
    pub(super) hoisted: HashMap<Value<'m>, Value<'m>>,
    /// Per-block values frozen where a row branches on them ([`Emitter::frozen_once`]).
    pub(super) frozen: HashMap<Value<'m>, Value<'m>>,
    /// The index hook's values per block (`which` >= 3).
    pub(super) block_values: HashMap<u64, Value<'m>>,
    /// What the rows fetch ahead of the worker's next block, where anything
    /// ([`Emitter::plan_fetch_ahead`]).
    pub(super) fetch_ahead: Option<FetchAhead<'m>>,
    /// The threads of a block.
    pub(super) threads: Value<'m>,
    /// The allocas kept once, as the entry point's allocas.
    pub(super) single: HashMap<Value<'m>, Value<'m>>,
    /// The allocas kept per thread: each one's lanes and size.
    pub(super) lanes: Vec<(Value<'m>, Value<'m>, u64)>,
    /// The threads' states (u32 each): 0 done, else the region each waits to run (1 the
    /// body's start), with [`RAN_THIS_ROUND`] in a round once run.
    pub(super) states: Value<'m>,
    /// The region after each barrier call.
    pub(super) region_of_barrier: HashMap<Instruction<'m>, u64>,
    /// Each region's first segment (region `r` is state `r + 1`).
    pub(super) region_starts: Vec<usize>,
    /// The first state after a barrier whose threads go first (a warp barrier, an interleaved
    /// loop's trip), where the body has one.
    pub(super) first_state_going_first: Option<u64>,
    /// Whether each region starts at a warp barrier: its guarded loop tests a warp's
    /// threads before running them ([`Emitter::guarded_chunks`]).
    pub(super) after_warp_barrier: Vec<bool>,
    /// Where the threads of a region they leave together, run unguarded, leave their state:
    /// one local, not each thread's ([`Emitter::emit_dispatch`] reads it).
    pub(super) together_state: Value<'m>,
    /// The scheduler's last view of the threads' states (the largest, the smallest live one,
    /// whether one is done, whether every live thread is at one of those two), which a
    /// guarded loop updates without a pass over the states where it can
    /// ([`Emitter::emit_schedule`]).
    pub(super) summary: [Value<'m>; 4],
    /// Past the largest rank whose state goes first (a warp barrier's, an interleaved trip's)
    /// at the scheduler's last pass over the states: outside a round, only threads
    /// below it can be at a warp barrier until the next pass, as threads at a block barrier
    /// or done stay so, and those at a warp barrier move to another or out of the warp code.
    /// The guarded loops after warp barriers stop there ([`Emitter::guarded_chunks`]). An
    /// `i32`, as the states: the scan's vector code selects it beside them (an `i64` made the
    /// baseline image's scans of `shfl_scan` 2.5x slower).
    pub(super) going_first_end: Value<'m>,
    /// Each region's trim branch, where its threads leave it together ([`trim_branch`]), or
    /// its park branch ([`park_branch`]).
    pub(super) trims: Vec<Option<Trim<'m>>>,
    /// Each region whose threads past a bound park ([`Park`]), with the state they wait at.
    pub(super) parked_at: Vec<Option<u64>>,
    /// Where the body has such a region, the threads that run while others are parked:
    /// those with `x` below the first (an `i32`) and rank below the second (an `i64`), every
    /// thread otherwise. Every loop of a region run together runs those of its row.
    pub(super) live: Option<[Value<'m>; 2]>,
    /// The trim bound the row's first thread found (`V`, widened to 64 bits), and whether it
    /// reached the trim branch at all.
    pub(super) trim_bound: Value<'m>,
    pub(super) trim_reached: Value<'m>,
    /// The trimmed region whose first thread's way to the trim branch the clone under
    /// construction is.
    pub(super) probing: Option<Probe<'m>>,
    /// The comparisons whose result the region's copy under construction knows: its threads
    /// are none of those [`SingleThreads`] names.
    pub(super) forced: HashMap<Instruction<'m>, bool>,
    /// The clamps of `x` (`llvm.smin` and the like) the current piece knows, with the operand
    /// each returns there ([`Emitter::piece`]).
    pub(super) clamped: HashMap<Instruction<'m>, u32>,
    /// The slots kept once per block, each in three locals of the entry point.
    pub(super) block_slots: Vec<BlockSlot<'m>>,
    pub(super) debug_from: Option<Instruction<'m>>,
    /// The `x` counter's block and latch of each region loop that runs every thread it
    /// visits.
    pub(super) thread_loops: Vec<(Block<'m>, Block<'m>)>,
    /// How the image's vectors run the thread loops.
    pub(super) shape: ThreadLoops,
    /// The summary of the states an unguarded region's loop keeps as it runs
    /// (`piece_exits.rs`), in locals of the entry point: the largest state, the smallest live
    /// one (`u32::MAX` where none), whether a thread is done (an `i1`), past the last rank
    /// going first (an `i32`, 0 where none), the states seen (an `i64`, bit `min(state, 63)`
    /// each).
    pub(super) piece_kept: [Value<'m>; 5],
    /// While an unguarded region's loop is built, whether every piece built so far knows the
    /// one state its threads leave at.
    pub(super) pieces_known: Option<bool>,
    /// Where the unguarded loops that kept the summary go on to the scheduler's next step.
    pub(super) summarized: Vec<Block<'m>>,
}

impl<'a, 'm> Emitter<'a, 'm> {
    /// Emits the entry point `name` from `body`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn emit(
        module: Module<'m>,
        hooks: &'a Complete<'m>,
        body: Function<'m>,
        name: &str,
        segments: &'a Segments<'m>,
        slots: &Slots<'m>,
        kinds: &mut Kinds<'_, 'm>,
        shape: ThreadLoops,
    ) -> std::result::Result<Function<'m>, String> {
        let (i32_ty, i64_ty, ptr_ty) = (module.i32_type(), module.i64_type(), module.ptr_type(0));
        let fn_ty = i32_ty.function_type(&[ptr_ty, ptr_ty, i64_ty, i64_ty], false);
        let function = module.add_function(name, fn_ty);
        if let Some(sp) = body.subprogram() {
            function.set_subprogram(sp);
        }
        let debug_from = body
            .blocks()
            .flat_map(|b| b.instructions())
            .find(|i| i.debug_location().is_some());
        let args: Vec<Value<'m>> = function.params().map(|p| p.as_value()).collect();
        let (launch, params, begin, end) = (args[0], args[1], args[2], args[3]);
        let body_params = kinds.params;
        // Regions: the body's start, then one after each barrier, block barriers first. The
        // threads at a warp barrier, or at the top of an interleaved loop's trip, go before
        // those at a block barrier: a thread that left such a loop early waits at the block's
        // next barrier until the others have left it too.
        let called = |i: Instruction<'m>| i.as_value().as_call().and_then(callee);
        let goes_first = |i: Instruction<'m>| {
            let called = called(i);
            called.is_some() && (called == hooks.warp_barrier || called == hooks.interleave)
        };
        let mut region_of_barrier = HashMap::new();
        let mut region_starts = vec![0usize];
        let mut after_warp_barrier = vec![false];
        let mut first_state_going_first = None;
        for first in [false, true] {
            for seg in &segments.list {
                let Some(b) = seg.barrier else { continue };
                if goes_first(b) != first {
                    continue;
                }
                region_starts.push(segments.after_barrier[&b]);
                let at_warp = called(b);
                after_warp_barrier.push(at_warp.is_some() && at_warp == hooks.warp_barrier);
                let state = region_starts.len() as u64;
                if first && first_state_going_first.is_none() {
                    first_state_going_first = Some(state);
                }
                region_of_barrier.insert(b, state);
            }
        }
        let builder = module.builder();
        let entry = function.append_block(c"entry");
        builder.position_at_end(entry);
        let mut single = HashMap::new();
        for alloca in &slots.single {
            let (ty, align) = alloca.alloca_type().expect("an alloca");
            let copy = builder.build_alloca(ty, align.max(1), c"local");
            single.insert(alloca.as_value(), copy.as_value());
        }
        let block_slots = slots
            .block
            .iter()
            .map(|alloca| {
                let (ty, align) = alloca.alloca_type().expect("an alloca");
                let align = align.max(1);
                BlockSlot {
                    body: alloca.as_value(),
                    ty,
                    current: builder.build_alloca(ty, align, c"block.slot").as_value(),
                    next: builder.build_alloca(ty, align, c"block.next").as_value(),
                    local: builder.build_alloca(ty, align, c"block.local").as_value(),
                }
            })
            .collect();
        let placeholder = builder.build_unreachable();
        let mut emitter = Emitter {
            module,
            hooks,
            function,
            builder,
            segments,
            i32_ty,
            i64_ty,
            body_params,
            params,
            hoist_point: placeholder,
            hoisted: HashMap::new(),
            frozen: HashMap::new(),
            block_values: HashMap::new(),
            fetch_ahead: None,
            threads: params,
            single,
            lanes: Vec::new(),
            states: params,
            together_state: params,
            summary: [params; 4],
            going_first_end: params,
            trims: Vec::new(),
            parked_at: Vec::new(),
            live: None,
            trim_bound: params,
            trim_reached: params,
            probing: None,
            forced: HashMap::new(),
            clamped: HashMap::new(),
            region_of_barrier,
            region_starts,
            first_state_going_first,
            after_warp_barrier,
            block_slots,
            debug_from,
            thread_loops: Vec::new(),
            shape,
            piece_kept: [params; 5],
            pieces_known: None,
            summarized: Vec::new(),
        };
        placeholder.erase();
        emitter.emit_function(entry, [launch, begin, end], slots, kinds)?;
        let parts: Vec<Value<'m>> = std::iter::once(emitter.states)
            .chain(emitter.lanes.iter().map(|(_, lanes, _)| *lanes))
            .collect();
        scope_lane_accesses(module, function, &parts);
        mark_thread_loops_parallel(module, function, hooks.index, &emitter.thread_loops, shape);
        Ok(function)
    }

    pub(super) fn call(&self, f: Function<'m>, args: &[Value<'m>]) -> Value<'m> {
        let call = self.builder.build_call(f, args, c"");
        if let Some(from) = self.debug_from {
            call.instruction().copy_debug_location_from(from);
        }
        call.as_value()
    }

    pub(super) fn const32(&self, v: u64) -> Value<'m> {
        self.i32_ty.const_int(v, false)
    }

    pub(super) fn const64(&self, v: u64) -> Value<'m> {
        self.i64_ty.const_int(v, false)
    }

    pub(super) fn block(&self, name: &std::ffi::CStr) -> Block<'m> {
        self.function.append_block(name)
    }

    pub(super) fn byte_gep(&self, base: Value<'m>, offset: Value<'m>) -> Value<'m> {
        self.builder.build_gep_with_no_wrap_flags(
            self.module.i8_type(),
            base,
            &[offset],
            c"",
            super::super::ir::GepNoWrapFlags::NONE,
        )
    }

    /// Thread `rank`'s state.
    pub(super) fn state_of(&self, rank: Value<'m>) -> Value<'m> {
        let b = &self.builder;
        self.byte_gep(self.states, b.build_mul(rank, self.const64(4), c""))
    }

    pub(super) fn emit_function(
        &mut self,
        entry: Block<'m>,
        [launch, begin, end]: [Value<'m>; 3],
        slots: &Slots<'m>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> std::result::Result<(), String> {
        self.builder.position_at_end(entry);
        let flag_slot = self
            .builder
            .build_alloca(self.i32_ty, 4, c"round.flag")
            .as_value();
        let round_state = self
            .builder
            .build_alloca(self.i32_ty, 4, c"round.state")
            .as_value();
        let round_max = self
            .builder
            .build_alloca(self.i32_ty, 4, c"round.max")
            .as_value();
        self.together_state = self
            .builder
            .build_alloca(self.i32_ty, 4, c"together.state")
            .as_value();
        let i1_ty = self.module.i1_type();
        self.summary = [
            (self.i32_ty, c"summary.max"),
            (self.i32_ty, c"summary.min"),
            (i1_ty, c"summary.done"),
            (i1_ty, c"summary.two"),
        ]
        .map(|(ty, name)| self.builder.build_alloca(ty, 4, name).as_value());
        self.piece_kept = [
            (self.i32_ty, c"pieces.max"),
            (self.i32_ty, c"pieces.min"),
            (i1_ty, c"pieces.done"),
            (self.i32_ty, c"pieces.first.end"),
            (self.i64_ty, c"pieces.seen"),
        ]
        .map(|(ty, name)| self.builder.build_alloca(ty, 4, name).as_value());
        self.going_first_end = self
            .builder
            .build_alloca(self.i32_ty, 4, c"going.first.end")
            .as_value();
        // No thread passed over until a scan has looked.
        self.builder
            .build_store(self.const32(u64::from(u32::MAX)), self.going_first_end);
        self.trim_bound = self
            .builder
            .build_alloca(self.i64_ty, 8, c"trim.bound")
            .as_value();
        self.trim_reached = self
            .builder
            .build_alloca(self.i32_ty, 4, c"trim.reached")
            .as_value();
        self.call(self.hooks.enter, &[launch]);
        let dims: Vec<Value<'m>> = (6..9)
            .map(|w| self.call(self.hooks.index, &[self.const32(w)]))
            .collect();
        let b = &self.builder;
        let threads32 = b.build_mul(b.build_mul(dims[0], dims[1], c""), dims[2], c"threads");
        self.threads = b.build_zext(threads32, self.i64_ty, c"");
        // Lane storage: the states, then each per-thread local, each 64-byte aligned.
        let mut offset = b.build_mul(self.threads, self.const64(4), c"");
        let mut placed = Vec::new();
        for (alloca, bytes) in &slots.per_thread {
            let b = &self.builder;
            let start = b.build_and(
                b.build_add(offset, self.const64(63), c""),
                self.const64(!63),
                c"",
            );
            placed.push((alloca.as_value(), start, *bytes));
            let size = b.build_mul(self.threads, self.const64(*bytes), c"");
            offset = b.build_add(start, size, c"");
        }
        let base = self.call(self.hooks.lanes, &[offset]);
        let b = &self.builder;
        let ptr_ty = self.module.ptr_type(0);
        let no_room = b.build_icmp(IntPredicate::EQ, base, ptr_ty.const_null(), c"");
        let refuse = self.block(c"no.room");
        let start = self.block(c"start");
        self.builder.build_cond_br(no_room, refuse, start);
        self.builder.position_at_end(refuse);
        self.builder.build_ret(self.const32(1));
        self.builder.position_at_end(start);
        self.states = base;
        for (alloca, at, bytes) in placed {
            let lanes = self.byte_gep(base, at);
            self.lanes.push((alloca, lanes, bytes));
        }
        let head = self.block(c"block.head");
        let block_start = self.block(c"block.start");
        let done = self.block(c"done");
        let next = self.block(c"block.next");
        let b = &self.builder;
        b.build_br(head);
        b.position_at_end(head);
        let linear = b.build_phi(self.i64_ty, c"block");
        linear.add_incoming(begin, start);
        let more = b.build_icmp(IntPredicate::ULT, linear.as_value(), end, c"");
        self.builder.build_cond_br(more, block_start, done);
        self.builder.position_at_end(done);
        self.builder.build_ret(self.const32(0));
        self.builder.position_at_end(next);
        let following = self
            .builder
            .build_add(linear.as_value(), self.const64(1), c"");
        linear.add_incoming(following, next);
        self.builder.build_br(head);
        // Per block: its start, its values, the body's start for every thread, then the
        // regions until every thread is done.
        self.builder.position_at_end(block_start);
        self.call(self.hooks.begin_block, &[launch, linear.as_value()]);
        self.builder.build_store(self.const32(0), flag_slot);
        let first_region = self.block(c"first.region");
        self.hoist_point = self.builder.build_br(first_region).instruction();
        self.builder.position_before(self.hoist_point);
        for w in 3..12u64 {
            let value = if (6..9).contains(&w) {
                dims[w as usize - 6]
            } else {
                self.call(self.hooks.index, &[self.const32(w)])
            };
            self.block_values.insert(w, value);
        }
        self.plan_fetch_ahead(kinds);
        let schedule = self.block(c"schedule");
        let mut together = self.regions_left_together(kinds);
        self.trims = self.trim_branches(&together, kinds);
        let parks = self.parks(&together, kinds);
        self.parked_at = parks.iter().map(|p| p.map(|(_, at)| at)).collect();
        for (r, park) in parks.into_iter().enumerate() {
            if let Some((trim, _)) = park {
                together[r] = true;
                self.trims[r] = Some(trim);
            }
        }
        if self.parked_at.iter().any(Option::is_some) {
            let allocas = entry.terminator().map(|t| t.instruction());
            self.builder
                .position_before(allocas.ok_or("the entry point's start has no end")?);
            let live = [
                (self.i32_ty, c"live.x.end"),
                (self.i64_ty, c"live.rank.end"),
            ]
            .map(|(ty, name)| self.builder.build_alloca(ty, 8, name).as_value());
            self.builder.position_before(self.hoist_point);
            self.every_thread_live(live);
            self.live = Some(live);
        }
        let mut unguarded = Vec::new();
        let mut guarded = Vec::new();
        let mut dispatches = Vec::new();
        let mut shortcuts = Vec::new();
        for (r, &together) in together.iter().enumerate() {
            // A region its threads leave together, run by all of them, goes on where its last
            // thread went without the scheduler's pass over the states.
            let after = if together {
                let dispatch = self.block(c"together");
                dispatches.push(dispatch);
                dispatch
            } else {
                schedule
            };
            let run = if together {
                RegionRun::Together
            } else {
                RegionRun::Unguarded
            };
            unguarded.push(self.region_loop(r, run, after, flag_slot, kinds)?);
            let after_guarded = match self.single_exit_state(r) {
                Some(left) => {
                    let shortcut = self.block(c"summarize");
                    shortcuts.push((shortcut, [left, r as u64 + 1]));
                    shortcut
                }
                None => schedule,
            };
            guarded.push(self.region_loop(
                r,
                RegionRun::Guarded,
                after_guarded,
                flag_slot,
                kinds,
            )?);
        }
        for dispatch in dispatches {
            self.emit_dispatch(dispatch, next, &unguarded);
        }
        self.builder.position_at_end(first_region);
        self.builder.build_br(unguarded[0]);
        self.emit_schedule(
            [schedule, next],
            (&unguarded, &guarded),
            &shortcuts,
            [flag_slot, round_state, round_max],
        );
        Ok(())
    }

    /// The state every thread that runs region `r` leaves it with, where there is one: the
    /// region reaches one barrier and does not return.
    fn single_exit_state(&self, r: usize) -> Option<u64> {
        let region = self.segments.region(self.region_starts[r]);
        one_exit(self.segments, &region).map(|exit| self.state_after(exit))
    }

    /// The state a thread leaving by `exit` is at: its barrier's region's, 0 once returned.
    fn state_after(&self, exit: Exit<'m>) -> u64 {
        match exit {
            Exit::Barrier(barrier) => self.region_of_barrier[&barrier],
            Exit::Return => 0,
        }
    }

    /// Whether each region's threads, started together, leave it together
    /// ([`leave_together`]).
    fn regions_left_together(&self, kinds: &mut Kinds<'_, 'm>) -> Vec<bool> {
        let block_slots: HashSet<Value<'m>> = self.block_slots.iter().map(|s| s.body).collect();
        let kinds = RefCell::new(kinds);
        let mut is_block_value = |v| kinds.borrow_mut().of(v) == Kind::Hoistable;
        let mut uniform = Uniform {
            slots: &block_slots,
            is_block_value: &mut is_block_value,
            memo: HashMap::new(),
        };
        (0..self.region_starts.len())
            .map(|r| {
                let code = self.region_code(r, &mut kinds.borrow_mut());
                // Two conditions are one where the region's start gives both alike.
                let mut same = |a: Value<'m>, b: Value<'m>| {
                    let kinds = &mut kinds.borrow_mut();
                    a == b
                        || match (
                            self.at_entry(a, &code, kinds),
                            self.at_entry(b, &code, kinds),
                        ) {
                            (Some(a), Some(b)) => a.same_as(&b),
                            _ => false,
                        }
                };
                let start = self.region_starts[r];
                leave_together(
                    self.segments,
                    start,
                    &self.region_of_barrier,
                    &mut |v| uniform.of(v),
                    &mut same,
                )
            })
            .collect()
    }

    /// Each region's trim branch ([`trim_branch`]), for the regions the threads leave
    /// together.
    fn trim_branches(&self, together: &[bool], kinds: &mut Kinds<'_, 'm>) -> Vec<Option<Trim<'m>>> {
        self.with_facts(kinds, |facts| {
            self.region_starts
                .iter()
                .zip(together)
                .map(|(&start, &together)| {
                    together
                        .then(|| trim_branch(self.segments, start, facts))
                        .flatten()
                })
                .collect()
        })
    }

    /// Runs `f` with what the trims and parks need to know of the body ([`Facts`]).
    fn with_facts<R>(
        &self,
        kinds: &mut Kinds<'_, 'm>,
        f: impl FnOnce(&mut Facts<'_, 'm>) -> R,
    ) -> R {
        let block_slots: HashSet<Value<'m>> = self.block_slots.iter().map(|s| s.body).collect();
        let hooks = self.hooks;
        let single = &self.single;
        let is_thread_x = |v: Value<'m>| is_thread_x(v, hooks);
        let is_rank = |v: Value<'m>| is_rank(v, hooks);
        let lanes: HashSet<Value<'m>> = self.lanes.iter().map(|(alloca, _, _)| *alloca).collect();
        let is_lane_store =
            |i: Instruction<'m>| i.is_store() && i.operand(1).is_some_and(|p| lanes.contains(&p));
        let is_idle = |i: Instruction<'m>| idle_instruction(i, hooks, &block_slots, single);
        let mut is_block_value = |v| kinds.of(v) == Kind::Hoistable;
        let mut uniform = Uniform {
            slots: &block_slots,
            is_block_value: &mut is_block_value,
            memo: HashMap::new(),
        };
        let mut uniform = |v| uniform.of(v);
        f(&mut Facts {
            uniform: &mut uniform,
            is_thread_x: &is_thread_x,
            is_rank: &is_rank,
            is_idle: &is_idle,
            is_lane_store: &is_lane_store,
        })
    }

    /// Each region its threads leave apart that parks the threads past a bound ([`Park`]),
    /// with its trim and the state they wait at, where the threads below the bound go from
    /// there through regions they leave together, each to one state, to the parked threads'
    /// state: no thread is left behind while the others run alone.
    fn parks(&self, together: &[bool], kinds: &mut Kinds<'_, 'm>) -> Vec<Option<(Trim<'m>, u64)>> {
        let parks: Vec<Option<Park<'m>>> = self.with_facts(kinds, |facts| {
            (0..self.region_starts.len())
                .map(|r| {
                    (!together[r])
                        .then(|| park_branch(self.segments, self.region_starts[r], facts))
                        .flatten()
                })
                .collect()
        });
        parks
            .into_iter()
            .enumerate()
            .map(|(r, park)| {
                let park = park?;
                let parked = self.state_after(park.parked);
                let mut state = self.state_after(park.run);
                let mut seen = HashSet::new();
                while state != parked {
                    let next = usize::try_from(state).ok()?.checked_sub(1)?;
                    if next == r || !together[next] || !seen.insert(next) {
                        return None;
                    }
                    state = self.single_exit_state(next)?;
                }
                Some((park.trim, parked))
            })
            .collect()
    }

    /// Where every thread goes after a region they all ran and left together: the block's
    /// values made current, then the block's end when they returned, else the region after
    /// their barrier, unguarded. Their own states are not written: the states are read only
    /// after a region they may leave apart, whose loop writes every thread's.
    fn emit_dispatch(&self, dispatch: Block<'m>, block_done: Block<'m>, unguarded: &[Block<'m>]) {
        let b = &self.builder;
        b.position_at_end(dispatch);
        self.make_block_values_current();
        let state = b
            .build_load(self.i32_ty, self.together_state, c"state")
            .as_value();
        if let Some(live) = self.live {
            // The threads below a bound reached the barrier where the others are parked.
            let mut parked: Vec<u64> = self.parked_at.iter().flatten().copied().collect();
            parked.sort_unstable();
            parked.dedup();
            for at in parked.into_iter().filter(|&at| at != 0) {
                let b = &self.builder;
                let there = b.build_icmp(IntPredicate::EQ, state, self.const32(at), c"");
                let all = self.block(c"unpark");
                let on = self.block(c"unparked");
                self.builder.build_cond_br(there, all, on);
                self.builder.position_at_end(all);
                self.every_thread_live(live);
                self.builder.build_br(on);
                self.builder.position_at_end(on);
            }
        }
        let b = &self.builder;
        let returned = b.build_icmp(IntPredicate::EQ, state, self.const32(0), c"");
        let go_on = self.block(c"go.on");
        self.builder.build_cond_br(returned, block_done, go_on);
        self.builder.position_at_end(go_on);
        self.switch_on(state, unguarded);
    }

    /// Makes every thread of the block live again ([`Emitter::live`]).
    fn every_thread_live(&self, [x_end, rank_end]: [Value<'m>; 2]) {
        self.builder.build_store(self.block_values[&6], x_end);
        self.builder.build_store(self.const64(u64::MAX), rank_end);
    }

    /// Makes the values the threads left in each block slot at their barrier current, at the
    /// builder's position: between regions.
    fn make_block_values_current(&self) {
        let b = &self.builder;
        for slot in &self.block_slots {
            b.build_store(
                b.build_load(slot.ty, slot.next, c"").as_value(),
                slot.current,
            );
        }
    }

    /// Jumps on `state` to `targets[state - 1]`.
    pub(super) fn switch_on(&self, state: Value<'m>, targets: &[Block<'m>]) {
        let unknown = self.block(c"unknown.state");
        let cases: Vec<(Value<'m>, Block<'m>)> = targets
            .iter()
            .enumerate()
            .map(|(r, block)| (self.const32(r as u64 + 1), *block))
            .collect();
        self.builder.build_switch(state, unknown, &cases);
        self.builder.position_at_end(unknown);
        self.builder.build_unreachable();
    }

    /// The scheduler, which every region's loop ends in: reads the threads' states and runs
    /// the next region, or ends the block. The guarded loops of regions whose threads all
    /// leave at one state `S'` end in `shortcuts` instead (each with `S'` and the region's own
    /// state `S`): there, outside a round, the loop ran every thread at the largest state,
    /// `S`. Where every live thread was at `S`, they are all at `S'` now (done where `S'` is
    /// 0); else, where `S' >= S` (the next warp barrier of a warp's straight code, or the same
    /// one again in a loop), the largest state is `S'`, the smallest live one and the threads
    /// done as they were; else, where every live thread was at `S` or at the smallest live
    /// state (the summary's `two`, which the scan leaves unknown but where it found one
    /// state), the threads at `S'` and those at the smallest. Either way without a pass over
    /// the states, else with one. A reduction's or scan's last warp, its lanes exchanging
    /// values, ran a pass over the block's states at each exchange.
    pub(super) fn emit_schedule(
        &mut self,
        [schedule, block_done]: [Block<'m>; 2],
        (unguarded, guarded): (&[Block<'m>], &[Block<'m>]),
        shortcuts: &[(Block<'m>, [u64; 2])],
        [flag_slot, round_state, round_max]: [Value<'m>; 3],
    ) {
        let (i32_ty, i64_ty, i1_ty) = (self.i32_ty, self.i64_ty, self.module.i1_type());
        let scan_start = self.block(c"scan.start");
        let scan = self.block(c"scan");
        let scanned = self.block(c"scanned");
        let round_step = self.block(c"round.step");
        let b = &self.builder;
        b.position_at_end(schedule);
        self.make_block_values_current();
        let flag = b.build_load(i32_ty, flag_slot, c"").as_value();
        let in_round = b.build_icmp(IntPredicate::NE, flag, self.const32(0), c"");
        self.builder.build_cond_br(in_round, round_step, scan_start);
        // The scan: the largest state, the smallest live one, whether a thread is done.
        self.builder.position_at_end(scan_start);
        self.builder.build_br(scan);
        let b = &self.builder;
        b.position_at_end(scan);
        let t = b.build_phi(i64_ty, c"t");
        let max = b.build_phi(i32_ty, c"max");
        let min = b.build_phi(i32_ty, c"min");
        let any_done = b.build_phi(i1_ty, c"any.done");
        let first_end = b.build_phi(i32_ty, c"first.end");
        t.add_incoming(self.const64(0), scan_start);
        max.add_incoming(self.const32(0), scan_start);
        min.add_incoming(self.const32(u64::from(u32::MAX)), scan_start);
        any_done.add_incoming(i1_ty.const_int(0, false), scan_start);
        first_end.add_incoming(self.const32(0), scan_start);
        let at = self.state_of(t.as_value());
        let b = &self.builder;
        let s = b.build_load(i32_ty, at, c"state").as_value();
        let is_done = b.build_icmp(IntPredicate::EQ, s, self.const32(0), c"");
        let gt = b.build_icmp(IntPredicate::UGT, s, max.as_value(), c"");
        let max_next = b.build_select(gt, s, max.as_value(), c"");
        let live = b.build_select(is_done, self.const32(u64::from(u32::MAX)), s, c"");
        let lt = b.build_icmp(IntPredicate::ULT, live, min.as_value(), c"");
        let min_next = b.build_select(lt, live, min.as_value(), c"");
        let done_next = b.build_or(any_done.as_value(), is_done, c"");
        let t_next = b.build_add(t.as_value(), self.const64(1), c"");
        // States increase with the ranks' order of the scan: the last rank going first wins.
        let first_end_next = match self.first_state_counted_going_first() {
            Some(first) => {
                let goes_first = b.build_icmp(IntPredicate::UGE, s, self.const32(first), c"");
                let past = b.build_trunc(t_next, i32_ty, c"");
                b.build_select(goes_first, past, first_end.as_value(), c"")
            }
            _ => first_end.as_value(),
        };
        t.add_incoming(t_next, scan);
        max.add_incoming(max_next, scan);
        min.add_incoming(min_next, scan);
        any_done.add_incoming(done_next, scan);
        first_end.add_incoming(first_end_next, scan);
        let again = b.build_icmp(IntPredicate::ULT, t_next, self.threads, c"");
        self.builder.build_cond_br(again, scan, scanned);
        self.builder.position_at_end(scanned);
        self.builder
            .build_store(first_end_next, self.going_first_end);
        // The pass does not tell whether live states lie between the two it keeps.
        let one_state = self
            .builder
            .build_icmp(IntPredicate::EQ, min_next, max_next, c"");
        let summary = self.block(c"summary");
        self.builder.build_br(summary);
        let b = &self.builder;
        b.position_at_end(summary);
        let phis = [
            (i32_ty, c"max"),
            (i32_ty, c"min"),
            (i1_ty, c"done"),
            (i1_ty, c"two"),
        ]
        .map(|(ty, name)| b.build_phi(ty, name));
        let [max, min, done, two] = phis;
        max.add_incoming(max_next, scanned);
        min.add_incoming(min_next, scanned);
        done.add_incoming(done_next, scanned);
        two.add_incoming(one_state, scanned);
        for (kept, value) in self.summary.iter().zip(phis) {
            b.build_store(value.as_value(), *kept);
        }
        let (max_next, min_next, done_next) = (max.as_value(), min.as_value(), done.as_value());
        for block in std::mem::take(&mut self.summarized) {
            self.emit_summarized(block, [schedule, summary], flag_slot, phis);
        }
        for &(shortcut, states) in shortcuts {
            self.emit_shortcut(
                (shortcut, states),
                [schedule, scan_start, summary],
                flag_slot,
                phis,
            );
        }
        // Every thread done: the next block.
        let b = &self.builder;
        b.position_at_end(summary);
        let all_done = b.build_icmp(IntPredicate::EQ, max_next, self.const32(0), c"");
        let dispatch = self.block(c"dispatch");
        self.builder.build_cond_br(all_done, block_done, dispatch);
        // Every live thread at one barrier and none done: the region's loop, unguarded.
        self.builder.position_at_end(dispatch);
        let b = &self.builder;
        let same = b.build_icmp(IntPredicate::EQ, min_next, max_next, c"");
        let whole = b.build_and(same, b.build_not(done_next, c""), c"");
        let run_whole = self.block(c"run.whole");
        let not_whole = self.block(c"not.whole");
        self.builder.build_cond_br(whole, run_whole, not_whole);
        self.builder.position_at_end(run_whole);
        self.switch_on(max_next, unguarded);
        // Threads at a warp barrier or an interleaved trip (the largest states) go first; one
        // state: its threads.
        self.builder.position_at_end(not_whole);
        let b = &self.builder;
        let warp = match self.first_state_going_first {
            Some(first) => b.build_icmp(IntPredicate::UGE, max_next, self.const32(first), c""),
            None => i1_ty.const_int(0, false),
        };
        let one_state = b.build_or(warp, same, c"");
        let run_one = self.block(c"run.one");
        let round = self.block(c"round");
        self.builder.build_cond_br(one_state, run_one, round);
        self.builder.position_at_end(run_one);
        self.switch_on(max_next, guarded);
        // Threads at different block barriers: a round runs each barrier's threads, marking
        // them as they leave so that none runs twice, then clears the marks.
        let round_run = self.block(c"round.run");
        let round_next = self.block(c"round.next");
        let clear_start = self.block(c"round.clear");
        let b = &self.builder;
        b.position_at_end(round);
        b.build_store(self.const32(RAN_THIS_ROUND), flag_slot);
        b.build_store(min_next, round_state);
        b.build_store(max_next, round_max);
        b.build_br(round_run);
        b.position_at_end(round_step);
        let current = b.build_load(i32_ty, round_state, c"").as_value();
        let following = b.build_add(current, self.const32(1), c"");
        b.build_store(following, round_state);
        b.build_br(round_run);
        b.position_at_end(round_run);
        let state = b.build_load(i32_ty, round_state, c"").as_value();
        let last = b.build_load(i32_ty, round_max, c"").as_value();
        let past = b.build_icmp(IntPredicate::UGT, state, last, c"");
        self.builder.build_cond_br(past, clear_start, round_next);
        self.builder.position_at_end(round_next);
        // A state no thread is at runs its guarded loop for nothing; states between two
        // barriers' are rare (threads at different barriers are).
        self.switch_on(state, guarded);
        let clear = self.block(c"clear");
        let b = &self.builder;
        b.position_at_end(clear_start);
        b.build_store(self.const32(0), flag_slot);
        b.build_br(clear);
        b.position_at_end(clear);
        let t = b.build_phi(i64_ty, c"t");
        t.add_incoming(self.const64(0), clear_start);
        let at = self.state_of(t.as_value());
        let b = &self.builder;
        let s = b.build_load(i32_ty, at, c"").as_value();
        let cleared = b.build_and(s, self.const32(RAN_THIS_ROUND - 1), c"");
        b.build_store(cleared, at);
        let t_next = b.build_add(t.as_value(), self.const64(1), c"");
        t.add_incoming(t_next, clear);
        let again = b.build_icmp(IntPredicate::ULT, t_next, self.threads, c"");
        self.builder.build_cond_br(again, clear, scan_start);
    }

    /// The first state the scheduler's pass counts as going first when it finds the last rank
    /// going first ([`Emitter::going_first_end`]): where the body has warp barriers.
    pub(super) fn first_state_counted_going_first(&self) -> Option<u64> {
        self.first_state_going_first
            .filter(|_| self.after_warp_barrier.contains(&true))
    }

    /// From `block`, on to the scheduler in a round (`flag_slot` set), else to `outside`, where
    /// the builder is left after making the block's values current.
    pub(super) fn outside_a_round(
        &self,
        block: Block<'m>,
        [schedule, outside]: [Block<'m>; 2],
        flag_slot: Value<'m>,
    ) {
        let b = &self.builder;
        b.position_at_end(block);
        let flag = b.build_load(self.i32_ty, flag_slot, c"").as_value();
        let in_round = b.build_icmp(IntPredicate::NE, flag, self.const32(0), c"");
        b.build_cond_br(in_round, schedule, outside);
        b.position_at_end(outside);
        self.make_block_values_current();
    }

    /// The end of a guarded loop of the region at state `own` whose threads all left at state
    /// `left` ([`Emitter::emit_schedule`]): the summary of the states without a pass over
    /// them where it can, else the scan; in a round, the scheduler.
    fn emit_shortcut(
        &self,
        (shortcut, [left, own]): (Block<'m>, [u64; 2]),
        [schedule, scan_start, summary]: [Block<'m>; 3],
        flag_slot: Value<'m>,
        [max, min, done, two]: [Phi<'m>; 4],
    ) {
        let i32_ty = self.i32_ty;
        let outside = self.block(c"summarize.outside");
        self.outside_a_round(shortcut, [schedule, outside], flag_slot);
        let b = &self.builder;
        let i1_ty = self.module.i1_type();
        let load = |ty, kept| b.build_load(ty, kept, c"").as_value();
        let [max_kept, min_kept, done_kept, two_kept] = self.summary;
        let (was_max, was_min, was_done, was_two) = (
            load(i32_ty, max_kept),
            load(i32_ty, min_kept),
            load(i1_ty, done_kept),
            load(i1_ty, two_kept),
        );
        let all_there = b.build_icmp(IntPredicate::EQ, was_min, was_max, c"");
        let true_ = i1_ty.const_int(1, false);
        let left_value = self.const32(left);
        let going_first = |state: u64| self.first_state_going_first.is_some_and(|f| state >= f);
        if going_first(left) && !going_first(own) {
            // Threads the last scan saw elsewhere may be at the warp barrier now.
            b.build_store(self.const32(u64::from(u32::MAX)), self.going_first_end);
        }
        if left >= own {
            let min_now = b.build_select(all_there, left_value, was_min, c"");
            max.add_incoming(left_value, outside);
            min.add_incoming(min_now, outside);
            done.add_incoming(was_done, outside);
            two.add_incoming(b.build_or(was_two, all_there, c""), outside);
            self.builder.build_br(summary);
            return;
        }
        // Every live thread was at `S` or at the smallest live state: those at `S` are at `S'`
        // now, the others where they were (a scan's first warp back at the block barrier
        // where the other warps wait).
        let exact = self.block(c"summarize.all");
        let known = b.build_or(all_there, was_two, c"");
        self.builder.build_cond_br(known, exact, scan_start);
        self.builder.position_at_end(exact);
        let b = &self.builder;
        let none = self.const32(u64::from(u32::MAX));
        let (max_now, min_now, done_now) = if left == 0 {
            let max_now = b.build_select(all_there, self.const32(0), was_min, c"");
            (
                max_now,
                b.build_select(all_there, none, was_min, c""),
                true_,
            )
        } else {
            let lower = b.build_icmp(IntPredicate::ULT, left_value, was_min, c"");
            let max_two = b.build_select(lower, was_min, left_value, c"");
            let min_two = b.build_select(lower, left_value, was_min, c"");
            (
                b.build_select(all_there, left_value, max_two, c""),
                b.build_select(all_there, left_value, min_two, c""),
                was_done,
            )
        };
        max.add_incoming(max_now, exact);
        min.add_incoming(min_now, exact);
        done.add_incoming(done_now, exact);
        two.add_incoming(true_, exact);
        self.builder.build_br(summary);
    }

    /// The loop of region `r` over the block's threads (`x` innermost), ending in `after`;
    /// returns its first block. A region with a trim branch, run by all threads together,
    /// probes each row's first thread for the bound, then runs the row's threads up to it; a
    /// region some threads of a row run alone ([`Emitter::single_threads`]) runs the row in
    /// pieces ([`Emitter::split_row`]).
    pub(super) fn region_loop(
        &mut self,
        r: usize,
        run: RegionRun,
        after: Block<'m>,
        flag_slot: Value<'m>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> std::result::Result<Block<'m>, String> {
        let (i32_ty, i64_ty) = (self.i32_ty, self.i64_ty);
        let [bx, by, bz] = [6, 7, 8].map(|w| self.block_values[&w]);
        let trim = match run {
            RegionRun::Together => self.trims[r],
            RegionRun::Unguarded | RegionRun::Guarded => None,
        };
        let pre = self.block(c"region");
        let z_head = self.block(c"z");
        let y_head = self.block(c"y");
        let y_latch = self.block(c"y.latch");
        let z_latch = self.block(c"z.latch");
        let b = &self.builder;
        b.position_at_end(pre);
        let flag = b.build_load(i32_ty, flag_slot, c"flag").as_value();
        if let (RegionRun::Together, Some(parked)) = (run, self.parked_at[r]) {
            // Where no thread is below the bound, all of them are where the others park.
            b.build_store(self.const32(parked), self.together_state);
        }
        if run == RegionRun::Unguarded {
            self.start_piece_summary();
        }
        let b = &self.builder;
        b.build_br(z_head);
        b.position_at_end(z_head);
        let z = b.build_phi(i32_ty, c"z");
        z.add_incoming(self.const32(0), pre);
        b.build_br(y_head);
        b.position_at_end(y_head);
        let y = b.build_phi(i32_ty, c"y");
        y.add_incoming(self.const32(0), z_head);
        let row = b.build_mul(
            b.build_add(b.build_mul(z.as_value(), by, c""), y.as_value(), c""),
            bx,
            c"",
        );
        let row = b.build_zext(row, i64_ty, c"row");
        if run != RegionRun::Guarded {
            self.fetch_next_block_ahead(r, y_head, [y.as_value(), z.as_value()], kinds);
        }
        let (width, row_entry) = match (run, self.live) {
            (RegionRun::Together, Some(live)) => self.live_width(live, row, bx, y_latch),
            _ => (bx, y_head),
        };
        let row_at = Row {
            r,
            run,
            y: y.as_value(),
            z: z.as_value(),
            row,
            flag,
            warp: None,
        };
        let guarded = (run == RegionRun::Guarded && self.after_warp_barrier[r])
            .then(|| self.guarded_chunks(r, [row, flag], bx, [y_head, y_latch]));
        match (trim, guarded) {
            (_, Some(chunks)) => {
                self.builder.build_br(chunks.head);
                self.builder.position_at_end(chunks.found);
                self.thread_loop(&row_at, [chunks.start, chunks.end], chunks.latch, kinds)?;
                let whole = Row {
                    run: RegionRun::Unguarded,
                    ..row_at
                };
                let threads = [chunks.start, chunks.end];
                self.builder.position_at_end(chunks.whole);
                self.unguarded_threads(&whole, threads, chunks.latch, chunks.whole, kinds)?;
            }
            (None, None) => {
                self.builder.position_at_end(row_entry);
                let threads = [self.const32(0), width];
                if run == RegionRun::Guarded {
                    self.thread_loop(&row_at, threads, y_latch, kinds)?;
                } else {
                    self.unguarded_threads(&row_at, threads, y_latch, row_entry, kinds)?;
                }
            }
            (Some(trim), None) => {
                // The row's first thread on its way to the trim branch, which records the
                // bound; then the row's threads up to it.
                let probe = self.block(c"probe");
                let rest = self.block(c"row.rest");
                self.builder.build_store(self.const32(0), self.trim_reached);
                self.builder.build_br(probe);
                self.builder.position_at_end(probe);
                let locals = self.thread_locals(row);
                let at = ThreadAt {
                    xyz: [self.const32(0), row_at.y, row_at.z],
                    state: self.state_in(run, row),
                    flag,
                    latch: rest,
                    warp: None,
                };
                let start = self.region_starts[r];
                let prefix = trim_prefix(self.segments, start, &trim)
                    .into_iter()
                    .map(|s| (self.segments.list[s].block, self.segments.list[s].start))
                    .collect();
                self.probing = Some(Probe { trim, prefix, rest });
                let start = self.clone_region(start, &at, &locals, kinds);
                self.probing = None;
                self.builder.position_at_end(probe);
                self.builder.build_br(start?);
                self.builder.position_at_end(rest);
                match (self.live, self.parked_at[r]) {
                    (Some([x_end, rank_end]), Some(_)) => {
                        let end = self.parked_end(trim, width, row);
                        if trim.by_rank {
                            self.builder.build_store(self.parked_bound(trim), rank_end);
                        } else {
                            self.builder.build_store(end, x_end);
                        }
                        let some =
                            self.builder
                                .build_icmp(IntPredicate::NE, end, self.const32(0), c"");
                        let threads = self.block(c"row.live");
                        self.builder.build_cond_br(some, threads, y_latch);
                        self.builder.position_at_end(threads);
                        self.thread_loop(&row_at, [self.const32(0), end], y_latch, kinds)?;
                    }
                    _ => {
                        let end = self.trimmed_end(trim, width);
                        self.thread_loop(&row_at, [self.const32(0), end], y_latch, kinds)?;
                    }
                }
            }
        }
        let after = match run {
            RegionRun::Unguarded => self.end_piece_summary().unwrap_or(after),
            RegionRun::Guarded | RegionRun::Together => after,
        };
        self.counter_latch(y, [y_latch, y_head, z_latch], by);
        self.counter_latch(z, [z_latch, z_head, after], bz);
        Ok(pre)
    }

    /// The loop of a region's threads `x` in `[first, end)` of a row, run as `row.run` says
    /// (all of them, unguarded or together), from `entry` (the builder's block, which it
    /// ends) to `done`: by warps where the region asks for its warp, in pieces around the
    /// threads that run it alone, cut at its bound ([`Emitter::split_row`],
    /// [`Emitter::piece`]).
    fn unguarded_threads(
        &mut self,
        row: &Row<'m>,
        [first, end]: [Value<'m>; 2],
        done: Block<'m>,
        entry: Block<'m>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> std::result::Result<(), String> {
        let code = self.region_code(row.r, kinds);
        let first_lane = self.shape.first_lane_pieces;
        let by_warp = asks_for_its_warp(code.own(), first_lane, self.hooks, kinds);
        let singles = self.single_threads(&code, by_warp, kinds)?;
        let cuts = self.cuts(&code, entry, &singles.forced.answers, kinds)?;
        let (threads, done, row) = if by_warp {
            let (threads, next, warp) =
                warp_pieces(&self.builder, self.function, [row.row, first, end], done);
            let row = Row {
                warp: Some(warp),
                ..*row
            };
            (threads, next, row)
        } else {
            ([first, end], done, *row)
        };
        if !singles.at.is_empty() {
            self.split_row(&row, &singles, &cuts, threads, done, kinds)
        } else if !cuts.at.is_empty() {
            self.piece(&row, threads, done, &Decided::default(), &cuts, kinds)
        } else {
            self.thread_loop(&row, threads, done, kinds)
        }
    }

    /// A thread counter's latch: the next index, back to `again` while below `bound`, else
    /// on to `done` (the next counter's latch).
    fn counter_latch(
        &self,
        counter: Phi<'m>,
        [latch, again, done]: [Block<'m>; 3],
        bound: Value<'m>,
    ) {
        let b = &self.builder;
        b.position_at_end(latch);
        let next = b.build_add(counter.as_value(), self.const32(1), c"");
        counter.add_incoming(next, latch);
        let more = b.build_icmp(IntPredicate::ULT, next, bound, c"");
        b.build_cond_br(more, again, done);
    }

    /// The body's instructions region `r` runs, each of its segments up to its barrier.
    pub(super) fn region_instructions(&self, r: usize) -> Vec<Instruction<'m>> {
        let mut instructions = Vec::new();
        for s in self.segments.region(self.region_starts[r]) {
            let segment = self.segments.list[s];
            let mut next = segment.start.or_else(|| segment.block.first_instruction());
            while let Some(i) = next.filter(|&i| Some(i) != segment.barrier) {
                instructions.push(i);
                next = i.next();
            }
        }
        instructions
    }

    /// Region `r`'s [`RegionCode`].
    fn region_code(&self, r: usize, kinds: &mut Kinds<'_, 'm>) -> RegionCode<'m> {
        let mut instructions = self.region_instructions(r);
        let own = instructions.len();
        let mut seen: HashSet<Instruction<'m>> = instructions.iter().copied().collect();
        let mut next = 0;
        while next < instructions.len() {
            let i = instructions[next];
            next += 1;
            for op in i.as_value().operands() {
                let Some(o) = op.as_instruction() else {
                    continue;
                };
                if !seen.contains(&o) && kinds.of(op) == Kind::Recomputed {
                    seen.insert(o);
                    instructions.push(o);
                }
            }
        }
        RegionCode {
            instructions,
            own,
            set: seen,
            region: r,
            segments: self.segments.region(self.region_starts[r]),
        }
    }

    /// The comparisons `x == V` or `x + C == V` (or `!=`) of region `r` against values the
    /// block computes once (constants, block values), and `lane == V` in a loop over one
    /// warp's threads (`by_warp`), which the image's [`Alone`] names: the threads of each row
    /// or warp that run the region alone (`V`, or `V - C`), at most two, those of comparisons
    /// with a constant first.
    fn single_threads(
        &mut self,
        code: &RegionCode<'m>,
        by_warp: bool,
        kinds: &mut Kinds<'_, 'm>,
    ) -> std::result::Result<SingleThreads<'m>, String> {
        let hooks = self.hooks;
        let is_thread_x = |v: Value<'m>| is_thread_x(v, hooks);
        let mut candidates = Vec::new();
        let region = &code.set;
        for &i in &code.instructions {
            let Some(compare) = i.as_value().as_icmp() else {
                continue;
            };
            let equal = match compare.predicate() {
                IntPredicate::EQ => true,
                IntPredicate::NE => false,
                _ => continue,
            };
            let (Some(a), Some(b)) = (compare.operand(0), compare.operand(1)) else {
                continue;
            };
            let (v, offset, lane) = match thread_x_against(a, b, &is_thread_x) {
                Some((v, offset)) => (v, offset, None),
                None => match lane_against(a, b, hooks).filter(|_| by_warp) {
                    Some((v, of_x)) => (v, None, Some(of_x)),
                    None => continue,
                },
            };
            if !computed_once(v, kinds) || offset.is_some_and(|c| !computed_once(c, kinds)) {
                continue;
            }
            let guards = match self.shape.alone {
                Alone::EveryBranch => decides_a_branch(i, region, &HashMap::new()),
                // A lane's store is to a word its warp shares.
                Alone::UniformStores if lane.is_some() => {
                    guards_a_uniform_store(i, equal, region, &mut |a| one_per_warp(a, hooks, kinds))
                }
                Alone::UniformStores => guards_a_uniform_store(i, equal, region, &mut |a| {
                    a.as_instruction().is_none() || kinds.of(a) == Kind::Hoistable
                }),
            };
            if guards {
                let order = match offset {
                    None if v.is_constant_int() => 0,
                    None => 1,
                    Some(_) => 2,
                };
                candidates.push((order, i, equal, v, offset, lane));
            }
        }
        candidates.sort_by_key(|c| c.0);
        let mut singles = SingleThreads::default();
        for (_, i, equal, v, offset, lane) in candidates {
            let v = match offset {
                None => self.hoist(v)?,
                Some(c) => {
                    let (v, c) = (self.hoist(v)?, self.hoist(c)?);
                    match singles.differences.iter().find(|(key, _)| *key == (v, c)) {
                        Some((_, d)) => *d,
                        None => {
                            self.builder.position_before(self.hoist_point);
                            let d =
                                self.builder
                                    .build_binop(InstructionOpcode::Sub, v, c, c"single");
                            singles.differences.push(((v, c), d));
                            d
                        }
                    }
                }
            };
            let v = self.frozen_once(v);
            let at = match lane {
                None => SingleAt::X(v),
                Some(of_x) => SingleAt::Lane { value: v, of_x },
            };
            if !singles.at.contains(&at) {
                if singles.at.len() == 2 {
                    continue;
                }
                singles.at.push(at);
            }
            singles.forced.answers.insert(i, !equal);
        }
        Ok(singles)
    }

    /// `v`, a per-block value (hoisted), frozen once for the block: a row branches on its
    /// cuts and lone threads whether or not a thread would compute their bounds (one computed
    /// under a test the block shares, `7 - lo` marked `nuw` under `if lo < 8`, is poison past
    /// it), and where they are poison any cut will do, as no thread reads the answers it
    /// decides.
    pub(super) fn frozen_once(&mut self, v: Value<'m>) -> Value<'m> {
        if let Some(f) = self.frozen.get(&v) {
            return *f;
        }
        self.builder.position_before(self.hoist_point);
        let f = self.builder.build_freeze(v, c"");
        self.frozen.insert(v, f);
        f
    }

    /// `v`, an integer of at most 64 bits, zero-extended to 64 at the builder's position.
    pub(super) fn widened(&self, v: Value<'m>) -> Value<'m> {
        if v.ty().int_width() == Some(64) {
            v
        } else {
            self.builder.build_zext(v, self.i64_ty, c"")
        }
    }

    /// Where the thread of rank `rank` leaves its state in a loop that runs as `run`.
    fn state_in(&self, run: RegionRun, rank: Value<'m>) -> Value<'m> {
        match run {
            RegionRun::Together => self.together_state,
            RegionRun::Unguarded | RegionRun::Guarded => self.state_of(rank),
        }
    }

    /// The loop over the row's threads `x` in `first..end` (`end` at least `first`), from the
    /// builder's block (which it ends), to `done`.
    fn thread_loop(
        &mut self,
        row: &Row<'m>,
        [first, end]: [Value<'m>; 2],
        done: Block<'m>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> std::result::Result<(), String> {
        let (i32_ty, i64_ty) = (self.i32_ty, self.i64_ty);
        let x_body = self.block(c"x");
        let x_latch = self.block(c"x.latch");
        let exit = match row.run {
            RegionRun::Unguarded => {
                let b = &self.builder;
                let rank_end = b.build_add(row.row, b.build_zext(end, i64_ty, c""), c"");
                let exit = self.piece_exit(row.r, None, row.warp.is_some(), rank_end, kinds);
                (exit == PieceExit::OfItsWarp).then_some(rank_end)
            }
            RegionRun::Guarded | RegionRun::Together => None,
        };
        let entry = self.builder.build_br(x_body).instruction().block();
        if row.run != RegionRun::Guarded {
            // A guarded loop runs a few of the threads it visits (a warp's, the threads at
            // one of several barriers): as vectors it would run them all, masked.
            self.thread_loops.push((x_body, x_latch));
        }
        let b = &self.builder;
        b.position_at_end(x_body);
        let x = b.build_phi(i32_ty, c"x");
        x.add_incoming(first, entry);
        let rank = b.build_add(row.row, b.build_zext(x.as_value(), i64_ty, c""), c"rank");
        let state = self.state_in(row.run, rank);
        let go = self.block(c"go");
        if row.run == RegionRun::Guarded {
            let mine = self.waits_at(row.r, state);
            self.builder.build_cond_br(mine, go, x_latch);
        } else {
            self.builder.build_br(go);
        }
        self.builder.position_at_end(go);
        let locals = self.thread_locals(rank);
        let at = ThreadAt {
            xyz: [x.as_value(), row.y, row.z],
            state,
            flag: row.flag,
            latch: x_latch,
            warp: row.warp,
        };
        let start = self.clone_region(self.region_starts[row.r], &at, &locals, kinds)?;
        self.builder.position_at_end(go);
        self.builder.build_br(start);
        let left = match exit {
            Some(rank_end) => {
                let left = self.block(c"piece.left");
                let b = &self.builder;
                b.position_at_end(left);
                // The first thread's: the last one's, a lane of the vector store just made,
                // reached the load only after a stall on AMD's cores (`shfl_scan` 5% slower
                // on `x86-64-v3` than with the pass over the states).
                let first_rank = b.build_add(row.row, b.build_zext(first, i64_ty, c""), c"");
                let state = b
                    .build_load(i32_ty, self.state_of(first_rank), c"")
                    .as_value();
                self.add_to_summary(state, rank_end);
                self.builder.build_br(done);
                left
            }
            None => done,
        };
        self.counter_latch(x, [x_latch, x_body, left], end);
        Ok(())
    }

    /// The row's threads in pieces around the threads `singles` names, from the builder's
    /// block (which it ends), to `done`: a loop over the threads before the first, that thread
    /// alone, a loop over those up to the second, and so on. The loops' copies of the
    /// region have `singles`' comparisons decided (no thread in them is one of those), so
    /// that what one thread does (`if x == 0 { .. }`, a halo's edge, a block's total stored
    /// by its last thread) leaves the loops: LLVM made it a masked scatter or kept the loop
    /// scalar. Each loop is cut at `cut`, if any ([`Emitter::piece`]). The row's threads are
    /// `x` in `[first, end)`: all of them, or one warp's ([`Row::warp`]).
    fn split_row(
        &mut self,
        row: &Row<'m>,
        singles: &SingleThreads<'m>,
        cuts: &Cuts<'m>,
        [first, end]: [Value<'m>; 2],
        done: Block<'m>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> std::result::Result<(), String> {
        let b = &self.builder;
        let i64_ty = self.i64_ty;
        let first64 = b.build_zext(first, i64_ty, c"");
        let width = b.build_binop(
            InstructionOpcode::Sub,
            b.build_zext(end, i64_ty, c""),
            first64,
            c"",
        );
        let mut clamped = Vec::new();
        for &at in &singles.at {
            let v = match (at, row.warp) {
                (SingleAt::X(v), _) => self.widened(v),
                (SingleAt::Lane { value, of_x }, Some(warp)) => {
                    // The thread `x` of the piece whose lane is `V`: `V` less the piece's
                    // lane of `x` (wrapping where no thread of the piece has that lane).
                    let value = match value.ty().int_width() {
                        Some(32) => value,
                        _ => b.build_trunc(value, self.i32_ty, c""),
                    };
                    let offset = warp.lane_from_x[usize::from(of_x)];
                    let x = b.build_binop(InstructionOpcode::Sub, value, offset, c"");
                    b.build_zext(x, i64_ty, c"")
                }
                (SingleAt::Lane { .. }, None) => {
                    return Err("internal error: a lane named outside a warp's loop".into());
                }
            };
            let b = &self.builder;
            let from_first = b.build_binop(InstructionOpcode::Sub, v, first64, c"");
            let inside = b.build_icmp(IntPredicate::ULT, from_first, width, c"");
            let at = b.build_select(inside, v, b.build_zext(end, i64_ty, c""), c"");
            clamped.push(b.build_trunc(at, self.i32_ty, c"single"));
        }
        let b = &self.builder;
        let (lo, hi) = match clamped[..] {
            [only] => (only, None),
            [a, second, ..] => {
                let first_lower = b.build_icmp(IntPredicate::ULE, a, second, c"");
                let lo = b.build_select(first_lower, a, second, c"single.lo");
                let hi = b.build_select(first_lower, second, a, c"single.hi");
                (lo, Some(hi))
            }
            [] => return Err("internal error: a row split at no thread".into()),
        };
        // The single threads' `x` where each is a constant (`if tid == 0`), in the order they
        // run: what their copies' comparisons of `x` answer.
        let mut constant_x: Vec<Option<u64>> = singles
            .at
            .iter()
            .map(|at| match at {
                SingleAt::X(v) => v.const_zext_value(),
                SingleAt::Lane { .. } => None,
            })
            .collect();
        if constant_x.iter().all(Option::is_some) {
            constant_x.sort_unstable();
        } else {
            constant_x.fill(None);
        }
        let mut from = first;
        for (k, single) in std::iter::once(lo).chain(hi).enumerate() {
            let alone = self.block(c"single");
            self.piece(row, [from, single], alone, &singles.forced, cuts, kinds)?;
            self.builder.position_at_end(alone);
            let next = self.block(c"single.next");
            let b = &self.builder;
            let mut present = b.build_icmp(IntPredicate::ULT, single, end, c"");
            if k > 0 {
                let repeated = b.build_icmp(IntPredicate::EQ, single, lo, c"");
                present = b.build_and(present, b.build_not(repeated, c""), c"");
            }
            let go = self.block(c"single.go");
            self.builder.build_cond_br(present, go, next);
            self.builder.position_at_end(go);
            let b = &self.builder;
            let rank = b.build_add(row.row, b.build_zext(single, self.i64_ty, c""), c"");
            if row.run == RegionRun::Unguarded {
                let rank_end = self.builder.build_add(rank, self.const64(1), c"");
                let x = constant_x.get(k).copied().flatten();
                self.piece_exit(row.r, x, false, rank_end, kinds);
            }
            let locals = self.thread_locals(rank);
            let at = ThreadAt {
                xyz: [single, row.y, row.z],
                state: self.state_in(row.run, rank),
                flag: row.flag,
                latch: next,
                warp: row.warp,
            };
            let start = self.clone_region(self.region_starts[row.r], &at, &locals, kinds)?;
            self.builder.position_at_end(go);
            self.builder.build_br(start);
            self.builder.position_at_end(next);
            from = self.builder.build_add(single, self.const32(1), c"");
        }
        self.piece(row, [from, end], done, &singles.forced, cuts, kinds)
    }

    /// The loops of [`Emitter::split_row`] over the threads `first..end`, none where `end` is
    /// not past `first`, from the builder's block to `done`, with `decided`'s comparisons and
    /// clamps decided: one loop, or a loop for each piece between `cuts`, each with what
    /// that piece knows decided too.
    fn piece(
        &mut self,
        row: &Row<'m>,
        [first, end]: [Value<'m>; 2],
        done: Block<'m>,
        decided: &Decided<'m>,
        cuts: &Cuts<'m>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> std::result::Result<(), String> {
        let mut from = first;
        for (k, &cut) in cuts.at.iter().enumerate() {
            let b = &self.builder;
            let before_end = b.build_icmp(IntPredicate::ULT, cut, end, c"");
            let at = b.build_select(before_end, cut, end, c"");
            let past_from = b.build_icmp(IntPredicate::ULT, from, at, c"");
            let at = b.build_select(past_from, at, from, c"cut");
            let above = self.block(c"cut.above");
            self.piece_loop(row, [from, at], above, &decided.with(&cuts.known[k]), kinds)?;
            self.builder.position_at_end(above);
            from = at;
        }
        let decided = match cuts.known.last() {
            Some(last) => &decided.with(last),
            None => decided,
        };
        self.piece_loop(row, [from, end], done, decided, kinds)
    }

    /// The loop of one piece of [`Emitter::piece`].
    fn piece_loop(
        &mut self,
        row: &Row<'m>,
        [first, end]: [Value<'m>; 2],
        done: Block<'m>,
        decided: &Decided<'m>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> std::result::Result<(), String> {
        let some = self.builder.build_icmp(IntPredicate::ULT, first, end, c"");
        let entry = self.block(c"piece");
        self.builder.build_cond_br(some, entry, done);
        self.builder.position_at_end(entry);
        self.forced.clone_from(&decided.answers);
        self.clamped.clone_from(&decided.clamps);
        let result = self.thread_loop(row, [first, end], done, kinds);
        self.forced.clear();
        self.clamped.clear();
        result
    }

    /// Whether the thread whose state is at `state` waits at region `r`'s barrier.
    fn waits_at(&self, r: usize, state: Value<'m>) -> Value<'m> {
        let b = &self.builder;
        let s = b.build_load(self.i32_ty, state, c"").as_value();
        b.build_icmp(IntPredicate::EQ, s, self.const32(r as u64 + 1), c"")
    }

    /// A guarded loop's pieces of a row of threads, a warp's width each (`row` the row's
    /// first rank, `bx` its width, `entry` the row's block, `y_latch` where the row ends): a
    /// piece has its states tested first, as a vector, and is skipped where none is at region
    /// `r`'s barrier, run unguarded where all are ([`GuardedChunks::whole`]: a scalar loop
    /// testing each thread made `reduce5`'s warp stage a third of its time on the baseline
    /// image), else run guarded. For the regions after a warp barrier, whose
    /// threads are often one warp of the block (a reduction's last warp, a scan's first), the
    /// others at a block barrier or done: scalar or masked, the guarded loop visited every
    /// thread of the block. Elsewhere the pieces made `hotspot`'s guarded loops, which run most
    /// of their threads, 17% slower. Outside a round (`flag` 0) the row ends at the scheduler's
    /// last rank going first ([`Emitter::going_first_end`]): a reduction's last warp's
    /// exchanges tested the other warps' states at each one (a third of `reduce5`'s time).
    fn guarded_chunks(
        &self,
        r: usize,
        [row, flag]: [Value<'m>; 2],
        bx: Value<'m>,
        [entry, y_latch]: [Block<'m>; 2],
    ) -> GuardedChunks<'m> {
        let (i32_ty, i1_ty) = (self.i32_ty, self.module.i1_type());
        let head = self.block(c"piece");
        let test = self.block(c"piece.test");
        let tested = self.block(c"piece.tested");
        let found = self.block(c"piece.found");
        let latch = self.block(c"piece.latch");
        let width = self.const32(GUARDED_PIECE);
        let b = &self.builder;
        b.position_at_end(head);
        let start = b.build_phi(i32_ty, c"piece.start");
        start.add_incoming(self.const32(0), entry);
        let past = b.build_add(start.as_value(), width, c"");
        let short = b.build_icmp(IntPredicate::ULT, past, bx, c"");
        let end = b.build_select(short, past, bx, c"piece.end");
        let first = b.build_add(row, b.build_zext(start.as_value(), self.i64_ty, c""), c"");
        let in_round = b.build_icmp(IntPredicate::NE, flag, self.const32(0), c"");
        let first_end = b
            .build_load(i32_ty, self.going_first_end, c"first.end")
            .as_value();
        let first_end = b.build_zext(first_end, self.i64_ty, c"");
        let below = b.build_icmp(IntPredicate::ULT, first, first_end, c"");
        let live = self.block(c"piece.live");
        b.build_cond_br(b.build_or(in_round, below, c""), live, y_latch);
        b.position_at_end(live);
        // A piece whose threads are all at the barrier (a reduction's or scan's one warp at
        // its exchanges) runs them as vectors, unguarded.
        let b = &self.builder;
        b.build_br(test);
        b.position_at_end(test);
        let k = b.build_phi(i32_ty, c"k");
        let any = b.build_phi(i1_ty, c"any");
        let all = b.build_phi(i1_ty, c"all");
        k.add_incoming(start.as_value(), live);
        any.add_incoming(i1_ty.const_int(0, false), live);
        all.add_incoming(i1_ty.const_int(1, false), live);
        let rank = b.build_add(row, b.build_zext(k.as_value(), self.i64_ty, c""), c"");
        let mine = self.waits_at(r, self.state_of(rank));
        let b = &self.builder;
        let any_next = b.build_or(any.as_value(), mine, c"");
        let all_next = b.build_and(all.as_value(), mine, c"");
        let k_next = b.build_add(k.as_value(), self.const32(1), c"");
        k.add_incoming(k_next, test);
        any.add_incoming(any_next, test);
        all.add_incoming(all_next, test);
        let more = b.build_icmp(IntPredicate::ULT, k_next, end, c"");
        b.build_cond_br(more, test, tested);
        b.position_at_end(tested);
        let whole = self.block(c"piece.whole");
        let some = self.block(c"piece.some");
        let b = &self.builder;
        b.build_cond_br(all_next, whole, some);
        b.position_at_end(some);
        b.build_cond_br(any_next, found, latch);
        b.position_at_end(latch);
        let next = b.build_add(start.as_value(), width, c"");
        start.add_incoming(next, latch);
        let more = b.build_icmp(IntPredicate::ULT, next, bx, c"");
        b.build_cond_br(more, head, y_latch);
        b.position_at_end(entry);
        GuardedChunks {
            head,
            found,
            whole,
            latch,
            start: start.as_value(),
            end,
        }
    }

    /// Thread `rank`'s locals, at the builder's position: the block's slots copied into the
    /// entry point's locals, its lanes' addresses.
    fn thread_locals(&self, rank: Value<'m>) -> HashMap<Value<'m>, Value<'m>> {
        let mut locals = HashMap::new();
        for slot in &self.block_slots {
            let b = &self.builder;
            b.build_store(
                b.build_load(slot.ty, slot.current, c"").as_value(),
                slot.local,
            );
            locals.insert(slot.body, slot.local);
        }
        for (alloca, lanes, bytes) in &self.lanes {
            let offset = self.builder.build_mul(rank, self.const64(*bytes), c"");
            locals.insert(*alloca, self.byte_gep(*lanes, offset));
        }
        locals
    }

    /// Where a row's threads that run a trimmed region end (`i32`, at most `bx`): the row's
    /// first thread's index is 0, so the threads below the bound `V` it recorded are `0..V`
    /// (`0..=V` for an inclusive bound); every thread when the first did not reach the branch.
    /// The first thread runs even past the bound, to leave the state every thread leaves with.
    fn trimmed_end(&self, trim: Trim<'m>, bx: Value<'m>) -> Value<'m> {
        let b = &self.builder;
        let i64_ty = self.i64_ty;
        let reached = b.build_load(self.i32_ty, self.trim_reached, c"").as_value();
        let reached = b.build_icmp(IntPredicate::NE, reached, self.const32(0), c"reached");
        let bound = b.build_load(i64_ty, self.trim_bound, c"bound").as_value();
        let width = b.build_zext(bx, i64_ty, c"");
        let limit = if trim.inclusive {
            b.build_add(width, self.const64(u64::MAX), c"")
        } else {
            width
        };
        let below = b.build_icmp(IntPredicate::ULT, bound, limit, c"");
        let end = b.build_select(below, bound, limit, c"");
        let end = if trim.inclusive {
            b.build_add(end, self.const64(1), c"")
        } else {
            let none = b.build_icmp(IntPredicate::EQ, end, self.const64(0), c"");
            b.build_select(none, self.const64(1), end, c"")
        };
        let end = b.build_trunc(end, self.i32_ty, c"");
        b.build_select(reached, end, bx, c"x.end")
    }

    /// Clones the region starting at segment `first` for one thread: returns the clone's first
    /// block.
    pub(super) fn clone_region(
        &mut self,
        first: usize,
        at: &ThreadAt<'m>,
        locals: &HashMap<Value<'m>, Value<'m>>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> std::result::Result<Block<'m>, String> {
        let mut copies: HashMap<(Block<'m>, Option<Instruction<'m>>), Block<'m>> = HashMap::new();
        let mut clone = RegionClone {
            at: *at,
            locals,
            values: HashMap::new(),
            current: self.hoist_point.block(),
        };
        let start_seg = self.segments.list[first];
        let key = (start_seg.block, start_seg.start);
        let first_block = self.block(c"r");
        copies.insert(key, first_block);
        let mut work = vec![(key, first_block)];
        while let Some(((block, start), copy)) = work.pop() {
            // A copy is one segment, whose values are its own (those used in another have
            // slots) or computed again in it.
            clone.current = copy;
            clone.values.clear();
            let mut next = match start {
                Some(i) => Some(i),
                None => block.first_instruction(),
            };
            while let Some(i) = next {
                next = i.next();
                self.builder.position_at_end(copy);
                if let Some(&state) = self.region_of_barrier.get(&i) {
                    self.leave(at, self.const32(state), true);
                    break;
                }
                use InstructionOpcode as Op;
                match i.opcode() {
                    Op::Return => {
                        self.leave(at, self.const32(0), false);
                        break;
                    }
                    Op::Alloca => continue,
                    _ => {}
                }
                let value = i.as_value();
                // A comparison whose result the copy knows is a constant where it is used.
                if is_index_call(i, self.hooks)
                    || self.forced.contains_key(&i)
                    || self.clamped.contains_key(&i)
                    || (i.as_terminator().is_none()
                        && !value.ty().is_void()
                        && kinds.of(value) != Kind::Varying)
                {
                    continue;
                }
                let mut set_thread = false;
                if let Some(call) = value.as_call()
                    && let Some(f) = callee(call)
                {
                    if f.name().starts_with(b"llvm.lifetime.") {
                        continue;
                    }
                    set_thread = f.intrinsic_id().is_none() && !self.hooks.is_hook(f);
                }
                let mut operands = Vec::new();
                for index in 0..i.num_operands() {
                    let Some(op) = i.operand(index) else { continue };
                    if op.is_basic_block() {
                        continue;
                    }
                    let mapped = self.remap(op, &mut clone, kinds)?;
                    if mapped != op {
                        operands.push((index, mapped));
                    }
                }
                self.builder.position_at_end(copy);
                if let Some(probe) = &self.probing
                    && probe.trim.branch == i
                {
                    let (trim, rest) = (probe.trim, probe.rest);
                    self.record_trim_bound(trim, &mut clone, kinds)?;
                    self.builder.build_br(rest);
                    break;
                }
                if set_thread {
                    // The index state the called function may read (a panic's report).
                    self.call(self.hooks.set_thread, &at.xyz);
                }
                let operand = |index: u32| {
                    operands
                        .iter()
                        .find(|(k, _)| *k == index)
                        .map(|(_, v)| *v)
                        .or_else(|| i.operand(index))
                        .expect("an access's operand")
                };
                if i.is_atomic()
                    && self.is_block_memory(i)
                    && let Some(plain) = self.plain_access(i, &operand)
                {
                    clone.values.insert(value, plain);
                    continue;
                }
                if let Some(byte) = self.flag_in_lanes_as_byte(i, &operand) {
                    clone.values.insert(value, byte);
                    continue;
                }
                let copied = self.builder.insert_clone(i);
                for (index, mapped) in operands {
                    copied.set_operand(index, mapped);
                }
                clone.values.insert(value, copied.as_value());
                if let Some(terminator) = copied.as_terminator() {
                    let successors: Vec<Block<'m>> = terminator.successors().collect();
                    for (index, successor) in successors.into_iter().enumerate() {
                        let key = (successor, None);
                        let left = self.probing.as_ref().filter(|p| !p.prefix.contains(&key));
                        let target = match (left, copies.get(&key)) {
                            (Some(probe), _) => probe.rest,
                            (None, Some(b)) => *b,
                            (None, None) => {
                                let b = self.block(c"r");
                                copies.insert(key, b);
                                work.push((key, b));
                                b
                            }
                        };
                        terminator.set_successor(index as u32, target);
                    }
                    break;
                }
            }
        }
        Ok(first_block)
    }

    /// A load or store of an `i1` in a thread's lanes (operands from `operand`), built at the
    /// builder's position as one of a byte: LLVM scalarizes a vector of `i1` stored under a
    /// mask, a branch and a byte store a lane where a flag is set on one way of a branch
    /// (`hotspot`'s `computed`), while bytes are one masked vector store. Its value (none for
    /// a store); `None` for any other access.
    fn flag_in_lanes_as_byte(
        &self,
        i: Instruction<'m>,
        operand: &dyn Fn(u32) -> Value<'m>,
    ) -> Option<Value<'m>> {
        let (accessed, pointer_index) = if i.is_store() {
            (i.operand(0)?.ty(), 1)
        } else if i.is_load() {
            (i.as_value().ty(), 0)
        } else {
            return None;
        };
        let flag = self.module.i1_type();
        let in_lanes = i
            .operand(pointer_index)
            .is_some_and(|p| self.lanes.iter().any(|(alloca, ..)| *alloca == p));
        if accessed != flag || !in_lanes || i.is_atomic() || i.is_volatile() {
            return None;
        }
        let (b, byte) = (&self.builder, self.module.i8_type());
        let pointer = operand(pointer_index);
        if i.is_store() {
            let store = b.build_store(b.build_zext(operand(0), byte, c""), pointer);
            store.copy_debug_location_from(i);
            Some(store.as_value())
        } else {
            let load = b.build_load(byte, pointer, c"");
            load.copy_debug_location_from(i);
            Some(b.build_trunc(load.as_value(), flag, c""))
        }
    }

    /// Where a row's threads below a park's bound end (`i32`, at most `width`, 0 where none
    /// of the row's is): `V` (`V + 1` for an inclusive bound), less the rank of the row's
    /// first thread (`row`) for a test of the rank.
    fn parked_end(&self, trim: Trim<'m>, width: Value<'m>, row: Value<'m>) -> Value<'m> {
        let bound = self.parked_bound(trim);
        let bound = if trim.by_rank {
            self.left_of(bound, row)
        } else {
            bound
        };
        let b = &self.builder;
        let width64 = b.build_zext(width, self.i64_ty, c"");
        let below = b.build_icmp(IntPredicate::ULT, bound, width64, c"");
        let end = b.build_select(below, bound, width64, c"");
        b.build_trunc(end, self.i32_ty, c"live.x.end")
    }

    /// The end of the indices below a park's bound (`i64`): `V`, `V + 1` for an inclusive
    /// one (saturated: `V` is `u64::MAX` only past every thread).
    fn parked_bound(&self, trim: Trim<'m>) -> Value<'m> {
        let b = &self.builder;
        let bound = b
            .build_load(self.i64_ty, self.trim_bound, c"bound")
            .as_value();
        if !trim.inclusive {
            return bound;
        }
        let all = b.build_icmp(IntPredicate::EQ, bound, self.const64(u64::MAX), c"");
        let next = b.build_add(bound, self.const64(1), c"");
        b.build_select(all, bound, next, c"")
    }

    /// `end - row` where `end > row`, else 0 (`i64`s).
    fn left_of(&self, end: Value<'m>, row: Value<'m>) -> Value<'m> {
        let b = &self.builder;
        let past = b.build_icmp(IntPredicate::UGT, end, row, c"");
        let left = b.build_binop(InstructionOpcode::Sub, end, row, c"");
        b.build_select(past, left, self.const64(0), c"")
    }

    /// The threads of a row (rank `row`) that are live ([`Emitter::live`]): `x` below the
    /// returned width; the row's block where any is, which the builder is left in, else on
    /// to `done`.
    fn live_width(
        &self,
        [x_end, rank_end]: [Value<'m>; 2],
        row: Value<'m>,
        bx: Value<'m>,
        done: Block<'m>,
    ) -> (Value<'m>, Block<'m>) {
        let b = &self.builder;
        let x_end = b.build_load(self.i32_ty, x_end, c"").as_value();
        let rank_end = b.build_load(self.i64_ty, rank_end, c"").as_value();
        let below = b.build_icmp(IntPredicate::ULT, x_end, bx, c"");
        let width = b.build_select(below, x_end, bx, c"");
        let width64 = b.build_zext(width, self.i64_ty, c"");
        let left = self.left_of(rank_end, row);
        let b = &self.builder;
        let below = b.build_icmp(IntPredicate::ULT, left, width64, c"");
        let width = b.build_trunc(
            b.build_select(below, left, width64, c""),
            self.i32_ty,
            c"live.width",
        );
        let some = b.build_icmp(IntPredicate::NE, width, self.const32(0), c"");
        let entry = self.block(c"row.some");
        self.builder.build_cond_br(some, entry, done);
        self.builder.position_at_end(entry);
        (width, entry)
    }

    /// Records, before the clone's copy of the trim branch, the bound `V` it compares the
    /// thread's index with (widened to 64 bits) and that the branch was reached.
    fn record_trim_bound(
        &mut self,
        trim: Trim<'m>,
        clone: &mut RegionClone<'_, 'm>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> std::result::Result<(), String> {
        let bound = match trim.constant {
            Some(bound) => self.const64(bound),
            None => {
                let compare = trim
                    .branch
                    .operand(0)
                    .and_then(|c| c.as_instruction())
                    .ok_or("a trim branch without its comparison")?;
                let bound = compare
                    .operand(1 - trim.x_operand)
                    .ok_or("a trim comparison without its bound")?;
                let bound = self.remap(bound, clone, kinds)?;
                self.builder.position_at_end(clone.current);
                self.widened(bound)
            }
        };
        self.builder.position_at_end(clone.current);
        self.builder.build_store(bound, self.trim_bound);
        self.builder.build_store(self.const32(1), self.trim_reached);
        Ok(())
    }

    /// Whether the atomic access `i` is to memory only the block's OS thread reaches (shared
    /// memory, the image's thread-locals, the thread's locals): in region form the block's
    /// threads run one after another there, so the access needs no atomic instruction.
    pub(super) fn is_block_memory(&self, i: Instruction<'m>) -> bool {
        let pointer_index = if i.is_store() { 1 } else { 0 };
        let mut pointer = i.operand(pointer_index);
        while let Some(p) = pointer {
            let Some(def) = p.as_instruction() else {
                return false;
            };
            use InstructionOpcode as Op;
            match def.opcode() {
                Op::GetElementPtr | Op::BitCast | Op::AddrSpaceCast => pointer = def.operand(0),
                Op::Alloca => return true,
                Op::Call => {
                    return p
                        .as_call()
                        .and_then(callee)
                        .is_some_and(|f| self.hooks.gives_block_memory(f));
                }
                _ => return false,
            }
        }
        false
    }

    /// The plain form of the atomic access `i` (operands from `operand`), built at the
    /// builder's position: its value (the old value, a load's value, or none for a store);
    /// `None` for an operation it has no plain form of.
    pub(super) fn plain_access(
        &self,
        i: Instruction<'m>,
        operand: &dyn Fn(u32) -> Value<'m>,
    ) -> Option<Value<'m>> {
        let b = &self.builder;
        if i.is_load() || i.is_store() {
            let copied = b.insert_clone(i);
            for index in 0..i.num_operands() {
                copied.set_operand(index, operand(index));
            }
            copied.make_not_atomic();
            mark_in_turn(self.module, copied);
            return Some(copied.as_value());
        }
        let pointer = operand(0);
        if i.is_cmpxchg() {
            let (expected, new) = (operand(1), operand(2));
            let old = b.build_load(expected.ty(), pointer, c"");
            mark_in_turn(self.module, old);
            let old = old.as_value();
            let equal = b.build_icmp(IntPredicate::EQ, old, expected, c"");
            let stored = b.build_select(equal, new, old, c"");
            mark_in_turn(self.module, b.build_store(stored, pointer));
            let pair = b.build_insert_value(i.as_value().ty().poison(), old, 0, c"");
            return Some(b.build_insert_value(pair, equal, 1, c""));
        }
        let op = i.atomic_rmw_op()?;
        let v = operand(1);
        let old = b.build_load(v.ty(), pointer, c"");
        mark_in_turn(self.module, old);
        let old = old.as_value();
        let new = match op {
            AtomicRmwOp::Xchg => v,
            AtomicRmwOp::Binary(opcode) => b.build_binop(opcode, old, v, c""),
            AtomicRmwOp::Nand => {
                let and = b.build_binop(InstructionOpcode::And, old, v, c"");
                b.build_not(and, c"")
            }
            AtomicRmwOp::Keep(keep) => {
                let keep_old = b.build_icmp(keep, old, v, c"");
                b.build_select(keep_old, old, v, c"")
            }
        };
        mark_in_turn(self.module, b.build_store(new, pointer));
        Some(old)
    }

    /// Ends a thread's run of the region: it leaves with `state`.
    pub(super) fn leave(&self, at: &ThreadAt<'m>, state: Value<'m>, flagged: bool) {
        let b = &self.builder;
        if let Some(probe) = &self.probing {
            // A probe that reaches a barrier or returns never reached the trim branch.
            b.build_br(probe.rest);
            return;
        }
        let state = if flagged {
            // A thread that returns leaves no block value: the threads that go on do.
            for slot in &self.block_slots {
                b.build_store(b.build_load(slot.ty, slot.local, c"").as_value(), slot.next);
            }
            b.build_or(state, at.flag, c"")
        } else {
            state
        };
        b.build_store(state, at.state);
        b.build_br(at.latch);
    }

    /// What `op`, an operand of the body, is in a region's clone: its copy, the entry point's
    /// parameters or local, the thread's index, a per-block value, or a value computed again
    /// at the clone's end.
    pub(super) fn remap(
        &mut self,
        op: Value<'m>,
        clone: &mut RegionClone<'_, 'm>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> std::result::Result<Value<'m>, String> {
        if let Some(v) = clone.values.get(&op) {
            return Ok(*v);
        }
        if let Some(&known) = op.as_instruction().and_then(|i| self.forced.get(&i)) {
            return Ok(self.module.i1_type().const_int(u64::from(known), false));
        }
        if let Some((i, &k)) = op
            .as_instruction()
            .and_then(|i| Some((i, self.clamped.get(&i)?)))
        {
            let returned = i
                .operand(k)
                .ok_or("internal error: a clamp without its operand")?;
            return self.remap(returned, clone, kinds);
        }
        if op == self.body_params {
            return Ok(self.params);
        }
        if let Some(v) = self.single.get(&op).or_else(|| clone.locals.get(&op)) {
            return Ok(*v);
        }
        let Some(i) = op.as_instruction() else {
            return Ok(op);
        };
        if is_index_call(i, self.hooks) {
            let which = index_of(i)?;
            return Ok(match which {
                0..3 => clone.at.xyz[which as usize],
                w if w == u64::from(abi::CPU_IR_RANK) => {
                    let rank = self.rank_of(&clone.at, clone.current);
                    clone.values.insert(op, rank);
                    rank
                }
                w => *self
                    .block_values
                    .get(&w)
                    .ok_or_else(|| with_location("the index hook asked an unknown index", i))?,
            });
        }
        if let Some(warp) = clone.at.warp
            && let Some(part) = warp_part(i, self.hooks)
        {
            self.builder.position_at_end(clone.current);
            let value = warp_value(&self.builder, part, clone.at.xyz[0], &warp, op);
            clone.values.insert(op, value);
            return Ok(value);
        }
        match kinds.of(op) {
            Kind::Hoistable => self.hoist(op),
            Kind::Recomputed => {
                let mut operands = Vec::new();
                for index in 0..i.num_operands() {
                    let Some(o) = i.operand(index) else { continue };
                    operands.push((index, self.remap(o, clone, kinds)?));
                }
                let copied = self.copy_at_end(clone.current, i, &operands);
                clone.values.insert(op, copied);
                Ok(copied)
            }
            Kind::Varying => Err(with_location(
                "internal error: a value crosses a barrier without a slot",
                i,
            )),
        }
    }

    /// A copy of the body's `i` at the end of `at`, with the operands `operands` gives
    /// (by index) in place of its own.
    pub(super) fn copy_at_end(
        &self,
        at: Block<'m>,
        i: Instruction<'m>,
        operands: &[(u32, Value<'m>)],
    ) -> Value<'m> {
        self.builder.position_at_end(at);
        let copied = self.builder.insert_clone(i);
        for &(index, mapped) in operands {
            if copied.operand(index) != Some(mapped) {
                copied.set_operand(index, mapped);
            }
        }
        copied.as_value()
    }

    /// The rank in its block of the thread `at`, computed at the end of `current`.
    fn rank_of(&self, at: &ThreadAt<'m>, current: Block<'m>) -> Value<'m> {
        let [x, y, z] = at.xyz;
        let [bx, by] = [6, 7].map(|w| self.block_values[&w]);
        let b = &self.builder;
        b.position_at_end(current);
        let row = b.build_mul(b.build_add(b.build_mul(z, by, c""), y, c""), bx, c"");
        b.build_add(x, row, c"rank")
    }

    /// `op`'s value computed once per block.
    pub(super) fn hoist(&mut self, op: Value<'m>) -> std::result::Result<Value<'m>, String> {
        if let Some(v) = self.hoisted.get(&op) {
            return Ok(*v);
        }
        if op == self.body_params {
            return Ok(self.params);
        }
        let Some(i) = op.as_instruction() else {
            return Ok(op);
        };
        if is_index_call(i, self.hooks) {
            let which = index_of(i)?;
            return self
                .block_values
                .get(&which)
                .copied()
                .ok_or_else(|| with_location("a thread's index computed once per block", i));
        }
        let mut operands = Vec::new();
        for index in 0..i.num_operands() {
            let Some(o) = i.operand(index) else { continue };
            operands.push((index, self.hoist(o)?));
        }
        self.builder.position_before(self.hoist_point);
        let clone = self.builder.insert_clone(i);
        for (index, value) in operands {
            if clone.operand(index) != Some(value) {
                clone.set_operand(index, value);
            }
        }
        self.hoisted.insert(op, clone.as_value());
        Ok(clone.as_value())
    }
}
