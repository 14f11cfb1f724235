//! `C = A·B` on the matrix units: `f16` or `bf16` inputs, `f32` accumulators, one kernel
//! source (`gemm_kernels::gemm`) for NVIDIA's tensor cores, AMD's matrix cores and the CPU
//! device, checked against the host; beside it the first step of the ladder that leads to it
//! (`gemm_fragments_f16`).
//!
//! `cargo offload run -p gemm [-- SIZE]` multiplies two SIZE×SIZE matrices (a multiple of 128;
//! 256 by default) with each kernel and input type and checks every product. `-- --bench
//! [SIZE,…]` times them: on a CUDA device against cuBLAS's `cublasGemmEx` of the same input
//! type (the same inputs and accumulation), loaded at run time (2048, 4096 and 8192 by
//! default); on the CPU device against a plain tiled loop on the host (256 and 512). After its
//! table, one line per size and input type of the fast kernel gives its speed over the
//! reference's for scripts (`gemm ratio-to-cublas N=4096 0.0600 f16`; `ratio-to-host-loop` on
//! the CPU device): the GPU pack holds it to its goal on an NVIDIA GPU.
//! `OFFLOAD_DEVICE=cpu|cuda:0|hip:0` picks the device.

use std::ffi::{c_int, c_void};
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
    Device, DeviceBuffer, DeviceKind, DevicePtr, LaunchConfig, RawDevice, TensorMap,
    TensorMapElement, TensorMapLayout, TensorMapSwizzle,
};

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
    /// `gemm_tma`: Hopper's TMA loads and `wgmma` multiplies, warp-specialized (`sm_90a`).
    Tma,
}

impl Kernel {
    fn name(self) -> &'static str {
        match self {
            Kernel::Fragments => "gemm_fragments_f16",
            Kernel::Pipelined => "gemm",
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
    let bt: Vec<T> = (0..n * n).map(|i| b[(i % n) * n + i / n]).collect();
    let bt = DeviceBuffer::from_slice(device, &bt)?;
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
        Kernel::Pipelined => {
            let config = LaunchConfig {
                grid: ((n / GEMM_BLOCK_N) as u32, (n / GEMM_BLOCK_M) as u32, 1),
                block: (GEMM_THREADS, 1, 1),
                shared_mem_bytes: 0,
                cluster: (1, 1, 1),
            };
            T::launch_pipelined(device, config, size, a, b, c)
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
        DeviceBuffer::from_slice(device, &b)?,
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
    let blas = match device.raw() {
        raw @ RawDevice::Cuda { .. } => match Cublas::load(raw) {
            Ok(blas) => Some(blas),
            Err(e) => {
                println!("cuBLAS: {e}; timing the kernels alone");
                None
            }
        },
        _ => None,
    };
    let unit = if cpu { "GFLOP/s" } else { "TFLOP/s" };
    let reference = if cpu {
        "host tiled loop"
    } else {
        "cuBLAS GemmEx"
    };
    println!(
        "| size | kernel | inputs | this kernel ({unit}) | {reference} ({unit}) | speed against it |"
    );
    println!("|---|---|---|---|---|---|");
    // After the table, one line per size and input type of the fast kernel that has a
    // reference, for scripts to read: `gemm ratio-to-cublas N=4096 0.0600 f16` (its speed over
    // cuBLAS's; `ratio-to-host-loop` on the CPU device), and `gemm-ladder …` lines for the
    // ladder's first step.
    let mut ratios = Vec::new();
    let mut steps = vec![
        (Kernel::Fragments, "f16"),
        (Kernel::Pipelined, "f16"),
        (Kernel::Pipelined, "bf16"),
    ];
    if hopper(&device) {
        steps.extend([(Kernel::Tma, "f16"), (Kernel::Tma, "bf16")]);
    }
    for n in sizes {
        for &(kernel, input) in &steps {
            let row = if input == "f16" {
                bench_one::<f16>(&device, blas.as_ref(), kernel, n)?
            } else {
                bench_one::<bf16>(&device, blas.as_ref(), kernel, n)?
            };
            let scale = if cpu { 1e9 } else { 1e12 };
            let rate = |t: Duration| 2.0 * (n as f64).powi(3) / t.as_secs_f64() / scale;
            match row.theirs {
                Some(t) => {
                    let ratio = t.as_secs_f64() / row.ours.as_secs_f64();
                    println!(
                        "| {n}³ | `{}` | {input} | {:.2} | {:.2} | {ratio:.2}× |",
                        kernel.name(),
                        rate(row.ours),
                        rate(t),
                    );
                    let against = if cpu { "host-loop" } else { "cublas" };
                    ratios.push(if kernel == Kernel::Pipelined {
                        format!("gemm ratio-to-{against} N={n} {ratio:.4} {input}")
                    } else if kernel == Kernel::Tma {
                        format!("gemm-tma ratio-to-{against} N={n} {ratio:.4} {input}")
                    } else {
                        format!(
                            "gemm-ladder {} ratio-to-{against} N={n} {ratio:.4}",
                            kernel.name()
                        )
                    });
                }
                None => println!(
                    "| {n}³ | `{}` | {input} | {:.2} | — | — |",
                    kernel.name(),
                    rate(row.ours)
                ),
            }
        }
    }
    for line in ratios {
        println!("{line}");
    }
    Ok(true)
}

/// One kernel's time and its reference's, where there is one.
struct Timed {
    ours: Duration,
    theirs: Option<Duration>,
}

fn bench_one<T: Input>(
    device: &Device,
    blas: Option<&Cublas>,
    kernel: Kernel,
    n: usize,
) -> Result<Timed, Box<dyn std::error::Error>> {
    let (a, b) = (inputs::<T>(n, 1), inputs::<T>(n, 2));
    let (da, db) = (
        DeviceBuffer::from_slice(device, &a)?,
        DeviceBuffer::from_slice(device, &b)?,
    );
    let mut dc = DeviceBuffer::<f32>::zeroed(device, n * n)?;
    let maps = match kernel {
        Kernel::Tma => Some(maps(device, n, &da, &b)?),
        _ => None,
    };
    let ours = time(device, || {
        launch(device, kernel, n, &da, &db, maps.as_ref(), &mut dc)
    })?;
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
                    da.device_ptr(),
                    db.device_ptr(),
                    dc.device_ptr(),
                )
            }
            .map_err(|reason| offload_rt::Error::InvalidLaunch {
                kernel: "cublasGemmEx".to_owned(),
                reason,
            })
        })?)
    } else {
        None
    };
    Ok(Timed { ours, theirs })
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

