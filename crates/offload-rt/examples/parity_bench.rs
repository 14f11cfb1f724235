//! The parity benchmark's kernels timed on a CUDA GPU, each Rust kernel against its CUDA C
//! twin in one run (`benches/parity`): the same inputs, the same launch configuration, device
//! time from events, the median of `--reps` launches after a warm-up (the two sides launched
//! alternately), and the outputs of the
//! two compared (bit for bit where the two compute the same operations, else within a relative
//! tolerance: C contracts `a * x + y` into one `fma`).
//!
//! `parity_bench DIR [--reps N]`, where `DIR` holds the images `offload-build`'s parity test
//! leaves (`target/tmp/parity/work`, copied by `cargo xtask gpu-pack` into the pack's
//! `parity/`): `sm_80-rust.cubin`, `sm_80-c.cubin`, `sm_90-rust.cubin`, `sm_90-c.cubin`, and
//! the GEMM's (`examples/gemm`'s `gemm__f16` and `gemm__bf16` against `benches/parity/gemm.cu`)
//! as `gemm-sm_80-rust.cubin` and so on. The runtime picks the pair that fits the GPU. Prints one line per kernel: milliseconds, C's time
//! over Rust's (the goal: at least 0.95), and whether the outputs agree. Without a CUDA device
//! it says why and exits with status 2; it exits with status 1 when outputs disagree.

use std::ffi::c_void;
use std::path::Path;
use std::process::ExitCode;

use offload_format::{ImageKind, OffloadBinary, OffloadKind};
use offload_rt::__internal::cuda::{self, CudaBackend, CudaDevice};
use offload_rt::__internal::register_bundle;
use offload_rt::{Device, DeviceBuffer, LaunchConfig};

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

const RUST: &str = "parity_rust";
const C: &str = "parity_c";
const KERNELS: &str = "saxpy,matmul,reduce_shared,reduce_warp,transpose,stencil5,histogram,scan,\
                       gather,gauss,affine,divide,reverse";
const GEMM_RUST: &str = "parity_gemm_rust";
const GEMM_C: &str = "parity_gemm_c";
const GEMM_KERNELS: &str = "gemm__f16,gemm__bf16";
/// The GEMM's size: 4096³, as cuBLAS is measured by `examples/gemm`.
const GEMM_SIZE: u32 = 4096;

/// Registers each language's cubins as a module of its own, one image per architecture: the
/// thirteen kernels, and the GEMM.
fn register(dir: &Path) -> BenchResult<()> {
    for (module, prefix, lang, kernels) in [
        (RUST, "", "rust", KERNELS),
        (C, "", "c", KERNELS),
        (GEMM_RUST, "gemm-", "rust", GEMM_KERNELS),
        (GEMM_C, "gemm-", "c", GEMM_KERNELS),
    ] {
        let mut binaries = Vec::new();
        for sm in ["sm_80", "sm_90"] {
            let path = dir.join(format!("{prefix}{sm}-{lang}.cubin"));
            let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            binaries.push(
                OffloadBinary::new(ImageKind::Cubin, OffloadKind::Cuda, bytes)
                    .with_string("arch", sm)
                    .with_string("triple", "nvptx64-nvidia-cuda")
                    .with_string("offload.module", module)
                    .with_string("offload.kernels", kernels)
                    .to_bytes(),
            );
        }
        register_bundle(module, binaries.concat());
    }
    Ok(())
}

/// A kernel parameter: how the launch ABI passes it (slices as `{ptr, len}`, 16 bytes).
#[derive(Clone, Copy)]
enum Arg {
    U32(u32),
    F32(f32),
    Ptr(usize),
    Slice(usize),
    Quad([f32; 4]),
}

/// The buffers of one case, all of `u32` words (floats by their bits, bytes four to a word).
struct Buffers {
    bufs: Vec<DeviceBuffer<u32>>,
    /// Elements each buffer's slice parameter says it has (bytes for `histogram`'s input).
    lens: Vec<u64>,
}

