//! Device images registered at start-up, in the manner of libomptarget's `__tgt_register_lib`.
//!
//! Every host crate that embeds kernels links an object made by `offload-build` holding its
//! bundle (OffloadBinaries back to back, in a `.llvm.offloading` section), an
//! [`OffloadDescriptor`] pointing at it, and a constructor that registers the descriptor
//! before `main` and unregisters it at exit. Registration only records the pointer: bundles
//! are parsed on first use, so a program pays nothing at start-up for images it never runs.
//!
//! # The code the embedding object is built from
//!
//! `offload-build` compiles this `#![no_std]` file (one per host crate, `BUNDLE_LEN` and the
//! paths filled in) to an object with `rustc --crate-type=staticlib` or `--emit=obj`. The
//! descriptor type is declared again there because the object does not depend on this crate;
//! its layout is the ABI and must match [`OffloadDescriptor`] field for field.
//!
//! ```ignore
//! #![no_std]
//!
//! #[repr(C)]
//! pub struct OffloadDescriptor {
//!     magic: u32,
//!     version: u32,
//!     name: *const u8,
//!     name_len: usize,
//!     bundle: *const u8,
//!     bundle_len: usize,
//! }
//! // SAFETY: the descriptor is immutable and points only at immutable statics.
//! unsafe impl Sync for OffloadDescriptor {}
//!
//! #[repr(C, align(8))]
//! struct Aligned<T: ?Sized>(T);
//!
//! const BUNDLE_LEN: usize = 12345;
//! #[used]
//! #[unsafe(link_section = ".llvm.offloading")]
//! static BUNDLE: Aligned<[u8; BUNDLE_LEN]> = Aligned(*include_bytes!("/abs/path/bundle.bin"));
//! static NAME: &[u8] = b"saxpy";
//!
//! static DESCRIPTOR: OffloadDescriptor = OffloadDescriptor {
//!     magic: 0x4F46_4C44, // OFFLOAD_DESCRIPTOR_MAGIC ("OFLD")
//!     version: 1,         // OFFLOAD_DESCRIPTOR_VERSION
//!     name: NAME.as_ptr(),
//!     name_len: NAME.len(),
//!     bundle: &raw const BUNDLE.0 as *const u8,
//!     bundle_len: BUNDLE_LEN,
//! };
//!
//! unsafe extern "C" {
//!     fn __offload_register_lib(desc: *const OffloadDescriptor);
//!     fn __offload_unregister_lib(desc: *const OffloadDescriptor);
//!     fn atexit(f: extern "C" fn()) -> i32;
//! }
//!
//! extern "C" fn offload_unregister() {
//!     // SAFETY: DESCRIPTOR is the descriptor registered by `offload_register`.
//!     unsafe { __offload_unregister_lib(&DESCRIPTOR) }
//! }
//!
//! extern "C" fn offload_register() {
//!     // SAFETY: DESCRIPTOR and everything it points at are statics of this object.
//!     unsafe {
//!         __offload_register_lib(&DESCRIPTOR);
//!         atexit(offload_unregister);
//!     }
//! }
//!
//! #[used]
//! #[unsafe(link_section = ".init_array.101")]
//! static OFFLOAD_CTOR: extern "C" fn() = offload_register;
//!
//! #[panic_handler]
//! fn panic(_: &core::panic::PanicInfo) -> ! { loop {} } // only for --crate-type=staticlib
//! ```
//!
//! Nothing in the host program refers to the object's symbols, so it must be linked as an
//! object (or the archive with `+whole-archive`), not left for the linker to drop.

use std::fmt;
use std::sync::Arc;
use std::sync::{Mutex, MutexGuard};

use offload_format::{ImageKind, OffloadBinary, OffloadKind};

use crate::error::{Error, Result};

