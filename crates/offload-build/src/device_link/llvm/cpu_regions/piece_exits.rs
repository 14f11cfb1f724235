//! The scheduler's summary of the states (the largest, the smallest live one, whether a thread
//! is done, past the last rank going first) kept by an unguarded region's loop as it runs,
//! where each of its pieces' threads leave at one state: the pieces of a row cut at a bound
//! (`if tid < 32 { warp stage }` of a reduction), the threads that run alone. The loop then
//! goes on to the next region without the scheduler's pass over the block's states, which
//! was a fifth of `reduce5`'s time on the baseline image.
#![forbid(unsafe_code)]

use inkwell::IntPredicate;

use super::super::ir::{Block, Phi, Value};
use super::emit::{Emitter, PieceSummary, is_thread_x};
use super::exits::{decided, exit_states};

impl<'m> Emitter<'_, 'm> {
    /// Starts the summary of an unguarded region's loop, at the builder's position (before
    /// the loop): nothing seen.
    pub(super) fn start_piece_summary(&mut self) {
        let kept = self.piece_kept;
        self.piece_summary = Some(PieceSummary { kept, known: true });
        let i1_ty = self.module.i1_type();
        let b = &self.builder;
        b.build_store(self.const32(0), kept[0]);
        b.build_store(self.const32(u64::from(u32::MAX)), kept[1]);
        b.build_store(i1_ty.const_int(0, false), kept[2]);
        b.build_store(self.const32(0), kept[3]);
    }

    /// Adds a piece of region `r`'s threads, up to rank `rank_end` (an `i64`, past its last),
    /// to the summary, at the builder's position (where the piece is known to run): the one
    /// state its threads leave at, with the comparisons the piece's copy knows decided and,
    /// where given, its one thread's `x`. A piece that may leave at several states makes the
    /// summary unknown.
    pub(super) fn add_piece_exit(&mut self, r: usize, x: Option<u64>, rank_end: Value<'m>) {
        let Some(summary) = self.piece_summary else {
            return;
        };
        if !summary.known {
            return;
        }
        let hooks = self.hooks;
        let is_x = |v: Value<'m>| is_thread_x(v, hooks);
        let forced = &self.forced;
        let states = exit_states(
            self.segments,
            self.region_starts[r],
            &self.region_of_barrier,
            &mut |c| decided(c, forced, x, &is_x),
        );
        let mut states = states.into_iter();
        let (Some(state), None) = (states.next(), states.next()) else {
            if let Some(s) = self.piece_summary.as_mut() {
                s.known = false;
            }
            return;
        };
        let [max, min, done, first_end] = summary.kept;
        let (i32_ty, i1_ty) = (self.i32_ty, self.module.i1_type());
        let value = self.const32(state);
        let b = &self.builder;
        let was = b.build_load(i32_ty, max, c"").as_value();
        let above = b.build_icmp(IntPredicate::UGT, value, was, c"");
        b.build_store(b.build_select(above, value, was, c""), max);
        if state == 0 {
            b.build_store(i1_ty.const_int(1, false), done);
        } else {
            let was = b.build_load(i32_ty, min, c"").as_value();
            let below = b.build_icmp(IntPredicate::ULT, value, was, c"");
            b.build_store(b.build_select(below, value, was, c""), min);
        }
        if self.goes_first(state) {
            b.build_store(b.build_trunc(rank_end, i32_ty, c""), first_end);
        }
    }

    /// Whether the scheduler's pass would count a thread at `state` as going first
    /// ([`Emitter::going_first_end`]).
    pub(super) fn goes_first(&self, state: u64) -> bool {
        self.after_warp_barrier.contains(&true)
            && self.first_state_going_first.is_some_and(|f| state >= f)
    }

    /// Ends the summary of an unguarded loop: where every piece knew its state, the block
    /// the loop goes on to instead of the scheduler's pass (wired by
    /// [`Emitter::emit_schedule`]).
    pub(super) fn end_piece_summary(&mut self) -> Option<Block<'m>> {
        let summary = self.piece_summary.take()?;
        if !summary.known {
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
        [max, min, done]: [Phi<'m>; 3],
    ) {
        let (i32_ty, i1_ty) = (self.i32_ty, self.module.i1_type());
        let b = &self.builder;
        b.position_at_end(block);
        let flag = b.build_load(i32_ty, flag_slot, c"").as_value();
        let in_round = b.build_icmp(IntPredicate::NE, flag, self.const32(0), c"");
        let outside = self.block(c"summarized.outside");
        self.builder.build_cond_br(in_round, schedule, outside);
        self.builder.position_at_end(outside);
        self.make_block_values_current();
        let b = &self.builder;
        let [kept_max, kept_min, kept_done, kept_first_end] = self.piece_kept;
        let first_end = b.build_load(i32_ty, kept_first_end, c"").as_value();
        b.build_store(first_end, self.going_first_end);
        max.add_incoming(b.build_load(i32_ty, kept_max, c"").as_value(), outside);
        min.add_incoming(b.build_load(i32_ty, kept_min, c"").as_value(), outside);
        done.add_incoming(b.build_load(i1_ty, kept_done, c"").as_value(), outside);
        b.build_br(summary);
    }
}
