//! Reading the bitcode inputs and linking them: the eager inputs whole, library members only
//! as far as they resolve something (`llvm-link --only-needed`); and the final check that
//! nothing the kernels need is left undefined.

#![forbid(unsafe_code)]

use std::collections::HashSet;

use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::{Linkage, Module};
use inkwell::targets::TargetMachine;

use super::codegen::{DROP_UNUSED, run_pipeline};
use super::common::{HOST_GLOBALS, cstr, has_local_linkage};
use super::fixups::internalize;
use super::helpers::AMDGPU_HELPERS;
use super::ir::{self, LazyModule};
use super::panic_sites::{LATE, SITE_REPORTERS};
use super::panics::{REPORTER, lean_panics};
use super::uniform_panics::{THREAD_INDEX, THREAD_REPORTER};
use crate::device_link::error::{LinkError, Result};
use crate::device_link::rlib_bitcode::DeviceInput;

fn parse_eager<'ctx>(context: &'ctx Context, input: &DeviceInput) -> Result<Module<'ctx>> {
    // Borrowed, not copied: a full parse keeps nothing of the buffer.
    let buffer = MemoryBuffer::create_from_memory_range(&input.bytes, &input.name);
    Module::parse_bitcode_from_buffer(&buffer, context).map_err(|e| LinkError::ParseBitcode {
        name: input.name.clone(),
        message: e.to_string(),
    })
}

/// Parses bitcode lazily: function bodies are read only when the linker moves them.
///
/// The module reads from `input.bytes` (borrowed, not copied) until it is linked or dropped,
/// which its type's borrow of the input holds it to.
fn parse_lazy<'ctx, 'a>(
    context: &'ctx Context,
    input: &'a DeviceInput,
) -> Result<LazyModule<'ctx, 'a>> {
    if !crate::device_link::rlib_bitcode::is_bitcode(&input.bytes) {
        return Err(LinkError::NotBitcode {
            name: input.name.clone(),
        });
    }
    ir::parse_bitcode_lazily(context, &input.bytes, &input.name).ok_or_else(|| {
        LinkError::ParseBitcode {
            name: input.name.clone(),
            message: "LLVM could not read the bitcode".into(),
        }
    })
}

/// Names of the non-local definitions of `module` (functions and variables).
fn external_definitions(module: &Module<'_>) -> HashSet<String> {
    let mut defs = HashSet::new();
    for f in module.get_functions() {
        let gv = f.as_global_value();
        if !gv.is_declaration() && !has_local_linkage(gv.get_linkage()) {
            defs.insert(cstr(gv.get_name()));
        }
    }
    for g in module.get_globals() {
        if !g.is_declaration() && !has_local_linkage(g.get_linkage()) {
            defs.insert(cstr(g.get_name()));
        }
    }
    defs
}

/// Whether `module` defines `name` (a function).
fn defines(module: &Module<'_>, name: &str) -> bool {
    module
        .get_function(name)
        .is_some_and(|f| !f.as_global_value().is_declaration())
}

/// Names `module` uses but does not define (intrinsics excluded).
fn undefined_symbols(module: &Module<'_>) -> HashSet<String> {
    let ir = ir::Module::new(module);
    let mut undefined = HashSet::new();
    for f in module.get_functions() {
        let gv = f.as_global_value();
        let name = cstr(gv.get_name());
        if gv.is_declaration() && !name.starts_with("llvm.") && ir.wrap_function(f).has_uses() {
            undefined.insert(name);
        }
    }
    for g in module.get_globals() {
        if g.is_declaration() && ir.wrap_global(g).has_uses() {
            undefined.insert(cstr(g.get_name()));
        }
    }
    undefined
}

/// A library member of the link: what it defines, and its module once read.
struct Member<'a, 'ctx> {
    input: &'a DeviceInput,
    /// Definitions not yet linked.
    definitions: HashSet<String>,
    /// Whether `definitions` comes from the module itself rather than the archive's symbol map.
    read: bool,
    module: Option<LazyModule<'ctx, 'a>>,
}

