//! Fix-ups of the linked module around the kernels: which functions are kernels, AMDGPU's
//! `byref` kernel arguments, the internalization that keeps only the kernels and the
//! [`HOST_GLOBALS`] external, and the pointers known to be global memory.

#![forbid(unsafe_code)]

use inkwell::attributes::AttributeLoc;
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::values::{FunctionValue, InstructionOpcode};

use super::common::{HOST_GLOBALS, cstr, has_local_linkage, is_amdgpu, is_nvptx};
use super::ir::{self, Value};
use crate::device_link::error::{LinkError, Result};

use super::ir::call_conv::{AMDGPU_KERNEL as AMDGPU_KERNEL_CC, PTX_KERNEL as PTX_KERNEL_CC};

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
struct WrapperDebugInfo<'m> {
    module: ir::Module<'m>,
    builder: Option<ir::DebugInfoBuilder<'m>>,
}

impl<'m> WrapperDebugInfo<'m> {
    fn new(module: &'m Module<'_>) -> Self {
        WrapperDebugInfo {
            module: ir::Module::new(module),
            builder: None,
        }
    }

    /// Gives `kernel`, which wraps `inner` with `call`, a subprogram at `inner`'s line and the
    /// call a location in it, when `inner` has a subprogram. The builder is made once, and
    /// finalized and disposed of when this is dropped.
    fn describe(
        &mut self,
        inner: FunctionValue<'_>,
        kernel: FunctionValue<'_>,
        call: inkwell::values::CallSiteValue<'_>,
    ) {
        let module = self.module;
        let Some(inner_sp) = module.wrap_function(inner).subprogram() else {
            return;
        };
        let Some(file) = inner_sp.file() else {
            return;
        };
        let line = inner_sp.line();
        let builder = self.builder.get_or_insert_with(|| {
            let builder = module.debug_info_builder();
            builder.create_rust_line_tables_unit(file, "offload device link", true);
            builder
        });
        let ty = builder.create_subroutine_type(file);
        let name = cstr(kernel.get_name());
        let sp =
            builder.create_function(file, &name, &name, file, line, ty, false, true, line, true);
        module.wrap_function(kernel).set_subprogram(sp);
        let location = builder.debug_location(line, 0, sp);
        module.wrap_call(call).set_debug_location(Some(location));
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
    let ir = ir::Module::new(module);
    let builder = ir.builder();
    let global = ir.ptr_type(1);
    let generic = ir.ptr_type(0);
    let nvptx = is_nvptx(module);
    let host_globals: Vec<Value<'_>> = HOST_GLOBALS
        .iter()
        .filter_map(|name| ir.global(name))
        .map(|g| g.as_value())
        .collect();
    let mut changed = 0;
    for f in ir.functions() {
        let kernel = f.call_conv() == PTX_KERNEL_CC;
        let made: Vec<_> = f
            .blocks()
            .flat_map(|b| b.instructions())
            .filter(|i| match i.opcode() {
                InstructionOpcode::IntToPtr => {
                    nvptx && kernel && i.operand(0).is_some_and(|o| from_parameter(o, 8))
                }
                InstructionOpcode::Load => {
                    i.ty().is_pointer()
                        && i.operand(0).is_some_and(|operand| {
                            host_globals.contains(&operand.strip_addrspace_casts())
                        })
                }
                _ => false,
            })
            .collect();
        for made in made {
            let Some(next) = made.next() else {
                continue;
            };
            builder.position_before(next);
            let as_global = builder.build_addrspace_cast(made.as_value(), global, c"global");
            let back = builder.build_addrspace_cast(as_global, generic, c"");
            // After the replacement the first cast reads `made` again, so the chain is
            // `made -> global -> back -> users`.
            made.replace_all_uses_with(back);
            as_global
                .as_instruction()
                .expect("a cast of an instruction is one")
                .set_operand(0, made);
            changed += 1;
        }
    }
    changed
}

/// Whether `value` is read out of a parameter of its function: the parameter itself, or an
/// `extractvalue`, `load`, `getelementptr` or integer cast of such a value (`depth` steps at
/// most).
fn from_parameter(value: Value<'_>, depth: u32) -> bool {
    if value.is_argument() {
        return true;
    }
    let Some(instruction) = value.as_instruction().filter(|_| depth > 0) else {
        return false;
    };
    match instruction.opcode() {
        InstructionOpcode::ExtractValue
        | InstructionOpcode::Load
        | InstructionOpcode::GetElementPtr
        | InstructionOpcode::Trunc
        | InstructionOpcode::ZExt => instruction
            .operand(0)
            .is_some_and(|operand| from_parameter(operand, depth - 1)),
        _ => false,
    }
}
