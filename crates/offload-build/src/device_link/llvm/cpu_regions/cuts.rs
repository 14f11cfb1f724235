//! Where the rows of a region are cut: at the comparisons of a thread's `x` with a value the
//! block computes once, or every thread holds alike from the region's start (`at_entry.rs`: a
//! reduction's `if tid < s`, Rodinia's `IN_RANGE(tx, lo, hi)` and its pyramid's `IN_RANGE(tx,
//! i + 1, 14 - i)`, a global index's `x + C < n`) and at the clamps of `x` to such a value (a
//! stencil's neighbour `min(tx + 1, max)`), each of which is one thing for the threads below a
//! cut of the row and another above it. The row's threads run in pieces between the cuts, each
//! piece's copy of the region with what it knows decided: its vectors then neither mask a range
//! check nor gather a clamped neighbour, which kept `hotspot`'s loops scalar.
//!
//! One cut where every comparison cuts the row at one place (both pieces decided). Where they
//! cut it at several: the largest of the lower cuts whose place only the block knows (`x >=
//! lo`), each constant cut in ascending order, then the smallest of the other upper cuts (`x
//! <= hi`). The threads below the first cut know only a single lower cut's answers; those
//! between the lower and the upper cut every answer; those past it every lower answer and a
//! single upper cut's. Which side a comparison's work is on (`lo` or `hi`) only decides which
//! piece knows everything, never what a piece is told.
#![forbid(unsafe_code)]

use std::collections::{HashMap, HashSet};

use inkwell::IntPredicate;
use inkwell::values::InstructionOpcode;

use super::super::ir::{Block, Instruction, Value};
use super::at_entry::{AtEntry, RowEntry};
use super::emit::{Emitter, RegionCode, decides_a_branch, is_thread_x};
use super::exits::signed_constant;
use super::hooks::callee;
use super::kinds::Kinds;
use super::known::{Cuts, Decided};
use super::ranges::adds_without_wrapping;
use super::strides::gathers_or_scatters;
use super::trim::widened_thread_x;

/// The comparisons and clamps of a region that cut its rows at one place ([`Emitter::bounds`]).
struct Bound<'m> {
    /// `V`, hoisted (for a signed comparison of `x` with a constant, the cut itself).
    value: Value<'m>,
    /// `C` of comparisons of `x + C`, hoisted.
    offset: Option<Value<'m>>,
    /// Whether the cut is one past `V` (`x <= V`, `x > V`).
    inclusive: bool,
    /// Whether `V` (and `C`) are compared signed: the cut is computed from their sign
    /// extensions, and where `C` is given, `x + C` may wrap (tested when the row runs).
    signed: bool,
    /// What each comparison and clamp is for the threads below the cut.
    below: Decided<'m>,
    /// Whether the threads the region is for are above the cut (`x >= lo`, `max(x - 1, lo)`'s
    /// `x - 1`) rather than below it, as the first comparison or clamp found says: which of
    /// the three pieces of a row knows every answer.
    lower: bool,
}

impl<'m> Bound<'m> {
    /// `C` where the answers may not hold for every thread (`x + C` wrapping past the largest
    /// signed value): tested when the row runs, unless `C` is a constant that a row's `x`
    /// (below 1024) cannot carry past it.
    fn may_wrap(&self) -> Option<Value<'m>> {
        let c = self.offset.filter(|_| self.signed)?;
        let bits = c.ty().int_width().unwrap_or(64).min(64);
        let largest = (1i128 << (bits - 1)) - 1;
        signed_constant(c)
            .is_none_or(|c| i128::from(c) + MAX_ROW >= largest)
            .then_some(c)
    }
}

/// The most threads a row of a block has (and past the last `x`).
const MAX_ROW: i128 = 1024;

