//! Kernels for `benches/cpu-samples`, written as the CUDA samples and Rodinia write them:
//! barriers and warp shuffles inside the functions a kernel calls (generic and const-generic
//! ones among them), shared arrays declared in those functions, early `return`s after the last
//! barrier, a `break` out of a loop holding a barrier, `match`, and closures bound to locals.
//! Each sample is an inline module under `#[offload_rt::kernels]`, the documented way to let the
//! CPU device see a barrier in a called function; the build says which kernels still run with
//! one coroutine per GPU thread, and why.
//!
//! Every output is exact: integer data for the reductions, scans, histogram, k-means and sort;
//! for the float kernels each output element is computed by one thread in a fixed order, which
//! a sequential loop repeats operation for operation.
#![no_std]

/// `reduce5`: the CUDA samples' block reduction, a shared-memory tree down to 64 partial sums
/// and a warp-shuffle stage, both in const-generic functions.
#[offload_rt::kernels]
pub mod reduction {
    use offload_rt::kernel::{
        block_idx_x, kernel, shuffle_down, sync_threads, thread_idx_x, warp_size,
    };
    use offload_rt::shared_array;

    /// Threads per block of [`reduce5`]; each block sums `2 * BLOCK` elements.
    pub const BLOCK: u32 = 256;

    /// The samples' last stage, in the first warp: folds the upper 32 of the 64 partial sums
    /// left in `sdata`, then sums the warp with `shuffle_down`. Thread 0 gets the block's sum.
    fn warp_stage<const BLOCK_SIZE: u32>(sdata: *mut u32, tid: usize, my_sum: u32) -> u32 {
        let mut my_sum = my_sum;
        if BLOCK_SIZE >= 64 {
            // SAFETY: `tid < 32`, so `tid + 32 < 64 <= BLOCK_SIZE`, the array's length.
            my_sum += unsafe { *sdata.add(tid + 32) };
        }
        let mut offset = warp_size() / 2;
        while offset > 0 {
            my_sum += shuffle_down(my_sum, offset);
            offset /= 2;
        }
        my_sum
    }

    /// The block's sum of one value per thread, in thread 0: halving steps through `sdata`
    /// (`BLOCK_SIZE` words) with a barrier after each, down to 64 sums, then [`warp_stage`].
    fn reduce<const BLOCK_SIZE: u32>(sdata: *mut u32, tid: usize, my_sum: u32) -> u32 {
        let mut my_sum = my_sum;
        // SAFETY: `tid < BLOCK_SIZE`, the array's length.
        unsafe { *sdata.add(tid) = my_sum };
        sync_threads();
        let mut s = BLOCK_SIZE as usize / 2;
        while s > 32 {
            if tid < s {
                // SAFETY: `tid + s < BLOCK_SIZE`; the slot was written before the barrier.
                my_sum += unsafe { *sdata.add(tid + s) };
                // SAFETY: as above.
                unsafe { *sdata.add(tid) = my_sum };
            }
            sync_threads();
            s >>= 1;
        }
        if tid < 32 {
            my_sum = warp_stage::<BLOCK_SIZE>(sdata, tid, my_sum);
        }
        my_sum
    }

    /// `block_sums[b]` = the sum of `input[b * 2 * BLOCK ..][.. 2 * BLOCK]` (within `n`):
    /// the samples' `reduce4`/`reduce5`, each thread adding two elements `BLOCK` apart first.
    /// Launch `n.div_ceil(2 * BLOCK)` blocks of [`BLOCK`] threads.
    #[kernel]
    pub fn reduce5(n: u32, input: *const u32, block_sums: *mut u32) {
        let sdata: *mut u32 = shared_array!(u32, BLOCK as usize);
        let tid = thread_idx_x() as usize;
        let n = n as usize;
        let i = block_idx_x() as usize * (BLOCK as usize * 2) + tid;
        let mut my_sum = if i < n {
            // SAFETY: `i < n`, `input`'s length.
            unsafe { *input.add(i) }
        } else {
            0
        };
        if i + (BLOCK as usize) < n {
            // SAFETY: as above.
            my_sum += unsafe { *input.add(i + BLOCK as usize) };
        }
        let total = reduce::<BLOCK>(sdata, tid, my_sum);
        if tid == 0 {
            // SAFETY: one element of `block_sums` per block.
            unsafe { *block_sums.add(block_idx_x() as usize) = total };
        }
    }
}

/// A block reduction through a generic warp-shuffle function, for two operations (sum and
/// maximum) and two element types, each instantiation with its own shared array.
#[offload_rt::kernels]
pub mod shuffle_reduction {
    use offload_rt::generic_shared_array;
    use offload_rt::kernel::{
        WarpValue, block_idx_x, grid_stride_x, kernel, lane_id, shuffle_xor, sync_threads,
        thread_idx_x, warp_id, warp_size, warps_per_block,
    };

    /// `op` over the warp's values, in every lane: a `shuffle_xor` butterfly.
    fn warp_reduce<T: WarpValue, F: Fn(T, T) -> T>(value: T, op: F) -> T {
        let mut value = value;
        let mut mask = warp_size() / 2;
        while mask > 0 {
            value = op(value, shuffle_xor(value, mask));
            mask /= 2;
        }
        value
    }

