//! Asynchronous copies from global to shared memory, the stages of a pipeline over them, and
//! shared tiles whose 16-byte chunks are swizzled so that neither the copies nor the matrix
//! loads of `kernel::matrix` meet bank conflicts: the data movement of a compute-bound kernel
//! (a GEMM, an attention kernel), as CUDA's `cp.async`/`cuda::pipeline` and CUTLASS's
//! swizzled layouts give it.
//!
//! ```ignore
//! let mut pipe = Pipeline::<3>::new();
//! for s in 0..2 {                       // the prologue: STAGES - 1 stages in flight
//!     if s < tiles { issue_copies(s, pipe.producer_stage()) }
//!     pipe.producer_commit();
//! }
//! for t in 0..tiles {
//!     let stage = pipe.consumer_wait(); // this thread's copies of tile `t` have landed
//!     sync_threads();                   // and every thread's
//!     compute(stage.index());
//!     stage.release();
//!     if t + 2 < tiles { issue_copies(t + 2, pipe.producer_stage()) }
//!     pipe.producer_commit();           // one group per iteration, empty or not
//! }
//! ```
//!
//! | device | copy | wait |
//! |---|---|---|
//! | NVIDIA sm_80+ | `cp.async` (`LDGSTS`), 16 bytes bypassing L1 | `cp.async.wait_group` |
//! | NVIDIA before sm_80 | refused by the device link, naming the kernels | |
//! | AMD CDNA (gfx908–gfx950) | [`copy_async_warp`], [`SwizzledTile::copy_async_from`]: direct loads to LDS (`global_load_lds_dword`, no registers); [`copy_async`]: a load and a store | `s_waitcnt vmcnt(0)` where the kernel crate loads directly |
//! | other AMD GPUs | a load and a store (staged through registers) | nothing to wait for |
//! | CPU device | a copy | nothing to wait for |
//!
//! On every device the shared stage is visible to the other threads of the block only after
//! the block's barrier that follows the wait, as with CUDA's `cp.async`.

/// Deepest [`wait_group`] the devices take: at most 7 groups left in flight.
pub const MAX_PENDING_GROUPS: usize = 7;

/// Starts copying one value of 4, 8 or 16 bytes from global memory at `src` to shared memory
/// at `dst`, asynchronously where the device can: the copy is complete for this thread only
/// after a [`wait_group`] that covers its group ([`commit_group`]), and for the block after a
/// barrier that follows.
///
/// # Safety
///
/// `src` is readable and `dst` writable for `size_of::<T>()` bytes, both aligned to it; `dst`
/// is in the block's shared memory and `src` in global memory (a kernel's buffer); nothing
/// reads or writes `dst` until the copy is complete.
#[inline(always)]
pub unsafe fn copy_async<T: Copy>(dst: *mut T, src: *const T) {
    const {
        assert!(
            matches!(size_of::<T>(), 4 | 8 | 16),
            "copy_async copies 4, 8 or 16 bytes"
        )
    };
    // SAFETY: the caller's contract.
    unsafe { imp::copy(dst.cast(), src.cast(), size_of::<T>()) }
}

/// Starts copying, for each lane `l` of the warp, the 4 bytes at that lane's `src` to
/// `dst.add(l)`: the warp fills `warp_size()` consecutive words of shared memory from wherever
/// its lanes read. On AMD CDNA one direct load to LDS for the wavefront (`global_load_lds_dword`:
/// no registers, no LDS store instruction; [`has_lds_dma`](super::has_lds_dma)), on NVIDIA a
/// 4-byte `cp.async` a lane, elsewhere a copy. Complete as [`copy_async`]'s copies are: after a
/// [`wait_group`] that covers its group, and for the block after the barrier that follows.
/// Every lane of the warp calls it, with the same `dst`.
///
/// # Safety
///
/// Each lane's `src` is readable for 4 bytes, aligned to 4, in global memory; the
/// `warp_size()` words from `dst` are writable, `dst` aligned to 4 bytes in the block's shared
/// memory; nothing reads or writes them until the copy is complete.
#[inline(always)]
pub unsafe fn copy_async_warp(dst: *mut u32, src: *const u32) {
    #[cfg(all(offload_device, target_arch = "amdgpu"))]
    if super::has_lds_dma() {
        // SAFETY: the caller's contract; `dst` is the wavefront's one LDS address.
        unsafe { imp::lds_dma(dst, src) };
        return;
    }
    // SAFETY: the caller's contract, for this lane's word.
    unsafe { copy_async(dst.add(super::lane_id() as usize), src) }
}

