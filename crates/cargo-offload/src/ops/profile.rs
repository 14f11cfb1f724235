//! `cargo offload profile`: the program built as for `run`, then run under the profiler of the
//! device it runs on, and one table of its kernels printed (launches, total and mean time,
//! share, achieved bandwidth through their buffers and, where the program declares them,
//! FLOP/s), with a self-contained HTML report (or SVG) of its timeline and roofline.
//!
//! - The CPU device: offload-rt's own record (`OFFLOAD_PROFILE`, `offload_rt::profile`), so
//!   no vendor tool is needed; with `--detail`, the run sampled by `perf` and the samples in
//!   the CPU device's images mapped to their source lines (`lines`).
//! - An NVIDIA GPU: Nsight Systems (`nsys`), its `cuda_gpu_trace` read back; with `--detail`,
//!   then Nsight Compute (`ncu --import-source yes`), whose report holds each kernel's source
//!   view.
//! - An AMD GPU: `rocprofv3`'s kernel and memory-copy traces.
//!
//! The device is `OFFLOAD_DEVICE`'s where set, else the first GPU the drivers report, else the
//! CPU device. A missing profiler is an error naming the package that installs it.

mod lines;
mod record;
mod report;
mod vendor;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{Context, Result};
use offload_build::tooling::command;
use offload_format::DeviceFamily;
use offload_toolchain::Tool;

use super::cargo::{Runner, build_the_executable, exit_code};
use super::command_line::{CompileOptions, NativeGpus};
use lines::HotLine;
use record::Peaks;
use record::Run;

/// What `cargo offload profile` takes besides the build's arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProfileOptions {
    /// `--detail`: the hottest source lines (the CPU device: `perf`; NVIDIA: `ncu`).
    pub detail: bool,
    /// `--json`: the summary as JSON on stdout (the program's own output goes to stderr).
    pub json: bool,
    /// `--report PATH`: where the report goes (`.svg`: an SVG image; else HTML); default
    /// `offload-profile/<program>.html` beside the executable.
    pub report: Option<PathBuf>,
}

/// The device family a profiled run is expected on.
fn expected_family(device: Option<&str>, gpus: &[DeviceFamily]) -> DeviceFamily {
    match device.map(str::trim) {
        Some(d) if d.starts_with("cpu") => DeviceFamily::Cpu,
        Some(d) if d.starts_with("cuda") => DeviceFamily::Nvidia,
        Some(d) if d.starts_with("hip") => DeviceFamily::Amd,
        _ => gpus.first().copied().unwrap_or(DeviceFamily::Cpu),
    }
}

/// What `profile` found besides the timings: said on stderr, or in the JSON's `notes`.
#[derive(Debug, Default)]
struct Notes(Vec<String>);

impl Notes {
    fn add(&mut self, note: impl Into<String>) {
        self.0.push(note.into());
    }
}

