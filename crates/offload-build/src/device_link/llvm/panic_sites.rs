//! Panic sites described at link time. After optimization each place a kernel can
//! panic is one call of offload-rt's reporter, mostly with a constant kind, message and
//! location: this stage writes those into the module's panic-site table
//! (`offload_format::panic_sites`) and makes each such call one of [`SITE_REPORTER`] with the
//! site's number and the raw values. The kernel then copies no string when it
//! panics: on NVIDIA a kernel pays for the registers of everything its panic path does (the
//! reporter's string copies cost a bounds-checked gather 22 registers where its hot path needs
//! 10, and generic loads of the strings), on AMD the VGPRs of the copies inlined at each site.
//! Calls whose arguments are not constants keep the reporter, which records the text itself.
//! With the panic strategy `trap` ([`trap_panics`]) no call is left to describe.

#![forbid(unsafe_code)]

use inkwell::IntPredicate;
use inkwell::module::{Linkage, Module};
use inkwell::targets::TargetMachine;
use inkwell::values::InstructionOpcode;
use offload_format::panic_sites::{self, PanicSite, PanicSites};

use super::codegen::{INLINE_AND_CLEAN_UP, run_pipeline};
use super::common::is_amdgpu;
use super::ir::{self, Block, Call, Function, GlobalVariable, Phi, Type, TypeKind, Value};
use super::panics::{REPORTER, make_inlinable, site_calls};
use super::shared_memory::compares_with_null;
use super::uniform_panics::{self, THREAD_INDEX, THREAD_REPORTER};
use crate::device_link::error::{LinkError, Result};

/// offload-rt's `kernel::gpu_channel::__offload_gpu_panic_at(site, a, b, c)`.
pub(super) const SITE_REPORTER: &str = offload_format::abi::GPU_PANIC_AT;
/// The site reporters by the number of values they take (`__offload_gpu_panic_at0(site)` to
/// [`SITE_REPORTER`]): a call passes the values up to the last one that is not a constant
/// zero, each parameter being a register pair of NVIDIA's calling convention.
pub(super) const SITE_REPORTERS: [&str; 4] = [
    offload_format::abi::GPU_PANIC_AT0,
    offload_format::abi::GPU_PANIC_AT1,
    offload_format::abi::GPU_PANIC_AT2,
    SITE_REPORTER,
];
/// offload-rt's `kernel::gpu_channel::__offload_gpu_panic_finish()`, which both reporters call
/// on NVIDIA: it completes the report of the thread that claimed it.
pub(super) const FINISH: &str = offload_format::abi::GPU_PANIC_FINISH;
/// The panic path's functions, external until [`describe_sites`]: the optimizer must neither
/// change the reporter's parameters (the stage reads them by position) nor drop the
/// [`SITE_REPORTERS`], which nothing calls before the stage.
pub(super) const LATE: [&str; 8] = [
    REPORTER,
    THREAD_REPORTER,
    THREAD_INDEX,
    SITE_REPORTERS[0],
    SITE_REPORTERS[1],
    SITE_REPORTERS[2],
    SITE_REPORTER,
    FINISH,
];

