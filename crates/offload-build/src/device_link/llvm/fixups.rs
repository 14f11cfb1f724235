//! Fix-ups of the linked module around the kernels: which functions are kernels, AMDGPU's
//! `byref` kernel arguments, the internalization that keeps only the kernels and the
//! [`HOST_GLOBALS`] external, and the pointers known to be global memory.

use inkwell::attributes::AttributeLoc;
use inkwell::context::{AsContextRef, Context};
use inkwell::module::{Linkage, Module};
use inkwell::values::FunctionValue;

use super::{HOST_GLOBALS, cstr, has_local_linkage, is_amdgpu, is_nvptx, strip_casts};
use crate::device_link::{LinkError, Result};

pub(super) const PTX_KERNEL_CC: u32 = 71;
pub(super) const AMDGPU_KERNEL_CC: u32 = 91;

pub(super) fn is_kernel(f: FunctionValue<'_>) -> bool {
    matches!(f.get_call_conventions(), PTX_KERNEL_CC | AMDGPU_KERNEL_CC)
}

/// Makes the AMDGPU kernels' by-value parameters `byref` kernel arguments, as clang does for
/// aggregates: offload-rt's `#[kernel]` passes each by-value parameter of an AMDGPU entry as a
/// reference (`ptr dereferenceable(N) align A`), since rustc would pass a struct as a pointer
/// to a copy or split it into scalars, neither of which is the parameter's bytes in the kernel
/// argument segment. Each such kernel becomes an internal function called by a new kernel of
/// the same name whose parameter is `ptr addrspace(4) byref([N x i8]) align A`: the argument's
/// bytes at its aligned offset, where the launch ABI puts them. Returns how many kernels
/// changed.
pub(super) fn amdgpu_byref_parameters<'ctx>(
    context: &'ctx Context,
    module: &Module<'ctx>,
) -> Result<usize> {
    let kind = |name: &str| inkwell::attributes::Attribute::get_named_enum_kind_id(name);
    let (deref, align, byref) = (kind("dereferenceable"), kind("align"), kind("byref"));
    let kernels: Vec<FunctionValue<'_>> = module
        .get_functions()
        .filter(|f| f.get_call_conventions() == AMDGPU_KERNEL_CC && f.count_basic_blocks() > 0)
        .collect();
    let mut changed = 0;
    let mut debug_info = WrapperDebugInfo::new(module);
    for inner in kernels {
        let params: Vec<Option<(u64, u64)>> = (0..inner.count_params())
            .map(|i| {
                let size = inner.get_enum_attribute(AttributeLoc::Param(i), deref)?;
                let a = inner
                    .get_enum_attribute(AttributeLoc::Param(i), align)
                    .map_or(1, |a| a.get_enum_value());
                Some((size.get_enum_value(), a))
            })
            .collect();
        if params.iter().all(Option::is_none) {
            continue;
        }
        let name = cstr(inner.get_name());
        let constant = context.ptr_type(inkwell::AddressSpace::from(4u16));
        let arg_types: Vec<inkwell::types::BasicMetadataTypeEnum<'_>> = inner
            .get_param_iter()
            .zip(&params)
            .map(|(p, byref)| match byref {
                Some(_) => constant.into(),
                None => p.get_type().into(),
            })
            .collect();
        let fn_type = context.void_type().fn_type(&arg_types, false);
        inner
            .as_global_value()
            .set_name(&format!("{name}.offload.body"));
        let kernel = module.add_function(&name, fn_type, Some(Linkage::External));
        kernel.set_call_conventions(AMDGPU_KERNEL_CC);
        for attr in inner.attributes(AttributeLoc::Function) {
            kernel.add_attribute(AttributeLoc::Function, attr);
        }
        inner.set_call_conventions(0);
        inner.as_global_value().set_linkage(Linkage::Internal);
        inner.add_attribute(
            AttributeLoc::Function,
            context.create_enum_attribute(kind("alwaysinline"), 0),
        );
        inner.remove_enum_attribute(AttributeLoc::Function, kind("noinline"));
        let builder = context.create_builder();
        let entry = context.append_basic_block(kernel, "entry");
        builder.position_at_end(entry);
        let mut args = Vec::with_capacity(params.len());
        for (i, byref_param) in params.iter().enumerate() {
            let index = i as u32;
            let arg = kernel
                .get_nth_param(index)
                .expect("one argument per parameter");
            match byref_param {
                Some((size, a)) => {
                    let bytes = context.i8_type().array_type(*size as u32);
                    kernel.add_attribute(
                        AttributeLoc::Param(index),
                        context.create_type_attribute(byref, bytes.into()),
                    );
                    kernel.add_attribute(
                        AttributeLoc::Param(index),
                        context.create_enum_attribute(align, *a),
                    );
                    let flat = builder
                        .build_address_space_cast(
                            arg.into_pointer_value(),
                            context.ptr_type(inkwell::AddressSpace::default()),
                            "",
                        )
                        .map_err(|e| LinkError::Codegen {
                            cpu: "amdgpu".into(),
                            message: e.to_string(),
                        })?;
                    args.push(flat.into());
                }
                None => args.push(arg.into()),
            }
        }
        let built = builder.build_call(inner, &args, "").and_then(|call| {
            builder.build_return(None)?;
            Ok(call)
        });
        let call = built.map_err(|e| LinkError::Codegen {
            cpu: "amdgpu".into(),
            message: e.to_string(),
        })?;
        debug_info.describe(inner, kernel, call);
        changed += 1;
    }
    Ok(changed)
}

