//! Barrier kernels as the CUDA samples and Rodinia write them (`cpu-samples-kernels`), on the
//! CPU device, against the same outputs computed by a sequential loop and by rayon: a
//! `reduce5` block reduction, a generic warp-shuffle reduction, a Blelloch scan, a warp-scan
//! prefix sum, a 256-bin histogram, a Jacobi step, Rodinia's hotspot, a tiled transpose, the
//! samples' tiled matrix product, an n-body step, a k-means step and a bitonic sort of each
//! block's 1,024 pairs. Each case is run once to warm up, then ROUNDS times; one line per case
//! gives the median and an FNV-1a 64 digest of the output bytes:
//! `<case> <size> rounds=R median_ms=M digest=D`. `benches/peers/samples_openmp.c` prints the
//! same lines with OpenMP; `benches/cpu-samples.sh` runs all four and compares.
//!
//! `cpu-samples [--peer device|seq|rayon] [--size small|full] [--only CASE,..] [ROUNDS]` (the
//! size defaults to `$SIZE`, else `full`; ROUNDS to 5; `--only` runs the cases named). `OFFLOAD_CPU_THREADS` sets the CPU device's worker
//! threads, `RAYON_NUM_THREADS` rayon's.

use std::time::Instant;

use cpu_samples_kernels::{
    blelloch, histogram, hotspot, jacobi, kmeans, matrix_mul, nbody, reduction, shuffle_reduction,
    sorting_networks, transpose, warp_scan,
};
use offload_rt::{Device, DeviceBuffer, LaunchConfig};
use rayon::prelude::*;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Who computes the outputs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Peer {
    /// The kernels on the CPU device.
    Device,
    /// Plain loops on one thread.
    Seq,
    /// The same loops over rayon's threads.
    Rayon,
}

/// The run: who computes, how many rounds, and the device when it is the CPU device.
#[derive(Debug)]
struct Bench {
    peer: Peer,
    rounds: usize,
    device: Option<Device>,
}

impl Bench {
    fn device(&self) -> &Device {
        self.device.as_ref().expect("the device peer has a device")
    }

    /// Whether the CPU loops run over rayon's threads.
    fn parallel(&self) -> bool {
        self.peer == Peer::Rayon
    }

    /// Runs `f` once to warm up, then `rounds` times; the median time in milliseconds.
    fn median_ms(&self, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
        f()?;
        let mut times = Vec::with_capacity(self.rounds);
        for _ in 0..self.rounds {
            let start = Instant::now();
            f()?;
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        Ok(times[times.len() / 2])
    }
}

fn main() -> Result<()> {
    let mut peer = Peer::Device;
    let mut size = std::env::var("SIZE").unwrap_or_else(|_| "full".to_owned());
    let mut rounds = 5usize;
    let mut only: Option<Vec<String>> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--peer" => {
                peer = match args.next().as_deref() {
                    Some("device") => Peer::Device,
                    Some("seq") => Peer::Seq,
                    Some("rayon") => Peer::Rayon,
                    other => return Err(format!("--peer device|seq|rayon, not {other:?}").into()),
                }
            }
            "--size" => size = args.next().ok_or("--size small|full")?,
            "--only" => {
                let names = args.next().ok_or("--only CASE,..")?;
                only = Some(names.split(',').map(str::to_owned).collect());
            }
            r => rounds = r.parse().map_err(|e| format!("rounds {r:?}: {e}"))?,
        }
    }
    let full = match size.as_str() {
        "small" => false,
        "full" => true,
        other => return Err(format!("size small|full, not {other:?}").into()),
    };
    const CASES: [&str; 12] = [
        "reduce5",
        "sum_and_max",
        "prescan",
        "shfl_scan",
        "histogram256",
        "jacobi5",
        "hotspot",
        "transpose",
        "matrix_mul",
        "nbody",
        "kmeans",
        "bitonic_sort",
    ];
    if let Some(unknown) = only.iter().flatten().find(|c| !CASES.contains(&c.as_str())) {
        return Err(format!("--only: no case {unknown:?} (cases: {})", CASES.join(", ")).into());
    }
    let device = (peer == Peer::Device).then(Device::cpu);
    let who = match &device {
        Some(d) => d.describe().to_owned(),
        None if peer == Peer::Rayon => format!("rayon, {} threads", rayon::current_num_threads()),
        None => "a sequential loop".to_owned(),
    };
    let b = Bench {
        peer,
        rounds: rounds.max(1),
        device,
    };
    println!("# cpu-samples on {who}, size {size}, {} rounds", b.rounds);

    let pick = |small: u32, large: u32| if full { large } else { small };
    // The same sizes in samples_openmp.c.
    let runs = |case: &str| only.as_ref().is_none_or(|o| o.iter().any(|c| c == case));
    if runs("reduce5") {
        reduce5(&b, pick(1 << 20, 1 << 24))?;
    }
    if runs("sum_and_max") {
        sum_and_max(&b, pick(1 << 22, 1 << 24))?;
    }
    if runs("prescan") {
        prescan(&b, pick(1 << 19, 1 << 21))?;
    }
    if runs("shfl_scan") {
        shfl_scan(&b, pick(1 << 20, 1 << 24))?;
    }
    if runs("histogram256") {
        histogram256(&b, pick(1 << 22, 1 << 24))?;
    }
    if runs("jacobi5") {
        jacobi5(&b, pick(1024, 4096))?;
    }
    if runs("hotspot") {
        hotspot(&b, pick(512, 1024))?;
    }
    if runs("transpose") {
        transpose(&b, pick(1024, 4096), pick(2048, 4096))?;
    }
    if runs("matrix_mul") {
        matrix_mul(&b, pick(256, 512))?;
    }
    if runs("nbody") {
        nbody(&b, pick(1024, 2048))?;
    }
    if runs("kmeans") {
        kmeans(&b, pick(1 << 18, 1 << 22))?;
    }
    if runs("bitonic_sort") {
        bitonic(&b, pick(1 << 17, 1 << 20))?;
    }
    Ok(())
}

