//! Functions and their blocks, the walks over them, and what values and instructions have of
//! them: the function a value is, an instruction's block, a phi's incoming blocks, a
//! terminator's successors, an argument's function.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;

use inkwell::llvm_sys::core as llvm;
use inkwell::llvm_sys::prelude::LLVMBasicBlockRef;

use super::value::kind;
use super::{Argument, AttributeIndex, Call, Instruction, Phi, Terminator, Type, Uses, Value};

/// A basic block of a function of a module borrowed for `'m`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Block<'m> {
    raw: NonNull<inkwell::llvm_sys::LLVMBasicBlock>,
    _module: PhantomData<&'m ()>,
}

impl fmt::Debug for Block<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Block({:p})", self.raw)
    }
}

impl<'m> Block<'m> {
    /// The block behind `raw`; `None` for null.
    ///
    /// # Safety
    /// `raw` is null or a live block of a module that outlives `'m`.
    pub(super) unsafe fn from_raw(raw: LLVMBasicBlockRef) -> Option<Self> {
        NonNull::new(raw).map(|raw| Block {
            raw,
            _module: PhantomData,
        })
    }

    /// The pointer LLVM's C API takes.
    pub(super) fn raw(self) -> LLVMBasicBlockRef {
        self.raw.as_ptr()
    }

    /// The block as a value: what branches and block addresses use.
    pub fn as_value(self) -> Value<'m> {
        // SAFETY: `self` is a live block, which is a value.
        Value::wrap(unsafe { llvm::LLVMBasicBlockAsValue(self.raw()) }).expect("a block is a value")
    }

    /// The function the block is in.
    pub fn function(self) -> Function<'m> {
        // SAFETY: `self` is a live block; the layer hands out only blocks of functions.
        Function(
            Value::wrap(unsafe { llvm::LLVMGetBasicBlockParent(self.raw()) })
                .expect("a block of the layer is in a function"),
        )
    }

    /// The block's first instruction; `None` for an empty block.
    pub fn first_instruction(self) -> Option<Instruction<'m>> {
        // SAFETY: `self` is a live block; its first instruction is one or null.
        Value::wrap(unsafe { llvm::LLVMGetFirstInstruction(self.raw()) }).map(Instruction)
    }

    /// The block's terminator; `None` while the block has none.
    pub fn terminator(self) -> Option<Terminator<'m>> {
        // SAFETY: `self` is a live block; its terminator is one or null.
        Value::wrap(unsafe { llvm::LLVMGetBasicBlockTerminator(self.raw()) })
            .map(|t| Terminator(Instruction(t)))
    }

    /// The block's instructions in order. The next is read before an instruction is yielded,
    /// so the yielded one may be erased (not another).
    pub fn instructions(self) -> Instructions<'m> {
        Instructions(self.first_instruction())
    }

    /// The block after this one in its function.
    pub fn next(self) -> Option<Block<'m>> {
        // SAFETY: `self` is a live block; the next is a block or null.
        unsafe { Block::from_raw(llvm::LLVMGetNextBasicBlock(self.raw())) }
    }

    /// The uses of the block: the terminators that branch to it and its block addresses.
    pub fn uses(self) -> Uses<'m> {
        self.as_value().uses()
    }

    /// The block's one use, where it has exactly one: the one terminator branching to it.
    pub fn single_use(self) -> Option<super::Use<'m>> {
        self.as_value().single_use()
    }

    /// The one block that branches to this one, where exactly one does (by one edge or more)
    /// and nothing takes its address.
    pub fn single_predecessor(self) -> Option<Block<'m>> {
        let mut preds = self
            .uses()
            .map(|u| u.user().as_instruction().map(|i| i.block()));
        let first = preds.next()??;
        preds.all(|b| b == Some(first)).then_some(first)
    }

    /// Makes every branch to the block (and its phis' incoming edges naming it) name `other`.
    pub fn replace_all_uses_with(self, other: Block<'m>) {
        self.as_value().replace_all_uses_with(other.as_value());
    }

    /// Deletes the block and its instructions. The handle (and any copy of it, and of its
    /// instructions) names nothing afterwards; nothing may branch to it any more.
    pub fn delete(self) {
        // SAFETY: `self` is a live block; the caller uses no handle to it or its
        // instructions after this.
        unsafe { llvm::LLVMDeleteBasicBlock(self.raw()) }
    }
}

