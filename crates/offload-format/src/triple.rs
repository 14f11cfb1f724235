//! The target triples and `arch` names of offload images.

/// The NVIDIA device triple.
pub const NVPTX_TRIPLE: &str = "nvptx64-nvidia-cuda";
/// The AMD device triple.
pub const AMDGCN_TRIPLE: &str = "amdgcn-amd-amdhsa";
/// The `arch` of host-CPU images, whose triple is the host's own.
pub const HOST_ARCH: &str = "host";

/// The Linux GNU triple of a CPU architecture as Rust names it (`std::env::consts::ARCH` or
/// `CARGO_CFG_TARGET_ARCH`): `x86_64-unknown-linux-gnu`, `riscv64gc-unknown-linux-gnu`.
pub fn linux_gnu_triple(arch: &str) -> String {
    let arch = match arch {
        "riscv64" => "riscv64gc",
        "powerpc64" => "powerpc64le",
        arch => arch,
    };
    format!("{arch}-unknown-linux-gnu")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linux_triples() {
        assert_eq!(linux_gnu_triple("x86_64"), "x86_64-unknown-linux-gnu");
        assert_eq!(linux_gnu_triple("aarch64"), "aarch64-unknown-linux-gnu");
        assert_eq!(linux_gnu_triple("riscv64"), "riscv64gc-unknown-linux-gnu");
    }
}

/// The architectures LLVM 22's `Triple` knows by exact name (`Triple::parseArch`).
const LLVM_ARCHS: &[&str] = &[
    "x86_64",
    "x86_64h",
    "amd64",
    "powerpc",
    "ppc",
    "ppc32",
    "powerpcle",
    "ppcle",
    "ppc32le",
    "powerpc64",
    "ppu",
    "ppc64",
    "powerpc64le",
    "ppc64le",
    "xscale",
    "xscaleeb",
    "arc",
    "avr",
    "m68k",
    "msp430",
    "mips",
    "mipseb",
    "mipsallegrex",
    "mipsisa32r6",
    "mipsr6",
    "mipsel",
    "mipsallegrexel",
    "mipsisa32r6el",
    "mipsr6el",
    "mips64",
    "mips64eb",
    "mipsn32",
    "mipsisa64r6",
    "mips64r6",
    "mipsn32r6",
    "mips64el",
    "mipsn32el",
    "mipsisa64r6el",
    "mips64r6el",
    "mipsn32r6el",
    "r600",
    "amdgcn",
    "riscv32",
    "riscv64",
    "riscv32be",
    "riscv64be",
    "hexagon",
    "s390x",
    "systemz",
    "sparc",
    "sparcel",
    "sparcv9",
    "sparc64",
    "tce",
    "tcele",
    "xcore",
    "nvptx",
    "nvptx64",
    "amdil",
    "amdil64",
    "hsail",
    "hsail64",
    "spir",
    "spir64",
    "lanai",
    "renderscript32",
    "renderscript64",
    "shave",
    "ve",
    "wasm32",
    "wasm64",
    "csky",
    "loongarch32",
    "loongarch64",
    "dxil",
    "xtensa",
    "bpf",
    "bpfel",
    "bpfeb",
];

/// Whether LLVM 22's `Triple` knows `arch`, the first field of a triple: the names of
/// `LLVM_ARCHS`, `i386` to `i986`, and the families it parses by prefix (ARM and Thumb
/// sub-architectures, AArch64 and Arm64 variants, SPIR-V versions, Kalimba versions). The
/// bundler refuses a target whose architecture it does not know.
pub fn is_llvm_arch(arch: &str) -> bool {
    let x86 = arch.len() == 4
        && arch.starts_with('i')
        && arch.ends_with("86")
        && matches!(arch.as_bytes()[1], b'3'..=b'9');
    x86 || LLVM_ARCHS.contains(&arch)
        || ["arm", "thumb", "aarch64", "spirv", "kalimba"]
            .iter()
            .any(|p| arch.starts_with(p))
}

#[cfg(test)]
mod arch_tests {
    use super::is_llvm_arch;

    #[test]
    fn llvm_arch_names_as_the_bundler_reads_them() {
        for known in [
            "x86_64",
            "i686",
            "i986",
            "powerpc64le",
            "armv7a",
            "thumbv7m",
            "aarch64_be",
            "arm64e",
            "spirv1.5",
            "kalimba3",
            "amdgcn",
            "nvptx64",
            "mipsisa64r6el",
        ] {
            assert!(is_llvm_arch(known), "{known}");
        }
        for unknown in [
            "",
            "foo",
            "i1086",
            "le32",
            "powerpcxxle",
            "x86_xx",
            "mips64x",
            "sparcx",
        ] {
            assert!(!is_llvm_arch(unknown), "{unknown}");
        }
    }
}
