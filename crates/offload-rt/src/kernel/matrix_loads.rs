//! The warp's 8×8 matrix loads and stores of 16-bit elements between shared memory and the
//! lanes' registers in `mma.sync`'s fragment layout (`ldmatrix`, `stmatrix`), re-exported by
//! `kernel::matrix`, whose fragments of both shapes load through them.

use super::mma_input::HALVES;

/// The 4 halves of one 64-bit read, low first: a lane's fragment of MFMA's layouts on CDNA.
#[inline(always)]
pub(super) fn word_to_halves(word: u64) -> [u16; HALVES] {
    let mut halves = [0u16; HALVES];
    [halves[0], halves[1], halves[2], halves[3]] = [
        word as u16,
        (word >> 16) as u16,
        (word >> 32) as u16,
        (word >> 48) as u16,
    ];
    halves
}

/// The halves of four registers, each low half first.
#[inline(always)]
pub(super) fn words_to_halves(words: [u32; 4]) -> [u16; HALVES] {
    let mut halves = [0u16; HALVES];
    let [w0, w1, w2, w3] = words;
    [halves[0], halves[1]] = [w0 as u16, (w0 >> 16) as u16];
    [halves[2], halves[3]] = [w1 as u16, (w1 >> 16) as u16];
    [halves[4], halves[5]] = [w2 as u16, (w2 >> 16) as u16];
    [halves[6], halves[7]] = [w3 as u16, (w3 >> 16) as u16];
    halves
}

