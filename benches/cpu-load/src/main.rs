//! The CPU device under load: `THREADS` threads (default 16) share one device, each with its
//! own buffers, each doing `LAUNCHES` launches (default 2,000) of SAXPY and checking every
//! result. Resident memory (`/proc/self/statm`) is read when every thread has done its first
//! thousand launches and again at the end: it must stay flat.
//!
//! `cargo offload run --release -p cpu-load [-- THREADS LAUNCHES]`

use std::sync::{Arc, Barrier};

use offload_rt::{Device, DeviceBuffer, LaunchConfig};

type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Resident memory in KiB.
fn resident_kib() -> BenchResult<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .ok_or("/proc/self/statm has no resident field")?
        .parse()?;
    Ok(pages * 4)
}

fn worker(device: Device, id: u32, launches: u32, halfway: Arc<Barrier>) -> BenchResult<()> {
    let n = 4096 + id * 17;
    let x: Vec<f32> = (0..n).map(|i| ((i + id) % 13) as f32).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 5) as f32).collect();
    let dx = DeviceBuffer::from_slice(&device, &x)?;
    let mut dy = DeviceBuffer::from_slice(&device, &y)?;
    let config = LaunchConfig::for_num_elems(n);
    for launch in 1..=launches {
        // Alternating +1 and -1: y returns to its start after every second launch.
        let a = if launch % 2 == 1 { 1.0 } else { -1.0 };
        saxpy_kernels::saxpy.launch(&device, config, a, &dx, &mut dy)?;
        let got = dy.to_vec()?;
        let want = |i: usize| if launch % 2 == 1 { y[i] + x[i] } else { y[i] };
        if let Some(i) = (0..n as usize).find(|&i| got[i] != want(i)) {
            return Err(format!(
                "thread {id}, launch {launch}: [{i}] = {}, expected {}",
                got[i],
                want(i)
            )
            .into());
        }
        if launch == launches / 2 {
            halfway.wait();
        }
    }
    Ok(())
}

fn main() -> BenchResult<()> {
    let mut args = std::env::args().skip(1);
    let threads: u32 = args.next().map_or(Ok(16), |a| a.parse())?;
    let launches: u32 = args.next().map_or(Ok(2000), |a| a.parse())?;
    let device = Device::cpu();
    println!("device: {}", device.describe());
    let start_kib = resident_kib()?;
    let halfway = Arc::new(Barrier::new(threads as usize + 1));
    let handles: Vec<_> = (0..threads)
        .map(|id| {
            let (device, halfway) = (device.clone(), Arc::clone(&halfway));
            std::thread::spawn(move || worker(device, id, launches, halfway))
        })
        .collect();
    halfway.wait();
    let half_kib = resident_kib()?;
    for h in handles {
        h.join().map_err(|_| "a worker thread panicked")??;
    }
    let end_kib = resident_kib()?;
    println!(
        "{threads} threads x {launches} launches, every result checked: resident {start_kib} KiB at start, {half_kib} KiB after {} launches each, {end_kib} KiB at the end ({:+} KiB over the second half)",
        launches / 2,
        end_kib as i64 - half_kib as i64
    );
    Ok(())
}
