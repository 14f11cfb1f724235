//! `cargo offload build --print-phases` (and `run`, `test`): each host crate's action graph,
//! printed without building, in the tree form of clang's `-ccc-print-phases`.
//!
//! The host crates and their kernel crates are found as the build scripts find them
//! (`offload_build::tooling::workspace`), the architectures as they resolve them (`--offload-arch`,
//! `OFFLOAD_ARCH`, `[package.metadata.offload] arch`, else `host`; `native` probed here), and
//! what is drawn is the build's own plan (`offload_build::tooling::phases::plan`): a kernel
//! crate's prebuilt bundle where it serves, the nested compiles and device links of the others,
//! an `sm_XX` with a cubin where the `ptxas` found knows it. CUDA, HIP and C++ sources
//! a build script adds (`Build::cuda` …) are named in its code, not in the manifests, and are
//! not shown.
//!
//! Actions and types are clang's where the step is clang's (`input`, `compiler`, `linker`,
//! `backend`, `assembler`, `offload`, `llvm-offload-binary`; `ir`, `assembler`, `object`,
//! `image`), with `rust` and `rlib` for what clang has no name for. Annotations are clang's:
//! `(host-<kinds>)`, `(device-<kind>, <arch>)` and in `offload` nodes `"device-<kind>
//! (<triple>:<arch>)"`, where an image's kind is its OffloadBinary's (`cuda` for `sm_XX`,
//! `hip` for AMD, `openmp` for the CPU device) and a host action lists every kind of its
//! devices in clang's order. One nested device compile serves every architecture of a GPU
//! triple, so it is one action, shared.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use offload_build::OffloadArch;
use offload_build::tooling::env::Env;
use offload_build::tooling::phases::{self, BuildPlan, ImageSource, LinkOutputs, Policy};
use offload_build::tooling::workspace::HostCrate;
use offload_format::DeviceFamily;

use super::command_line::{CompileOptions, NativeGpus};

