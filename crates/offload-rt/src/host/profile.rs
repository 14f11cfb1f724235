//! The runtime's own timing of what runs on the CPU device: each kernel launch and each copy,
//! with its stream, start, duration and the bytes it moves, and the floating-point operations
//! a program declares for its kernels ([`count_flops`]). `cargo offload profile` reads the
//! record; with no vendor profiler it is how a program's kernels are timed.
//!
//! Recording is on when the environment names a file in `OFFLOAD_PROFILE` ([`ENV`]) at the
//! first launch or copy; it is then written there when the process exits, one JSON object a
//! line ([`FORMAT`]). Off, a launch pays one load of an initialized `OnceLock`; on, two clock
//! reads and a push under a lock. The first 65536 launches and copies are kept one by one,
//! the rest summed per kernel, so the record stays bounded and nothing is written before the
//! exit.
//!
//! Only the CPU device is timed: its launches and copies run to completion in the call (or on
//! a stream's thread, where they are timed there). A GPU's launches are queued on its driver
//! and are timed by its vendor's profiler, which `cargo offload profile` runs beside this
//! record: a GPU's launches are recorded untimed (`null`), for their buffers' bytes.
//!
//! The lines of the record, after the header
//! `{"format":"offload-profile","version":1,"pid":…,"device":"…"}`:
//! - `{"kind":"launch","kernel":…,"module":…,"stream":…,"start_ns":…,"duration_ns":…,
//!   "grid":[x,y,z],"block":[x,y,z],"bytes":…}`: `bytes` is the size of the buffers passed for
//!   the kernel's slice parameters (`&[T]`, `DisjointSlice<T>`); `stream` is 0 for the
//!   device's own work, else the stream's number in order of creation.
//! - `{"kind":"copy","direction":"to_device"|"to_host","stream":…,"start_ns":…,
//!   "duration_ns":…,"bytes":…}`
//! - `{"kind":"flops","kernel":…,"flops":…}`: what [`count_flops`] declared for the kernel,
//!   summed.
//! - `{"kind":"launches","kernel":…,"module":…,"launches":…,"duration_ns":…,"bytes":…}` and
//!   `{"kind":"copies","direction":…,"copies":…,"duration_ns":…,"bytes":…}`: the launches
//!   and copies past the first 65536, summed.
//! - `{"kind":"image","module":…,"triple":…,"arch":…,"size":…}`: an image a device loaded,
//!   by which the CPU device's image a sampling profiler saw can be found in the program.
//! - `{"kind":"peaks","device":…,"bytes_per_second":…,"flops_per_second":…,"source":…}`: the
//!   peak figures of the first GPU that loaded a module, where its driver's attributes tell
//!   them (CUDA), for the roofline.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Instant;

use crate::launch::LaunchConfig;

/// The environment variable naming the file the record is written to.
pub const ENV: &str = "OFFLOAD_PROFILE";

/// The `format` of the record's header line.
pub const FORMAT: &str = "offload-profile";

/// The version of the record's lines this runtime writes.
pub const VERSION: u32 = 1;

/// Launches and copies kept one by one, for the timeline; later ones are summed per kernel
/// (and per copy direction), so that a long run's record stays bounded and a launch never
/// waits for a write.
const DETAILED: usize = 1 << 16;

/// Whether `OFFLOAD_PROFILE` asked this process for a record.
pub fn enabled() -> bool {
    recorder().is_some()
}

/// Declares that a launch of `kernel` (its name: a handle's `NAME`, or the `kernel` of the
/// [`LaunchReport`](crate::LaunchReport) its launch returned) did `flops` floating-point
/// operations, so that `cargo offload profile` shows the kernel's achieved FLOP/s and places
/// it on the roofline. Called once per launch, or once with the sum of several; nothing
/// when the program is not profiled.
pub fn count_flops(kernel: &str, flops: u64) {
    if let Some(recorder) = recorder() {
        let mut counts = recorder
            .flops
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match counts.get_mut(kernel) {
            Some(count) => *count = count.saturating_add(flops),
            None => {
                counts.insert(kernel.to_owned(), flops);
            }
        }
    }
}

/// A copy's direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    ToDevice,
    ToHost,
}

/// The streams' numbers: 0 is the device's own work.
static NEXT_STREAM: AtomicU64 = AtomicU64::new(1);

