//! OffloadBinary written by us and by `llvm-offload-binary`, each read by the other.

mod common;
use offload_toolchain::Tool;

use std::process::Command;

use offload_format::{ImageKind, OffloadBinary, OffloadKind, parse_all};

struct Case {
    ext: &'static str,
    kind: ImageKind,
    offload: &'static str,
    image: Vec<u8>,
    // As written on the command line; the tool reorders them (hash order).
    keys: &'static [(&'static str, &'static str)],
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            ext: "bin",
            kind: ImageKind::None,
            offload: "openmp",
            image: b"12345678".to_vec(),
            keys: &[("triple", "amdgcn-amd-amdhsa"), ("arch", "gfx90a")],
        },
        Case {
            ext: "s",
            kind: ImageKind::Ptx,
            offload: "cuda",
            image: b".version 7.8\n.target sm_80\n".to_vec(),
            keys: &[("triple", "nvptx64-nvidia-cuda"), ("arch", "sm_80")],
        },
        Case {
            ext: "o",
            kind: ImageKind::Object,
            offload: "hip",
            image: (0..=255u8).cycle().take(5000).collect(),
            keys: &[
                ("triple", "amdgcn-amd-amdhsa"),
                ("arch", "gfx942:xnack+"),
                ("feature", "+xnack"),
            ],
        },
        Case {
            ext: "o",
            kind: ImageKind::Object,
            offload: "openmp",
            image: b"\x7fELF host image".to_vec(),
            keys: &[
                ("triple", "x86_64-unknown-linux-gnu"),
                ("arch", "host"),
                ("offload.module", "saxpy_kernels"),
                ("offload.kernels", "saxpy"),
                ("producer", "cargo-offload"),
            ],
        },
        Case {
            ext: "cubin",
            kind: ImageKind::Cubin,
            offload: "openmp",
            image: Vec::new(),
            keys: &[("triple", "x"), ("arch", "y"), ("foo", "1"), ("bar", "2")],
        },
    ]
}

fn ours(case: &Case) -> OffloadBinary<'static> {
    let mut bin = OffloadBinary::new(
        case.kind,
        OffloadKind::from_name(case.offload).unwrap(),
        case.image.clone(),
    );
    for (k, v) in case.keys {
        bin = bin.with_string(*k, *v);
    }
    assert!(bin.apply_llvm_key_order(), "key order known");
    bin
}

#[test]
fn byte_identical_to_llvm_offload_binary() {
    let Some(tool) = common::tool(Tool::LlvmOffloadBinary) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (i, case) in cases().iter().enumerate() {
        let img = dir.path().join(format!("img{i}.{}", case.ext));
        std::fs::write(&img, &case.image).unwrap();
        let out = dir.path().join(format!("p{i}.out"));
        let mut arg = format!("--image=file={},kind={}", img.display(), case.offload);
        for (k, v) in case.keys {
            arg.push_str(&format!(",{k}={v}"));
        }
        common::run(Command::new(&tool).arg("-o").arg(&out).arg(&arg));
        let theirs = std::fs::read(&out).unwrap();
        let mine = ours(case);
        assert!(
            mine.to_bytes() == theirs,
            "case {i}: bytes differ\nours:   {:02x?}\ntheirs: {theirs:02x?}",
            mine.to_bytes()
        );
        let parsed = parse_all(&theirs).unwrap();
        assert_eq!(parsed, vec![mine], "case {i}: parse");
    }
}

#[test]
fn several_images_back_to_back_match_the_tool() {
    let Some(tool) = common::tool(Tool::LlvmOffloadBinary) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(&tool);
    let out = dir.path().join("multi.out");
    cmd.arg("-o").arg(&out);
    let mut expected = Vec::new();
    for (i, case) in cases().iter().enumerate() {
        let img = dir.path().join(format!("img{i}.{}", case.ext));
        std::fs::write(&img, &case.image).unwrap();
        let mut arg = format!("--image=file={},kind={}", img.display(), case.offload);
        for (k, v) in case.keys {
            arg.push_str(&format!(",{k}={v}"));
        }
        cmd.arg(arg);
        ours(case).write_to(&mut expected).unwrap();
    }
    common::run(&mut cmd);
    let theirs = std::fs::read(&out).unwrap();
    assert!(expected == theirs, "concatenated binaries differ");
    assert_eq!(parse_all(&theirs).unwrap().len(), cases().len());
}

#[test]
fn the_tool_extracts_images_we_wrote() {
    let Some(tool) = common::tool(Tool::LlvmOffloadBinary) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut bundle = Vec::new();
    for case in cases() {
        ours(&case).write_to(&mut bundle).unwrap();
    }
    let input = dir.path().join("ours.bin");
    std::fs::write(&input, &bundle).unwrap();
    let extracted = dir.path().join("ptx.s");
    common::run(Command::new(&tool).arg(&input).arg(format!(
        "--image=file={},triple=nvptx64-nvidia-cuda,arch=sm_80",
        extracted.display()
    )));
    assert_eq!(std::fs::read(&extracted).unwrap(), cases()[1].image);
}

#[test]
fn objdump_lists_what_we_wrote() {
    let Some(objdump) = common::tool(Tool::LlvmObjdump) else {
        return;
    };
    let Some(clang) = common::tool(Tool::Clang) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut bundle = Vec::new();
    for case in cases() {
        ours(&case).write_to(&mut bundle).unwrap();
    }
    // Embed the bytes in an object's .llvm.offloading section through the assembler.
    let bin = dir.path().join("b.bin");
    std::fs::write(&bin, &bundle).unwrap();
    let asm = dir.path().join("e.s");
    std::fs::write(
        &asm,
        format!(
            ".section .llvm.offloading,\"e\",@llvm_offloading\n.balign 8\n.incbin \"{}\"\n",
            bin.display()
        ),
    )
    .unwrap();
    let obj = dir.path().join("e.o");
    common::run(Command::new(&clang).args(["-c", "-o"]).arg(&obj).arg(&asm));
    let text = String::from_utf8(common::run(
        Command::new(&objdump).arg("--offloading").arg(&obj),
    ))
    .unwrap();
    for case in cases() {
        let triple = case.keys.iter().find(|k| k.0 == "triple").unwrap().1;
        assert!(text.contains(triple), "{triple} missing in:\n{text}");
    }
    assert!(
        text.contains("ptx") && text.contains("cubin") && text.contains("elf"),
        "{text}"
    );
}
