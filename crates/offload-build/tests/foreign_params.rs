//! The kernel parameter sizes read from what clang-22 makes of CUDA and HIP sources: PTX for
//! NVIDIA, code objects for AMD. The compiles need no CUDA or ROCm installation (no headers,
//! no device libraries), only clang.

use std::path::{Path, PathBuf};
use std::process::Command;

use offload_format::image::{amdgpu, ptx};
use offload_format::offload_binary::{KernelParams, encode_kernel_params, parse_kernel_params};
use offload_toolchain::Tool;

/// Kernels of every parameter kind: pointers, scalars of each width, structs by value (16
/// bytes aligned to 8, 3 bytes aligned to 1), an `extern "C"` name, C++ mangled names (a
/// plain function, a template in a namespace), none at all.
const SOURCE: &str = r#"
#define __global__ __attribute__((global))
struct S { double a; float b; int c; };
struct P { char c[3]; };
extern "C" __global__ void scale(float *x, float a, int n, double d, S s, char c, short h,
                                 long long q, P p, const float *__restrict__ y) {
    if (n > 0) x[0] = a * d + s.a + s.b + s.c + c + h + q + p.c[1] + y[0];
}
__global__ void scale_cpp(float *x, float a, int n) { if (n) x[0] *= a; }
namespace ns {
template <typename T> __global__ void fill(T *x, T v) { x[0] = v; }
template __global__ void fill<double>(double *, double);
}
extern "C" __global__ void noargs() {}
"#;

fn expected() -> Vec<KernelParams> {
    let k = |kernel: &str, sizes: &[u32]| KernelParams {
        kernel: kernel.to_owned(),
        sizes: sizes.to_vec(),
    };
    vec![
        k("scale", &[8, 4, 4, 8, 16, 1, 2, 8, 3, 8]),
        k("_Z9scale_cppPffi", &[8, 4, 4]),
        k("_ZN2ns4fillIdEEvPT_S1_", &[8, 8]),
        k("noargs", &[]),
    ]
}

/// Compiles `source` (written to `dir/name`) with clang and `args`; the output's bytes.
fn compile(clang: &Path, dir: &Path, name: &str, source: &str, args: &[&str]) -> Vec<u8> {
    let input = dir.join(name);
    std::fs::write(&input, source).unwrap();
    let output: PathBuf = dir.join(format!("{name}.out"));
    let out = Command::new(clang)
        .args(args)
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "clang {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(&output).unwrap()
}

/// `expected()` in any order: the compilers order kernels as they like.
fn assert_same_kernels(mut got: Vec<KernelParams>) {
    got.sort_by(|a, b| a.kernel.cmp(&b.kernel));
    let mut want = expected();
    want.sort_by(|a, b| a.kernel.cmp(&b.kernel));
    assert_eq!(got, want);
    // What the build stores reads back the same; mangled names need no escaping.
    assert_eq!(
        parse_kernel_params(&encode_kernel_params(&got)).unwrap(),
        got
    );
}

#[test]
fn ptx_params_of_a_cuda_source() {
    let Some(clang) = Tool::Clang.for_test() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ptx = compile(
        &clang,
        dir.path(),
        "k.cu",
        SOURCE,
        &[
            "-x",
            "cuda",
            "-nocudainc",
            "-nocudalib",
            "--cuda-device-only",
            "--offload-arch=sm_80",
            "-O3",
            "-S",
        ],
    );
    assert_same_kernels(ptx::kernel_params(&String::from_utf8(ptx).unwrap()));
}

#[cfg(feature = "llvm")]
#[test]
fn amd_params_of_a_hip_source() {
    let Some(clang) = Tool::Clang.for_test() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // A kernel reading its implicit arguments gets hidden ones in its metadata, which the
    // launch does not pass and the sizes leave out.
    let source = format!(
        "{SOURCE}\nextern \"C\" __global__ void hidden(float *x, int n) {{\n    \
         x[0] = n + *(const int *)__builtin_amdgcn_implicitarg_ptr();\n}}\n"
    );
    let object = compile(
        &clang,
        dir.path(),
        "k.hip",
        &source,
        &[
            "-x",
            "hip",
            "-nogpulib",
            "-nogpuinc",
            "--cuda-device-only",
            "--offload-arch=gfx90a",
            "--no-gpu-bundle-output",
            "-O3",
            "-c",
        ],
    );
    let info = amdgpu::inspect(&object).unwrap();
    let hidden = info.kernels.iter().find(|k| k.name == "hidden").unwrap();
    assert!(
        hidden
            .args
            .iter()
            .any(|a| a.value_kind.starts_with("hidden_")),
        "{hidden:?}"
    );
    let mut got = amdgpu::kernel_params(&object).unwrap();
    let at = got.iter().position(|k| k.kernel == "hidden").unwrap();
    assert_eq!(got.remove(at).sizes, [8, 4]);
    assert_same_kernels(got);
}

#[cfg(feature = "llvm")]
#[test]
fn amd_params_of_what_is_not_a_code_object() {
    assert!(amdgpu::kernel_params(b"").is_err());
    assert!(amdgpu::kernel_params(b"\x7fELF\x02\x01\x01").is_err());
}
