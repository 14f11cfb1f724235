//! Bundles written by us and by `clang-offload-bundler` (clang-22), each read by the other.

mod common;
use offload_toolchain::Tool;

use std::path::{Path, PathBuf};
use std::process::Command;

use offload_format::archive::{
    ArchiveMember, ArchiveUnbundleOptions, parse_archive, unbundle_archive, write_archive,
};
use offload_format::bundle::{
    BundleEntryId, BundleReader, TEXT_TYPES, binary_bundle_to_vec, check_bundle_targets,
    objcopy_args, parse_binary_bundle, parse_object_bundle, parse_text_bundle, write_text_bundle,
};
use offload_format::ccob::{self, CompressOptions, CompressionMethod};

struct Env {
    bundler: PathBuf,
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Option<Env> {
        Some(Env {
            bundler: common::tool(Tool::ClangOffloadBundler)?,
            dir: tempfile::tempdir().unwrap(),
        })
    }
    fn file(&self, name: &str, data: &[u8]) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, data).unwrap();
        p
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn bundler(&self) -> Command {
        let mut c = Command::new(&self.bundler);
        // Keep the user's OFFLOAD_BUNDLER_* settings out of the comparison.
        c.env("OFFLOAD_BUNDLER_IGNORE_ENV_VAR", "1");
        c
    }
    /// Bundles with the real tool; returns the output bytes.
    fn bundle(
        &self,
        ty: &str,
        targets: &[&str],
        inputs: &[&Path],
        align: Option<u64>,
        extra: &[&str],
    ) -> Vec<u8> {
        let out = self.path(&format!("theirs.{}.{ty}", rand_name()));
        let mut c = self.bundler();
        c.arg(format!("-type={ty}"))
            .arg(format!("-targets={}", targets.join(",")));
        for i in inputs {
            c.arg(format!("-input={}", i.display()));
        }
        c.arg(format!("-output={}", out.display()));
        if let Some(a) = align {
            c.arg(format!("-bundle-align={a}"));
        }
        c.args(extra);
        common::run(&mut c);
        std::fs::read(out).unwrap()
    }
    /// Unbundles one target with the real tool; returns its contents.
    fn unbundle(&self, ty: &str, target: &str, input: &Path) -> Vec<u8> {
        let out = self.path(&format!("unb.{}", rand_name()));
        common::run(
            self.bundler()
                .arg(format!("-type={ty}"))
                .arg(format!("-targets={target}"))
                .arg(format!("-input={}", input.display()))
                .arg(format!("-output={}", out.display()))
                .arg("-unbundle"),
        );
        std::fs::read(out).unwrap()
    }
    fn list(&self, ty: &str, input: &Path) -> Vec<String> {
        let out = common::run(
            self.bundler()
                .arg(format!("-type={ty}"))
                .arg(format!("-input={}", input.display()))
                .arg("-list"),
        );
        let mut v: Vec<String> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        v.sort();
        v
    }
}

fn rand_name() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!("{}", N.fetch_add(1, Ordering::Relaxed))
}

/// The binary-layout matrix: several target sets × alignments, including empty entries and
/// IDs that need normalizing.
fn binary_cases() -> Vec<Vec<(&'static str, Vec<u8>)>> {
    let big: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 256) as u8).collect();
    vec![
        vec![
            ("host-x86_64-unknown-linux-gnu", Vec::new()),
            ("hipv4-amdgcn-amd-amdhsa--gfx90a", big.clone()),
            (
                "hipv4-amdgcn-amd-amdhsa--gfx942:xnack+",
                b"gfx942 code".to_vec(),
            ),
        ],
        vec![
            ("host-x86_64-unknown-linux-gnu", b"host".to_vec()),
            ("openmp-nvptx64-nvidia-cuda--sm_80", b"ptx".to_vec()),
            (
                "openmp-amdgcn-amd-amdhsa-unknown-gfx906:sramecc-:xnack+",
                Vec::new(),
            ),
            ("openmp-x86_64-pc-linux-gnu", b"x".to_vec()),
        ],
        vec![
            ("hip-amdgcn-amd-amdhsa--gfx90a:xnack-", b"a".to_vec()),
            ("hipv4-amdgcn-amd-amdhsa--gfx1100", big),
        ],
        vec![
            ("host-x86_64-unknown-linux-gnu", b"h".to_vec()),
            (
                "hip-amdgcn-amd-amdhsa--foo",
                b"unknown processor dropped".to_vec(),
            ),
        ],
    ]
}

