//! Prebuilt kernel bundles: a kernel crate carries its device images in
//! `offload/<lib_name>.offload`, so that crates depending on it build on stable Rust with no
//! device toolchain, LLVM or CUDA toolkit.
//!
//! The file is concatenated OffloadBinaries (as `.llvm.offloading` holds them, so
//! `llvm-offload-binary` and `cargo offload inspect` read it), each image carrying, beside
//! `triple`, `arch`, `offload.module` and `offload.kernels` (the first image alone carries the
//! inputs, the toolchain and the producer):
//!
//! | key | value |
//! |---|---|
//! | `offload.prebuilt.hash` | SHA-256 of the inputs below, hex |
//! | `offload.prebuilt.inputs` | one line per input: `<label> <sha256>` |
//! | `offload.prebuilt.toolchain` | the `rustc -vV` release and LLVM lines of the GPU builds' toolchain and (`host:`, where it differs) of the CPU device's |
//! | `offload.prebuilt.producer` | `offload-build <version>` |
//! | `offload.prebuilt.image-sha256` | SHA-256 of this image's bytes, checked before use |
//!
//! The hash covers everything that determines the images: every file under `src/` (and
//! `build.rs`) of the kernel crate and of each package it depends on, with their names and
//! versions (so a changed `Cargo.lock` changes it), the device toolchain line, the target
//! list, [`IMAGE_RECIPE`] (the codegen flags), the features where they are not the defaults,
//! and the panic strategy where it is `trap` (`KernelCrate::panic`: a bundle built with `report`
//! keeps its hash). The kernel crate's `Cargo.toml` is left out: `cargo package` rewrites it.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use hmac_sha256::Hash as Sha256;
use offload_format::OffloadBinary;

use crate::arch::{self, OffloadArch};
use crate::env::Env;
use crate::error::{Error, IoContext, Result};
use crate::image::DeviceImage;
use crate::metadata::KernelCrate;

/// The directory of a kernel crate that holds its prebuilt bundle.
pub const PREBUILT_DIR: &str = "offload";
/// The file extension of a prebuilt bundle.
pub const EXTENSION: &str = "offload";

/// Image metadata key: SHA-256 of the inputs, hex.
pub const KEY_HASH: &str = "offload.prebuilt.hash";
/// Image metadata key: one `<label> <sha256>` line per input (first image only).
pub const KEY_INPUTS: &str = "offload.prebuilt.inputs";
/// Image metadata key: the device toolchain's `rustc -vV` release and LLVM lines (first image
/// only).
pub const KEY_TOOLCHAIN: &str = "offload.prebuilt.toolchain";
/// Image metadata key: `offload-build <version>` of the build that wrote the bundle (first image
/// only).
pub const KEY_PRODUCER: &str = "offload.prebuilt.producer";
/// Image metadata key: SHA-256 of the image's own bytes, hex, checked before use.
pub const KEY_IMAGE_SHA256: &str = "offload.prebuilt.image-sha256";

/// The codegen recipe of device images: changed whenever the flags or passes that make an
/// image change, so that bundles built by another recipe are not taken for current.
pub const IMAGE_RECIPE: &str = "recipe 2: cpu staticlib fat-lto codegen-units=1 panic=abort irce, cc -shared; \
     nvptx O3 ptx-isa>=7.8 ptxas -O3; amdgcn O3 ld.lld -shared";

/// How a build uses prebuilt bundles (`OFFLOAD_PREBUILT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Use a bundle whose hash matches; otherwise build from source (`auto`, the default).
    Auto,
    /// Use the bundle or fail, naming what differs (`require`).
    Require,
    /// Always build from source (`never`).
    Never,
}