/// cuBLAS, loaded at run time as the runtime loads the driver, with a handle on the device's
/// context (current on this thread: the runtime made it so when it opened the device).
struct Cublas {
    library: libloading::Library,
    handle: *mut c_void,
}

/// `cublasGemmEx`.
type GemmEx = unsafe extern "C" fn(
    *mut c_void,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    *const c_void,
    *const c_void,
    c_int,
    c_int,
    *const c_void,
    c_int,
    c_int,
    *const c_void,
    *mut c_void,
    c_int,
    c_int,
    c_int,
    c_int,
) -> c_int;

const CUDA_R_16F: c_int = 2;
const CUDA_R_16BF: c_int = 14;
const CUDA_R_32F: c_int = 0;
const CUBLAS_COMPUTE_32F: c_int = 68;
const CUBLAS_GEMM_DEFAULT: c_int = -1;

impl Cublas {
    fn load(_device: RawDevice) -> Result<Cublas, String> {
        let files = [
            "libcublas.so",
            "libcublas.so.13",
            "libcublas.so.12",
            "libcublas.so.11",
            "/usr/local/cuda/lib64/libcublas.so",
        ];
        // SAFETY: loading a vendor library runs its initializers, which have no preconditions.
        let library = files
            .iter()
            .find_map(|file| unsafe { libloading::Library::new(file) }.ok())
            .ok_or_else(|| format!("not installed (tried {})", files.join(", ")))?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: `cublasCreate_v2` takes a pointer to the handle it creates.
        let status = unsafe {
            let create = library
                .get::<unsafe extern "C" fn(*mut *mut c_void) -> c_int>(b"cublasCreate_v2")
                .map_err(|e| e.to_string())?;
            create(&raw mut handle)
        };
        if status != 0 {
            return Err(format!("cublasCreate_v2 failed with status {status}"));
        }
        Ok(Cublas { library, handle })
    }

    /// Queues `C = A·B` (row-major `n`×`n`, inputs of cuBLAS's type `input`, `f32` output and
    /// accumulation) on the
    /// driver stream `stream`: column-major cuBLAS computes `Cᵀ = Bᵀ·Aᵀ`.
    ///
    /// # Safety
    /// `a`, `b` and `c` hold `n`×`n` elements of the handle's device and stay allocated until
    /// the stream has passed the product; `stream` is a live stream of it.
    unsafe fn gemm_ex(
        &self,
        stream: *mut c_void,
        n: usize,
        input: c_int,
        a: DevicePtr,
        b: DevicePtr,
        c: DevicePtr,
    ) -> Result<(), String> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        let n = n as c_int;
        let pointer = |p: DevicePtr| std::ptr::with_exposed_provenance::<c_void>(p.0 as usize);
        // SAFETY: the functions have these signatures; the caller's contract covers the memory
        // and the stream; `alpha` and `beta` are host values of the compute type.
        unsafe {
            let set_stream = self
                .library
                .get::<unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int>(
                    b"cublasSetStream_v2",
                )
                .map_err(|e| e.to_string())?;
            if set_stream(self.handle, stream) != 0 {
                return Err("cublasSetStream_v2 failed".to_owned());
            }
            let gemm = self
                .library
                .get::<GemmEx>(b"cublasGemmEx")
                .map_err(|e| e.to_string())?;
            let status = gemm(
                self.handle,
                0,
                0,
                n,
                n,
                n,
                (&raw const alpha).cast(),
                pointer(b),
                input,
                n,
                pointer(a),
                input,
                n,
                (&raw const beta).cast(),
                pointer(c).cast_mut(),
                CUDA_R_32F,
                n,
                CUBLAS_COMPUTE_32F,
                CUBLAS_GEMM_DEFAULT,
            );
            match status {
                0 => Ok(()),
                code => Err(format!("status {code}")),
            }
        }
    }
}

impl Drop for Cublas {
    fn drop(&mut self) {
        // SAFETY: the handle was made by this library and is destroyed once.
        unsafe {
            if let Ok(destroy) = self
                .library
                .get::<unsafe extern "C" fn(*mut c_void) -> c_int>(b"cublasDestroy_v2")
            {
                destroy(self.handle);
            }
        }
    }
}
