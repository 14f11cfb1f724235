//! Runs a few of the benchmark crate's kernels on the best device present and checks them
//! against the CPU: a smoke test of the kernels, not the benchmark (which measures their
//! build; see README.md).
//!
//! `cargo offload run --release --offload-arch host [--features unchecked]`

use std::process::ExitCode;

use kernel_crate_kernels as k;
use offload_rt::{Device, DeviceBuffer, LaunchConfig};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> ExitCode {
    match run() {
        Ok(0) => {
            println!("all kernels OK");
            ExitCode::SUCCESS
        }
        Ok(failed) => {
            eprintln!("{failed} kernel(s) wrong");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Compares `got` with `want` within a relative tolerance; prints the first mismatch.
fn check(name: &str, got: &[f32], want: &[f32]) -> bool {
    let bad = got
        .iter()
        .zip(want)
        .position(|(g, w)| (g - w).abs() > 1e-4 * w.abs().max(1.0));
    match bad {
        None if got.len() == want.len() => {
            println!("{name}: OK ({} elements)", got.len());
            true
        }
        None => {
            eprintln!("{name}: {} elements, expected {}", got.len(), want.len());
            false
        }
        Some(i) => {
            eprintln!("{name}: element {i} is {}, expected {}", got[i], want[i]);
            false
        }
    }
}

fn run() -> Result<usize> {
    let device = Device::best()?;
    println!("device: {}", device.describe());
    let n = 10_000usize;
    let xs: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.125 - 3.0).collect();
    let ys: Vec<f32> = (0..n).map(|i| (i % 13) as f32 - 6.0).collect();
    let x = DeviceBuffer::from_slice(&device, &xs)?;
    let mut failed = 0;

    // saxpy
    let mut y = DeviceBuffer::from_slice(&device, &ys)?;
    k::map::saxpy.launch(&device, LaunchConfig::for_num_elems(n), 2.0, &x, &mut y)?;
    let want: Vec<f32> = xs.iter().zip(&ys).map(|(x, y)| 2.0 * x + y).collect();
    failed += usize::from(!check("saxpy", &y.to_vec()?, &want));

    // scale_clamp
    let mut out = DeviceBuffer::<f32>::zeroed(&device, n)?;
    let config = LaunchConfig::for_num_elems(n);
    k::map::scale_clamp.launch(&device, config, 1.5, -2.0, 4.0, &x, &mut out)?;
    let want: Vec<f32> = xs.iter().map(|v| (v * 1.5).clamp(-2.0, 4.0)).collect();
    failed += usize::from(!check("scale_clamp", &out.to_vec()?, &want));

    // int_divide
    let a: Vec<u32> = (0..n as u32).map(|i| i * 7 + 3).collect();
    let b: Vec<u32> = (0..n as u32).map(|i| i % 5 + 1).collect();
    let (da, db) = (
        DeviceBuffer::from_slice(&device, &a)?,
        DeviceBuffer::from_slice(&device, &b)?,
    );
    let mut q = DeviceBuffer::<u32>::zeroed(&device, n)?;
    k::map::int_divide.launch(&device, LaunchConfig::for_num_elems(n), &da, &db, &mut q)?;
    let ok = q
        .to_vec()?
        .iter()
        .zip(a.iter().zip(&b))
        .all(|(q, (a, b))| *q == a / b);
    println!("int_divide: {}", if ok { "OK" } else { "wrong" });
    failed += usize::from(!ok);

    // reduce_sum and reduce_warp
    let want: f32 = xs.iter().sum();
    let blocks = n.div_ceil(k::BLOCK) as u32;
    let config = LaunchConfig::linear(blocks, k::BLOCK as u32);
    let mut sum = DeviceBuffer::<f32>::zeroed(&device, 1)?;
    // SAFETY: `sum` is one f32 the kernel adds to atomically.
    unsafe { k::reduce::reduce_sum.launch(&device, config, n as u32, &x, &mut sum)? };
    failed += usize::from(!check("reduce_sum", &sum.to_vec()?, &[want]));
    let mut sum = DeviceBuffer::<f32>::zeroed(&device, 1)?;
    // SAFETY: as above.
    unsafe { k::reduce::reduce_warp.launch(&device, config, n as u32, &x, &mut sum)? };
    failed += usize::from(!check("reduce_warp", &sum.to_vec()?, &[want]));

    // scan_hillis_steele: each block's inclusive scan
    let mut out = DeviceBuffer::<f32>::zeroed(&device, n)?;
    k::scan::scan_hillis_steele.launch(&device, config, n as u32, &x, &mut out)?;
    let want: Vec<f32> = xs
        .chunks(k::BLOCK)
        .flat_map(|c| {
            c.iter().scan(0.0, |s, v| {
                *s += v;
                Some(*s)
            })
        })
        .collect();
    failed += usize::from(!check("scan_hillis_steele", &out.to_vec()?, &want));

    // matmul_tiled against matmul_naive and the CPU
    let m = 70usize;
    let am: Vec<f32> = (0..m * m).map(|i| (i % 11) as f32 * 0.5 - 2.0).collect();
    let bm: Vec<f32> = (0..m * m).map(|i| (i % 7) as f32 * 0.25 - 1.0).collect();
    let (da, db) = (
        DeviceBuffer::from_slice(&device, &am)?,
        DeviceBuffer::from_slice(&device, &bm)?,
    );
    let tiles = m.div_ceil(k::TILE) as u32;
    let config = LaunchConfig {
        grid: (tiles, tiles, 1),
        block: (k::TILE as u32, k::TILE as u32, 1),
        shared_mem_bytes: 0,
        cluster: (1, 1, 1),
    };
    let mut want = vec![0.0f32; m * m];
    for r in 0..m {
        for c in 0..m {
            want[r * m + c] = (0..m).map(|t| am[r * m + t] * bm[t * m + c]).sum();
        }
    }
    let mut cm = DeviceBuffer::<f32>::zeroed(&device, m * m)?;
    k::dense::matmul_tiled.launch(&device, config, m as u32, &da, &db, &mut cm)?;
    failed += usize::from(!check("matmul_tiled", &cm.to_vec()?, &want));
    let mut cm = DeviceBuffer::<f32>::zeroed(&device, m * m)?;
    k::dense::matmul_naive.launch(&device, config, m as u32, &da, &db, &mut cm)?;
    failed += usize::from(!check("matmul_naive", &cm.to_vec()?, &want));

    // jacobi: the tiled sweep against the CPU's
    let (w, h) = (45usize, 37usize);
    let grid: Vec<f32> = (0..w * h).map(|i| ((i * 31) % 17) as f32).collect();
    let dg = DeviceBuffer::from_slice(&device, &grid)?;
    let mut out = DeviceBuffer::<f32>::zeroed(&device, w * h)?;
    let config = LaunchConfig {
        grid: (w.div_ceil(k::TILE) as u32, h.div_ceil(k::TILE) as u32, 1),
        block: (k::TILE as u32, k::TILE as u32, 1),
        shared_mem_bytes: 0,
        cluster: (1, 1, 1),
    };
    k::stencil::jacobi.launch(&device, config, w as u32, h as u32, &dg, &mut out)?;
    let mut want = grid.clone();
    for y in 1..h - 1 {
        for x in 1..w - 1 {
            let at = |x: usize, y: usize| grid[y * w + x];
            want[y * w + x] = 0.25 * (at(x - 1, y) + at(x + 1, y) + at(x, y - 1) + at(x, y + 1));
        }
    }
    failed += usize::from(!check("jacobi", &out.to_vec()?, &want));

    // softmax_rows: one block per row
    let (rows, cols) = (20usize, 500usize);
    let xs: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7) % 23) as f32 * 0.2)
        .collect();
    let dx = DeviceBuffer::from_slice(&device, &xs)?;
    let mut out = DeviceBuffer::<f32>::zeroed(&device, rows * cols)?;
    let config = LaunchConfig::linear(rows as u32, k::BLOCK as u32);
    // SAFETY: `out` is as long as `x`; each element is written by one thread.
    unsafe { k::dense::softmax_rows.launch(&device, config, cols as u32, &dx, &mut out)? };
    let want: Vec<f32> = xs
        .chunks(cols)
        .flat_map(|row| {
            let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let s: f32 = row.iter().map(|v| (v - m).exp()).sum();
            row.iter().map(move |v| (v - m).exp() / s)
        })
        .collect();
    failed += usize::from(!check("softmax_rows", &out.to_vec()?, &want));

    // histogram
    let data: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761) >> 20)
        .collect();
    let dd = DeviceBuffer::from_slice(&device, &data)?;
    let mut bins = DeviceBuffer::<u32>::zeroed(&device, k::BINS)?;
    // SAFETY: `bins` has BINS elements, which the kernel adds to atomically.
    unsafe {
        k::sparse::histogram.launch(
            &device,
            LaunchConfig::linear(8, 256),
            100,
            16,
            &dd,
            &mut bins,
        )?
    };
    let mut want = vec![0u32; k::BINS];
    for v in &data {
        let b = (v.wrapping_sub(100) / 16) as usize;
        if b < k::BINS {
            want[b] += 1;
        }
    }
    let ok = bins.to_vec()? == want;
    println!("histogram: {}", if ok { "OK" } else { "wrong" });
    failed += usize::from(!ok);

    Ok(failed)
}
