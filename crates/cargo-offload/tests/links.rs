//! ARCHITECTURE.md's invariants on what the executables link, checked on the built binaries:
//! `cargo-offload` does not link LLVM (it starts without loading it), `cargo-offload-device`
//! does (the commands that device-link in-process run there).

use std::path::Path;

use object::{Object as _, ObjectSymbol as _};

/// Whether the executable at `path` links LLVM: a shared LLVM among the libraries it needs, or
/// LLVM's C API linked in statically.
fn links_llvm(path: &Path) -> bool {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let file = object::File::parse(&*bytes).expect("an executable this platform runs");
    let needs_shared = needed_libraries(&bytes)
        .iter()
        .any(|lib| lib.starts_with("libLLVM"));
    let has_static = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter_map(|s| s.name().ok())
        .any(|name| {
            name.starts_with("LLVMContextCreate") || name.starts_with("LLVMCreateTargetMachine")
        });
    needs_shared || has_static
}

/// The `DT_NEEDED` entries of an ELF executable.
fn needed_libraries(bytes: &[u8]) -> Vec<String> {
    use object::read::elf::{Dyn as _, FileHeader as _, SectionHeader as _};
    let header = object::elf::FileHeader64::<object::Endianness>::parse(bytes).expect("ELF64");
    let endian = header.endian().expect("a known byte order");
    let sections = header.sections(endian, bytes).expect("section headers");
    let mut needed = Vec::new();
    for section in sections.iter() {
        let Some((entries, link)) = section.dynamic(endian, bytes).expect("a dynamic section")
        else {
            continue;
        };
        let strings = sections
            .strings(endian, bytes, link)
            .expect("its string table");
        for entry in entries {
            if entry.tag32(endian) == Some(object::elf::DT_NEEDED)
                && let Ok(name) = entry.string(endian, strings)
            {
                needed.push(String::from_utf8_lossy(name).into_owned());
            }
        }
    }
    needed
}

#[test]
fn cargo_offload_does_not_link_llvm_and_its_device_binary_does() {
    let cli = Path::new(env!("CARGO_BIN_EXE_cargo-offload"));
    let device = Path::new(env!("CARGO_BIN_EXE_cargo-offload-device"));
    assert!(
        !links_llvm(cli),
        "{} links LLVM: commands that need it belong in cargo-offload-device",
        cli.display()
    );
    // The check above would pass on any binary if it could not see LLVM at all.
    assert!(links_llvm(device), "{} shows no LLVM", device.display());
}
