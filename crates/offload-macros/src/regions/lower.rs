//! The lowering: a body split at its barriers into regions, each emitted as a loop over the
//! block's threads, with the lane storage of the locals that cross a barrier. Its entry is
//! [`Lowering::run`], which gives the [`Plan`].

use std::collections::{HashMap, HashSet};

use proc_macro2::{Ident, Span, TokenStream as TokenStream2};
use quote::{ToTokens, format_ident, quote};
use syn::visit::Visit;
use syn::visit_mut::VisitMut;
use syn::{Block, Expr, Pat, Stmt};

use super::analysis::{
    assigned_local, assigned_value, assigns, block_loop, block_mutables, changed_names,
    if_conditions_uniform, is_shared_memory, is_uniform, may_panic, pure_deps, pure_let,
    recomputable, split_tuple_lets, splits, stride_loop, warp_loop_uniform,
};
use super::check::{check_region_stmt, leaving_jump};
use super::pieces::{pieces, read_indices_from_region};
use super::rewrite::{MarkBarriers, ReturnToBreak, SharedAtomics};
use super::scope::{BlockWrite, Kind, Recompute, Var};
use super::syntax::{
    BARRIER, BoundNames, LocalExt, arm_statements, idents_of, is_barrier_call, loop_tokens,
    mentions, pattern_names, read_flag, rest_tokens, simple_let, stmt_tokens,
};
use super::warp;

/// What the CPU device does with a kernel's barriers.
pub(crate) enum Plan {
    /// No barrier or warp operation in the body.
    NoBarriers,
    /// The region form: `blocks` runs one block (the code inside the block loop), `lanes`
    /// declares the lane storage, `items` are the body's items, hoisted; `counted` is the body
    /// with its barriers marked as the ones the region form splits at.
    Regions {
        lanes: TokenStream2,
        items: TokenStream2,
        block: TokenStream2,
        counted: Block,
    },
    /// The coroutine path, and why.
    Coroutines(String),
}

pub(super) struct Lowering {
    pub(super) lanes: Vec<Ident>,
    /// The lane slots some region reads: a slot no region reads (its local recomputed
    /// wherever it is used) is neither given storage nor written.
    pub(super) read: HashSet<Ident>,
    pub(super) items: Vec<Stmt>,
    pub(super) next_id: usize,
    /// Lane storage of "this thread has not returned", when the body returns early.
    pub(super) alive: Option<Ident>,
    /// Mutable locals assigned only by statements the whole block runs (see
    /// [`block_mutables`]): one copy per block when their first value is uniform.
    pub(super) block_mutables: HashMap<String, Vec<BlockWrite>>,
    /// The bindings (by id) of immutable uniform locals that hold the block's shared memory
    /// (`shared_array!`, `dynamic_shared`): atomics through them are plain accesses.
    pub(super) shared: HashSet<usize>,
    /// The exchange storage of the body's warp operations.
    pub(super) exchanges: warp::Exchanges,
    /// Lane storage of "this thread runs this branch", one per branch of an `if` around warp
    /// operations whose condition may differ between threads (see [`Lowering::guarded_if`]).
    pub(super) guards: Vec<Ident>,
    /// The locals holding the first rank and the rank past the last that the innermost such
    /// branch lets in (its regions run over those threads only); `None` outside them.
    pub(super) span: Option<(Ident, Ident)>,
}

impl Lowering {
    pub(super) fn new(body: &Block) -> Lowering {
        let alive =
            mentions(&body.to_token_stream(), "return").then(|| format_ident!("__offload_alive"));
        Lowering {
            lanes: Vec::new(),
            read: HashSet::new(),
            items: Vec::new(),
            next_id: 0,
            alive,
            block_mutables: HashMap::new(),
            shared: HashSet::new(),
            exchanges: warp::Exchanges::default(),
            guards: Vec::new(),
            span: None,
        }
    }