/// The keys of an image's kernel crate library name, its comma-separated kernel names and its
/// kernels' parameter sizes.
pub(crate) use offload_format::offload_binary::{
    KEY_IMAGE_CRC32, KEY_KERNEL_PARAMS, KEY_KERNELS, KEY_MODULE,
};
/// `magic` of every [`OffloadDescriptor`], and the layout version this runtime reads.
pub use offload_format::offload_binary::{OFFLOAD_DESCRIPTOR_MAGIC, OFFLOAD_DESCRIPTOR_VERSION};

/// What an embedding object hands to [`__offload_register_lib`]: one bundle of device images.
///
/// The layout is an ABI (see the module documentation for the code that emits it).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OffloadDescriptor {
    /// [`OFFLOAD_DESCRIPTOR_MAGIC`].
    pub magic: u32,
    /// [`OFFLOAD_DESCRIPTOR_VERSION`].
    pub version: u32,
    /// UTF-8 name of what embedded the bundle (the host crate), for diagnostics.
    pub name: *const u8,
    /// Length of `name` in bytes.
    pub name_len: usize,
    /// The bundle: OffloadBinaries back to back.
    pub bundle: *const u8,
    /// Length of the bundle in bytes.
    pub bundle_len: usize,
}

// SAFETY: a descriptor is immutable data pointing at immutable data (the contract of
// `__offload_register_lib`).
unsafe impl Sync for OffloadDescriptor {}
// SAFETY: as above; moving the pointers between threads does not change what they point at.
unsafe impl Send for OffloadDescriptor {}

/// One device image of a registered bundle, borrowed while the registry is locked.
#[derive(Clone)]
pub struct RegisteredImage<'a> {
    /// Name of the descriptor the image came from.
    pub source: &'a str,
    /// Position of the image in its bundle.
    pub index: usize,
    /// `offload.module`.
    pub module: &'a str,
    /// The parsed OffloadBinary (`triple`, `arch`, kinds, other keys, the image bytes).
    pub binary: &'a OffloadBinary<'a>,
}

impl RegisteredImage<'_> {
    /// `triple`, or `""` when absent.
    pub fn triple(&self) -> &str {
        self.binary.triple().unwrap_or("")
    }

    /// `arch`, or `""` when absent.
    pub fn arch(&self) -> &str {
        self.binary.arch().unwrap_or("")
    }

    /// The image's format.
    pub fn image_kind(&self) -> ImageKind {
        self.binary.image_kind
    }

    /// The offload model the image was built for.
    pub fn offload_kind(&self) -> OffloadKind {
        self.binary.offload_kind
    }

    /// The image bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.binary.image
    }

    /// The image bytes, after checking them against the CRC-32 the build recorded
    /// (`offload.image-crc32`; images packed by other tools record none and are not checked).
    /// Backends read images through this, so a damaged one is refused by name.
    ///
    /// # Errors
    /// [`Error::ImageLoad`] naming the image when its bytes do not match.
    pub fn checked_bytes(&self) -> Result<&[u8]> {
        let bytes = self.bytes();
        if let Some(recorded) = self.binary.get(KEY_IMAGE_CRC32) {
            offload_format::offload_binary::check_image_crc32(bytes, recorded).map_err(
                |reason| Error::ImageLoad {
                    module: self.module.to_owned(),
                    image: self.describe().to_string(),
                    reason,
                },
            )?;
        }
        Ok(bytes)
    }

    /// Kernel names listed in `offload.kernels`.
    pub fn kernels(&self) -> impl Iterator<Item = &str> {
        self.binary
            .get(KEY_KERNELS)
            .unwrap_or("")
            .split(',')
            .filter(|k| !k.is_empty())
    }

    /// The parameter sizes `offload.kernel-params` records for `kernel`, `None` when the
    /// image records none for it (images of Rust kernels record none).
    ///
    /// # Errors
    /// [`Error::ImageLoad`] when the key's value is malformed.
    pub fn kernel_params(&self, kernel: &str) -> Result<Option<Vec<u32>>> {
        let Some(text) = self.binary.get(KEY_KERNEL_PARAMS) else {
            return Ok(None);
        };
        let all = offload_format::offload_binary::parse_kernel_params(text).map_err(|e| {
            Error::ImageLoad {
                module: self.module.to_owned(),
                image: self.describe().to_string(),
                reason: e.to_string(),
            }
        })?;
        Ok(all
            .into_iter()
            .find(|p| p.kernel == kernel)
            .map(|p| p.sizes))
    }

    /// A one-line description: `module[index] triple arch kind (from source)`.
    pub fn describe(&self) -> ImageInfo {
        ImageInfo {
            source: self.source.to_owned(),
            index: self.index,
            module: self.module.to_owned(),
            triple: self.triple().to_owned(),
            arch: self.arch().to_owned(),
            image_kind: self.image_kind(),
            size: self.bytes().len(),
        }
    }
}

