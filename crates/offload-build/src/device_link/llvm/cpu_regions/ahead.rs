//! The next block's lines fetched ahead. A worker runs consecutive blocks, and a block of a
//! tiled kernel reads a few lines of each of its rows (`stencil7`'s 16 × 16 tiles: 64 bytes
//! of 16 rows 1 KiB apart in each of three planes): too many short streams for the cores'
//! prefetchers, so each row waited for memory. At each row's start the region's loop fetches
//! the lines the same row of the block with the next `x` index will read and write, from the
//! addresses the body computes from the thread's and the block's indices and the parameters
//! alone: a hint, with no effect on what the kernel computes.
//!
//! Only where a block's rows are at different places (the address moves with the thread's
//! `y` or `z` index): a block that is one row streams its part, which the cores follow, and
//! a hint at its start slowed a reduction 2.2x on AVX-512. Not for what a lone row or column
//! of threads reads (a halo's edge, under a test `ty == 0`): the rows beside it fetch those
//! lines.

use std::collections::HashMap;

use inkwell::values::InstructionOpcode;

use super::super::ir::{Block, Instruction, Value};
use super::emit::{Emitter, FetchAhead};
use super::hooks::{Complete, index_of, is_index_call};
use super::kinds::{Kind, Kinds};
use super::uniform::{is_pure, is_pure_call};

/// The thread's `y` and `z` indices and the block's `x` index, as the index hook numbers them.
const THREAD_Y: u64 = 1;
const THREAD_Z: u64 = 2;
const BLOCK_X: u64 = 3;
/// The block's width in threads.
const BLOCK_DIM_X: u64 = 6;
/// The streams (a row's run of lines, for each access) a row of a block makes over its
/// regions at the least for the rows to fetch ahead. A block's rows are known only at its
/// launch; tiles have 8 to 32. The cores' own prefetchers follow about 32 streams at once, as
/// measured on AMD's Zen 4: tiles of 16 rows of two streams (`jacobi5`, `stencil5`, a tiled
/// matrix product's output) ran up to 13% slower with the hints, those of 16 rows of four
/// (`stencil7`) and 8 rows of eight (a transpose's 32 rows read and 32 written) 1.1–2.7x
/// faster.
const FEWEST_STREAMS_A_ROW: usize = 3;
/// Lines fetched ahead at most at each row's start: a row of a tile reads few streams.
const MOST_STREAMS: usize = 8;

/// The thread whose addresses a row's prefetch computes (the row's first or last), where,
/// and the body's values computed for it so far.
struct Ahead<'m> {
    xyz: [Value<'m>; 3],
    next_block_x: Value<'m>,
    at: Block<'m>,
    memo: HashMap<Value<'m>, Option<Value<'m>>>,
}