    /// `op` over the block's values, in every thread: each warp's result into a shared slot
    /// per warp (declared here, one array per `T`), one barrier, then [`warp_reduce`] of the
    /// slots; a second barrier frees the slots for the next call.
    fn block_reduce<T: WarpValue, F: Fn(T, T) -> T + Copy>(value: T, identity: T, op: F) -> T {
        let slots: *mut T = generic_shared_array!(T, 32);
        let warp_result = warp_reduce(value, op);
        if lane_id() == 0 {
            // SAFETY: at most 32 warps per block, the array's length.
            unsafe { *slots.add(warp_id() as usize) = warp_result };
        }
        sync_threads();
        let mine = if lane_id() < warps_per_block() {
            // SAFETY: each warp wrote its slot before the barrier.
            unsafe { *slots.add(lane_id() as usize) }
        } else {
            identity
        };
        let result = warp_reduce(mine, op);
        sync_threads();
        result
    }

    /// `sums[b]` and `maxima[b]`: the sum (as `u64`) and the maximum of the elements of
    /// `input[..n]` block `b` visits in a grid-stride loop (element `i` belongs to block
    /// `(i / blockDim) % gridDim`). Any 1-D launch of whole warps.
    #[kernel]
    pub fn sum_and_max(n: u32, input: *const u32, sums: *mut u64, maxima: *mut u32) {
        let mut sum = 0u64;
        let mut max = 0u32;
        for i in grid_stride_x(n as usize) {
            // SAFETY: `i < n`, `input`'s length.
            let v = unsafe { *input.add(i) };
            sum += u64::from(v);
            max = max.max(v);
        }
        let block_sum = block_reduce(sum, 0, |a, b| a + b);
        let block_max = block_reduce(max, 0, u32::max);
        if thread_idx_x() == 0 {
            let b = block_idx_x() as usize;
            // SAFETY: one element of each per block.
            unsafe {
                *sums.add(b) = block_sum;
                *maxima.add(b) = block_max;
            }
        }
    }
}

/// The work-efficient (Blelloch) exclusive scan of GPU Gems 3, chapter 39: an up-sweep and a
/// down-sweep over a block's shared array, with the chapter's bank-conflict padding chosen by a
/// const-generic flag.
#[offload_rt::kernels]
pub mod blelloch {
    use offload_rt::kernel::{block_idx_x, kernel, sync_threads, thread_idx_x};
    use offload_rt::shared_array;

    /// Elements per block of [`prescan`]; its blocks have half as many threads.
    pub const SCAN_ELEMS: usize = 1024;

    /// The shared slot of element `i`: one word of padding every 32 words when `PADDED` (the
    /// chapter's `CONFLICT_FREE_OFFSET`).
    fn slot<const PADDED: bool>(i: usize) -> usize {
        if PADDED { i + (i >> 5) } else { i }
    }

    /// The reduction phase over `n` elements of `temp`; returns the final offset, `n`.
    fn up_sweep<const PADDED: bool>(temp: *mut u32, n: usize, thid: usize) -> usize {
        let mut offset = 1;
        let mut d = n >> 1;
        while d > 0 {
            sync_threads();
            if thid < d {
                let ai = slot::<PADDED>(offset * (2 * thid + 1) - 1);
                let bi = slot::<PADDED>(offset * (2 * thid + 2) - 1);
                // SAFETY: `ai`, `bi` are slots of elements below `n`, inside `temp`.
                unsafe { *temp.add(bi) += *temp.add(ai) };
            }
            offset *= 2;
            d >>= 1;
        }
        offset
    }

    /// The down-sweep phase from `offset` (what [`up_sweep`] returned), the last element
    /// already zeroed; ends with a barrier, after which `temp` holds the exclusive scan.
    fn down_sweep<const PADDED: bool>(temp: *mut u32, n: usize, thid: usize, offset: usize) {
        let mut offset = offset;
        let mut d = 1;
        while d < n {
            offset >>= 1;
            sync_threads();
            if thid < d {
                let ai = slot::<PADDED>(offset * (2 * thid + 1) - 1);
                let bi = slot::<PADDED>(offset * (2 * thid + 2) - 1);
                // SAFETY: as in `up_sweep`.
                unsafe {
                    let t = *temp.add(ai);
                    *temp.add(ai) = *temp.add(bi);
                    *temp.add(bi) += t;
                }
            }
            d *= 2;
        }
        sync_threads();
    }

    /// Each block's exclusive scan of its [`SCAN_ELEMS`] elements of `input` into `output`,
    /// and its total into `block_sums` (the chapter's `prescan` with the sums array of its
    /// multi-block version). Launch `len / SCAN_ELEMS` blocks of `SCAN_ELEMS / 2` threads.
    #[kernel]
    pub fn prescan(input: *const u32, output: *mut u32, block_sums: *mut u32) {
        const N: usize = SCAN_ELEMS;
        let temp: *mut u32 = shared_array!(u32, SCAN_ELEMS + SCAN_ELEMS / 32);
        let thid = thread_idx_x() as usize;
        let base = block_idx_x() as usize * N;
        let (ai, bi) = (thid, thid + N / 2);
        // SAFETY: the block's elements are inside `input`; the padded slots inside `temp`.
        unsafe {
            *temp.add(slot::<true>(ai)) = *input.add(base + ai);
            *temp.add(slot::<true>(bi)) = *input.add(base + bi);
        }
        let offset = up_sweep::<true>(temp, N, thid);
        if thid == 0 {
            let last = slot::<true>(N - 1);
            // SAFETY: thread 0 wrote the last slot itself in the up-sweep's last step;
            // one element of `block_sums` per block.
            unsafe {
                *block_sums.add(block_idx_x() as usize) = *temp.add(last);
                *temp.add(last) = 0;
            }
        }
        down_sweep::<true>(temp, N, thid, offset);
        // SAFETY: as above; the down-sweep ended with a barrier.
        unsafe {
            *output.add(base + ai) = *temp.add(slot::<true>(ai));
            *output.add(base + bi) = *temp.add(slot::<true>(bi));
        }
    }
}

