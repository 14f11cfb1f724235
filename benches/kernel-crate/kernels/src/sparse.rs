//! Irregular accesses: gathers, scatters, a histogram, a sparse matrix-vector product and a
//! table lookup.

use core::sync::atomic::{AtomicU32, Ordering};

use offload_rt::kernel::{
    DisjointSlice, block_stride_x, global_idx_x, grid_stride_x, math, sync_threads,
};
use offload_rt::{kernel, shared_array};

use crate::{BINS, atomic_add_f32};

/// `out[i] = src[idx[i]]`.
#[kernel]
pub fn gather(src: &[f32], #[len(out.len())] idx: &[u32], mut out: DisjointSlice<f32>) {
    if let Some((i, o)) = out.for_thread_x() {
        *o = at!(src, at!(idx, i) as usize);
    }
}

/// `out[idx[i]] += vals[i]` atomically, `idx` below `n`, `out`'s length.
#[kernel]
pub fn scatter_add(#[len(vals.len())] idx: &[u32], vals: &[f32], n: u32, #[len(n)] out: *mut f32) {
    let i = global_idx_x();
    if i < vals.len() {
        let j = at!(idx, i) as usize;
        let v = at!(vals, i);
        check!(j < n as usize);
        // SAFETY: `j < n`, `out`'s length; `out` is accessed only atomically.
        unsafe { atomic_add_f32(out.add(j), v) };
    }
}

/// Counts the values of `data` into [`BINS`] bins of `width` from `lo` (values outside are
/// not counted): per-block counts with atomics on shared memory, then one global atomic
/// per non-empty bin. A grid-stride loop; `width > 0`.
#[kernel]
pub fn histogram(lo: u32, width: u32, data: &[u32], bins: *mut u32) {
    let local: *mut u32 = shared_array!(u32, BINS);
    for b in block_stride_x(BINS) {
        // SAFETY: `b < BINS`.
        unsafe { *local.add(b) = 0 };
    }
    sync_threads();
    for i in grid_stride_x(data.len()) {
        let b = div!(at!(data, i).wrapping_sub(lo), width) as usize;
        if b < BINS {
            // SAFETY: `b < BINS`; the bins are accessed only atomically until the barrier.
            unsafe { AtomicU32::from_ptr(local.add(b)).fetch_add(1, Ordering::Relaxed) };
        }
    }
    sync_threads();
    for b in block_stride_x(BINS) {
        // SAFETY: `b < BINS`; `bins` has BINS elements, accessed only atomically.
        unsafe {
            let count = *local.add(b);
            if count != 0 {
                AtomicU32::from_ptr(bins.add(b)).fetch_add(count, Ordering::Relaxed);
            }
        }
    }
}

/// `y = A x` for a CSR matrix: row `r`'s entries are `vals[row_ptr[r]..row_ptr[r + 1]]` in
/// the columns `cols[..]` of the same range. One thread per row.
#[kernel]
pub fn spmv_csr(row_ptr: &[u32], cols: &[u32], vals: &[f32], x: &[f32], mut y: DisjointSlice<f32>) {
    if let Some((r, o)) = y.for_thread_x() {
        let (start, end) = (at!(row_ptr, r) as usize, at!(row_ptr, r + 1) as usize);
        let mut acc = 0.0;
        for (&c, &v) in sub!(cols, start..end).iter().zip(sub!(vals, start..end)) {
            acc = math::fma(v, at!(x, c as usize), acc);
        }
        *o = acc;
    }
}

/// `out[i] = lut[codes[i]]`, a decoding table of 256 entries or more.
#[kernel]
pub fn lut_decode(lut: &[f32], #[len(out.len())] codes: &[u8], mut out: DisjointSlice<f32>) {
    if let Some((i, o)) = out.for_thread_x() {
        *o = at!(lut, usize::from(at!(codes, i)));
    }
}