/// One cut of [`Cuts`]: of one bound, or of several combined.
struct Element<'m> {
    at: Value<'m>,
    /// The bounds it cuts at, indices of [`Emitter::bounds`]'.
    bounds: Vec<usize>,
    /// What the threads below it know: every bound's answers where it is the smallest of
    /// its bounds' cuts (or the only one).
    below_known: bool,
    /// What those past it know: every bound's where it is the largest (or the only one).
    above_known: bool,
    /// The cut, where it is a constant.
    constant: Option<u64>,
}

/// Whether `v` is the thread's `x` (widened), `Some((None, _))`, or `x + C`,
/// `Some((Some(C), no_wrap))` with whether that addition never wraps unsigned
/// (`block * dim + x`).
fn thread_x_plus<'m>(
    v: Value<'m>,
    is_thread_x: &dyn Fn(Value<'m>) -> bool,
) -> Option<(Option<Value<'m>>, bool)> {
    if widened_thread_x(v, is_thread_x) {
        return Some((None, true));
    }
    let i = v.as_instruction()?;
    if i.opcode() == InstructionOpcode::ZExt {
        return thread_x_plus(i.operand(0)?, is_thread_x);
    }
    let add = Some(i).filter(|i| i.opcode() == InstructionOpcode::Add)?;
    let (p, q) = (add.operand(0)?, add.operand(1)?);
    let c = if widened_thread_x(p, is_thread_x) {
        q
    } else if widened_thread_x(q, is_thread_x) {
        p
    } else {
        return None;
    };
    Some((Some(c), adds_without_wrapping(add)))
}

/// A comparison or clamp of `x` with `V` as [`thread_x_order`] finds it.
struct Order<'m> {
    value: Value<'m>,
    offset: Option<Value<'m>>,
    inclusive: bool,
    signed: bool,
    /// What it is below the cut: a comparison's answer, or the operand a clamp returns.
    below: Below,
    /// Which operand is `x`'s side.
    x_operand: u32,
}

/// What a comparison or a clamp is for the threads below its cut.
#[derive(Clone, Copy)]
enum Below {
    Answer(bool),
    Operand(u32),
}

/// Of a comparison `x P V` or `V P x` (`P` an order, `x` the thread's index, widened, or
/// `x + C`, that never wraps where `P` is unsigned and is at most 32 bits wide where it is
/// signed), or a clamp `min(x, V)`, `max(x, V)` (signed or not, either way round): its
/// [`Order`].
fn thread_x_order<'m>(
    i: Instruction<'m>,
    is_thread_x: &dyn Fn(Value<'m>) -> bool,
) -> Option<Order<'m>> {
    use IntPredicate::{SGE, SGT, SLE, SLT, UGE, UGT, ULE, ULT};
    let (predicate, a, b, clamp) = match i.as_value().as_icmp() {
        Some(compare) => (compare.predicate(), i.operand(0)?, i.operand(1)?, false),
        None => {
            let call = i.as_value().as_call()?;
            let name = callee(call)?.name();
            let predicate = [
                (&b"llvm.smin."[..], SLE),
                (b"llvm.smax.", SGE),
                (b"llvm.umin.", ULE),
                (b"llvm.umax.", UGE),
            ]
            .into_iter()
            .find_map(|(prefix, p)| name.starts_with(prefix).then_some(p))?;
            (predicate, i.operand(0)?, i.operand(1)?, true)
        }
    };
    let (predicate, v, (offset, no_wrap), x_operand) =
        if let Some(plus) = thread_x_plus(a, is_thread_x) {
            (predicate, b, plus, 0)
        } else if let Some(plus) = thread_x_plus(b, is_thread_x) {
            let swapped = match predicate {
                ULT => UGT,
                ULE => UGE,
                UGT => ULT,
                UGE => ULE,
                SLT => SGT,
                SLE => SGE,
                SGT => SLT,
                SGE => SLE,
                other => other,
            };
            (swapped, a, plus, 1)
        } else {
            return None;
        };
    let (inclusive, signed, answer) = match predicate {
        ULT => (false, false, true),
        ULE => (true, false, true),
        UGT => (true, false, false),
        UGE => (false, false, false),
        SLT => (false, true, true),
        SLE => (true, true, true),
        SGT => (true, true, false),
        SGE => (false, true, false),
        _ => return None,
    };
    if offset.is_some()
        && if signed {
            v.ty().int_width()? > 32
        } else {
            !no_wrap
        }
    {
        return None;
    }
    // A clamp returns its first operand where its comparison (of the first with the second,
    // swapped above where `x` is the second) holds.
    let below = match clamp {
        false => Below::Answer(answer),
        true => Below::Operand(u32::from(!answer)),
    };
    Some(Order {
        value: v,
        offset,
        inclusive,
        signed,
        below,
        x_operand,
    })
}

