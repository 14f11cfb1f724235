use offload_rt::kernel::DisjointSlice;
use offload_rt::{Device, DeviceBuffer, LaunchConfig, kernel};

#[kernel]
pub fn fill(mut out: DisjointSlice<u32>) {
    if let Some(v) = out.for_thread() {
        *v = 1;
    }
}

fn main() {
    let device = Device::cpu();
    let out = DeviceBuffer::<u32>::zeroed(&device, 1).unwrap();
    // A `DisjointSlice` is written: it needs the buffer borrowed exclusively.
    let _ = fill.launch(&device, LaunchConfig::linear(1, 1), &out);
}
