//! The in-process device link on LLVM 22 (inkwell): lazy bitcode linking, internalization,
//! the shared-memory rewrite, `default<O3>` and code generation for NVPTX and AMDGPU.

use std::collections::HashSet;
use std::ffi::CStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;

use inkwell::OptimizationLevel;
use inkwell::attributes::AttributeLoc;
use inkwell::context::Context;
use inkwell::llvm_sys;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::{Linkage, Module};
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple,
};
use inkwell::values::FunctionValue;

use super::amdgpu::{AmdCodeObjectVersion, fix_amdgpu_e_flags};
use super::ptx::ptx_features;
use super::rlib_bitcode::DeviceInput;
use super::{
    LLVM_MAJOR, LinkError, Result, SHARED_SECTION, find_tool, io_err, nightly_rustc_llvm_major,
    scratch_dir,
};
use crate::command::run as run_command;
use offload_format::AmdTargetId;
use offload_format::triple::{AMDGCN_TRIPLE as AMDGPU_TRIPLE, NVPTX_TRIPLE};
use offload_toolchain::Tool;

const PTX_KERNEL_CC: u32 = 71;
const AMDGPU_KERNEL_CC: u32 = 91;
/// Functions the CUDA driver provides to PTX modules.
const NVPTX_EXTERNALS: &[&str] = &[
    "vprintf",
    "malloc",
    "free",
    "__assertfail",
    DYNAMIC_SHARED_MEMORY,
];
/// Externals an AMDGPU image may keep.
const AMDGPU_EXTERNALS: &[&str] = &[DYNAMIC_SHARED_MEMORY];

/// The block's dynamic shared memory: a zero-length `extern` array in address space 3, which
/// NVPTX emits as `.extern .shared .align 16 .b8 NAME[]` and AMDGPU places after the static
/// LDS (CUDA's `extern __shared__`).
const DYNAMIC_SHARED_MEMORY: &str = "__offload_dynamic_shared_memory";

/// What offload-rt's device API asks every GPU link to define:
/// `__offload_dynamic_shared()`, the generic address of [`DYNAMIC_SHARED_MEMORY`] (Rust cannot
/// declare an address-space-3 global); `__offload_f32_to_bf16(x)`, `x` rounded to bfloat16 by
/// `fptrunc` (Rust has no `bf16` type), which each image's processor lowers its own way:
/// `cvt.rn.bf16.f32` from sm_80 on, integer operations before it and on most AMD GPUs.
const GPU_HELPERS: &[&str] = &["__offload_dynamic_shared", "__offload_f32_to_bf16"];
const GPU_HELPERS_IR: &str = r#"
@__offload_dynamic_shared_memory = external addrspace(3) global [0 x i8], align 16

define ptr @__offload_dynamic_shared() #0 {
entry:
  ret ptr addrspacecast (ptr addrspace(3) @__offload_dynamic_shared_memory to ptr)
}

define i16 @__offload_f32_to_bf16(float %x) #1 {
entry:
  %b = fptrunc float %x to bfloat
  %r = bitcast bfloat %b to i16
  ret i16 %r
}

attributes #0 = { alwaysinline nounwind willreturn }
attributes #1 = { alwaysinline nounwind willreturn memory(none) }
"#;

/// The major version of the LLVM this crate is linked against.
pub fn linked_llvm_major() -> u32 {
    inkwell::support::get_llvm_version().0
}

/// Checks that rustc nightly's LLVM major equals the linked LLVM's (and [`LLVM_MAJOR`]).
pub fn check_llvm_versions(env: &crate::env::Env) -> Result<()> {
    let linked = linked_llvm_major();
    let rustc = nightly_rustc_llvm_major(env)?;
    if rustc != linked || linked != LLVM_MAJOR {
        return Err(LinkError::LlvmMismatch { rustc, linked });
    }
    Ok(())
}

/// Options of [`nvptx_link`].
#[derive(Debug, Clone, Default)]
pub struct NvptxLinkOptions {
    /// The kernels to keep; `None` keeps every `ptx_kernel` function.
    pub kernels: Option<Vec<String>>,
}

/// Options of [`amdgpu_link_object`] and [`amdgpu_code_object`].
#[derive(Debug, Clone, Default)]
pub struct AmdgpuLinkOptions {
    /// The kernels to keep; `None` keeps every `amdgpu_kernel` function.
    pub kernels: Option<Vec<String>>,
    /// `ld.lld`; `None` uses the one [`find_tool`] finds.
    pub ld_lld: Option<PathBuf>,
    /// The code object version to emit.
    pub code_object_version: AmdCodeObjectVersion,
}

/// A relocatable object from the device link and the kernels it defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkedObject {
    /// ELF relocatable object bytes.
    pub object: Vec<u8>,
    /// The kernels kept.
    pub kernels: Vec<String>,
}

fn init_targets() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let config = InitializationConfig::default();
        Target::initialize_nvptx(&config);
        Target::initialize_amd_gpu(&config);
    });
}

fn target_machine(triple: &str, cpu: &str, features: &str) -> Result<TargetMachine> {
    init_targets();
    let target_triple = TargetTriple::create(triple);
    let err = |message: String| LinkError::TargetMachine {
        triple: triple.to_owned(),
        cpu: cpu.to_owned(),
        features: features.to_owned(),
        message,
    };
    let target = Target::from_triple(&target_triple).map_err(|e| err(e.to_string()))?;
    target
        .create_target_machine(
            &target_triple,
            cpu,
            features,
            OptimizationLevel::Aggressive,
            RelocMode::PIC,
            CodeModel::Default,
        )
        .ok_or_else(|| err("LLVM returned no target machine".into()))
}

fn cstr(s: &CStr) -> String {
    s.to_string_lossy().into_owned()
}

fn parse_eager<'ctx>(context: &'ctx Context, input: &DeviceInput) -> Result<Module<'ctx>> {
    // Borrowed, not copied: a full parse keeps nothing of the buffer.
    let buffer = MemoryBuffer::create_from_memory_range(&input.bytes, &input.name);
    Module::parse_bitcode_from_buffer(&buffer, context).map_err(|e| LinkError::ParseBitcode {
        name: input.name.clone(),
        message: e.to_string(),
    })
}