/// `f(i, chunk)` for each `chunk`-sized piece of `out`, in turn or over rayon's threads.
fn for_chunks<T: Send>(
    parallel: bool,
    out: &mut [T],
    chunk: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    if parallel {
        out.par_chunks_mut(chunk)
            .enumerate()
            .for_each(|(i, c)| f(i, c));
    } else {
        out.chunks_mut(chunk).enumerate().for_each(|(i, c)| f(i, c));
    }
}

/// `f(i, a_chunk, b_chunk)` for the `i`th pieces of `a` and `b`, in turn or over rayon's
/// threads.
fn for_chunks2<A: Send, B: Send>(
    parallel: bool,
    a: &mut [A],
    chunk_a: usize,
    b: &mut [B],
    chunk_b: usize,
    f: impl Fn(usize, &mut [A], &mut [B]) + Sync,
) {
    if parallel {
        a.par_chunks_mut(chunk_a)
            .zip(b.par_chunks_mut(chunk_b))
            .enumerate()
            .for_each(|(i, (x, y))| f(i, x, y));
    } else {
        a.chunks_mut(chunk_a)
            .zip(b.chunks_mut(chunk_b))
            .enumerate()
            .for_each(|(i, (x, y))| f(i, x, y));
    }
}

fn reduce5(b: &Bench, n: u32) -> Result<()> {
    const BLOCK: u32 = reduction::BLOCK;
    let per = 2 * BLOCK as usize;
    let input: Vec<u32> = (0..n).map(|i| hash(i, 11) % 1000).collect();
    let blocks = (n as usize).div_ceil(per);
    let mut out = vec![0u32; blocks];
    let ms = match b.peer {
        Peer::Device => {
            let d = b.device();
            let din = DeviceBuffer::from_slice(d, &input)?;
            let mut dout = DeviceBuffer::<u32>::zeroed(d, blocks)?;
            let config = LaunchConfig::linear(blocks as u32, BLOCK);
            let ms = b.median_ms(|| {
                // SAFETY: the buffers hold every element the kernel reaches.
                unsafe { reduction::reduce5.launch(d, config, n, &din, &mut dout) }?;
                Ok(d.synchronize()?)
            })?;
            out = dout.to_vec()?;
            ms
        }
        _ => b.median_ms(|| {
            for_chunks(b.parallel(), &mut out, 1, |i, o| {
                o[0] = input[i * per..((i + 1) * per).min(input.len())]
                    .iter()
                    .sum();
            });
            Ok(())
        })?,
    };
    report(b, "reduce5", &format!("n={n}"), ms, &[&bytes(&out)]);
    Ok(())
}

