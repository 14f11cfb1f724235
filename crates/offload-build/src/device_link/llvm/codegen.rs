//! LLVM's side of the device link: target machines, pass pipelines and code generation.

use std::sync::Once;

use inkwell::OptimizationLevel;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple,
};

use crate::device_link::{LinkError, Result};

fn init_targets() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let config = InitializationConfig::default();
        Target::initialize_nvptx(&config);
        Target::initialize_amd_gpu(&config);
    });
}

pub(super) fn target_machine(triple: &str, cpu: &str, features: &str) -> Result<TargetMachine> {
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

/// `default<O3>`; for NVIDIA (`nvptx`), then full unrolling of the loops that LLVM knows run
/// at most twice but not exactly how often (a loop over a two-element `chunk_for_thread`).
/// LLVM leaves such a loop alone, and ptxas unrolls a small one four times with a remainder
/// loop, five copies of its body (about 90 instructions for one load and one store, where C's
/// twin writes two `if`s). Two copies are never larger; with more (libm's loops of up to 4, in
/// `sin` and `cos`), the 48-kernel crate's cubins grew by 3 %. One pipeline, so the unrolling
/// reuses the analyses `default<O3>` leaves.
pub(super) fn optimize(module: &Module<'_>, machine: &TargetMachine, nvptx: bool) -> Result<()> {
    let pipeline = if nvptx {
        "default<O3>,function(loop-unroll<O3;no-runtime;no-partial;upperbound;full-unroll-max=2>)"
    } else {
        "default<O3>"
    };
    run_pipeline(module, pipeline, machine)
}

pub(super) fn run_pipeline(
    module: &Module<'_>,
    pipeline: &str,
    machine: &TargetMachine,
) -> Result<()> {
    module
        .run_passes(pipeline, machine, PassBuilderOptions::create())
        .map_err(|e| LinkError::Passes {
            pipeline: pipeline.into(),
            message: e.to_string(),
        })
}

/// `module` compiled by `machine` to `file_type`; `cpu` is the processor, for errors.
pub(super) fn emit(
    machine: &TargetMachine,
    module: &Module<'_>,
    file_type: FileType,
    cpu: &str,
) -> Result<MemoryBuffer<'static>> {
    machine
        .write_to_memory_buffer(module, file_type)
        .map_err(|e| LinkError::Codegen {
            cpu: cpu.to_owned(),
            message: e.to_string(),
        })
}
