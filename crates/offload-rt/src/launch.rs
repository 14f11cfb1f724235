//! Launch configurations, the one rule of which shapes every backend accepts, and the launch
//! value ([`LaunchArgs`]) every layer passes on whole.

use std::ffi::c_void;

use crate::error::Error;

/// Threads per block every device runs (CUDA, HIP and the CPU device alike).
pub const MAX_THREADS_PER_BLOCK: u32 = 1024;
/// Largest block extent in x, y, z (CUDA's limits, which AMD GPUs and the CPU device meet).
pub const MAX_BLOCK_DIM: (u32, u32, u32) = (1024, 1024, 64);
/// Largest grid extent in x, y, z, in blocks (CUDA's limits).
pub const MAX_GRID_DIM: (u32, u32, u32) = (i32::MAX as u32, 65535, 65535);

/// What a launch that passed [`LaunchConfig::check`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LaunchShape {
    /// A grid with no block (some extent is 0): nothing runs and the launch succeeds.
    Empty,
    /// `blocks` blocks of `threads` threads.
    Blocks {
        /// Blocks in the grid.
        blocks: u64,
        /// Threads per block.
        threads: u32,
    },
}

/// A number of elements [`LaunchConfig::for_num_elems`] takes: any primitive integer (an
/// integer literal is an `i32`); a negative one counts no elements.
pub trait ElementCount: Copy {
    /// The count.
    fn count(self) -> u64;
}

macro_rules! element_counts {
    ($($t:ty),*) => {$(
        impl ElementCount for $t {
            fn count(self) -> u64 {
                // Lossless: no unsigned type here is wider than 64 bits.
                self as u64
            }
        }
    )*};
}
element_counts!(u8, u16, u32, u64, usize);

macro_rules! signed_element_counts {
    ($($t:ty),*) => {$(
        impl ElementCount for $t {
            fn count(self) -> u64 {
                u64::try_from(self).unwrap_or(0)
            }
        }
    )*};
}
signed_element_counts!(i8, i16, i32, i64, isize);

/// Grid and block shape of a launch, and the dynamic shared memory per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// Blocks in the grid (x, y, z).
    pub grid: (u32, u32, u32),
    /// Threads per block (x, y, z).
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
    /// Blocks per thread-block cluster (x, y, z): `(1, 1, 1)`, no clusters, unless set with
    /// [`LaunchConfig::with_cluster`]. Clusters of more than one block need an NVIDIA GPU of
    /// compute capability 9.0 or later ([`crate::Device::supports_clusters`]).
    pub cluster: (u32, u32, u32),
}

/// The most blocks a thread-block cluster may have: Hopper's limit with the kernel opted in
/// to non-portable sizes, which the runtime does for clusters of more than
/// [`MAX_PORTABLE_CLUSTER_SIZE`].
pub const MAX_CLUSTER_SIZE: u32 = 16;
/// The most blocks of a cluster every GPU with clusters runs.
pub const MAX_PORTABLE_CLUSTER_SIZE: u32 = 8;

impl LaunchConfig {
    /// Threads per block chosen by [`LaunchConfig::for_num_elems`].
    pub const DEFAULT_BLOCK: u32 = 256;

    /// A 1-D launch with at least `n` threads: blocks of 256 threads, as many as needed
    /// (at least one). `n` is any integer count (`usize` lengths, `u32`, `u64`); a count
    /// needing more blocks than a grid holds gives a grid the launch refuses
    /// ([`LaunchConfig::check`]), never fewer threads than asked.
    pub fn for_num_elems(n: impl ElementCount) -> LaunchConfig {
        let blocks = n.count().div_ceil(u64::from(Self::DEFAULT_BLOCK)).max(1);
        LaunchConfig {
            grid: (u32::try_from(blocks).unwrap_or(u32::MAX), 1, 1),
            block: (Self::DEFAULT_BLOCK, 1, 1),
            shared_mem_bytes: 0,
            cluster: (1, 1, 1),
        }
    }

