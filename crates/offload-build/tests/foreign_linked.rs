//! Relocatable CUDA/HIP sources device-linked with a Rust kernel crate (`Build::cuda_rdc`):
//! a Rust kernel calls a function written in CUDA/HIP which calls Rust back, and a CUDA/HIP
//! kernel calls Rust, in one image per architecture; on the CPU device the sources' host side
//! is linked into the image.
#![cfg(feature = "llvm")]

mod common;

use std::path::{Path, PathBuf};

use object::{Object, ObjectSymbol};
use offload_build::DeviceImage;
use offload_build::tooling::arch::parse_list;
use offload_build::tooling::device_link::{self, DeviceInput};
use offload_build::tooling::env::Env;
use offload_build::tooling::foreign::{self, Language, Options, Source, rdc::LinkedSources};
use offload_build::{KernelCrate, OffloadArch};
use offload_format::ImageKind;
use offload_toolchain::Tool;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn linked_sources(archs: &[OffloadArch], out: &Path) -> LinkedSources {
    let clang = foreign::clang::find(&Env::detect()).unwrap_or_else(|e| panic!("{e}"));
    let sources = [
        Source {
            language: Language::Cuda,
            path: fixture("foreign/linked.cu"),
            relocatable: true,
        },
        Source {
            language: Language::Hip,
            path: fixture("foreign/linked.hip"),
            relocatable: true,
        },
    ];
    let refs: Vec<&Source> = sources.iter().collect();
    foreign::rdc::build(
        &Env::detect(),
        &clang,
        &refs,
        archs,
        &Options::default(),
        out,
        "t",
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn ready() -> bool {
    Tool::Clang.for_test().is_some() && common::nightly_ready()
}

fn rdc_crate() -> KernelCrate {
    KernelCrate {
        package: "rdc-fixture-kernels".to_owned(),
        lib_name: "rdc_fixture_kernels".to_owned(),
        manifest_path: fixture("rdc-kernels/Cargo.toml"),
        root: fixture("rdc-kernels"),
        watch: Vec::new(),
        deps: Vec::new(),
        default_features: true,
        features: Vec::new(),
        panic: offload_build::PanicStrategy::Report,
    }
}

/// The image `Build` embeds for `arch` (the PTX one on NVIDIA), through the same call.
fn gpu_image(arch: &str, linked: &LinkedSources) -> DeviceImage {
    let arch = parse_list(arch, "the test").unwrap()[0];
    let dir = common::target_dir().join(format!("rdc-{}", arch.triple()));
    let extra: Vec<DeviceInput> = linked
        .bitcode_for(&arch)
        .map(|b| DeviceInput::object(b.name.clone(), b.bytes.clone()))
        .collect();
    assert_eq!(extra.len(), 1, "one source serves {arch}");
    let images = device_link::build_gpu_images(&Env::detect(), &rdc_crate(), &arch, &dir, &extra)
        .unwrap_or_else(|e| panic!("nested build and link for {arch}: {e}"));
    images
        .into_iter()
        .find(|i| i.image_kind != ImageKind::Cubin)
        .expect("a PTX or code-object image")
}

/// Both kernels' parameter sizes are recorded, so `extern_kernels!` checks a launch of the
/// CUDA/HIP kernel as it does one built from a separate source.
fn assert_params_recorded(image: &DeviceImage) {
    let mut params = image.kernel_params.clone();
    params.sort_by(|a, b| a.kernel.cmp(&b.kernel));
    let got: Vec<(&str, &[u32])> = params
        .iter()
        .map(|p| (p.kernel.as_str(), p.sizes.as_slice()))
        .collect();
    assert_eq!(
        got,
        [("square_all", &[4, 8][..]), ("twice_plus_one", &[8, 4][..])]
    );
}

#[test]
fn nvptx_image_resolves_rust_to_cuda_and_cuda_to_rust() {
    if !ready() {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let archs = parse_list("sm_80", "the test").unwrap();
    let linked = linked_sources(&archs, out.path());
    let ptx_image = gpu_image("sm_80", &linked);
    assert_params_recorded(&ptx_image);
    let ptx = String::from_utf8(ptx_image.bytes).unwrap();
    let mut kernels = ptx_image.kernels.clone();
    kernels.sort();
    assert_eq!(kernels, ["square_all", "twice_plus_one"], "{ptx}");
    assert!(
        !ptx.contains(".extern"),
        "every call resolved in the link:\n{ptx}"
    );
    let square_all = common::ptx_entry(&ptx, "square_all").join("\n");
    assert!(
        square_all.contains("0f3F000000"),
        "the CUDA function's `+ 0.5f` is in the Rust kernel:\n{square_all}"
    );
    let twice = common::ptx_entry(&ptx, "twice_plus_one").join("\n");
    assert!(
        twice.contains("0f3F800000") && !twice.contains("call"),
        "the CUDA kernel calls Rust's `rust_twice`, inlined:\n{twice}"
    );
    if Tool::Ptxas.for_test().is_some() {
        device_link::ptxas_assemble(&ptx, "sm_80").unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn amdgpu_image_resolves_rust_to_hip_and_hip_to_rust() {
    if !ready() {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let archs = parse_list("gfx90a", "the test").unwrap();
    let linked = linked_sources(&archs, out.path());
    let image = gpu_image("gfx90a", &linked);
    let mut kernels = image.kernels.clone();
    kernels.sort();
    assert_eq!(kernels, ["square_all", "twice_plus_one"]);
    assert_params_recorded(&image);
    let file = object::File::parse(&*image.bytes).unwrap();
    let undefined: Vec<String> = file
        .symbols()
        .filter(|s| s.is_undefined() && !s.name().unwrap_or("").is_empty())
        .map(|s| s.name().unwrap_or("").to_owned())
        .collect();
    assert!(undefined.is_empty(), "unresolved: {undefined:?}");
    let info = offload_format::image::amdgpu::inspect(&image.bytes).unwrap();
    assert!(info.kernels.iter().all(|k| k.has_descriptor_symbol));
    assert_eq!(info.abi_version, 3, "code object V5, as the Rust kernels'");
    let asm = common::disassemble(&image.bytes, "gfx90a", out.path());
    let body = common::function_body(&asm, "square_all").join("\n");
    assert!(
        body.contains("0.5") || body.contains("0x3f000000"),
        "the HIP function's `+ 0.5f` is in the Rust kernel:\n{body}"
    );
}

#[test]
fn cpu_image_links_the_sources_host_side() {
    if !ready() {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let archs = parse_list("host", "the test").unwrap();
    let linked = linked_sources(&archs, out.path());
    let library = linked.cpu_library.as_ref().expect("a host library");
    let krate = rdc_crate();
    let dir = common::target_dir().join("rdc-host");
    let image = offload_build::tooling::host_device::build(
        &Env::detect(),
        &krate,
        offload_format::CpuLevel::Baseline,
        &dir,
        Some(library),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(image.kernels, ["square_all"]);
    let file = object::File::parse(&*image.bytes).unwrap();
    let defined = |name: &str| {
        file.symbols()
            .chain(file.dynamic_symbols())
            .any(|s| s.name() == Ok(name) && s.is_definition())
    };
    let undefined: Vec<String> = file
        .dynamic_symbols()
        .filter(|s| s.is_undefined())
        .filter_map(|s| s.name().ok().map(str::to_owned))
        .filter(|n| n.contains("foreign") || n.contains("rust_twice"))
        .collect();
    assert!(undefined.is_empty(), "unresolved: {undefined:?}");
    assert!(defined("rust_twice"), "the Rust function the C++ calls");
}