/// Runs `cargo offload profile`.
pub fn profile(profile: &ProfileOptions, options: &CompileOptions) -> Result<ExitCode> {
    let device = std::env::var("OFFLOAD_DEVICE").ok();
    let gpus: Vec<DeviceFamily> = if device.is_some() {
        Vec::new()
    } else {
        NativeGpus::default()
            .get()
            .iter()
            .map(|a| a.family())
            .collect()
    };
    let family = expected_family(device.as_deref(), &gpus);
    // The GPU's profiler is found before anything is built.
    let gpu_tool = match family {
        DeviceFamily::Nvidia => Some(Tool::Nsys.find().with_context(|| {
            "profiling on an NVIDIA GPU runs the program under Nsight Systems \
             (`OFFLOAD_DEVICE=cpu` profiles the CPU device instead)"
        })?),
        DeviceFamily::Amd => Some(Tool::Rocprofv3.find().with_context(|| {
            "profiling on an AMD GPU runs the program under rocprofv3 \
             (`OFFLOAD_DEVICE=cpu` profiles the CPU device instead)"
        })?),
        DeviceFamily::Cpu => None,
    };
    let (executable, program_args) =
        match build_the_executable("`profile`", Runner::Profiler, options)? {
            Ok(built) => built,
            Err(status) => return Ok(status),
        };
    let scratch = tempfile::tempdir().context("creating a directory for the profile")?;
    let images = scratch.path().join("images");
    std::fs::create_dir(&images).with_context(|| format!("creating {}", images.display()))?;
    let mut session = Session {
        json: profile.json,
        executable: &executable,
        program_args: &program_args,
        scratch: scratch.path(),
        record: scratch.path().join("record.jsonl"),
        images,
        notes: Notes::default(),
    };
    let started = Instant::now();
    let (status, mut run, hot) = match (family, gpu_tool) {
        (DeviceFamily::Nvidia, Some(nsys)) => session.under_nsys(&nsys, profile.detail)?,
        (DeviceFamily::Amd, Some(rocprof)) => session.under_rocprof(&rocprof, profile.detail)?,
        _ => session.on_cpu(profile.detail)?,
    };
    let mut notes = session.notes;
    if !run.summed.is_empty() || run.summed_copies[0] > 0 {
        notes.add(
            "the timeline shows the first 65536 launches and copies; the table counts them all",
        );
    }
    let wall = started.elapsed();
    if run.device.is_empty() {
        run.device = device.unwrap_or_else(|| "the device".to_owned());
    }
    let rows = record::summarize(&run);
    let peaks = if run.timer == record::Timer::OffloadRt {
        measure_cpu_peaks()
    } else {
        run.peaks.clone().unwrap_or_else(|| Peaks {
            bytes_per_second: None,
            flops_per_second: None,
            source: "the GPU's driver told no peak figures (the runtime reads them from \
                     CUDA's device attributes)"
                .to_owned(),
        })
    };
    let hot_text = lines::render(&hot);
    let report_path = profile.report.clone().unwrap_or_else(|| {
        let name = executable
            .file_name()
            .map_or("program".into(), |n| n.to_string_lossy().into_owned());
        executable
            .parent()
            .unwrap_or(Path::new("."))
            .join("offload-profile")
            .join(format!("{name}.html"))
    });
    let page = if report_path.extension().is_some_and(|e| e == "svg") {
        report::svg(&run, &rows, &peaks)
    } else {
        report::html(&run, &rows, &peaks, &hot_text)
    };
    if let Some(dir) = report_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating {} for the report", dir.display()))?;
    }
    std::fs::write(&report_path, page)
        .with_context(|| format!("writing the report to {}", report_path.display()))?;
    if profile.json {
        let [copies, copies_ns, copies_bytes] = record::copy_totals(&run);
        let json = serde_json::json!({
            "device": run.device,
            "timer": run.timer,
            "wall_ns": wall.as_nanos() as u64,
            "kernels": rows,
            "copies": {"count": copies, "bytes": copies_bytes, "total_ns": copies_ns},
            "hot_lines": hot,
            "peaks": peaks,
            "report": report_path,
            "exit_code": status.code(),
            "notes": notes.0,
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        let mut text = record::table(&run, &rows);
        if !hot_text.is_empty() {
            text.push_str("Hot lines (perf samples in the CPU device's images):\n");
            for line in &hot_text {
                text.push_str(line);
                text.push('\n');
            }
        }
        text.push_str(&format!("Report: {}\n", report_path.display()));
        print!("{text}");
        for note in &notes.0 {
            eprintln!("note: {note}");
        }
    }
    Ok(exit_code(status))
}

/// One profiled run of the built program: where its files go and what it was told.
struct Session<'a> {
    json: bool,
    executable: &'a Path,
    program_args: &'a [OsString],
    scratch: &'a Path,
    /// offload-rt's record of the run (`OFFLOAD_PROFILE`).
    record: PathBuf,
    /// Where the CPU device writes its images (`OFFLOAD_CPU_IMAGE_DIR`), for `perf` to name.
    images: PathBuf,
    notes: Notes,
}

