//! The CPU device's thread loops: what `#[kernel]`'s region form calls (lane storage for the
//! values a region leaves to the next, the loops over a block's threads, the warp exchanges
//! between them), and the hooks through which the CPU link gives the IR form's regions their
//! loops (`--cfg offload_cpu_ir`). The index state and the arenas they work on are
//! [`super::cpu`]'s.

use core::cell::UnsafeCell;

use super::abi::{CPU_LANE_CAPACITY, CPU_WARP_SIZE, CpuLaunch};
use super::cpu::{
    BLOCK, BLOCK_DIM, GRID_DIM, THREAD, begin_block_without_warps, block_dim_x, block_idx_x, enter,
    grid_dim_x,
};
use super::shuffle::{Shuffle, WarpValue, source_lane};

#[repr(C, align(64))]
struct LaneArena(UnsafeCell<[u8; CPU_LANE_CAPACITY]>);

#[thread_local]
static LANES: LaneArena = LaneArena(UnsafeCell::new([0; CPU_LANE_CAPACITY]));

/// Starts a launch's run in region form on this OS thread.
///
/// # Safety
///
/// `launch` points at a valid [`CpuLaunch`] that outlives the run.
#[inline(always)]
pub unsafe fn enter_regions(launch: *const CpuLaunch) {
    // SAFETY: this function's contract.
    enter(unsafe { &*launch });
}

/// Starts block `linear` of a run in region form.
///
/// # Safety
///
/// As [`enter_regions`], with `linear` inside the launch's grid.
#[inline(always)]
pub unsafe fn begin_region_block(launch: *const CpuLaunch, linear: u64) {
    // SAFETY: this function's contract.
    begin_block_without_warps(unsafe { &*launch }, linear);
}

/// The number of threads of the running block.
#[inline(always)]
fn block_threads() -> usize {
    let [bx, by, bz] = BLOCK_DIM.get();
    (bx * by * bz) as usize
}

/// Lane storage for one local: a slot of `T` per thread of the block, after the `cursor`
/// bytes already given out. Past [`CPU_LANE_CAPACITY`] it returns the arena's start and leaves
/// `cursor` past the capacity, which [`lanes_fit`] reports before anything runs.
#[inline(always)]
pub fn lanes<T>(cursor: &mut usize) -> *mut T {
    let threads = block_threads();
    let align = core::mem::align_of::<T>();
    let base = LANES.0.get().cast::<u8>();
    let start = if align > 64 {
        None
    } else {
        cursor.checked_next_multiple_of(align.max(64))
    };
    let end = start.and_then(|s| s.checked_add(core::mem::size_of::<T>().checked_mul(threads)?));
    match (start, end) {
        (Some(start), Some(end)) if end <= CPU_LANE_CAPACITY => {
            *cursor = end;
            // SAFETY: `start + size_of::<T>() * threads <= CPU_LANE_CAPACITY`.
            unsafe { base.add(start).cast() }
        }
        _ => {
            *cursor = usize::MAX;
            base.cast()
        }
    }
}

/// Whether the lane storage given out fits this OS thread's arena.
#[inline(always)]
pub fn lanes_fit(cursor: usize) -> bool {
    cursor <= CPU_LANE_CAPACITY
}

/// Thread `t`'s copy of a local.
///
/// # Safety
///
/// `lanes` came from [`lanes`] for this block, `t` is a thread of the block, and its slot
/// was written.
#[inline(always)]
pub unsafe fn lane_read<T>(lanes: *mut T, t: usize) -> T {
    const {
        assert!(
            !core::mem::needs_drop::<T>(),
            "a local kept across sync_threads() on the CPU device must not need dropping"
        )
    };
    // SAFETY: this function's contract.
    unsafe { lanes.add(t).read() }
}

/// Writes thread `t`'s copy of a local.
///
/// # Safety
///
/// `lanes` came from [`lanes`] for this block and `t` is a thread of the block.
#[inline(always)]
pub unsafe fn lane_write<T>(lanes: *mut T, t: usize, value: T) {
    // SAFETY: this function's contract.
    unsafe { lanes.add(t).write(value) }
}

