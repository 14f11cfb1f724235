//! The analysis the lowering asks of a body: which values are the same for the whole block
//! (uniform) or pure functions of the thread's indices, which locals are assigned where
//! (block mutables, outer locals changed), and the loops the block runs together (grid- and
//! block-stride loops, uniform loops around warp operations).

use std::collections::{HashMap, HashSet};

use proc_macro2::TokenStream as TokenStream2;
use quote::{ToTokens, quote};
use syn::visit::Visit;
use syn::{Block, Expr, Pat, Stmt};

use super::check::leaving_jump;
use super::scope::{BlockWrite, Kind, Recompute, Var};
use super::syntax::{
    BARRIER, BLOCK_FNS, LocalExt, PURE_METHODS, THREAD_FNS, idents_of, is_compound_assignment,
    mentions, pattern_names, simple_let,
};
use super::warp;

/// Whether `tokens` hold a point the region form splits at: a barrier, or a warp operation's
/// exchange or split (see [`warp`]).
pub(super) fn splits(tokens: &TokenStream2) -> bool {
    mentions(tokens, BARRIER) || warp::has_split(tokens)
}

/// Whether `s` is `let name = value;`, `value` reading no memory (a function of the indices
/// and uniform values) and unable to panic: such a `let` may be computed for fewer threads
/// than it was written for, or not at all, and no panic a thread would raise is lost.
pub(super) fn pure_let(s: &Stmt, scope: &[Var]) -> bool {
    match s {
        Stmt::Local(l) => simple_let(l).is_some_and(|(_, _, init)| {
            !l.pat_is_mut() && pure_deps(init, scope).is_some() && !may_panic(init)
        }),
        _ => false,
    }
}

/// Whether `expr` divides (by zero, perhaps) or calls a method of numbers that can panic.
/// Overflow checks are left out: the CPU image is built in release, where they are off
/// unless a profile asks for them.
pub(super) fn may_panic(expr: &Expr) -> bool {
    struct Panics(bool);
    impl<'ast> Visit<'ast> for Panics {
        fn visit_bin_op(&mut self, op: &'ast syn::BinOp) {
            use syn::BinOp::*;
            self.0 |= matches!(op, Div(_) | Rem(_) | DivAssign(_) | RemAssign(_));
        }
        fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
            self.0 |= ["div_ceil", "div_euclid", "rem_euclid", "clamp", "pow"]
                .iter()
                .any(|f| m.method == f);
            syn::visit::visit_expr_method_call(self, m);
        }
    }
    let mut panics = Panics(false);
    panics.visit_expr(expr);
    panics.0
}

/// The value of a local the region recomputes, as an expression.
pub(super) fn recomputed(expr: &Expr, scope: &[Var]) -> Option<Expr> {
    let Expr::Path(p) = expr else {
        return None;
    };
    let name = p.path.get_ident()?.to_string();
    match &scope.iter().rev().find(|v| v.name == name)?.kind {
        Kind::Lane {
            recompute: Some(r), ..
        } if recomputable(r, scope) => syn::parse2::<Expr>(r.init.clone()).ok(),
        _ => None,
    }
}

/// The local a statement `name = value;` or `name op= value;` assigns.
pub(super) fn assigned_local(stmt: &Stmt) -> Option<String> {
    let Stmt::Expr(e, Some(_)) = stmt else {
        return None;
    };
    let lhs = match e {
        Expr::Assign(a) => &*a.left,
        Expr::Binary(b) if assigns(e) => &*b.left,
        _ => return None,
    };
    match lhs {
        Expr::Path(p) => p.path.get_ident().map(ToString::to_string),
        _ => None,
    }
}

/// The value of such an assignment.
pub(super) fn assigned_value(stmt: &Stmt) -> Option<&Expr> {
    match stmt {
        Stmt::Expr(Expr::Assign(a), Some(_)) => Some(&a.right),
        Stmt::Expr(e @ Expr::Binary(b), Some(_)) if assigns(e) => Some(&b.right),
        _ => None,
    }
}

