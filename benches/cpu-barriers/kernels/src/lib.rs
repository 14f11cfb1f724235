//! Kernels with block barriers for `benches/cpu-barriers`.
//!
//! All are written in a structured style: every `sync_threads()` is a statement of the kernel
//! body, or of the body of a loop or `if` that is itself such a statement, with a condition the
//! same for every thread of the block; no `return`, no `break`/`continue` out of a loop holding
//! a barrier, no warp operations, no barrier inside a helper function.
#![no_std]

use core::sync::atomic::{AtomicU32, Ordering};

use offload_rt::kernel::{
    block_dim_x, block_idx_x, block_idx_y, block_idx_z, grid_stride_x, sync_threads, thread_idx_x,
    thread_idx_y,
};
use offload_rt::{kernel, shared_array};

/// Tile edge of [`matmul_tiled`] and [`stencil5`]: blocks of `TILE × TILE` threads.
pub const TILE: u32 = 16;

/// Tile edge of [`transpose_tiled`]: one block moves a `TRANSPOSE_TILE × TRANSPOSE_TILE` tile.
pub const TRANSPOSE_TILE: u32 = 32;

/// Block height of [`transpose_tiled`]: blocks of `TRANSPOSE_TILE × TRANSPOSE_ROWS` threads,
/// each thread moving `TRANSPOSE_TILE / TRANSPOSE_ROWS` elements.
pub const TRANSPOSE_ROWS: u32 = 8;

/// `c = a · b` for row-major `n × n` matrices, `n` a multiple of [`TILE`]. Launch a grid of
/// `(n / TILE, n / TILE)` blocks of `(TILE, TILE)` threads; thread `(x, y)` of block
/// `(bx, by)` computes `c[by * TILE + y][bx * TILE + x]`.
///
/// Each element is `acc = acc + a[row][k] * b[k][col]` for `k = 0, 1, …, n - 1` in that order,
/// starting from `0.0`, with no fused multiply-add: a sequential loop in the same order gives
/// the same bits.
#[kernel]
pub fn matmul_tiled(n: u32, a: *const f32, b: *const f32, c: *mut f32) {
    const T: usize = TILE as usize;
    let a_tile: *mut f32 = shared_array!(f32, 256);
    let b_tile: *mut f32 = shared_array!(f32, 256);
    let n = n as usize;
    let tx = thread_idx_x() as usize;
    let ty = thread_idx_y() as usize;
    let row = block_idx_y() as usize * T + ty;
    let col = block_idx_x() as usize * T + tx;
    let mut acc = 0.0f32;
    for step in 0..n / T {
        // SAFETY: `row`, `col` and `step * T + tx`, `step * T + ty` are below `n` (the grid
        // covers the matrix exactly), the matrices hold `n * n` elements, and `ty * T + tx`
        // is below 256, the tiles' length.
        unsafe {
            *a_tile.add(ty * T + tx) = *a.add(row * n + step * T + tx);
            *b_tile.add(ty * T + tx) = *b.add((step * T + ty) * n + col);
        }
        sync_threads();
        for k in 0..T {
            // SAFETY: `ty * T + k` and `k * T + tx` are below 256; the tiles were written
            // before the barrier.
            acc += unsafe { *a_tile.add(ty * T + k) * *b_tile.add(k * T + tx) };
        }
        sync_threads();
    }
    // SAFETY: `row * n + col < n * n`, `c`'s length.
    unsafe { *c.add(row * n + col) = acc };
}

