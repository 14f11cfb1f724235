//! The parity benchmark's table, as Markdown (printed, and written for BENCHMARKS.md) and
//! as JSON (for tools).

use std::fmt::Write as _;

use crate::checks::{excess_generic, excess_scratch, geomean, ratio};
use crate::limits;
use crate::measure::{
    AMD_GEMM_MIX, Accesses, AmdGemmRow, Figures, GEMM_MIX, GemmFigures, GemmOutcome, GemmRow,
    Outcome, Row, TrapRow,
};

/// `text` in lines of at most `width` characters, broken at spaces.
fn wrap(text: &str, width: usize) -> String {
    let mut lines: Vec<String> = vec![String::new()];
    for word in text.split_whitespace() {
        let line = lines.last_mut().expect("one line at least");
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(word.to_owned());
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines.join("\n")
}

fn is_amd(arch: &str) -> bool {
    offload_format::DeviceFamily::of_gpu_arch_name(arch) == Some(offload_format::DeviceFamily::Amd)
}

fn over(value: f64, goal: f64) -> String {
    if value > goal {
        format!("**{value:.2}**")
    } else {
        format!("{value:.2}")
    }
}

fn scratch(f: &Figures) -> String {
    let dynamic = if f.dynamic_stack { "+dyn" } else { "" };
    format!("{}{dynamic}, {}", f.stack_bytes, f.spills)
}

fn accesses(a: &Accesses) -> String {
    let read_only = if a.read_only > 0 {
        format!(" ({} nc)", a.read_only)
    } else {
        String::new()
    };
    format!(
        "{}·{}·{}·{}{read_only}",
        a.generic, a.global, a.shared, a.local
    )
}

pub fn markdown(
    results: &[(&str, Outcome)],
    asserted: &[(&str, Vec<Row>)],
    trapped: &[(&str, Vec<TrapRow>)],
    gemm: &[(&str, GemmOutcome)],
    amd_gemm: &[(&str, Vec<AmdGemmRow>)],
    command: &str,
) -> String {
    let mut md = String::new();
    let legend = format!(
        "Each kernel of `benches/parity/kernels` against its twin in `benches/parity/parity.cu` \
         (NVIDIA) or `parity.hip` (AMD), compiled by clang-22 `-O3`; cells are `Rust / C`, `×` \
         is Rust over C, **bold** where the goal is not met (registers {:.2}×, code size \
         {:.1}×). Registers: `ptxas -v` (NVIDIA), `.vgpr_count` with the AGPRs in it (AMD). \
         Stack, spills: `ptxas`'s stack frame and spill-store bytes; AMD's private segment \
         (`+dyn`: dynamic stack) and spilled registers. Instructions and code bytes: SASS \
         (`cuobjdump -sass`, callees included, padding not), AMD `llvm-objdump -d` of the \
         kernel and the functions it calls. Accesses, `generic·global·shared·local` memory \
         instructions: in the PTX (NVIDIA) or the machine code (AMD); `(N nc)`: N of the global \
         ones are loads through NVIDIA's read-only data path, `ld.global.nc`. Reproduce: \
         `{command}`.",
        limits::REGISTERS_GOAL,
        limits::CODE_SIZE_GOAL
    );
    let _ = writeln!(md, "{}", wrap(&legend, 95));
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "| arch | registers, geo. mean × (goal ≤ {:.2}) | kernels over {:.2}× registers | \
         over {:.1}× code size | scratch where C has none | generic where C has none | device \
         build, Rust / C (s) |",
        limits::REGISTERS_GEOMEAN_GOAL,
        limits::REGISTERS_GOAL,
        limits::CODE_SIZE_GOAL
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|");
    for (arch, outcome) in results {
        match outcome {
            Outcome::Unavailable(reason) => {
                let _ = writeln!(md, "| {arch} | {reason} | | | | | |");
            }
            Outcome::Measured(rows, times) => {
                let registers: Vec<f64> = rows
                    .iter()
                    .map(|r| ratio(r.rust.registers, r.c.registers))
                    .collect();
                let code = rows
                    .iter()
                    .filter(|r| ratio(r.rust.code_bytes, r.c.code_bytes) > limits::CODE_SIZE_GOAL)
                    .count();
                let _ = writeln!(
                    md,
                    "| {arch} | {} | {} | {code} | {} | {} | {:.2} / {:.2} |",
                    over(
                        geomean(registers.iter().copied()),
                        limits::REGISTERS_GEOMEAN_GOAL
                    ),
                    registers
                        .iter()
                        .filter(|r| **r > limits::REGISTERS_GOAL)
                        .count(),
                    rows.iter().filter(|r| excess_scratch(r).is_some()).count(),
                    rows.iter().filter(|r| excess_generic(r).is_some()).count(),
                    times.rustc + times.link,
                    times.clang
                );
            }
        }
    }
    for (arch, outcome) in results {
        let _ = writeln!(md);
        let _ = writeln!(md, "### {arch}");
        let _ = writeln!(md);
        let (rows, times) = match outcome {
            Outcome::Unavailable(reason) => {
                let _ = writeln!(md, "Not measured: {reason}");
                continue;
            }
            Outcome::Measured(rows, times) => (rows, times),
        };
        let amd = is_amd(arch);
        let _ = writeln!(
            md,
            "| kernel | {} | × |{} stack, spills | instructions | code bytes | × | accesses | \
             calls |",
            if amd { "VGPRs" } else { "registers" },
            if amd { " AGPRs | SGPRs |" } else { "" }
        );
        let _ = writeln!(
            md,
            "|---|---:|---:|{}---:|---:|---:|---:|---:|---:|",
            if amd { "---:|---:|" } else { "" }
        );
        for Row { kernel, rust, c } in rows {
            let amd_columns = if amd {
                format!(
                    " {} / {} | {} / {} |",
                    rust.agprs.unwrap_or(0),
                    c.agprs.unwrap_or(0),
                    rust.sgprs.unwrap_or(0),
                    c.sgprs.unwrap_or(0)
                )
            } else {
                String::new()
            };
            let _ = writeln!(
                md,
                "| {kernel} | {} / {} | {} |{amd_columns} {} / {} | {} / {} | {} / {} | {} | {} / \
                 {} | {} / {} |",
                rust.registers,
                c.registers,
                over(ratio(rust.registers, c.registers), limits::REGISTERS_GOAL),
                scratch(rust),
                scratch(c),
                rust.instructions,
                c.instructions,
                rust.code_bytes,
                c.code_bytes,
                over(ratio(rust.code_bytes, c.code_bytes), limits::CODE_SIZE_GOAL),
                accesses(&rust.accesses),
                accesses(&c.accesses),
                rust.calls,
                c.calls
            );
        }
        let geo =
            |f: &dyn Fn(&Figures) -> u64| geomean(rows.iter().map(|r| ratio(f(&r.rust), f(&r.c))));
        let _ = writeln!(
            md,
            "| geometric mean | | {} |{} | {:.2}× | | {} | | |",
            over(geo(&|f| f.registers), limits::REGISTERS_GEOMEAN_GOAL),
            if amd { " | |" } else { "" },
            geo(&|f| f.instructions),
            over(geo(&|f| f.code_bytes), limits::CODE_SIZE_GOAL)
        );
        let _ = writeln!(md);
        let _ = writeln!(
            md,
            "Device build: Rust {:.2} s (rustc of the kernel crate for the triple {:.2} s, link \
             {:.2} s), C {:.2} s (clang{}).",
            times.rustc + times.link,
            times.rustc,
            times.link,
            times.clang,
            if amd { "" } else { " and ptxas" }
        );
    }
    assert_twins(&mut md, asserted);
    trap_strategy(&mut md, trapped);
    gemm_twins(&mut md, gemm);
    amd_gemm_twins(&mut md, amd_gemm);
    md
}

/// Rust's stack and spills against C's, Rust's in bold where it uses any.
fn scratch_pair(rust: &Figures, c: &Figures) -> String {
    if rust.uses_scratch() {
        format!("**{}** / {}", scratch(rust), scratch(c))
    } else {
        format!("{} / {}", scratch(rust), scratch(c))
    }
}

/// The GEMM on AMD against its HIP C twin.
fn amd_gemm_twins(md: &mut String, amd_gemm: &[(&str, Vec<AmdGemmRow>)]) {
    if amd_gemm.is_empty() {
        return;
    }
    let legend = format!(
        "The GEMM kernels of `examples/gemm/kernels` (`gemm__f16`, `gemm__bf16`) on AMD against \
         their HIP C twins in `benches/parity/gemm.hip`, the same algorithm as the Rust \
         kernel's AMD path (128×128 block tiles of 4 wavefronts, 64×64 each, 32-deep slices \
         staged through registers into a 3-stage ring of swizzled LDS, `v_mfma_f32_16x16x16`), \
         and the attention kernels of `examples/attention/kernels` against theirs in \
         `benches/parity/attention.hip` (FlashAttention-2's forward pass: 64 queries a block \
         of 2 wavefronts, K and V staged through registers into swizzled LDS, \
         `v_mfma_f32_16x16x16`, the online softmax in `v_exp_f32`, probabilities moved into A's \
         layout by `ds_bpermute`), measured as the table's AMD rows; cells are `Rust / C`. VGPRs: `.vgpr_count`, AGPRs \
         included. {}: instructions counted by mnemonic prefix in each kernel's code (not its \
         execution). Goals: no scratch in Rust, VGPRs at most {:.2}× C's, the same {} counts; \
         **bold** where one is not met.",
        AMD_GEMM_MIX.join(", "),
        limits::AMD_GEMM_REGISTERS_GOAL,
        limits::AMD_GEMM_SAME_COUNT.join(", ")
    );
    let _ = writeln!(md);
    let _ = writeln!(md, "### GEMM and attention against their HIP C twins (AMD)");
    let _ = writeln!(md);
    let _ = writeln!(md, "{}", wrap(&legend, 95));
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "| kernel | arch | VGPRs | × | scratch, spills | {} | instructions |",
        AMD_GEMM_MIX.join(" | ")
    );
    let _ = writeln!(
        md,
        "|---|---|---:|---:|---:|{}---:|",
        "---:|".repeat(AMD_GEMM_MIX.len())
    );
    for (arch, rows) in amd_gemm {
        for AmdGemmRow { kernel, rust, c } in rows {
            let (r, cf) = (&rust.figures, &c.figures);
            let stack = scratch_pair(r, cf);
            let mix: Vec<String> = AMD_GEMM_MIX
                .iter()
                .map(|p| {
                    pair(
                        rust.count(p),
                        c.count(p),
                        limits::AMD_GEMM_SAME_COUNT.contains(p),
                    )
                })
                .collect();
            let _ = writeln!(
                md,
                "| {kernel} | {arch} | {} / {} | {} | {stack} | {} | {} / {} |",
                rust.vector_registers(),
                c.vector_registers(),
                over(
                    ratio(rust.vector_registers(), c.vector_registers()),
                    limits::AMD_GEMM_REGISTERS_GOAL
                ),
                mix.join(" | "),
                r.instructions,
                cf.instructions
            );
        }
    }
}

