//! The CPU device on real images: a kernel crate (tests/fixtures/kernels) is built for the CPU
//! device by the build engine (`offload_build::tooling::host_device`, as `build.rs` builds it),
//! registered from memory as an OffloadBinary, and launched through its typed handles.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

mod cpu_common;

use offload_rt::__internal::{BarrierMode, CpuBackend, register_bundle};
use offload_rt::kernel::abi::{CPU_IR_REGIONS_PREFIX, CPU_REGIONS_PREFIX, CPU_THREAD_PREFIX};
use offload_rt::{
    Device, DeviceBuffer, DeviceCopy, Error, KernelPanicReport, LaunchConfig, PinnedBuffer,
};
use offload_rt_test_kernels as k;

use cpu_common::{MODULE, fixture_dir};
const KERNELS: &str = "saxpy,block_sum,grid_max,indices,reverse_blocks,divergent,block_uniform_barrier,hidden_barrier,matmul_tiled,blur3,block_scan,edge_totals,stepped_flags,wide_locals,loop_barrier,warp_ops,warp_block_sum,warp_sync_sum,reverse_dynamic,struct_params,math_f32,math_f64,libm_direct,saxpy_slices,fill_chunks,fill_rows,copy_offset,shifted_rows,float_casts,reverse_slices,empty_slices,empty_pointers,checked_block_sum,half_widen,half_narrow,half_params,half_dot,print_values,print_then_panic,panic_kinds,scale_float4,wide_ints,combine_flags,poke_bytes,axpy_tiled__f32__64,axpy_tiled__f32__128,axpy_tiled__f64__64,axpy_tiled__f64__128,axpy_tiled__u32__64,axpy_tiled__u32__128,complex_axpy,masked_warp_sum,hidden_warp_sum,warp_ops_in_statements,constant_tables,half_histogram,closure_over_tile,swap_two,recurse,recurse_after_barrier,recursive_halving,print_deep,pyramid_min,skipping_passes,halving_offsets,halo_stencil,tiled_transpose,mirrored_rows,shared_atomics,strided_histogram,strided_first_hits,tuple_params,generic_tiles,grid_rounds,grid_mismatch,mma_gemm__f16,mma_gemm__bf16,mma_gemm_32x32__f16,mma_gemm_32x32__bf16,wide_tiles__f16,wide_tiles__bf16,matrix_loads,matrix_stores,accumulator_to_tile__f16,accumulator_to_tile__bf16,staged_reverse,tile_copy_async,scan_with_helper,reduce_with_helpers,tiled_weighted_sums,shared_shuffle_rows,match_phases,tma_tile,tma_store_tile,wgmma_tile,register_handoff,accumulator_rows,shuffle_distances,early_exit_warp_sum,clamped_window,parked_lanes";
/// The same image registered a second time, by another descriptor, as another module.
const SECOND_MODULE: &str = "offload_rt_second_module";

/// The fixture's CPU image, checked to export exactly [`KERNELS`].
fn build_image() -> Result<Vec<u8>, String> {
    let (bytes, mut kernels) = cpu_common::build_image()?;
    kernels.sort();
    let mut expected: Vec<&str> = KERNELS.split(',').collect();
    expected.sort();
    assert_eq!(kernels, expected, "kernels the CPU image exports");
    Ok(bytes)
}

/// The fixture's CPU image as a bundle of module `module`.
fn bundle(module: &str, image: &[u8]) -> Vec<u8> {
    cpu_common::bundle(module, KERNELS, image)
}

/// Registers the fixture image once per test process; `false` (after printing why) when it
/// cannot be built on this machine.
fn setup() -> bool {
    image().is_some()
}

/// The fixture's CPU image, registered once per test process; `None` (after printing why)
/// when it cannot be built on this machine.
fn image() -> Option<&'static [u8]> {
    static READY: OnceLock<Result<Vec<u8>, String>> = OnceLock::new();
    let ready = READY.get_or_init(|| {
        let image = build_image()?;
        register_bundle("cpu_device_test", bundle(MODULE, &image));
        register_bundle("cpu_device_test_2", bundle(SECOND_MODULE, &image));
        Ok(image)
    });
    match ready {
        Ok(image) => Some(image),
        Err(why) => {
            cpu_common::skip(why);
            None
        }
    }
}

#[test]
fn saxpy_matches_the_host() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let n = 1_000_003u32;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    let dx = DeviceBuffer::from_slice(&dev, &x).unwrap();
    let mut dy = DeviceBuffer::from_slice(&dev, &y).unwrap();
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    let report =
        unsafe { k::saxpy.launch(&dev, LaunchConfig::for_num_elems(n), n, 3.0, &dx, &mut dy) }
            .unwrap();
    assert_eq!(report.kernel, "saxpy");
    assert_eq!(report.module, MODULE);
    assert_eq!(report.image.triple, "x86_64-unknown-linux-gnu");
    assert_eq!(report.image.source, "cpu_device_test");
    assert_eq!(dev.last_launch().as_ref(), Some(&report));
    let got = dy.to_vec().unwrap();
    for i in 0..n as usize {
        assert_eq!(got[i], 3.0 * x[i] + y[i], "element {i}");
    }
    // A second launch takes the fast path decided on the first.
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    unsafe { k::saxpy.launch(&dev, LaunchConfig::for_num_elems(n), n, -3.0, &dx, &mut dy) }
        .unwrap();
    assert_eq!(dy.to_vec().unwrap(), y);

    // `#[len(n)]` on a raw pointer: a buffer shorter than `n` is refused before the launch.
    let mut short = DeviceBuffer::<f32>::zeroed(&dev, n as usize - 1).unwrap();
    // SAFETY: the launch is refused before it runs.
    let err = unsafe {
        k::saxpy.launch(
            &dev,
            LaunchConfig::for_num_elems(n),
            n,
            1.0,
            &dx,
            &mut short,
        )
    }
    .unwrap_err();
    assert!(
        matches!(
            &err,
            Error::BufferTooShort { param: "y", index: 3, needed, needed_expr: "n", .. }
                if *needed == n as usize
        ),
        "{err}"
    );
}

/// The asynchronous-copy pipeline on the CPU device: copies land in their stages, a stage is
/// read after its wait and the block's barrier, and the launch bound does not stop the launch.
#[test]
fn pipelined_copies_reach_the_other_threads_of_the_block() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    for (blocks, tiles) in [(1u32, 1u32), (3, 2), (2, 7)] {
        let n = (blocks * tiles) as usize * k::STAGED_TILE;
        let input: Vec<u32> = (0..n as u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let din = DeviceBuffer::from_slice(&dev, &input).unwrap();
        let mut dout = DeviceBuffer::<u32>::zeroed(&dev, n).unwrap();
        let config = LaunchConfig::linear(blocks, k::STAGED_TILE as u32);
        // SAFETY: the buffers hold every block's tiles.
        unsafe { k::staged_reverse.launch(&dev, config, tiles, &din, &mut dout) }.unwrap();
        let want: Vec<u32> = input
            .chunks(k::STAGED_TILE)
            .flat_map(|tile| tile.iter().rev().copied())
            .collect();
        assert_eq!(
            dout.to_vec().unwrap(),
            want,
            "{blocks} blocks of {tiles} tiles"
        );
    }
}

/// A whole swizzled tile copied by the block (`SwizzledTile::copy_async_from`) lands where
/// the tile's element addresses say, for each block's own part of the input.
#[test]
fn a_tile_copied_by_the_block_lands_in_its_swizzled_places() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let (blocks, ld) = (3usize, 40usize);
    let input: Vec<u16> = (0..blocks * k::COPIED_ROWS * ld)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761) as u16)
        .collect();
    let din = DeviceBuffer::from_slice(&dev, &input).unwrap();
    let tile = k::COPIED_ROWS * k::COPIED_COLS;
    let mut dout = DeviceBuffer::<u16>::zeroed(&dev, blocks * tile).unwrap();
    let config = LaunchConfig::linear(blocks as u32, 128);
    // SAFETY: the buffers hold every block's tile.
    unsafe { k::tile_copy_async.launch(&dev, config, ld as u32, &din, &mut dout) }.unwrap();
    let out = dout.to_vec().unwrap();
    for b in 0..blocks {
        for row in 0..k::COPIED_ROWS {
            for col in 0..k::COPIED_COLS {
                assert_eq!(
                    out[b * tile + col * k::COPIED_ROWS + row],
                    input[(b * k::COPIED_ROWS + row) * ld + col],
                    "block {b} ({row}, {col})"
                );
            }
        }
    }
}

#[test]
fn block_reduction_with_shared_memory_and_barriers() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let n = 300_001u32;
    let input: Vec<u32> = (0..n).map(|i| i.wrapping_mul(2_654_435_761) >> 8).collect();
    let expected: u64 = input.iter().map(|&v| u64::from(v)).sum();
    let din = DeviceBuffer::from_slice(&dev, &input).unwrap();
    for _ in 0..2 {
        let mut out = DeviceBuffer::<u64>::zeroed(&dev, 1).unwrap();
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe { k::block_sum.launch(&dev, LaunchConfig::for_num_elems(n), n, &din, &mut out) }
            .unwrap();
        assert_eq!(out.to_vec().unwrap(), [expected]);
    }
}

/// A grid's maximum through one relaxed `fetch_max` a block, which each worker combines over
/// its blocks in region form: the same maximum in both ways of running barriers, from one
/// worker and from several.
#[test]
fn a_grids_one_maximum_is_the_same_however_the_blocks_run() {
    if !setup() {
        return;
    }
    let n = 300_001u32;
    let input: Vec<u32> = (0..n).map(|i| i.wrapping_mul(2_654_435_761) >> 3).collect();
    let expected = *input.iter().max().unwrap();
    for (mode, threads) in [
        (BarrierMode::Regions, 1),
        (BarrierMode::Regions, 3),
        (BarrierMode::Coroutines, 3),
    ] {
        let backend = CpuBackend::with_threads(threads).with_barriers(mode);
        let dev = Device::from_backend(Box::new(backend));
        let din = DeviceBuffer::from_slice(&dev, &input).unwrap();
        let mut out = DeviceBuffer::<u32>::zeroed(&dev, 1).unwrap();
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe { k::grid_max.launch(&dev, LaunchConfig::for_num_elems(n), n, &din, &mut out) }
            .unwrap();
        assert_eq!(
            out.to_vec().unwrap(),
            [expected],
            "{mode:?}, {threads} threads"
        );
    }
}

/// Threads parked while others run: the first warp of each block of 128 (two rows of a 16-wide
/// block, half a row of a 64-wide one) sums the warps' totals while the other warps wait at the
/// barrier after it; then the threads with `x` below `live` of every row (whole warps) go on
/// through warp operations, the others return. What each thread writes is the same with one
/// worker, three, and on the coroutines, for none of a row to all of it.
#[test]
fn threads_parked_at_a_barrier_or_returned_wait_for_the_others() {
    if !setup() {
        return;
    }
    let blocks = 37usize;
    let input: Vec<u32> = (0..blocks as u32 * 128)
        .map(|i| i.wrapping_mul(2_654_435_761) >> 7)
        .collect();
    let add = |a: u32, v: &u32| a.wrapping_add(*v);
    let totals: Vec<u32> = input.chunks(128).map(|b| b.iter().fold(0, add)).collect();
    for ((bx, by), live) in [
        ((16, 8), 0),
        ((16, 8), 16),
        ((64, 2), 0),
        ((64, 2), 32),
        ((64, 2), 64),
    ] {
        let want: Vec<u32> = (0..input.len())
            .map(|i| {
                let (block, t) = (i / 128, i % 128);
                if t % bx as usize >= live as usize {
                    return 0;
                }
                let warp = &input[block * 128 + t / 32 * 32..][..32];
                warp.iter()
                    .fold(0u32, |a, v| a.wrapping_add(v.wrapping_add(totals[block])))
            })
            .collect();
        let want_totals = if live == 0 {
            vec![0; blocks]
        } else {
            totals.clone()
        };
        for (mode, threads) in [
            (BarrierMode::Regions, 1),
            (BarrierMode::Regions, 3),
            (BarrierMode::Coroutines, 3),
        ] {
            let backend = CpuBackend::with_threads(threads).with_barriers(mode);
            let dev = Device::from_backend(Box::new(backend));
            let din = DeviceBuffer::from_slice(&dev, &input).unwrap();
            let mut out = DeviceBuffer::<u32>::zeroed(&dev, input.len()).unwrap();
            let mut sums = DeviceBuffer::<u32>::zeroed(&dev, blocks).unwrap();
            let config = LaunchConfig {
                grid: (blocks as u32, 1, 1),
                block: (bx, by, 1),
                shared_mem_bytes: 0,
                cluster: (1, 1, 1),
            };
            // SAFETY: 128 elements of `input` and `out` per block, one of `totals`.
            unsafe { k::parked_lanes.launch(&dev, config, live, &din, &mut out, &mut sums) }
                .unwrap();
            let what = format!("{bx} × {by}, live {live}, {mode:?}, {threads} threads");
            assert_eq!(out.to_vec().unwrap(), want, "{what}");
            assert_eq!(sums.to_vec().unwrap(), want_totals, "{what}");
        }
    }
}

/// A kernel whose barriers sit in a recursive helper keeps its coroutines (the image says why)
/// and computes what a GPU does.
#[test]
fn barriers_in_a_recursion_run_on_coroutines() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let values: Vec<u32> = (0..1000u32)
        .map(|i| i.wrapping_mul(2_654_435_761) >> 12)
        .collect();
    let din = DeviceBuffer::from_slice(&dev, &values).unwrap();
    let block = 128usize;
    let blocks = values.len().div_ceil(block);
    let mut out = DeviceBuffer::<u32>::zeroed(&dev, blocks).unwrap();
    k::recursive_halving
        .launch(
            &dev,
            LaunchConfig::linear(blocks as u32, block as u32),
            &din,
            &mut out,
        )
        .unwrap();
    let want: Vec<u32> = values
        .chunks(block)
        .map(|c| c.iter().fold(0u32, |a, v| a.wrapping_add(*v)))
        .collect();
    assert_eq!(out.to_vec().unwrap(), want);
}

#[test]
fn shared_memory_is_per_block() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let blocks = 513u32;
    let data: Vec<i32> = (0..blocks as i32 * 64).collect();
    let mut d = DeviceBuffer::from_slice(&dev, &data).unwrap();
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    unsafe { k::reverse_blocks.launch(&dev, LaunchConfig::linear(blocks, 64), &mut d) }.unwrap();
    let got = d.to_vec().unwrap();
    for (b, chunk) in got.chunks(64).enumerate() {
        let want: Vec<i32> = (0..64).rev().map(|t| b as i32 * 64 + t).collect();
        assert_eq!(chunk, want, "block {b}");
    }
}

