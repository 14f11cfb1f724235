//! The embedding object: the bundle in `.llvm.offloading`, a descriptor pointing at it, and a
//! constructor registering it with the runtime before `main` (`offload_rt::registry` holds the
//! ABI). It is compiled from generated Rust by the same rustc as the host crate, for the same
//! target, and archived so Cargo can link it with `+whole-archive`: nothing refers to it by
//! name, so a plain archive member would be dropped by the linker.
//!
//! On ELF targets the object's references to the runtime's registration functions are made
//! hidden before it is archived. A hidden reference must be resolved inside the executable or
//! shared object it is linked into, so a `cdylib` with kernels registers them with its own copy
//! of the runtime even when it is loaded into a program that exports its own (a plugin host
//! linked with `-rdynamic`); with a default-visibility reference the dynamic linker would bind
//! the `cdylib`'s registration to the program's runtime, and the `cdylib` would find none of
//! its kernels.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use offload_format::abi;

use crate::command;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::{temp_file_beside, write_atomic};

/// The static library to link, and its `-l` name.
#[derive(Debug, Clone)]
pub struct EmbeddingLibrary {
    /// The directory holding `lib<link_name>.a`.
    pub dir: PathBuf,
    /// The name to pass to `-l`.
    pub link_name: String,
}

/// Writes `bundle` and builds the embedding library for it in `out_dir`.
///
/// `name` is the host package name (diagnostics, and unique symbol/library names);
/// `rustc` and `target` are the host build's compiler and target triple.
pub fn build_embedding_library(
    out_dir: &Path,
    name: &str,
    bundle: &[u8],
    rustc: &Path,
    target: &str,
) -> Result<EmbeddingLibrary> {
    let ident: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let crate_name = format!("offload_images_{ident}");
    let bundle_path = out_dir.join("offload_bundle.bin");
    write_atomic(&bundle_path, bundle)?;

    let source_path = out_dir.join(format!("{crate_name}.rs"));
    write_atomic(
        &source_path,
        generate_source(name, &bundle_path, bundle.len()).as_bytes(),
    )?;

    let object_path = out_dir.join(format!("{crate_name}.o"));
    let tmp_object =
        temp_file_beside(&object_path).io("creating a temporary file beside", &object_path)?;
    command::run(
        Command::new(rustc)
            .arg("--crate-name")
            .arg(&crate_name)
            .args([
                "--crate-type=lib",
                "--emit=obj",
                "--edition=2024",
                "-Copt-level=2",
                "-Ccodegen-units=1",
                "-Cpanic=abort",
                "--target",
                target,
                "-o",
            ])
            .arg(&tmp_object)
            .arg(&source_path),
    )?;
    let mut object = std::fs::read(&tmp_object).io("reading", &*tmp_object)?;
    hide_registration_references(&mut object).map_err(|reason| Error::BadEmbeddingObject {
        path: object_path.clone(),
        reason,
    })?;
    std::fs::write(&tmp_object, &object).io("writing", &*tmp_object)?;
    tmp_object
        .persist(&object_path)
        .io("renaming into place", &object_path)?;

    let link_name = crate_name;
    let archive_path = out_dir.join(format!("lib{link_name}.a"));
    let mut archive = Vec::with_capacity(object.len() + 128);
    offload_format::archive::write_archive(
        &mut archive,
        &[offload_format::archive::ArchiveMember {
            name: "offload.o".to_owned(),
            data: object.into(),
        }],
    )?;
    write_atomic(&archive_path, &archive)?;
    Ok(EmbeddingLibrary {
        dir: out_dir.to_owned(),
        link_name,
    })
}

/// The runtime functions the embedding object calls (`offload_rt::registry`).
const REGISTRATION_FUNCTIONS: [&str; 2] = [abi::REGISTER_LIB, abi::UNREGISTER_LIB];

