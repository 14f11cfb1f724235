//! `inspect` and the bundle operations on files made here: their results, and their text
//! output as snapshots.

use std::path::Path;

use offload_format::offload_binary::{
    KEY_KERNEL_RESOURCES, PtxasKernelInfo, encode_kernel_resources,
};
use offload_format::{ImageKind, OffloadBinary, OffloadKind};
use offload_tools::inspect::{
    PtxasFallback, ResourceSource, inspect, inspect_all, inspect_with, render_report, render_text,
};
use offload_tools::ops::OpsError;
use offload_tools::ops::bundle::{BundleConfig, Layout, bundle, layout_of, list, unbundle};
use snapbox::{assert_data_eq, str};

/// Two images of one module, as `package-kernels` writes them: a PTX and a CPU object.
fn two_images() -> Vec<u8> {
    let ptx = OffloadBinary::new(
        ImageKind::Ptx,
        OffloadKind::Cuda,
        &b".version 7.8\n.target sm_80\n"[..],
    )
    .with_string("triple", "nvptx64-nvidia-cuda")
    .with_string("arch", "sm_80")
    .with_string("offload.module", "demo")
    .with_string("offload.kernels", "saxpy,scale");
    let host = OffloadBinary::new(
        ImageKind::Object,
        OffloadKind::OpenMp,
        &b"\x7fELF not really"[..],
    )
    .with_string("triple", "x86_64-unknown-linux-gnu")
    .with_string("arch", "host")
    .with_string("offload.module", "demo")
    .with_string("offload.kernels", "saxpy,scale");
    let mut bytes = ptx.to_bytes();
    bytes.extend(host.to_bytes());
    bytes
}

