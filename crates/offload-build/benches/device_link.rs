//! The device link of a kernel crate: in-process (inkwell, LLVM 22) against `llvm-link`,
//! `opt -O3` and `llc` run as processes on the same bitcode, alternately, medians reported.
//! Both outputs must define the same kernels with the same parameters, and both must
//! assemble with `ptxas` where it is installed. The external pipeline lives here, not in the
//! library, since nothing else runs it.
//!
//! `cargo bench -p offload-build --bench device_link [-- RUNS]`

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use offload_build::tooling::command::run as run_command;
use offload_build::tooling::device_link::{
    self, DeviceInput, HOST_GLOBALS, NvptxLinkOptions, find_tool, ptx_features,
};
use offload_build::tooling::env::Env;
use offload_toolchain::Tool;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("device_link bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let runs: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map_or(Ok(7), |a| a.parse())?;
    let manifest =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gpu-kernels/Cargo.toml");
    let target = device_link::parse_gpu_arch("sm_80")?;
    let nested = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("device-link-bench")
        .join(target.triple());
    let inputs = device_link::device_inputs(&Env::detect(), &manifest, &target, &nested)?;
    let kernels = vec!["saxpy".to_owned(), "block_sum".to_owned()];
    let work = tempfile::tempdir()?;
    let files = write_external_inputs(&inputs, work.path())?;

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
                ..Default::default()
            },
        )?;
        in_process.push(start.elapsed());
        let start = Instant::now();
        let theirs = external_nvptx_link(&files, &kernels, "sm_80", work.path())?;
        external.push(start.elapsed());
        outputs = Some((ours, theirs));
    }
    let (ours, theirs) = outputs.ok_or("no runs")?;

    let signatures = |ptx: &str| {
        let mut k: Vec<(String, Vec<String>)> = offload_format::image::ptx::entries(ptx)
            .into_iter()
            .map(|k| (k.name, k.params.into_iter().map(|p| p.ty).collect()))
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

/// Writes the inputs as bitcode files for [`external_nvptx_link`], in the order `llvm-link`
/// wants them: it links its first file whole and the rest only as needed, so eager inputs
/// first.
fn write_external_inputs(
    inputs: &[DeviceInput],
    work: &Path,
) -> Result<Vec<PathBuf>, Box<dyn Error>> {
    std::fs::create_dir_all(work).map_err(|e| format!("creating `{}`: {e}", work.display()))?;
    let ordered = inputs
        .iter()
        .filter(|i| !i.lazy)
        .chain(inputs.iter().filter(|i| i.lazy));
    let mut files = Vec::with_capacity(inputs.len());
    for (i, input) in ordered.enumerate() {
        let path = work.join(format!("in{i}.bc"));
        std::fs::write(&path, &input.bytes)
            .map_err(|e| format!("writing `{}`: {e}", path.display()))?;
        files.push(path);
    }
    Ok(files)
}

/// The NVPTX link through LLVM's separate tools as processes, for comparison with
/// [`device_link::nvptx_link`]: `llvm-link --only-needed`, `opt` (internalize all but
/// `kernels` and [`HOST_GLOBALS`], `default<O3>`) and `llc` for `sm` on bitcode `files` (from
/// [`write_external_inputs`]); no shared-memory rewrite happens. Returns the PTX.
fn external_nvptx_link(
    files: &[PathBuf],
    kernels: &[String],
    sm: &str,
    work: &Path,
) -> Result<String, Box<dyn Error>> {
    let mut link = Command::new(find_tool(Tool::LlvmLink)?);
    link.arg("--only-needed").args(files);
    let linked = work.join("linked.bc");
    run_command(link.arg("-o").arg(&linked))?;
    let optimized = work.join("opt.bc");
    let api = kernels
        .iter()
        .map(String::as_str)
        .chain(HOST_GLOBALS.iter().copied())
        .collect::<Vec<_>>()
        .join(",");
    run_command(
        Command::new(find_tool(Tool::Opt)?)
            .arg(format!("--internalize-public-api-list={api}"))
            .arg("--passes=internalize,default<O3>")
            .arg(&linked)
            .arg("-o")
            .arg(&optimized),
    )?;
    let ptx = work.join("out.ptx");
    run_command(
        Command::new(find_tool(Tool::Llc)?)
            .arg("-O3")
            .arg(format!("-mcpu={sm}"))
            .arg(format!("-mattr={}", ptx_features(sm)?))
            .arg(&optimized)
            .arg("-o")
            .arg(&ptx),
    )?;
    std::fs::read_to_string(&ptx).map_err(|e| format!("reading `{}`: {e}", ptx.display()).into())
}
