//! The CPU image's IR link: the kernel crate's static library from a nested build with
//! `--cfg offload_cpu_ir` and `-Clinker-plugin-lto`, whose workspace crates are LLVM bitcode
//! and whose standard library is native objects (`device_link::cpu_archive`). Its bitcode
//! members are linked whole into one module; every definition is made internal but the image's
//! exports (`offload_format::abi::CPU_SYMBOL_PREFIX`, the kernels' body functions excepted) and
//! what the native members use of it (`rust_eh_personality`, the panic handler, the allocator);
//! [`cpu_regions`](super::cpu_regions) forms the barrier regions and makes the hooks inlinable
//! where calls of them remain; then LLVM's O3 pipelines for the image's triple, CPU and
//! features (`codegen::OPTIMIZE_CPU_PRE_LINK`, [`constrained_loops`](super::constrained_loops)
//! reopening the loops range-check elimination closed, `codegen::OPTIMIZE_CPU_LINK`), and one
//! relocatable object, which the build links with
//! the native members into the image's shared object.

#![forbid(unsafe_code)]

use std::collections::BTreeSet;

use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::{Linkage, Module};
use inkwell::targets::FileType;

use super::codegen::{
    OPTIMIZE_CPU_LINK, OPTIMIZE_CPU_PRE_LINK, OPTIMIZE_CPU_PRE_LINK_UNPEELED, emit, run_pipeline,
    target_machine,
};
use super::common::{cstr, has_local_linkage};
use super::constrained_loops::reopen_constrained_loops;
use super::cpu_regions::{CoroutineKernel, Peeling, ThreadLoops, form_regions};
use super::ir;
use crate::device_link::cpu_archive::{CpuArchive, CpuLinkOptions};
use crate::device_link::error::{LinkError, Result};

/// Stack of the thread a CPU link runs on: LLVM's passes and the region stage recurse along
/// chains of values, deeper than a spawned thread's 2 MiB allow in a build script's
/// unoptimized code (reserved, not committed, until touched).
const CPU_LINK_STACK: usize = 512 << 20;

/// Links the bitcode of `archive` (the static library of kernel crate `krate`) into one
/// object for `opts`, as the module comment says, on a thread of [`CPU_LINK_STACK`] bytes of
/// stack. The kernels that keep their coroutines are not returned: the region stage leaves a
/// note for each in the object, which the build reads from the image as it reads a
/// source-form image's.
pub fn cpu_link(krate: &str, archive: &[u8], opts: &CpuLinkOptions) -> Result<Vec<u8>> {
    std::thread::scope(|scope| {
        let link = std::thread::Builder::new()
            .name("cpu-link".to_owned())
            .stack_size(CPU_LINK_STACK)
            .spawn_scoped(scope, || link_on_this_thread(krate, archive, opts))
            .map_err(|source| LinkError::Io {
                action: "starting the CPU link's thread",
                path: std::path::PathBuf::from(krate),
                source,
            })?;
        link.join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

fn link_on_this_thread(krate: &str, archive: &[u8], opts: &CpuLinkOptions) -> Result<Vec<u8>> {
    let _linking = super::crash::linking(format!("`{krate}` for the CPU device"));
    let failed = |step: &'static str| {
        move |source: LinkError| LinkError::CpuLink {
            krate: krate.to_owned(),
            step,
            source: Box::new(source),
        }
    };
    let archive = CpuArchive::read(krate, archive)?;
    let mut native_uses = archive.native_undefined(krate)?;
    native_uses.extend(opts.keep.iter().cloned());
    let machine = target_machine(&opts.triple, &opts.cpu, &opts.features)
        .map_err(failed("making its target machine"))?;
    let context = Context::create();
    let module = link_bitcode(&context, krate, &archive).map_err(failed("linking its bitcode"))?;
    internalize(&module, &native_uses);
    let shape = thread_loops(opts);
    let _coroutines: Vec<CoroutineKernel> =
        form_regions(ir::Module::new(&module), shape).map_err(failed("forming the regions"))?;
    module
        .verify()
        .map_err(|e| LinkError::Verify {
            message: e.to_string(),
        })
        .map_err(failed("verifying the module"))?;
    let pre_link = match shape.peeling {
        Peeling::Allowed => OPTIMIZE_CPU_PRE_LINK,
        Peeling::Never => OPTIMIZE_CPU_PRE_LINK_UNPEELED,
    };
    run_pipeline(&module, pre_link, &machine).map_err(failed("optimizing"))?;
    reopen_constrained_loops(ir::Module::new(&module), shape);
    run_pipeline(&module, OPTIMIZE_CPU_LINK, &machine).map_err(failed("optimizing"))?;
    let object =
        emit(&machine, &module, FileType::Object, &opts.cpu).map_err(failed("generating code"))?;
    Ok(object.as_slice().to_vec())
}

/// How the image's thread loops are shaped: unpeeled and two vectors a trip where its vectors
/// are AVX-512's, whose masked stores cost what plain ones do and whose 32 registers hold two
/// vectors' values.
fn thread_loops(opts: &CpuLinkOptions) -> ThreadLoops {
    let avx512 = opts.cpu == "x86-64-v4" || opts.features.split(',').any(|f| f == "+avx512f");
    if avx512 {
        ThreadLoops::AVX512
    } else {
        ThreadLoops::NARROW
    }
}

/// Every bitcode member linked into the first, in archive order.
fn link_bitcode<'ctx>(
    context: &'ctx Context,
    krate: &str,
    archive: &CpuArchive<'_>,
) -> Result<Module<'ctx>> {
    let mut linked: Option<Module<'ctx>> = None;
    for member in &archive.bitcode {
        // Borrowed, not copied: a full parse keeps nothing of the buffer.
        let buffer = MemoryBuffer::create_from_memory_range(&member.data, &member.name);
        let module = Module::parse_bitcode_from_buffer(&buffer, context).map_err(|e| {
            LinkError::ParseBitcode {
                name: member.name.clone(),
                message: e.to_string(),
            }
        })?;
        match &linked {
            None => linked = Some(module),
            Some(main) => main.link_in_module(module).map_err(|e| LinkError::Link {
                name: member.name.clone(),
                message: e.to_string(),
            })?,
        }
    }
    linked.ok_or_else(|| LinkError::NotBitcode {
        name: format!(
            "the static library of `{krate}` (no bitcode member: built without \
             `-Clinker-plugin-lto`?)"
        ),
    })
}