/// Closes this thread's group of asynchronous copies: the copies since the last commit form
/// one group, which [`wait_group`] counts. An empty group is allowed.
#[inline(always)]
pub fn commit_group() {
    imp::commit();
}

/// Waits until at most `N` of this thread's committed groups are still in flight, `N` at most
/// [`MAX_PENDING_GROUPS`]. The copies of the other groups are then complete for this thread;
/// for the block, after a barrier.
#[inline(always)]
pub fn wait_group<const N: usize>() {
    const {
        assert!(
            N <= MAX_PENDING_GROUPS,
            "wait_group: at most 7 groups in flight"
        )
    };
    imp::wait(N);
}

/// A ring of `STAGES` shared-memory stages fed by asynchronous copies: the producer fills stage
/// after stage, committing one group per stage; the consumer waits for the oldest stage, reads
/// it, and releases its [`Stage`]. The reads go through the shared memory's pointers, whose
/// safety contract is to read a stage only while holding its `Stage`, after the block's
/// barrier that follows [`consumer_wait`](Self::consumer_wait). (A `Stage` is a plain token,
/// not a borrow of the pipeline: the CPU device's loops over a block's threads keep each
/// thread's values across the barrier, which a borrow could not cross.)
///
/// The producer keeps `STAGES - 1` groups ahead of the consumer: `STAGES - 1` commits before
/// the first wait, then one commit per wait (empty past the last tile). Each thread of the
/// block runs the same sequence. `STAGES` is 2 to 8.
#[derive(Debug)]
pub struct Pipeline<const STAGES: usize> {
    produced: usize,
    consumed: usize,
}

/// The stage a [`Pipeline`]'s consumer reads: its copies are complete for this thread.
#[derive(Debug)]
#[must_use = "a stage is read, then released"]
pub struct Stage<const STAGES: usize> {
    index: usize,
}

impl<const STAGES: usize> Stage<STAGES> {
    /// Which of the pipeline's stages, `0..STAGES`.
    #[inline(always)]
    pub fn index(&self) -> usize {
        self.index
    }

    /// Ends this thread's reads of the stage. The stage is refilled `STAGES - 1` waits later,
    /// after the barrier that follows one of them, when every thread of the block has released
    /// it too.
    #[inline(always)]
    pub fn release(self) {}
}

impl<const STAGES: usize> Default for Pipeline<STAGES> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const STAGES: usize> Pipeline<STAGES> {
    /// An empty pipeline.
    #[inline(always)]
    pub const fn new() -> Self {
        const {
            assert!(
                STAGES >= 2 && STAGES - 2 <= MAX_PENDING_GROUPS,
                "a pipeline has 2 to 9 stages"
            )
        };
        Pipeline {
            produced: 0,
            consumed: 0,
        }
    }

    /// The stage the producer fills next, `0..STAGES`: issue its copies, then
    /// [`producer_commit`](Self::producer_commit).
    #[inline(always)]
    pub fn producer_stage(&self) -> usize {
        self.produced % STAGES
    }

    /// Ends the copies of the producer's stage (one group; empty when there was nothing to
    /// copy) and moves to the next stage.
    #[inline(always)]
    pub fn producer_commit(&mut self) {
        commit_group();
        self.produced += 1;
    }

    /// Waits until this thread's copies of the oldest stage not yet read are complete, and
    /// gives that stage. The other threads' copies are visible after the block's barrier,
    /// which every thread calls next (`sync_threads()`).
    #[inline(always)]
    pub fn consumer_wait(&mut self) -> Stage<STAGES> {
        debug_assert_eq!(
            self.produced - self.consumed,
            STAGES - 1,
            "the producer keeps STAGES - 1 groups ahead"
        );
        imp::wait(STAGES - 2);
        let index = self.consumed % STAGES;
        self.consumed += 1;
        Stage { index }
    }
}