/// The CUDA samples' `shfl_scan`: an inclusive prefix sum per block from warp scans
/// (`shuffle_up` in a function), the warps' totals scanned by the first warp.
#[offload_rt::kernels]
pub mod warp_scan {
    use offload_rt::kernel::{
        block_dim_x, block_idx_x, global_idx_x, kernel, lane_id, shuffle_up, sync_threads,
        thread_idx_x, warp_id, warp_size, warps_per_block,
    };
    use offload_rt::shared_array;

    /// Threads per block of [`shfl_scan`].
    pub const SCAN_BLOCK: u32 = 256;

    /// The inclusive scan of the warp's values (Hillis–Steele with `shuffle_up`).
    fn warp_scan(value: u32) -> u32 {
        let lane = lane_id();
        let mut value = value;
        let mut delta = 1;
        while delta < warp_size() {
            let n = shuffle_up(value, delta);
            if lane >= delta {
                value += n;
            }
            delta *= 2;
        }
        value
    }

    /// `out[i]` = the sum of `data` from the start of `i`'s block through `i`, and
    /// `block_sums[b]` block `b`'s total. Launch `n / SCAN_BLOCK` blocks of [`SCAN_BLOCK`]
    /// threads (`n` a multiple of it).
    #[kernel]
    pub fn shfl_scan(n: u32, data: *const u32, out: *mut u32, block_sums: *mut u32) {
        let sums: *mut u32 = shared_array!(u32, 32);
        let i = global_idx_x();
        let inside = i < n as usize;
        let value = if inside {
            // SAFETY: `i < n`, `data`'s length.
            unsafe { *data.add(i) }
        } else {
            0
        };
        let lane = lane_id();
        let warp = warp_id() as usize;
        let mut value = warp_scan(value);
        if lane == warp_size() - 1 {
            // SAFETY: at most 32 warps, the array's length.
            unsafe { *sums.add(warp) = value };
        }
        sync_threads();
        if warp == 0 {
            let mine = if lane < warps_per_block() {
                // SAFETY: each warp wrote its slot before the barrier.
                unsafe { *sums.add(lane as usize) }
            } else {
                0
            };
            let scanned = warp_scan(mine);
            if lane < warps_per_block() {
                // SAFETY: as above; the warp read every slot in the scan's first shuffle.
                unsafe { *sums.add(lane as usize) = scanned };
            }
        }
        sync_threads();
        if warp > 0 {
            // SAFETY: written by the first warp before the barrier.
            value += unsafe { *sums.add(warp - 1) };
        }
        if !inside {
            return;
        }
        // SAFETY: `i < n`, `out`'s length.
        unsafe { *out.add(i) = value };
        if thread_idx_x() == block_dim_x() - 1 {
            // SAFETY: one element of `block_sums` per block.
            unsafe { *block_sums.add(block_idx_x() as usize) = value };
        }
    }
}

/// The CUDA samples' 256-bin histogram: per-block bins in shared memory, declared in the
/// function that fills them, with shared atomics, then merged with one global atomic per bin.
#[offload_rt::kernels]
pub mod histogram {
    use core::sync::atomic::{AtomicU32, Ordering};

    use offload_rt::kernel::{block_dim_x, grid_stride_x, kernel, sync_threads, thread_idx_x};
    use offload_rt::shared_array;

    /// Bins of [`histogram256`].
    pub const BINS: usize = 256;

    /// Adds one to shared bin `bin` atomically.
    fn add_byte(bins: *mut u32, bin: u32) {
        // SAFETY: `bin < 256`, the bins' length; they are accessed only atomically meanwhile.
        unsafe { AtomicU32::from_ptr(bins.add(bin as usize)) }.fetch_add(1, Ordering::Relaxed);
    }

    /// The block's counts of the four bytes of each word it visits in a grid-stride loop
    /// over `data[..n]`, in a shared array of [`BINS`] counts declared here; all counted when
    /// this returns.
    fn block_histogram(n: usize, data: *const u32) -> *mut u32 {
        let bins: *mut u32 = shared_array!(u32, 256);
        let mut b = thread_idx_x() as usize;
        while b < BINS {
            // SAFETY: `b < BINS`.
            unsafe { *bins.add(b) = 0 };
            b += block_dim_x() as usize;
        }
        sync_threads();
        for i in grid_stride_x(n) {
            // SAFETY: `i < n`, `data`'s length.
            let word = unsafe { *data.add(i) };
            add_byte(bins, word & 0xff);
            add_byte(bins, (word >> 8) & 0xff);
            add_byte(bins, (word >> 16) & 0xff);
            add_byte(bins, word >> 24);
        }
        sync_threads();
        bins
    }

    /// Adds the block's non-zero counts to `global`, one atomic per bin.
    fn merge(local: *const u32, global: *mut u32) {
        let mut b = thread_idx_x() as usize;
        while b < BINS {
            // SAFETY: `b < BINS`, the length of both; `global` is accessed only atomically.
            unsafe {
                let count = *local.add(b);
                if count > 0 {
                    AtomicU32::from_ptr(global.add(b)).fetch_add(count, Ordering::Relaxed);
                }
            }
            b += block_dim_x() as usize;
        }
    }

    /// Counts the bytes of `data[..n]` (four per word) into [`BINS`] `bins`, zeroed by the
    /// caller. Any 1-D launch (the benchmark: 64 blocks of 256 threads).
    #[kernel]
    pub fn histogram256(n: u32, data: *const u32, bins: *mut u32) {
        let local = block_histogram(n as usize, data);
        merge(local, bins);
    }
}