/// Every kernel linked with the panic strategy `trap`, against `report` and both C twins.
fn trap_strategy(md: &mut String, trapped: &[(&str, Vec<TrapRow>)]) {
    if trapped.is_empty() {
        return;
    }
    let legend = format!(
        "Every kernel linked again with the panic strategy `trap` (`[package.metadata.offload] \
         panic = \"trap\"`, or `OFFLOAD_PANIC=trap`): its checks kept, each failed one the \
         device's trap, no report. Cells are `trap / report / C / C with assert`, the last \
         only where there is one (NVIDIA, `benches/parity/parity_assert.cu`), else `–`; `×` is \
         trap over C without `assert`, **bold** where the goal is not met (code size {:.1}×, \
         registers {:.2}×). Code bytes and instructions as above (SASS on NVIDIA, AMD's \
         `llvm-objdump`).",
        limits::TRAP_CODE_SIZE_GOAL,
        limits::TRAP_REGISTERS_GOAL
    );
    let _ = writeln!(md);
    let _ = writeln!(md, "### The panic strategy `trap`");
    let _ = writeln!(md);
    let _ = writeln!(md, "{}", wrap(&legend, 95));
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "| arch | code × C, geo. mean: report → trap | over {:.1}× code: report → trap | over \
         {:.2}× registers: report → trap | kernels changed by `trap` |",
        limits::TRAP_CODE_SIZE_GOAL,
        limits::TRAP_REGISTERS_GOAL
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|");
    for (arch, rows) in trapped {
        let code = |f: &dyn Fn(&TrapRow) -> &Figures| {
            geomean(rows.iter().map(|r| ratio(f(r).code_bytes, r.c.code_bytes)))
        };
        let over = |f: &dyn Fn(&TrapRow) -> &Figures, registers: bool| {
            rows.iter()
                .filter(|r| {
                    if registers {
                        ratio(f(r).registers, r.c.registers) > limits::TRAP_REGISTERS_GOAL
                    } else {
                        ratio(f(r).code_bytes, r.c.code_bytes) > limits::TRAP_CODE_SIZE_GOAL
                    }
                })
                .count()
        };
        let changed = rows.iter().filter(|r| r.trap != r.report).count();
        let _ = writeln!(
            md,
            "| {arch} | {:.2} → {:.2} | {} → {} | {} → {} | {changed} |",
            code(&|r| &r.report),
            code(&|r| &r.trap),
            over(&|r| &r.report, false),
            over(&|r| &r.trap, false),
            over(&|r| &r.report, true),
            over(&|r| &r.trap, true),
        );
    }
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "| kernel | arch | registers | × | code bytes | × | instructions |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|");
    let four = |f: &dyn Fn(&Figures) -> u64, row: &TrapRow| {
        format!(
            "{} / {} / {} / {}",
            f(&row.trap),
            f(&row.report),
            f(&row.c),
            row.c_assert
                .as_ref()
                .map_or_else(|| "–".to_owned(), |a| f(a).to_string())
        )
    };
    for (arch, rows) in trapped {
        for row in rows {
            let _ = writeln!(
                md,
                "| {} | {arch} | {} | {} | {} | {} | {} |",
                row.kernel,
                four(&|f| f.registers, row),
                over(
                    ratio(row.trap.registers, row.c.registers),
                    limits::TRAP_REGISTERS_GOAL
                ),
                four(&|f| f.code_bytes, row),
                over(
                    ratio(row.trap.code_bytes, row.c.code_bytes),
                    limits::TRAP_CODE_SIZE_GOAL
                ),
                four(&|f| f.instructions, row),
            );
        }
    }
}

