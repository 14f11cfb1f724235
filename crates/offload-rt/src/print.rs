//! The host side of device prints: formats what `device_print!` sent (a normalized template
//! and scalar arguments, see [`offload_format::print_template`]) and hands the text to the
//! sink, standard output unless [`set_print_sink`] chose another.

use std::io::Write;
use std::sync::RwLock;

use offload_format::print_template::{self, Align, ArgRef, Piece, Spec};

use crate::kernel::abi::{
    PRINT_RECORD_HEADER, PRINT_RECORD_READY, PrintArg, PrintTag, print_record_size,
};

/// Where device prints go: called once per launch (or synchronization) with all the lines it
/// printed, in order.
pub type PrintSink = Box<dyn Fn(&str) + Send + Sync>;

static SINK: RwLock<Option<PrintSink>> = RwLock::new(None);

/// Sends device prints to `sink` instead of standard output (`None`: standard output again).
pub fn set_print_sink(sink: Option<PrintSink>) {
    *SINK.write().unwrap_or_else(|e| e.into_inner()) = sink;
}

/// Hands `text` to the sink.
pub(crate) fn emit(text: &str) {
    if text.is_empty() {
        return;
    }
    match &*SINK.read().unwrap_or_else(|e| e.into_inner()) {
        Some(sink) => sink(text),
        None => {
            let mut out = std::io::stdout().lock();
            // Output nobody can take is dropped, as `print!` would panic instead.
            let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
        }
    }
}

/// Formats one print: the template with its placeholders replaced by the arguments. What the
/// runtime cannot make sense of (a template from a mismatched image) is shown in place, not
/// lost.
pub(crate) fn render(template: &str, args: &[PrintArg]) -> String {
    let pieces = match print_template::parse(template) {
        Ok(p) => p,
        Err(e) => return format!("<device print with a bad template {template:?}: {e}>\n"),
    };
    let mut out = String::new();
    let mut next = 0;
    for piece in pieces {
        match piece {
            Piece::Text(text) => out.push_str(&text),
            Piece::Arg { arg, spec } => {
                let index = match arg {
                    ArgRef::Index(i) => i,
                    ArgRef::Next => {
                        next += 1;
                        next - 1
                    }
                    ArgRef::Name(name) => {
                        out.push_str(&format!("<no argument `{name}`>"));
                        continue;
                    }
                };
                match args.get(index).and_then(|a| Value::of(*a)) {
                    Some(value) => out.push_str(&value.render(&spec)),
                    None => out.push_str(&format!("<no argument {index}>")),
                }
            }
        }
    }
    out
}