/// The mutable locals of a kernel that every thread of a block changes alike: declared once
/// (`let mut name = ...;` as a statement of a list the region form lowers), and assigned only
/// by statements `name = value;` / `name op= value;` of such lists, never borrowed, never
/// assigned anywhere else. Whether their values are uniform is checked where they are used.
pub(super) fn block_mutables(stmts: &[Stmt]) -> HashMap<String, Vec<BlockWrite>> {
    /// Where a declaration or assignment is: the branches of the `if`s around warp operations
    /// (whose conditions may differ between threads) it is in, each by a number.
    type Guards = Vec<usize>;
    /// Declarations and assignments that are statements of lowered lists; `loop_vars` are
    /// the variables of the lowered `for` loops around them.
    fn walk(
        stmts: &[Stmt],
        decls: &mut Vec<(String, Guards)>,
        writes: &mut Vec<(String, BlockWrite, Guards)>,
        loop_vars: &mut Vec<String>,
        guards: &mut Guards,
        branches: &mut usize,
    ) {
        for stmt in stmts {
            if let Stmt::Local(l) = stmt
                && l.pat_is_mut()
                && let Some((name, _, _)) = simple_let(l)
            {
                decls.push((name, guards.clone()));
            }
            if let (Some(name), Some(value)) = (assigned_local(stmt), assigned_value(stmt)) {
                let value = value.clone();
                let loop_vars = loop_vars.clone();
                writes.push((name, BlockWrite { value, loop_vars }, guards.clone()));
            }
            if !splits(&stmt.to_token_stream()) && leaving_jump(stmt).is_none() {
                continue;
            }
            // Each block with whether it is a branch of an `if` around warp operations only.
            let mut blocks: Vec<(&Block, bool)> = Vec::new();
            let mut expr = match stmt {
                Stmt::Expr(e, _) => Some(e),
                _ => None,
            };
            let mark = loop_vars.len();
            while let Some(e) = expr.take() {
                match e {
                    Expr::ForLoop(f) => {
                        pattern_names(&f.pat, loop_vars);
                        blocks.push((&f.body, false));
                    }
                    Expr::While(w) => blocks.push((&w.body, false)),
                    Expr::Loop(l) => blocks.push((&l.body, false)),
                    Expr::Block(b) => blocks.push((&b.block, false)),
                    Expr::Unsafe(b) => blocks.push((&b.block, false)),
                    Expr::If(i) => {
                        let guarded = !mentions(&e.to_token_stream(), BARRIER);
                        blocks.push((&i.then_branch, guarded));
                        match i.else_branch.as_ref().map(|(_, e)| &**e) {
                            Some(Expr::Block(b)) => blocks.push((&b.block, guarded)),
                            other => expr = other,
                        }
                    }
                    _ => {}
                }
            }
            for (b, guarded) in blocks {
                if guarded {
                    *branches += 1;
                    guards.push(*branches);
                }
                walk(&b.stmts, decls, writes, loop_vars, guards, branches);
                if guarded {
                    guards.pop();
                }
            }
            loop_vars.truncate(mark);
        }
    }
    /// Every declaration, assignment and borrow of a name anywhere in the body.
    #[derive(Default)]
    struct Uses {
        decls: Vec<String>,
        writes: Vec<String>,
        escaped: HashSet<String>,
    }
    impl<'ast> Visit<'ast> for Uses {
        fn visit_pat_ident(&mut self, i: &'ast syn::PatIdent) {
            self.decls.push(i.ident.to_string());
            syn::visit::visit_pat_ident(self, i);
        }
        fn visit_expr(&mut self, e: &'ast Expr) {
            let target = match e {
                Expr::Assign(a) => Some(&*a.left),
                Expr::Binary(b) if assigns(e) => Some(&*b.left),
                Expr::Reference(r) if r.mutability.is_some() => {
                    if let Expr::Path(p) = &*r.expr
                        && let Some(i) = p.path.get_ident()
                    {
                        self.escaped.insert(i.to_string());
                    }
                    None
                }
                Expr::MethodCall(m) => {
                    if let Expr::Path(p) = &*m.receiver
                        && let Some(i) = p.path.get_ident()
                        && !PURE_METHODS.iter().any(|p| m.method == p)
                    {
                        self.escaped.insert(i.to_string());
                    }
                    None
                }
                Expr::Closure(c) => {
                    let mut names = HashSet::new();
                    idents_of(&c.body.to_token_stream(), &mut names);
                    self.escaped.extend(names);
                    None
                }
                _ => None,
            };
            if let Some(Expr::Path(p)) = target
                && let Some(i) = p.path.get_ident()
            {
                self.writes.push(i.to_string());
            }
            syn::visit::visit_expr(self, e);
        }
        fn visit_macro(&mut self, m: &'ast syn::Macro) {
            idents_of(&m.tokens, &mut self.escaped);
        }
    }
    let (mut decls, mut writes) = (Vec::new(), Vec::new());
    walk(
        stmts,
        &mut decls,
        &mut writes,
        &mut Vec::new(),
        &mut Vec::new(),
        &mut 0,
    );
    let mut uses = Uses::default();
    for stmt in stmts {
        uses.visit_stmt(stmt);
    }
    let count = |list: &[String], name: &str| list.iter().filter(|n| *n == name).count();
    decls
        .iter()
        .filter(|(name, guards)| {
            count(&uses.decls, name) == 1
                && decls.iter().filter(|(n, _)| n == name).count() == 1
                && count(&uses.writes, name) == writes.iter().filter(|(n, ..)| n == name).count()
                && !uses.escaped.contains(name)
                // Every write runs for every thread that has the local: a write in a branch
                // of an `if` around warp operations but the declaration's may not.
                && writes
                    .iter()
                    .filter(|(n, ..)| n == name)
                    .all(|(.., g)| g == guards)
        })
        .map(|(name, _)| {
            let values = writes
                .iter()
                .filter(|(n, ..)| n == name)
                .map(|(_, w, _)| w.clone());
            (name.clone(), values.collect())
        })
        .collect()
}

