//! `cargo offload bundle` / `package` / `inspect` against clang-22's own tools: the same
//! arguments given to both, outputs compared byte for byte (or, for compressed bundles, by
//! header fields and decompressed contents), and each side's output read by the other.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use offload_format::ccob::{self, CcobHeader};

mod common;
use common::llvm_tool as tool;
use offload_toolchain::Tool;

fn clang() -> Option<PathBuf> {
    Tool::Clang.for_test()
}

fn check(out: Output, what: &str) -> Vec<u8> {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// clang's flags for OpenMP target offload to the host CPU.
const OPENMP_HOST_OFFLOAD: &[&str] = &["-fopenmp", "-fopenmp-targets=x86_64-unknown-linux-gnu"];

/// File contents that print as their length and first bytes when an assertion fails.
#[derive(PartialEq, Eq)]
struct Bytes(Vec<u8>);

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let head = &self.0[..self.0.len().min(48)];
        write!(f, "{} bytes, starting {:02x?}", self.0.len(), head)
    }
}

impl Bytes {
    fn starts_with(&self, p: &[u8]) -> bool {
        self.0.starts_with(p)
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

struct Bench {
    bundler: PathBuf,
    dir: tempfile::TempDir,
}

impl Bench {
    fn new() -> Option<Bench> {
        Some(Bench {
            bundler: tool(Tool::ClangOffloadBundler)?,
            dir: tempfile::tempdir().unwrap(),
        })
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn file(&self, name: &str, data: &[u8]) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, data).unwrap();
        p
    }
    fn read(&self, name: &str) -> Bytes {
        Bytes(std::fs::read(self.path(name)).unwrap_or_else(|e| panic!("{name}: {e}")))
    }
    /// Runs `clang-offload-bundler` (`theirs`) or `cargo offload bundle` with `args`, in the
    /// temporary directory; `{tag}` in an argument becomes `clang` or `ours`.
    fn run(&self, theirs: bool, args: &[&str]) -> Output {
        let tag = if theirs { "clang" } else { "ours" };
        let mut cmd = if theirs {
            Command::new(&self.bundler)
        } else {
            let mut c = Command::new(env!("CARGO_BIN_EXE_cargo-offload"));
            c.args(["offload", "bundle"]);
            c
        };
        cmd.args(args.iter().map(|a| a.replace("{tag}", tag)))
            .current_dir(self.dir.path())
            .env("OFFLOAD_BUNDLER_IGNORE_ENV_VAR", "1");
        cmd.output().unwrap()
    }
    fn both(&self, args: &[&str]) {
        check(self.run(true, args), "clang-offload-bundler");
        check(self.run(false, args), "cargo offload bundle");
    }
    fn ours(&self, args: &[&str]) -> Vec<u8> {
        check(self.run(false, args), "cargo offload bundle")
    }
    fn theirs(&self, args: &[&str]) -> Vec<u8> {
        check(self.run(true, args), "clang-offload-bundler")
    }
    /// Compiles `source` with clang-22 and `flags` into `output` in the temporary directory.
    /// Compiles `source` to the object `output` with clang's OpenMP offload to the host CPU
    /// (its device images in a `.llvm.offloading` section).
    fn compile_openmp_object(&self, clang: &Path, source: &Path, output: &str) {
        let mut flags = OPENMP_HOST_OFFLOAD.to_vec();
        flags.push("-c");
        self.compile(clang, &flags, source, output);
    }
    fn compile(&self, clang: &Path, flags: &[&str], source: &Path, output: &str) {
        let out = Command::new(clang)
            .args(flags)
            .arg(source)
            .arg("-o")
            .arg(self.path(output))
            .output()
            .unwrap();
        check(out, &format!("clang-22 {}", flags.join(" ")));
    }
    /// Runs `llvm-offload-binary` at `llvm` (`theirs`) or `cargo offload package` with `args`
    /// in the temporary directory; their stdout.
    fn package(&self, llvm: &Path, theirs: bool, args: &[&str]) -> Vec<u8> {
        let mut cmd = if theirs {
            Command::new(llvm)
        } else {
            let mut c = Command::new(env!("CARGO_BIN_EXE_cargo-offload"));
            c.args(["offload", "package"]);
            c
        };
        cmd.args(args).current_dir(self.dir.path());
        check(cmd.output().unwrap(), "package")
    }
}

fn sorted_lines(out: &[u8]) -> Vec<String> {
    let mut v: Vec<String> = String::from_utf8_lossy(out)
        .lines()
        .map(str::to_owned)
        .collect();
    v.sort();
    v
}

/// Inputs: binary data, text, an empty file.
fn payloads(b: &Bench) -> Vec<String> {
    // Not ELF: clang treats anything with an ELF magic as an object file and parses it.
    let mut code = b"\x7fCODE\x02\x01\x01\0".to_vec();
    code.extend((0..5000u32).flat_map(|i| (i.wrapping_mul(2_654_435_761) >> 7).to_le_bytes()));
    b.file("host.bin", &code);
    b.file("dev1.bin", b"define void @k() {\n  ret void\n}\n");
    b.file("dev2.bin", &code[..3001]);
    b.file("empty.bin", b"");
    ["host.bin", "dev1.bin", "dev2.bin", "empty.bin"]
        .map(str::to_owned)
        .to_vec()
}

/// Bundles with both tools, compares, then has each side unbundle the other's output and
/// compares the pieces with the inputs; `-list` must name the same IDs.
fn round_trip(b: &Bench, ty: &str, targets: &[&str], inputs: &[&str], extra: &[&str]) {
    let t = format!("-targets={}", targets.join(","));
    let ins: Vec<String> = inputs.iter().map(|i| format!("-input={i}")).collect();
    let mut args: Vec<&str> = vec![];
    let ty_arg = format!("-type={ty}");
    args.push(&ty_arg);
    args.push(&t);
    args.extend(ins.iter().map(String::as_str));
    args.push("-output={tag}.bundle");
    args.extend(extra);
    b.both(&args);
    let what = format!("{ty} {targets:?} {extra:?}");
    assert_eq!(b.read("clang.bundle"), b.read("ours.bundle"), "{what}");

    for (reader_is_clang, bundle) in [(true, "ours.bundle"), (false, "clang.bundle")] {
        let outs: Vec<String> = (0..targets.len())
            .map(|i| format!("-output=u{i}"))
            .collect();
        let input = format!("-input={bundle}");
        let mut a: Vec<&str> = vec![&ty_arg, &t, "-unbundle", &input];
        a.extend(outs.iter().map(String::as_str));
        check(b.run(reader_is_clang, &a), &format!("unbundle {bundle}"));
        for (i, input) in inputs.iter().enumerate() {
            assert_eq!(
                b.read(&format!("u{i}")),
                b.read(input),
                "{what}: entry {i} of {bundle} read by {}",
                if reader_is_clang { "clang" } else { "ours" }
            );
        }
        let input = format!("-input={bundle}");
        let theirs = b.theirs(&[&ty_arg, "-list", &input]);
        let ours = b.ours(&[&ty_arg, "-list", &input]);
        assert_eq!(sorted_lines(&theirs), sorted_lines(&ours), "{what}: -list");
    }
}

#[test]
fn binary_layout_matches_clang_byte_for_byte() {
    let Some(b) = Bench::new() else { return };
    payloads(&b);
    let host_omp = [
        "host-x86_64-unknown-linux-gnu",
        "openmp-nvptx64-nvidia-cuda--sm_80",
        "openmp-amdgcn-amd-amdhsa--gfx90a:xnack+",
    ];
    for align in ["1", "8", "4096"] {
        let a = format!("-bundle-align={align}");
        round_trip(
            &b,
            "bc",
            &host_omp,
            &["host.bin", "dev1.bin", "dev2.bin"],
            &[&a],
        );
    }
    // Empty entries, HIP kinds, target IDs with features, the empty host entry of a fatbin.
    round_trip(
        &b,
        "o",
        &[
            "host-x86_64-unknown-linux-gnu",
            "hipv4-amdgcn-amd-amdhsa--gfx90a",
            "hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",
            "hip-amdgcn-amd-amdhsa--gfx1100",
        ],
        &["empty.bin", "dev2.bin", "empty.bin", "dev1.bin"],
        &["-bundle-align=4096"],
    );
    round_trip(
        &b,
        "gch",
        &[
            "hip-amdgcn-amd-amdhsa--gfx90a",
            "hipv4-amdgcn-amd-amdhsa--gfx908",
        ],
        &["dev1.bin", "dev2.bin"],
        &[],
    );
    // Single-dash and double-dash spellings are the same tool.
    b.ours(&[
        "--type=ast",
        "--targets=host-x86_64-unknown-linux-gnu,openmp-x86_64-pc-linux-gnu",
        "--input=host.bin",
        "--input=dev1.bin",
        "--output=dd.bundle",
    ]);
    b.theirs(&[
        "-type=ast",
        "-targets=host-x86_64-unknown-linux-gnu,openmp-x86_64-pc-linux-gnu",
        "-input=host.bin",
        "-input=dev1.bin",
        "-output=sd.bundle",
    ]);
    assert_eq!(b.read("dd.bundle"), b.read("sd.bundle"));
}

#[test]
fn text_layouts_match_clang() {
    let Some(b) = Bench::new() else { return };
    payloads(&b);
    for ty in ["i", "ii", "cui", "hipi", "d", "ll", "s"] {
        round_trip(
            &b,
            ty,
            &[
                "openmp-nvptx64-nvidia-cuda--sm_80",
                "host-x86_64-unknown-linux-gnu",
            ],
            &["dev1.bin", "empty.bin"],
            &[],
        );
    }
}

#[test]
fn object_layout_with_a_real_host_object() {
    let Some(b) = Bench::new() else { return };
    let Some(clang) = clang() else { return };
    payloads(&b);
    let src = b.file("h.c", b"int answer(void) { return 42; }\n");
    b.compile(&clang, &["-c", "-O1"], &src, "h.o");
    let targets = "-targets=host-x86_64-unknown-linux-gnu,openmp-nvptx64-nvidia-cuda--sm_80,hipv4-amdgcn-amd-amdhsa--gfx90a";
    b.both(&[
        "-type=o",
        targets,
        "-input=h.o",
        "-input=dev1.bin",
        "-input=dev2.bin",
        "-output={tag}.o",
    ]);
    assert_eq!(b.read("clang.o"), b.read("ours.o"));
    for (theirs, input) in [(true, "ours.o"), (false, "clang.o")] {
        let input = format!("-input={input}");
        check(
            b.run(
                theirs,
                &[
                    "-type=o",
                    targets,
                    "-unbundle",
                    &input,
                    "-output={tag}.host.o",
                    "-output={tag}.d1",
                    "-output={tag}.d2",
                ],
            ),
            "unbundle object",
        );
    }
    // The host entry is the object without the bundle sections, identically on both sides.
    assert_eq!(b.read("clang.host.o"), b.read("ours.host.o"));
    assert!(
        !String::from_utf8_lossy(&b.read("ours.host.o").0).contains("__CLANG_OFFLOAD_BUNDLE__")
    );
    assert_eq!(b.read("ours.d1"), b.read("dev1.bin"));
    assert_eq!(b.read("clang.d2"), b.read("dev2.bin"));
}

fn ccob_header(bytes: &[u8]) -> CcobHeader {
    CcobHeader::parse(bytes, 0).unwrap().0
}

#[test]
fn compressed_bundles_read_both_ways() {
    let Some(b) = Bench::new() else { return };
    payloads(&b);
    let targets = "-targets=host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx90a,hipv4-amdgcn-amd-amdhsa--gfx942:xnack+";
    let ins = ["-input=host.bin", "-input=dev1.bin", "-input=dev2.bin"];
    let cases: [(&str, &[&str]); 4] = [
        ("bc", &[]),
        ("bc", &["-compression-level=9"]),
        ("o", &["-bundle-align=4096"]),
        ("ll", &[]),
    ];
    for (ty, extra) in cases {
        let ty = format!("-type={ty}");
        let mut args = vec![ty.as_str(), targets, "-compress", "-output={tag}.ccob"];
        args.extend(ins);
        args.extend(extra);
        b.both(&args);
        let (theirs, ours) = (b.read("clang.ccob").0, b.read("ours.ccob").0);
        let (th, oh) = (ccob_header(&theirs), ccob_header(&ours));
        assert_eq!((th.version, th.method), (oh.version, oh.method), "{args:?}");
        assert_eq!(
            (th.uncompressed_size, th.hash),
            (oh.uncompressed_size, oh.hash),
            "{args:?}"
        );
        assert_eq!(
            Bytes(ccob::decompress(&theirs).unwrap().0),
            Bytes(ccob::decompress(&ours).unwrap().0),
            "{args:?}"
        );
        for (theirs, input) in [(true, "ours.ccob"), (false, "clang.ccob")] {
            let input = format!("-input={input}");
            check(
                b.run(
                    theirs,
                    &[
                        &ty,
                        targets,
                        "-unbundle",
                        &input,
                        "-output=c0",
                        "-output=c1",
                        "-output=c2",
                    ],
                ),
                "unbundle compressed",
            );
            assert_eq!(b.read("c0"), b.read("host.bin"));
            assert_eq!(b.read("c1"), b.read("dev1.bin"));
            assert_eq!(b.read("c2"), b.read("dev2.bin"));
        }
    }
    // Version 2 (clang: through its environment variable) and zlib (ours only; clang reads it).
    let mut theirs = Command::new(&b.bundler);
    theirs
        .args(["-type=bc", targets, "-compress", "-output=clang2.ccob"])
        .args(ins)
        .current_dir(b.dir.path())
        .env("COMPRESSED_BUNDLE_FORMAT_VERSION", "2");
    check(theirs.output().unwrap(), "clang v2");
    let mut args = vec!["-type=bc", targets, "-compress", "-compression-version=2"];
    args.extend(ins);
    args.push("-output=ours2.ccob");
    b.ours(&args);
    let (t2, o2) = (b.read("clang2.ccob").0, b.read("ours2.ccob").0);
    assert_eq!(ccob_header(&t2).version, 2);
    assert_eq!(ccob_header(&o2).version, 2);
    assert_eq!(
        Bytes(ccob::decompress(&t2).unwrap().0),
        Bytes(ccob::decompress(&o2).unwrap().0)
    );
    args.pop();
    args.push("-compression-method=zlib");
    args.push("-output=oursz.ccob");
    b.ours(&args);
    assert_eq!(
        ccob_header(&b.read("oursz.ccob").0).method,
        offload_format::CompressionMethod::Zlib
    );
    b.theirs(&[
        "-type=bc",
        targets,
        "-unbundle",
        "-input=oursz.ccob",
        "-output=z0",
        "-output=z1",
        "-output=z2",
    ]);
    assert_eq!(b.read("z1"), b.read("dev1.bin"));
}

#[test]
fn device_archives_unbundle_like_clang() {
    let Some(b) = Bench::new() else { return };
    payloads(&b);
    let members = [
        (
            "a.o",
            "host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx90a,hipv4-amdgcn-amd-amdhsa--gfx942",
        ),
        (
            "b.o",
            "host-x86_64-unknown-linux-gnu,openmp-amdgcn-amd-amdhsa--gfx90a:xnack+",
        ),
    ];
    let mut names = Vec::new();
    for (name, targets) in members {
        let n = targets.split(',').count();
        let ins: Vec<String> = ["host.bin", "dev1.bin", "dev2.bin"][..n]
            .iter()
            .map(|i| format!("-input={i}"))
            .collect();
        let t = format!("-targets={targets}");
        let o = format!("-output={name}");
        let mut args = vec!["-type=o", &t, &o];
        args.extend(ins.iter().map(String::as_str));
        b.theirs(&args);
        names.push(name);
    }
    let ar = tool(Tool::LlvmAr).expect("llvm-ar ships with clang-offload-bundler");
    check(
        Command::new(ar)
            .arg("rcS")
            .arg("lib.a")
            .args(&names)
            .current_dir(b.dir.path())
            .output()
            .unwrap(),
        "llvm-ar",
    );
    for extra in [
        &[][..],
        &["-hip-openmp-compatible"],
        &["-check-input-archive"],
    ] {
        let mut args = vec![
            "-type=a",
            "-targets=hip-amdgcn-amd-amdhsa--gfx90a:xnack+,openmp-amdgcn-amd-amdhsa--gfx942",
            "-unbundle",
            "-input=lib.a",
            "-output={tag}.90a.a",
            "-output={tag}.942.a",
            "-allow-missing-bundles",
        ];
        args.extend(extra);
        b.both(&args);
        assert_eq!(b.read("clang.90a.a"), b.read("ours.90a.a"), "{extra:?}");
        assert_eq!(b.read("clang.942.a"), b.read("ours.942.a"), "{extra:?}");
    }
    // The host entries too: an archive of each member's host entry.
    b.both(&[
        "-type=a",
        "-targets=host-x86_64-unknown-linux-gnu",
        "-unbundle",
        "-input=lib.a",
        "-output={tag}.host.a",
    ]);
    assert_eq!(b.read("clang.host.a"), b.read("ours.host.a"));
    // Without -allow-missing-bundles, a target with no entry fails on both sides.
    let args = [
        "-type=a",
        "-targets=hip-amdgcn-amd-amdhsa--gfx1030",
        "-unbundle",
        "-input=lib.a",
        "-output={tag}.x.a",
    ];
    assert!(!b.run(true, &args).status.success());
    assert!(!b.run(false, &args).status.success());
}

/// Objects from `clang -x hip -fgpu-rdc -c` (bundles in `__CLANG_OFFLOAD_BUNDLE__` sections),
/// archived by `llvm-ar`, unbundled for one and several targets: clang's archives, byte for
/// byte; a target no member has fails on both sides, or gives the same empty archive with
/// `-allow-missing-bundles`.
#[test]
fn archives_of_relocatable_hip_objects() {
    let Some(b) = Bench::new() else { return };
    let Some(clang) = clang() else { return };
    let Some(ar) = tool(Tool::LlvmAr) else {
        return;
    };
    let prelude = "struct dim3 { unsigned x, y, z; };\n\
        extern \"C\" int hipLaunchKernel(const void *, dim3, dim3, void **, unsigned long, void *);\n";
    for (name, body) in [
        (
            "a",
            "extern \"C\" __attribute__((global)) void ka(int *p) { *p = 1; }\n",
        ),
        (
            "b",
            "extern \"C\" __attribute__((global)) void kb(int *p) { *p = 2; }\n",
        ),
    ] {
        let src = b.file(
            &format!("{name}.hip"),
            format!("{prelude}{body}").as_bytes(),
        );
        b.compile(
            &clang,
            &[
                "-x",
                "hip",
                "--offload-arch=gfx90a",
                "--offload-arch=gfx942",
                "-fgpu-rdc",
                "-nogpulib",
                "-nogpuinc",
                "-c",
            ],
            &src,
            &format!("{name}.o"),
        );
    }
    check(
        Command::new(ar)
            .args(["rc", "lib.a", "a.o", "b.o"])
            .current_dir(b.dir.path())
            .output()
            .unwrap(),
        "llvm-ar",
    );
    b.both(&[
        "-unbundle",
        "-type=a",
        "-targets=hipv4-amdgcn-amd-amdhsa--gfx90a",
        "-input=lib.a",
        "-output={tag}.one.a",
    ]);
    assert_eq!(b.read("clang.one.a"), b.read("ours.one.a"));
    assert!(b.read("ours.one.a").0.len() > 1000, "the gfx90a bitcode");
    b.both(&[
        "-unbundle",
        "-type=a",
        "-targets=hipv4-amdgcn-amd-amdhsa--gfx942,hip-amdgcn-amd-amdhsa--gfx90a:xnack+",
        "-input=lib.a",
        "-output={tag}.942.a",
        "-output={tag}.90a.a",
    ]);
    assert_eq!(b.read("clang.942.a"), b.read("ours.942.a"));
    assert_eq!(b.read("clang.90a.a"), b.read("ours.90a.a"));
    let missing = [
        "-unbundle",
        "-type=a",
        "-targets=hipv4-amdgcn-amd-amdhsa--gfx1030",
        "-input=lib.a",
        "-output={tag}.none.a",
    ];
    assert!(!b.run(true, &missing).status.success());
    assert!(!b.run(false, &missing).status.success());
    let mut allowed = missing.to_vec();
    allowed.push("-allow-missing-bundles");
    b.both(&allowed);
    assert_eq!(b.read("clang.none.a"), b.read("ours.none.a"));
}

#[test]
fn real_hip_fat_binary() {
    let Some(b) = Bench::new() else { return };
    let Some(clang) = clang() else { return };
    let src = b.file(
        "k.hip",
        b"extern \"C\" __attribute__((global)) void k(float *x) {\n  \
          x[__builtin_amdgcn_workitem_id_x()] *= 2.0f;\n}\n",
    );
    let build = |extra: &[&str], out: &str| {
        check(
            Command::new(&clang)
                .args([
                    "-x",
                    "hip",
                    "--offload-arch=gfx90a",
                    "--offload-arch=gfx942",
                ])
                .args(["-nogpulib", "-nogpuinc", "--cuda-device-only", "-c"])
                .args(extra)
                .arg(&src)
                .arg("-o")
                .arg(b.path(out))
                .output()
                .unwrap(),
            "clang-22 -x hip",
        );
    };
    build(&[], "k.hipfb");
    build(&["--offload-compress"], "kc.hipfb");
    let ids = sorted_lines(&b.ours(&["-type=o", "-list", "-input=k.hipfb"]));
    assert_eq!(
        ids,
        [
            "hipv4-amdgcn-amd-amdhsa--gfx90a",
            "hipv4-amdgcn-amd-amdhsa--gfx942",
            "host-x86_64-unknown-linux-gnu-"
        ]
    );
    let targets = "-targets=host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx90a,hipv4-amdgcn-amd-amdhsa--gfx942";
    // The plain one last: its pieces are re-bundled below (the two builds' code objects
    // differ in their `__hip_cuid_` symbol).
    for fb in ["kc.hipfb", "k.hipfb"] {
        let input = format!("-input={fb}");
        b.both(&[
            "-type=o",
            targets,
            "-unbundle",
            &input,
            "-output={tag}.host",
            "-output={tag}.gfx90a",
            "-output={tag}.gfx942",
        ]);
        for part in ["host", "gfx90a", "gfx942"] {
            assert_eq!(
                b.read(&format!("clang.{part}")),
                b.read(&format!("ours.{part}")),
                "{fb} {part}"
            );
        }
        assert!(b.read("ours.gfx942").starts_with(b"\x7fELF"));
    }
    // Re-bundled the way the HIP driver does it, byte-identical to clang's fat binary.
    b.ours(&[
        "-type=o",
        "-bundle-align=4096",
        targets,
        "-input=/dev/null",
        "-input=ours.gfx90a",
        "-input=ours.gfx942",
        "-output=re.hipfb",
    ]);
    assert_eq!(b.read("re.hipfb"), b.read("k.hipfb"));

    // inspect finds it raw, compressed, and inside an object's .hip_fatbin section.
    let inspect = |file: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_cargo-offload"))
            .args(["offload", "inspect", "--json-report"])
            .arg(b.path(file))
            .output()
            .unwrap();
        let json = check(out, "cargo offload inspect");
        serde_json::from_slice::<serde_json::Value>(&json).unwrap()
    };
    let raw = inspect("k.hipfb");
    let entries = &raw["bundles"][0]["entries"];
    assert_eq!(entries[1]["target_id"], "gfx90a");
    assert_eq!(entries[1]["contents"], "elf amdgpu gfx90a");
    assert_eq!(entries[2]["contents"], "elf amdgpu gfx942");
    assert_eq!(entries[0]["size"], 0);
    let compressed = inspect("kc.hipfb");
    let c = &compressed["bundles"][0]["compressed"];
    assert_eq!(c["version"], 3);
    assert_eq!(c["method"], "zstd");
    assert_eq!(
        c["uncompressed_size"].as_u64().unwrap(),
        b.read("k.hipfb").0.len() as u64
    );
    assert_eq!(
        compressed["bundles"][0]["entries"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    let Some(objcopy) = tool(Tool::LlvmObjcopy) else {
        return;
    };
    let host = b.file("stub.c", b"int main(void) { return 0; }\n");
    b.compile(&clang, &["-c"], &host, "stub.o");
    check(
        Command::new(objcopy)
            .arg(format!(
                "--add-section=.hip_fatbin={}",
                b.path("k.hipfb").display()
            ))
            .arg(b.path("stub.o"))
            .arg(b.path("fat.o"))
            .output()
            .unwrap(),
        "llvm-objcopy",
    );
    let fat = inspect("fat.o");
    assert_eq!(fat["bundles"][0]["container"], ".hip_fatbin");
    assert_eq!(fat["bundles"][0]["entries"].as_array().unwrap().len(), 3);
}

#[test]
fn package_matches_llvm_offload_binary() {
    let Some(b) = Bench::new() else { return };
    let Some(llvm) = tool(Tool::LlvmOffloadBinary) else {
        return;
    };
    payloads(&b);
    std::fs::copy(b.path("host.bin"), b.path("k.o")).unwrap();
    std::fs::copy(b.path("dev1.bin"), b.path("k.bc")).unwrap();
    let images = [
        "--image=file=k.o,triple=amdgcn-amd-amdhsa,arch=gfx90a:xnack+,kind=hip",
        "--image=file=k.bc,triple=nvptx64-nvidia-cuda,arch=sm_80,kind=openmp",
        "--image=file=empty.bin,triple=x86_64-unknown-linux-gnu,kind=openmp",
    ];
    let run = |theirs: bool, args: &[&str]| b.package(&llvm, theirs, args);
    let mut a = vec!["-o", "theirs.bin"];
    a.extend(images);
    run(true, &a);
    a[1] = "ours.bin";
    run(false, &a);
    assert_eq!(b.read("theirs.bin"), b.read("ours.bin"));

    // Extraction, both ways, by triple and arch, by kind, and into an archive.
    for (theirs, from) in [(true, "ours.bin"), (false, "theirs.bin")] {
        run(
            theirs,
            &[
                from,
                "--image=file=x.o,triple=amdgcn-amd-amdhsa,arch=gfx90a:xnack+",
            ],
        );
        assert_eq!(b.read("x.o"), b.read("k.o"));
        run(theirs, &[from, "--image=file=y.bc,kind=openmp,arch=sm_80"]);
        assert_eq!(b.read("y.bc"), b.read("k.bc"));
        let lib = if theirs { "theirs.a" } else { "ours.a" };
        let image = format!("--image=file={lib},kind=openmp");
        run(theirs, &[from, "--archive", &image]);
    }
    // Archive members are named after the input file, so extract from the same name.
    std::fs::copy(b.path("theirs.bin"), b.path("same.bin")).unwrap();
    run(
        true,
        &["same.bin", "--archive", "--image=file=t.a,kind=openmp"],
    );
    run(
        false,
        &["same.bin", "--archive", "--image=file=o.a,kind=openmp"],
    );
    assert_eq!(b.read("t.a"), b.read("o.a"));
    // Default names: <stem>-<triple>[-<arch>].<n>.<ext>.
    run(false, &["same.bin", "-image=triple=nvptx64-nvidia-cuda"]);
    assert_eq!(
        b.read("same-nvptx64-nvidia-cuda-sm_80.0.bc"),
        b.read("k.bc")
    );

    // From an object made by clang's OpenMP offload driver (.llvm.offloading section).
    let Some(clang) = clang() else { return };
    let src = b.file(
        "omp.c",
        b"int main(void) {\n  int x = 0;\n#pragma omp target map(tofrom: x)\n  { x = 1; }\n  return x;\n}\n",
    );
    b.compile_openmp_object(&clang, &src, "omp.o");
    run(
        true,
        &[
            "omp.o",
            "--image=file=t.img,triple=x86_64-unknown-linux-gnu",
        ],
    );
    run(
        false,
        &[
            "omp.o",
            "--image=file=o.img,triple=x86_64-unknown-linux-gnu",
        ],
    );
    assert!(!b.read("t.img").is_empty());
    assert_eq!(b.read("t.img"), b.read("o.img"));
}

/// Repeated keys (joined, as the clang driver's several `feature=` under offload LTO), keys
/// outside the usual set, a repeated `file` (one binary each), an empty part and a key without
/// a value, and bitcode named `.o`: the same bytes as `llvm-offload-binary`.
#[test]
fn package_keys_as_llvm_offload_binary_stores_them() {
    let Some(b) = Bench::new() else { return };
    let Some(llvm) = tool(Tool::LlvmOffloadBinary) else {
        return;
    };
    payloads(&b);
    std::fs::copy(b.path("host.bin"), b.path("k.o")).unwrap();
    b.file("lto.o", b"BC\xc0\xde\x35\x14\0\0bitcode-ish");
    let images = [
        "--image=file=k.o,triple=nvptx64-nvidia-cuda,arch=sm_80,feature=+ptx80,feature=+sm_80,kind=cuda",
        "--image=file=k.o,triple=x86_64-unknown-linux-gnu,mykey=myval,kind=openmp",
        "--image=file=k.o,kind=hip,zeta=1,triple=amdgcn-amd-amdhsa,alpha=2,arch=gfx90a,omega=3,x=",
        "--image=file=k.o,file=dev1.bin,triple=t,kind=openmp,triple=u",
        "--image=file=lto.o,,triple=amdgcn-amd-amdhsa,novalue,kind=openmp,kind=hip",
    ];
    for (i, image) in images.iter().enumerate() {
        let out = |tag: &str| format!("{tag}{i}.bin");
        let theirs = Command::new(&llvm)
            .args(["-o", &out("theirs"), image])
            .current_dir(b.dir.path())
            .output()
            .unwrap();
        check(theirs, "llvm-offload-binary");
        let ours = Command::new(env!("CARGO_BIN_EXE_cargo-offload"))
            .args(["offload", "package", "-o", &out("ours"), image])
            .current_dir(b.dir.path())
            .output()
            .unwrap();
        check(ours, "cargo offload package");
        assert_eq!(b.read(&out("theirs")), b.read(&out("ours")), "{image}");
    }
    let first = offload_format::parse_all(&b.read("ours0.bin").0)
        .unwrap()
        .remove(0)
        .into_owned();
    assert_eq!(first.get("feature"), Some("+ptx80,+sm_80"));
}

#[test]
fn damaged_input_is_a_clean_error_naming_the_offset() {
    let Some(b) = Bench::new() else { return };
    payloads(&b);
    let targets = "-targets=host-x86_64-unknown-linux-gnu,openmp-nvptx64-nvidia-cuda--sm_80";
    b.ours(&[
        "-type=bc",
        targets,
        "-input=host.bin",
        "-input=dev1.bin",
        "-output=good.bundle",
    ]);
    b.ours(&[
        "-type=bc",
        targets,
        "-compress",
        "-input=host.bin",
        "-input=dev1.bin",
        "-output=good.ccob",
    ]);
    let good = b.read("good.bundle").0;
    let ccob = b.read("good.ccob").0;
    let mut cases: Vec<(&str, Vec<u8>)> = vec![];
    let mut huge_count = good.clone();
    huge_count[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
    cases.push(("count", huge_count));
    let mut past_end = good.clone();
    past_end[32..40].copy_from_slice(&(u64::MAX - 3).to_le_bytes());
    cases.push(("entry", past_end));
    cases.push(("truncated", good[..50].to_vec()));
    let mut bad_hash = ccob.clone();
    bad_hash[24] ^= 0xff;
    cases.push(("hash", bad_hash));
    let mut bad_size = ccob.clone();
    bad_size[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    cases.push(("total size", bad_size));
    let mut garbage = ccob;
    let n = garbage.len();
    garbage[40..n - 4].iter_mut().for_each(|x| *x = 0x5a);
    cases.push(("garbage", garbage));
    for (what, bytes) in cases {
        b.file("bad.bundle", &bytes);
        for args in [
            &[
                "-type=bc",
                targets,
                "-unbundle",
                "-input=bad.bundle",
                "-output=o1",
                "-output=o2",
            ][..],
            &["-type=bc", "-list", "-input=bad.bundle"],
        ] {
            let out = b.run(false, args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{what}: {stderr}");
            assert!(!stderr.contains("panicked"), "{what}: {stderr}");
            assert!(stderr.contains("offset"), "{what}: {stderr}");
            assert!(!b.path("o1").exists(), "{what}: no partial output");
        }
        let out = Command::new(env!("CARGO_BIN_EXE_cargo-offload"))
            .args(["offload", "inspect"])
            .arg(b.path("bad.bundle"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "inspect {what}: {stderr}");
        assert!(stderr.contains("offset"), "inspect {what}: {stderr}");
    }
    // Wrong argument counts and unknown types are refused before anything is written.
    for args in [
        &["-type=bc", targets, "-input=host.bin", "-output=x"][..],
        &[
            "-type=zz",
            targets,
            "-input=host.bin",
            "-input=dev1.bin",
            "-output=x",
        ],
        &[
            "-type=bc",
            "-targets=host-x86_64-unknown-linux-gnu,cuda-nvptx64-nvidia-cuda--sm_80",
            "-input=host.bin",
            "-input=dev1.bin",
            "-output=x",
        ],
    ] {
        let out = b.run(false, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(!b.path("x").exists());
    }
}

/// An executable from clang's OpenMP offloading to the host CPU: `inspect` lists the image's
/// target-region entry points, the functions `llvm-readelf` shows in the image
/// `llvm-offload-binary` extracts.
#[test]
fn inspect_lists_openmp_entry_points() {
    let Some(b) = Bench::new() else { return };
    let Some(clang) = clang() else { return };
    let Some(llvm) = tool(Tool::LlvmOffloadBinary) else {
        return;
    };
    let Some(readelf) = tool(Tool::LlvmReadelf) else {
        return;
    };
    let src = b.file(
        "omp.c",
        b"int main(void) {\n  int x = 0;\n#pragma omp target map(tofrom: x)\n  { x = 1; }\n\
          #pragma omp target teams distribute parallel for\n  for (int i = 0; i < 4; i++) {}\n\
          return x;\n}\n",
    );
    b.compile(&clang, OPENMP_HOST_OFFLOAD, &src, "omp");
    check(
        Command::new(&llvm)
            .args(["omp", "--image=file=img.so,triple=x86_64-unknown-linux-gnu"])
            .current_dir(b.dir.path())
            .output()
            .unwrap(),
        "llvm-offload-binary",
    );
    let syms = check(
        Command::new(readelf)
            .args(["--dyn-syms", "--wide"])
            .arg(b.path("img.so"))
            .output()
            .unwrap(),
        "llvm-readelf",
    );
    let mut want: Vec<String> = String::from_utf8_lossy(&syms)
        .lines()
        .filter(|l| l.contains(" FUNC ") && !l.contains(" UND "))
        .filter_map(|l| l.split_whitespace().last())
        .filter(|n| n.starts_with("__omp_offloading_"))
        .map(str::to_owned)
        .collect();
    want.sort();
    assert_eq!(want.len(), 2, "{}", String::from_utf8_lossy(&syms));
    let out = Command::new(env!("CARGO_BIN_EXE_cargo-offload"))
        .args(["offload", "inspect", "--json-report"])
        .arg(b.path("omp"))
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&check(out, "inspect")).unwrap();
    let kernels: Vec<String> = json["images"][0]["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kernels, want);
    assert!(kernels[0].ends_with("_main_l3"), "{kernels:?}");
}

/// `cargo offload bundle`'s stderr, checked for what every failure must be: exit status 1,
/// no panic, no cause printed twice.
fn clean_failure(out: &Output, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{what}: {stderr}");
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    for pair in lines.windows(2) {
        let cause = pair[1].trim_start().trim_start_matches("caused by: ");
        assert!(
            !pair[0].contains(cause),
            "{what}: cause repeated:\n{stderr}"
        );
    }
    stderr
}

/// Compressed bundles made by clang with a wrong uncompressed-size field: clang's `-list`
/// prints the IDs anyway and its `-unbundle` trusts the field (2^32 works, allocating that
/// much; 2^40 and up abort). Here listing and unbundling both fail, naming the field's real
/// offset, 16 in version 3 and 12 in version 2; a wrong hash fails listing too.
#[test]
fn compressed_bundles_with_a_wrong_size_or_hash_fail_everywhere() {
    let Some(b) = Bench::new() else { return };
    payloads(&b);
    let targets = "-targets=host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx90a";
    b.theirs(&[
        "-type=bc",
        targets,
        "-compress",
        "-input=host.bin",
        "-input=dev1.bin",
        "-output=v3.ccob",
    ]);
    let mut v2 = Command::new(&b.bundler);
    v2.args([
        "-type=bc",
        targets,
        "-compress",
        "-input=host.bin",
        "-input=dev1.bin",
    ])
    .arg("-output=v2.ccob")
    .current_dir(b.dir.path())
    .env("COMPRESSED_BUNDLE_FORMAT_VERSION", "2");
    check(v2.output().unwrap(), "clang-offload-bundler, version 2");
    let v3 = b.read("v3.ccob").0;
    let v2 = b.read("v2.ccob").0;
    assert_eq!((ccob_header(&v3).version, ccob_header(&v2).version), (3, 2));
    let mut cases: Vec<(String, Vec<u8>, &str)> = Vec::new();
    for size in [1u64 << 32, 1 << 40, 1 << 63, u64::MAX] {
        let mut bad = v3.clone();
        bad[16..24].copy_from_slice(&size.to_le_bytes());
        cases.push((
            format!("v3 size {size}"),
            bad,
            "uncompressed size field at offset 16",
        ));
    }
    for size in [u32::MAX, 1 << 28, 3] {
        let mut bad = v2.clone();
        bad[12..16].copy_from_slice(&size.to_le_bytes());
        cases.push((
            format!("v2 size {size}"),
            bad,
            "uncompressed size field at offset 12",
        ));
    }
    let mut bad = v3.clone();
    bad[24] ^= 0x40;
    cases.push(("v3 hash".to_owned(), bad, "hash field at offset 24"));
    for (what, bytes, message) in cases {
        b.file("bad.ccob", &bytes);
        let unbundle = [
            "-type=bc",
            targets,
            "-unbundle",
            "-input=bad.ccob",
            "-output={tag}.u0",
            "-output={tag}.u1",
        ];
        for args in [&unbundle[..], &["-type=bc", "-list", "-input=bad.ccob"]] {
            let out = b.run(false, args);
            let stderr = clean_failure(&out, &what);
            assert!(stderr.contains(message), "{what}: {stderr}");
            assert!(out.stdout.is_empty(), "{what}: nothing listed");
            assert!(!b.path("ours.u0").exists(), "{what}: no output");
        }
    }
}

/// Two compressed bundles back to back (as a section can hold them): clang rejects the file;
/// `-list`, `-unbundle` and `inspect` all read every blob.
#[test]
fn concatenated_compressed_bundles_are_read_whole() {
    let Some(b) = Bench::new() else { return };
    payloads(&b);
    b.theirs(&[
        "-type=bc",
        "-targets=host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx90a",
        "-compress",
        "-input=host.bin",
        "-input=dev1.bin",
        "-output=c1.ccob",
    ]);
    b.theirs(&[
        "-type=bc",
        "-targets=hipv4-amdgcn-amd-amdhsa--gfx942,hipv4-amdgcn-amd-amdhsa--gfx1100",
        "-compress",
        "-input=dev2.bin",
        "-input=empty.bin",
        "-output=c2.ccob",
    ]);
    let (c1, c2) = (b.read("c1.ccob").0, b.read("c2.ccob").0);
    for (name, padding) in [("cat.ccob", 0usize), ("padded.ccob", 12)] {
        let mut both = c1.clone();
        both.resize(c1.len() + padding, 0);
        both.extend_from_slice(&c2);
        b.file(name, &both);
        let input = format!("-input={name}");
        assert!(!b.run(true, &["-type=bc", "-list", &input]).status.success());
        let mut want = sorted_lines(&b.theirs(&["-type=bc", "-list", "-input=c1.ccob"]));
        want.extend(sorted_lines(&b.theirs(&[
            "-type=bc",
            "-list",
            "-input=c2.ccob",
        ])));
        want.sort();
        assert_eq!(sorted_lines(&b.ours(&["-type=bc", "-list", &input])), want);
        let targets = "-targets=hipv4-amdgcn-amd-amdhsa--gfx942,host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx1100,hip-amdgcn-amd-amdhsa--gfx90a";
        b.ours(&[
            "-type=bc",
            targets,
            "-unbundle",
            &input,
            "-output=o942",
            "-output=ohost",
            "-output=o1100",
            "-output=o90a",
        ]);
        b.theirs(&[
            "-type=bc",
            "-targets=hipv4-amdgcn-amd-amdhsa--gfx942,hipv4-amdgcn-amd-amdhsa--gfx1100",
            "-unbundle",
            "-input=c2.ccob",
            "-output=t942",
            "-output=t1100",
        ]);
        b.theirs(&[
            "-type=bc",
            "-targets=host-x86_64-unknown-linux-gnu,hip-amdgcn-amd-amdhsa--gfx90a",
            "-unbundle",
            "-input=c1.ccob",
            "-output=thost",
            "-output=t90a",
        ]);
        for part in ["942", "host", "1100", "90a"] {
            assert_eq!(
                b.read(&format!("o{part}")),
                b.read(&format!("t{part}")),
                "{name} {part}"
            );
        }
        assert_eq!(b.read("o942"), b.read("dev2.bin"));
        let out = Command::new(env!("CARGO_BIN_EXE_cargo-offload"))
            .args(["offload", "inspect", "--json-report"])
            .arg(b.path(name))
            .output()
            .unwrap();
        let json: serde_json::Value = serde_json::from_slice(&check(out, "inspect")).unwrap();
        assert_eq!(json["bundles"].as_array().unwrap().len(), 2, "{name}");
    }
}

/// A file that is no bundle at all: clang names every requested target it cannot find, in
/// its order and words; so do we, and the cause is printed once.
#[test]
fn missing_bundles_are_named_as_clang_names_them() {
    let Some(b) = Bench::new() else { return };
    payloads(&b);
    b.file("plain.txt", b"not a bundle\n");
    for targets in [
        "-targets=hipv4-amdgcn-amd-amdhsa--gfx942,host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx90a",
        "-targets=hipv4-amdgcn-amd-amdhsa--gfx942,hipv4-amdgcn-amd-amdhsa--gfx90a",
        "-targets=openmp-nvptx64-nvidia-cuda--sm_80",
    ] {
        let n = targets.split(',').count();
        let outs: Vec<String> = (0..n).map(|i| format!("-output=m{i}")).collect();
        let mut args = vec!["-type=bc", targets, "-unbundle", "-input=plain.txt"];
        args.extend(outs.iter().map(String::as_str));
        let theirs = b.run(true, &args);
        assert!(!theirs.status.success());
        let theirs = String::from_utf8_lossy(&theirs.stderr).into_owned();
        let message = theirs
            .split("error: ")
            .nth(1)
            .unwrap_or_else(|| panic!("clang's message: {theirs}"))
            .trim();
        // clang's words on the `error:` line itself, where its patterns look for them.
        let ours = clean_failure(&b.run(false, &args), targets);
        assert!(
            ours.lines().any(|l| l == format!("error: {message}")),
            "clang: {message}\nours: {ours}"
        );
    }
}

/// Peak resident memory of a `cargo offload bundle` run, in KiB, through `/usr/bin/time`.
fn peak_rss_kib(b: &Bench, args: &[&str]) -> Option<u64> {
    let time = Tool::GnuTime.for_test()?;
    let out = Command::new(time)
        .args([
            "-f",
            "%M",
            env!("CARGO_BIN_EXE_cargo-offload"),
            "offload",
            "bundle",
        ])
        .args(args)
        .current_dir(b.dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {stderr}");
    stderr.lines().last().and_then(|l| l.trim().parse().ok())
}

#[test]
fn large_bundles_stream_in_bounded_memory() {
    let Some(b) = Bench::new() else { return };
    // Three 24 MiB inputs of code-like data: repeats at many distances, some noise.
    let mut x = 0x9e37_79b9_u32;
    for (name, seed) in [("l0", 1u8), ("l1", 2), ("l2", 3)] {
        let mut data = Vec::with_capacity(24 << 20);
        while data.len() < 24 << 20 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            data.extend_from_slice(&x.to_le_bytes());
            data.extend_from_slice(b"\x48\x89\xe5\x48\x83\xec\x10\x89\x7d\xfc");
            data.push(seed);
        }
        b.file(name, &data);
    }
    let targets = "-targets=host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx90a,hipv4-amdgcn-amd-amdhsa--gfx942";
    let ins = ["-input=l0", "-input=l1", "-input=l2"];
    let mut bundle = vec!["-type=bc", "-bundle-align=4096", targets, "-output=big"];
    bundle.extend(ins);
    let unbundle = [
        "-type=bc",
        targets,
        "-unbundle",
        "-input=big",
        "-output=u0",
        "-output=u1",
        "-output=u2",
    ];
    // 72 MiB in, 72 MiB out: the process stays small either way.
    let limit_kib = 24 * 1024;
    if let Some(rss) = peak_rss_kib(&b, &bundle) {
        assert!(rss < limit_kib, "bundling peaked at {rss} KiB");
    }
    if let Some(rss) = peak_rss_kib(&b, &unbundle) {
        assert!(rss < limit_kib, "unbundling peaked at {rss} KiB");
    }
    for i in 0..3 {
        assert_eq!(b.read(&format!("u{i}")), b.read(&format!("l{i}")));
    }
    b.theirs(&[
        "-type=bc",
        targets,
        "-unbundle",
        "-input=big",
        "-output=t0",
        "-output=t1",
        "-output=t2",
    ]);
    assert_eq!(b.read("t2"), b.read("l2"));

    // Large enough for several zstd workers; clang reads the result.
    let mut compress = vec![
        "-type=bc",
        targets,
        "-compress",
        "-compression-threads=2",
        "-output=big.ccob",
    ];
    compress.extend(ins);
    b.ours(&compress);
    b.theirs(&[
        "-type=bc",
        targets,
        "-unbundle",
        "-input=big.ccob",
        "-output=c0",
        "-output=c1",
        "-output=c2",
    ]);
    for i in 0..3 {
        assert_eq!(b.read(&format!("c{i}")), b.read(&format!("l{i}")));
    }
}

/// The data offsets of an archive's members, in order (GNU layout, names and index included).
fn member_data_offsets(archive: &[u8]) -> Vec<(String, usize)> {
    let mut at = 8;
    let mut out = Vec::new();
    while at + 60 <= archive.len() {
        let name = String::from_utf8_lossy(&archive[at..at + 16])
            .trim()
            .to_owned();
        let size: usize = String::from_utf8_lossy(&archive[at + 48..at + 58])
            .trim()
            .parse()
            .unwrap();
        out.push((name, at + 60));
        at += 60 + size;
        at += at % 2;
    }
    out
}

/// Objects made by clang's OpenMP offload driver, each embedding an OffloadBinary, archived by
/// `llvm-ar` after a member of odd length: their data lies at offsets that are not multiples
/// of 8, where the ELF reader cannot map them in place. Every image is still found: `inspect`
/// names each member's, and `package --archive` writes `llvm-offload-binary`'s archive, byte
/// for byte, members named after the members they came from.
#[test]
fn archive_members_at_any_offset_keep_their_images() {
    let Some(b) = Bench::new() else { return };
    let Some(llvm) = tool(Tool::LlvmOffloadBinary) else {
        return;
    };
    let Some(clang) = clang() else { return };
    let ar = tool(Tool::LlvmAr).expect("llvm-ar ships with clang");
    let mut members = vec!["pad.txt".to_owned()];
    b.file("pad.txt", b"odd");
    for (i, name) in ["a", "bb", "ccc"].iter().enumerate() {
        let src = b.file(
            &format!("{name}.c"),
            format!(
                "int {name}_v = {i};\nint run_{name}(void) {{\n  int x = 0;\n\
                 #pragma omp target map(tofrom: x)\n  {{ x = {i} + 1; }}\n  return x;\n}}\n"
            )
            .as_bytes(),
        );
        b.compile_openmp_object(&clang, &src, &format!("{name}.o"));
        members.push(format!("{name}.o"));
    }
    check(
        Command::new(ar)
            .arg("rc")
            .arg("lib.a")
            .args(&members)
            .current_dir(b.dir.path())
            .output()
            .unwrap(),
        "llvm-ar",
    );
    let offsets = member_data_offsets(&b.read("lib.a").0);
    assert!(
        offsets
            .iter()
            .any(|(n, at)| n.ends_with(".o/") && at % 8 != 0),
        "some object must lie off 8-byte alignment: {offsets:?}"
    );

    let inspect = Command::new(env!("CARGO_BIN_EXE_cargo-offload"))
        .args(["offload", "inspect", "lib.a"])
        .current_dir(b.dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8(check(inspect, "cargo offload inspect")).unwrap();
    assert!(text.contains("3 offload image(s)"), "{text}");
    for m in ["a.o", "bb.o", "ccc.o"] {
        assert!(
            text.contains(&format!("member {m}: .llvm.offloading")),
            "{m}: {text}"
        );
    }

    let image = |file: &str| format!("--image=file={file},triple=x86_64-unknown-linux-gnu");
    b.package(&llvm, true, &["lib.a", "--archive", &image("theirs.a")]);
    b.package(&llvm, false, &["lib.a", "--archive", &image("ours.a")]);
    assert_eq!(b.read("theirs.a"), b.read("ours.a"));
    let names: Vec<String> = member_data_offsets(&b.read("ours.a").0)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["/", "a.o/", "bb.o/", "ccc.o/"]);
}

/// A member with an ELF magic that the object reader refuses is an error naming the archive
/// and the member, never an archive without images.
#[test]
fn an_unreadable_archive_member_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut bad = b"\x7fELF\x02\x01\x01\0".to_vec();
    bad.extend([0xAB; 40]);
    let members = [offload_format::archive::ArchiveMember {
        name: "bad.o".to_owned(),
        data: std::borrow::Cow::Owned(bad),
    }];
    let mut lib = Vec::new();
    offload_format::archive::write_archive(&mut lib, &members).unwrap();
    std::fs::write(dir.path().join("lib.a"), lib).unwrap();
    for (args, expected) in [
        (
            &["inspect", "lib.a"][..],
            "member bad.o: not a readable object file",
        ),
        (
            &[
                "package",
                "lib.a",
                "--image=file=x.bin,triple=nvptx64-nvidia-cuda",
            ][..],
            "lib.a(bad.o): not a readable object file",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_cargo-offload"))
            .arg("offload")
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} must fail: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    assert!(!dir.path().join("x.bin").exists());
}

/// Fat objects (`-type=o` with a real host object: the object layout) archived by `llvm-ar`:
/// the host target's archive holds each member's object without its bundle sections, and
/// device and host targets unbundled together give clang's archives, byte for byte.
#[test]
fn host_entries_of_an_archive_of_fat_objects_match_clang() {
    let Some(b) = Bench::new() else { return };
    let Some(clang) = clang() else { return };
    let ar = tool(Tool::LlvmAr).expect("llvm-ar ships with clang");
    let mut fat = Vec::new();
    for (i, name) in ["a", "bb"].iter().enumerate() {
        let src = b.file(
            &format!("{name}.c"),
            format!("int {name}_v = {i};\nint get_{name}(void) {{ return {name}_v; }}\n")
                .as_bytes(),
        );
        b.compile(&clang, &["-c"], &src, &format!("{name}.o"));
        b.file(
            &format!("{name}.dev"),
            format!("device code {name}").as_bytes(),
        );
        let (input_host, input_dev) = (format!("-input={name}.o"), format!("-input={name}.dev"));
        let output = format!("-output=fat_{name}.o");
        b.theirs(&[
            "-type=o",
            "-targets=host-x86_64-unknown-linux-gnu,hip-amdgcn-amd-amdhsa--gfx90a",
            &input_host,
            &input_dev,
            &output,
        ]);
        fat.push(format!("fat_{name}.o"));
    }
    check(
        Command::new(ar)
            .arg("rc")
            .arg("fat.a")
            .args(&fat)
            .current_dir(b.dir.path())
            .output()
            .unwrap(),
        "llvm-ar",
    );
    b.both(&[
        "-type=a",
        "-targets=host-x86_64-unknown-linux-gnu",
        "-unbundle",
        "-input=fat.a",
        "-output={tag}.host.a",
    ]);
    assert_eq!(b.read("clang.host.a"), b.read("ours.host.a"));
    b.both(&[
        "-type=a",
        "-targets=hip-amdgcn-amd-amdhsa--gfx90a,host-x86_64-unknown-linux-gnu",
        "-unbundle",
        "-input=fat.a",
        "-output={tag}.dev.a",
        "-output={tag}.host2.a",
    ]);
    assert_eq!(b.read("clang.dev.a"), b.read("ours.dev.a"));
    assert_eq!(b.read("clang.host2.a"), b.read("ours.host2.a"));
    assert_eq!(b.read("ours.host.a"), b.read("ours.host2.a"));
}

/// `@file` arguments, as build systems pass long command lines: the same response file given
/// to both tools gives the same bundle and the same OffloadBinary; a quoted name with a space
/// and a nested response file are expanded as LLVM expands them.
#[test]
fn response_files_are_expanded_as_llvm_expands_them() {
    let Some(b) = Bench::new() else { return };
    let Some(llvm) = tool(Tool::LlvmOffloadBinary) else {
        return;
    };
    payloads(&b);
    std::fs::copy(b.path("dev1.bin"), b.path("dev one.bin")).unwrap();
    b.file("inputs.rsp", b"-input=host.bin\n'-input=dev one.bin'\n");
    b.file(
        "bundle.rsp",
        b"-type=bc -targets=host-x86_64-unknown-linux-gnu,openmp-nvptx64-nvidia-cuda-sm_80\n@inputs.rsp\n",
    );
    b.both(&["@bundle.rsp", "-output={tag}.bundle"]);
    assert_eq!(b.read("clang.bundle"), b.read("ours.bundle"));

    b.file(
        "package.rsp",
        b"--image=file=dev1.bin,triple=nvptx64-nvidia-cuda,arch=sm_80,kind=openmp\n",
    );
    for (theirs, out) in [(true, "theirs.bin"), (false, "ours.bin")] {
        b.package(&llvm, theirs, &["-o", out, "@package.rsp"]);
    }
    assert_eq!(b.read("theirs.bin"), b.read("ours.bin"));
}

/// Command lines clang-offload-bundler refuses before reading any file: ours refuses each too,
/// with clang's message on its `error:` line (our detail, if any, on a `note:` line after).
#[test]
fn refused_command_lines_get_clangs_message() {
    let Some(b) = Bench::new() else { return };
    payloads(&b);
    let host = "host-x86_64-unknown-linux-gnu";
    let dev = "openmp-nvptx64-nvidia-cuda--sm_80";
    let two = format!("-targets={host},{dev}");
    let cases: Vec<Vec<&str>> = vec![
        vec!["-type=bc", "-list", "-unbundle", "-input=host.bin"],
        vec!["-type=bc", "-list", "-input=host.bin", "-input=dev1.bin"],
        vec!["-type=bc", "-list", "-input=host.bin", "-output=x"],
        vec!["-type=bc", "-list", "-input=host.bin", &two],
        vec![
            "-type=bc",
            &two,
            "-input=host.bin",
            "-inputs=dev1.bin",
            "-output=x",
        ],
        vec![
            "-type=bc",
            &two,
            "-input=host.bin",
            "-output=x",
            "-outputs=y",
        ],
        vec!["-type=bc", &two, "-input=host.bin", "-input=dev1.bin"],
        vec!["-type=bc", "-input=host.bin", "-output=x"],
        vec!["-type=bc", &two, "-input=host.bin", "-output=x"],
        vec![
            "-type=bc",
            &two,
            "-input=host.bin",
            "-input=dev1.bin",
            "-output=x",
            "-output=y",
        ],
        vec![
            "-type=bc",
            &two,
            "-unbundle",
            "-input=host.bin",
            "-output=x",
        ],
        vec![
            "-type=bc",
            &two,
            "-unbundle",
            "-input=host.bin",
            "-input=dev1.bin",
            "-output=x",
            "-output=y",
        ],
        vec![
            "-type=a",
            &two,
            "-input=host.bin",
            "-input=dev1.bin",
            "-output=x",
        ],
        vec![
            "-type=bc",
            &two,
            "-check-input-archive",
            "-input=host.bin",
            "-input=dev1.bin",
            "-output=x",
        ],
        vec![
            "-type=bc",
            &two,
            "-unbundle",
            "-check-input-archive",
            "-input=host.bin",
            "-output=x",
            "-output=y",
        ],
        vec![
            "-type=bc",
            "-targets=host-x86_64-unknown-linux-gnu,host-x86_64-unknown-linux-gnu",
            "-unbundle",
            "-input=host.bin",
            "-output=x",
            "-output=y",
        ],
        vec![
            "-type=bc",
            "-targets=openmp-nvptx64-nvidia-cuda--sm_80,openmp-amdgcn-amd-amdhsa--gfx90a",
            "-input=host.bin",
            "-input=dev1.bin",
            "-output=x",
        ],
        vec![
            "-type=bc",
            "-targets=host-x86_64-unknown-linux-gnu,openmp-x86_64-unknown-linux-gnu,host-aarch64-unknown-linux-gnu",
            "-unbundle",
            "-input=host.bin",
            "-output=x",
            "-output=y",
            "-output=z",
        ],
        vec![
            "-type=bc",
            "-targets=host-x86_64-unknown-linux-gnu,cuda-nvptx64-nvidia-cuda--sm_80",
            "-input=host.bin",
            "-input=dev1.bin",
            "-output=x",
        ],
    ];
    for args in cases {
        let theirs = b.run(true, &args);
        let stderr = String::from_utf8_lossy(&theirs.stderr).into_owned();
        assert!(!theirs.status.success(), "clang accepts {args:?}: {stderr}");
        let message = stderr
            .lines()
            .find_map(|l| l.split_once("error: ").map(|(_, m)| m.to_owned()))
            .unwrap_or_else(|| panic!("{args:?}: clang's message: {stderr}"));
        let ours = clean_failure(&b.run(false, &args), &format!("{args:?}"));
        assert!(
            ours.lines()
                .any(|l| l.starts_with(&format!("error: {message}"))),
            "{args:?}\nclang: {message}\nours: {ours}"
        );
    }
}

/// `-###` with the object layout prints the `llvm-objcopy` command instead of running it, in
/// clang's quoting (the host placeholder's temporary name aside), and leaves the output empty.
#[test]
fn print_commands_shows_the_objcopy_command() {
    let Some(b) = Bench::new() else { return };
    let Some(clang) = clang() else { return };
    let src = b.file("h.c", b"int h(void) { return 1; }\n");
    b.compile(&clang, &["-c"], &src, "h.o");
    b.file("dev.bin", b"device code");
    let args = [
        "-###",
        "-type=o",
        "-targets=host-x86_64-unknown-linux-gnu,hip-amdgcn-amd-amdhsa--gfx90a",
        "-input=h.o",
        "-input=dev.bin",
        "-output={tag}.o",
    ];
    let printed = |theirs: bool| {
        let out = b.run(theirs, &args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        let line = stderr
            .lines()
            .find(|l| l.contains("--add-section"))
            .unwrap_or_else(|| panic!("no command printed: {stderr}"))
            .to_owned();
        // The placeholder of the host's section: a temporary file of each tool's naming.
        let (head, rest) = line.split_once("-=").unwrap();
        let rest = &rest[rest.find('"').unwrap()..];
        let objcopy_name = head
            .split('"')
            .nth(1)
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap()
            .to_owned();
        (
            objcopy_name,
            format!("{}-={}", &head[head.find("\" ").unwrap()..], rest),
        )
    };
    let (theirs, ours) = (printed(true), printed(false));
    assert_eq!(theirs.0, ours.0);
    assert_eq!(
        theirs.1.replace("clang.o", "{tag}.o"),
        ours.1.replace("ours.o", "{tag}.o")
    );
    assert!(b.read("clang.o").is_empty());
    assert!(b.read("ours.o").is_empty());
}

/// `-verbose` and `OFFLOAD_BUNDLER_VERBOSE=1`: the report clang prints for each compressed
/// bundle written, unbundled or listed, line for line but for the measured speeds.
#[test]
fn verbose_reports_match_clangs() {
    let Some(b) = Bench::new() else { return };
    payloads(&b);
    let report = |out: Output| -> Vec<String> {
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        stderr
            .lines()
            .filter(|l| l.contains(": ") && !l.contains("speed"))
            .map(str::to_owned)
            .collect()
    };
    let targets = "-targets=host-x86_64-unknown-linux-gnu,openmp-x86_64-unknown-linux-gnu";
    for version in ["2", "3"] {
        let mut runs = Vec::new();
        for theirs in [true, false] {
            let tag = if theirs { "clang" } else { "ours" };
            let mut cmd = if theirs {
                Command::new(&b.bundler)
            } else {
                let mut c = Command::new(env!("CARGO_BIN_EXE_cargo-offload"));
                c.args(["offload", "bundle"]);
                c
            };
            let out = cmd
                .args([
                    "-type=bc",
                    targets,
                    "-input=host.bin",
                    "-input=dev1.bin",
                    "-compress",
                ])
                .arg(format!("-output={tag}.v{version}"))
                .env("OFFLOAD_BUNDLER_VERBOSE", "1")
                .env("COMPRESSED_BUNDLE_FORMAT_VERSION", version)
                .current_dir(b.dir.path())
                .output()
                .unwrap();
            let written = report(out);
            let input = format!("-input={tag}.v{version}");
            let unbundled = report(b.run(
                theirs,
                &[
                    "-verbose",
                    "-type=bc",
                    targets,
                    "-unbundle",
                    &input,
                    "-output=u0",
                    "-output=u1",
                ],
            ));
            let listed = report(b.run(theirs, &["-verbose", "-type=bc", "-list", &input]));
            runs.push((written, unbundled, listed));
        }
        assert!(
            runs[0]
                .0
                .iter()
                .any(|l| l.starts_with("Truncated MD5 hash: 0x"))
        );
        assert!(runs[0].1.contains(&"Hashes match: Yes".to_owned()));
        assert_eq!(runs[0], runs[1], "version {version}");
    }
}

/// `cargo-offload` linked as `clang-offload-bundler` or `llvm-offload-binary` is that tool,
/// and prints its errors after the program's name, as LLVM's tools do: what scripts and
/// LLVM's tests match (`clang-offload-bundler: for the --type option: …`).
#[test]
fn linked_under_a_tools_name_it_is_that_tool() {
    let Some(b) = Bench::new() else { return };
    payloads(&b);
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_cargo-offload"));
    let as_tool = |name: &str, args: &[&str]| -> (Output, String) {
        let link = b.path(name);
        if !link.exists() {
            std::os::unix::fs::symlink(&exe, &link).unwrap();
        }
        let out = Command::new(&link)
            .args(args)
            .current_dir(b.dir.path())
            .output()
            .unwrap();
        (out, link.display().to_string())
    };
    let (out, link) = as_tool("clang-offload-bundler", &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "{link}: for the --type option: must be specified at least once!"
        )),
        "{stderr}"
    );
    // Bundling works under the name, byte for byte clang's.
    let args = [
        "-type=bc",
        "-targets=host-x86_64-unknown-linux-gnu,openmp-nvptx64-nvidia-cuda--sm_80",
        "-input=host.bin",
        "-input=dev1.bin",
    ];
    let (out, _) = as_tool(
        "clang-offload-bundler",
        &[&args[..], &["-output=ours.bc"]].concat(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    b.theirs(&[&args[..], &["-output=clang.bc"]].concat());
    assert_eq!(b.read("ours.bc"), b.read("clang.bc"));

    b.file("cut.bin", &offload_format::OFFLOAD_BINARY_MAGIC);
    let (out, link) = as_tool("llvm-offload-binary", &["cut.bin"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "{link}: error: Invalid data was encountered while parsing the file\nnote: "
        )),
        "{stderr}"
    );
}
