//! Building both sides of the parity benchmark for one architecture and reading their figures:
//! the Rust kernel crate through the device link, the C through `foreign`'s CUDA and HIP
//! compiles (the flags a build uses for `.cu`/`.hip` sources), then `ptxas -v`, `cuobjdump
//! -sass` and the PTX for NVIDIA, the metadata note and `llvm-objdump -d` for AMD.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use object::{Object, ObjectSymbol};
use offload_build::OffloadArch;
use offload_build::PanicStrategy;
use offload_build::tooling::device_link::{self, DeviceInput, GpuLinkOptions};
use offload_build::tooling::env::Env;
use offload_build::tooling::foreign::{self, Clang, Language, Options, Source};
use offload_format::offload_binary::PtxasKernelInfo;
use offload_format::{AmdTargetId, ImageKind, Sm};
use offload_toolchain::Tool;

/// Memory instructions by address space, counted in the code (not executed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Accesses {
    /// Generic (flat) loads, stores and atomics: PTX `ld`/`st`/`atom`/`red` without a state
    /// space, AMD `flat_*`.
    pub generic: u64,
    /// Global: PTX `.global` (`ld.global.nc` included), AMD `global_*`.
    pub global: u64,
    /// Shared: PTX `.shared`, AMD `ds_*` (the cross-lane `ds_bpermute`/`ds_permute`/`ds_swizzle`
    /// left out).
    pub shared: u64,
    /// Thread-private memory: PTX `.local`, AMD `scratch_*` and `buffer_*` loads and stores.
    pub local: u64,
    /// Of the global ones, NVIDIA's loads through the read-only data path (`ld.global.nc`).
    pub read_only: u64,
}

/// What one side's code for one kernel on one architecture costs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Figures {
    /// Registers per thread: `ptxas -v`'s count on NVIDIA; `.vgpr_count` on AMD, which on
    /// gfx90a and gfx942 counts the AGPRs too (one register file: together they decide
    /// occupancy).
    pub registers: u64,
    /// AMD: `.sgpr_count`.
    pub sgprs: Option<u64>,
    /// AMD: `.agpr_count`.
    pub agprs: Option<u64>,
    /// Per-thread stack: `ptxas`'s stack frame; AMD `.private_segment_fixed_size`.
    pub stack_bytes: u64,
    /// AMD `.uses_dynamic_stack`.
    pub dynamic_stack: bool,
    /// Spills: `ptxas`'s spill store bytes; AMD spilled VGPRs + SGPRs.
    pub spills: u64,
    /// Machine instructions of the kernel and the functions it calls: SASS of the kernel's
    /// section (where `ptxas` places the callees' code too), `NOP` padding left out; AMD
    /// `llvm-objdump -d` of the kernel's symbol and of each function it reaches.
    pub instructions: u64,
    /// Bytes of that code: SASS up to its last non-`NOP`; AMD the symbols' sizes.
    pub code_bytes: u64,
    /// Call instructions in that code (`CALL` in SASS, `s_swappc`/`s_call` on AMD).
    pub calls: u64,
    /// Memory instructions by address space in the PTX (NVIDIA: the entry and the `.func`s
    /// it calls) or in the machine code above (AMD).
    pub accesses: Accesses,
}

impl Figures {
    /// Scratch memory or spills of any kind.
    pub fn uses_scratch(&self) -> bool {
        self.stack_bytes > 0 || self.dynamic_stack || self.spills > 0
    }
}

/// Both sides of one kernel on one architecture.
#[derive(Debug, Clone)]
pub struct Row {
    pub kernel: &'static str,
    pub rust: Figures,
    pub c: Figures,
}

/// One kernel on one architecture with the panic strategy `trap`, beside the same kernel
/// with `report` (the main table's Rust side), its C twin and, where there is one, its twin
/// that checks with `assert` (NVIDIA, the kernels of `ASSERT_TWINS`).
#[derive(Debug, Clone)]
pub struct TrapRow {
    pub kernel: &'static str,
    pub trap: Figures,
    pub report: Figures,
    pub c: Figures,
    pub c_assert: Option<Figures>,
}

impl TrapRow {
    /// `trap` against C, as the main table's rows are read.
    pub fn against_c(&self) -> Row {
        Row {
            kernel: self.kernel,
            rust: self.trap.clone(),
            c: self.c.clone(),
        }
    }
}

/// The rows of `measured` (an architecture's main table) with the Rust side linked with
/// `trap` beside them; no C with `assert` yet.
pub fn trap_rows(measured: &[Row], mut trap: BTreeMap<String, Figures>) -> Vec<TrapRow> {
    measured
        .iter()
        .map(|r| TrapRow {
            kernel: r.kernel,
            trap: trap.remove(r.kernel).unwrap_or_default(),
            report: r.rust.clone(),
            c: r.c.clone(),
            c_assert: None,
        })
        .collect()
}

/// The Rust side alone on `arch` (an `sm` or an AMD target ID), linked with the panic strategy
/// `panic`; its image and listing go to `work/<arch>-rust-<panic>`.
pub fn rust_side(arch: &str, inputs: &Inputs, panic: PanicStrategy) -> BTreeMap<String, Figures> {
    let fail = |what: &str, e: &dyn std::fmt::Display| -> ! {
        panic!("{arch}, panic = \"{panic}\": {what}: {e}")
    };
    let target = device_link::parse_gpu_arch(arch).unwrap_or_else(|e| fail("target", &e));
    let opts = GpuLinkOptions {
        panic,
        ..GpuLinkOptions::default()
    };
    let images = device_link::gpu_images(inputs.rust, &target, &opts)
        .unwrap_or_else(|e| fail("the Rust device link", &e));
    let dir = inputs.work.join(format!("{arch}-rust-{panic}"));
    let side = if matches!(target, OffloadArch::Nvptx(_)) {
        let ptx = images
            .iter()
            .find(|i| i.kind == ImageKind::Ptx)
            .map(|i| String::from_utf8_lossy(&i.bytes).into_owned())
            .unwrap_or_else(|| fail("the Rust images", &"no PTX"));
        nvidia_side(&ptx, arch, inputs.kernels, &dir)
    } else {
        let object = images
            .iter()
            .find(|i| i.kind == ImageKind::Object)
            .map(|i| i.bytes.clone())
            .unwrap_or_else(|| fail("the Rust images", &"no code object"));
        let processor = arch.split(':').next().unwrap_or(arch);
        amd_side(&object, processor, inputs.kernels, &dir)
    };
    side.unwrap_or_else(|e| fail("the Rust image", &e))
}