/// The panic strategy `trap` (`[package.metadata.offload] panic = "trap"`, see
/// `crate::metadata::PanicStrategy`): gives each of offload-rt's panic reporters
/// ([`REPORTER`], the site reporters, the AMD thread reporter and NVIDIA's finish, the
/// functions of [`LATE`] but the thread index) a body that is the target's
/// trap, `llvm.trap` then `unreachable` (`trap;` on NVIDIA, `s_trap 2` on AMD GPUs), made
/// internal and always inlined. Runs before optimization: every panic site becomes a trap, and
/// nothing else, as soon as the reporter inlines there, so LLVM drops what only a report would
/// have read (the messages, locations, indices and lengths), and [`describe_sites`] finds no
/// call to describe: no panic-site table, no access to the channel but the prints'. On AMD GPUs
/// [`uniform_panics::uniform_traps`] then makes the branches to the traps scalar. Every check
/// stays; what reaches the reporter is already a failed one. Returns how many reporters
/// changed.
///
/// Here rather than in offload-rt under a cfg of the nested build (`--cfg offload_panic_trap`
/// in its flags): the nested build, its bitcode and so the build caches' units are the same
/// for both strategies, the choice costs no rebuild of `core` and the kernel crate, and the
/// images are as small either way, since the same `llvm.trap` reaches every site.
pub(super) fn trap_panics(module: &Module<'_>) -> Result<usize> {
    use inkwell::attributes::{Attribute, AttributeLoc};
    use inkwell::intrinsics::Intrinsic;

    let context = module.get_context();
    let failed = |message: String| LinkError::Codegen {
        cpu: "device link".into(),
        message,
    };
    let trap = Intrinsic::find("llvm.trap")
        .and_then(|i| i.get_declaration(module, &[]))
        .ok_or_else(|| failed("no llvm.trap intrinsic".into()))?;
    let mut changed = 0;
    for name in LATE {
        let Some(old) = module.get_function(name) else {
            continue;
        };
        if old.count_basic_blocks() == 0 {
            continue;
        }
        if name == THREAD_INDEX {
            // Not a reporter: only the AMD report reads it, and no report is left.
            old.as_global_value().set_linkage(Linkage::Internal);
            continue;
        }
        old.as_global_value()
            .set_name(&format!("{name}.offload.replaced"));
        let trapping = module.add_function(name, old.get_type(), Some(Linkage::Internal));
        for kind in ["noreturn", "nounwind", "cold"] {
            trapping.add_attribute(
                AttributeLoc::Function,
                context.create_enum_attribute(Attribute::get_named_enum_kind_id(kind), 0),
            );
        }
        let builder = context.create_builder();
        builder.position_at_end(context.append_basic_block(trapping, "entry"));
        builder
            .build_call(trap, &[], "")
            .and_then(|_| builder.build_unreachable())
            .map_err(|e| failed(format!("making {name} a trap: {e}")))?;
        old.as_global_value()
            .as_pointer_value()
            .replace_all_uses_with(trapping.as_global_value().as_pointer_value());
        // Every use of `old` now refers to `trapping`; nothing refers to `old` any more.
        ir::Module::new(module).wrap_function(old).delete();
        make_inlinable(module, trapping);
        changed += 1;
    }
    Ok(changed)
}

/// Describes the module's constant panic sites, gives each function one call of a site
/// reporter ([`merge_site_calls`]), makes the panic path inlinable where the triple wants it,
/// internalizes [`LATE`] and drops what nothing calls. On NVPTX the one site reporter of a
/// function is inlined (its claim and stores), the report's finish and the wait stay out of
/// line: ptxas gives a kernel fewer registers for those calls than for their copies (measured
/// on the parity benchmark: all inlined, a bounds-checked gather takes 18 registers on sm_80,
/// 13 so, as ptxas keeps the kernel's own index reads live for an inlined finish; the site
/// reporter inlined rather than called, 16 instead of 18 on sm_90 and 3 to 21 instructions
/// fewer in every kernel that can panic). On AMDGPU everything is inlined: a
/// call costs the calling convention's VGPRs and scratch; and, where offload-rt has the
/// reporter, the branches to the sites are made scalar first ([`uniform_panics`]). Returns how
/// many calls now name a site.
pub(super) fn describe_sites(module: &Module<'_>, machine: &TargetMachine) -> Result<usize> {
    let amdgpu = is_amdgpu(module);
    let ir = ir::Module::new(module);
    let site_reporters: Vec<Function<'_>> = SITE_REPORTERS
        .iter()
        .enumerate()
        .filter_map(|(values, name)| {
            let f = module.get_function(name)?;
            (f.count_basic_blocks() > 0 && f.count_params() == values as u32 + 1)
                .then(|| ir.wrap_function(f))
        })
        .collect();
    let described = match module.get_function(REPORTER) {
        Some(reporter)
            if reporter.count_basic_blocks() > 0
                && reporter.count_params() == 7
                && site_reporters.len() == SITE_REPORTERS.len() =>
        {
            let described =
                rewrite_calls(module, ir.wrap_function(reporter), &site_reporters, amdgpu)?;
            let thread_reporter = module
                .get_function(THREAD_REPORTER)
                .filter(|f| amdgpu && f.count_basic_blocks() > 0 && f.count_params() == 6);
            let thread_index = module
                .get_function(THREAD_INDEX)
                .filter(|f| f.count_basic_blocks() > 0 && f.count_params() == 0);
            let mut reporters = site_reporters.clone();
            if let (Some(reporter), Some(index)) = (thread_reporter, thread_index) {
                let reporter = ir.wrap_function(reporter);
                uniform_panics::make_sites_uniform(
                    ir,
                    &site_reporters,
                    reporter,
                    ir.wrap_function(index),
                );
                reporters.push(reporter);
            }
            merge_site_calls(module, &reporters);
            described
        }
        _ => 0,
    };
    for name in LATE {
        let Some(f) = module.get_function(name) else {
            continue;
        };
        if f.count_basic_blocks() == 0 {
            continue;
        }
        f.as_global_value().set_linkage(Linkage::Internal);
        if amdgpu || SITE_REPORTERS.contains(&name) {
            make_inlinable(module, f);
        }
    }
    run_pipeline(module, INLINE_AND_CLEAN_UP, machine)?;
    if !amdgpu {
        narrow_site_phis(module);
    }
    Ok(described)
}

