//! Functions with barriers that a kernel calls, inlined into its body for the region form.
//!
//! The region form splits a kernel's body at the barriers it can see, and a barrier in a
//! function the kernel calls is out of its sight. `#[kernels]` on a module hands each of its
//! kernels the module's functions that synchronize (call `sync_threads()` or a warp operation,
//! themselves or through another such function), and before the region form is planned their
//! calls are replaced by their bodies. A call that is a statement's whole value
//! (`block_scan(tile, v);`, `let s = block_sum(tile, v);`, `total += block_sum(tile, v);`,
//! in `unsafe { .. }` or not) becomes:
//!
//! ```ignore
//! let __offload_arg_0_0 = tile;            // the arguments, in order
//! let __offload_arg_0_1 = v;
//! let mut __offload_ret_0: MaybeUninit<u32> = MaybeUninit::uninit();
//! {
//!     let __offload_tile_0: *mut u32 = __offload_arg_0_0;
//!     let __offload_v_0: u32 = __offload_arg_0_1;
//!     /* the function's statements, its locals renamed alike */
//!     __offload_ret_0 = MaybeUninit::new(/* its value */);
//! }
//! let s = unsafe { __offload_ret_0.assume_init() };
//! ```
//!
//! A call inside a larger expression is first taken out into a `let` of its own
//! ([`super::hoist`]), where nothing before it in the statement has an effect.
//!
//! The GPU images keep the calls: only the CPU device's region form and its coroutine path's
//! marked body are built from the inlined body. A function that cannot be inlined this way
//! (generic, a method, `return` or `?` in it, a `shared_array!` in it, a reference to a local
//! passed to it, a call that cannot be taken out of its expression) leaves the kernel on the
//! coroutine path, with the reason.

use std::collections::HashMap;

use proc_macro2::TokenStream as TokenStream2;
use quote::{ToTokens, format_ident, quote};
use syn::visit::Visit;
use syn::{Block, Expr, ItemFn, Stmt};

use super::hoist::{Refused, Target};

/// The attribute `#[kernels]` puts on a kernel to hand it the module's functions with
/// barriers: `#[__offload_helpers(fn a(..) { .. } fn b(..) { .. })]`.
pub(crate) const HELPERS_ATTR: &str = "__offload_helpers";

/// How deep inlined functions may call each other: deeper is taken for recursion.
const MAX_DEPTH: usize = 16;

/// The functions of an `#[__offload_helpers(..)]` attribute.
pub(crate) struct Helpers(pub(crate) Vec<ItemFn>);

impl syn::parse::Parse for Helpers {
    fn parse(input: syn::parse::ParseStream) -> syn::Result<Self> {
        let mut fns = Vec::new();
        while !input.is_empty() {
            fns.push(input.parse()?);
        }
        Ok(Helpers(fns))
    }
}

/// Whether `tokens` synchronize by themselves: a barrier or a warp operation.
pub(crate) fn synchronizes(tokens: &TokenStream2) -> bool {
    super::syntax::mentions(tokens, super::syntax::BARRIER)
        || super::warp::warp_op_in(tokens).is_some()
}

/// `body` with every call of one of `helpers` inlined; `params` are the kernel's parameters
/// (a reference to one may be passed: it outlives every region). `Err` says why the body
/// cannot be.
pub(crate) fn inline(body: &Block, helpers: &[ItemFn], params: &[String]) -> Result<Block, String> {
    let helpers: HashMap<String, &ItemFn> = helpers
        .iter()
        .map(|f| (f.sig.ident.to_string(), f))
        .collect();
    let mut inliner = Inliner {
        helpers,
        params,
        next: 0,
        hoisted: 0,
        depth: 0,
    };
    Ok(Block {
        brace_token: body.brace_token,
        stmts: inliner.list(&body.stmts)?,
    })
}

struct Inliner<'a> {
    helpers: HashMap<String, &'a ItemFn>,
    params: &'a [String],
    /// Numbers the inlined calls, for the names of their arguments and values.
    next: usize,
    /// Numbers the calls taken out of larger expressions.
    hoisted: usize,
    depth: usize,
}

