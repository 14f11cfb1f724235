//! The forward pass of scaled dot-product attention, `O = softmax(Q·Kᵀ / √d)·V`, on the
//! matrix units (`attention_kernels`, FlashAttention-2's algorithm), one kernel source for
//! NVIDIA, AMD and the CPU device, checked against the host.
//!
//! `cargo offload run -p attention [-- SEQ]` runs every variant (`f16` and `bf16`, head
//! dimension 64 and 128, causal and not) on 2 heads of SEQ queries and keys (a multiple of 64;
//! 128 by default) and checks every output against attention computed on the host in `f64`.
//! `-- --bench [SEQ,…]` times them: on a GPU 16,384 tokens in all (batch × sequence), 16
//! heads of dimension 128 or 32 of 64, as FlashAttention's own benchmarks count them, each at
//! its achieved TFLOP/s (`4·seq²·d` per head, half of it causal), sequences 1024 to 16384 by
//! default; on the CPU device 256 tokens of 4 or 8 heads, sequences 256 and 512. After the table one line per variant and
//! sequence for scripts: `attention tflops D=128 N=8192 f16 causal=0 312.4`.
//! `OFFLOAD_DEVICE=cpu|cuda:0|hip:0` picks the device.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use attention_kernels::{BLOCK_Q, THREADS};
use offload_rt::kernel::half::{bf16, f16};
use offload_rt::kernel::matrix::MmaInput;
use offload_rt::{Device, DeviceBuffer, DeviceCopy, DeviceKind, LaunchConfig};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("--bench") => bench(args.get(1).map(String::as_str)),
        seq => check(seq),
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

/// A sequence length the kernels' tiling takes: a positive multiple of 64.
fn parse_seq(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n > 0 && n % BLOCK_Q == 0 => Ok(n),
        _ => Err(format!(
            "sequence length `{text}`: give a positive multiple of {BLOCK_Q}"
        )),
    }
}

/// An input type of the kernels: `f16` or `bf16`.
trait Input: MmaInput + DeviceCopy + std::fmt::Debug {
    const NAME: &'static str;
    /// The precision the kernel's results are held to: the type's rounding of the
    /// probabilities and of the output.
    const TOLERANCE: f64;
    fn from_f32(x: f32) -> Self;
    fn to_f32(self) -> f32;
    /// Launches the kernel of head dimension `dim` (64 or 128).
    #[allow(clippy::too_many_arguments)]
    fn launch(
        device: &Device,
        config: LaunchConfig,
        dim: usize,
        seq: u32,
        causal: bool,
        q: &DeviceBuffer<Self>,
        k: &DeviceBuffer<Self>,
        v: &DeviceBuffer<Self>,
        o: &mut DeviceBuffer<Self>,
    ) -> offload_rt::Result<()>;
}

/// `log2(e) / √dim`: the scores' scale for the kernels' powers of two.
fn scale_log2(dim: usize) -> f32 {
    std::f32::consts::LOG2_E / (dim as f32).sqrt()
}

macro_rules! input {
    ($t:ty, $name:literal, $tolerance:expr) => {
        impl Input for $t {
            const NAME: &'static str = $name;
            const TOLERANCE: f64 = $tolerance;
            fn from_f32(x: f32) -> Self {
                <$t>::from_f32(x)
            }
            fn to_f32(self) -> f32 {
                <$t>::to_f32(self)
            }
            fn launch(
                device: &Device,
                config: LaunchConfig,
                dim: usize,
                seq: u32,
                causal: bool,
                q: &DeviceBuffer<$t>,
                k: &DeviceBuffer<$t>,
                v: &DeviceBuffer<$t>,
                o: &mut DeviceBuffer<$t>,
            ) -> offload_rt::Result<()> {
                let (scale, causal) = (scale_log2(dim), u32::from(causal));
                // SAFETY: each buffer holds heads × seq × dim elements, seq a multiple of 64,
                // and the grid is (seq / 64, heads) blocks of THREADS (`launch`).
                unsafe {
                    if dim == 64 {
                        attention_kernels::attention_d64::<$t>
                            .launch(device, config, seq, scale, causal, q, k, v, o)
                    } else {
                        attention_kernels::attention_d128::<$t>
                            .launch(device, config, seq, scale, causal, q, k, v, o)
                    }
                }
                .map(drop)
            }
        }
    };
}

