//! The calling thread's indices and its block's and grid's sizes, the block's barrier and
//! dynamic shared memory, and strided loops over them: each the per-target module's.

use super::abi::DeviceCopy;
use super::arch;
use super::dim::{Dim3, global_idx};
use super::limits::DYNAMIC_SHARED_ALIGN;

/// The block's dynamic shared memory (CUDA's `extern __shared__`): the
/// `LaunchConfig::shared_mem_bytes` bytes the launch asked for, shared by the block's threads,
/// [`DYNAMIC_SHARED_ALIGN`]-aligned, contents undefined when the block starts. Every call
/// returns the same address within a block; reading or writing past the launch's size is
/// undefined behaviour. `T` must be at most 16-aligned (checked at compile time).
#[inline(always)]
pub fn dynamic_shared<T: DeviceCopy>() -> *mut T {
    const {
        assert!(
            core::mem::align_of::<T>() <= DYNAMIC_SHARED_ALIGN,
            "dynamic_shared::<T>: T is aligned to more than the 16 bytes dynamic shared memory has"
        )
    };
    arch::dynamic_shared().cast()
}
macro_rules! forward {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[inline(always)]
        pub fn $name() -> u32 {
            arch::$name()
        }
    )*};
}

forward! {
    /// Index of the calling thread in its block, x component (`threadIdx.x`).
    thread_idx_x;
    /// Index of the calling thread in its block, y component.
    thread_idx_y;
    /// Index of the calling thread in its block, z component.
    thread_idx_z;
    /// Index of the calling thread's block in the grid, x component (`blockIdx.x`).
    block_idx_x;
    /// Index of the calling thread's block in the grid, y component.
    block_idx_y;
    /// Index of the calling thread's block in the grid, z component.
    block_idx_z;
    /// Threads per block, x component (`blockDim.x`).
    block_dim_x;
    /// Threads per block, y component.
    block_dim_y;
    /// Threads per block, z component.
    block_dim_z;
    /// Blocks in the grid, x component (`gridDim.x`).
    grid_dim_x;
    /// Blocks in the grid, y component.
    grid_dim_y;
    /// Blocks in the grid, z component.
    grid_dim_z;
}

/// `threadIdx`.
#[inline(always)]
pub fn thread_idx() -> Dim3 {
    Dim3 {
        x: thread_idx_x(),
        y: thread_idx_y(),
        z: thread_idx_z(),
    }
}

/// `blockIdx`.
#[inline(always)]
pub fn block_idx() -> Dim3 {
    Dim3 {
        x: block_idx_x(),
        y: block_idx_y(),
        z: block_idx_z(),
    }
}

/// `blockDim`.
#[inline(always)]
pub fn block_dim() -> Dim3 {
    Dim3 {
        x: block_dim_x(),
        y: block_dim_y(),
        z: block_dim_z(),
    }
}

/// `gridDim`.
#[inline(always)]
pub fn grid_dim() -> Dim3 {
    Dim3 {
        x: grid_dim_x(),
        y: grid_dim_y(),
        z: grid_dim_z(),
    }
}

/// Global index in x: `blockIdx.x * blockDim.x + threadIdx.x`, as `usize`. Computed in 32
/// bits, as CUDA C computes it: every backend refuses a launch whose grid extent times block
/// extent passes `u32::MAX` in any dimension (`LaunchConfig::check`), so it cannot overflow.
#[inline(always)]
pub fn global_idx_x() -> usize {
    global_idx(block_idx_x(), block_dim_x(), thread_idx_x())
}

/// Global index in y (see [`global_idx_x`]).
#[inline(always)]
pub fn global_idx_y() -> usize {
    global_idx(block_idx_y(), block_dim_y(), thread_idx_y())
}

/// Global index in z (see [`global_idx_x`]).
#[inline(always)]
pub fn global_idx_z() -> usize {
    global_idx(block_idx_z(), block_dim_z(), thread_idx_z())
}

