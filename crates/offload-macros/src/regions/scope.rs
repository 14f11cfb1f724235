//! The locals of a body as the lowering sees them: each binding's [`Kind`] (one value for
//! the block, or kept per thread in lane storage and perhaps recomputed), and the writes of
//! block mutables.

use proc_macro2::{Ident, TokenStream as TokenStream2};
use syn::Expr;

#[derive(Clone)]
pub(super) enum Kind {
    /// A plain local of the block function: parameters, uniform locals, loop variables of
    /// uniform loops.
    Uniform,
    /// Kept per thread in `slot`; recomputed from `init` where its dependencies are unchanged.
    Lane {
        slot: Ident,
        mutable: bool,
        recompute: Option<Recompute>,
    },
}

#[derive(Clone)]
pub(super) struct Recompute {
    pub(super) init: TokenStream2,
    pub(super) ty: Option<TokenStream2>,
    /// The bindings its value reads: (name, binding id).
    pub(super) deps: Vec<(String, usize)>,
}

#[derive(Clone)]
pub(super) struct Var {
    pub(super) name: String,
    pub(super) id: usize,
    pub(super) kind: Kind,
}

/// A value a block mutable is assigned, with the loop variables of the block-wide loops
/// around the assignment (uniform there, though not where the local is declared).
#[derive(Clone)]
pub(super) struct BlockWrite {
    pub(super) value: Expr,
    pub(super) loop_vars: Vec<String>,
}
