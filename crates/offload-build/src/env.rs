//! Environment reads. In a build script each read also declares
//! `cargo:rerun-if-env-changed`, so a changed variable reruns the build.

/// Variables that select what the build does.
pub const OFFLOAD_ARCH: &str = "OFFLOAD_ARCH";
/// What `native` stands for in an architecture list: the GPUs `cargo offload` found, or
/// [`NATIVE_NONE`] when it found none. Unset outside `cargo offload`.
pub const OFFLOAD_NATIVE_ARCH: &str = "OFFLOAD_NATIVE_ARCH";
/// The value of [`OFFLOAD_NATIVE_ARCH`] when no GPU was found.
pub const NATIVE_NONE: &str = "none";
/// Toolchain of the nested GPU device builds (default [`offload_toolchain::DEVICE_TOOLCHAIN`]);
/// the CPU device's too where installed ([`crate::nested::CpuToolchain`]).
pub const OFFLOAD_NIGHTLY_TOOLCHAIN: &str = "OFFLOAD_NIGHTLY_TOOLCHAIN";
/// `auto` (default), `require` or `never`: how prebuilt kernel bundles are used.
pub const OFFLOAD_PREBUILT: &str = "OFFLOAD_PREBUILT";
/// Set to `1` to print every nested command before it runs.
pub const OFFLOAD_BUILD_VERBOSE: &str = "OFFLOAD_BUILD_VERBOSE";
/// Set to `1` to fail the build when an `sm_XX` would get PTX without a cubin.
pub const OFFLOAD_REQUIRE_CUBIN: &str = "OFFLOAD_REQUIRE_CUBIN";
/// Any value but `0`: the CPU device's image is built for a debugger (unoptimized, full debug
/// information); `cargo offload run --debugger` sets it.
pub const OFFLOAD_DEBUG_KERNELS: &str = "OFFLOAD_DEBUG_KERNELS";
/// `address`: the CPU device's image is built with AddressSanitizer (the pinned nightly's
/// `-Zsanitizer=address`); `cargo offload run --sanitize=address` sets it.
pub const OFFLOAD_SANITIZE_KERNELS: &str = "OFFLOAD_SANITIZE_KERNELS";
/// `source`: the CPU device's image keeps the `#[kernel]` macro's own region form of barriers
/// (rustc's fat LTO, no CPU link), as where no LLVM device link is found; `ir`: its barriers
/// are formed in the CPU link (`crate::host_device`), and a build without that link fails;
/// unset: `ir` where the link is found, else `source`.
pub const OFFLOAD_CPU_BARRIERS_FORM: &str = "OFFLOAD_CPU_BARRIERS_FORM";
/// `1`: build no device images (as under `cargo check`); `0`: always build them; unset: build
/// them unless the build script runs under `cargo check`, `clippy` or `doc`.
pub const OFFLOAD_CHECK_ONLY: &str = "OFFLOAD_CHECK_ONLY";
/// `report` or `trap`: how every kernel crate's GPU kernels end when they panic, over each
/// crate's `[package.metadata.offload] panic` ([`crate::metadata::PanicStrategy`]).
pub const OFFLOAD_PANIC: &str = "OFFLOAD_PANIC";
/// `0`: a check (see [`OFFLOAD_CHECK_ONLY`]) does not check the kernel crates as device code
/// (`crate::device_check`).
pub const OFFLOAD_DEVICE_CHECK: &str = "OFFLOAD_DEVICE_CHECK";

/// The environment the build reads, every read going through it: in a build script each variable
/// read is declared with `rerun-if-env-changed`.
#[derive(Debug, Clone, Copy)]
pub struct Env {
    pub(crate) build_script: bool,
}

impl Env {
    /// Looks at whether this process is a build script (cargo set `OUT_DIR`, `CARGO_MANIFEST_DIR`
    /// and `TARGET`).
    pub fn detect() -> Self {
        // Cargo sets these two only for build scripts.
        #[expect(clippy::disallowed_methods, reason = "the one place env vars are read")]
        let build_script = std::env::var_os("OUT_DIR").is_some()
            && std::env::var_os("CARGO_MANIFEST_DIR").is_some()
            && std::env::var_os("TARGET").is_some();
        Env { build_script }
    }

    /// Reads `name`, declaring it to Cargo when running inside a build script.
    pub fn get(&self, name: &str) -> Option<String> {
        if self.build_script {
            crate::directives::emit(format!("cargo:rerun-if-env-changed={name}"));
        }
        self.get_untracked(name)
    }

    /// Whether a variable Cargo sets for build scripts is set, empty or not (no rerun
    /// declaration): Cargo sets `CARGO_CFG_DEBUG_ASSERTIONS` to nothing.
    pub fn is_set_untracked(&self, name: &str) -> bool {
        #[expect(clippy::disallowed_methods, reason = "the one place env vars are read")]
        std::env::var_os(name).is_some()
    }

