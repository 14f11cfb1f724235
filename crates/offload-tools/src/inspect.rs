//! What a file carries: the device images embedded in an executable, object or shared
//! library (`.llvm.offloading` sections), or a bare bundle of OffloadBinaries.

use std::borrow::Cow;
use std::collections::BTreeMap;

use offload_format::{ImageKind, OffloadBinary};
use serde::Serialize;

use offload_format::offload_binary::{
    KEY_KERNEL_RESOURCES, KEY_KERNELS, KEY_MODULE, PtxasKernelInfo, parse_kernel_resources,
};

use offload_format::image::{elf, ptx};
use offload_format::occupancy::{self, KernelUsage, Launch, MAX_BLOCK_SIZE, Occupancy};

/// ELF section type of `.llvm.offloading` (`SHT_LLVM_OFFLOADING`).
pub const SHT_LLVM_OFFLOADING: u32 = 0x6fff_4c0b;

/// One embedded image, as `cargo offload inspect` shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct InspectedImage {
    /// Where it was found: a section name, or `file`.
    pub container: String,
    /// Position of the image among those of its container, from 0.
    pub index: usize,
    /// The image's `triple` string.
    pub triple: String,
    /// The image's `arch` string.
    pub arch: String,
    /// Image kind as `llvm-objdump --offloading` names it (`elf`, `ptx`, `cubin`, …).
    pub kind: String,
    /// Offload kind (`openmp`, `cuda`, `hip`), `llvm-objdump`'s "producer".
    pub producer: String,
    /// Size of the image, in bytes.
    pub size: u64,
    /// The kernel module (`offload.module`), when the image names one.
    pub module: Option<String>,
    /// The kernels the image lists (`offload.kernels`).
    pub kernels: Vec<String>,
    /// Every string entry of the OffloadBinary.
    pub strings: BTreeMap<String, String>,
    /// Per-kernel resource figures, where the image records them (or, for PTX that records
    /// none, `ptxas -v` gives them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<KernelResources>,
    /// Where `resources` come from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources_from: Option<ResourceSource>,
    /// Why the figures the image records could not be read (`offload.kernel-resources`, with
    /// its error code), when they could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources_error: Option<String>,
    /// Each kernel's occupancy on the image's architecture, when asked for ([`add_occupancy`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub occupancy: Vec<KernelOccupancy>,
}

/// Where the resource figures of an image come from.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ResourceSource {
    /// What `ptxas -v` reported when the build assembled the image's `sm`, recorded in the
    /// image (`offload.kernel-resources`).
    Recorded,
    /// An AMDGPU code object's own metadata.
    AmdgpuMetadata,
    /// `ptxas -v` run by `inspect` on PTX that records no figures (an image clang's tools
    /// made, or one whose recorded figures are unreadable).
    Ptxas,
}

/// Whether `inspect` may run `ptxas -v` for a PTX image that records no resource figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PtxasFallback {
    /// Run it (`cargo offload inspect`).
    #[default]
    Run,
    /// Never: such an image shows no figures (`cargo offload build`'s summary and messages,
    /// which run after every build, no-op builds included).
    Never,
}

/// Resource use of one kernel (AMDGPU metadata; NVPTX from `ptxas -v`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct KernelResources {
    /// The kernel's symbol name.
    pub kernel: String,
    /// Vector registers per thread (AMDGPU).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vgprs: Option<u64>,
    /// Scalar registers per wave (AMDGPU).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sgprs: Option<u64>,
    /// Registers per thread (NVPTX).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registers: Option<u64>,
    /// Static shared memory (LDS on AMDGPU) per block, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_bytes: Option<u64>,
    /// Private (scratch or stack) memory per thread, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scratch_bytes: Option<u64>,
    /// Spill stores per thread, in bytes (NVPTX).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spill_store_bytes: Option<u64>,
    /// Spill loads per thread, in bytes (NVPTX).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spill_load_bytes: Option<u64>,
    /// Constant memory, every bank, in bytes (NVPTX).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constant_bytes: Option<u64>,
    /// Accumulation registers per thread (AMDGPU: gfx908, gfx90a, gfx942, gfx950).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agprs: Option<u64>,
    /// Threads per wavefront (AMDGPU: 32 or 64).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wavefront_size: Option<u64>,
    /// The kernel's launch bound, the most threads a block may have: PTX's `.maxntid`, a
    /// cubin's `EIATTR_MAX_THREADS`, an AMDGPU kernel's `.max_flat_workgroup_size` below 1024
    /// (1024 is the default of a kernel without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_threads: Option<u64>,
}

impl KernelResources {
    fn from_ptxas(k: PtxasKernelInfo) -> Self {
        Self {
            kernel: k.name,
            registers: Some(u64::from(k.registers)),
            shared_bytes: Some(k.shared_bytes),
            scratch_bytes: Some(k.stack_bytes),
            spill_store_bytes: Some(k.spill_store_bytes),
            spill_load_bytes: Some(k.spill_load_bytes),
            constant_bytes: Some(k.constant_bytes),
            ..Self::default()
        }
    }
}

/// Why a file could not be inspected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InspectError {
    /// An `.llvm.offloading` section that does not parse as OffloadBinaries.
    #[error("section {section}: {source}")]
    Section {
        /// The section's name.
        section: String,
        /// What is wrong with its contents.
        #[source]
        source: offload_format::Error,
    },
    /// A clang offload bundle that does not parse.
    #[error("{container}: bundle at offset {offset}: {source}")]
    Bundle {
        /// Where it was found: `file`, a section name, or an archive member.
        container: String,
        /// Offset of the bundle in its container, in bytes.
        offset: u64,
        /// What is wrong with it.
        #[source]
        source: offload_format::Error,
    },
    /// An object file (by its magic) that the object reader refuses: its images cannot be
    /// looked for, so the file is not reported as holding none.
    #[error("{container}: not a readable object file: {reason}")]
    Object {
        /// Where it was found: `file`, a section name, or an archive member.
        container: String,
        /// What the object reader reported.
        reason: String,
    },
    /// The file itself does not parse.
    #[error(transparent)]
    Format(#[from] offload_format::Error),
}

