//! An instruction builder: positioned in a block, it inserts what it builds there.

use std::ffi::CStr;
use std::marker::PhantomData;

use inkwell::llvm_sys::core as llvm;
use inkwell::llvm_sys::prelude::{LLVMBuilderRef, LLVMContextRef, LLVMValueRef};
use inkwell::{FloatPredicate, IntPredicate};

use super::value::{float_predicate, int_predicate};
use super::{Block, Branch, Call, Function, Instruction, Phi, Terminator, Type, Value};

/// An instruction builder of a module's context, disposed of when dropped. Each `build_*`
/// inserts at the builder's position, which must have been set ([`Builder::position_before`],
/// [`Builder::position_at_end`], [`Builder::position_at_start`]): an unpositioned build
/// panics. A build of constant operands may fold to a constant, so most return a [`Value`].
#[derive(Debug)]
pub struct Builder<'m> {
    raw: LLVMBuilderRef,
    _module: PhantomData<&'m ()>,
}

impl Drop for Builder<'_> {
    fn drop(&mut self) {
        // SAFETY: the builder was made by `new` and is disposed of once, here.
        unsafe { llvm::LLVMDisposeBuilder(self.raw) }
    }
}

/// The pointers of `values`, for a C array argument.
fn raw_values(values: &[Value<'_>]) -> Vec<LLVMValueRef> {
    values.iter().map(|v| v.raw()).collect()
}

impl<'m> Builder<'m> {
    /// A builder in `context`, a live context of the module borrowed for `'m`.
    ///
    /// # Safety
    /// `context` is the live context of that module.
    pub(super) unsafe fn new(context: LLVMContextRef) -> Self {
        Builder {
            // SAFETY: the caller's contract.
            raw: unsafe { llvm::LLVMCreateBuilderInContext(context) },
            _module: PhantomData,
        }
    }

    /// Positions the builder before `instruction`.
    pub fn position_before(&self, instruction: Instruction<'m>) {
        // SAFETY: the builder and the instruction (in a block) are live.
        unsafe { llvm::LLVMPositionBuilderBefore(self.raw, instruction.raw()) }
    }

    /// Positions the builder at the end of `block`.
    pub fn position_at_end(&self, block: Block<'m>) {
        // SAFETY: the builder and the block are live.
        unsafe { llvm::LLVMPositionBuilderAtEnd(self.raw, block.raw()) }
    }

    /// Positions the builder before the first instruction of `block` (at its end when it
    /// has none): where phis go.
    pub fn position_at_start(&self, block: Block<'m>) {
        let first = block
            .first_instruction()
            .map_or(std::ptr::null_mut(), |i| i.raw());
        // SAFETY: the builder and the block are live; `first` is its first instruction or
        // null, the end of the empty block.
        unsafe { llvm::LLVMPositionBuilder(self.raw, block.raw(), first) }
    }

    /// Checks that the builder is positioned in a block.
    fn positioned(&self) -> LLVMBuilderRef {
        // SAFETY: the builder is live.
        let block = unsafe { llvm::LLVMGetInsertBlock(self.raw) };
        assert!(!block.is_null(), "the builder is not positioned");
        self.raw
    }

    /// Wraps what a build returned: an instruction inserted at the builder's position, or a
    /// constant it folded to.
    fn built(raw: LLVMValueRef) -> Value<'m> {
        Value::wrap(raw).expect("LLVM builds a value")
    }

    /// [`Builder::positioned`], for the layer's other files.
    pub(super) fn positioned_raw(&self) -> LLVMBuilderRef {
        self.positioned()
    }

    /// [`Builder::built`], for the layer's other files.
    pub(super) fn wrap_built(raw: LLVMValueRef) -> Value<'m> {
        Self::built(raw)
    }

    /// Inserts a copy of `instruction` (unnamed, with its operands and metadata) at the
    /// builder's position.
    pub fn insert_clone(&self, instruction: Instruction<'m>) -> Instruction<'m> {
        let builder = self.positioned();
        // SAFETY: `instruction` is live; its clone, not yet in a block, is inserted at once
        // by a positioned builder, so no detached instruction escapes.
        let clone = unsafe {
            let clone = llvm::LLVMInstructionClone(instruction.raw());
            llvm::LLVMInsertIntoBuilder(builder, clone);
            clone
        };
        Instruction(Self::built(clone))
    }

    /// `xor v, -1`: the negation of an `i1` (or each bit of an integer).
    pub fn build_not(&self, value: impl Into<Value<'m>>, name: &CStr) -> Value<'m> {
        let builder = self.positioned();
        // SAFETY: a positioned builder; `value` is live; the name is NUL-terminated.
        Self::built(unsafe { llvm::LLVMBuildNot(builder, value.into().raw(), name.as_ptr()) })
    }

    /// `or a, b`.
    pub fn build_or(&self, a: Value<'m>, b: Value<'m>, name: &CStr) -> Value<'m> {
        let builder = self.positioned();
        // SAFETY: a positioned builder; the operands are live; the name is NUL-terminated.
        Self::built(unsafe { llvm::LLVMBuildOr(builder, a.raw(), b.raw(), name.as_ptr()) })
    }

    /// `trunc value to ty`.
    pub fn build_trunc(&self, value: Value<'m>, ty: Type<'m>, name: &CStr) -> Value<'m> {
        let builder = self.positioned();
        // SAFETY: a positioned builder; the value and type are live; the name is
        // NUL-terminated.
        Self::built(unsafe { llvm::LLVMBuildTrunc(builder, value.raw(), ty.raw(), name.as_ptr()) })
    }

    /// `zext value to ty`.
    pub fn build_zext(&self, value: Value<'m>, ty: Type<'m>, name: &CStr) -> Value<'m> {
        let builder = self.positioned();
        // SAFETY: a positioned builder; the value and type are live; the name is
        // NUL-terminated.
        Self::built(unsafe { llvm::LLVMBuildZExt(builder, value.raw(), ty.raw(), name.as_ptr()) })
    }

    /// `sext value to ty` (`value` itself where it already has that type).
    pub fn build_sext(&self, value: Value<'m>, ty: Type<'m>, name: &CStr) -> Value<'m> {
        if value.ty() == ty {
            return value;
        }
        let builder = self.positioned();
        // SAFETY: a positioned builder; the value and type are live; the name is
        // NUL-terminated.
        Self::built(unsafe { llvm::LLVMBuildSExt(builder, value.raw(), ty.raw(), name.as_ptr()) })
    }

    /// `freeze value`: the value, or where it is poison (an `add nsw` that overflowed) some
    /// value of its type; an integer constant stays itself.
    pub fn build_freeze(&self, value: Value<'m>, name: &CStr) -> Value<'m> {
        if value.is_constant_int() {
            return value;
        }
        let builder = self.positioned();
        // SAFETY: a positioned builder; the value is live; the name is NUL-terminated.
        Self::built(unsafe { llvm::LLVMBuildFreeze(builder, value.raw(), name.as_ptr()) })
    }

    /// `addrspacecast value to ty`.
    pub fn build_addrspace_cast(&self, value: Value<'m>, ty: Type<'m>, name: &CStr) -> Value<'m> {
        let builder = self.positioned();
        // SAFETY: a positioned builder; the value and type are live; the name is
        // NUL-terminated.
        Self::built(unsafe {
            llvm::LLVMBuildAddrSpaceCast(builder, value.raw(), ty.raw(), name.as_ptr())
        })
    }

    /// `icmp predicate a, b`.
    pub fn build_icmp(
        &self,
        predicate: IntPredicate,
        a: Value<'m>,
        b: Value<'m>,
        name: &CStr,
    ) -> Value<'m> {
        let builder = self.positioned();
        // SAFETY: a positioned builder; the operands are live; the name is NUL-terminated.
        Self::built(unsafe {
            llvm::LLVMBuildICmp(
                builder,
                int_predicate(predicate),
                a.raw(),
                b.raw(),
                name.as_ptr(),
            )
        })
    }

    /// `fcmp predicate a, b`.
    pub fn build_fcmp(
        &self,
        predicate: FloatPredicate,
        a: Value<'m>,
        b: Value<'m>,
        name: &CStr,
    ) -> Value<'m> {
        let builder = self.positioned();
        // SAFETY: a positioned builder; the operands are live; the name is NUL-terminated.
        Self::built(unsafe {
            llvm::LLVMBuildFCmp(
                builder,
                float_predicate(predicate),
                a.raw(),
                b.raw(),
                name.as_ptr(),
            )
        })
    }

    /// `select condition, on_true, on_false`.
    pub fn build_select(
        &self,
        condition: Value<'m>,
        on_true: Value<'m>,
        on_false: Value<'m>,
        name: &CStr,
    ) -> Value<'m> {
        let builder = self.positioned();
        // SAFETY: a positioned builder; the operands are live; the name is NUL-terminated.
        Self::built(unsafe {
            llvm::LLVMBuildSelect(
                builder,
                condition.raw(),
                on_true.raw(),
                on_false.raw(),
                name.as_ptr(),
            )
        })
    }

    /// An empty `phi` of `ty`; [`Phi::add_incoming`] gives it its edges.
    pub fn build_phi(&self, ty: Type<'m>, name: &CStr) -> Phi<'m> {
        let builder = self.positioned();
        // SAFETY: a positioned builder; the type is live; the name is NUL-terminated.
        let phi = Self::built(unsafe { llvm::LLVMBuildPhi(builder, ty.raw(), name.as_ptr()) });
        Phi(Instruction(phi))
    }

    /// A call of `function` with `args` (a void call's name must be empty).
    pub fn build_call(&self, function: Function<'m>, args: &[Value<'m>], name: &CStr) -> Call<'m> {
        self.build_call_typed(function.function_type(), function.as_value(), args, name)
    }

    /// A call of `callee` (a function, inline assembly or a pointer) of `function_type`.
    ///
    /// # Panics
    /// When `args` does not match the type's parameter count.
    pub fn build_call_typed(
        &self,
        function_type: Type<'m>,
        callee: Value<'m>,
        args: &[Value<'m>],
        name: &CStr,
    ) -> Call<'m> {
        let params = function_type.count_params() as usize;
        assert!(
            params == args.len() || params < args.len() && function_type.is_var_arg(),
            "build_call: {} arguments for {params} parameters",
            args.len()
        );
        let builder = self.positioned();
        let mut args = raw_values(args);
        // SAFETY: a positioned builder; the type, callee and arguments are live and agree
        // in number; the name is NUL-terminated.
        let call = Self::built(unsafe {
            llvm::LLVMBuildCall2(
                builder,
                function_type.raw(),
                callee.raw(),
                args.as_mut_ptr(),
                args.len() as u32,
                name.as_ptr(),
            )
        });
        Call(Instruction(call))
    }

    /// `br label %block`.
    pub fn build_br(&self, block: Block<'m>) -> Branch<'m> {
        let builder = self.positioned();
        // SAFETY: a positioned builder; the block is live.
        let branch = Self::built(unsafe { llvm::LLVMBuildBr(builder, block.raw()) });
        Branch(Terminator(Instruction(branch)))
    }

    /// `unreachable`.
    pub fn build_unreachable(&self) -> Instruction<'m> {
        let builder = self.positioned();
        // SAFETY: a positioned builder.
        Instruction(Self::built(unsafe { llvm::LLVMBuildUnreachable(builder) }))
    }

    /// `ret void`.
    pub fn build_ret_void(&self) -> Instruction<'m> {
        let builder = self.positioned();
        // SAFETY: a positioned builder.
        Instruction(Self::built(unsafe { llvm::LLVMBuildRetVoid(builder) }))
    }

    /// `getelementptr flags source, pointer, indices…`.
    pub fn build_gep_with_no_wrap_flags(
        &self,
        source: Type<'m>,
        pointer: Value<'m>,
        indices: &[Value<'m>],
        name: &CStr,
        flags: super::GepNoWrapFlags,
    ) -> Value<'m> {
        let builder = self.positioned();
        let mut indices = raw_values(indices);
        // SAFETY: a positioned builder; the type, pointer and indices are live; LLVM reads
        // `indices.len()` of them; the name is NUL-terminated.
        Self::built(unsafe {
            llvm::LLVMBuildGEPWithNoWrapFlags(
                builder,
                source.raw(),
                pointer.raw(),
                indices.as_mut_ptr(),
                indices.len() as u32,
                name.as_ptr(),
                flags.0,
            )
        })
    }
}

impl Type<'_> {
    /// How many parameters a function type has; 0 for any other type.
    pub fn count_params(self) -> u32 {
        if self.kind() != super::TypeKind::Function {
            return 0;
        }
        // SAFETY: `self` is a live function type (tested above).
        unsafe { llvm::LLVMCountParamTypes(self.raw()) }
    }

    /// Whether a function type takes variable arguments.
    pub fn is_var_arg(self) -> bool {
        // SAFETY: `self` is a live function type (tested first).
        self.kind() == super::TypeKind::Function
            && unsafe { llvm::LLVMIsFunctionVarArg(self.raw()) != 0 }
    }
}
