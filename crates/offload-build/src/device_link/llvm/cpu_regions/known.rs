//! What a piece of a row knows of its threads: the comparisons of `x` it knows the answers of
//! and the clamps of `x` it knows the operand of, by the cuts of the row (`cuts.rs`) and the
//! threads the row runs alone; each piece's copy of the region has them decided.
#![forbid(unsafe_code)]

use std::collections::HashMap;

use super::super::ir::{Instruction, Value};

/// What a piece of a row knows of its threads' comparisons and clamps.
#[derive(Clone, Default)]
pub(super) struct Decided<'m> {
    /// Comparisons with their answer.
    pub(super) answers: HashMap<Instruction<'m>, bool>,
    /// Clamps (`llvm.smin` and the like) with the operand they return.
    pub(super) clamps: HashMap<Instruction<'m>, u32>,
}

impl<'m> Decided<'m> {
    /// Adds `other`'s decisions, or where `flipped` those of the threads on the other side of
    /// the cut (each answer negated, each clamp's other operand).
    pub(super) fn add(&mut self, other: &Self, flipped: bool) {
        let answers = other.answers.iter().map(|(&i, &a)| (i, a != flipped));
        self.answers.extend(answers);
        let operand = |k: u32| if flipped { 1 - k } else { k };
        let clamps = other.clamps.iter().map(|(&i, &k)| (i, operand(k)));
        self.clamps.extend(clamps);
    }

    /// `self` with `other`'s decisions too.
    pub(super) fn with(&self, other: &Self) -> Self {
        let mut both = self.clone();
        both.add(other, false);
        both
    }
}

/// Where a row's threads run in pieces of their own (`Emitter::piece`): the threads
/// `x < at[0]`, then those up to each next cut (at least the last), each piece knowing
/// `known[piece]`; `at` empty, one piece, where nothing cuts the rows.
#[derive(Default)]
pub(super) struct Cuts<'m> {
    pub(super) at: Vec<Value<'m>>,
    pub(super) known: Vec<Decided<'m>>,
}
