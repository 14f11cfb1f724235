use offload_rt::kernel;
use offload_rt::kernel::DisjointSlice;

#[kernel(max_threads = 0)]
pub fn zero_threads(mut y: DisjointSlice<f32>) {
    let _ = y.for_thread();
}

#[kernel(max_threads = 2048)]
pub fn too_many_threads(mut y: DisjointSlice<f32>) {
    let _ = y.for_thread();
}

#[kernel(max_threads = 256, max_threads = 128)]
pub fn bound_twice(mut y: DisjointSlice<f32>) {
    let _ = y.for_thread();
}

#[kernel(max_threads = N)]
pub fn not_a_literal(mut y: DisjointSlice<f32>) {
    let _ = y.for_thread();
}

fn main() {}
