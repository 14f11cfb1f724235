//! `kernel::half` on the CPU device: the fixture's half-precision kernels (tests/fixtures/kernels,
//! `half_kernels.rs`) built by the build engine, launched, and their bits checked against
//! hand-computed roundings and the `half` crate's software, which the GPUs' conversion
//! instructions match.

mod cpu_common;

use offload_rt::kernel::half::{bf16, f16};
use offload_rt::{Device, DeviceBuffer, LaunchConfig};
use offload_rt_test_kernels as k;

fn setup() -> bool {
    cpu_common::register_fixture("half_test")
}

/// `x` rounded to `f16` and `bf16` on the CPU device.
fn narrow(dev: &Device, x: &[f32]) -> (Vec<f16>, Vec<bf16>) {
    let n = x.len() as u32;
    let dx = DeviceBuffer::from_slice(dev, x).unwrap();
    let mut h = DeviceBuffer::<f16>::zeroed(dev, x.len()).unwrap();
    let mut b = DeviceBuffer::<bf16>::zeroed(dev, x.len()).unwrap();
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    unsafe { k::half_narrow.launch(dev, LaunchConfig::for_num_elems(n), n, &dx, &mut h, &mut b) }
        .unwrap();
    (h.to_vec().unwrap(), b.to_vec().unwrap())
}

/// Every `f16` and every `bf16` widens to the `f32` of the same value: the `half` crate's
/// result, and for `bf16` the bits shifted up.
#[test]
fn every_f16_and_bf16_widens_exactly() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let bits: Vec<u16> = (0..=u16::MAX).collect();
    let h: Vec<f16> = bits.iter().map(|&b| f16::from_bits(b)).collect();
    let b: Vec<bf16> = bits.iter().map(|&b| bf16::from_bits(b)).collect();
    let n = bits.len() as u32;
    let dh = DeviceBuffer::from_slice(&dev, &h).unwrap();
    let db = DeviceBuffer::from_slice(&dev, &b).unwrap();
    let mut out = DeviceBuffer::<[f32; 2]>::zeroed(&dev, bits.len()).unwrap();
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    unsafe { k::half_widen.launch(&dev, LaunchConfig::for_num_elems(n), n, &dh, &db, &mut out) }
        .unwrap();
    let out = out.to_vec().unwrap();
    for (i, &[wh, wb]) in out.iter().enumerate() {
        let (eh, eb) = (h[i].to_f32(), b[i].to_f32());
        if h[i].is_nan() {
            assert!(wh.is_nan(), "f16 {:#06x} -> {wh}", bits[i]);
        } else {
            assert_eq!(wh.to_bits(), eh.to_bits(), "f16 {:#06x}", bits[i]);
        }
        if b[i].is_nan() {
            assert!(wb.is_nan(), "bf16 {:#06x} -> {wb}", bits[i]);
        } else {
            assert_eq!(wb.to_bits(), eb.to_bits(), "bf16 {:#06x}", bits[i]);
            assert_eq!(wb.to_bits(), u32::from(bits[i]) << 16);
        }
    }
    // Spot checks independent of the `half` crate.
    let f16_of = |bits: u16| out[usize::from(bits)][0];
    assert_eq!(f16_of(0x3c00), 1.0);
    assert_eq!(f16_of(0x0001), 2f32.powi(-24));
    assert_eq!(f16_of(0x03ff), 2f32.powi(-14) - 2f32.powi(-24));
    assert_eq!(f16_of(0x7bff), 65504.0);
    assert_eq!(f16_of(0xfc00), f32::NEG_INFINITY);
    assert_eq!(out[0xc2c0][1], -96.0);
}