/// A block's instructions ([`Block::instructions`]).
#[derive(Debug)]
pub struct Instructions<'m>(Option<Instruction<'m>>);

impl<'m> Iterator for Instructions<'m> {
    type Item = Instruction<'m>;
    fn next(&mut self) -> Option<Instruction<'m>> {
        let current = self.0?;
        self.0 = current.next();
        Some(current)
    }
}

kind!(
    /// A function, defined or declared.
    Function(Value)
);

impl<'m> Function<'m> {
    /// `value`, known to be a function.
    pub(super) fn from_value(value: Value<'m>) -> Self {
        Function(value)
    }

    /// Takes the function out of its COMDAT group, if any: a definition made internal needs
    /// none, and an ELF group of the same name elsewhere in a final link would otherwise
    /// replace it.
    pub fn drop_comdat(self) {
        // SAFETY: `self` is a live function, a global object; a null comdat removes it
        // (`GlobalObject::setComdat(nullptr)`).
        unsafe { inkwell::llvm_sys::comdat::LLVMSetComdat(self.raw(), std::ptr::null_mut()) }
    }

    /// Whether the function is only declared (has no blocks).
    pub fn is_declaration(self) -> bool {
        self.entry_block().is_none()
    }

    /// The function's first block; `None` for a declaration.
    pub fn entry_block(self) -> Option<Block<'m>> {
        // SAFETY: `self` is a live function; its first block is one or null (a
        // declaration's).
        unsafe { Block::from_raw(llvm::LLVMGetFirstBasicBlock(self.raw())) }
    }

    /// The function's blocks in order. The next is read before a block is yielded, so the
    /// yielded one may be deleted (not another); blocks appended meanwhile are reached.
    pub fn blocks(self) -> Blocks<'m> {
        Blocks(self.entry_block())
    }

    /// The blocks of the loop entered at `header` and closed by `latch`: those `header`
    /// reaches short of going on from `latch`, `header` and `latch` among them; `None` where
    /// `header` does not reach `latch` or a block outside enters them anywhere but at `header`.
    pub fn loop_blocks(self, header: Block<'m>, latch: Block<'m>) -> Option<Vec<Block<'m>>> {
        let mut inside = std::collections::HashSet::from([header]);
        let mut work = vec![header];
        while let Some(block) = work.pop() {
            if block == latch {
                continue;
            }
            for next in block.terminator()?.successors() {
                if inside.insert(next) {
                    work.push(next);
                }
            }
        }
        if !inside.contains(&latch) {
            return None;
        }
        let entered_elsewhere = self.blocks().any(|block| {
            !inside.contains(&block)
                && block
                    .terminator()
                    .is_some_and(|t| t.successors().any(|s| s != header && inside.contains(&s)))
        });
        (!entered_elsewhere).then(|| inside.into_iter().collect())
    }

    /// The function's parameters in order.
    pub fn params(self) -> impl Iterator<Item = super::Argument<'m>> {
        // SAFETY: `self` is a live function; `LLVMGetParam` is asked for indices below
        // `LLVMCountParams`.
        let count = unsafe { llvm::LLVMCountParams(self.raw()) };
        (0..count).filter_map(move |i| {
            // SAFETY: as above.
            Value::wrap(unsafe { llvm::LLVMGetParam(self.raw(), i) }).map(super::Argument)
        })
    }

    /// The function's type (`ret (params…)`).
    pub fn function_type(self) -> Type<'m> {
        // SAFETY: `self` is a live function, a global value.
        Type::wrap(unsafe { llvm::LLVMGlobalGetValueType(self.raw()) })
    }

    /// The type the function returns.
    pub fn return_type(self) -> Type<'m> {
        self.function_type()
            .return_type()
            .expect("a function's type has a return type")
    }

    /// The function's calling convention (see [`super::call_conv`]).
    pub fn call_conv(self) -> u32 {
        // SAFETY: `self` is a live function.
        unsafe { llvm::LLVMGetFunctionCallConv(self.raw()) }
    }

    /// Whether the function has the enum attribute `name` at `index`.
    pub fn has_enum_attribute(self, index: AttributeIndex, name: &str) -> bool {
        let kind = super::enum_attribute_kind(name);
        // SAFETY: `self` is a live function; the result is an attribute or null.
        unsafe { !llvm::LLVMGetEnumAttributeAtIndex(self.raw(), index.raw(), kind).is_null() }
    }

    /// Whether the function reads and writes no memory: its `memory` attribute says
    /// `memory(none)` (LLVM's intrinsics for arithmetic say so).
    pub fn accesses_no_memory(self) -> bool {
        let kind = super::enum_attribute_kind("memory");
        // SAFETY: `self` is a live function; the result is an attribute or null, and an
        // enum attribute's value is read from a non-null one.
        unsafe {
            let attribute =
                llvm::LLVMGetEnumAttributeAtIndex(self.raw(), AttributeIndex::Function.raw(), kind);
            // `MemoryEffects` encoded: no access to any location is 0.
            !attribute.is_null() && llvm::LLVMGetEnumAttributeValue(attribute) == 0
        }
    }

    /// Appends a new empty block named `name` to the function.
    pub fn append_block(self, name: &std::ffi::CStr) -> Block<'m> {
        // SAFETY: `self` is a live function; the name is NUL-terminated and copied; the
        // block is made in the function's context.
        unsafe {
            let context = llvm::LLVMGetTypeContext(llvm::LLVMTypeOf(self.raw()));
            Block::from_raw(llvm::LLVMAppendBasicBlockInContext(
                context,
                self.raw(),
                name.as_ptr(),
            ))
        }
        .expect("LLVM appends a block")
    }

    /// Deletes the function, which nothing may use. The handle (and any copy of it, and of
    /// its blocks and instructions) names nothing afterwards.
    ///
    /// # Panics
    /// When the function still has uses.
    pub fn delete(self) {
        assert!(!self.has_uses(), "deleting a function still used");
        // SAFETY: `self` is a live function nothing uses; no handle to it or to what it
        // holds is used after.
        unsafe { llvm::LLVMDeleteFunction(self.raw()) }
    }

    /// The function's intrinsic ID; `None` for a function that is no intrinsic.
    pub fn intrinsic_id(self) -> Option<super::IntrinsicId> {
        // SAFETY: `self` is a live function; 0 is no intrinsic.
        let id = unsafe { llvm::LLVMGetIntrinsicID(self.raw()) };
        (id != 0).then_some(super::IntrinsicId(id))
    }

    /// The function's subprogram, where it has debug information.
    pub fn subprogram(self) -> Option<super::DebugSubprogram<'m>> {
        // SAFETY: `self` is a live function; its subprogram is one or null.
        super::DebugSubprogram::from_raw(unsafe {
            inkwell::llvm_sys::debuginfo::LLVMGetSubprogram(self.raw())
        })
    }

    /// Gives the function the subprogram `subprogram`.
    pub fn set_subprogram(self, subprogram: super::DebugSubprogram<'m>) {
        // SAFETY: `self` is a live function and `subprogram` a live subprogram.
        unsafe { inkwell::llvm_sys::debuginfo::LLVMSetSubprogram(self.raw(), subprogram.raw()) }
    }
}

