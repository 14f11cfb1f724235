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

#![forbid(unsafe_code)]

use std::ffi::CStr;

use inkwell::IntPredicate;
use inkwell::module::Module;
use inkwell::values::InstructionOpcode;

use super::condition_chains::is_plain_arithmetic;
use super::ir::{self, Block, Branch, Builder, Call, Function, Instruction, Type, Value};
use super::panics::site_calls;

/// offload-rt's `kernel::gpu_channel::__offload_gpu_panic_at_thread(thread, site, a, b, c,
/// values)`, on AMD GPUs only: `values` says how many of `a`, `b` and `c` the site passes.
pub(super) const THREAD_REPORTER: &str = offload_format::abi::GPU_PANIC_AT_THREAD;
/// offload-rt's `kernel::gpu_channel::__offload_gpu_thread_index()`, on AMD GPUs only.
pub(super) const THREAD_INDEX: &str = offload_format::abi::GPU_THREAD_INDEX;

/// An intrinsic of the module overloaded on `overloads`, declared where missing.
fn intrinsic<'m>(module: ir::Module<'m>, name: &str, overloads: &[Type<'m>]) -> Function<'m> {
    module
        .intrinsic(name, overloads)
        .unwrap_or_else(|| panic!("LLVM knows `{name}`"))
}

/// With the panic strategy `trap` on AMD GPUs: makes each divergent conditional branch to a
/// block that only traps (`llvm.trap`, then `unreachable`) scalar, taken when any active lane
/// takes it (a branch on the condition's ballot), as [`make_sites_uniform`] does for the
/// branches to a report. A trap ends the whole wavefront however many of its lanes reach it,
/// so only the branch changes: it needs no exec-mask bookkeeping around the trap, and where
/// several checks share one trap block ([`super::shared_traps`]) the structurizer joins no
/// divergent paths there. Returns how many branches changed.
pub(super) fn uniform_traps(module: &Module<'_>) -> usize {
    let module = ir::Module::new(module);
    // Collected before any changes.
    let mut branches: Vec<(Branch<'_>, Block<'_>, bool)> = Vec::new();
    for function in module.functions() {
        for block in function.blocks() {
            if !only_traps(block) {
                continue;
            }
            for use_ in block.uses() {
                let Some(branch) = use_.user().as_branch() else {
                    continue;
                };
                if branch.condition().is_none_or(|c| is_uniform(c, 8)) {
                    continue;
                }
                let traps_when_true = branch.successor(0) == Some(block);
                if traps_when_true == (branch.successor(1) == Some(block)) {
                    continue;
                }
                if !branches.iter().any(|(b, _, _)| *b == branch) {
                    branches.push((branch, block, traps_when_true));
                }
            }
        }
    }
    if branches.is_empty() {
        return 0;
    }
    let i64_type = module.i64_type();
    let ballot = intrinsic(module, "llvm.amdgcn.ballot", &[i64_type]);
    let builder = module.builder();
    for &(branch, trap, traps_when_true) in &branches {
        branch_when_any(
            &builder,
            ballot,
            i64_type,
            branch,
            trap,
            traps_when_true,
            c"offload.any_traps",
        );
    }
    branches.len()
}

/// Whether `block` holds a call of `llvm.trap` and `unreachable`, and nothing else.
fn only_traps(block: Block<'_>) -> bool {
    block.first_instruction().is_some_and(|first| {
        first
            .as_call()
            .is_some_and(|call| call.callee_name() == b"llvm.trap")
            && first.next().is_some_and(Instruction::is_unreachable)
    })
}

/// In each function whose every call of the `site_reporters` (each followed by `unreachable`)
/// is entered by a branch that is or can be made scalar ([`site_entry`]), makes those branches
/// scalar and each call one of `thread_reporter` with the values and the thread index
/// (`thread_index`, called where the function starts) of the first failing lane. A function
/// with a site that cannot be is left as it is: its sites meet at a divergent join, where
/// scalar values would not stay scalar. Returns how many sites changed.
pub(super) fn make_sites_uniform<'m>(
    module: ir::Module<'m>,
    site_reporters: &[Function<'m>],
    thread_reporter: Function<'m>,
    thread_index: Function<'m>,
) -> usize {
    let mut functions = Vec::new();
    let builder = module.builder();
    for function in module.functions() {
        let calls = site_calls(function, site_reporters)
            .into_iter()
            .flat_map(|call| split_merged(&builder, call))
            .collect::<Vec<_>>();
        let branches: Option<Vec<(Call<'m>, Entry<'m>)>> = calls
            .into_iter()
            .map(|call| Some((call, site_entry(call.block(), call)?)))
            .collect();
        if let Some(sites) = branches.filter(|b| !b.is_empty()) {
            functions.push((function, sites));
        }
    }
    if functions.is_empty() {
        return 0;
    }
    // Each call is erased once its replacement is built before it, and nothing else refers
    // to it. An entry block ends in a terminator, so the walk past its allocas stops.
    let i1 = module.i1_type();
    let i32_type = module.i32_type();
    let i64_type = module.i64_type();
    let ballot = intrinsic(module, "llvm.amdgcn.ballot", &[i64_type]);
    let cttz = intrinsic(module, "llvm.cttz", &[i64_type]);
    let readlane = intrinsic(module, "llvm.amdgcn.readlane", &[i64_type]);
    let readlane_u32 = intrinsic(module, "llvm.amdgcn.readlane", &[i32_type]);
    // An empty instruction taking the thread's index, packed in one word, in a vector
    // register: the index is computed before it, where the function starts, and not sunk
    // to the panic sites, which would keep the three indices live until there.
    let pin_type = module.void_type().function_type(&[i32_type], false);
    let pin = module.inline_asm(pin_type, "", "v", true, false);
    let mut changed = 0;
    for (function, sites) in functions {
        let entry = function
            .entry_block()
            .expect("a function with sites has a body");
        let mut start = entry
            .first_instruction()
            .expect("an entry block ends in a terminator");
        while start.is_alloca() || start.is_phi() {
            start = start.next().expect("an entry block ends in a terminator");
        }
        builder.position_before(start);
        let index = builder
            .build_call(thread_index, &[], c"offload.thread_index")
            .as_value();
        builder.build_call_typed(pin_type, pin, &[index], c"");
        // How many values the reports write: the most any site of the function passes, the
        // same for every site, so that their calls, once merged, still pass a constant.
        let values = sites
            .iter()
            .map(|&(call, _)| call.num_args().max(1) - 1)
            .max()
            .unwrap_or(0);
        for (call, entry) in sites {
            changed += 1;
            let block = call.block();
            let mask = match entry {
                Entry::Divergent {
                    branch,
                    panics_when_true,
                } => {
                    let assumptions: Vec<Instruction<'_>> = block
                        .instructions()
                        .take_while(|&i| i != *call)
                        .filter(|&i| is_assume(i))
                        .collect();
                    for assumption in assumptions {
                        assumption.erase();
                    }
                    branch_when_any(
                        &builder,
                        ballot,
                        i64_type,
                        branch,
                        block,
                        panics_when_true,
                        c"offload.any_panics",
                    )
                }
                Entry::Uniform => {
                    builder.position_before(*call);
                    builder
                        .build_call(ballot, &[i1.const_int(1, false)], c"")
                        .as_value()
                }
            };
            builder.position_before(*call);
            let first = builder.build_call(cttz, &[mask, i1.const_int(1, false)], c"");
            let lane = builder.build_trunc(first.as_value(), i32_type, c"offload.lane");
            let mut args = vec![
                builder
                    .build_call(readlane_u32, &[index, lane], c"")
                    .as_value(),
            ];
            let count = call.num_args();
            for i in 0..4 {
                let value = match call.operand(i) {
                    Some(value) if i < count => value,
                    _ => i64_type.const_int(0, false),
                };
                args.push(if is_uniform(value, 8) {
                    value
                } else {
                    builder.build_call(readlane, &[value, lane], c"").as_value()
                });
            }
            args.push(i32_type.const_int(u64::from(values), false));
            let new = builder.build_call(thread_reporter, &args, c"");
            new.copy_debug_location_from(*call);
            call.erase();
        }
    }
    changed
}

/// A site whose block several branches enter, its call's arguments phis of theirs (the
/// optimizer merged their calls): one block and call for each branch instead, so that each
/// branch can be made scalar (the site stage's `merge_site_calls` joins them again where
/// the values are scalar). Returns the calls that stand for `call`: itself where it is not
/// such a site. `call` is a site call followed by `unreachable`.
fn split_merged<'m>(builder: &Builder<'m>, call: Call<'m>) -> Vec<Call<'m>> {
    // The uses of a block are the terminators branching to it, and the block is erased only
    // once nothing branches to it or uses its values.
    let block = call.block();
    let mut phis = Vec::new();
    let mut instruction = block.first_instruction().expect("the call is in its block");
    while instruction != *call {
        let used_by_the_call_alone = instruction
            .single_use()
            .is_some_and(|u| u.user() == call.as_value());
        if !instruction.is_phi() || !used_by_the_call_alone {
            return vec![call];
        }
        phis.push(instruction);
        instruction = instruction.next().expect("the call is in its block");
    }
    let mut branches: Vec<Branch<'m>> = Vec::new();
    for use_ in block.uses() {
        match use_.user().as_branch() {
            Some(branch) if !branches.contains(&branch) => branches.push(branch),
            _ => return vec![call],
        }
    }
    if branches.len() < 2 {
        return vec![call];
    }
    let callee = call
        .called_function()
        .expect("a site call calls a reporter");
    let function = block.function();
    let debuginfo = call.debug_location();
    let mut calls = Vec::new();
    for branch in branches {
        let from = branch.block();
        let site = function.append_block(c"offload.site");
        builder.position_at_end(site);
        let args: Vec<Value<'m>> = call
            .args()
            .map(|arg| {
                if !phis.iter().any(|phi| phi.as_value() == arg) {
                    return arg;
                }
                arg.as_phi()
                    .and_then(|phi| phi.incoming_from(from))
                    .unwrap_or_else(|| arg.ty().undef())
            })
            .collect();
        let new = builder.build_call(callee, &args, c"");
        new.set_debug_location(debuginfo);
        builder.build_unreachable();
        for i in 0..branch.num_successors() {
            if branch.successor(i) == Some(block) {
                branch.set_successor(i, site);
            }
        }
        calls.push(new);
    }
    call.erase();
    for phi in phis {
        phi.erase();
    }
    block.delete();
    calls
}

/// How the lanes come to a panic site's block.
#[derive(Clone, Copy)]
enum Entry<'m> {
    /// By the conditional branch `branch` on a test that differs between lanes, to the site
    /// when the test is `panics_when_true`: it becomes a branch on whether any lane fails.
    Divergent {
        branch: Branch<'m>,
        panics_when_true: bool,
    },
    /// By a branch on a value the same in every lane: every active lane comes already.
    Uniform,
}

