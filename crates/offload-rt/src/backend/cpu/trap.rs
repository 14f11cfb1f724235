//! Stack overflows in kernel code on the CPU device.
//!
//! Kernel code runs only on coroutine stacks (a GPU thread's own, or a worker's guard stack),
//! each mapped with a guard page below it. While a CPU device exists, a handler of `SIGSEGV`
//! and `SIGBUS` is installed for the process; it runs on an alternate signal stack (the
//! thread's own, or one this module sets for a thread running kernel code) and recognises a
//! fault in the guard page of the stack that the faulting thread runs kernel code on. It then
//! makes that coroutine return (corosensei's trap handler: the interrupted registers are
//! pointed at a function on the reset stack), marks the thread as overflowed, and the
//! runtime, back on its own stack, fails the launch with `Error::KernelStackOverflow` as it
//! does for a panic. Every other fault goes to the handler that was installed before.
//!
//! The runtime's own callbacks (device prints, panic reports) lock and allocate; an overflow
//! inside them would leave a lock taken. They first check [`low_on_stack`], and leave the
//! kernel as an overflow when less than [`CALLBACK_ROOM`] bytes are left.
//!
//! After the last CPU device is dropped the previous handlers are put back, unless another
//! handler was installed over this one meanwhile (it may pass faults on to this one, which then
//! stays). On targets other than x86_64 and aarch64 Linux, and under Miri, nothing is
//! installed and an overflow ends the process.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use corosensei::stack::{DefaultStack, Stack};
use corosensei::trap::CoroutineTrapHandler;
use corosensei::{Coroutine, CoroutineResult};

/// Bytes of stack the runtime's callbacks need below the kernel frame that calls them.
pub(super) const CALLBACK_ROOM: usize = 32 * 1024;

/// Bytes of an alternate signal stack this module maps (a guard page below it).
const SIGNAL_STACK: usize = 64 * 1024;

/// Where a kernel stack is: its guard page and its usable size.
#[derive(Debug, Clone, Copy)]
pub(super) struct StackInfo {
    /// Lowest address of the guard page.
    guard: usize,
    /// Lowest address above it: the end of the usable stack.
    floor: usize,
    /// Bytes above the guard page.
    pub(super) bytes: usize,
}

impl StackInfo {
    pub(super) fn of(stack: &DefaultStack) -> StackInfo {
        let (base, limit) = (stack.base().get(), stack.limit().get());
        // `DefaultStack` maps one guard page below the stack.
        let floor = limit + page_size();
        StackInfo {
            guard: limit,
            floor,
            bytes: base - floor,
        }
    }
}

/// The kernel stack the calling thread runs on, while the runtime resumes its coroutine.
#[derive(Clone, Copy)]
struct Armed {
    handler: CoroutineTrapHandler<()>,
    stack: StackInfo,
}

thread_local! {
    /// Set while a coroutine running kernel code is resumed on this thread. No destructor
    /// (see `LENT_STACKS` in cpu.rs); read by the signal handler, which only reads it.
    static ARMED: Cell<Option<Armed>> = const { Cell::new(None) };
    /// The coroutine last resumed on this thread overflowed its stack.
    static OVERFLOWED: Cell<bool> = const { Cell::new(false) };
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page).unwrap_or(4096)
}

/// Resumes `co`, which runs on the stack `stack` describes, with a stack overflow in it turned
/// into its return. Returns the result and whether the coroutine overflowed (then it is done)
/// or left the kernel for want of stack (see [`low_on_stack`]; then it is suspended, as after
/// a panic).
pub(super) fn resume<Y>(
    co: &mut Coroutine<(), Y, (), DefaultStack>,
    stack: StackInfo,
) -> (CoroutineResult<Y, ()>, bool) {
    let armed = Armed {
        handler: co.trap_handler(),
        stack,
    };
    let previous = ARMED.with(|a| a.replace(Some(armed)));
    let result = co.resume(());
    ARMED.with(|a| a.set(previous));
    (result, OVERFLOWED.with(|o| o.replace(false)))
}

/// Whether the calling kernel code has less than [`CALLBACK_ROOM`] bytes of stack left.
pub(super) fn low_on_stack() -> bool {
    let Some(armed) = ARMED.with(Cell::get) else {
        return false;
    };
    let here = 0u8;
    let sp = (&raw const here).addr();
    sp < armed.stack.floor.saturating_add(CALLBACK_ROOM)
}

/// Marks the coroutine running on this thread as overflowed; it then leaves the kernel as for
/// a panic.
pub(super) fn mark_overflow() {
    OVERFLOWED.with(|o| o.set(true));
}

/// The handlers that were installed before this module's, which it passes other faults to.
struct Previous([std::cell::UnsafeCell<std::mem::MaybeUninit<libc::sigaction>>; 2]);

