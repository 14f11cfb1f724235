//! Each library crate's public API, listed from its sources and kept as a snapshot in
//! `xtask/public-api/<crate>.txt`, so that a change to what a crate exports shows in review and
//! a helper made `pub` by mistake fails this test. An item is listed when a path of public
//! modules reaches it from the crate root; `#[doc(hidden)]` items and modules are listed with
//! `hidden`, the paths that hold a crate's internals for its own tools and tests. `pub use`
//! re-exports are listed as written; methods of public types' inherent `impl`s under the type.
//! Bless: `OFFLOAD_BLESS=1 cargo test -p xtask public_api`.

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    use quote::ToTokens as _;

    /// The crates whose API is listed, with their library root.
    const CRATES: &[&str] = &[
        "offload-format",
        "offload-toolchain",
        "offload-build",
        "offload-rt",
        "offload-macros",
        "offload-tools",
        "cargo-offload",
    ];

    const BLESS: &str = "OFFLOAD_BLESS=1 cargo test -p xtask public_api";

    struct Lister {
        crate_name: String,
        lines: BTreeSet<String>,
        /// Names of the public types, for their inherent methods.
        types: BTreeSet<String>,
        /// (module path, self type, method) of inherent impls, kept until every type is known.
        methods: Vec<(String, String, String, bool)>,
        proc_macro: bool,
    }

    fn is_pub(vis: &syn::Visibility) -> bool {
        matches!(vis, syn::Visibility::Public(_))
    }

    fn has_attr(attrs: &[syn::Attribute], name: &str) -> bool {
        attrs.iter().any(|a| a.path().is_ident(name))
    }

    fn is_test(attrs: &[syn::Attribute]) -> bool {
        attrs.iter().any(|a| {
            a.path().is_ident("cfg") && a.meta.to_token_stream().to_string().contains("test")
        })
    }

    fn is_hidden(attrs: &[syn::Attribute]) -> bool {
        attrs.iter().any(|a| {
            a.path().is_ident("doc") && a.meta.to_token_stream().to_string().contains("hidden")
        })
    }

    /// `cfg(…) ` for an item compiled only under a condition, as written.
    fn cfg_prefix(attrs: &[syn::Attribute]) -> String {
        attrs
            .iter()
            .filter(|a| a.path().is_ident("cfg"))
            .map(|a| format!("#[{}] ", a.meta.to_token_stream()))
            .collect()
    }

    fn use_tree(tree: &syn::UseTree, prefix: &str, out: &mut Vec<(String, String)>) {
        let join = |p: &str, s: &str| {
            if p.is_empty() {
                s.to_owned()
            } else {
                format!("{p}::{s}")
            }
        };
        match tree {
            syn::UseTree::Path(p) => use_tree(&p.tree, &join(prefix, &p.ident.to_string()), out),
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                if name == "self" {
                    let last = prefix.rsplit("::").next().unwrap_or(prefix).to_owned();
                    out.push((last, prefix.to_owned()));
                } else {
                    out.push((name.clone(), join(prefix, &name)));
                }
            }
            syn::UseTree::Rename(r) => {
                out.push((r.rename.to_string(), join(prefix, &r.ident.to_string())));
            }
            syn::UseTree::Glob(_) => out.push(("*".to_owned(), join(prefix, "*"))),
            syn::UseTree::Group(g) => {
                for item in &g.items {
                    use_tree(item, prefix, out);
                }
            }
        }
    }

    impl Lister {
        fn add(
            &mut self,
            module: &str,
            kind: &str,
            name: &str,
            attrs: &[syn::Attribute],
            hidden: bool,
        ) {
            let hidden = if hidden || is_hidden(attrs) {
                "hidden "
            } else {
                ""
            };
            self.lines.insert(format!(
                "{}{hidden}{kind} {module}::{name}",
                cfg_prefix(attrs)
            ));
        }

        /// The items of one module, `module` its path from the crate root, `dir` where its
        /// child modules' files are.
        fn items(&mut self, items: &[syn::Item], module: &str, dir: &Path, hidden: bool) {
            for item in items {
                match item {
                    syn::Item::Mod(m) if is_pub(&m.vis) && !is_test(&m.attrs) => {
                        let name = m.ident.to_string();
                        let path = format!("{module}::{name}");
                        let hidden = hidden || is_hidden(&m.attrs);
                        self.add(module, "mod", &name, &m.attrs, hidden);
                        let child_dir = dir.join(&name);
                        if let Some((_, inline)) = &m.content {
                            self.items(inline, &path, &child_dir, hidden);
                        } else {
                            let file = m
                                .attrs
                                .iter()
                                .find(|a| a.path().is_ident("path"))
                                .and_then(|a| match &a.meta {
                                    syn::Meta::NameValue(nv) => match &nv.value {
                                        syn::Expr::Lit(syn::ExprLit {
                                            lit: syn::Lit::Str(s),
                                            ..
                                        }) => Some(dir.join(s.value())),
                                        _ => None,
                                    },
                                    _ => None,
                                })
                                .or_else(|| {
                                    [dir.join(format!("{name}.rs")), child_dir.join("mod.rs")]
                                        .into_iter()
                                        .find(|p| p.is_file())
                                })
                                .unwrap_or_else(|| panic!("no file for module {path}"));
                            self.file(&file, &path, &child_dir, hidden);
                        }
                    }
                    syn::Item::Fn(f) if self.proc_macro => {
                        for (attr, kind) in [
                            ("proc_macro", "proc-macro"),
                            ("proc_macro_attribute", "attribute-macro"),
                            ("proc_macro_derive", "derive-macro"),
                        ] {
                            if has_attr(&f.attrs, attr) {
                                self.add(module, kind, &f.sig.ident.to_string(), &f.attrs, hidden);
                            }
                        }
                    }
                    syn::Item::Fn(f) if is_pub(&f.vis) && !is_test(&f.attrs) => {
                        self.add(module, "fn", &f.sig.ident.to_string(), &f.attrs, hidden);
                    }
                    syn::Item::Struct(s) if is_pub(&s.vis) => {
                        let name = s.ident.to_string();
                        self.add(module, "struct", &name, &s.attrs, hidden);
                        for field in &s.fields {
                            if let (true, Some(ident)) = (is_pub(&field.vis), &field.ident) {
                                self.add(
                                    &format!("{module}::{name}"),
                                    "field",
                                    &ident.to_string(),
                                    &field.attrs,
                                    hidden,
                                );
                            }
                        }
                        self.types.insert(name);
                    }
                    syn::Item::Enum(e) if is_pub(&e.vis) => {
                        let name = e.ident.to_string();
                        self.add(module, "enum", &name, &e.attrs, hidden);
                        self.types.insert(name);
                    }
                    syn::Item::Union(u) if is_pub(&u.vis) => {
                        self.add(module, "union", &u.ident.to_string(), &u.attrs, hidden);
                    }
                    syn::Item::Trait(t) if is_pub(&t.vis) => {
                        self.add(module, "trait", &t.ident.to_string(), &t.attrs, hidden);
                    }
                    syn::Item::Type(t) if is_pub(&t.vis) => {
                        self.add(module, "type", &t.ident.to_string(), &t.attrs, hidden);
                    }
                    syn::Item::Const(c) if is_pub(&c.vis) => {
                        self.add(module, "const", &c.ident.to_string(), &c.attrs, hidden);
                    }
                    syn::Item::Static(s) if is_pub(&s.vis) => {
                        self.add(module, "static", &s.ident.to_string(), &s.attrs, hidden);
                    }
                    syn::Item::Macro(m) if has_attr(&m.attrs, "macro_export") => {
                        if let Some(ident) = &m.ident {
                            let root = self.crate_name.clone();
                            self.add(&root, "macro", &ident.to_string(), &m.attrs, hidden);
                        }
                    }
                    syn::Item::Use(u) if is_pub(&u.vis) && !is_test(&u.attrs) => {
                        let mut names = Vec::new();
                        use_tree(&u.tree, "", &mut names);
                        let hidden = if hidden || is_hidden(&u.attrs) {
                            "hidden "
                        } else {
                            ""
                        };
                        for (name, from) in names {
                            self.lines.insert(format!(
                                "{}{hidden}use {module}::{name} = {from}",
                                cfg_prefix(&u.attrs)
                            ));
                        }
                    }
                    syn::Item::Impl(i) if i.trait_.is_none() && !is_test(&i.attrs) => {
                        let syn::Type::Path(ty) = &*i.self_ty else {
                            continue;
                        };
                        let Some(last) = ty.path.segments.last() else {
                            continue;
                        };
                        for inner in &i.items {
                            if let syn::ImplItem::Fn(f) = inner
                                && is_pub(&f.vis)
                                && !is_test(&f.attrs)
                            {
                                self.methods.push((
                                    module.to_owned(),
                                    last.ident.to_string(),
                                    f.sig.ident.to_string(),
                                    hidden || is_hidden(&f.attrs) || is_hidden(&i.attrs),
                                ));
                            }
                        }
                    }
                    _ => {}
                }
            }
        }

        fn file(&mut self, path: &Path, module: &str, dir: &Path, hidden: bool) {
            let text = std::fs::read_to_string(path)
                .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            let file = syn::parse_file(&text)
                .unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
            self.items(&file.items, module, dir, hidden);
        }
    }

    fn listing(krate: &str, root: &Path) -> String {
        let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
        let mut lister = Lister {
            crate_name: krate.replace('-', "_"),
            lines: BTreeSet::new(),
            types: BTreeSet::new(),
            methods: Vec::new(),
            proc_macro: manifest.contains("proc-macro = true"),
        };
        let src = root.join("src");
        let name = lister.crate_name.clone();
        lister.file(&src.join("lib.rs"), &name, &src, false);
        for (module, ty, method, hidden) in std::mem::take(&mut lister.methods) {
            if lister.types.contains(&ty) {
                let hidden = if hidden { "hidden " } else { "" };
                lister
                    .lines
                    .insert(format!("{hidden}fn {module}::{ty}::{method}"));
            }
        }
        let shown = lister
            .lines
            .iter()
            .filter(|l| !l.contains("hidden "))
            .count();
        let mut text = format!(
            "# The public API of `{krate}`, from its sources ({shown} items; {} hidden). \
             Generated: run `{BLESS}`.\n",
            lister.lines.len() - shown
        );
        for line in &lister.lines {
            text.push_str(line);
            text.push('\n');
        }
        text
    }

    #[test]
    fn public_api_is_current() {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let snapshots = workspace.join("xtask/public-api");
        let bless = std::env::var_os("OFFLOAD_BLESS").is_some_and(|v| v == "1");
        let mut stale = Vec::new();
        for krate in CRATES {
            let expected = listing(krate, &workspace.join("crates").join(krate));
            let path: PathBuf = snapshots.join(format!("{krate}.txt"));
            if bless {
                std::fs::create_dir_all(&snapshots).unwrap();
                std::fs::write(&path, &expected).unwrap();
                continue;
            }
            if std::fs::read_to_string(&path).unwrap_or_default() != expected {
                stale.push(path.strip_prefix(&workspace).unwrap().display().to_string());
            }
        }
        assert!(
            stale.is_empty(),
            "the public API differs from the snapshots {stale:?}: if the change is meant, run \
             `{BLESS}` and commit the result"
        );
    }
}