/// The indices of one thread of a region, as values: the region form's `#[kernel]` reads a
/// kernel's `thread_idx_x()`, `block_idx_y()`… in a region from here, not from the
/// thread-local index state, whose reloads after every store through a kernel pointer (which
/// the optimizer cannot tell from the state) would keep the region's loop scalar. Each method
/// is the kernel function of the same name.
#[derive(Clone, Copy, Debug)]
pub struct RegionThread {
    thread: [u32; 3],
    block: [u32; 3],
    block_dim: [u32; 3],
    grid_dim: [u32; 3],
}

macro_rules! region_index {
    ($($name:ident: $field:ident[$i:literal];)*) => {$(
        #[allow(missing_docs)]
        #[inline(always)]
        pub fn $name(self) -> u32 {
            self.$field[$i]
        }
    )*};
}

macro_rules! region_dim3 {
    ($($name:ident: $field:ident;)*) => {$(
        #[allow(missing_docs)]
        #[inline(always)]
        pub fn $name(self) -> super::dim::Dim3 {
            let [x, y, z] = self.$field;
            super::dim::Dim3 { x, y, z }
        }
    )*};
}

impl RegionThread {
    /// The thread `thread` of this one's block, made the running GPU thread: its index state
    /// is set too, for the functions a region calls (and its panic report).
    #[inline(always)]
    fn enter(self, thread: [u32; 3]) -> RegionThread {
        THREAD.set(thread);
        RegionThread { thread, ..self }
    }

    region_index! {
        thread_idx_x: thread[0]; thread_idx_y: thread[1]; thread_idx_z: thread[2];
        block_idx_x: block[0]; block_idx_y: block[1]; block_idx_z: block[2];
        block_dim_x: block_dim[0]; block_dim_y: block_dim[1]; block_dim_z: block_dim[2];
        grid_dim_x: grid_dim[0]; grid_dim_y: grid_dim[1]; grid_dim_z: grid_dim[2];
    }
    region_dim3! {
        thread_idx: thread; block_idx: block; block_dim: block_dim; grid_dim: grid_dim;
    }

    #[allow(missing_docs)]
    #[inline(always)]
    pub fn global_idx_x(self) -> usize {
        self.global(0)
    }

    #[allow(missing_docs)]
    #[inline(always)]
    pub fn global_idx_y(self) -> usize {
        self.global(1)
    }

    #[allow(missing_docs)]
    #[inline(always)]
    pub fn global_idx_z(self) -> usize {
        self.global(2)
    }

    #[inline(always)]
    fn global(self, i: usize) -> usize {
        super::dim::global_idx(self.block[i], self.block_dim[i], self.thread[i])
    }

    #[allow(missing_docs)]
    #[inline(always)]
    pub fn thread_rank(self) -> u32 {
        let ([x, y, z], [bx, by, _]) = (self.thread, self.block_dim);
        x + bx * (y + by * z)
    }

    #[allow(missing_docs)]
    #[inline(always)]
    pub fn lane_id(self) -> u32 {
        self.thread_rank() % CPU_WARP_SIZE
    }

    #[allow(missing_docs)]
    #[inline(always)]
    pub fn warp_id(self) -> u32 {
        self.thread_rank() / CPU_WARP_SIZE
    }

    #[allow(missing_docs)]
    #[inline(always)]
    pub fn block_size(self) -> u32 {
        let [bx, by, bz] = self.block_dim;
        bx * by * bz
    }

    /// This thread's index in iteration `k` of a grid-stride loop (see
    /// [`grid_stride_trips`]).
    #[inline(always)]
    pub fn grid_stride_at(self, k: usize) -> usize {
        self.global_idx_x() + k * (self.grid_dim[0] as usize * self.block_dim[0] as usize)
    }

    /// This thread's index in iteration `k` of a block-stride loop.
    #[inline(always)]
    pub fn block_stride_at(self, k: usize) -> usize {
        self.thread[0] as usize + k * self.block_dim[0] as usize
    }
}