/// What a run gives: its exit status, its timeline and its hot lines.
type Profiled = (std::process::ExitStatus, Run, Vec<HotLine>);

impl Session<'_> {
    /// The program, under `tool` with `args` before it where given.
    fn command(&self, tool: Option<(&Path, &[OsString])>) -> Command {
        let mut cmd = match tool {
            Some((tool, args)) => {
                let mut cmd = Command::new(tool);
                cmd.args(args).arg(self.executable);
                cmd
            }
            None => Command::new(self.executable),
        };
        cmd.args(self.program_args)
            .env(offload_rt::profile::ENV, &self.record)
            .env("OFFLOAD_CPU_IMAGE_DIR", &self.images);
        if self.json {
            // The JSON alone on stdout: the program's output goes to stderr.
            cmd.stdout(stderr_stdio());
        }
        cmd
    }

    fn run(&self, tool: Option<(&Path, &[OsString])>) -> Result<std::process::ExitStatus> {
        let what = tool.map_or(self.executable, |(t, _)| t);
        command::status_interactive(&mut self.command(tool))
            .with_context(|| format!("could not run {}", what.display()))
    }

    /// The CPU device: timed by the runtime; with `detail`, sampled by `perf`.
    fn on_cpu(&mut self, detail: bool) -> Result<Profiled> {
        let perf_data = self.scratch.join("perf.data");
        let mut perf = None;
        if detail {
            match Tool::Perf.find() {
                Ok(found) => perf = Some(found),
                Err(e) => self.notes.add(format!("no source lines: {e}")),
            }
        }
        let (status, sampled) = match perf.as_deref() {
            Some(perf) => {
                let args: Vec<OsString> = ["record", "-q", "-e", "cpu-clock", "-F", "2999", "-o"]
                    .iter()
                    .map(OsString::from)
                    .chain([perf_data.clone().into_os_string(), "--".into()])
                    .collect();
                let status = self.run(Some((perf, &args)))?;
                if perf_data.is_file() || self.record.is_file() {
                    (status, true)
                } else {
                    // perf could not start sampling (a container without
                    // `perf_event_open`): the program runs again, timed by the runtime alone.
                    self.notes.add(
                        "no source lines: perf could not sample here (see its message above; \
                         `/proc/sys/kernel/perf_event_paranoid` at 2 or less lets it)",
                    );
                    (self.run(None)?, false)
                }
            }
            None => (self.run(None)?, false),
        };
        if !sampled {
            perf = None;
        }
        let run = read_record(&self.record)?;
        let hot = match perf {
            Some(perf) => {
                let files = ImageFiles {
                    executable: self.executable,
                    loaded: &self.images,
                    extracted: &self.scratch.join("symbols"),
                };
                cpu_hot_lines(&perf, &perf_data, &files, &run, &mut self.notes)?
            }
            None => Vec::new(),
        };
        Ok((status, run, hot))
    }

    /// An NVIDIA GPU: Nsight Systems' trace; with `detail`, Nsight Compute's report too.
    fn under_nsys(&mut self, nsys: &Path, detail: bool) -> Result<Profiled> {
        let report = self.scratch.join("nsys");
        let args: Vec<OsString> = vec![
            "profile".into(),
            "--trace=cuda".into(),
            "--force-overwrite=true".into(),
            "--stats=false".into(),
            "-o".into(),
            report.clone().into_os_string(),
        ];
        let status = self.run(Some((nsys, &args)))?;
        let run = self.with_record(|device| {
            let csv = command::run(
                Command::new(nsys)
                    .args(["stats", "--report", "cuda_gpu_trace", "--format", "csv"])
                    .args(["--force-export=true", "--output", "-"])
                    .arg(report.with_extension("nsys-rep")),
            )
            .context("reading Nsight Systems' trace of the run")?;
            Ok(vendor::nsys_trace(
                &String::from_utf8_lossy(&csv.stdout),
                device,
            ))
        })?;
        if detail {
            self.nsight_compute_detail()?;
        }
        Ok((status, run, Vec::new()))
    }

    /// An AMD GPU: rocprofv3's kernel and memory-copy traces.
    fn under_rocprof(&mut self, rocprof: &Path, detail: bool) -> Result<Profiled> {
        let out = self.scratch.join("rocprof");
        let args: Vec<OsString> = vec![
            "--kernel-trace".into(),
            "--memory-copy-trace".into(),
            "--output-format".into(),
            "csv".into(),
            "-d".into(),
            out.clone().into_os_string(),
            "-o".into(),
            "run".into(),
            "--".into(),
        ];
        let status = self.run(Some((rocprof, &args)))?;
        let run = self.with_record(|device| {
            let read = |suffix: &str| {
                find_file(&out, suffix)
                    .and_then(|f| std::fs::read_to_string(f).ok())
                    .unwrap_or_default()
            };
            Ok(vendor::rocprof_traces(
                &read("kernel_trace.csv"),
                &read("memory_copy_trace.csv"),
                device,
            ))
        })?;
        if detail {
            self.notes.add(
                "--detail on an AMD GPU: rocprofv3 gives no source lines here; the kernels' \
                 line tables are in their code objects (`cargo offload inspect`)",
            );
        }
        Ok((status, run, Vec::new()))
    }

    /// A GPU profiler's run (`traced`, given the device's description) with the runtime's
    /// record's FLOPs and bytes; the runtime's own where the kernels ran on the CPU device
    /// after all (the program carries no image for the GPU).
    fn with_record(&mut self, traced: impl FnOnce(&str) -> Result<Run>) -> Result<Run> {
        let recorded = read_record(&self.record)?;
        if !recorded.launches.is_empty() {
            self.notes
                .add("the kernels ran on the CPU device: timed by offload-rt");
            return Ok(recorded);
        }
        let mut run = traced(&recorded.device)?;
        run.flops = recorded.flops;
        run.bytes_per_launch = recorded.bytes_per_launch;
        run.peaks = recorded.peaks;
        Ok(run)
    }

    /// `--detail` on an NVIDIA GPU: the run again under Nsight Compute with the kernels'
    /// source imported into its report, whose source view shows each kernel's hot lines.
    fn nsight_compute_detail(&mut self) -> Result<()> {
        let ncu = Tool::Ncu
            .find()
            .context("`--detail` on an NVIDIA GPU runs the program under Nsight Compute")?;
        let dir = self
            .executable
            .parent()
            .unwrap_or(Path::new("."))
            .join("offload-profile");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let report = dir.join("detail");
        let args: Vec<OsString> = vec![
            "--import-source".into(),
            "yes".into(),
            "--set".into(),
            "full".into(),
            "--force-overwrite".into(),
            "--export".into(),
            report.clone().into_os_string(),
        ];
        let status = self.run(Some((&ncu, &args)))?;
        if !status.success() {
            self.notes
                .add(format!("Nsight Compute's run ended with {status}"));
        }
        self.notes.add(format!(
            "Nsight Compute's report, with each kernel's source lines: {r}.ncu-rep (`ncu \
             --import {r}.ncu-rep --page source --csv`, or open it in ncu-ui); the line tables \
             need `debug = \"line-tables-only\"` in a release profile",
            r = report.display()
        ));
        Ok(())
    }
}