    /// A 1-D launch of `grid` blocks of `block` threads.
    pub fn linear(grid: u32, block: u32) -> LaunchConfig {
        LaunchConfig {
            grid: (grid, 1, 1),
            block: (block, 1, 1),
            shared_mem_bytes: 0,
            cluster: (1, 1, 1),
        }
    }

    /// This launch with its blocks grouped into thread-block clusters of `cluster` blocks
    /// (x, y, z), which run at once on one GPU processing cluster and share their shared
    /// memory (`kernel::cluster`); each grid extent must be a multiple of the cluster's, and a
    /// cluster at most [`MAX_CLUSTER_SIZE`] blocks. Launched through `cuLaunchKernelEx` on
    /// NVIDIA GPUs of compute capability 9.0 and later; AMD GPUs and the CPU device refuse a
    /// cluster of more than one block with [`crate::Error::InvalidLaunch`].
    #[must_use]
    pub fn with_cluster(self, cluster: (u32, u32, u32)) -> LaunchConfig {
        LaunchConfig { cluster, ..self }
    }

    /// Blocks per cluster, or `None` on overflow.
    pub fn cluster_size(&self) -> Option<u32> {
        self.cluster
            .0
            .checked_mul(self.cluster.1)?
            .checked_mul(self.cluster.2)
    }

    /// Whether the launch groups its blocks into clusters of more than one.
    pub fn is_clustered(&self) -> bool {
        self.cluster != (1, 1, 1)
    }

    /// Total blocks, or `None` on overflow.
    pub fn num_blocks(&self) -> Option<u64> {
        u64::from(self.grid.0)
            .checked_mul(u64::from(self.grid.1))?
            .checked_mul(u64::from(self.grid.2))
    }

    /// The launch rule of every backend, so that a launch gives the same answer on every
    /// device. A grid with an extent of 0 is empty: nothing runs and the launch succeeds
    /// (a launch over `n = 0` elements). Every block extent must be at least 1 and at most
    /// [`MAX_BLOCK_DIM`], with at most [`MAX_THREADS_PER_BLOCK`] threads in all; grid extents
    /// at most [`MAX_GRID_DIM`], and grid extent times block extent must fit in `u32` (AMD
    /// counts the grid in work-items). Dynamic shared memory is checked by each backend
    /// against its device.
    ///
    /// # Errors
    /// Why the shape is invalid, as [`crate::Error::InvalidLaunch`]'s reason.
    pub fn check(&self) -> Result<LaunchShape, String> {
        let block = [self.block.0, self.block.1, self.block.2];
        let grid = [self.grid.0, self.grid.1, self.grid.2];
        let max_block = [MAX_BLOCK_DIM.0, MAX_BLOCK_DIM.1, MAX_BLOCK_DIM.2];
        let max_grid = [MAX_GRID_DIM.0, MAX_GRID_DIM.1, MAX_GRID_DIM.2];
        if block.contains(&0) {
            return Err(format!(
                "block {:?} must be at least 1 in every dimension",
                self.block
            ));
        }
        if block.iter().zip(max_block).any(|(&b, max)| b > max) {
            return Err(format!(
                "block {:?} exceeds the largest block {MAX_BLOCK_DIM:?}",
                self.block
            ));
        }
        let threads = self
            .threads_per_block()
            .filter(|&t| t <= MAX_THREADS_PER_BLOCK)
            .ok_or_else(|| {
                format!(
                    "block {:?} has more than {MAX_THREADS_PER_BLOCK} threads",
                    self.block
                )
            })?;
        if grid.iter().zip(max_grid).any(|(&g, max)| g > max) {
            return Err(format!(
                "grid {:?} exceeds the largest grid {MAX_GRID_DIM:?}",
                self.grid
            ));
        }
        if grid
            .iter()
            .zip(block)
            .any(|(&g, b)| g.checked_mul(b).is_none())
        {
            return Err(format!(
                "grid {:?} of blocks {:?} has more than {} threads in one dimension",
                self.grid,
                self.block,
                u32::MAX
            ));
        }
        let cluster = [self.cluster.0, self.cluster.1, self.cluster.2];
        if cluster.contains(&0) {
            return Err(format!(
                "cluster {:?} must be at least 1 in every dimension",
                self.cluster
            ));
        }
        if self
            .cluster_size()
            .is_none_or(|size| size > MAX_CLUSTER_SIZE)
        {
            return Err(format!(
                "cluster {:?} has more than {MAX_CLUSTER_SIZE} blocks",
                self.cluster
            ));
        }
        if grid.iter().zip(cluster).any(|(&g, c)| g % c != 0) {
            return Err(format!(
                "grid {:?} is not a whole number of clusters {:?} in every dimension",
                self.grid, self.cluster
            ));
        }
        match self.num_blocks() {
            Some(0) => Ok(LaunchShape::Empty),
            Some(blocks) => Ok(LaunchShape::Blocks { blocks, threads }),
            None => Err("grid size overflows".to_owned()),
        }
    }

