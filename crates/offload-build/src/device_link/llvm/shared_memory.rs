//! Static shared memory: the globals of [`SHARED_SECTION`] moved to address space 3, and the
//! bytes each kernel uses checked against [`MAX_STATIC_SHARED_BYTES`].

#![forbid(unsafe_code)]

use std::collections::{HashMap, HashSet};

use inkwell::IntPredicate;
use inkwell::module::{Linkage, Module};
use inkwell::targets::TargetMachine;
use inkwell::values::InstructionOpcode;

use super::codegen::{MERGE_CONSTANTS, run_pipeline};
use super::common::cstr;
use super::ir::{self, Builder, Function, GlobalVariable, Instruction, Value};
use crate::device_link::common::{
    CONSTANT_SECTION, GENERIC_TILE_FUNCTION, MAX_CONSTANT_BYTES, MAX_STATIC_SHARED_BYTES,
    SHARED_SECTION,
};
use crate::device_link::error::{LinkError, Result};

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
    let Some(function) = module.get_function(GENERIC_TILE_FUNCTION) else {
        return Ok(0);
    };
    run_pipeline(module, MERGE_CONSTANTS, machine)?;
    let ir = ir::Module::new(module);
    let function = ir.wrap_function(function);
    let mut tiles = HashMap::new();
    // Each call is replaced before it is erased, and the function is deleted only once
    // nothing uses it.
    for user in function.users() {
        let call = user
            .as_call()
            .filter(|c| c.callee() == function.as_value() && c.num_args() == 5);
        let key = call.and_then(|call| {
            let operand = |i| call.operand(i).expect("five arguments");
            let site = operand(0).strip_addrspace_casts();
            let name = operand(1).strip_addrspace_casts();
            let name_len = operand(2).const_zext_value();
            let size = operand(3).const_zext_value();
            let align = operand(4).const_zext_value();
            match (name_len, size, align) {
                (Some(len), Some(size), Some(align))
                    if site.is_constant() && name.is_constant() =>
                {
                    Some((site, name, len, size, align))
                }
                _ => None,
            }
        });
        let (Some(call), Some(key @ (.., size, align))) = (call, key) else {
            let instruction = user.print();
            let function = match user.as_instruction() {
                Some(instruction) => value_name(instruction.function()),
                None => "(a constant)".to_owned(),
            };
            return Err(LinkError::GenericTile {
                function,
                instruction,
            });
        };
        let tile = *tiles.entry(key).or_insert_with(|| {
            let ty = ir.i8_type().array_of(size);
            let tile = ir.add_global_in_address_space(ty, "__offload_generic_tile", 3);
            tile.set_initializer(ty.undef());
            tile.set_linkage(Linkage::Internal);
            tile.set_alignment(u32::try_from(align).unwrap_or(u32::MAX).max(4));
            tile
        });
        call.replace_all_uses_with(tile.const_addrspace_cast(call.ty()));
        call.erase();
    }
    if !function.has_uses() {
        function.delete();
    }
    Ok(tiles.len())
}

