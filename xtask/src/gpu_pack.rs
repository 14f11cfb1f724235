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
    "offload-rt-kernel-run",
];

/// offload-rt's tests that need a GPU (or say visibly why they skip).
const GPU_TESTS: &[&str] = &[
    "gpu_cuda",
    "gpu_cuda_fault",
    "gpu_stream_fault",
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

/// Builds the pack into `dir` (its `bin`, `run.sh` and `MANIFEST.txt` replaced; results of an
/// earlier run left alone).
pub fn gpu_pack(dir: &Path) -> Result {
    let objcopy = Tool::LlvmObjcopy.find().map_err(|e| e.to_string())?;
    // The programs' build scripts link their GPU images in the `cargo-offload-device` built
    // with `cargo-offload`.
    let path = path_with_cargo_offload()?;
    let mut build = cargo();
    build
        .env("PATH", &path)
        .args(["build", "--release", "--locked"]);
    for p in PROGRAMS {
        build.args(["-p", p]);
    }
    run(&mut build)?;
    run(cargo().env("PATH", &path).args([
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
    let mut tests = cargo();
    tests.env("PATH", &path).args([
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
            let from = work.join(format!("{sm}-{lang}")).join("image.cubin");
            let to = parity.join(format!("{sm}-{lang}.cubin"));
            std::fs::copy(&from, &to)
                .map_err(|e| format!("{} to {}: {e}", from.display(), to.display()))?;
        }
    }
    contents.push("parity/ (the parity kernels' cubins, Rust's and C's)".to_owned());
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
        "cargo-offload GPU pack\ncommit: {commit}\nprograms and tests (bin/): {}\n\
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
