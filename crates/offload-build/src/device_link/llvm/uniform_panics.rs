//! Panic branches that are scalar on AMD GPUs. A panic site is reached by the lanes that fail
//! its test, a divergent branch; where the sites of a kernel meet in its one report, the values
//! each site passes (its number, index, length) are then vector registers, which the kernel
//! pays for on every path (a bounds-checked gather: 11 VGPRs against C's 4 on gfx942). This
//! stage branches to a site when *any* active lane fails its test (a scalar branch on the
//! test's ballot) and passes the values as the first failing lane holds them (`readlane`),
//! with that lane, to offload-rt's [`THREAD_REPORTER`]: every value of the panic path is
//! scalar, and a wavefront that panics traps as a whole, as before.
//!
//! A site's block runs in every lane of the wavefront after the change, so only blocks whose
//! instructions before the report compute values (no memory access, call or division) are
//! entered this way; a function with another site is left as it was. A call the optimizer
//! merged from several sites (its values phis of theirs) is split into one per branch first.

use std::ffi::CStr;

use inkwell::context::AsContextRef;
use inkwell::llvm_sys::LLVMOpcode;
use inkwell::llvm_sys::core as llvm;
use inkwell::llvm_sys::prelude::{
    LLVMBasicBlockRef, LLVMBuilderRef, LLVMContextRef, LLVMModuleRef, LLVMTypeRef, LLVMValueRef,
};
use inkwell::module::Module;
use inkwell::values::AsValueRef;

use super::callee_name;
use super::condition_chains::is_plain_arithmetic;
use super::ir::bridge::site_calls;

/// offload-rt's `kernel::gpu_channel::__offload_gpu_panic_at_thread(thread, site, a, b, c,
/// values)`, on AMD GPUs only: `values` says how many of `a`, `b` and `c` the site passes.
pub(super) const THREAD_REPORTER: &str = offload_format::abi::GPU_PANIC_AT_THREAD;
/// offload-rt's `kernel::gpu_channel::__offload_gpu_thread_index()`, on AMD GPUs only.
pub(super) const THREAD_INDEX: &str = offload_format::abi::GPU_THREAD_INDEX;

/// With the panic strategy `trap` on AMD GPUs: makes each divergent conditional branch to a
/// block that only traps (`llvm.trap`, then `unreachable`) scalar, taken when any active lane
/// takes it (a branch on the condition's ballot), as [`make_uniform`] does for the branches to
/// a report. A trap ends the whole wavefront however many of its lanes reach it, so only the
/// branch changes: it needs no exec-mask bookkeeping around the trap, and where several
/// checks share one trap block ([`super::shared_traps`]) the structurizer joins no divergent
/// paths there. Returns how many branches changed.
pub(super) fn uniform_traps(module: &Module<'_>) -> usize {
    let mut branches = Vec::new();
    // SAFETY: the blocks, their instructions and the terminators using them are live values of
    // `module`; they are collected before any changes.
    unsafe {
        for function in module.get_functions() {
            for block in function.get_basic_block_iter() {
                let block = block.as_mut_ptr();
                if !only_traps(block) {
                    continue;
                }
                let as_value = llvm::LLVMBasicBlockAsValue(block);
                let mut use_ = llvm::LLVMGetFirstUse(as_value);
                while !use_.is_null() {
                    let branch = llvm::LLVMGetUser(use_);
                    use_ = llvm::LLVMGetNextUse(use_);
                    if llvm::LLVMIsABranchInst(branch).is_null()
                        || llvm::LLVMIsConditional(branch) == 0
                        || is_uniform(llvm::LLVMGetCondition(branch), 8)
                    {
                        continue;
                    }
                    let traps_when_true = llvm::LLVMGetSuccessor(branch, 0) == block;
                    if traps_when_true == (llvm::LLVMGetSuccessor(branch, 1) == block) {
                        continue;
                    }
                    if !branches.iter().any(|(b, _, _)| *b == branch) {
                        branches.push((branch, block, traps_when_true));
                    }
                }
            }
        }
    }
    if branches.is_empty() {
        return 0;
    }
    let context = module.get_context();
    // SAFETY: each branch is a live conditional branch of `module`, whose context the builder
    // is made in; its condition and successors are replaced with values built before it.
    unsafe {
        let ctx = context.as_ctx_ref();
        let i64_type = llvm::LLVMInt64TypeInContext(ctx);
        let ballot = Intrinsic::new(module.as_mut_ptr(), "llvm.amdgcn.ballot", &[i64_type]);
        let builder = llvm::LLVMCreateBuilderInContext(ctx);
        for &(branch, trap, traps_when_true) in &branches {
            branch_when_any(
                builder,
                &ballot,
                i64_type,
                branch,
                trap,
                traps_when_true,
                c"offload.any_traps",
            );
        }
        llvm::LLVMDisposeBuilder(builder);
    }
    branches.len()
}

