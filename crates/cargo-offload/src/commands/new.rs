//! `cargo offload new <path>`: a host crate and its kernel crate, from `templates/default`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// Directory to create; its last component is the package name.
    path: PathBuf,
    /// Package name (default: the directory name).
    #[arg(long)]
    name: Option<String>,
}

/// (path in the new project, template text)
const FILES: &[(&str, &str)] = &[
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
];

pub fn exec(args: NewArgs) -> Result<ExitCode> {
    let name = match &args.name {
        Some(n) => n.clone(),
        None => args
            .path
            .file_name()
            .and_then(|n| n.to_str())
            .context("the path has no usable last component to name the package after")?
            .to_owned(),
    };
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
    if args.path.exists() {
        bail!("{} already exists", args.path.display());
    }
    let vars = variables(&name);
    for (rel, template) in FILES {
        let dest = args.path.join(rel);
        if let Some(dir) = dest.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(&dest, render(template, &vars))
            .with_context(|| format!("writing {}", dest.display()))?;
    }
    println!(
        "Created `{name}` (host crate) and `{name}-kernels` (kernel crate) in {}.\n\
         Run it: cd {} && cargo offload run",
        args.path.display(),
        args.path.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn variables(name: &str) -> Vec<(&'static str, String)> {
    let kernels_name = format!("{name}-kernels");
    // Built from a checkout: depend on its crates by path, so the project builds offline
    // against exactly this version.
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let (rt, rt_device, build) = if source.join("offload-rt/Cargo.toml").is_file() {
        let p = |c: &str| source.join(c).canonicalize().unwrap_or(source.join(c));
        (
            format!("{{ path = {:?} }}", p("offload-rt")),
            format!(
                "{{ path = {:?}, default-features = false }}",
                p("offload-rt")
            ),
            format!("{{ path = {:?} }}", p("offload-build")),
        )
    } else {
        let v = env!("CARGO_PKG_VERSION");
        (
            format!("\"{v}\""),
            format!("{{ version = \"{v}\", default-features = false }}"),
            format!("\"{v}\""),
        )
    };
    vec![
        ("name", name.to_owned()),
        ("kernels_ident", kernels_name.replace('-', "_")),
        ("kernels_name", kernels_name),
        ("offload_rt", rt),
        ("offload_rt_device", rt_device),
        ("offload_build", build),
    ]
}

fn render(template: &str, vars: &[(&str, String)]) -> String {
    vars.iter().fold(template.to_owned(), |text, (k, v)| {
        text.replace(&format!("{{{{{k}}}}}"), v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_is_filled() {
        let vars = variables("demo-app");
        for (path, template) in FILES {
            let text = render(template, &vars);
            assert!(!text.contains("{{"), "{path} keeps a placeholder:\n{text}");
        }
    }

    #[test]
    fn kernel_crate_ident_is_a_rust_identifier() {
        let vars = variables("demo-app");
        let ident = &vars.iter().find(|(k, _)| *k == "kernels_ident").unwrap().1;
        assert_eq!(ident, "demo_app_kernels");
    }
}