    pub(super) fn run(
        mut self,
        body: &Block,
        original: &Block,
        params: &[(Ident, bool)],
    ) -> Result<Plan, String> {
        let mut scope = Vec::new();
        let mut stmts = Vec::new();
        for (name, mutable) in params {
            let id = self.id();
            scope.push(Var {
                name: name.to_string(),
                id,
                kind: Kind::Uniform,
            });
            if *mutable {
                // A `mut` parameter is a per-thread copy.
                stmts.push(syn::parse_quote!(let mut #name = #name;));
            }
        }
        stmts.extend(body.stmts.iter().cloned());
        self.block_mutables = block_mutables(&stmts);
        let block = self.lower_list(&stmts, &mut scope, &TokenStream2::new())?;
        let lanes = self.lanes.iter().map(|slot| {
            let flag = read_flag(slot);
            if self.read.contains(slot) {
                quote! {
                    let #slot = ::offload_rt::__private::lanes(&mut __offload_cursor);
                    let #flag = true;
                }
            } else {
                quote! {
                    let #slot = ::core::ptr::null_mut();
                    let #flag = false;
                }
            }
        });
        let alive = self.alive.iter().chain(&self.guards).map(|a| {
            quote! { let #a: *mut bool = ::offload_rt::__private::lanes(&mut __offload_cursor); }
        });
        let exchanges = self.exchanges.storage.iter().map(|e| {
            let (words, ty) = (&e.words, e.ty.iter());
            let args = e.args.iter();
            quote! {
                let #words #(: *mut #ty)* = ::offload_rt::__private::lanes(&mut __offload_cursor);
                #(let #args: *mut u32 = ::offload_rt::__private::lanes(&mut __offload_cursor);)*
            }
        });
        let alive_init = self.alive.as_ref().map(|a| {
            quote! {
                ::offload_rt::__private::for_each_thread(|__offload_t, _| unsafe {
                    ::offload_rt::__private::lane_write(#a, __offload_t, true)
                });
            }
        });
        let items = &self.items;
        let mut counted = original.clone();
        MarkBarriers.visit_block_mut(&mut counted);
        Ok(Plan::Regions {
            lanes: quote! { #(#lanes)* #(#alive)* #(#exchanges)* },
            items: quote! { #(#items)* },
            block: quote! { #alive_init #block },
            counted,
        })
    }

    /// Whether `name` is a block mutable whose every assigned value is uniform where it is
    /// declared (the local itself counting as uniform).
    fn block_mutable(&mut self, name: &str, scope: &[Var]) -> bool {
        let Some(writes) = self.block_mutables.get(name) else {
            return false;
        };
        writes.iter().all(|w| {
            let mut with_self = scope.to_vec();
            for uniform in w.loop_vars.iter().map(String::as_str).chain([name]) {
                with_self.push(Var {
                    name: uniform.to_owned(),
                    id: usize::MAX,
                    kind: Kind::Uniform,
                });
            }
            is_uniform(&w.value, &with_self)
        })
    }

    /// Puts the names `pat` binds on `scope` as block-wide values (a uniform loop's variable, a
    /// block-wide `match` arm's bindings).
    fn bind_uniform(&mut self, pat: &Pat, scope: &mut Vec<Var>) {
        let mut names = Vec::new();
        pattern_names(pat, &mut names);
        for name in names {
            let id = self.id();
            scope.push(Var {
                name,
                id,
                kind: Kind::Uniform,
            });
        }
    }

    fn id(&mut self) -> usize {
        self.next_id += 1;
        self.next_id
    }

    /// The code running `stmts` for every thread of the block; `after` is everything that
    /// runs after them in the enclosing lists (to know which locals later code reads).
    fn lower_list(
        &mut self,
        stmts: &[Stmt],
        scope: &mut Vec<Var>,
        after: &TokenStream2,
    ) -> Result<TokenStream2, String> {
        let mut out = TokenStream2::new();
        let mut region: Vec<Stmt> = Vec::new();
        for (i, stmt) in stmts.iter().enumerate() {
            if let Stmt::Item(_) = stmt {
                self.items.push(stmt.clone());
                continue;
            }
            if let Some(name) = assigned_local(stmt)
                && self.block_mutables.contains_key(&name)
                && matches!(
                    scope.iter().rev().find(|v| v.name == name),
                    Some(Var {
                        kind: Kind::Uniform,
                        ..
                    })
                )
            {
                if !assigned_value(stmt).is_some_and(|e| is_uniform(e, scope)) {
                    return Err(format!(
                        "it assigns `{name}`, whose first value is the same for the whole block, \
                         a value that may differ between threads"
                    ));
                }
                // An assignment of a block-wide local: once, between two regions.
                let rest = rest_tokens(&stmts[i..], after);
                out.extend(self.region(&region, scope, &rest)?);
                region.clear();
                out.extend(quote! { #stmt });
                continue;
            }
            let interchanged = stride_loop(stmt, scope).filter(|_| self.span.is_none());
            let barrier = interchanged.is_some()
                || (self.span.is_none() && block_loop(stmt, scope))
                || splits(&stmt.to_token_stream());
            let jump = if barrier { None } else { leaving_jump(stmt) };
            if !barrier && jump.is_none() {
                region.push(stmt.clone());
                continue;
            }
            let rest = rest_tokens(&stmts[i..], after);
            out.extend(self.region(&region, scope, &rest)?);
            region.clear();
            let rest = rest_tokens(&stmts[i + 1..], after);
            out.extend(match (interchanged, jump) {
                (Some(interchanged), _) => self.barrier_stmt(&interchanged, scope, &rest)?,
                (None, Some(what)) => self.jump_stmt(stmt, what, scope, &rest)?,
                (None, None) => self.barrier_stmt(stmt, scope, &rest)?,
            });
        }
        out.extend(self.region(&region, scope, after)?);
        Ok(out)
    }

    /// `lower_list` for a nested block: its bindings end with it.
    fn lower_scoped(
        &mut self,
        stmts: &[Stmt],
        scope: &mut Vec<Var>,
        after: &TokenStream2,
    ) -> Result<TokenStream2, String> {
        let mark = scope.len();
        let body = self.lower_list(stmts, scope, after);
        scope.truncate(mark);
        body
    }

    fn barrier_stmt(
        &mut self,
        stmt: &Stmt,
        scope: &mut Vec<Var>,
        after: &TokenStream2,
    ) -> Result<TokenStream2, String> {
        let expr = match stmt {
            Stmt::Expr(e, _) => e,
            Stmt::Local(_) => {
                return Err("it calls sync_threads() in a `let` statement".to_owned());
            }
            Stmt::Macro(_) => {
                return Err("it calls sync_threads() inside a macro invocation".to_owned());
            }
            Stmt::Item(_) => return Ok(TokenStream2::new()),
        };
        match expr {
            Expr::Call(call) if is_barrier_call(call) => Ok(TokenStream2::new()),
            Expr::Call(call) => match warp::marker(call) {
                Some(warp::EXCHANGE) => {
                    // The warps of the threads that run it (`alive`: a branch's guard).
                    let active = self.alive_arg();
                    let mut args = call.args.iter();
                    let function = args.next();
                    Ok(quote! { unsafe { #function(#active, #(#args),*) }; })
                }
                Some(_) => Ok(TokenStream2::new()),
                None => Err("it calls sync_threads() inside an expression".to_owned()),
            },
            Expr::ForLoop(f) => {
                warp_loop_uniform(stmt, &f.expr, scope)?;
                let range = self.uniform_value(&f.expr, scope)?;
                let mark = scope.len();
                self.bind_uniform(&f.pat, scope);
                let loop_after = loop_tokens(&f.body, after);
                let body = self.lower_list(&f.body.stmts, scope, &loop_after)?;
                scope.truncate(mark);
                let (label, pat) = (&f.label, &f.pat);
                Ok(quote! {
                    #label for #pat in ::core::iter::IntoIterator::into_iter(#range).flatten() {
                        #body
                    }
                })
            }
            Expr::While(w) => {
                if matches!(&*w.cond, Expr::Let(_)) {
                    return Err("it calls sync_threads() inside a `while let` loop".to_owned());
                }
                warp_loop_uniform(stmt, &w.cond, scope)?;
                let cond = self.uniform_value(&w.cond, scope)?;
                let loop_after = loop_tokens(&w.body, after);
                let body = self.lower_scoped(&w.body.stmts, scope, &loop_after)?;
                let label = &w.label;
                Ok(quote! {
                    #label while #cond == ::core::option::Option::Some(true) {
                        #body
                    }
                })
            }
            Expr::Loop(l) => {
                let loop_after = loop_tokens(&l.body, after);
                let body = self.lower_scoped(&l.body.stmts, scope, &loop_after)?;
                let label = &l.label;
                Ok(quote! { #label loop { #body } })
            }
            Expr::If(_) => self.lower_if(expr, scope, after),
            Expr::Block(syn::ExprBlock {
                label: None, block, ..
            })
            | Expr::Unsafe(syn::ExprUnsafe { block, .. }) => {
                let body = self.lower_scoped(&block.stmts, scope, after)?;
                Ok(quote! { { #body } })
            }
            Expr::Match(m) => self.lower_match(m, scope, after),
            _ => Err("it calls sync_threads() inside an expression".to_owned()),
        }
    }

    /// A statement holding a `break` or `continue` that leaves a loop around barriers: the
    /// jump itself, or an `if` whose conditions are the same for every thread (lowered as
    /// the `if`s around barriers are, the jumps in its branches left as they are), or a
    /// block holding those.
    fn jump_stmt(
        &mut self,
        stmt: &Stmt,
        what: &str,
        scope: &mut Vec<Var>,
        after: &TokenStream2,
    ) -> Result<TokenStream2, String> {
        let inside = |place: &str| {
            format!("it uses `{what}` to leave a loop around sync_threads() inside {place}")
        };
        let expr = match stmt {
            Stmt::Expr(e, _) => e,
            Stmt::Local(_) => return Err(inside("a `let` statement")),
            Stmt::Macro(_) | Stmt::Item(_) => return Err(inside("a macro invocation")),
        };
        match expr {
            Expr::Break(b) if b.expr.is_none() => Ok(quote! { #b; }),
            Expr::Break(_) => Err("it leaves a loop around sync_threads() with a value".to_owned()),
            Expr::Continue(c) => Ok(quote! { #c; }),
            Expr::If(_) => {
                if !if_conditions_uniform(expr, scope) {
                    return Err(format!(
                        "it uses `{what}` to leave a loop around sync_threads() under a \
                         condition that may differ between threads"
                    ));
                }
                self.lower_if(expr, scope, after)
            }
            Expr::Block(syn::ExprBlock {
                label: None, block, ..
            })
            | Expr::Unsafe(syn::ExprUnsafe { block, .. }) => {
                let body = self.lower_scoped(&block.stmts, scope, after)?;
                Ok(quote! { { #body } })
            }
            Expr::Match(_) => Err(inside("a `match`")),
            Expr::ForLoop(_) | Expr::While(_) | Expr::Loop(_) => Err(inside("a nested loop")),
            _ => Err(inside("an expression")),
        }
    }

    /// A `match` around barriers: its value is the block's (every thread of a block must
    /// reach the same barriers), computed once per block like an `if`'s condition; each arm's
    /// bindings are block-wide values, its guard must be one, and its body is lowered as a
    /// block. Around warp operations alone the value must be the same for the whole block.
    fn lower_match(
        &mut self,
        m: &syn::ExprMatch,
        scope: &mut Vec<Var>,
        after: &TokenStream2,
    ) -> Result<TokenStream2, String> {
        if !mentions(&m.to_token_stream(), BARRIER) && !is_uniform(&m.expr, scope) {
            return Err(
                "it uses warp operations in a `match` whose value may differ between threads"
                    .to_owned(),
            );
        }
        let value = self.uniform_value(&m.expr, scope)?;
        let mut arms = TokenStream2::new();
        for arm in &m.arms {
            let mark = scope.len();
            self.bind_uniform(&arm.pat, scope);
            let lowered = self.lower_arm(arm, scope, after);
            scope.truncate(mark);
            arms.extend(lowered?);
        }
        Ok(quote! {
            match #value {
                #arms
                _ => {}
            }
        })
    }

    /// One arm of [`Lowering::lower_match`], its bindings in `scope`.
    fn lower_arm(
        &mut self,
        arm: &syn::Arm,
        scope: &mut Vec<Var>,
        after: &TokenStream2,
    ) -> Result<TokenStream2, String> {
        let (pat, guard) = match &arm.pat {
            Pat::Guard(g) if assigns(&g.guard) || !is_uniform(&g.guard, scope) => {
                return Err(
                    "it calls sync_threads() in a `match` arm whose guard may differ between \
                     threads"
                        .to_owned(),
                );
            }
            Pat::Guard(g) => {
                let guard = &g.guard;
                (&*g.pat, Some(quote!(if #guard)))
            }
            pat => (pat, None),
        };
        let body = self.lower_list(&arm_statements(arm), scope, after)?;
        Ok(quote! { ::core::option::Option::Some(#pat) #guard => { #body } })
    }

    fn lower_if(
        &mut self,
        expr: &Expr,
        scope: &mut Vec<Var>,
        after: &TokenStream2,
    ) -> Result<TokenStream2, String> {
        match expr {
            Expr::If(i) => {
                if matches!(&*i.cond, Expr::Let(_)) {
                    return Err("it calls sync_threads() inside an `if let`".to_owned());
                }
                if !mentions(&expr.to_token_stream(), BARRIER) && !is_uniform(&i.cond, scope) {
                    return self.guarded_if(i, scope, after);
                }
                let cond = self.uniform_value(&i.cond, scope)?;
                let then = self.lower_scoped(&i.then_branch.stmts, scope, after)?;
                let otherwise = match &i.else_branch {
                    Some((_, e)) => self.lower_if(e, scope, after)?,
                    None => quote! {{}},
                };
                Ok(quote! {
                    if #cond == ::core::option::Option::Some(true) { #then } else #otherwise
                })
            }
            Expr::Block(b) => {
                let body = self.lower_scoped(&b.block.stmts, scope, after)?;
                Ok(quote! { { #body } })
            }
            _ => Err("it calls sync_threads() inside an `else` of an unknown kind".to_owned()),
        }
    }

    /// An `if` around warp operations (and no barrier) whose condition may differ between
    /// threads (`if warp_id() == 0`, the same for the lanes of a warp, as a warp operation
    /// needs): a region computes, for each thread, whether it runs each branch, into guard
    /// lanes; each branch is lowered with its guard in place of the live threads, so its
    /// regions run for the threads of the branch and its exchanges once for the block.
    fn guarded_if(
        &mut self,
        i: &syn::ExprIf,
        scope: &mut Vec<Var>,
        after: &TokenStream2,
    ) -> Result<TokenStream2, String> {
        let tokens = i.to_token_stream();
        if let Some(jump) = ["return", "break", "continue"]
            .into_iter()
            .find(|jump| mentions(&tokens, jump))
        {
            return Err(format!(
                "it uses `{jump}` in an `if` around warp operations whose condition may differ \
                 between threads"
            ));
        }
        let id = self.id();
        let (then_guard, else_guard) = (
            format_ident!("__offload_guard_{}", id),
            format_ident!("__offload_unguard_{}", id),
        );
        self.guards.push(then_guard.clone());
        self.guards.push(else_guard.clone());
        let cond = &i.cond;
        let loads = self.loads(&cond.to_token_stream(), scope);
        let outer = self.alive.clone();
        let live = match &outer {
            Some(a) => quote!(::offload_rt::__private::lane_read(#a, __offload_t)),
            None => quote!(true),
        };
        let (then_from, then_to) = (
            format_ident!("{then_guard}_from"),
            format_ident!("{then_guard}_to"),
        );
        let (else_from, else_to) = (
            format_ident!("{else_guard}_from"),
            format_ident!("{else_guard}_to"),
        );
        let code = read_indices_from_region(quote! {
            let __offload_live: bool = #live;
            let __offload_in: bool = __offload_live && { #loads #cond };
            ::offload_rt::__private::lane_write(#then_guard, __offload_t, __offload_in);
            ::offload_rt::__private::lane_write(
                #else_guard, __offload_t, __offload_live && !__offload_in,
            );
        });
        let outer_span = self.span.clone();
        self.alive = Some(then_guard.clone());
        self.span = Some((then_from.clone(), then_to.clone()));
        let then = self.lower_scoped(&i.then_branch.stmts, scope, after);
        self.alive = Some(else_guard.clone());
        self.span = Some((else_from.clone(), else_to.clone()));
        let otherwise = match &i.else_branch {
            Some((_, e)) => self.lower_if(e, scope, after),
            None => Ok(TokenStream2::new()),
        };
        self.alive = outer;
        self.span = outer_span;
        let (then, otherwise) = (then?, otherwise?);
        let compute = self.each_thread(quote! { |__offload_t, __offload_at| unsafe { #code } });
        Ok(quote! {
            #compute
            let (#then_from, #then_to) = ::offload_rt::__private::guard_span(#then_guard);
            let (#else_from, #else_to) = ::offload_rt::__private::guard_span(#else_guard);
            { #then }
            { #otherwise }
        })
    }

    /// An expression every thread of the block agrees on (a range, a loop condition), as an
    /// `Option` of its value for the first live thread (`None` when none is live).
    fn uniform_value(&mut self, expr: &Expr, scope: &[Var]) -> Result<TokenStream2, String> {
        if assigns(expr) {
            return Err(
                "the range or condition of a loop or `if` around sync_threads() assigns a variable"
                    .to_owned(),
            );
        }
        let tokens = expr.to_token_stream();
        let loads = self.loads(&tokens, scope);
        let alive = self.alive_arg();
        Ok(quote! {
            unsafe {
                ::offload_rt::__private::uniform(#alive, |__offload_t| unsafe { #loads #expr })
            }
        })
    }

    fn alive_arg(&self) -> TokenStream2 {
        match &self.alive {
            Some(a) => quote!(#a),
            None => quote!(::core::ptr::null_mut()),
        }
    }

    /// The statements that bring, into a region, every per-thread local it names.
    fn loads(&mut self, tokens: &TokenStream2, scope: &[Var]) -> TokenStream2 {
        let mut named = HashSet::new();
        idents_of(tokens, &mut named);
        // The visible binding of each name, and those recomputations need.
        let visible = |name: &str| scope.iter().rposition(|v| v.name == name);
        let mut needed = vec![false; scope.len()];
        let mut stack: Vec<usize> = named.iter().filter_map(|n| visible(n)).collect();
        while let Some(i) = stack.pop() {
            if needed[i] {
                continue;
            }
            needed[i] = true;
            if let Kind::Lane {
                recompute: Some(r), ..
            } = &scope[i].kind
                && recomputable(r, scope)
            {
                stack.extend(r.deps.iter().filter_map(|(n, _)| visible(n)));
            }
        }
        let mut out = TokenStream2::new();
        for (i, var) in scope.iter().enumerate() {
            if !needed[i] {
                continue;
            }
            // Shadowed bindings are never loaded: their names mean the later ones.
            if visible(&var.name) != Some(i) {
                continue;
            }
            let Kind::Lane {
                slot,
                mutable,
                recompute,
            } = &var.kind
            else {
                continue;
            };
            let name = Ident::new(&var.name, Span::call_site());
            match recompute {
                Some(r) if recomputable(r, scope) => {
                    let (init, ty) = (&r.init, r.ty.iter());
                    out.extend(quote! { let #name #(: #ty)* = #init; });
                }
                _ => {
                    let m = mutable.then(|| quote!(mut));
                    self.read.insert(slot.clone());
                    out.extend(quote! {
                        let #m #name = ::offload_rt::__private::lane_read(#slot, __offload_t);
                    });
                }
            }
        }
        out
    }

    /// One region: `stmts` run by every thread, then the block goes on.
    fn region(
        &mut self,
        stmts: &[Stmt],
        scope: &mut Vec<Var>,
        after: &TokenStream2,
    ) -> Result<TokenStream2, String> {
        if stmts.is_empty() {
            return Ok(TokenStream2::new());
        }
        let mut before = TokenStream2::new();
        let mut body: Vec<Stmt> = Vec::new();
        // Per-thread bindings of this region are pushed on `scope` from here on.
        let start = scope.len();
        let mut uniforms = Vec::new();
        let stmts = split_tuple_lets(stmts);
        for stmt in &stmts {
            check_region_stmt(stmt, self.alive.is_some())?;
            if let Stmt::Local(l) = stmt {
                if let Some((name, ty, init)) = simple_let(l)
                    && (!l.pat_is_mut() || self.block_mutable(&name, scope))
                    && !body.iter().any(|s| mentions(&s.to_token_stream(), &name))
                    && is_uniform(init, scope)
                    // Under a guard, computed for the block even where no thread runs it.
                    && (self.span.is_none() || !may_panic(init))
                {
                    let ident = Ident::new(&name, Span::call_site());
                    let ty = ty.iter();
                    let m = l.pat_is_mut().then(|| quote!(mut));
                    before.extend(quote! {
                        let #m #ident #(: #ty)* = unsafe { #init };
                    });
                    let id = self.id();
                    if !l.pat_is_mut() && is_shared_memory(init) {
                        self.shared.insert(id);
                    }
                    uniforms.push(Var {
                        name,
                        id,
                        kind: Kind::Uniform,
                    });
                    // Visible to the rest of the region, below its per-thread bindings.
                    scope.insert(start, uniforms.last().cloned().expect("just pushed"));
                    continue;
                }
                let mut names = Vec::new();
                pattern_names(&l.pat, &mut names);
                // Not from a block mutable: recomputed after the block assigns it, the value
                // would change.
                let recompute = match simple_let(l) {
                    Some((_, ty, init)) if !l.pat_is_mut() => pure_deps(init, scope)
                        .filter(|deps| {
                            !deps
                                .iter()
                                .any(|(n, _)| self.block_mutables.contains_key(n))
                        })
                        .map(|deps| Recompute {
                            init: init.to_token_stream(),
                            ty: ty.map(ToTokens::to_token_stream),
                            deps,
                        }),
                    _ => None,
                };
                let mutable = l.pat_is_mut();
                for name in names {
                    let id = self.id();
                    scope.push(Var {
                        name,
                        id,
                        kind: Kind::Lane {
                            slot: format_ident!("__offload_lane_{}", id),
                            mutable,
                            recompute: recompute.clone(),
                        },
                    });
                }
            }
            body.push(stmt.clone());
        }
        let start = start + uniforms.len();
        if body.is_empty() {
            return Ok(before);
        }
        let body_tokens: TokenStream2 = body.iter().map(ToTokens::to_token_stream).collect();
        let loads = self.loads(&body_tokens, &scope[..start]);
        let mut later = HashSet::new();
        idents_of(after, &mut later);
        let changed = changed_names(&body);
        // Stores: locals of earlier regions this one may assign, then its own locals that
        // later code names.
        let mut stores = TokenStream2::new();
        let mut assigns_earlier = false;
        let mut flags = Vec::new();
        for (i, var) in scope.iter().enumerate() {
            let visible = scope.iter().rposition(|v| v.name == var.name) == Some(i);
            let Kind::Lane { slot, mutable, .. } = &var.kind else {
                continue;
            };
            let store = if i < start {
                visible && *mutable && changed.contains(&var.name)
            } else {
                visible && later.contains(&var.name)
            };
            if !store {
                continue;
            }
            if i >= start {
                self.lanes.push(slot.clone());
            } else {
                assigns_earlier = true;
            }
            let name = Ident::new(&var.name, Span::call_site());
            let flag = read_flag(slot);
            flags.push(flag.clone());
            stores.extend(quote! {
                if #flag {
                    ::offload_rt::__private::lane_write(#slot, __offload_t, #name);
                }
            });
        }
        // Bindings of this region that were not stored are gone after it, unless later code
        // can recompute them (only recomputations name them: later code does not).
        let mut i = start;
        while i < scope.len() {
            let stored = match &scope[i].kind {
                Kind::Lane {
                    slot, recompute, ..
                } => recompute.is_some() || self.lanes.contains(slot),
                Kind::Uniform => true,
            };
            if stored {
                i += 1;
            } else {
                scope.remove(i);
            }
        }
        let mut bound = Vec::new();
        for stmt in &body {
            BoundNames(&mut bound).visit_stmt(stmt);
        }
        let shared: HashSet<String> = scope
            .iter()
            .filter(|v| self.shared.contains(&v.id))
            .filter(|v| scope.iter().rev().find(|w| w.name == v.name).map(|w| w.id) == Some(v.id))
            .filter(|v| !bound.contains(&v.name))
            .map(|v| v.name.clone())
            .collect();
        let body: Vec<Stmt> = body
            .into_iter()
            .map(|mut s| {
                if self.alive.is_some() {
                    ReturnToBreak.visit_stmt_mut(&mut s);
                }
                if !shared.is_empty() {
                    SharedAtomics(&shared).visit_stmt_mut(&mut s);
                }
                s
            })
            .collect();
        // Pieces when no thread returns early. A region that assigns a local of an earlier
        // one is narrowed but not split: the local's per-thread value would have to pass
        // from piece to piece.
        let pieces = match pieces(&body, scope) {
            Some((pieces, prefix))
                if self.alive.is_none()
                    && (!assigns_earlier || (prefix.is_empty() && pieces.len() == 1)) =>
            {
                Some((pieces, prefix))
            }
            _ => None,
        };
        if let Some((pieces, prefix)) = pieces {
            let mut out = before;
            let stores_in_piece = assigns_earlier.then(|| stores.clone());
            for piece in pieces {
                let (x, y) = (piece.x.ranged(), piece.y.ranged());
                let mut each = |stmt: &TokenStream2| {
                    let tokens = quote! { #(#prefix)* #stmt #stores_in_piece };
                    let loads = self.loads(&tokens, &scope[..start]);
                    let code = read_indices_from_region(quote! { #loads #tokens });
                    quote! {
                        ::offload_rt::__private::for_each_thread_in(#x, #y,
                            |__offload_t, __offload_at| unsafe { #code });
                    }
                };
                let general = each(&piece.stmt);
                // Where the target has masked loads (AVX2, AVX-512, SVE), the general loop
                // vectorizes with them, and the edge-free copy of a loop whose trip count the
                // optimizer does not know (a block's row) would be given more lanes than a
                // row has: only an image without them runs it.
                out.extend(match &piece.inner {
                    Some(inner) => {
                        let (test, stmt) = (&inner.test, each(&inner.stmt));
                        quote! {
                            if !cfg!(any(target_feature = "avx2", target_feature = "sve"))
                                && #test
                            {
                                #stmt
                            } else {
                                #general
                            }
                        }
                    }
                    None => general,
                });
            }
            if !stores.is_empty() && !assigns_earlier {
                // The locals later regions read, for every thread (the pieces may have run
                // some threads only): the prefix's `let`s are pure, so computing them again
                // changes nothing.
                let tokens = quote! { #(#prefix)* };
                let loads = self.loads(&tokens, &scope[..start]);
                out.extend(copies_pass(&flags, quote! { #loads #tokens #stores }));
            }
            return Ok(out);
        }
        // A region of pure `let`s only (a later region's indices) runs for their copies
        // alone, and only when a later region reads one.
        let only_copies =
            self.alive.is_none() && !assigns_earlier && body.iter().all(|s| pure_let(s, scope));
        let body: Vec<TokenStream2> = body.iter().map(stmt_tokens).collect();
        if only_copies {
            let run = (!flags.is_empty())
                .then(|| copies_pass(&flags, quote! { #loads #(#body)* #stores }));
            return Ok(quote! { #before #run });
        }
        let code = match &self.alive {
            Some(alive) => quote! {
                if !::offload_rt::__private::lane_read(#alive, __offload_t) {
                    return;
                }
                #loads
                let __offload_live: bool = '__offload_region: {
                    #(#body)*
                    #stores
                    true
                };
                ::offload_rt::__private::lane_write(#alive, __offload_t, __offload_live);
            },
            None => quote! {
                #loads
                #(#body)*
                #stores
            },
        };
        let code = read_indices_from_region(code);
        let run = self.each_thread(quote! { |__offload_t, __offload_at| unsafe { #code } });
        Ok(quote! {
            #before
            #run
        })
    }

    /// The statement that runs `region` (a closure) for the threads it may concern: every
    /// thread, or in a branch of an `if` around warp operations, the ranks its guard let in.
    fn each_thread(&self, region: TokenStream2) -> TokenStream2 {
        match &self.span {
            Some((from, to)) => quote! {
                ::offload_rt::__private::for_each_thread_span(#from, #to, #region);
            },
            None => quote! { ::offload_rt::__private::for_each_thread(#region); },
        }
    }
}

/// A loop over every thread that runs `code` (pure `let`s and the stores of their lane
/// copies) only when some later region reads one of those copies (`flags`, [`read_flag`]).
pub(super) fn copies_pass(flags: &[Ident], code: TokenStream2) -> TokenStream2 {
    let code = read_indices_from_region(code);
    quote! {
        if #(#flags)||* {
            ::offload_rt::__private::for_each_thread(
                |__offload_t, __offload_at| unsafe { #code });
        }
    }
}
