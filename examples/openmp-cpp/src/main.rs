//! SAXPY (`y = a*x + y`) in a C++ OpenMP `target` region, called from Rust: the region runs
//! through LLVM's offload runtime, on the host CPU as an offload device (libomptarget's host
//! plugin) or a GPU with an OpenMP device runtime. The result is checked on the host.
//!
//! `cargo offload run -p openmp-cpp [-- N]`; `OMP_TARGET_OFFLOAD=MANDATORY` makes the runtime
//! refuse to fall back to running the region on the host as the initial device.

use std::process::ExitCode;

unsafe extern "C" {
    /// `cpp/saxpy.cpp`: `y[i] = a * x[i] + y[i]` for `i < n`; 1 when the region ran on an
    /// offload device, 0 when on the host as the initial device.
    fn openmp_saxpy(a: f32, x: *const f32, y: *mut f32, n: usize) -> i32;
    /// OpenMP's own API (libomp).
    fn omp_get_num_devices() -> i32;
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let n: usize = match std::env::args().nth(1) {
        Some(arg) => arg
            .parse()
            .map_err(|e| format!("element count `{arg}`: {e}"))?,
        None => 1 << 20,
    };
    let a = 2.0_f32;
    // Small integers: every result is exact, whether or not the compiler fuses the multiply
    // and the add.
    let x: Vec<f32> = (0..n).map(|i| (i % 4096) as f32).collect();
    let mut y: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    let expected: Vec<f32> = x.iter().zip(&y).map(|(x, y)| a * x + y).collect();

    // SAFETY: no arguments; the runtime is initialized by the library's start-up constructor.
    let devices = unsafe { omp_get_num_devices() };
    println!("OpenMP offload devices: {devices}");
    // SAFETY: `x` and `y` hold `n` elements each, `y` is not aliased, and the function reads
    // `x` and writes `y` only below `n`.
    let on_device = unsafe { openmp_saxpy(a, x.as_ptr(), y.as_mut_ptr(), n) };

    let wrong: Vec<usize> = (0..n).filter(|&i| y[i] != expected[i]).collect();
    if let Some(&first) = wrong.first() {
        return Err(format!(
            "{} of {n} results are wrong; the first at {first}: {} instead of {}",
            wrong.len(),
            y[first],
            expected[first]
        ));
    }
    if n > 0 && on_device != 1 {
        return Err(
            "the target region ran on the host as the initial device, not on an offload device"
                .to_owned(),
        );
    }
    println!("target region: ran on an offload device");
    println!("saxpy: {n} elements OK");
    Ok(())
}
