//! Values, their uses, the kinds of instruction the stages read and change, metadata nodes
//! as values, and the constants of a type.

use std::ffi::CStr;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;

use inkwell::llvm_sys::core as llvm;
use inkwell::llvm_sys::debuginfo;
use inkwell::llvm_sys::prelude::{LLVMUseRef, LLVMValueRef};
use inkwell::values::InstructionOpcode;
use inkwell::{AtomicOrdering, FloatPredicate, IntPredicate};

use super::{DebugLocation, MetadataKind, Type};

/// An LLVM value of a module borrowed for `'m`: an instruction, argument, constant, global,
/// function, block address or metadata wrapped as a value.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Value<'m> {
    raw: NonNull<inkwell::llvm_sys::LLVMValue>,
    _module: PhantomData<&'m ()>,
}

impl fmt::Debug for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Value({:p})", self.raw)
    }
}

/// A test `LLVMIsA*` function: takes any value, returns it or null.
type IsA = unsafe extern "C" fn(LLVMValueRef) -> LLVMValueRef;

impl<'m> Value<'m> {
    /// The value behind `raw`; `None` for null.
    ///
    /// # Safety
    /// `raw` is null or a live value of a module that outlives `'m`.
    pub(super) unsafe fn from_raw(raw: LLVMValueRef) -> Option<Self> {
        NonNull::new(raw).map(|raw| Value {
            raw,
            _module: PhantomData,
        })
    }

    /// The pointer LLVM's C API takes.
    pub(super) fn raw(self) -> LLVMValueRef {
        self.raw.as_ptr()
    }