/// Device-build times of one architecture, seconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuildTimes {
    /// The nested rustc build of the kernel crate (its dependencies already built), once per
    /// triple and shared by the triple's architectures.
    pub rustc: f64,
    /// The device link of this architecture's image (and `ptxas` on NVIDIA).
    pub link: f64,
    /// clang's compile of the C source for this architecture (and `ptxas` on NVIDIA).
    pub clang: f64,
}

/// One architecture's measurements, or why the tools cannot make them.
#[derive(Debug, Clone)]
pub enum Outcome {
    Measured(Vec<Row>, BuildTimes),
    /// The installed `ptxas` cannot assemble the `sm`: the reason, shown in the table.
    Unavailable(String),
}

/// What an architecture's measurement needs from the rest of the run.
pub struct Inputs<'a> {
    pub kernels: &'a [&'static str],
    /// The nested build's device-link inputs for the architecture's triple.
    pub rust: &'a [DeviceInput],
    /// How long that nested build took.
    pub rustc_seconds: f64,
    pub clang: &'a Clang,
    /// Where the images, listings and clang's files go.
    pub work: &'a Path,
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn bench_dir() -> PathBuf {
    repo_root().join("benches/parity")
}

/// The nested builds of one triple: a build that makes the dependencies fresh, then, after
/// the kernel crate's source is touched, the timed build that recompiles the kernel crate
/// alone (what an edit to a kernel costs, as clang's figure is what an edit to the C costs).
pub fn rust_inputs(target: &OffloadArch, target_dir: &Path) -> (Vec<DeviceInput>, f64) {
    let env = Env::detect();
    let manifest = bench_dir().join("kernels/Cargo.toml");
    let build = || crate::common::nested_inputs(&env, &manifest, target, target_dir);
    build();
    let lib = bench_dir().join("kernels/src/lib.rs");
    std::fs::File::options()
        .write(true)
        .open(&lib)
        .and_then(|f| f.set_modified(SystemTime::now()))
        .unwrap_or_else(|e| panic!("touching {}: {e}", lib.display()));
    let start = Instant::now();
    let inputs = build();
    (inputs, start.elapsed().as_secs_f64())
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let value = f();
    (value, start.elapsed())
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Measures both sides on an NVIDIA `sm`.
pub fn nvidia(sm: &str, inputs: &Inputs) -> Outcome {
    let fail = |what: &str, e: &dyn std::fmt::Display| -> ! { panic!("{sm}: {what}: {e}") };
    let plan = device_link::cubin_plan(sm).unwrap_or_else(|e| fail("ptxas", &e));
    if let Some(obstacle) = plan.obstacle(sm) {
        return Outcome::Unavailable(format!("no SASS: {obstacle}"));
    }
    let target = device_link::parse_gpu_arch(sm).unwrap_or_else(|e| fail("target", &e));
    let (images, link) =
        timed(|| device_link::gpu_images(inputs.rust, &target, &Default::default()));
    let images = images.unwrap_or_else(|e| fail("the Rust device link", &e));
    let rust_ptx = images
        .iter()
        .find(|i| i.kind == ImageKind::Ptx)
        .map(|i| String::from_utf8_lossy(&i.bytes).into_owned())
        .unwrap_or_else(|| fail("the Rust images", &"no PTX"));
    let (c_ptx, clang) = timed(|| {
        cuda_ptx(sm, "parity.cu", inputs.clang, inputs.work).unwrap_or_else(|e| fail("clang", &e))
    });
    let side = |ptx: &str, name: &str| {
        nvidia_side(
            ptx,
            sm,
            inputs.kernels,
            &inputs.work.join(format!("{sm}-{name}")),
        )
        .unwrap_or_else(|e| fail(&format!("the {name} image"), &e))
    };
    let rows = rows(inputs.kernels, side(&rust_ptx, "rust"), side(&c_ptx, "c"));
    let times = BuildTimes {
        rustc: inputs.rustc_seconds,
        link: link.as_secs_f64(),
        clang: clang.as_secs_f64(),
    };
    Outcome::Measured(rows, times)
}

/// `file` of `benches/parity` compiled for `sm` as a build compiles CUDA sources: its PTX.
fn cuda_ptx(sm: &str, file: &str, clang: &Clang, work: &Path) -> Result<String, String> {
    let source = Source {
        language: Language::Cuda,
        path: bench_dir().join(file),
        relocatable: false,
    };
    let parsed = Sm::parse(sm).map_err(|e| e.to_string())?;
    let compiled = foreign::cuda::build(
        &Env::detect(),
        clang,
        &source,
        &[parsed],
        &Options::default(),
        &work.join(sm),
    )
    .map_err(|e| format!("{file}: {e}"))?;
    compiled
        .images
        .iter()
        .find(|i| i.image_kind == ImageKind::Ptx)
        .map(|i| String::from_utf8_lossy(&i.bytes).into_owned())
        .ok_or_else(|| format!("{file}: no PTX"))
}

/// The kernels of `benches/parity/parity_assert.cu` on `sm`: the C that checks what the Rust
/// kernels check, with `assert`.
pub fn nvidia_assert_twins(
    sm: &str,
    kernels: &[&str],
    clang: &Clang,
    work: &Path,
) -> Result<BTreeMap<String, Figures>, String> {
    let ptx = cuda_ptx(sm, "parity_assert.cu", clang, &work.join("assert"))?;
    nvidia_side(&ptx, sm, kernels, &work.join(format!("{sm}-c-assert")))
}

/// The Rust side of `kernels` from `measured`, against `c`.
pub fn against(
    measured: &[Row],
    kernels: &[&'static str],
    c: BTreeMap<String, Figures>,
) -> Vec<Row> {
    let rust = measured
        .iter()
        .filter(|r| kernels.contains(&r.kernel))
        .map(|r| (r.kernel.to_owned(), r.rust.clone()))
        .collect();
    rows(kernels, rust, c)
}

fn rows(
    kernels: &[&'static str],
    mut rust: BTreeMap<String, Figures>,
    mut c: BTreeMap<String, Figures>,
) -> Vec<Row> {
    kernels
        .iter()
        .map(|&kernel| Row {
            kernel,
            rust: rust.remove(kernel).unwrap_or_default(),
            c: c.remove(kernel).unwrap_or_default(),
        })
        .collect()
}

/// One side's PTX on `sm`: every kernel of `kernels` must be an entry of it, and no other.
fn nvidia_side(
    ptx: &str,
    sm: &str,
    kernels: &[&str],
    dir: &Path,
) -> Result<BTreeMap<String, Figures>, String> {
    let entries: BTreeSet<String> = offload_format::image::ptx::kernel_names(ptx)
        .into_iter()
        .collect();
    let wanted: BTreeSet<String> = kernels.iter().map(|k| k.to_string()).collect();
    if entries != wanted {
        return Err(format!(
            "the PTX's entries {entries:?} are not the benchmark's kernels {wanted:?}"
        ));
    }
    let listing = Listing::new(ptx, sm, dir)?;
    kernels
        .iter()
        .map(|&kernel| Ok((kernel.to_owned(), listing.figures(kernel)?)))
        .collect()
}

/// One side's PTX on `sm`, assembled by `ptxas -v` and listed by `cuobjdump -sass`; the
/// cubin, the PTX and the listing stay in the directory it is made with.
struct Listing<'a> {
    report: Vec<PtxasKernelInfo>,
    sass: BTreeMap<String, Vec<SassInstruction>>,
    functions: BTreeMap<String, Vec<&'a str>>,
}

impl<'a> Listing<'a> {
    fn new(ptx: &'a str, sm: &str, dir: &Path) -> Result<Self, String> {
        let (cubin, report) = device_link::ptxas_verbose(ptx, sm).map_err(|e| e.to_string())?;
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let cubin_path = dir.join("image.cubin");
        std::fs::write(&cubin_path, &cubin).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("image.ptx"), ptx).map_err(|e| e.to_string())?;
        // An arch-specific cubin (`sm_90a`) comes from a newer `ptxas` than the distribution's
        // CUDA 11.8, whose `cuobjdump` cannot read it: the newest, with its `nvdisasm`.
        let mut command = if sm.ends_with('a') {
            let cuobjdump = Tool::Cuobjdump.find_newest().map_err(|e| e.to_string())?;
            let mut command = Command::new(&cuobjdump);
            let dirs = cuobjdump.parent().map(Path::to_path_buf).into_iter().chain(
                Env::detect()
                    .get("PATH")
                    .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
                    .unwrap_or_default(),
            );
            command.env(
                "PATH",
                std::env::join_paths(dirs).map_err(|e| e.to_string())?,
            );
            command
        } else {
            Command::new(Tool::Cuobjdump.find().map_err(|e| e.to_string())?)
        };
        let sass_text = run(command.arg("-sass").arg(&cubin_path));
        std::fs::write(dir.join("image.sass"), &sass_text).map_err(|e| e.to_string())?;
        Ok(Self {
            report,
            sass: parse_sass(&sass_text),
            functions: ptx_functions(ptx),
        })
    }

    /// `ptxas -v`'s figures for `kernel`.
    fn info(&self, kernel: &str) -> Result<&PtxasKernelInfo, String> {
        self.report
            .iter()
            .find(|k| k.name == kernel)
            .ok_or_else(|| format!("`ptxas -v` reported nothing for {kernel}"))
    }

    /// The SASS of `kernel`, `NOP` padding left out.
    fn code(&self, kernel: &str) -> Result<Vec<&SassInstruction>, String> {
        let code = self
            .sass
            .get(kernel)
            .ok_or_else(|| format!("no SASS for {kernel}"))?;
        Ok(code.iter().filter(|i| i.opcode != "NOP").collect())
    }

    fn figures(&self, kernel: &str) -> Result<Figures, String> {
        let info = self.info(kernel)?;
        let real = self.code(kernel)?;
        Ok(Figures {
            registers: u64::from(info.registers),
            sgprs: None,
            agprs: None,
            stack_bytes: info.stack_bytes,
            dynamic_stack: false,
            spills: info.spill_store_bytes,
            instructions: real.len() as u64,
            code_bytes: real.last().map_or(0, |i| i.offset + 16),
            calls: real.iter().filter(|i| i.opcode.starts_with("CALL")).count() as u64,
            accesses: ptx_accesses(&self.functions, kernel),
        })
    }

    /// The GEMM comparison's figures for `kernel`: [`Self::figures`], static shared memory and
    /// the count of each opcode of [`GEMM_MIX`].
    fn gemm_figures(&self, kernel: &str) -> Result<GemmFigures, String> {
        let code = self.code(kernel)?;
        Ok(GemmFigures {
            figures: self.figures(kernel)?,
            shared_bytes: self.info(kernel)?.shared_bytes,
            mix: GEMM_MIX.map(|opcode| code.iter().filter(|i| i.opcode == opcode).count() as u64),
        })
    }
}

/// The SASS opcodes the GEMM comparison counts in each kernel (the code, not its execution):
/// the matrix multiply-adds (`mma.sync`), the shared-memory matrix loads (`ldmatrix`), the
/// asynchronous copies from global to shared memory (`cp.async`), Hopper's warpgroup
/// multiplies (`wgmma`), tensor-memory-accelerator loads and memory-barrier operations
/// (`mbarrier`), the block's barriers, and the special-function unit's operations
/// (attention's `ex2.approx`, reciprocals).
pub const GEMM_MIX: [&str; 8] = [
    "HMMA", "LDSM", "LDGSTS", "HGMMA", "UTMALDG", "SYNCS", "BAR", "MUFU",
];

/// The count of `name` in `mix`, the counts of `names` in that order; a name not counted is
/// the test's own mistake.
fn mix_count(names: &[&str], mix: &[u64], name: &str) -> u64 {
    let i = names
        .iter()
        .position(|n| *n == name)
        .unwrap_or_else(|| panic!("{name} is not counted: the mix is {names:?}"));
    mix[i]
}

/// One side of the GEMM pair on one architecture.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GemmFigures {
    /// What the table of the other kernels has (registers, stack, spills, instructions…).
    pub figures: Figures,
    /// Static shared memory per block (`ptxas -v`), bytes.
    pub shared_bytes: u64,
    /// How many of each opcode of [`GEMM_MIX`] the kernel's SASS holds, in that order.
    pub mix: [u64; GEMM_MIX.len()],
}

