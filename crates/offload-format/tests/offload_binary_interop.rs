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
    bin.apply_llvm_key_order();
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

/// Random `--image` key sets (short and long keys, repeats, enough keys to make the tool's
/// map grow) packed by the tool and by us: the string entries must come out in the same order.
#[test]
fn key_order_matches_the_tool_for_random_keys() {
    let Some(tool) = common::tool(Tool::LlvmOffloadBinary) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img.o");
    std::fs::write(&img, b"image").unwrap();
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789._+-ABCXYZ";
    let mut specs: Vec<Vec<(String, String)>> = Vec::new();
    for set in 0..300 {
        let count = if set % 10 == 0 {
            40 + next(40)
        } else {
            1 + next(12)
        };
        let mut pairs: Vec<(String, String)> = vec![("file".into(), img.display().to_string())];
        for i in 0..count {
            let len = match next(4) {
                0 => 1 + next(3),
                1 => 4 + next(13),
                2 => 17 + next(48),
                _ => 65 + next(140),
            };
            let key: String = (0..len)
                .map(|_| CHARS[next(CHARS.len() as u64) as usize] as char)
                .collect();
            pairs.push((key, format!("v{i}")));
            if next(8) == 0 {
                let again = pairs[1 + next(pairs.len() as u64 - 1) as usize].0.clone();
                pairs.push((again, format!("again{i}")));
            }
        }
        if set % 3 == 0 {
            pairs.insert(
                1 + next(pairs.len() as u64 - 1) as usize,
                ("kind".into(), "hip".into()),
            );
        }
        pairs.retain(|(k, _)| k != "kind" || set % 3 == 0);
        specs.push(pairs);
    }
    let out = dir.path().join("random.out");
    let mut cmd = Command::new(&tool);
    cmd.arg("-o").arg(&out);
    for pairs in &specs {
        let arg: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        cmd.arg(format!("--image={}", arg.join(",")));
    }
    common::run(&mut cmd);
    let theirs = std::fs::read(&out).unwrap();
    let parsed = parse_all(&theirs).unwrap();
    assert_eq!(parsed.len(), specs.len());
    for (set, (pairs, bin)) in specs.iter().zip(&parsed).enumerate() {
        let keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
        let got: Vec<&str> = bin.strings.iter().map(|(k, _)| k.as_ref()).collect();
        assert_eq!(
            offload_format::llvm_key_order(&keys),
            got,
            "set {set}: {keys:?}"
        );
    }
}
