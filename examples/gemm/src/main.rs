//! `C = A·B` on the matrix units: `f16` or `bf16` inputs, `f32` accumulators, one kernel
//! source (`gemm_kernels::gemm`) for NVIDIA's tensor cores, AMD's matrix cores and the CPU
//! device, checked against the host; beside it the first step of the ladder that leads to it
//! (`gemm_fragments_f16`).
//!
//! `cargo offload run -p gemm [-- SIZE]` multiplies two SIZE×SIZE matrices (a multiple of 128;
//! 256 by default) with each kernel and input type and checks every product. `-- --bench
//! [SIZE,…]` times them, B row-major (`gemm`) and column-major (`gemm_bt`): on a CUDA device
//! against cuBLAS's `cublasGemmEx` and cuBLASLt's `cublasLtMatmul` of the same input type and
//! layout (the same inputs and accumulation), loaded at run time (2048, 4096 and 8192 by
//! default); on the CPU device against a plain tiled loop on the host (256 and 512). After its
//! table, one line per size and input type of the fast kernel gives its speed over the
//! reference's for scripts (`gemm ratio-to-cublas N=4096 0.0600 f16`; `ratio-to-host-loop` on
//! the CPU device): the GPU pack holds it to its goal on an NVIDIA GPU.
//! `OFFLOAD_DEVICE=cpu|cuda:0|hip:0` picks the device.

mod blas;

use std::ffi::c_int;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use gemm_kernels::{
    BLOCK_M, BLOCK_N, GEMM_BLOCK_K, GEMM_BLOCK_M, GEMM_BLOCK_N, GEMM_THREADS, THREADS, TMA_BLOCK_K,
    TMA_BLOCK_M, TMA_BLOCK_N, TMA_SHARED_BYTES, TMA_THREADS,
};
use offload_rt::DeviceCopy;
use offload_rt::kernel::half::bf16;
use offload_rt::kernel::half::f16;
use offload_rt::kernel::matrix::MmaInput;
use offload_rt::{
    Device, DeviceBuffer, DeviceKind, LaunchConfig, RawDevice, TensorMap, TensorMapElement,
    TensorMapLayout, TensorMapSwizzle,
};

use crate::blas::{CUDA_R_16BF, CUDA_R_16F, Cublas, CublasLt};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("--bench") => bench(args.get(1).map(String::as_str)),
        size => check(size),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

type Outcome = Result<bool, Box<dyn std::error::Error>>;

/// A size the kernel's tiling takes: a positive multiple of 128.
fn parse_size(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n > 0 && n % GEMM_BLOCK_M == 0 && n % GEMM_BLOCK_K == 0 => Ok(n),
        _ => Err(format!(
            "size `{text}`: give a positive multiple of {GEMM_BLOCK_M}"
        )),
    }
}

/// An input type of the kernels: `f16` or `bf16`, with cuBLAS's name for it.
trait Input: MmaInput + DeviceCopy + TensorMapElement + std::fmt::Debug {
    const NAME: &'static str;
    const CUDA_TYPE: c_int;
    fn from_f32(x: f32) -> Self;
    fn to_f32(self) -> f32;
    /// Launches `gemm` on `n`×`n` matrices with `config`.
    fn launch_pipelined(
        device: &Device,
        config: LaunchConfig,
        n: u32,
        a: &DeviceBuffer<Self>,
        b: &DeviceBuffer<Self>,
        c: &mut DeviceBuffer<f32>,
    ) -> offload_rt::Result<()>;
    /// Launches `gemm_bt` on `n`×`n` matrices, `bt` holding Bᵀ (B column-major).
    fn launch_bt(
        device: &Device,
        config: LaunchConfig,
        n: u32,
        a: &DeviceBuffer<Self>,
        bt: &DeviceBuffer<Self>,
        c: &mut DeviceBuffer<f32>,
    ) -> offload_rt::Result<()>;
    /// Launches `gemm_tma` on `n`×`n` matrices through the tensor maps of A and of Bᵀ.
    fn launch_tma(
        device: &Device,
        config: LaunchConfig,
        n: u32,
        maps: &Maps<Self>,
        c: &mut DeviceBuffer<f32>,
    ) -> offload_rt::Result<()>;
    /// Launches `gemm_fragments_f16` on `n`×`n` matrices, whose inputs are `f16` only.
    fn launch_fragments(
        device: &Device,
        config: LaunchConfig,
        n: u32,
        a: &DeviceBuffer<Self>,
        b: &DeviceBuffer<Self>,
        c: &mut DeviceBuffer<f32>,
    ) -> offload_rt::Result<()>;
}