/// Gives the undefined references of a 64-bit little-endian ELF relocatable object to
/// [`REGISTRATION_FUNCTIONS`] hidden visibility, in place; other objects (Mach-O, COFF, whose
/// linkers bind a library's references to its own definitions) are left as they are.
fn hide_registration_references(object: &mut [u8]) -> std::result::Result<(), String> {
    use object::LittleEndian;
    use object::elf::{FileHeader64, SHT_SYMTAB, STV_HIDDEN};
    use object::read::elf::{FileHeader, SectionHeader, Sym};

    if !object.starts_with(&object::elf::ELFMAG) {
        return Ok(());
    }
    let mut patches = Vec::new();
    {
        let data = &*object;
        let header = FileHeader64::<LittleEndian>::parse(data).map_err(|e| e.to_string())?;
        // Refuses a 32-bit or big-endian object: no host target of this project makes one.
        let endian = header.endian().map_err(|e| e.to_string())?;
        let sections = header.sections(endian, data).map_err(|e| e.to_string())?;
        let symtab = sections
            .symbols(endian, data, SHT_SYMTAB)
            .map_err(|e| e.to_string())?;
        let section = sections
            .section(symtab.section())
            .map_err(|e| e.to_string())?;
        let base = usize::try_from(section.sh_offset(endian)).map_err(|e| e.to_string())?;
        let entry = size_of::<object::elf::Sym64<LittleEndian>>();
        for (i, sym) in symtab.symbols().iter().enumerate() {
            let name = sym.name(endian, symtab.strings()).unwrap_or_default();
            if sym.is_undefined(endian)
                && REGISTRATION_FUNCTIONS.iter().any(|f| f.as_bytes() == name)
            {
                // st_other follows st_name (4 bytes) and st_info (1 byte).
                patches.push(base + i * entry + 5);
            }
        }
    }
    if patches.len() != REGISTRATION_FUNCTIONS.len() {
        return Err(format!(
            "expected one undefined reference to each of {}, found {}",
            REGISTRATION_FUNCTIONS.join(" and "),
            patches.len()
        ));
    }
    for at in patches {
        let other = object.get_mut(at).ok_or("symbol table out of bounds")?;
        *other = (*other & !0x3) | STV_HIDDEN;
    }
    Ok(())
}

fn generate_source(name: &str, bundle_path: &Path, bundle_len: usize) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        r#"// Generated by offload-build: the device images of `{name}` and their registration.
#![no_std]

#[repr(C)]
pub struct OffloadDescriptor {{
    magic: u32,
    version: u32,
    name: *const u8,
    name_len: usize,
    bundle: *const u8,
    bundle_len: usize,
}}
// SAFETY: the descriptor is immutable and points only at immutable statics.
unsafe impl Sync for OffloadDescriptor {{}}

#[repr(C, align(8))]
struct Aligned<T: ?Sized>(T);

const BUNDLE_LEN: usize = {bundle_len};
#[used]
#[unsafe(link_section = {offloading_section:?})]
static BUNDLE: Aligned<[u8; BUNDLE_LEN]> = Aligned(*include_bytes!({bundle_path:?}));
static NAME: &[u8] = &{name_bytes:?};

