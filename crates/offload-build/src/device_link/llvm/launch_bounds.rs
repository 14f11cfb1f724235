//! Kernels' launch bounds (`#[kernel(max_threads = N)]`): the `u32` static the kernel crate
//! defines for a bounded kernel ([`offload_format::launch_bounds`]) becomes the kernel's
//! attribute for its processor, `"nvvm.maxntid"` (PTX `.maxntid N`: ptxas may then give each
//! thread more registers) or `"amdgpu-flat-work-group-size"="1,N"` (the code object's
//! `.max_flat_workgroup_size`: without it a kernel is compiled for blocks of 1024 threads and
//! gets at most 128 VGPRs on gfx9), and the static is removed.

use inkwell::attributes::AttributeLoc;
use inkwell::context::Context;
use inkwell::module::Module;
use offload_format::launch_bounds;

use super::fixups::is_kernel;
use super::{cstr, is_nvptx};

/// Gives each kernel of `module` with a launch bound its processor's attribute, and removes
/// the statics that carried the bounds; returns how many kernels it bounded.
pub(super) fn apply_launch_bounds(context: &Context, module: &Module<'_>) -> usize {
    let nvptx = is_nvptx(module);
    let carriers: Vec<_> = module
        .get_globals()
        .filter(|g| cstr(g.get_name()).starts_with(launch_bounds::PREFIX))
        .collect();
    let mut bounded = 0;
    for global in carriers {
        let name = cstr(global.get_name());
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
        // SAFETY: the static is defined for the device link alone: nothing in the module uses
        // it, so deleting it leaves no dangling use.
        unsafe { global.delete() };
    }
    bounded
}
