//! ARCHITECTURE.md's code map against the tree: every source file of a crate is named in that
//! crate's section (the one headed by the crate's path), as a module (`host::stream`, `stream`) or a path
//! (`backend/native.rs`), so a new file cannot go unmapped.

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The words a backticked span names: its segments split at `::`, `/`, `.`, spaces and
    /// punctuation (`host::buffer` names `host` and `buffer`; `backend/native.rs`, `native`),
    /// a hyphenated name both whole and in parts (`src/bin/cargo-offload-device.rs`).
    fn named(section: &str) -> Vec<String> {
        section
            .split('`')
            .skip(1)
            .step_by(2)
            .flat_map(|span| {
                span.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                    .flat_map(|token| std::iter::once(token).chain(token.split('-')))
                    .filter(|w| !w.is_empty())
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn architecture_names_every_source_file() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
        let mut unmapped = Vec::new();
        for entry in std::fs::read_dir(root.join("crates")).unwrap() {
            let krate = entry.unwrap().path();
            let name = krate.file_name().unwrap().to_string_lossy().into_owned();
            let heading = format!("### `crates/{name}`");
            let section = map
                .split("\n### ")
                .find(|s| s.starts_with(&heading[4..]))
                .unwrap_or_else(|| panic!("ARCHITECTURE.md has no section {heading}"));
            let words = named(section);
            let files = crate::rust_sources(&krate.join("src"));
            for file in files {
                let stem = file.file_stem().unwrap().to_string_lossy();
                let module = match &*stem {
                    "lib" | "main" => continue,
                    "mod" => file
                        .parent()
                        .unwrap()
                        .file_name()
                        .unwrap()
                        .to_string_lossy(),
                    _ => stem,
                };
                if !words.iter().any(|w| *w == module) {
                    unmapped.push(file.strip_prefix(&root).unwrap().display().to_string());
                }
            }
        }
        assert!(
            unmapped.is_empty(),
            "ARCHITECTURE.md's code map does not name these files' modules: {unmapped:#?}"
        );
    }
}
