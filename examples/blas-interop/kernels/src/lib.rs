//! The kernel of `blas-interop`: what follows a BLAS call on its result.
#![no_std]

use offload_rt::kernel;
use offload_rt::kernel::DisjointSlice;

/// `c[i] = max(c[i] + bias, 0)`: a layer's bias and ReLU after its matrix product.
#[kernel]
pub fn bias_relu(bias: f32, mut c: DisjointSlice<f32>) {
    if let Some((_, ci)) = c.for_thread_x() {
        let v = *ci + bias;
        *ci = if v > 0.0 { v } else { 0.0 };
    }
}