impl<'m> Emitter<'_, 'm> {
    /// Finds what each region's rows fetch ahead: nothing unless a row of the block makes at
    /// least [`FEWEST_STREAMS_A_ROW`] streams over the regions; else computes the next
    /// block's `x` index at the builder's position, where the block's values are.
    pub(super) fn plan_fetch_ahead(&mut self, kinds: &mut Kinds<'_, 'm>) {
        let accesses: Vec<_> = (0..self.region_starts.len())
            .map(|r| self.accesses_ahead(r, kinds))
            .collect();
        if accesses.iter().map(Vec::len).sum::<usize>() < FEWEST_STREAMS_A_ROW {
            return;
        }
        let next_block_x = self.builder.build_binop(
            InstructionOpcode::Add,
            self.block_values[&BLOCK_X],
            self.const32(1),
            c"next.block.x",
        );
        self.fetch_ahead = Some(FetchAhead {
            accesses,
            next_block_x,
        });
    }

    /// At the end of `at`, a row's start (`y`, `z` its thread indices), prefetches of the lines
    /// region `r`'s accesses of memory outside the block reach for the row's first and last
    /// threads in the block with the next `x` index, where [`Emitter::plan_fetch_ahead`] found
    /// any. The builder ends at the end of `at`.
    pub(super) fn fetch_next_block_ahead(
        &mut self,
        r: usize,
        at: Block<'m>,
        [y, z]: [Value<'m>; 2],
        kinds: &mut Kinds<'_, 'm>,
    ) {
        let Some(plan) = &self.fetch_ahead else {
            return;
        };
        let (accesses, next_block_x) = (plan.accesses[r].clone(), plan.next_block_x);
        let Some(prefetch) = self
            .module
            .intrinsic("llvm.prefetch", &[self.module.ptr_type(0)])
            .filter(|_| !accesses.is_empty())
        else {
            return;
        };
        self.builder.position_at_end(at);
        let last = self.builder.build_binop(
            InstructionOpcode::Sub,
            self.block_values[&BLOCK_DIM_X],
            self.const32(1),
            c"",
        );
        for x in [self.const32(0), last] {
            let mut ahead = Ahead {
                xyz: [x, y, z],
                next_block_x,
                at,
                memo: HashMap::new(),
            };
            for &(pointer, write) in &accesses {
                let Some(address) = self.address_ahead(pointer, &mut ahead, kinds) else {
                    continue;
                };
                self.builder.position_at_end(at);
                // A hint may point anywhere (past the grid, or poison from a flag of the
                // body's arithmetic): frozen, it is some address.
                let address = self.builder.build_freeze(address, c"ahead");
                let args = [
                    address,
                    self.const32(u64::from(write)),
                    self.const32(3),
                    self.const32(1),
                ];
                self.call(prefetch, &args);
            }
        }
        self.builder.position_at_end(at);
    }

    /// Region `r`'s plain loads and stores of memory outside the block whose address every
    /// thread computes from its indices, the block's and the parameters, that moves with the
    /// block's `x` index and the thread's `y` or `z`, and that not only the threads a test of
    /// an index picks make: each pointer with whether it is written, one for each base and
    /// index up to constant offsets (`input[g - 1]`, `input[g]`, `input[g + 1]` reach the same
    /// lines), at most [`MOST_STREAMS`].
    fn accesses_ahead(&self, r: usize, kinds: &mut Kinds<'_, 'm>) -> Vec<(Value<'m>, bool)> {
        let (mut moves, mut by_y, mut by_z) = (HashMap::new(), HashMap::new(), HashMap::new());
        let mut keys = Vec::new();
        let mut accesses = Vec::new();
        for i in self.region_instructions(r) {
            let pointer = match i.opcode() {
                InstructionOpcode::Load => i.operand(0),
                InstructionOpcode::Store => i.operand(1),
                _ => None,
            };
            let Some(pointer) = pointer else { continue };
            if i.is_volatile() || i.is_atomic() || self.is_block_memory(i) {
                continue;
            }
            if for_lone_threads(i, self.hooks)
                || kinds.of(pointer) == Kind::Varying
                || !moves_with(pointer, BLOCK_X, self.hooks, &mut moves)
                || !(moves_with(pointer, THREAD_Y, self.hooks, &mut by_y)
                    || moves_with(pointer, THREAD_Z, self.hooks, &mut by_z))
            {
                continue;
            }
            let key = line_key(pointer, self.hooks);
            if keys.contains(&key) {
                continue;
            }
            keys.push(key);
            accesses.push((pointer, i.is_store()));
            if accesses.len() == MOST_STREAMS {
                break;
            }
        }
        accesses
    }

    /// The body's `v` computed at the end of `ahead.at` for the thread `ahead.xyz` of the
    /// block with the next `x` index; `None` where it takes more than arithmetic over the
    /// indices, per-block values and the parameters.
    fn address_ahead(
        &mut self,
        v: Value<'m>,
        ahead: &mut Ahead<'m>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> Option<Value<'m>> {
        if let Some(&done) = ahead.memo.get(&v) {
            return done;
        }
        let value = self.compute_ahead(v, ahead, kinds);
        ahead.memo.insert(v, value);
        value
    }

    /// [`Emitter::address_ahead`] of a value not yet computed.
    fn compute_ahead(
        &mut self,
        v: Value<'m>,
        ahead: &mut Ahead<'m>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> Option<Value<'m>> {
        if v == self.body_params {
            return Some(self.params);
        }
        let Some(i) = v.as_instruction() else {
            return Some(v);
        };
        if is_index_call(i, self.hooks) {
            return match index_of(i).ok()? {
                w @ 0..3 => Some(ahead.xyz[w as usize]),
                BLOCK_X => Some(ahead.next_block_x),
                w => self.block_values.get(&w).copied(),
            };
        }
        let kind = kinds.of(v);
        if kind == Kind::Varying {
            return None;
        }
        if kind == Kind::Hoistable && !moves_with(v, BLOCK_X, self.hooks, &mut HashMap::new()) {
            return self.hoist(v).ok();
        }
        if !(is_pure(i.opcode()) || is_pure_call(i)) {
            return None;
        }
        let mut operands = Vec::new();
        for index in 0..i.num_operands() {
            let Some(o) = i.operand(index) else { continue };
            operands.push((index, self.address_ahead(o, ahead, kinds)?));
        }
        Some(self.copy_at_end(ahead.at, i, &operands))
    }
}

/// Whether the body's `v` depends on the index hook's value `which`.
fn moves_with<'m>(
    v: Value<'m>,
    which: u64,
    hooks: &Complete<'m>,
    memo: &mut HashMap<Value<'m>, bool>,
) -> bool {
    if let Some(&known) = memo.get(&v) {
        return known;
    }
    let Some(i) = v.as_instruction() else {
        return false;
    };
    // A cycle (through a phi) is not followed again.
    memo.insert(v, false);
    let moves = if is_index_call(i, hooks) {
        index_of(i) == Ok(which)
    } else {
        (0..i.num_operands())
            .filter_map(|k| i.operand(k))
            .any(|o| moves_with(o, which, hooks, memo))
    };
    memo.insert(v, moves);
    moves
}

/// Whether the body's `i` runs only for the threads a test `index == V` of a thread's index
/// picks (a halo's edge row or column, read once for the row beside it): some branch on such
/// a test leads to it alone, over blocks each with one predecessor.
fn for_lone_threads<'m>(i: Instruction<'m>, hooks: &Complete<'m>) -> bool {
    let mut block = i.block();
    for _ in 0..4 {
        let Some(before) = block.single_predecessor() else {
            return false;
        };
        let branch = before.terminator().and_then(|t| t.as_branch());
        if let Some(branch) = branch
            && let Some(test) = branch.condition()
            && branch.successor(0) == Some(block)
            && branch.successor(1) != Some(block)
            && picks_lone_threads(test, hooks)
        {
            return true;
        }
        block = before;
    }
    false
}

