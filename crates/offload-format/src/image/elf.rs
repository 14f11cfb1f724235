//! Host-CPU device images, ELF shared objects: the kernels the CPU device's images export
//! (and the notes of those that keep one coroutine per GPU thread), and the target-region
//! entry points of OpenMP offload images for a host-CPU target.

use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

use crate::aligned::object_bytes;
use crate::{Error, Result};

/// Prefix of the per-kernel entry points a CPU device image exports
/// ([`crate::abi::CPU_RUN_PREFIX`]).
pub const CPU_ENTRY_PREFIX: &str = crate::abi::CPU_RUN_PREFIX;

/// Prefix of the note a CPU image carries for a kernel with barriers that runs with one
/// coroutine per GPU thread ([`crate::abi::CPU_NOTE_PREFIX`]).
pub const CPU_NOTE_PREFIX: &str = crate::abi::CPU_NOTE_PREFIX;

/// Prefix of the target-region entry points clang's OpenMP offloading gives a device image
/// (`__omp_offloading_<device>_<file>_<function>_l<line>`).
pub const OPENMP_ENTRY_PREFIX: &str = "__omp_offloading_";

fn cpu_image_error(reason: String) -> Error {
    Error::CpuImage { reason }
}

fn parse(elf: &[u8]) -> Result<object::File<'_>> {
    object::File::parse(elf).map_err(|e| cpu_image_error(format!("not an ELF object: {e}")))
}

/// Kernel names a CPU device image exports, read from its dynamic symbol table, sorted.
///
/// # Errors
/// [`Error::CpuImage`] when `elf` is not an object file.
pub fn cpu_kernels(elf: &[u8]) -> Result<Vec<String>> {
    let elf = object_bytes(elf);
    let file = parse(&elf)?;
    let mut names: Vec<String> = file
        .dynamic_symbols()
        .filter(|s| s.is_definition())
        .filter_map(|s| {
            s.name()
                .ok()?
                .strip_prefix(CPU_ENTRY_PREFIX)
                .map(str::to_owned)
        })
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

/// The kernels of a CPU image that keep the coroutine path for their barriers, each with the
/// reason `#[kernel]` recorded, sorted by kernel.
///
/// # Errors
/// [`Error::CpuImage`] when `elf` is not an object file or a note's bytes are not in its data.
pub fn cpu_coroutine_notes(elf: &[u8]) -> Result<Vec<(String, String)>> {
    let elf = object_bytes(elf);
    let file = parse(&elf)?;
    let mut notes = Vec::new();
    for symbol in file.dynamic_symbols().filter(|s| s.is_definition()) {
        let Some(kernel) = symbol
            .name()
            .ok()
            .and_then(|n| n.strip_prefix(CPU_NOTE_PREFIX))
        else {
            continue;
        };
        let bytes = symbol
            .section_index()
            .and_then(|i| file.section_by_index(i).ok())
            .and_then(|section| {
                section
                    .data_range(symbol.address(), symbol.size())
                    .ok()
                    .flatten()
            })
            .ok_or_else(|| {
                cpu_image_error(format!(
                    "the note of kernel `{kernel}` is not in the image's data"
                ))
            })?;
        notes.push((
            kernel.to_owned(),
            String::from_utf8_lossy(bytes).into_owned(),
        ));
    }
    notes.sort();
    Ok(notes)
}

/// The target-region entry points an OpenMP offload image for a host-CPU target exports: its
/// defined dynamic functions named `__omp_offloading_...`, sorted; none when `elf` is not an
/// object file. Outlined helpers (`....omp_outlined`) are local and the `.offloading.entry.`
/// records are data, so neither is listed.
pub fn openmp_kernels(elf: &[u8]) -> Vec<String> {
    let elf = object_bytes(elf);
    let Ok(file) = object::File::parse(&*elf) else {
        return Vec::new();
    };
    let mut names: Vec<String> = file
        .dynamic_symbols()
        .filter(|s| s.is_definition() && s.kind() == SymbolKind::Text)
        .filter_map(|s| s.name().ok().map(str::to_owned))
        .filter(|n| n.starts_with(OPENMP_ENTRY_PREFIX))
        .collect();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_an_object() {
        for bytes in [&b""[..], b"\x7fELF\x02\x01\x01", b"garbage"] {
            let err = cpu_kernels(bytes).unwrap_err();
            assert!(
                matches!(&err, Error::CpuImage { reason } if reason.starts_with("not an ELF object")),
                "{err}"
            );
            assert!(cpu_coroutine_notes(bytes).is_err());
            assert!(openmp_kernels(bytes).is_empty());
        }
    }
}
