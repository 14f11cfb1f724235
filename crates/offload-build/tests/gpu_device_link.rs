//! The GPU device link against the real tools: a fixture kernel crate built with nightly for
//! nvptx64 and amdgcn, linked in-process, checked with `ptxas` and `llvm-readelf`.
#![cfg(feature = "llvm")]

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use offload_build::tooling::device_link::{
    self, AmdCodeObjectVersion, AmdgpuLinkOptions, DeviceInput, GpuLinkOptions, NvptxLinkOptions,
};
use offload_build::tooling::env::Env;
use offload_build::{OffloadArch, PanicStrategy};
use offload_format::abi;
use offload_format::panic_sites::{self, PanicSite, PanicSites};
use offload_format::{AmdTargetId, ImageKind};
use offload_toolchain::Tool;

use common::{
    disassemble, function_body, nightly_ready, ptx_entry, readelf, rt_fixture_inputs, target_dir,
};

fn fixture_manifest() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gpu-kernels/Cargo.toml")
}

fn inputs_for(target: &str) -> &'static [DeviceInput] {
    static NVPTX: OnceLock<Vec<DeviceInput>> = OnceLock::new();
    static AMDGPU: OnceLock<Vec<DeviceInput>> = OnceLock::new();
    let target = device_link::parse_gpu_arch(target).unwrap();
    let cell = match target {
        OffloadArch::Nvptx(_) => &NVPTX,
        _ => &AMDGPU,
    };
    cell.get_or_init(|| {
        let dir = target_dir().join(target.triple());
        common::nested_inputs(&Env::detect(), &fixture_manifest(), &target, &dir)
    })
}

#[test]
fn rustc_and_linked_llvm_agree() {
    if !nightly_ready() {
        return;
    }
    assert_eq!(device_link::linked_llvm_major(), device_link::LLVM_MAJOR);
    device_link::check_llvm_versions(&Env::detect()).unwrap();
}

#[test]
fn nvptx_images_for_sm80_and_sm90() {
    if !nightly_ready() {
        return;
    }
    let inputs = inputs_for("sm_80");
    assert!(
        inputs.iter().any(|i| i.lazy),
        "core's bitcode members are inputs"
    );
    for sm in ["sm_80", "sm_90"] {
        let ptx = device_link::nvptx_link(inputs, sm, &NvptxLinkOptions::default()).unwrap();
        assert!(ptx.contains(".version 7.8"), "{sm}:\n{ptx}");
        assert!(ptx.contains(&format!(".target {sm}")), "{sm}");
        let kernels = offload_format::image::ptx::entries(&ptx);
        let names: Vec<&str> = kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names.len(), 2, "only the kernels stay visible: {names:?}");
        assert!(
            names.contains(&"saxpy") && names.contains(&"block_sum"),
            "{names:?}"
        );
        let saxpy = kernels.iter().find(|k| k.name == "saxpy").unwrap();
        assert_eq!(saxpy.param_types(), [".u32", ".f32", ".u64", ".u64"]);
        let block_sum = kernels.iter().find(|k| k.name == "block_sum").unwrap();
        assert_eq!(block_sum.param_types(), [".u64", ".u64", ".u64"]);
        assert!(
            ptx.lines()
                .any(|l| l.contains(".shared") && l.contains("TILE") && l.contains("[2048]")),
            "the shared tile lands in .shared:\n{ptx}"
        );
        if Tool::Ptxas.for_test().is_none() {
            continue;
        }
        let (cubin, report) = device_link::ptxas_verbose(&ptx, sm).unwrap();
        assert!(
            device_link::is_cubin(&cubin),
            "{sm}: ptxas output is a CUDA ELF"
        );
        let block = report.iter().find(|k| k.name == "block_sum").unwrap();
        assert_eq!(block.shared_bytes, 2048, "{report:?}");
        assert!(block.registers > 0);
    }
}

#[test]
fn nvptx_requested_kernel_must_exist() {
    if !nightly_ready() {
        return;
    }
    let opts = NvptxLinkOptions {
        kernels: Some(vec!["saxpy".into()]),
        ..Default::default()
    };
    let ptx = device_link::nvptx_link(inputs_for("sm_80"), "sm_80", &opts).unwrap();
    let names = offload_format::image::ptx::kernel_names(&ptx);
    assert_eq!(names, ["saxpy"]);
    let opts = NvptxLinkOptions {
        kernels: Some(vec!["nope".into()]),
        ..Default::default()
    };
    let err = device_link::nvptx_link(inputs_for("sm_80"), "sm_80", &opts).unwrap_err();
    assert!(
        matches!(err, device_link::LinkError::MissingKernel { .. }),
        "{err}"
    );
}

#[test]
fn amdgpu_code_objects() {
    if !nightly_ready() || Tool::LlvmReadelf.for_test().is_none() {
        return;
    }
    let inputs = inputs_for("gfx90a");
    let dir = tempfile::tempdir().unwrap();
    for (id, flags, readelf_flags) in [
        // llvm-readelf names "any" without a sign.
        ("gfx90a", 0x53f, "Flags: 0x53f, gfx90a, xnack, sramecc\n"),
        (
            "gfx942:xnack+",
            0x74c,
            "Flags: 0x74c, gfx942, xnack+, sramecc\n",
        ),
        ("gfx1100", 0x41, "Flags: 0x41, gfx1100\n"),
    ] {
        let target = AmdTargetId::parse(id).unwrap();
        let (image, kernels) =
            device_link::amdgpu_code_object(inputs, &target, &Default::default()).unwrap();
        assert_eq!(kernels, ["block_sum", "saxpy"]);
        assert_eq!(
            offload_format::image::amdgpu::e_flags(&image).unwrap(),
            flags,
            "{id}"
        );
        let path = dir.path().join(format!("{}.elf", id.replace(':', "_")));
        std::fs::write(&path, &image).unwrap();

        let header = readelf(&["-h"], &path);
        assert!(header.contains("EM_AMDGPU"), "{header}");
        let flags_line: String = header
            .lines()
            .find(|l| l.contains("Flags:"))
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(format!("{flags_line}\n"), readelf_flags, "{id}");
        assert!(
            header.contains("DYN"),
            "a linked code object is a shared object: {header}"
        );
        // Code object V5 by default, which ROCm 6.0 and newer load (V6 needs ROCm 6.3).
        assert!(
            header
                .lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["ABI", "Version:", "3"]),
            "{id}: not code object V5:\n{header}"
        );
        assert_eq!(
            offload_format::image::amdgpu::inspect(&image)
                .unwrap()
                .abi_version,
            3
        );
        assert_eq!(
            image[8],
            AmdCodeObjectVersion::V5.abi_version(),
            "EI_ABIVERSION"
        );
        let v6 = AmdgpuLinkOptions {
            code_object_version: AmdCodeObjectVersion::V6,
            ..Default::default()
        };
        let (image_v6, _) = device_link::amdgpu_code_object(inputs, &target, &v6).unwrap();
        assert_eq!(image_v6[8], 4, "{id}: EI_ABIVERSION of code object V6");
        let symbols = readelf(&["-s"], &path);
        for kernel in ["saxpy", "block_sum"] {
            assert!(
                symbols.contains(&format!(" {kernel}.kd")),
                "{id}: no {kernel}.kd:\n{symbols}"
            );
        }
        let notes = readelf(&["--notes"], &path);
        assert!(notes.contains("NT_AMDGPU_METADATA"), "{notes}");
        assert!(
            notes.lines().any(|l| l.starts_with("amdhsa.target:")
                && l.contains(&format!("amdgcn-amd-amdhsa--{id}"))),
            "{id}:\n{notes}"
        );

        let info = offload_format::image::amdgpu::inspect(&image).unwrap();
        assert_eq!(info.target, format!("amdgcn-amd-amdhsa--{id}"));
        let saxpy = info.kernels.iter().find(|k| k.name == "saxpy").unwrap();
        assert!(saxpy.has_descriptor_symbol);
        let args: Vec<(u64, u64, &str)> = saxpy
            .explicit_args()
            .map(|a| (a.offset, a.size, a.value_kind.as_str()))
            .collect();
        // saxpy(n: u32, a: f32, x: *const f32, y: *mut f32)
        assert_eq!(
            args,
            [
                (0, 4, "by_value"),
                (4, 4, "by_value"),
                (8, 8, "global_buffer"),
                (16, 8, "global_buffer")
            ]
        );
        assert_eq!(saxpy.group_segment_fixed_size, 0);
        assert!(saxpy.vgpr_count > 0 && saxpy.sgpr_count > 0, "{saxpy:?}");
        let block = info.kernels.iter().find(|k| k.name == "block_sum").unwrap();
        let args: Vec<(u64, u64, &str)> = block
            .explicit_args()
            .map(|a| (a.offset, a.size, a.value_kind.as_str()))
            .collect();
        // block_sum(input: *const u64, out: *mut u64, scale: i64)
        assert_eq!(
            args,
            [
                (0, 8, "global_buffer"),
                (8, 8, "global_buffer"),
                (16, 8, "by_value")
            ]
        );
        assert!(
            block.group_segment_fixed_size >= 2048,
            "the tile lands in LDS: {block:?}"
        );
    }
}

/// The real device API (`#[kernel]`, `shared_array!`, `sync_threads`, atomics) through the
/// device link: the reduction example's kernel crate.
#[test]
fn device_api_of_offload_rt_on_both_gpus() {
    if !nightly_ready() {
        return;
    }
    let manifest =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/reduce/kernels/Cargo.toml");
    let env = Env::detect();
    for arch in ["sm_80", "gfx942:xnack+"] {
        let target = device_link::parse_gpu_arch(arch).unwrap();
        let dir = target_dir().join(format!("reduce-{}", target.triple()));
        let inputs = common::nested_inputs(&env, &manifest, &target, &dir);
        let images = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
        for image in &images {
            assert!(
                image.kernels.iter().any(|k| k == "block_sum"),
                "{arch}: {:?}",
                image.kernels
            );
            assert_eq!(image.arch, arch);
            match image.kind {
                ImageKind::Ptx => {
                    let ptx = std::str::from_utf8(&image.bytes).unwrap();
                    assert!(
                        ptx.lines()
                            .any(|l| l.contains(".shared") && l.contains("[2048]")),
                        "{ptx}"
                    );
                    assert!(
                        ptx.contains("atom.global.add.u64")
                            || ptx.contains("red.global.add.u64")
                            || ptx.contains("atom.add.u64")
                            || ptx.contains("red.add.u64"),
                        "{ptx}"
                    );
                }
                ImageKind::Cubin => {
                    assert!(device_link::is_cubin(&image.bytes));
                    let (_, report) = device_link::ptxas_verbose(
                        std::str::from_utf8(&images.last().unwrap().bytes).unwrap(),
                        arch,
                    )
                    .unwrap();
                    assert_eq!(
                        report
                            .iter()
                            .find(|k| k.name == "block_sum")
                            .unwrap()
                            .shared_bytes,
                        2048
                    );
                    // The link's own `ptxas -v` run gave the same figures, carried by the
                    // cubin and the PTX alike.
                    assert_eq!(image.resources, report);
                    assert_eq!(images.last().unwrap().resources, report);
                }
                ImageKind::Object => {
                    let info = offload_format::image::amdgpu::inspect(&image.bytes).unwrap();
                    assert_eq!(info.e_flags, 0x74c);
                    let k = info.kernels.iter().find(|k| k.name == "block_sum").unwrap();
                    assert!(k.has_descriptor_symbol);
                    assert!(k.group_segment_fixed_size >= 2048, "{k:?}");
                    let args: Vec<(u64, u64, &str)> = k
                        .explicit_args()
                        .map(|a| (a.offset, a.size, a.value_kind.as_str()))
                        .collect();
                    // block_sum(n: u32, input: *const u32, out: *mut u64)
                    assert_eq!(
                        args,
                        [
                            (0, 4, "by_value"),
                            (8, 8, "global_buffer"),
                            (16, 8, "global_buffer")
                        ]
                    );
                }
                other => panic!("unexpected image kind {other:?}"),
            }
        }
        let expected =
            if matches!(target, OffloadArch::Nvptx(_)) && device_link::ptxas_path().is_some() {
                2
            } else {
                1
            };
        assert_eq!(images.len(), expected, "{arch}");
    }
}