    /// Threads per block, or `None` on overflow.
    pub fn threads_per_block(&self) -> Option<u32> {
        self.block
            .0
            .checked_mul(self.block.1)?
            .checked_mul(self.block.2)
    }
}

/// The block size, a multiple of the warp (wavefront) up to `bound`, at which a kernel using
/// `usage` keeps the most threads resident on GPU architecture `arch` with
/// `dynamic_shared_bytes` per block; of several, the largest, as CUDA's
/// `cuOccupancyMaxPotentialBlockSize` chooses. The warp is 32 threads on NVIDIA, and on AMD
/// `wave_size` where the kernel records one, else the processor's default (64 on GFX9, 32
/// from GFX10). `None` for an architecture whose limits are unknown, or where no block fits.
pub(crate) fn best_block_size(
    arch: &str,
    wave_size: Option<u32>,
    usage: &offload_format::occupancy::KernelUsage,
    bound: u32,
    dynamic_shared_bytes: u64,
) -> Option<u32> {
    let bound = bound.clamp(1, MAX_THREADS_PER_BLOCK);
    let occupancy = |block_size| {
        let launch = offload_format::occupancy::Launch {
            block_size,
            dynamic_shared_bytes,
        };
        offload_format::occupancy::for_arch(arch, wave_size, usage, &launch).ok()
    };
    let wave = occupancy(bound)?.wave_size.max(1);
    let sizes = (1..=bound / wave)
        .rev()
        .map(|w| w * wave)
        .chain((bound < wave).then_some(bound));
    let mut best: Option<(u64, u32)> = None;
    for block_size in sizes {
        let Some(occupancy) = occupancy(block_size) else {
            continue;
        };
        let threads = u64::from(occupancy.blocks) * u64::from(block_size);
        if best.is_none_or(|(most, _)| threads > most) {
            best = Some((threads, block_size));
        }
    }
    best.filter(|&(threads, _)| threads > 0)
        .map(|(_, size)| size)
}

/// [`best_block_size`] for `kernel` of the GPU image `binary` (for `arch`), from the registers
/// and shared memory its build recorded (`offload.kernel-resources`) and its launch bound,
/// read from `ptx` (the module's PTX, whose `.maxntid` every image of the module shares);
/// `None` where the image records no figures for it.
pub(crate) fn image_block_size(
    binary: &offload_format::OffloadBinary<'_>,
    ptx: Option<&offload_format::OffloadBinary<'_>>,
    arch: &str,
    kernel: &str,
    dynamic_shared_bytes: u64,
) -> Option<u32> {
    let text = binary.get(offload_format::offload_binary::KEY_KERNEL_RESOURCES)?;
    let resources = offload_format::offload_binary::parse_kernel_resources(text).ok()?;
    let found = resources.into_iter().find(|r| r.name == kernel)?;
    let bound = ptx
        .and_then(|p| std::str::from_utf8(&p.image).ok())
        .map(offload_format::image::ptx::max_threads)
        .unwrap_or_default()
        .into_iter()
        .find(|(name, _)| name == kernel)
        .map_or(MAX_THREADS_PER_BLOCK, |(_, n)| n);
    let usage = offload_format::occupancy::KernelUsage {
        registers: found.registers,
        shared_bytes: found.shared_bytes,
        ..Default::default()
    };
    best_block_size(arch, None, &usage, bound, dynamic_shared_bytes)
}