// SAFETY: written only under `USERS`'s lock while this module's handler is not installed for
// the signal (so no handler reads it), read by the handler once installed.
unsafe impl Sync for Previous {}

static PREVIOUS: Previous = Previous([
    std::cell::UnsafeCell::new(std::mem::MaybeUninit::zeroed()),
    std::cell::UnsafeCell::new(std::mem::MaybeUninit::zeroed()),
]);

const SIGNALS: [c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];

/// Devices that need the handler: installed at the first, restored after the last.
static USERS: Mutex<usize> = Mutex::new(0);

/// Per signal: the handler could not be taken out after the last device (another was
/// installed over it and may pass faults on to it), so it is still reached and stays.
static LEFT_IN_CHAIN: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];

/// The handler, installed while one of these lives (one per CPU device).
#[derive(Debug)]
pub(super) struct Handler(());

impl Handler {
    /// Installs the handler unless it is already installed.
    pub(super) fn acquire() -> Handler {
        let mut users = USERS.lock().unwrap_or_else(|p| p.into_inner());
        if *users == 0 && SUPPORTED {
            for (i, &signal) in SIGNALS.iter().enumerate() {
                if LEFT_IN_CHAIN[i].load(Ordering::Relaxed) {
                    continue;
                }
                // SAFETY: the slot is written under the lock while the handler is not
                // installed for `signal` (the user count is 0, and it was taken out after
                // the last device), so nothing reads it; the sigaction calls read and write
                // whole `sigaction` structures.
                unsafe {
                    let previous = (*PREVIOUS.0[i].get()).as_mut_ptr();
                    if libc::sigaction(signal, std::ptr::null(), previous) != 0 {
                        continue;
                    }
                    let mut action: libc::sigaction = std::mem::zeroed();
                    action.sa_sigaction = on_fault as *const () as usize;
                    action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                    libc::sigemptyset(&raw mut action.sa_mask);
                    libc::sigaction(signal, &raw const action, std::ptr::null_mut());
                }
            }
        }
        *users += 1;
        Handler(())
    }
}

impl Drop for Handler {
    /// After the last device, puts the previous handlers back where this module's is still
    /// the installed one (a library with a CPU device may be unloaded after it).
    fn drop(&mut self) {
        let mut users = USERS.lock().unwrap_or_else(|p| p.into_inner());
        *users -= 1;
        if *users > 0 || !SUPPORTED {
            return;
        }
        for (i, &signal) in SIGNALS.iter().enumerate() {
            if LEFT_IN_CHAIN[i].load(Ordering::Relaxed) {
                continue;
            }
            // SAFETY: as in `acquire`; the previous action was read there.
            let restored = unsafe {
                let mut current: libc::sigaction = std::mem::zeroed();
                libc::sigaction(signal, std::ptr::null(), &raw mut current) == 0
                    && current.sa_sigaction == on_fault as *const () as usize
                    && libc::sigaction(
                        signal,
                        (*PREVIOUS.0[i].get()).as_ptr(),
                        std::ptr::null_mut(),
                    ) == 0
            };
            LEFT_IN_CHAIN[i].store(!restored, Ordering::Relaxed);
        }
    }
}

/// Whether this module can redirect a faulting coroutine on this target (it reads and writes
/// the interrupted registers); elsewhere an overflow ends the process, as without it. Miri
/// runs no kernel code.
const SUPPORTED: bool = cfg!(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64"),
    not(miri)
));

/// The handler of `SIGSEGV` and `SIGBUS`.
///
/// # Safety
///
/// Called by the kernel as an `SA_SIGINFO` handler: `info` and `context` describe the fault.
unsafe extern "C" fn on_fault(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    if let Some(armed) = ARMED.with(Cell::get) {
        // SAFETY: the kernel passes a valid siginfo for a fault, whose address is set.
        let address = unsafe { (*info).si_addr() }.addr();
        let uc = context.cast::<libc::ucontext_t>();
        // SAFETY: `uc` is the interrupted context the kernel passed.
        let sp = unsafe { stack_pointer(uc) };
        let in_guard = (armed.stack.guard..armed.stack.floor).contains(&address);
        if in_guard && armed.handler.stack_ptr_in_bounds(sp) {
            // SAFETY: the interrupted stack pointer is inside the coroutine ARMED names, which
            // is being resumed by `resume` on this thread and so is alive. The coroutine runs
            // kernel code (an image built with `-Cpanic=abort`: nothing to unwind; its frames
            // are abandoned, as on a GPU) and the runtime's callbacks, which check
            // `low_on_stack` before taking locks or allocating, so the frames dropped hold no
            // lock; the parent sees the coroutine's memory effects only after `resume`
            // returns. The registers are set below as the returned value says.
            let regs = unsafe { armed.handler.setup_trap_handler(mark_overflow) };
            // SAFETY: as above.
            unsafe { set_registers(uc, regs) };
            return;
        }
    }
    // SAFETY: the previous handler gets what this one got.
    unsafe { chain(signal, info, context) }
}

