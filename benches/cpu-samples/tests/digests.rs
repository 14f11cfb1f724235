//! Every case of the benchmark computes on the CPU device what its sequential loop computes
//! (the digest of its output), at each level of the CPU device this CPU runs: the CPU link's
//! regions checked on kernels as their authors write them, not only on the fixtures'.

use std::process::Command;

// The package's embedded images register through the runtime, which every target of the
// package links, this one too.
use offload_rt as _;

/// The program's `(case, digest)` lines for one round of the small sizes on `peer`, with
/// `OFFLOAD_CPU_LEVEL` set to `level` where given.
fn digests(peer: &str, level: Option<&str>) -> Vec<(String, String)> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cpu-samples"));
    command.args(["--peer", peer, "--size", "small", "1"]);
    if let Some(level) = level {
        command.env("OFFLOAD_CPU_LEVEL", level);
    }
    let output = command.output().expect("runs cpu-samples");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "cpu-samples --peer {peer} (level {level:?}) failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let case = line.split_whitespace().next()?;
            let digest = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix("digest="))?;
            Some((case.to_owned(), digest.to_owned()))
        })
        .collect()
}

/// The levels the program carries (its `[package.metadata.offload]` arch) that this CPU runs,
/// each with whether it does.
fn levels() -> Vec<(&'static str, bool)> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        vec![
            ("host", true),
            ("x86-64-v3", has!("avx2") && has!("fma") && has!("bmi2")),
            (
                "x86-64-v4",
                has!("avx512f") && has!("avx512bw") && has!("avx512vl"),
            ),
        ]
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        vec![("host", true)]
    }
}

#[test]
fn every_case_at_every_level_computes_what_the_sequential_loop_does() {
    let expected = digests("seq", None);
    assert_eq!(expected.len(), 12, "{expected:?}");
    for (level, runs_here) in levels() {
        if !runs_here {
            eprintln!("skipped: this CPU does not run the CPU device's `{level}` images");
            continue;
        }
        assert_eq!(digests("device", Some(level)), expected, "level {level}");
    }
}