/// [`best_block_size`] for `kernel` of AMD code object `code_object` (for `arch`), from the
/// VGPRs, AGPRs, SGPRs, static LDS, wavefront size and largest work-group its metadata note
/// records; `None` where the code object cannot be read or records no such kernel.
#[cfg(feature = "amdgpu-metadata")]
pub(crate) fn code_object_block_size(
    code_object: &[u8],
    arch: &str,
    kernel: &str,
    dynamic_shared_bytes: u64,
) -> Option<u32> {
    let info = offload_format::image::amdgpu::inspect(code_object).ok()?;
    let found = info.kernels.iter().find(|k| k.name == kernel)?;
    let usage = offload_format::occupancy::KernelUsage::from_amd_metadata(
        arch,
        u32::try_from(found.vgpr_count).ok()?,
        u32::try_from(found.agpr_count).ok()?,
        u32::try_from(found.sgpr_count).ok()?,
        found.group_segment_fixed_size,
    );
    // 0 where the metadata lacks the field.
    let recorded = |n: u64| u32::try_from(n).ok().filter(|&n| n > 0);
    let bound = recorded(found.max_flat_workgroup_size).unwrap_or(MAX_THREADS_PER_BLOCK);
    best_block_size(
        arch,
        recorded(found.wavefront_size),
        &usage,
        bound,
        dynamic_shared_bytes,
    )
}

/// One kernel launch as it goes from a typed kernel handle down to the driver: which kernel,
/// its configuration, and its arguments in the launch ABI (one pointer per parameter to the
/// parameter's value, with each value's size where known).
///
/// Building one is safe; launching it is not: the launch functions taking it state what
/// the pointers must point at.
#[derive(Debug, Clone, Copy)]
pub struct LaunchArgs<'a> {
    /// The kernel module (a kernel crate's library name) that holds the kernel, or `None`
    /// for a foreign kernel found by its symbol name.
    pub(crate) module: Option<&'static str>,
    /// The kernel's name (its symbol).
    pub(crate) kernel: &'static str,
    pub(crate) config: LaunchConfig,
    /// One pointer per kernel parameter, in order (`cuLaunchKernel`'s `kernelParams`).
    pub(crate) params: &'a [*mut c_void],
    /// The size of each value `params` points at: a queue that runs the launch later keeps
    /// copies of the values.
    pub(crate) sizes: Option<&'a [usize]>,
    /// A cooperative launch: all blocks resident at once, the first parameter the kernel's
    /// `Grid`, which the backend supplies.
    pub(crate) cooperative: bool,
    /// The bytes of the buffers passed for the kernel's slice and pointer parameters, which
    /// the profile counts as moved by the launch.
    pub(crate) bytes: u64,
}

impl<'a> LaunchArgs<'a> {
    /// A launch of foreign kernel `kernel` (found by its symbol name) with `config` and the
    /// parameter pointers `params`, their sizes unknown.
    pub fn new(kernel: &'static str, config: LaunchConfig, params: &'a [*mut c_void]) -> Self {
        LaunchArgs {
            module: None,
            kernel,
            config,
            params,
            sizes: None,
            cooperative: false,
            bytes: 0,
        }
    }

    /// The kernel found in kernel module `module` instead of by its symbol name.
    #[must_use]
    pub fn in_module(self, module: &'static str) -> Self {
        LaunchArgs {
            module: Some(module),
            ..self
        }
    }

    /// `params[i]` points at `sizes[i]` bytes.
    #[must_use]
    pub fn with_sizes(self, sizes: &'a [usize]) -> Self {
        LaunchArgs {
            sizes: Some(sizes),
            ..self
        }
    }

    /// The launch's buffers (its slice and pointer parameters') hold `bytes` in all: what the
    /// profile counts as moved by it ([`crate::profile`]).
    #[must_use]
    pub fn with_buffer_bytes(self, bytes: u64) -> Self {
        LaunchArgs { bytes, ..self }
    }