/// `bytes` (aligned by [`offload_format::aligned::object_bytes`]) parsed as an object file
/// when their magic says they are one, `Ok(None)` otherwise. An object the reader refuses is
/// an error (what the reader said), never a file without images.
pub(crate) fn read_object(bytes: &[u8]) -> Result<Option<object::File<'_>>, String> {
    if object::FileKind::parse(bytes).is_err() {
        return Ok(None);
    }
    object::File::parse(bytes)
        .map(Some)
        .map_err(|e| e.to_string())
}

fn object_error(container: &str) -> impl FnOnce(String) -> InspectError + '_ {
    move |reason| InspectError::Object {
        container: container.to_owned(),
        reason,
    }
}

/// Finds and describes every offload image in `bytes`.
pub fn inspect(bytes: &[u8]) -> Result<Vec<InspectedImage>, InspectError> {
    inspect_with(bytes, PtxasFallback::Run)
}

/// [`inspect`], running `ptxas` for PTX that records no figures only as `ptxas` allows.
pub fn inspect_with(
    bytes: &[u8],
    ptxas: PtxasFallback,
) -> Result<Vec<InspectedImage>, InspectError> {
    let mut out = Vec::new();
    if bytes.starts_with(&offload_format::OFFLOAD_BINARY_MAGIC) {
        for (i, bin) in offload_format::parse_all(bytes)?.iter().enumerate() {
            out.push(describe_with(bin, "file", i, ptxas));
        }
        return Ok(out);
    }
    let aligned = offload_format::aligned::object_bytes(bytes);
    if let Some(file) = read_object(&aligned).map_err(object_error("file"))? {
        for (name, data) in offloading_sections(&file) {
            let bins = offload_format::parse_all(data).map_err(|source| InspectError::Section {
                section: name.clone(),
                source,
            })?;
            for (i, bin) in bins.iter().enumerate() {
                out.push(describe_with(bin, &name, i, ptxas));
            }
        }
    }
    Ok(out)
}

/// The `.llvm.offloading` sections of an object file (ELF: by section type; others: by
/// name), with their contents.
pub fn offloading_sections<'a>(file: &object::File<'a>) -> Vec<(String, &'a [u8])> {
    use object::{Object, ObjectSection};
    let mut out = Vec::new();
    for section in file.sections() {
        let name = section.name().unwrap_or("").to_owned();
        let is_offloading = match section.flags() {
            object::SectionFlags::Elf { .. } => {
                elf_section_type(file, section.index()) == Some(SHT_LLVM_OFFLOADING)
            }
            _ => name.starts_with(offload_format::abi::OFFLOADING_SECTION),
        };
        if !is_offloading {
            continue;
        }
        if let Ok(data) = section.data() {
            out.push((name, data));
        }
    }
    out
}

fn elf_section_type(file: &object::File<'_>, index: object::SectionIndex) -> Option<u32> {
    use object::read::elf::SectionHeader;
    match file {
        object::File::Elf64(elf) => {
            let endian = elf.endian();
            let header = elf.elf_section_table().section(index).ok()?;
            Some(header.sh_type(endian))
        }
        object::File::Elf32(elf) => {
            let endian = elf.endian();
            let header = elf.elf_section_table().section(index).ok()?;
            Some(header.sh_type(endian))
        }
        _ => None,
    }
}

/// Describes one OffloadBinary, reading the kernel list from the image when no key carries it.
pub fn describe(bin: &OffloadBinary<'_>, container: &str, index: usize) -> InspectedImage {
    describe_with(bin, container, index, PtxasFallback::Run)
}

