//! The device builds' status lines, read while cargo runs: each build script appends
//! `verb\tmessage` lines to a file of its own in a directory handed over through
//! [`OFFLOAD_STATUS_DIR`], and a thread here prints them in cargo's style as they come.

use std::collections::HashMap;
use std::io::{IsTerminal as _, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use offload_build::tooling::env::Env;
pub use offload_build::tooling::env::OFFLOAD_STATUS_DIR;

/// Prints the status lines of the files in a directory until stopped.
pub(crate) struct StatusWatcher {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StatusWatcher {
    pub(crate) fn start(dir: &Path, style: Style) -> StatusWatcher {
        let stop = Arc::new(AtomicBool::new(false));
        let dir = dir.to_owned();
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut read = HashMap::new();
                loop {
                    // Read once more after the stop, for what came last.
                    let last = stop.load(Ordering::Acquire);
                    print_new_lines(&dir, &mut read, &style);
                    if last {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        };
        StatusWatcher {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for StatusWatcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Prints the whole lines added to each `*.status` file since the last call (`read`: bytes
/// consumed per file).
fn print_new_lines(dir: &Path, read: &mut HashMap<PathBuf, usize>, style: &Style) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "status"))
        .collect();
    files.sort();
    let mut err = std::io::stderr().lock();
    // Cargo's progress bar, drawn on a terminal, is cleared before a line is printed over it.
    let clear = if std::io::stderr().is_terminal() {
        "\r\x1b[K"
    } else {
        ""
    };
    for file in files {
        let done = read.entry(file.clone()).or_insert(0);
        // Only what was appended since the last call.
        let mut bytes = Vec::new();
        let appended = std::fs::File::open(&file).and_then(|mut f| {
            f.seek(SeekFrom::Start(*done as u64))?;
            f.read_to_end(&mut bytes)
        });
        if appended.is_err() {
            continue;
        }
        let Some(end) = bytes.iter().rposition(|&b| b == b'\n') else {
            continue;
        };
        let new = String::from_utf8_lossy(&bytes[..end + 1]).into_owned();
        *done += end + 1;
        for line in new.lines() {
            if let Some((verb, message)) = line.split_once('\t') {
                // One write: the build's own processes share this standard error, and a line
                // written in pieces could take theirs between its text and its newline.
                let line = format!("{clear}{}\n", style.status(verb, message));
                let _ = err.write_all(line.as_bytes());
            }
        }
    }
}

/// Cargo's way of printing a status line: the verb right-aligned in 12 columns, bold green
/// where colour is on (`CARGO_TERM_COLOR=always|never|auto`, `NO_COLOR`, a terminal).
#[derive(Debug, Clone, Copy)]
pub(super) struct Style {
    pub(super) color: bool,
}

impl Style {
    pub(super) fn for_stderr(env: &Env) -> Style {
        Style::for_stderr_with(env, None)
    }

    /// [`Style::for_stderr`], cargo's `--color WHEN` (`always`, `never`, `auto`) first.
    pub(super) fn for_stderr_with(env: &Env, color_flag: Option<&str>) -> Style {
        use std::io::IsTerminal;
        let when = color_flag
            .map(str::to_owned)
            .or_else(|| env.get_untracked("CARGO_TERM_COLOR"));
        let color = match when.as_deref() {
            Some("always") => true,
            Some("never") => false,
            _ => env.get_untracked("NO_COLOR").is_none() && std::io::stderr().is_terminal(),
        };
        Style { color }
    }

    pub(super) fn status(&self, verb: &str, rest: &str) -> String {
        if self.color {
            format!("\x1b[1m\x1b[92m{verb:>12}\x1b[0m {rest}")
        } else {
            format!("{verb:>12} {rest}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_new_lines_are_taken() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("1.status");
        std::fs::write(&file, "Compiling\tkernels k (host)\nLink").unwrap();
        let mut read = HashMap::new();
        let style = Style { color: false };
        print_new_lines(dir.path(), &mut read, &style);
        assert_eq!(read[&file], "Compiling\tkernels k (host)\n".len());
        std::fs::write(&file, "Compiling\tkernels k (host)\nLinking\tk (sm_80)\n").unwrap();
        print_new_lines(dir.path(), &mut read, &style);
        assert_eq!(
            read[&file],
            std::fs::metadata(&file).unwrap().len() as usize
        );
    }
}
