//! How a GPU image reports to the host: through the [`DeviceChannel`] whose device address the
//! runtime writes into [`__offload_channel`] when it loads the module. The channel is host
//! memory mapped into the device, so the host can read a panic's report after the trap has
//! ended the launch and, on CUDA, the context.

use core::panic::Location;
use core::sync::atomic::{AtomicU32, Ordering};
#[cfg(not(target_arch = "amdgpu"))]
use core::sync::atomic::{AtomicU64, fence};

use super::abi::{
    DeviceChannel, PANIC_EMPTY, PANIC_FILE_CAPACITY, PANIC_MESSAGE_CAPACITY, PANIC_WRITTEN,
    PRINT_RECORD_READY, PanicKind, PanicRecord, PrintArg, pack_block, print_record_size,
};
use super::panic_claim::{leave, one_store_at_a_time, packed_thread_index, try_claim};

/// The channel, set by the runtime before any launch (null until then, or when the runtime
/// could not map one). External and never written by the image, so the device link keeps it
/// (see `offload-build`'s `HOST_GLOBALS`).
#[unsafe(export_name = offload_format::abi_name!(CHANNEL))]
#[allow(non_upper_case_globals)]
static mut __offload_channel: *mut DeviceChannel = core::ptr::null_mut();

/// The channel's address. A plain load, neither volatile nor atomic: the global is external,
/// so nothing folds its value; LLVM infers the address space of non-volatile accesses only
/// (AMDGPU then loads it with a global, not a flat, instruction), and the device link marks
/// plain loads of it invariant (scalar loads on AMDGPU).
#[inline(always)]
fn channel() -> *mut DeviceChannel {
    // SAFETY: the global is pointer-sized and aligned, and only the host writes it, between
    // launches: no device access races with a write.
    unsafe { (&raw const __offload_channel).read() }
}

pub(super) fn print(template: &str, args: &[PrintArg]) {
    let channel = channel();
    if channel.is_null() {
        return;
    }
    let size = print_record_size(template.len(), args.len());
    // SAFETY: the runtime points the global at a live channel for as long as the module is
    // loaded; `head` and `dropped` are only accessed atomically, `capacity` only read.
    let ring = unsafe { &(*channel).print };
    let capacity = u64::from(ring.capacity);
    let offset = ring.head.fetch_add(size as u64, Ordering::Relaxed);
    if offset + size as u64 > capacity || size > u32::MAX as usize >> 1 {
        ring.dropped.fetch_add(1, Ordering::Relaxed);
        return;
    }
    // SAFETY: `offset..offset + size` lies inside the ring's `capacity` bytes after the channel,
    // reserved by this thread alone through `head`; records start at multiples of 8.
    unsafe {
        let record = channel
            .cast::<u8>()
            .add(core::mem::size_of::<DeviceChannel>() + offset as usize);
        record.add(4).cast::<u32>().write(template.len() as u32);
        record.add(8).cast::<u32>().write(args.len() as u32);
        record.add(12).cast::<u32>().write(0);
        let text = record.add(16);
        core::ptr::copy_nonoverlapping(template.as_ptr(), text, template.len());
        let padded = template.len().next_multiple_of(8);
        core::ptr::write_bytes(text.add(template.len()), 0, padded - template.len());
        core::ptr::copy_nonoverlapping(args.as_ptr(), text.add(padded).cast(), args.len());
        (*record.cast::<AtomicU32>()).store(size as u32 | PRINT_RECORD_READY, Ordering::Release);
    }
}

/// A panicking GPU thread, through the panic handler: a message that is a literal is recorded
/// as it is, one that formats values is recorded as [`PanicKind::Formatted`] and nothing is
/// formatted on the device (core's formatting machinery would be part of every kernel that
/// can panic). Core's own panics with values reach [`__offload_gpu_panic`] directly.
#[inline(always)]
pub(super) fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    let (kind, message) = match info.message().as_str() {
        Some(text) => (PanicKind::Message, text),
        None => (PanicKind::Formatted, ""),
    };
    report(kind, message, [0; 3], info.location())
}

