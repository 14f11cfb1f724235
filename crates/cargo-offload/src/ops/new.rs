//! `cargo offload new <path> [--template NAME]`: a new project from one of [`TEMPLATES`]
//! (`templates/<name>/`).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use offload_build::tooling::command;

use anyhow::{Context, Result, bail};

use super::dependency_source::{Crate, DependencySource, default_source};

#[derive(Debug, Clone)]
/// The project `cargo offload new` creates.
pub struct NewOptions {
    /// Directory to create; its last component is the package name.
    pub path: PathBuf,
    /// Package name (default: the directory name).
    pub name: Option<String>,
    /// What the project holds.
    pub template: String,
    /// Where the project gets offload-rt and offload-build: `registry` (the published
    /// crates), `git=URL[@TAG_OR_COMMIT]`, or `path=DIR` (a checkout; written relative to the
    /// project unless DIR is absolute). Default: where this cargo-offload came from.
    pub source: Option<DependencySource>,
    /// Version control for the new project, as `cargo new`'s: `git` (the default) runs
    /// `git init` unless the directory is inside a git work tree already; `none` does not.
    pub vcs: String,
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
                include_str!("../../templates/default/Cargo.toml.tmpl"),
            ),
            (
                "build.rs",
                include_str!("../../templates/default/build.rs.tmpl"),
            ),
            (
                "src/main.rs",
                include_str!("../../templates/default/src/main.rs.tmpl"),
            ),
            (
                "kernels/Cargo.toml",
                include_str!("../../templates/default/kernels/Cargo.toml.tmpl"),
            ),
            (
                "kernels/src/lib.rs",
                include_str!("../../templates/default/kernels/src/lib.rs.tmpl"),
            ),
            (
                ".gitignore",
                include_str!("../../templates/default/gitignore.tmpl"),
            ),
            (
                "README.md",
                include_str!("../../templates/default/README.md.tmpl"),
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
                include_str!("../../templates/mixed/Cargo.toml.tmpl"),
            ),
            (
                "build.rs",
                include_str!("../../templates/mixed/build.rs.tmpl"),
            ),
            (
                "src/main.rs",
                include_str!("../../templates/mixed/src/main.rs.tmpl"),
            ),
            (
                "kernels/Cargo.toml",
                include_str!("../../templates/mixed/kernels/Cargo.toml.tmpl"),
            ),
            (
                "kernels/src/lib.rs",
                include_str!("../../templates/mixed/kernels/src/lib.rs.tmpl"),
            ),
            (
                "cuda/scale.cu",
                include_str!("../../templates/mixed/cuda/scale.cu.tmpl"),
            ),
            (
                "hip/scale.hip",
                include_str!("../../templates/mixed/hip/scale.hip.tmpl"),
            ),
            (
                "cuda/poly.cu",
                include_str!("../../templates/mixed/cuda/poly.cu.tmpl"),
            ),
            (
                "hip/poly.hip",
                include_str!("../../templates/mixed/hip/poly.hip.tmpl"),
            ),
            (
                ".gitignore",
                include_str!("../../templates/mixed/gitignore.tmpl"),
            ),
            (
                "README.md",
                include_str!("../../templates/mixed/README.md.tmpl"),
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
                include_str!("../../templates/openmp/Cargo.toml.tmpl"),
            ),
            (
                "build.rs",
                include_str!("../../templates/openmp/build.rs.tmpl"),
            ),
            (
                "src/main.rs",
                include_str!("../../templates/openmp/src/main.rs.tmpl"),
            ),
            (
                "cpp/saxpy.cpp",
                include_str!("../../templates/openmp/cpp/saxpy.cpp.tmpl"),
            ),
            (
                ".gitignore",
                include_str!("../../templates/openmp/gitignore.tmpl"),
            ),
            (
                "README.md",
                include_str!("../../templates/openmp/README.md.tmpl"),
            ),
        ],
        created: "Created `{{name}}` (host crate calling C++ with OpenMP target offload)",
    },
];

impl Template {
    /// The text of the template's file at `path` (as it lands in the project).
    pub(crate) fn file(&self, path: &str) -> Option<&'static str> {
        self.files
            .iter()
            .find(|(rel, _)| *rel == path)
            .map(|(_, text)| *text)
    }
}

