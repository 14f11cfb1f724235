//! ARCHITECTURE.md's invariants on the device ABI and the device families, checked on the
//! workspace's sources:
//!
//! - every symbol, section and prefix of the device ABI is spelled once, in
//!   `crates/offload-format/src/abi.rs`: no string literal of any other Rust source holds one
//!   (`device_abi_is_spelled_only_in_its_home`);
//! - only `offload-format` tells device triples apart by their text: no other Rust source tests
//!   a triple's prefix (`starts_with("nvptx")`, `"amdgcn"`, …) where it could ask
//!   `offload_format::DeviceFamily` (`triples_are_told_apart_only_in_offload_format`).

/// The device ABI's home, the one source that may spell its strings.
#[cfg(test)]
const ABI_HOME: &str = "crates/offload-format/src/abi.rs";

/// The string literals of Rust source `text` (raw, byte and C strings included; comments,
/// character literals and lifetimes skipped), each with its line, escapes left as written.
#[cfg(test)]
fn string_literals(text: &str) -> Vec<(usize, String)> {
    let bytes = text.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let line_at = |at: usize| bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < bytes.len() {
                    if bytes[i..].starts_with(b"/*") {
                        depth += 1;
                        i += 2;
                    } else if bytes[i..].starts_with(b"*/") {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'\'' => {
                // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
                if bytes.get(i + 1) == Some(&b'\\') {
                    i += 3;
                    while i < bytes.len() && bytes[i] != b'\'' {
                        i += 1;
                    }
                    i += 1;
                } else if let Some(len) = text[i + 1..].chars().next().map(char::len_utf8)
                    && bytes.get(i + 1 + len) == Some(&b'\'')
                {
                    i += 2 + len;
                } else {
                    i += 1;
                }
            }
            b'r' if (i == 0 || !ident(bytes[i - 1]) || raw_prefix(bytes, i))
                && matches!(bytes.get(i + 1), Some(b'"' | b'#')) =>
            {
                let hashes = bytes[i + 1..].iter().take_while(|&&b| b == b'#').count();
                if bytes.get(i + 1 + hashes) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let start = i + 2 + hashes;
                let mut close = b"\"".to_vec();
                close.extend(std::iter::repeat_n(b'#', hashes));
                let end = bytes[start..]
                    .windows(close.len())
                    .position(|w| w == close.as_slice())
                    .map_or(bytes.len(), |at| start + at);
                found.push((line_at(start), text[start..end].to_owned()));
                i = end + close.len();
            }
            b'"' => {
                let start = i + 1;
                i = start;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                let end = i.min(bytes.len());
                found.push((line_at(start), text[start..end].to_owned()));
                i += 1;
            }
            _ => {
                i += 1;
                // Skip the rest of an identifier, so that its `r` starts no raw string.
                if ident(bytes[i - 1]) {
                    while i < bytes.len() && ident(bytes[i]) && bytes[i] != b'r' {
                        i += 1;
                    }
                }
            }
        }
    }
    found
}

/// Whether the `r` at `at` is the `r` of a `br"` or `cr"` prefix.
#[cfg(test)]
fn raw_prefix(bytes: &[u8], at: usize) -> bool {
    at >= 1
        && matches!(bytes[at - 1], b'b' | b'c')
        && (at == 1 || !(bytes[at - 2].is_ascii_alphanumeric() || bytes[at - 2] == b'_'))
}

/// The ABI strings of the home: its string literals before its unit tests.
#[cfg(test)]
fn abi_strings(home: &str) -> Vec<String> {
    let code = home.split("\n#[cfg(test)]").next().unwrap_or(home);
    let mut strings: Vec<String> = string_literals(code).into_iter().map(|(_, s)| s).collect();
    strings.sort();
    strings.dedup();
    strings
}

