//! Hopper's warpgroup matrix multiply (`wgmma.mma_async`, NVIDIA `sm_90a`): the four warps of
//! a warpgroup (128 threads) multiply a 64×16 slice of A by a 16×N slice of B, both read
//! straight from shared memory through [`SharedMatrixDescriptor`]s, into a 64×N f32
//! accumulator held in the warpgroup's registers (N/2 values a thread), asynchronously: the
//! next slices' copies and multiplications are issued while it runs.
//!
//! The protocol, as CUDA's: [`fence`] before the first multiplication that reads or writes
//! accumulators the threads also touch, the multiplications, [`commit_group`], and
//! [`wait_group`] before reading the accumulators (or reusing the shared slices).
//!
//! The accumulator's layout is PTX's for `wgmma` `.m64nNk16` with an f32 `D`: thread `t` of the
//! warpgroup holds, for each 8 columns `j` of N, rows `16·(t/32) + (t%32)/4` and that plus 8 at
//! columns `8·j + 2·(t%4)` and the next one, as `acc[4j..4j+4]` = (row, col), (row, col+1),
//! (row+8, col), (row+8, col+1).
//!
//! | device | |
//! |---|---|
//! | NVIDIA `sm_90a` (build with `--offload-arch sm_90a`) | `wgmma.mma_async` (`HGMMA`) |
//! | other GPUs (`sm_90` without `a` too) | refused by the device link, naming the kernels |
//! | CPU device | a panic naming the feature (the kernel's launch fails with it) |

use super::matrix::MmaInput;

/// How the rows of a shared tile are swizzled, as the tensor memory accelerator wrote them
/// (the map's swizzle) and as `wgmma` reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Swizzle {
    /// No swizzle: 8×8 cores of 16-byte rows.
    None = 0,
    /// 128-byte rows, their 16-byte chunks XORed with the row's index modulo 8.
    Bytes128 = 1,
    /// 64-byte rows, chunks XORed modulo 4.
    Bytes64 = 2,
    /// 32-byte rows, chunks XORed modulo 2.
    Bytes32 = 3,
}

/// Where and how a matrix operand of `wgmma` lies in shared memory: PTX's 64-bit matrix
/// descriptor (start address, leading- and stride-dimension byte offsets, swizzle).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct SharedMatrixDescriptor(u64);

impl SharedMatrixDescriptor {
    /// The operand starting at `start` (shared memory, 16-byte aligned; 1024 with the 128-byte
    /// swizzle at a pattern's start): `leading_bytes` between the core matrices of the leading
    /// dimension and `stride_bytes` between those of the strided one (PTX's LBO and SBO; for
    /// K-major swizzled operands LBO is ignored and SBO is 8 rows' bytes).
    #[inline(always)]
    pub fn new<T>(
        start: *const T,
        leading_bytes: u32,
        stride_bytes: u32,
        swizzle: Swizzle,
    ) -> Self {
        Self::from_shared_address(
            shared_address(start.cast()),
            leading_bytes,
            stride_bytes,
            swizzle,
        )
    }

    /// The descriptor of an operand at shared-window address `address` (what
    /// [`SharedMatrixDescriptor::new`] computes from a pointer).
    #[inline(always)]
    pub const fn from_shared_address(
        address: u32,
        leading_bytes: u32,
        stride_bytes: u32,
        swizzle: Swizzle,
    ) -> Self {
        const fn field(bytes: u32) -> u64 {
            ((bytes as u64 & 0x3_ffff) >> 4) & 0x3fff
        }
        Self(
            field(address)
                | field(leading_bytes) << 16
                | field(stride_bytes) << 32
                | (swizzle as u64) << 62,
        )
    }

    /// The same operand `bytes` further on (a `k` step within a swizzled row, say).
    #[inline(always)]
    pub const fn offset(self, bytes: u32) -> Self {
        Self(self.0 + ((bytes as u64 >> 4) & 0x3fff))
    }

    /// The 64 bits PTX reads.
    #[inline(always)]
    pub const fn bits(self) -> u64 {
        self.0
    }
}

/// Orders the warpgroup's register accesses before the multiplications that follow.
#[inline(always)]
pub fn fence() {
    imp::fence();
}

/// Closes this warpgroup's group of multiplications.
#[inline(always)]
pub fn commit_group() {
    imp::commit();
}