/// Kernels as the CUDA samples write them (`tests/fixtures/cuda-samples`: `histogram256` with
/// per-warp sub-histograms and shared atomics, its merge, `histogram64`) link for every GPU
/// architecture: their shapes once made the device link's own pass pipelines stop LLVM with
/// an instruction-combining fixpoint error on NVIDIA.
#[test]
fn cuda_sample_kernels_link_for_every_gpu_architecture() {
    if !nightly_ready() {
        return;
    }
    let manifest =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda-samples/Cargo.toml");
    let env = Env::detect();
    let mut inputs: Vec<(&str, Vec<DeviceInput>)> = Vec::new();
    for arch in ["sm_80", "sm_90", "gfx90a", "gfx942", "gfx1100"] {
        let target = device_link::parse_gpu_arch(arch).unwrap();
        let triple = target.triple();
        if !inputs.iter().any(|(t, _)| *t == triple) {
            let dir = target_dir().join(format!("cuda-samples-{triple}"));
            inputs.push((
                triple,
                common::nested_inputs(&env, &manifest, &target, &dir),
            ));
        }
        let (_, family_inputs) = inputs.iter().find(|(t, _)| *t == triple).unwrap();
        let images = device_link::gpu_images(family_inputs, &target, &Default::default())
            .unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert!(!images.is_empty(), "{arch}: no image");
        for image in &images {
            for kernel in ["histogram256", "merge_histogram256", "histogram64"] {
                assert!(
                    image.kernels.iter().any(|k| k == kernel),
                    "{arch} {:?}: {kernel} missing from {:?}",
                    image.kind,
                    image.kernels
                );
            }
        }
    }
}

/// The machine code of `reduce`'s AMD images: the shared array is LDS (`ds_*`, no global access
/// besides the input load and the atomic), the barriers carry workgroup-scope fences (no L2
/// write-back or invalidate), and a reachable panic is `s_trap 2`.
#[test]
fn amdgpu_machine_code_of_reduce() {
    if !nightly_ready() || Tool::LlvmObjdump.for_test().is_none() {
        return;
    }
    let manifest =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/reduce/kernels/Cargo.toml");
    let env = Env::detect();
    let target = device_link::parse_gpu_arch("gfx90a").unwrap();
    let dir = target_dir().join(format!("reduce-{}", target.triple()));
    let inputs = common::nested_inputs(&env, &manifest, &target, &dir);
    let scratch = tempfile::tempdir().unwrap();
    for id in ["gfx90a", "gfx942", "gfx1100"] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let images = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
        let text = disassemble(&images[0].bytes, id, scratch.path());
        let body = function_body(&text, "block_sum");
        assert!(!body.is_empty(), "{id}: no block_sum in\n{text}");
        let all = body.join("\n");
        let count = |prefix: &str| body.iter().filter(|l| l.starts_with(prefix)).count();
        assert!(
            count("ds_write") + count("ds_store") > 0,
            "{id}: no LDS store:\n{all}"
        );
        assert!(
            count("ds_read") + count("ds_load") > 0,
            "{id}: no LDS load:\n{all}"
        );
        assert!(count("s_barrier") > 0, "{id}: no barrier:\n{all}");
        // The only global accesses: the input element and the atomic add to `out`.
        assert_eq!(
            count("global_store"),
            0,
            "{id}: a shared store went global:\n{all}"
        );
        assert!(
            count("global_load") <= 1,
            "{id}: a shared load went global:\n{all}"
        );
        // gfx90a/gfx942 write back (`buffer_wbl2`) and invalidate (`buffer_inv*`) L2 for a
        // system-scope fence, gfx1100 invalidates GL1 (`buffer_gl1_inv`); a workgroup-scope
        // fence needs at most gfx1100's `buffer_gl0_inv` (its workgroups span two CUs).
        for flush in [
            "buffer_wbl2",
            "buffer_inv",
            "buffer_wbinv",
            "buffer_gl1_inv",
        ] {
            assert_eq!(
                count(flush),
                0,
                "{id}: a system-scope fence ({flush}):\n{all}"
            );
        }
    }
}

/// Whether `kernel`'s panics end in `s_trap 2`, in its body: on AMD GPUs the report
/// (`kernel::gpu_channel::__offload_gpu_panic`) is inlined at each panic site.
fn panic_traps(disassembly: &str, kernel: &str) -> bool {
    whole_function(disassembly, kernel)
        .iter()
        .any(|l| l.starts_with("s_trap 2"))
}

/// A reachable panic in an AMD kernel ends the dispatch with a trap (`s_trap 2`), not with
/// `s_endpgm`, which would report success; the branch to it is scalar.
#[test]
fn amdgpu_panic_traps() {
    if !nightly_ready() || Tool::LlvmObjdump.for_test().is_none() {
        return;
    }
    let manifest =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rt-kernels/Cargo.toml");
    let target = device_link::parse_gpu_arch("gfx90a").unwrap();
    let dir = target_dir().join(format!("rt-kernels-{}", target.triple()));
    let inputs = common::nested_inputs(&Env::detect(), &manifest, &target, &dir);
    let scratch = tempfile::tempdir().unwrap();
    for id in ["gfx90a", "gfx1100"] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let images = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
        let text = disassemble(&images[0].bytes, id, scratch.path());
        assert!(
            panic_traps(&text, "lookup"),
            "{id}: lookup's bounds check reaches no s_trap 2:\n{text}"
        );
        // The check's branch is scalar, taken when any lane fails it (`vcc` holds the
        // compare's lanes); the report takes the first failing lane (its number found in the
        // mask, its values read from it), not the first lane that came.
        let lookup = whole_function(&text, "lookup");
        let has = |prefix: &str| lookup.iter().any(|l| l.starts_with(prefix));
        assert!(
            has("s_cbranch_vccz") || has("s_cbranch_vccnz"),
            "{id}: lookup's bounds check is not a scalar branch:\n{}",
            lookup.join("\n")
        );
        assert!(
            (has("s_ff1_i32_b") || has("s_ctz_i32_b")) && has("v_readlane_b32"),
            "{id}: lookup's report does not read the first failing lane:\n{}",
            lookup.join("\n")
        );
    }
}

/// Warp operations on NVIDIA: `shfl.sync` in its four modes and `vote.sync`, all with the full
/// mask, accepted by `ptxas` for sm_80 and sm_90.
#[test]
fn nvptx_warp_operations_are_shfl_sync() {
    if !nightly_ready() {
        return;
    }
    let target = device_link::parse_gpu_arch("sm_80").unwrap();
    let inputs = rt_fixture_inputs(&target);
    for sm in ["sm_80", "sm_90"] {
        let ptx = device_link::nvptx_link(&inputs, sm, &NvptxLinkOptions::default()).unwrap();
        let body = ptx_entry(&ptx, "warp_ops").join("\n");
        for op in [
            "shfl.sync.idx.b32",
            "shfl.sync.up.b32",
            "shfl.sync.down.b32",
            "shfl.sync.bfly.b32",
            "vote.sync.ballot.b32",
            "vote.sync.any.pred",
            "vote.sync.all.pred",
            "%laneid",
        ] {
            assert!(body.contains(op), "{sm}: no {op} in warp_ops:\n{body}");
        }
        for line in body
            .lines()
            .filter(|l| l.starts_with("shfl.sync") || l.starts_with("vote.sync"))
        {
            assert!(line.ends_with(", -1;"), "{sm}: not the full mask: {line}");
        }
        // The masked operations take the ballot's mask, a register, not the full mask.
        let masked = ptx_entry(&ptx, "masked_warp_sum").join("\n");
        for op in [
            "shfl.sync.down.b32",
            "shfl.sync.idx.b32",
            "vote.sync.ballot.b32",
            "vote.sync.any.pred",
            "vote.sync.all.pred",
            "bar.warp.sync",
        ] {
            assert!(
                masked.lines().any(|l| l.starts_with(op)
                    && l.trim_end_matches(';')
                        .ends_with(|c: char| c.is_ascii_digit())
                    && !l.ends_with(", -1;")
                    && !l.ends_with("\t-1;")),
                "{sm}: no {op} on a mask register in masked_warp_sum:\n{masked}"
            );
        }
        // `sync_warp` is the warp barrier, with the full mask; no block barrier.
        let sync_sum = ptx_entry(&ptx, "warp_sync_sum").join("\n");
        assert!(sync_sum.contains("bar.warp.sync \t-1;"), "{sm}: {sync_sum}");
        assert!(!sync_sum.contains("bar.sync"), "{sm}: {sync_sum}");
        // No shared memory: the warp reduction's only `.shared` is its array of warp sums.
        let block_sum = ptx_entry(&ptx, "warp_block_sum").join("\n");
        assert!(block_sum.contains("shfl.sync.bfly.b32"), "{block_sum}");
        if device_link::ptxas_path().is_some() {
            let (_, report) = device_link::ptxas_verbose(&ptx, sm).unwrap();
            let k = report.iter().find(|k| k.name == "warp_block_sum").unwrap();
            assert_eq!(k.shared_bytes, 32 * 8, "{report:?}");
        }
    }
}

/// Warp operations on AMD: `ds_bpermute_b32` for shuffles, `v_mbcnt` for the lane id, the
/// wave size of each processor (64 on gfx9, 32 on gfx11) folded into the code, and no LDS
/// for the shuffles themselves.
#[test]
fn amdgpu_warp_operations_are_ds_bpermute() {
    if !nightly_ready() || Tool::LlvmObjdump.for_test().is_none() {
        return;
    }
    let target = device_link::parse_gpu_arch("gfx90a").unwrap();
    let inputs = rt_fixture_inputs(&target);
    let scratch = tempfile::tempdir().unwrap();
    for (id, wave) in [("gfx90a", 64), ("gfx942", 64), ("gfx1100", 32)] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let images = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
        let info = offload_format::image::amdgpu::inspect(&images[0].bytes).unwrap();
        let k = info.kernels.iter().find(|k| k.name == "warp_ops").unwrap();
        assert_eq!(k.wavefront_size, wave, "{id}: {k:?}");
        assert_eq!(k.group_segment_fixed_size, 0, "{id}: shuffles need no LDS");
        let text = disassemble(&images[0].bytes, id, scratch.path());
        let body = function_body(&text, "warp_ops");
        let count = |prefix: &str| body.iter().filter(|l| l.starts_with(prefix)).count();
        assert!(count("ds_bpermute_b32") > 0, "{id}:\n{}", body.join("\n"));
        assert!(
            count("v_mbcnt_lo_u32_b32") > 0,
            "{id}:\n{}",
            body.join("\n")
        );
        // warp_ops stores warp_size() as the second word of each row: the constant (gfx11 may
        // pair its move with another, `v_dual_mov_b32`).
        assert!(
            body.iter()
                .any(|l| ["v_mov_b32", "s_mov_b32", "v_dual_mov_b32"]
                    .iter()
                    .any(|mov| l.starts_with(mov))
                    && l.contains(&format!(", {wave}"))),
            "{id}: the wave size {wave} is not a constant:\n{}",
            body.join("\n")
        );
        let block_sum = function_body(&text, "warp_block_sum");
        assert!(
            block_sum.iter().any(|l| l.starts_with("ds_bpermute_b32")),
            "{id}"
        );
        // The masked operations: shuffles as the others, the ballots ANDed with the mask.
        let masked = function_body(&text, "masked_warp_sum");
        assert!(
            masked.iter().any(|l| l.starts_with("ds_bpermute_b32"))
                && !masked.iter().any(|l| l.starts_with("s_barrier")),
            "{id}:\n{}",
            masked.join("\n")
        );
        // `sync_warp` orders LDS accesses within the wavefront: no workgroup barrier.
        let sync_sum = function_body(&text, "warp_sync_sum");
        assert!(
            sync_sum
                .iter()
                .any(|l| l.starts_with("ds_read") || l.starts_with("ds_load"))
                && !sync_sum.iter().any(|l| l.starts_with("s_barrier")),
            "{id}:\n{}",
            sync_sum.join("\n")
        );
    }
}

