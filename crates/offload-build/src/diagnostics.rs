//! Compiler diagnostics of the nested device builds, reported once however many architectures
//! gave them.
//!
//! A nested build's diagnostics would otherwise stay in the build script's captured stderr,
//! shown by cargo only when the script fails, and once per architecture. They are recorded
//! as cargo's own `compiler-message` JSON and, at the end of the build script, kept in its
//! `OUT_DIR` and either written to the message directory `cargo offload` handed over
//! ([`OFFLOAD_MESSAGE_DIR`]: it prints them as cargo prints diagnostics, or passes them on as
//! JSON messages for IDEs), or, under a plain `cargo build`, summed up as one `cargo:warning`
//! each.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::json::{CargoMessage, JsonExt, JsonValue};

use crate::env::Env;

/// Where `cargo offload` collects the device builds' diagnostics: each build script appends
/// JSON lines to `<dir>/<pid>.jsonl`. Read untracked: its value changes with every run.
pub const OFFLOAD_MESSAGE_DIR: &str = "OFFLOAD_MESSAGE_DIR";

/// The key [`report`] adds to each `compiler-message`: the architectures that gave it.
pub const OFFLOAD_ARCHS_KEY: &str = "offload_archs";

/// A nested build's `compiler-message` and the architectures that gave it.
struct Recorded {
    /// Its [`identity`].
    id: String,
    message: CargoMessage,
    archs: Vec<String>,
}

static RECORDED: Mutex<Vec<Recorded>> = Mutex::new(Vec::new());

/// The architectures of the build, in the order it was asked for, by which [`report`] lists
/// the architectures of each diagnostic.
static ARCH_ORDER: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Lists the architectures of each diagnostic in the order of `archs` (the build's list).
pub(crate) fn set_arch_order(archs: &[crate::arch::OffloadArch]) {
    *ARCH_ORDER.lock().unwrap_or_else(|e| e.into_inner()) =
        archs.iter().map(crate::arch::OffloadArch::name).collect();
}

/// What makes two diagnostics the same one: package, level, text and primary location.
pub fn identity(message: &CargoMessage) -> String {
    let json = message.json();
    let text = |path: &[&str]| json.str_at(path).unwrap_or("");
    format!(
        "{}\u{1f}{}\u{1f}{}\u{1f}{}",
        text(&["package_id"]),
        level(message).unwrap_or(""),
        text(&["message", "message"]),
        primary_span(message).map_or(String::new(), |s| s.to_string()),
    )
}

/// Where a diagnostic's primary span starts: `file:line:column`.
struct SpanStart<'m> {
    file: &'m str,
    line: f64,
    column: f64,
}

impl std::fmt::Display for SpanStart<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

fn primary_span(message: &CargoMessage) -> Option<SpanStart<'_>> {
    let number = |v: &JsonValue, key| match v.get_key(key) {
        Some(JsonValue::Number(n)) => Some(*n),
        _ => None,
    };
    let span = message
        .json()
        .at(&["message", "spans"])?
        .as_array()?
        .iter()
        .find(|s| s.get_key("is_primary").and_then(JsonExt::as_bool) == Some(true))?;
    Some(SpanStart {
        file: span.str_at(&["file_name"]).unwrap_or("?"),
        line: number(span, "line_start")?,
        column: number(span, "column_start")?,
    })
}

/// Records the `compiler-message`s among a nested build's JSON messages, for `arch` (the
/// architectures the build serves, comma-separated).
pub(crate) fn record(arch: &str, messages: &[CargoMessage]) {
    let mut recorded = RECORDED.lock().unwrap_or_else(|e| e.into_inner());
    for message in messages.iter().filter(|m| m.is("compiler-message")) {
        let mut message = message.clone();
        add_help(&mut message);
        let message = &message;
        let id = identity(message);
        let archs = arch.split(", ").map(str::to_owned);
        match recorded.iter_mut().find(|r| r.id == id) {
            Some(r) => {
                for arch in archs {
                    if !r.archs.contains(&arch) {
                        r.archs.push(arch);
                    }
                }
            }
            None => recorded.push(Recorded {
                id,
                message: message.clone(),
                archs: archs.collect(),
            }),
        }
    }
}

