//! Static shared memory: the globals of [`SHARED_SECTION`] moved to address space 3, and the
//! bytes each kernel uses checked against [`MAX_STATIC_SHARED_BYTES`].

use std::collections::{HashMap, HashSet};

use inkwell::llvm_sys;
use inkwell::module::Module;
use inkwell::targets::TargetMachine;
use inkwell::values::AsValueRef;

use super::codegen::{MERGE_CONSTANTS, run_pipeline};
use super::{RawValue, cstr, has_uses, print_value, strip_casts, users};
use crate::device_link::{
    CONSTANT_SECTION, GENERIC_TILE_FUNCTION, LinkError, MAX_CONSTANT_BYTES,
    MAX_STATIC_SHARED_BYTES, Result, SHARED_SECTION,
};

/// Where the globals of a link section move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// [`SHARED_SECTION`]: address space 3 (`.shared` / LDS), no initial value.
    Shared,
    /// [`CONSTANT_SECTION`]: address space 4 (`.const` / AMD's constant memory), initialized,
    /// read-only.
    Constant,
}

impl Placement {
    fn section(self) -> &'static str {
        match self {
            Placement::Shared => SHARED_SECTION,
            Placement::Constant => CONSTANT_SECTION,
        }
    }

    fn address_space(self) -> u32 {
        match self {
            Placement::Shared => 3,
            Placement::Constant => 4,
        }
    }

    fn what(self) -> &'static str {
        match self {
            Placement::Shared => "shared-memory",
            Placement::Constant => "constant-memory",
        }
    }
}

/// Replaces each call of [`GENERIC_TILE_FUNCTION`] (a `generic_shared_array!` of a generic
/// function) with the address of a new global in address space 3, one for each site and
/// array type, which the calls of one instantiation share however often it was inlined.
/// Identical type names are merged first (`constmerge`), so that one name is one value.
/// Returns how many globals it made.
pub(super) fn place_generic_tiles(module: &Module<'_>, machine: &TargetMachine) -> Result<usize> {
    use llvm_sys::core as c;
    let Some(function) = module.get_function(GENERIC_TILE_FUNCTION) else {
        return Ok(0);
    };
    run_pipeline(module, MERGE_CONSTANTS, machine)?;
    let function = function.as_value_ref();
    let raw_module = module.as_mut_ptr();
    let mut tiles = HashMap::new();
    // SAFETY: every reference comes from the live `module`; each call is replaced before it
    // is erased, and the function is deleted only once nothing uses it.
    unsafe {
        let context = c::LLVMGetModuleContext(raw_module);
        for call in users(function) {
            let constant_int = |value| {
                let value = c::LLVMIsAConstantInt(value);
                (!value.is_null()).then(|| c::LLVMConstIntGetZExtValue(value))
            };
            let key = if c::LLVMIsACallInst(call).is_null()
                || c::LLVMGetCalledValue(call) != function
                || c::LLVMGetNumArgOperands(call) != 5
            {
                None
            } else {
                let site = strip_casts(c::LLVMGetOperand(call, 0));
                let name = strip_casts(c::LLVMGetOperand(call, 1));
                let name_len = constant_int(c::LLVMGetOperand(call, 2));
                let size = constant_int(c::LLVMGetOperand(call, 3));
                let align = constant_int(c::LLVMGetOperand(call, 4));
                let constant = |v| !c::LLVMIsAConstant(v).is_null();
                match (name_len, size, align) {
                    (Some(len), Some(size), Some(align)) if constant(site) && constant(name) => {
                        Some((site, name, len, size, align))
                    }
                    _ => None,
                }
            };
            let Some(key @ (.., size, align)) = key else {
                let instruction = print_value(call);
                let parent = c::LLVMGetInstructionParent(call);
                let function = if parent.is_null() {
                    "(a constant)".to_owned()
                } else {
                    value_name(c::LLVMGetBasicBlockParent(parent))
                };
                return Err(LinkError::GenericTile {
                    function,
                    instruction,
                });
            };
            let tile = *tiles.entry(key).or_insert_with(|| {
                let ty = c::LLVMArrayType2(c::LLVMInt8TypeInContext(context), size);
                let tile = c::LLVMAddGlobalInAddressSpace(
                    raw_module,
                    ty,
                    c"__offload_generic_tile".as_ptr(),
                    3,
                );
                c::LLVMSetInitializer(tile, c::LLVMGetUndef(ty));
                c::LLVMSetLinkage(tile, llvm_sys::LLVMLinkage::LLVMInternalLinkage);
                c::LLVMSetAlignment(tile, u32::try_from(align).unwrap_or(u32::MAX).max(4));
                tile
            });
            c::LLVMReplaceAllUsesWith(call, c::LLVMConstAddrSpaceCast(tile, c::LLVMTypeOf(call)));
            c::LLVMInstructionEraseFromParent(call);
        }
        if !has_uses(function) {
            c::LLVMDeleteFunction(function);
        }
    }
    Ok(tiles.len())
}

