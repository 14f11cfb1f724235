//! The device link's images kept by the content of everything that makes them, beside the
//! shared build cache's units: a clean build whose kernel crate compiles to the same bitcode
//! (another checkout at the same path, a CI runner's second build, `cargo clean`) runs neither
//! the link nor `ptxas` again.
//!
//! The key is a SHA-256 over: this layout's version; the executable doing the link (its path, size
//! and modification time: a rebuilt `cargo-offload-device` or build script links anew); the LLVM it
//! runs (version, and the shared library's path, size and modification time); the target, the AMD
//! code object version and the panic strategy; on NVIDIA the `ptxas` found (path, size, time), or
//! none; the kernel crate's library name (the images carry it); and every input of the link, with
//! whether it is linked whole or on demand and the symbols its archive says it defines: those
//! linked whole in order, the library members as a set (cargo finishes independent crates in any
//! order). The value is the images as the build embeds them (OffloadBinaries, with their kernels,
//! parameter sizes and resource figures), written whole and renamed into place.
//!
//! It lies in `device-links` of the shared build cache's directory, and is turned off with it
//! (`OFFLOAD_BUILD_CACHE=off`); every file may be deleted at any time.

use std::path::{Path, PathBuf};

use super::options::GpuLinkOptions;
use super::rlib_bitcode::DeviceInput;
use crate::env::Env;
use crate::error::IoContext;
use crate::image::DeviceImage;

/// The layout's version: a later one never reads this one's files.
const LAYOUT: &str = "offload device-link cache 1";

/// Where linked images are kept by their key.
#[derive(Debug, Clone)]
pub(crate) struct LinkCache {
    dir: PathBuf,
}

/// What one link's images are kept under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LinkKey([u8; 32]);

impl LinkKey {
    fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Hashes length-prefixed fields, so that no two sequences of fields hash alike.
struct KeyHasher(hmac_sha256::Hash);

impl KeyHasher {
    fn field(&mut self, bytes: &[u8]) {
        self.0.update((bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
    }

    /// A file by its path, size and modification time, or that there is none.
    fn file(&mut self, path: Option<&Path>) {
        let Some(path) = path else {
            self.field(b"(none)");
            return;
        };
        self.field(path.as_os_str().as_encoded_bytes());
        let meta = std::fs::metadata(path).ok();
        let modified = meta
            .as_ref()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        self.field(&meta.map_or(0, |m| m.len()).to_le_bytes());
        self.field(&modified.to_le_bytes());
    }
}

/// The path of the LLVM shared library this process runs, from its memory map.
fn loaded_llvm_library() -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| {
            Path::new(path)
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libLLVM"))
        })
        .map(PathBuf::from)
}

/// What of the key this process's link always has: the executable and the LLVM it runs,
/// found once.
fn linker_identity() -> &'static [u8; 32] {
    static IDENTITY: std::sync::OnceLock<[u8; 32]> = std::sync::OnceLock::new();
    IDENTITY.get_or_init(|| {
        let mut h = KeyHasher(hmac_sha256::Hash::new());
        h.file(std::env::current_exe().ok().as_deref());
        let (major, minor, patch) = inkwell::support::get_llvm_version();
        h.field(format!("{major}.{minor}.{patch}").as_bytes());
        h.file(loaded_llvm_library().as_deref());
        h.0.finalize()
    })
}

/// The key of linking `inputs` for `target` (`sm_80`, `gfx942:xnack+`) with `opts` into images
/// of module `module`, with `ptxas` assembling them (NVIDIA targets; `None` for AMD's or
/// without one).
pub(crate) fn key(
    module: &str,
    target: &str,
    opts: &GpuLinkOptions,
    ptxas: Option<&Path>,
    inputs: &[DeviceInput],
) -> LinkKey {
    let mut h = KeyHasher(hmac_sha256::Hash::new());
    h.field(LAYOUT.as_bytes());
    h.field(linker_identity());
    h.field(target.as_bytes());
    h.field(&opts.code_object_version.module_flag().to_le_bytes());
    h.field(opts.panic.name().as_bytes());
    h.file(ptxas);
    h.field(module.as_bytes());
    // The inputs linked whole in their order; the library members as a set: their order is
    // the order cargo finished their crates in, which varies between builds, and the link
    // takes from them only what is needed, each symbol from the one member defining it.
    let eager: Vec<&DeviceInput> = inputs.iter().filter(|i| !i.lazy).collect();
    h.field(&(eager.len() as u64).to_le_bytes());
    for input in eager {
        h.field(&input_digest(input));
    }
    let mut members: Vec<[u8; 32]> = inputs.iter().filter(|i| i.lazy).map(input_digest).collect();
    members.sort_unstable();
    h.field(&(members.len() as u64).to_le_bytes());
    for member in members {
        h.field(&member);
    }
    LinkKey(h.0.finalize())
}