/// The name of `function`, `(unnamed)` for none.
fn value_name(function: Function<'_>) -> String {
    let name = function.name();
    if name.is_empty() {
        return "(unnamed)".to_owned();
    }
    String::from_utf8_lossy(name).into_owned()
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
    if moved > 0 && super::common::is_nvptx(module) {
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
    let section = placement.section();
    let moving: Vec<_> = module
        .get_globals()
        .filter(|g| {
            g.get_section()
                .is_some_and(|s| s.to_bytes() == section.as_bytes())
        })
        .collect();
    let ir = ir::Module::new(module);
    for global in &moving {
        let old = ir.wrap_global(*global);
        let name = cstr(global.get_name());
        // Values are replaced before the old global is deleted.
        let value_type = old.value_type();
        let old_space = old.ty().address_space();
        old.set_name(&format!("{name}.generic"));
        let new = ir.add_global_in_address_space(value_type, &name, placement.address_space());
        match placement {
            Placement::Shared => new.set_initializer(value_type.undef()),
            Placement::Constant => {
                if let Some(initializer) = old.initializer() {
                    new.set_initializer(initializer);
                }
                new.set_constant_global(true);
            }
        }
        new.set_linkage(Linkage::Internal);
        new.set_alignment(old.alignment().max(4));
        if old_space == Some(0) {
            old.replace_all_uses_with(new.const_addrspace_cast(ir.ptr_type(0)));
        } else {
            let builder = ir.builder();
            rewrite_shared_uses(ir, &builder, *old, *new, &name, placement.what())?;
        }
        if old.has_uses() {
            // Only dead constants that referred to it are left.
            old.replace_all_uses_with(old.ty().poison());
        }
        old.delete();
    }
    Ok(moving.len())
}

/// [`LinkError::ConstantMemoryLimit`] when the address-space-4 globals of `module` take more
/// than [`MAX_CONSTANT_BYTES`].
fn check_constant_limit(module: &Module<'_>) -> Result<()> {
    let ir = ir::Module::new(module);
    let mut statics = Vec::new();
    let mut bytes = 0;
    // Globals are only read.
    for global in module.get_globals() {
        let raw = ir.wrap_global(global);
        if raw.ty().address_space() != Some(4) {
            continue;
        }
        bytes += ir.abi_size(raw.value_type());
        statics.push(cstr(global.get_name()));
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
/// or not) for equality or inequality; false for an instruction that is no `icmp`.
pub(super) fn compares_with_null<'m>(user: Instruction<'m>, value: Value<'m>) -> bool {
    let Some(icmp) = user.as_icmp() else {
        return false;
    };
    // A scalar comparison only: a vector one's result is no `i1` constant.
    if !matches!(icmp.predicate(), IntPredicate::EQ | IntPredicate::NE) || !user.ty().is_integer() {
        return false;
    }
    let (Some(a), Some(b)) = (user.operand(0), user.operand(1)) else {
        return false;
    };
    let mut other = if a == value { b } else { a };
    if other.const_opcode() == Some(InstructionOpcode::AddrSpaceCast)
        && let Some(inner) = other.operand(0)
    {
        other = inner;
    }
    (a == value) != (b == value) && other.is_constant() && other.is_null_constant()
}

/// Rebuilds every use of `old` (a pointer in a global address space) on `new` (the same memory
/// in address space 3): GEPs are re-created on `new`, loads, stores, atomics and memory
/// intrinsics take `new` as their pointer, casts to generic become casts of `new`. A use that
/// would let the pointer escape in its old address space (stored as a value, passed to a
/// function, merged by a phi) is an error naming the static and the instruction. `old` has no
/// uses left on success.
fn rewrite_shared_uses<'m>(
    module: ir::Module<'m>,
    builder: &Builder<'m>,
    old: Value<'m>,
    new: Value<'m>,
    name: &str,
    what: &'static str,
) -> Result<()> {
    use InstructionOpcode as Op;
    let unsupported = |user: Value<'m>| LinkError::SharedMemoryUse {
        what,
        name: name.to_owned(),
        instruction: user.print(),
    };
    let is_operand = |user: Value<'m>, index: u32| user.operand(index) == Some(old);
    for user in old.users() {
        let instruction = user.as_instruction();
        let is_instruction = instruction.is_some();
        let opcode = if let Some(instruction) = instruction {
            instruction.opcode()
        } else if let Some(opcode) = user.const_opcode() {
            opcode
        } else {
            return Err(unsupported(user));
        };
        if let Some(instruction) = instruction {
            builder.position_before(instruction);
        }
        let instruction = || instruction.expect("an instruction, as the arm's guard says");
        match opcode {
            Op::GetElementPtr if user.operand(0) == Some(old) => {
                let indices: Vec<Value<'m>> = user.operands().skip(1).collect();
                if indices.contains(&old) {
                    return Err(unsupported(user));
                }
                let source = user
                    .as_gep()
                    .map(|gep| gep.source_element_type())
                    .or_else(|| user.const_gep_source_element_type())
                    .expect("a GEP has a source element type");
                let flags = user.gep_no_wrap_flags().expect("a GEP has no-wrap flags");
                let gep = if is_instruction {
                    builder.build_gep_with_no_wrap_flags(source, new, &indices, c"", flags)
                } else {
                    new.const_gep_with_no_wrap_flags(source, &indices, flags)
                };
                rewrite_shared_uses(module, builder, user, gep, name, what)?;
                if is_instruction {
                    instruction().erase();
                }
            }
            Op::AddrSpaceCast if user.ty().address_space() == Some(0) => {
                let ty = user.ty();
                let cast = if is_instruction {
                    builder.build_addrspace_cast(new, ty, c"")
                } else {
                    new.const_addrspace_cast(ty)
                };
                user.replace_all_uses_with(cast);
                if is_instruction {
                    instruction().erase();
                }
            }
            Op::Load if is_instruction => instruction().set_operand(0, new),
            Op::Store if is_instruction && !is_operand(user, 0) => {
                instruction().set_operand(1, new)
            }
            Op::AtomicRMW if is_instruction && !is_operand(user, 1) => {
                instruction().set_operand(0, new)
            }
            Op::AtomicCmpXchg if is_instruction && !is_operand(user, 1) && !is_operand(user, 2) => {
                instruction().set_operand(0, new)
            }
            Op::Call if is_instruction => {
                rewrite_memory_intrinsic(module, builder, instruction(), old, new)
                    .ok_or_else(|| unsupported(user))?
            }
            // A static's address is never null (the checks of a debug build compare it):
            // the comparison is constant, whatever address space the memory moves to.
            Op::ICmp if is_instruction && compares_with_null(instruction(), old) => {
                let equal = user
                    .as_icmp()
                    .is_some_and(|icmp| icmp.predicate() == IntPredicate::EQ);
                let constant = user.ty().const_int(u64::from(!equal), false);
                user.replace_all_uses_with(constant);
                instruction().erase();
            }
            _ => return Err(unsupported(user)),
        }
    }
    Ok(())
}

