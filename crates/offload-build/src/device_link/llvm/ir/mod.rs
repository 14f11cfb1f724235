//! The device link's safe IR layer: every call of LLVM's C API (`llvm-sys`) that the stages
//! need, and every `unsafe` block around one, is here; the stage files are safe code
//! (`#![forbid(unsafe_code)]`, checked by the test `stage_files_are_safe_code` below). inkwell's
//! types stay where they serve (the module, the context, attributes, passes, code
//! generation); this layer adds what inkwell lacks or makes awkward for rewriting IR: use
//! lists, operands by index, kind tests, phis, successors, builders that name their results.
//!
//! # The invariant that makes the API safe
//!
//! Each handle ([`Value`], [`Instruction`], [`Block`], [`Function`], [`Type`], …) wraps a
//! non-null pointer to an object of one LLVM module, and carries the lifetime `'m` of the
//! borrow of that module ([`Module::new`] takes `&'m inkwell::module::Module`): a handle
//! cannot outlive the module it names. Handles are made only by the layer, from a live
//! module or another live handle, so each is live when made; null pointers never escape
//! (LLVM's "none" is `None`). A C function that requires a kind of value is reached only
//! through the handle of that kind, which a checked test gave (`as_call`, `as_phi`, …), or
//! after a check in the method (operand and successor indices are bounds-checked).
//!
//! The one rule the types cannot enforce, as with inkwell's own handles: a handle must not
//! be used after what it names is erased or deleted. [`Instruction::erase`],
//! [`Block::delete`], [`Function::delete`] and [`GlobalVariable::delete`] take the handle by
//! value, and their callers (the stages) use no copy of it afterwards. The iterators read
//! ahead, so the element just yielded may be erased; a stage that erases others collects
//! first.

#![allow(dead_code, unused_imports)] // The layer serves every stage, some not on it yet.

use std::marker::PhantomData;
use std::ptr::NonNull;

use inkwell::llvm_sys::core as llvm;
use inkwell::llvm_sys::prelude::{LLVMContextRef, LLVMMetadataRef, LLVMModuleRef};
use inkwell::llvm_sys::target;
use inkwell::values::AsValueRef;

mod block;
pub mod bridge;
mod builder;
pub mod process;
mod types;
mod value;

pub use block::{Block, Blocks, Function, Instructions};
pub use builder::Builder;
pub use types::{Type, TypeKind};
pub use value::{
    Argument, Branch, Call, Gep, GlobalVariable, ICmp, Instruction, Load, Phi, Terminator, Use,
    Uses, Value,
};

/// Calling conventions, as [`Function::call_conv`] gives them.
pub mod call_conv {
    use inkwell::llvm_sys::LLVMCallConv;

    /// `amdgpu_kernel`.
    pub const AMDGPU_KERNEL: u32 = LLVMCallConv::LLVMAMDGPUKERNELCallConv as u32;
    /// `ptx_kernel`.
    pub const PTX_KERNEL: u32 = LLVMCallConv::LLVMPTXKernelCallConv as u32;
}

/// A module borrowed for `'m`: where the stages find functions, globals, types, intrinsics
/// and metadata kinds, and get a [`Builder`].
#[derive(Clone, Copy, Debug)]
pub struct Module<'m> {
    raw: LLVMModuleRef,
    context: LLVMContextRef,
    _module: PhantomData<&'m ()>,
}

impl<'m> Module<'m> {
    /// The layer's view of `module`, for as long as it is borrowed.
    pub fn new(module: &'m inkwell::module::Module<'_>) -> Self {
        let raw = module.as_mut_ptr();
        Module {
            raw,
            // SAFETY: `module` is live; its context outlives it.
            context: unsafe { llvm::LLVMGetModuleContext(raw) },
            _module: PhantomData,
        }
    }