/// Standard error as a child's standard output.
fn stderr_stdio() -> Stdio {
    use std::os::fd::AsFd as _;
    std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map_or_else(|_| Stdio::inherit(), Stdio::from)
}

/// The runtime's record of the run; an empty run where the program wrote none (it launched
/// nothing, or is not built with offload-rt).
fn read_record(path: &Path) -> Result<Run> {
    match std::fs::read_to_string(path) {
        Ok(text) => record::parse_record(&text)
            .with_context(|| format!("reading the runtime's profile record {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(record::parse_record(
            "{\"format\":\"offload-profile\",\"version\":1}",
        )?),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// The first file under `dir` whose name ends with `suffix`.
fn find_file(dir: &Path, suffix: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_file(&path, suffix) {
                return Some(found);
            }
        } else if path.to_string_lossy().ends_with(suffix) {
            return Some(path);
        }
    }
    None
}

/// Where the CPU device's images of a run are: loaded from files in `loaded` (which the
/// runtime removes as it unloads them), embedded in `executable`, and written again to
/// `extracted` for their line tables.
struct ImageFiles<'a> {
    executable: &'a Path,
    loaded: &'a Path,
    extracted: &'a Path,
}

impl ImageFiles<'_> {
    /// The images `perf` saw (`lib<module>-<pid>-<n>.so` in `loaded`), each found in the
    /// executable by its module and the size the runtime recorded, and written to
    /// `extracted`: the file to read each one's lines from.
    fn extract(
        &self,
        seen: impl Iterator<Item = String>,
        run: &Run,
    ) -> Result<std::collections::HashMap<String, (PathBuf, Vec<Segment>)>> {
        use std::collections::HashMap;
        let bytes = std::fs::read(self.executable)
            .with_context(|| format!("reading {}", self.executable.display()))?;
        let aligned = offload_format::aligned::object_bytes(&bytes);
        let file = object::File::parse(&*aligned)
            .with_context(|| format!("reading {} as an object file", self.executable.display()))?;
        let mut embedded: Vec<(String, Vec<u8>)> = Vec::new();
        for (_, section) in offload_tools::inspect::offloading_sections(&file) {
            for bin in offload_format::parse_all(section)? {
                if let Some(module) = bin.get("offload.module") {
                    embedded.push((module.to_owned(), bin.image.to_vec()));
                }
            }
        }
        std::fs::create_dir_all(self.extracted)
            .with_context(|| format!("creating {}", self.extracted.display()))?;
        let mut out = HashMap::new();
        for dso in seen {
            let Some(name) = Path::new(&dso).file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let module = name
                .strip_prefix("lib")
                .and_then(|n| n.strip_suffix(".so"))
                .and_then(|n| n.rsplitn(3, '-').nth(2));
            let Some(module) = module else { continue };
            let sizes: Vec<u64> = run
                .images
                .iter()
                .filter(|i| i.module == module)
                .map(|i| i.size)
                .collect();
            let found = embedded
                .iter()
                .find(|(m, image)| m == module && sizes.contains(&(image.len() as u64)));
            if let Some((_, image)) = found {
                let path = self.extracted.join(name);
                std::fs::write(&path, image)
                    .with_context(|| format!("writing {}", path.display()))?;
                out.insert(dso.clone(), (path, load_segments(image)));
            }
        }
        Ok(out)
    }
}

