//! The device ABI, spelled once: every symbol, section and constant that the kernel side
//! (`offload_rt::kernel`, compiled for each device), the device link (`offload-build`), the
//! image readers (this crate's `image`) and the runtime (`offload-rt`'s backends and registry)
//! must agree on. Every other crate names these through this module, never as a string of its
//! own (`xtask/src/abi_lint.rs` fails on a copy).
//!
//! Built with no feature and no `std`, so that the kernel side of `offload-rt` uses it in every
//! nested device build. Where Rust needs a literal (`#[unsafe(export_name = ..)]`,
//! `#[unsafe(link_section = ..)]`), [`abi_name!`](crate::abi_name) gives the same string as the
//! constant of the same name: `#[unsafe(export_name = offload_format::abi_name!(CHANNEL))]`.
//!
//! The layouts of the records that cross at run time (a GPU's `DeviceChannel` and panic
//! record, the CPU device's launch) are `#[repr(C)]` types of `offload_rt::kernel::abi`, one
//! definition the kernel side writes and the runtime reads; what they mean is described there.

/// The string of one of this module's constants, as a literal for an attribute:
/// `abi_name!(CHANNEL)` is `"__offload_channel"`, [`CHANNEL`](crate::abi::CHANNEL)'s value.
#[macro_export]
#[rustfmt::skip]
macro_rules! abi_name {
    // The CPU device's images.
    (CPU_SYMBOL_PREFIX) => { "__offload_cpu_" };
    (CPU_RUN_PREFIX) => { "__offload_cpu_run_" };
    (CPU_THREAD_PREFIX) => { "__offload_cpu_thread_" };
    (CPU_REGIONS_PREFIX) => { "__offload_cpu_regions_" };
    (CPU_NOTE_PREFIX) => { "__offload_cpu_note_" };
    (CPU_ABI_SYMBOL) => { "__offload_cpu_abi_version" };
    (CPU_POSITION_SYMBOL) => { "__offload_cpu_position" };
    (CPU_BODY_PREFIX) => { "__offload_cpu_body_" };
    (CPU_IR_REGIONS_PREFIX) => { "__offload_cpu_irregions_" };
    // The kernel side's hooks in a CPU image's bitcode, for the IR form of barriers.
    (CPU_IR_CFG) => { "offload_cpu_ir" };
    (CPU_IR_PREFIX) => { "__offload_cpuir_" };
    (CPU_IR_INDEX) => { "__offload_cpuir_index" };
    (CPU_IR_BARRIER) => { "__offload_cpuir_barrier" };
    (CPU_IR_WARP_BARRIER) => { "__offload_cpuir_warp_barrier" };
    (CPU_IR_ENTER) => { "__offload_cpuir_enter" };
    (CPU_IR_BEGIN_BLOCK) => { "__offload_cpuir_begin_block" };
    (CPU_IR_SET_THREAD) => { "__offload_cpuir_set_thread" };
    (CPU_IR_LANES) => { "__offload_cpuir_lanes" };
    (CPU_IR_SHARED_SLOT) => { "__offload_cpuir_shared_slot" };
    (CPU_IR_GENERIC_SHARED_TILE) => { "__offload_cpuir_generic_shared_tile" };
    (CPU_IR_INTERLEAVED) => { "__offload_cpuir_interleaved" };
    (CPU_IR_INTERLEAVE) => { "__offload_cpuir_interleave" };
    (CPU_IR_WARP_TURN) => { "__offload_cpuir_warp_turn" };
    // A GPU image's channel and panic reporters.
    (CHANNEL) => { "__offload_channel" };
    (GPU_PANIC) => { "__offload_gpu_panic" };
    (GPU_PANIC_AT) => { "__offload_gpu_panic_at" };
    (GPU_PANIC_AT0) => { "__offload_gpu_panic_at0" };
    (GPU_PANIC_AT1) => { "__offload_gpu_panic_at1" };
    (GPU_PANIC_AT2) => { "__offload_gpu_panic_at2" };
    (GPU_PANIC_AT_THREAD) => { "__offload_gpu_panic_at_thread" };
    (GPU_THREAD_INDEX) => { "__offload_gpu_thread_index" };
    (GPU_PANIC_FINISH) => { "__offload_gpu_panic_finish" };
    (GPU_PANIC_BOUNDS_CHECK) => { "__offload_gpu_panic_bounds_check" };
    (GPU_SLICE_INDEX_FAIL) => { "__offload_gpu_slice_index_fail" };
    (GPU_STR_SLICE_FAIL) => { "__offload_gpu_str_slice_fail" };
    (GPU_EXPECT_FAILED) => { "__offload_gpu_expect_failed" };
    (GPU_UNWRAP_FAILED) => { "__offload_gpu_unwrap_failed" };
    (GPU_ASSERT_FAILED) => { "__offload_gpu_assert_failed" };
    (PANIC_SITES_SYMBOL) => { "__offload_panic_sites" };
    // What the kernel side hands the device link.
    (LAUNCH_BOUNDS_PREFIX) => { "__offload_max_threads_" };
    (SHARED_SECTION) => { ".offload.shared" };
    (CONSTANT_SECTION) => { ".offload.constant" };
    (GENERIC_TILE_FUNCTION) => { "__offload_shared_tile" };
    (READ_ONLY_MARKER) => { "__offload_read_only" };
    // Helpers the device link defines and the kernel side declares.
    (DYNAMIC_SHARED) => { "__offload_dynamic_shared" };
    (DYNAMIC_SHARED_MEMORY) => { "__offload_dynamic_shared_memory" };
    (F32_TO_BF16) => { "__offload_f32_to_bf16" };
    (F32X2_TO_F16X2) => { "__offload_f32x2_to_f16x2" };
    (F32X2_TO_BF16X2) => { "__offload_f32x2_to_bf16x2" };
    (ATOMIC_ADD_F16) => { "__offload_atomic_add_f16" };
    (ATOMIC_ADD_BF16) => { "__offload_atomic_add_bf16" };
    (AMDGPU_DISPATCH_FIELD) => { "__offload_amdgpu_dispatch_field" };
    (AMDGPU_SYNC_THREADS) => { "__offload_amdgpu_sync_threads" };
    (AMDGPU_SYNC_WARP) => { "__offload_amdgpu_sync_warp" };
    (AMDGPU_WAVE_SIZE) => { "__offload_amdgpu_wave_size" };
    (AMDGPU_LDS_DMA_4) => { "__offload_amdgpu_lds_dma_4" };
    (AMDGPU_LDS_DMA_WAIT) => { "__offload_amdgpu_lds_dma_wait" };
    (HAS_LDS_DMA) => { "__offload_has_lds_dma" };
    (MMA_F16) => { "__offload_mma_f16" };
    (MMA_BF16) => { "__offload_mma_bf16" };
    (MMA_M32N32K8_F16) => { "__offload_mma_m32n32k8_f16" };
    (MMA_M32N32K8_BF16) => { "__offload_mma_m32n32k8_bf16" };
    (CP_ASYNC_PREFIX) => { "__offload_cp_async_" };
    (CP_ASYNC_COMMIT) => { "__offload_cp_async_commit" };
    (CP_ASYNC_WAIT_PREFIX) => { "__offload_cp_async_wait_" };
    (LDMATRIX_PREFIX) => { "__offload_ldmatrix_" };
    (STMATRIX_PREFIX) => { "__offload_stmatrix_" };
    (HAS_STMATRIX) => { "__offload_has_stmatrix" };
    (HAS_TMA) => { "__offload_has_tma" };
    (HAS_WGMMA) => { "__offload_has_wgmma" };
    (MBARRIER_INIT) => { "__offload_mbarrier_init" };
    (MBARRIER_ARRIVE) => { "__offload_mbarrier_arrive" };
    (MBARRIER_ARRIVE_EXPECT_TX) => { "__offload_mbarrier_arrive_expect_tx" };
    (MBARRIER_EXPECT_TX) => { "__offload_mbarrier_expect_tx" };
    (MBARRIER_TRY_WAIT_PARITY) => { "__offload_mbarrier_try_wait_parity" };
    (MBARRIER_FENCE_INIT) => { "__offload_mbarrier_fence_init" };
    (TMA_LOAD_2D) => { "__offload_tma_load_2d" };
    (TMA_LOAD_2D_MULTICAST) => { "__offload_tma_load_2d_multicast" };
    (TMA_STORE_2D) => { "__offload_tma_store_2d" };
    (TMA_STORE_COMMIT) => { "__offload_tma_store_commit" };
    (TMA_STORE_WAIT_PREFIX) => { "__offload_tma_store_wait_" };
    (TMA_PREFETCH) => { "__offload_tma_prefetch" };
    (FENCE_PROXY_ASYNC) => { "__offload_fence_proxy_async" };
    (CLUSTER_ARRIVE) => { "__offload_cluster_arrive" };
    (CLUSTER_WAIT) => { "__offload_cluster_wait" };
    (CLUSTER_BLOCK_RANK) => { "__offload_cluster_block_rank" };
    (CLUSTER_BLOCKS) => { "__offload_cluster_blocks" };
    (CLUSTER_MAP_SHARED) => { "__offload_cluster_map_shared" };
    (WGMMA_PREFIX) => { "__offload_wgmma_" };
    (WGMMA_FENCE) => { "__offload_wgmma_fence" };
    (WGMMA_COMMIT) => { "__offload_wgmma_commit" };
    (WGMMA_WAIT_PREFIX) => { "__offload_wgmma_wait_" };
    (SHARED_ADDRESS) => { "__offload_shared_address" };
    (SETMAXNREG_PREFIX) => { "__offload_setmaxnreg_" };
    // Registration of a host binary's bundles.
    (OFFLOADING_SECTION) => { ".llvm.offloading" };
    (REGISTRATION_CONSTRUCTOR_SECTION) => { ".init_array.101" };
    (REGISTER_LIB) => { "__offload_register_lib" };
    (UNREGISTER_LIB) => { "__offload_unregister_lib" };
}