/// Parses bitcode lazily: function bodies are read only when the linker moves them.
///
/// The module reads from `input.bytes` (borrowed, not copied) until it is linked or dropped:
/// every lazy module made from an input is consumed by [`link_inputs`], which the inputs
/// outlive.
fn parse_lazy<'ctx>(context: &'ctx Context, input: &DeviceInput) -> Result<Module<'ctx>> {
    if !super::is_bitcode(&input.bytes) {
        return Err(LinkError::NotBitcode {
            name: input.name.clone(),
        });
    }
    let buffer = MemoryBuffer::create_from_memory_range(&input.bytes, &input.name);
    let raw_buffer = buffer.as_mut_ptr();
    let mut raw_module = std::ptr::null_mut();
    // SAFETY: the context and buffer are live; LLVMGetBitcodeModuleInContext2 takes ownership of
    // the buffer object (the lazy module reads from it), so it is forgotten below, never freed
    // twice. The bytes it points at belong to `input`, which outlives the module (see above).
    let failed = unsafe {
        llvm_sys::bit_reader::LLVMGetBitcodeModuleInContext2(
            context.raw(),
            raw_buffer,
            &mut raw_module,
        )
    };
    std::mem::forget(buffer);
    if failed != 0 || raw_module.is_null() {
        return Err(LinkError::ParseBitcode {
            name: input.name.clone(),
            message: "LLVM could not read the bitcode".into(),
        });
    }
    // SAFETY: `raw_module` is a fresh module owned by nobody else, created in `context`.
    Ok(unsafe { Module::new(raw_module) })
}

fn has_local_linkage(linkage: Linkage) -> bool {
    matches!(
        linkage,
        Linkage::Internal | Linkage::Private | Linkage::AvailableExternally | Linkage::Appending
    )
}

/// Names of the non-local definitions of `module` (functions and variables).
fn external_definitions(module: &Module<'_>) -> HashSet<String> {
    let mut defs = HashSet::new();
    for f in module.get_functions() {
        let gv = f.as_global_value();
        if !gv.is_declaration() && !has_local_linkage(gv.get_linkage()) {
            defs.insert(cstr(gv.get_name()));
        }
    }
    for g in module.get_globals() {
        if !g.is_declaration() && !has_local_linkage(g.get_linkage()) {
            defs.insert(cstr(g.get_name()));
        }
    }
    defs
}

fn has_uses(value: llvm_sys::prelude::LLVMValueRef) -> bool {
    // SAFETY: `value` is a live value of a live module.
    unsafe { !llvm_sys::core::LLVMGetFirstUse(value).is_null() }
}

/// Names `module` uses but does not define (intrinsics excluded).
fn undefined_symbols(module: &Module<'_>) -> HashSet<String> {
    let mut undefined = HashSet::new();
    for f in module.get_functions() {
        let gv = f.as_global_value();
        let name = cstr(gv.get_name());
        if gv.is_declaration()
            && !name.starts_with("llvm.")
            && has_uses(gv.as_pointer_value().as_value_ref_raw())
        {
            undefined.insert(name);
        }
    }
    for g in module.get_globals() {
        if g.is_declaration() && has_uses(g.as_pointer_value().as_value_ref_raw()) {
            undefined.insert(cstr(g.get_name()));
        }
    }
    undefined
}

trait RawValue {
    fn as_value_ref_raw(&self) -> llvm_sys::prelude::LLVMValueRef;
}

impl RawValue for inkwell::values::PointerValue<'_> {
    fn as_value_ref_raw(&self) -> llvm_sys::prelude::LLVMValueRef {
        use inkwell::values::AsValueRef;
        self.as_value_ref()
    }
}

/// A library member of the link: what it defines, and its module once read.
struct Member<'a, 'ctx> {
    input: &'a DeviceInput,
    /// Definitions not yet linked.
    definitions: HashSet<String>,
    /// Whether `definitions` comes from the module itself rather than the archive's symbol map.
    read: bool,
    module: Option<Module<'ctx>>,
}

impl<'ctx> Member<'_, 'ctx> {
    /// Reads the module (lazily: no function body yet) and takes its definitions from it.
    fn read(&mut self, context: &'ctx Context, linked: &HashSet<String>) -> Result<()> {
        let module = parse_lazy(context, self.input)?;
        self.definitions = external_definitions(&module)
            .into_iter()
            .filter(|d| !linked.contains(d))
            .collect();
        self.read = true;
        self.module = Some(module);
        Ok(())
    }
}

/// Links the inputs: the eager ones whole, then library members only as far as they define
/// something still undefined (`llvm-link --only-needed`), repeated until nothing more resolves.
/// A member with a symbol map entry is read only when it resolves a symbol. `external` names
/// symbols the target's loader provides, which no member is expected to define (nor the
/// [`AMDGPU_HELPERS`], defined after the link).
fn link_inputs<'ctx>(
    context: &'ctx Context,
    inputs: &[DeviceInput],
    roots: Roots<'_>,
) -> Result<Module<'ctx>> {
    let main = context.create_module("offload-device");
    let mut members = Vec::new();
    for input in inputs.iter().filter(|i| !i.lazy) {
        let module = parse_eager(context, input)?;
        // Should a library need one of this input's definitions dropped below (the panic
        // handler, say), the input is linked again as a member, for just that.
        members.push(Member {
            input,
            definitions: external_definitions(&module),
            read: true,
            module: None,
        });
        main.link_in_module(module).map_err(|e| LinkError::Link {
            name: input.name.clone(),
            message: e.to_string(),
        })?;
    }
    // Only the kernels are roots: what the rest of the crate's own code needs from libraries
    // is not linked.
    internalize(&main, roots.kernels)?;
    run_pipeline(&main, "globaldce", roots.machine)?;
    let external = roots.external;
    for input in inputs.iter().filter(|i| i.lazy) {
        let mut member = Member {
            input,
            definitions: input
                .defines
                .iter()
                .flatten()
                .cloned()
                .collect::<HashSet<_>>(),
            read: false,
            module: None,
        };
        if input.defines.is_none() {
            member.read(context, &HashSet::new())?;
        }
        members.push(member);
    }
    let mut linked = HashSet::new();
    loop {
        let undefined = undefined_symbols(&main);
        let Some(index) = members
            .iter()
            .position(|m| m.definitions.iter().any(|d| undefined.contains(d)))
        else {
            // A symbol map could be incomplete: before giving up on a symbol, read the members
            // known only from it.
            let unresolved = undefined
                .iter()
                .any(|s| !external.contains(&s.as_str()) && !AMDGPU_HELPERS.contains(&s.as_str()));
            let mut reread = false;
            if unresolved {
                for member in members.iter_mut().filter(|m| !m.read) {
                    member.read(context, &linked)?;
                    reread = true;
                }
            }
            if reread {
                continue;
            }
            break;
        };
        let member = &mut members[index];
        let module = match member.module.take() {
            Some(module) => module,
            None => parse_lazy(context, member.input)?,
        };
        // Only what is needed keeps external linkage; the linker then moves just the values
        // reachable from it and leaves the rest of the member unread.
        for f in module.get_functions() {
            let gv = f.as_global_value();
            if !gv.is_declaration()
                && !has_local_linkage(gv.get_linkage())
                && !undefined.contains(&cstr(gv.get_name()))
            {
                gv.set_linkage(Linkage::Internal);
            }
        }
        for g in module.get_globals() {
            let name = cstr(g.get_name());
            if HOST_GLOBALS.contains(&name.as_str()) && !g.is_declaration() {
                // One global, however many times its member is linked (an internal copy per
                // link would leave each user its own, which the runtime never writes).
                g.set_linkage(Linkage::WeakAny);
            } else if !g.is_declaration()
                && !has_local_linkage(g.get_linkage())
                && !name.starts_with("llvm.")
                && !undefined.contains(&name)
            {
                g.set_linkage(Linkage::Internal);
            }
        }
        member.definitions.retain(|d| {
            let needed = undefined.contains(d);
            if needed {
                linked.insert(d.clone());
            }
            !needed
        });
        main.link_in_module(module).map_err(|e| LinkError::Link {
            name: member.input.name.clone(),
            message: e.to_string(),
        })?;
    }
    Ok(main)
}

