//! Null tests of `Option<&T>` values whose `Some` cannot be null. offload-rt's accessors
//! (`DisjointSlice::for_thread_x`, `&[T]::get`, …) return options of references, whose `None`
//! is the null pointer, and after inlining a kernel tests a value such as
//! `phi [select(i < len, element, null)], [null]` for null, `element` being an address in a
//! buffer the launch passed. LLVM folds such a test only when the phi has no other use, and
//! here the element's load and store use it too, so every accessor left a select of two
//! pointers and a 64-bit comparison with null in the kernel, on every GPU. This stage replaces
//! each such test by the condition the value encodes (`i < len` and the phi's edge), after
//! which the pointer select and the comparison are dead.
//!
//! A pointer is known non-null when it is an in-bounds GEP of a known non-null pointer in the
//! generic address space (where LLVM too knows that such a GEP cannot reach null), a pointer
//! the entry block assumes non-null (offload-rt's slice parameters: `assert_unchecked`), an
//! `inttoptr` of an integer the entry block assumes non-zero, a `nonnull` argument or a load
//! marked `!nonnull`. The stage runs after optimization and before the address spaces are
//! inferred.

use std::collections::{HashMap, HashSet};

use inkwell::llvm_sys::LLVMIntPredicate;
use inkwell::llvm_sys::core as llvm;
use inkwell::llvm_sys::prelude::{LLVMBuilderRef, LLVMValueRef};
use inkwell::module::Module;
use inkwell::values::AsValueRef;

use super::shared_memory::compares_with_null;

/// How deep a select and phi tree is followed.
const MAX_DEPTH: u32 = 4;

/// What a pointer's non-nullness is: a constant, or an `i1` value in the IR.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum NonNull {
    Always,
    Never,
    When(LLVMValueRef),
}

/// Replaces the null tests of pointers whose non-nullness is a known condition; returns how
/// many were replaced.
pub(super) fn fold_null_tests(module: &Module<'_>) -> usize {
    let mut folded = 0;
    // SAFETY: every value below is a live value of `module`; an instruction is erased only
    // after its uses are replaced, and none is visited after.
    unsafe {
        let context = llvm::LLVMGetModuleContext(module.as_mut_ptr());
        let builder = llvm::LLVMCreateBuilderInContext(context);
        for function in module.get_functions() {
            let function = function.as_value_ref();
            if llvm::LLVMCountBasicBlocks(function) == 0 {
                continue;
            }
            let mut facts = Facts::of(function);
            for test in null_tests(function) {
                let (a, b) = (llvm::LLVMGetOperand(test, 0), llvm::LLVMGetOperand(test, 1));
                let pointer = if llvm::LLVMIsAConstant(a).is_null() {
                    a
                } else {
                    b
                };
                if llvm::LLVMIsAPHINode(pointer).is_null()
                    && llvm::LLVMIsASelectInst(pointer).is_null()
                {
                    continue;
                }
                let Some(nonnull) = facts.condition(builder, pointer, 0) else {
                    continue;
                };
                let i1 = llvm::LLVMTypeOf(test);
                let is_ne = llvm::LLVMGetICmpPredicate(test) == LLVMIntPredicate::LLVMIntNE;
                let replacement = match nonnull {
                    NonNull::Always => llvm::LLVMConstInt(i1, u64::from(is_ne), 0),
                    NonNull::Never => llvm::LLVMConstInt(i1, u64::from(!is_ne), 0),
                    NonNull::When(condition) if is_ne => condition,
                    NonNull::When(condition) => {
                        llvm::LLVMPositionBuilderBefore(builder, test);
                        llvm::LLVMBuildNot(builder, condition, c"is_null".as_ptr())
                    }
                };
                llvm::LLVMReplaceAllUsesWith(test, replacement);
                llvm::LLVMInstructionEraseFromParent(test);
                folded += 1;
            }
        }
        llvm::LLVMDisposeBuilder(builder);
    }
    folded
}

