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
}

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
        }
    }

    /// A 1-D launch of `grid` blocks of `block` threads.
    pub fn linear(grid: u32, block: u32) -> LaunchConfig {
        LaunchConfig {
            grid: (grid, 1, 1),
            block: (block, 1, 1),
            shared_mem_bytes: 0,
        }
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

/// The block size, a multiple of the warp (32 threads) up to `bound`, at which a kernel using
/// `usage` keeps the most threads resident on GPU architecture `arch` with
/// `dynamic_shared_bytes` per block; of several, the largest, as CUDA's
/// `cuOccupancyMaxPotentialBlockSize` chooses. `None` for an architecture whose limits are
/// unknown.
pub(crate) fn best_block_size(
    arch: &str,
    usage: &offload_format::occupancy::KernelUsage,
    bound: u32,
    dynamic_shared_bytes: u64,
) -> Option<u32> {
    let bound = bound.clamp(1, MAX_THREADS_PER_BLOCK);
    let sizes = (1..=bound / 32)
        .rev()
        .map(|w| w * 32)
        .chain((bound < 32).then_some(bound));
    let mut best: Option<(u64, u32)> = None;
    for block_size in sizes {
        let launch = offload_format::occupancy::Launch {
            block_size,
            dynamic_shared_bytes,
        };
        let Ok(occupancy) = offload_format::occupancy::for_arch(arch, None, usage, &launch) else {
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
    best_block_size(arch, &usage, bound, dynamic_shared_bytes)
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
        ] {
            let err = config.check().unwrap_err();
            assert!(err.contains(words), "{config:?}: {err}");
        }
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
        assert_eq!(best_block_size("sm_80", &usage(32, 0), 1024, 0), Some(1024));
        // A launch bound of 384 caps it: 5 blocks of 384 keep 1920 threads, 8 of 256 all 2048.
        assert_eq!(best_block_size("sm_80", &usage(32, 0), 384, 0), Some(256));
        // 128 registers: 16 warps fit; 512 threads in one block is the largest that gets them.
        assert_eq!(best_block_size("sm_80", &usage(128, 0), 1024, 0), Some(512));
        // 60 KiB of shared memory per block (61 with the driver's): sm_80's 164 KiB hold two
        // blocks, and with 32 registers two of 1024 threads fill the SM; with 100 KiB one block
        // fits, and 1024 threads are the most it can keep.
        assert_eq!(
            best_block_size("sm_80", &usage(32, 60 << 10), 1024, 0),
            Some(1024)
        );
        assert_eq!(
            best_block_size("sm_80", &usage(32, 100 << 10), 1024, 0),
            Some(1024)
        );
        // 40 KiB on sm_86: its 100 KiB hold two blocks, its 48 warp slots 1536 threads: two
        // blocks of 768 fill it, where one of 1024 would leave a third idle.
        assert_eq!(
            best_block_size("sm_86", &usage(32, 40 << 10), 1024, 0),
            Some(768)
        );
        // 255 registers (256 allocated): 8 warps per SM, all in one block of 256 threads.
        assert_eq!(best_block_size("sm_80", &usage(255, 0), 1024, 0), Some(256));
        assert_eq!(best_block_size("sm_1", &usage(32, 0), 1024, 0), None);
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