/// The kernels that can panic against CUDA C that makes the same checks with `assert`.
fn assert_twins(md: &mut String, asserted: &[(&str, Vec<Row>)]) {
    if asserted.is_empty() {
        return;
    }
    let legend = "The kernels that can panic against CUDA C that makes the same checks with \
                  `assert` (`benches/parity/parity_assert.cu`), CUDA C's way to stop a kernel \
                  with a report: cells are `Rust / C with assert`, measured as above, no goal. \
                  The assert's `__assertfail` is the driver's, so its code is not counted; its \
                  report holds no index or length.";
    let _ = writeln!(md);
    let _ = writeln!(md, "### Checked kernels against C with `assert` (NVIDIA)");
    let _ = writeln!(md);
    let _ = writeln!(md, "{}", wrap(legend, 95));
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "| kernel | arch | registers | × | stack, spills | instructions | code bytes | × | calls |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for (arch, rows) in asserted {
        for Row { kernel, rust, c } in rows {
            let _ = writeln!(
                md,
                "| {kernel} | {arch} | {} / {} | {:.2} | {} / {} | {} / {} | {} / {} | {:.2} | {} \
                 / {} |",
                rust.registers,
                c.registers,
                ratio(rust.registers, c.registers),
                scratch(rust),
                scratch(c),
                rust.instructions,
                c.instructions,
                rust.code_bytes,
                c.code_bytes,
                ratio(rust.code_bytes, c.code_bytes),
                rust.calls,
                c.calls
            );
        }
    }
}

