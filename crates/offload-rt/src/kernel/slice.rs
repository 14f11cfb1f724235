//! Bounds-carrying buffer parameters: `&[T]` to read, [`DisjointSlice`] to write.
//!
//! A kernel whose parameters are scalars, `DeviceCopy` values, `&[T]` and `DisjointSlice<T>`
//! cannot touch memory outside its buffers nor race on an element between two threads without
//! `unsafe`, so its host `launch` is a safe function. `&[T]` is a plain Rust slice: `len()`,
//! indexing (a bad index panics, which ends the launch with an error naming the kernel),
//! `get`, `get_unchecked` in `unsafe`. A `DisjointSlice<T>` hands each thread only the
//! elements it owns, as `&mut`, so no two threads ever hold `&mut` to the same element.

use core::marker::PhantomData;
use core::ptr::NonNull;

use super::abi::DeviceCopy;
use super::{
    block_dim_y, block_idx_x, block_idx_y, block_idx_z, block_size, global_idx_x, global_idx_y,
    global_idx_z, grid_dim_x, grid_dim_y, thread_idx_y, thread_idx_z, thread_rank,
};

/// How a slice parameter crosses from host to device: the buffer's address and its length in
/// elements, 16 bytes on every target (the host writes the same layout with `u64`s).
#[doc(hidden)]
#[repr(C)]
#[derive(Debug)]
pub struct SliceParam<T> {
    pub ptr: *mut T,
    pub len: usize,
}

/// What a GPU image's `&[T]` parameters pass their pointer through: nothing writes the memory
/// behind it while the launch runs. `offload-build`'s device link marks the loads through the
/// result `!invariant.load` (NVIDIA's read-only data path, `ld.global.nc`, as for CUDA C's
/// `const __restrict__`) and replaces each call by its argument; nothing defines the symbol.
#[cfg(all(offload_device, target_arch = "nvptx64"))]
mod read_only_marker {
    unsafe extern "C" {
        /// The identity. Call it only on a pointer to memory that nothing writes for as long
        /// as the kernel runs.
        pub(super) fn __offload_read_only(ptr: *mut u8) -> *mut u8;
    }
}

impl<T> Clone for SliceParam<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for SliceParam<T> {}

impl<T: DeviceCopy> SliceParam<T> {
    /// The read-only slice of a `&[T]` parameter.
    ///
    /// # Safety
    ///
    /// `ptr` is non-null and aligned and points at `len` initialized elements that nothing
    /// writes for `'a` (the launch contract: the host passes a buffer it borrows shared for
    /// the launch, and a dangling address for an empty one).
    #[inline(always)]
    pub unsafe fn as_slice<'a>(self) -> &'a [T] {
        #[cfg(all(offload_device, target_arch = "nvptx64"))]
        // SAFETY: the marker is the identity (`read_only_marker`); the contract below is
        // what it tells the device link.
        let ptr = unsafe { read_only_marker::__offload_read_only(self.ptr.cast()) }.cast::<T>();
        #[cfg(not(all(offload_device, target_arch = "nvptx64")))]
        let ptr = self.ptr;
        // SAFETY: this function's contract. Non-null said to the optimizer, so that `get`
        // needs no null test of its own.
        unsafe {
            core::hint::assert_unchecked(!ptr.is_null());
            core::slice::from_raw_parts(ptr, self.len)
        }
    }

    /// The disjoint slice of a `DisjointSlice<T>` parameter.
    ///
    /// # Safety
    ///
    /// `ptr` is non-null and aligned and points at `len` elements that, for `'a`, only this
    /// launch's threads access, each through its own `DisjointSlice` (the launch contract: the
    /// host passes a buffer it borrows exclusively for the launch, and a dangling address for
    /// an empty one).
    #[inline(always)]
    pub unsafe fn into_disjoint<'a>(self) -> DisjointSlice<'a, T> {
        // SAFETY: this function's contract. Non-null said to the optimizer, so that
        // `Option<&mut T>` from the accessors needs no null test.
        let ptr = unsafe {
            core::hint::assert_unchecked(!self.ptr.is_null());
            NonNull::new_unchecked(self.ptr)
        };
        DisjointSlice {
            ptr,
            len: self.len,
            _elems: PhantomData,
        }
    }
}

/// The calling thread's index among all threads of the launch, unique per thread:
/// `block_rank * block_size + thread_rank`, with blocks ranked x fastest. In a 1-D launch it
/// is [`global_idx_x`].
#[inline(always)]
pub fn grid_thread_rank() -> usize {
    block_rank() * block_size() as usize + thread_rank() as usize
}

/// The calling thread's block's index among the grid's blocks, x fastest.
#[inline(always)]
fn block_rank() -> usize {
    (block_idx_z() as usize * grid_dim_y() as usize + block_idx_y() as usize)
        * grid_dim_x() as usize
        + block_idx_x() as usize
}