/// Prefix of every symbol a CPU device image exports: the entry points, notes, ABI version
/// and position below; the image's version script keeps these global and no other.
pub const CPU_SYMBOL_PREFIX: &str = abi_name!(CPU_SYMBOL_PREFIX);
/// Prefix of a CPU image's per-kernel entry point that runs a range of blocks
/// (`offload_rt::kernel::abi::CpuRunFn`): `CPU_RUN_PREFIX<kernel>`.
pub const CPU_RUN_PREFIX: &str = abi_name!(CPU_RUN_PREFIX);
/// Prefix of a CPU image's per-kernel entry point that runs one thread
/// (`offload_rt::kernel::abi::CpuThreadFn`).
pub const CPU_THREAD_PREFIX: &str = abi_name!(CPU_THREAD_PREFIX);
/// Prefix of a CPU image's entry point of a kernel with barriers in region form
/// (`offload_rt::kernel::abi::CpuRegionsFn`).
pub const CPU_REGIONS_PREFIX: &str = abi_name!(CPU_REGIONS_PREFIX);
/// Prefix of the note a CPU image carries for a kernel with barriers that runs on the
/// coroutine path: the reason, as UTF-8 bytes, which the build reports.
pub const CPU_NOTE_PREFIX: &str = abi_name!(CPU_NOTE_PREFIX);
/// Symbol of the `u32` CPU ABI version every CPU image exports.
pub const CPU_ABI_SYMBOL: &str = abi_name!(CPU_ABI_SYMBOL);
/// Symbol of the function every CPU image exports that says where the calling OS thread's GPU
/// thread is (`offload_rt::kernel::abi::CpuPositionFn`).
pub const CPU_POSITION_SYMBOL: &str = abi_name!(CPU_POSITION_SYMBOL);
/// Prefix of a CPU image's entry point of a kernel with barriers in the IR form (the CPU
/// link's, `offload_rt::kernel::abi::CpuRegionsFn` as [`CPU_REGIONS_PREFIX`]): the runtime runs
/// it where the source form's entry is missing or misses a barrier.
pub const CPU_IR_REGIONS_PREFIX: &str = abi_name!(CPU_IR_REGIONS_PREFIX);
/// Prefix of a CPU image's per-kernel `extern "C" fn(params: *const *mut c_void)` in the
/// bitcode of an IR-form build: one GPU thread's body, its parameters read, its index state
/// the [`CPU_IR_INDEX`] calls. The CPU link forms the kernel's [`CPU_REGIONS_PREFIX`] entry
/// from it and drops it.
pub const CPU_BODY_PREFIX: &str = abi_name!(CPU_BODY_PREFIX);

