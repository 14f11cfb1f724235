//! Volatile accesses to stack slots nothing else can see, made plain. `libm`'s functions (the
//! software half of `offload_rt::kernel::math`) force an evaluation whose only effect is a
//! floating-point exception flag with `read_volatile` of a local: on a GPU, which has no
//! exception flags a program can read, that costs a stack frame, and on NVIDIA a store
//! through a generic pointer too (`st.b32 [%SP+4]`), where the same C reads and writes
//! registers. A slot whose address goes nowhere but to its own loads and stores (and
//! lifetime markers) is memory no other thread, device or debugger-visible object can
//! observe, so its volatile loads and stores become plain ones before `default<O3>`, which
//! then promotes the slot to registers and drops what nothing uses.

#![forbid(unsafe_code)]

use inkwell::module::Module;
use inkwell::values::InstructionOpcode;

use super::ir::{self, Instruction, Value};

/// How many casts and constant-offset GEPs deep a slot's address is followed.
const MAX_DEPTH: u32 = 4;

/// Makes plain every volatile load and store of a private stack slot; returns how many.
pub(super) fn plain_private_volatiles(module: &Module<'_>) -> usize {
    let mut changed = 0;
    // Only the volatile flag of loads and stores changes, which adds or removes no
    // instruction or use.
    for function in ir::Module::new(module).functions() {
        for block in function.blocks() {
            for instruction in block.instructions() {
                if !instruction.is_alloca() {
                    continue;
                }
                let mut accesses = Vec::new();
                if private_accesses(instruction.as_value(), 0, &mut accesses) {
                    for access in accesses {
                        if access.is_volatile() {
                            access.set_volatile(false);
                            changed += 1;
                        }
                    }
                }
            }
        }
    }
    changed
}

/// Collects the loads and stores through `address` (a slot or an address derived from it)
/// into `accesses`; false if the address has any other use: stored as a value, passed to a
/// call, compared, converted to an integer or reached through a variable offset.
fn private_accesses<'m>(
    address: Value<'m>,
    depth: u32,
    accesses: &mut Vec<Instruction<'m>>,
) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    for user in address.users() {
        if let Some(load) = user.as_load() {
            accesses.push(*load);
        } else if user.is_store() {
            let store = user.as_instruction().expect("a store is an instruction");
            // Operand 0 is the value stored: the slot's address escaping through memory.
            if store.operand(0) == Some(address) {
                return false;
            }
            accesses.push(store);
        } else if is_lifetime_marker(user) {
            continue;
        } else if is_address_cast(user)
            || user
                .as_gep()
                .is_some_and(|gep| gep.operand(0) == Some(address) && gep.has_constant_indices())
        {
            if !private_accesses(user, depth + 1, accesses) {
                return false;
            }
        } else {
            return false;
        }
    }
    true
}

fn is_lifetime_marker(user: Value<'_>) -> bool {
    user.as_call()
        .is_some_and(|call| call.callee_name().starts_with(b"llvm.lifetime."))
}

fn is_address_cast(user: Value<'_>) -> bool {
    user.as_instruction().is_some_and(|i| {
        matches!(
            i.opcode(),
            InstructionOpcode::AddrSpaceCast | InstructionOpcode::BitCast
        )
    })
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