/// `block * dim + thread` of one dimension, in 32 bits: narrower index arithmetic than/// block- or grid-stride loop) as cheap as C's `for (i = start; i < end; i += step)`, where
/// `(start..end).step_by(step)` first divides to count its steps. A `step` of 0 counts as 1.
/// Indices above `usize::MAX - step` are not reached (no slice is that long): so the next
/// index is one add that cannot overflow, as in C.
///
/// On a GPU the loop counts in 32 bits, as C's `int` loops do, where the compiler can prove
/// that every index fits in `u32`: a start and step as a launch gives them and an `end` of
/// `u32` range (a shared array's length, a `u32` parameter). The 32-bit add saturates, so that
/// the loop ends where `end + step` would not fit (a grid's step near `u32::MAX`); the
/// optimizer drops the saturation where the sum is proven to fit (a block's step). A 64-bit
/// counter costs registers and an instruction at each step; where nothing is proven (an `end`
/// such as a slice's length) the loop counts in `usize`.
/// See [`block_stride_x`] and [`grid_stride_x`].
#[derive(Debug, Clone)]
pub struct Strided {
    wide: Span<usize>,
    /// The same indices, used instead of `wide` where `counts_in_u32`.
    narrow: Span<u32>,
    /// Every index and `end` are known to fit in `u32` when the kernel is compiled.
    counts_in_u32: bool,
    /// Where the CPU link forms the kernel's regions: the loop runs trip by trip for the
    /// whole block.
    #[cfg(offload_cpu_ir)]
    block: Option<BlockTrips>,
}

/// A block- or grid-stride loop run trip by trip on the CPU device: every thread of the
/// block takes the same number of trips, those of the block's first thread (which has the
/// most: the others start up to a step later), and skips the last one where its index is
/// past the end. At the top of each trip the CPU link cuts the body into regions, as at a
/// barrier, so that each trip runs for every thread before the next one: consecutive threads
/// read consecutive elements, as a GPU's warps do, instead of each thread its whole strided
/// share in turn; and the trip counter is the block's, not each thread's.
#[cfg(offload_cpu_ir)]
#[derive(Debug, Clone)]
struct BlockTrips {
    /// The block's first thread's index in the coming trip.
    first: usize,
    /// The calling thread's distance from it, less than the step.
    offset: usize,
}

/// `next, next + step, …` below `end`.
#[derive(Debug, Clone)]
struct Span<I> {
    next: I,
    end: I,
    step: I,
}

impl Strided {
    /// The indices from `start` below `end`, `step` apart.
    #[inline(always)]
    pub fn new(start: usize, end: usize, step: usize) -> Strided {
        const MAX: usize = u32::MAX as usize;
        let step = step.max(1);
        Strided {
            wide: Span {
                next: start,
                end: end.min(usize::MAX - step),
                step,
            },
            narrow: Span {
                next: start as u32,
                end: end as u32,
                step: step as u32,
            },
            counts_in_u32: known_true(start <= MAX && step <= MAX && end <= MAX),
            #[cfg(offload_cpu_ir)]
            block: None,
        }
    }

    /// On the CPU device in IR form, the same loop run trip by trip where the CPU link forms
    /// the kernel's regions (see [`BlockTrips`]): `first` is the block's first thread's start,
    /// the calling thread's `offset` after it and below the step.
    #[inline(always)]
    fn trip_by_trip(self, first: usize, offset: usize) -> Strided {
        #[cfg(offload_cpu_ir)]
        {
            let mut strided = self;
            if super::cpu_regions::ir_interleaved() {
                strided.block = Some(BlockTrips { first, offset });
            }
            strided
        }
        #[cfg(not(offload_cpu_ir))]
        {
            let _ = (first, offset);
            self
        }
    }
}

impl Iterator for Strided {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        #[cfg(offload_cpu_ir)]
        if let Some(block) = &mut self.block {
            let Span { end, step, .. } = self.wide;
            loop {
                super::cpu_regions::ir_interleave();
                let first = block.first;
                if first >= end {
                    return None;
                }
                // `first < end <= usize::MAX - step`, and `offset < step`.
                block.first = first + step;
                let i = first + block.offset;
                if i < end {
                    return Some(i);
                }
            }
        }
        if self.counts_in_u32 {
            let Span { next, end, step } = &mut self.narrow;
            if *next >= *end {
                return None;
            }
            let i = *next;
            // Saturated, `u32::MAX` is at or past `end`: the loop ends.
            *next = i.saturating_add(*step);
            return Some(i as usize);
        }
        let Span { next, end, step } = &mut self.wide;
        if *next >= *end {
            return None;
        }
        let i = *next;
        // SAFETY: `i < end <= usize::MAX - step`.
        *next = unsafe { i.unchecked_add(*step) };
        Some(i)
    }
}

/// Whether `condition` holds and the compiler knows it: true only where it folds to a
/// constant when the kernel is compiled, so a branch on it costs nothing either way.
#[inline(always)]
fn known_true(condition: bool) -> bool {
    #[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    {
        core::intrinsics::is_val_statically_known(condition) && condition
    }
    #[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
    {
        let _ = condition;
        false
    }
}