impl GemmFigures {
    /// The count of `opcode`, one of [`GEMM_MIX`].
    pub fn count(&self, opcode: &str) -> u64 {
        mix_count(&GEMM_MIX, &self.mix, opcode)
    }
}

/// Both sides of one GEMM kernel on one architecture.
#[derive(Debug, Clone)]
pub struct GemmRow {
    pub kernel: &'static str,
    pub rust: GemmFigures,
    pub c: GemmFigures,
}

/// The GEMM pair on one architecture, or why the tools cannot measure it.
#[derive(Debug, Clone)]
pub enum GemmOutcome {
    Measured(Vec<GemmRow>),
    /// The installed `ptxas` cannot assemble the `sm`: the reason.
    Unavailable(String),
}

/// The device-link inputs of an example's kernel crate (`examples/gemm/kernels`,
/// `examples/attention/kernels`) for the family of `arch` (one nested build for every `sm`,
/// one for every AMD processor, as for the benchmark's crate).
pub fn example_rust_inputs(kernel_crate: &str, arch: &str, target_dir: &Path) -> Vec<DeviceInput> {
    let manifest = repo_root().join(kernel_crate).join("Cargo.toml");
    let target = device_link::parse_gpu_arch(arch).expect("a GPU target");
    crate::common::nested_inputs(&Env::detect(), &manifest, &target, target_dir)
}

