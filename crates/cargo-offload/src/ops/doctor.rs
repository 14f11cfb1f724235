//! `cargo offload doctor`: every prerequisite of a build and of a launch, found or not, with
//! the command that fixes what is missing. Exits 1 when builds cannot work.

use std::process::{Command, ExitCode};

use anyhow::Result;
use offload_build::tooling::command::{self, CommandError};
use offload_build::tooling::env::Env;
use offload_build::tooling::toolchain::LLVM_MAJOR;
use offload_toolchain::Tool;
use serde::Serialize;

/// What `cargo offload doctor` prints.
#[derive(Debug, Default, Clone)]
pub struct DoctorOptions {
    /// The checks as a JSON array (`check`, `status`, `detail`, `fix`) instead of text.
    pub json: bool,
}

/// How a finding affects builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    /// Present and usable.
    Ok,
    /// Missing or degraded, but builds still work (e.g. PTX without cubins, no GPU).
    Warning,
    /// Builds cannot work until it is fixed.
    Error,
}

#[derive(Debug, Serialize)]
struct Finding {
    check: String,
    status: Status,
    detail: String,
    /// The command that fixes it, when something needs fixing.
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

impl Finding {
    fn new(check: impl Into<String>, status: Status, detail: impl Into<String>) -> Self {
        Finding {
            check: check.into(),
            status,
            detail: detail.into(),
            fix: None,
        }
    }

    fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

/// Runs every check and prints the findings; exits 1 when builds cannot work.
pub fn doctor(options: &DoctorOptions) -> Result<ExitCode> {
    let findings = diagnose();
    if options.json {
        println!("{}", serde_json::to_string_pretty(&findings)?);
    } else {
        print!("{}", render(&findings));
    }
    let broken = findings.iter().any(|f| f.status == Status::Error);
    Ok(if broken {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn render(findings: &[Finding]) -> String {
    let mut out = String::new();
    let width = findings.iter().map(|f| f.check.len()).max().unwrap_or(0);
    for f in findings {
        let tag = match f.status {
            Status::Ok => "ok",
            Status::Warning => "warning",
            Status::Error => "error",
        };
        out.push_str(&format!("{tag:>8}  {:<width$}  {}\n", f.check, f.detail));
        if let Some(fix) = &f.fix {
            out.push_str(&format!("{:>8}  {:<width$}  fix: {fix}\n", "", ""));
        }
    }
    let errors = findings
        .iter()
        .filter(|f| f.status == Status::Error)
        .count();
    let warnings = findings
        .iter()
        .filter(|f| f.status == Status::Warning)
        .count();
    out.push_str(&if errors == 0 {
        format!("\nbuilds can work ({warnings} warning(s))\n")
    } else {
        format!("\nbuilds cannot work: {errors} error(s), {warnings} warning(s)\n")
    });
    out
}

fn diagnose() -> Vec<Finding> {
    let env = Env::detect();
    let nightly = env.nightly_toolchain();
    let mut findings = vec![host_toolchain()];
    let device_llvm = device_toolchain(&nightly, &mut findings);
    findings.push(llvm_agreement(device_llvm));
    for (tool, role, required) in [
        (Tool::LdLld, "links AMD code objects", true),
        (
            Tool::Ptxas,
            "assembles cubins (without it: PTX only)",
            false,
        ),
        (Tool::LlvmObjcopy, "object-layout bundles", false),
    ] {
        let mut finding = tool_finding(&env, tool, role, required);
        if tool == Tool::Ptxas && finding.status == Status::Ok {
            finding = ptxas_finding(finding);
        }
        findings.push(finding);
    }
    // The same search, version check and message as a build with CUDA/HIP/C++ sources.
    findings.push(match offload_build::tooling::toolchain::find_clang(&env) {
        Ok(clang) => Finding::new(
            "clang",
            Status::Ok,
            format!(
                "{} ({}, found through {}): compiles CUDA/HIP/C++ sources",
                clang.path.display(),
                clang.version,
                clang.found_via
            ),
        ),
        Err(e) => Finding::new("clang", Status::Warning, e.to_string()),
    });
    for (spec, name) in [("cuda:0", "CUDA driver"), ("hip:0", "HIP driver")] {
        findings.push(match offload_rt::Device::from_spec(spec) {
            Ok(device) => Finding::new(name, Status::Ok, device.describe()),
            Err(e) => Finding::new(
                name,
                Status::Warning,
                format!("{spec} unavailable ({e}); kernels run on the CPU device"),
            ),
        });
    }
    findings.push(device_linker_finding(&env));
    findings.push(native_finding());
    findings.push(Finding::new(
        "CPU device",
        Status::Ok,
        offload_rt::Device::cpu().describe(),
    ));
    findings
}

/// The device link executable build scripts run for GPU images and the CPU link, found as they
/// find it (this `cargo-offload` standing for the one that runs the build) and checked the
/// same way.
fn device_linker_finding(env: &Env) -> Finding {
    use offload_build::tooling::device_linker;
    let name = "device linker";
    let me = std::env::current_exe().ok();
    match device_linker::find_with(env, me.as_deref()) {
        Ok(linker) => Finding::new(
            name,
            Status::Ok,
            format!(
                "{} ({}, {}): links build scripts' GPU images and CPU images' IR",
                linker.path.display(),
                linker.origin,
                device_linker::protocol_line()
            ),
        ),
        Err(e) => Finding::new(name, Status::Error, e.to_string()).fix(format!(
            "cargo install cargo-offload --version {} --locked",
            device_linker::VERSION
        )),
    }
}

/// What `--offload-arch native` builds for here.
fn native_finding() -> Finding {
    let found = offload_rt::__internal::native_archs();
    let (archs, mut notes) = offload_build::tooling::arch::parse_found(&found.archs);
    let detail = if archs.is_empty() {
        "no GPU found: builds for host".to_owned()
    } else {
        archs
            .iter()
            .map(offload_build::OffloadArch::name)
            .collect::<Vec<_>>()
            .join(",")
    };
    notes.insert(0, detail);
    Finding::new("--offload-arch native", Status::Ok, notes.join("; "))
}

fn version_line(cmd: &mut Command) -> std::result::Result<String, String> {
    match command::run(cmd) {
        Ok(out) => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        Err(CommandError::Failed { status, stderr, .. }) => {
            let first = stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            Err(format!("exited with {status}: {}", first.trim()))
        }
        Err(e) => Err(e.to_string()),
    }
}

fn host_toolchain() -> Finding {
    match version_line(offload_toolchain::Tool::Rustc.command().arg("-V")) {
        Ok(v) => Finding::new("host toolchain", Status::Ok, v.trim()),
        Err(e) => Finding::new("host toolchain", Status::Error, format!("rustc: {e}"))
            .fix("rustup toolchain install stable"),
    }
}

/// The nightly of GPU builds and its `rust-src`; returns its LLVM major when known. Only GPU
/// images need them (without them the CPU device builds with the host toolchain), so what is
/// missing is a warning.
fn device_toolchain(nightly: &str, findings: &mut Vec<Finding>) -> Option<u32> {
    let install = format!(
        "cargo offload setup  (or rustup toolchain install {nightly} --profile minimal --component rust-src)"
    );
    let verbose = match version_line(
        offload_toolchain::Tool::Rustup
            .command()
            .args(["run", nightly, "rustc", "-vV"]),
    ) {
        Ok(v) => v,
        Err(e) => {
            findings.push(
                Finding::new(
                    "device toolchain",
                    Status::Warning,
                    format!(
                        "`{nightly}`: {e}; GPU images (--offload-arch sm_*, gfx*) need it, the \
                         CPU device (host) does not"
                    ),
                )
                .fix(install),
            );
            return None;
        }
    };
    let llvm = offload_build::tooling::toolchain::rustc_llvm_major(&verbose);
    let release = verbose.lines().next().unwrap_or("").trim();
    findings.push(Finding::new(
        "device toolchain",
        Status::Ok,
        format!("`{nightly}`: {release} (builds GPU images)"),
    ));
    let components = version_line(offload_toolchain::Tool::Rustup.command().args([
        "component",
        "list",
        "--installed",
        "--toolchain",
        nightly,
    ]))
    .unwrap_or_default();
    findings.push(if components.lines().any(|l| l.starts_with("rust-src")) {
        Finding::new("rust-src", Status::Ok, format!("installed for `{nightly}`"))
    } else {
        Finding::new(
            "rust-src",
            Status::Warning,
            format!(
                "not installed for `{nightly}`: GPU images need it (-Zbuild-std=core), the CPU \
                 device does not"
            ),
        )
        .fix(format!(
            "cargo offload setup  (or rustup component add rust-src --toolchain {nightly})"
        ))
    });
    llvm
}

/// rustc's LLVM against the LLVM the device link is linked with: bitcode from a newer LLVM
/// cannot be read by an older one.
fn llvm_agreement(rustc: Option<u32>) -> Finding {
    // The LLVM `offload-build` is compiled against; reading it from the library itself would
    // make this binary load LLVM at every start.
    let linked = LLVM_MAJOR;
    let check = "LLVM versions";
    match rustc {
        Some(r) if r == linked => Finding::new(
            check,
            Status::Ok,
            format!("device toolchain's rustc and the device link both use LLVM {linked}"),
        ),
        Some(r) => Finding::new(
            check,
            Status::Error,
            format!(
                "the device toolchain's rustc uses LLVM {r}, the device link LLVM {linked} \
                 (GPU targets need both at {LLVM_MAJOR})"
            ),
        )
        .fix(format!(
            "OFFLOAD_NIGHTLY_TOOLCHAIN=<a nightly whose `rustc -vV` says LLVM {LLVM_MAJOR}>"
        )),
        None => Finding::new(
            check,
            Status::Warning,
            format!("rustc's LLVM version unknown; the device link uses LLVM {linked}"),
        ),
    }
}

/// `ptxas` with the sms it makes cubins for: newer ones get PTX only.
fn ptxas_finding(found: Finding) -> Finding {
    match offload_build::tooling::toolchain::ptxas_supported_sms() {
        Ok(Some(info)) => Finding::new(
            found.check,
            Status::Ok,
            format!(
                "{} (CUDA {}; cubins for {}; newer sms get PTX only)",
                info.path.display(),
                info.version,
                if info.sms.is_empty() {
                    "the sms it accepts".to_owned()
                } else {
                    info.sms.join(" ")
                }
            ),
        ),
        Ok(None) => found,
        Err(e) => Finding::new(found.check, Status::Warning, e.to_string()),
    }
}

fn tool_finding(env: &Env, tool: Tool, role: &str, required: bool) -> Finding {
    let check = tool.program();
    let missing = if required {
        Status::Error
    } else {
        Status::Warning
    };
    match tool.find_with(&|name| env.get_untracked(name).map(Into::into)) {
        Ok(path) => match offload_toolchain::version_of(&path) {
            Ok(version) => {
                Finding::new(check, Status::Ok, format!("{} ({version})", path.display()))
            }
            Err(e) => Finding::new(check, missing, format!("{}: {e}", path.display())).fix(
                format!("sudo apt-get install --reinstall {}", tool.package()),
            ),
        },
        Err(e) => Finding::new(check, missing, format!("{role}: {e}")).fix(format!(
            "sudo apt-get install {}  (or set {})",
            tool.package(),
            tool.env_var()
        )),
    }
}