static DESCRIPTOR: OffloadDescriptor = OffloadDescriptor {{
    magic: {magic:#x},
    version: {version},
    name: NAME.as_ptr(),
    name_len: NAME.len(),
    bundle: &raw const BUNDLE.0 as *const u8,
    bundle_len: BUNDLE_LEN,
}};

unsafe extern "C" {{
    fn {register}(desc: *const OffloadDescriptor);
    fn {unregister}(desc: *const OffloadDescriptor);
    fn atexit(f: extern "C" fn()) -> i32;
}}

extern "C" fn offload_unregister() {{
    // SAFETY: DESCRIPTOR is the descriptor registered by `offload_register`.
    unsafe {{ {unregister}(&DESCRIPTOR) }}
}}

extern "C" fn offload_register() {{
    // SAFETY: DESCRIPTOR and everything it points at are statics of this object.
    unsafe {{
        {register}(&DESCRIPTOR);
        atexit(offload_unregister);
    }}
}}

#[used]
#[unsafe(link_section = {constructor_section:?})]
static OFFLOAD_CTOR: extern "C" fn() = offload_register;
"#,
        name_bytes = name.as_bytes(),
        magic = abi::OFFLOAD_DESCRIPTOR_MAGIC,
        version = abi::OFFLOAD_DESCRIPTOR_VERSION,
        offloading_section = abi::OFFLOADING_SECTION,
        constructor_section = abi::REGISTRATION_CONSTRUCTOR_SECTION,
        register = abi::REGISTER_LIB,
        unregister = abi::UNREGISTER_LIB,
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_source_names_the_bundle_and_registers_it() {
        let src = generate_source("my-app", Path::new("/out/offload_bundle.bin"), 4096);
        assert!(src.contains("const BUNDLE_LEN: usize = 4096;"));
        assert!(src.contains(r#"include_bytes!("/out/offload_bundle.bin")"#));
        for section in [
            abi::OFFLOADING_SECTION,
            abi::REGISTRATION_CONSTRUCTOR_SECTION,
        ] {
            let attribute = format!("#[unsafe(link_section = {section:?})]");
            assert!(src.contains(&attribute), "{src}");
        }
        assert!(src.contains(&format!("{}(&DESCRIPTOR);", abi::REGISTER_LIB)));
        // The name is embedded as bytes, whatever characters it holds.
        assert!(
            src.contains("static NAME: &[u8] = &[109, 121, 45, 97, 112, 112];"),
            "{src}"
        );
    }

    /// The host's rustc and target: the tests of this crate run on the host.
    fn host_rustc() -> (PathBuf, &'static str) {
        (PathBuf::from("rustc"), crate::arch::host_triple())
    }

    #[test]
    fn the_embedding_object_binds_registration_inside_the_object_it_is_linked_into() {
        use object::{Object, ObjectSymbol, SymbolFlags};

        let dir = tempfile::tempdir().unwrap();
        let (rustc, host) = host_rustc();
        let lib =
            build_embedding_library(dir.path(), "my-app", b"not a bundle", &rustc, host).unwrap();
        let object_path = lib.dir.join(format!("{}.o", lib.link_name));
        let bytes = std::fs::read(&object_path).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        if file.format() != object::BinaryFormat::Elf {
            return;
        }
        for name in REGISTRATION_FUNCTIONS {
            let symbol = file
                .symbols()
                .find(|s| s.name() == Ok(name))
                .unwrap_or_else(|| panic!("no reference to {name}"));
            assert!(symbol.is_undefined(), "{name}");
            let SymbolFlags::Elf { st_other, .. } = symbol.flags() else {
                panic!("{name}: not an ELF symbol");
            };
            assert_eq!(st_other & 0x3, object::elf::STV_HIDDEN, "{name}");
        }
        // The archive holds the patched object.
        let archive = std::fs::read(lib.dir.join(format!("lib{}.a", lib.link_name))).unwrap();
        assert!(archive.windows(bytes.len()).any(|w| w == bytes));
    }

    #[test]
    fn an_object_without_the_registration_references_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (rustc, host) = host_rustc();
        let lib = build_embedding_library(dir.path(), "my-app", b"x", &rustc, host).unwrap();
        let mut bytes = std::fs::read(lib.dir.join(format!("{}.o", lib.link_name))).unwrap();
        if !bytes.starts_with(&object::elf::ELFMAG) {
            return;
        }
        // Renames the references in the string table: what is left references neither.
        let at = bytes
            .windows(abi::REGISTER_LIB.len())
            .position(|w| w == abi::REGISTER_LIB.as_bytes())
            .unwrap();
        bytes[at] = b'X';
        let err = hide_registration_references(&mut bytes).unwrap_err();
        assert!(err.contains("found 1"), "{err}");
        // Anything not ELF passes through untouched.
        let mut macho = vec![0xcf, 0xfa, 0xed, 0xfe, 0, 0, 0, 0];
        hide_registration_references(&mut macho).unwrap();
        assert_eq!(macho, [0xcf, 0xfa, 0xed, 0xfe, 0, 0, 0, 0]);
    }
}