/// A function's blocks ([`Function::blocks`]).
#[derive(Debug)]
pub struct Blocks<'m>(Option<Block<'m>>);

impl<'m> Iterator for Blocks<'m> {
    type Item = Block<'m>;
    fn next(&mut self) -> Option<Block<'m>> {
        let current = self.0?;
        self.0 = current.next();
        Some(current)
    }
}

// What values, instructions and their kinds have of blocks and functions.

impl<'m> Value<'m> {
    /// The value as a function.
    pub fn as_function(self) -> Option<Function<'m>> {
        self.is_function().then_some(Function::from_value(self))
    }
}

impl<'m> Instruction<'m> {
    /// The block the instruction is in.
    pub fn block(self) -> Block<'m> {
        // SAFETY: `self` is a live instruction; the layer hands out only instructions that
        // are in a block (a clone is inserted as it is made).
        unsafe { Block::from_raw(llvm::LLVMGetInstructionParent(self.raw())) }
            .expect("an instruction of the layer is in a block")
    }

    /// The function the instruction is in.
    pub fn function(self) -> Function<'m> {
        self.block().function()
    }
}

impl<'m> Call<'m> {
    /// The function called, for a direct call.
    pub fn called_function(self) -> Option<Function<'m>> {
        self.callee().as_function()
    }
}