/// Passes a fault that is not a kernel stack overflow to the handler installed before.
///
/// # Safety
///
/// As [`on_fault`].
unsafe fn chain(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    let Some(i) = SIGNALS.iter().position(|&s| s == signal) else {
        return;
    };
    // SAFETY: written before this handler was installed (see `Previous`).
    let previous = unsafe { (*PREVIOUS.0[i].get()).assume_init_ref() };
    let handler = previous.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // The default action: the fault repeats once this returns and ends the process, as it
        // would have without this handler.
        // SAFETY: `signal` is a valid signal number; resetting its action is
        // async-signal-safe.
        unsafe { libc::signal(signal, libc::SIG_DFL) };
    } else if previous.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler is an `SA_SIGINFO` handler with this type.
        let handler = unsafe {
            std::mem::transmute::<
                usize,
                unsafe extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void),
            >(handler)
        };
        // SAFETY: it gets what the kernel passed for the fault.
        unsafe { handler(signal, info, context) };
    } else {
        // SAFETY: the previous handler is a plain one.
        let handler = unsafe { std::mem::transmute::<usize, extern "C" fn(c_int)>(handler) };
        handler(signal);
    }
}

/// The interrupted stack pointer.
///
/// # Safety
///
/// `uc` is the context of a signal handler.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
unsafe fn stack_pointer(uc: *const libc::ucontext_t) -> usize {
    // SAFETY: this function's contract.
    unsafe { (*uc).uc_mcontext.gregs[libc::REG_RSP as usize] as usize }
}

/// Points the interrupted registers where `regs` says.
///
/// # Safety
///
/// `uc` is the context of a signal handler, `regs` from `setup_trap_handler` for the
/// coroutine it interrupted.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
unsafe fn set_registers(uc: *mut libc::ucontext_t, regs: corosensei::trap::TrapHandlerRegs) {
    let corosensei::trap::TrapHandlerRegs {
        rip,
        rsp,
        rbp,
        rdi,
        rsi,
    } = regs;
    // SAFETY: this function's contract.
    let gregs = unsafe { &mut (*uc).uc_mcontext.gregs };
    gregs[libc::REG_RIP as usize] = rip as i64;
    gregs[libc::REG_RSP as usize] = rsp as i64;
    gregs[libc::REG_RBP as usize] = rbp as i64;
    gregs[libc::REG_RDI as usize] = rdi as i64;
    gregs[libc::REG_RSI as usize] = rsi as i64;
}

/// The interrupted stack pointer.
///
/// # Safety
///
/// `uc` is the context of a signal handler.
#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
unsafe fn stack_pointer(uc: *const libc::ucontext_t) -> usize {
    // SAFETY: this function's contract.
    unsafe { (*uc).uc_mcontext.sp as usize }
}

/// Points the interrupted registers where `regs` says.
///
/// # Safety
///
/// `uc` is the context of a signal handler, `regs` from `setup_trap_handler` for the
/// coroutine it interrupted.
#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
unsafe fn set_registers(uc: *mut libc::ucontext_t, regs: corosensei::trap::TrapHandlerRegs) {
    let corosensei::trap::TrapHandlerRegs {
        pc,
        sp,
        x0,
        x1,
        x29,
        lr,
    } = regs;
    // SAFETY: this function's contract.
    let mc = unsafe { &mut (*uc).uc_mcontext };
    mc.pc = pc;
    mc.sp = sp;
    mc.regs[0] = x0;
    mc.regs[1] = x1;
    mc.regs[29] = x29;
    mc.regs[30] = lr;
}

/// Elsewhere the handler is never installed.
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
unsafe fn stack_pointer(_: *const libc::ucontext_t) -> usize {
    0
}

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
unsafe fn set_registers(_: *mut libc::ucontext_t, _: corosensei::trap::TrapHandlerRegs) {}

/// An alternate signal stack: the handler cannot run on the stack that overflowed.
#[derive(Debug)]
pub(super) struct SignalStack {
    /// The mapping, a guard page first.
    map: *mut c_void,
    len: usize,
    /// Set as the alternate signal stack of the thread that owns this cache (a worker's)
    /// until dropped.
    installed: bool,
}

// SAFETY: the mapping is plain memory owned by this value.
unsafe impl Send for SignalStack {}