/// A compute-bound pair on `sm` (GEMM, attention): `kernels` of the Rust crate (`rust`, which
/// may hold other kernels) against their twins in `benches/parity/<twin>`. The images and
/// listings go to `work/<twin's stem>/<sm>-rust` and `…/<sm>-c`.
pub fn nvidia_gemm(
    sm: &str,
    kernels: &[&'static str],
    twin: &str,
    rust: &[DeviceInput],
    clang: &Clang,
    work: &Path,
) -> GemmOutcome {
    let fail = |what: &str, e: &dyn std::fmt::Display| -> ! { panic!("{sm}, GEMM: {what}: {e}") };
    let plan = device_link::cubin_plan(sm).unwrap_or_else(|e| fail("ptxas", &e));
    if let Some(obstacle) = plan.obstacle(sm) {
        return GemmOutcome::Unavailable(format!("no SASS: {obstacle}"));
    }
    let target = device_link::parse_gpu_arch(sm).unwrap_or_else(|e| fail("target", &e));
    let images = device_link::gpu_images(rust, &target, &Default::default())
        .unwrap_or_else(|e| fail("the Rust device link", &e));
    let rust_ptx = images
        .iter()
        .find(|i| i.kind == ImageKind::Ptx)
        .map(|i| String::from_utf8_lossy(&i.bytes).into_owned())
        .unwrap_or_else(|| fail("the Rust images", &"no PTX"));
    let work = work.join(Path::new(twin).file_stem().unwrap_or_default());
    let c_ptx =
        cuda_ptx(sm, twin, clang, &work).unwrap_or_else(|e| fail(&format!("clang on {twin}"), &e));
    let side = |ptx: &str, name: &str| -> BTreeMap<&'static str, GemmFigures> {
        let entries = offload_format::image::ptx::kernel_names(ptx);
        if let Some(missing) = kernels.iter().find(|k| !entries.iter().any(|e| e == *k)) {
            fail(
                &format!("the {name} PTX"),
                &format!("no entry {missing} among {entries:?}"),
            );
        }
        let listing = Listing::new(ptx, sm, &work.join(format!("{sm}-{name}")))
            .unwrap_or_else(|e| fail(&format!("the {name} image"), &e));
        kernels
            .iter()
            .map(|&k| {
                let figures = listing
                    .gemm_figures(k)
                    .unwrap_or_else(|e| fail(&format!("the {name} image"), &e));
                (k, figures)
            })
            .collect()
    };
    let (mut rust, mut c) = (side(&rust_ptx, "rust"), side(&c_ptx, "c"));
    GemmOutcome::Measured(
        kernels
            .iter()
            .map(|&kernel| GemmRow {
                kernel,
                rust: rust.remove(kernel).unwrap_or_default(),
                c: c.remove(kernel).unwrap_or_default(),
            })
            .collect(),
    )
}

#[derive(Debug)]
struct SassInstruction {
    offset: u64,
    opcode: String,
}

