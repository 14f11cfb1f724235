//! Thread loops a warp at a time: where a region asks for its thread's warp (`warp_id()`,
//! `thread_rank() / 32`, `thread_idx_x() / 32`), each row of its loop runs in pieces of one
//! warp's threads, the warp a value of the piece. A warp's shared slot (`sums[warp]`,
//! `sums[warp - 1]`) is then one address for the loop, where LLVM, which cannot tell that
//! `(row + x) >> 5` changes every 32 threads, gathered and scattered it lane by lane; the
//! test `lane == V` names one thread of the piece, which runs alone as `x == V` does.

use std::collections::HashSet;

use inkwell::IntPredicate;
use inkwell::values::InstructionOpcode;
use offload_format::abi;

use super::super::ir::{Block, Builder, Function, Instruction, Value};
use super::hooks::{Complete, index_of, is_index_call};
use super::kinds::{Kind, Kinds};
use super::uniform::is_pure;

/// Lanes per warp on the CPU device (`offload_rt`'s `CPU_WARP_SIZE`): a warp's threads are 32
/// consecutive ranks.
const LANES: u64 = 32;
const LANE_BITS: u64 = LANES.trailing_zeros() as u64;

/// What a loop over one warp's threads knows of them, for its clones of the region.
#[derive(Clone, Copy)]
pub(super) struct WarpAt<'m> {
    /// `rank >> 5`: the warp, the same for every thread of the loop (`i32`).
    pub(super) warp: Value<'m>,
    /// `x >> 5`, the same too: the loop ends at multiples of 32 of `x` as well as of the rank.
    pub(super) x_warp: Value<'m>,
    /// `rank % 32 - x` and `x % 32 - x`: a thread's lane is its `x` plus one of these.
    pub(super) lane_from_x: [Value<'m>; 2],
}

/// A value of the body that [`WarpAt`] gives a loop over one warp's threads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum WarpPart {
    /// The warp (of the rank, or of `x`) plus `plus`, shifted right by `shift` more bits:
    /// `(r + 32 * plus) >> (5 + shift)`.
    Warp { of_x: bool, plus: u64, shift: u64 },
    /// The lane (`rank % 32`, or `x % 32`).
    Lane { of_x: bool },
    /// The rank, or `x`, of the warp's first lane (`r - r % 32`, `r & !31`): what a warp
    /// operation's slots are counted from, and its number of lanes from the block's size.
    FirstLane { of_x: bool },
}

impl WarpPart {
    /// Whether the part is the same for every thread of a warp.
    fn is_the_warps(self) -> bool {
        !matches!(self, WarpPart::Lane { .. })
    }
}

/// The index hook `v` asks for, looking through a zero extension: `Some(true)` for the
/// thread's `x`, `Some(false)` for its rank.
fn rank_or_x<'m>(v: Value<'m>, hooks: &Complete<'m>) -> Option<bool> {
    let i = v.as_instruction()?;
    if i.opcode() == InstructionOpcode::ZExt {
        return rank_or_x(i.operand(0)?, hooks);
    }
    if !is_index_call(i, hooks) {
        return None;
    }
    match index_of(i).ok()? {
        0 => Some(true),
        w if w == u64::from(abi::CPU_IR_RANK) => Some(false),
        _ => None,
    }
}

/// A bound on the multiples of 32 added to an index whose warp is taken: far from any
/// wrapping of the addition.
const MAX_PLUS: u64 = 1 << 24;