/// The `--cfg` of a CPU image built for the IR form of barriers: the kernel side then reads its
/// index state and reaches its barriers through the `CPU_IR_*` functions below, which the CPU
/// link recognizes, and `#[kernel]` emits a [`CPU_BODY_PREFIX`] function per kernel.
pub const CPU_IR_CFG: &str = abi_name!(CPU_IR_CFG);
/// Prefix of the kernel side's hooks for the IR form: outside [`CPU_SYMBOL_PREFIX`], so that an
/// image never exports them.
pub const CPU_IR_PREFIX: &str = abi_name!(CPU_IR_PREFIX);
/// `extern "C" fn(which: u32) -> u32`: the running GPU thread's index state, `which` / 3 the
/// vector (thread, block, block size, grid size) and `which` % 3 its component (x, y, z) for
/// `which` < 12, or [`CPU_IR_RANK`].
pub const CPU_IR_INDEX: &str = abi_name!(CPU_IR_INDEX);
/// The `which` of [`CPU_IR_INDEX`] that asks for the thread's rank in its block
/// (`x + dim.x * (y + dim.y * z)`): the CPU link sees what a kernel derives from it (its warp,
/// its lane) without reading the arithmetic back.
pub const CPU_IR_RANK: u32 = 12;
/// The block barrier, `sync_threads()` (a Rust function, never inlined).
pub const CPU_IR_BARRIER: &str = abi_name!(CPU_IR_BARRIER);
/// The warp barrier every warp operation reaches (a Rust function, never inlined).
pub const CPU_IR_WARP_BARRIER: &str = abi_name!(CPU_IR_WARP_BARRIER);
/// `extern "C" fn(launch: *const CpuLaunch)`: starts a run in region form on this OS thread.
pub const CPU_IR_ENTER: &str = abi_name!(CPU_IR_ENTER);
/// `extern "C" fn(launch: *const CpuLaunch, linear: u64)`: starts block `linear` of the run.
pub const CPU_IR_BEGIN_BLOCK: &str = abi_name!(CPU_IR_BEGIN_BLOCK);
/// `extern "C" fn(x: u32, y: u32, z: u32)`: makes a thread of the running block the current
/// one, for the functions a region calls that read the index state.
pub const CPU_IR_SET_THREAD: &str = abi_name!(CPU_IR_SET_THREAD);
/// `extern "C" fn(bytes: usize) -> *mut u8`: the OS thread's lane storage, 64-byte aligned, or
/// null when `bytes` do not fit it.
pub const CPU_IR_LANES: &str = abi_name!(CPU_IR_LANES);
/// `shared_array!`'s slot of the running block (a Rust function, never inlined): the same
/// pointer for every thread of a block.
pub const CPU_IR_SHARED_SLOT: &str = abi_name!(CPU_IR_SHARED_SLOT);
/// `generic_shared_array!`'s slot of the running block, as [`CPU_IR_SHARED_SLOT`].
pub const CPU_IR_GENERIC_SHARED_TILE: &str = abi_name!(CPU_IR_GENERIC_SHARED_TILE);
/// `extern "C" fn() -> bool`: whether the block- or grid-stride loop that asks runs trip by
/// trip for the whole block (a Rust function, never inlined, answering `false`). The CPU link
/// answers `true` in the bodies whose regions it forms, `false` elsewhere.
pub const CPU_IR_INTERLEAVED: &str = abi_name!(CPU_IR_INTERLEAVED);
/// The top of each trip of such a loop: a place the CPU link cuts regions at, as at a block
/// barrier, so that the block's threads run each trip in turn (a Rust function, never inlined,
/// that does nothing).
pub const CPU_IR_INTERLEAVE: &str = abi_name!(CPU_IR_INTERLEAVE);
/// `extern "C" fn(rank: u32) -> u32`: which of its two exchange slots the thread of rank `rank`
/// uses for its warp operation (0 or 1), turned for its next one (a Rust function, never
/// inlined). In a kernel whose regions it forms, the CPU link keeps each thread's turn in a
/// local instead: 0 at the start and again after each block barrier.
pub const CPU_IR_WARP_TURN: &str = abi_name!(CPU_IR_WARP_TURN);

