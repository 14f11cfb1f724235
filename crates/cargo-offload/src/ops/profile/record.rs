//! What a profiled run did, whichever profiler timed it: its launches and copies on a
//! timeline, and the per-kernel summary `cargo offload profile` prints (a table, or JSON).

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

/// Which profiler timed a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Timer {
    /// offload-rt's own record (the CPU device).
    OffloadRt,
    /// Nsight Systems.
    Nsys,
    /// rocprofv3.
    Rocprofv3,
}

impl Timer {
    pub fn name(self) -> &'static str {
        match self {
            Timer::OffloadRt => "offload-rt",
            Timer::Nsys => "nsys",
            Timer::Rocprofv3 => "rocprofv3",
        }
    }
}

/// One kernel launch on the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub kernel: String,
    pub module: String,
    pub stream: u64,
    pub start_ns: u64,
    pub duration_ns: u64,
    /// The bytes of the buffers passed; `None` where the profiler cannot tell.
    pub bytes: Option<u64>,
}

/// One copy between host and device on the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Copy {
    pub to_device: bool,
    pub stream: u64,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub bytes: u64,
}

/// An image a device loaded during the run.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedImage {
    pub module: String,
    pub triple: String,
    pub arch: String,
    pub size: u64,
}

/// The device's peak figures the roofline is drawn against.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Peaks {
    /// Memory bandwidth, bytes per second.
    pub bytes_per_second: Option<f64>,
    /// Arithmetic, FLOP per second.
    pub flops_per_second: Option<f64>,
    /// Where the figures come from.
    pub source: String,
}

/// A profiled run.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub timer: Timer,
    /// The device, as the runtime describes it.
    pub device: String,
    pub launches: Vec<Launch>,
    pub copies: Vec<Copy>,
    /// Floating-point operations the program declared, per kernel (`offload_rt::profile`).
    pub flops: HashMap<String, u64>,
    /// Bytes per launch the runtime recorded, per kernel, where the timer cannot tell them
    /// (a GPU profiler's run).
    pub bytes_per_launch: HashMap<String, u64>,
    /// The images the devices loaded.
    pub images: Vec<LoadedImage>,
    /// Launches past those the timeline holds, summed per kernel by the runtime.
    pub summed: Vec<Summed>,
    /// Copies past those the timeline holds: count, time and bytes.
    pub summed_copies: [u64; 3],
    /// The GPU's peak figures, where the runtime recorded them from its driver.
    pub peaks: Option<Peaks>,
}

impl Run {
    /// A run of nothing yet, timed by `timer` on `device`.
    pub fn empty(timer: Timer, device: &str) -> Run {
        Run {
            timer,
            device: device.to_owned(),
            launches: Vec::new(),
            copies: Vec::new(),
            flops: HashMap::new(),
            bytes_per_launch: HashMap::new(),
            images: Vec::new(),
            summed: Vec::new(),
            summed_copies: [0; 3],
            peaks: None,
        }
    }
}

/// A kernel's launches past those on the timeline, summed.
#[derive(Debug, Clone, PartialEq)]
pub struct Summed {
    pub kernel: String,
    pub module: String,
    pub launches: u64,
    pub duration_ns: u64,
    pub bytes: u64,
}

/// A record that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("line {line} of the profile record is not JSON: {source}")]
    Json {
        line: usize,
        source: serde_json::Error,
    },
    #[error("the profile record is not offload-rt's (`{{\"format\":\"offload-profile\"…}}` first)")]
    NotARecord,
    #[error("the profile record has version {0}; this cargo-offload reads version 1")]
    Version(u64),
    #[error("line {line} of the profile record lacks its `{field}`")]
    Missing { line: usize, field: &'static str },
}

