//! Taking calls out of the statement they are in: `let t = warp_sum(v) / n;` as `let w =
//! warp_sum(v); let t = w / n;`, so that each such call (a warp operation, a function with
//! barriers) is a statement's whole value, which the region form can split at.
//!
//! The calls then run before the rest of the statement, which is the same where everything the
//! statement evaluates before a call (left of it) has no effect: reads of locals, literals,
//! arithmetic, the index functions and the pure methods of numbers. A call on a path the
//! statement may not take (a branch of `&&`, `||`, an `if` or a `match`; a closure) is not
//! taken out, and the statement keeps the coroutine path.

use proc_macro2::Ident;
use quote::format_ident;
use syn::{Expr, Stmt};

/// What [`hoist`] does with a call it meets.
pub(super) enum Target {
    /// Not one to take out: a call like any other.
    Other,
    /// Take it out; the name says what it is in a refusal (``a warp operation (`warp_sum`)``).
    Take(String),
    /// Refuse the statement, for this reason.
    Refuse(String),
}

/// `stmt` (a `let`, an assignment to a local or an expression statement) with each call that
/// `target` takes replaced by a new local (`{prefix}{n}`, numbered from `*next`), and those
/// locals with their calls, in evaluation order; `Err` with the reason where one cannot be
/// taken out.
pub(super) fn hoist(
    stmt: &Stmt,
    prefix: &str,
    next: &mut usize,
    target: &dyn Fn(&syn::ExprCall) -> Target,
) -> Result<(Vec<(Ident, syn::ExprCall)>, Stmt), Refused> {
    let mut rewritten = stmt.clone();
    let mut hoisting = Hoisting {
        effect: false,
        calls: Vec::new(),
        prefix,
        next: *next,
        target,
        failed: None,
    };
    match &mut rewritten {
        Stmt::Local(l) => {
            if let Some(init) = &mut l.init {
                hoisting.walk(&mut init.expr);
            }
        }
        Stmt::Expr(Expr::Assign(a), _) if is_local(&a.left) => hoisting.walk(&mut a.right),
        Stmt::Expr(Expr::Binary(b), _) if super::syntax::is_compound_assignment(&b.op) => {
            if !is_local(&b.left) {
                return Err(Refused::Place);
            }
            hoisting.walk(&mut b.right);
        }
        Stmt::Expr(e, _) => hoisting.walk(e),
        Stmt::Macro(_) | Stmt::Item(_) => return Err(Refused::Place),
    }
    if let Some(reason) = hoisting.failed {
        return Err(Refused::Because(reason));
    }
    *next = hoisting.next;
    Ok((hoisting.calls, rewritten))
}

/// Why [`hoist`] took nothing out.
pub(super) enum Refused {
    /// The statement adds to a place other than a local (evaluated before the value), or is
    /// a macro or an item.
    Place,
    /// The reason, with what was met.
    Because(String),
}

/// Whether `place` is a local's name (assigning it evaluates nothing).
fn is_local(place: &Expr) -> bool {
    matches!(place, Expr::Path(p) if p.path.get_ident().is_some())
}

/// Free functions of no effect an expression before a taken call may call.
const PURE_FNS: &[&str] = &["from", "min", "max"];

/// The state of [`hoist`]'s walk of an expression in evaluation order.
struct Hoisting<'a> {
    /// Whether something with an effect was evaluated before the point reached.
    effect: bool,
    /// The calls taken out, with the locals that replace them.
    calls: Vec<(Ident, syn::ExprCall)>,
    prefix: &'a str,
    next: usize,
    target: &'a dyn Fn(&syn::ExprCall) -> Target,
    failed: Option<String>,
}