/// Gives each phi of the report blocks ([`REPORT_BLOCK`]) whose 64-bit constants differ in
/// their low halves only (the site values of one table, [`panic_sites::site_value`]) a phi of
/// those halves, the high half or-ed in after it: a register per site value instead of a
/// pair, held through the kernel until the report.
fn narrow_site_phis(module: &Module<'_>) {
    let ir = ir::Module::new(module);
    let i32_type = ir.i32_type();
    let i64_type = ir.i64_type();
    // The phis are collected before any is changed; each is replaced in all its uses and
    // erased once its replacement is built.
    let phis: Vec<Phi<'_>> = ir
        .functions()
        .flat_map(|f| f.blocks())
        .filter(|b| b.as_value().name() == REPORT_BLOCK.to_bytes())
        .flat_map(|b| b.instructions().map_while(|i| i.as_phi()))
        .filter(|phi| phi.ty() == i64_type)
        .collect();
    let builder = ir.builder();
    for phi in phis {
        let incoming: Option<Vec<u64>> = phi.incomings().map(|(v, _)| constant_int(v)).collect();
        let Some(values) = incoming else { continue };
        let high = values.first().map(|v| v >> 32);
        if values.len() < 2
            || values.iter().any(|v| Some(v >> 32) != high)
            || values.iter().all(|v| *v == values[0])
        {
            continue;
        }
        let block = phi.block();
        builder.position_before(*phi);
        let narrow = builder.build_phi(i32_type, c"offload.site");
        for (i, value) in values.iter().enumerate() {
            let low = i32_type.const_int(value & u64::from(u32::MAX), false);
            let (_, from) = phi.incoming(i as u32).expect("an incoming edge per value");
            narrow.add_incoming(low, from);
        }
        let after = block
            .instructions()
            .find(|i| !i.is_phi())
            .expect("a block ends in a terminator");
        builder.position_before(after);
        let wide = builder.build_zext(narrow.as_value(), i64_type, c"");
        let site = builder.build_or(
            wide,
            i64_type.const_int(high.unwrap_or(0) << 32, false),
            c"",
        );
        phi.replace_all_uses_with(site);
        phi.erase();
    }
}

/// Replaces each call of `reporter` whose site is constant by a call of `at`, and adds the
/// table. Returns how many calls changed.
fn rewrite_calls<'m>(
    module: &'m Module<'_>,
    reporter: Function<'m>,
    site_reporters: &[Function<'m>],
    amdgpu: bool,
) -> Result<usize> {
    let mut table = PanicSites::default();
    let mut calls = Vec::new();
    for call in calls_of(ir::Module::new(module), reporter) {
        if let Some(sites) = call_sites(call) {
            let sites = sites
                .into_iter()
                .map(|(block, site)| (block, table.intern(site)))
                .collect::<Vec<_>>();
            calls.push((call, sites));
        }
    }
    if calls.is_empty() {
        return Ok(0);
    }
    let bytes = table.to_bytes().map_err(|e| LinkError::Link {
        name: panic_sites::SYMBOL.into(),
        message: e.to_string(),
    })?;
    let id = table.id();
    let context = module.get_context();
    let global = module.add_global(
        context.i8_type().array_type(bytes.len() as u32),
        None,
        panic_sites::SYMBOL,
    );
    global.set_initializer(&context.const_string(&bytes, false));
    global.set_constant(true);
    global.set_linkage(Linkage::External);
    if amdgpu {
        // AMD code objects export only non-hidden symbols; the runtime looks the table up.
        global.set_visibility(inkwell::GlobalVisibility::Protected);
    }
    // Each call is erased after the new one is built before it, and no other handle to it is
    // used.
    let ir = ir::Module::new(module);
    let i64_type = ir.i64_type();
    let builder = ir.builder();
    for &(call, ref sites) in &calls {
        let value = |index: usize| i64_type.const_int(panic_sites::site_value(id, index), false);
        let site = match sites.as_slice() {
            [(None, index)] => value(*index),
            _ => {
                builder.position_at_start(call.block());
                let phi = builder.build_phi(i64_type, c"site");
                for (from, index) in sites {
                    phi.add_incoming(value(*index), from.expect("a phi's block"));
                }
                phi.as_value()
            }
        };
        let values = [3, 4, 5].map(|i| call.operand(i).expect("the reporter's seven arguments"));
        let count = values
            .iter()
            .rposition(|&v| constant_int(v) != Some(0))
            .map_or(0, |last| last + 1);
        let at = site_reporters[count];
        let args = [site, values[0], values[1], values[2]];
        builder.position_before(*call);
        let new = builder.build_call(at, &args[..count + 1], c"");
        // The panic's source line, where a dev build keeps line information.
        new.set_debug_location(call.debug_location());
        call.erase();
    }
    Ok(calls.len())
}

