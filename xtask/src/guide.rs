//! `cargo xtask guide`: the user guide (`docs/guide`, an mdBook) built with a pinned mdBook,
//! installed when missing, and its links checked.
//!
//! The link check reads the book's Markdown, as mdBook does: every relative link must lead to
//! a file under `src/` (a chapter must also be listed in `SUMMARY.md`, or mdBook renders no
//! page for it), and every `#anchor` to a heading of the page it names, by the ids mdBook
//! gives headings (`id_from_content` and `unique_id` in mdbook-html 0.5). Links with a scheme
//! (`https:`, `mailto:`) are not fetched.

use std::collections::{BTreeMap, HashSet};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use crate::{Result, root, run};

/// The mdBook the guide is built with. The heading ids the link check computes are this
/// version's: check them again (`docs/guide/book/*.html`) when moving it.
pub const MDBOOK_VERSION: &str = "0.5.4";

/// Heading ids listed when an anchor is not among them.
const MAX_SHOWN: usize = 12;

/// The guide's directory, from the repository root.
const GUIDE: &str = "docs/guide";

/// Installs mdBook if needed, builds the guide and checks its links.
pub fn guide() -> Result {
    let mdbook = ensure_mdbook()?;
    let dir = root().join(GUIDE);
    run(Command::new(&mdbook).arg("build").arg(&dir))?;
    let checked = check_links(&dir.join("src"))?;
    eprintln!("xtask: guide: {checked} links checked, none broken");
    Ok(())
}

/// The `mdbook` to run, [`MDBOOK_VERSION`] (see [`crate::pinned_tool`]).
fn ensure_mdbook() -> Result<PathBuf> {
    // Without mdBook's `serve` and `watch` features: what `build` needs, in half the time.
    crate::pinned_tool(
        "mdbook",
        MDBOOK_VERSION,
        &format!("mdbook v{MDBOOK_VERSION}"),
        &["--no-default-features", "--features", "search"],
    )
}

/// A link found in a page: its line and its destination.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Link {
    line: usize,
    target: String,
}

/// What the link check needs of one page.
#[derive(Debug, Default)]
struct Page {
    links: Vec<Link>,
    /// The ids mdBook gives the page's headings.
    anchors: HashSet<String>,
}

/// Checks every link of the book whose sources are in `src`; returns how many were checked,
/// or an error after printing every broken one.
pub fn check_links(src: &Path) -> Result<usize> {
    let (checked, broken) = broken_links(src)?;
    if broken.is_empty() {
        return Ok(checked);
    }
    for b in &broken {
        eprintln!("xtask: guide: {b}");
    }
    Err(format!(
        "{} broken link(s) in {}",
        broken.len(),
        src.display()
    ))
}

/// How many links of the book in `src` were checked, and what is wrong with the broken ones
/// (`file:line: `target`: problem`).
fn broken_links(src: &Path) -> Result<(usize, Vec<String>)> {
    let mut files = Vec::new();
    collect_files(src, &mut files);
    let mut pages = BTreeMap::new();
    for file in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "md"))
    {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("reading {}: {e}", file.display()))?;
        pages.insert(file.clone(), scan(&text));
    }
    let summary = src.join("SUMMARY.md");
    let listed: HashSet<PathBuf> = pages
        .get(&summary)
        .ok_or_else(|| format!("{} is missing", summary.display()))?
        .links
        .iter()
        .filter_map(|l| resolve(src, &summary, &l.target).ok().map(|(path, _)| path))
        .collect();

    let mut broken = Vec::new();
    let mut checked = 0;
    for (file, page) in &pages {
        let shown = file.strip_prefix(src).unwrap_or(file).display().to_string();
        if *file != summary && !listed.contains(file) {
            broken.push(format!(
                "{shown}: not listed in SUMMARY.md, so the book has no page for it"
            ));
        }
        for link in &page.links {
            if is_external(&link.target) {
                continue;
            }
            checked += 1;
            let problem = match resolve(src, file, &link.target) {
                Err(problem) => Some(problem),
                Ok((path, anchor)) => check_target(&pages, &listed, &path, anchor),
            };
            if let Some(problem) = problem {
                broken.push(format!(
                    "{shown}:{}: `{}`: {problem}",
                    link.line, link.target
                ));
            }
        }
    }
    Ok((checked, broken))
}