/// `rust / c`, in bold where the two differ and `same` says they should not.
fn pair(rust: u64, c: u64, same: bool) -> String {
    if same && rust != c {
        format!("**{rust} / {c}**")
    } else {
        format!("{rust} / {c}")
    }
}

/// The GEMM kernels against their CUDA C twins.
fn gemm_twins(md: &mut String, gemm: &[(&str, GemmOutcome)]) {
    if gemm.is_empty() {
        return;
    }
    let legend = format!(
        "The GEMM kernels of `examples/gemm/kernels` against their CUDA C twins, the same \
         algorithms: on sm_80 and sm_90 `gemm__f16` and `gemm__bf16` against \
         `benches/parity/gemm.cu` (128×128 block tiles, 3 `cp.async` stages, `ldmatrix` and \
         `mma.sync.m16n8k16`); on sm_90a `gemm_tma__f16` and `gemm_tma__bf16` against \
         `benches/parity/gemm_tma.cu` (a TMA producer warpgroup and two `wgmma` m64n128k16 \
         consumers over 4 `mbarrier` stages, `setmaxnreg`). The attention kernels of \
         `examples/attention/kernels` against `benches/parity/attention.cu` on sm_80 and sm_90 \
         (FlashAttention-2's forward pass: 64 queries a block, K and V by `cp.async`, \
         `ldmatrix`, `mma.sync.m16n8k16`, the online softmax in `ex2.approx`), with the \
         GEMM's goals. Measured as above; cells are \
         `Rust / C`. Shared: static shared memory per block (`ptxas -v`), bytes. {}: opcodes \
         counted in each kernel's SASS (the code, not its execution). Goals: no stack or \
         spills in Rust, registers at most {:.2}× C's, the same {} counts on sm_80 and sm_90 \
         and {} on sm_90a (where {} are held present: LLVM unrolls the Rust producer loop \
         twice, clang leaves the twin's rolled); **bold** where one is not met.",
        GEMM_MIX.join(", "),
        limits::GEMM_REGISTERS_GOAL,
        limits::gemm_same_count("sm_80").join(", "),
        limits::gemm_same_count("sm_90a").join(", "),
        limits::gemm_present("sm_90a").join(", ")
    );
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "### GEMM and attention against their CUDA C twins (NVIDIA)"
    );
    let _ = writeln!(md);
    let _ = writeln!(md, "{}", wrap(&legend, 95));
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "| kernel | arch | registers | × | stack, spills | shared | {} | instructions |",
        GEMM_MIX.join(" | ")
    );
    let _ = writeln!(
        md,
        "|---|---|---:|---:|---:|---:|{}---:|",
        "---:|".repeat(GEMM_MIX.len())
    );
    for (arch, outcome) in gemm {
        let rows = match outcome {
            GemmOutcome::Unavailable(reason) => {
                let _ = writeln!(md, "| | {arch} | not measured: {reason} |");
                continue;
            }
            GemmOutcome::Measured(rows) => rows,
        };
        for GemmRow { kernel, rust, c } in rows {
            let (r, cf) = (&rust.figures, &c.figures);
            let stack = scratch_pair(r, cf);
            let mix: Vec<String> = GEMM_MIX
                .iter()
                .map(|o| {
                    pair(
                        rust.count(o),
                        c.count(o),
                        limits::gemm_same_count(arch).contains(o),
                    )
                })
                .collect();
            let _ = writeln!(
                md,
                "| {kernel} | {arch} | {} / {} | {} | {stack} | {} / {} | {} | {} / {} |",
                r.registers,
                cf.registers,
                over(
                    ratio(r.registers, cf.registers),
                    limits::GEMM_REGISTERS_GOAL
                ),
                rust.shared_bytes,
                c.shared_bytes,
                mix.join(" | "),
                r.instructions,
                cf.instructions
            );
        }
    }
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_figures(f: &Figures) -> String {
    let optional = |v: Option<u64>| v.map_or("null".to_owned(), |v| v.to_string());
    format!(
        "{{\"registers\": {}, \"agprs\": {}, \"sgprs\": {}, \"stack_bytes\": {}, \
         \"dynamic_stack\": {}, \"spills\": {}, \"instructions\": {}, \"code_bytes\": {}, \
         \"calls\": {}, \"accesses\": {{\"generic\": {}, \"global\": {}, \"shared\": {}, \
         \"local\": {}, \"read_only\": {}}}}}",
        f.registers,
        optional(f.agprs),
        optional(f.sgprs),
        f.stack_bytes,
        f.dynamic_stack,
        f.spills,
        f.instructions,
        f.code_bytes,
        f.calls,
        f.accesses.generic,
        f.accesses.global,
        f.accesses.shared,
        f.accesses.local,
        f.accesses.read_only
    )
}

