//! The GPU device link in a process of its own: `cargo-offload-device`, the executable
//! installed with `cargo-offload`, which links LLVM, so that a build script using
//! `offload-build` without its `llvm` feature links none, as a build script using `cc` runs a
//! compiler rather than linking one.
//!
//! One process serves one nested build: one kernel crate and one GPU triple with every
//! architecture of it asked for, linked in parallel inside it
//! (`device_link::build_gpu_images_of_triple`, with the `llvm` feature), or the IR link of
//! one CPU image, whose nested build the build ran itself (`device_link::cpu_link`: its request
//! names the static library and the target, and the object comes back). The
//! exchange goes through a fresh directory in the nested build's target directory:
//!
//! | file | written by | contents |
//! |---|---|---|
//! | `request.json` | the build | [`PROTOCOL`], the kernel crate (package, library name, manifest, features, panic strategy), the architectures and the nested target directory |
//! | `images.offload` | the device link | the images, one OffloadBinary each, with the keys the embedded bundle carries ([`DeviceImage::to_offload_binary`]) |
//! | `diagnostics.jsonl` | the device link | the nested build's compiler diagnostics, as `diagnostics::take_recorded` gives them |
//! | `cpu.o` | the device link, for a CPU request | the CPU image's object ([`cpu_link`]) |
//! | `result.json` | the device link, last | [`PROTOCOL`] and, on failure, the error: the architecture, its code and its text |
//!
//! The child inherits standard output and error: in a build script its `cargo:` lines
//! (`rerun-if-env-changed` for what it reads, warnings) go to cargo as the build script's own,
//! and its status lines go to `cargo offload`'s status directory, as they would in-process.
//!
//! The executable is found, without the `llvm` feature, as a tool is: [`OFFLOAD_DEVICE_LINKER`],
//! else beside the `cargo-offload` that runs the build ([`OFFLOAD_CARGO_OFFLOAD`]), else on
//! `PATH`; it must print [`protocol_line`] for [`PROTOCOL_FLAG`].

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use crate::arch::OffloadArch;
use crate::device_link::cpu_archive::CpuLinkOptions;
use crate::env::Env;
use crate::error::{Error, IoContext, Result};
use crate::foreign::rdc::LinkedSources;
use crate::image::DeviceImage;
use crate::json::{self, CargoMessage, JsonExt, JsonValue};
use crate::metadata::KernelCrate;
use crate::{command, fsutil};

/// The path of a `cargo-offload-device` to use for GPU device links. Read with a rerun
/// declaration: another executable may link otherwise.
pub const OFFLOAD_DEVICE_LINKER: &str = "OFFLOAD_DEVICE_LINKER";
/// The path of the `cargo-offload` running the build, which it sets for cargo's children, so
/// that the `cargo-offload-device` installed beside it is found first. Read untracked: a
/// build run through `cargo offload` and one run by plain cargo share their build scripts' runs.
pub const OFFLOAD_CARGO_OFFLOAD: &str = "OFFLOAD_CARGO_OFFLOAD";
/// The executable's name.
pub const EXECUTABLE: &str = "cargo-offload-device";
/// The option for which the executable prints [`protocol_line`] and exits.
pub const PROTOCOL_FLAG: &str = "--device-link-protocol";
/// The executable's (hidden) subcommand that serves one request: `device-link <dir>`.
pub const SUBCOMMAND: &str = "device-link";
/// The version of the exchange's files. A change of their meaning increases it.
pub const PROTOCOL: u32 = 3;
/// `offload-build`'s version, which the executable must have too.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

const REQUEST: &str = "request.json";
const IMAGES: &str = "images.offload";
const DIAGNOSTICS: &str = "diagnostics.jsonl";
const RESULT: &str = "result.json";
const CPU_OBJECT: &str = "cpu.o";

/// What the executable prints for [`PROTOCOL_FLAG`]: `offload-build 0.1.0 device-link 1`.
pub fn protocol_line() -> String {
    format!("offload-build {VERSION} device-link {PROTOCOL}")
}

/// A `cargo-offload-device` found and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceLinker {
    /// The executable.
    pub path: PathBuf,
    /// Where it was found: `OFFLOAD_DEVICE_LINKER`, `beside cargo-offload`, `on PATH`.
    pub origin: &'static str,
}

