//! The files the operations read and write: outputs renamed into place when complete,
//! inputs mapped or streamed, and the `llvm-objcopy` the object layout runs.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::error::{IoAt, OpsError, Result};

/// An output file written under a temporary name in the same directory and renamed over
/// the final path by [`AtomicOutput::commit`]; dropped uncommitted, it disappears.
#[derive(Debug)]
pub struct AtomicOutput {
    file: tempfile::NamedTempFile,
    path: PathBuf,
}

impl AtomicOutput {
    /// Creates the temporary file for `path` (ordinary permissions, as the umask allows).
    pub fn create(path: &Path) -> Result<AtomicOutput> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let mut b = tempfile::Builder::new();
        b.prefix(".offload-out").suffix(".tmp");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            b.permissions(std::fs::Permissions::from_mode(0o666));
        }
        let file = b
            .tempfile_in(dir)
            .at("creating a temporary file for", path)?;
        Ok(AtomicOutput {
            file,
            path: path.to_owned(),
        })
    }

    /// The open temporary file.
    pub fn file(&mut self) -> &mut File {
        self.file.as_file_mut()
    }

    /// The temporary file's path (for tools that write the output themselves).
    pub fn temp_path(&self) -> &Path {
        self.file.path()
    }

    /// The final path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Renames the temporary file over the final path. An existing file is removed first:
    /// renaming over it would make ext4 (`auto_da_alloc`) write the new data back
    /// synchronously, which costs more than the copy itself. A reader sees the old file, no
    /// file, or the new one; never a part of one.
    pub fn commit(self) -> Result<()> {
        let path = self.path;
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
            std::fs::remove_file(&path).at("replacing", &path)?;
        }
        self.file
            .persist(&path)
            .map_err(|e| e.error)
            .at("renaming into place", &path)?;
        Ok(())
    }
}

impl Write for AtomicOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.as_file_mut().write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.as_file_mut().flush()
    }
}

/// A read-only view of a whole input file: mapped when it is not empty.
#[derive(Debug)]
pub struct MappedInput {
    map: Option<memmap2::Mmap>,
}

impl MappedInput {
    /// Maps `file` (opened from `path`, named in errors).
    pub fn new(file: &File, path: &Path) -> Result<MappedInput> {
        let len = file.metadata().at("reading the size of", path)?.len();
        if len == 0 {
            return Ok(MappedInput { map: None });
        }
        if usize::try_from(len).is_err() {
            return Err(OpsError::TooLarge {
                path: path.to_owned(),
                size: len,
            });
        }
        // SAFETY: the map is read-only and lives no longer than this value. Another process
        // truncating the file while it is mapped would make reads fault; that is the accepted
        // contract of mapping inputs (clang's tools map them the same way), and files handed
        // to this tool are not expected to change underneath it.
        let map = unsafe { memmap2::Mmap::map(file) }.at("mapping", path)?;
        Ok(MappedInput { map: Some(map) })
    }

    /// Opens and maps `path`.
    pub fn open(path: &Path) -> Result<MappedInput> {
        let file = File::open(path).at("opening", path)?;
        Self::new(&file, path)
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

/// Opens an input file for streaming, with its length.
pub(super) fn open_input(path: &Path) -> Result<(File, u64)> {
    let file = File::open(path).at("opening", path)?;
    let len = file.metadata().at("reading the size of", path)?.len();
    Ok((file, len))
}

/// Where `llvm-objcopy` is (`offload-toolchain`'s policy: an unversioned one on `PATH` may be
/// older and write different bytes, so it is not used). On failure, the places tried.
pub fn find_objcopy() -> std::result::Result<PathBuf, String> {
    let env = offload_build::tooling::env::Env::detect();
    offload_toolchain::Tool::LlvmObjcopy
        .find_with(&|name| env.get_untracked(name).map(Into::into))
        .map_err(|e| e.tried.join(", "))
}
