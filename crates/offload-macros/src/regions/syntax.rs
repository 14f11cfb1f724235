//! The shared leaf of the region form: the device API's names it knows (barriers, warp
//! operations, index functions, pure methods) and the syntax helpers every pass uses
//! (statement lists, token searches, simple `let`s, the names a pattern binds).

use std::collections::HashSet;

use proc_macro2::{Ident, TokenStream as TokenStream2, TokenTree};
use quote::{ToTokens, format_ident, quote};
use syn::visit::Visit;
use syn::{Block, Expr, Pat, Stmt};

pub(super) const BARRIER: &str = "sync_threads";
pub(super) const WARP_OPS: &[&str] = &[
    "shuffle_idx",
    "shuffle_up",
    "shuffle_down",
    "shuffle_xor",
    "ballot",
    "warp_any",
    "warp_all",
    "warp_sum",
    "warp_min",
    "warp_max",
    "sync_warp",
    "shuffle_idx_masked",
    "shuffle_up_masked",
    "shuffle_down_masked",
    "shuffle_xor_masked",
    "ballot_masked",
    "warp_any_masked",
    "warp_all_masked",
    "sync_warp_masked",
];

/// Index functions whose value differs between the threads of a block.
pub(super) const THREAD_FNS: &[&str] = &[
    "thread_idx_x",
    "thread_idx_y",
    "thread_idx_z",
    "thread_idx",
    "global_idx_x",
    "global_idx_y",
    "global_idx_z",
    "thread_rank",
    "lane_id",
    "warp_id",
];
/// The local that says whether lane slot `slot` is read anywhere (known only once every
/// region is lowered): its stores are made under it, so the optimizer drops those of a slot
/// only recomputations use.
pub(super) fn read_flag(slot: &Ident) -> Ident {
    format_ident!("{}_read", slot)
}

/// The index functions a region does not read from its `RegionThread`: the warps' sizes, and
/// the block's dynamic shared memory.
pub(super) const NOT_IN_REGION_THREAD: &[&str] =
    &["warp_size", "warps_per_block", "dynamic_shared"];

/// Whether a region reads index function `name` from the thread's `RegionThread` (its
/// `__offload_at`), which has a method of the same name.
pub(super) fn in_region_thread(name: &str) -> bool {
    THREAD_FNS.iter().chain(BLOCK_FNS).any(|f| *f == name) && !NOT_IN_REGION_THREAD.contains(&name)
}

/// Index functions whose value is the same for every thread of a block.
pub(super) const BLOCK_FNS: &[&str] = &[
    "block_idx_x",
    "block_idx_y",
    "block_idx_z",
    "block_idx",
    "block_dim_x",
    "block_dim_y",
    "block_dim_z",
    "block_dim",
    "grid_dim_x",
    "grid_dim_y",
    "grid_dim_z",
    "grid_dim",
    "block_size",
    "warp_size",
    "warps_per_block",
    "dynamic_shared",
];
/// Methods of numbers and pointers that compute a value from their operands alone.
pub(super) const PURE_METHODS: &[&str] = &[
    "min",
    "max",
    "clamp",
    "abs",
    "pow",
    "div_ceil",
    "next_multiple_of",
    "rem_euclid",
    "div_euclid",
    "wrapping_add",
    "wrapping_sub",
    "wrapping_mul",
    "saturating_add",
    "saturating_sub",
    "saturating_mul",
    "add",
    "sub",
    "offset",
    "wrapping_offset",
    "cast",
    "count_ones",
    "leading_zeros",
    "trailing_zeros",
    "is_power_of_two",
    "is_multiple_of",
    "to_bits",
];

/// Whether `e` is a statement that holds statements: an `if`, a `match`, a loop or a block.
pub(super) fn holds_statements(e: &Expr) -> bool {
    matches!(
        e,
        Expr::If(_)
            | Expr::Match(_)
            | Expr::ForLoop(_)
            | Expr::While(_)
            | Expr::Loop(_)
            | Expr::Block(_)
            | Expr::Unsafe(_)
    )
}

/// A pre-pass's rewrite of a list of statements.
pub(super) type ListRewrite<'a> = dyn FnMut(&[Stmt]) -> Result<Vec<Stmt>, String> + 'a;