/// The ABI strings that `literal` spells: a word of it (symbol characters and dots) that is one,
/// or that starts with one of the ABI's prefixes (those ending in `_`), or that is a prefix of
/// one (`__offload_cpu_` of the CPU entry points).
#[cfg(test)]
fn spelled<'a>(literal: &str, abi: &'a [String]) -> Vec<&'a str> {
    let mut spelled = Vec::new();
    for word in literal.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.')) {
        let word = word.trim_end_matches('.');
        if word.len() < 4 {
            continue;
        }
        for name in abi {
            let prefix_of_word = name.ends_with('_') && word.starts_with(name.as_str());
            let word_is_prefix = word.ends_with('_') && word.len() > 10 && name.starts_with(word);
            if word == name || prefix_of_word || word_is_prefix {
                spelled.push(name.as_str());
            }
        }
    }
    spelled
}

/// Each `file:line: literal (spells …)` of the workspace's Rust sources (but the home) whose
/// string literals spell an ABI string.
#[cfg(test)]
fn abi_copies(root: &std::path::Path, abi: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for file in workspace_sources(root) {
        let rel = file
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel == ABI_HOME {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let tests_from = test_code_from(&rel, &text);
        for (line, literal) in string_literals(&text) {
            let names = spelled(&literal, abi);
            if names.is_empty() || line >= tests_from && is_program_text(&literal) {
                continue;
            }
            found.push(format!("{rel}:{line}: {literal:?} spells {names:?}"));
        }
    }
    found
}

/// The first line of `text` that is test code: all of a file under a `tests` directory or of a
/// unit-test module's own file (`tests.rs`, declared `#[cfg(test)] mod tests;`), else from its
/// `#[cfg(test)]` module on.
#[cfg(test)]
fn test_code_from(rel: &str, text: &str) -> usize {
    if rel.contains("/tests/") || rel.ends_with("/tests.rs") {
        return 1;
    }
    text.lines()
        .position(|line| line.trim() == "#[cfg(test)]")
        .map_or(usize::MAX, |n| n + 1)
}

/// Whether `literal` is a piece of a program's text (LLVM IR, PTX, assembler, a tool's listing)
/// rather than a name: a test's input or expected output, which names the ABI's symbols as the
/// toolchain prints them and fails by itself when one changes. Test code may hold such text;
/// a literal that is a name is a copy of the ABI anywhere.
#[cfg(test)]
fn is_program_text(literal: &str) -> bool {
    literal.contains(|c: char| c.is_whitespace() || "@([;".contains(c)) || literal.contains("\\n")
}

/// The workspace's Rust sources: its crates, the automation, benches, examples and fuzz targets.
#[cfg(test)]
fn workspace_sources(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for dir in ["crates", "xtask", "benches", "examples", "fuzz"] {
        files.extend(crate::rust_sources(&root.join(dir)));
    }
    files.sort();
    files
}

/// The text a GPU family's triples and architecture names start with; a source outside
/// `offload-format` that tests a string's start against one tells families apart itself.
#[cfg(test)]
const TRIPLE_HEADS: &[&str] = &["nvptx", "amdgcn", "amdgpu", "sm_", "gfx"];

/// Each `file:line: code` of the workspace's Rust sources outside `offload-format` that tests a
/// string's start (or end) against a triple's architecture.
#[cfg(test)]
fn triple_prefix_tests(root: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    for file in workspace_sources(root) {
        let rel = file
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel.starts_with("crates/offload-format/") || rel.starts_with("xtask/") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for call in [
                "starts_with(\"",
                "starts_with(b\"",
                "strip_prefix(\"",
                "strip_prefix(b\"",
            ] {
                for head in TRIPLE_HEADS {
                    if line.contains(&format!("{call}{head}")) {
                        found.push(format!("{rel}:{}: {}", n + 1, line.trim()));
                    }
                }
            }
        }
    }
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn root() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    fn home_strings() -> Vec<String> {
        let home = std::fs::read_to_string(root().join(ABI_HOME)).unwrap();
        let abi = abi_strings(&home);
        assert!(abi.len() > 25, "the home names the ABI: {abi:?}");
        abi
    }

    #[test]
    fn device_abi_is_spelled_only_in_its_home() {
        let found = abi_copies(&root(), &home_strings());
        assert!(
            found.is_empty(),
            "these string literals spell the device ABI outside {ABI_HOME}; name it through \
             `offload_format::abi` (its constants, or `abi_name!` where an attribute needs a \
             literal): {found:#?}"
        );
    }

    #[test]
    fn the_abi_lint_finds_a_copy() {
        let abi = home_strings();
        // An ABI string of the home, as another file would spell it in a literal.
        let name = abi
            .iter()
            .find(|s| s.starts_with("__") && !s.ends_with('_'))
            .unwrap();
        let prefix = abi.iter().find(|s| s.ends_with('_')).unwrap();
        let section = abi.iter().find(|s| s.starts_with('.')).unwrap();
        let source = format!(
            "// {name} in a comment is no copy\n\
             let a = \"{name}\";\n\
             let b = format!(\"{prefix}{{kernel}}\");\n\
             let c = r#\"call void @{name}(i64 1)\"#;\n\
             let d = b\"{name}\";\n\
             let e = \"--dump-section={section}=x\";\n\
             let f = 'x'; let g = \"{name}_other\"; fn h<'a>() {{}}\n\
             #[cfg(test)]\n\
             let i = \"call void @{name}(i64 1)\";\n\
             let j = \"{name}\";\n"
        );
        let tests_from = test_code_from("crates/x/src/lib.rs", &source);
        assert_eq!(tests_from, 8);
        let flagged: Vec<usize> = string_literals(&source)
            .into_iter()
            .filter(|(line, literal)| {
                let allowed = *line >= tests_from && is_program_text(literal);
                !allowed && !spelled(literal, &abi).is_empty()
            })
            .map(|(line, _)| line)
            .collect();
        // Program text is allowed in test code (line 9), a name is not (line 10).
        assert_eq!(flagged, [2, 3, 4, 5, 6, 10], "{source}");
    }

    #[test]
    fn the_abi_lint_finds_a_device_link_helper() {
        let abi = home_strings();
        // The helpers the device link defines and the kernel side declares, plain and composed
        // of a family's prefix and a suffix, pieced together so that this file spells none.
        for rest in [
            "_dynamic_shared",
            "_dynamic_shared_memory",
            "_f32_to_bf16",
            "_atomic_add_bf16",
            "_amdgpu_wave_size",
            "_has_wgmma",
            "_mma_bf16",
            "_cp_async_16",
            "_cp_async_wait_7",
            "_ldmatrix_x4_trans",
            "_mbarrier_try_wait_parity",
            "_tma_store_wait_3",
            "_cluster_map_shared",
            "_wgmma_m64n128k16_bf16_tn",
            "_wgmma_wait_0",
            "_setmaxnreg_dec_240",
        ] {
            let name = format!("__offload{rest}");
            let source =
                format!("const A: &str = \"{name}\";\nlet b = \"define void @{name}() #0 {{\";\n");
            let flagged: Vec<usize> = string_literals(&source)
                .into_iter()
                .filter(|(_, literal)| !spelled(literal, &abi).is_empty())
                .map(|(line, _)| line)
                .collect();
            assert_eq!(flagged, [1, 2], "{source}");
        }
    }

    #[test]
    fn the_triple_lint_finds_a_prefix_test() {
        let dir = std::env::temp_dir().join(format!("abi-lint-{}", std::process::id()));
        let src = dir.join("crates/some-crate/src");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(
            src.join("lib.rs"),
            "// triple.starts_with(\"nvptx\") in a comment\n\
             fn amd(t: &[u8]) -> bool { t.starts_with(b\"amdgcn\") }\n\
             fn sm(a: &str) -> bool { a.starts_with(\"sm_\") }\n",
        )
        .unwrap();
        let found = triple_prefix_tests(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(
            found[0].starts_with("crates/some-crate/src/lib.rs:2:"),
            "{found:#?}"
        );
    }

    #[test]
    fn triples_are_told_apart_only_in_offload_format() {
        let found = triple_prefix_tests(&root());
        assert!(
            found.is_empty(),
            "these test a triple's text outside offload-format; ask \
             `offload_format::DeviceFamily::of_triple` (or `OffloadArch::family`): {found:#?}"
        );
    }
}