/// What is wrong with a link to `path` (and `anchor` in it), if anything.
fn check_target(
    pages: &BTreeMap<PathBuf, Page>,
    listed: &HashSet<PathBuf>,
    path: &Path,
    anchor: Option<&str>,
) -> Option<String> {
    if !path.exists() {
        return Some("no such file".to_owned());
    }
    let Some(page) = pages.get(path) else {
        return anchor.map(|_| "an anchor into a file that is not a chapter".to_owned());
    };
    if !listed.contains(path) {
        return Some("the page is not a chapter listed in SUMMARY.md".to_owned());
    }
    match anchor {
        Some(a) if !page.anchors.contains(a) => {
            let mut known: Vec<&str> = page.anchors.iter().map(String::as_str).collect();
            known.sort_unstable();
            let more = known.len().saturating_sub(MAX_SHOWN);
            known.truncate(MAX_SHOWN);
            Some(format!(
                "no heading with the id `{a}` (the page has: {}{})",
                known.join(", "),
                if more > 0 {
                    format!(", and {more} more")
                } else {
                    String::new()
                }
            ))
        }
        _ => None,
    }
}

/// Whether a link leaves the book: it has a URL scheme.
fn is_external(target: &str) -> bool {
    let scheme = target.split(':').next().unwrap_or("");
    target.contains(':')
        && !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// The file a relative link of `from` names, and its anchor; an error for a link that cannot
/// work in the built book.
fn resolve<'a>(src: &Path, from: &Path, target: &'a str) -> Result<(PathBuf, Option<&'a str>)> {
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    if anchor == Some("") {
        return Err("an empty anchor".to_owned());
    }
    if path.is_empty() {
        return Ok((from.to_owned(), anchor));
    }
    if path.starts_with('/') {
        return Err("an absolute path: the book may be served under any prefix".to_owned());
    }
    let mut resolved = from.parent().unwrap_or(src).to_owned();
    for component in Path::new(path).components() {
        match component {
            Component::ParentDir => {
                resolved.pop();
            }
            Component::Normal(c) => resolved.push(c),
            _ => {}
        }
    }
    if !resolved.starts_with(src) {
        return Err(format!(
            "leads out of the book's sources ({}): the built book does not have it",
            src.display()
        ));
    }
    Ok((resolved, anchor))
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// The links and heading ids of one Markdown page. Fenced code blocks and code spans hold
/// neither; headings are ATX headings (`## Title`).
fn scan(text: &str) -> Page {
    let mut page = Page::default();
    let mut used = HashSet::new();
    let mut fence: Option<String> = None;
    let mut paragraph: Vec<(usize, &str)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(open) = &fence {
            if trimmed.starts_with(open.as_str())
                && trimmed
                    .trim_end()
                    .chars()
                    .all(|c| c == open.chars().next().unwrap_or('`'))
            {
                fence = None;
            }
            continue;
        }
        let run: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        if run.len() >= 3 && run.chars().all(|c| c == run.chars().next().unwrap_or('`')) {
            links_of(&paragraph, &mut page.links);
            paragraph.clear();
            fence = Some(run);
            continue;
        }
        if trimmed.is_empty() {
            links_of(&paragraph, &mut page.links);
            paragraph.clear();
            continue;
        }
        if let Some(title) = heading(line) {
            links_of(&paragraph, &mut page.links);
            paragraph.clear();
            links_of(&[(n + 1, title)], &mut page.links);
            let id = id_from_content(&rendered_text(title));
            page.anchors.insert(unique_id(&id, &mut used));
            continue;
        }
        paragraph.push((n + 1, line));
    }
    links_of(&paragraph, &mut page.links);
    page
}