/// The calling thread's share of `0..n` in a block-stride loop: `thread_idx_x()`, then every
/// `block_dim_x()`-th index below `n` (how a block clears or flushes a shared array).
#[inline(always)]
pub fn block_stride_x(n: usize) -> Strided {
    Strided::new(thread_idx_x() as usize, n, block_dim_x() as usize)
        .trip_by_trip(0, thread_idx_x() as usize)
}

/// The calling thread's share of `0..n` in a grid-stride loop: [`global_idx_x`], then every
/// `grid_dim_x() * block_dim_x()`-th index below `n` (a 1-D launch of any size covers `n`).
#[inline(always)]
pub fn grid_stride_x(n: usize) -> Strided {
    // SAFETY: the launch rule of every backend keeps grid extent times block extent within
    // `u32` (`LaunchConfig::check`).
    let step = unsafe { grid_dim_x().unchecked_mul(block_dim_x()) };
    Strided::new(global_idx_x(), n, step as usize).trip_by_trip(
        block_idx_x() as usize * block_dim_x() as usize,
        thread_idx_x() as usize,
    )
}

/// Linear index of the calling thread within its block: `x + y * dim.x + z * dim.x * dim.y`.
#[inline(always)]
pub fn thread_rank() -> u32 {
    // The CPU link gives each thread loop its threads' ranks as a counter of its own.
    #[cfg(offload_cpu_ir)]
    let rank = arch::thread_rank();
    #[cfg(not(offload_cpu_ir))]
    let rank = thread_idx_x() + block_dim_x() * (thread_idx_y() + block_dim_y() * thread_idx_z());
    rank
}

/// Threads per block in total.
#[inline(always)]
pub fn block_size() -> u32 {
    block_dim_x() * block_dim_y() * block_dim_z()
}
/// Block-wide barrier (`__syncthreads()`): returns once every thread of the block has called
/// it; memory written by the block before the barrier is visible to the block after it.
/// Every thread of a block must reach the same barriers.
#[inline(always)]
pub fn sync_threads() {
    arch::sync_threads()
}

/// Aborts the launch.
#[inline(always)]
pub fn trap() -> ! {
    arch::trap()
}
#[cfg(test)]
mod strided_tests {
    use super::Strided;

    #[test]
    fn strided_indices_stop_below_the_end() {
        assert_eq!(Strided::new(3, 20, 5).collect::<Vec<_>>(), [3, 8, 13, 18]);
        assert_eq!(Strided::new(7, 7, 1).count(), 0);
        assert_eq!(Strided::new(9, 4, 2).count(), 0);
        // A step of 0 counts as 1; near the end of `usize` the indices stop at
        // `usize::MAX - step`, never wrap.
        assert_eq!(Strided::new(0, 3, 0).collect::<Vec<_>>(), [0, 1, 2]);
        let near_end = usize::MAX - 10;
        assert_eq!(
            Strided::new(near_end, usize::MAX, 4).collect::<Vec<_>>(),
            [near_end, near_end + 4]
        );
        assert_eq!(Strided::new(1, usize::MAX, usize::MAX).count(), 0);
    }

    /// The 32-bit count a GPU kernel takes where it is proven gives the same indices.
    #[test]
    fn counting_in_u32_gives_the_same_indices() {
        let in_u32 = |start, end, step| {
            let mut strided = Strided::new(start, end, step);
            strided.counts_in_u32 = true;
            strided.collect::<Vec<_>>()
        };
        for (start, end, step) in [(3, 20, 5), (7, 7, 1), (9, 4, 2), (0, 3, 0), (5, 64, 1024)] {
            assert_eq!(
                in_u32(start, end, step),
                Strided::new(start, end, step).collect::<Vec<_>>(),
                "{start}..{end} by {step}"
            );
        }
        // A step near `u32::MAX` (a grid's) with an end of `u32` range: the add saturates and
        // the loop ends where a 32-bit add would have wrapped to a small index.
        let max = u32::MAX as usize;
        for (start, end, step) in [
            (10, max, max - 5),
            (0, max, 1 << 31),
            (max - 1500, max, 1024),
            (max - 1, max, max),
        ] {
            assert_eq!(
                in_u32(start, end, step),
                Strided::new(start, end, step).collect::<Vec<_>>(),
                "{start}..{end} by {step}"
            );
        }
        assert_eq!(in_u32(10, max, max - 5), [10]);
        assert_eq!(in_u32(0, max, 1 << 31), [0, 1 << 31]);
    }
}