/// Whether `block` holds a call of `llvm.trap` and `unreachable`, and nothing else.
///
/// # Safety
/// `block` is a live block.
unsafe fn only_traps(block: LLVMBasicBlockRef) -> bool {
    // SAFETY: the caller's contract; the callee is read from calls only.
    unsafe {
        let first = llvm::LLVMGetFirstInstruction(block);
        !first.is_null()
            && !llvm::LLVMIsACallInst(first).is_null()
            && callee_name(first) == b"llvm.trap"
            && {
                let next = llvm::LLVMGetNextInstruction(first);
                !next.is_null()
                    && llvm::LLVMGetInstructionOpcode(next) == LLVMOpcode::LLVMUnreachable
            }
    }
}

/// In each function whose every call of the `site_reporters` (each followed by `unreachable`)
/// is entered by a branch that is or can be made scalar ([`site_entry`]), makes those branches
/// scalar and each call one of `thread_reporter` with the values and the thread index
/// (`thread_index`, called where the function starts) of the first failing lane. A function
/// with a site that cannot be is left as it is: its sites meet at a divergent join, where
/// scalar values would not stay scalar. Returns how many sites changed.
pub(super) fn make_uniform(
    module: &Module<'_>,
    site_reporters: &[LLVMValueRef],
    thread_reporter: LLVMValueRef,
    thread_index: LLVMValueRef,
) -> usize {
    let mut functions = Vec::new();
    let context = module.get_context();
    // SAFETY: a builder of the module's context, disposed of below.
    let builder = unsafe { llvm::LLVMCreateBuilderInContext(context.as_ctx_ref()) };
    for function in module.get_functions() {
        let calls = site_calls(function, site_reporters)
            .into_iter()
            // SAFETY: each call is a live site call of `function`, in `module`'s context.
            .flat_map(|call| unsafe { split_merged(context.as_ctx_ref(), builder, call) })
            .collect::<Vec<_>>()
            .into_iter();
        // SAFETY: each call is a live instruction of its block.
        let branches: Option<Vec<(LLVMValueRef, Entry)>> = calls
            .map(|call| unsafe {
                Some((
                    call,
                    site_entry(llvm::LLVMGetInstructionParent(call), call)?,
                ))
            })
            .collect();
        if let Some(sites) = branches.filter(|b| !b.is_empty()) {
            functions.push((function, sites));
        }
    }
    if functions.is_empty() {
        // SAFETY: the builder made above, used no more.
        unsafe { llvm::LLVMDisposeBuilder(builder) };
        return 0;
    }
    // SAFETY: the functions, the calls, their blocks and the branches into them are live
    // values of `module`, whose context the builder is made in; each call is erased once its
    // replacement is built before it, and nothing else refers to it. An entry block ends in a
    // terminator, so the walk past its allocas stops.
    unsafe {
        let ctx = context.as_ctx_ref();
        let raw_module = module.as_mut_ptr();
        let i1 = llvm::LLVMInt1TypeInContext(ctx);
        let i32_type = llvm::LLVMInt32TypeInContext(ctx);
        let i64_type = llvm::LLVMInt64TypeInContext(ctx);
        let ballot = Intrinsic::new(raw_module, "llvm.amdgcn.ballot", &[i64_type]);
        let cttz = Intrinsic::new(raw_module, "llvm.cttz", &[i64_type]);
        let readlane = Intrinsic::new(raw_module, "llvm.amdgcn.readlane", &[i64_type]);
        let readlane_u32 = Intrinsic::new(raw_module, "llvm.amdgcn.readlane", &[i32_type]);
        // An empty instruction taking the thread's index, packed in one word, in a vector
        // register: the index is computed before it, where the function starts, and not sunk
        // to the panic sites, which would keep the three indices live until there.
        let mut pin_type = [i32_type];
        let pin_type = llvm::LLVMFunctionType(
            llvm::LLVMVoidTypeInContext(ctx),
            pin_type.as_mut_ptr(),
            1,
            0,
        );
        let pin = llvm::LLVMGetInlineAsm(
            pin_type,
            c"".as_ptr().cast_mut(),
            0,
            c"v".as_ptr().cast_mut(),
            1,
            1,
            0,
            inkwell::llvm_sys::LLVMInlineAsmDialect::LLVMInlineAsmDialectATT,
            0,
        );
        let mut changed = 0;
        for (function, sites) in functions {
            let entry = llvm::LLVMGetEntryBasicBlock(function.as_value_ref());
            let mut start = llvm::LLVMGetFirstInstruction(entry);
            while !llvm::LLVMIsAAllocaInst(start).is_null()
                || !llvm::LLVMIsAPHINode(start).is_null()
            {
                start = llvm::LLVMGetNextInstruction(start);
            }
            llvm::LLVMPositionBuilderBefore(builder, start);
            let index = llvm::LLVMBuildCall2(
                builder,
                llvm::LLVMGlobalGetValueType(thread_index),
                thread_index,
                std::ptr::null_mut(),
                0,
                c"offload.thread_index".as_ptr(),
            );
            let mut pinned = [index];
            llvm::LLVMBuildCall2(builder, pin_type, pin, pinned.as_mut_ptr(), 1, c"".as_ptr());
            // How many values the reports write: the most any site of the function passes, the
            // same for every site, so that their calls, once merged, still pass a constant.
            let values = sites
                .iter()
                .map(|&(call, _)| llvm::LLVMGetNumArgOperands(call).max(1) - 1)
                .max()
                .unwrap_or(0);
            for (call, entry) in sites {
                changed += 1;
                let block = llvm::LLVMGetInstructionParent(call);
                let mask = match entry {
                    Entry::Divergent {
                        branch,
                        panics_when_true,
                    } => {
                        let assumptions: Vec<LLVMValueRef> = std::iter::successors(
                            Some(llvm::LLVMGetFirstInstruction(block)),
                            |&i| Some(llvm::LLVMGetNextInstruction(i)),
                        )
                        .take_while(|&i| i != call)
                        .filter(|&i| is_assume(i))
                        .collect();
                        for assumption in assumptions {
                            llvm::LLVMInstructionEraseFromParent(assumption);
                        }
                        branch_when_any(
                            builder,
                            &ballot,
                            i64_type,
                            branch,
                            block,
                            panics_when_true,
                            c"offload.any_panics",
                        )
                    }
                    Entry::Uniform => {
                        llvm::LLVMPositionBuilderBefore(builder, call);
                        ballot.call(builder, &mut [llvm::LLVMConstInt(i1, 1, 0)])
                    }
                };
                llvm::LLVMPositionBuilderBefore(builder, call);
                let first = cttz.call(builder, &mut [mask, llvm::LLVMConstInt(i1, 1, 0)]);
                let lane = llvm::LLVMBuildTrunc(builder, first, i32_type, c"offload.lane".as_ptr());
                let mut args = vec![readlane_u32.call(builder, &mut [index, lane])];
                let count = llvm::LLVMGetNumArgOperands(call);
                for i in 0..4 {
                    let value = if i < count {
                        llvm::LLVMGetOperand(call, i)
                    } else {
                        llvm::LLVMConstInt(i64_type, 0, 0)
                    };
                    args.push(if is_uniform(value, 8) {
                        value
                    } else {
                        readlane.call(builder, &mut [value, lane])
                    });
                }
                args.push(llvm::LLVMConstInt(i32_type, u64::from(values), 0));
                let new = llvm::LLVMBuildCall2(
                    builder,
                    llvm::LLVMGlobalGetValueType(thread_reporter),
                    thread_reporter,
                    args.as_mut_ptr(),
                    args.len() as u32,
                    c"".as_ptr(),
                );
                let debuginfo = inkwell::llvm_sys::debuginfo::LLVMInstructionGetDebugLoc(call);
                inkwell::llvm_sys::debuginfo::LLVMInstructionSetDebugLoc(new, debuginfo);
                llvm::LLVMInstructionEraseFromParent(call);
            }
        }
        llvm::LLVMDisposeBuilder(builder);
        changed
    }
}

