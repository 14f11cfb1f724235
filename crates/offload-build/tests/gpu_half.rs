//! `kernel::half` through the GPU device link: the runtime's fixture kernels
//! (`half_kernels.rs`) built with nightly for nvptx64 and amdgcn, and the conversions read in
//! the PTX (checked by `ptxas`) and in the AMD disassembly: hardware conversions, no call.
#![cfg(feature = "llvm")]

mod common;

use std::path::Path;

use offload_build::tooling::device_link::{self, NvptxLinkOptions};
use offload_toolchain::Tool;

use common::{
    disassemble, function_body, nightly_ready, ptx_entry, readelf, require, rt_fixture_inputs,
};

/// The undefined symbols of a code object (`llvm-readelf -s`).
fn undefined_symbols(image: &[u8], dir: &Path, name: &str) -> Vec<String> {
    let path = dir.join(format!("{name}-symbols.elf"));
    std::fs::write(&path, image).unwrap();
    readelf(&["-s", "-W"], &path)
        .lines()
        .filter(|l| l.contains(" UND ") && !l.trim_end().ends_with("UND"))
        .map(str::to_owned)
        .collect()
}

/// NVIDIA: `f16` conversions are `cvt.f32.f16` and `cvt.rn.f16.f32` on every sm; the `bf16`
/// rounding is `cvt.rn.bf16.f32` from sm_80 on and integer operations on sm_75, whose PTX has
/// no instruction it lacks. No conversion is a call, half-precision parameters are 2-byte
/// `.param`s, and `ptxas` accepts every module.
#[test]
fn nvptx_half_conversions_are_cvt() {
    if !nightly_ready() || !require("ptxas", device_link::ptxas_path().is_some()) {
        return;
    }
    let target = device_link::parse_gpu_arch("sm_80").unwrap();
    let inputs = rt_fixture_inputs(&target);
    // The kernels looked at: sm_75 has no matrix instructions for the fixture's `mma_gemm`.
    let options = NvptxLinkOptions {
        kernels: Some(
            ["half_widen", "half_narrow", "half_params", "half_dot"]
                .map(String::from)
                .to_vec(),
        ),
        ..Default::default()
    };
    for sm in ["sm_75", "sm_80", "sm_90"] {
        let ptx = device_link::nvptx_link(&inputs, sm, &options).unwrap();
        let externs: Vec<&str> = ptx
            .lines()
            .filter(|l| l.contains(".extern .func"))
            .collect();
        assert!(externs.is_empty(), "{sm}: unresolved calls: {externs:?}");
        let hardware_bf16 = sm != "sm_75";
        for (kernel, present, absent) in [
            ("half_widen", vec!["cvt.f32.f16"], vec![]),
            (
                "half_narrow",
                if hardware_bf16 {
                    vec!["cvt.rn.f16.f32", "cvt.rn.bf16.f32"]
                } else {
                    vec!["cvt.rn.f16.f32"]
                },
                if hardware_bf16 { vec![] } else { vec!["bf16"] },
            ),
            // The product of two widened `f16` values rounded back to `f16` is exact in `f32`,
            // so LLVM makes it one `mul.rn.f16`: no narrowing `cvt` there.
            ("half_params", vec!["cvt.f32.f16"], vec![]),
            ("half_dot", vec!["cvt.f32.f16"], vec![]),
        ] {
            let body = ptx_entry(&ptx, kernel).join("\n");
            assert!(!body.is_empty(), "{sm}: no {kernel}");
            for op in present {
                assert!(body.contains(op), "{sm}: no {op} in {kernel}:\n{body}");
            }
            for op in absent {
                assert!(!body.contains(op), "{sm}: {op} in {kernel}:\n{body}");
            }
            assert!(
                !body.lines().any(|l| l.starts_with("call")),
                "{sm}: a call in {kernel}:\n{body}"
            );
        }
        // The parameters by value: `f16`, `bf16` and the 4-byte `HalfPair` as CUDA passes them.
        let params: Vec<&str> = ptx_entry(&ptx, "half_params")
            .into_iter()
            .filter(|l| l.starts_with(".param"))
            .collect();
        assert_eq!(
            params[..3],
            [
                ".param .u16 half_params_param_0,",
                ".param .u16 half_params_param_1,",
                ".param .align 2 .b8 half_params_param_2[4],",
            ],
            "{sm}"
        );
        device_link::ptxas_verbose(&ptx, sm)
            .unwrap_or_else(|e| panic!("ptxas -arch={sm} refuses the half kernels: {e}"));
    }
}

/// AMD: `f16` conversions are `v_cvt_f32_f16` and `v_cvt_f16_f32`; the `bf16` rounding is
/// integer VALU operations on gfx90a and gfx1100 and `v_cvt_pk_bf16_f32` on gfx950. The code
/// objects have no undefined symbol, the kernels call nothing, and half-precision parameters
/// are 2-byte kernel arguments.
#[test]
fn amdgpu_half_conversions_are_v_cvt() {
    if !nightly_ready()
        || !require("llvm-objdump", Tool::LlvmObjdump.for_test().is_some())
        || !require("llvm-readelf", Tool::LlvmReadelf.for_test().is_some())
    {
        return;
    }
    let target = device_link::parse_gpu_arch("gfx90a").unwrap();
    let inputs = rt_fixture_inputs(&target);
    let scratch = tempfile::tempdir().unwrap();
    for id in ["gfx90a", "gfx1100", "gfx950"] {
        let target = device_link::parse_gpu_arch(id).unwrap();
        let images = device_link::gpu_images(&inputs, &target, &Default::default()).unwrap();
        let undefined = undefined_symbols(&images[0].bytes, scratch.path(), id);
        assert!(
            undefined.is_empty(),
            "{id}: undefined symbols {undefined:?}"
        );
        // half_params(h: f16, b: bf16, pair: HalfPair, out: *mut [f32; 4], scaled: *mut f16)
        let info = offload_format::image::amdgpu::inspect(&images[0].bytes).unwrap();
        let k = info
            .kernels
            .iter()
            .find(|k| k.name == "half_params")
            .unwrap();
        let args: Vec<(u64, u64, &str)> = k
            .explicit_args()
            .map(|a| (a.offset, a.size, a.value_kind.as_str()))
            .collect();
        assert_eq!(
            args,
            [
                (0, 2, "by_value"),
                (2, 2, "by_value"),
                (4, 4, "by_value"),
                (8, 8, "global_buffer"),
                (16, 8, "global_buffer")
            ],
            "{id}"
        );
        let text = disassemble(&images[0].bytes, id, scratch.path());
        let bf16 = if id == "gfx950" {
            "v_cvt_pk_bf16_f32"
        } else {
            "v_add3_u32"
        };
        for (kernel, ops) in [
            ("half_widen", vec!["v_cvt_f32_f16"]),
            ("half_narrow", vec!["v_cvt_f16_f32", bf16]),
            ("half_params", vec!["v_cvt_f32_f16"]),
            ("half_dot", vec!["v_cvt_f32_f16"]),
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
            assert!(
                !body.iter().any(|l| l.starts_with("s_swappc")),
                "{id}: a call in {kernel}:\n{}",
                body.join("\n")
            );
        }
    }
}