/// The `icmp eq/ne ptr %p, null` instructions of `function`.
///
/// # Safety
/// `function` is a live function with a body.
unsafe fn null_tests(function: LLVMValueRef) -> Vec<LLVMValueRef> {
    let mut tests = Vec::new();
    // SAFETY: this function's contract; the blocks and instructions of a live function are
    // live.
    unsafe {
        let mut block = llvm::LLVMGetFirstBasicBlock(function);
        while !block.is_null() {
            let mut inst = llvm::LLVMGetFirstInstruction(block);
            while !inst.is_null() {
                if !llvm::LLVMIsAICmpInst(inst).is_null() {
                    let a = llvm::LLVMGetOperand(inst, 0);
                    let pointer = llvm::LLVMGetTypeKind(llvm::LLVMTypeOf(a))
                        == inkwell::llvm_sys::LLVMTypeKind::LLVMPointerTypeKind;
                    if pointer
                        && (compares_with_null(inst, a)
                            || compares_with_null(inst, llvm::LLVMGetOperand(inst, 1)))
                    {
                        tests.push(inst);
                    }
                }
                inst = llvm::LLVMGetNextInstruction(inst);
            }
            block = llvm::LLVMGetNextBasicBlock(block);
        }
    }
    tests
}

/// What a function's entry block assumes, and the conditions already built.
struct Facts {
    /// Pointers and integers the entry block assumes non-null and non-zero.
    assumed: HashSet<LLVMValueRef>,
    /// Conditions of the phis and selects already seen (`None`: none can be given).
    known: HashMap<LLVMValueRef, Option<NonNull>>,
}

impl Facts {
    /// # Safety
    /// `function` is a live function with a body.
    unsafe fn of(function: LLVMValueRef) -> Self {
        let mut assumed = HashSet::new();
        // SAFETY: this function's contract.
        unsafe {
            let entry = llvm::LLVMGetEntryBasicBlock(function);
            let mut inst = llvm::LLVMGetFirstInstruction(entry);
            while !inst.is_null() {
                if let Some(value) = assumed_nonzero(inst) {
                    assumed.insert(value);
                }
                inst = llvm::LLVMGetNextInstruction(inst);
            }
        }
        Facts {
            assumed,
            known: HashMap::new(),
        }
    }

    /// Whether `pointer` is non-null, as a constant or a condition built in the IR; `None`
    /// when it cannot be told.
    ///
    /// # Safety
    /// `pointer` is a live pointer value of a function with a body; `builder` is live.
    unsafe fn condition(
        &mut self,
        builder: LLVMBuilderRef,
        pointer: LLVMValueRef,
        depth: u32,
    ) -> Option<NonNull> {
        // SAFETY: this function's contract; operands and incoming values of live
        // instructions are live.
        unsafe {
            if is_null_constant(pointer) {
                return Some(NonNull::Never);
            }
            if self.is_nonnull(pointer, 0) {
                return Some(NonNull::Always);
            }
            if depth >= MAX_DEPTH {
                return None;
            }
            if let Some(known) = self.known.get(&pointer) {
                return *known;
            }
            let found = if !llvm::LLVMIsASelectInst(pointer).is_null() {
                self.select_condition(builder, pointer, depth)
            } else if !llvm::LLVMIsAPHINode(pointer).is_null() {
                self.phi_condition(builder, pointer, depth)
            } else {
                None
            };
            self.known.insert(pointer, found);
            found
        }
    }

    /// `select c, a, b` where `a` and `b` are each null or known non-null.
    ///
    /// # Safety
    /// As [`Facts::condition`], `select` a select instruction.
    unsafe fn select_condition(
        &mut self,
        builder: LLVMBuilderRef,
        select: LLVMValueRef,
        depth: u32,
    ) -> Option<NonNull> {
        // SAFETY: this function's contract.
        unsafe {
            let condition = llvm::LLVMGetOperand(select, 0);
            let on_true = self.condition(builder, llvm::LLVMGetOperand(select, 1), depth + 1)?;
            let on_false = self.condition(builder, llvm::LLVMGetOperand(select, 2), depth + 1)?;
            Some(match (on_true, on_false) {
                (a, b) if a == b => a,
                (NonNull::Always, NonNull::Never) => NonNull::When(condition),
                (NonNull::Never, NonNull::Always) => {
                    llvm::LLVMPositionBuilderBefore(builder, select);
                    NonNull::When(llvm::LLVMBuildNot(builder, condition, c"".as_ptr()))
                }
                _ => return None,
            })
        }
    }

