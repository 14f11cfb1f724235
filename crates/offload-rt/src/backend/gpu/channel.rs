//! The host end of a GPU's [`DeviceChannel`]: mapped host memory through which the device
//! reports a panic and sends its prints (see `kernel::gpu_channel`). One per opened device;
//! every module loaded on it gets its address in its `__offload_channel` global.

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use offload_format::panic_sites::{self, PanicSites};

use super::driver::Driver;
use super::{GpuDevice, GpuError, GpuImageKind, GpuModule, PinnedBytes};
use crate::error::KernelPanicReport;
use crate::kernel::abi::{
    CHANNEL_SYMBOL, DeviceChannel, PANIC_EMPTY, PANIC_FILE_CAPACITY, PANIC_MESSAGE_CAPACITY,
    PANIC_WRITTEN, PanicKind, PanicRecord, unpack_block, unpack_thread,
};

/// The largest panic-site table read from a module (a table is a few bytes a site).
const MAX_SITE_TABLE: usize = 64 << 20;

/// Whether a module loaded from `image` can have the global `symbol`. PTX, cubins and code
/// objects name their globals in plain bytes (the text, an ELF string table); a fatbinary
/// may hold them compressed, so it always can. The driver is asked only for globals a module
/// can have: asking for one it lacks is an API error, which NVIDIA's compute-sanitizer
/// reports as one in the program.
fn may_define(image: &[u8], kind: GpuImageKind, symbol: &str) -> bool {
    kind == GpuImageKind::Fatbin
        || image
            .windows(symbol.len())
            .any(|window| window == symbol.as_bytes())
}