/// Narrowing rounds to nearest, ties to even, into subnormals and up to infinity, and keeps
/// NaN a NaN (a truncation would make the signalling NaN `0x7f800001` an infinity in `bf16`).
#[test]
fn narrowing_rounds_ties_to_even() {
    if !setup() {
        return;
    }
    let p = |e: i32| 2f32.powi(e);
    // (input, f16 bits, bf16 bits)
    let cases: &[(f32, u16, u16)] = &[
        (1.0, 0x3c00, 0x3f80),
        (-0.0, 0x8000, 0x8000),
        // f16 ties: halfway to the odd neighbour goes down, to the even one up.
        (1.0 + p(-11), 0x3c00, 0x3f80),
        (1.0 + 3.0 * p(-11), 0x3c02, 0x3f80),
        (1.0 + p(-11) + p(-20), 0x3c01, 0x3f80),
        // bf16 ties.
        (1.0 + p(-8), 0x3c04, 0x3f80),
        (1.0 + 3.0 * p(-8), 0x3c0c, 0x3f82),
        // f16 subnormals: the smallest, a tie to zero, a tie up to the even 2 * 2^-24.
        (p(-24), 0x0001, 0x3380),
        (p(-25), 0x0000, 0x3300),
        (3.0 * p(-25), 0x0002, 0x33c0),
        (-p(-14) * 0.5, 0x8200, 0xb800),
        // f16 overflow: 65504 is the largest, 65520 the tie that rounds to infinity.
        (65504.0, 0x7bff, 0x4780),
        (65519.996, 0x7bff, 0x4780),
        (65520.0, 0x7c00, 0x4780),
        (1e10, 0x7c00, 0x5015),
        (f32::MAX, 0x7c00, 0x7f80),
        (f32::INFINITY, 0x7c00, 0x7f80),
        (f32::NEG_INFINITY, 0xfc00, 0xff80),
        // f32 subnormals stay bf16 subnormals: a tie to even 0, a tie up to even 2.
        (f32::from_bits(0x0000_8000), 0x0000, 0x0000),
        (f32::from_bits(0x0001_8000), 0x0000, 0x0002),
        (f32::from_bits(0x0001_7fff), 0x0000, 0x0001),
        (f32::from_bits(0x807f_ffff), 0x8000, 0x8080),
    ];
    let dev = Device::cpu();
    let x: Vec<f32> = cases.iter().map(|c| c.0).collect();
    let (h, b) = narrow(&dev, &x);
    for (i, &(x, eh, eb)) in cases.iter().enumerate() {
        assert_eq!(h[i].to_bits(), eh, "f16 of {x:e} ({:#010x})", x.to_bits());
        assert_eq!(b[i].to_bits(), eb, "bf16 of {x:e} ({:#010x})", x.to_bits());
    }
    let nans = [
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7f80_0001),
        f32::from_bits(0xff80_0001),
        f32::from_bits(0x7fbf_ffff),
    ];
    let (h, b) = narrow(&dev, &nans);
    for (i, x) in nans.iter().enumerate() {
        assert!(
            h[i].is_nan(),
            "f16 of {:#010x}: {:#06x}",
            x.to_bits(),
            h[i].to_bits()
        );
        assert!(
            b[i].is_nan(),
            "bf16 of {:#010x}: {:#06x}",
            x.to_bits(),
            b[i].to_bits()
        );
    }
}

/// A million `f32` bit patterns (every exponent, both signs) narrow to the `half` crate's
/// bits, and every `f16` and `bf16` survives the round trip through `f32` unchanged.
#[test]
fn narrowing_matches_the_half_crate_and_round_trips() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let mut s = 0x2545_f491_u32;
    let x: Vec<f32> = (0..1_000_000)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            f32::from_bits(s)
        })
        .collect();
    let (h, b) = narrow(&dev, &x);
    for (i, &x) in x.iter().enumerate() {
        if x.is_nan() {
            assert!(h[i].is_nan() && b[i].is_nan(), "{:#010x}", x.to_bits());
            continue;
        }
        let (eh, eb) = (f16::from_f32(x), bf16::from_f32(x));
        assert_eq!(h[i].to_bits(), eh.to_bits(), "f16 of {:#010x}", x.to_bits());
        assert_eq!(
            b[i].to_bits(),
            eb.to_bits(),
            "bf16 of {:#010x}",
            x.to_bits()
        );
    }

    let all: Vec<u16> = (0..=u16::MAX).collect();
    for (name, widened, is_nan) in [
        (
            "f16",
            all.iter()
                .map(|&b| f16::from_bits(b).to_f32())
                .collect::<Vec<_>>(),
            (|b| f16::from_bits(b).is_nan()) as fn(u16) -> bool,
        ),
        (
            "bf16",
            all.iter().map(|&b| bf16::from_bits(b).to_f32()).collect(),
            |b| bf16::from_bits(b).is_nan(),
        ),
    ] {
        let (h, b) = narrow(&dev, &widened);
        for &bits in &all {
            let got = if name == "f16" {
                h[usize::from(bits)].to_bits()
            } else {
                b[usize::from(bits)].to_bits()
            };
            if is_nan(bits) {
                assert!(is_nan(got), "{name} {bits:#06x} came back {got:#06x}");
            } else {
                assert_eq!(got, bits, "{name} round trip");
            }
        }
    }
}

