//! The scheduler's summary of the states (the largest, the smallest live one, whether a thread
//! is done, past the last rank going first) kept by an unguarded region's loop as it runs,
//! where each of its pieces' threads leave at one state: the pieces of a row cut at a bound
//! (`if tid < 32 { warp stage }` of a reduction), the threads that run alone, the pieces of
//! one warp's threads where only the warp decides (`if warp == 0 { scan the warps' sums }`).
//! The loop then goes on to the next region without the scheduler's pass over the block's
//! states, which was a fifth of `reduce5`'s time on the baseline image.
#![forbid(unsafe_code)]

use inkwell::IntPredicate;

use super::super::ir::{Block, Phi, Value};
use super::emit::{Emitter, PieceExit, is_thread_x};
use super::exits::{decided, exit_states, leave_together};
use super::kinds::Kinds;
use super::warps::one_per_warp;

impl<'m> Emitter<'_, 'm> {
    /// Starts the summary of an unguarded region's loop, at the builder's position (before
    /// the loop): nothing seen.
    pub(super) fn start_piece_summary(&mut self) {
        let kept = self.piece_kept;
        self.pieces_known = Some(true);
        let i1_ty = self.module.i1_type();
        let b = &self.builder;
        b.build_store(self.const32(0), kept[0]);
        b.build_store(self.const32(u64::from(u32::MAX)), kept[1]);
        b.build_store(i1_ty.const_int(0, false), kept[2]);
        b.build_store(self.const32(0), kept[3]);
        b.build_store(self.const64(0), kept[4]);
    }

    /// Where the threads of a piece of region `r` leave, with the comparisons the piece's copy
    /// knows decided and, where given, its one thread's `x`: at one state (added to the
    /// summary at the builder's position, where the piece is known to run), at one state for
    /// the whole piece that only its threads' warp decides (a piece of one warp's threads:
    /// read from its first thread's state once the piece ran), or the summary is unknown.
    pub(super) fn piece_exit(
        &mut self,
        r: usize,
        x: Option<u64>,
        warp: bool,
        rank_end: Value<'m>,
        kinds: &mut Kinds<'_, 'm>,
    ) -> PieceExit {
        if self.pieces_known != Some(true) {
            return PieceExit::Unknown;
        }
        let hooks = self.hooks;
        let is_x = |v: Value<'m>| is_thread_x(v, hooks);
        let forced = &self.forced;
        let start = self.region_starts[r];
        let mut decide = |c| decided(c, forced, x, &is_x);
        let states = exit_states(self.segments, start, &self.region_of_barrier, &mut decide);
        let exit = match states.len() {
            1 => {
                let state = states.into_iter().next().unwrap_or_default();
                self.add_to_summary(self.const32(state), rank_end);
                PieceExit::Known
            }
            _ if warp
                && leave_together(
                    self.segments,
                    start,
                    &self.region_of_barrier,
                    &mut |c| decide(c).is_some() || one_per_warp(c, hooks, kinds),
                    &mut |a, b| a == b,
                ) =>
            {
                PieceExit::OfItsWarp
            }
            _ => PieceExit::Unknown,
        };
        if exit == PieceExit::Unknown {
            self.pieces_known = Some(false);
        }
        exit
    }

    /// Adds the threads up to rank `rank_end` (an `i64`, past the last), all at `state` (an
    /// `i32`), to the summary, at the builder's position.
    pub(super) fn add_to_summary(&self, state: Value<'m>, rank_end: Value<'m>) {
        if self.pieces_known.is_none() {
            return;
        }
        let [max, min, done, first_end, seen] = self.piece_kept;
        let (i32_ty, i1_ty) = (self.i32_ty, self.module.i1_type());
        let bit = self.state_bit(state);
        let b = &self.builder;
        let was = b.build_load(self.i64_ty, seen, c"").as_value();
        b.build_store(b.build_or(was, bit, c""), seen);
        let load = |ty, kept| b.build_load(ty, kept, c"").as_value();
        let select = |keep, value, was| b.build_select(keep, value, was, c"");
        let was = load(i32_ty, max);
        let above = b.build_icmp(IntPredicate::UGT, state, was, c"");
        b.build_store(select(above, state, was), max);
        let is_done = b.build_icmp(IntPredicate::EQ, state, self.const32(0), c"");
        b.build_store(b.build_or(load(i1_ty, done), is_done, c""), done);
        let live = select(is_done, self.const32(u64::from(u32::MAX)), state);
        let was = load(i32_ty, min);
        let below = b.build_icmp(IntPredicate::ULT, live, was, c"");
        b.build_store(select(below, live, was), min);
        if let Some(first) = self.first_state_counted_going_first() {
            let goes_first = b.build_icmp(IntPredicate::UGE, state, self.const32(first), c"");
            let past = b.build_trunc(rank_end, i32_ty, c"");
            b.build_store(select(goes_first, past, load(i32_ty, first_end)), first_end);
        }
    }

    /// Ends the summary of an unguarded loop: where every piece knew its state, the block
    /// the loop goes on to instead of the scheduler's pass (wired by
    /// [`Emitter::emit_schedule`]).
    pub(super) fn end_piece_summary(&mut self) -> Option<Block<'m>> {
        if self.pieces_known.take() != Some(true) {
            return None;
        }
        let block = self.block(c"summarized");
        self.summarized.push(block);
        Some(block)
    }

    /// The end of an unguarded loop that kept the summary ([`Emitter::end_piece_summary`]):
    /// the block's values made current, the summary as the scheduler's pass would have left
    /// it, on to `summary`; in a round (never, as rounds run guarded loops), the scheduler.
    pub(super) fn emit_summarized(
        &self,
        block: Block<'m>,
        [schedule, summary]: [Block<'m>; 2],
        flag_slot: Value<'m>,
        [max, min, done, two]: [Phi<'m>; 4],
    ) {
        let (i32_ty, i1_ty) = (self.i32_ty, self.module.i1_type());
        let outside = self.block(c"summarized.outside");
        self.outside_a_round(block, [schedule, outside], flag_slot);
        let b = &self.builder;
        let [kept_max, kept_min, kept_done, kept_first_end, kept_seen] = self.piece_kept;
        let first_end = b.build_load(i32_ty, kept_first_end, c"").as_value();
        b.build_store(first_end, self.going_first_end);
        let max_now = b.build_load(i32_ty, kept_max, c"").as_value();
        let min_now = b.build_load(i32_ty, kept_min, c"").as_value();
        let seen = b.build_load(self.i64_ty, kept_seen, c"").as_value();
        // Every live thread at the largest or the smallest state: no other state seen but
        // done, none past the bits.
        let ends = b.build_or(self.state_bit(max_now), self.state_bit(min_now), c"");
        let b = &self.builder;
        let ends = b.build_or(ends, self.const64(1), c"");
        let between = b.build_and(seen, b.build_not(ends, c""), c"");
        let none_between = b.build_icmp(IntPredicate::EQ, between, self.const64(0), c"");
        let in_bits = b.build_icmp(IntPredicate::ULT, max_now, self.const32(63), c"");
        two.add_incoming(b.build_and(none_between, in_bits, c""), outside);
        max.add_incoming(max_now, outside);
        min.add_incoming(min_now, outside);
        done.add_incoming(b.build_load(i1_ty, kept_done, c"").as_value(), outside);
        b.build_br(summary);
    }

    /// Bit `min(state, 63)` of an `i64`, for `state` (an `i32`), at the builder's position.
    fn state_bit(&self, state: Value<'m>) -> Value<'m> {
        let b = &self.builder;
        let last = self.const32(63);
        let below = b.build_icmp(IntPredicate::ULT, state, last, c"");
        let index = b.build_select(below, state, last, c"");
        let index = b.build_zext(index, self.i64_ty, c"");
        b.build_binop(
            inkwell::values::InstructionOpcode::Shl,
            self.const64(1),
            index,
            c"",
        )
    }
}
