//! Image selection: which of a module's registered images runs on a device.
//!
//! A pure function of the device's description and the images' (triple, arch, kind), shared
//! by every backend:
//!
//! - **NVIDIA** (`nvptx64-nvidia-cuda`): a cubin of the device's own major compute capability
//!   with minor at most the device's (the highest such minor; an arch-specific `sm_90a` cubin
//!   only on exactly `sm_90`); else a fat binary under the same rule; else the PTX of the
//!   highest compute capability at most the device's, compiled by the driver's JIT; else any
//!   fat binary, for the driver to search.
//! - **AMD** (`amdgcn-amd-amdhsa`): the code object whose target ID is the device's exactly
//!   (after canonicalization), else the most specific one compatible with it by clang's rules
//!   (`offload_format::TargetId::is_compatible`).
//! - **Host** (`arch` = `host`): the object whose triple is the host's.
//!
//! When nothing fits, the error lists what the binary carries and what the device is.

use std::fmt;

use offload_format::{DeviceFamily, ImageKind};

use offload_format::target_id::{Sm, SmSuffix};
pub(crate) use offload_format::triple::HOST_ARCH;

/// What selection needs to know about a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceTarget<'a> {
    /// An NVIDIA GPU of compute capability (major, minor).
    Cuda {
        /// Major compute capability (9 for `sm_90`).
        major: u32,
        /// Minor compute capability.
        minor: u32,
    },
    /// An AMD GPU with its full target ID, as HIP reports it in `gcnArchName`
    /// (`gfx90a:sramecc+:xnack-`).
    Amd {
        /// The device's target ID.
        target_id: &'a str,
    },
    /// The host CPU as a device.
    Host {
        /// The host's target triple (`x86_64-unknown-linux-gnu`).
        triple: &'a str,
    },
}

impl DeviceTarget<'_> {
    /// The device's family.
    pub fn family(&self) -> DeviceFamily {
        match self {
            Self::Cuda { .. } => DeviceFamily::Nvidia,
            Self::Amd { .. } => DeviceFamily::Amd,
            Self::Host { .. } => DeviceFamily::Cpu,
        }
    }
}

impl fmt::Display for DeviceTarget<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cuda { major, minor } => write!(
                f,
                "an NVIDIA GPU of compute capability {major}.{minor} (sm_{major}{minor})"
            ),
            Self::Amd { target_id } => write!(f, "an AMD GPU {target_id}"),
            Self::Host { triple } => write!(f, "the host CPU ({triple})"),
        }
    }
}

/// What selection needs to know about an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageDescriptor<'a> {
    /// The image's `triple` string.
    pub triple: &'a str,
    /// The image's `arch` string.
    pub arch: &'a str,
    /// What the image is.
    pub kind: ImageKind,
}

impl fmt::Display for ImageDescriptor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} ({})",
            self.triple,
            if self.arch.is_empty() {
                "<no arch>"
            } else {
                self.arch
            },
            self.kind.name()
        )
    }
}

/// How the chosen image fits the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// A cubin for the device's architecture family (same major, minor at most the device's).
    Cubin,
    /// A fat binary for the device's architecture family.
    Fatbin,
    /// PTX of a compute capability at most the device's, to be compiled by the driver.
    PtxJit,
    /// A fat binary of another architecture; the driver looks for a fitting image or PTX in it.
    FatbinSearch,
    /// A code object whose target ID is exactly the device's.
    ExactTargetId,
    /// A code object whose target ID is compatible with the device's.
    CompatibleTargetId,
    /// A host-CPU image.
    Host,
}

/// The chosen image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selection {
    /// Index into the image list given.
    pub index: usize,
    /// How it fits.
    pub fit: Fit,
}

/// No image fits the device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no image runs on {device}; the binary carries {}", carried_list(.carried))]
pub struct NoCompatibleImage {
    /// The device, described.
    pub device: String,
    /// Every image given, described (`nvptx64-nvidia-cuda sm_80 (cubin)`).
    pub carried: Vec<String>,
}

fn carried_list(carried: &[String]) -> String {
    if carried.is_empty() {
        "no images".to_owned()
    } else {
        carried.join(", ")
    }
}