/// A 2-D Jacobi step through a shared tile whose halo the block's edge threads load, in a
/// function that ends with the barrier.
#[offload_rt::kernels]
pub mod jacobi {
    use offload_rt::kernel::{
        block_idx_x, block_idx_y, kernel, sync_threads, thread_idx_x, thread_idx_y,
    };
    use offload_rt::shared_array;

    /// Block edge of [`jacobi5`].
    pub const JACOBI_TILE: usize = 16;
    const PITCH: usize = JACOBI_TILE + 2;

    /// Stages cell `(row, col)` of the `n × n` grid at its slot of `tile` (18 × 18), and the
    /// halo next to it where this thread is on the block's edge; returns after the barrier.
    fn load_tile_with_halo(tile: *mut f32, input: *const f32, n: usize, row: usize, col: usize) {
        let tx = thread_idx_x() as usize;
        let ty = thread_idx_y() as usize;
        let s = (ty + 1) * PITCH + tx + 1;
        if row < n && col < n {
            let g = row * n + col;
            // SAFETY: `row, col < n`: `g` and each neighbour read under its check are inside
            // `input`; every slot is inside the 18 × 18 tile.
            unsafe {
                *tile.add(s) = *input.add(g);
                if tx == 0 && col > 0 {
                    *tile.add(s - 1) = *input.add(g - 1);
                }
                if tx == JACOBI_TILE - 1 && col + 1 < n {
                    *tile.add(s + 1) = *input.add(g + 1);
                }
                if ty == 0 && row > 0 {
                    *tile.add(s - PITCH) = *input.add(g - n);
                }
                if ty == JACOBI_TILE - 1 && row + 1 < n {
                    *tile.add(s + PITCH) = *input.add(g + n);
                }
            }
        }
        sync_threads();
    }

    /// One Jacobi step on an `n × n` row-major grid: an interior cell becomes
    /// `0.25 * (((up + left) + right) + down)`, the border cells are copied. Launch
    /// `(n / 16, n / 16)` blocks (rounded up) of `(16, 16)` threads.
    #[kernel]
    pub fn jacobi5(n: u32, input: *const f32, output: *mut f32) {
        let tile: *mut f32 = shared_array!(f32, 18 * 18);
        let n = n as usize;
        let row = block_idx_y() as usize * JACOBI_TILE + thread_idx_y() as usize;
        let col = block_idx_x() as usize * JACOBI_TILE + thread_idx_x() as usize;
        load_tile_with_halo(tile, input, n, row, col);
        if row >= n || col >= n {
            return;
        }
        let s = (thread_idx_y() as usize + 1) * PITCH + thread_idx_x() as usize + 1;
        // SAFETY: `row, col < n`; the slot was written before the barrier.
        let centre = unsafe { *tile.add(s) };
        if row == 0 || col == 0 || row == n - 1 || col == n - 1 {
            // SAFETY: `row * n + col < n * n`, `output`'s length.
            unsafe { *output.add(row * n + col) = centre };
            return;
        }
        // SAFETY: an interior cell's four neighbours are in the grid, staged before the
        // barrier by their threads or as halo; `row * n + col` is inside `output`.
        unsafe {
            let up = *tile.add(s - PITCH);
            let left = *tile.add(s - 1);
            let right = *tile.add(s + 1);
            let down = *tile.add(s + PITCH);
            *output.add(row * n + col) = 0.25 * (((up + left) + right) + down);
        }
    }
}

/// Rodinia's `hotspot`: `pyramid_height` steps of the thermal stencil per launch inside each
/// block's shared tiles, with Rodinia's `IN_RANGE` macro as a closure, a closure for the tile
/// index, and a `break` out of the loop that holds the barriers.
#[offload_rt::kernels]
pub mod hotspot {
    use offload_rt::kernel::{
        block_idx_x, block_idx_y, kernel, sync_threads, thread_idx_x, thread_idx_y,
    };
    use offload_rt::shared_array;

    /// Block edge of [`calculate_temp`].
    pub const HOTSPOT_BLOCK: i32 = 16;

    /// Ambient temperature of Rodinia's model.
    pub const AMB_TEMP: f32 = 80.0;

    /// Rodinia's update of one cell from its temperature, power and four neighbours:
    /// `t + step_div_cap * (((p + ((s + n) - 2t) * ry_1) + ((e + w) - 2t) * rx_1) +
    /// (amb - t) * rz_1)`, in that order.
    fn cell_update(t: f32, p: f32, n: f32, s: f32, e: f32, w: f32, k: [f32; 4]) -> f32 {
        let [step_div_cap, rx_1, ry_1, rz_1] = k;
        t + step_div_cap
            * (p + (s + n - 2.0 * t) * ry_1 + (e + w - 2.0 * t) * rx_1 + (AMB_TEMP - t) * rz_1)
    }