/// Where the executable is looked for, in order: the path of [`OFFLOAD_DEVICE_LINKER`] alone
/// when it is set, else the one beside `cargo_offload` (a `cargo-offload` executable) and
/// those of the `PATH` directories. Existing or not.
pub fn candidates(env: &Env, cargo_offload: Option<&Path>) -> Vec<(PathBuf, &'static str)> {
    if let Some(path) = env.get(OFFLOAD_DEVICE_LINKER) {
        return vec![(PathBuf::from(path), OFFLOAD_DEVICE_LINKER)];
    }
    let name = format!("{EXECUTABLE}{}", std::env::consts::EXE_SUFFIX);
    let mut out = Vec::new();
    if let Some(cargo_offload) = cargo_offload {
        out.push((cargo_offload.with_file_name(&name), "beside cargo-offload"));
    }
    if let Some(path) = env.get_untracked("PATH") {
        out.extend(std::env::split_paths(&path).map(|dir| (dir.join(&name), "on PATH")));
    }
    out
}

/// The executable found first among the [`candidates`] (beside the `cargo-offload` of
/// [`OFFLOAD_CARGO_OFFLOAD`]), checked: its [`PROTOCOL_FLAG`] output must be
/// [`protocol_line`]. Checked once per process and executable. A build script that uses it
/// reruns when the executable changes (`rerun-if-changed`): the images it links are its
/// output as much as the kernel crate's, and a reinstalled device link must relink them.
pub fn find(env: &Env) -> Result<DeviceLinker> {
    let cargo_offload = env.get_untracked(OFFLOAD_CARGO_OFFLOAD).map(PathBuf::from);
    let linker = find_with(env, cargo_offload.as_deref())?;
    crate::directives::emit(format!("cargo:rerun-if-changed={}", linker.path.display()));
    Ok(linker)
}

/// `find`, looking beside `cargo_offload` (the running one, for `cargo offload doctor`).
pub fn find_with(env: &Env, cargo_offload: Option<&Path>) -> Result<DeviceLinker> {
    let candidates = candidates(env, cargo_offload);
    let Some((path, origin)) = candidates.iter().find(|(p, _)| p.is_file()).cloned() else {
        let mut tried: Vec<String> = Vec::new();
        for (path, origin) in &candidates {
            let entry = if *origin == "on PATH" {
                "PATH".to_owned()
            } else {
                format!("{} ({origin})", path.display())
            };
            if !tried.contains(&entry) {
                tried.push(entry);
            }
        }
        if tried.is_empty() {
            tried.push("PATH, which is empty".to_owned());
        }
        return Err(Error::DeviceLinkerMissing {
            tried: tried.join(", "),
            version: VERSION,
            protocol: PROTOCOL,
        });
    };
    static CHECKED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    let known = CHECKED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(&path);
    if !known {
        check(&path)?;
        CHECKED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(path.clone());
    }
    Ok(DeviceLinker { path, origin })
}

/// Checks that `path` speaks this build's version and protocol.
pub fn check(path: &Path) -> Result<()> {
    let mismatch = |found: String| Error::DeviceLinkerMismatch {
        path: path.to_owned(),
        found,
        version: VERSION,
        protocol: PROTOCOL,
    };
    let output = command::run(Command::new(path).arg(PROTOCOL_FLAG))
        .map_err(|e| mismatch(format!("not usable: {e}")))?;
    let said = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if said == protocol_line() {
        Ok(())
    } else if said.is_empty() {
        Err(mismatch(format!("silent for {PROTOCOL_FLAG}")))
    } else {
        Err(mismatch(said))
    }
}