/// `cuobjdump -sass`'s listing, by function: `Function : name`, then one `/*0040*/ OP ... ;`
/// line per instruction (the encoding's second half is a line of its own).
fn parse_sass(text: &str) -> BTreeMap<String, Vec<SassInstruction>> {
    let mut functions: BTreeMap<String, Vec<SassInstruction>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix("Function : ") {
            current = Some(name.trim().to_owned());
            functions.entry(name.trim().to_owned()).or_default();
            continue;
        }
        let Some(rest) = line.strip_prefix("/*") else {
            continue;
        };
        let Some((offset, instruction)) = rest.split_once("*/") else {
            continue;
        };
        let Ok(offset) = u64::from_str_radix(offset, 16) else {
            continue;
        };
        let instruction = instruction.split(';').next().unwrap_or_default();
        let Some(opcode) = instruction
            .split_whitespace()
            .find(|token| !token.starts_with('@'))
        else {
            continue;
        };
        if let Some(name) = &current {
            functions
                .entry(name.clone())
                .or_default()
                .push(SassInstruction {
                    offset,
                    opcode: opcode.split('.').next().unwrap_or(opcode).to_owned(),
                });
        }
    }
    functions
}

/// The bodies of a PTX module's functions (`.entry` and `.func`), by name.
fn ptx_functions(ptx: &str) -> BTreeMap<String, Vec<&str>> {
    let mut functions = BTreeMap::new();
    let mut lines = ptx.lines();
    while let Some(line) = lines.next() {
        let Some(header) = line
            .split_once(".entry ")
            .or_else(|| line.split_once(".func "))
            .map(|(_, rest)| rest.trim_start())
        else {
            continue;
        };
        // `.func (.param .b32 retval) name(`: the name follows the return value.
        let header = if header.starts_with('(') {
            header
                .split_once(')')
                .map_or("", |(_, rest)| rest.trim_start())
        } else {
            header
        };
        let name: String = header
            .chars()
            .take_while(|c| !matches!(c, '(' | ';') && !c.is_whitespace())
            .collect();
        let mut depth = 0usize;
        let mut body = Vec::new();
        let mut declaration = line.trim_end().ends_with(';');
        for line in lines.by_ref() {
            if depth == 0 && line.trim_end().ends_with(';') && !line.contains('{') {
                declaration = true;
            }
            if declaration && depth == 0 {
                break;
            }
            depth += line.matches('{').count();
            let closes = line.matches('}').count();
            body.push(line.trim());
            if closes > 0 {
                depth = depth.saturating_sub(closes);
                if depth == 0 {
                    break;
                }
            }
        }
        if !declaration {
            functions.insert(name, body);
        }
    }
    functions
}

/// The functions `name` calls in PTX, directly or not, itself included.
fn ptx_reachable<'a>(functions: &'a BTreeMap<String, Vec<&str>>, name: &'a str) -> Vec<&'a str> {
    let mut seen = vec![name];
    let mut i = 0;
    while i < seen.len() {
        for line in functions.get(seen[i]).into_iter().flatten() {
            let Some(rest) = line
                .strip_prefix("call.uni")
                .or_else(|| line.strip_prefix("call"))
            else {
                continue;
            };
            let rest = rest.trim_start();
            let rest = if rest.starts_with('(') {
                rest.split_once("),").map_or("", |(_, r)| r.trim_start())
            } else {
                rest
            };
            let callee: String = rest
                .chars()
                .take_while(|c| !matches!(c, ',' | ';' | '(') && !c.is_whitespace())
                .collect();
            if let Some((known, _)) = functions.get_key_value(&callee)
                && !seen.contains(&known.as_str())
            {
                seen.push(known);
            }
        }
        i += 1;
    }
    seen
}

/// The memory instructions of `kernel` and what it calls, by state space.
fn ptx_accesses(functions: &BTreeMap<String, Vec<&str>>, kernel: &str) -> Accesses {
    let mut accesses = Accesses::default();
    for function in ptx_reachable(functions, kernel) {
        for line in &functions[function] {
            let opcode = line
                .split_whitespace()
                .find(|t| !t.starts_with('@'))
                .unwrap_or_default();
            let mut parts = opcode.split('.');
            if !matches!(parts.next(), Some("ld" | "st" | "atom" | "red" | "ldu")) {
                continue;
            }
            let spaces: Vec<&str> = parts.collect();
            let has = |space: &str| spaces.contains(&space);
            if has("param") || has("const") {
                continue;
            }
            if has("global") {
                accesses.global += 1;
                if has("nc") {
                    accesses.read_only += 1;
                }
            } else if has("shared") {
                accesses.shared += 1;
            } else if has("local") {
                accesses.local += 1;
            } else {
                accesses.generic += 1;
            }
        }
    }
    accesses
}

/// Measures both sides on an AMD target ID.
pub fn amd(id: &str, inputs: &Inputs) -> Outcome {
    let fail = |what: &str, e: &dyn std::fmt::Display| -> ! { panic!("{id}: {what}: {e}") };
    let target = device_link::parse_gpu_arch(id).unwrap_or_else(|e| fail("target", &e));
    let (images, link) =
        timed(|| device_link::gpu_images(inputs.rust, &target, &Default::default()));
    let images = images.unwrap_or_else(|e| fail("the Rust device link", &e));
    let rust_object = images
        .iter()
        .find(|i| i.kind == ImageKind::Object)
        .map(|i| i.bytes.clone())
        .unwrap_or_else(|| fail("the Rust images", &"no code object"));
    let source = Source {
        language: Language::Hip,
        path: bench_dir().join("parity.hip"),
        relocatable: false,
    };
    let parsed = AmdTargetId::parse(id).unwrap_or_else(|e| fail("target", &e));
    let (compiled, clang) = timed(|| {
        foreign::hip::build(
            &Env::detect(),
            inputs.clang,
            &source,
            &[parsed],
            &Options::default(),
            &inputs.work.join(id),
        )
        .unwrap_or_else(|e| fail("clang on parity.hip", &e))
    });
    let c_object = compiled
        .images
        .first()
        .map(|i| i.bytes.clone())
        .unwrap_or_else(|| fail("clang", &"no code object"));
    let processor = id.split(':').next().unwrap_or(id);
    let side = |object: &[u8], name: &str| {
        let dir = inputs.work.join(format!("{id}-{name}"));
        amd_side(object, processor, inputs.kernels, &dir)
            .unwrap_or_else(|e| fail(&format!("the {name} image"), &e))
    };
    let rows = rows(
        inputs.kernels,
        side(&rust_object, "rust"),
        side(&c_object, "c"),
    );
    let times = BuildTimes {
        rustc: inputs.rustc_seconds,
        link: link.as_secs_f64(),
        clang: clang.as_secs_f64(),
    };
    Outcome::Measured(rows, times)
}