macro_rules! ldmatrix {
    ($($(#[$doc:meta])* $name:ident, $helper:ident = $suffix:literal, $count:literal, $trans:literal;)*) => {$(
        $(#[$doc])*
        ///
        /// Every lane of the warp calls it; lane `8·i + r` gives the address of row `r` of
        /// matrix `i` (lanes past the matrices loaded give none that is read). Lane `l` gets, of
        /// each matrix, the two elements of row `l / 4` at columns `2·(l % 4)` and the next
        /// (transposed: of column `l / 4` at rows `2·(l % 4)` and the next), the first in the
        /// low half: `mma.sync`'s fragment layout. On NVIDIA (sm_75+) one `ldmatrix`; elsewhere
        /// the rows' addresses are exchanged across the warp (groups of 32 lanes) and read.
        ///
        /// # Safety
        ///
        /// `row` points at 8 readable 16-bit elements, aligned to 16 bytes, in the block's
        /// shared memory on NVIDIA.
        #[inline(always)]
        pub unsafe fn $name(row: *const u16) -> [u32; $count] {
            #[cfg(all(offload_device, target_arch = "nvptx64"))]
            {
                unsafe extern "C" {
                    // Defined by the device link over `llvm.nvvm.ldmatrix.*`.
                    #[link_name = concat!(offload_format::abi_name!(LDMATRIX_PREFIX), $suffix)]
                    fn $helper(src: *const u16, out: *mut u32);
                }
                let mut out = [0u32; $count];
                // SAFETY: the caller's contract; the helper writes `$count` words.
                unsafe { $helper(row, out.as_mut_ptr()) };
                out
            }
            #[cfg(not(all(offload_device, target_arch = "nvptx64")))]
            // SAFETY: the caller's contract.
            unsafe { exchanged_rows::<$count, $trans>(row) }
        }
    )*};
}

ldmatrix! {
    /// Loads one 8×8 matrix of 16-bit elements across the warp (`ldmatrix.x1`).
    ldmatrix_x1, __offload_ldmatrix_x1 = "x1", 1, false;
    /// Loads two 8×8 matrices of 16-bit elements across the warp (`ldmatrix.x2`).
    ldmatrix_x2, __offload_ldmatrix_x2 = "x2", 2, false;
    /// Loads four 8×8 matrices of 16-bit elements across the warp (`ldmatrix.x4`).
    ldmatrix_x4, __offload_ldmatrix_x4 = "x4", 4, false;
    /// Loads one 8×8 matrix of 16-bit elements across the warp, transposed
    /// (`ldmatrix.x1.trans`).
    ldmatrix_x1_trans, __offload_ldmatrix_x1_trans = "x1_trans", 1, true;
    /// Loads two 8×8 matrices of 16-bit elements across the warp, transposed
    /// (`ldmatrix.x2.trans`).
    ldmatrix_x2_trans, __offload_ldmatrix_x2_trans = "x2_trans", 2, true;
    /// Loads four 8×8 matrices of 16-bit elements across the warp, transposed
    /// (`ldmatrix.x4.trans`).
    ldmatrix_x4_trans, __offload_ldmatrix_x4_trans = "x4_trans", 4, true;
}

macro_rules! stmatrix {
    ($($(#[$doc:meta])* $name:ident, $helper:ident = $suffix:literal, $count:literal, $trans:literal;)*) => {$(
        $(#[$doc])*
        ///
        /// Every lane of the warp calls it; lane `8·i + r` gives the address of row `r` of
        /// matrix `i` (lanes past the matrices stored give none that is written). Lane `l`
        /// gives, of each matrix, the two elements of row `l / 4` at columns `2·(l % 4)` and
        /// the next (transposed: of column `l / 4` at rows `2·(l % 4)` and the next), the first
        /// in the low half: the layout the `ldmatrix_*` of the same shape load and `mma.sync`'s
        /// accumulator holds. On NVIDIA sm_90 and later one `stmatrix`
        /// ([`has_stmatrix`](super::has_stmatrix)); elsewhere the rows' addresses are
        /// exchanged across the warp (groups of 32 lanes) and written.
        ///
        /// # Safety
        ///
        /// `row` points at 8 writable 16-bit elements, aligned to 16 bytes, in the block's
        /// shared memory on NVIDIA; no other thread accesses the matrices' elements until the
        /// block's next barrier.
        #[inline(always)]
        pub unsafe fn $name(row: *mut u16, words: [u32; $count]) {
            #[cfg(all(offload_device, target_arch = "nvptx64"))]
            if super::has_stmatrix() {
                unsafe extern "C" {
                    // Defined by the device link over `llvm.nvvm.stmatrix.*` (sm_90+).
                    #[link_name = concat!(offload_format::abi_name!(STMATRIX_PREFIX), $suffix)]
                    fn $helper(dst: *mut u16, words: *const u32);
                }
                // SAFETY: the caller's contract; the helper reads `$count` words.
                unsafe { $helper(row, words.as_ptr()) };
                return;
            }
            // SAFETY: the caller's contract.
            unsafe { exchanged_row_stores::<$count, $trans>(row, words) }
        }
    )*};
}

stmatrix! {
    /// Stores one 8×8 matrix of 16-bit elements from across the warp (`stmatrix.x1`).
    stmatrix_x1, __offload_stmatrix_x1 = "x1", 1, false;
    /// Stores two 8×8 matrices of 16-bit elements from across the warp (`stmatrix.x2`).
    stmatrix_x2, __offload_stmatrix_x2 = "x2", 2, false;
    /// Stores four 8×8 matrices of 16-bit elements from across the warp (`stmatrix.x4`).
    stmatrix_x4, __offload_stmatrix_x4 = "x4", 4, false;
    /// Stores one 8×8 matrix of 16-bit elements from across the warp, transposed
    /// (`stmatrix.x1.trans`).
    stmatrix_x1_trans, __offload_stmatrix_x1_trans = "x1_trans", 1, true;
    /// Stores two 8×8 matrices of 16-bit elements from across the warp, transposed
    /// (`stmatrix.x2.trans`).
    stmatrix_x2_trans, __offload_stmatrix_x2_trans = "x2_trans", 2, true;
    /// Stores four 8×8 matrices of 16-bit elements from across the warp, transposed
    /// (`stmatrix.x4.trans`).
    stmatrix_x4_trans, __offload_stmatrix_x4_trans = "x4_trans", 4, true;
}

/// `stmatrix` where the device has none: each lane fetches the addresses of the rows it
/// writes from the lanes that hold them.
///
/// # Safety
///
/// As the `stmatrix_*` functions.
#[inline(always)]
unsafe fn exchanged_row_stores<const COUNT: usize, const TRANS: bool>(
    row: *mut u16,
    words: [u32; COUNT],
) {
    let lane = super::lane_id() as usize;
    let (group, l) = (lane & !31, lane & 31);
    let address = row as usize as u64;
    let fetch = |source: usize| super::shuffle_idx(address, (group + source) as u32) as usize;
    for (i, word) in words.into_iter().enumerate() {
        if TRANS {
            let (upper, lower) = (fetch(8 * i + 2 * (l % 4)), fetch(8 * i + 2 * (l % 4) + 1));
            // SAFETY: rows `2·(l % 4)` and the next of matrix `i`, 8 elements each (the
            // caller's contract for the lanes that gave them), column `l / 4 < 8`.
            unsafe {
                *(upper as *mut u16).add(l / 4) = word as u16;
                *(lower as *mut u16).add(l / 4) = (word >> 16) as u16;
            }
        } else {
            let target = fetch(8 * i + l / 4);
            // SAFETY: row `l / 4` of matrix `i`, 8 elements (the caller's contract for the
            // lane that gave it), the pair at columns `2·(l % 4)`, 4-byte aligned.
            unsafe { *(target as *mut u32).add(l % 4) = word };
        }
    }
}

/// `ldmatrix` where the device has none: each lane fetches the addresses of the rows it reads
/// from the lanes that hold them.
///
/// # Safety
///
/// As the `ldmatrix_*` functions.
#[cfg(not(all(offload_device, target_arch = "nvptx64")))]
#[inline(always)]
unsafe fn exchanged_rows<const COUNT: usize, const TRANS: bool>(row: *const u16) -> [u32; COUNT] {
    let lane = super::lane_id() as usize;
    let (group, l) = (lane & !31, lane & 31);
    let address = row as usize as u64;
    let fetch = |source: usize| super::shuffle_idx(address, (group + source) as u32) as usize;
    let mut out = [0u32; COUNT];
    for (i, word) in out.iter_mut().enumerate() {
        *word = if TRANS {
            let (upper, lower) = (fetch(8 * i + 2 * (l % 4)), fetch(8 * i + 2 * (l % 4) + 1));
            // SAFETY: rows `2·(l % 4)` and the next of matrix `i`, 8 elements each (the
            // caller's contract for the lanes that gave them).
            let (first, second) = unsafe {
                (
                    *(upper as *const u16).add(l / 4),
                    *(lower as *const u16).add(l / 4),
                )
            };
            u32::from(first) | u32::from(second) << 16
        } else {
            let source = fetch(8 * i + l / 4);
            // SAFETY: row `l / 4` of matrix `i`, 8 elements (the caller's contract for the
            // lane that gave it).
            unsafe { *(source as *const u32).add(l % 4) }
        };
    }
    out
}
