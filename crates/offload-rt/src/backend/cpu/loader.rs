//! Loading a shared object from memory: an anonymous `memfd` holds the bytes, `dlopen` maps
//! it through `/proc/self/fd/N`. Nothing touches the file system, unless
//! `OFFLOAD_CPU_IMAGE_DIR` names a directory: then the image is written there and loaded from
//! that file, which a debugger can read (it resolves `/proc/self/fd/N` in its own process, not
//! the program's), and removed when unloaded. `cargo offload run --debugger` sets it.

use std::ffi::{CStr, CString, c_void};

use crate::error::{Error, Result};
use crate::kernel::abi::{CPU_ABI_SYMBOL, CPU_ABI_VERSION};
use crate::registry::ImageInfo;

/// A shared object loaded by [`Library::load_from_memory`]; unloaded on drop.
#[derive(Debug)]
pub(crate) struct Library {
    handle: *mut c_void,
    /// Kept open while loaded: the dynamic loader knows the object by the path
    /// `/proc/self/fd/N`, and a reused descriptor number must not name it again.
    fd: libc::c_int,
    /// The file it was loaded from, under `OFFLOAD_CPU_IMAGE_DIR`; removed when unloaded.
    file: Option<std::path::PathBuf>,
}

// SAFETY: the handle is only used with dlsym/dlclose, which are thread-safe.
unsafe impl Send for Library {}
// SAFETY: as above.
unsafe impl Sync for Library {}

fn last_dl_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string valid until the next dl call
    // on this thread; it is copied at once.
    let msg = unsafe { libc::dlerror() };
    if msg.is_null() {
        "unknown dynamic loader error".to_owned()
    } else {
        // SAFETY: non-null, NUL-terminated (above).
        unsafe { CStr::from_ptr(msg) }
            .to_string_lossy()
            .into_owned()
    }
}

impl Library {
    pub(crate) fn load_from_memory(info: &ImageInfo, bytes: &[u8]) -> Result<Library> {
        let load_error = |reason: String| Error::ImageLoad {
            module: info.module.clone(),
            image: info.to_string(),
            reason,
        };
        let name = CString::new(format!("offload-{}", info.module))
            .map_err(|_| load_error("module name contains a NUL byte".to_owned()))?;
        // SAFETY: `name` is a valid NUL-terminated string.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(Error::Os {
                call: "memfd_create",
                source: std::io::Error::last_os_error(),
            });
        }
        let close = |fd| {
            // SAFETY: `fd` is ours and closed once.
            unsafe { libc::close(fd) };
        };
        let mut written = 0;
        while written < bytes.len() {
            let rest = &bytes[written..];
            // SAFETY: `rest` is valid for reads of its length.
            let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
            if n < 0 {
                let source = std::io::Error::last_os_error();
                if source.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                close(fd);
                return Err(Error::Os {
                    call: "write (memfd)",
                    source,
                });
            }
            written += n as usize;
        }
        let file = match std::env::var_os("OFFLOAD_CPU_IMAGE_DIR") {
            Some(dir) if !dir.is_empty() => {
                let dir = std::path::PathBuf::from(dir);
                let file = dir.join(format!("lib{}-{}-{fd}.so", info.module, std::process::id()));
                let written =
                    std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&file, bytes));
                if let Err(e) = written {
                    close(fd);
                    return Err(load_error(format!(
                        "writing the image to {} (OFFLOAD_CPU_IMAGE_DIR): {e}",
                        file.display()
                    )));
                }
                Some(file)
            }
            _ => None,
        };
        let path = match &file {
            Some(file) => CString::new(file.as_os_str().as_encoded_bytes()),
            None => CString::new(format!("/proc/self/fd/{fd}")),
        }
        .map_err(|_| load_error("the image's path contains a NUL byte".to_owned()))?;
        // SAFETY: `path` is NUL-terminated. Loading runs the image's initializers: a CPU image
        // is a no_std kernel crate built by the project, with none of its own.
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            let reason = last_dl_error();
            close(fd);
            if let Some(file) = &file {
                let _ = std::fs::remove_file(file);
            }
            return Err(load_error(reason));
        }
        let lib = Library { handle, fd, file };
        let Some(version) = lib.symbol(CPU_ABI_SYMBOL) else {
            return Err(load_error(format!(
                "not a CPU device image: it does not define `{CPU_ABI_SYMBOL}`"
            )));
        };
        // SAFETY: the symbol is the image's `static u32` ABI version.
        let version = unsafe { version.cast::<u32>().read() };
        if version != CPU_ABI_VERSION {
            return Err(load_error(format!(
                "CPU device ABI version {version}, this runtime speaks {CPU_ABI_VERSION}"
            )));
        }
        Ok(lib)
    }

    /// The address of `name`, or `None` when the image does not define it.
    pub(crate) fn symbol(&self, name: &str) -> Option<*mut c_void> {
        let name = CString::new(name).ok()?;
        // SAFETY: `handle` is a live dlopen handle and `name` is NUL-terminated.
        let p = unsafe { libc::dlsym(self.handle, name.as_ptr()) };
        (!p.is_null()).then_some(p)
    }
}

impl Drop for Library {
    fn drop(&mut self) {
        // SAFETY: the handle came from dlopen and is closed once; the module owning this
        // library drops it after every kernel pointer into it.
        unsafe { libc::dlclose(self.handle) };
        // SAFETY: the descriptor is ours and closed once.
        unsafe { libc::close(self.fd) };
        if let Some(file) = &self.file {
            // Best effort: a file left behind in the directory asked for is harmless.
            let _ = std::fs::remove_file(file);
        }
    }
}
