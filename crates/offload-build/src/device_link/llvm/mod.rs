//! The in-process device link on LLVM 22 (inkwell), one stage a file, in the order [`link_for`]
//! runs them: [`link`] reads the bitcode and links the inputs lazily, [`helpers`] defines the
//! device API's IR helpers and [`matrix`] the matrix multiply-accumulate for the image's processor,
//! [`fixups`] makes AMDGPU's by-value kernel parameters `byref` and internalizes all but the
//! kernels, with `panic = "trap"` [`panic_sites::trap_panics`] makes offload-rt's panic reporters
//! the target's trap, [`shared_memory`] moves shared-memory statics to address space 3 and checks
//! their size, [`private_volatiles`] makes the volatile accesses of private stack slots plain,
//! [`codegen`] runs `default<O3>` (for NVPTX, then unrolls the loops of at most 2 iterations that
//! ptxas would unroll by 4), after which [`null_tests`] folds the null tests of accessors' options,
//! [`conversions`] makes NVIDIA's float-to-integer casts one instruction, [`read_only`] marks the
//! loads of the runtime's globals invariant, [`panic_sites`] describes the constant panic sites in
//! the module's table, [`read_only`] marks the loads through `&[T]` parameters invariant, with
//! `trap` on AMDGPU [`uniform_panics::uniform_traps`] makes the branches to the traps scalar,
//! [`shared_traps`] leaves each function one trap, [`kernel_returns`] makes an AMDGPU kernel's
//! `s_endpgm` a return, and [`codegen`] emits PTX or an object. This file holds the entry points
//! for NVPTX and AMDGPU. The CPU device's image has a link of its own, [`cpu_link`]: the
//! kernel crate's bitcode linked whole, internalized but for the image's exports,
//! [`cpu_regions`] forming the barrier regions, LLVM's O3 pipelines with [`constrained_loops`]
//! between them, and an object.

use std::path::PathBuf;
use std::process::Command;

use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::targets::{FileType, TargetMachine};

use super::common::{
    AmdCodeObjectVersion, LLVM_MAJOR, find_tool, nightly_rustc_llvm_major, scratch_dir,
};
use super::error::{LinkError, Result, io_err};
use super::ptx::ptx_features;
use super::rlib_bitcode::DeviceInput;
use crate::command::run as run_command;
use crate::metadata::PanicStrategy;
use codegen::{CLEAN_UP, INFER_ADDRESS_SPACES, emit, optimize, run_pipeline, target_machine};
use common::{cstr, is_amdgpu, is_nvptx};
use fixups::{amdgpu_byref_parameters, global_pointers, internalize};
use helpers::{
    AMDGPU_HELPERS, DYNAMIC_SHARED_MEMORY, GPU_HELPERS, amdgpu_helpers_ir, gpu_helpers_ir,
    link_helpers,
};
use link::{Roots, check_resolved, link_inputs};
use offload_format::AmdTargetId;
use offload_format::triple::{AMDGCN_TRIPLE as AMDGPU_TRIPLE, NVPTX_TRIPLE};
use offload_toolchain::Tool;
use shared_memory::{
    check_shared_limit, move_constants_to_addrspace4, move_shared_to_addrspace3,
    place_generic_tiles,
};

mod async_copy;
mod codegen;
mod common;
mod condition_chains;
mod constrained_loops;
mod conversions;
mod cpu_link;
mod cpu_regions;
mod crash;
mod fixups;
mod helpers;
mod hopper;
mod ir;
mod kernel_returns;
mod launch_bounds;
mod lds_dma;
mod link;
mod matrix;
mod null_tests;
mod panic_sites;
mod panics;
mod private_volatiles;
mod read_only;
mod shared_memory;
mod shared_traps;
mod uniform_panics;

pub use common::HOST_GLOBALS;
pub use cpu_link::cpu_link;

// The raw helpers of the stages not on the `ir` layer yet.

pub use helpers::amdgpu_wave_size;

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
    /// How the kernels end when they panic.
    pub panic: PanicStrategy,
}

/// Options of `amdgpu_link_object` and [`amdgpu_code_object`].
#[derive(Debug, Clone, Default)]
pub struct AmdgpuLinkOptions {
    /// The kernels to keep; `None` keeps every `amdgpu_kernel` function.
    pub kernels: Option<Vec<String>>,
    /// `ld.lld`; `None` uses the one [`find_tool`] finds.
    pub ld_lld: Option<PathBuf>,
    /// The code object version to emit.
    pub code_object_version: AmdCodeObjectVersion,
    /// How the kernels end when they panic.
    pub panic: PanicStrategy,
}

