//! Kernels of the SAXPY example.
#![no_std]

use offload_rt::device::global_idx_x;
use offload_rt::kernel;

/// `y[i] = a * x[i] + y[i]` for `i < n`.
#[kernel]
pub fn saxpy(n: u32, a: f32, x: *const f32, y: *mut f32) {
    let i = global_idx_x();
    if i < n as usize {
        // SAFETY: the host passes `x` and `y` with at least `n` elements each.
        unsafe { *y.add(i) = a * *x.add(i) + *y.add(i) };
    }
}