/// The answer of `compare` (which decides a branch of `region`) on the way to what the
/// branch guards, as the first branch it reaches says: the branch's condition is `false` there
/// where its way for `true` leads to the thread's end or its barrier at once (`if x < lo ||
/// x > hi { return }`; `ends` names the barriers), `true` where the other way does, else
/// `false` where the comparison reaches it through `or`s only (`hotspot`'s `if !IN_RANGE(..)`
/// skipping the step), `true` otherwise; the comparison's answer is that, turned by each `not`
/// on the way.
fn answer_for_the_branch<'m>(
    compare: Instruction<'m>,
    region: &HashSet<Instruction<'m>>,
    ends: &dyn Fn(Instruction<'m>) -> bool,
) -> bool {
    // Each condition with whether it is the comparison's answer turned, and whether an `or`
    // and an `and` joined it on the way.
    let mut conditions = vec![(compare.as_value(), false, false, false)];
    for _ in 0..4 {
        let mut next = Vec::new();
        for (c, turned, or, and) in conditions {
            for user in c.users() {
                let Some(u) = user.as_instruction().filter(|u| region.contains(u)) else {
                    continue;
                };
                let constant = |k: u32| u.operand(k).and_then(|v| v.const_zext_value());
                let v = u.as_value();
                match u.opcode() {
                    InstructionOpcode::Br => {
                        let ways = u.as_terminator().map(|t| (t.successor(0), t.successor(1)));
                        let nothing =
                            |b: Option<Block<'m>>| b.is_some_and(|b| does_nothing(b, ends));
                        let holds = match ways {
                            Some((taken, _)) if nothing(taken) => false,
                            Some((_, other)) if nothing(other) => true,
                            _ => !or || and,
                        };
                        return holds != turned;
                    }
                    InstructionOpcode::And => next.push((v, turned, or, true)),
                    InstructionOpcode::Or => next.push((v, turned, true, and)),
                    InstructionOpcode::Xor if constant(1) == Some(1) => {
                        next.push((v, !turned, or, and))
                    }
                    // `select a, true, b` is `a || b`; `select a, b, false` is `a && b`.
                    InstructionOpcode::Select if constant(1) == Some(1) => {
                        next.push((v, turned, true, and))
                    }
                    InstructionOpcode::Select if constant(2) == Some(0) => {
                        next.push((v, turned, or, true))
                    }
                    InstructionOpcode::Select => next.push((v, turned, or, and)),
                    _ => {}
                }
            }
        }
        conditions = next;
    }
    true
}

/// Whether a thread that enters `block` goes on, through unconditional branches, straight to
/// its end or to one of its barriers (`ends`), computing nothing on the way.
fn does_nothing<'m>(block: Block<'m>, ends: &dyn Fn(Instruction<'m>) -> bool) -> bool {
    let mut block = block;
    for _ in 0..4 {
        let mut next = block.first_instruction();
        let mut onward = None;
        while let Some(i) = next {
            next = i.next();
            match i.opcode() {
                InstructionOpcode::Return => return true,
                _ if ends(i) => return true,
                InstructionOpcode::Phi => {}
                InstructionOpcode::Br if i.num_operands() == 1 => {
                    onward = i.as_terminator().and_then(|t| t.successor(0));
                    break;
                }
                _ => return false,
            }
        }
        match onward {
            Some(b) => block = b,
            None => return false,
        }
    }
    false
}

