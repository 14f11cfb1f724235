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

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::Value;

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
    message: Value,
    archs: Vec<String>,
}

static RECORDED: Mutex<Vec<Recorded>> = Mutex::new(Vec::new());

/// What makes two diagnostics the same one: package, level, text and primary location.
pub fn identity(message: &Value) -> String {
    let diagnostic = &message["message"];
    let primary = diagnostic["spans"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["is_primary"] == true);
    format!(
        "{}\u{1f}{}\u{1f}{}\u{1f}{}",
        message["package_id"].as_str().unwrap_or(""),
        diagnostic["level"].as_str().unwrap_or(""),
        diagnostic["message"].as_str().unwrap_or(""),
        primary.map_or(String::new(), |s| format!(
            "{}:{}:{}",
            s["file_name"].as_str().unwrap_or(""),
            s["line_start"],
            s["column_start"]
        )),
    )
}

/// Records the `compiler-message`s among a nested build's JSON messages (for `arch`), and
/// returns the rendered text of each, for a failed build to show.
pub(crate) fn record(arch: &str, messages: &[Value]) -> Vec<String> {
    let mut recorded = RECORDED.lock().unwrap_or_else(|e| e.into_inner());
    let mut rendered = Vec::new();
    for message in messages
        .iter()
        .filter(|m| m["reason"] == "compiler-message")
    {
        if let Some(text) = message["message"]["rendered"].as_str() {
            rendered.push(text.to_owned());
        }
        let id = identity(message);
        match recorded.iter_mut().find(|r| r.id == id) {
            Some(r) if !r.archs.iter().any(|a| a == arch) => r.archs.push(arch.to_owned()),
            Some(_) => {}
            None => recorded.push(Recorded {
                id,
                message: message.clone(),
                archs: vec![arch.to_owned()],
            }),
        }
    }
    rendered
}

/// The file in a build script's `OUT_DIR` that keeps its device builds' diagnostics, so
/// `cargo offload` shows them again when the script is fresh, as cargo replays rustc's.
pub const DIAGNOSTICS_FILE: &str = "offload-diagnostics.jsonl";

/// Reports what `record` gathered, once each, and forgets it: kept in `OUT_DIR`
/// ([`DIAGNOSTICS_FILE`]) and handed to `cargo offload` through its message directory, else
/// summed up as `cargo:warning` lines (errors are already on stderr, which cargo shows when
/// the script fails).
pub fn report(env: &Env) {
    let recorded = std::mem::take(&mut *RECORDED.lock().unwrap_or_else(|e| e.into_inner()));
    let mut text = String::new();
    for r in &recorded {
        let mut message = r.message.clone();
        message[OFFLOAD_ARCHS_KEY] = Value::from(r.archs.clone());
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
    if let Some(dir) = env.get_untracked(OFFLOAD_MESSAGE_DIR) {
        let written =
            crate::fsutil::append_for_this_process(Path::new(&dir), "jsonl", text.as_bytes());
        if written.is_ok() {
            return;
        }
    }
    for r in recorded
        .iter()
        .filter(|r| r.message["message"]["level"] == "warning")
    {
        env.warn(&summary_line(&r.message, &r.archs));
    }
}

/// The name of the package a `compiler-message` is about, from its id
/// (`path+file:///…/kernels#saxpy-kernels@0.1.0`), else its target's name.
pub fn package_name(message: &Value) -> &str {
    message["package_id"]
        .as_str()
        .and_then(|id| id.rsplit_once('#'))
        .map(|(_, name)| name.split('@').next().unwrap_or(name))
        .or_else(|| message["target"]["name"].as_str())
        .unwrap_or("kernel crate")
}

/// `saxpy-kernels: device build (sm_80, gfx90a): warning: unused variable `x` at
/// kernels/src/lib.rs:10:9`.
fn summary_line(message: &Value, archs: &[String]) -> String {
    let diagnostic = &message["message"];
    let package = package_name(message);
    let location = diagnostic["spans"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["is_primary"] == true)
        .map(|s| {
            format!(
                " at {}:{}:{}",
                s["file_name"].as_str().unwrap_or("?"),
                s["line_start"],
                s["column_start"]
            )
        })
        .unwrap_or_default();
    format!(
        "{package}: device build ({}): {}: {}{location}",
        archs.join(", "),
        diagnostic["level"].as_str().unwrap_or("warning"),
        diagnostic["message"].as_str().unwrap_or(""),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warning(file: &str, line: u32) -> Value {
        serde_json::json!({
            "reason": "compiler-message",
            "package_id": "path+file:///k#k@0.1.0",
            "target": {"name": "k"},
            "message": {
                "level": "warning",
                "message": "unused variable: `x`",
                "rendered": format!("warning: unused variable: `x`\n --> {file}:{line}:9\n"),
                "spans": [{"is_primary": true, "file_name": file, "line_start": line, "column_start": 9}],
            },
        })
    }

    #[test]
    fn one_diagnostic_of_several_architectures_is_reported_once_naming_them() {
        RECORDED.lock().unwrap().clear();
        let artifact = serde_json::json!({"reason": "compiler-artifact"});
        let rendered = record("sm_80", &[warning("src/lib.rs", 3), artifact]);
        assert_eq!(rendered.len(), 1);
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
}