/// Formats the complete records in `ring` (a GPU's print ring, from its start): the text, and
/// the bytes of records read. Stops at the first record not yet complete.
pub(crate) fn render_records(ring: &[u8]) -> (String, usize) {
    let word = |at: usize| -> Option<u32> {
        ring.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let mut out = String::new();
    let mut at = 0;
    while let Some(first) = word(at) {
        if first & PRINT_RECORD_READY == 0 {
            break;
        }
        let size = (first & !PRINT_RECORD_READY) as usize;
        let (Some(template_len), Some(arg_count)) = (word(at + 4), word(at + 8)) else {
            break;
        };
        let (template_len, arg_count) = (template_len as usize, arg_count as usize);
        let expected = print_record_size(template_len, arg_count);
        let Some(record) = ring.get(at..at + size).filter(|_| size == expected) else {
            out.push_str(&format!(
                "<device print record at byte {at} is malformed: size {size}, expected {expected}>\n"
            ));
            return (out, ring.len());
        };
        let template_start = PRINT_RECORD_HEADER;
        let template =
            String::from_utf8_lossy(&record[template_start..template_start + template_len]);
        let args_start = template_start + template_len.next_multiple_of(8);
        let args: Vec<PrintArg> = record[args_start..]
            .chunks_exact(16)
            .map(|c| PrintArg {
                tag: u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                size: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
                bits: u64::from_le_bytes([c[8], c[9], c[10], c[11], c[12], c[13], c[14], c[15]]),
            })
            .collect();
        out.push_str(&render(&template, &args));
        at += size;
    }
    (out, at)
}

#[derive(Debug, Clone, Copy)]
enum Value {
    Unsigned(u64, u32),
    Signed(i64, u32),
    F32(f32),
    F64(f64),
    Bool(bool),
    Char(char),
    F16(u16),
    Bf16(u16),
}

impl Value {
    fn of(arg: PrintArg) -> Option<Value> {
        let size = arg.size.clamp(1, 8);
        Some(match PrintTag::from_u32(arg.tag)? {
            PrintTag::Unsigned => Value::Unsigned(arg.bits, size),
            PrintTag::Signed => Value::Signed(arg.bits as i64, size),
            PrintTag::F32 => Value::F32(f32::from_bits(arg.bits as u32)),
            PrintTag::F64 => Value::F64(f64::from_bits(arg.bits)),
            PrintTag::Bool => Value::Bool(arg.bits != 0),
            PrintTag::Char => Value::Char(char::from_u32(arg.bits as u32)?),
            PrintTag::F16 => Value::F16(arg.bits as u16),
            PrintTag::Bf16 => Value::Bf16(arg.bits as u16),
        })
    }

    fn is_numeric(self) -> bool {
        !matches!(self, Value::Bool(_) | Value::Char(_))
    }

    /// The value as `format!` with `spec` shows it.
    fn render(self, spec: &Spec) -> String {
        let (sign, prefix, digits) = self.parts(spec);
        let sign = if sign.is_empty() && spec.plus && self.is_numeric() {
            "+"
        } else {
            sign
        };
        let body_len = sign.len() + prefix.len() + digits.chars().count();
        let width = spec.width.unwrap_or(0);
        if body_len >= width {
            return format!("{sign}{prefix}{digits}");
        }
        let pad = width - body_len;
        if spec.zero && self.is_numeric() {
            return format!("{sign}{prefix}{}{digits}", "0".repeat(pad));
        }
        let fill = spec.fill.unwrap_or(' ').to_string();
        let default = if self.is_numeric() {
            Align::Right
        } else {
            Align::Left
        };
        let (left, right) = match spec.align.unwrap_or(default) {
            Align::Left => (0, pad),
            Align::Right => (pad, 0),
            Align::Center => (pad / 2, pad - pad / 2),
        };
        format!(
            "{}{sign}{prefix}{digits}{}",
            fill.repeat(left),
            fill.repeat(right)
        )
    }

    /// Sign (`-` or empty), radix prefix and digits.
    fn parts(self, spec: &Spec) -> (&'static str, &'static str, String) {
        let float = |v: f64, text: String| -> (&'static str, &'static str, String) {
            match text.strip_prefix('-') {
                Some(rest) if v.is_sign_negative() => ("-", "", rest.to_owned()),
                _ => ("", "", text),
            }
        };
        match self {
            Value::F32(v) => float(f64::from(v), float_text(v, spec)),
            Value::F64(v) => float(v, float_text(v, spec)),
            Value::F16(bits) => {
                let v = f16_to_f32(bits);
                float(f64::from(v), float_text(v, spec))
            }
            Value::Bf16(bits) => {
                let v = f32::from_bits(u32::from(bits) << 16);
                float(f64::from(v), float_text(v, spec))
            }
            Value::Bool(b) => ("", "", b.to_string()),
            Value::Char(c) => match spec.kind {
                "?" => ("", "", format!("{c:?}")),
                _ => ("", "", c.to_string()),
            },
            Value::Unsigned(v, size) => int_parts(false, v, size, spec),
            Value::Signed(v, size) => int_parts(v < 0, v as u64, size, spec),
        }
    }
}

/// An integer's sign, prefix and digits: radix formats show the two's complement of the
/// value's own width, as `format!("{:x}", -1i8)` shows `ff`.
fn int_parts(
    negative: bool,
    bits: u64,
    size: u32,
    spec: &Spec,
) -> (&'static str, &'static str, String) {
    let masked = if size >= 8 {
        bits
    } else {
        bits & ((1u64 << (size * 8)) - 1)
    };
    let alt = spec.alternate;
    let radix = |prefix: &'static str, digits: String| ("", if alt { prefix } else { "" }, digits);
    match spec.kind {
        "x" => radix("0x", format!("{masked:x}")),
        "X" => radix("0x", format!("{masked:X}")),
        "o" => radix("0o", format!("{masked:o}")),
        "b" => radix("0b", format!("{masked:b}")),
        kind => {
            let magnitude = if negative {
                (bits as i64).unsigned_abs()
            } else {
                bits
            };
            let digits = match (kind, spec.precision) {
                ("e", Some(p)) => format!("{magnitude:.p$e}"),
                ("e", None) => format!("{magnitude:e}"),
                ("E", Some(p)) => format!("{magnitude:.p$E}"),
                ("E", None) => format!("{magnitude:E}"),
                _ => magnitude.to_string(),
            };
            (if negative { "-" } else { "" }, "", digits)
        }
    }
}

fn float_text<F>(v: F, spec: &Spec) -> String
where
    F: std::fmt::Display + std::fmt::Debug + std::fmt::LowerExp + std::fmt::UpperExp,
{
    match (spec.kind, spec.precision) {
        ("?", Some(p)) => format!("{v:.p$?}"),
        ("?", None) => format!("{v:?}"),
        ("e", Some(p)) => format!("{v:.p$e}"),
        ("e", None) => format!("{v:e}"),
        ("E", Some(p)) => format!("{v:.p$E}"),
        ("E", None) => format!("{v:E}"),
        (_, Some(p)) => format!("{v:.p$}"),
        (_, None) => format!("{v}"),
    }
}

/// IEEE binary16 to `f32` (exact).
fn f16_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits >> 15) << 31;
    let exponent = u32::from((bits >> 10) & 0x1f);
    let mantissa = u32::from(bits & 0x3ff);
    let magnitude = match (exponent, mantissa) {
        (0, 0) => 0,
        (0, m) => {
            // Subnormal: m * 2^-24, exact in f32.
            let v = m as f32 * 2f32.powi(-24);
            return if sign != 0 { -v } else { v };
        }
        (0x1f, m) => 0x7f80_0000 | (m << 13),
        (e, m) => ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(sign | magnitude)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Printable;

    /// Every spec the macro accepts renders as `format!` would.
    #[test]
    fn renders_as_format_does() {
        let cases: Vec<(&str, PrintArg, String)> = vec![
            ("{0}", 42u32.print_arg(), format!("{}", 42u32)),
            ("{0:>6}", (-7i32).print_arg(), format!("{:>6}", -7i32)),
            ("{0:+}", 7i64.print_arg(), format!("{:+}", 7i64)),
            ("{0:05}", (-7i16).print_arg(), format!("{:05}", -7i16)),
            ("{0:#x}", 255u8.print_arg(), format!("{:#x}", 255u8)),
            ("{0:x}", (-1i8).print_arg(), format!("{:x}", -1i8)),
            ("{0:#010b}", 5u16.print_arg(), format!("{:#010b}", 5u16)),
            ("{0:o}", (-2i32).print_arg(), format!("{:o}", -2i32)),
            ("{0:X}", u64::MAX.print_arg(), format!("{:X}", u64::MAX)),
            ("{0:e}", 1234usize.print_arg(), format!("{:e}", 1234usize)),
            (
                "{0:.3}",
                1.23456f32.print_arg(),
                format!("{:.3}", 1.23456f32),
            ),
            ("{0}", 0.1f32.print_arg(), format!("{}", 0.1f32)),
            ("{0:?}", 1.0f64.print_arg(), format!("{:?}", 1.0f64)),
            (
                "{0:+.2e}",
                12345.678f64.print_arg(),
                format!("{:+.2e}", 12345.678f64),
            ),
            ("{0:E}", (-0.5f32).print_arg(), format!("{:E}", -0.5f32)),
            (
                "{0:*^9.1}",
                (-2.25f64).print_arg(),
                format!("{:*^9.1}", -2.25f64),
            ),
            (
                "{0:08.2}",
                (-2.71f64).print_arg(),
                format!("{:08.2}", -2.71f64),
            ),
            ("{0}", f32::NAN.print_arg(), format!("{}", f32::NAN)),
            (
                "{0}",
                f64::NEG_INFINITY.print_arg(),
                format!("{}", f64::NEG_INFINITY),
            ),
            ("{0:<7}", true.print_arg(), format!("{:<7}", true)),
            ("{0:>3}|", 'z'.print_arg(), format!("{:>3}|", 'z')),
            ("{0:?}", '\n'.print_arg(), format!("{:?}", '\n')),
            ("{0}", i64::MIN.print_arg(), format!("{}", i64::MIN)),
            ("{0:^5}", 1u8.print_arg(), format!("{:^5}", 1u8)),
        ];
        for (template, arg, expected) in cases {
            assert_eq!(render(template, &[arg]), expected, "{template}");
        }
    }

    #[test]
    fn halves_render_as_their_f32_values() {
        let f16 = |bits: u16| PrintArg {
            tag: PrintTag::F16 as u32,
            size: 2,
            bits: u64::from(bits),
        };
        // 1.5, -2.0, 65504 (max), 2^-24 (smallest subnormal), infinity.
        assert_eq!(render("{0}", &[f16(0x3e00)]), "1.5");
        assert_eq!(render("{0}", &[f16(0xc000)]), "-2");
        assert_eq!(render("{0}", &[f16(0x7bff)]), "65504");
        assert_eq!(
            render("{0:e}", &[f16(0x0001)]),
            format!("{:e}", 2f32.powi(-24))
        );
        assert_eq!(render("{0}", &[f16(0x7c00)]), "inf");
        let bf16 = PrintArg {
            tag: PrintTag::Bf16 as u32,
            size: 2,
            bits: 0x3fc0,
        };
        assert_eq!(render("{0}", &[bf16]), "1.5");
    }

    #[test]
    fn what_cannot_be_rendered_shows_in_place() {
        assert_eq!(render("a {1} b", &[1u8.print_arg()]), "a <no argument 1> b");
        assert!(render("{", &[]).contains("bad template"));
        let bad_tag = PrintArg {
            tag: 99,
            size: 4,
            bits: 0,
        };
        assert_eq!(render("{0}", &[bad_tag]), "<no argument 0>");
    }

    fn record(template: &str, args: &[PrintArg], ready: bool) -> Vec<u8> {
        let size = print_record_size(template.len(), args.len());
        let mut bytes = vec![0u8; size];
        let first = size as u32 | if ready { PRINT_RECORD_READY } else { 0 };
        bytes[0..4].copy_from_slice(&first.to_le_bytes());
        bytes[4..8].copy_from_slice(&(template.len() as u32).to_le_bytes());
        bytes[8..12].copy_from_slice(&(args.len() as u32).to_le_bytes());
        bytes[16..16 + template.len()].copy_from_slice(template.as_bytes());
        let mut at = 16 + template.len().next_multiple_of(8);
        for a in args {
            bytes[at..at + 4].copy_from_slice(&a.tag.to_le_bytes());
            bytes[at + 4..at + 8].copy_from_slice(&a.size.to_le_bytes());
            bytes[at + 8..at + 16].copy_from_slice(&a.bits.to_le_bytes());
            at += 16;
        }
        bytes
    }

    #[test]
    fn ring_records_render_in_order_up_to_an_incomplete_one() {
        let mut ring = record("x = {0}\n", &[5i32.print_arg()], true);
        ring.extend(record(
            "{0:.1} {1}\n",
            &[0.25f32.print_arg(), 'q'.print_arg()],
            true,
        ));
        let complete = ring.len();
        ring.extend(record("late {0}\n", &[1u8.print_arg()], false));
        ring.extend([0; 64]);
        let (text, read) = render_records(&ring);
        assert_eq!(text, "x = 5\n0.2 q\n");
        assert_eq!(read, complete);
    }

    #[test]
    fn a_malformed_record_is_reported_not_trusted() {
        let mut ring = record("{0}\n", &[1u8.print_arg()], true);
        ring[0..4].copy_from_slice(&(8 | PRINT_RECORD_READY).to_le_bytes());
        let (text, read) = render_records(&ring);
        assert!(text.contains("malformed"), "{text}");
        assert_eq!(read, ring.len());
    }
}