impl Input for f16 {
    const NAME: &'static str = "f16";
    const CUDA_TYPE: c_int = CUDA_R_16F;
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn launch_pipelined(
        device: &Device,
        config: LaunchConfig,
        n: u32,
        a: &DeviceBuffer<f16>,
        b: &DeviceBuffer<f16>,
        c: &mut DeviceBuffer<f32>,
    ) -> offload_rt::Result<()> {
        // SAFETY: the buffers hold n×n elements each, and the grid is (n / 128, n / 128)
        // blocks of GEMM_THREADS, as the kernel asks (`launch`).
        unsafe { gemm_kernels::gemm::<f16>.launch(device, config, n, n, n, a, b, c) }.map(drop)
    }
    fn launch_bt(
        device: &Device,
        config: LaunchConfig,
        n: u32,
        a: &DeviceBuffer<f16>,
        bt: &DeviceBuffer<f16>,
        c: &mut DeviceBuffer<f32>,
    ) -> offload_rt::Result<()> {
        // SAFETY: as for `gemm`, `bt` holding n×n elements.
        unsafe { gemm_kernels::gemm_bt::<f16>.launch(device, config, n, n, n, a, bt, c) }.map(drop)
    }
    fn launch_tma(
        device: &Device,
        config: LaunchConfig,
        n: u32,
        maps: &Maps<f16>,
        c: &mut DeviceBuffer<f32>,
    ) -> offload_rt::Result<()> {
        // SAFETY: the maps describe A and Bᵀ, n×n each, alive in `maps`' buffers; `c` holds
        // n×n elements; the grid is (n / 128, n / 128) blocks of TMA_THREADS with
        // TMA_SHARED_BYTES, as the kernel asks (`launch`).
        unsafe { gemm_kernels::gemm_tma::<f16>.launch(device, config, n, n, &maps.a, &maps.bt, c) }
            .map(drop)
    }
    fn launch_fragments(
        device: &Device,
        config: LaunchConfig,
        n: u32,
        a: &DeviceBuffer<f16>,
        b: &DeviceBuffer<f16>,
        c: &mut DeviceBuffer<f32>,
    ) -> offload_rt::Result<()> {
        // SAFETY: the buffers hold n×n elements each, and the grid is (n / 64, n / 64) blocks
        // of THREADS, as the kernel asks (`launch`).
        unsafe { gemm_kernels::gemm_fragments_f16.launch(device, config, n, n, n, a, b, c) }
            .map(drop)
    }
}

impl Input for bf16 {
    const NAME: &'static str = "bf16";
    const CUDA_TYPE: c_int = CUDA_R_16BF;
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    fn launch_pipelined(
        device: &Device,
        config: LaunchConfig,
        n: u32,
        a: &DeviceBuffer<bf16>,
        b: &DeviceBuffer<bf16>,
        c: &mut DeviceBuffer<f32>,
    ) -> offload_rt::Result<()> {
        // SAFETY: the buffers hold n×n elements each, and the grid is (n / 128, n / 128)
        // blocks of GEMM_THREADS, as the kernel asks (`launch`).
        unsafe { gemm_kernels::gemm::<bf16>.launch(device, config, n, n, n, a, b, c) }.map(drop)
    }
    fn launch_bt(
        device: &Device,
        config: LaunchConfig,
        n: u32,
        a: &DeviceBuffer<bf16>,
        bt: &DeviceBuffer<bf16>,
        c: &mut DeviceBuffer<f32>,
    ) -> offload_rt::Result<()> {
        // SAFETY: as for `gemm`, `bt` holding n×n elements.
        unsafe { gemm_kernels::gemm_bt::<bf16>.launch(device, config, n, n, n, a, bt, c) }.map(drop)
    }
    fn launch_tma(
        device: &Device,
        config: LaunchConfig,
        n: u32,
        maps: &Maps<bf16>,
        c: &mut DeviceBuffer<f32>,
    ) -> offload_rt::Result<()> {
        // SAFETY: the maps describe A and Bᵀ, n×n each, alive in `maps`' buffers; `c` holds
        // n×n elements; the grid is (n / 128, n / 128) blocks of TMA_THREADS with
        // TMA_SHARED_BYTES, as the kernel asks (`launch`).
        unsafe { gemm_kernels::gemm_tma::<bf16>.launch(device, config, n, n, &maps.a, &maps.bt, c) }
            .map(drop)
    }
    fn launch_fragments(
        _device: &Device,
        _config: LaunchConfig,
        _n: u32,
        _a: &DeviceBuffer<bf16>,
        _b: &DeviceBuffer<bf16>,
        _c: &mut DeviceBuffer<f32>,
    ) -> offload_rt::Result<()> {
        Err(offload_rt::Error::InvalidLaunch {
            kernel: "gemm_fragments_f16".to_owned(),
            reason: "it takes f16 inputs only".to_owned(),
        })
    }
}