/// Where an inlined call's value goes.
enum Value {
    /// Nowhere: the call is a statement.
    Dropped,
    /// `let #pat = value;`.
    Let(TokenStream2),
    /// `#place = value;` or `#place += value;` (the place and the operator).
    Assigned(TokenStream2),
}

/// The helper call `expr` is, unwrapping parentheses and an `unsafe { call }` (then `true`).
fn helper_call<'e>(
    expr: &'e Expr,
    helpers: &HashMap<String, &ItemFn>,
) -> Option<(&'e syn::ExprCall, bool)> {
    match expr {
        Expr::Paren(p) => helper_call(&p.expr, helpers),
        Expr::Group(g) => helper_call(&g.expr, helpers),
        Expr::Call(c) if called(c, helpers).is_some() => Some((c, false)),
        Expr::Unsafe(u) => match u.block.stmts.as_slice() {
            [Stmt::Expr(e, None)] => helper_call(e, helpers).map(|(c, _)| (c, true)),
            _ => None,
        },
        _ => None,
    }
}

/// The helper `call` calls by its plain name (or `self::name`), if any.
fn called<'h>(call: &syn::ExprCall, helpers: &HashMap<String, &'h ItemFn>) -> Option<&'h ItemFn> {
    let Expr::Path(p) = &*call.func else {
        return None;
    };
    if p.qself.is_some() {
        return None;
    }
    let segments: Vec<_> = p.path.segments.iter().collect();
    let last = match segments.as_slice() {
        [only] => only,
        [first, last] if first.ident == "self" => last,
        _ => return None,
    };
    if !last.arguments.is_none() {
        return None;
    }
    helpers.get(&last.ident.to_string()).copied()
}

/// The name of the first helper a walk meets a call of, items inside what it walks left out.
struct FirstCall<'h> {
    helpers: &'h HashMap<String, &'h ItemFn>,
    found: Option<String>,
}

impl<'ast> Visit<'ast> for FirstCall<'_> {
    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        if self.found.is_none()
            && let Some(f) = called(c, self.helpers)
        {
            self.found = Some(f.sig.ident.to_string());
        }
        syn::visit::visit_expr_call(self, c);
    }
    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

/// The name of the first helper `stmt` calls anywhere, if any.
fn first_call(stmt: &Stmt, helpers: &HashMap<String, &ItemFn>) -> Option<String> {
    let mut find = FirstCall {
        helpers,
        found: None,
    };
    find.visit_stmt(stmt);
    find.found
}

/// The name of the first helper `expr` calls anywhere, if any.
fn first_call_expr(expr: &Expr, helpers: &HashMap<String, &ItemFn>) -> Option<String> {
    let mut find = FirstCall {
        helpers,
        found: None,
    };
    find.visit_expr(expr);
    find.found
}