    /// A cooperative launch of a kernel whose first parameter is its `Grid` (`params[0]` points
    /// at a placeholder the backend replaces).
    #[must_use]
    pub fn cooperative(self) -> Self {
        LaunchArgs {
            cooperative: true,
            ..self
        }
    }

    /// [`LaunchConfig::check`], its refusal as [`Error::InvalidLaunch`] naming the kernel.
    pub(crate) fn check(&self) -> Result<LaunchShape, Error> {
        self.config.check().map_err(|reason| self.invalid(reason))
    }

    /// [`Error::InvalidLaunch`] for this launch.
    pub(crate) fn invalid(&self, reason: String) -> Error {
        Error::InvalidLaunch {
            kernel: self.kernel.to_owned(),
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_grids_run_nothing() {
        for grid in [(0, 1, 1), (1, 0, 1), (5, 5, 0)] {
            let config = LaunchConfig {
                grid,
                ..LaunchConfig::linear(1, 64)
            };
            assert_eq!(config.check(), Ok(LaunchShape::Empty), "{grid:?}");
        }
        assert_eq!(
            LaunchConfig::linear(3, 64).check(),
            Ok(LaunchShape::Blocks {
                blocks: 3,
                threads: 64
            })
        );
    }

    #[test]
    fn invalid_shapes_are_refused() {
        let shape = |grid, block| LaunchConfig {
            grid,
            block,
            shared_mem_bytes: 0,
            cluster: (1, 1, 1),
        };
        for (config, words) in [
            (shape((1, 1, 1), (0, 1, 1)), "at least 1"),
            // An empty grid does not excuse an invalid block.
            (shape((0, 1, 1), (64, 0, 1)), "at least 1"),
            (shape((1, 1, 1), (2048, 1, 1)), "largest block"),
            (shape((1, 1, 1), (1, 1, 128)), "largest block"),
            (shape((1, 1, 1), (64, 64, 1)), "more than 1024 threads"),
            (shape((1, 65536, 1), (1, 1, 1)), "largest grid"),
            (shape((1 << 31, 1, 1), (1, 1, 1)), "largest grid"),
            (shape((1 << 30, 1, 1), (8, 1, 1)), "in one dimension"),
            (
                shape((4, 1, 1), (32, 1, 1)).with_cluster((0, 1, 1)),
                "at least 1",
            ),
            (
                shape((6, 1, 1), (32, 1, 1)).with_cluster((4, 1, 1)),
                "whole number of clusters",
            ),
            (
                shape((32, 2, 1), (32, 1, 1)).with_cluster((16, 2, 1)),
                "more than 16 blocks",
            ),
            (
                shape((1, 1, 1), (32, 1, 1)).with_cluster((1 << 16, 1 << 16, 1)),
                "more than 16 blocks",
            ),
        ] {
            let err = config.check().unwrap_err();
            assert!(err.contains(words), "{config:?}: {err}");
        }
    }

    #[test]
    fn clusters_divide_the_grid() {
        let config = LaunchConfig {
            grid: (8, 4, 2),
            block: (128, 1, 1),
            shared_mem_bytes: 0,
            cluster: (1, 1, 1),
        };
        assert!(!config.is_clustered());
        for cluster in [(2, 1, 1), (8, 2, 1), (4, 2, 2), (2, 4, 2)] {
            let clustered = config.with_cluster(cluster);
            assert!(clustered.is_clustered());
            assert_eq!(
                clustered.check(),
                Ok(LaunchShape::Blocks {
                    blocks: 64,
                    threads: 128
                }),
                "{cluster:?}"
            );
        }
        // An empty grid is a whole number of any cluster.
        let empty = LaunchConfig::linear(0, 32).with_cluster((2, 1, 1));
        assert_eq!(empty.check(), Ok(LaunchShape::Empty));
    }

    #[test]
    fn the_best_block_size_is_cudas_occupancy_calculators() {
        use offload_format::occupancy::KernelUsage;
        let usage = |registers, shared_bytes| KernelUsage {
            registers,
            shared_bytes,
            ..Default::default()
        };
        // 32 registers: every block size up to 1024 fills sm_80's 64 warps; the largest wins.
        assert_eq!(
            best_block_size("sm_80", None, &usage(32, 0), 1024, 0),
            Some(1024)
        );
        // A launch bound of 384 caps it: 5 blocks of 384 keep 1920 threads, 8 of 256 all 2048.
        assert_eq!(
            best_block_size("sm_80", None, &usage(32, 0), 384, 0),
            Some(256)
        );
        // 128 registers: 16 warps fit; 512 threads in one block is the largest that gets them.
        assert_eq!(
            best_block_size("sm_80", None, &usage(128, 0), 1024, 0),
            Some(512)
        );
        // 60 KiB of shared memory per block (61 with the driver's): sm_80's 164 KiB hold two
        // blocks, and with 32 registers two of 1024 threads fill the SM; with 100 KiB one block
        // fits, and 1024 threads are the most it can keep.
        assert_eq!(
            best_block_size("sm_80", None, &usage(32, 60 << 10), 1024, 0),
            Some(1024)
        );
        assert_eq!(
            best_block_size("sm_80", None, &usage(32, 100 << 10), 1024, 0),
            Some(1024)
        );
        // 40 KiB on sm_86: its 100 KiB hold two blocks, its 48 warp slots 1536 threads: two
        // blocks of 768 fill it, where one of 1024 would leave a third idle.
        assert_eq!(
            best_block_size("sm_86", None, &usage(32, 40 << 10), 1024, 0),
            Some(768)
        );
        // 255 registers (256 allocated): 8 warps per SM, all in one block of 256 threads.
        assert_eq!(
            best_block_size("sm_80", None, &usage(255, 0), 1024, 0),
            Some(256)
        );
        assert_eq!(best_block_size("sm_1", None, &usage(32, 0), 1024, 0), None);
    }

    /// A code object holding a metadata note for one kernel, `k`: the ELF header, the note, the
    /// section names, then the section headers (null, note, names). The msgpack is written by
    /// hand: a map of fixstr keys to positive integers below 2^16.
    #[cfg(feature = "amdgpu-metadata")]
    fn code_object(fields: &[(&str, u16)]) -> Vec<u8> {
        fn fixstr(out: &mut Vec<u8>, s: &str) {
            out.push(0xa0 | s.len() as u8);
            out.extend_from_slice(s.as_bytes());
        }
        let mut desc = vec![0x81];
        fixstr(&mut desc, "amdhsa.kernels");
        desc.extend_from_slice(&[0x91, 0x80 | (fields.len() as u8 + 1)]);
        fixstr(&mut desc, ".name");
        fixstr(&mut desc, "k");
        for &(key, value) in fields {
            fixstr(&mut desc, key);
            desc.push(0xcd);
            desc.extend_from_slice(&value.to_be_bytes());
        }
        let mut image = vec![0u8; 64];
        image[..4].copy_from_slice(b"\x7fELF");
        image[4..9].copy_from_slice(&[2, 1, 1, 64, 3]);
        image[16..18].copy_from_slice(&3u16.to_le_bytes());
        image[18..20].copy_from_slice(&224u16.to_le_bytes());
        image[20..24].copy_from_slice(&1u32.to_le_bytes());
        image[52..54].copy_from_slice(&64u16.to_le_bytes());
        let note_at = image.len() as u64;
        image.extend_from_slice(&7u32.to_le_bytes());
        image.extend_from_slice(&(desc.len() as u32).to_le_bytes());
        image.extend_from_slice(&32u32.to_le_bytes());
        image.extend_from_slice(b"AMDGPU\0\0");
        image.extend_from_slice(&desc);
        image.resize(image.len().next_multiple_of(4), 0);
        let note_size = image.len() as u64 - note_at;
        let names: &[u8] = b"\0.note\0.shstrtab\0";
        let names_at = image.len() as u64;
        image.extend_from_slice(names);
        image.resize(image.len().next_multiple_of(8), 0);
        let shoff = image.len() as u64;
        let header = |name: u32, kind: u32, offset: u64, size: u64| {
            let mut h = [0u8; 64];
            h[..4].copy_from_slice(&name.to_le_bytes());
            h[4..8].copy_from_slice(&kind.to_le_bytes());
            h[24..32].copy_from_slice(&offset.to_le_bytes());
            h[32..40].copy_from_slice(&size.to_le_bytes());
            h[48..56].copy_from_slice(&4u64.to_le_bytes());
            h
        };
        image.extend_from_slice(&[0; 64]);
        // SHT_NOTE, SHT_STRTAB.
        image.extend_from_slice(&header(1, 7, note_at, note_size));
        image.extend_from_slice(&header(7, 3, names_at, names.len() as u64));
        image[40..48].copy_from_slice(&shoff.to_le_bytes());
        image[58..60].copy_from_slice(&64u16.to_le_bytes());
        image[60..62].copy_from_slice(&3u16.to_le_bytes());
        image[62..64].copy_from_slice(&2u16.to_le_bytes());
        image
    }

    /// The figures reach the rules from a code object's metadata note: those of the gfx90a
    /// and gfx1100 cases below.
    #[cfg(feature = "amdgpu-metadata")]
    #[test]
    fn a_code_objects_metadata_gives_the_amd_block_size() {
        let gfx90a = code_object(&[
            (".vgpr_count", 96),
            (".sgpr_count", 32),
            (".wavefront_size", 64),
            (".max_flat_workgroup_size", 1024),
        ]);
        assert_eq!(code_object_block_size(&gfx90a, "gfx90a", "k", 0), Some(640));
        assert_eq!(
            code_object_block_size(&gfx90a, "gfx90a:sramecc+:xnack-", "k", 40 << 10),
            Some(1024)
        );
        assert_eq!(
            code_object_block_size(&gfx90a, "gfx90a", "missing", 0),
            None
        );
        let limited = code_object(&[
            (".vgpr_count", 96),
            (".sgpr_count", 32),
            (".max_flat_workgroup_size", 256),
        ]);
        assert_eq!(
            code_object_block_size(&limited, "gfx90a", "k", 0),
            Some(256)
        );
        // 61 VGPRs and 100 AGPRs: `.vgpr_count` counts both, the AGPRs from 64.
        let agprs = code_object(&[
            (".vgpr_count", 164),
            (".agpr_count", 100),
            (".sgpr_count", 32),
        ]);
        assert_eq!(code_object_block_size(&agprs, "gfx90a", "k", 0), Some(768));
        let gfx1100 = code_object(&[(".vgpr_count", 210), (".group_segment_fixed_size", 0)]);
        assert_eq!(
            code_object_block_size(&gfx1100, "gfx1100", "k", 0),
            Some(896)
        );
        let wave64 = code_object(&[(".vgpr_count", 210), (".wavefront_size", 64)]);
        assert_eq!(
            code_object_block_size(&wave64, "gfx1100", "k", 0),
            Some(768)
        );
        assert_eq!(code_object_block_size(b"not ELF", "gfx1100", "k", 0), None);
    }

    /// AMD: the same rule, over multiples of the wavefront, by `offload_format::occupancy`'s
    /// AMD limits. `w` below is waves per work-group.
    #[test]
    fn the_best_block_size_on_amd_counts_whole_wavefronts() {
        use offload_format::occupancy::KernelUsage;
        let usage = |registers, agprs, sgprs, shared_bytes| KernelUsage {
            registers,
            agprs,
            sgprs,
            shared_bytes,
        };
        // gfx90a: wave64, 4 SIMDs of 8 wave slots (32 per CU), 512 VGPRs by 8, 800 SGPRs by
        // 16, 64 KiB of LDS, 16 multi-wave work-groups. 96 VGPRs: 512 / 96 = 5 waves per SIMD,
        // 20 per CU; 32 SGPRs: 25 per SIMD, 100 per CU. Work-groups: floor(20 / w), so
        // 64 × w × floor(20 / w) threads: w = 16 keeps 1024, w = 10, 5, 4, 2 and 1 keep 1280,
        // w = 9 and 6 1152. The largest of 1280: 10 waves, 640 threads.
        let k = usage(96, 0, 32, 0);
        assert_eq!(best_block_size("gfx90a", None, &k, 1024, 0), Some(640));
        // The kernel's wavefront size is gfx90a's.
        assert_eq!(best_block_size("gfx90a", Some(64), &k, 1024, 0), Some(640));
        // A work-group limit of 256 (4 waves): 5 work-groups of 4 waves, 1280 threads.
        assert_eq!(best_block_size("gfx90a", None, &k, 256, 0), Some(256));
        // 40 KiB of LDS (80 granules of 512): 65536 / 40960 = 1 work-group, whose 16 waves
        // the VGPRs (20) allow: 1024 threads.
        let lds = usage(96, 0, 32, 40 << 10);
        assert_eq!(best_block_size("gfx90a", None, &lds, 1024, 0), Some(1024));
        // The same as dynamic LDS.
        assert_eq!(
            best_block_size("gfx90a", None, &k, 1024, 40 << 10),
            Some(1024)
        );
        // AGPRs share the file: 61 VGPRs, then 100 AGPRs from 64: 164, allocated 168; 512 /
        // 168 = 3 waves per SIMD, 12 per CU. 64 × w × floor(12 / w): 768 for w = 12, 6, 4,
        // 3, 2, 1, none for w over 12. The largest: 768 threads.
        let agprs = usage(61, 100, 32, 0);
        assert_eq!(best_block_size("gfx90a", None, &agprs, 1024, 0), Some(768));

        // gfx1100: wave32 by default, a WGP of 4 SIMDs of 16 wave slots (64), 1536 VGPRs by
        // 24, 128 KiB of LDS (64 KiB per work-group), 32 multi-wave work-groups, no SGPR
        // limit. 210 VGPRs, allocated 216: 1536 / 216 = 7 waves per SIMD, 28 per WGP;
        // 32 × w × floor(28 / w) threads: 896 for every w dividing 28, none over 28. The
        // largest: 28 waves, 896 threads.
        let k = usage(210, 0, 64, 0);
        assert_eq!(best_block_size("gfx1100", None, &k, 1024, 0), Some(896));
        // Built for wave64: 768 VGPRs by 12, 210 → 216, 768 / 216 = 3 waves per SIMD, 12 per
        // WGP; 64 × w × floor(12 / w): 768 at most, the largest 12 waves, 768 threads.
        assert_eq!(best_block_size("gfx1100", Some(64), &k, 1024, 0), Some(768));
        // 128 VGPRs, allocated 144: 10 waves per SIMD, 40 per WGP; 32 × w × floor(40 / w):
        // 1280 for w = 20, 10, 8, 5, ...; 1024 for w = 32. The largest: 640 threads.
        assert_eq!(
            best_block_size("gfx1100", None, &usage(128, 0, 0, 0), 1024, 0),
            Some(640)
        );
        // More LDS than a work-group may have (64 KiB): no block fits.
        assert_eq!(
            best_block_size("gfx1100", None, &usage(128, 0, 0, 0), 1024, 65 << 10),
            None
        );
        // gfx9 runs no wave32.
        assert_eq!(best_block_size("gfx90a", Some(32), &k, 1024, 0), None);
    }

    #[test]
    fn for_num_elems_covers_n() {
        assert_eq!(LaunchConfig::for_num_elems(0).grid, (1, 1, 1));
        assert_eq!(LaunchConfig::for_num_elems(256).grid, (1, 1, 1));
        assert_eq!(LaunchConfig::for_num_elems(257).grid, (2, 1, 1));
        assert_eq!(LaunchConfig::for_num_elems(u32::MAX).grid.0, 16_777_216);
        // Lengths are `usize`; past what a grid holds, a grid the launch refuses.
        assert_eq!(
            LaunchConfig::for_num_elems(vec![0u8; 300].len()).grid,
            (2, 1, 1)
        );
        assert_eq!(LaunchConfig::for_num_elems(-5).grid, (1, 1, 1));
        let huge = LaunchConfig::for_num_elems(u64::MAX);
        assert_eq!(huge.grid.0, u32::MAX);
        assert!(huge.check().is_err());
    }
}