    /// `iteration` steps of Rodinia's thermal stencil from `temp_src` into `temp_dst`
    /// (`grid_rows × grid_cols`, row-major; a neighbour past the grid's edge is the cell
    /// itself). Each block of `(16, 16)` threads loads a 16 × 16 tile whose border is
    /// `iteration` cells wide, steps it `iteration` times in shared memory (two barriers per
    /// step), and writes its inner `(16 - 2·iteration)²` cells. Launch
    /// `(cols.div_ceil(16 - 2·iteration), rows.div_ceil(16 - 2·iteration))` blocks, with
    /// `border_cols = border_rows = iteration`, as Rodinia does.
    #[kernel]
    #[allow(clippy::too_many_arguments, reason = "Rodinia's kernel signature")]
    pub fn calculate_temp(
        iteration: i32,
        power: *const f32,
        temp_src: *const f32,
        temp_dst: *mut f32,
        grid_cols: i32,
        grid_rows: i32,
        border_cols: i32,
        border_rows: i32,
        cap: f32,
        rx: f32,
        ry: f32,
        rz: f32,
        step: f32,
    ) {
        const BS: i32 = HOTSPOT_BLOCK;
        let temp_on_cuda: *mut f32 = shared_array!(f32, 256);
        let power_on_cuda: *mut f32 = shared_array!(f32, 256);
        let temp_t: *mut f32 = shared_array!(f32, 256);
        let in_range = |x: i32, min: i32, max: i32| x >= min && x <= max;
        let at = |r: i32, c: i32| (r * BS + c) as usize;

        let bx = block_idx_x() as i32;
        let by = block_idx_y() as i32;
        let tx = thread_idx_x() as i32;
        let ty = thread_idx_y() as i32;
        let step_div_cap = step / cap;
        let k = [step_div_cap, 1.0 / rx, 1.0 / ry, 1.0 / rz];

        let small_block_rows = BS - iteration * 2;
        let small_block_cols = BS - iteration * 2;
        let blk_y = small_block_rows * by - border_rows;
        let blk_x = small_block_cols * bx - border_cols;
        let blk_y_max = blk_y + BS - 1;
        let blk_x_max = blk_x + BS - 1;
        let yidx = blk_y + ty;
        let xidx = blk_x + tx;
        let index = grid_cols * yidx + xidx;
        if in_range(yidx, 0, grid_rows - 1) && in_range(xidx, 0, grid_cols - 1) {
            // SAFETY: `(yidx, xidx)` is inside the grid; `at(ty, tx) < 256`.
            unsafe {
                *temp_on_cuda.add(at(ty, tx)) = *temp_src.add(index as usize);
                *power_on_cuda.add(at(ty, tx)) = *power.add(index as usize);
            }
        }
        sync_threads();

        let valid_y_min = if blk_y < 0 { -blk_y } else { 0 };
        let valid_y_max = if blk_y_max > grid_rows - 1 {
            BS - 1 - (blk_y_max - grid_rows + 1)
        } else {
            BS - 1
        };
        let valid_x_min = if blk_x < 0 { -blk_x } else { 0 };
        let valid_x_max = if blk_x_max > grid_cols - 1 {
            BS - 1 - (blk_x_max - grid_cols + 1)
        } else {
            BS - 1
        };
        let n = (ty - 1).max(valid_y_min);
        let s = (ty + 1).min(valid_y_max);
        let w = (tx - 1).max(valid_x_min);
        let e = (tx + 1).min(valid_x_max);

        let mut computed = false;
        let mut i = 0;
        while i < iteration {
            computed = false;
            if in_range(tx, i + 1, BS - i - 2)
                && in_range(ty, i + 1, BS - i - 2)
                && in_range(tx, valid_x_min, valid_x_max)
                && in_range(ty, valid_y_min, valid_y_max)
            {
                computed = true;
                // SAFETY: every index is a cell of the 16 × 16 tiles; the neighbours are
                // clamped to the part of the tile inside the grid, loaded or stepped before
                // the barrier.
                unsafe {
                    *temp_t.add(at(ty, tx)) = cell_update(
                        *temp_on_cuda.add(at(ty, tx)),
                        *power_on_cuda.add(at(ty, tx)),
                        *temp_on_cuda.add(at(n, tx)),
                        *temp_on_cuda.add(at(s, tx)),
                        *temp_on_cuda.add(at(ty, e)),
                        *temp_on_cuda.add(at(ty, w)),
                        k,
                    );
                }
            }
            sync_threads();
            if i == iteration - 1 {
                break;
            }
            if computed {
                // SAFETY: this thread's own cell.
                unsafe { *temp_on_cuda.add(at(ty, tx)) = *temp_t.add(at(ty, tx)) };
            }
            sync_threads();
            i += 1;
        }
        if computed {
            // SAFETY: a cell computed in the last step is inside the grid.
            unsafe { *temp_dst.add(index as usize) = *temp_t.add(at(ty, tx)) };
        }
    }
}

/// The CUDA samples' `transposeNoBankConflicts`: a 32 × 32 tile (33 columns) staged by a
/// function that ends with the barrier, each thread moving four elements.
#[offload_rt::kernels]
pub mod transpose {
    use offload_rt::kernel::{
        block_idx_x, block_idx_y, kernel, sync_threads, thread_idx_x, thread_idx_y,
    };
    use offload_rt::shared_array;

    /// Tile edge of [`transpose_no_bank_conflicts`].
    pub const TILE_DIM: usize = 32;
    /// Block height of [`transpose_no_bank_conflicts`]: blocks of `TILE_DIM × BLOCK_ROWS`.
    pub const BLOCK_ROWS: usize = 8;

    /// Copies the block's tile of `idata` (`width` columns) into `tile`, then waits for the
    /// block.
    fn stage_tile(tile: *mut f32, idata: *const f32, width: usize) {
        let tx = thread_idx_x() as usize;
        let ty = thread_idx_y() as usize;
        let x = block_idx_x() as usize * TILE_DIM + tx;
        let y = block_idx_y() as usize * TILE_DIM + ty;
        for j in (0..TILE_DIM).step_by(BLOCK_ROWS) {
            // SAFETY: the matrix's sides are multiples of the tile; the slot is inside the
            // 32 × 33 tile.
            unsafe { *tile.add((ty + j) * (TILE_DIM + 1) + tx) = *idata.add((y + j) * width + x) };
        }
        sync_threads();
    }