/// One side's code object: every kernel of `kernels` must be in its metadata, and no other.
fn amd_side(
    object: &[u8],
    processor: &str,
    kernels: &[&str],
    dir: &Path,
) -> Result<BTreeMap<String, Figures>, String> {
    let wanted: BTreeSet<String> = kernels.iter().map(|k| k.to_string()).collect();
    Ok(amd_figures(object, processor, &wanted, true, &[], dir)?
        .into_iter()
        .map(|(kernel, (figures, _))| (kernel, figures))
        .collect())
}

/// The figures of the kernels `wanted` of a code object (each must be there, and with `only`
/// no other), with how many of their instructions start with each of `mix`. The object and its
/// listing go to `dir`.
fn amd_figures(
    object: &[u8],
    processor: &str,
    wanted: &BTreeSet<String>,
    only: bool,
    mix: &[&str],
    dir: &Path,
) -> Result<BTreeMap<String, (Figures, Vec<u64>)>, String> {
    let info = offload_format::image::amdgpu::inspect(object).map_err(|e| e.to_string())?;
    let names: BTreeSet<String> = info.kernels.iter().map(|k| k.name.clone()).collect();
    if only && names != *wanted {
        return Err(format!(
            "the code object's kernels {names:?} are not the benchmark's kernels {wanted:?}"
        ));
    }
    if let Some(missing) = wanted.difference(&names).next() {
        return Err(format!("the code object has no kernel {missing}"));
    }
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let path = dir.join("image.elf");
    std::fs::write(&path, object).map_err(|e| e.to_string())?;
    let objdump = Tool::LlvmObjdump.find().map_err(|e| e.to_string())?;
    let text = run(Command::new(objdump)
        .arg("-d")
        .arg(format!("--mcpu={processor}"))
        .arg(&path));
    std::fs::write(dir.join("image.s"), &text).map_err(|e| e.to_string())?;
    let code = AmdCode::new(object, &text)?;
    let mut figures = BTreeMap::new();
    for kernel in info.kernels.iter().filter(|k| wanted.contains(&k.name)) {
        let reachable = code.reachable(&kernel.name)?;
        let mnemonics: Vec<&str> = reachable
            .iter()
            .flat_map(|f| code.instructions(f))
            .map(|(_, mnemonic, _)| mnemonic)
            .collect();
        let count = |f: &dyn Fn(&str) -> bool| mnemonics.iter().filter(|m| f(m)).count() as u64;
        let accesses = Accesses {
            generic: count(&|m| m.starts_with("flat_")),
            global: count(&|m| m.starts_with("global_")),
            shared: count(&|m| {
                m.starts_with("ds_")
                    && !["ds_bpermute", "ds_permute", "ds_swizzle"]
                        .iter()
                        .any(|p| m.starts_with(p))
            }),
            local: count(&|m| {
                m.starts_with("scratch_")
                    || ["buffer_load", "buffer_store", "buffer_atomic"]
                        .iter()
                        .any(|p| m.starts_with(p))
            }),
            read_only: 0,
        };
        let counts = mix.iter().map(|p| count(&|m| m.starts_with(p))).collect();
        figures.insert(
            kernel.name.clone(),
            (
                Figures {
                    registers: kernel.vgpr_count,
                    sgprs: Some(kernel.sgpr_count),
                    agprs: Some(kernel.agpr_count),
                    stack_bytes: kernel.private_segment_fixed_size,
                    dynamic_stack: kernel.uses_dynamic_stack,
                    spills: kernel.vgpr_spill_count + kernel.sgpr_spill_count,
                    instructions: mnemonics.len() as u64,
                    code_bytes: reachable.iter().map(|f| code.functions[*f].1).sum(),
                    calls: count(&|m| m.starts_with("s_swappc") || m.starts_with("s_call")),
                    accesses,
                },
                counts,
            ),
        );
    }
    Ok(figures)
}

/// The instructions the AMD GEMM comparison counts in each kernel (mnemonic prefixes; the code,
/// not its execution): the matrix-core multiplies, LDS reads and writes, global loads, the
/// block's barriers, and the cross-lane exchanges.
pub const AMD_GEMM_MIX: [&str; 6] = [
    "v_mfma",
    "ds_read",
    "ds_write",
    "global_load",
    "s_barrier",
    "ds_bpermute",
];

/// One side of an AMD pair.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AmdGemmFigures {
    /// VGPRs, SGPRs, scratch, spills, instructions…
    pub figures: Figures,
    /// How many instructions of each prefix of [`AMD_GEMM_MIX`], in that order.
    pub mix: [u64; AMD_GEMM_MIX.len()],
}

impl AmdGemmFigures {
    /// The count of `prefix`, one of [`AMD_GEMM_MIX`].
    pub fn count(&self, prefix: &str) -> u64 {
        mix_count(&AMD_GEMM_MIX, &self.mix, prefix)
    }

    /// The vector registers a wavefront holds: `.vgpr_count`, which counts the AGPRs too on
    /// gfx90a and later.
    pub fn vector_registers(&self) -> u64 {
        self.figures.registers
    }
}