/// The images of `krate` for `archs` (every one of one GPU triple) in `linker`'s process, from
/// the nested build in `target_dir`, each linked with `linked`'s bitcode of its architecture. Images come back in the order of `archs`; the nested
/// build's diagnostics are recorded here as if built in this process.
pub fn link(
    env: &Env,
    linker: &DeviceLinker,
    krate: &KernelCrate,
    archs: &[OffloadArch],
    target_dir: &Path,
    linked: &LinkedSources,
) -> Result<Vec<DeviceImage>> {
    std::fs::create_dir_all(target_dir).io("creating the device build directory", target_dir)?;
    let work = fsutil::TempDir::new_in(target_dir, "device-link-")
        .io("creating a directory in", target_dir)?;
    let mut extra = Vec::new();
    for bitcode in linked.bitcode.iter().filter(|b| archs.contains(&b.arch)) {
        let file = format!("extra-{}.bc", extra.len());
        let path = work.path().join(&file);
        fsutil::write_atomic(&path, &bitcode.bytes)?;
        extra.push((bitcode.arch, bitcode.name.clone(), file));
    }
    let request = request_json(krate, archs, target_dir, &extra)?;
    fsutil::write_atomic(&work.path().join(REQUEST), request.as_bytes())?;
    exchange(
        env,
        linker,
        work.path(),
        &krate.package,
        &crate::status::arch_list(archs),
    )?;
    let bad = |path: &Path, reason: String| Error::DeviceLinkOutput {
        path: path.to_owned(),
        reason,
    };
    let images_path = work.path().join(IMAGES);
    let bytes = std::fs::read(&images_path).io("reading the device link's images", &images_path)?;
    let binaries = offload_format::offload_binary::parse_all(&bytes)
        .map_err(|e| bad(&images_path, e.to_string()))?;
    let mut images = Vec::with_capacity(binaries.len());
    for (n, b) in binaries.iter().enumerate() {
        let (_, image) = DeviceImage::from_offload_binary(b, &images_path.display().to_string())
            .map_err(|e| bad(&images_path, format!("image {n}: {e}")))?;
        if !archs.contains(&image.arch) || image.module != krate.lib_name {
            return Err(bad(
                &images_path,
                format!(
                    "image {n} is of {} for {}, which was not asked for",
                    image.module, image.arch
                ),
            ));
        }
        images.push(image);
    }
    images.sort_by_key(|i| archs.iter().position(|a| *a == i.arch));
    Ok(images)
}

/// The object of the CPU image's IR link of `krate`'s static library `archive` for `opts`
/// (the image of `arch`, a CPU level's name) in `linker`'s process, exchanged through a
/// directory beside the archive.
pub fn cpu_link(
    env: &Env,
    linker: &DeviceLinker,
    krate: &KernelCrate,
    arch: &str,
    archive: &Path,
    opts: &CpuLinkOptions,
) -> Result<Vec<u8>> {
    let dir = archive.parent().unwrap_or(Path::new("."));
    let work = fsutil::TempDir::new_in(dir, "cpu-link-").io("creating a directory in", dir)?;
    let fields: [(&str, JsonValue); 6] = [
        ("package", krate.package.clone().into()),
        ("archive", path_text(archive)?.into()),
        ("triple", opts.triple.clone().into()),
        ("cpu", opts.cpu.clone().into()),
        ("features", opts.features.clone().into()),
        ("keep", strings(opts.keep.iter().cloned())),
    ];
    let cpu = JsonValue::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect());
    let request = JsonValue::Object(
        [
            (
                "protocol".to_owned(),
                JsonValue::Number(f64::from(PROTOCOL)),
            ),
            ("cpu".to_owned(), cpu),
        ]
        .into_iter()
        .collect(),
    )
    .stringify()
    .map_err(|e| Error::Prerequisite(format!("writing the device link request: {e}")))?;
    fsutil::write_atomic(&work.path().join(REQUEST), request.as_bytes())?;
    exchange(env, linker, work.path(), &krate.package, arch)?;
    let object = work.path().join(CPU_OBJECT);
    std::fs::read(&object).io("reading the CPU link's object", &object)
}

/// A CPU request's fields: the package, the static library and the target.
#[cfg(any(feature = "llvm", test))]
fn read_cpu_request(dir: &Path) -> Result<Option<(String, PathBuf, CpuLinkOptions)>> {
    let path = dir.join(REQUEST);
    let text = std::fs::read_to_string(&path).io("reading the device link request", &path)?;
    let bad = |reason: String| Error::DeviceLinkOutput {
        path: path.clone(),
        reason,
    };
    let value = json::parse(&text).map_err(|e| bad(e.to_string()))?;
    if value.get_key("protocol").and_then(as_u32) != Some(PROTOCOL) {
        // Left to `read_request`, which says so.
        return Ok(None);
    }
    let Some(cpu) = value.get_key("cpu") else {
        return Ok(None);
    };
    let field = |key: &str| {
        cpu.str_at(&[key])
            .map(str::to_owned)
            .ok_or_else(|| bad(format!("a CPU request without a string `{key}`")))
    };
    Ok(Some((
        field("package")?,
        field("archive")?.into(),
        CpuLinkOptions {
            triple: field("triple")?,
            cpu: field("cpu")?,
            features: field("features")?,
            keep: cpu
                .strs_at(&["keep"])
                .into_iter()
                .map(str::to_owned)
                .collect(),
        },
    )))
}