fn sum_and_max(b: &Bench, n: u32) -> Result<()> {
    const GRID: usize = 64;
    const BLOCK: usize = 256;
    let input: Vec<u32> = (0..n).map(|i| hash(i, 12)).collect();
    let mut sums = vec![0u64; GRID];
    let mut maxima = vec![0u32; GRID];
    let ms = match b.peer {
        Peer::Device => {
            let d = b.device();
            let din = DeviceBuffer::from_slice(d, &input)?;
            let mut dsums = DeviceBuffer::<u64>::zeroed(d, GRID)?;
            let mut dmax = DeviceBuffer::<u32>::zeroed(d, GRID)?;
            let config = LaunchConfig::linear(GRID as u32, BLOCK as u32);
            let ms = b.median_ms(|| {
                // SAFETY: the buffers hold every element the kernel reaches.
                unsafe {
                    shuffle_reduction::sum_and_max.launch(d, config, n, &din, &mut dsums, &mut dmax)
                }?;
                Ok(d.synchronize()?)
            })?;
            sums = dsums.to_vec()?;
            maxima = dmax.to_vec()?;
            ms
        }
        _ => b.median_ms(|| {
            // Block `blk` visits the runs of BLOCK elements that start at (r·GRID + blk)·BLOCK.
            for_chunks2(b.parallel(), &mut sums, 1, &mut maxima, 1, |blk, s, m| {
                let (mut sum, mut max) = (0u64, 0u32);
                for run in input.chunks(BLOCK).skip(blk).step_by(GRID) {
                    for &v in run {
                        sum += u64::from(v);
                        max = max.max(v);
                    }
                }
                s[0] = sum;
                m[0] = max;
            });
            Ok(())
        })?,
    };
    report(
        b,
        "sum_and_max",
        &format!("n={n}"),
        ms,
        &[&bytes(&sums), &bytes(&maxima)],
    );
    Ok(())
}

fn prescan(b: &Bench, n: u32) -> Result<()> {
    const ELEMS: usize = blelloch::SCAN_ELEMS;
    let input: Vec<u32> = (0..n).map(|i| hash(i, 13) % 1000).collect();
    let blocks = n as usize / ELEMS;
    let mut out = vec![0u32; n as usize];
    let mut totals = vec![0u32; blocks];
    let ms = match b.peer {
        Peer::Device => {
            let d = b.device();
            let din = DeviceBuffer::from_slice(d, &input)?;
            let mut dout = DeviceBuffer::<u32>::zeroed(d, out.len())?;
            let mut dtotals = DeviceBuffer::<u32>::zeroed(d, blocks)?;
            let config = LaunchConfig::linear(blocks as u32, ELEMS as u32 / 2);
            let ms = b.median_ms(|| {
                // SAFETY: the buffers hold every element the kernel reaches.
                unsafe { blelloch::prescan.launch(d, config, &din, &mut dout, &mut dtotals) }?;
                Ok(d.synchronize()?)
            })?;
            out = dout.to_vec()?;
            totals = dtotals.to_vec()?;
            ms
        }
        _ => b.median_ms(|| {
            for_chunks2(
                b.parallel(),
                &mut out,
                ELEMS,
                &mut totals,
                1,
                |blk, o, t| {
                    let mut acc = 0u32;
                    for (o, &x) in o.iter_mut().zip(&input[blk * ELEMS..]) {
                        *o = acc;
                        acc += x;
                    }
                    t[0] = acc;
                },
            );
            Ok(())
        })?,
    };
    report(
        b,
        "prescan",
        &format!("n={n}"),
        ms,
        &[&bytes(&out), &bytes(&totals)],
    );
    Ok(())
}

fn shfl_scan(b: &Bench, n: u32) -> Result<()> {
    const BLOCK: usize = warp_scan::SCAN_BLOCK as usize;
    let input: Vec<u32> = (0..n).map(|i| hash(i, 14) % 1000).collect();
    let blocks = n as usize / BLOCK;
    let mut out = vec![0u32; n as usize];
    let mut totals = vec![0u32; blocks];
    let ms = match b.peer {
        Peer::Device => {
            let d = b.device();
            let din = DeviceBuffer::from_slice(d, &input)?;
            let mut dout = DeviceBuffer::<u32>::zeroed(d, out.len())?;
            let mut dtotals = DeviceBuffer::<u32>::zeroed(d, blocks)?;
            let config = LaunchConfig::linear(blocks as u32, BLOCK as u32);
            let ms = b.median_ms(|| {
                // SAFETY: the buffers hold every element the kernel reaches.
                unsafe {
                    warp_scan::shfl_scan.launch(d, config, n, &din, &mut dout, &mut dtotals)
                }?;
                Ok(d.synchronize()?)
            })?;
            out = dout.to_vec()?;
            totals = dtotals.to_vec()?;
            ms
        }
        _ => b.median_ms(|| {
            for_chunks2(
                b.parallel(),
                &mut out,
                BLOCK,
                &mut totals,
                1,
                |blk, o, t| {
                    let mut acc = 0u32;
                    for (o, &x) in o.iter_mut().zip(&input[blk * BLOCK..]) {
                        acc += x;
                        *o = acc;
                    }
                    t[0] = acc;
                },
            );
            Ok(())
        })?,
    };
    report(
        b,
        "shfl_scan",
        &format!("n={n}"),
        ms,
        &[&bytes(&out), &bytes(&totals)],
    );
    Ok(())
}