impl<'a, 'ctx> Member<'a, 'ctx> {
    /// Reads the module (lazily: no function body yet) and takes its definitions from it.
    fn read(&mut self, context: &'ctx Context, linked: &HashSet<String>) -> Result<()> {
        let module = parse_lazy(context, self.input)?;
        self.definitions = external_definitions(&module)
            .into_iter()
            .filter(|d| !linked.contains(d))
            .collect();
        self.read = true;
        self.module = Some(module);
        Ok(())
    }
}

/// What a device link keeps: the kernels (all of them when `None`) and the symbols the
/// target's loader provides.
#[derive(Clone, Copy)]
pub(super) struct Roots<'a> {
    pub(super) kernels: Option<&'a [String]>,
    pub(super) external: &'a [&'a str],
    pub(super) machine: &'a TargetMachine,
}

/// Links the inputs: the eager ones whole, then library members only as far as they define
/// something still undefined (`llvm-link --only-needed`), repeated until nothing more resolves.
/// A member with a symbol map entry is read only when it resolves a symbol. `external` names
/// symbols the target's loader provides, which no member is expected to define (nor the
/// [`AMDGPU_HELPERS`], defined after the link).
pub(super) fn link_inputs<'ctx>(
    context: &'ctx Context,
    inputs: &[DeviceInput],
    roots: Roots<'_>,
) -> Result<Module<'ctx>> {
    let main = context.create_module("offload-device");
    let mut members = Vec::new();
    for input in inputs.iter().filter(|i| !i.lazy) {
        let module = parse_eager(context, input)?;
        // Should a library need one of this input's definitions dropped below (the panic
        // handler, say), the input is linked again as a member, for just that.
        members.push(Member {
            input,
            definitions: external_definitions(&module),
            read: true,
            module: None,
        });
        main.link_in_module(module).map_err(|e| LinkError::Link {
            name: input.name.clone(),
            message: e.to_string(),
        })?;
    }
    lean_panics(&main, defines(&main, REPORTER))?;
    // Before the statics that carry the bounds are dropped with the rest of the crate's
    // unused definitions.
    super::launch_bounds::apply_launch_bounds(context, &main);
    // Only the kernels are roots: what the rest of the crate's own code needs from libraries
    // is not linked.
    internalize(&main, roots.kernels)?;
    run_pipeline(&main, DROP_UNUSED, roots.machine)?;
    let external = roots.external;
    for input in inputs.iter().filter(|i| i.lazy) {
        let mut member = Member {
            input,
            definitions: input
                .defines
                .iter()
                .flatten()
                .cloned()
                .collect::<HashSet<_>>(),
            read: false,
            module: None,
        };
        if input.defines.is_none() {
            member.read(context, &HashSet::new())?;
        }
        members.push(member);
    }
    // Core's panic functions report through offload-rt's reporter when the link has it (a
    // kernel crate's does; a bare `no_std` module with a panic handler of its own does not).
    let reporters =
        defines(&main, REPORTER) || members.iter().any(|m| m.definitions.contains(REPORTER));
    // offload-rt's AMD reporter of scalar panic branches, where its version has one.
    let thread_reporter = (super::common::is_amdgpu(&main)
        && (defines(&main, THREAD_REPORTER)
            || members
                .iter()
                .any(|m| m.definitions.contains(THREAD_REPORTER))))
    .then_some([THREAD_REPORTER, THREAD_INDEX]);
    let mut linked = HashSet::new();
    loop {
        let mut undefined = undefined_symbols(&main);
        // The reporters of constant panic sites, which only a stage after optimization calls.
        if reporters {
            for reporter in SITE_REPORTERS
                .into_iter()
                .chain(thread_reporter.into_iter().flatten())
            {
                if !defines(&main, reporter) {
                    undefined.insert(reporter.to_owned());
                }
            }
        }
        let Some(index) = members
            .iter()
            .position(|m| m.definitions.iter().any(|d| undefined.contains(d)))
        else {
            // A symbol map could be incomplete: before giving up on a symbol, read the members
            // known only from it.
            let unresolved = undefined
                .iter()
                .any(|s| !external.contains(&s.as_str()) && !AMDGPU_HELPERS.contains(&s.as_str()));
            let mut reread = false;
            if unresolved {
                for member in members.iter_mut().filter(|m| !m.read) {
                    member.read(context, &linked)?;
                    reread = true;
                }
            }
            if reread {
                continue;
            }
            break;
        };
        let member = &mut members[index];
        let module = match member.module.take() {
            Some(module) => module,
            None => parse_lazy(context, member.input)?,
        };
        // Only what is needed keeps external linkage; the linker then moves just the values
        // reachable from it and leaves the rest of the member unread.
        for f in module.get_functions() {
            let gv = f.as_global_value();
            let name = cstr(gv.get_name());
            if !gv.is_declaration()
                && !has_local_linkage(gv.get_linkage())
                && !undefined.contains(&name)
            {
                // One copy of the panic path's functions (the reporters and what they call),
                // however many times their member is linked.
                gv.set_linkage(if LATE.contains(&name.as_str()) {
                    Linkage::WeakAny
                } else {
                    Linkage::Internal
                });
            }
        }
        for g in module.get_globals() {
            let name = cstr(g.get_name());
            if HOST_GLOBALS.contains(&name.as_str()) && !g.is_declaration() {
                // One global, however many times its member is linked (an internal copy per
                // link would leave each user its own, which the runtime never writes).
                g.set_linkage(Linkage::WeakAny);
            } else if !g.is_declaration()
                && !has_local_linkage(g.get_linkage())
                && !name.starts_with("llvm.")
                && !undefined.contains(&name)
            {
                g.set_linkage(Linkage::Internal);
            }
        }
        member.definitions.retain(|d| {
            let needed = undefined.contains(d);
            if needed {
                linked.insert(d.clone());
            }
            !needed
        });
        module.link_into(&main).map_err(|e| LinkError::Link {
            name: member.input.name.clone(),
            message: e.to_string(),
        })?;
        lean_panics(&main, reporters)?;
    }
    lean_panics(&main, reporters)?;
    Ok(main)
}

