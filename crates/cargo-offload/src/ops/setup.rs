//! `cargo offload setup`: installs what GPU images need and the CPU device does not: the
//! pinned nightly with `rust-src` (through rustup), and with `--system` the distribution's
//! packages of clang, lld and LLVM 22 and of the CUDA toolkit's `ptxas`.
//!
//! The commands are planned first (`plan`, a pure function of the options, the distribution
//! and what this machine already has), then printed (`--dry-run`) or run; when some need
//! `sudo`, the user is asked once, before any runs.

use std::fmt;
use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::process::{Command, ExitCode};

use anyhow::Result;
use offload_build::tooling::command::{self, CommandError};
use offload_toolchain::Tool;

#[derive(Debug, Clone)]
/// What `cargo offload setup` installs and how.
pub struct SetupOptions {
    /// Also install the distribution's packages: clang, lld and LLVM 22 with LLVM's
    /// development files, and the CUDA toolkit (`ptxas`). Debian and Ubuntu through apt-get;
    /// for other distributions the commands are printed.
    pub system: bool,
    /// Use `sudo` without asking first (needed without a terminal).
    pub yes: bool,
    /// Print the commands without running them.
    pub dry_run: bool,
}

/// Where the apt.llvm.org entry is written, for distributions without LLVM 22 packages.
const LLVM_SOURCES: &str = "/etc/apt/sources.list.d/offload-llvm-22.sources";
/// The key apt.llvm.org signs with, and where it is kept.
const LLVM_KEY_URL: &str = "https://apt.llvm.org/llvm-snapshot.gpg.key";
const LLVM_KEYRING: &str = "/usr/share/keyrings/apt.llvm.org.asc";

/// The distribution's packages of GPU builds: clang, lld and LLVM 22 and, when `cuda`, the
/// CUDA toolkit.
fn system_packages(cuda: bool) -> Vec<&'static str> {
    let mut packages = vec![
        Tool::Clang.package(),
        Tool::LdLld.package(),
        Tool::LlvmConfig.package(),
    ];
    packages.extend_from_slice(offload_toolchain::DEVICE_LINK_LIBRARY_PACKAGES);
    if cuda {
        packages.push(Tool::Ptxas.package());
    }
    packages
}

/// What `/etc/os-release` says of the distribution.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct OsRelease {
    id: String,
    id_like: Vec<String>,
    codename: Option<String>,
    ubuntu_codename: Option<String>,
    pretty_name: Option<String>,
}

impl OsRelease {
    /// Reads os-release's `KEY=value` lines (values optionally quoted).
    pub(crate) fn parse(text: &str) -> OsRelease {
        let mut release = OsRelease::default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let value = value
                .trim()
                .trim_matches(|c| c == '"' || c == '\'')
                .to_owned();
            match key.trim() {
                "ID" => release.id = value,
                "ID_LIKE" => {
                    release.id_like = value.split_whitespace().map(str::to_owned).collect()
                }
                "VERSION_CODENAME" if !value.is_empty() => release.codename = Some(value),
                "UBUNTU_CODENAME" if !value.is_empty() => release.ubuntu_codename = Some(value),
                "PRETTY_NAME" => release.pretty_name = Some(value),
                _ => {}
            }
        }
        release
    }

    /// The distribution family the set-up knows, if any.
    pub(crate) fn distro(&self) -> Distro {
        let like = |name: &str| self.id == name || self.id_like.iter().any(|l| l == name);
        let name = self.pretty_name.clone().unwrap_or_else(|| {
            if self.id.is_empty() {
                "this system".to_owned()
            } else {
                self.id.clone()
            }
        });
        if like("ubuntu") {
            match self
                .ubuntu_codename
                .clone()
                .or_else(|| self.codename.clone())
            {
                Some(codename) => Distro::Ubuntu { codename },
                None => Distro::Unknown { name },
            }
        } else if like("debian") {
            match self.codename.clone() {
                Some(codename) => Distro::Debian { codename },
                None => Distro::Unknown { name },
            }
        } else {
            Distro::Unknown { name }
        }
    }
}

/// A distribution family, with the suite name its apt sources use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Distro {
    Debian { codename: String },
    Ubuntu { codename: String },
    Unknown { name: String },
}

