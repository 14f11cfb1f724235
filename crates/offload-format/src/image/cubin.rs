//! NVIDIA cubins (ELF for `EM_CUDA`): what the per-kernel `.nv.info.<kernel>` sections say
//! about a kernel, as `cuobjdump -elf` lists them. Each section is a run of attributes, each a
//! byte of format, a byte of attribute and a little-endian `u16`; the format `EIFMT_SVAL` (4)
//! is followed by as many bytes of value as that `u16` says, the others hold their value in it.

use object::{Object, ObjectSection};

use crate::aligned::object_bytes;

/// `EIFMT_SVAL`: an attribute followed by a value of the size its header gives.
const EIFMT_SVAL: u8 = 4;
/// `EIATTR_MAX_THREADS`: the kernel's `.maxntid` (three `u32`, x, y and z).
const EIATTR_MAX_THREADS: u8 = 0x05;
/// `EIATTR_REQNTID`: the kernel's `.reqntid` (three `u32`).
const EIATTR_REQNTID: u8 = 0x10;

/// Each kernel's launch bound, the threads of its `EIATTR_MAX_THREADS` (PTX `.maxntid`) or
/// `EIATTR_REQNTID` (`.reqntid`) multiplied out, in section order; kernels without one are
/// left out. What cannot be read (not an ELF, a section cut short) gives nothing for it.
pub fn max_threads(cubin: &[u8]) -> Vec<(String, u32)> {
    let bytes = object_bytes(cubin);
    let Ok(file) = object::File::parse(&*bytes) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for section in file.sections() {
        let Some(kernel) = section
            .name()
            .ok()
            .and_then(|n| n.strip_prefix(".nv.info."))
        else {
            continue;
        };
        let Ok(data) = section.data() else { continue };
        if let Some(bound) = bound_of(data) {
            out.push((kernel.to_owned(), bound));
        }
    }
    out
}

