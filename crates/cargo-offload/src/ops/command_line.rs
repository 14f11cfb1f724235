//! What a `cargo offload build|run|test` command line asks of cargo beyond the build: the
//! values of cargo's own options, and the architectures `native` stands for.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::Result;
use offload_build::OffloadArch;
use offload_build::tooling::arch;
use offload_build::tooling::env::NATIVE_NONE;
use offload_build::tooling::metadata::PackageSelection;

/// What `native` stands for: this machine's GPUs, probed through offload-rt's drivers at the
/// first list naming `native`, once.
#[derive(Debug, Default)]
pub(super) struct NativeGpus(std::cell::OnceCell<Vec<OffloadArch>>);

impl NativeGpus {
    pub(super) fn get(&self) -> &[OffloadArch] {
        self.0.get_or_init(|| {
            let found = offload_rt::__internal::native_archs();
            let (archs, notes) = arch::parse_found(&found.archs);
            for note in notes {
                eprintln!("note: {note}");
            }
            archs
        })
    }

    /// `list` parsed with `native` resolved, for the CPU device of the build `cargo_args` ask
    /// for (their `--target`); a note on stderr when `native` stands for `host`.
    #[expect(
        clippy::result_large_err,
        reason = "the probe's closure returns offload-build's error type, as its other callers do"
    )]
    pub(super) fn resolve(
        &self,
        list: &str,
        origin: &str,
        cargo_args: &[OsString],
    ) -> Result<Vec<OffloadArch>> {
        let triple = cargo_flag_values(cargo_args, "--target", None)
            .pop()
            .unwrap_or_else(|| arch::host_triple().to_owned());
        let resolved = arch::parse_list_for_triple(list, origin, &triple, || {
            Ok(arch::Native::Found(self.get().to_vec()))
        })?;
        if let Some(note) = &resolved.note {
            eprintln!("note: {note}");
        }
        Ok(resolved.archs)
    }

    /// `OFFLOAD_NATIVE_ARCH` for the build scripts, once probed.
    pub(super) fn env_value(&self) -> Option<String> {
        let archs = self.0.get()?;
        Some(if archs.is_empty() {
            NATIVE_NONE.to_owned()
        } else {
            canonical(archs)
        })
    }
}

/// An architecture list as build scripts read it: the names joined by commas.
pub(super) fn canonical(archs: &[OffloadArch]) -> String {
    archs
        .iter()
        .map(OffloadArch::name)
        .collect::<Vec<_>>()
        .join(",")
}

/// The values of cargo's option `long` (`--long V`, `--long=V`, and `-sV`, `-s V` for its
/// short form `short`) among the arguments before `--`, in order.
pub(super) fn cargo_flag_values(args: &[OsString], long: &str, short: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    let mut iter = args
        .iter()
        .take_while(|a| *a != "--")
        .map(|a| a.to_string_lossy());
    while let Some(arg) = iter.next() {
        let attached = arg
            .strip_prefix(long)
            .and_then(|rest| rest.strip_prefix('='))
            .or_else(|| {
                short
                    .and_then(|s| arg.strip_prefix(s))
                    .filter(|v| !v.is_empty())
            });
        if let Some(value) = attached {
            out.push(value.to_owned());
        } else if *arg == *long || short.is_some_and(|s| *arg == *s) {
            out.extend(iter.next().map(|v| v.into_owned()));
        }
    }
    out
}

/// The packages cargo's arguments select (`--manifest-path`, `-p`, `--workspace`,
/// `--exclude`), as `cargo metadata` is to be asked about them.
pub(super) fn package_selection(cargo_args: &[OsString]) -> PackageSelection {
    PackageSelection {
        manifest_path: cargo_flag_values(cargo_args, "--manifest-path", None)
            .pop()
            .map(PathBuf::from),
        packages: cargo_flag_values(cargo_args, "--package", Some("-p")),
        workspace: cargo_args
            .iter()
            .take_while(|a| *a != "--")
            .any(|a| a == "--workspace" || a == "--all"),
        exclude: cargo_flag_values(cargo_args, "--exclude", None),
    }
}

/// `cargo_args` with `-p NAME` for each of `packages`, before any `--`.
pub(super) fn with_packages(cargo_args: &[OsString], packages: &[String]) -> Vec<OsString> {
    let split = cargo_args
        .iter()
        .position(|a| a == "--")
        .unwrap_or(cargo_args.len());
    let mut out = cargo_args[..split].to_vec();
    for name in packages {
        out.push("-p".into());
        out.push(name.into());
    }
    out.extend_from_slice(&cargo_args[split..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn packages_are_added_before_the_test_binaries_arguments() {
        let names = ["app".to_owned(), "app-kernels".to_owned()];
        assert_eq!(
            with_packages(&os(&["--release", "--", "--nocapture"]), &names),
            os(&[
                "--release",
                "-p",
                "app",
                "-p",
                "app-kernels",
                "--",
                "--nocapture"
            ])
        );
        assert_eq!(
            with_packages(&os(&[]), &names[1..]),
            os(&["-p", "app-kernels"])
        );
        let selection = package_selection(&os(&["-p", "app", "--", "--workspace"]));
        assert_eq!(selection.packages, ["app"]);
        assert!(!selection.workspace);
    }

    #[test]
    fn cargo_options_are_read_in_every_spelling_before_dashdash() {
        let args = os(&[
            "-p",
            "a",
            "--package=b",
            "-pc",
            "--package",
            "d",
            "--",
            "-p",
            "e",
        ]);
        assert_eq!(
            cargo_flag_values(&args, "--package", Some("-p")),
            ["a", "b", "c", "d"]
        );
        assert_eq!(
            cargo_flag_values(
                &os(&["--manifest-path", "x/Cargo.toml"]),
                "--manifest-path",
                None
            ),
            ["x/Cargo.toml"]
        );
        assert!(cargo_flag_values(&os(&["--package"]), "--package", Some("-p")).is_empty());
    }
}