/// `output = inputᵀ`: `input` is `rows × cols`, `output` `cols × rows`, both row-major.
/// Launch a grid of `(cols / 32, rows / 32)` blocks (rounded up) of `(32, 8)` threads: each
/// block moves one 32 × 32 tile through shared memory (padded to 33 columns, so that reading a
/// column does not hit one bank on a GPU), each thread four elements.
#[kernel]
pub fn transpose_tiled(rows: u32, cols: u32, input: *const f32, output: *mut f32) {
    const T: usize = TRANSPOSE_TILE as usize;
    const R: usize = TRANSPOSE_ROWS as usize;
    const PITCH: usize = T + 1;
    let tile: *mut f32 = shared_array!(f32, 32 * 33);
    let (rows, cols) = (rows as usize, cols as usize);
    let tx = thread_idx_x() as usize;
    let ty = thread_idx_y() as usize;
    let tile_col = block_idx_x() as usize * T;
    let tile_row = block_idx_y() as usize * T;
    for i in 0..T / R {
        let j = i * R;
        let (r, c) = (tile_row + ty + j, tile_col + tx);
        if r < rows && c < cols {
            // SAFETY: `r < rows`, `c < cols`: inside `input`; `(ty + j) * PITCH + tx` is below
            // 32 * 33, the tile's length.
            unsafe { *tile.add((ty + j) * PITCH + tx) = *input.add(r * cols + c) };
        }
    }
    sync_threads();
    for i in 0..T / R {
        let j = i * R;
        // Output element (r, c) is input element (c, r).
        let (r, c) = (tile_col + ty + j, tile_row + tx);
        if r < cols && c < rows {
            // SAFETY: `r < cols`, `c < rows`: inside `output`; `tx * PITCH + ty + j` is below
            // 32 * 33, and that slot was written before the barrier (input (c, r) is inside).
            unsafe { *output.add(r * rows + c) = *tile.add(tx * PITCH + ty + j) };
        }
    }
}

/// One step of a 5-point stencil on an `n × n` row-major grid: an interior cell becomes
/// `0.2 * (centre + left + right + up + down)`, summed in that order; the cells of the first
/// and last row and column are copied. Launch a grid of `(n / 16, n / 16)` blocks (rounded up)
/// of `(16, 16)` threads; each block stages an 18 × 18 tile (its cells and a one-cell halo,
/// without the corners, which a 5-point stencil does not read), the halo loaded by the block's
/// edge threads.
#[kernel]
pub fn stencil5(n: u32, input: *const f32, output: *mut f32) {
    const T: usize = TILE as usize;
    const PITCH: usize = T + 2;
    let tile: *mut f32 = shared_array!(f32, 18 * 18);
    let n = n as usize;
    let tx = thread_idx_x() as usize;
    let ty = thread_idx_y() as usize;
    let row = block_idx_y() as usize * T + ty;
    let col = block_idx_x() as usize * T + tx;
    let inside = row < n && col < n;
    // Tile slot of this thread's cell.
    let s = (ty + 1) * PITCH + tx + 1;
    if inside {
        let g = row * n + col;
        // SAFETY: `row, col < n`, so `g` and the neighbours read under their bounds checks are
        // inside `input` (`n * n` elements); every slot written is below 18 * 18.
        unsafe {
            *tile.add(s) = *input.add(g);
            if tx == 0 && col > 0 {
                *tile.add(s - 1) = *input.add(g - 1);
            }
            if tx == T - 1 && col + 1 < n {
                *tile.add(s + 1) = *input.add(g + 1);
            }
            if ty == 0 && row > 0 {
                *tile.add(s - PITCH) = *input.add(g - n);
            }
            if ty == T - 1 && row + 1 < n {
                *tile.add(s + PITCH) = *input.add(g + n);
            }
        }
    }
    sync_threads();
    if inside {
        let border = row == 0 || col == 0 || row == n - 1 || col == n - 1;
        // SAFETY: `row * n + col` is inside `output`; for an interior cell its four
        // neighbours are inside the grid, so each was written to its slot before the barrier,
        // by this block's thread for that cell or by an edge thread as halo.
        unsafe {
            *output.add(row * n + col) = if border {
                *tile.add(s)
            } else {
                0.2 * (*tile.add(s)
                    + *tile.add(s - 1)
                    + *tile.add(s + 1)
                    + *tile.add(s - PITCH)
                    + *tile.add(s + PITCH))
            };
        }
    }
}

/// Bins of [`histogram`].
pub const BINS: usize = 256;

