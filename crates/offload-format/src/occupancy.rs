//! Occupancy: how many blocks (work-groups) of a kernel one NVIDIA SM (AMD compute unit) keeps
//! resident at once, how many warps (wavefronts) that makes, and which resource stops it
//! keeping more. Pure arithmetic over what a kernel's image says it uses ([`KernelUsage`]:
//! registers, shared memory) and what a launch asks ([`Launch`]: block size, dynamic shared
//! memory), by each vendor's published limits.
//!
//! **NVIDIA** ([`nvidia`]): the rules of CUDA's occupancy calculator (`cuda_occupancy.h`'s
//! `cudaOccMaxActiveBlocksPerMultiprocessor`; the driver's
//! `cuOccupancyMaxActiveBlocksPerMultiprocessor` answers the same question at run time), with
//! the limits of the CUDA C++ Programming Guide's "Technical Specifications per Compute
//! Capability" ([`nvidia_limits`]). For 7.0 to 9.0 the figures were checked against CUDA
//! 11.8's `cuda_occupancy.h` for every combination of 14 block sizes, 18 register counts, 7
//! static and 6 dynamic shared-memory sizes: the same blocks and limiting factors in all.
//! 10.0 and 12.0, which that header predates, take the table's figures with the rules and
//! allocation units of 9.0 (their carveouts those of 9.0 and of 8.6).
//!
//! The resident blocks are the least of four limits, each a whole number of blocks:
//!
//! - warps: the SM's warp slots over the block's warps (`ceil(block / 32)`);
//! - registers: each warp is allocated `registers × 32` rounded up to 256; the register file
//!   (65536) is split evenly between the SM's 4 sub-partitions, so the warps that fit are
//!   `4 × floor(16384 / per-warp)`, and the blocks those warps over the block's; a block
//!   whose registers exceed 65536 (counted as the hardware checks it, with its warps rounded
//!   up to a multiple of 4), or a kernel of more than 255 registers, fits none;
//! - shared memory: static plus dynamic plus the 1 KiB the driver reserves per block (from
//!   compute capability 8.0 on), rounded up to the allocation unit (256 bytes before 8.0,
//!   128 from it), against the SM's shared memory. CUDA's calculator, with no carveout
//!   preference stated (`CU_SHAREDMEM_CARVEOUT_DEFAULT`, what a kernel has unless it sets
//!   one), counts the SM's largest carveout, and so does this; a block over the per-block
//!   opt-in maximum (offload-rt opts in for a launch that needs it) fits none. The smallest
//!   carveout that holds the resident blocks is reported beside ([`Occupancy::carveout_bytes`]);
//! - blocks: the SM's maximum of resident blocks.
//!
//! The limiting resources are every one whose limit equals the result, as the calculator's
//! `limitingFactors` bits. Its block-barrier limit (Hopper on) allows two blocks per block
//! slot for a kernel using one barrier, never fewer than the block limit: it is left out.
//!
//! **AMD** ([`amd`]): the figures of LLVM 22's AMDGPU back end (`AMDGPUBaseInfo.cpp`:
//! `getMaxWavesPerEU`, `getEUsPerCU`, `getVGPRAllocGranule`, `getTotalNumVGPRs`,
//! `getMaxWorkGroupsPerCU`, `getAddressableLocalMemorySize`, `getLocalMemorySize`;
//! `AMDGPUUsage.rst` for the LDS granule and the kernel descriptor's SGPR blocks), checked
//! against the `; Occupancy:` that `llc` 22 prints for each processor ([`amd_limits`]). A
//! work-group's waves share one CU (on GFX10 and later, compiled in LLVM's default WGP mode,
//! one work-group processor: two CUs, four SIMD32s and 128 KiB of LDS). Per SIMD the waves
//! are bounded by its wave slots, by the VGPRs (per lane, rounded up to the granule, from
//! the SIMD's file: on gfx90a, gfx942 and gfx950 one file of 512 holds the VGPRs, then from a
//! 4-aligned offset the AGPRs; gfx908's AGPRs are a second file of 256) and, on GFX9, by the
//! SGPRs (800 per SIMD, allocated by 16). The resident work-groups are the least of:
//!
//! - waves: `floor(SIMDs × wave slots per SIMD / waves per work-group)`;
//! - registers: the same with the waves the VGPRs allow per SIMD;
//! - scalar registers (GFX9): the same with the waves the SGPRs allow;
//! - LDS: static plus dynamic, rounded up to its allocation granule, against the CU's (WGP's)
//!   LDS; one over the most a work-group may have fits none;
//! - work-groups: 16 per CU (32 per WGP), the barriers, for a work-group of more than one
//!   wave (a single-wave work-group takes no barrier).
//!
//! This counts whole work-groups, as HIP's `hipOccupancyMaxActiveBlocksPerMultiprocessor`
//! does, where LLVM's own estimate (`llc`'s `; Occupancy:`) takes the VGPR and SGPR limits
//! per SIMD alone: 210 VGPRs of wave32 on gfx1100 allow 7 waves per SIMD, 28 per WGP, and so
//! 3 work-groups of 8 waves (24 waves, 6 per SIMD) here. For SGPRs LLVM's estimate uses a
//! table of its own (9 waves up to 88 SGPRs on GFX9) where the hardware allocates by 16
//! (8 waves from 81 to 96).

use crate::device::DeviceFamily;
use crate::target_id::{Sm, amdgpu_processor};
use crate::{Error, Result};

/// The most threads a block (work-group) may have, on every architecture here.
pub const MAX_BLOCK_SIZE: u32 = 1024;

/// What one kernel uses, as its image records it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelUsage {
    /// NVIDIA: registers per thread (`ptxas -v`). AMD: architectural VGPRs per lane (from a
    /// code object's metadata: [`KernelUsage::from_amd_metadata`]).
    pub registers: u32,
    /// AMD: accumulation VGPRs per lane (`.agpr_count`: gfx908, gfx90a, gfx942, gfx950); 0
    /// elsewhere.
    pub agprs: u32,
    /// AMD: scalar registers per wave (`.sgpr_count`); 0 for NVIDIA.
    pub sgprs: u32,
    /// Static shared memory (AMD: LDS, `.group_segment_fixed_size`) per block, in bytes.
    pub shared_bytes: u64,
}

impl KernelUsage {
    /// What an AMD code object's metadata records of a kernel on `processor` (`.vgpr_count`,
    /// `.agpr_count`, `.sgpr_count`, `.group_segment_fixed_size`). Where the AGPRs share the
    /// VGPRs' file (gfx90a, gfx942, gfx950) `.vgpr_count` already counts them after the
    /// 4-aligned VGPRs (LLVM's `getTotalNumVGPRs`), so the architectural VGPRs are the rest;
    /// on gfx908 it is the larger of the two files' counts, which is what limits.
    pub fn from_amd_metadata(
        processor: &str,
        vgpr_count: u32,
        agpr_count: u32,
        sgpr_count: u32,
        shared_bytes: u64,
    ) -> KernelUsage {
        let unified = amd_limits(processor, 64).is_some_and(|l| l.agprs == AgprFile::Unified);
        let registers = if unified {
            vgpr_count.saturating_sub(agpr_count)
        } else {
            vgpr_count
        };
        KernelUsage {
            registers,
            agprs: agpr_count,
            sgprs: sgpr_count,
            shared_bytes,
        }
    }
}

