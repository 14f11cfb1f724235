//! An AMDGPU kernel's `s_endpgm` as a return. A panic report's wavefront that lost the claim
//! to another's report ends with `llvm.amdgcn.endpgm` and `unreachable`: a second way out of
//! the kernel beside its return, for which AMDGPU's structurizer adds flow blocks (8–28 bytes
//! of each panicking kernel on gfx9 in the parity benchmark). A return ends the same lanes
//! where the whole wavefront reaches it, as the report's does; where only some lanes do, it
//! ends those alone, as PTX's `exit` ends a thread, and the others go on.

#![forbid(unsafe_code)]

use inkwell::module::Module;

use super::ir::{self, call_conv};
use super::shared_traps::block_ending_calls;

/// Replaces each `llvm.amdgcn.endpgm` that ends a block of a kernel returning `void` with
/// `ret void`; returns how many.
pub(super) fn endpgm_as_return(module: &Module<'_>) -> usize {
    let module = ir::Module::new(module);
    let Some(endpgm) = module.function("llvm.amdgcn.endpgm") else {
        return 0;
    };
    let mut replaced = 0;
    // The call ends its block with the `unreachable` after it, so the block has no
    // successor, and a `ret` in its place leaves every phi as it was.
    let builder = module.builder();
    for call in block_ending_calls(endpgm) {
        let function = call.function();
        if function.call_conv() != call_conv::AMDGPU_KERNEL || !function.return_type().is_void() {
            continue;
        }
        let unreachable = call.next().expect("`unreachable` follows the call");
        builder.position_before(*call);
        let ret = builder.build_ret_void();
        ret.copy_debug_location_from(*call);
        unreachable.erase();
        call.erase();
        replaced += 1;
    }
    replaced
}

#[cfg(test)]
mod tests {
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;

    use super::endpgm_as_return;

    const MODULE: &str = "target triple = \"amdgcn-amd-amdhsa\"\n\
        declare void @llvm.amdgcn.endpgm()\n\
        declare void @llvm.trap()\n\
        define amdgpu_kernel void @k(i32 %a, ptr addrspace(1) %p) {\n\
        entry:\n\
        \x20 %c = icmp eq i32 %a, 0\n\
        \x20 br i1 %c, label %lost, label %done\n\
        lost:\n\
        \x20 store volatile i32 1, ptr addrspace(1) %p\n\
        \x20 call void @llvm.amdgcn.endpgm()\n\
        \x20 unreachable\n\
        done:\n\
        \x20 call void @llvm.trap()\n\
        \x20 unreachable\n\
        }\n\
        define void @helper(i1 %c) {\n\
        \x20 br i1 %c, label %e, label %r\n\
        e:\n\
        \x20 call void @llvm.amdgcn.endpgm()\n\
        \x20 unreachable\n\
        r:\n\
        \x20 ret void\n\
        }\n";

    /// A kernel's `endpgm` becomes a return after the work before it; a function that is
    /// not a kernel keeps its `endpgm`, which its return could not stand for.
    #[test]
    fn a_kernels_endpgm_becomes_a_return() {
        let context = Context::create();
        let buffer = MemoryBuffer::create_from_memory_range_copy(MODULE.as_bytes(), "k");
        let module = context.create_module_from_ir(buffer).unwrap();
        assert_eq!(endpgm_as_return(&module), 1);
        module.verify().unwrap();
        let ir = module.print_to_string().to_string();
        let k = &ir[ir.find("define amdgpu_kernel").unwrap()..ir.find("define void").unwrap()];
        assert!(!k.contains("endpgm"), "{k}");
        assert!(
            k.contains("store volatile i32 1, ptr addrspace(1) %p, align 4\n  ret void"),
            "{k}"
        );
        assert!(k.contains("call void @llvm.trap()"), "{k}");
        let helper = &ir[ir.find("define void @helper").unwrap()..];
        assert!(
            helper.contains("call void @llvm.amdgcn.endpgm()"),
            "{helper}"
        );
        assert_eq!(endpgm_as_return(&module), 0);
    }
}
