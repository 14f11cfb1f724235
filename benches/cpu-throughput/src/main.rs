//! Throughput of SAXPY on the CPU device against a plain Rust loop split over the same number
//! of threads, measured alternately in one process. Prints the medians and their ratio.
//!
//! `cargo offload run --release -p cpu-throughput [-- N ROUNDS]`

use std::time::{Duration, Instant};

use offload_rt::{Device, DeviceBuffer, LaunchConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().map_or(Ok(16 << 20), |a| a.parse())?;
    let rounds: usize = args.next().map_or(Ok(21), |a| a.parse())?;
    let threads = std::thread::available_parallelism()?.get();
    let a = 2.5_f32;
    let x: Vec<f32> = (0..n).map(|i| (i % 1024) as f32 * 0.25).collect();
    let mut y_plain: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();

    let device = Device::cpu();
    let dx = DeviceBuffer::from_slice(&device, &x)?;
    let mut dy = DeviceBuffer::from_slice(&device, &y_plain)?;
    let config = LaunchConfig::for_num_elems(n);

    let mut runtime = Vec::with_capacity(rounds);
    let mut plain = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        saxpy_kernels::saxpy.launch(&device, config, a, &dx, &mut dy)?;
        runtime.push(t.elapsed());

        let t = Instant::now();
        plain_saxpy(a, &x, &mut y_plain, threads);
        plain.push(t.elapsed());
    }
    // Both sides ran the same number of rounds on the same inputs: the results must agree.
    if dy.to_vec()? != y_plain {
        return Err("the CPU device and the plain loop disagree".into());
    }
    let (r, p) = (median(&mut runtime), median(&mut plain));
    let gbs = |d: Duration| 3.0 * 4.0 * f64::from(n) / d.as_secs_f64() / 1e9;
    println!("saxpy over {n} floats, {threads} threads, median of {rounds} rounds");
    println!(
        "  CPU device (offload-rt): {:>9.3} ms  {:>6.2} GB/s",
        r.as_secs_f64() * 1e3,
        gbs(r)
    );
    println!(
        "  plain Rust loop:         {:>9.3} ms  {:>6.2} GB/s",
        p.as_secs_f64() * 1e3,
        gbs(p)
    );
    println!(
        "  speed relative to the plain loop: {:.2}",
        p.as_secs_f64() / r.as_secs_f64()
    );
    Ok(())
}

fn plain_saxpy(a: f32, x: &[f32], y: &mut [f32], threads: usize) {
    let chunk = y.len().div_ceil(threads);
    std::thread::scope(|s| {
        for (ys, xs) in y.chunks_mut(chunk).zip(x.chunks(chunk)) {
            s.spawn(move || {
                for (yi, xi) in ys.iter_mut().zip(xs) {
                    *yi += a * xi;
                }
            });
        }
    });
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}