    /// `odata = idataᵀ`: `idata` is `height × width`, `odata` `width × height`, both
    /// row-major, the sides multiples of [`TILE_DIM`]. Launch `(width / 32, height / 32)`
    /// blocks of `(32, 8)` threads.
    #[kernel]
    pub fn transpose_no_bank_conflicts(
        width: u32,
        height: u32,
        idata: *const f32,
        odata: *mut f32,
    ) {
        let tile: *mut f32 = shared_array!(f32, 32 * 33);
        let (width, height) = (width as usize, height as usize);
        stage_tile(tile, idata, width);
        let tx = thread_idx_x() as usize;
        let ty = thread_idx_y() as usize;
        let x = block_idx_y() as usize * TILE_DIM + tx;
        let y = block_idx_x() as usize * TILE_DIM + ty;
        for j in (0..TILE_DIM).step_by(BLOCK_ROWS) {
            // SAFETY: inside `odata` as above; the slot was staged before the barrier.
            unsafe { *odata.add((y + j) * height + x) = *tile.add(tx * (TILE_DIM + 1) + ty + j) };
        }
    }
}

/// The CUDA samples' `matrixMul` (`template <int BLOCK_SIZE> MatrixMulCUDA`), its tile loads
/// and barrier in a function generic over the element type and the tile size.
#[offload_rt::kernels]
pub mod matrix_mul {
    use offload_rt::kernel::{
        block_idx_x, block_idx_y, kernel, sync_threads, thread_idx_x, thread_idx_y,
    };
    use offload_rt::shared_array;

    /// Tile edge of [`matrix_mul_cuda`].
    pub const MM_BLOCK: usize = 16;

    /// Loads this thread's element of the `BS × BS` tiles of `a` (row pitch `wa`) and `b`
    /// (row pitch `wb`) whose first elements `a` and `b` point at, then waits for the block.
    fn load_tiles<T: Copy, const BS: usize>(
        as_tile: *mut T,
        bs_tile: *mut T,
        a: *const T,
        b: *const T,
        wa: usize,
        wb: usize,
    ) {
        let tx = thread_idx_x() as usize;
        let ty = thread_idx_y() as usize;
        // SAFETY: the tiles lie inside the matrices (sides multiples of `BS`); `ty * BS + tx`
        // is inside the `BS × BS` tiles.
        unsafe {
            *as_tile.add(ty * BS + tx) = *a.add(wa * ty + tx);
            *bs_tile.add(ty * BS + tx) = *b.add(wb * ty + tx);
        }
        sync_threads();
    }

    /// `c = a · b`, `a` of `ha × wa`, `b` of `wa × wb`, all row-major with sides multiples of
    /// [`MM_BLOCK`]; each element `acc = acc + a[row][k] * b[k][col]` for `k` in order from
    /// `0.0`. Launch `(wb / 16, ha / 16)` blocks of `(16, 16)` threads.
    #[kernel]
    pub fn matrix_mul_cuda(c: *mut f32, a: *const f32, b: *const f32, wa: u32, wb: u32) {
        const BS: usize = MM_BLOCK;
        let as_tile: *mut f32 = shared_array!(f32, 256);
        let bs_tile: *mut f32 = shared_array!(f32, 256);
        let (wa, wb) = (wa as usize, wb as usize);
        let bx = block_idx_x() as usize;
        let by = block_idx_y() as usize;
        let tx = thread_idx_x() as usize;
        let ty = thread_idx_y() as usize;
        let a_begin = wa * BS * by;
        let a_end = a_begin + wa - 1;
        let a_step = BS;
        let b_begin = BS * bx;
        let b_step = BS * wb;
        let mut csub = 0.0f32;
        let mut ia = a_begin;
        let mut ib = b_begin;
        while ia <= a_end {
            load_tiles::<f32, BS>(
                as_tile,
                bs_tile,
                a.wrapping_add(ia),
                b.wrapping_add(ib),
                wa,
                wb,
            );
            for k in 0..BS {
                // SAFETY: inside the tiles, loaded before the barrier.
                csub += unsafe { *as_tile.add(ty * BS + k) * *bs_tile.add(k * BS + tx) };
            }
            sync_threads();
            ia += a_step;
            ib += b_step;
        }
        // SAFETY: the element of `c` this thread computes.
        unsafe { *c.add(wb * BS * by + BS * bx + wb * ty + tx) = csub };
    }
}

/// The CUDA samples' `nbody`: each block stages a tile of positions in shared memory (a
/// function with the barrier), every thread accumulates its body's acceleration from the
/// tile in another function, and a barrier ends each tile.
#[offload_rt::kernels]
pub mod nbody {
    use offload_rt::kernel::{block_dim_x, global_idx_x, kernel, math, sync_threads, thread_idx_x};
    use offload_rt::shared_array;

    /// Threads per block of [`compute_body_accel`], and bodies per tile.
    pub const NBODY_BLOCK: u32 = 256;
    /// The softening term added to every squared distance.
    pub const SOFTENING_SQUARED: f32 = 0.01;

    /// `ai` plus body `bj`'s pull on body `bi` (`[x, y, z, mass]`): `r = bj - bi`,
    /// `s = m_j / (|r|² + ε²)^{3/2}` as `rsqrt` cubed, `ai + r * s`, in that order.
    fn body_body_interaction(ai: [f32; 3], bi: [f32; 4], bj: [f32; 4]) -> [f32; 3] {
        let r = [bj[0] - bi[0], bj[1] - bi[1], bj[2] - bi[2]];
        let dist_sqr = r[0] * r[0] + r[1] * r[1] + r[2] * r[2] + SOFTENING_SQUARED;
        let inv_dist = math::rsqrt(dist_sqr);
        let inv_dist_cube = inv_dist * inv_dist * inv_dist;
        let s = bj[3] * inv_dist_cube;
        [ai[0] + r[0] * s, ai[1] + r[1] * s, ai[2] + r[2] * s]
    }