/// Waits until at most `N` of this warpgroup's multiplication groups are in flight (`N` at
/// most 7): the others' accumulators may be read and their shared operands reused.
#[inline(always)]
pub fn wait_group<const N: usize>() {
    const { assert!(N <= 7, "wgmma::wait_group: at most 7 groups in flight") };
    imp::wait(N);
}

macro_rules! mma_fns {
    ($($name:ident, $n:literal, $floats:literal;)*) => {$(
        #[doc = concat!(
            "`acc` (+)= A·B for a 64×16 A and a 16×", stringify!($n), " B of `T` in shared ",
            "memory, into this thread's ", stringify!($floats), " values of the warpgroup's ",
            "64×", stringify!($n), " f32 accumulator (the module's layout); `accumulate` ",
            "false overwrites it. `TRANS_A`/`TRANS_B`: the operand is M- or N-major instead ",
            "of K-major.\n\n# Safety\n\nCalled by all 128 threads of a warpgroup alike ",
            "(the same descriptors, converged); the descriptors describe initialized shared ",
            "memory of `T` made visible to the asynchronous unit ",
            "([`super::tma::fence_proxy_async`] after threads' writes, or a TMA copy's ",
            "barrier), unchanged and `acc` not read until a [`wait_group`] covers the ",
            "multiplication; [`fence`] before it when `acc` was written by other code."
        )]
        #[inline(always)]
        pub unsafe fn $name<T: MmaInput, const TRANS_A: bool, const TRANS_B: bool>(
            acc: &mut [f32; $floats],
            a: SharedMatrixDescriptor,
            b: SharedMatrixDescriptor,
            accumulate: bool,
        ) {
            // SAFETY: the caller's contract.
            unsafe {
                imp::mma::<$n>(
                    acc.as_mut_ptr(),
                    a.0,
                    b.0,
                    accumulate,
                    T::BF16,
                    TRANS_A,
                    TRANS_B,
                )
            }
        }
    )*};
}

mma_fns! {
    mma_async_m64n64k16, 64, 32;
    mma_async_m64n128k16, 128, 64;
    mma_async_m64n256k16, 256, 128;
}

/// Raises this warpgroup's registers a thread to `N` (a multiple of 8 from 24 to 256): the
/// consumer warpgroups of a warp-specialized kernel take what the producer gives up.
#[inline(always)]
pub fn warpgroup_reg_alloc<const N: u32>() {
    const {
        assert!(
            N >= 24 && N <= 256 && N.is_multiple_of(8),
            "setmaxnreg: 24..=256, a multiple of 8"
        )
    };
    imp::set_max_registers(N, true);
}

/// Lowers this warpgroup's registers a thread to `N` (a multiple of 8 from 24 to 256): the
/// producer warpgroup of a warp-specialized kernel, which needs few.
#[inline(always)]
pub fn warpgroup_reg_dealloc<const N: u32>() {
    const {
        assert!(
            N >= 24 && N <= 256 && N.is_multiple_of(8),
            "setmaxnreg: 24..=256, a multiple of 8"
        )
    };
    imp::set_max_registers(N, false);
}

/// The shared-window address of `ptr`, a pointer into the block's shared memory.
#[inline(always)]
pub fn shared_address(ptr: *const u8) -> u32 {
    imp::shared_address(ptr)
}