/// The name of the block where [`merge_site_calls`] joins a function's panic sites.
const REPORT_BLOCK: &std::ffi::CStr = c"offload.panic";

/// Makes the site-reporter calls of each function one call in a block of its own, which the
/// calls' blocks branch to with their site and values (phis), through the reporter of the
/// most values any of them passes (the calls of one function are all of the
/// [`SITE_REPORTERS`] or all of the [`THREAD_REPORTER`]). One report per kernel costs fewer
/// registers and less code than one per panic site: on NVIDIA the call sequences (measured on
/// the parity benchmark: `matmul` 48 → 40 registers on sm_80), on AMD the inlined report.
fn merge_site_calls(module: &Module<'_>, site_reporters: &[Function<'_>]) {
    let ir = ir::Module::new(module);
    for function in ir.functions() {
        let calls = site_calls(function, site_reporters);
        if calls.len() < 2 {
            continue;
        }
        // Each call and the `unreachable` after it are erased once the branch that replaces
        // them is built, and no other handle to them is used. The callee is that of the call
        // with the most arguments.
        let Some(widest) = calls.iter().copied().max_by_key(|&c| c.num_args()) else {
            continue;
        };
        let at = widest
            .called_function()
            .expect("a site call calls a reporter");
        let parameters: Vec<Type<'_>> = (0..widest.num_args())
            .map(|i| widest.operand(i).expect("an argument").ty())
            .collect();
        let builder = ir.builder();
        let merged = function.append_block(REPORT_BLOCK);
        builder.position_at_end(merged);
        let phis: Vec<Phi<'_>> = parameters
            .iter()
            .map(|&ty| builder.build_phi(ty, c""))
            .collect();
        let phi_values: Vec<Value<'_>> = phis.iter().map(|p| p.as_value()).collect();
        builder.build_call(at, &phi_values, c"");
        builder.build_unreachable();
        for call in calls {
            let block = call.block();
            let args = call.num_args();
            for (i, phi) in phis.iter().enumerate() {
                let value = if (i as u32) < args {
                    call.operand(i as u32).expect("an argument")
                } else {
                    parameters[i].const_null()
                };
                phi.add_incoming(value, block);
            }
            call.next()
                .expect("`unreachable` follows a site call")
                .erase();
            call.erase();
            builder.position_at_end(block);
            builder.build_br(merged);
        }
    }
}

/// The calls of `f` (not other uses of its address), in the module's order of functions and
/// instructions, so that the table is the same for the same module.
fn calls_of<'m>(module: ir::Module<'m>, f: Function<'m>) -> Vec<Call<'m>> {
    let mut calls = Vec::new();
    for function in module.functions() {
        for block in function.blocks() {
            for instruction in block.instructions() {
                if let Some(call) = instruction.as_call()
                    && call.callee() == f.as_value()
                {
                    calls.push(call);
                }
            }
        }
    }
    calls
}

/// The sites of a reporter call `__offload_gpu_panic(kind, message, message_len, a, b, c,
/// location)`: one when its kind, message and location are constants that can be read; one
/// per predecessor when some of them are phis of such constants (the optimizer merges the
/// calls at several panic sites into one), each with its block. `None` when any is neither.
fn call_sites<'m>(call: Call<'m>) -> Option<Vec<(Option<Block<'m>>, PanicSite)>> {
    let args = [0, 1, 2, 6]
        .map(|i| through_selects(call.operand(i).expect("the reporter's seven arguments")));
    let block = call.block();
    let phi = |v: Value<'m>| v.as_phi().filter(|p| p.block() == block);
    let Some(first_phi) = args.iter().find_map(|&a| phi(a)) else {
        return Some(vec![(None, constant_site(args)?)]);
    };
    let mut sites = Vec::new();
    for (_, from) in first_phi.incomings() {
        let incoming = args.map(|a| match phi(a) {
            None => Some(a),
            Some(p) => p.incoming_from(from),
        });
        let [Some(kind), Some(message), Some(len), Some(location)] = incoming else {
            return None;
        };
        sites.push((Some(from), constant_site([kind, message, len, location])?));
    }
    Some(sites)
}