#[test]
fn indices_in_three_dimensions() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let config = LaunchConfig {
        grid: (3, 4, 2),
        block: (8, 2, 3),
        shared_mem_bytes: 0,
        cluster: (1, 1, 1),
    };
    let total = 3 * 4 * 2 * 8 * 2 * 3;
    let mut out = DeviceBuffer::<u32>::zeroed(&dev, total).unwrap();
    let mut count = DeviceBuffer::<u32>::zeroed(&dev, 1).unwrap();
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    unsafe { k::indices.launch(&dev, config, &mut out, &mut count) }.unwrap();
    assert_eq!(count.to_vec().unwrap(), [total as u32]);
    let got = out.to_vec().unwrap();
    let mut i = 0;
    for bz in 0..2 {
        for by in 0..4 {
            for bx in 0..3 {
                for tz in 0..3 {
                    for ty in 0..2 {
                        for tx in 0..8 {
                            let want =
                                tx | ty << 4 | tz << 8 | bx << 12 | by << 16 | bz << 20 | 8 << 24;
                            assert_eq!(got[i], want, "thread {i}");
                            i += 1;
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn two_modules_from_two_descriptors() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let first = dev.load_module(MODULE).unwrap();
    let second = dev.load_module(SECOND_MODULE).unwrap();
    assert_eq!(first.source, "cpu_device_test");
    assert_eq!(second.source, "cpu_device_test_2");
    assert_eq!(second.module, SECOND_MODULE);
    let out = DeviceBuffer::<u32>::zeroed(&dev, 1024).unwrap();
    let count = DeviceBuffer::<u32>::zeroed(&dev, 1).unwrap();
    let (po, pc) = (out.device_ptr().0, count.device_ptr().0);
    let params = [
        (&raw const po).cast_mut().cast(),
        (&raw const pc).cast_mut().cast(),
    ];
    // SAFETY: `indices(out: *mut u32, count: *mut u32)` gets two u64 device addresses of live
    // buffers of this device, `out` with one element per thread of the launch (4 x 256).
    let report = unsafe {
        dev.launch_raw(
            SECOND_MODULE,
            "indices",
            &LaunchConfig::linear(4, 256),
            &params,
        )
    }
    .unwrap();
    assert_eq!(report.image.source, "cpu_device_test_2");
    assert_eq!(count.to_vec().unwrap(), [1024]);
    // Every thread but thread 0 of block 0 writes a non-zero value.
    assert!(out.to_vec().unwrap().iter().skip(1).all(|&v| v != 0));
}

#[test]
fn damaged_or_foreign_images_are_refused_by_name_before_they_are_loaded() {
    let Some(image) = image() else {
        return;
    };
    use offload_format::offload_binary::{KEY_IMAGE_CRC32, OffloadBinary, image_crc32};
    let with_crc = |module: &str, bytes: &[u8], crc: String| {
        let plain = bundle(module, bytes);
        let mut binary: OffloadBinary<'_> = offload_format::parse_all(&plain).unwrap().remove(0);
        binary.set(KEY_IMAGE_CRC32, crc);
        binary.to_bytes()
    };
    // One flipped byte in the middle of the image, against the CRC of the intact one.
    let mut damaged = image.to_vec();
    damaged[image.len() / 2] ^= 0x40;
    register_bundle(
        "damaged_image_test",
        with_crc("offload_rt_damaged", &damaged, image_crc32(image)),
    );
    // An image that matches its CRC but is no shared object of this machine.
    let truncated = &image[..200];
    register_bundle(
        "truncated_image_test",
        with_crc("offload_rt_truncated", truncated, image_crc32(truncated)),
    );
    let dev = Device::cpu();
    for (module, says) in [
        ("offload_rt_damaged", "damaged: CRC-32"),
        ("offload_rt_truncated", "past the image's 200 bytes"),
    ] {
        let err = dev.load_module(module).unwrap_err();
        assert!(
            matches!(&err, Error::ImageLoad { module: m, image, reason }
                if m == module && image.contains(module) && reason.contains(says)),
            "{err}"
        );
    }
}

#[test]
fn missing_kernel_and_module_are_typed_errors() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    // SAFETY: neither launch can reach a kernel: the lookups fail first.
    let err = unsafe { dev.launch_raw(MODULE, "no_such_kernel", &LaunchConfig::linear(1, 1), &[]) }
        .unwrap_err();
    assert!(
        matches!(&err, Error::KernelNotFound { kernel, module, .. } if kernel == "no_such_kernel" && module == MODULE),
        "{err}"
    );
    // SAFETY: as above.
    let err =
        unsafe { dev.launch_raw("no_such_module", "saxpy", &LaunchConfig::linear(1, 1), &[]) }
            .unwrap_err();
    assert!(
        matches!(&err, Error::NoImages { module } if module == "no_such_module"),
        "{err}"
    );
}

#[test]
fn bad_launch_configurations_are_typed_errors() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let mut d = DeviceBuffer::<i32>::zeroed(&dev, 64).unwrap();
    let shape = |grid, block| LaunchConfig {
        grid,
        block,
        shared_mem_bytes: 0,
        cluster: (1, 1, 1),
    };
    // The rule of `LaunchConfig::check`, which the CUDA and HIP backends apply too.
    for config in [
        LaunchConfig::linear(1, 0),
        LaunchConfig::linear(0, 0),
        LaunchConfig::linear(1, 2048),
        shape((1, 1, 1), (1, 1, 128)),
        shape((1, 65536, 1), (64, 1, 1)),
    ] {
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        let err = unsafe { k::reverse_blocks.launch(&dev, config, &mut d) }.unwrap_err();
        let expected = config.check().err();
        match &err {
            Error::InvalidLaunch { reason, .. } if config.shared_mem_bytes == 0 => {
                assert_eq!(Some(reason), expected.as_ref(), "{config:?}")
            }
            Error::InvalidLaunch { .. } => {}
            _ => panic!("{config:?}: {err}"),
        }
    }
}

/// The CPU device has no thread-block clusters: it says so, and refuses a launch with
/// clusters of more than one block, on its default stream and on a queue, before running
/// anything; a cluster of one is a plain launch.
#[test]
fn clusters_of_more_than_one_block_are_refused() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    assert!(!dev.supports_clusters());
    let data: Vec<i32> = (0..128).collect();
    let mut d = DeviceBuffer::from_slice(&dev, &data).unwrap();
    let clustered = LaunchConfig::linear(2, 64).with_cluster((2, 1, 1));
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    let err = unsafe { k::reverse_blocks.launch(&dev, clustered, &mut d) }.unwrap_err();
    assert!(
        matches!(&err, Error::InvalidLaunch { kernel, reason }
            if kernel == "reverse_blocks" && reason.contains("no thread-block clusters")),
        "{err}"
    );
    let stream = dev.stream().unwrap();
    // SAFETY: as above.
    let err = unsafe { k::reverse_blocks.launch(stream.device(), clustered, &mut d) }.unwrap_err();
    assert!(
        matches!(&err, Error::InvalidLaunch { reason, .. } if reason.contains("clusters")),
        "{err}"
    );
    stream.synchronize().unwrap();
    assert_eq!(d.to_vec().unwrap(), data, "nothing ran");
    let single = LaunchConfig::linear(2, 64).with_cluster((1, 1, 1));
    // SAFETY: as above.
    unsafe { k::reverse_blocks.launch(&dev, single, &mut d) }.unwrap();
    assert_ne!(d.to_vec().unwrap(), data);
}

/// A launch over no elements runs nothing and succeeds, as on CUDA and HIP (the backends
/// share `LaunchConfig::check`).
#[test]
fn an_empty_grid_runs_nothing() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let data: Vec<i32> = (0..64).collect();
    let mut d = DeviceBuffer::from_slice(&dev, &data).unwrap();
    for grid in [(0, 1, 1), (1, 0, 1), (1, 1, 0)] {
        let config = LaunchConfig {
            grid,
            ..LaunchConfig::linear(1, 64)
        };
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe { k::reverse_blocks.launch(&dev, config, &mut d) }.unwrap();
    }
    assert_eq!(d.to_vec().unwrap(), data);
    let n = 0u32;
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    unsafe { k::reverse_blocks.launch(&dev, LaunchConfig::linear(n.div_ceil(64), 64), &mut d) }
        .unwrap();
    assert_eq!(d.to_vec().unwrap(), data);
}

#[test]
fn buffers_of_another_device_are_refused() {
    if !setup() {
        return;
    }
    let a = Device::cpu();
    let b = Device::cpu();
    let mut d = DeviceBuffer::<i32>::zeroed(&b, 64).unwrap();
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    let err =
        unsafe { k::reverse_blocks.launch(&a, LaunchConfig::linear(1, 64), &mut d) }.unwrap_err();
    assert!(matches!(err, Error::WrongDevice { index: 0, .. }), "{err}");
}

#[test]
fn divergent_barrier_is_reported_then_handled() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let mut out = DeviceBuffer::<u32>::zeroed(&dev, 4 * 32).unwrap();
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    let err =
        unsafe { k::divergent.launch(&dev, LaunchConfig::linear(4, 32), &mut out) }.unwrap_err();
    assert!(matches!(err, Error::DivergentBarrier { .. }), "{err}");
    let mut out = DeviceBuffer::<u32>::zeroed(&dev, 4 * 32).unwrap();
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    unsafe { k::divergent.launch(&dev, LaunchConfig::linear(4, 32), &mut out) }.unwrap();
    assert!(out.to_vec().unwrap().iter().all(|&v| v == 1));
}

/// Lane ids, shuffles, votes and warp reductions on the CPU device's emulated warps of 32,
/// against the host's reading of the rules; a first launch decides barrier mode from them.
#[test]
fn warp_operations_match_the_rules() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    for (blocks, block) in [(3u32, 128u32), (2, 1024), (5, 32)] {
        let threads = (blocks * block) as usize;
        let mut out = DeviceBuffer::<u32>::zeroed(&dev, threads * k::WARP_OPS_WORDS).unwrap();
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe { k::warp_ops.launch(&dev, LaunchConfig::linear(blocks, block), 0x5eed, &mut out) }
            .unwrap();
        let got = out.to_vec().unwrap();
        let mut want = vec![0; got.len()];
        k::warp_ops_reference(0x5eed, 32, &mut want);
        for (t, (g, w)) in got
            .chunks(k::WARP_OPS_WORDS)
            .zip(want.chunks(k::WARP_OPS_WORDS))
            .enumerate()
        {
            assert_eq!(g, w, "blocks of {block}: thread {t}");
        }
    }
    // The same operations as statements run in region form: the same words, in partial
    // warps too (blocks of 48 and 100 threads).
    for (blocks, block) in [(3u32, 128u32), (2, 1024), (5, 32), (2, 48), (3, 100)] {
        let threads = (blocks * block) as usize;
        macro_rules! run {
            ($kernel:expr) => {{
                let words = threads * k::WARP_OPS_WORDS;
                let mut out = DeviceBuffer::<u32>::zeroed(&dev, words).unwrap();
                let config = LaunchConfig::linear(blocks, block);
                // SAFETY: the buffers hold every element the kernel reaches through its
                // pointers.
                unsafe { $kernel.launch(&dev, config, 0x5eed, &mut out) }.unwrap();
                out.to_vec().unwrap()
            }};
        }
        let (coroutines, regions) = (run!(k::warp_ops), run!(k::warp_ops_in_statements));
        for (t, (c, r)) in coroutines
            .chunks(k::WARP_OPS_WORDS)
            .zip(regions.chunks(k::WARP_OPS_WORDS))
            .enumerate()
        {
            assert_eq!(c, r, "blocks of {block}: thread {t}");
        }
    }
}

/// Shuffles by every kind of distance (0, within the warp, powers of two and not, a warp's
/// width and past it) in whole and partial warps, in every barrier mode, against CUDA's rules
/// with the CPU device's answer for a lane past a partial warp's last (the caller's own value).
#[test]
fn shuffles_by_every_distance_match_the_rules() {
    if !setup() {
        return;
    }
    let rule = |mode: &str, lane: usize, delta: usize, lanes: usize| -> usize {
        let src = match mode {
            "up" if delta <= lane => lane - delta,
            "down" if lane + delta < 32 => lane + delta,
            "xor" if lane ^ delta < 32 => lane ^ delta,
            "idx" => delta % 32,
            _ => lane,
        };
        if src < lanes { src } else { lane }
    };
    for (mode, dev) in barrier_modes() {
        for (blocks, block) in [(2u32, 256u32), (3, 48), (2, 100), (1, 1024)] {
            for delta in [0u32, 1, 2, 3, 5, 6, 8, 16, 24, 31, 32, 33, 64, 100] {
                let threads = (blocks * block) as usize;
                let mut out =
                    DeviceBuffer::<u32>::zeroed(&dev, threads * k::SHUFFLE_WORDS).unwrap();
                let config = LaunchConfig::linear(blocks, block);
                // SAFETY: the buffer holds SHUFFLE_WORDS words per thread of the launch.
                unsafe { k::shuffle_distances.launch(&dev, config, delta, &mut out) }.unwrap();
                let got = out.to_vec().unwrap();
                for (i, row) in got.chunks(k::SHUFFLE_WORDS).enumerate() {
                    let t = i % block as usize;
                    let (base, lane) = (i - t + t / 32 * 32, t % 32);
                    let lanes = (block as usize - t / 32 * 32).min(32);
                    let mut want = [0u32; k::SHUFFLE_WORDS];
                    for (m, name) in ["up", "down", "xor", "idx"].into_iter().enumerate() {
                        let (v, wide) = k::shuffle_values(
                            base + rule(name, lane, delta as usize, lanes),
                            delta,
                        );
                        want[m] = v;
                        want[4 + 2 * m] = wide as u32;
                        want[5 + 2 * m] = (wide >> 32) as u32;
                    }
                    assert_eq!(
                        row, want,
                        "{mode:?}: blocks of {block}, delta {delta}, thread {i}"
                    );
                }
            }
        }
    }
}

/// A warp reduction whose second level runs in warp 0 only, after a block barrier, in blocks of
/// 3 to 32 warps.
#[test]
fn warp_reduction_in_one_warp_after_a_barrier() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let n = 100_003u32;
    let input: Vec<u32> = (0..n).map(|i| i.wrapping_mul(2_654_435_761) >> 4).collect();
    let expected: u64 = input.iter().map(|&v| u64::from(v)).sum();
    let din = DeviceBuffer::from_slice(&dev, &input).unwrap();
    for block in [256u32, 96, 1024] {
        let mut out = DeviceBuffer::<u64>::zeroed(&dev, 1).unwrap();
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe {
            k::warp_block_sum.launch(
                &dev,
                LaunchConfig::linear(n.div_ceil(block), block),
                n,
                &din,
                &mut out,
            )
        }
        .unwrap();
        assert_eq!(out.to_vec().unwrap(), [expected], "blocks of {block}");
    }
    // Rows whose width is not a multiple of the warp's (whole warps a block, as a warp sum
    // needs): warps span rows, and the CPU link's loops over one warp's threads end at a
    // multiple of 32 of the rank (24 × 4), or also of `x`, one warp then in two of them
    // (40 × 4). Each row reads the same elements.
    for (bx, by) in [(24u32, 4u32), (40, 4)] {
        let mut out = DeviceBuffer::<u64>::zeroed(&dev, 1).unwrap();
        let config = LaunchConfig {
            grid: (n.div_ceil(bx), 1, 1),
            block: (bx, by, 1),
            shared_mem_bytes: 0,
            cluster: (1, 1, 1),
        };
        // SAFETY: as above; a thread reads element `block * bx + x`.
        unsafe { k::warp_block_sum.launch(&dev, config, n, &din, &mut out) }.unwrap();
        let rows = u64::from(by);
        assert_eq!(
            out.to_vec().unwrap(),
            [expected * rows],
            "blocks of {bx} × {by}"
        );
    }
}

/// `sync_warp` orders a warp's shared-memory steps: each warp's sum, from blocks of one and of
/// several warps.
#[test]
fn warp_sync_orders_shared_memory_steps() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let n = 4096u32;
    let input: Vec<u32> = (0..n).map(|i| i.wrapping_mul(2_654_435_761) >> 7).collect();
    let want: Vec<u32> = input
        .chunks(32)
        .map(|w| w.iter().fold(0u32, |a, &v| a.wrapping_add(v)))
        .collect();
    let din = DeviceBuffer::from_slice(&dev, &input).unwrap();
    for block in [32, 256] {
        let mut out = DeviceBuffer::<u32>::zeroed(&dev, want.len()).unwrap();
        // SAFETY: an element of `input` per thread, of `out` per warp.
        unsafe {
            k::warp_sync_sum.launch(&dev, LaunchConfig::linear(n / block, block), &din, &mut out)
        }
        .unwrap();
        assert_eq!(out.to_vec().unwrap(), want, "blocks of {block}");
    }
}

/// Dynamic shared memory beside a static array, in blocks of several sizes; then a launch over
/// the limit, refused with both figures (after the first launch, which ran, and before the
/// next).
#[test]
fn dynamic_shared_memory() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    for block in [64u32, 256, 1024] {
        let blocks = 7u32;
        let data: Vec<i32> = (0..(blocks * block) as i32).collect();
        let mut d = DeviceBuffer::from_slice(&dev, &data).unwrap();
        let config = LaunchConfig {
            shared_mem_bytes: block * 4,
            ..LaunchConfig::linear(blocks, block)
        };
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe { k::reverse_dynamic.launch(&dev, config, &mut d) }.unwrap();
        let want: Vec<i32> = data
            .chunks(block as usize)
            .enumerate()
            .flat_map(|(b, c)| c.iter().rev().map(move |v| v + b as i32))
            .collect();
        assert_eq!(d.to_vec().unwrap(), want, "blocks of {block}");
    }
    let mut d = DeviceBuffer::<i32>::zeroed(&dev, 64).unwrap();
    let over = LaunchConfig {
        shared_mem_bytes: 64 * 1024 - 8,
        ..LaunchConfig::linear(1, 64)
    };
    for _ in 0..2 {
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        let err = unsafe { k::reverse_dynamic.launch(&dev, over, &mut d) }.unwrap_err();
        match &err {
            Error::SharedMemoryLimit {
                static_bytes: 16,
                dynamic_bytes: 65528,
                limit: 65536,
                ..
            } => {}
            _ => panic!("{err}"),
        }
        let text = err.to_string();
        assert!(text.contains("16 bytes of static") && text.contains("65528 bytes of dynamic"));
    }
    let fits = LaunchConfig {
        shared_mem_bytes: 64 * 1024 - 16,
        ..LaunchConfig::linear(1, 64)
    };
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    unsafe { k::reverse_dynamic.launch(&dev, fits, &mut d) }.unwrap();
}

fn params() -> k::Params {
    k::Params {
        n: 10_007,
        flags: 3,
        affine: k::Affine {
            scale: [0.5, -1.25, 3.0],
            offset: 7.5,
        },
        bias: -0.125,
        lut: [1, 20, 300, 4000],
    }
}

/// `#[derive(DeviceCopy)] #[repr(C)]` structs, nested, with arrays, passed by value next to
/// a `u8` and a pointer.
#[test]
fn structs_by_value() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let p = params();
    let q = k::Pair { a: 9, b: 2 };
    let mut out = DeviceBuffer::<f64>::zeroed(&dev, p.n as usize).unwrap();
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    unsafe { k::struct_params.launch(&dev, LaunchConfig::for_num_elems(p.n), 7, p, q, &mut out) }
        .unwrap();
    let got = out.to_vec().unwrap();
    for (i, g) in got.iter().enumerate() {
        assert_eq!(
            g.to_bits(),
            k::params_value(7, &p, q, i).to_bits(),
            "element {i}"
        );
    }
}

