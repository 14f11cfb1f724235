//! The device link's error and result types.

use std::path::PathBuf;

pub use crate::error::LinkError;

/// Result of the device link.
pub type Result<T, E = LinkError> = std::result::Result<T, E>;

pub(crate) fn io_err(
    action: &'static str,
    path: impl Into<PathBuf>,
) -> impl FnOnce(std::io::Error) -> LinkError {
    let path = path.into();
    move |source| LinkError::Io {
        action,
        path,
        source,
    }
}

/// A code object `offload_format::image::amdgpu` refused, as the link reports it.
#[cfg(feature = "image-readers")]
pub(crate) fn bad_code_object(e: offload_format::Error) -> LinkError {
    let reason = match e {
        offload_format::Error::AmdCodeObject { reason } => reason,
        other => other.to_string(),
    };
    LinkError::BadCodeObject { reason }
}