/// `value`, or the operand a `select` picks when its condition compares a global's address
/// with null (on AMDGPU the optimizer leaves such comparisons of address space 1 unfolded,
/// rustc having stated with `llvm.assume` what they are: a global is never at null).
fn through_selects(value: Value<'_>) -> Value<'_> {
    if !value.is_select() {
        return value;
    }
    let Some(condition) = value.operand(0).and_then(Value::as_icmp) else {
        return value;
    };
    let global = [0, 1]
        .map(|i| condition.operand(i).expect("an `icmp` has two operands"))
        .into_iter()
        .find(|&v| global_and_offset(v).is_some());
    if !global.is_some_and(|g| compares_with_null(*condition, g)) {
        return value;
    }
    let operand = |i| value.operand(i).expect("a `select` has three operands");
    match condition.predicate() {
        IntPredicate::EQ => through_selects(operand(2)),
        IntPredicate::NE => through_selects(operand(1)),
        _ => value,
    }
}

/// The site of a reporter call's kind, message, message length and location, when they are
/// constants that can be read.
fn constant_site([kind, message, message_len, location]: [Value<'_>; 4]) -> Option<PanicSite> {
    let kind = u32::try_from(constant_int(kind)?).ok()?;
    let message_len = usize::try_from(constant_int(message_len)?).ok()?;
    let message = if message_len == 0 {
        String::new()
    } else {
        let (global, offset) = global_and_offset(message)?;
        let bytes = initializer_bytes(global)?.bytes;
        String::from_utf8(
            bytes
                .get(offset..offset.checked_add(message_len)?)?
                .to_vec(),
        )
        .ok()?
    };
    let (location, 0) = global_and_offset(location)? else {
        return None;
    };
    let location = initializer_bytes(location)?;
    let (file, file_offset) = global_and_offset(*location.pointers.first()?)
        .filter(|_| location.pointer_offsets.first() == Some(&0))?;
    let word = |at: usize, n: usize| -> Option<u64> {
        let bytes = location.bytes.get(at..at + n)?;
        Some(
            bytes
                .iter()
                .rev()
                .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)),
        )
    };
    let file_len = usize::try_from(word(8, 8)?).ok()?;
    let file = initializer_bytes(file)?.bytes;
    let file = String::from_utf8(
        file.get(file_offset..file_offset.checked_add(file_len)?)?
            .to_vec(),
    )
    .ok()?;
    Some(PanicSite {
        kind,
        message,
        file,
        line: u32::try_from(word(16, 4)?).ok()?,
        column: u32::try_from(word(20, 4)?).ok()?,
    })
}

fn constant_int(value: Value<'_>) -> Option<u64> {
    value
        .ty()
        .int_width()
        .filter(|&width| width <= 64)
        .and_then(|_| value.const_zext_value())
}

/// The global variable a constant pointer points into, and the byte offset: through address
/// space casts and byte-wise `getelementptr`s.
fn global_and_offset(pointer: Value<'_>) -> Option<(GlobalVariable<'_>, usize)> {
    if let Some(global) = pointer.as_global_variable() {
        return Some((global, 0));
    }
    match pointer.const_opcode()? {
        InstructionOpcode::AddrSpaceCast | InstructionOpcode::BitCast => {
            global_and_offset(pointer.operand(0)?)
        }
        InstructionOpcode::GetElementPtr if pointer.num_operands() == 2 => {
            let element = pointer.const_gep_source_element_type()?;
            if !is_byte(element) {
                return None;
            }
            let offset = usize::try_from(constant_int(pointer.operand(1)?)?).ok()?;
            let (global, base) = global_and_offset(pointer.operand(0)?)?;
            Some((global, base.checked_add(offset)?))
        }
        _ => None,
    }
}

fn is_byte(ty: Type<'_>) -> bool {
    ty.int_width() == Some(8)
}

/// A constant's bytes, little-endian, with its pointers set aside (8 zero bytes each).
#[derive(Default)]
struct Flattened<'m> {
    bytes: Vec<u8>,
    pointers: Vec<Value<'m>>,
    pointer_offsets: Vec<usize>,
}