impl<'m> Phi<'m> {
    /// Incoming edge `index`: the value and the block it comes from.
    pub fn incoming(self, index: u32) -> Option<(Value<'m>, Block<'m>)> {
        if index >= self.count_incoming() {
            return None;
        }
        // SAFETY: `self` is a live phi with more than `index` incoming edges.
        unsafe {
            let value = Value::wrap(llvm::LLVMGetIncomingValue(self.raw(), index))?;
            let block = Block::from_raw(llvm::LLVMGetIncomingBlock(self.raw(), index))?;
            Some((value, block))
        }
    }

    /// The incoming edges in order.
    pub fn incomings(self) -> impl Iterator<Item = (Value<'m>, Block<'m>)> {
        (0..self.count_incoming()).filter_map(move |i| self.incoming(i))
    }

    /// The value the phi has when entered from `block`, if an edge comes from it.
    pub fn incoming_from(self, block: Block<'m>) -> Option<Value<'m>> {
        self.incomings().find(|&(_, b)| b == block).map(|(v, _)| v)
    }

    /// Adds an incoming edge: `value` (of the phi's type) when entered from `block`.
    pub fn add_incoming(self, value: impl Into<Value<'m>>, block: Block<'m>) {
        let value = value.into();
        assert_eq!(value.ty(), self.ty(), "add_incoming: types differ");
        let (mut value, mut block) = (value.raw(), block.raw());
        // SAFETY: `self` is a live phi; one value of its type and one block are passed.
        unsafe { llvm::LLVMAddIncoming(self.raw(), &mut value, &mut block, 1) }
    }
}

impl<'m> Terminator<'m> {
    /// Successor `index`; `None` past the last.
    pub fn successor(self, index: u32) -> Option<Block<'m>> {
        if index >= self.num_successors() {
            return None;
        }
        // SAFETY: `self` is a live terminator with more than `index` successors.
        unsafe { Block::from_raw(llvm::LLVMGetSuccessor(self.raw(), index)) }
    }

    /// The successors in order (a block twice where two edges lead to it).
    pub fn successors(self) -> impl Iterator<Item = Block<'m>> {
        (0..self.num_successors()).filter_map(move |i| self.successor(i))
    }

    /// Sets successor `index` to `block` (of the same function).
    ///
    /// # Panics
    /// Past the last successor.
    pub fn set_successor(self, index: u32, block: Block<'m>) {
        assert!(index < self.num_successors(), "set_successor past the last");
        // SAFETY: `self` is a live terminator with more than `index` successors.
        unsafe { llvm::LLVMSetSuccessor(self.raw(), index, block.raw()) }
    }
}

impl<'m> Argument<'m> {
    /// The function whose parameter it is.
    pub fn function(self) -> Function<'m> {
        // SAFETY: `self` is a live argument, whose parent is a function.
        Function::from_value(
            Value::wrap(unsafe { llvm::LLVMGetParamParent(self.raw()) })
                .expect("an argument has a function"),
        )
    }
}