/// The bound one `.nv.info.<kernel>` section states, if any.
fn bound_of(mut data: &[u8]) -> Option<u32> {
    while let [format, attribute, lo, hi, rest @ ..] = data {
        let size = usize::from(u16::from_le_bytes([*lo, *hi]));
        let (value, after) = if *format == EIFMT_SVAL {
            (rest.get(..size)?, rest.get(size..)?)
        } else {
            (&[][..], rest)
        };
        if matches!(*attribute, EIATTR_MAX_THREADS | EIATTR_REQNTID) && *format == EIFMT_SVAL {
            return value
                .chunks_exact(4)
                .take(3)
                .map(|d| u32::from_le_bytes([d[0], d[1], d[2], d[3]]))
                .try_fold(1u32, u32::checked_mul)
                .filter(|&n| n > 0);
        }
        data = after;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `.nv.info.k` section `ptxas` 11.8 wrote for an sm_80 kernel declared with
    /// `.maxntid 256, 1, 1`.
    const NV_INFO: &[u8] = &[
        0x04, 0x37, 0x04, 0x00, 0x76, 0x00, 0x00, 0x00, // EIATTR_CUDA_API_VERSION
        0x01, 0x35, 0x00, 0x00, // EIATTR_SW2861232_WAR
        0x04, 0x0a, 0x08, 0x00, 0x06, 0x00, 0x00, 0x00, 0x60, 0x01, 0x08, 0x00, // PARAM_CBANK
        0x03, 0x19, 0x08, 0x00, // EIATTR_CBANK_PARAM_SIZE
        0x04, 0x17, 0x0c, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0xf0, 0x21, 0x00, // KPARAM_INFO
        0x03, 0x1b, 0xff, 0x00, // EIATTR_MAXREG_COUNT
        0x04, 0x1c, 0x04, 0x00, 0x10, 0x00, 0x00, 0x00, // EIATTR_EXIT_INSTR_OFFSETS
        0x04, 0x05, 0x0c, 0x00, 0x00, 0x01, 0, 0, 0x01, 0, 0, 0, 0x01, 0, 0, 0, // MAX_THREADS
    ];

    #[test]
    fn the_launch_bound_is_read_from_the_attributes() {
        assert_eq!(bound_of(NV_INFO), Some(256));
        // 64 × 2 × 1.
        let mut two_d = NV_INFO.to_vec();
        let at = two_d.len() - 12;
        two_d[at..].copy_from_slice(&[64, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(bound_of(&two_d), Some(128));
        // Without the attribute, or cut short: none.
        assert_eq!(bound_of(&NV_INFO[..NV_INFO.len() - 16]), None);
        for end in 0..NV_INFO.len() {
            assert!(bound_of(&NV_INFO[..end]).is_none_or(|n| n == 256));
        }
        assert_eq!(max_threads(b"not an elf"), []);
    }

    /// A cubin's ELF layout with the sections the reader looks at: `.shstrtab`, and
    /// `.nv.info.<kernel>` (`SHT_CUDA_INFO`) for each kernel given.
    fn cubin(kernels: &[(&str, &[u8])]) -> Vec<u8> {
        let mut names = b"\0.shstrtab\0".to_vec();
        let mut name_offsets = Vec::new();
        for (kernel, _) in kernels {
            name_offsets.push(names.len() as u32);
            names.extend_from_slice(format!(".nv.info.{kernel}\0").as_bytes());
        }
        let mut elf = vec![0u8; 64];
        let mut sections = vec![(0u32, 0u32, 0u64, 0u64)]; // (name, type, offset, size)
        sections.push((1, 3, elf.len() as u64, names.len() as u64));
        elf.extend_from_slice(&names);
        for ((_, data), name) in kernels.iter().zip(name_offsets) {
            elf.resize(elf.len().next_multiple_of(4), 0);
            sections.push((name, 0x7000_0000, elf.len() as u64, data.len() as u64));
            elf.extend_from_slice(data);
        }
        elf.resize(elf.len().next_multiple_of(8), 0);
        let shoff = elf.len() as u64;
        for (name, kind, offset, size) in &sections {
            elf.extend_from_slice(&name.to_le_bytes());
            elf.extend_from_slice(&kind.to_le_bytes());
            elf.extend_from_slice(&0u64.to_le_bytes()); // flags
            elf.extend_from_slice(&0u64.to_le_bytes()); // addr
            elf.extend_from_slice(&offset.to_le_bytes());
            elf.extend_from_slice(&size.to_le_bytes());
            elf.extend_from_slice(&0u32.to_le_bytes()); // link
            elf.extend_from_slice(&0u32.to_le_bytes()); // info
            elf.extend_from_slice(&4u64.to_le_bytes()); // alignment
            elf.extend_from_slice(&0u64.to_le_bytes()); // entry size
        }
        let header = &mut elf[..64];
        header[..8].copy_from_slice(b"\x7fELF\x02\x01\x01\x33");
        header[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
        header[18..20].copy_from_slice(&190u16.to_le_bytes()); // EM_CUDA
        header[20..24].copy_from_slice(&1u32.to_le_bytes());
        header[40..48].copy_from_slice(&shoff.to_le_bytes());
        header[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
        header[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        header[58..60].copy_from_slice(&64u16.to_le_bytes()); // e_shentsize
        header[60..62].copy_from_slice(&(sections.len() as u16).to_le_bytes());
        header[62..64].copy_from_slice(&1u16.to_le_bytes()); // e_shstrndx
        elf
    }

    #[test]
    fn each_kernel_of_a_cubin_with_a_bound_is_listed() {
        let without = &NV_INFO[..NV_INFO.len() - 16];
        let image = cubin(&[("gemm__f16", NV_INFO), ("saxpy", without)]);
        assert!(crate::image::is_cubin(&image));
        assert_eq!(max_threads(&image), [("gemm__f16".to_owned(), 256)]);
    }
}
