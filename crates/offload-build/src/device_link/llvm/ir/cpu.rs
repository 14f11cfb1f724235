//! What the CPU device's region stage needs of LLVM beyond the rest of the layer: allocas,
//! loads and stores, integer arithmetic, conditional branches and returns built; allocas read;
//! function attributes and linkage set; debug locations read as file and line.

use std::ffi::CStr;

use inkwell::llvm_sys::core as llvm;
use inkwell::llvm_sys::debuginfo;

use super::kinds::enum_attribute_kind;
use super::{
    AttributeIndex, Block, Builder, DebugLocation, Function, Instruction, Terminator, Type, Value,
};

impl<'m> Builder<'m> {
    /// `alloca ty, align align`.
    pub fn build_alloca(&self, ty: Type<'m>, align: u32, name: &CStr) -> Instruction<'m> {
        let builder = self.positioned_raw();
        // SAFETY: a positioned builder; the type is live; the name is NUL-terminated; the
        // result is an alloca, whose alignment may be set.
        let alloca = unsafe {
            let alloca = llvm::LLVMBuildAlloca(builder, ty.raw(), name.as_ptr());
            llvm::LLVMSetAlignment(alloca, align);
            alloca
        };
        Instruction(Self::wrap_built(alloca))
    }

    /// `load ty, ptr pointer`.
    pub fn build_load(&self, ty: Type<'m>, pointer: Value<'m>, name: &CStr) -> Instruction<'m> {
        let builder = self.positioned_raw();
        // SAFETY: a positioned builder; the type and the pointer are live; the name is
        // NUL-terminated.
        let load = unsafe { llvm::LLVMBuildLoad2(builder, ty.raw(), pointer.raw(), name.as_ptr()) };
        Instruction(Self::wrap_built(load))
    }

    /// `store value, ptr pointer`.
    pub fn build_store(&self, value: Value<'m>, pointer: Value<'m>) -> Instruction<'m> {
        let builder = self.positioned_raw();
        // SAFETY: a positioned builder; the value and the pointer are live.
        let store = unsafe { llvm::LLVMBuildStore(builder, value.raw(), pointer.raw()) };
        Instruction(Self::wrap_built(store))
    }

    /// `add a, b`.
    pub fn build_add(&self, a: Value<'m>, b: Value<'m>, name: &CStr) -> Value<'m> {
        let builder = self.positioned_raw();
        // SAFETY: a positioned builder; the operands are live; the name is NUL-terminated.
        Self::wrap_built(unsafe { llvm::LLVMBuildAdd(builder, a.raw(), b.raw(), name.as_ptr()) })
    }

    /// `mul a, b`.
    pub fn build_mul(&self, a: Value<'m>, b: Value<'m>, name: &CStr) -> Value<'m> {
        let builder = self.positioned_raw();
        // SAFETY: a positioned builder; the operands are live; the name is NUL-terminated.
        Self::wrap_built(unsafe { llvm::LLVMBuildMul(builder, a.raw(), b.raw(), name.as_ptr()) })
    }

    /// `and a, b`.
    pub fn build_and(&self, a: Value<'m>, b: Value<'m>, name: &CStr) -> Value<'m> {
        let builder = self.positioned_raw();
        // SAFETY: a positioned builder; the operands are live; the name is NUL-terminated.
        Self::wrap_built(unsafe { llvm::LLVMBuildAnd(builder, a.raw(), b.raw(), name.as_ptr()) })
    }

    /// `br i1 condition, label %on_true, label %on_false`.
    pub fn build_cond_br(
        &self,
        condition: Value<'m>,
        on_true: Block<'m>,
        on_false: Block<'m>,
    ) -> Instruction<'m> {
        let builder = self.positioned_raw();
        // SAFETY: a positioned builder; the condition and the blocks are live.
        let branch = unsafe {
            llvm::LLVMBuildCondBr(builder, condition.raw(), on_true.raw(), on_false.raw())
        };
        Instruction(Self::wrap_built(branch))
    }

    /// `switch value, label %default [cases]`.
    pub fn build_switch(
        &self,
        value: Value<'m>,
        default: Block<'m>,
        cases: &[(Value<'m>, Block<'m>)],
    ) -> Instruction<'m> {
        let builder = self.positioned_raw();
        // SAFETY: a positioned builder; the value, the blocks and the case constants are
        // live; the cases are added to the switch just built.
        let switch = unsafe {
            let switch =
                llvm::LLVMBuildSwitch(builder, value.raw(), default.raw(), cases.len() as u32);
            for (on, to) in cases {
                llvm::LLVMAddCase(switch, on.raw(), to.raw());
            }
            switch
        };
        Instruction(Self::wrap_built(switch))
    }

    /// `ret value`.
    pub fn build_ret(&self, value: Value<'m>) -> Instruction<'m> {
        let builder = self.positioned_raw();
        // SAFETY: a positioned builder; the value is live.
        Instruction(Self::wrap_built(unsafe {
            llvm::LLVMBuildRet(builder, value.raw())
        }))
    }
}

