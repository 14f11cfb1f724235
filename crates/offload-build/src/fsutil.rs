//! File writes that a killed build cannot leave half done.

use std::io::Write;
use std::path::Path;

use crate::error::{IoContext, Result};

/// Writes `bytes` to a temporary file beside `path`, syncs it, then renames it over `path`.
/// A reader sees the old file or the new one, never a part of either. Unchanged contents
/// are not rewritten, so timestamps (and what Cargo decides from them) stay put.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).io("creating directory", dir)?;
    let mut tmp = tempfile_in(dir, path)?;
    tmp.1.write_all(bytes).io("writing", &tmp.0)?;
    tmp.1.sync_all().io("syncing", &tmp.0)?;
    drop(tmp.1);
    std::fs::rename(&tmp.0, path).io("renaming into place", path)
}

fn tempfile_in(dir: &Path, path: &Path) -> Result<(std::path::PathBuf, std::fs::File)> {
    let stem = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for attempt in 0u32..100 {
        let candidate = dir.join(format!(".{stem}.{}.{attempt}.tmp", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&candidate)
        {
            Ok(f) => return Ok((candidate, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).io("creating temporary file", candidate),
        }
    }
    Err(std::io::Error::other("no free temporary file name")).io("creating temporary file", dir)
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