    /// A phi of pointers each null, known non-null, or a select of those: an `i1` phi of
    /// their conditions on the same edges.
    ///
    /// # Safety
    /// As [`Facts::condition`], `phi` a phi node.
    unsafe fn phi_condition(
        &mut self,
        builder: LLVMBuilderRef,
        phi: LLVMValueRef,
        depth: u32,
    ) -> Option<NonNull> {
        // SAFETY: this function's contract.
        unsafe {
            let count = llvm::LLVMCountIncoming(phi);
            let mut incoming = Vec::with_capacity(count as usize);
            for i in 0..count {
                let value = llvm::LLVMGetIncomingValue(phi, i);
                // A select's condition is an operand of the select, so it is available
                // wherever the select is: at the end of the incoming block.
                let condition = self.condition(builder, value, depth + 1)?;
                incoming.push((condition, llvm::LLVMGetIncomingBlock(phi, i)));
            }
            let first = incoming.first()?.0;
            if incoming.iter().all(|(c, _)| *c == first) {
                return Some(first);
            }
            let i1 = llvm::LLVMInt1TypeInContext(llvm::LLVMGetTypeContext(llvm::LLVMTypeOf(phi)));
            let block = llvm::LLVMGetInstructionParent(phi);
            llvm::LLVMPositionBuilder(builder, block, llvm::LLVMGetFirstInstruction(block));
            let new = llvm::LLVMBuildPhi(builder, i1, c"nonnull".as_ptr());
            for (condition, from) in incoming {
                let mut value = match condition {
                    NonNull::Always => llvm::LLVMConstInt(i1, 1, 0),
                    NonNull::Never => llvm::LLVMConstInt(i1, 0, 0),
                    NonNull::When(value) => value,
                };
                let mut from = from;
                llvm::LLVMAddIncoming(new, &mut value, &mut from, 1);
            }
            Some(NonNull::When(new))
        }
    }

    /// Whether `pointer` cannot be null (see the module's documentation).
    ///
    /// # Safety
    /// `pointer` is a live value.
    unsafe fn is_nonnull(&self, pointer: LLVMValueRef, depth: u32) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        if self.assumed.contains(&pointer) {
            return true;
        }
        // SAFETY: this function's contract; operands of live instructions are live.
        unsafe {
            if !llvm::LLVMIsAGetElementPtrInst(pointer).is_null() {
                let generic = llvm::LLVMGetPointerAddressSpace(llvm::LLVMTypeOf(pointer)) == 0;
                return generic
                    && llvm::LLVMIsInBounds(pointer) != 0
                    && self.is_nonnull(llvm::LLVMGetOperand(pointer, 0), depth + 1);
            }
            if !llvm::LLVMIsAIntToPtrInst(pointer).is_null() {
                return self.assumed.contains(&llvm::LLVMGetOperand(pointer, 0));
            }
            if !llvm::LLVMIsAArgument(pointer).is_null() {
                return has_nonnull_attribute(pointer);
            }
            if !llvm::LLVMIsALoadInst(pointer).is_null() {
                const NAME: &str = "nonnull";
                let kind = llvm::LLVMGetMDKindIDInContext(
                    llvm::LLVMGetTypeContext(llvm::LLVMTypeOf(pointer)),
                    NAME.as_ptr().cast(),
                    NAME.len() as u32,
                );
                return !llvm::LLVMGetMetadata(pointer, kind).is_null();
            }
        }
        false
    }
}

/// The value `inst` assumes non-null or non-zero: `call @llvm.assume(icmp ne %v, null/0)`.
///
/// # Safety
/// `inst` is a live instruction.
unsafe fn assumed_nonzero(inst: LLVMValueRef) -> Option<LLVMValueRef> {
    // SAFETY: this function's contract.
    unsafe {
        if llvm::LLVMIsACallInst(inst).is_null() {
            return None;
        }
        let callee = llvm::LLVMGetCalledValue(inst);
        let mut len = 0;
        let name = llvm::LLVMGetValueName2(callee, &mut len);
        if name.is_null() || std::slice::from_raw_parts(name.cast::<u8>(), len) != b"llvm.assume" {
            return None;
        }
        let test = llvm::LLVMGetOperand(inst, 0);
        if llvm::LLVMIsAICmpInst(test).is_null()
            || llvm::LLVMGetICmpPredicate(test) != LLVMIntPredicate::LLVMIntNE
        {
            return None;
        }
        let (a, b) = (llvm::LLVMGetOperand(test, 0), llvm::LLVMGetOperand(test, 1));
        match (is_null_constant(a), is_null_constant(b)) {
            (false, true) => Some(a),
            (true, false) => Some(b),
            _ => None,
        }
    }
}