/// `u128` and `i128` as scalar parameters and buffer elements, with their 16-byte alignment.
#[test]
fn wide_integers_as_parameters_and_elements() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let (a, b) = (
        0x0123_4567_89ab_cdef_0011_2233_4455_6677_u128,
        -(1_i128 << 100) - 5,
    );
    let x: Vec<u128> = (0..1000u128)
        .map(|i| i << 64 | i.wrapping_mul(0x9e37_79b9))
        .collect();
    let dx = DeviceBuffer::from_slice(&dev, &x).unwrap();
    let mut y = DeviceBuffer::<i128>::zeroed(&dev, x.len()).unwrap();
    k::wide_ints
        .launch(
            &dev,
            LaunchConfig::for_num_elems(x.len() as u32),
            a,
            b,
            &dx,
            &mut y,
        )
        .unwrap();
    let want: Vec<i128> = x.iter().map(|&v| k::wide_value(a, b, v)).collect();
    assert_eq!(y.to_vec().unwrap(), want);
}

/// Tuples by value, one with padding between its elements, one holding a struct and an array,
/// beside a tuple that bounds the threads that write.
#[test]
fn tuples_as_parameters() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let n = 1000;
    let mixed = (1.5f32, -7i8, 123_456_789_012u64);
    let nested = (k::Pair { a: 3, b: 40 }, [1u16, 10, 100]);
    let mut y = DeviceBuffer::<f64>::zeroed(&dev, n).unwrap();
    k::tuple_params
        .launch(
            &dev,
            LaunchConfig::for_num_elems(n as u32),
            (10, 900),
            mixed,
            nested,
            &mut y,
        )
        .unwrap();
    let want: Vec<f64> = (0..n)
        .map(|i| match i {
            10..900 => k::tuples_value(mixed, nested, i),
            _ => 0.0,
        })
        .collect();
    assert_eq!(y.to_vec().unwrap(), want);
}

/// Another owner's memory wrapped as a buffer (on the CPU device, host memory): kernels write
/// it, and dropping the wrapper leaves it to its owner. The device's driver handles are none.
#[test]
fn memory_of_another_owner_is_a_buffer() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    assert_eq!(dev.raw(), offload_rt::RawDevice::Cpu);
    assert!(dev.raw_stream().is_null());
    assert!(dev.stream().unwrap().device().raw_stream().is_null());
    // SAFETY: refused before the handle is used.
    let refused = unsafe { dev.stream_from_raw(std::ptr::null_mut()) }.unwrap_err();
    assert!(
        matches!(refused, offload_rt::Error::NoDriverStreams { .. }),
        "{refused}"
    );
    let n = 1000u32;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut theirs: Vec<f32> = vec![1.0; n as usize];
    let dx = DeviceBuffer::from_slice(&dev, &x).unwrap();
    {
        let address = offload_rt::DevicePtr(theirs.as_mut_ptr().expose_provenance() as u64);
        // SAFETY: `theirs` holds `n` floats, outlives the wrapper, and is not touched while
        // the wrapper is in use.
        let mut y = unsafe { DeviceBuffer::<f32>::from_raw_parts(&dev, address, n as usize) };
        // SAFETY: both buffers have `n` elements.
        unsafe { k::saxpy.launch(&dev, LaunchConfig::for_num_elems(n), n, 2.0, &dx, &mut y) }
            .unwrap();
    }
    let want: Vec<f32> = x.iter().map(|v| 2.0 * v + 1.0).collect();
    assert_eq!(theirs, want);
}

/// `generic_shared_array!` in a generic helper: two instantiations of one size, each with its
/// own tile, in blocks of 64 threads.
#[test]
fn generic_helpers_have_a_shared_tile_per_instantiation() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let n = 64 * 5 - 7;
    let a: Vec<u32> = (0..n as u32).map(|i| i * 3).collect();
    let b: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let da = DeviceBuffer::from_slice(&dev, &a).unwrap();
    let db = DeviceBuffer::from_slice(&dev, &b).unwrap();
    let mut y = DeviceBuffer::<f64>::zeroed(&dev, n).unwrap();
    k::generic_tiles
        .launch(&dev, LaunchConfig::linear(5, 64), &da, &db, &mut y)
        .unwrap();
    let want: Vec<f64> = (0..n)
        .map(|i| {
            let m = i / 64 * 64 + 63 - i % 64;
            f64::from(a.get(m).copied().unwrap_or(0)) + f64::from(b.get(m).copied().unwrap_or(0.0))
        })
        .collect();
    assert_eq!(y.to_vec().unwrap(), want);
}

/// A cooperative kernel on a CPU device of 5 threads: up to 5 blocks, each on a thread of its
/// own, synchronize the grid in every round, and every block sees every block's value; a
/// sixth block is refused before anything runs.
#[test]
fn cooperative_kernels_sync_the_grid_and_refuse_grids_that_do_not_fit() {
    if !setup() {
        return;
    }
    let dev = Device::from_backend(Box::new(CpuBackend::with_threads(5)));
    assert_eq!(k::grid_rounds.max_blocks(&dev, 64, 0).unwrap(), 5);
    let data: Vec<u32> = (0..1000u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let d = DeviceBuffer::from_slice(&dev, &data).unwrap();
    let rounds = 4u32;
    for (blocks, threads) in [(5u32, 64u32), (3, 33), (1, 1024)] {
        let b = blocks as usize;
        let mut slots = DeviceBuffer::<u64>::zeroed(&dev, rounds as usize * b).unwrap();
        let mut totals = DeviceBuffer::<u64>::zeroed(&dev, b).unwrap();
        // SAFETY: `slots` has `rounds * blocks` elements and `totals` `blocks`.
        unsafe {
            k::grid_rounds.launch(
                &dev,
                LaunchConfig::linear(blocks, threads),
                &d,
                rounds,
                &mut slots,
                &mut totals,
            )
        }
        .unwrap();
        let mut want_slots = vec![0u64; rounds as usize * b];
        let total = k::expected_rounds(&data, b, &mut want_slots);
        assert_eq!(slots.to_vec().unwrap(), want_slots, "{blocks} blocks");
        assert_eq!(totals.to_vec().unwrap(), vec![total; b], "{blocks} blocks");
    }

    let mut slots = DeviceBuffer::<u64>::zeroed(&dev, 64).unwrap();
    let mut totals = DeviceBuffer::<u64>::zeroed(&dev, 6).unwrap();
    // SAFETY: refused before the launch.
    let err = unsafe {
        k::grid_rounds.launch(
            &dev,
            LaunchConfig::linear(6, 64),
            &d,
            rounds,
            &mut slots,
            &mut totals,
        )
    }
    .unwrap_err();
    match &err {
        Error::CooperativeGridTooLarge {
            kernel,
            blocks,
            max,
            device,
        } => {
            assert_eq!((kernel.as_str(), *blocks, *max), ("grid_rounds", 6, 5));
            assert_eq!(device, "the CPU device");
        }
        other => panic!("expected CooperativeGridTooLarge, got {other:?}"),
    }
    assert_eq!(totals.to_vec().unwrap(), vec![0; 6], "nothing ran");
}

/// A block that returns while the others wait at the grid barrier would hang a GPU; the CPU
/// device names it, whichever block it is, and the device goes on.
#[test]
fn a_block_leaving_the_grid_barrier_is_reported() {
    if !setup() {
        return;
    }
    let dev = Device::from_backend(Box::new(CpuBackend::with_threads(4)));
    for skip in [0u32, 3] {
        let err = k::grid_mismatch
            .launch(&dev, LaunchConfig::linear(4, 40), skip)
            .unwrap_err();
        match &err {
            Error::GridSyncMismatch { kernel, block, .. } => {
                assert_eq!(kernel, "grid_mismatch");
                assert_eq!(*block, u64::from(skip), "{err}");
            }
            other => panic!("expected GridSyncMismatch, got {other:?}"),
        }
        assert!(err.to_string().contains("would never finish"), "{err}");
    }
    // Every block reaches it: the launch completes.
    k::grid_mismatch
        .launch(&dev, LaunchConfig::linear(4, 40), 4)
        .unwrap();
    // Launched raw, not cooperatively: `Grid::sync` fails the launch rather than waiting.
    let grid = offload_rt::__private::GRID_PLACEHOLDER;
    let skip = 4u32;
    let params = [
        (&raw const grid).cast_mut().cast(),
        (&raw const skip).cast_mut().cast(),
    ];
    // SAFETY: the kernel's parameters, by value.
    let err = unsafe {
        dev.launch_raw(
            MODULE,
            "grid_mismatch",
            &LaunchConfig::linear(2, 8),
            &params,
        )
    }
    .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidLaunch { reason, .. } if reason.contains("not cooperative")),
        "{err}"
    );
}

/// A generic kernel: each listed instantiation is its own entry point, launched through
/// `kernel::<args>`, its shared tile sized by its const parameter.
#[test]
fn generic_kernels_run_each_instantiation() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    fn check<T: k::Axpy + DeviceCopy>(
        dev: &Device,
        launch: impl Fn(
            LaunchConfig,
            T,
            &DeviceBuffer<T>,
            &mut DeviceBuffer<T>,
        ) -> offload_rt::LaunchReport,
        block: usize,
        a: T,
        x: Vec<T>,
        y: Vec<T>,
        name: &str,
    ) {
        let dx = DeviceBuffer::from_slice(dev, &x).unwrap();
        let mut dy = DeviceBuffer::from_slice(dev, &y).unwrap();
        // A last block only partly covered by `x` and `y`.
        let blocks = x.len().div_ceil(block) as u32;
        let report = launch(LaunchConfig::linear(blocks, block as u32), a, &dx, &mut dy);
        assert_eq!(report.kernel, name);
        let want: Vec<T> = (0..y.len())
            .map(|i| k::axpy_tiled_value(a, &x, y[i], i, block))
            .collect();
        assert_eq!(dy.to_vec().unwrap(), want, "{name}");
    }
    let n = 1000;
    let xf: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let xd: Vec<f64> = (0..n).map(|i| i as f64 * 0.25).collect();
    let xu: Vec<u32> = (0..n).map(|i| i as u32 * 3).collect();
    check(
        &dev,
        |c, a, x, y| k::axpy_tiled::<f32, 64>.launch(&dev, c, a, x, y).unwrap(),
        64,
        2.0f32,
        xf.clone(),
        vec![1.0; n],
        "axpy_tiled__f32__64",
    );
    check(
        &dev,
        |c, a, x, y| k::axpy_tiled::<f32, 128>.launch(&dev, c, a, x, y).unwrap(),
        128,
        -1.5f32,
        xf,
        vec![0.5; n],
        "axpy_tiled__f32__128",
    );
    check(
        &dev,
        |c, a, x, y| k::axpy_tiled::<f64, 128>.launch(&dev, c, a, x, y).unwrap(),
        128,
        3.0f64,
        xd,
        vec![-1.0; n],
        "axpy_tiled__f64__128",
    );
    check(
        &dev,
        |c, a, x, y| k::axpy_tiled::<u32, 64>.launch(&dev, c, a, x, y).unwrap(),
        64,
        u32::MAX,
        xu,
        vec![7; n],
        "axpy_tiled__u32__64",
    );
}

/// Types of another crate as elements and parameters: `Complex32` through offload-rt's
/// `num-complex` feature, `Complex64` wrapped in `Pod` through its `bytemuck::Pod` impl (a host
/// slice of it viewed as `Pod`s without a copy).
#[test]
fn foreign_types_as_parameters_and_elements() {
    use bytemuck::TransparentWrapper;
    use num_complex::{Complex32, Complex64};
    use offload_rt::Pod;
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let n = 1000;
    let x: Vec<Complex32> = (0..n)
        .map(|i| Complex32::new(i as f32, -(i as f32) * 0.5))
        .collect();
    let y = vec![Complex32::new(1.0, 2.0); n];
    let w: Vec<Complex64> = (0..n).map(|i| Complex64::new(0.25, i as f64)).collect();
    let (a, b) = (Complex32::new(0.5, -1.5), Complex64::new(-2.0, 0.125));
    let dx = DeviceBuffer::from_slice(&dev, &x).unwrap();
    let mut dy = DeviceBuffer::from_slice(&dev, &y).unwrap();
    let mut dw = DeviceBuffer::from_slice(&dev, Pod::wrap_slice(&w)).unwrap();
    k::complex_axpy
        .launch(
            &dev,
            LaunchConfig::for_num_elems(n as u32),
            a,
            &dx,
            &mut dy,
            Pod(b),
            &mut dw,
        )
        .unwrap();
    let want: Vec<Complex32> = x.iter().zip(&y).map(|(&xi, &yi)| a * xi + yi).collect();
    assert_eq!(dy.to_vec().unwrap(), want);
    let got = dw.to_vec().unwrap();
    let want: Vec<Complex64> = w.iter().map(|&wi| b * wi).collect();
    assert_eq!(Pod::peel_slice(&got), &want[..]);
}

/// Warp operations on a mask: only the lanes whose element exists call them, the last warp
/// partial (and a warp of the second block with one lane).
#[test]
fn masked_warp_operations_serve_a_partial_warp() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    for n in [1000usize, 64 + 33, 129] {
        let x: Vec<u32> = (0..n as u32)
            .map(|i| if i % 11 == 0 { 7 } else { i * 13 % 1500 })
            .collect();
        let dx = DeviceBuffer::from_slice(&dev, &x).unwrap();
        let mut totals = DeviceBuffer::<u32>::zeroed(&dev, n).unwrap();
        let mut evens = DeviceBuffer::<u64>::zeroed(&dev, n).unwrap();
        k::masked_warp_sum
            .launch(
                &dev,
                LaunchConfig::linear(n.div_ceil(64) as u32, 64),
                &dx,
                &mut totals,
                &mut evens,
            )
            .unwrap();
        let (totals, evens) = (totals.to_vec().unwrap(), evens.to_vec().unwrap());
        for i in 0..n {
            assert_eq!(
                (totals[i], evens[i]),
                k::masked_warp_value(&x, i, 32),
                "n {n}, element {i}"
            );
        }
    }
}

/// `constant!` statics: a table read alike by every thread and one indexed per thread.
#[test]
fn constant_statics_are_read_by_kernels() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let n = 1000;
    let x: Vec<f32> = (0..n).map(|i| (i % 17) as f32 - 8.0).collect();
    let bytes: Vec<u8> = (0..n).map(|i| (i * 7 % 256) as u8).collect();
    let (dx, db) = (
        DeviceBuffer::from_slice(&dev, &x).unwrap(),
        DeviceBuffer::from_slice(&dev, &bytes).unwrap(),
    );
    let mut y = DeviceBuffer::<f32>::zeroed(&dev, n).unwrap();
    let mut z = DeviceBuffer::<u32>::zeroed(&dev, n).unwrap();
    k::constant_tables
        .launch(
            &dev,
            LaunchConfig::for_num_elems(n as u32),
            &dx,
            &db,
            &mut y,
            &mut z,
        )
        .unwrap();
    let want: Vec<f32> = (0..n).map(|i| k::filtered(&x, i)).collect();
    assert_eq!(y.to_vec().unwrap(), want);
    let want: Vec<u32> = bytes.iter().map(|&b| u32::from(b) * u32::from(b)).collect();
    assert_eq!(z.to_vec().unwrap(), want);
}

/// `bool` and a fieldless enum as parameters, buffer elements and struct fields.
#[test]
fn bools_and_enums_as_parameters_and_elements() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let n = 1000;
    let modes = [k::Combine::And, k::Combine::Or, k::Combine::Xor];
    let mask: Vec<bool> = (0..n).map(|i| i % 3 == 1 || i % 7 == 0).collect();
    let tags: Vec<k::Tagged> = (0..n)
        .map(|i| k::Tagged {
            on: i % 2 == 0,
            pad: 0,
            mode: modes[i % 3],
            weight: i as f32,
        })
        .collect();
    let (dmask, dtags) = (
        DeviceBuffer::from_slice(&dev, &mask).unwrap(),
        DeviceBuffer::from_slice(&dev, &tags).unwrap(),
    );
    for (flag, mode) in [(true, k::Combine::Xor), (false, k::Combine::Or)] {
        let mut out = DeviceBuffer::<bool>::zeroed(&dev, n).unwrap();
        let mut next = DeviceBuffer::<k::Combine>::zeroed(&dev, n).unwrap();
        assert_eq!(next.to_vec().unwrap(), vec![k::Combine::And; n], "zeroed");
        k::combine_flags
            .launch(
                &dev,
                LaunchConfig::for_num_elems(n as u32),
                flag,
                mode,
                &dmask,
                &dtags,
                &mut out,
                &mut next,
            )
            .unwrap();
        let want: Vec<bool> = (0..n)
            .map(|i| k::flag_value(flag, mode, mask[i], &tags[i]))
            .collect();
        assert_eq!(out.to_vec().unwrap(), want, "flag {flag}, mode {mode:?}");
        let want: Vec<k::Combine> = tags.iter().map(|t| t.mode.next()).collect();
        assert_eq!(next.to_vec().unwrap(), want);
    }
}