    /// The value itself: what a handle of a narrower kind is as a value.
    pub fn as_value(self) -> Value<'m> {
        self
    }

    fn isa(self, test: IsA) -> bool {
        // SAFETY: `self` is live (the layer's invariant) and the `LLVMIsA*` tests take any
        // value; `test` is one of them (every caller below passes one).
        unsafe { !test(self.raw()).is_null() }
    }

    /// Wraps a pointer LLVM returned for `self`'s module: null is `None`.
    pub(super) fn wrap(raw: LLVMValueRef) -> Option<Value<'m>> {
        // SAFETY: every caller passes a value LLVM returned from a live value of the same
        // module (an operand, a user, a callee, a result built in it), or null.
        unsafe { Value::from_raw(raw) }
    }

    /// The value's type.
    pub fn ty(self) -> Type<'m> {
        // SAFETY: `self` is live; every value has a type.
        Type::wrap(unsafe { llvm::LLVMTypeOf(self.raw()) })
    }

    /// The value's name, empty when it has none. Valid until the value is renamed or erased.
    pub fn name(self) -> &'m [u8] {
        let mut len = 0;
        // SAFETY: `self` is live; LLVM returns a pointer to `len` bytes of the name it keeps
        // with the value, or null.
        unsafe {
            let name = llvm::LLVMGetValueName2(self.raw(), &mut len);
            if name.is_null() {
                return &[];
            }
            std::slice::from_raw_parts(name.cast::<u8>(), len)
        }
    }

    /// Names the value (an instruction's name is made unique in its function).
    pub fn set_name(self, name: &str) {
        // SAFETY: `self` is live; LLVM copies the `name.len()` bytes it is given.
        unsafe { llvm::LLVMSetValueName2(self.raw(), name.as_ptr().cast(), name.len()) }
    }

    /// The value as LLVM prints it, trimmed, for an error message.
    pub fn print(self) -> String {
        // SAFETY: `self` is live; the string LLVM returns is NUL-terminated and freed here.
        unsafe {
            let text = llvm::LLVMPrintValueToString(self.raw());
            let printed = CStr::from_ptr(text).to_string_lossy().trim().to_owned();
            llvm::LLVMDisposeMessage(text);
            printed
        }
    }

    // Kinds.

    /// Whether the value is an instruction.
    pub fn is_instruction(self) -> bool {
        self.isa(llvm::LLVMIsAInstruction)
    }
    /// Whether the value is a constant (a global and a function are constants too).
    pub fn is_constant(self) -> bool {
        self.isa(llvm::LLVMIsAConstant)
    }
    /// Whether the value is a constant integer.
    pub fn is_constant_int(self) -> bool {
        self.isa(llvm::LLVMIsAConstantInt)
    }
    /// Whether the value is a constant expression (`addrspacecast (ptr @g to …)`, …).
    pub fn is_constant_expr(self) -> bool {
        self.isa(llvm::LLVMIsAConstantExpr)
    }
    /// Whether the value is a constant array.
    pub fn is_constant_array(self) -> bool {
        self.isa(llvm::LLVMIsAConstantArray)
    }
    /// Whether the value is a constant struct.
    pub fn is_constant_struct(self) -> bool {
        self.isa(llvm::LLVMIsAConstantStruct)
    }
    /// Whether the value is a constant data array or vector (`c"…"`, `[i32 1, i32 2]`).
    pub fn is_constant_data_sequential(self) -> bool {
        self.isa(llvm::LLVMIsAConstantDataSequential)
    }
    /// Whether the value is a function's parameter.
    pub fn is_argument(self) -> bool {
        self.isa(llvm::LLVMIsAArgument)
    }
    /// Whether the value is a function.
    pub fn is_function(self) -> bool {
        self.isa(llvm::LLVMIsAFunction)
    }
    /// Whether the value is a global variable.
    pub fn is_global_variable(self) -> bool {
        self.isa(llvm::LLVMIsAGlobalVariable)
    }
    /// Whether the value is a call (`call`, not `invoke`).
    pub fn is_call(self) -> bool {
        self.isa(llvm::LLVMIsACallInst)
    }
    /// Whether the value is a phi node.
    pub fn is_phi(self) -> bool {
        self.isa(llvm::LLVMIsAPHINode)
    }
    /// Whether the value is a `select`.
    pub fn is_select(self) -> bool {
        self.isa(llvm::LLVMIsASelectInst)
    }
    /// Whether the value is a `br`.
    pub fn is_branch(self) -> bool {
        self.isa(llvm::LLVMIsABranchInst)
    }
    /// Whether the value is an `icmp`.
    pub fn is_icmp(self) -> bool {
        self.isa(llvm::LLVMIsAICmpInst)
    }
    /// Whether the value is a binary operator (`add`, `and`, `xor`, …).
    pub fn is_binary_operator(self) -> bool {
        self.isa(llvm::LLVMIsABinaryOperator)
    }
    /// Whether the value is an `alloca`.
    pub fn is_alloca(self) -> bool {
        self.isa(llvm::LLVMIsAAllocaInst)
    }
    /// Whether the value is a `load`.
    pub fn is_load(self) -> bool {
        self.isa(llvm::LLVMIsALoadInst)
    }
    /// Whether the value is a `store`.
    pub fn is_store(self) -> bool {
        self.isa(llvm::LLVMIsAStoreInst)
    }
    /// Whether the value is a `getelementptr` instruction.
    pub fn is_gep(self) -> bool {
        self.isa(llvm::LLVMIsAGetElementPtrInst)
    }
    /// Whether the value is an `addrspacecast` instruction.
    pub fn is_addrspacecast(self) -> bool {
        self.isa(llvm::LLVMIsAAddrSpaceCastInst)
    }
    /// Whether the value is an `inttoptr` instruction.
    pub fn is_inttoptr(self) -> bool {
        self.isa(llvm::LLVMIsAIntToPtrInst)
    }
    /// Whether the value is a user of other values (an instruction or a constant).
    fn is_user(self) -> bool {
        self.isa(llvm::LLVMIsAUser)
    }

    /// The value as an instruction.
    pub fn as_instruction(self) -> Option<Instruction<'m>> {
        self.is_instruction().then_some(Instruction(self))
    }
    /// The value as a call.
    pub fn as_call(self) -> Option<Call<'m>> {
        self.is_call().then_some(Call(Instruction(self)))
    }
    /// The value as a phi node.
    pub fn as_phi(self) -> Option<Phi<'m>> {
        self.is_phi().then_some(Phi(Instruction(self)))
    }
    /// The value as a `br`.
    pub fn as_branch(self) -> Option<Branch<'m>> {
        self.is_branch()
            .then_some(Branch(Terminator(Instruction(self))))
    }
    /// The value as an `icmp`.
    pub fn as_icmp(self) -> Option<ICmp<'m>> {
        self.is_icmp().then_some(ICmp(Instruction(self)))
    }
    /// The value as a `load`.
    pub fn as_load(self) -> Option<Load<'m>> {
        self.is_load().then_some(Load(Instruction(self)))
    }
    /// The value as a `getelementptr` instruction.
    pub fn as_gep(self) -> Option<Gep<'m>> {
        self.is_gep().then_some(Gep(Instruction(self)))
    }
    /// The value as a function's parameter.
    pub fn as_argument(self) -> Option<Argument<'m>> {
        self.is_argument().then_some(Argument(self))
    }
    /// The value as a global variable.
    pub fn as_global_variable(self) -> Option<GlobalVariable<'m>> {
        self.is_global_variable().then_some(GlobalVariable(self))
    }

    // Constants.

    /// Whether the value is a constant null, zero or all-zero aggregate.
    pub fn is_null_constant(self) -> bool {
        // SAFETY: `self` is live; `LLVMIsNull` is false for a value that is no constant.
        unsafe { llvm::LLVMIsNull(self.raw()) != 0 }
    }

    /// A constant integer's value, zero-extended to 64 bits; `None` for any other value.
    pub fn const_zext_value(self) -> Option<u64> {
        // SAFETY: `self` is a live constant integer (tested first).
        self.is_constant_int()
            .then(|| unsafe { llvm::LLVMConstIntGetZExtValue(self.raw()) })
    }

    /// Whether the value is the constant integer `bit` (`i1 true` for 1, say).
    pub fn is_const_int(self, value: u64) -> bool {
        self.const_zext_value() == Some(value)
    }

    /// A constant expression's opcode; `None` for any other value.
    pub fn const_opcode(self) -> Option<InstructionOpcode> {
        // SAFETY: `self` is a live constant expression (tested first).
        self.is_constant_expr()
            .then(|| unsafe { llvm::LLVMGetConstOpcode(self.raw()) }.into())
    }

    /// `self` without the constant `addrspacecast`s around it (a global's address, say).
    pub fn strip_addrspace_casts(self) -> Value<'m> {
        let mut value = self;
        while value.const_opcode() == Some(InstructionOpcode::AddrSpaceCast) {
            match value.operand(0) {
                Some(inner) => value = inner,
                None => break,
            }
        }
        value
    }

    /// A constant data array's bytes (`c"…"`); `None` for any other value.
    pub fn const_string(self) -> Option<&'m [u8]> {
        if !self.is_constant_data_sequential() {
            return None;
        }
        let mut len = 0;
        // SAFETY: `self` is a live constant data sequential; LLVM returns a pointer to its
        // `len` bytes, kept with the constant (constants live as long as their context).
        unsafe {
            let bytes = llvm::LLVMGetAsString(self.raw(), &mut len);
            (!bytes.is_null()).then(|| std::slice::from_raw_parts(bytes.cast::<u8>(), len))
        }
    }

    // Operands.

    /// How many operands the value has: 0 for a value that uses none.
    pub fn num_operands(self) -> u32 {
        if !self.is_user() {
            return 0;
        }
        // SAFETY: `self` is a live user (tested first).
        let count = unsafe { llvm::LLVMGetNumOperands(self.raw()) };
        count.max(0) as u32
    }

    /// Operand `index`; `None` past the last.
    pub fn operand(self, index: u32) -> Option<Value<'m>> {
        if index >= self.num_operands() {
            return None;
        }
        // SAFETY: `self` is a live user with more than `index` operands.
        Value::wrap(unsafe { llvm::LLVMGetOperand(self.raw(), index) })
    }

    /// The operands in order.
    pub fn operands(self) -> impl Iterator<Item = Value<'m>> {
        (0..self.num_operands()).filter_map(move |i| self.operand(i))
    }

    // Uses.

    /// The value's uses, in use-list order. The next use is read before a use is yielded, so
    /// the yielded use's user may be changed.
    pub fn uses(self) -> Uses<'m> {
        // SAFETY: `self` is live.
        Uses(Use::from_raw(unsafe { llvm::LLVMGetFirstUse(self.raw()) }))
    }

    /// The users of the value, each once, collected before any is changed.
    pub fn users(self) -> Vec<Value<'m>> {
        let mut users = Vec::new();
        for u in self.uses() {
            let user = u.user();
            if !users.contains(&user) {
                users.push(user);
            }
        }
        users
    }

    /// Whether anything uses the value.
    pub fn has_uses(self) -> bool {
        self.uses().next().is_some()
    }

    /// The value's one use, where it has exactly one.
    pub fn single_use(self) -> Option<Use<'m>> {
        let mut uses = self.uses();
        let first = uses.next()?;
        uses.next().is_none().then_some(first)
    }

    /// Makes every use of the value use `new` instead (of the same type). `self` is no
    /// constant other than a global or a constant expression (a constant number is uniqued
    /// across the context: its uses are everyone's); a constant expression's constant users
    /// are remade by LLVM around `new`.
    pub fn replace_all_uses_with(self, new: impl Into<Value<'m>>) {
        let new = new.into();
        assert_eq!(self.ty(), new.ty(), "replace_all_uses_with: types differ");
        assert!(
            !self.is_constant()
                || self.isa(llvm::LLVMIsAGlobalValue)
                || self.isa(llvm::LLVMIsAConstantExpr),
            "replace_all_uses_with of a constant number"
        );
        // SAFETY: both values are live and of one type, which LLVM requires.
        unsafe { llvm::LLVMReplaceAllUsesWith(self.raw(), new.raw()) }
    }

    /// The constant expression `inttoptr (self to ty)` of a constant integer (scalar).
    ///
    /// # Panics
    /// When `self` is no constant integer or `ty` no pointer type.
    pub fn const_int_to_ptr(self, ty: Type<'m>) -> Value<'m> {
        assert!(
            self.is_constant_int(),
            "const_int_to_ptr of no constant integer"
        );
        assert!(ty.is_pointer(), "const_int_to_ptr to no pointer type");
        // SAFETY: `self` is a live constant integer and `ty` a live pointer type, what
        // `LLVMConstIntToPtr` takes.
        Value::wrap(unsafe { llvm::LLVMConstIntToPtr(self.raw(), ty.raw()) })
            .expect("LLVM makes the constant")
    }

    /// The type a constant `getelementptr` expression indexes; `None` for any other value.
    pub fn const_gep_source_element_type(self) -> Option<Type<'m>> {
        // SAFETY: `self` is a live constant `getelementptr` expression (tested first), a GEP
        // operator, which `LLVMGetGEPSourceElementType` takes.
        (self.const_opcode() == Some(InstructionOpcode::GetElementPtr))
            .then(|| Type::wrap(unsafe { llvm::LLVMGetGEPSourceElementType(self.raw()) }))
    }

    /// The constant expression `addrspacecast (self to ty)` of a constant pointer.
    ///
    /// # Panics
    /// When `self` is no constant or `ty` no pointer type.
    pub fn const_addrspace_cast(self, ty: Type<'m>) -> Value<'m> {
        assert!(self.is_constant(), "const_addrspace_cast of no constant");
        assert!(ty.is_pointer(), "const_addrspace_cast to no pointer type");
        // SAFETY: `self` is a live constant and `ty` a live pointer type.
        Value::wrap(unsafe { llvm::LLVMConstAddrSpaceCast(self.raw(), ty.raw()) })
            .expect("LLVM makes the constant")
    }

    /// The no-wrap flags of a `getelementptr` instruction or constant expression; `None` for
    /// any other value.
    pub fn gep_no_wrap_flags(self) -> Option<super::GepNoWrapFlags> {
        let gep = self.is_gep() || self.const_opcode() == Some(InstructionOpcode::GetElementPtr);
        // SAFETY: `self` is a live GEP operator (tested first), which
        // `LLVMGEPGetNoWrapFlags` takes.
        gep.then(|| super::GepNoWrapFlags(unsafe { llvm::LLVMGEPGetNoWrapFlags(self.raw()) }))
    }

    /// The constant expression `getelementptr flags (source, self, indices…)` of a constant
    /// pointer.
    ///
    /// # Panics
    /// When `self` or an index is no constant.
    pub fn const_gep_with_no_wrap_flags(
        self,
        source: Type<'m>,
        indices: &[Value<'m>],
        flags: super::GepNoWrapFlags,
    ) -> Value<'m> {
        assert!(
            self.is_constant() && indices.iter().all(|i| i.is_constant()),
            "const_gep_with_no_wrap_flags of no constant"
        );
        let mut raw: Vec<LLVMValueRef> = indices.iter().map(|i| i.raw()).collect();
        // SAFETY: `self`, the indices (constants) and the type are live; LLVM reads
        // `raw.len()` indices.
        Value::wrap(unsafe {
            llvm::LLVMConstGEPWithNoWrapFlags(
                source.raw(),
                self.raw(),
                raw.as_mut_ptr(),
                raw.len() as u32,
                flags.0,
            )
        })
        .expect("LLVM makes the constant")
    }
}