fn normalized(ids: &[&str]) -> Vec<String> {
    ids.iter()
        .map(|i| BundleEntryId::parse(i).unwrap().to_string())
        .collect()
}

#[test]
fn binary_layout_matches_both_ways() {
    let Some(env) = Env::new() else { return };
    for (ci, case) in binary_cases().into_iter().enumerate() {
        let ids: Vec<&str> = case.iter().map(|(i, _)| *i).collect();
        let parsed_ids: Vec<BundleEntryId> = ids
            .iter()
            .map(|i| BundleEntryId::parse(i).unwrap())
            .collect();
        check_bundle_targets(&parsed_ids).unwrap();
        let norm = normalized(&ids);
        let inputs: Vec<PathBuf> = case
            .iter()
            .enumerate()
            .map(|(i, (_, d))| env.file(&format!("in{ci}_{i}"), d))
            .collect();
        let input_refs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
        for align in [1u64, 4096] {
            let theirs = env.bundle("bc", &ids, &input_refs, Some(align), &[]);
            let entries: Vec<(&str, &[u8])> = norm
                .iter()
                .zip(&case)
                .map(|(id, (_, d))| (id.as_str(), d.as_slice()))
                .collect();
            let ours = binary_bundle_to_vec(&entries, align).unwrap();
            assert_eq!(ours, theirs, "case {ci} align {align}: bytes differ");
            // Ours read by clang.
            let ours_path = env.file(&format!("ours{ci}_{align}.bc"), &ours);
            let mut listed = env.list("bc", &ours_path);
            let mut want = norm.clone();
            want.sort();
            listed.dedup();
            assert_eq!(listed, want, "case {ci}: clang -list of ours");
            for (id, (_, data)) in norm.iter().zip(&case) {
                assert_eq!(
                    &env.unbundle("bc", id, &ours_path),
                    data,
                    "case {ci}: clang unbundles {id}"
                );
            }
            // Theirs read by us, streaming.
            let mut r = BundleReader::new(std::io::Cursor::new(&theirs)).unwrap();
            assert_eq!(
                r.entries().iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
                norm
            );
            for (i, (_, data)) in case.iter().enumerate() {
                assert_eq!(&r.read_entry(i).unwrap(), data);
            }
        }
    }
}

#[test]
fn text_layouts_match_both_ways() {
    let Some(env) = Env::new() else { return };
    let ids = [
        "host-x86_64-unknown-linux-gnu",
        "openmp-nvptx64-nvidia-cuda--sm_80",
        "hip-amdgcn-amd-amdhsa--gfx90a:xnack+",
    ];
    let norm = normalized(&ids);
    let data: [&[u8]; 3] = [b"int main(void) { return 0; }\n", b"", b"line1\nline2"];
    for (ty, _) in TEXT_TYPES {
        let inputs: Vec<PathBuf> = data
            .iter()
            .enumerate()
            .map(|(i, d)| env.file(&format!("t{i}.{ty}"), d))
            .collect();
        let refs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
        let theirs = env.bundle(ty, &ids, &refs, None, &[]);
        let mut ours = Vec::new();
        let entries: Vec<(&str, &[u8])> = norm.iter().map(String::as_str).zip(data).collect();
        write_text_bundle(&mut ours, ty, &entries).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&theirs),
            "type {ty}"
        );
        let parsed = parse_text_bundle(&theirs, ty).unwrap();
        assert_eq!(parsed.len(), 3);
        for (p, (id, d)) in parsed.iter().zip(norm.iter().zip(data)) {
            assert_eq!(
                (p.id.as_str(), p.data.as_ref()),
                (id.as_str(), d),
                "type {ty}"
            );
        }
        let ours_path = env.file(&format!("ours.{ty}"), &ours);
        for (id, d) in norm.iter().zip(data) {
            assert_eq!(
                env.unbundle(ty, id, &ours_path),
                d,
                "type {ty}: clang unbundles {id}"
            );
        }
    }
}

