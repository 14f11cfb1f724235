//! Elementwise kernels: one output element per thread (or per iteration of a grid-stride
//! loop), read from slices of the same or related length.

use offload_rt::kernel;
use offload_rt::kernel::{DisjointSlice, grid_stride_x, math};

/// `y[i] += a * x[i]`.
#[kernel]
pub fn saxpy(a: f32, #[len(y.len())] x: &[f32], mut y: DisjointSlice<f32>) {
    if let Some((i, yi)) = y.for_thread_x() {
        *yi += a * at!(x, i);
    }
}

/// `out[i] = a * x[i] + b * y[i]`.
#[kernel]
pub fn axpby(
    a: f32,
    b: f32,
    #[len(out.len())] x: &[f32],
    #[len(out.len())] y: &[f32],
    mut out: DisjointSlice<f32>,
) {
    if let Some((i, o)) = out.for_thread_x() {
        *o = a * at!(x, i) + b * at!(y, i);
    }
}

/// `out[i] = clamp(x[i] * scale, lo, hi)`, `lo <= hi`.
#[kernel]
pub fn scale_clamp(
    scale: f32,
    lo: f32,
    hi: f32,
    #[len(out.len())] x: &[f32],
    mut out: DisjointSlice<f32>,
) {
    if let Some((i, o)) = out.for_thread_x() {
        *o = clamp!(at!(x, i) * scale, lo, hi);
    }
}

/// `data[i] = max(data[i] + bias[i % channels], 0)` for `i < n`, a grid-stride loop over an
/// `n`-element buffer of interleaved channels; `channels > 0`, `bias` has `channels`
/// elements.
#[kernel]
pub fn bias_relu(channels: u32, bias: &[f32], n: u32, #[len(n)] data: *mut f32) {
    for i in grid_stride_x(n as usize) {
        let b = at!(bias, rem!(i, channels as usize));
        // SAFETY: `i < n`, the buffer's length; each index is one thread's.
        unsafe {
            let p = data.add(i);
            *p = math::max(*p + b, 0.0);
        }
    }
}

/// `q[i] = a[i] / b[i]`, the divisors non-zero.
#[kernel]
pub fn int_divide(#[len(q.len())] a: &[u32], #[len(q.len())] b: &[u32], mut q: DisjointSlice<u32>) {
    if let Some((i, o)) = q.for_thread_x() {
        *o = div!(at!(a, i), at!(b, i));
    }
}

/// `out[i] = hash(x[i]) % buckets`, `buckets > 0`.
#[kernel]
pub fn bucketize(buckets: u32, #[len(out.len())] x: &[u32], mut out: DisjointSlice<u32>) {
    if let Some((i, o)) = out.for_thread_x() {
        let h = at!(x, i).wrapping_mul(0x9e37_79b9).rotate_left(13) ^ 0x85eb_ca6b;
        *o = rem!(h, buckets);
    }
}

/// `out[i] = p(x[i])`, the polynomial of the coefficients `coef` (constant term first, at
/// least one) by Horner's rule.
#[kernel]
pub fn horner(coef: &[f32], #[len(out.len())] x: &[f32], mut out: DisjointSlice<f32>) {
    if let Some((i, o)) = out.for_thread_x() {
        let v = at!(x, i);
        let top = *unwrap!(coef.last());
        *o = coef
            .iter()
            .rev()
            .skip(1)
            .fold(top, |acc, &c| math::fma(acc, v, c));
    }
}

/// `out[i] = 1 / (1 + exp(-x[i]))`.
#[kernel]
pub fn sigmoid(#[len(out.len())] x: &[f32], mut out: DisjointSlice<f32>) {
    if let Some((i, o)) = out.for_thread_x() {
        *o = 1.0 / (1.0 + math::exp(-at!(x, i)));
    }
}

/// `out[i] = gelu(x[i])`, the tanh approximation.
#[kernel]
pub fn gelu(#[len(out.len())] x: &[f32], mut out: DisjointSlice<f32>) {
    if let Some((i, o)) = out.for_thread_x() {
        let v = at!(x, i);
        let u = 0.797_884_6 * (v + 0.044_715 * v * v * v);
        // tanh(u) = 1 - 2 / (exp(2u) + 1)
        let t = 1.0 - 2.0 / (math::exp(2.0 * u) + 1.0);
        *o = 0.5 * v * (1.0 + t);
    }
}

/// `out[i] = a[i] * b[i]` for complex numbers stored as interleaved (re, im) pairs.
#[kernel]
pub fn complex_mul(a: &[f32], b: &[f32], mut out: DisjointSlice<[f32; 2]>) {
    if let Some((i, o)) = out.for_thread_x() {
        let (ar, ai) = (at!(a, 2 * i), at!(a, 2 * i + 1));
        let (br, bi) = (at!(b, 2 * i), at!(b, 2 * i + 1));
        *o = [ar * br - ai * bi, ar * bi + ai * br];
    }
}

/// `out[i] = a[i] + t[i] * (b[i] - a[i])`.
#[kernel]
pub fn lerp(
    #[len(out.len())] t: &[f32],
    #[len(out.len())] a: &[f32],
    #[len(out.len())] b: &[f32],
    mut out: DisjointSlice<f32>,
) {
    if let Some((i, o)) = out.for_thread_x() {
        let (t, a) = (at!(t, i), at!(a, i));
        *o = math::fma(t, at!(b, i) - a, a);
    }
}

/// `out[i] = round(clamp(x[i] * scale, lo, hi))` as an integer, `lo <= hi`.
#[kernel]
pub fn quantize(
    scale: f32,
    lo: f32,
    hi: f32,
    #[len(out.len())] x: &[f32],
    mut out: DisjointSlice<i32>,
) {
    if let Some((i, o)) = out.for_thread_x() {
        let v = clamp!(at!(x, i) * scale, lo, hi);
        *o = math::floor(v + 0.5) as i32;
    }
}

/// `out[i] = q[i] * scales[i / group]`: one scale per `group` elements, `group > 0`.
#[kernel]
pub fn dequantize(
    group: u32,
    #[len(out.len())] q: &[i32],
    scales: &[f32],
    mut out: DisjointSlice<f32>,
) {
    if let Some((i, o)) = out.for_thread_x() {
        *o = at!(q, i) as f32 * at!(scales, div!(i, group as usize));
    }
}

/// `out[i] = if mask[i] { a[i] } else { b[i] }`.
#[kernel]
pub fn select(
    #[len(out.len())] mask: &[bool],
    #[len(out.len())] a: &[f32],
    #[len(out.len())] b: &[f32],
    mut out: DisjointSlice<f32>,
) {
    if let Some((i, o)) = out.for_thread_x() {
        *o = if at!(mask, i) { at!(a, i) } else { at!(b, i) };
    }
}
