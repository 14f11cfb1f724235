//! cuBLAS and cuBLASLt, the references the GEMM is timed against on a CUDA device, loaded at run
//! time as the runtime loads the driver, each with a handle on the device's context (current on
//! this thread: the runtime made it so when it opened the device). Row-major `C = A·B` is
//! column-major `Cᵀ = Bᵀ·Aᵀ`: the libraries get B's buffer first.

use std::ffi::{c_int, c_void};

use offload_rt::{Device, DeviceBuffer, DevicePtr};

pub const CUDA_R_16F: c_int = 2;
pub const CUDA_R_16BF: c_int = 14;
const CUDA_R_32F: c_int = 0;
const CUBLAS_COMPUTE_32F: c_int = 68;
const CUBLAS_GEMM_DEFAULT: c_int = -1;
const CUBLAS_OP_N: c_int = 0;
const CUBLAS_OP_T: c_int = 1;
/// `cublasLtMatmulDescAttributes_t`'s `CUBLASLT_MATMUL_DESC_TRANSA`.
const CUBLASLT_MATMUL_DESC_TRANSA: c_int = 3;
/// `cublasLtMatmulPreferenceAttributes_t`'s `CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES`.
const CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: c_int = 1;
/// The workspace cuBLASLt may use: 32 MiB, what NVIDIA recommends on Hopper.
const LT_WORKSPACE_BYTES: usize = 32 << 20;

/// The shared library of the first of `files` that loads.
fn load_library(files: &[&str]) -> Result<libloading::Library, String> {
    // SAFETY: loading a vendor library runs its initializers, which have no preconditions.
    files
        .iter()
        .find_map(|file| unsafe { libloading::Library::new(file) }.ok())
        .ok_or_else(|| format!("not installed (tried {})", files.join(", ")))
}

/// The address a library takes for device memory at `p`.
fn pointer(p: DevicePtr) -> *mut c_void {
    std::ptr::with_exposed_provenance_mut::<c_void>(p.0 as usize)
}

/// cuBLAS's `cublasGemmEx`.
pub struct Cublas {
    library: libloading::Library,
    handle: *mut c_void,
}

/// `cublasGemmEx`.
type GemmEx = unsafe extern "C" fn(
    *mut c_void,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    *const c_void,
    *const c_void,
    c_int,
    c_int,
    *const c_void,
    c_int,
    c_int,
    *const c_void,
    *mut c_void,
    c_int,
    c_int,
    c_int,
    c_int,
) -> c_int;

impl Cublas {
    pub fn load() -> Result<Cublas, String> {
        let library = load_library(&[
            "libcublas.so",
            "libcublas.so.13",
            "libcublas.so.12",
            "libcublas.so.11",
            "/usr/local/cuda/lib64/libcublas.so",
        ])?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: `cublasCreate_v2` takes a pointer to the handle it creates.
        let status = unsafe {
            symbol::<unsafe extern "C" fn(*mut *mut c_void) -> c_int>(&library, b"cublasCreate_v2")?(
                &raw mut handle,
            )
        };
        if status != 0 {
            return Err(format!("cublasCreate_v2 failed with status {status}"));
        }
        Ok(Cublas { library, handle })
    }

    /// Queues `C = A·B` (row-major `n`×`n`, inputs of cuBLAS's type `input`, `f32` output and
    /// accumulation) on the driver stream `stream`; `b` holds B, or Bᵀ where `b_transposed`
    /// (B column-major).
    ///
    /// # Safety
    /// `a`, `b` and `c` hold `n`×`n` elements of the handle's device and stay allocated until
    /// the stream has passed the product; `stream` is a live stream of it.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gemm_ex(
        &self,
        stream: *mut c_void,
        n: usize,
        input: c_int,
        b_transposed: bool,
        a: DevicePtr,
        b: DevicePtr,
        c: DevicePtr,
    ) -> Result<(), String> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        let n = n as c_int;
        let op_b = if b_transposed {
            CUBLAS_OP_T
        } else {
            CUBLAS_OP_N
        };
        // SAFETY: the functions have these signatures; the caller's contract covers the memory
        // and the stream; `alpha` and `beta` are host values of the compute type.
        unsafe {
            let set_stream = symbol::<unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int>(
                &self.library,
                b"cublasSetStream_v2",
            )?;
            if set_stream(self.handle, stream) != 0 {
                return Err("cublasSetStream_v2 failed".to_owned());
            }
            let gemm = symbol::<GemmEx>(&self.library, b"cublasGemmEx")?;
            let status = gemm(
                self.handle,
                op_b,
                CUBLAS_OP_N,
                n,
                n,
                n,
                (&raw const alpha).cast(),
                pointer(b),
                input,
                n,
                pointer(a),
                input,
                n,
                (&raw const beta).cast(),
                pointer(c),
                CUDA_R_32F,
                n,
                CUBLAS_COMPUTE_32F,
                CUBLAS_GEMM_DEFAULT,
            );
            match status {
                0 => Ok(()),
                code => Err(format!("status {code}")),
            }
        }
    }
}