/// Runs one region of a kernel for every thread of the running block, in rank order
/// (`x` fastest), passing each thread's rank and indices. The thread-local index state is
/// stored too, for the functions the region calls (and its panic report), but the region
/// itself reads its indices from the [`RegionThread`] values: affine in the loop counter,
/// with nothing reloaded per thread, so the loop vectorizes.
#[inline(always)]
pub fn for_each_thread(region: impl FnMut(usize, RegionThread)) {
    for_each_thread_in((0, usize::MAX), (0, usize::MAX), region);
}

/// [`for_each_thread`] for the threads whose `x` index is in `x.0..x.1` and whose `y` index
/// is in `y.0..y.1` only: the region form narrows a region to the threads its test can let
/// in (a tree reduction's `if thread_idx_x() < limit`, a stencil's `if row < n && col < n`,
/// its halo's `if tx == 0`), from [`thread_range_lt`] and [`thread_range_eq`].
#[inline(always)]
pub fn for_each_thread_in(
    x: (usize, usize),
    y: (usize, usize),
    mut region: impl FnMut(usize, RegionThread),
) {
    let block_dim = BLOCK_DIM.get();
    let (block, grid_dim) = (BLOCK.get(), GRID_DIM.get());
    let [bx, by, bz] = block_dim;
    let clamp = |(from, to): (usize, usize), extent: u32| {
        let to = to.min(extent as usize) as u32;
        (from.min(to as usize) as u32, to)
    };
    let ((x_from, x_to), (y_from, y_to)) = (clamp(x, bx), clamp(y, by));
    let block_at = RegionThread {
        thread: [0; 3],
        block,
        block_dim,
        grid_dim,
    };
    for z in 0..bz {
        for y in y_from..y_to {
            let row = ((z * by + y) * bx) as usize;
            for x in x_from..x_to {
                region(row + x as usize, block_at.enter([x, y, z]));
            }
        }
    }
}

/// The ranks from the first to past the last thread of the block whose `guard` slot is true
/// (`(0, 0)` for none): where [`for_each_thread_span`] runs a branch of an `if` around warp
/// operations. Read 8 slots at a time.
///
/// # Safety
///
/// `guard` came from [`lanes`] for this block (64-byte aligned) and every slot was written.
#[inline(always)]
pub unsafe fn guard_span(guard: *mut bool) -> (usize, usize) {
    let threads = block_threads();
    // SAFETY: this function's contract; a `bool` is one byte, 0 or 1.
    let bytes = unsafe { core::slice::from_raw_parts(guard.cast::<u8>(), threads) };
    let (words, tail) = bytes.as_chunks::<8>();
    let word = |w: &[u8; 8]| u64::from_ne_bytes(*w) != 0;
    let first = match words.iter().position(word) {
        Some(w) => w * 8 + bytes[w * 8..].iter().position(|b| *b != 0).unwrap_or(0),
        None => match tail.iter().position(|b| *b != 0) {
            Some(b) => words.len() * 8 + b,
            None => return (0, 0),
        },
    };
    let last = match tail.iter().rposition(|b| *b != 0) {
        Some(b) => words.len() * 8 + b,
        None => {
            let w = words.iter().rposition(word).unwrap_or(0);
            w * 8 + words[w].iter().rposition(|b| *b != 0).unwrap_or(0)
        }
    };
    (first, last + 1)
}

/// [`for_each_thread`] for the threads of rank `from..to` only: the region form runs a
/// branch of an `if` around warp operations over the ranks its guard let in (`if warp_id()
/// == 0`: the first warp's).
#[inline(always)]
pub fn for_each_thread_span(from: usize, to: usize, mut region: impl FnMut(usize, RegionThread)) {
    let block_dim = BLOCK_DIM.get();
    let (block, grid_dim) = (BLOCK.get(), GRID_DIM.get());
    let block_at = RegionThread {
        thread: [0; 3],
        block,
        block_dim,
        grid_dim,
    };
    let [bx, by, bz] = block_dim.map(|d| d as usize);
    let to = to.min(bx * by * bz);
    let mut t = from;
    while t < to {
        let (x, row) = (t % bx, t / bx);
        let end = (t - x + bx).min(to);
        let (y, z) = ((row % by) as u32, (row / by) as u32);
        for x in x as u32..(x + end - t) as u32 {
            region(row * bx + x as usize, block_at.enter([x, y, z]));
        }
        t = end;
    }
}