#[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod imp {
    macro_rules! helpers {
        ($($name:ident = $suffix:ident),* $(,)?) => {
            unsafe extern "C" {
                // Defined by the device link for sm_90a (`wgmma.*`, `setmaxnreg`, over inline
                // PTX); a kernel that reaches one on another GPU is refused, named.
                $(
                    #[link_name = concat!(offload_format::abi_name!(WGMMA_PREFIX), stringify!($suffix))]
                    fn $name(acc: *mut f32, a: u64, b: u64, accumulate: u32);
                )*
            }
        };
    }
    helpers!(
        __offload_wgmma_m64n64k16_f16_nn = m64n64k16_f16_nn,
        __offload_wgmma_m64n64k16_f16_nt = m64n64k16_f16_nt,
        __offload_wgmma_m64n64k16_f16_tn = m64n64k16_f16_tn,
        __offload_wgmma_m64n64k16_f16_tt = m64n64k16_f16_tt,
        __offload_wgmma_m64n64k16_bf16_nn = m64n64k16_bf16_nn,
        __offload_wgmma_m64n64k16_bf16_nt = m64n64k16_bf16_nt,
        __offload_wgmma_m64n64k16_bf16_tn = m64n64k16_bf16_tn,
        __offload_wgmma_m64n64k16_bf16_tt = m64n64k16_bf16_tt,
        __offload_wgmma_m64n128k16_f16_nn = m64n128k16_f16_nn,
        __offload_wgmma_m64n128k16_f16_nt = m64n128k16_f16_nt,
        __offload_wgmma_m64n128k16_f16_tn = m64n128k16_f16_tn,
        __offload_wgmma_m64n128k16_f16_tt = m64n128k16_f16_tt,
        __offload_wgmma_m64n128k16_bf16_nn = m64n128k16_bf16_nn,
        __offload_wgmma_m64n128k16_bf16_nt = m64n128k16_bf16_nt,
        __offload_wgmma_m64n128k16_bf16_tn = m64n128k16_bf16_tn,
        __offload_wgmma_m64n128k16_bf16_tt = m64n128k16_bf16_tt,
        __offload_wgmma_m64n256k16_f16_nn = m64n256k16_f16_nn,
        __offload_wgmma_m64n256k16_f16_nt = m64n256k16_f16_nt,
        __offload_wgmma_m64n256k16_f16_tn = m64n256k16_f16_tn,
        __offload_wgmma_m64n256k16_f16_tt = m64n256k16_f16_tt,
        __offload_wgmma_m64n256k16_bf16_nn = m64n256k16_bf16_nn,
        __offload_wgmma_m64n256k16_bf16_nt = m64n256k16_bf16_nt,
        __offload_wgmma_m64n256k16_bf16_tn = m64n256k16_bf16_tn,
        __offload_wgmma_m64n256k16_bf16_tt = m64n256k16_bf16_tt,
    );

    macro_rules! setmaxnreg {
        ($($n:literal => $inc:ident, $dec:ident;)*) => {
            unsafe extern "C" {
                $(
                    #[link_name = concat!(offload_format::abi_name!(SETMAXNREG_PREFIX), "inc_", stringify!($n))]
                    fn $inc();
                    #[link_name = concat!(offload_format::abi_name!(SETMAXNREG_PREFIX), "dec_", stringify!($n))]
                    fn $dec();
                )*
            }
            /// `n` is a constant wherever it is inlined, so one instruction is left.
            #[inline(always)]
            pub(super) fn set_max_registers(n: u32, increase: bool) {
                // SAFETY: `setmaxnreg` of a value the caller checked; warpgroup-uniform.
                unsafe {
                    match (n, increase) {
                        $(($n, true) => $inc(), ($n, false) => $dec(),)*
                        _ => {}
                    }
                }
            }
        };
    }
    setmaxnreg! {
        24 => __offload_setmaxnreg_inc_24, __offload_setmaxnreg_dec_24;
        32 => __offload_setmaxnreg_inc_32, __offload_setmaxnreg_dec_32;
        40 => __offload_setmaxnreg_inc_40, __offload_setmaxnreg_dec_40;
        48 => __offload_setmaxnreg_inc_48, __offload_setmaxnreg_dec_48;
        56 => __offload_setmaxnreg_inc_56, __offload_setmaxnreg_dec_56;
        64 => __offload_setmaxnreg_inc_64, __offload_setmaxnreg_dec_64;
        72 => __offload_setmaxnreg_inc_72, __offload_setmaxnreg_dec_72;
        80 => __offload_setmaxnreg_inc_80, __offload_setmaxnreg_dec_80;
        88 => __offload_setmaxnreg_inc_88, __offload_setmaxnreg_dec_88;
        96 => __offload_setmaxnreg_inc_96, __offload_setmaxnreg_dec_96;
        104 => __offload_setmaxnreg_inc_104, __offload_setmaxnreg_dec_104;
        112 => __offload_setmaxnreg_inc_112, __offload_setmaxnreg_dec_112;
        120 => __offload_setmaxnreg_inc_120, __offload_setmaxnreg_dec_120;
        128 => __offload_setmaxnreg_inc_128, __offload_setmaxnreg_dec_128;
        136 => __offload_setmaxnreg_inc_136, __offload_setmaxnreg_dec_136;
        144 => __offload_setmaxnreg_inc_144, __offload_setmaxnreg_dec_144;
        152 => __offload_setmaxnreg_inc_152, __offload_setmaxnreg_dec_152;
        160 => __offload_setmaxnreg_inc_160, __offload_setmaxnreg_dec_160;
        168 => __offload_setmaxnreg_inc_168, __offload_setmaxnreg_dec_168;
        176 => __offload_setmaxnreg_inc_176, __offload_setmaxnreg_dec_176;
        184 => __offload_setmaxnreg_inc_184, __offload_setmaxnreg_dec_184;
        192 => __offload_setmaxnreg_inc_192, __offload_setmaxnreg_dec_192;
        200 => __offload_setmaxnreg_inc_200, __offload_setmaxnreg_dec_200;
        208 => __offload_setmaxnreg_inc_208, __offload_setmaxnreg_dec_208;
        216 => __offload_setmaxnreg_inc_216, __offload_setmaxnreg_dec_216;
        224 => __offload_setmaxnreg_inc_224, __offload_setmaxnreg_dec_224;
        232 => __offload_setmaxnreg_inc_232, __offload_setmaxnreg_dec_232;
        240 => __offload_setmaxnreg_inc_240, __offload_setmaxnreg_dec_240;
        248 => __offload_setmaxnreg_inc_248, __offload_setmaxnreg_dec_248;
        256 => __offload_setmaxnreg_inc_256, __offload_setmaxnreg_dec_256;
    }

    unsafe extern "C" {
        #[link_name = offload_format::abi_name!(WGMMA_FENCE)]
        fn __offload_wgmma_fence();
        #[link_name = offload_format::abi_name!(WGMMA_COMMIT)]
        fn __offload_wgmma_commit();
        #[link_name = concat!(offload_format::abi_name!(WGMMA_WAIT_PREFIX), "0")]
        fn __offload_wgmma_wait_0();
        #[link_name = concat!(offload_format::abi_name!(WGMMA_WAIT_PREFIX), "1")]
        fn __offload_wgmma_wait_1();
        #[link_name = concat!(offload_format::abi_name!(WGMMA_WAIT_PREFIX), "2")]
        fn __offload_wgmma_wait_2();
        #[link_name = concat!(offload_format::abi_name!(WGMMA_WAIT_PREFIX), "3")]
        fn __offload_wgmma_wait_3();
        #[link_name = concat!(offload_format::abi_name!(WGMMA_WAIT_PREFIX), "4")]
        fn __offload_wgmma_wait_4();
        #[link_name = concat!(offload_format::abi_name!(WGMMA_WAIT_PREFIX), "5")]
        fn __offload_wgmma_wait_5();
        #[link_name = concat!(offload_format::abi_name!(WGMMA_WAIT_PREFIX), "6")]
        fn __offload_wgmma_wait_6();
        #[link_name = concat!(offload_format::abi_name!(WGMMA_WAIT_PREFIX), "7")]
        fn __offload_wgmma_wait_7();
        #[link_name = offload_format::abi_name!(SHARED_ADDRESS)]
        fn __offload_shared_address(ptr: *const u8) -> u32;
    }

    #[inline(always)]
    pub(super) fn fence() {
        // SAFETY: a fence has no preconditions.
        unsafe { __offload_wgmma_fence() }
    }

    #[inline(always)]
    pub(super) fn commit() {
        // SAFETY: closing a group has no preconditions.
        unsafe { __offload_wgmma_commit() }
    }

    /// `n` is a constant wherever it is inlined, so one wait is left.
    #[inline(always)]
    pub(super) fn wait(n: usize) {
        // SAFETY: waiting has no preconditions.
        unsafe {
            match n {
                0 => __offload_wgmma_wait_0(),
                1 => __offload_wgmma_wait_1(),
                2 => __offload_wgmma_wait_2(),
                3 => __offload_wgmma_wait_3(),
                4 => __offload_wgmma_wait_4(),
                5 => __offload_wgmma_wait_5(),
                6 => __offload_wgmma_wait_6(),
                _ => __offload_wgmma_wait_7(),
            }
        }
    }

    #[inline(always)]
    pub(super) fn shared_address(ptr: *const u8) -> u32 {
        // SAFETY: converts an address; nothing is read.
        unsafe { __offload_shared_address(ptr) }
    }

    /// The variant's helper, chosen by constants wherever it is inlined.
    ///
    /// # Safety
    /// As the `mma_async_*` functions, `acc` holding `N / 2` values.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn mma<const N: usize>(
        acc: *mut f32,
        a: u64,
        b: u64,
        accumulate: bool,
        bf16: bool,
        trans_a: bool,
        trans_b: bool,
    ) {
        let f: unsafe extern "C" fn(*mut f32, u64, u64, u32) = match (N, bf16, trans_a, trans_b) {
            (64, false, false, false) => __offload_wgmma_m64n64k16_f16_nn,
            (64, false, false, true) => __offload_wgmma_m64n64k16_f16_nt,
            (64, false, true, false) => __offload_wgmma_m64n64k16_f16_tn,
            (64, false, true, true) => __offload_wgmma_m64n64k16_f16_tt,
            (64, true, false, false) => __offload_wgmma_m64n64k16_bf16_nn,
            (64, true, false, true) => __offload_wgmma_m64n64k16_bf16_nt,
            (64, true, true, false) => __offload_wgmma_m64n64k16_bf16_tn,
            (64, true, true, true) => __offload_wgmma_m64n64k16_bf16_tt,
            (128, false, false, false) => __offload_wgmma_m64n128k16_f16_nn,
            (128, false, false, true) => __offload_wgmma_m64n128k16_f16_nt,
            (128, false, true, false) => __offload_wgmma_m64n128k16_f16_tn,
            (128, false, true, true) => __offload_wgmma_m64n128k16_f16_tt,
            (128, true, false, false) => __offload_wgmma_m64n128k16_bf16_nn,
            (128, true, false, true) => __offload_wgmma_m64n128k16_bf16_nt,
            (128, true, true, false) => __offload_wgmma_m64n128k16_bf16_tn,
            (128, true, true, true) => __offload_wgmma_m64n128k16_bf16_tt,
            (_, false, false, false) => __offload_wgmma_m64n256k16_f16_nn,
            (_, false, false, true) => __offload_wgmma_m64n256k16_f16_nt,
            (_, false, true, false) => __offload_wgmma_m64n256k16_f16_tn,
            (_, false, true, true) => __offload_wgmma_m64n256k16_f16_tt,
            (_, true, false, false) => __offload_wgmma_m64n256k16_bf16_nn,
            (_, true, false, true) => __offload_wgmma_m64n256k16_bf16_nt,
            (_, true, true, false) => __offload_wgmma_m64n256k16_bf16_tn,
            (_, true, true, true) => __offload_wgmma_m64n256k16_bf16_tt,
        };
        // SAFETY: the caller's contract.
        unsafe { f(acc, a, b, u32::from(accumulate)) }
    }
}

