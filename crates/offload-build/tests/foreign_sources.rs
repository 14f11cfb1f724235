//! CUDA and HIP sources compiled by `offload_build::tooling::foreign`: the images clang gives, read with
//! the tools that would load them (ptxas, the AMD metadata, the disassembler), and the errors a
//! user gets for sources that do not compile.
#![cfg(feature = "llvm")]

mod common;

use std::path::{Path, PathBuf};

use offload_build::tooling::arch::parse_list;
use offload_build::tooling::device_link::{self, CubinPlan};
use offload_build::tooling::env::Env;
use offload_build::tooling::foreign::{self, Language, Options, Source};
use offload_build::{DeviceImage, Error, OffloadArch};
use offload_format::ImageKind;
use offload_format::offload_binary::KernelParams;
use offload_toolchain::Tool;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/foreign")
        .join(name)
}

fn compile(
    language: Language,
    name: &str,
    archs: &str,
) -> Option<(foreign::Built, tempfile::TempDir)> {
    Tool::Clang.for_test()?;
    let out = tempfile::tempdir().unwrap();
    let built = try_compile(language, name, archs, out.path()).unwrap_or_else(|e| panic!("{e}"));
    Some((built, out))
}

/// `foreign::build` of the one fixture source `name` for `archs`, into `out`.
#[expect(
    clippy::result_large_err,
    reason = "offload-build's own error type, as `foreign::build` returns it"
)]
fn try_compile(
    language: Language,
    name: &str,
    archs: &str,
    out: &Path,
) -> offload_build::Result<foreign::Built> {
    let sources = [Source {
        language,
        path: fixture(name),
        relocatable: false,
    }];
    foreign::build(
        &Env::detect(),
        &sources,
        &parse_list(archs, "the test").unwrap(),
        &Options::default(),
        out,
        "test",
    )
}

fn images_of<'a>(built: &'a foreign::Built, arch: &str) -> Vec<&'a DeviceImage> {
    built
        .images
        .iter()
        .filter(|i| i.arch.name() == arch)
        .collect()
}

/// The parameter sizes of the fixture's kernels, which every image of it records.
fn expected_params() -> Vec<KernelParams> {
    let k = |kernel: &str, sizes: &[u32]| KernelParams {
        kernel: kernel.to_owned(),
        sizes: sizes.to_vec(),
    };
    vec![
        k("scale", &[8, 4, 4]),
        k("_Z11scale_twicePfi", &[8, 4]),
        k("block_sum", &[8, 8, 4]),
    ]
}

#[test]
fn cuda_source_gives_ptx_per_sm_and_cubins_ptxas_accepts() {
    let Some((built, _dir)) = compile(Language::Cuda, "scale.cu", "sm_80,sm_120") else {
        return;
    };
    assert!(Tool::Ptxas.for_test().is_some());
    assert!(
        built.watch.contains(&fixture("scale.cu")) && built.watch.contains(&fixture("scale.h")),
        "the source and its header are watched: {:?}",
        built.watch
    );
    for (sm, isa) in [("sm_80", "7.8"), ("sm_120", "8.7")] {
        let images = images_of(&built, sm);
        let ptx = images
            .iter()
            .find(|i| i.image_kind == ImageKind::Ptx)
            .unwrap_or_else(|| panic!("no PTX for {sm}"));
        let text = std::str::from_utf8(&ptx.bytes).unwrap();
        assert!(text.contains(&format!(".target {sm}")), "{text}");
        assert!(text.contains(&format!(".version {isa}")), "{text}");
        assert_eq!(ptx.module, "scale");
        assert_eq!(
            ptx.kernels,
            ["scale", "_Z11scale_twicePfi", "block_sum"],
            "extern \"C\" names as written, C++ names mangled"
        );
        assert_eq!(ptx.kernel_params, expected_params(), "{sm}");
        let plan = device_link::cubin_plan(sm).unwrap();
        let cubin = images.iter().find(|i| i.image_kind == ImageKind::Cubin);
        assert_eq!(
            cubin.is_some(),
            plan == CubinPlan::Assemble,
            "{sm}: {plan:?}"
        );
        if let Some(cubin) = cubin {
            assert!(device_link::is_cubin(&cubin.bytes));
            assert_eq!(cubin.kernel_params, expected_params(), "{sm}: the cubin's");
            let (_, report) = device_link::ptxas_verbose(text, sm).unwrap();
            let sum = report.iter().find(|k| k.name == "block_sum").unwrap();
            assert_eq!(sum.shared_bytes, 1024, "__shared__ float[256]: {report:?}");
            // The build's own `ptxas -v` run is recorded on both images, so nothing after the
            // build runs it again.
            assert_eq!(cubin.kernel_resources, report, "{sm}: the cubin's figures");
            assert_eq!(ptx.kernel_resources, report, "{sm}: the PTX's figures");
        } else {
            assert!(
                ptx.kernel_resources.is_empty(),
                "{sm}: no ptxas run, no figures"
            );
        }
    }
    assert!(
        device_link::cubin_plan("sm_80").unwrap() == CubinPlan::Assemble,
        "the set-up's ptxas assembles sm_80"
    );
}

