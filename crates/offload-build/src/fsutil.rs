//! File writes that a killed build cannot leave half done.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result};

/// Clears the group and world write bits of this process's file-creation mask, for it and
/// the builds it starts: a file the build writes that another user could change (a cached
/// library, a device image, the embedding object) would let them put code into the program.
/// Called first thing by `cargo offload` (but for the commands that run the user's programs)
/// and by [`crate::Build`] in a build script.
pub fn restrict_umask() {
    #[cfg(unix)]
    {
        // Declared here rather than through `libc`, for the same reason as `TempPath`.
        #[cfg(any(target_os = "macos", target_os = "ios"))]
        type Mode = u16;
        #[cfg(not(any(target_os = "macos", target_os = "ios")))]
        type Mode = u32;
        unsafe extern "C" {
            fn umask(mask: Mode) -> Mode;
        }
        // SAFETY: umask(2) cannot fail and touches no memory. The mask is briefly 022 between
        // the two calls, stricter than either value, so a file created meanwhile is at worst
        // less open than asked.
        unsafe {
            let old = umask(0o022);
            umask(old | 0o022);
        }
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
    let (tmp, mut file) = create_temp_beside(path).io("creating a temporary file beside", path)?;
    file.write_all(bytes).io("writing", &*tmp)?;
    file.sync_all().io("syncing", &*tmp)?;
    drop(file);
    tmp.persist(path).io("renaming into place", path)?;
    Ok(())
}

/// A file under a fresh name, removed when dropped unless [`TempPath::persist`]ed.
///
/// Written here rather than taken from `tempfile`: a build script's dependencies are compiled
/// in every user's cold build, and `tempfile`'s (`rustix`, `getrandom`, `libc`) cost more than
/// the whole of this.
#[derive(Debug)]
pub struct TempPath {
    path: PathBuf,
    persisted: bool,
}

impl TempPath {
    /// Renames the file to `to`, replacing what is there.
    pub fn persist(mut self, to: &Path) -> std::io::Result<()> {
        std::fs::rename(&self.path, to)?;
        self.persisted = true;
        Ok(())
    }
}

impl std::ops::Deref for TempPath {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<std::ffi::OsStr> for TempPath {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.path.as_os_str()
    }
}

impl AsRef<Path> for TempPath {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        if !self.persisted {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A directory under a fresh name, removed with what it holds when dropped.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// A new directory `<prefix><pid>-<n>` in `parent` that only its owner may enter.
    pub fn new_in(parent: &Path, prefix: &str) -> std::io::Result<TempDir> {
        create_fresh(|n| {
            let path = parent.join(format!("{prefix}{}-{n}", std::process::id()));
            let mut builder = std::fs::DirBuilder::new();
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            builder.create(&path).map(|()| TempDir { path })
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A new, empty file in `path`'s directory, named after it (`.<name>.<pid>.<n>.tmp`), only its
/// owner may read or write; removed unless persisted. For a tool to write its output to.
pub fn temp_file_beside(path: &Path) -> std::io::Result<TempPath> {
    Ok(create_temp_beside(path)?.0)
}

/// [`temp_file_beside`], with the file open for writing.
fn create_temp_beside(path: &Path) -> std::io::Result<(TempPath, File)> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    create_fresh(|n| {
        let candidate = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(&candidate)?;
        let temp = TempPath {
            path: candidate,
            persisted: false,
        };
        Ok((temp, file))
    })
}

/// Calls `create` with numbers this process has not used before until it does not fail with
/// `AlreadyExists`: the names built from them carry the process id, and one may still be
/// taken by a killed process that had the same id.
fn create_fresh<T>(mut create: impl FnMut(u64) -> std::io::Result<T>) -> std::io::Result<T> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut last = None;
    for _ in 0..64 {
        match create(NEXT.fetch_add(1, Ordering::Relaxed)) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            other => return other,
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free name")))
}

/// Appends `bytes` to `dir/<this process's id>.<extension>` in one write, the way build
/// scripts hand lines to `cargo offload` (which reads every such file of the directory):
/// whole records, in order, none shared between processes.
pub fn append_for_this_process(dir: &Path, extension: &str, bytes: &[u8]) -> std::io::Result<()> {
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

    #[test]
    fn temporary_files_and_directories_are_private_fresh_and_cleaned_up() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.o");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;

        let (a, b) = (
            temp_file_beside(&dest).unwrap(),
            temp_file_beside(&dest).unwrap(),
        );
        assert_ne!(&*a, &*b);
        assert_eq!(mode(&a), 0o600);
        assert!(
            a.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".out.o.")
        );
        let kept = b.to_path_buf();
        drop(b);
        assert!(!kept.exists(), "dropped unpersisted");
        std::fs::write(&*a, b"x").unwrap();
        a.persist(&dest).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"x");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

        let scratch = TempDir::new_in(dir.path(), "offload-test-").unwrap();
        assert_eq!(mode(scratch.path()), 0o700);
        std::fs::create_dir(scratch.path().join("sub")).unwrap();
        std::fs::write(scratch.path().join("sub/f"), b"y").unwrap();
        let path = scratch.path().to_owned();
        drop(scratch);
        assert!(!path.exists(), "removed with its contents");
    }
}