impl<'m> Instruction<'m> {
    /// An alloca's allocated type and alignment; `None` for another instruction.
    pub fn alloca_type(self) -> Option<(Type<'m>, u32)> {
        if !self.is_alloca() {
            return None;
        }
        // SAFETY: `self` is a live alloca (tested above).
        unsafe {
            Some((
                Type::wrap(llvm::LLVMGetAllocatedType(self.raw())),
                llvm::LLVMGetAlignment(self.raw()),
            ))
        }
    }

    /// The instruction as the end of its block; `None` for one that does not end a block.
    pub fn as_terminator(self) -> Option<Terminator<'m>> {
        // SAFETY: `self` is a live instruction.
        let is = unsafe { !llvm::LLVMIsATerminatorInst(self.raw()).is_null() };
        is.then_some(Terminator(self))
    }
}

/// The operation of an `atomicrmw` the CPU stage makes plain.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AtomicRmwOp {
    /// `xchg`.
    Xchg,
    /// An integer or float operation: the opcode of its plain form.
    Binary(inkwell::values::InstructionOpcode),
    /// `nand`.
    Nand,
    /// `max`, `min`, `umax`, `umin`: the comparison that keeps the old value.
    Keep(inkwell::IntPredicate),
}

impl<'m> Instruction<'m> {
    /// An `atomicrmw`'s operation, where the stage has a plain form of it.
    pub fn atomic_rmw_op(self) -> Option<AtomicRmwOp> {
        use inkwell::IntPredicate as P;
        use inkwell::llvm_sys::LLVMAtomicRMWBinOp as B;
        use inkwell::values::InstructionOpcode as Op;
        // SAFETY: `self` is a live instruction, tested to be an `atomicrmw` before its
        // operation is read.
        let op = unsafe {
            if llvm::LLVMIsAAtomicRMWInst(self.raw()).is_null() {
                return None;
            }
            llvm::LLVMGetAtomicRMWBinOp(self.raw())
        };
        Some(match op {
            B::LLVMAtomicRMWBinOpXchg => AtomicRmwOp::Xchg,
            B::LLVMAtomicRMWBinOpAdd => AtomicRmwOp::Binary(Op::Add),
            B::LLVMAtomicRMWBinOpSub => AtomicRmwOp::Binary(Op::Sub),
            B::LLVMAtomicRMWBinOpAnd => AtomicRmwOp::Binary(Op::And),
            B::LLVMAtomicRMWBinOpOr => AtomicRmwOp::Binary(Op::Or),
            B::LLVMAtomicRMWBinOpXor => AtomicRmwOp::Binary(Op::Xor),
            B::LLVMAtomicRMWBinOpFAdd => AtomicRmwOp::Binary(Op::FAdd),
            B::LLVMAtomicRMWBinOpFSub => AtomicRmwOp::Binary(Op::FSub),
            B::LLVMAtomicRMWBinOpNand => AtomicRmwOp::Nand,
            B::LLVMAtomicRMWBinOpMax => AtomicRmwOp::Keep(P::SGE),
            B::LLVMAtomicRMWBinOpMin => AtomicRmwOp::Keep(P::SLE),
            B::LLVMAtomicRMWBinOpUMax => AtomicRmwOp::Keep(P::UGE),
            B::LLVMAtomicRMWBinOpUMin => AtomicRmwOp::Keep(P::ULE),
            _ => return None,
        })
    }

    /// Whether the instruction is a `cmpxchg`.
    pub fn is_cmpxchg(self) -> bool {
        // SAFETY: `self` is a live instruction.
        unsafe { !llvm::LLVMIsAAtomicCmpXchgInst(self.raw()).is_null() }
    }