/// Bytes a kernel wrote through a pointer of another type that are no `bool` or no variant
/// of an enum: the host's reads refuse them, naming the type and the element, and the
/// slice read into keeps valid values.
#[test]
fn invalid_bools_and_enums_read_back_are_refused() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let mut flags = DeviceBuffer::<bool>::zeroed(&dev, 8).unwrap();
    let mut modes = DeviceBuffer::<k::Combine>::zeroed(&dev, 4).unwrap();
    // Byte 2 is the third `bool` and the low byte (on this little-endian host) of the second
    // mode: 1 is a value of both (`true`, `Combine::Or`).
    let poke = |flags: &mut DeviceBuffer<bool>, modes: &mut DeviceBuffer<k::Combine>, value| {
        // SAFETY: both buffers have more than 2 bytes.
        unsafe { k::poke_bytes.launch(&dev, LaunchConfig::linear(1, 1), flags, modes, 2, value) }
            .unwrap();
    };
    poke(&mut flags, &mut modes, 1);
    let mut want = vec![false; 8];
    want[2] = true;
    assert_eq!(flags.to_vec().unwrap(), want);
    let mut want_modes = vec![k::Combine::And; 4];
    want_modes[1] = k::Combine::Or;
    assert_eq!(modes.to_vec().unwrap(), want_modes);

    poke(&mut flags, &mut modes, 2);
    let err = flags.to_vec().unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidValue {
                type_name: "bool",
                index: 2
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.code(), "OFF3027");
    let mut out = vec![true; 8];
    assert!(flags.copy_to(&mut out).is_err());
    assert_eq!(out, vec![false; 8], "the slice read into is zeroed");
    let err = modes.to_vec().unwrap_err();
    assert!(
        matches!(err, Error::InvalidValue { type_name, index: 1 } if type_name.ends_with("Combine")),
        "{err:?}"
    );
    assert!(err.to_string().contains("element 1"), "{err}");

    // A pinned buffer's slices are checked once the copy into it is done.
    let stream = dev.stream().unwrap();
    let mut pinned = PinnedBuffer::<bool>::zeroed(&dev, 8).unwrap();
    stream.copy_to_host(&mut pinned, &flags).unwrap();
    assert!(matches!(
        pinned.as_slice(),
        Err(Error::InvalidValue { index: 2, .. })
    ));
    assert!(pinned.as_mut_slice().is_err());
    poke(&mut flags, &mut modes, 0);
    stream.copy_to_host(&mut pinned, &flags).unwrap();
    assert_eq!(pinned.as_slice().unwrap(), &[false; 8]);
}

/// `#[repr(C, align(16))]` elements (CUDA's `float4`) through a kernel with named lifetimes.
#[test]
fn aligned_elements_and_named_lifetimes() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let n = 1000u32;
    let v: Vec<k::Float4> = (0..n)
        .map(|i| k::Float4 {
            x: i as f32,
            y: -(i as f32),
            z: 0.5,
            w: (i % 7) as f32,
        })
        .collect();
    assert_eq!(std::mem::align_of::<k::Float4>(), 16);
    let dv = DeviceBuffer::from_slice(&dev, &v).unwrap();
    let mut out = DeviceBuffer::<k::Float4>::zeroed(&dev, n as usize).unwrap();
    k::scale_float4
        .launch(&dev, LaunchConfig::for_num_elems(n), 2.0, &dv, &mut out)
        .unwrap();
    let got = out.to_vec().unwrap();
    for (i, (g, e)) in got.iter().zip(&v).enumerate() {
        let want = k::Float4 {
            x: 2.0 * e.x,
            y: 2.0 * e.y,
            z: 2.0 * e.z,
            w: 2.0 * e.w,
        };
        assert_eq!(*g, want, "element {i}");
    }
}

/// A generic `#[derive(DeviceCopy)]` struct, instantiated as a parameter and as elements.
#[test]
fn generic_structs_cross_as_parameters_and_elements() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let v: Vec<k::Two<u32>> = (0..777).map(|i| k::Two { a: i, b: 3 * i }).collect();
    let dv = DeviceBuffer::from_slice(&dev, &v).unwrap();
    let mut out = DeviceBuffer::<k::Two<u32>>::zeroed(&dev, v.len()).unwrap();
    let add = k::Two { a: 10, b: 20 };
    k::swap_two
        .launch(&dev, LaunchConfig::for_num_elems(777), add, &dv, &mut out)
        .unwrap();
    let got = out.to_vec().unwrap();
    for (i, (g, e)) in got.iter().zip(&v).enumerate() {
        assert_eq!(
            *g,
            k::Two {
                a: e.b + 10,
                b: e.a + 20
            },
            "element {i}"
        );
    }
}

/// A closure over a shared tile, made before a barrier and called after it.
#[test]
fn a_closure_made_before_a_barrier_is_called_after_it() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let blocks = 3u32;
    let mut out = DeviceBuffer::<f32>::zeroed(&dev, 256 * blocks as usize).unwrap();
    k::closure_over_tile
        .launch(&dev, LaunchConfig::linear(blocks, 256), &mut out)
        .unwrap();
    let got = out.to_vec().unwrap();
    for (i, g) in got.iter().enumerate() {
        assert_eq!(*g, (255 - i % 256) as f32, "element {i}");
    }
}

/// Small integers as floats: `a * x + y` is exact, so every order of work gives the same bits.
fn exact_inputs(n: u32) -> (Vec<f32>, Vec<f32>) {
    let x = (0..n).map(|i| (i % 13) as f32).collect();
    let y = (0..n).map(|i| (i % 5) as f32).collect();
    (x, y)
}

#[test]
fn a_stream_runs_copies_and_launches_in_order() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let stream = dev.stream().unwrap();
    let n = 100_003u32;
    let (x, y) = exact_inputs(n);
    let px = PinnedBuffer::from_slice(&dev, &x).unwrap();
    let py = PinnedBuffer::from_slice(&dev, &y).unwrap();
    let mut out = PinnedBuffer::<f32>::zeroed(&dev, n as usize).unwrap();
    let mut dx = DeviceBuffer::<f32>::zeroed(&dev, n as usize).unwrap();
    let mut dy = DeviceBuffer::<f32>::zeroed(&dev, n as usize).unwrap();
    stream.copy_to_device(&mut dx, &px).unwrap();
    stream.copy_to_device(&mut dy, &py).unwrap();
    for a in [1.0, 2.0, 3.0] {
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe {
            k::saxpy.launch(
                stream.device(),
                LaunchConfig::for_num_elems(n),
                n,
                a,
                &dx,
                &mut dy,
            )
        }
        .unwrap();
    }
    stream.copy_to_host(&mut out, &dy).unwrap();
    // The accessor waits for the copy into the buffer.
    let got = out.as_slice().unwrap();
    for i in 0..n as usize {
        assert_eq!(got[i], y[i] + 6.0 * x[i], "element {i}");
    }
    stream.synchronize().unwrap();
}

#[test]
fn events_order_two_streams_and_time_work() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let (producer, consumer) = (dev.stream().unwrap(), dev.stream().unwrap());
    let n = 200_000u32;
    let (x, y) = exact_inputs(n);
    let px = PinnedBuffer::from_slice(&dev, &x).unwrap();
    let mut dx = DeviceBuffer::<f32>::zeroed(&dev, n as usize).unwrap();
    let mut dy = DeviceBuffer::from_slice(&dev, &y).unwrap();
    let start = producer.record().unwrap();
    producer.copy_to_device(&mut dx, &px).unwrap();
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    unsafe {
        k::saxpy.launch(
            producer.device(),
            LaunchConfig::for_num_elems(n),
            n,
            2.0,
            &dx,
            &mut dy,
        )
    }
    .unwrap();
    let done = producer.record().unwrap();
    // The consumer's copy waits for the producer's launch.
    consumer.wait(&done).unwrap();
    let mut out = PinnedBuffer::<f32>::zeroed(&dev, n as usize).unwrap();
    consumer.copy_to_host(&mut out, &dy).unwrap();
    consumer.synchronize().unwrap();
    assert!(done.query().unwrap());
    let got = out.as_slice().unwrap();
    assert!((0..n as usize).all(|i| got[i] == y[i] + 2.0 * x[i]));
    let elapsed = done.elapsed_since(&start).unwrap();
    assert!(elapsed < std::time::Duration::from_secs(60), "{elapsed:?}");
}

#[test]
fn a_graph_replays_recorded_launches() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let stream = dev.stream().unwrap();
    let n = 50_000u32;
    let (x, y) = exact_inputs(n);
    let dx = DeviceBuffer::from_slice(&dev, &x).unwrap();
    let mut dy = DeviceBuffer::from_slice(&dev, &y).unwrap();
    stream.begin_capture().unwrap();
    for _ in 0..4 {
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe {
            k::saxpy.launch(
                stream.device(),
                LaunchConfig::for_num_elems(n),
                n,
                1.0,
                &dx,
                &mut dy,
            )
        }
        .unwrap();
    }
    let graph = stream.end_capture().unwrap();
    // Recording ran nothing.
    stream.synchronize().unwrap();
    assert_eq!(dy.to_vec().unwrap(), y);
    for _ in 0..3 {
        // SAFETY: `dx` and `dy`, which the recorded launches use, outlive the replays,
        // which are waited for below before the host reads `dy`.
        unsafe { stream.launch_graph(&graph) }.unwrap();
    }
    stream.synchronize().unwrap();
    let got = dy.to_vec().unwrap();
    assert!((0..n as usize).all(|i| got[i] == y[i] + 12.0 * x[i]));
    // New parameters: the same launches recorded again into the graph.
    let mut graph = graph;
    stream.begin_capture().unwrap();
    for _ in 0..4 {
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe {
            k::saxpy.launch(
                stream.device(),
                LaunchConfig::for_num_elems(n),
                n,
                -3.0,
                &dx,
                &mut dy,
            )
        }
        .unwrap();
    }
    stream.end_capture_into(&mut graph).unwrap();
    // SAFETY: as above.
    unsafe { stream.launch_graph(&graph) }.unwrap();
    stream.synchronize().unwrap();
    assert_eq!(dy.to_vec().unwrap(), y);
}

#[test]
fn stream_misuse_is_a_typed_error() {
    if !setup() {
        return;
    }
    let (a, b) = (Device::cpu(), Device::cpu());
    let (sa, sb) = (a.stream().unwrap(), b.stream().unwrap());
    let event = sb.record().unwrap();
    match sa.wait(&event) {
        Err(Error::OtherDevice { what: "event", .. }) => {}
        other => panic!("expected OtherDevice, got {other:?}"),
    }
    assert!(matches!(sa.end_capture(), Err(Error::Capture { .. })));
    sa.begin_capture().unwrap();
    assert!(matches!(sa.begin_capture(), Err(Error::Capture { .. })));
    assert!(matches!(sa.record(), Err(Error::Capture { .. })));
    sa.end_capture().unwrap();
    let pinned = PinnedBuffer::<f32>::zeroed(&a, 3).unwrap();
    let mut short = DeviceBuffer::<f32>::zeroed(&a, 2).unwrap();
    assert!(matches!(
        sa.copy_to_device(&mut short, &pinned),
        Err(Error::LengthMismatch { device: 2, host: 3 })
    ));
    let mut other = DeviceBuffer::<f32>::zeroed(&b, 3).unwrap();
    assert!(matches!(
        sa.copy_to_device(&mut other, &pinned),
        Err(Error::OtherDevice { .. })
    ));
    // A launch error of queued work (a kernel whose barrier divergence the CPU device finds
    // only while running it) comes back from `synchronize`.
    let mut out = DeviceBuffer::<u32>::zeroed(&a, 4 * 32).unwrap();
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    unsafe { k::divergent.launch(sa.device(), LaunchConfig::linear(4, 32), &mut out) }.unwrap();
    assert!(matches!(
        sa.synchronize(),
        Err(Error::DivergentBarrier { .. })
    ));
    sa.synchronize().unwrap();
}

#[test]
fn every_device_is_listed_with_the_cpu_last() {
    let all = Device::all();
    let cpu = all.last().unwrap();
    assert_eq!(cpu.spec, "cpu");
    assert!(cpu.compute_units >= 1);
    for entry in &all {
        Device::from_spec(&entry.spec).unwrap();
    }
}