/// The shape of a launch that occupancy depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launch {
    /// Threads per block (work-group): 1 to [`MAX_BLOCK_SIZE`].
    pub block_size: u32,
    /// Dynamic shared memory (AMD: dynamic LDS) per block, in bytes.
    pub dynamic_shared_bytes: u64,
}

/// A resource that limits the resident blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Limit {
    /// The warp (wave) slots.
    Warps,
    /// The register file (AMD: the VGPRs, AGPRs included).
    Registers,
    /// AMD's SGPRs (GFX9).
    ScalarRegisters,
    /// Shared memory (AMD: LDS).
    SharedMemory,
    /// The most blocks an SM keeps (AMD: the work-groups a CU's barriers allow).
    Blocks,
}

impl Limit {
    /// The resource as the vendor names it: `warps`, `registers`, `shared memory`, `blocks`
    /// for NVIDIA; `waves`, `VGPRs`, `SGPRs`, `LDS`, `work-groups` for AMD.
    pub fn label(self, family: DeviceFamily) -> &'static str {
        let amd = family == DeviceFamily::Amd;
        match self {
            Limit::Warps if amd => "waves",
            Limit::Warps => "warps",
            Limit::Registers if amd => "VGPRs",
            Limit::Registers => "registers",
            Limit::ScalarRegisters => "SGPRs",
            Limit::SharedMemory if amd => "LDS",
            Limit::SharedMemory => "shared memory",
            Limit::Blocks if amd => "work-groups",
            Limit::Blocks => "blocks",
        }
    }

    /// A name for machine-readable output: `warps`, `registers`, `scalar-registers`,
    /// `shared-memory`, `blocks`.
    pub fn key(self) -> &'static str {
        match self {
            Limit::Warps => "warps",
            Limit::Registers => "registers",
            Limit::ScalarRegisters => "scalar-registers",
            Limit::SharedMemory => "shared-memory",
            Limit::Blocks => "blocks",
        }
    }
}

/// The blocks each resource alone would allow per SM (CU); `None` where it sets no limit (no
/// registers or shared memory used, SGPRs on NVIDIA and on AMD from GFX10, the barriers of a
/// single-wave work-group).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockLimits {
    /// By the warp (wave) slots.
    pub warps: u32,
    /// By the registers (AMD: VGPRs).
    pub registers: Option<u32>,
    /// By the SGPRs (AMD GFX9).
    pub scalar_registers: Option<u32>,
    /// By shared memory (AMD: LDS).
    pub shared_memory: Option<u32>,
    /// By the most blocks an SM keeps (AMD: work-groups per CU, its barriers).
    pub blocks: Option<u32>,
}

impl BlockLimits {
    /// Each limit that is set, with its resource, in [`Limit`] order.
    pub fn each(&self) -> Vec<(Limit, u32)> {
        [
            (Limit::Warps, Some(self.warps)),
            (Limit::Registers, self.registers),
            (Limit::ScalarRegisters, self.scalar_registers),
            (Limit::SharedMemory, self.shared_memory),
            (Limit::Blocks, self.blocks),
        ]
        .into_iter()
        .filter_map(|(limit, n)| Some((limit, n?)))
        .collect()
    }
}

/// The occupancy of one kernel's launch on one architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Occupancy {
    /// NVIDIA or AMD.
    pub family: DeviceFamily,
    /// Where the blocks reside: `SM`, `CU` (AMD GFX9) or `WGP` (AMD GFX10 on, WGP mode).
    pub unit: &'static str,
    /// Threads per block (work-group).
    pub block_size: u32,
    /// Threads per warp (wave): 32, or AMD's 64.
    pub wave_size: u32,
    /// Warps (waves) per block.
    pub warps_per_block: u32,
    /// Resident blocks per SM (AMD: work-groups per CU, per WGP from GFX10).
    pub blocks: u32,
    /// Resident warps per SM (waves per CU): `blocks × warps_per_block`.
    pub warps: u32,
    /// Warp (wave) slots per SM (CU).
    pub max_warps: u32,
    /// Sub-partitions of an SM (SIMDs of a CU or WGP) the warps spread over.
    pub simds: u32,
    /// The resources whose limit is the result, in [`Limit`] order: one or more.
    pub limited_by: Vec<Limit>,
    /// What each resource alone allows.
    pub limits: BlockLimits,
    /// NVIDIA: registers allocated per block. AMD: VGPRs allocated per lane of each wave (AGPRs
    /// included), rounded up to the granule.
    pub registers_allocated: u64,
    /// Shared memory (LDS) allocated per block, in bytes: static and dynamic, NVIDIA's
    /// reserved 1 KiB included, rounded up to the allocation unit.
    pub shared_allocated: u64,
    /// NVIDIA: the smallest of the architecture's shared-memory carveouts that holds the
    /// resident blocks' shared memory, in bytes. `None` for AMD.
    pub carveout_bytes: Option<u64>,
}

impl Occupancy {
    /// Resident warps over warp slots, from 0 to 1.
    pub fn fraction(&self) -> f64 {
        f64::from(self.warps) / f64::from(self.max_warps.max(1))
    }

    /// [`Occupancy::fraction`] in percent.
    pub fn percent(&self) -> f64 {
        self.fraction() * 100.0
    }

    /// The most resident warps (waves) on one sub-partition (SIMD), the warps spread evenly.
    pub fn warps_per_simd(&self) -> u32 {
        self.warps.div_ceil(self.simds.max(1))
    }
}

/// An NVIDIA compute capability's limits, as CUDA's occupancy calculator and the CUDA C++
/// Programming Guide's "Technical Specifications per Compute Capability" give them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NvidiaLimits {
    /// Compute capability, major and minor.
    pub compute_capability: (u32, u32),
    /// Resident warps per SM.
    pub max_warps: u32,
    /// Resident blocks per SM.
    pub max_blocks: u32,
    /// 32-bit registers per SM.
    pub registers: u32,
    /// 32-bit registers per block.
    pub registers_per_block: u32,
    /// Registers are allocated per warp in units of this many.
    pub register_granule: u32,
    /// Registers per thread at most.
    pub max_registers_per_thread: u32,
    /// Sub-partitions of an SM, each with a quarter of the register file.
    pub sub_partitions: u32,
    /// Shared memory per SM at the largest carveout, in bytes.
    pub shared: u32,
    /// Shared memory per block with the opt-in, in bytes.
    pub shared_per_block: u32,
    /// Shared memory the driver reserves per block, in bytes.
    pub shared_reserved: u32,
    /// Shared memory is allocated per block in units of this many bytes.
    pub shared_granule: u32,
    /// The shared-memory capacities an SM can be configured with, in KiB.
    pub carveouts_kib: &'static [u32],
}