/// The kernels of the ladder (`docs/guide/src/compute-bound.md`), each a step.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kernel {
    /// `gemm_fragments_f16`: fragments loaded element by element, no pipeline.
    Fragments,
    /// `gemm`: asynchronous copies into a pipeline of swizzled tiles, `ldmatrix` fragments.
    Pipelined,
    /// `gemm_bt`: `gemm` with B column-major (its input is Bᵀ, row-major).
    PipelinedBt,
    /// `gemm_tma`: Hopper's TMA loads and `wgmma` multiplies, warp-specialized (`sm_90a`).
    Tma,
}

impl Kernel {
    fn name(self) -> &'static str {
        match self {
            Kernel::Fragments => "gemm_fragments_f16",
            Kernel::Pipelined => "gemm",
            Kernel::PipelinedBt => "gemm_bt",
            Kernel::Tma => "gemm_tma",
        }
    }
}

/// The tensor maps `gemm_tma` reads A and Bᵀ through, with the transposed copy of B they
/// describe.
struct Maps<T: Input> {
    a: DeviceBuffer<TensorMap>,
    bt: DeviceBuffer<TensorMap>,
    /// The transposed B `bt` describes, kept alive with it.
    _bt_data: DeviceBuffer<T>,
}

/// The maps of `a` and of `b` transposed (`gemm_tma` computes `A·Bᵀ` from row-major Bᵀ):
/// 64×128 boxes, 64 along `k`, 128-byte swizzle.
fn maps<T: Input>(
    device: &Device,
    n: usize,
    a: &DeviceBuffer<T>,
    b: &[T],
) -> offload_rt::Result<Maps<T>> {
    let bt = DeviceBuffer::from_slice(device, &transposed(n, b))?;
    let layout = TensorMapLayout {
        rows: n as u64,
        cols: n as u64,
        row_stride: n as u64,
        box_rows: TMA_BLOCK_M as u32,
        box_cols: TMA_BLOCK_K as u32,
        swizzle: TensorMapSwizzle::Bytes128,
    };
    Ok(Maps {
        a: a.tensor_map_2d(layout)?,
        bt: bt.tensor_map_2d(layout)?,
        _bt_data: bt,
    })
}

/// The `n`×`n` matrix `m` transposed (row-major either way).
fn transposed<T: Copy>(n: usize, m: &[T]) -> Vec<T> {
    (0..n * n).map(|i| m[(i % n) * n + i / n]).collect()
}

/// B as `kernel` reads it: Bᵀ for `gemm_bt` (B column-major), B elsewhere.
fn b_input<T: Copy>(kernel: Kernel, n: usize, b: &[T]) -> Vec<T> {
    if kernel == Kernel::PipelinedBt {
        transposed(n, b)
    } else {
        b.to_vec()
    }
}

/// Whether the device runs `gemm_kernels`' `sm_90a` image, the one with `gemm_tma`'s Hopper
/// path (elsewhere the kernel does nothing).
fn hopper(device: &Device) -> bool {
    device
        .load_module("gemm_kernels")
        .is_ok_and(|image| image.arch == "sm_90a")
}

