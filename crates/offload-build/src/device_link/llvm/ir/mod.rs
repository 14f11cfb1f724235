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

use std::marker::PhantomData;

use inkwell::llvm_sys::core as llvm;
use inkwell::llvm_sys::prelude::{LLVMContextRef, LLVMModuleRef};
use inkwell::llvm_sys::target;
use inkwell::values::AsValueRef;

mod block;
mod builder;
mod cpu;
pub use cpu::AtomicRmwOp;
mod kinds;
mod metadata;
pub mod process;
mod types;
mod value;

pub use block::{Block, Function};
pub use builder::Builder;
use kinds::enum_attribute_kind;
pub use kinds::{AttributeIndex, GepNoWrapFlags, IntrinsicId};
pub use metadata::{DebugFile, DebugLocation, DebugSubprogram, DebugSubroutineType, MetadataKind};
pub use types::{Type, TypeKind};
pub use value::{
    Argument, Branch, Call, GlobalVariable, ICmp, Instruction, MetadataNode, Phi, Terminator, Use,
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
        self.metadata_node(None, &[])
    }

    /// The metadata node `!{!"name", operands…}`, or `!{operands…}` without a name. Nodes
    /// are uniqued: the same name and operands give the same node (an alias scope domain is
    /// `!{!"domain"}`, a scope `!{!"scope", domain}`, a scope list `!{scope, …}`).
    pub fn metadata_node(
        self,
        name: Option<&str>,
        operands: &[MetadataNode<'m>],
    ) -> MetadataNode<'m> {
        // SAFETY: the context is live; LLVM reads `name.len()` bytes; each operand wraps a
        // live node as a value, which `LLVMValueAsMetadata` unwraps; LLVM reads
        // `parts.len()` operands.
        let node = unsafe {
            let mut parts = Vec::with_capacity(operands.len() + 1);
            if let Some(name) = name {
                parts.push(llvm::LLVMMDStringInContext2(
                    self.context,
                    name.as_ptr().cast(),
                    name.len(),
                ));
            }
            parts.extend(
                operands
                    .iter()
                    .map(|node| llvm::LLVMValueAsMetadata(node.raw())),
            );
            let node = llvm::LLVMMDNodeInContext2(self.context, parts.as_mut_ptr(), parts.len());
            Value::wrap(llvm::LLVMMetadataAsValue(self.context, node))
        };
        MetadataNode(node.expect("LLVM makes the node"))
    }

    /// A loop's `llvm.loop` node, `!{self, properties…}`: a node of its own at each call, as
    /// a loop ID must be.
    pub fn loop_id(self, properties: &[MetadataNode<'m>]) -> MetadataNode<'m> {
        // SAFETY: the context is live; the placeholder is a temporary node of no operands,
        // which `LLVMMetadataReplaceAllUsesWith` replaces by the new node (making its first
        // operand the node itself) and deletes; each property wraps a live node as a value.
        let node = unsafe {
            let placeholder = inkwell::llvm_sys::debuginfo::LLVMTemporaryMDNode(
                self.context,
                std::ptr::null_mut(),
                0,
            );
            let mut parts = vec![placeholder];
            parts.extend(
                properties
                    .iter()
                    .map(|p| llvm::LLVMValueAsMetadata(p.raw())),
            );
            let node = llvm::LLVMMDNodeInContext2(self.context, parts.as_mut_ptr(), parts.len());
            inkwell::llvm_sys::debuginfo::LLVMMetadataReplaceAllUsesWith(placeholder, node);
            Value::wrap(llvm::LLVMMetadataAsValue(self.context, node))
        };
        MetadataNode(node.expect("LLVM makes the node"))
    }

    /// A loop property of one integer, `!{!"name", i32 value}` (as
    /// `llvm.loop.interleave.count`), for [`Module::loop_id`].
    pub fn loop_property(self, name: &str, value: u32) -> MetadataNode<'m> {
        // SAFETY: the context is live; LLVM reads `name.len()` bytes; the constant is a live
        // value of the context, which `LLVMValueAsMetadata` wraps; LLVM reads both parts.
        let node = unsafe {
            let int =
                llvm::LLVMConstInt(llvm::LLVMInt32TypeInContext(self.context), value.into(), 0);
            let mut parts = [
                llvm::LLVMMDStringInContext2(self.context, name.as_ptr().cast(), name.len()),
                llvm::LLVMValueAsMetadata(int),
            ];
            let node = llvm::LLVMMDNodeInContext2(self.context, parts.as_mut_ptr(), parts.len());
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

    /// An inkwell global variable of this module as the layer's.
    pub fn wrap_global(self, global: inkwell::values::GlobalValue<'_>) -> GlobalVariable<'m> {
        // SAFETY: inkwell's handle is a live global value; the caller's module is `self`'s.
        let value = unsafe { Value::from_raw(global.as_value_ref()) };
        value
            .and_then(Value::as_global_variable)
            .expect("an inkwell global is a global variable")
    }

    /// Adds the global variable `name` of value type `ty` in `address_space` (a declaration
    /// until its initializer is set).
    pub fn add_global_in_address_space(
        self,
        ty: Type<'m>,
        name: &str,
        address_space: u32,
    ) -> GlobalVariable<'m> {
        let name = std::ffi::CString::new(name).expect("a global's name has no NUL");
        // SAFETY: the module and the type (of its context) are live; the name is copied.
        Value::wrap(unsafe {
            llvm::LLVMAddGlobalInAddressSpace(self.raw, ty.raw(), name.as_ptr(), address_space)
        })
        .map(GlobalVariable)
        .expect("LLVM adds the global")
    }

    /// The declaration of the intrinsic `id` overloaded on `overloads`, added to the module
    /// where missing.
    pub fn intrinsic_by_id(self, id: IntrinsicId, overloads: &[Type<'m>]) -> Option<Function<'m>> {
        let mut raw: Vec<_> = overloads.iter().map(|t| t.raw()).collect();
        // SAFETY: the module and the types (of its context) are live; `id` is an intrinsic
        // (an `IntrinsicId` is made only from a function that is one).
        Value::wrap(unsafe {
            llvm::LLVMGetIntrinsicDeclaration(self.raw, id.0, raw.as_mut_ptr(), raw.len())
        })
        .map(Function)
    }

    /// An inkwell call of this module as the layer's.
    pub fn wrap_call(self, call: inkwell::values::CallSiteValue<'_>) -> Call<'m> {
        // SAFETY: inkwell's handle is a live call; the caller's module is `self`'s.
        let value = unsafe { Value::from_raw(call.as_value_ref()) };
        value
            .and_then(Value::as_call)
            .expect("an inkwell call site is a call")
    }

    /// A debug-information builder of the module, finalized and disposed of when dropped.
    pub fn debug_info_builder(self) -> DebugInfoBuilder<'m> {
        DebugInfoBuilder {
            // SAFETY: the module is live for `'m`, which the builder does not outlive.
            raw: unsafe { inkwell::llvm_sys::debuginfo::LLVMCreateDIBuilder(self.raw) },
            context: self.context,
            _module: PhantomData,
        }
    }

    /// Gives the module the data layout of `from` (LLVM copies its string).
    pub fn set_data_layout_of(self, from: Module<'_>) {
        // SAFETY: both modules are live; the layout string `from` keeps is NUL-terminated and
        // copied by `LLVMSetDataLayout` before anything changes `from`.
        unsafe { llvm::LLVMSetDataLayout(self.raw, llvm::LLVMGetDataLayoutStr(from.raw)) }
    }
}

/// What the CPU device's region stage needs of a module.
impl<'m> Module<'m> {
    /// Runs the new pass manager's `pipeline` (`always-inline`, `function(sroa)`, …) on the
    /// module, with no target machine.
    pub fn run_passes(self, pipeline: &str) -> Result<(), String> {
        let pipeline = std::ffi::CString::new(pipeline).map_err(|e| e.to_string())?;
        // SAFETY: the module is live; the options are made and disposed of here; a null
        // target machine is allowed; an error, when returned, is read and disposed of once.
        unsafe {
            let options =
                inkwell::llvm_sys::transforms::pass_builder::LLVMCreatePassBuilderOptions();
            let error = inkwell::llvm_sys::transforms::pass_builder::LLVMRunPasses(
                self.raw,
                pipeline.as_ptr(),
                std::ptr::null_mut(),
                options,
            );
            inkwell::llvm_sys::transforms::pass_builder::LLVMDisposePassBuilderOptions(options);
            if error.is_null() {
                return Ok(());
            }
            let message = inkwell::llvm_sys::error::LLVMGetErrorMessage(error);
            let text = std::ffi::CStr::from_ptr(message)
                .to_string_lossy()
                .into_owned();
            inkwell::llvm_sys::error::LLVMDisposeErrorMessage(message);
            Err(text)
        }
    }

    /// Adds the constant global `name` holding `bytes` (`[N x i8]`, no terminating NUL), with
    /// external linkage.
    pub fn add_constant_bytes(self, name: &str, bytes: &[u8]) -> GlobalVariable<'m> {
        // SAFETY: the context is live; LLVM copies `bytes.len()` bytes and adds no NUL.
        let init = unsafe {
            llvm::LLVMConstStringInContext2(self.context, bytes.as_ptr().cast(), bytes.len(), 1)
        };
        let init = Value::wrap(init).expect("LLVM makes the constant");
        let global = self.add_global_in_address_space(init.ty(), name, 0);
        global.set_initializer(init);
        global.set_constant_global(true);
        global
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Every `.rs` file of `device_link/llvm/` and its stage folders (`cpu_regions/`), but the
    /// layer's (`ir/`), is safe code: it names neither `unsafe` nor `llvm_sys` outside comments,
    /// and says `#![forbid(unsafe_code)]`, or sits in a folder whose `mod.rs` does, so that the
    /// compiler holds it to that.
    #[test]
    fn stage_files_are_safe_code() {
        const FORBID: &str = "#![forbid(unsafe_code)]";
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/device_link/llvm");
        let mut problems = Vec::new();
        let mut seen = 0;
        // (folder, whether its `mod.rs` forbids `unsafe` for the files in it)
        let mut folders = vec![(root.clone(), false)];
        while let Some((dir, inherited)) = folders.pop() {
            let forbidden_here = inherited
                || (dir != root
                    && std::fs::read_to_string(dir.join("mod.rs"))
                        .is_ok_and(|t| t.lines().any(|l| l == FORBID)));
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_str().unwrap().to_owned();
                if path.is_dir() {
                    if name != "ir" {
                        folders.push((path, forbidden_here));
                    }
                    continue;
                }
                if !name.ends_with(".rs") {
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
                // `llvm/mod.rs` is the parent of the layer: a `forbid` there would hold the
                // layer too, so it is only checked for raw code.
                let forbids = (dir == root && name == "mod.rs")
                    || forbidden_here
                    || text.lines().any(|l| l == FORBID);
                if raw || !forbids {
                    problems.push(format!(
                        "{}: a stage file uses `unsafe` or `llvm_sys`, or lacks \
                         `#![forbid(unsafe_code)]`: use the `ir` layer",
                        path.strip_prefix(&root).unwrap().display()
                    ));
                }
            }
        }
        assert!(seen > 10, "no stage files found in {}", root.display());
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}

/// A debug-information builder of a module ([`Module::debug_info_builder`]): finalized and
/// disposed of when dropped.
#[derive(Debug)]
pub struct DebugInfoBuilder<'m> {
    raw: inkwell::llvm_sys::prelude::LLVMDIBuilderRef,
    context: LLVMContextRef,
    _module: PhantomData<&'m ()>,
}

impl Drop for DebugInfoBuilder<'_> {
    fn drop(&mut self) {
        // SAFETY: the builder was made by `Module::debug_info_builder` for a module that is
        // still live, and is finalized and disposed of once, here.
        unsafe {
            inkwell::llvm_sys::debuginfo::LLVMDIBuilderFinalize(self.raw);
            inkwell::llvm_sys::debuginfo::LLVMDisposeDIBuilder(self.raw);
        }
    }
}

impl<'m> DebugInfoBuilder<'m> {
    /// Makes the module's compile unit: Rust, in `file`, by `producer`, of line tables only
    /// (no flags, runtime version, split file, SDK or system root).
    pub fn create_rust_line_tables_unit(
        &self,
        file: DebugFile<'m>,
        producer: &str,
        optimized: bool,
    ) {
        use inkwell::llvm_sys::debuginfo as di;
        // SAFETY: the builder and the file (of the module's context) are live; LLVM copies
        // the given lengths of bytes; the empty strings are NUL-terminated.
        unsafe {
            di::LLVMDIBuilderCreateCompileUnit(
                self.raw,
                di::LLVMDWARFSourceLanguage::LLVMDWARFSourceLanguageRust,
                file.raw(),
                producer.as_ptr().cast(),
                producer.len(),
                i32::from(optimized),
                c"".as_ptr(),
                0,
                0,
                c"".as_ptr(),
                0,
                di::LLVMDWARFEmissionKind::LLVMDWARFEmissionKindLineTablesOnly,
                0,
                0,
                0,
                c"".as_ptr(),
                0,
                c"".as_ptr(),
                0,
            );
        }
    }

    /// A subroutine type in `file` of no parameter types and no flags.
    pub fn create_subroutine_type(&self, file: DebugFile<'m>) -> DebugSubroutineType<'m> {
        use inkwell::llvm_sys::debuginfo as di;
        // SAFETY: the builder and the file are live; no parameter types are passed.
        DebugSubroutineType::from_raw(unsafe {
            di::LLVMDIBuilderCreateSubroutineType(
                self.raw,
                file.raw(),
                std::ptr::null_mut(),
                0,
                di::LLVMDIFlagZero,
            )
        })
        .expect("LLVM makes the type")
    }

    /// A subprogram (no flags) named `name`, linked as `linkage_name`, in `scope` and `file`
    /// at `line`.
    #[allow(clippy::too_many_arguments)]
    pub fn create_function(
        &self,
        scope: DebugFile<'m>,
        name: &str,
        linkage_name: &str,
        file: DebugFile<'m>,
        line: u32,
        ty: DebugSubroutineType<'m>,
        local_to_unit: bool,
        definition: bool,
        scope_line: u32,
        optimized: bool,
    ) -> DebugSubprogram<'m> {
        use inkwell::llvm_sys::debuginfo as di;
        // SAFETY: the builder and the nodes are live; LLVM copies the given lengths of bytes.
        DebugSubprogram::from_raw(unsafe {
            di::LLVMDIBuilderCreateFunction(
                self.raw,
                scope.raw(),
                name.as_ptr().cast(),
                name.len(),
                linkage_name.as_ptr().cast(),
                linkage_name.len(),
                file.raw(),
                line,
                ty.raw(),
                i32::from(local_to_unit),
                i32::from(definition),
                scope_line,
                di::LLVMDIFlagZero,
                i32::from(optimized),
            )
        })
        .expect("LLVM makes the subprogram")
    }

    /// The debug location `line`:`column` in `scope`, not inlined.
    pub fn debug_location(
        &self,
        line: u32,
        column: u32,
        scope: DebugSubprogram<'m>,
    ) -> DebugLocation<'m> {
        // SAFETY: the context and the scope (of it) are live; no inlined-at location.
        DebugLocation::from_raw(unsafe {
            inkwell::llvm_sys::debuginfo::LLVMDIBuilderCreateDebugLocation(
                self.context,
                line,
                column,
                scope.raw(),
                std::ptr::null_mut(),
            )
        })
        .expect("LLVM makes the location")
    }
}

/// A module read lazily from bitcode ([`parse_bitcode_lazily`]): function bodies are read from
/// the bytes, borrowed for `'b`, when the linker moves them. It derefs to the inkwell module;
/// [`LazyModule::link_into`] links it into another, which ends it.
#[derive(Debug)]
pub struct LazyModule<'ctx, 'b> {
    module: inkwell::module::Module<'ctx>,
    _bytes: PhantomData<&'b [u8]>,
}

impl<'ctx> std::ops::Deref for LazyModule<'ctx, '_> {
    type Target = inkwell::module::Module<'ctx>;
    fn deref(&self) -> &inkwell::module::Module<'ctx> {
        &self.module
    }
}

