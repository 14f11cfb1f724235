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
//!
//! The passes, one module each, depend downwards only: [`inline`] (functions with barriers of
//! a `#[kernels]` module inlined) and [`warp`] (warp operations made exchanges, with [`hoist`])
//! rewrite the body first; [`lower`] splits it into regions and emits them, asking
//! [`analysis`] (uniform and pure values, assignments, block-wide loops), [`check`] (what a
//! region statement cannot hold) and [`pieces`] (regions bounded by thread indices), and
//! rewriting region code with [`rewrite`]. [`scope`] (the locals' kinds) and [`syntax`] (the
//! device API's names, syntax helpers) are the leaves they share.

use proc_macro2::Ident;
use quote::ToTokens;
use syn::visit::Visit;
use syn::{Block, Expr};

mod analysis;
mod check;
mod hoist;
pub(crate) mod inline;
mod lower;
mod pieces;
mod rewrite;
mod scope;
mod syntax;
mod warp;

use analysis::splits;
use lower::Lowering;
pub(crate) use lower::Plan;
pub(crate) use syntax::idents_of;

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

#[cfg(test)]
mod tests;