/// The cut of a signed comparison of `x` (never negative) with the constant `v`: 0 below
/// zero, else `v`, or one past it where `inclusive`.
fn signed_cut(v: Value<'_>, inclusive: bool) -> Option<u64> {
    let value = signed_constant(v)?;
    Some(if value < 0 {
        0
    } else {
        (value as u64).saturating_add(u64::from(inclusive))
    })
}

impl<'m> Emitter<'_, 'm> {
    /// The cuts of the rows of the region of `code`: its comparisons `x < V`, `x <= V`,
    /// `x > V` or `x >= V` (either way round, `V` and `C` of `x + C` the same for every
    /// thread from the region's start, [`Emitter::at_entry`], computed at the end of `entry`
    /// where the block does not compute them once) that decide a branch the answers `singles`
    /// knows leave open, grouped by where they cut, and where there are any, its clamps of `x`
    /// to such a `V` (`x + C` is cut at only where the image's shape or the region's gathers
    /// ask for it). IRCE's loop for the threads past such a test kept it, which SSE cannot
    /// mask and AVX-512 masks at a cost: `reduce5`'s `if tid < 32` ran its 224 other threads
    /// one at a time on the baseline image.
    fn bounds(
        &mut self,
        code: &RegionCode<'m>,
        entry: Block<'m>,
        singles: &HashMap<Instruction<'m>, bool>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> std::result::Result<Vec<Bound<'m>>, String> {
        let hooks = self.hooks;
        let is_thread_x = |v: Value<'m>| is_thread_x(v, hooks);
        let mut bounds: Vec<Bound<'m>> = Vec::new();
        let offset_cuts =
            self.shape.offset_cuts || gathers_or_scatters(self.module, code.own(), hooks, kinds);
        let region = &code.set;
        let mut clamps = Vec::new();
        let mut row = RowEntry::new(entry);
        for &i in &code.instructions {
            let Some(order) = thread_x_order(i, &is_thread_x) else {
                continue;
            };
            if order.offset.is_some() && !offset_cuts {
                continue;
            }
            let Some(value) = self.at_entry(order.value, code, kinds) else {
                continue;
            };
            let offset = match order.offset.map(|c| self.at_entry(c, code, kinds)) {
                Some(None) => continue,
                offset => offset.flatten(),
            };
            let lower = match order.below {
                Below::Answer(_) if !decides_a_branch(i, region, singles) => continue,
                Below::Answer(answer) => {
                    let ends = |b: Instruction<'m>| self.region_of_barrier.contains_key(&b);
                    answer != answer_for_the_branch(i, region, &ends)
                }
                Below::Operand(k) => {
                    clamps.push((i, k != order.x_operand, order, value, offset));
                    continue;
                }
            };
            self.add_to_bounds(&mut bounds, i, order, (value, offset), lower, &mut row)?;
        }
        if !bounds.is_empty() {
            for (i, lower, order, value, offset) in clamps {
                self.add_to_bounds(&mut bounds, i, order, (value, offset), lower, &mut row)?;
            }
        }
        Ok(bounds)
    }

    /// Adds `i`, a comparison or clamp, to the bound of `bounds` that cuts where it does, or
    /// as a bound of its own, [`Bound::lower`] as `lower` says; its `V` and `C` computed for
    /// `row`.
    fn add_to_bounds(
        &mut self,
        bounds: &mut Vec<Bound<'m>>,
        i: Instruction<'m>,
        order: Order<'m>,
        (value, offset): (AtEntry<'m>, Option<AtEntry<'m>>),
        lower: bool,
        row: &mut RowEntry<'m>,
    ) -> std::result::Result<(), String> {
        let constant_cut = value
            .constant()
            .and_then(|v| signed_cut(v, order.inclusive))
            .filter(|_| order.signed && offset.is_none());
        let (value, inclusive, signed) = match constant_cut {
            Some(cut) => (self.const64(cut), false, false),
            None => (
                self.frozen_at_row_entry(&value, row)?,
                order.inclusive,
                order.signed,
            ),
        };
        let offset = match &offset {
            Some(c) => Some(self.frozen_at_row_entry(c, row)?),
            None => None,
        };
        let same = |b: &Bound<'m>| {
            b.value == value && b.offset == offset && b.inclusive == inclusive && b.signed == signed
        };
        let k = bounds.iter().position(same).unwrap_or_else(|| {
            bounds.push(Bound {
                value,
                offset,
                inclusive,
                signed,
                below: Decided::default(),
                lower,
            });
            bounds.len() - 1
        });
        let below = &mut bounds[k].below;
        match order.below {
            Below::Answer(answer) => {
                below.answers.insert(i, answer);
            }
            Below::Operand(operand) => {
                below.clamps.insert(i, operand);
            }
        }
        Ok(())
    }

    /// The cuts of a row of the region of `code` ([`Emitter::bounds`]), computed at the end of
    /// `entry`: the largest of the lower cuts whose place only the block knows (and the whole
    /// row where an `x + C` may wrap), each constant cut in ascending order, then the smallest
    /// of the other upper cuts. Each piece knows the answers of the cuts before it and the next one, and of
    /// every later constant one past a constant next cut.
    pub(super) fn cuts(
        &mut self,
        code: &RegionCode<'m>,
        entry: Block<'m>,
        singles: &HashMap<Instruction<'m>, bool>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> std::result::Result<Cuts<'m>, String> {
        let bounds = self.bounds(code, entry, singles, kinds)?;
        // Hoisting their values moved the builder.
        self.builder.position_at_end(entry);
        if bounds.is_empty() {
            return Ok(Cuts::default());
        }
        let constant = |b: &Bound<'m>| {
            (!b.signed && b.offset.is_none())
                .then(|| b.value.const_zext_value())
                .flatten()
        };
        let wraps: Vec<Value<'m>> = bounds.iter().filter_map(Bound::may_wrap).collect();
        let lower: Vec<usize> = (0..bounds.len())
            .filter(|&k| bounds[k].lower && constant(&bounds[k]).is_none())
            .collect();
        let upper: Vec<usize> = (0..bounds.len())
            .filter(|&k| !bounds[k].lower && constant(&bounds[k]).is_none())
            .collect();
        let mut constants: Vec<(u64, usize)> = (0..bounds.len())
            .filter_map(|k| Some((constant(&bounds[k])?, k)))
            .collect();
        constants.sort_unstable();
        let mut elements = Vec::new();
        if !lower.is_empty() || !wraps.is_empty() {
            let mut at = self
                .combined_cut(&bounds, &lower, IntPredicate::UGT)
                .unwrap_or_else(|| self.const32(0));
            // Where `x + C` wraps for a thread of the row, the first piece is the row, and it
            // knows nothing.
            let width = self.block_values[&6];
            for &offset in &wraps {
                let wrapping = self.wraps_in_a_row(offset);
                at = self.builder.build_select(wrapping, width, at, c"");
            }
            elements.push(Element {
                at,
                below_known: lower.len() == 1 && wraps.is_empty(),
                above_known: true,
                bounds: lower,
                constant: None,
            });
        }
        for (value, k) in constants {
            let at = self.cut_of(&bounds[k]);
            elements.push(Element {
                at,
                bounds: vec![k],
                below_known: true,
                above_known: true,
                constant: Some(value),
            });
        }
        if let Some(at) = self.combined_cut(&bounds, &upper, IntPredicate::ULT) {
            elements.push(Element {
                at,
                below_known: true,
                above_known: upper.len() == 1,
                bounds: upper,
                constant: None,
            });
        }
        let known = (0..=elements.len())
            .map(|piece| {
                // The constant cut that ends the piece, if any.
                let next = elements.get(piece).and_then(|n| n.constant);
                let mut known = Decided::default();
                for (i, element) in elements.iter().enumerate() {
                    let (knows, above) = if i < piece {
                        (element.above_known, true)
                    } else if i == piece {
                        (element.below_known, false)
                    } else {
                        let past_next =
                            matches!((next, element.constant), (Some(a), Some(b)) if a <= b);
                        (past_next, false)
                    };
                    if knows {
                        for &k in &element.bounds {
                            known.add(&bounds[k].below, above);
                        }
                    }
                }
                known
            })
            .collect();
        Ok(Cuts {
            at: elements.iter().map(|e| e.at).collect(),
            known,
        })
    }

    /// The cut of `bounds[k]` for each `k` of `which` that `keep` keeps against the others
    /// (`UGT`: the largest, `ULT`: the smallest), at the builder's position; `None` where
    /// `which` is empty.
    fn combined_cut(
        &self,
        bounds: &[Bound<'m>],
        which: &[usize],
        keep: IntPredicate,
    ) -> Option<Value<'m>> {
        let mut at = None;
        for &k in which {
            let cut = self.cut_of(&bounds[k]);
            at = Some(match at {
                None => cut,
                Some(at) => {
                    let b = &self.builder;
                    let kept = b.build_icmp(keep, cut, at, c"");
                    b.build_select(kept, cut, at, c"cut.of.several")
                }
            });
        }
        at
    }

    /// `bound`'s cut of a row (an `i32`, at most the row's width), computed at the builder's
    /// position: for `x + C`, at `V - C`, or at the row's start where `V < C`.
    fn cut_of(&self, bound: &Bound<'m>) -> Value<'m> {
        let bx = self.block_values[&6];
        let b = &self.builder;
        let width = b.build_zext(bx, self.i64_ty, c"");
        if bound.signed {
            let mut v = b.build_sext(bound.value, self.i64_ty, c"");
            if let Some(c) = bound.offset {
                let c = b.build_sext(c, self.i64_ty, c"");
                v = b.build_binop(InstructionOpcode::Sub, v, c, c"");
            }
            // `V` (or `V - C`), one past it where inclusive, within `[0, width]`; `+ 1` only
            // below the width, where it cannot wrap.
            let negative = b.build_icmp(IntPredicate::SLT, v, self.const64(0), c"");
            let (past, limit) = if bound.inclusive {
                let past = b.build_add(v, self.const64(1), c"");
                (past, b.build_icmp(IntPredicate::SGE, v, width, c""))
            } else {
                (v, b.build_icmp(IntPredicate::SGT, v, width, c""))
            };
            let at = b.build_select(limit, width, past, c"");
            let at = b.build_select(negative, self.const64(0), at, c"");
            return b.build_trunc(at, self.i32_ty, c"bound");
        }
        let mut v = self.widened(bound.value);
        let mut reached = None;
        if let Some(c) = bound.offset {
            let c = self.widened(c);
            let b = &self.builder;
            reached = Some(b.build_icmp(IntPredicate::UGE, v, c, c""));
            v = b.build_binop(InstructionOpcode::Sub, v, c, c"");
        }
        let b = &self.builder;
        let inside = b.build_icmp(IntPredicate::ULT, v, width, c"");
        let past = if bound.inclusive {
            b.build_add(v, self.const64(1), c"")
        } else {
            v
        };
        let mut at = b.build_select(inside, past, width, c"");
        if let Some(reached) = reached {
            at = b.build_select(reached, at, self.const64(0), c"");
        }
        b.build_trunc(at, self.i32_ty, c"bound")
    }

    /// Whether `x + c` (signed, at most 32 bits) wraps for a thread of a row: `c` plus the
    /// row's last `x` past the largest signed value of `c`'s width.
    fn wraps_in_a_row(&self, c: Value<'m>) -> Value<'m> {
        let b = &self.builder;
        let bx = b.build_zext(self.block_values[&6], self.i64_ty, c"");
        let bits = c.ty().int_width().unwrap_or(32);
        let c = b.build_sext(c, self.i64_ty, c"");
        let end = b.build_add(c, bx, c"");
        let largest = self.const64(1 << (bits - 1));
        b.build_icmp(IntPredicate::SGT, end, largest, c"wraps")
    }
}