/// `f16` and `bf16` as kernel parameters by value, alone and in a `#[repr(C)]` struct.
#[test]
fn half_parameters_by_value() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let h = f16::from_f32(-1.5);
    let b = bf16::from_f32(3.0e38);
    let pair = k::HalfPair {
        h: f16::from_f32(0.333),
        b: bf16::from_f32(-2.0e-39),
    };
    let mut out = DeviceBuffer::<[f32; 4]>::zeroed(&dev, 1).unwrap();
    let mut scaled = DeviceBuffer::<f16>::zeroed(&dev, 1).unwrap();
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    unsafe {
        k::half_params.launch(
            &dev,
            LaunchConfig::linear(1, 1),
            h,
            b,
            pair,
            &mut out,
            &mut scaled,
        )
    }
    .unwrap();
    let out = out.to_vec().unwrap()[0];
    assert_eq!(
        out.map(f32::to_bits),
        [h.to_f32(), b.to_f32(), pair.h.to_f32(), pair.b.to_f32()].map(f32::to_bits)
    );
    assert_eq!(out[0], -1.5);
    assert!(out[3] < 0.0 && out[3] > -1e-38, "{}", out[3]);
    let want = f16::from_f32(h.to_f32() * pair.h.to_f32());
    assert_eq!(scaled.to_vec().unwrap()[0].to_bits(), want.to_bits());
}

/// The dot product of `f16` vectors summed in `f32`: each block's partial sum has the bits of
/// the same tree of additions on the host, and the total is the exact sum to `f32` precision
/// (products of two `f16` values are exact in `f32`).
#[test]
fn dot_product_of_f16_sums_in_f32() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let n = 100_003u32;
    let value = |i: u32, salt: u32| {
        let v = (i.wrapping_mul(2_654_435_761) ^ salt) % 2001;
        f16::from_f32((v as f32 - 1000.0) / 256.0)
    };
    let x: Vec<f16> = (0..n).map(|i| value(i, 0)).collect();
    let y: Vec<f16> = (0..n).map(|i| value(i, 0x5bd1_e995)).collect();
    let blocks = n.div_ceil(k::DOT_BLOCK);
    let dx = DeviceBuffer::from_slice(&dev, &x).unwrap();
    let dy = DeviceBuffer::from_slice(&dev, &y).unwrap();
    let mut partial = DeviceBuffer::<f32>::zeroed(&dev, blocks as usize).unwrap();
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    unsafe {
        k::half_dot.launch(
            &dev,
            LaunchConfig::linear(blocks, k::DOT_BLOCK),
            n,
            &dx,
            &dy,
            &mut partial,
        )
    }
    .unwrap();
    let partial = partial.to_vec().unwrap();

    let block = k::DOT_BLOCK as usize;
    for (b, &got) in partial.iter().enumerate() {
        let mut tile: Vec<f32> = (b * block..(b + 1) * block)
            .map(|i| match (x.get(i), y.get(i)) {
                (Some(a), Some(c)) => a.to_f32() * c.to_f32(),
                _ => 0.0,
            })
            .collect();
        let mut stride = block / 2;
        while stride > 0 {
            for t in 0..stride {
                tile[t] += tile[t + stride];
            }
            stride /= 2;
        }
        assert_eq!(got.to_bits(), tile[0].to_bits(), "block {b}");
    }
    let exact: f64 = x
        .iter()
        .zip(&y)
        .map(|(a, c)| f64::from(a.to_f32()) * f64::from(c.to_f32()))
        .sum();
    let total: f64 = partial.iter().map(|&p| f64::from(p)).sum();
    assert!(
        (total - exact).abs() <= 1e-5 * exact.abs().max(1.0),
        "{total} vs {exact}"
    );
}