/// Many threads share one CPU device, each with its own buffers: every result is right.
/// (`benches/cpu-load` runs the same with 2,000 launches a thread and records resident
/// memory.)
#[test]
fn sixteen_threads_launch_on_one_device() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let threads: Vec<_> = (0..16u32)
        .map(|id| {
            let dev = dev.clone();
            std::thread::spawn(move || {
                let n = 1000 + id * 17;
                let (x, y) = exact_inputs(n);
                let dx = DeviceBuffer::from_slice(&dev, &x).unwrap();
                let mut dy = DeviceBuffer::from_slice(&dev, &y).unwrap();
                for launch in 1..=100u32 {
                    let a = if launch % 2 == 1 { 1.0 } else { -1.0 };
                    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
                    unsafe {
                        k::saxpy.launch(&dev, LaunchConfig::for_num_elems(n), n, a, &dx, &mut dy)
                    }
                    .unwrap();
                    let got = dy.to_vec().unwrap();
                    for i in 0..n as usize {
                        let want = if launch % 2 == 1 { y[i] + x[i] } else { y[i] };
                        assert_eq!(got[i], want, "thread {id}, launch {launch}, [{i}]");
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// Distance in units in the last place between two floats of one sign (0 for equal bits).
fn ulps(a: u64, b: u64) -> u64 {
    a.abs_diff(b)
}

/// `kernel::math` on the CPU device: the same bits as on the host (the same code), and the
/// documented precision against the host's C library: sqrt, fma, floor, abs, min and max
/// exact, `rsqrt` within 1 ulp of the correctly rounded value, the software functions within
/// 1 ulp (f32: of the f64 result rounded, f64: of glibc's).
#[test]
fn math_has_the_documented_precision() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let n = 20_011u32;
    let (x64, y64): (Vec<f64>, Vec<f64>) = (0..n).map(k::math_input).unzip();
    let x32: Vec<f32> = x64.iter().map(|&v| v as f32).collect();
    let y32: Vec<f32> = y64.iter().map(|&v| v as f32).collect();
    let config = LaunchConfig::for_num_elems(n);

    let mut out = DeviceBuffer::<f32>::zeroed(&dev, n as usize * k::MATH_WORDS).unwrap();
    let (dx, dy) = (
        DeviceBuffer::from_slice(&dev, &x32).unwrap(),
        DeviceBuffer::from_slice(&dev, &y32).unwrap(),
    );
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    unsafe { k::math_f32.launch(&dev, config, n, &dx, &dy, &mut out) }.unwrap();
    let got = out.to_vec().unwrap();
    for (i, (&x, &y)) in x32.iter().zip(&y32).enumerate() {
        let row = &got[i * k::MATH_WORDS..][..k::MATH_WORDS];
        let same: Vec<u32> = k::math_row_f32(x, y).iter().map(|v| v.to_bits()).collect();
        assert_eq!(
            row.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            same,
            "x {x}, y {y}"
        );
        let ax = x.abs();
        let (xd, yd, axd) = (f64::from(x), f64::from(y), f64::from(ax));
        let exact = [
            ax.sqrt(),
            x.mul_add(y, 0.25),
            x.floor(),
            y.abs(),
            x.min(y),
            x.max(y),
        ];
        for (g, w) in [row[0], row[2], row[8], row[9], row[10], row[11]]
            .iter()
            .zip(exact)
        {
            assert_eq!(g.to_bits(), w.to_bits(), "x {x}, y {y}: {g} against {w}");
        }
        let near = [
            (1.0 / axd.sqrt()) as f32,
            yd.exp() as f32,
            axd.ln() as f32,
            xd.sin() as f32,
            xd.cos() as f32,
            axd.powf(yd) as f32,
        ];
        for (g, w) in [row[1], row[3], row[4], row[5], row[6], row[7]]
            .iter()
            .zip(near)
        {
            assert!(
                ulps(g.to_bits().into(), w.to_bits().into()) <= 1,
                "x {x}, y {y}: {g} against {w}"
            );
        }
    }

    let mut out = DeviceBuffer::<f64>::zeroed(&dev, n as usize * k::MATH_WORDS).unwrap();
    let (dx, dy) = (
        DeviceBuffer::from_slice(&dev, &x64).unwrap(),
        DeviceBuffer::from_slice(&dev, &y64).unwrap(),
    );
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    unsafe { k::math_f64.launch(&dev, config, n, &dx, &dy, &mut out) }.unwrap();
    let got = out.to_vec().unwrap();
    for (i, (&x, &y)) in x64.iter().zip(&y64).enumerate() {
        let row = &got[i * k::MATH_WORDS..][..k::MATH_WORDS];
        let same: Vec<u64> = k::math_row_f64(x, y).iter().map(|v| v.to_bits()).collect();
        assert_eq!(
            row.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            same,
            "x {x}, y {y}"
        );
        let ax = x.abs();
        let exact = [
            ax.sqrt(),
            1.0 / ax.sqrt(),
            x.mul_add(y, 0.25),
            x.floor(),
            y.abs(),
            x.min(y),
            x.max(y),
        ];
        for (g, w) in [row[0], row[1], row[2], row[8], row[9], row[10], row[11]]
            .iter()
            .zip(exact)
        {
            assert_eq!(g.to_bits(), w.to_bits(), "x {x}, y {y}: {g} against {w}");
        }
        let near = [y.exp(), ax.ln(), x.sin(), x.cos(), ax.powf(y)];
        for (g, w) in [row[3], row[4], row[5], row[6], row[7]].iter().zip(near) {
            assert!(
                ulps(g.to_bits(), w.to_bits()) <= 1,
                "x {x}, y {y}: {g} against {w}"
            );
        }
    }
}

/// A kernel crate's own dependency on `libm` from crates.io runs on the CPU device.
#[test]
fn a_kernel_crate_may_depend_on_libm() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let n = 4_099u32;
    let x: Vec<f32> = (0..n).map(|i| k::math_input(i).1 as f32).collect();
    let dx = DeviceBuffer::from_slice(&dev, &x).unwrap();
    let mut out = DeviceBuffer::<f32>::zeroed(&dev, n as usize).unwrap();
    // SAFETY: the buffers hold every element the kernel reaches through its pointers.
    unsafe { k::libm_direct.launch(&dev, LaunchConfig::for_num_elems(n), n, &dx, &mut out) }
        .unwrap();
    for (g, &x) in out.to_vec().unwrap().iter().zip(&x) {
        assert_eq!(g.to_bits(), k::libm_value(x).to_bits(), "x {x}");
    }
}

/// Barriers and warp operations in functions a kernel calls, inlined by `#[kernels]` into the
/// region form: the same results as the coroutine path and the host, on full and partial
/// blocks and warps.
#[test]
fn barriers_in_called_functions_run_alike_in_region_form_and_with_coroutines() {
    if !setup() {
        return;
    }
    use k::called_barriers as cb;
    for (mode, dev) in barrier_modes() {
        for (blocks, block) in [(3u32, 1024u32), (4, 96), (2, 40)] {
            let values: Vec<u32> = (0..blocks * block).map(|i| i % 13 + 1).collect();
            let mut data = DeviceBuffer::from_slice(&dev, &values).unwrap();
            let mut totals = DeviceBuffer::<u32>::zeroed(&dev, blocks as usize).unwrap();
            let config = LaunchConfig::linear(blocks, block);
            // SAFETY: an element of `data` per thread, of `totals` per block.
            unsafe { cb::scan_with_helper.launch(&dev, config, &mut data, &mut totals) }.unwrap();
            let mut want = Vec::new();
            let mut want_totals = Vec::new();
            for part in values.chunks(block as usize) {
                let mut sum = 0;
                for v in part {
                    want.push(sum);
                    sum += v;
                }
                want_totals.push(sum);
            }
            assert_eq!(data.to_vec().unwrap(), want, "{mode:?}: scan {block}");
            assert_eq!(
                totals.to_vec().unwrap(),
                want_totals,
                "{mode:?}: totals {block}"
            );

            // The shuffle reduction reads whole warps, as on a GPU.
            if block % 32 != 0 {
                continue;
            }
            let n = blocks * block - 7;
            let input = DeviceBuffer::from_slice(&dev, &values[..n as usize]).unwrap();
            let mut sums = DeviceBuffer::<u32>::zeroed(&dev, blocks as usize).unwrap();
            // SAFETY: `n` elements of `input`, an element of `sums` per block.
            unsafe { cb::reduce_with_helpers.launch(&dev, config, n, &input, &mut sums) }.unwrap();
            let want: Vec<u32> = values[..n as usize]
                .chunks(block as usize)
                .map(|part| 3 * part.iter().sum::<u32>())
                .collect();
            assert_eq!(sums.to_vec().unwrap(), want, "{mode:?}: reduce {block}");
        }

        // Shuffles by an argument the whole warp shares, in full and partial warps.
        for (blocks, block) in [(2u32, 64u32), (2, 48), (3, 100), (1, 4)] {
            let threads = (blocks * block) as usize;
            let mut rows = DeviceBuffer::<u32>::zeroed(&dev, 5 * threads).unwrap();
            // SAFETY: five elements of `rows` per thread.
            unsafe {
                cb::shared_shuffle_rows.launch(&dev, LaunchConfig::linear(blocks, block), &mut rows)
            }
            .unwrap();
            let v = |i: usize| (i as u32).wrapping_mul(2_654_435_761);
            let mut want = Vec::new();
            for i in 0..threads {
                let t = i % block as usize;
                let lane = t % 32;
                let base = i - lane;
                let lanes = (block as usize - (t - lane)).min(32);
                let at = |src: usize| if src < lanes { v(base + src) } else { v(i) };
                let down = |d: usize| at(if lane + d < 32 { lane + d } else { lane });
                let up = if lane >= 20 { at(lane - 20) } else { v(i) };
                want.extend([at(0), at(37 % 32), down(20), up, down(1)]);
            }
            assert_eq!(
                rows.to_vec().unwrap(),
                want,
                "{mode:?}: shuffles, blocks of {block}"
            );
        }

        let len = 1000usize;
        let values: Vec<f32> = (0..len).map(|i| (i % 17) as f32 * 0.25 - 1.5).collect();
        let input = DeviceBuffer::from_slice(&dev, &values).unwrap();
        let mut out = DeviceBuffer::<f32>::zeroed(&dev, len).unwrap();
        // SAFETY: safe launch.
        cb::tiled_weighted_sums
            .launch(
                &dev,
                LaunchConfig::for_num_elems(len as u32),
                &input,
                &mut out,
            )
            .unwrap();
        let threads = LaunchConfig::for_num_elems(len as u32).block.0 as usize;
        let want: Vec<f32> = (0..len)
            .map(|i| {
                let mut acc = 0f32;
                for base in (0..len).step_by(threads) {
                    for k in 0..threads {
                        let v = values.get(base + k).copied().unwrap_or(0.0);
                        acc += v * (i + base + k) as f32;
                    }
                }
                acc
            })
            .collect();
        assert_eq!(out.to_vec().unwrap(), want, "{mode:?}: tiled_weighted_sums");
    }
}

/// The CPU device with each way of running barriers: in region form (loops over the block's
/// threads between barriers, the default: the CPU link's, or in a run with an image of the
/// source form `#[kernel]`'s), and with one coroutine per GPU thread.
fn barrier_modes() -> [(BarrierMode, Device); 2] {
    [BarrierMode::Regions, BarrierMode::Coroutines].map(|mode| {
        (
            mode,
            Device::from_backend(Box::new(CpuBackend::with_threads(2).with_barriers(mode))),
        )
    })
}

/// Threads that returned before a block barrier, the others summing their warps with
/// shuffles after it (the CPU link's scheduler takes them from the barrier to the warp's
/// exchanges without a pass over their states): blocks of one warp to 1024 threads, a few
/// of their warps active, in every barrier mode.
#[test]
fn warps_sum_after_a_barrier_their_block_passed_without_the_returned_threads() {
    if !setup() {
        return;
    }
    for (mode, dev) in barrier_modes() {
        for (blocks, block, active) in [
            (3u32, 32u32, 32u32),
            (2, 256, 64),
            (3, 128, 96),
            (2, 1024, 512),
        ] {
            let n = (blocks * block) as usize;
            let input: Vec<u32> = (0..n as u32).map(|i| i * 7 % 1000).collect();
            let dx = DeviceBuffer::from_slice(&dev, &input).unwrap();
            let mut out = DeviceBuffer::from_slice(&dev, &vec![u32::MAX; n / 32]).unwrap();
            // SAFETY: an element of `input` per thread, of `out` per warp.
            unsafe {
                k::early_exit_warp_sum.launch(
                    &dev,
                    LaunchConfig::linear(blocks, block),
                    active,
                    &dx,
                    &mut out,
                )
            }
            .unwrap();
            let mut want = vec![u32::MAX; n / 32];
            for b in 0..blocks as usize {
                let base = b * block as usize;
                for t in (0..active as usize).step_by(32) {
                    want[(base + t) / 32] = (t..t + 32)
                        .map(|t| input[base + (t + 1) % active as usize])
                        .sum();
                }
            }
            assert_eq!(
                out.to_vec().unwrap(),
                want,
                "{mode:?}: {blocks}x{block}, {active} active"
            );
        }
    }
}

/// A block's first and last thread storing to words the block shares, alone after a
/// barrier (the CPU link's loops skip them and run each apart): blocks of one thread (both
/// at once), of a few, of a warp and more, in every barrier mode.
#[test]
fn threads_that_store_alone_run_apart_from_the_loops() {
    if !setup() {
        return;
    }
    for (mode, dev) in barrier_modes() {
        for (blocks, block) in [(3u32, 1u32), (4, 3), (2, 32), (3, 100), (2, 1024)] {
            let n = (blocks * block) as usize;
            let values: Vec<u32> = (0..n as u32).map(|i| i % 17 + 1).collect();
            let mut data = DeviceBuffer::from_slice(&dev, &values).unwrap();
            let mut edges = DeviceBuffer::<u32>::zeroed(&dev, 2 * blocks as usize).unwrap();
            let config = LaunchConfig::linear(blocks, block);
            // SAFETY: `data` has one word per thread, `edges` two per block.
            unsafe { k::edge_totals.launch(&dev, config, &mut data, &mut edges) }.unwrap();
            let block = block as usize;
            let doubled: Vec<u32> = (0..n).map(|i| values[i] * 2 + (i % block) as u32).collect();
            let want_edges: Vec<u32> = (0..blocks as usize)
                .flat_map(|b| {
                    let (first, last) = (b * block, b * block + block - 1);
                    [doubled[first] + values[last], doubled[last]]
                })
                .collect();
            assert_eq!(
                data.to_vec().unwrap(),
                doubled,
                "{mode:?}: blocks of {block}"
            );
            assert_eq!(
                edges.to_vec().unwrap(),
                want_edges,
                "{mode:?}: blocks of {block}"
            );
        }
    }
}

/// [`k::stepped_flags`] on the host: each 16 × 16 block's tile stepped as its threads do.
fn host_stepped_flags(n: usize, steps: u32, values: &[f32]) -> Vec<f32> {
    let mut out = values.to_vec();
    for (by, bx) in (0..n.div_ceil(16)).flat_map(|by| (0..n.div_ceil(16)).map(move |bx| (by, bx))) {
        let cell = |tx: usize, ty: usize| {
            let (x, y) = (bx * 16 + tx, by * 16 + ty);
            (x < n && y < n).then_some(y * n + x)
        };
        let mut tile: [f32; 256] =
            std::array::from_fn(|t| cell(t % 16, t / 16).map_or(0.0, |g| values[g]));
        let mut computed = [false; 256];
        let mut next = [0f32; 256];
        for i in 0..steps as usize {
            for t in 0..256 {
                let (tx, ty) = (t % 16, t / 16);
                let inner = tx > i && tx + i < 15 && ty > i && ty + i < 15;
                computed[t] = cell(tx, ty).is_some() && inner;
                if computed[t] {
                    let around = tile[t - 1] + tile[t + 1] + tile[t - 16] + tile[t + 16];
                    next[t] = 0.5 * tile[t] + 0.125 * around;
                }
            }
            for ((cell, &stepped), &computed) in tile.iter_mut().zip(&next).zip(&computed) {
                if computed {
                    *cell = stepped;
                }
            }
        }
        for (t, (&computed, &stepped)) in computed.iter().zip(&next).enumerate() {
            if let (true, Some(g)) = (computed, cell(t % 16, t / 16)) {
                out[g] = stepped;
            }
        }
    }
    out
}

/// A flag set on one way of a branch on the step and the thread's index, read after the
/// barriers (kept a byte a thread in the CPU link's lanes), and a test of the thread's cell
/// being in the grid before and after a barrier: in every barrier mode, as the host steps the
/// tiles; a grid of 40 × 40 has blocks partly outside it.
#[test]
fn flags_set_on_one_way_and_read_after_barriers_run_alike() {
    if !setup() {
        return;
    }
    let (n, steps) = (40u32, 3u32);
    let values: Vec<f32> = (0..n * n).map(|i| (i % 13) as f32 * 0.25).collect();
    let want = host_stepped_flags(n as usize, steps, &values);
    assert_ne!(want, values);
    for (mode, dev) in barrier_modes() {
        let mut data = DeviceBuffer::from_slice(&dev, &values).unwrap();
        let config = LaunchConfig {
            grid: (n.div_ceil(16), n.div_ceil(16), 1),
            block: (16, 16, 1),
            shared_mem_bytes: 0,
            cluster: (1, 1, 1),
        };
        // SAFETY: `data` holds the `n × n` grid.
        unsafe { k::stepped_flags.launch(&dev, config, n, steps, &mut data) }.unwrap();
        assert_eq!(data.to_vec().unwrap(), want, "{mode:?}");
    }
}

#[test]
fn kernels_with_barriers_run_alike_in_region_form_and_with_coroutines() {
    if !setup() {
        return;
    }
    for (mode, dev) in barrier_modes() {
        // Tiled matrix product: barriers in a loop, a per-thread accumulator across them.
        let n = 64usize;
        let a: Vec<f32> = (0..n * n)
            .map(|i| ((i * 7) % 23) as f32 * 0.125 - 1.0)
            .collect();
        let b: Vec<f32> = (0..n * n)
            .map(|i| ((i * 5) % 19) as f32 * 0.25 - 2.0)
            .collect();
        let mut want = vec![0f32; n * n];
        for r in 0..n {
            for c in 0..n {
                let mut acc = 0f32;
                for k in 0..n {
                    acc += a[r * n + k] * b[k * n + c];
                }
                want[r * n + c] = acc;
            }
        }
        let da = DeviceBuffer::from_slice(&dev, &a).unwrap();
        let db = DeviceBuffer::from_slice(&dev, &b).unwrap();
        let mut dc = DeviceBuffer::<f32>::zeroed(&dev, n * n).unwrap();
        let tiles = (n / k::TILE) as u32;
        let config = LaunchConfig {
            grid: (tiles, tiles, 1),
            block: (k::TILE as u32, k::TILE as u32, 1),
            shared_mem_bytes: 0,
            cluster: (1, 1, 1),
        };
        for _ in 0..2 {
            // SAFETY: the buffers hold every element the kernel reaches through its pointers.
            unsafe { k::matmul_tiled.launch(&dev, config, n as u32, &da, &db, &mut dc) }.unwrap();
            assert_eq!(dc.to_vec().unwrap(), want, "{mode:?}: matmul_tiled");
        }

        // Threads past the end return before the barrier.
        let len = 1000u32;
        let input: Vec<f32> = (0..len).map(|i| (i % 13) as f32).collect();
        let din = DeviceBuffer::from_slice(&dev, &input).unwrap();
        let mut dout = DeviceBuffer::<f32>::zeroed(&dev, len as usize).unwrap();
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe { k::blur3.launch(&dev, LaunchConfig::linear(4, 256), len, &din, &mut dout) }
            .unwrap();
        let at = |i: isize| input[i.clamp(0, len as isize - 1) as usize];
        let want: Vec<f32> = (0..len as isize)
            .map(|i| (at(i - 1) + at(i) + at(i + 1)) / 3.0)
            .collect();
        assert_eq!(dout.to_vec().unwrap(), want, "{mode:?}: blur3");

        // Range checks and clamped neighbours of a signed global index, as `hotspot`'s.
        let len = 1000i32;
        let input: Vec<i32> = (0..len).map(|i| i * 37 % 101 - 50).collect();
        let din = DeviceBuffer::from_slice(&dev, &input).unwrap();
        let at = |i: i32| input[i.clamp(0, len - 1) as usize];
        let want: Vec<i32> = (0..len)
            .map(|g| at(g - 1) + 2 * at(g) + at(g + 1))
            .collect();
        for (block, halo) in [(256u32, 1i32), (96, 3), (40, 2)] {
            let mut dout = DeviceBuffer::<i32>::zeroed(&dev, len as usize).unwrap();
            let blocks = (len as u32).div_ceil(block - 2 * halo as u32);
            let config = LaunchConfig::linear(blocks, block);
            // SAFETY: the kernel reads `input[..len]` and writes `output[..len]`.
            unsafe { k::clamped_window.launch(&dev, config, len, halo, &din, &mut dout) }.unwrap();
            assert_eq!(
                dout.to_vec().unwrap(),
                want,
                "{mode:?}: clamped_window {block}, {halo}"
            );
        }

        // A value read before a barrier and used after it, in a loop with a uniform bound.
        for (blocks, block) in [(3u32, 1024u32), (5, 96)] {
            let values: Vec<u32> = (0..blocks * block).map(|i| i % 11 + 1).collect();
            let mut data = DeviceBuffer::from_slice(&dev, &values).unwrap();
            // SAFETY: the buffers hold every element the kernel reaches through its pointers.
            unsafe { k::block_scan.launch(&dev, LaunchConfig::linear(blocks, block), &mut data) }
                .unwrap();
            let mut want = values.clone();
            for part in want.chunks_mut(block as usize) {
                for i in 1..part.len() {
                    part[i] += part[i - 1];
                }
            }
            assert_eq!(data.to_vec().unwrap(), want, "{mode:?}: block_scan {block}");
        }

        // A `match` around barriers, its value and guard the block's.
        for phase in 0..3u32 {
            let (blocks, block) = (4u32, 96u32);
            let values: Vec<u32> = (0..blocks * block).map(|i| i * 7 % 101).collect();
            let mut data = DeviceBuffer::from_slice(&dev, &values).unwrap();
            // SAFETY: an element of `data` per thread.
            unsafe {
                k::match_phases.launch(&dev, LaunchConfig::linear(blocks, block), phase, &mut data)
            }
            .unwrap();
            let mut want = Vec::new();
            for (b, part) in values.chunks(block as usize).enumerate() {
                let n = part.len();
                want.extend((0..n).map(|t| match phase {
                    0 => part[n - 1 - t],
                    1 if b % 2 == 0 => part[(t + 1) % n],
                    shift => part[t] + shift,
                }));
            }
            assert_eq!(
                data.to_vec().unwrap(),
                want,
                "{mode:?}: match_phases {phase}"
            );
        }

        // 2 KiB a thread across a barrier: blocks of 1024 exceed the lane storage.
        for (blocks, block) in [(2u32, 1024u32), (3, 128)] {
            let values: Vec<u32> = (0..blocks * block)
                .map(|i| i.wrapping_mul(40_503))
                .collect();
            let mut data = DeviceBuffer::from_slice(&dev, &values).unwrap();
            // SAFETY: the buffers hold every element the kernel reaches through its pointers.
            unsafe { k::wide_locals.launch(&dev, LaunchConfig::linear(blocks, block), &mut data) }
                .unwrap();
            let want: Vec<u32> = (0..values.len())
                .map(|i| {
                    let (base, t) = (i - i % block as usize, i % block as usize);
                    let mirrored = values[base + block as usize - 1 - t].wrapping_mul(512);
                    mirrored.wrapping_add(values[i].wrapping_mul(131_328))
                })
                .collect();
            assert_eq!(
                data.to_vec().unwrap(),
                want,
                "{mode:?}: wide_locals {block}"
            );
        }

        // A block-uniform barrier that block 0 skips: right on the first launch.
        let mut out = DeviceBuffer::<u32>::zeroed(&dev, 4 * 64).unwrap();
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe { k::block_uniform_barrier.launch(&dev, LaunchConfig::linear(4, 64), &mut out) }
            .unwrap();
        let want: Vec<u32> = (0..4 * 64)
            .map(|i| if i < 64 { i + 1 } else { 64 - i % 64 })
            .collect();
        assert_eq!(
            out.to_vec().unwrap(),
            want,
            "{mode:?}: block_uniform_barrier"
        );

        // A barrier in a called function besides the body's: right on the first launch.
        let values: Vec<i32> = (0..3 * 64).map(|i| i * 3 - 100).collect();
        let mut data = DeviceBuffer::from_slice(&dev, &values).unwrap();
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe { k::hidden_barrier.launch(&dev, LaunchConfig::linear(3, 64), &mut data) }.unwrap();
        let want: Vec<i32> = (0..values.len())
            .map(|i| 2 * values[i - i % 64 + 63 - i % 64] + 2 * values[i])
            .collect();
        assert_eq!(data.to_vec().unwrap(), want, "{mode:?}: hidden_barrier");

        // A barrier inside `loop`, left with `break`.
        let mut data = DeviceBuffer::<u32>::zeroed(&dev, 2 * 64).unwrap();
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe { k::loop_barrier.launch(&dev, LaunchConfig::linear(2, 64), &mut data) }.unwrap();
        let want: Vec<u32> = (0..128).map(|i| 3 * (i % 64)).collect();
        assert_eq!(data.to_vec().unwrap(), want, "{mode:?}: loop_barrier");

        // `break` before the second barrier on the last step (Rodinia's pathfinder).
        let block = k::PASS_BLOCK;
        let wall: Vec<u32> = (0..500u32)
            .map(|v| v.wrapping_mul(2_654_435_761) % 10)
            .collect();
        let start: Vec<u32> = (0..3 * block as u32).map(|v| (v * 7) % 13).collect();
        for steps in [1u32, 5, 40] {
            let dwall = DeviceBuffer::from_slice(&dev, &wall).unwrap();
            let mut data = DeviceBuffer::from_slice(&dev, &start).unwrap();
            // SAFETY: the buffers hold every element the kernel reaches through its pointers.
            unsafe {
                k::pyramid_min.launch(
                    &dev,
                    LaunchConfig::linear(3, block as u32),
                    steps,
                    &dwall,
                    &mut data,
                )
            }
            .unwrap();
            assert_eq!(
                data.to_vec().unwrap(),
                pyramid_min_reference(&start, &wall, steps as usize, block),
                "{mode:?}: pyramid_min, {steps} steps"
            );
        }

        // `continue` and a labelled `break`, both block-wide.
        for (passes, skip, limit) in [(10u32, 3u32, 1000u32), (10, 4, 12), (7, 1, 0)] {
            let mut data = DeviceBuffer::from_slice(&dev, &start).unwrap();
            // SAFETY: the buffers hold every element the kernel reaches through its pointers.
            unsafe {
                k::skipping_passes.launch(
                    &dev,
                    LaunchConfig::linear(3, block as u32),
                    passes,
                    skip,
                    limit,
                    &mut data,
                )
            }
            .unwrap();
            let mut want = start.clone();
            let mut total = 0;
            for pass in (0..passes).filter(|p| p % skip != 0) {
                for part in want.chunks_mut(block) {
                    part.reverse();
                    part.iter_mut().for_each(|v| *v += pass);
                }
                total += pass;
                if total > limit {
                    break;
                }
            }
            assert_eq!(
                data.to_vec().unwrap(),
                want,
                "{mode:?}: skipping_passes {passes} {skip} {limit}"
            );
        }

        // Atomics on shared memory: plain accesses in region form, the same end values.
        let (blocks, block) = (3usize, 96usize);
        let words: Vec<u32> = (0..(blocks * block) as u32)
            .map(|i| i.wrapping_mul(2_654_435_761) >> 7)
            .collect();
        let dwords = DeviceBuffer::from_slice(&dev, &words).unwrap();
        let mut cells = DeviceBuffer::<u32>::zeroed(&dev, blocks * k::ATOMIC_CELLS).unwrap();
        let config = LaunchConfig::linear(blocks as u32, block as u32);
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe { k::shared_atomics.launch(&dev, config, &dwords, &mut cells) }.unwrap();
        let want: Vec<u32> = words
            .chunks(block)
            .flat_map(|part| {
                let mut c = [0u32; k::ATOMIC_CELLS];
                for &v in part {
                    c[(v & 15) as usize] += 1;
                }
                let fold =
                    |first: u32, f: fn(u32, u32) -> u32| part.iter().fold(first, |a, &v| f(a, v));
                c[16] = fold(0, u32::max);
                c[17] = fold(u32::MAX, u32::min);
                c[18] = fold(u32::MAX, |a, v| a & (v | 1));
                c[19] = fold(0, |a, v| a | v);
                c[20] = fold(1_000_000, |a, v| a - (v & 7));
                c[21] = fold(0, |a, v| a ^ v);
                c[22] = fold(0, |a, v| a + (v & 3));
                c[23] = 7;
                c
            })
            .collect();
        assert_eq!(cells.to_vec().unwrap(), want, "{mode:?}: shared_atomics");

        // Grid- and block-stride loops, run iteration by iteration in region form.
        for (n, blocks, block) in [(100_003u32, 7u32, 96u32), (50, 4, 64), (0, 2, 32)] {
            let words: Vec<u32> = (0..n).map(|i| i.wrapping_mul(2_654_435_761) >> 9).collect();
            let dwords = DeviceBuffer::from_slice(&dev, &words).unwrap();
            let mut bins = DeviceBuffer::<u32>::zeroed(&dev, 64).unwrap();
            let config = LaunchConfig::linear(blocks, block);
            // SAFETY: the buffers hold every element the kernel reaches through its pointers.
            unsafe { k::strided_histogram.launch(&dev, config, n, &dwords, &mut bins) }.unwrap();
            let mut want = vec![0u32; 64];
            words.iter().for_each(|&w| want[(w & 63) as usize] += 1);
            assert_eq!(
                bins.to_vec().unwrap(),
                want,
                "{mode:?}: strided_histogram {n}"
            );
        }

        // Threads that leave a grid-stride loop early wait at the barrier after it until
        // every thread of the block has left it: each block's count is final when read.
        let (n, blocks, block) = (100_003u32, 7u32, 96u32);
        let hit = |i: u32| i.is_multiple_of(block) || i >= n - 2000;
        let words: Vec<u32> = (0..n).map(|i| u32::from(hit(i))).collect();
        let dwords = DeviceBuffer::from_slice(&dev, &words).unwrap();
        let mut counts = DeviceBuffer::<u32>::zeroed(&dev, blocks as usize).unwrap();
        let config = LaunchConfig::linear(blocks, block);
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe { k::strided_first_hits.launch(&dev, config, n, &dwords, 1, &mut counts) }.unwrap();
        let want: Vec<u32> = (0..blocks)
            .map(|b| {
                let found = |t: u32| {
                    (b * block + t..n)
                        .step_by((blocks * block) as usize)
                        .any(hit)
                };
                (0..block).filter(|&t| found(t)).count() as u32
            })
            .collect();
        assert_eq!(
            counts.to_vec().unwrap(),
            want,
            "{mode:?}: strided_first_hits"
        );

        // A value taken from a block-wide local before the block changes it.
        let mut data = DeviceBuffer::<u32>::zeroed(&dev, 2 * 96).unwrap();
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe { k::halving_offsets.launch(&dev, LaunchConfig::linear(2, 96), &mut data) }.unwrap();
        let want: Vec<u32> = (0..2 * 96).map(|i| i % 96 + 96 + 48).collect();
        assert_eq!(data.to_vec().unwrap(), want, "{mode:?}: halving_offsets");

        // Loads of a tile's halo under tests of the thread's edge, on grids the blocks
        // overrun and on one they fit.
        for n in [1usize, 5, 16, 37] {
            let blocks = n.div_ceil(k::HALO_BLOCK);
            let input: Vec<u32> = (0..n * n)
                .map(|i| (i as u32).wrapping_mul(2_654_435_761) % 1000)
                .collect();
            let dinput = DeviceBuffer::from_slice(&dev, &input).unwrap();
            let mut out = DeviceBuffer::<u32>::zeroed(&dev, n * n).unwrap();
            let threads = blocks * blocks * k::HALO_BLOCK * k::HALO_BLOCK;
            let mut cols = DeviceBuffer::<u32>::zeroed(&dev, threads).unwrap();
            let side = k::HALO_BLOCK as u32;
            let config = LaunchConfig {
                grid: (blocks as u32, blocks as u32, 1),
                block: (side, side, 1),
                shared_mem_bytes: 0,
                cluster: (1, 1, 1),
            };
            // SAFETY: the buffers hold every element the kernel reaches through its pointers.
            unsafe { k::halo_stencil.launch(&dev, config, n as u32, &dinput, &mut out, &mut cols) }
                .unwrap();
            let at = |r: usize, c: usize, dr: isize, dc: isize| {
                let (r, c) = (r as isize + dr, c as isize + dc);
                if r < 0 || c < 0 || r >= n as isize || c >= n as isize {
                    0
                } else {
                    input[r as usize * n + c as usize]
                }
            };
            let want: Vec<u32> = (0..n * n)
                .map(|i| {
                    let (r, c) = (i / n, i % n);
                    if r == 0 || c == 0 || r + 1 == n || c + 1 == n {
                        return 100 * at(r, c, 0, 0);
                    }
                    at(r, c, 0, 0)
                        + 2 * at(r, c, 0, -1)
                        + 3 * at(r, c, 0, 1)
                        + 5 * at(r, c, -1, 0)
                        + 7 * at(r, c, 1, 0)
                })
                .collect();
            assert_eq!(out.to_vec().unwrap(), want, "{mode:?}: halo_stencil {n}");
            let b = k::HALO_BLOCK;
            let want_cols: Vec<u32> = (0..threads)
                .map(|rank| ((rank / (b * b)) % blocks * b + rank % b) as u32)
                .collect();
            assert_eq!(
                cols.to_vec().unwrap(),
                want_cols,
                "{mode:?}: halo_stencil cols {n}"
            );
        }

        // A loop per side of the barrier, run iteration by iteration for the block.
        for (rows, cols) in [(13usize, 21usize), (16, 8), (1, 3)] {
            let input: Vec<u32> = (0..(rows * cols) as u32).collect();
            let dinput = DeviceBuffer::from_slice(&dev, &input).unwrap();
            let mut out = DeviceBuffer::<u32>::zeroed(&dev, rows * cols).unwrap();
            let edge = k::TRANSPOSE_EDGE;
            let config = LaunchConfig {
                grid: (cols.div_ceil(edge) as u32, rows.div_ceil(edge) as u32, 1),
                block: (edge as u32, 2, 1),
                shared_mem_bytes: 0,
                cluster: (1, 1, 1),
            };
            // SAFETY: the buffers hold every element the kernel reaches through its pointers.
            unsafe {
                k::tiled_transpose.launch(&dev, config, rows as u32, cols as u32, &dinput, &mut out)
            }
            .unwrap();
            let want: Vec<u32> = (0..rows * cols)
                .map(|i| input[(i % rows) * cols + i / rows])
                .collect();
            assert_eq!(
                out.to_vec().unwrap(),
                want,
                "{mode:?}: tiled_transpose {rows}x{cols}"
            );
        }
    }
}

/// What [`k::pyramid_min`] computes, block by block.
fn pyramid_min_reference(start: &[u32], wall: &[u32], steps: usize, block: usize) -> Vec<u32> {
    let mut out = start.to_vec();
    for (b, part) in out.chunks_mut(block).enumerate() {
        let mut prev = part.to_vec();
        let mut result = vec![0u32; block];
        let mut computed = vec![false; block];
        for step in 0..steps {
            computed.iter_mut().for_each(|c| *c = false);
            for t in (step + 1)..block.saturating_sub(step + 1) {
                let i = b * block + t;
                let cost = wall[(step * block + i) % wall.len()];
                result[t] = prev[t - 1].min(prev[t]).min(prev[t + 1]) + cost;
                computed[t] = true;
            }
            if step + 1 == steps {
                break;
            }
            for t in 0..block {
                if computed[t] {
                    prev[t] = result[t];
                }
            }
        }
        for t in 0..block {
            if computed[t] {
                part[t] = result[t];
            }
        }
    }
    out
}

/// The CPU link gives every kernel with barriers a region entry point, whatever the source
/// looked like (barriers in generic helpers and closures, masked warp operations, `#[kernels]`
/// modules), except one whose barrier it reaches only through recursion, which carries the
/// reason (naming the function) for the build to report.
#[test]
fn the_image_says_which_kernels_keep_coroutines_and_why() {
    let Some(image) = ir_image() else {
        return;
    };
    let notes = offload_format::image::elf::cpu_coroutine_notes(image).unwrap();
    let kernels: Vec<&str> = notes.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kernels, ["recursive_halving"]);
    assert!(
        notes[0]
            .1
            .contains("halve` reaches a barrier and calls itself")
            && notes[0].1.contains("tests/fixtures/kernels/src/lib.rs:"),
        "{}",
        notes[0].1
    );
    use object::{Object, ObjectSymbol};
    let file = object::File::parse(image).unwrap();
    let mut regions: Vec<&str> = file
        .dynamic_symbols()
        .filter_map(|s| s.name().ok()?.strip_prefix(CPU_IR_REGIONS_PREFIX))
        .collect();
    regions.sort();
    assert_eq!(
        regions,
        [
            // Row reductions and a fragment conversion: warp operations, then a barrier.
            "accumulator_rows",
            // A generic kernel's instantiations run split at their barriers too.
            "accumulator_to_tile__bf16",
            "accumulator_to_tile__f16",
            "axpy_tiled__f32__128",
            "axpy_tiled__f32__64",
            "axpy_tiled__f64__128",
            "axpy_tiled__f64__64",
            "axpy_tiled__u32__128",
            "axpy_tiled__u32__64",
            "block_scan",
            "block_sum",
            "block_uniform_barrier",
            "blur3",
            "checked_block_sum",
            "clamped_window",
            // A closure bound to a local, made before a barrier and called after it.
            "closure_over_tile",
            // Threads that returned, the others at a block barrier, then warp operations.
            "early_exit_warp_sum",
            "edge_totals",
            // A barrier in a const-generic helper.
            "generic_tiles",
            "grid_max",
            "half_dot",
            "halo_stencil",
            "halving_offsets",
            "hidden_barrier",
            "hidden_warp_sum",
            "loop_barrier",
            // Masked warp operations, in a branch.
            "masked_warp_sum",
            "match_phases",
            "matmul_tiled",
            "matrix_loads",
            "matrix_stores",
            // 32×32×8 matrix multiplies: their fragments exchanged at warp barriers (the
            // 16×16×16 GEMM has none: each lane keeps the rows and columns its outputs need).
            "mma_gemm_32x32__bf16",
            "mma_gemm_32x32__f16",
            "parked_lanes",
            "pyramid_min",
            "recurse_after_barrier",
            // Barriers and warp operations in functions of a `#[kernels]` module.
            "reduce_with_helpers",
            "reverse_blocks",
            "reverse_dynamic",
            "reverse_slices",
            "scan_with_helper",
            "shared_atomics",
            "shared_shuffle_rows",
            "shuffle_distances",
            "skipping_passes",
            // A pipeline of asynchronous copies, its `Stage` kept per thread across barriers.
            "staged_reverse",
            "stepped_flags",
            "strided_first_hits",
            "strided_histogram",
            "tile_copy_async",
            "tiled_transpose",
            "tiled_weighted_sums",
            // Not Hopper's kernels: their barriers follow the early return of their query,
            // which the CPU device answers with a constant, so they have none left there.
            "warp_block_sum",
            // Warp operations after calls and assignments.
            "warp_ops",
            "warp_ops_in_statements",
            "warp_sync_sum",
            "wide_locals",
            "wide_tiles__bf16",
            "wide_tiles__f16"
        ]
    );
}

/// Which way a kernel's barriers run is decided on its first launch and said under
/// `OFFLOAD_LOG`: as loops wherever its barriers are (in called functions too), with
/// coroutines where the image has no region entry point (a barrier reached through
/// recursion), and once, with coroutines, where a block's values do not fit the lane storage.
/// Runs itself again as a child to read the log.
#[test]
fn the_barrier_path_is_chosen_per_kernel_and_logged() {
    if !setup() {
        return;
    }
    const CHILD: &str = "OFFLOAD_TEST_BARRIER_LOG_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let dev = Device::cpu();
        let mut data = DeviceBuffer::<i32>::zeroed(&dev, 128).unwrap();
        // Two launches: the way is chosen, and said, on the first.
        for _ in 0..2 {
            // SAFETY: the buffers hold every element the kernel reaches through its pointers.
            unsafe { k::reverse_blocks.launch(&dev, LaunchConfig::linear(2, 64), &mut data) }
                .unwrap();
        }
        // SAFETY: the buffers hold every element the kernel reaches through its pointers.
        unsafe { k::hidden_barrier.launch(&dev, LaunchConfig::linear(2, 64), &mut data) }.unwrap();
        let (n, words) = (64u32, DeviceBuffer::from_slice(&dev, &[7u32; 64]).unwrap());
        let mut sum = DeviceBuffer::<u64>::zeroed(&dev, 1).unwrap();
        // SAFETY: `n` elements of `words`; `sum` is one element.
        unsafe { k::warp_block_sum.launch(&dev, LaunchConfig::linear(2, 32), n, &words, &mut sum) }
            .unwrap();
        assert_eq!(sum.to_vec().unwrap(), [7 * 64]);
        let mut sums = DeviceBuffer::<u32>::zeroed(&dev, 4).unwrap();
        // SAFETY: an element of `words` per thread, two of `sums` per warp.
        unsafe { k::hidden_warp_sum.launch(&dev, LaunchConfig::linear(2, 32), &words, &mut sums) }
            .unwrap();
        assert_eq!(sums.to_vec().unwrap(), [7 * 32; 4]);
        let mut rows = DeviceBuffer::<u32>::zeroed(&dev, 64 * k::WARP_OPS_WORDS).unwrap();
        // SAFETY: WARP_OPS_WORDS elements of `rows` per thread.
        unsafe {
            k::warp_ops_in_statements.launch(&dev, LaunchConfig::linear(2, 32), 1, &mut rows)
        }
        .unwrap();
        let mut sums = DeviceBuffer::<u32>::zeroed(&dev, 2).unwrap();
        // SAFETY: `n` elements of `words`, an element of `sums` per block.
        unsafe {
            k::called_barriers::reduce_with_helpers.launch(
                &dev,
                LaunchConfig::linear(2, 32),
                n,
                &words,
                &mut sums,
            )
        }
        .unwrap();
        assert_eq!(sums.to_vec().unwrap(), [3 * 7 * 32; 2]);
        let mut halves = DeviceBuffer::<u32>::zeroed(&dev, 2).unwrap();
        k::recursive_halving
            .launch(&dev, LaunchConfig::linear(2, 32), &words, &mut halves)
            .unwrap();
        assert_eq!(halves.to_vec().unwrap(), [7 * 32; 2]);
        // 2 KiB a thread across a barrier: blocks of 1024 exceed the lane storage.
        let mut data = DeviceBuffer::<u32>::zeroed(&dev, 3 * 1024).unwrap();
        for _ in 0..2 {
            // SAFETY: an element of `data` per thread.
            unsafe { k::wide_locals.launch(&dev, LaunchConfig::linear(3, 1024), &mut data) }
                .unwrap();
        }
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "the_barrier_path_is_chosen_per_kernel_and_logged",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env("OFFLOAD_LOG", "1")
        .env_remove("OFFLOAD_CPU_BARRIERS")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "kernel `reverse_blocks` has barriers; runs as loops over each block's threads"
        ),
        "{stderr}"
    );
    // Barriers in functions the kernel calls: the CPU link sees them after inlining; the
    // source form finds them on block 0 and leaves the kernel to coroutines.
    let hidden = |kernel: &str| {
        let said = format!("kernel `{kernel}` has barriers; runs ");
        match cpu_common::image_form() {
            "source" => format!(
                "{said}with one coroutine per GPU thread (it reached a barrier or a warp \
                 operation outside its body"
            ),
            _ => format!("{said}as loops over each block's threads"),
        }
    };
    assert!(stderr.contains(&hidden("hidden_barrier")), "{stderr}");
    assert!(
        stderr.contains(
            "kernel `warp_block_sum` has barriers; runs as loops over each block's threads"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "kernel `warp_ops_in_statements` has barriers; runs as loops over each block's threads"
        ),
        "{stderr}"
    );
    assert!(stderr.contains(&hidden("hidden_warp_sum")), "{stderr}");
    assert!(
        stderr.contains("kernel `recursive_halving` has barriers; runs with one coroutine per GPU thread (no region form in its image)"),
        "{stderr}"
    );
    // Its barriers and warp operations are all in functions of its `#[kernels]` module.
    assert!(
        stderr.contains(
            "kernel `reduce_with_helpers` has barriers; runs as loops over each block's threads"
        ),
        "{stderr}"
    );
    // Which form's loops (an image has one), said once.
    assert_eq!(
        stderr
            .matches("kernel `reverse_blocks` has barriers")
            .count(),
        1,
        "{stderr}"
    );
    let ir_form = "kernel `reverse_blocks` has barriers; runs as loops over each block's threads \
                   between them (formed by the CPU link)";
    assert_eq!(
        stderr.contains(ir_form),
        cpu_common::image_form() == "ir",
        "{stderr}"
    );
    // Said once for the two launches.
    let overflow = "kernel `wide_locals`: the values its regions keep per thread do not fit the \
                    1024 KiB of lane storage a worker has at 1024 threads a block; its blocks run \
                    with one coroutine per GPU thread";
    assert_eq!(stderr.matches(overflow).count(), 1, "{stderr}");
}

/// The region form exists to let the optimizer vectorize across a block's threads: the tiled
/// matrix product's inner region (16 multiply-adds of a row of `tile_b` by one element of
/// `tile_a`, for 16 consecutive threads) must be packed SSE arithmetic, not one thread at a
/// time.
#[cfg(target_arch = "x86_64")]
#[test]
fn the_matmul_inner_region_is_vector_code() {
    let prefix = regions_prefix();
    let Some(text) = disassemble(&format!("{prefix}matmul_tiled")) else {
        return;
    };
    let mnemonic = |line: &str| line.split_whitespace().nth(1).map(str::to_owned);
    let mnemonics: Vec<String> = text.lines().filter_map(mnemonic).collect();
    let packed_mul = mnemonics.iter().filter(|m| *m == "mulps").count();
    let packed_add = mnemonics.iter().filter(|m| *m == "addps").count();
    assert!(
        packed_mul >= 16 && packed_add >= 16,
        "matmul_tiled's region entry ({prefix}) has {packed_mul} mulps and {packed_add} addps:\n{text}"
    );
}

/// The image's exported symbols, sorted.
fn exported_symbols(image: &[u8]) -> Vec<String> {
    use object::{Object as _, ObjectSymbol as _};
    let file = object::File::parse(image).unwrap();
    let mut names: Vec<String> = file
        .dynamic_symbols()
        .filter(|s| s.is_definition())
        .map(|s| s.name().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

/// An image whose barriers are formed in the CPU link (the kernel crate's bitcode linked,
/// internalized, optimized and compiled by the device link) exports the entries of the one the
/// `#[kernel]` macro's source form makes, its region entries the CPU link's alone, and none of
/// the IR form's body functions or hooks; `OFFLOAD_CPU_BARRIERS_FORM=source` still gives the
/// source form's image, with the macro's region entries and notes.
#[test]
fn the_cpu_link_exports_the_entries_the_source_form_does() {
    use offload_format::abi::{
        CPU_BODY_PREFIX, CPU_IR_PREFIX, CPU_NOTE_PREFIX, CPU_RUN_PREFIX, CPU_SYMBOL_PREFIX,
    };
    let level = offload_format::CpuLevel::Baseline;
    let ir = match cpu_common::build_image_in_form(level, Some("ir")) {
        Ok((image, _)) => image,
        Err(why) => return cpu_common::skip(&why),
    };
    let (source, _) = cpu_common::build_image_in_form(level, Some("source")).unwrap();
    let (ir, source) = (exported_symbols(&ir), exported_symbols(&source));
    let entries = |symbols: &[String]| -> Vec<String> {
        symbols
            .iter()
            .filter(|s| s.starts_with(CPU_RUN_PREFIX) || s.starts_with(CPU_THREAD_PREFIX))
            .cloned()
            .collect()
    };
    assert!(entries(&source).len() > 100, "{source:?}");
    assert_eq!(entries(&ir), entries(&source));
    for symbol in &ir {
        assert!(
            symbol.starts_with(CPU_SYMBOL_PREFIX) && !symbol.starts_with(CPU_BODY_PREFIX),
            "the IR form's image exports `{symbol}`"
        );
        assert!(!symbol.starts_with(CPU_IR_PREFIX), "{symbol}");
    }
    // The source form keeps the macro's region entries and notes; the IR form has the CPU
    // link's region entries instead, for every kernel with barriers (a closure's, a masked warp
    // operation's too).
    assert!(
        source.contains(&format!("{CPU_REGIONS_PREFIX}matmul_tiled")),
        "{source:?}"
    );
    assert!(
        !ir.iter().any(|s| s.starts_with(CPU_REGIONS_PREFIX)),
        "{ir:?}"
    );
    for kernel in ["matmul_tiled", "closure_over_tile", "masked_warp_sum"] {
        let symbol = format!("{CPU_IR_REGIONS_PREFIX}{kernel}");
        assert!(ir.contains(&symbol), "{ir:?}");
        assert!(!source.contains(&symbol), "{source:?}");
    }
    assert!(
        source.iter().any(|s| s.starts_with(CPU_NOTE_PREFIX)),
        "{source:?}"
    );
}

/// The prefix of the region entry points of the fixture's image: the CPU link's, or in an
/// image of the source form `#[kernel]`'s.
fn regions_prefix() -> &'static str {
    match cpu_common::image_form() {
        "source" => CPU_REGIONS_PREFIX,
        _ => CPU_IR_REGIONS_PREFIX,
    }
}

/// The fixture's image where it is of the IR form; `None` (after saying why) in a run with an
/// image of the source form, or where it cannot be built.
fn ir_image() -> Option<&'static [u8]> {
    if cpu_common::image_form() != "ir" {
        // Not a missing tool: the default run tests the IR form.
        eprintln!("skipped: the fixture's image is of the source form in this run");
        return None;
    }
    image()
}

/// `symbol` of the fixture's CPU image, disassembled by `llvm-objdump`; `None` (after saying
/// why) when the image or the tool is missing.
fn disassemble(symbol: &str) -> Option<String> {
    let image = image()?;
    let objdump = offload_toolchain::Tool::LlvmObjdump.for_test()?;
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cpu-device-disassembly");
    std::fs::create_dir_all(&dir).unwrap();
    // One copy per symbol: tests run in parallel.
    let so = dir.join(format!("{symbol}.so"));
    std::fs::write(&so, image).unwrap();
    let out = Command::new(objdump)
        .args(["-d", "--no-show-raw-insn"])
        .arg(format!("--disassemble-symbols={symbol}"))
        .arg(&so)
        .output()
        .unwrap();
    assert!(out.status.success());
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// In region form a block's threads run one after another on one worker, so atomics on its
/// shared memory are plain accesses: `shared_atomics`' region entry has no locked instruction
/// (its coroutine entry keeps them).
#[test]
fn shared_memory_atomics_take_no_lock_in_region_form() {
    let Some(regions) = disassemble(&format!("{}shared_atomics", regions_prefix())) else {
        return;
    };
    assert!(regions.lines().count() > 20, "{regions}");
    let is_locked = |line: &str| line.split_whitespace().nth(1) == Some("lock");
    let locked = regions.lines().filter(|l| is_locked(l)).count();
    assert_eq!(locked, 0, "{regions}");
    let coroutines = disassemble(&format!("{CPU_THREAD_PREFIX}shared_atomics")).unwrap();
    assert!(coroutines.contains("lock"), "{coroutines}");
}

/// A block reduction's one total for the grid (`block_sum`: thread 0 adds its block's sum,
/// relaxed; `grid_max`: its block's largest, `fetch_max`): each worker combines its blocks'
/// operations and makes one as it leaves, so that the workers do not take the total's line
/// from each other once a block. The region entry's locked operations lie outside every loop
/// of it (no backward jump spans one, but a compare-and-swap's retry).
#[test]
fn a_grids_one_total_is_added_once_per_worker_outside_the_loops() {
    if cpu_common::image_form() != "ir" {
        // Not a missing tool: the CPU link combines them, and the default run tests its form.
        eprintln!("skipped: the fixture's image is of the source form in this run");
        return;
    }
    for kernel in ["block_sum", "grid_max"] {
        let Some(regions) = disassemble(&format!("{}{kernel}", regions_prefix())) else {
            return;
        };
        let address = |line: &str| {
            let field = line.split(':').next()?.trim();
            u64::from_str_radix(field, 16).ok()
        };
        let locked: Vec<u64> = regions
            .lines()
            .filter(|l| l.split_whitespace().nth(1) == Some("lock"))
            .filter_map(address)
            .collect();
        assert!(!locked.is_empty(), "{regions}");
        let backward_jumps: Vec<(u64, u64)> = regions
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace().skip(1);
                let op = words.next()?;
                let target = u64::from_str_radix(words.next()?.strip_prefix("0x")?, 16).ok()?;
                let from = address(line)?;
                // Not the retry of a compare-and-swap (x86 has no `fetch_max`): a few
                // instructions back to the load before it.
                (op.starts_with('j') && target + 32 <= from).then_some((target, from))
            })
            .collect();
        for at in locked {
            assert!(
                !backward_jumps
                    .iter()
                    .any(|&(top, bottom)| top <= at && at <= bottom),
                "{kernel}: a locked operation at {at:x} inside a loop:\n{regions}"
            );
        }
    }
}