/// The one report of a GPU panic: the first panicking thread writes the record and traps;
/// the others trap too, or end alone while the report is being written ([`leave`]).
/// `offload-build`'s device link replaces the bodies of core's panic functions with a call of
/// this function (`panic_bounds_check` with [`PanicKind::IndexOutOfBounds`] and the index and
/// length, `expect_failed` with its message, …), so no kernel carries
/// `core::fmt`; the host formats `values` ([`PanicKind`]). Where the optimized kernel calls it
/// with a constant kind, message and location, the device link describes the site in the
/// module's panic-site table and calls [`__offload_gpu_panic_at`] instead, which copies no
/// string. Out of line on NVIDIA; the AMD device link inlines it at each site, where a call
/// would cost more registers and scratch than the copy, and there a whole wavefront reports
/// for its first panicking lane ([`wave`]).
///
/// # Safety
/// `message` points at `message_len` bytes of UTF-8 (the first
/// [`PANIC_MESSAGE_CAPACITY`] are recorded); `location` is null or points at a live
/// `Location`.
#[unsafe(export_name = offload_format::abi_name!(GPU_PANIC))]
#[inline(never)]
#[cold]
pub unsafe extern "C" fn __offload_gpu_panic(
    kind: u32,
    message: *const u8,
    message_len: usize,
    a: u64,
    b: u64,
    c: u64,
    location: *const Location<'static>,
) -> ! {
    let channel = channel();
    // SAFETY: as in `print`; the record's fields but `state` are this thread's once claimed.
    unsafe {
        if !channel.is_null() {
            let record = &raw mut (*channel).panic;
            #[cfg(target_arch = "amdgpu")]
            {
                let [kind, message_len] = wave::first_lane_u32([kind, message_len as u32]);
                let [message, location] = wave::first_lane([message as u64, location as u64]);
                let [a, b, c] = wave::first_lane([a, b, c]);
                wave::claim(record);
                write_words((&raw mut (*record).values).cast(), [a, b, c]);
                write_text(
                    record,
                    kind,
                    message as *const u8,
                    message_len as usize,
                    location as *const Location<'static>,
                );
                wave::finish(record)
            }
            #[cfg(not(target_arch = "amdgpu"))]
            {
                claim_or_leave(record);
                // The values first: they are then dead during the copies.
                write_words((&raw mut (*record).values).cast(), [a, b, c]);
                write_text(record, kind, message, message_len, location);
                __offload_gpu_panic_finish()
            }
        }
    }
    super::arch::trap()
}

/// A panic at site `site` of the module's panic-site table (see `offload_format::panic_sites`),
/// with the panic's raw values: what the device link makes of a call of
/// [`__offload_gpu_panic`] whose kind, message and location are constants. Only the site and
/// the values are written here; the thread's place is written by
/// [`__offload_gpu_panic_finish`] (on AMD GPUs, by [`wave::finish`]). Out of line on
/// NVIDIA; inlined on AMD GPUs, as the reporter is. [`__offload_gpu_panic_at0`] to
/// [`__offload_gpu_panic_at2`] take the values that are not constant zeros at the site: each
/// parameter is a register pair of the call.
///
/// # Safety
/// `site` is a site value of a table the device link put in this module.
#[unsafe(export_name = offload_format::abi_name!(GPU_PANIC_AT))]
#[inline(never)]
#[cold]
pub unsafe extern "C" fn __offload_gpu_panic_at(site: u64, a: u64, b: u64, c: u64) -> ! {
    // SAFETY: this function's contract.
    unsafe { panic_at(site, [a, b, c]) }
}

/// [`__offload_gpu_panic_at`] with the three values zero: none is written (see [`panic_at`]).
///
/// # Safety
/// As for [`__offload_gpu_panic_at`].
#[unsafe(export_name = offload_format::abi_name!(GPU_PANIC_AT0))]
#[inline(never)]
#[cold]
pub unsafe extern "C" fn __offload_gpu_panic_at0(site: u64) -> ! {
    // SAFETY: this function's contract.
    unsafe { panic_at(site, []) }
}

/// [`__offload_gpu_panic_at`] with the last two values zero, which are not written.
///
/// # Safety
/// As for [`__offload_gpu_panic_at`].
#[unsafe(export_name = offload_format::abi_name!(GPU_PANIC_AT1))]
#[inline(never)]
#[cold]
pub unsafe extern "C" fn __offload_gpu_panic_at1(site: u64, a: u64) -> ! {
    // SAFETY: this function's contract.
    unsafe { panic_at(site, [a]) }
}

