//! Null tests of `Option<&T>` values whose `Some` cannot be null. offload-rt's accessors
//! (`DisjointSlice::for_thread_x`, `&[T]::get`, …) return options of references, whose `None`
//! is the null pointer, and after inlining a kernel tests a value such as
//! `phi [select(i < len, element, null)], [null]` for null, `element` being an address in a
//! buffer the launch passed. LLVM folds such a test only when the phi has no other use, and
//! here the element's load and store use it too, so every accessor left a select of two
//! pointers and a 64-bit comparison with null in the kernel, on every GPU. This stage replaces
//! each such test by the condition the value encodes (`i < len` and the phi's edge), and the
//! accesses that only the test's non-null edge reaches use the element's address itself (a
//! phi of the addresses, poison where the value was null), after which the pointer select,
//! the merge with null and the comparison are dead.
//!
//! A pointer is known non-null when it is an in-bounds GEP of a known non-null pointer in the
//! generic or global address space (where LLVM too knows that such a GEP cannot reach null),
//! the cast between those two of a known non-null pointer (the AMDGPU entry's slices, whose
//! `None` is the generic null cast to global, a constant LLVM does not fold), a pointer
//! the entry block assumes non-null (offload-rt's slice parameters: `assert_unchecked`), an
//! `inttoptr` of an integer the entry block assumes non-zero, a `nonnull` argument or a load
//! marked `!nonnull`. The stage runs after optimization and before the address spaces are
//! inferred.

use std::collections::{HashMap, HashSet};

use inkwell::llvm_sys::core as llvm;
use inkwell::llvm_sys::prelude::{LLVMBasicBlockRef, LLVMBuilderRef, LLVMValueRef};
use inkwell::llvm_sys::{LLVMIntPredicate, LLVMOpcode};
use inkwell::module::Module;
use inkwell::values::AsValueRef;

