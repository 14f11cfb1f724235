//! The GPUs of this machine as offload architectures: what `--offload-arch native` builds
//! for, found as clang's `--offload-arch=native` finds them (its `offload-arch` tool asks the
//! CUDA and HIP runtimes), through the same drivers the runtime loads.

use super::{cuda, hip};

/// What [`native_archs`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NativeArchs {
    /// Each architecture once, in device order: every CUDA device's `sm_XX` (from its compute
    /// capability), then every HIP device's full target ID (its `gcnArchName`,
    /// `gfx90a:sramecc+:xnack-`).
    pub archs: Vec<String>,
    /// For each driver that gave no device, why (`CUDA unavailable: …`).
    pub unavailable: Vec<String>,
}

/// Probes the CUDA and HIP drivers (loaded at run time, as for launches; `OFFLOAD_CUDA_LIBRARY`
/// and `OFFLOAD_HIP_LIBRARY` name others) for their devices' architectures. A missing
/// driver or GPU is no error: it gives no architecture and a reason.
pub fn native_archs() -> NativeArchs {
    let mut found = NativeArchs::default();
    let mut add = |arch: String| {
        if !found.archs.contains(&arch) {
            found.archs.push(arch);
        }
    };
    let mut unavailable = Vec::new();
    match cuda::probe() {
        Ok(devices) => devices.iter().for_each(|d| add(d.arch())),
        Err(e) => unavailable.push(e.to_string()),
    }
    match hip::probe() {
        Ok(devices) => devices.into_iter().for_each(|d| add(d.target_id)),
        Err(e) => unavailable.push(e.to_string()),
    }
    found.unavailable = unavailable;
    found
}
