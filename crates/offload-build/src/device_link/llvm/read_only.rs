//! Loads through a kernel's `&[T]` parameters are invariant: the launch contract says nothing
//! writes such a buffer while the kernel runs. offload-rt passes each `&[T]` parameter's
//! pointer through [`MARKER`], an identity function the link never defines; after
//! optimization, every load reached from a marker's result through address arithmetic gets
//! `!invariant.load`, and the call is replaced by its argument. NVPTX then reads such
//! memory through the read-only data path (`ld.global.nc`), as CUDA C does for a
//! `const __restrict__` pointer; AMDGPU may read a uniform one with scalar loads.

#![forbid(unsafe_code)]

use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::module::Module;
use inkwell::values::InstructionOpcode;

use super::ir::{self, MetadataKind, MetadataNode};

/// offload-rt's marker (`kernel::slice`): `ptr __offload_read_only(ptr)`, the identity.
pub(super) const MARKER: &str = offload_format::abi::READ_ONLY_MARKER;

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

/// Marks the plain loads of each global of `names` `!invariant.load`: the runtime writes them
/// between launches only ([`super::HOST_GLOBALS`]). AMDGPU then reads the channel's address
/// with a scalar load wherever the panic path needs it, where a load after the report's stores
/// would be a vector one, into vector registers the kernel pays for. Returns how many loads
/// were marked.
pub(super) fn mark_host_global_loads(module: &Module<'_>, names: &[&str]) -> usize {
    let ir = ir::Module::new(module);
    let (kind, empty) = invariant_load(ir);
    let mut marked = 0;
    // Only metadata is set.
    for name in names {
        let Some(global) = ir.global(name) else {
            continue;
        };
        let mut pending = vec![global.as_value()];
        while let Some(pointer) = pending.pop() {
            for user in pointer.users() {
                if user.is_constant_expr() {
                    if user.const_opcode() == Some(InstructionOpcode::AddrSpaceCast) {
                        pending.push(user);
                    }
                } else if let Some(load) = user.as_load()
                    && load.operand(0) == Some(pointer)
                    && load.is_plain()
                {
                    load.set_metadata(kind, empty);
                    marked += 1;
                }
            }
        }
    }
    marked
}

/// The `invariant.load` metadata kind and its empty node, in `module`'s context.
fn invariant_load<'m>(module: ir::Module<'m>) -> (MetadataKind, MetadataNode<'m>) {
    (
        module.metadata_kind("invariant.load"),
        module.empty_metadata_node(),
    )
}

/// Marks the loads through each call of [`MARKER`] `!invariant.load`, replaces the calls by
/// their argument and removes the declaration. Returns how many loads were marked.
pub(super) fn mark_read_only_loads(module: &Module<'_>) -> usize {
    let ir = ir::Module::new(module);
    let Some(marker) = ir.function(MARKER) else {
        return 0;
    };
    let (kind, empty) = invariant_load(ir);
    let mut marked = 0;
    // The marker's users are its calls, whose operand 0 is the argument; each call is erased
    // only after its uses are replaced.
    for call in marker.users() {
        let Some(call) = call.as_call().filter(|c| c.callee() == marker.as_value()) else {
            continue;
        };
        let mut pending = vec![call.as_value()];
        while let Some(pointer) = pending.pop() {
            for user in pointer.users() {
                let Some(user) = user.as_instruction() else {
                    continue;
                };
                match user.opcode() {
                    InstructionOpcode::Load
                        if user.operand(0) == Some(pointer)
                            && user.as_load().is_some_and(|l| l.is_plain()) =>
                    {
                        user.set_metadata(kind, empty);
                        marked += 1;
                    }
                    // The base pointer of address arithmetic, not an index of it.
                    InstructionOpcode::GetElementPtr if user.operand(0) == Some(pointer) => {
                        pending.push(user.as_value())
                    }
                    InstructionOpcode::BitCast | InstructionOpcode::AddrSpaceCast => {
                        pending.push(user.as_value())
                    }
                    _ => {}
                }
            }
        }
        let argument = call.operand(0).expect("the marker takes one argument");
        call.replace_all_uses_with(argument);
        call.erase();
    }
    if !marker.has_uses() {
        marker.delete();
    }
    marked
}

#[cfg(test)]
mod tests {
    use super::super::tests::{bitcode, link};
    use crate::device_link::rlib_bitcode::DeviceInput;
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;

    /// The plain loads of a host global are marked invariant, directly or through an address
    /// space cast; an atomic load and other globals' loads are left alone.
    #[test]
    fn plain_loads_of_host_globals_are_invariant() {
        let ir = "@chan = external addrspace(1) global ptr\n\
                  @other = external addrspace(1) global ptr\n\
                  define ptr @f() {\n\
                  \x20 %a = load ptr, ptr addrspace(1) @chan, align 8\n\
                  \x20 %b = load ptr, ptr addrspacecast (ptr addrspace(1) @chan to ptr), align 8\n\
                  \x20 %c = load atomic ptr, ptr addrspace(1) @chan monotonic, align 8\n\
                  \x20 %d = load ptr, ptr addrspace(1) @other, align 8\n\
                  \x20 ret ptr %a\n\
                  }\n";
        let context = Context::create();
        let buffer = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "m");
        let module = context.create_module_from_ir(buffer).unwrap();
        assert_eq!(super::mark_host_global_loads(&module, &["chan"]), 2);
        let text = module.print_to_string().to_string();
        let marked = |name: &str| {
            let line = text
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("%{name} =")))
                .unwrap();
            line.contains("!invariant.load")
        };
        assert!(marked("a") && marked("b"), "{text}");
        assert!(!marked("c") && !marked("d"), "{text}");
    }

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
        assert!(
            !ptx.contains(offload_format::abi::READ_ONLY_MARKER),
            "{ptx}"
        );
    }
}