/// The bytes of a constant global's initializer, as rustc writes its allocations: byte arrays,
/// integers and pointers in packed structs. `None` for anything else (the call then keeps the
/// reporter).
fn initializer_bytes(global: GlobalVariable<'_>) -> Option<Flattened<'_>> {
    if !global.is_constant_global() {
        return None;
    }
    let init = global.initializer()?;
    let mut out = Flattened::default();
    flatten(init, &mut out)?;
    Some(out)
}

fn flatten<'m>(value: Value<'m>, out: &mut Flattened<'m>) -> Option<()> {
    let ty = value.ty();
    if value.is_constant_data_sequential() {
        if !ty.element_type().is_some_and(is_byte) {
            return None;
        }
        out.bytes.extend_from_slice(value.const_string()?);
        return Some(());
    }
    if let Some(int) = constant_int(value) {
        let width = ty.int_width()? as usize;
        if !width.is_multiple_of(8) {
            return None;
        }
        out.bytes.extend_from_slice(&int.to_le_bytes()[..width / 8]);
        return Some(());
    }
    if ty.kind() == TypeKind::Pointer {
        out.pointers.push(value);
        out.pointer_offsets.push(out.bytes.len());
        out.bytes.extend_from_slice(&[0; 8]);
        return Some(());
    }
    let aggregate =
        value.is_constant_array() || (value.is_constant_struct() && ty.is_packed_struct());
    if !aggregate {
        return None;
    }
    for operand in value.operands() {
        flatten(operand, out)?;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use inkwell::attributes::{Attribute, AttributeLoc};
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;
    use inkwell::values::FunctionValue;

    fn module<'ctx>(context: &'ctx Context, ir: &str) -> Module<'ctx> {
        let text = format!("target triple = \"nvptx64-nvidia-cuda\"\n{ir}");
        let buffer = MemoryBuffer::create_from_memory_range_copy(text.as_bytes(), "test");
        context.create_module_from_ir(buffer).unwrap()
    }

    fn callees(f: FunctionValue<'_>) -> Vec<String> {
        f.get_basic_block_iter()
            .flat_map(|b| b.get_instructions())
            .filter_map(|i| i.get_operand(i.get_num_operands().checked_sub(1)?))
            .filter_map(|op| op.value())
            .filter(|v| v.is_pointer_value())
            .map(|v| super::super::common::cstr(v.into_pointer_value().get_name()))
            .collect()
    }

    /// With `panic = "trap"`, the reporter becomes the target's trap, inlined where it is
    /// called: nothing of its report (the channel's accesses) is left.
    #[test]
    fn the_trap_strategy_makes_the_reporters_a_trap() {
        let context = Context::create();
        let m = module(
            &context,
            "@__offload_channel = global ptr null\n\
             define void @__offload_gpu_panic(i32 %k, ptr %m, i64 %n, i64 %a, i64 %b, i64 %c, ptr %loc) #0 {\n  \
             %channel = load ptr, ptr @__offload_channel\n  store i64 %a, ptr %channel\n  unreachable\n}\n\
             define i32 @__offload_gpu_thread_index() {\n  ret i32 0\n}\n\
             define void @k(i64 %i) {\n  \
             call void @__offload_gpu_panic(i32 1, ptr null, i64 0, i64 %i, i64 4, i64 0, ptr null) #0\n  unreachable\n}\n\
             attributes #0 = { noinline }\n",
        );
        assert_eq!(trap_panics(&m).unwrap(), 1);
        m.verify().unwrap();
        let reporter = m.get_function(REPORTER).unwrap();
        assert_eq!(callees(reporter), ["llvm.trap"]);
        assert_eq!(
            reporter.as_global_value().get_linkage(),
            inkwell::module::Linkage::Internal
        );
        let always = Attribute::get_named_enum_kind_id("alwaysinline");
        assert!(
            reporter
                .get_enum_attribute(AttributeLoc::Function, always)
                .is_some()
        );
        assert_eq!(callees(m.get_function("k").unwrap()), [REPORTER]);
        let ir = m.print_to_string().to_string();
        assert!(!ir.contains("load ptr, ptr @__offload_channel"), "{ir}");
        let call = ir
            .lines()
            .find(|l| l.contains("call void @__offload_gpu_panic("))
            .unwrap();
        assert!(!call.contains('#'), "the call may inline: {call}");
        assert_eq!(
            m.get_function(offload_format::abi::GPU_THREAD_INDEX)
                .unwrap()
                .as_global_value()
                .get_linkage(),
            inkwell::module::Linkage::Internal
        );
    }

    /// A module as the optimizer leaves a kernel crate's: core's bounds check and a division's
    /// panic are calls of the reporter with constant sites (the second chosen by comparisons of
    /// a global with null, as on AMDGPU), two more sites are merged into one call through phis,
    /// and one call's message is not a constant.
    const IR: &str = r#"
