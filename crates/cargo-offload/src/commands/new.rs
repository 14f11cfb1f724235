//! `cargo offload new <path> [--template NAME]`: a new project from one of [`TEMPLATES`]
//! (`templates/<name>/`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::builder::{PossibleValue, PossibleValuesParser};

#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// Directory to create; its last component is the package name.
    path: PathBuf,
    /// Package name (default: the directory name).
    #[arg(long)]
    name: Option<String>,
    /// What the project holds.
    #[arg(long, default_value = TEMPLATES[0].name, value_parser = template_names())]
    template: String,
}

/// One project template: its files and what `new` says once it has written them.
#[derive(Debug)]
pub struct Template {
    /// The `--template` value.
    pub name: &'static str,
    /// One line for `--help`.
    pub about: &'static str,
    /// (path in the new project, template text); `{{var}}` placeholders are filled from
    /// `variables`.
    pub files: &'static [(&'static str, &'static str)],
    /// The first line printed after creating the project, with placeholders.
    pub created: &'static str,
}

/// Every template; the first is the default.
pub const TEMPLATES: &[Template] = &[
    Template {
        name: "default",
        about: "a host crate and its Rust kernel crate",
        files: &[
            (
                "Cargo.toml",
                include_str!("../../../../templates/default/Cargo.toml.tmpl"),
            ),
            (
                "build.rs",
                include_str!("../../../../templates/default/build.rs.tmpl"),
            ),
            (
                "src/main.rs",
                include_str!("../../../../templates/default/src/main.rs.tmpl"),
            ),
            (
                "kernels/Cargo.toml",
                include_str!("../../../../templates/default/kernels/Cargo.toml.tmpl"),
            ),
            (
                "kernels/src/lib.rs",
                include_str!("../../../../templates/default/kernels/src/lib.rs.tmpl"),
            ),
            (
                ".gitignore",
                include_str!("../../../../templates/default/gitignore.tmpl"),
            ),
        ],
        created: "Created `{{name}}` (host crate) and `{{kernels_name}}` (kernel crate)",
    },
    Template {
        name: "mixed",
        about: "Rust, CUDA and HIP kernels in one program, device-linked both ways",
        files: &[
            (
                "Cargo.toml",
                include_str!("../../../../templates/mixed/Cargo.toml.tmpl"),
            ),
            (
                "build.rs",
                include_str!("../../../../templates/mixed/build.rs.tmpl"),
            ),
            (
                "src/main.rs",
                include_str!("../../../../templates/mixed/src/main.rs.tmpl"),
            ),
            (
                "kernels/Cargo.toml",
                include_str!("../../../../templates/mixed/kernels/Cargo.toml.tmpl"),
            ),
            (
                "kernels/src/lib.rs",
                include_str!("../../../../templates/mixed/kernels/src/lib.rs.tmpl"),
            ),
            (
                "cuda/scale.cu",
                include_str!("../../../../templates/mixed/cuda/scale.cu.tmpl"),
            ),
            (
                "hip/scale.hip",
                include_str!("../../../../templates/mixed/hip/scale.hip.tmpl"),
            ),
            (
                "cuda/poly.cu",
                include_str!("../../../../templates/mixed/cuda/poly.cu.tmpl"),
            ),
            (
                "hip/poly.hip",
                include_str!("../../../../templates/mixed/hip/poly.hip.tmpl"),
            ),
            (
                ".gitignore",
                include_str!("../../../../templates/mixed/gitignore.tmpl"),
            ),
        ],
        created: "Created `{{name}}` (host crate, CUDA and HIP sources) and `{{kernels_name}}` (kernel crate)",
    },
    Template {
        name: "openmp",
        about: "a host crate calling C++ whose OpenMP target regions run through libomptarget",
        files: &[
            (
                "Cargo.toml",
                include_str!("../../../../templates/openmp/Cargo.toml.tmpl"),
            ),
            (
                "build.rs",
                include_str!("../../../../templates/openmp/build.rs.tmpl"),
            ),
            (
                "src/main.rs",
                include_str!("../../../../templates/openmp/src/main.rs.tmpl"),
            ),
            (
                "cpp/saxpy.cpp",
                include_str!("../../../../templates/openmp/cpp/saxpy.cpp.tmpl"),
            ),
            (
                ".gitignore",
                include_str!("../../../../templates/openmp/gitignore.tmpl"),
            ),
        ],
        created: "Created `{{name}}` (host crate calling C++ with OpenMP target offload)",
    },
];

