//! The runtime's log lines (`OFFLOAD_LOG`).

/// Whether `OFFLOAD_LOG` asks for log lines (set, not empty, not `0`).
fn log_enabled() -> bool {
    std::env::var_os("OFFLOAD_LOG").is_some_and(|v| !v.is_empty() && v != "0")
}

/// One `offload-rt:` line on stderr when [`log_enabled`].
pub(crate) fn log(line: std::fmt::Arguments<'_>) {
    if log_enabled() {
        eprintln!("offload-rt: {line}");
    }
}
