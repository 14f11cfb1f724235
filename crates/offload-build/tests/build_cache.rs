//! The shared cache of nested-build units (`build_cache`): a new target directory is seeded
//! from what another one built, so its device build compiles the kernel crate and its path
//! dependencies alone; the device link's images are kept by content beside it, so that build
//! runs neither the link nor `ptxas`; and the nested builds go through `RUSTC_WRAPPER`
//! (`sccache`), like the outer one.
#![cfg(feature = "llvm")]

mod common;

use std::path::Path;

use offload_build::OffloadArch;
use offload_build::tooling::arch::parse_list;
use offload_build::tooling::device_link;
use offload_build::tooling::env::Env;
use offload_format::ImageKind;

fn ptx(arch: &OffloadArch, target_dir: &Path) -> Vec<u8> {
    device_link::build_gpu_images(&Env::detect(), &common::rt_kernels(), arch, target_dir, &[])
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .find(|i| i.image_kind == ImageKind::Ptx)
        .expect("a PTX image")
        .bytes
}

/// The crates the wrapper saw compiled since `log` was last emptied.
fn compiled(log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    std::fs::write(log, "").unwrap();
    text.lines()
        .filter_map(|l| l.split(" --crate-name ").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        // Cargo's probe of the compiler, not a crate.
        .filter(|name| *name != "___")
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_new_target_directory_is_seeded_and_builds_only_the_kernel_crate() {
    if !common::nightly_ready() {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let cache = scratch.path().join("cache");
    let log = scratch.path().join("rustc.log");
    let wrapper = scratch.path().join("log-rustc.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    // A `ptxas` that notes each image it assembles, then runs the real one.
    let real_ptxas = offload_toolchain::Tool::Ptxas
        .find()
        .unwrap_or_else(|e| panic!("{e}"));
    let assembled = scratch.path().join("ptxas.log");
    let ptxas = scratch.path().join("log-ptxas.sh");
    std::fs::write(
        &ptxas,
        format!(
            "#!/bin/sh
case \"$*\" in *-arch=*) echo \"$*\" >> '{}';; esac\nexec '{}' \"$@\"\n",
            assembled.display(),
            real_ptxas.display()
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("755")
        .arg(&wrapper)
        .arg(&ptxas)
        .status()
        .unwrap();
    let assemblies = || {
        let text = std::fs::read_to_string(&assembled).unwrap_or_default();
        std::fs::write(&assembled, "").unwrap();
        text.lines().count()
    };
    // SAFETY: this test binary has this one test, and nothing else in it reads or writes the
    // environment meanwhile.
    unsafe {
        std::env::set_var("OFFLOAD_BUILD_CACHE", &cache);
        std::env::set_var("RUSTC_WRAPPER", &wrapper);
        std::env::set_var("OFFLOAD_PTXAS", &ptxas);
    }
    let arch = parse_list("sm_80", "the test").unwrap()[0];

    // A warm target directory (kept between test runs) fills the empty cache.
    let first = common::target_dir().join("cache-a/nvptx64-nvidia-cuda");
    let first_ptx = ptx(&arch, &first);
    let core = |dir: &Path| {
        let deps = dir.join("nvptx64-nvidia-cuda/release/deps");
        let rlib = std::fs::read_dir(&deps)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                name.starts_with("libcore-") && name.ends_with(".rlib")
            })
            .unwrap_or_else(|| panic!("no libcore in {}", deps.display()));
        std::fs::metadata(rlib).unwrap().modified().unwrap()
    };
    assert!(
        cache.join("v2/nvptx64-nvidia-cuda").is_dir(),
        "the cache was filled"
    );
    compiled(&log);
    let links = cache.join("v2/device-links");
    let kept = || std::fs::read_dir(&links).map_or(0, |d| d.count());
    assert_eq!(kept(), 1, "the link's images were kept");
    assemblies();

    // A new one, as a new project's: seeded, it compiles the kernel crate and its path
    // dependencies (the device API here; from crates.io it would come from the cache too),
    // not `core` nor any crates.io crate, through the wrapper, and links the same image.
    // `offload_format` twice: for the device (the ABI's names, no features) and for the host
    // (the kernel macros' templates).
    let fresh = tempfile::tempdir().unwrap();
    let second = fresh.path().join("nvptx64-nvidia-cuda");
    let second_ptx = ptx(&arch, &second);
    let mut crates = compiled(&log);
    crates.sort();
    assert_eq!(
        crates,
        [
            "offload_format",
            "offload_format",
            "offload_macros",
            "offload_rt",
            "rt_fixture_kernels"
        ]
    );
    assert_eq!(core(&second), core(&first), "core came from the cache");
    assert_eq!(second_ptx, first_ptx);
    assert_eq!(
        (assemblies(), kept()),
        (0, 1),
        "the same bitcode's images came from the cache: no ptxas run, nothing new kept"
    );

    // Off: a new directory builds everything, `core` included.
    // SAFETY: as above.
    unsafe { std::env::set_var("OFFLOAD_BUILD_CACHE", "off") };
    let third = fresh.path().join("off/nvptx64-nvidia-cuda");
    ptx(&arch, &third);
    let crates = compiled(&log);
    assert!(crates.iter().any(|c| c == "core"), "{crates:?}");
    assert_eq!(
        assemblies(),
        1,
        "without the cache, ptxas assembles the image again"
    );
}
