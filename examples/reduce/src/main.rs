//! Three block reductions on the best device present, checked against the CPU: one with a
//! shared-memory tree (`sync_threads()` between levels), one with warp shuffles, and the same
//! with its steps in functions the kernel calls; each block adds its sum to the total
//! atomically.
//!
//! `cargo offload run -p reduce [--release] [-- N]`; `OFFLOAD_DEVICE=cpu|cuda:0|hip:0` picks the
//! device. `reduce bench [N] [REPEATS]` times the kernels (median of REPEATS launches).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use offload_rt::{Device, DeviceBuffer, LaunchConfig};

type Kernel = fn(
    &Device,
    LaunchConfig,
    u32,
    &DeviceBuffer<u32>,
    &mut DeviceBuffer<u64>,
) -> offload_rt::Result<offload_rt::LaunchReport>;

const KERNELS: [(&str, Kernel); 3] = [
    ("shared memory", |d, c, n, i, o| {
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe { reduce_kernels::block_sum.launch(d, c, n, i, o) }
    }),
    ("warp shuffle", |d, c, n, i, o| {
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe { reduce_kernels::warp_shuffle_sum.launch(d, c, n, i, o) }
    }),
    ("called functions", |d, c, n, i, o| {
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe { reduce_kernels::helpers::helper_sum.launch(d, c, n, i, o) }
    }),
];

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let bench = args.first().is_some_and(|a| a == "bench");
    if bench {
        args.remove(0);
    }
    match run(&args, bench) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn arg(args: &[String], i: usize, what: &str, default: u32) -> Result<u32, String> {
    match args.get(i) {
        Some(a) => a.parse().map_err(|e| format!("{what} `{a}`: {e}")),
        None => Ok(default),
    }
}

fn run(args: &[String], bench: bool) -> Result<bool, Box<dyn std::error::Error>> {
    let n = arg(args, 0, "element count", 1 << 20)?;
    let repeats = arg(args, 1, "repeat count", 21)?.max(1);
    let input: Vec<u32> = (0..n)
        .map(|i| i.wrapping_mul(2_654_435_761) % 1000)
        .collect();
    let expected: u64 = input.iter().map(|&v| u64::from(v)).sum();

    let device = Device::best()?;
    println!("device: {}", device.describe());
    let d_input = DeviceBuffer::from_slice(&device, &input)?;
    let block = reduce_kernels::BLOCK;
    let config = LaunchConfig::linear(n.div_ceil(block), block);
    let mut ok = true;
    for (name, kernel) in KERNELS {
        let mut d_total = DeviceBuffer::from_slice(&device, &[0u64])?;
        let report = kernel(&device, config, n, &d_input, &mut d_total)?;
        // One addition per element, for `cargo offload profile`'s FLOP/s and roofline.
        offload_rt::profile::count_flops(report.kernel, u64::from(n));
        println!("image: {report}");
        let total = d_total.to_vec()?[0];
        if total == expected {
            println!("reduce ({name}): sum of {n} elements = {total} OK");
        } else {
            eprintln!("reduce ({name}): got {total}, expected {expected}");
            ok = false;
        }
        if bench {
            let mut times: Vec<Duration> = (0..repeats)
                .map(|_| {
                    let start = Instant::now();
                    kernel(&device, config, n, &d_input, &mut d_total)?;
                    offload_rt::profile::count_flops(report.kernel, u64::from(n));
                    device.synchronize()?;
                    Ok(start.elapsed())
                })
                .collect::<offload_rt::Result<_>>()?;
            times.sort();
            let median = times[times.len() / 2];
            println!(
                "bench ({name}): {n} elements, median of {repeats}: {:.3} ms, {:.1} Melem/s",
                median.as_secs_f64() * 1e3,
                f64::from(n) / median.as_secs_f64() / 1e6
            );
        }
    }
    Ok(ok)
}
