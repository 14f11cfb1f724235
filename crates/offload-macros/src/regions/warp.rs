//! Warp operations in the region form. Before lowering, each warp operation of the body
//! becomes three statements: the thread's put of its operands into the block's exchange
//! storage, an exchange marker at which the body splits as at a barrier (the block's warps
//! combine their lanes' values there, once per block: `kernel::cpu::warp_exchange` for
//! shuffles and votes, a halving tree or the butterfly for `warp_sum`, `warp_min` and
//! `warp_max`, with the coroutine path's bits), and the take of the thread's result. An
//! operation that is not a statement's whole value (`let t = warp_sum(v) / n;`) is first taken
//! out into a `let` of its own ([`hoist`]). `sync_warp()` becomes a plain split: every thread
//! of the block finishes the region before it before any starts the one after. The `*_masked`
//! forms, and operations that cannot be taken out of their statement, keep the coroutine path.

use proc_macro2::{Ident, TokenStream as TokenStream2};
use quote::{ToTokens, format_ident, quote};
use syn::{Block, Expr, Stmt};

use super::hoist::{Refused, Target};
use super::syntax::{WARP_OPS, mentions};

/// The marker call of an exchange: `__offload_warp_exchange(function, arguments…)`, which
/// runs as `function(arguments…)` once for the block.
pub(super) const EXCHANGE: &str = "__offload_warp_exchange";
/// The marker call of a split with no exchange (`sync_warp()`).
pub(super) const SPLIT: &str = "__offload_warp_split";

/// The exchange storage a rewritten body uses, one per operation: the lowering gives each its
/// lane storage.
#[derive(Default)]
pub(super) struct Exchanges {
    pub(super) storage: Vec<Storage>,
    /// How many warp operations were taken out of larger expressions (see [`hoist`]).
    hoisted: usize,
}

/// One warp operation's lane storage: its words (of type `ty`, or of the operation's value
/// type where `None`) and a shuffle's arguments.
pub(super) struct Storage {
    pub(super) words: Ident,
    pub(super) ty: Option<TokenStream2>,
    pub(super) args: Option<Ident>,
}

/// `body` with its warp operations rewritten, and the exchange storage it needs; `Err` with
/// the reason when one cannot be.
pub(super) fn rewrite(body: &Block) -> Result<(Block, Exchanges), String> {
    let mut exchanges = Exchanges::default();
    let stmts = rewrite_list(&body.stmts, &mut exchanges)?;
    let body = Block {
        brace_token: body.brace_token,
        stmts,
    };
    if let Some(op) = warp_op_in(&body) {
        return Err(format!(
            "it uses a warp operation (`{op}`) inside an expression, not as a statement's value"
        ));
    }
    Ok((body, exchanges))
}

/// The first warp operation `tokens` name, if any.
pub(super) fn warp_op_in(tokens: &impl ToTokens) -> Option<&'static str> {
    let tokens = tokens.to_token_stream();
    WARP_OPS.iter().copied().find(|op| mentions(&tokens, op))
}

/// Whether `tokens` hold a split the rewrite made.
pub(super) fn has_split(tokens: &TokenStream2) -> bool {
    mentions(tokens, EXCHANGE) || mentions(tokens, SPLIT)
}

/// The exchange or split marker `call` is, if any.
pub(super) fn marker(call: &syn::ExprCall) -> Option<&'static str> {
    let Expr::Path(p) = &*call.func else {
        return None;
    };
    let ident = p.path.get_ident()?;
    [EXCHANGE, SPLIT].into_iter().find(|m| ident == m)
}