fn histogram256(b: &Bench, n: u32) -> Result<()> {
    const BINS: usize = histogram::BINS;
    let data: Vec<u32> = (0..n).map(|i| hash(i, 15)).collect();
    let count = |mut bins: [u32; BINS], words: &[u32]| {
        for &w in words {
            for byte in w.to_le_bytes() {
                bins[byte as usize] += 1;
            }
        }
        bins
    };
    let mut bins = [0u32; BINS];
    let ms = match b.peer {
        Peer::Device => {
            let d = b.device();
            let ddata = DeviceBuffer::from_slice(d, &data)?;
            let mut dbins = DeviceBuffer::<u32>::zeroed(d, BINS)?;
            let config = LaunchConfig::linear(64, 256);
            let ms = b.median_ms(|| {
                dbins.copy_from(&[0; BINS])?;
                // SAFETY: `ddata` holds `n` words and `dbins` BINS counts.
                unsafe { histogram::histogram256.launch(d, config, n, &ddata, &mut dbins) }?;
                Ok(d.synchronize()?)
            })?;
            bins.copy_from_slice(&dbins.to_vec()?);
            ms
        }
        Peer::Seq => b.median_ms(|| {
            bins = count([0; BINS], &data);
            Ok(())
        })?,
        Peer::Rayon => b.median_ms(|| {
            bins = data
                .par_chunks(1 << 16)
                .fold(|| [0u32; BINS], count)
                .reduce(
                    || [0u32; BINS],
                    |mut a, c| {
                        a.iter_mut().zip(c).for_each(|(a, c)| *a += c);
                        a
                    },
                );
            Ok(())
        })?,
    };
    report(b, "histogram256", &format!("n={n}"), ms, &[&bytes(&bins)]);
    Ok(())
}

fn jacobi5(b: &Bench, n: u32) -> Result<()> {
    const T: u32 = jacobi::JACOBI_TILE as u32;
    let nu = n as usize;
    let input: Vec<f32> = (0..n * n).map(|i| input_f32(i, 16)).collect();
    let mut out = vec![0f32; nu * nu];
    let ms = match b.peer {
        Peer::Device => {
            let d = b.device();
            let din = DeviceBuffer::from_slice(d, &input)?;
            let mut dout = DeviceBuffer::<f32>::zeroed(d, out.len())?;
            let config = LaunchConfig {
                grid: (n.div_ceil(T), n.div_ceil(T), 1),
                block: (T, T, 1),
                shared_mem_bytes: 0,
                cluster: (1, 1, 1),
            };
            let ms = b.median_ms(|| {
                // SAFETY: the buffers hold every element the kernel reaches.
                unsafe { jacobi::jacobi5.launch(d, config, n, &din, &mut dout) }?;
                Ok(d.synchronize()?)
            })?;
            out = dout.to_vec()?;
            ms
        }
        _ => b.median_ms(|| {
            for_chunks(b.parallel(), &mut out, nu, |r, o| {
                let row = &input[r * nu..][..nu];
                if r == 0 || r == nu - 1 {
                    o.copy_from_slice(row);
                    return;
                }
                let (up, down) = (&input[(r - 1) * nu..][..nu], &input[(r + 1) * nu..][..nu]);
                o[0] = row[0];
                for c in 1..nu - 1 {
                    o[c] = 0.25 * (((up[c] + row[c - 1]) + row[c + 1]) + down[c]);
                }
                o[nu - 1] = row[nu - 1];
            });
            Ok(())
        })?,
    };
    report(b, "jacobi5", &format!("{n}x{n}"), ms, &[&bytes(&out)]);
    Ok(())
}