/// A number for a new stream, as the record names it.
pub(crate) fn next_stream() -> u64 {
    NEXT_STREAM.fetch_add(1, Ordering::Relaxed)
}

pub(crate) struct Recorder {
    path: PathBuf,
    epoch: Instant,
    /// What the run did, written at the exit.
    events: Mutex<Events>,
    device: OnceLock<String>,
    /// The `peaks` line of the first GPU that loaded a module and knows its figures.
    peaks: OnceLock<String>,
    /// What [`count_flops`] declared, per kernel, written with the rest at the exit.
    flops: Mutex<std::collections::HashMap<String, u64>>,
}

/// The launches and copies of a run: the first [`DETAILED`] one by one, the rest summed.
#[derive(Default)]
struct Events {
    detailed: Vec<Event>,
    /// Per kernel and module: launches, their time and their buffers' bytes.
    launches: std::collections::HashMap<(&'static str, &'static str), [u64; 3]>,
    /// Per direction (to the device first): copies, their time and their bytes.
    copies: [[u64; 3]; 2],
}

impl Events {
    fn push(&mut self, event: Event) {
        if self.detailed.len() < DETAILED {
            self.detailed.push(event);
            return;
        }
        let add = |sums: &mut [u64; 3], duration: u64, bytes: u64| {
            sums[0] += 1;
            sums[1] = sums[1].saturating_add(duration);
            sums[2] = sums[2].saturating_add(bytes);
        };
        match event {
            Event::Launch {
                kernel,
                module,
                bytes,
                times,
                ..
            } => add(
                self.launches.entry((kernel, module)).or_default(),
                times.map_or(0, |(_, duration)| duration),
                bytes,
            ),
            Event::Copy {
                direction,
                bytes,
                times: (_, duration),
                ..
            } => add(
                &mut self.copies[usize::from(direction == Direction::ToHost)],
                duration,
                bytes as u64,
            ),
            line @ Event::Line(_) => self.detailed.push(line),
        }
    }

    /// The sums' lines: `{"kind":"launches",…}` and `{"kind":"copies",…}`.
    fn write_sums(&self, out: &mut String) {
        for ((kernel, module), [count, duration, bytes]) in &self.launches {
            out.push_str("{\"kind\":\"launches\",\"kernel\":");
            json_string(out, kernel);
            out.push_str(",\"module\":");
            json_string(out, module);
            let _ = writeln!(
                out,
                ",\"launches\":{count},\"duration_ns\":{duration},\"bytes\":{bytes}}}"
            );
        }
        for (direction, [count, duration, bytes]) in
            ["to_device", "to_host"].iter().zip(self.copies)
        {
            if count > 0 {
                let _ = writeln!(
                    out,
                    "{{\"kind\":\"copies\",\"direction\":\"{direction}\",\"copies\":{count},\
                     \"duration_ns\":{duration},\"bytes\":{bytes}}}"
                );
            }
        }
    }
}

/// One event, kept as it came: written out as a line only when the record is written, so
/// that a launch pays for two clock reads and a push.
enum Event {
    Launch {
        kernel: &'static str,
        module: &'static str,
        stream: u64,
        config: LaunchConfig,
        bytes: u64,
        /// Start and duration, in nanoseconds from the record's start.
        times: Option<(u64, u64)>,
    },
    Copy {
        direction: Direction,
        stream: u64,
        bytes: usize,
        times: (u64, u64),
    },
    Line(String),
}

impl Event {
    fn write(&self, out: &mut String) {
        match self {
            Event::Line(line) => out.push_str(line),
            Event::Launch {
                kernel,
                module,
                stream,
                config,
                bytes,
                times,
            } => {
                out.push_str("{\"kind\":\"launch\",\"kernel\":");
                json_string(out, kernel);
                out.push_str(",\"module\":");
                json_string(out, module);
                out.push_str(",\"stream\":");
                push_u64(out, *stream);
                match times {
                    Some((start, duration)) => {
                        out.push_str(",\"start_ns\":");
                        push_u64(out, *start);
                        out.push_str(",\"duration_ns\":");
                        push_u64(out, *duration);
                    }
                    None => out.push_str(",\"start_ns\":null,\"duration_ns\":null"),
                }
                let (g, b) = (config.grid, config.block);
                for (key, (x, y, z)) in [(",\"grid\":[", g), ("],\"block\":[", b)] {
                    out.push_str(key);
                    push_u64(out, u64::from(x));
                    out.push(',');
                    push_u64(out, u64::from(y));
                    out.push(',');
                    push_u64(out, u64::from(z));
                }
                out.push_str("],\"bytes\":");
                push_u64(out, *bytes);
                out.push('}');
            }
            Event::Copy {
                direction,
                stream,
                bytes,
                times: (start, duration),
            } => {
                let direction = match direction {
                    Direction::ToDevice => "to_device",
                    Direction::ToHost => "to_host",
                };
                let _ = write!(
                    out,
                    "{{\"kind\":\"copy\",\"direction\":\"{direction}\",\"stream\":{stream},\
                     \"start_ns\":{start},\"duration_ns\":{duration},\"bytes\":{bytes}}}"
                );
            }
        }
    }
}