/// A buffer a kernel writes, each thread only the elements it owns: the element at its
/// [`grid_thread_rank`] ([`DisjointSlice::for_thread`]), its block's element for thread 0 of
/// each block ([`DisjointSlice::for_block`]), a chunk of consecutive elements
/// ([`DisjointSlice::chunk_for_thread`]), or the element at its (x, y) position in a
/// row-major array ([`DisjointSlice::for_thread_in_rows`]). Owned elements can be read and
/// written; other threads' elements are reachable only through `unsafe`.
///
/// The host passes it as `&mut DeviceBuffer<T>`. It is neither `Copy` nor `Clone`, and every
/// accessor borrows it mutably, so a thread holds at most one `&mut` to an element.
#[derive(Debug)]
pub struct DisjointSlice<'a, T> {
    ptr: NonNull<T>,
    len: usize,
    _elems: PhantomData<&'a mut [T]>,
}

impl<T: DeviceCopy> DisjointSlice<'_, T> {
    /// Number of elements in the whole buffer.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no elements.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The element at the calling thread's [`grid_thread_rank`] (its global index in a 1-D
    /// launch), or `None` past the end (a grid rounded up past the data).
    #[inline(always)]
    pub fn for_thread(&mut self) -> Option<&mut T> {
        // SAFETY: no other thread of the launch has this rank.
        unsafe { self.owned(grid_thread_rank()) }
    }

    /// The element at [`global_idx_x`] (`blockIdx.x * blockDim.x + threadIdx.x`), with its
    /// index, for the threads of the launch's first row of threads (y and z indices 0, of the
    /// thread and of its block: every thread of a 1-D launch), or `None` (past the end, or
    /// another row). The 1-D accessor, as cheap as CUDA C's index: in a 1-D launch it is
    /// [`DisjointSlice::for_thread`], without the 3-D rank.
    #[inline(always)]
    pub fn for_thread_x(&mut self) -> Option<(usize, &mut T)> {
        if thread_idx_y() | thread_idx_z() | block_idx_y() | block_idx_z() != 0 {
            return None;
        }
        let i = global_idx_x();
        // SAFETY: among the threads with y and z indices 0, `global_idx_x` is unique.
        unsafe { self.owned(i) }.map(|e| (i, e))
    }

    /// For thread 0 of each block (by [`thread_rank`]), the element at the block's rank in the
    /// grid (x fastest): where a block leaves its partial result. `None` for the block's other
    /// threads and past the end.
    #[inline(always)]
    pub fn for_block(&mut self) -> Option<&mut T> {
        if thread_rank() != 0 {
            return None;
        }
        // SAFETY: one thread per block asks, and blocks have distinct ranks.
        unsafe { self.owned(block_rank()) }
    }

    /// Elements `rank * chunk .. (rank + 1) * chunk` for the calling thread's
    /// [`grid_thread_rank`], cut at the end of the buffer (empty past it, and for `chunk` 0).
    #[inline(always)]
    pub fn chunk_for_thread(&mut self, chunk: usize) -> &mut [T] {
        let start = grid_thread_rank().saturating_mul(chunk).min(self.len);
        // No branch and no other pointer for an empty chunk: fewer values live in a GPU
        // kernel's registers.
        let count = (self.len - start).min(chunk);
        // SAFETY: `start..start + count` is in bounds (`start <= len`, so the pointer is at
        // most one past the end, as an empty slice's may be); ranks are unique, so the chunks
        // of two threads do not overlap.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr().add(start), count) }
    }

    /// The element at column [`global_idx_x`], row [`global_idx_y`] (and plane
    /// [`global_idx_z`], planes being as many rows as the grid has threads in y) of a
    /// row-major array `row_len` elements wide: index `(z * rows + y) * row_len + x`. `None`
    /// when `x >= row_len` or the index is past the end.
    #[inline(always)]
    pub fn for_thread_in_rows(&mut self, row_len: usize) -> Option<&mut T> {
        let x = global_idx_x();
        if x >= row_len {
            return None;
        }
        let rows = grid_dim_y() as usize * block_dim_y() as usize;
        let i = (global_idx_z()
            .checked_mul(rows)?
            .checked_add(global_idx_y())?)
        .checked_mul(row_len)?
        .checked_add(x)?;
        // SAFETY: two threads with different (x, y, z) and x < row_len get different indices.
        unsafe { self.owned(i) }
    }

    /// Element `i` as the calling thread's own, or `None` past the end.
    ///
    /// # Safety
    ///
    /// No other thread of the launch gets element `i` from a safe accessor.
    #[inline(always)]
    unsafe fn owned(&mut self, i: usize) -> Option<&mut T> {
        if i < self.len {
            // SAFETY: `i` is in bounds, and by this function's contract no other thread can
            // reach element `i` without `unsafe`.
            Some(unsafe { &mut *self.ptr.as_ptr().add(i) })
        } else {
            None
        }
    }

    /// Element `index`, with no bounds check and no ownership check.
    ///
    /// # Safety
    ///
    /// `index < self.len()`, and no other thread of the launch accesses element `index` while
    /// the returned reference lives.
    #[inline(always)]
    pub unsafe fn get_unchecked_mut(&mut self, index: usize) -> &mut T {
        // SAFETY: this function's contract.
        unsafe { &mut *self.ptr.as_ptr().add(index) }
    }

    /// The buffer's address, for accesses the other methods cannot express (atomics, a
    /// pattern of ownership of one's own); every access through it is the caller's `unsafe`.
    #[inline(always)]
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.ptr.as_ptr()
    }
}