#[test]
fn object_layout_read_and_written_through_objcopy() {
    let Some(env) = Env::new() else { return };
    let Some(clang) = common::tool(Tool::Clang) else {
        return;
    };
    let Some(objcopy) = common::tool(Tool::LlvmObjcopy) else {
        return;
    };
    let src = env.file("host.c", b"int host_fn(void) { return 42; }\n");
    let host = env.path("host.o");
    common::run(Command::new(&clang).args(["-c", "-o"]).arg(&host).arg(&src));
    let ids = [
        "host-x86_64-unknown-linux-gnu",
        "openmp-nvptx64-nvidia-cuda--sm_80",
        "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
    ];
    let norm = normalized(&ids);
    let dev1 = env.file("d1.bin", b"device one");
    let dev2 = env.file("d2.bin", b"device two\0with nul");
    let theirs = env.bundle("o", &ids, &[&host, &dev1, &dev2], None, &[]);
    let entries = parse_object_bundle(&theirs).unwrap();
    let got: Vec<(String, Vec<u8>)> = entries
        .iter()
        .map(|e| (e.id.clone(), e.data.to_vec()))
        .collect();
    assert_eq!(
        got,
        vec![
            (norm[0].clone(), vec![0u8]),
            (norm[1].clone(), b"device one".to_vec()),
            (norm[2].clone(), b"device two\0with nul".to_vec()),
        ]
    );
    // Write the object layout with the arguments we give llvm-objcopy; clang reads it back.
    let zero = env.file("zero.bin", &[0]);
    let out = env.path("ours.o");
    let args = objcopy_args(
        &[(&norm[0], &zero), (&norm[1], &dev1), (&norm[2], &dev2)],
        &host,
        &out,
    );
    common::run(Command::new(&objcopy).args(&args));
    let ours = std::fs::read(&out).unwrap();
    assert_eq!(parse_object_bundle(&ours).unwrap(), entries);
    assert_eq!(env.unbundle("o", &norm[2], &out), b"device two\0with nul");
    assert_eq!(env.unbundle("o", &norm[1], &out), b"device one");
    let host_back = env.unbundle("o", &norm[0], &out);
    assert!(
        parse_object_bundle(&host_back).unwrap().is_empty(),
        "clang strips the bundle sections from the host"
    );
}

#[test]
fn compressed_bundles_both_ways() {
    let Some(env) = Env::new() else { return };
    let case = &binary_cases()[0];
    let ids: Vec<&str> = case.iter().map(|(i, _)| *i).collect();
    let inputs: Vec<PathBuf> = case
        .iter()
        .enumerate()
        .map(|(i, (_, d))| env.file(&format!("c{i}"), d))
        .collect();
    let refs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    let plain = env.bundle("o", &ids, &refs, Some(4096), &[]);
    // Theirs, v3 (default) and v2, zstd: we decompress to the same bundle.
    let v3 = env.bundle("o", &ids, &refs, Some(4096), &["-compress"]);
    let mut c = env.bundler();
    c.env_remove("OFFLOAD_BUNDLER_IGNORE_ENV_VAR")
        .env("COMPRESSED_BUNDLE_FORMAT_VERSION", "2");
    let v2_path = env.path("theirs_v2.hipfb");
    c.arg("-type=o")
        .arg(format!("-targets={}", ids.join(",")))
        .arg("-bundle-align=4096")
        .arg("-compress");
    for i in &inputs {
        c.arg(format!("-input={}", i.display()));
    }
    c.arg(format!("-output={}", v2_path.display()));
    common::run(&mut c);
    let v2 = std::fs::read(&v2_path).unwrap();
    for (version, blob) in [(3u16, &v3), (2, &v2)] {
        let (h, _) = ccob::CcobHeader::parse(blob, 0).unwrap();
        assert_eq!((h.version, h.method), (version, CompressionMethod::Zstd));
        assert_eq!(h.total_size, Some(blob.len() as u64));
        assert_eq!(h.hash, ccob::ccob_hash(&plain));
        assert_eq!(ccob::decompress(blob).unwrap().0, plain, "v{version}");
    }
    let any = offload_format::bundle::parse_any_bundle(&v3).unwrap();
    assert_eq!(any, parse_binary_bundle(&plain).unwrap());
    // Several of theirs back to back.
    let mut both = v3.clone();
    both.extend_from_slice(&v2);
    assert_eq!(
        ccob::decompress_all(&both).unwrap(),
        vec![plain.clone(), plain.clone()]
    );
    // Ours in every version and method, read by clang.
    for version in [2u16, 3] {
        for method in [CompressionMethod::Zlib, CompressionMethod::Zstd] {
            let blob = ccob::compress(
                &plain,
                CompressOptions {
                    version,
                    method,
                    level: None,
                },
            )
            .unwrap();
            let p = env.file(&format!("ours_v{version}_{method:?}.hipfb"), &blob);
            for (id, (_, data)) in normalized(&ids).iter().zip(case) {
                let mut c = env.bundler();
                c.env_remove("OFFLOAD_BUNDLER_IGNORE_ENV_VAR")
                    .env("OFFLOAD_BUNDLER_VERBOSE", "1");
                let out = env.path("ccob_out");
                common::run(
                    c.arg("-type=o")
                        .arg(format!("-targets={id}"))
                        .arg(format!("-input={}", p.display()))
                        .arg(format!("-output={}", out.display()))
                        .arg("-unbundle"),
                );
                assert_eq!(
                    &std::fs::read(&out).unwrap(),
                    data,
                    "v{version} {method:?} {id}"
                );
            }
        }
    }
}

