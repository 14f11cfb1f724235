//! Make-style dependency files (`clang -MMD -MF`), read into the paths a build must watch.

use std::path::PathBuf;

/// The prerequisites of every rule in `text`: `target: a.cu b.h \` continued lines, `\ ` for
/// a space in a path, `$$` for `$`. Targets are left out; the order is kept, duplicates are
/// dropped.
pub fn prerequisites(text: &str) -> Vec<PathBuf> {
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    let mut paths: Vec<PathBuf> = Vec::new();
    for line in joined.lines() {
        let Some(colon) = rule_colon(line) else {
            continue;
        };
        for word in words(&line[colon + 1..]) {
            let path = PathBuf::from(word);
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
    }
    paths
}

/// The colon that ends a rule's targets: the first `: ` or a trailing `:`, so that a drive-like
/// `C:` in a path does not end it.
fn rule_colon(line: &str) -> Option<usize> {
    let bytes = line.as_bytes();
    (0..bytes.len()).find(|&i| {
        bytes[i] == b':'
            && (i == 0 || bytes[i - 1] != b'\\')
            && bytes.get(i + 1).is_none_or(|b| b.is_ascii_whitespace())
    })
}

fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek().is_some_and(|n| *n == ' ' || *n == '#') => {
                word.push(chars.next().unwrap_or(' '));
            }
            '$' if chars.peek() == Some(&'$') => {
                chars.next();
                word.push('$');
            }
            c if c.is_whitespace() => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continued_lines_escapes_and_duplicates() {
        let text =
            "out/scale.ptx: src/scale.cu \\\n  include/my\\ header.h cost$$.h \\\n  src/scale.cu\n";
        assert_eq!(
            prerequisites(text),
            [
                PathBuf::from("src/scale.cu"),
                PathBuf::from("include/my header.h"),
                PathBuf::from("cost$.h"),
            ]
        );
    }

    #[test]
    fn several_rules_and_empty_input() {
        assert!(prerequisites("").is_empty());
        assert_eq!(
            prerequisites("a.o: a.c\nb.o: b.c a.h\n"),
            [
                PathBuf::from("a.c"),
                PathBuf::from("b.c"),
                PathBuf::from("a.h")
            ]
        );
    }
}
