//! One trap per function. A kernel that can panic traps in several places: its report's
//! claim, the end of the report, a channel that is missing. LLVM keeps a `llvm.trap` for
//! each, and on gfx11, where `s_trap` alone may not halt the wavefront, each becomes a
//! 12-instruction sequence that sends the queue an interrupt and halts (in the parity
//! benchmark, three per panicking kernel: 140 of gfx1100 `matmul`'s 1,500 bytes). Every
//! `llvm.trap` followed by `unreachable` is the same action, so this stage gives each function
//! one block that traps and sends the others there.

#![forbid(unsafe_code)]

use inkwell::module::Module;

use super::ir::{self, Block, Call, Function, Instruction};

/// Sends every trap of each function with more than one to one trap block; returns how many
/// traps were removed.
pub(super) fn share_traps(module: &Module<'_>) -> usize {
    let module = ir::Module::new(module);
    let Some(trap) = module.function("llvm.trap") else {
        return 0;
    };
    let mut removed = 0;
    // A trap call ends its block with the `unreachable` after it, so the block has no
    // successor and no phi names it as an incoming block: it can be replaced by any other
    // block, and a call and `unreachable` replaced by a branch, without changing a phi.
    let mut by_function: Vec<(Function<'_>, Vec<Call<'_>>)> = Vec::new();
    for call in block_ending_calls(trap) {
        let function = call.function();
        match by_function.iter_mut().find(|(f, _)| *f == function) {
            Some((_, calls)) => calls.push(call),
            None => by_function.push((function, vec![call])),
        }
    }
    let builder = module.builder();
    for (function, calls) in by_function.into_iter().filter(|(_, c)| c.len() > 1) {
        removed += calls.len() - 1;
        let shared = function.append_block(c"trap");
        builder.position_at_end(shared);
        builder.insert_clone(*calls[0]);
        builder.build_unreachable();
        for call in calls {
            let block = call.block();
            if block.first_instruction() == Some(*call) {
                replace_block(block, shared);
            } else {
                let unreachable = call.next().expect("`unreachable` follows the call");
                builder.position_before(*call);
                let branch = builder.build_br(shared);
                branch.copy_debug_location_from(*call);
                unreachable.erase();
                call.erase();
            }
        }
    }
    removed
}

/// The calls of `callee` that the `unreachable` after them ends their block with.
pub(super) fn block_ending_calls(callee: Function<'_>) -> Vec<Call<'_>> {
    callee
        .users()
        .into_iter()
        .filter_map(|user| user.as_call())
        .filter(|call| call.next().is_some_and(Instruction::is_unreachable))
        .collect()
}

/// Sends every branch to `block` (a trap and `unreachable` alone) to `shared`, then deletes it.
/// `block` and `shared` are blocks of one function; `block` has no successor.
fn replace_block<'m>(block: Block<'m>, shared: Block<'m>) {
    // A block's uses are branches to it (and block addresses), which may name any block of
    // the function.
    block.replace_all_uses_with(shared);
    block.delete();
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
