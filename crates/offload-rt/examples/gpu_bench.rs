//! CUDA benchmarks of the runtime, side by side in one program:
//!
//! 1. launch overhead of an empty kernel through the runtime (`Device::launch_raw`, with its
//!    module and kernel lookups), on the default stream and on a `Stream`, against a raw
//!    `cuLaunchKernel` loop on the same stream: the calling thread's time per call, batches
//!    of `--launches` that fit the driver's queue, rounds alternated, medians (target: at
//!    most 1.1x);
//! 2. SAXPY over 256 Mi floats: achieved bandwidth against the device-to-device copy
//!    bandwidth measured in the same run (target: at least 90%);
//! 3. graph replay: 100 empty kernels recorded into a graph and replayed, against the same
//!    100 launches on a stream;
//! 4. copy/compute overlap: 8 chunks of page-locked copy in, kernels, copy out, on two
//!    streams against one (target: at least 1.6x), the kernels sized to take as long as a
//!    chunk's copy;
//! 5. first launch, cubin against PTX JIT: time from process start to the first kernel done,
//!    split into opening the device, loading the module and the launch (each in a fresh
//!    process, the two kinds alternated, medians; the JIT cache is disabled for the PTX runs).
//!
//! `cargo run --release -p offload-rt --example gpu_bench [-- --launches N --reps N]`.
//! Without a CUDA device it says why and exits with status 2. It exits with status 1 when a
//! target is missed.

use std::ffi::c_void;
use std::io::{BufRead, BufReader};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use offload_format::{ImageKind, OffloadBinary, OffloadKind};
use offload_rt::__internal::cuda::{self, CudaBackend, CudaDevice, CudaImageKind};
use offload_rt::__internal::register_bundle;
use offload_rt::{Device, DeviceBuffer, LaunchConfig, PinnedBuffer, Stream};

const PTX_SM70: &[u8] = include_bytes!("../tests/gpu_fixtures/kernels.sm_70.ptx");
const CUBIN_SM80: &[u8] = include_bytes!("../tests/gpu_fixtures/kernels.sm_80.cubin");
const CUBIN_SM90: &[u8] = include_bytes!("../tests/gpu_fixtures/kernels.sm_90.cubin");
const MODULE: &str = "gpu_fixtures";

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Which images to register.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Images {
    All,
    CubinOnly,
    PtxOnly,
}

fn register(images: Images) {
    let mut binaries = Vec::new();
    let mut add = |arch: &'static str, kind: ImageKind, bytes: &'static [u8]| {
        binaries.push(
            OffloadBinary::new(kind, OffloadKind::Cuda, bytes)
                .with_string("arch", arch)
                .with_string("triple", "nvptx64-nvidia-cuda")
                .with_string("offload.module", MODULE)
                .with_string("offload.kernels", "empty,saxpy,saxpy4,store"),
        );
    };
    if images != Images::PtxOnly {
        add("sm_80", ImageKind::Cubin, CUBIN_SM80);
        add("sm_90", ImageKind::Cubin, CUBIN_SM90);
    }
    if images != Images::CubinOnly {
        add("sm_70", ImageKind::Ptx, PTX_SM70);
    }
    register_bundle(
        "gpu_bench",
        binaries.iter().flat_map(OffloadBinary::to_bytes).collect(),
    );
}

fn open_device() -> BenchResult<(Device, CudaDevice)> {
    let backend = CudaBackend::open(0)?;
    let raw = backend.device().clone();
    Ok((Device::from_backend(Box::new(backend)), raw))
}