#[cfg(not(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu"))))]
mod imp {
    use super::super::hopper_only;

    const FEATURE: &str = "warpgroup matrix multiplies (wgmma, sm_90a)";

    pub(super) fn fence() {
        hopper_only(FEATURE)
    }
    pub(super) fn commit() {
        hopper_only(FEATURE)
    }
    pub(super) fn wait(_: usize) {
        hopper_only(FEATURE)
    }
    pub(super) fn shared_address(_: *const u8) -> u32 {
        hopper_only(FEATURE)
    }
    pub(super) fn set_max_registers(_: u32, _: bool) {
        hopper_only(FEATURE)
    }
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn mma<const N: usize>(
        _: *mut f32,
        _: u64,
        _: u64,
        _: bool,
        _: bool,
        _: bool,
        _: bool,
    ) {
        hopper_only(FEATURE)
    }
}

#[cfg(test)]
mod tests {
    use super::{SharedMatrixDescriptor, Swizzle};

    /// The fields land where PTX's matrix-descriptor format puts them.
    #[test]
    fn descriptors_pack_as_ptx_reads_them() {
        let d = SharedMatrixDescriptor::from_shared_address(0x1_0400, 16, 1024, Swizzle::Bytes128);
        assert_eq!(d.bits() & 0x3fff, 0x1_0400 >> 4);
        assert_eq!(d.bits() >> 16 & 0x3fff, 1);
        assert_eq!(d.bits() >> 32 & 0x3fff, 64);
        assert_eq!(d.bits() >> 62, 1);
        assert_eq!(d.offset(32).bits(), d.bits() + 2);
        let plain = SharedMatrixDescriptor::from_shared_address(0x80, 128, 256, Swizzle::None);
        assert_eq!(plain.bits() >> 62, 0);
    }
}
