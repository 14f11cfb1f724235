//! The templates of device prints (`device_print!`, `device_println!`): Rust's format string
//! syntax, restricted to what a kernel can send the host as scalars. `device_print!` checks and
//! normalizes a template at compile time (every argument `{N}` or `{N:spec}` by index); the
//! runtime parses the normalized template again to print the line.
//!
//! A placeholder is `{[arg][:spec]}` with `arg` empty (the next argument), an index, or a name
//! (a named argument, or a variable captured from the kernel); `spec` is
//! `[[fill]align][sign]['#']['0'][width]['.' precision][type]` as in `std::fmt`, with `width`
//! and `precision` literal numbers and `type` one of `?`, `x`, `X`, `o`, `b`, `e`, `E`.

use std::fmt;

/// Alignment of a padded value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// `<`
    Left,
    /// `^`
    Center,
    /// `>`
    Right,
}

/// How one value is formatted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Spec {
    /// The fill character (default space).
    pub fill: Option<char>,
    /// The alignment, if given.
    pub align: Option<Align>,
    /// `+`: always print a sign.
    pub plus: bool,
    /// `#`: the alternate form (`0x` prefixes).
    pub alternate: bool,
    /// `0`: pad with zeros after the sign.
    pub zero: bool,
    /// Minimum width in characters.
    pub width: Option<usize>,
    /// Digits after the point.
    pub precision: Option<usize>,
    /// The type: `""`, `"?"`, `"x"`, `"X"`, `"o"`, `"b"`, `"e"` or `"E"`.
    pub kind: &'static str,
}

/// Which argument a placeholder shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgRef {
    /// `{}`: the argument after the previous `{}`.
    Next,
    /// `{N}`
    Index(usize),
    /// `{name}`
    Name(String),
}

/// A piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Text printed as is (`{{` and `}}` already unescaped).
    Text(String),
    /// A placeholder.
    Arg {
        /// The argument.
        arg: ArgRef,
        /// How to show it.
        spec: Spec,
    },
}

/// What is wrong with a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    /// Byte offset in the template.
    pub offset: usize,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.reason)
    }
}

impl std::error::Error for TemplateError {}

const KINDS: [&str; 8] = ["", "?", "x", "X", "o", "b", "e", "E"];

/// Parses `template` into pieces.
///
/// # Errors
/// A [`TemplateError`] naming the offset: an unclosed `{`, a lone `}`, a spec with `$` or `*`
/// widths, an unknown type.
pub fn parse(template: &str) -> Result<Vec<Piece>, TemplateError> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = template.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '{' if chars.peek().is_some_and(|&(_, n)| n == '{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek().is_some_and(|&(_, n)| n == '}') => {
                chars.next();
                text.push('}');
            }
            '}' => {
                return Err(TemplateError {
                    offset: at,
                    reason: "unmatched `}` (write `}}` for a brace)".into(),
                });
            }
            '{' => {
                let rest = &template[at + 1..];
                let Some(end) = rest.find('}') else {
                    return Err(TemplateError {
                        offset: at,
                        reason: "unclosed `{` (write `{{` for a brace)".into(),
                    });
                };
                let inner = &rest[..end];
                for _ in 0..inner.chars().count() + 1 {
                    chars.next();
                }
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                let (arg, spec) = inner.split_once(':').unwrap_or((inner, ""));
                let arg = parse_arg(arg.trim(), at + 1)?;
                let spec = parse_spec(spec, at + 2 + arg_len(inner))?;
                pieces.push(Piece::Arg { arg, spec });
            }
            c => text.push(c),
        }
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

fn arg_len(inner: &str) -> usize {
    inner.find(':').unwrap_or(inner.len())
}

fn parse_arg(arg: &str, offset: usize) -> Result<ArgRef, TemplateError> {
    if arg.is_empty() {
        return Ok(ArgRef::Next);
    }
    if arg.bytes().all(|b| b.is_ascii_digit()) {
        return arg.parse().map(ArgRef::Index).map_err(|_| TemplateError {
            offset,
            reason: format!("argument index `{arg}` is too large"),
        });
    }
    let mut chars = arg.chars();
    let first_ok = chars.next().is_some_and(|c| c == '_' || c.is_alphabetic());
    if first_ok && chars.all(|c| c == '_' || c.is_alphanumeric()) {
        Ok(ArgRef::Name(arg.to_owned()))
    } else {
        Err(TemplateError {
            offset,
            reason: format!("`{arg}` is not an argument index or name"),
        })
    }
}

