//! Panics without `core::fmt`: core's panic functions format their message with
//! `core::fmt`, and on a GPU every formatter they reach through `fmt::Arguments` is a possible
//! callee of an indirect call, so ptxas and the AMDGPU backend give each kernel that can panic
//! the registers and stack of all of them (hundreds of kilobytes of code, scratch on AMD). The
//! link instead gives each of those functions a body that calls offload-rt's reporter for it
//! (`kernel::gpu_channel`), which records the raw values for the host to format, and lets
//! `panic_fmt` and the panic handler inline, where `Arguments::as_str` folds: a literal message
//! is recorded, a formatted one is not, and its formatters become dead code (a formatted
//! message's arguments are not even handed to `panic_fmt`: [`unread_formatted_arguments`]).

#![forbid(unsafe_code)]

use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::module::Module;
use inkwell::values::{BasicMetadataValueEnum, FunctionValue, InstructionOpcode};

use offload_format::abi;

use super::common::cstr;
use super::ir::{self, AttributeIndex, Value};
use crate::device_link::error::{LinkError, Result};

/// Core's functions whose bodies become a call of offload-rt's reporter with the same Rust
/// signature (the parameters forwarded as they are).
pub(super) const REDIRECTS: &[(&str, &str)] = &[
    (
        "core::panicking::panic_bounds_check",
        abi::GPU_PANIC_BOUNDS_CHECK,
    ),
    (
        "core::slice::index::slice_index_fail",
        abi::GPU_SLICE_INDEX_FAIL,
    ),
    ("core::str::slice_error_fail", abi::GPU_STR_SLICE_FAIL),
    ("core::option::expect_failed", abi::GPU_EXPECT_FAILED),
    ("core::result::unwrap_failed", abi::GPU_UNWRAP_FAILED),
    (
        "core::panicking::assert_failed_inner",
        abi::GPU_ASSERT_FAILED,
    ),
];

/// The message of each of [`REDIRECTS`] when rustc's own LTO (AMDGPU requires it) has
/// specialized core's function for its callers, so that its parameters are no longer the
/// reporter's: the body becomes a report of this message and, when the location is still a
/// parameter, the location, without values.
const SPECIALIZED_MESSAGES: &[&str] = &[
    "index out of bounds (the index and length are not recorded here)",
    "slice index out of range (the indices are not recorded here)",
    "failed to slice string (the range is not recorded here)",
    "`Option::expect` failed (its message is not recorded here)",
    "called `Result::unwrap()` on an `Err` value",
    "an `assert_eq!` or `assert_ne!` failed (its operands are not recorded here)",
];
/// Core's functions on the way to the panic handler, inlined into their callers: with
/// `panic_fmt` and the handler inlined, a message's `Arguments::as_str` folds where the
/// message is made, and the formatters of a formatted one are dead. With the reporters and the
/// new bodies inlined too, every panic site is one call of offload-rt's `__offload_gpu_panic`,
/// the one out-of-line function of the panic path (nested calls would each cost the calling
/// convention's registers).
const INLINED_MODULES: &[&str] = &["core::panicking::"];
const INLINED: &[&str] = &["core::option::unwrap_failed"];

/// offload-rt's function that records a panic and traps. Out of line until optimization is
/// done, when [`super::panic_sites`] replaces its calls at constant sites and decides, per
/// triple, what is inlined.
pub(super) const REPORTER: &str = abi::GPU_PANIC;

/// Whether `name` is [`REPORTER`], or the renamed copy a member linked twice would leave
/// (`__offload_gpu_panic39`).
fn is_reporter(name: &str) -> bool {
    name.trim_end_matches(|c: char| c.is_ascii_digit()) == REPORTER
}

/// The panic handler's symbol (`#[panic_handler]`), however rustc mangles it.
const PANIC_HANDLER: &str = "rust_begin_unwind";

