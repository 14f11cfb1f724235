//! Loads through a kernel's `&[T]` parameters are invariant: the launch contract says nothing
//! writes such a buffer while the kernel runs. offload-rt passes each `&[T]` parameter's
//! pointer through [`MARKER`], an identity function the link never defines; after
//! optimization, every load reached from a marker's result through address arithmetic gets
//! `!invariant.load`, and the call is replaced by its argument. NVPTX then reads such
//! memory through the read-only data path (`ld.global.nc`), as CUDA C does for a
//! `const __restrict__` pointer; AMDGPU may read a uniform one with scalar loads.

use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::context::AsContextRef;
use inkwell::llvm_sys::LLVMOpcode;
use inkwell::llvm_sys::core as llvm;
use inkwell::module::Module;
use inkwell::values::AsValueRef;

use super::users;

/// offload-rt's marker (`kernel::slice`): `ptr __offload_read_only(ptr)`, the identity.
pub(super) const MARKER: &str = "__offload_read_only";

/// Declares [`MARKER`] as what it is, a function that neither reads nor writes memory, always
/// returns and never unwinds, so that the optimizer moves, merges and drops its calls as it
/// would the pointer arithmetic they stand for.
pub(super) fn describe_marker(module: &Module<'_>) {
    let Some(marker) = module.get_function(MARKER) else {
        return;
    };
    let context = module.get_context();
    for (name, value) in [
        ("memory", 0),
        ("nounwind", 0),
        ("willreturn", 0),
        ("nosync", 0),
        ("nofree", 0),
    ] {
        let kind = Attribute::get_named_enum_kind_id(name);
        marker.add_attribute(
            AttributeLoc::Function,
            context.create_enum_attribute(kind, value),
        );
    }
}

/// Marks the loads through each call of [`MARKER`] `!invariant.load`, replaces the calls by
/// their argument and removes the declaration. Returns how many loads were marked.
pub(super) fn mark_read_only_loads(module: &Module<'_>) -> usize {
    let Some(marker) = module.get_function(MARKER) else {
        return 0;
    };
    let context = module.get_context();
    let name = "invariant.load";
    // SAFETY: `context` is live; the name is passed with its length.
    let (kind, empty) = unsafe {
        let kind = llvm::LLVMGetMDKindIDInContext(
            context.as_ctx_ref(),
            name.as_ptr().cast(),
            name.len() as u32,
        );
        let node = llvm::LLVMMDNodeInContext2(context.as_ctx_ref(), std::ptr::null_mut(), 0);
        (kind, llvm::LLVMMetadataAsValue(context.as_ctx_ref(), node))
    };
    let mut marked = 0;
    // SAFETY: every value below is a live value of `module`: the marker's users are its calls,
    // whose operand 0 is the argument; each call is erased only after its uses are replaced.
    unsafe {
        let marker = marker.as_value_ref();
        for call in users(marker) {
            if llvm::LLVMIsACallInst(call).is_null() || llvm::LLVMGetCalledValue(call) != marker {
                continue;
            }
            let mut pending = vec![call];
            while let Some(pointer) = pending.pop() {
                for user in users(pointer) {
                    if llvm::LLVMIsAInstruction(user).is_null() {
                        continue;
                    }
                    match llvm::LLVMGetInstructionOpcode(user) {
                        LLVMOpcode::LLVMLoad
                            if llvm::LLVMGetOperand(user, 0) == pointer
                                && llvm::LLVMGetVolatile(user) == 0
                                && llvm::LLVMGetOrdering(user)
                                    == inkwell::llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingNotAtomic =>
                        {
                            llvm::LLVMSetMetadata(user, kind, empty);
                            marked += 1;
                        }
                        // The base pointer of address arithmetic, not an index of it.
                        LLVMOpcode::LLVMGetElementPtr if llvm::LLVMGetOperand(user, 0) == pointer => {
                            pending.push(user)
                        }
                        LLVMOpcode::LLVMBitCast | LLVMOpcode::LLVMAddrSpaceCast => {
                            pending.push(user)
                        }
                        _ => {}
                    }
                }
            }
            llvm::LLVMReplaceAllUsesWith(call, llvm::LLVMGetOperand(call, 0));
            llvm::LLVMInstructionEraseFromParent(call);
        }
        if llvm::LLVMGetFirstUse(marker).is_null() {
            llvm::LLVMDeleteFunction(marker);
        }
    }
    marked
}

#[cfg(test)]
mod tests {
    use super::super::tests::{bitcode, link};
    use crate::device_link::DeviceInput;

    /// A kernel reading `x` through the marker and writing `y`: the load of `x` is read-only
    /// (`ld.global.nc`), the store to `y` an ordinary global one, and no marker is left.
    #[test]
    fn loads_through_the_marker_take_the_read_only_path() {
        let ir = "declare ptr @__offload_read_only(ptr)\n\
                  define ptx_kernel void @copy([2 x i64] %x, [2 x i64] %y) {\n\
                  \x20 %xa = extractvalue [2 x i64] %x, 0\n\
                  \x20 %ya = extractvalue [2 x i64] %y, 0\n\
                  \x20 %xp = inttoptr i64 %xa to ptr\n\
                  \x20 %yp = inttoptr i64 %ya to ptr\n\
                  \x20 %ro = call ptr @__offload_read_only(ptr %xp)\n\
                  \x20 %i = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n\
                  \x20 %w = zext i32 %i to i64\n\
                  \x20 %src = getelementptr inbounds float, ptr %ro, i64 %w\n\
                  \x20 %dst = getelementptr inbounds float, ptr %yp, i64 %w\n\
                  \x20 %v = load float, ptr %src, align 4\n\
                  \x20 store float %v, ptr %dst, align 4\n\
                  \x20 ret void\n\
                  }\n\
                  declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n";
        let ptx = link(&[DeviceInput::object("copy.bc", bitcode("copy", ir))]).unwrap();
        assert!(ptx.contains("ld.global.nc.b32"), "{ptx}");
        assert!(ptx.contains("st.global.b32"), "{ptx}");
        assert!(!ptx.contains("__offload_read_only"), "{ptx}");
    }
}