fn is_kernel(f: FunctionValue<'_>) -> bool {
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
fn amdgpu_byref_parameters<'ctx>(context: &'ctx Context, module: &Module<'ctx>) -> Result<usize> {
    let kind = |name: &str| inkwell::attributes::Attribute::get_named_enum_kind_id(name);
    let (deref, align, byref) = (kind("dereferenceable"), kind("align"), kind("byref"));
    let kernels: Vec<FunctionValue<'_>> = module
        .get_functions()
        .filter(|f| f.get_call_conventions() == AMDGPU_KERNEL_CC && f.count_basic_blocks() > 0)
        .collect();
    let mut changed = 0;
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
        let built = builder
            .build_call(inner, &args, "")
            .and_then(|_| builder.build_return(None));
        built.map_err(|e| LinkError::Codegen {
            cpu: "amdgpu".into(),
            message: e.to_string(),
        })?;
        changed += 1;
    }
    Ok(changed)
}

/// Globals of the device API that the runtime writes after loading an image (see
/// `offload_rt::device::abi::CHANNEL_SYMBOL`): kept external.
pub const HOST_GLOBALS: &[&str] = &["__offload_channel"];

/// Keeps the kernels and [`HOST_GLOBALS`] external and internalizes every other definition;
/// returns the kernels.
fn internalize(module: &Module<'_>, wanted: Option<&[String]>) -> Result<Vec<String>> {
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
        if keep {
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
    let amdgpu = module
        .get_triple()
        .as_str()
        .to_bytes()
        .starts_with(b"amdgcn");
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

/// Moves every global of [`SHARED_SECTION`] to address space 3 (`.shared` / LDS), undefined
/// initializer, no section. Returns how many moved.
///
/// Where globals live in address space 0 (NVPTX), uses see the new global through a generic
/// pointer. Where they live in another space (AMDGPU: 1), rustc's optimizations have already
/// turned the uses into accesses in that space, and no cast from LDS to it exists: the use tree
/// is rebuilt on the LDS global instead (see [`rewrite_shared_uses`]).
fn move_shared_to_addrspace3(module: &Module<'_>) -> Result<usize> {
    use llvm_sys::core as c;
    let shared: Vec<_> = module
        .get_globals()
        .filter(|g| {
            g.get_section()
                .is_some_and(|s| s.to_bytes() == SHARED_SECTION.as_bytes())
        })
        .collect();
    let raw_module = module.as_mut_ptr();
    for global in &shared {
        let old = global.as_pointer_value().as_value_ref_raw();
        let name = cstr(global.get_name());
        // SAFETY: every reference below comes from the live `module` and its context; values
        // are replaced before the old global is deleted, and the builder is disposed of.
        unsafe {
            let context = c::LLVMGetModuleContext(raw_module);
            let value_type = c::LLVMGlobalGetValueType(old);
            let old_space = c::LLVMGetPointerAddressSpace(c::LLVMTypeOf(old));
            let renamed = format!("{name}.generic\0");
            c::LLVMSetValueName2(old, renamed.as_ptr().cast(), renamed.len() - 1);
            let cname = format!("{name}\0");
            let new =
                c::LLVMAddGlobalInAddressSpace(raw_module, value_type, cname.as_ptr().cast(), 3);
            c::LLVMSetInitializer(new, c::LLVMGetUndef(value_type));
            c::LLVMSetLinkage(new, llvm_sys::LLVMLinkage::LLVMInternalLinkage);
            c::LLVMSetAlignment(new, c::LLVMGetAlignment(old).max(4));
            if old_space == 0 {
                let generic_ptr = c::LLVMPointerTypeInContext(context, 0);
                c::LLVMReplaceAllUsesWith(old, c::LLVMConstAddrSpaceCast(new, generic_ptr));
            } else {
                let builder = c::LLVMCreateBuilderInContext(context);
                let rewritten = rewrite_shared_uses(raw_module, builder, old, new, &name);
                c::LLVMDisposeBuilder(builder);
                rewritten?;
            }
            if has_uses(old) {
                // Only dead constants that referred to it are left.
                c::LLVMReplaceAllUsesWith(old, c::LLVMGetPoison(c::LLVMTypeOf(old)));
            }
            c::LLVMDeleteGlobal(old);
        }
    }
    Ok(shared.len())
}

/// The users of `value`, each once, collected before any is changed.
///
/// # Safety
/// `value` is a live LLVM value.
unsafe fn users(value: llvm_sys::prelude::LLVMValueRef) -> Vec<llvm_sys::prelude::LLVMValueRef> {
    use llvm_sys::core as c;
    let mut users = Vec::new();
    // SAFETY: walking the use list of a live value (the caller's contract).
    unsafe {
        let mut u = c::LLVMGetFirstUse(value);
        while !u.is_null() {
            let user = c::LLVMGetUser(u);
            if !users.contains(&user) {
                users.push(user);
            }
            u = c::LLVMGetNextUse(u);
        }
    }
    users
}

/// Rebuilds every use of `old` (a pointer in a global address space) on `new` (the same memory
/// in address space 3): GEPs are re-created on `new`, loads, stores, atomics and memory
/// intrinsics take `new` as their pointer, casts to generic become casts of `new`. A use that
/// would let the pointer escape in its old address space (stored as a value, passed to a
/// function, merged by a phi) is an error naming the static and the instruction. `old` has no
/// uses left on success.
///
/// # Safety
/// All references are live and belong to `module`; `builder` is a builder of its context.
unsafe fn rewrite_shared_uses(
    module: llvm_sys::prelude::LLVMModuleRef,
    builder: llvm_sys::prelude::LLVMBuilderRef,
    old: llvm_sys::prelude::LLVMValueRef,
    new: llvm_sys::prelude::LLVMValueRef,
    name: &str,
) -> Result<()> {
    use llvm_sys::LLVMOpcode as Op;
    use llvm_sys::core as c;
    // SAFETY: the caller's contract; every value used below is a user of a live value.
    unsafe {
        let unsupported = |user| {
            let text = c::LLVMPrintValueToString(user);
            let instruction = CStr::from_ptr(text).to_string_lossy().trim().to_owned();
            c::LLVMDisposeMessage(text);
            LinkError::SharedMemoryUse {
                name: name.to_owned(),
                instruction,
            }
        };
        let is_operand = |user, index: u32| c::LLVMGetOperand(user, index) == old;
        for user in users(old) {
            let is_instruction = !c::LLVMIsAInstruction(user).is_null();
            let opcode = if is_instruction {
                c::LLVMGetInstructionOpcode(user)
            } else if !c::LLVMIsAConstantExpr(user).is_null() {
                c::LLVMGetConstOpcode(user)
            } else {
                return Err(unsupported(user));
            };
            if is_instruction {
                c::LLVMPositionBuilderBefore(builder, user);
            }
            match opcode {
                Op::LLVMGetElementPtr if c::LLVMGetOperand(user, 0) == old => {
                    let count = c::LLVMGetNumOperands(user);
                    let mut indices: Vec<_> = (1..count)
                        .map(|i| c::LLVMGetOperand(user, i as u32))
                        .collect();
                    for index in &indices {
                        if *index == old {
                            return Err(unsupported(user));
                        }
                    }
                    let source = c::LLVMGetGEPSourceElementType(user);
                    let flags = c::LLVMGEPGetNoWrapFlags(user);
                    let gep = if is_instruction {
                        c::LLVMBuildGEPWithNoWrapFlags(
                            builder,
                            source,
                            new,
                            indices.as_mut_ptr(),
                            indices.len() as u32,
                            c"".as_ptr(),
                            flags,
                        )
                    } else {
                        c::LLVMConstGEPWithNoWrapFlags(
                            source,
                            new,
                            indices.as_mut_ptr(),
                            indices.len() as u32,
                            flags,
                        )
                    };
                    rewrite_shared_uses(module, builder, user, gep, name)?;
                    if is_instruction {
                        c::LLVMInstructionEraseFromParent(user);
                    }
                }
                Op::LLVMAddrSpaceCast
                    if c::LLVMGetPointerAddressSpace(c::LLVMTypeOf(user)) == 0 =>
                {
                    let ty = c::LLVMTypeOf(user);
                    let cast = if is_instruction {
                        c::LLVMBuildAddrSpaceCast(builder, new, ty, c"".as_ptr())
                    } else {
                        c::LLVMConstAddrSpaceCast(new, ty)
                    };
                    c::LLVMReplaceAllUsesWith(user, cast);
                    if is_instruction {
                        c::LLVMInstructionEraseFromParent(user);
                    }
                }
                Op::LLVMLoad if is_instruction => c::LLVMSetOperand(user, 0, new),
                Op::LLVMStore if is_instruction && !is_operand(user, 0) => {
                    c::LLVMSetOperand(user, 1, new)
                }
                Op::LLVMAtomicRMW if is_instruction && !is_operand(user, 1) => {
                    c::LLVMSetOperand(user, 0, new)
                }
                Op::LLVMAtomicCmpXchg
                    if is_instruction && !is_operand(user, 1) && !is_operand(user, 2) =>
                {
                    c::LLVMSetOperand(user, 0, new)
                }
                Op::LLVMCall if is_instruction => {
                    rewrite_memory_intrinsic(module, builder, user, old, new)
                        .ok_or_else(|| unsupported(user))?
                }
                _ => return Err(unsupported(user)),
            }
        }
        Ok(())
    }
}

/// Re-creates a call of `llvm.memcpy`/`llvm.memmove`/`llvm.memset` whose pointer arguments
/// include `old` as a call of the intrinsic overloaded for `new`'s address space. `None` for
/// any other call.
///
/// # Safety
/// As [`rewrite_shared_uses`]; the builder is positioned before `call`.
unsafe fn rewrite_memory_intrinsic(
    module: llvm_sys::prelude::LLVMModuleRef,
    builder: llvm_sys::prelude::LLVMBuilderRef,
    call: llvm_sys::prelude::LLVMValueRef,
    old: llvm_sys::prelude::LLVMValueRef,
    new: llvm_sys::prelude::LLVMValueRef,
) -> Option<()> {
    use llvm_sys::core as c;
    // SAFETY: the caller's contract.
    unsafe {
        let callee = c::LLVMGetCalledValue(call);
        if c::LLVMIsAFunction(callee).is_null() {
            return None;
        }
        let mut len = 0;
        let callee_name = c::LLVMGetValueName2(callee, &mut len);
        let callee_name = std::slice::from_raw_parts(callee_name.cast::<u8>(), len);
        let pointer_args: &[u32] = if callee_name.starts_with(b"llvm.memcpy.")
            || callee_name.starts_with(b"llvm.memmove.")
        {
            &[0, 1]
        } else if callee_name.starts_with(b"llvm.memset.") {
            &[0]
        } else {
            return None;
        };
        let count = c::LLVMGetNumArgOperands(call);
        let mut args: Vec<_> = (0..count).map(|i| c::LLVMGetOperand(call, i)).collect();
        for (i, arg) in args.iter_mut().enumerate() {
            if *arg == old {
                if !pointer_args.contains(&(i as u32)) {
                    return None;
                }
                *arg = new;
            }
        }
        // Overloaded on each pointer argument's type, then the length's.
        let mut overloads: Vec<_> = pointer_args
            .iter()
            .map(|&i| c::LLVMTypeOf(args[i as usize]))
            .collect();
        overloads.push(c::LLVMTypeOf(args[2]));
        let id = c::LLVMGetIntrinsicID(callee);
        let declaration =
            c::LLVMGetIntrinsicDeclaration(module, id, overloads.as_mut_ptr(), overloads.len());
        let function_type = c::LLVMIntrinsicGetType(
            c::LLVMGetModuleContext(module),
            id,
            overloads.as_mut_ptr(),
            overloads.len(),
        );
        let replacement = c::LLVMBuildCall2(
            builder,
            function_type,
            declaration,
            args.as_mut_ptr(),
            args.len() as u32,
            c"".as_ptr(),
        );
        c::LLVMReplaceAllUsesWith(call, replacement);
        c::LLVMInstructionEraseFromParent(call);
        Some(())
    }
}

/// Bytes of static shared memory of each kernel of `kernels`: the address-space-3 globals
/// used by the kernel or by any function it calls, each counted once.
fn static_shared_bytes(module: &Module<'_>, kernels: &[String]) -> Vec<(String, u64)> {
    use llvm_sys::core as c;
    use llvm_sys::prelude::LLVMValueRef;
    use std::collections::HashMap;
    let raw_module = module.as_mut_ptr();
    // SAFETY: every reference comes from the live `module`; nothing is modified.
    unsafe {
        let layout = llvm_sys::target::LLVMGetModuleDataLayout(raw_module);
        let mut used_by: HashMap<LLVMValueRef, Vec<(LLVMValueRef, u64)>> = HashMap::new();
        for global in module.get_globals() {
            let raw = global.as_pointer_value().as_value_ref_raw();
            if c::LLVMGetPointerAddressSpace(c::LLVMTypeOf(raw)) != 3 {
                continue;
            }
            let size = llvm_sys::target::LLVMABISizeOfType(layout, c::LLVMGlobalGetValueType(raw));
            let mut functions = HashSet::new();
            let mut pending = users(raw);
            while let Some(user) = pending.pop() {
                if c::LLVMIsAInstruction(user).is_null() {
                    pending.extend(users(user));
                } else {
                    functions.insert(c::LLVMGetBasicBlockParent(c::LLVMGetInstructionParent(
                        user,
                    )));
                }
            }
            for function in functions {
                used_by.entry(function).or_default().push((raw, size));
            }
        }
        let callees = |function: LLVMValueRef| {
            let mut out = Vec::new();
            let mut block = c::LLVMGetFirstBasicBlock(function);
            while !block.is_null() {
                let mut inst = c::LLVMGetFirstInstruction(block);
                while !inst.is_null() {
                    if !c::LLVMIsACallInst(inst).is_null() {
                        let callee = c::LLVMGetCalledValue(inst);
                        if !c::LLVMIsAFunction(callee).is_null() {
                            out.push(callee);
                        }
                    }
                    inst = c::LLVMGetNextInstruction(inst);
                }
                block = c::LLVMGetNextBasicBlock(block);
            }
            out
        };
        let mut result = Vec::new();
        for name in kernels {
            let Some(kernel) = module.get_function(name) else {
                continue;
            };
            let root = kernel
                .as_global_value()
                .as_pointer_value()
                .as_value_ref_raw();
            let mut seen = HashSet::from([root]);
            let mut pending = vec![root];
            let mut globals = HashMap::new();
            while let Some(function) = pending.pop() {
                globals.extend(used_by.get(&function).into_iter().flatten().copied());
                for callee in callees(function) {
                    if seen.insert(callee) {
                        pending.push(callee);
                    }
                }
            }
            result.push((name.clone(), globals.values().sum()));
        }
        result
    }
}

/// Refuses a kernel whose static shared memory exceeds [`super::MAX_STATIC_SHARED_BYTES`].
fn check_shared_limit(module: &Module<'_>, kernels: &[String]) -> Result<()> {
    for (kernel, bytes) in static_shared_bytes(module, kernels) {
        if bytes > super::MAX_STATIC_SHARED_BYTES {
            return Err(LinkError::SharedMemoryLimit {
                kernel,
                bytes,
                limit: super::MAX_STATIC_SHARED_BYTES,
            });
        }
    }
    Ok(())
}

/// What a device link keeps: the kernels (all of them when `None`) and the symbols the
/// target's loader provides.
#[derive(Clone, Copy)]
struct Roots<'a> {
    kernels: Option<&'a [String]>,
    external: &'a [&'a str],
    machine: &'a TargetMachine,
}