/// A site whose block several branches enter, its call's arguments phis of theirs (the
/// optimizer merged their calls): one block and call for each branch instead, so that each
/// branch can be made scalar (the site stage's `merge_site_calls` joins them again where
/// the values are scalar). Returns the calls that stand for `call`: itself where it is not
/// such a site.
///
/// # Safety
/// `call` is a live site call followed by `unreachable`; `context` is its module's and
/// `builder` one of that context.
unsafe fn split_merged(
    context: LLVMContextRef,
    builder: LLVMBuilderRef,
    call: LLVMValueRef,
) -> Vec<LLVMValueRef> {
    // SAFETY: the caller's contract; the uses of a block are the terminators branching to it,
    // and the block is erased only once nothing branches to it or uses its values.
    unsafe {
        let block = llvm::LLVMGetInstructionParent(call);
        let mut phis = Vec::new();
        let mut instruction = llvm::LLVMGetFirstInstruction(block);
        while instruction != call {
            let only_use = llvm::LLVMGetFirstUse(instruction);
            if llvm::LLVMIsAPHINode(instruction).is_null()
                || only_use.is_null()
                || !llvm::LLVMGetNextUse(only_use).is_null()
                || llvm::LLVMGetUser(only_use) != call
            {
                return vec![call];
            }
            phis.push(instruction);
            instruction = llvm::LLVMGetNextInstruction(instruction);
        }
        let mut branches = Vec::new();
        let mut use_ = llvm::LLVMGetFirstUse(llvm::LLVMBasicBlockAsValue(block));
        while !use_.is_null() {
            let branch = llvm::LLVMGetUser(use_);
            if llvm::LLVMIsABranchInst(branch).is_null() || branches.contains(&branch) {
                return vec![call];
            }
            branches.push(branch);
            use_ = llvm::LLVMGetNextUse(use_);
        }
        if branches.len() < 2 {
            return vec![call];
        }
        let callee = llvm::LLVMGetCalledValue(call);
        let function = llvm::LLVMGetBasicBlockParent(block);
        let debuginfo = inkwell::llvm_sys::debuginfo::LLVMInstructionGetDebugLoc(call);
        let mut calls = Vec::new();
        for branch in branches {
            let from = llvm::LLVMGetInstructionParent(branch);
            let site =
                llvm::LLVMAppendBasicBlockInContext(context, function, c"offload.site".as_ptr());
            llvm::LLVMPositionBuilderAtEnd(builder, site);
            let mut args: Vec<LLVMValueRef> = (0..llvm::LLVMGetNumArgOperands(call))
                .map(|i| {
                    let arg = llvm::LLVMGetOperand(call, i);
                    if !phis.contains(&arg) {
                        return arg;
                    }
                    (0..llvm::LLVMCountIncoming(arg))
                        .find(|&j| llvm::LLVMGetIncomingBlock(arg, j) == from)
                        .map_or_else(
                            || llvm::LLVMGetUndef(llvm::LLVMTypeOf(arg)),
                            |j| llvm::LLVMGetIncomingValue(arg, j),
                        )
                })
                .collect();
            let new = llvm::LLVMBuildCall2(
                builder,
                llvm::LLVMGlobalGetValueType(callee),
                callee,
                args.as_mut_ptr(),
                args.len() as u32,
                c"".as_ptr(),
            );
            inkwell::llvm_sys::debuginfo::LLVMInstructionSetDebugLoc(new, debuginfo);
            llvm::LLVMBuildUnreachable(builder);
            for i in 0..llvm::LLVMGetNumSuccessors(branch) {
                if llvm::LLVMGetSuccessor(branch, i) == block {
                    llvm::LLVMSetSuccessor(branch, i, site);
                }
            }
            calls.push(new);
        }
        llvm::LLVMInstructionEraseFromParent(call);
        for phi in phis {
            llvm::LLVMInstructionEraseFromParent(phi);
        }
        llvm::LLVMDeleteBasicBlock(block);
        calls
    }
}