/// Dynamic shared memory: NVIDIA's `.extern .shared` array (ptxas counts only the static
/// bytes); on AMD LDS accesses (`ds_*`, no flat access), the static LDS alone in
/// `.group_segment_fixed_size` (code object V5 has no dynamic-LDS field: the runtime adds the
/// launch's dynamic size to it) and the dynamic area addressed from the static size on.
#[test]
fn dynamic_shared_memory_is_extern_shared_and_lds() {
    if !nightly_ready() || Tool::LlvmObjdump.for_test().is_none() {
        return;
    }
    let target = device_link::parse_gpu_arch("sm_80").unwrap();
    let inputs = rt_fixture_inputs(&target);
    let ptx = device_link::nvptx_link(&inputs, "sm_90", &NvptxLinkOptions::default()).unwrap();
    assert!(
        ptx.lines().any(|l| l.trim()
            == ".extern .shared .align 16 .b8 __offload_dynamic_shared_memory[];"),
        "{ptx}"
    );
    let body = ptx_entry(&ptx, "reverse_dynamic").join("\n");
    assert!(
        body.contains("st.shared") && body.contains("ld.shared"),
        "{body}"
    );
    if device_link::ptxas_path().is_some() {
        let (_, report) = device_link::ptxas_verbose(&ptx, "sm_90").unwrap();
        let k = report.iter().find(|k| k.name == "reverse_dynamic").unwrap();
        assert_eq!(k.shared_bytes, 16, "{report:?}");
    }

    let target = device_link::parse_gpu_arch("gfx90a").unwrap();
    let inputs = rt_fixture_inputs(&target);
    let scratch = tempfile::tempdir().unwrap();
    for id in ["gfx90a", "gfx942", "gfx1100"] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let images = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
        let path = scratch.path().join(format!("{id}.elf"));
        std::fs::write(&path, &images[0].bytes).unwrap();
        let notes = readelf(&["--notes"], &path);
        assert!(
            notes.contains(".name:           reverse_dynamic"),
            "{notes}"
        );
        let info = offload_format::image::amdgpu::inspect(&images[0].bytes).unwrap();
        let k = info
            .kernels
            .iter()
            .find(|k| k.name == "reverse_dynamic")
            .unwrap();
        assert_eq!(k.group_segment_fixed_size, 16, "{id}: {k:?}");
        let text = disassemble(&images[0].bytes, id, scratch.path());
        let body = function_body(&text, "reverse_dynamic");
        let all = body.join("\n");
        let count = |prefix: &str| body.iter().filter(|l| l.starts_with(prefix)).count();
        assert!(count("ds_write") + count("ds_store") >= 2, "{id}:\n{all}");
        assert!(count("ds_read") + count("ds_load") >= 2, "{id}:\n{all}");
        assert_eq!(
            count("global_store"),
            1,
            "{id}: only `data` is global:\n{all}"
        );
        assert_eq!(count("flat_"), 0, "{id}: a flat access:\n{all}");
        // Dynamic LDS starts where the static LDS (16 bytes) ends.
        assert!(
            body.iter()
                .any(|l| l.contains("add") && l.split([' ', ',']).any(|w| w == "16")),
            "{id}: no address past the static LDS:\n{all}"
        );
    }
}

/// Structs by value: the PTX parameters and the AMD kernel arguments have the Rust layout of
/// `struct_params(tag: u8, p: Params, q: Pair, out: *mut f64)` (Params: 40 bytes, 8-aligned;
/// Pair: 4 bytes, 2-aligned), and tuples that of their elements' `#[repr(C)]` struct, as the
/// launch ABI lays them out: NVIDIA's `byval` parameters,
/// AMD's `byref` kernel arguments (`by_value` in the metadata, at the aligned offsets).
#[test]
fn struct_parameters_have_the_rust_layout() {
    if !nightly_ready() {
        return;
    }
    let target = device_link::parse_gpu_arch("sm_80").unwrap();
    let inputs = rt_fixture_inputs(&target);
    for sm in ["sm_80", "sm_90"] {
        let ptx = device_link::nvptx_link(&inputs, sm, &NvptxLinkOptions::default()).unwrap();
        let entry = ptx_entry(&ptx, "struct_params");
        let params: Vec<&str> = entry
            .iter()
            .filter(|l| l.starts_with(".param"))
            .copied()
            .collect();
        assert_eq!(
            params,
            [
                ".param .u8 struct_params_param_0,",
                ".param .align 8 .b8 struct_params_param_1[40],",
                ".param .align 2 .b8 struct_params_param_2[4],",
                ".param .u64 .ptr .align 1 struct_params_param_3",
            ],
            "{sm}"
        );
        // 128-bit integers by value: 16 bytes, aligned as Rust aligns them.
        let wide: Vec<&str> = ptx_entry(&ptx, "wide_ints")
            .into_iter()
            .filter(|l| l.starts_with(".param"))
            .take(2)
            .collect();
        assert_eq!(
            wide,
            [
                ".param .align 16 .b8 wide_ints_param_0[16],",
                ".param .align 16 .b8 wide_ints_param_1[16],",
            ],
            "{sm}"
        );
        // Tuples by value: their elements' `#[repr(C)]` struct, padding included.
        let tuples: Vec<&str> = ptx_entry(&ptx, "tuple_params")
            .into_iter()
            .filter(|l| l.starts_with(".param"))
            .take(3)
            .collect();
        assert_eq!(
            tuples,
            [
                ".param .align 4 .b8 tuple_params_param_0[8],",
                ".param .align 8 .b8 tuple_params_param_1[16],",
                ".param .align 2 .b8 tuple_params_param_2[10],",
            ],
            "{sm}"
        );
        // A cooperative kernel: its `Grid` (the barrier's address) first; the grid barrier
        // an atomic add on device memory between device-wide fences, in a function of its
        // own.
        let grid: Vec<&str> = ptx_entry(&ptx, "grid_rounds")
            .into_iter()
            .filter(|l| l.starts_with(".param"))
            .take(1)
            .collect();
        assert_eq!(
            grid,
            [".param .align 8 .b8 grid_rounds_param_0[8],"],
            "{sm}"
        );
        // The function's definition: from its `.func` line (not the declaration's, which ends
        // in `;`) to its closing brace.
        let sync: String = ptx
            .split("\n.func")
            .filter(|f| {
                f.split_once('\n')
                    .is_some_and(|(head, _)| head.contains("gpu_sync"))
            })
            .find_map(|f| {
                let body = f.split_once("\n{")?.1;
                Some(body.split("\n}").next().unwrap_or(body).to_owned())
            })
            .unwrap_or_else(|| panic!("{sm}: no grid barrier function"));
        assert!(
            sync.contains("atom.add") || sync.contains("atom.global.add"),
            "{sm}: {sync}"
        );
        assert!(
            sync.contains("fence.sc") || sync.contains("membar"),
            "{sm}: {sync}"
        );
        assert!(sync.contains("bar.sync"), "{sm}: {sync}");
        if device_link::ptxas_path().is_some() {
            device_link::ptxas_verbose(&ptx, sm).unwrap();
        }
    }
    let target = device_link::parse_gpu_arch("gfx90a").unwrap();
    let inputs = rt_fixture_inputs(&target);
    for id in ["gfx90a", "gfx942", "gfx1100"] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let images = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
        let info = offload_format::image::amdgpu::inspect(&images[0].bytes).unwrap();
        let k = info
            .kernels
            .iter()
            .find(|k| k.name == "struct_params")
            .unwrap();
        assert!(k.has_descriptor_symbol);
        let args: Vec<(u64, u64, &str)> = k
            .explicit_args()
            .map(|a| (a.offset, a.size, a.value_kind.as_str()))
            .collect();
        assert_eq!(
            args,
            [
                (0, 1, "by_value"),
                (8, 40, "by_value"),
                (48, 4, "by_value"),
                (56, 8, "global_buffer")
            ],
            "{id}"
        );
        let wide = info.kernels.iter().find(|k| k.name == "wide_ints").unwrap();
        let args: Vec<(u64, u64)> = wide
            .explicit_args()
            .take(2)
            .map(|a| (a.offset, a.size))
            .collect();
        assert_eq!(args, [(0, 16), (16, 16)], "{id}: {wide:?}");
        let tuples = info
            .kernels
            .iter()
            .find(|k| k.name == "tuple_params")
            .unwrap();
        let args: Vec<(u64, u64, &str)> = tuples
            .explicit_args()
            .take(3)
            .map(|a| (a.offset, a.size, a.value_kind.as_str()))
            .collect();
        assert_eq!(
            args,
            [
                (0, 8, "by_value"),
                (8, 16, "by_value"),
                (24, 10, "by_value")
            ],
            "{id}: {tuples:?}"
        );
        let grid = info
            .kernels
            .iter()
            .find(|k| k.name == "grid_rounds")
            .unwrap();
        let first = grid.explicit_args().next().unwrap();
        assert_eq!(
            (first.offset, first.size, first.value_kind.as_str()),
            (0, 8, "by_value"),
            "{id}: {grid:?}"
        );
        // Scalars keep their layout through the same path.
        let saxpy = info.kernels.iter().find(|k| k.name == "saxpy").unwrap();
        let args: Vec<(u64, u64, &str)> = saxpy
            .explicit_args()
            .map(|a| (a.offset, a.size, a.value_kind.as_str()))
            .collect();
        assert_eq!(
            args,
            [
                (0, 4, "by_value"),
                (4, 4, "by_value"),
                (8, 8, "global_buffer"),
                (16, 8, "global_buffer")
            ],
            "{id}"
        );
    }
}

/// A generic kernel (`axpy_tiled<T, const BLOCK: usize>`, six instantiations): each is an
/// entry point of its own on both GPUs, its scalar parameter of its type and its shared tile
/// of `BLOCK` elements of it.
#[test]
fn generic_kernel_instantiations_are_entry_points() {
    if !nightly_ready() {
        return;
    }
    let instances = [
        ("axpy_tiled__f32__64", 4, 256),
        ("axpy_tiled__f32__128", 4, 512),
        ("axpy_tiled__f64__64", 8, 512),
        ("axpy_tiled__f64__128", 8, 1024),
        ("axpy_tiled__u32__64", 4, 256),
        ("axpy_tiled__u32__128", 4, 512),
    ];
    let target = device_link::parse_gpu_arch("sm_80").unwrap();
    let inputs = rt_fixture_inputs(&target);
    let ptx = device_link::nvptx_link(&inputs, "sm_80", &NvptxLinkOptions::default()).unwrap();
    for (name, size, shared) in instances {
        let entry = ptx_entry(&ptx, name);
        let kind = match name.split("__").nth(1) {
            Some("f32") => ".f32",
            Some("f64") => ".f64",
            _ => ".u32",
        };
        assert_eq!(
            entry.get(1).copied(),
            Some(format!(".param {kind} {name}_param_0,").as_str()),
            "{name}: {size}-byte scalar: {entry:?}"
        );
        if device_link::ptxas_path().is_some() {
            let (_, report) = device_link::ptxas_verbose(&ptx, "sm_80").unwrap();
            let k = report.iter().find(|k| k.name == name).unwrap();
            assert_eq!(k.shared_bytes, shared, "{name}: {k:?}");
        }
    }
    let target = device_link::parse_gpu_arch("gfx90a").unwrap();
    let inputs = rt_fixture_inputs(&target);
    for id in ["gfx90a", "gfx1100"] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let images = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
        let info = offload_format::image::amdgpu::inspect(&images[0].bytes).unwrap();
        for (name, size, shared) in instances {
            let k = info.kernels.iter().find(|k| k.name == name).unwrap();
            assert_eq!(k.group_segment_fixed_size, shared, "{id} {name}: {k:?}");
            assert_eq!(
                k.explicit_args().next().map(|a| (a.offset, a.size)),
                Some((0, size)),
                "{id} {name}: {k:?}"
            );
        }
    }
}