impl Hoisting<'_> {
    /// What `e` holds that this walk would take out, for a refusal's reason.
    fn first_target(&self, e: &Expr) -> Option<String> {
        struct Find<'t>(&'t dyn Fn(&syn::ExprCall) -> Target, Option<String>);
        impl<'ast> syn::visit::Visit<'ast> for Find<'_> {
            fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
                if self.1.is_none()
                    && let Target::Take(what) = (self.0)(c)
                {
                    self.1 = Some(what);
                }
                syn::visit::visit_expr_call(self, c);
            }
            fn visit_macro(&mut self, m: &'ast syn::Macro) {
                // Warp operations are found in macro arguments too.
                if let Ok(e) = m.parse_body_with(
                    syn::punctuated::Punctuated::<Expr, syn::Token![,]>::parse_terminated,
                ) {
                    e.iter().for_each(|e| self.visit_expr(e));
                }
            }
        }
        let mut find = Find(self.target, None);
        syn::visit::Visit::visit_expr(&mut find, e);
        find.1
    }

    fn fail(&mut self, e: &Expr, why: &str) {
        let what = self
            .first_target(e)
            .unwrap_or_else(|| "a call the region form splits at".to_owned());
        self.failed.get_or_insert(format!("{what} {why}"));
    }

    /// Walks `e` in evaluation order, replacing the calls it takes out.
    fn walk(&mut self, e: &mut Expr) {
        if self.failed.is_some() {
            return;
        }
        match e {
            Expr::Lit(_) | Expr::Path(_) => {}
            Expr::Paren(p) => self.walk(&mut p.expr),
            Expr::Group(g) => self.walk(&mut g.expr),
            Expr::Cast(c) => self.walk(&mut c.expr),
            Expr::Unary(u) => self.walk(&mut u.expr),
            Expr::Field(f) => self.walk(&mut f.base),
            Expr::Reference(r) => self.walk(&mut r.expr),
            Expr::Index(i) => {
                self.walk(&mut i.expr);
                self.walk(&mut i.index);
            }
            Expr::Tuple(t) => t.elems.iter_mut().for_each(|e| self.walk(e)),
            Expr::Array(a) => a.elems.iter_mut().for_each(|e| self.walk(e)),
            Expr::Binary(b) if matches!(b.op, syn::BinOp::And(_) | syn::BinOp::Or(_)) => {
                self.walk(&mut b.left);
                if self.first_target(&b.right).is_some() {
                    let right = (*b.right).clone();
                    self.fail(&right, "on a branch of `&&` or `||`");
                }
            }
            Expr::Binary(b) if !super::syntax::is_compound_assignment(&b.op) => {
                self.walk(&mut b.left);
                self.walk(&mut b.right);
            }
            Expr::Call(c) => {
                match (self.target)(c) {
                    Target::Take(_) => {
                        let call = Expr::Call(c.clone());
                        if self.effect {
                            self.fail(&call, "after a call or assignment in the same statement");
                            return;
                        }
                        let name = format_ident!("{}{}", self.prefix, self.next);
                        self.next += 1;
                        self.calls.push((name.clone(), c.clone()));
                        *e = syn::parse_quote!(#name);
                        return;
                    }
                    Target::Refuse(reason) => {
                        self.failed.get_or_insert(reason);
                        return;
                    }
                    Target::Other => {}
                }
                self.walk(&mut c.func);
                c.args.iter_mut().for_each(|a| self.walk(a));
                let pure = matches!(&*c.func, Expr::Path(p) if p.path.segments.last()
                .is_some_and(|s| {
                    let name = s.ident.to_string();
                    PURE_FNS.contains(&name.as_str())
                        || super::syntax::THREAD_FNS.contains(&name.as_str())
                        || super::syntax::BLOCK_FNS.contains(&name.as_str())
                }));
                self.effect |= !pure;
            }
            Expr::MethodCall(m) => {
                self.walk(&mut m.receiver);
                m.args.iter_mut().for_each(|a| self.walk(a));
                let name = m.method.to_string();
                self.effect |=
                    !(super::syntax::PURE_METHODS.contains(&name.as_str()) || name == "from_bits");
            }
            _ => {
                if self.first_target(e).is_some() {
                    let whole = e.clone();
                    self.fail(
                        &whole,
                        "inside an expression of a kind the region form does not take apart",
                    );
                } else {
                    self.effect = true;
                }
            }
        }
    }
}