impl fmt::Debug for RegisteredImage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisteredImage")
            .field("source", &self.source)
            .field("index", &self.index)
            .field("module", &self.module)
            .field("triple", &self.triple())
            .field("arch", &self.arch())
            .field("image_kind", &self.image_kind())
            .field("size", &self.bytes().len())
            .finish()
    }
}

/// Owned description of an image: which one a module was loaded from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    /// Name of the descriptor the image came from.
    pub source: String,
    /// Position of the image in its bundle.
    pub index: usize,
    /// `offload.module`.
    pub module: String,
    /// `triple`.
    pub triple: String,
    /// `arch`.
    pub arch: String,
    /// The image's format.
    pub image_kind: ImageKind,
    /// Size of the image in bytes.
    pub size: usize,
}

impl fmt::Display for ImageInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} image #{} of `{}`: {} {} {}, {} bytes",
            self.module,
            self.index,
            self.source,
            self.triple,
            self.arch,
            self.image_kind.name(),
            self.size
        )
    }
}

struct Entry {
    desc: *const OffloadDescriptor,
    /// Filled on first lookup.
    parsed: Option<Parsed>,
}

enum Parsed {
    Ok {
        name: &'static str,
        images: Vec<OffloadBinary<'static>>,
    },
    Bad(Error),
}

struct Registry {
    entries: Vec<Entry>,
}

// SAFETY: the raw descriptor pointers are only dereferenced under the registry's lock and
// point at immutable data valid while registered (the contract of `__offload_register_lib`).
unsafe impl Send for Registry {}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    entries: Vec::new(),
});

fn lock() -> MutexGuard<'static, Registry> {
    // Poisoning can only come from a panic in a caller's closure; the list itself is intact.
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records a bundle of device images. Called by the constructor of an embedding object.
///
/// Only the pointer is stored; nothing is parsed or validated until a module is looked up,
/// and nothing here panics.
///
/// # Safety
///
/// `desc` must be null or point at an [`OffloadDescriptor`] that, with the name and bundle it
/// points at, stays valid and unchanged until [`__offload_unregister_lib`] has returned for
/// the same pointer (or for the rest of the process).
#[unsafe(export_name = offload_format::abi_name!(REGISTER_LIB))]
pub unsafe extern "C" fn __offload_register_lib(desc: *const OffloadDescriptor) {
    if desc.is_null() {
        return;
    }
    let mut reg = lock();
    if reg.entries.iter().any(|e| e.desc == desc) {
        return;
    }
    reg.entries.push(Entry { desc, parsed: None });
}

/// Registers `bundle` (OffloadBinaries back to back) under `name`, as an embedding object
/// registers its bundle at start-up: for images built or loaded at run time (tests,
/// benchmarks, a program that fetches its kernels). The name, bundle and descriptor are leaked,
/// so the registration lasts for the process.
pub fn register_bundle(name: &str, bundle: Vec<u8>) {
    let name: &'static [u8] = Box::leak(name.as_bytes().to_vec().into_boxed_slice());
    let bundle: &'static [u8] = Box::leak(bundle.into_boxed_slice());
    let desc: &'static OffloadDescriptor = Box::leak(Box::new(OffloadDescriptor {
        magic: OFFLOAD_DESCRIPTOR_MAGIC,
        version: OFFLOAD_DESCRIPTOR_VERSION,
        name: name.as_ptr(),
        name_len: name.len(),
        bundle: bundle.as_ptr(),
        bundle_len: bundle.len(),
    }));
    // SAFETY: the descriptor, its name and its bundle are leaked: valid and unchanged for the
    // rest of the process.
    unsafe { __offload_register_lib(desc) };
}