    /// Copies body `tile * blockDim + thread` of `pos` into the shared tile, then waits for the
    /// block.
    fn load_positions(shared_pos: *mut f32, pos: *const f32, tile: usize) {
        let t = thread_idx_x() as usize;
        let j = tile * block_dim_x() as usize + t;
        for c in 0..4 {
            // SAFETY: body `j` is inside `pos` (4 floats a body); slot `t` inside the tile.
            unsafe { *shared_pos.add(4 * t + c) = *pos.add(4 * j + c) };
        }
        sync_threads();
    }

    /// `acc` plus the pull of the tile's bodies on `my_pos`, in the tile's order.
    fn tile_calculation(my_pos: [f32; 4], acc: [f32; 3], shared_pos: *const f32) -> [f32; 3] {
        let mut acc = acc;
        for j in 0..block_dim_x() as usize {
            // SAFETY: `j < blockDim <= NBODY_BLOCK`, a body of the tile.
            let bj = unsafe {
                [
                    *shared_pos.add(4 * j),
                    *shared_pos.add(4 * j + 1),
                    *shared_pos.add(4 * j + 2),
                    *shared_pos.add(4 * j + 3),
                ]
            };
            acc = body_body_interaction(acc, my_pos, bj);
        }
        acc
    }

    /// `accel[i] = Σ_j m_j (p_j - p_i) / (|p_j - p_i|² + ε²)^{3/2}` for `j = 0 … n - 1` in
    /// order (positions and results `[x, y, z, w]`, `w` the mass in `pos` and 0 in `accel`).
    /// Launch `n / NBODY_BLOCK` blocks of [`NBODY_BLOCK`] threads (`n` a multiple of it).
    #[kernel]
    pub fn compute_body_accel(n: u32, pos: *const f32, accel: *mut f32) {
        let shared_pos: *mut f32 = shared_array!(f32, 4 * NBODY_BLOCK as usize);
        let i = global_idx_x();
        // SAFETY: body `i` is inside `pos` (the grid covers the `n` bodies exactly).
        let my_pos = unsafe {
            [
                *pos.add(4 * i),
                *pos.add(4 * i + 1),
                *pos.add(4 * i + 2),
                *pos.add(4 * i + 3),
            ]
        };
        let mut acc = [0.0f32; 3];
        for tile in 0..n as usize / block_dim_x() as usize {
            load_positions(shared_pos, pos, tile);
            acc = tile_calculation(my_pos, acc, shared_pos);
            sync_threads();
        }
        // SAFETY: body `i` is inside `accel`.
        unsafe {
            *accel.add(4 * i) = acc[0];
            *accel.add(4 * i + 1) = acc[1];
            *accel.add(4 * i + 2) = acc[2];
            *accel.add(4 * i + 3) = 0.0;
        }
    }
}

/// One k-means step as Rodinia's `kmeansPoint` does it, with each block's partial sums per
/// cluster in shared memory: centroids staged in shared memory by a function with the
/// barrier, the nearest centroid chosen with a closure and a `match`.
#[offload_rt::kernels]
pub mod kmeans {
    use core::cmp::Ordering;
    use core::sync::atomic::{AtomicI32, AtomicU32, Ordering as Mem};

    use offload_rt::kernel::{block_idx_x, global_idx_x, kernel, sync_threads, thread_idx_x};
    use offload_rt::shared_array;

    /// Clusters.
    pub const CLUSTERS: usize = 16;
    /// Coordinates per point (integers).
    pub const DIMS: usize = 4;
    /// Threads per block of [`kmeans_assign`].
    pub const KMEANS_BLOCK: u32 = 256;

    /// Copies the `CLUSTERS × DIMS` centroids into shared memory, then waits for the block.
    fn load_centroids(shared: *mut i32, centroids: *const i32) {
        let t = thread_idx_x() as usize;
        if t < CLUSTERS * DIMS {
            // SAFETY: `t` is inside both.
            unsafe { *shared.add(t) = *centroids.add(t) };
        }
        sync_threads();
    }

    /// The index of the centroid nearest `point` (squared distance; the lowest index on a
    /// tie).
    fn nearest(point: [i32; DIMS], centroids: *const i32) -> usize {
        let distance = |k: usize| {
            let mut d = 0i32;
            for (j, p) in point.iter().enumerate() {
                // SAFETY: `k < CLUSTERS`, `j < DIMS`: inside the centroids.
                let diff = p - unsafe { *centroids.add(k * DIMS + j) };
                d += diff * diff;
            }
            d
        };
        let mut best = (0, distance(0));
        for k in 1..CLUSTERS {
            let d = distance(k);
            best = match d.cmp(&best.1) {
                Ordering::Less => (k, d),
                Ordering::Equal | Ordering::Greater => best,
            };
        }
        best.0
    }

