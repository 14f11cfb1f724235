use offload_rt::{Device, LaunchConfig, extern_kernels};

extern_kernels! {
    /// Scalars only, yet foreign code Rust does not check: its launch is `unsafe` too.
    pub fn scalars_only(a: f32, n: i32);
}

fn main() {
    let device = Device::cpu();
    let _ = scalars_only.launch(&device, LaunchConfig::linear(1, 1), 1.0, 2);
}