/// What this machine already has, which decides the commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Facts {
    /// Running as root: no `sudo`.
    pub root: bool,
    /// apt offers `clang-22` (else apt.llvm.org is added).
    pub llvm_packaged: bool,
    /// The apt components holding the CUDA toolkit are enabled (Debian's `contrib non-free`,
    /// Ubuntu's `multiverse`).
    pub cuda_components: bool,
    /// A working `ptxas` is already found (NVIDIA's own installer, say): no CUDA package.
    pub ptxas_found: bool,
    /// The newer CUDA tools for `sm_90a` are installed under
    /// [`offload_toolchain::CUDA_PIP_PREFIX`], or a `ptxas` found knows `sm_90a` already.
    pub sm_90a_ptxas_found: bool,
}

/// One command of the set-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Step {
    /// Needs root: run through `sudo` unless the set-up runs as root.
    pub sudo: bool,
    pub env: Vec<(&'static str, &'static str)>,
    pub program: String,
    pub args: Vec<String>,
    /// Written to its standard input (`tee`'s file contents).
    pub input: Option<String>,
}

impl Step {
    fn new(program: &str, args: &[&str]) -> Step {
        Step {
            sudo: false,
            env: Vec::new(),
            program: program.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            input: None,
        }
    }

    fn privileged(mut self, root: bool) -> Step {
        self.sudo = !root;
        self
    }

    /// `apt-get` with no questions asked.
    fn apt(args: &[&str], root: bool) -> Step {
        let mut step = Step::new("apt-get", args).privileged(root);
        step.env.push(("DEBIAN_FRONTEND", "noninteractive"));
        step
    }

    /// Writes `contents` to the root-owned `path`.
    fn write_file(path: &str, contents: String, root: bool) -> Step {
        let mut step = Step::new("tee", &[path]).privileged(root);
        step.input = Some(contents);
        step
    }

    /// The command as it runs: `sudo` and the environment first.
    fn command(&self) -> Command {
        let mut cmd = if self.sudo {
            let mut cmd = offload_toolchain::Tool::Sudo.command();
            cmd.args(self.env.iter().map(|(k, v)| format!("{k}={v}")))
                .arg(&self.program);
            cmd
        } else {
            let mut cmd = Command::new(&self.program);
            cmd.envs(self.env.iter().copied());
            cmd
        };
        cmd.args(&self.args);
        cmd
    }
}

/// As a shell line (a here-document for the input).
impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.sudo {
            f.write_str("sudo ")?;
        }
        for (k, v) in &self.env {
            write!(f, "{k}={v} ")?;
        }
        f.write_str(&self.program)?;
        for arg in &self.args {
            write!(f, " {arg}")?;
        }
        if let Some(input) = &self.input {
            write!(f, " >/dev/null <<'EOF'\n{}EOF", input)?;
        }
        Ok(())
    }
}

/// The set-up's commands, and for a distribution it does not know, what to install by hand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub steps: Vec<Step>,
    pub by_hand: Option<String>,
}

/// The rustup command that installs the nightly of GPU builds with `rust-src`.
fn rustup_step(nightly: &str) -> Step {
    Step::new(
        "rustup",
        &[
            "toolchain",
            "install",
            nightly,
            "--profile",
            "minimal",
            "--component",
            "rust-src",
        ],
    )
}

/// The commands that install the distribution's packages on Debian or Ubuntu.
fn apt_steps(distro: &Distro, facts: &Facts) -> Vec<Step> {
    let (Distro::Debian { codename } | Distro::Ubuntu { codename }) = distro else {
        return Vec::new();
    };
    let root = facts.root;
    let cuda = !facts.ptxas_found;
    let mut steps = Vec::new();
    if !facts.llvm_packaged {
        steps
            .push(Step::new("curl", &["-fsSL", "-o", LLVM_KEYRING, LLVM_KEY_URL]).privileged(root));
        steps.push(Step::write_file(
            LLVM_SOURCES,
            format!(
                "Types: deb\nURIs: http://apt.llvm.org/{codename}/\n\
                 Suites: llvm-toolchain-{codename}-22\nComponents: main\nSigned-By: {LLVM_KEYRING}\n"
            ),
            root,
        ));
    }
    if cuda && !facts.cuda_components {
        match distro {
            Distro::Debian { .. } => steps.push(Step::write_file(
                offload_toolchain::DEBIAN_CONTRIB_NON_FREE_SOURCES,
                offload_toolchain::debian_contrib_non_free_entry(codename),
                root,
            )),
            _ => steps.push(
                Step::new("add-apt-repository", &["-y", "-n", "multiverse"]).privileged(root),
            ),
        }
    }
    steps.push(Step::apt(&["update", "-q"], root));
    let mut install = vec!["install", "-y", "-q", "--no-install-recommends"];
    install.extend(system_packages(cuda));
    steps.push(Step::apt(&install, root));
    if !facts.sm_90a_ptxas_found {
        // The distribution's CUDA (11.8 on Debian 12) assembles no `sm_90a`: CUDA 12.9's
        // `ptxas` and CUDA 13's `cuobjdump` from the Python package index, beside it.
        let pip = offload_toolchain::cuda_pip_install_args();
        steps.push(Step::new(Tool::Python3.program(), &pip).privileged(root));
    }
    steps
}

