//! Small math kernels: trigonometry, powers, an escape-time fractal and option pricing.

use offload_rt::kernel;
use offload_rt::kernel::{DisjointSlice, math};

/// `out[i] = (r[i] cos θ[i], r[i] sin θ[i])`.
#[kernel]
pub fn polar(
    #[len(out.len())] r: &[f32],
    #[len(out.len())] theta: &[f32],
    mut out: DisjointSlice<[f32; 2]>,
) {
    if let Some((i, o)) = out.for_thread_x() {
        let (r, t) = (at!(r, i), at!(theta, i));
        *o = [r * math::cos(t), r * math::sin(t)];
    }
}

/// `out[i] = clamp(x[i], lo, hi)^gamma`, `lo <= hi`.
#[kernel]
pub fn gamma_correct(
    gamma: f32,
    lo: f32,
    hi: f32,
    #[len(out.len())] x: &[f32],
    mut out: DisjointSlice<f32>,
) {
    if let Some((i, o)) = out.for_thread_x() {
        *o = math::pow(clamp!(at!(x, i), lo, hi), gamma);
    }
}

/// The Mandelbrot set on a `width`-wide image of the square `[-2, 1] x [-1.5, 1.5]`: each
/// pixel gets `palette[iterations % palette.len()]`, at most `max_iter` iterations. A 2-D
/// grid covering `out`.
#[kernel]
pub fn mandelbrot(width: u32, max_iter: u32, palette: &[u32], mut out: DisjointSlice<u32>) {
    let w = width as usize;
    if let Some(((x, y), o)) = out.for_thread_xy(w) {
        let step = 3.0 / width as f32;
        let (cr, ci) = (-2.0 + x as f32 * step, -1.5 + y as f32 * step);
        let (mut zr, mut zi) = (0.0f32, 0.0f32);
        let mut n = 0;
        while n < max_iter && zr * zr + zi * zi <= 4.0 {
            let t = zr * zr - zi * zi + cr;
            zi = 2.0 * zr * zi + ci;
            zr = t;
            n += 1;
        }
        *o = at!(palette, rem!(n as usize, palette.len()));
    }
}

/// The standard normal distribution function (Abramowitz and Stegun 26.2.17).
#[inline(always)]
fn norm_cdf(x: f32) -> f32 {
    let k = 1.0 / (1.0 + 0.231_641_9 * math::abs(x));
    let poly = k
        * (0.319_381_53
            + k * (-0.356_563_78 + k * (1.781_477_9 + k * (-1.821_256 + k * 1.330_274_4))));
    let tail = 0.398_942_3 * math::exp(-0.5 * x * x) * poly;
    if x >= 0.0 { 1.0 - tail } else { tail }
}

/// Black and Scholes' prices of European calls and puts: spot `s[i]`, strike `k[i]`, time
/// `t[i]`, the rate `r` and volatility `v` the same for all.
#[kernel]
pub fn black_scholes(
    r: f32,
    v: f32,
    #[len(call.len())] s: &[f32],
    #[len(call.len())] k: &[f32],
    #[len(call.len())] t: &[f32],
    mut call: DisjointSlice<f32>,
    mut put: DisjointSlice<f32>,
) {
    if let Some((i, c)) = call.for_thread_x()
        && let Some((_, p)) = put.for_thread_x()
    {
        let (s, k, t) = (at!(s, i), at!(k, i), at!(t, i));
        let sq = math::sqrt(t);
        let d1 = (math::log(s / k) + (r + 0.5 * v * v) * t) / (v * sq);
        let d2 = d1 - v * sq;
        let disc = k * math::exp(-r * t);
        *c = s * norm_cdf(d1) - disc * norm_cdf(d2);
        *p = disc * norm_cdf(-d2) - s * norm_cdf(-d1);
    }
}