/// One input's digest: how it is linked, the symbols its archive says it defines, its bytes.
fn input_digest(input: &DeviceInput) -> [u8; 32] {
    let mut h = KeyHasher(hmac_sha256::Hash::new());
    h.field(&[u8::from(input.lazy)]);
    match &input.defines {
        Some(symbols) => {
            h.field(&(symbols.len() as u64).to_le_bytes());
            for symbol in symbols {
                h.field(symbol.as_bytes());
            }
        }
        None => h.field(b"(unknown)"),
    }
    h.field(&input.bytes);
    h.0.finalize()
}

impl LinkCache {
    /// The cache beside the shared build cache the environment asks for; `None` when that is
    /// turned off.
    pub(crate) fn from_env(env: &Env) -> Option<LinkCache> {
        crate::build_cache::BuildCache::from_env(env).map(|cache| LinkCache {
            dir: cache.root().join("device-links"),
        })
    }

    /// A cache in `dir` (tests).
    #[cfg(test)]
    pub(crate) fn at(dir: impl Into<PathBuf>) -> LinkCache {
        LinkCache { dir: dir.into() }
    }

    fn path(&self, key: &LinkKey) -> PathBuf {
        self.dir.join(format!("{}.offload", key.hex()))
    }

    /// The images kept under `key`; `None` when there are none, or what is there does not
    /// read as images of `module` for `target` (then it is linked anew and replaced).
    pub(crate) fn load(
        &self,
        key: &LinkKey,
        module: &str,
        target: &str,
    ) -> Option<Vec<DeviceImage>> {
        let path = self.path(key);
        let bytes = std::fs::read(&path).ok()?;
        let binaries = offload_format::offload_binary::parse_all(&bytes).ok()?;
        let name = path.display().to_string();
        let images = binaries
            .iter()
            .map(|b| DeviceImage::from_offload_binary(b, &name).map(|(_, image)| image))
            .collect::<Result<Vec<_>, _>>()
            .ok()?;
        let fits = !images.is_empty()
            && images
                .iter()
                .all(|i| i.module == module && i.arch.name() == target);
        fits.then_some(images)
    }

    /// Keeps `images` under `key`, written whole and renamed into place.
    pub(crate) fn store(&self, key: &LinkKey, images: &[DeviceImage]) -> crate::error::Result<()> {
        let bytes: Vec<u8> = images
            .iter()
            .flat_map(|image| image.to_offload_binary().to_bytes())
            .collect();
        std::fs::create_dir_all(&self.dir).io("creating the device-link cache", &self.dir)?;
        crate::fsutil::write_atomic(&self.path(key), &bytes)
    }
}

#[cfg(test)]
mod tests {
    use offload_format::offload_binary::{KernelParams, PtxasKernelInfo};
    use offload_format::{ImageKind, OffloadKind};

    use super::*;

    fn input(bytes: &[u8], lazy: bool) -> DeviceInput {
        DeviceInput {
            name: "k.bc".into(),
            bytes: bytes.to_vec(),
            lazy,
            defines: lazy.then(|| vec!["f".to_owned()]),
        }
    }