/// The name of `value` (a function), `(unnamed)` for none.
///
/// # Safety
/// `value` is a live LLVM value.
unsafe fn value_name(value: llvm_sys::prelude::LLVMValueRef) -> String {
    let mut len = 0;
    // SAFETY: the caller's contract; the name is borrowed from the value, copied here.
    unsafe {
        let name = llvm_sys::core::LLVMGetValueName2(value, &mut len);
        if name.is_null() || len == 0 {
            return "(unnamed)".to_owned();
        }
        String::from_utf8_lossy(std::slice::from_raw_parts(name.cast::<u8>(), len)).into_owned()
    }
}

/// Moves every global of [`SHARED_SECTION`] to address space 3 (`.shared` / LDS), undefined
/// initializer, no section. Returns how many moved.
pub(super) fn move_shared_to_addrspace3(module: &Module<'_>) -> Result<usize> {
    move_section(module, Placement::Shared)
}

/// Moves every global of [`CONSTANT_SECTION`] to address space 4 (`.const` / constant
/// memory), initializer kept, read-only, no section; on NVPTX their bytes together must fit
/// the [`MAX_CONSTANT_BYTES`] of a module's constant bank. Returns how many moved.
pub(super) fn move_constants_to_addrspace4(module: &Module<'_>) -> Result<usize> {
    let moved = move_section(module, Placement::Constant)?;
    if moved > 0 && super::is_nvptx(module) {
        check_constant_limit(module)?;
    }
    Ok(moved)
}