/// [`__offload_gpu_panic_at`] with the last value zero, which is not written.
///
/// # Safety
/// As for [`__offload_gpu_panic_at`].
#[unsafe(export_name = offload_format::abi_name!(GPU_PANIC_AT2))]
#[inline(never)]
#[cold]
pub unsafe extern "C" fn __offload_gpu_panic_at2(site: u64, a: u64, b: u64) -> ! {
    // SAFETY: this function's contract.
    unsafe { panic_at(site, [a, b]) }
}

/// [`__offload_gpu_panic_at`] on AMD GPUs for the thread whose index in its block `thread`
/// packs ([`pack_thread`]), where every lane of the wavefront came: the device link branches
/// to a panic site when any lane fails the site's test (a scalar branch on the test's ballot),
/// and passes the site's values and [`__offload_gpu_thread_index`] as the first failing lane
/// holds them (`readlane`), so that they and the report are scalar and the kernel pays no
/// vector registers for them.
/// The site passes its first `values` values; the others are zero and not written (see
/// [`panic_at`]). The device link gives `values` as a constant, so the tests fold away.
///
/// [`pack_thread`]: super::abi::pack_thread
///
/// # Safety
/// As for [`__offload_gpu_panic_at`]; every argument is the same in every lane.
#[cfg(target_arch = "amdgpu")]
#[unsafe(export_name = offload_format::abi_name!(GPU_PANIC_AT_THREAD))]
#[inline(never)]
#[cold]
pub unsafe extern "C" fn __offload_gpu_panic_at_thread(
    thread: u32,
    site: u64,
    a: u64,
    b: u64,
    c: u64,
    values: u32,
) -> ! {
    let channel = channel();
    // SAFETY: as in `panic_at`.
    unsafe {
        if !channel.is_null() {
            let record = &raw mut (*channel).panic;
            wave::claim(record);
            write_words(&raw mut (*record).site, [site]);
            let to = (&raw mut (*record).values).cast::<u64>();
            for (i, value) in [a, b, c].into_iter().enumerate() {
                if i < values as usize {
                    write_words(to.add(i), [value]);
                }
            }
            wave::finish_for(record, thread)
        }
    }
    super::arch::trap()
}

/// The calling thread's index in its block packed in one word ([`pack_thread`]), for
/// [`__offload_gpu_panic_at_thread`]: the device link computes it where a kernel starts, so
/// that one vector register holds it rather than the three indices living until the panic
/// sites. Packed, unlike a rank, it needs no block extents in the report.
///
/// [`pack_thread`]: super::abi::pack_thread
#[cfg(target_arch = "amdgpu")]
#[unsafe(export_name = offload_format::abi_name!(GPU_THREAD_INDEX))]
#[inline(never)]
pub extern "C" fn __offload_gpu_thread_index() -> u32 {
    packed_thread_index()
}

/// The body of the site reporters. Its claim, wait and finish are [`__offload_gpu_panic`]'s,
/// written out again: shared through a closure, they kept the values in a stack frame on every
/// GPU (64 bytes on sm_80, 80 on gfx90a, and more registers, in the parity benchmark).
/// Writes the site and its first `N` values; the record's other values are zero already (the
/// host zeroes them when it takes a report), so a site stores no constant zeros.
///
/// # Safety
/// As for [`__offload_gpu_panic_at`].
#[inline(always)]
unsafe fn panic_at<const N: usize>(site: u64, values: [u64; N]) -> ! {
    let channel = channel();
    // SAFETY: as in `print`; the record's fields but `state` are this thread's once claimed.
    unsafe {
        if !channel.is_null() {
            let record = &raw mut (*channel).panic;
            let to = (&raw mut (*record).values).cast::<u64>();
            #[cfg(target_arch = "amdgpu")]
            {
                let [site] = wave::first_lane([site]);
                let values = wave::first_lane(values);
                wave::claim(record);
                write_words(&raw mut (*record).site, [site]);
                write_words(to, values);
                wave::finish(record)
            }
            #[cfg(not(target_arch = "amdgpu"))]
            {
                claim_or_leave(record);
                write_words(&raw mut (*record).site, [site]);
                write_words(to, values);
                __offload_gpu_panic_finish()
            }
        }
    }
    super::arch::trap()
}

