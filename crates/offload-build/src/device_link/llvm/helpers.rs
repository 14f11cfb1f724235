//! The IR the device link defines for offload-rt's device API: what Rust cannot express on a
//! GPU, linked into the module only when it declares one of the helpers.

#![forbid(unsafe_code)]

use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::Module;
use offload_format::abi::{
    AMDGPU_DISPATCH_FIELD, AMDGPU_SYNC_THREADS, AMDGPU_SYNC_WARP, AMDGPU_WAVE_SIZE,
    ATOMIC_ADD_BF16, ATOMIC_ADD_F16, DYNAMIC_SHARED, F32_TO_BF16, F32X2_TO_BF16X2, F32X2_TO_F16X2,
};

use super::ir;
use crate::device_link::error::{LinkError, Result};

/// The block's dynamic shared memory: a zero-length `extern` array in address space 3, which
/// NVPTX emits as `.extern .shared .align 16 .b8 NAME[]` and AMDGPU places after the static
/// LDS (CUDA's `extern __shared__`).
pub(super) use offload_format::abi::DYNAMIC_SHARED_MEMORY;

/// What offload-rt's device API asks every GPU link to define:
/// `__offload_dynamic_shared()`, the generic address of [`DYNAMIC_SHARED_MEMORY`] (Rust cannot
/// declare an address-space-3 global); `__offload_f32_to_bf16(x)`, `x` rounded to bfloat16 by
/// `fptrunc` (Rust has no `bf16` type), which each image's processor lowers its own way:
/// `cvt.rn.bf16.f32` from sm_80 on, integer operations before it and on most AMD GPUs.
/// `__offload_atomic_add_f16(p, v)` and `__offload_atomic_add_bf16(p, v)`: `atomicrmw fadd` of
/// `half` / `bfloat` (Rust has no atomic floats), relaxed as Rust's and CUDA's atomics, which
/// each processor lowers to its native instruction or a compare-and-swap loop.
/// `__offload_f32x2_to_f16x2(a, b)` and `__offload_f32x2_to_bf16x2(a, b)`: both rounded by one
/// `fptrunc <2 x float>` (one `cvt.rn.f16x2.f32` / `cvt.rn.bf16x2.f32` from sm_80 on, where
/// two scalar conversions stay two), packed `a` low.
pub(super) const GPU_HELPERS: &[&str] = &[
    DYNAMIC_SHARED,
    F32_TO_BF16,
    F32X2_TO_F16X2,
    F32X2_TO_BF16X2,
    ATOMIC_ADD_F16,
    ATOMIC_ADD_BF16,
];
pub(super) fn gpu_helpers_ir() -> String {
    format!(
        r#"
@{DYNAMIC_SHARED_MEMORY} = external addrspace(3) global [0 x i8], align 16

define ptr @{DYNAMIC_SHARED}() #0 {{
entry:
  ret ptr addrspacecast (ptr addrspace(3) @{DYNAMIC_SHARED_MEMORY} to ptr)
}}

define i16 @{F32_TO_BF16}(float %x) #1 {{
entry:
  %b = fptrunc float %x to bfloat
  %r = bitcast bfloat %b to i16
  ret i16 %r
}}

define i32 @{F32X2_TO_F16X2}(float %a, float %b) #1 {{
entry:
  %v0 = insertelement <2 x float> poison, float %a, i32 0
  %v1 = insertelement <2 x float> %v0, float %b, i32 1
  %h = fptrunc <2 x float> %v1 to <2 x half>
  %r = bitcast <2 x half> %h to i32
  ret i32 %r
}}

define i32 @{F32X2_TO_BF16X2}(float %a, float %b) #1 {{
entry:
  %v0 = insertelement <2 x float> poison, float %a, i32 0
  %v1 = insertelement <2 x float> %v0, float %b, i32 1
  %h = fptrunc <2 x float> %v1 to <2 x bfloat>
  %r = bitcast <2 x bfloat> %h to i32
  ret i32 %r
}}

define i16 @{ATOMIC_ADD_F16}(ptr %p, i16 %v) #2 {{
entry:
  %h = bitcast i16 %v to half
  %old = atomicrmw fadd ptr %p, half %h monotonic, align 2
  %r = bitcast half %old to i16
  ret i16 %r
}}

define i16 @{ATOMIC_ADD_BF16}(ptr %p, i16 %v) #2 {{
entry:
  %h = bitcast i16 %v to bfloat
  %old = atomicrmw fadd ptr %p, bfloat %h monotonic, align 2
  %r = bitcast bfloat %old to i16
  ret i16 %r
}}

attributes #0 = {{ alwaysinline nounwind willreturn }}
attributes #1 = {{ alwaysinline nounwind willreturn memory(none) }}
attributes #2 = {{ alwaysinline nounwind }}
"#
    )
}

