use offload_rt::{Device, DeviceBuffer, LaunchConfig};
use offload_rt_test_kernels::saxpy;

fn main() -> offload_rt::Result<()> {
    let dev = Device::cpu();
    let x = DeviceBuffer::<f32>::zeroed(&dev, 16)?;
    let y = DeviceBuffer::<f32>::zeroed(&dev, 16)?;
    // `y` is `*mut f32`: it needs `&mut DeviceBuffer<f32>`.
    saxpy.launch(&dev, LaunchConfig::for_num_elems(16), 16, 2.0, &x, &y)?;
    Ok(())
}