/// The unsigned types a thread's index is compared in, for [`thread_range_lt`] and
/// [`thread_range_eq`].
pub trait RangeIndex: Copy {
    #[allow(missing_docs)]
    fn widen(self) -> u128;
    #[allow(missing_docs)]
    const MAX: u128;
}

macro_rules! range_index {
    ($($t:ty),*) => {$(
        impl RangeIndex for $t {
            #[inline(always)]
            fn widen(self) -> u128 {
                self as u128
            }
            const MAX: u128 = <$t>::MAX as u128;
        }
    )*};
}

range_index!(u32, u64, usize);

/// No block extent is larger (the launch rule's 1024 threads per block).
const BLOCK_EXTENT_LIMIT: u128 = 1024;

/// Whether `base + t`, for every thread index `t` of a block, is computed without wrapping
/// in `I`.
#[inline(always)]
fn no_wrap<I: RangeIndex>(base: I) -> bool {
    base.widen() + BLOCK_EXTENT_LIMIT <= I::MAX
}

/// The thread indices `t` along one axis with `base + t < bound`, computed in `I`.
#[inline(always)]
pub fn thread_range_lt<I: RangeIndex>(base: I, bound: I) -> (usize, usize) {
    if !no_wrap(base) {
        return (0, usize::MAX);
    }
    let below = bound.widen().saturating_sub(base.widen());
    (0, below.min(usize::MAX as u128) as usize)
}

/// The thread index `t` along one axis with `base + t == value`, computed in `I`.
#[inline(always)]
pub fn thread_range_eq<I: RangeIndex>(base: I, value: I) -> (usize, usize) {
    if !no_wrap(base) {
        return (0, usize::MAX);
    }
    match value.widen().checked_sub(base.widen()) {
        Some(t) if t < BLOCK_EXTENT_LIMIT => (t as usize, t as usize + 1),
        _ => (0, 0),
    }
}

/// Whether no thread of the running block has its `x` index in one of the `x` ranges or its
/// `y` index in one of the `y` ranges: a block with no thread on the edges a region's
/// `let edge = col == 0 || ..` tests, which runs the region with `edge` false.
#[inline(always)]
pub fn thread_ranges_miss(x: &[(usize, usize)], y: &[(usize, usize)]) -> bool {
    let [bx, by, _] = BLOCK_DIM.get();
    let miss = |ranges: &[(usize, usize)], extent: u32| {
        ranges
            .iter()
            .all(|&(from, to)| from >= to || from >= extent as usize)
    };
    miss(x, bx) && miss(y, by)
}

/// The indices in both ranges.
#[inline(always)]
pub fn thread_range_and(a: (usize, usize), b: (usize, usize)) -> (usize, usize) {
    (a.0.max(b.0), a.1.min(b.1))
}

/// Iterations of a grid-stride loop over `0..n` (`kernel::grid_stride_x(n)`) for the running
/// block's thread that has the most: its first thread's, whose first index is the lowest.
/// In region form such a loop runs iteration by iteration, each for every thread
/// ([`RegionThread::grid_stride_at`]): consecutive threads read consecutive elements, as the
/// GPU's warps do, not each thread its whole strided share in turn.
#[inline(always)]
pub fn grid_stride_trips(n: usize) -> usize {
    let first = block_idx_x() as usize * block_dim_x() as usize;
    let step = grid_dim_x() as usize * block_dim_x() as usize;
    n.saturating_sub(first).div_ceil(step)
}

/// [`grid_stride_trips`] for a block-stride loop (`kernel::block_stride_x(n)`).
#[inline(always)]
pub fn block_stride_trips(n: usize) -> usize {
    n.div_ceil(block_dim_x() as usize)
}