/// A relocatable object from the device link and the kernels it defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkedObject {
    /// ELF relocatable object bytes.
    pub object: Vec<u8>,
    /// The kernels kept.
    pub kernels: Vec<String>,
}

/// What a link is called in a crash report: the kernel crate (its bitcode's file stem) and
/// the architecture.
fn link_name(inputs: &[DeviceInput], arch: &str) -> String {
    let krate = inputs
        .iter()
        .find(|i| !i.lazy)
        .or(inputs.first())
        .map_or("(no input)", |i| {
            std::path::Path::new(&i.name)
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or(&i.name)
        });
    format!("`{krate}` for {arch}")
}

/// The link both targets share: the inputs linked, the helpers defined, the fix-ups, the
/// shared-memory move, `default<O3>` and the final checks. Returns the module, ready for code
/// generation, and the kernels kept.
fn link_for<'ctx>(
    context: &'ctx Context,
    inputs: &[DeviceInput],
    machine: &TargetMachine,
    kernels: Option<&[String]>,
    allowed_external: &[&str],
    panic: PanicStrategy,
) -> Result<(Module<'ctx>, Vec<String>)> {
    let roots = Roots {
        kernels,
        external: allowed_external,
        machine,
    };
    let module = link_inputs(context, inputs, roots)?;
    panics::check_reporters(&module)?;
    if is_amdgpu(&module) {
        let wave = amdgpu_wave_size(&cstr(&machine.get_cpu())).to_string();
        let ir = amdgpu_helpers_ir().replace("WAVE_SIZE", &wave);
        link_helpers(context, &module, AMDGPU_HELPERS, &ir)?;
    }
    link_helpers(context, &module, GPU_HELPERS, &gpu_helpers_ir())?;
    matrix::link_matrix_helpers(context, &module, machine)?;
    async_copy::link_async_copy_helpers(context, &module, machine)?;
    lds_dma::link_lds_dma_helpers(context, &module, machine)?;
    hopper::link_hopper_helpers(context, &module, machine)?;
    // A dev build's images keep the kernel crate's source lines: line directives on NVIDIA
    // (see `nvptx_link`), line tables on AMD, whose kernel wrappers get subprograms of their
    // own (`fixups::amdgpu_byref_parameters`).
    if is_amdgpu(&module) && amdgpu_byref_parameters(context, &module)? > 0 {
        module.verify().map_err(|e| LinkError::Verify {
            message: e.to_string(),
        })?;
    }
    let kept = internalize(&module, kernels)?;
    if panic == PanicStrategy::Trap {
        panic_sites::trap_panics(&module)?;
    }
    let placed = place_generic_tiles(&module, machine)?;
    if placed + move_shared_to_addrspace3(&module)? + move_constants_to_addrspace4(&module)? > 0 {
        module.verify().map_err(|e| LinkError::Verify {
            message: e.to_string(),
        })?;
    }
    read_only::describe_marker(&module);
    private_volatiles::plain_private_volatiles(&module);
    optimize(&module, machine, is_nvptx(&module))?;
    hopper::refuse_missing_units(&module, machine)?;
    matrix::refuse_unfolded_shapes(&module, machine)?;
    let folded = null_tests::fold_null_tests(&module);
    if folded + condition_chains::unshare_condition_values(&module) > 0 {
        run_pipeline(&module, CLEAN_UP, machine)?;
    }
    if is_nvptx(&module) {
        conversions::saturating_conversions(&module);
    }
    read_only::mark_host_global_loads(&module, HOST_GLOBALS);
    panic_sites::describe_sites(&module, machine)?;
    read_only::mark_read_only_loads(&module);
    if global_pointers(&module) > 0 {
        // Not left to the code generator, which runs it on NVPTX but not on AMDGPU.
        run_pipeline(&module, INFER_ADDRESS_SPACES, machine)?;
    }
    if panic == PanicStrategy::Trap && is_amdgpu(&module) {
        uniform_panics::uniform_traps(&module);
    }
    shared_traps::share_traps(&module);
    kernel_returns::endpgm_as_return(&module);
    check_resolved(&module, allowed_external)?;
    check_shared_limit(&module, &kept)?;
    Ok((module, kept))
}