/// `generic_shared_array!` in a generic helper, instantiated twice at one size: each
/// instantiation's tile is its own global in the shared address space, read and written with
/// shared-memory instructions, and no call of the placeholder is left.
#[test]
fn generic_helpers_get_a_shared_tile_per_instantiation() {
    if !nightly_ready() {
        return;
    }
    let target = device_link::parse_gpu_arch("sm_80").unwrap();
    let inputs = rt_fixture_inputs(&target);
    let ptx = device_link::nvptx_link(&inputs, "sm_80", &NvptxLinkOptions::default()).unwrap();
    assert!(!ptx.contains(abi::GENERIC_TILE_FUNCTION), "{ptx}");
    let entry = ptx_entry(&ptx, "generic_tiles");
    let count = |op: &str| entry.iter().filter(|l| l.starts_with(op)).count();
    assert_eq!(count("st.shared"), 2, "{entry:#?}");
    assert_eq!(count("ld.shared"), 2, "{entry:#?}");
    if device_link::ptxas_path().is_some() {
        let (_, report) = device_link::ptxas_verbose(&ptx, "sm_80").unwrap();
        let k = report.iter().find(|k| k.name == "generic_tiles").unwrap();
        assert_eq!(k.shared_bytes, 512, "{k:?}");
    }
    let target = device_link::parse_gpu_arch("gfx90a").unwrap();
    let inputs = rt_fixture_inputs(&target);
    for id in ["gfx90a", "gfx1100"] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let images = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
        let info = offload_format::image::amdgpu::inspect(&images[0].bytes).unwrap();
        let k = info
            .kernels
            .iter()
            .find(|k| k.name == "generic_tiles")
            .unwrap();
        assert_eq!(k.group_segment_fixed_size, 512, "{id}: {k:?}");
    }
}

/// `constant!` statics: NVIDIA's constant bank (`.const`, read with `ld.const`), and an AMD
/// code object that holds the kernel.
#[test]
fn constant_statics_are_constant_memory() {
    if !nightly_ready() {
        return;
    }
    let target = device_link::parse_gpu_arch("sm_80").unwrap();
    let inputs = rt_fixture_inputs(&target);
    let ptx = device_link::nvptx_link(&inputs, "sm_80", &NvptxLinkOptions::default()).unwrap();
    assert!(
        ptx.lines().any(|l| l.starts_with(".const .align 4 .b8 ")
            && l.contains("SQUARES")
            && l.contains("[1024] = {0, 0, 0, 0, 1, 0, 0, 0, 4,")),
        "no SQUARES in the constant bank"
    );
    let body = ptx_entry(&ptx, "constant_tables").join("\n");
    assert!(body.contains("ld.const."), "{body}");
    if device_link::ptxas_path().is_some() {
        device_link::ptxas_verbose(&ptx, "sm_80").unwrap();
    }
    let target = device_link::parse_gpu_arch("gfx90a").unwrap();
    let inputs = rt_fixture_inputs(&target);
    let images = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
    let info = offload_format::image::amdgpu::inspect(&images[0].bytes).unwrap();
    assert!(info.kernels.iter().any(|k| k.name == "constant_tables"));
}

/// Half-precision atomics: NVIDIA's native `f16` add (sm_70 on) and `bf16` add (sm_90 on),
/// a compare-and-swap loop for `bf16` on sm_80; AMD images built (a loop where the processor
/// has no such add).
#[test]
fn half_atomics_are_native_where_the_gpu_has_them() {
    if !nightly_ready() {
        return;
    }
    let target = device_link::parse_gpu_arch("sm_80").unwrap();
    let inputs = rt_fixture_inputs(&target);
    for sm in ["sm_80", "sm_90"] {
        let ptx = device_link::nvptx_link(&inputs, sm, &NvptxLinkOptions::default()).unwrap();
        let body = ptx_entry(&ptx, "half_histogram").join("\n");
        assert!(body.contains(".add.noftz.f16"), "{sm}:\n{body}");
        if sm == "sm_90" {
            assert!(body.contains(".add.noftz.bf16"), "{sm}:\n{body}");
        } else {
            assert!(
                body.contains("atom.") && body.contains(".cas."),
                "{sm}:\n{body}"
            );
        }
        if device_link::ptxas_path().is_some() {
            device_link::ptxas_verbose(&ptx, sm).unwrap();
        }
    }
    let target = device_link::parse_gpu_arch("gfx90a").unwrap();
    let inputs = rt_fixture_inputs(&target);
    for id in ["gfx90a", "gfx942", "gfx1100"] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let images = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
        let info = offload_format::image::amdgpu::inspect(&images[0].bytes).unwrap();
        assert!(
            info.kernels.iter().any(|k| k.name == "half_histogram"),
            "{id}"
        );
    }
}

/// `bool` and a `#[repr(u16)]` enum by value (`combine_flags(flag: bool, mode: Combine, …)`):
/// one byte and two, as the launch writes them, on both GPUs.
#[test]
fn bool_and_enum_parameters_have_their_size() {
    if !nightly_ready() {
        return;
    }
    let target = device_link::parse_gpu_arch("sm_80").unwrap();
    let inputs = rt_fixture_inputs(&target);
    for sm in ["sm_80", "sm_90"] {
        let ptx = device_link::nvptx_link(&inputs, sm, &NvptxLinkOptions::default()).unwrap();
        let params: Vec<&str> = ptx_entry(&ptx, "combine_flags")
            .into_iter()
            .filter(|l| l.starts_with(".param"))
            .take(2)
            .collect();
        assert_eq!(
            params,
            [
                ".param .u8 combine_flags_param_0,",
                ".param .u16 combine_flags_param_1,",
            ],
            "{sm}"
        );
        if device_link::ptxas_path().is_some() {
            device_link::ptxas_verbose(&ptx, sm).unwrap();
        }
    }
    let target = device_link::parse_gpu_arch("gfx90a").unwrap();
    let inputs = rt_fixture_inputs(&target);
    for id in ["gfx90a", "gfx942", "gfx1100"] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let images = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
        let info = offload_format::image::amdgpu::inspect(&images[0].bytes).unwrap();
        let k = info
            .kernels
            .iter()
            .find(|k| k.name == "combine_flags")
            .unwrap();
        let args: Vec<(u64, u64, &str)> = k
            .explicit_args()
            .take(3)
            .map(|a| (a.offset, a.size, a.value_kind.as_str()))
            .collect();
        assert_eq!(
            args,
            [(0, 1, "by_value"), (2, 2, "by_value"), (8, 16, "by_value")],
            "{id}: {k:?}"
        );
    }
}

/// Slice parameters: `&[T]` and `DisjointSlice<T>` cross as 16 bytes, address then length
/// (NVIDIA `byval` parameters, AMD `by_value` kernel arguments at 8-aligned offsets), as the
/// host's `SliceParam` writes them; a bad index reaches the trap.
#[test]
fn slice_parameters_are_address_and_length() {
    if !nightly_ready() {
        return;
    }
    let target = device_link::parse_gpu_arch("sm_80").unwrap();
    let inputs = rt_fixture_inputs(&target);
    for sm in ["sm_80", "sm_90"] {
        let ptx = device_link::nvptx_link(&inputs, sm, &NvptxLinkOptions::default()).unwrap();
        let entry = ptx_entry(&ptx, "saxpy_slices");
        let params: Vec<&str> = entry
            .iter()
            .filter(|l| l.starts_with(".param") && l.contains("saxpy_slices_param_"))
            .copied()
            .collect();
        assert_eq!(
            params,
            [
                ".param .f32 saxpy_slices_param_0,",
                ".param .align 8 .b8 saxpy_slices_param_1[16],",
                ".param .align 8 .b8 saxpy_slices_param_2[16]",
            ],
            "{sm}"
        );
        assert!(
            entry
                .iter()
                .any(|l| l.starts_with("call.uni") && l.contains(abi::GPU_PANIC)),
            "{sm}: the bounds check of `x[i]` reaches no panic report:\n{}",
            entry.join("\n")
        );
        // The slices' elements are global memory, as a CUDA C kernel's pointer parameters.
        let generic: Vec<&&str> = entry
            .iter()
            .filter(|l| l.starts_with("ld.b") || l.starts_with("st.b"))
            .collect();
        assert!(generic.is_empty(), "{sm}: generic accesses {generic:?}");
        assert!(
            entry.iter().any(|l| l.starts_with("ld.global."))
                && entry.iter().any(|l| l.starts_with("st.global.")),
            "{sm}: no global access:\n{}",
            entry.join("\n")
        );
        assert!(
            ptx.lines().any(|l| l.trim().starts_with("trap;")),
            "{sm}: no trap"
        );
        if device_link::ptxas_path().is_some() {
            device_link::ptxas_verbose(&ptx, sm).unwrap();
        }
    }
    let target = device_link::parse_gpu_arch("gfx90a").unwrap();
    let inputs = rt_fixture_inputs(&target);
    let scratch = tempfile::tempdir().unwrap();
    for id in ["gfx90a", "gfx1100"] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let images = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
        let info = offload_format::image::amdgpu::inspect(&images[0].bytes).unwrap();
        for (kernel, first) in [("saxpy_slices", 4), ("copy_offset", 4)] {
            let k = info.kernels.iter().find(|k| k.name == kernel).unwrap();
            let args: Vec<(u64, u64, &str)> = k
                .explicit_args()
                .map(|a| (a.offset, a.size, a.value_kind.as_str()))
                .collect();
            assert_eq!(
                args,
                [
                    (0, first, "by_value"),
                    (8, 16, "by_value"),
                    (24, 16, "by_value")
                ],
                "{id}: {kernel}"
            );
        }
        let all = disassemble(&images[0].bytes, id, scratch.path());
        assert!(
            panic_traps(&all, "copy_offset"),
            "{id}: the bounds check of `input[i]` ends in no s_trap 2"
        );
    }
}

/// Math on NVIDIA: `kernel::math`'s sqrt, fma, floor, abs, min and max are PTX instructions
/// (correctly rounded `.rn` forms), exp/log/sin/cos/pow and the kernel crate's own `libm`
/// calls are linked in, so the module declares no external function, and `ptxas` accepts it.
#[test]
fn nvptx_math_is_native_and_self_contained() {
    if !nightly_ready() {
        return;
    }
    let target = device_link::parse_gpu_arch("sm_80").unwrap();
    let inputs = rt_fixture_inputs(&target);
    for sm in ["sm_80", "sm_90"] {
        let ptx = device_link::nvptx_link(&inputs, sm, &NvptxLinkOptions::default()).unwrap();
        let externs: Vec<&str> = ptx
            .lines()
            .filter(|l| l.contains(".extern .func"))
            .collect();
        assert!(externs.is_empty(), "{sm}: unresolved calls: {externs:?}");
        for (kernel, t) in [("math_f32", "f32"), ("math_f64", "f64")] {
            let body = ptx_entry(&ptx, kernel).join("\n");
            assert!(!body.is_empty(), "{sm}: no {kernel}");
            for op in [
                format!("sqrt.rn.{t}"),
                format!("fma.rn.{t}"),
                format!("cvt.rmi.{t}.{t}"),
                format!("abs.{t}"),
                format!("min.{t}"),
                format!("max.{t}"),
                format!("div.rn.{t}"),
            ] {
                assert!(body.contains(&op), "{sm}: no {op} in {kernel}:\n{body}");
            }
            // Only the hardware's correctly rounded operations: no approximation.
            assert!(!body.contains(".approx"), "{sm}: {kernel}:\n{body}");
        }
        assert!(ptx.contains(".entry libm_direct("), "{sm}");
        if device_link::ptxas_path().is_some() {
            device_link::ptxas_verbose(&ptx, sm).unwrap();
        }
    }
}

/// Math on AMD: the same functions are VALU instructions (`v_sqrt_f32` in the correctly
/// rounded f32 square root, `v_rsq_f64` in the f64 one, `v_fma_*`, `v_floor_*`, `v_min_*`,
/// `v_max_*`), and the code object has no undefined symbol (the software functions and the
/// kernel crate's own `libm` calls are linked in).
#[test]
fn amdgpu_math_is_native_and_self_contained() {
    if !nightly_ready() || Tool::LlvmObjdump.for_test().is_none() {
        return;
    }
    let target = device_link::parse_gpu_arch("gfx90a").unwrap();
    let inputs = rt_fixture_inputs(&target);
    let scratch = tempfile::tempdir().unwrap();
    for id in ["gfx90a", "gfx942", "gfx1100"] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let images = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
        let path = scratch.path().join(format!("{id}-symbols.elf"));
        std::fs::write(&path, &images[0].bytes).unwrap();
        let symbols = readelf(&["-s", "-W"], &path);
        let undefined: Vec<&str> = symbols
            .lines()
            .filter(|l| l.contains(" UND ") && !l.trim_end().ends_with("UND"))
            .collect();
        assert!(
            undefined.is_empty(),
            "{id}: undefined symbols {undefined:?}"
        );
        let text = disassemble(&images[0].bytes, id, scratch.path());
        for (kernel, ops) in [
            (
                "math_f32",
                [
                    "v_sqrt_f32",
                    "v_fma_f32",
                    "v_floor_f32",
                    "v_min_f32",
                    "v_max_f32",
                ],
            ),
            (
                "math_f64",
                [
                    "v_rsq_f64",
                    "v_fma_f64",
                    "v_floor_f64",
                    "v_min_f64",
                    "v_max_f64",
                ],
            ),
        ] {
            let body = function_body(&text, kernel);
            assert!(!body.is_empty(), "{id}: no {kernel}");
            for op in ops {
                assert!(
                    body.iter().any(|l| l.starts_with(op)),
                    "{id}: no {op} in {kernel}:\n{}",
                    body.join("\n")
                );
            }
        }
        let info = offload_format::image::amdgpu::inspect(&images[0].bytes).unwrap();
        assert!(info.kernels.iter().any(|k| k.name == "libm_direct"), "{id}");
    }
}

