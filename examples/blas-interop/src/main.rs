//! A BLAS library and a typed kernel on one stream: `C = A·B` by cuBLAS (a CUDA device) or
//! rocBLAS (a HIP device), each loaded at run time, then the kernel `bias_relu` on `C`, queued
//! after the product on the same driver stream (`Device::raw_stream`), checked against the
//! host. On the CPU device, which has neither library, the host computes `C` into memory of its
//! own that the kernel then reads and writes as a buffer (`DeviceBuffer::from_raw_parts`).
//!
//! `cargo offload run -p blas-interop`; `OFFLOAD_DEVICE=cpu|cuda:0|hip:0` picks the device.

use std::ffi::{c_int, c_void};
use std::process::ExitCode;

use offload_rt::{Device, DeviceBuffer, DevicePtr, LaunchConfig, RawDevice};

/// `C` is `M`×`N`, `A` is `M`×`K`, `B` is `K`×`N`, all column-major, as BLAS takes them.
const M: usize = 256;
const N: usize = 192;
const K: usize = 128;
const BIAS: f32 = -4.0;

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<bool, Box<dyn std::error::Error>> {
    let a: Vec<f32> = (0..M * K)
        .map(|i| ((i * 7) % 13) as f32 * 0.25 - 1.5)
        .collect();
    let b: Vec<f32> = (0..K * N)
        .map(|i| ((i * 5) % 11) as f32 * 0.125 - 0.5)
        .collect();
    let want: Vec<f32> = host_gemm(&a, &b)
        .into_iter()
        .map(|v| (v + BIAS).max(0.0))
        .collect();

    let device = Device::best()?;
    let stream = device.stream()?;
    let on_stream = stream.device();
    let config = LaunchConfig::for_num_elems((M * N) as u32);
    let got = match device.raw() {
        raw @ (RawDevice::Cuda { .. } | RawDevice::Hip { .. }) => {
            let blas = Blas::load(raw)?;
            println!(
                "device: {} (the product by {})",
                device.describe(),
                blas.name
            );
            let da = DeviceBuffer::from_slice(&device, &a)?;
            let db = DeviceBuffer::from_slice(&device, &b)?;
            let mut dc = DeviceBuffer::<f32>::zeroed(&device, M * N)?;
            // SAFETY: the buffers hold M×K, K×N and M×N floats of this device and live until
            // the stream has passed the product (synchronized below).
            unsafe {
                blas.sgemm(
                    on_stream.raw_stream(),
                    da.device_ptr(),
                    db.device_ptr(),
                    dc.device_ptr(),
                )?
            };
            let report =
                blas_interop_kernels::bias_relu.launch(on_stream, config, BIAS, &mut dc)?;
            println!("image: {report}");
            stream.synchronize()?;
            dc.to_vec()?
        }
        _ => {
            println!("device: {} (the product by the host)", device.describe());
            let mut c = host_gemm(&a, &b);
            {
                // The CPU device's device addresses are host addresses.
                let address = DevicePtr(c.as_mut_ptr().expose_provenance() as u64);
                // SAFETY: `c` holds M×N floats, outlives the buffer, and nothing else touches
                // it while the buffer is in use.
                let mut dc =
                    unsafe { DeviceBuffer::<f32>::from_raw_parts(on_stream, address, M * N) };
                let report =
                    blas_interop_kernels::bias_relu.launch(on_stream, config, BIAS, &mut dc)?;
                println!("image: {report}");
                stream.synchronize()?;
            }
            c
        }
    };

    // The products are sums of K terms, added in another order by each library.
    let wrong = got
        .iter()
        .zip(&want)
        .filter(|(g, w)| (*g - *w).abs() > 1e-3 * (1.0 + w.abs()))
        .count();
    if wrong > 0 {
        println!("blas-interop: {wrong} of {} results wrong", M * N);
        return Ok(false);
    }
    println!("blas-interop: C = max(A·B {BIAS:+}, 0), {M}×{N} from {K} terms each: OK");
    Ok(true)
}

/// `A·B`, column-major, on the host.
fn host_gemm(a: &[f32], b: &[f32]) -> Vec<f32> {
    let mut c = vec![0.0f32; M * N];
    for j in 0..N {
        for p in 0..K {
            let bpj = b[p + j * K];
            for i in 0..M {
                c[i + j * M] += a[i + p * M] * bpj;
            }
        }
    }
    c
}

/// The device's BLAS library, loaded at run time as the runtime loads the drivers, and a
/// handle of it.
struct Blas {
    name: &'static str,
    api: Api,
    library: libloading::Library,
    handle: *mut c_void,
}

#[derive(Clone, Copy)]
enum Api {
    Cublas,
    Rocblas,
}

