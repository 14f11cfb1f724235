//! Barrier discovery's checks: what a region statement holds that a region cannot (a
//! barrier or warp operation inside an expression, a `return` or a jump leaving it).

use syn::Stmt;
use syn::visit::Visit;

use super::syntax::mentions;

/// What a region statement holds that a region cannot: the first such thing as `error`,
/// the kind of a jump out of the statement (`break`, `continue`) as `leaves`.
pub(super) struct Check {
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

pub(super) fn check_stmt(stmt: &Stmt, returns_ok: bool) -> Check {
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
pub(super) fn check_region_stmt(stmt: &Stmt, returns_ok: bool) -> Result<(), String> {
    let check = check_stmt(stmt, returns_ok);
    if let Some(what) = check.leaves {
        return Err(format!(
            "it uses `{what}` to leave a loop around sync_threads()"
        ));
    }
    check.error.map_or(Ok(()), Err)
}

/// The jump (`break` or `continue`) by which `stmt` leaves the loop around it, if any.
pub(super) fn leaving_jump(stmt: &Stmt) -> Option<&'static str> {
    check_stmt(stmt, true).leaves
}