target triple = "nvptx64-nvidia-cuda"
@file = private unnamed_addr constant [10 x i8] c"src/lib.rs"
@loc1 = private unnamed_addr constant <{ ptr, [16 x i8] }> <{ ptr @file, [16 x i8] c"\0A\00\00\00\00\00\00\00\0C\00\00\00\09\00\00\00" }>
@loc2 = private unnamed_addr constant <{ ptr, [16 x i8] }> <{ ptr @file, [16 x i8] c"\0A\00\00\00\00\00\00\00\28\00\00\00\05\00\00\00" }>
@text = private unnamed_addr constant [31 x i8] c"xxattempt to divide by zero...."
@__offload_channel = external global ptr

define void @__offload_gpu_panic(i32 %kind, ptr %m, i64 %n, i64 %a, i64 %b, i64 %c, ptr %loc) noinline noreturn {
  call void @__offload_gpu_panic_finish()
  unreachable
}
define void @__offload_gpu_panic_at(i64 %site, i64 %a, i64 %b, i64 %c) noinline noreturn {
  %ch = load atomic ptr, ptr @__offload_channel monotonic, align 8
  store i64 %site, ptr %ch
  call void @__offload_gpu_panic_finish()
  unreachable
}
define void @__offload_gpu_panic_at0(i64 %site) noinline noreturn {
  call void @__offload_gpu_panic_at(i64 %site, i64 0, i64 0, i64 0)
  unreachable
}
define void @__offload_gpu_panic_at1(i64 %site, i64 %a) noinline noreturn {
  call void @__offload_gpu_panic_at(i64 %site, i64 %a, i64 0, i64 0)
  unreachable
}
define void @__offload_gpu_panic_at2(i64 %site, i64 %a, i64 %b) noinline noreturn {
  call void @__offload_gpu_panic_at(i64 %site, i64 %a, i64 %b, i64 0)
  unreachable
}
define void @__offload_gpu_panic_finish() noinline noreturn {
  call void @llvm.trap()
  unreachable
}
declare void @llvm.trap()

