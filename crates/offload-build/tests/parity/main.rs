//! The parity benchmark (`benches/parity/README.md`): the Rust kernels of
//! `benches/parity/kernels` against their CUDA and HIP twins compiled by clang-22, per kernel
//! and architecture: registers, scratch, instructions, code size, memory accesses by address
//! space, device-build time; on NVIDIA, also the kernels that can panic against CUDA C that
//! checks with `assert` (no limit), every kernel linked with the panic strategy `trap` against
//! both C twins (`TRAP_*` limits), and the fast GEMM of `examples/gemm` and the attention
//! kernels of `examples/attention` against their CUDA C twins (`benches/parity/gemm.cu`,
//! `gemm_tma.cu`, `attention.cu`), and the GEMM and attention on AMD against their HIP C twins
//! (`gemm.hip`, `attention.hip`). Writes `target/parity/parity.md` and `parity.json`, prints
//! the tables, and fails when a figure is missing or a limit of `limits.rs` is broken.
//!
//! Unlike the other GPU-tool tests, a missing tool fails this one everywhere: the benchmark
//! has nothing to say without its tools, and CI installs them (`cargo xtask setup --cuda`).
#![cfg(feature = "llvm")]

mod checks;
#[path = "../common/mod.rs"]
mod common;
mod limits;
mod measure;
mod report;

use std::path::{Path, PathBuf};

use offload_build::PanicStrategy;
use offload_build::tooling::device_link;
use offload_build::tooling::env::Env;
use offload_format::DeviceFamily;
use offload_toolchain::Tool;

use measure::{Inputs, Outcome};

/// The benchmark's kernels, in the table's order: each is a `#[kernel]` of the Rust crate and
/// an `extern "C" __global__` function of both C files.
pub const KERNELS: [&str; 13] = [
    "saxpy",
    "matmul",
    "reduce_shared",
    "reduce_warp",
    "transpose",
    "stencil5",
    "histogram",
    "scan",
    "gather",
    "gauss",
    "affine",
    "divide",
    "reverse",
];

/// The kernels that can panic, also written in CUDA C that makes the same checks with
/// `assert` (`benches/parity/parity_assert.cu`): measured against that C too, on NVIDIA, and
/// reported apart from the table, with no limit.
pub const ASSERT_TWINS: [&str; 3] = ["stencil5", "gather", "divide"];

/// The GEMM kernels of `examples/gemm/kernels` (the entry points of its generic `gemm`),
/// measured on NVIDIA against their CUDA C twins of `benches/parity/gemm.cu`, which have
/// their names, and reported apart, with the limits `GEMM_*`.
pub const GEMM_KERNELS: [&str; 2] = ["gemm__f16", "gemm__bf16"];

/// The Hopper GEMM kernels of `examples/gemm/kernels` (its generic `gemm_tma`), measured on
/// `sm_90a` against their CUDA C twins of `benches/parity/gemm_tma.cu`, with the limits
/// `GEMM_*`.
pub const GEMM_TMA_KERNELS: [&str; 2] = ["gemm_tma__f16", "gemm_tma__bf16"];

/// The attention kernels of `examples/attention/kernels` (the entry points of its generic
/// `attention_d64` and `attention_d128`), measured on NVIDIA against their CUDA C twins of
/// `benches/parity/attention.cu` with the GEMM's limits, in the GEMM's table, and on AMD
/// against their HIP C twins of `benches/parity/attention.hip` with the AMD GEMM's.
pub const ATTENTION_KERNELS: [&str; 4] = [
    "attention_d64__f16",
    "attention_d64__bf16",
    "attention_d128__f16",
    "attention_d128__bf16",
];

const NVIDIA: [&str; 2] = ["sm_80", "sm_90"];
/// The AMD processors the GEMM and attention are measured on against their HIP C twins
/// (`benches/parity/gemm.hip`, `attention.hip`), with the limits `AMD_GEMM_*`.
const AMD_GEMM: [&str; 2] = ["gfx90a", "gfx942"];
const AMD: [&str; 3] = ["gfx90a", "gfx942", "gfx1100"];

pub const COMMAND: &str = "cargo test -p offload-build --test parity -- --nocapture";

fn require_tools() {
    let nightly = common::device_toolchain_present();
    assert!(
        nightly,
        "the parity benchmark needs the device toolchain {} with rust-src (`cargo offload setup`)",
        offload_toolchain::DEVICE_TOOLCHAIN
    );
    for tool in [
        Tool::Clang,
        Tool::LdLld,
        Tool::LlvmObjdump,
        Tool::Ptxas,
        Tool::Cuobjdump,
    ] {
        if let Err(e) = tool.find() {
            panic!(
                "the parity benchmark needs {tool:?}: {e} (`cargo xtask setup --cuda` installs \
                 package {})",
                tool.package()
            );
        }
    }
}

/// `target/parity`, beside the test's own temporary directory.
fn output_dir() -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().unwrap_or(tmp).join("parity")
}