/// Why a nested build failed, for its error: where rustc's errors are when it gave some (no
/// `cargo_stderr` left), else what cargo said and the command to run it by hand.
pub fn failure_reason(cargo_stderr: &str, command: &str) -> String {
    let said = cargo_stderr.trim();
    if said.is_empty() {
        "rustc's errors are shown above".to_owned()
    } else {
        format!("cargo says:\n{said}\n  command: {command}")
    }
}

/// A device build's diagnostic as rustc renders it, with a note naming the architectures
/// whose builds gave it (rustc's colours where `rendered` has them).
pub fn with_archs_note(rendered: &str, package: &str, archs: &[&str]) -> String {
    let note = format!(
        "in the device build of `{package}` for {}",
        archs.join(", ")
    );
    with_line(rendered, "note", &note)
}

/// `rendered` with a `= {kind}: {text}` line after it, in rustc's layout: under the gutter of
/// its code lines (one `|` line between), its trailing newlines kept, and rustc's colours
/// where `rendered` has them.
fn with_line(rendered: &str, kind: &str, text: &str) -> String {
    let body = rendered.trim_end_matches('\n');
    let trailing = rendered.len() - body.len();
    // The gutter is one column wider than the ` --> file:line:col` line's indent.
    let pad = body
        .lines()
        .find(|l| l.contains("--> "))
        .map_or(1, |l| l.len() - l.trim_start_matches(' ').len())
        + 1;
    let pad = " ".repeat(pad);
    let (bar, label) = if body.contains('\x1b') {
        (
            "\x1b[1m\x1b[94m|\x1b[0m".to_owned(),
            format!("\x1b[1m\x1b[94m= \x1b[0m\x1b[1m{kind}\x1b[0m"),
        )
    } else {
        ("|".to_owned(), format!("= {kind}"))
    };
    let last = body.lines().last().unwrap_or("").trim();
    let separator = if last == "|" || last.ends_with("|\x1b[0m") || last.contains("= ") {
        String::new()
    } else {
        format!("\n{pad}{bar}")
    };
    format!(
        "{body}{separator}\n{pad}{label}: {text}{}",
        "\n".repeat(trailing.max(1))
    )
}

/// Takes what `record` gathered, each message with the architectures that gave it under
/// `OFFLOAD_ARCHS_KEY`, as `report` writes them: how a device link process hands its nested
/// builds' diagnostics back to the build that ran it (`record_reported`), and how a test
/// shows a failed nested build's errors.
#[cfg(feature = "llvm")]
pub fn take_recorded() -> Vec<CargoMessage> {
    let recorded = std::mem::take(&mut *RECORDED.lock().unwrap_or_else(|e| e.into_inner()));
    recorded
        .into_iter()
        .map(|r| {
            let mut message = r.message;
            let archs = r.archs.into_iter().map(JsonValue::from).collect();
            message.insert(OFFLOAD_ARCHS_KEY, JsonValue::Array(archs));
            message
        })
        .collect()
}

/// Records a message [`take_recorded`] gave (in another process) for the architectures it
/// names, so that [`report`] reports it once with those of this process.
pub fn record_reported(message: &CargoMessage) {
    let archs: Vec<String> = archs(message).into_iter().map(str::to_owned).collect();
    let mut message = message.clone();
    message.remove(OFFLOAD_ARCHS_KEY);
    for arch in &archs {
        record(arch, std::slice::from_ref(&message));
    }
}

/// The file in a build script's `OUT_DIR` that keeps its device builds' diagnostics, so
/// `cargo offload` shows them again when the script is fresh, as cargo replays rustc's.
pub const DIAGNOSTICS_FILE: &str = "offload-diagnostics.jsonl";