/// A `ROWS`×`COLS` row-major tile of `T` in the block's shared memory whose 16-byte chunks
/// are XOR-swizzled by row: the chunk `c` of row `r` is stored at chunk `c ^ f(r)`, `f`
/// chosen from the row's length so that any 8 consecutive rows' chunks of one column fall in
/// 8 different groups of banks. The 8 rows of a matrix load (`ldmatrix`), and the chunks
/// of a row that consecutive threads copy, then never share a bank. Elements within a chunk
/// keep their order, so 16 bytes at a column that is a multiple of `16 / size_of::<T>()` are
/// contiguous.
///
/// A row holds a power of two of chunks (`COLS * size_of::<T>()` a power of two from 16
/// bytes).
#[derive(Debug)]
pub struct SwizzledTile<T, const ROWS: usize, const COLS: usize> {
    base: *mut T,
}

impl<T, const ROWS: usize, const COLS: usize> Clone for SwizzledTile<T, ROWS, COLS> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T, const ROWS: usize, const COLS: usize> Copy for SwizzledTile<T, ROWS, COLS> {}

impl<T, const ROWS: usize, const COLS: usize> SwizzledTile<T, ROWS, COLS> {
    /// Elements of the tile.
    pub const ELEMENTS: usize = ROWS * COLS;
    /// Elements of a 16-byte chunk.
    pub const CHUNK: usize = 16 / size_of::<T>();
    const CHUNKS: usize = COLS / Self::CHUNK;
    /// Rows that share one 128-byte line of banks.
    const ROWS_PER_LINE: usize = if Self::CHUNKS >= 8 {
        1
    } else {
        8 / Self::CHUNKS
    };
    const XOR_MASK: usize = if Self::CHUNKS >= 8 {
        7
    } else {
        Self::CHUNKS - 1
    };

    /// The tile at `base`.
    ///
    /// # Safety
    ///
    /// `base` points at [`ELEMENTS`](Self::ELEMENTS) elements of the block's shared memory,
    /// aligned to 16 bytes.
    #[inline(always)]
    pub const unsafe fn from_ptr(base: *mut T) -> Self {
        const {
            assert!(
                16usize.is_multiple_of(size_of::<T>()) && COLS.is_multiple_of(16 / size_of::<T>()),
                "a swizzled tile's rows are whole 16-byte chunks"
            );
            assert!(
                (COLS * size_of::<T>() / 16).is_power_of_two(),
                "a swizzled tile's row holds a power of two of 16-byte chunks"
            );
        };
        SwizzledTile { base }
    }

    /// Where element `(row, col)` is stored, in elements from the tile's start.
    #[inline(always)]
    pub fn offset(row: usize, col: usize) -> usize {
        row * COLS + Self::offset_in_row(row, col)
    }

    /// Where element `(row, col)` is stored, in elements from its row's start.
    #[inline(always)]
    fn offset_in_row(row: usize, col: usize) -> usize {
        let chunk = (col / Self::CHUNK) ^ Self::row_swizzle(row);
        chunk * Self::CHUNK + col % Self::CHUNK
    }

    /// What row `row`'s chunk indices are XOR-ed with; XOR-ing again undoes it.
    #[inline(always)]
    fn row_swizzle(row: usize) -> usize {
        (row / Self::ROWS_PER_LINE) & Self::XOR_MASK
    }

    /// The element stored at `offset` elements from the tile's start, `(row, col)`: the
    /// inverse of [`offset`](Self::offset).
    #[inline(always)]
    pub fn place(offset: usize) -> (usize, usize) {
        let (row, at) = (offset / COLS, offset % COLS);
        let chunk = (at / Self::CHUNK) ^ Self::row_swizzle(row);
        (row, chunk * Self::CHUNK + at % Self::CHUNK)
    }

