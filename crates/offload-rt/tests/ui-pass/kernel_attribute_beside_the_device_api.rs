//! The attribute comes with the device API from the `kernel` module, which
//! `use offload_rt::kernel::{self, …}` alone would leave out of scope.
use offload_rt::kernel::{self, DisjointSlice, kernel};

#[kernel]
pub fn scale(a: f32, mut y: DisjointSlice<f32>) {
    if let Some((_, yi)) = y.for_thread_x() {
        *yi *= a * kernel::block_dim_x() as f32;
    }
}

fn main() {
    let _launchable = scale;
}