/// Reports what `record` gathered, once each, and forgets it: kept in `OUT_DIR`
/// ([`DIAGNOSTICS_FILE`]) and handed to `cargo offload` through its message directory, else
/// summed up as `cargo:warning` lines (errors are already on stderr, which cargo shows when
/// the script fails).
pub fn report(env: &Env) {
    let mut recorded = std::mem::take(&mut *RECORDED.lock().unwrap_or_else(|e| e.into_inner()));
    let order = ARCH_ORDER.lock().unwrap_or_else(|e| e.into_inner()).clone();
    for r in &mut recorded {
        r.archs
            .sort_by_key(|a| order.iter().position(|o| o == a).unwrap_or(order.len()));
    }
    let mut text = String::new();
    for r in &recorded {
        let mut message = r.message.clone();
        let archs = r.archs.iter().cloned().map(JsonValue::from).collect();
        message.insert(OFFLOAD_ARCHS_KEY, JsonValue::Array(archs));
        text.push_str(&message.to_string());
        text.push('\n');
    }
    if let Some(out_dir) = env.get_untracked("OUT_DIR") {
        // Best effort: the diagnostics were shown or are about to be.
        let _ = crate::fsutil::write_atomic(
            &PathBuf::from(out_dir).join(DIAGNOSTICS_FILE),
            text.as_bytes(),
        );
    }
    if recorded.is_empty() {
        return;
    }
    // Errors fail the build: shown once each here, on the script's stderr, which cargo shows
    // (and `cargo offload` leaves to it) in its report of the failure.
    let mut err = std::io::stderr().lock();
    for r in recorded
        .iter()
        .filter(|r| level(&r.message) == Some("error"))
    {
        if let Some(text) = rendered(&r.message) {
            let archs: Vec<&str> = r.archs.iter().map(String::as_str).collect();
            let _ = write!(
                err,
                "{}",
                with_archs_note(text, package_name(&r.message), &archs)
            );
        }
    }
    drop(err);
    if let Some(dir) = env.get_untracked(OFFLOAD_MESSAGE_DIR) {
        let written =
            crate::fsutil::append_for_this_process(Path::new(&dir), "jsonl", text.as_bytes());
        if written.is_ok() {
            return;
        }
    }
    for r in recorded
        .iter()
        .filter(|r| level(&r.message) == Some("warning"))
    {
        env.warn(&summary_line(&r.message, &r.archs));
    }
}

/// The name of the package a `compiler-message` is about, from its id
/// (`path+file:///…/kernels#saxpy-kernels@0.1.0`), else its target's name.
pub fn package_name(message: &CargoMessage) -> &str {
    let json = message.json();
    json.str_at(&["package_id"])
        .and_then(|id| id.rsplit_once('#'))
        .map(|(_, name)| name.split('@').next().unwrap_or(name))
        .or_else(|| json.str_at(&["target", "name"]))
        .unwrap_or("kernel crate")
}

/// A `compiler-message`'s level: `error`, `warning`, `note`, ….
pub fn level(message: &CargoMessage) -> Option<&str> {
    message.json().str_at(&["message", "level"])
}

/// A `compiler-message`'s text as rustc prints it.
pub fn rendered(message: &CargoMessage) -> Option<&str> {
    message.json().str_at(&["message", "rendered"])
}

/// The architectures whose device builds gave a message `report` wrote.
pub fn archs(message: &CargoMessage) -> Vec<&str> {
    message.json().strs_at(&[OFFLOAD_ARCHS_KEY])
}

/// Types and macros of `alloc` and `std` that kernel code reaches for and `core` lacks.
const HEAP_TYPES: &[&str] = &[
    "Vec", "String", "Box", "Rc", "Arc", "HashMap", "HashSet", "BTreeMap", "BTreeSet", "VecDeque",
];
const PRINT_MACROS: &[&str] = &["println", "print", "eprintln", "eprint", "dbg"];