/// Rodinia's thermal constants for an `rows × cols` chip, computed in `f64` and rounded to
/// `f32` as its host program does: `[cap, rx, ry, rz, step]`.
fn hotspot_constants(rows: u32, cols: u32) -> [f32; 5] {
    const T_CHIP: f64 = 0.0005;
    const CHIP_HEIGHT: f64 = 0.016;
    const CHIP_WIDTH: f64 = 0.016;
    const FACTOR_CHIP: f64 = 0.5;
    const SPEC_HEAT_SI: f64 = 1.75e6;
    const K_SI: f64 = 100.0;
    const MAX_PD: f64 = 3.0e6;
    const PRECISION: f64 = 0.001;
    let grid_height = CHIP_HEIGHT / f64::from(rows);
    let grid_width = CHIP_WIDTH / f64::from(cols);
    let cap = FACTOR_CHIP * SPEC_HEAT_SI * T_CHIP * grid_width * grid_height;
    let rx = grid_width / (2.0 * K_SI * T_CHIP * grid_height);
    let ry = grid_height / (2.0 * K_SI * T_CHIP * grid_width);
    let rz = T_CHIP / (K_SI * grid_height * grid_width);
    let max_slope = MAX_PD / (FACTOR_CHIP * T_CHIP * SPEC_HEAT_SI);
    let step = PRECISION / max_slope;
    [cap as f32, rx as f32, ry as f32, rz as f32, step as f32]
}

/// One step of Rodinia's stencil over the whole grid (a neighbour past the edge is the cell
/// itself), `dst` split in rows.
fn hotspot_step(
    parallel: bool,
    n: usize,
    k: [f32; 4],
    power: &[f32],
    src: &[f32],
    dst: &mut [f32],
) {
    let [step_div_cap, rx_1, ry_1, rz_1] = k;
    for_chunks(parallel, dst, n, |r, o| {
        let row = &src[r * n..][..n];
        let north = &src[r.saturating_sub(1) * n..][..n];
        let south = &src[(r + 1).min(n - 1) * n..][..n];
        let p = &power[r * n..][..n];
        for c in 0..n {
            let t = row[c];
            let (e, w) = (row[(c + 1).min(n - 1)], row[c.saturating_sub(1)]);
            o[c] = t + step_div_cap
                * (p[c]
                    + (south[c] + north[c] - 2.0 * t) * ry_1
                    + (e + w - 2.0 * t) * rx_1
                    + (hotspot::AMB_TEMP - t) * rz_1);
        }
    });
}

fn hotspot(b: &Bench, n: u32) -> Result<()> {
    const PYRAMID: i32 = 2;
    let nu = n as usize;
    let temp: Vec<f32> = (0..n * n).map(|i| 323.0 + input_f32(i, 17) * 8.0).collect();
    let power: Vec<f32> = (0..n * n).map(|i| (input_f32(i, 18) + 0.5) * 0.5).collect();
    let [cap, rx, ry, rz, step] = hotspot_constants(n, n);
    let mut out = vec![0f32; nu * nu];
    let ms = match b.peer {
        Peer::Device => {
            let d = b.device();
            let dpower = DeviceBuffer::from_slice(d, &power)?;
            let dtemp = DeviceBuffer::from_slice(d, &temp)?;
            let mut dout = DeviceBuffer::<f32>::zeroed(d, out.len())?;
            let small = (hotspot::HOTSPOT_BLOCK - 2 * PYRAMID) as u32;
            let bs = hotspot::HOTSPOT_BLOCK as u32;
            let config = LaunchConfig {
                grid: (n.div_ceil(small), n.div_ceil(small), 1),
                block: (bs, bs, 1),
                shared_mem_bytes: 0,
                cluster: (1, 1, 1),
            };
            let ni = n as i32;
            let ms = b.median_ms(|| {
                // SAFETY: the buffers hold every element the kernel reaches.
                unsafe {
                    hotspot::calculate_temp.launch(
                        d, config, PYRAMID, &dpower, &dtemp, &mut dout, ni, ni, PYRAMID, PYRAMID,
                        cap, rx, ry, rz, step,
                    )
                }?;
                Ok(d.synchronize()?)
            })?;
            out = dout.to_vec()?;
            ms
        }
        _ => {
            let k = [step / cap, 1.0 / rx, 1.0 / ry, 1.0 / rz];
            let mut mid = vec![0f32; nu * nu];
            b.median_ms(|| {
                hotspot_step(b.parallel(), nu, k, &power, &temp, &mut mid);
                hotspot_step(b.parallel(), nu, k, &power, &mid, &mut out);
                Ok(())
            })?
        }
    };
    report(b, "hotspot", &format!("{n}x{n}"), ms, &[&bytes(&out)]);
    Ok(())
}