/// `expr` (one that [`holds_statements`]) with each of its lists of statements rewritten by
/// `list`, once `head` has accepted each condition and range (a pre-pass's own statements,
/// such as a warp operation, must not be there).
pub(super) fn rewrite_lists(
    expr: &Expr,
    head: &dyn Fn(&Expr) -> Result<(), String>,
    list: &mut ListRewrite<'_>,
) -> Result<Expr, String> {
    let mut out = expr.clone();
    match &mut out {
        Expr::If(i) => {
            head(&i.cond)?;
            i.then_branch.stmts = list(&i.then_branch.stmts)?;
            if let Some((_, e)) = &mut i.else_branch {
                **e = rewrite_lists(e, head, list)?;
            }
        }
        Expr::ForLoop(f) => {
            head(&f.expr)?;
            f.body.stmts = list(&f.body.stmts)?;
        }
        Expr::While(w) => {
            head(&w.cond)?;
            w.body.stmts = list(&w.body.stmts)?;
        }
        Expr::Match(m) => {
            head(&m.expr)?;
            for arm in &mut m.arms {
                if let Pat::Guard(g) = &arm.pat {
                    head(&g.guard)?;
                }
                let stmts = list(&arm_statements(arm))?;
                *arm.body = syn::parse_quote!({ #(#stmts)* });
            }
        }
        Expr::Loop(l) => l.body.stmts = list(&l.body.stmts)?,
        Expr::Block(b) => b.block.stmts = list(&b.block.stmts)?,
        Expr::Unsafe(u) => u.block.stmts = list(&u.block.stmts)?,
        _ => unreachable!("`holds_statements` is checked first"),
    }
    Ok(out)
}

/// A `match` arm's body as a list of statements (`0 => f(),` as `0 => { f(); }`).
pub(super) fn arm_statements(arm: &syn::Arm) -> Vec<Stmt> {
    match &*arm.body {
        Expr::Block(b) if b.label.is_none() => b.block.stmts.clone(),
        body => vec![Stmt::Expr(body.clone(), Some(Default::default()))],
    }
}

/// Whether `tokens` contains the identifier `name` anywhere, macro arguments included.
pub(super) fn mentions(tokens: &TokenStream2, name: &str) -> bool {
    tokens.clone().into_iter().any(|t| match t {
        TokenTree::Ident(i) => i == name,
        TokenTree::Group(g) => mentions(&g.stream(), name),
        _ => false,
    })
}

pub(crate) fn idents_of(tokens: &TokenStream2, out: &mut HashSet<String>) {
    for t in tokens.clone() {
        match t {
            TokenTree::Ident(i) => {
                out.insert(i.to_string());
            }
            TokenTree::Group(g) => idents_of(&g.stream(), out),
            _ => {}
        }
    }
}

/// A statement as tokens, a trailing expression made a statement.
pub(super) fn stmt_tokens(s: &Stmt) -> TokenStream2 {
    match s {
        Stmt::Expr(e, None) => quote! { #e; },
        s => s.to_token_stream(),
    }
}

pub(super) trait LocalExt {
    fn pat_is_mut(&self) -> bool;
}

impl LocalExt for syn::Local {
    fn pat_is_mut(&self) -> bool {
        let mut pat = &self.pat;
        if let Pat::Type(t) = pat {
            pat = &t.pat;
        }
        matches!(pat, Pat::Ident(i) if i.mutability.is_some())
    }
}

/// `let name[: ty] = init;` (any `mut`), without `else`.
pub(super) fn simple_let(l: &syn::Local) -> Option<(String, Option<&syn::Type>, &Expr)> {
    let init = l.init.as_ref()?;
    if init.diverge.is_some() {
        return None;
    }
    let (pat, ty) = match &l.pat {
        Pat::Type(t) => (&*t.pat, Some(&*t.ty)),
        p => (p, None),
    };
    match pat {
        Pat::Ident(i) if i.by_ref.is_none() && i.subpat.is_none() => {
            Some((i.ident.to_string(), ty, &init.expr))
        }
        _ => None,
    }
}

pub(super) fn pattern_names(pat: &Pat, out: &mut Vec<String>) {
    struct Names<'a>(&'a mut Vec<String>);
    impl<'ast> Visit<'ast> for Names<'_> {
        fn visit_pat_ident(&mut self, i: &'ast syn::PatIdent) {
            self.0.push(i.ident.to_string());
            syn::visit::visit_pat_ident(self, i);
        }
    }
    Names(out).visit_pat(pat);
}

pub(super) fn rest_tokens(stmts: &[Stmt], after: &TokenStream2) -> TokenStream2 {
    let mut t: TokenStream2 = stmts.iter().map(ToTokens::to_token_stream).collect();
    t.extend(after.clone());
    t
}

/// What follows a statement of a loop body: the rest of the body in the next iteration too.
pub(super) fn loop_tokens(body: &Block, after: &TokenStream2) -> TokenStream2 {
    let mut t = body.to_token_stream();
    t.extend(after.clone());
    t
}

pub(super) fn is_barrier_call(call: &syn::ExprCall) -> bool {
    call.args.is_empty()
        && matches!(&*call.func, Expr::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == BARRIER))
}

/// Whether `op` is `+=`, `-=` or another compound assignment.
pub(super) fn is_compound_assignment(op: &syn::BinOp) -> bool {
    use syn::BinOp::*;
    matches!(
        op,
        AddAssign(_)
            | SubAssign(_)
            | MulAssign(_)
            | DivAssign(_)
            | RemAssign(_)
            | BitXorAssign(_)
            | BitAndAssign(_)
            | BitOrAssign(_)
            | ShlAssign(_)
            | ShrAssign(_)
    )
}

/// Every name a pattern binds in what it visits (`let`, `for`, `match` arms, closures).
pub(super) struct BoundNames<'a>(pub(super) &'a mut Vec<String>);

impl<'ast> Visit<'ast> for BoundNames<'_> {
    fn visit_pat_ident(&mut self, i: &'ast syn::PatIdent) {
        self.0.push(i.ident.to_string());
        syn::visit::visit_pat_ident(self, i);
    }
}