/// Runs `linker` on the request in `work` and checks its result: the nested build's
/// diagnostics recorded here, its `cargo:` lines passed on, its error (about `package` for
/// `arch_names`) returned typed.
fn exchange(
    env: &Env,
    linker: &DeviceLinker,
    work: &Path,
    package: &str,
    arch_names: &str,
) -> Result<()> {
    let mut cmd = Command::new(&linker.path);
    cmd.arg(SUBCOMMAND).arg(work);
    if env.verbose() {
        eprintln!("running {}", command::CommandLine::of(&cmd));
    }
    // Its `cargo:` lines are the build script's, given with the script's own.
    let output = command::output_stderr_inherited(&mut cmd)?;
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        if line.starts_with("cargo:") {
            crate::directives::emit(line.to_owned());
        } else {
            println!("{line}");
        }
    }
    let status = output.status;
    let diagnostics = work.join(DIAGNOSTICS);
    if let Ok(text) = std::fs::read_to_string(&diagnostics) {
        for message in text.lines().filter_map(CargoMessage::parse) {
            crate::diagnostics::record_reported(&message);
        }
    }
    let result_path = work.join(RESULT);
    let bad = |path: &Path, reason: String| Error::DeviceLinkOutput {
        path: path.to_owned(),
        reason,
    };
    let result = match std::fs::read_to_string(&result_path) {
        Ok(text) => json::parse(&text).map_err(|e| bad(&result_path, e.to_string()))?,
        Err(_) if !status.success() => {
            return Err(Error::DeviceLinkCrashed {
                krate: package.to_owned(),
                arch: arch_names.to_owned(),
                command: command::CommandLine::of(&cmd).to_string(),
                how: how_it_ended(status),
            });
        }
        Err(e) => return Err(bad(&result_path, e.to_string())),
    };
    let protocol = result.get_key("protocol").and_then(as_u32);
    if protocol != Some(PROTOCOL) {
        return Err(bad(
            &result_path,
            format!("protocol {protocol:?}, expected {PROTOCOL}"),
        ));
    }
    if let Some(error) = result.get_key("error") {
        // A nested build that failed: rustc's errors are reported with this process's.
        if let Some(why) = error.str_at(&["why"]) {
            return Err(Error::DeviceBuild {
                krate: package.to_owned(),
                arch: error.str_at(&["arch"]).unwrap_or(arch_names).to_owned(),
                why: why.to_owned(),
            });
        }
        return Err(Error::DeviceLinkFailed {
            krate: package.to_owned(),
            arch: error.str_at(&["arch"]).unwrap_or(arch_names).to_owned(),
            code: error.str_at(&["code"]).unwrap_or("?").to_owned(),
            message: error.str_at(&["message"]).unwrap_or("").to_owned(),
        });
    }
    if !status.success() {
        return Err(Error::DeviceLinkCrashed {
            krate: package.to_owned(),
            arch: arch_names.to_owned(),
            command: command::CommandLine::of(&cmd).to_string(),
            how: how_it_ended(status),
        });
    }
    Ok(())
}

/// `was killed by signal 6 (SIGABRT)`, `exited with status 3 without a result`.
fn how_it_ended(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.signal(), status.code()) {
        (Some(signal), _) => {
            let name = match signal {
                4 => " (SIGILL)",
                6 => " (SIGABRT)",
                7 => " (SIGBUS)",
                8 => " (SIGFPE)",
                9 => " (SIGKILL)",
                11 => " (SIGSEGV)",
                15 => " (SIGTERM)",
                _ => "",
            };
            format!("was killed by signal {signal}{name}")
        }
        (None, Some(code)) => format!("exited with status {code} without a result"),
        (None, None) => format!("ended ({status}) without a result"),
    }
}

fn as_u32(value: &JsonValue) -> Option<u32> {
    match value {
        JsonValue::Number(n) if n.fract() == 0.0 && *n >= 0.0 && *n <= f64::from(u32::MAX) => {
            Some(*n as u32)
        }
        _ => None,
    }
}