    /// Makes an atomic load or store plain.
    pub fn make_not_atomic(self) {
        if self.is_load() || self.is_store() {
            // SAFETY: `self` is a live load or store, which `LLVMSetOrdering` takes.
            unsafe {
                llvm::LLVMSetOrdering(
                    self.raw(),
                    inkwell::llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingNotAtomic,
                )
            }
        }
    }

    /// Whether the instruction is an atomic memory access (not a plain load or store).
    pub fn is_atomic(self) -> bool {
        self.atomic_ordering()
            .is_some_and(|o| o != inkwell::AtomicOrdering::NotAtomic)
    }
}

impl<'m> Builder<'m> {
    /// `opcode a, b`, a binary operation.
    pub fn build_binop(
        &self,
        opcode: inkwell::values::InstructionOpcode,
        a: Value<'m>,
        b: Value<'m>,
        name: &CStr,
    ) -> Value<'m> {
        let builder = self.positioned_raw();
        // SAFETY: a positioned builder; the operands are live; `LLVMBuildBinOp` takes any
        // binary opcode; the name is NUL-terminated.
        Self::wrap_built(unsafe {
            llvm::LLVMBuildBinOp(builder, opcode.into(), a.raw(), b.raw(), name.as_ptr())
        })
    }

    /// `insertvalue aggregate, value, index`.
    pub fn build_insert_value(
        &self,
        aggregate: Value<'m>,
        value: Value<'m>,
        index: u32,
        name: &CStr,
    ) -> Value<'m> {
        let builder = self.positioned_raw();
        // SAFETY: a positioned builder; the aggregate and the value are live; the name is
        // NUL-terminated.
        Self::wrap_built(unsafe {
            llvm::LLVMBuildInsertValue(builder, aggregate.raw(), value.raw(), index, name.as_ptr())
        })
    }
}

impl Value<'_> {
    /// Whether the value is a basic block (a branch's operand).
    pub fn is_basic_block(self) -> bool {
        // SAFETY: `self` is a live value.
        unsafe { llvm::LLVMValueIsBasicBlock(self.raw()) != 0 }
    }
}

impl<'m> Function<'m> {
    /// Adds the enum attribute `name` to the function at `index`.
    pub fn add_enum_attribute(self, index: AttributeIndex, name: &str) {
        let kind = enum_attribute_kind(name);
        // SAFETY: `self` is a live function; the attribute is made in its context.
        unsafe {
            let context = llvm::LLVMGetTypeContext(llvm::LLVMTypeOf(self.raw()));
            let attribute = llvm::LLVMCreateEnumAttribute(context, kind, 0);
            llvm::LLVMAddAttributeAtIndex(self.raw(), index.raw(), attribute);
        }
    }

    /// Removes the enum attribute `name` from the function at `index`, where it has it.
    pub fn remove_enum_attribute(self, index: AttributeIndex, name: &str) {
        let kind = enum_attribute_kind(name);
        // SAFETY: `self` is a live function; removing an absent attribute does nothing.
        unsafe { llvm::LLVMRemoveEnumAttributeAtIndex(self.raw(), index.raw(), kind) }
    }

    /// Gives the function `linkage`.
    pub fn set_linkage(self, linkage: inkwell::module::Linkage) {
        // SAFETY: `self` is a live function, a global value.
        unsafe { llvm::LLVMSetLinkage(self.raw(), linkage.into()) }
    }
}

impl DebugLocation<'_> {
    /// The location's file name and line.
    pub fn file_and_line(self) -> (String, u32) {
        // SAFETY: `self` is a live `DILocation`; its scope is a live scope whose file is one
        // or null; LLVM gives the name's length.
        unsafe {
            let line = debuginfo::LLVMDILocationGetLine(self.raw());
            let scope = debuginfo::LLVMDILocationGetScope(self.raw());
            let file = debuginfo::LLVMDIScopeGetFile(scope);
            if file.is_null() {
                return (String::new(), line);
            }
            let mut len = 0;
            let name = debuginfo::LLVMDIFileGetFilename(file, &mut len);
            let name = if name.is_null() {
                String::new()
            } else {
                String::from_utf8_lossy(std::slice::from_raw_parts(name.cast::<u8>(), len as usize))
                    .into_owned()
            };
            (name, line)
        }
    }
}

impl super::GepNoWrapFlags {
    /// No flags: a plain `getelementptr`.
    pub const NONE: Self = super::GepNoWrapFlags(0);
}