/// Both sides of one kernel of an AMD pair.
#[derive(Debug, Clone)]
pub struct AmdGemmRow {
    pub kernel: &'static str,
    pub rust: AmdGemmFigures,
    pub c: AmdGemmFigures,
}

/// A compute-bound pair on the AMD processor `id`: `kernels` of the Rust crate (`rust`, which
/// may hold other kernels) against their HIP twins in `benches/parity/<twin>`, compiled as the
/// build compiles HIP. The objects and listings go to `work/<twin's stem>/<id>-rust` and
/// `…/<id>-c`.
pub fn amd_gemm(
    id: &str,
    kernels: &[&'static str],
    twin: &str,
    rust: &[DeviceInput],
    clang: &Clang,
    work: &Path,
) -> Vec<AmdGemmRow> {
    let fail = |what: &str, e: &dyn std::fmt::Display| -> ! { panic!("{id}, {twin}: {what}: {e}") };
    let target = device_link::parse_gpu_arch(id).unwrap_or_else(|e| fail("target", &e));
    let images = device_link::gpu_images(rust, &target, &Default::default())
        .unwrap_or_else(|e| fail("the Rust device link", &e));
    let rust_object = images
        .iter()
        .find(|i| i.kind == ImageKind::Object)
        .map(|i| i.bytes.clone())
        .unwrap_or_else(|| fail("the Rust images", &"no code object"));
    let work = work.join(Path::new(twin).file_stem().unwrap_or_default());
    let source = Source {
        language: Language::Hip,
        path: bench_dir().join(twin),
        relocatable: false,
    };
    let parsed = AmdTargetId::parse(id).unwrap_or_else(|e| fail("target", &e));
    let compiled = foreign::hip::build(
        &Env::detect(),
        clang,
        &source,
        &[parsed],
        &Options::default(),
        &work.join(id),
    )
    .unwrap_or_else(|e| fail("clang", &e));
    let c_object = compiled
        .images
        .first()
        .map(|i| i.bytes.clone())
        .unwrap_or_else(|| fail("clang", &"no code object"));
    let processor = id.split(':').next().unwrap_or(id);
    let wanted: BTreeSet<String> = kernels.iter().map(|k| k.to_string()).collect();
    let side = |object: &[u8], name: &str| {
        amd_figures(
            object,
            processor,
            &wanted,
            false,
            &AMD_GEMM_MIX,
            &work.join(format!("{id}-{name}")),
        )
        .unwrap_or_else(|e| fail(&format!("the {name} object"), &e))
    };
    let (mut rust, mut c) = (side(&rust_object, "rust"), side(&c_object, "c"));
    let take = |map: &mut BTreeMap<String, (Figures, Vec<u64>)>, kernel: &str| {
        let (figures, counts) = map.remove(kernel).unwrap_or_default();
        let mut mix = [0; AMD_GEMM_MIX.len()];
        for (m, c) in mix.iter_mut().zip(counts) {
            *m = c;
        }
        AmdGemmFigures { figures, mix }
    };
    kernels
        .iter()
        .map(|&kernel| AmdGemmRow {
            kernel,
            rust: take(&mut rust, kernel),
            c: take(&mut c, kernel),
        })
        .collect()
}

/// The instructions of `llvm-objdump -d`'s listing as (address, mnemonic, operands), from lines
/// such as `\tv_add_u32_e32 v2, s6, v0   // 000000007224: 68040006`.
fn objdump_instructions(disassembly: &str) -> Vec<(u64, &str, &str)> {
    disassembly
        .lines()
        .filter_map(|line| {
            let (instruction, comment) = line.split_once("//")?;
            let address = u64::from_str_radix(comment.trim().split(':').next()?, 16).ok()?;
            let instruction = instruction.trim();
            let (mnemonic, operands) = instruction.split_once(' ').unwrap_or((instruction, ""));
            (!mnemonic.is_empty()).then(|| (address, mnemonic, operands.trim()))
        })
        .collect()
}

/// An AMD code object's functions and `llvm-objdump -d`'s instructions.
struct AmdCode<'a> {
    /// Function symbols: name to (address, size).
    functions: BTreeMap<String, (u64, u64)>,
    /// Every instruction: (address, mnemonic, operands).
    instructions: Vec<(u64, &'a str, &'a str)>,
}

impl<'a> AmdCode<'a> {
    fn new(object: &[u8], disassembly: &'a str) -> Result<Self, String> {
        let file = object::File::parse(object).map_err(|e| e.to_string())?;
        let functions = file
            .symbols()
            .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
            .filter_map(|s| Some((s.name().ok()?.to_owned(), (s.address(), s.size()))))
            .collect();
        let instructions = objdump_instructions(disassembly);
        Ok(Self {
            functions,
            instructions,
        })
    }

    /// The instructions inside `function`'s symbol (alignment padding after it left out).
    fn instructions(&self, function: &str) -> impl Iterator<Item = (u64, &'a str, &'a str)> {
        let (start, size) = self.functions.get(function).copied().unwrap_or_default();
        self.instructions
            .iter()
            .copied()
            .filter(move |(address, _, _)| (start..start + size).contains(address))
    }