impl Template {
    /// The text of the template's file at `path` (as it lands in the project).
    pub(super) fn file(&self, path: &str) -> Option<&'static str> {
        self.files
            .iter()
            .find(|(rel, _)| *rel == path)
            .map(|(_, text)| *text)
    }
}

fn template_names() -> PossibleValuesParser {
    TEMPLATES
        .iter()
        .map(|t| PossibleValue::new(t.name).help(t.about))
        .into()
}

pub fn exec(args: NewArgs) -> Result<ExitCode> {
    let template = TEMPLATES
        .iter()
        .find(|t| t.name == args.template)
        .with_context(|| format!("no template `{}`", args.template))?;
    let name = match &args.name {
        Some(n) => n.clone(),
        None => args
            .path
            .file_name()
            .and_then(|n| n.to_str())
            .context("the path has no usable last component to name the package after")?
            .to_owned(),
    };
    check_package_name(&name)?;
    if args.path.exists() {
        bail!("{} already exists", args.path.display());
    }
    let vars = variables(&name, &format!("{name}-kernels"));
    for (rel, text) in template.files {
        let dest = args.path.join(rel);
        if let Some(dir) = dest.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(&dest, render(text, &vars))
            .with_context(|| format!("writing {}", dest.display()))?;
    }
    println!(
        "{} in {}.\nRun it: cd {} && cargo offload run",
        render(template.created, &vars),
        args.path.display(),
        args.path.display()
    );
    Ok(ExitCode::SUCCESS)
}

pub(super) fn check_package_name(name: &str) -> Result<()> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        || name.starts_with(|c: char| c.is_ascii_digit())
    {
        bail!(
            "`{name}` is not a valid package name (letters, digits, `-`, `_`; not starting with a digit)"
        );
    }
    Ok(())
}

/// The placeholders' values for a host crate `name` and its kernel crate `kernels_name`.
pub(super) fn variables(name: &str, kernels_name: &str) -> Vec<(&'static str, String)> {
    // Built from a checkout: depend on its crates by path, so the project builds offline
    // against exactly this version.
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let (rt, rt_device, build, build_hip) = if source.join("offload-rt/Cargo.toml").is_file() {
        let p = |c: &str| source.join(c).canonicalize().unwrap_or(source.join(c));
        (
            format!("{{ path = {:?} }}", p("offload-rt")),
            format!(
                "{{ path = {:?}, default-features = false }}",
                p("offload-rt")
            ),
            format!("{{ path = {:?} }}", p("offload-build")),
            format!(
                "{{ path = {:?}, features = [\"hip\"] }}",
                p("offload-build")
            ),
        )
    } else {
        let v = env!("CARGO_PKG_VERSION");
        (
            format!("\"{v}\""),
            format!("{{ version = \"{v}\", default-features = false }}"),
            format!("\"{v}\""),
            format!("{{ version = \"{v}\", features = [\"hip\"] }}"),
        )
    };
    vec![
        ("name", name.to_owned()),
        ("kernels_ident", kernels_name.replace('-', "_")),
        ("kernels_name", kernels_name.to_owned()),
        ("offload_rt", rt),
        ("offload_rt_device", rt_device),
        ("offload_build", build),
        ("offload_build_hip", build_hip),
    ]
}

pub(super) fn render(template: &str, vars: &[(&str, String)]) -> String {
    vars.iter().fold(template.to_owned(), |text, (k, v)| {
        text.replace(&format!("{{{{{k}}}}}"), v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_is_filled() {
        let vars = variables("demo-app", "demo-app-kernels");
        for template in TEMPLATES {
            let texts = template
                .files
                .iter()
                .map(|(path, text)| (*path, *text))
                .chain([("the `created` line", template.created)]);
            for (path, text) in texts {
                let text = render(text, &vars);
                assert!(
                    !text.contains("{{"),
                    "{}: {path} keeps a placeholder:\n{text}",
                    template.name
                );
            }
        }
    }

    #[test]
    fn template_names_are_unique_and_default_comes_first() {
        assert_eq!(TEMPLATES[0].name, "default");
        for (i, t) in TEMPLATES.iter().enumerate() {
            assert!(
                !TEMPLATES[..i].iter().any(|u| u.name == t.name),
                "{} twice",
                t.name
            );
        }
    }

    #[test]
    fn kernel_crate_ident_is_a_rust_identifier() {
        let vars = variables("demo-app", "demo-app-kernels");
        let ident = &vars.iter().find(|(k, _)| *k == "kernels_ident").unwrap().1;
        assert_eq!(ident, "demo_app_kernels");
    }
}
