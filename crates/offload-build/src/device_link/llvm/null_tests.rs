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

#![forbid(unsafe_code)]

use std::collections::{HashMap, HashSet};

use inkwell::IntPredicate;
use inkwell::module::Module;
use inkwell::values::InstructionOpcode;

use super::ir::{self, Block, Builder, Function, ICmp, Instruction, MetadataKind, Value};
use super::shared_memory::compares_with_null;

/// How deep a select and phi tree is followed.
const MAX_DEPTH: u32 = 4;

/// What a pointer's non-nullness is: a constant, or an `i1` value in the IR.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum NonNull<'m> {
    Always,
    Never,
    When(Value<'m>),
}

/// Each block's predecessor where it has exactly one (through one edge), else `None`.
type Predecessors<'m> = HashMap<Block<'m>, Option<Block<'m>>>;

/// Operand `index` of `value`, which the caller knows it has.
fn operand<'m>(value: impl Into<Value<'m>>, index: u32) -> Value<'m> {
    value
        .into()
        .operand(index)
        .expect("the instruction has the operand")
}

/// Replaces the null tests of pointers whose non-nullness is a known condition; returns how
/// many were replaced.
pub(super) fn fold_null_tests(module: &Module<'_>) -> usize {
    let module = ir::Module::new(module);
    let builder = module.builder();
    let nonnull = module.metadata_kind("nonnull");
    let mut folded = 0;
    // An instruction is erased only after its uses are replaced, and none is visited after.
    for function in module.functions() {
        if function.is_declaration() {
            continue;
        }
        let mut facts = Facts::of(function, nonnull);
        // Built the first time a test's condition is not a constant: most functions
        // have no such test.
        let mut predecessors = None;
        for test in null_tests(function) {
            let (a, b) = (operand(test, 0), operand(test, 1));
            let pointer = if compares_with_null(*test, a) { a } else { b };
            // A constant's test (a global's, say) is LLVM's to fold, not this stage's.
            if pointer.is_constant() {
                continue;
            }
            let Some(nonnull) = facts.condition(&builder, pointer, 0) else {
                continue;
            };
            let i1 = test.ty();
            let is_ne = test.predicate() == IntPredicate::NE;
            if let NonNull::When(_) = nonnull {
                let predecessors =
                    predecessors.get_or_insert_with(|| single_predecessors(function));
                facts.use_element_past_test(&builder, test, pointer, is_ne, predecessors);
            }
            let replacement = match nonnull {
                NonNull::Always => i1.const_int(u64::from(is_ne), false),
                NonNull::Never => i1.const_int(u64::from(!is_ne), false),
                NonNull::When(condition) if is_ne => condition,
                NonNull::When(condition) => {
                    builder.position_before(*test);
                    builder.build_not(condition, c"is_null")
                }
            };
            test.replace_all_uses_with(replacement);
            test.erase();
            folded += 1;
        }
    }
    folded
}

/// The blocks that branches enter only when `pointer` is not null, found from `value`, an
/// `i1` that is `when` only where `pointer` is not null: through logical ands (true only when
/// each operand is), logical ors (false only when each is), negations, and to the branches on
/// them, whose successor counts where it has the branch's block as its one predecessor.
fn nonnull_edges<'m>(
    value: Value<'m>,
    when: bool,
    depth: u32,
    predecessors: &Predecessors<'m>,
    edges: &mut Vec<Block<'m>>,
) {
    if depth > MAX_DEPTH {
        return;
    }
    for user in value.users() {
        if let Some(branch) = user.as_branch() {
            if !branch.is_conditional() {
                continue;
            }
            let block = branch.block();
            let successor = branch
                .successor(if when { 0 } else { 1 })
                .expect("a conditional branch has two successors");
            if predecessors.get(&successor).copied().flatten() == Some(block) {
                edges.push(successor);
            }
            continue;
        }
        let (and, or) = if user.is_select() {
            let (c, t, f) = (operand(user, 0), operand(user, 1), operand(user, 2));
            (
                f.is_const_int(0) && (c == value || t == value),
                t.is_const_int(1) && (c == value || f == value),
            )
        } else if let Some(operator) = user.as_instruction().filter(|u| u.is_binary_operator()) {
            let opcode = operator.opcode();
            if opcode == InstructionOpcode::Xor
                && (operand(user, 0).is_const_int(1) || operand(user, 1).is_const_int(1))
            {
                nonnull_edges(user, !when, depth + 1, predecessors, edges);
                continue;
            }
            (
                opcode == InstructionOpcode::And,
                opcode == InstructionOpcode::Or,
            )
        } else {
            (false, false)
        };
        if (and && when) || (or && !when) {
            nonnull_edges(user, when, depth + 1, predecessors, edges);
        }
    }
}