fn strip_debug_info(module: &Module<'_>) {
    // Stripping debug info leaves valid IR.
    module.strip_debug_info();
}

/// Whether PTX's `.target` asks for full debug information (`.target sm_80, debug`), which
/// ptxas refuses for optimized code.
fn targets_debug(ptx: &str) -> bool {
    ptx.lines()
        .find_map(|l| l.strip_prefix(".target"))
        .is_some_and(|t| t.split(',').any(|f| f.trim() == "debug"))
}

/// Links the bitcode `inputs` for `sm_<sm>` and returns PTX: the kernels kept, everything else
/// internalized, shared-memory statics in `.shared`, `default<O3>`, PTX ISA per
/// `super::ptx_isa_version`. `sm` is `sm_80`, `sm_90a`, … Line directives (`.loc`) of code
/// built with `debug = "line-directives-only"` (a dev build's kernel crate) are kept; fuller
/// debug information is dropped, since it would make `.target` ask for a debug build.
pub fn nvptx_link(inputs: &[DeviceInput], sm: &str, opts: &NvptxLinkOptions) -> Result<String> {
    let _linking = crash::linking(link_name(inputs, sm));
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
        opts.panic,
    )?;
    let to_text = |buffer: inkwell::memory_buffer::MemoryBuffer<'_>| {
        String::from_utf8(buffer.as_slice().to_vec()).map_err(|_| LinkError::Codegen {
            cpu: cpu.clone(),
            message: "PTX is not UTF-8".into(),
        })
    };
    let ptx = to_text(emit(&machine, &module, FileType::Assembly, &cpu)?)?;
    if !targets_debug(&ptx) {
        return Ok(ptx);
    }
    strip_debug_info(&module);
    to_text(emit(&machine, &module, FileType::Assembly, &cpu)?)
}

/// Links the bitcode `inputs` for an AMDGPU target ID into a relocatable object.
pub fn amdgpu_link_object(
    inputs: &[DeviceInput],
    target: &AmdTargetId,
    opts: &AmdgpuLinkOptions,
) -> Result<LinkedObject> {
    let _linking = crash::linking(link_name(inputs, &target.to_string()));
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
        opts.panic,
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
    let buffer = emit(&machine, &module, FileType::Object, target.processor().name)?;
    Ok(LinkedObject {
        object: buffer.as_slice().to_vec(),
        kernels,
    })
}

/// The AMDGPU code object for a target ID: `amdgpu_link_object`, then `ld.lld -shared`, then
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
        offload_format::image::amdgpu::fix_e_flags(&mut bytes, target)
            .map_err(super::error::bad_code_object)?;
        Ok((bytes, linked.kernels.clone()))
    })();
    drop(dir);
    result
}

/// What the stages' tests build their inputs with.
#[cfg(test)]
mod tests {
    use super::*;
    use inkwell::memory_buffer::MemoryBuffer;

    /// Bitcode of a textual IR module for nvptx64.
    pub(super) fn bitcode(name: &str, ir: &str) -> Vec<u8> {
        let context = Context::create();
        let text = format!(
            "target triple = \"{NVPTX_TRIPLE}\"\ntarget datalayout = \"e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64\"\n{ir}"
        );
        let buffer = MemoryBuffer::create_from_memory_range_copy(text.as_bytes(), name);
        let module = context.create_module_from_ir(buffer).unwrap();
        module.write_bitcode_to_memory().as_slice().to_vec()
    }

    pub(super) fn link(inputs: &[DeviceInput]) -> Result<String> {
        nvptx_link(inputs, "sm_80", &NvptxLinkOptions::default())
    }