fn rewrite_list(stmts: &[Stmt], exchanges: &mut Exchanges) -> Result<Vec<Stmt>, String> {
    let mut out = Vec::with_capacity(stmts.len());
    for stmt in stmts {
        if warp_op_in(stmt).is_none() {
            out.push(stmt.clone());
            continue;
        }
        match stmt {
            Stmt::Local(l) => {
                let Some(init) = &l.init else {
                    return Err(unsupported(stmt));
                };
                if init.diverge.is_some() {
                    return Err(unsupported(stmt));
                }
                let (attrs, pat) = (&l.attrs, &l.pat);
                out.extend(rewrite_value(
                    stmt,
                    &init.expr,
                    exchanges,
                    |value| syn::parse_quote!(#(#attrs)* let #pat = #value;),
                )?);
            }
            Stmt::Expr(Expr::Assign(a), _) => {
                let left = &a.left;
                out.extend(rewrite_value(
                    stmt,
                    &a.right,
                    exchanges,
                    |value| syn::parse_quote!(#left = #value;),
                )?);
            }
            Stmt::Expr(Expr::Binary(b), _) if super::syntax::is_compound_assignment(&b.op) => {
                let (left, operator) = (&b.left, &b.op);
                out.extend(rewrite_value(
                    stmt,
                    &b.right,
                    exchanges,
                    |value| syn::parse_quote!(#left #operator #value;),
                )?);
            }
            Stmt::Expr(Expr::Call(c), _) if op_name(c).as_deref() == Some("sync_warp") => {
                if !c.args.is_empty() {
                    return Err(unsupported(stmt));
                }
                let split = format_ident!("{}", SPLIT);
                out.push(syn::parse_quote!(#split();));
            }
            Stmt::Expr(e, semi) if super::syntax::holds_statements(e) => {
                out.push(Stmt::Expr(rewrite_nested(e, exchanges)?, *semi));
            }
            Stmt::Expr(_, Some(_)) => out.extend(hoist(stmt, exchanges)?),
            _ => return Err(unsupported(stmt)),
        }
    }
    Ok(out)
}

/// `stmt`, which gives `value` to a `let` or a place (`finish` makes the statement from the
/// value's tokens): as an operation's expansion where `value` is a warp operation's call,
/// else with the operations in `value` taken out ([`hoist`]).
fn rewrite_value(
    stmt: &Stmt,
    value: &Expr,
    exchanges: &mut Exchanges,
    finish: impl FnOnce(TokenStream2) -> Stmt,
) -> Result<Vec<Stmt>, String> {
    match warp_call(value)? {
        Some(op) => expand(op, exchanges, finish),
        None => hoist(stmt, exchanges),
    }
}

/// Why `stmt`'s warp operation keeps the coroutine path: it is inside a larger expression.
fn unsupported(stmt: &impl ToTokens) -> String {
    let op = warp_op_in(stmt).unwrap_or("a warp operation");
    format!("it uses a warp operation (`{op}`) inside an expression, not as a statement's value")
}

/// A statement that holds statements (`if`, loops, blocks) with its lists rewritten; its
/// conditions and ranges must hold no warp operation.
fn rewrite_nested(expr: &Expr, exchanges: &mut Exchanges) -> Result<Expr, String> {
    let clean = |e: &Expr| match warp_op_in(e) {
        Some(op) => Err(format!(
            "it uses a warp operation (`{op}`) in the condition or range of a loop or `if`"
        )),
        None => Ok(()),
    };
    super::syntax::rewrite_lists(expr, &clean, &mut |stmts| rewrite_list(stmts, exchanges))
}

/// `stmt` (a `let`, an assignment or an expression statement) with each warp operation in it
/// taken out into a `let` of its own before it ([`super::hoist`]), which [`expand`]s as a
/// statement's whole value: `let t = warp_sum(v) / n;` as `let w = warp_sum(v); let t = w / n;`.
fn hoist(stmt: &Stmt, exchanges: &mut Exchanges) -> Result<Vec<Stmt>, String> {
    let target = |c: &syn::ExprCall| match op_name(c) {
        None => Target::Other,
        Some(name) => match warp_call(&Expr::Call(c.clone())) {
            Ok(_) => Target::Take(format!("it uses a warp operation (`{name}`)")),
            Err(reason) => Target::Refuse(reason),
        },
    };
    let (calls, rewritten) = match super::hoist::hoist(
        stmt,
        "__offload_warp_value_",
        &mut exchanges.hoisted,
        &target,
    ) {
        Ok(hoisted) => hoisted,
        Err(Refused::Place) => return Err(unsupported(stmt)),
        Err(Refused::Because(reason)) => return Err(reason),
    };
    let mut out = Vec::new();
    for (name, call) in calls {
        let op = warp_call(&Expr::Call(call))?.expect("a warp operation's call");
        out.extend(expand(
            op,
            exchanges,
            |value| syn::parse_quote!(let #name = #value;),
        )?);
    }
    out.push(rewritten);
    Ok(out)
}

/// A call of one of the warp operations the rewrite takes, with its arguments.
struct WarpCall {
    name: String,
    args: Vec<Expr>,
}

/// `expr` (maybe in parentheses) as a warp operation's call; `Err` for a masked one.
fn warp_call(expr: &Expr) -> Result<Option<WarpCall>, String> {
    let mut expr = expr;
    while let Expr::Paren(p) = expr {
        expr = &p.expr;
    }
    let Expr::Call(c) = expr else {
        return Ok(None);
    };
    let Some(name) = op_name(c) else {
        return Ok(None);
    };
    if name.ends_with("_masked") {
        return Err(format!(
            "it uses a masked warp operation (`{name}`), which the region form does not take"
        ));
    }
    let args: Vec<Expr> = c.args.iter().cloned().collect();
    if args.iter().any(|a| warp_op_in(a).is_some()) {
        return Err(unsupported(expr));
    }
    Ok(Some(WarpCall { name, args }))
}

/// The warp operation `call` calls (the last segment of its path), if it is one.
pub(super) fn op_name(call: &syn::ExprCall) -> Option<String> {
    let Expr::Path(p) = &*call.func else {
        return None;
    };
    let name = p.path.segments.last()?.ident.to_string();
    WARP_OPS.contains(&name.as_str()).then_some(name)
}

/// The statements of one warp operation: `finish` makes the statement that takes the
/// operation's value.
fn expand(
    op: WarpCall,
    exchanges: &mut Exchanges,
    finish: impl FnOnce(TokenStream2) -> Stmt,
) -> Result<Vec<Stmt>, String> {
    if let Some(want) = match op.name.as_str() {
        "shuffle_idx" | "shuffle_up" | "shuffle_down" | "shuffle_xor" => Some(2),
        "ballot" | "warp_any" | "warp_all" | "warp_sum" | "warp_min" | "warp_max" => Some(1),
        _ => None,
    } && op.args.len() != want
    {
        return Err(format!(
            "it calls `{}` with {} arguments",
            op.name,
            op.args.len()
        ));
    }
    let n = exchanges.storage.len();
    let words = format_ident!("__offload_warp_words_{}", n);
    let args = format_ident!("__offload_warp_args_{}", n);
    let slot = format_ident!("__offload_warp_slot_{}", n);
    let exchange = format_ident!("{}", EXCHANGE);
    let private = quote!(::offload_rt::__private);
    let mut out: Vec<Stmt> = Vec::new();
    match op.name.as_str() {
        "shuffle_idx" | "shuffle_up" | "shuffle_down" | "shuffle_xor" => {
            let mode = format_ident!(
                "{}",
                match op.name.as_str() {
                    "shuffle_idx" => "Idx",
                    "shuffle_up" => "Up",
                    "shuffle_down" => "Down",
                    _ => "Xor",
                }
            );
            exchanges.storage.push(Storage {
                words: words.clone(),
                ty: Some(quote!(u64)),
                args: Some(args.clone()),
            });
            let (value, arg) = (&op.args[0], &op.args[1]);
            out.push(syn::parse_quote! {
                let #slot = #private::warp_put(#words, #args, __offload_t, #value, #arg);
            });
            out.push(syn::parse_quote! {
                #exchange(#private::warp_exchange, #words, #args,
                    #private::WarpExchange::Shuffle(#private::Shuffle::#mode));
            });
            out.push(finish(
                quote!(#private::warp_take(#words, __offload_t, #slot)),
            ));
        }
        "ballot" | "warp_any" | "warp_all" => {
            exchanges.storage.push(Storage {
                words: words.clone(),
                ty: Some(quote!(u64)),
                args: None,
            });
            let predicate = &op.args[0];
            let (how, taken) = match op.name.as_str() {
                "ballot" => (quote!(Ballot), quote!(warp_take_mask)),
                "warp_any" => (quote!(Any), quote!(warp_take_bool)),
                _ => (quote!(All), quote!(warp_take_bool)),
            };
            out.push(syn::parse_quote! {
                #private::warp_put_predicate(#words, __offload_t, #predicate);
            });
            out.push(syn::parse_quote! {
                #exchange(#private::warp_exchange, #words, ::core::ptr::null(),
                    #private::WarpExchange::#how);
            });
            out.push(finish(quote!(#private::#taken(#words, __offload_t))));
        }
        "warp_sum" | "warp_min" | "warp_max" => {
            // The values themselves in the storage (its type inferred from them), and the
            // whole butterfly in one exchange.
            exchanges.storage.push(Storage {
                words: words.clone(),
                ty: None,
                args: None,
            });
            let step = format_ident!("{}_step", op.name);
            let value = &op.args[0];
            out.push(syn::parse_quote! {
                #private::lane_write(#words, __offload_t, #value);
            });
            out.push(if op.name == "warp_sum" {
                syn::parse_quote!(#exchange(#private::warp_sum_tree, #words);)
            } else {
                syn::parse_quote!(#exchange(#private::warp_butterfly, #words, #private::#step);)
            });
            out.push(finish(quote!(#private::lane_read(#words, __offload_t))));
        }
        other => {
            return Err(format!(
                "it uses a warp operation (`{other}`) the region form does not take"
            ));
        }
    }
    Ok(out)
}