    /// An inkwell function of this module as the layer's.
    pub fn wrap_function(self, function: inkwell::values::FunctionValue<'_>) -> Function<'m> {
        // SAFETY: inkwell's handle is a live function; the caller's module is `self`'s.
        let value = unsafe { Value::from_raw(function.as_value_ref()) };
        value
            .and_then(Value::as_function)
            .expect("an inkwell function is a function")
    }

    /// The module's functions in order. The next is read before a function is yielded, so
    /// the yielded one may be deleted (not another).
    pub fn functions(self) -> Functions<'m> {
        // SAFETY: the module is live; its first function is one or null.
        Functions(Value::wrap(unsafe { llvm::LLVMGetFirstFunction(self.raw) }).map(Function))
    }

    /// The function named `name`, defined or declared.
    pub fn function(self, name: &str) -> Option<Function<'m>> {
        // SAFETY: the module is live; LLVM reads `name.len()` bytes; the result is a
        // function or null.
        Value::wrap(unsafe {
            llvm::LLVMGetNamedFunctionWithLength(self.raw, name.as_ptr().cast(), name.len())
        })
        .map(Function)
    }

    /// The global variable named `name`.
    pub fn global(self, name: &str) -> Option<GlobalVariable<'m>> {
        // SAFETY: the module is live; LLVM reads `name.len()` bytes; the result is a global
        // variable or null.
        Value::wrap(unsafe {
            llvm::LLVMGetNamedGlobalWithLength(self.raw, name.as_ptr().cast(), name.len())
        })
        .map(GlobalVariable)
    }

    /// The module's global variables in order (collected: a stage may delete them).
    pub fn globals(self) -> Vec<GlobalVariable<'m>> {
        let mut globals = Vec::new();
        // SAFETY: the module is live; the walk reads each next global before any change.
        unsafe {
            let mut global = llvm::LLVMGetFirstGlobal(self.raw);
            while let Some(g) = Value::wrap(global) {
                globals.push(GlobalVariable(g));
                global = llvm::LLVMGetNextGlobal(global);
            }
        }
        globals
    }

    /// Declares the function `name` of type `ty` (a function type).
    pub fn add_function(self, name: &str, ty: Type<'m>) -> Function<'m> {
        assert_eq!(
            ty.kind(),
            TypeKind::Function,
            "add_function: not a function type"
        );
        let name = std::ffi::CString::new(name).expect("a function name has no NUL");
        // SAFETY: the module and the type (of its context) are live; the name is copied.
        Value::wrap(unsafe { llvm::LLVMAddFunction(self.raw, name.as_ptr(), ty.raw()) })
            .map(Function)
            .expect("LLVM adds the function")
    }

    /// The declaration of the intrinsic `name` overloaded on `overloads` (none for one that
    /// is not overloaded), added to the module where missing; `None` for no such intrinsic.
    ///
    /// # Panics
    /// When overloads are given for an intrinsic that has none, or none for one that has.
    pub fn intrinsic(self, name: &str, overloads: &[Type<'m>]) -> Option<Function<'m>> {
        // SAFETY: LLVM reads `name.len()` bytes; 0 is no intrinsic.
        let id = unsafe { llvm::LLVMLookupIntrinsicID(name.as_ptr().cast(), name.len()) };
        if id == 0 {
            return None;
        }
        // SAFETY: `id` is an intrinsic.
        let overloaded = unsafe { llvm::LLVMIntrinsicIsOverloaded(id) != 0 };
        assert_eq!(
            overloaded,
            !overloads.is_empty(),
            "`{name}`: overload types for an overloaded intrinsic only"
        );
        let mut raw: Vec<_> = overloads.iter().map(|t| t.raw()).collect();
        // SAFETY: the module and the types (of its context) are live; `id` is an intrinsic.
        Value::wrap(unsafe {
            llvm::LLVMGetIntrinsicDeclaration(self.raw, id, raw.as_mut_ptr(), raw.len())
        })
        .map(Function)
    }

    /// The integer type of `bits` bits.
    pub fn int_type(self, bits: u32) -> Type<'m> {
        // SAFETY: the context is live.
        Type::wrap(unsafe { llvm::LLVMIntTypeInContext(self.context, bits) })
    }

    /// `i1`.
    pub fn i1_type(self) -> Type<'m> {
        // SAFETY: the context is live.
        Type::wrap(unsafe { llvm::LLVMInt1TypeInContext(self.context) })
    }

    /// `i8`.
    pub fn i8_type(self) -> Type<'m> {
        // SAFETY: the context is live.
        Type::wrap(unsafe { llvm::LLVMInt8TypeInContext(self.context) })
    }

    /// `i32`.
    pub fn i32_type(self) -> Type<'m> {
        // SAFETY: the context is live.
        Type::wrap(unsafe { llvm::LLVMInt32TypeInContext(self.context) })
    }

    /// `i64`.
    pub fn i64_type(self) -> Type<'m> {
        // SAFETY: the context is live.
        Type::wrap(unsafe { llvm::LLVMInt64TypeInContext(self.context) })
    }

    /// `void`.
    pub fn void_type(self) -> Type<'m> {
        // SAFETY: the context is live.
        Type::wrap(unsafe { llvm::LLVMVoidTypeInContext(self.context) })
    }

    /// `ptr addrspace(address_space)`.
    pub fn ptr_type(self, address_space: u32) -> Type<'m> {
        // SAFETY: the context is live.
        Type::wrap(unsafe { llvm::LLVMPointerTypeInContext(self.context, address_space) })
    }

    /// The size in bytes of `ty` as the module's data layout allocates it.
    pub fn abi_size(self, ty: Type<'m>) -> u64 {
        // SAFETY: the module, its data layout and the type are live.
        unsafe { target::LLVMABISizeOfType(target::LLVMGetModuleDataLayout(self.raw), ty.raw()) }
    }

    /// The metadata kind `name` (`invariant.load`, `nonnull`, …).
    pub fn metadata_kind(self, name: &str) -> MetadataKind {
        // SAFETY: the context is live; LLVM reads `name.len()` bytes.
        MetadataKind(unsafe {
            llvm::LLVMGetMDKindIDInContext(self.context, name.as_ptr().cast(), name.len() as u32)
        })
    }

    /// The empty metadata node `!{}` (for [`Instruction::set_metadata`]).
    pub fn empty_metadata_node(self) -> MetadataNode<'m> {
        // SAFETY: the context is live; an empty node of no operands, wrapped as a value.
        let node = unsafe {
            let node = llvm::LLVMMDNodeInContext2(self.context, std::ptr::null_mut(), 0);
            Value::wrap(llvm::LLVMMetadataAsValue(self.context, node))
        };
        MetadataNode(node.expect("LLVM makes the node"))
    }

    /// Inline assembly (AT&T dialect, not unwinding) of `function_type`, to call with
    /// [`Builder::build_call_typed`].
    pub fn inline_asm(
        self,
        function_type: Type<'m>,
        asm: &str,
        constraints: &str,
        side_effects: bool,
        align_stack: bool,
    ) -> Value<'m> {
        assert_eq!(function_type.kind(), TypeKind::Function);
        // SAFETY: the type is a live function type; LLVM copies the given lengths of bytes.
        Value::wrap(unsafe {
            llvm::LLVMGetInlineAsm(
                function_type.raw(),
                asm.as_ptr().cast::<std::ffi::c_char>().cast_mut(),
                asm.len(),
                constraints.as_ptr().cast::<std::ffi::c_char>().cast_mut(),
                constraints.len(),
                i32::from(side_effects),
                i32::from(align_stack),
                inkwell::llvm_sys::LLVMInlineAsmDialect::LLVMInlineAsmDialectATT,
                0,
            )
        })
        .expect("LLVM makes the inline assembly")
    }

    /// A builder of the module's context.
    pub fn builder(self) -> Builder<'m> {
        // SAFETY: the context is the module's, live for `'m`.
        unsafe { Builder::new(self.context) }
    }
}