#[test]
fn real_hip_fat_binary_from_clang() {
    let Some(env) = Env::new() else { return };
    let Some(clang) = common::tool(Tool::Clang) else {
        return;
    };
    let src = env.file(
        "k.hip",
        b"__attribute__((global)) void k(int *p) { *p = 1; }\n",
    );
    let out = env.path("k.hipfb");
    common::run(
        Command::new(&clang)
            .args([
                "-x",
                "hip",
                "--offload-arch=gfx90a",
                "--offload-arch=gfx942:xnack+",
                "-nogpulib",
                "-nogpuinc",
                "--cuda-device-only",
                "-c",
                "-o",
            ])
            .arg(&out)
            .arg(&src),
    );
    let bytes = std::fs::read(&out).unwrap();
    let entries = parse_binary_bundle(&bytes).unwrap();
    let ids: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "host-x86_64-unknown-linux-gnu-",
            "hipv4-amdgcn-amd-amdhsa--gfx90a",
            "hipv4-amdgcn-amd-amdhsa--gfx942:xnack+"
        ]
    );
    let r = BundleReader::new(std::io::Cursor::new(&bytes)).unwrap();
    assert_eq!(r.entries()[0].offset, 4096);
    assert_eq!(r.entries()[1].offset, 4096);
    assert_eq!(r.entries()[2].offset % 4096, 0);
    for e in &entries[1..] {
        assert_eq!(&e.data[..4], b"\x7fELF", "{}", e.id);
        // The code object's e_flags name the processor of its entry.
        let mach = e.data[48];
        let tid = BundleEntryId::parse(&e.id).unwrap().target_id.unwrap();
        let processor = offload_format::TargetId::parse(&tid).unwrap();
        assert_eq!(processor.amdgpu().unwrap().mach, mach);
    }
    // Re-bundling the entries gives the same bytes.
    let again: Vec<(&str, &[u8])> = entries
        .iter()
        .map(|e| (e.id.as_str(), e.data.as_ref()))
        .collect();
    assert_eq!(binary_bundle_to_vec(&again, 4096).unwrap(), bytes);
    // And the compatibility rules pick the right image for a device.
    let requested = BundleEntryId::parse("hip-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack+").unwrap();
    let r = BundleReader::new(std::io::Cursor::new(&bytes)).unwrap();
    assert_eq!(r.compatible(&requested, false), vec![2]);
    let requested = BundleEntryId::parse("hip-amdgcn-amd-amdhsa--gfx942:xnack-").unwrap();
    assert!(r.compatible(&requested, false).is_empty());
}

fn hda(env: &Env) -> (PathBuf, Vec<u8>) {
    let Some(ar) = common::tool(Tool::LlvmAr) else {
        panic!("llvm-ar missing")
    };
    let a = env.file("a.bin", b"gfx906 sramecc- xnack+");
    let b = env.file("b.bin", b"gfx906 sramecc+ xnack+");
    let c = env.file("c.bin", b"sm_80 code");
    let d = env.file("d.bin", b"gfx906 any");
    let host = env.file("h.bin", b"");
    let b1 = env.bundle(
        "bc",
        &[
            "host-x86_64-unknown-linux-gnu",
            "openmp-amdgcn-amd-amdhsa--gfx906:sramecc-:xnack+",
            "openmp-amdgcn-amd-amdhsa--gfx906:sramecc+:xnack+",
            "openmp-nvptx64-nvidia-cuda--sm_80",
        ],
        &[&host, &a, &b, &c],
        None,
        &[],
    );
    let b2 = env.bundle(
        "bc",
        &[
            "host-x86_64-unknown-linux-gnu",
            "openmp-amdgcn-amd-amdhsa--gfx906",
        ],
        &[&host, &d],
        None,
        &[],
    );
    let m1 = env.file("func_1.o", &b1);
    let m2 = env.file("func_2.o", &b2);
    let lib = env.path("libFat.a");
    common::run(Command::new(ar).arg("cr").arg(&lib).arg(&m1).arg(&m2));
    let bytes = std::fs::read(&lib).unwrap();
    (lib, bytes)
}