/// Symbol of a GPU image's `*mut DeviceChannel` global, which the runtime sets when it loads
/// the module and the device link keeps external (and reads as invariant).
pub const CHANNEL: &str = abi_name!(CHANNEL);
/// The kernel side's panic reporter: kind, message, location and values, written to the
/// channel's panic record. The device link redirects core's panic functions to it.
pub const GPU_PANIC: &str = abi_name!(GPU_PANIC);
/// The reporter of a panic at a site of the image's panic-site table ([`PANIC_SITES_SYMBOL`]):
/// the site and three values.
pub const GPU_PANIC_AT: &str = abi_name!(GPU_PANIC_AT);
/// [`GPU_PANIC_AT`] with no value that is not zero.
pub const GPU_PANIC_AT0: &str = abi_name!(GPU_PANIC_AT0);
/// [`GPU_PANIC_AT`] with one value that is not zero.
pub const GPU_PANIC_AT1: &str = abi_name!(GPU_PANIC_AT1);
/// [`GPU_PANIC_AT`] with two values that are not zero.
pub const GPU_PANIC_AT2: &str = abi_name!(GPU_PANIC_AT2);
/// The site reporters by the number of values they take: [`GPU_PANIC_AT0`] to
/// [`GPU_PANIC_AT2`].
pub const GPU_PANIC_AT_N: [&str; 3] = [GPU_PANIC_AT0, GPU_PANIC_AT1, GPU_PANIC_AT2];
/// On AMD GPUs, the site reporter a whole wavefront calls for its first failing lane.
pub const GPU_PANIC_AT_THREAD: &str = abi_name!(GPU_PANIC_AT_THREAD);
/// On AMD GPUs, the calling thread's index in its block as a panic record packs it, which the
/// device link computes where a kernel starts.
pub const GPU_THREAD_INDEX: &str = abi_name!(GPU_THREAD_INDEX);
/// The end of every report: the record marked written, then the device's trap.
pub const GPU_PANIC_FINISH: &str = abi_name!(GPU_PANIC_FINISH);
/// The kernel side's stand-in for `core::panicking::panic_bounds_check`.
pub const GPU_PANIC_BOUNDS_CHECK: &str = abi_name!(GPU_PANIC_BOUNDS_CHECK);
/// The kernel side's stand-in for core's `slice_index_fail`.
pub const GPU_SLICE_INDEX_FAIL: &str = abi_name!(GPU_SLICE_INDEX_FAIL);
/// The kernel side's stand-in for core's `str::slice_error_fail`.
pub const GPU_STR_SLICE_FAIL: &str = abi_name!(GPU_STR_SLICE_FAIL);
/// The kernel side's stand-in for `core::option::expect_failed`.
pub const GPU_EXPECT_FAILED: &str = abi_name!(GPU_EXPECT_FAILED);
/// The kernel side's stand-in for `core::result::unwrap_failed`.
pub const GPU_UNWRAP_FAILED: &str = abi_name!(GPU_UNWRAP_FAILED);
/// The kernel side's stand-in for `core::panicking::assert_failed`.
pub const GPU_ASSERT_FAILED: &str = abi_name!(GPU_ASSERT_FAILED);
/// Symbol of a GPU image's panic-site table (`panic_sites`), written by the device link and
/// read by the runtime when it loads the module.
pub const PANIC_SITES_SYMBOL: &str = abi_name!(PANIC_SITES_SYMBOL);

