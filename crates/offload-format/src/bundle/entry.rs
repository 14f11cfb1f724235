//! What every bundle layout shares: the magic, the object layout's section prefix, the HIP
//! alignment, and an entry as its header records it ([`BundleEntryInfo`]) or with its data
//! ([`BundleEntry`]).

use std::borrow::Cow;

use super::id::BundleEntryId;
use crate::error::Result;

/// The 24-byte magic of the binary layout (no NUL).
pub const BUNDLE_MAGIC: &[u8; 24] = b"__CLANG_OFFLOAD_BUNDLE__";
/// Prefix of the section names in the object layout.
pub const OBJECT_SECTION_PREFIX: &str = "__CLANG_OFFLOAD_BUNDLE__";
/// The alignment clang's HIP fat-binary step uses.
pub const HIP_BUNDLE_ALIGN: u64 = 4096;

/// One entry of a bundle as recorded in its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleEntryInfo {
    /// The ID exactly as stored in the file.
    pub id: String,
    /// Absolute offset of the data.
    pub offset: u64,
    /// Size of the data, in bytes.
    pub size: u64,
}

impl BundleEntryInfo {
    /// The stored ID, parsed and normalized.
    pub fn entry_id(&self) -> Result<BundleEntryId> {
        BundleEntryId::parse(&self.id)
    }
}

/// One entry with its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleEntry<'a> {
    /// The ID exactly as stored in the file.
    pub id: String,
    /// The entry's contents.
    pub data: Cow<'a, [u8]>,
}

impl BundleEntry<'_> {
    /// A copy owning its data.
    pub fn into_owned(self) -> BundleEntry<'static> {
        BundleEntry {
            id: self.id,
            data: Cow::Owned(self.data.into_owned()),
        }
    }
}