    /// Starts copying the `ROWS`×`COLS` tile of global memory whose element `(row, col)` is
    /// at `src[row * ld + col]` into this tile, asynchronously where the device can, the
    /// block's `THREADS` threads sharing the work (this one `thread`, `0..THREADS`); each
    /// thread's copies belong to its open group ([`commit_group`], [`Pipeline`]). On NVIDIA
    /// sm_80+ one 16-byte `cp.async` a chunk, thread `t` copying chunks `t`, `t + THREADS`, …
    /// in row-major order; on AMD CDNA direct loads to LDS, a wavefront filling 4 bytes a lane
    /// of the tile's memory in order, each lane reading the element the swizzle places there
    /// ([`copy_async_warp`]); elsewhere a load and a store a chunk. The loops' trip counts are
    /// constants: `THREADS` is the kernel's block size.
    ///
    /// # Safety
    ///
    /// The tile's rows of `src` are readable, in global memory, each 16-byte aligned (`src`
    /// aligned to 16 bytes, `ld * size_of::<T>()` a multiple of 16); `thread < THREADS`,
    /// `THREADS` a multiple of the warp size, and every thread of the block calls it with the
    /// same `src` and `ld`; nothing reads or writes the tile until the copies are complete.
    #[inline(always)]
    pub unsafe fn copy_async_from<const THREADS: usize>(
        self,
        src: *const T,
        ld: usize,
        thread: usize,
    ) {
        let lanes = super::warp_size() as usize;
        let words = ROWS * COLS * size_of::<T>() / 4;
        if super::has_lds_dma() && words.is_multiple_of(lanes) {
            let (warp, lane, warps) = (thread / lanes, thread % lanes, THREADS / lanes);
            let runs = words / lanes;
            for i in 0..runs.div_ceil(warps) {
                let run = warp + i * warps;
                if !runs.is_multiple_of(warps) && run >= runs {
                    break;
                }
                let byte = (run * lanes + lane) * 4;
                let (row, col) = Self::place(byte / size_of::<T>());
                // A 32-bit offset from the block's one base: the back end addresses the load
                // with the base in scalar registers and one vector register a lane.
                let offset = row as u32 * ld as u32 + col as u32;
                let from = src
                    .wrapping_add(offset as usize)
                    .cast::<u8>()
                    .wrapping_add(byte % size_of::<T>());
                // SAFETY: the word lies in the tile's memory and in row `row` of the source
                // (the caller's contract); the run's words are the warp's `lanes` consecutive
                // words, from a `dst` the same for every lane.
                unsafe {
                    copy_async_warp(self.base.cast::<u32>().add(run * lanes), from.cast::<u32>())
                };
            }
        } else {
            let chunks = ROWS * Self::CHUNKS;
            for i in 0..chunks.div_ceil(THREADS) {
                let chunk = thread + i * THREADS;
                if !chunks.is_multiple_of(THREADS) && chunk >= chunks {
                    break;
                }
                let (row, col) = (chunk / Self::CHUNKS, chunk % Self::CHUNKS * Self::CHUNK);
                // SAFETY: 16 bytes of one chunk of the tile and of the source row (the
                // caller's contract), both aligned to 16.
                unsafe {
                    copy_async(
                        self.ptr(row, col).cast::<[u32; 4]>(),
                        src.wrapping_add(row * ld + col).cast::<[u32; 4]>(),
                    )
                };
            }
        }
    }

    /// The address of element `(row, col)`.
    #[inline(always)]
    pub fn ptr(self, row: usize, col: usize) -> *mut T {
        self.base.wrapping_add(Self::offset(row, col))
    }

    /// The address of element `(row0 + row, col)`, from row `row0`'s start: the fragments of
    /// blocks of rows a constant distance apart (`row0` a multiple of 16 plus `row`) then lie
    /// a constant offset apart, which `ldmatrix` takes as its immediate (`[R+0x800]`), where
    /// `ptr(row0 + row, col)` hides the constant inside one row value: a register per tile,
    /// and spills at the register ceiling.
    #[cfg(feature = "half")]
    #[inline(always)]
    pub(crate) fn ptr_from_row(self, row0: usize, row: usize, col: usize) -> *mut T {
        self.base
            .wrapping_add(row0 * COLS)
            .wrapping_add(row * COLS + Self::offset_in_row(row0 + row, col))
    }

