//! Empty kernels of the launch-overhead benchmark: the same two buffers passed as slices (a
//! safe launch) and as raw pointers (an `unsafe` one).
#![no_std]

use offload_rt::kernel;
use offload_rt::kernel::DisjointSlice;

/// Does nothing with its slices.
#[kernel]
pub fn empty_slices(_x: &[f32], _y: DisjointSlice<f32>) {}

/// Does nothing with its pointers.
#[kernel]
pub fn empty_pointers(_x: *const f32, _y: *mut f32) {}