/// Whether `test` holds only where a thread's index, or a value computed from it, equals a
/// value every thread shares (one conjunct suffices).
fn picks_lone_threads<'m>(test: Value<'m>, hooks: &Complete<'m>) -> bool {
    let Some(i) = test.as_instruction() else {
        return false;
    };
    let by_thread = |v: Value<'m>| (0..3).any(|w| moves_with(v, w, hooks, &mut HashMap::new()));
    match i.opcode() {
        InstructionOpcode::And => (0..2)
            .filter_map(|k| i.operand(k))
            .any(|o| picks_lone_threads(o, hooks)),
        // `a && b` as LLVM writes it: `select a, b, false`.
        InstructionOpcode::Select if i.operand(2).is_some_and(|f| f.is_const_int(0)) => (0..2)
            .filter_map(|k| i.operand(k))
            .any(|o| picks_lone_threads(o, hooks)),
        InstructionOpcode::ICmp => {
            let equal = test
                .as_icmp()
                .is_some_and(|c| c.predicate() == inkwell::IntPredicate::EQ);
            let (Some(a), Some(b)) = (i.operand(0), i.operand(1)) else {
                return false;
            };
            equal && by_thread(a) != by_thread(b)
        }
        _ => false,
    }
}

/// How a value is computed, compared by structure: two copies of one computation (the
/// same address computed on two branches) are alike.
#[derive(PartialEq, Debug)]
enum Shape<'m> {
    Value(Value<'m>),
    Index(u64),
    Op(InstructionOpcode, Vec<Shape<'m>>),
}

/// How deep [`shape`] looks: an address is a few operations.
const SHAPE_DEPTH: u32 = 12;

fn shape<'m>(v: Value<'m>, hooks: &Complete<'m>, depth: u32) -> Shape<'m> {
    let Some(i) = v.as_instruction().filter(|_| depth > 0) else {
        return Shape::Value(v);
    };
    if is_index_call(i, hooks) {
        return index_of(i).map_or(Shape::Value(v), Shape::Index);
    }
    let op = i.opcode();
    if !(is_pure(op) || op == InstructionOpcode::Load && !i.is_volatile()) {
        return Shape::Value(v);
    }
    let operands = (0..i.num_operands())
        .filter_map(|k| i.operand(k))
        .map(|o| shape(o, hooks, depth - 1))
        .collect();
    Shape::Op(op, operands)
}

/// What identifies the lines a pointer reaches up to a constant offset: its base past
/// offsets, and each variable index past a constant added or subtracted and past extensions,
/// by their [`Shape`]s.
fn line_key<'m>(pointer: Value<'m>, hooks: &Complete<'m>) -> Vec<Shape<'m>> {
    let mut p = pointer;
    let mut indices = Vec::new();
    while let Some(i) = p.as_instruction().filter(|i| is_gep(*i)) {
        indices.extend(
            (1..i.num_operands())
                .filter_map(|k| i.operand(k))
                .filter(|x| !x.is_constant_int())
                .map(|x| shape(past_offsets(x), hooks, SHAPE_DEPTH)),
        );
        match i.operand(0) {
            Some(base) => p = base,
            None => break,
        }
    }
    let mut key = vec![shape(p, hooks, SHAPE_DEPTH)];
    key.extend(indices);
    key
}

fn is_gep(i: Instruction<'_>) -> bool {
    i.opcode() == InstructionOpcode::GetElementPtr
}

/// `v` past a constant added, subtracted or or-ed in and past extensions.
fn past_offsets(mut v: Value<'_>) -> Value<'_> {
    use InstructionOpcode as Op;
    while let Some(i) = v.as_instruction() {
        let inner = match i.opcode() {
            Op::Add | Op::Sub | Op::Or if i.operand(1).is_some_and(|c| c.is_constant_int()) => {
                i.operand(0)
            }
            Op::SExt | Op::ZExt => i.operand(0),
            _ => None,
        };
        match inner {
            Some(inner) => v = inner,
            None => break,
        }
    }
    v
}