/// Decides AMD target-ID compatibility: `(image target ID, device target ID)` → whether the
/// image runs on the device, and whether the two are the same target ID.
pub(crate) trait TargetIdRules {
    /// Whether a code object built for `image` runs on a device whose target ID is `device`.
    fn is_compatible(&self, image: &str, device: &str) -> bool;
    /// Whether the two name the same target ID (features in any order).
    fn is_same(&self, image: &str, device: &str) -> bool;
    /// How many features the target ID names (a more specific image is preferred).
    fn feature_count(&self, target_id: &str) -> usize;
}

/// Clang's rules, from `offload_format::TargetId`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ClangTargetIdRules;

impl TargetIdRules for ClangTargetIdRules {
    fn is_compatible(&self, image: &str, device: &str) -> bool {
        offload_target_id::is_compatible(image, device)
    }
    fn is_same(&self, image: &str, device: &str) -> bool {
        offload_target_id::is_same(image, device)
    }
    fn feature_count(&self, target_id: &str) -> usize {
        offload_target_id::feature_count(target_id)
    }
}

/// The bridge to the format crate's target-ID rules.
mod offload_target_id {
    use offload_format::TargetId;

    pub(super) fn is_compatible(image: &str, device: &str) -> bool {
        match (TargetId::parse(image), TargetId::parse(device)) {
            (Ok(i), Ok(d)) => TargetId::is_compatible(&i, &d),
            _ => false,
        }
    }

    pub(super) fn is_same(image: &str, device: &str) -> bool {
        match (TargetId::parse(image), TargetId::parse(device)) {
            (Ok(i), Ok(d)) => i.canonical() == d.canonical(),
            _ => image == device,
        }
    }

    pub(super) fn feature_count(target_id: &str) -> usize {
        TargetId::parse(target_id).map_or(0, |t| t.features().len())
    }
}

/// Whether code for `arch` (major, minor, suffix) runs natively on a device of
/// compute capability `dev`: same major, minor at most the device's; `a` (arch-specific)
/// needs the exact capability.
fn sm_runs_on(arch: Sm, dev: (u32, u32)) -> bool {
    let (major, minor) = (arch.major(), arch.minor());
    match arch.suffix() {
        Some(SmSuffix::ArchSpecific) => (major, minor) == dev,
        _ => major == dev.0 && minor <= dev.1,
    }
}

