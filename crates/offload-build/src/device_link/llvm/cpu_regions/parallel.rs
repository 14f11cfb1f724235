//! The regions' loops over `x` marked parallel. Between two barriers a GPU runs a block's
//! threads in no order, and a thread sees another's writes only after the next barrier (or
//! through atomics): a region's loop over its threads has no dependence from one thread to the
//! next that a program may rely on. LLVM cannot know that, and kept such loops scalar where
//! threads store beside one another (a stencil's edge threads storing the halo next to their
//! neighbours' cells, a transpose's tile rows). Each loop gets `llvm.loop.parallel_accesses`
//! over an access group that every memory access in it belongs to, as clang marks
//! `#pragma clang loop vectorize(assume_safety)`.
//!
//! A loop is left as it is where some access in it is one the threads make in turn rather
//! than in no order: the plain form of an atomic on shared memory ([`mark_in_turn`]), a local
//! of the entry point that LLVM does not make a register (the threads use one copy each
//! after the other), a thread-local of the image at a fixed place (the runtime's scalars), an
//! atomic load or store (LLVM would widen it in a parallel loop; a read-modify-write on
//! global memory joins the group, as LLVM widens none), a fence, a volatile access, or a call
//! that LLVM may not inline into something it can see (any but the index hook, the
//! intrinsics that touch no memory, the markers and the copies). The emitter hands over only the loops that run every thread they visit: a guarded
//! loop (the threads at one of several barriers) would run them all as masked vectors.

use std::collections::{HashMap, HashSet};

use inkwell::values::InstructionOpcode;

use inkwell::AtomicOrdering;

use super::super::ir::{Block, Function, Instruction, MetadataNode, Module, Value};
use super::addresses::{COPY_INTRINSICS, derived_from, sources};
use super::dominators::Dominators;
use super::hooks::callee;

/// Intrinsics that touch no memory a thread shares: markers.
const MARKER_INTRINSICS: [&[u8]; 4] = [
    b"llvm.lifetime.",
    b"llvm.assume",
    b"llvm.experimental.noalias.scope.decl",
    b"llvm.dbg.",
];

/// The metadata kind that marks the plain loads and stores an atomic access became: the
/// block's threads make them one after another, as the atomic orders them on a GPU.
const IN_TURN: &str = "offload.cpu.in_turn";

/// Marks `access`, the plain form of an atomic one, as one the threads make in turn: a loop
/// holding it is not marked parallel.
pub(super) fn mark_in_turn<'m>(module: Module<'m>, access: Instruction<'m>) {
    access.set_metadata(module.metadata_kind(IN_TURN), module.empty_metadata_node());
}

/// Marks each loop of `loops` (its header, the `x` counter's block, and its latch) of the
/// entry point `function` parallel where every memory access in it may be; `index` is the
/// index hook, which LLVM inlines later (its loads then join the call's group). Each loop is
/// shaped as `shape` says ([`thread_loop_id`]). A loop whose accesses that vary with the
/// thread would all be gathers and scatters, or that would scatter on every trip, is kept
/// scalar ([`kept_scalar`]).
pub(super) fn mark_thread_loops_parallel<'m>(
    module: Module<'m>,
    function: Function<'m>,
    index: Function<'m>,
    loops: &[(Block<'m>, Block<'m>)],
    shape: ThreadLoops,
) {
    let group = module.metadata_node(None, &[]);
    let access_group = module.metadata_kind("llvm.access.group");
    let loop_kind = module.metadata_kind("llvm.loop");
    let in_turn = module.metadata_kind(IN_TURN);
    let entry = function.entry_block();
    if locals_escape(entry) {
        // An access through an address loaded from memory could reach one of them.
        return;
    }
    let dominators = Dominators::of(function);
    for &(header, latch) in loops {
        let Some(blocks) = function.loop_blocks(header, latch) else {
            continue;
        };
        let shape = shape.of_loop(&blocks);
        let accesses: Result<Vec<Instruction<'m>>, ()> = blocks
            .iter()
            .flat_map(|b| b.instructions())
            .filter_map(|i| {
                if i.has_metadata(in_turn) {
                    return Some(Err(()));
                }
                in_no_order(i, entry, index).transpose()
            })
            .collect();
        let Some(branch) = latch.terminator() else {
            continue;
        };
        let Ok(accesses) = accesses else {
            branch
                .instruction()
                .set_metadata(loop_kind, thread_loop_id(module, None, shape));
            continue;
        };
        let x = header.first_instruction().filter(|i| i.as_value().is_phi());
        let scalar = x.is_some_and(|x| kept_scalar(&accesses, x.as_value(), latch, &dominators));
        for access in accesses {
            access.set_metadata(access_group, group);
        }
        let id = if scalar {
            module.loop_id(&[
                parallel_over(module, group),
                module.loop_property("llvm.loop.vectorize.enable", 0),
            ])
        } else {
            thread_loop_id(module, Some(group), shape)
        };
        branch.instruction().set_metadata(loop_kind, id);
    }
}