#[test]
fn hip_source_gives_code_objects_with_the_target_ids_flags_descriptors_and_lds() {
    let Some((built, dir)) = compile(Language::Hip, "scale.hip", "gfx90a,gfx1100,gfx942:xnack+")
    else {
        return;
    };
    assert!(
        built.watch.contains(&fixture("scale.h")),
        "{:?}",
        built.watch
    );
    for (arch, wave) in [("gfx90a", 64), ("gfx1100", 32), ("gfx942:xnack+", 64)] {
        let images = images_of(&built, arch);
        assert_eq!(images.len(), 1, "{arch}");
        let image = images[0];
        assert_eq!(image.image_kind, ImageKind::Object);
        let OffloadArch::Amdgcn(id) = image.arch else {
            panic!("{arch}")
        };
        let info = offload_format::image::amdgpu::inspect(&image.bytes).unwrap();
        assert_eq!(info.e_flags, id.e_flags(), "{arch}: e_flags");
        assert_eq!(info.abi_version, 3, "{arch}: code object V5");
        assert_eq!(info.target, format!("amdgcn-amd-amdhsa--{arch}"));
        assert_eq!(image.kernels, ["_Z11scale_twicePfi", "block_sum", "scale"]);
        for kernel in &info.kernels {
            assert!(kernel.has_descriptor_symbol, "{arch}: {}.kd", kernel.name);
            assert_eq!(kernel.wavefront_size, wave, "{arch}: {}", kernel.name);
        }
        let sum = info.kernels.iter().find(|k| k.name == "block_sum").unwrap();
        assert_eq!(
            sum.group_segment_fixed_size, 1024,
            "{arch}: LDS of block_sum"
        );
        let scale = info.kernels.iter().find(|k| k.name == "scale").unwrap();
        let sizes: Vec<u64> = scale.explicit_args().map(|a| a.size).collect();
        assert_eq!(sizes, [8, 4, 4], "{arch}");
        let mut params = image.kernel_params.clone();
        params.sort_by(|a, b| a.kernel.cmp(&b.kernel));
        let mut want = expected_params();
        want.sort_by(|a, b| a.kernel.cmp(&b.kernel));
        assert_eq!(params, want, "{arch}");
        let processor = id.processor().name;
        let asm = common::disassemble(&image.bytes, processor, dir.path());
        let body = asm
            .split("<block_sum>:")
            .nth(1)
            .unwrap_or_else(|| panic!("{arch}: no block_sum in\n{asm}"));
        assert!(body.contains("s_barrier"), "{arch}: __syncthreads\n{body}");
        assert!(body.contains("ds_"), "{arch}: LDS accesses\n{body}");
        assert!(
            body.contains("s_load"),
            "{arch}: reads its arguments from the kernarg segment\n{body}"
        );
    }
}

#[test]
fn a_source_that_does_not_compile_names_the_file_the_arch_and_the_command() {
    if Tool::Clang.for_test().is_none() {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let err = try_compile(Language::Cuda, "broken.cu", "sm_80", out.path()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::ForeignCompile { .. }), "{msg}");
    assert!(msg.contains("broken.cu") && msg.contains("sm_80"), "{msg}");
    assert!(
        msg.contains("clang") && msg.contains("--cuda-device-only"),
        "{msg}"
    );
}

#[test]
fn a_missing_source_is_named() {
    let out = tempfile::tempdir().unwrap();
    let err = try_compile(Language::Hip, "no-such.hip", "gfx90a", out.path()).unwrap_err();
    assert!(matches!(err, Error::BadSource { .. }), "{err}");
    assert!(err.to_string().contains("no-such.hip"), "{err}");
}
