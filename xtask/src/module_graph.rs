//! ARCHITECTURE.md's invariant "no module cycle inside a crate", checked: every `crate::`,
//! `self::` and `super::` path of a crate's sources (its `use` items and the paths in its code,
//! test modules left out) is an edge between the two sibling modules it crosses, and no set
//! of siblings may reach each other.

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
        /// (from, the path as written, resolved to absolute segments).
        references: Vec<(Module, Vec<String>)>,
    }

    impl FileVisitor<'_> {
        /// `path` (as segments) made absolute from the current module, when it starts at
        /// `crate`, `self` or `super`.
        fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
            let mut base = match segments.first()?.as_str() {
                "crate" => Vec::new(),
                "self" | "super" => self.current.clone(),
                _ => return None,
            };
            let mut rest = &segments[1..];
            if segments[0] == "super" {
                base.pop()?;
            }
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
            base.extend(rest.iter().cloned());
            Some(base)
        }

        fn refer(&mut self, segments: &[String]) {
            if let Some(path) = self.absolute(segments) {
                self.graph.references.push((self.current.clone(), path));
            }
        }

        /// Every path a `use` tree names, each as its segments.
        fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
            match tree {
                syn::UseTree::Path(p) => {
                    prefix.push(p.ident.to_string());
                    Self::use_paths(&p.tree, prefix, out);
                    prefix.pop();
                }
                syn::UseTree::Name(n) => {
                    let mut path = prefix.clone();
                    path.push(n.ident.to_string());
                    out.push(path);
                }
                syn::UseTree::Rename(r) => {
                    let mut path = prefix.clone();
                    path.push(r.ident.to_string());
                    out.push(path);
                }
                syn::UseTree::Glob(_) => out.push(prefix.clone()),
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
            if is_test_only(&item.attrs) {
                return;
            }
            self.current.push(item.ident.to_string());
            self.graph.modules.insert(self.current.clone());
            syn::visit::visit_item_mod(self, item);
            self.current.pop();
        }

        fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
            let mut paths = Vec::new();
            Self::use_paths(&item.tree, &mut Vec::new(), &mut paths);
            for path in paths {
                self.refer(&path);
            }
        }

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

    /// The module cycles of the crate whose sources are under `src` (its `bin/` left out:
    /// each binary there is a crate of its own).
    fn cycles(src: &Path) -> Vec<Vec<Module>> {
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
        // An edge joins the two siblings under the deepest module both ends share; a module
        // using its own ancestor or descendant is no edge.
        let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        for (from, path) in &graph.references {
            let Some(to) = (1..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|m| graph.modules.contains(m))
            else {
                continue;
            };
            let shared = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if shared == from.len() || shared == to.len() {
                continue;
            }
            edges
                .entry(from[..=shared].to_vec())
                .or_default()
                .insert(to[..=shared].to_vec());
        }
        strongly_connected(&edges)
            .into_iter()
            .filter(|c| c.len() > 1)
            .collect()
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
            for cycle in cycles(&krate.join("src")) {
                let names: Vec<String> = cycle.iter().map(|m| m.join("::")).collect();
                let name = krate.file_name().unwrap().to_string_lossy();
                found.push(format!("{name}: {}", names.join(" <-> ")));
            }
        }
        assert!(found.is_empty(), "module cycles:\n{}", found.join("\n"));
    }

    #[test]
    fn a_cycle_through_a_third_module_is_found() {
        let dir = std::env::temp_dir().join(format!("module-graph-{}", std::process::id()));
        let src = dir.join("src");
        std::fs::create_dir_all(src.join("b")).unwrap();
        let write = |path: &str, text: &str| std::fs::write(src.join(path), text).unwrap();
        write("lib.rs", "mod a; mod b; mod c;");
        write("a.rs", "use crate::b::inner::Thing;");
        write("b/mod.rs", "pub mod inner; fn f() { super::c::g(); }");
        write(
            "b/inner.rs",
            "pub struct Thing; #[cfg(test)] mod tests { use crate::a; }",
        );
        write(
            "c.rs",
            "pub fn g() {} mod nested { use super::super::a as _; }",
        );
        let found = cycles(&src);
        std::fs::write(src.join("c.rs"), "pub fn g() {}").unwrap();
        let without = cycles(&src);
        std::fs::remove_dir_all(&dir).unwrap();
        let names: Vec<Vec<String>> = found
            .iter()
            .map(|c| {
                let mut names: Vec<String> = c.iter().map(|m| m.join("::")).collect();
                names.sort();
                names
            })
            .collect();
        assert_eq!(names, [["a", "b", "c"]]);
        assert!(without.is_empty(), "{without:?}");
    }
}