/// A load segment of an ELF image: its offset in the file, its size and its address.
type Segment = (u64, u64, u64);

/// The load segments of an ELF image.
fn load_segments(image: &[u8]) -> Vec<Segment> {
    use object::{Object as _, ObjectSegment as _};
    let aligned = offload_format::aligned::object_bytes(image);
    let Ok(file) = object::File::parse(&*aligned) else {
        return Vec::new();
    };
    file.segments()
        .map(|s| {
            let (offset, size) = s.file_range();
            (offset, size, s.address())
        })
        .collect()
}

/// The CPU device's hot lines from `perf`'s samples.
fn cpu_hot_lines(
    perf: &Path,
    data: &Path,
    images: &ImageFiles<'_>,
    run: &Run,
    notes: &mut Notes,
) -> Result<Vec<HotLine>> {
    if !data.is_file() {
        notes.add(format!(
            "no source lines: perf recorded nothing ({}; `perf record` needs \
             /proc/sys/kernel/perf_event_paranoid at 2 or less)",
            data.display()
        ));
        return Ok(Vec::new());
    }
    let script = command::run(
        Command::new(perf)
            .args(["script", "--show-mmap-events", "-F", "ip,dso", "-i"])
            .arg(data),
    )
    .context("reading perf's samples")?;
    let counts = lines::parse_perf_script(&String::from_utf8_lossy(&script.stdout), images.loaded);
    let files = images.extract(counts.keys().map(|(dso, _)| dso.clone()), run)?;
    let mut addresses: std::collections::HashMap<(String, String), u64> = Default::default();
    for ((dso, offset), n) in counts {
        let Some((file, segments)) = files.get(&dso) else {
            continue;
        };
        // The address the image's line tables know: its offset in the file, in the load
        // segment that holds it.
        let Some(address) = segments
            .iter()
            .find(|&&(file_start, size, _)| offset >= file_start && offset - file_start < size)
            .map(|&(file_start, _, address)| offset - file_start + address)
        else {
            continue;
        };
        let key = (file.to_string_lossy().into_owned(), format!("{address:#x}"));
        *addresses.entry(key).or_insert(0) += n;
    }
    let counts = addresses;
    if counts.is_empty() {
        notes.add("no source lines: perf took no sample in the CPU device's kernels");
        return Ok(Vec::new());
    }
    let symbolizer = match Tool::LlvmSymbolizer.find() {
        Ok(s) => s,
        Err(e) => {
            notes.add(format!("no source lines: {e}"));
            return Ok(Vec::new());
        }
    };
    let mut kernels: Vec<String> = record::summarize(run)
        .into_iter()
        .map(|r| r.kernel)
        .collect();
    kernels.dedup();
    let found = lines::hot_lines(&counts, &kernels, &symbolizer)?;
    if let Some(why) = found.why_none() {
        notes.add(format!("no source lines: {why}"));
    }
    Ok(found.hot)
}

