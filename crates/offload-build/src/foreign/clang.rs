//! Finding clang-22 for CUDA, HIP and C++ sources, and checking that it is LLVM 22.

use std::path::PathBuf;
use std::process::Command;

use offload_toolchain::{LLVM_MAJOR, Tool};

use crate::env::Env;
use crate::error::{Error, Result};

/// The clang that compiles a build's foreign sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clang {
    /// The clang executable.
    pub path: PathBuf,
    /// How it was found: `$OFFLOAD_CLANG`, `llvm-config-22 --bindir`, `PATH`, ….
    pub found_via: String,
    /// Its `--version` first line.
    pub version: String,
}

/// Finds clang with the tool policy of [`offload_toolchain::Tool::find_with`] (its
/// environment variable, then LLVM 22's binary directory from `llvm-config-22`, then
/// `clang-22` on `PATH`) and checks its major version.
pub fn find(env: &Env) -> Result<Clang> {
    let var = Tool::Clang.env_var();
    let lookup = |name: &str| env.get(name).map(Into::into);
    let path = Tool::Clang
        .find_with(&lookup)
        .map_err(|e| Error::ClangNotFound {
            tried: e.to_string(),
        })?;
    let found_via = if env.get(&var).is_some() {
        format!("${var}")
    } else if path.starts_with(offload_toolchain::llvm_bin_dir_with(&lookup)) {
        format!("LLVM {LLVM_MAJOR}'s binary directory")
    } else {
        "PATH".to_owned()
    };
    let output = crate::command::run(Command::new(&path).arg("--version"))?;
    let version = String::from_utf8_lossy(&output.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned();
    match major_of(&version) {
        Some(LLVM_MAJOR) => Ok(Clang {
            path,
            found_via,
            version,
        }),
        found => Err(Error::ClangWrongMajor {
            path,
            version,
            found,
        }),
    }
}

/// The major version in clang's `--version` line (`Debian clang version 22.1.8 (…)`).
pub fn major_of(version_line: &str) -> Option<u32> {
    let rest = &version_line[version_line.find("clang version ")? + "clang version ".len()..];
    rest.split(['.', ' ', '-']).next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_is_read_from_version_lines() {
        assert_eq!(
            major_of("Debian clang version 22.1.8 (++20251221-1~exp1)"),
            Some(22)
        );
        assert_eq!(major_of("clang version 19.1.7"), Some(19));
        assert_eq!(major_of("gcc (Debian 12.2.0-14) 12.2.0"), None);
    }
}