/// A text field of a panic record, which the device cut by bytes: a character cut at either
/// end is left out.
fn utf8_field(bytes: &[u8]) -> String {
    let start = bytes
        .iter()
        .position(|b| b & 0xc0 != 0x80)
        .unwrap_or(bytes.len());
    let bytes = &bytes[start..];
    let end = match std::str::from_utf8(bytes) {
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        _ => bytes.len(),
    };
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// The message of a GPU panic record: its text, or core's wording around the raw values the
/// device recorded instead of formatting them (see [`PanicKind`]).
fn panic_message(kind: u32, text: String, [a, b, c]: [u64; 3]) -> String {
    const NOT_RECORDED: &str = "not recorded on GPUs";
    match PanicKind::from_u32(kind) {
        Some(PanicKind::Message) => text,
        Some(PanicKind::IndexOutOfBounds) => {
            format!("index out of bounds: the len is {b} but the index is {a}")
        }
        // The order of core's `slice_index_fail`.
        Some(PanicKind::SliceRange) => {
            let (start, end, len) = (a, b, c);
            if start > len {
                format!("range start index {start} out of range for slice of length {len}")
            } else if end <= len && start > end {
                format!("slice index starts at {start} but ends at {end}")
            } else {
                format!("range end index {end} out of range for slice of length {len}")
            }
        }
        Some(PanicKind::StrRange) => format!(
            "failed to slice string: byte range {a}..{b} of a string of {c} bytes is out of \
             bounds or not at character boundaries"
        ),
        Some(PanicKind::ResultErr) => format!("{text}: (the error's Debug form is {NOT_RECORDED})"),
        Some(PanicKind::AssertOperands) => {
            let op = match a {
                0 => "==",
                1 => "!=",
                _ => "matches",
            };
            let message = if text.is_empty() {
                String::new()
            } else {
                format!(": {text}")
            };
            format!("assertion `left {op} right` failed{message} (the operands are {NOT_RECORDED})")
        }
        Some(PanicKind::Formatted) => format!(
            "a panic message that formats values ({NOT_RECORDED}: panic with a literal \
             message, or print the values with `device_println!` first)"
        ),
        None => format!("{text} (a panic record of unknown kind {kind})"),
    }
}

/// The report `record` holds, if a kernel panicked, leaving the record empty for the next.
///
/// # Safety
/// `record` is valid for reads and writes, and nothing else accesses it meanwhile.
unsafe fn take_report(
    record: *mut PanicRecord,
    tables: &HashMap<u32, PanicSites>,
) -> Option<KernelPanicReport> {
    // SAFETY: the caller's contract.
    let state = unsafe { &(*record).state };
    let report = match state.load(Ordering::Acquire) {
        PANIC_EMPTY => return None,
        // SAFETY: the caller's contract; the reference ends with the call.
        PANIC_WRITTEN => written_report(unsafe { &*record }, tables),
        // PANIC_WRITING (or anything else a broken image wrote): a report cut short.
        _ => KernelPanicReport {
            message: "a kernel thread panicked; the launch ended before its report was \
                      complete"
                .to_owned(),
            file: String::new(),
            line: 0,
            column: 0,
            block: [0; 3],
            thread: [0; 3],
        },
    };
    // SAFETY: the caller's contract. A site writes only the values it passes, so the others
    // must read zero for the next report.
    unsafe { (&raw mut (*record).values).write([0; 3]) };
    state.store(PANIC_EMPTY, Ordering::Release);
    Some(report)
}

/// The report of a complete panic record: its own text and location, or those of the site it
/// names in one of `tables` (the loaded modules' panic-site tables, by ID).
fn written_report(record: &PanicRecord, tables: &HashMap<u32, PanicSites>) -> KernelPanicReport {
    let text = |bytes: &[u8], len: u32, cap: usize| utf8_field(&bytes[..(len as usize).min(cap)]);
    let (kind, message, file, line, column) = match panic_sites::split_site_value(record.site) {
        None => (
            record.kind,
            text(&record.message, record.message_len, PANIC_MESSAGE_CAPACITY),
            text(&record.file, record.file_len, PANIC_FILE_CAPACITY),
            record.line,
            record.column,
        ),
        Some((id, index)) => match tables.get(&id).and_then(|t| t.get(index)) {
            Some(site) => (
                site.kind,
                site.message.clone(),
                site.file.clone(),
                site.line,
                site.column,
            ),
            None => (
                PanicKind::Message as u32,
                format!(
                    "a kernel panicked at site {index} of panic-site table {id:#010x}, which no \
                     loaded module has"
                ),
                String::new(),
                0,
                0,
            ),
        },
    };
    KernelPanicReport {
        message: panic_message(kind, message, record.values),
        file,
        line,
        column,
        block: unpack_block(record.block),
        thread: unpack_thread(record.thread),
    }
}

/// Bytes of print ring a device gets unless `OFFLOAD_PRINT_BUFFER_SIZE` says otherwise: CUDA's
/// default `printf` FIFO size.
pub(super) const DEFAULT_PRINT_BUFFER: usize = 1 << 20;

/// The ring size `OFFLOAD_PRINT_BUFFER_SIZE` asks for (bytes, rounded up to 8, at least 4 KiB,
/// at most 1 GiB), else [`DEFAULT_PRINT_BUFFER`].
fn print_buffer_size() -> usize {
    std::env::var("OFFLOAD_PRINT_BUFFER_SIZE")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .map_or(DEFAULT_PRINT_BUFFER, |n| {
            n.clamp(4096, 1 << 30).next_multiple_of(8)
        })
}

/// A device's channel, mapped when its first module loads (a program that only copies never
/// pays for one); shared by the device's backend and streams.
pub(super) struct ChannelSlot<D: Driver>(Arc<OnceLock<Option<Channel<D>>>>);

impl<D: Driver> Clone for ChannelSlot<D> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<D: Driver> std::fmt::Debug for ChannelSlot<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ChannelSlot").field(&self.get()).finish()
    }
}

impl<D: Driver> ChannelSlot<D> {
    /// A slot with no channel yet.
    pub(super) fn new() -> Self {
        Self(Arc::new(OnceLock::new()))
    }

    /// The channel, once a module has loaded and the driver could map one.
    pub(super) fn get(&self) -> Option<&Channel<D>> {
        self.0.get().and_then(Option::as_ref)
    }

    /// The channel, mapped into `device` on first use; `None` (logged once, for
    /// `description`) when the driver cannot map host memory: panics then fault without a
    /// report, prints are dropped.
    pub(super) fn get_or_open(
        &self,
        device: &GpuDevice<D>,
        description: &str,
    ) -> Option<&Channel<D>> {
        self.0
            .get_or_init(|| match Channel::open(device) {
                Ok(channel) => Some(channel),
                Err(e) => {
                    super::log(format_args!(
                        "{description}: no device prints or panic reports: {e}"
                    ));
                    None
                }
            })
            .as_ref()
    }
}

/// A device's channel.
pub(super) struct Channel<D: Driver> {
    memory: PinnedBytes<D>,
    device_address: u64,
    capacity: usize,
    /// Bytes of the ring already printed; held while printing, so lines come out once.
    printed: Mutex<usize>,
    /// The panic-site tables of the modules attached, by table ID (a panic records its site
    /// as the table's ID and an index; see `offload_format::panic_sites`).
    sites: Mutex<HashMap<u32, PanicSites>>,
}

