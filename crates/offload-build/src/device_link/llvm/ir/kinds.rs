//! The plain values the layer passes around: where an attribute is and an enum attribute's
//! kind, an intrinsic's ID, a GEP's no-wrap flags.

use inkwell::llvm_sys::core as llvm;

/// Where an attribute is: on a parameter (from 0) or the function.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum AttributeIndex {
    Param(u32),
    Function,
}

impl AttributeIndex {
    pub(super) fn raw(self) -> u32 {
        match self {
            AttributeIndex::Param(i) => i + 1,
            AttributeIndex::Function => inkwell::llvm_sys::LLVMAttributeFunctionIndex,
        }
    }
}

/// The kind of the enum attribute `name` (0 for none).
pub(super) fn enum_attribute_kind(name: &str) -> u32 {
    // SAFETY: LLVM reads `name.len()` bytes.
    unsafe { llvm::LLVMGetEnumAttributeKindForName(name.as_ptr().cast(), name.len()) }
}

/// An intrinsic's ID ([`Function::intrinsic_id`], [`Module::intrinsic_by_id`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct IntrinsicId(pub(super) u32);

/// A GEP's no-wrap flags (`inbounds`, `nusw`, `nuw`), as [`Value::gep_no_wrap_flags`] reads
/// them.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct GepNoWrapFlags(pub(super) u32);