/// How an address depends on a thread loop's counter `x`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Not at all.
    Not,
    /// Through sums and constant multiples of it: the threads' addresses a constant stride
    /// apart, which LLVM loads and stores as vectors (or interleaved ones).
    Affine,
    /// Otherwise: a Blelloch scan's tree level (`offset * (2 * x + 1) - 1`, the block's
    /// `offset`, and its padding's `i >> 5`), a bitonic sort's partner (`x ^ j`).
    Other,
}

/// Whether the thread loop closed by `latch`, of counter `x` and memory accesses `accesses`,
/// is kept scalar (`llvm.loop.vectorize.enable` false) because as vectors its accesses would
/// be gathers and scatters, which cost this AMD core more than LLVM's model says (every image
/// of the levels without them kept such loops scalar already):
/// - every access whose address depends on `x` depends on it otherwise than affinely, and one
///   does: on `x86-64-v4` the vectorized tree levels made `prescan` 2.4x slower; a loop with
///   one affine access (a bitonic sort's `shared[x]` beside its partner's) stays vectorized;
/// - or a store that runs on every trip (its block dominates the latch) does: a scatter on
///   every trip; scalar, `prescan`'s stores to its padded slots (`i + (i >> 5)`) beside the
///   input's contiguous loads made it 1.1x faster on `x86-64-v4`. A scatter under a test (a
///   warp's last lane storing the warp's sum) leaves the loop vectorized.
fn kept_scalar<'m>(
    accesses: &[Instruction<'m>],
    x: Value<'m>,
    latch: Block<'m>,
    dominators: &Dominators<'m>,
) -> bool {
    use InstructionOpcode as Op;
    let mut memo = HashMap::new();
    let (mut gathered, mut affine) = (false, false);
    for access in accesses {
        let address = match access.opcode() {
            Op::Store => access.operand(1),
            Op::Load | Op::AtomicRMW | Op::AtomicCmpXchg => access.operand(0),
            _ => None,
        };
        let Some(address) = address else {
            continue;
        };
        match reach(address, x, &mut memo) {
            Reach::Not => {}
            Reach::Affine => affine = true,
            Reach::Other => {
                let every_trip = || dominators.dominates(access.block(), latch);
                if access.opcode() == Op::Store && every_trip() {
                    return true;
                }
                gathered = true;
            }
        }
    }
    gathered && !affine
}

/// How `value` depends on `x` (`memo` holds what is known, and marks a value under way).
fn reach<'m>(value: Value<'m>, x: Value<'m>, memo: &mut HashMap<Value<'m>, Reach>) -> Reach {
    use InstructionOpcode as Op;
    if value == x {
        return Reach::Affine;
    }
    let Some(i) = value.as_instruction() else {
        return Reach::Not;
    };
    if let Some(known) = memo.get(&value) {
        return *known;
    }
    // Under way: a cycle back to `value` through the phis of the loops around the thread loop
    // does not depend on `x` by itself (a phi that takes `x` in on another way is `Other`).
    memo.insert(value, Reach::Not);
    let operands: Vec<Value<'m>> = i.as_value().operands().collect();
    let reaches: Vec<Reach> = operands.iter().map(|&o| reach(o, x, memo)).collect();
    let reaching = reaches.iter().filter(|&&r| r != Reach::Not).count();
    let result = if reaching == 0 {
        Reach::Not
    } else if reaches.contains(&Reach::Other) {
        Reach::Other
    } else {
        match i.opcode() {
            Op::Add | Op::Sub | Op::Or | Op::ZExt | Op::SExt | Op::Trunc | Op::GetElementPtr => {
                Reach::Affine
            }
            Op::Mul | Op::Shl
                if reaching == 1
                    && operands
                        .iter()
                        .zip(&reaches)
                        .all(|(o, &r)| r == Reach::Affine || o.is_constant_int()) =>
            {
                Reach::Affine
            }
            _ => Reach::Other,
        }
    };
    memo.insert(value, result);
    result
}