#[test]
fn slice_parameters_launch_safely_and_check_lengths() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let n = 100_003u32;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    let dx = DeviceBuffer::from_slice(&dev, &x).unwrap();
    let mut dy = DeviceBuffer::from_slice(&dev, &y).unwrap();
    // A grid rounded up past the data: the extra threads own no element.
    let config = LaunchConfig::linear(n.div_ceil(256) + 3, 256);
    k::saxpy_slices
        .launch(&dev, config, 3.0, &dx, &mut dy)
        .unwrap();
    let got = dy.to_vec().unwrap();
    for i in 0..n as usize {
        assert_eq!(got[i], 3.0 * x[i] + y[i], "element {i}");
    }

    // `#[len(y.len())] x`: a shorter `x` is refused before anything runs.
    let short = DeviceBuffer::from_slice(&dev, &x[..1000]).unwrap();
    let err = k::saxpy_slices
        .launch(&dev, config, 3.0, &short, &mut dy)
        .unwrap_err();
    match &err {
        Error::BufferTooShort {
            kernel,
            param,
            index,
            len,
            needed,
            needed_expr,
        } => {
            assert_eq!(
                (*kernel, *param, *index, *len, *needed, *needed_expr),
                ("saxpy_slices", "x", 1, 1000, n as usize, "y.len()")
            );
        }
        other => panic!("{other}"),
    }
    assert_eq!(
        err.to_string(),
        format!(
            "kernel `saxpy_slices`: argument 1 (`x`) has 1000 elements, the launch needs {n} \
             (`#[len(y.len())]`)"
        )
    );
    assert_eq!(dy.to_vec().unwrap(), got, "nothing ran");

    // A slice of another device.
    let other = Device::from_backend(Box::new(CpuBackend::with_threads(1)));
    let foreign = DeviceBuffer::from_slice(&other, &x).unwrap();
    let err = k::saxpy_slices
        .launch(&dev, config, 3.0, &foreign, &mut dy)
        .unwrap_err();
    assert!(matches!(err, Error::WrongDevice { index: 1, .. }), "{err}");

    // Empty buffers: every thread owns nothing.
    let empty_x = DeviceBuffer::<f32>::zeroed(&dev, 0).unwrap();
    let mut empty_y = DeviceBuffer::<f32>::zeroed(&dev, 0).unwrap();
    k::saxpy_slices
        .launch(
            &dev,
            LaunchConfig::linear(2, 32),
            1.0,
            &empty_x,
            &mut empty_y,
        )
        .unwrap();
}

