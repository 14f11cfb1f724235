//! A crash of LLVM inside the in-process link names what was being linked. LLVM ends the
//! process on its fatal errors (`report_fatal_error`, failed assertions, a target's code
//! emission that cannot encode an instruction) with `abort()`: a build script would die of
//! SIGABRT with no word of the kernel crate or the architecture. While a link runs, its
//! thread records what it links; LLVM's fatal-error hook and a SIGABRT handler print that
//! before the process ends as LLVM wants it to (the handler then hands the signal on).

use std::cell::Cell;
use std::ffi::{CStr, c_char, c_int};
use std::sync::Once;

use inkwell::llvm_sys::error_handling::LLVMInstallFatalErrorHandler;

const SIGABRT: c_int = 6;

thread_local! {
    /// What this thread is linking (a leaked string, one per link), if anything.
    static LINKING: Cell<Option<&'static str>> = const { Cell::new(None) };
    /// Whether the fatal-error hook already reported this thread's crash.
    static REPORTED: Cell<bool> = const { Cell::new(false) };
}

/// The previous SIGABRT disposition, handed the signal after the report.
static mut PREVIOUS_ABORT: usize = 0;

unsafe extern "C" {
    fn signal(signum: c_int, handler: usize) -> usize;
    fn raise(signum: c_int) -> c_int;
    fn write(fd: c_int, buf: *const u8, count: usize) -> isize;
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
    INSTALL.call_once(|| {
        // SAFETY: `on_fatal` and `on_abort` are `extern "C"` functions that only read
        // thread-locals initialized by a constant and write to standard error; `signal`
        // replaces the process's SIGABRT disposition, whose previous value is kept (before
        // any link can abort) and restored when the signal is handed on.
        unsafe {
            LLVMInstallFatalErrorHandler(Some(on_fatal));
            PREVIOUS_ABORT = signal(SIGABRT, on_abort as extern "C" fn(c_int) as usize);
        }
    });
    let what: &'static str = Box::leak(what.into_boxed_str());
    Linking {
        previous: LINKING.with(|l| l.replace(Some(what))),
    }
}

/// Writes `parts` to standard error with `write(2)`: async-signal-safe, no allocation.
fn say(parts: &[&[u8]]) {
    for part in parts {
        // SAFETY: `part` is a live byte slice; a failed write has nothing to fall back on.
        unsafe { write(2, part.as_ptr(), part.len()) };
    }
}

extern "C" fn on_fatal(reason: *const c_char) {
    let Some(what) = LINKING.with(Cell::get) else {
        return;
    };
    // SAFETY: LLVM passes its reason as a NUL-terminated string, or null.
    let reason = (!reason.is_null()).then(|| unsafe { CStr::from_ptr(reason) }.to_bytes());
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

extern "C" fn on_abort(signum: c_int) {
    if let Some(what) = LINKING.with(Cell::get)
        && !REPORTED.with(Cell::get)
    {
        say(&[
            b"error: LLVM crashed (SIGABRT) in the device link of ",
            what.as_bytes(),
            b"\n  (LLVM's own message, if it printed one, is above)\n",
        ]);
    }
    // SAFETY: restores the disposition found at installation and raises the signal again,
    // so the process ends (or the previous handler runs) as it would have without this one.
    unsafe {
        signal(signum, PREVIOUS_ABORT);
        raise(signum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// In a child process (this test binary run again): a link marked as linking, then an
    /// abort as LLVM's fatal errors end in. The parent checks what the child printed and that
    /// it still died of SIGABRT.
    #[test]
    fn an_abort_during_a_link_names_the_link() {
        const CHILD: &str = "OFFLOAD_TEST_CRASH_CHILD";
        if let Some(mode) = crate::env::Env::detect().get_untracked(CHILD) {
            let _guard = linking("`my_kernels` for gfx1100".into());
            if mode == "fatal" {
                on_fatal(c"Unsupported instruction".as_ptr());
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