/// The set-up's commands for these options, on `distro`, given `facts`.
pub(crate) fn plan(nightly: &str, system: bool, distro: &Distro, facts: &Facts) -> Plan {
    let mut steps = Vec::new();
    let mut by_hand = None;
    if system {
        match distro {
            Distro::Unknown { name } => {
                let debian = Distro::Debian {
                    codename: "<codename>".to_owned(),
                };
                let example = apt_steps(
                    &debian,
                    &Facts {
                        root: false,
                        llvm_packaged: true,
                        cuda_components: true,
                        ptxas_found: false,
                        sm_90a_ptxas_found: false,
                    },
                );
                by_hand = Some(format!(
                    "cargo offload setup does not know how to install packages on {name}: install \
                     clang, lld and LLVM 22 (with `llvm-config-22` and LLVM's development files) \
                     and the CUDA toolkit (`ptxas`) with its package manager. On Debian these are:\n{}",
                    example
                        .iter()
                        .map(|s| format!("  {s}\n"))
                        .collect::<String>()
                ));
            }
            _ => steps.extend(apt_steps(distro, facts)),
        }
    }
    steps.push(rustup_step(nightly));
    Plan { steps, by_hand }
}

/// What `--dry-run` prints.
pub(crate) fn render(plan: &Plan) -> String {
    let mut out = String::new();
    if let Some(text) = &plan.by_hand {
        out.push_str(text);
        out.push('\n');
    }
    for step in &plan.steps {
        out.push_str(&format!("{step}\n"));
    }
    out
}

/// Why the set-up stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SetupError {
    #[error(
        "cargo offload setup needs sudo for these commands, and there is no terminal to ask on:\n\
         {commands}rerun with --yes to allow it, or run them yourself"
    )]
    NoTerminal { commands: String },
    #[error("not using sudo: nothing was installed")]
    Declined,
    #[error("could not start `{command}`: {source}")]
    Start {
        command: String,
        source: Box<CommandError>,
    },
    #[error("lost `{command}` while it ran: {source}")]
    Wait {
        command: String,
        source: std::io::Error,
    },
    #[error("could not write the input of `{command}`: {source}")]
    Input {
        command: String,
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status})")]
    Failed {
        command: String,
        status: std::process::ExitStatus,
    },
}