/// Prints the action graph of every host crate the build that `options` describe compiles:
/// for `archs` (`--offload-arch` or `OFFLOAD_ARCH`, resolved), else each crate's own list.
pub(crate) fn print(
    options: &CompileOptions,
    archs: Option<&[OffloadArch]>,
    native: &NativeGpus,
    env: &Env,
) -> Result<ExitCode> {
    let selection = &options.selection;
    let host_triple = options.target_triple();
    let cargo = env.get_untracked("CARGO").map(PathBuf::from);
    let mut crates = offload_build::tooling::workspace::host_crates(selection, cargo.as_deref())
        .context("finding the host crates of the build")?;
    // Whether a prebuilt bundle serves depends on `OFFLOAD_PANIC`, as in the build.
    for krate in crates.iter_mut().flat_map(|c| &mut c.host.kernel_crates) {
        krate.apply_panic_override(env)?;
    }
    if crates.is_empty() {
        eprintln!(
            "note: this build compiles no host crate (a package with a build-dependency on \
             offload-build and a kernel crate among its dependencies)"
        );
    }
    // `cargo metadata` gives canonical paths; shown relative to the canonical directory.
    let cwd = std::env::current_dir()
        .and_then(std::fs::canonicalize)
        .unwrap_or_default();
    let policy = Policy::from_env(env)?;
    let mut out = String::new();
    for (n, krate) in crates.iter().enumerate() {
        let archs = match (archs, &krate.host.arch) {
            (Some(archs), _) => archs.to_vec(),
            (None, Some(list)) => native.resolve(
                list,
                &format!(
                    "[package.metadata.offload] arch of {}",
                    krate.host.manifest_path.display()
                ),
                options,
            )?,
            (None, None) => vec![OffloadArch::HOST],
        };
        let drawing = Drawing {
            krate,
            archs: &archs,
            host_triple: &host_triple,
            cwd: &cwd,
            policy,
        };
        let (graph, root) = drawing.graph()?;
        if n > 0 {
            out.push('\n');
        }
        let manifest = krate.host.manifest_path.parent().unwrap_or(Path::new(""));
        let _ = writeln!(
            out,
            "{} ({}): {}",
            krate.host.name,
            shown(manifest, &cwd),
            archs
                .iter()
                .map(OffloadArch::name)
                .collect::<Vec<_>>()
                .join(",")
        );
        out.push_str(&graph.render(root));
    }
    match std::io::Write::write_all(&mut std::io::stdout().lock(), out.as_bytes()) {
        // A reader that stopped early (`| head`) has what it wanted.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        result => result.context("writing the phases")?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `path` relative to `cwd` where it lies under it (`.` for `cwd` itself), as given otherwise.
fn shown(path: &Path, cwd: &Path) -> String {
    match path.strip_prefix(cwd) {
        Ok(relative) if relative.as_os_str().is_empty() => ".".to_owned(),
        Ok(relative) => relative.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

/// What an action takes.
#[derive(Debug)]
enum Inputs {
    /// An `input` action's file.
    File(String),
    /// The actions it depends on.
    Actions(Vec<usize>),
    /// An `offload` action's dependences, each with its `"<kind> (<triple>[:<arch>])"`.
    Offload(Vec<(String, usize)>),
}

#[derive(Debug)]
struct Action {
    class: &'static str,
    inputs: Inputs,
    ty: &'static str,
    /// `(<kind>)` or `(<kind>, <arch>)`; `offload` actions carry theirs in their dependences.
    annotation: Option<(String, Option<String>)>,
}

/// Where an action stands among its parent's inputs, which decides its tree prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sibling {
    Top,
    Head,
    Other,
}

/// An action graph: a DAG whose shared actions are printed once and referred to by number.
#[derive(Debug, Default)]
struct Graph {
    actions: Vec<Action>,
}

impl Graph {
    fn add(&mut self, action: Action) -> usize {
        self.actions.push(action);
        self.actions.len() - 1
    }

    fn input(&mut self, path: String, ty: &'static str, annotation: Annotation) -> usize {
        self.add(Action {
            class: "input",
            inputs: Inputs::File(path),
            ty,
            annotation: Some(annotation),
        })
    }

    fn job(
        &mut self,
        class: &'static str,
        inputs: Vec<usize>,
        ty: &'static str,
        annotation: Annotation,
    ) -> usize {
        self.add(Action {
            class,
            inputs: Inputs::Actions(inputs),
            ty,
            annotation: Some(annotation),
        })
    }

    fn offload(&mut self, deps: Vec<(String, usize)>, ty: &'static str) -> usize {
        self.add(Action {
            class: "offload",
            inputs: Inputs::Offload(deps),
            ty,
            annotation: None,
        })
    }

    /// The graph under `root`, inputs first, as clang's `PrintActions1` prints it.
    fn render(&self, root: usize) -> String {
        let mut out = String::new();
        self.print(root, &mut HashMap::new(), "", Sibling::Top, &mut out);
        out
    }

    fn print(
        &self,
        index: usize,
        ids: &mut HashMap<usize, usize>,
        indent: &str,
        sibling: Sibling,
        out: &mut String,
    ) -> usize {
        if let Some(&id) = ids.get(&index) {
            return id;
        }
        let child_indent = format!(
            "{indent}{}",
            match sibling {
                Sibling::Top => "",
                Sibling::Head => "   ",
                Sibling::Other => "|  ",
            }
        );
        let action = &self.actions[index];
        let mut text = format!("{}, ", action.class);
        let mut next = Sibling::Head;
        match &action.inputs {
            Inputs::File(path) => {
                let _ = write!(text, "\"{path}\"");
            }
            Inputs::Offload(deps) => {
                for (n, (label, dep)) in deps.iter().enumerate() {
                    let id = self.print(*dep, ids, &child_indent, next, out);
                    let _ = write!(
                        text,
                        "{}\"{label}\" {{{id}}}",
                        if n > 0 { ", " } else { "" }
                    );
                    next = Sibling::Other;
                }
            }
            Inputs::Actions(inputs) => {
                let mut list = Vec::new();
                for input in inputs {
                    list.push(
                        self.print(*input, ids, &child_indent, next, out)
                            .to_string(),
                    );
                    next = Sibling::Other;
                }
                let _ = write!(text, "{{{}}}", list.join(", "));
            }
        }
        let annotation = match &action.annotation {
            Some((kind, Some(arch))) => format!(", ({kind}, {arch})"),
            Some((kind, None)) => format!(", ({kind})"),
            None => String::new(),
        };
        let id = ids.len();
        ids.insert(index, id);
        let prefix = match sibling {
            Sibling::Top => "",
            Sibling::Head => "+- ",
            Sibling::Other => "|- ",
        };
        let _ = writeln!(
            out,
            "{indent}{prefix}{id}: {text}, {}{annotation}",
            action.ty
        );
        id
    }
}

type Annotation = (String, Option<String>);

/// An image's offload kind, as its OffloadBinary records it and clang names it.
fn kind_of(arch: &OffloadArch) -> &'static str {
    arch.family().offload_kind().name()
}

/// `host-…` or `device-…` followed by every kind among `archs`, in clang's order.
fn kinds(side: &str, archs: &[OffloadArch]) -> String {
    let mut out = side.to_owned();
    for family in DeviceFamily::ALL {
        if archs.iter().any(|a| a.family() == family) {
            let _ = write!(out, "-{}", family.offload_kind().name());
        }
    }
    out
}

/// One host crate's build, to be drawn.
struct Drawing<'a> {
    krate: &'a HostCrate,
    archs: &'a [OffloadArch],
    host_triple: &'a str,
    cwd: &'a Path,
    policy: Policy,
}

impl Drawing<'_> {
    /// The triple an architecture's images are for (the CPU device's is the host crate's).
    fn triple(&self, arch: &OffloadArch) -> String {
        match arch {
            OffloadArch::Host(_) => self.host_triple.to_owned(),
            gpu => gpu.triple().to_owned(),
        }
    }

    /// The `offload` dependence label of `arch`'s device action.
    fn device_label(&self, arch: &OffloadArch) -> String {
        format!(
            "device-{} ({}:{})",
            kind_of(arch),
            self.triple(arch),
            arch.name()
        )
    }

    fn graph(&self) -> Result<(Graph, usize)> {
        let mut g = Graph::default();
        let host = (kinds("host", self.archs), None);
        let path = |p: &Path| shown(p, self.cwd);
        let source = g.input(path(&self.krate.src_path), "rust", host.clone());
        let mut host_inputs = vec![source];
        for kernel_src in &self.krate.kernel_src_paths {
            let input = g.input(path(kernel_src), "rust", host.clone());
            host_inputs.push(g.job("compiler", vec![input], "rlib", host.clone()));
        }
        let host_type = if self.krate.binary { "object" } else { "rlib" };
        let host_compile = g.job("compiler", host_inputs, host_type, host.clone());

        // A bundle that does not serve is drawn built from source, with the build's note,
        // whether or not this machine could build it.
        let plan = phases::plan(&self.krate.host.kernel_crates, self.archs, self.policy)
            .with_context(|| format!("planning the device builds of `{}`", self.krate.host.name))?;
        let mut images = Vec::new();
        for (planned, kernel_src) in plan.kernel_crates.iter().zip(&self.krate.kernel_src_paths) {
            match &planned.source {
                ImageSource::Prebuilt { bundle, .. } => {
                    let input = g.input(path(bundle), "image", (kinds("device", self.archs), None));
                    for arch in self.archs {
                        images.push(g.offload(vec![(self.device_label(arch), input)], "image"));
                    }
                }
                ImageSource::FromSource { note } => {
                    if let Some(note) = note {
                        eprintln!("note: {note}");
                    }
                    self.device_chains(&mut g, &plan, &path(kernel_src), &mut images);
                }
            }
        }
        let device_kinds = kinds("device", self.archs);
        let wrapped = g.job(
            "llvm-offload-binary",
            images,
            "image",
            (device_kinds.clone(), None),
        );
        let embedded = g.offload(
            vec![
                (format!("{} ({})", host.0, self.host_triple), host_compile),
                (format!("{device_kinds} ({})", self.host_triple), wrapped),
            ],
            host_type,
        );
        let root = if self.krate.binary {
            g.job("linker", vec![embedded], "image", host)
        } else {
            embedded
        };
        Ok((g, root))
    }

    /// A kernel crate built from source: per device link of `plan` its compile (one per GPU
    /// triple, shared), the link and its images, ending in an `offload` action pushed onto
    /// `images`.
    fn device_chains(
        &self,
        g: &mut Graph,
        plan: &BuildPlan,
        source: &str,
        images: &mut Vec<usize>,
    ) {
        let mut compiles: HashMap<usize, usize> = HashMap::new();
        for link in &plan.links {
            let arch = &link.arch;
            let kind = format!("device-{}", kind_of(arch));
            let on_arch = || (kind.clone(), Some(arch.name()));
            if link.outputs == LinkOutputs::SharedObject {
                let input = g.input(source.to_owned(), "rust", on_arch());
                let compile = g.job("compiler", vec![input], "ir", on_arch());
                let linked = g.job("linker", vec![compile], "image", on_arch());
                images.push(g.offload(vec![(self.device_label(arch), linked)], "image"));
                continue;
            }
            let compile = *compiles.entry(link.compile).or_insert_with(|| {
                let input = g.input(source.to_owned(), "rust", (kind.clone(), None));
                g.job("compiler", vec![input], "ir", (kind.clone(), None))
            });
            let linked = g.job("linker", vec![compile], "ir", on_arch());
            let label = self.device_label(arch);
            let image = match &link.outputs {
                LinkOutputs::CubinAndPtx => {
                    let ptx = g.job("backend", vec![linked], "assembler", on_arch());
                    let cubin = g.job("assembler", vec![ptx], "object", on_arch());
                    g.offload(vec![(label.clone(), cubin), (label, ptx)], "object")
                }
                LinkOutputs::PtxOnly { obstacle, .. } => {
                    let ptx = g.job("backend", vec![linked], "assembler", on_arch());
                    eprintln!("note: {} gets PTX only: {obstacle}", arch.name());
                    g.offload(vec![(label, ptx)], "assembler")
                }
                LinkOutputs::CodeObject | LinkOutputs::SharedObject => {
                    let object = g.job("backend", vec![linked], "object", on_arch());
                    let code_object = g.job("linker", vec![object], "image", on_arch());
                    g.offload(vec![(label, code_object)], "image")
                }
            };
            images.push(image);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// clang-22 `-ccc-print-phases --offload-arch=sm_80,sm_90 a.cu` (the old driver), drawn
    /// with these actions: the printer is clang's.
    #[test]
    fn the_tree_is_drawn_as_clang_draws_it() {
        let mut g = Graph::default();
        let host = || ("host-cuda".to_owned(), None);
        let dev = |arch: &str| ("device-cuda".to_owned(), Some(arch.to_owned()));
        let a = g.input("a.cu".into(), "cuda", host());
        let p = g.job("preprocessor", vec![a], "cuda-cpp-output", host());
        let host_ir = g.job("compiler", vec![p], "ir", host());
        let mut per_arch = Vec::new();
        for sm in ["sm_80", "sm_90"] {
            let i = g.input("a.cu".into(), "cuda", dev(sm));
            let p = g.job("preprocessor", vec![i], "cuda-cpp-output", dev(sm));
            let c = g.job("compiler", vec![p], "ir", dev(sm));
            let b = g.job("backend", vec![c], "assembler", dev(sm));
            let o = g.job("assembler", vec![b], "object", dev(sm));
            let label = format!("device-cuda (nvptx64-nvidia-cuda:{sm})");
            per_arch.push(g.offload(vec![(label.clone(), o), (label, b)], "object"));
        }
        let fatbin = g.job(
            "linker",
            per_arch,
            "cuda-fatbin",
            ("device-cuda".into(), None),
        );
        let embedded = g.offload(
            vec![
                ("host-cuda (x86_64-pc-linux-gnu)".into(), host_ir),
                ("device-cuda (nvptx64-nvidia-cuda)".into(), fatbin),
            ],
            "ir",
        );
        let b = g.job("backend", vec![embedded], "assembler", host());
        let o = g.job("assembler", vec![b], "object", host());
        let root = g.job("clang-linker-wrapper", vec![o], "image", host());
        assert_eq!(
            g.render(root),
            r#"               +- 0: input, "a.cu", cuda, (host-cuda)
            +- 1: preprocessor, {0}, cuda-cpp-output, (host-cuda)
         +- 2: compiler, {1}, ir, (host-cuda)
         |                 +- 3: input, "a.cu", cuda, (device-cuda, sm_80)
         |              +- 4: preprocessor, {3}, cuda-cpp-output, (device-cuda, sm_80)
         |           +- 5: compiler, {4}, ir, (device-cuda, sm_80)
         |        +- 6: backend, {5}, assembler, (device-cuda, sm_80)
         |     +- 7: assembler, {6}, object, (device-cuda, sm_80)
         |  +- 8: offload, "device-cuda (nvptx64-nvidia-cuda:sm_80)" {7}, "device-cuda (nvptx64-nvidia-cuda:sm_80)" {6}, object
         |  |              +- 9: input, "a.cu", cuda, (device-cuda, sm_90)
         |  |           +- 10: preprocessor, {9}, cuda-cpp-output, (device-cuda, sm_90)
         |  |        +- 11: compiler, {10}, ir, (device-cuda, sm_90)
         |  |     +- 12: backend, {11}, assembler, (device-cuda, sm_90)
         |  |  +- 13: assembler, {12}, object, (device-cuda, sm_90)
         |  |- 14: offload, "device-cuda (nvptx64-nvidia-cuda:sm_90)" {13}, "device-cuda (nvptx64-nvidia-cuda:sm_90)" {12}, object
         |- 15: linker, {8, 14}, cuda-fatbin, (device-cuda)
      +- 16: offload, "host-cuda (x86_64-pc-linux-gnu)" {2}, "device-cuda (nvptx64-nvidia-cuda)" {15}, ir
   +- 17: backend, {16}, assembler, (host-cuda)
+- 18: assembler, {17}, object, (host-cuda)
19: clang-linker-wrapper, {18}, image, (host-cuda)
"#
        );
    }

    #[test]
    fn paths_are_shown_from_the_current_directory() {
        let cwd = Path::new("/w/app");
        assert_eq!(shown(Path::new("/w/app"), cwd), ".");
        assert_eq!(shown(Path::new("/w/app/src/main.rs"), cwd), "src/main.rs");
        assert_eq!(shown(Path::new("/w/k/src/lib.rs"), cwd), "/w/k/src/lib.rs");
    }

    #[test]
    fn host_actions_name_every_kind_in_clangs_order() {
        let sm = OffloadArch::Nvptx(offload_format::target_id::Sm::parse("sm_80").unwrap());
        assert_eq!(kinds("host", &[OffloadArch::HOST, sm]), "host-cuda-openmp");
        assert_eq!(kinds("device", &[OffloadArch::HOST]), "device-openmp");
    }
}
