//! Launch configurations.

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
    /// (at least one).
    pub fn for_num_elems(n: u32) -> LaunchConfig {
        LaunchConfig {
            grid: (n.div_ceil(Self::DEFAULT_BLOCK).max(1), 1, 1),
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

    /// Threads per block, or `None` on overflow.
    pub fn threads_per_block(&self) -> Option<u32> {
        self.block
            .0
            .checked_mul(self.block.1)?
            .checked_mul(self.block.2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn for_num_elems_covers_n() {
        assert_eq!(LaunchConfig::for_num_elems(0).grid, (1, 1, 1));
        assert_eq!(LaunchConfig::for_num_elems(256).grid, (1, 1, 1));
        assert_eq!(LaunchConfig::for_num_elems(257).grid, (2, 1, 1));
        assert_eq!(LaunchConfig::for_num_elems(u32::MAX).grid.0, 16_777_216);
    }
}
