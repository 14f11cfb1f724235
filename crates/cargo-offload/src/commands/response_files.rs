//! `@file` arguments, expanded as LLVM's tools expand them (`cl::ExpandResponseFiles` with the
//! GNU tokenizer): build systems pass long command lines to `clang-offload-bundler` and
//! `llvm-offload-binary` this way, so their stand-ins must too.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

/// Response files within response files, as deep as LLVM follows them before it calls the
/// nesting a loop.
const MAX_DEPTH: usize = 64;

/// `args` with each `@file` replaced by the arguments in `file` (recursively; relative names
/// from the current directory, as LLVM's tools resolve them). An `@file` naming no file stays
/// as it is, as in LLVM.
pub(crate) fn expand(args: Vec<OsString>) -> Result<Vec<OsString>> {
    let mut out = Vec::with_capacity(args.len());
    for arg in args {
        expand_one(arg, &mut out, &mut Vec::new())?;
    }
    Ok(out)
}

fn expand_one(arg: OsString, out: &mut Vec<OsString>, open: &mut Vec<PathBuf>) -> Result<()> {
    let Some(name) = arg.to_str().and_then(|s| s.strip_prefix('@')) else {
        out.push(arg);
        return Ok(());
    };
    let path = Path::new(name).to_owned();
    let Ok(text) = std::fs::read(&path) else {
        out.push(arg);
        return Ok(());
    };
    if open.contains(&path) || open.len() >= MAX_DEPTH {
        bail!("recursive expansion of response file '{}'", path.display());
    }
    let text = String::from_utf8_lossy(&text);
    open.push(path);
    for token in tokenize_gnu(&text) {
        expand_one(OsString::from(token), out, open)?;
    }
    open.pop();
    Ok(())
}

/// GNU-style splitting: whitespace separates arguments, a backslash takes the next character
/// as it is, and single or double quotes group characters (a backslash escapes within either).
fn tokenize_gnu(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut token = String::new();
    let mut in_token = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_token {
                    tokens.push(std::mem::take(&mut token));
                    in_token = false;
                }
            }
            '\\' => {
                in_token = true;
                if let Some(next) = chars.next() {
                    token.push(next);
                }
            }
            '"' | '\'' => {
                in_token = true;
                while let Some(q) = chars.next() {
                    match q {
                        q if q == c => break,
                        '\\' => token.extend(chars.next()),
                        q => token.push(q),
                    }
                }
            }
            c => {
                in_token = true;
                token.push(c);
            }
        }
    }
    if in_token {
        tokens.push(token);
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gnu_tokens_split_on_whitespace_and_honour_quotes_and_escapes() {
        assert_eq!(
            tokenize_gnu("-type=o  -input=a\\ b.o\n'-output=x y' \"q\\\"t\" '' e\\\\\n"),
            ["-type=o", "-input=a b.o", "-output=x y", "q\"t", "", "e\\"]
        );
        assert!(tokenize_gnu(" \n\t").is_empty());
    }

    #[test]
    fn response_files_expand_recursively_and_unknown_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("inner.rsp");
        std::fs::write(&inner, "-output=out.bin\n").unwrap();
        let outer = dir.path().join("outer.rsp");
        std::fs::write(&outer, format!("-type=bc @{}\n", inner.display())).unwrap();
        let args = vec![
            OsString::from("-unbundle"),
            OsString::from(format!("@{}", outer.display())),
            OsString::from("@no-such-file"),
        ];
        assert_eq!(
            expand(args).unwrap(),
            ["-unbundle", "-type=bc", "-output=out.bin", "@no-such-file"]
        );
    }

    #[test]
    fn a_response_file_that_includes_itself_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let looped = dir.path().join("loop.rsp");
        std::fs::write(&looped, format!("-list @{}", looped.display())).unwrap();
        let err = expand(vec![OsString::from(format!("@{}", looped.display()))]).unwrap_err();
        assert!(err.to_string().contains("recursive expansion"), "{err}");
    }
}
