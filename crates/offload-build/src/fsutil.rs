//! File writes that a killed build cannot leave half done.

use std::io::Write;
use std::path::Path;

use crate::error::{IoContext, Result};

/// Clears the group and world write bits of this process's file-creation mask, for it and
/// the builds it starts: a file the build writes that another user could change (a cached
/// library, a device image, the embedding object) would let them put code into the program.
/// Called first thing by `cargo offload` and by [`crate::Build`] in a build script.
pub fn restrict_umask() {
    #[cfg(unix)]
    // SAFETY: umask(2) cannot fail and touches no memory. The mask is briefly 022 between the
    // two calls, stricter than either value, so a file created meanwhile is at worst less
    // open than asked.
    unsafe {
        let old = libc::umask(0o022);
        libc::umask(old | 0o022);
    }
}

/// Writes `bytes` to a temporary file beside `path`, syncs it, then renames it over `path`.
/// A reader sees the old file or the new one, never a part of either. Unchanged contents
/// are not rewritten, so timestamps (and what Cargo decides from them) stay put.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).io("creating directory", dir)?;
    let mut tmp = temp_file_beside(path)?;
    tmp.write_all(bytes).io("writing", tmp.path())?;
    tmp.as_file().sync_all().io("syncing", tmp.path())?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .io("renaming into place", path)?;
    Ok(())
}

/// A new temporary file in `path`'s directory, named after it (`.<name>.XXXXXX.tmp`), removed
/// unless persisted.
pub fn temp_file_beside(path: &Path) -> Result<tempfile::NamedTempFile> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(dir)
        .io("creating a temporary file in", dir)
}

/// Appends `bytes` to `dir/<this process's id>.<extension>` in one write, the way build
/// scripts hand lines to `cargo offload` (which reads every such file of the directory):
/// whole records, in order, none shared between processes.
pub fn append_for_this_process(dir: &Path, extension: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let path = dir.join(format!("{}.{extension}", std::process::id()));
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_contents_and_leaves_no_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.bin");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }
}
