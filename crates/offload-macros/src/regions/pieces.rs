//! The pieces of a region bounded by its thread indices: the spans of `x` and `y` indices a
//! condition lets in (`if row < n && col < n`), the statements of an `if` that test the
//! thread's edge run as loops of their own, and the index calls a region reads from its
//! `RegionThread` instead of the thread-local state.

use proc_macro2::{Ident, Span, TokenStream as TokenStream2, TokenTree};
use quote::{ToTokens, quote};
use syn::{Expr, Stmt};

use super::analysis::{is_uniform, may_panic, pure_deps, pure_let, recomputed};
use super::scope::Var;
use super::syntax::{in_region_thread, simple_let, stmt_tokens};

/// The thread indices along one axis that a region's loop runs: a `(usize, usize)`
/// expression of the block, or every index.
#[derive(Clone, Default)]
pub(super) struct ThreadSpan(pub(super) Option<TokenStream2>);

impl ThreadSpan {
    pub(super) fn and(self, other: ThreadSpan) -> ThreadSpan {
        match (self.0, other.0) {
            (Some(a), Some(b)) => ThreadSpan(Some(
                quote! { ::offload_rt::__private::thread_range_and(#a, #b) },
            )),
            (a, b) => ThreadSpan(a.or(b)),
        }
    }

    pub(super) fn ranged(&self) -> TokenStream2 {
        match &self.0 {
            Some(r) => r.clone(),
            None => quote! { (0usize, usize::MAX) },
        }
    }
}

/// One loop of a region split by [`pieces`]: its statement (after the prefix) and the
/// threads it runs.
pub(super) struct Piece {
    pub(super) stmt: TokenStream2,
    pub(super) x: ThreadSpan,
    pub(super) y: ThreadSpan,
    /// The piece for a block none of whose threads is on an edge its `let`s test.
    pub(super) inner: Option<Inner>,
}

/// A piece's statement with each `let edge = a == .. || b == ..` of its `if` that is false for
/// every thread of the block made `false`, and the block-wide test that says so.
pub(super) struct Inner {
    pub(super) test: TokenStream2,
    pub(super) stmt: TokenStream2,
}

/// The `let`s of a split `if`'s block that come before a piece's statements, as written and
/// with the edges made `false` ([`never_true`]), and the tests of those edges.
#[derive(Default)]
pub(super) struct BlockLets {
    pub(super) written: Vec<TokenStream2>,
    pub(super) inner: Vec<TokenStream2>,
    pub(super) tests: Vec<TokenStream2>,
}

impl BlockLets {
    pub(super) fn piece(
        &self,
        cond: &Expr,
        stmts: &[TokenStream2],
        x: ThreadSpan,
        y: ThreadSpan,
    ) -> Piece {
        let (written, inner, tests) = (&self.written, &self.inner, &self.tests);
        Piece {
            stmt: quote! { if #cond { #(#written)* #(#stmts)* } },
            x,
            y,
            inner: (!tests.is_empty()).then(|| Inner {
                test: quote! { #((#tests))&&* },
                stmt: quote! { if #cond { #(#inner)* #(#stmts)* } },
            }),
        }
    }
}

/// For `let name = t1 || t2 || ..;`, each `t` a test `index == value` of the thread's offset
/// index along `x` or `y` (as [`thread_ranges`] reads them) or a value the whole block shares:
/// the block-wide test that every `t` is false for every thread of the block. A stencil's
/// `let border = row == 0 || col == 0 || row == n - 1 || col == n - 1` is false in every block
/// but those on the grid's border, and with it `false` the loads under `!border` are made for
/// every thread, which the loop vectorizes without masks.
pub(super) fn never_true(init: &Expr, scope: &[Var]) -> Option<TokenStream2> {
    pub(super) fn terms<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
        match e {
            Expr::Paren(p) => terms(&p.expr, out),
            Expr::Group(g) => terms(&g.expr, out),
            Expr::Binary(b) if matches!(b.op, syn::BinOp::Or(_)) => {
                terms(&b.left, out);
                terms(&b.right, out);
            }
            e => out.push(e),
        }
    }
    let mut all = Vec::new();
    terms(init, &mut all);
    let (mut uniform, mut x, mut y) = (Vec::new(), Vec::new(), Vec::new());
    for t in all {
        if is_uniform(t, scope) {
            uniform.push(t);
            continue;
        }
        if !matches!(t, Expr::Binary(b) if matches!(b.op, syn::BinOp::Eq(_))) {
            return None;
        }
        match thread_ranges(t, scope) {
            (ThreadSpan(Some(r)), ThreadSpan(None)) => x.push(r),
            (ThreadSpan(None), ThreadSpan(Some(r))) => y.push(r),
            _ => return None,
        }
    }
    (!x.is_empty() || !y.is_empty()).then(|| {
        quote! {
            #(!(#uniform) &&)*
                ::offload_rt::__private::thread_ranges_miss(&[#(#x),*], &[#(#y),*])
        }
    })
}

/// A region `let a = ..; let b = ..; if test { .. }` whose `let`s and test read no memory
/// (functions of the indices and of uniform values), as loops over only the threads the
/// test can let in, with the `if`'s statements guarded by a test of the thread's `x` or `y`
/// index (the halo loads of a stencil: `if tx == 0 && col > 0 { .. }`) each a loop of its
/// own over those threads. Each piece is the prefix's `let`s and the `if` with the `let`s
/// of its block that come before the piece's statements, so each thread runs the same
/// statements in the same order as in one loop. Running all the threads' first statements,
/// then all their second ones, is an order in which the block's threads may run on a GPU
/// too: between two barriers, a kernel cannot tell. Returns the pieces and the prefix, or
/// `None` when the region is not of this form or nothing would be narrowed.
pub(super) fn pieces(body: &[Stmt], scope: &[Var]) -> Option<(Vec<Piece>, Vec<Stmt>)> {
    let (last, prefix) = body.split_last()?;
    let pure_let = |s: &Stmt| pure_let(s, scope);
    if !prefix.iter().all(pure_let) {
        return None;
    }
    let Stmt::Expr(Expr::If(test), _) = last else {
        return None;
    };
    if test.else_branch.is_some() || pure_deps(&test.cond, scope).is_none() || may_panic(&test.cond)
    {
        return None;
    }
    let cond = &test.cond;
    let (x, y) = thread_ranges(cond, scope);
    // The `if`'s statements, with `unsafe { .. }` blocks that bind nothing opened.
    let mut inner = Vec::new();
    for s in &test.then_branch.stmts {
        match s {
            Stmt::Expr(Expr::Unsafe(u), _)
                if !u
                    .block
                    .stmts
                    .iter()
                    .any(|s| matches!(s, Stmt::Local(_) | Stmt::Item(_))) =>
            {
                inner.extend(u.block.stmts.iter().cloned());
            }
            s => inner.push(s.clone()),
        }
    }
    let mut pieces: Vec<Piece> = Vec::new();
    let mut lets = BlockLets::default();
    let mut run: Vec<TokenStream2> = Vec::new();
    let mut narrowed = x.0.is_some() || y.0.is_some();
    for s in &inner {
        match s {
            Stmt::Local(l) => {
                // A `let` of the block is computed again in every later piece: it must read
                // no memory, and only the prefix's locals (an earlier `let` of the block is
                // not in `scope`, so it does not count as pure).
                if !pure_let(s) {
                    return None;
                }
                lets.written.push(l.to_token_stream());
                let edge = simple_let(l).and_then(|(name, _, init)| {
                    Some((
                        Ident::new(&name, Span::call_site()),
                        never_true(init, scope)?,
                    ))
                });
                match edge {
                    Some((name, test)) => {
                        lets.inner.push(quote! { let #name: bool = false; });
                        lets.tests.push(test);
                        narrowed = true;
                    }
                    None => lets.inner.push(l.to_token_stream()),
                }
            }
            Stmt::Item(_) | Stmt::Macro(_) => run.push(s.to_token_stream()),
            Stmt::Expr(Expr::If(guard), _) if guard.else_branch.is_none() => {
                let (gx, gy) = thread_ranges(&guard.cond, scope);
                if gx.0.is_none() && gy.0.is_none()
                    || pure_deps(&guard.cond, scope).is_none()
                    || may_panic(&guard.cond)
                {
                    run.push(stmt_tokens(s));
                    continue;
                }
                if !run.is_empty() {
                    pieces.push(lets.piece(cond, &run, x.clone(), y.clone()));
                    run.clear();
                }
                narrowed = true;
                pieces.push(lets.piece(
                    cond,
                    &[stmt_tokens(s)],
                    x.clone().and(gx),
                    y.clone().and(gy),
                ));
            }
            s => run.push(stmt_tokens(s)),
        }
    }
    if !run.is_empty() {
        pieces.push(lets.piece(cond, &run, x.clone(), y.clone()));
    }
    narrowed.then_some((pieces, prefix.to_vec()))
}

/// The `x` and `y` thread indices that can pass `cond`: from its `&&`-joined tests
/// `t < bound` and `t == value`, `t` the thread's index along one axis plus a value the
/// whole block shares (`thread_idx_x()`, maybe cast to a wider unsigned type, or
/// `block_idx_x() as usize * TILE + tx` through the locals that compute it). The runtime
/// computes each range, and gives every index when the block's offset could wrap; the test
/// stays in the loop's body, so a range only ever leaves out threads the test would stop.
pub(super) fn thread_ranges(cond: &Expr, scope: &[Var]) -> (ThreadSpan, ThreadSpan) {
    match cond {
        Expr::Paren(p) => thread_ranges(&p.expr, scope),
        Expr::Group(g) => thread_ranges(&g.expr, scope),
        Expr::Binary(b) if matches!(b.op, syn::BinOp::And(_)) => {
            let (lx, ly) = thread_ranges(&b.left, scope);
            let (rx, ry) = thread_ranges(&b.right, scope);
            (lx.and(rx), ly.and(ry))
        }
        Expr::Path(_) => match recomputed(cond, scope) {
            Some(init) => thread_ranges(&init, scope),
            None => Default::default(),
        },
        Expr::Binary(b) if matches!(b.op, syn::BinOp::Lt(_) | syn::BinOp::Eq(_)) => {
            let right = &b.right;
            let Some((axis, ty, base)) = axis_offset(&b.left, scope) else {
                return Default::default();
            };
            if !is_uniform(right, scope) {
                return Default::default();
            }
            let base = base.unwrap_or_else(|| quote!(0));
            let range = match b.op {
                syn::BinOp::Lt(_) => {
                    quote! { ::offload_rt::__private::thread_range_lt::<#ty>(#base, #right) }
                }
                _ => quote! { ::offload_rt::__private::thread_range_eq::<#ty>(#base, #right) },
            };
            let range = ThreadSpan(Some(range));
            match axis {
                0 => (range, ThreadSpan::default()),
                _ => (ThreadSpan::default(), range),
            }
        }
        _ => Default::default(),
    }
}

/// `expr` as the thread's index along `x` (0) or `y` (1) plus a uniform offset: the axis,
/// the sum's type (`u32` for the index itself, or the unsigned type it is cast to) and the
/// offset, if any.
pub(super) fn axis_offset(
    expr: &Expr,
    scope: &[Var],
) -> Option<(u8, TokenStream2, Option<TokenStream2>)> {
    match expr {
        Expr::Paren(p) => axis_offset(&p.expr, scope),
        Expr::Group(g) => axis_offset(&g.expr, scope),
        Expr::Path(_) => axis_offset(&recomputed(expr, scope)?, scope),
        Expr::Cast(c) => {
            let syn::Type::Path(t) = &*c.ty else {
                return None;
            };
            let ty = t.path.get_ident()?;
            if !["usize", "u64", "u32"].iter().any(|u| ty == u) {
                return None;
            }
            let (axis, _, None) = axis_offset(&c.expr, scope)? else {
                return None;
            };
            Some((axis, ty.to_token_stream(), None))
        }
        Expr::Call(c) if c.args.is_empty() => {
            let Expr::Path(p) = &*c.func else {
                return None;
            };
            let name = p.path.segments.last()?.ident.to_string();
            let axis = match name.as_str() {
                "thread_idx_x" => 0,
                "thread_idx_y" => 1,
                _ => return None,
            };
            Some((axis, quote!(u32), None))
        }
        Expr::Binary(b) if matches!(b.op, syn::BinOp::Add(_)) => {
            let (index, offset) = match axis_offset(&b.right, scope) {
                Some(found) => (found, &b.left),
                None => (axis_offset(&b.left, scope)?, &b.right),
            };
            if !is_uniform(offset, scope) {
                return None;
            }
            let (axis, ty, base) = index;
            let base = match base {
                Some(base) => quote! { (#base) + (#offset) },
                None => quote! { #offset },
            };
            Some((axis, ty, Some(base)))
        }
        _ => None,
    }
}

/// `tokens` of a region with each unqualified call of an index function, `thread_idx_x()`,
/// made a read of the region's `__offload_at`: values the region loop's optimizer sees as
/// the loop counter and loop invariants, where the thread-local index state is memory that
/// every store through a kernel pointer may have changed. Qualified calls
/// (`kernel::thread_idx_x()`) and calls inside the functions a region calls keep reading the
/// thread-local state, which the region loop keeps up to date too.
pub(super) fn read_indices_from_region(tokens: TokenStream2) -> TokenStream2 {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out = TokenStream2::new();
    for (i, tree) in trees.iter().enumerate() {
        match tree {
            TokenTree::Ident(name)
                if in_region_thread(&name.to_string())
                    && !matches!(i.checked_sub(1).map(|p| &trees[p]),
                        Some(TokenTree::Punct(p)) if matches!(p.as_char(), '.' | ':'))
                    && matches!(trees.get(i + 1), Some(TokenTree::Group(g))
                        if g.delimiter() == proc_macro2::Delimiter::Parenthesis
                            && g.stream().is_empty()) =>
            {
                out.extend(quote! { __offload_at. });
                out.extend([tree.clone()]);
            }
            TokenTree::Group(g) => {
                let mut inner =
                    proc_macro2::Group::new(g.delimiter(), read_indices_from_region(g.stream()));
                inner.set_span(g.span());
                out.extend([TokenTree::Group(inner)]);
            }
            tree => out.extend([tree.clone()]),
        }
    }
    out
}