impl Policy {
    /// `OFFLOAD_PREBUILT`: `auto` (default), `require` or `never`.
    pub fn from_env(env: &Env) -> Result<Policy> {
        match env.get(crate::env::OFFLOAD_PREBUILT).as_deref() {
            None | Some("auto") => Ok(Policy::Auto),
            Some("require") => Ok(Policy::Require),
            Some("never") => Ok(Policy::Never),
            Some(other) => Err(Error::Prerequisite(format!(
                "OFFLOAD_PREBUILT=`{other}`: expected `auto`, `require` or `never`"
            ))),
        }
    }
}

/// Where `krate`'s prebuilt bundle lives: `<crate>/offload/<lib_name>.offload`.
pub fn bundle_path(krate: &KernelCrate) -> PathBuf {
    krate
        .root
        .join(PREBUILT_DIR)
        .join(format!("{}.{EXTENSION}", krate.lib_name))
}

/// The source hash of a kernel crate's images and the inputs it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceHash {
    /// SHA-256 over `inputs`, hex.
    pub hash: String,
    /// `(label, sha256)` per input, in hashing order.
    pub inputs: Vec<(String, String)>,
}

impl SourceHash {
    /// The inputs as stored: one `<label> <sha256>` line each.
    pub fn inputs_text(&self) -> String {
        let mut out = String::new();
        for (label, digest) in &self.inputs {
            let _ = writeln!(out, "{label} {digest}");
        }
        out
    }