/// Panics and prints on GPUs go through the channel global the runtime writes after loading
/// (`offload_rt::kernel::abi::CHANNEL_SYMBOL`): it stays one external 8-byte global the driver
/// can find (`.visible .global` in PTX and a symbol of the cubin; a protected symbol of the AMD
/// code object), however many times the link pulls in the runtime's code, and its address is
/// read as the invariant it is during a launch (the read-only data path on NVIDIA); a panic
/// claims the report with a system-scope compare-and-swap and fences before it traps; a print
/// reserves its record with an atomic add.
#[test]
fn panics_and_prints_use_the_channel() {
    if !nightly_ready() {
        return;
    }
    let target = device_link::parse_gpu_arch("sm_80").unwrap();
    let inputs = rt_fixture_inputs(&target);
    let scratch = tempfile::tempdir().unwrap();
    for sm in ["sm_80", "sm_90"] {
        let ptx = device_link::nvptx_link(&inputs, sm, &NvptxLinkOptions::default()).unwrap();
        let globals: Vec<&str> = ptx
            .lines()
            .filter(|l| l.starts_with(".") && l.contains(" .global ") && l.contains(abi::CHANNEL))
            .collect();
        assert_eq!(
            globals,
            [".visible .global .align 8 .b8 __offload_channel[8];"],
            "{sm}"
        );
        let loads = ptx
            .lines()
            .filter(|l| l.contains("ld.global.nc.b64") && l.contains("[__offload_channel]"))
            .count();
        assert!(loads >= 2, "{sm}: print and panic each read the channel");
        // The channel is global memory; a thread claims the record with one OR of the
        // writing state's bit (`atom.global.or.b32 %r, [%rd], 1;`).
        assert!(
            ptx.lines().any(|l| {
                let l = l.trim();
                l.starts_with("atom.global.or.b32") && l.ends_with("], 1;")
            }),
            "{sm}: no atomic OR of global memory in the panic path"
        );
        for needle in ["fence.sc.sys;", "trap;"] {
            assert!(
                ptx.lines().any(|l| l.trim().starts_with(needle)),
                "{sm}: no `{needle}` in the panic path"
            );
        }
        assert!(
            ptx.lines().any(|l| l.trim().starts_with("atom.add.u64")
                || l.trim().starts_with("atom.global.add.u64")),
            "{sm}: a print reserves no record"
        );
        if device_link::ptxas_path().is_some() {
            let (cubin, _) = device_link::ptxas_verbose(&ptx, sm).unwrap();
            let path = scratch.path().join(format!("{sm}.cubin"));
            std::fs::write(&path, cubin).unwrap();
            let symbols = readelf(&["-s"], &path);
            assert!(
                symbols.lines().any(|l| l.contains("OBJECT")
                    && l.contains("GLOBAL")
                    && l.trim_end().ends_with(" __offload_channel")),
                "{sm}: the cubin has no global __offload_channel:\n{symbols}"
            );
        }
    }
    let target = device_link::parse_gpu_arch("gfx90a").unwrap();
    let inputs = rt_fixture_inputs(&target);
    for id in ["gfx90a", "gfx1100"] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let images = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
        let path = scratch.path().join(format!("{id}.co"));
        std::fs::write(&path, &images[0].bytes).unwrap();
        let symbols = readelf(&["--dyn-syms"], &path);
        let channel: Vec<Vec<&str>> = symbols
            .lines()
            .filter(|l| l.contains(abi::CHANNEL))
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(channel.len(), 1, "{id}:\n{symbols}");
        assert_eq!(
            channel[0][2..7],
            ["8", "OBJECT", "GLOBAL", "PROTECTED", channel[0][6]],
            "{id}"
        );
        assert_eq!(channel[0][7], abi::CHANNEL, "{id}");
        let all = disassemble(&images[0].bytes, id, scratch.path());
        // The report is inlined at the panic site on AMD GPUs.
        let panic = whole_function(&all, "print_then_panic");
        assert!(
            panic.iter().any(|l| l.contains("atomic_cmpswap")),
            "{id}: the panic claims no report:\n{}",
            panic.join("\n")
        );
        // The whole wavefront reports its first panicking lane: the values are that lane's.
        assert!(
            panic.iter().any(|l| l.starts_with("v_readfirstlane_b32")),
            "{id}: the report does not take the first lane's values:\n{}",
            panic.join("\n")
        );
        if id == "gfx90a" {
            assert!(
                panic.iter().any(|l| l.starts_with("buffer_wbl2")),
                "{id}: the report is not written back to memory before the trap"
            );
        }
        // The print is inlined into the kernel on AMD GPUs.
        let print = whole_function(&all, "print_values");
        assert!(
            print
                .iter()
                .any(|l| l.contains("atomic_add_x2") || l.contains("atomic_add_u64")),
            "{id}: a print reserves no record:\n{}",
            print.join("\n")
        );
        assert!(
            panic.iter().any(|l| l.starts_with("s_trap 2")),
            "{id}: a panic does not trap"
        );
    }
}

/// With `panic = "trap"` a kernel that can panic keeps its checks and ends in the device's
/// trap (NVIDIA `trap;`, AMD `s_trap 2`), without a report: no reporter, no panic-site table,
/// no access to the channel. The fixture's `panic_kinds` panics in eight ways (a bounds check,
/// `expect`, `assert_eq!`, a division by zero, a formatted message, `unwrap`, a slice range,
/// `panic!`), all of which trap; prints still go through the channel. Linked with
/// `report`, the same kernel reads the channel, so the checks below can fail.
#[test]
fn the_trap_strategy_ends_panics_in_a_trap_without_a_report() {
    if !nightly_ready() {
        return;
    }
    let trap = GpuLinkOptions {
        panic: PanicStrategy::Trap,
        ..GpuLinkOptions::default()
    };
    let nvptx_trap = NvptxLinkOptions {
        panic: PanicStrategy::Trap,
        ..NvptxLinkOptions::default()
    };
    let target = device_link::parse_gpu_arch("sm_80").unwrap();
    let inputs = rt_fixture_inputs(&target);
    for sm in ["sm_80", "sm_90"] {
        let report = device_link::nvptx_link(&inputs, sm, &NvptxLinkOptions::default()).unwrap();
        let reads_channel = |body: &[&str]| body.iter().any(|l| l.contains("[__offload_channel]"));
        assert!(
            reads_channel(&ptx_entry(&report, "panic_kinds")),
            "{sm}: with `report`, panic_kinds reads no channel"
        );
        let ptx = device_link::nvptx_link(&inputs, sm, &nvptx_trap).unwrap();
        let body = ptx_entry(&ptx, "panic_kinds");
        assert!(!body.is_empty(), "{sm}: no panic_kinds in the PTX");
        assert!(
            body.iter().any(|l| l.starts_with("trap;")),
            "{sm}: panic_kinds has no trap:\n{}",
            body.join("\n")
        );
        assert!(!reads_channel(&body), "{sm}: {}", body.join("\n"));
        assert!(
            !body.iter().any(|l| l.starts_with("call")),
            "{sm}: panic_kinds calls something:\n{}",
            body.join("\n")
        );
        // The checks are kept: the bounds check compares against the slice's length.
        assert!(
            body.iter().any(|l| l.starts_with("setp.")),
            "{sm}: panic_kinds tests nothing"
        );
        assert!(
            !ptx.contains(abi::GPU_PANIC),
            "{sm}: a reporter is left in the PTX"
        );
        assert!(
            !ptx.contains(panic_sites::SYMBOL),
            "{sm}: a panic-site table is left in the PTX"
        );
        // Prints (out of line on NVIDIA) still write to the channel.
        assert!(
            reads_channel(&ptx.lines().collect::<Vec<_>>()),
            "{sm}: nothing prints through the channel any more"
        );
        let images = device_link::gpu_images(&inputs, &target, &trap).unwrap();
        let image_ptx = images.iter().find(|i| i.kind == ImageKind::Ptx).unwrap();
        if sm == "sm_80" {
            assert_eq!(String::from_utf8_lossy(&image_ptx.bytes), ptx);
        }
        if device_link::ptxas_path().is_some() {
            device_link::ptxas_verbose(&ptx, sm).unwrap();
        }
    }
    let target = device_link::parse_gpu_arch("gfx90a").unwrap();
    let inputs = rt_fixture_inputs(&target);
    if Tool::LlvmObjdump.for_test().is_none() {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let mentions_channel = |body: &[&str]| body.iter().any(|l| l.contains(abi::CHANNEL));
    for id in ["gfx90a", "gfx1100"] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let report = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
        let all = disassemble(&report[0].bytes, id, scratch.path());
        let body = whole_function(&all, "panic_kinds");
        assert!(
            mentions_channel(&body) || body.iter().any(|l| l.contains("atomic_cmpswap")),
            "{id}: with `report`, panic_kinds writes no report:\n{}",
            body.join("\n")
        );
        let images = device_link::gpu_images(&inputs, &target, &trap).unwrap();
        let all = disassemble(&images[0].bytes, id, scratch.path());
        let body = whole_function(&all, "panic_kinds");
        assert!(
            body.iter().any(|l| l.starts_with("s_trap 2")),
            "{id}: panic_kinds has no s_trap 2:\n{}",
            body.join("\n")
        );
        // The report's claim is its one atomic.
        assert!(
            !mentions_channel(&body) && !body.iter().any(|l| l.contains("atomic")),
            "{id}: panic_kinds keeps a report:\n{}",
            body.join("\n")
        );
        assert!(
            body.iter()
                .any(|l| l.starts_with("s_endpgm") || l.starts_with("s_setpc_b64")),
            "{id}: panic_kinds does not end"
        );
        let path = scratch.path().join(format!("{id}-trap.co"));
        std::fs::write(&path, &images[0].bytes).unwrap();
        let symbols = readelf(&["--dyn-syms"], &path);
        assert!(
            !symbols.contains(panic_sites::SYMBOL),
            "{id}: a panic-site table is exported:\n{symbols}"
        );
        assert!(
            !all.contains(abi::GPU_PANIC),
            "{id}: a reporter is left in the code object"
        );
    }
}

/// The panic-site table of a PTX module: its global's initializer.
fn ptx_panic_sites(ptx: &str) -> PanicSites {
    let line = ptx
        .lines()
        .find(|l| l.contains(&format!(" {}[", panic_sites::SYMBOL)))
        .unwrap_or_else(|| panic!("no {} in the PTX", panic_sites::SYMBOL));
    assert!(
        line.starts_with(".visible "),
        "the runtime cannot find it: {line}"
    );
    let bytes: Vec<u8> = line
        .split_once('{')
        .and_then(|(_, rest)| rest.split_once('}'))
        .map(|(list, _)| list.split(',').map(|b| b.trim().parse().unwrap()).collect())
        .unwrap_or_else(|| panic!("no initializer: {line}"));
    PanicSites::parse(&bytes).unwrap().1
}

/// The panic-site table of an AMD code object: its dynamic symbol's bytes.
fn elf_panic_sites(image: &[u8]) -> PanicSites {
    use object::{Object, ObjectSection, ObjectSymbol};
    let file = object::File::parse(image).unwrap();
    let symbol = file
        .dynamic_symbols()
        .find(|s| s.name() == Ok(panic_sites::SYMBOL))
        .unwrap_or_else(|| panic!("no exported {}", panic_sites::SYMBOL));
    let section = file
        .section_by_index(symbol.section_index().unwrap())
        .unwrap();
    let data = section
        .data_range(symbol.address(), symbol.size())
        .unwrap()
        .unwrap();
    PanicSites::parse(data).unwrap().1
}