/// [`describe`], running `ptxas` for PTX that records no figures only as `ptxas` allows.
pub fn describe_with(
    bin: &OffloadBinary<'_>,
    container: &str,
    index: usize,
    ptxas: PtxasFallback,
) -> InspectedImage {
    let strings: BTreeMap<String, String> = bin
        .strings
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut kernels: Vec<String> = bin
        .get(KEY_KERNELS)
        .map(|k| {
            k.split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let Resources {
        kernels: mut resources,
        from: resources_from,
        error: resources_error,
    } = image_resources(bin, ptxas);
    add_launch_bounds(bin, &mut resources);
    if kernels.is_empty() {
        kernels = match bin.image_kind {
            ImageKind::Ptx => ptx::kernel_names(&String::from_utf8_lossy(&bin.image)),
            ImageKind::Object if !resources.is_empty() => {
                resources.iter().map(|r| r.kernel.clone()).collect()
            }
            ImageKind::Object => elf::cpu_kernels(&bin.image)
                .ok()
                .filter(|k| !k.is_empty())
                .unwrap_or_else(|| elf::openmp_kernels(&bin.image)),
            _ => Vec::new(),
        };
    }
    InspectedImage {
        container: container.to_owned(),
        index,
        triple: bin.triple().unwrap_or("").to_owned(),
        arch: bin.arch().unwrap_or("").to_owned(),
        kind: bin.image_kind.name().to_owned(),
        producer: bin.offload_kind.name().to_owned(),
        size: bin.image.len() as u64,
        module: bin.get(KEY_MODULE).map(str::to_owned),
        kernels,
        strings,
        resources,
        resources_from,
        resources_error,
        occupancy: Vec::new(),
    }
}

/// The launch bounds of an NVIDIA image's kernels (PTX `.maxntid`, a cubin's
/// `EIATTR_MAX_THREADS`) added to their figures. AMDGPU code objects' come with their metadata.
fn add_launch_bounds(bin: &OffloadBinary<'_>, resources: &mut [KernelResources]) {
    if resources.is_empty() {
        return;
    }
    let bounds = match bin.image_kind {
        ImageKind::Ptx => ptx::max_threads(&String::from_utf8_lossy(&bin.image)),
        ImageKind::Cubin => offload_format::image::cubin::max_threads(&bin.image),
        _ => return,
    };
    for r in resources.iter_mut() {
        if let Some((_, bound)) = bounds.iter().find(|(k, _)| *k == r.kernel) {
            r.max_threads = Some(u64::from(*bound));
        }
    }
}

/// The resource figures of one image and where they come from.
struct Resources {
    kernels: Vec<KernelResources>,
    from: Option<ResourceSource>,
    error: Option<String>,
}

/// Resource use of the kernels of a GPU image: those it records (`offload.kernel-resources`,
/// the build's `ptxas -v` report); AMDGPU code objects' from their metadata (with the
/// `image-readers` feature); for PTX that records none, `ptxas -v` run now where `ptxas`
/// exists and `ptxas` allows. Other images, and unreadable ones, give nothing.
fn image_resources(bin: &OffloadBinary<'_>, ptxas: PtxasFallback) -> Resources {
    let mut error = None;
    if let Some(text) = bin.get(KEY_KERNEL_RESOURCES) {
        match parse_kernel_resources(text) {
            Ok(kernels) => {
                return Resources {
                    kernels: kernels
                        .into_iter()
                        .map(KernelResources::from_ptxas)
                        .collect(),
                    from: Some(ResourceSource::Recorded),
                    error: None,
                };
            }
            Err(e) => error = Some(format!("error[{}]: {e}", e.code())),
        }
    }
    let (kernels, from) = match bin.image_kind {
        #[cfg(feature = "image-readers")]
        ImageKind::Object
            if bin.triple().is_some_and(|t| {
                offload_format::DeviceFamily::of_target_triple(t)
                    == offload_format::DeviceFamily::Amd
            }) =>
        {
            let kernels: Vec<KernelResources> = offload_format::image::amdgpu::inspect(&bin.image)
                .map(|info| {
                    info.kernels
                        .into_iter()
                        .map(|k| KernelResources {
                            kernel: k.name,
                            vgprs: Some(k.vgpr_count),
                            sgprs: Some(k.sgpr_count),
                            shared_bytes: Some(k.group_segment_fixed_size),
                            scratch_bytes: Some(k.private_segment_fixed_size),
                            agprs: Some(k.agpr_count),
                            wavefront_size: Some(k.wavefront_size),
                            max_threads: (1..u64::from(MAX_BLOCK_SIZE))
                                .contains(&k.max_flat_workgroup_size)
                                .then_some(k.max_flat_workgroup_size),
                            ..KernelResources::default()
                        })
                        .collect()
                })
                .unwrap_or_default();
            (kernels, ResourceSource::AmdgpuMetadata)
        }
        ImageKind::Ptx if ptxas == PtxasFallback::Run => {
            (ptxas_resources(bin), ResourceSource::Ptxas)
        }
        _ => {
            return Resources {
                kernels: Vec::new(),
                from: None,
                error,
            };
        }
    };
    Resources {
        from: (!kernels.is_empty()).then_some(from),
        kernels,
        error,
    }
}

/// `ptxas -v` on a PTX image, for its `arch`, where the `ptxas` found knows it.
fn ptxas_resources(bin: &OffloadBinary<'_>) -> Vec<KernelResources> {
    use offload_build::tooling::toolchain;
    let (Ok(ptx), Some(arch)) = (std::str::from_utf8(&bin.image), bin.arch()) else {
        return Vec::new();
    };
    if !matches!(
        toolchain::cubin_plan(arch),
        Ok(toolchain::CubinPlan::Assemble)
    ) {
        return Vec::new();
    }
    toolchain::ptxas_verbose(ptx, arch)
        .map(|(_, kernels)| {
            kernels
                .into_iter()
                .map(KernelResources::from_ptxas)
                .collect()
        })
        .unwrap_or_default()
}

/// The NVIDIA architectures whose PTX comes without a cubin of the same module (the driver
/// JIT-compiles it), in the order first seen.
pub fn ptx_only_archs(images: &[InspectedImage]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for ptx in images.iter().filter(|i| i.kind == ImageKind::Ptx.name()) {
        let has_cubin = images.iter().any(|i| {
            i.kind == ImageKind::Cubin.name()
                && (&i.triple, &i.arch, &i.module) == (&ptx.triple, &ptx.arch, &ptx.module)
        });
        if !has_cubin && !out.contains(&ptx.arch) {
            out.push(ptx.arch.clone());
        }
    }
    out
}

/// The block size `inspect --occupancy` gives a kernel without a launch bound when none is
/// asked for.
pub const DEFAULT_BLOCK_SIZE: u32 = 256;

/// How `inspect --occupancy` launches each kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OccupancyOptions {
    /// Threads per block of a kernel without a launch bound; `None` for
    /// [`DEFAULT_BLOCK_SIZE`].
    pub block_size: Option<u32>,
    /// Dynamic shared memory (AMD: LDS) per block, in bytes.
    pub dynamic_shared_bytes: u64,
}

/// Where the block size of a [`KernelOccupancy`] comes from.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum BlockSizeSource {
    /// The kernel's launch bound ([`KernelResources::max_threads`]).
    LaunchBound,
    /// [`OccupancyOptions::block_size`].
    Given,
    /// [`DEFAULT_BLOCK_SIZE`].
    Default,
}