/// How the lanes come to a panic site's block.
#[derive(Clone, Copy)]
enum Entry {
    /// By the conditional branch `branch` on a test that differs between lanes, to the site
    /// when the test is `panics_when_true`: it becomes a branch on whether any lane fails.
    Divergent {
        branch: LLVMValueRef,
        panics_when_true: bool,
    },
    /// By a branch on a value the same in every lane: every active lane comes already.
    Uniform,
}

/// How the lanes come to `block`, where it is entered by one conditional branch alone, and,
/// for a [`Entry::Divergent`] branch, every instruction of `block` before `call` may run in
/// lanes that do not panic.
///
/// # Safety
/// `block` is a live block and `call` one of its instructions.
unsafe fn site_entry(block: LLVMBasicBlockRef, call: LLVMValueRef) -> Option<Entry> {
    // SAFETY: the caller's contract; uses of a block are the terminators branching to it.
    unsafe {
        let as_value = llvm::LLVMBasicBlockAsValue(block);
        let first = llvm::LLVMGetFirstUse(as_value);
        if first.is_null() || !llvm::LLVMGetNextUse(first).is_null() {
            return None;
        }
        let branch = llvm::LLVMGetUser(first);
        if llvm::LLVMIsABranchInst(branch).is_null() || llvm::LLVMIsConditional(branch) == 0 {
            return None;
        }
        if is_uniform(llvm::LLVMGetCondition(branch), 8) {
            return Some(Entry::Uniform);
        }
        let mut instruction = llvm::LLVMGetFirstInstruction(block);
        while instruction != call {
            if !computes_only(llvm::LLVMGetInstructionOpcode(instruction))
                && !is_assume(instruction)
            {
                return None;
            }
            instruction = llvm::LLVMGetNextInstruction(instruction);
        }
        let (when_true, when_false) = (
            llvm::LLVMGetSuccessor(branch, 0),
            llvm::LLVMGetSuccessor(branch, 1),
        );
        match (when_true == block, when_false == block) {
            (true, false) => Some(Entry::Divergent {
                branch,
                panics_when_true: true,
            }),
            (false, true) => Some(Entry::Divergent {
                branch,
                panics_when_true: false,
            }),
            _ => None,
        }
    }
}