/// What to write instead, where rustc's own suggestion for a kernel crate's error leads
/// nowhere: the `no_std` traps (`Vec`, `format!`, float math, `extern crate alloc`/`std`),
/// and a kernel launched without `#[kernel]` or with the attribute shadowed by its module.
/// `None` for every other diagnostic.
pub fn help(message: &CargoMessage) -> Option<String> {
    let text = message.json().str_at(&["message", "message"])?;
    let quoted = |prefix: &str| -> Option<&str> {
        text.strip_prefix(prefix)?
            .strip_prefix('`')?
            .split('`')
            .next()
    };
    let no_heap = "kernel crates are `no_std` and a device has no heap: take buffers as \
                   parameters (`&[T]` to read, `DisjointSlice<T>` to write), use fixed-size \
                   arrays, or `shared_array!` for memory shared by a block";
    let heap_type = quoted("failed to resolve: use of undeclared type ")
        .or_else(|| quoted("cannot find type "))
        .or_else(|| quoted("failed to resolve: use of undeclared crate or module "));
    if heap_type.is_some_and(|t| HEAP_TYPES.contains(&t)) {
        return Some(no_heap.to_owned());
    }
    if let Some(name) = quoted("cannot find macro ") {
        return match name {
            "vec" => Some(no_heap.to_owned()),
            "format" | "write" | "writeln" => Some(
                "kernel crates are `no_std`: there is no `String` to format into; \
                 `device_println!` prints from a kernel with the same format strings"
                    .to_owned(),
            ),
            _ if PRINT_MACROS.contains(&name) => Some(
                "kernel crates are `no_std`: `offload_rt::device_println!` prints from a \
                 kernel (on a GPU its output reaches the host's stdout after the launch)"
                    .to_owned(),
            ),
            _ => None,
        };
    }
    if let Some(method) = quoted("no method named ") {
        if receiver_type(text).is_some_and(|t| ["f32", "f64", "{float}"].contains(&t)) {
            return Some(format!(
                "`core` has no `{method}` for floats (it is `std`'s, built on the C library): \
                 `offload_rt::kernel::math` has the functions kernels can call on every \
                 device: `sqrt`, `rsqrt`, `fma`, `exp`, `log`, `sin`, `cos`, `pow`, `floor`, \
                 `abs`, `min`, `max`"
            ));
        }
        if method == "launch" && text.contains("found for fn item") {
            return Some(
                "`launch` is what `#[kernel]` gives a function: mark it `#[kernel]` (from \
                 `offload_rt`) in its kernel crate"
                    .to_owned(),
            );
        }
        return None;
    }
    if text.starts_with("no global memory allocator found")
        || quoted("can't find crate for ") == Some("alloc")
    {
        return Some(format!(
            "`extern crate alloc` is not for kernels: {}",
            no_heap.trim_start_matches("kernel crates are `no_std` and ")
        ));
    }
    if quoted("can't find crate for ") == Some("std") {
        return Some(
            "kernel crates are `#![no_std]` (GPUs have no `std`): use `core` and \
             `offload_rt::kernel`, and keep `std` in the host crate"
                .to_owned(),
        );
    }
    if quoted("found duplicate lang item ") == Some("panic_impl") {
        return Some(
            "kernel crates are `#![no_std]` and offload-rt is their panic handler: \
             `extern crate std` (or a dependency that uses `std`) brings a second one; use \
             `core` and `offload_rt::kernel`, and keep `std` in the host crate"
                .to_owned(),
        );
    }
    if text.starts_with("can't use generic parameters from outer item")
        && expanded_from(message.json().get_key("message")?, "shared_array!")
    {
        return Some(
            "`shared_array!` declares a `static`, which cannot name the generic parameters of \
             the function around it: in a generic function write \
             `offload_rt::generic_shared_array!(T, N)`, which gives each instantiation its own \
             array"
                .to_owned(),
        );
    }
    if let Some(ty) = text
        .strip_prefix('`')
        .and_then(|t| t.split_once("` is not `DeviceCopy`"))
        .map(|(ty, _)| ty)
    {
        return foreign_type_help(ty);
    }
    if quoted("cannot find attribute ") == Some("len") {
        return Some(
            "`#[len(…)]` is read by `#[kernel]` from its function's parameters: is the \
             function's `#[kernel]` missing?"
                .to_owned(),
        );
    }
    if quoted("cannot find attribute ") == Some("kernel") {
        return Some(
            "`use offload_rt::kernel::{self, …}` imports the module `kernel` only; the \
             attribute is `offload_rt::kernel` too: import it as `offload_rt::kernel::kernel` \
             (`use offload_rt::kernel::{kernel, …}`), or write `#[offload_rt::kernel]`"
                .to_owned(),
        );
    }
    None
}