/// One kernel's occupancy on its image's architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelOccupancy {
    /// The kernel's symbol name.
    pub kernel: String,
    /// Threads per block.
    pub block_size: u32,
    /// Where `block_size` comes from.
    pub block_size_from: BlockSizeSource,
    /// Dynamic shared memory per block, in bytes.
    pub dynamic_shared_bytes: u64,
    /// The figures, or why there are none (an architecture without known limits, a kernel
    /// whose registers the image does not give), with the error's code.
    pub result: Result<Occupancy, String>,
}

impl Serialize for KernelOccupancy {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let fields = if self.result.is_ok() { 15 } else { 5 };
        let mut st = serializer.serialize_struct("KernelOccupancy", fields)?;
        st.serialize_field("kernel", &self.kernel)?;
        st.serialize_field("block_size", &self.block_size)?;
        st.serialize_field("block_size_from", &self.block_size_from)?;
        st.serialize_field("dynamic_shared_bytes", &self.dynamic_shared_bytes)?;
        match &self.result {
            Ok(o) => {
                st.serialize_field("unit", o.unit)?;
                st.serialize_field("wave_size", &o.wave_size)?;
                st.serialize_field("warps_per_block", &o.warps_per_block)?;
                st.serialize_field("blocks", &o.blocks)?;
                st.serialize_field("warps", &o.warps)?;
                st.serialize_field("max_warps", &o.max_warps)?;
                st.serialize_field("warps_per_simd", &o.warps_per_simd())?;
                st.serialize_field("occupancy", &o.fraction())?;
                let limited_by: Vec<&str> = o.limited_by.iter().map(|l| l.key()).collect();
                st.serialize_field("limited_by", &limited_by)?;
                st.serialize_field("registers_allocated", &o.registers_allocated)?;
                st.serialize_field("shared_allocated", &o.shared_allocated)?;
            }
            Err(e) => st.serialize_field("error", e)?,
        }
        st.end()
    }
}

/// Each kernel's occupancy added to the GPU images that give its figures
/// ([`InspectedImage::occupancy`]): its block is its launch bound, else `options`' block size,
/// else [`DEFAULT_BLOCK_SIZE`]. A PTX image with a cubin of the same module and architecture
/// is left out (the cubin is what runs).
pub fn add_occupancy(images: &mut [InspectedImage], options: &OccupancyOptions) {
    let covered: Vec<bool> = images
        .iter()
        .map(|ptx| {
            ptx.kind == ImageKind::Ptx.name()
                && images.iter().any(|i| {
                    i.kind == ImageKind::Cubin.name()
                        && !i.resources.is_empty()
                        && (&i.triple, &i.arch, &i.module) == (&ptx.triple, &ptx.arch, &ptx.module)
                })
        })
        .collect();
    for (image, covered) in images.iter_mut().zip(covered) {
        let family = offload_format::DeviceFamily::of_triple(&image.triple);
        if covered || !family.is_gpu() {
            continue;
        }
        image.occupancy = image
            .resources
            .iter()
            .map(|r| kernel_occupancy(&image.arch, family, r, options))
            .collect();
    }
}

fn kernel_occupancy(
    arch: &str,
    family: offload_format::DeviceFamily,
    r: &KernelResources,
    options: &OccupancyOptions,
) -> KernelOccupancy {
    let bound = r
        .max_threads
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| (1..=MAX_BLOCK_SIZE).contains(n));
    let (block_size, block_size_from) = match (bound, options.block_size) {
        (Some(n), _) => (n, BlockSizeSource::LaunchBound),
        (None, Some(n)) => (n, BlockSizeSource::Given),
        (None, None) => (DEFAULT_BLOCK_SIZE, BlockSizeSource::Default),
    };
    let count = |n: Option<u64>| u32::try_from(n.unwrap_or(0)).unwrap_or(u32::MAX);
    let amd = family == offload_format::DeviceFamily::Amd;
    let registers = if amd { r.vgprs } else { r.registers };
    let shared_bytes = r.shared_bytes.unwrap_or(0);
    let usage = if amd {
        KernelUsage::from_amd_metadata(
            arch,
            count(registers),
            count(r.agprs),
            count(r.sgprs),
            shared_bytes,
        )
    } else {
        KernelUsage {
            registers: count(registers),
            agprs: 0,
            sgprs: 0,
            shared_bytes,
        }
    };
    let launch = Launch {
        block_size,
        dynamic_shared_bytes: options.dynamic_shared_bytes,
    };
    let wave_size = r.wavefront_size.and_then(|n| u32::try_from(n).ok());
    let result = match registers {
        None => Err("the image gives no register count".to_owned()),
        Some(_) => occupancy::for_arch(arch, wave_size, &usage, &launch)
            .map_err(|e| format!("error[{}]: {e}", e.code())),
    };
    KernelOccupancy {
        kernel: r.kernel.clone(),
        block_size,
        block_size_from,
        dynamic_shared_bytes: options.dynamic_shared_bytes,
        result,
    }
}