/// What a module's functions are, for this pass.
enum Role {
    Redirect(&'static str),
    Inline,
}

fn role(name: &str) -> Option<Role> {
    if REDIRECTS.iter().any(|(_, reporter)| *reporter == name) {
        return Some(Role::Inline);
    }
    // The pass runs after each input the link brings in: only core's functions and the
    // handler are worth demangling (`4core` begins core's path in both manglings).
    if !name.contains("4core") && !name.ends_with(PANIC_HANDLER) {
        return None;
    }
    let path = rust_path(name)?;
    if let Some((_, reporter)) = REDIRECTS.iter().find(|(core, _)| *core == path) {
        return Some(Role::Redirect(reporter));
    }
    if INLINED.contains(&path.as_str())
        || INLINED_MODULES.iter().any(|m| path.starts_with(m))
        || path.ends_with(PANIC_HANDLER)
    {
        return Some(Role::Inline);
    }
    None
}

/// Applies the pass to what the link has brought in so far; call it after each input is
/// linked, so that the functions core's original bodies call are never linked. The
/// reporters the new bodies call are left undefined for the link to bring from offload-rt;
/// `reporters` says whether the link has them (a kernel crate's does: its panic handler is
/// offload-rt's), else nothing changes. Returns how many functions, and calls of
/// `panic_fmt`, changed.
pub(super) fn lean_panics(module: &Module<'_>, reporters: bool) -> Result<usize> {
    if !reporters {
        return Ok(0);
    }
    let mut changed = 0;
    let functions: Vec<FunctionValue<'_>> = module
        .get_functions()
        .filter(|f| f.count_basic_blocks() > 0)
        .collect();
    for f in functions {
        let name = cstr(f.get_name());
        match role(&name) {
            Some(Role::Redirect(reporter)) => {
                if is_redirected(f, reporter) {
                    make_inlinable(module, f);
                } else if let Some(lean) = redirect(module, f, &name, reporter)? {
                    make_inlinable(module, lean);
                    changed += 1;
                }
            }
            Some(Role::Inline) if make_inlinable(module, f) => changed += 1,
            Some(Role::Inline) | None => {}
        }
    }
    Ok(changed + unread_formatted_arguments(module))
}

/// `core::panicking::panic_fmt`, the one function of core that takes a message's
/// `fmt::Arguments`.
const PANIC_FMT: &str = "core::panicking::panic_fmt";

/// What a formatted message passes `panic_fmt` for its arguments, once nothing reads them: a
/// dangling, aligned, non-null address (`NonNull::<rt::Argument>::dangling()`), whose bit 0
/// is clear as a stack address's is.
const DANGLING_ARGUMENTS: u64 = 8;

/// Gives each call of `panic_fmt` whose message's arguments are on the stack (a formatted
/// message: `Arguments::new` points at an array of `rt::Argument`s, each a value's address and
/// its formatter's) a dangling address instead; returns how many calls changed. The handler
/// only asks `Arguments::as_str` whether the message is a literal, which reads bit 0 of that
/// address and nothing behind it, and it is clear either way. LLVM folds that test for the
/// stack address itself only where it knows the address's low bits: on NVPTX, not on AMDGPU,
/// where the array is private memory seen through a flat address. There the array stayed
/// alive, and with it every formatter it names and all that they call (core's float
/// formatting: `dragon::format_shortest` alone is 9,000 lines of IR), until the panic sites
/// were described after optimization: optimized, then dropped, for each AMD target.
fn unread_formatted_arguments(module: &Module<'_>) -> usize {
    let Some(panic_fmt) = module.get_functions().find(|f| {
        let name = cstr(f.get_name());
        name.contains("9panic_fmt") && rust_path(&name).is_some_and(|path| path == PANIC_FMT)
    }) else {
        return 0;
    };
    if panic_fmt.count_params() != 3 {
        return 0;
    }
    let mut changed = 0;
    let ir = ir::Module::new(module);
    let panic_fmt = ir.wrap_function(panic_fmt);
    let i64_type = ir.i64_type();
    // The walk reads each next use first; only an operand of the calls among the users (a
    // use of another value) changes.
    for use_ in panic_fmt.uses() {
        let Some(call) = use_
            .user()
            .as_call()
            .filter(|c| c.callee() == panic_fmt.as_value())
        else {
            continue;
        };
        let Some(arguments) = call.operand(1) else {
            continue;
        };
        if !on_the_stack(arguments) {
            continue;
        }
        let dangling = i64_type
            .const_int(DANGLING_ARGUMENTS, false)
            .const_int_to_ptr(arguments.ty());
        call.set_operand(1, dangling);
        changed += 1;
    }
    changed
}

/// Whether `pointer` is an address in a stack slot: an `alloca`, through address-space casts
/// and GEPs (instructions or constant expressions).
fn on_the_stack(mut pointer: Value<'_>) -> bool {
    for _ in 0..8 {
        if pointer.is_alloca() {
            return true;
        }
        let opcode = if let Some(instruction) = pointer.as_instruction() {
            instruction.opcode()
        } else if let Some(opcode) = pointer.const_opcode() {
            opcode
        } else {
            return false;
        };
        match opcode {
            InstructionOpcode::AddrSpaceCast
            | InstructionOpcode::BitCast
            | InstructionOpcode::GetElementPtr => match pointer.operand(0) {
                Some(operand) => pointer = operand,
                None => return false,
            },
            _ => return false,
        }
    }
    false
}

/// Marks `f` `alwaysinline` and takes `noinline` off it and off its call sites (rustc puts it
/// on calls of `#[inline(never)]` functions too). Returns whether anything changed.
pub(super) fn make_inlinable(module: &Module<'_>, f: FunctionValue<'_>) -> bool {
    let noinline = Attribute::get_named_enum_kind_id("noinline");
    let always = Attribute::get_named_enum_kind_id("alwaysinline");
    let mut changed = false;
    if f.get_enum_attribute(AttributeLoc::Function, always)
        .is_none()
    {
        f.remove_enum_attribute(AttributeLoc::Function, noinline);
        f.add_attribute(
            AttributeLoc::Function,
            module.get_context().create_enum_attribute(always, 0),
        );
        changed = true;
    }
    // The walk reads each next use first; only attributes of the calls among the users change.
    let f = ir::Module::new(module).wrap_function(f);
    for use_ in f.uses() {
        if let Some(call) = use_.user().as_call()
            && call.callee() == f.as_value()
            && call.has_enum_attribute(AttributeIndex::Function, "noinline")
        {
            call.remove_enum_attribute(AttributeIndex::Function, "noinline");
            changed = true;
        }
    }
    changed
}

/// Whether `f`'s body calls `__offload_gpu_panic` itself (a specialized function's).
fn calls_the_report(f: FunctionValue<'_>) -> bool {
    f.get_first_basic_block()
        .and_then(|b| b.get_first_instruction())
        .into_iter()
        .flat_map(|first| std::iter::successors(Some(first), |i| i.get_next_instruction()))
        .filter_map(|i| i.get_operand(i.get_num_operands().checked_sub(1)?))
        .filter_map(|op| op.value())
        .any(|callee| {
            callee.is_pointer_value() && is_reporter(&cstr(callee.into_pointer_value().get_name()))
        })
}

/// Whether `f` is already the one-call body this pass gives it.
fn is_redirected(f: FunctionValue<'_>, reporter: &str) -> bool {
    f.count_basic_blocks() == 1
        && f.get_first_basic_block()
            .and_then(|b| b.get_first_instruction())
            .and_then(|i| i.get_operand(i.get_num_operands() - 1))
            .and_then(|callee| callee.value())
            .is_some_and(|callee| {
                callee.is_pointer_value() && {
                    let name = cstr(callee.into_pointer_value().get_name());
                    name == reporter || is_reporter(&name)
                }
            })
}

/// Replaces `f` by a function of the same name whose body is a call of `reporter` with its
/// parameters, then `unreachable`, and returns it; `None` when `reporter` is there with
/// another type. A `reporter` not linked
/// yet is declared with `f`'s type; [`check_reporters`] checks, once linked, that offload-rt
/// defines it so.
fn redirect<'ctx>(
    module: &Module<'ctx>,
    f: FunctionValue<'ctx>,
    name: &str,
    reporter: &str,
) -> Result<Option<FunctionValue<'ctx>>> {
    let context = module.get_context();
    let fn_type = f.get_type();
    let callee = match module.get_function(reporter) {
        Some(existing) if existing.get_type() == fn_type => Some(existing),
        Some(_) => None,
        None => Some(module.add_function(reporter, fn_type, None)),
    };
    let specialized = match callee {
        Some(_) => None,
        None => match module.get_function(REPORTER) {
            Some(report) if report.count_params() == 7 => Some(report),
            _ => return Ok(None),
        },
    };
    let linkage = f.get_linkage();
    f.as_global_value()
        .set_name(&format!("{name}.offload.replaced"));
    let lean = module.add_function(name, fn_type, Some(linkage));
    for kind in ["noreturn", "nounwind"] {
        lean.add_attribute(
            AttributeLoc::Function,
            context.create_enum_attribute(Attribute::get_named_enum_kind_id(kind), 0),
        );
    }
    let builder = context.create_builder();
    builder.position_at_end(context.append_basic_block(lean, "entry"));
    let built = match (callee, specialized) {
        (Some(callee), _) => {
            let args: Vec<BasicMetadataValueEnum<'_>> =
                lean.get_param_iter().map(Into::into).collect();
            builder.build_call(callee, &args, "")
        }
        (None, Some(report)) => {
            let message = REDIRECTS
                .iter()
                .position(|(_, r)| *r == reporter)
                .map_or("a panic", |i| SPECIALIZED_MESSAGES[i]);
            report_specialized(module, &builder, f, lean, report, message)
        }
        (None, None) => unreachable!("one of the two is set above"),
    }
    .and_then(|_| builder.build_unreachable());
    built.map_err(|e| LinkError::Codegen {
        cpu: "device link".into(),
        message: format!("redirecting {name} to {reporter}: {e}"),
    })?;
    f.as_global_value()
        .as_pointer_value()
        .replace_all_uses_with(lean.as_global_value().as_pointer_value());
    // Every use of `f` now refers to `lean`; nothing refers to `f` any more.
    ir::Module::new(module).wrap_function(f).delete();
    Ok(Some(lean))
}

