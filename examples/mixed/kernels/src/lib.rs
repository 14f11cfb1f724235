//! The Rust kernel of `examples/mixed`, device-linked with `cuda/poly.cu` (NVIDIA, and the
//! CPU device) and `hip/poly.hip` (AMD).
#![no_std]

use offload_rt::kernel;
use offload_rt::kernel::{DisjointSlice, grid_thread_rank};

unsafe extern "C" {
    /// Written in CUDA/HIP: `A*v*v + B`, clamped with [`rust_clamp`].
    safe fn foreign_poly(v: f32) -> f32;
}

/// Called by the CUDA/HIP side.
#[unsafe(no_mangle)]
pub extern "C" fn rust_clamp(v: f32, lo: f32, hi: f32) -> f32 {
    v.clamp(lo, hi)
}

/// `y[i] = foreign_poly(x[i])` for every element of `y`; `x` is as long as `y`.
#[kernel]
pub fn polynomial(#[len(y.len())] x: &[f32], mut y: DisjointSlice<f32>) {
    let i = grid_thread_rank();
    if let (Some(yi), Some(xi)) = (y.for_thread(), x.get(i)) {
        *yi = foreign_poly(*xi);
    }
}
