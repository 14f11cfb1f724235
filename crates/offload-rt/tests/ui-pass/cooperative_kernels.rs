//! Cooperative kernels as the guide shows them: the `Grid` first, passed on to a helper that
//! synchronizes; the host's launch takes no argument for it, and the handle has `max_blocks`,
//! for a plain kernel and a generic one.
use offload_rt::kernel::{DisjointSlice, Grid};
use offload_rt::{Device, DeviceBuffer, DeviceCopy, LaunchConfig, kernel};

fn wait(grid: Grid) {
    grid.sync();
}

#[kernel]
pub fn phases(grid: Grid, x: &[f32], mut y: DisjointSlice<f32>) {
    let rank = grid.thread_rank() as usize;
    wait(grid);
    if let Some(yi) = y.for_thread() {
        *yi = x.get(rank % grid.threads() as usize).copied().unwrap_or(0.0);
    }
}

#[kernel(T = u32 | f64)]
pub fn generic_phases<T: DeviceCopy>(grid: Grid, x: &[T], mut y: DisjointSlice<T>) {
    grid.sync();
    if let Some((i, yi)) = y.for_thread_x()
        && let Some(&v) = x.get(i)
    {
        *yi = v;
    }
}

/// Compiled, not run: this crate has no device images.
#[allow(dead_code)]
fn launch(device: &Device) -> offload_rt::Result<()> {
    let blocks: u32 = phases.max_blocks(device, 128, 0)?;
    let x = DeviceBuffer::from_slice(device, &[1.0f32; 256])?;
    let mut y = DeviceBuffer::<f32>::zeroed(device, 256)?;
    phases.launch(device, LaunchConfig::linear(blocks.min(2), 128), &x, &mut y)?;
    let xs = DeviceBuffer::from_slice(device, &[1u32; 64])?;
    let mut ys = DeviceBuffer::<u32>::zeroed(device, 64)?;
    let _: u32 = generic_phases::<u32>.max_blocks(device, 64, 0)?;
    generic_phases::<u32>.launch(device, LaunchConfig::linear(1, 64), &xs, &mut ys)?;
    Ok(())
}

fn main() {}