define ptx_kernel void @k(i64 %i, i64 %len, ptr %m, i64 %n) {
  %bad = icmp uge i64 %i, %len
  br i1 %bad, label %oob, label %div
oob:
  call void @__offload_gpu_panic(i32 1, ptr inttoptr (i64 1 to ptr), i64 0, i64 %i, i64 %len, i64 0, ptr @loc1)
  unreachable
div:
  %zero = icmp eq i64 %i, 0
  br i1 %zero, label %z, label %other
z:
  %null = icmp eq ptr @text, null
  %zkind = select i1 %null, i32 5, i32 0
  %zlen = select i1 %null, i64 0, i64 25
  %ztext = select i1 %null, ptr inttoptr (i64 1 to ptr), ptr getelementptr (i8, ptr @text, i64 2)
  call void @__offload_gpu_panic(i32 %zkind, ptr %ztext, i64 %zlen, i64 0, i64 0, i64 0, ptr @loc2)
  unreachable
other:
  %bad.len = icmp eq i64 %n, 8
  br i1 %bad.len, label %unknown, label %split
split:
  %merge = icmp eq i64 %n, 7
  br i1 %merge, label %left, label %right
left:
  br label %merged
right:
  br label %merged
merged:
  %kind = phi i32 [ 1, %left ], [ 0, %right ]
  %mlen = phi i64 [ 0, %left ], [ 25, %right ]
  %loc = phi ptr [ @loc2, %left ], [ @loc2, %right ]
  %mm = phi ptr [ inttoptr (i64 1 to ptr), %left ], [ getelementptr (i8, ptr @text, i64 2), %right ]
  call void @__offload_gpu_panic(i32 %kind, ptr %mm, i64 %mlen, i64 %i, i64 0, i64 0, ptr %loc)
  unreachable
unknown:
  call void @__offload_gpu_panic(i32 0, ptr %m, i64 %n, i64 0, i64 0, i64 0, ptr @loc2)
  unreachable
}
"#;

    #[test]
    fn constant_sites_are_described_and_the_rest_keep_the_reporter() {
        let context = Context::create();
        let buffer = MemoryBuffer::create_from_memory_range_copy(IR.as_bytes(), "sites");
        let module = context.create_module_from_ir(buffer).unwrap();
        let machine = super::super::codegen::target_machine(
            offload_format::triple::NVPTX_TRIPLE,
            "sm_80",
            "+ptx80",
        )
        .unwrap();
        assert_eq!(describe_sites(&module, &machine).unwrap(), 3);
        module.verify().unwrap();
        let table = module.get_global(panic_sites::SYMBOL).unwrap();
        let init = table.get_initializer().unwrap().into_array_value();
        let (id, sites) = PanicSites::parse(init.as_const_string().unwrap()).unwrap();
        let place = |s: &PanicSite| (s.kind, s.message.clone(), s.file.clone(), s.line, s.column);
        assert_eq!(
            sites.sites().iter().map(place).collect::<Vec<_>>(),
            [
                (1, String::new(), "src/lib.rs".to_owned(), 12, 9),
                (
                    0,
                    "attempt to divide by zero".to_owned(),
                    "src/lib.rs".to_owned(),
                    40,
                    5
                ),
                (1, String::new(), "src/lib.rs".to_owned(), 40, 5),
            ]
        );
        let ir = module.print_to_string().to_string();
        // The constant sites and the merged one report the sites' values; the call whose
        // message is not a constant keeps the reporter, internal.
        // Where the sites meet, their values' low halves are a phi and the table's ID is or-ed
        // in after it (one register through the kernel, not a pair).
        let table = panic_sites::site_value(id, 0) & !u64::from(u32::MAX);
        assert!(
            ir.lines()
                .any(|l| l.contains(" = or i64 %") && l.ends_with(&format!(", {}", table as i64))),
            "{ir}"
        );
        let low = |index: usize| panic_sites::site_value(id, index) & u64::from(u32::MAX);
        let phi = ir
            .lines()
            .find(|l| l.contains("%offload.site = phi i32"))
            .unwrap_or_else(|| panic!("no phi of the sites' halves: {ir}"));
        for index in 0..3 {
            assert!(
                phi.contains(&format!("[ {}, %", low(index))),
                "site {index}: {phi}"
            );
        }
        // The kernel's three sites (the bounds check passing its index and length, the
        // division none, the merged call the index) branch to one block, where the reporter of
        // two values is inlined: its stores, then the call of the report's finish.
        for reporter in ["at", "at2", "at1", "at0"] {
            let call = format!("call void @__offload_gpu_panic_{reporter}(");
            assert!(!ir.contains(&call), "{call}: {ir}");
        }
        assert_eq!(ir.matches("\noffload.panic:").count(), 1, "{ir}");
        let report = ir.split("\noffload.panic:").nth(1).unwrap();
        let report = report.split("\n}").next().unwrap();
        assert!(report.contains("store i64 %"), "{report}");
        assert!(
            report.contains("call void @__offload_gpu_panic_finish()"),
            "{report}"
        );
        assert_eq!(
            ir.matches("call void @__offload_gpu_panic(").count(),
            1,
            "{ir}"
        );
        assert!(
            ir.contains("define internal void @__offload_gpu_panic("),
            "{ir}"
        );
    }

    /// On AMD GPUs the site calls of a kernel share one copy of the report, inlined.
    #[test]
    fn amdgpu_modules_inline_the_whole_panic_path() {
        let context = Context::create();
        let ir = IR.replace("nvptx64-nvidia-cuda", "amdgcn-amd-amdhsa");
        let ir = ir.replace("ptx_kernel", "amdgpu_kernel");
        let buffer = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "sites");
        let module = context.create_module_from_ir(buffer).unwrap();
        let machine = super::super::codegen::target_machine(
            offload_format::triple::AMDGCN_TRIPLE,
            "gfx90a",
            "",
        )
        .unwrap();
        assert_eq!(describe_sites(&module, &machine).unwrap(), 3);
        module.verify().unwrap();
        let table = module.get_global(panic_sites::SYMBOL).unwrap();
        assert_eq!(table.get_visibility(), inkwell::GlobalVisibility::Protected);
        let ir = module.print_to_string().to_string();
        assert!(!ir.contains("call void @__offload_gpu"), "{ir}");
        assert!(!ir.contains("define internal void @__offload_gpu"), "{ir}");
        // The kernel's three site calls became one block, where the report is inlined once.
        assert_eq!(ir.matches("\noffload.panic:").count(), 1, "{ir}");
    }
}