    /// The functions whose address `function` computes: `s_getpc_b64 s[N:N+1]` (the address of
    /// the next instruction), then `s_add_u32 sN, sN, lo` and `s_addc_u32 sN+1, sN+1, hi`.
    fn callees(&self, function: &str) -> Vec<&str> {
        let starts: BTreeMap<u64, &str> = self
            .functions
            .iter()
            .map(|(name, (address, _))| (*address, name.as_str()))
            .collect();
        let immediate = |text: &str| -> Option<u64> {
            let text = text.trim().trim_start_matches("lit(").trim_end_matches(')');
            match text.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => text.parse::<i64>().ok().map(|v| v as u64),
            }
        };
        let mut callees = Vec::new();
        let instructions: Vec<_> = self.instructions(function).collect();
        for (i, (address, mnemonic, operands)) in instructions.iter().enumerate() {
            if *mnemonic != "s_getpc_b64" {
                continue;
            }
            let Some(low) = operands
                .strip_prefix("s[")
                .and_then(|r| r.split(':').next())
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let operand = |m: &str, reg: u32| {
                instructions[i + 1..]
                    .iter()
                    .take(8)
                    .find_map(|(_, mn, ops)| {
                        let prefix = format!("s{reg}, s{reg}, ");
                        (*mn == m).then(|| ops.strip_prefix(&prefix)).flatten()
                    })
            };
            let (Some(lo), Some(hi)) = (
                operand("s_add_u32", low).and_then(immediate),
                operand("s_addc_u32", low + 1).and_then(immediate),
            ) else {
                continue;
            };
            let offset = (hi << 32) | (lo & 0xffff_ffff);
            let target = (address + 4).wrapping_add(offset);
            if let Some(name) = starts.get(&target)
                && *name != function
            {
                callees.push(*name);
            }
        }
        callees
    }

    /// `kernel` and every function it reaches.
    fn reachable(&self, kernel: &str) -> Result<Vec<&str>, String> {
        let (name, _) = self
            .functions
            .get_key_value(kernel)
            .ok_or_else(|| format!("no symbol {kernel}"))?;
        let mut seen = vec![name.as_str()];
        let mut i = 0;
        while i < seen.len() {
            for callee in self.callees(seen[i]) {
                if !seen.contains(&callee) {
                    seen.push(callee);
                }
            }
            i += 1;
        }
        Ok(seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sass_listing() {
        let text = "
\tcode for sm_80
\t\tFunction : saxpy
\t.headerflags    @\"EF_CUDA_SM80 EF_CUDA_PTX_SM(EF_CUDA_SM80)\"
        /*0000*/                   MOV R1, c[0x0][0x28] ;        /* 0x00000a0000017a02 */
                                                                 /* 0x000fe40000000f00 */
        /*0010*/              @!P0 LDG.E.CONSTANT R0, [R2.64] ;   /* 0x0000000602008981 */
        /*0020*/                   CALL.REL.NOINC 0x40 ;           /* 0x0000001000007944 */
        /*0030*/                   EXIT ;                          /* 0x000000000000794d */
        /*0040*/                   NOP;                            /* 0x0000000000007918 */
\t\tFunction : other
        /*0000*/                   EXIT ;                          /* 0x000000000000794d */
";
        let sass = parse_sass(text);
        let opcodes: Vec<(u64, &str)> = sass["saxpy"]
            .iter()
            .map(|i| (i.offset, i.opcode.as_str()))
            .collect();
        assert_eq!(
            opcodes,
            [
                (0, "MOV"),
                (0x10, "LDG"),
                (0x20, "CALL"),
                (0x30, "EXIT"),
                (0x40, "NOP")
            ]
        );
        assert_eq!(sass["other"].len(), 1);
    }

    #[test]
    fn ptx_accesses_follow_calls() {
        let ptx = "
.func  (.param .b32 func_retval0) helper(
\t.param .b64 helper_param_0
)
{
\tld.param.b64 \t%rd1, [helper_param_0];
\tld.u32 \t%r1, [%rd1];
\tst.local.b32 \t[%rd2], %r1;
\tret;
}
.func unused()
{
\tld.global.b32 \t%r1, [%rd1];
}
.visible .entry k(
\t.param .u64 k_param_0
)
{
\tld.global.nc.f32 \t%f1, [%rd1];
\t@%p1 st.global.f32 \t[%rd1], %f1;
\tld.shared.b32 \t%r2, [%rd3];
\tatom.global.add.u32 \t%r3, [%rd1], 1;
\tatom.add.u32 \t%r3, [%rd4], 1;
\tcall.uni (retval0), helper, (param0);
\tret;
}
";
        let functions = ptx_functions(ptx);
        assert_eq!(
            functions.keys().collect::<Vec<_>>(),
            ["helper", "k", "unused"]
        );
        assert_eq!(ptx_reachable(&functions, "k"), ["k", "helper"]);
        assert_eq!(
            ptx_accesses(&functions, "k"),
            Accesses {
                generic: 2,
                global: 3,
                shared: 1,
                local: 1,
                read_only: 1,
            }
        );
    }

    #[test]
    fn amd_calls_are_found_through_getpc() {
        let text = "
0000000000001000 <k>:
\ts_getpc_b64 s[16:17]                                      // 000000001000: BE901C00
\ts_add_u32 s16, s16, 0xfc                                  // 000000001004: 8010FF10 000000FC
\ts_addc_u32 s17, s17, lit(0x0)                             // 00000000100C: 8211FF11 00000000
\ts_swappc_b64 s[30:31], s[16:17]                           // 000000001014: BE9E1E10
\tflat_load_dword v0, v[0:1]                                // 000000001018: DC500000 007F0000
\ts_endpgm                                                  // 00000000101C: BF810000
\ts_nop 0                                                   // 000000001020: BF800000

0000000000001100 <f>:
\tglobal_store_dword v[0:1], v2, off                        // 000000001100: DC708000 007F0200
\ts_setpc_b64 s[30:31]                                      // 000000001108: BE801D1E
";
        let code = AmdCode {
            functions: [
                ("k".to_owned(), (0x1000, 0x20)),
                ("f".to_owned(), (0x1100, 0xc)),
            ]
            .into_iter()
            .collect(),
            instructions: objdump_instructions(text),
        };
        assert_eq!(code.instructions("k").count(), 6, "the padding is not k's");
        assert_eq!(code.callees("k"), ["f"]);
        assert_eq!(code.reachable("k").unwrap(), ["k", "f"]);
    }
}