/// Moves the globals of `placement`'s section to its address space.
///
/// Where globals live in address space 0 (NVPTX), uses see the new global through a generic
/// pointer. Where they live in another space (AMDGPU: 1), rustc's optimizations have already
/// turned the uses into accesses in that space, and no cast from LDS to it exists: the use tree
/// is rebuilt on the new global instead (see [`rewrite_shared_uses`]).
fn move_section(module: &Module<'_>, placement: Placement) -> Result<usize> {
    use llvm_sys::core as c;
    let section = placement.section();
    let moving: Vec<_> = module
        .get_globals()
        .filter(|g| {
            g.get_section()
                .is_some_and(|s| s.to_bytes() == section.as_bytes())
        })
        .collect();
    let raw_module = module.as_mut_ptr();
    for global in &moving {
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
            let new = c::LLVMAddGlobalInAddressSpace(
                raw_module,
                value_type,
                cname.as_ptr().cast(),
                placement.address_space(),
            );
            match placement {
                Placement::Shared => c::LLVMSetInitializer(new, c::LLVMGetUndef(value_type)),
                Placement::Constant => {
                    c::LLVMSetInitializer(new, c::LLVMGetInitializer(old));
                    c::LLVMSetGlobalConstant(new, 1);
                }
            }
            c::LLVMSetLinkage(new, llvm_sys::LLVMLinkage::LLVMInternalLinkage);
            c::LLVMSetAlignment(new, c::LLVMGetAlignment(old).max(4));
            if old_space == 0 {
                let generic_ptr = c::LLVMPointerTypeInContext(context, 0);
                c::LLVMReplaceAllUsesWith(old, c::LLVMConstAddrSpaceCast(new, generic_ptr));
            } else {
                let builder = c::LLVMCreateBuilderInContext(context);
                let rewritten =
                    rewrite_shared_uses(raw_module, builder, old, new, &name, placement.what());
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
    Ok(moving.len())
}

/// [`LinkError::ConstantMemoryLimit`] when the address-space-4 globals of `module` take more
/// than [`MAX_CONSTANT_BYTES`].
fn check_constant_limit(module: &Module<'_>) -> Result<()> {
    use llvm_sys::core as c;
    use llvm_sys::target::LLVMABISizeOfType;
    let mut statics = Vec::new();
    let mut bytes = 0;
    // SAFETY: the module and its data layout are live; globals are only read.
    unsafe {
        // The module's own, not to be disposed of.
        let layout = llvm_sys::target::LLVMGetModuleDataLayout(module.as_mut_ptr());
        for global in module.get_globals() {
            let raw = global.as_pointer_value().as_value_ref_raw();
            if c::LLVMGetPointerAddressSpace(c::LLVMTypeOf(raw)) != 4 {
                continue;
            }
            bytes += LLVMABISizeOfType(layout, c::LLVMGlobalGetValueType(raw));
            statics.push(cstr(global.get_name()));
        }
    }
    if bytes > MAX_CONSTANT_BYTES {
        return Err(LinkError::ConstantMemoryLimit {
            bytes,
            limit: MAX_CONSTANT_BYTES,
            statics: statics.join(", "),
        });
    }
    Ok(())
}

/// Whether the `icmp` `user` compares `value` with a null pointer (of any address space, cast
/// or not) for equality or inequality.
///
/// # Safety
/// `user` is a live `icmp` instruction using `value`.
pub(super) unsafe fn compares_with_null(
    user: llvm_sys::prelude::LLVMValueRef,
    value: llvm_sys::prelude::LLVMValueRef,
) -> bool {
    use llvm_sys::LLVMIntPredicate as P;
    use llvm_sys::core as c;
    // SAFETY: the caller's contract; the operands of a live instruction are live.
    unsafe {
        // A scalar comparison only: a vector one's result is no `i1` constant.
        if !matches!(c::LLVMGetICmpPredicate(user), P::LLVMIntEQ | P::LLVMIntNE)
            || c::LLVMGetTypeKind(c::LLVMTypeOf(user))
                != llvm_sys::LLVMTypeKind::LLVMIntegerTypeKind
        {
            return false;
        }
        let (a, b) = (c::LLVMGetOperand(user, 0), c::LLVMGetOperand(user, 1));
        let mut other = if a == value { b } else { a };
        if !c::LLVMIsAConstantExpr(other).is_null()
            && c::LLVMGetConstOpcode(other) == llvm_sys::LLVMOpcode::LLVMAddrSpaceCast
        {
            other = c::LLVMGetOperand(other, 0);
        }
        (a == value) != (b == value)
            && !c::LLVMIsAConstant(other).is_null()
            && c::LLVMIsNull(other) != 0
    }
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
    what: &'static str,
) -> Result<()> {
    use llvm_sys::LLVMOpcode as Op;
    use llvm_sys::core as c;
    // SAFETY: the caller's contract; every value used below is a user of a live value.
    unsafe {
        let unsupported = |user| LinkError::SharedMemoryUse {
            what,
            name: name.to_owned(),
            instruction: print_value(user),
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
                    rewrite_shared_uses(module, builder, user, gep, name, what)?;
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
                // A static's address is never null (the checks of a debug build compare it):
                // the comparison is constant, whatever address space the memory moves to.
                Op::LLVMICmp if is_instruction && compares_with_null(user, old) => {
                    let equal =
                        c::LLVMGetICmpPredicate(user) == llvm_sys::LLVMIntPredicate::LLVMIntEQ;
                    let constant = c::LLVMConstInt(c::LLVMTypeOf(user), u64::from(!equal), 0);
                    c::LLVMReplaceAllUsesWith(user, constant);
                    c::LLVMInstructionEraseFromParent(user);
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
        let callee_name = super::callee_name(call);
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
        let id = c::LLVMGetIntrinsicID(c::LLVMGetCalledValue(call));
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

/// Refuses a kernel whose static shared memory exceeds [`MAX_STATIC_SHARED_BYTES`].
pub(super) fn check_shared_limit(module: &Module<'_>, kernels: &[String]) -> Result<()> {
    for (kernel, bytes) in static_shared_bytes(module, kernels) {
        if bytes > MAX_STATIC_SHARED_BYTES {
            return Err(LinkError::SharedMemoryLimit {
                kernel,
                bytes,
                limit: MAX_STATIC_SHARED_BYTES,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{bitcode, link};
    use super::*;
    use crate::device_link::rlib_bitcode::DeviceInput;
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;
    use offload_format::triple::AMDGCN_TRIPLE as AMDGPU_TRIPLE;

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

    /// A debug build's checks compare a shared static's address with null: never null, so
    /// the comparisons fold, in whatever address space the null is written.
    #[test]
    fn a_shared_static_compared_with_null_is_never_null() {
        let context = Context::create();
        let module = amdgpu_module(
            &context,
            "define amdgpu_kernel void @k(ptr addrspace(1) %out) {\n\
               %eq = icmp eq ptr addrspace(1) @tile, addrspacecast (ptr null to ptr addrspace(1))\n\
               %ne = icmp ne ptr addrspace(1) null, @tile\n\
               %both = and i1 %eq, %ne\n\
               %v = zext i1 %both to i32\n\
               store i32 %v, ptr addrspace(1) %out\n\
               ret void\n\
             }\n",
        );
        assert_eq!(move_shared_to_addrspace3(&module).unwrap(), 1);
        module.verify().unwrap();
        let ir = module.print_to_string().to_string();
        assert!(!ir.contains("icmp"), "{ir}");
        assert!(ir.contains("and i1 false, true"), "{ir}");
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
            LinkError::SharedMemoryUse {
                what,
                name,
                instruction,
            } => {
                assert_eq!(what, "shared-memory");
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

    /// A kernel reading element `%i` of a constant table of `words` words, `init`.
    fn constant_kernel(words: u64, init: &str) -> Vec<DeviceInput> {
        let kernel = bitcode(
            "kernel",
            &format!(
                "@table = internal constant [{words} x i32] {init}, section \"{CONSTANT_SECTION}\", align 4\n\
                 define ptx_kernel void @lookup(i64 %i, ptr %out) {{\n\
                   %p = getelementptr i32, ptr @table, i64 %i\n\
                   %v = load i32, ptr %p\n\
                   store i32 %v, ptr %out\n\
                   ret void\n\
                 }}\n"
            ),
        );
        vec![DeviceInput::object("kernel.bc", kernel)]
    }

    #[test]
    fn constant_statics_are_in_the_constant_bank() {
        let ptx = link(&constant_kernel(2, "[i32 7, i32 258]")).unwrap();
        assert!(
            ptx.lines()
                .any(|l| l.starts_with(".const .align 4 .b8 table[8] = {7, 0, 0, 0, 2, 1")),
            "{ptx}"
        );
        assert!(
            ptx.contains("ld.const.b32") || ptx.contains("ld.const.u32"),
            "{ptx}"
        );
        assert!(
            !ptx.contains(offload_format::abi::CONSTANT_SECTION),
            "{ptx}"
        );
    }

    #[test]
    fn constant_memory_over_the_bank_names_the_statics() {
        let limit = MAX_CONSTANT_BYTES;
        link(&constant_kernel(limit / 4, "zeroinitializer")).unwrap();
        match link(&constant_kernel(limit / 4 + 1, "zeroinitializer")).unwrap_err() {
            LinkError::ConstantMemoryLimit {
                bytes,
                limit: reported,
                statics,
            } => {
                assert_eq!(
                    (bytes, reported, statics.as_str()),
                    (limit + 4, limit, "table")
                );
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn amdgpu_constant_uses_are_rebuilt_in_constant_memory() {
        let context = Context::create();
        let text = format!(
            "target triple = \"{AMDGPU_TRIPLE}\"\n\
             @table = internal addrspace(1) constant [4 x i32] [i32 1, i32 2, i32 3, i32 4], section \"{CONSTANT_SECTION}\", align 4\n\
             define amdgpu_kernel void @k(i64 %i, ptr addrspace(1) %out) {{\n\
               %p = getelementptr inbounds i32, ptr addrspace(1) @table, i64 %i\n\
               %v = load i32, ptr addrspace(1) %p\n\
               store i32 %v, ptr addrspace(1) %out\n\
               ret void\n\
             }}\n"
        );
        let buffer = MemoryBuffer::create_from_memory_range_copy(text.as_bytes(), "amdgpu");
        let module = context.create_module_from_ir(buffer).unwrap();
        assert_eq!(move_constants_to_addrspace4(&module).unwrap(), 1);
        module.verify().unwrap();
        let ir = module.print_to_string().to_string();
        assert!(
            ir.contains(
                "@table = internal addrspace(4) constant [4 x i32] [i32 1, i32 2, i32 3, i32 4]"
            ),
            "{ir}"
        );
        assert!(ir.contains("load i32, ptr addrspace(4)"), "{ir}");
    }

    #[test]
    fn static_shared_memory_over_the_limit_names_the_kernel() {
        let limit = MAX_STATIC_SHARED_BYTES;
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

    /// Calls of `__offload_shared_tile` as a generic helper's instantiations leave them,
    /// with `size` and the site and type of each.
    fn generic_tile_module<'ctx>(context: &'ctx Context, size: &str) -> Module<'ctx> {
        let text = format!(
            "target triple = \"{}\"\n\
             @site = internal global i8 0\n\
             @other_site = internal global i8 0\n\
             @f32_64 = private unnamed_addr constant [9 x i8] c\"[f32; 64]\"\n\
             @f32_64_again = private unnamed_addr constant [9 x i8] c\"[f32; 64]\"\n\
             @u32_64 = private unnamed_addr constant [9 x i8] c\"[u32; 64]\"\n\
             declare ptr @{GENERIC_TILE_FUNCTION}(ptr, ptr, i64, i64, i64)\n\
             define ptx_kernel void @k(ptr %out, i64 %n) {{\n\
               %a = call ptr @{GENERIC_TILE_FUNCTION}(ptr @site, ptr @f32_64, i64 9, i64 256, i64 4)\n\
               %b = call ptr @{GENERIC_TILE_FUNCTION}(ptr @site, ptr @f32_64_again, i64 9, i64 256, i64 4)\n\
               %c = call ptr @{GENERIC_TILE_FUNCTION}(ptr @site, ptr @u32_64, i64 9, i64 256, i64 4)\n\
               %d = call ptr @{GENERIC_TILE_FUNCTION}(ptr @other_site, ptr @u32_64, i64 9, i64 {size}, i64 4)\n\
               store ptr %a, ptr %out\n\
               store ptr %b, ptr %out\n\
               store ptr %c, ptr %out\n\
               store ptr %d, ptr %out\n\
               ret void\n\
             }}\n",
            offload_format::triple::NVPTX_TRIPLE
        );
        let buffer = MemoryBuffer::create_from_memory_range_copy(text.as_bytes(), "tiles");
        context.create_module_from_ir(buffer).unwrap()
    }

    #[test]
    fn generic_tiles_are_one_per_site_and_array_type() {
        let context = Context::create();
        let machine = super::super::codegen::target_machine(
            offload_format::triple::NVPTX_TRIPLE,
            "sm_80",
            "+ptx80",
        )
        .unwrap();
        let module = generic_tile_module(&context, "256");
        // One site's two calls of one type (its name twice, as two codegen units leave it)
        // share a tile; another type, or another site, has its own.
        assert_eq!(place_generic_tiles(&module, &machine).unwrap(), 3);
        module.verify().unwrap();
        let ir = module.print_to_string().to_string();
        assert!(!ir.contains(GENERIC_TILE_FUNCTION), "{ir}");
        let tiles = ir
            .lines()
            .filter(|l| l.contains("internal addrspace(3) global [256 x i8] undef, align 4"))
            .count();
        assert_eq!(tiles, 3, "{ir}");

        let module = generic_tile_module(&context, "%n");
        match place_generic_tiles(&module, &machine).unwrap_err() {
            LinkError::GenericTile {
                function,
                instruction,
            } => {
                assert_eq!(function, "k");
                assert!(instruction.contains("i64 %n"), "{instruction}");
            }
            other => panic!("{other}"),
        }
    }
}
