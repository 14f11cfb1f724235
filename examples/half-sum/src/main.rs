//! Half-precision data summed in `f32` on the best device present, checked against the CPU:
//! `f16` vectors scaled by an `f16` parameter, their dot product, and the sum of a `bf16`
//! vector. Each block adds its values in `f32` by a fixed tree, so every device gives the same
//! bits; the host adds the blocks' sums.
//!
//! `cargo offload run -p half-sum [--release] [-- N]`; `OFFLOAD_DEVICE=cpu|cuda:0|hip:0` picks
//! the device.

use std::process::ExitCode;

use half_sum_kernels::{BLOCK, dot_f16, scale_f16, sum_bf16};
use offload_rt::kernel::half::{bf16, f16};
use offload_rt::{Device, DeviceBuffer, LaunchConfig};

fn main() -> ExitCode {
    match run(std::env::args().nth(1).as_deref()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A value in [-4, 4) on a grid of 1/256, exact in `f16` and `bf16`.
fn value(i: u32, salt: u32) -> f32 {
    let v = (i.wrapping_mul(2_654_435_761) ^ salt) % 2048;
    (v as f32 - 1024.0) / 256.0
}

/// What the kernels' per-block trees compute from the block's values.
fn tree_sums(values: &[f32]) -> Vec<f32> {
    values
        .chunks(BLOCK as usize)
        .map(|chunk| {
            let mut tile = chunk.to_vec();
            tile.resize(BLOCK as usize, 0.0);
            let mut stride = tile.len() / 2;
            while stride > 0 {
                for t in 0..stride {
                    tile[t] += tile[t + stride];
                }
                stride /= 2;
            }
            tile[0]
        })
        .collect()
}

/// Checks a kernel's block sums against the host's: the same bits, and a total within
/// rounding of the exact sum.
fn check(what: &str, n: u32, got: &[f32], terms: &[f32]) -> bool {
    let want = tree_sums(terms);
    let total: f64 = got.iter().map(|&s| f64::from(s)).sum();
    let exact: f64 = terms.iter().map(|&t| f64::from(t)).sum();
    let magnitude: f64 = terms.iter().map(|&t| f64::from(t).abs()).sum();
    let same = got.len() == want.len()
        && got
            .iter()
            .zip(&want)
            .all(|(g, w)| g.to_bits() == w.to_bits());
    let close = (total - exact).abs() <= 1e-6 * magnitude.max(1.0);
    if same && close {
        println!("half-sum ({what}): {n} elements = {total} OK");
    } else {
        eprintln!(
            "half-sum ({what}): got {total}, expected {exact} (block sums {})",
            if same { "equal" } else { "differ" }
        );
    }
    same && close
}

fn run(arg: Option<&str>) -> Result<bool, Box<dyn std::error::Error>> {
    let n: u32 = match arg {
        Some(a) => a.parse().map_err(|e| format!("element count `{a}`: {e}"))?,
        None => 1 << 20,
    };
    let a = f16::from_f32(0.75);
    let x: Vec<f16> = (0..n).map(|i| f16::from_f32(value(i, 0))).collect();
    let y: Vec<f16> = (0..n)
        .map(|i| f16::from_f32(value(i, 0x5bd1_e995)))
        .collect();
    let z: Vec<bf16> = (0..n)
        .map(|i| bf16::from_f32(value(i, 0x27d4_eb2f)))
        .collect();

    let device = Device::best()?;
    println!("device: {}", device.describe());
    let mut d_x = DeviceBuffer::from_slice(&device, &x)?;
    let d_y = DeviceBuffer::from_slice(&device, &y)?;
    let d_z = DeviceBuffer::from_slice(&device, &z)?;
    let blocks = n.div_ceil(BLOCK);
    let config = LaunchConfig::linear(blocks, BLOCK);
    let mut ok = true;

    let report = scale_f16.launch(&device, LaunchConfig::for_num_elems(n), a, &mut d_x)?;
    println!("image: {report}");
    let scaled = d_x.to_vec()?;
    let x: Vec<f16> = x
        .iter()
        .map(|v| f16::from_f32(a.to_f32() * v.to_f32()))
        .collect();
    if scaled
        .iter()
        .zip(&x)
        .all(|(g, w)| g.to_bits() == w.to_bits())
    {
        println!("half-sum (f16 scale by {a}): {n} elements OK");
    } else {
        eprintln!("half-sum (f16 scale by {a}): elements differ from the CPU's rounding");
        ok = false;
    }

    let mut d_partial = DeviceBuffer::<f32>::zeroed(&device, blocks as usize)?;
    dot_f16.launch(&device, config, &d_x, &d_y, &mut d_partial)?;
    let products: Vec<f32> = x
        .iter()
        .zip(&y)
        .map(|(a, b)| a.to_f32() * b.to_f32())
        .collect();
    ok &= check("f16 dot product", n, &d_partial.to_vec()?, &products);

    sum_bf16.launch(&device, config, &d_z, &mut d_partial)?;
    let terms: Vec<f32> = z.iter().map(|v| v.to_f32()).collect();
    ok &= check("bf16 sum", n, &d_partial.to_vec()?, &terms);
    Ok(ok)
}
