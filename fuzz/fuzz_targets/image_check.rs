#![no_main]

use libfuzzer_sys::fuzz_target;
use object::LittleEndian;
use object::elf::FileHeader64;
use object::read::elf::FileHeader as _;
use offload_rt::__internal::image::{
    EM_AMDGPU, EM_CUDA, HOST_MACHINE, check_code_object, check_cubin, check_elf, check_fatbin,
    check_host_shared_object, ptx_with_nul,
};

/// What a driver or the dynamic loader reads of an ELF the check accepted: the whole header
/// and both header tables, all inside the image.
fn assert_readable(image: &[u8], machine: u16) -> &FileHeader64<LittleEndian> {
    // The fields as they are read, not `FileHeader64::parse`, which also checks fields
    // (EI_VERSION, …) that the driver or loader checks itself.
    let (header, _) =
        object::pod::from_bytes::<FileHeader64<LittleEndian>>(image).expect("a whole ELF header");
    let e = LittleEndian;
    assert_eq!(header.e_machine(e), machine);
    for (off, num, size) in [
        (header.e_phoff(e), header.e_phnum(e), header.e_phentsize(e)),
        (header.e_shoff(e), header.e_shnum(e), header.e_shentsize(e)),
    ] {
        let end = off.checked_add(u64::from(num) * u64::from(size));
        assert!(end.is_some_and(|end| end <= image.len() as u64));
    }
    header
}

fuzz_target!(|data: &[u8]| {
    if check_cubin(data).is_ok() {
        assert_readable(data, EM_CUDA);
    }
    if check_code_object(data).is_ok() {
        assert_readable(data, EM_AMDGPU);
    }
    if check_host_shared_object(data).is_ok() {
        let header = assert_readable(data, HOST_MACHINE.0);
        assert_eq!(header.e_type(LittleEndian), object::elf::ET_DYN);
    }
    let machine = data
        .get(18..20)
        .map_or(0, |m| u16::from_le_bytes([m[0], m[1]]));
    if check_elf(data, machine, "its own machine").is_ok() {
        assert_readable(data, machine);
    }
    if check_fatbin(data).is_ok() {
        let header = u16::from_le_bytes([data[6], data[7]]);
        let size = u64::from_le_bytes(data[8..16].try_into().expect("8 bytes"));
        assert!(u64::from(header) + size <= data.len() as u64);
    }
    if let Ok(ptx) = ptx_with_nul(data) {
        let (last, text) = ptx.split_last().expect("not empty");
        assert_eq!(*last, 0);
        assert!(!text.contains(&0));
        assert!(data.starts_with(text));
        assert!(text.windows(8).any(|w| w == b".version"));
    }
});