impl Drop for Cublas {
    fn drop(&mut self) {
        // SAFETY: the handle was made by this library and is destroyed once.
        unsafe {
            if let Ok(destroy) = symbol::<unsafe extern "C" fn(*mut c_void) -> c_int>(
                &self.library,
                b"cublasDestroy_v2",
            ) {
                destroy(self.handle);
            }
        }
    }
}

/// `cublasLtMatmulHeuristicResult_t`.
#[repr(C)]
struct HeuristicResult {
    algo: [u64; 8],
    workspace_size: usize,
    state: c_int,
    waves_count: f32,
    reserved: [c_int; 4],
}

/// cuBLASLt's `cublasLtMatmul`, with the algorithm its heuristic picks first and a workspace.
pub struct CublasLt {
    library: libloading::Library,
    handle: *mut c_void,
    workspace: DeviceBuffer<u8>,
}

/// One product's descriptors and algorithm, made once and timed without them.
pub struct LtPlan<'lt> {
    lt: &'lt CublasLt,
    desc: *mut c_void,
    /// The layouts of the B buffer, the A buffer and C, in cuBLASLt's order (its A, B, C).
    layouts: [*mut c_void; 3],
    algo: [u64; 8],
    workspace_size: usize,
}

impl CublasLt {
    pub fn load(device: &Device) -> Result<CublasLt, String> {
        let library = load_library(&[
            "libcublasLt.so",
            "libcublasLt.so.13",
            "libcublasLt.so.12",
            "libcublasLt.so.11",
            "/usr/local/cuda/lib64/libcublasLt.so",
        ])?;
        let workspace = DeviceBuffer::<u8>::zeroed(device, LT_WORKSPACE_BYTES)
            .map_err(|e| format!("its workspace: {e}"))?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: `cublasLtCreate` takes a pointer to the handle it creates.
        let status = unsafe {
            symbol::<unsafe extern "C" fn(*mut *mut c_void) -> c_int>(&library, b"cublasLtCreate")?(
                &raw mut handle,
            )
        };
        if status != 0 {
            return Err(format!("cublasLtCreate failed with status {status}"));
        }
        Ok(CublasLt {
            library,
            handle,
            workspace,
        })
    }

    /// The plan of `C = A·B` as [`Cublas::gemm_ex`] computes it: descriptors, layouts and the
    /// heuristic's first algorithm.
    pub fn plan(&self, n: usize, input: c_int, b_transposed: bool) -> Result<LtPlan<'_>, String> {
        type Create = unsafe extern "C" fn(*mut *mut c_void, c_int, c_int) -> c_int;
        type SetAttribute = unsafe extern "C" fn(*mut c_void, c_int, *const c_void, usize) -> c_int;
        type LayoutCreate = unsafe extern "C" fn(*mut *mut c_void, c_int, u64, u64, i64) -> c_int;
        type PreferenceCreate = unsafe extern "C" fn(*mut *mut c_void) -> c_int;
        type Destroy = unsafe extern "C" fn(*mut c_void) -> c_int;
        type Heuristic = unsafe extern "C" fn(
            *mut c_void,
            *mut c_void,
            *mut c_void,
            *mut c_void,
            *mut c_void,
            *mut c_void,
            *mut c_void,
            c_int,
            *mut HeuristicResult,
            *mut c_int,
        ) -> c_int;
        let check = |what: &str, status: c_int| match status {
            0 => Ok(()),
            code => Err(format!("{what} failed with status {code}")),
        };
        let mut plan = LtPlan {
            lt: self,
            desc: std::ptr::null_mut(),
            layouts: [std::ptr::null_mut(); 3],
            algo: [0; 8],
            workspace_size: 0,
        };
        // SAFETY: the functions have these signatures (cublasLt.h); every out-pointer is a
        // live local or field; attribute buffers are host values of the attribute's type; the
        // plan's Drop destroys what was created, also on an early return.
        unsafe {
            let create = symbol::<Create>(&self.library, b"cublasLtMatmulDescCreate")?;
            check(
                "cublasLtMatmulDescCreate",
                create(&raw mut plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            )?;
            let op: c_int = if b_transposed {
                CUBLAS_OP_T
            } else {
                CUBLAS_OP_N
            };
            let set = symbol::<SetAttribute>(&self.library, b"cublasLtMatmulDescSetAttribute")?;
            check(
                "cublasLtMatmulDescSetAttribute",
                set(
                    plan.desc,
                    CUBLASLT_MATMUL_DESC_TRANSA,
                    (&raw const op).cast(),
                    size_of::<c_int>(),
                ),
            )?;
            let layout = symbol::<LayoutCreate>(&self.library, b"cublasLtMatrixLayoutCreate")?;
            let n64 = n as u64;
            for (slot, ty) in plan.layouts.iter_mut().zip([input, input, CUDA_R_32F]) {
                check(
                    "cublasLtMatrixLayoutCreate",
                    layout(slot, ty, n64, n64, n as i64),
                )?;
            }
            let mut preference = std::ptr::null_mut();
            let pref_create =
                symbol::<PreferenceCreate>(&self.library, b"cublasLtMatmulPreferenceCreate")?;
            check(
                "cublasLtMatmulPreferenceCreate",
                pref_create(&raw mut preference),
            )?;
            let pref_destroy =
                symbol::<Destroy>(&self.library, b"cublasLtMatmulPreferenceDestroy")?;
            let limit = LT_WORKSPACE_BYTES as u64;
            let pref_set =
                symbol::<SetAttribute>(&self.library, b"cublasLtMatmulPreferenceSetAttribute")?;
            let mut result = std::mem::zeroed::<HeuristicResult>();
            let mut found: c_int = 0;
            let heuristic = symbol::<Heuristic>(&self.library, b"cublasLtMatmulAlgoGetHeuristic")?;
            let status = match pref_set(
                preference,
                CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&raw const limit).cast(),
                size_of::<u64>(),
            ) {
                0 => heuristic(
                    self.handle,
                    plan.desc,
                    plan.layouts[0],
                    plan.layouts[1],
                    plan.layouts[2],
                    plan.layouts[2],
                    preference,
                    1,
                    &raw mut result,
                    &raw mut found,
                ),
                code => code,
            };
            pref_destroy(preference);
            check("cublasLtMatmulAlgoGetHeuristic", status)?;
            if found < 1 || result.state != 0 {
                return Err(format!(
                    "cublasLtMatmulAlgoGetHeuristic found no algorithm (state {})",
                    result.state
                ));
            }
            plan.algo = result.algo;
            plan.workspace_size = result.workspace_size;
        }
        Ok(plan)
    }
}