/// Whether the image keeps `name` external: its exports, but not the kernels' body functions,
/// which the region stage reads and drops.
fn exported(name: &str) -> bool {
    name.starts_with(offload_format::abi::CPU_SYMBOL_PREFIX)
        && !name.starts_with(offload_format::abi::CPU_BODY_PREFIX)
}

/// Makes every definition internal but the [`exported`] ones and `native_uses`, and takes the
/// internal ones out of their COMDAT groups: the native members' own groups of the same names
/// (generic code of `core`) would otherwise replace them in the image's link.
fn internalize(module: &Module<'_>, native_uses: &BTreeSet<String>) {
    let ir = ir::Module::new(module);
    for f in module.get_functions() {
        let gv = f.as_global_value();
        if gv.is_declaration() {
            continue;
        }
        let name = cstr(gv.get_name());
        if exported(&name) || native_uses.contains(&name) {
            continue;
        }
        if !has_local_linkage(gv.get_linkage()) {
            gv.set_linkage(Linkage::Internal);
        }
        ir.wrap_function(f).drop_comdat();
    }
    for g in module.get_globals() {
        let name = cstr(g.get_name());
        if g.is_declaration()
            || name.starts_with("llvm.")
            || exported(&name)
            || native_uses.contains(&name)
        {
            continue;
        }
        if !has_local_linkage(g.get_linkage()) {
            g.set_linkage(Linkage::Internal);
        }
        ir.wrap_global(g).drop_comdat();
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use offload_format::archive::{ArchiveMember, write_archive};

    use super::*;

    const TRIPLE: &str = "x86_64-unknown-linux-gnu";

    fn bitcode(name: &str, ir: &str) -> Vec<u8> {
        let context = Context::create();
        let text = format!("target triple = \"{TRIPLE}\"\n{ir}");
        let buffer = MemoryBuffer::create_from_memory_range_copy(text.as_bytes(), name);
        let module = context.create_module_from_ir(buffer).unwrap();
        module.write_bitcode_to_memory().as_slice().to_vec()
    }

    fn archive(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let members: Vec<ArchiveMember<'_>> = members
            .iter()
            .map(|(name, data)| ArchiveMember {
                name: (*name).to_owned(),
                data: Cow::Borrowed(data),
            })
            .collect();
        let mut bytes = Vec::new();
        write_archive(&mut bytes, &members).unwrap();
        bytes
    }

    fn options() -> CpuLinkOptions {
        CpuLinkOptions {
            triple: TRIPLE.to_owned(),
            cpu: "x86-64".to_owned(),
            features: String::new(),
            keep: Vec::new(),
        }
    }

    /// The symbols an object defines globally, and those it leaves undefined.
    fn symbols(object: &[u8]) -> (Vec<String>, Vec<String>) {
        use object::{Object as _, ObjectSymbol as _};
        let file = object::File::parse(object).unwrap();
        let (mut defined, mut undefined) = (Vec::new(), Vec::new());
        for s in file.symbols() {
            let name = s.name().unwrap().to_owned();
            if s.is_undefined() {
                undefined.push(name);
            } else if s.is_global() {
                defined.push(name);
            }
        }
        defined.sort();
        undefined.sort();
        (defined, undefined)
    }

    /// The exports and what a native member uses stay; the body function, the hooks and
    /// everything else become internal and, unused or inlined, are dropped; two bitcode
    /// members link.
    #[test]
    fn only_the_exports_and_what_native_code_uses_stay_external() {
        let kernel = bitcode(
            "kernel",
            "declare i32 @__offload_cpuir_index(i32)\n\
             define void @__offload_cpu_run_k(ptr %out) {\n\
             \x20 %v = call i32 @__offload_cpuir_index(i32 0) #0\n\
             \x20 store i32 %v, ptr %out\n  ret void\n}\n\
             define void @__offload_cpu_body_k(ptr %p) {\n  ret void\n}\n\
             define i32 @rust_eh_personality() {\n  ret i32 0\n}\n\
             define i32 @helper() {\n  ret i32 3\n}\n\
             attributes #0 = { noinline }\n",
        );
        let runtime = bitcode(
            "runtime",
            "define i32 @__offload_cpuir_index(i32 %w) noinline {\n  ret i32 %w\n}\n",
        );
        // A native member using `rust_eh_personality`: an ELF object written by LLVM.
        let native = {
            let machine = target_machine(TRIPLE, "x86-64", "").unwrap();
            let context = Context::create();
            let text = format!(
                "target triple = \"{TRIPLE}\"\ndeclare i32 @rust_eh_personality()\n\
                 define i32 @core_fn() {{\n  %v = call i32 @rust_eh_personality()\n  ret i32 %v\n}}\n"
            );
            let buffer = MemoryBuffer::create_from_memory_range_copy(text.as_bytes(), "core");
            let module = context.create_module_from_ir(buffer).unwrap();
            emit(&machine, &module, FileType::Object, "x86-64")
                .unwrap()
                .as_slice()
                .to_vec()
        };
        let bytes = archive(&[
            ("kernel.o", kernel),
            ("core-1.o", native),
            ("runtime.o", runtime),
        ]);
        let object = cpu_link("k", &bytes, &options()).unwrap();
        let (defined, undefined) = symbols(&object);
        let run = format!("{}k", offload_format::abi::CPU_RUN_PREFIX);
        assert_eq!(defined, [run.as_str(), "rust_eh_personality"]);
        assert!(undefined.is_empty(), "{undefined:?}");
        // The index hook, `noinline` in its crate and at its call, is inlined and gone.
        use object::{Object as _, ObjectSymbol as _};
        let file = object::File::parse(&*object).unwrap();
        let hook = offload_format::abi::CPU_IR_INDEX;
        assert!(!file.symbols().any(|s| s.name() == Ok(hook)), "{hook} left");
    }

    /// Failures name the crate and the step.
    #[test]
    fn a_bad_member_names_the_crate_and_the_step() {
        let bytes = archive(&[("kernel.o", b"BC\xc0\xde broken".to_vec())]);
        let err = cpu_link("my-kernels", &bytes, &options()).unwrap_err();
        assert!(matches!(err, LinkError::CpuLink { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("`my-kernels`") && text.contains("linking its bitcode"),
            "{text}"
        );
        let err = cpu_link("my-kernels", &archive(&[]), &options()).unwrap_err();
        assert!(err.to_string().contains("no bitcode member"), "{err}");
    }
}