/// The occupancy table of `inspect --occupancy` (and of `cargo offload build --verbose`): one
/// row per kernel and architecture, appended to `s`; nothing where no image has any.
pub fn render_occupancy(s: &mut String, images: &[InspectedImage]) {
    use std::fmt::Write as _;
    let rows: Vec<(&InspectedImage, &KernelOccupancy)> = images
        .iter()
        .flat_map(|img| img.occupancy.iter().map(move |o| (img, o)))
        .collect();
    let Some((_, first)) = rows.first() else {
        return;
    };
    let _ = writeln!(
        s,
        "\nOccupancy ({} bytes of dynamic shared memory per block; * the kernel's launch bound):",
        first.dynamic_shared_bytes
    );
    let mut table: Vec<[String; 7]> = vec![[
        "arch".into(),
        "kernel".into(),
        "block".into(),
        "resident".into(),
        "warps (waves)".into(),
        "occupancy".into(),
        "limited by".into(),
    ]];
    let mut errors = Vec::new();
    for (img, o) in &rows {
        let block = match o.block_size_from {
            BlockSizeSource::LaunchBound => format!("{}*", o.block_size),
            _ => o.block_size.to_string(),
        };
        match &o.result {
            Ok(r) => {
                let (blocks, warps) = if r.family == offload_format::DeviceFamily::Amd {
                    let wg = if r.blocks == 1 {
                        "work-group"
                    } else {
                        "work-groups"
                    };
                    (
                        format!("{} {wg}/{}", r.blocks, r.unit),
                        format!(
                            "{} of {} (wave{}, {}/SIMD)",
                            r.warps,
                            r.max_warps,
                            r.wave_size,
                            r.warps_per_simd()
                        ),
                    )
                } else {
                    let b = if r.blocks == 1 { "block" } else { "blocks" };
                    (
                        format!("{} {b}/{}", r.blocks, r.unit),
                        format!("{} of {}", r.warps, r.max_warps),
                    )
                };
                let limited_by: Vec<&str> =
                    r.limited_by.iter().map(|l| l.label(r.family)).collect();
                table.push([
                    img.arch.clone(),
                    o.kernel.clone(),
                    block,
                    blocks,
                    warps,
                    format!("{:.1}%", r.percent()),
                    limited_by.join(", "),
                ]);
            }
            Err(e) => errors.push(format!("{} {}: {e}", img.arch, o.kernel)),
        }
    }
    if table.len() > 1 {
        let mut widths = [0usize; 7];
        for row in &table {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        for row in &table {
            let mut line = String::from("  ");
            for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
                if i + 1 == row.len() {
                    line.push_str(cell);
                } else if i == 5 {
                    let _ = write!(line, "{cell:>w$}  ");
                } else {
                    let _ = write!(line, "{cell:<w$}  ");
                }
            }
            let _ = writeln!(s, "{}", line.trim_end());
        }
    }
    for e in errors {
        let _ = writeln!(s, "  {e}");
    }
}

/// The human-readable listing.
pub fn render_text(path: &str, images: &[InspectedImage]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "{path}: {} offload image(s)", images.len());
    for (n, img) in images.iter().enumerate() {
        let _ = writeln!(
            s,
            "\n[{n}] {} {}  kind {}  producer {}  size {} bytes  ({}[{}])",
            img.triple, img.arch, img.kind, img.producer, img.size, img.container, img.index
        );
        if let Some(m) = &img.module {
            let _ = writeln!(s, "    module   {m}");
        }
        let _ = writeln!(
            s,
            "    kernels  {}",
            if img.kernels.is_empty() {
                "(none found)".to_owned()
            } else {
                img.kernels.join(", ")
            }
        );
        // A prebuilt kernel bundle's provenance (see `offload_build::tooling::prebuilt`).
        for (key, label) in [
            (offload_build::tooling::prebuilt::KEY_HASH, "source hash"),
            (offload_build::tooling::prebuilt::KEY_TOOLCHAIN, "toolchain"),
            (offload_build::tooling::prebuilt::KEY_PRODUCER, "producer"),
        ] {
            if let Some(value) = img.strings.get(key) {
                let _ = writeln!(s, "    {label:<11} {value}");
            }
        }
        if let Some(inputs) = img
            .strings
            .get(offload_build::tooling::prebuilt::KEY_INPUTS)
        {
            let _ = writeln!(
                s,
                "    {:<11} {} files and settings (`--json` lists each with its SHA-256)",
                "inputs",
                inputs.lines().count()
            );
        }
        for r in &img.resources {
            let mut parts = Vec::new();
            let fields = [
                ("vgpr", r.vgprs),
                ("sgpr", r.sgprs),
                ("registers", r.registers),
                ("shared", r.shared_bytes),
                ("scratch", r.scratch_bytes),
                ("constant", r.constant_bytes),
                // Spills are shown where there are any: they are what a reader looks for.
                ("spill stores", r.spill_store_bytes.filter(|&n| n > 0)),
                ("spill loads", r.spill_load_bytes.filter(|&n| n > 0)),
            ];
            for (label, v) in fields {
                if let Some(v) = v {
                    parts.push(format!("{label} {v}"));
                }
            }
            let _ = writeln!(s, "      {}: {}", r.kernel, parts.join(", "));
        }
        if img.resources_from == Some(ResourceSource::Ptxas) {
            let _ = writeln!(
                s,
                "      (the image records no figures: these are from `ptxas -v` run now)"
            );
        }
        if let Some(error) = &img.resources_error {
            let _ = writeln!(s, "      recorded figures unreadable: {error}");
        }
    }
    render_occupancy(&mut s, images);
    let ptx_only = ptx_only_archs(images);
    if !ptx_only.is_empty() {
        let _ = writeln!(
            s,
            "\nPTX only, no cubin (the CUDA driver JIT-compiles it): {}",
            ptx_only.join(", ")
        );
    }
    s
}

/// A clang offload bundle found in a file, as `cargo offload inspect` shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct BundleInfo {
    /// Where it was found: `file`, a section name, or `member <name>` of an archive.
    pub container: String,
    /// Offset of the bundle (or of its CCOB blob) in the container.
    pub offset: u64,
    /// `binary`, `object` (`__CLANG_OFFLOAD_BUNDLE__` sections) or `text`.
    pub layout: String,
    /// The CCOB header, when the bundle is compressed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compressed: Option<CcobInfo>,
    /// One description per entry, in header order.
    pub entries: Vec<BundleEntryDesc>,
}

/// The header fields of a compressed bundle.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct CcobInfo {
    /// Format version: 1, 2 or 3.
    pub version: u16,
    /// `zlib` or `zstd`.
    pub method: String,
    /// Header plus compressed data (absent in version 1).
    pub total_size: Option<u64>,
    /// Size of the decompressed bundle, in bytes.
    pub uncompressed_size: u64,
    /// The stored hash, as 16 hex digits of the little-endian field.
    pub hash: String,
}