use super::ir::bridge::compares_with_null_raw as compares_with_null;
use super::{callee_name, users};

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
            // Built the first time a test's condition is not a constant: most functions
            // have no such test.
            let mut predecessors = None;
            for test in null_tests(function) {
                let (a, b) = (llvm::LLVMGetOperand(test, 0), llvm::LLVMGetOperand(test, 1));
                let pointer = if compares_with_null(test, a) { a } else { b };
                // A constant's test (a global's, say) is LLVM's to fold, not this stage's.
                if !llvm::LLVMIsAConstant(pointer).is_null() {
                    continue;
                }
                let Some(nonnull) = facts.condition(builder, pointer, 0) else {
                    continue;
                };
                let i1 = llvm::LLVMTypeOf(test);
                let is_ne = llvm::LLVMGetICmpPredicate(test) == LLVMIntPredicate::LLVMIntNE;
                if let NonNull::When(_) = nonnull {
                    let predecessors =
                        predecessors.get_or_insert_with(|| single_predecessors(function));
                    facts.use_element_past_test(builder, test, pointer, is_ne, predecessors);
                }
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

/// The blocks that branches enter only when `pointer` is not null, found from `value`, an
/// `i1` that is `when` only where `pointer` is not null: through logical ands (true only when
/// each operand is), logical ors (false only when each is), negations, and to the branches on
/// them, whose successor counts where it has the branch's block as its one predecessor.
///
/// # Safety
/// `value` is a live `i1` value of a function whose single predecessors are `predecessors`.
unsafe fn nonnull_edges(
    value: LLVMValueRef,
    when: bool,
    depth: u32,
    predecessors: &HashMap<LLVMBasicBlockRef, Option<LLVMBasicBlockRef>>,
    edges: &mut Vec<LLVMBasicBlockRef>,
) {
    if depth > MAX_DEPTH {
        return;
    }
    // SAFETY: this function's contract; the users and operands of live values are live.
    unsafe {
        let is_const = |v: LLVMValueRef, bit: u64| {
            !llvm::LLVMIsAConstantInt(v).is_null() && llvm::LLVMConstIntGetZExtValue(v) == bit
        };
        for user in users(value) {
            if !llvm::LLVMIsABranchInst(user).is_null() {
                if llvm::LLVMIsConditional(user) == 0 {
                    continue;
                }
                let block = llvm::LLVMGetInstructionParent(user);
                let successor = llvm::LLVMGetSuccessor(user, if when { 0 } else { 1 });
                if predecessors.get(&successor).copied().flatten() == Some(block) {
                    edges.push(successor);
                }
                continue;
            }
            let (and, or) = if !llvm::LLVMIsASelectInst(user).is_null() {
                let (c, t, f) = (
                    llvm::LLVMGetOperand(user, 0),
                    llvm::LLVMGetOperand(user, 1),
                    llvm::LLVMGetOperand(user, 2),
                );
                (
                    is_const(f, 0) && (c == value || t == value),
                    is_const(t, 1) && (c == value || f == value),
                )
            } else if !llvm::LLVMIsABinaryOperator(user).is_null() {
                let opcode = llvm::LLVMGetInstructionOpcode(user);
                if opcode == LLVMOpcode::LLVMXor
                    && (is_const(llvm::LLVMGetOperand(user, 0), 1)
                        || is_const(llvm::LLVMGetOperand(user, 1), 1))
                {
                    nonnull_edges(user, !when, depth + 1, predecessors, edges);
                    continue;
                }
                (opcode == LLVMOpcode::LLVMAnd, opcode == LLVMOpcode::LLVMOr)
            } else {
                (false, false)
            };
            if (and && when) || (or && !when) {
                nonnull_edges(user, when, depth + 1, predecessors, edges);
            }
        }
    }
}

/// Each block's predecessor where it has exactly one (through one edge), else `None`.
///
/// # Safety
/// `function` is a live function with a body.
unsafe fn single_predecessors(
    function: LLVMValueRef,
) -> HashMap<LLVMBasicBlockRef, Option<LLVMBasicBlockRef>> {
    let mut predecessors = HashMap::new();
    // SAFETY: this function's contract; a block's terminator and successors are live.
    unsafe {
        let mut block = llvm::LLVMGetFirstBasicBlock(function);
        while !block.is_null() {
            let terminator = llvm::LLVMGetBasicBlockTerminator(block);
            if !terminator.is_null() {
                for i in 0..llvm::LLVMGetNumSuccessors(terminator) {
                    predecessors
                        .entry(llvm::LLVMGetSuccessor(terminator, i))
                        .and_modify(|single| *single = None)
                        .or_insert(Some(block));
                }
            }
            block = llvm::LLVMGetNextBasicBlock(block);
        }
    }
    predecessors
}

/// Whether every path to `block` goes through `edge_target` (a block with one predecessor):
/// `block` is `edge_target` or below it through blocks of one predecessor each.
fn only_reached_through(
    mut block: LLVMBasicBlockRef,
    edge_target: LLVMBasicBlockRef,
    predecessors: &HashMap<LLVMBasicBlockRef, Option<LLVMBasicBlockRef>>,
) -> bool {
    // A chain of single predecessors that never meets `edge_target` may be a cycle of
    // unreachable blocks; the bound ends it.
    for _ in 0..=predecessors.len() {
        if block == edge_target {
            return true;
        }
        match predecessors.get(&block).copied().flatten() {
            Some(predecessor) => block = predecessor,
            None => return false,
        }
    }
    false
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
    /// The values the phis and selects already seen have where they are not null.
    elements: HashMap<LLVMValueRef, Option<LLVMValueRef>>,
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
            elements: HashMap::new(),
        }
    }

    /// Where the branch on `test` leads only when `pointer` is not null, makes the uses of
    /// `pointer` below that edge use [`Facts::element`] instead: the address itself, not the
    /// select or phi that merges it with null. Without it the merge stays for the loads and
    /// stores (a select of two registers per accessor), though the test is gone.
    ///
    /// # Safety
    /// As [`Facts::condition`]; `test` is `pointer`'s null test, `predecessors` its function's.
    unsafe fn use_element_past_test(
        &mut self,
        builder: LLVMBuilderRef,
        test: LLVMValueRef,
        pointer: LLVMValueRef,
        is_ne: bool,
        predecessors: &HashMap<LLVMBasicBlockRef, Option<LLVMBasicBlockRef>>,
    ) {
        // SAFETY: this function's contract; users and successors of live values are live.
        unsafe {
            let mut guarded = Vec::new();
            nonnull_edges(test, is_ne, 0, predecessors, &mut guarded);
            if guarded.is_empty() {
                return;
            }
            for user in users(pointer) {
                // A phi's use is at the end of its incoming block, not where the phi is.
                if user == test
                    || llvm::LLVMIsAInstruction(user).is_null()
                    || !llvm::LLVMIsAPHINode(user).is_null()
                {
                    continue;
                }
                let block = llvm::LLVMGetInstructionParent(user);
                if !guarded
                    .iter()
                    .any(|&edge| only_reached_through(block, edge, predecessors))
                {
                    continue;
                }
                let Some(element) = self.element(builder, pointer, 0) else {
                    return;
                };
                for i in 0..llvm::LLVMGetNumOperands(user) as u32 {
                    if llvm::LLVMGetOperand(user, i) == pointer {
                        llvm::LLVMSetOperand(user, i, element);
                    }
                }
            }
        }
    }

    /// The value `pointer` has wherever it is not null: a select's non-null arm, a phi of
    /// its incoming values' (poison on the edges where it is null); `None` when it cannot be
    /// told. It is defined where `pointer` is: a select's operands are, and a phi is rebuilt
    /// in the block of the phi.
    ///
    /// # Safety
    /// As [`Facts::condition`].
    unsafe fn element(
        &mut self,
        builder: LLVMBuilderRef,
        pointer: LLVMValueRef,
        depth: u32,
    ) -> Option<LLVMValueRef> {
        // SAFETY: this function's contract; operands and incoming values of live
        // instructions are live.
        unsafe {
            if is_null_constant(pointer) || depth >= MAX_DEPTH {
                return None;
            }
            if self.is_nonnull(pointer, 0) {
                return Some(pointer);
            }
            if let Some(known) = self.elements.get(&pointer) {
                return *known;
            }
            let found = if !llvm::LLVMIsASelectInst(pointer).is_null() {
                let (on_true, on_false) = (
                    llvm::LLVMGetOperand(pointer, 1),
                    llvm::LLVMGetOperand(pointer, 2),
                );
                if is_null_constant(on_false) {
                    self.element(builder, on_true, depth + 1)
                } else if is_null_constant(on_true) {
                    self.element(builder, on_false, depth + 1)
                } else {
                    None
                }
            } else if !llvm::LLVMIsAPHINode(pointer).is_null() {
                self.phi_element(builder, pointer, depth)
            } else {
                None
            };
            self.elements.insert(pointer, found);
            found
        }
    }

    /// [`Facts::element`] of a phi.
    ///
    /// # Safety
    /// As [`Facts::condition`], `phi` a phi node.
    unsafe fn phi_element(
        &mut self,
        builder: LLVMBuilderRef,
        phi: LLVMValueRef,
        depth: u32,
    ) -> Option<LLVMValueRef> {
        // SAFETY: this function's contract.
        unsafe {
            let ty = llvm::LLVMTypeOf(phi);
            let count = llvm::LLVMCountIncoming(phi);
            let mut incoming = Vec::with_capacity(count as usize);
            for i in 0..count {
                let value = llvm::LLVMGetIncomingValue(phi, i);
                let element = if is_null_constant(value) {
                    llvm::LLVMGetPoison(ty)
                } else {
                    self.element(builder, value, depth + 1)?
                };
                incoming.push((element, llvm::LLVMGetIncomingBlock(phi, i)));
            }
            let block = llvm::LLVMGetInstructionParent(phi);
            llvm::LLVMPositionBuilder(builder, block, llvm::LLVMGetFirstInstruction(block));
            let new = llvm::LLVMBuildPhi(builder, ty, c"element".as_ptr());
            for (mut value, mut from) in incoming {
                llvm::LLVMAddIncoming(new, &mut value, &mut from, 1);
            }
            Some(new)
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
                return is_generic_or_global(pointer)
                    && llvm::LLVMIsInBounds(pointer) != 0
                    && self.is_nonnull(llvm::LLVMGetOperand(pointer, 0), depth + 1);
            }
            if !llvm::LLVMIsAAddrSpaceCastInst(pointer).is_null() {
                let from = llvm::LLVMGetOperand(pointer, 0);
                return is_generic_or_global(pointer)
                    && is_generic_or_global(from)
                    && self.is_nonnull(from, depth + 1);
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
        if callee_name(inst) != b"llvm.assume" {
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

/// Whether `value` is a constant null pointer or zero, or the generic null cast to the
/// global address space (the AMDGPU entry's pointers are global, and LLVM keeps that cast as a
/// constant expression, not knowing it is the global null).
///
/// # Safety
/// `value` is a live value.
unsafe fn is_null_constant(value: LLVMValueRef) -> bool {
    // SAFETY: this function's contract; a constant expression's operands are live.
    unsafe {
        if llvm::LLVMIsAConstant(value).is_null() {
            return false;
        }
        if llvm::LLVMIsNull(value) != 0 {
            return true;
        }
        !llvm::LLVMIsAConstantExpr(value).is_null()
            && llvm::LLVMGetConstOpcode(value) == LLVMOpcode::LLVMAddrSpaceCast
            && is_generic_or_global(value)
            && llvm::LLVMIsNull(llvm::LLVMGetOperand(value, 0)) != 0
    }
}

/// Whether `pointer` is in the generic or the global address space: on both GPU targets the
/// two have the same null, 0, which no in-bounds address is, and a cast between them keeps
/// the address.
///
/// # Safety
/// `pointer` is a live pointer value.
unsafe fn is_generic_or_global(pointer: LLVMValueRef) -> bool {
    // SAFETY: this function's contract.
    let space = unsafe { llvm::LLVMGetPointerAddressSpace(llvm::LLVMTypeOf(pointer)) };
    matches!(space, 0 | 1)
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
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;
    use inkwell::module::Module;

    use super::super::tests::{bitcode, link};
    use super::fold_null_tests;
    use crate::device_link::DeviceInput;

    fn parse<'ctx>(context: &'ctx Context, ir: &str) -> Module<'ctx> {
        let buffer = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "test");
        context.create_module_from_ir(buffer).unwrap()
    }

    /// A global's test against the null cast to the global address space is a constant
    /// test, LLVM's to fold: taking the cast null for the tested pointer once turned a panic
    /// path's `assume(@message != null)` into `assume(false)`, and the panic vanished.
    #[test]
    fn a_globals_null_test_is_left_alone() {
        let context = Context::create();
        let module = parse(
            &context,
            "@message = addrspace(1) constant [4 x i8] c\"boom\"\n\
             declare void @llvm.assume(i1)\n\
             define void @k() {\n\
             \x20 %nn = icmp ne ptr addrspace(1) @message, addrspacecast (ptr null to ptr addrspace(1))\n\
             \x20 call void @llvm.assume(i1 %nn)\n\
             \x20 ret void\n\
             }\n",
        );
        assert_eq!(fold_null_tests(&module), 0);
        assert!(
            module
                .print_to_string()
                .to_string()
                .contains("@llvm.assume(i1 %nn)")
        );
    }

    /// The AMDGPU entry's slices are global pointers, and an accessor's `None` there is the
    /// generic null cast to the global address space: the test still becomes the index check.
    #[test]
    fn a_global_accessors_test_against_the_cast_null_becomes_its_condition() {
        let context = Context::create();
        let module = parse(
            &context,
            "define void @k(ptr addrspace(1) %slot, i64 %i, i64 %len) {\n\
             \x20 %base = load ptr, ptr addrspace(1) %slot, align 8, !nonnull !0\n\
             \x20 %global = addrspacecast ptr %base to ptr addrspace(1)\n\
             \x20 %in = icmp ult i64 %i, %len\n\
             \x20 %e = getelementptr inbounds float, ptr addrspace(1) %global, i64 %i\n\
             \x20 %some = select i1 %in, ptr addrspace(1) %e, ptr addrspace(1) addrspacecast (ptr null to ptr addrspace(1))\n\
             \x20 %none = icmp eq ptr addrspace(1) %some, addrspacecast (ptr null to ptr addrspace(1))\n\
             \x20 br i1 %none, label %done, label %body\n\
             body:\n\
             \x20 store float 1.0, ptr addrspace(1) %some, align 4\n\
             \x20 br label %done\n\
             done:\n\
             \x20 ret void\n\
             }\n\
             !0 = !{}\n",
        );
        assert_eq!(fold_null_tests(&module), 1);
        let ir = module.print_to_string().to_string();
        assert!(!ir.contains("%none = icmp"), "{ir}");
        assert!(ir.contains("xor i1 %in, true"), "{ir}");
    }

    /// Past the folded test, and past a second check joined to it by a logical or, the load
    /// and the store use the element's address itself: the phi of the select and null, and
    /// the select, are left to LLVM to delete.
    #[test]
    fn the_accesses_past_a_folded_test_use_the_element() {
        let context = Context::create();
        let module = parse(
            &context,
            "define void @k(ptr nonnull %y, i64 %i, i64 %len, i1 %first_row, i64 %xlen) {\n\
             entry:\n\
             \x20 br i1 %first_row, label %own, label %join\n\
             own:\n\
             \x20 %in = icmp ult i64 %i, %len\n\
             \x20 %e = getelementptr inbounds float, ptr %y, i64 %i\n\
             \x20 %some = select i1 %in, ptr %e, ptr null\n\
             \x20 br label %join\n\
             join:\n\
             \x20 %p = phi ptr [ %some, %own ], [ null, %entry ]\n\
             \x20 %none = icmp eq ptr %p, null\n\
             \x20 %past = icmp uge i64 %i, %xlen\n\
             \x20 %skip = select i1 %none, i1 true, i1 %past\n\
             \x20 br i1 %skip, label %done, label %body\n\
             body:\n\
             \x20 %v = load float, ptr %p, align 4\n\
             \x20 store float %v, ptr %p, align 4\n\
             \x20 br label %done\n\
             done:\n\
             \x20 ret void\n\
             }\n",
        );
        assert_eq!(fold_null_tests(&module), 1);
        let ir = module.print_to_string().to_string();
        assert!(
            ir.contains("%element = phi ptr [ %e, %own ], [ poison, %entry ]"),
            "{ir}"
        );
        assert!(ir.contains("load float, ptr %element"), "{ir}");
        assert!(ir.contains("store float %v, ptr %element"), "{ir}");
    }

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
