//! Device families: what sets the host CPU, NVIDIA GPUs and AMD GPUs apart as offload
//! targets, in one type.
//!
//! The build's architectures (`offload_build::OffloadArch`, whose `sm_NN` is a [`Sm`] and
//! whose AMD target is an [`AmdTargetId`]), the runtime's device kinds and driver APIs and
//! image selection (`offload_rt::DeviceKind`) each map onto a [`DeviceFamily`] with an
//! exhaustive `match`, and ask it for the facts below instead of matching triples or names
//! again. A new family starts as one new variant here; the compiler then names every place
//! that has to learn it.
//!
//! [`Sm`]: crate::Sm
//! [`AmdTargetId`]: crate::AmdTargetId

use std::fmt;

use crate::offload_binary::OffloadKind;
use crate::triple::{AMDGCN_TRIPLE, NVPTX_TRIPLE};

/// A family of offload devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceFamily {
    /// NVIDIA GPUs: `nvptx64-nvidia-cuda`, architectures `sm_NN`, PTX and cubin images, the
    /// CUDA driver API.
    Nvidia,
    /// AMD GPUs: `amdgcn-amd-amdhsa`, target IDs (`gfx942:xnack+`), code objects, HIP.
    Amd,
    /// The host CPU as a device: images are shared objects for the host's own triple.
    Cpu,
}

impl DeviceFamily {
    /// Every family, in the order clang lists offload kinds (`cuda`, `hip`, `openmp`).
    pub const ALL: [DeviceFamily; 3] = [DeviceFamily::Nvidia, DeviceFamily::Amd, DeviceFamily::Cpu];

    /// The GPU families, in the order a program probes their drivers.
    pub const GPUS: [DeviceFamily; 2] = [DeviceFamily::Nvidia, DeviceFamily::Amd];

    /// The triple every image of a GPU family is built for; `None` for the CPU, whose
    /// images are for the host's own triple.
    pub const fn device_triple(self) -> Option<&'static str> {
        match self {
            DeviceFamily::Nvidia => Some(NVPTX_TRIPLE),
            DeviceFamily::Amd => Some(AMDGCN_TRIPLE),
            DeviceFamily::Cpu => None,
        }
    }

    /// The family of an image built for `triple`: a GPU family's triple gives that family,
    /// any other triple is a CPU's.
    pub fn of_triple(triple: &str) -> DeviceFamily {
        DeviceFamily::GPUS
            .into_iter()
            .find(|family| family.device_triple() == Some(triple))
            .unwrap_or(DeviceFamily::Cpu)
    }

    /// The family of a target triple as LLVM, rustc or a tool spells it, by its architecture:
    /// `nvptx`/`nvptx64` NVIDIA, `amdgcn` AMD, any other a CPU's. Unlike [`of_triple`], any
    /// triple of a family counts (an LLVM module's, a foreign image's), not only its device
    /// triple.
    ///
    /// [`of_triple`]: DeviceFamily::of_triple
    pub fn of_target_triple(triple: &str) -> DeviceFamily {
        if triple.starts_with("nvptx") {
            DeviceFamily::Nvidia
        } else if triple.starts_with("amdgcn") {
            DeviceFamily::Amd
        } else {
            DeviceFamily::Cpu
        }
    }

    /// The GPU family whose architectures are named like `name`: `sm_…` NVIDIA, `gfx…` AMD
    /// (a target ID); `None` for any other name. Only the family: the name itself is checked
    /// by [`Sm`](crate::Sm) or [`AmdTargetId`](crate::AmdTargetId).
    pub fn of_gpu_arch_name(name: &str) -> Option<DeviceFamily> {
        if name.starts_with("sm_") {
            Some(DeviceFamily::Nvidia)
        } else if name.starts_with("gfx") {
            Some(DeviceFamily::Amd)
        } else {
            None
        }
    }

    /// Whether the family is a GPU's.
    pub const fn is_gpu(self) -> bool {
        self.device_triple().is_some()
    }

    /// The offload kind of the family's images, as their OffloadBinaries record it and
    /// clang names it: `cuda`, `hip`, and `openmp` for the CPU device (clang's host offload).
    pub const fn offload_kind(self) -> OffloadKind {
        match self {
            DeviceFamily::Nvidia => OffloadKind::Cuda,
            DeviceFamily::Amd => OffloadKind::Hip,
            DeviceFamily::Cpu => OffloadKind::OpenMp,
        }
    }

    /// The runtime's name for devices of the family: `cuda`, `hip`, `cpu`, as
    /// `OFFLOAD_DEVICE=cuda:0` and device descriptions write them.
    pub const fn runtime_name(self) -> &'static str {
        match self {
            DeviceFamily::Nvidia => "cuda",
            DeviceFamily::Amd => "hip",
            DeviceFamily::Cpu => "cpu",
        }
    }

    /// The driver API that runs the family's devices, as messages name it (`CUDA`, `HIP`);
    /// `None` for the CPU, which needs no driver.
    pub const fn driver_api(self) -> Option<&'static str> {
        match self {
            DeviceFamily::Nvidia => Some("CUDA"),
            DeviceFamily::Amd => Some("HIP"),
            DeviceFamily::Cpu => None,
        }
    }

    /// The `-Ctarget-cpu` of a GPU family's nested build: one fixed processor per triple, so
    /// that a single build (and one `core`) serves every architecture of the triple and
    /// cargo's fingerprints stay the same whichever architectures are asked for. The device
    /// link then re-targets the bitcode to each image's processor. `None` for the CPU, built
    /// for the host's own processor.
    pub const fn baseline_cpu(self) -> Option<&'static str> {
        match self {
            DeviceFamily::Nvidia => Some("sm_70"),
            DeviceFamily::Amd => Some("gfx90a"),
            DeviceFamily::Cpu => None,
        }
    }

    /// The vendor's name, as messages name the family's devices.
    pub const fn vendor(self) -> &'static str {
        match self {
            DeviceFamily::Nvidia => "NVIDIA",
            DeviceFamily::Amd => "AMD",
            DeviceFamily::Cpu => "host CPU",
        }
    }
}

