//! `cargo offload profile` end to end on the CPU device: the reduce example (three kernels)
//! built once, profiled with `--detail --json`, its table checked, its hot lines traced to the
//! kernels' source, and its HTML report opened in headless Chromium.

use std::path::Path;
use std::process::Command;

mod common;
use common::{check, target_dir, workspace_root};
use offload_toolchain::Tool;

const KERNELS: [&str; 3] = ["block_sum", "warp_shuffle_sum", "helper_sum"];

/// Whether `perf` can sample here (a container may forbid `perf_event_open`); says why not.
fn perf_samples(perf: &Path, dir: &Path) -> bool {
    let out = Command::new(perf)
        .args(["record", "-q", "-e", "cpu-clock", "-o"])
        .arg(dir.join("probe.data"))
        .args(["--", "true"])
        .output()
        .expect("perf starts");
    if !out.status.success() {
        eprintln!(
            "skipped: the hot lines: perf cannot sample on this machine: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    out.status.success()
}

#[test]
fn profile_times_each_kernel_finds_its_hot_lines_and_draws_its_report() {
    let scratch = tempfile::tempdir().unwrap();
    let report = scratch.path().join("reduce.html");
    // The dev profile keeps line tables in the CPU device's image.
    let out = Command::new(env!("CARGO_BIN_EXE_cargo-offload"))
        .args([
            "offload",
            "profile",
            "--detail",
            "--json",
            "--offload-arch",
            "host",
            "-p",
            "reduce",
            "--target-dir",
        ])
        .arg(target_dir("e2e-examples"))
        .arg("--report")
        .arg(&report)
        .args(["--", "bench", "300000", "10"])
        .current_dir(workspace_root())
        .env("OFFLOAD_DEVICE", "cpu")
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    let stdout = check(&out, "cargo offload profile");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("reduce (shared memory): sum of 300000 elements"),
        "the program's own output goes to stderr under --json:\n{stderr}"
    );
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("--json prints JSON");
    assert_eq!(json["timer"], "offload-rt");
    assert!(
        json["device"].as_str().unwrap().starts_with("cpu"),
        "{json}"
    );
    let rows = json["kernels"].as_array().unwrap();
    let mut share = 0.0;
    for kernel in KERNELS {
        let row = rows
            .iter()
            .find(|r| r["kernel"] == kernel)
            .unwrap_or_else(|| panic!("{kernel} in the table: {json}"));
        assert_eq!(row["module"], "reduce_kernels");
        // The checked launch and ten timed ones.
        assert_eq!(row["launches"], 11, "{row}");
        assert!(row["total_ns"].as_u64().unwrap() > 0, "{row}");
        // 300000 u32 in and one u64 out per launch; one addition per element, declared.
        assert_eq!(row["bytes"], 11 * (300_000 * 4 + 8), "{row}");
        assert_eq!(row["flops"], 11 * 300_000, "{row}");
        assert!(row["bytes_per_second"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["flops_per_second"].as_f64().unwrap() > 0.0, "{row}");
        share += row["share"].as_f64().unwrap();
    }
    assert!((share - 1.0).abs() < 1e-6, "the shares add up: {share}");
    assert!(json["copies"]["count"].as_u64().unwrap() >= 4, "{json}");

    // The hot lines: perf's samples mapped through the image's line tables to the kernels'
    // own lines.
    let sampled = Tool::Perf
        .for_test()
        .is_some_and(|perf| perf_samples(&perf, scratch.path()));
    if sampled {
        let source = "examples/reduce/kernels/src/lib.rs";
        let text = std::fs::read_to_string(workspace_root().join(source)).unwrap();
        let hot = json["hot_lines"].as_array().unwrap();
        assert!(!hot.is_empty(), "hot lines: {json}");
        for line in hot {
            let location = line["location"].as_str().unwrap();
            let (file, number) = location.rsplit_once(':').unwrap();
            assert!(file.ends_with(source), "{line}");
            let number: usize = number.parse().unwrap();
            assert!((1..=text.lines().count()).contains(&number), "{line}");
            assert!(
                KERNELS.contains(&line["kernel"].as_str().unwrap()),
                "{line}"
            );
            assert_eq!(
                line["source"].as_str(),
                Some(text.lines().nth(number - 1).unwrap().trim()),
                "{line}"
            );
        }
        // The slowest kernel, by far, is named with its lines.
        assert!(hot.iter().any(|l| l["kernel"] == "helper_sum"), "{json}");
    }

    // The report, in a real browser: its script ran without error, every kernel is named and
    // both plots are drawn.
    let page = std::fs::read_to_string(&report).unwrap();
    assert!(
        !page.contains("<link") && !page.contains("src="),
        "self-contained"
    );
    let Some(chromium) = Tool::Chromium.for_test() else {
        return;
    };
    let dom = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ])
        .arg(format!(
            "--user-data-dir={}",
            scratch.path().join("chromium").display()
        ))
        .arg("--dump-dom")
        .arg(format!("file://{}", report.display()))
        .output()
        .unwrap();
    let dom = check(&dom, "chromium --dump-dom");
    assert!(
        dom.contains("data-report-ready=\"1\""),
        "the script ran:\n{dom}"
    );
    assert!(
        !dom.contains("data-script-error="),
        "no script error:\n{dom}"
    );
    assert!(dom.contains("data-drawn-launches=\"33\""), "{dom}");
    for kernel in KERNELS {
        assert!(
            dom.contains(&format!("reduce_kernels::{kernel}</td>")),
            "{kernel}"
        );
        assert!(
            dom.contains(&format!("class=\"kernel\" data-kernel=\"{kernel}\"")),
            "{kernel} on the roofline"
        );
    }
    assert!(
        dom.contains("class=\"roof\""),
        "the roofline's roof is drawn"
    );
}

/// On a GPU whose vendor's profiler is missing, `profile` says which package installs it, and
/// builds nothing first.
#[test]
fn profile_names_the_package_of_a_missing_gpu_profiler() {
    for (device, variable, package) in [
        ("cuda", "OFFLOAD_NSYS", "nsight-systems"),
        ("hip", "OFFLOAD_ROCPROFV3", "rocprofiler-sdk"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_cargo-offload"))
            .args(["offload", "profile", "-p", "no-such-package"])
            .current_dir(workspace_root())
            .env("OFFLOAD_DEVICE", device)
            .env(variable, "/nonexistent/profiler")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            stderr.contains(&format!("Debian package `{package}`"))
                && stderr.contains("OFFLOAD_DEVICE=cpu"),
            "{stderr}"
        );
        assert!(!stderr.contains("Compiling"), "nothing is built: {stderr}");
    }
}