/// Whether `value` is a constant null pointer or zero.
///
/// # Safety
/// `value` is a live value.
unsafe fn is_null_constant(value: LLVMValueRef) -> bool {
    // SAFETY: this function's contract.
    unsafe { !llvm::LLVMIsAConstant(value).is_null() && llvm::LLVMIsNull(value) != 0 }
}

/// Whether the argument `argument` is `nonnull`.
///
/// # Safety
/// `argument` is a live argument.
unsafe fn has_nonnull_attribute(argument: LLVMValueRef) -> bool {
    // SAFETY: this function's contract; an argument's parent function is live.
    unsafe {
        let function = llvm::LLVMGetParamParent(argument);
        let mut index = 0;
        let mut param = llvm::LLVMGetFirstParam(function);
        while !param.is_null() && param != argument {
            index += 1;
            param = llvm::LLVMGetNextParam(param);
        }
        const NAME: &str = "nonnull";
        let kind = llvm::LLVMGetEnumAttributeKindForName(NAME.as_ptr().cast(), NAME.len());
        // Attribute indices: 0 the return value, 1 + i the i-th parameter.
        !llvm::LLVMGetEnumAttributeAtIndex(function, index + 1, kind).is_null()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{bitcode, link};
    use crate::device_link::DeviceInput;

    /// `for_thread_x` inlined into a kernel: the element's address or null, merged by a phi
    /// with the null of the other rows, tested for null, then loaded from and stored to (the
    /// phi's other uses, which keep LLVM from folding the test). The test becomes the index
    /// check and the edge: no 64-bit comparison of a pointer is left in the PTX.
    #[test]
    fn an_accessors_null_test_becomes_its_condition() {
        let ir = "declare void @llvm.assume(i1)\n\
                  declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n\
                  declare i32 @llvm.nvvm.read.ptx.sreg.tid.y()\n\
                  declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()\n\
                  declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()\n\
                  define ptx_kernel void @bump([2 x i64] %y) {\n\
                  start:\n\
                  \x20 %ya = extractvalue [2 x i64] %y, 0\n\
                  \x20 %nz = icmp ne i64 %ya, 0\n\
                  \x20 call void @llvm.assume(i1 %nz)\n\
                  \x20 %row = call i32 @llvm.nvvm.read.ptx.sreg.tid.y()\n\
                  \x20 %first = icmp eq i32 %row, 0\n\
                  \x20 br i1 %first, label %own, label %join\n\
                  own:\n\
                  \x20 %yp = inttoptr i64 %ya to ptr\n\
                  \x20 %len = extractvalue [2 x i64] %y, 1\n\
                  \x20 %b = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()\n\
                  \x20 %n = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()\n\
                  \x20 %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n\
                  \x20 %bn = mul nuw i32 %b, %n\n\
                  \x20 %g = add nuw i32 %bn, %t\n\
                  \x20 %i = zext i32 %g to i64\n\
                  \x20 %in = icmp ult i64 %i, %len\n\
                  \x20 %e = getelementptr inbounds float, ptr %yp, i64 %i\n\
                  \x20 %some = select i1 %in, ptr %e, ptr null\n\
                  \x20 br label %join\n\
                  join:\n\
                  \x20 %p = phi ptr [ %some, %own ], [ null, %start ]\n\
                  \x20 %none = icmp eq ptr %p, null\n\
                  \x20 br i1 %none, label %done, label %body\n\
                  body:\n\
                  \x20 %v = load float, ptr %p, align 4\n\
                  \x20 %w = fadd float %v, 1.0\n\
                  \x20 store float %w, ptr %p, align 4\n\
                  \x20 br label %done\n\
                  done:\n\
                  \x20 ret void\n\
                  }\n";
        let ptx = link(&[DeviceInput::object("bump.bc", bitcode("bump", ir))]).unwrap();
        let pointer_tests: Vec<&str> = ptx
            .lines()
            .filter(|l| l.contains("setp.eq.b64") || l.contains("setp.ne.b64"))
            .collect();
        assert!(pointer_tests.is_empty(), "{pointer_tests:?}\n{ptx}");
        assert!(ptx.contains("st.global.b32"), "{ptx}");
    }
}
