//! `cargo xtask fuzz [SECONDS]`: every target of the fuzz crate (`fuzz/`, as its `Cargo.toml`
//! lists them) built by the pinned cargo-fuzz, installed when missing, and run for SECONDS
//! each (default [`DEFAULT_SECONDS`]), as many at once as there are cores. Each target starts
//! from a temporary copy of its corpus, so what it adds leaves the tree clean. A crash fails
//! the task; its input stays in `fuzz/artifacts/<target>/` (ignored by git).

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

use crate::{NIGHTLY, Result, root, run};

/// The cargo-fuzz the targets are built with.
pub const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// Seconds each target runs in `cargo xtask test`.
pub const DEFAULT_SECONDS: u64 = 20;

/// The fuzz crate, from the repository root.
const FUZZ_DIR: &str = "fuzz";

/// No sanitizer: the code fuzzed is safe Rust but for the runtime registry's reads through
/// the descriptor's pointers, which the harness keeps valid. AddressSanitizer makes the build
/// from scratch 3.5 minutes instead of 2.2 to 2.6 on two cores and the targets up to 13 times
/// slower (6 in the median), more than a smoke test in CI can spend; longer runs use it
/// (`cargo fuzz run TARGET`, whose default it is). Debug assertions stay on (cargo-fuzz's
/// default), so an arithmetic overflow is a crash.
const SANITIZER: &str = "none";

/// Builds and runs every fuzz target for `seconds` each.
pub fn fuzz(seconds: u64) -> Result {
    let cargo_fuzz = crate::pinned_tool(
        "cargo-fuzz",
        CARGO_FUZZ_VERSION,
        &format!("cargo-fuzz {CARGO_FUZZ_VERSION}"),
        &[],
    )?;
    // cargo-fuzz runs `cargo` and `rustc` from PATH: the rustup proxies, told the toolchain.
    let nightly = || crate::with_nightly(&cargo_fuzz);
    let targets = list_targets(&mut nightly())?;
    let host = crate::host_triple()?;
    let target_dir = crate::target_dir().join("fuzz");
    let started = Instant::now();
    run(nightly()
        .args(["build", "--fuzz-dir", FUZZ_DIR, "--sanitizer", SANITIZER])
        .args(["--target", &host, "--target-dir"])
        .arg(&target_dir))?;
    eprintln!(
        "xtask: fuzz: {} targets built in {} s",
        targets.len(),
        started.elapsed().as_secs()
    );

    let scratch = std::env::temp_dir().join(format!("offload-fuzz-{}", std::process::id()));
    let bin_dir = target_dir.join(&host).join("release");
    let queue = Mutex::new(targets.iter());
    let failures = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..workers.min(targets.len()) {
            s.spawn(|| {
                loop {
                    // Its own statement: the queue's lock is released before the target runs.
                    let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
                    let Some(target) = next else { break };
                    if let Err(e) = run_target(target, &bin_dir, &scratch, seconds) {
                        failures.lock().unwrap_or_else(|e| e.into_inner()).push(e);
                    }
                }
            });
        }
    });
    let _ = std::fs::remove_dir_all(&scratch);
    let failures = failures.into_inner().unwrap_or_else(|e| e.into_inner());
    if failures.is_empty() {
        eprintln!(
            "xtask: fuzz: {} targets, {seconds} s each, {} s in all: no crash",
            targets.len(),
            started.elapsed().as_secs()
        );
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// The targets the fuzz crate's `Cargo.toml` declares (`cargo fuzz list`).
fn list_targets(cargo_fuzz: &mut Command) -> Result<Vec<String>> {
    let out = cargo_fuzz
        .args(["list", "--fuzz-dir", FUZZ_DIR])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("could not run cargo-fuzz: {e}"))?;
    let targets: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    if !out.status.success() || targets.is_empty() {
        return Err(format!(
            "`cargo fuzz list` found no fuzz target in {FUZZ_DIR}/ ({})",
            out.status
        ));
    }
    Ok(targets)
}

/// Runs one built target for `seconds` from a copy of its corpus under `scratch`; its output
/// goes to a log there, shown only when it fails.
fn run_target(target: &str, bin_dir: &Path, scratch: &Path, seconds: u64) -> Result {
    let corpus = scratch.join(target).join("corpus");
    copy_files(&root().join(FUZZ_DIR).join("corpus").join(target), &corpus)?;
    let artifacts = root().join(FUZZ_DIR).join("artifacts").join(target);
    std::fs::create_dir_all(&artifacts)
        .map_err(|e| format!("creating {}: {e}", artifacts.display()))?;
    let log_path = scratch.join(target).join("log");
    let log = std::fs::File::create(&log_path)
        .map_err(|e| format!("creating {}: {e}", log_path.display()))?;
    let err_log = log
        .try_clone()
        .map_err(|e| format!("{}: {e}", log_path.display()))?;
    // libFuzzer wants the prefix as written, with its trailing slash.
    let mut prefix = artifacts.into_os_string();
    prefix.push("/");
    let mut artifact_prefix = std::ffi::OsString::from("-artifact_prefix=");
    artifact_prefix.push(&prefix);
    let status = Command::new(bin_dir.join(target))
        .arg(&corpus)
        .arg(format!("-max_total_time={seconds}"))
        .args(["-timeout=10", "-print_final_stats=1"])
        .arg(artifact_prefix)
        .stdout(log)
        .stderr(err_log)
        .status()
        .map_err(|e| format!("could not run fuzz target {target}: {e}"))?;
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    let runs = text
        .lines()
        .find_map(|l| l.strip_prefix("stat::number_of_executed_units:"))
        .map_or("?", str::trim);
    if status.success() {
        eprintln!("xtask: fuzz: {target:<16} {runs:>9} runs, no crash");
        return Ok(());
    }
    // From the panic or libFuzzer's report on: what went wrong, where, and the input.
    let lines: Vec<&str> = text.lines().collect();
    let from = lines
        .iter()
        .position(|l| l.contains("panicked at") || l.contains("ERROR:"))
        .unwrap_or(lines.len().saturating_sub(40));
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "xtask: fuzz: {target} failed ({status}):");
    for line in &lines[from..] {
        let _ = writeln!(stderr, "    {line}");
    }
    let input = lines
        .iter()
        .find_map(|l| l.split_once("Test unit written to "))
        .map(|(_, path)| path.trim().to_owned())
        .unwrap_or_else(|| format!("{FUZZ_DIR}/artifacts/{target}/<file>"));
    Err(format!(
        "fuzz target {target} failed ({status}); rerun its input with `cargo +{NIGHTLY} fuzz \
         run --sanitizer {SANITIZER} {target} {input}`"
    ))
}

/// Copies the files of `from` (none when it does not exist) into a new directory `to`.
fn copy_files(from: &Path, to: &Path) -> Result {
    std::fs::create_dir_all(to).map_err(|e| format!("creating {}: {e}", to.display()))?;
    let Ok(entries) = std::fs::read_dir(from) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_file() {
            std::fs::copy(&path, to.join(entry.file_name()))
                .map_err(|e| format!("copying {}: {e}", path.display()))?;
        }
    }
    Ok(())
}
