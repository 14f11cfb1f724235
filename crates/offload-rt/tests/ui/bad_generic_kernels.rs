use offload_rt::kernel::DisjointSlice;
use offload_rt::{Device, DeviceBuffer, LaunchConfig, kernel};

pub trait Scale: offload_rt::DeviceCopy {
    fn scale(self, by: Self) -> Self;
}

impl Scale for f32 {
    fn scale(self, by: f32) -> f32 {
        self * by
    }
}

#[kernel]
pub fn unlisted<T: Scale>(a: T, mut y: DisjointSlice<T>) {
    let _ = (a, y.for_thread());
}

#[kernel(U = f32)]
pub fn unknown_name<T: Scale>(a: T) {
    let _ = a;
}

#[kernel(T = f32, T = f32)]
pub fn listed_twice<T: Scale>(a: T) {
    let _ = a;
}

#[kernel(T = f32)]
pub fn const_missing<T: Scale, const N: usize>(a: [T; N]) {
    let _ = a;
}

#[kernel(T = f32)]
pub fn not_generic(a: f32) {
    let _ = a;
}

#[kernel(T = f32 | u8)]
pub fn bound_not_met<T: Scale>(a: T, mut y: DisjointSlice<T>) {
    if let Some(v) = y.for_thread() {
        *v = v.scale(a);
    }
}

#[kernel(T = f32)]
pub fn scale<T: Scale>(a: T, mut y: DisjointSlice<T>) {
    if let Some(v) = y.for_thread() {
        *v = v.scale(a);
    }
}

fn main() {
    let device = Device::cpu();
    let mut y = DeviceBuffer::<f64>::zeroed(&device, 4).unwrap();
    // f64 is not among the instantiations listed.
    let _ = scale::<f64>.launch(&device, LaunchConfig::linear(1, 4), 2.0, &mut y);
}
