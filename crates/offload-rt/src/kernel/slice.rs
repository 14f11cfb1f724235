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
        #[link_name = offload_format::abi_name!(READ_ONLY_MARKER)]
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
/// row-major array ([`DisjointSlice::for_thread_xy`], [`DisjointSlice::for_thread_in_rows`]).
/// Owned elements can be read and written; other threads' elements are reachable only through
/// `unsafe`.
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
        let i = global_idx_x();
        // One test, as CUDA C's `if (i < n)`: conditions joined with `|`, not `||`, leave no
        // paths that meet again after it, which cost a GPU kernel branches and registers.
        let other_row = thread_idx_y() | thread_idx_z() | block_idx_y() | block_idx_z() != 0;
        if other_row | (i >= self.len) {
            return None;
        }
        // SAFETY: `i < len`, and among the threads with y and z indices 0, `global_idx_x` is
        // unique.
        Some((i, unsafe { &mut *self.ptr.as_ptr().add(i) }))
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

    /// The element at column [`global_idx_x`], row [`global_idx_y`] of a row-major array
    /// `row_len` elements wide, with its column and row, for the threads of the launch's first
    /// plane (z indices 0, of the thread and of its block: every thread of a 2-D launch), or
    /// `None` (the column past `row_len`, the index past the end, or another plane). The 2-D
    /// accessor, as cheap as CUDA C's `y * width + x`: in a 2-D launch it is
    /// [`DisjointSlice::for_thread_in_rows`] without the planes.
    #[inline(always)]
    pub fn for_thread_xy(&mut self, row_len: usize) -> Option<((usize, usize), &mut T)> {
        let (x, y) = (global_idx_x(), global_idx_y());
        let (row_start, row_overflows) = y.overflowing_mul(row_len);
        let (i, overflows) = row_start.overflowing_add(x);
        // One test, as in `for_thread_x`.
        let other_plane = thread_idx_z() | block_idx_z() != 0;
        if other_plane | (x >= row_len) | row_overflows | overflows | (i >= self.len) {
            return None;
        }
        // SAFETY: `i < len`; among the threads with z indices 0, two with different (x, y)
        // and x < row_len get different indices.
        Some(((x, y), unsafe { &mut *self.ptr.as_ptr().add(i) }))
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

/// A read-only slice seen as a row-major matrix of `height` rows of `width` elements,
/// indexed by column and row.
///
/// `rows.at(x, y)` checks `x < width` and `y < height`. A kernel usually guards its accesses
/// with those very comparisons (`if x < w && y < h`), so the optimizer removes the checks and
/// no panic branch stands between one load and the next: the loads issue together, as in C.
/// `slice[y * w + x]` instead checks the flat index against the slice's length, which no
/// guard on `x` and `y` implies, and every such check orders the loads after it. The one
/// check left is [`Rows::new`]'s, once per thread: the slice holds `width * height` elements.
///
/// Indices are `usize` ([`Rows::new`]) or `u32` ([`Rows::new_u32`]). With `u32` the whole
/// matrix must have at most `u32::MAX` elements, checked once, and every element's index is
/// then one 32-bit multiply-add, as CUDA C's `int` indices are: 64-bit index arithmetic costs
/// GPUs two registers a value and several instructions a multiply.
///
/// ```ignore
/// let input = Rows::new(input, w, h);
/// if x < w && y + 1 < h {
///     *o = input.at(x, y) + input.at(x, y + 1);
/// }
/// ```
#[derive(Debug)]
pub struct Rows<'a, T, I = usize> {
    data: &'a [T],
    width: I,
    height: I,
}

/// The index types of [`Rows`]: `usize` and `u32`.
pub trait RowIndex: Copy + PartialOrd + sealed::Sealed {
    /// `width * height` as `usize`, or `None` when it overflows `Self`.
    #[doc(hidden)]
    fn area(width: Self, height: Self) -> Option<usize>;
    /// `y * width + x`.
    ///
    /// # Safety
    ///
    /// `x < width`, and `y * width + x` fits in `Self`.
    #[doc(hidden)]
    unsafe fn flat(x: Self, y: Self, width: Self) -> usize;
    #[doc(hidden)]
    fn to_usize(self) -> usize;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for usize {}
    impl Sealed for u32 {}
}