/// A module's functions ([`Module::functions`]).
#[derive(Debug)]
pub struct Functions<'m>(Option<Function<'m>>);

impl<'m> Iterator for Functions<'m> {
    type Item = Function<'m>;
    fn next(&mut self) -> Option<Function<'m>> {
        let current = self.0?;
        // SAFETY: `current` is a live function; the next is one or null.
        self.0 = Value::wrap(unsafe { llvm::LLVMGetNextFunction(current.raw()) }).map(Function);
        Some(current)
    }
}

/// A metadata node wrapped as a value ([`Module::empty_metadata_node`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct MetadataNode<'m>(Value<'m>);

impl<'m> MetadataNode<'m> {
    fn raw(self) -> inkwell::llvm_sys::prelude::LLVMValueRef {
        self.0.raw()
    }
}

/// A metadata kind of a context ([`Module::metadata_kind`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct MetadataKind(u32);

/// An instruction's debug location ([`Instruction::debug_location`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct DebugLocation<'m> {
    raw: NonNull<inkwell::llvm_sys::LLVMOpaqueMetadata>,
    _module: PhantomData<&'m ()>,
}

impl DebugLocation<'_> {
    fn from_raw(raw: LLVMMetadataRef) -> Option<Self> {
        NonNull::new(raw).map(|raw| DebugLocation {
            raw,
            _module: PhantomData,
        })
    }

    fn raw(self) -> LLVMMetadataRef {
        self.raw.as_ptr()
    }
}