/// Writes `words` from `first` on, one word at a time: a wide store of several would need as
/// many consecutive registers at once (AMDGPU merges adjacent stores into one of up to 16
/// bytes), in a panic path whose registers the kernel pays for. On AMD GPUs each word is two
/// 4-byte stores (low half first, as the little-endian record holds it): the data of a store
/// is in vector registers, one for a half, two consecutive ones for a word.
///
/// # Safety
/// `first` and the words after it are fields of the record this thread claimed, 8-aligned.
#[inline(always)]
unsafe fn write_words<const N: usize>(first: *mut u64, words: [u64; N]) {
    for (i, word) in words.into_iter().enumerate() {
        // SAFETY: the caller's contract; nothing else accesses the words meanwhile, and an
        // atomic store is not merged with its neighbours.
        #[cfg(target_arch = "amdgpu")]
        unsafe {
            let halves = first.add(i).cast::<u32>();
            AtomicU32::from_ptr(halves).store(word as u32, Ordering::Relaxed);
            one_store_at_a_time();
            AtomicU32::from_ptr(halves.add(1)).store((word >> 32) as u32, Ordering::Relaxed);
        }
        // SAFETY: as above.
        #[cfg(not(target_arch = "amdgpu"))]
        unsafe {
            AtomicU64::from_ptr(first.add(i)).store(word, Ordering::Relaxed)
        };
        one_store_at_a_time();
    }
}

/// A panic reported by a whole AMD wavefront for its first active lane. Its lanes run in
/// lockstep, and a trap or `s_endpgm` ends all of them: a lane that lost the claim to a lane of
/// its own wavefront could neither wait for that report (it would hold the writer back) nor
/// end (it would end the writer). So every lane reports the first lane's panic, each value
/// read from that lane (`readfirstlane`): the path is uniform, its values live in scalar
/// registers and its branches are scalar, and the kernel pays no vector registers for it.
#[cfg(target_arch = "amdgpu")]
mod wave {
    use core::arch::amdgpu::{readfirstlane_u32, readfirstlane_u64};
    use core::sync::atomic::{AtomicU32, Ordering, fence};

    use super::super::arch;
    use super::super::thread::{block_idx_x, block_idx_y, block_idx_z};
    use super::pack_block;
    use super::{PANIC_EMPTY, PANIC_WRITTEN, PanicRecord, one_store_at_a_time};

    /// `words` as the first active lane holds them.
    #[inline(always)]
    pub(super) fn first_lane<const N: usize>(words: [u64; N]) -> [u64; N] {
        words.map(readfirstlane_u64)
    }

    /// [`first_lane`] of 32-bit words.
    #[inline(always)]
    pub(super) fn first_lane_u32<const N: usize>(words: [u32; N]) -> [u32; N] {
        words.map(readfirstlane_u32)
    }

    /// Claims the record for the wavefront: its first lane tries, every lane learns the
    /// outcome. A wavefront that lost leaves the panic to the winner ([`super::leave`]).
    ///
    /// # Safety
    /// As for [`super::try_claim`].
    #[inline(always)]
    pub(super) unsafe fn claim(record: *mut PanicRecord) {
        let lane = arch::lane_id();
        let before = if lane == readfirstlane_u32(lane) {
            // SAFETY: the caller's contract.
            unsafe { super::try_claim(record) }
        } else {
            PANIC_EMPTY
        };
        let before = readfirstlane_u32(before);
        if before != PANIC_EMPTY {
            super::leave(before)
        }
    }

    /// [`super::__offload_gpu_panic_finish`] for the first lane's thread, each field its own
    /// 4-byte store: merged, the stores would need as many consecutive vector registers.
    ///
    /// # Safety
    /// The wavefront claimed `record` ([`claim`]).
    #[inline(always)]
    pub(super) unsafe fn finish(record: *mut PanicRecord) -> ! {
        // The lanes that began the report are active again after the claim: the first one
        // is the lane whose values were recorded.
        let thread = readfirstlane_u32(super::packed_thread_index());
        // SAFETY: the caller's contract.
        unsafe { finish_for(record, thread) }
    }

