//! The syntax rewrites of region code: atomics on the block's shared memory made plain
//! accesses, `return` made a `break` out of the thread's region closure, and the barriers the
//! region form splits at marked for the coroutine path's count.

use std::collections::HashSet;

use proc_macro2::Ident;
use quote::format_ident;
use syn::visit_mut::VisitMut;
use syn::{Expr, Stmt};

use super::syntax::is_barrier_call;
use super::warp;

/// The atomics of `core::sync::atomic` with their integer.
pub(super) const ATOMICS: &[(&str, &str)] = &[
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
pub(super) const ATOMIC_METHODS: &[(&str, usize, &str)] = &[
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
pub(super) const POINTER_ARITHMETIC: &[&str] = &[
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
pub(super) struct SharedAtomics<'a>(pub(super) &'a HashSet<String>);

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
pub(super) struct ReturnToBreak;

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
pub(super) struct MarkBarriers;

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
