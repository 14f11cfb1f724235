use offload_rt::{Device, DeviceBuffer, LaunchConfig, kernel};

/// A kernel with a raw pointer: its launch is `unsafe`.
#[kernel]
pub fn raw(out: *mut u32) {
    let _ = out;
}

fn main() {
    let device = Device::cpu();
    let mut out = DeviceBuffer::<u32>::zeroed(&device, 1).unwrap();
    let _ = raw.launch(&device, LaunchConfig::linear(1, 1), &mut out);
}