/// What a warp exchange of the region form computes for each lane from its warp's words
/// (see [`warp_exchange`]).
#[derive(Clone, Copy, Debug)]
pub enum WarpExchange {
    /// The word of the lane a shuffle of this kind picks (by the lane's argument), or the
    /// lane's own where that lane is past the warp.
    Shuffle(Shuffle),
    /// The mask of the lanes whose word is not zero.
    Ballot,
    /// 1 when some lane's word is not zero.
    Any,
    /// 1 when every lane's word is not zero.
    All,
}

/// What [`warp_put`] was given, for [`warp_take`] to return: the region form keeps it (it has
/// no bytes) from the put to the take, so the value's type is known at both.
#[derive(Clone, Copy, Debug)]
pub struct WarpSlot<T>(core::marker::PhantomData<T>);

/// The region form's half of a warp shuffle before the exchange: thread `t`'s value, as a
/// word, and its argument (source lane, delta or lane mask).
///
/// # Safety
///
/// `words` and `args` came from [`lanes`] for this block and `t` is a thread of the block.
#[inline(always)]
pub unsafe fn warp_put<T: WarpValue>(
    words: *mut u64,
    args: *mut u32,
    t: usize,
    value: T,
    arg: u32,
) -> WarpSlot<T> {
    // SAFETY: this function's contract.
    unsafe {
        lane_write(words, t, value.__to_word());
        lane_write(args, t, arg);
    }
    WarpSlot(core::marker::PhantomData)
}

/// The region form's half of a ballot, `warp_any` or `warp_all` before the exchange.
///
/// # Safety
///
/// As [`warp_put`].
#[inline(always)]
pub unsafe fn warp_put_predicate(words: *mut u64, t: usize, predicate: bool) {
    // SAFETY: this function's contract.
    unsafe { lane_write(words, t, u64::from(predicate)) }
}

/// The exchange of a warp operation in the region form, once for the block between the
/// region that put every thread's word and the one that takes the results: each warp of the
/// block (32 threads by rank, fewer in a last, partial one) with a thread in `active` (null:
/// every warp; the others of an `if warp_id() == 0` put nothing) computes `how` from its
/// lanes' words, as the coroutine path's warp operations do, into the same words.
///
/// # Safety
///
/// `words` and `args` came from [`lanes`] for this block; `active`, when not null, too, with
/// every slot written.
#[inline(always)]
pub unsafe fn warp_exchange(
    active: *mut bool,
    words: *mut u64,
    args: *const u32,
    how: WarpExchange,
) {
    // SAFETY: this function's contract.
    for (base, lanes) in unsafe { active_warps(active) } {
        if let WarpExchange::Shuffle(mode) = how
            // SAFETY: this function's contract: the warp's slots are the block's.
            && unsafe { shuffle_uniform(words.add(base), args.add(base), lanes, mode) }
        {
            continue;
        }
        let mut warp = [0u64; CPU_WARP_SIZE as usize];
        // SAFETY: this function's contract: `base + lane` is a thread of the block.
        unsafe {
            for (lane, word) in warp.iter_mut().enumerate().take(lanes) {
                *word = words.add(base + lane).read();
            }
            match how {
                WarpExchange::Shuffle(mode) => {
                    for lane in 0..lanes {
                        let arg = args.add(base + lane).read();
                        let src = source_lane(mode, lane as u32, arg, CPU_WARP_SIZE) as usize;
                        let got = if src < lanes { warp[src] } else { warp[lane] };
                        words.add(base + lane).write(got);
                    }
                }
                WarpExchange::Ballot | WarpExchange::Any | WarpExchange::All => {
                    let mask = warp[..lanes]
                        .iter()
                        .enumerate()
                        .fold(0u64, |mask, (lane, w)| mask | u64::from(*w != 0) << lane);
                    let result = match how {
                        WarpExchange::Ballot => mask,
                        WarpExchange::Any => u64::from(mask != 0),
                        _ => u64::from(mask == u64::MAX >> (64 - lanes)),
                    };
                    for lane in 0..lanes {
                        words.add(base + lane).write(result);
                    }
                }
            }
        }
    }
}