const VOLTA_CARVEOUTS: &[u32] = &[0, 8, 16, 32, 64, 96];
const TURING_CARVEOUTS: &[u32] = &[32, 64];
const GA100_CARVEOUTS: &[u32] = &[0, 8, 16, 32, 64, 100, 132, 164];
const GA10X_CARVEOUTS: &[u32] = &[0, 8, 16, 32, 64, 100];
const HOPPER_CARVEOUTS: &[u32] = &[0, 8, 16, 32, 64, 100, 132, 164, 196, 228];

/// The compute capabilities [`nvidia_limits`] knows.
pub const NVIDIA_CAPABILITIES: &[(u32, u32)] = &[
    (7, 0),
    (7, 2),
    (7, 5),
    (8, 0),
    (8, 6),
    (8, 7),
    (8, 9),
    (9, 0),
    (10, 0),
    (12, 0),
];

/// The limits of `sm`'s compute capability (its `a`/`f` suffix aside), where known: 7.0, 7.2,
/// 7.5, 8.0, 8.6, 8.7, 8.9, 9.0, 10.0 and 12.0.
pub fn nvidia_limits(sm: Sm) -> Option<NvidiaLimits> {
    const KIB: u32 = 1024;
    // (max warps, max blocks, shared per SM KiB, per block KiB, carveouts), per the guide's
    // table; the calculator's `cudaOccMaxBlocksPerMultiprocessor` and
    // `cudaOccAlignUpShmemSizeVoltaPlus` agree for 7.x to 9.0.
    let (max_warps, max_blocks, shared_kib, per_block_kib, carveouts_kib) =
        match (sm.major(), sm.minor()) {
            (7, 0) | (7, 2) => (64, 32, 96, 96, VOLTA_CARVEOUTS),
            (7, 5) => (32, 16, 64, 64, TURING_CARVEOUTS),
            (8, 0) => (64, 32, 164, 163, GA100_CARVEOUTS),
            (8, 6) => (48, 16, 100, 99, GA10X_CARVEOUTS),
            (8, 7) => (48, 16, 164, 163, GA100_CARVEOUTS),
            (8, 9) => (48, 24, 100, 99, GA10X_CARVEOUTS),
            (9, 0) | (10, 0) => (64, 32, 228, 227, HOPPER_CARVEOUTS),
            (12, 0) => (48, 32, 100, 99, GA10X_CARVEOUTS),
            _ => return None,
        };
    let ampere_on = sm.major() >= 8;
    Some(NvidiaLimits {
        compute_capability: (sm.major(), sm.minor()),
        max_warps,
        max_blocks,
        registers: 64 * KIB,
        registers_per_block: 64 * KIB,
        register_granule: 256,
        max_registers_per_thread: 255,
        sub_partitions: 4,
        shared: shared_kib * KIB,
        shared_per_block: per_block_kib * KIB,
        shared_reserved: if ampere_on { KIB } else { 0 },
        shared_granule: if ampere_on { 128 } else { 256 },
        carveouts_kib,
    })
}

fn check_block_size(block_size: u32) -> Result<()> {
    if (1..=MAX_BLOCK_SIZE).contains(&block_size) {
        Ok(())
    } else {
        Err(Error::BadLaunchShape {
            what: "block size",
            value: u64::from(block_size),
            expected: "a block has 1 to 1024 threads",
        })
    }
}

/// The blocks a limit of `units` allows when each block takes `per_block` of them: `None`
/// when blocks take none.
fn blocks_of(units: u64, per_block: u64) -> Option<u32> {
    (per_block > 0).then(|| u32::try_from(units / per_block).unwrap_or(u32::MAX))
}

/// The least of the limits, and every resource that sets it.
fn least(limits: &BlockLimits) -> (u32, Vec<Limit>) {
    let each = limits.each();
    let blocks = each.iter().map(|&(_, n)| n).min().unwrap_or(0);
    let by = each
        .into_iter()
        .filter(|&(_, n)| n == blocks)
        .map(|(limit, _)| limit)
        .collect();
    (blocks, by)
}

fn unknown_arch(arch: &str) -> Error {
    let mut known: Vec<String> = NVIDIA_CAPABILITIES
        .iter()
        .map(|(major, minor)| format!("sm_{major}{minor}"))
        .collect();
    known.extend(AMD_PROCESSORS.iter().map(|s| (*s).to_owned()));
    Error::UnknownOccupancyArch {
        arch: arch.to_owned(),
        known: format!("rules are known for {}", known.join(", ")),
    }
}

/// The occupancy of a kernel using `usage` launched as `launch` on `sm`, by CUDA's occupancy
/// calculator (see the module's documentation).
///
/// # Errors
///
/// [`Error::UnknownOccupancyArch`] for a compute capability [`nvidia_limits`] does not know;
/// [`Error::BadLaunchShape`] for a block size outside 1 to 1024.
pub fn nvidia(sm: Sm, usage: &KernelUsage, launch: &Launch) -> Result<Occupancy> {
    let l = nvidia_limits(sm).ok_or_else(|| unknown_arch(&sm.to_string()))?;
    check_block_size(launch.block_size)?;
    const WARP: u32 = 32;
    let warps_per_block = launch.block_size.div_ceil(WARP);
    let by_warps = l.max_warps / warps_per_block;

    // cudaOccMaxBlocksPerSMRegsLimit.
    let per_warp = (u64::from(usage.registers) * u64::from(WARP))
        .next_multiple_of(u64::from(l.register_granule));
    let per_block = per_warp * u64::from(warps_per_block);
    let checked_per_block =
        per_warp * u64::from(warps_per_block.next_multiple_of(l.sub_partitions));
    let by_registers = if usage.registers > l.max_registers_per_thread
        || per_block > u64::from(l.registers_per_block)
        || checked_per_block > u64::from(l.registers_per_block)
    {
        Some(0)
    } else {
        let per_sub_partition = u64::from(l.registers / l.sub_partitions);
        blocks_of(per_sub_partition, per_warp).map(|warps_per_sub_partition| {
            warps_per_sub_partition * l.sub_partitions / warps_per_block
        })
    };

    // cudaOccMaxBlocksPerSMSmemLimit, with the default carveout preference.
    let shared = usage
        .shared_bytes
        .saturating_add(launch.dynamic_shared_bytes)
        .saturating_add(u64::from(l.shared_reserved))
        .next_multiple_of(u64::from(l.shared_granule));
    let by_shared = if shared > u64::from(l.shared_per_block) + u64::from(l.shared_reserved) {
        Some(0)
    } else {
        blocks_of(u64::from(l.shared), shared)
    };

    let limits = BlockLimits {
        warps: by_warps,
        registers: by_registers,
        scalar_registers: None,
        shared_memory: by_shared,
        blocks: Some(l.max_blocks),
    };
    let (blocks, limited_by) = least(&limits);
    let needed = shared * u64::from(blocks);
    let carveout_bytes = l
        .carveouts_kib
        .iter()
        .map(|&kib| u64::from(kib) * 1024)
        .find(|&bytes| bytes >= needed);
    Ok(Occupancy {
        family: DeviceFamily::Nvidia,
        unit: "SM",
        block_size: launch.block_size,
        wave_size: WARP,
        warps_per_block,
        blocks,
        warps: blocks * warps_per_block,
        max_warps: l.max_warps,
        simds: l.sub_partitions,
        limited_by,
        limits,
        registers_allocated: per_block,
        shared_allocated: shared,
        carveout_bytes,
    })
}