    /// The tile's first element.
    #[inline(always)]
    pub fn as_ptr(self) -> *mut T {
        self.base
    }
}

#[cfg(all(offload_device, target_arch = "nvptx64"))]
mod imp {
    unsafe extern "C" {
        // Defined by the device link over `llvm.nvvm.cp.async.*` (Rust cannot name the shared
        // and global address spaces the intrinsics take); refused before sm_80.
        #[link_name = concat!(offload_format::abi_name!(CP_ASYNC_PREFIX), "16")]
        fn __offload_cp_async_16(dst: *mut u8, src: *const u8);
        #[link_name = concat!(offload_format::abi_name!(CP_ASYNC_PREFIX), "8")]
        fn __offload_cp_async_8(dst: *mut u8, src: *const u8);
        #[link_name = concat!(offload_format::abi_name!(CP_ASYNC_PREFIX), "4")]
        fn __offload_cp_async_4(dst: *mut u8, src: *const u8);
        #[link_name = offload_format::abi_name!(CP_ASYNC_COMMIT)]
        fn __offload_cp_async_commit();
        #[link_name = concat!(offload_format::abi_name!(CP_ASYNC_WAIT_PREFIX), "0")]
        fn __offload_cp_async_wait_0();
        #[link_name = concat!(offload_format::abi_name!(CP_ASYNC_WAIT_PREFIX), "1")]
        fn __offload_cp_async_wait_1();
        #[link_name = concat!(offload_format::abi_name!(CP_ASYNC_WAIT_PREFIX), "2")]
        fn __offload_cp_async_wait_2();
        #[link_name = concat!(offload_format::abi_name!(CP_ASYNC_WAIT_PREFIX), "3")]
        fn __offload_cp_async_wait_3();
        #[link_name = concat!(offload_format::abi_name!(CP_ASYNC_WAIT_PREFIX), "4")]
        fn __offload_cp_async_wait_4();
        #[link_name = concat!(offload_format::abi_name!(CP_ASYNC_WAIT_PREFIX), "5")]
        fn __offload_cp_async_wait_5();
        #[link_name = concat!(offload_format::abi_name!(CP_ASYNC_WAIT_PREFIX), "6")]
        fn __offload_cp_async_wait_6();
        #[link_name = concat!(offload_format::abi_name!(CP_ASYNC_WAIT_PREFIX), "7")]
        fn __offload_cp_async_wait_7();
    }

    /// # Safety
    ///
    /// As [`super::copy_async`], `bytes` its size.
    #[inline(always)]
    pub(super) unsafe fn copy(dst: *mut u8, src: *const u8, bytes: usize) {
        // SAFETY: the caller's contract; the helpers copy `bytes` bytes.
        unsafe {
            match bytes {
                16 => __offload_cp_async_16(dst, src),
                8 => __offload_cp_async_8(dst, src),
                _ => __offload_cp_async_4(dst, src),
            }
        }
    }

    #[inline(always)]
    pub(super) fn commit() {
        // SAFETY: closing a group has no preconditions.
        unsafe { __offload_cp_async_commit() }
    }

    /// `n` is a constant wherever it is inlined, so one wait is left.
    #[inline(always)]
    pub(super) fn wait(n: usize) {
        // SAFETY: waiting has no preconditions.
        unsafe {
            match n {
                0 => __offload_cp_async_wait_0(),
                1 => __offload_cp_async_wait_1(),
                2 => __offload_cp_async_wait_2(),
                3 => __offload_cp_async_wait_3(),
                4 => __offload_cp_async_wait_4(),
                5 => __offload_cp_async_wait_5(),
                6 => __offload_cp_async_wait_6(),
                _ => __offload_cp_async_wait_7(),
            }
        }
    }
}