/// The fixture's panic sites are described: `panic_kinds`'s literal message and bounds
/// check, with their file and line.
fn check_panic_sites(sites: &PanicSites, arch: &str) {
    let in_fixture = |s: &&PanicSite| s.file.ends_with("lib.rs") && s.line > 0 && s.column > 0;
    assert!(
        sites
            .sites()
            .iter()
            .filter(in_fixture)
            .any(|s| s.kind == 0 && s.message == "a literal message"),
        "{arch}: {sites:?}"
    );
    assert!(
        sites
            .sites()
            .iter()
            .filter(in_fixture)
            .any(|s| s.kind == 1 && s.message.is_empty()),
        "{arch}: no bounds check described: {sites:?}"
    );
}

/// A kernel that can panic carries none of `core::fmt` (core's panic functions report through
/// offload-rt's `__offload_gpu_panic`, which formats nothing): no formatter in the module, one
/// out-of-line function on NVIDIA and none on AMD, no stack or scratch, few registers; the
/// literal messages are in the image's panic-site table for the report. AMD's `grid_dim` reads
/// the block counts,
/// so a slice kernel divides nothing.
#[test]
fn panics_carry_no_formatting() {
    if !nightly_ready() {
        return;
    }
    let is_fmt = |name: &str| name.contains("4core3fmt") || name.contains("flt2dec");
    let target = device_link::parse_gpu_arch("sm_80").unwrap();
    let inputs = rt_fixture_inputs(&target);
    for sm in ["sm_80", "sm_90"] {
        let ptx = device_link::nvptx_link(&inputs, sm, &NvptxLinkOptions::default()).unwrap();
        let mut functions: Vec<&str> = ptx
            .lines()
            .filter_map(|l| l.strip_prefix(".func "))
            .map(|l| l.trim_end_matches(['(', ')']).trim())
            .collect();
        functions.sort_unstable();
        functions.dedup();
        assert!(
            !functions.iter().any(|f| is_fmt(f)),
            "{sm}: core::fmt in the module: {functions:?}"
        );
        let panic_path: Vec<&&str> = functions
            .iter()
            .filter(|f| f.starts_with(abi::GPU_PANIC))
            .collect();
        assert!(
            panic_path.iter().all(|f| [
                abi::GPU_PANIC,
                abi::GPU_PANIC_AT,
                abi::GPU_PANIC_AT0,
                abi::GPU_PANIC_AT1,
                abi::GPU_PANIC_AT2,
                abi::GPU_PANIC_FINISH,
            ]
            .contains(f)),
            "{sm}: one copy of the panic path's functions: {functions:?}"
        );
        check_panic_sites(&ptx_panic_sites(&ptx), sm);
        let entry = ptx_entry(&ptx, "panic_kinds");
        let calls: Vec<&&str> = entry.iter().filter(|l| l.starts_with("call")).collect();
        assert!(
            !calls.is_empty() && calls.iter().all(|l| l.contains(abi::GPU_PANIC)),
            "{sm}: panic_kinds calls {calls:?}"
        );
        assert!(!ptx.lines().any(is_fmt), "{sm}: core::fmt in the module");
        if device_link::ptxas_path().is_none() {
            continue;
        }
        let (_, report) = device_link::ptxas_verbose(&ptx, sm).unwrap();
        // (`print_then_panic` has the stack of its print's arguments.)
        for kernel in ["panic_kinds", "saxpy_slices", "copy_offset"] {
            let k = report.iter().find(|k| k.name == kernel).unwrap();
            assert_eq!(
                (k.stack_bytes, k.spill_store_bytes),
                (0, 0),
                "{sm}: {kernel}: {k:?}"
            );
            assert!(k.registers <= 32, "{sm}: {kernel}: {k:?}");
        }
    }
    let target = device_link::parse_gpu_arch("gfx90a").unwrap();
    let inputs = rt_fixture_inputs(&target);
    let scratch = tempfile::tempdir().unwrap();
    for id in ["gfx90a", "gfx1100"] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let images = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
        let bytes = &images[0].bytes;
        let info = offload_format::image::amdgpu::inspect(bytes).unwrap();
        let kernel = |name: &str| info.kernels.iter().find(|k| k.name == name).unwrap();
        for name in [
            "panic_kinds",
            "saxpy_slices",
            "copy_offset",
            "print_then_panic",
        ] {
            let k = kernel(name);
            assert_eq!(k.private_segment_fixed_size, 0, "{id}: {name}: {k:?}");
            assert!(k.vgpr_count <= 32, "{id}: {name}: {k:?}");
        }
        // `x[i]`'s bounds check and its report included; the grid's block counts are the
        // hidden kernel arguments HIP's `gridDim` reads.
        let slices = kernel("saxpy_slices");
        assert!(slices.vgpr_count <= 24, "{id}: {slices:?}");
        assert!(
            slices
                .args
                .iter()
                .any(|a| a.value_kind == "hidden_block_count_x"),
            "{id}: {slices:?}"
        );
        let all = disassemble(bytes, id, scratch.path());
        let symbols: Vec<&str> = all.lines().filter(|l| l.ends_with(">:")).collect();
        assert!(
            !symbols.iter().any(|l| is_fmt(l)),
            "{id}: core::fmt in the image: {symbols:?}"
        );
        let body = whole_function(&all, "panic_kinds");
        assert!(
            body.iter().any(|l| l.starts_with("s_trap 2")),
            "{id}: panic_kinds does not trap"
        );
        assert!(
            !body.iter().any(|l| l.starts_with("s_swappc")),
            "{id}: panic_kinds calls a function:\n{}",
            body.join("\n")
        );
        let slices = whole_function(&all, "saxpy_slices");
        assert!(
            !slices.iter().any(|l| l.starts_with("v_rcp_iflag_f32")),
            "{id}: saxpy_slices divides:\n{}",
            slices.join("\n")
        );
        check_panic_sites(&elf_panic_sites(bytes), id);
        // (`expect`'s and `assert_eq!`'s messages are constants rustc's LTO may have folded
        // into core's functions, which then report core's own wording.)
        for message in ["a literal message", "attempt to divide by zero"] {
            assert!(
                bytes
                    .windows(message.len())
                    .any(|w| w == message.as_bytes()),
                "{id}: the message `{message}` is not in the image"
            );
        }
    }
}

/// The instructions of `name` in a disassembly, up to the next function (a function's
/// disassembly may have blank lines).
fn whole_function<'a>(all: &'a str, name: &str) -> Vec<&'a str> {
    all.lines()
        .skip_while(|l| !l.ends_with(&format!("<{name}>:")))
        .skip(1)
        .take_while(|l| !l.ends_with(">:"))
        .map(str::trim)
        .collect()
}

/// `cuobjdump -sass` of a cubin; `None` where cuobjdump is not installed (a visible skip, a
/// failure under CI).
fn sass(cubin: &[u8]) -> Option<String> {
    let cuobjdump = Tool::Cuobjdump.for_test()?;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("image.cubin");
    std::fs::write(&path, cubin).unwrap();
    let out = std::process::Command::new(cuobjdump)
        .arg("-sass")
        .arg(&path)
        .output()
        .unwrap();
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `cuobjdump -sass` of an `sm_90a` cubin by the newest `cuobjdump` installed (CUDA 13's, which
/// the set-up installs with the `nvdisasm` it runs beside it); `None` where none reads it (a
/// visible skip, a failure under CI).
fn hopper_sass(cubin: &[u8]) -> Option<String> {
    let cuobjdump = Tool::Cuobjdump
        .for_test()
        .and(Tool::Cuobjdump.find_newest().ok())?;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("image.cubin");
    std::fs::write(&path, cubin).unwrap();
    let bin = cuobjdump.parent().unwrap().to_path_buf();
    let env = Env::detect();
    let dirs = env.get("PATH").unwrap_or_default();
    let search =
        std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(&dirs))).unwrap();
    let out = std::process::Command::new(&cuobjdump)
        .arg("-sass")
        .arg(&path)
        .env("PATH", search)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    match (
        out.status.success() && text.contains("Function"),
        env.get("CI"),
    ) {
        (true, _) => Some(text),
        (false, Some(_)) => panic!(
            "{} cannot disassemble sm_90a ({}); CI requires CUDA 13's (`cargo xtask setup --cuda`)",
            cuobjdump.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        (false, None) => {
            eprintln!("skipped: {} cannot disassemble sm_90a", cuobjdump.display());
            None
        }
    }
}

/// Hopper's units in the runtime fixture's kernels: in the `sm_90a` image, assembled by the
/// `ptxas` that knows it (CUDA 12.9's), `tma_tile` waits on an `mbarrier` for a TMA load and
/// syncs its cluster, `tma_store_tile` stores with TMA, `wgmma_tile` is one `HGMMA`, and
/// `register_handoff` moves registers with `setmaxnreg`; on sm_80, sm_90 (PTX 7.8) and the AMD
/// GPUs the kernels keep no trace of them.
#[test]
fn hopper_units_in_sm_90a_images_and_nowhere_else() {
    if !nightly_ready() {
        return;
    }
    let kernels = [
        "tma_tile",
        "tma_store_tile",
        "wgmma_tile",
        "register_handoff",
    ];
    let options = NvptxLinkOptions {
        kernels: Some(kernels.map(String::from).to_vec()),
        ..Default::default()
    };
    let inputs = rt_fixture_inputs(&device_link::parse_gpu_arch("sm_90a").unwrap());
    let ptx = device_link::nvptx_link(&inputs, "sm_90a", &options).unwrap();
    let spaced = |kernel: &str| {
        let body = ptx_entry(&ptx, kernel).join("\n");
        body.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    for (kernel, wanted) in [
        (
            "tma_tile",
            &[
                "mbarrier.init.shared",
                "mbarrier.arrive.expect_tx.shared::cta.b64",
                "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
                "mbarrier.try_wait.parity.shared::cta.b64",
                "barrier.cluster.arrive",
                "mapa",
                "prefetch.tensormap",
            ][..],
        ),
        (
            "tma_store_tile",
            &[
                "fence.proxy.async.shared::cta",
                "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group",
                "cp.async.bulk.wait_group.read 0",
            ],
        ),
        (
            "wgmma_tile",
            &[
                "wgmma.fence.sync.aligned",
                "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16",
                "wgmma.wait_group.sync.aligned 0",
            ],
        ),
        (
            "register_handoff",
            &[
                "setmaxnreg.dec.sync.aligned.u32 40",
                "setmaxnreg.inc.sync.aligned.u32 232",
            ],
        ),
    ] {
        let body = spaced(kernel);
        for w in wanted {
            assert!(body.contains(w), "sm_90a {kernel}: no {w}:\n{body}");
        }
    }
    if device_link::ptxas_for("sm_90a").unwrap().is_none() {
        assert!(
            Env::detect().get("CI").is_none(),
            "no ptxas knows sm_90a; CI requires CUDA 12.9's (`cargo xtask setup --cuda`)"
        );
        eprintln!("skipped: no ptxas knows sm_90a");
    } else {
        let (cubin, report) = device_link::ptxas_verbose(&ptx, "sm_90a").unwrap();
        for kernel in kernels {
            let info = report.iter().find(|k| k.name == kernel).unwrap();
            assert_eq!(
                (info.stack_bytes, info.spill_store_bytes),
                (0, 0),
                "sm_90a {kernel}: {info:?}"
            );
        }
        if let Some(text) = hopper_sass(&cubin) {
            for (kernel, wanted) in [
                (
                    "tma_tile",
                    &["UTMALDG.2D", "SYNCS.ARRIVE.TRANS64", "UCGABAR_ARV"][..],
                ),
                ("tma_store_tile", &["UTMASTG.2D"]),
                ("wgmma_tile", &["HGMMA.64x64x16.F32"]),
                ("register_handoff", &["USETMAXREG"]),
            ] {
                let function = text
                    .split("Function : ")
                    .find(|f| {
                        f.starts_with(kernel) && f[kernel.len()..].starts_with(char::is_whitespace)
                    })
                    .unwrap_or_else(|| panic!("no {kernel} in\n{text}"));
                for w in wanted {
                    assert!(function.contains(w), "sm_90a {kernel}: no {w}:\n{function}");
                }
            }
        }
    }
    for sm in ["sm_80", "sm_90"] {
        let ptx = device_link::nvptx_link(&inputs, sm, &options).unwrap();
        for unit in [
            "mbarrier.",
            "cp.async.bulk",
            "wgmma.",
            "setmaxnreg.",
            "barrier.cluster",
        ] {
            assert!(!ptx.contains(unit), "{sm}: {unit} left:\n{ptx}");
        }
    }
    let amd_inputs = rt_fixture_inputs(&device_link::parse_gpu_arch("gfx90a").unwrap());
    for id in ["gfx90a", "gfx1100"] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        device_link::gpu_images(&amd_inputs, &target, &Default::default())
            .unwrap_or_else(|e| panic!("{id}: {e}"));
    }
}

/// `kernel::matrix`: the tensor-core instructions of each processor in the images of the
/// fixture's `mma_gemm` (f16 and bf16), no stack or scratch, and a clear refusal, naming the
/// kernels, on processors without them.
#[test]
fn matrix_fragments_are_tensor_core_instructions() {
    if !nightly_ready() {
        return;
    }
    let kernels = [("mma_gemm__f16", "f16"), ("mma_gemm__bf16", "bf16")];
    let target = device_link::parse_gpu_arch("sm_80").unwrap();
    let inputs = rt_fixture_inputs(&target);
    for sm in ["sm_80", "sm_90"] {
        let ptx = device_link::nvptx_link(&inputs, sm, &NvptxLinkOptions::default()).unwrap();
        for (kernel, input) in kernels {
            let body = ptx_entry(&ptx, kernel).join("\n");
            let mma = format!("mma.sync.aligned.m16n8k16.row.col.f32.{input}.{input}.f32");
            assert_eq!(body.matches(&mma).count(), 2, "{sm} {kernel}:\n{body}");
        }
        if device_link::ptxas_path().is_none() {
            continue;
        }
        let (cubin, report) = device_link::ptxas_verbose(&ptx, sm).unwrap();
        for (kernel, _) in kernels {
            let info = report.iter().find(|k| k.name == kernel).unwrap();
            assert_eq!(
                (info.stack_bytes, info.spill_store_bytes),
                (0, 0),
                "{sm} {kernel}: {info:?}\n{}",
                ptx_entry(&ptx, kernel).join("\n")
            );
        }
        let Some(sass) = sass(&cubin) else {
            continue;
        };
        for (kernel, input) in kernels {
            let function = sass
                .split("Function : ")
                .find(|f| f.starts_with(kernel) && f[kernel.len()..].starts_with('\n'))
                .unwrap_or_else(|| panic!("{sm}: no SASS for {kernel}"));
            let hmma = match input {
                "f16" => "HMMA.16816.F32 ",
                _ => "HMMA.16816.F32.BF16 ",
            };
            assert!(
                function.contains(hmma),
                "{sm} {kernel}: no {hmma}:\n{function}"
            );
        }
    }
    let err = device_link::nvptx_link(&inputs, "sm_75", &NvptxLinkOptions::default()).unwrap_err();
    match &err {
        device_link::LinkError::MatrixUnsupported { arch, kernels, .. } => {
            assert_eq!(arch, "sm_75");
            assert!(kernels.contains("mma_gemm__f16"), "{err}");
        }
        other => panic!("expected MatrixUnsupported, got {other}"),
    }
    assert!(err.to_string().contains("sm_80 or later"), "{err}");

    if Tool::LlvmObjdump.for_test().is_none() {
        return;
    }
    let target = device_link::parse_gpu_arch("gfx90a").unwrap();
    let inputs = rt_fixture_inputs(&target);
    let scratch = tempfile::tempdir().unwrap();
    for (id, instructions) in [
        (
            "gfx90a",
            ["v_mfma_f32_16x16x16f16", "v_mfma_f32_16x16x16bf16_1k"],
        ),
        (
            "gfx942",
            ["v_mfma_f32_16x16x16_f16", "v_mfma_f32_16x16x16_bf16"],
        ),
        (
            "gfx1100",
            ["v_wmma_f32_16x16x16_f16", "v_wmma_f32_16x16x16_bf16"],
        ),
    ] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let images = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
        let info = offload_format::image::amdgpu::inspect(&images[0].bytes).unwrap();
        let text = disassemble(&images[0].bytes, id, scratch.path());
        for ((kernel, _), instruction) in kernels.iter().zip(instructions) {
            let k = info.kernels.iter().find(|k| k.name == *kernel).unwrap();
            assert_eq!(
                k.private_segment_fixed_size, 0,
                "{id} {kernel}: scratch: {k:?}"
            );
            let body = function_body(&text, kernel);
            let found = body.iter().filter(|l| l.starts_with(instruction)).count();
            assert!(
                found >= 1,
                "{id} {kernel}: no {instruction}:\n{}",
                body.join("\n")
            );
        }
    }
    for (id, input) in [("gfx908", "bf16"), ("gfx1030", "f16")] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let err = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&format!("multiply {input} matrix fragments")) && text.contains(id),
            "{id}: {text}"
        );
    }
}