impl fmt::Display for DeviceFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.vendor())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_triple_names_its_family_back() {
        for family in DeviceFamily::ALL {
            let triple = family.device_triple().unwrap_or("x86_64-unknown-linux-gnu");
            assert_eq!(DeviceFamily::of_triple(triple), family);
            assert_eq!(family.is_gpu(), family.driver_api().is_some());
            assert_eq!(family.is_gpu(), family.baseline_cpu().is_some());
        }
        assert_eq!(
            DeviceFamily::of_triple("aarch64-unknown-linux-gnu"),
            DeviceFamily::Cpu
        );
    }

    #[test]
    fn target_triples_and_arch_names_name_their_family() {
        for family in DeviceFamily::GPUS {
            let triple = family.device_triple().unwrap();
            assert_eq!(DeviceFamily::of_target_triple(triple), family);
            let baseline = family.baseline_cpu().unwrap();
            assert_eq!(DeviceFamily::of_gpu_arch_name(baseline), Some(family));
        }
        assert_eq!(
            DeviceFamily::of_target_triple("nvptx-nvidia-cuda"),
            DeviceFamily::Nvidia
        );
        assert_eq!(
            DeviceFamily::of_target_triple("x86_64-unknown-linux-gnu"),
            DeviceFamily::Cpu
        );
        assert_eq!(
            DeviceFamily::of_gpu_arch_name("gfx942:xnack+"),
            Some(DeviceFamily::Amd)
        );
        assert_eq!(
            DeviceFamily::of_gpu_arch_name("sm_90a"),
            Some(DeviceFamily::Nvidia)
        );
        for other in ["host", "x86-64-v3", "native", "smx", ""] {
            assert_eq!(DeviceFamily::of_gpu_arch_name(other), None, "{other}");
        }
    }

    #[test]
    fn offload_kinds_are_distinct_and_in_clangs_order() {
        let kinds: Vec<u16> = DeviceFamily::ALL
            .iter()
            .map(|f| f.offload_kind().to_u16())
            .collect();
        assert_eq!(kinds, [2, 4, 1]);
    }
}
