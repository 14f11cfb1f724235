//! Checks of device images before a driver or the dynamic loader reads them: both trust the
//! offsets inside an image, so a truncated or foreign image is refused here rather than read
//! out of bounds.

fn read<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// `EM_CUDA`: cubins.
pub const EM_CUDA: u16 = 190;
/// `EM_AMDGPU`: AMD code objects.
pub const EM_AMDGPU: u16 = 224;
/// `EM_X86_64`.
pub const EM_X86_64: u16 = 62;
/// `EM_AARCH64`.
pub const EM_AARCH64: u16 = 183;
/// `ET_DYN`: a shared object.
const ET_DYN: u16 = 3;
/// Size of the ELF64 file header (`Elf64_Ehdr`), all of which a driver or the dynamic loader
/// reads.
const ELF64_HEADER_SIZE: usize = 64;

/// Checks that `image` is a 64-bit little-endian ELF for machine `machine` (`name` in
/// messages) whose whole file header and program and section header tables lie inside the
/// slice.
///
/// # Errors
/// A description of the first problem.
pub fn check_elf(image: &[u8], machine: u16, name: &str) -> Result<(), String> {
    if image.get(..4) != Some(b"\x7fELF") {
        return Err("no ELF magic".into());
    }
    if image.get(4) != Some(&2) || image.get(5) != Some(&1) {
        return Err("not a 64-bit little-endian ELF".into());
    }
    let too_short = || "truncated ELF header".to_owned();
    if image.len() < ELF64_HEADER_SIZE {
        return Err(format!(
            "truncated ELF header: {} bytes of {ELF64_HEADER_SIZE}",
            image.len()
        ));
    }
    let found = u16::from_le_bytes(read(image, 18).ok_or_else(too_short)?);
    if found != machine {
        return Err(format!("e_machine is {found}, not {name} ({machine})"));
    }
    let u64_at = |at| {
        read(image, at)
            .map(u64::from_le_bytes)
            .ok_or_else(too_short)
    };
    let u16_at = |at| {
        read(image, at)
            .map(u16::from_le_bytes)
            .map(u64::from)
            .ok_or_else(too_short)
    };
    let tables = [
        ("program", u64_at(32)?, u16_at(56)?, u16_at(54)?),
        ("section", u64_at(40)?, u16_at(60)?, u16_at(58)?),
    ];
    for (what, off, num, entsize) in tables {
        let end = off
            .checked_add(num * entsize)
            .ok_or_else(|| format!("{what} header table offset overflows"))?;
        if end > image.len() as u64 {
            return Err(format!(
                "{what} header table ends at {end}, past the image's {} bytes",
                image.len()
            ));
        }
    }
    Ok(())
}

/// Checks that `image` is a 64-bit little-endian ELF for `EM_CUDA` whose header tables lie
/// inside the slice.
///
/// # Errors
/// A description of the first problem.
pub fn check_cubin(image: &[u8]) -> Result<(), String> {
    check_elf(image, EM_CUDA, "EM_CUDA")
}

/// Checks that `image` is a 64-bit little-endian ELF for `EM_AMDGPU` whose header tables lie
/// inside the slice.
///
/// # Errors
/// A description of the first problem.
pub fn check_code_object(image: &[u8]) -> Result<(), String> {
    check_elf(image, EM_AMDGPU, "EM_AMDGPU")
}

/// The ELF machine of this process, for CPU device images.
pub const HOST_MACHINE: (u16, &str) = if cfg!(target_arch = "aarch64") {
    (EM_AARCH64, "EM_AARCH64")
} else {
    (EM_X86_64, "EM_X86_64")
};

/// Checks that `image` is a 64-bit little-endian shared object for this process's machine
/// whose header tables lie inside the slice: what the CPU device hands to the dynamic loader.
///
/// # Errors
/// A description of the first problem.
pub fn check_host_shared_object(image: &[u8]) -> Result<(), String> {
    check_elf(image, HOST_MACHINE.0, HOST_MACHINE.1)?;
    let e_type = read(image, 16).map(u16::from_le_bytes).unwrap_or(0);
    if e_type != ET_DYN {
        return Err(format!("e_type is {e_type}, not a shared object (ET_DYN)"));
    }
    Ok(())
}

/// Checks that `image` is an NVIDIA fat binary whose declared size fits the slice.
///
/// # Errors
/// A description of the first problem.
pub fn check_fatbin(image: &[u8]) -> Result<(), String> {
    const MAGIC: u32 = 0xBA55_ED50;
    let magic = read(image, 0)
        .map(u32::from_le_bytes)
        .ok_or("truncated fat binary header")?;
    if magic != MAGIC {
        return Err(format!("magic {magic:#x}, not {MAGIC:#x}"));
    }
    let header = read(image, 6)
        .map(u16::from_le_bytes)
        .ok_or("truncated fat binary header")?;
    let size = read(image, 8)
        .map(u64::from_le_bytes)
        .ok_or("truncated fat binary header")?;
    let end = u64::from(header)
        .checked_add(size)
        .ok_or("fat binary size overflows")?;
    if end > image.len() as u64 {
        return Err(format!(
            "fat binary declares {end} bytes, the image has {}",
            image.len()
        ));
    }
    Ok(())
}