// SAFETY: the memory is only accessed through atomics and reads of bytes the device has
// published (a record's first word, written last); `printed` is behind a mutex.
unsafe impl<D: Driver> Sync for Channel<D> {}

impl<D: Driver> std::fmt::Debug for Channel<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl<D: Driver> Channel<D> {
    /// Maps a channel into `device`.
    ///
    /// # Errors
    /// The driver cannot map host memory.
    pub(super) fn open(device: &GpuDevice<D>) -> Result<Self, GpuError> {
        let capacity = print_buffer_size();
        let memory = device.alloc_mapped(size_of::<DeviceChannel>() + capacity)?;
        let device_address = memory
            .device_ptr()
            .expect("alloc_mapped returns mapped memory");
        let channel = Channel {
            memory,
            device_address,
            capacity,
            printed: Mutex::new(0),
            sites: Mutex::new(HashMap::new()),
        };
        // SAFETY: no module has the channel's address yet.
        unsafe { (&raw mut (*channel.raw()).print.capacity).write(capacity as u32) };
        Ok(channel)
    }

    fn raw(&self) -> *mut DeviceChannel {
        self.memory.as_ptr().cast()
    }

    fn header(&self) -> &DeviceChannel {
        // SAFETY: the allocation starts with a `DeviceChannel` (zeroed, then initialized in
        // `open`), aligned by the driver; the fields the device writes are atomics or are
        // read only after a record or report says they are complete.
        unsafe { &*self.raw() }
    }

    /// Points `module`'s channel global at this channel and reads its panic-site table;
    /// `false` when the module, loaded from `image` of `kind`, has no channel global (an
    /// image with neither a panic nor a print) or one of another size (another runtime's).
    ///
    /// # Errors
    /// A driver failure.
    pub(super) fn attach(
        &self,
        device: &GpuDevice<D>,
        module: &GpuModule<D>,
        image: &[u8],
        kind: GpuImageKind,
    ) -> Result<bool, GpuError> {
        if !may_define(image, kind, CHANNEL_SYMBOL) {
            return Ok(false);
        }
        let name = CString::new(CHANNEL_SYMBOL).expect("no NUL in the symbol");
        let attached = match module.global(&name)? {
            None => false,
            Some((address, 8)) => {
                // SAFETY: the module's own 8-byte global; no kernel of it has been launched.
                unsafe { device.write_device(address, &self.device_address.to_le_bytes())? };
                true
            }
            Some(_) => false,
        };
        if attached && may_define(image, kind, panic_sites::SYMBOL) {
            self.read_sites(device, module)?;
        }
        Ok(attached)
    }

    /// Keeps `module`'s panic-site table, if it has one. A table that cannot be read is
    /// logged: the panics at its sites are then reported without their message and place.
    fn read_sites(&self, device: &GpuDevice<D>, module: &GpuModule<D>) -> Result<(), GpuError> {
        let name = CString::new(panic_sites::SYMBOL).expect("no NUL in the symbol");
        let Some((address, size)) = module.global(&name)? else {
            return Ok(());
        };
        if size > MAX_SITE_TABLE {
            super::log(format_args!(
                "the module's panic-site table of {size} bytes is over the {MAX_SITE_TABLE} read"
            ));
            return Ok(());
        }
        // SAFETY: the module's own constant global, which no kernel writes.
        let bytes = unsafe { device.read_device(address, size)? };
        match PanicSites::parse(&bytes) {
            Ok((id, sites)) => {
                self.sites
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(id, sites);
            }
            Err(e) => super::log(format_args!("the module's panic sites are unreadable: {e}")),
        }
        Ok(())
    }

    /// The report of a panic since the last call, if a kernel panicked.
    pub(super) fn take_panic(&self) -> Option<KernelPanicReport> {
        let _mapped = self.memory.mapped()?;
        let tables = self.sites.lock().unwrap_or_else(PoisonError::into_inner);
        // SAFETY: the channel's record, which only a launch of this device writes; this is
        // called after a launch's fault, when none runs.
        unsafe { take_report(&raw mut (*self.raw()).panic, &tables) }
    }