/// `kernel::matrix::m32n32k8`: a 32×32×8 step is eight m16n8k8 `mma.sync` (`HMMA.1688`) on
/// NVIDIA, one `v_mfma_f32_32x32x8` on CDNA and four `v_wmma_f32_16x16x16` on gfx11, with no
/// stack or scratch; from swizzled tiles A and Bᵀ are one `ldmatrix.x4` each and B one
/// `ldmatrix.x4.trans` on NVIDIA, A and Bᵀ one 64-bit LDS read a lane on CDNA.
#[test]
fn wide_matrix_tiles_are_each_processors_instructions() {
    if !nightly_ready() {
        return;
    }
    let kernels = [
        ("mma_gemm_32x32__f16", "f16"),
        ("mma_gemm_32x32__bf16", "bf16"),
    ];
    let target = device_link::parse_gpu_arch("sm_80").unwrap();
    let inputs = rt_fixture_inputs(&target);
    for sm in ["sm_80", "sm_90"] {
        let ptx = device_link::nvptx_link(&inputs, sm, &NvptxLinkOptions::default()).unwrap();
        for (kernel, input) in kernels {
            let body = ptx_entry(&ptx, kernel).join("\n");
            let mma = format!("mma.sync.aligned.m16n8k8.row.col.f32.{input}.{input}.f32");
            let found = body.matches(&mma).count();
            assert!(
                found > 0 && found % 8 == 0,
                "{sm} {kernel}: {found} {mma}:\n{body}"
            );
        }
        for input in ["f16", "bf16"] {
            let body = ptx_entry(&ptx, &format!("wide_tiles__{input}")).join("\n");
            let plain = "ldmatrix.sync.aligned.m8n8.x4.shared.b16";
            let trans = "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16";
            assert_eq!(
                (body.matches(plain).count(), body.matches(trans).count()),
                (2, 1),
                "{sm} wide_tiles__{input}:\n{body}"
            );
        }
        if device_link::ptxas_path().is_none() {
            continue;
        }
        let (cubin, report) = device_link::ptxas_verbose(&ptx, sm).unwrap();
        for (kernel, _) in kernels {
            let info = report.iter().find(|k| k.name == kernel).unwrap();
            assert_eq!(
                (info.stack_bytes, info.spill_store_bytes),
                (0, 0),
                "{sm} {kernel}: {info:?}"
            );
        }
        let Some(sass) = sass(&cubin) else {
            continue;
        };
        for (kernel, input) in kernels {
            let function = sass
                .split("Function : ")
                .find(|f| f.starts_with(kernel) && f[kernel.len()..].starts_with('\n'))
                .unwrap_or_else(|| panic!("{sm}: no SASS for {kernel}"));
            let hmma = match input {
                "f16" => "HMMA.1688.F32 ",
                _ => "HMMA.1688.F32.BF16 ",
            };
            assert!(
                function.contains(hmma),
                "{sm} {kernel}: no {hmma}:\n{function}"
            );
        }
    }

    if Tool::LlvmObjdump.for_test().is_none() {
        return;
    }
    let target = device_link::parse_gpu_arch("gfx90a").unwrap();
    let inputs = rt_fixture_inputs(&target);
    let scratch = tempfile::tempdir().unwrap();
    for (id, instructions, per_step) in [
        (
            "gfx90a",
            ["v_mfma_f32_32x32x8f16", "v_mfma_f32_32x32x8bf16_1k"],
            1,
        ),
        (
            "gfx942",
            ["v_mfma_f32_32x32x8_f16", "v_mfma_f32_32x32x8_bf16"],
            1,
        ),
        (
            "gfx1100",
            ["v_wmma_f32_16x16x16_f16", "v_wmma_f32_16x16x16_bf16"],
            4,
        ),
    ] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let images = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
        let info = offload_format::image::amdgpu::inspect(&images[0].bytes).unwrap();
        let text = disassemble(&images[0].bytes, id, scratch.path());
        for ((kernel, _), instruction) in kernels.iter().zip(instructions) {
            let k = info.kernels.iter().find(|k| k.name == *kernel).unwrap();
            assert_eq!(
                k.private_segment_fixed_size, 0,
                "{id} {kernel}: scratch: {k:?}"
            );
            let body = function_body(&text, kernel);
            let found = body.iter().filter(|l| l.starts_with(instruction)).count();
            assert!(
                found > 0 && found % per_step == 0,
                "{id} {kernel}: {found} {instruction}:\n{}",
                body.join("\n")
            );
        }
        if id != "gfx1100" {
            for input in ["f16", "bf16"] {
                let kernel = format!("wide_tiles__{input}");
                let body = function_body(&text, &kernel);
                // The back end may pair the two reads (`ds_read2st64_b64`).
                let reads: usize = body
                    .iter()
                    .map(|l| match l.split_whitespace().next() {
                        Some("ds_read_b64") => 1,
                        Some(op) if op.starts_with("ds_read2") && op.ends_with("_b64") => 2,
                        _ => 0,
                    })
                    .sum();
                assert!(
                    reads >= 2,
                    "{id} {kernel}: {reads} 64-bit LDS reads:\n{}",
                    body.join("\n")
                );
            }
        }
    }
}

/// `SwizzledTile::copy_async_from` (the fixture's `tile_copy_async`): on AMD CDNA the tile
/// arrives by direct loads to LDS (`global_load_dword ... lds` on gfx90a,
/// `global_load_lds_dword` on gfx942), no LDS store instruction, and `s_waitcnt vmcnt(0)`
/// before the barrier that publishes it; on gfx11 a load and a 16-byte LDS store a chunk; on
/// NVIDIA 16-byte `cp.async` copies.
#[test]
fn tiles_load_directly_to_lds_on_cdna() {
    if !nightly_ready() {
        return;
    }
    let kernel = "tile_copy_async";
    let target = device_link::parse_gpu_arch("sm_80").unwrap();
    let ptx = device_link::nvptx_link(
        &rt_fixture_inputs(&target),
        "sm_80",
        &NvptxLinkOptions::default(),
    )
    .unwrap();
    let body = ptx_entry(&ptx, kernel).join(" ");
    let body = body.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        body.contains("cp.async.cg.shared.global") && body.contains("cp.async.wait_group 0"),
        "sm_80 {kernel}:\n{body}"
    );
    if Tool::LlvmObjdump.for_test().is_none() {
        return;
    }
    let target = device_link::parse_gpu_arch("gfx90a").unwrap();
    let inputs = rt_fixture_inputs(&target);
    let scratch = tempfile::tempdir().unwrap();
    for (id, direct) in [
        ("gfx90a", Some("global_load_dword")),
        ("gfx942", Some("global_load_lds_dword")),
        ("gfx1100", None),
    ] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let images = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
        let text = disassemble(&images[0].bytes, id, scratch.path());
        let body = function_body(&text, kernel);
        let listing = body.join("\n");
        let op = |l: &&str| l.split_whitespace().next().unwrap_or("").to_owned();
        // gfx11 names them `ds_store_*`.
        let stores = body
            .iter()
            .filter(|l| op(l).starts_with("ds_write") || op(l).starts_with("ds_store"))
            .count();
        let barrier = body
            .iter()
            .position(|l| op(l) == "s_barrier")
            .unwrap_or_else(|| panic!("{id}: no s_barrier:\n{listing}"));
        match direct {
            Some(load) => {
                let direct_loads = body
                    .iter()
                    .filter(|l| op(l) == load && (load.contains("lds") || l.contains(" lds")))
                    .count();
                assert!(direct_loads > 0, "{id}: no direct load to LDS:\n{listing}");
                assert_eq!(stores, 0, "{id}: LDS stores:\n{listing}");
                assert!(
                    body[..barrier]
                        .iter()
                        .any(|l| l.contains("s_waitcnt vmcnt(0)")),
                    "{id}: no vmcnt(0) wait before the barrier:\n{listing}"
                );
            }
            None => {
                assert!(
                    !listing.contains(" lds") && !listing.contains("load_lds"),
                    "{id}:\n{listing}"
                );
                assert!(stores > 0, "{id}: no LDS stores:\n{listing}");
            }
        }
    }
}

