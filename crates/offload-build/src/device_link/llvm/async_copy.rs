//! NVIDIA's data movement for the matrix units, defined per image: offload-rt's
//! `kernel::pipeline` declares `__offload_cp_async_{4,8,16}(dst, src)` (one thread's
//! asynchronous copy from global to shared memory, `cp.async`), `__offload_cp_async_commit()`
//! and `__offload_cp_async_wait_N()` (N pending groups at most, an immediate of the
//! instruction), and `kernel::matrix` declares `__offload_ldmatrix_x{1,2,4}[_trans](src, out)`
//! (a warp's 8×8 matrices of 16-bit elements from shared memory into the lanes' registers in
//! the layout `mma.sync` takes). Rust cannot name the address spaces the instructions take, so
//! the link defines them in IR over generic pointers, always inlined, the copies and loads as
//! inline assembly over 32-bit shared-memory addresses as CUDA C writes them; on a processor
//! without the instructions (`cp.async` before sm_80, `ldmatrix` before sm_75) it refuses the
//! kernels that reach them with [`LinkError::FeatureUnsupported`]. AMD GPUs and the CPU device get
//! offload-rt's own code for them, never these declarations.

#![forbid(unsafe_code)]

use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::targets::TargetMachine;
use offload_format::abi::{
    CP_ASYNC_COMMIT, CP_ASYNC_PREFIX, CP_ASYNC_WAIT_PREFIX, LDMATRIX_PREFIX,
};
use offload_format::target_id::Sm;

use super::common::{cstr, is_nvptx, shared_address};
use super::helpers::{declared, link_helpers};
use super::matrix::kernels_reaching;
use crate::device_link::error::{LinkError, Result};

/// Deepest `cp.async.wait_group` offload-rt asks for.
const MAX_WAIT_GROUP: u32 = 7;

/// One kind of helper: its names, the first `sm` with its instruction, and its IR.
struct Family {
    feature: &'static str,
    names: Vec<String>,
    min_sm: u32,
    ir: String,
}

fn families() -> [Family; 2] {
    let mut copies = format!(
        "declare void @llvm.nvvm.cp.async.commit.group()
declare void @llvm.nvvm.cp.async.wait.group(i32 immarg)
define void @{CP_ASYNC_COMMIT}() #0 {{
  call void @llvm.nvvm.cp.async.commit.group()
  ret void
}}
",
    );
    let mut copy_names = vec![CP_ASYNC_COMMIT.to_owned()];
    // 16 bytes bypass L1 (`.cg`, the only caching 16-byte copies and tiles want); 4 and 8
    // bytes may only be cached at all levels (`.ca`).
    let dst = shared_address("dst", "d");
    for (bytes, cache) in [(16, "cg"), (8, "ca"), (4, "ca")] {
        copy_names.push(format!("{CP_ASYNC_PREFIX}{bytes}"));
        copies.push_str(&format!(
            "define void @{CP_ASYNC_PREFIX}{bytes}(ptr %dst, ptr %src) #0 {{
{dst}  %s = addrspacecast ptr %src to ptr addrspace(1)
  call void asm sideeffect \"cp.async.{cache}.shared.global [$0], [$1], {bytes};\", \"r,l,~{{memory}}\"(i32 %d, ptr addrspace(1) %s) #1
  ret void
}}
"
        ));
    }
    for n in 0..=MAX_WAIT_GROUP {
        copy_names.push(format!("{CP_ASYNC_WAIT_PREFIX}{n}"));
        copies.push_str(&format!(
            "define void @{CP_ASYNC_WAIT_PREFIX}{n}() #0 {{
  call void @llvm.nvvm.cp.async.wait.group(i32 {n})
  ret void
}}
"
        ));
    }
    let mut loads = String::new();
    let mut load_names = Vec::new();
    for count in [1, 2, 4] {
        for trans in ["", ".trans"] {
            let name = format!("{LDMATRIX_PREFIX}x{count}{}", trans.replace('.', "_"));
            let ty = if count == 1 {
                "i32".to_owned()
            } else {
                format!("{{ {} }}", vec!["i32"; count].join(", "))
            };
            let registers = (0..count)
                .map(|i| format!("${i}"))
                .collect::<Vec<_>>()
                .join(", ");
            let outputs = vec!["=r"; count].join(",");
            let mut body = format!(
                "{}  %r = call {ty} asm sideeffect \"ldmatrix.sync.aligned.m8n8.x{count}{trans}.shared.b16 {{{registers}}}, [${count}];\", \"{outputs},r\"(i32 %s) #1\n",
                shared_address("src", "s"),
            );
            for i in 0..count {
                let value = if count == 1 {
                    "%r".to_owned()
                } else {
                    body.push_str(&format!("  %v{i} = extractvalue {ty} %r, {i}\n"));
                    format!("%v{i}")
                };
                body.push_str(&format!(
                    "  %p{i} = getelementptr i32, ptr %out, i64 {i}\n  store i32 {value}, ptr %p{i}, align 4\n"
                ));
            }
            loads.push_str(&format!(
                "define void @{name}(ptr %src, ptr %out) #0 {{\n{body}  ret void\n}}\n"
            ));
            load_names.push(name);
        }
    }
    // The inline assembly's call sites (`#1`), convergent as clang marks CUDA's.
    for ir in [&mut copies, &mut loads] {
        ir.push_str("attributes #1 = { convergent nounwind }\n");
    }
    [
        Family {
            feature: "asynchronous copies (`cp.async`, `offload_rt::kernel::pipeline`)",
            names: copy_names,
            min_sm: 80,
            ir: copies,
        },
        Family {
            feature: "matrix loads (`ldmatrix`, `offload_rt::kernel::matrix`)",
            names: load_names,
            min_sm: 75,
            ir: loads,
        },
    ]
}

/// Defines the helpers of NVIDIA's data movement that `module` declares; refuses a processor
/// without their instructions, naming the kernels that reach them.
pub(super) fn link_async_copy_helpers<'ctx>(
    context: &'ctx Context,
    module: &Module<'ctx>,
    machine: &TargetMachine,
) -> Result<()> {
    if !is_nvptx(module) {
        return Ok(());
    }
    let cpu = cstr(&machine.get_cpu());
    let sm = Sm::parse(&cpu).map(Sm::number).unwrap_or(0);
    for family in families() {
        let declared = declared(module, &family.names);
        if declared.is_empty() {
            continue;
        }
        if sm < family.min_sm {
            let mut kernels: Vec<String> = declared
                .iter()
                .flat_map(|name| kernels_reaching(module, name))
                .collect();
            kernels.sort();
            kernels.dedup();
            return Err(LinkError::FeatureUnsupported {
                arch: cpu,
                feature: family.feature,
                kernels: kernels.join(", "),
                reason: format!("they need sm_{} or later", family.min_sm),
            });
        }
        let ir = format!(
            "{}attributes #0 = {{ alwaysinline convergent nounwind }}\n",
            family.ir
        );
        link_helpers(context, module, &declared, &ir)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each family's IR parses and defines every name it lists.
    #[test]
    fn every_helper_is_defined_in_ir_that_parses() {
        for family in families() {
            super::super::helpers::assert_defines(family.feature, &family.names, &family.ir);
        }
    }
}