#[test]
fn disjoint_slices_hand_out_chunks_and_rows() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    // 5 blocks of 7 threads, chunks of 3 over 100 elements: ranks 0..=33 own elements.
    let mut out = DeviceBuffer::<u32>::from_slice(&dev, &[u32::MAX; 100]).unwrap();
    k::fill_chunks
        .launch(&dev, LaunchConfig::linear(5, 7), 3, &mut out)
        .unwrap();
    let want: Vec<u32> = (0..100).map(|i| i / 3).collect();
    assert_eq!(out.to_vec().unwrap(), want);

    // A 10 x 5 array under a 12 x 8 grid of threads in 4 x 4 blocks.
    let (width, height) = (10usize, 5usize);
    let mut rows = DeviceBuffer::<u32>::zeroed(&dev, width * height).unwrap();
    let config = LaunchConfig {
        grid: (3, 2, 1),
        block: (4, 4, 1),
        shared_mem_bytes: 0,
        cluster: (1, 1, 1),
    };
    k::fill_rows
        .launch(&dev, config, width as u32, &mut rows)
        .unwrap();
    let got = rows.to_vec().unwrap();
    for y in 0..height {
        for x in 0..width {
            assert_eq!(got[y * width + x], (x + 1000 * y + 1) as u32, "({x}, {y})");
        }
    }
}