/// Where an AMD processor keeps its AGPRs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgprFile {
    /// It has none.
    None,
    /// A file of their own, as large as the VGPRs' (gfx908): the larger count of the two
    /// limits.
    Separate,
    /// One file with the VGPRs (gfx90a, gfx942, gfx950): the AGPRs follow the VGPRs from a
    /// 4-aligned offset.
    Unified,
}

/// An AMD processor's limits for one wavefront size, as LLVM 22's AMDGPU back end gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmdLimits {
    /// Threads per wave: 32 or 64.
    pub wave_size: u32,
    /// What shares a work-group's resources: `CU` (GFX9) or `WGP` (GFX10 on).
    pub unit: &'static str,
    /// SIMDs that share a work-group's resources: 4 per CU (GFX9), 4 per WGP (GFX10 on, WGP
    /// mode).
    pub simds: u32,
    /// Wave slots per SIMD (`getMaxWavesPerEU`).
    pub max_waves_per_simd: u32,
    /// VGPRs per SIMD, counted per lane of a wave of this size (`getTotalNumVGPRs`).
    pub vgprs: u32,
    /// VGPRs are allocated per wave in units of this many (`getVGPRAllocGranule`).
    pub vgpr_granule: u32,
    /// Where the AGPRs are.
    pub agprs: AgprFile,
    /// SGPRs per SIMD where they limit the waves (GFX9: 800), else `None`.
    pub sgprs: Option<u32>,
    /// SGPRs are allocated per wave in units of this many.
    pub sgpr_granule: u32,
    /// LDS per CU (WGP), in bytes (`getLocalMemorySize`).
    pub lds: u32,
    /// LDS per work-group at most, in bytes (`getAddressableLocalMemorySize`).
    pub lds_per_workgroup: u32,
    /// LDS is allocated per work-group in units of this many bytes.
    pub lds_granule: u32,
    /// Work-groups of more than one wave per CU (WGP) at most: its barriers.
    pub max_workgroups: u32,
}

/// The AMD processors [`amd_limits`] knows (and their aliases through
/// [`crate::target_id::amdgpu_processor`]).
pub const AMD_PROCESSORS: &[&str] = &[
    "gfx900",
    "gfx902",
    "gfx904",
    "gfx906",
    "gfx908",
    "gfx909",
    "gfx90a",
    "gfx90c",
    "gfx942",
    "gfx950",
    "gfx1010",
    "gfx1011",
    "gfx1012",
    "gfx1013",
    "gfx1030",
    "gfx1031",
    "gfx1032",
    "gfx1033",
    "gfx1034",
    "gfx1035",
    "gfx1036",
    "gfx1100",
    "gfx1101",
    "gfx1102",
    "gfx1103",
    "gfx1150",
    "gfx1151",
    "gfx1152",
    "gfx1153",
    "gfx1200",
    "gfx1201",
    "gfx9-generic",
    "gfx9-4-generic",
    "gfx10-1-generic",
    "gfx10-3-generic",
    "gfx11-generic",
    "gfx12-generic",
];

/// The limits of an AMD processor (a name or alias; a target ID's features are ignored) for
/// waves of `wave_size` threads, where known ([`AMD_PROCESSORS`]) and the processor runs
/// such waves (GFX9: 64 only; GFX10 on: 32 or 64).
pub fn amd_limits(processor: &str, wave_size: u32) -> Option<AmdLimits> {
    let name = processor.split(':').next().unwrap_or(processor);
    let name = amdgpu_processor(name)?.name;
    if !AMD_PROCESSORS.contains(&name) {
        return None;
    }
    let wave32 = match wave_size {
        32 => true,
        64 => false,
        _ => return None,
    };
    let gfx9 = name.starts_with("gfx9");
    if gfx9 && wave32 {
        return None;
    }
    const KIB: u32 = 1024;
    let by_wave = |w32: u32, w64: u32| if wave32 { w32 } else { w64 };
    let limits = match name {
        // GCN 5 and CDNA 1: 10 waves per SIMD, 256 VGPRs by 4 (gfx908 adds 256 AGPRs).
        "gfx900" | "gfx902" | "gfx904" | "gfx906" | "gfx908" | "gfx909" | "gfx90c"
        | "gfx9-generic" => AmdLimits {
            max_waves_per_simd: 10,
            vgprs: 256,
            vgpr_granule: 4,
            agprs: if name == "gfx908" {
                AgprFile::Separate
            } else {
                AgprFile::None
            },
            ..gfx9_common()
        },
        // CDNA 2 and 3: 8 waves per SIMD, 512 VGPRs and AGPRs by 8; gfx950 has 160 KiB of
        // LDS, allocated by 1280 bytes.
        "gfx90a" | "gfx942" | "gfx950" | "gfx9-4-generic" => AmdLimits {
            max_waves_per_simd: 8,
            vgprs: 512,
            vgpr_granule: 8,
            agprs: AgprFile::Unified,
            lds: if name == "gfx950" {
                160 * KIB
            } else {
                64 * KIB
            },
            lds_per_workgroup: if name == "gfx950" {
                160 * KIB
            } else {
                64 * KIB
            },
            lds_granule: if name == "gfx950" { 1280 } else { 512 },
            ..gfx9_common()
        },
        // RDNA 1: 20 waves per SIMD, 1024 (wave32) or 512 (wave64) VGPRs by 8 or 4.
        "gfx1010" | "gfx1011" | "gfx1012" | "gfx1013" | "gfx10-1-generic" => AmdLimits {
            max_waves_per_simd: 20,
            vgprs: by_wave(1024, 512),
            vgpr_granule: by_wave(8, 4),
            ..rdna_common(wave_size)
        },
        // RDNA 3 and 4 with the 1.5× VGPR file: 1536 (wave32) or 768 (wave64) by 24 or 12.
        "gfx1100" | "gfx1101" | "gfx1151" | "gfx1200" | "gfx1201" | "gfx12-generic" => AmdLimits {
            max_waves_per_simd: 16,
            vgprs: by_wave(1536, 768),
            vgpr_granule: by_wave(24, 12),
            ..rdna_common(wave_size)
        },
        // RDNA 2, and RDNA 3 without it: 1024 (wave32) or 512 (wave64) VGPRs by 16 or 8.
        _ => AmdLimits {
            max_waves_per_simd: 16,
            vgprs: by_wave(1024, 512),
            vgpr_granule: by_wave(16, 8),
            ..rdna_common(wave_size)
        },
    };
    Some(limits)
}