    /// The labels whose digests differ between `self` and `recorded` (added, removed or
    /// changed), for a message naming what differs.
    pub fn differences(&self, recorded: &[(String, String)]) -> Vec<String> {
        let mut out = Vec::new();
        for (label, digest) in &self.inputs {
            match recorded.iter().find(|(l, _)| l == label) {
                None => out.push(format!("{label} (new)")),
                Some((_, d)) if d != digest => out.push(format!("{label} (changed)")),
                Some(_) => {}
            }
        }
        for (label, _) in recorded {
            if !self.inputs.iter().any(|(l, _)| l == label) {
                out.push(format!("{label} (gone)"));
            }
        }
        out
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Hashes what determines `krate`'s images for `archs` with the device toolchain `toolchain`.
pub fn source_hash(
    krate: &KernelCrate,
    toolchain: &str,
    archs: &[OffloadArch],
) -> Result<SourceHash> {
    let mut inputs = Vec::new();
    let mut names: Vec<String> = archs.iter().map(|a| a.name().to_owned()).collect();
    names.sort();
    inputs.push((
        "targets".to_owned(),
        hex(&Sha256::hash(names.join(",").as_bytes())),
    ));
    inputs.push((
        "toolchain".to_owned(),
        hex(&Sha256::hash(toolchain.as_bytes())),
    ));
    inputs.push((
        "recipe".to_owned(),
        hex(&Sha256::hash(IMAGE_RECIPE.as_bytes())),
    ));
    // Only features other than the defaults enter the hash, so a bundle built with the
    // defaults keeps its hash.
    let features = krate.feature_args();
    if !features.is_empty() {
        inputs.push((
            "features".to_owned(),
            hex(&Sha256::hash(features.join(" ").as_bytes())),
        ));
    }
    // Likewise only `trap`: `report` is what every bundle before the strategy was built with.
    if krate.panic != crate::metadata::PanicStrategy::Report {
        inputs.push((
            "panic".to_owned(),
            hex(&Sha256::hash(krate.panic.name().as_bytes())),
        ));
    }
    hash_package_sources(&krate.package, "", &krate.root, &mut inputs)?;
    for dep in &krate.deps {
        hash_package_sources(&dep.name, &dep.version, &dep.root, &mut inputs)?;
    }
    Ok(SourceHash {
        hash: hash_of_inputs(&inputs),
        inputs,
    })
}

fn hash_of_inputs(inputs: &[(String, String)]) -> String {
    let mut all = Sha256::new();
    for (label, digest) in inputs {
        all.update(label.as_bytes());
        all.update([0]);
        all.update(digest.as_bytes());
        all.update([b'\n']);
    }
    hex(&all.finalize())
}

/// One input per file under `root/src` and `root/build.rs`, labelled `name@version/path`.
fn hash_package_sources(
    name: &str,
    version: &str,
    root: &Path,
    inputs: &mut Vec<(String, String)>,
) -> Result<()> {
    let mut files = Vec::new();
    collect_files(&root.join("src"), &mut files)?;
    let build_rs = root.join("build.rs");
    if build_rs.is_file() {
        files.push(build_rs);
    }
    let mut labelled: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|f| {
            let rel = f
                .strip_prefix(root)
                .unwrap_or(&f)
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            let at = if version.is_empty() {
                name.to_owned()
            } else {
                format!("{name}@{version}")
            };
            (format!("{at}/{rel}"), f)
        })
        .collect();
    labelled.sort();
    for (label, file) in labelled {
        let bytes = std::fs::read(&file).io("reading a source file", &file)?;
        inputs.push((label, hex(&Sha256::hash(&bytes))));
    }
    Ok(())
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir).io("listing", dir)? {
        let path = entry.io("listing", dir)?.path();
        if path.is_dir() {
            collect_files(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

/// The identity, as recorded in a bundle, of the toolchains that build `archs`: `rustc -vV`'s
/// release line and its LLVM line, of the GPU builds' nightly and of the CPU device's
/// toolchain (`crate::nested::CpuToolchain`), the latter marked `host:` beside the former
/// where they differ.
pub fn toolchain_identity(env: &Env, archs: &[OffloadArch]) -> Result<String> {
    let line = |text: &str| {
        let release = text.lines().next().unwrap_or("").trim();
        let llvm = text
            .lines()
            .find(|l| l.starts_with("LLVM version:"))
            .unwrap_or("")
            .trim();
        format!("{release}; {llvm}")
    };
    let gpu = crate::nested::check_toolchain(env, archs)?.map(|text| line(&text));
    let host = if archs.iter().any(|a| matches!(a, OffloadArch::Host(_))) {
        Some(line(&crate::nested::CpuToolchain::find(env)?.version(env)?))
    } else {
        None
    };
    Ok(match (gpu, host) {
        (Some(gpu), Some(host)) if gpu != host => format!("{gpu}; host: {host}"),
        (Some(gpu), Some(_)) => gpu,
        (Some(one), None) | (None, Some(one)) => one,
        (None, None) => String::new(),
    })
}

/// Writes `images` of `krate` as its prebuilt bundle (atomically) and returns its path.
pub fn write_bundle(
    krate: &KernelCrate,
    images: &[DeviceImage],
    hash: &SourceHash,
    toolchain: &str,
) -> Result<PathBuf> {
    let producer = format!("offload-build {}", env!("CARGO_PKG_VERSION"));
    let inputs = hash.inputs_text();
    let mut bytes = Vec::new();
    for image in images {
        let image_sha = hex(&Sha256::hash(&image.bytes));
        let mut binary = image.to_offload_binary();
        binary.strings.extend([
            (Cow::Borrowed(KEY_IMAGE_SHA256), Cow::Owned(image_sha)),
            (Cow::Borrowed(KEY_HASH), Cow::Borrowed(hash.hash.as_str())),
            (Cow::Borrowed(KEY_INPUTS), Cow::Borrowed(inputs.as_str())),
            (Cow::Borrowed(KEY_TOOLCHAIN), Cow::Borrowed(toolchain)),
            (
                Cow::Borrowed(KEY_PRODUCER),
                Cow::Borrowed(producer.as_str()),
            ),
        ]);
        bytes.extend_from_slice(&binary.to_bytes());
    }
    let path = bundle_path(krate);
    crate::fsutil::write_atomic(&path, &bytes)?;
    Ok(path)
}

/// A prebuilt bundle as read back.
#[derive(Debug, Clone)]
pub struct Prebuilt {
    /// The bundle file.
    pub path: PathBuf,
    /// The source hash it was built from (`offload.prebuilt.hash`).
    pub hash: String,
    /// The inputs the hash covers: (label, SHA-256 hex) pairs.
    pub inputs: Vec<(String, String)>,
    /// The device toolchain that built it (`offload.prebuilt.toolchain`).
    pub toolchain: String,
    /// The build that wrote it (`offload.prebuilt.producer`).
    pub producer: String,
    /// Every image, host images of every triple included.
    pub images: Vec<(String, DeviceImage)>,
}

impl Prebuilt {
    /// The architectures it has images for, as `--offload-arch` names them (`host` for the
    /// running host triple only).
    pub fn archs(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (triple, image) in &self.images {
            let name = if matches!(image.arch, OffloadArch::Host(_)) {
                format!("{} ({triple})", image.arch)
            } else {
                image.arch.name().to_owned()
            };
            if !out.contains(&name) {
                out.push(name);
            }
        }
        out
    }

    /// The images for `archs` (host images only of `host_triple`), or the architectures it
    /// lacks.
    pub fn select(
        &self,
        archs: &[OffloadArch],
        host_triple: &str,
    ) -> std::result::Result<Vec<DeviceImage>, Vec<String>> {
        let mut missing = Vec::new();
        let mut out = Vec::new();
        for arch in archs {
            let found: Vec<&DeviceImage> = self
                .images
                .iter()
                .filter(|(triple, image)| {
                    &image.arch == arch && (arch.is_gpu() || triple == host_triple)
                })
                .map(|(_, image)| image)
                .collect();
            if found.is_empty() {
                missing.push(match arch {
                    OffloadArch::Host(_) => format!("{arch} ({host_triple})"),
                    other => other.name().to_owned(),
                });
            }
            out.extend(found.into_iter().cloned());
        }
        if missing.is_empty() {
            Ok(out)
        } else {
            Err(missing)
        }
    }
}

/// Reads a prebuilt bundle; a damaged or foreign file is a typed error naming it.
pub fn read_bundle(path: &Path) -> Result<Prebuilt> {
    let bytes = std::fs::read(path).io("reading the prebuilt kernel bundle", path)?;
    let bad = |reason: String| Error::BadPrebuilt {
        path: path.to_owned(),
        reason,
    };
    let binaries =
        offload_format::offload_binary::parse_all(&bytes).map_err(|e| bad(e.to_string()))?;
    let first = binaries
        .first()
        .ok_or_else(|| bad("it holds no image".to_owned()))?;
    let key = |b: &OffloadBinary<'_>, k: &str| {
        b.get(k)
            .map(str::to_owned)
            .ok_or_else(|| bad(format!("an image lacks the `{k}` key")))
    };
    let hash = key(first, KEY_HASH)?;
    let inputs_text = key(first, KEY_INPUTS)?;
    let toolchain = key(first, KEY_TOOLCHAIN)?;
    let producer = key(first, KEY_PRODUCER)?;
    let inputs: Vec<(String, String)> = inputs_text
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(label, digest)| (label.to_owned(), digest.to_owned()))
        .collect();
    if hash_of_inputs(&inputs) != hash {
        return Err(bad(
            "its recorded inputs do not give its recorded hash".to_owned()
        ));
    }
    let toolchain_digest = hex(&Sha256::hash(toolchain.as_bytes()));
    if !inputs.contains(&("toolchain".to_owned(), toolchain_digest)) {
        return Err(bad(
            "its recorded toolchain does not match its inputs".to_owned()
        ));
    }
    let mut images = Vec::new();
    for (n, b) in binaries.iter().enumerate() {
        if key(b, KEY_HASH)? != hash {
            return Err(bad(format!(
                "image {n} has another source hash than image 0"
            )));
        }
        if key(b, KEY_IMAGE_SHA256)? != hex(&Sha256::hash(&b.image)) {
            return Err(bad(format!(
                "image {n}'s bytes do not match their recorded SHA-256"
            )));
        }
        images.push(
            DeviceImage::from_offload_binary(b, &path.display().to_string())
                .map_err(|e| bad(format!("image {n}: {e}")))?,
        );
    }
    Ok(Prebuilt {
        path: path.to_owned(),
        hash,
        inputs,
        toolchain,
        producer,
        images,
    })
}

/// What a build does with one kernel crate's prebuilt bundle.
#[derive(Debug)]
pub enum Decision {
    /// Embed these images; no device build.
    Use(Vec<DeviceImage>),
    /// Build from source; the warning says why the bundle was not used (none when there is no
    /// bundle).
    BuildFromSource(Option<String>),
}

/// Decides, under `policy`, whether `krate`'s bundle serves `archs`. `can_build` says whether
/// a build from source is possible here (device toolchain present, GPU support compiled in);
/// it is asked only when the bundle does not serve.
pub fn decide(
    krate: &KernelCrate,
    archs: &[OffloadArch],
    policy: Policy,
    can_build: &dyn Fn() -> bool,
) -> Result<Decision> {
    let path = bundle_path(krate);
    if policy == Policy::Never || !path.is_file() {
        return match policy {
            Policy::Require => Err(Error::Prebuilt {
                krate: krate.package.clone(),
                reason: format!(
                    "OFFLOAD_PREBUILT=require, but {} does not exist",
                    path.display()
                ),
            }),
            _ => Ok(Decision::BuildFromSource(None)),
        };
    }
    let refuse = |reason: String| -> Result<Decision> {
        let can_build = can_build();
        if policy == Policy::Auto && can_build {
            Ok(Decision::BuildFromSource(Some(format!(
                "not using {}: {reason}; building `{}` from source",
                path.display(),
                krate.package
            ))))
        } else {
            Err(Error::Prebuilt {
                krate: krate.package.clone(),
                reason: if can_build {
                    reason
                } else {
                    format!(
                        "{reason}, and it cannot be built from source here (no device toolchain or no GPU support)"
                    )
                },
            })
        }
    };
    let bundle = match read_bundle(&path) {
        Ok(b) => b,
        Err(e) => return refuse(e.to_string()),
    };
    let current = source_hash(krate, &bundle.toolchain, archs_of(&bundle).as_slice())?;
    if current.hash != bundle.hash {
        let differs = current.differences(&bundle.inputs);
        return refuse(format!(
            "its source hash does not match the crate's sources ({} differ: {})",
            differs.len(),
            differs
                .iter()
                .take(8)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    match bundle.select(archs, arch::host_triple()) {
        Ok(images) => Ok(Decision::Use(images)),
        Err(missing) => refuse(format!(
            "it has no image for {} (it has: {})",
            missing.join(", "),
            bundle.archs().join(", ")
        )),
    }
}

/// The architectures a bundle was hashed with: every image's, host once.
fn archs_of(bundle: &Prebuilt) -> Vec<OffloadArch> {
    let mut out: Vec<OffloadArch> = Vec::new();
    for (_, image) in &bundle.images {
        if !out.contains(&image.arch) {
            out.push(image.arch);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use offload_format::offload_binary::{KEY_KERNEL_PARAMS, KEY_KERNEL_RESOURCES};

    fn krate(root: &Path) -> KernelCrate {
        KernelCrate {
            package: "k".to_owned(),
            lib_name: "k".to_owned(),
            manifest_path: root.join("Cargo.toml"),
            root: root.to_owned(),
            watch: Vec::new(),
            deps: Vec::new(),
            default_features: true,
            features: Vec::new(),
            panic: crate::metadata::PanicStrategy::Report,
        }
    }

    fn image(arch: OffloadArch, bytes: &[u8]) -> DeviceImage {
        DeviceImage {
            arch,
            image_kind: offload_format::ImageKind::Object,
            offload_kind: offload_format::OffloadKind::OpenMp,
            module: "k".to_owned(),
            kernels: vec!["a".to_owned(), "b".to_owned()],
            kernel_params: Vec::new(),
            kernel_resources: Vec::new(),
            bytes: bytes.to_vec(),
        }
    }

    #[test]
    fn written_bundle_is_used_and_a_source_change_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "fn a() {}").unwrap();
        let k = krate(dir.path());
        let archs = [OffloadArch::HOST];
        let hash = source_hash(&k, "rustc x; LLVM version: 22.1.4", &archs).unwrap();
        write_bundle(
            &k,
            &[image(OffloadArch::HOST, b"\x7fELF")],
            &hash,
            "rustc x; LLVM version: 22.1.4",
        )
        .unwrap();

        let back = read_bundle(&bundle_path(&k)).unwrap();
        assert_eq!(back.hash, hash.hash);
        assert_eq!(back.inputs, hash.inputs);
        match decide(&k, &archs, Policy::Require, &|| false).unwrap() {
            Decision::Use(images) => {
                assert_eq!(images.len(), 1);
                assert_eq!(images[0].bytes, b"\x7fELF");
                assert_eq!(images[0].kernels, ["a", "b"]);
            }
            other => panic!("{other:?}"),
        }

        std::fs::write(dir.path().join("src/lib.rs"), "fn a() { /* patched */ }").unwrap();
        let err = decide(&k, &archs, Policy::Require, &|| true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("k/src/lib.rs (changed)"), "{err}");
        match decide(&k, &archs, Policy::Auto, &|| true).unwrap() {
            Decision::BuildFromSource(Some(why)) => assert!(why.contains("(changed)"), "{why}"),
            other => panic!("{other:?}"),
        }
        let err = decide(&k, &archs, Policy::Auto, &|| false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot be built from source here"), "{err}");
    }

    /// A bundle built with one panic strategy does not serve a build with the other; `report`
    /// adds nothing to the hash, so bundles built before the strategy existed keep theirs.
    #[test]
    fn the_panic_strategy_keys_the_bundle() {
        use crate::metadata::PanicStrategy;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "fn a() {}").unwrap();
        let report = krate(dir.path());
        let trap = KernelCrate {
            panic: PanicStrategy::Trap,
            ..report.clone()
        };
        let archs = [OffloadArch::HOST];
        let hash = source_hash(&report, "t", &archs).unwrap();
        assert!(hash.inputs.iter().all(|(label, _)| label != "panic"));
        let trapping = source_hash(&trap, "t", &archs).unwrap();
        assert_ne!(hash.hash, trapping.hash);
        assert_eq!(trapping.differences(&hash.inputs), ["panic (new)"]);
        write_bundle(&report, &[image(OffloadArch::HOST, b"x")], &hash, "t").unwrap();
        assert!(matches!(
            decide(&report, &archs, Policy::Require, &|| false).unwrap(),
            Decision::Use(_)
        ));
        let err = decide(&trap, &archs, Policy::Require, &|| true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("panic (new)"), "{err}");
    }

    #[test]
    fn kernel_params_and_resources_are_read_back_and_checked() {
        use offload_format::offload_binary::KernelParams;
        let dir = tempfile::tempdir().unwrap();
        let k = krate(dir.path());
        let archs = [OffloadArch::HOST];
        let hash = source_hash(&k, "t", &archs).unwrap();
        let with_params = DeviceImage {
            kernel_resources: vec![offload_format::offload_binary::PtxasKernelInfo {
                name: "a".to_owned(),
                registers: 12,
                constant_bytes: 372,
                ..Default::default()
            }],
            kernel_params: vec![
                KernelParams {
                    kernel: "a".to_owned(),
                    sizes: vec![8, 4, 4],
                },
                KernelParams {
                    kernel: "b".to_owned(),
                    sizes: vec![],
                },
            ],
            ..image(OffloadArch::HOST, b"x")
        };
        let path = write_bundle(
            &k,
            &[with_params.clone(), image(OffloadArch::HOST, b"y")],
            &hash,
            "t",
        )
        .unwrap();
        let back = read_bundle(&path).unwrap();
        assert_eq!(back.images[0].1, with_params);
        assert!(back.images[1].1.kernel_params.is_empty());

        let bytes = std::fs::read(&path).unwrap();
        let mut binaries = offload_format::parse_all(&bytes).unwrap();
        binaries[0].set(KEY_KERNEL_PARAMS, "a:8,x");
        let damaged: Vec<u8> = binaries.iter().flat_map(|b| b.to_bytes()).collect();
        std::fs::write(&path, damaged).unwrap();
        let err = read_bundle(&path).unwrap_err().to_string();
        assert!(err.contains("image 0: offload.kernel-params: "), "{err}");

        binaries[0].set(KEY_KERNEL_PARAMS, "a:8");
        binaries[0].set(KEY_KERNEL_RESOURCES, "a:registers=x");
        let damaged: Vec<u8> = binaries.iter().flat_map(|b| b.to_bytes()).collect();
        std::fs::write(&path, damaged).unwrap();
        let err = read_bundle(&path).unwrap_err().to_string();
        assert!(err.contains("image 0: offload.kernel-resources: "), "{err}");
    }

    #[test]
    fn a_missing_architecture_lists_what_the_bundle_has() {
        let dir = tempfile::tempdir().unwrap();
        let k = krate(dir.path());
        let archs = [OffloadArch::HOST];
        let hash = source_hash(&k, "t", &archs).unwrap();
        write_bundle(&k, &[image(OffloadArch::HOST, b"x")], &hash, "t").unwrap();
        let want = arch::parse_list("host,sm_80", "test").unwrap();
        let err = decide(&k, &want, Policy::Require, &|| false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no image for sm_80"), "{err}");
        assert!(
            err.contains(&format!("it has: host ({})", arch::host_triple())),
            "{err}"
        );
    }

    /// A bundle of two CPU levels keeps each image's level: read back, each serves its own.
    #[test]
    fn cpu_levels_keep_their_images() {
        let dir = tempfile::tempdir().unwrap();
        let k = krate(dir.path());
        let v3 = OffloadArch::Host(offload_format::CpuLevel::X86_64V3);
        let archs = [OffloadArch::HOST, v3];
        let hash = source_hash(&k, "t", &archs).unwrap();
        let images = [image(OffloadArch::HOST, b"base"), image(v3, b"v3")];
        write_bundle(&k, &images, &hash, "t").unwrap();
        match decide(&k, &archs, Policy::Require, &|| false).unwrap() {
            Decision::Use(used) => {
                let got: Vec<_> = used.iter().map(|i| (i.arch, i.bytes.clone())).collect();
                assert_eq!(
                    got,
                    [(OffloadArch::HOST, b"base".to_vec()), (v3, b"v3".to_vec())]
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn damaged_bundles_are_typed_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let k = krate(dir.path());
        let archs = [OffloadArch::HOST];
        let hash = source_hash(&k, "t", &archs).unwrap();
        let path = write_bundle(&k, &[image(OffloadArch::HOST, b"payload")], &hash, "t").unwrap();
        let good = std::fs::read(&path).unwrap();
        for cut in [0, 7, good.len() / 2, good.len() - 1] {
            std::fs::write(&path, &good[..cut]).unwrap();
            let err = read_bundle(&path).unwrap_err().to_string();
            assert!(err.contains(&path.display().to_string()), "{err}");
            match decide(&k, &archs, Policy::Auto, &|| true).unwrap() {
                Decision::BuildFromSource(Some(why)) => assert!(why.contains("not using"), "{why}"),
                other => panic!("cut {cut}: {other:?}"),
            }
        }
        let mut flipped = good.clone();
        let at = flipped.len() - 3;
        flipped[at] ^= 0xff;
        std::fs::write(&path, &flipped).unwrap();
        assert!(decide(&k, &archs, Policy::Require, &|| false).is_err());
    }
}
