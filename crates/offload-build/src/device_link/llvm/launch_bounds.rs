//! Kernels' launch bounds (`#[kernel(max_threads = N)]`): the `u32` static the kernel crate
//! defines for a bounded kernel ([`offload_format::launch_bounds`]) becomes the kernel's
//! attribute for its processor, `"nvvm.maxntid"` (PTX `.maxntid N`: ptxas may then give each
//! thread more registers) or `"amdgpu-flat-work-group-size"="1,N"` (the code object's
//! `.max_flat_workgroup_size`: without it a kernel is compiled for blocks of 1024 threads and
//! gets at most 128 VGPRs on gfx9), and the static is removed.

#![forbid(unsafe_code)]

use inkwell::attributes::AttributeLoc;
use inkwell::context::Context;
use inkwell::module::Module;
use offload_format::launch_bounds;

use super::common::is_nvptx;
use super::fixups::is_kernel;
use super::ir;

/// Gives each kernel of `module` with a launch bound its processor's attribute, and removes
/// the statics that carried the bounds; returns how many kernels it bounded.
pub(super) fn apply_launch_bounds(context: &Context, module: &Module<'_>) -> usize {
    let nvptx = is_nvptx(module);
    let name_of = |g: ir::GlobalVariable<'_>| String::from_utf8_lossy(g.name()).into_owned();
    let carriers: Vec<_> = ir::Module::new(module)
        .globals()
        .into_iter()
        .filter(|&g| name_of(g).starts_with(launch_bounds::PREFIX))
        .collect();
    let mut bounded = 0;
    for global in carriers {
        let name = name_of(global);
        let kernel = launch_bounds::parse(&name)
            .and_then(|(kernel, bound)| Some((module.get_function(kernel)?, bound)))
            .filter(|(f, _)| is_kernel(*f));
        if let Some((function, bound)) = kernel {
            let (key, value) = if nvptx {
                ("nvvm.maxntid", bound.to_string())
            } else {
                ("amdgpu-flat-work-group-size", format!("1,{bound}"))
            };
            function.add_attribute(
                AttributeLoc::Function,
                context.create_string_attribute(key, &value),
            );
            bounded += 1;
        }
        // The static is defined for the device link alone: nothing in the module uses it.
        global.delete();
    }
    bounded
}

#[cfg(test)]
mod tests {
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;

    use super::*;

    /// The static of a bounded kernel becomes its attribute and goes; one naming no kernel
    /// goes too; other globals stay.
    #[test]
    fn a_bound_becomes_the_kernels_attribute() {
        let ir = "target triple = \"nvptx64-nvidia-cuda\"\n\
                  @__offload_max_threads_k.256 = global i8 0\n\
                  @__offload_max_threads_gone.64 = global i8 0\n\
                  @other = global i8 0\n\
                  define ptx_kernel void @k() {\n\
                  \x20 ret void\n\
                  }\n";
        let context = Context::create();
        let buffer = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "m");
        let module = context.create_module_from_ir(buffer).unwrap();
        assert_eq!(apply_launch_bounds(&context, &module), 1);
        let text = module.print_to_string().to_string();
        assert!(text.contains("\"nvvm.maxntid\"=\"256\""), "{text}");
        assert!(!text.contains("__offload_max_threads"), "{text}");
        assert!(text.contains("@other"), "{text}");
    }
}