fn optimize(module: &Module<'_>, machine: &TargetMachine) -> Result<()> {
    run_pipeline(module, "default<O3>", machine)
}

fn run_pipeline(module: &Module<'_>, pipeline: &str, machine: &TargetMachine) -> Result<()> {
    module
        .run_passes(pipeline, machine, PassBuilderOptions::create())
        .map_err(|e| LinkError::Passes {
            pipeline: pipeline.into(),
            message: e.to_string(),
        })
}

fn check_resolved(module: &Module<'_>, allowed: &[&str]) -> Result<()> {
    let mut symbols: Vec<String> = undefined_symbols(module)
        .into_iter()
        .filter(|s| !allowed.contains(&s.as_str()))
        .collect();
    if symbols.is_empty() {
        return Ok(());
    }
    symbols.sort();
    Err(LinkError::Undefined { symbols })
}

/// What offload-rt's AMDGPU device API asks the link to define, in IR because Rust cannot
/// say it:
/// - `__offload_amdgpu_dispatch_field(dim)`: a field of the HSA kernel dispatch packet
///   (`workgroup_size_{x,y,z}` for 0..=2, `grid_size_{x,y,z}` for 3..=5), read through
///   `llvm.amdgcn.dispatch.ptr`, which returns an address-space-4 pointer;
/// - `__offload_amdgpu_sync_threads()`: `s_barrier` between workgroup-scope fences (Rust's
///   fences are system-scope, which write back and invalidate L2 at every barrier);
/// - `__offload_amdgpu_wave_size()`: the wavefront size of the image's processor (see
///   [`amdgpu_wave_size`]), a constant here because one device build serves every processor
///   and rustc folds `llvm.amdgcn.wavefrontsize` for the build's baseline CPU.
const AMDGPU_HELPERS: &[&str] = &[
    "__offload_amdgpu_dispatch_field",
    "__offload_amdgpu_sync_threads",
    "__offload_amdgpu_wave_size",
];