/// `let (a, b) = (x, y);` as `let a = x; let b = y;` where neither value names `a` or `b`, so
/// each local can be uniform or recomputed on its own.
pub(super) fn split_tuple_lets(stmts: &[Stmt]) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(stmts.len());
    for stmt in stmts {
        if let Stmt::Local(l) = stmt
            && let Pat::Tuple(pats) = &l.pat
            && let Some(init) = &l.init
            && init.diverge.is_none()
            && let Expr::Tuple(values) = &*init.expr
            && pats.elems.len() == values.elems.len()
            && pats
                .elems
                .iter()
                .all(|p| matches!(p, Pat::Ident(i) if i.by_ref.is_none() && i.subpat.is_none()))
        {
            let names: Vec<String> = pats
                .elems
                .iter()
                .filter_map(|p| match p {
                    Pat::Ident(i) => Some(i.ident.to_string()),
                    _ => None,
                })
                .collect();
            // One `let` after another reads the names the earlier ones bind: only a value
            // that names an earlier element's binding (`let (a, b) = (b, a)`) stops the split.
            if !values
                .elems
                .iter()
                .enumerate()
                .any(|(j, v)| names[..j].iter().any(|n| mentions(&v.to_token_stream(), n)))
            {
                for (pat, value) in pats.elems.iter().zip(&values.elems) {
                    out.push(syn::parse_quote!(let #pat = #value;));
                }
                continue;
            }
        }
        out.push(stmt.clone());
    }
    out
}

/// A grid- or block-stride loop statement (`for i in grid_stride_x(n) { .. }`, `n` the same
/// for the whole block, no `break` or `continue` out of its body) as a block-wide loop over
/// its iterations, each a region: `for k in 0..trips { let i = at(k); if i < n { .. } }`.
/// Each thread runs the same indices in the same order as before, the block's threads
/// iteration by iteration: neighbouring threads' elements one after another (the order a
/// GPU's warps read them in), where a loop per thread walks memory with a stride of the grid.
pub(super) fn stride_loop(stmt: &Stmt, scope: &[Var]) -> Option<Stmt> {
    let Stmt::Expr(Expr::ForLoop(f), _) = stmt else {
        return None;
    };
    let Pat::Ident(pat) = &*f.pat else {
        return None;
    };
    let Expr::Call(call) = &*f.expr else {
        return None;
    };
    let Expr::Path(func) = &*call.func else {
        return None;
    };
    let kind = func.path.segments.last()?.ident.to_string();
    let (trips, at) = match kind.as_str() {
        "grid_stride_x" => (quote!(grid_stride_trips), quote!(grid_stride_at)),
        "block_stride_x" => (quote!(block_stride_trips), quote!(block_stride_at)),
        _ => return None,
    };
    let [n] = call.args.iter().collect::<Vec<_>>()[..] else {
        return None;
    };
    let jumps = f.body.stmts.iter().any(|s| leaving_jump(s).is_some());
    let warp_ops = warp::has_split(&f.body.to_token_stream());
    if f.label.is_some() || pat.by_ref.is_some() || pat.subpat.is_some() || jumps || warp_ops {
        return None;
    }
    if !is_uniform(n, scope) {
        return None;
    }
    let (i, body) = (&pat.ident, &f.body);
    let m = pat.mutability;
    Some(syn::parse_quote! {
        for __offload_k in 0..::offload_rt::__private::#trips(#n) {
            let #m #i: usize = __offload_at.#at(__offload_k);
            if #i < #n #body
        }
    })
}