fn gfx9_common() -> AmdLimits {
    AmdLimits {
        wave_size: 64,
        unit: "CU",
        simds: 4,
        max_waves_per_simd: 10,
        vgprs: 256,
        vgpr_granule: 4,
        agprs: AgprFile::None,
        sgprs: Some(800),
        sgpr_granule: 16,
        lds: 64 * 1024,
        lds_per_workgroup: 64 * 1024,
        lds_granule: 512,
        max_workgroups: 16,
    }
}

/// GFX10 to GFX12 in WGP mode: a work-group's waves share a WGP of 4 SIMD32s and 128 KiB of
/// LDS (64 KiB per work-group), 32 barriers; SGPRs do not limit the waves.
fn rdna_common(wave_size: u32) -> AmdLimits {
    AmdLimits {
        wave_size,
        unit: "WGP",
        simds: 4,
        max_waves_per_simd: 16,
        vgprs: 1024,
        vgpr_granule: 16,
        agprs: AgprFile::None,
        sgprs: None,
        sgpr_granule: 128,
        lds: 128 * 1024,
        lds_per_workgroup: 64 * 1024,
        lds_granule: 512,
        max_workgroups: 32,
    }
}

/// The occupancy of a kernel using `usage` launched as `launch` on the AMD `processor` (a
/// name, alias or target ID) with waves of `wave_size` threads (see the module's
/// documentation).
///
/// # Errors
///
/// [`Error::UnknownOccupancyArch`] for a processor [`amd_limits`] does not know;
/// [`Error::BadLaunchShape`] for a block size outside 1 to 1024, or a wavefront size the
/// processor does not run.
pub fn amd(
    processor: &str,
    wave_size: u32,
    usage: &KernelUsage,
    launch: &Launch,
) -> Result<Occupancy> {
    check_block_size(launch.block_size)?;
    let l = match amd_limits(processor, wave_size) {
        Some(l) => l,
        None if amd_limits(processor, 64).is_some() || amd_limits(processor, 32).is_some() => {
            return Err(Error::BadLaunchShape {
                what: "wavefront size",
                value: u64::from(wave_size),
                expected: "GFX9 runs waves of 64 threads, GFX10 and later of 32 or 64",
            });
        }
        None => return Err(unknown_arch(processor)),
    };
    let waves_per_block = launch.block_size.div_ceil(l.wave_size);
    let simds = u64::from(l.simds);
    // Whole work-groups of the waves `per_simd` allows on each SIMD.
    let workgroups = |per_simd: u64| {
        u32::try_from(simds * per_simd / u64::from(waves_per_block)).unwrap_or(u32::MAX)
    };

    // VGPRs (AGPRs included), per lane of a wave.
    let vgprs = u64::from(usage.registers);
    let agprs = u64::from(usage.agprs);
    let registers = match l.agprs {
        AgprFile::Unified if agprs > 0 => vgprs.next_multiple_of(4) + agprs,
        AgprFile::Separate => vgprs.max(agprs),
        _ => vgprs,
    };
    let registers_allocated = registers.next_multiple_of(u64::from(l.vgpr_granule));
    let by_registers = blocks_of(u64::from(l.vgprs), registers_allocated)
        .map(|waves| workgroups(u64::from(waves)));
    let by_sgprs = l.sgprs.and_then(|file| {
        let per_wave = u64::from(usage.sgprs).next_multiple_of(u64::from(l.sgpr_granule));
        blocks_of(u64::from(file), per_wave).map(|waves| workgroups(u64::from(waves)))
    });

    let lds = usage
        .shared_bytes
        .saturating_add(launch.dynamic_shared_bytes)
        .next_multiple_of(u64::from(l.lds_granule));
    let by_lds = if lds > u64::from(l.lds_per_workgroup) {
        Some(0)
    } else {
        blocks_of(u64::from(l.lds), lds)
    };

    let limits = BlockLimits {
        warps: workgroups(u64::from(l.max_waves_per_simd)),
        registers: by_registers,
        scalar_registers: by_sgprs,
        shared_memory: by_lds,
        blocks: (waves_per_block > 1).then_some(l.max_workgroups),
    };
    let (blocks, limited_by) = least(&limits);
    Ok(Occupancy {
        family: DeviceFamily::Amd,
        unit: l.unit,
        block_size: launch.block_size,
        wave_size: l.wave_size,
        warps_per_block: waves_per_block,
        blocks,
        warps: blocks * waves_per_block,
        max_warps: l.simds * l.max_waves_per_simd,
        simds: l.simds,
        limited_by,
        limits,
        registers_allocated,
        shared_allocated: lds,
        carveout_bytes: None,
    })
}