/// What makes a type of another crate `DeviceCopy`, for rustc's "`T` is not `DeviceCopy`":
/// `num_complex::Complex<T>` by offload-rt's `num-complex` feature, a `bytemuck::Pod` type by
/// its `bytemuck` feature and the `Pod<T>` wrapper. `None` for the types of the language, which
/// the error's own note covers.
fn foreign_type_help(ty: &str) -> Option<String> {
    let name = ty.split('<').next().unwrap_or(ty);
    let last = name.rsplit("::").next().unwrap_or(name);
    if last.starts_with("Complex") {
        return Some(format!(
            "`{ty}` is `DeviceCopy` with offload-rt's `num-complex` feature: \
             `offload-rt = {{ …, features = [\"num-complex\"] }}` in the manifests of the \
             kernel crate and of the host crate that launches it"
        ));
    }
    let is_path = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == ':')
        && !["char", "str", "String", "Vec", "Box"].contains(&last);
    is_path.then(|| {
        format!(
            "a type of another crate that implements `bytemuck::Pod` (glam's, nalgebra's) \
             crosses wrapped: `offload_rt::Pod<{ty}>`, with offload-rt's `bytemuck` feature; a \
             struct of this crate takes `#[derive(DeviceCopy)]` and `#[repr(C)]`"
        )
    })
}

/// Whether a span of the diagnostic `message` (or of its children) comes from an expansion of
/// the macro `name` (`shared_array!`, called by that name or by a path ending in it), directly
/// or through the macros that one expands to.
fn expanded_from(message: &JsonValue, name: &str) -> bool {
    fn span_from(span: &JsonValue, name: &str) -> bool {
        let Some(expansion) = span.get_key("expansion") else {
            return false;
        };
        let called = expansion.str_at(&["macro_decl_name"]).unwrap_or("");
        called.rsplit("::").next() == Some(name)
            || expansion
                .get_key("span")
                .is_some_and(|outer| span_from(outer, name))
    }
    let spans = message.get_key("spans").and_then(JsonExt::as_array);
    spans
        .into_iter()
        .flatten()
        .any(|span| span_from(span, name))
        || message
            .get_key("children")
            .and_then(JsonExt::as_array)
            .into_iter()
            .flatten()
            .any(|child| expanded_from(child, name))
}

/// The receiver's type of rustc's "no method named `m` found for …" without its references:
/// `f32` for `type `f32``, `reference `&f32`` and `mutable reference `&mut &f32``.
fn receiver_type(text: &str) -> Option<&str> {
    let (_, receiver) = text.split_once("` found for ")?;
    let ty = receiver.split('`').nth(1)?;
    let mut ty = ty.trim();
    while let Some(rest) = ty.strip_prefix('&') {
        ty = rest.trim_start();
        ty = ty.strip_prefix("mut ").unwrap_or(ty).trim_start();
    }
    Some(ty)
}

