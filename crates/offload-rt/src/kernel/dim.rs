//! Three extents or indices, and the global index they give.

/// Three extents or indices, as CUDA's `dim3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Dim3 {
    /// The fastest-varying component.
    pub x: u32,
    /// The second component.
    pub y: u32,
    /// The slowest-varying component.
    pub z: u32,
}

/// `usize`'s, which costs a GPU kernel registers and instructions at every use.
#[inline(always)]
pub(super) fn global_idx(block: u32, dim: u32, thread: u32) -> usize {
    // SAFETY: `block < grid extent` and `thread < dim`, so `block * dim + thread` is below
    // grid extent times block extent, which the launch rule of every backend keeps within
    // `u32` (`LaunchConfig::check`).
    unsafe { block.unchecked_mul(dim).unchecked_add(thread) as usize }
}