/// Prefix of the static that carries a kernel's launch bound to the device link:
/// `LAUNCH_BOUNDS_PREFIX<kernel>.<bound>` (`launch_bounds`).
pub const LAUNCH_BOUNDS_PREFIX: &str = abi_name!(LAUNCH_BOUNDS_PREFIX);
/// Link section that marks a static as per-block shared memory on GPU targets: the device link
/// moves every global of it to address space 3 with an undefined initializer.
pub const SHARED_SECTION: &str = abi_name!(SHARED_SECTION);
/// Link section of `offload_rt::constant!` statics, which the device link moves to address
/// space 4 (`.const`, AMD's constant memory).
pub const CONSTANT_SECTION: &str = abi_name!(CONSTANT_SECTION);
/// The function `offload_rt::generic_shared_array!` calls on GPUs, which the device link
/// replaces call by call with a global in address space 3.
pub const GENERIC_TILE_FUNCTION: &str = abi_name!(GENERIC_TILE_FUNCTION);
/// The identity function through which a `&[T]` kernel parameter's loads go, which the device
/// link removes, marking the loads invariant.
pub const READ_ONLY_MARKER: &str = abi_name!(READ_ONLY_MARKER);

/// The helpers below are defined by the device link (`offload-build`'s `device_link`, in IR or
/// inline PTX) and declared `extern` by the kernel side (`offload_rt::kernel`).
///
/// The helper that returns the generic address of [`DYNAMIC_SHARED_MEMORY`] (Rust cannot
/// declare an address-space-3 global).
pub const DYNAMIC_SHARED: &str = abi_name!(DYNAMIC_SHARED);
/// The image's dynamic shared memory: an external address-space-3 array the device link declares.
pub const DYNAMIC_SHARED_MEMORY: &str = abi_name!(DYNAMIC_SHARED_MEMORY);
/// The helper that rounds an `f32` to bfloat16 bits (`fptrunc float to bfloat`).
pub const F32_TO_BF16: &str = abi_name!(F32_TO_BF16);
/// The GPU helper rounding two floats to `f16` at once, packed low first.
pub const F32X2_TO_F16X2: &str = abi_name!(F32X2_TO_F16X2);
/// The GPU helper rounding two floats to `bf16` at once, packed low first.
pub const F32X2_TO_BF16X2: &str = abi_name!(F32X2_TO_BF16X2);
/// The helper that adds a `half` atomically (`atomicrmw fadd half`), returning the old bits.
pub const ATOMIC_ADD_F16: &str = abi_name!(ATOMIC_ADD_F16);
/// The helper that adds a `bfloat` atomically (`atomicrmw fadd bfloat`), returning the old bits.
pub const ATOMIC_ADD_BF16: &str = abi_name!(ATOMIC_ADD_BF16);
/// On AMD GPUs, the helper that reads a field of the HSA kernel dispatch packet.
pub const AMDGPU_DISPATCH_FIELD: &str = abi_name!(AMDGPU_DISPATCH_FIELD);
/// On AMD GPUs, the block barrier between workgroup-scope fences.
pub const AMDGPU_SYNC_THREADS: &str = abi_name!(AMDGPU_SYNC_THREADS);
/// On AMD GPUs, the wavefront barrier between wavefront-scope fences.
pub const AMDGPU_SYNC_WARP: &str = abi_name!(AMDGPU_SYNC_WARP);
/// On AMD GPUs, the wavefront size of the image's processor.
pub const AMDGPU_WAVE_SIZE: &str = abi_name!(AMDGPU_WAVE_SIZE);
/// On AMD GPUs, a wavefront's direct load from global memory to LDS, 4 bytes a lane into
/// consecutive words from one LDS address (`global_load_lds_dword`).
pub const AMDGPU_LDS_DMA_4: &str = abi_name!(AMDGPU_LDS_DMA_4);
/// On AMD GPUs, the wait for this wavefront's direct loads to LDS (`s_waitcnt vmcnt(0)`).
pub const AMDGPU_LDS_DMA_WAIT: &str = abi_name!(AMDGPU_LDS_DMA_WAIT);
/// Whether the image's processor loads from global memory directly to LDS (AMD CDNA).
pub const HAS_LDS_DMA: &str = abi_name!(HAS_LDS_DMA);
/// The NVIDIA tensor-core matrix multiply-accumulate of `f16` inputs.
pub const MMA_F16: &str = abi_name!(MMA_F16);
/// The NVIDIA tensor-core matrix multiply-accumulate of `bf16` inputs.
pub const MMA_BF16: &str = abi_name!(MMA_BF16);
/// The 32×32×8 matrix multiply-accumulate of `f16` inputs (`kernel::matrix::m32n32k8`).
pub const MMA_M32N32K8_F16: &str = abi_name!(MMA_M32N32K8_F16);
/// The 32×32×8 matrix multiply-accumulate of `bf16` inputs.
pub const MMA_M32N32K8_BF16: &str = abi_name!(MMA_M32N32K8_BF16);
/// Prefix of the asynchronous copies from global to shared memory (`cp.async`):
/// `CP_ASYNC_PREFIX<bytes>`, bytes 4, 8 or 16.
pub const CP_ASYNC_PREFIX: &str = abi_name!(CP_ASYNC_PREFIX);
/// The helper that closes a group of asynchronous copies.
pub const CP_ASYNC_COMMIT: &str = abi_name!(CP_ASYNC_COMMIT);
/// Prefix of the waits for all but `n` groups of asynchronous copies: `CP_ASYNC_WAIT_PREFIX<n>`.
pub const CP_ASYNC_WAIT_PREFIX: &str = abi_name!(CP_ASYNC_WAIT_PREFIX);
/// Prefix of the `ldmatrix` helpers: `LDMATRIX_PREFIX x<count>[_trans]`, count 1, 2 or 4.
pub const LDMATRIX_PREFIX: &str = abi_name!(LDMATRIX_PREFIX);
/// Prefix of the `stmatrix` helpers: `STMATRIX_PREFIX x<count>[_trans]`, count 1, 2 or 4.
pub const STMATRIX_PREFIX: &str = abi_name!(STMATRIX_PREFIX);
/// The image's constant: whether its device has `stmatrix` (NVIDIA sm_90 and later).
pub const HAS_STMATRIX: &str = abi_name!(HAS_STMATRIX);
/// The image's constant: whether its device has the Tensor Memory Accelerator.
pub const HAS_TMA: &str = abi_name!(HAS_TMA);
/// The image's constant: whether its device has warpgroup matrix multiplies and `setmaxnreg`.
pub const HAS_WGMMA: &str = abi_name!(HAS_WGMMA);
/// Hopper's `mbarrier.init` helper.
pub const MBARRIER_INIT: &str = abi_name!(MBARRIER_INIT);
/// Hopper's `mbarrier.arrive` helper.
pub const MBARRIER_ARRIVE: &str = abi_name!(MBARRIER_ARRIVE);
/// Hopper's `mbarrier.arrive.expect_tx` helper.
pub const MBARRIER_ARRIVE_EXPECT_TX: &str = abi_name!(MBARRIER_ARRIVE_EXPECT_TX);
/// Hopper's `mbarrier.expect_tx` helper.
pub const MBARRIER_EXPECT_TX: &str = abi_name!(MBARRIER_EXPECT_TX);
/// Hopper's `mbarrier.try_wait.parity` helper.
pub const MBARRIER_TRY_WAIT_PARITY: &str = abi_name!(MBARRIER_TRY_WAIT_PARITY);
/// Hopper's fence after an `mbarrier.init`.
pub const MBARRIER_FENCE_INIT: &str = abi_name!(MBARRIER_FENCE_INIT);
/// The TMA load of a 2-D tile to shared memory.
pub const TMA_LOAD_2D: &str = abi_name!(TMA_LOAD_2D);
/// The TMA load of a 2-D tile multicast to the blocks of a cluster.
pub const TMA_LOAD_2D_MULTICAST: &str = abi_name!(TMA_LOAD_2D_MULTICAST);
/// The TMA store of a 2-D tile from shared memory.
pub const TMA_STORE_2D: &str = abi_name!(TMA_STORE_2D);
/// The helper that closes a group of TMA stores.
pub const TMA_STORE_COMMIT: &str = abi_name!(TMA_STORE_COMMIT);
/// Prefix of the waits for all but `n` groups of TMA stores: `TMA_STORE_WAIT_PREFIX<n>`.
pub const TMA_STORE_WAIT_PREFIX: &str = abi_name!(TMA_STORE_WAIT_PREFIX);
/// The prefetch of a tensor map.
pub const TMA_PREFETCH: &str = abi_name!(TMA_PREFETCH);
/// The fence between the generic and the async proxy.
pub const FENCE_PROXY_ASYNC: &str = abi_name!(FENCE_PROXY_ASYNC);
/// The arrival at a cluster's barrier.
pub const CLUSTER_ARRIVE: &str = abi_name!(CLUSTER_ARRIVE);
/// The wait at a cluster's barrier.
pub const CLUSTER_WAIT: &str = abi_name!(CLUSTER_WAIT);
/// The calling block's rank in its cluster.
pub const CLUSTER_BLOCK_RANK: &str = abi_name!(CLUSTER_BLOCK_RANK);
/// The number of blocks of the cluster.
pub const CLUSTER_BLOCKS: &str = abi_name!(CLUSTER_BLOCKS);
/// The address of a shared location in another block of the cluster.
pub const CLUSTER_MAP_SHARED: &str = abi_name!(CLUSTER_MAP_SHARED);
/// Prefix of the warpgroup helpers, among them the multiplies:
/// `WGMMA_PREFIX m64n<n>k16_<f16|bf16>_<n|t><n|t>`.
pub const WGMMA_PREFIX: &str = abi_name!(WGMMA_PREFIX);
/// The fence before a warpgroup's multiplies.
pub const WGMMA_FENCE: &str = abi_name!(WGMMA_FENCE);
/// The helper that closes a group of warpgroup multiplies.
pub const WGMMA_COMMIT: &str = abi_name!(WGMMA_COMMIT);
/// Prefix of the waits for all but `n` groups of warpgroup multiplies: `WGMMA_WAIT_PREFIX<n>`.
pub const WGMMA_WAIT_PREFIX: &str = abi_name!(WGMMA_WAIT_PREFIX);
/// The 32-bit shared-window address of a generic pointer to shared memory.
pub const SHARED_ADDRESS: &str = abi_name!(SHARED_ADDRESS);
/// Prefix of the `setmaxnreg` helpers: `SETMAXNREG_PREFIX<inc|dec>_<registers>`.
pub const SETMAXNREG_PREFIX: &str = abi_name!(SETMAXNREG_PREFIX);