/// AMD GPUs, the CPU device and host builds: the copy is done when the call returns, through
/// registers; there is nothing to wait for but AMD's direct loads to LDS.
#[cfg(not(all(offload_device, target_arch = "nvptx64")))]
mod imp {
    /// 16 bytes aligned to 16: the alignment the contract promises, which lets AMD's LDS take
    /// the copy in one `ds_write_b128` (an array of `u32` would say 4 and split it).
    #[derive(Clone, Copy)]
    #[repr(C, align(16))]
    struct Bytes16([u32; 4]);

    /// # Safety
    ///
    /// As [`super::copy_async`], `bytes` its size.
    #[inline(always)]
    pub(super) unsafe fn copy(dst: *mut u8, src: *const u8, bytes: usize) {
        // SAFETY: the caller's contract: both valid and aligned for `bytes` (4, 8 or 16).
        unsafe {
            match bytes {
                16 => dst.cast::<Bytes16>().write(src.cast::<Bytes16>().read()),
                8 => dst.cast::<u64>().write(src.cast::<u64>().read()),
                _ => dst.cast::<u32>().write(src.cast::<u32>().read()),
            }
        }
    }

    #[inline(always)]
    pub(super) fn commit() {}

    /// The device's direct loads are counted with every other global load: the wait is for
    /// all of them, whatever `n`.
    #[inline(always)]
    pub(super) fn wait(_n: usize) {
        #[cfg(all(offload_device, target_arch = "amdgpu"))]
        // SAFETY: waiting has no preconditions.
        unsafe {
            amdgpu::__offload_amdgpu_lds_dma_wait()
        }
    }

    /// # Safety
    ///
    /// As [`super::copy_async_warp`], on a device with direct loads to LDS.
    #[cfg(all(offload_device, target_arch = "amdgpu"))]
    #[inline(always)]
    pub(super) unsafe fn lds_dma(dst: *mut u32, src: *const u32) {
        // SAFETY: the caller's contract.
        unsafe { amdgpu::__offload_amdgpu_lds_dma_4(dst, src) }
    }

    #[cfg(all(offload_device, target_arch = "amdgpu"))]
    mod amdgpu {
        unsafe extern "C" {
            // Defined by the device link over `llvm.amdgcn.global.load.lds` and `s_waitcnt`
            // (Rust cannot name LDS's address space or M0).
            #[link_name = offload_format::abi_name!(AMDGPU_LDS_DMA_4)]
            pub(super) fn __offload_amdgpu_lds_dma_4(dst: *mut u32, src: *const u32);
            #[link_name = offload_format::abi_name!(AMDGPU_LDS_DMA_WAIT)]
            pub(super) fn __offload_amdgpu_lds_dma_wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SwizzledTile;

    /// Every element has its own place, which `place` inverts, and the 8 rows of any column of chunks fall in 8
    /// different groups of 4 banks (16 bytes of the 128 of a line).
    fn check<T, const ROWS: usize, const COLS: usize>() {
        let mut seen = [false; 8192];
        for row in 0..ROWS {
            for col in 0..COLS {
                let at = SwizzledTile::<T, ROWS, COLS>::offset(row, col);
                assert!(!seen[at], "({row}, {col}) shares {at}");
                assert_eq!(SwizzledTile::<T, ROWS, COLS>::place(at), (row, col));
                seen[at] = true;
            }
        }
        let chunk = SwizzledTile::<T, ROWS, COLS>::CHUNK;
        for first in (0..ROWS).step_by(8) {
            for col in (0..COLS).step_by(chunk) {
                let mut groups = [false; 8];
                for row in first..first + 8 {
                    let byte = SwizzledTile::<T, ROWS, COLS>::offset(row, col) * size_of::<T>();
                    let group = byte / 16 % 8;
                    assert!(!groups[group], "rows {first}.. at column {col} share banks");
                    groups[group] = true;
                }
            }
        }
    }

    #[test]
    fn swizzled_tiles_are_permutations_without_bank_conflicts() {
        check::<u16, 128, 32>();
        check::<u16, 32, 128>();
        check::<u16, 64, 64>();
        check::<u16, 16, 16>();
        check::<u32, 32, 32>();
        check::<f32, 8, 4>();
    }
}
