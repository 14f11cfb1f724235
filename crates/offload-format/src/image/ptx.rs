//! PTX text: its kernels (`.entry` declarations) with their parameters, and the per-kernel
//! figures of `ptxas -v`'s report.
//!
//! One reader of `.entry` declarations, [`entries`]; [`kernel_names`] and [`kernel_params`]
//! are views of what it finds.

use std::collections::{HashMap, HashSet};

use crate::offload_binary::{KernelParams, PtxasKernelInfo, kernel_params_can_name};

/// One kernel (`.entry`) of a PTX module, as declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxEntry {
    /// The kernel's name.
    pub name: String,
    /// Its parameters, in order.
    pub params: Vec<PtxParam>,
}

/// One parameter of a [`PtxEntry`]: `.param [.align N] .type [.ptr [.space] [.align N]]
/// name[[N]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxParam {
    /// The PTX type, e.g. `.u32`, `.f32`, `.u64` (pointers are `.u64`), `.b8` for an array;
    /// empty when the declaration names none.
    pub ty: String,
    /// Its size in bytes: 1 for `.u8`/`.s8`/`.b8`, 2 for the 16-bit types, 4 for the 32-bit
    /// ones, 8 for the 64-bit ones, 16 for `.b128`, times N for an array `name[N]` (how a
    /// struct passed by value is declared); `None` for a type not known here or a declaration
    /// not understood.
    pub size: Option<u32>,
}

impl PtxEntry {
    /// The PTX type of each parameter (`.u32`, …), in order.
    pub fn param_types(&self) -> Vec<&str> {
        self.params.iter().map(|p| p.ty.as_str()).collect()
    }

    /// The size of each parameter, in order; `None` when one of them has no known size.
    pub fn param_sizes(&self) -> Option<Vec<u32>> {
        self.params.iter().map(|p| p.size).collect()
    }
}

/// The kernels (`.entry` directives) of a PTX module with their parameters, in order, as often
/// as they are declared. `//` comments are skipped; `.entry` counts as a whole word only; the
/// name ends at `(`, `{`, `;` or whitespace, and an empty one is no kernel; the parameters are
/// the comma-separated declarations up to the first `)` after the name (none without `(`).
pub fn entries(ptx: &str) -> Vec<PtxEntry> {
    entry_heads(ptx)
        .into_iter()
        .map(|head| PtxEntry {
            name: head.name,
            params: head
                .params
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(param)
                .collect(),
        })
        .collect()
}

/// What precedes a kernel's body: its name, its parameter list's text and the directives
/// between that list and the body.
struct EntryHead {
    name: String,
    params: String,
    directives: String,
}

/// The heads of the `.entry` directives of a PTX module, in order, with the rules of
/// [`entries`] (comments skipped, an empty name no kernel).
fn entry_heads(ptx: &str) -> Vec<EntryHead> {
    let code: Vec<&str> = ptx
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect();
    let code = code.join("\n");
    let mut found = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = find_entry(rest) {
        let after = rest[at + ".entry".len()..].trim_start();
        let name_end = after
            .find(|c: char| c == '(' || c == '{' || c == ';' || c.is_whitespace())
            .unwrap_or(after.len());
        let name = &after[..name_end];
        let tail = after[name_end..].trim_start();
        let (list, next) = match tail.strip_prefix('(') {
            Some(list) => {
                let close = list.find(')').unwrap_or(list.len());
                (&list[..close], &list[close..])
            }
            None => ("", tail),
        };
        // The directives follow the parameters (if any) and end at the body or a `;`.
        let header = next.strip_prefix(')').unwrap_or(next);
        let header = &header[..header.find(['{', ';']).unwrap_or(header.len())];
        if !name.is_empty() {
            found.push(EntryHead {
                name: name.to_owned(),
                params: list.to_owned(),
                directives: header.to_owned(),
            });
        }
        rest = next;
    }
    found
}

/// The names of the kernels of a PTX module ([`entries`]), in order.
pub fn kernel_names(ptx: &str) -> Vec<String> {
    entries(ptx).into_iter().map(|e| e.name).collect()
}