#[test]
fn slices_in_kernels_with_barriers() {
    if !setup() {
        return;
    }
    for (mode, dev) in barrier_modes() {
        let blocks = 9u32;
        // One element short of the grid: the last thread reads 0 through `get`.
        let input: Vec<i32> = (0..blocks as i32 * 64 - 1).map(|i| i * 3 - 7).collect();
        let din = DeviceBuffer::from_slice(&dev, &input).unwrap();
        let mut out = DeviceBuffer::<i32>::zeroed(&dev, input.len()).unwrap();
        k::reverse_slices
            .launch(&dev, LaunchConfig::linear(blocks, 64), &din, &mut out)
            .unwrap();
        let got = out.to_vec().unwrap();
        for (i, &v) in got.iter().enumerate() {
            let src = (i / 64) * 64 + 63 - i % 64;
            let want = input.get(src).copied().unwrap_or(0);
            assert_eq!(v, want, "{mode:?}: element {i}");
        }
    }
}

/// The line of `needle` in the fixture kernels' source, 1-based.
fn fixture_line(needle: &str) -> u32 {
    let source = std::fs::read_to_string(fixture_dir().join("src/lib.rs")).unwrap();
    let index = source.lines().position(|l| l.contains(needle)).unwrap();
    index as u32 + 1
}

#[test]
fn a_kernel_panic_is_an_error_with_its_message_and_place() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let input: Vec<u32> = (0..100).collect();
    let din = DeviceBuffer::from_slice(&dev, &input).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&dev, 100).unwrap();
    // Thread 99 reads `input[100]`.
    for _ in 0..2 {
        let err = k::copy_offset
            .launch(&dev, LaunchConfig::linear(2, 64), 1, &din, &mut out)
            .unwrap_err();
        match &err {
            Error::KernelPanic {
                kernel,
                device,
                panic,
            } => {
                let KernelPanicReport {
                    message,
                    file,
                    line,
                    column,
                    block,
                    thread,
                } = &**panic;
                assert_eq!(kernel, "copy_offset");
                assert_eq!(device, "cpu");
                assert_eq!(
                    message,
                    "index out of bounds: the len is 100 but the index is 100"
                );
                assert!(file.ends_with("src/lib.rs"), "{file}");
                assert_eq!(*line, fixture_line("*o = input[i];"));
                assert!(*column > 0);
                assert_eq!((*block, *thread), ([1, 0, 0], [35, 0, 0]));
            }
            other => panic!("{other}"),
        }
        if let Error::KernelPanic { panic, .. } = &err {
            let KernelPanicReport {
                file, line, column, ..
            } = &**panic;
            assert_eq!(
                err.to_string(),
                format!(
                    "kernel `copy_offset` panicked on cpu at {file}:{line}:{column} (block (1, 0, \
                     0), thread (35, 0, 0)): index out of bounds: the len is 100 but the index \
                     is 100"
                )
            );
        }
    }
    // The device goes on: the same kernel within bounds, then another.
    k::copy_offset
        .launch(&dev, LaunchConfig::linear(2, 64), 0, &din, &mut out)
        .unwrap();
    assert_eq!(out.to_vec().unwrap(), input);
    let mut chunks = DeviceBuffer::<u32>::zeroed(&dev, 30).unwrap();
    k::fill_chunks
        .launch(&dev, LaunchConfig::linear(1, 10), 3, &mut chunks)
        .unwrap();
    assert_eq!(
        chunks.to_vec().unwrap(),
        (0..30).map(|i| i / 3).collect::<Vec<u32>>()
    );
}

#[test]
fn panics_in_kernels_with_barriers_and_in_every_thread() {
    if !setup() {
        return;
    }
    let assert_line = fixture_line("    assert!(");
    for (mode, dev) in barrier_modes() {
        let blocks = 40u32;
        let data: Vec<u32> = (0..blocks * 64).map(|i| i % 1000).collect();
        let din = DeviceBuffer::from_slice(&dev, &data).unwrap();
        let mut sums = DeviceBuffer::<u32>::zeroed(&dev, blocks as usize).unwrap();
        // One value over the limit: element 2000, block 31, thread 16.
        let mut bad = data.clone();
        bad[2000] = 5000;
        let dbad = DeviceBuffer::from_slice(&dev, &bad).unwrap();
        for _ in 0..2 {
            let err = k::checked_block_sum
                .launch(
                    &dev,
                    LaunchConfig::linear(blocks, 64),
                    1000,
                    &dbad,
                    &mut sums,
                )
                .unwrap_err();
            match &err {
                Error::KernelPanic { panic, .. } => {
                    let KernelPanicReport {
                        message,
                        line,
                        block,
                        thread,
                        ..
                    } = &**panic;
                    assert_eq!(message, "value 5000 at 2000 is over the limit 1000");
                    assert_eq!(*line, assert_line, "{mode:?}");
                    assert_eq!((*block, *thread), ([31, 0, 0], [16, 0, 0]), "{mode:?}");
                }
                other => panic!("{mode:?}: {other}"),
            }
        }
        // Every thread of every block panics: one error, the first report.
        let err = k::checked_block_sum
            .launch(&dev, LaunchConfig::linear(blocks, 64), 0, &din, &mut sums)
            .unwrap_err();
        assert!(
            matches!(&err, Error::KernelPanic { panic, .. } if panic.message.ends_with("is over the limit 0")),
            "{mode:?}: {err}"
        );
        // And the kernel still runs right.
        k::checked_block_sum
            .launch(
                &dev,
                LaunchConfig::linear(blocks, 64),
                1000,
                &din,
                &mut sums,
            )
            .unwrap();
        let want: Vec<u32> = data.chunks(64).map(|c| c.iter().sum()).collect();
        assert_eq!(sums.to_vec().unwrap(), want, "{mode:?}");
    }
}

/// Core's panics on the CPU device keep their full messages (GPUs record values or literal
/// text and the host words them the same way, see `backend::gpu::channel`).
/// `Rows`: a slice as rows, read by column and row, each check's panic with its message and
/// the caller's line.
#[test]
fn rows_read_by_column_and_row() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let (w, h) = (7u32, 5u32);
    // One element more than the rows hold: not reachable through them.
    let input: Vec<u32> = (0..w * h + 1).map(|i| i * 3 + 1).collect();
    let din = DeviceBuffer::from_slice(&dev, &input).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&dev, (w * h) as usize).unwrap();
    let config = LaunchConfig {
        grid: (2, 3, 1),
        block: (4, 2, 1),
        shared_mem_bytes: 0,
        cluster: (1, 1, 1),
    };
    k::shifted_rows
        .launch(&dev, config, w, h, 2, 0, 0, &din, &mut out)
        .unwrap();
    let at = |x: u32, y: u32| input[(y * w + x) as usize];
    let want: Vec<u32> = (0..h)
        .flat_map(|y| (0..w).map(move |x| (x, y)))
        .map(|(x, y)| {
            let row_sum: u32 = (0..w).map(|c| at(c, y)).sum();
            let shifted = if x + 2 < w { at(x + 2, y) } else { row_sum };
            shifted + 1000 * at(x, y)
        })
        .collect();
    assert_eq!(out.to_vec().unwrap(), want);

    // `u32` indices: the same reads, and `width * height` past `u32::MAX` refused.
    k::mirrored_rows
        .launch(&dev, config, w, h, &din, &mut out)
        .unwrap();
    let want: Vec<u32> = (0..w * h)
        .map(|i| at(i % w, i / w) + 1000 * at(w - 1 - i % w, i / w))
        .collect();
    assert_eq!(out.to_vec().unwrap(), want);
    let err = k::mirrored_rows
        .launch(&dev, config, 1 << 16, 1 << 16, &din, &mut out)
        .unwrap_err();
    let Error::KernelPanic { panic, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(
        panic.message,
        "rows: the slice holds fewer than width x height elements"
    );

    let line = fixture_line("*o = shifted.wrapping_add(rows.at(");
    // Column 6 in every row, then row 4 in every column, then every thread: which thread
    // reports first is the scheduler's choice, its column or row is not.
    for (dx, dy, h, message) in [
        (
            1,
            0,
            h,
            "column index out of bounds: not less than the rows' width",
        ),
        (
            0,
            1,
            h,
            "row index out of bounds: not less than the number of rows",
        ),
        (
            0,
            0,
            h + 1,
            "rows: the slice holds fewer than width x height elements",
        ),
    ] {
        let err = k::shifted_rows
            .launch(&dev, config, w, h, 2, dx, dy, &din, &mut out)
            .unwrap_err();
        let Error::KernelPanic { panic, .. } = &err else {
            panic!("{err}");
        };
        assert_eq!(panic.message, message);
        let want_line = if h == 5 {
            line
        } else {
            fixture_line("let rows = Rows::new(input, w, h);")
        };
        assert_eq!(panic.line, want_line, "{message}");
        let (x, y) = (
            panic.block[0] * 4 + panic.thread[0],
            panic.block[1] * 2 + panic.thread[1],
        );
        match (dx, dy) {
            (1, _) => assert_eq!(x, 6, "{message}"),
            (_, 1) => assert_eq!(y, 4, "{message}"),
            _ => {}
        }
    }
}

#[test]
fn each_kind_of_panic_reports_its_message() {
    if !setup() {
        return;
    }
    let dev = Device::from_backend(Box::new(CpuBackend::with_threads(2)));
    let values: Vec<u32> = (0..64).collect();
    let dvalues = DeviceBuffer::from_slice(&dev, &values).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&dev, 64).unwrap();
    let expected = [
        (1, "index out of bounds: the len is 64 but the index is 69"),
        (2, "no value past the end"),
        (
            3,
            "assertion `left == right` failed: values differ\n  left: 5\n right: 6",
        ),
        (4, "attempt to divide by zero"),
        (5, "thread 5 was told to panic"),
        (
            6,
            "called `Result::unwrap()` on an `Err` value: TryFromIntError(NegOverflow)",
        ),
        (7, "slice index starts at 7 but ends at 6"),
        (8, "a literal message"),
    ];
    for (kind, message) in expected {
        let err = k::panic_kinds
            .launch(
                &dev,
                LaunchConfig::linear(2, 32),
                kind,
                5,
                &dvalues,
                &mut out,
            )
            .unwrap_err();
        match &err {
            Error::KernelPanic { panic, .. } => {
                assert_eq!(panic.message, message, "kind {kind}");
                assert_eq!(panic.thread, [5, 0, 0], "kind {kind}");
            }
            other => panic!("kind {kind}: {other}"),
        }
    }
    k::panic_kinds
        .launch(&dev, LaunchConfig::linear(2, 32), 0, 5, &dvalues, &mut out)
        .unwrap();
    assert_eq!(out.to_vec().unwrap(), values);
}

/// The depths `recurse` reports for `threads` threads, thread `deep` going `depth` deep.
fn depths(threads: u32, deep: u32, depth: u32) -> Vec<u32> {
    (0..threads)
        .map(|i| if i == deep { depth } else { 10 })
        .collect()
}

/// The stack overflow of `err`: kernel, block, thread and stack size.
fn overflow(err: &Error) -> (&str, [u32; 3], [u32; 3], usize) {
    match err {
        Error::KernelStackOverflow {
            kernel,
            device,
            block,
            thread,
            stack_bytes,
        } => {
            assert_eq!(device, "cpu");
            (kernel.as_str(), *block, *thread, *stack_bytes)
        }
        other => panic!("not a stack overflow: {other}"),
    }
}

/// Recursion past a GPU thread's stack ends the launch with a typed error naming the kernel,
/// block and thread, as a panic does; the process and the device go on.
#[test]
fn a_stack_overflow_is_an_error_naming_the_thread() {
    if !setup() {
        return;
    }
    let dev = Device::cpu();
    let mut out = DeviceBuffer::<u32>::zeroed(&dev, 128).unwrap();
    // Thread 70 is thread 6 of block 2.
    k::recurse
        .launch(&dev, LaunchConfig::linear(4, 32), 2000, 70, &mut out)
        .unwrap();
    assert_eq!(out.to_vec().unwrap(), depths(128, 70, 2000));
    for _ in 0..2 {
        let err = k::recurse
            .launch(&dev, LaunchConfig::linear(4, 32), 50_000_000, 70, &mut out)
            .unwrap_err();
        let (kernel, block, thread, bytes) = overflow(&err);
        assert_eq!(
            (kernel, block, thread, bytes),
            ("recurse", [2, 0, 0], [6, 0, 0], 8 << 20)
        );
        assert_eq!(err.code(), "OFF3026");
        assert_eq!(
            err.to_string(),
            "kernel `recurse` overflowed its stack of 8388608 bytes on cpu (block (2, 0, 0), \
             thread (6, 0, 0)); OFFLOAD_KERNEL_STACK sets a GPU thread's stack"
        );
    }
    // The device goes on: another kernel, then the same one within its stack.
    let mut chunks = DeviceBuffer::<u32>::zeroed(&dev, 30).unwrap();
    k::fill_chunks
        .launch(&dev, LaunchConfig::linear(1, 10), 3, &mut chunks)
        .unwrap();
    assert_eq!(
        chunks.to_vec().unwrap(),
        (0..30).map(|i| i / 3).collect::<Vec<u32>>()
    );
    k::recurse
        .launch(&dev, LaunchConfig::linear(4, 32), 3000, 5, &mut out)
        .unwrap();
    assert_eq!(out.to_vec().unwrap(), depths(128, 5, 3000));
}

/// With barriers a GPU thread runs in region form (on the worker's stack) or as a coroutine
/// on a stack of its own (128 KiB by default): an overflow on either is the same error.
#[test]
fn a_stack_overflow_after_a_barrier_is_an_error_in_every_barrier_mode() {
    if !setup() {
        return;
    }
    for (mode, dev) in barrier_modes() {
        let mut out = DeviceBuffer::<u32>::zeroed(&dev, 128).unwrap();
        k::recurse_after_barrier
            .launch(&dev, LaunchConfig::linear(4, 32), 200, 99, &mut out)
            .unwrap();
        assert_eq!(out.to_vec().unwrap(), depths(128, 99, 200), "{mode:?}");
        for _ in 0..2 {
            let err = k::recurse_after_barrier
                .launch(&dev, LaunchConfig::linear(4, 32), 50_000_000, 99, &mut out)
                .unwrap_err();
            let (kernel, block, thread, bytes) = overflow(&err);
            assert_eq!(
                (kernel, block, thread),
                ("recurse_after_barrier", [3, 0, 0], [3, 0, 0]),
                "{mode:?}"
            );
            let expected = match mode {
                BarrierMode::Regions => 8 << 20,
                BarrierMode::Coroutines => 128 << 10,
            };
            assert_eq!(bytes, expected, "{mode:?}");
        }
        k::recurse_after_barrier
            .launch(&dev, LaunchConfig::linear(4, 32), 200, 0, &mut out)
            .unwrap();
        assert_eq!(out.to_vec().unwrap(), depths(128, 0, 200), "{mode:?}");
    }
}

/// The stack a GPU thread gets is a setting (`OFFLOAD_KERNEL_STACK`): a depth that fits the
/// default overflows a smaller stack, on the fast path and on coroutines.
#[test]
fn the_kernel_stack_is_a_setting() {
    if !setup() {
        return;
    }
    let depth = 20_000;
    // A new device: the first launch runs thread 0 of block 0 apart (to find whether the
    // kernel reaches a barrier), on the same stack as the others.
    let dev = Device::from_backend(Box::new(CpuBackend::with_threads(2)));
    let mut out = DeviceBuffer::<u32>::zeroed(&dev, 64).unwrap();
    for deep in [0, 40] {
        k::recurse
            .launch(&dev, LaunchConfig::linear(2, 32), depth, deep, &mut out)
            .unwrap();
        assert_eq!(out.to_vec().unwrap(), depths(64, deep, depth));
    }
    for mode in [BarrierMode::Regions, BarrierMode::Coroutines] {
        let small = Device::from_backend(Box::new(
            CpuBackend::with_threads(2)
                .with_barriers(mode)
                .with_stack(Some(256 << 10)),
        ));
        let mut out = DeviceBuffer::<u32>::zeroed(&small, 64).unwrap();
        let err = k::recurse
            .launch(&small, LaunchConfig::linear(2, 32), depth, 40, &mut out)
            .unwrap_err();
        assert_eq!(
            overflow(&err),
            ("recurse", [1, 0, 0], [8, 0, 0], 256 << 10),
            "{mode:?}"
        );
        let err = k::recurse_after_barrier
            .launch(&small, LaunchConfig::linear(2, 32), depth, 40, &mut out)
            .unwrap_err();
        assert_eq!(
            overflow(&err),
            ("recurse_after_barrier", [1, 0, 0], [8, 0, 0], 256 << 10),
            "{mode:?}"
        );
        // Deeper than the 128 KiB coroutines get by default (about 110 bytes a frame).
        k::recurse_after_barrier
            .launch(&small, LaunchConfig::linear(2, 32), 1500, 40, &mut out)
            .unwrap();
        assert_eq!(out.to_vec().unwrap(), depths(64, 40, 1500), "{mode:?}");
    }
    let coroutines = Device::from_backend(Box::new(
        CpuBackend::with_threads(2).with_barriers(BarrierMode::Coroutines),
    ));
    let mut out = DeviceBuffer::<u32>::zeroed(&coroutines, 64).unwrap();
    let err = k::recurse_after_barrier
        .launch(&coroutines, LaunchConfig::linear(2, 32), 1500, 40, &mut out)
        .unwrap_err();
    assert_eq!(
        overflow(&err),
        ("recurse_after_barrier", [1, 0, 0], [8, 0, 0], 128 << 10)
    );
}