fn transpose(b: &Bench, height: u32, width: u32) -> Result<()> {
    const T: usize = transpose::TILE_DIM;
    let (h, w) = (height as usize, width as usize);
    let input: Vec<f32> = (0..height * width).map(|i| input_f32(i, 19)).collect();
    let mut out = vec![0f32; h * w];
    let ms = match b.peer {
        Peer::Device => {
            let d = b.device();
            let din = DeviceBuffer::from_slice(d, &input)?;
            let mut dout = DeviceBuffer::<f32>::zeroed(d, out.len())?;
            let config = LaunchConfig {
                grid: (width / T as u32, height / T as u32, 1),
                block: (T as u32, transpose::BLOCK_ROWS as u32, 1),
                shared_mem_bytes: 0,
                cluster: (1, 1, 1),
            };
            let ms = b.median_ms(|| {
                // SAFETY: the buffers hold every element the kernel reaches.
                unsafe {
                    transpose::transpose_no_bank_conflicts
                        .launch(d, config, width, height, &din, &mut dout)
                }?;
                Ok(d.synchronize()?)
            })?;
            out = dout.to_vec()?;
            ms
        }
        // Output rows in bands of T (T input columns): each input row gives T short runs.
        _ => b.median_ms(|| {
            for_chunks(b.parallel(), &mut out, T * h, |band, o| {
                for (r, row) in input.chunks(w).enumerate() {
                    for (c, &x) in row[band * T..][..T].iter().enumerate() {
                        o[c * h + r] = x;
                    }
                }
            });
            Ok(())
        })?,
    };
    report(
        b,
        "transpose",
        &format!("{height}x{width}"),
        ms,
        &[&bytes(&out)],
    );
    Ok(())
}

fn matrix_mul(b: &Bench, n: u32) -> Result<()> {
    const BS: u32 = matrix_mul::MM_BLOCK as u32;
    let nu = n as usize;
    let a: Vec<f32> = (0..n * n).map(|i| input_f32(i, 20)).collect();
    let bm: Vec<f32> = (0..n * n).map(|i| input_f32(i, 21)).collect();
    let mut c = vec![0f32; nu * nu];
    let ms = match b.peer {
        Peer::Device => {
            let d = b.device();
            let da = DeviceBuffer::from_slice(d, &a)?;
            let db = DeviceBuffer::from_slice(d, &bm)?;
            let mut dc = DeviceBuffer::<f32>::zeroed(d, c.len())?;
            let config = LaunchConfig {
                grid: (n / BS, n / BS, 1),
                block: (BS, BS, 1),
                shared_mem_bytes: 0,
                cluster: (1, 1, 1),
            };
            let ms = b.median_ms(|| {
                // SAFETY: the buffers hold every element the kernel reaches.
                unsafe { matrix_mul::matrix_mul_cuda.launch(d, config, &mut dc, &da, &db, n, n) }?;
                Ok(d.synchronize()?)
            })?;
            c = dc.to_vec()?;
            ms
        }
        // Row by row, k outside j: each element still adds its products in k order.
        _ => b.median_ms(|| {
            for_chunks(b.parallel(), &mut c, nu, |i, row| {
                row.fill(0.0);
                for k in 0..nu {
                    let aik = a[i * nu + k];
                    for (cj, bkj) in row.iter_mut().zip(&bm[k * nu..][..nu]) {
                        *cj += aik * bkj;
                    }
                }
            });
            Ok(())
        })?,
    };
    report(b, "matrix_mul", &format!("{n}x{n}"), ms, &[&bytes(&c)]);
    Ok(())
}

