//! `cargo offload new <path> [--template NAME]`: a new project from one of [`TEMPLATES`]
//! (`templates/<name>/`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use cargo_offload::ops::dependency_source::DependencySource;
use cargo_offload::ops::new::{self, NewOptions, TEMPLATES};
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
    /// Where the project gets offload-rt and offload-build: `registry` (the published
    /// crates), `git=URL[@TAG_OR_COMMIT]`, or `path=DIR` (a checkout; written relative to the
    /// project unless DIR is absolute). Default: where this cargo-offload came from.
    #[arg(long, value_name = "SOURCE")]
    source: Option<DependencySource>,
    /// Version control for the new project, as `cargo new`'s: `git` (the default) runs
    /// `git init` unless the directory is inside a git work tree already; `none` does not.
    #[arg(long, value_name = "VCS", default_value = "git", value_parser = ["git", "none"])]
    vcs: String,
}

fn template_names() -> PossibleValuesParser {
    TEMPLATES
        .iter()
        .map(|t| PossibleValue::new(t.name).help(t.about))
        .into()
}

pub fn exec(args: NewArgs) -> Result<ExitCode> {
    new::new_project(&NewOptions {
        path: args.path,
        name: args.name,
        template: args.template,
        source: args.source,
        vcs: args.vcs,
    })
}
