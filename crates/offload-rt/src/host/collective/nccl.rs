//! NCCL (NVIDIA) and RCCL (AMD, the same C API), loaded at run time as the drivers are: a
//! program with collectives starts on machines without either, and says what it tried when
//! one is needed.
// The table's fields are the C entry points' own names.
#![allow(non_snake_case)]

use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::OnceLock;

use crate::backend::DeviceKind;
use crate::backend::gpu::LoadError;
use crate::backend::gpu::library::{candidate_names, entry_points};
use crate::error::{Error, Result};

/// `ncclComm_t`.
pub(crate) type NcclComm = *mut c_void;
/// `ncclResult_t`.
type NcclResult = c_int;
/// The C signature `ncclAllReduce`, `ncclBroadcast` and `ncclReduceScatter` share: from, to,
/// count, type, the operation (or the root), communicator, stream.
pub(crate) type NcclTransfer = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    c_int,
    c_int,
    NcclComm,
    *mut c_void,
) -> NcclResult;

/// `ncclUniqueId`: the bytes every rank of one communicator is created with.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct NcclUniqueId {
    pub(crate) internal: [u8; NCCL_UNIQUE_ID_BYTES],
}

/// `NCCL_UNIQUE_ID_BYTES` in `nccl.h` (and `rccl.h`).
pub(crate) const NCCL_UNIQUE_ID_BYTES: usize = 128;

entry_points! {
    /// The entry points of `nccl.h` (RCCL's `rccl.h` declares the same) the communicator uses.
    NcclApi {
        ncclGetVersion: fn(*mut c_int) -> NcclResult;
        ncclGetUniqueId: fn(*mut NcclUniqueId) -> NcclResult;
        ncclCommInitRank: fn(*mut NcclComm, c_int, NcclUniqueId, c_int) -> NcclResult;
        ncclCommDestroy: fn(NcclComm) -> NcclResult;
        ncclGetErrorString: fn(NcclResult) -> *const c_char;
        ncclAllReduce: fn(*const c_void, *mut c_void, usize, c_int, c_int, NcclComm, *mut c_void) -> NcclResult;
        ncclBroadcast: fn(*const c_void, *mut c_void, usize, c_int, c_int, NcclComm, *mut c_void) -> NcclResult;
        ncclAllGather: fn(*const c_void, *mut c_void, usize, c_int, NcclComm, *mut c_void) -> NcclResult;
        ncclReduceScatter: fn(*const c_void, *mut c_void, usize, c_int, c_int, NcclComm, *mut c_void) -> NcclResult;
        ncclSend: fn(*const c_void, usize, c_int, c_int, NcclComm, *mut c_void) -> NcclResult;
        ncclRecv: fn(*mut c_void, usize, c_int, c_int, NcclComm, *mut c_void) -> NcclResult;
        ncclGroupStart: fn() -> NcclResult;
        ncclGroupEnd: fn() -> NcclResult;
        @optional
        ncclGetLastError: fn(NcclComm) -> *const c_char;
    }
}

/// The environment variable naming the library to open instead of the defaults, and the
/// defaults, for the collectives library of `kind`'s devices.
fn library_names(kind: DeviceKind) -> (&'static str, &'static [&'static str]) {
    match kind {
        DeviceKind::Hip => (
            "OFFLOAD_RCCL_LIBRARY",
            &["librccl.so.1", "librccl.so", "/opt/rocm/lib/librccl.so.1"],
        ),
        _ => ("OFFLOAD_NCCL_LIBRARY", &["libnccl.so.2", "libnccl.so"]),
    }
}

/// The library's name for `kind`'s devices: NCCL or RCCL.
pub(crate) fn library_kind(kind: DeviceKind) -> &'static str {
    match kind {
        DeviceKind::Hip => "RCCL",
        _ => "NCCL",
    }
}

/// The collectives library of `kind`'s devices, loaded on first use (once per process).
pub(crate) fn api(kind: DeviceKind, device: &str) -> Result<&'static NcclApi> {
    static NCCL: OnceLock<Result<NcclApi, LoadError>> = OnceLock::new();
    static RCCL: OnceLock<Result<NcclApi, LoadError>> = OnceLock::new();
    let cell = match kind {
        DeviceKind::Hip => &RCCL,
        _ => &NCCL,
    };
    let (variable, defaults) = library_names(kind);
    cell.get_or_init(|| NcclApi::load(&candidate_names(variable, defaults)))
        .as_ref()
        .map_err(|e| Error::CollectivesUnavailable {
            device: device.to_owned(),
            reason: format!(
                "{} ({}): {e}; set {variable} to the library's path",
                library_kind(kind),
                if matches!(kind, DeviceKind::Hip) {
                    "ROCm's librccl"
                } else {
                    "NVIDIA's libnccl"
                }
            ),
        })
}

impl NcclApi {
    /// `ncclGetVersion` as `major.minor.patch` (codes from NCCL 2.9 on are
    /// `major * 10000 + minor * 100 + patch`).
    pub(crate) fn version(&self) -> String {
        let mut code: c_int = 0;
        // SAFETY: the out-pointer is a live `int`.
        if unsafe { (self.ncclGetVersion)(&mut code) } != 0 || code <= 0 {
            return "(version unknown)".to_owned();
        }
        let (major, minor, patch) = if code >= 10000 {
            (code / 10000, code / 100 % 100, code % 100)
        } else {
            (code / 1000, code / 100 % 10, code % 100)
        };
        format!("{major}.{minor}.{patch}")
    }

    /// `Ok` for `ncclSuccess`, else [`Error::Collective`] with the library's message (and its
    /// last error on `comm`, where it says more).
    pub(crate) fn check(
        &self,
        call: &'static str,
        code: NcclResult,
        comm: Option<NcclComm>,
    ) -> Result<()> {
        if code == 0 {
            return Ok(());
        }
        // SAFETY: `ncclGetErrorString` returns a static NUL-terminated string for any code.
        let mut message = c_text(unsafe { (self.ncclGetErrorString)(code) });
        if let (Some(comm), Some(last)) = (comm, self.ncclGetLastError) {
            // SAFETY: `comm` is a live communicator of this library; the string is the
            // library's, valid until its next call on this thread.
            let detail = c_text(unsafe { last(comm) });
            if !detail.is_empty() && detail != message {
                message = format!("{message} ({detail})");
            }
        }
        Err(Error::Collective {
            library: self.library.clone(),
            call,
            code,
            message,
        })
    }
}

fn c_text(text: *const c_char) -> String {
    if text.is_null() {
        return String::new();
    }
    // SAFETY: a NUL-terminated string of the library's (see the callers).
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::NcclApi;
    use crate::backend::gpu::LoadError;

    /// What the table reports when no library opens, and when the one that opens is no NCCL.
    #[test]
    fn the_table_names_what_it_could_not_load() {
        let missing = ["libnccl-does-not-exist.so.2".to_owned()];
        let err = NcclApi::load(&missing).unwrap_err();
        assert!(
            err.to_string().contains("libnccl-does-not-exist.so.2"),
            "{err}"
        );
        let err = NcclApi::load(&["libc.so.6".to_owned()]).unwrap_err();
        assert!(
            matches!(
                err,
                LoadError::MissingSymbol {
                    symbol: "ncclGetVersion",
                    ..
                }
            ),
            "{err}"
        );
    }
}