/// Each block's predecessor where it has exactly one (through one edge), else `None`.
fn single_predecessors(function: Function<'_>) -> Predecessors<'_> {
    let mut predecessors = HashMap::new();
    for block in function.blocks() {
        if let Some(terminator) = block.terminator() {
            for successor in terminator.successors() {
                predecessors
                    .entry(successor)
                    .and_modify(|single| *single = None)
                    .or_insert(Some(block));
            }
        }
    }
    predecessors
}

/// Whether every path to `block` goes through `edge_target` (a block with one predecessor):
/// `block` is `edge_target` or below it through blocks of one predecessor each.
fn only_reached_through<'m>(
    mut block: Block<'m>,
    edge_target: Block<'m>,
    predecessors: &Predecessors<'m>,
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
fn null_tests(function: Function<'_>) -> Vec<ICmp<'_>> {
    let mut tests = Vec::new();
    for block in function.blocks() {
        for inst in block.instructions() {
            let Some(icmp) = inst.as_icmp() else {
                continue;
            };
            let a = operand(icmp, 0);
            if a.ty().is_pointer()
                && (compares_with_null(inst, a) || compares_with_null(inst, operand(icmp, 1)))
            {
                tests.push(icmp);
            }
        }
    }
    tests
}

/// What a function's entry block assumes, and the conditions already built.
struct Facts<'m> {
    /// Pointers and integers the entry block assumes non-null and non-zero.
    assumed: HashSet<Value<'m>>,
    /// Conditions of the phis and selects already seen (`None`: none can be given).
    known: HashMap<Value<'m>, Option<NonNull<'m>>>,
    /// The values the phis and selects already seen have where they are not null.
    elements: HashMap<Value<'m>, Option<Value<'m>>>,
    /// The `nonnull` metadata kind.
    nonnull: MetadataKind,
}

impl<'m> Facts<'m> {
    /// The facts of `function`, a function with a body; `nonnull` is the metadata kind.
    fn of(function: Function<'m>, nonnull: MetadataKind) -> Self {
        let mut assumed = HashSet::new();
        let entry = function.entry_block().expect("a function with a body");
        for inst in entry.instructions() {
            if let Some(value) = assumed_nonzero(inst) {
                assumed.insert(value);
            }
        }
        Facts {
            assumed,
            known: HashMap::new(),
            elements: HashMap::new(),
            nonnull,
        }
    }

    /// Where the branch on `test` leads only when `pointer` is not null, makes the uses of
    /// `pointer` below that edge use [`Facts::element`] instead: the address itself, not the
    /// select or phi that merges it with null. Without it the merge stays for the loads and
    /// stores (a select of two registers per accessor), though the test is gone.
    fn use_element_past_test(
        &mut self,
        builder: &Builder<'m>,
        test: ICmp<'m>,
        pointer: Value<'m>,
        is_ne: bool,
        predecessors: &Predecessors<'m>,
    ) {
        let mut guarded = Vec::new();
        nonnull_edges(test.as_value(), is_ne, 0, predecessors, &mut guarded);
        if guarded.is_empty() {
            return;
        }
        for user in pointer.users() {
            // A phi's use is at the end of its incoming block, not where the phi is.
            let Some(user) = user.as_instruction().filter(|u| *u != *test && !u.is_phi()) else {
                continue;
            };
            let block = user.block();
            if !guarded
                .iter()
                .any(|&edge| only_reached_through(block, edge, predecessors))
            {
                continue;
            }
            let Some(element) = self.element(builder, pointer, 0) else {
                return;
            };
            user.replace_operand(pointer, element);
        }
    }

    /// The value `pointer` has wherever it is not null: a select's non-null arm, a phi of
    /// its incoming values' (poison on the edges where it is null); `None` when it cannot be
    /// told. It is defined where `pointer` is: a select's operands are, and a phi is rebuilt
    /// in the block of the phi.
    fn element(
        &mut self,
        builder: &Builder<'m>,
        pointer: Value<'m>,
        depth: u32,
    ) -> Option<Value<'m>> {
        if is_null_constant(pointer) || depth >= MAX_DEPTH {
            return None;
        }
        if self.is_nonnull(pointer, 0) {
            return Some(pointer);
        }
        if let Some(known) = self.elements.get(&pointer) {
            return *known;
        }
        let found = if pointer.is_select() {
            let (on_true, on_false) = (operand(pointer, 1), operand(pointer, 2));
            if is_null_constant(on_false) {
                self.element(builder, on_true, depth + 1)
            } else if is_null_constant(on_true) {
                self.element(builder, on_false, depth + 1)
            } else {
                None
            }
        } else if pointer.is_phi() {
            self.phi_element(builder, pointer, depth)
        } else {
            None
        };
        self.elements.insert(pointer, found);
        found
    }

    /// [`Facts::element`] of a phi.
    fn phi_element(
        &mut self,
        builder: &Builder<'m>,
        phi: Value<'m>,
        depth: u32,
    ) -> Option<Value<'m>> {
        let phi = phi.as_phi()?;
        let ty = phi.ty();
        let count = phi.count_incoming();
        let mut incoming = Vec::with_capacity(count as usize);
        for i in 0..count {
            let (value, from) = phi.incoming(i)?;
            let element = if is_null_constant(value) {
                ty.poison()
            } else {
                self.element(builder, value, depth + 1)?
            };
            incoming.push((element, from));
        }
        builder.position_at_start(phi.block());
        let new = builder.build_phi(ty, c"element");
        for (value, from) in incoming {
            new.add_incoming(value, from);
        }
        Some(new.as_value())
    }

    /// Whether `pointer` is non-null, as a constant or a condition built in the IR; `None`
    /// when it cannot be told.
    fn condition(
        &mut self,
        builder: &Builder<'m>,
        pointer: Value<'m>,
        depth: u32,
    ) -> Option<NonNull<'m>> {
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
        let found = if pointer.is_select() {
            self.select_condition(builder, pointer, depth)
        } else if pointer.is_phi() {
            self.phi_condition(builder, pointer, depth)
        } else {
            None
        };
        self.known.insert(pointer, found);
        found
    }

    /// `select c, a, b` where `a` and `b` are each null or known non-null.
    fn select_condition(
        &mut self,
        builder: &Builder<'m>,
        select: Value<'m>,
        depth: u32,
    ) -> Option<NonNull<'m>> {
        let condition = operand(select, 0);
        let on_true = self.condition(builder, operand(select, 1), depth + 1)?;
        let on_false = self.condition(builder, operand(select, 2), depth + 1)?;
        Some(match (on_true, on_false) {
            (a, b) if a == b => a,
            (NonNull::Always, NonNull::Never) => NonNull::When(condition),
            (NonNull::Never, NonNull::Always) => {
                builder.position_before(select.as_instruction()?);
                NonNull::When(builder.build_not(condition, c""))
            }
            _ => return None,
        })
    }

    /// A phi of pointers each null, known non-null, or a select of those: an `i1` phi of
    /// their conditions on the same edges.
    fn phi_condition(
        &mut self,
        builder: &Builder<'m>,
        phi: Value<'m>,
        depth: u32,
    ) -> Option<NonNull<'m>> {
        let phi = phi.as_phi()?;
        let count = phi.count_incoming();
        let mut incoming = Vec::with_capacity(count as usize);
        for i in 0..count {
            let (value, from) = phi.incoming(i)?;
            // A select's condition is an operand of the select, so it is available
            // wherever the select is: at the end of the incoming block.
            let condition = self.condition(builder, value, depth + 1)?;
            incoming.push((condition, from));
        }
        let first = incoming.first()?.0;
        if incoming.iter().all(|(c, _)| *c == first) {
            return Some(first);
        }
        let i1 = phi.ty().i1_in_context();
        builder.position_at_start(phi.block());
        let new = builder.build_phi(i1, c"nonnull");
        for (condition, from) in incoming {
            let value = match condition {
                NonNull::Always => i1.const_int(1, false),
                NonNull::Never => i1.const_int(0, false),
                NonNull::When(value) => value,
            };
            new.add_incoming(value, from);
        }
        Some(NonNull::When(new.as_value()))
    }

    /// Whether `pointer` cannot be null (see the module's documentation).
    fn is_nonnull(&self, pointer: Value<'m>, depth: u32) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        if self.assumed.contains(&pointer) {
            return true;
        }
        if let Some(gep) = pointer.as_gep() {
            return is_generic_or_global(pointer)
                && gep.is_in_bounds()
                && self.is_nonnull(operand(gep, 0), depth + 1);
        }
        if pointer.is_addrspacecast() {
            let from = operand(pointer, 0);
            return is_generic_or_global(pointer)
                && is_generic_or_global(from)
                && self.is_nonnull(from, depth + 1);
        }
        if pointer.is_inttoptr() {
            return self.assumed.contains(&operand(pointer, 0));
        }
        if let Some(argument) = pointer.as_argument() {
            return argument.has_enum_attribute("nonnull");
        }
        if let Some(load) = pointer.as_load() {
            return load.has_metadata(self.nonnull);
        }
        false
    }
}

