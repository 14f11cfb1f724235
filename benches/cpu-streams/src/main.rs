//! The CPU device's streams against their peers, in one process, alternately:
//!
//! 1. launch overhead of an empty kernel (one block per worker thread, no work), launched
//!    synchronously and queued on a stream, against a `rayon::scope` spawning the same number
//!    of empty tasks on a pool of the same threads (goal: at most 1.5x);
//! 2. a pipeline of 8 chunks of copy in, kernel, copy out, on two streams against one (goal:
//!    not slower);
//! 3. launch overhead (on a stream) of an empty kernel taking two buffers as slices (`&[f32]`,
//!    `DisjointSlice<f32>`: a safe launch) against the same kernel taking raw pointers (goal:
//!    the safety costs at most 5%).
//!
//! `cargo offload run --release -p cpu-streams [-- LAUNCHES ROUNDS]`

use std::hint::black_box;
use std::time::{Duration, Instant};

use offload_rt::{Device, DeviceBuffer, LaunchConfig, PinnedBuffer, Stream};

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() -> BenchResult<()> {
    let mut args = std::env::args().skip(1);
    let launches: u32 = args.next().map_or(Ok(2000), |a| a.parse())?;
    let rounds: usize = args.next().map_or(Ok(15), |a| a.parse())?;
    let threads = std::thread::available_parallelism()?.get();
    let device = Device::cpu();
    println!("device: {}", device.describe());

    // An empty launch: one block per worker, each thread finds nothing to do (n = 0).
    let empty = LaunchConfig::linear(threads as u32, 1);
    let x = DeviceBuffer::<f32>::zeroed(&device, 1)?;
    let mut y = DeviceBuffer::<f32>::zeroed(&device, 1)?;
    let stream = device.stream()?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;

    let sync_loop = |y: &mut DeviceBuffer<f32>| -> BenchResult<Duration> {
        let t = Instant::now();
        for _ in 0..launches {
            saxpy_kernels::saxpy.launch(&device, empty, 1.0, &x, y)?;
        }
        Ok(t.elapsed() / launches)
    };
    let stream_loop = |y: &mut DeviceBuffer<f32>| -> BenchResult<Duration> {
        let t = Instant::now();
        for _ in 0..launches {
            saxpy_kernels::saxpy.launch(stream.device(), empty, 1.0, &x, y)?;
        }
        stream.synchronize()?;
        Ok(t.elapsed() / launches)
    };
    let rayon_loop = || -> Duration {
        let t = Instant::now();
        for _ in 0..launches {
            pool.scope(|s| {
                for i in 0..threads {
                    s.spawn(move |_| {
                        black_box(i);
                    });
                }
            });
        }
        t.elapsed() / launches
    };
    sync_loop(&mut y)?;
    stream_loop(&mut y)?;
    rayon_loop();
    let (mut sync, mut queued, mut peer) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        sync.push(sync_loop(&mut y)?);
        queued.push(stream_loop(&mut y)?);
        peer.push(rayon_loop());
    }
    let (s, q, p) = (median(&mut sync), median(&mut queued), median(&mut peer));
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "empty launch, {threads} blocks, median of {rounds} x {launches}: synchronous {:.2} us ({:.2}x), on a stream {:.2} us ({:.2}x), rayon::scope with {threads} tasks {:.2} us (goal <= 1.5x)",
        us(s),
        us(s) / us(p),
        us(q),
        us(q) / us(p),
        us(p)
    );

    let slices_loop = |y: &mut DeviceBuffer<f32>| -> BenchResult<Duration> {
        let t = Instant::now();
        for _ in 0..launches {
            cpu_streams_kernels::empty_slices.launch(stream.device(), empty, &x, y)?;
        }
        stream.synchronize()?;
        Ok(t.elapsed() / launches)
    };
    let pointers_loop = |y: &mut DeviceBuffer<f32>| -> BenchResult<Duration> {
        let t = Instant::now();
        for _ in 0..launches {
            // SAFETY: the kernel does not use its pointers.
            unsafe { cpu_streams_kernels::empty_pointers.launch(stream.device(), empty, &x, y) }?;
        }
        stream.synchronize()?;
        Ok(t.elapsed() / launches)
    };
    slices_loop(&mut y)?;
    pointers_loop(&mut y)?;
    let (mut safe, mut raw) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        safe.push(slices_loop(&mut y)?);
        raw.push(pointers_loop(&mut y)?);
    }
    let (s, r) = (median(&mut safe), median(&mut raw));
    println!(
        "empty launch with two buffers on a stream, {threads} blocks, median of {rounds} x {launches}: slices {:.2} us, raw pointers {:.2} us ({:.3}x; goal <= 1.05x)",
        us(s),
        us(r),
        us(s) / us(r)
    );

    let (one, two) = pipeline(&device, rounds)?;
    println!(
        "pipeline of 8 chunks (4 Mi f32 in, saxpy, out), median of {rounds}: one stream {:.2} ms, two streams {:.2} ms ({:.2}x; goal: two not slower)",
        one.as_secs_f64() * 1e3,
        two.as_secs_f64() * 1e3,
        one.as_secs_f64() / two.as_secs_f64()
    );
    Ok(())
}

/// (one stream, two streams): medians of `rounds` runs of the whole pipeline, checked.
fn pipeline(device: &Device, rounds: usize) -> BenchResult<(Duration, Duration)> {
    const CHUNKS: usize = 8;
    const N: u32 = 4 << 20;
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
    let streams: [Stream; 2] = [device.stream()?, device.stream()?];
    let config = LaunchConfig::for_num_elems(N);
    let mut run = |ways: usize| -> BenchResult<Duration> {
        let t = Instant::now();
        for c in 0..CHUNKS {
            let s = &streams[c % ways];
            s.copy_to_device(&mut dx[c], &pinned_in[c])?;
            saxpy_kernels::saxpy.launch(s.device(), config, 1.0, &dx[c], &mut dy[c])?;
            s.copy_to_host(&mut pinned_out[c], &dy[c])?;
        }
        for s in &streams {
            s.synchronize()?;
        }
        Ok(t.elapsed())
    };
    run(2)?;
    let (mut one, mut two) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        one.push(run(1)?);
        two.push(run(2)?);
    }
    // Every run added x to each chunk's y once.
    let runs = (2 * rounds + 1) as f32;
    for (c, out) in pinned_out.iter().enumerate() {
        let got = out.as_slice()?;
        if let Some(i) = (0..N as usize).find(|&i| got[i] != runs * x[i]) {
            return Err(format!("chunk {c} wrong at {i}: {} != {}", got[i], runs * x[i]).into());
        }
    }
    Ok((median(&mut one), median(&mut two)))
}