    /// [`finish`] for the thread whose index `thread` packs, the same in every lane.
    ///
    /// # Safety
    /// As for [`finish`].
    #[inline(always)]
    pub(super) unsafe fn finish_for(record: *mut PanicRecord, thread: u32) -> ! {
        let block = pack_block([block_idx_x(), block_idx_y(), block_idx_z()], false);
        // SAFETY: the caller's contract: the record's fields are this wavefront's; an atomic
        // store is not merged with its neighbours.
        unsafe {
            let store = |field: *mut u32, value: u32| {
                AtomicU32::from_ptr(field).store(value, Ordering::Relaxed);
                one_store_at_a_time();
            };
            store(&raw mut (*record).thread, thread);
            for (i, index) in block.into_iter().enumerate() {
                store(&raw mut (*record).block[i], index);
            }
            // As in `__offload_gpu_panic_finish`; AMDGPU's release fence waits for the
            // store to complete, which is all the trap needs (its invalidations are not).
            (*record).state.store(PANIC_WRITTEN, Ordering::Release);
            fence(Ordering::Release);
        }
        arch::trap()
    }
}

/// Claims the record for this thread ([`try_claim`]), or leaves the panic to the thread that
/// has ([`leave`]).
///
/// # Safety
/// As for [`try_claim`].
#[cfg(not(target_arch = "amdgpu"))]
#[inline(always)]
unsafe fn claim_or_leave(record: *mut PanicRecord) {
    // SAFETY: the caller's contract.
    let before = unsafe { try_claim(record) };
    if before != PANIC_EMPTY {
        leave(before)
    }
}

/// Completes the report this thread claimed: writes its block and thread, publishes the
/// record and traps. NVIDIA only; AMD GPUs use [`wave::finish`]. Out of line and without
/// parameters: ptxas would share the index reads of a copy inlined in a kernel with the
/// kernel's own and keep them live down to the report (a bounds-checked gather of the parity
/// benchmark: 18 registers on sm_80 inlined, 13 called).
///
/// # Safety
/// This thread claimed the channel's record ([`claim_or_leave`]), so the channel is not null.
#[cfg(target_arch = "nvptx64")]
#[unsafe(export_name = offload_format::abi_name!(GPU_PANIC_FINISH))]
#[inline(never)]
#[cold]
pub unsafe extern "C" fn __offload_gpu_panic_finish() -> ! {
    let channel = channel();
    // SAFETY: the caller's contract: the record is live and its fields are this thread's.
    unsafe {
        let record = &raw mut (*channel).panic;
        // Indices packed, so nothing here reads or stores the block's extents: fewer
        // registers, which count against every kernel that can panic.
        (&raw mut (*record).thread).write(packed_thread_index());
        (&raw mut (*record).block).write(pack_block(
            [
                super::block_idx_x(),
                super::block_idx_y(),
                super::block_idx_z(),
            ],
            true,
        ));
        // System scope: the host reads the record, perhaps after the trap below. The release
        // store orders the writes above before it; the fence completes it before the trap.
        (*record).state.store(PANIC_WRITTEN, Ordering::Release);
        fence(Ordering::SeqCst);
    }
    super::arch::trap()
}

// What the device link makes core's panic functions call instead of formatting: each has the
// Rust signature of the function it stands for (`#[track_caller]`'s location last), so the
// link forwards the parameters as they are. The table of which stands for which is
// `offload-build`'s `device_link::llvm::panics::REDIRECTS`.

/// For `core::panicking::panic_bounds_check`.
#[unsafe(export_name = offload_format::abi_name!(GPU_PANIC_BOUNDS_CHECK))]
pub fn __offload_gpu_panic_bounds_check(index: usize, len: usize, location: &Location<'_>) -> ! {
    let values = [index as u64, len as u64, 0];
    report(PanicKind::IndexOutOfBounds, "", values, Some(location))
}

/// For `core::slice::index::slice_index_fail`.
#[unsafe(export_name = offload_format::abi_name!(GPU_SLICE_INDEX_FAIL))]
pub fn __offload_gpu_slice_index_fail(
    start: usize,
    end: usize,
    len: usize,
    location: &Location<'_>,
) -> ! {
    let values = [start as u64, end as u64, len as u64];
    report(PanicKind::SliceRange, "", values, Some(location))
}