/// What offload-rt's AMDGPU device API asks the link to define, in IR because Rust cannot
/// say it:
/// - `__offload_amdgpu_dispatch_field(dim)`: for 0..=2 the HSA kernel dispatch packet's
///   `workgroup_size_{x,y,z}` (through `llvm.amdgcn.dispatch.ptr`, an address-space-4
///   pointer), for 3..=5 the grid's block counts, code object V5's hidden kernel arguments
///   `hidden_block_count_{x,y,z}` (through `llvm.amdgcn.implicitarg.ptr`), as HIP reads
///   `gridDim`: no division by the workgroup size, whose ranges (1..=1024, never 0) the loads
///   state, so no index function has a division or a reachable panic;
/// - `__offload_amdgpu_sync_threads()`: `s_barrier` between workgroup-scope fences (Rust's
///   fences are system-scope, which write back and invalidate L2 at every barrier);
/// - `__offload_amdgpu_sync_warp()`: `wave_barrier` between wavefront-scope fences;
/// - `__offload_amdgpu_wave_size()`: the wavefront size of the image's processor (see
///   [`amdgpu_wave_size`]), a constant here because one device build serves every processor
///   and rustc folds `llvm.amdgcn.wavefrontsize` for the build's baseline CPU.
pub(super) const AMDGPU_HELPERS: &[&str] = &[
    AMDGPU_DISPATCH_FIELD,
    AMDGPU_SYNC_THREADS,
    AMDGPU_SYNC_WARP,
    AMDGPU_WAVE_SIZE,
];

/// Lanes per wavefront the code object runs with on `processor`: 64 up to gfx9, 32 from
/// gfx10 on (LLVM's default there; the device link does not ask for `+wavefrontsize64`).
pub fn amdgpu_wave_size(processor: &str) -> u32 {
    offload_format::target_id::amdgpu_processor(processor).map_or(
        64,
        offload_format::target_id::AmdGpuProcessor::default_wave_size,
    )
}
pub(super) fn amdgpu_helpers_ir() -> String {
    format!(
        r#"
declare ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()
declare ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()
declare void @llvm.amdgcn.s.barrier() #1
declare void @llvm.amdgcn.wave.barrier() #1

define i32 @{AMDGPU_DISPATCH_FIELD}(i32 %dim) #0 {{
entry:
  %is_size = icmp ult i32 %dim, 3
  br i1 %is_size, label %size, label %blocks
size:
  %packet = call ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()
  %d16 = zext i32 %dim to i64
  %o16 = shl i64 %d16, 1
  %off16 = add i64 %o16, 4
  %p16 = getelementptr i8, ptr addrspace(4) %packet, i64 %off16
  %v16 = load i16, ptr addrspace(4) %p16, align 2, !range !0, !invariant.load !2, !noundef !2
  %r16 = zext i16 %v16 to i32
  ret i32 %r16
blocks:
  %implicit = call ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()
  %g = sub i32 %dim, 3
  %gc = and i32 %g, 3
  %d32 = zext i32 %gc to i64
  %off32 = shl i64 %d32, 2
  %p32 = getelementptr i8, ptr addrspace(4) %implicit, i64 %off32
  %v32 = load i32, ptr addrspace(4) %p32, align 4, !range !1, !invariant.load !2, !noundef !2
  ret i32 %v32
}}

define void @{AMDGPU_SYNC_THREADS}() #1 {{
entry:
  fence syncscope("workgroup") release
  call void @llvm.amdgcn.s.barrier()
  fence syncscope("workgroup") acquire
  ret void
}}

define void @{AMDGPU_SYNC_WARP}() #1 {{
entry:
  fence syncscope("wavefront") release
  call void @llvm.amdgcn.wave.barrier()
  fence syncscope("wavefront") acquire
  ret void
}}

define i32 @{AMDGPU_WAVE_SIZE}() #0 {{
entry:
  ret i32 WAVE_SIZE
}}

attributes #0 = {{ alwaysinline nounwind willreturn }}
attributes #1 = {{ alwaysinline convergent nounwind willreturn }}

!0 = !{{i16 1, i16 1025}}
!1 = !{{i32 1, i32 0}}
!2 = !{{}}
"#
    )
}

/// Links the IR module `ir` into `module` when `module` declares one of `names`.
pub(super) fn link_helpers<'ctx>(
    context: &'ctx Context,
    module: &Module<'ctx>,
    names: &[&str],
    ir: &str,
) -> Result<()> {
    if !names.iter().any(|name| is_declared(module, name)) {
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
    ir::Module::new(&helper).set_data_layout_of(ir::Module::new(module));
    module.link_in_module(helper).map_err(|e| LinkError::Link {
        name: "offload-device-helpers".into(),
        message: e.to_string(),
    })
}

/// Whether `module` declares the function `name` without defining it: a helper the link must
/// define.
pub(super) fn is_declared(module: &Module<'_>, name: &str) -> bool {
    module
        .get_function(name)
        .is_some_and(|f| f.as_global_value().is_declaration())
}

/// Those of `names` that `module` declares without defining: the helpers a link must define.
pub(super) fn declared<'a>(module: &Module<'_>, names: &'a [String]) -> Vec<&'a str> {
    names
        .iter()
        .map(String::as_str)
        .filter(|name| is_declared(module, name))
        .collect()
}

/// For the helper families' tests: `ir`, with the attributes its definitions name, parses for
/// nvptx64, verifies, and defines each of `names`.
#[cfg(test)]
pub(super) fn assert_defines(feature: &str, names: &[String], ir: &str) {
    let context = Context::create();
    let ir = format!(
        "target triple = \"nvptx64-nvidia-cuda\"\n{ir}attributes #0 = {{ alwaysinline convergent nounwind }}\n"
    );
    let buffer = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "helpers");
    let module = context
        .create_module_from_ir(buffer)
        .unwrap_or_else(|e| panic!("{feature}: {e}"));
    module.verify().unwrap();
    for name in names {
        let f = module.get_function(name).unwrap();
        assert!(!f.as_global_value().is_declaration(), "{name}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            ("gfx10-3-generic", 32),
            ("gfx11-generic", 32),
        ] {
            assert_eq!(amdgpu_wave_size(processor), size, "{processor}");
        }
    }
}