/// A warp's shuffle in place when every lane passed the same argument (a reduction's
/// `shuffle_down(v, offset)`): `down` and `up` move the words by the delta, `idx` copies one
/// word to every lane; `false`, with nothing done, for any other (`xor`, or differing
/// arguments). The same results as the lane-by-lane exchange: a lane whose source is past the
/// warp keeps its own word.
///
/// # Safety
///
/// `words` and `args` point at the warp's `lanes` slots (at most a warp's).
#[inline(always)]
unsafe fn shuffle_uniform(words: *mut u64, args: *const u32, lanes: usize, mode: Shuffle) -> bool {
    // SAFETY: this function's contract.
    let args = unsafe { core::slice::from_raw_parts(args, lanes) };
    let Some((&arg, rest)) = args.split_first() else {
        return true;
    };
    if matches!(mode, Shuffle::Xor) || rest.iter().any(|&a| a != arg) {
        return false;
    }
    let arg = arg as usize;
    // SAFETY: this function's contract: the copies stay within the warp's slots.
    unsafe {
        match mode {
            Shuffle::Down if arg < lanes => core::ptr::copy(words.add(arg), words, lanes - arg),
            Shuffle::Up if arg < lanes => core::ptr::copy(words, words.add(arg), lanes - arg),
            Shuffle::Idx if arg % CPU_WARP_SIZE as usize >= lanes => {}
            Shuffle::Idx => {
                let word = words.add(arg % CPU_WARP_SIZE as usize).read();
                for lane in 0..lanes {
                    words.add(lane).write(word);
                }
            }
            _ => {}
        }
    }
    true
}

/// The butterfly of `warp_sum`, `warp_min` or `warp_max` in the region form, once for the
/// block between the region that wrote every thread's value into `values` and the one that
/// reads the results there: each warp of the block with a thread in `active` (null: every
/// warp) combines its lanes' values with `step` as the coroutine path's xor shuffles do
/// (offsets from half the warp down to 1; a partner past a partial warp's last lane gives the
/// lane its own value), so with the same bits.
///
/// # Safety
///
/// `values` came from [`lanes`] for this block; `active`, when not null, too, with every
/// slot written.
#[inline(always)]
pub unsafe fn warp_butterfly<T: WarpValue>(
    active: *mut bool,
    values: *mut T,
    step: impl Fn(T, T) -> T + Copy,
) {
    // SAFETY: this function's contract.
    for (base, lanes) in unsafe { active_warps(active) } {
        // SAFETY: as above; the warp's threads are the block's.
        unsafe { butterfly_of_warp(values, base, lanes, step) };
    }
}

/// [`warp_butterfly`] of the warp of `lanes` threads from `base` on.
///
/// # Safety
///
/// `values` came from [`lanes`] for this block, and the warp's threads are the block's.
#[inline(always)]
unsafe fn butterfly_of_warp<T: WarpValue>(
    values: *mut T,
    base: usize,
    lanes: usize,
    step: impl Fn(T, T) -> T,
) {
    let mut offset = CPU_WARP_SIZE as usize / 2;
    while offset > 0 {
        // The two lanes of each pair read each other's value from before the step.
        for low in (0..lanes).filter(|lane| lane & offset == 0) {
            let high = low + offset;
            // SAFETY: as above; every bit pattern is a value of `T` (a `WarpValue`: an
            // integer or a float).
            unsafe {
                let mine = values.add(base + low).read();
                if high < lanes {
                    let theirs = values.add(base + high).read();
                    values.add(base + low).write(step(mine, theirs));
                    values.add(base + high).write(step(theirs, mine));
                } else {
                    values.add(base + low).write(step(mine, mine));
                }
            }
        }
        offset /= 2;
    }
}