/// One use of a value: the user and where in it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Use<'m> {
    raw: NonNull<inkwell::llvm_sys::LLVMUse>,
    _module: PhantomData<&'m ()>,
}

impl<'m> Use<'m> {
    fn from_raw(raw: LLVMUseRef) -> Option<Self> {
        NonNull::new(raw).map(|raw| Use {
            raw,
            _module: PhantomData,
        })
    }

    /// The value (instruction or constant) that has the use.
    pub fn user(self) -> Value<'m> {
        // SAFETY: a live use has a user.
        Value::wrap(unsafe { llvm::LLVMGetUser(self.raw.as_ptr()) }).expect("a use has a user")
    }
}

/// The uses of a value ([`Value::uses`]).
#[derive(Debug)]
pub struct Uses<'m>(Option<Use<'m>>);

impl<'m> Iterator for Uses<'m> {
    type Item = Use<'m>;
    fn next(&mut self) -> Option<Use<'m>> {
        let current = self.0?;
        // SAFETY: `current` is a live use; the next is read before the current is yielded.
        self.0 = Use::from_raw(unsafe { llvm::LLVMGetNextUse(current.raw.as_ptr()) });
        Some(current)
    }
}

/// A narrower kind of handle: `$name` derefs to `$parent` and converts to [`Value`].
macro_rules! kind {
    ($(#[$doc:meta])* $name:ident($parent:ident)) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
        #[repr(transparent)]
        pub struct $name<'m>(pub(super) $parent<'m>);

        impl<'m> Deref for $name<'m> {
            type Target = $parent<'m>;
            fn deref(&self) -> &$parent<'m> {
                &self.0
            }
        }

        impl<'m> From<$name<'m>> for Value<'m> {
            fn from(value: $name<'m>) -> Value<'m> {
                value.as_value()
            }
        }
    };
}
pub(super) use kind;

