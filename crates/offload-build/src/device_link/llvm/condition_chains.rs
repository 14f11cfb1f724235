//! Chains of conditions (`a && b && c`) merged into one branch, as clang's are in CUDA C.
//! SimplifyCFG folds a block that only computes a condition into its predecessor's branch
//! when both branch to a common block, but not when a value the block computes is used past
//! it: in Rust's `if x > 0 && x + 1 < w { … at(x + 1, y) … }` the test and the access share
//! the sum `x + 1`, so each `&&` stayed a branch of its own, on a GPU a divergent branch and
//! a reconvergence point each. CUDA C's twin indexes with `c + 1`, another value, and its
//! conditions merged into one predicate. This stage gives each use past such a block a copy
//! of the cheap value it uses, after which SimplifyCFG merges the chain; the code generator's
//! common-subexpression pass rejoins the copies. After optimization, on every target.

#![forbid(unsafe_code)]

use std::collections::HashMap;

use inkwell::module::Module;
use inkwell::values::InstructionOpcode;

use super::ir::{self, Block, Builder, Function, Instruction};

/// At most this many instructions besides the branch in a condition block: SimplifyCFG
/// copies them into the predecessor, to run whether or not the chain gets that far.
const MAX_CONDITION_INSTRUCTIONS: usize = 4;

/// Copies the values that the condition blocks of `&&` and `||` chains share with the code
/// past them, each for the use; returns how many copies were made.
pub(super) fn unshare_condition_values(module: &Module<'_>) -> usize {
    let module = ir::Module::new(module);
    let builder = module.builder();
    let mut copies = 0;
    // An instruction is only inserted (never erased), and its operands dominate it: a copy
    // is placed just before a use of the original, which the original dominates, as do the
    // original's operands.
    for function in module.functions() {
        for block in condition_blocks(function) {
            copies += unshare(&builder, block);
        }
    }
    copies
}