/// Refuses a loop around warp operations and no barrier (`stmt`) whose range or condition
/// `head` may differ between threads: the block runs such a loop once, with the first live
/// thread's range, where a barrier's loop has the same range in every thread by the rule that
/// every thread reaches the same barriers, a warp operation's only in the lanes of a warp.
pub(super) fn warp_loop_uniform(stmt: &Stmt, head: &Expr, scope: &[Var]) -> Result<(), String> {
    let tokens = stmt.to_token_stream();
    if !warp::has_split(&tokens) || mentions(&tokens, BARRIER) || is_uniform(head, scope) {
        return Ok(());
    }
    Err(
        "it uses warp operations in a loop whose range or condition may differ between threads"
            .to_owned(),
    )
}

/// Whether every condition of an `if` / `else if` chain is the same for the whole block
/// (and none is an `if let`).
pub(super) fn if_conditions_uniform(expr: &Expr, scope: &[Var]) -> bool {
    match expr {
        Expr::If(i) => {
            !matches!(&*i.cond, Expr::Let(_))
                && is_uniform(&i.cond, scope)
                && i.else_branch
                    .as_ref()
                    .is_none_or(|(_, e)| if_conditions_uniform(e, scope))
        }
        _ => true,
    }
}

/// A `for` loop of a region over a constant range (literals and constants: a thread's fixed
/// share of a tile), which neither jumps nor changes a local declared outside it (per-thread
/// state that would pass from iteration to iteration through lane storage): it runs
/// iteration by iteration for the block, as a loop around its body's regions, so that the
/// loop over the threads is the inner one, which the optimizer vectorizes (a tiled
/// transpose's `for i in 0..TILE / ROWS` copies). Each thread runs its iterations in order;
/// the block's threads moving through them together is an order in which a GPU may run them
/// too. A loop over a range known only at run time keeps each thread's iterations together:
/// a long one walks memory the thread owns, which the block's order would stride across.
pub(super) fn block_loop(stmt: &Stmt, scope: &[Var]) -> bool {
    let Stmt::Expr(Expr::ForLoop(f), _) = stmt else {
        return false;
    };
    let body = f.body.to_token_stream();
    f.label.is_none()
        && matches!(&*f.pat, Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none())
        && is_uniform(&f.expr, scope)
        && is_constant(&f.expr)
        && !["break", "continue", "return"]
            .iter()
            .any(|jump| mentions(&body, jump))
        && !changes_outer_local(&f.body, scope)
}

/// Whether `name` is a constant's by Rust's naming convention (`TILE`, `N2`).
pub(super) fn is_constant_name(name: &str) -> bool {
    name.chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// Whether `expr` is made of literals and constants (by Rust's naming convention) only.
pub(super) fn is_constant(expr: &Expr) -> bool {
    match expr {
        Expr::Lit(_) => true,
        Expr::Paren(p) => is_constant(&p.expr),
        Expr::Group(g) => is_constant(&g.expr),
        Expr::Cast(c) => is_constant(&c.expr),
        Expr::Unary(u) => is_constant(&u.expr),
        Expr::Binary(b) => is_constant(&b.left) && is_constant(&b.right),
        Expr::Range(r) => r.start.iter().chain(&r.end).all(|e| is_constant(e)),
        Expr::Path(p) => p
            .path
            .segments
            .last()
            .is_some_and(|s| is_constant_name(&s.ident.to_string())),
        _ => false,
    }
}

/// Whether `body` assigns, borrows mutably or calls a method on a local of `scope` (one
/// declared outside it), or on a part of one.
pub(super) fn changes_outer_local(body: &Block, scope: &[Var]) -> bool {
    struct Changes<'a> {
        scope: &'a [Var],
        found: bool,
    }
    impl Changes<'_> {
        fn outer(&mut self, place: &Expr) {
            let mut e = place;
            loop {
                e = match e {
                    Expr::Field(f) => &f.base,
                    Expr::Index(i) => &i.expr,
                    Expr::Paren(p) => &p.expr,
                    Expr::Group(g) => &g.expr,
                    _ => break,
                };
            }
            if let Expr::Path(p) = e
                && let Some(name) = p.path.get_ident()
                && self.scope.iter().any(|v| name == &v.name)
            {
                self.found = true;
            }
        }
    }
    impl<'ast> Visit<'ast> for Changes<'_> {
        fn visit_expr_assign(&mut self, a: &'ast syn::ExprAssign) {
            self.outer(&a.left);
            syn::visit::visit_expr_assign(self, a);
        }
        fn visit_expr_binary(&mut self, b: &'ast syn::ExprBinary) {
            if assigns(&Expr::Binary(b.clone())) {
                self.outer(&b.left);
            }
            syn::visit::visit_expr_binary(self, b);
        }
        fn visit_expr_reference(&mut self, r: &'ast syn::ExprReference) {
            if r.mutability.is_some() {
                self.outer(&r.expr);
            }
            syn::visit::visit_expr_reference(self, r);
        }
        fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
            self.outer(&m.receiver);
            syn::visit::visit_expr_method_call(self, m);
        }
    }
    let mut changes = Changes {
        scope,
        found: false,
    };
    changes.visit_block(body);
    changes.found
}