/// Whether `instruction` calls `llvm.assume`: what it states holds in the lanes that panic,
/// not in the others, so the stage drops it from a block every lane enters.
///
/// # Safety
/// `instruction` is a live instruction.
unsafe fn is_assume(instruction: LLVMValueRef) -> bool {
    // SAFETY: the caller's contract; the callee is read from calls only.
    unsafe {
        !llvm::LLVMIsACallInst(instruction).is_null()
            && callee_name(instruction).starts_with(b"llvm.assume")
    }
}

/// Whether `value` is the same in every lane, as far as `depth` levels of operands show: a
/// constant, a kernel's parameter, a value computed from such values, a load from such an
/// address, or the workgroup's place and sizes. A branch on such a value is scalar already; a
/// ballot would move its test into vector registers.
///
/// # Safety
/// `value` is a live value.
unsafe fn is_uniform(value: LLVMValueRef, depth: u32) -> bool {
    // SAFETY: the caller's contract; operands of live instructions are live values.
    unsafe {
        if llvm::LLVMIsConstant(value) != 0 || !llvm::LLVMIsAArgument(value).is_null() {
            return true;
        }
        if depth == 0 || llvm::LLVMIsAInstruction(value).is_null() {
            return false;
        }
        let opcode = llvm::LLVMGetInstructionOpcode(value);
        let operands = llvm::LLVMGetNumOperands(value).max(0) as u32;
        let all_uniform = |from: u32, to: u32| {
            (from..to).all(|i| is_uniform(llvm::LLVMGetOperand(value, i), depth - 1))
        };
        match opcode {
            LLVMOpcode::LLVMLoad => all_uniform(0, operands),
            LLVMOpcode::LLVMCall => {
                let name = callee_name(value);
                // A ballot is the wavefront's mask, whatever its lanes' operands.
                name.starts_with(b"llvm.amdgcn.ballot")
                    || UNIFORM_INTRINSICS
                        .iter()
                        .any(|u| name.starts_with(u.as_bytes()))
                        && all_uniform(0, operands - 1)
            }
            LLVMOpcode::LLVMPHI => false,
            opcode if computes_only(opcode) => all_uniform(0, operands),
            _ => false,
        }
    }
}

/// Intrinsics whose result is the same in every lane of a workgroup.
const UNIFORM_INTRINSICS: [&str; 5] = [
    "llvm.amdgcn.workgroup.id.",
    "llvm.amdgcn.dispatch.ptr",
    "llvm.amdgcn.implicitarg.ptr",
    "llvm.amdgcn.kernarg.segment.ptr",
    "llvm.amdgcn.readfirstlane",
];

/// Whether an instruction of this kind only computes a value from its operands: no memory,
/// no call, nothing that is undefined for some operands (division).
fn computes_only(opcode: LLVMOpcode) -> bool {
    use LLVMOpcode::*;
    is_plain_arithmetic(opcode)
        || matches!(
            opcode,
            LLVMPtrToInt
                | LLVMIntToPtr
                | LLVMBitCast
                | LLVMAddrSpaceCast
                | LLVMSelect
                | LLVMExtractValue
                | LLVMInsertValue
                | LLVMFreeze
                | LLVMPHI
        )
}

/// Makes the conditional `branch` scalar: it goes to `target` (the successor its condition
/// takes when it is `taken_when_true`) when any lane of the wavefront would, to its other
/// successor when none would. Returns the wavefront's ballot of the lanes that would.
///
/// # Safety
/// `builder` is of `branch`'s context; `branch` is a live conditional branch with `target` as
/// one successor; `ballot` is its module's `llvm.amdgcn.ballot` on `i64_type`.
unsafe fn branch_when_any(
    builder: LLVMBuilderRef,
    ballot: &Intrinsic,
    i64_type: LLVMTypeRef,
    branch: LLVMValueRef,
    target: LLVMBasicBlockRef,
    taken_when_true: bool,
    name: &CStr,
) -> LLVMValueRef {
    // SAFETY: the caller's contract; the new values are built before the branch they feed.
    unsafe {
        llvm::LLVMPositionBuilderBefore(builder, branch);
        let condition = llvm::LLVMGetCondition(branch);
        let taken = if taken_when_true {
            condition
        } else {
            llvm::LLVMBuildNot(builder, condition, c"".as_ptr())
        };
        let mask = ballot.call(builder, &mut [taken]);
        let any = llvm::LLVMBuildICmp(
            builder,
            inkwell::llvm_sys::LLVMIntPredicate::LLVMIntNE,
            mask,
            llvm::LLVMConstInt(i64_type, 0, 0),
            name.as_ptr(),
        );
        let other = llvm::LLVMGetSuccessor(branch, u32::from(taken_when_true));
        llvm::LLVMSetCondition(branch, any);
        llvm::LLVMSetSuccessor(branch, 0, target);
        llvm::LLVMSetSuccessor(branch, 1, other);
        mask
    }
}