fn nbody(b: &Bench, n: u32) -> Result<()> {
    const BLOCK: u32 = nbody::NBODY_BLOCK;
    let pos: Vec<f32> = (0..4 * n)
        .map(|i| {
            if i % 4 == 3 {
                input_f32(i, 22) + 0.75
            } else {
                input_f32(i, 22) * 4.0
            }
        })
        .collect();
    let mut accel = vec![0f32; 4 * n as usize];
    let ms = match b.peer {
        Peer::Device => {
            let d = b.device();
            let dpos = DeviceBuffer::from_slice(d, &pos)?;
            let mut daccel = DeviceBuffer::<f32>::zeroed(d, accel.len())?;
            let config = LaunchConfig::linear(n / BLOCK, BLOCK);
            let ms = b.median_ms(|| {
                // SAFETY: the buffers hold every element the kernel reaches.
                unsafe { nbody::compute_body_accel.launch(d, config, n, &dpos, &mut daccel) }?;
                Ok(d.synchronize()?)
            })?;
            accel = daccel.to_vec()?;
            ms
        }
        _ => b.median_ms(|| {
            for_chunks(b.parallel(), &mut accel, 4, |i, out| {
                let bi = &pos[4 * i..][..4];
                let mut ai = [0f32; 3];
                for bj in pos.chunks_exact(4) {
                    let r = [bj[0] - bi[0], bj[1] - bi[1], bj[2] - bi[2]];
                    let dist_sqr =
                        r[0] * r[0] + r[1] * r[1] + r[2] * r[2] + nbody::SOFTENING_SQUARED;
                    let inv_dist = 1.0 / dist_sqr.sqrt();
                    let s = bj[3] * (inv_dist * inv_dist * inv_dist);
                    ai = [ai[0] + r[0] * s, ai[1] + r[1] * s, ai[2] + r[2] * s];
                }
                out.copy_from_slice(&[ai[0], ai[1], ai[2], 0.0]);
            });
            Ok(())
        })?,
    };
    report(b, "nbody", &format!("n={n}"), ms, &[&bytes(&accel)]);
    Ok(())
}

fn kmeans(b: &Bench, n: u32) -> Result<()> {
    use kmeans::{CLUSTERS, DIMS, KMEANS_BLOCK};
    const BLOCK: usize = KMEANS_BLOCK as usize;
    // Each block's row: CLUSTERS * DIMS sums, then CLUSTERS counts.
    const ROW: usize = CLUSTERS * DIMS + CLUSTERS;
    let nu = n as usize;
    let points: Vec<i32> = (0..n * DIMS as u32)
        .map(|i| (hash(i, 23) % 1024) as i32)
        .collect();
    let centroids: Vec<i32> = (0..(CLUSTERS * DIMS) as u32)
        .map(|i| (hash(i, 24) % 1024) as i32)
        .collect();
    let blocks = nu.div_ceil(BLOCK);
    let mut membership = vec![0u32; nu];
    let mut rows = vec![0i32; blocks * ROW];
    let ms = match b.peer {
        Peer::Device => {
            let d = b.device();
            let dpoints = DeviceBuffer::from_slice(d, &points)?;
            let dcentroids = DeviceBuffer::from_slice(d, &centroids)?;
            let mut dmember = DeviceBuffer::<u32>::zeroed(d, nu)?;
            let mut dsums = DeviceBuffer::<i32>::zeroed(d, blocks * CLUSTERS * DIMS)?;
            let mut dcounts = DeviceBuffer::<u32>::zeroed(d, blocks * CLUSTERS)?;
            let config = LaunchConfig::linear(blocks as u32, KMEANS_BLOCK);
            let ms = b.median_ms(|| {
                // SAFETY: the buffers hold every element the kernel reaches.
                unsafe {
                    kmeans::kmeans_assign.launch(
                        d,
                        config,
                        n,
                        &dpoints,
                        &dcentroids,
                        &mut dmember,
                        &mut dsums,
                        &mut dcounts,
                    )
                }?;
                Ok(d.synchronize()?)
            })?;
            membership = dmember.to_vec()?;
            let (sums, counts) = (dsums.to_vec()?, dcounts.to_vec()?);
            for (blk, row) in rows.chunks_mut(ROW).enumerate() {
                row[..CLUSTERS * DIMS]
                    .copy_from_slice(&sums[blk * CLUSTERS * DIMS..][..CLUSTERS * DIMS]);
                for (r, &c) in row[CLUSTERS * DIMS..]
                    .iter_mut()
                    .zip(&counts[blk * CLUSTERS..][..CLUSTERS])
                {
                    *r = c as i32;
                }
            }
            ms
        }
        _ => b.median_ms(|| {
            for_chunks2(
                b.parallel(),
                &mut membership,
                BLOCK,
                &mut rows,
                ROW,
                |blk, m, row| {
                    row.fill(0);
                    for (t, m) in m.iter_mut().enumerate() {
                        let p = &points[(blk * BLOCK + t) * DIMS..][..DIMS];
                        let mut best = (0, i32::MAX);
                        for (k, c) in centroids.chunks_exact(DIMS).enumerate() {
                            let d: i32 = p.iter().zip(c).map(|(p, c)| (p - c) * (p - c)).sum();
                            if d < best.1 {
                                best = (k, d);
                            }
                        }
                        *m = best.0 as u32;
                        for (s, p) in row[best.0 * DIMS..][..DIMS].iter_mut().zip(p) {
                            *s += p;
                        }
                        row[CLUSTERS * DIMS + best.0] += 1;
                    }
                },
            );
            Ok(())
        })?,
    };
    // The device's output order: memberships, every block's sums, every block's counts.
    let sums: Vec<i32> = rows
        .chunks(ROW)
        .flat_map(|r| r[..CLUSTERS * DIMS].to_vec())
        .collect();
    let counts: Vec<i32> = rows
        .chunks(ROW)
        .flat_map(|r| r[CLUSTERS * DIMS..].to_vec())
        .collect();
    report(
        b,
        "kmeans",
        &format!("n={n}"),
        ms,
        &[&bytes(&membership), &bytes(&sums), &bytes(&counts)],
    );
    Ok(())
}