static RECORDER: OnceLock<Option<Recorder>> = OnceLock::new();

#[inline]
pub(crate) fn recorder() -> Option<&'static Recorder> {
    RECORDER.get_or_init(start).as_ref()
}

fn start() -> Option<Recorder> {
    let path = std::env::var_os(ENV).filter(|p| !p.is_empty())?;
    // SAFETY: `write_at_exit` is an `extern "C" fn()` that does not unwind (it catches
    // panics) and only touches statics that live as long as the process.
    let registered = unsafe { libc::atexit(write_at_exit) } == 0;
    if !registered {
        eprintln!(
            "offload: {ENV} is set but the record could not be scheduled for the exit: \
             nothing will be written"
        );
        return None;
    }
    Some(Recorder {
        path: PathBuf::from(path),
        epoch: Instant::now(),
        events: Mutex::new(Events::default()),
        device: OnceLock::new(),
        peaks: OnceLock::new(),
        flops: Mutex::new(std::collections::HashMap::new()),
    })
}

extern "C" fn write_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(Some(recorder)) = RECORDER.get() {
            recorder.flush();
        }
    });
}

impl Recorder {
    /// Start and duration of what ran from `start` to `end`, in nanoseconds from the
    /// record's start.
    fn span(&self, start: Instant, end: Instant) -> (u64, u64) {
        let ns = |d: std::time::Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        (
            ns(start.saturating_duration_since(self.epoch)),
            ns(end.saturating_duration_since(start)),
        )
    }

    pub(crate) fn note_device(&self, description: &str) {
        self.device.get_or_init(|| description.to_owned());
    }

    /// Records the peak figures of `device` (described as the runtime describes it), the
    /// first GPU's only.
    pub(crate) fn note_peaks(&self, device: &str, peaks: &crate::backend::DevicePeaks) {
        self.peaks.get_or_init(|| {
            let mut line = String::from("{\"kind\":\"peaks\",\"device\":");
            json_string(&mut line, device);
            let _ = write!(
                line,
                ",\"bytes_per_second\":{},\"flops_per_second\":{},\"source\":",
                peaks.bytes_per_second, peaks.flops_per_second
            );
            json_string(&mut line, &peaks.source);
            line.push('}');
            line
        });
    }

