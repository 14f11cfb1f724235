//! Readers of the device images the build makes or takes in, for what the image says about
//! its kernels: [`ptx`] (`.entry` declarations with their launch bounds, and the report of
//! `ptxas -v`), [`elf`] (the CPU device's and OpenMP's host-CPU shared objects), [`amdgpu`]
//! (code objects' `e_flags` and metadata note), [`cubin`] (kernels' launch bounds) and
//! [`is_cubin`]. Pure functions of the bytes or text handed in; running the tools that make
//! the images is the build's.

#[cfg(feature = "containers")]
pub mod amdgpu;
#[cfg(feature = "containers")]
pub mod cubin;
#[cfg(feature = "containers")]
pub mod elf;
pub mod ptx;

/// Whether `bytes` look like an NVIDIA cubin: an ELF whose `e_machine` is `EM_CUDA` (190).
pub fn is_cubin(bytes: &[u8]) -> bool {
    const EM_CUDA: u16 = 190;
    bytes.len() > 20
        && bytes.starts_with(b"\x7fELF")
        && u16::from_le_bytes([bytes[18], bytes[19]]) == EM_CUDA
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_cubin_is_an_elf_for_em_cuda() {
        let mut elf = *b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x02\0\xbe\0\x01\0\0\0";
        assert!(super::is_cubin(&elf));
        elf[18] = 0x3e; // EM_X86_64
        assert!(!super::is_cubin(&elf));
        assert!(!super::is_cubin(b"\x7fELF"));
    }
}