/// `f16` and `bf16` atomic adds from many threads into few bins: counts of ones and twos, exact
/// in both formats up to their bins' totals, so the order of the adds does not matter; each
/// thread gets a value its bin held before its add.
#[test]
fn half_atomics_count_exactly() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    // Bins of at most 256 (bf16 has 8 significant bits), every partial sum an integer.
    let (n, bins) = (2000usize, 16u32);
    let keys: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761) >> 7)
        .collect();
    let weights: Vec<f16> = (0..n).map(|i| f16::from_f32((1 + i % 2) as f32)).collect();
    let (dk, dw) = (
        DeviceBuffer::from_slice(&dev, &keys).unwrap(),
        DeviceBuffer::from_slice(&dev, &weights).unwrap(),
    );
    let mut hb = DeviceBuffer::<f16>::zeroed(&dev, bins as usize).unwrap();
    let mut bb = DeviceBuffer::<bf16>::zeroed(&dev, bins as usize).unwrap();
    let mut old = DeviceBuffer::<f16>::zeroed(&dev, n).unwrap();
    // SAFETY: both histograms have `bins` elements, accessed only atomically.
    unsafe {
        k::half_histogram.launch(
            &dev,
            LaunchConfig::for_num_elems(n as u32),
            &dk,
            &dw,
            bins,
            &mut hb,
            &mut bb,
            &mut old,
        )
    }
    .unwrap();
    let mut want = vec![0.0f32; bins as usize];
    for (k, w) in keys.iter().zip(&weights) {
        want[(k % bins) as usize] += w.to_f32();
    }
    let (hb, bb) = (hb.to_vec().unwrap(), bb.to_vec().unwrap());
    for b in 0..bins as usize {
        assert!(want[b] <= 256.0, "bin {b}: {}", want[b]);
        assert_eq!(hb[b].to_f32(), want[b], "f16 bin {b}");
        assert_eq!(bb[b].to_f32(), want[b], "bf16 bin {b}");
    }
    let old = old.to_vec().unwrap();
    for i in 0..n {
        let bin = (keys[i] % bins) as usize;
        assert!(
            old[i].to_f32() >= 0.0 && old[i].to_f32() + weights[i].to_f32() <= want[bin],
            "element {i}: {} before in bin {bin} of {}",
            old[i],
            want[bin]
        );
    }
}

/// `scale · (c + a·b)` as the CPU device's matrix fragments compute it: the products exact in
/// `f32`, added in `k` order.
fn gemm_reference<T: Copy>(
    (m, n, k): (usize, usize, usize),
    scale: f32,
    a: &[T],
    b: &[T],
    c: &[f32],
    widen: impl Fn(T) -> f32,
) -> Vec<f32> {
    let mut out = c.to_vec();
    for row in 0..m {
        for col in 0..n {
            let mut acc = c[row * n + col];
            for kk in 0..k {
                acc += widen(a[row * k + kk]) * widen(b[kk * n + col]);
            }
            out[row * n + col] = acc * scale;
        }
    }
    out
}