/// The debug information the kernel wrappers of one module get when the kernels they wrap
/// have some (a dev build's line tables): one compile unit, made with the first wrapper, and a
/// subprogram for each, so that a wrapped kernel's lines, once inlined, belong to the kernel
/// and reach the code object's line table (a function without a subprogram gets none).
struct WrapperDebugInfo<'m, 'ctx> {
    module: &'m Module<'ctx>,
    builder: Option<inkwell::llvm_sys::prelude::LLVMDIBuilderRef>,
}

impl<'m, 'ctx> WrapperDebugInfo<'m, 'ctx> {
    fn new(module: &'m Module<'ctx>) -> Self {
        WrapperDebugInfo {
            module,
            builder: None,
        }
    }

    /// Gives `kernel`, which wraps `inner` with `call`, a subprogram at `inner`'s line and the
    /// call a location in it, when `inner` has a subprogram.
    fn describe(
        &mut self,
        inner: FunctionValue<'_>,
        kernel: FunctionValue<'_>,
        call: inkwell::values::CallSiteValue<'_>,
    ) {
        use inkwell::llvm_sys::debuginfo as di;
        use inkwell::values::AsValueRef;
        // SAFETY: `inner`, `kernel` and `call` are live values of the module, for which the
        // builder is made (once, finalized and disposed of on drop); every metadata node it
        // makes belongs to the module's context.
        unsafe {
            let inner_sp = di::LLVMGetSubprogram(inner.as_value_ref());
            if inner_sp.is_null() {
                return;
            }
            let file = di::LLVMDIScopeGetFile(inner_sp);
            let line = di::LLVMDISubprogramGetLine(inner_sp);
            let builder = *self.builder.get_or_insert_with(|| {
                let builder = di::LLVMCreateDIBuilder(self.module.as_mut_ptr());
                let producer = "offload device link";
                di::LLVMDIBuilderCreateCompileUnit(
                    builder,
                    di::LLVMDWARFSourceLanguage::LLVMDWARFSourceLanguageRust,
                    file,
                    producer.as_ptr().cast(),
                    producer.len(),
                    1,
                    c"".as_ptr(),
                    0,
                    0,
                    c"".as_ptr(),
                    0,
                    di::LLVMDWARFEmissionKind::LLVMDWARFEmissionKindLineTablesOnly,
                    0,
                    0,
                    0,
                    c"".as_ptr(),
                    0,
                    c"".as_ptr(),
                    0,
                );
                builder
            });
            let ty = di::LLVMDIBuilderCreateSubroutineType(
                builder,
                file,
                std::ptr::null_mut(),
                0,
                di::LLVMDIFlagZero,
            );
            let name = cstr(kernel.get_name());
            let sp = di::LLVMDIBuilderCreateFunction(
                builder,
                file,
                name.as_ptr().cast(),
                name.len(),
                name.as_ptr().cast(),
                name.len(),
                file,
                line,
                ty,
                0,
                1,
                line,
                di::LLVMDIFlagZero,
                1,
            );
            di::LLVMSetSubprogram(kernel.as_value_ref(), sp);
            let location = di::LLVMDIBuilderCreateDebugLocation(
                self.module.get_context().as_ctx_ref(),
                line,
                0,
                sp,
                std::ptr::null_mut(),
            );
            di::LLVMInstructionSetDebugLoc(call.as_value_ref(), location);
        }
    }
}