impl SignalStack {
    fn new() -> Option<SignalStack> {
        let page = page_size();
        let len = SIGNAL_STACK + page;
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches
        // no existing memory.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return None;
        }
        // SAFETY: the first page of the mapping just made; a failure leaves it writable.
        unsafe { libc::mprotect(map, page, libc::PROT_NONE) };
        Some(SignalStack {
            map,
            len,
            installed: false,
        })
    }

    fn stack_t(&self) -> libc::stack_t {
        let page = page_size();
        libc::stack_t {
            // SAFETY: inside the mapping.
            ss_sp: unsafe { self.map.cast::<u8>().add(page) }.cast(),
            ss_flags: 0,
            ss_size: self.len - page,
        }
    }
}

impl Drop for SignalStack {
    fn drop(&mut self) {
        if self.installed {
            disable_if(self.stack_t().ss_sp);
        }
        // SAFETY: the mapping made by `new`, unmapped once, no longer any thread's signal
        // stack (a launching thread's was removed after its launch, a worker's just above).
        unsafe { libc::munmap(self.map, self.len) };
    }
}

/// Whether the calling thread has an alternate signal stack.
fn has_signal_stack() -> bool {
    // SAFETY: only reads the thread's setting into `current`.
    unsafe {
        let mut current: libc::stack_t = std::mem::zeroed();
        libc::sigaltstack(std::ptr::null(), &raw mut current) == 0
            && current.ss_flags & libc::SS_DISABLE == 0
    }
}

/// Removes the calling thread's alternate signal stack if it starts at `start`.
fn disable_if(start: *mut c_void) {
    // SAFETY: reads the thread's setting, then disables it when it is the one given; not
    // called from a signal handler, so not running on it.
    unsafe {
        let mut current: libc::stack_t = std::mem::zeroed();
        if libc::sigaltstack(std::ptr::null(), &raw mut current) == 0
            && current.ss_flags & libc::SS_DISABLE == 0
            && current.ss_sp == start
        {
            let off = libc::stack_t {
                ss_sp: std::ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            libc::sigaltstack(&raw const off, std::ptr::null_mut());
        }
    }
}

/// Sets the signal stack in `slot` (mapped on first use) as the calling thread's alternate
/// signal stack unless it has one; its start when set. The caller removes it again before the
/// mapping goes ([`SignalStackLent`]), or owns the thread ([`keep_signal_stack`]).
fn install(slot: &mut Option<SignalStack>) -> Option<*mut c_void> {
    if !SUPPORTED || has_signal_stack() {
        return None;
    }
    if slot.is_none() {
        *slot = SignalStack::new();
    }
    let ss = slot.as_ref()?.stack_t();
    // SAFETY: the mapping lives in `slot` until it is removed again (by `SignalStackLent` or
    // the `SignalStack`'s drop).
    (unsafe { libc::sigaltstack(&raw const ss, std::ptr::null_mut()) } == 0).then_some(ss.ss_sp)
}

/// For a worker thread: sets its alternate signal stack once, kept until the thread exits
/// (the cache holding it is the worker's).
pub(super) fn keep_signal_stack(slot: &mut Option<SignalStack>) {
    if slot.as_ref().is_some_and(|s| s.installed) {
        return;
    }
    if install(slot).is_some()
        && let Some(stack) = slot
    {
        stack.installed = true;
    }
}

/// For a launching thread: the device's alternate signal stack for one launch, when the
/// thread has none; removed on drop. The caller keeps the mapping until then.
pub(super) struct SignalStackLent(Option<*mut c_void>);

impl SignalStackLent {
    pub(super) fn lend(slot: &mut Option<SignalStack>) -> SignalStackLent {
        SignalStackLent(install(slot))
    }
}

impl Drop for SignalStackLent {
    fn drop(&mut self) {
        if let Some(start) = self.0 {
            disable_if(start);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn installed(signal: c_int) -> usize {
        // SAFETY: only reads the signal's action.
        unsafe {
            let mut current: libc::sigaction = std::mem::zeroed();
            assert_eq!(
                libc::sigaction(signal, std::ptr::null(), &raw mut current),
                0
            );
            current.sa_sigaction
        }
    }

    #[test]
    fn the_handler_is_installed_while_a_device_needs_it_then_put_back() {
        if !SUPPORTED {
            return;
        }
        let ours = on_fault as *const () as usize;
        let (a, b) = (Handler::acquire(), Handler::acquire());
        for signal in SIGNALS {
            assert_eq!(installed(signal), ours);
        }
        drop(a);
        assert_eq!(installed(libc::SIGSEGV), ours);
        drop(b);
        // Other tests may hold a device: checked only once none does.
        let users = USERS.lock().unwrap();
        if *users == 0 {
            for (i, signal) in SIGNALS.into_iter().enumerate() {
                // SAFETY: written by `acquire` under the lock held here.
                let previous = unsafe { (*PREVIOUS.0[i].get()).assume_init_ref() }.sa_sigaction;
                assert_eq!(installed(signal), previous);
                assert_ne!(previous, ours);
            }
        }
    }
}