#[test]
fn heterogeneous_archives_match_clang() {
    let Some(env) = Env::new() else { return };
    let (lib, bytes) = hda(&env);
    let targets = [
        "openmp-amdgcn-amd-amdhsa--gfx906:sramecc+:xnack+",
        "openmp-nvptx64-nvidia-cuda--sm_80",
        "openmp-amdgcn-amd-amdhsa--gfx906:xnack-:sramecc-",
        "openmp-amdgcn-amd-amdhsa--gfx908",
    ];
    let outs: Vec<PathBuf> = (0..targets.len())
        .map(|i| env.path(&format!("dev{i}.a")))
        .collect();
    let mut c = env.bundler();
    c.args(["-unbundle", "-type=a", "-allow-missing-bundles"])
        .arg(format!("-targets={}", targets.join(",")))
        .arg(format!("-input={}", lib.display()));
    for o in &outs {
        c.arg(format!("-output={}", o.display()));
    }
    common::run(&mut c);
    let parsed: Vec<BundleEntryId> = targets
        .iter()
        .map(|t| BundleEntryId::parse(t).unwrap())
        .collect();
    let ours = unbundle_archive(
        &bytes,
        &parsed,
        ArchiveUnbundleOptions {
            allow_missing_bundles: true,
            ..Default::default()
        },
    )
    .unwrap();
    for (i, out) in outs.iter().enumerate() {
        let theirs_bytes = std::fs::read(out).unwrap();
        let theirs = parse_archive(&theirs_bytes).unwrap();
        let mut t: Vec<_> = theirs
            .iter()
            .map(|m| (m.name.clone(), m.data.to_vec()))
            .collect();
        let mut o: Vec<_> = ours[i]
            .iter()
            .map(|m| (m.name.clone(), m.data.to_vec()))
            .collect();
        t.sort();
        o.sort();
        assert_eq!(o, t, "target {}", targets[i]);
        // Our archive writer reproduces the bytes when the member order is the same.
        let same_order: Vec<ArchiveMember<'_>> = theirs.clone();
        let mut written = Vec::new();
        write_archive(&mut written, &same_order).unwrap();
        assert_eq!(written, theirs_bytes, "archive bytes for {}", targets[i]);
    }
    assert_eq!(ours[2].len(), 1, "gfx906 (any) serves xnack-/sramecc-");
    assert!(ours[3].is_empty());
    // Without allow-missing-bundles the missing target is an error on both sides.
    let err = unbundle_archive(&bytes, &parsed, ArchiveUnbundleOptions::default()).unwrap_err();
    assert!(err.to_string().contains("gfx908"), "{err}");
    let mut c = env.bundler();
    c.args(["-unbundle", "-type=a"])
        .arg(format!("-targets={}", targets[3]))
        .arg(format!("-input={}", lib.display()))
        .arg(format!("-output={}", env.path("x.a").display()));
    common::run_fail(&mut c);
}