/// Bytes of static shared memory one GPU kernel may use, the limit of every device: `ptxas`
/// refuses more in static declarations, and the CPU device's arena is this size.
pub const MAX_STATIC_SHARED_BYTES: usize = 48 * 1024;
/// Bytes of shared memory (static and dynamic together) a block can use on the CPU device.
pub const MAX_SHARED_BYTES: usize = 64 * 1024;
/// Bytes of constant memory an NVIDIA module has for all its `constant!` statics together.
pub const MAX_CONSTANT_BYTES: usize = 64 * 1024;

/// Section of a host binary, or an embedding object, that holds the bundle of device images
/// (`SHT_LLVM_OFFLOADING`, 8-aligned), as clang names it.
pub const OFFLOADING_SECTION: &str = abi_name!(OFFLOADING_SECTION);
/// Section of the embedding object's constructor, which registers its descriptor.
pub const REGISTRATION_CONSTRUCTOR_SECTION: &str = abi_name!(REGISTRATION_CONSTRUCTOR_SECTION);
/// The runtime's function the embedding object's constructor calls with its descriptor.
pub const REGISTER_LIB: &str = abi_name!(REGISTER_LIB);
/// The runtime's function the embedding object registers with `atexit`.
pub const UNREGISTER_LIB: &str = abi_name!(UNREGISTER_LIB);
/// `magic` of every registration descriptor (`offload_rt::registry::OffloadDescriptor`, which
/// the embedding object declares again): "OFLD" read as a little-endian `u32`'s digits.
pub const OFFLOAD_DESCRIPTOR_MAGIC: u32 = 0x4F46_4C44;
/// The layout version of the registration descriptor.
pub const OFFLOAD_DESCRIPTOR_VERSION: u32 = 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_symbols_share_the_exported_prefix() {
        for symbol in [
            CPU_RUN_PREFIX,
            CPU_THREAD_PREFIX,
            CPU_REGIONS_PREFIX,
            CPU_NOTE_PREFIX,
            CPU_ABI_SYMBOL,
            CPU_POSITION_SYMBOL,
            CPU_BODY_PREFIX,
            CPU_IR_REGIONS_PREFIX,
        ] {
            assert!(symbol.starts_with(CPU_SYMBOL_PREFIX), "{symbol}");
        }
    }

    #[test]
    fn site_reporters_are_named_after_the_reporter() {
        for (n, reporter) in GPU_PANIC_AT_N.iter().enumerate() {
            assert_eq!(
                reporter.strip_prefix(GPU_PANIC_AT),
                Some(n.to_string().as_str())
            );
        }
        assert!(GPU_PANIC_AT.starts_with(GPU_PANIC));
    }

    #[test]
    fn the_macro_and_the_constants_agree() {
        assert_eq!(abi_name!(CHANNEL), CHANNEL);
        assert_eq!(abi_name!(GPU_PANIC_AT_THREAD), GPU_PANIC_AT_THREAD);
        assert_eq!(abi_name!(OFFLOADING_SECTION), OFFLOADING_SECTION);
    }
}
