//! The process-wide hooks of the crash report (`crash.rs`): LLVM's fatal-error handler, the
//! SIGABRT disposition and a write to standard error that a signal handler may make. The
//! hooks are plain Rust functions; the `extern "C"` entry points that LLVM and the kernel
//! call, and the C library calls, are here. And LLVM's process-wide options.

use std::ffi::{CStr, c_char, c_int};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use inkwell::llvm_sys::error_handling::LLVMInstallFatalErrorHandler;

const SIGABRT: c_int = 6;

unsafe extern "C" {
    fn signal(signum: c_int, handler: usize) -> usize;
    fn raise(signum: c_int) -> c_int;
    fn write(fd: c_int, buf: *const u8, count: usize) -> isize;
}

/// What runs when LLVM reports a fatal error (with its reason, if it gave one) and when the
/// process gets SIGABRT. Both must be async-signal-safe: no allocation, no lock.
#[derive(Debug, Clone, Copy)]
pub struct CrashHooks {
    pub on_fatal: fn(Option<&[u8]>),
    pub on_abort: fn(),
}

static HOOKS: OnceLock<CrashHooks> = OnceLock::new();
/// The SIGABRT disposition found at installation, handed the signal after the hook.
static PREVIOUS_ABORT: AtomicUsize = AtomicUsize::new(0);

/// Installs `hooks` as LLVM's fatal-error handler and the SIGABRT handler, once per process
/// (a later call does nothing). After the abort hook, the signal goes to the disposition
/// found at installation, so the process ends (or the previous handler runs) as it would
/// have without it.
pub fn install_crash_hooks(hooks: CrashHooks) {
    if HOOKS.set(hooks).is_err() {
        return;
    }
    // SAFETY: `on_fatal` and `on_abort` are `extern "C"` functions that run the hooks (which
    // are async-signal-safe) and, for SIGABRT, restore the previous disposition and raise
    // the signal again; `signal` replaces the process's SIGABRT disposition, whose previous
    // value is kept (before any link can abort).
    unsafe {
        LLVMInstallFatalErrorHandler(Some(on_fatal));
        let previous = signal(SIGABRT, on_abort as extern "C" fn(c_int) as usize);
        PREVIOUS_ABORT.store(previous, Ordering::SeqCst);
    }
}

extern "C" fn on_fatal(reason: *const c_char) {
    // SAFETY: LLVM passes its reason as a NUL-terminated string, or null.
    let reason = (!reason.is_null()).then(|| unsafe { CStr::from_ptr(reason) }.to_bytes());
    if let Some(hooks) = HOOKS.get() {
        (hooks.on_fatal)(reason);
    }
}

extern "C" fn on_abort(signum: c_int) {
    if let Some(hooks) = HOOKS.get() {
        (hooks.on_abort)();
    }
    // SAFETY: restores the disposition found at installation and raises the signal again,
    // so the process ends (or the previous handler runs) as it would have without this one.
    unsafe {
        signal(signum, PREVIOUS_ABORT.load(Ordering::SeqCst));
        raise(signum);
    }
}

/// Writes `part` to standard error with `write(2)`: async-signal-safe, no allocation.
pub fn write_stderr(part: &[u8]) {
    // SAFETY: `part` is a live byte slice; a failed write has nothing to fall back on.
    unsafe { write(2, part.as_ptr(), part.len()) };
}

/// Sets LLVM's process-wide command-line options `options` (`-name=value`), once per process:
/// later calls do nothing (LLVM refuses an option given twice).
pub fn set_llvm_options(options: &[&str]) {
    static SET: std::sync::Once = std::sync::Once::new();
    SET.call_once(|| {
        let strings: Vec<std::ffi::CString> = std::iter::once("offload-device-link")
            .chain(options.iter().copied())
            .map(|o| std::ffi::CString::new(o).expect("an option has no NUL"))
            .collect();
        let argv: Vec<*const c_char> = strings.iter().map(|s| s.as_ptr()).collect();
        // SAFETY: `argv` holds `argv.len()` NUL-terminated strings that live across the call;
        // a null overview is allowed; LLVM copies what it keeps.
        unsafe {
            inkwell::llvm_sys::support::LLVMParseCommandLineOptions(
                argv.len() as c_int,
                argv.as_ptr(),
                std::ptr::null(),
            )
        };
    });
}