#[test]
fn inspect_lists_every_image_of_a_bundle_file() {
    let images = inspect(&two_images()).unwrap();
    assert_eq!(images.len(), 2);
    assert_eq!(images[0].arch, "sm_80");
    assert_eq!(images[1].triple, "x86_64-unknown-linux-gnu");
    assert_eq!(images[0].kernels, ["saxpy", "scale"]);
    assert_data_eq!(
        render_text("demo.offload", &images),
        str![[r#"
demo.offload: 2 offload image(s)

[0] nvptx64-nvidia-cuda sm_80  kind ptx  producer cuda  size 27 bytes  (file[0])
    module   demo
    kernels  saxpy, scale

[1] x86_64-unknown-linux-gnu host  kind elf  producer openmp  size 15 bytes  (file[1])
    module   demo
    kernels  saxpy, scale

PTX only, no cubin (the CUDA driver JIT-compiles it): sm_80

"#]]
    );
}

#[test]
fn inspect_of_a_damaged_bundle_is_an_error_and_of_other_files_nothing() {
    let mut bytes = two_images();
    bytes.truncate(bytes.len() - 3);
    assert!(inspect(&bytes).is_err());
    assert!(inspect(b"just some text").unwrap().is_empty());
    let report = inspect_all(b"just some text").unwrap();
    assert_data_eq!(
        render_report("notes.txt", &report),
        str![[r#"
notes.txt: 0 offload image(s)

"#]]
    );
}

/// A cubin and a PTX image of `sm_80` as the build packs them, with the figures of its `ptxas
/// -v` run under `offload.kernel-resources` (`value`). Neither image is one `ptxas` could read,
/// so figures shown come from the key.
fn images_recording(value: &str) -> Vec<u8> {
    let mut bytes = Vec::new();
    for (kind, image) in [
        (ImageKind::Cubin, &b"\x7fELF not a cubin"[..]),
        (ImageKind::Ptx, &b"not PTX"[..]),
    ] {
        let bin = OffloadBinary::new(kind, OffloadKind::Cuda, image)
            .with_string("triple", "nvptx64-nvidia-cuda")
            .with_string("arch", "sm_80")
            .with_string("offload.module", "demo")
            .with_string("offload.kernels", "saxpy,block_sum")
            .with_string(KEY_KERNEL_RESOURCES, value);
        bytes.extend(bin.to_bytes());
    }
    bytes
}

#[test]
fn inspect_shows_the_figures_the_build_recorded() {
    let recorded = encode_kernel_resources(&[
        PtxasKernelInfo {
            name: "saxpy".into(),
            registers: 8,
            constant_bytes: 372,
            ..PtxasKernelInfo::default()
        },
        PtxasKernelInfo {
            name: "block_sum".into(),
            registers: 12,
            shared_bytes: 2048,
            stack_bytes: 16,
            spill_store_bytes: 4,
            spill_load_bytes: 8,
            constant_bytes: 376,
        },
    ]);
    let images = inspect(&images_recording(&recorded)).unwrap();
    for image in &images {
        assert_eq!(image.resources_from, Some(ResourceSource::Recorded));
        assert_eq!(image.resources_error, None);
    }
    assert_eq!(
        inspect_with(&images_recording(&recorded), PtxasFallback::Never).unwrap(),
        images
    );
    assert_data_eq!(
        render_text("demo.offload", &images),
        str![[r#"
demo.offload: 2 offload image(s)

[0] nvptx64-nvidia-cuda sm_80  kind cubin  producer cuda  size 16 bytes  (file[0])
    module   demo
    kernels  saxpy, block_sum
      saxpy: registers 8, shared 0, scratch 0, constant 372
      block_sum: registers 12, shared 2048, scratch 16, constant 376, spill stores 4, spill loads 8

[1] nvptx64-nvidia-cuda sm_80  kind ptx  producer cuda  size 7 bytes  (file[1])
    module   demo
    kernels  saxpy, block_sum
      saxpy: registers 8, shared 0, scratch 0, constant 372
      block_sum: registers 12, shared 2048, scratch 16, constant 376, spill stores 4, spill loads 8

"#]]
    );
}

/// Damaged figures are named with their error code, never a panic nor a failed inspection;
/// the rest of the image is shown.
#[test]
fn unreadable_recorded_figures_are_named() {
    for bad in [
        "saxpy",
        "saxpy:registers=x",
        "saxpy:registers=4294967296,shared=0,stack=0,spill-stores=0,spill-loads=0,constant=0",
        "saxpy:registers=1;saxpy:registers=1",
        "\u{fffd};",
    ] {
        let images =
            inspect_with(&images_recording(bad), PtxasFallback::Never).unwrap_or_else(|e| {
                panic!("{bad:?}: {e}");
            });
        assert_eq!(images.len(), 2);
        for image in &images {
            assert!(image.resources.is_empty(), "{bad:?}");
            assert_eq!(image.resources_from, None, "{bad:?}");
            let error = image.resources_error.as_deref().unwrap_or_default();
            assert!(
                error.starts_with("error[OFF1066]: offload.kernel-resources: "),
                "{bad:?}: {error}"
            );
            assert_eq!(image.kernels, ["saxpy", "block_sum"]);
        }
        let text = render_text("demo.offload", &images);
        assert!(
            text.contains("      recorded figures unreadable: error[OFF1066]"),
            "{text}"
        );
    }
}

/// Without the key and with `ptxas` not to be run, a PTX image shows no figures.
#[test]
fn without_recorded_figures_and_ptxas_nothing_is_shown() {
    let images = inspect_with(&two_images(), PtxasFallback::Never).unwrap();
    assert!(images.iter().all(|i| i.resources.is_empty()));
    assert!(images.iter().all(|i| i.resources_from.is_none()));
}

#[test]
fn layouts_follow_the_file_type() {
    assert_eq!(layout_of("i").unwrap(), Layout::Text("//"));
    assert_eq!(layout_of("ll").unwrap(), Layout::Text(";"));
    assert_eq!(layout_of("bc").unwrap(), Layout::Binary);
    assert_eq!(layout_of("o").unwrap(), Layout::Object);
    assert_eq!(layout_of("a").unwrap(), Layout::Archive);
    assert!(matches!(
        layout_of("exe"),
        Err(OpsError::UnknownFileType { file_type }) if file_type == "exe"
    ));
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn bundle_list_and_unbundle_round_trip_in_every_simple_layout() {
    let dir = tempfile::tempdir().unwrap();
    let targets = vec![
        "host-x86_64-unknown-linux-gnu".to_owned(),
        "hipv4-amdgcn-amd-amdhsa--gfx90a".to_owned(),
    ];
    for (file_type, compress) in [("bc", false), ("bc", true), ("ll", false)] {
        let host = write(dir.path(), "host.in", b"; host part\n");
        let device = write(dir.path(), "dev.in", b"; device part\n");
        let bundled = dir.path().join(format!("bundle.{file_type}.{compress}"));
        bundle(&BundleConfig {
            file_type: file_type.into(),
            targets: targets.clone(),
            inputs: vec![host, device],
            outputs: vec![bundled.clone()],
            compress: compress.then(Default::default),
            ..BundleConfig::default()
        })
        .unwrap();
        // `-list` prints the normalized IDs, as clang's bundler does (`host-<triple>-`).
        assert_eq!(
            list(file_type, &bundled, false).unwrap(),
            [
                "host-x86_64-unknown-linux-gnu-",
                "hipv4-amdgcn-amd-amdhsa--gfx90a"
            ],
            "{file_type}"
        );
        let (out_host, out_dev) = (dir.path().join("host.out"), dir.path().join("dev.out"));
        unbundle(&BundleConfig {
            file_type: file_type.into(),
            targets: targets.clone(),
            inputs: vec![bundled.clone()],
            outputs: vec![out_host.clone(), out_dev.clone()],
            ..BundleConfig::default()
        })
        .unwrap();
        assert_eq!(
            std::fs::read(&out_host).unwrap(),
            b"; host part\n",
            "{file_type}"
        );
        assert_eq!(
            std::fs::read(&out_dev).unwrap(),
            b"; device part\n",
            "{file_type}"
        );
        // A target the bundle lacks is an error naming it, and no output is left behind.
        let missing = dir.path().join("missing.out");
        let err = unbundle(&BundleConfig {
            file_type: file_type.into(),
            targets: vec!["hipv4-amdgcn-amd-amdhsa--gfx942".into()],
            inputs: vec![bundled],
            outputs: vec![missing.clone()],
            ..BundleConfig::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("gfx942"), "{err}");
        assert!(!missing.exists());
    }
}
