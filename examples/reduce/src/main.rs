//! A block reduction (shared memory, `sync_threads()`, an atomic add per block) on the best
//! device present, checked against the CPU.
//!
//! `cargo offload run -p reduce [--release] [-- N]`; `OFFLOAD_DEVICE=cpu|cuda:0|hip:0` picks the device.

use std::process::ExitCode;

use offload_rt::{Device, DeviceBuffer, LaunchConfig};

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<bool, Box<dyn std::error::Error>> {
    let n: u32 = match std::env::args().nth(1) {
        Some(arg) => arg
            .parse()
            .map_err(|e| format!("element count `{arg}`: {e}"))?,
        None => 1 << 20,
    };
    let input: Vec<u32> = (0..n)
        .map(|i| i.wrapping_mul(2_654_435_761) % 1000)
        .collect();
    let expected: u64 = input.iter().map(|&v| u64::from(v)).sum();

    let device = Device::best()?;
    println!("device: {}", device.describe());
    let d_input = DeviceBuffer::from_slice(&device, &input)?;
    let mut d_total = DeviceBuffer::from_slice(&device, &[0u64])?;
    let block = reduce_kernels::BLOCK;
    let config = LaunchConfig::linear(n.div_ceil(block), block);
    let report = reduce_kernels::block_sum.launch(&device, config, n, &d_input, &mut d_total)?;
    println!("image: {report}");
    let total = d_total.to_vec()?[0];

    if total == expected {
        println!("reduce: sum of {n} elements = {total} OK");
        Ok(true)
    } else {
        eprintln!("reduce: got {total}, expected {expected}");
        Ok(false)
    }
}