/// Reads offload-rt's record (`offload_rt::profile`): the runtime's own timing where its
/// launches are timed, and the bytes and FLOPs it recorded in any case.
pub fn parse_record(text: &str) -> Result<Run, RecordError> {
    let mut run = Run::empty(Timer::OffloadRt, "");
    let mut headed = false;
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let line_no = i + 1;
        let value: Value = serde_json::from_str(line).map_err(|source| RecordError::Json {
            line: line_no,
            source,
        })?;
        let str_of = |field: &'static str| {
            value[field]
                .as_str()
                .map(str::to_owned)
                .ok_or(RecordError::Missing {
                    line: line_no,
                    field,
                })
        };
        let u64_of = |field: &'static str| {
            value[field].as_u64().ok_or(RecordError::Missing {
                line: line_no,
                field,
            })
        };
        if value["format"].as_str() == Some("offload-profile") {
            match value["version"].as_u64() {
                Some(1) => {}
                other => return Err(RecordError::Version(other.unwrap_or(0))),
            }
            if !headed {
                run.device = value["device"].as_str().unwrap_or("").to_owned();
            }
            headed = true;
            continue;
        }
        if !headed {
            return Err(RecordError::NotARecord);
        }
        match value["kind"].as_str() {
            Some("launch") => {
                let kernel = str_of("kernel")?;
                let bytes = u64_of("bytes")?;
                run.bytes_per_launch.insert(kernel.clone(), bytes);
                // A GPU's launches are untimed: the vendor's profiler times them.
                if let (Some(start_ns), Some(duration_ns)) =
                    (value["start_ns"].as_u64(), value["duration_ns"].as_u64())
                {
                    run.launches.push(Launch {
                        kernel,
                        module: str_of("module")?,
                        stream: u64_of("stream")?,
                        start_ns,
                        duration_ns,
                        bytes: Some(bytes),
                    });
                }
            }
            Some("copy") => run.copies.push(Copy {
                to_device: str_of("direction")? == "to_device",
                stream: u64_of("stream")?,
                start_ns: u64_of("start_ns")?,
                duration_ns: u64_of("duration_ns")?,
                bytes: u64_of("bytes")?,
            }),
            Some("launches") => run.summed.push(Summed {
                kernel: str_of("kernel")?,
                module: str_of("module")?,
                launches: u64_of("launches")?,
                duration_ns: u64_of("duration_ns")?,
                bytes: u64_of("bytes")?,
            }),
            Some("copies") => {
                for (sum, field) in
                    run.summed_copies
                        .iter_mut()
                        .zip(["copies", "duration_ns", "bytes"])
                {
                    *sum += u64_of(field)?;
                }
            }
            Some("image") => run.images.push(LoadedImage {
                module: str_of("module")?,
                triple: str_of("triple")?,
                arch: str_of("arch")?,
                size: u64_of("size")?,
            }),
            Some("flops") => {
                *run.flops.entry(str_of("kernel")?).or_default() += u64_of("flops")?;
            }
            Some("peaks") => {
                let rate = |field: &'static str| {
                    value[field]
                        .as_f64()
                        .filter(|r| r.is_finite() && *r > 0.0)
                        .ok_or(RecordError::Missing {
                            line: line_no,
                            field,
                        })
                };
                run.peaks = Some(Peaks {
                    bytes_per_second: Some(rate("bytes_per_second")?),
                    flops_per_second: Some(rate("flops_per_second")?),
                    source: str_of("source")?,
                });
            }
            // Lines of a later runtime's: left out.
            _ => {}
        }
    }
    if !headed {
        return Err(RecordError::NotARecord);
    }
    Ok(run)
}

/// One kernel's row of the summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelSummary {
    pub kernel: String,
    pub module: String,
    pub launches: u64,
    pub total_ns: u64,
    pub mean_ns: u64,
    /// Of the time all kernels took, 0 to 1.
    pub share: f64,
    pub bytes: Option<u64>,
    /// Bytes of its buffers per second of its time.
    pub bytes_per_second: Option<f64>,
    pub flops: Option<u64>,
    pub flops_per_second: Option<f64>,
}

/// The index in `rows` of `kernel`'s row, made empty on its first sight.
fn row_of<'a>(
    rows: &mut Vec<KernelSummary>,
    index: &mut HashMap<&'a str, usize>,
    kernel: &'a str,
    module: &str,
) -> usize {
    *index.entry(kernel).or_insert_with(|| {
        rows.push(KernelSummary {
            kernel: kernel.to_owned(),
            module: module.to_owned(),
            launches: 0,
            total_ns: 0,
            mean_ns: 0,
            share: 0.0,
            bytes: Some(0),
            bytes_per_second: None,
            flops: None,
            flops_per_second: None,
        });
        rows.len() - 1
    })
}