#[test]
fn check_input_archive_agrees_with_clang() {
    let Some(env) = Env::new() else { return };
    let Some(ar) = common::tool(Tool::LlvmAr) else {
        return;
    };
    // clang refuses to bundle this combination, so the bundle is ours.
    let ids = [
        "host-x86_64-unknown-linux-gnu",
        "openmp-amdgcn-amd-amdhsa--gfx906",
        "openmp-amdgcn-amd-amdhsa--gfx906:xnack+",
    ];
    let parsed: Vec<BundleEntryId> = ids
        .iter()
        .map(|i| BundleEntryId::parse(i).unwrap())
        .collect();
    assert!(matches!(
        check_bundle_targets(&parsed),
        Err(offload_format::Error::BundleConflictingTargets { .. })
    ));
    let norm = normalized(&ids);
    let bad =
        binary_bundle_to_vec(&[(&norm[0], b""), (&norm[1], b"any"), (&norm[2], b"on")], 1).unwrap();
    let m = env.file("bad.o", &bad);
    let lib = env.path("libBad.a");
    common::run(Command::new(ar).arg("cr").arg(&lib).arg(&m));
    let target = "openmp-amdgcn-amd-amdhsa--gfx906:xnack+";
    let mut c = env.bundler();
    c.args(["-unbundle", "-type=a", "-check-input-archive"])
        .arg(format!("-targets={target}"))
        .arg(format!("-input={}", lib.display()))
        .arg(format!("-output={}", env.path("o.a").display()));
    common::run_fail(&mut c);
    let bytes = std::fs::read(&lib).unwrap();
    let t = [BundleEntryId::parse(target).unwrap()];
    let err = unbundle_archive(
        &bytes,
        &t,
        ArchiveUnbundleOptions {
            check_input_archive: true,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            offload_format::Error::ArchiveConflictingTargetIds { .. }
        ),
        "{err}"
    );
    // Without the check both sides accept it.
    assert!(unbundle_archive(&bytes, &t, ArchiveUnbundleOptions::default()).is_ok());
}

/// Two relocatable HIP objects (`-fgpu-rdc -c`, bundles in `__CLANG_OFFLOAD_BUNDLE__`
/// sections) archived by `llvm-ar`: the device archives we write are clang's, byte for byte,
/// symbol index included.
#[test]
fn archives_of_relocatable_objects_match_clang() {
    let Some(env) = Env::new() else { return };
    let Some(clang) = common::tool(Tool::Clang) else {
        return;
    };
    let Some(ar) = common::tool(Tool::LlvmAr) else {
        return;
    };
    let lib = rdc_archive(&env, &clang, &ar);
    let bytes = std::fs::read(&lib).unwrap();
    let target_sets: [&[&str]; 3] = [
        &["hipv4-amdgcn-amd-amdhsa--gfx90a"],
        &[
            "hipv4-amdgcn-amd-amdhsa--gfx90a",
            "hip-amdgcn-amd-amdhsa--gfx942:xnack+",
        ],
        &[
            "hip-amdgcn-amd-amdhsa--gfx942",
            "hipv4-amdgcn-amd-amdhsa--gfx1030",
        ],
    ];
    for targets in target_sets {
        let outs: Vec<PathBuf> = (0..targets.len())
            .map(|i| env.path(&format!("rdc{}_{i}.a", rand_name())))
            .collect();
        let mut c = env.bundler();
        c.args(["-unbundle", "-type=a", "-allow-missing-bundles"])
            .arg(format!("-targets={}", targets.join(",")))
            .arg(format!("-input={}", lib.display()));
        for o in &outs {
            c.arg(format!("-output={}", o.display()));
        }
        common::run(&mut c);
        let parsed: Vec<BundleEntryId> = targets
            .iter()
            .map(|t| BundleEntryId::parse(t).unwrap())
            .collect();
        let opts = ArchiveUnbundleOptions {
            allow_missing_bundles: true,
            ..Default::default()
        };
        let ours = unbundle_archive(&bytes, &parsed, opts).unwrap();
        for ((members, out), target) in ours.iter().zip(&outs).zip(targets) {
            let theirs = std::fs::read(out).unwrap();
            let mut written = Vec::new();
            write_archive(&mut written, members).unwrap();
            assert_eq!(written, theirs, "{target} of {targets:?}");
            if !target.contains("gfx1030") {
                assert_eq!(members.len(), 2, "{target}");
                assert!(
                    members.iter().all(|m| m.data.starts_with(b"BC")),
                    "{target}"
                );
                let data = &members[0].data;
                let syms = offload_format::bitcode::archive_symbols(data)
                    .unwrap()
                    .unwrap();
                assert!(syms.iter().any(|s| s == "ka"), "{syms:?}");
                // Damaged bitcode is an error or no symbols, never a panic or a hang.
                for cut in 0..data.len() {
                    let _ = offload_format::bitcode::archive_symbols(&data[..cut]);
                }
                for at in (0..data.len()).step_by(7) {
                    let mut bad = data.to_vec();
                    bad[at] ^= 0xa5;
                    let _ = offload_format::bitcode::archive_symbols(&bad);
                }
            }
        }
    }
    let missing = [BundleEntryId::parse("hipv4-amdgcn-amd-amdhsa--gfx1030").unwrap()];
    assert!(matches!(
        unbundle_archive(&bytes, &missing, ArchiveUnbundleOptions::default()),
        Err(offload_format::Error::ArchiveNoCompatibleEntry { .. })
    ));
}