/// The names `stmts` may change the value of: assigned (whole, a field or an element, through
/// `*` too), borrowed `&mut`, the receiver of a method that may take `&mut self`, or named in
/// a macro or a closure. A mutable local of an earlier region that its next region does not
/// change is not written back to its lane.
pub(super) fn changed_names(stmts: &[Stmt]) -> HashSet<String> {
    /// The local at the base of a place expression (`x`, `x.f`, `x[i]`, `*x`).
    fn base(mut place: &Expr) -> Option<String> {
        loop {
            place = match place {
                Expr::Field(f) => &f.base,
                Expr::Index(i) => &i.expr,
                Expr::Paren(p) => &p.expr,
                Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => &u.expr,
                Expr::Path(p) => return p.path.get_ident().map(ToString::to_string),
                _ => return None,
            };
        }
    }
    #[derive(Default)]
    struct Changed(HashSet<String>);
    impl<'ast> Visit<'ast> for Changed {
        fn visit_expr(&mut self, e: &'ast Expr) {
            let place = match e {
                Expr::Assign(a) => Some(&*a.left),
                Expr::Binary(b) if is_compound_assignment(&b.op) => Some(&*b.left),
                Expr::Reference(r) if r.mutability.is_some() => Some(&*r.expr),
                Expr::RawAddr(r) => Some(&*r.expr),
                Expr::MethodCall(m) if !PURE_METHODS.iter().any(|p| m.method == p) => {
                    Some(&*m.receiver)
                }
                Expr::Closure(c) => {
                    idents_of(&c.body.to_token_stream(), &mut self.0);
                    None
                }
                _ => None,
            };
            if let Some(name) = place.and_then(base) {
                self.0.insert(name);
            }
            syn::visit::visit_expr(self, e);
        }
        fn visit_macro(&mut self, m: &'ast syn::Macro) {
            idents_of(&m.tokens, &mut self.0);
        }
    }
    let mut changed = Changed::default();
    for stmt in stmts {
        changed.visit_stmt(stmt);
    }
    changed.0
}

/// Whether `expr` assigns anything (the uniform parts are evaluated for one thread only).
pub(super) fn assigns(expr: &Expr) -> bool {
    struct Assigns(bool);
    impl<'ast> Visit<'ast> for Assigns {
        fn visit_expr_assign(&mut self, _: &'ast syn::ExprAssign) {
            self.0 = true;
        }
        fn visit_expr_binary(&mut self, b: &'ast syn::ExprBinary) {
            if is_compound_assignment(&b.op) {
                self.0 = true;
            }
            syn::visit::visit_expr_binary(self, b);
        }
    }
    let mut a = Assigns(false);
    a.visit_expr(expr);
    a.0
}