/// The occupancy on the architecture an image names: `sm_XX[a|f]` or `compute_XX` (NVIDIA),
/// else an AMD processor or target ID, with `wave_size` (AMD: the kernel's
/// `.wavefront_size`; `None` for the processor's default: 64 on GFX9, 32 from GFX10).
///
/// # Errors
///
/// As [`nvidia`] and [`amd`].
pub fn for_arch(
    arch: &str,
    wave_size: Option<u32>,
    usage: &KernelUsage,
    launch: &Launch,
) -> Result<Occupancy> {
    if let Ok(sm) = Sm::parse_image_arch(arch) {
        return nvidia(sm, usage, launch);
    }
    let name = arch.split(':').next().unwrap_or(arch);
    let default = amdgpu_processor(name).map_or(64, |p| p.default_wave_size());
    amd(arch, wave_size.unwrap_or(default), usage, launch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sm(name: &str) -> Sm {
        Sm::parse(name).unwrap()
    }

    fn usage(registers: u32, shared_bytes: u64) -> KernelUsage {
        KernelUsage {
            registers,
            shared_bytes,
            ..KernelUsage::default()
        }
    }

    fn launch(block_size: u32) -> Launch {
        Launch {
            block_size,
            dynamic_shared_bytes: 0,
        }
    }

    /// (blocks, warps, percent, limited by).
    fn summary(o: &Occupancy) -> (u32, u32, f64, Vec<Limit>) {
        (o.blocks, o.warps, o.percent(), o.limited_by.clone())
    }

    use Limit::{Blocks, Registers, ScalarRegisters, SharedMemory, Warps};

    #[test]
    fn sm_80_full_occupancy_with_32_registers() {
        // 256 threads = 8 warps. Warps: 64 / 8 = 8 blocks. Registers: 32 × 32 = 1024 per warp
        // (a multiple of 256); 65536 / 4 = 16384 per sub-partition holds 16 warps, 64 per SM,
        // 8 blocks. Shared: 0 + 1 KiB reserved = 1024 bytes; 167936 / 1024 = 164 blocks.
        // Blocks: 32. Least: 8 blocks, 64 warps, 100 %, warps and registers tied.
        let o = nvidia(sm("sm_80"), &usage(32, 0), &launch(256)).unwrap();
        assert_eq!(summary(&o), (8, 64, 100.0, vec![Warps, Registers]));
        assert_eq!(
            o.limits,
            BlockLimits {
                warps: 8,
                registers: Some(8),
                scalar_registers: None,
                shared_memory: Some(164),
                blocks: Some(32),
            }
        );
        assert_eq!(
            (o.registers_allocated, o.shared_allocated),
            (8 * 1024, 1024)
        );
        // 8 × 1 KiB fits the 8 KiB carveout.
        assert_eq!(o.carveout_bytes, Some(8 * 1024));
    }

    #[test]
    fn sm_80_half_occupancy_with_64_registers() {
        // Registers: 64 × 32 = 2048 per warp; 16384 / 2048 = 8 warps per sub-partition, 32
        // per SM; 32 / 8 = 4 blocks. Warps allow 8, shared memory 164, blocks 32. 4 blocks ×
        // 8 warps = 32 of 64 warps: 50 %, by registers.
        let o = nvidia(sm("sm_80"), &usage(64, 0), &launch(256)).unwrap();
        assert_eq!(summary(&o), (4, 32, 50.0, vec![Registers]));
    }

    #[test]
    fn sm_80_with_255_registers() {
        // 128 threads = 4 warps. Registers: 255 × 32 = 8160, rounded up to 8192 per warp;
        // 16384 / 8192 = 2 warps per sub-partition, 8 per SM; 8 / 4 = 2 blocks. The hardware
        // check: 8192 × 4 warps = 32768 ≤ 65536. Warps allow 16. 2 blocks × 4 warps = 8 of 64:
        // 12.5 %, by registers.
        let o = nvidia(sm("sm_80"), &usage(255, 0), &launch(128)).unwrap();
        assert_eq!(summary(&o), (2, 8, 12.5, vec![Registers]));
        // 1024 threads of 255 registers need 32 × 8192 = 262144 registers: none fits.
        let o = nvidia(sm("sm_80"), &usage(255, 0), &launch(1024)).unwrap();
        assert_eq!(summary(&o), (0, 0, 0.0, vec![Registers]));
    }

    #[test]
    fn the_register_file_is_split_between_four_sub_partitions() {
        // 64 threads = 2 warps of 40 × 32 = 1280 registers (a multiple of 256). 16384 / 1280
        // = 12 warps per sub-partition, 48 per SM: 24 blocks (the whole file, 65536 / 1280 =
        // 51 warps, would allow 25). Warps allow 32, blocks 32. 48 of 64 warps: 75 %.
        let o = nvidia(sm("sm_80"), &usage(40, 0), &launch(64)).unwrap();
        assert_eq!(summary(&o), (24, 48, 75.0, vec![Registers]));
    }

    /// The GEMM kernel of `examples/gemm` (`gemm__f16`): 256 threads (its launch bound),
    /// 48 KiB of static shared memory, 123 registers on sm_80 and 122 on sm_90.
    #[test]
    fn the_gemm_kernel_on_sm_80_and_sm_90() {
        // sm_80. Registers: 123 × 32 = 3936, rounded up to 4096 per warp; 16384 / 4096 = 4
        // warps per sub-partition, 16 per SM; 16 / 8 = 2 blocks. Shared: 49152 + 1024 reserved
        // = 50176 (392 × 128); 167936 / 50176 = 3 blocks. Warps: 8; blocks: 32. 2 blocks × 8
        // warps = 16 of 64: 25 %, by registers.
        let gemm = |registers| usage(registers, 49152);
        let o = nvidia(sm("sm_80"), &gemm(123), &launch(256)).unwrap();
        assert_eq!(summary(&o), (2, 16, 25.0, vec![Registers]));
        assert_eq!(o.limits.shared_memory, Some(3));
        assert_eq!(o.shared_allocated, 50176);
        // 2 × 50176 = 100352 bytes: the 100 KiB carveout.
        assert_eq!(o.carveout_bytes, Some(100 * 1024));
        // sm_90. Registers: 122 × 32 = 3904, rounded up to 4096: again 2 blocks. Shared:
        // 233472 / 50176 = 4 blocks. 16 of 64 warps: 25 %, by registers.
        let o = nvidia(sm("sm_90"), &gemm(122), &launch(256)).unwrap();
        assert_eq!(summary(&o), (2, 16, 25.0, vec![Registers]));
        assert_eq!(o.limits.shared_memory, Some(4));
        // sm_90a is sm_90's.
        assert_eq!(nvidia(sm("sm_90a"), &gemm(122), &launch(256)).unwrap(), o);
        // With 32 KiB of dynamic shared memory on sm_80: 49152 + 32768 + 1024 = 82944 bytes
        // (648 × 128); 167936 / 82944 = 2 blocks, tied with the registers.
        let dynamic = Launch {
            block_size: 256,
            dynamic_shared_bytes: 32 * 1024,
        };
        let o = nvidia(sm("sm_80"), &gemm(123), &dynamic).unwrap();
        assert_eq!(summary(&o), (2, 16, 25.0, vec![Registers, SharedMemory]));
        assert_eq!(o.carveout_bytes, Some(164 * 1024));
    }

    #[test]
    fn shared_memory_over_the_per_block_maximum_fits_no_block() {
        // sm_80: 163 KiB per block with the opt-in (plus the reserved 1 KiB).
        let at_most = Launch {
            block_size: 128,
            dynamic_shared_bytes: 163 * 1024,
        };
        let o = nvidia(sm("sm_80"), &usage(16, 0), &at_most).unwrap();
        assert_eq!(summary(&o), (1, 4, 6.25, vec![SharedMemory]));
        let over = Launch {
            dynamic_shared_bytes: 163 * 1024 + 1,
            ..at_most
        };
        let o = nvidia(sm("sm_80"), &usage(16, 0), &over).unwrap();
        assert_eq!(summary(&o), (0, 0, 0.0, vec![SharedMemory]));
    }

    #[test]
    fn other_compute_capabilities() {
        // sm_86: 48 warps; 256 threads of 32 registers: warps 48 / 8 = 6, registers 8,
        // shared 102400 / 1024 = 100, blocks 16. 6 × 8 = 48 of 48: 100 %.
        let o = nvidia(sm("sm_86"), &usage(32, 0), &launch(256)).unwrap();
        assert_eq!(summary(&o), (6, 48, 100.0, vec![Warps]));
        // sm_89: 24 blocks; 32 threads of 16 registers: warps 48, registers 128, blocks 24.
        let o = nvidia(sm("sm_89"), &usage(16, 0), &launch(32)).unwrap();
        assert_eq!(summary(&o), (24, 24, 50.0, vec![Blocks]));
        // sm_75: 32 warps, 16 blocks, no reserved shared memory (nothing used: no limit),
        // 256-byte granule. 1024 threads: 1 block, 32 of 32 warps.
        let o = nvidia(sm("sm_75"), &usage(32, 0), &launch(1024)).unwrap();
        assert_eq!(summary(&o), (1, 32, 100.0, vec![Warps]));
        assert_eq!(o.limits.shared_memory, None);
        // sm_70: 100 bytes of shared memory take 256; 98304 / 256 = 384 blocks. 32 threads:
        // warps allow 64, blocks 32.
        let o = nvidia(sm("sm_70"), &usage(8, 100), &launch(32)).unwrap();
        assert_eq!(o.shared_allocated, 256);
        assert_eq!(summary(&o), (32, 32, 50.0, vec![Blocks]));
        // sm_120: as sm_86 in warps (48), with 32 blocks.
        let o = nvidia(sm("sm_120"), &usage(16, 0), &launch(32)).unwrap();
        assert_eq!(summary(&o), (32, 32, 32.0 / 48.0 * 100.0, vec![Blocks]));
        // sm_100: as sm_90.
        let o = nvidia(sm("sm_100"), &usage(122, 49152), &launch(256)).unwrap();
        assert_eq!(summary(&o), (2, 16, 25.0, vec![Registers]));
        // A block of 33 threads takes 2 warps.
        let o = nvidia(sm("sm_80"), &usage(0, 0), &launch(33)).unwrap();
        assert_eq!((o.warps_per_block, o.limits.registers), (2, None));
        assert_eq!(summary(&o), (32, 64, 100.0, vec![Warps, Blocks]));
    }

    #[test]
    fn amd_gfx90a_limited_by_lds() {
        // 256 threads of wave64 = 4 waves. VGPRs: 153, rounded up to 160 (granule 8); 512 /
        // 160 = 3 waves per SIMD, 12 per CU: 3 work-groups. SGPRs: 32 → 800 / 32 = 25 waves
        // per SIMD: 25 work-groups. Wave slots: 8 per SIMD, 32 per CU: 8 work-groups. LDS:
        // 49152 (96 × 512); 65536 / 49152 = 1 work-group. Barriers: 16. 1 work-group of 4
        // waves, 1 per SIMD: 4 of 32, 12.5 %, by LDS (llc 22 says `Occupancy: 1`).
        let k = KernelUsage {
            registers: 153,
            agprs: 0,
            sgprs: 32,
            shared_bytes: 49152,
        };
        let o = amd("gfx90a", 64, &k, &launch(256)).unwrap();
        assert_eq!(summary(&o), (1, 4, 12.5, vec![SharedMemory]));
        assert_eq!(o.warps_per_simd(), 1);
        assert_eq!(
            o.limits,
            BlockLimits {
                warps: 8,
                registers: Some(3),
                scalar_registers: Some(25),
                shared_memory: Some(1),
                blocks: Some(16),
            }
        );
        assert_eq!(o.registers_allocated, 160);
        // A target ID reads as its processor; gfx942 has the same limits.
        assert_eq!(amd("gfx90a:xnack+", 64, &k, &launch(256)).unwrap(), o);
        assert_eq!(amd("gfx942", 64, &k, &launch(256)).unwrap(), o);
        // gfx950's 160 KiB of LDS: 163840 / 49152 = 3 work-groups, tied with the VGPRs.
        let o = amd("gfx950", 64, &k, &launch(256)).unwrap();
        assert_eq!(summary(&o), (3, 12, 37.5, vec![Registers, SharedMemory]));
    }

    #[test]
    fn amd_agprs_share_the_file_on_gfx90a() {
        // 61 VGPRs, then AGPRs from 64: 64 + 100 = 164, rounded up to 168; 512 / 168 = 3
        // waves per SIMD (llc 22: 3). 64 threads, one wave: 12 work-groups of 1 wave.
        let k = KernelUsage {
            registers: 61,
            agprs: 100,
            ..KernelUsage::default()
        };
        let o = amd("gfx90a", 64, &k, &launch(64)).unwrap();
        assert_eq!(o.registers_allocated, 168);
        assert_eq!(summary(&o), (12, 12, 37.5, vec![Registers]));
        // A single-wave work-group takes no barrier.
        assert_eq!(o.limits.blocks, None);
        // gfx908: separate files of 256, the larger count, 100, limits: 256 / 100 = 2 waves.
        let o = amd("gfx908", 64, &k, &launch(64)).unwrap();
        assert_eq!(summary(&o), (8, 8, 20.0, vec![Registers]));
    }

    /// `.vgpr_count` counts the AGPRs where they share the file: `attention_d128__bf16` of
    /// `examples/attention` on gfx90a records 386 (256 VGPRs, then 130 AGPRs) and 130, one
    /// wave per SIMD (llc 22: `Occupancy: 1`), not the none that counting the AGPRs twice
    /// (516) would give.
    #[test]
    fn amd_metadata_counts_agprs_once() {
        let k = KernelUsage::from_amd_metadata("gfx90a:xnack-", 386, 130, 96, 49152);
        assert_eq!((k.registers, k.agprs), (256, 130));
        let o = amd("gfx90a", 64, &k, &launch(128)).unwrap();
        assert_eq!(o.registers_allocated, 392);
        assert_eq!(o.limits.registers, Some(2));
        assert_eq!(summary(&o), (1, 2, 6.25, vec![SharedMemory]));
        // gfx908's second file: `.vgpr_count` is the larger count, as it is.
        let k = KernelUsage::from_amd_metadata("gfx908", 100, 100, 32, 0);
        assert_eq!((k.registers, k.agprs), (100, 100));
        // Without AGPRs, or where there are none, the count is the VGPRs'.
        assert_eq!(
            KernelUsage::from_amd_metadata("gfx942", 234, 0, 32, 0).registers,
            234
        );
        assert_eq!(
            KernelUsage::from_amd_metadata("gfx1100", 210, 0, 64, 0).registers,
            210
        );
    }

    #[test]
    fn amd_sgprs_limit_on_gfx9() {
        // gfx908, one wave of 64. VGPRs: 24 → 256 / 24 = 10 waves. SGPRs: 90, allocated by 16
        // → 96; 800 / 96 = 8 waves per SIMD, 32 per CU. Slots: 10 per SIMD, 40. 32 of 40
        // waves: 80 %, by SGPRs.
        let k = KernelUsage {
            registers: 24,
            agprs: 0,
            sgprs: 90,
            shared_bytes: 0,
        };
        let o = amd("gfx908", 64, &k, &launch(64)).unwrap();
        assert_eq!(summary(&o), (32, 32, 80.0, vec![ScalarRegisters]));
        // From GFX10 SGPRs do not limit.
        let o = amd("gfx1030", 32, &k, &launch(32)).unwrap();
        assert_eq!(o.limits.scalar_registers, None);
    }

    #[test]
    fn amd_gfx1100_with_210_vgprs() {
        // wave32, 256 threads = 8 waves. VGPRs: 210, rounded up to 216 (granule 24); 1536 /
        // 216 = 7 waves per SIMD, 28 per WGP: 3 work-groups. Slots: 16 per SIMD, 64: 8.
        // Barriers: 32. 3 × 8 = 24 waves, 6 per SIMD: 24 of 64, 37.5 %, by VGPRs. (llc's
        // per-SIMD estimate is 7: it counts no whole work-groups.)
        let k = usage(210, 0);
        let o = amd("gfx1100", 32, &k, &launch(256)).unwrap();
        assert_eq!(summary(&o), (3, 24, 37.5, vec![Registers]));
        assert_eq!((o.warps_per_simd(), o.max_warps), (6, 64));
        assert_eq!(o.registers_allocated, 216);
        // wave64: 4 waves per work-group; 210 rounded up to 216 (granule 12); 768 / 216 = 3
        // waves per SIMD, 12 per WGP: 3 work-groups, 12 waves, 18.75 %.
        let o = amd("gfx1100", 64, &k, &launch(256)).unwrap();
        assert_eq!(summary(&o), (3, 12, 18.75, vec![Registers]));
        // gfx1102 has the 1024-VGPR file: 210 → 224 (granule 16), 1024 / 224 = 4 waves per
        // SIMD, 16 per WGP: 2 work-groups of 8.
        let o = amd("gfx1102", 32, &k, &launch(256)).unwrap();
        assert_eq!(summary(&o), (2, 16, 25.0, vec![Registers]));
        // 48 KiB of LDS: 128 KiB per WGP holds 2 work-groups (llc 22 says 4 waves per SIMD).
        let o = amd("gfx1100", 32, &usage(8, 49152), &launch(256)).unwrap();
        assert_eq!(summary(&o), (2, 16, 25.0, vec![SharedMemory]));
        // 64 KiB at most per work-group.
        let over = Launch {
            block_size: 256,
            dynamic_shared_bytes: 65537,
        };
        let o = amd("gfx1100", 32, &usage(8, 0), &over).unwrap();
        assert_eq!(summary(&o), (0, 0, 0.0, vec![SharedMemory]));
    }

    #[test]
    fn amd_barriers_limit_multi_wave_work_groups() {
        // gfx908, 128 threads = 2 waves of 8 VGPRs: slots 40 / 2 = 20 work-groups, barriers
        // 16: 32 of 40 waves (llc 22: 8 waves per SIMD).
        let o = amd("gfx908", 64, &usage(8, 0), &launch(128)).unwrap();
        assert_eq!(summary(&o), (16, 32, 80.0, vec![Blocks]));
    }

    #[test]
    fn bad_shapes_and_unknown_architectures_are_typed_errors() {
        let k = usage(32, 0);
        for size in [0, 1025] {
            assert!(matches!(
                nvidia(sm("sm_80"), &k, &launch(size)),
                Err(Error::BadLaunchShape {
                    what: "block size",
                    ..
                })
            ));
            assert!(matches!(
                amd("gfx90a", 64, &k, &launch(size)),
                Err(Error::BadLaunchShape { .. })
            ));
        }
        assert!(matches!(
            amd("gfx90a", 32, &k, &launch(64)),
            Err(Error::BadLaunchShape {
                what: "wavefront size",
                ..
            })
        ));
        for arch in ["sm_60", "sm_101"] {
            let e = nvidia(sm(arch), &k, &launch(64)).unwrap_err();
            assert!(matches!(e, Error::UnknownOccupancyArch { .. }), "{e}");
            assert!(e.to_string().contains("sm_80"), "{e}");
        }
        for arch in ["gfx803", "gfx1250", "gfx9999"] {
            let e = amd(arch, 64, &k, &launch(64)).unwrap_err();
            assert!(
                matches!(e, Error::UnknownOccupancyArch { .. }),
                "{arch}: {e}"
            );
        }
        assert_eq!(
            Error::UnknownOccupancyArch {
                arch: "x".into(),
                known: String::new()
            }
            .code(),
            "OFF1070"
        );
    }

    #[test]
    fn for_arch_reads_the_image_arch() {
        let k = usage(64, 0);
        let l = launch(256);
        assert_eq!(
            for_arch("sm_80", None, &k, &l).unwrap(),
            nvidia(sm("sm_80"), &k, &l).unwrap()
        );
        assert_eq!(
            for_arch("compute_80", None, &k, &l).unwrap(),
            nvidia(sm("sm_80"), &k, &l).unwrap()
        );
        // AMD's default wave size: 64 on GFX9, 32 from GFX10.
        assert_eq!(
            for_arch("gfx942:sramecc+:xnack-", None, &k, &l)
                .unwrap()
                .wave_size,
            64
        );
        assert_eq!(for_arch("gfx1100", None, &k, &l).unwrap().wave_size, 32);
        assert_eq!(for_arch("gfx1100", Some(64), &k, &l).unwrap().wave_size, 64);
    }

    #[test]
    fn every_listed_architecture_has_limits() {
        for &(major, minor) in NVIDIA_CAPABILITIES {
            let sm = sm(&format!("sm_{major}{minor}"));
            let l = nvidia_limits(sm).unwrap();
            assert_eq!(l.compute_capability, (major, minor));
            // The largest carveout is the SM's shared memory.
            assert_eq!(l.carveouts_kib.last().map(|k| k * 1024), Some(l.shared));
        }
        for name in AMD_PROCESSORS {
            let wave = if name.starts_with("gfx9") { 64 } else { 32 };
            assert!(amd_limits(name, wave).is_some(), "{name}");
            assert!(amdgpu_processor(name).is_some(), "{name}");
        }
    }

    #[test]
    fn limits_are_named_by_vendor() {
        let names = |family| {
            [Warps, Registers, ScalarRegisters, SharedMemory, Blocks].map(|l| l.label(family))
        };
        assert_eq!(
            names(DeviceFamily::Nvidia),
            ["warps", "registers", "SGPRs", "shared memory", "blocks"]
        );
        assert_eq!(
            names(DeviceFamily::Amd),
            ["waves", "VGPRs", "SGPRs", "LDS", "work-groups"]
        );
    }
}
