//! Kernels with barriers on the CPU device: a tiled matrix product (n = 512 and 1024), a
//! shared-memory block reduction over 2^24 `u32`s (`examples/reduce`'s `block_sum`), a tiled
//! transpose and a 5-point stencil of 4096 × 4096 floats, a 7-point stencil of 256³ floats
//! and a 256-bin histogram of 2^24 words with shared-memory atomics (the last two written
//! plainly, as a GPU programmer would, untuned for the CPU), and, for throughput without
//! barriers, `examples/saxpy`'s SAXPY over 2^24 floats. Each case is run once to warm up,
//! then ROUNDS times (the 1024 matrix product at most 3 times); one line per case gives the
//! median and an FNV-1a 64 digest of the output bytes. `benches/peers/barriers_openmp.c`
//! computes the same outputs (same inputs, same order of float operations) with OpenMP and
//! prints lines of the same form; `benches/cpu-barriers.sh` runs both and compares.
//!
//! `cargo offload run --release -p cpu-barriers [-- [--only CASE,..] ROUNDS]` (`--only` runs
//! the cases named); `OFFLOAD_CPU_THREADS` sets the CPU device's worker threads.

use std::time::Instant;

use cpu_barriers_kernels::{TILE, TRANSPOSE_ROWS, TRANSPOSE_TILE};
use offload_rt::{Device, DeviceBuffer, LaunchConfig};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The cases, in the order they run.
const CASES: [&str; 7] = [
    "matmul",
    "reduce",
    "transpose",
    "stencil5",
    "stencil7",
    "histogram",
    "saxpy",
];

fn main() -> Result<()> {
    let mut rounds = 5usize;
    let mut only: Option<Vec<String>> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--only" => {
                let names = args.next().ok_or("--only CASE,..")?;
                only = Some(names.split(',').map(str::to_owned).collect());
            }
            r => rounds = r.parse().map_err(|e| format!("rounds {r:?}: {e}"))?,
        }
    }
    if let Some(unknown) = only.iter().flatten().find(|c| !CASES.contains(&c.as_str())) {
        return Err(format!("--only: no case {unknown:?} (cases: {})", CASES.join(", ")).into());
    }
    let runs = |case: &str| only.as_ref().is_none_or(|o| o.iter().any(|c| c == case));
    let rounds = rounds.max(1);
    let device = Device::cpu();
    println!("# cpu-barriers on {}, {rounds} rounds", device.describe());

    if runs("matmul") {
        for n in [512, 1024] {
            let r = if n == 1024 { rounds.min(3) } else { rounds };
            matmul(&device, n, r)?;
        }
    }
    if runs("reduce") {
        reduce(&device, 1 << 24, rounds)?;
    }
    if runs("transpose") {
        transpose(&device, 4096, 4096, rounds)?;
    }
    if runs("stencil5") {
        stencil(&device, 4096, rounds)?;
    }
    if runs("stencil7") {
        stencil7(&device, 256, rounds)?;
    }
    if runs("histogram") {
        histogram(&device, 1 << 24, rounds)?;
    }
    if runs("saxpy") {
        saxpy(&device, 1 << 24, rounds)?;
    }
    Ok(())
}

fn matmul(device: &Device, n: u32, rounds: usize) -> Result<()> {
    let len = n * n;
    let a: Vec<f32> = (0..len).map(|i| input_f32(i, 1)).collect();
    let b: Vec<f32> = (0..len).map(|i| input_f32(i, 2)).collect();
    let da = DeviceBuffer::from_slice(device, &a)?;
    let db = DeviceBuffer::from_slice(device, &b)?;
    let mut dc = DeviceBuffer::<f32>::zeroed(device, len as usize)?;
    let config = LaunchConfig {
        grid: (n / TILE, n / TILE, 1),
        block: (TILE, TILE, 1),
        shared_mem_bytes: 0,
        cluster: (1, 1, 1),
    };
    let ms = median_ms(rounds, || {
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe { cpu_barriers_kernels::matmul_tiled.launch(device, config, n, &da, &db, &mut dc) }?;
        Ok(device.synchronize()?)
    })?;
    report(
        "matmul",
        &format!("{n}x{n}"),
        rounds,
        ms,
        &f32_bytes(&dc.to_vec()?),
    );
    Ok(())
}