    /// Each thing the images depend on changes the key; a name for messages does not.
    #[test]
    fn the_key_follows_every_input_of_the_link() {
        let sm80 = "sm_80";
        let amd = GpuLinkOptions::default();
        let inputs = [input(b"BC\xc0\xde1", false), input(b"BC\xc0\xde2", true)];
        let base = key("k", sm80, &amd, None, &inputs);
        assert_eq!(base, key("k", sm80, &amd, None, &inputs), "deterministic");
        let mut renamed = inputs.clone();
        renamed[0].name = "elsewhere/k.bc".into();
        assert_eq!(base, key("k", sm80, &amd, None, &renamed));

        let mut byte = inputs.clone();
        byte[1].bytes[4] = b'3';
        let mut lazy = inputs.clone();
        lazy[0].lazy = true;
        let mut defines = inputs.clone();
        defines[1].defines = Some(vec!["g".to_owned()]);
        let two_whole = [inputs[0].clone(), input(b"BC\xc0\xde4", false)];
        let whole_reordered = [two_whole[1].clone(), two_whole[0].clone()];
        let two_members = [inputs[1].clone(), input(b"BC\xc0\xde5", true)];
        let members_reordered = [two_members[1].clone(), two_members[0].clone()];
        assert_eq!(
            key("k", sm80, &amd, None, &two_members),
            key("k", sm80, &amd, None, &members_reordered),
            "library members are a set: cargo finishes crates in any order"
        );
        assert_ne!(
            key("k", sm80, &amd, None, &two_whole),
            key("k", sm80, &amd, None, &whole_reordered),
            "the order of the inputs linked whole"
        );
        let ptxas = std::env::current_exe().unwrap();
        for (what, other) in [
            ("a byte of an input", key("k", sm80, &amd, None, &byte)),
            (
                "linked whole or on demand",
                key("k", sm80, &amd, None, &lazy),
            ),
            ("an archive's symbols", key("k", sm80, &amd, None, &defines)),
            ("one input less", key("k", sm80, &amd, None, &inputs[..1])),
            ("the module", key("j", sm80, &amd, None, &inputs)),
            ("the target", key("k", "sm_90", &amd, None, &inputs)),
            ("the ptxas", key("k", sm80, &amd, Some(&ptxas), &inputs)),
        ] {
            assert_ne!(base, other, "{what} must change the key");
        }
        // AMD images depend on the code object version.
        let amd_key = key("k", "gfx90a", &amd, None, &inputs);
        let v6 = GpuLinkOptions {
            code_object_version: crate::device_link::common::AmdCodeObjectVersion::parse("6")
                .unwrap(),
            ..GpuLinkOptions::default()
        };
        assert_ne!(amd_key, key("k", "gfx90a", &v6, None, &inputs));
        // Images of both targets depend on the panic strategy.
        let trap = GpuLinkOptions {
            panic: crate::metadata::PanicStrategy::Trap,
            ..GpuLinkOptions::default()
        };
        assert_ne!(amd_key, key("k", "gfx90a", &trap, None, &inputs));
        assert_ne!(base, key("k", sm80, &trap, None, &inputs));
    }

    /// Images come back as they were stored, with their kernels, parameters and figures; what
    /// is not images of the module and target is not used.
    #[test]
    fn images_come_back_whole_and_only_for_their_module_and_target() {
        let dir = crate::fsutil::TempDir::new_in(&std::env::temp_dir(), "link-cache-").unwrap();
        let cache = LinkCache::at(dir.path().join("device-links"));
        let sm80 = "sm_80";
        let image = |kind, bytes: &[u8]| DeviceImage {
            arch: crate::arch::parse_arch("sm_80", "a test").unwrap(),
            image_kind: kind,
            offload_kind: OffloadKind::Cuda,
            module: "k".into(),
            kernels: vec!["saxpy".into(), "scale".into()],
            kernel_params: vec![KernelParams {
                kernel: "saxpy".into(),
                sizes: vec![4, 4, 8, 8],
            }],
            kernel_resources: vec![PtxasKernelInfo {
                name: "saxpy".into(),
                registers: 12,
                ..PtxasKernelInfo::default()
            }],
            bytes: bytes.to_vec(),
        };
        let images = vec![
            image(ImageKind::Cubin, b"\x7fELF cubin"),
            image(ImageKind::Ptx, b".version 8.7"),
        ];
        let k = key(
            "k",
            sm80,
            &GpuLinkOptions::default(),
            None,
            &[input(b"BC", false)],
        );
        assert_eq!(cache.load(&k, "k", sm80), None, "nothing before a store");
        cache.store(&k, &images).unwrap();
        assert_eq!(cache.load(&k, "k", sm80), Some(images));
        assert_eq!(cache.load(&k, "j", sm80), None, "another module's");
        assert_eq!(cache.load(&k, "k", "sm_90"), None);
        std::fs::write(cache.path(&k), b"not an offload binary").unwrap();
        assert_eq!(
            cache.load(&k, "k", sm80),
            None,
            "a damaged file is linked anew"
        );
    }
}