impl Inliner<'_> {
    fn list(&mut self, stmts: &[Stmt]) -> Result<Vec<Stmt>, String> {
        let mut out = Vec::with_capacity(stmts.len());
        for stmt in stmts {
            let Some(name) = first_call(stmt, &self.helpers) else {
                out.push(stmt.clone());
                continue;
            };
            let inside = || {
                format!(
                    "it calls `{name}`, a function with barriers, inside an expression, not as a \
                     statement's value"
                )
            };
            match stmt {
                Stmt::Local(l)
                    if let Some(init) = l.init.as_ref().filter(|i| i.diverge.is_none())
                        && let Some((call, in_unsafe)) = helper_call(&init.expr, &self.helpers) =>
                {
                    let (attrs, pat) = (&l.attrs, &l.pat);
                    let value = Value::Let(quote!(#(#attrs)* let #pat));
                    out.extend(self.expand(call, in_unsafe, value)?);
                }
                Stmt::Expr(Expr::Assign(a), _)
                    if let Some((call, in_unsafe)) = helper_call(&a.right, &self.helpers)
                        && first_call_expr(&a.left, &self.helpers).is_none() =>
                {
                    let left = &a.left;
                    out.extend(self.expand(call, in_unsafe, Value::Assigned(quote!(#left =)))?);
                }
                Stmt::Expr(Expr::Binary(b), _)
                    if super::syntax::is_compound_assignment(&b.op)
                        && let Some((call, in_unsafe)) = helper_call(&b.right, &self.helpers)
                        && first_call_expr(&b.left, &self.helpers).is_none() =>
                {
                    let (left, op) = (&b.left, &b.op);
                    out.extend(self.expand(call, in_unsafe, Value::Assigned(quote!(#left #op)))?);
                }
                Stmt::Expr(e, _) if helper_call(e, &self.helpers).is_some() => {
                    let (call, in_unsafe) = helper_call(e, &self.helpers).expect("just matched");
                    out.extend(self.expand(call, in_unsafe, Value::Dropped)?);
                }
                Stmt::Expr(e, semi) if super::syntax::holds_statements(e) => {
                    out.push(Stmt::Expr(self.nested(e)?, *semi));
                }
                Stmt::Macro(_) | Stmt::Item(_) => return Err(inside()),
                // A call inside a larger expression: taken out into a `let` of its own first.
                _ => {
                    let hoisted = self.hoist(stmt)?;
                    out.extend(self.list(&hoisted)?);
                }
            }
        }
        Ok(out)
    }

    /// `stmt` with the calls of functions with barriers in it taken out into `let`s of their
    /// own before it (see [`super::hoist`]).
    fn hoist(&mut self, stmt: &Stmt) -> Result<Vec<Stmt>, String> {
        let helpers = &self.helpers;
        let target = |c: &syn::ExprCall| match called(c, helpers) {
            Some(f) => Target::Take(format!(
                "it calls `{}`, a function with barriers,",
                f.sig.ident
            )),
            None => Target::Other,
        };
        let (calls, rewritten) =
            match super::hoist::hoist(stmt, "__offload_call_", &mut self.hoisted, &target) {
                Ok(hoisted) => hoisted,
                Err(Refused::Place) => {
                    let name = first_call(stmt, helpers).unwrap_or_default();
                    return Err(format!(
                        "it calls `{name}`, a function with barriers, inside an expression, \
                         not as a statement's value"
                    ));
                }
                Err(Refused::Because(reason)) => return Err(reason),
            };
        let mut out: Vec<Stmt> = calls
            .into_iter()
            .map(|(name, call)| syn::parse_quote!(let #name = #call;))
            .collect();
        out.push(rewritten);
        Ok(out)
    }

    /// A statement that holds statements (`if`, loops, blocks) with its lists inlined; its
    /// conditions and ranges must call no helper.
    fn nested(&mut self, expr: &Expr) -> Result<Expr, String> {
        let helpers = self.helpers.clone();
        let clean = |e: &Expr| match first_call_expr(e, &helpers) {
            Some(name) => Err(format!(
                "it calls `{name}`, a function with barriers, in the condition or range of a \
                 loop or `if`"
            )),
            None => Ok(()),
        };
        super::syntax::rewrite_lists(expr, &clean, &mut |stmts| self.list(stmts))
    }

    /// The statements that run `call`'s function in place, its value going to `value`.
    fn expand(
        &mut self,
        call: &syn::ExprCall,
        in_unsafe: bool,
        value: Value,
    ) -> Result<Vec<Stmt>, String> {
        let helper = called(call, &self.helpers).expect("a helper's call");
        let name = helper.sig.ident.to_string();
        inlinable(helper)?;
        if self.depth >= MAX_DEPTH {
            return Err(format!(
                "its functions with barriers call each other more than {MAX_DEPTH} deep from \
                 `{name}` (recursion cannot be inlined)"
            ));
        }
        if call.args.len() != helper.sig.inputs.len() {
            return Err(format!(
                "it calls `{name}` with {} arguments where it takes {}",
                call.args.len(),
                helper.sig.inputs.len()
            ));
        }
        let n = self.next;
        self.next += 1;
        let mut out: Vec<Stmt> = Vec::new();
        // The function's own names, made its inlining's own.
        let mut pats: Vec<syn::Pat> = helper
            .sig
            .inputs
            .iter()
            .map(|input| match input {
                syn::FnArg::Typed(pt) => (*pt.pat).clone(),
                syn::FnArg::Receiver(_) => unreachable!("`inlinable` refuses methods"),
            })
            .collect();
        let mut block = (*helper.block).clone();
        let keep: Vec<&String> = self.helpers.keys().collect();
        Rename::new(&pats, &block, &keep, n).apply(&mut pats, &mut block);
        let mut bindings = Vec::new();
        for (i, (arg, input)) in call.args.iter().zip(&helper.sig.inputs).enumerate() {
            if let Some(local) = borrowed_local(arg, self.params) {
                return Err(format!(
                    "it passes a reference to `{local}` to `{name}`, a function with barriers: \
                     the region form keeps a thread's locals in lane storage, where no \
                     reference to them lasts across a barrier (pass the value, or shared memory)"
                ));
            }
            let temp = format_ident!("__offload_arg_{}_{}", n, i);
            let arg = if in_unsafe {
                quote!(unsafe { #arg })
            } else {
                quote!(#arg)
            };
            out.push(syn::parse_quote!(let #temp = #arg;));
            let syn::FnArg::Typed(pt) = input else {
                unreachable!("`inlinable` refuses methods");
            };
            let (pat, ty) = (&pats[i], crate::params::elided_lifetimes(&pt.ty));
            bindings.push(quote!(let #pat: #ty = #temp;));
        }
        let returns = match &helper.sig.output {
            syn::ReturnType::Default => None,
            syn::ReturnType::Type(_, ty) => match &**ty {
                syn::Type::Tuple(t) if t.elems.is_empty() => None,
                ty => Some(crate::params::elided_lifetimes(ty)),
            },
        };
        let mut body = std::mem::take(&mut block.stmts);
        let tail = match body.pop() {
            Some(Stmt::Expr(e, None)) => Some(e),
            other => {
                body.extend(other);
                None
            }
        };
        let tail = match tail {
            // A statement of the inlining: it may be an `if` or a loop around barriers.
            Some(e) if returns.is_none() => {
                body.push(Stmt::Expr(e, Some(Default::default())));
                None
            }
            // A value from a function with barriers: a `let` of its own, inlined as such.
            Some(e) if first_call_expr(&e, &self.helpers).is_some() => {
                let local = format_ident!("__offload_tail_{}", n);
                body.push(syn::parse_quote!(let #local = #e;));
                Some(syn::parse_quote!(#local))
            }
            other => other,
        };
        self.depth += 1;
        let stmts = self.list(&body);
        self.depth -= 1;
        let stmts = stmts?;
        let ret = format_ident!("__offload_ret_{}", n);
        let finish = match (&value, &returns, tail) {
            (_, None, _) | (Value::Dropped, _, None) => TokenStream2::new(),
            (Value::Dropped, Some(_), Some(tail)) => quote!(let _ = #tail;),
            (_, Some(_), Some(tail)) => quote!(#ret = ::core::mem::MaybeUninit::new(#tail);),
            (_, Some(_), None) => {
                return Err(format!(
                    "`{name}` ends without a value (a diverging function cannot be inlined)"
                ));
            }
        };
        let keeps_value = !matches!(value, Value::Dropped);
        if keeps_value && let Some(ty) = &returns {
            out.push(syn::parse_quote! {
                let mut #ret: ::core::mem::MaybeUninit<#ty> = ::core::mem::MaybeUninit::uninit();
            });
        }
        let unsafety = matches!(helper.sig.safety, syn::Safety::Unsafe(_)).then(|| quote!(unsafe));
        out.push(syn::parse_quote! {
            #unsafety {
                #(#bindings)*
                #(#stmts)*
                #finish
            }
        });
        let result = match returns {
            // SAFETY (of the generated block): the function's last statement wrote the value.
            Some(_) => quote!(unsafe { #ret.assume_init() }),
            None => quote!(()),
        };
        match value {
            Value::Dropped => {}
            Value::Let(head) => out.push(syn::parse_quote!(#head = #result;)),
            Value::Assigned(head) => out.push(syn::parse_quote!(#head #result;)),
        }
        Ok(out)
    }
}

/// Refuses a function the inlining cannot take: a method, a generic one (over types or
/// constants, or with `impl Trait` parameters), one that returns early or uses `?`, an
/// `async`, `const` or variadic one.
fn inlinable(helper: &ItemFn) -> Result<(), String> {
    let sig = &helper.sig;
    let name = &sig.ident;
    let refuse = |why: &str| Err(format!("it calls `{name}`, a function with barriers {why}"));
    if sig.receiver().is_some() {
        return refuse("that is a method");
    }
    let generic = sig
        .generics
        .params
        .iter()
        .any(|p| !matches!(p, syn::GenericParam::Lifetime(_)))
        || sig.inputs.iter().any(|i| {
            matches!(i, syn::FnArg::Typed(pt) if super::syntax::mentions(&pt.ty.to_token_stream(), "impl"))
        });
    if generic {
        return refuse("that is generic over types or constants");
    }
    if sig.asyncness.is_some() || sig.variadic.is_some() {
        return refuse("that is async or variadic");
    }
    struct Early(bool);
    impl<'ast> Visit<'ast> for Early {
        fn visit_expr_return(&mut self, _: &'ast syn::ExprReturn) {
            self.0 = true;
        }
        fn visit_expr_try(&mut self, _: &'ast syn::ExprTry) {
            self.0 = true;
        }
        fn visit_expr_closure(&mut self, _: &'ast syn::ExprClosure) {}
        fn visit_item(&mut self, _: &'ast syn::Item) {}
        fn visit_macro(&mut self, m: &'ast syn::Macro) {
            self.0 |= super::syntax::mentions(&m.tokens, "return");
        }
    }
    let mut early = Early(false);
    early.visit_block(&helper.block);
    if early.0 {
        return refuse("that returns early (`return` or `?`)");
    }
    // One array for all of the function's calls on a GPU; each inlining would have its own.
    let body = helper.block.to_token_stream();
    if let Some(declares) = ["shared_array", "generic_shared_array"]
        .into_iter()
        .find(|m| super::syntax::mentions(&body, m))
    {
        return refuse(&format!(
            "that declares shared memory (`{declares}!`): the kernel should declare it and pass              it"
        ));
    }
    Ok(())
}

/// The local `arg` borrows or takes the address of (`&x`, `&mut x.field`, `&raw mut x`,
/// `addr_of!(x)`), unless it is one of the kernel's `params`.
fn borrowed_local(arg: &Expr, params: &[String]) -> Option<String> {
    let place = match arg {
        Expr::Paren(p) => return borrowed_local(&p.expr, params),
        Expr::Reference(r) => &*r.expr,
        Expr::RawAddr(r) => &*r.expr,
        Expr::Macro(m)
            if m.mac
                .path
                .segments
                .last()
                .is_some_and(|s| s.ident == "addr_of" || s.ident == "addr_of_mut") =>
        {
            return Some(m.mac.tokens.to_string());
        }
        _ => return None,
    };
    let mut base = place;
    loop {
        base = match base {
            Expr::Field(f) => &f.base,
            Expr::Index(i) => &i.expr,
            Expr::Paren(p) => &p.expr,
            _ => break,
        };
    }
    match base {
        Expr::Path(p) => {
            let name = p.path.get_ident()?.to_string();
            (!params.contains(&name)).then_some(name)
        }
        // `&*ptr`, `&slice[..]` through a call: not a local's own storage.
        _ => None,
    }
}

/// Renames the locals an inlined function binds (its parameters included), by a suffix of the
/// inlining, everywhere it names them: two inlinings of a function, or a function and the
/// kernel, then declare no name twice, which the region form needs to keep a local that the
/// whole block updates alike (a loop's offset) once per block. Every binding of a name and
/// every use of it is renamed alike, so shadowing inside the function is unchanged. A name a
/// macro's format string reads (`{x}`) keeps its own, as do the names of functions with
/// barriers.
struct Rename {
    names: HashMap<String, syn::Ident>,
}

impl Rename {
    fn new(pats: &[syn::Pat], block: &Block, keep: &[&String], n: usize) -> Rename {
        #[derive(Default)]
        struct Bound {
            names: Vec<String>,
            formatted: String,
        }
        impl<'ast> Visit<'ast> for Bound {
            fn visit_pat_ident(&mut self, i: &'ast syn::PatIdent) {
                self.names.push(i.ident.to_string());
                syn::visit::visit_pat_ident(self, i);
            }
            fn visit_macro(&mut self, m: &'ast syn::Macro) {
                self.formatted.push_str(&m.tokens.to_string());
            }
            fn visit_item(&mut self, _: &'ast syn::Item) {}
        }
        let mut bound = Bound::default();
        for pat in pats {
            bound.visit_pat(pat);
        }
        bound.visit_block(block);
        let names = bound
            .names
            .into_iter()
            .filter(|name| {
                !keep.contains(&name)
                    && !bound.formatted.contains(&format!("{{{name}}}"))
                    && !bound.formatted.contains(&format!("{{{name}:"))
            })
            .map(|name| {
                let renamed = format_ident!("__offload_{}_{}", name, n);
                (name, renamed)
            })
            .collect();
        Rename { names }
    }

    fn apply(mut self, pats: &mut [syn::Pat], block: &mut Block) {
        use syn::visit_mut::VisitMut;
        for pat in pats {
            self.visit_pat_mut(pat);
        }
        self.visit_block_mut(block);
    }

    fn renamed(&self, ident: &syn::Ident) -> Option<syn::Ident> {
        self.names.get(&ident.to_string()).map(|r| {
            let mut r = r.clone();
            r.set_span(ident.span());
            r
        })
    }

    /// `tokens` with the renamed names replaced, but those after a `.` (fields, methods).
    fn tokens(&self, tokens: TokenStream2) -> TokenStream2 {
        use proc_macro2::{Group, TokenTree};
        let mut after_dot = false;
        tokens
            .into_iter()
            .map(|t| {
                let out = match &t {
                    TokenTree::Ident(i) if !after_dot => {
                        self.renamed(i).map_or(t.clone(), TokenTree::Ident)
                    }
                    TokenTree::Group(g) => {
                        let mut group = Group::new(g.delimiter(), self.tokens(g.stream()));
                        group.set_span(g.span());
                        TokenTree::Group(group)
                    }
                    _ => t.clone(),
                };
                after_dot = matches!(&t, TokenTree::Punct(p) if p.as_char() == '.');
                out
            })
            .collect()
    }
}

impl syn::visit_mut::VisitMut for Rename {
    fn visit_pat_ident_mut(&mut self, i: &mut syn::PatIdent) {
        if let Some(r) = self.renamed(&i.ident) {
            i.ident = r;
        }
        syn::visit_mut::visit_pat_ident_mut(self, i);
    }
    fn visit_expr_path_mut(&mut self, p: &mut syn::ExprPath) {
        if p.qself.is_none()
            && p.path.leading_colon.is_none()
            && let [segment] = &mut *p.path.segments.iter_mut().collect::<Vec<_>>()
            && segment.arguments.is_none()
            && let Some(r) = self.renamed(&segment.ident)
        {
            segment.ident = r;
        }
    }
    fn visit_field_value_mut(&mut self, f: &mut syn::FieldValue) {
        // `S { x }` keeps its field's name: `S { x: __offload_x_0 }`.
        if f.colon_token.is_none() {
            f.colon_token = Some(Default::default());
        }
        self.visit_expr_mut(&mut f.expr);
    }
    fn visit_field_pat_mut(&mut self, f: &mut syn::FieldPat) {
        if f.colon_token.is_none() {
            f.colon_token = Some(Default::default());
        }
        self.visit_pat_mut(&mut f.pat);
    }
    fn visit_macro_mut(&mut self, m: &mut syn::Macro) {
        m.tokens = self.tokens(std::mem::take(&mut m.tokens));
    }
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

#[cfg(test)]
mod tests {
    use quote::{format_ident, quote};

    use super::*;
    use crate::regions::{Plan, plan};

    fn helpers(tokens: TokenStream2) -> Vec<ItemFn> {
        syn::parse2::<Helpers>(tokens).unwrap().0
    }

    fn inlined(body: TokenStream2, fns: TokenStream2) -> Result<Block, String> {
        let body: Block = syn::parse2(quote!({ #body })).unwrap();
        inline(&body, &helpers(fns), &["n".to_owned()])
    }

    fn plan_of(body: TokenStream2, fns: TokenStream2) -> Plan {
        match inlined(body, fns) {
            Ok(b) => plan(&b, &[(format_ident!("n"), false)]),
            Err(reason) => Plan::Coroutines(reason),
        }
    }

    fn reason(plan: Plan) -> String {
        match plan {
            Plan::Coroutines(reason) => reason,
            Plan::Regions { .. } => panic!("split into regions"),
            Plan::NoBarriers => panic!("no barriers found"),
        }
    }

    const SCAN: &str = "
        fn block_scan(s_data: *mut u32, x: u32) -> u32 {
            let pos = thread_idx_x() as usize;
            unsafe { *s_data.add(pos) = x };
            let mut acc = x;
            let mut offset = 1;
            while offset < block_dim_x() as usize {
                sync_threads();
                if pos >= offset {
                    acc += unsafe { *s_data.add(pos - offset) };
                }
                sync_threads();
                unsafe { *s_data.add(pos) = acc };
                offset *= 2;
            }
            acc
        }
        unsafe fn block_total(s_data: *mut u32, x: u32) -> u32 {
            let inclusive = block_scan(s_data, x);
            sync_threads();
            let _ = inclusive;
            unsafe { *s_data.add(block_dim_x() as usize - 1) }
        }
        fn wait() { sync_threads() }
        fn scan_twice(s_data: *mut u32, x: u32) -> u32 {
            let once = block_scan(s_data, x);
            block_scan(s_data, once)
        }
    ";

    fn scan() -> TokenStream2 {
        SCAN.parse().unwrap()
    }

    #[test]
    fn calls_as_statement_values_are_inlined_and_split() {
        let body = quote! {
            let tile = shared_array!(u32, 256);
            let v = thread_idx_x() as u32 * 3;
            let s = block_scan(tile, v);
            let mut total = 0;
            total += unsafe { block_total(tile, s) };
            wait();
            // A function whose value is another's call.
            let twice = scan_twice(tile, s);
            let _ = s + total + n + twice;
        };
        let inlined = inlined(body.clone(), scan())
            .unwrap()
            .to_token_stream()
            .to_string();
        // Arguments bound before the parameters, the value through the return slot.
        assert!(
            inlined.contains("let __offload_arg_0_0 = tile ;"),
            "{inlined}"
        );
        // The function's names are the inlining's own: two inlinings declare none twice.
        assert!(
            inlined.contains("let __offload_s_data_0 : * mut u32 = __offload_arg_0_0 ;"),
            "{inlined}"
        );
        assert!(
            inlined.contains("let mut __offload_offset_0 = 1 ;"),
            "{inlined}"
        );
        assert!(
            inlined.contains("let mut __offload_offset_2 = 1 ;"),
            "{inlined}"
        );
        assert!(
            inlined.contains("let s = unsafe { __offload_ret_0 . assume_init () } ;"),
            "{inlined}"
        );
        // A function called from an inlined one is inlined too; an `unsafe fn`'s body keeps
        // its unsafe context, and the arguments of a call in `unsafe { .. }` theirs.
        assert!(inlined.contains("__offload_ret_2"), "{inlined}");
        assert!(
            inlined.contains("let __offload_arg_1_0 = unsafe { tile } ;"),
            "{inlined}"
        );
        assert!(!inlined.contains("block_scan ("), "{inlined}");
        assert!(!inlined.contains("wait ()"), "{inlined}");
        assert!(inlined.contains("let __offload_tail_"), "{inlined}");
        assert!(!inlined.contains("scan_twice ("), "{inlined}");
        match plan_of(body, scan()) {
            Plan::Regions { block, .. } => {
                let block = block.to_string();
                assert!(!block.contains("sync_threads"), "{block}");
            }
            Plan::Coroutines(reason) => panic!("not split: {reason}"),
            Plan::NoBarriers => panic!("no barriers found"),
        }
    }

    #[test]
    fn calls_inside_expressions_are_taken_out_first() {
        let body = quote! {
            let t = shared_array!(u32, 256);
            let s = 1 + block_scan(t, thread_idx_x() as u32);
            let m = block_scan(t, s) / 2 + block_scan(t, 3);
            let _ = m;
        };
        let inlined = inlined(body.clone(), scan())
            .unwrap()
            .to_token_stream()
            .to_string();
        // In evaluation order, each into a `let` of its own.
        for part in [
            "let s = 1 + __offload_call_0 ;",
            "let m = __offload_call_1 / 2 + __offload_call_2 ;",
        ] {
            assert!(inlined.contains(part), "{part}: {inlined}");
        }
        assert!(!inlined.contains("block_scan ("), "{inlined}");
        assert!(matches!(plan_of(body, scan()), Plan::Regions { .. }));
    }

    #[test]
    fn calls_in_loops_and_branches_are_inlined() {
        let plan = plan_of(
            quote! {
                let tile = shared_array!(u32, 256);
                let mut v = thread_idx_x() as u32;
                for _ in 0..n {
                    v = block_scan(tile, v);
                }
                if block_idx_x() == 0 {
                    wait();
                }
                match n % 2 {
                    0 => wait(),
                    _ => v = block_scan(tile, v),
                }
                let _ = v;
            },
            scan(),
        );
        assert!(matches!(plan, Plan::Regions { .. }));
    }

    #[test]
    fn what_cannot_be_inlined_says_why() {
        let cases = [
            (
                quote! { let t = shared_array!(u32, 256); let s = other(1) + block_scan(t, 1); },
                "it calls `block_scan`, a function with barriers, after a call or assignment",
            ),
            (
                quote! {
                    let t = shared_array!(u32, 256);
                    let s = n > 0 && block_scan(t, 1) > 0;
                },
                "it calls `block_scan`, a function with barriers, on a branch of `&&` or `||`",
            ),
            (
                quote! {
                    let t = shared_array!(u32, 256);
                    let s = [0u32; 2].map(|v| block_scan(t, v));
                },
                "it calls `block_scan`, a function with barriers, inside an expression of a kind",
            ),
            (
                quote! {
                    let t = shared_array!(u32, 256);
                    if block_scan(t, 1) > 0 { sync_threads(); }
                },
                "in the condition or range of a loop or `if`",
            ),
            (
                quote! { let mut x = 1u32; by_ref(&mut x); },
                "it passes a reference to `x` to `by_ref`",
            ),
            (quote! { early(); }, "that returns early"),
            (quote! { generic(1u32); }, "that is generic"),
            (quote! { forever(); }, "more than 16 deep from `forever`"),
            (
                quote! { let _ = own_tile(1); },
                "that declares shared memory (`shared_array!`)",
            ),
        ];
        for (body, why) in cases {
            let all: TokenStream2 = format!(
                "{SCAN} fn by_ref(x: &mut u32) {{ sync_threads(); *x += 1; }}
                 fn early() {{ if thread_idx_x() == 0 {{ return; }} sync_threads(); }}
                 fn generic<T: Copy>(x: T) -> T {{ sync_threads(); x }}
                 fn forever() {{ sync_threads(); forever(); }}
                 fn own_tile(v: u32) -> u32 {{
                     let t = shared_array!(u32, 32); unsafe {{ *t = v }}; sync_threads(); v
                 }}"
            )
            .parse()
            .unwrap();
            let reason = reason(plan_of(body.clone(), all));
            assert!(reason.contains(why), "{body}: {reason}");
        }
    }

    #[test]
    fn renaming_keeps_shadowing_fields_and_formatted_names() {
        let inlined = inlined(
            quote! { let v = 1u32; let _ = f(v); },
            quote! {
                fn f(v: u32) -> u32 {
                    let v = v + 1;
                    let p = P { v, w: v };
                    let P { v, .. } = p;
                    sync_threads();
                    device_println!("{} {w}", p.v, w = v);
                    let shown = v;
                    device_println!("{shown}");
                    v
                }
            },
        )
        .unwrap()
        .to_token_stream()
        .to_string();
        for part in [
            "let __offload_v_0 : u32 = __offload_arg_0_0 ;",
            "let __offload_v_0 = __offload_v_0 + 1 ;",
            "P { v : __offload_v_0 , w : __offload_v_0 }",
            "let P { v : __offload_v_0 , .. } = __offload_p_0 ;",
            // A field after `.` keeps its name; a name a format string reads keeps its own.
            "(\"{} {w}\" , __offload_p_0 . v , w = __offload_v_0)",
            "let shown = __offload_v_0 ;",
        ] {
            assert!(inlined.contains(part), "{part}: {inlined}");
        }
    }

    #[test]
    fn a_reference_to_a_parameter_may_be_passed() {
        let plan = plan_of(
            quote! { let _ = total(&n); },
            quote! { fn total(x: &u32) -> u32 { sync_threads(); *x } },
        );
        assert!(matches!(plan, Plan::Regions { .. }));
    }
}
