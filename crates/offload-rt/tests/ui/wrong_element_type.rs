use offload_rt::{Device, DeviceBuffer, LaunchConfig};
use offload_rt_test_kernels::saxpy;

fn main() -> offload_rt::Result<()> {
    let dev = Device::cpu();
    let x = DeviceBuffer::<f64>::zeroed(&dev, 16)?;
    let mut y = DeviceBuffer::<f32>::zeroed(&dev, 16)?;
    saxpy.launch(&dev, LaunchConfig::for_num_elems(16), 16, 2.0, &x, &mut y)?;
    Ok(())
}