/// The value `inst` assumes non-null or non-zero: `call @llvm.assume(icmp ne %v, null/0)`.
fn assumed_nonzero(inst: Instruction<'_>) -> Option<Value<'_>> {
    let call = inst.as_call()?;
    if call.callee_name() != b"llvm.assume" {
        return None;
    }
    let test = call.operand(0)?.as_icmp()?;
    if test.predicate() != IntPredicate::NE {
        return None;
    }
    let (a, b) = (operand(test, 0), operand(test, 1));
    match (is_null_constant(a), is_null_constant(b)) {
        (false, true) => Some(a),
        (true, false) => Some(b),
        _ => None,
    }
}

/// Whether `value` is a constant null pointer or zero, or the generic null cast to the
/// global address space (the AMDGPU entry's pointers are global, and LLVM keeps that cast as a
/// constant expression, not knowing it is the global null).
fn is_null_constant(value: Value<'_>) -> bool {
    if !value.is_constant() {
        return false;
    }
    if value.is_null_constant() {
        return true;
    }
    value.const_opcode() == Some(InstructionOpcode::AddrSpaceCast)
        && is_generic_or_global(value)
        && operand(value, 0).is_null_constant()
}

/// Whether `pointer` is in the generic or the global address space: on both GPU targets the
/// two have the same null, 0, which no in-bounds address is, and a cast between them keeps
/// the address.
fn is_generic_or_global(pointer: Value<'_>) -> bool {
    matches!(pointer.ty().address_space(), Some(0 | 1))
}

#[cfg(test)]
mod tests {
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;
    use inkwell::module::Module;

    use super::super::tests::{bitcode, link};
    use super::fold_null_tests;
    use crate::device_link::rlib_bitcode::DeviceInput;

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