/// Child mode: one line on stdout, `done <open> <load> <launch>`, the milliseconds spent on
/// opening the device (driver start and context), loading the module (the PTX JIT, if any) and
/// the first launch until it is done.
fn first_launch(images: Images) -> BenchResult<()> {
    let start = Instant::now();
    register(images);
    let (device, _) = open_device()?;
    let opened = start.elapsed();
    device.load_module(MODULE)?;
    let loaded = start.elapsed();
    // SAFETY: `empty` takes no parameters.
    unsafe { device.launch_raw(MODULE, "empty", &LaunchConfig::linear(1, 1), &[]) }?;
    device.synchronize()?;
    let done = start.elapsed();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "done {:.3} {:.3} {:.3}",
        ms(opened),
        ms(loaded - opened),
        ms(done - loaded)
    );
    Ok(())
}

/// One first launch in a fresh process: (from spawn to the child's line, open, load, launch).
fn time_first_launch(kind: &str, disable_jit_cache: bool) -> BenchResult<[f64; 4]> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(["--first-launch", kind])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if disable_jit_cache {
        cmd.env("CUDA_CACHE_DISABLE", "1");
    }
    let start = Instant::now();
    let mut child = cmd.spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let elapsed = start.elapsed();
    let status = child.wait()?;
    let phases: Vec<f64> = line
        .strip_prefix("done ")
        .map(|rest| {
            rest.split_whitespace()
                .filter_map(|v| v.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    match (status.success(), phases.as_slice()) {
        (true, &[open, load, launch]) => Ok([elapsed.as_secs_f64() * 1e3, open, load, launch]),
        _ => Err(format!("first-launch child ({kind}) failed: {status}, output {line:?}").into()),
    }
}

/// The median of each of the four figures.
fn median_of(samples: &[[f64; 4]]) -> [f64; 4] {
    let mut out = [0.0; 4];
    for (i, o) in out.iter_mut().enumerate() {
        let mut column: Vec<f64> = samples.iter().map(|s| s[i]).collect();
        column.sort_by(f64::total_cmp);
        *o = column[column.len() / 2];
    }
    out
}

fn describe_first_launch(m: [f64; 4]) -> String {
    format!(
        "{:.1} ms (open {:.1}, module load {:.1}, launch {:.2})",
        m[0], m[1], m[2], m[3]
    )
}

/// Host time per launch call of `launches` launches, the queue idle before and after (the
/// synchronizations are not timed): what a launch costs the calling thread. A batch fits the
/// driver's queue, so no call waits for the GPU.
fn issue_time(
    launches: u32,
    mut launch: impl FnMut() -> BenchResult<()>,
    sync: impl Fn() -> BenchResult<()>,
) -> BenchResult<Duration> {
    sync()?;
    let start = Instant::now();
    for _ in 0..launches {
        launch()?;
    }
    let issued = start.elapsed();
    sync()?;
    Ok(issued / launches)
}

/// Medians of `rounds` alternating rounds: (runtime on the default stream, runtime on a
/// `Stream`, raw `cuLaunchKernel` on the default stream), per launch of the empty kernel.
fn launch_overhead(
    device: &Device,
    raw: &CudaDevice,
    launches: u32,
    rounds: u32,
) -> BenchResult<(Duration, Duration, Duration)> {
    let api = cuda::sys::api()?;
    let (image, kind) = image_for(raw);
    let module = raw.load_module(image, kind)?;
    let f = module.function("empty")?;
    let (_, stream) = raw.raw_handles();
    let cfg = LaunchConfig::linear(1, 1);
    let on_stream = device.stream()?;
    let sync = || -> BenchResult<()> { Ok(device.synchronize()?) };
    let sync_stream = || -> BenchResult<()> { Ok(on_stream.synchronize()?) };
    let rt = || -> BenchResult<()> {
        // SAFETY: `empty` takes no parameters.
        unsafe { device.launch_raw(MODULE, "empty", &cfg, &[]) }?;
        Ok(())
    };
    let rt_stream = || -> BenchResult<()> {
        // SAFETY: `empty` takes no parameters.
        unsafe { on_stream.device().launch_raw(MODULE, "empty", &cfg, &[]) }?;
        Ok(())
    };
    let raw_launch = || -> BenchResult<()> {
        // SAFETY: `f` is a parameterless kernel of a module loaded in the device's context,
        // which the runtime made current on this thread; `stream` is the device's stream.
        let code = unsafe {
            (api.cuLaunchKernel)(
                f.raw_handle(),
                1,
                1,
                1,
                1,
                1,
                1,
                0,
                stream,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        if code == cuda::sys::CUDA_SUCCESS {
            Ok(())
        } else {
            Err(format!("cuLaunchKernel: {code}").into())
        }
    };
    // Warm up every path (module load, lookups, the driver's queues).
    issue_time(launches, rt, sync)?;
    issue_time(launches, rt_stream, sync_stream)?;
    issue_time(launches, raw_launch, sync)?;
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        c.push(issue_time(launches, raw_launch, sync)?);
        a.push(issue_time(launches, rt, sync)?);
        b.push(issue_time(launches, rt_stream, sync_stream)?);
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    Ok((median(&mut a), median(&mut b), median(&mut c)))
}

/// The image the runtime's selection picks among the registered ones, for the raw loop.
fn image_for(raw: &CudaDevice) -> (&'static [u8], CudaImageKind) {
    match raw.info().compute_capability.0 {
        8 => (CUBIN_SM80, CudaImageKind::Cubin),
        9 => (CUBIN_SM90, CudaImageKind::Cubin),
        _ => (PTX_SM70, CudaImageKind::Ptx),
    }
}

/// The GB/s of SAXPY kernel `kernel` over 256 Mi floats, `elems_per_thread` of them per thread
/// (`saxpy`: 1; `saxpy4`: 4, one float4).
fn saxpy_bandwidth(
    device: &Device,
    raw: &CudaDevice,
    reps: u32,
    kernel: &'static str,
    elems_per_thread: u32,
) -> BenchResult<f64> {
    let n: usize = 256 << 20;
    let bytes = n * 4;
    let a = 0.5f32;
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let y0: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    let dx = DeviceBuffer::from_slice(device, &x)?;
    let mut dy = DeviceBuffer::from_slice(device, &y0)?;
    let cfg = LaunchConfig::for_num_elems(n as u32 / elems_per_thread);
    let saxpy = |dy: &mut DeviceBuffer<f32>| -> BenchResult<()> {
        let (mut nn, mut aa, mut px, mut py) = (n as u32, a, dx.device_ptr().0, dy.device_ptr().0);
        let params: [*mut c_void; 4] = [
            (&raw mut nn).cast(),
            (&raw mut aa).cast(),
            (&raw mut px).cast(),
            (&raw mut py).cast(),
        ];
        // SAFETY: saxpy(unsigned, float, const float*, float*) and saxpy4(unsigned, float,
        // const float4*, float4*) with n a multiple of 4; both buffers hold n floats, 16-byte
        // aligned, and outlive the launch (they are dropped after the device is synchronized).
        unsafe { device.launch_raw(MODULE, kernel, &cfg, &params) }?;
        Ok(())
    };
    // One checked run first, so that the timings are of a kernel that does the work.
    saxpy(&mut dy)?;
    let got = dy.to_vec()?;
    for i in (0..n).step_by(n / 997) {
        let want = a * x[i] + y0[i];
        if (got[i] - want).abs() > want.abs() * 1e-6 + 1e-6 {
            return Err(format!("{kernel} wrong at {i}: {} != {want}", got[i]).into());
        }
    }
    let (start, end) = (raw.event()?, raw.event()?);
    let mut best_saxpy = f32::MAX;
    for _ in 0..reps {
        start.record()?;
        saxpy(&mut dy)?;
        end.record()?;
        best_saxpy = best_saxpy.min(end.elapsed_ms_since(&start)?);
    }
    device.synchronize()?;
    // SAXPY reads x and y and writes y.
    Ok(gbs(3 * bytes, best_saxpy))
}

fn gbs(moved: usize, ms: f32) -> f64 {
    moved as f64 / (f64::from(ms) * 1e-3) / 1e9
}

/// Device-to-device copy GB/s over 1 GiB.
fn copy_bandwidth(raw: &CudaDevice, reps: u32) -> BenchResult<f64> {
    let bytes: usize = (256 << 20) * 4;
    let (start, end) = (raw.event()?, raw.event()?);
    let src = raw.alloc(bytes)?;
    let mut dst = raw.alloc(bytes)?;
    raw.copy_device_to_device(&mut dst, &src, bytes)?;
    let mut best_copy = f32::MAX;
    for _ in 0..reps {
        start.record()?;
        raw.copy_device_to_device(&mut dst, &src, bytes)?;
        end.record()?;
        best_copy = best_copy.min(end.elapsed_ms_since(&start)?);
    }
    raw.synchronize()?;
    // A copy reads and writes each byte once.
    Ok(gbs(2 * bytes, best_copy))
}

/// (100 launches on a stream, one replay of a graph of the same 100 launches), medians of
/// `rounds`, each until the stream is idle.
fn graph_replay(device: &Device, rounds: u32) -> BenchResult<(Duration, Duration)> {
    const KERNELS: usize = 100;
    let stream = device.stream()?;
    let cfg = LaunchConfig::linear(1, 1);
    let hundred = || -> BenchResult<()> {
        for _ in 0..KERNELS {
            // SAFETY: `empty` takes no parameters.
            unsafe { stream.device().launch_raw(MODULE, "empty", &cfg, &[]) }?;
        }
        Ok(())
    };
    stream.begin_capture()?;
    hundred()?;
    let graph = stream.end_capture()?;
    let (mut launched, mut replayed) = (Vec::new(), Vec::new());
    for round in 0..=rounds {
        let t = Instant::now();
        hundred()?;
        stream.synchronize()?;
        let l = t.elapsed();
        let t = Instant::now();
        // SAFETY: the recorded kernels use no memory.
        unsafe { stream.launch_graph(&graph) }?;
        stream.synchronize()?;
        let r = t.elapsed();
        // Round 0 warms both paths up.
        if round > 0 {
            launched.push(l);
            replayed.push(r);
        }
    }
    launched.sort();
    replayed.sort();
    Ok((launched[launched.len() / 2], replayed[replayed.len() / 2]))
}

/// Queues `saxpy(n, 1, x, y)` `times` times on `stream`.
fn queue_saxpy(
    stream: &Stream,
    n: u32,
    x: &DeviceBuffer<f32>,
    y: &mut DeviceBuffer<f32>,
    times: u32,
) -> BenchResult<()> {
    let cfg = LaunchConfig::for_num_elems(n);
    for _ in 0..times {
        let (mut nn, mut aa, mut px, mut py) = (n, 1.0f32, x.device_ptr().0, y.device_ptr().0);
        let params: [*mut c_void; 4] = [
            (&raw mut nn).cast(),
            (&raw mut aa).cast(),
            (&raw mut px).cast(),
            (&raw mut py).cast(),
        ];
        // SAFETY: saxpy(unsigned, float, const float*, float*); both buffers hold n floats
        // and outlive the work (the caller synchronizes before dropping them); the driver
        // copies the parameter values at the call.
        unsafe { stream.device().launch_raw(MODULE, "saxpy", &cfg, &params) }?;
    }
    Ok(())
}

/// (one stream, two streams): the time of the whole 8-chunk pipeline, medians of `reps`;
/// and the kernel launches per chunk that matched a chunk's copy time.
fn overlap(device: &Device, reps: u32) -> BenchResult<(Duration, Duration, u32)> {
    const CHUNKS: usize = 8;
    const N: u32 = 8 << 20;
    let x: Vec<f32> = (0..N).map(|i| (i % 13) as f32).collect();
    let pinned_in: Vec<PinnedBuffer<f32>> = (0..CHUNKS)
        .map(|_| PinnedBuffer::from_slice(device, &x))
        .collect::<Result<_, _>>()?;
    let mut pinned_out: Vec<PinnedBuffer<f32>> = (0..CHUNKS)
        .map(|_| PinnedBuffer::zeroed(device, N as usize))
        .collect::<Result<_, _>>()?;
    let mut dx: Vec<DeviceBuffer<f32>> = (0..CHUNKS)
        .map(|_| DeviceBuffer::zeroed(device, N as usize))
        .collect::<Result<_, _>>()?;
    let mut dy: Vec<DeviceBuffer<f32>> = (0..CHUNKS)
        .map(|_| DeviceBuffer::zeroed(device, N as usize))
        .collect::<Result<_, _>>()?;
    let streams = [device.stream()?, device.stream()?];

    // Calibrate: launches of the kernel that take as long as one chunk's copy in.
    let s = &streams[0];
    let t0 = s.record()?;
    s.copy_to_device(&mut dx[0], &pinned_in[0])?;
    let t1 = s.record()?;
    queue_saxpy(s, N, &dx[0], &mut dy[0], 10)?;
    let t2 = s.record()?;
    s.synchronize()?;
    let copy = t1.elapsed_since(&t0)?;
    let kernel = t2.elapsed_since(&t1)? / 10;
    let times = ((copy.as_secs_f64() / kernel.as_secs_f64()).round() as u32).clamp(1, 1000);

    let mut run = |ways: usize| -> BenchResult<Duration> {
        let t = Instant::now();
        for c in 0..CHUNKS {
            let s = &streams[c % ways];
            s.copy_to_device(&mut dx[c], &pinned_in[c])?;
            queue_saxpy(s, N, &dx[c], &mut dy[c], times)?;
            s.copy_to_host(&mut pinned_out[c], &dy[c])?;
        }
        for s in &streams {
            s.synchronize()?;
        }
        Ok(t.elapsed())
    };
    let (mut one, mut two) = (Vec::new(), Vec::new());
    run(2)?;
    for _ in 0..reps {
        one.push(run(1)?);
        two.push(run(2)?);
    }
    // Every chunk got `times` launches per run; chunk 0 the 10 of the calibration too.
    let runs = 2 * reps + 1;
    for (c, out) in pinned_out.iter().enumerate() {
        let per_x = (runs * times + if c == 0 { 10 } else { 0 }) as f32;
        let got = out.as_slice()?;
        if let Some(i) = (0..N as usize).find(|&i| got[i] != per_x * x[i]) {
            return Err(format!(
                "overlap chunk {c} wrong at {i}: {} != {}",
                got[i],
                per_x * x[i]
            )
            .into());
        }
    }
    one.sort();
    two.sort();
    Ok((one[one.len() / 2], two[two.len() / 2], times))
}

fn arg(args: &[String], name: &str, default: u32) -> BenchResult<u32> {
    match args.iter().position(|a| a == name) {
        Some(i) => Ok(args
            .get(i + 1)
            .ok_or(format!("{name} needs a value"))?
            .parse()?),
        None => Ok(default),
    }
}

fn run() -> BenchResult<bool> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--first-launch") {
        let images = match args.get(1).map(String::as_str) {
            Some("cubin") => Images::CubinOnly,
            Some("ptx") => Images::PtxOnly,
            other => return Err(format!("--first-launch cubin|ptx, not {other:?}").into()),
        };
        first_launch(images)?;
        return Ok(true);
    }
    let launches = arg(&args, "--launches", 500)?;
    let reps = arg(&args, "--reps", 5)?.max(1);

    let info = match cuda::probe() {
        Ok(devices) => devices.into_iter().next().ok_or("no CUDA device")?,
        Err(e) => {
            eprintln!("gpu_bench: no CUDA device to benchmark: {e}");
            std::process::exit(2);
        }
    };
    register(Images::All);
    let (device, raw) = open_device()?;
    println!(
        "device: {} ({} SMs, {} MiB), driver CUDA {}.{}",
        device.describe(),
        info.multiprocessors,
        info.total_memory >> 20,
        info.driver_version.0,
        info.driver_version.1
    );
    let image = device.load_module(MODULE)?;
    println!(
        "image: {} {} ({})",
        image.triple,
        image.arch,
        image.image_kind.name()
    );
    let mut ok = true;

    let rounds = 20 * reps;
    let (rt, on_stream, rawt) = launch_overhead(&device, &raw, launches, rounds)?;
    for (what, t) in [("default stream", rt), ("a Stream", on_stream)] {
        let ratio = t.as_secs_f64() / rawt.as_secs_f64();
        let pass = ratio <= 1.1;
        ok &= pass;
        println!(
            "launch overhead, empty kernel on {what}, host time per call, median of {rounds} x {launches}: runtime {:.3} us, raw cuLaunchKernel {:.3} us, ratio {ratio:.3}x (target <= 1.1x: {})",
            t.as_secs_f64() * 1e6,
            rawt.as_secs_f64() * 1e6,
            if pass { "met" } else { "MISSED" }
        );
    }

    let copy = copy_bandwidth(&raw, reps)?;
    let saxpy = saxpy_bandwidth(&device, &raw, reps, "saxpy", 1)?;
    let saxpy4 = saxpy_bandwidth(&device, &raw, reps, "saxpy4", 4)?;
    // The goal is on the float4 kernel: the scalar one is bound by the bytes each thread keeps
    // in flight, not by the launch path, on memories faster than an H100's.
    let frac = saxpy4 / copy;
    let pass = frac >= 0.9;
    ok &= pass;
    println!(
        "saxpy, 256 Mi floats: one float per thread {saxpy:.1} GB/s ({:.1}% of copy), four per thread (float4) {saxpy4:.1} GB/s; device-to-device copy: {copy:.1} GB/s; {:.1}% of copy (target >= 90%: {})",
        saxpy / copy * 100.0,
        frac * 100.0,
        if pass { "met" } else { "MISSED" }
    );

    let (launched, replayed) = graph_replay(&device, 50)?;
    println!(
        "100 empty kernels, median of 50: launched on a stream {:.1} us, graph replay {:.1} us ({:.2}x)",
        launched.as_secs_f64() * 1e6,
        replayed.as_secs_f64() * 1e6,
        launched.as_secs_f64() / replayed.as_secs_f64()
    );

    let (one, two, times) = overlap(&device, reps)?;
    let speedup = one.as_secs_f64() / two.as_secs_f64();
    let pass = speedup >= 1.6;
    ok &= pass;
    println!(
        "copy/compute overlap, 8 chunks of 32 MiB in and out with {times} saxpy launches each: one stream {:.2} ms, two streams {:.2} ms, {speedup:.2}x (target >= 1.6x: {})",
        one.as_secs_f64() * 1e3,
        two.as_secs_f64() * 1e3,
        if pass { "met" } else { "MISSED" }
    );

    // Fresh processes, cubin and PTX alternated so that both see the same machine state.
    let has_cubin = image_for(&raw).1 == CudaImageKind::Cubin;
    let (mut cubin, mut ptx) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        if has_cubin {
            cubin.push(time_first_launch("cubin", false)?);
        }
        ptx.push(time_first_launch("ptx", true)?);
    }
    let cubin = if has_cubin {
        describe_first_launch(median_of(&cubin))
    } else {
        format!("n/a (no cubin for {} here)", info.arch())
    };
    println!(
        "first launch, process start to first kernel done, median of {reps}: cubin {cubin}; PTX JIT (cache disabled) {}",
        describe_first_launch(median_of(&ptx))
    );
    Ok(ok)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("gpu_bench: {e}");
            ExitCode::FAILURE
        }
    }
}
