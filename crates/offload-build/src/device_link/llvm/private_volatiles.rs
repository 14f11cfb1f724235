//! Volatile accesses to stack slots nothing else can see, made plain. `libm`'s functions (the
//! software half of `offload_rt::kernel::math`) force an evaluation whose only effect is a
//! floating-point exception flag with `read_volatile` of a local: on a GPU, which has no
//! exception flags a program can read, that costs a stack frame, and on NVIDIA a store
//! through a generic pointer too (`st.b32 [%SP+4]`), where the same C reads and writes
//! registers. A slot whose address goes nowhere but to its own loads and stores (and
//! lifetime markers) is memory no other thread, device or debugger-visible object can
//! observe, so its volatile loads and stores become plain ones before `default<O3>`, which
//! then promotes the slot to registers and drops what nothing uses.

use inkwell::llvm_sys::LLVMOpcode;
use inkwell::llvm_sys::core as llvm;
use inkwell::llvm_sys::prelude::LLVMValueRef;
use inkwell::module::Module;
use inkwell::values::AsValueRef;

use super::{callee_name, users};

/// How many casts and constant-offset GEPs deep a slot's address is followed.
const MAX_DEPTH: u32 = 4;

/// Makes plain every volatile load and store of a private stack slot; returns how many.
pub(super) fn plain_private_volatiles(module: &Module<'_>) -> usize {
    let mut changed = 0;
    // SAFETY: every value below is a live value of `module`; only the volatile flag of loads
    // and stores changes, which adds or removes no instruction or use.
    unsafe {
        for function in module.get_functions() {
            let mut block = llvm::LLVMGetFirstBasicBlock(function.as_value_ref());
            while !block.is_null() {
                let mut instruction = llvm::LLVMGetFirstInstruction(block);
                while !instruction.is_null() {
                    if !llvm::LLVMIsAAllocaInst(instruction).is_null() {
                        let mut accesses = Vec::new();
                        if private_accesses(instruction, 0, &mut accesses) {
                            for access in accesses {
                                if llvm::LLVMGetVolatile(access) != 0 {
                                    llvm::LLVMSetVolatile(access, 0);
                                    changed += 1;
                                }
                            }
                        }
                    }
                    instruction = llvm::LLVMGetNextInstruction(instruction);
                }
                block = llvm::LLVMGetNextBasicBlock(block);
            }
        }
    }
    changed
}

/// Collects the loads and stores through `address` (a slot or an address derived from it)
/// into `accesses`; false if the address has any other use: stored as a value, passed to a
/// call, compared, converted to an integer or reached through a variable offset.
///
/// # Safety
/// `address` is a live value of a live module.
unsafe fn private_accesses(
    address: LLVMValueRef,
    depth: u32,
    accesses: &mut Vec<LLVMValueRef>,
) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    // SAFETY: this function's contract; the users and operands of live values are live.
    unsafe {
        for user in users(address) {
            if !llvm::LLVMIsALoadInst(user).is_null() {
                accesses.push(user);
            } else if !llvm::LLVMIsAStoreInst(user).is_null() {
                // Operand 0 is the value stored: the slot's address escaping through memory.
                if llvm::LLVMGetOperand(user, 0) == address {
                    return false;
                }
                accesses.push(user);
            } else if is_lifetime_marker(user) {
                continue;
            } else if is_address_cast(user)
                || (!llvm::LLVMIsAGetElementPtrInst(user).is_null()
                    && llvm::LLVMGetOperand(user, 0) == address
                    && has_constant_indices(user))
            {
                if !private_accesses(user, depth + 1, accesses) {
                    return false;
                }
            } else {
                return false;
            }
        }
    }
    true
}

/// # Safety
/// `user` is a live instruction.
unsafe fn is_lifetime_marker(user: LLVMValueRef) -> bool {
    // SAFETY: this function's contract; a call's callee is a live value.
    unsafe {
        if llvm::LLVMIsACallInst(user).is_null() {
            return false;
        }
        callee_name(user).starts_with(b"llvm.lifetime.")
    }
}

/// # Safety
/// `user` is a live instruction.
unsafe fn is_address_cast(user: LLVMValueRef) -> bool {
    // SAFETY: this function's contract.
    unsafe {
        !llvm::LLVMIsAInstruction(user).is_null()
            && matches!(
                llvm::LLVMGetInstructionOpcode(user),
                LLVMOpcode::LLVMAddrSpaceCast | LLVMOpcode::LLVMBitCast
            )
    }
}

/// # Safety
/// `gep` is a live GEP instruction.
unsafe fn has_constant_indices(gep: LLVMValueRef) -> bool {
    // SAFETY: this function's contract; a GEP's operands are its pointer and indices.
    unsafe {
        (1..llvm::LLVMGetNumOperands(gep) as u32)
            .all(|i| !llvm::LLVMIsAConstantInt(llvm::LLVMGetOperand(gep, i)).is_null())
    }
}

#[cfg(test)]
mod tests {
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;

    use super::*;

    fn module<'ctx>(context: &'ctx Context, ir: &str) -> Module<'ctx> {
        let buffer = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "test");
        context
            .create_module_from_ir(buffer)
            .expect("test IR parses")
    }

    #[test]
    fn a_forced_evaluation_in_a_private_slot_becomes_plain() {
        let context = Context::create();
        let m = module(
            &context,
            r#"
            declare void @llvm.lifetime.start.p0(ptr)
            define float @f(float %x) {
              %slot = alloca [2 x float], align 4
              call void @llvm.lifetime.start.p0(ptr %slot)
              %second = getelementptr inbounds i8, ptr %slot, i64 4
              store volatile float %x, ptr %second, align 4
              %r = load volatile float, ptr %second, align 4
              ret float %r
            }
            "#,
        );
        assert_eq!(plain_private_volatiles(&m), 2);
        let ir = m.print_to_string().to_string();
        assert!(!ir.contains("volatile"), "{ir}");
    }

    #[test]
    fn a_slot_whose_address_escapes_keeps_its_volatile_accesses() {
        let context = Context::create();
        let m = module(
            &context,
            r#"
            declare void @observe(ptr)
            @published = global ptr null
            define float @passed(float %x) {
              %slot = alloca float, align 4
              store volatile float %x, ptr %slot, align 4
              call void @observe(ptr %slot)
              %r = load volatile float, ptr %slot, align 4
              ret float %r
            }
            define float @stored(float %x) {
              %slot = alloca float, align 4
              store ptr %slot, ptr @published, align 8
              %r = load volatile float, ptr %slot, align 4
              ret float %r
            }
            define float @indexed(float %x, i64 %i) {
              %slot = alloca [4 x float], align 4
              %at = getelementptr inbounds float, ptr %slot, i64 %i
              %r = load volatile float, ptr %at, align 4
              ret float %r
            }
            define float @global_volatile(float %x) {
              %r = load volatile float, ptr @published, align 4
              ret float %r
            }
            "#,
        );
        assert_eq!(plain_private_volatiles(&m), 0);
        let ir = m.print_to_string().to_string();
        assert_eq!(ir.matches("volatile").count(), 6, "{ir}");
    }
}