/// Chooses the image for `device` among `images` with clang's target-ID rules.
///
/// # Errors
/// [`NoCompatibleImage`] listing what the images are and what the device is.
pub fn select_image(
    device: &DeviceTarget<'_>,
    images: &[ImageDescriptor<'_>],
) -> Result<Selection, NoCompatibleImage> {
    select_image_with(device, images, &ClangTargetIdRules)
}

/// [`select_image`] with the AMD target-ID rules given.
///
/// # Errors
/// [`NoCompatibleImage`] listing what the images are and what the device is.
pub(crate) fn select_image_with(
    device: &DeviceTarget<'_>,
    images: &[ImageDescriptor<'_>],
    rules: &dyn TargetIdRules,
) -> Result<Selection, NoCompatibleImage> {
    let found = match *device {
        DeviceTarget::Cuda { major, minor } => select_cuda((major, minor), images),
        DeviceTarget::Amd { target_id } => select_amd(target_id, images, rules),
        DeviceTarget::Host { triple } => images
            .iter()
            .position(|i| i.triple == triple && i.arch == HOST_ARCH && i.kind == ImageKind::Object)
            .map(|index| Selection {
                index,
                fit: Fit::Host,
            }),
    };
    found.ok_or_else(|| NoCompatibleImage {
        device: device.to_string(),
        carried: images.iter().map(ToString::to_string).collect(),
    })
}

fn select_cuda(dev: (u32, u32), images: &[ImageDescriptor<'_>]) -> Option<Selection> {
    // (tier, then higher is better: minor, arch-specific) → best; ties keep the first image.
    let mut best: Option<((u8, u32, u32, bool), Selection)> = None;
    for (index, image) in images.iter().enumerate() {
        if DeviceFamily::of_triple(image.triple) != DeviceFamily::Nvidia {
            continue;
        }
        let Ok(sm) = Sm::parse_image_arch(image.arch) else {
            continue;
        };
        let (major, minor, suffix) = (sm.major(), sm.minor(), sm.suffix());
        let native = sm_runs_on(sm, dev);
        let jit_ok = suffix.is_none() && (major, minor) <= dev
            || suffix == Some(SmSuffix::ArchSpecific) && (major, minor) == dev;
        let (tier, fit) = match image.kind {
            ImageKind::Cubin if native => (4, Fit::Cubin),
            ImageKind::Fatbinary if native => (3, Fit::Fatbin),
            ImageKind::Ptx if jit_ok => (2, Fit::PtxJit),
            ImageKind::Fatbinary => (1, Fit::FatbinSearch),
            _ => continue,
        };
        let key = (tier, major, minor, suffix.is_some());
        if best.as_ref().is_none_or(|(k, _)| key > *k) {
            best = Some((key, Selection { index, fit }));
        }
    }
    best.map(|(_, s)| s)
}

fn select_amd(
    device: &str,
    images: &[ImageDescriptor<'_>],
    rules: &dyn TargetIdRules,
) -> Option<Selection> {
    let candidates = || {
        images.iter().enumerate().filter(|(_, i)| {
            DeviceFamily::of_triple(i.triple) == DeviceFamily::Amd && i.kind == ImageKind::Object
        })
    };
    if let Some((index, _)) = candidates().find(|(_, i)| rules.is_same(i.arch, device)) {
        return Some(Selection {
            index,
            fit: Fit::ExactTargetId,
        });
    }
    let mut best: Option<(usize, usize)> = None;
    for (index, image) in candidates() {
        if rules.is_compatible(image.arch, device) {
            let n = rules.feature_count(image.arch);
            if best.is_none_or(|(_, m)| n > m) {
                best = Some((index, n));
            }
        }
    }
    best.map(|(index, _)| Selection {
        index,
        fit: Fit::CompatibleTargetId,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ImageKind::{Bitcode, Cubin, Fatbinary, Object, Ptx};
    use offload_format::triple::{AMDGCN_TRIPLE, NVPTX_TRIPLE};

    fn nv(arch: &'static str, kind: ImageKind) -> ImageDescriptor<'static> {
        ImageDescriptor {
            triple: NVPTX_TRIPLE,
            arch,
            kind,
        }
    }
    fn amd(arch: &'static str) -> ImageDescriptor<'static> {
        ImageDescriptor {
            triple: AMDGCN_TRIPLE,
            arch,
            kind: Object,
        }
    }
    const HOST: ImageDescriptor<'static> = ImageDescriptor {
        triple: "x86_64-unknown-linux-gnu",
        arch: HOST_ARCH,
        kind: Object,
    };

    /// (device major.minor, images, expected index and fit or None).
    #[test]
    fn cuda_table() {
        type Row = (
            (u32, u32),
            Vec<ImageDescriptor<'static>>,
            Option<(usize, Fit)>,
        );
        let table: Vec<Row> = vec![
            // Exact cubin.
            ((8, 0), vec![nv("sm_80", Cubin)], Some((0, Fit::Cubin))),
            // Same major, lower minor runs; the highest such minor wins.
            (
                (8, 6),
                vec![nv("sm_80", Cubin), nv("sm_86", Cubin), nv("sm_87", Cubin)],
                Some((1, Fit::Cubin)),
            ),
            (
                (8, 9),
                vec![nv("sm_86", Cubin), nv("sm_80", Cubin)],
                Some((0, Fit::Cubin)),
            ),
            // Other major: no cubin; falls back to PTX.
            (
                (9, 0),
                vec![nv("sm_80", Cubin), nv("sm_80", Ptx)],
                Some((1, Fit::PtxJit)),
            ),
            // Newer minor than device: no.
            ((8, 0), vec![nv("sm_86", Cubin)], None),
            // Cubin beats PTX even when PTX is newer.
            (
                (9, 0),
                vec![nv("sm_90", Ptx), nv("sm_90", Cubin)],
                Some((1, Fit::Cubin)),
            ),
            // Highest PTX at most the device.
            (
                (8, 6),
                vec![nv("sm_70", Ptx), nv("sm_80", Ptx), nv("sm_90", Ptx)],
                Some((1, Fit::PtxJit)),
            ),
            ((7, 5), vec![nv("sm_80", Ptx), nv("sm_90", Ptx)], None),
            // Arch-specific: only the exact device, preferred over the plain cubin.
            (
                (9, 0),
                vec![nv("sm_90", Cubin), nv("sm_90a", Cubin)],
                Some((1, Fit::Cubin)),
            ),
            (
                (9, 1),
                vec![nv("sm_90a", Cubin), nv("sm_80", Ptx)],
                Some((1, Fit::PtxJit)),
            ),
            ((9, 1), vec![nv("sm_90a", Ptx)], None),
            // Blackwell numbering.
            (
                (10, 0),
                vec![nv("sm_90", Cubin), nv("sm_100", Cubin)],
                Some((1, Fit::Cubin)),
            ),
            (
                (12, 0),
                vec![nv("sm_100", Cubin), nv("sm_90", Ptx)],
                Some((1, Fit::PtxJit)),
            ),
            // A build whose ptxas did not know sm_120 carries its PTX only, beside sm_80's
            // cubin: a Blackwell GPU JIT-compiles sm_120's PTX, an Ampere one runs the cubin.
            (
                (12, 0),
                vec![nv("sm_80", Cubin), nv("sm_80", Ptx), nv("sm_120", Ptx)],
                Some((2, Fit::PtxJit)),
            ),
            (
                (12, 1),
                vec![nv("sm_80", Cubin), nv("sm_120", Ptx), nv("sm_80", Ptx)],
                Some((1, Fit::PtxJit)),
            ),
            (
                (8, 6),
                vec![nv("sm_80", Cubin), nv("sm_80", Ptx), nv("sm_120", Ptx)],
                Some((0, Fit::Cubin)),
            ),
            (
                (10, 0),
                vec![nv("sm_80", Cubin), nv("sm_80", Ptx), nv("sm_120", Ptx)],
                Some((1, Fit::PtxJit)),
            ),
            // Fat binaries: same family after cubins, else a last resort.
            (
                (8, 0),
                vec![nv("sm_80", Fatbinary), nv("sm_80", Cubin)],
                Some((1, Fit::Cubin)),
            ),
            (
                (8, 0),
                vec![nv("sm_70", Ptx), nv("sm_80", Fatbinary)],
                Some((1, Fit::Fatbin)),
            ),
            (
                (8, 0),
                vec![nv("sm_90", Fatbinary)],
                Some((0, Fit::FatbinSearch)),
            ),
            // Other triples and kinds are ignored.
            (
                (8, 0),
                vec![amd("gfx90a"), HOST, nv("sm_80", Bitcode)],
                None,
            ),
            (
                (8, 0),
                vec![ImageDescriptor {
                    triple: "nvptx-nvidia-cuda",
                    arch: "sm_80",
                    kind: Cubin,
                }],
                None,
            ),
            ((8, 0), vec![nv("bogus", Cubin)], None),
            // Duplicates: the first wins.
            (
                (8, 0),
                vec![nv("sm_80", Cubin), nv("sm_80", Cubin)],
                Some((0, Fit::Cubin)),
            ),
            ((8, 0), vec![], None),
        ];
        for (dev, images, want) in table {
            let got = select_image(
                &DeviceTarget::Cuda {
                    major: dev.0,
                    minor: dev.1,
                },
                &images,
            );
            let got = got.as_ref().ok().map(|s| (s.index, s.fit));
            assert_eq!(got, want, "device {dev:?}, images {images:?}");
        }
    }

    #[test]
    fn error_lists_images_and_device() {
        let images = [nv("sm_90", Cubin), amd("gfx942:xnack+"), HOST];
        let err = select_image(&DeviceTarget::Cuda { major: 8, minor: 0 }, &images).unwrap_err();
        let msg = err.to_string();
        assert_eq!(err.carried.len(), 3);
        for part in [
            "compute capability 8.0 (sm_80)",
            "nvptx64-nvidia-cuda sm_90 (cubin)",
            "amdgcn-amd-amdhsa gfx942:xnack+ (elf)",
            "x86_64-unknown-linux-gnu host (elf)",
        ] {
            assert!(msg.contains(part), "`{part}` missing in: {msg}");
        }
        let err = select_image(
            &DeviceTarget::Amd {
                target_id: "gfx90a:sramecc+:xnack-",
            },
            &[],
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("gfx90a:sramecc+:xnack-; the binary carries no images"),
            "{err}"
        );
    }

    #[test]
    fn host_selection() {
        let images = [
            nv("sm_80", Cubin),
            ImageDescriptor {
                triple: "aarch64-unknown-linux-gnu",
                arch: HOST_ARCH,
                kind: Object,
            },
            HOST,
        ];
        let got = select_image(
            &DeviceTarget::Host {
                triple: "x86_64-unknown-linux-gnu",
            },
            &images,
        )
        .unwrap();
        assert_eq!(
            got,
            Selection {
                index: 2,
                fit: Fit::Host
            }
        );
        assert!(
            select_image(
                &DeviceTarget::Host {
                    triple: "riscv64gc-unknown-linux-gnu"
                },
                &images
            )
            .is_err()
        );
    }

    /// Selection order for AMD, with rules that make the order observable independently of
    /// the format crate: compatible iff same processor and every image feature is in the
    /// device ID.
    struct ToyRules;
    impl TargetIdRules for ToyRules {
        fn is_compatible(&self, image: &str, device: &str) -> bool {
            let mut i = image.split(':');
            let mut d = device.split(':');
            i.next() == d.next() && i.all(|f| device.split(':').skip(1).any(|g| g == f))
        }
        fn is_same(&self, image: &str, device: &str) -> bool {
            let mut a: Vec<_> = image.split(':').collect();
            let mut b: Vec<_> = device.split(':').collect();
            a.sort_unstable();
            b.sort_unstable();
            a == b
        }
        fn feature_count(&self, target_id: &str) -> usize {
            target_id.split(':').count() - 1
        }
    }

    #[test]
    fn amd_order_exact_then_most_specific_compatible() {
        let dev = DeviceTarget::Amd {
            target_id: "gfx90a:sramecc+:xnack-",
        };
        type Row = (Vec<ImageDescriptor<'static>>, Option<(usize, Fit)>);
        let table: Vec<Row> = vec![
            (
                vec![amd("gfx90a"), amd("gfx90a:xnack-:sramecc+")],
                Some((1, Fit::ExactTargetId)),
            ),
            (
                vec![amd("gfx90a"), amd("gfx90a:xnack-"), amd("gfx942")],
                Some((1, Fit::CompatibleTargetId)),
            ),
            (
                vec![amd("gfx90a:xnack+"), amd("gfx90a")],
                Some((1, Fit::CompatibleTargetId)),
            ),
            (vec![amd("gfx90a:xnack+"), amd("gfx942")], None),
            (
                vec![
                    nv("sm_80", Cubin),
                    ImageDescriptor {
                        triple: AMDGCN_TRIPLE,
                        arch: "gfx90a",
                        kind: Bitcode,
                    },
                ],
                None,
            ),
        ];
        for (images, want) in table {
            let got = select_image_with(&dev, &images, &ToyRules)
                .ok()
                .map(|s| (s.index, s.fit));
            assert_eq!(got, want, "{images:?}");
        }
    }

    /// Clang's rules through `offload_format::TargetId`, with device IDs as HIP reports them
    /// (every feature the processor supports spelled out).
    #[test]
    fn amd_table_with_clang_rules() {
        type Row = (
            &'static str,
            Vec<ImageDescriptor<'static>>,
            Option<(usize, Fit)>,
        );
        let table: Vec<Row> = vec![
            // Exact, with features in another order.
            (
                "gfx90a:sramecc+:xnack-",
                vec![amd("gfx90a"), amd("gfx90a:xnack-:sramecc+")],
                Some((1, Fit::ExactTargetId)),
            ),
            // "any" serves every setting.
            (
                "gfx90a:sramecc+:xnack+",
                vec![amd("gfx942"), amd("gfx90a")],
                Some((1, Fit::CompatibleTargetId)),
            ),
            // The most specific compatible image wins.
            (
                "gfx942:sramecc+:xnack+",
                vec![amd("gfx942"), amd("gfx942:xnack+"), amd("gfx942:xnack-")],
                Some((1, Fit::CompatibleTargetId)),
            ),
            // A feature with the other sign does not serve.
            ("gfx942:sramecc+:xnack-", vec![amd("gfx942:xnack+")], None),
            // Other processors never do.
            (
                "gfx90a:sramecc+:xnack-",
                vec![amd("gfx908"), amd("gfx940")],
                None,
            ),
            (
                "gfx1100",
                vec![amd("gfx1100"), amd("gfx1101")],
                Some((0, Fit::ExactTargetId)),
            ),
            // Unparsable image arch strings are skipped, not fatal.
            (
                "gfx1100",
                vec![amd("not a target"), amd("gfx1100")],
                Some((1, Fit::ExactTargetId)),
            ),
        ];
        for (device, images, want) in table {
            let got = select_image(&DeviceTarget::Amd { target_id: device }, &images)
                .ok()
                .map(|s| (s.index, s.fit));
            assert_eq!(got, want, "device {device}, images {images:?}");
        }
    }
}