impl<'ctx> LazyModule<'ctx, '_> {
    /// Links the module into `main` (reading the bodies it moves), which ends it.
    pub fn link_into(
        self,
        main: &inkwell::module::Module<'ctx>,
    ) -> std::result::Result<(), inkwell::support::LLVMString> {
        main.link_in_module(self.module)
    }
}

/// Reads `bytes` (bitcode, borrowed, not copied) lazily in `context` as the module `name`: no
/// function body yet. `None` where LLVM cannot read them.
pub fn parse_bitcode_lazily<'ctx, 'b>(
    context: &'ctx inkwell::context::Context,
    bytes: &'b [u8],
    name: &str,
) -> Option<LazyModule<'ctx, 'b>> {
    let buffer = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range(bytes, name);
    let raw_buffer = buffer.as_mut_ptr();
    let mut raw_module = std::ptr::null_mut();
    // SAFETY: the context and buffer are live; `LLVMGetBitcodeModuleInContext2` takes
    // ownership of the buffer object (the lazy module reads from it; on failure it frees it),
    // so it is forgotten below, never freed twice. The bytes it points at are borrowed for
    // `'b`, which the module (a `LazyModule<'_, 'b>`) does not outlive.
    let failed = unsafe {
        inkwell::llvm_sys::bit_reader::LLVMGetBitcodeModuleInContext2(
            context.raw(),
            raw_buffer,
            &mut raw_module,
        )
    };
    std::mem::forget(buffer);
    if failed != 0 || raw_module.is_null() {
        return None;
    }
    Some(LazyModule {
        // SAFETY: `raw_module` is a fresh module owned by nobody else, made in `context`.
        module: unsafe { inkwell::module::Module::new(raw_module) },
        _bytes: PhantomData,
    })
}