/// Where an attribute is: on the return value, a parameter (from 0) or the function.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum AttributeIndex {
    Return,
    Param(u32),
    Function,
}

impl AttributeIndex {
    fn raw(self) -> u32 {
        match self {
            AttributeIndex::Return => 0,
            AttributeIndex::Param(i) => i + 1,
            AttributeIndex::Function => inkwell::llvm_sys::LLVMAttributeFunctionIndex,
        }
    }
}

/// The kind of the enum attribute `name` (0 for none).
fn enum_attribute_kind(name: &str) -> u32 {
    // SAFETY: LLVM reads `name.len()` bytes.
    unsafe { llvm::LLVMGetEnumAttributeKindForName(name.as_ptr().cast(), name.len()) }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The stage files not on the layer yet: each still calls `llvm-sys` itself. The list
    /// only shrinks; a file that no longer needs its entry fails the test until removed.
    const NOT_YET_CONVERTED: &[&str] = &[
        "fixups.rs",
        "helpers.rs",
        "link.rs",
        "matrix.rs",
        "mod.rs",
        "panic_sites.rs",
        "panics.rs",
        "shared_memory.rs",
    ];

    /// Every `.rs` file of `device_link/llvm/` but the layer's (`ir/`) is safe code: it
    /// names neither `unsafe` nor `llvm_sys` outside comments, and says
    /// `#![forbid(unsafe_code)]`, so that the compiler holds it to that.
    #[test]
    fn stage_files_are_safe_code() {
        const FORBID: &str = "#![forbid(unsafe_code)]";
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/device_link/llvm");
        let mut problems = Vec::new();
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_owned();
            if !path.is_file() || !name.ends_with(".rs") {
                continue;
            }
            seen += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            let code: Vec<&str> = text
                .lines()
                .map(str::trim_start)
                .filter(|l| !l.starts_with("//") && *l != FORBID)
                .collect();
            let raw = code
                .iter()
                .any(|l| l.contains("unsafe") || l.contains("llvm_sys"));
            let forbids = text.lines().any(|l| l == FORBID);
            let allowed = NOT_YET_CONVERTED.contains(&name.as_str());
            match (allowed, raw || !forbids) {
                (false, true) => problems.push(format!(
                    "{name}: a stage file uses `unsafe` or `llvm_sys`, or lacks \
                     `#![forbid(unsafe_code)]`: use the `ir` layer"
                )),
                (true, false) => problems.push(format!(
                    "{name}: safe now: remove it from NOT_YET_CONVERTED"
                )),
                _ => {}
            }
        }
        assert!(seen > 10, "no stage files found in {}", dir.display());
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}