fn reduce(device: &Device, n: u32, rounds: usize) -> Result<()> {
    let input: Vec<u32> = (0..n).map(|i| hash(i, 3) % 1000).collect();
    let d_input = DeviceBuffer::from_slice(device, &input)?;
    let mut d_total = DeviceBuffer::from_slice(device, &[0u64])?;
    let block = reduce_kernels::BLOCK;
    let config = LaunchConfig::linear(n.div_ceil(block), block);
    let ms = median_ms(rounds, || {
        d_total.copy_from(&[0])?;
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe { reduce_kernels::block_sum.launch(device, config, n, &d_input, &mut d_total) }?;
        Ok(device.synchronize()?)
    })?;
    let total = d_total.to_vec()?[0];
    report(
        "reduce",
        &format!("n={n}"),
        rounds,
        ms,
        &total.to_le_bytes(),
    );
    Ok(())
}

fn transpose(device: &Device, rows: u32, cols: u32, rounds: usize) -> Result<()> {
    let input: Vec<f32> = (0..rows * cols).map(|i| input_f32(i, 4)).collect();
    let d_input = DeviceBuffer::from_slice(device, &input)?;
    let mut d_output = DeviceBuffer::<f32>::zeroed(device, input.len())?;
    let config = LaunchConfig {
        grid: (
            cols.div_ceil(TRANSPOSE_TILE),
            rows.div_ceil(TRANSPOSE_TILE),
            1,
        ),
        block: (TRANSPOSE_TILE, TRANSPOSE_ROWS, 1),
        shared_mem_bytes: 0,
        cluster: (1, 1, 1),
    };
    let ms = median_ms(rounds, || {
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe {
            cpu_barriers_kernels::transpose_tiled.launch(
                device,
                config,
                rows,
                cols,
                &d_input,
                &mut d_output,
            )
        }?;
        Ok(device.synchronize()?)
    })?;
    let size = format!("{rows}x{cols}");
    report(
        "transpose",
        &size,
        rounds,
        ms,
        &f32_bytes(&d_output.to_vec()?),
    );
    Ok(())
}

fn stencil(device: &Device, n: u32, rounds: usize) -> Result<()> {
    let input: Vec<f32> = (0..n * n).map(|i| input_f32(i, 5)).collect();
    let d_input = DeviceBuffer::from_slice(device, &input)?;
    let mut d_output = DeviceBuffer::<f32>::zeroed(device, input.len())?;
    let config = LaunchConfig {
        grid: (n.div_ceil(TILE), n.div_ceil(TILE), 1),
        block: (TILE, TILE, 1),
        shared_mem_bytes: 0,
        cluster: (1, 1, 1),
    };
    let ms = median_ms(rounds, || {
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe {
            cpu_barriers_kernels::stencil5.launch(device, config, n, &d_input, &mut d_output)
        }?;
        Ok(device.synchronize()?)
    })?;
    let size = format!("{n}x{n}");
    report(
        "stencil5",
        &size,
        rounds,
        ms,
        &f32_bytes(&d_output.to_vec()?),
    );
    Ok(())
}