/// One entry of a bundle.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct BundleEntryDesc {
    /// The ID as stored.
    pub id: String,
    /// The offload kind: `host`, `openmp`, `hip` or `hipv4`.
    pub kind: String,
    /// The entry's triple.
    pub triple: String,
    /// The entry's target ID, when it has one.
    pub target_id: Option<String>,
    /// Offset of the data within the (decompressed) bundle; absent for the object layout.
    pub offset: Option<u64>,
    /// Size of the data, in bytes.
    pub size: u64,
    /// What the data looks like: `empty`, `offload binary`, `elf <machine>`, `llvm bitcode`,
    /// `data`.
    pub contents: String,
}

/// Everything `cargo offload inspect` finds in a file.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct FileReport {
    /// OffloadBinary images, including those held in bundle entries.
    pub images: Vec<InspectedImage>,
    /// The clang offload bundles found, in the file and its sections and archive members.
    pub bundles: Vec<BundleInfo>,
}

/// Finds OffloadBinaries, clang offload bundles (plain, compressed, object layout) and the
/// images inside them anywhere in `bytes`: the whole file, archive members, and object
/// sections (`.llvm.offloading`, `.hip_fatbin`, `__CLANG_OFFLOAD_BUNDLE__*`, and any section
/// whose contents start with a bundle magic).
pub fn inspect_all(bytes: &[u8]) -> Result<FileReport, InspectError> {
    inspect_all_with(bytes, PtxasFallback::Run)
}

/// [`inspect_all`], running `ptxas` for PTX that records no figures only as `ptxas` allows.
pub fn inspect_all_with(bytes: &[u8], ptxas: PtxasFallback) -> Result<FileReport, InspectError> {
    let mut report = FileReport::default();
    scan(bytes, "file", &mut report, 0, ptxas)?;
    Ok(report)
}

const MAX_NESTING: u32 = 4;

fn scan(
    bytes: &[u8],
    container: &str,
    report: &mut FileReport,
    depth: u32,
    ptxas: PtxasFallback,
) -> Result<(), InspectError> {
    use offload_format::archive::{AR_MAGIC, parse_archive};
    use offload_format::bundle::BUNDLE_MAGIC;
    use offload_format::ccob::CCOB_MAGIC;
    if depth > MAX_NESTING {
        return Ok(());
    }
    let in_section = |source| InspectError::Section {
        section: container.to_owned(),
        source,
    };
    if bytes.starts_with(&offload_format::OFFLOAD_BINARY_MAGIC) {
        for (i, bin) in offload_format::parse_all(bytes)
            .map_err(in_section)?
            .iter()
            .enumerate()
        {
            report.images.push(describe_with(bin, container, i, ptxas));
        }
    } else if bytes.starts_with(BUNDLE_MAGIC) || bytes.starts_with(CCOB_MAGIC) {
        scan_bundles(bytes, container, report, depth, ptxas)?;
    } else if bytes.starts_with(AR_MAGIC) {
        for m in parse_archive(bytes).map_err(in_section)? {
            scan(
                &m.data,
                &format!("member {}", m.name),
                report,
                depth + 1,
                ptxas,
            )?;
        }
    } else {
        let aligned = offload_format::aligned::object_bytes(bytes);
        if let Some(file) = read_object(&aligned).map_err(object_error(container))? {
            scan_object(&file, &aligned, container, report, depth, ptxas)?;
        }
    }
    Ok(())
}

/// Where a part of `container` is found: the part's own name in the file itself, else after
/// the container's (`member a.o: .llvm.offloading`).
fn within(container: &str, part: &str) -> String {
    if container == "file" {
        part.to_owned()
    } else {
        format!("{container}: {part}")
    }
}

fn scan_object(
    file: &object::File<'_>,
    bytes: &[u8],
    container: &str,
    report: &mut FileReport,
    depth: u32,
    ptxas: PtxasFallback,
) -> Result<(), InspectError> {
    use object::{Object, ObjectSection};
    use offload_format::bundle::{BUNDLE_MAGIC, OBJECT_SECTION_PREFIX, parse_object_bundle};
    use offload_format::ccob::CCOB_MAGIC;
    let offloading: Vec<String> = offloading_sections(file)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let mut has_object_layout = false;
    for section in file.sections() {
        let name = section.name().unwrap_or("").to_owned();
        if name.starts_with(OBJECT_SECTION_PREFIX) {
            has_object_layout = true;
            continue;
        }
        let Ok(data) = section.data() else { continue };
        let is_offloading = offloading.contains(&name);
        let bundle_like = data.starts_with(BUNDLE_MAGIC) || data.starts_with(CCOB_MAGIC);
        if is_offloading || bundle_like || name == ".hip_fatbin" {
            let part = within(container, &name);
            if name == ".hip_fatbin" && !bundle_like {
                scan_bundles(data, &part, report, depth, ptxas)?;
            } else {
                scan(data, &part, report, depth + 1, ptxas)?;
            }
        }
    }
    if has_object_layout {
        let entries = parse_object_bundle(bytes).map_err(|source| InspectError::Section {
            section: within(container, OBJECT_SECTION_PREFIX),
            source,
        })?;
        let descs = entries
            .iter()
            .map(|e| entry_desc(&e.id, None, &e.data))
            .collect();
        report.bundles.push(BundleInfo {
            container: container.to_owned(),
            offset: 0,
            layout: "object".to_owned(),
            compressed: None,
            entries: descs,
        });
        for e in &entries {
            if e.data.len() > 1 {
                scan(
                    &e.data,
                    &within(container, &format!("entry {}", e.id)),
                    report,
                    depth + 1,
                    ptxas,
                )?;
            }
        }
    }
    Ok(())
}

