//! Atomic operations on a block's shared memory in region form, as plain reads and writes.
//!
//! In region form every thread of a block runs on the worker that runs the block, one region
//! loop after another, and no other block reaches its shared memory: an atomic
//! read-modify-write of a shared location has no other writer to wait for. `#[kernel]` turns
//! `AtomicU32::from_ptr(tile.add(i)).fetch_add(v, order)`, where `tile` is the block's
//! `shared_array!` or `dynamic_shared` and the call is the whole access, into
//! `block_atomic::fetch_add::<u32>(tile.add(i), v, order)`: one add, which a loop can keep in
//! a register or vectorize, where a locked instruction serializes every access. Each function
//! returns what its `core::sync::atomic` namesake returns; the ordering is evaluated and has
//! nothing to order.

use core::sync::atomic::Ordering;

/// The integers `core::sync::atomic` has atomics of.
pub trait BlockInt: Copy + Ord {
    /// `self + v`, wrapping.
    fn wrapping_add(self, v: Self) -> Self;
    /// `self - v`, wrapping.
    fn wrapping_sub(self, v: Self) -> Self;
    /// `self & v`.
    fn and(self, v: Self) -> Self;
    /// `self | v`.
    fn or(self, v: Self) -> Self;
    /// `self ^ v`.
    fn xor(self, v: Self) -> Self;
    /// `!(self & v)`.
    fn nand(self, v: Self) -> Self;
}

macro_rules! block_ints {
    ($($t:ty),*) => {$(
        impl BlockInt for $t {
            #[inline(always)]
            fn wrapping_add(self, v: Self) -> Self { <$t>::wrapping_add(self, v) }
            #[inline(always)]
            fn wrapping_sub(self, v: Self) -> Self { <$t>::wrapping_sub(self, v) }
            #[inline(always)]
            fn and(self, v: Self) -> Self { self & v }
            #[inline(always)]
            fn or(self, v: Self) -> Self { self | v }
            #[inline(always)]
            fn xor(self, v: Self) -> Self { self ^ v }
            #[inline(always)]
            fn nand(self, v: Self) -> Self { !(self & v) }
        }
    )*};
}
block_ints!(u8, i8, u16, i16, u32, i32, u64, i64, usize, isize);

/// Replaces `*p` by `f(*p)`, returning the old value.
///
/// # Safety
///
/// `p` is valid for reads and writes, and no other thread accesses it during the call (the
/// region form's guarantee for a block's shared memory).
#[inline(always)]
unsafe fn update<T: Copy>(p: *mut T, f: impl FnOnce(T) -> T) -> T {
    // SAFETY: this function's contract.
    unsafe {
        let old = p.read();
        p.write(f(old));
        old
    }
}

macro_rules! fetch_ops {
    ($($name:ident => $op:expr;)*) => {$(
        #[doc = concat!("`Atomic*::", stringify!($name), "` on a block's shared memory.")]
        ///
        /// # Safety
        ///
        /// `p` points into the running block's shared memory, in region form.
        #[inline(always)]
        pub unsafe fn $name<T: BlockInt>(p: *mut T, v: T, _order: Ordering) -> T {
            // SAFETY: this function's contract.
            unsafe { update(p, |old: T| $op(old, v)) }
        }
    )*};
}
fetch_ops! {
    fetch_add => T::wrapping_add;
    fetch_sub => T::wrapping_sub;
    fetch_and => T::and;
    fetch_or => T::or;
    fetch_xor => T::xor;
    fetch_nand => T::nand;
    fetch_max => Ord::max;
    fetch_min => Ord::min;
    swap => |_, v| v;
}

/// `Atomic*::load` on a block's shared memory.
///
/// # Safety
///
/// As for [`fetch_add`].
#[inline(always)]
pub unsafe fn load<T: BlockInt>(p: *mut T, _order: Ordering) -> T {
    // SAFETY: this function's contract.
    unsafe { p.read() }
}

/// `Atomic*::store` on a block's shared memory.
///
/// # Safety
///
/// As for [`fetch_add`].
#[inline(always)]
pub unsafe fn store<T: BlockInt>(p: *mut T, v: T, _order: Ordering) {
    // SAFETY: this function's contract.
    unsafe { p.write(v) }
}

/// `Atomic*::compare_exchange` (and `_weak`, which never fails spuriously here) on a block's
/// shared memory.
///
/// # Safety
///
/// As for [`fetch_add`].
#[inline(always)]
pub unsafe fn compare_exchange<T: BlockInt>(
    p: *mut T,
    current: T,
    new: T,
    _success: Ordering,
    _failure: Ordering,
) -> Result<T, T> {
    // SAFETY: this function's contract.
    unsafe {
        let old = p.read();
        if old == current {
            p.write(new);
            Ok(old)
        } else {
            Err(old)
        }
    }
}
