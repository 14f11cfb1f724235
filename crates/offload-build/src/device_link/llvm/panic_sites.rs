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

use inkwell::context::AsContextRef;
use inkwell::llvm_sys::core as llvm;
use inkwell::llvm_sys::prelude::{LLVMBasicBlockRef, LLVMTypeRef, LLVMValueRef};
use inkwell::llvm_sys::{LLVMIntPredicate, LLVMOpcode};
use inkwell::module::{Linkage, Module};
use inkwell::targets::TargetMachine;
use inkwell::values::AsValueRef;
use offload_format::panic_sites::{self, PanicSite, PanicSites};

use super::codegen::{INLINE_AND_CLEAN_UP, run_pipeline};
use super::is_amdgpu;
use super::panics::{REPORTER, make_inlinable, site_calls};
use super::shared_memory::compares_with_null;
use super::uniform_panics::{self, THREAD_INDEX, THREAD_REPORTER};
use crate::device_link::{LinkError, Result};

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
        // SAFETY: every use of `old` now refers to `trapping`; nothing refers to `old` any more.
        unsafe { old.delete() };
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
    let site_reporters: Vec<LLVMValueRef> = SITE_REPORTERS
        .iter()
        .enumerate()
        .filter_map(|(values, name)| {
            let f = module.get_function(name)?;
            (f.count_basic_blocks() > 0 && f.count_params() == values as u32 + 1)
                .then(|| f.as_value_ref())
        })
        .collect();
    let described = match module.get_function(REPORTER) {
        Some(reporter)
            if reporter.count_basic_blocks() > 0
                && reporter.count_params() == 7
                && site_reporters.len() == SITE_REPORTERS.len() =>
        {
            let described =
                rewrite_calls(module, reporter.as_value_ref(), &site_reporters, amdgpu)?;
            let thread_reporter = module
                .get_function(THREAD_REPORTER)
                .filter(|f| amdgpu && f.count_basic_blocks() > 0 && f.count_params() == 6);
            let thread_index = module
                .get_function(THREAD_INDEX)
                .filter(|f| f.count_basic_blocks() > 0 && f.count_params() == 0);
            let mut reporters = site_reporters.clone();
            if let (Some(reporter), Some(index)) = (thread_reporter, thread_index) {
                let reporter = reporter.as_value_ref();
                uniform_panics::make_uniform(
                    module,
                    &site_reporters,
                    reporter,
                    index.as_value_ref(),
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
    let context = module.get_context();
    // SAFETY: the phis and their blocks are live values of `module`, whose context the builder
    // is made in; each phi is replaced in all its uses and erased once its replacement is
    // built, and the phis are collected before any is changed.
    unsafe {
        let ctx = context.as_ctx_ref();
        let i32_type = llvm::LLVMInt32TypeInContext(ctx);
        let i64_type = llvm::LLVMInt64TypeInContext(ctx);
        let phis: Vec<LLVMValueRef> = module
            .get_functions()
            .flat_map(|f| f.get_basic_block_iter())
            .filter(|b| b.get_name() == REPORT_BLOCK)
            .flat_map(|b| {
                b.get_instructions()
                    .map(|i| i.as_value_ref())
                    .take_while(|&i| !llvm::LLVMIsAPHINode(i).is_null())
            })
            .filter(|&i| llvm::LLVMTypeOf(i) == i64_type)
            .collect();
        let builder = llvm::LLVMCreateBuilderInContext(ctx);
        for phi in phis {
            let incoming: Option<Vec<u64>> = (0..llvm::LLVMCountIncoming(phi))
                .map(|i| constant_int(llvm::LLVMGetIncomingValue(phi, i)))
                .collect();
            let Some(values) = incoming else { continue };
            let high = values.first().map(|v| v >> 32);
            if values.len() < 2
                || values.iter().any(|v| Some(v >> 32) != high)
                || values.iter().all(|v| *v == values[0])
            {
                continue;
            }
            let block = llvm::LLVMGetInstructionParent(phi);
            llvm::LLVMPositionBuilderBefore(builder, phi);
            let narrow = llvm::LLVMBuildPhi(builder, i32_type, c"offload.site".as_ptr());
            for (i, value) in values.iter().enumerate() {
                let mut low = llvm::LLVMConstInt(i32_type, value & u64::from(u32::MAX), 0);
                let mut from = llvm::LLVMGetIncomingBlock(phi, i as u32);
                llvm::LLVMAddIncoming(narrow, &mut low, &mut from, 1);
            }
            let mut after = llvm::LLVMGetFirstInstruction(block);
            while !llvm::LLVMIsAPHINode(after).is_null() {
                after = llvm::LLVMGetNextInstruction(after);
            }
            llvm::LLVMPositionBuilderBefore(builder, after);
            let wide = llvm::LLVMBuildZExt(builder, narrow, i64_type, c"".as_ptr());
            let site = llvm::LLVMBuildOr(
                builder,
                wide,
                llvm::LLVMConstInt(i64_type, high.unwrap_or(0) << 32, 0),
                c"".as_ptr(),
            );
            llvm::LLVMReplaceAllUsesWith(phi, site);
            llvm::LLVMInstructionEraseFromParent(phi);
        }
        llvm::LLVMDisposeBuilder(builder);
    }
}

/// Replaces each call of `reporter` whose site is constant by a call of `at`, and adds the
/// table. Returns how many calls changed.
fn rewrite_calls(
    module: &Module<'_>,
    reporter: LLVMValueRef,
    site_reporters: &[LLVMValueRef],
    amdgpu: bool,
) -> Result<usize> {
    let mut table = PanicSites::default();
    let mut calls = Vec::new();
    for call in calls_of(module, reporter) {
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
    // SAFETY: the site reporters and the calls are live values of `module`, whose context the
    // builder is made in; each call is erased after the new one is built before it, and no
    // other reference to it is kept.
    unsafe {
        let i64_type = llvm::LLVMInt64TypeInContext(context.as_ctx_ref());
        let builder = llvm::LLVMCreateBuilderInContext(context.as_ctx_ref());
        for (call, sites) in &calls {
            let value =
                |index: usize| llvm::LLVMConstInt(i64_type, panic_sites::site_value(id, index), 0);
            let site = match sites.as_slice() {
                [(None, index)] => value(*index),
                _ => {
                    let block = llvm::LLVMGetInstructionParent(*call);
                    llvm::LLVMPositionBuilder(builder, block, llvm::LLVMGetFirstInstruction(block));
                    let phi = llvm::LLVMBuildPhi(builder, i64_type, c"site".as_ptr());
                    for (from, index) in sites {
                        let (mut value, mut from) = (value(*index), from.expect("a phi's block"));
                        llvm::LLVMAddIncoming(phi, &mut value, &mut from, 1);
                    }
                    phi
                }
            };
            let values = [3, 4, 5].map(|i| llvm::LLVMGetOperand(*call, i));
            let count = values
                .iter()
                .rposition(|&v| constant_int(v) != Some(0))
                .map_or(0, |last| last + 1);
            let at = site_reporters[count];
            let mut args = [site, values[0], values[1], values[2]];
            llvm::LLVMPositionBuilderBefore(builder, *call);
            let new = llvm::LLVMBuildCall2(
                builder,
                llvm::LLVMGlobalGetValueType(at),
                at,
                args.as_mut_ptr(),
                count as u32 + 1,
                c"".as_ptr(),
            );
            // The panic's source line, where a dev build keeps line information.
            let debuginfo = inkwell::llvm_sys::debuginfo::LLVMInstructionGetDebugLoc(*call);
            inkwell::llvm_sys::debuginfo::LLVMInstructionSetDebugLoc(new, debuginfo);
            llvm::LLVMInstructionEraseFromParent(*call);
        }
        llvm::LLVMDisposeBuilder(builder);
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
fn merge_site_calls(module: &Module<'_>, site_reporters: &[LLVMValueRef]) {
    let context = module.get_context();
    for function in module.get_functions() {
        let calls = site_calls(function, site_reporters);
        if calls.len() < 2 {
            continue;
        }
        // SAFETY: `function`, its blocks and the calls are live values of `module`, whose
        // context the builder is made in; each call and the `unreachable` after it are erased
        // once the branch that replaces them is built, and nothing else refers to them.
        unsafe {
            // The callee of the call with the most arguments.
            let Some(widest) = calls
                .iter()
                .copied()
                .max_by_key(|&c| llvm::LLVMGetNumArgOperands(c))
            else {
                continue;
            };
            let at = llvm::LLVMGetCalledValue(widest);
            let parameters: Vec<LLVMTypeRef> = (0..llvm::LLVMGetNumArgOperands(widest))
                .map(|i| llvm::LLVMTypeOf(llvm::LLVMGetOperand(widest, i)))
                .collect();
            let builder = llvm::LLVMCreateBuilderInContext(context.as_ctx_ref());
            let merged = llvm::LLVMAppendBasicBlockInContext(
                context.as_ctx_ref(),
                function.as_value_ref(),
                REPORT_BLOCK.as_ptr(),
            );
            llvm::LLVMPositionBuilderAtEnd(builder, merged);
            let mut phis: Vec<LLVMValueRef> = parameters
                .iter()
                .map(|&ty| llvm::LLVMBuildPhi(builder, ty, c"".as_ptr()))
                .collect();
            llvm::LLVMBuildCall2(
                builder,
                llvm::LLVMGlobalGetValueType(at),
                at,
                phis.as_mut_ptr(),
                phis.len() as u32,
                c"".as_ptr(),
            );
            llvm::LLVMBuildUnreachable(builder);
            for call in calls {
                let block = llvm::LLVMGetInstructionParent(call);
                let args = llvm::LLVMGetNumArgOperands(call);
                for (i, phi) in phis.iter().enumerate() {
                    let mut value = if (i as u32) < args {
                        llvm::LLVMGetOperand(call, i as u32)
                    } else {
                        llvm::LLVMConstNull(parameters[i])
                    };
                    let mut from = block;
                    llvm::LLVMAddIncoming(*phi, &mut value, &mut from, 1);
                }
                llvm::LLVMInstructionEraseFromParent(llvm::LLVMGetNextInstruction(call));
                llvm::LLVMInstructionEraseFromParent(call);
                llvm::LLVMPositionBuilderAtEnd(builder, block);
                llvm::LLVMBuildBr(builder, merged);
            }
            llvm::LLVMDisposeBuilder(builder);
        }
    }
}

/// The calls of `f` (not other uses of its address), in the module's order of functions and
/// instructions, so that the table is the same for the same module.
fn calls_of(module: &Module<'_>, f: LLVMValueRef) -> Vec<LLVMValueRef> {
    let mut calls = Vec::new();
    for function in module.get_functions() {
        for block in function.get_basic_block_iter() {
            for instruction in block.get_instructions() {
                let raw = instruction.as_value_ref();
                // SAFETY: `raw` is a live instruction; the callee is read from calls only.
                let calls_f = unsafe {
                    !llvm::LLVMIsACallInst(raw).is_null() && llvm::LLVMGetCalledValue(raw) == f
                };
                if calls_f {
                    calls.push(raw);
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
fn call_sites(call: LLVMValueRef) -> Option<Vec<(Option<LLVMBasicBlockRef>, PanicSite)>> {
    // SAFETY: `call` is a live call with the reporter's seven arguments; phis are read only
    // where `LLVMIsAPHINode` says they are phis of the call's block.
    unsafe {
        let args = [0, 1, 2, 6].map(|i| through_selects(llvm::LLVMGetOperand(call, i)));
        let block = llvm::LLVMGetInstructionParent(call);
        let phi = |v: LLVMValueRef| {
            (!llvm::LLVMIsAPHINode(v).is_null() && llvm::LLVMGetInstructionParent(v) == block)
                .then_some(v)
        };
        let Some(first_phi) = args.iter().find_map(|&a| phi(a)) else {
            return Some(vec![(None, constant_site(args)?)]);
        };
        let mut sites = Vec::new();
        for i in 0..llvm::LLVMCountIncoming(first_phi) {
            let from = llvm::LLVMGetIncomingBlock(first_phi, i);
            let incoming = args.map(|a| match phi(a) {
                None => Some(a),
                Some(p) => (0..llvm::LLVMCountIncoming(p))
                    .find(|&j| llvm::LLVMGetIncomingBlock(p, j) == from)
                    .map(|j| llvm::LLVMGetIncomingValue(p, j)),
            });
            let [Some(kind), Some(message), Some(len), Some(location)] = incoming else {
                return None;
            };
            sites.push((Some(from), constant_site([kind, message, len, location])?));
        }
        Some(sites)
    }
}

/// `value`, or the operand a `select` picks when its condition compares a global's address
/// with null (on AMDGPU the optimizer leaves such comparisons of address space 1 unfolded,
/// rustc having stated with `llvm.assume` what they are: a global is never at null).
fn through_selects(value: LLVMValueRef) -> LLVMValueRef {
    // SAFETY: `value` is a live value; operands are read from selects and comparisons only,
    // and `compares_with_null` is given a live `icmp` and one of its operands.
    unsafe {
        if llvm::LLVMIsASelectInst(value).is_null() {
            return value;
        }
        let condition = llvm::LLVMGetOperand(value, 0);
        if llvm::LLVMIsAICmpInst(condition).is_null() {
            return value;
        }
        let global = [0, 1]
            .map(|i| llvm::LLVMGetOperand(condition, i))
            .into_iter()
            .find(|&v| global_and_offset(v).is_some());
        if !global.is_some_and(|g| compares_with_null(condition, g)) {
            return value;
        }
        match llvm::LLVMGetICmpPredicate(condition) {
            LLVMIntPredicate::LLVMIntEQ => through_selects(llvm::LLVMGetOperand(value, 2)),
            LLVMIntPredicate::LLVMIntNE => through_selects(llvm::LLVMGetOperand(value, 1)),
            _ => value,
        }
    }
}

/// The site of a reporter call's kind, message, message length and location, when they are
/// constants that can be read.
fn constant_site([kind, message, message_len, location]: [LLVMValueRef; 4]) -> Option<PanicSite> {
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

fn constant_int(value: LLVMValueRef) -> Option<u64> {
    // SAFETY: `value` is a live value; the accessors are called on a `ConstantInt` only.
    unsafe {
        (!llvm::LLVMIsAConstantInt(value).is_null()
            && llvm::LLVMGetIntTypeWidth(llvm::LLVMTypeOf(value)) <= 64)
            .then(|| llvm::LLVMConstIntGetZExtValue(value))
    }
}

/// The global variable a constant pointer points into, and the byte offset: through address
/// space casts and byte-wise `getelementptr`s.
fn global_and_offset(pointer: LLVMValueRef) -> Option<(LLVMValueRef, usize)> {
    // SAFETY: `pointer` is a live value; each accessor is called on the kind of value it reads.
    unsafe {
        if !llvm::LLVMIsAGlobalVariable(pointer).is_null() {
            return Some((pointer, 0));
        }
        if llvm::LLVMIsAConstantExpr(pointer).is_null() {
            return None;
        }
        match llvm::LLVMGetConstOpcode(pointer) {
            LLVMOpcode::LLVMAddrSpaceCast | LLVMOpcode::LLVMBitCast => {
                global_and_offset(llvm::LLVMGetOperand(pointer, 0))
            }
            LLVMOpcode::LLVMGetElementPtr if llvm::LLVMGetNumOperands(pointer) == 2 => {
                let element = llvm::LLVMGetGEPSourceElementType(pointer);
                if !is_byte(element) {
                    return None;
                }
                let offset =
                    usize::try_from(constant_int(llvm::LLVMGetOperand(pointer, 1))?).ok()?;
                let (global, base) = global_and_offset(llvm::LLVMGetOperand(pointer, 0))?;
                Some((global, base.checked_add(offset)?))
            }
            _ => None,
        }
    }
}

fn is_byte(ty: LLVMTypeRef) -> bool {
    // SAFETY: `ty` is a live type.
    unsafe {
        llvm::LLVMGetTypeKind(ty) == inkwell::llvm_sys::LLVMTypeKind::LLVMIntegerTypeKind
            && llvm::LLVMGetIntTypeWidth(ty) == 8
    }
}

/// A constant's bytes, little-endian, with its pointers set aside (8 zero bytes each).
#[derive(Default)]
struct Flattened {
    bytes: Vec<u8>,
    pointers: Vec<LLVMValueRef>,
    pointer_offsets: Vec<usize>,
}

/// The bytes of a constant global's initializer, as rustc writes its allocations: byte arrays,
/// integers and pointers in packed structs. `None` for anything else (the call then keeps the
/// reporter).
fn initializer_bytes(global: LLVMValueRef) -> Option<Flattened> {
    // SAFETY: `global` is a live global variable.
    let init = unsafe {
        if llvm::LLVMIsGlobalConstant(global) == 0 {
            return None;
        }
        llvm::LLVMGetInitializer(global)
    };
    if init.is_null() {
        return None;
    }
    let mut out = Flattened::default();
    flatten(init, &mut out)?;
    Some(out)
}

fn flatten(value: LLVMValueRef, out: &mut Flattened) -> Option<()> {
    // SAFETY: `value` is a live constant; each accessor is called on the kind of constant it
    // reads, and `LLVMGetAsString`'s bytes are copied before anything else runs.
    unsafe {
        let ty = llvm::LLVMTypeOf(value);
        if !llvm::LLVMIsAConstantDataSequential(value).is_null() {
            if !is_byte(llvm::LLVMGetElementType(ty)) {
                return None;
            }
            let mut len = 0;
            let data = llvm::LLVMGetAsString(value, &mut len);
            out.bytes
                .extend_from_slice(std::slice::from_raw_parts(data.cast::<u8>(), len));
            return Some(());
        }
        if let Some(int) = constant_int(value) {
            let width = llvm::LLVMGetIntTypeWidth(ty) as usize;
            if !width.is_multiple_of(8) {
                return None;
            }
            out.bytes.extend_from_slice(&int.to_le_bytes()[..width / 8]);
            return Some(());
        }
        if llvm::LLVMGetTypeKind(ty) == inkwell::llvm_sys::LLVMTypeKind::LLVMPointerTypeKind {
            out.pointers.push(value);
            out.pointer_offsets.push(out.bytes.len());
            out.bytes.extend_from_slice(&[0; 8]);
            return Some(());
        }
        let aggregate = !llvm::LLVMIsAConstantArray(value).is_null()
            || (!llvm::LLVMIsAConstantStruct(value).is_null() && llvm::LLVMIsPackedStruct(ty) != 0);
        if !aggregate {
            return None;
        }
        for i in 0..llvm::LLVMGetNumOperands(value) as u32 {
            flatten(llvm::LLVMGetOperand(value, i), out)?;
        }
        Some(())
    }
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
            .map(|v| super::super::cstr(v.into_pointer_value().get_name()))
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