/// Writes the project from its template and, with `vcs == "git"`, runs `git init` there.
pub fn new_project(options: &NewOptions) -> Result<ExitCode> {
    let template = TEMPLATES
        .iter()
        .find(|t| t.name == options.template)
        .with_context(|| format!("no template `{}`", options.template))?;
    let name = match &options.name {
        Some(n) => n.clone(),
        None => options
            .path
            .file_name()
            .and_then(|n| n.to_str())
            .context("the path has no usable last component to name the package after")?
            .to_owned(),
    };
    check_package_name(&name)?;
    if options.path.exists() {
        bail!("{} already exists", options.path.display());
    }
    let source = chosen_source(options.source.clone())?;
    let vars = variables(&name, &format!("{name}-kernels"), &source, &options.path);
    for (rel, text) in template.files {
        let dest = options.path.join(rel);
        if let Some(dir) = dest.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(&dest, render(text, &vars))
            .with_context(|| format!("writing {}", dest.display()))?;
    }
    if options.vcs == "git" {
        init_git(&options.path);
    }
    println!(
        "{} in {}.\nRun it: cd {} && cargo offload run",
        render(template.created, &vars),
        options.path.display(),
        options.path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `git init` in `dir`, as `cargo new` does: not when `dir` is inside a git work tree already,
/// and with a note, not an error, when git cannot run.
fn init_git(dir: &Path) {
    let git = match offload_toolchain::Tool::Git.find() {
        Ok(git) => git,
        Err(e) => {
            eprintln!(
                "note: no git repository made for {} ({e}); `--vcs none` skips it",
                dir.display()
            );
            return;
        }
    };
    let inside = command::run(
        Command::new(&git)
            .args(["rev-parse", "--is-inside-work-tree"])
            .current_dir(dir),
    );
    if inside.is_ok() {
        return;
    }
    if let Err(e) = command::run(
        Command::new(&git)
            .args(["init", "--quiet"])
            .current_dir(dir),
    ) {
        eprintln!("note: the project has no repository: {e}");
    }
}

pub(crate) fn check_package_name(name: &str) -> Result<()> {
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

/// The placeholders' values for a host crate `name` in `project_dir` (which need not exist
/// yet) and its kernel crate `kernels_name` in `project_dir/kernels`, the offload crates
/// coming from `source`.
pub(crate) fn variables(
    name: &str,
    kernels_name: &str,
    source: &DependencySource,
    project_dir: &Path,
) -> Vec<(&'static str, String)> {
    let kernels_dir = project_dir.join("kernels");
    vec![
        ("name", name.to_owned()),
        ("kernels_ident", kernels_name.replace('-', "_")),
        ("kernels_name", kernels_name.to_owned()),
        ("offload_rt", source.spec(Crate::Runtime, project_dir)),
        (
            "offload_rt_device",
            source.spec(Crate::RuntimeForKernels, &kernels_dir),
        ),
        ("offload_build", source.spec(Crate::Build, project_dir)),
        (
            "offload_build_hip",
            source.spec(Crate::BuildWithHip, project_dir),
        ),
    ]
}

/// The `--source` given, or the default with the line that says where it comes from.
pub(crate) fn chosen_source(given: Option<DependencySource>) -> Result<DependencySource> {
    let source = match given {
        Some(source) => source,
        None => {
            let (source, why) = default_source();
            if !matches!(source, DependencySource::Registry) {
                eprintln!(
                    "note: offload-rt and offload-build from {source} ({why}); `--source` chooses another"
                );
            }
            source
        }
    };
    source.check()?;
    Ok(source)
}

pub(crate) fn render(template: &str, vars: &[(&str, String)]) -> String {
    vars.iter().fold(template.to_owned(), |text, (k, v)| {
        text.replace(&format!("{{{{{k}}}}}"), v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_is_filled() {
        let vars = variables(
            "demo-app",
            "demo-app-kernels",
            &DependencySource::Registry,
            Path::new("demo-app"),
        );
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
        let vars = variables(
            "demo-app",
            "demo-app-kernels",
            &DependencySource::Registry,
            Path::new("demo-app"),
        );
        let ident = &vars.iter().find(|(k, _)| *k == "kernels_ident").unwrap().1;
        assert_eq!(ident, "demo_app_kernels");
    }
}