/// The body of a specialized panic function: `report(Message, message, 0, 0, 0, location)`,
/// the location being the last parameter when it still is one (a `&Location`: a pointer to
/// 24 dereferenceable bytes), else null.
fn report_specialized<'ctx>(
    module: &Module<'ctx>,
    builder: &inkwell::builder::Builder<'ctx>,
    original: FunctionValue<'ctx>,
    lean: FunctionValue<'ctx>,
    report: FunctionValue<'ctx>,
    message: &str,
) -> std::result::Result<inkwell::values::CallSiteValue<'ctx>, inkwell::builder::BuilderError> {
    let context = module.get_context();
    let generic = context.ptr_type(inkwell::AddressSpace::default());
    let deref = Attribute::get_named_enum_kind_id("dereferenceable");
    let location = lean
        .count_params()
        .checked_sub(1)
        .filter(|&last| {
            lean.get_nth_param(last)
                .is_some_and(|p| p.is_pointer_value())
                && original
                    .get_enum_attribute(AttributeLoc::Param(last), deref)
                    .is_some_and(|a| a.get_enum_value() == 24)
        })
        .and_then(|last| lean.get_nth_param(last))
        .map(|p| p.into_pointer_value())
        .or_else(|| constant_location(original))
        .unwrap_or(generic.const_null());
    let text = builder.build_global_string_ptr(message, "offload.panic.message")?;
    let text = builder.build_address_space_cast(text.as_pointer_value(), generic, "")?;
    let types = report.get_type().get_param_types();
    let int = |i: usize, v: u64| -> BasicMetadataValueEnum<'ctx> {
        types[i].into_int_type().const_int(v, false).into()
    };
    let args = [
        int(0, 0),
        text.into(),
        int(2, message.len() as u64),
        int(3, 0),
        int(4, 0),
        int(5, 0),
        location.into(),
    ];
    builder.build_call(report, &args, "")
}