/// `kernel::matrix` on the CPU device: a warp per 16×16 tile of C, the accumulator loaded,
/// multiplied over `k` in 16-deep steps, scaled and stored, for f16 and bf16, in blocks of 64
/// threads (two warps) and of 32; the result the host's, bit for bit, with inputs whose sums
/// round (not only small integers).
#[test]
fn matrix_fragments_multiply_tiles_as_the_host_does() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let (m, n, k) = (48usize, 32usize, 64usize);
    let value = |i: usize, salt: usize| ((i * 7919 + salt * 104_729) % 61) as f32 / 8.0 - 3.5;
    let af: Vec<f32> = (0..m * k).map(|i| value(i, 1)).collect();
    let bf: Vec<f32> = (0..k * n).map(|i| value(i, 2)).collect();
    let c: Vec<f32> = (0..m * n).map(|i| value(i, 3) * 1.0e-3).collect();
    let tiles = (m / 16 * (n / 16)) as u32;
    for block in [64u32, 32] {
        let config = LaunchConfig::linear((tiles * 32).div_ceil(block), block);
        // f16
        let a: Vec<f16> = af.iter().map(|&v| f16::from_f32(v)).collect();
        let b: Vec<f16> = bf.iter().map(|&v| f16::from_f32(v)).collect();
        let (da, db) = (
            DeviceBuffer::from_slice(&dev, &a).unwrap(),
            DeviceBuffer::from_slice(&dev, &b).unwrap(),
        );
        let mut dc = DeviceBuffer::from_slice(&dev, &c).unwrap();
        // SAFETY: the buffers have m·k, k·n and m·n elements.
        unsafe {
            k::mma_gemm::<f16>.launch(
                &dev, config, m as u32, n as u32, k as u32, 0.5, &da, &db, &mut dc,
            )
        }
        .unwrap();
        let want = gemm_reference((m, n, k), 0.5, &a, &b, &c, f16::to_f32);
        assert_eq!(dc.to_vec().unwrap(), want, "f16, blocks of {block}");
        // bf16
        let a: Vec<bf16> = af.iter().map(|&v| bf16::from_f32(v)).collect();
        let b: Vec<bf16> = bf.iter().map(|&v| bf16::from_f32(v)).collect();
        let (da, db) = (
            DeviceBuffer::from_slice(&dev, &a).unwrap(),
            DeviceBuffer::from_slice(&dev, &b).unwrap(),
        );
        let mut dc = DeviceBuffer::from_slice(&dev, &c).unwrap();
        // SAFETY: as above.
        unsafe {
            k::mma_gemm::<bf16>.launch(
                &dev, config, m as u32, n as u32, k as u32, 2.0, &da, &db, &mut dc,
            )
        }
        .unwrap();
        let want = gemm_reference((m, n, k), 2.0, &a, &b, &c, bf16::to_f32);
        assert_eq!(dc.to_vec().unwrap(), want, "bf16, blocks of {block}");
    }
    // A partial warp cannot take part: the launch fails with the reason.
    let a = DeviceBuffer::from_slice(&dev, &vec![f16::ZERO; 256]).unwrap();
    let mut dc = DeviceBuffer::<f32>::zeroed(&dev, 256).unwrap();
    // SAFETY: as above, one 16×16 tile.
    let err = unsafe {
        k::mma_gemm::<f16>.launch(
            &dev,
            LaunchConfig::linear(1, 24),
            16,
            16,
            16,
            1.0,
            &a,
            &a,
            &mut dc,
        )
    }
    .unwrap_err();
    assert!(err.to_string().contains("whole warps"), "{err}");
}

/// `kernel::matrix::m32n32k8` on the CPU device: a warp per 32×32 tile of C over `k` steps of
/// 8, f16 and bf16, in blocks of 64 threads and of 32, the result the host's bit for bit.
#[test]
fn wide_matrix_fragments_multiply_tiles_as_the_host_does() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let (m, n, k) = (64usize, 96usize, 40usize);
    let value = |i: usize, salt: usize| ((i * 7919 + salt * 104_729) % 61) as f32 / 8.0 - 3.5;
    let af: Vec<f32> = (0..m * k).map(|i| value(i, 4)).collect();
    let bf: Vec<f32> = (0..k * n).map(|i| value(i, 5)).collect();
    let c: Vec<f32> = (0..m * n).map(|i| value(i, 6) * 1.0e-3).collect();
    let tiles = (m / 32 * (n / 32)) as u32;
    for block in [64u32, 32] {
        let config = LaunchConfig::linear((tiles * 32).div_ceil(block), block);
        let a: Vec<f16> = af.iter().map(|&v| f16::from_f32(v)).collect();
        let b: Vec<f16> = bf.iter().map(|&v| f16::from_f32(v)).collect();
        let (da, db) = (
            DeviceBuffer::from_slice(&dev, &a).unwrap(),
            DeviceBuffer::from_slice(&dev, &b).unwrap(),
        );
        let mut dc = DeviceBuffer::from_slice(&dev, &c).unwrap();
        // SAFETY: the buffers have m·k, k·n and m·n elements.
        unsafe {
            k::mma_gemm_32x32::<f16>.launch(
                &dev, config, m as u32, n as u32, k as u32, 0.5, &da, &db, &mut dc,
            )
        }
        .unwrap();
        let want = gemm_reference((m, n, k), 0.5, &a, &b, &c, f16::to_f32);
        assert_eq!(dc.to_vec().unwrap(), want, "f16, blocks of {block}");
        let a: Vec<bf16> = af.iter().map(|&v| bf16::from_f32(v)).collect();
        let b: Vec<bf16> = bf.iter().map(|&v| bf16::from_f32(v)).collect();
        let (da, db) = (
            DeviceBuffer::from_slice(&dev, &a).unwrap(),
            DeviceBuffer::from_slice(&dev, &b).unwrap(),
        );
        let mut dc = DeviceBuffer::from_slice(&dev, &c).unwrap();
        // SAFETY: as above.
        unsafe {
            k::mma_gemm_32x32::<bf16>.launch(
                &dev, config, m as u32, n as u32, k as u32, 2.0, &da, &db, &mut dc,
            )
        }
        .unwrap();
        let want = gemm_reference((m, n, k), 2.0, &a, &b, &c, bf16::to_f32);
        assert_eq!(dc.to_vec().unwrap(), want, "bf16, blocks of {block}");
    }
}