impl Drop for WrapperDebugInfo<'_, '_> {
    fn drop(&mut self) {
        if let Some(builder) = self.builder.take() {
            // SAFETY: the builder was made by `describe` for the live module and is used no
            // more.
            unsafe {
                inkwell::llvm_sys::debuginfo::LLVMDIBuilderFinalize(builder);
                inkwell::llvm_sys::debuginfo::LLVMDisposeDIBuilder(builder);
            }
        }
    }
}

/// Keeps the kernels, [`HOST_GLOBALS`] and the panic path's late functions
/// ([`super::panic_sites::LATE`]) external and internalizes every other definition; returns the
/// kernels.
pub(super) fn internalize(module: &Module<'_>, wanted: Option<&[String]>) -> Result<Vec<String>> {
    let mut kept = Vec::new();
    for f in module.get_functions() {
        let gv = f.as_global_value();
        if gv.is_declaration() {
            continue;
        }
        let name = cstr(gv.get_name());
        let keep = match wanted {
            Some(wanted) => wanted.contains(&name),
            None => is_kernel(f),
        };
        if super::panic_sites::LATE.contains(&name.as_str()) {
            gv.set_linkage(Linkage::External);
        } else if keep {
            kept.push(name);
            gv.set_linkage(Linkage::External);
        } else if !has_local_linkage(gv.get_linkage()) {
            gv.set_linkage(Linkage::Internal);
        }
        // The image's target machine decides the CPU, so one device build serves every
        // architecture of its triple.
        f.remove_string_attribute(AttributeLoc::Function, "target-cpu");
        f.remove_string_attribute(AttributeLoc::Function, "target-features");
    }
    let amdgpu = is_amdgpu(module);
    for g in module.get_globals() {
        let name = cstr(g.get_name());
        if HOST_GLOBALS.contains(&name.as_str()) && !g.is_declaration() {
            // The runtime writes it after loading the image: the optimizer must not assume its
            // initializer, and the driver must find it (AMD code objects export only
            // non-hidden symbols).
            g.set_linkage(Linkage::External);
            g.set_externally_initialized(true);
            if amdgpu {
                g.set_visibility(inkwell::GlobalVisibility::Protected);
            }
        } else if !g.is_declaration()
            && !name.starts_with("llvm.")
            && !has_local_linkage(g.get_linkage())
        {
            g.set_linkage(Linkage::Internal);
        }
    }
    if let Some(wanted) = wanted
        && let Some(missing) = wanted.iter().find(|w| !kept.contains(w))
    {
        return Err(LinkError::MissingKernel {
            name: missing.clone(),
        });
    }
    if kept.is_empty() {
        return Err(LinkError::NoKernels);
    }
    kept.sort();
    Ok(kept)
}

