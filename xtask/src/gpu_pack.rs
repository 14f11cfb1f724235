//! `cargo xtask gpu-pack DIR`: everything a GPU can check, built here, into one directory small
//! enough to copy to a GPU machine in seconds, with the `run.sh` that runs it all there in one
//! command (the machine needs no Rust toolchain: the backends load the drivers at run time).
//!
//! `DIR/bin` holds, with their debug information stripped: the GPU test binaries of offload-rt
//! (run with `OFFLOAD_GPU_TESTS=1` / `OFFLOAD_HIP_TESTS=1` by `run.sh` where the machine has
//! such a GPU), the examples and `offload-rt-kernel-run` (every fixture kernel, its result's
//! digest), `gpu_bench`, and `parity_bench` with `DIR/parity` (the parity benchmark's kernels,
//! Rust's and CUDA C's, timed against each other). `OFFLOAD_DEVICE=cpu DIR/run.sh` runs the same on the CPU device,
//! which is how `cargo xtask test` checks the pack on every change.
//!
//! `run.sh` labels each step PASS, MISSED (a benchmark ran right but short of its goal), FAIL
//! or SKIP (no GPU of the kind the step needs) and exits 1 on a failure, else 3 on a missed
//! goal; its header says how. The labels stay in the script, which runs without Rust; the tests
//! below ask the script itself for them (`run.sh --classify`, `--summarize`) on canned outputs.

use std::path::{Path, PathBuf};
use std::process::Command;

use offload_toolchain::Tool;

use crate::{Result, cargo, path_with_cargo_offload, root, run, target_dir};

/// The most the pack may weigh: a GPU machine is lent for minutes, start-up and copy included.
pub const SIZE_LIMIT: u64 = 60 << 20;

/// Programs with GPU images, run on the GPU and on the CPU device and compared.
const PROGRAMS: &[&str] = &[
    "saxpy",
    "reduce",
    "half-sum",
    "mixed",
    "blas-interop",
    "gemm",
    "attention",
    "offload-rt-kernel-run",
];

/// offload-rt's tests that need a GPU (or say visibly why they skip).
const GPU_TESTS: &[&str] = &[
    "gpu_cuda",
    "gpu_cuda_fault",
    "gpu_stream_fault",
    "gpu_fault_stress",
    "gpu_examples",
    "gpu_hip",
];

const RUN_SH: &str = include_str!("gpu_pack/run.sh");