/// Lanes per wavefront the code object runs with on `processor`: 64 up to gfx9, 32 from
/// gfx10 on (LLVM's default there; the device link does not ask for `+wavefrontsize64`).
pub fn amdgpu_wave_size(processor: &str) -> u32 {
    let major: u32 = processor
        .strip_prefix("gfx")
        .map(|rest| {
            rest.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
        })
        .and_then(|digits| {
            // gfx90a, gfx942: one digit of major; gfx1100, gfx1201: two.
            let n = if digits.len() >= 4 { 2 } else { 1 };
            digits.get(..n)?.parse().ok()
        })
        .unwrap_or(9);
    if major >= 10 { 32 } else { 64 }
}
const AMDGPU_HELPERS_IR: &str = r#"
declare ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()
declare void @llvm.amdgcn.s.barrier() #1

define i32 @__offload_amdgpu_dispatch_field(i32 %dim) #0 {
entry:
  %packet = call ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()
  %is_size = icmp ult i32 %dim, 3
  br i1 %is_size, label %size, label %grid
size:
  %d16 = zext i32 %dim to i64
  %o16 = shl i64 %d16, 1
  %off16 = add i64 %o16, 4
  %p16 = getelementptr i8, ptr addrspace(4) %packet, i64 %off16
  %v16 = load i16, ptr addrspace(4) %p16, align 2
  %r16 = zext i16 %v16 to i32
  ret i32 %r16
