//! Threads the runtime starts for itself: the CPU device's workers and a stream's queue.
//!
//! They are started with `pthread_create`, not `std::thread::spawn`. std's spawn registers a
//! thread-local destructor on the *spawning* thread (its spawn hooks), and glibc keeps a
//! shared object mapped while a thread-local destructor of it is pending: a `cdylib` with
//! kernels, closed by its host with `dlclose`, would stay mapped until the thread that first
//! launched through it exits. These threads register nothing on the thread that starts them.

use std::ffi::c_void;
use std::io;
use std::panic::AssertUnwindSafe;

type Body = Box<dyn FnOnce() + Send + 'static>;

/// A started thread; joined with [`JoinHandle::join`], detached when dropped unjoined.
pub(crate) struct JoinHandle {
    thread: libc::pthread_t,
    joined: bool,
}

/// Starts a thread named `name` (at most 15 bytes are kept) running `body`.
pub(crate) fn spawn(name: &str, body: impl FnOnce() + Send + 'static) -> io::Result<JoinHandle> {
    extern "C" fn start(arg: *mut c_void) -> *mut c_void {
        // SAFETY: `arg` is the `Box<Body>` that `spawn` leaked for this thread alone.
        let body = unsafe { Box::from_raw(arg.cast::<Body>()) };
        // Unwinding out of a C thread start routine is undefined behaviour, and a thread of
        // the runtime that stops half-way would leave whoever waits on it waiting forever.
        if std::panic::catch_unwind(AssertUnwindSafe(body)).is_err() {
            std::process::abort();
        }
        std::ptr::null_mut()
    }
    let arg = Box::into_raw(Box::new(Box::new(body) as Body));
    let mut thread = std::mem::MaybeUninit::<libc::pthread_t>::uninit();
    // SAFETY: `thread` is written by a successful call; `start` takes ownership of `arg`,
    // which lives until it does.
    let rc =
        unsafe { libc::pthread_create(thread.as_mut_ptr(), std::ptr::null(), start, arg.cast()) };
    if rc != 0 {
        // SAFETY: the thread was not started, so `arg` is still ours alone.
        drop(unsafe { Box::from_raw(arg) });
        return Err(io::Error::from_raw_os_error(rc));
    }
    // SAFETY: `pthread_create` succeeded and wrote the thread's id.
    let thread = unsafe { thread.assume_init() };
    set_name(thread, name);
    Ok(JoinHandle {
        thread,
        joined: false,
    })
}

#[cfg(target_os = "linux")]
fn set_name(thread: libc::pthread_t, name: &str) {
    // Linux keeps 15 bytes and the terminating NUL; a longer name is refused whole.
    let mut end = name.len().min(15);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    if let Ok(name) = std::ffi::CString::new(&name[..end]) {
        // SAFETY: `thread` is a live thread this module started; `name` is NUL-terminated.
        // A name is only an aid to debuggers: failing to set it changes nothing.
        unsafe { libc::pthread_setname_np(thread, name.as_ptr()) };
    }
}

#[cfg(not(target_os = "linux"))]
fn set_name(_: libc::pthread_t, _: &str) {}

impl JoinHandle {
    /// Waits for the thread to return.
    pub(crate) fn join(mut self) {
        self.joined = true;
        // SAFETY: the thread was started by `spawn` and is neither joined nor detached (this
        // consumes the only handle, and `Drop` detaches only unjoined threads).
        unsafe { libc::pthread_join(self.thread, std::ptr::null_mut()) };
    }
}

impl Drop for JoinHandle {
    fn drop(&mut self) {
        if !self.joined {
            // SAFETY: as in `join`: the thread is neither joined nor detached.
            unsafe { libc::pthread_detach(self.thread) };
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[test]
    fn a_thread_runs_its_body_before_join_returns() {
        let ran = Arc::new(AtomicU32::new(0));
        let seen = Arc::clone(&ran);
        spawn("offload-test-thread-with-a-long-name", move || {
            seen.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap()
        .join();
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        // The body and what it captured are dropped on the thread.
        assert_eq!(Arc::strong_count(&ran), 1);
    }

    #[test]
    fn a_dropped_handle_leaves_its_thread_running_to_the_end() {
        let (tx, rx) = std::sync::mpsc::channel();
        drop(spawn("offload-detached", move || tx.send(7).unwrap()).unwrap());
        assert_eq!(rx.recv().unwrap(), 7);
    }
}