/// Whether a recomputation reads the same bindings where it is used as where it was made,
/// each of them a uniform value or recomputable itself.
pub(super) fn recomputable(r: &Recompute, scope: &[Var]) -> bool {
    r.deps.iter().all(|(name, id)| {
        scope
            .iter()
            .rev()
            .find(|v| v.name == *name)
            .is_some_and(|v| {
                v.id == *id
                    && match &v.kind {
                        Kind::Uniform => true,
                        Kind::Lane { recompute, .. } => {
                            recompute.as_ref().is_some_and(|r| recomputable(r, scope))
                        }
                    }
            })
    })
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Purity {
    /// The same value for every thread of the block.
    Uniform,
    /// A function of the indices and uniform values, reading no memory.
    Pure,
}

pub(super) fn is_uniform(expr: &Expr, scope: &[Var]) -> bool {
    let mut deps = Vec::new();
    classify(expr, scope, Purity::Uniform, &mut deps)
}

pub(super) fn pure_deps(expr: &Expr, scope: &[Var]) -> Option<Vec<(String, usize)>> {
    let mut deps = Vec::new();
    classify(expr, scope, Purity::Pure, &mut deps).then_some(deps)
}

/// Whether `expr` has purity `want`, collecting the bindings it reads.
pub(super) fn classify(
    expr: &Expr,
    scope: &[Var],
    want: Purity,
    deps: &mut Vec<(String, usize)>,
) -> bool {
    let go = |e: &Expr, deps: &mut Vec<(String, usize)>| classify(e, scope, want, deps);
    match expr {
        Expr::Lit(_) => true,
        Expr::Paren(p) => go(&p.expr, deps),
        Expr::Group(g) => go(&g.expr, deps),
        Expr::Cast(c) => go(&c.expr, deps),
        Expr::Unary(u) => !matches!(u.op, syn::UnOp::Deref(_)) && go(&u.expr, deps),
        Expr::Binary(b) => !assigns(expr) && go(&b.left, deps) && go(&b.right, deps),
        Expr::Field(f) => go(&f.base, deps),
        Expr::Tuple(t) => t.elems.iter().all(|e| go(e, deps)),
        Expr::Array(a) => a.elems.iter().all(|e| go(e, deps)),
        Expr::Range(r) => r.start.iter().chain(&r.end).all(|e| go(e, deps)),
        Expr::MethodCall(m) => {
            PURE_METHODS.iter().any(|p| m.method == p)
                && go(&m.receiver, deps)
                && m.args.iter().all(|a| go(a, deps))
        }
        Expr::Call(c) => {
            let Expr::Path(p) = &*c.func else {
                return false;
            };
            let Some(last) = p.path.segments.last() else {
                return false;
            };
            let name = last.ident.to_string();
            c.args.is_empty()
                && (BLOCK_FNS.contains(&name.as_str())
                    || (want == Purity::Pure && THREAD_FNS.contains(&name.as_str())))
        }
        Expr::Macro(m) => {
            want == Purity::Uniform
                && m.mac
                    .path
                    .segments
                    .last()
                    .is_some_and(|s| s.ident == "shared_array")
        }
        Expr::Path(p) => {
            if p.qself.is_some() || p.path.segments.len() > 1 {
                return true;
            }
            let Some(ident) = p.path.get_ident() else {
                return false;
            };
            let name = ident.to_string();
            match scope.iter().rev().find(|v| v.name == name) {
                Some(v) => {
                    let ok = match &v.kind {
                        Kind::Uniform => true,
                        Kind::Lane {
                            recompute: Some(r), ..
                        } => want == Purity::Pure && recomputable(r, scope),
                        Kind::Lane { .. } => false,
                    };
                    if ok {
                        deps.push((name, v.id));
                    }
                    ok
                }
                // A constant (by Rust's naming convention); anything else may be a static.
                None => is_constant_name(&name),
            }
        }
        _ => false,
    }
}

/// Whether `init` is the block's shared memory: `shared_array!(..)` or `dynamic_shared()`,
/// maybe cast.
pub(super) fn is_shared_memory(init: &Expr) -> bool {
    match init {
        Expr::Paren(p) => is_shared_memory(&p.expr),
        Expr::Group(g) => is_shared_memory(&g.expr),
        Expr::Cast(c) => is_shared_memory(&c.expr),
        Expr::Macro(m) => m
            .mac
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "shared_array"),
        Expr::Call(c) => {
            c.args.is_empty()
                && matches!(&*c.func, Expr::Path(p)
                    if p.path.segments.last().is_some_and(|s| s.ident == "dynamic_shared"))
        }
        _ => false,
    }
}