kind!(
    /// An instruction in a block.
    Instruction(Value)
);
kind!(
    /// A call instruction.
    Call(Instruction)
);
kind!(
    /// A phi node.
    Phi(Instruction)
);
kind!(
    /// The instruction that ends a block.
    Terminator(Instruction)
);
kind!(
    /// A `br`, conditional or not.
    Branch(Terminator)
);
kind!(
    /// An `icmp`.
    ICmp(Instruction)
);
kind!(
    /// A `load`.
    Load(Instruction)
);
kind!(
    /// A `getelementptr` instruction.
    Gep(Instruction)
);
kind!(
    /// A function's parameter.
    Argument(Value)
);
kind!(
    /// A global variable.
    GlobalVariable(Value)
);

impl<'m> Instruction<'m> {
    /// The instruction itself: what a handle of a narrower kind is as an instruction.
    pub fn instruction(self) -> Instruction<'m> {
        self
    }

    /// The instruction's opcode.
    pub fn opcode(self) -> InstructionOpcode {
        // SAFETY: `self` is a live instruction.
        unsafe { llvm::LLVMGetInstructionOpcode(self.raw()) }.into()
    }

    /// The next instruction of its block; `None` after the terminator.
    pub fn next(self) -> Option<Instruction<'m>> {
        // SAFETY: `self` is a live instruction; the next one is an instruction or null.
        Value::wrap(unsafe { llvm::LLVMGetNextInstruction(self.raw()) }).map(Instruction)
    }

    /// Whether the instruction is an `add`, `sub`, `mul` or `shl` marked `nuw`: its result,
    /// read unsigned, never wraps.
    pub fn has_no_unsigned_wrap(self) -> bool {
        use InstructionOpcode as Op;
        matches!(self.opcode(), Op::Add | Op::Sub | Op::Mul | Op::Shl)
            // SAFETY: `self` is a live instruction of an opcode that carries the flag.
            && unsafe { llvm::LLVMGetNUW(self.raw()) } != 0
    }

    /// Whether the instruction is `unreachable`.
    pub fn is_unreachable(self) -> bool {
        self.opcode() == InstructionOpcode::Unreachable
    }

    /// How many operands the instruction has.
    pub fn num_operands(self) -> u32 {
        // SAFETY: `self` is a live instruction, a user.
        let count = unsafe { llvm::LLVMGetNumOperands(self.raw()) };
        count.max(0) as u32
    }

    /// Operand `index`; `None` past the last.
    pub fn operand(self, index: u32) -> Option<Value<'m>> {
        if index >= self.num_operands() {
            return None;
        }
        // SAFETY: `self` is a live instruction with more than `index` operands.
        Value::wrap(unsafe { llvm::LLVMGetOperand(self.raw(), index) })
    }

    /// Sets operand `index` to `value`.
    ///
    /// # Panics
    /// Past the last operand.
    pub fn set_operand(self, index: u32, value: impl Into<Value<'m>>) {
        assert!(index < self.num_operands(), "set_operand past the last");
        // SAFETY: `self` is a live instruction with more than `index` operands; `value` is
        // live.
        unsafe { llvm::LLVMSetOperand(self.raw(), index, value.into().raw()) }
    }

    /// Makes each operand of the instruction that is `old` `new`; returns how many.
    pub fn replace_operand(self, old: Value<'m>, new: Value<'m>) -> usize {
        let mut replaced = 0;
        for i in 0..self.num_operands() {
            // SAFETY: `self` is a live instruction with more than `i` operands; `new` is live.
            unsafe {
                if llvm::LLVMGetOperand(self.raw(), i) == old.raw() {
                    llvm::LLVMSetOperand(self.raw(), i, new.raw());
                    replaced += 1;
                }
            }
        }
        replaced
    }

    /// Removes the instruction from its block and deletes it. The handle (and any copy of it)
    /// names nothing afterwards: the instruction's uses are replaced first.
    pub fn erase(self) {
        // SAFETY: `self` is a live instruction in a block; the caller uses no handle to it
        // after this (the layer's one rule the types do not enforce).
        unsafe { llvm::LLVMInstructionEraseFromParent(self.raw()) }
    }

    /// The instruction's debug location, if it has one.
    pub fn debug_location(self) -> Option<DebugLocation<'m>> {
        // SAFETY: `self` is a live instruction; its location is a node or null.
        DebugLocation::from_raw(unsafe { debuginfo::LLVMInstructionGetDebugLoc(self.raw()) })
    }

    /// Sets the instruction's debug location (`None` clears it).
    pub fn set_debug_location(self, location: Option<DebugLocation<'m>>) {
        let raw = location.map_or(std::ptr::null_mut(), DebugLocation::raw);
        // SAFETY: `self` is a live instruction; `raw` is a location node of its context or
        // null, which clears the location.
        unsafe { debuginfo::LLVMInstructionSetDebugLoc(self.raw(), raw) }
    }

    /// Gives the instruction `from`'s debug location (none where `from` has none).
    pub fn copy_debug_location_from(self, from: Instruction<'m>) {
        self.set_debug_location(from.debug_location());
    }

    /// Whether the instruction has metadata of `kind`.
    pub fn has_metadata(self, kind: MetadataKind) -> bool {
        // SAFETY: `self` is a live instruction; the result is a value or null.
        unsafe { !llvm::LLVMGetMetadata(self.raw(), kind.0).is_null() }
    }

    /// The instruction's metadata of `kind`, where it has a node of that kind.
    pub fn metadata(self, kind: MetadataKind) -> Option<MetadataNode<'m>> {
        // SAFETY: `self` is a live instruction; the result is a metadata value or null, and
        // `LLVMIsAMDNode` keeps it only where it wraps a node.
        let raw = unsafe {
            let raw = llvm::LLVMGetMetadata(self.raw(), kind.0);
            if raw.is_null() {
                return None;
            }
            llvm::LLVMIsAMDNode(raw)
        };
        Value::wrap(raw).map(MetadataNode)
    }

    /// Sets the instruction's metadata of `kind` to `node` (from
    /// [`super::Module::empty_metadata_node`], say).
    pub fn set_metadata(self, kind: MetadataKind, node: MetadataNode<'m>) {
        // SAFETY: `self` is a live instruction and `node` a live metadata node as a value,
        // the kind `LLVMSetMetadata` takes.
        unsafe { llvm::LLVMSetMetadata(self.raw(), kind.0, node.raw()) }
    }

    /// Whether the instruction is a volatile load, store, `atomicrmw` or `cmpxchg`.
    pub fn is_volatile(self) -> bool {
        // SAFETY: `self` is a live memory access of a kind `LLVMGetVolatile` takes.
        self.is_memory_access() && unsafe { llvm::LLVMGetVolatile(self.raw()) != 0 }
    }

    /// Makes a load, store, `atomicrmw` or `cmpxchg` volatile or not.
    ///
    /// # Panics
    /// For any other instruction.
    pub fn set_volatile(self, volatile: bool) {
        assert!(self.is_memory_access(), "set_volatile: not a memory access");
        // SAFETY: `self` is a live memory access of a kind `LLVMSetVolatile` takes.
        unsafe { llvm::LLVMSetVolatile(self.raw(), i32::from(volatile)) }
    }

    /// A load's, store's, `atomicrmw`'s or `cmpxchg`'s (success) ordering.
    pub fn atomic_ordering(self) -> Option<AtomicOrdering> {
        // SAFETY: `self` is a live memory access of a kind `LLVMGetOrdering` takes.
        self.is_memory_access()
            .then(|| unsafe { llvm::LLVMGetOrdering(self.raw()) }.into())
    }

    fn is_memory_access(self) -> bool {
        self.is_load()
            || self.is_store()
            || self.isa(llvm::LLVMIsAAtomicRMWInst)
            || self.isa(llvm::LLVMIsAAtomicCmpXchgInst)
    }
}

