//! Kernels of the SAXPY example.
#![no_std]

use offload_rt::kernel;
use offload_rt::kernel::{DisjointSlice, grid_thread_rank};

/// `y[i] = a * x[i] + y[i]` for every element of `y`. `x` must be as long as `y`; the launch
/// checks it (`#[len(..)]`) before anything runs, and each thread writes only its own `y[i]`,
/// so the host's `launch` is safe.
#[kernel]
pub fn saxpy(a: f32, #[len(y.len())] x: &[f32], mut y: DisjointSlice<f32>) {
    let i = grid_thread_rank();
    if let (Some(yi), Some(xi)) = (y.for_thread(), x.get(i)) {
        *yi += a * xi;
    }
}