grid:
  %g = sub i32 %dim, 3
  %gc = and i32 %g, 3
  %d32 = zext i32 %gc to i64
  %o32 = shl i64 %d32, 2
  %off32 = add i64 %o32, 12
  %p32 = getelementptr i8, ptr addrspace(4) %packet, i64 %off32
  %v32 = load i32, ptr addrspace(4) %p32, align 4
  ret i32 %v32
}

define void @__offload_amdgpu_sync_threads() #1 {
entry:
  fence syncscope("workgroup") release
  call void @llvm.amdgcn.s.barrier()
  fence syncscope("workgroup") acquire
  ret void
}

define i32 @__offload_amdgpu_wave_size() #0 {
entry:
  ret i32 WAVE_SIZE
}

attributes #0 = { alwaysinline nounwind willreturn }
attributes #1 = { alwaysinline convergent nounwind willreturn }
"#;

/// Links the IR module `ir` into `module` when `module` declares one of `names`.
fn link_helpers<'ctx>(
    context: &'ctx Context,
    module: &Module<'ctx>,
    names: &[&str],
    ir: &str,
) -> Result<()> {
    let needed = names.iter().any(|name| {
        module
            .get_function(name)
            .is_some_and(|f| f.as_global_value().is_declaration())
    });
    if !needed {
        return Ok(());
    }
    let buffer =
        MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "offload-device-helpers");
    let helper = context
        .create_module_from_ir(buffer)
        .map_err(|e| LinkError::ParseBitcode {
            name: "offload-device-helpers".into(),
            message: e.to_string(),
        })?;
    helper.set_triple(&module.get_triple());
    // SAFETY: both modules are live; LLVM copies the layout string it is given.
    unsafe {
        let layout = llvm_sys::core::LLVMGetDataLayoutStr(module.as_mut_ptr());
        llvm_sys::core::LLVMSetDataLayout(helper.as_mut_ptr(), layout);
    }
    module.link_in_module(helper).map_err(|e| LinkError::Link {
        name: "offload-device-helpers".into(),
        message: e.to_string(),
    })
}

fn link_for<'ctx>(
    context: &'ctx Context,
    inputs: &[DeviceInput],
    machine: &TargetMachine,
    kernels: Option<&[String]>,
    allowed_external: &[&str],
) -> Result<(Module<'ctx>, Vec<String>)> {
    let roots = Roots {
        kernels,
        external: allowed_external,
        machine,
    };
    let module = link_inputs(context, inputs, roots)?;
    if module
        .get_triple()
        .as_str()
        .to_bytes()
        .starts_with(b"amdgcn")
    {
        let wave = amdgpu_wave_size(&cstr(&machine.get_cpu())).to_string();
        let ir = AMDGPU_HELPERS_IR.replace("WAVE_SIZE", &wave);
        link_helpers(context, &module, AMDGPU_HELPERS, &ir)?;
    }
    link_helpers(context, &module, GPU_HELPERS, GPU_HELPERS_IR)?;
    // SAFETY: `module` is live; stripping debug info leaves valid IR.
    unsafe { llvm_sys::debuginfo::LLVMStripModuleDebugInfo(module.as_mut_ptr()) };
    if module
        .get_triple()
        .as_str()
        .to_bytes()
        .starts_with(b"amdgcn")
        && amdgpu_byref_parameters(context, &module)? > 0
    {
        module.verify().map_err(|e| LinkError::Verify {
            message: e.to_string(),
        })?;
    }
    let kept = internalize(&module, kernels)?;
    if move_shared_to_addrspace3(&module)? > 0 {
        module.verify().map_err(|e| LinkError::Verify {
            message: e.to_string(),
        })?;
    }
    optimize(&module, machine)?;
    check_resolved(&module, allowed_external)?;
    check_shared_limit(&module, &kept)?;
    Ok((module, kept))
}

/// Links the bitcode `inputs` for `sm_<sm>` and returns PTX: the kernels kept, everything else
/// internalized, shared-memory statics in `.shared`, `default<O3>`, PTX ISA per
/// [`super::ptx_isa_version`]. `sm` is `sm_80`, `sm_90a`, …
pub fn nvptx_link(inputs: &[DeviceInput], sm: &str, opts: &NvptxLinkOptions) -> Result<String> {
    let cpu = sm.to_owned();
    let features = ptx_features(sm)?;
    let machine = target_machine(NVPTX_TRIPLE, &cpu, &features)?;
    let context = Context::create();
    let (module, _) = link_for(
        &context,
        inputs,
        &machine,
        opts.kernels.as_deref(),
        NVPTX_EXTERNALS,
    )?;
    let buffer = machine
        .write_to_memory_buffer(&module, FileType::Assembly)
        .map_err(|e| LinkError::Codegen {
            cpu: cpu.clone(),
            message: e.to_string(),
        })?;
    String::from_utf8(buffer.as_slice().to_vec()).map_err(|_| LinkError::Codegen {
        cpu,
        message: "PTX is not UTF-8".into(),
    })
}