fn path_text(path: &Path) -> Result<String> {
    path.to_str().map(str::to_owned).ok_or_else(|| {
        Error::Prerequisite(format!(
            "{} is not UTF-8, which a device link request cannot carry",
            path.display()
        ))
    })
}

fn strings(items: impl IntoIterator<Item = String>) -> JsonValue {
    JsonValue::Array(items.into_iter().map(JsonValue::from).collect())
}

/// `extra`: (architecture, name, file in the exchange directory) of each bitcode input beside
/// the nested build's.
fn request_json(
    krate: &KernelCrate,
    archs: &[OffloadArch],
    target_dir: &Path,
    extra: &[(OffloadArch, String, String)],
) -> Result<String> {
    let extra = extra
        .iter()
        .map(|(arch, name, file)| {
            JsonValue::Object(
                [
                    ("arch".to_owned(), JsonValue::from(arch.name())),
                    ("name".to_owned(), JsonValue::from(name.clone())),
                    ("file".to_owned(), JsonValue::from(file.clone())),
                ]
                .into_iter()
                .collect(),
            )
        })
        .collect();
    let fields: [(&str, JsonValue); 11] = [
        ("protocol", JsonValue::Number(f64::from(PROTOCOL))),
        ("package", krate.package.clone().into()),
        ("lib_name", krate.lib_name.clone().into()),
        ("manifest_path", path_text(&krate.manifest_path)?.into()),
        ("root", path_text(&krate.root)?.into()),
        ("default_features", krate.default_features.into()),
        ("features", strings(krate.features.iter().cloned())),
        ("panic", krate.panic.name().to_owned().into()),
        ("archs", strings(archs.iter().map(OffloadArch::name))),
        ("target_dir", path_text(target_dir)?.into()),
        ("extra", JsonValue::Array(extra)),
    ];
    let object = JsonValue::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect());
    object
        .stringify()
        .map_err(|e| Error::Prerequisite(format!("writing the device link request: {e}")))
}

/// A request as read by the device link process.
#[cfg(any(feature = "llvm", test))]
#[derive(Debug, Clone)]
pub struct Request {
    /// The kernel crate (its dependencies and watched paths left empty: the link needs
    /// neither).
    pub krate: KernelCrate,
    /// The architectures, of one triple.
    pub archs: Vec<OffloadArch>,
    /// The nested build's target directory.
    pub target_dir: PathBuf,
    /// Bitcode linked beside the nested build's: (architecture, name, file).
    pub extra: Vec<(OffloadArch, String, PathBuf)>,
}

/// Reads the request in `dir`.
#[cfg(any(feature = "llvm", test))]
pub fn read_request(dir: &Path) -> Result<Request> {
    let path = dir.join(REQUEST);
    let text = std::fs::read_to_string(&path).io("reading the device link request", &path)?;
    let bad = |reason: String| Error::DeviceLinkOutput {
        path: path.clone(),
        reason,
    };
    let value = json::parse(&text).map_err(|e| bad(e.to_string()))?;
    let protocol = value.get_key("protocol").and_then(as_u32);
    if protocol != Some(PROTOCOL) {
        return Err(bad(format!(
            "protocol {protocol:?}, and this {EXECUTABLE} speaks {PROTOCOL} ({})",
            protocol_line()
        )));
    }
    let text_of = |key: &str| {
        value
            .str_at(&[key])
            .map(str::to_owned)
            .ok_or_else(|| bad(format!("no string `{key}`")))
    };
    let origin = format!("{}", path.display());
    let one_arch = |name: &str| crate::arch::parse_arch(name, &origin);
    let archs = value
        .strs_at(&["archs"])
        .into_iter()
        .map(one_arch)
        .collect::<Result<Vec<OffloadArch>>>()?;
    let mut extra = Vec::new();
    for item in value
        .get_key("extra")
        .and_then(JsonExt::as_array)
        .unwrap_or_default()
    {
        let field = |key: &str| {
            item.str_at(&[key])
                .ok_or_else(|| bad(format!("an `extra` input without a string `{key}`")))
        };
        let file = field("file")?;
        if file.contains('/') || file.starts_with('.') {
            return Err(bad(format!(
                "an `extra` input outside the directory: `{file}`"
            )));
        }
        extra.push((
            one_arch(field("arch")?)?,
            field("name")?.to_owned(),
            dir.join(file),
        ));
    }
    Ok(Request {
        krate: KernelCrate {
            package: text_of("package")?,
            lib_name: text_of("lib_name")?,
            manifest_path: text_of("manifest_path")?.into(),
            root: text_of("root")?.into(),
            watch: Vec::new(),
            deps: Vec::new(),
            default_features: value
                .get_key("default_features")
                .and_then(JsonExt::as_bool)
                .ok_or_else(|| bad("no boolean `default_features`".to_owned()))?,
            features: value
                .strs_at(&["features"])
                .into_iter()
                .map(str::to_owned)
                .collect(),
            panic: value
                .str_at(&["panic"])
                .and_then(crate::metadata::PanicStrategy::parse)
                .ok_or_else(|| bad("no `panic` strategy, `report` or `trap`".to_owned()))?,
        },
        archs,
        target_dir: text_of("target_dir")?.into(),
        extra,
    })
}