/// The runtime fixture's data-movement kernels on NVIDIA: `staged_reverse` copies with
/// `cp.async` and waits with `cp.async.wait_group` (sm_80 on), its launch bound is `.maxntid
/// 64`; `matrix_loads` is `ldmatrix` in all six forms; `matrix_stores` is `stmatrix` in all
/// six forms and `accumulator_to_tile__f16` one `stmatrix.x4` (`STSM`) on sm_90, where sm_80
/// exchanges the rows' addresses (`shfl`) and stores element by element. Before sm_80 the
/// copies are refused, naming the kernel; AMD images bound the kernel's work-group size.
#[test]
fn async_copies_matrix_loads_and_launch_bounds_on_the_gpus() {
    if !nightly_ready() {
        return;
    }
    let inputs = rt_fixture_inputs(&device_link::parse_gpu_arch("sm_80").unwrap());
    let options = NvptxLinkOptions {
        kernels: Some(
            [
                "staged_reverse",
                "matrix_loads",
                "matrix_stores",
                "accumulator_to_tile__f16",
            ]
            .map(String::from)
            .to_vec(),
        ),
        ..Default::default()
    };
    for sm in ["sm_80", "sm_90"] {
        let ptx = device_link::nvptx_link(&inputs, sm, &options).unwrap();
        let spaced = |kernel: &str| {
            let body = ptx_entry(&ptx, kernel).join("\n");
            body.split_whitespace().collect::<Vec<_>>().join(" ")
        };
        let staged = spaced("staged_reverse");
        for wanted in [
            ".maxntid 64",
            "cp.async.ca.shared.global",
            "cp.async.commit_group",
            "cp.async.wait_group 1",
        ] {
            assert!(staged.contains(wanted), "{sm}: no {wanted}:\n{staged}");
        }
        let loads = spaced("matrix_loads");
        for count in ["x1", "x2", "x4"] {
            for trans in ["", ".trans"] {
                let wanted = format!("ldmatrix.sync.aligned.m8n8.{count}{trans}.shared.b16");
                assert!(loads.contains(&wanted), "{sm}: no {wanted}:\n{loads}");
            }
        }
        let stores = spaced("matrix_stores");
        let epilogue = spaced("accumulator_to_tile__f16");
        if sm == "sm_90" {
            for count in ["x1", "x2", "x4"] {
                for trans in ["", ".trans"] {
                    let wanted = format!("stmatrix.sync.aligned.m8n8.{count}{trans}.shared.b16");
                    assert!(stores.contains(&wanted), "{sm}: no {wanted}:\n{stores}");
                }
            }
            let wanted = "stmatrix.sync.aligned.m8n8.x4.shared.b16";
            assert!(epilogue.contains(wanted), "{sm}: no {wanted}:\n{epilogue}");
            assert_eq!(epilogue.matches("stmatrix").count(), 1, "{sm}:\n{epilogue}");
        } else {
            assert!(!stores.contains("stmatrix"), "{sm}:\n{stores}");
            assert!(stores.contains("shfl.sync.idx"), "{sm}: no shfl:\n{stores}");
            assert!(!epilogue.contains("stmatrix"), "{sm}:\n{epilogue}");
        }
        if sm == "sm_90" && device_link::ptxas_path().is_some() {
            let (cubin, _) = device_link::ptxas_verbose(&ptx, sm).unwrap();
            if let Some(sass) = sass(&cubin) {
                for instruction in ["STSM.16.M88.4", "STSM.16.MT88.4"] {
                    assert!(
                        sass.contains(instruction),
                        "{sm}: no {instruction} in\n{sass}"
                    );
                }
            }
        }
    }
    let err = device_link::nvptx_link(&inputs, "sm_75", &options).unwrap_err();
    match &err {
        device_link::LinkError::FeatureUnsupported { arch, kernels, .. } => {
            assert_eq!(arch, "sm_75");
            assert_eq!(kernels, "staged_reverse", "{err}");
        }
        other => panic!("expected FeatureUnsupported, got {other}"),
    }
    assert!(err.to_string().contains("sm_80 or later"), "{err}");

    let target = device_link::parse_gpu_arch("gfx90a").unwrap();
    let inputs = rt_fixture_inputs(&target);
    for id in ["gfx90a", "gfx1100"] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let images = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
        let info = offload_format::image::amdgpu::inspect(&images[0].bytes).unwrap();
        let bounded = info
            .kernels
            .iter()
            .find(|k| k.name == "staged_reverse")
            .unwrap();
        assert_eq!(bounded.max_flat_workgroup_size, 64, "{id}: {bounded:?}");
        let unbounded = info
            .kernels
            .iter()
            .find(|k| k.name == "matrix_loads")
            .unwrap();
        assert_eq!(
            unbounded.max_flat_workgroup_size, 1024,
            "{id}: {unbounded:?}"
        );
    }
}

/// `examples/gemm`: its kernels' images use each processor's matrix instructions (`HMMA` in the
/// sm_80 and sm_90 SASS, MFMA on gfx90a and gfx942, WMMA on gfx1100) and no stack or scratch;
/// on NVIDIA the fast kernel copies asynchronously (`cp.async`, `LDGSTS`), loads its fragments
/// a matrix at a time (`ldmatrix`, `LDSM`) and waits for its copies once per slice.
#[test]
fn gemm_example_runs_on_the_matrix_units() {
    if !nightly_ready() || Tool::LlvmObjdump.for_test().is_none() {
        return;
    }
    let manifest =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/gemm/kernels/Cargo.toml");
    let env = Env::detect();
    let inputs_for = |id: &str| {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let dir = target_dir().join(format!("gemm-{}", target.triple()));
        common::nested_inputs(&env, &manifest, &target, &dir)
    };
    let kernels = [
        "gemm_fragments_f16",
        "gemm__f16",
        "gemm__bf16",
        "gemm_bt__f16",
        "gemm_bt__bf16",
    ];
    let nvptx = inputs_for("sm_80");
    for sm in ["sm_80", "sm_90"] {
        let ptx = device_link::nvptx_link(&nvptx, sm, &NvptxLinkOptions::default()).unwrap();
        for kernel in kernels {
            let body = ptx_entry(&ptx, kernel).join("\n");
            let input = if kernel.ends_with("bf16") {
                "bf16.bf16"
            } else {
                "f16.f16"
            };
            assert!(
                body.contains(&format!(
                    "mma.sync.aligned.m16n8k16.row.col.f32.{input}.f32"
                )),
                "{sm} {kernel}:\n{body}"
            );
            if kernel != "gemm_fragments_f16" {
                assert!(
                    body.contains(".maxntid 256"),
                    "{sm} {kernel}: no .maxntid:\n{body}"
                );
                // B column-major (`gemm_bt`): its fragments are `ldmatrix` without `.trans`.
                let trans = "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16";
                let spaced = body.split_whitespace().collect::<Vec<_>>().join(" ");
                assert_eq!(
                    spaced.contains(trans),
                    kernel.starts_with("gemm__"),
                    "{sm} {kernel}:\n{body}"
                );
                for instruction in [
                    "cp.async.cg.shared.global",
                    "cp.async.commit_group",
                    "cp.async.wait_group 1",
                    "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                ] {
                    assert!(
                        spaced.contains(instruction),
                        "{sm} {kernel}: no {instruction}:\n{body}"
                    );
                }
            }
        }
        if device_link::ptxas_path().is_none() {
            continue;
        }
        let (cubin, report) = device_link::ptxas_verbose(&ptx, sm).unwrap();
        for kernel in kernels {
            let info = report.iter().find(|k| k.name == kernel).unwrap();
            assert_eq!(
                (info.stack_bytes, info.spill_store_bytes),
                (0, 0),
                "{sm} {kernel}: {info:?}"
            );
        }
        if let Some(sass) = sass(&cubin) {
            assert!(sass.contains("HMMA.16816.F32"), "{sm}: no HMMA in\n{sass}");
            for instruction in ["LDGSTS", "LDSM.16.M88.4", "LDSM.16.MT88.4"] {
                assert!(
                    sass.contains(instruction),
                    "{sm}: no {instruction} in\n{sass}"
                );
            }
        }
    }
    let amdgpu = inputs_for("gfx90a");
    let scratch = tempfile::tempdir().unwrap();
    for (id, instruction) in [
        ("gfx90a", "v_mfma_f32_16x16x16f16"),
        ("gfx942", "v_mfma_f32_16x16x16_f16"),
        ("gfx1100", "v_wmma_f32_16x16x16_f16"),
    ] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let images = device_link::gpu_images(&amdgpu, &target, &Default::default()).unwrap();
        let info = offload_format::image::amdgpu::inspect(&images[0].bytes).unwrap();
        let text = disassemble(&images[0].bytes, id, scratch.path());
        for kernel in ["gemm_fragments_f16", "gemm__f16", "gemm_bt__f16"] {
            let k = info.kernels.iter().find(|k| k.name == kernel).unwrap();
            eprintln!(
                "{id} {kernel}: {} VGPRs, {} AGPRs, {} bytes of scratch, {} VGPR spills",
                k.vgpr_count, k.agpr_count, k.private_segment_fixed_size, k.vgpr_spill_count
            );
            assert_eq!(
                k.private_segment_fixed_size, 0,
                "{id} {kernel}: scratch: {k:?}"
            );
            // `max_threads = 256`: without it a wavefront of 64 gets at most 128 VGPRs and
            // spills its 64×64 part of C.
            if kernel != "gemm_fragments_f16" {
                assert_eq!(k.max_flat_workgroup_size, 256, "{id}: {k:?}");
            }
            let body = function_body(&text, kernel);
            // MFMA's A fragments (and `gemm_bt`'s B fragments): 4 consecutive halves a lane,
            // read 64 bits at a time.
            if kernel != "gemm_fragments_f16" && id != "gfx1100" {
                assert!(
                    body.iter().any(|l| l.starts_with("ds_read")
                        && l.split_whitespace()
                            .next()
                            .is_some_and(|o| o.ends_with("_b64"))),
                    "{id}: no 64-bit LDS read:\n{}",
                    body.join("\n")
                );
            }
            assert!(
                body.iter().any(|l| l.starts_with(instruction)),
                "{id} {kernel}: no {instruction}:\n{}",
                body.join("\n")
            );
        }
    }
}

/// `strided_histogram`'s loops count in 32 bits on a GPU, as C's `int` loops do: the block-stride
/// loops over 64 bins, and the grid-stride loop over its `u32` parameter `n`, whose add
/// saturates (a grid's step may be near `u32::MAX`; `min` then `add`, where a block's step
/// needs no saturation).
#[test]
fn stride_loops_count_in_32_bits_where_that_is_proven() {
    if !nightly_ready() {
        return;
    }
    let target = device_link::parse_gpu_arch("sm_80").unwrap();
    let inputs = rt_fixture_inputs(&target);
    let ptx = device_link::nvptx_link(&inputs, "sm_80", &NvptxLinkOptions::default()).unwrap();
    let entry = ptx_entry(&ptx, "strided_histogram");
    let count = |prefix: &str, suffix: &str| {
        entry
            .iter()
            .filter(|l| l.starts_with(prefix) && l.ends_with(suffix))
            .count()
    };
    let listing = entry.join("\n");
    assert!(
        count("setp.lt.u32", ", 64;") >= 2,
        "the block-stride loops' counters:\n{listing}"
    );
    let wide_compares = entry
        .iter()
        .filter(|l| l.starts_with("setp.") && l.contains(".u64"))
        .count();
    assert_eq!(wide_compares, 0, "a 64-bit compare:\n{listing}");
    assert_eq!(
        count("min.u32", ";"),
        1,
        "the grid-stride loop's saturating add:\n{listing}"
    );
}