/// The parameter sizes of each kernel of a PTX module ([`entries`], [`PtxParam::size`]), in
/// order, as `offload.kernel-params` records them. A kernel with a parameter of unknown size is
/// left out: its launches are not checked, rather than checked against a wrong size. So is a
/// kernel declared twice with different parameters (one declared twice alike is listed once),
/// and one whose name the key cannot hold ([`kernel_params_can_name`]): the runtime reads the
/// key back and refuses it whole if it lists a kernel twice or such a name.
pub fn kernel_params(ptx: &str) -> Vec<KernelParams> {
    let found: Vec<(String, Option<Vec<u32>>)> = entries(ptx)
        .into_iter()
        .map(|e| {
            let sizes = e.param_sizes();
            (e.name, sizes)
        })
        .collect();
    let mut first: HashMap<&str, &Option<Vec<u32>>> = HashMap::new();
    let mut conflicting: HashSet<&str> = HashSet::new();
    for (name, sizes) in &found {
        if *first.entry(name).or_insert(sizes) != sizes {
            conflicting.insert(name);
        }
    }
    let mut listed: HashSet<&str> = HashSet::new();
    let mut out = Vec::new();
    for (name, sizes) in &found {
        if let Some(sizes) = sizes
            && kernel_params_can_name(name)
            && !conflicting.contains(name.as_str())
            && listed.insert(name)
        {
            out.push(KernelParams {
                kernel: name.clone(),
                sizes: sizes.clone(),
            });
        }
    }
    out
}

/// Each kernel's launch bound: the threads of the `.maxntid x[, y[, z]]` (or `.reqntid`)
/// directive between its parameter list and its body, multiplied out, in declaration order;
/// kernels without one are left out. `//` comments are skipped.
pub fn max_threads(ptx: &str) -> Vec<(String, u32)> {
    entry_heads(ptx)
        .into_iter()
        .filter_map(|head| Some((head.name, bound_directive(&head.directives)?)))
        .collect()
}

/// The threads of a `.maxntid` or `.reqntid` directive in a kernel's header: 1 to 3
/// comma-separated dimensions, multiplied out.
fn bound_directive(header: &str) -> Option<u32> {
    let mut words = header.split(|c: char| c.is_whitespace() || c == ',');
    words.find(|w| *w == ".maxntid" || *w == ".reqntid")?;
    let dims: Vec<u32> = words
        .filter(|w| !w.is_empty())
        .map_while(|w| w.parse().ok())
        .take(3)
        .collect();
    if dims.is_empty() {
        return None;
    }
    dims.into_iter()
        .try_fold(1u32, u32::checked_mul)
        .filter(|&n| n > 0)
}