/// `llvm.loop.parallel_accesses` over `group`: the loop property that says the accesses of the
/// group are in no order between the loop's trips.
pub(in super::super) fn parallel_over<'m>(
    module: Module<'m>,
    group: MetadataNode<'m>,
) -> MetadataNode<'m> {
    module.metadata_node(Some("llvm.loop.parallel_accesses"), &[group])
}

/// How the image's vectors run its thread loops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadLoops {
    /// Whether LLVM may peel a loop's first trips.
    pub peeling: Peeling,
    /// Vectors a trip of the vector loop (`llvm.loop.interleave.count`). LLVM, not knowing
    /// a block's width, interleaves four vectors of eight, so that a row of 16 threads (a 16 ×
    /// 16 block) never enters the vector loop and runs in its scalar remainder: one vector a
    /// trip where the image has 16 vector registers (SSE, AVX2; two made the baseline image's
    /// `stencil7` 1.6x and `jacobi5` 1.3x slower), two with AVX-512's 32, whose 256-bit
    /// vectors of eight then take a row of 16 in one trip (`stencil5` 1.2x, `block_sum`
    /// 1.1x).
    pub interleave: u32,
    /// Which comparisons `x == V` of a thread's `x` index with a value the block computes
    /// once make thread `V` of each row run a region alone, the loops over the others
    /// free of the test.
    pub alone: Alone,
    /// Whether a test `x + C < V` that never wraps (a global index against a length, `if i <
    /// n`) cuts a row as `x < V - C`, each loop free of the test: on the images without
    /// AVX-512, which otherwise kept the row scalar or masked (`jacobi5` 1.25x on the baseline
    /// image, `stencil5` and `stencil7` 1.1x on `x86-64-v3`). AVX-512's masked loads cost
    /// what plain ones do, and there the cut made `block_sum` 0.77x: its images cut only the
    /// regions whose accesses would be gathers or scatters (`strides::gathers_or_scatters`).
    pub offset_cuts: bool,
    /// Whether a warp's first lane (`rank & !31`, what a warp operation counts its slots and
    /// lanes from) alone makes a region's rows run a warp at a time, the first lane one value
    /// for each loop: on the images without AVX-512, where the lanes' vector was built lane by
    /// lane (`reduce5` 1.3x on the baseline image). A warp's 32 threads are one trip of
    /// AVX-512's loops either way, and the pieces' heads cost more (`reduce5` 0.95x).
    pub first_lane_pieces: bool,
}

/// Which threads of a row run a region alone, by what a masked store costs the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alone {
    /// Those whose test leads to a store to a word the block shares, which LLVM made a masked
    /// scatter. For AVX-512, whose masked loads and stores cost what plain ones do: a
    /// stencil's halo as a masked vector store beside the neighbours' cells was faster than
    /// the row in pieces (running alone every thread a test names made `jacobi5` 0.6x and
    /// `stencil5` 0.7x).
    UniformStores,
    /// Those of every test `x == V` or `x + C == V` a branch takes (up to two a region,
    /// constants first): a stencil's `tx == 0`, `tx == 15` halo threads and its
    /// `col == 0 || col == n - 1` border, which SSE cannot mask and AVX2 masks slowly on AMD's
    /// cores, so that LLVM kept the whole row scalar (`jacobi5` 1.24x on the baseline image,
    /// 1.53x on `x86-64-v3`; `stencil5` and `stencil7` 1.24–1.42x).
    EveryBranch,
}

