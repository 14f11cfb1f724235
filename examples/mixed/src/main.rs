//! Rust, CUDA and HIP kernels launched from one `main`.
//!
//! - `polynomial` is a Rust kernel that calls `foreign_poly`, written in CUDA/HIP
//!   (`cuda/poly.cu`, `hip/poly.hip`), which calls `rust_clamp` back: one device link. It runs
//!   on every device, the CPU included.
//! - `scale` is a kernel written in CUDA (`cuda/scale.cu`) and in HIP (`hip/scale.hip`), one
//!   module `scale` with NVIDIA and AMD images, launched through the handle `extern_kernels!`
//!   declares: it needs an NVIDIA or AMD GPU.
//!
//! `cargo offload run -p mixed`; `OFFLOAD_DEVICE=cpu|cuda:0|hip:0` picks the device.

use std::process::ExitCode;

use offload_rt::{Device, DeviceBuffer, DeviceKind, LaunchConfig};

offload_rt::extern_kernels! {
    /// `extern "C" __global__ void scale(float *x, float a, int n)`, found by its symbol in the
    /// `scale` images; its parameter sizes are checked against theirs when first launched.
    fn scale(#[len(n)] x: *mut f32, a: f32, n: i32);
}

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
    let n = 1000_usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.05 - 10.0).collect();
    let device = Device::best()?;
    println!("device: {}", device.describe());

    let dx = DeviceBuffer::from_slice(&device, &x)?;
    let mut dy = DeviceBuffer::<f32>::zeroed(&device, n)?;
    let report = mixed_kernels::polynomial.launch(
        &device,
        LaunchConfig::for_num_elems(n as u32),
        &dx,
        &mut dy,
    )?;
    println!("image: polynomial (Rust calling CUDA/HIP calling Rust): {report}");
    let poly = |v: f32| (0.5 * v * v + 3.0_f32).clamp(0.0, 100.0);
    let mut ok = check("polynomial", &dy.to_vec()?, x.iter().map(|&v| poly(v)));

    match device.kind() {
        DeviceKind::Cuda | DeviceKind::Hip => {
            let mut buf = DeviceBuffer::from_slice(&device, &x)?;
            // SAFETY: `scale` writes `x[i]` for `i < n` only, and `buf` holds the `n` elements
            // (`#[len(n)]` checks it); `buf` is not touched until the launch is synchronized
            // by `to_vec`.
            let report = unsafe {
                scale.launch(
                    &device,
                    LaunchConfig::for_num_elems(n as u32),
                    &mut buf,
                    3.0,
                    n as i32,
                )?
            };
            // `scale` runs on GPUs only, so what it says goes to stderr: stdout holds what
            // every device prints alike.
            eprintln!("image: scale (CUDA/HIP): {report}");
            let wrong = wrong(&buf.to_vec()?, x.iter().map(|&v| v * 3.0));
            eprintln!("scale: {n} elements, {wrong} wrong");
            ok &= wrong == 0;
        }
        _ => {
            eprintln!("scale (CUDA/HIP): needs an NVIDIA or AMD GPU; not run on the CPU device");
        }
    }
    Ok(ok)
}

fn check(name: &str, got: &[f32], want: impl Iterator<Item = f32>) -> bool {
    let wrong = wrong(got, want);
    if wrong == 0 {
        println!("{name}: {} elements OK", got.len());
    } else {
        eprintln!("{name}: {wrong} of {} elements wrong", got.len());
    }
    wrong == 0
}

fn wrong(got: &[f32], want: impl Iterator<Item = f32>) -> usize {
    got.iter()
        .zip(want)
        .filter(|(g, w)| (*g - w).abs() > w.abs() * 1e-6 + 1e-6)
        .count()
}