/// Links the bitcode `inputs` for an AMDGPU target ID into a relocatable object.
pub fn amdgpu_link_object(
    inputs: &[DeviceInput],
    target: &AmdTargetId,
    opts: &AmdgpuLinkOptions,
) -> Result<LinkedObject> {
    let machine = target_machine(
        AMDGPU_TRIPLE,
        target.processor().name,
        &target.llvm_features(),
    )?;
    let context = Context::create();
    let (module, kernels) = link_for(
        &context,
        inputs,
        &machine,
        opts.kernels.as_deref(),
        AMDGPU_EXTERNALS,
    )?;
    const FLAG: &str = "amdhsa_code_object_version";
    // Relocatable HIP sources arrive with the flag, set by clang to the same version (their
    // compile asks for it); two inputs that disagree have already failed the IR link, whose
    // merge rule for the flag is `Error`.
    if module.get_flag(FLAG).is_none() {
        let version = context
            .i32_type()
            .const_int(opts.code_object_version.module_flag(), false);
        module.add_basic_value_flag(FLAG, inkwell::module::FlagBehavior::Error, version);
    }
    let buffer = machine
        .write_to_memory_buffer(&module, FileType::Object)
        .map_err(|e| LinkError::Codegen {
            cpu: target.processor().name.to_owned(),
            message: e.to_string(),
        })?;
    Ok(LinkedObject {
        object: buffer.as_slice().to_vec(),
        kernels,
    })
}

/// The AMDGPU code object for a target ID: [`amdgpu_link_object`], then `ld.lld -shared`, then
/// the `e_flags` made to state the target ID's xnack/sramecc settings.
pub fn amdgpu_code_object(
    inputs: &[DeviceInput],
    target: &AmdTargetId,
    opts: &AmdgpuLinkOptions,
) -> Result<(Vec<u8>, Vec<String>)> {
    let linked = amdgpu_link_object(inputs, target, opts)?;
    let dir = scratch_dir("amdgpu")?;
    let result = (|| {
        let object = dir.path().join("device.o");
        let image = dir.path().join("device.elf");
        std::fs::write(&object, &linked.object).map_err(io_err("writing", &object))?;
        let ld = match &opts.ld_lld {
            Some(ld) => ld.clone(),
            None => find_tool(Tool::LdLld)?,
        };
        run_command(
            Command::new(ld)
                .arg("-shared")
                .arg("--no-undefined")
                .arg(&object)
                .arg("-o")
                .arg(&image),
        )?;
        let mut bytes = std::fs::read(&image).map_err(io_err("reading", &image))?;
        fix_amdgpu_e_flags(&mut bytes, target)?;
        Ok((bytes, linked.kernels.clone()))
    })();
    drop(dir);
    result
}

/// The same NVPTX link through LLVM's separate tools (`llvm-link --only-needed`, `opt -O3`,
/// `llc`) as processes, for comparison with [`nvptx_link`]: kernels are exported by name and
/// no shared-memory rewrite happens. `work` receives the intermediate files.
pub fn external_nvptx_pipeline(
    inputs: &[DeviceInput],
    kernels: &[String],
    sm: &str,
    work: &Path,
) -> Result<String> {
    let files = write_external_inputs(inputs, work)?;
    external_nvptx_link(&files, kernels, sm, work)
}

/// Writes the inputs as bitcode files for [`external_nvptx_link`], in the order `llvm-link`
/// wants them: it links its first file whole and the rest only as needed, so eager inputs
/// first.
pub fn write_external_inputs(inputs: &[DeviceInput], work: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(work).map_err(io_err("creating", work))?;
    let ordered = inputs
        .iter()
        .filter(|i| !i.lazy)
        .chain(inputs.iter().filter(|i| i.lazy));
    let mut files = Vec::with_capacity(inputs.len());
    for (i, input) in ordered.enumerate() {
        let path = work.join(format!("in{i}.bc"));
        std::fs::write(&path, &input.bytes).map_err(io_err("writing", &path))?;
        files.push(path);
    }
    Ok(files)
}

