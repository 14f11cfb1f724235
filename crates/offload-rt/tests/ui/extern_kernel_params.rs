use offload_rt::{Device, DeviceBuffer, LaunchConfig, extern_kernels};

#[derive(Clone, Copy)]
#[repr(C)]
pub struct NotDeviceCopy {
    pub a: u32,
}

extern_kernels! {
    fn takes_a_plain_struct(params: NotDeviceCopy, out: *mut u32);
    fn scale(x: *mut f32, a: f32, n: i32);
}

fn main() {
    let device = Device::cpu();
    let config = LaunchConfig::linear(1, 1);
    let x = DeviceBuffer::<f32>::zeroed(&device, 1).unwrap();
    // A shared buffer for a `*mut` parameter, a wrong scalar type.
    let _ = unsafe { scale.launch(&device, config, &x, 1.0f64, 3) };
}