/// The text of an ATX heading (`### Title ##`), or `None`.
fn heading(line: &str) -> Option<&str> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let level = rest.chars().take_while(|&c| c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let title = &rest[level..];
    if !(title.is_empty() || title.starts_with([' ', '\t'])) {
        return None;
    }
    let title = title.trim();
    let closed = title.trim_end_matches('#');
    Some(if closed.is_empty() || closed.ends_with([' ', '\t']) {
        closed.trim_end()
    } else {
        title
    })
}

/// A heading's text as mdBook renders it: code spans' contents kept, link texts kept,
/// emphasis markers dropped.
fn rendered_text(markdown: &str) -> String {
    let blank = blank_code_spans(markdown);
    let chars: Vec<(usize, char)> = markdown.char_indices().collect();
    let in_code = |i: usize| {
        let (at, c) = chars[i];
        c != ' ' && blank.as_bytes()[at] == b' '
    };
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i].1;
        let previous = i.checked_sub(1).map(|j| chars[j].1);
        match c {
            '`' => {}
            '*' | '_' if !in_code(i) && is_emphasis(previous, chars.get(i + 1).map(|p| p.1)) => {}
            '[' | ']' if !in_code(i) => {}
            '(' if !in_code(i) && previous == Some(']') => {
                // A link's destination: skip to its `)`.
                while i < chars.len() && chars[i].1 != ')' {
                    i += 1;
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    out
}

/// Whether a `*` or `_` between `before` and `after` is an emphasis marker rather than a
/// character of a word (`snake_case` keeps its underscore).
fn is_emphasis(before: Option<char>, after: Option<char>) -> bool {
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    !(word(before) && word(after))
}

/// `text` with every code span (backticks included) replaced by spaces, byte for byte, and
/// newlines kept, so that nothing inside code is taken for a link.
fn blank_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut code = vec![false; chars.len()];
    let run_at = |i: usize| chars[i..].iter().take_while(|&&c| c == '`').count();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let n = run_at(i);
        let mut j = i + n;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let m = run_at(j);
                if m == n {
                    close = Some(j);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(j) => {
                code[i..j + n].fill(true);
                i = j + n;
            }
            // No closing run: the backticks are literal.
            None => i += n,
        }
    }
    let mut out = String::with_capacity(text.len());
    for (c, in_code) in chars.into_iter().zip(code) {
        if in_code && c != '\n' {
            out.extend(std::iter::repeat_n(' ', c.len_utf8()));
        } else {
            out.push(c);
        }
    }
    out
}

/// The inline links (`[text](dest "title")`, images too) and link reference definitions
/// (`[label]: dest`) of a paragraph, given as numbered lines.
fn links_of(lines: &[(usize, &str)], links: &mut Vec<Link>) {
    if lines.is_empty() {
        return;
    }
    let text: String = lines.iter().map(|(_, l)| *l).collect::<Vec<_>>().join("\n");
    let blank = blank_code_spans(&text);
    let line_of = |offset: usize| lines[0].0 + text[..offset].matches('\n').count();
    for (i, _) in blank.match_indices("](") {
        let start = i + 2;
        let rest = &blank[start..];
        let dest = match rest.strip_prefix('<') {
            Some(inner) => inner.split('>').next().unwrap_or(""),
            None => rest
                .split(|c: char| c.is_whitespace() || c == ')')
                .next()
                .unwrap_or(""),
        };
        links.push(Link {
            line: line_of(start),
            target: dest.to_owned(),
        });
    }
    let mut offset = 0;
    for line in blank.split('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[')
            && let Some(close) = trimmed.find("]:")
        {
            let dest = trimmed[close + 2..].split_whitespace().next().unwrap_or("");
            let dest = dest.trim_start_matches('<').trim_end_matches('>');
            if !dest.is_empty() {
                links.push(Link {
                    line: line_of(offset),
                    target: dest.to_owned(),
                });
            }
        }
        offset += line.len() + 1;
    }
}