/// Re-creates a call of `llvm.memcpy`/`llvm.memmove`/`llvm.memset` whose pointer arguments
/// include `old` as a call of the intrinsic overloaded for `new`'s address space. `None` for
/// any other call. The builder is positioned before `call`.
fn rewrite_memory_intrinsic<'m>(
    module: ir::Module<'m>,
    builder: &Builder<'m>,
    call: Instruction<'m>,
    old: Value<'m>,
    new: Value<'m>,
) -> Option<()> {
    let call = call.as_call()?;
    let callee_name = call.callee_name();
    let pointer_args: &[u32] =
        if callee_name.starts_with(b"llvm.memcpy.") || callee_name.starts_with(b"llvm.memmove.") {
            &[0, 1]
        } else if callee_name.starts_with(b"llvm.memset.") {
            &[0]
        } else {
            return None;
        };
    let mut args: Vec<Value<'m>> = call.args().collect();
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
        .map(|&i| args[i as usize].ty())
        .collect();
    overloads.push(args[2].ty());
    let id = call.called_function()?.intrinsic_id()?;
    let declaration = module.intrinsic_by_id(id, &overloads)?;
    let replacement = builder.build_call(declaration, &args, c"");
    call.replace_all_uses_with(replacement);
    call.erase();
    Some(())
}

/// Bytes of static shared memory of each kernel of `kernels`: the address-space-3 globals
/// used by the kernel or by any function it calls, each counted once.
fn static_shared_bytes(module: &Module<'_>, kernels: &[String]) -> Vec<(String, u64)> {
    let ir = ir::Module::new(module);
    // Nothing is modified.
    let mut used_by: HashMap<Function<'_>, Vec<(GlobalVariable<'_>, u64)>> = HashMap::new();
    for global in ir.globals() {
        if global.ty().address_space() != Some(3) {
            continue;
        }
        let size = ir.abi_size(global.value_type());
        let mut functions = HashSet::new();
        let mut pending = global.users();
        while let Some(user) = pending.pop() {
            match user.as_instruction() {
                None => pending.extend(user.users()),
                Some(instruction) => {
                    functions.insert(instruction.function());
                }
            }
        }
        for function in functions {
            used_by.entry(function).or_default().push((global, size));
        }
    }
    fn callees(function: Function<'_>) -> Vec<Function<'_>> {
        function
            .blocks()
            .flat_map(|b| b.instructions())
            .filter_map(|i| i.as_call())
            .filter_map(|call| call.called_function())
            .collect()
    }
    let mut result = Vec::new();
    for name in kernels {
        let Some(kernel) = module.get_function(name) else {
            continue;
        };
        let root = ir.wrap_function(kernel);
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

    /// A generic address of the tile written as a constant expression (as rustc leaves a
    /// shared static read through a generic pointer) is rebuilt around the tile in LDS.
    #[test]
    fn a_constant_generic_address_of_the_tile_is_rebuilt() {
        let context = Context::create();
        let module = amdgpu_module(
            &context,
            "define amdgpu_kernel void @k(ptr addrspace(1) %out) {\n\
               %v = load i32, ptr addrspacecast (ptr addrspace(1) @tile to ptr)\n\
               store i32 %v, ptr addrspace(1) %out\n\
               ret void\n\
             }\n",
        );
        assert_eq!(move_shared_to_addrspace3(&module).unwrap(), 1);
        module.verify().unwrap();
        let ir = module.print_to_string().to_string();
        assert!(
            ir.contains("load i32, ptr addrspacecast (ptr addrspace(3) @tile to ptr)"),
            "{ir}"
        );
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