/// Plans the installation, then prints it (`dry_run`) or runs it.
pub fn setup(options: &SetupOptions) -> Result<ExitCode> {
    let nightly = offload_build::tooling::env::Env::detect().nightly_toolchain();
    let release = std::fs::read_to_string("/etc/os-release")
        .or_else(|_| std::fs::read_to_string("/usr/lib/os-release"))
        .unwrap_or_default();
    let distro = OsRelease::parse(&release).distro();
    let facts = if options.system {
        probe(&distro)
    } else {
        Facts::default()
    };
    let plan = plan(&nightly, options.system, &distro, &facts);
    if options.dry_run {
        print!("{}", render(&plan));
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(text) = &plan.by_hand {
        eprintln!("{text}");
    }
    let privileged: Vec<&Step> = plan.steps.iter().filter(|s| s.sudo).collect();
    if !privileged.is_empty() && !options.yes {
        ask_for_sudo(&privileged)?;
    }
    for step in &plan.steps {
        run(step)?;
    }
    eprintln!(
        "cargo offload setup: done; `cargo offload doctor` checks what GPU builds need{}",
        if options.system {
            ""
        } else {
            " (`cargo offload setup --system` installs clang, lld, LLVM 22 and ptxas)"
        }
    );
    Ok(ExitCode::SUCCESS)
}

fn ask_for_sudo(steps: &[&Step]) -> Result<(), SetupError> {
    let commands: String = steps.iter().map(|s| format!("  {s}\n")).collect();
    if !std::io::stdin().is_terminal() {
        return Err(SetupError::NoTerminal { commands });
    }
    eprint!("cargo offload setup will run with sudo:\n{commands}Proceed? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    // An unreadable answer is no.
    let _ = std::io::stdin().lock().read_line(&mut answer);
    if matches!(answer.trim(), "y" | "Y" | "yes" | "Yes") {
        Ok(())
    } else {
        Err(SetupError::Declined)
    }
}

fn run(step: &Step) -> Result<(), SetupError> {
    let shown = step.to_string();
    let line = shown.lines().next().unwrap_or_default().to_owned();
    eprintln!("cargo offload setup: running {line}");
    let mut cmd = step.command();
    if step.input.is_some() {
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null());
    }
    let mut child = command::spawn(&mut cmd).map_err(|source| SetupError::Start {
        command: line.clone(),
        source: Box::new(source),
    })?;
    if let (Some(input), Some(mut stdin)) = (&step.input, child.stdin.take()) {
        stdin
            .write_all(input.as_bytes())
            .map_err(|source| SetupError::Input {
                command: line.clone(),
                source,
            })?;
    }
    let status = child.wait().map_err(|source| SetupError::Wait {
        command: line.clone(),
        source,
    })?;
    if status.success() {
        Ok(())
    } else {
        Err(SetupError::Failed {
            command: line,
            status,
        })
    }
}

/// What this machine has: read-only probes (`id -u`, `apt-cache policy`, apt's sources).
fn probe(distro: &Distro) -> Facts {
    let output = |program: &str, args: &[&str]| {
        command::run(Command::new(program).args(args))
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let root = output("id", &["-u"]).is_some_and(|o| o.trim() == "0");
    let llvm_packaged = output("apt-cache", &["policy", Tool::Clang.package()])
        .is_some_and(|o| apt_has_candidate(&o));
    let sources = offload_toolchain::apt_sources();
    let cuda_components = match distro {
        Distro::Ubuntu { .. } => sources.iter().any(|s| s.contains("multiverse")),
        _ => offload_toolchain::debian_contrib_non_free_enabled(&sources),
    };
    Facts {
        root,
        llvm_packaged,
        cuda_components,
        ptxas_found: Tool::Ptxas.find().is_ok(),
        sm_90a_ptxas_found: offload_toolchain::cuda_pip_tools_installed(),
    }
}

/// Whether `apt-cache policy`'s output offers a version to install.
fn apt_has_candidate(policy: &str) -> bool {
    policy.lines().any(|l| {
        l.trim()
            .strip_prefix("Candidate:")
            .is_some_and(|v| v.trim() != "(none)")
    })
}

#[cfg(test)]
mod tests {
    use offload_toolchain::DEVICE_TOOLCHAIN;

    use super::*;

    const DEBIAN: &str = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n\
                          VERSION_CODENAME=bookworm\n";
    const UBUNTU: &str = "NAME=\"Ubuntu\"\nID=ubuntu\nID_LIKE=debian\n\
                          VERSION_CODENAME=noble\nUBUNTU_CODENAME=noble\n";
    const MINT: &str = "ID=linuxmint\nID_LIKE=\"ubuntu debian\"\nVERSION_CODENAME=wilma\n\
                        UBUNTU_CODENAME=noble\n";
    const FEDORA: &str = "NAME=\"Fedora Linux\"\nID=fedora\nPRETTY_NAME=\"Fedora Linux 42\"\n";

    fn lines(plan: &Plan) -> Vec<String> {
        plan.steps.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn os_release_names_the_distribution() {
        assert_eq!(
            OsRelease::parse(DEBIAN).distro(),
            Distro::Debian {
                codename: "bookworm".into()
            }
        );
        assert_eq!(
            OsRelease::parse(UBUNTU).distro(),
            Distro::Ubuntu {
                codename: "noble".into()
            }
        );
        // A derivative uses its base's suites.
        assert_eq!(
            OsRelease::parse(MINT).distro(),
            Distro::Ubuntu {
                codename: "noble".into()
            }
        );
        assert_eq!(
            OsRelease::parse(FEDORA).distro(),
            Distro::Unknown {
                name: "Fedora Linux 42".into()
            }
        );
        assert!(matches!(
            OsRelease::parse("").distro(),
            Distro::Unknown { .. }
        ));
    }

    #[test]
    fn without_system_only_the_nightly_is_installed() {
        let distro = OsRelease::parse(DEBIAN).distro();
        let plan = plan("nightly-2026-05-20", false, &distro, &Facts::default());
        assert_eq!(
            lines(&plan),
            ["rustup toolchain install nightly-2026-05-20 --profile minimal --component rust-src"]
        );
        assert_eq!(plan.by_hand, None);
        assert!(plan.steps.iter().all(|s| !s.sudo));
    }

    #[test]
    fn debian_gets_contrib_non_free_and_the_packages_through_sudo() {
        let distro = OsRelease::parse(DEBIAN).distro();
        let facts = Facts {
            llvm_packaged: true,
            ..Facts::default()
        };
        let plan = plan(DEVICE_TOOLCHAIN, true, &distro, &facts);
        let lines = lines(&plan);
        assert_eq!(lines.len(), 5, "{lines:#?}");
        assert!(lines[0].starts_with(&format!(
            "sudo tee {} >/dev/null <<'EOF'\n",
            offload_toolchain::DEBIAN_CONTRIB_NON_FREE_SOURCES
        )));
        assert!(lines[0].contains("Suites: bookworm\nComponents: contrib non-free\n"));
        assert_eq!(
            lines[1],
            "sudo DEBIAN_FRONTEND=noninteractive apt-get update -q"
        );
        assert_eq!(
            lines[2],
            "sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
             clang-22 lld-22 llvm-22 llvm-22-dev libpolly-22-dev zlib1g-dev libzstd-dev \
             nvidia-cuda-toolkit"
        );
        assert_eq!(
            lines[3],
            format!(
                "sudo python3 -m pip install --quiet --no-deps --target {} {}",
                offload_toolchain::CUDA_PIP_PREFIX,
                offload_toolchain::CUDA_PIP_PACKAGES.join(" ")
            )
        );
        assert!(lines[4].starts_with("rustup toolchain install "));
        let command = plan.steps[2].command();
        assert_eq!(command.get_program(), "sudo");
        assert_eq!(
            command.get_args().next().and_then(|a| a.to_str()),
            Some("DEBIAN_FRONTEND=noninteractive")
        );
    }

    #[test]
    fn as_root_with_everything_enabled_no_sudo_and_no_sources() {
        let distro = OsRelease::parse(DEBIAN).distro();
        let facts = Facts {
            root: true,
            llvm_packaged: true,
            cuda_components: true,
            ptxas_found: true,
            sm_90a_ptxas_found: true,
        };
        let plan = plan(DEVICE_TOOLCHAIN, true, &distro, &facts);
        let lines = lines(&plan);
        assert_eq!(lines[0], "DEBIAN_FRONTEND=noninteractive apt-get update -q");
        // A working ptxas (NVIDIA's own installer): no CUDA package.
        assert!(!lines[1].contains("nvidia-cuda-toolkit"), "{}", lines[1]);
        assert!(plan.steps.iter().all(|s| !s.sudo));
        assert_eq!(plan.steps[0].command().get_program(), "apt-get");
    }

    #[test]
    fn ubuntu_without_llvm_22_gets_apt_llvm_org_and_multiverse() {
        let distro = OsRelease::parse(UBUNTU).distro();
        let plan = plan(DEVICE_TOOLCHAIN, true, &distro, &Facts::default());
        let lines = lines(&plan);
        assert_eq!(
            lines[0],
            format!("sudo curl -fsSL -o {LLVM_KEYRING} {LLVM_KEY_URL}")
        );
        assert!(
            lines[1]
                .contains("URIs: http://apt.llvm.org/noble/\nSuites: llvm-toolchain-noble-22\n"),
            "{}",
            lines[1]
        );
        assert_eq!(lines[2], "sudo add-apt-repository -y -n multiverse");
        assert!(lines[4].contains("nvidia-cuda-toolkit"));
    }

    #[test]
    fn an_unknown_distribution_gets_the_commands_to_adapt() {
        let distro = OsRelease::parse(FEDORA).distro();
        let plan = plan(DEVICE_TOOLCHAIN, true, &distro, &Facts::default());
        // rustup works everywhere; the packages are left to the user.
        assert_eq!(plan.steps.len(), 1);
        let text = render(&plan);
        assert!(
            text.contains("does not know how to install packages on Fedora Linux 42"),
            "{text}"
        );
        assert!(
            text.contains("apt-get install -y -q --no-install-recommends clang-22"),
            "{text}"
        );
        assert!(
            text.ends_with(&format!("{}\n", rustup_step(DEVICE_TOOLCHAIN))),
            "{text}"
        );
    }

    #[test]
    fn apt_candidates_are_read_from_apt_cache_policy() {
        assert!(apt_has_candidate(
            "clang-22:\n  Installed: (none)\n  Candidate: 1:22.1.8-1\n"
        ));
        assert!(!apt_has_candidate(
            "clang-22:\n  Installed: (none)\n  Candidate: (none)\n"
        ));
        assert!(!apt_has_candidate(""));
    }
}