/// The shared-memory paths of `kernel::matrix::m32n32k8` on the CPU device: A and B read from
/// swizzled tiles (`load_tile`), B read from a tile of Bᵀ (`load_tile_transposed`), each
/// element's place (`map_at`), and the product rounded into a swizzled tile (`store_tile`).
#[test]
fn wide_matrix_tiles_load_transpose_and_store() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    // Small integers: the products and their sums are exact.
    let af: Vec<f32> = (0..256).map(|i| ((i * 37 + 5) % 13) as f32 - 6.0).collect();
    let bf: Vec<f32> = (0..256).map(|i| ((i * 53 + 7) % 11) as f32 - 5.0).collect();
    let mut want = vec![0f32; 1024];
    for row in 0..32 {
        for col in 0..32 {
            want[row * 32 + col] = (0..8).map(|kk| af[row * 8 + kk] * bf[kk * 32 + col]).sum();
        }
    }
    let btf: Vec<f32> = (0..256).map(|i| bf[(i % 8) * 32 + i / 8]).collect();
    fn run<T: offload_rt::DeviceCopy>(
        dev: &Device,
        kernel: impl Fn(
            &DeviceBuffer<T>,
            &DeviceBuffer<T>,
            &DeviceBuffer<T>,
            &mut DeviceBuffer<f32>,
            &mut DeviceBuffer<u16>,
        ),
        (a, b, bt): (&[T], &[T], &[T]),
    ) -> (Vec<f32>, Vec<u16>) {
        let (da, db, dbt) = (
            DeviceBuffer::from_slice(dev, a).unwrap(),
            DeviceBuffer::from_slice(dev, b).unwrap(),
            DeviceBuffer::from_slice(dev, bt).unwrap(),
        );
        let mut out = DeviceBuffer::<f32>::zeroed(dev, 2048).unwrap();
        let mut rounded = DeviceBuffer::<u16>::zeroed(dev, 1024).unwrap();
        kernel(&da, &db, &dbt, &mut out, &mut rounded);
        (out.to_vec().unwrap(), rounded.to_vec().unwrap())
    }
    let one_warp = LaunchConfig::linear(1, 32);
    let halves = |x: &[f32]| x.iter().map(|&v| f16::from_f32(v)).collect::<Vec<_>>();
    let (a, b, bt) = (halves(&af), halves(&bf), halves(&btf));
    let (out, rounded) = run(
        &dev,
        |a, b, bt, out, rounded| {
            // SAFETY: the buffers hold what the kernel reads and writes (its contract).
            unsafe { k::wide_tiles::<f16>.launch(&dev, one_warp, a, b, bt, out, rounded) }.unwrap();
        },
        (&a, &b, &bt),
    );
    let brains = |x: &[f32]| x.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>();
    let (a, b, bt) = (brains(&af), brains(&bf), brains(&btf));
    let (out_b, rounded_b) = run(
        &dev,
        |a, b, bt, out, rounded| {
            // SAFETY: as above.
            unsafe { k::wide_tiles::<bf16>.launch(&dev, one_warp, a, b, bt, out, rounded) }
                .unwrap();
        },
        (&a, &b, &bt),
    );
    for row in 0..32 {
        for col in 0..32 {
            let i = row * 32 + col;
            let placed = want[i] + (row * 1000 + col) as f32;
            for (name, out) in [("f16", &out), ("bf16", &out_b)] {
                assert_eq!(out[i], placed, "{name} load_tile at ({row}, {col})");
                assert_eq!(
                    out[1024 + i],
                    placed,
                    "{name} load_tile_transposed at ({row}, {col})"
                );
            }
            assert_eq!(
                rounded[i],
                f16::from_f32(want[i]).to_bits(),
                "f16 store_tile"
            );
            assert_eq!(
                rounded_b[i],
                bf16::from_f32(want[i]).to_bits(),
                "bf16 store_tile"
            );
        }
    }
}