fn bitonic(b: &Bench, n: u32) -> Result<()> {
    const N: usize = sorting_networks::SHARED_SIZE_LIMIT;
    // Keys distinct within a block (their low ten bits are the index's), so every sort gives
    // the same pairs.
    let keys: Vec<u32> = (0..n)
        .map(|i| (hash(i, 25) & !0x3ff) | (i & 0x3ff))
        .collect();
    let vals: Vec<u32> = (0..n).collect();
    let mut out_keys = vec![0u32; n as usize];
    let mut out_vals = vec![0u32; n as usize];
    let ms = match b.peer {
        Peer::Device => {
            let d = b.device();
            let dkeys = DeviceBuffer::from_slice(d, &keys)?;
            let dvals = DeviceBuffer::from_slice(d, &vals)?;
            let mut dok = DeviceBuffer::<u32>::zeroed(d, keys.len())?;
            let mut dov = DeviceBuffer::<u32>::zeroed(d, keys.len())?;
            let config = LaunchConfig::linear(n / N as u32, N as u32 / 2);
            let ms = b.median_ms(|| {
                // SAFETY: the buffers hold every element the kernel reaches.
                unsafe {
                    sorting_networks::bitonic_sort_shared
                        .launch(d, config, &mut dok, &mut dov, &dkeys, &dvals, 1)
                }?;
                Ok(d.synchronize()?)
            })?;
            out_keys = dok.to_vec()?;
            out_vals = dov.to_vec()?;
            ms
        }
        _ => b.median_ms(|| {
            for_chunks2(
                b.parallel(),
                &mut out_keys,
                N,
                &mut out_vals,
                N,
                |blk, k, v| {
                    let mut pairs: Vec<u64> = (blk * N..(blk + 1) * N)
                        .map(|i| (u64::from(keys[i]) << 32) | u64::from(vals[i]))
                        .collect();
                    pairs.sort_unstable();
                    for ((k, v), p) in k.iter_mut().zip(v.iter_mut()).zip(pairs) {
                        *k = (p >> 32) as u32;
                        *v = p as u32;
                    }
                },
            );
            Ok(())
        })?,
    };
    report(
        b,
        "bitonic_sort",
        &format!("n={n}"),
        ms,
        &[&bytes(&out_keys), &bytes(&out_vals)],
    );
    Ok(())
}

fn report(b: &Bench, case: &str, size: &str, ms: f64, parts: &[&[u8]]) {
    let digest = parts.iter().fold(FNV_OFFSET, |h, p| fnv1a64(h, p));
    println!(
        "{case} {size} rounds={} median_ms={ms:.2} digest={digest:016x}",
        b.rounds
    );
}

/// Little-endian bytes of a buffer's elements.
trait LeBytes: Copy {
    fn le_bytes(self, out: &mut Vec<u8>);
}

macro_rules! le_bytes {
    ($($t:ty),*) => {$(
        impl LeBytes for $t {
            fn le_bytes(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
le_bytes!(u32, i32, u64, f32);

fn bytes<T: LeBytes>(v: &[T]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 8);
    v.iter().for_each(|x| x.le_bytes(&mut out));
    out
}

/// A 32-bit integer hash (the same in `samples_openmp.c` and `benches/cpu-barriers`).
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

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a 64 of `bytes`, continuing from `h`.
fn fnv1a64(h: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(h, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