impl<'m> Call<'m> {
    /// The value called: a function, inline assembly or a pointer.
    pub fn callee(self) -> Value<'m> {
        // SAFETY: `self` is a live call; a call has a callee.
        Value::wrap(unsafe { llvm::LLVMGetCalledValue(self.raw()) }).expect("a call has a callee")
    }

    /// The name of the function called: empty for an indirect call.
    pub fn callee_name(self) -> &'m [u8] {
        self.called_function().map_or(&[], |f| f.name())
    }

    /// How many arguments the call passes.
    pub fn num_args(self) -> u32 {
        // SAFETY: `self` is a live call.
        unsafe { llvm::LLVMGetNumArgOperands(self.raw()) }
    }

    /// Argument `index`; `None` past the last.
    pub fn arg(self, index: u32) -> Option<Value<'m>> {
        (index < self.num_args()).then(|| self.operand(index))?
    }

    /// The arguments in order.
    pub fn args(self) -> impl Iterator<Item = Value<'m>> {
        (0..self.num_args()).filter_map(move |i| self.arg(i))
    }

    /// Whether the call site has the enum attribute `name` at `index` (an
    /// [`super::AttributeIndex`]).
    pub fn has_enum_attribute(self, index: super::AttributeIndex, name: &str) -> bool {
        let kind = super::enum_attribute_kind(name);
        // SAFETY: `self` is a live call; the result is an attribute or null.
        unsafe { !llvm::LLVMGetCallSiteEnumAttribute(self.raw(), index.raw(), kind).is_null() }
    }

    /// Removes the enum attribute `name` at `index` from the call site.
    pub fn remove_enum_attribute(self, index: super::AttributeIndex, name: &str) {
        let kind = super::enum_attribute_kind(name);
        // SAFETY: `self` is a live call; removing an attribute it lacks does nothing.
        unsafe { llvm::LLVMRemoveCallSiteEnumAttribute(self.raw(), index.raw(), kind) }
    }
}

