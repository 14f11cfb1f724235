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