fn json_gemm_figures(f: &GemmFigures) -> String {
    let mix: Vec<String> = GEMM_MIX
        .iter()
        .map(|o| format!("{}: {}", json_string(o), f.count(o)))
        .collect();
    let figures = json_figures(&f.figures);
    let figures = figures.strip_suffix('}').unwrap_or(&figures);
    format!(
        "{figures}, \"shared_bytes\": {}, \"sass\": {{{}}}}}",
        f.shared_bytes,
        mix.join(", ")
    )
}

fn json_rows(rows: &[Row]) -> String {
    let rows: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{{\"kernel\": {}, \"rust\": {}, \"c\": {}}}",
                json_string(r.kernel),
                json_figures(&r.rust),
                json_figures(&r.c)
            )
        })
        .collect();
    rows.join(",\n    ")
}

pub fn json(
    results: &[(&str, Outcome)],
    asserted: &[(&str, Vec<Row>)],
    trapped: &[(&str, Vec<TrapRow>)],
    gemm: &[(&str, GemmOutcome)],
    amd_gemm: &[(&str, Vec<AmdGemmRow>)],
) -> String {
    let archs: Vec<String> = results
        .iter()
        .map(|(arch, outcome)| match outcome {
            Outcome::Unavailable(reason) => format!(
                "{{\"arch\": {}, \"unavailable\": {}}}",
                json_string(arch),
                json_string(reason)
            ),
            Outcome::Measured(rows, times) => {
                format!(
                    "{{\"arch\": {}, \"build_seconds\": {{\"rustc\": {:.3}, \"link\": {:.3}, \
                     \"clang\": {:.3}}}, \"kernels\": [\n    {}\n  ]}}",
                    json_string(arch),
                    times.rustc,
                    times.link,
                    times.clang,
                    json_rows(rows)
                )
            }
        })
        .collect();
    let asserted: Vec<String> = asserted
        .iter()
        .map(|(arch, rows)| {
            format!(
                "{{\"arch\": {}, \"kernels\": [\n    {}\n  ]}}",
                json_string(arch),
                json_rows(rows)
            )
        })
        .collect();
    let trapped: Vec<String> = trapped
        .iter()
        .map(|(arch, rows)| {
            let rows: Vec<String> = rows
                .iter()
                .map(|r| {
                    format!(
                        "{{\"kernel\": {}, \"trap\": {}, \"report\": {}, \"c\": {}, \
                         \"c_assert\": {}}}",
                        json_string(r.kernel),
                        json_figures(&r.trap),
                        json_figures(&r.report),
                        json_figures(&r.c),
                        r.c_assert
                            .as_ref()
                            .map_or_else(|| "null".to_owned(), json_figures)
                    )
                })
                .collect();
            format!(
                "{{\"arch\": {}, \"kernels\": [\n    {}\n  ]}}",
                json_string(arch),
                rows.join(",\n    ")
            )
        })
        .collect();
    let gemm: Vec<String> = gemm
        .iter()
        .map(|(arch, outcome)| match outcome {
            GemmOutcome::Unavailable(reason) => format!(
                "{{\"arch\": {}, \"unavailable\": {}}}",
                json_string(arch),
                json_string(reason)
            ),
            GemmOutcome::Measured(rows) => {
                let rows: Vec<String> = rows
                    .iter()
                    .map(|r| {
                        format!(
                            "{{\"kernel\": {}, \"rust\": {}, \"c\": {}}}",
                            json_string(r.kernel),
                            json_gemm_figures(&r.rust),
                            json_gemm_figures(&r.c)
                        )
                    })
                    .collect();
                format!(
                    "{{\"arch\": {}, \"kernels\": [\n    {}\n  ]}}",
                    json_string(arch),
                    rows.join(",\n    ")
                )
            }
        })
        .collect();
    let amd_gemm: Vec<String> = amd_gemm
        .iter()
        .map(|(arch, rows)| {
            let rows: Vec<String> = rows
                .iter()
                .map(|r| {
                    let side = |f: &crate::measure::AmdGemmFigures| {
                        let mix: Vec<String> = AMD_GEMM_MIX
                            .iter()
                            .map(|p| format!("{}: {}", json_string(p), f.count(p)))
                            .collect();
                        format!(
                            "{{\"figures\": {}, \"mix\": {{{}}}}}",
                            json_figures(&f.figures),
                            mix.join(", ")
                        )
                    };
                    format!(
                        "{{\"kernel\": {}, \"rust\": {}, \"c\": {}}}",
                        json_string(r.kernel),
                        side(&r.rust),
                        side(&r.c)
                    )
                })
                .collect();
            format!(
                "{{\"arch\": {}, \"kernels\": [\n    {}\n  ]}}",
                json_string(arch),
                rows.join(",\n    ")
            )
        })
        .collect();
    format!(
        "{{\"archs\": [\n  {}\n],\n\"assert_twins\": [\n  {}\n],\n\"trap\": [\n  {}\n],\n\
         \"gemm_twins\": [\n  {}\n],\n\"amd_gemm_twins\": [\n  {}\n]}}\n",
        archs.join(",\n  "),
        asserted.join(",\n  "),
        trapped.join(",\n  "),
        gemm.join(",\n  "),
        amd_gemm.join(",\n  ")
    )
}