    /// `membership[i]` = the centroid nearest point `i` of `points[..n]` (`DIMS` coordinates a
    /// point), and per block `b` the coordinate sums `partial_sums[b][k][..]` and counts
    /// `partial_counts[b][k]` of its points in each cluster `k` (shared atomics, then one plain
    /// store per word). Launch `n.div_ceil(KMEANS_BLOCK)` blocks of [`KMEANS_BLOCK`] threads.
    #[kernel]
    pub fn kmeans_assign(
        n: u32,
        points: *const i32,
        centroids: *const i32,
        membership: *mut u32,
        partial_sums: *mut i32,
        partial_counts: *mut u32,
    ) {
        let shared_centroids: *mut i32 = shared_array!(i32, CLUSTERS * DIMS);
        let sums: *mut i32 = shared_array!(i32, CLUSTERS * DIMS);
        let counts: *mut u32 = shared_array!(u32, CLUSTERS);
        let t = thread_idx_x() as usize;
        if t < CLUSTERS * DIMS {
            // SAFETY: `t` is inside `sums`.
            unsafe { *sums.add(t) = 0 };
        }
        if t < CLUSTERS {
            // SAFETY: `t` is inside `counts`.
            unsafe { *counts.add(t) = 0 };
        }
        load_centroids(shared_centroids, centroids);
        let i = global_idx_x();
        if i < n as usize {
            // SAFETY: point `i` is inside `points`.
            let point = unsafe { [0, 1, 2, 3].map(|j| *points.add(i * DIMS + j)) };
            let k = nearest(point, shared_centroids);
            // SAFETY: `i` is inside `membership`; `k < CLUSTERS`, so the shared words are
            // inside `sums` and `counts`, accessed only atomically until the barrier.
            unsafe {
                *membership.add(i) = k as u32;
                for (j, p) in point.iter().enumerate() {
                    AtomicI32::from_ptr(sums.add(k * DIMS + j)).fetch_add(*p, Mem::Relaxed);
                }
                AtomicU32::from_ptr(counts.add(k)).fetch_add(1, Mem::Relaxed);
            }
        }
        sync_threads();
        let b = block_idx_x() as usize;
        if t < CLUSTERS * DIMS {
            // SAFETY: one row of `CLUSTERS * DIMS` words per block.
            unsafe { *partial_sums.add(b * CLUSTERS * DIMS + t) = *sums.add(t) };
        }
        if t < CLUSTERS {
            // SAFETY: one row of `CLUSTERS` words per block.
            unsafe { *partial_counts.add(b * CLUSTERS + t) = *counts.add(t) };
        }
    }
}

/// The CUDA samples' `bitonicSortShared` (sortingNetworks): a block sorts 1,024 key–value
/// pairs in shared memory, the network's nested loops with their barriers in a const-generic
/// function.
#[offload_rt::kernels]
pub mod sorting_networks {
    use offload_rt::kernel::{block_idx_x, kernel, sync_threads, thread_idx_x};
    use offload_rt::shared_array;

    /// Pairs a block sorts; its blocks have half as many threads.
    pub const SHARED_SIZE_LIMIT: usize = 1024;

    /// Orders pairs `a` and `b` of the shared arrays: swapped when `(key_a > key_b) == dir`.
    fn comparator(keys: *mut u32, vals: *mut u32, a: usize, b: usize, dir: bool) {
        // SAFETY: `a`, `b` are inside the arrays; no other thread touches them in this step.
        unsafe {
            if (*keys.add(a) > *keys.add(b)) == dir {
                core::ptr::swap(keys.add(a), keys.add(b));
                core::ptr::swap(vals.add(a), vals.add(b));
            }
        }
    }

    /// Sorts the `N` pairs of `keys`/`vals` (`N / 2` threads), ascending when `dir`: bitonic
    /// merges of growing size, a barrier before every step; ends with a barrier.
    fn sort_block<const N: usize>(keys: *mut u32, vals: *mut u32, dir: bool) {
        let tid = thread_idx_x() as usize;
        let mut size = 2;
        while size < N {
            let ddd = dir ^ ((tid & (size / 2)) != 0);
            let mut stride = size / 2;
            while stride > 0 {
                sync_threads();
                let pos = 2 * tid - (tid & (stride - 1));
                comparator(keys, vals, pos, pos + stride, ddd);
                stride >>= 1;
            }
            size <<= 1;
        }
        let mut stride = N / 2;
        while stride > 0 {
            sync_threads();
            let pos = 2 * tid - (tid & (stride - 1));
            comparator(keys, vals, pos, pos + stride, dir);
            stride >>= 1;
        }
        sync_threads();
    }

    /// Sorts each block's [`SHARED_SIZE_LIMIT`] pairs of `src_key`/`src_val` into
    /// `dst_key`/`dst_val`, ascending when `dir` is 1. Launch `len / SHARED_SIZE_LIMIT`
    /// blocks of `SHARED_SIZE_LIMIT / 2` threads.
    #[kernel]
    pub fn bitonic_sort_shared(
        dst_key: *mut u32,
        dst_val: *mut u32,
        src_key: *const u32,
        src_val: *const u32,
        dir: u32,
    ) {
        const HALF: usize = SHARED_SIZE_LIMIT / 2;
        let s_key: *mut u32 = shared_array!(u32, SHARED_SIZE_LIMIT);
        let s_val: *mut u32 = shared_array!(u32, SHARED_SIZE_LIMIT);
        let t = thread_idx_x() as usize;
        let base = block_idx_x() as usize * SHARED_SIZE_LIMIT + t;
        // SAFETY: the block's pairs are inside the buffers; `t + HALF < SHARED_SIZE_LIMIT`.
        unsafe {
            *s_key.add(t) = *src_key.add(base);
            *s_val.add(t) = *src_val.add(base);
            *s_key.add(t + HALF) = *src_key.add(base + HALF);
            *s_val.add(t + HALF) = *src_val.add(base + HALF);
        }
        sort_block::<SHARED_SIZE_LIMIT>(s_key, s_val, dir != 0);
        // SAFETY: as above; sorted before `sort_block`'s last barrier.
        unsafe {
            *dst_key.add(base) = *s_key.add(t);
            *dst_val.add(base) = *s_val.add(t);
            *dst_key.add(base + HALF) = *s_key.add(t + HALF);
            *dst_val.add(base + HALF) = *s_val.add(t + HALF);
        }
    }
}