/// Forgets a bundle recorded by [`__offload_register_lib`]. Modules already loaded from it
/// keep working: backends load copies of images.
///
/// # Safety
///
/// `desc` must be null or a pointer given to [`__offload_register_lib`] before (any other
/// pointer is ignored).
#[unsafe(export_name = offload_format::abi_name!(UNREGISTER_LIB))]
pub unsafe extern "C" fn __offload_unregister_lib(desc: *const OffloadDescriptor) {
    let mut reg = lock();
    reg.entries.retain(|e| e.desc != desc);
    if reg.entries.is_empty() {
        // Statics are never dropped: a `cdylib` unloaded with its last registration gone must
        // not leave the list's storage behind.
        reg.entries = Vec::new();
    }
}

fn parse_entry(desc: *const OffloadDescriptor) -> Parsed {
    // SAFETY: the pointer was registered and is still registered (we hold the lock), so by the
    // contract of `__offload_register_lib` it points at a valid descriptor.
    let d = unsafe { &*desc };
    if d.magic != OFFLOAD_DESCRIPTOR_MAGIC {
        return Parsed::Bad(Error::BadDescriptor {
            address: desc as usize,
            reason: format!("magic is {:#010x}", d.magic),
        });
    }
    if d.version != OFFLOAD_DESCRIPTOR_VERSION {
        return Parsed::Bad(Error::BadDescriptor {
            address: desc as usize,
            reason: format!(
                "version {} (this runtime reads {OFFLOAD_DESCRIPTOR_VERSION})",
                d.version
            ),
        });
    }
    let name = if d.name.is_null() || d.name_len == 0 {
        ""
    } else {
        // SAFETY: non-null, and valid for `name_len` bytes by the registration contract.
        let bytes: &'static [u8] = unsafe { std::slice::from_raw_parts(d.name, d.name_len) };
        std::str::from_utf8(bytes).unwrap_or("<non-UTF-8 name>")
    };
    if d.bundle.is_null() || d.bundle_len == 0 {
        return Parsed::Bad(Error::BadDescriptor {
            address: desc as usize,
            reason: format!("`{name}` has an empty bundle"),
        });
    }
    // SAFETY: non-null, valid for `bundle_len` bytes while registered. The `'static` lifetime
    // never leaves this module except re-borrowed for the duration of a registry lock, and
    // unregistering drops the parsed images under that same lock.
    let bundle: &'static [u8] = unsafe { std::slice::from_raw_parts(d.bundle, d.bundle_len) };
    match offload_format::parse_all(bundle) {
        Ok(images) => Parsed::Ok { name, images },
        Err(source) => Parsed::Bad(Error::DamagedBundle {
            name: name.to_owned(),
            source: Arc::new(source),
        }),
    }
}