impl Buffers {
    fn params(&self, args: &[Arg]) -> Vec<[u64; 2]> {
        args.iter()
            .map(|a| match *a {
                Arg::U32(v) => [u64::from(v), 0],
                Arg::F32(v) => [u64::from(v.to_bits()), 0],
                Arg::Ptr(b) => [self.bufs[b].device_ptr().0, 0],
                Arg::Slice(b) => [self.bufs[b].device_ptr().0, self.lens[b]],
                Arg::Quad(q) => [
                    u64::from(q[0].to_bits()) | u64::from(q[1].to_bits()) << 32,
                    u64::from(q[2].to_bits()) | u64::from(q[3].to_bits()) << 32,
                ],
            })
            .collect()
    }
}

/// One kernel pair: its inputs, each side's parameters, the launch, the buffer compared and
/// how (`tolerance` 0: bit for bit, else relative, as floats).
struct Case {
    name: &'static str,
    /// The modules of the Rust kernel and of its C twin.
    modules: [&'static str; 2],
    buffers: Vec<Vec<u32>>,
    lens: Vec<u64>,
    rust: Vec<Arg>,
    c: Vec<Arg>,
    config: LaunchConfig,
    output: usize,
    tolerance: f32,
}

fn lcg(seed: &mut u32) -> u32 {
    *seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
    *seed
}

fn floats(n: usize, seed: u32) -> Vec<u32> {
    let mut s = seed;
    (0..n)
        .map(|_| ((lcg(&mut s) >> 8) as f32 / (1u32 << 24) as f32 * 8.0 - 4.0).to_bits())
        .collect()
}

/// `n` 16-bit floats in [-1, -0.5] ∪ [0.5, 1], two to a word: `bf16`'s bits where `bf16`,
/// else `f16`'s.
fn halves(n: usize, seed: u32, bf16: bool) -> Vec<u32> {
    let mut s = seed;
    let mut half = || {
        let r = lcg(&mut s);
        let sign = (r >> 31) << 15;
        if bf16 {
            sign | 126 << 7 | (r >> 8) & 0x7f
        } else {
            sign | 14 << 10 | (r >> 8) & 0x3ff
        }
    };
    (0..n / 2).map(|_| half() | half() << 16).collect()
}

/// The GEMM against its twin, `f16` and `bf16` inputs: `C = A·B`, 4096³, blocks of 256
/// threads on 128×128 tiles of C. The two issue the same `mma` in the same order: the outputs
/// agree bit for bit.
fn gemm_cases() -> Vec<Case> {
    use Arg::*;
    let n = GEMM_SIZE;
    let cells = (n * n) as usize;
    [("gemm__f16", false), ("gemm__bf16", true)]
        .into_iter()
        .map(|(name, bf16)| Case {
            name,
            modules: [GEMM_RUST, GEMM_C],
            buffers: vec![
                halves(cells, 14, bf16),
                halves(cells, 15, bf16),
                vec![0; cells],
            ],
            lens: vec![cells as u64 / 2, cells as u64 / 2, cells as u64],
            rust: vec![U32(n), U32(n), U32(n), Ptr(0), Ptr(1), Ptr(2)],
            c: vec![U32(n), U32(n), U32(n), Ptr(0), Ptr(1), Ptr(2)],
            config: LaunchConfig {
                grid: (n / 128, n / 128, 1),
                block: (256, 1, 1),
                shared_mem_bytes: 0,
                cluster: (1, 1, 1),
            },
            output: 2,
            tolerance: 0.0,
        })
        .collect()
}

fn cases() -> Vec<Case> {
    use Arg::*;
    let n: u32 = 1 << 24;
    let nn = n as usize;
    let grid1 = |threads: u32, block: u32| LaunchConfig::linear(threads.div_ceil(block), block);
    let m: u32 = 2048;
    let side: u32 = 4096;
    let cells = (side * side) as usize;
    let hist_bytes: u32 = 1 << 26;
    let mut s = 7u32;
    let idx: Vec<u32> = (0..nn).map(|_| lcg(&mut s) % n).collect();
    let divisors: Vec<u32> = (0..nn).map(|_| lcg(&mut s) % 1000 + 1).collect();
    let small: Vec<u32> = (0..nn).map(|_| lcg(&mut s) % 16).collect();
    let affine = [1.5f32, -0.25, -2.0, 2.0];
    let tile_cfg = |w: u32, h: u32, bx: u32, by: u32| LaunchConfig {
        grid: (w.div_ceil(bx), h.div_ceil(by), 1),
        block: (bx, by, 1),
        shared_mem_bytes: 0,
        cluster: (1, 1, 1),
    };
    vec![
        Case {
            modules: [RUST, C],
            name: "saxpy",
            buffers: vec![floats(nn, 1), floats(nn, 2)],
            lens: vec![n.into(), n.into()],
            rust: vec![F32(0.5), Slice(0), Slice(1)],
            c: vec![U32(n), F32(0.5), Ptr(0), Ptr(1)],
            config: grid1(n, 256),
            output: 1,
            tolerance: 1e-6,
        },
        Case {
            modules: [RUST, C],
            name: "matmul",
            buffers: vec![
                floats((m * m) as usize, 3),
                floats((m * m) as usize, 4),
                vec![0; (m * m) as usize],
            ],
            lens: vec![(m * m).into(); 3],
            rust: vec![U32(m), Slice(0), Slice(1), Slice(2)],
            c: vec![U32(m), Ptr(0), Ptr(1), Ptr(2)],
            config: tile_cfg(m, m, 16, 16),
            output: 2,
            tolerance: 0.0,
        },
        Case {
            modules: [RUST, C],
            name: "reduce_shared",
            buffers: vec![small.clone(), vec![0]],
            lens: vec![n.into(), 1],
            rust: vec![Slice(0), Ptr(1)],
            c: vec![U32(n), Ptr(0), Ptr(1)],
            config: grid1(n, 256),
            output: 1,
            tolerance: 0.0,
        },
        Case {
            modules: [RUST, C],
            name: "reduce_warp",
            buffers: vec![small, vec![0]],
            lens: vec![n.into(), 1],
            rust: vec![Slice(0), Ptr(1)],
            c: vec![U32(n), Ptr(0), Ptr(1)],
            config: grid1(n, 256),
            output: 1,
            tolerance: 0.0,
        },
        Case {
            modules: [RUST, C],
            name: "transpose",
            buffers: vec![floats(cells, 5), vec![0; cells]],
            lens: vec![cells as u64, cells as u64],
            rust: vec![U32(side), U32(side), Slice(0), Ptr(1)],
            c: vec![U32(side), U32(side), Ptr(0), Ptr(1)],
            config: LaunchConfig {
                grid: (side / 32, side / 32, 1),
                block: (32, 8, 1),
                shared_mem_bytes: 0,
                cluster: (1, 1, 1),
            },
            output: 1,
            tolerance: 0.0,
        },
        Case {
            modules: [RUST, C],
            name: "stencil5",
            buffers: vec![floats(cells, 6), vec![0; cells]],
            lens: vec![cells as u64, cells as u64],
            rust: vec![U32(side), U32(side), Slice(0), Slice(1)],
            c: vec![U32(side), U32(side), Ptr(0), Ptr(1)],
            config: tile_cfg(side, side, 32, 8),
            output: 1,
            tolerance: 1e-6,
        },
        Case {
            modules: [RUST, C],
            name: "histogram",
            buffers: vec![floats((hist_bytes / 4) as usize, 8), vec![0; 256]],
            lens: vec![hist_bytes.into(), 256],
            rust: vec![Slice(0), Ptr(1)],
            c: vec![U32(hist_bytes), Ptr(0), Ptr(1)],
            config: LaunchConfig::linear(1024, 256),
            output: 1,
            tolerance: 0.0,
        },
        Case {
            modules: [RUST, C],
            name: "scan",
            buffers: vec![divisors.clone(), vec![0; nn]],
            lens: vec![n.into(), n.into()],
            rust: vec![Slice(0), Slice(1)],
            c: vec![U32(n), Ptr(0), Ptr(1)],
            config: LaunchConfig::linear(n / 512, 256),
            output: 1,
            tolerance: 0.0,
        },
        Case {
            modules: [RUST, C],
            name: "gather",
            buffers: vec![floats(nn, 9), idx, vec![0; nn]],
            lens: vec![n.into(), n.into(), n.into()],
            rust: vec![Slice(0), Slice(1), Slice(2)],
            c: vec![U32(n), Ptr(0), Ptr(1), Ptr(2)],
            config: grid1(n, 256),
            output: 2,
            tolerance: 0.0,
        },
        Case {
            modules: [RUST, C],
            name: "gauss",
            buffers: vec![floats(nn, 10), vec![0; nn]],
            lens: vec![n.into(), n.into()],
            rust: vec![Slice(0), Slice(1)],
            c: vec![U32(n), Ptr(0), Ptr(1)],
            config: grid1(n, 256),
            output: 1,
            tolerance: 1e-6,
        },
        Case {
            modules: [RUST, C],
            name: "affine",
            buffers: vec![floats(nn, 11), vec![0; nn]],
            lens: vec![n.into(), n.into()],
            rust: vec![Quad(affine), Slice(0), Slice(1)],
            c: vec![Quad(affine), U32(n), Ptr(0), Ptr(1)],
            config: grid1(n, 256),
            output: 1,
            tolerance: 1e-6,
        },
        Case {
            modules: [RUST, C],
            name: "divide",
            buffers: vec![floats(nn, 12), divisors, vec![0; nn]],
            lens: vec![n.into(), n.into(), n.into()],
            rust: vec![Slice(0), Slice(1), Slice(2)],
            c: vec![U32(n), Ptr(0), Ptr(1), Ptr(2)],
            config: grid1(n, 256),
            output: 2,
            tolerance: 0.0,
        },
        Case {
            modules: [RUST, C],
            name: "reverse",
            buffers: vec![floats(nn, 13), vec![0; nn]],
            lens: vec![n.into(), n.into()],
            rust: vec![Slice(0), Slice(1)],
            c: vec![U32(n), Ptr(0), Ptr(1)],
            config: LaunchConfig {
                shared_mem_bytes: 256 * 4,
                ..grid1(n, 256)
            },
            output: 1,
            tolerance: 0.0,
        },
    ]
}

/// Launches `kernel` of `module` once with `args`.
fn launch(
    device: &Device,
    module: &'static str,
    name: &'static str,
    b: &Buffers,
    args: &[Arg],
    cfg: &LaunchConfig,
) -> BenchResult<()> {
    let mut slots = b.params(args);
    let params: Vec<*mut c_void> = slots.iter_mut().map(|s| s.as_mut_ptr().cast()).collect();
    // SAFETY: each slot holds a parameter of the kernel's type at its start (the launch ABI
    // reads the parameter's size from the kernel); every pointer is into a live buffer of
    // this device, sized for the case's launch, which the host does not touch meanwhile.
    unsafe { device.launch_raw(module, name, cfg, &params) }?;
    Ok(())
}

fn agree(a: &[u32], b: &[u32], tolerance: f32) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(&x, &y)| {
            if tolerance == 0.0 {
                return x == y;
            }
            let (x, y) = (f32::from_bits(x), f32::from_bits(y));
            x.to_bits() == y.to_bits() || (x - y).abs() <= tolerance * x.abs().max(y.abs()).max(1.0)
        })
}