/// An intrinsic's declaration in a module, overloaded on the given types.
struct Intrinsic {
    function: LLVMValueRef,
    function_type: LLVMTypeRef,
}

impl Intrinsic {
    /// # Safety
    /// `module` is a live module whose context made the `overloads`, and `name` an intrinsic
    /// overloaded on exactly those types.
    unsafe fn new(module: LLVMModuleRef, name: &str, overloads: &[LLVMTypeRef]) -> Intrinsic {
        // SAFETY: the caller's contract.
        unsafe {
            let id = llvm::LLVMLookupIntrinsicID(name.as_ptr().cast(), name.len());
            let mut overloads = overloads.to_vec();
            let function = llvm::LLVMGetIntrinsicDeclaration(
                module,
                id,
                overloads.as_mut_ptr(),
                overloads.len(),
            );
            Intrinsic {
                function,
                function_type: llvm::LLVMGlobalGetValueType(function),
            }
        }
    }

    /// # Safety
    /// The builder is positioned in a function of the intrinsic's module; `args` fit it.
    unsafe fn call(&self, builder: LLVMBuilderRef, args: &mut [LLVMValueRef]) -> LLVMValueRef {
        // SAFETY: the caller's contract.
        unsafe {
            llvm::LLVMBuildCall2(
                builder,
                self.function_type,
                self.function,
                args.as_mut_ptr(),
                args.len() as u32,
                c"".as_ptr(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;
    use inkwell::values::AnyValue;

    /// Three kernels as the site stage leaves them on AMDGPU: `gather`'s two bounds checks on
    /// per-lane indices, `rows`' check of parameters only, and `stores`, whose site's block
    /// writes memory before it reports.
    const IR: &str = r#"
target triple = "amdgcn-amd-amdhsa"
define void @__offload_gpu_panic_at1(i64 %site, i64 %a) noinline noreturn {
  unreachable
}
define void @__offload_gpu_panic_at2(i64 %site, i64 %a, i64 %b) noinline noreturn {
  unreachable
}
define void @__offload_gpu_panic_at_thread(i32 %t, i64 %site, i64 %a, i64 %b, i64 %c, i32 %values) noinline noreturn {
  unreachable
}
define i32 @__offload_gpu_thread_index() noinline {
  %x = call i32 @llvm.amdgcn.workitem.id.x()
  ret i32 %x
}
define amdgpu_kernel void @gather(ptr addrspace(1) %idx, i64 %n, i64 %m) {
  %x = call i32 @llvm.amdgcn.workitem.id.x()
  %i = zext i32 %x to i64
  %in = icmp ult i64 %i, %n
  br i1 %in, label %load, label %fail1
fail1:
  call void @__offload_gpu_panic_at2(i64 7, i64 %i, i64 %n)
  unreachable
load:
  %p = getelementptr i32, ptr addrspace(1) %idx, i64 %i
  %j32 = load i32, ptr addrspace(1) %p
  %j = zext i32 %j32 to i64
  %out = icmp uge i64 %j, %m
  call void @llvm.assume(i1 true)
  br i1 %out, label %fail2, label %done
fail2:
  %twice = shl i64 %j, 1
  call void @llvm.assume(i1 %out)
  call void @__offload_gpu_panic_at2(i64 8, i64 %twice, i64 %m)
  unreachable
done:
  ret void
}
define amdgpu_kernel void @rows(i64 %rows, i64 %w, i64 %len) {
  %size = mul i64 %rows, %w
  %fits = icmp ule i64 %size, %len
  br i1 %fits, label %done, label %fail
fail:
  call void @__offload_gpu_panic_at1(i64 9, i64 %size)
  unreachable
done:
  ret void
}
define amdgpu_kernel void @stores(ptr addrspace(1) %log, i64 %n) {
  %x = call i32 @llvm.amdgcn.workitem.id.x()
  %i = zext i32 %x to i64
  %in = icmp ult i64 %i, %n
  br i1 %in, label %done, label %fail
fail:
  store i64 %i, ptr addrspace(1) %log
  call void @__offload_gpu_panic_at1(i64 10, i64 %i)
  unreachable
done:
  ret void
}
define amdgpu_kernel void @merged(ptr addrspace(1) %idx, i64 %n, i64 %m) {
  %x = call i32 @llvm.amdgcn.workitem.id.x()
  %i = zext i32 %x to i64
  %in = icmp ult i64 %i, %n
  br i1 %in, label %load, label %fail
load:
  %p = getelementptr i32, ptr addrspace(1) %idx, i64 %i
  %j32 = load i32, ptr addrspace(1) %p
  %j = zext i32 %j32 to i64
  %out = icmp uge i64 %j, %m
  br i1 %out, label %fail, label %done
fail:
  %site = phi i64 [ 11, %0 ], [ 12, %load ]
  %value = phi i64 [ %i, %0 ], [ %j, %load ]
  call void @__offload_gpu_panic_at1(i64 %site, i64 %value)
  unreachable
done:
  ret void
}
declare i32 @llvm.amdgcn.workitem.id.x()
declare void @llvm.assume(i1)
"#;

    /// With `trap`: a divergent check's branch to a trap block is taken when any lane fails
    /// (the successors swapped where the trap was the false one), a check of parameters
    /// keeps its branch, and a block that does more than trap is no trap block.
    #[test]
    fn branches_to_traps_are_taken_by_any_failing_lane() {
        const TRAPS: &str = r#"
target triple = "amdgcn-amd-amdhsa"
define amdgpu_kernel void @gather(ptr addrspace(1) %idx, i64 %n, i64 %m) {
  %x = call i32 @llvm.amdgcn.workitem.id.x()
  %i = zext i32 %x to i64
  %in = icmp ult i64 %i, %n
  br i1 %in, label %load, label %trap
load:
  %p = getelementptr i32, ptr addrspace(1) %idx, i64 %i
  %j32 = load i32, ptr addrspace(1) %p
  %j = zext i32 %j32 to i64
  %out = icmp uge i64 %j, %m
  br i1 %out, label %trap, label %done
trap:
  call void @llvm.trap()
  unreachable
done:
  ret void
}
define amdgpu_kernel void @rows(i64 %rows, i64 %w, i64 %len) {
  %size = mul i64 %rows, %w
  %fits = icmp ule i64 %size, %len
  br i1 %fits, label %done, label %trap
trap:
  call void @llvm.trap()
  unreachable
done:
  ret void
}
define amdgpu_kernel void @stores(ptr addrspace(1) %log, i64 %n) {
  %x = call i32 @llvm.amdgcn.workitem.id.x()
  %i = zext i32 %x to i64
  %in = icmp ult i64 %i, %n
  br i1 %in, label %done, label %fail
fail:
  store i64 %i, ptr addrspace(1) %log
  call void @llvm.trap()
  unreachable
done:
  ret void
}
declare i32 @llvm.amdgcn.workitem.id.x()
declare void @llvm.trap()
"#;
        let context = Context::create();
        let buffer = MemoryBuffer::create_from_memory_range_copy(TRAPS.as_bytes(), "traps");
        let module = context.create_module_from_ir(buffer).unwrap();
        assert_eq!(uniform_traps(&module), 2, "gather's two checks");
        module.verify().unwrap();
        let text = |name: &str| {
            module
                .get_function(name)
                .unwrap()
                .print_to_string()
                .to_string()
        };
        let gather = text("gather");
        assert_eq!(
            gather.matches("@llvm.amdgcn.ballot.i64").count(),
            2,
            "{gather}"
        );
        assert!(gather.contains("xor i1 %in, true"), "{gather}");
        assert_eq!(
            gather
                .lines()
                .filter(|l| l.contains("br i1 %offload.any_traps") && l.contains("label %trap,"))
                .count(),
            2,
            "{gather}"
        );
        assert!(
            !text("rows").contains("ballot"),
            "a scalar check keeps its branch"
        );
        assert!(!text("stores").contains("ballot"), "no trap block");
        assert_eq!(uniform_traps(&module), 0, "nothing left to change");
    }

    fn transformed(context: &Context) -> (Module<'_>, usize) {
        let buffer = MemoryBuffer::create_from_memory_range_copy(IR.as_bytes(), "uniform");
        let module = context.create_module_from_ir(buffer).unwrap();
        let reporter = |name: &str| module.get_function(name).unwrap().as_value_ref();
        let site_reporters = [
            reporter(offload_format::abi::GPU_PANIC_AT1),
            reporter(offload_format::abi::GPU_PANIC_AT2),
        ];
        let changed = make_uniform(
            &module,
            &site_reporters,
            reporter(THREAD_REPORTER),
            reporter(THREAD_INDEX),
        );
        module.verify().unwrap();
        (module, changed)
    }

    fn body(module: &Module<'_>, name: &str) -> String {
        module
            .get_function(name)
            .unwrap()
            .print_to_string()
            .to_string()
    }

    #[test]
    fn divergent_checks_branch_on_any_failing_lane_and_report_its_values() {
        let context = Context::create();
        let (module, changed) = transformed(&context);
        assert_eq!(changed, 5, "gather's two sites, rows' one and merged's two");
        let gather = body(&module, "gather");
        // Each test's ballot decides the branch, for every lane of the wavefront.
        assert_eq!(
            gather.matches("@llvm.amdgcn.ballot.i64(i1").count(),
            2,
            "{gather}"
        );
        assert_eq!(gather.matches(" = icmp ne i64 %").count(), 2, "{gather}");
        assert!(
            gather.contains("br i1 %offload.any_panics, label %fail1, label %load"),
            "{gather}"
        );
        assert!(
            gather.contains("br i1 %offload.any_panics1, label %fail2, label %done"),
            "{gather}"
        );
        // The first failing lane's values, and its index computed where the kernel starts.
        assert!(
            gather.contains("call i64 @llvm.amdgcn.readlane.i64(i64 %i, i32 %offload.lane)"),
            "{gather}"
        );
        assert!(
            gather.contains("call i64 @llvm.amdgcn.readlane.i64(i64 %twice"),
            "{gather}"
        );
        // A parameter is the same in every lane already.
        assert!(!gather.contains("readlane.i64(i64 %n"), "{gather}");
        let entry = gather.split("\nfail1:").next().unwrap();
        assert!(
            entry.contains("%offload.thread_index = call i32 @__offload_gpu_thread_index()"),
            "{gather}"
        );
        assert!(
            entry.contains("call void asm sideeffect \"\", \"v\"(i32 %offload.thread_index)"),
            "{gather}"
        );
        assert_eq!(
            gather
                .matches("call void @__offload_gpu_panic_at_thread(i32")
                .count(),
            2,
            "{gather}"
        );
        assert!(!gather.contains("@__offload_gpu_panic_at2"), "{gather}");
        // Each report writes two values, what `at2` passes; the third stays zero, unwritten.
        assert_eq!(gather.matches(", i64 0, i32 2)").count(), 2, "{gather}");
        // What held for the failing lanes only is no longer stated in the block all lanes enter;
        // the assumption of the hot path stays.
        assert!(!gather.contains("assume(i1 %out)"), "{gather}");
        assert!(gather.contains("assume(i1 true)"), "{gather}");
    }

    #[test]
    fn a_call_merged_from_two_sites_is_split_into_one_per_branch() {
        let context = Context::create();
        let (module, _) = transformed(&context);
        let merged = body(&module, "merged");
        assert!(!merged.contains("phi"), "{merged}");
        assert_eq!(
            merged.matches("@llvm.amdgcn.ballot.i64(i1").count(),
            2,
            "{merged}"
        );
        assert!(
            merged.contains("readlane.i64(i64 %i, i32")
                && merged.contains("readlane.i64(i64 %j, i32"),
            "{merged}"
        );
        for site in ["i64 11, i64 %", "i64 12, i64 %"] {
            let call = "call void @__offload_gpu_panic_at_thread(i32 %";
            assert!(
                merged
                    .lines()
                    .any(|l| l.trim_start().starts_with(call) && l.contains(site)),
                "{site}: {merged}"
            );
        }
    }

    #[test]
    fn a_uniform_check_keeps_its_branch_and_a_site_with_side_effects_keeps_its_function() {
        let context = Context::create();
        let (module, _) = transformed(&context);
        let rows = body(&module, "rows");
        assert!(!rows.contains("ballot.i64(i1 %"), "{rows}");
        assert!(
            rows.contains("br i1 %fits, label %done, label %fail"),
            "{rows}"
        );
        assert!(
            rows.contains("@__offload_gpu_panic_at_thread(i32"),
            "{rows}"
        );
        // Every lane would run the store: the site and its function are left as they were.
        let stores = body(&module, "stores");
        assert!(
            stores.contains("call void @__offload_gpu_panic_at1(i64 10, i64 %i)"),
            "{stores}"
        );
        assert!(!stores.contains("ballot"), "{stores}");
        assert!(!stores.contains("thread_index"), "{stores}");
    }
}