/// Every `ldmatrix` form on the CPU device, where the rows' addresses are exchanged across the
/// warp: lane `l` gets, of each 8×8 matrix `i`, row `l / 4`'s columns `2·(l % 4)` and the next
/// (transposed: column `l / 4`'s rows `2·(l % 4)` and the next), the first in the low half, as
/// NVIDIA's `ldmatrix` gives them.
#[test]
fn matrix_loads_give_mma_sync_layout() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let values: Vec<u16> = (0..256u16).map(|i| i.wrapping_mul(251) ^ 0x5a5a).collect();
    let at = |row: usize, col: usize| u32::from(values[row * 8 + col]);
    let dv = DeviceBuffer::from_slice(&dev, &values).unwrap();
    let mut out = DeviceBuffer::<[u32; k::MATRIX_LOAD_WORDS]>::zeroed(&dev, 32).unwrap();
    k::matrix_loads
        .launch(&dev, LaunchConfig::linear(1, 32), &dv, &mut out)
        .unwrap();
    for (lane, words) in out.to_vec().unwrap().iter().enumerate() {
        let plain = |i: usize| {
            at(8 * i + lane / 4, 2 * (lane % 4)) | at(8 * i + lane / 4, 2 * (lane % 4) + 1) << 16
        };
        let trans = |i: usize| {
            at(8 * i + 2 * (lane % 4), lane / 4) | at(8 * i + 2 * (lane % 4) + 1, lane / 4) << 16
        };
        let want = [
            plain(0),
            plain(0),
            plain(1),
            plain(0),
            plain(1),
            plain(2),
            plain(3),
            trans(0),
            trans(0),
            trans(1),
            trans(0),
            trans(1),
            trans(2),
            trans(3),
        ];
        assert_eq!(*words, want, "lane {lane}");
    }
}

/// Every `stmatrix` form on the CPU device, where the rows' addresses are exchanged across the
/// warp: each puts lane `l`'s word of 8×8 matrix `i` at row `l / 4`, columns `2·(l % 4)` and
/// the next (transposed: column `l / 4`, rows `2·(l % 4)` and the next), the low half first, as
/// NVIDIA's `stmatrix` does, and leaves the rest of the tile alone.
#[test]
fn matrix_stores_take_mma_sync_layout() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let words: Vec<u32> = (0..32 * k::MATRIX_STORE_WORDS as u32)
        .map(|i| i.wrapping_mul(0x9e37_79b9) ^ 0x5a5a_a5a5)
        .collect();
    let dw = DeviceBuffer::from_slice(&dev, &words).unwrap();
    let mut out = DeviceBuffer::<[[u16; 8]; 4]>::zeroed(&dev, 32).unwrap();
    k::matrix_stores
        .launch(&dev, LaunchConfig::linear(1, 32), &dw, &mut out)
        .unwrap();
    let mut tiles = vec![[0u16; 8]; 128];
    for (lane, rows) in out.to_vec().unwrap().iter().enumerate() {
        for (j, row) in rows.iter().enumerate() {
            tiles[lane + 32 * j] = *row;
        }
    }
    let mut want = vec![[0u16; 8]; 128];
    // (first row of the form's tile, matrices, transposed, index of its first word)
    let forms = [
        (0, 1, false, 0),
        (8, 2, false, 1),
        (24, 4, false, 3),
        (56, 1, true, 7),
        (64, 2, true, 8),
        (80, 4, true, 10),
    ];
    for (first, count, trans, word) in forms {
        for lane in 0..32 {
            for i in 0..count {
                let w = words[lane * k::MATRIX_STORE_WORDS + word + i];
                let (low, high) = (w as u16, (w >> 16) as u16);
                let base = first + 8 * i;
                if trans {
                    want[base + 2 * (lane % 4)][lane / 4] = low;
                    want[base + 2 * (lane % 4) + 1][lane / 4] = high;
                } else {
                    want[base + lane / 4][2 * (lane % 4)] = low;
                    want[base + lane / 4][2 * (lane % 4) + 1] = high;
                }
            }
        }
    }
    for (r, (got, want)) in tiles.iter().zip(&want).enumerate() {
        assert_eq!(got, want, "row {r}");
    }
}

