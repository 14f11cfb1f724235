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
    /// What the threads on the other side of the cut know of the same comparisons and clamps.
    pub(super) fn flipped(&self) -> Self {
        Decided {
            answers: self.answers.iter().map(|(&i, &a)| (i, !a)).collect(),
            clamps: self.clamps.iter().map(|(&i, &k)| (i, 1 - k)).collect(),
        }
    }

    /// `self` with `other`'s decisions too.
    pub(super) fn with(&self, other: &Self) -> Self {
        let mut both = self.clone();
        both.answers
            .extend(other.answers.iter().map(|(&i, &a)| (i, a)));
        both.clamps
            .extend(other.clamps.iter().map(|(&i, &k)| (i, k)));
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
