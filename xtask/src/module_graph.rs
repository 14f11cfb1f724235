//! ARCHITECTURE.md's invariant "no module cycle inside a crate", checked over every module of
//! each crate: every path of a crate's sources (its `use` items and the paths in its code, test
//! modules left out) that names one of the crate's modules, seen through the `use` items that
//! re-export it, is an edge from the module it is written in to the module it names. A module
//! also depends on the modules it declares, so a child naming its parent or any other ancestor
//! (`use super::helper`, `crate::helper` for an item of the crate root) closes a cycle. A path
//! into a sibling's subtree is also an edge between the two siblings, so no set of siblings
//! may reach each other through their descendants either.

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    use syn::visit::Visit;

    /// A module's path below its crate root: `["host", "stream"]`.
    type Module = Vec<String>;

    /// The modules of one file: the file's own and the inline ones in it.
    struct FileVisitor<'g> {
        /// The module being read (the file's, then inline ones within it).
        current: Module,
        /// Every module seen, and the modules each one's paths name.
        graph: &'g mut Graph,
    }

    #[derive(Default)]
    struct Graph {
        modules: BTreeSet<Module>,
        /// Modules declared `#[cfg(test)]`: they and their files are left out.
        test_only: BTreeSet<Module>,
        /// (from, the path as written).
        references: Vec<(Module, Vec<String>)>,
        /// The names a module's `use` items bring in: (module, name) to the path as written.
        aliases: BTreeMap<(Module, String), Vec<String>>,
    }

    impl Graph {
        /// `segments`, written in module `from`, as a path from the crate root: `crate`,
        /// `self` and `super` resolved, a first segment naming a child module or a name a
        /// `use` brought in followed, and every name re-exported on the way replaced by what
        /// it names. `None` for a path outside the crate (another crate, a local).
        fn resolve(&self, from: &Module, segments: &[String], depth: usize) -> Option<Vec<String>> {
            if depth > 16 {
                return None;
            }
            let first = segments.first()?;
            let mut path = match first.as_str() {
                "crate" => Vec::new(),
                "self" => from.clone(),
                "super" => from[..from.len().checked_sub(1)?].to_vec(),
                _ => {
                    let mut child = from.clone();
                    child.push(first.clone());
                    if self.modules.contains(&child) {
                        from.clone()
                    } else {
                        let alias = self.aliases.get(&(from.clone(), first.clone()))?;
                        let mut path = self.resolve(from, alias, depth + 1)?;
                        path.extend(segments[1..].iter().cloned());
                        return self.follow(path, depth + 1);
                    }
                }
            };
            let mut rest = if first == "crate" || first == "self" || first == "super" {
                &segments[1..]
            } else {
                segments
            };
            while rest.first().is_some_and(|s| s == "super") {
                path.pop()?;
                rest = &rest[1..];
            }
            path.extend(rest.iter().cloned());
            self.follow(path, depth + 1)
        }

        /// An absolute `path` with the first name that a module of it re-exports replaced by
        /// what it names, again until none is left.
        fn follow(&self, path: Vec<String>, depth: usize) -> Option<Vec<String>> {
            for at in 0..path.len() {
                let module = path[..at].to_vec();
                if !self.modules.contains(&module) {
                    break;
                }
                let mut child = module.clone();
                child.push(path[at].clone());
                if self.modules.contains(&child) {
                    continue;
                }
                let Some(alias) = self.aliases.get(&(module.clone(), path[at].clone())) else {
                    break;
                };
                let mut target = self.resolve(&module, alias, depth + 1)?;
                target.extend(path[at + 1..].iter().cloned());
                return self.follow(target, depth + 1);
            }
            Some(path)
        }

        /// The deepest module of the crate that an absolute `path` lies in.
        fn module_of(&self, path: &[String]) -> Module {
            (0..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|m| self.modules.contains(m))
                .unwrap_or_default()
        }

        fn in_test(&self, module: &Module) -> bool {
            (0..=module.len()).any(|n| self.test_only.contains(&module[..n]))
        }
    }

    impl FileVisitor<'_> {
        fn refer(&mut self, segments: &[String]) {
            if !segments.is_empty() {
                self.graph
                    .references
                    .push((self.current.clone(), segments.to_vec()));
            }
        }

        /// Every path a `use` tree names, each as its segments, with the name it brings in
        /// (`None` for a glob).
        fn use_paths(
            tree: &syn::UseTree,
            prefix: &mut Vec<String>,
            out: &mut Vec<(Option<String>, Vec<String>)>,
        ) {
            match tree {
                syn::UseTree::Path(p) => {
                    prefix.push(p.ident.to_string());
                    Self::use_paths(&p.tree, prefix, out);
                    prefix.pop();
                }
                syn::UseTree::Name(n) => {
                    let mut path = prefix.clone();
                    if n.ident != "self" {
                        path.push(n.ident.to_string());
                    }
                    let name = path.last().cloned().unwrap_or_default();
                    out.push((Some(name), path));
                }
                syn::UseTree::Rename(r) => {
                    let mut path = prefix.clone();
                    if r.ident != "self" {
                        path.push(r.ident.to_string());
                    }
                    out.push((Some(r.rename.to_string()), path));
                }
                syn::UseTree::Glob(_) => out.push((None, prefix.clone())),
                syn::UseTree::Group(g) => {
                    for item in &g.items {
                        Self::use_paths(item, prefix, out);
                    }
                }
            }
        }
    }

    fn is_test_only(attrs: &[syn::Attribute]) -> bool {
        attrs.iter().any(|a| {
            a.path().is_ident("cfg")
                && a.parse_args::<syn::Ident>()
                    .is_ok_and(|ident| ident == "test")
        })
    }

    impl<'ast> Visit<'ast> for FileVisitor<'_> {
        fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
            self.current.push(item.ident.to_string());
            if is_test_only(&item.attrs) {
                self.graph.test_only.insert(self.current.clone());
            } else {
                self.graph.modules.insert(self.current.clone());
                syn::visit::visit_item_mod(self, item);
            }
            self.current.pop();
        }

        fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
            let mut paths = Vec::new();
            Self::use_paths(&item.tree, &mut Vec::new(), &mut paths);
            for (name, path) in paths {
                if let Some(name) = name.filter(|n| n != "_") {
                    self.graph
                        .aliases
                        .insert((self.current.clone(), name), path.clone());
                }
                self.refer(&path);
            }
        }

        /// `pub(super)`, `pub(in crate::a)`: who may see an item, not what it uses.
        fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

        fn visit_path(&mut self, path: &'ast syn::Path) {
            let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            self.refer(&segments);
            syn::visit::visit_path(self, path);
        }
    }

    /// The module a file is, from its place under `src` (`host/mod.rs` and `host.rs` are
    /// `host`).
    fn file_module(src: &Path, file: &Path) -> Module {
        let mut module: Module = file
            .strip_prefix(src)
            .unwrap()
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if module.len() == 1 && (module[0] == "lib" || module[0] == "main")
            || module.last().is_some_and(|m| m == "mod")
        {
            module.pop();
        }
        module
    }

    /// The module cycles of the crate whose sources are under `src`, each as its modules.
    fn cycles(src: &Path) -> Vec<Vec<Module>> {
        strongly_connected(&module_edges(src))
            .into_iter()
            .filter(|c| c.len() > 1)
            .collect()
    }

    /// The module graph of the crate whose sources are under `src` (its `bin/` left out: each
    /// binary there is a crate of its own): each module and the modules it depends on.
    fn module_edges(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
        let files = crate::rust_sources(src);
        let mut graph = Graph::default();
        for file in files.iter().filter(|f| !f.starts_with(src.join("bin"))) {
            let text = std::fs::read_to_string(file).unwrap();
            let syntax =
                syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let module = file_module(src, file);
            graph.modules.insert(module.clone());
            let mut visitor = FileVisitor {
                current: module,
                graph: &mut graph,
            };
            visitor.visit_file(&syntax);
        }
        let tested: Vec<Module> = graph
            .modules
            .iter()
            .filter(|m| graph.in_test(m))
            .cloned()
            .collect();
        for module in tested {
            graph.modules.remove(&module);
        }
        let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        // A module depends on the modules it declares.
        for module in &graph.modules {
            if let Some((_, parent)) = module.split_last() {
                edges
                    .entry(parent.to_vec())
                    .or_default()
                    .insert(module.clone());
            }
        }
        for (from, path) in &graph.references {
            if graph.in_test(from) {
                continue;
            }
            let Some(path) = graph.resolve(from, path, 0) else {
                continue;
            };
            let to = graph.module_of(&path);
            if &to == from {
                continue;
            }
            edges.entry(from.clone()).or_default().insert(to.clone());
            // And between the two siblings under the deepest module both ends share.
            let shared = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if shared < from.len() && shared < to.len() {
                edges
                    .entry(from[..=shared].to_vec())
                    .or_default()
                    .insert(to[..=shared].to_vec());
            }
        }
        edges
    }

    /// A module's name in a report: its path, `crate` for the root.
    fn name(module: &Module) -> String {
        if module.is_empty() {
            "crate".to_string()
        } else {
            module.join("::")
        }
    }

    /// Tarjan's strongly connected components.
    fn strongly_connected(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
        struct State<'e> {
            edges: &'e BTreeMap<Module, BTreeSet<Module>>,
            index: BTreeMap<&'e Module, (usize, usize)>,
            stack: Vec<&'e Module>,
            out: Vec<Vec<Module>>,
        }
        fn visit<'e>(s: &mut State<'e>, v: &'e Module) {
            let n = s.index.len();
            s.index.insert(v, (n, n));
            s.stack.push(v);
            for w in s.edges.get(v).into_iter().flatten() {
                let low = match s.index.get(w) {
                    None => {
                        visit(s, w);
                        s.index[w].1
                    }
                    Some(&(index, _)) if s.stack.contains(&w) => index,
                    Some(_) => continue,
                };
                let entry = s.index.get_mut(v).unwrap();
                entry.1 = entry.1.min(low);
            }
            let (index, low) = s.index[v];
            if index == low {
                let mut component = Vec::new();
                while let Some(w) = s.stack.pop() {
                    component.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                s.out.push(component);
            }
        }
        let mut state = State {
            edges,
            index: BTreeMap::new(),
            stack: Vec::new(),
            out: Vec::new(),
        };
        for v in edges.keys() {
            if !state.index.contains_key(v) {
                visit(&mut state, v);
            }
        }
        state.out
    }

    #[test]
    fn no_crate_has_a_module_cycle() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut found = Vec::new();
        for entry in std::fs::read_dir(root.join("crates")).unwrap() {
            let krate = entry.unwrap().path();
            let krate_name = krate.file_name().unwrap().to_string_lossy().into_owned();
            let edges = module_edges(&krate.join("src"));
            for cycle in strongly_connected(&edges).iter().filter(|c| c.len() > 1) {
                let names: Vec<String> = cycle.iter().map(name).collect();
                found.push(format!("{krate_name}: {}", names.join(" <-> ")));
                // The uses that close it (a module's use of its own descendants is implied).
                for from in cycle {
                    for to in edges[from].iter().filter(|to| cycle.contains(to)) {
                        if !to.starts_with(from) {
                            found.push(format!("    {} uses {}", name(from), name(to)));
                        }
                    }
                }
            }
        }
        assert!(found.is_empty(), "module cycles:\n{}", found.join("\n"));
    }

    /// The cycles of a crate made of `files` (path under `src`, text), each sorted.
    fn cycles_of(files: &[(&str, &str)]) -> Vec<Vec<String>> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("module-graph-{}-{n}", std::process::id()));
        let src = dir.join("src");
        for (path, text) in files {
            let path = src.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let found = cycles(&src);
        std::fs::remove_dir_all(&dir).unwrap();
        found
            .iter()
            .map(|c| {
                let mut names: Vec<String> = c.iter().map(name).collect();
                names.sort();
                names
            })
            .collect()
    }

    #[test]
    fn a_child_using_an_ancestor_is_a_cycle() {
        let lib = "mod a; fn helper() {}";
        let a = "mod inner; pub(super) fn f() {}";
        assert_eq!(
            cycles_of(&[
                ("lib.rs", lib),
                ("a/mod.rs", a),
                ("a/inner.rs", "fn g() { super::f() }")
            ]),
            [["a", "a::inner"]]
        );
        assert_eq!(
            cycles_of(&[
                ("lib.rs", lib),
                ("a/mod.rs", a),
                ("a/inner.rs", "use crate::helper;")
            ]),
            [["a", "a::inner", "crate"]]
        );
        // Downwards only: a parent using its child, a visibility naming the parent.
        assert!(
            cycles_of(&[
                ("lib.rs", "mod a; use a::inner::g;"),
                ("a/mod.rs", "pub mod inner; fn f() { inner::g() }"),
                (
                    "a/inner.rs",
                    "pub(super) fn g() {} pub(in crate::a) fn h() {}"
                ),
            ])
            .is_empty()
        );
    }

    #[test]
    fn a_reexport_is_seen_through() {
        // `crate::Thing` is `b::Thing`: `a` uses `b`, not the root.
        let files = [
            ("lib.rs", "mod a; mod b; pub use b::Thing;"),
            ("a.rs", "fn f(_: crate::Thing) {}"),
            ("b.rs", "pub struct Thing;"),
        ];
        assert!(cycles_of(&files).is_empty());
        // And `b` using `a` through the root's re-export closes a cycle.
        let files = [
            ("lib.rs", "mod a; mod b; pub use a::g; pub use b::Thing;"),
            ("a.rs", "pub fn g() {} fn f(_: crate::Thing) {}"),
            ("b.rs", "pub struct Thing; fn h() { crate::g() }"),
        ];
        assert_eq!(cycles_of(&files), [["a", "b"]]);
    }

    #[test]
    fn a_cycle_through_a_third_module_is_found() {
        let mut files = vec![
            ("lib.rs", "mod a; mod b; mod c;"),
            ("a.rs", "use crate::b::inner::Thing;"),
            ("b/mod.rs", "pub mod inner; fn f() { super::c::g(); }"),
            (
                "b/inner.rs",
                "pub struct Thing; #[cfg(test)] mod tests { use crate::a; }",
            ),
            (
                "c.rs",
                "pub fn g() {} mod nested { use super::super::a as _; }",
            ),
        ];
        assert_eq!(cycles_of(&files), [["a", "b", "c", "c::nested"]]);
        files[4].1 = "pub fn g() {}";
        let without = cycles_of(&files);
        assert!(without.is_empty(), "{without:?}");
    }
}