/// `Accumulator::store_tile` rounds each element to `f16`/`bf16` into its place of the
/// swizzled tile, wherever the device's layout keeps it.
#[test]
fn accumulators_store_rounded_into_swizzled_tiles() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    // Halves of small integers and a value each type rounds (1 + 2^-11 + 2^-12 rounds up
    // to 1 + 2^-10 in f16; 1 + 2^-8 + 2^-9 to 1 + 2^-7 in bf16).
    let mut values: Vec<f32> = (0..256).map(|i| (i as f32 - 100.0) * 0.5).collect();
    values[37] = 1.0 + 2f32.powi(-11) + 2f32.powi(-12);
    values[200] = 1.0 + 2f32.powi(-8) + 2f32.powi(-9);
    let dv = DeviceBuffer::from_slice(&dev, &values).unwrap();
    let check = |got: Vec<[u16; 8]>, narrow: &dyn Fn(f32) -> u16, name: &str| {
        for (lane, row) in got.iter().enumerate() {
            for (c, bits) in row.iter().enumerate() {
                let v = values[lane / 2 * 16 + 8 * (lane % 2) + c];
                assert_eq!(
                    *bits,
                    narrow(v),
                    "{name}: row {} column {}",
                    lane / 2,
                    8 * (lane % 2) + c
                );
            }
        }
    };
    let mut out = DeviceBuffer::<[u16; 8]>::zeroed(&dev, 32).unwrap();
    k::accumulator_to_tile::<f16>
        .launch(&dev, LaunchConfig::linear(1, 32), &dv, &mut out)
        .unwrap();
    check(
        out.to_vec().unwrap(),
        &|v| f16::from_f32(v).to_bits(),
        "f16",
    );
    k::accumulator_to_tile::<bf16>
        .launch(&dev, LaunchConfig::linear(1, 32), &dv, &mut out)
        .unwrap();
    check(
        out.to_vec().unwrap(),
        &|v| bf16::from_f32(v).to_bits(),
        "bf16",
    );
}

/// The row operations attention is built from, on the CPU device's warp: each row's maximum
/// and sum across two tiles, an element's row value and place, an accumulator rounded into
/// an A fragment, and a tile read transposed as B.
#[test]
fn accumulator_rows_reduce_map_and_feed_the_next_multiply() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    // 16 rows of 32 halves of small integers: exact in f16, their sums exact in f32.
    let values: Vec<f32> = (0..512)
        .map(|i| ((i * 37 + 11) % 97) as f32 * 0.5 - 24.0)
        .collect();
    let identity: Vec<f16> = (0..256)
        .map(|i| f16::from_f32(if i / 16 == i % 16 { 1.0 } else { 0.0 }))
        .collect();
    let dv = DeviceBuffer::from_slice(&dev, &values).unwrap();
    let di = DeviceBuffer::from_slice(&dev, &identity).unwrap();
    let mut stats = DeviceBuffer::<f32>::zeroed(&dev, 32).unwrap();
    let mut out = DeviceBuffer::<f32>::zeroed(&dev, 1024).unwrap();
    // SAFETY: the buffers hold what the kernel reads and writes (its contract).
    unsafe {
        k::accumulator_rows.launch(
            &dev,
            LaunchConfig::linear(1, 32),
            &dv,
            &di,
            &mut stats,
            &mut out,
        )
    }
    .unwrap();
    let (stats, out) = (stats.to_vec().unwrap(), out.to_vec().unwrap());
    for row in 0..16 {
        let cells = &values[row * 32..(row + 1) * 32];
        let max = cells.iter().copied().fold(f32::MIN, f32::max);
        let sum: f32 = cells.iter().sum();
        assert_eq!(stats[row], max, "row {row}'s maximum");
        assert_eq!(stats[16 + row], sum, "row {row}'s sum");
        for col in 0..32 {
            let want = cells[col] - max + row as f32 - col as f32;
            assert_eq!(
                out[row * 32 + col],
                want,
                "map_rows, map_at at ({row}, {col})"
            );
        }
        for col in 0..16 {
            assert_eq!(
                out[512 + row * 16 + col],
                cells[col],
                "to_fragment_a at ({row}, {col})"
            );
            assert_eq!(
                out[768 + row * 16 + col],
                values[col * 32 + 16 + row],
                "load_tile_transposed at ({row}, {col})"
            );
        }
    }
}
