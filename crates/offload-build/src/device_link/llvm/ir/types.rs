//! Types, and the constants made from them.

use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;

use inkwell::llvm_sys::LLVMTypeKind;
use inkwell::llvm_sys::core as llvm;
use inkwell::llvm_sys::prelude::LLVMTypeRef;

/// A type of the context of a module borrowed for `'m`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Type<'m> {
    raw: NonNull<inkwell::llvm_sys::LLVMType>,
    _module: PhantomData<&'m ()>,
}

impl fmt::Debug for Type<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Type({:p})", self.raw)
    }
}

/// What kind of type a [`Type`] is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum TypeKind {
    Void,
    Half,
    BFloat,
    Float,
    Double,
    Integer,
    Pointer,
    Function,
    Struct,
    Array,
    Vector,
    Label,
    Metadata,
    /// Any other (x86 and PPC floats, tokens, target extension types, …).
    Other,
}

impl<'m> Type<'m> {
    /// The type LLVM returned for a live value or type of the module: types are never null
    /// and live as long as their context.
    pub(super) fn wrap(raw: LLVMTypeRef) -> Self {
        Type {
            raw: NonNull::new(raw).expect("LLVM returns a type"),
            _module: PhantomData,
        }
    }

    /// The pointer LLVM's C API takes.
    pub(super) fn raw(self) -> LLVMTypeRef {
        self.raw.as_ptr()
    }

    /// The kind of type.
    pub fn kind(self) -> TypeKind {
        use LLVMTypeKind::*;
        // SAFETY: `self` is a live type.
        match unsafe { llvm::LLVMGetTypeKind(self.raw()) } {
            LLVMVoidTypeKind => TypeKind::Void,
            LLVMHalfTypeKind => TypeKind::Half,
            LLVMBFloatTypeKind => TypeKind::BFloat,
            LLVMFloatTypeKind => TypeKind::Float,
            LLVMDoubleTypeKind => TypeKind::Double,
            LLVMIntegerTypeKind => TypeKind::Integer,
            LLVMPointerTypeKind => TypeKind::Pointer,
            LLVMFunctionTypeKind => TypeKind::Function,
            LLVMStructTypeKind => TypeKind::Struct,
            LLVMArrayTypeKind => TypeKind::Array,
            LLVMVectorTypeKind | LLVMScalableVectorTypeKind => TypeKind::Vector,
            LLVMLabelTypeKind => TypeKind::Label,
            LLVMMetadataTypeKind => TypeKind::Metadata,
            _ => TypeKind::Other,
        }
    }

    /// Whether the type is a (scalar) pointer.
    pub fn is_pointer(self) -> bool {
        self.kind() == TypeKind::Pointer
    }

    /// Whether the type is a (scalar) integer.
    pub fn is_integer(self) -> bool {
        self.kind() == TypeKind::Integer
    }

    /// Whether the type is `void`.
    pub fn is_void(self) -> bool {
        self.kind() == TypeKind::Void
    }

    /// An integer type's width in bits.
    pub fn int_width(self) -> Option<u32> {
        // SAFETY: `self` is a live integer type (tested first).
        self.is_integer()
            .then(|| unsafe { llvm::LLVMGetIntTypeWidth(self.raw()) })
    }

    /// A pointer type's address space.
    pub fn address_space(self) -> Option<u32> {
        // SAFETY: `self` is a live pointer type (tested first).
        self.is_pointer()
            .then(|| unsafe { llvm::LLVMGetPointerAddressSpace(self.raw()) })
    }

    /// A function type's return type.
    pub fn return_type(self) -> Option<Type<'m>> {
        // SAFETY: `self` is a live function type (tested first).
        (self.kind() == TypeKind::Function)
            .then(|| Type::wrap(unsafe { llvm::LLVMGetReturnType(self.raw()) }))
    }

    /// A function type's parameter types; empty for any other type.
    pub fn param_types(self) -> Vec<Type<'m>> {
        if self.kind() != TypeKind::Function {
            return Vec::new();
        }
        // SAFETY: `self` is a live function type; LLVM writes `count` types into a buffer
        // of that length.
        unsafe {
            let count = llvm::LLVMCountParamTypes(self.raw()) as usize;
            let mut params = vec![std::ptr::null_mut(); count];
            llvm::LLVMGetParamTypes(self.raw(), params.as_mut_ptr());
            params.into_iter().map(Type::wrap).collect()
        }
    }

    /// An array's or vector's element type.
    pub fn element_type(self) -> Option<Type<'m>> {
        // SAFETY: `self` is a live array or vector type (tested first).
        matches!(self.kind(), TypeKind::Array | TypeKind::Vector)
            .then(|| Type::wrap(unsafe { llvm::LLVMGetElementType(self.raw()) }))
    }

    /// Whether the type is a packed struct.
    pub fn is_packed_struct(self) -> bool {
        // SAFETY: `self` is a live struct type (tested first).
        self.kind() == TypeKind::Struct && unsafe { llvm::LLVMIsPackedStruct(self.raw()) != 0 }
    }

    /// The array type of `length` elements of this type.
    pub fn array_of(self, length: u64) -> Type<'m> {
        // SAFETY: `self` is a live type; the array type is made in its context.
        Type::wrap(unsafe { llvm::LLVMArrayType2(self.raw(), length) })
    }

    /// The function type returning this type with `params`.
    pub fn function_type(self, params: &[Type<'m>], var_arg: bool) -> Type<'m> {
        let mut raw: Vec<LLVMTypeRef> = params.iter().map(|t| t.raw()).collect();
        // SAFETY: `self` and `params` are live types of one context; LLVM reads
        // `raw.len()` of them.
        Type::wrap(unsafe {
            llvm::LLVMFunctionType(
                self.raw(),
                raw.as_mut_ptr(),
                raw.len() as u32,
                i32::from(var_arg),
            )
        })
    }

    /// `i1` in the type's context.
    pub fn i1_in_context(self) -> Type<'m> {
        // SAFETY: `self` is a live type; its context is live.
        Type::wrap(unsafe { llvm::LLVMInt1TypeInContext(llvm::LLVMGetTypeContext(self.raw())) })
    }
}
