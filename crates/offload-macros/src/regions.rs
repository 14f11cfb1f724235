//! The region form of a kernel with barriers, for the CPU device.
//!
//! A kernel body that calls `sync_threads()` is split at its barriers into regions, and each
//! region runs as a loop over the block's threads (a work-item loop, as POCL's work-group
//! functions and the GPU-to-CPU compilers do), so the CPU image runs plain loops the
//! optimizer vectorizes instead of one coroutine per GPU thread switched at every barrier.
//!
//! The rewrite is structured, on the kernel's syntax: a barrier is a statement of the body, or
//! of a `for`, `while`, `if` or block statement that is itself such a statement. Those
//! statements are block-uniform (every thread of a block must reach the same barriers), so
//! their ranges and conditions are evaluated once per block, for the first live thread. A
//! local that a later region reads is kept per thread in lane storage (one slot per thread
//! of the block), unless it is recomputed there: an immutable local whose value is a pure
//! function of the thread and block indices is computed again, so an index such as
//! `thread_idx_x()` stays visibly affine in the loop counter. An immutable local whose value
//! is the same for the whole block (parameters, block indices, `shared_array!`) is computed
//! once per block.
//!
//! `break` and `continue` out of a loop around barriers (`for`, `while` or `loop`, labelled or
//! not) are jumps of the whole block when their condition is the same for every thread (a
//! loop counter, a parameter, a block-wide local): the `if` holding them is evaluated once per
//! block, the jump leaves the block's loop. A jump under a condition that may differ between
//! threads, or one inside an expression, keeps the coroutine path, which runs each thread's
//! own way. A `match` around barriers is lowered as an `if` is, its value the block's. Any
//! other shape (a barrier inside an expression, a masked warp operation)
//! gives [`Plan::Coroutines`] with the reason, and the kernel keeps the coroutine path.

use std::collections::{HashMap, HashSet};

use proc_macro2::{Ident, Span, TokenStream as TokenStream2, TokenTree};
use quote::{ToTokens, format_ident, quote};
use syn::visit::Visit;
use syn::visit_mut::VisitMut;
use syn::{Block, Expr, Pat, Stmt};

mod hoist;
pub(crate) mod inline;
mod warp;

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