/// The Rust path of a mangled symbol, without its hash (`core::panicking::panic_fmt`).
fn rust_path(symbol: &str) -> Option<String> {
    Some(format!("{:#}", rustc_demangle::try_demangle(symbol).ok()?))
}

/// The location a specialized panic function hands on to core's panic machinery as a
/// constant: the last argument (`#[track_caller]`'s) of a call of a `core::panicking`
/// function in its body.
fn constant_location<'ctx>(f: FunctionValue<'ctx>) -> Option<inkwell::values::PointerValue<'ctx>> {
    use inkwell::values::InstructionOpcode;
    f.get_basic_block_iter()
        .flat_map(|b| b.get_instructions())
        .filter(|i| i.get_opcode() == InstructionOpcode::Call && i.get_num_operands() >= 2)
        .find_map(|call| {
            let operands = call.get_num_operands();
            let callee = call.get_operand(operands - 1)?.value()?;
            let name = cstr(callee.into_pointer_value().get_name());
            let path = rust_path(&name)?;
            if !path.starts_with("core::panicking::") {
                return None;
            }
            let last = call.get_operand(operands - 2)?.value()?;
            let last = last.is_pointer_value().then(|| last.into_pointer_value())?;
            last.is_const().then_some(last)
        })
}

/// Checks that each reporter a redirected body calls is defined with that body's type: a
/// reporter whose Rust signature no longer matches core's function (another toolchain) would
/// be called with the wrong parameters.
pub(super) fn check_reporters(module: &Module<'_>) -> Result<()> {
    for f in module.get_functions() {
        let name = cstr(f.get_name());
        let Some(Role::Redirect(reporter)) = role(&name) else {
            continue;
        };
        if !is_redirected(f, reporter) || calls_the_report(f) {
            continue;
        }
        let Some(defined) = module.get_function(reporter) else {
            continue;
        };
        if defined.count_basic_blocks() > 0 && defined.get_type() != f.get_type() {
            return Err(LinkError::Link {
                name: reporter.to_owned(),
                message: format!(
                    "offload-rt's {reporter} has the type {}, but the toolchain's {name} has {}: \
                     offload-rt does not match this toolchain's core",
                    defined.get_type().print_to_string(),
                    f.get_type().print_to_string(),
                ),
            });
        }
    }
    Ok(())
}