impl<'m> Phi<'m> {
    /// How many incoming edges the phi has.
    pub fn count_incoming(self) -> u32 {
        // SAFETY: `self` is a live phi.
        unsafe { llvm::LLVMCountIncoming(self.raw()) }
    }
}

impl<'m> Terminator<'m> {
    /// How many successors the terminator has.
    pub fn num_successors(self) -> u32 {
        // SAFETY: `self` is a live terminator.
        unsafe { llvm::LLVMGetNumSuccessors(self.raw()) }
    }

    /// The terminator as a `br`.
    pub fn as_branch(self) -> Option<Branch<'m>> {
        self.is_branch().then_some(Branch(self))
    }
}

impl<'m> Branch<'m> {
    /// Whether the branch has a condition.
    pub fn is_conditional(self) -> bool {
        // SAFETY: `self` is a live branch.
        unsafe { llvm::LLVMIsConditional(self.raw()) != 0 }
    }

    /// A conditional branch's condition.
    pub fn condition(self) -> Option<Value<'m>> {
        if !self.is_conditional() {
            return None;
        }
        // SAFETY: `self` is a live conditional branch.
        Value::wrap(unsafe { llvm::LLVMGetCondition(self.raw()) })
    }

    /// Sets a conditional branch's condition (an `i1`).
    ///
    /// # Panics
    /// For an unconditional branch.
    pub fn set_condition(self, condition: impl Into<Value<'m>>) {
        assert!(
            self.is_conditional(),
            "set_condition of an unconditional branch"
        );
        // SAFETY: `self` is a live conditional branch; `condition` is live.
        unsafe { llvm::LLVMSetCondition(self.raw(), condition.into().raw()) }
    }
}