const BARRIER: &str = "sync_threads";
const WARP_OPS: &[&str] = &[
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
const THREAD_FNS: &[&str] = &[
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
fn read_flag(slot: &Ident) -> Ident {
    format_ident!("{}_read", slot)
}

/// The index functions a region does not read from its `RegionThread`: the warps' sizes, and
/// the block's dynamic shared memory.
const NOT_IN_REGION_THREAD: &[&str] = &["warp_size", "warps_per_block", "dynamic_shared"];

/// Whether a region reads index function `name` from the thread's `RegionThread` (its
/// `__offload_at`), which has a method of the same name.
fn in_region_thread(name: &str) -> bool {
    THREAD_FNS.iter().chain(BLOCK_FNS).any(|f| *f == name) && !NOT_IN_REGION_THREAD.contains(&name)
}

/// Index functions whose value is the same for every thread of a block.
const BLOCK_FNS: &[&str] = &[
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
const PURE_METHODS: &[&str] = &[
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

/// Plans the CPU device's form of `body`, whose parameters are `params` (name, mutable).
pub(crate) fn plan(original: &Block, params: &[(Ident, bool)]) -> Plan {
    let (body, exchanges) = match warp::rewrite(original) {
        Ok(rewritten) => rewritten,
        Err(reason) => return Plan::Coroutines(reason),
    };
    let body = &body;
    if !splits(&body.to_token_stream()) {
        return Plan::NoBarriers;
    }
    if let Some(name) = closure_local(body) {
        // The lane storage holds values, and a closure's captures would borrow the region
        // loop's temporaries: the coroutine path keeps each thread's closure on its stack.
        return Plan::Coroutines(format!(
            "it binds a closure to a local (`{name}`), which the region form cannot keep per \
             thread across a barrier"
        ));
    }
    let mut lowering = Lowering::new(body);
    lowering.exchanges = exchanges;
    match lowering.run(body, original, params) {
        Ok(plan) => plan,
        Err(reason) => Plan::Coroutines(reason),
    }
}

/// Whether `tokens` hold a point the region form splits at: a barrier, or a warp operation's
/// exchange or split (see [`warp`]).
fn splits(tokens: &TokenStream2) -> bool {
    mentions(tokens, BARRIER) || warp::has_split(tokens)
}

/// Whether `e` is a statement that holds statements: an `if`, a `match`, a loop or a block.
fn holds_statements(e: &Expr) -> bool {
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
type ListRewrite<'a> = dyn FnMut(&[Stmt]) -> Result<Vec<Stmt>, String> + 'a;

/// `expr` (one that [`holds_statements`]) with each of its lists of statements rewritten by
/// `list`, once `head` has accepted each condition and range (a pre-pass's own statements,
/// such as a warp operation, must not be there).
fn rewrite_lists(
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
fn arm_statements(arm: &syn::Arm) -> Vec<Stmt> {
    match &*arm.body {
        Expr::Block(b) if b.label.is_none() => b.block.stmts.clone(),
        body => vec![Stmt::Expr(body.clone(), Some(Default::default()))],
    }
}

/// The name of a local anywhere in `body` whose value is a closure.
fn closure_local(body: &Block) -> Option<String> {
    #[derive(Default)]
    struct Find(Option<String>);
    impl<'ast> Visit<'ast> for Find {
        fn visit_local(&mut self, local: &'ast syn::Local) {
            let mut init = local.init.as_ref().map(|i| &*i.expr);
            while let Some(Expr::Paren(p)) = init {
                init = Some(&*p.expr);
            }
            if self.0.is_none() && matches!(init, Some(Expr::Closure(_))) {
                self.0 = Some(local.pat.to_token_stream().to_string());
            }
            syn::visit::visit_local(self, local);
        }
    }
    let mut find = Find::default();
    find.visit_block(body);
    find.0
}

/// Whether `tokens` contains the identifier `name` anywhere, macro arguments included.
fn mentions(tokens: &TokenStream2, name: &str) -> bool {
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

#[derive(Clone)]
enum Kind {
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
struct Recompute {
    init: TokenStream2,
    ty: Option<TokenStream2>,
    /// The bindings its value reads: (name, binding id).
    deps: Vec<(String, usize)>,
}

#[derive(Clone)]
struct Var {
    name: String,
    id: usize,
    kind: Kind,
}

struct Lowering {
    lanes: Vec<Ident>,
    /// The lane slots some region reads: a slot no region reads (its local recomputed
    /// wherever it is used) is neither given storage nor written.
    read: HashSet<Ident>,
    items: Vec<Stmt>,
    next_id: usize,
    /// Lane storage of "this thread has not returned", when the body returns early.
    alive: Option<Ident>,
    /// Mutable locals assigned only by statements the whole block runs (see
    /// [`block_mutables`]): one copy per block when their first value is uniform.
    block_mutables: HashMap<String, Vec<BlockWrite>>,
    /// The bindings (by id) of immutable uniform locals that hold the block's shared memory
    /// (`shared_array!`, `dynamic_shared`): atomics through them are plain accesses.
    shared: HashSet<usize>,
    /// The exchange storage of the body's warp operations.
    exchanges: warp::Exchanges,
    /// Lane storage of "this thread runs this branch", one per branch of an `if` around warp
    /// operations whose condition may differ between threads (see [`Lowering::guarded_if`]).
    guards: Vec<Ident>,
    /// The locals holding the first rank and the rank past the last that the innermost such
    /// branch lets in (its regions run over those threads only); `None` outside them.
    span: Option<(Ident, Ident)>,
}

/// A value a block mutable is assigned, with the loop variables of the block-wide loops
/// around the assignment (uniform there, though not where the local is declared).
#[derive(Clone)]
struct BlockWrite {
    value: Expr,
    loop_vars: Vec<String>,
}

impl Lowering {
    fn new(body: &Block) -> Lowering {
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

    fn run(
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
fn copies_pass(flags: &[Ident], code: TokenStream2) -> TokenStream2 {
    let code = read_indices_from_region(code);
    quote! {
        if #(#flags)||* {
            ::offload_rt::__private::for_each_thread(
                |__offload_t, __offload_at| unsafe { #code });
        }
    }
}

/// A statement as tokens, a trailing expression made a statement.
fn stmt_tokens(s: &Stmt) -> TokenStream2 {
    match s {
        Stmt::Expr(e, None) => quote! { #e; },
        s => s.to_token_stream(),
    }
}

/// The thread indices along one axis that a region's loop runs: a `(usize, usize)`
/// expression of the block, or every index.
#[derive(Clone, Default)]
struct ThreadSpan(Option<TokenStream2>);

impl ThreadSpan {
    fn and(self, other: ThreadSpan) -> ThreadSpan {
        match (self.0, other.0) {
            (Some(a), Some(b)) => ThreadSpan(Some(
                quote! { ::offload_rt::__private::thread_range_and(#a, #b) },
            )),
            (a, b) => ThreadSpan(a.or(b)),
        }
    }

    fn ranged(&self) -> TokenStream2 {
        match &self.0 {
            Some(r) => r.clone(),
            None => quote! { (0usize, usize::MAX) },
        }
    }
}

/// Whether `s` is `let name = value;`, `value` reading no memory (a function of the indices
/// and uniform values) and unable to panic: such a `let` may be computed for fewer threads
/// than it was written for, or not at all, and no panic a thread would raise is lost.
fn pure_let(s: &Stmt, scope: &[Var]) -> bool {
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
fn may_panic(expr: &Expr) -> bool {
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

/// One loop of a region split by [`pieces`]: its statement (after the prefix) and the
/// threads it runs.
struct Piece {
    stmt: TokenStream2,
    x: ThreadSpan,
    y: ThreadSpan,
    /// The piece for a block none of whose threads is on an edge its `let`s test.
    inner: Option<Inner>,
}

/// A piece's statement with each `let edge = a == .. || b == ..` of its `if` that is false for
/// every thread of the block made `false`, and the block-wide test that says so.
struct Inner {
    test: TokenStream2,
    stmt: TokenStream2,
}

/// The `let`s of a split `if`'s block that come before a piece's statements, as written and
/// with the edges made `false` ([`never_true`]), and the tests of those edges.
#[derive(Default)]
struct BlockLets {
    written: Vec<TokenStream2>,
    inner: Vec<TokenStream2>,
    tests: Vec<TokenStream2>,
}

impl BlockLets {
    fn piece(&self, cond: &Expr, stmts: &[TokenStream2], x: ThreadSpan, y: ThreadSpan) -> Piece {
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
fn never_true(init: &Expr, scope: &[Var]) -> Option<TokenStream2> {
    fn terms<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
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
fn pieces(body: &[Stmt], scope: &[Var]) -> Option<(Vec<Piece>, Vec<Stmt>)> {
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
fn thread_ranges(cond: &Expr, scope: &[Var]) -> (ThreadSpan, ThreadSpan) {
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

/// The value of a local the region recomputes, as an expression.
fn recomputed(expr: &Expr, scope: &[Var]) -> Option<Expr> {
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

/// `expr` as the thread's index along `x` (0) or `y` (1) plus a uniform offset: the axis,
/// the sum's type (`u32` for the index itself, or the unsigned type it is cast to) and the
/// offset, if any.
fn axis_offset(expr: &Expr, scope: &[Var]) -> Option<(u8, TokenStream2, Option<TokenStream2>)> {
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
fn read_indices_from_region(tokens: TokenStream2) -> TokenStream2 {
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

/// The local a statement `name = value;` or `name op= value;` assigns.
fn assigned_local(stmt: &Stmt) -> Option<String> {
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
fn assigned_value(stmt: &Stmt) -> Option<&Expr> {
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
fn block_mutables(stmts: &[Stmt]) -> HashMap<String, Vec<BlockWrite>> {
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
fn split_tuple_lets(stmts: &[Stmt]) -> Vec<Stmt> {
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

trait LocalExt {
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
fn simple_let(l: &syn::Local) -> Option<(String, Option<&syn::Type>, &Expr)> {
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

fn pattern_names(pat: &Pat, out: &mut Vec<String>) {
    struct Names<'a>(&'a mut Vec<String>);
    impl<'ast> Visit<'ast> for Names<'_> {
        fn visit_pat_ident(&mut self, i: &'ast syn::PatIdent) {
            self.0.push(i.ident.to_string());
            syn::visit::visit_pat_ident(self, i);
        }
    }
    Names(out).visit_pat(pat);
}

fn rest_tokens(stmts: &[Stmt], after: &TokenStream2) -> TokenStream2 {
    let mut t: TokenStream2 = stmts.iter().map(ToTokens::to_token_stream).collect();
    t.extend(after.clone());
    t
}

/// What follows a statement of a loop body: the rest of the body in the next iteration too.
fn loop_tokens(body: &Block, after: &TokenStream2) -> TokenStream2 {
    let mut t = body.to_token_stream();
    t.extend(after.clone());
    t
}

fn is_barrier_call(call: &syn::ExprCall) -> bool {
    call.args.is_empty()
        && matches!(&*call.func, Expr::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == BARRIER))
}

/// What a region statement holds that a region cannot: the first such thing as `error`,
/// the kind of a jump out of the statement (`break`, `continue`) as `leaves`.
struct Check {
    loops: usize,
    labels: Vec<String>,
    error: Option<String>,
    leaves: Option<&'static str>,
    returns_ok: bool,
}

impl<'ast> Visit<'ast> for Check {
    fn visit_expr_closure(&mut self, _: &'ast syn::ExprClosure) {}
    fn visit_item(&mut self, _: &'ast syn::Item) {}
    fn visit_expr_return(&mut self, r: &'ast syn::ExprReturn) {
        if !self.returns_ok {
            self.error = Some("it returns early".to_owned());
        }
        syn::visit::visit_expr_return(self, r);
    }
    fn visit_expr_for_loop(&mut self, e: &'ast syn::ExprForLoop) {
        self.visit_expr(&e.expr);
        self.looped(e.label.as_ref(), |s| s.visit_block(&e.body));
    }
    fn visit_expr_while(&mut self, e: &'ast syn::ExprWhile) {
        self.looped(e.label.as_ref(), |s| {
            s.visit_expr(&e.cond);
            s.visit_block(&e.body);
        });
    }
    fn visit_expr_loop(&mut self, e: &'ast syn::ExprLoop) {
        self.looped(e.label.as_ref(), |s| s.visit_block(&e.body));
    }
    fn visit_expr_block(&mut self, e: &'ast syn::ExprBlock) {
        match &e.label {
            Some(l) => {
                self.labels.push(l.name.ident.to_string());
                self.visit_block(&e.block);
                self.labels.pop();
            }
            None => self.visit_block(&e.block),
        }
    }
    fn visit_expr_break(&mut self, e: &'ast syn::ExprBreak) {
        self.jump(e.label.as_ref(), "break");
        syn::visit::visit_expr_break(self, e);
    }
    fn visit_expr_continue(&mut self, e: &'ast syn::ExprContinue) {
        self.jump(e.label.as_ref(), "continue");
    }
    fn visit_local(&mut self, l: &'ast syn::Local) {
        if l.init.is_none() {
            self.error = Some("it declares a variable without a value".to_owned());
        }
        syn::visit::visit_local(self, l);
    }
    fn visit_pat_ident(&mut self, i: &'ast syn::PatIdent) {
        if i.by_ref.is_some() {
            self.error = Some("it binds a variable by reference (`ref`)".to_owned());
        }
        syn::visit::visit_pat_ident(self, i);
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        for word in ["return", "break", "continue"] {
            if mentions(&m.tokens, word) {
                self.error = Some(format!("a macro invocation in it holds `{word}`"));
            }
        }
    }
}
impl Check {
    fn looped(&mut self, label: Option<&syn::Label>, f: impl FnOnce(&mut Self)) {
        self.loops += 1;
        if let Some(l) = label {
            self.labels.push(l.name.ident.to_string());
        }
        f(self);
        if label.is_some() {
            self.labels.pop();
        }
        self.loops -= 1;
    }
    fn jump(&mut self, label: Option<&syn::Lifetime>, what: &'static str) {
        let inside = match label {
            Some(l) => self.labels.contains(&l.ident.to_string()),
            None => self.loops > 0,
        };
        if !inside {
            self.leaves.get_or_insert(what);
        }
    }
}

fn check_stmt(stmt: &Stmt, returns_ok: bool) -> Check {
    let mut check = Check {
        loops: 0,
        labels: Vec::new(),
        error: None,
        leaves: None,
        returns_ok,
    };
    check.visit_stmt(stmt);
    check
}

/// Refuses what a region cannot hold: `return` where the kernel is not tracked for it,
/// `break`/`continue` out of the region, `ref` bindings and `let` without a value.
fn check_region_stmt(stmt: &Stmt, returns_ok: bool) -> Result<(), String> {
    let check = check_stmt(stmt, returns_ok);
    if let Some(what) = check.leaves {
        return Err(format!(
            "it uses `{what}` to leave a loop around sync_threads()"
        ));
    }
    check.error.map_or(Ok(()), Err)
}

/// The jump (`break` or `continue`) by which `stmt` leaves the loop around it, if any.
fn leaving_jump(stmt: &Stmt) -> Option<&'static str> {
    check_stmt(stmt, true).leaves
}

/// A grid- or block-stride loop statement (`for i in grid_stride_x(n) { .. }`, `n` the same
/// for the whole block, no `break` or `continue` out of its body) as a block-wide loop over
/// its iterations, each a region: `for k in 0..trips { let i = at(k); if i < n { .. } }`.
/// Each thread runs the same indices in the same order as before, the block's threads
/// iteration by iteration: neighbouring threads' elements one after another (the order a
/// GPU's warps read them in), where a loop per thread walks memory with a stride of the grid.
fn stride_loop(stmt: &Stmt, scope: &[Var]) -> Option<Stmt> {
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
fn warp_loop_uniform(stmt: &Stmt, head: &Expr, scope: &[Var]) -> Result<(), String> {
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
fn if_conditions_uniform(expr: &Expr, scope: &[Var]) -> bool {
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
fn block_loop(stmt: &Stmt, scope: &[Var]) -> bool {
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
fn is_constant_name(name: &str) -> bool {
    name.chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// Whether `expr` is made of literals and constants (by Rust's naming convention) only.
fn is_constant(expr: &Expr) -> bool {
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
fn changes_outer_local(body: &Block, scope: &[Var]) -> bool {
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

/// Whether `op` is `+=`, `-=` or another compound assignment.
fn is_compound_assignment(op: &syn::BinOp) -> bool {
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

/// The names `stmts` may change the value of: assigned (whole, a field or an element, through
/// `*` too), borrowed `&mut`, the receiver of a method that may take `&mut self`, or named in
/// a macro or a closure. A mutable local of an earlier region that its next region does not
/// change is not written back to its lane.
fn changed_names(stmts: &[Stmt]) -> HashSet<String> {
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
fn assigns(expr: &Expr) -> bool {
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
fn recomputable(r: &Recompute, scope: &[Var]) -> bool {
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
enum Purity {
    /// The same value for every thread of the block.
    Uniform,
    /// A function of the indices and uniform values, reading no memory.
    Pure,
}

fn is_uniform(expr: &Expr, scope: &[Var]) -> bool {
    let mut deps = Vec::new();
    classify(expr, scope, Purity::Uniform, &mut deps)
}

fn pure_deps(expr: &Expr, scope: &[Var]) -> Option<Vec<(String, usize)>> {
    let mut deps = Vec::new();
    classify(expr, scope, Purity::Pure, &mut deps).then_some(deps)
}

/// Whether `expr` has purity `want`, collecting the bindings it reads.
fn classify(expr: &Expr, scope: &[Var], want: Purity, deps: &mut Vec<(String, usize)>) -> bool {
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
fn is_shared_memory(init: &Expr) -> bool {
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

/// Every name a pattern binds in what it visits (`let`, `for`, `match` arms, closures).
struct BoundNames<'a>(&'a mut Vec<String>);

impl<'ast> Visit<'ast> for BoundNames<'_> {
    fn visit_pat_ident(&mut self, i: &'ast syn::PatIdent) {
        self.0.push(i.ident.to_string());
        syn::visit::visit_pat_ident(self, i);
    }
}

/// The atomics of `core::sync::atomic` with their integer.
const ATOMICS: &[(&str, &str)] = &[
    ("AtomicU8", "u8"),
    ("AtomicI8", "i8"),
    ("AtomicU16", "u16"),
    ("AtomicI16", "i16"),
    ("AtomicU32", "u32"),
    ("AtomicI32", "i32"),
    ("AtomicU64", "u64"),
    ("AtomicI64", "i64"),
    ("AtomicUsize", "usize"),
    ("AtomicIsize", "isize"),
];
/// The methods [`SharedAtomics`] rewrites, with their number of arguments, and the function
/// of `block_atomic` each becomes.
const ATOMIC_METHODS: &[(&str, usize, &str)] = &[
    ("fetch_add", 2, "fetch_add"),
    ("fetch_sub", 2, "fetch_sub"),
    ("fetch_and", 2, "fetch_and"),
    ("fetch_or", 2, "fetch_or"),
    ("fetch_xor", 2, "fetch_xor"),
    ("fetch_nand", 2, "fetch_nand"),
    ("fetch_max", 2, "fetch_max"),
    ("fetch_min", 2, "fetch_min"),
    ("swap", 2, "swap"),
    ("load", 1, "load"),
    ("store", 2, "store"),
    ("compare_exchange", 4, "compare_exchange"),
    ("compare_exchange_weak", 4, "compare_exchange"),
];
/// Pointer methods whose result points into the same allocation as their receiver.
const POINTER_ARITHMETIC: &[&str] = &[
    "add",
    "sub",
    "offset",
    "wrapping_add",
    "wrapping_sub",
    "wrapping_offset",
    "byte_add",
    "byte_sub",
    "byte_offset",
    "cast",
    "cast_mut",
];

/// `AtomicU32::from_ptr(p).fetch_add(v, order)` where `p` is computed from one of the block's
/// shared-memory locals, as `block_atomic::fetch_add::<u32>(p, v, order)`: in region form a
/// block's threads run one after another on one worker, so the access needs no lock.
struct SharedAtomics<'a>(&'a HashSet<String>);

impl SharedAtomics<'_> {
    /// The local a pointer expression is computed from by pointer arithmetic alone.
    fn root(expr: &Expr) -> Option<String> {
        match expr {
            Expr::Paren(p) => Self::root(&p.expr),
            Expr::Group(g) => Self::root(&g.expr),
            Expr::MethodCall(m) if POINTER_ARITHMETIC.iter().any(|a| m.method == a) => {
                Self::root(&m.receiver)
            }
            Expr::Path(p) => p.path.get_ident().map(ToString::to_string),
            _ => None,
        }
    }

    fn rewrite(&self, m: &syn::ExprMethodCall) -> Option<Expr> {
        let mut receiver = &*m.receiver;
        // `unsafe { AtomicU32::from_ptr(p) }.fetch_add(..)`
        if let Expr::Unsafe(u) = receiver
            && let [Stmt::Expr(inner, None)] = u.block.stmts.as_slice()
        {
            receiver = inner;
        }
        let Expr::Call(call) = receiver else {
            return None;
        };
        let Expr::Path(func) = &*call.func else {
            return None;
        };
        let segments: Vec<String> = func
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        let [.., atomic, from_ptr] = segments.as_slice() else {
            return None;
        };
        let int = ATOMICS.iter().find(|(a, _)| a == atomic)?.1;
        let method = m.method.to_string();
        let (_, arity, function) = ATOMIC_METHODS.iter().find(|(name, ..)| *name == method)?;
        if from_ptr != "from_ptr" || call.args.len() != 1 || m.args.len() != *arity {
            return None;
        }
        let pointer = &call.args[0];
        if !Self::root(pointer).is_some_and(|r| self.0.contains(&r)) {
            return None;
        }
        let (int, function) = (format_ident!("{int}"), format_ident!("{function}"));
        let args = m.args.iter();
        Some(syn::parse_quote! {
            unsafe { ::offload_rt::__private::block_atomic::#function::<#int>(#pointer, #(#args),*) }
        })
    }
}

impl VisitMut for SharedAtomics<'_> {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        if let Expr::MethodCall(m) = e
            && let Some(plain) = self.rewrite(m)
        {
            *e = plain;
        }
        syn::visit_mut::visit_expr_mut(self, e);
    }
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

/// `return` in a region ends the thread: the region's labelled block yields "not live".
struct ReturnToBreak;

impl VisitMut for ReturnToBreak {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        match e {
            Expr::Closure(_) => {}
            Expr::Return(_) => {
                *e = syn::parse_quote!(break '__offload_region false);
            }
            _ => syn::visit_mut::visit_expr_mut(self, e),
        }
    }
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

/// The body for the coroutine path with the barriers the region form splits at marked, so
/// the runtime can tell them from barriers in functions the kernel calls.
struct MarkBarriers;

impl VisitMut for MarkBarriers {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        match e {
            Expr::Closure(_) => {}
            Expr::Call(c) if is_barrier_call(c) => {
                *e = syn::parse_quote!(::offload_rt::__private::region_barrier());
            }
            Expr::Call(c) if warp::op_name(c).is_some() => {
                // The operands first, so that the closure captures only their values.
                let (func, args) = (&c.func, c.args.iter());
                let names: Vec<Ident> = (0..c.args.len())
                    .map(|i| format_ident!("__offload_warp_arg_{}", i))
                    .collect();
                *e = syn::parse_quote!({
                    #(let #names = #args;)*
                    ::offload_rt::__private::region_warp_op(move || #func(#(#names),*))
                });
            }
            _ => syn::visit_mut::visit_expr_mut(self, e),
        }
    }
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(body: TokenStream2) -> Plan {
        let block: Block = syn::parse2(quote!({ #body })).unwrap();
        plan(&block, &[(format_ident!("n"), false)])
    }

    fn reason(plan: Plan) -> String {
        match plan {
            Plan::Coroutines(reason) => reason,
            Plan::Regions { .. } => panic!("split into regions"),
            Plan::NoBarriers => panic!("no barriers found"),
        }
    }

    /// The block code of a plan in region form, as text.
    fn regions(plan: Plan) -> String {
        match plan {
            Plan::Regions { block, .. } => block.to_string(),
            Plan::Coroutines(reason) => panic!("not split: {reason}"),
            Plan::NoBarriers => panic!("no barriers found"),
        }
    }

    #[test]
    fn a_match_around_barriers_is_the_blocks() {
        let block = regions(plan_of(quote! {
            let tile = shared_array!(u32, 64);
            let t = thread_idx_x() as usize;
            match n % 3 {
                0 => sync_threads(),
                k if k + block_idx_x() == 1 => {
                    unsafe { *tile.add(t) = k };
                    sync_threads();
                }
                _ => {}
            }
        }));
        assert!(
            block.contains("match unsafe { :: offload_rt :: __private :: uniform"),
            "{block}"
        );
        assert!(
            block.contains(":: core :: option :: Option :: Some (k) if k + block_idx_x () == 1"),
            "{block}"
        );
        assert!(!block.contains("sync_threads"), "{block}");
        let why = reason(plan_of(quote! {
            let t = thread_idx_x();
            match n {
                k if k > t => sync_threads(),
                _ => {}
            }
        }));
        assert!(why.contains("guard may differ between threads"), "{why}");
        let why = reason(plan_of(quote! {
            match warp_id() {
                0 => { let s = warp_sum(1u32); let _ = s; }
                _ => {}
            }
        }));
        assert!(why.contains("`match` whose value may differ"), "{why}");
    }

    #[test]
    fn a_mutable_local_a_region_only_reads_is_not_written_back() {
        let block = regions(plan_of(quote! {
            let mut acc = thread_idx_x() as u32;
            sync_threads();
            let seen = acc * 2 + n;
            sync_threads();
            acc += seen;
            sync_threads();
            let _ = acc;
        }));
        // Its first value, and after the region that adds to it; not after the one that
        // reads it.
        let writes = block.matches(", __offload_t , acc)").count();
        assert_eq!(writes, 2, "{block}");
    }

    #[test]
    fn barriers_in_loops_and_ifs_split_into_regions() {
        let plan = plan_of(quote! {
            let tile = shared_array!(f32, 256);
            let tx = thread_idx_x() as usize;
            let mut acc = 0.0f32;
            let mut stride = block_dim_x() / 2;
            for step in 0..n / 16 {
                unsafe { *tile.add(tx) = step as f32 };
                sync_threads();
                acc += unsafe { *tile.add(255 - tx) };
                sync_threads();
            }
            while stride > 0 {
                sync_threads();
                stride /= 2;
            }
            if block_idx_x() == 0 {
                sync_threads();
            }
            let _ = acc;
        });
        let (block, counted, lanes) = match plan {
            Plan::Regions {
                block,
                counted,
                lanes,
                ..
            } => (block, counted, lanes.to_string()),
            Plan::Coroutines(reason) => panic!("not split: {reason}"),
            Plan::NoBarriers => panic!("no barriers found"),
        };
        let block = block.to_string();
        // `tx` is recomputed from the region's indices, `acc` kept per thread, `stride`
        // halved once per block.
        assert!(
            block.contains("let tx = __offload_at . thread_idx_x () as usize"),
            "{block}"
        );
        assert!(block.contains("lane_write"), "{block}");
        // Only `acc`'s slot is read: `tx`'s, which every region recomputes, has no storage.
        assert_eq!(
            lanes.matches("lanes (& mut __offload_cursor)").count(),
            1,
            "{lanes}"
        );
        assert_eq!(lanes.matches("null_mut ()").count(), 1, "{lanes}");
        assert!(!block.contains("sync_threads"), "{block}");
        let counted = counted.to_token_stream().to_string();
        assert!(counted.contains("region_barrier"), "{counted}");
        assert!(!counted.contains("sync_threads"), "{counted}");
    }

    #[test]
    fn shapes_the_region_form_cannot_take_say_why() {
        let r = reason(plan_of(quote! { let x = { sync_threads(); 1 }; }));
        assert!(r.contains("`let`"), "{r}");
        let r = reason(plan_of(quote! {
            for i in 0..n { if thread_idx_x() as usize == i { break; } sync_threads(); }
        }));
        assert!(
            r.contains("`break`") && r.contains("may differ between threads"),
            "{r}"
        );
        let r = reason(plan_of(quote! {
            loop { sync_threads(); let v = match n { 0 => break, v => v }; let _ = v; }
        }));
        assert!(r.contains("`break`") && r.contains("`let`"), "{r}");
        let r = reason(plan_of(quote! {
            'rows: for i in 0..n {
                sync_threads();
                for j in 0..n { if j == i { continue 'rows; } }
            }
        }));
        assert!(r.contains("`continue`") && r.contains("nested loop"), "{r}");
        let r = reason(plan_of(quote! {
            let read = |k: usize| unsafe { *tile.add(k) };
            sync_threads();
            let v = read(1);
        }));
        assert!(r.contains("closure") && r.contains("`read`"), "{r}");
        let r = reason(plan_of(
            quote! { let v = if n > 0 { warp_sum(1u32) } else { 0 }; },
        ));
        assert!(r.contains("`warp_sum`") && r.contains("expression"), "{r}");
        let r = reason(plan_of(quote! { let v = record(n) + warp_sum(1u32); }));
        assert!(
            r.contains("`warp_sum`") && r.contains("after a call"),
            "{r}"
        );
        let r = reason(plan_of(quote! { let v = n > 0 && warp_any(true); }));
        assert!(r.contains("`warp_any`") && r.contains("`&&`"), "{r}");
        let r = reason(plan_of(quote! { let v = shuffle_down_masked(3, 1u32, 1); }));
        assert!(r.contains("`shuffle_down_masked`"), "{r}");
        let r = reason(plan_of(quote! {
            let mut v = 1u32;
            for i in 0..thread_idx_x() { v = shuffle_xor(v, i); }
        }));
        assert!(r.contains("loop") && r.contains("may differ"), "{r}");
        let r = reason(plan_of(quote! {
            if warp_id() == 0 { let v = warp_sum(1u32); return; }
        }));
        assert!(
            r.contains("`return`") && r.contains("warp operations"),
            "{r}"
        );
    }

    #[test]
    fn warp_operations_split_into_regions_and_exchanges() {
        let block = regions(plan_of(quote! {
            let v = thread_idx_x();
            let mut offset = warp_size() / 2;
            let mut w = v;
            while offset > 0 {
                w += shuffle_down(w, offset);
                offset /= 2;
            }
            let t = warp_sum(v) / 2 + u32::from(warp_any(v > 3));
            if warp_id() == 0 {
                let m = warp_max(v);
                sync_warp();
            }
            unsafe { *out.add(v as usize) = shuffle_idx(t, 0) }
        }));
        // A shuffle's exchange in the block's loop, the sum's tree, the `any`'s ballot.
        for call in [
            "warp_exchange (",
            "WarpExchange :: Shuffle (:: offload_rt :: __private :: Shuffle :: Down)",
            "WarpExchange :: Shuffle (:: offload_rt :: __private :: Shuffle :: Idx)",
            "warp_sum_tree (",
            "WarpExchange :: Any",
            "warp_butterfly (",
            "for_each_thread_span (",
        ] {
            assert!(block.contains(call), "{call}: {block}");
        }
        // The `if warp_id() == 0` branch's exchange runs for its guard's warps.
        assert!(
            block.contains("warp_butterfly (__offload_guard_"),
            "{block}"
        );
    }

    #[test]
    fn block_uniform_jumps_out_of_barrier_loops_split_into_regions() {
        let plan = plan_of(quote! {
            let tile = shared_array!(f32, 256);
            let t = thread_idx_x() as usize;
            let mut rounds = 0;
            'steps: loop {
                unsafe { *tile.add(t) += 1.0 };
                sync_threads();
                rounds += 1;
                for i in 0..n {
                    if i == 2 { continue 'steps; }
                    sync_threads();
                    if i + rounds > 8 {
                        unsafe { *tile.add(t) *= 2.0 };
                        break 'steps;
                    }
                }
                if rounds == n { break }
            }
            while n > 3 {
                sync_threads();
                if block_idx_x() == 1 { continue; }
                break;
            }
        });
        let block = regions(plan);
        for jump in [
            "continue 'steps ;",
            "break 'steps ;",
            "break ;",
            "continue ;",
        ] {
            assert!(block.contains(jump), "{jump}: {block}");
        }
        assert!(block.contains("'steps : loop"), "{block}");
        assert!(!block.contains("sync_threads"), "{block}");
    }

    #[test]
    fn a_mut_parameter_halved_by_the_block_stays_one_value_per_block() {
        let block: Block = syn::parse2(quote!({
            let tile = shared_array!(f32, 256);
            let t = thread_idx_x() as usize;
            while n > 1 {
                sync_threads();
                if t < n {
                    unsafe { *tile.add(t) += *tile.add(t + n) };
                }
                n /= 2;
            }
        }))
        .unwrap();
        let block = regions(plan(&block, &[(format_ident!("n"), true)]));
        // Halved between two regions, not per thread in lane storage.
        assert!(block.contains("}) ; n /= 2 ;"), "{block}");
        assert!(
            !block.contains("lane_write (__offload_lane_2 , __offload_t , n)"),
            "{block}"
        );
    }

    #[test]
    fn a_value_read_from_a_block_mutable_is_kept_not_recomputed() {
        let plan = plan_of(quote! {
            let t = thread_idx_x() as usize;
            let mut m = block_dim_x() as usize;
            let j = t + m;
            sync_threads();
            m /= 2;
            sync_threads();
            unsafe { *out.add(j) = m as u32 };
        });
        let block = regions(plan);
        // `j` is `t + m` with the first `m`: read back from lane storage after `m /= 2`.
        let last = block.rsplit("for_each_thread").next().unwrap();
        assert!(!last.contains("let j = t + m"), "{block}");
        assert!(
            last.contains("let j = :: offload_rt :: __private :: lane_read"),
            "{block}"
        );
    }

    #[test]
    fn atomics_on_the_blocks_shared_memory_become_plain_accesses() {
        let block = regions(plan_of(quote! {
            let local: *mut u32 = shared_array!(u32, 256);
            let t = thread_idx_x() as usize;
            unsafe { *local.add(t) = 0 };
            sync_threads();
            unsafe {
                AtomicU32::from_ptr(local.add(t % 7)).fetch_add(1, Ordering::Relaxed);
                core::sync::atomic::AtomicU32::from_ptr(local).fetch_max(3, Ordering::Relaxed);
                AtomicU32::from_ptr(out.add(t)).fetch_add(1, Ordering::Relaxed);
            }
            unsafe { AtomicU32::from_ptr(local.add(1)) }.store(5, Ordering::Relaxed);
            let elsewhere = local.wrapping_add(0).read();
            let _ = unsafe { AtomicU32::from_ptr(elsewhere.add(1)) }.load(Ordering::Relaxed);
        }));
        let plain = ":: offload_rt :: __private :: block_atomic ::";
        for op in ["fetch_add", "fetch_max", "store"] {
            assert!(
                block.contains(&format!("{plain} {op} :: < u32 >")),
                "{op}: {block}"
            );
        }
        // `out` is global memory; `elsewhere` a value read from shared memory.
        assert!(
            block.contains("AtomicU32 :: from_ptr (out . add (t)) . fetch_add"),
            "{block}"
        );
        assert!(block.contains("from_ptr (elsewhere . add (1))"), "{block}");
        assert!(!block.contains(&format!("{plain} load")), "{block}");
    }

    #[test]
    fn stride_loops_run_iteration_by_iteration_for_the_block() {
        let block = regions(plan_of(quote! {
            let local: *mut u32 = shared_array!(u32, 256);
            for b in block_stride_x(256) {
                unsafe { *local.add(b) = 0 };
            }
            sync_threads();
            for i in grid_stride_x(n) {
                unsafe { *local.add(i % 256) += 1 };
            }
            for i in grid_stride_x(n) {
                if i == 3 { continue; }
            }
        }));
        for (trips, at) in [
            ("block_stride_trips (256)", "block_stride_at (__offload_k)"),
            ("grid_stride_trips (n)", "grid_stride_at (__offload_k)"),
        ] {
            assert!(
                block.contains(trips) && block.contains(at),
                "{trips}: {block}"
            );
        }
        // A `continue` in the body keeps the loop per thread.
        assert!(block.contains("for i in grid_stride_x (n)"), "{block}");
    }

    #[test]
    fn a_region_that_only_tests_the_thread_against_a_block_limit_runs_those_threads() {
        let block = regions(plan_of(quote! {
            let partial: *mut u64 = shared_array!(u64, 256);
            let tid = thread_idx_x() as usize;
            unsafe { *partial.add(tid) = 1 };
            sync_threads();
            let mut stride = block_dim_x() as usize / 2;
            while stride > 0 {
                if tid < stride {
                    unsafe { *partial.add(tid) += *partial.add(tid + stride) };
                }
                sync_threads();
                stride /= 2;
            }
            if tid == 0 {
                unsafe { *partial.add(0) += 1 };
            }
            sync_threads();
            if thread_idx_x() < 3 {
                unsafe { *partial.add(1) = 0 };
            } else {
                unsafe { *partial.add(2) = 0 };
            }
        }));
        let all = "(0usize , usize :: MAX)";
        let below = format!(
            "for_each_thread_in (:: offload_rt :: __private :: thread_range_lt :: < usize > (0 , stride) , {all} ,"
        );
        assert!(block.contains(&below), "{block}");
        let first = format!(
            "for_each_thread_in (:: offload_rt :: __private :: thread_range_eq :: < usize > (0 , 0) , {all} ,"
        );
        assert!(block.contains(&first), "{block}");
        // With an `else`, every thread runs the region.
        assert_eq!(block.matches("for_each_thread_in").count(), 2, "{block}");
    }

    #[test]
    fn a_stencils_guarded_loads_run_as_loops_over_the_threads_they_guard() {
        let block = regions(plan_of(quote! {
            let tile: *mut f32 = shared_array!(f32, 18 * 18);
            let n = n as usize;
            let tx = thread_idx_x() as usize;
            let ty = thread_idx_y() as usize;
            let row = block_idx_y() as usize * T + ty;
            let col = block_idx_x() as usize * T + tx;
            let inside = row < n && col < n;
            let s = (ty + 1) * PITCH + tx + 1;
            if inside {
                let g = row * n + col;
                unsafe {
                    *tile.add(s) = *input.add(g);
                    if tx == 0 && col > 0 {
                        *tile.add(s - 1) = *input.add(g - 1);
                    }
                    if ty == T - 1 && row + 1 < n {
                        *tile.add(s + PITCH) = *input.add(g + n);
                    }
                }
            }
            sync_threads();
            if inside {
                unsafe { *output.add(row * n + col) = *tile.add(s) };
            }
        }));
        let lt =
            |base: &str, bound: &str| format!("thread_range_lt :: < usize > ({base} , {bound})");
        let row = lt("block_idx_y () as usize * T", "n");
        let col = lt("block_idx_x () as usize * T", "n");
        // The first region: the main load for the threads inside the grid, then a loop per
        // halo load, over the threads of its edge only.
        let eq =
            |base: &str, value: &str| format!("thread_range_eq :: < usize > ({base} , {value})");
        let pieces: Vec<&str> = block.split("for_each_thread_in (").skip(1).collect();
        assert_eq!(pieces.len(), 4, "{block}");
        assert!(
            pieces[0].contains(&col) && pieces[0].contains(&row),
            "{block}"
        );
        assert!(
            pieces[0].contains("* tile . add (s) = * input . add (g)"),
            "{block}"
        );
        assert!(!pieces[0].contains("tx == 0"), "{block}");
        assert!(pieces[1].contains(&eq("0", "0")), "{block}");
        assert!(pieces[1].contains("if tx == 0 && col > 0"), "{block}");
        assert!(!pieces[1].contains("* tile . add (s) = "), "{block}");
        assert!(pieces[2].contains(&eq("0", "T - 1")), "{block}");
        // Every piece recomputes what it needs, and tests `inside` again.
        for piece in &pieces[..3] {
            assert!(piece.contains("let g = row * n + col"), "{block}");
            assert!(piece.contains("if inside"), "{block}");
        }
        // The second region: narrowed, not split.
        assert!(
            pieces[3].contains(&col) && pieces[3].contains(&row),
            "{block}"
        );
        // Nothing reads lane storage: every local is recomputed.
        assert!(!block.contains("lane_read"), "{block}");
    }

    #[test]
    fn a_let_that_may_panic_keeps_its_region_over_every_thread() {
        let block = regions(plan_of(quote! {
            let tile: *mut u32 = shared_array!(u32, 256);
            let tx = thread_idx_x() as usize;
            sync_threads();
            let q = 1000 / tx;
            if tx == 3 {
                unsafe { *tile.add(q) = 1 };
            }
            sync_threads();
            let r = 1000 % (tx + 1);
        }));
        // Thread 0 divides by zero before the test, so every thread runs the region; the
        // last region, only a `let`, still runs.
        assert!(!block.contains("thread_range_eq"), "{block}");
        assert!(block.contains("let r = 1000 % (tx + 1)"), "{block}");
    }

    #[test]
    fn a_region_whose_edge_test_no_thread_of_the_block_passes_runs_without_it() {
        let block = regions(plan_of(quote! {
            let tile: *mut f32 = shared_array!(f32, 256);
            let n = n as usize;
            let z = block_idx_z() as usize;
            let col = block_idx_x() as usize * 16 + thread_idx_x() as usize;
            let row = block_idx_y() as usize * 16 + thread_idx_y() as usize;
            sync_threads();
            if row < n && col < n {
                let face = col == 0 || z == 0 || row + 1 == n;
                let mixed = col == 0 || col < 3;
                unsafe { *out.add(row * n + col) = if face || mixed { 1.0 } else { *tile } };
            }
        }));
        // `face` is false where no thread has `col == 0` or `row + 1 == n` and `z != 0`; the
        // `<` test in `mixed` is no edge, so `mixed` stays.
        let miss = "thread_ranges_miss (& [:: offload_rt :: __private :: thread_range_eq :: < \
                    usize > (block_idx_x () as usize * 16 , 0)] , & [:: offload_rt :: \
                    __private :: thread_range_eq :: < usize > ((block_idx_y () as usize * 16) \
                    + (1) , n)])";
        assert!(
            block.contains(&format!(
                "! (z == 0) && :: offload_rt :: __private :: {miss}"
            )),
            "{block}"
        );
        assert!(block.contains("let face : bool = false ;"), "{block}");
        assert!(!block.contains("let mixed : bool = false"), "{block}");
        assert!(block.contains("target_feature = \"avx2\""), "{block}");
    }

    #[test]
    fn a_constant_loop_that_keeps_no_state_runs_iteration_by_iteration_for_the_block() {
        let block = regions(plan_of(quote! {
            let tile: *mut f32 = shared_array!(f32, 256);
            let tx = thread_idx_x() as usize;
            let mut acc = 0.0f32;
            for i in 0..4 {
                let j = i * 64;
                if tx + j < n {
                    unsafe { *tile.add(tx + j) = 1.0 };
                }
            }
            sync_threads();
            for k in 0..16 {
                acc += unsafe { *tile.add(k) };
            }
            for k in 0..16 {
                if k == 3 {
                    break;
                }
                unsafe { *tile.add(k) = 2.0 };
            }
            for k in 0..n {
                unsafe { *tile.add(tx) += 1.0 };
            }
            let _ = acc;
        }));
        // The first loop is the block's: its body a region narrowed by its test.
        assert!(block.contains("for i in"), "{block}");
        let first = block.split("for i in").nth(1).unwrap();
        assert!(
            first.contains("for_each_thread_in (:: offload_rt :: __private :: thread_range_lt :: < usize > (j , n)"),
            "{block}"
        );
        // A loop that accumulates into a thread's local, or jumps, stays in its region.
        assert!(block.contains("for k in 0 .. 16 { acc +="), "{block}");
        assert!(
            block.contains("for k in 0 .. 16 { if k == 3 { break ; }"),
            "{block}"
        );
        // A range known only at run time keeps each thread's iterations together.
        assert!(block.contains("for k in 0 .. n { unsafe"), "{block}");
    }

    #[test]
    fn a_region_reads_its_unqualified_index_calls_from_its_indices() {
        let read = read_indices_from_region(quote! {
            let i = block_idx_x() * block_dim_x() + thread_idx_x();
            let j = kernel::thread_idx_y() + grid.thread_idx_y() + thread_rank;
            f(global_idx_x(), [block_size()], thread_idx_z(1));
        })
        .to_string();
        assert!(
            read.contains(
                "let i = __offload_at . block_idx_x () * __offload_at . block_dim_x () + \
                 __offload_at . thread_idx_x ()"
            ),
            "{read}"
        );
        // Paths, methods of other values, names that are not calls, calls with arguments:
        // left as written.
        assert!(
            read.contains(
                "let j = kernel :: thread_idx_y () + grid . thread_idx_y () + thread_rank"
            ),
            "{read}"
        );
        assert!(
            read.contains(
                "f (__offload_at . global_idx_x () , [__offload_at . block_size ()] , \
                 thread_idx_z (1))"
            ),
            "{read}"
        );
    }

    #[test]
    fn kernels_without_barriers_are_left_alone() {
        assert!(matches!(
            plan_of(quote! { let i = global_idx_x(); let _ = i; }),
            Plan::NoBarriers
        ));
    }
}