fn median(mut v: Vec<f32>) -> f32 {
    v.sort_by(f32::total_cmp);
    v[v.len() / 2]
}

/// Device milliseconds of each side's launches, Rust's and C's: the medians of `reps` each,
/// after a warm-up of each, the two sides alternating launch by launch (and which goes first
/// alternating too), so that a GPU's clocks or temperature drifting over the run weigh on both
/// alike.
fn time_pair(
    device: &Device,
    raw: &CudaDevice,
    case: &Case,
    b: &Buffers,
    reps: u32,
) -> BenchResult<(f32, f32)> {
    let sides = [(case.modules[0], &case.rust), (case.modules[1], &case.c)];
    for (module, args) in sides {
        launch(device, module, case.name, b, args, &case.config)?;
    }
    let (start, end) = (raw.event()?, raw.event()?);
    let mut times = [Vec::new(), Vec::new()];
    for rep in 0..reps {
        let order = if rep % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            let (module, args) = sides[side];
            start.record()?;
            launch(device, module, case.name, b, args, &case.config)?;
            end.record()?;
            end.synchronize()?;
            times[side].push(end.elapsed_ms_since(&start)?);
        }
    }
    let [rust, c] = times;
    Ok((median(rust), median(c)))
}

fn run() -> BenchResult<bool> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(dir) = args.first().filter(|a| !a.starts_with("--")) else {
        return Err("usage: parity_bench DIR [--reps N]".into());
    };
    let reps = match args.iter().position(|a| a == "--reps") {
        Some(i) => args
            .get(i + 1)
            .ok_or("--reps needs a number")?
            .parse::<u32>()?
            .max(1),
        None => 20,
    };
    match cuda::probe() {
        Ok(devices) if !devices.is_empty() => {}
        Ok(_) => {
            eprintln!("parity_bench: no CUDA device to benchmark");
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!("parity_bench: no CUDA device to benchmark: {e}");
            std::process::exit(2);
        }
    }
    register(Path::new(dir))?;
    let backend = CudaBackend::open(0)?;
    let raw = backend.device().clone();
    let device = Device::from_backend(Box::new(backend));
    println!("device: {}", device.describe());
    println!(
        "{:<14} {:>10} {:>10} {:>8}  outputs",
        "kernel", "Rust ms", "C ms", "C/Rust"
    );
    let mut all_agree = true;
    let mut ratios = Vec::new();
    for case in cases().into_iter().chain(gemm_cases()) {
        let mut b = Buffers {
            bufs: Vec::new(),
            lens: case.lens.clone(),
        };
        for data in &case.buffers {
            b.bufs.push(DeviceBuffer::from_slice(&device, data)?);
        }
        let initial = case.buffers[case.output].clone();
        launch(
            &device,
            case.modules[0],
            case.name,
            &b,
            &case.rust,
            &case.config,
        )?;
        let from_rust = b.bufs[case.output].to_vec()?;
        b.bufs[case.output].copy_from(&initial)?;
        launch(
            &device,
            case.modules[1],
            case.name,
            &b,
            &case.c,
            &case.config,
        )?;
        let from_c = b.bufs[case.output].to_vec()?;
        let same = agree(&from_rust, &from_c, case.tolerance);
        all_agree &= same;
        let (rust_ms, c_ms) = time_pair(&device, &raw, &case, &b, reps)?;
        ratios.push(f64::from(c_ms / rust_ms));
        println!(
            "{:<14} {rust_ms:>10.4} {c_ms:>10.4} {:>8.3}  {}",
            case.name,
            c_ms / rust_ms,
            if same { "agree" } else { "DIFFER" }
        );
    }
    let geomean = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
    println!(
        "geometric mean of C/Rust (speed of Rust relative to C; goal at least 0.95): {geomean:.3}; \
         median of {reps} launches each"
    );
    Ok(all_agree)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("parity_bench: {e}");
            ExitCode::FAILURE
        }
    }
}