/// `llvm-link --only-needed`, `opt` (internalize all but `kernels`, `default<O3>`) and `llc`
/// for `sm` on bitcode `files` (from [`write_external_inputs`]); returns the PTX.
pub fn external_nvptx_link(
    files: &[PathBuf],
    kernels: &[String],
    sm: &str,
    work: &Path,
) -> Result<String> {
    let mut link = Command::new(find_tool(Tool::LlvmLink)?);
    link.arg("--only-needed").args(files);
    let linked = work.join("linked.bc");
    run_command(link.arg("-o").arg(&linked))?;
    let optimized = work.join("opt.bc");
    let api = kernels
        .iter()
        .map(String::as_str)
        .chain(HOST_GLOBALS.iter().copied())
        .collect::<Vec<_>>()
        .join(",");
    run_command(
        Command::new(find_tool(Tool::Opt)?)
            .arg(format!("--internalize-public-api-list={api}"))
            .arg("--passes=internalize,default<O3>")
            .arg(&linked)
            .arg("-o")
            .arg(&optimized),
    )?;
    let ptx = work.join("out.ptx");
    run_command(
        Command::new(find_tool(Tool::Llc)?)
            .arg("-O3")
            .arg(format!("-mcpu={sm}"))
            .arg(format!("-mattr={}", ptx_features(sm)?))
            .arg(&optimized)
            .arg("-o")
            .arg(&ptx),
    )?;
    std::fs::read_to_string(&ptx).map_err(io_err("reading", &ptx))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bitcode of a textual IR module for nvptx64.
    fn bitcode(name: &str, ir: &str) -> Vec<u8> {
        let context = Context::create();
        let text = format!(
            "target triple = \"{NVPTX_TRIPLE}\"\ntarget datalayout = \"e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64\"\n{ir}"
        );
        let buffer = MemoryBuffer::create_from_memory_range_copy(text.as_bytes(), name);
        let module = context.create_module_from_ir(buffer).unwrap();
        module.write_bitcode_to_memory().as_slice().to_vec()
    }

    fn inputs(library_defines: Option<Vec<String>>) -> Vec<DeviceInput> {
        let kernel = bitcode(
            "kernel",
            "declare i32 @helper(i32)\n\
             define ptx_kernel void @k(ptr %out) {\n  %v = call i32 @helper(i32 1)\n  store i32 %v, ptr %out\n  ret void\n}\n\
             define i32 @unused() {\n  %v = call i32 @only_for_unused()\n  ret i32 %v\n}\n\
             declare i32 @only_for_unused()\n",
        );
        let library = bitcode(
            "library",
            "define i32 @helper(i32 %x) {\n  %y = add i32 %x, 41\n  ret i32 %y\n}\n",
        );
        let mut library = DeviceInput::library("lib(helper.o)", library);
        library.defines = library_defines;
        vec![DeviceInput::object("kernel.bc", kernel), library]
    }

    fn link(inputs: &[DeviceInput]) -> Result<String> {
        nvptx_link(inputs, "sm_80", &NvptxLinkOptions::default())
    }

    #[test]
    fn members_resolve_with_and_without_a_symbol_map() {
        for defines in [None, Some(vec!["helper".to_owned()])] {
            let ptx = link(&inputs(defines.clone())).unwrap();
            assert!(ptx.contains(".entry k"), "{defines:?}:\n{ptx}");
            // `helper` is inlined and folded: the kernel stores 42.
            assert!(ptx.contains("42"), "{defines:?}:\n{ptx}");
        }
    }

    #[test]
    fn an_incomplete_symbol_map_falls_back_to_reading_the_member() {
        let ptx = link(&inputs(Some(Vec::new()))).unwrap();
        assert!(ptx.contains("42"), "{ptx}");
    }

    #[test]
    fn a_symbol_nobody_defines_is_reported() {
        let mut inputs = inputs(Some(vec!["helper".to_owned()]));
        inputs.truncate(1);
        let err = link(&inputs).unwrap_err();
        // Only what the kernel needs counts: `only_for_unused` is dead code.
        match err {
            LinkError::Undefined { symbols } => assert_eq!(symbols, ["helper"]),
            other => panic!("{other}"),
        }
    }

    /// An AMDGPU module with a shared static in address space 1, used as rustc leaves it.
    fn amdgpu_module<'ctx>(context: &'ctx Context, body: &str) -> Module<'ctx> {
        let text = format!(
            "target triple = \"{AMDGPU_TRIPLE}\"\n\
             @tile = internal addrspace(1) global [64 x i32] zeroinitializer, section \"{SHARED_SECTION}\", align 4\n\
             {body}"
        );
        let buffer = MemoryBuffer::create_from_memory_range_copy(text.as_bytes(), "amdgpu");
        context.create_module_from_ir(buffer).unwrap()
    }

    #[test]
    fn amdgpu_shared_uses_are_rebuilt_in_lds() {
        let context = Context::create();
        let module = amdgpu_module(
            &context,
            "declare void @llvm.memset.p1.i64(ptr addrspace(1), i8, i64, i1)\n\
             define amdgpu_kernel void @k(i64 %i, ptr %out) {\n\
               call void @llvm.memset.p1.i64(ptr addrspace(1) @tile, i8 0, i64 16, i1 false)\n\
               %p = getelementptr inbounds i32, ptr addrspace(1) @tile, i64 %i\n\
               %q = getelementptr inbounds i32, ptr addrspace(1) %p, i64 1\n\
               store i32 1, ptr addrspace(1) %q\n\
               %c = getelementptr inbounds i8, ptr addrspace(1) @tile, i64 8\n\
               %v = load i32, ptr addrspace(1) getelementptr inbounds (i8, ptr addrspace(1) @tile, i64 4)\n\
               %a = atomicrmw add ptr addrspace(1) %c, i32 %v monotonic\n\
               %x = cmpxchg ptr addrspace(1) @tile, i32 0, i32 %a monotonic monotonic\n\
               %g = addrspacecast ptr addrspace(1) %p to ptr\n\
               %w = load i32, ptr %g\n\
               store i32 %w, ptr %out\n\
               ret void\n\
             }\n",
        );
        assert_eq!(move_shared_to_addrspace3(&module).unwrap(), 1);
        module.verify().unwrap();
        let ir = module.print_to_string().to_string();
        assert!(ir.contains("@tile = internal addrspace(3) global"), "{ir}");
        let body = &ir[ir.find("define amdgpu_kernel").unwrap()..];
        assert!(
            !body[..body.find("\n}").unwrap()].contains("addrspace(1)"),
            "{ir}"
        );
        assert!(
            ir.contains("@llvm.memset.p3.i64(ptr addrspace(3) @tile"),
            "{ir}"
        );
        assert!(ir.contains("addrspacecast ptr addrspace(3)"), "{ir}");
    }

    #[test]
    fn an_escaping_amdgpu_shared_pointer_is_an_error() {
        let context = Context::create();
        let module = amdgpu_module(
            &context,
            "define amdgpu_kernel void @k(ptr addrspace(1) %out) {\n\
               store ptr addrspace(1) @tile, ptr addrspace(1) %out\n\
               ret void\n\
             }\n",
        );
        match move_shared_to_addrspace3(&module).unwrap_err() {
            LinkError::SharedMemoryUse { name, instruction } => {
                assert_eq!(name, "tile");
                assert!(
                    instruction.starts_with("store ptr addrspace(1) @tile"),
                    "{instruction}"
                );
            }
            other => panic!("{other}"),
        }
    }

    fn shared_kernel(bytes: u64) -> Vec<DeviceInput> {
        let words = bytes / 4;
        let kernel = bitcode(
            "kernel",
            &format!(
                "@tile = internal global [{words} x i32] zeroinitializer, section \"{SHARED_SECTION}\", align 4\n\
                 define internal void @fill(i64 %i) noinline {{\n\
                   %p = getelementptr i32, ptr @tile, i64 %i\n\
                   store volatile i32 1, ptr %p\n\
                   ret void\n\
                 }}\n\
                 define ptx_kernel void @big(i64 %i) {{\n\
                   call void @fill(i64 %i)\n\
                   ret void\n\
                 }}\n"
            ),
        );
        vec![DeviceInput::object("kernel.bc", kernel)]
    }

    #[test]
    fn wave_size_by_processor() {
        for (processor, size) in [
            ("gfx906", 64),
            ("gfx90a", 64),
            ("gfx942", 64),
            ("gfx950", 64),
            ("gfx1030", 32),
            ("gfx1100", 32),
            ("gfx1201", 32),
        ] {
            assert_eq!(amdgpu_wave_size(processor), size, "{processor}");
        }
    }

    #[test]
    fn static_shared_memory_over_the_limit_names_the_kernel() {
        let limit = super::super::MAX_STATIC_SHARED_BYTES;
        link(&shared_kernel(limit)).unwrap();
        // Used from a function the kernel calls, not from the kernel itself.
        match link(&shared_kernel(limit + 4)).unwrap_err() {
            LinkError::SharedMemoryLimit {
                kernel,
                bytes,
                limit: reported,
            } => {
                assert_eq!(
                    (kernel.as_str(), bytes, reported),
                    ("big", limit + 4, limit)
                );
            }
            other => panic!("{other}"),
        }
    }
}