impl LtPlan<'_> {
    /// Queues the product on the driver stream `stream`, `b` holding B (or Bᵀ, as planned).
    ///
    /// # Safety
    /// As [`Cublas::gemm_ex`]'s, for the plan's `n`.
    pub unsafe fn run(
        &self,
        stream: *mut c_void,
        a: DevicePtr,
        b: DevicePtr,
        c: DevicePtr,
    ) -> Result<(), String> {
        type Matmul = unsafe extern "C" fn(
            *mut c_void,
            *mut c_void,
            *const c_void,
            *const c_void,
            *mut c_void,
            *const c_void,
            *mut c_void,
            *const c_void,
            *const c_void,
            *mut c_void,
            *mut c_void,
            *mut c_void,
            *const [u64; 8],
            *mut c_void,
            usize,
            *mut c_void,
        ) -> c_int;
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: `cublasLtMatmul` has this signature; the caller's contract covers the memory
        // and the stream; the workspace is the handle's device memory of at least the size the
        // algorithm asked for (the heuristic was limited to it).
        unsafe {
            let matmul = symbol::<Matmul>(&self.lt.library, b"cublasLtMatmul")?;
            let status = matmul(
                self.lt.handle,
                self.desc,
                (&raw const alpha).cast(),
                pointer(b),
                self.layouts[0],
                pointer(a),
                self.layouts[1],
                (&raw const beta).cast(),
                pointer(c),
                self.layouts[2],
                pointer(c),
                self.layouts[2],
                &raw const self.algo,
                pointer(self.lt.workspace.device_ptr()),
                self.workspace_size,
                stream,
            );
            match status {
                0 => Ok(()),
                code => Err(format!("cublasLtMatmul: status {code}")),
            }
        }
    }
}

impl Drop for LtPlan<'_> {
    fn drop(&mut self) {
        // SAFETY: each descriptor was made by this library (or is null, and skipped) and is
        // destroyed once.
        unsafe {
            type Destroy = unsafe extern "C" fn(*mut c_void) -> c_int;
            if let Ok(destroy) = symbol::<Destroy>(&self.lt.library, b"cublasLtMatrixLayoutDestroy")
            {
                for layout in self.layouts.into_iter().filter(|l| !l.is_null()) {
                    destroy(layout);
                }
            }
            if let Ok(destroy) = symbol::<Destroy>(&self.lt.library, b"cublasLtMatmulDescDestroy")
                && !self.desc.is_null()
            {
                destroy(self.desc);
            }
        }
    }
}

impl Drop for CublasLt {
    fn drop(&mut self) {
        // SAFETY: the handle was made by this library and is destroyed once.
        unsafe {
            if let Ok(destroy) = symbol::<unsafe extern "C" fn(*mut c_void) -> c_int>(
                &self.library,
                b"cublasLtDestroy",
            ) {
                destroy(self.handle);
            }
        }
    }
}

/// The function `name` of `library`, of type `F`.
///
/// # Safety
/// `F` is the function's type.
unsafe fn symbol<F: Copy>(library: &libloading::Library, name: &[u8]) -> Result<F, String> {
    // SAFETY: the caller's contract.
    unsafe { library.get::<F>(name) }
        .map(|f| *f)
        .map_err(|e| e.to_string())
}