/// The calls of `reporters` in `function` that `unreachable` follows: its panic sites.
pub(super) fn site_calls<'m>(
    function: ir::Function<'m>,
    reporters: &[ir::Function<'m>],
) -> Vec<ir::Call<'m>> {
    function
        .blocks()
        .flat_map(|b| b.instructions())
        .filter_map(|i| i.as_call())
        .filter(|call| {
            reporters.iter().any(|r| r.as_value() == call.callee())
                && call.next().is_some_and(|next| next.is_unreachable())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;

    const BOUNDS_CHECK: &str = "_RNvNtCskadkSMZu6gz_4core9panicking18panic_bounds_check";

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
            .map(|v| cstr(v.into_pointer_value().get_name()))
            .collect()
    }

    #[test]
    fn core_functions_are_found_by_demangled_path() {
        assert!(matches!(
            role(BOUNDS_CHECK),
            Some(Role::Redirect(abi::GPU_PANIC_BOUNDS_CHECK))
        ));
        assert!(matches!(
            role("_RNvNtCskadkSMZu6gz_4core9panicking9panic_fmt"),
            Some(Role::Inline)
        ));
        assert!(matches!(
            role("_RNvCseulmdZsCeCG_7___rustc17rust_begin_unwind"),
            Some(Role::Inline)
        ));
        assert!(role("__offload_gpu_panic45").is_none());
        assert!(role("_RNvCs5AuxUanGK3T_12lean_kernels5saxpy").is_none());
        assert!(role("saxpy").is_none());
    }

    #[test]
    fn a_bounds_check_forwards_its_parameters_to_the_reporter() {
        let context = Context::create();
        let m = module(
            &context,
            &format!(
                "declare void @format_everything(ptr)\n\
                 define void @{BOUNDS_CHECK}(i64 %index, i64 %len, ptr %location) #0 {{\n  \
                 call void @format_everything(ptr %location)\n  unreachable\n}}\n\
                 define void @k(i64 %i) {{\n  call void @{BOUNDS_CHECK}(i64 %i, i64 4, ptr null) #0\n  ret void\n}}\n\
                 attributes #0 = {{ noinline }}\n"
            ),
        );
        assert_eq!(
            lean_panics(&m, false).unwrap(),
            0,
            "no reporters, no change"
        );
        assert!(lean_panics(&m, true).unwrap() > 0);
        m.verify().unwrap();
        let lean = m.get_function(BOUNDS_CHECK).unwrap();
        assert_eq!(callees(lean), [abi::GPU_PANIC_BOUNDS_CHECK]);
        let always = Attribute::get_named_enum_kind_id("alwaysinline");
        assert!(
            lean.get_enum_attribute(AttributeLoc::Function, always)
                .is_some()
        );
        // The call site's `noinline` is gone, so the body inlines where the panic is.
        let text = m.print_to_string().to_string();
        let call = text
            .lines()
            .find(|l| l.contains("call void @") && l.contains("(i64 %i, i64 4"))
            .unwrap();
        assert!(!call.contains('#'), "{call}");
        check_reporters(&m).unwrap();
        // A reporter of another type is offload-rt out of step with core: an error.
        let other = module(
            &context,
            &format!(
                "define void @__offload_gpu_panic_bounds_check(i64 %index) {{\n  unreachable\n}}\n\
                 define void @{BOUNDS_CHECK}(i64 %index, i64 %len, ptr %location) {{\n  \
                 call void @__offload_gpu_panic_bounds_check(i64 %index, i64 %len, ptr %location)\n  unreachable\n}}\n"
            ),
        );
        assert!(matches!(
            check_reporters(&other),
            Err(LinkError::Link { .. })
        ));
    }

    #[test]
    fn a_specialized_core_function_reports_its_wording_and_location() {
        let context = Context::create();
        let m = module(
            &context,
            &format!(
                "@location = private constant [24 x i8] zeroinitializer\n\
                 declare void @format_everything(ptr)\n\
                 define void @__offload_gpu_panic_bounds_check(i64 %i, i64 %l, ptr %loc) {{\n  unreachable\n}}\n\
                 define void @__offload_gpu_panic(i32 %k, ptr %m, i64 %n, i64 %a, i64 %b, i64 %c, ptr %loc) {{\n  unreachable\n}}\n\
                 define internal void @{BOUNDS_CHECK}(i64 %index, ptr dereferenceable(24) %location) {{\n  \
                 call void @format_everything(ptr %location)\n  unreachable\n}}\n\
                 define void @k(i64 %i) {{\n  call void @{BOUNDS_CHECK}(i64 %i, ptr @location)\n  ret void\n}}\n"
            ),
        );
        assert!(lean_panics(&m, true).unwrap() > 0);
        m.verify().unwrap();
        let lean = m.get_function(BOUNDS_CHECK).unwrap();
        assert_eq!(callees(lean), [abi::GPU_PANIC]);
        // The location is the last parameter, handed on.
        let text = m.print_to_string().to_string();
        let call = text
            .lines()
            .find(|l| l.contains("call void @__offload_gpu_panic("))
            .unwrap();
        assert!(call.trim_end().ends_with("ptr %1)"), "{call}");
        assert!(
            m.print_to_string()
                .to_string()
                .contains("index out of bounds (the index and length are not recorded here)")
        );
        check_reporters(&m).unwrap();
    }

    /// A formatted message's arguments on AMDGPU's private stack, seen through a flat
    /// address, and a literal message's encoded length: only the first call changes, and the
    /// array with the formatter's address is left without a reader.
    #[test]
    fn a_formatted_messages_arguments_are_not_handed_to_panic_fmt() {
        const PANIC_FMT_SYMBOL: &str = "_RNvNtCskadkSMZu6gz_4core9panicking9panic_fmt";
        let context = Context::create();
        let text = format!(
            "target datalayout = \"A5\"\n\
             target triple = \"amdgcn-amd-amdhsa\"\n\
             @template = private constant [4 x i8] zeroinitializer\n\
             declare void @float_debug_fmt()\n\
             define void @{PANIC_FMT_SYMBOL}(ptr %template, ptr %args, ptr %location) {{\n  unreachable\n}}\n\
             define void @formatted() {{\n  \
             %args = alloca [2 x ptr], align 8, addrspace(5)\n  \
             %f = getelementptr inbounds i8, ptr addrspace(5) %args, i32 8\n  \
             store ptr @float_debug_fmt, ptr addrspace(5) %f, align 8\n  \
             %flat = addrspacecast ptr addrspace(5) %args to ptr\n  \
             call void @{PANIC_FMT_SYMBOL}(ptr @template, ptr %flat, ptr null)\n  unreachable\n}}\n\
             define void @literal() {{\n  \
             call void @{PANIC_FMT_SYMBOL}(ptr @template, ptr inttoptr (i64 9 to ptr), ptr null)\n  unreachable\n}}\n"
        );
        let buffer = MemoryBuffer::create_from_memory_range_copy(text.as_bytes(), "test");
        let m = context.create_module_from_ir(buffer).unwrap();
        assert_eq!(unread_formatted_arguments(&m), 1);
        m.verify().unwrap();
        let ir = m.print_to_string().to_string();
        let calls: Vec<&str> = ir
            .lines()
            .filter(|l| l.contains(&format!("call void @{PANIC_FMT_SYMBOL}")))
            .collect();
        assert_eq!(calls.len(), 2, "{ir}");
        assert!(
            calls[0].contains("ptr inttoptr (i64 8 to ptr)"),
            "{}",
            calls[0]
        );
        assert!(
            calls[1].contains("ptr inttoptr (i64 9 to ptr)"),
            "{}",
            calls[1]
        );
        assert_eq!(unread_formatted_arguments(&m), 0, "nothing left to change");
    }
}