impl RowIndex for usize {
    #[inline(always)]
    fn area(width: usize, height: usize) -> Option<usize> {
        width.checked_mul(height)
    }
    #[inline(always)]
    unsafe fn flat(x: usize, y: usize, width: usize) -> usize {
        // SAFETY: the caller's contract: no overflow.
        unsafe { y.unchecked_mul(width).unchecked_add(x) }
    }
    #[inline(always)]
    fn to_usize(self) -> usize {
        self
    }
}

impl RowIndex for u32 {
    #[inline(always)]
    fn area(width: u32, height: u32) -> Option<usize> {
        width.checked_mul(height).map(|n| n as usize)
    }
    #[inline(always)]
    unsafe fn flat(x: u32, y: u32, width: u32) -> usize {
        // SAFETY: the caller's contract: no overflow.
        unsafe { y.unchecked_mul(width).unchecked_add(x) as usize }
    }
    #[inline(always)]
    fn to_usize(self) -> usize {
        self as usize
    }
}

impl<T, I: Copy> Clone for Rows<'_, T, I> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T, I: Copy> Copy for Rows<'_, T, I> {}

impl<'a, T> Rows<'a, T> {
    /// The first `width * height` elements of `data` as `height` rows of `width`.
    ///
    /// # Panics
    ///
    /// When `data` has fewer than `width * height` elements.
    #[inline(always)]
    #[track_caller]
    pub fn new(data: &'a [T], width: usize, height: usize) -> Self {
        Rows::checked(data, width, height)
    }
}

impl<'a, T> Rows<'a, T, u32> {
    /// [`Rows::new`] with `u32` indices: each element's index is one 32-bit multiply-add.
    ///
    /// # Panics
    ///
    /// When `width * height` exceeds `u32::MAX` or the number of elements of `data`.
    #[inline(always)]
    #[track_caller]
    pub fn new_u32(data: &'a [T], width: u32, height: u32) -> Self {
        Rows::checked(data, width, height)
    }
}

impl<'a, T, I: RowIndex> Rows<'a, T, I> {
    #[inline(always)]
    #[track_caller]
    fn checked(data: &'a [T], width: I, height: I) -> Self {
        match I::area(width, height) {
            Some(n) if n <= data.len() => Rows {
                data,
                width,
                height,
            },
            // A literal message, which a GPU's panic report keeps whole.
            _ => panic!("rows: the slice holds fewer than width x height elements"),
        }
    }

    /// Elements per row.
    #[inline(always)]
    pub fn width(&self) -> I {
        self.width
    }

    /// Number of rows.
    #[inline(always)]
    pub fn height(&self) -> I {
        self.height
    }

    /// The element at column `x` of row `y`, or `None` outside the rows.
    #[inline(always)]
    pub fn get(&self, x: I, y: I) -> Option<&'a T> {
        if x < self.width && y < self.height {
            // SAFETY: `y * width + x < height * width`, which fits in `I` and is at most
            // `data.len()` (`checked`).
            Some(unsafe { self.data.get_unchecked(I::flat(x, y, self.width)) })
        } else {
            None
        }
    }

    /// The element at column `x` of row `y`.
    ///
    /// # Panics
    ///
    /// When `x >= width` or `y >= height`.
    #[inline(always)]
    #[track_caller]
    pub fn at(&self, x: I, y: I) -> &'a T {
        // Literal messages, which a GPU's panic report keeps whole. No `Option<&T>` on the
        // way: matching one tests the element's address for null, which the optimizer cannot
        // always rule out, a branch before each load again.
        if x >= self.width {
            panic!("column index out of bounds: not less than the rows' width")
        }
        if y >= self.height {
            panic!("row index out of bounds: not less than the number of rows")
        }
        // SAFETY: as in `get`.
        unsafe { self.data.get_unchecked(I::flat(x, y, self.width)) }
    }

    /// Row `y`, or `None` past the last row.
    #[inline(always)]
    pub fn row(&self, y: I) -> Option<&'a [T]> {
        if y < self.height {
            let (y, width) = (y.to_usize(), self.width.to_usize());
            // SAFETY: `(y + 1) * width <= height * width <= data.len()` (`checked`).
            Some(unsafe { self.data.get_unchecked(y * width..(y + 1) * width) })
        } else {
            None
        }
    }
}