pub(super) fn check_resolved(module: &Module<'_>, allowed: &[&str]) -> Result<()> {
    let mut symbols: Vec<String> = undefined_symbols(module)
        .into_iter()
        .filter(|s| !allowed.contains(&s.as_str()))
        .collect();
    if symbols.is_empty() {
        return Ok(());
    }
    symbols.sort();
    Err(LinkError::Undefined { symbols })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{bitcode, link};
    use super::*;

    fn inputs(library_defines: Option<Vec<String>>) -> Vec<DeviceInput> {
        let kernel = bitcode(
            "kernel",
            "declare i32 @helper(i32)\n\
             define ptx_kernel void @k(ptr %out) {\n  %v = call i32 @helper(i32 1)\n  store i32 %v, ptr %out\n  ret void\n}\n\
             define i32 @unused() {\n  %v = call i32 @only_for_unused()\n  ret i32 %v\n}\n\
             declare i32 @only_for_unused()\n",
        );
        let library = bitcode(
            "library",
            "define i32 @helper(i32 %x) {\n  %y = add i32 %x, 41\n  ret i32 %y\n}\n",
        );
        let mut library = DeviceInput::library("lib(helper.o)", library);
        library.defines = library_defines;
        vec![DeviceInput::object("kernel.bc", kernel), library]
    }

    #[test]
    fn members_resolve_with_and_without_a_symbol_map() {
        for defines in [None, Some(vec!["helper".to_owned()])] {
            let ptx = link(&inputs(defines.clone())).unwrap();
            assert!(ptx.contains(".entry k"), "{defines:?}:\n{ptx}");
            // `helper` is inlined and folded: the kernel stores 42.
            assert!(ptx.contains("42"), "{defines:?}:\n{ptx}");
        }
    }

    #[test]
    fn an_incomplete_symbol_map_falls_back_to_reading_the_member() {
        let ptx = link(&inputs(Some(Vec::new()))).unwrap();
        assert!(ptx.contains("42"), "{ptx}");
    }

    #[test]
    fn a_symbol_nobody_defines_is_reported() {
        let mut inputs = inputs(Some(vec!["helper".to_owned()]));
        inputs.truncate(1);
        let err = link(&inputs).unwrap_err();
        // Only what the kernel needs counts: `only_for_unused` is dead code.
        match err {
            LinkError::Undefined { symbols } => assert_eq!(symbols, ["helper"]),
            other => panic!("{other}"),
        }
    }
}
