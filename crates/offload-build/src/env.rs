//! Environment reads. In a build script each read also declares
//! `cargo:rerun-if-env-changed`, so a changed variable reruns the build.

/// Variables that select what the build does.
pub const OFFLOAD_ARCH: &str = "OFFLOAD_ARCH";
/// What `native` stands for in an architecture list: the GPUs `cargo offload` found, or
/// [`NATIVE_NONE`] when it found none. Unset outside `cargo offload`.
pub const OFFLOAD_NATIVE_ARCH: &str = "OFFLOAD_NATIVE_ARCH";
/// The value of [`OFFLOAD_NATIVE_ARCH`] when no GPU was found.
pub const NATIVE_NONE: &str = "none";
/// Toolchain used for nested device builds (default [`offload_toolchain::DEVICE_TOOLCHAIN`]).
pub const OFFLOAD_NIGHTLY_TOOLCHAIN: &str = "OFFLOAD_NIGHTLY_TOOLCHAIN";
/// `auto` (default), `require` or `never`: how prebuilt kernel bundles are used.
pub const OFFLOAD_PREBUILT: &str = "OFFLOAD_PREBUILT";
/// Set to `1` to print every nested command before it runs.
pub const OFFLOAD_BUILD_VERBOSE: &str = "OFFLOAD_BUILD_VERBOSE";
/// Set to `1` to fail the build when an `sm_XX` would get PTX without a cubin.
pub const OFFLOAD_REQUIRE_CUBIN: &str = "OFFLOAD_REQUIRE_CUBIN";

#[derive(Debug, Clone, Copy)]
pub struct Env {
    pub(crate) build_script: bool,
}

impl Env {
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
            println!("cargo:rerun-if-env-changed={name}");
        }
        self.get_untracked(name)
    }

    /// Reads a variable that Cargo itself sets for build scripts (no rerun declaration).
    pub fn get_untracked(&self, name: &str) -> Option<String> {
        #[expect(clippy::disallowed_methods, reason = "the one place env vars are read")]
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }

    pub fn verbose(&self) -> bool {
        self.get(OFFLOAD_BUILD_VERBOSE).is_some_and(|v| v != "0")
    }

    /// Whether every `sm_XX` must get a cubin (`OFFLOAD_REQUIRE_CUBIN`, any value but `0`).
    pub fn require_cubin(&self) -> bool {
        self.get(OFFLOAD_REQUIRE_CUBIN).is_some_and(|v| v != "0")
    }

    /// Reports a warning: in a build script as `cargo:warning=` (cargo shows it once per
    /// line), elsewhere on stderr.
    pub fn warn(&self, message: &str) {
        for line in message.lines() {
            if self.build_script {
                println!("cargo:warning={line}");
            } else {
                eprintln!("warning: {line}");
            }
        }
    }

    pub fn nightly_toolchain(&self) -> String {
        self.get(OFFLOAD_NIGHTLY_TOOLCHAIN)
            .unwrap_or_else(|| offload_toolchain::DEVICE_TOOLCHAIN.to_owned())
    }
}