/// Serves the request in `dir` (the device link process's side of `link`): the nested
/// build, the links, and the result files. Returns whether it succeeded; every error is in
/// the result file, for the build to report.
#[cfg(feature = "llvm")]
pub fn serve(dir: &Path) -> bool {
    fsutil::restrict_umask();
    let env = Env::detect();
    match read_cpu_request(dir) {
        Ok(Some((package, archive, opts))) => {
            let outcome = std::fs::read(&archive)
                .io("reading the static library", &archive)
                .and_then(|bytes| {
                    let object = crate::device_link::cpu_link(&package, &bytes, &opts)?;
                    fsutil::write_atomic(&dir.join(CPU_OBJECT), &object)
                });
            return finish(dir, outcome, None);
        }
        Ok(None) => {}
        Err(e) => return finish(dir, Err(e), None),
    }
    let (linked, failed_arch) = link_request(&env, dir);
    let diagnostics: String = crate::diagnostics::take_recorded()
        .iter()
        .map(|m| format!("{m}\n"))
        .collect();
    let written = fsutil::write_atomic(&dir.join(DIAGNOSTICS), diagnostics.as_bytes());
    // The images are written only when all went well: the build reads them then only.
    let outcome = match linked {
        Ok(images) => written
            .and_then(|()| fsutil::write_atomic(&dir.join(IMAGES), &crate::image::bundle(&images))),
        Err(e) => Err(e),
    };
    finish(dir, outcome, failed_arch)
}

/// Writes the result file of the request in `dir` for `outcome` (an error about
/// `failed_arch` where known); returns whether it succeeded.
#[cfg(feature = "llvm")]
fn finish(dir: &Path, outcome: Result<()>, failed_arch: Option<String>) -> bool {
    let mut result: Vec<(String, JsonValue)> = vec![(
        "protocol".to_owned(),
        JsonValue::Number(f64::from(PROTOCOL)),
    )];
    let ok = outcome.is_ok();
    if let Err(error) = outcome {
        let mut message = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            message.push_str(&format!("\n  caused by: {cause}"));
            source = cause.source();
        }
        let mut fields = vec![
            ("code".to_owned(), JsonValue::from(error.code().to_owned())),
            ("message".to_owned(), JsonValue::from(message)),
        ];
        if let Some(arch) = failed_arch {
            fields.push(("arch".to_owned(), JsonValue::from(arch)));
        }
        if let Error::DeviceLink(crate::error::LinkError::NestedBuild { message: why, .. }) = &error
        {
            fields.push(("why".to_owned(), JsonValue::from(why.clone())));
        }
        result.push((
            "error".to_owned(),
            JsonValue::Object(fields.into_iter().collect()),
        ));
    }
    let text = JsonValue::Object(result.into_iter().collect())
        .stringify()
        .unwrap_or_default();
    if let Err(e) = fsutil::write_atomic(&dir.join(RESULT), text.as_bytes()) {
        eprintln!("error: {EXECUTABLE}: writing its result: {e}");
        return false;
    }
    ok
}