impl ICmp<'_> {
    /// The comparison's predicate.
    pub fn predicate(self) -> IntPredicate {
        // SAFETY: `self` is a live `icmp`, whose predicate is an integer one.
        unsafe { llvm::LLVMGetICmpPredicate(self.raw()) }.into()
    }
}

impl Load<'_> {
    /// Whether the load is neither volatile nor atomic.
    pub fn is_plain(self) -> bool {
        !self.is_volatile() && self.atomic_ordering() == Some(AtomicOrdering::NotAtomic)
    }
}

impl<'m> Gep<'m> {
    /// Whether the GEP is `inbounds`.
    pub fn is_in_bounds(self) -> bool {
        // SAFETY: `self` is a live GEP.
        unsafe { llvm::LLVMIsInBounds(self.raw()) != 0 }
    }

    /// The type the GEP indexes (`getelementptr T, …`).
    pub fn source_element_type(self) -> Type<'m> {
        // SAFETY: `self` is a live GEP.
        Type::wrap(unsafe { llvm::LLVMGetGEPSourceElementType(self.raw()) })
    }

    /// Whether every index is a constant integer.
    pub fn has_constant_indices(self) -> bool {
        (1..self.num_operands()).all(|i| self.operand(i).is_some_and(Value::is_constant_int))
    }
}

impl<'m> Argument<'m> {
    /// The parameter's position, from 0.
    pub fn index(self) -> u32 {
        self.function()
            .params()
            .position(|p| p == self)
            .expect("an argument is a parameter of its function") as u32
    }

    /// Whether the parameter has the enum attribute `name` (`nonnull`, `noalias`, …).
    pub fn has_enum_attribute(self, name: &str) -> bool {
        self.function()
            .has_enum_attribute(super::AttributeIndex::Param(self.index()), name)
    }
}

impl<'m> GlobalVariable<'m> {
    /// Whether the global is thread-local.
    pub fn is_thread_local(self) -> bool {
        // SAFETY: `self` is a live global variable.
        unsafe { llvm::LLVMIsThreadLocal(self.raw()) != 0 }
    }