/// The blocks of `function` that SimplifyCFG would fold into their predecessor's branch but
/// for the values they share: a conditional branch on a value the block computes, a single
/// predecessor that branches conditionally to the block and to one of the block's
/// successors, and no more than a few instructions, all cheap and free of side effects.
fn condition_blocks(function: Function<'_>) -> Vec<Block<'_>> {
    let mut found = Vec::new();
    // Blocks in order, each with its predecessors.
    let mut order = Vec::new();
    let mut predecessors: HashMap<Block<'_>, Vec<Block<'_>>> = HashMap::new();
    for block in function.blocks() {
        let Some(terminator) = block.terminator() else {
            continue;
        };
        for successor in terminator.successors() {
            let from = predecessors.entry(successor).or_insert_with(|| {
                order.push(successor);
                Vec::new()
            });
            from.push(block);
        }
    }
    for block in &order {
        let from = &predecessors[block];
        let &[predecessor] = from.as_slice() else {
            continue;
        };
        let own = successors(*block);
        let theirs = successors(predecessor);
        let is_condition = own.len() == 2
            && theirs.len() == 2
            && theirs.iter().any(|s| s != block && own.contains(s))
            && is_cheap_condition(*block);
        if is_condition {
            found.push(*block);
        }
    }
    found
}

/// The successors of a block that ends in a conditional branch; none otherwise.
fn successors(block: Block<'_>) -> Vec<Block<'_>> {
    block
        .terminator()
        .and_then(|t| t.as_branch())
        .filter(|b| b.is_conditional())
        .map_or_else(Vec::new, |b| b.successors().collect())
}

/// Whether `block` computes its branch's condition with a few integer operations and
/// comparisons, the condition used by the branch alone.
fn is_cheap_condition(block: Block<'_>) -> bool {
    let Some(terminator) = block.terminator() else {
        return false;
    };
    let Some(condition) = terminator.as_branch().and_then(|b| b.condition()) else {
        return false;
    };
    if condition.as_instruction().map(Instruction::block) != Some(block)
        || condition.users().len() != 1
    {
        return false;
    }
    let mut count = 0;
    for instruction in block.instructions() {
        if instruction == *terminator {
            break;
        }
        count += 1;
        if count > MAX_CONDITION_INSTRUCTIONS || !is_cheap(instruction) {
            return false;
        }
    }
    true
}

/// Integer arithmetic that cannot trap, comparisons, casts and address arithmetic.
fn is_cheap(instruction: Instruction<'_>) -> bool {
    is_plain_arithmetic(instruction.opcode())
}

/// Whether an instruction of this kind is integer arithmetic that cannot trap (no division),
/// a comparison of integers, an integer cast or address arithmetic.
pub(super) fn is_plain_arithmetic(opcode: InstructionOpcode) -> bool {
    use InstructionOpcode::*;
    matches!(
        opcode,
        Add | Sub
            | Mul
            | Shl
            | LShr
            | AShr
            | And
            | Or
            | Xor
            | ICmp
            | ZExt
            | SExt
            | Trunc
            | GetElementPtr
    )
}

/// Gives each use of `block`'s values past it (other than a phi's) a copy of the value,
/// placed before the use; returns how many copies were made.
fn unshare<'m>(builder: &Builder<'m>, block: Block<'m>) -> usize {
    let mut copies = 0;
    // The block's instructions are collected before copies are inserted elsewhere.
    let terminator = block.terminator().map(|t| t.instruction());
    let instructions: Vec<Instruction<'m>> = block
        .instructions()
        .take_while(|&i| Some(i) != terminator)
        .collect();
    // Last first: a copy of a later value uses the earlier ones, which then get copies
    // of their own before it.
    for &value in instructions.iter().rev() {
        for user in value.users() {
            // The users of an instruction are instructions.
            let Some(user) = user.as_instruction() else {
                continue;
            };
            if user.block() == block || user.is_phi() {
                continue;
            }
            builder.position_before(user);
            let copy = builder.insert_clone(value);
            user.replace_operand(value.as_value(), copy.as_value());
            copies += 1;
        }
    }
    copies
}

#[cfg(test)]
mod tests {
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;

    use super::super::tests::{bitcode, link};
    use super::unshare_condition_values;
    use crate::device_link::rlib_bitcode::DeviceInput;

    /// `x != 0 && x + 1 < w` guarding an access at `row + x + 1`: the sum is the condition's
    /// and the access's.
    const CHAIN: &str = "declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n\
        declare i32 @llvm.nvvm.read.ptx.sreg.tid.y()\n\
        define ptx_kernel void @right(ptr noalias %in, ptr noalias %out, i64 %w) {\n\
        start:\n\
        \x20 %tx = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n\
        \x20 %ty = call i32 @llvm.nvvm.read.ptx.sreg.tid.y()\n\
        \x20 %x = zext i32 %tx to i64\n\
        \x20 %y = zext i32 %ty to i64\n\
        \x20 %row = mul nuw i64 %y, %w\n\
        \x20 %here = add nuw i64 %row, %x\n\
        \x20 %inner = icmp ne i64 %x, 0\n\
        \x20 br i1 %inner, label %right, label %edge\n\
        right:\n\
        \x20 %next = add nuw i64 %x, 1\n\
        \x20 %fits = icmp ult i64 %next, %w\n\
        \x20 br i1 %fits, label %sum, label %edge\n\
        sum:\n\
        \x20 %at = add nuw i64 %row, %next\n\
        \x20 %pr = getelementptr inbounds float, ptr %in, i64 %at\n\
        \x20 %r = load float, ptr %pr, align 4\n\
        \x20 br label %store\n\
        edge:\n\
        \x20 br label %store\n\
        store:\n\
        \x20 %v = phi float [ %r, %sum ], [ 0.0, %edge ]\n\
        \x20 %po = getelementptr inbounds float, ptr %out, i64 %here\n\
        \x20 store float %v, ptr %po, align 4\n\
        \x20 ret void\n\
        }\n";

    /// The access gets a sum of its own, and the condition block's sum is its branch's alone.
    #[test]
    fn a_conditions_value_used_past_the_chain_is_copied_for_the_use() {
        let context = Context::create();
        let buffer = MemoryBuffer::create_from_memory_range_copy(CHAIN.as_bytes(), "chain");
        let module = context.create_module_from_ir(buffer).unwrap();
        assert_eq!(unshare_condition_values(&module), 1);
        let ir = module.print_to_string().to_string();
        let sum = ir.split("sum:").nth(1).unwrap();
        assert!(sum.contains("= add nuw i64 %x, 1"), "{ir}");
        assert!(!sum.contains("%row, %next"), "{ir}");
        module.verify().unwrap();
    }

    /// Linked, the chain is one branch, as clang makes of `x != 0 && x + 1 < w` in CUDA C.
    #[test]
    fn a_chain_of_conditions_is_one_branch() {
        let ptx = link(&[DeviceInput::object("right.bc", bitcode("right", CHAIN))]).unwrap();
        let branches: Vec<&str> = ptx.lines().filter(|l| l.contains(" bra")).collect();
        assert_eq!(branches.len(), 1, "{ptx}");
    }

    /// A block with a call is no condition to merge: its values stay shared.
    #[test]
    fn a_block_that_calls_is_left_alone() {
        let context = Context::create();
        let ir = CHAIN.replace(
            "\x20 %next = add nuw i64 %x, 1\n",
            "\x20 %next = add nuw i64 %x, 1\n\x20 %ignored = call i32 @llvm.nvvm.read.ptx.sreg.tid.y()\n",
        );
        let buffer = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "calls");
        let module = context.create_module_from_ir(buffer).unwrap();
        assert_eq!(unshare_condition_values(&module), 0);
    }
}