fn stencil7(device: &Device, n: u32, rounds: usize) -> Result<()> {
    let input: Vec<f32> = (0..n * n * n).map(|i| input_f32(i, 6)).collect();
    let d_input = DeviceBuffer::from_slice(device, &input)?;
    let mut d_output = DeviceBuffer::<f32>::zeroed(device, input.len())?;
    let config = LaunchConfig {
        grid: (n.div_ceil(TILE), n.div_ceil(TILE), n),
        block: (TILE, TILE, 1),
        shared_mem_bytes: 0,
        cluster: (1, 1, 1),
    };
    let ms = median_ms(rounds, || {
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe {
            cpu_barriers_kernels::stencil7.launch(device, config, n, &d_input, &mut d_output)
        }?;
        Ok(device.synchronize()?)
    })?;
    let size = format!("{n}x{n}x{n}");
    report(
        "stencil7",
        &size,
        rounds,
        ms,
        &f32_bytes(&d_output.to_vec()?),
    );
    Ok(())
}

fn histogram(device: &Device, n: u32, rounds: usize) -> Result<()> {
    let data: Vec<u32> = (0..n).map(|i| hash(i, 7)).collect();
    let d_data = DeviceBuffer::from_slice(device, &data)?;
    let mut d_bins = DeviceBuffer::<u32>::zeroed(device, cpu_barriers_kernels::BINS)?;
    // A grid-stride loop's usual launch: a fixed number of blocks, not one thread per word.
    let config = LaunchConfig::linear(64, 256);
    let ms = median_ms(rounds, || {
        d_bins.copy_from(&[0; cpu_barriers_kernels::BINS])?;
        // SAFETY: `d_data` holds `n` words and `d_bins` BINS counts.
        unsafe { cpu_barriers_kernels::histogram.launch(device, config, n, &d_data, &mut d_bins) }?;
        Ok(device.synchronize()?)
    })?;
    let bins: Vec<u8> = d_bins
        .to_vec()?
        .iter()
        .flat_map(|c| c.to_le_bytes())
        .collect();
    report("histogram", &format!("n={n}"), rounds, ms, &bins);
    Ok(())
}

/// `y += 2.5 * x` over `n` floats with `examples/saxpy`'s kernel, every round on the previous
/// round's `y`, as the OpenMP peer does.
fn saxpy(device: &Device, n: u32, rounds: usize) -> Result<()> {
    let x: Vec<f32> = (0..n).map(|i| input_f32(i, 8)).collect();
    let y: Vec<f32> = (0..n).map(|i| input_f32(i, 9)).collect();
    let dx = DeviceBuffer::from_slice(device, &x)?;
    let mut dy = DeviceBuffer::from_slice(device, &y)?;
    let config = LaunchConfig::for_num_elems(n);
    let ms = median_ms(rounds, || {
        saxpy_kernels::saxpy.launch(device, config, 2.5, &dx, &mut dy)?;
        Ok(device.synchronize()?)
    })?;
    report(
        "saxpy",
        &format!("n={n}"),
        rounds,
        ms,
        &f32_bytes(&dy.to_vec()?),
    );
    Ok(())
}

/// Runs `f` once to warm up, then `rounds` times; the median time in milliseconds.
fn median_ms(rounds: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let start = Instant::now();
        f()?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn report(case: &str, size: &str, rounds: usize, ms: f64, bytes: &[u8]) {
    println!(
        "{case} {size} rounds={rounds} median_ms={ms:.2} digest={:016x}",
        fnv1a64(bytes)
    );
}

/// A 32-bit integer hash (the same in `barriers_openmp.c`).
fn hash(i: u32, seed: u32) -> u32 {
    let mut x = i.wrapping_mul(0x9e37_79b1) ^ seed.wrapping_mul(0x85eb_ca6b);
    x ^= x >> 15;
    x = x.wrapping_mul(0x2c1b_3c6d);
    x ^= x >> 12;
    x = x.wrapping_mul(0x297a_2d39);
    x ^ (x >> 15)
}

/// An input value in [-0.5, 0.5) with 10 significant bits, computed exactly in C too.
fn input_f32(i: u32, seed: u32) -> f32 {
    (hash(i, seed) >> 22) as f32 / 1024.0 - 0.5
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