    /// The global's initializer; `None` for a declaration.
    pub fn initializer(self) -> Option<Value<'m>> {
        // SAFETY: `self` is a live global variable; its initializer is a constant or null.
        Value::wrap(unsafe { llvm::LLVMGetInitializer(self.raw()) })
    }

    /// Sets the global's initializer (a constant of its value type).
    pub fn set_initializer(self, value: Value<'m>) {
        assert!(value.is_constant(), "an initializer is a constant");
        // SAFETY: `self` is a live global variable and `value` a live constant.
        unsafe { llvm::LLVMSetInitializer(self.raw(), value.raw()) }
    }

    /// Whether the global is `constant`.
    pub fn is_constant_global(self) -> bool {
        // SAFETY: `self` is a live global variable.
        unsafe { llvm::LLVMIsGlobalConstant(self.raw()) != 0 }
    }

    /// Makes the global `constant` or not.
    pub fn set_constant_global(self, constant: bool) {
        // SAFETY: `self` is a live global variable.
        unsafe { llvm::LLVMSetGlobalConstant(self.raw(), i32::from(constant)) }
    }

    /// The type of what the global holds.
    pub fn value_type(self) -> Type<'m> {
        // SAFETY: `self` is a live global value.
        Type::wrap(unsafe { llvm::LLVMGlobalGetValueType(self.raw()) })
    }

    /// The global's alignment.
    pub fn alignment(self) -> u32 {
        // SAFETY: `self` is a live global variable, a kind `LLVMGetAlignment` takes.
        unsafe { llvm::LLVMGetAlignment(self.raw()) }
    }

    /// Sets the global's alignment.
    pub fn set_alignment(self, bytes: u32) {
        // SAFETY: `self` is a live global variable, a kind `LLVMSetAlignment` takes.
        unsafe { llvm::LLVMSetAlignment(self.raw(), bytes) }
    }

    /// Deletes the global, which nothing may use. The handle names nothing afterwards.
    ///
    /// # Panics
    /// When the global still has uses.
    pub fn delete(self) {
        assert!(!self.has_uses(), "deleting a global still used");
        // SAFETY: `self` is a live global nothing uses; no handle to it is used after.
        unsafe { llvm::LLVMDeleteGlobal(self.raw()) }
    }

    /// Takes the global out of its COMDAT group, if any (see [`super::Function::drop_comdat`]).
    pub fn drop_comdat(self) {
        // SAFETY: `self` is a live global variable, a global object; a null comdat removes it
        // (`GlobalObject::setComdat(nullptr)`).
        unsafe { inkwell::llvm_sys::comdat::LLVMSetComdat(self.raw(), std::ptr::null_mut()) }
    }

    /// Sets the global's linkage.
    pub fn set_linkage(self, linkage: inkwell::module::Linkage) {
        // SAFETY: `self` is a live global value.
        unsafe { llvm::LLVMSetLinkage(self.raw(), linkage.into()) }
    }
}

/// An integer predicate for the C API.
pub(super) fn int_predicate(p: IntPredicate) -> inkwell::llvm_sys::LLVMIntPredicate {
    p.into()
}

/// A float predicate for the C API.
pub(super) fn float_predicate(p: FloatPredicate) -> inkwell::llvm_sys::LLVMRealPredicate {
    p.into()
}

/// A metadata node wrapped as a value ([`super::Module::empty_metadata_node`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct MetadataNode<'m>(pub(super) Value<'m>);

impl<'m> MetadataNode<'m> {
    pub(super) fn raw(self) -> inkwell::llvm_sys::prelude::LLVMValueRef {
        self.0.raw()
    }

    /// The node's operands that are nodes themselves, in order (a scope list's scopes).
    pub fn node_operands(self) -> Vec<MetadataNode<'m>> {
        // SAFETY: `self` wraps a live node as a value, which both functions take; the buffer
        // holds as many operands as LLVM writes; each written is a value or null, and
        // `LLVMIsAMDNode` keeps the nodes.
        let raw = unsafe {
            let count = llvm::LLVMGetMDNodeNumOperands(self.raw());
            let mut raw = vec![std::ptr::null_mut(); count as usize];
            llvm::LLVMGetMDNodeOperands(self.raw(), raw.as_mut_ptr());
            raw.into_iter()
                .filter(|v| !v.is_null())
                .map(|v| llvm::LLVMIsAMDNode(v))
                .collect::<Vec<_>>()
        };
        raw.into_iter()
            .filter_map(Value::wrap)
            .map(MetadataNode)
            .collect()
    }
}

impl<'m> Type<'m> {
    // Constants.

    /// The integer constant `value` of this integer type (its low bits; `sign_extend` says
    /// how a narrower `value` is read for a wider type).
    ///
    /// # Panics
    /// For a type that is no integer.
    pub fn const_int(self, value: u64, sign_extend: bool) -> Value<'m> {
        assert!(self.is_integer(), "const_int of a type that is no integer");
        // SAFETY: `self` is a live integer type.
        Value::wrap(unsafe { llvm::LLVMConstInt(self.raw(), value, i32::from(sign_extend)) })
            .expect("LLVM makes the constant")
    }

    /// The null, zero or all-zero constant of this type.
    pub fn const_null(self) -> Value<'m> {
        // SAFETY: `self` is a live type.
        Value::wrap(unsafe { llvm::LLVMConstNull(self.raw()) }).expect("LLVM makes the constant")
    }

    /// `poison` of this type.
    pub fn poison(self) -> Value<'m> {
        // SAFETY: `self` is a live type.
        Value::wrap(unsafe { llvm::LLVMGetPoison(self.raw()) }).expect("LLVM makes the constant")
    }

    /// `undef` of this type.
    pub fn undef(self) -> Value<'m> {
        // SAFETY: `self` is a live type.
        Value::wrap(unsafe { llvm::LLVMGetUndef(self.raw()) }).expect("LLVM makes the constant")
    }
}
