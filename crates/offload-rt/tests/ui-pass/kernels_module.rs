//! `#[kernels]` on a module of kernels and the functions with barriers they call: the host
//! handles are the module's, generic kernels included.
#[offload_rt::kernels]
mod blocks {
    use offload_rt::kernel::{DisjointSlice, kernel, sync_threads, thread_idx_x};
    use offload_rt::shared_array;

    /// The block's values in reverse order, through `tile`.
    fn mirrored(tile: *mut f32, v: f32) -> f32 {
        let t = thread_idx_x() as usize;
        // SAFETY: a word of `tile` per thread, blocks of up to 256.
        unsafe { *tile.add(t) = v };
        sync_threads();
        // SAFETY: as above.
        let m = unsafe { *tile.add(255 - t) };
        sync_threads();
        m
    }

    #[kernel]
    pub fn reverse(mut y: DisjointSlice<f32>) {
        let tile: *mut f32 = shared_array!(f32, 256);
        let v = y.for_thread().map_or(0.0, |v| *v);
        let m = mirrored(tile, v);
        if let Some(y) = y.for_thread() {
            *y = m;
        }
    }

    #[kernel(T = f32 | f64)]
    pub fn scale<T: Copy + core::ops::Mul<Output = T> + offload_rt::DeviceCopy>(
        a: T,
        mut y: DisjointSlice<T>,
    ) {
        if let Some(y) = y.for_thread() {
            *y = *y * a;
        }
    }
}

fn main() {
    let _launchable = blocks::reverse;
    let _generic = blocks::scale::<f32>;
}