/// Adds `help`'s line, if any, to a `compiler-message`: to its rendered text, as rustc
/// renders a `= help:` note, and to its children, where an IDE reads it.
pub fn add_help(message: &mut CargoMessage) {
    let Some(text) = help(message) else {
        return;
    };
    let Some(inner) = message.object_mut("message") else {
        return;
    };
    let given = |child: &JsonValue| child.str_at(&["message"]) == Some(text.as_str());
    if let Some(JsonValue::Array(children)) = inner.get("children")
        && children.iter().any(given)
    {
        return;
    }
    if let Some(JsonValue::String(rendered)) = inner.get_mut("rendered") {
        *rendered = with_line(rendered, "help", &text);
    }
    if let Some(JsonValue::Array(children)) = inner.get_mut("children") {
        let child: HashMap<String, JsonValue> = [
            ("message", JsonValue::String(text)),
            ("level", JsonValue::String("help".to_owned())),
            ("spans", JsonValue::Array(Vec::new())),
            ("children", JsonValue::Array(Vec::new())),
            ("code", JsonValue::Null),
            ("rendered", JsonValue::Null),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        children.push(JsonValue::Object(child));
    }
}

/// `saxpy-kernels: device build (sm_80, gfx90a): warning: unused variable `x` at
/// kernels/src/lib.rs:10:9`.
fn summary_line(message: &CargoMessage, archs: &[String]) -> String {
    let package = package_name(message);
    let location = primary_span(message)
        .map(|s| format!(" at {s}"))
        .unwrap_or_default();
    format!(
        "{package}: device build ({}): {}: {}{location}",
        archs.join(", "),
        level(message).unwrap_or("warning"),
        message.json().str_at(&["message", "message"]).unwrap_or(""),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warning(file: &str, line: u32) -> CargoMessage {
        CargoMessage::parse(&format!(
            r#"{{
                "reason": "compiler-message",
                "package_id": "path+file:///k#k@0.1.0",
                "target": {{"name": "k"}},
                "message": {{
                    "level": "warning",
                    "message": "unused variable: `x`",
                    "rendered": "warning: unused variable: `x`\n --> {file}:{line}:9\n",
                    "spans": [{{"is_primary": false, "file_name": "other.rs", "line_start": 1, "column_start": 1}},
                              {{"is_primary": true, "file_name": "{file}", "line_start": {line}, "column_start": 9}}]
                }}
            }}"#
        ))
        .unwrap()
    }

    #[test]
    fn one_diagnostic_of_several_architectures_is_reported_once_naming_them() {
        RECORDED.lock().unwrap().clear();
        let artifact = CargoMessage::parse(r#"{"reason": "compiler-artifact"}"#).unwrap();
        record("sm_80", &[warning("src/lib.rs", 3), artifact]);
        record(
            "gfx90a",
            &[warning("src/lib.rs", 3), warning("src/lib.rs", 4)],
        );
        record("gfx90a", &[warning("src/lib.rs", 3)]);
        let recorded = std::mem::take(&mut *RECORDED.lock().unwrap());
        assert_eq!(recorded.len(), 2);
        assert_eq!(recorded[0].archs, ["sm_80", "gfx90a"]);
        assert_eq!(recorded[1].archs, ["gfx90a"]);
        assert_eq!(
            summary_line(&recorded[0].message, &recorded[0].archs),
            "k: device build (sm_80, gfx90a): warning: unused variable: `x` at src/lib.rs:3:9"
        );
    }

    fn error(text: &str) -> CargoMessage {
        let mut message = warning("src/lib.rs", 2);
        let inner = message.object_mut("message").unwrap();
        inner.insert("level".into(), JsonValue::String("error".into()));
        inner.insert("message".into(), JsonValue::String(text.into()));
        inner.insert(
            "rendered".into(),
            JsonValue::String(format!("error: {text}\n --> src/lib.rs:2:9\n\n")),
        );
        inner.insert("children".into(), JsonValue::Array(Vec::new()));
        message
    }

    /// rustc's own texts, from `no_std` kernel crates built for the host and for nvptx64.
    #[test]
    fn the_no_std_traps_get_a_help_naming_what_kernels_use() {
        let cases = [
            ("cannot find type `Vec` in this scope", "DisjointSlice<T>"),
            (
                "failed to resolve: use of undeclared type `String`",
                "no heap",
            ),
            ("cannot find macro `vec` in this scope", "no heap"),
            (
                "cannot find macro `format` in this scope",
                "device_println!",
            ),
            (
                "cannot find macro `println` in this scope",
                "device_println!",
            ),
            (
                "no method named `sin` found for type `f64` in the current scope",
                "offload_rt::kernel::math",
            ),
            (
                "no method named `powf` found for type `f32` in the current scope",
                "`pow`",
            ),
            (
                "no method named `sin` found for mutable reference `&mut f32` in the current \
                 scope",
                "offload_rt::kernel::math",
            ),
            (
                "no method named `cos` found for reference `&f64` in the current scope",
                "offload_rt::kernel::math",
            ),
            (
                "no method named `powf` found for reference `&&f32` in the current scope",
                "offload_rt::kernel::math",
            ),
            (
                "no global memory allocator found but one is required; link to std or add \
                 `#[global_allocator]` to a static item that implements the GlobalAlloc trait",
                "`extern crate alloc` is not for kernels",
            ),
            ("can't find crate for `alloc`", "`extern crate alloc`"),
            ("can't find crate for `std`", "#![no_std]"),
            ("found duplicate lang item `panic_impl`", "extern crate std"),
            (
                "no method named `launch` found for fn item `fn(f32) {saxpy}` in the current \
                 scope",
                "mark it `#[kernel]`",
            ),
            (
                "cannot find attribute `len` in this scope",
                "is the function's `#[kernel]` missing?",
            ),
            (
                "`Complex<f32>` is not `DeviceCopy`: it cannot be a kernel parameter or a \
                 device buffer's element",
                "offload-rt's `num-complex` feature",
            ),
            (
                "`num_complex::Complex<f64>` is not `DeviceCopy`: it cannot be a kernel \
                 parameter or a device buffer's element",
                "features = [\"num-complex\"]",
            ),
            (
                "`Vec4` is not `DeviceCopy`: it cannot be a kernel parameter or a device \
                 buffer's element",
                "`offload_rt::Pod<Vec4>`, with offload-rt's `bytemuck` feature",
            ),
            (
                "cannot find attribute `kernel` in this scope",
                "use offload_rt::kernel::{kernel, …}",
            ),
        ];
        for (text, expected) in cases {
            let help = help(&error(text)).unwrap_or_else(|| panic!("no help for {text}"));
            assert!(help.contains(expected), "{text}: {help}");
        }
        for unrelated in [
            "cannot find type `Foo` in this scope",
            "no method named `len` found for type `u32` in the current scope",
            "no method named `sin` found for reference `&u32` in the current scope",
            "no method named `sin` found for struct `f32x4` in the current scope",
            "`char` is not `DeviceCopy`: it cannot be a kernel parameter or a device buffer's \
             element",
            "`&u32` is not `DeviceCopy`: it cannot be a kernel parameter or a device buffer's \
             element",
            "mismatched types",
            "cannot find macro `my_macro` in this scope",
        ] {
            assert_eq!(help(&error(unrelated)), None, "{unrelated}");
        }
    }

    #[test]
    fn the_help_is_rendered_as_rustc_renders_one_and_given_once() {
        let mut message = error("cannot find type `Vec` in this scope");
        add_help(&mut message);
        add_help(&mut message);
        let rendered = rendered(&message).unwrap();
        assert!(
            rendered.starts_with(
                "error: cannot find type `Vec` in this scope\n --> src/lib.rs:2:9\n  |\n  = help: \
                 kernel crates are `no_std`"
            ),
            "{rendered}"
        );
        assert!(rendered.ends_with("`shared_array!` for memory shared by a block\n\n"));
        assert_eq!(rendered.matches("= help").count(), 1, "{rendered}");
        let children = message.json().at(&["message", "children"]).unwrap();
        assert_eq!(children.as_array().map(<[JsonValue]>::len), Some(1));
        assert_eq!(
            children.as_array().unwrap()[0].str_at(&["level"]),
            Some("help")
        );
    }

    /// rustc's layout: the note under the gutter of a two-digit line number, after a `|`.
    #[test]
    fn the_note_of_architectures_stands_under_rustcs_gutter() {
        let rendered = "error[E0308]: mismatched types\n  --> k/src/lib.rs:20:26\n   |\n20 | \
                        fn f() -> u32 { \"no\" }\n   |                 ^^^^ expected `u32`\n\n";
        assert_eq!(
            with_archs_note(rendered, "k", &["sm_80", "host"]),
            "error[E0308]: mismatched types\n  --> k/src/lib.rs:20:26\n   |\n20 | fn f() -> \
             u32 { \"no\" }\n   |                 ^^^^ expected `u32`\n   |\n   = note: in the \
             device build of `k` for sm_80, host\n\n"
        );
    }

    /// rustc's E0401 where `shared_array!`'s static names a function's type parameter: the
    /// static's span comes from `__for_target!`, which `shared_array!` expanded to.
    #[test]
    fn shared_array_in_a_generic_function_gets_generic_shared_array() {
        let message = |outer: &str| {
            CargoMessage::parse(&format!(
                r#"{{
                    "reason": "compiler-message",
                    "message": {{
                        "level": "error",
                        "message": "can't use generic parameters from outer item",
                        "code": {{"code": "E0401"}},
                        "rendered": "error[E0401]: can't use generic parameters from outer item\n",
                        "children": [],
                        "spans": [
                            {{"is_primary": false, "label": "type parameter from outer item", "expansion": null}},
                            {{"is_primary": true, "label": "use of generic parameter from outer item",
                              "expansion": {{"macro_decl_name": "__for_target!",
                                             "span": {{"expansion": {{"macro_decl_name": "{outer}", "span": {{}}}}}}}}}}
                        ]
                    }}
                }}"#
            ))
            .unwrap()
        };
        let help_text = help(&message("shared_array!")).unwrap();
        assert!(
            help_text.contains("generic_shared_array!(T, N)"),
            "{help_text}"
        );
        assert_eq!(help(&message("my_macro!")), None);
    }
}
