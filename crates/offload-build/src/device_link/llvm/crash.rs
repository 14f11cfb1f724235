//! A crash of LLVM inside the in-process link names what was being linked. LLVM ends the
//! process on its fatal errors (`report_fatal_error`, failed assertions, a target's code
//! emission that cannot encode an instruction) with `abort()`: a build script would die of
//! SIGABRT with no word of the kernel crate or the architecture. While a link runs, its
//! thread records what it links; LLVM's fatal-error hook and a SIGABRT handler print that
//! before the process ends as LLVM wants it to (the handler then hands the signal on).

#![forbid(unsafe_code)]

use std::cell::Cell;
use std::sync::Once;

use super::ir::process::{CrashHooks, install_crash_hooks, write_stderr};

thread_local! {
    /// What this thread is linking (a leaked string, one per link), if anything.
    static LINKING: Cell<Option<&'static str>> = const { Cell::new(None) };
    /// Whether the fatal-error hook already reported this thread's crash.
    static REPORTED: Cell<bool> = const { Cell::new(false) };
}

/// While alive, a crash of LLVM on this thread is reported as one of the link of `what`.
pub(super) struct Linking {
    previous: Option<&'static str>,
}

impl Drop for Linking {
    fn drop(&mut self) {
        LINKING.with(|l| l.set(self.previous));
    }
}

/// Marks this thread as linking `what` (e.g. "`my_kernels` for gfx1100") until the returned
/// guard drops.
pub(super) fn linking(what: String) -> Linking {
    static INSTALL: Once = Once::new();
    // The hooks only read thread-locals initialized by a constant and write to standard
    // error; the SIGABRT disposition they replace is handed the signal after them.
    INSTALL.call_once(|| install_crash_hooks(CrashHooks { on_fatal, on_abort }));
    let what: &'static str = Box::leak(what.into_boxed_str());
    Linking {
        previous: LINKING.with(|l| l.replace(Some(what))),
    }
}

/// Writes `parts` to standard error with `write(2)`: async-signal-safe, no allocation.
fn say(parts: &[&[u8]]) {
    for part in parts {
        write_stderr(part);
    }
}

/// LLVM's fatal error, with its reason if it gave one.
fn on_fatal(reason: Option<&[u8]>) {
    let Some(what) = LINKING.with(Cell::get) else {
        return;
    };
    say(&[
        b"error: LLVM failed in the device link of ",
        what.as_bytes(),
        b": ",
        reason.unwrap_or(b"a fatal error"),
        b"\n  (LLVM stopped inside the device link for this target: a fault of the device \
          link or of LLVM, not of the kernel crate; please report it with the kernel. A kernel \
          written differently, or another architecture, may avoid it meanwhile)\n",
    ]);
    REPORTED.with(|r| r.set(true));
}

/// SIGABRT, before the signal goes on to the disposition found at installation.
fn on_abort() {
    if let Some(what) = LINKING.with(Cell::get)
        && !REPORTED.with(Cell::get)
    {
        say(&[
            b"error: LLVM crashed (SIGABRT) in the device link of ",
            what.as_bytes(),
            b"\n  (LLVM's own message, if it printed one, is above)\n",
        ]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    const SIGABRT: i32 = 6;

    /// In a child process (this test binary run again): a link marked as linking, then an
    /// abort as LLVM's fatal errors end in. The parent checks what the child printed and that
    /// it still died of SIGABRT.
    #[test]
    fn an_abort_during_a_link_names_the_link() {
        const CHILD: &str = "OFFLOAD_TEST_CRASH_CHILD";
        if let Some(mode) = crate::env::Env::detect().get_untracked(CHILD) {
            let _guard = linking("`my_kernels` for gfx1100".into());
            if mode == "fatal" {
                on_fatal(Some(b"Unsupported instruction"));
            }
            std::process::abort();
        }
        for mode in ["abort", "fatal"] {
            let out = Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "device_link::llvm::crash::tests::an_abort_during_a_link_names_the_link",
                    "--nocapture",
                ])
                .env(CHILD, mode)
                .output()
                .unwrap();
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(out.status.signal(), Some(SIGABRT), "{mode}: {out:?}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            let expected = match mode {
                "abort" => {
                    "error: LLVM crashed (SIGABRT) in the device link of `my_kernels` for gfx1100"
                }
                _ => {
                    "error: LLVM failed in the device link of `my_kernels` for gfx1100: Unsupported instruction"
                }
            };
            assert!(stderr.contains(expected), "{mode}: {stderr}");
            assert_eq!(stderr.matches("error: LLVM").count(), 1, "{mode}: {stderr}");
        }
    }

    #[test]
    fn a_thread_not_linking_reports_nothing() {
        assert_eq!(LINKING.with(Cell::get), None);
        {
            let _outer = linking("a".into());
            {
                let _inner = linking("b".into());
                assert_eq!(LINKING.with(Cell::get), Some("b"));
            }
            assert_eq!(LINKING.with(Cell::get), Some("a"));
        }
        assert_eq!(LINKING.with(Cell::get), None);
    }
}