/// Inputs in [-1, 1) with 8 significant bits, exact in `f16` and `bf16` alike.
fn inputs<T: Input>(n: usize, salt: u64) -> Vec<T> {
    (0..n * n)
        .map(|i| {
            let h = (i as u64 ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56;
            T::from_f32(h as f32 / 128.0 - 1.0)
        })
        .collect()
}

/// Launches `kernel` for `n`×`n` matrices.
fn launch<T: Input>(
    device: &Device,
    kernel: Kernel,
    n: usize,
    a: &DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
    maps: Option<&Maps<T>>,
    c: &mut DeviceBuffer<f32>,
) -> offload_rt::Result<()> {
    let size = n as u32;
    match kernel {
        Kernel::Tma => {
            let config = LaunchConfig {
                grid: ((n / TMA_BLOCK_N) as u32, (n / TMA_BLOCK_M) as u32, 1),
                block: (TMA_THREADS, 1, 1),
                shared_mem_bytes: TMA_SHARED_BYTES,
                cluster: (1, 1, 1),
            };
            let maps = maps.ok_or_else(|| offload_rt::Error::InvalidLaunch {
                kernel: "gemm_tma".to_owned(),
                reason: "it reads its inputs through tensor maps".to_owned(),
            })?;
            T::launch_tma(device, config, size, maps, c)
        }
        Kernel::Pipelined | Kernel::PipelinedBt => {
            let config = LaunchConfig {
                grid: ((n / GEMM_BLOCK_N) as u32, (n / GEMM_BLOCK_M) as u32, 1),
                block: (GEMM_THREADS, 1, 1),
                shared_mem_bytes: 0,
                cluster: (1, 1, 1),
            };
            if kernel == Kernel::PipelinedBt {
                T::launch_bt(device, config, size, a, b, c)
            } else {
                T::launch_pipelined(device, config, size, a, b, c)
            }
        }
        Kernel::Fragments => {
            let config = LaunchConfig {
                grid: ((n / BLOCK_N) as u32, (n / BLOCK_M) as u32, 1),
                block: (THREADS, 1, 1),
                shared_mem_bytes: 0,
                cluster: (1, 1, 1),
            };
            T::launch_fragments(device, config, size, a, b, c)
        }
    }
}

fn check(size: Option<&str>) -> Outcome {
    let n = size.map_or(Ok(256), parse_size)?;
    let device = Device::best()?;
    println!("device: {}", device.describe());
    let mut right = check_one::<f16>(&device, Kernel::Pipelined, n)?;
    right &= check_one::<bf16>(&device, Kernel::Pipelined, n)?;
    right &= check_one::<f16>(&device, Kernel::PipelinedBt, n)?;
    right &= check_one::<bf16>(&device, Kernel::PipelinedBt, n)?;
    right &= check_one::<f16>(&device, Kernel::Fragments, n)?;
    if hopper(&device) {
        right &= check_one::<f16>(&device, Kernel::Tma, n)?;
        right &= check_one::<bf16>(&device, Kernel::Tma, n)?;
    } else {
        println!("gemm_tma: skipped, the device runs no sm_90a image (an H100 or H200 does)");
    }
    Ok(right)
}

/// Runs `kernel` on `T` inputs and checks every result against the host.
fn check_one<T: Input>(device: &Device, kernel: Kernel, n: usize) -> Outcome {
    let (a, b) = (inputs::<T>(n, 1), inputs::<T>(n, 2));
    let (da, db) = (
        DeviceBuffer::from_slice(device, &a)?,
        DeviceBuffer::from_slice(device, &b_input(kernel, n, &b))?,
    );
    let mut dc = DeviceBuffer::<f32>::zeroed(device, n * n)?;
    let maps = match kernel {
        Kernel::Tma => Some(maps(device, n, &da, &b)?),
        _ => None,
    };
    launch(device, kernel, n, &da, &db, maps.as_ref(), &mut dc)?;
    if let Some(report) = device.last_launch() {
        println!("image: {report}");
    }
    let got = dc.to_vec()?;
    // The products are exact in f32; each device adds them in its own order, so each result
    // is held to the rounding of its sum of magnitudes.
    let (af, bf): (Vec<f32>, Vec<f32>) = (
        a.iter().map(|v| v.to_f32()).collect(),
        b.iter().map(|v| v.to_f32()).collect(),
    );
    let mut wrong = 0usize;
    for row in 0..n {
        for col in 0..n {
            let (mut sum, mut magnitude) = (0.0f64, 0.0f64);
            for p in 0..n {
                let product = f64::from(af[row * n + p]) * f64::from(bf[p * n + col]);
                sum += product;
                magnitude += product.abs();
            }
            let bound = magnitude * n as f64 * f64::from(f32::EPSILON) + 1e-30;
            if (f64::from(got[row * n + col]) - sum).abs() > bound {
                wrong += 1;
            }
        }
    }
    let what = format!(
        "{}: C = A·B, {n}×{n}×{n}, {} inputs, f32 accumulators",
        kernel.name(),
        T::NAME
    );
    if wrong > 0 {
        println!("{what}: {wrong} of {} results wrong", n * n);
        return Ok(false);
    }
    println!("{what}: OK");
    Ok(true)
}

fn bench(sizes: Option<&str>) -> Outcome {
    let device = Device::best()?;
    println!("device: {}", device.describe());
    let cpu = device.kind() == DeviceKind::Cpu;
    let sizes: Vec<usize> = match sizes {
        Some(list) => list.split(',').map(parse_size).collect::<Result<_, _>>()?,
        None if cpu => vec![256, 512],
        None => vec![2048, 4096, 8192],
    };
    let (blas, lt) = match device.raw() {
        RawDevice::Cuda { .. } => {
            let blas = Cublas::load()
                .inspect_err(|e| println!("cuBLAS: {e}; timing without it"))
                .ok();
            let lt = CublasLt::load(&device)
                .inspect_err(|e| println!("cuBLASLt: {e}; timing without it"))
                .ok();
            (blas, lt)
        }
        _ => (None, None),
    };
    let unit = if cpu { "GFLOP/s" } else { "TFLOP/s" };
    let reference = if cpu {
        "host tiled loop"
    } else {
        "cuBLAS GemmEx"
    };
    println!(
        "| size | kernel | inputs | this kernel ({unit}) | {reference} ({unit}) | speed against it | cuBLASLt ({unit}) | against cuBLASLt |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    // After the table, one line per size and input type of the fast kernel that has a
    // reference, for scripts to read: `gemm ratio-to-cublas N=4096 0.0600 f16` (its speed over
    // cuBLAS's; `ratio-to-host-loop` on the CPU device; `gemm-bt` for B column-major;
    // `ratio-to-cublaslt` against cuBLASLt), and `gemm-ladder …` lines for the ladder's first
    // step.
    let mut ratios = Vec::new();
    let mut steps = vec![
        (Kernel::Fragments, "f16"),
        (Kernel::Pipelined, "f16"),
        (Kernel::Pipelined, "bf16"),
        (Kernel::PipelinedBt, "f16"),
        (Kernel::PipelinedBt, "bf16"),
    ];
    if hopper(&device) {
        steps.extend([(Kernel::Tma, "f16"), (Kernel::Tma, "bf16")]);
    }
    for n in sizes {
        for &(kernel, input) in &steps {
            let row = if input == "f16" {
                bench_one::<f16>(&device, blas.as_ref(), lt.as_ref(), kernel, n)?
            } else {
                bench_one::<bf16>(&device, blas.as_ref(), lt.as_ref(), kernel, n)?
            };
            let scale = if cpu { 1e9 } else { 1e12 };
            let rate = |t: Duration| 2.0 * (n as f64).powi(3) / t.as_secs_f64() / scale;
            let against = |t: Option<Duration>| t.map(|t| t.as_secs_f64() / row.ours.as_secs_f64());
            let cell = |x: Option<f64>, suffix: &str| {
                x.map_or_else(|| "—".to_owned(), |x| format!("{x:.2}{suffix}"))
            };
            let (ratio, lt_ratio) = (against(row.theirs), against(row.lt));
            println!(
                "| {n}³ | `{}` | {input} | {:.2} | {} | {} | {} | {} |",
                kernel.name(),
                rate(row.ours),
                cell(row.theirs.map(rate), ""),
                cell(ratio, "×"),
                cell(row.lt.map(rate), ""),
                cell(lt_ratio, "×"),
            );
            let name = match kernel {
                Kernel::Pipelined => "gemm".to_owned(),
                Kernel::PipelinedBt => "gemm-bt".to_owned(),
                Kernel::Tma => "gemm-tma".to_owned(),
                Kernel::Fragments => format!("gemm-ladder {}", kernel.name()),
            };
            let reference = if cpu { "host-loop" } else { "cublas" };
            if let Some(ratio) = ratio {
                ratios.push(format!(
                    "{name} ratio-to-{reference} N={n} {ratio:.4} {input}"
                ));
            }
            if let Some(ratio) = lt_ratio {
                ratios.push(format!("{name} ratio-to-cublaslt N={n} {ratio:.4} {input}"));
            }
        }
    }
    for line in ratios {
        println!("{line}");
    }
    Ok(true)
}

/// One kernel's time and its references', where there are.
struct Timed {
    ours: Duration,
    /// cuBLAS's `cublasGemmEx` (the host loop on the CPU device).
    theirs: Option<Duration>,
    /// cuBLASLt's `cublasLtMatmul`.
    lt: Option<Duration>,
}

fn bench_one<T: Input>(
    device: &Device,
    blas: Option<&Cublas>,
    lt: Option<&CublasLt>,
    kernel: Kernel,
    n: usize,
) -> Result<Timed, Box<dyn std::error::Error>> {
    let (a, b) = (inputs::<T>(n, 1), inputs::<T>(n, 2));
    let (da, db) = (
        DeviceBuffer::from_slice(device, &a)?,
        DeviceBuffer::from_slice(device, &b_input(kernel, n, &b))?,
    );
    let mut dc = DeviceBuffer::<f32>::zeroed(device, n * n)?;
    let maps = match kernel {
        Kernel::Tma => Some(maps(device, n, &da, &b)?),
        _ => None,
    };
    let ours = time(device, || {
        launch(device, kernel, n, &da, &db, maps.as_ref(), &mut dc)
    })?;
    let b_transposed = kernel == Kernel::PipelinedBt;
    let failed = |what: &str| {
        let what = what.to_owned();
        move |reason| offload_rt::Error::InvalidLaunch {
            kernel: what.clone(),
            reason,
        }
    };
    let theirs = if device.kind() == DeviceKind::Cpu {
        let (af, bf): (Vec<f32>, Vec<f32>) = (
            a.iter().map(|v| v.to_f32()).collect(),
            b.iter().map(|v| v.to_f32()).collect(),
        );
        let start = Instant::now();
        let c = host_tiled(n, &af, &bf);
        let elapsed = start.elapsed();
        std::hint::black_box(c);
        Some(elapsed)
    } else if let Some(blas) = blas {
        let dc = DeviceBuffer::<f32>::zeroed(device, n * n)?;
        let stream = device.raw_stream();
        Some(time(device, || {
            // SAFETY: the buffers hold n×n elements of this device, alive until the device is
            // synchronized (in `time`).
            unsafe {
                blas.gemm_ex(
                    stream,
                    n,
                    T::CUDA_TYPE,
                    b_transposed,
                    da.device_ptr(),
                    db.device_ptr(),
                    dc.device_ptr(),
                )
            }
            .map_err(failed("cublasGemmEx"))
        })?)
    } else {
        None
    };
    let lt = match lt {
        Some(lt) if device.kind() != DeviceKind::Cpu => {
            match lt.plan(n, T::CUDA_TYPE, b_transposed) {
                Ok(plan) => {
                    let dc = DeviceBuffer::<f32>::zeroed(device, n * n)?;
                    let stream = device.raw_stream();
                    Some(time(device, || {
                        // SAFETY: as for cuBLAS.
                        unsafe {
                            plan.run(stream, da.device_ptr(), db.device_ptr(), dc.device_ptr())
                        }
                        .map_err(failed("cublasLtMatmul"))
                    })?)
                }
                Err(e) => {
                    println!("cuBLASLt at {n}³ {}: {e}", T::NAME);
                    None
                }
            }
        }
        _ => None,
    };
    Ok(Timed { ours, theirs, lt })
}

/// The median of 5 runs of `work` (after one warm-up), each synchronized.
fn time(
    device: &Device,
    mut work: impl FnMut() -> offload_rt::Result<()>,
) -> offload_rt::Result<Duration> {
    work()?;
    device.synchronize()?;
    let mut runs = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        work()?;
        device.synchronize()?;
        runs.push(start.elapsed());
    }
    runs.sort();
    Ok(runs[2])
}

/// `A·B` on the host, one thread, in 64×64 blocks: the plain loop the CPU device is set against.
fn host_tiled(n: usize, a: &[f32], b: &[f32]) -> Vec<f32> {
    const B: usize = 64;
    let mut c = vec![0.0f32; n * n];
    for i0 in (0..n).step_by(B) {
        for p0 in (0..n).step_by(B) {
            for j0 in (0..n).step_by(B) {
                for i in i0..i0 + B {
                    for p in p0..p0 + B {
                        let aip = a[i * n + p];
                        let row = &mut c[i * n + j0..i * n + j0 + B];
                        for (cij, bpj) in row.iter_mut().zip(&b[p * n + j0..p * n + j0 + B]) {
                            *cij += aip * bpj;
                        }
                    }
                }
            }
        }
    }
    c
}