fn parse_spec(spec: &str, offset: usize) -> Result<Spec, TemplateError> {
    let err = |reason: String| TemplateError { offset, reason };
    let mut out = Spec::default();
    let chars: Vec<char> = spec.chars().collect();
    let mut i = 0;
    let align_of = |c: char| match c {
        '<' => Some(Align::Left),
        '^' => Some(Align::Center),
        '>' => Some(Align::Right),
        _ => None,
    };
    if let Some(align) = chars.get(1).copied().and_then(align_of) {
        out.fill = Some(chars[0]);
        out.align = Some(align);
        i = 2;
    } else if let Some(align) = chars.first().copied().and_then(align_of) {
        out.align = Some(align);
        i = 1;
    }
    if chars.get(i) == Some(&'+') {
        out.plus = true;
        i += 1;
    } else if chars.get(i) == Some(&'-') {
        i += 1;
    }
    if chars.get(i) == Some(&'#') {
        out.alternate = true;
        i += 1;
    }
    if chars.get(i) == Some(&'0') {
        out.zero = true;
        i += 1;
    }
    let number = |i: &mut usize| -> Result<Option<usize>, TemplateError> {
        let start = *i;
        while chars.get(*i).is_some_and(char::is_ascii_digit) {
            *i += 1;
        }
        if *i == start {
            return Ok(None);
        }
        let digits: String = chars[start..*i].iter().collect();
        digits
            .parse()
            .map(Some)
            .map_err(|_| err(format!("`{digits}` is too large")))
    };
    out.width = number(&mut i)?;
    if chars.get(i) == Some(&'.') {
        i += 1;
        out.precision = number(&mut i)?;
        if out.precision.is_none() {
            return Err(err(format!(
                "`{spec}`: a precision must be a literal number in a device print"
            )));
        }
    }
    let rest: String = chars[i..].iter().collect();
    if rest.contains('$') || rest.contains('*') {
        return Err(err(format!(
            "`{spec}`: widths and precisions must be literal numbers in a device print"
        )));
    }
    match KINDS.iter().find(|k| **k == rest) {
        Some(kind) => out.kind = kind,
        None => {
            return Err(err(format!(
                "`{spec}`: `{rest}` is not a format a device print knows (one of `?`, `x`, `X`, `o`, `b`, `e`, `E`)"
            )));
        }
    }
    Ok(out)
}

impl fmt::Display for Spec {
    /// The spec as written after the `:` of a placeholder.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(align) = self.align {
            if let Some(fill) = self.fill {
                write!(f, "{fill}")?;
            }
            let c = match align {
                Align::Left => '<',
                Align::Center => '^',
                Align::Right => '>',
            };
            write!(f, "{c}")?;
        }
        if self.plus {
            f.write_str("+")?;
        }
        if self.alternate {
            f.write_str("#")?;
        }
        if self.zero {
            f.write_str("0")?;
        }
        if let Some(w) = self.width {
            write!(f, "{w}")?;
        }
        if let Some(p) = self.precision {
            write!(f, ".{p}")?;
        }
        f.write_str(self.kind)
    }
}

/// Writes `text` with its braces doubled, as a template shows it.
pub fn escape(text: &str) -> String {
    text.replace('{', "{{").replace('}', "}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(s: &str) -> Spec {
        match &parse(&format!("{{:{s}}}")).unwrap()[..] {
            [Piece::Arg { spec, .. }] => *spec,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn pieces_and_arguments() {
        let pieces = parse("a {{b}} {} {1:x} {name:>8.3}!").unwrap();
        assert_eq!(
            pieces,
            vec![
                Piece::Text("a {b} ".into()),
                Piece::Arg {
                    arg: ArgRef::Next,
                    spec: Spec::default()
                },
                Piece::Text(" ".into()),
                Piece::Arg {
                    arg: ArgRef::Index(1),
                    spec: Spec {
                        kind: "x",
                        ..Spec::default()
                    }
                },
                Piece::Text(" ".into()),
                Piece::Arg {
                    arg: ArgRef::Name("name".into()),
                    spec: Spec {
                        align: Some(Align::Right),
                        width: Some(8),
                        precision: Some(3),
                        ..Spec::default()
                    }
                },
                Piece::Text("!".into()),
            ]
        );
    }

    #[test]
    fn specs_round_trip() {
        for s in ["", "?", "#x", "08.3", "*^+#012.4e", "<5", "-^3b", "X", "E"] {
            let parsed = spec(s);
            let again = spec(&parsed.to_string());
            assert_eq!(parsed, again, "{s}");
        }
        let s = spec("*^+#012.4e");
        assert_eq!(
            (
                s.fill,
                s.align,
                s.plus,
                s.alternate,
                s.zero,
                s.width,
                s.precision,
                s.kind
            ),
            (
                Some('*'),
                Some(Align::Center),
                true,
                true,
                true,
                Some(12),
                Some(4),
                "e"
            )
        );
    }

    #[test]
    fn bad_templates_name_the_offset() {
        for (template, offset, words) in [
            ("ab {", 3, "unclosed"),
            ("x } y", 2, "unmatched"),
            ("{:1$}", 2, "literal numbers"),
            ("{:.*}", 2, "literal number"),
            ("{:s}", 2, "not a format"),
            ("{a-b}", 1, "not an argument"),
        ] {
            let e = parse(template).unwrap_err();
            assert_eq!(e.offset, offset, "{template}: {e}");
            assert!(e.reason.contains(words), "{template}: {e}");
        }
    }
}