/// Runs `f` on the images of `module` from every registered bundle, in registration order,
/// with the registry locked (so no bundle can be unregistered meanwhile).
///
/// Returns [`Error::NoImages`] when no intact bundle holds an image of `module`, or the
/// first damaged bundle's [`Error::DamagedBundle`] / [`Error::BadDescriptor`] when some
/// bundle could not be read and no intact one holds the module.
pub fn with_module_images<R>(
    module: &str,
    f: impl FnOnce(&[RegisteredImage<'_>]) -> Result<R>,
) -> Result<R> {
    let mut reg = lock();
    for e in &mut reg.entries {
        if e.parsed.is_none() {
            e.parsed = Some(parse_entry(e.desc));
        }
    }
    let mut found = Vec::new();
    let mut first_bad = None;
    for e in &reg.entries {
        match &e.parsed {
            Some(Parsed::Ok { name, images }) => {
                for (index, binary) in images.iter().enumerate() {
                    if binary.get(KEY_MODULE) == Some(module) {
                        found.push(RegisteredImage {
                            source: name,
                            index,
                            module: binary.get(KEY_MODULE).unwrap_or(""),
                            binary,
                        });
                    }
                }
            }
            Some(Parsed::Bad(err)) => {
                first_bad.get_or_insert(err);
            }
            None => {}
        }
    }
    if found.is_empty() {
        return Err(match first_bad {
            Some(err) => err.clone_for_report(),
            None => Error::NoImages {
                module: module.to_owned(),
            },
        });
    }
    f(&found)
}

/// The kernel modules with an image whose `offload.kernels` lists `kernel`, each once, in
/// registration order: where a kernel known only by its symbol name (a foreign kernel) may be.
///
/// # Errors
/// When no intact bundle lists it and some bundle could not be read, that bundle's
/// [`Error::DamagedBundle`] / [`Error::BadDescriptor`].
pub fn modules_listing(kernel: &str) -> Result<Vec<String>> {
    let mut reg = lock();
    let mut modules: Vec<String> = Vec::new();
    let mut first_bad = None;
    for e in &mut reg.entries {
        if e.parsed.is_none() {
            e.parsed = Some(parse_entry(e.desc));
        }
        match &e.parsed {
            Some(Parsed::Ok { name, images }) => {
                for (index, binary) in images.iter().enumerate() {
                    let image = RegisteredImage {
                        source: name,
                        index,
                        module: binary.get(KEY_MODULE).unwrap_or(""),
                        binary,
                    };
                    if image.kernels().any(|k| k == kernel)
                        && !modules.iter().any(|m| m == image.module)
                    {
                        modules.push(image.module.to_owned());
                    }
                }
            }
            Some(Parsed::Bad(err)) => {
                first_bad.get_or_insert(err.clone_for_report());
            }
            None => {}
        }
    }
    match first_bad {
        Some(err) if modules.is_empty() => Err(err),
        _ => Ok(modules),
    }
}

/// What a registered image records about one kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelEntry {
    /// The image's `offload.kernels` does not list it (or the image is no longer registered).
    Absent,
    /// Listed, with the parameter sizes `offload.kernel-params` records for it, if any.
    Listed(Option<Vec<u32>>),
}

/// What the registered image `image` (a loaded module's, [`crate::Device::load_module`])
/// records about `kernel`.
///
/// # Errors
/// [`Error::ImageLoad`] when its `offload.kernel-params` is malformed.
pub fn kernel_entry(image: &ImageInfo, kernel: &str) -> Result<KernelEntry> {
    let found = with_module_images(&image.module, |images| {
        let Some(registered) = images
            .iter()
            .find(|i| i.source == image.source && i.index == image.index)
        else {
            return Ok(KernelEntry::Absent);
        };
        if !registered.kernels().any(|k| k == kernel) {
            return Ok(KernelEntry::Absent);
        }
        Ok(KernelEntry::Listed(registered.kernel_params(kernel)?))
    });
    match found {
        Err(Error::NoImages { .. }) => Ok(KernelEntry::Absent),
        other => other,
    }
}

/// Names of the registered bundles and what each holds, for diagnostics: one
/// `(name, Ok(images) | Err(error))` pair per registered descriptor.
pub fn inventory() -> Vec<(String, Result<Vec<ImageInfo>>)> {
    let mut reg = lock();
    let mut out = Vec::new();
    for e in &mut reg.entries {
        if e.parsed.is_none() {
            e.parsed = Some(parse_entry(e.desc));
        }
        match &e.parsed {
            Some(Parsed::Ok { name, images }) => {
                let infos = images
                    .iter()
                    .enumerate()
                    .map(|(index, binary)| {
                        RegisteredImage {
                            source: name,
                            index,
                            module: binary.get(KEY_MODULE).unwrap_or(""),
                            binary,
                        }
                        .describe()
                    })
                    .collect();
                out.push(((*name).to_owned(), Ok(infos)));
            }
            Some(Parsed::Bad(err)) => out.push((String::new(), Err(err.clone_for_report()))),
            None => {}
        }
    }
    out
}

/// Number of registered descriptors (parsed or not).
pub fn registered_count() -> usize {
    lock().entries.len()
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    /// The registry is process-wide: tests that register run one at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn binary(module: &str, kernels: &str, payload: &'static [u8]) -> Vec<u8> {
        OffloadBinary {
            image_kind: ImageKind::Object,
            offload_kind: OffloadKind::OpenMp,
            flags: 0,
            strings: vec![
                (
                    Cow::Borrowed("triple"),
                    Cow::Borrowed("x86_64-unknown-linux-gnu"),
                ),
                (Cow::Borrowed("arch"), Cow::Borrowed("host")),
                (Cow::Borrowed(KEY_MODULE), Cow::Owned(module.to_owned())),
                (Cow::Borrowed(KEY_KERNELS), Cow::Owned(kernels.to_owned())),
            ],
            image: Cow::Borrowed(payload),
        }
        .to_bytes()
    }

    fn leak_descriptor(name: &str, bundle: Vec<u8>) -> *const OffloadDescriptor {
        let name: &'static [u8] = Box::leak(name.as_bytes().to_vec().into_boxed_slice());
        let bundle: &'static [u8] = Box::leak(bundle.into_boxed_slice());
        // A raw pointer from `into_raw`, not a reference: a test may still write through it.
        Box::into_raw(Box::new(OffloadDescriptor {
            magic: OFFLOAD_DESCRIPTOR_MAGIC,
            version: OFFLOAD_DESCRIPTOR_VERSION,
            name: name.as_ptr(),
            name_len: name.len(),
            bundle: bundle.as_ptr(),
            bundle_len: bundle.len(),
        }))
    }

    #[test]
    fn two_descriptors_each_with_their_module() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let a = leak_descriptor("host_a", binary("reg_test_a", "k1,k2", b"AAAA"));
        let mut two = binary("reg_test_b", "k3", b"BBBBBBBB");
        two.extend(binary("reg_test_b", "k3", b"CCCC"));
        let b = leak_descriptor("host_b", two);
        // SAFETY: both descriptors and their data are leaked, so valid for the process.
        unsafe {
            __offload_register_lib(a);
            __offload_register_lib(b);
            __offload_register_lib(a);
        }
        let got = with_module_images("reg_test_a", |imgs| {
            assert_eq!(imgs.len(), 1);
            assert_eq!(imgs[0].source, "host_a");
            assert_eq!(imgs[0].bytes(), b"AAAA");
            assert_eq!(imgs[0].kernels().collect::<Vec<_>>(), ["k1", "k2"]);
            assert_eq!(imgs[0].triple(), "x86_64-unknown-linux-gnu");
            Ok(imgs.len())
        })
        .unwrap();
        assert_eq!(got, 1);
        let sizes = with_module_images("reg_test_b", |imgs| {
            Ok(imgs
                .iter()
                .map(|i| (i.index, i.bytes().len()))
                .collect::<Vec<_>>())
        })
        .unwrap();
        assert_eq!(sizes, [(0, 8), (1, 4)]);

        // SAFETY: `a` was registered above.
        unsafe { __offload_unregister_lib(a) };
        let err = with_module_images("reg_test_a", |_| Ok(())).unwrap_err();
        assert!(
            matches!(&err, Error::NoImages { module } if module == "reg_test_a"),
            "{err}"
        );
        // SAFETY: `b` was registered above.
        unsafe { __offload_unregister_lib(b) };
    }

    #[test]
    fn modules_listing_a_kernel_and_what_images_record() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let mut with_params = OffloadBinary::parse(&binary("reg_fk_b", "fk_shared", b"BB"))
            .unwrap()
            .0
            .into_owned();
        with_params.set(KEY_KERNEL_PARAMS, "fk_shared:8,4;other:1");
        let mut two = with_params.to_bytes();
        two.extend(binary("reg_fk_b", "fk_shared", b"CC"));
        let a = leak_descriptor("fk_a", binary("reg_fk_a", "fk_a,fk_shared", b"AA"));
        let b = leak_descriptor("fk_b", two);
        // SAFETY: both descriptors and their data are leaked, so valid for the process.
        unsafe {
            __offload_register_lib(a);
            __offload_register_lib(b);
        }
        assert_eq!(
            modules_listing("fk_shared").unwrap(),
            ["reg_fk_a", "reg_fk_b"]
        );
        assert_eq!(modules_listing("fk_a").unwrap(), ["reg_fk_a"]);
        assert!(modules_listing("fk_nowhere").unwrap().is_empty());

        let image = |module: &str, index, source: &str| ImageInfo {
            source: source.to_owned(),
            index,
            module: module.to_owned(),
            triple: String::new(),
            arch: String::new(),
            image_kind: ImageKind::Object,
            size: 0,
        };
        assert_eq!(
            kernel_entry(&image("reg_fk_b", 0, "fk_b"), "fk_shared").unwrap(),
            KernelEntry::Listed(Some(vec![8, 4]))
        );
        assert_eq!(
            kernel_entry(&image("reg_fk_b", 1, "fk_b"), "fk_shared").unwrap(),
            KernelEntry::Listed(None)
        );
        // `other` has recorded sizes but is not a kernel the image lists.
        assert_eq!(
            kernel_entry(&image("reg_fk_b", 0, "fk_b"), "other").unwrap(),
            KernelEntry::Absent
        );
        assert_eq!(
            kernel_entry(&image("reg_fk_gone", 0, "fk_b"), "fk_shared").unwrap(),
            KernelEntry::Absent
        );

        // SAFETY: registered above.
        unsafe {
            __offload_unregister_lib(a);
            __offload_unregister_lib(b);
        }
        let mut bytes = binary("reg_fk_damaged", "fk_a", b"XXXX");
        bytes.truncate(bytes.len() - 20);
        let d = leak_descriptor("fk_damaged", bytes);
        // SAFETY: leaked, valid for the process.
        unsafe { __offload_register_lib(d) };
        let err = modules_listing("fk_a").unwrap_err();
        assert!(
            matches!(&err, Error::DamagedBundle { name, .. } if name == "fk_damaged"),
            "{err}"
        );
        // SAFETY: registered above.
        unsafe { __offload_unregister_lib(d) };
    }

    #[test]
    fn damaged_bundle_is_a_typed_error() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let mut bytes = binary("reg_test_damaged", "k", b"XXXX");
        bytes.truncate(bytes.len() - 20);
        let d = leak_descriptor("damaged", bytes);
        // SAFETY: leaked, valid for the process.
        unsafe { __offload_register_lib(d) };
        let err = with_module_images("reg_test_damaged", |_| Ok(())).unwrap_err();
        assert!(
            matches!(&err, Error::DamagedBundle { name, .. } if name == "damaged"),
            "{err}"
        );
        // SAFETY: registered above.
        unsafe { __offload_unregister_lib(d) };
    }

    #[test]
    fn bad_magic_is_a_typed_error() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let d = leak_descriptor("badmagic", binary("reg_test_magic", "k", b"XXXX"));
        // SAFETY: leaked just above (a raw pointer with write permission) and not yet
        // registered, so this is the only access.
        unsafe { (*d.cast_mut()).magic = 7 };
        // SAFETY: leaked, valid for the process.
        unsafe { __offload_register_lib(d) };
        let err = with_module_images("reg_test_magic", |_| Ok(())).unwrap_err();
        assert!(matches!(err, Error::BadDescriptor { .. }), "{err}");
        // SAFETY: registered above.
        unsafe { __offload_unregister_lib(d) };
    }
}