/// `cublasSgemm_v2` and `rocblas_sgemm` have one signature but for their enums' values.
type Sgemm = unsafe extern "C" fn(
    *mut c_void,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    *const f32,
    *const f32,
    c_int,
    *const f32,
    c_int,
    *const f32,
    *mut f32,
    c_int,
) -> c_int;

impl Blas {
    /// cuBLAS for a CUDA device, rocBLAS for a HIP one, with a handle made in the device's
    /// context (current on this thread: the runtime made it so when it opened the device).
    fn load(device: RawDevice) -> Result<Blas, String> {
        let (name, api, files): (_, _, &[&str]) = match device {
            RawDevice::Hip { .. } => (
                "rocBLAS",
                Api::Rocblas,
                &[
                    "librocblas.so",
                    "librocblas.so.4",
                    "/opt/rocm/lib/librocblas.so",
                ],
            ),
            _ => (
                "cuBLAS",
                Api::Cublas,
                &[
                    "libcublas.so",
                    "libcublas.so.13",
                    "libcublas.so.12",
                    "libcublas.so.11",
                    "/usr/local/cuda/lib64/libcublas.so",
                ],
            ),
        };
        // SAFETY: loading a vendor library runs its initializers, which have no preconditions.
        let library = files
            .iter()
            .find_map(|file| unsafe { libloading::Library::new(file) }.ok())
            .ok_or_else(|| format!("{name} is not installed (tried {})", files.join(", ")))?;
        let create = match api {
            Api::Cublas => "cublasCreate_v2",
            Api::Rocblas => "rocblas_create_handle",
        };
        let mut handle = std::ptr::null_mut();
        // SAFETY: both take a pointer to the handle they create and return a status.
        let status = unsafe {
            let create = library
                .get::<unsafe extern "C" fn(*mut *mut c_void) -> c_int>(create.as_bytes())
                .map_err(|e| format!("{name}: {e}"))?;
            create(&raw mut handle)
        };
        check(name, "creating a handle", status)?;
        Ok(Blas {
            name,
            api,
            library,
            handle,
        })
    }

    /// Queues `C = A·B` (column-major, `M`×`N` from `K`) on the driver stream `stream`.
    ///
    /// # Safety
    /// `a`, `b` and `c` hold `M`×`K`, `K`×`N` and `M`×`N` floats of the handle's device and
    /// stay allocated until the stream has passed the product; `stream` is a live stream of it.
    unsafe fn sgemm(
        &self,
        stream: *mut c_void,
        a: DevicePtr,
        b: DevicePtr,
        c: DevicePtr,
    ) -> Result<(), String> {
        let (set_stream, sgemm, no_transpose) = match self.api {
            Api::Cublas => ("cublasSetStream_v2", "cublasSgemm_v2", 0),
            Api::Rocblas => ("rocblas_set_stream", "rocblas_sgemm", 111),
        };
        let (alpha, beta) = (1.0f32, 0.0f32);
        let pointer = |p: DevicePtr| std::ptr::with_exposed_provenance::<f32>(p.0 as usize);
        // SAFETY: the functions have these signatures; the caller's contract covers the
        // memory and the stream; `alpha` and `beta` are host values, the libraries' default.
        unsafe {
            let set_stream = self
                .library
                .get::<unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int>(
                    set_stream.as_bytes(),
                )
                .map_err(|e| format!("{}: {e}", self.name))?;
            check(
                self.name,
                "setting the stream",
                set_stream(self.handle, stream),
            )?;
            let sgemm = self
                .library
                .get::<Sgemm>(sgemm.as_bytes())
                .map_err(|e| format!("{}: {e}", self.name))?;
            let status = sgemm(
                self.handle,
                no_transpose,
                no_transpose,
                M as c_int,
                N as c_int,
                K as c_int,
                &alpha,
                pointer(a),
                M as c_int,
                pointer(b),
                K as c_int,
                &beta,
                pointer(c).cast_mut(),
                M as c_int,
            );
            check(self.name, "SGEMM", status)
        }
    }
}

impl Drop for Blas {
    fn drop(&mut self) {
        let destroy = match self.api {
            Api::Cublas => "cublasDestroy_v2",
            Api::Rocblas => "rocblas_destroy_handle",
        };
        // SAFETY: the handle was made by this library and is destroyed once.
        unsafe {
            if let Ok(destroy) = self
                .library
                .get::<unsafe extern "C" fn(*mut c_void) -> c_int>(destroy.as_bytes())
            {
                destroy(self.handle);
            }
        }
    }
}

/// A BLAS status (0: success) as a result.
fn check(library: &str, what: &str, status: c_int) -> Result<(), String> {
    match status {
        0 => Ok(()),
        code => Err(format!("{library}: {what} failed with status {code}")),
    }
}
