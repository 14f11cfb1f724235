//! SAXPY (`y = a*x + y`) on the best device present, checked against the CPU.
//!
//! `cargo offload run -p saxpy [--release] [-- N]`; `OFFLOAD_DEVICE=cpu|cuda:0|hip:0` picks the device.

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
    let a = 2.5_f32;
    let x: Vec<f32> = (0..n).map(|i| (i % 1024) as f32 * 0.25).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();

    let device = Device::best()?;
    println!("device: {}", device.describe());
    let dx = DeviceBuffer::from_slice(&device, &x)?;
    let mut dy = DeviceBuffer::from_slice(&device, &y)?;
    let report =
        saxpy_kernels::saxpy.launch(&device, LaunchConfig::for_num_elems(n), a, &dx, &mut dy)?;
    println!("image: {report}");
    let result = dy.to_vec()?;

    let mut mismatches = 0usize;
    for (i, (&got, (&xi, &yi))) in result.iter().zip(x.iter().zip(&y)).enumerate() {
        let want = a * xi + yi;
        // A GPU may fuse the multiply-add; one rounding step of difference is allowed.
        if (got - want).abs() > want.abs() * 1e-6 + 1e-6 {
            if mismatches < 5 {
                eprintln!("mismatch at {i}: got {got}, expected {want}");
            }
            mismatches += 1;
        }
    }
    if mismatches == 0 {
        println!("saxpy: {n} elements OK (a = {a})");
        Ok(true)
    } else {
        eprintln!("saxpy: {mismatches} of {n} elements wrong");
        Ok(false)
    }
}