/// How the lanes come to `block`, where it is entered by one conditional branch alone, and,
/// for a [`Entry::Divergent`] branch, every instruction of `block` before `call` may run in
/// lanes that do not panic. `call` is an instruction of `block`.
fn site_entry<'m>(block: Block<'m>, call: Call<'m>) -> Option<Entry<'m>> {
    // The uses of a block are the terminators branching to it.
    let branch = block.single_use()?.user().as_branch()?;
    let condition = branch.condition()?;
    if is_uniform(condition, 8) {
        return Some(Entry::Uniform);
    }
    let mut instruction = block.first_instruction()?;
    while instruction != *call {
        if !computes_only(instruction.opcode()) && !is_assume(instruction) {
            return None;
        }
        instruction = instruction.next()?;
    }
    match (
        branch.successor(0) == Some(block),
        branch.successor(1) == Some(block),
    ) {
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

/// Whether `instruction` calls `llvm.assume`: what it states holds in the lanes that panic,
/// not in the others, so the stage drops it from a block every lane enters.
fn is_assume(instruction: Instruction<'_>) -> bool {
    instruction
        .as_call()
        .is_some_and(|call| call.callee_name().starts_with(b"llvm.assume"))
}

/// Whether `value` is the same in every lane, as far as `depth` levels of operands show: a
/// constant, a kernel's parameter, a value computed from such values, a load from such an
/// address, or the workgroup's place and sizes. A branch on such a value is scalar already; a
/// ballot would move its test into vector registers.
fn is_uniform(value: Value<'_>, depth: u32) -> bool {
    if value.is_constant() || value.is_argument() {
        return true;
    }
    if depth == 0 {
        return false;
    }
    let Some(instruction) = value.as_instruction() else {
        return false;
    };
    let opcode = instruction.opcode();
    let operands = instruction.num_operands();
    let all_uniform = |from: u32, to: u32| {
        (from..to).all(|i| {
            instruction
                .operand(i)
                .is_some_and(|operand| is_uniform(operand, depth - 1))
        })
    };
    match opcode {
        InstructionOpcode::Load => all_uniform(0, operands),
        InstructionOpcode::Call => {
            let name = instruction.as_call().map_or(&[][..], Call::callee_name);
            // A ballot is the wavefront's mask, whatever its lanes' operands.
            name.starts_with(b"llvm.amdgcn.ballot")
                || UNIFORM_INTRINSICS
                    .iter()
                    .any(|u| name.starts_with(u.as_bytes()))
                    && all_uniform(0, operands - 1)
        }
        InstructionOpcode::Phi => false,
        opcode if computes_only(opcode) => all_uniform(0, operands),
        _ => false,
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
fn computes_only(opcode: InstructionOpcode) -> bool {
    use InstructionOpcode::*;
    is_plain_arithmetic(opcode)
        || matches!(
            opcode,
            PtrToInt
                | IntToPtr
                | BitCast
                | AddrSpaceCast
                | Select
                | ExtractValue
                | InsertValue
                | Freeze
                | Phi
        )
}

/// Makes the conditional `branch` scalar: it goes to `target` (the successor its condition
/// takes when it is `taken_when_true`) when any lane of the wavefront would, to its other
/// successor when none would. Returns the wavefront's ballot of the lanes that would.
/// `target` is one of `branch`'s successors; `ballot` is its module's `llvm.amdgcn.ballot`
/// on `i64_type`.
fn branch_when_any<'m>(
    builder: &Builder<'m>,
    ballot: Function<'m>,
    i64_type: Type<'m>,
    branch: Branch<'m>,
    target: Block<'m>,
    taken_when_true: bool,
    name: &CStr,
) -> Value<'m> {
    // The new values are built before the branch they feed.
    builder.position_before(branch.instruction());
    let condition = branch.condition().expect("a conditional branch");
    let taken = if taken_when_true {
        condition
    } else {
        builder.build_not(condition, c"")
    };
    let mask = builder.build_call(ballot, &[taken], c"").as_value();
    let any = builder.build_icmp(IntPredicate::NE, mask, i64_type.const_int(0, false), name);
    let other = branch
        .successor(u32::from(taken_when_true))
        .expect("a conditional branch has two successors");
    branch.set_condition(any);
    branch.set_successor(0, target);
    branch.set_successor(1, other);
    mask
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
        let ir = ir::Module::new(&module);
        let reporter = |name: &str| ir.function(name).unwrap();
        let site_reporters = [
            reporter(offload_format::abi::GPU_PANIC_AT1),
            reporter(offload_format::abi::GPU_PANIC_AT2),
        ];
        let changed = make_sites_uniform(
            ir,
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
