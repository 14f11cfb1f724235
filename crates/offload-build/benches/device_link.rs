//! The device link of a kernel crate: in-process (inkwell, LLVM 22) against `llvm-link`,
//! `opt -O3` and `llc` run as processes on the same bitcode, alternately, medians reported.
//! Both outputs must define the same kernels with the same parameters, and both must
//! assemble with `ptxas` where it is installed.
//!
//! `cargo bench -p offload-build --bench device_link [-- RUNS]`

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use offload_build::device_link::{self, GpuTarget, NvptxLinkOptions};
use offload_build::env::Env;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("device_link bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let runs: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map_or(Ok(7), |a| a.parse())?;
    let manifest =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gpu-kernels/Cargo.toml");
    let target = GpuTarget::parse("sm_80")?;
    let nested = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("device-link-bench")
        .join(target.triple());
    let inputs = device_link::device_inputs(&Env::detect(), &manifest, &target, &nested)?;
    let kernels = vec!["saxpy".to_owned(), "block_sum".to_owned()];
    let work = tempfile::tempdir()?;
    let files = device_link::write_external_inputs(&inputs, work.path())?;

    let mut in_process = Vec::with_capacity(runs);
    let mut external = Vec::with_capacity(runs);
    let mut outputs = None;
    for _ in 0..runs {
        let start = Instant::now();
        let ours = device_link::nvptx_link(
            &inputs,
            "sm_80",
            &NvptxLinkOptions {
                kernels: Some(kernels.clone()),
            },
        )?;
        in_process.push(start.elapsed());
        let start = Instant::now();
        let theirs = device_link::external_nvptx_link(&files, &kernels, "sm_80", work.path())?;
        external.push(start.elapsed());
        outputs = Some((ours, theirs));
    }
    let (ours, theirs) = outputs.ok_or("no runs")?;

    let signatures = |ptx: &str| {
        let mut k: Vec<(String, Vec<String>)> = device_link::ptx_kernel_names(ptx)
            .into_iter()
            .map(|k| (k.name, k.params))
            .collect();
        k.sort();
        k
    };
    if signatures(&ours) != signatures(&theirs) || signatures(&ours).len() != 2 {
        return Err("the two links produced different kernels".into());
    }
    if device_link::ptxas_path().is_some() {
        for (who, ptx) in [("in-process", &ours), ("llvm tools", &theirs)] {
            device_link::ptxas_assemble(ptx, "sm_80")
                .map_err(|e| format!("{who} PTX rejected by ptxas: {e}"))?;
        }
    } else {
        println!("note: ptxas not installed; the PTX was not assembled");
    }

    in_process.sort();
    external.sort();
    let (a, b) = (in_process[runs / 2], external[runs / 2]);
    println!("device link of the gpu-kernels fixture for sm_80, median of {runs} runs");
    println!(
        "  in-process (inkwell):      {:>8.1} ms",
        a.as_secs_f64() * 1e3
    );
    println!(
        "  llvm-link + opt + llc:     {:>8.1} ms",
        b.as_secs_f64() * 1e3
    );
    println!("  ratio: {:.2}", a.as_secs_f64() / b.as_secs_f64());
    Ok(())
}