/// Which [`WarpPart`] `i` computes, if any: `r >> k` or `r / 2^k` with `k >= 5` (also of
/// `r + C` with `C` a multiple of 32), `r & 31` or `r % 32`, `r & !31`, `r` the thread's rank
/// or `x`.
pub(super) fn warp_part<'m>(i: Instruction<'m>, hooks: &Complete<'m>) -> Option<WarpPart> {
    use InstructionOpcode as Op;
    let k = i.operand(1)?.const_zext_value()?;
    let width = i.as_value().ty().int_width()?;
    let first_lane_mask = (u64::MAX >> (64 - width.min(64))) & !(LANES - 1);
    let shift = match i.opcode() {
        Op::And if k == first_lane_mask => {
            let of_x = rank_or_x(i.operand(0)?, hooks)?;
            return Some(WarpPart::FirstLane { of_x });
        }
        Op::LShr if k >= LANE_BITS => k - LANE_BITS,
        Op::UDiv if k.is_power_of_two() && k >= LANES => u64::from(k.trailing_zeros()) - LANE_BITS,
        Op::And if k == LANES - 1 => {
            let of_x = rank_or_x(i.operand(0)?, hooks)?;
            return Some(WarpPart::Lane { of_x });
        }
        Op::URem if k == LANES => {
            let of_x = rank_or_x(i.operand(0)?, hooks)?;
            return Some(WarpPart::Lane { of_x });
        }
        _ => return None,
    };
    let index = i.operand(0)?;
    if let Some(of_x) = rank_or_x(index, hooks) {
        return Some(WarpPart::Warp {
            of_x,
            plus: 0,
            shift,
        });
    }
    let sum = index.as_instruction().filter(|s| s.opcode() == Op::Add)?;
    let (a, b) = (sum.operand(0)?, sum.operand(1)?);
    [(a, b), (b, a)].into_iter().find_map(|(r, c)| {
        let of_x = rank_or_x(r, hooks)?;
        let c = c.const_zext_value()?;
        (c % LANES == 0 && c < MAX_PLUS).then_some(WarpPart::Warp {
            of_x,
            plus: c / LANES,
            shift,
        })
    })
}

/// Of the operands of a comparison, `V` where the other is a thread's lane (looking through a
/// zero extension), with which lane it is.
pub(super) fn lane_against<'m>(
    a: Value<'m>,
    b: Value<'m>,
    hooks: &Complete<'m>,
) -> Option<(Value<'m>, bool)> {
    fn lane<'m>(v: Value<'m>, hooks: &Complete<'m>) -> Option<bool> {
        let i = v.as_instruction()?;
        if i.opcode() == InstructionOpcode::ZExt {
            return lane(i.operand(0)?, hooks);
        }
        match warp_part(i, hooks)? {
            WarpPart::Lane { of_x } => Some(of_x),
            WarpPart::Warp { .. } | WarpPart::FirstLane { .. } => None,
        }
    }
    [(a, b), (b, a)]
        .into_iter()
        .find_map(|(l, v)| Some((v, lane(l, hooks)?)))
}

/// How deep [`one_per_warp`] follows operands.
const DEPTH: u32 = 8;

/// Whether what a region does (its stores, calls, branches, values kept per thread: of its
/// `instructions`) depends on a thread's warp ([`WarpPart::Warp`], and where `first_lane`
/// says so [`WarpPart::FirstLane`]): its rows then run a warp at a time.
pub(super) fn asks_for_its_warp<'m>(
    instructions: &[Instruction<'m>],
    first_lane: bool,
    hooks: &Complete<'m>,
    kinds: &mut Kinds<'_, 'm>,
) -> bool {
    let mut seen = HashSet::new();
    let mut work: Vec<Value<'m>> = Vec::new();
    for i in instructions {
        // The values computed from the indices are computed where used, if at all.
        let value = i.as_value();
        if value.ty().is_void() || kinds.of(value) == Kind::Varying {
            work.extend(value.operands());
        }
    }
    while let Some(v) = work.pop() {
        let Some(i) = v.as_instruction() else {
            continue;
        };
        if !seen.insert(v) {
            continue;
        }
        match warp_part(i, hooks) {
            Some(WarpPart::Warp { .. }) => return true,
            Some(WarpPart::FirstLane { .. }) if first_lane => return true,
            _ => {}
        }
        // Values the region computes again from the thread's indices lead to a warp
        // computed before its barrier.
        if kinds.of(v) == Kind::Recomputed {
            work.extend(i.as_value().operands());
        }
    }
    false
}

/// Whether `v` is the same for every thread of a loop over one warp's threads: computed once
/// by the block, or from a warp ([`WarpPart::Warp`], [`WarpPart::FirstLane`]) by arithmetic.
pub(super) fn one_per_warp<'m>(
    v: Value<'m>,
    hooks: &Complete<'m>,
    kinds: &mut Kinds<'_, 'm>,
) -> bool {
    fn within<'m>(
        v: Value<'m>,
        hooks: &Complete<'m>,
        kinds: &mut Kinds<'_, 'm>,
        depth: u32,
    ) -> bool {
        let Some(i) = v.as_instruction() else {
            return true;
        };
        if kinds.of(v) == Kind::Hoistable {
            return true;
        }
        if let Some(part) = warp_part(i, hooks) {
            return part.is_the_warps();
        }
        is_pure(i.opcode())
            && depth > 0
            && i.as_value()
                .operands()
                .all(|o| within(o, hooks, kinds, depth - 1))
    }
    within(v, hooks, kinds, DEPTH)
}