/// The kernels of `run`, the slowest in all first.
pub fn summarize(run: &Run) -> Vec<KernelSummary> {
    let mut rows: Vec<KernelSummary> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for launch in &run.launches {
        let i = row_of(&mut rows, &mut index, &launch.kernel, &launch.module);
        let row = &mut rows[i];
        row.launches += 1;
        row.total_ns += launch.duration_ns;
        let bytes = launch
            .bytes
            .or_else(|| run.bytes_per_launch.get(&launch.kernel).copied());
        row.bytes = match (row.bytes, bytes) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
    }
    for summed in &run.summed {
        let i = row_of(&mut rows, &mut index, &summed.kernel, &summed.module);
        let row = &mut rows[i];
        row.launches += summed.launches;
        row.total_ns += summed.duration_ns;
        row.bytes = row.bytes.map(|b| b + summed.bytes);
    }
    let all: u64 = rows.iter().map(|r| r.total_ns).sum();
    for row in &mut rows {
        row.mean_ns = row.total_ns / row.launches.max(1);
        row.share = if all == 0 {
            0.0
        } else {
            row.total_ns as f64 / all as f64
        };
        let seconds = row.total_ns as f64 * 1e-9;
        let per_second = |n: u64| (seconds > 0.0).then(|| n as f64 / seconds);
        row.bytes = row.bytes.filter(|&b| b > 0);
        row.bytes_per_second = row.bytes.and_then(per_second);
        row.flops = run.flops.get(&row.kernel).copied();
        row.flops_per_second = row.flops.and_then(per_second);
    }
    rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.kernel.cmp(&b.kernel)));
    rows
}

/// The run's copies: count, time and bytes, those summed by the runtime included.
pub fn copy_totals(run: &Run) -> [u64; 3] {
    let mut totals = run.summed_copies;
    for copy in &run.copies {
        totals[0] += 1;
        totals[1] += copy.duration_ns;
        totals[2] += copy.bytes;
    }
    totals
}