/// Every bundle stored back to back in `data` (as in `.hip_fatbin`, where each translation
/// unit's bundle is 4096-aligned), compressed or not.
fn scan_bundles(
    data: &[u8],
    container: &str,
    report: &mut FileReport,
    depth: u32,
    ptxas: PtxasFallback,
) -> Result<(), InspectError> {
    use offload_format::bundle::{BUNDLE_MAGIC, read_binary_header};
    use offload_format::ccob::{self, CCOB_MAGIC, CcobHeader};
    let mut pos = 0usize;
    while let Some(start) = next_bundle(data, pos) {
        let rest = &data[start..];
        let at = |source| InspectError::Bundle {
            container: container.to_owned(),
            offset: start as u64,
            source,
        };
        let (compressed, bundle, used): (Option<CcobInfo>, Cow<'_, [u8]>, usize) =
            if rest.starts_with(CCOB_MAGIC) {
                let (h, _) = CcobHeader::parse(rest, 0).map_err(at)?;
                let (plain, used) = ccob::decompress(rest).map_err(at)?;
                let info = CcobInfo {
                    version: h.version,
                    method: match h.method {
                        offload_format::CompressionMethod::Zlib => "zlib",
                        offload_format::CompressionMethod::Zstd => "zstd",
                    }
                    .to_owned(),
                    total_size: h.total_size,
                    uncompressed_size: h.uncompressed_size,
                    hash: format!("{:016x}", h.hash),
                };
                (Some(info), Cow::Owned(plain), used)
            } else {
                (None, Cow::Borrowed(rest), 0)
            };
        if !bundle.starts_with(BUNDLE_MAGIC) {
            // A compressed text bundle, or something else: report the blob, no entries.
            report.bundles.push(BundleInfo {
                container: container.to_owned(),
                offset: start as u64,
                layout: "unknown".to_owned(),
                compressed,
                entries: Vec::new(),
            });
            pos = start + used.max(1);
            continue;
        }
        let infos = read_binary_header(bundle.as_ref(), bundle.len() as u64).map_err(at)?;
        let end = infos
            .iter()
            .map(|i| i.offset + i.size)
            .max()
            .unwrap_or(32)
            .max(32);
        let mut descs = Vec::new();
        for i in &infos {
            let d = &bundle[i.offset as usize..(i.offset + i.size) as usize];
            descs.push(entry_desc(&i.id, Some(i.offset), d));
        }
        report.bundles.push(BundleInfo {
            container: container.to_owned(),
            offset: start as u64,
            layout: "binary".to_owned(),
            compressed,
            entries: descs,
        });
        for i in &infos {
            let d = &bundle[i.offset as usize..(i.offset + i.size) as usize];
            if d.starts_with(&offload_format::OFFLOAD_BINARY_MAGIC) {
                scan(d, &format!("entry {}", i.id), report, depth + 1, ptxas)?;
            }
        }
        pos = start + if used > 0 { used } else { end as usize };
    }
    Ok(())
}

fn next_bundle(data: &[u8], from: usize) -> Option<usize> {
    use offload_format::bundle::BUNDLE_MAGIC;
    use offload_format::ccob::CCOB_MAGIC;
    let rest = data.get(from..)?;
    let skip = rest.iter().position(|&b| b != 0)?;
    let at = from + skip;
    let here = &data[at..];
    if here.starts_with(BUNDLE_MAGIC) || here.starts_with(CCOB_MAGIC) {
        Some(at)
    } else {
        None
    }
}

fn entry_desc(id: &str, offset: Option<u64>, data: &[u8]) -> BundleEntryDesc {
    let parsed = offload_format::BundleEntryId::parse(id).ok();
    BundleEntryDesc {
        id: id.to_owned(),
        kind: parsed.as_ref().map(|p| p.kind.clone()).unwrap_or_default(),
        triple: parsed.as_ref().map(|p| p.triple()).unwrap_or_default(),
        target_id: parsed.and_then(|p| p.target_id),
        offset,
        size: data.len() as u64,
        contents: contents_of(data),
    }
}

fn contents_of(data: &[u8]) -> String {
    if data.is_empty() {
        return "empty".to_owned();
    }
    if data.starts_with(&offload_format::OFFLOAD_BINARY_MAGIC) {
        return "offload binary".to_owned();
    }
    if data.starts_with(b"BC\xc0\xde") || data.starts_with(&[0xde, 0xc0, 0x17, 0x0b]) {
        return "llvm bitcode".to_owned();
    }
    if data.starts_with(b"\x7fELF") && data.len() >= 20 {
        let machine = u16::from_le_bytes([data[18], data[19]]);
        let name = match machine {
            0x3e => "x86-64",
            0xe0 => "amdgpu",
            0xbe => "cuda",
            0xb7 => "aarch64",
            _ => "other",
        };
        let mut s = format!("elf {name}");
        if machine == 0xe0
            && data.len() >= 52
            && let Some(p) = offload_format::target_id::amdgpu_processor_by_mach(data[48])
        {
            s.push(' ');
            s.push_str(p.name);
        }
        return s;
    }
    if data.starts_with(b"//") || data.starts_with(b".version") {
        return "text".to_owned();
    }
    "data".to_owned()
}

/// The human-readable listing of a [`FileReport`].
pub fn render_report(path: &str, report: &FileReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    if !report.bundles.is_empty() {
        let _ = writeln!(s, "{path}: {} offload bundle(s)", report.bundles.len());
        for (n, b) in report.bundles.iter().enumerate() {
            let _ = writeln!(
                s,
                "\n<{n}> {} bundle at {}+{:#x}, {} entr{}",
                b.layout,
                b.container,
                b.offset,
                b.entries.len(),
                if b.entries.len() == 1 { "y" } else { "ies" }
            );
            if let Some(c) = &b.compressed {
                let total = c.total_size.map_or("-".to_owned(), |t| t.to_string());
                let _ = writeln!(
                    s,
                    "    compressed  CCOB v{} {}  total {}  uncompressed {}  hash {}",
                    c.version, c.method, total, c.uncompressed_size, c.hash
                );
            }
            for e in &b.entries {
                let at = e.offset.map_or(String::new(), |o| format!(" @{o:#x}"));
                let _ = writeln!(
                    s,
                    "    {:<48} {:>10} bytes{at}  {}",
                    e.id, e.size, e.contents
                );
            }
        }
        s.push('\n');
    }
    s.push_str(&render_text(path, &report.images));
    s
}

#[cfg(test)]
mod ptx_only_tests {
    use super::*;

    fn image(arch: &str, kind: ImageKind, module: &str) -> InspectedImage {
        InspectedImage {
            container: "file".into(),
            index: 0,
            triple: "nvptx64-nvidia-cuda".into(),
            arch: arch.into(),
            kind: kind.name().into(),
            producer: "cuda".into(),
            size: 1,
            module: Some(module.into()),
            kernels: Vec::new(),
            strings: BTreeMap::new(),
            resources: Vec::new(),
            resources_from: None,
            resources_error: None,
            occupancy: Vec::new(),
        }
    }

    #[test]
    fn sms_with_ptx_but_no_cubin_are_named() {
        let images = [
            image("sm_80", ImageKind::Cubin, "a"),
            image("sm_80", ImageKind::Ptx, "a"),
            image("sm_120", ImageKind::Ptx, "a"),
            // A cubin of another module does not cover this one's PTX.
            image("sm_90", ImageKind::Cubin, "b"),
            image("sm_90", ImageKind::Ptx, "a"),
            image("sm_120", ImageKind::Ptx, "b"),
        ];
        assert_eq!(ptx_only_archs(&images), ["sm_120", "sm_90"]);
        let text = render_text("x", &images);
        assert!(
            text.ends_with("PTX only, no cubin (the CUDA driver JIT-compiles it): sm_120, sm_90\n"),
            "{text}"
        );
        assert!(!render_text("x", &images[..2]).contains("PTX only"));
    }
}

#[cfg(test)]
mod occupancy_tests {
    use super::*;

    fn image(
        triple: &str,
        arch: &str,
        kind: ImageKind,
        resources: Vec<KernelResources>,
    ) -> InspectedImage {
        InspectedImage {
            container: "file".into(),
            index: 0,
            triple: triple.into(),
            arch: arch.into(),
            kind: kind.name().into(),
            producer: "hip".into(),
            size: 1,
            module: Some("gemm".into()),
            kernels: resources.iter().map(|r| r.kernel.clone()).collect(),
            strings: BTreeMap::new(),
            resources,
            resources_from: Some(ResourceSource::Recorded),
            resources_error: None,
            occupancy: Vec::new(),
        }
    }

    /// The rows `--occupancy` adds: an AMD kernel at its launch bound, the cubin of an sm (its
    /// PTX, which the cubin covers, gets none), a kernel at the block size asked for.
    #[test]
    fn each_gpu_kernel_gets_a_row() {
        let amd = KernelResources {
            kernel: "gemm".into(),
            vgprs: Some(153),
            sgprs: Some(32),
            agprs: Some(0),
            shared_bytes: Some(49152),
            wavefront_size: Some(64),
            max_threads: Some(256),
            ..KernelResources::default()
        };
        let nvidia = |registers| KernelResources {
            kernel: "saxpy".into(),
            registers: Some(registers),
            shared_bytes: Some(0),
            ..KernelResources::default()
        };
        let mut images = vec![
            image(
                "amdgcn-amd-amdhsa",
                "gfx90a:xnack+",
                ImageKind::Object,
                vec![amd],
            ),
            image(
                "nvptx64-nvidia-cuda",
                "sm_80",
                ImageKind::Cubin,
                vec![nvidia(64)],
            ),
            image(
                "nvptx64-nvidia-cuda",
                "sm_80",
                ImageKind::Ptx,
                vec![nvidia(64)],
            ),
            image(
                "x86_64-unknown-linux-gnu",
                "host",
                ImageKind::Object,
                Vec::new(),
            ),
        ];
        let options = OccupancyOptions {
            block_size: Some(128),
            dynamic_shared_bytes: 0,
        };
        add_occupancy(&mut images, &options);
        let rows: Vec<usize> = images.iter().map(|i| i.occupancy.len()).collect();
        assert_eq!(rows, [1, 1, 0, 0]);
        let gfx90a = &images[0].occupancy[0];
        assert_eq!(
            (gfx90a.block_size, gfx90a.block_size_from),
            (256, BlockSizeSource::LaunchBound)
        );
        // 64 registers, 128 threads: 2048 per warp, 8 warps per sub-partition, 32 per SM, 8
        // blocks of 4 warps; warps allow 16: 32 of 64 warps.
        let sm_80 = &images[1].occupancy[0];
        assert_eq!(sm_80.block_size_from, BlockSizeSource::Given);
        assert_eq!(
            sm_80.result.as_ref().map(|o| (o.blocks, o.warps)),
            Ok((8, 32))
        );
        let text = render_text("x", &images);
        let table = &text[text.find("Occupancy").unwrap()..];
        assert_eq!(
            table,
            "\
Occupancy (0 bytes of dynamic shared memory per block; * the kernel's launch bound):
  arch           kernel  block  resident         warps (waves)             occupancy  limited by
  gfx90a:xnack+  gemm    256*   1 work-group/CU  4 of 32 (wave64, 1/SIMD)      12.5%  LDS
  sm_80          saxpy   128    8 blocks/SM      32 of 64                      50.0%  registers
",
        );
    }
}
