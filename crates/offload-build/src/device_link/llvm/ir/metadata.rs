//! Metadata kinds, debug locations and the debug-information nodes the stages read and make.

use std::marker::PhantomData;
use std::ptr::NonNull;

use inkwell::llvm_sys::prelude::LLVMMetadataRef;

/// A metadata kind of a context ([`Module::metadata_kind`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct MetadataKind(pub(super) u32);

/// An instruction's debug location ([`Instruction::debug_location`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct DebugLocation<'m> {
    raw: NonNull<inkwell::llvm_sys::LLVMOpaqueMetadata>,
    _module: PhantomData<&'m ()>,
}

impl DebugLocation<'_> {
    pub(super) fn from_raw(raw: LLVMMetadataRef) -> Option<Self> {
        NonNull::new(raw).map(|raw| DebugLocation {
            raw,
            _module: PhantomData,
        })
    }

    pub(super) fn raw(self) -> LLVMMetadataRef {
        self.raw.as_ptr()
    }
}

/// A kind of debug-information node of a module borrowed for `'m`: `$name` wraps a non-null
/// metadata node of that kind, made only by the layer.
macro_rules! debug_node {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
        pub struct $name<'m> {
            raw: NonNull<inkwell::llvm_sys::LLVMOpaqueMetadata>,
            _module: PhantomData<&'m ()>,
        }

        impl $name<'_> {
            pub(super) fn from_raw(raw: LLVMMetadataRef) -> Option<Self> {
                NonNull::new(raw).map(|raw| $name {
                    raw,
                    _module: PhantomData,
                })
            }

            pub(super) fn raw(self) -> LLVMMetadataRef {
                self.raw.as_ptr()
            }
        }
    };
}

debug_node!(
    /// A `DIFile`.
    DebugFile
);
debug_node!(
    /// A `DISubprogram`.
    DebugSubprogram
);
debug_node!(
    /// A `DISubroutineType`.
    DebugSubroutineType
);

impl<'m> DebugSubprogram<'m> {
    /// The subprogram's file; `None` where it has none.
    pub fn file(self) -> Option<DebugFile<'m>> {
        // SAFETY: `self` is a live subprogram, a scope; its file is one or null.
        DebugFile::from_raw(unsafe { inkwell::llvm_sys::debuginfo::LLVMDIScopeGetFile(self.raw()) })
    }

    /// The subprogram's line.
    pub fn line(self) -> u32 {
        // SAFETY: `self` is a live subprogram.
        unsafe { inkwell::llvm_sys::debuginfo::LLVMDISubprogramGetLine(self.raw()) }
    }
}