/// `lib.a` of two objects from `clang -x hip --offload-arch=gfx90a --offload-arch=gfx942
/// -fgpu-rdc -c`.
fn rdc_archive(env: &Env, clang: &Path, ar: &Path) -> PathBuf {
    // Enough of the HIP runtime's declarations for the host side to compile without headers.
    let prelude = "struct dim3 { unsigned x, y, z; };\n\
        extern \"C\" int hipLaunchKernel(const void *, dim3, dim3, void **, unsigned long, void *);\n";
    let sources = [
        (
            "a",
            "extern \"C\" __attribute__((device)) int dev_a(int x) { return x + 1; }\n\
             extern \"C\" __attribute__((global)) void ka(int *p) { *p = dev_a(*p); }\n",
        ),
        (
            "b",
            "extern \"C\" __attribute__((device)) int dev_a(int);\n\
             extern \"C\" __attribute__((global)) void kb(int *p) { *p = dev_a(2); }\n",
        ),
    ];
    let mut objects = Vec::new();
    for (name, body) in sources {
        let src = env.file(
            &format!("{name}.hip"),
            format!("{prelude}{body}").as_bytes(),
        );
        let obj = env.path(&format!("{name}.o"));
        common::run(
            Command::new(clang)
                .args([
                    "-x",
                    "hip",
                    "--offload-arch=gfx90a",
                    "--offload-arch=gfx942",
                ])
                .args(["-fgpu-rdc", "-nogpulib", "-nogpuinc", "-c", "-o"])
                .arg(&obj)
                .arg(&src),
        );
        objects.push(obj);
    }
    let lib = env.path("librdc.a");
    common::run(Command::new(ar).arg("rc").arg(&lib).args(&objects));
    lib
}

/// A device archive whose entries are ELF objects made by clang (an OpenMP host-CPU target):
/// the archive clang writes indexes their global definitions, and so does ours.
#[test]
fn archive_index_of_elf_members_matches_clang() {
    let Some(env) = Env::new() else { return };
    let Some(clang) = common::tool(Tool::Clang) else {
        return;
    };
    let Some(ar) = common::tool(Tool::LlvmAr) else {
        return;
    };
    let src = env.file(
        "f.c",
        b"int gv = 3;\nstatic int sv;\nint f(void) { return gv + sv; }\n\
          __attribute__((weak)) int w(void) { return 1; }\n\
          __attribute__((visibility(\"hidden\"))) int h(void) { return 2; }\n\
          extern int u(void);\nint g(void) { return u(); }\n\
          int common_var __attribute__((common));\n",
    );
    let obj = env.path("fdev.o");
    common::run(
        Command::new(&clang)
            .args(["-c", "-fcommon", "-o"])
            .arg(&obj)
            .arg(&src),
    );
    let host = env.file("empty.bin", b"");
    let bundle = env.bundle(
        "bc",
        &[
            "host-x86_64-unknown-linux-gnu",
            "openmp-x86_64-pc-linux-gnu",
        ],
        &[&host, &obj],
        None,
        &[],
    );
    let member = env.file("fm.o", &bundle);
    let lib = env.path("libelf.a");
    common::run(Command::new(ar).arg("rc").arg(&lib).arg(&member));
    let target = "openmp-x86_64-pc-linux-gnu";
    let out = env.path("elf_out.a");
    common::run(
        env.bundler()
            .args(["-unbundle", "-type=a"])
            .arg(format!("-targets={target}"))
            .arg(format!("-input={}", lib.display()))
            .arg(format!("-output={}", out.display())),
    );
    let theirs = std::fs::read(&out).unwrap();
    let ours = unbundle_archive(
        &std::fs::read(&lib).unwrap(),
        &[BundleEntryId::parse(target).unwrap()],
        ArchiveUnbundleOptions::default(),
    )
    .unwrap();
    let mut written = Vec::new();
    write_archive(&mut written, &ours[0]).unwrap();
    assert_eq!(written, theirs);
    assert!(theirs.starts_with(b"!<arch>\n/ "), "clang wrote an index");
}