/// The test executables a `cargo test --no-run --message-format=json` printed, by target name
/// (`gpu_cuda` for `.../deps/gpu_cuda-0123abcd`).
fn test_executables(json: &str) -> Vec<(String, PathBuf)> {
    json.lines()
        .filter(|l| l.contains(r#""reason":"compiler-artifact""#) && l.contains(r#""test":true"#))
        .filter_map(|l| {
            let start = l.find(r#""executable":""#)? + r#""executable":""#.len();
            let path = PathBuf::from(&l[start..start + l[start..].find('"')?]);
            let file = path.file_name()?.to_str()?;
            let name = file.rsplit_once('-').map_or(file, |(n, _)| n).to_owned();
            Some((name, path))
        })
        .collect()
}

/// Copies `from` to `to` without its debug information (the GPU images are data, kept).
fn strip_into(objcopy: &Path, from: &Path, to: &Path) -> Result {
    run(Command::new(objcopy).arg("--strip-debug").arg(from).arg(to))
}

fn dir_size(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        let meta = entry
            .metadata()
            .map_err(|e| format!("{}: {e}", entry.path().display()))?;
        total += if meta.is_dir() {
            dir_size(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

/// `cargo` building the pack's programs: their build scripts link the GPU images in the
/// `cargo-offload-device` on `path` (the one built with `cargo-offload`), and the CPU images,
/// fallbacks on a GPU machine, in the source form of barriers: the IR form's carry the whole
/// link's line tables, which would take the pack over [`SIZE_LIMIT`]. The IR form is tested
/// on the CPU device by the workspace's tests.
fn pack_cargo(path: &std::ffi::OsStr) -> Command {
    let mut cmd = cargo();
    cmd.env("PATH", path)
        .env("OFFLOAD_CPU_BARRIERS_FORM", "source");
    cmd
}

/// Builds the pack into `dir` (its `bin`, `run.sh` and `MANIFEST.txt` replaced; results of an
/// earlier run left alone).
pub fn gpu_pack(dir: &Path) -> Result {
    let objcopy = Tool::LlvmObjcopy.find().map_err(|e| e.to_string())?;
    let path = path_with_cargo_offload()?;
    let mut build = pack_cargo(&path);
    build.args(["build", "--release", "--locked"]);
    for p in PROGRAMS {
        build.args(["-p", p]);
    }
    run(&mut build)?;
    run(pack_cargo(&path).args([
        "build",
        "--release",
        "--locked",
        "-p",
        "offload-rt",
        "--example",
        "gpu_bench",
        "--example",
        "parity_bench",
    ]))?;
    // The parity benchmark's images, Rust's and C's, made afresh by its test.
    run(cargo().args([
        "test",
        "--locked",
        "-p",
        "offload-build",
        "--test",
        "parity",
    ]))?;
    let mut tests = pack_cargo(&path);
    tests.args([
        "test",
        "--release",
        "--locked",
        "-p",
        "offload-rt",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ]);
    for t in GPU_TESTS {
        tests.args(["--test", t]);
    }
    let executables = test_executables(&crate::output(&mut tests)?);

    let bin = dir.join("bin");
    if bin.exists() {
        std::fs::remove_dir_all(&bin).map_err(|e| format!("{}: {e}", bin.display()))?;
    }
    std::fs::create_dir_all(&bin).map_err(|e| format!("{}: {e}", bin.display()))?;
    let release = target_dir().join("release");
    let mut contents = Vec::new();
    for program in PROGRAMS {
        strip_into(&objcopy, &release.join(program), &bin.join(program))?;
        contents.push(program.to_string());
    }
    for example in ["gpu_bench", "parity_bench"] {
        strip_into(
            &objcopy,
            &release.join("examples").join(example),
            &bin.join(example),
        )?;
        contents.push(example.to_owned());
    }
    let parity = dir.join("parity");
    std::fs::create_dir_all(&parity).map_err(|e| format!("{}: {e}", parity.display()))?;
    let work = target_dir().join("tmp").join("parity").join("work");
    for sm in ["sm_80", "sm_90"] {
        for lang in ["rust", "c"] {
            // The thirteen kernels, and the GEMM against its twin (`benches/parity/gemm.cu`).
            for (from, to) in [
                (
                    work.join(format!("{sm}-{lang}")),
                    format!("{sm}-{lang}.cubin"),
                ),
                (
                    work.join("gemm").join(format!("{sm}-{lang}")),
                    format!("gemm-{sm}-{lang}.cubin"),
                ),
            ] {
                let (from, to) = (from.join("image.cubin"), parity.join(to));
                std::fs::copy(&from, &to)
                    .map_err(|e| format!("{} to {}: {e}", from.display(), to.display()))?;
            }
        }
    }
    contents.push("parity/ (the parity kernels' and the GEMM's cubins, Rust's and C's)".to_owned());
    for test in GPU_TESTS {
        let Some((_, path)) = executables.iter().find(|(n, _)| n == test) else {
            return Err(format!("cargo built no executable for the test `{test}`"));
        };
        strip_into(&objcopy, path, &bin.join(test))?;
        contents.push(test.to_string());
    }

    // compute-sanitizer and the libraries it injects, so that a GPU machine with a driver but
    // no CUDA toolkit of its own checks the programs for memory errors and races too (one
    // with a toolkit uses its own: see run.sh).
    let sanitizer = dir.join("compute-sanitizer");
    if sanitizer.exists() {
        std::fs::remove_dir_all(&sanitizer).map_err(|e| format!("{}: {e}", sanitizer.display()))?;
    }
    match Tool::ComputeSanitizer.find() {
        Ok(program) => {
            std::fs::create_dir_all(&sanitizer)
                .map_err(|e| format!("{}: {e}", sanitizer.display()))?;
            copy_file(&program, &sanitizer.join("compute-sanitizer"))?;
            set_executable(&sanitizer.join("compute-sanitizer"))?;
            let Some(libs) = offload_toolchain::compute_sanitizer_libraries(&program) else {
                return Err(format!(
                    "{}: no libsanitizer-collection.so beside it or in Debian's place",
                    program.display()
                ));
            };
            for entry in std::fs::read_dir(&libs).map_err(|e| format!("{}: {e}", libs.display()))? {
                let path = entry.map_err(|e| e.to_string())?.path();
                if path.extension().is_some_and(|e| e == "so") {
                    copy_file(&path, &sanitizer.join(path.file_name().unwrap_or_default()))?;
                }
            }
            contents.push("compute-sanitizer/".to_owned());
        }
        Err(e) => eprintln!("xtask: gpu-pack: without compute-sanitizer ({e})"),
    }

    compress_files(&bin)?;
    if sanitizer.exists() {
        compress_files(&sanitizer)?;
    }

    let script = dir.join("run.sh");
    let script_text = RUN_SH.replace("PACKED_PROGRAMS", &PROGRAMS.join(" "));
    std::fs::write(&script, &script_text).map_err(|e| format!("{}: {e}", script.display()))?;
    set_executable(&script)?;
    let commit = Tool::Git
        .find()
        .ok()
        .and_then(|git| {
            Command::new(git)
                .args(["rev-parse", "HEAD"])
                .current_dir(root())
                .output()
                .ok()
        })
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    let manifest = format!(
        "cargo-offload GPU pack\ncommit: {commit}\nprograms and tests (bin/, gzip-compressed \
         until run.sh unpacks them): {}\n\
         run: ./run.sh (OFFLOAD_DEVICE=cpu ./run.sh without a GPU)\n",
        contents.join(" ")
    );
    let manifest_path = dir.join("MANIFEST.txt");
    std::fs::write(&manifest_path, manifest)
        .map_err(|e| format!("{}: {e}", manifest_path.display()))?;

    let size = dir_size(&bin)?
        + dir_size(&parity)?
        + if sanitizer.exists() {
            dir_size(&sanitizer)?
        } else {
            0
        }
        + script_text.len() as u64;
    eprintln!(
        "xtask: gpu-pack: {} ({:.1} MiB of at most {} MiB); on the GPU machine: {}/run.sh",
        dir.display(),
        size as f64 / f64::from(1 << 20),
        SIZE_LIMIT >> 20,
        dir.display()
    );
    if size > SIZE_LIMIT {
        return Err(format!(
            "the GPU pack is {size} bytes, over its limit of {SIZE_LIMIT}: a GPU machine is lent \
             for minutes, and the pack must copy in seconds"
        ));
    }
    Ok(())
}

/// Replaces each file of `dir` by its gzip-compressed copy `NAME.gz` (programs shrink to about
/// a third): the pack must fit what a GPU machine is lent with, and `run.sh` unpacks the files
/// with the `gzip` every Linux machine has before it runs anything.
fn compress_files(dir: &Path) -> Result {
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let path = entry.map_err(|e| e.to_string())?.path();
        if !path.is_file() {
            continue;
        }
        let mut name = path.file_name().unwrap_or_default().to_owned();
        name.push(".gz");
        let packed = path.with_file_name(name);
        let mut input =
            std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let file =
            std::fs::File::create(&packed).map_err(|e| format!("{}: {e}", packed.display()))?;
        let mut encoder = flate2::write::GzEncoder::new(file, flate2::Compression::default());
        std::io::copy(&mut input, &mut encoder)
            .and_then(|_| encoder.finish().map(drop))
            .map_err(|e| format!("{}: {e}", packed.display()))?;
        std::fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

fn copy_file(from: &Path, to: &Path) -> Result {
    std::fs::copy(from, to)
        .map(drop)
        .map_err(|e| format!("{} to {}: {e}", from.display(), to.display()))
}

#[cfg(unix)]
fn set_executable(path: &Path) -> Result {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(not(unix))]
fn set_executable(_: &Path) -> Result {
    Ok(())
}

/// Runs the pack's `run.sh` on the CPU device, as CI does.
pub fn run_on_cpu(dir: &Path) -> Result {
    run(Command::new("bash")
        .arg(dir.join("run.sh"))
        .env("OFFLOAD_DEVICE", "cpu"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each file becomes `NAME.gz`, which unpacks to the same bytes; the original is gone.
    #[test]
    fn files_are_replaced_by_their_gzip_copies() {
        use std::io::Read;
        let dir = std::env::temp_dir().join(format!("gpu-pack-gz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(dir.join("program"), &data).unwrap();
        compress_files(&dir).unwrap();
        assert!(!dir.join("program").exists());
        let mut unpacked = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(dir.join("program.gz")).unwrap())
            .read_to_end(&mut unpacked)
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(unpacked, data);
    }

    /// `run.sh` written to a directory of its own, with canned logs beside it: the pack runs on a
    /// GPU machine without Rust, so its labels live in the script, and these tests ask the script
    /// itself (`--classify`, `--summarize`), which starts nothing.
    struct Script {
        dir: PathBuf,
    }

    impl Script {
        fn new(tag: &str) -> Script {
            let dir =
                std::env::temp_dir().join(format!("xtask-gpu-pack-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("run.sh"),
                RUN_SH.replace("PACKED_PROGRAMS", &PROGRAMS.join(" ")),
            )
            .unwrap();
            Script { dir }
        }

        fn bash(&self, args: &[&str]) -> (String, Option<i32>) {
            let out = Command::new("bash")
                .arg(self.dir.join("run.sh"))
                .args(args)
                .current_dir(&self.dir)
                .output()
                .unwrap();
            assert!(
                out.stderr.is_empty(),
                "run.sh {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            (String::from_utf8(out.stdout).unwrap(), out.status.code())
        }

        /// The status and detail `run.sh` gives the benchmark `bench` that exited with `rc`
        /// after printing `log`, on a machine with or without an NVIDIA GPU.
        fn classify(&self, bench: &str, rc: u8, nvidia: bool, log: &str) -> (String, String) {
            let file = format!("{bench}-{rc}-{nvidia}.log");
            std::fs::write(self.dir.join(&file), log).unwrap();
            let (out, code) = self.bash(&[
                "--classify",
                bench,
                &rc.to_string(),
                if nvidia { "1" } else { "0" },
                &file,
            ]);
            assert_eq!(code, Some(0), "{out}");
            let line = out.strip_suffix('\n').unwrap_or(&out);
            assert!(!line.contains('\n'), "one line, not {out:?}");
            let (status, detail) = line.split_once('\t').unwrap();
            (status.to_owned(), detail.to_owned())
        }

        /// `run.sh`'s summary line of the steps `(name, status)`, and its exit status.
        fn summarize(&self, steps: &[(&str, &str)]) -> (String, Option<i32>) {
            let tsv: String = steps
                .iter()
                .map(|(name, status)| format!("{name}\t{status}\t1.0\tdetail\n"))
                .collect();
            std::fs::write(self.dir.join("results.tsv"), tsv).unwrap();
            self.bash(&["--summarize", "results.tsv"])
        }
    }

    impl Drop for Script {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// `gemm --bench` on a GPU with cuBLAS: the example's table, then its ratio lines.
    fn gemm_log(ratios: [&str; 2]) -> String {
        format!(
            "device: cuda:0 NVIDIA H200 (sm_90)\n\
             | size | this kernel | cuBLAS GemmEx | speed against it |\n\
             |---|---|---|---|\n\
             | 4096³ | 42.80 TFLOP/s | 696.40 TFLOP/s | 0.06× |\n\
             | 8192³ | 43.60 TFLOP/s | 779.10 TFLOP/s | 0.06× |\n\
             gemm ratio-to-cublas N=4096 {}\n\
             gemm ratio-to-cublas N=8192 {}\n",
            ratios[0], ratios[1]
        )
    }

    /// `parity_bench`'s output with `stencil5` at `ratio` of CUDA C's speed and its outputs
    /// `outputs` ("agree" or "DIFFER").
    fn parity_log(ratio: &str, outputs: &str) -> String {
        format!(
            "device: cuda:0 NVIDIA H200 (sm_90)\n\
             kernel            Rust ms       C ms   C/Rust  outputs\n\
             saxpy              0.1000     0.0986    0.986  agree\n\
             stencil5           0.1000     0.0916    {ratio}  {outputs}\n\
             transpose          0.1000     0.1000    1.000  agree\n\
             geometric mean of C/Rust (speed of Rust relative to C; goal at least 0.95): 0.965; \
             median of 20 launches each\n"
        )
    }

    fn gpu_bench_log(saxpy: &str) -> String {
        format!(
            "device: cuda:0 NVIDIA H200 (sm_90) (132 SMs, 143771 MiB), driver CUDA 13.0\n\
             launch overhead, empty kernel on default stream, host time per call, median of 100 x 500: \
             runtime 4.125 us, raw cuLaunchKernel 3.915 us, ratio 1.054x (target <= 1.1x: met)\n\
             saxpy, 256 Mi floats: one float per thread 2000.0 GB/s (60.0% of copy), four per thread \
             (float4) 2400.0 GB/s; device-to-device copy: 3000.0 GB/s; 80.0% of copy (target >= 90%: {saxpy})\n"
        )
    }

    #[test]
    fn gemm_under_its_goal_reads_missed() {
        let script = Script::new("gemm-missed");
        // The H200's first run: 0.06x of cuBLAS, which the pack had called a pass.
        let (status, detail) = script.classify("gemm", 0, true, &gemm_log(["0.0615", "0.0560"]));
        assert_eq!(status, "MISSED", "{detail}");
        assert!(detail.contains("N=4096 0.0615x"), "{detail}");
        assert!(detail.contains("N=8192 0.0560x"), "{detail}");
        // One size under the goal is enough.
        let (status, _) = script.classify("gemm", 0, true, &gemm_log(["0.7000", "0.5999"]));
        assert_eq!(status, "MISSED");
    }

    /// On an `sm_90a` image the Hopper kernel's lines are held to their own, higher goal.
    #[test]
    fn the_hopper_gemm_is_held_to_its_goal() {
        let script = Script::new("gemm-tma");
        let log = |tma: &str| {
            format!(
                "{}gemm-tma ratio-to-cublas N=4096 {tma} f16\n",
                gemm_log(["0.7000", "0.7100"])
            )
        };
        let (status, detail) = script.classify("gemm", 0, true, &log("0.8500"));
        assert_eq!(status, "MISSED", "{detail}");
        assert!(detail.contains("gemm_tma N=4096 0.8500x"), "{detail}");
        let (status, detail) = script.classify("gemm", 0, true, &log("0.9300"));
        assert_eq!(status, "PASS", "{detail}");
    }

    #[test]
    fn gemm_at_its_goal_passes() {
        let script = Script::new("gemm-pass");
        let (status, detail) = script.classify("gemm", 0, true, &gemm_log(["0.6000", "0.7100"]));
        assert_eq!(status, "PASS", "{detail}");
        assert!(detail.contains("at least 0.60x of cuBLAS"), "{detail}");
    }

    #[test]
    fn gemm_that_cannot_be_held_to_its_goal_on_an_nvidia_gpu_fails() {
        let script = Script::new("gemm-fail");
        let without_cublas = "device: cuda:0 NVIDIA H200 (sm_90)\n\
             cuBLAS: libcublas.so: cannot open shared object file; timing the kernel alone\n\
             | size | this kernel | cuBLAS GemmEx | speed against it |\n\
             |---|---|---|---|\n\
             | 4096³ | 42.80 TFLOP/s | — | — |\n";
        let (status, detail) = script.classify("gemm", 0, true, without_cublas);
        assert_eq!(status, "FAIL", "{detail}");
        assert!(detail.contains("unchecked"), "{detail}");
        let (status, _) = script.classify("gemm", 1, true, &gemm_log(["0.9", "0.9"]));
        assert_eq!(status, "FAIL");
        // Off an NVIDIA GPU there is no goal: the figures are recorded, not judged.
        let on_cpu = "device: cpu (2 threads)\n\
             | size | this kernel | host tiled loop | speed against it |\n\
             |---|---|---|---|\n\
             | 256³ | 0.18 GFLOP/s | 2.55 GFLOP/s | 0.07× |\n\
             gemm ratio-to-host-loop N=256 0.0706\n";
        let (status, detail) = script.classify("gemm", 0, false, on_cpu);
        assert_eq!(status, "PASS", "{detail}");
        assert!(detail.contains("no goal"), "{detail}");
    }

    /// `attention --bench` on an NVIDIA GPU: two rows, then the lines the goal reads.
    fn attention_log(f16: &str, bf16: &str) -> String {
        format!(
            "device: cuda:0 NVIDIA H200 (sm_90)\n\
             | sequence | head dim | heads | causal | inputs | time | TFLOP/s |\n\
             |---|---|---|---|---|---|---|\n\
             | 8192 | 128 | 32 | no | f16 | 2.000 ms | {f16} |\n\
             attention tflops D=128 N=8192 f16 causal=0 {f16}\n\
             attention tflops D=128 N=8192 bf16 causal=0 {bf16}\n\
             attention tflops D=128 N=8192 f16 causal=1 100.0\n"
        )
    }

    /// Attention at d128 over 8192 tokens is held to its goal (the causal lines are not); off
    /// an NVIDIA GPU its figures are recorded, not judged.
    #[test]
    fn attention_is_held_to_its_goal_at_d128_and_8k_tokens() {
        let script = Script::new("attention");
        let (status, detail) =
            script.classify("attention", 0, true, &attention_log("480.0", "470.5"));
        assert_eq!(status, "PASS", "{detail}");
        assert!(detail.contains("f16 480.0, bf16 470.5"), "{detail}");
        let (status, detail) =
            script.classify("attention", 0, true, &attention_log("480.0", "449.9"));
        assert_eq!(status, "MISSED", "{detail}");
        assert!(detail.contains("bf16 449.9 TFLOP/s"), "{detail}");
        let (status, detail) = script.classify("attention", 0, true, "device: cuda:0\n");
        assert_eq!(status, "FAIL", "{detail}");
        let (status, _) = script.classify("attention", 1, true, &attention_log("480.0", "470.5"));
        assert_eq!(status, "FAIL");
        let (status, detail) = script.classify("attention", 0, false, &attention_log("1.0", "1.0"));
        assert_eq!(status, "PASS", "{detail}");
        assert!(detail.contains("no goal"), "{detail}");
    }

    #[test]
    fn parity_bench_under_its_goal_reads_missed() {
        let script = Script::new("parity");
        let (status, detail) =
            script.classify("parity_bench", 0, true, &parity_log("0.916", "agree"));
        assert_eq!(status, "MISSED", "{detail}");
        assert!(detail.contains("stencil5 0.916x"), "{detail}");
        let (status, detail) =
            script.classify("parity_bench", 0, true, &parity_log("0.950", "agree"));
        assert_eq!(status, "PASS", "{detail}");
        assert!(detail.contains("3 kernels"), "{detail}");
        // Wrong outputs are a failure, fast or not.
        let (status, detail) =
            script.classify("parity_bench", 1, true, &parity_log("0.990", "DIFFER"));
        assert_eq!(status, "FAIL", "{detail}");
        assert!(detail.contains("stencil5"), "{detail}");
        let (status, _) = script.classify("parity_bench", 0, true, "device: cuda:0\n");
        assert_eq!(status, "FAIL", "a run that timed no kernel met no goal");
    }

    #[test]
    fn gpu_bench_with_a_target_missed_reads_missed() {
        let script = Script::new("gpu-bench");
        let (status, detail) = script.classify("gpu_bench", 1, true, &gpu_bench_log("MISSED"));
        assert_eq!(status, "MISSED", "{detail}");
        assert!(detail.starts_with("saxpy: "), "{detail}");
        let (status, _) = script.classify("gpu_bench", 0, true, &gpu_bench_log("met"));
        assert_eq!(status, "PASS");
        // An error is a failure, whatever was missed before it.
        let error = gpu_bench_log("MISSED") + "gpu_bench: CUDA_ERROR_LAUNCH_FAILED\n";
        let (status, detail) = script.classify("gpu_bench", 1, true, &error);
        assert_eq!(status, "FAIL", "{detail}");
        assert!(detail.contains("CUDA_ERROR_LAUNCH_FAILED"), "{detail}");
    }

    #[test]
    fn exit_2_is_a_skip_only_without_an_nvidia_gpu() {
        let script = Script::new("exit-2");
        for bench in ["gpu_bench", "parity_bench"] {
            let log = format!("{bench}: no CUDA device to benchmark: CUDA_ERROR_NO_DEVICE\n");
            let (status, detail) = script.classify(bench, 2, false, &log);
            assert_eq!(status, "SKIP", "{bench}: {detail}");
            let (status, detail) = script.classify(bench, 2, true, &log);
            assert_eq!(status, "FAIL", "{bench}: {detail}");
            assert!(detail.contains("NVIDIA GPU"), "{detail}");
        }
        // The GEMM example never skips: its exit 2 is a failure anywhere.
        let (status, _) = script.classify("gemm", 2, false, "");
        assert_eq!(status, "FAIL");
    }

    #[test]
    fn the_summary_counts_missed_goals_apart_and_sets_the_exit_status() {
        let script = Script::new("summary");
        let (line, code) = script.summarize(&[
            ("test gpu_cuda", "PASS"),
            ("bench gemm", "MISSED"),
            ("sanitize memcheck saxpy", "SKIP"),
        ]);
        assert_eq!(code, Some(3), "{line}");
        assert!(
            line.contains("1 passed, 1 MISSED a goal, 0 FAILED, 1 skipped"),
            "{line}"
        );
        assert!(line.contains("goals missed: bench gemm"), "{line}");
        assert!(
            !line.contains("passed;") && !line.contains("every step"),
            "{line}"
        );

        let (line, code) = script.summarize(&[("bench gemm", "MISSED"), ("program saxpy", "FAIL")]);
        assert_eq!(code, Some(1), "{line}");
        assert!(line.contains("failed: program saxpy"), "{line}");

        let (line, code) = script.summarize(&[("test gpu_cuda", "PASS"), ("collectives", "SKIP")]);
        assert_eq!(code, Some(0), "{line}");
        assert!(line.contains("every step that ran passed"), "{line}");
    }

    /// What `run.sh` reads is what the benchmarks print.
    #[test]
    fn the_benchmarks_print_what_run_sh_reads() {
        let read = |path: &str| std::fs::read_to_string(root().join(path)).unwrap();
        let gemm = read("examples/gemm/src/main.rs");
        assert!(gemm.contains(r#""{name} ratio-to-{reference} N={n} {ratio:.4} {input}""#));
        assert!(gemm.contains(r#"Kernel::Pipelined => "gemm".to_owned()"#));
        assert!(gemm.contains(r#"Kernel::Tma => "gemm-tma".to_owned()"#));
        assert!(gemm.contains(r#"if cpu { "host-loop" } else { "cublas" }"#));
        assert!(RUN_SH.contains(r#"$2 == "ratio-to-cublas""#));
        let parity = read("crates/offload-rt/examples/parity_bench.rs");
        assert!(parity.contains(r#"if same { "agree" } else { "DIFFER" }"#));
        assert!(parity.contains("geometric mean of C/Rust (speed of Rust relative to C; goal at least 0.95): {geomean:.3}"));
        assert!(RUN_SH.contains("parity_goal=0.95\n"));
        let gpu_bench = read("crates/offload-rt/examples/gpu_bench.rs");
        assert!(gpu_bench.contains(r#"if pass { "met" } else { "MISSED" }"#));
        assert!(gpu_bench.contains(r#"eprintln!("gpu_bench: {e}")"#));
    }

    #[test]
    fn test_executables_are_named_by_target() {
        let json = concat!(
            r#"{"reason":"compiler-artifact","target":{"name":"gpu_cuda"},"profile":{"test":true},"executable":"/t/release/deps/gpu_cuda-0a1b2c"}"#,
            "\n",
            r#"{"reason":"compiler-artifact","target":{"name":"offload_rt"},"profile":{"test":false},"executable":null}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
        );
        assert_eq!(
            test_executables(json),
            [(
                "gpu_cuda".to_owned(),
                PathBuf::from("/t/release/deps/gpu_cuda-0a1b2c")
            )]
        );
    }
}
