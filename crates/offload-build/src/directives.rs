//! The `cargo:` directives of a build script, held while the build runs and given at its
//! end, each once: all of them when it succeeds; when it fails, only its warnings, on stderr.
//! Cargo reruns a failed build script whatever it declared, and shows what the script printed
//! on stdout in its report of the failure, where dozens of `rerun-if` lines would bury the
//! error.

use std::io::Write as _;
use std::sync::Mutex;

/// The directives held, in order; `None` while nothing is held and they are printed as given.
static HELD: Mutex<Option<Vec<String>>> = Mutex::new(None);

/// Gives the directive `line` (`cargo:…`): kept, once, while [`hold`] is in effect, else
/// printed at once.
pub(crate) fn emit(line: String) {
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    match held.as_mut() {
        Some(lines) => {
            if !lines.contains(&line) {
                lines.push(line);
            }
        }
        None => println!("{line}"),
    }
}

/// Holds the directives given from now on until [`release`].
pub(crate) fn hold() {
    HELD.lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(Vec::new);
}

/// Gives what was held and stops holding: every directive on stdout if the build
/// `succeeded`, else each warning on stderr as cargo would word it.
pub(crate) fn release(succeeded: bool) {
    let lines = HELD
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .unwrap_or_default();
    // Best effort, as `println!` would be, without its panic on a closed stream.
    if succeeded {
        let mut out = std::io::stdout().lock();
        for line in lines {
            let _ = writeln!(out, "{line}");
        }
    } else {
        let mut err = std::io::stderr().lock();
        for line in &lines {
            if let Some(warning) = line.strip_prefix("cargo:warning=") {
                let _ = writeln!(err, "warning: {warning}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_directives_are_kept_once_in_order() {
        hold();
        emit("cargo:rerun-if-env-changed=A".to_owned());
        emit("cargo:warning=w".to_owned());
        emit("cargo:rerun-if-env-changed=A".to_owned());
        let held = HELD.lock().unwrap().clone();
        assert_eq!(
            held.as_deref(),
            Some(
                &[
                    "cargo:rerun-if-env-changed=A".to_owned(),
                    "cargo:warning=w".to_owned()
                ][..]
            )
        );
        release(true);
        assert_eq!(*HELD.lock().unwrap(), None);
    }
}