    /// A kernel whose compile unit asks for `kind` of debug information, as rustc writes it
    /// for `debug = "line-directives-only"` (`DebugDirectivesOnly`) or `debug = true`.
    fn kernel_with_debug_info(kind: &str) -> Vec<DeviceInput> {
        let ir = format!(
            "define ptx_kernel void @k(ptr %p) !dbg !5 {{\n\
             \x20 store i32 7, ptr %p, align 4, !dbg !8\n\
             \x20 ret void, !dbg !9\n\
             }}\n\
             !llvm.dbg.cu = !{{!0}}\n\
             !llvm.module.flags = !{{!3, !4}}\n\
             !0 = distinct !DICompileUnit(language: DW_LANG_Rust, file: !1, producer: \"rustc\", \
             isOptimized: true, runtimeVersion: 0, emissionKind: {kind})\n\
             !1 = !DIFile(filename: \"src/lib.rs\", directory: \"/k\")\n\
             !3 = !{{i32 7, !\"Dwarf Version\", i32 4}}\n\
             !4 = !{{i32 2, !\"Debug Info Version\", i32 3}}\n\
             !5 = distinct !DISubprogram(name: \"k\", scope: !1, file: !1, line: 3, type: !6, \
             scopeLine: 3, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0)\n\
             !6 = !DISubroutineType(types: !7)\n\
             !7 = !{{}}\n\
             !8 = !DILocation(line: 4, column: 5, scope: !5)\n\
             !9 = !DILocation(line: 5, column: 1, scope: !5)\n"
        );
        vec![DeviceInput::object("k.bc", bitcode("k", &ir))]
    }

    /// A dev build's line directives reach the PTX (`.loc`, `.file`), which ptxas assembles
    /// with `-lineinfo`; full debug information is dropped rather than make `.target` ask for
    /// an unoptimized debug build.
    #[test]
    fn line_directives_are_kept_and_full_debug_information_is_not() {
        let ptx = link(&kernel_with_debug_info("DebugDirectivesOnly")).unwrap();
        assert!(ptx.contains(".loc\t1 4 5"), "{ptx}");
        assert!(ptx.contains(".file\t1 \"/k/src/lib.rs\""), "{ptx}");
        assert!(!targets_debug(&ptx), "{ptx}");
        assert!(crate::device_link::ptx::has_line_directives(&ptx));
        if crate::device_link::ptx::ptxas_path().is_some() {
            crate::device_link::ptx::ptxas_assemble(&ptx, "sm_80").unwrap();
        }
        let full = link(&kernel_with_debug_info("FullDebug")).unwrap();
        assert!(!targets_debug(&full), "{full}");
        assert!(!full.contains(".loc"), "{full}");
        assert!(targets_debug(".version 8.0\n.target sm_80, debug\n"));
    }

    /// An AMD kernel with a by-value parameter and a dev build's line tables: the kernel
    /// wrapper the link makes gets a subprogram of its own, the module verifies, and the code
    /// object has a line table for the kernel's code.
    #[test]
    fn amd_kernel_wrappers_carry_the_line_tables() {
        let ir = "target triple = \"amdgcn-amd-amdhsa\"\n\
                  define amdgpu_kernel void @k(ptr dereferenceable(8) align 8 %s, ptr %out) !dbg !5 {\n\
                  \x20 %v = load i64, ptr %s, align 8, !dbg !8\n\
                  \x20 store i64 %v, ptr %out, align 8, !dbg !8\n\
                  \x20 ret void, !dbg !9\n\
                  }\n\
                  !llvm.dbg.cu = !{!0}\n\
                  !llvm.module.flags = !{!3, !4}\n\
                  !0 = distinct !DICompileUnit(language: DW_LANG_Rust, file: !1, producer: \"rustc\", \
                  isOptimized: true, runtimeVersion: 0, emissionKind: LineTablesOnly)\n\
                  !1 = !DIFile(filename: \"src/lib.rs\", directory: \"/k\")\n\
                  !3 = !{i32 7, !\"Dwarf Version\", i32 4}\n\
                  !4 = !{i32 2, !\"Debug Info Version\", i32 3}\n\
                  !5 = distinct !DISubprogram(name: \"k\", scope: !1, file: !1, line: 3, type: !6, \
                  scopeLine: 3, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0)\n\
                  !6 = !DISubroutineType(types: !7)\n\
                  !7 = !{}\n\
                  !8 = !DILocation(line: 4, column: 5, scope: !5)\n\
                  !9 = !DILocation(line: 5, column: 1, scope: !5)\n";
        let context = Context::create();
        let buffer = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "k");
        let module = context.create_module_from_ir(buffer).unwrap();
        let bitcode = module.write_bitcode_to_memory().as_slice().to_vec();
        let target: AmdTargetId = "gfx90a".parse().unwrap();
        let linked = amdgpu_link_object(
            &[DeviceInput::object("k.bc", bitcode)],
            &target,
            &AmdgpuLinkOptions::default(),
        )
        .unwrap();
        assert_eq!(linked.kernels, ["k"]);
        assert!(
            linked.object.windows(11).any(|w| w == b".debug_line"),
            "no line table in the object"
        );
    }
}