impl ThreadLoops {
    /// For an image whose vectors are AVX-512's: unpeeled, two vectors a trip.
    pub const AVX512: ThreadLoops = ThreadLoops {
        peeling: Peeling::Never,
        interleave: 2,
        alone: Alone::UniformStores,
        offset_cuts: false,
        first_lane_pieces: false,
    };
    /// For any other image: peeled where LLVM peels, one vector a trip, every thread a test
    /// names run alone.
    pub const NARROW: ThreadLoops = ThreadLoops {
        peeling: Peeling::Allowed,
        interleave: 1,
        alone: Alone::EveryBranch,
        offset_cuts: true,
        first_lane_pieces: true,
    };

    /// What `self` is for the loop of `blocks` ([`Peeling::of_loop`]).
    pub(in super::super) fn of_loop(self, blocks: &[Block<'_>]) -> ThreadLoops {
        ThreadLoops {
            peeling: self.peeling.of_loop(blocks),
            ..self
        }
    }
}

/// Whether LLVM may peel a thread loop's first trips, by the image's vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peeling {
    /// LLVM peels a trip where that drops a test from the loop: a stencil's `if tx == 0 {..}`
    /// (the thread that stores the tile's left halo) peels thread 0 off each row, and the
    /// other 15 threads of a 16-wide row run as one vector of eight and seven scalar trips.
    /// Kept where a masked store costs more than that (AVX2's `vmaskmovps` on AMD's cores made
    /// `jacobi5` 1.9x slower unpeeled; SSE has none).
    Allowed,
    /// Not peeled: the row runs as whole vectors, the test a mask. For AVX-512, whose masked
    /// stores cost what plain ones do (`jacobi5` 1.2x, `stencil5` 1.2x).
    Never,
}

impl Peeling {
    /// What `self` is for the loop of `blocks`: a loop holding an atomic read-modify-write is
    /// peeled where LLVM peels it, as LLVM vectorizes no such loop and peeling takes out the
    /// thread whose test guards the atomic (`if tid == 0 { total.fetch_add(..) }`): unpeeled,
    /// the loop of `examples/reduce`'s `block_sum` tested each thread of the block.
    pub(in super::super) fn of_loop(self, blocks: &[Block<'_>]) -> Peeling {
        let atomic = blocks.iter().flat_map(|b| b.instructions()).any(|i| {
            matches!(
                i.opcode(),
                InstructionOpcode::AtomicRMW | InstructionOpcode::AtomicCmpXchg
            )
        });
        if atomic { Peeling::Allowed } else { self }
    }
}

/// A thread loop's ID: as many vectors a trip as `shape` says, parallel over `group` where the
/// loop's accesses all belong to it and may be, and not peeled where `shape` says so.
pub(in super::super) fn thread_loop_id<'m>(
    module: Module<'m>,
    group: Option<MetadataNode<'m>>,
    shape: ThreadLoops,
) -> MetadataNode<'m> {
    let mut properties = Vec::with_capacity(3);
    properties.extend(group.map(|group| parallel_over(module, group)));
    properties.push(module.loop_property("llvm.loop.interleave.count", shape.interleave));
    if shape.peeling == Peeling::Never {
        // LLVM has no property that asks for no peeling; it peels no more trips off a loop
        // that says as many were peeled already as it ever peels (`-unroll-peel-max-count`).
        properties.push(module.loop_property("llvm.loop.peeled.count", i32::MAX as u32));
    }
    module.loop_id(&properties)
}

/// For `i` in a thread loop: `Ok(Some(i))` where it accesses memory in no order between the
/// threads (it joins the access group), `Ok(None)` where it accesses none, `Err(())` where the
/// threads share what it accesses in turn.
fn in_no_order<'m>(
    i: Instruction<'m>,
    entry: Option<Block<'m>>,
    index: Function<'m>,
) -> Result<Option<Instruction<'m>>, ()> {
    use InstructionOpcode as Op;
    match i.opcode() {
        // Threads make their atomic read-modify-writes on global memory in no order, and LLVM
        // vectorizes no loop that holds one: in the group, they let the loop's other versions
        // (those unswitched on a value the block shares, without the atomic) vectorize
        // unchecked. An atomic load or store LLVM would widen.
        op @ (Op::Load | Op::Store | Op::AtomicRMW | Op::AtomicCmpXchg) => {
            let address = i.operand(u32::from(op == Op::Store)).ok_or(())?;
            let widenable_atomic = matches!(op, Op::Load | Op::Store)
                && !matches!(i.atomic_ordering(), Some(AtomicOrdering::NotAtomic));
            let in_order = i.is_volatile() || widenable_atomic;
            if !in_order && unshared_or_a_register(address, entry) {
                Ok(Some(i))
            } else {
                Err(())
            }
        }
        Op::Fence | Op::VAArg => Err(()),
        Op::Call => {
            let call = i.as_value().as_call().ok_or(())?;
            let f = callee(call).ok_or(())?;
            let name = f.name();
            let copies_unshared = || {
                COPY_INTRINSICS.iter().any(|p| name.starts_with(p))
                    && call
                        .args()
                        .filter(|a| a.ty().is_pointer())
                        .all(|a| no_local_behind(a, entry))
            };
            if f.accesses_no_memory() {
                Ok(None)
            } else if f == index
                || MARKER_INTRINSICS.iter().any(|p| name.starts_with(p))
                || copies_unshared()
            {
                Ok(Some(i))
            } else {
                Err(())
            }
        }
        _ => Ok(None),
    }
}