/// For `core::str::slice_error_fail`.
#[unsafe(export_name = offload_format::abi_name!(GPU_STR_SLICE_FAIL))]
pub fn __offload_gpu_str_slice_fail(
    s: &str,
    begin: usize,
    end: usize,
    location: &Location<'_>,
) -> ! {
    let values = [begin as u64, end as u64, s.len() as u64];
    report(PanicKind::StrRange, "", values, Some(location))
}

/// For `core::option::expect_failed`.
#[unsafe(export_name = offload_format::abi_name!(GPU_EXPECT_FAILED))]
pub fn __offload_gpu_expect_failed(message: &str, location: &Location<'_>) -> ! {
    report(PanicKind::Message, message, [0; 3], Some(location))
}

/// For `core::result::unwrap_failed`: the error's `Debug` form is not recorded.
#[unsafe(export_name = offload_format::abi_name!(GPU_UNWRAP_FAILED))]
pub fn __offload_gpu_unwrap_failed(
    message: &str,
    _error: &dyn core::fmt::Debug,
    location: &Location<'_>,
) -> ! {
    report(PanicKind::ResultErr, message, [0; 3], Some(location))
}

/// For `core::panicking::assert_failed_inner` (`op`: its `AssertKind`, `==`, `!=`, `matches`):
/// the operands' `Debug` forms are not recorded, a literal message is.
#[unsafe(export_name = offload_format::abi_name!(GPU_ASSERT_FAILED))]
pub fn __offload_gpu_assert_failed(
    op: u8,
    _left: &dyn core::fmt::Debug,
    _right: &dyn core::fmt::Debug,
    message: Option<core::fmt::Arguments<'_>>,
    location: &Location<'_>,
) -> ! {
    let message = message.and_then(|m| m.as_str()).unwrap_or("");
    report(
        PanicKind::AssertOperands,
        message,
        [u64::from(op), 0, 0],
        Some(location),
    )
}

#[inline(always)]
fn report(
    kind: PanicKind,
    message: &str,
    [a, b, c]: [u64; 3],
    location: Option<&Location<'_>>,
) -> ! {
    let location = location.map_or(core::ptr::null(), |l| core::ptr::from_ref(l).cast());
    // SAFETY: `message` is a live `str`; `location` is null or a live `Location`.
    unsafe {
        __offload_gpu_panic(
            kind as u32,
            message.as_ptr(),
            message.len(),
            a,
            b,
            c,
            location,
        )
    }
}

/// # Safety
/// `record` is the channel's live panic record, and this thread owns every field but `state`
/// (which other threads read meanwhile, so no reference to the whole record is made);
/// `message` points at `message_len` bytes; `location` is null or points at a live
/// `Location`. Nothing here can panic (a panic would come back here): the host cuts the
/// fields at character boundaries. Inlined into the reporter: a call of its own would cost
/// the calling convention's registers.
#[inline(always)]
unsafe fn write_text(
    record: *mut PanicRecord,
    kind: u32,
    message: *const u8,
    message_len: usize,
    location: *const Location<'static>,
) {
    // SAFETY (every access below): fields of the live record this thread owns, and the
    // caller's message and location.
    unsafe {
        (&raw mut (*record).kind).write(kind);
        (&raw mut (*record).site).write(0);
        let len = message_len.min(PANIC_MESSAGE_CAPACITY);
        core::ptr::copy_nonoverlapping(message, (&raw mut (*record).message).cast(), len);
        (&raw mut (*record).message_len).write(len as u32);
        if let Some(location) = location.as_ref() {
            (&raw mut (*record).line).write(location.line());
            (&raw mut (*record).column).write(location.column());
            let file = location.file();
            // The end of a long path names the file.
            let skip = file.len().saturating_sub(PANIC_FILE_CAPACITY);
            let len = file.len() - skip;
            core::ptr::copy_nonoverlapping(
                file.as_ptr().add(skip),
                (&raw mut (*record).file).cast(),
                len,
            );
            (&raw mut (*record).file_len).write(len as u32);
        } else {
            (&raw mut (*record).line).write(0);
            (&raw mut (*record).column).write(0);
            (&raw mut (*record).file_len).write(0);
        }
    }
}