    /// Reads a variable that Cargo itself sets for build scripts (no rerun declaration).
    pub fn get_untracked(&self, name: &str) -> Option<String> {
        #[expect(clippy::disallowed_methods, reason = "the one place env vars are read")]
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }

    /// A command running `tool`, found by `offload_toolchain`'s policy
    /// ([`offload_toolchain::Tool::command_with`]): its override declared to Cargo in a build
    /// script, `PATH` and the directories searched read untracked.
    pub fn tool(&self, tool: offload_toolchain::Tool) -> std::process::Command {
        let over = tool.env_var();
        tool.command_with(&|name| {
            if name == over {
                self.get(name)
            } else {
                self.get_untracked(name)
            }
            .map(Into::into)
        })
    }

    /// Whether `OFFLOAD_BUILD_VERBOSE` asks for the commands to be printed (set and not `0`).
    pub fn verbose(&self) -> bool {
        self.get(OFFLOAD_BUILD_VERBOSE).is_some_and(|v| v != "0")
    }

    /// Whether every `sm_XX` must get a cubin (`OFFLOAD_REQUIRE_CUBIN`, any value but `0`).
    pub fn require_cubin(&self) -> bool {
        self.get(OFFLOAD_REQUIRE_CUBIN).is_some_and(|v| v != "0")
    }

    /// Reports a warning: in a build script as `cargo:warning=` (cargo shows it once per
    /// line; held until the build ends, see `directives`), elsewhere on stderr.
    pub fn warn(&self, message: &str) {
        for line in message.lines() {
            if self.build_script {
                crate::directives::emit(format!("cargo:warning={line}"));
            } else {
                eprintln!("warning: {line}");
            }
        }
    }

    /// Whether this build only checks code (`cargo check`, `clippy`, `doc`, and rust-analyzer,
    /// which runs `cargo check`), so no device image is needed: [`OFFLOAD_CHECK_ONLY`] when
    /// set, else the subcommand of the cargo that runs this build script. Cargo does not tell
    /// build scripts its mode, so this reads the parent's command line (Linux only; elsewhere
    /// every build builds images).
    pub fn check_only(&self) -> bool {
        match self.get(OFFLOAD_CHECK_ONLY).as_deref() {
            Some("0") => return false,
            Some(_) => return true,
            None => {}
        }
        self.build_script && parent_cargo_subcommand().is_some_and(|c| is_check_only(&c))
    }

    /// The toolchain of the nested GPU device builds: `OFFLOAD_NIGHTLY_TOOLCHAIN`, else the
    /// pinned default.
    pub fn nightly_toolchain(&self) -> String {
        self.get(OFFLOAD_NIGHTLY_TOOLCHAIN)
            .unwrap_or_else(|| offload_toolchain::DEVICE_TOOLCHAIN.to_owned())
    }
}

/// The subcommand of the parent process when it is cargo: its first argument that names a
/// cargo command (options and their values before it, such as `+nightly` or `--config k=v`,
/// are passed over).
fn parent_cargo_subcommand() -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        let ppid = std::os::unix::process::parent_id();
        let cmdline = std::fs::read(format!("/proc/{ppid}/cmdline")).ok()?;
        let args: Vec<String> = cmdline
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        cargo_subcommand(&args)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

const CARGO_COMMANDS: &[&str] = &[
    "build", "b", "check", "c", "clippy", "doc", "d", "run", "r", "test", "t", "bench", "rustc",
    "rustdoc", "install", "fix", "miri",
];

fn cargo_subcommand(args: &[String]) -> Option<String> {
    let program = std::path::Path::new(args.first()?).file_stem()?.to_str()?;
    if !program.starts_with("cargo") {
        return None;
    }
    args[1..]
        .iter()
        .take_while(|a| *a != "--")
        .find(|a| CARGO_COMMANDS.contains(&a.as_str()))
        .cloned()
}

fn is_check_only(subcommand: &str) -> bool {
    matches!(subcommand, "check" | "c" | "clippy" | "doc" | "d")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_cargo_subcommand_is_found_past_options() {
        let sub = |v: &[&str]| cargo_subcommand(&args(v));
        assert_eq!(sub(&["cargo", "check"]).as_deref(), Some("check"));
        assert_eq!(
            sub(&[
                "/home/u/.rustup/toolchains/x/bin/cargo",
                "+nightly",
                "--config",
                "a=b",
                "c"
            ])
            .as_deref(),
            Some("c")
        );
        assert_eq!(
            sub(&["cargo", "build", "-p", "check"]).as_deref(),
            Some("build")
        );
        assert_eq!(sub(&["cargo", "--", "check"]), None);
        assert_eq!(sub(&["rustc", "check"]), None);
        assert_eq!(sub(&[]), None);
        assert!(is_check_only("check") && is_check_only("clippy") && is_check_only("doc"));
        assert!(!is_check_only("build") && !is_check_only("test") && !is_check_only("run"));
    }
}
