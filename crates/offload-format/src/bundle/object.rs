//! The object layout (`-type=o` with a real host object): one `__CLANG_OFFLOAD_BUNDLE__<id>`
//! ELF section per entry.

use std::borrow::Cow;

use super::entry::{BundleEntry, OBJECT_SECTION_PREFIX};
use crate::error::{Error, Result};

/// The entries of an object-layout bundle: every section named `__CLANG_OFFLOAD_BUNDLE__<id>`
/// of an ELF object, in section order. The host entry's section holds a single zero byte; its
/// real contents are the object without these sections (see [`objcopy_args`]).
pub fn parse_object_bundle(bytes: &[u8]) -> Result<Vec<BundleEntry<'_>>> {
    let aligned = crate::aligned::object_bytes(bytes);
    if aligned.is_copy() {
        return Ok(parse_aligned_object_bundle(&aligned)?
            .into_iter()
            .map(BundleEntry::into_owned)
            .collect());
    }
    parse_aligned_object_bundle(bytes)
}

fn parse_aligned_object_bundle(bytes: &[u8]) -> Result<Vec<BundleEntry<'_>>> {
    use object::{Object, ObjectSection};
    let file = object::File::parse(bytes).map_err(|e| Error::ObjectParse {
        reason: e.to_string(),
    })?;
    let mut out = Vec::new();
    for section in file.sections() {
        let Ok(name) = section.name_bytes() else {
            continue;
        };
        let Some(id) = name.strip_prefix(OBJECT_SECTION_PREFIX.as_bytes()) else {
            continue;
        };
        let offset = section.file_range().map_or(0, |(o, _)| o);
        let id = std::str::from_utf8(id)
            .map_err(|_| Error::BundleIdNotUtf8 { offset })?
            .to_owned();
        let data = section.data().map_err(|e| Error::ObjectSection {
            id: id.clone(),
            reason: e.to_string(),
        })?;
        out.push(BundleEntry {
            id,
            data: Cow::Borrowed(data),
        });
    }
    Ok(out)
}

/// The `llvm-objcopy` arguments clang-offload-bundler uses to read a fat object's host entry:
/// `fat_object` without its `__CLANG_OFFLOAD_BUNDLE__` sections, written to `output`.
pub fn host_objcopy_args(
    fat_object: &std::path::Path,
    output: &std::path::Path,
) -> Vec<std::ffi::OsString> {
    vec![
        "--regex".into(),
        format!("--remove-section={OBJECT_SECTION_PREFIX}.*").into(),
        "--".into(),
        fat_object.as_os_str().to_owned(),
        output.as_os_str().to_owned(),
    ]
}

/// The `llvm-objcopy` arguments clang-offload-bundler uses to write the object layout: add
/// one `__CLANG_OFFLOAD_BUNDLE__<id>` section per entry (file given as the path of the entry's
/// data; for the host entry a file holding one zero byte), marked `readonly,exclude`, then the
/// host object and the output. This crate does not run tools; the caller runs
/// `llvm-objcopy` with these arguments.
pub fn objcopy_args(
    entries: &[(&str, &std::path::Path)],
    host_object: &std::path::Path,
    output: &std::path::Path,
) -> Vec<std::ffi::OsString> {
    let mut args = Vec::new();
    for (id, path) in entries {
        let mut a = std::ffi::OsString::from(format!("--add-section={OBJECT_SECTION_PREFIX}{id}="));
        a.push(path.as_os_str());
        args.push(a);
        args.push(
            format!("--set-section-flags={OBJECT_SECTION_PREFIX}{id}=readonly,exclude").into(),
        );
    }
    args.push("--".into());
    args.push(host_object.as_os_str().to_owned());
    args.push(output.as_os_str().to_owned());
    args
}