/// Marks as global memory the pointers the module knows to be device memory, so that the
/// code generator's address-space inference turns their accesses into global ones (`ld.global`,
/// `global_load`, not generic `ld`, `flat_load`): on NVPTX, those a kernel makes from its
/// parameters' integers (`inttoptr` of a value read out of a parameter: rustc passes slices
/// and structs by value as integer arrays), as NVPTX's own lowering does for pointer
/// parameters (a launch's addresses are device memory, which is global); on both GPU
/// triples, the channel pointer read from [`HOST_GLOBALS`] (host memory mapped into the
/// device, which global instructions reach). A cast to address space 1 and back after each:
/// run after the optimizer, which would fold the pair away. Returns how many pointers changed.
pub(super) fn global_pointers(module: &Module<'_>) -> usize {
    use inkwell::llvm_sys::core as llvm;
    use inkwell::values::{AsValueRef, InstructionOpcode};
    let context = module.get_context();
    let builder = context.create_builder();
    let global = context.ptr_type(inkwell::AddressSpace::from(1u16));
    let generic = context.ptr_type(inkwell::AddressSpace::default());
    let nvptx = is_nvptx(module);
    let host_globals: Vec<_> = HOST_GLOBALS
        .iter()
        .filter_map(|name| module.get_global(name))
        .map(|g| g.as_pointer_value().as_value_ref())
        .collect();
    let mut changed = 0;
    for f in module.get_functions() {
        let kernel = f.get_call_conventions() == PTX_KERNEL_CC;
        let made: Vec<_> = f
            .get_basic_block_iter()
            .flat_map(|b| b.get_instructions())
            .filter(|i| {
                // SAFETY: `i` is a live instruction of `f`; its operand 0 is a live value.
                let operand = unsafe { llvm::LLVMGetOperand(i.as_value_ref(), 0) };
                match i.get_opcode() {
                    InstructionOpcode::IntToPtr => {
                        // SAFETY: as above.
                        nvptx && kernel && unsafe { from_parameter(operand, 8) }
                    }
                    InstructionOpcode::Load => {
                        i.get_type().is_pointer_type()
                            && host_globals.iter().any(|g| strip_casts(operand) == *g)
                    }
                    _ => false,
                }
            })
            .collect();
        for made in made {
            let Some(next) = made.get_next_instruction() else {
                continue;
            };
            builder.position_before(&next);
            // SAFETY: `made` is an `inttoptr` or a load of a pointer: a pointer value.
            let pointer = unsafe { inkwell::values::PointerValue::new(made.as_value_ref()) };
            let Ok(as_global) = builder.build_address_space_cast(pointer, global, "global") else {
                continue;
            };
            let Ok(back) = builder.build_address_space_cast(as_global, generic, "") else {
                continue;
            };
            // SAFETY: all three are live values of `f`; after the replacement the first cast
            // reads `made` again, so the chain is `made -> global -> back -> users`.
            unsafe {
                llvm::LLVMReplaceAllUsesWith(made.as_value_ref(), back.as_value_ref());
                llvm::LLVMSetOperand(as_global.as_value_ref(), 0, made.as_value_ref());
            }
            changed += 1;
        }
    }
    changed
}

/// Whether `value` is read out of a parameter of its function: the parameter itself, or an
/// `extractvalue`, `load`, `getelementptr` or integer cast of such a value (`depth` steps at
/// most).
///
/// # Safety
/// `value` is a live value of a live module.
unsafe fn from_parameter(value: inkwell::llvm_sys::prelude::LLVMValueRef, depth: u32) -> bool {
    use inkwell::llvm_sys::LLVMOpcode;
    use inkwell::llvm_sys::core as llvm;
    // SAFETY: this function's contract, for `value` and its operands.
    unsafe {
        if !llvm::LLVMIsAArgument(value).is_null() {
            return true;
        }
        if depth == 0 || llvm::LLVMIsAInstruction(value).is_null() {
            return false;
        }
        match llvm::LLVMGetInstructionOpcode(value) {
            LLVMOpcode::LLVMExtractValue
            | LLVMOpcode::LLVMLoad
            | LLVMOpcode::LLVMGetElementPtr
            | LLVMOpcode::LLVMTrunc
            | LLVMOpcode::LLVMZExt => from_parameter(llvm::LLVMGetOperand(value, 0), depth - 1),
            _ => false,
        }
    }
}