/// mdBook's id for a heading's text (mdbook-html's `id_from_content`).
fn id_from_content(content: &str) -> String {
    content
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|ch| {
            if ch.is_alphanumeric() || ch == '_' || ch == '-' {
                Some(ch)
            } else if ch.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// `id`, or `id-1`, `id-2`, … when the page already has it (mdbook-html's `unique_id`).
fn unique_id(id: &str, used: &mut HashSet<String>) -> String {
    if used.insert(id.to_owned()) {
        return id.to_owned();
    }
    (1..)
        .map(|n| format!("{id}-{n}"))
        .find(|candidate| used.insert(candidate.clone()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(text: &str) -> Vec<String> {
        scan(text).links.into_iter().map(|l| l.target).collect()
    }

    #[test]
    fn links_outside_code_are_found_with_their_lines() {
        let page = scan(
            "# Title\n\nSee [a](a.md) and\n[`b`](b.md#x \"title\"), ![img](i.png).\n\n\
             `[not](code.md)` and ``[not](`code`.md)``\n\n```rust\n[not](fenced.md)\n```\n\n\
             [ref]: ref.md\n",
        );
        let found: Vec<(usize, &str)> = page
            .links
            .iter()
            .map(|l| (l.line, l.target.as_str()))
            .collect();
        assert_eq!(
            found,
            [(3, "a.md"), (4, "b.md#x"), (4, "i.png"), (12, "ref.md")]
        );
    }

    #[test]
    fn a_code_span_may_cross_lines() {
        assert_eq!(
            targets("`llvm-objdump\n--offloading` shows [it](x.md)\n"),
            ["x.md"]
        );
    }

    #[test]
    fn heading_ids_are_mdbooks() {
        let page = scan(
            "# The runtime API\n## `DeviceBuffer<T>`\n### Dynamic: `dynamic_shared`\n\
             ## Put `cargo offload` on your `PATH`\n## Limits\n## Limits\n\
             ## Builds, `cargo check` and diagnostics\n## [Linked](x.md) *title*\n",
        );
        let mut ids: Vec<&str> = page.anchors.iter().map(String::as_str).collect();
        ids.sort_unstable();
        assert_eq!(
            ids,
            [
                "builds-cargo-check-and-diagnostics",
                "devicebuffert",
                "dynamic-dynamic_shared",
                "limits",
                "limits-1",
                "linked-title",
                "put-cargo-offload-on-your-path",
                "the-runtime-api",
            ]
        );
    }

    #[test]
    fn external_links_are_recognized() {
        for external in ["https://llvm.org", "http://x", "mailto:a@b"] {
            assert!(is_external(external), "{external}");
        }
        for internal in ["a.md", "../b.md#c", "#d", "dir/e.md"] {
            assert!(!is_external(internal), "{internal}");
        }
    }

    #[test]
    fn broken_links_and_anchors_fail_the_check() {
        let dir = std::env::temp_dir().join(format!("xtask-guide-{}", std::process::id()));
        let src = dir.join("src");
        std::fs::create_dir_all(src.join("sub")).unwrap();
        let write = |name: &str, text: &str| std::fs::write(src.join(name), text).unwrap();
        write("SUMMARY.md", "# Summary\n\n- [A](a.md)\n- [B](sub/b.md)\n");
        write(
            "a.md",
            "# A\n\n## Part one\n\n[b](sub/b.md#b) [self](#part-one)\n",
        );
        write(
            "sub/b.md",
            "# B\n\n[a](../a.md#part-one) [web](https://example.org)\n",
        );
        assert_eq!(check_links(&src), Ok(5));

        write(
            "sub/b.md",
            "# B\n\n[a](../a.md#part-two) [gone](c.md)\n[out](../../README.md) [abs](/a.md)\n",
        );
        write("orphan.md", "# Orphan\n");
        let (_, broken) = broken_links(&src).unwrap();
        let expected = [
            "orphan.md: not listed in SUMMARY.md",
            "sub/b.md:3: `../a.md#part-two`: no heading with the id `part-two` (the page has: a, part-one)",
            "sub/b.md:3: `c.md`: no such file",
            "sub/b.md:4: `../../README.md`: leads out of the book's sources",
            "sub/b.md:4: `/a.md`: an absolute path",
        ];
        assert_eq!(broken.len(), expected.len(), "{broken:#?}");
        for (found, want) in broken.iter().zip(expected) {
            assert!(found.starts_with(want), "{found}\n  expected {want}…");
        }
        assert!(check_links(&src).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