/// The offset of the next `.entry` directive (a whole word) in `text`.
fn find_entry(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(".entry") {
        let at = from + i;
        let before = text[..at].chars().next_back();
        let after = text[at + ".entry".len()..].chars().next();
        if before.is_none_or(char::is_whitespace) && after.is_some_and(char::is_whitespace) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// One parameter declaration: its type is the first directive other than `.align N`, its
/// name the last word that is not a directive.
fn param(decl: &str) -> PtxParam {
    let unknown = PtxParam {
        ty: String::new(),
        size: None,
    };
    let mut tokens = decl.split_whitespace();
    if tokens.next() != Some(".param") {
        return unknown;
    }
    let (mut ty, mut name) = (None, None);
    while let Some(token) = tokens.next() {
        match token.strip_prefix('.') {
            Some("align") => {
                tokens.next();
            }
            Some(_) => {
                ty.get_or_insert(token);
            }
            None => name = Some(token),
        }
    }
    let Some(ty) = ty else {
        return unknown;
    };
    let size = name.and_then(|name| {
        let element = type_size(&ty[1..])?;
        match name.split_once('[') {
            None => Some(element),
            Some((_, count)) => element.checked_mul(count.strip_suffix(']')?.parse().ok()?),
        }
    });
    PtxParam {
        ty: ty.to_owned(),
        size,
    }
}

fn type_size(ty: &str) -> Option<u32> {
    Some(match ty {
        "u8" | "s8" | "b8" => 1,
        "u16" | "s16" | "b16" | "f16" | "bf16" => 2,
        "u32" | "s32" | "b32" | "f32" | "f16x2" | "bf16x2" => 4,
        "u64" | "s64" | "b64" | "f64" => 8,
        "b128" => 16,
        _ => return None,
    })
}

fn number_before(text: &str, unit: &str) -> Option<u64> {
    let end = text.find(unit)?;
    text[..end].split_whitespace().last()?.parse().ok()
}

/// Reads `ptxas -v`'s report (its stderr) into one entry per kernel, in the report's order.
/// Lines not understood are skipped; a figure not given is 0.
pub fn parse_ptxas_verbose(report: &str) -> Vec<PtxasKernelInfo> {
    let mut kernels: Vec<PtxasKernelInfo> = Vec::new();
    let mut current: Option<usize> = None;
    for line in report.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_owned();
            kernels.push(PtxasKernelInfo {
                name,
                ..PtxasKernelInfo::default()
            });
            current = Some(kernels.len() - 1);
        } else if line.contains("Function properties for ") {
            let name = line
                .split("Function properties for ")
                .nth(1)
                .unwrap_or_default()
                .trim();
            current = kernels.iter().position(|k| k.name == name);
        } else if let Some(kernel) = current.and_then(|i| kernels.get_mut(i)) {
            if line.contains("bytes stack frame") {
                kernel.stack_bytes = number_before(line, "bytes stack frame").unwrap_or(0);
                kernel.spill_store_bytes = number_before(line, "bytes spill stores").unwrap_or(0);
                kernel.spill_load_bytes = number_before(line, "bytes spill loads").unwrap_or(0);
            } else if line.contains("Used ") && line.contains(" registers") {
                kernel.registers = number_before(line, " registers")
                    .and_then(|n| u32::try_from(n).ok())
                    .unwrap_or(0);
                kernel.shared_bytes = number_before(line, "bytes smem").unwrap_or(0);
                // `372 bytes cmem[0], 8 bytes cmem[2]`: every bank counts.
                kernel.constant_bytes = line
                    .split(',')
                    .filter_map(|part| number_before(part, "bytes cmem["))
                    .fold(0, u64::saturating_add);
            }
        }
    }
    kernels
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offload_binary::{encode_kernel_params, parse_kernel_params};

    #[test]
    fn ptx_entries_are_found() {
        let ptx = ".version 7.8\n.target sm_80\n.visible .entry saxpy(\n\t.param .u32 saxpy_param_0\n)\n{\n}\n.entry other (\n)\n.func helper(\n";
        assert_eq!(kernel_names(ptx), vec!["saxpy", "other"]);
    }

    #[test]
    fn entries_and_params() {
        let ptx = "\
.version 7.8
.target sm_80
.address_size 64

.visible .entry saxpy(
\t.param .u32 saxpy_param_0,
\t.param .f32 saxpy_param_1,
\t.param .u64 .ptr .align 1 saxpy_param_2
)
{
\tret;
}
.entry empty()
{
}
";
        let k = entries(ptx);
        assert_eq!(k.len(), 2);
        assert_eq!(k[0].name, "saxpy");
        assert_eq!(k[0].param_types(), [".u32", ".f32", ".u64"]);
        assert_eq!(k[0].param_sizes(), Some(vec![4, 4, 8]));
        assert_eq!(k[1].name, "empty");
        assert!(k[1].params.is_empty());
    }

    /// `.maxntid` as LLVM 22's NVPTX back end writes it for a launch bound, `.reqntid`, a
    /// kernel with none, and a bound in a comment.
    #[test]
    fn launch_bounds_are_read() {
        let ptx = "\
.version 8.7
.target sm_80
.visible .entry gemm__f16(
\t.param .u64 .ptr .align 1 gemm__f16_param_0
)
.maxntid 256, 1, 1
{
\tret;
}
.visible .entry free(
\t.param .u32 free_param_0
)
{
\t// .maxntid 64
}
.entry tile() .reqntid 16, 16 { ret; }
.entry flat()
.maxntid 128
.minnctapersm 2
{
}
";
        assert_eq!(
            max_threads(ptx),
            [
                ("gemm__f16".to_owned(), 256),
                ("tile".to_owned(), 256),
                ("flat".to_owned(), 128),
            ]
        );
        assert_eq!(max_threads(".entry k() .maxntid x {}"), []);
        assert_eq!(max_threads(".entry k() .maxntid 0 {}"), []);
    }

    fn params(kernel: &str, sizes: &[u32]) -> KernelParams {
        KernelParams {
            kernel: kernel.to_owned(),
            sizes: sizes.to_vec(),
        }
    }

    /// The forms clang-22 writes (see also offload-build's tests/foreign_params.rs, which runs
    /// it), a comment holding `.entry`, a kernel on one line, and a type this reader does not
    /// know.
    #[test]
    fn ptx_param_sizes() {
        let ptx = "\
.version 8.7
.target sm_80
// .entry commented_out(.param .u32 x)
.visible .entry scale(
	.param .u64 .ptr .align 1 scale_param_0,
	.param .f32 scale_param_1,
	.param .u32 scale_param_2,
	.param .align 8 .b8 scale_param_3[16],
	.param .u8 scale_param_4,
	.param .u16 scale_param_5,
	.param .f64 scale_param_6,
	.param .u64 .ptr .global .align 8 scale_param_7
)                                       // @scale
{
	ret;
}
.visible .entry noargs()                // @noargs
{
}
.weak .entry _Z1kILi3EEvPi(.param .u64 .ptr .align 1 _Z1kILi3EEvPi_param_0, .param .align 4 .b8 _Z1kILi3EEvPi_param_1[12]) { ret; }
.visible .entry odd(
	.param .u256 odd_param_0
)
{
}
.func helper(.param .u32 helper_param_0) { ret; }
";
        assert_eq!(
            kernel_params(ptx),
            [
                params("scale", &[8, 4, 4, 16, 1, 2, 8, 8]),
                params("noargs", &[]),
                params("_Z1kILi3EEvPi", &[8, 12]),
            ]
        );
        let all = entries(ptx);
        let names: Vec<&str> = all.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["scale", "noargs", "_Z1kILi3EEvPi", "odd"]);
        assert_eq!(all[0].params[3].ty, ".b8");
        assert_eq!(all[2].param_types(), [".u64", ".b8"]);
        assert_eq!(all[3].param_types(), [".u256"]);
        assert_eq!(all[3].param_sizes(), None);
    }

    /// Found by fuzzing: what the build writes as `offload.kernel-params`, the runtime must
    /// read back, so a kernel declared twice and a name holding a separator are left out.
    #[test]
    fn ptx_params_the_runtime_can_read() {
        let ptx = "\
.entry twice(.param .u32 a) { }
.entry twice(.param .u32 a) { }
.entry clash(.param .u32 a) { }
.entry clash(.param .u64 a) { }
.entry unknown(.param .u32 a) { }
.entry unknown(.param .u256 a) { }
.entry a,b(.param .u32 a) { }
.entry c:4(.param .u32 a) { }
.entry ok(.param .u8 a) { }
";
        let found = kernel_params(ptx);
        assert_eq!(found, [params("twice", &[4]), params("ok", &[1])]);
        let text = encode_kernel_params(&found);
        assert_eq!(parse_kernel_params(&text).unwrap(), found);
    }

    #[test]
    fn ptxas_report() {
        let report = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'block_sum' for 'sm_80'
ptxas info    : Function properties for block_sum
    0 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 12 registers, 2048 bytes smem, 376 bytes cmem[0]
ptxas info    : Compiling entry function 'saxpy' for 'sm_80'
ptxas info    : Function properties for saxpy
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, 372 bytes cmem[0], 8 bytes cmem[2]
";
        let k = parse_ptxas_verbose(report);
        assert_eq!(
            k[0],
            PtxasKernelInfo {
                name: "block_sum".into(),
                registers: 12,
                shared_bytes: 2048,
                stack_bytes: 0,
                spill_store_bytes: 4,
                spill_load_bytes: 8,
                constant_bytes: 376,
            }
        );
        assert_eq!(k[1].constant_bytes, 380);
        assert_eq!(k[1].registers, 8);
        assert_eq!(k[1].shared_bytes, 0);
        assert_eq!(k[1].stack_bytes, 16);
        assert!(parse_ptxas_verbose("garbage\n'''Used registers").is_empty());
    }
}