/// Whether a load or store through `address` touches memory each thread has its own of or
/// that the block shares in no order: no local of the entry point is behind it, nor a
/// thread-local of the image at a fixed place (the runtime's per-thread scalars, which the
/// block's threads use in turn; its arrays by thread rank are each thread's own), or it is
/// such a local itself that LLVM makes a register (then no memory is left to share).
fn unshared_or_a_register(address: Value<'_>, entry: Option<Block<'_>>) -> bool {
    (no_local_behind(address, entry) && !fixed_thread_local(address))
        || (is_entry_local(address, entry) && becomes_a_register(address))
}

/// Whether `address` is a thread-local of the image, or a constant offset into one.
fn fixed_thread_local(address: Value<'_>) -> bool {
    let mut value = address;
    loop {
        if value
            .as_global_variable()
            .is_some_and(|g| g.is_thread_local())
        {
            return true;
        }
        let Some(i) = value.as_instruction() else {
            return false;
        };
        match i.opcode() {
            InstructionOpcode::GetElementPtr
                if i.as_value().operands().skip(1).all(|o| o.is_constant()) =>
            {
                value = i.operand(0).expect("a GEP has a base");
            }
            InstructionOpcode::BitCast | InstructionOpcode::AddrSpaceCast => {
                value = i.operand(0).expect("a cast has an operand");
            }
            InstructionOpcode::Call => {
                let call = value.as_call();
                let is_address = call
                    .and_then(callee)
                    .is_some_and(|f| f.name().starts_with(b"llvm.threadlocal.address"));
                return is_address;
            }
            _ => return false,
        }
    }
}

/// Whether `alloca` is only loaded and stored whole (not stored itself, not offset, not
/// passed anywhere), which LLVM's `mem2reg`/`sroa` turn into registers.
fn becomes_a_register(alloca: Value<'_>) -> bool {
    alloca.users().into_iter().all(|user| {
        let Some(i) = user.as_instruction() else {
            return false;
        };
        match i.opcode() {
            InstructionOpcode::Load => !i.is_volatile(),
            InstructionOpcode::Store => !i.is_volatile() && i.operand(0) != Some(alloca),
            _ => false,
        }
    })
}

fn is_entry_local(value: Value<'_>, entry: Option<Block<'_>>) -> bool {
    value.is_alloca() && value.as_instruction().map(|i| i.block()) == entry
}

/// Whether no local of the entry point is behind `address` (through offsets, casts, phis and
/// selects).
fn no_local_behind(address: Value<'_>, entry: Option<Block<'_>>) -> bool {
    let mut seen = HashSet::from([address]);
    let mut work = vec![address];
    while let Some(value) = work.pop() {
        if is_entry_local(value, entry) {
            return false;
        }
        for source in sources(value) {
            if seen.insert(source) {
                work.push(source);
            }
        }
    }
    true
}

/// Whether the address of a local of the entry point (or one computed from it) is stored,
/// passed to a call other than a marker or a copy, or made an integer.
fn locals_escape(entry: Option<Block<'_>>) -> bool {
    let Some(entry) = entry else {
        return false;
    };
    let locals: Vec<Value<'_>> = entry
        .instructions()
        .map(|i| i.as_value())
        .filter(|v| v.is_alloca())
        .collect();
    derived_from(&locals).1
}