/// The CPU device's peak figures, measured here in a fraction of a second: memory bandwidth
/// (a copy over every core, bytes read and written) and FLOP/s (independent multiply-adds
/// over every core, at the vector width this program is built for).
fn measure_cpu_peaks() -> Peaks {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    const BYTES: usize = 32 << 20;
    const PASSES: usize = 3;
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let src = vec![1u8; BYTES];
                let mut dst = vec![0u8; BYTES];
                for _ in 0..PASSES {
                    dst.copy_from_slice(std::hint::black_box(&src));
                    std::hint::black_box(&mut dst);
                }
            });
        }
    });
    // Allocation and first touch are in the time too: a lower bound.
    let bandwidth = (2 * BYTES * PASSES * threads) as f64 / started.elapsed().as_secs_f64();
    const LANES: usize = 64;
    const ROUNDS: usize = 200_000;
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut acc = [1.0f32; LANES];
                let (a, b) = (
                    std::hint::black_box(0.999_f32),
                    std::hint::black_box(1e-3_f32),
                );
                for _ in 0..ROUNDS {
                    for x in &mut acc {
                        *x = *x * a + b;
                    }
                }
                std::hint::black_box(acc);
            });
        }
    });
    let flops = (2 * LANES * ROUNDS * threads) as f64 / started.elapsed().as_secs_f64();
    Peaks {
        bytes_per_second: Some(bandwidth),
        flops_per_second: Some(flops),
        source: format!("measured here on {threads} threads"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_profiled_is_offload_devices_else_the_first_gpu() {
        let gpus = [DeviceFamily::Amd, DeviceFamily::Nvidia];
        assert_eq!(expected_family(Some("cpu"), &gpus), DeviceFamily::Cpu);
        assert_eq!(expected_family(Some("cuda:1"), &[]), DeviceFamily::Nvidia);
        assert_eq!(expected_family(Some("hip"), &[]), DeviceFamily::Amd);
        assert_eq!(expected_family(None, &gpus), DeviceFamily::Amd);
        assert_eq!(expected_family(None, &[]), DeviceFamily::Cpu);
    }

    #[test]
    fn the_cpu_peaks_are_measured() {
        let peaks = measure_cpu_peaks();
        assert!(peaks.bytes_per_second.is_some_and(|b| b > 1e8), "{peaks:?}");
        assert!(peaks.flops_per_second.is_some_and(|f| f > 1e8), "{peaks:?}");
    }
}
