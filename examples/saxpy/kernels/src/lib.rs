//! Kernels of the SAXPY example.
#![no_std]

use offload_rt::kernel;
use offload_rt::kernel::DisjointSlice;

/// `y[i] = a * x[i] + y[i]` for every element of `y`. `x` must be as long as `y`; the launch
/// checks it (`#[len(..)]`) before anything runs, and each thread writes only its own `y[i]`,
/// so the host's `launch` is safe.
#[kernel]
pub fn saxpy(a: f32, #[len(y.len())] x: &[f32], mut y: DisjointSlice<f32>) {
    if let Some((i, yi)) = y.for_thread_x()
        && let Some(xi) = x.get(i)
    {
        *yi += a * xi;
    }
}
