//! How a GPU image reports to the host: through the [`DeviceChannel`] whose device address the
//! runtime writes into [`__offload_channel`] when it loads the module. The channel is host
//! memory mapped into the device, so the host can read a panic's report after the trap has
//! ended the launch and, on CUDA, the context.

use core::sync::atomic::{AtomicU32, Ordering, fence};

use super::abi::{
    DeviceChannel, PANIC_EMPTY, PANIC_FILE_CAPACITY, PANIC_MESSAGE_CAPACITY, PANIC_WRITING,
    PANIC_WRITTEN, PRINT_RECORD_READY, PanicRecord, PrintArg, print_record_size,
};

/// The channel, set by the runtime before any launch (null until then, or when the runtime
/// could not map one). External and never written by the image, so the device link keeps it
/// (see `offload-build`'s `HOST_GLOBALS`).
#[unsafe(no_mangle)]
static mut __offload_channel: *mut DeviceChannel = core::ptr::null_mut();

#[inline(always)]
fn channel() -> *mut DeviceChannel {
    // SAFETY: a read of a pointer-sized global, which only the host writes, between launches.
    unsafe { core::ptr::read_volatile(&raw const __offload_channel) }
}

/// Iterations a panicking thread that lost the race to report waits for the winner's report
/// to be complete before it traps (its trap would end the launch before the report is whole).
const REPORT_WAIT_SPINS: u32 = 1 << 20;

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

/// Writes into a fixed field of the record, cutting at a UTF-8 boundary.
struct FieldWriter {
    dst: *mut u8,
    capacity: usize,
    len: usize,
}

impl core::fmt::Write for FieldWriter {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let mut take = s.len().min(self.capacity - self.len);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        // SAFETY: `dst` has `capacity` writable bytes; `len + take <= capacity`.
        unsafe { core::ptr::copy_nonoverlapping(s.as_ptr(), self.dst.add(self.len), take) };
        self.len += take;
        if take < s.len() {
            return Err(core::fmt::Error);
        }
        Ok(())
    }
}

/// A panicking GPU thread: the first one writes the report, then every one traps.
pub(super) fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    let channel = channel();
    if !channel.is_null() {
        // SAFETY: as in `print`; `state` is only accessed atomically, and the other fields
        // are written only by the thread that moved `state` to `PANIC_WRITING`.
        unsafe {
            let record = &raw mut (*channel).panic;
            let state = &(*record).state;
            if state
                .compare_exchange(
                    PANIC_EMPTY,
                    PANIC_WRITING,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                write_report(record, info);
                // System scope: the host reads the record, perhaps after the trap below.
                fence(Ordering::SeqCst);
                state.store(PANIC_WRITTEN, Ordering::Release);
                fence(Ordering::SeqCst);
            } else {
                let mut spins = 0;
                while state.load(Ordering::Acquire) != PANIC_WRITTEN && spins < REPORT_WAIT_SPINS {
                    spins += 1;
                    core::hint::spin_loop();
                }
            }
        }
    }
    super::arch::trap()
}

/// # Safety
/// `record` is the channel's live panic record, and this thread owns every field but `state`
/// (which other threads read meanwhile, so no reference to the whole record is made).
unsafe fn write_report(record: *mut PanicRecord, info: &core::panic::PanicInfo<'_>) {
    // SAFETY (every write below): fields of the live record this thread owns.
    if let Some(location) = info.location() {
        let file = location.file();
        // The end of a long path names the file.
        let mut start = file.len().saturating_sub(PANIC_FILE_CAPACITY);
        while !file.is_char_boundary(start) {
            start += 1;
        }
        let file = &file[start..];
        unsafe {
            core::ptr::copy_nonoverlapping(
                file.as_ptr(),
                (&raw mut (*record).file).cast::<u8>(),
                file.len(),
            );
            (&raw mut (*record).file_len).write(file.len() as u32);
            (&raw mut (*record).line).write(location.line());
            (&raw mut (*record).column).write(location.column());
        }
    }
    let block = [
        super::block_idx_x(),
        super::block_idx_y(),
        super::block_idx_z(),
    ];
    let thread = [
        super::thread_idx_x(),
        super::thread_idx_y(),
        super::thread_idx_z(),
    ];
    let mut writer = FieldWriter {
        dst: unsafe { (&raw mut (*record).message).cast::<u8>() },
        capacity: PANIC_MESSAGE_CAPACITY,
        len: 0,
    };
    let message = info.message();
    match message.as_str() {
        Some(text) => {
            let _ = core::fmt::Write::write_str(&mut writer, text);
        }
        // A message longer than the field is cut; the error only ends the writing.
        None => {
            let _ = core::fmt::write(&mut writer, format_args!("{message}"));
        }
    }
    unsafe {
        (&raw mut (*record).block).write(block);
        (&raw mut (*record).thread).write(thread);
        (&raw mut (*record).message_len).write(writer.len as u32);
    }
}
