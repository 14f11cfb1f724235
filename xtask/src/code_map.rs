//! ARCHITECTURE.md against the tree: its code map covers the repository's directories, every
//! path it names exists, and every architecture invariant names what enforces it. Files are
//! not listed one by one (their modules' doc comments describe them); directories are.
//!
//! The rules, for the `### ` headings of the `## Code Map` section, each written as a
//! backticked path from the repository root (`` ### `crates/offload-rt/src/backend` ``):
//!
//! - every heading names a directory or file that exists;
//! - exactly headed: every top-level directory (`xtask`, `fuzz`, `examples`, …; hidden ones,
//!   `target` and `crates` itself left out), every crate directory `crates/<name>`, and every
//!   directory directly in a crate other than cargo's own `src`, `tests`, `benches` and
//!   `examples` (such as `crates/cargo-offload/templates`);
//! - headed exactly or by an ancestor below `src`: every directory under a crate's `src`
//!   (`crates/<name>/src`, `xtask/src`) that holds a `.rs` file. `crates/offload-rt/src/backend`
//!   covers `crates/offload-rt/src/backend/cpu`, but the crate's own heading covers none of
//!   its source directories: a new one needs a heading of its own or an ancestor's.
//!
//! Anywhere in the document (fenced code blocks left out), a backticked span is a repository
//! path when it is one word of path characters with a `/`, not absolute, and ends in `.rs` or
//! `/` or starts with a top-level entry of the repository (`crates/`, `xtask/`, …); such a path
//! must exist. `kernels/f` (a feature) or `offload/<lib>.offload` (a pattern) are not paths.
//!
//! Each paragraph that starts with `**Architecture Invariant:**` names at least one existing
//! repository path (the test, lint or file that enforces it), and every test it names, written
//! as ``test `name` `` (or ``tests `a`, `b` and `c` ``), is a `fn` of that name in a `.rs` file
//! the paragraph names (or under a directory it names).

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// Cargo's own directories of a package, described by the crate's heading.
    const CARGO_DIRS: &[&str] = &["src", "tests", "benches", "examples", "target"];

    /// The backticked spans of `text`, each with the text before it since the previous span.
    fn spans(text: &str) -> Vec<(&str, &str)> {
        let parts: Vec<&str> = text.split('`').collect();
        parts
            .chunks(2)
            .filter(|pair| pair.len() == 2)
            .map(|pair| (pair[0], pair[1]))
            .collect()
    }

    /// The document without its fenced code blocks.
    fn prose(doc: &str) -> String {
        let mut out = String::new();
        let mut fenced = false;
        for line in doc.lines() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
            } else if !fenced {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }

    /// Whether a backticked span is meant as a path of the repository (see the module's doc).
    fn is_repo_path(root: &Path, span: &str) -> bool {
        let path_chars = span
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c));
        if !path_chars || !span.contains('/') || span.starts_with('/') {
            return false;
        }
        let first = span.split('/').next().unwrap_or_default();
        span.ends_with(".rs")
            || span.ends_with('/')
            || (!first.is_empty() && root.join(first).exists())
    }

    fn exists(root: &Path, span: &str) -> bool {
        root.join(span.trim_end_matches('/')).exists()
    }

    /// The subdirectories of `dir`, hidden ones and `target` left out.
    fn subdirs(dir: &Path) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .filter(|p| {
                        let name = p.file_name().unwrap().to_string_lossy();
                        !name.starts_with('.') && name != "target"
                    })
                    .collect()
            })
            .unwrap_or_default();
        dirs.sort();
        dirs
    }

    /// The directories under `src` (itself left out) that hold a `.rs` file directly.
    fn source_dirs(src: &Path, out: &mut Vec<PathBuf>) {
        for dir in subdirs(src) {
            let holds_rust = std::fs::read_dir(&dir)
                .unwrap()
                .flatten()
                .any(|e| e.path().is_file() && e.path().extension().is_some_and(|x| x == "rs"));
            if holds_rust {
                out.push(dir.clone());
            }
            source_dirs(&dir, out);
        }
    }

    fn relative(root: &Path, path: &Path) -> String {
        path.strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    /// What is wrong with `doc` as the architecture document of the tree at `root`.
    fn problems(root: &Path, doc: &str) -> Vec<String> {
        let mut found = Vec::new();
        let text = prose(doc);

        // The code map's headings.
        let map = text
            .split("\n## ")
            .find(|s| s.starts_with("Code Map\n"))
            .unwrap_or_default();
        if map.is_empty() {
            found.push("no `## Code Map` section".to_owned());
        }
        let mut headings = Vec::new();
        for line in map.lines().filter(|l| l.starts_with("### ")) {
            let heading = line[4..].trim();
            match heading.strip_prefix('`').and_then(|h| h.strip_suffix('`')) {
                Some(path) if !path.contains('`') && exists(root, path) => {
                    headings.push(path.trim_end_matches('/').to_owned());
                }
                Some(path) if !path.contains('`') => {
                    found.push(format!("heading `{path}`: no such file or directory"));
                }
                _ => found.push(format!(
                    "heading {heading:?} is not one backticked path from the repository root"
                )),
            }
        }

        // Directories headed exactly.
        let mut exact = Vec::new();
        for dir in subdirs(root) {
            if dir.file_name().unwrap() == "crates" {
                for krate in subdirs(&dir) {
                    for inner in subdirs(&krate) {
                        let name = inner.file_name().unwrap().to_string_lossy();
                        if !CARGO_DIRS.contains(&&*name) {
                            exact.push(inner);
                        }
                    }
                    exact.push(krate);
                }
            } else {
                exact.push(dir);
            }
        }
        for dir in &exact {
            let rel = relative(root, dir);
            if !headings.contains(&rel) {
                found.push(format!("`{rel}` has no code-map heading ### `{rel}`"));
            }
        }

        // Source directories, headed exactly or by an ancestor below their `src`.
        let mut srcs: Vec<PathBuf> = subdirs(&root.join("crates"))
            .into_iter()
            .map(|krate| krate.join("src"))
            .collect();
        srcs.push(root.join("xtask/src"));
        for src in srcs {
            let mut dirs = Vec::new();
            source_dirs(&src, &mut dirs);
            for dir in dirs {
                let covered = dir
                    .ancestors()
                    .take_while(|a| *a != src)
                    .any(|a| headings.contains(&relative(root, a)));
                if !covered {
                    let rel = relative(root, &dir);
                    found.push(format!(
                        "`{rel}` holds Rust sources and no code-map heading names it or a \
                         directory above it below `src`"
                    ));
                }
            }
        }

        // Every path named exists.
        for (_, span) in spans(&text) {
            if is_repo_path(root, span) && !exists(root, span) {
                found.push(format!("`{span}` is named but does not exist"));
            }
        }

        // Every invariant names what enforces it.
        for paragraph in text.split("\n\n").map(str::trim) {
            let Some(claim) = paragraph.strip_prefix("**Architecture Invariant:**") else {
                continue;
            };
            let start: String = claim.chars().take(60).collect();
            let start = start.split_whitespace().collect::<Vec<_>>().join(" ");
            let named: Vec<&str> = spans(claim)
                .into_iter()
                .map(|(_, span)| span)
                .filter(|span| is_repo_path(root, span) && exists(root, span))
                .collect();
            if named.is_empty() {
                found.push(format!(
                    "the invariant \"{start}…\" names no existing test, lint or file that enforces it"
                ));
            }
            let mut sources = Vec::new();
            for span in &named {
                let path = root.join(span.trim_end_matches('/'));
                if path.is_dir() {
                    sources.extend(crate::rust_sources(&path));
                } else if span.ends_with(".rs") {
                    sources.push(path);
                }
            }
            let texts: Vec<String> = sources
                .iter()
                .filter_map(|p| std::fs::read_to_string(p).ok())
                .collect();
            let mut listing = false;
            for (before, span) in spans(claim) {
                let before = before.replace('\n', " ");
                let is_test = if before.ends_with("test ") || before.ends_with("tests ") {
                    true
                } else {
                    listing && (before == ", " || before == " and " || before == ", and ")
                };
                listing = is_test;
                if is_test && !texts.iter().any(|t| t.contains(&format!("fn {span}("))) {
                    found.push(format!(
                        "the invariant \"{start}…\" names test `{span}`, which no file it names defines"
                    ));
                }
            }
        }
        found
    }

    #[test]
    fn architecture_md_maps_the_tree() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
        let found = problems(&root, &doc);
        assert!(
            found.is_empty(),
            "ARCHITECTURE.md and the tree disagree:\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn an_undocumented_directory_or_a_missing_file_is_found() {
        let root = std::env::temp_dir().join(format!("code-map-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let write = |path: &str, text: &str| {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("crates/a/src/lib.rs", "");
        write("crates/a/src/deep/mod.rs", "");
        write("crates/a/src/deep/inner/x.rs", "");
        write(
            "crates/a/tests/t.rs",
            "#[test]\nfn it_holds_the_rule_well() {}\n",
        );
        write("tools/run.sh", "");
        let good = "# A\n\n```\n`not/checked.rs`\n```\n\n## Code Map\n\n\
            ### `crates/a`\n\nSee `crates/a/src/lib.rs` and `kernels/f`.\n\n\
            ### `crates/a/src/deep`\n\n### `tools`\n\n## Other\n\n\
            **Architecture Invariant:** it holds (test `it_holds_the_rule_well` in\n\
            `crates/a/tests/t.rs`).\n";
        let clean = problems(&root, good);

        // A new source directory, a directory in a crate, a removed file.
        write("crates/a/src/other/y.rs", "");
        write("crates/a/assets/z.txt", "");
        std::fs::remove_file(root.join("crates/a/src/lib.rs")).unwrap();
        let broken = problems(&root, good);

        // Headings that name nothing, invariants that name nothing true.
        let bad = good
            .replace("### `tools`", "### `toolz`\n\n### tools")
            .replace("it_holds_the_rule_well", "it_does_not_exist");
        let worse = problems(
            &root,
            &format!("{bad}\n**Architecture Invariant:** trust me.\n"),
        );
        std::fs::remove_dir_all(&root).unwrap();

        assert_eq!(clean, Vec::<String>::new());
        let has = |found: &[String], what: &str| found.iter().any(|p| p.contains(what));
        assert_eq!(broken.len(), 3, "{broken:#?}");
        assert!(has(&broken, "`crates/a/src/other` holds Rust sources"));
        assert!(has(&broken, "`crates/a/assets` has no code-map heading"));
        assert!(has(
            &broken,
            "`crates/a/src/lib.rs` is named but does not exist"
        ));
        assert!(has(&worse, "heading `toolz`: no such file"));
        assert!(has(&worse, "heading \"tools\" is not one backticked path"));
        assert!(has(&worse, "names test `it_does_not_exist`"));
        assert!(has(&worse, "\"trust me.…\" names no existing"));
    }

    /// Every item "Adding a device family" names (`open_gpu`, `DeviceKind`, ...) is still
    /// defined in the sources, so the walk it describes cannot drift from the code unnoticed.
    #[test]
    fn adding_a_device_family_names_items_that_exist() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
        let section = doc
            .split("\n## Adding a device family\n")
            .nth(1)
            .expect("ARCHITECTURE.md has a section `## Adding a device family`");
        let section = section.split("\n## ").next().unwrap_or(section);
        let mut sources = String::new();
        let mut dirs = vec![root.join("crates")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    if !path.ends_with("target") {
                        dirs.push(path);
                    }
                } else if path.extension().is_some_and(|e| e == "rs") {
                    sources.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
                }
            }
        }
        let mut missing = Vec::new();
        let mut named = 0;
        for (_, span) in spans(&prose(section)) {
            // `DeviceKind::{family, of_family}` names the items in its braces.
            let (owner, items) = match span.split_once("::{") {
                Some((owner, rest)) => (Some(owner), rest.trim_end_matches('}').to_owned()),
                None => (None, span.to_owned()),
            };
            for item in owner.into_iter().chain(items.split(", ")) {
                let item = item.trim();
                // Rust's own words (a trait of `std`, a `cfg` key) are not the project's items.
                let rusts = ["Display", "target_arch", "match"];
                if item.is_empty()
                    || rusts.contains(&item)
                    || !item.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    continue;
                }
                let defined = ["fn", "enum", "struct", "trait", "type"]
                    .iter()
                    .any(|kind| sources.contains(&format!("{kind} {item}")))
                    || sources.contains(&format!("    {item}("))
                    || sources.contains(&format!("    {item} {{"))
                    || sources.contains(&format!("    {item},"));
                named += 1;
                if !defined {
                    missing.push(item.to_owned());
                }
            }
        }
        assert!(named > 10, "the section names few items: {named}");
        assert!(missing.is_empty(), "not defined anywhere: {missing:?}");
    }
}