    /// Prints the complete records not printed yet. With `idle` (nothing runs on the device),
    /// the ring is emptied for the next prints.
    pub(super) fn flush(&self, idle: bool) {
        let Some(_mapped) = self.memory.mapped() else {
            return;
        };
        let mut printed = self.printed.lock().unwrap_or_else(PoisonError::into_inner);
        let ring = &self.header().print;
        let head = usize::try_from(ring.head.load(Ordering::Acquire)).unwrap_or(usize::MAX);
        let used = head.min(self.capacity);
        let mut text = String::new();
        if used > *printed {
            // SAFETY: the ring's bytes follow the header inside the allocation; `used` is at
            // most its capacity. Records before `used` are reserved; `render_records` reads a
            // record only once its first word (copied first) says it is complete.
            let bytes = unsafe {
                std::slice::from_raw_parts(
                    self.memory
                        .as_ptr()
                        .add(size_of::<DeviceChannel>() + *printed),
                    used - *printed,
                )
            }
            .to_vec();
            let (lines, read) = crate::print::render_records(&bytes);
            text = lines;
            *printed += read;
        }
        crate::print::emit(&text);
        if idle {
            let dropped = ring.dropped.swap(0, Ordering::Relaxed);
            if dropped > 0 {
                eprintln!(
                    "offload-rt: {dropped} device prints were dropped: the print buffer of {} \
                     bytes was full (OFFLOAD_PRINT_BUFFER_SIZE sets its size)",
                    self.capacity
                );
            }
            // SAFETY: nothing runs on the device; the bytes lie inside the ring.
            unsafe {
                std::ptr::write_bytes(
                    self.memory.as_ptr().add(size_of::<DeviceChannel>()),
                    0,
                    used,
                );
            }
            ring.head.store(0, Ordering::Release);
            *printed = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_globals_an_image_names_are_asked_for() {
        let ptx = format!(".visible .global .align 8 .u64 {CHANNEL_SYMBOL};");
        assert!(may_define(
            ptx.as_bytes(),
            GpuImageKind::Ptx,
            CHANNEL_SYMBOL
        ));
        assert!(!may_define(
            ptx.as_bytes(),
            GpuImageKind::Ptx,
            panic_sites::SYMBOL
        ));
        assert!(!may_define(
            b"\x7fELF",
            GpuImageKind::CodeObject,
            CHANNEL_SYMBOL
        ));
        assert!(!may_define(b"", GpuImageKind::Cubin, CHANNEL_SYMBOL));
        // A fatbinary's cubins may be compressed: only the driver can tell.
        assert!(may_define(b"", GpuImageKind::Fatbin, CHANNEL_SYMBOL));
    }

    #[test]
    fn text_fields_cut_by_bytes_lose_only_the_cut_characters() {
        let path = "src/données.rs".as_bytes();
        assert_eq!(utf8_field(path), "src/données.rs");
        // "é" is two bytes: a field that starts inside it, or ends inside it, leaves it out.
        let e = path.iter().position(|&b| b == 0xc3).unwrap();
        assert_eq!(utf8_field(&path[e + 1..]), "es.rs");
        assert_eq!(utf8_field(&path[..e + 1]), "src/donn");
        assert_eq!(utf8_field(b"ok \xff ok"), "ok \u{fffd} ok");
    }

    /// A zeroed record, written as a device would.
    fn record() -> Box<PanicRecord> {
        // SAFETY: every field of the record is an integer, an atomic or a byte array, for
        // which zero is valid.
        unsafe { Box::new(std::mem::zeroed()) }
    }

    #[test]
    fn records_naming_a_site_are_worded_from_its_table() {
        let mut table = PanicSites::default();
        table.intern(panic_sites::PanicSite {
            kind: 0,
            message: "attempt to divide by zero".into(),
            file: "src/lib.rs".into(),
            line: 40,
            column: 5,
        });
        let bounds = table.intern(panic_sites::PanicSite {
            kind: PanicKind::IndexOutOfBounds as u32,
            message: String::new(),
            file: "src/lib.rs".into(),
            line: 12,
            column: 9,
        });
        let tables = HashMap::from([(table.id(), table.clone())]);
        let mut r = record();
        r.site = panic_sites::site_value(table.id(), bounds);
        r.values = [7, 5, 0];
        // NVIDIA's packed block (y and z in one word); the thread packed as every GPU's is.
        r.block = crate::kernel::abi::pack_block([9, 2, 1], true);
        r.thread = crate::kernel::abi::pack_thread([2, 1, 1]);
        let report = written_report(&r, &tables);
        assert_eq!(
            report.message,
            "index out of bounds: the len is 5 but the index is 7"
        );
        assert_eq!(
            (report.file.as_str(), report.line, report.column),
            ("src/lib.rs", 12, 9)
        );
        assert_eq!((report.block, report.thread), ([9, 2, 1], [2, 1, 1]));
        // A table no loaded module has: the report says so rather than guess.
        r.site = panic_sites::site_value(table.id() ^ 1, bounds);
        let report = written_report(&r, &tables);
        assert!(
            report.message.contains("which no loaded module has"),
            "{report:?}"
        );
    }

    #[test]
    fn a_taken_report_leaves_the_record_empty_with_zero_values() {
        let mut r = record();
        let tables = HashMap::new();
        // SAFETY: the record is this test's own.
        assert!(unsafe { take_report(&raw mut *r, &tables) }.is_none());
        r.kind = PanicKind::IndexOutOfBounds as u32;
        r.values = [7, 5, 9];
        r.state.store(PANIC_WRITTEN, Ordering::Relaxed);
        // SAFETY: as above.
        let report = unsafe { take_report(&raw mut *r, &tables) }.unwrap();
        assert_eq!(
            report.message,
            "index out of bounds: the len is 5 but the index is 7"
        );
        assert_eq!(r.state.load(Ordering::Relaxed), PANIC_EMPTY);
        // The next site that passes fewer values finds zeros in the others.
        assert_eq!(r.values, [0; 3]);
        // A report cut short is taken, and cleared, too.
        r.values = [1, 2, 3];
        r.state
            .store(crate::kernel::abi::PANIC_WRITING, Ordering::Relaxed);
        // SAFETY: as above.
        let report = unsafe { take_report(&raw mut *r, &tables) }.unwrap();
        assert!(report.message.contains("before its report was complete"));
        assert_eq!(
            (r.state.load(Ordering::Relaxed), r.values),
            (PANIC_EMPTY, [0; 3])
        );
    }

    #[test]
    fn thread_indices_unpack_to_what_was_packed() {
        use crate::kernel::abi::{pack_thread, unpack_thread};
        // Up to the largest indices of a GPU's blocks (1,024 threads in any dimension).
        for t in [
            [0, 0, 0],
            [1023, 0, 0],
            [0, 1023, 0],
            [0, 0, 1023],
            [5, 6, 7],
        ] {
            assert_eq!(unpack_thread(pack_thread(t)), t);
        }
    }

    #[test]
    fn records_without_a_site_carry_their_own_text() {
        let mut r = record();
        r.kind = PanicKind::Message as u32;
        r.message[..4].copy_from_slice(b"oops");
        r.message_len = 4;
        r.file[..6].copy_from_slice(b"src.rs");
        r.file_len = 6;
        (r.line, r.column) = (3, 4);
        // AMD's block, as it is.
        r.block = [1, 2, 3];
        r.thread = crate::kernel::abi::pack_thread([2, 1, 0]);
        let report = written_report(&r, &HashMap::new());
        assert_eq!(
            (report.message.as_str(), report.file.as_str(), report.line),
            ("oops", "src.rs", 3)
        );
        assert_eq!((report.block, report.thread), ([1, 2, 3], [2, 1, 0]));
    }

    #[test]
    fn panic_records_are_worded_as_core_words_them() {
        let message =
            |kind: PanicKind, text: &str, values| panic_message(kind as u32, text.into(), values);
        assert_eq!(
            message(PanicKind::Message, "attempt to divide by zero", [0; 3]),
            "attempt to divide by zero"
        );
        assert_eq!(
            message(PanicKind::IndexOutOfBounds, "", [7, 5, 0]),
            "index out of bounds: the len is 5 but the index is 7"
        );
        assert_eq!(
            message(PanicKind::SliceRange, "", [6, 8, 5]),
            "range start index 6 out of range for slice of length 5"
        );
        assert_eq!(
            message(PanicKind::SliceRange, "", [2, 8, 5]),
            "range end index 8 out of range for slice of length 5"
        );
        assert_eq!(
            message(PanicKind::SliceRange, "", [4, 2, 5]),
            "slice index starts at 4 but ends at 2"
        );
        assert_eq!(
            message(
                PanicKind::ResultErr,
                "called `Result::unwrap()` on an `Err` value",
                [0; 3]
            ),
            "called `Result::unwrap()` on an `Err` value: (the error's Debug form is not recorded on GPUs)"
        );
        assert_eq!(
            message(PanicKind::AssertOperands, "sizes differ", [1, 0, 0]),
            "assertion `left != right` failed: sizes differ (the operands are not recorded on GPUs)"
        );
        assert_eq!(
            message(PanicKind::AssertOperands, "", [0, 0, 0]),
            "assertion `left == right` failed (the operands are not recorded on GPUs)"
        );
        assert!(message(PanicKind::Formatted, "", [0; 3]).contains("formats values"));
        assert!(message(PanicKind::StrRange, "", [1, 9, 4]).contains("1..9"));
        assert_eq!(
            panic_message(99, "text".into(), [0; 3]),
            "text (a panic record of unknown kind 99)"
        );
    }
}