/// The images of the request in `dir`, or the error and the architectures it is about (all
/// of the request's when it came before the links).
#[cfg(feature = "llvm")]
fn link_request(env: &Env, dir: &Path) -> (Result<Vec<DeviceImage>>, Option<String>) {
    let request = match read_request(dir) {
        Ok(request) => request,
        Err(e) => return (Err(e), None),
    };
    let all = crate::status::arch_list(&request.archs);
    let mut extra = Vec::with_capacity(request.extra.len());
    for (arch, name, path) in &request.extra {
        match std::fs::read(path).io("reading a device link input", path) {
            Ok(bytes) => extra.push((
                *arch,
                crate::device_link::DeviceInput::object(name.clone(), bytes),
            )),
            Err(e) => return (Err(e), Some(all)),
        }
    }
    let per_arch = match crate::device_link::build_gpu_images_of_triple(
        env,
        &request.krate,
        &request.archs,
        &request.target_dir,
        &extra,
    ) {
        Ok(per_arch) => per_arch,
        Err(e) => return (Err(e), Some(all)),
    };
    let mut images = Vec::new();
    for (arch, result) in per_arch {
        match result {
            Ok(mine) => images.extend(mine),
            Err(e) => return (Err(e), Some(arch.name())),
        }
    }
    (Ok(images), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn krate() -> KernelCrate {
        KernelCrate {
            package: "k-kernels".into(),
            lib_name: "k_kernels".into(),
            manifest_path: "/p/k/Cargo.toml".into(),
            root: "/p/k".into(),
            watch: vec!["/p/k/src".into()],
            deps: Vec::new(),
            default_features: false,
            features: vec!["fast".into()],
            panic: crate::metadata::PanicStrategy::Trap,
        }
    }

    #[test]
    fn a_request_reads_back_what_the_link_needs() {
        let dir = tempfile::tempdir().unwrap();
        let archs = crate::arch::parse_list("sm_80,sm_90", "test").unwrap();
        let text = request_json(
            &krate(),
            &archs,
            Path::new("/t/nvptx"),
            &[(archs[1], "poly.cu (sm_90)".into(), "extra-0.bc".into())],
        )
        .unwrap();
        std::fs::write(dir.path().join(REQUEST), text).unwrap();
        let request = read_request(dir.path()).unwrap();
        assert_eq!(request.archs, archs);
        assert_eq!(request.target_dir, Path::new("/t/nvptx"));
        assert_eq!(request.krate.feature_args(), krate().feature_args());
        assert_eq!(request.krate.manifest_path, krate().manifest_path);
        assert_eq!(request.krate.lib_name, "k_kernels");
        assert_eq!(request.krate.panic, crate::metadata::PanicStrategy::Trap);
        assert_eq!(
            request.extra,
            [(
                archs[1],
                "poly.cu (sm_90)".to_owned(),
                dir.path().join("extra-0.bc")
            )]
        );

        let other =
            text_with_protocol(&request_json(&krate(), &archs, Path::new("/t"), &[]).unwrap());
        std::fs::write(dir.path().join(REQUEST), other).unwrap();
        let err = read_request(dir.path()).unwrap_err();
        assert!(matches!(err, Error::DeviceLinkOutput { .. }), "{err}");
        assert!(err.to_string().contains("protocol Some(99)"), "{err}");
    }

    fn text_with_protocol(text: &str) -> String {
        text.replace(&format!("\"protocol\":{PROTOCOL}"), "\"protocol\":99")
    }

    fn script(dir: &Path, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt as _;
        let path = dir.join(EXECUTABLE);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn another_version_is_refused_with_the_install_line() {
        let dir = tempfile::tempdir().unwrap();
        let good = script(dir.path(), &format!("echo '{}'", protocol_line()));
        check(&good).unwrap();
        let old = script(dir.path(), "echo 'offload-build 0.0.9 device-link 1'");
        let err = check(&old).unwrap_err().to_string();
        for part in [
            "offload-build 0.0.9 device-link 1",
            &format!("cargo install cargo-offload --version {VERSION}"),
            "OFFLOAD_DEVICE_LINKER",
        ] {
            assert!(err.contains(part), "`{part}` missing in: {err}");
        }
    }

    fn run_script(body: &str) -> Result<Vec<DeviceImage>> {
        let dir = tempfile::tempdir().unwrap();
        let linker = DeviceLinker {
            path: script(dir.path(), body),
            origin: OFFLOAD_DEVICE_LINKER,
        };
        let archs = crate::arch::parse_list("sm_80,sm_90", "test").unwrap();
        link(
            &Env::detect(),
            &linker,
            &krate(),
            &archs,
            &dir.path().join("t"),
            &LinkedSources::default(),
        )
    }

    #[test]
    fn the_child_s_error_comes_back_typed_and_a_crash_as_such() {
        let err = run_script(&format!(
            "printf '{{\"protocol\":{PROTOCOL},\"error\":{{\"arch\":\"sm_90\",\"code\":\"OFF2124\",\"message\":\"boom\"}}}}' > \"$2/result.json\"; exit 1"
        ))
        .unwrap_err();
        assert!(matches!(err, Error::DeviceLinkFailed { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            "the device link of `k-kernels` for sm_90 failed: error[OFF2124]: boom"
        );
        let err = run_script("kill -SEGV $$").unwrap_err();
        assert!(matches!(err, Error::DeviceLinkCrashed { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("killed by signal 11 (SIGSEGV)") && text.contains("sm_80, sm_90"),
            "{text}"
        );
        let err = run_script("exit 0").unwrap_err();
        assert!(matches!(err, Error::DeviceLinkOutput { .. }), "{err}");
    }

    /// A CPU request names the library and the target; the object comes back as the child
    /// wrote it, and a child's error comes back typed.
    #[test]
    fn a_cpu_link_request_comes_back_as_its_object() {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("libk_kernels.a");
        std::fs::write(&archive, b"!<arch>\n").unwrap();
        let copy = dir.path().join("request-copy");
        std::fs::create_dir(&copy).unwrap();
        let linker = DeviceLinker {
            path: script(
                dir.path(),
                &format!(
                    "cp \"$2/request.json\" '{}/request.json'; printf OBJECT > \"$2/cpu.o\"; \
                     echo '{{\"protocol\":{PROTOCOL}}}' > \"$2/result.json\"",
                    copy.display()
                ),
            ),
            origin: OFFLOAD_DEVICE_LINKER,
        };
        let opts = CpuLinkOptions {
            triple: "x86_64-unknown-linux-gnu".into(),
            cpu: "x86-64-v3".into(),
            features: String::new(),
            keep: vec!["rust_twice".into()],
        };
        let env = Env::detect();
        let object = cpu_link(&env, &linker, &krate(), "x86-64-v3", &archive, &opts).unwrap();
        assert_eq!(object, b"OBJECT");
        let (package, path, read) = read_cpu_request(&copy).unwrap().unwrap();
        assert_eq!(
            (package.as_str(), path, read),
            ("k-kernels", archive.clone(), opts.clone())
        );
        // The exchange directory is gone.
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().starts_with("cpu-link-"))
            .collect();
        assert!(left.is_empty(), "{left:?}");

        let failing = DeviceLinker {
            path: script(
                dir.path(),
                &format!(
                    "printf '{{\"protocol\":{PROTOCOL},\"error\":{{\"code\":\"OFF2130\",\"message\":\"boom\"}}}}' > \"$2/result.json\"; exit 1"
                ),
            ),
            origin: OFFLOAD_DEVICE_LINKER,
        };
        let err = cpu_link(&env, &failing, &krate(), "host", &archive, &opts).unwrap_err();
        assert!(matches!(err, Error::DeviceLinkFailed { .. }), "{err}");
        assert!(err.to_string().contains("OFF2130"), "{err}");
    }

    #[test]
    fn images_come_back_in_architecture_order() {
        let dir = tempfile::tempdir().unwrap();
        let image = |arch: &str, kind| DeviceImage {
            arch: crate::arch::parse_list(arch, "test").unwrap()[0],
            image_kind: kind,
            offload_kind: offload_format::OffloadKind::Cuda,
            module: "k_kernels".into(),
            kernels: vec!["saxpy".into()],
            kernel_params: Vec::new(),
            kernel_resources: Vec::new(),
            bytes: b".version 8.0".to_vec(),
        };
        let images = [
            image("sm_90", offload_format::ImageKind::Ptx),
            image("sm_80", offload_format::ImageKind::Cubin),
            image("sm_80", offload_format::ImageKind::Ptx),
        ];
        let bundle = dir.path().join("bundle");
        std::fs::write(&bundle, crate::image::bundle(&images)).unwrap();
        let got = run_script(&format!(
            "cp '{}' \"$2/images.offload\"; echo '{{\"protocol\":{PROTOCOL}}}' > \"$2/result.json\"",
            bundle.display()
        ))
        .unwrap();
        assert_eq!(
            got,
            [images[1].clone(), images[2].clone(), images[0].clone()]
        );
    }
}