/// The index `llvm-ar` writes, member for member: an ELF object without global definitions
/// gets an empty index (a zero count and a zero word), data that is no object gets none, and
/// an object with definitions among other members indexes them. `llvm-ar rcD` (zero dates and
/// owners, mode 644) and our writer, byte for byte.
#[test]
fn archive_index_matches_llvm_ar_for_any_members() {
    let Some(env) = Env::new() else { return };
    let Some(clang) = common::tool(Tool::Clang) else {
        return;
    };
    let Some(ar) = common::tool(Tool::LlvmAr) else {
        return;
    };
    let compile = |name: &str, source: &[u8]| {
        let src = env.file(&format!("{name}.c"), source);
        let obj = env.path(&format!("{name}.o"));
        common::run(Command::new(&clang).arg("-c").arg(&src).arg("-o").arg(&obj));
        obj
    };
    let locals = compile("locals", b"static int hidden_counter;\n");
    let globals = compile(
        "globals",
        b"int seen = 1;\nint peek(void) { return seen; }\n",
    );
    let text = env.file("notes.txt", b"not an object\n");
    for (case, inputs) in [
        ("locals only", vec![&locals]),
        ("text only", vec![&text]),
        ("locals and text", vec![&text, &locals]),
        ("all three", vec![&locals, &text, &globals]),
    ] {
        let lib = env.path("llvm.a");
        let _ = std::fs::remove_file(&lib);
        common::run(Command::new(&ar).arg("rcD").arg(&lib).args(&inputs));
        let members: Vec<ArchiveMember<'_>> = inputs
            .iter()
            .map(|p| ArchiveMember {
                name: p.file_name().unwrap().to_string_lossy().into_owned(),
                data: std::fs::read(p).unwrap().into(),
            })
            .collect();
        let mut ours = Vec::new();
        write_archive(&mut ours, &members).unwrap();
        assert_eq!(ours, std::fs::read(&lib).unwrap(), "{case}");
    }
}

/// A compressed bundle made by clang with a wrong uncompressed-size field: every reader names
/// the field at its real offset (16 in version 3, 12 in version 2).
#[test]
fn compressed_size_errors_name_the_field_offset() {
    use std::io::Read;
    let Some(env) = Env::new() else { return };
    let host = env.file("sz_host", b"");
    let dev = env.file("sz_dev", b"device code");
    let ids = [
        "host-x86_64-unknown-linux-gnu",
        "hipv4-amdgcn-amd-amdhsa--gfx90a",
    ];
    let v3 = env.bundle("bc", &ids, &[&host, &dev], None, &["-compress"]);
    let v2_path = env.path("sz_v2.ccob");
    common::run(
        env.bundler()
            .env_remove("OFFLOAD_BUNDLER_IGNORE_ENV_VAR")
            .env("COMPRESSED_BUNDLE_FORMAT_VERSION", "2")
            .args(["-type=bc", "-compress"])
            .arg(format!("-targets={}", ids.join(",")))
            .arg(format!("-input={}", host.display()))
            .arg(format!("-input={}", dev.display()))
            .arg(format!("-output={}", v2_path.display())),
    );
    let v2 = std::fs::read(&v2_path).unwrap();
    let mut cases = Vec::new();
    for size in [1u64 << 32, 1 << 40, 1 << 63, u64::MAX] {
        let mut bad = v3.clone();
        bad[16..24].copy_from_slice(&size.to_le_bytes());
        cases.push((bad, 16u64));
    }
    let mut bad = v2.clone();
    bad[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    cases.push((bad, 12));
    let size_field = |e: offload_format::Error| match e {
        offload_format::Error::CcobSizeMismatch { offset, .. } => offset,
        other => panic!("{other}"),
    };
    for (bad, field) in cases {
        assert_eq!(size_field(ccob::decompress(&bad).unwrap_err()), field);
        let streamed = offload_format::ccob_stream::decompress_stream(
            bad.as_slice(),
            std::io::sink(),
            0,
            bad.len() as u64,
        );
        assert_eq!(size_field(streamed.unwrap_err()), field);
        let mut r =
            offload_format::ccob_stream::CcobReader::new(bad.as_slice(), 0, bad.len() as u64)
                .unwrap();
        let err = r.read_to_end(&mut Vec::new()).unwrap_err();
        assert_eq!(
            size_field(offload_format::ccob_stream::into_format_error(err)),
            field
        );
    }
}