/// The head of a loop over the warps of the threads `x` in `[first, last)` of a row starting at
/// rank `row` (an `i64`), built in `function` from the builder's block (which it ends): the
/// first piece from `first`, the next where the last ended, to `done` at `last`. Returns the
/// piece's threads `x` in `[first, end)`, where the piece's loops go on to (`next`, which it
/// ends), and the piece's [`WarpAt`]; the builder is left at the end of the head.
pub(super) fn warp_pieces<'m>(
    b: &Builder<'m>,
    function: Function<'m>,
    [row, first_x, last]: [Value<'m>; 3],
    done: Block<'m>,
) -> ([Value<'m>; 2], Block<'m>, WarpAt<'m>) {
    let i32_ty = last.ty();
    let constant = |v: u64| i32_ty.const_int(v, false);
    let head = function.append_block(c"warp");
    let next = function.append_block(c"warp.next");
    let entry = b.build_br(head).instruction().block();
    b.position_at_end(head);
    let first = b.build_phi(i32_ty, c"warp.x");
    first.add_incoming(first_x, entry);
    let x = first.as_value();
    let rank = b.build_add(b.build_trunc(row, i32_ty, c""), x, c"warp.rank");
    let lane = b.build_and(rank, constant(LANES - 1), c"");
    let shift = constant(LANE_BITS);
    let warp = b.build_binop(InstructionOpcode::LShr, rank, shift, c"warp");
    let x_warp = b.build_binop(InstructionOpcode::LShr, x, shift, c"warp.of.x");
    // The next warp of the rank, or of `x`, whichever comes first, within the row.
    let rank_end = b.build_add(
        x,
        b.build_binop(InstructionOpcode::Sub, constant(LANES), lane, c""),
        c"",
    );
    let x_end = b.build_add(b.build_or(x, constant(LANES - 1), c""), constant(1), c"");
    let min = |a: Value<'m>, c: Value<'m>| {
        let lower = b.build_icmp(IntPredicate::ULT, a, c, c"");
        b.build_select(lower, a, c, c"")
    };
    let end = min(min(rank_end, x_end), last);
    let lane_from_x = [
        b.build_binop(InstructionOpcode::Sub, lane, x, c"lane.of.rank"),
        b.build_binop(
            InstructionOpcode::Sub,
            constant(0),
            b.build_binop(InstructionOpcode::Shl, x_warp, shift, c""),
            c"lane.of.x",
        ),
    ];
    b.position_at_end(next);
    first.add_incoming(end, next);
    let more = b.build_icmp(IntPredicate::ULT, end, last, c"");
    b.build_cond_br(more, head, done);
    b.position_at_end(head);
    let at = WarpAt {
        warp,
        x_warp,
        lane_from_x,
    };
    ([x, end], next, at)
}

/// What `part` is for the thread `x` (an `i32`) of a loop over one warp's threads, as a value
/// of type `like`'s, computed at the builder's position.
pub(super) fn warp_value<'m>(
    b: &Builder<'m>,
    part: WarpPart,
    x: Value<'m>,
    at: &WarpAt<'m>,
    like: Value<'m>,
) -> Value<'m> {
    let constant = |v: u64| x.ty().const_int(v, false);
    let value = match part {
        WarpPart::Warp { of_x, plus, shift } => {
            let mut warp = if of_x { at.x_warp } else { at.warp };
            if plus != 0 {
                warp = b.build_add(warp, constant(plus), c"");
            }
            if shift != 0 {
                warp = b.build_binop(InstructionOpcode::LShr, warp, constant(shift), c"");
            }
            warp
        }
        WarpPart::Lane { of_x } => b.build_add(x, at.lane_from_x[usize::from(of_x)], c"lane"),
        WarpPart::FirstLane { of_x } => {
            let warp = if of_x { at.x_warp } else { at.warp };
            b.build_binop(
                InstructionOpcode::Shl,
                warp,
                constant(LANE_BITS),
                c"first.lane",
            )
        }
    };
    if like.ty().int_width() == Some(32) {
        value
    } else {
        b.build_zext(value, like.ty(), c"")
    }
}