    fn push(&self, event: Event) {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event);
    }

    /// Writes the record (once, at the exit).
    fn flush(&self) {
        let flops = std::mem::take(&mut *self.flops.lock().unwrap_or_else(PoisonError::into_inner));
        let events =
            std::mem::take(&mut *self.events.lock().unwrap_or_else(PoisonError::into_inner));
        let mut text = String::with_capacity(64 + events.detailed.len() * 140);
        text.push_str("{\"format\":");
        json_string(&mut text, FORMAT);
        let _ = write!(
            text,
            ",\"version\":{VERSION},\"pid\":{},\"device\":",
            std::process::id()
        );
        json_string(&mut text, self.device.get().map_or("", String::as_str));
        text.push_str("}\n");
        if let Some(peaks) = self.peaks.get() {
            text.push_str(peaks);
            text.push('\n');
        }
        for event in &events.detailed {
            event.write(&mut text);
            text.push('\n');
        }
        events.write_sums(&mut text);
        for (kernel, count) in flops {
            text.push_str("{\"kind\":\"flops\",\"kernel\":");
            json_string(&mut text, &kernel);
            let _ = writeln!(text, ",\"flops\":{count}}}");
        }
        if let Err(e) = std::fs::write(&self.path, text) {
            eprintln!(
                "offload: writing the profile to {} ({ENV}): {e}",
                self.path.display()
            );
        }
    }

    /// Records that a device loaded `image`.
    pub(crate) fn image(&self, image: &crate::registry::ImageInfo) {
        let mut line = String::from("{\"kind\":\"image\",\"module\":");
        json_string(&mut line, &image.module);
        line.push_str(",\"triple\":");
        json_string(&mut line, &image.triple);
        line.push_str(",\"arch\":");
        json_string(&mut line, &image.arch);
        let _ = write!(line, ",\"size\":{}}}", image.size);
        self.push(Event::Line(line));
    }

    /// Records a launch of `kernel` that ran from `start` to `end` (`times`), or one queued on
    /// a GPU, untimed.
    pub(crate) fn launch(
        &self,
        kernel: &'static str,
        module: &'static str,
        stream: u64,
        config: &LaunchConfig,
        bytes: u64,
        times: Option<(Instant, Instant)>,
    ) {
        self.push(Event::Launch {
            kernel,
            module,
            stream,
            config: *config,
            bytes,
            times: times.map(|(start, end)| self.span(start, end)),
        });
    }

    /// Records a copy of `bytes` that ran from `start` to `end`.
    pub(crate) fn copy(
        &self,
        direction: Direction,
        stream: u64,
        bytes: usize,
        start: Instant,
        end: Instant,
    ) {
        self.push(Event::Copy {
            direction,
            stream,
            bytes,
            times: self.span(start, end),
        });
    }
}

/// Runs the copy `run`, recording it when the CPU device is profiled (`cpu`: the copy is the
/// CPU device's).
#[inline]
pub(crate) fn copy<T>(
    cpu: impl FnOnce() -> bool,
    direction: Direction,
    stream: u64,
    bytes: usize,
    run: impl FnOnce() -> crate::error::Result<T>,
) -> crate::error::Result<T> {
    match recorder() {
        Some(recorder) if cpu() => {
            let start = Instant::now();
            let out = run();
            let end = Instant::now();
            if out.is_ok() {
                recorder.copy(direction, stream, bytes, start, end);
            }
            out
        }
        _ => run(),
    }
}

/// `n` in decimal, appended to `out`: a record of many launches is mostly numbers, and this
/// writes them several times faster than `write!`.
fn push_u64(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // The bytes are ASCII digits.
    out.push_str(std::str::from_utf8(&digits[at..]).unwrap_or("0"));
}

/// `text` as a JSON string, appended to `out`.
fn json_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_in_decimal() {
        for n in [0, 7, 10, 1234567890, u64::MAX] {
            let mut out = String::new();
            push_u64(&mut out, n);
            assert_eq!(out, n.to_string());
        }
    }

    /// The first GPU's peaks, once, on the line after the header, as `cargo offload profile`
    /// reads them.
    #[test]
    fn the_first_gpus_peaks_follow_the_header() {
        let dir = std::env::temp_dir().join(format!("offload-peaks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let recorder = Recorder {
            path: dir.join("record.jsonl"),
            epoch: Instant::now(),
            events: Mutex::new(Events::default()),
            device: OnceLock::new(),
            peaks: OnceLock::new(),
            flops: Mutex::new(std::collections::HashMap::new()),
        };
        recorder.note_device("cuda:0: H100");
        let peaks = |bytes_per_second, source: &str| crate::backend::DevicePeaks {
            bytes_per_second,
            flops_per_second: 66_908_160_000_000.0,
            source: source.to_owned(),
        };
        recorder.note_peaks("cuda:0: H100", &peaks(3_352_320_000_000.0, "H100 \"SXM\""));
        recorder.note_peaks("cuda:1: A100", &peaks(1.0, "A100"));
        recorder.flush();
        let text = std::fs::read_to_string(dir.join("record.jsonl")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains(r#""device":"cuda:0: H100""#), "{text}");
        assert_eq!(
            lines[1],
            r#"{"kind":"peaks","device":"cuda:0: H100","bytes_per_second":3352320000000,"flops_per_second":66908160000000,"source":"H100 \"SXM\""}"#
        );
        assert_eq!(text.matches("\"peaks\"").count(), 1, "{text}");
    }

    #[test]
    fn strings_are_escaped_as_json_wants() {
        let mut out = String::new();
        json_string(&mut out, "a\"b\\c\nd");
        assert_eq!(out, r#""a\"b\\c\u000ad""#);
    }
}