/// [`warp_butterfly`] of `warp_sum`: a whole warp's butterfly leaves every lane the value its
/// first lane gets, since each step adds the same two values on both lanes of a pair (integer
/// and IEEE addition are commutative; a NaN's payload aside), which is the sum down a halving
/// tree: 31 additions and a copy for a warp, where the butterfly makes 160. A partial warp,
/// whose lanes past the last add their own values, runs the butterfly.
///
/// # Safety
///
/// As [`warp_butterfly`].
#[inline(always)]
pub unsafe fn warp_sum_tree<T: WarpValue + super::shuffle::WarpAdd>(
    active: *mut bool,
    values: *mut T,
) {
    const SIZE: usize = CPU_WARP_SIZE as usize;
    let threads = block_threads();
    // The whole warps, then a partial one: a loop of whole warps only keeps the tree's trip
    // counts constant (an iterator of both kinds made the reduction 15% slower).
    let mut base = 0;
    while base + SIZE <= threads {
        // SAFETY: this function's contract: the warp's threads are the block's; every bit
        // pattern is a value of `T`.
        unsafe {
            if warp_is_active(active, base, SIZE) {
                let mut warp: [T; SIZE] = values.add(base).cast::<[T; SIZE]>().read();
                let mut half = SIZE / 2;
                while half > 0 {
                    for lane in 0..half {
                        warp[lane] = super::shuffle::warp_sum_step(warp[lane], warp[lane + half]);
                    }
                    half /= 2;
                }
                values.add(base).cast::<[T; SIZE]>().write([warp[0]; SIZE]);
            }
        }
        base += SIZE;
    }
    // SAFETY: this function's contract; a partial warp starts at `base`.
    if base < threads && unsafe { warp_is_active(active, base, threads - base) } {
        // SAFETY: as above.
        unsafe { butterfly_of_warp(values, base, threads - base, super::shuffle::warp_sum_step) };
    }
}

/// Whether a thread of the warp of `lanes` threads from `base` on is in `active` (null:
/// every thread is).
///
/// # Safety
///
/// `active`, when not null, came from [`lanes`] for this block with every slot written, and
/// the warp's threads are the block's.
#[inline(always)]
unsafe fn warp_is_active(active: *mut bool, base: usize, lanes: usize) -> bool {
    // SAFETY: this function's contract.
    active.is_null() || (0..lanes).any(|lane| unsafe { active.add(base + lane).read() })
}

/// The warps of the running block with a thread in `active` (null: every warp), each as its
/// first rank and its number of lanes (fewer than [`CPU_WARP_SIZE`] in a last, partial one).
///
/// # Safety
///
/// `active`, when not null, came from [`lanes`] for this block with every slot written.
#[inline(always)]
unsafe fn active_warps(active: *mut bool) -> impl Iterator<Item = (usize, usize)> {
    let (threads, size) = (block_threads(), CPU_WARP_SIZE as usize);
    (0..threads)
        .step_by(size)
        .map(move |base| (base, (threads - base).min(size)))
        // SAFETY: this function's contract; the warp's threads are the block's.
        .filter(move |&(base, lanes)| unsafe { warp_is_active(active, base, lanes) })
}

/// Thread `t`'s result of a warp shuffle in the region form, after the exchange.
///
/// # Safety
///
/// `words` came from [`lanes`] for this block, `t` is a thread of the block, and `t` put its
/// value before the exchange.
#[inline(always)]
pub unsafe fn warp_take<T: WarpValue>(words: *mut u64, t: usize, _: WarpSlot<T>) -> T {
    // SAFETY: this function's contract.
    T::__from_word(unsafe { lane_read(words, t) })
}

/// Thread `t`'s ballot in the region form, after the exchange.
///
/// # Safety
///
/// As [`warp_take`].
#[inline(always)]
pub unsafe fn warp_take_mask(words: *mut u64, t: usize) -> u64 {
    // SAFETY: this function's contract.
    unsafe { lane_read(words, t) }
}

/// Thread `t`'s `warp_any` or `warp_all` in the region form, after the exchange.
///
/// # Safety
///
/// As [`warp_take`].
#[inline(always)]
pub unsafe fn warp_take_bool(words: *mut u64, t: usize) -> bool {
    // SAFETY: this function's contract.
    unsafe { lane_read(words, t) != 0 }
}

