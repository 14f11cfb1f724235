//! One trap per function. A kernel that can panic traps in several places: its report's
//! claim, the end of the report, a channel that is missing. LLVM keeps a `llvm.trap` for
//! each, and on gfx11, where `s_trap` alone may not halt the wavefront, each becomes a
//! 12-instruction sequence that sends the queue an interrupt and halts (in the parity
//! benchmark, three per panicking kernel: 140 of gfx1100 `matmul`'s 1,500 bytes). Every
//! `llvm.trap` followed by `unreachable` is the same action, so this stage gives each function
//! one block that traps and sends the others there.

use inkwell::llvm_sys::LLVMOpcode;
use inkwell::llvm_sys::core as llvm;
use inkwell::llvm_sys::debuginfo;
use inkwell::llvm_sys::prelude::{LLVMBasicBlockRef, LLVMValueRef};
use inkwell::module::Module;
use inkwell::values::AsValueRef;

use super::users;

/// Sends every trap of each function with more than one to one trap block; returns how many
/// traps were removed.
pub(super) fn share_traps(module: &Module<'_>) -> usize {
    let Some(trap) = module.get_function("llvm.trap") else {
        return 0;
    };
    let mut removed = 0;
    // SAFETY: the calls, their blocks and functions are live values of `module`; the builder
    // is made in its context and disposed of below. A trap call ends its block with the
    // `unreachable` after it, so the block has no successor and no phi names it as an
    // incoming block: it can be replaced by any other block, and a call and `unreachable`
    // replaced by a branch, without changing a phi.
    unsafe {
        let mut by_function: Vec<(LLVMValueRef, Vec<LLVMValueRef>)> = Vec::new();
        for call in block_ending_calls(trap.as_value_ref()) {
            let function = llvm::LLVMGetBasicBlockParent(llvm::LLVMGetInstructionParent(call));
            match by_function.iter_mut().find(|(f, _)| *f == function) {
                Some((_, calls)) => calls.push(call),
                None => by_function.push((function, vec![call])),
            }
        }
        let context = llvm::LLVMGetModuleContext(module.as_mut_ptr());
        let builder = llvm::LLVMCreateBuilderInContext(context);
        for (function, calls) in by_function.into_iter().filter(|(_, c)| c.len() > 1) {
            removed += calls.len() - 1;
            let shared = llvm::LLVMAppendBasicBlockInContext(context, function, c"trap".as_ptr());
            llvm::LLVMPositionBuilderAtEnd(builder, shared);
            let kept = llvm::LLVMInstructionClone(calls[0]);
            llvm::LLVMInsertIntoBuilder(builder, kept);
            llvm::LLVMBuildUnreachable(builder);
            for call in calls {
                let block = llvm::LLVMGetInstructionParent(call);
                if llvm::LLVMGetFirstInstruction(block) == call {
                    replace_block(block, shared);
                } else {
                    let unreachable = llvm::LLVMGetNextInstruction(call);
                    llvm::LLVMPositionBuilderBefore(builder, call);
                    let branch = llvm::LLVMBuildBr(builder, shared);
                    debuginfo::LLVMInstructionSetDebugLoc(
                        branch,
                        debuginfo::LLVMInstructionGetDebugLoc(call),
                    );
                    llvm::LLVMInstructionEraseFromParent(unreachable);
                    llvm::LLVMInstructionEraseFromParent(call);
                }
            }
        }
        llvm::LLVMDisposeBuilder(builder);
    }
    removed
}

/// The calls of `callee` that the `unreachable` after them ends their block with.
///
/// # Safety
/// `callee` is a live function.
pub(super) unsafe fn block_ending_calls(callee: LLVMValueRef) -> Vec<LLVMValueRef> {
    // SAFETY: this function's contract; a live value's users are live, and the next
    // instruction of a live one is live or null.
    unsafe {
        users(callee)
            .into_iter()
            .filter(|&call| {
                if llvm::LLVMIsACallInst(call).is_null() {
                    return false;
                }
                let next = llvm::LLVMGetNextInstruction(call);
                !next.is_null()
                    && llvm::LLVMGetInstructionOpcode(next) == LLVMOpcode::LLVMUnreachable
            })
            .collect()
    }
}

/// Sends every branch to `block` (a trap and `unreachable` alone) to `shared`, then deletes it.
///
/// # Safety
/// `block` and `shared` are live blocks of one function; `block` has no successor.
unsafe fn replace_block(block: LLVMBasicBlockRef, shared: LLVMBasicBlockRef) {
    // SAFETY: this function's contract; a block's uses are branches to it (and block
    // addresses), which may name any block of the function.
    unsafe {
        llvm::LLVMReplaceAllUsesWith(
            llvm::LLVMBasicBlockAsValue(block),
            llvm::LLVMBasicBlockAsValue(shared),
        );
        llvm::LLVMDeleteBasicBlock(block);
    }
}

#[cfg(test)]
mod tests {
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;

    use super::share_traps;

    const KERNEL: &str = "declare void @llvm.trap()\n\
        declare void @use(i32)\n\
        define void @k(i32 %a, i32 %b, ptr %p) {\n\
        entry:\n\
        \x20 %ca = icmp eq i32 %a, 0\n\
        \x20 br i1 %ca, label %t1, label %next\n\
        t1:\n\
        \x20 call void @llvm.trap()\n\
        \x20 unreachable\n\
        next:\n\
        \x20 switch i32 %b, label %done [ i32 1, label %t2\n\
        \x20                              i32 2, label %report ]\n\
        t2:\n\
        \x20 call void @llvm.trap()\n\
        \x20 unreachable\n\
        report:\n\
        \x20 store volatile i32 3, ptr %p\n\
        \x20 call void @llvm.trap()\n\
        \x20 unreachable\n\
        done:\n\
        \x20 call void @use(i32 %a)\n\
        \x20 ret void\n\
        }\n\
        define void @one(i1 %c) {\n\
        \x20 br i1 %c, label %t, label %r\n\
        t:\n\
        \x20 call void @llvm.trap()\n\
        \x20 unreachable\n\
        r:\n\
        \x20 ret void\n\
        }\n";

    /// A function's three traps become one block the others branch to: a trap alone in its
    /// block is replaced by it (in a `switch` too), one after other work branches to it. A
    /// function with one trap is left as it is.
    #[test]
    fn each_function_keeps_one_trap() {
        let context = Context::create();
        let buffer = MemoryBuffer::create_from_memory_range_copy(KERNEL.as_bytes(), "k");
        let module = context.create_module_from_ir(buffer).unwrap();
        assert_eq!(share_traps(&module), 2);
        module.verify().unwrap();
        let ir = module.print_to_string().to_string();
        let k = &ir[ir.find("define void @k").unwrap()..ir.find("define void @one").unwrap()];
        assert_eq!(k.matches("call void @llvm.trap()").count(), 1, "{k}");
        assert!(k.contains("br i1 %ca, label %trap, label %next"), "{k}");
        assert!(k.contains("i32 1, label %trap"), "{k}");
        assert!(
            k.contains("store volatile i32 3, ptr %p, align 4\n  br label %trap"),
            "{k}"
        );
        let one = &ir[ir.find("define void @one").unwrap()..];
        assert_eq!(one.matches("call void @llvm.trap()").count(), 1, "{one}");
        assert!(!one.contains("%trap"), "{one}");
        assert_eq!(share_traps(&module), 0);
    }
}