#[test]
fn parity() {
    require_tools();
    let started = std::time::Instant::now();
    let clang = offload_build::tooling::foreign::clang::find(&Env::detect())
        .unwrap_or_else(|e| panic!("clang: {e}"));
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("parity");
    let work = base.join("work");
    let _ = std::fs::remove_dir_all(&work);
    let mut results: Vec<(&str, Outcome)> = Vec::new();
    // Every kernel linked again with `panic = "trap"`, beside its `report` figures and C's.
    let mut trapped: Vec<(&str, Vec<measure::TrapRow>)> = Vec::new();
    for (archs, triple_arch) in [(&NVIDIA[..], "sm_80"), (&AMD[..], "gfx90a")] {
        let target = device_link::parse_gpu_arch(triple_arch).unwrap();
        let (rust, rustc_seconds) = measure::rust_inputs(&target, &base.join("nested"));
        let inputs = Inputs {
            kernels: &KERNELS,
            rust: &rust,
            rustc_seconds,
            clang: &clang,
            work: &work,
        };
        for &arch in archs {
            let outcome = if is_nvidia(arch) {
                measure::nvidia(arch, &inputs)
            } else {
                measure::amd(arch, &inputs)
            };
            if let Outcome::Measured(rows, _) = &outcome {
                let trap = measure::rust_side(arch, &inputs, PanicStrategy::Trap);
                trapped.push((arch, measure::trap_rows(rows, trap)));
            }
            results.push((arch, outcome));
        }
    }

    let mut asserted: Vec<(&str, Vec<measure::Row>)> = Vec::new();
    for (arch, outcome) in &results {
        if let Outcome::Measured(rows, _) = outcome
            && is_nvidia(arch)
        {
            let c = measure::nvidia_assert_twins(arch, &ASSERT_TWINS, &clang, &work)
                .unwrap_or_else(|e| panic!("{arch}: the assert twins: {e}"));
            asserted.push((arch, measure::against(rows, &ASSERT_TWINS, c)));
        }
    }

    for (arch, rows) in &mut trapped {
        let Some((_, twins)) = asserted.iter().find(|(a, _)| a == arch) else {
            continue;
        };
        for row in rows.iter_mut() {
            row.c_assert = twins
                .iter()
                .find(|t| t.kernel == row.kernel)
                .map(|t| t.c.clone());
        }
    }

    let nested = base.join("nested");
    let gemm_rust = measure::example_rust_inputs("examples/gemm/kernels", "sm_80", &nested);
    let attention_rust =
        measure::example_rust_inputs("examples/attention/kernels", "sm_80", &nested);
    let gemm: Vec<(&str, measure::GemmOutcome)> = NVIDIA
        .iter()
        .map(|&arch| (arch, &GEMM_KERNELS[..], "gemm.cu", &gemm_rust))
        .chain([("sm_90a", &GEMM_TMA_KERNELS[..], "gemm_tma.cu", &gemm_rust)])
        .chain(NVIDIA.iter().map(|&arch| {
            (
                arch,
                &ATTENTION_KERNELS[..],
                "attention.cu",
                &attention_rust,
            )
        }))
        .map(|(arch, kernels, twin, rust)| {
            let outcome = measure::nvidia_gemm(arch, kernels, twin, rust, &clang, &work);
            (arch, outcome)
        })
        .collect();

    let gemm_amd_rust = measure::example_rust_inputs("examples/gemm/kernels", "gfx90a", &nested);
    let attention_amd_rust =
        measure::example_rust_inputs("examples/attention/kernels", "gfx90a", &nested);
    let amd_gemm: Vec<(&str, Vec<measure::AmdGemmRow>)> = AMD_GEMM
        .iter()
        .map(|&arch| (arch, &GEMM_KERNELS[..], "gemm.hip", &gemm_amd_rust))
        .chain(AMD_GEMM.iter().map(|&arch| {
            (
                arch,
                &ATTENTION_KERNELS[..],
                "attention.hip",
                &attention_amd_rust,
            )
        }))
        .map(|(arch, kernels, twin, rust)| {
            let rows = measure::amd_gemm(arch, kernels, twin, rust, &clang, &work);
            (arch, rows)
        })
        .collect();

    let markdown = report::markdown(&results, &asserted, &trapped, &gemm, &amd_gemm, COMMAND);
    let out = output_dir();
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("parity.md"), &markdown).unwrap();
    let json = report::json(&results, &asserted, &trapped, &gemm, &amd_gemm);
    std::fs::write(out.join("parity.json"), json).unwrap();
    println!("{markdown}");
    println!(
        "parity: {:.0} s; written to {} (parity.md, parity.json); images and listings in {}",
        started.elapsed().as_secs_f64(),
        out.display(),
        work.display()
    );

    let mut problems = Vec::new();
    for (arch, outcome) in &results {
        if let Outcome::Measured(rows, _) = outcome {
            problems.extend(checks::sanity(arch, rows));
        }
    }
    for (arch, rows) in &asserted {
        problems.extend(checks::sanity(arch, rows));
        problems.extend(checks::asserts_kept(arch, rows));
    }
    for (arch, rows) in &trapped {
        let against_c: Vec<measure::Row> = rows.iter().map(measure::TrapRow::against_c).collect();
        problems.extend(checks::sanity(arch, &against_c));
        problems.extend(checks::trap_costs_no_more(arch, rows));
    }
    for (arch, outcome) in &gemm {
        problems.extend(checks::gemm(arch, outcome));
    }
    for (arch, rows) in &amd_gemm {
        problems.extend(checks::amd_gemm(arch, rows));
    }
    let (broken, mut today) = checks::limits(&results);
    problems.extend(broken);
    let (broken, trap_today) = checks::trap_limits(&trapped);
    problems.extend(broken);
    today.push_str(&trap_today);
    if !problems.is_empty() {
        std::fs::write(out.join("limits-today.rs"), &today).unwrap();
        panic!(
            "parity benchmark: {} problem(s):\n  {}\n\nThe NOT_MET lists of \
             crates/offload-build/tests/parity/limits.rs that today's figures allow \
             (also in {}):\n{today}",
            problems.len(),
            problems.join("\n  "),
            out.join("limits-today.rs").display()
        );
    }
}

/// Whether `arch` names an NVIDIA GPU (`sm_NN`).
fn is_nvidia(arch: &str) -> bool {
    DeviceFamily::of_gpu_arch_name(arch) == Some(DeviceFamily::Nvidia)
}