/// The value of a block-uniform expression (the range or condition of a loop or `if` around
/// barriers) for the block's first live thread, `None` when every thread has returned.
/// `alive` is null when the kernel never returns early.
///
/// # Safety
///
/// `alive`, when not null, came from [`lanes`] for this block and every slot was written.
#[inline(always)]
pub unsafe fn uniform<R>(alive: *mut bool, value: impl FnOnce(usize) -> R) -> Option<R> {
    let [bx, by, _] = BLOCK_DIM.get();
    let threads = block_threads();
    let mut t = 0;
    if !alive.is_null() {
        // SAFETY: this function's contract.
        while t < threads && !unsafe { alive.add(t).read() } {
            t += 1;
        }
        if t == threads {
            return None;
        }
    }
    let t32 = t as u32;
    THREAD.set([t32 % bx, (t32 / bx) % by, t32 / bx / by]);
    Some(value(t))
}

// The IR form's hooks: the CPU link finds them by name and inlines them into the regions
// it forms.

/// Starts a run in region form on this OS thread.
///
/// # Safety
///
/// `launch` points at a valid [`CpuLaunch`] that outlives the run.
#[cfg(offload_cpu_ir)]
#[unsafe(export_name = offload_format::abi_name!(CPU_IR_ENTER))]
#[inline(never)]
unsafe extern "C" fn ir_enter(launch: *const CpuLaunch) {
    // SAFETY: this function's contract.
    enter(unsafe { &*launch });
}

/// Starts block `linear` of the run (its arena). The warp operations' turns are not reset:
/// the CPU link keeps them in each formed body's locals (`CPU_IR_WARP_TURN`), and every other
/// path resets them at its own blocks' start.
///
/// # Safety
///
/// As [`ir_enter`], with `linear` inside the launch's grid.
#[cfg(offload_cpu_ir)]
#[unsafe(export_name = offload_format::abi_name!(CPU_IR_BEGIN_BLOCK))]
#[inline(never)]
unsafe extern "C" fn ir_begin_block(launch: *const CpuLaunch, linear: u64) {
    // SAFETY: this function's contract.
    begin_block_without_warps(unsafe { &*launch }, linear);
}

/// Makes thread `(x, y, z)` of the running block the current GPU thread, for the functions a
/// region calls that read the index state (a panic's report).
#[cfg(offload_cpu_ir)]
#[unsafe(export_name = offload_format::abi_name!(CPU_IR_SET_THREAD))]
#[inline(never)]
extern "C" fn ir_set_thread(x: u32, y: u32, z: u32) {
    THREAD.set([x, y, z]);
}

/// This OS thread's lane storage for `bytes`, or null when they do not fit it.
#[cfg(offload_cpu_ir)]
#[unsafe(export_name = offload_format::abi_name!(CPU_IR_LANES))]
#[inline(never)]
extern "C" fn ir_lanes(bytes: usize) -> *mut u8 {
    if bytes > CPU_LANE_CAPACITY {
        return core::ptr::null_mut();
    }
    LANES.0.get().cast()
}

/// Whether a block- or grid-stride loop runs trip by trip for the whole block: `false` as
/// compiled; the CPU link answers `true` in the kernel bodies whose regions it forms, where
/// [`ir_interleave`] then cuts the regions (see `Strided`).
#[cfg(offload_cpu_ir)]
#[unsafe(export_name = offload_format::abi_name!(CPU_IR_INTERLEAVED))]
#[inline(never)]
pub(super) extern "C" fn ir_interleaved() -> bool {
    // Opaque, so that rustc keeps each loop's question for the CPU link to answer.
    core::hint::black_box(false)
}

/// The top of each trip of an interleaved loop, where the CPU link cuts the regions as at a
/// block barrier; does nothing where it stays a call.
#[cfg(offload_cpu_ir)]
#[unsafe(export_name = offload_format::abi_name!(CPU_IR_INTERLEAVE))]
#[inline(never)]
pub(super) extern "C" fn ir_interleave() {
    // A side effect rustc cannot see through, so that the calls are kept.
    core::hint::black_box(());
}