/// A time in the unit that suits it.
pub fn time(ns: u64) -> String {
    let ns = ns as f64;
    if ns >= 1e9 {
        format!("{:.3} s", ns * 1e-9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns * 1e-6)
    } else if ns >= 1e3 {
        format!("{:.3} µs", ns * 1e-3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// A rate with an SI prefix: `12.3 GB/s`, `4.56 GFLOP/s`.
pub fn rate(value: f64, unit: &str) -> String {
    let (scaled, prefix) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|(scale, _)| value >= *scale)
        .map_or((value, ""), |(scale, prefix)| (value / scale, prefix));
    format!("{scaled:.3} {prefix}{unit}")
}

/// The summary as the text table `cargo offload profile` prints.
pub fn table(run: &Run, rows: &[KernelSummary]) -> String {
    let mut out = format!(
        "Kernels on {} (timed by {}):\n",
        if run.device.is_empty() {
            "the device"
        } else {
            &run.device
        },
        run.timer.name()
    );
    if rows.is_empty() {
        out.push_str("  no kernel was launched\n");
        return out;
    }
    let header = [
        "kernel",
        "launches",
        "total",
        "mean",
        "share",
        "bandwidth",
        "FLOP/s",
    ];
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            [
                format!("{}::{}", r.module, r.kernel),
                r.launches.to_string(),
                time(r.total_ns),
                time(r.mean_ns),
                format!("{:.1}%", r.share * 100.0),
                r.bytes_per_second
                    .map_or("-".to_owned(), |b| rate(b, "B/s")),
                r.flops_per_second
                    .map_or("-".to_owned(), |f| rate(f, "FLOP/s")),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut line = |row: &[String]| {
        let mut text = String::from(" ");
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            let pad = w - cell.chars().count();
            if i == 0 {
                let _ = write!(text, " {cell}{}", " ".repeat(pad));
            } else {
                let _ = write!(text, "  {}{cell}", " ".repeat(pad));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&header.map(str::to_owned));
    for row in &cells {
        line(row);
    }
    let [count, ns, bytes] = copy_totals(run);
    if count > 0 {
        let _ = writeln!(out, "Copies: {count} ({bytes} bytes) in {}", time(ns));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORD: &str = r#"{"format":"offload-profile","version":1,"pid":7,"device":"cpu: test (4 threads)"}
{"kind":"copy","direction":"to_device","stream":0,"start_ns":10,"duration_ns":90,"bytes":4096}
{"kind":"launch","kernel":"saxpy","module":"k","stream":0,"start_ns":100,"duration_ns":1000,"grid":[4,1,1],"block":[256,1,1],"bytes":8192}
{"kind":"launch","kernel":"scale","module":"k","stream":1,"start_ns":200,"duration_ns":3000,"grid":[4,1,1],"block":[256,1,1],"bytes":4096}
{"kind":"launch","kernel":"saxpy","module":"k","stream":0,"start_ns":1200,"duration_ns":1000,"grid":[4,1,1],"block":[256,1,1],"bytes":8192}
{"kind":"flops","kernel":"saxpy","flops":2048}
{"kind":"image","module":"k","triple":"x86_64-unknown-linux-gnu","arch":"host","size":1000}
{"kind":"flops","kernel":"saxpy","flops":2048}
{"kind":"launch","kernel":"gpu","module":"k","stream":0,"start_ns":null,"duration_ns":null,"grid":[1,1,1],"block":[1,1,1],"bytes":64}
{"kind":"launches","kernel":"scale","module":"k","launches":2,"duration_ns":1000,"bytes":8192}
{"kind":"copies","direction":"to_host","copies":3,"duration_ns":30,"bytes":300}
"#;

    /// A GPU's record: its launches untimed, its peaks from the driver.
    #[test]
    fn a_gpus_peaks_are_read_from_the_record() {
        let record = r#"{"format":"offload-profile","version":1,"pid":7,"device":"cuda:0: NVIDIA H100"}
{"kind":"peaks","device":"cuda:0: NVIDIA H100","bytes_per_second":3352320000000,"flops_per_second":66908160000000,"source":"NVIDIA H100 (sm_90): FP32"}
{"kind":"launch","kernel":"gpu","module":"k","stream":0,"start_ns":null,"duration_ns":null,"grid":[1,1,1],"block":[1,1,1],"bytes":64}
"#;
        let run = parse_record(record).unwrap();
        let peaks = run.peaks.unwrap();
        assert_eq!(peaks.bytes_per_second, Some(3.35232e12));
        assert_eq!(peaks.flops_per_second, Some(6.690816e13));
        assert!(peaks.source.contains("H100"), "{}", peaks.source);
        let bad = record.replace("3352320000000", "-1");
        assert!(matches!(
            parse_record(&bad),
            Err(RecordError::Missing {
                line: 2,
                field: "bytes_per_second"
            })
        ));
        assert_eq!(parse_record(RECORD).unwrap().peaks, None);
    }

    #[test]
    fn the_record_sums_per_kernel_slowest_first() {
        let run = parse_record(RECORD).unwrap();
        assert_eq!(run.device, "cpu: test (4 threads)");
        assert_eq!(
            run.launches.len(),
            3,
            "the untimed launch is not on the timeline"
        );
        assert_eq!(run.copies.len(), 1);
        assert_eq!(run.bytes_per_launch["gpu"], 64);
        assert_eq!(run.images[0].size, 1000);
        let rows = summarize(&run);
        assert_eq!(rows[0].kernel, "scale");
        // One on the timeline, two summed past it.
        assert_eq!(rows[0].launches, 3);
        assert_eq!(rows[0].total_ns, 4000);
        assert_eq!(rows[0].bytes, Some(12288));
        assert_eq!(rows[1].kernel, "saxpy");
        assert_eq!(rows[1].launches, 2);
        assert_eq!(rows[1].mean_ns, 1000);
        assert!((rows[1].share - 1.0 / 3.0).abs() < 1e-9);
        // 16 KiB in 2 µs; 4096 FLOPs in 2 µs.
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < b * 1e-9);
        assert!(close(rows[1].bytes_per_second, 16384.0 / 2e-6), "{rows:?}");
        assert!(close(rows[1].flops_per_second, 4096.0 / 2e-6), "{rows:?}");
        assert_eq!(rows[0].flops_per_second, None);
        let text = table(&run, &rows);
        assert!(text.contains("k::saxpy"), "{text}");
        assert!(text.contains("2.048 GFLOP/s"), "{text}");
        assert!(text.contains("33.3%"), "{text}");
        assert!(text.contains("Copies: 4 (4396 bytes)"), "{text}");
    }

    #[test]
    fn a_foreign_or_damaged_record_is_refused() {
        assert!(matches!(
            parse_record("{\"kind\":\"launch\"}\n"),
            Err(RecordError::NotARecord)
        ));
        assert!(matches!(
            parse_record("{\"format\":\"offload-profile\",\"version\":2}\n"),
            Err(RecordError::Version(2))
        ));
        let err =
            parse_record("{\"format\":\"offload-profile\",\"version\":1}\nnot json\n").unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        let err = parse_record(
            "{\"format\":\"offload-profile\",\"version\":1}\n{\"kind\":\"copy\",\"direction\":\"to_host\"}\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("`stream`"), "{err}");
    }

    #[test]
    fn times_and_rates_take_the_unit_that_suits_them() {
        assert_eq!(time(999), "999 ns");
        assert_eq!(time(1_500), "1.500 µs");
        assert_eq!(time(2_000_000_000), "2.000 s");
        assert_eq!(rate(1.5e9, "B/s"), "1.500 GB/s");
        assert_eq!(rate(12.0, "FLOP/s"), "12.000 FLOP/s");
    }
}