/// PTX text with exactly one trailing NUL, as the driver reads it.
///
/// # Errors
/// When the text has a NUL before its end or does not look like PTX.
pub fn ptx_with_nul(image: &[u8]) -> Result<Vec<u8>, String> {
    let text = image.strip_suffix(&[0]).unwrap_or(image);
    let text = match text.iter().rposition(|&b| b != 0) {
        Some(last) => &text[..=last],
        None => return Err("empty PTX".into()),
    };
    if let Some(at) = text.iter().position(|&b| b == 0) {
        return Err(format!("NUL byte at offset {at} inside the PTX text"));
    }
    if !text.windows(8).any(|w| w == b".version") {
        return Err("no `.version` directive: not PTX text".into());
    }
    let mut v = Vec::with_capacity(text.len() + 1);
    v.extend_from_slice(text);
    v.push(0);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elf(machine: u16, shoff: u64, shnum: u16) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[18..20].copy_from_slice(&machine.to_le_bytes());
        b[40..48].copy_from_slice(&shoff.to_le_bytes());
        b[58..60].copy_from_slice(&64u16.to_le_bytes());
        b[60..62].copy_from_slice(&shnum.to_le_bytes());
        b
    }

    #[test]
    fn a_cpu_image_must_be_a_shared_object_for_this_machine() {
        let mut so = elf(HOST_MACHINE.0, 64, 0);
        so[16] = 3;
        assert_eq!(check_host_shared_object(&so), Ok(()));
        let mut relocatable = so.clone();
        relocatable[16] = 1;
        assert!(
            check_host_shared_object(&relocatable)
                .unwrap_err()
                .contains("ET_DYN")
        );
        let mut foreign = so.clone();
        foreign[18..20].copy_from_slice(&EM_AMDGPU.to_le_bytes());
        assert!(
            check_host_shared_object(&foreign)
                .unwrap_err()
                .contains(HOST_MACHINE.1)
        );
    }

    #[test]
    fn elf_checks_for_both_machines() {
        for (machine, check, name) in [
            (
                EM_CUDA,
                check_cubin as fn(&[u8]) -> Result<(), String>,
                "EM_CUDA",
            ),
            (EM_AMDGPU, check_code_object, "EM_AMDGPU"),
        ] {
            let mut ok = elf(machine, 64, 2);
            ok.resize(64 + 128, 0);
            assert_eq!(check(&ok), Ok(()));
            assert!(check(&elf(62, 64, 0)).unwrap_err().contains(name));
            assert!(
                check(&elf(machine, 64, 2))
                    .unwrap_err()
                    .contains("ends at 192")
            );
            assert!(
                check(&elf(machine, u64::MAX, 2))
                    .unwrap_err()
                    .contains("overflows")
            );
            assert!(check(b"\x7fELF\x02\x01").unwrap_err().contains("truncated"));
            // Found by fuzzing: every field the check reads lies in the first 62 bytes, but
            // a driver reads the whole 64-byte header.
            let mut short = elf(machine, 0, 0);
            short.truncate(62);
            assert_eq!(
                check(&short).unwrap_err(),
                "truncated ELF header: 62 bytes of 64"
            );
            assert!(
                check(b"__CLANG_OFFLOAD_BUNDLE__")
                    .unwrap_err()
                    .contains("magic")
            );
        }
    }

    #[test]
    fn fatbin_checks() {
        let mut fb = Vec::new();
        fb.extend_from_slice(&0xBA55_ED50u32.to_le_bytes());
        fb.extend_from_slice(&1u16.to_le_bytes());
        fb.extend_from_slice(&16u16.to_le_bytes());
        fb.extend_from_slice(&8u64.to_le_bytes());
        assert!(check_fatbin(&fb).unwrap_err().contains("declares 24"));
        fb.extend_from_slice(&[0; 8]);
        assert_eq!(check_fatbin(&fb), Ok(()));
        assert!(check_fatbin(&fb[..10]).is_err());
        assert!(
            check_fatbin(b"\x7fELF............")
                .unwrap_err()
                .contains("magic")
        );
    }

    #[test]
    fn ptx_gets_one_nul() {
        let p = b".version 7.8\n.target sm_80\n";
        let mut want = p.to_vec();
        want.push(0);
        assert_eq!(ptx_with_nul(p).unwrap(), want);
        let mut padded = p.to_vec();
        padded.extend_from_slice(&[0, 0, 0]);
        assert_eq!(ptx_with_nul(&padded).unwrap(), want);
        assert!(
            ptx_with_nul(b".version 7.8\0junk")
                .unwrap_err()
                .contains("offset 12")
        );
        assert!(ptx_with_nul(b"").is_err());
        assert!(ptx_with_nul(b"hello").unwrap_err().contains("not PTX"));
    }
}
