//! Generic kernels as the guide shows them: type and const parameters with their
//! instantiations listed, named lifetimes beside them, and `shared_array!` sized and typed by
//! the parameters, a tuple of the type parameter, and a generic helper's
//! `generic_shared_array!`, and a launch bound beside the instantiations.
use offload_rt::kernel::{DisjointSlice, sync_threads, thread_idx_x};
use offload_rt::{
    Device, DeviceBuffer, DeviceCopy, LaunchConfig, generic_shared_array, kernel, shared_array,
};

#[kernel(T = u32 | f64)]
pub fn copy<'a, T: DeviceCopy>(x: &'a [T], mut y: DisjointSlice<'a, T>) {
    if let Some((i, yi)) = y.for_thread_x()
        && let Some(&v) = x.get(i)
    {
        *yi = v;
    }
}

#[kernel(T = f32 | f64, BLOCK = 32 | 64, max_threads = 64)]
pub fn staged<T: DeviceCopy + Default, const BLOCK: usize>(
    #[len(BLOCK)] x: &[T],
    mut y: DisjointSlice<T>,
) {
    let tile = shared_array!(T, BLOCK);
    let t = thread_idx_x() as usize % BLOCK;
    // SAFETY: `t < BLOCK`.
    unsafe { *tile.add(t) = x.get(t).copied().unwrap_or_default() };
    sync_threads();
    if let Some(v) = y.for_thread() {
        // SAFETY: as above.
        *v = unsafe { *tile.add(BLOCK - 1 - t) };
    }
}

#[kernel(T = f32 | f64)]
pub fn clamp_into<T: DeviceCopy + PartialOrd>(bounds: (T, T), x: &[T], mut y: DisjointSlice<T>) {
    let (low, high) = bounds;
    if let Some((i, yi)) = y.for_thread_x()
        && let Some(&v) = x.get(i)
    {
        *yi = if v < low { low } else if v > high { high } else { v };
    }
}

/// The block's sum of `v`, in a tile typed and sized by the helper's parameters.
fn block_sum<T: Copy + core::ops::Add<Output = T>, const BLOCK: usize>(v: T) -> T {
    let tile: *mut T = generic_shared_array!(T, BLOCK);
    let t = thread_idx_x() as usize % BLOCK;
    // SAFETY: `t < BLOCK`; the block's threads write their own elements, then read.
    unsafe {
        *tile.add(t) = v;
        sync_threads();
        let mut sum = *tile;
        for i in 1..BLOCK {
            sum = sum + *tile.add(i);
        }
        sum
    }
}

#[kernel(T = u32 | f32)]
pub fn sums<T: DeviceCopy + Default + core::ops::Add<Output = T>>(x: &[T], mut y: DisjointSlice<T>) {
    let v = block_sum::<T, 64>(x.first().copied().unwrap_or_default());
    if let Some(out) = y.for_thread() {
        *out = v;
    }
}

fn main() -> offload_rt::Result<()> {
    let device = Device::cpu();
    let x = DeviceBuffer::<f64>::zeroed(&device, 64)?;
    let mut y = DeviceBuffer::<f64>::zeroed(&device, 64)?;
    let config = LaunchConfig::linear(1, 64);
    let _ = copy::<f64>.launch(&device, config, &x, &mut y);
    let _ = staged::<f64, 64>.launch(&device, config, &x, &mut y);
    // Inferred from the arguments where one instantiation fits.
    let _ = staged::<_, 32>.launch(&device, config, &x, &mut y);
    let _ = clamp_into::<f64>.launch(&device, config, (0.0, 1.0), &x, &mut y);
    Ok(())
}