input!(f16, "f16", 2e-3);
input!(bf16, "bf16", 1.5e-2);

/// One problem: `heads` heads of `seq` queries and keys of dimension `dim`.
#[derive(Clone, Copy)]
struct Shape {
    heads: usize,
    seq: usize,
    dim: usize,
    causal: bool,
}

impl Shape {
    fn elements(self) -> usize {
        self.heads * self.seq * self.dim
    }

    fn config(self) -> LaunchConfig {
        LaunchConfig {
            grid: ((self.seq / BLOCK_Q) as u32, self.heads as u32, 1),
            block: (THREADS, 1, 1),
            shared_mem_bytes: 0,
            cluster: (1, 1, 1),
        }
    }

    /// Floating-point operations of the two products, as FlashAttention counts them.
    fn flops(self) -> f64 {
        let full = 4.0 * (self.heads * self.seq * self.seq * self.dim) as f64;
        if self.causal { full / 2.0 } else { full }
    }

    fn describe(self) -> String {
        format!(
            "{} heads × {} × d{}{}",
            self.heads,
            self.seq,
            self.dim,
            if self.causal { ", causal" } else { "" }
        )
    }
}

/// Inputs in [-1, 1) with 8 significant bits, exact in `f16` and `bf16` alike.
fn inputs<T: Input>(count: usize, salt: u64) -> Vec<T> {
    (0..count)
        .map(|i| {
            let h = (i as u64 ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56;
            T::from_f32(h as f32 / 128.0 - 1.0)
        })
        .collect()
}

/// Attention on the host in `f64`: each row of `O` from its queries' scores.
fn host_attention(shape: Shape, q: &[f32], k: &[f32], v: &[f32]) -> Vec<f64> {
    let Shape { seq, dim, .. } = shape;
    let scale = 1.0 / (dim as f64).sqrt();
    let mut out = vec![0.0f64; shape.elements()];
    let mut scores = vec![0.0f64; seq];
    for head in 0..shape.heads {
        let base = head * seq * dim;
        for i in 0..seq {
            let keys = if shape.causal { i + 1 } else { seq };
            let row = &q[base + i * dim..base + (i + 1) * dim];
            for (j, score) in scores[..keys].iter_mut().enumerate() {
                let key = &k[base + j * dim..base + (j + 1) * dim];
                *score = row
                    .iter()
                    .zip(key)
                    .map(|(&a, &b)| f64::from(a) * f64::from(b))
                    .sum::<f64>()
                    * scale;
            }
            let max = scores[..keys].iter().copied().fold(f64::MIN, f64::max);
            let mut sum = 0.0;
            for score in &mut scores[..keys] {
                *score = (*score - max).exp();
                sum += *score;
            }
            let o = &mut out[base + i * dim..base + (i + 1) * dim];
            for (j, &p) in scores[..keys].iter().enumerate() {
                for (x, &vj) in o.iter_mut().zip(&v[base + j * dim..base + (j + 1) * dim]) {
                    *x += p / sum * f64::from(vj);
                }
            }
        }
    }
    out
}

/// The device's inputs and output of one problem.
struct Buffers<T: Input> {
    q: DeviceBuffer<T>,
    k: DeviceBuffer<T>,
    v: DeviceBuffer<T>,
    o: DeviceBuffer<T>,
}

impl<T: Input> Buffers<T> {
    fn new(device: &Device, shape: Shape) -> offload_rt::Result<(Self, [Vec<T>; 3])> {
        let count = shape.elements();
        let host = [
            inputs::<T>(count, 1),
            inputs::<T>(count, 2),
            inputs::<T>(count, 3),
        ];
        let buffers = Buffers {
            q: DeviceBuffer::from_slice(device, &host[0])?,
            k: DeviceBuffer::from_slice(device, &host[1])?,
            v: DeviceBuffer::from_slice(device, &host[2])?,
            o: DeviceBuffer::zeroed(device, count)?,
        };
        Ok((buffers, host))
    }

    fn launch(&mut self, device: &Device, shape: Shape) -> offload_rt::Result<()> {
        T::launch(
            device,
            shape.config(),
            shape.dim,
            shape.seq as u32,
            shape.causal,
            &self.q,
            &self.k,
            &self.v,
            &mut self.o,
        )
    }
}

const DIMS: [usize; 2] = [64, 128];

fn check(seq: Option<&str>) -> Outcome {
    let seq = seq.map_or(Ok(128), parse_seq)?;
    let device = Device::best()?;
    println!("device: {}", device.describe());
    let mut right = true;
    for dim in DIMS {
        for causal in [false, true] {
            let shape = Shape {
                heads: 2,
                seq,
                dim,
                causal,
            };
            right &= check_one::<f16>(&device, shape)?;
            right &= check_one::<bf16>(&device, shape)?;
        }
    }
    Ok(right)
}

/// Runs one variant and checks every output against the host's.
fn check_one<T: Input>(device: &Device, shape: Shape) -> Outcome {
    let (mut buffers, host) = Buffers::<T>::new(device, shape)?;
    buffers.launch(device, shape)?;
    if let Some(report) = device.last_launch() {
        println!("image: {report}");
    }
    let got = buffers.o.to_vec()?;
    let [q, k, v] = host.map(|values| values.iter().map(|x| x.to_f32()).collect::<Vec<_>>());
    let want = host_attention(shape, &q, &k, &v);
    let mut worst = 0.0f64;
    let mut wrong = 0usize;
    for (g, w) in got.iter().zip(&want) {
        let error = (f64::from(g.to_f32()) - w).abs();
        worst = worst.max(error);
        if error.is_nan() || error > T::TOLERANCE {
            wrong += 1;
        }
    }
    let what = format!(
        "attention: {}, {} inputs and output",
        shape.describe(),
        T::NAME
    );
    if wrong > 0 {
        println!(
            "{what}: {wrong} of {} outputs off by more than {} (worst {worst:.2e})",
            got.len(),
            T::TOLERANCE
        );
        return Ok(false);
    }
    // The bound, not the error itself: the line reads the same on every device.
    println!("{what}: OK (every output within {})", T::TOLERANCE);
    Ok(true)
}

fn bench(seqs: Option<&str>) -> Outcome {
    let device = Device::best()?;
    println!("device: {}", device.describe());
    let cpu = device.kind() == DeviceKind::Cpu;
    let seqs: Vec<usize> = match seqs {
        Some(list) => list.split(',').map(parse_seq).collect::<Result<_, _>>()?,
        None if cpu => vec![256, 512],
        None => vec![1024, 2048, 4096, 8192, 16384],
    };
    // Tokens (batch × sequence) and model width (heads × head dimension) of a run:
    // FlashAttention's benchmark sizes on a GPU, a sixty-fourth of the work on the CPU device.
    let (tokens, width, unit, giga) = if cpu {
        (256, 512, "GFLOP/s", 1e9)
    } else {
        (16384, 2048, "TFLOP/s", 1e12)
    };
    println!("| sequence | head dim | heads | causal | inputs | time | {unit} |");
    println!("|---|---|---|---|---|---|---|");
    let mut lines = Vec::new();
    for &seq in &seqs {
        for dim in DIMS.into_iter().rev() {
            for causal in [false, true] {
                let batch = (tokens / seq).max(1);
                let shape = Shape {
                    heads: batch * width / dim,
                    seq,
                    dim,
                    causal,
                };
                for (name, elapsed) in [
                    ("f16", time_variant::<f16>(&device, shape)?),
                    ("bf16", time_variant::<bf16>(&device, shape)?),
                ] {
                    let rate = shape.flops() / elapsed.as_secs_f64() / giga;
                    println!(
                        "| {seq} | {dim} | {} | {} | {name} | {:.3} ms | {rate:.1} |",
                        shape.heads,
                        if causal { "yes" } else { "no" },
                        elapsed.as_secs_f64() * 1e3,
                    );
                    lines.push(format!(
                        "attention {} D={dim} N={seq} {name} causal={} {rate:.1}",
                        if cpu { "gflops" } else { "tflops" },
                        u8::from(causal)
                    ));
                }
            }
        }
    }
    for line in lines {
        println!("{line}");
    }
    Ok(true)
}

/// The median time of one variant.
fn time_variant<T: Input>(
    device: &Device,
    shape: Shape,
) -> Result<Duration, Box<dyn std::error::Error>> {
    let (mut buffers, _) = Buffers::<T>::new(device, shape)?;
    Ok(time(device, || buffers.launch(device, shape))?)
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