/// Counts the low bytes of `data`'s `n` words into [`BINS`] `bins` (zeroed by the caller): each
/// block counts into shared bins with atomics, over a grid-stride loop, then adds its non-empty
/// bins to `bins` with one global atomic each. Any 1-D launch; counts are exact in any order.
#[kernel]
pub fn histogram(n: u32, data: *const u32, bins: *mut u32) {
    let local: *mut u32 = shared_array!(u32, 256);
    let tx = thread_idx_x() as usize;
    let mut b = tx;
    while b < BINS {
        // SAFETY: `b < BINS`, the shared bins' length.
        unsafe { *local.add(b) = 0 };
        b += block_dim_x() as usize;
    }
    sync_threads();
    for i in grid_stride_x(n as usize) {
        // SAFETY: `i < n`, `data`'s length; the low byte is below `BINS`; the shared bins are
        // accessed only atomically until the barrier.
        unsafe {
            let v = (*data.add(i) & 0xff) as usize;
            AtomicU32::from_ptr(local.add(v)).fetch_add(1, Ordering::Relaxed);
        }
    }
    sync_threads();
    let mut b = tx;
    while b < BINS {
        // SAFETY: `b < BINS`, the length of both; the shared counts are final after the
        // barrier, and `bins` is accessed only atomically during the launch.
        unsafe {
            let count = *local.add(b);
            if count > 0 {
                AtomicU32::from_ptr(bins.add(b)).fetch_add(count, Ordering::Relaxed);
            }
        }
        b += block_dim_x() as usize;
    }
}

/// One step of a 7-point stencil on an `n × n × n` grid (x fastest): an interior cell becomes
/// `(1/8) * (2 * centre + west + east + north + south + below + above)`, summed in that order;
/// the cells of the grid's faces are copied. Launch a grid of `(n / 16, n / 16, n)` blocks
/// (rounded up) of `(16, 16)` threads, one plane per block in z: each block stages its plane's
/// 18 × 18 tile (cells and a one-cell halo in x and y, loaded by the edge threads) in shared
/// memory and reads the cells below and above from the grid.
#[kernel]
pub fn stencil7(n: u32, input: *const f32, output: *mut f32) {
    const T: usize = TILE as usize;
    const PITCH: usize = T + 2;
    let tile: *mut f32 = shared_array!(f32, 18 * 18);
    let n = n as usize;
    let tx = thread_idx_x() as usize;
    let ty = thread_idx_y() as usize;
    let y = block_idx_y() as usize * T + ty;
    let x = block_idx_x() as usize * T + tx;
    let z = block_idx_z() as usize;
    let inside = x < n && y < n && z < n;
    let s = (ty + 1) * PITCH + tx + 1;
    let g = (z * n + y) * n + x;
    if inside {
        // SAFETY: `x, y, z < n`: `g` and the neighbours read under their bounds checks are
        // inside `input` (`n³` elements); every slot written is below 18 * 18.
        unsafe {
            *tile.add(s) = *input.add(g);
            if tx == 0 && x > 0 {
                *tile.add(s - 1) = *input.add(g - 1);
            }
            if tx == T - 1 && x + 1 < n {
                *tile.add(s + 1) = *input.add(g + 1);
            }
            if ty == 0 && y > 0 {
                *tile.add(s - PITCH) = *input.add(g - n);
            }
            if ty == T - 1 && y + 1 < n {
                *tile.add(s + PITCH) = *input.add(g + n);
            }
        }
    }
    sync_threads();
    if inside {
        let face = x == 0 || y == 0 || z == 0 || x == n - 1 || y == n - 1 || z == n - 1;
        // SAFETY: `g` is inside `output`; for an interior cell its six neighbours are inside
        // the grid: those in the plane were written to their slots before the barrier, those
        // below and above are read from `input`.
        unsafe {
            *output.add(g) = if face {
                *tile.add(s)
            } else {
                0.125
                    * (2.0 * *tile.add(s)
                        + *tile.add(s - 1)
                        + *tile.add(s + 1)
                        + *tile.add(s - PITCH)
                        + *tile.add(s + PITCH)
                        + *input.add(g - n * n)
                        + *input.add(g + n * n))
            };
        }
    }
}
