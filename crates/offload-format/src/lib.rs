//! Byte formats of the LLVM/clang offloading toolchain, read and written byte-compatibly with
//! clang-22's tools. Pure data: no I/O beyond `Read`/`Write`/`Seek` handed in by the caller,
//! no `unsafe`, and no panic or input-sized allocation on any input.
//!
//! | module | format | read | write |
//! |---|---|---|---|
//! | [`offload_binary`] | LLVM OffloadBinary v1 (`10 FF 10 AD`), one or many back to back, as in `.llvm.offloading` | yes, zero-copy, any alignment | yes, byte-identical to `llvm-offload-binary`, whose key order ([`llvm_key_order`], LLVM 22's `DenseMap` layout in [`llvm_hash`]) is reproduced for any keys; image streamable |
//! | [`bundle::binary`] | clang-offload-bundler binary layout (`__CLANG_OFFLOAD_BUNDLE__`, any `-bundle-align`) | yes, from memory or `Read + Seek` | yes, streaming from `Read` sources of known size |
//! | [`bundle::text`] | text layout for `i ii cui hipi d ll s` | yes | yes |
//! | [`bundle::object`] | object layout (`-type=o` with a real host object: `__CLANG_OFFLOAD_BUNDLE__<id>` ELF sections) | yes | by `llvm-objcopy` with [`bundle::objcopy_args`], as clang does |
//! | [`bundle::id`] | bundle entry IDs, normalized as the bundler's `OffloadTargetInfo::str()`; host-entry and conflict rules | | |
//! | [`ccob`] | compressed bundles "CCOB", versions 1–3, zlib and zstd, MD5-based hash | v1, v2, v3, several back to back; size and hash checked, errors name the field's offset | v2, v3 (default 3, zstd level 3 with long-distance matching, as clang-22) |
//! | [`ccob_stream`] | CCOB compression and decompression streamed through `Read`/`Write` (size and hash checked while copying), for bundles too large for memory | yes | yes |
//! | [`target_id`] | target IDs (`gfx90a:xnack+`), canonical form, compatibility, conflicting combinations; typed AMDGPU target IDs ([`AmdTargetId`], with their `e_flags`) and NVIDIA names ([`Sm`]); the AMDGPU and NVPTX processor tables of LLVM 22 | | |
//! | [`triple`] | the device triples and the host `arch` | | |
//! | [`device`] | device families ([`DeviceFamily`]: NVIDIA, AMD, the host CPU) and the facts that tell them apart: triple, offload kind, driver API, nested-build processor | | |
//! | [`panic_sites`] | the panic-site table of a GPU image: each place a kernel can panic, written by the device link, read by the runtime to word a GPU panic's report | yes | yes |
//! | [`print_template`] | the templates of device prints (`device_println!`), checked by the macro at compile time and read by the runtime to print | yes | |
//! | [`aligned`] | object files copied to an address the ELF reader accepts (archive members, sections) | | |
//! | [`archive`] | GNU `ar` and heterogeneous device archive unbundling (`-type=a`, `--allow-missing-bundles`, `--check-input-archive`), members in the binary or object layout | yes | yes, with clang's symbol index for bitcode ([`bitcode`]) and ELF members |
//! | [`image`] | device images' kernels: PTX `.entry` declarations and `ptxas -v` reports ([`image::ptx`]), CPU-device and OpenMP host shared objects (`image::elf`), AMDGPU code objects' `e_flags` and metadata note (`image::amdgpu`) | yes | `e_flags` fixed in place |
//! | [`abi`] | the device ABI: the symbols, sections and limits the kernel side, the device link, the image readers and the runtime share, each spelled once | | |
//! | [`occupancy`] | resident blocks and warps per SM (waves per CU) of a kernel's launch, and what limits them: CUDA's occupancy calculator for each `sm`, LLVM's AMDGPU wave limits for each `gfx` | | |
//!
//! Errors are one [`Error`] enum; parse errors name the byte offset and what was wrong.
//!
//! Without the `binaries` feature (on by default, and with each of `containers`,
//! `compression` and `amdgpu-metadata`) only `print_template`, `cpu_level`, `triple`,
//! `launch_bounds` and `llvm_hash` are built (with `std`), with no dependency at all: what the
//! kernel macros need, which a device build compiles once for each of its targets. Without any
//! feature the crate is `no_std` and only [`abi`], which the kernel side of `offload-rt` uses
//! in every device build.
#![cfg_attr(not(any(feature = "std", test)), no_std)]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod abi;

#[cfg(feature = "containers")]
pub mod aligned;
#[cfg(feature = "containers")]
pub mod archive;
#[cfg(feature = "containers")]
pub mod bitcode;
#[cfg(feature = "containers")]
pub mod bundle;
#[cfg(feature = "containers")]
pub mod ccob;
#[cfg(feature = "compression")]
pub mod ccob_stream;
#[cfg(feature = "std")]
pub mod cpu_level;
#[cfg(feature = "binaries")]
pub mod device;
#[cfg(feature = "binaries")]
pub mod error;
#[cfg(feature = "binaries")]
pub mod image;
#[cfg(feature = "std")]
pub mod launch_bounds;
#[cfg(feature = "std")]
pub mod llvm_hash;
#[cfg(feature = "binaries")]
pub mod occupancy;
#[cfg(feature = "binaries")]
pub mod offload_binary;
#[cfg(feature = "binaries")]
pub mod panic_sites;
#[cfg(feature = "std")]
pub mod print_template;
#[cfg(feature = "binaries")]
pub mod target_id;
#[cfg(feature = "std")]
pub mod triple;

#[cfg(feature = "containers")]
pub use bundle::{BundleEntryId, BundleReader};
#[cfg(feature = "containers")]
pub use ccob::{CompressOptions, CompressionMethod};
#[cfg(feature = "std")]
pub use cpu_level::CpuLevel;
#[cfg(feature = "binaries")]
pub use device::DeviceFamily;
#[cfg(feature = "binaries")]
pub use error::{Error, Result};
#[cfg(feature = "binaries")]
pub use offload_binary::{
    ImageKind, OFFLOAD_BINARY_MAGIC, OffloadBinary, OffloadKind, llvm_key_order, parse_all,
};
#[cfg(feature = "binaries")]
pub use target_id::{AmdTargetId, Sm, TargetId, conflicting_combination};
