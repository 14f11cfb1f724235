//! The build plan: the action graph of a kernel build, decided once before anything is
//! built. The build executes it (`executor`: `images_from_bundles_or_source`, `build_images`) and
//! `cargo offload build --print-phases` draws it, so what is shown is what is done.

use std::path::{Path, PathBuf};

use crate::arch::OffloadArch;
use crate::device_link::{CubinPlan, cubin_plan};
use crate::error::Result;
use crate::foreign::rdc::LinkedSources;
use crate::image::DeviceImage;
use crate::metadata::KernelCrate;
use crate::prebuilt::{self, Decision, Policy};

/// What a build of kernel crates is asked for: the input of `build_images`.
#[derive(Debug, Clone, Copy)]
pub struct BuildRequest<'a> {
    /// The kernel crates, built in this order.
    pub kernel_crates: &'a [KernelCrate],
    /// The architectures, each crate's images in this order.
    pub archs: &'a [OffloadArch],
    /// The directory the nested device builds' target directories lie in.
    pub offload_dir: &'a Path,
    /// Relocatable CUDA/HIP sources every image is device-linked with; `None` for none.
    pub linked: Option<&'a LinkedSources>,
}

/// The build of kernel crates for a list of architectures, decided before anything is built.
#[derive(Debug)]
pub struct BuildPlan {
    /// The architectures, in the order of the list.
    pub archs: Vec<OffloadArch>,
    /// Every kernel crate with where its images come from, in the order given.
    pub kernel_crates: Vec<PlannedCrate>,
    /// The nested compiles every crate built from source goes through; empty when every
    /// crate's images come from its bundle.
    pub compiles: Vec<NestedCompile>,
    /// The device links of a crate built from source, one per architecture, in the order of
    /// [`BuildPlan::archs`].
    pub links: Vec<DeviceLink>,
}

/// One kernel crate of a plan.
#[derive(Debug)]
pub struct PlannedCrate {
    /// The kernel crate.
    pub krate: KernelCrate,
    /// Where its images come from.
    pub source: ImageSource,
}

/// Where a kernel crate's images come from.
#[derive(Debug)]
pub enum ImageSource {
    /// Its prebuilt bundle, which serves every architecture: no device build.
    Prebuilt {
        /// The bundle file.
        bundle: PathBuf,
        /// The images taken from it, in architecture order.
        images: Vec<DeviceImage>,
    },
    /// Built from source through the plan's compiles and links.
    FromSource {
        /// Why its bundle was not used; `None` when it has none, or bundles were not asked
        /// for.
        note: Option<String>,
    },
}

/// One nested compile of a kernel crate, whose output every device link of it starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NestedCompile {
    /// What it compiles for.
    pub target: CompileTarget,
    /// Its target directory, relative to the offload directory.
    pub dir_name: String,
}

/// What a nested compile compiles for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompileTarget {
    /// The CPU device: a shared object for the host triple, compiled and linked by cargo.
    Host,
    /// A GPU triple: one compile (of one baseline CPU) serves every architecture of it, the
    /// device link picking the architecture.
    Gpu {
        /// The triple.
        triple: &'static str,
    },
}

/// The device link of one architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceLink {
    /// The architecture.
    pub arch: OffloadArch,
    /// The index in [`BuildPlan::compiles`] of the compile it links.
    pub compile: usize,
    /// The images it makes.
    pub outputs: LinkOutputs,
}

/// The images one device link makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkOutputs {
    /// An `sm_XX` the `ptxas` found knows: a cubin and the PTX it is assembled from.
    CubinAndPtx,
    /// An `sm_XX` without a cubin, JIT-compiled from PTX by the CUDA driver.
    PtxOnly {
        /// Why no cubin, as `cubin_plan` found.
        cubin: CubinPlan,
        /// The same in words.
        obstacle: String,
    },
    /// An AMD code object.
    CodeObject,
    /// The CPU device's shared object.
    SharedObject,
}

impl BuildPlan {
    /// Plans `kernel_crates` for `archs`: each crate's prebuilt bundle where it serves under
    /// `policy` (see `prebuilt::decide`; `can_build` says whether a build from source is
    /// possible here, asked only when a bundle does not serve), the others built from source.
    pub fn new(
        kernel_crates: &[KernelCrate],
        archs: &[OffloadArch],
        policy: Policy,
        can_build: &dyn Fn() -> bool,
    ) -> Result<Self> {
        let planned = kernel_crates
            .iter()
            .map(|krate| {
                let source = match prebuilt::decide(krate, archs, policy, can_build)? {
                    Decision::Use(images) => ImageSource::Prebuilt {
                        bundle: prebuilt::bundle_path(krate),
                        images,
                    },
                    Decision::BuildFromSource(note) => ImageSource::FromSource { note },
                };
                Ok(PlannedCrate {
                    krate: krate.clone(),
                    source,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let any_from_source = planned
            .iter()
            .any(|p| matches!(p.source, ImageSource::FromSource { .. }));
        let (compiles, links) = if any_from_source {
            Self::jobs(archs)?
        } else {
            (Vec::new(), Vec::new())
        };
        Ok(Self {
            archs: archs.to_vec(),
            kernel_crates: planned,
            compiles,
            links,
        })
    }

    /// Plans `kernel_crates` built from source for `archs`, bundles not looked at.
    pub fn from_source(kernel_crates: &[KernelCrate], archs: &[OffloadArch]) -> Result<Self> {
        Self::new(kernel_crates, archs, Policy::Never, &|| true)
    }

    /// The crates built from source, in order.
    pub fn crates_from_source(&self) -> impl Iterator<Item = &KernelCrate> {
        self.kernel_crates
            .iter()
            .filter(|p| matches!(p.source, ImageSource::FromSource { .. }))
            .map(|p| &p.krate)
    }

    /// The links of the compile at `index`, in architecture order.
    pub fn links_of(&self, index: usize) -> impl Iterator<Item = &DeviceLink> {
        self.links.iter().filter(move |l| l.compile == index)
    }

    /// One compile per GPU triple and one for the CPU device, in the order of their first
    /// architecture, and one link per architecture.
    fn jobs(archs: &[OffloadArch]) -> Result<(Vec<NestedCompile>, Vec<DeviceLink>)> {
        let mut compiles: Vec<NestedCompile> = Vec::new();
        let mut links = Vec::with_capacity(archs.len());
        for arch in archs {
            let compile = match arch {
                OffloadArch::Host(_) => NestedCompile {
                    target: CompileTarget::Host,
                    dir_name: arch.file_stem(),
                },
                OffloadArch::Nvptx(_) | OffloadArch::Amdgcn(_) => NestedCompile {
                    target: CompileTarget::Gpu {
                        triple: arch.triple(),
                    },
                    dir_name: arch.triple().to_owned(),
                },
            };
            let index = match compiles.iter().position(|c| *c == compile) {
                Some(index) => index,
                None => {
                    compiles.push(compile);
                    compiles.len() - 1
                }
            };
            let outputs = match arch {
                OffloadArch::Host(_) => LinkOutputs::SharedObject,
                OffloadArch::Amdgcn(_) => LinkOutputs::CodeObject,
                OffloadArch::Nvptx(sm) => {
                    let sm = sm.to_string();
                    let cubin = cubin_plan(&sm)?;
                    match cubin.obstacle(&sm) {
                        None => LinkOutputs::CubinAndPtx,
                        Some(obstacle) => LinkOutputs::PtxOnly { cubin, obstacle },
                    }
                }
            };
            links.push(DeviceLink {
                arch: *arch,
                compile: index,
                outputs,
            });
        }
        Ok((compiles, links))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::parse_list;

    fn kernel_crate(name: &str) -> KernelCrate {
        KernelCrate {
            package: name.to_owned(),
            lib_name: name.replace('-', "_"),
            manifest_path: PathBuf::from(format!("/nonexistent/{name}/Cargo.toml")),
            root: PathBuf::from(format!("/nonexistent/{name}")),
            watch: Vec::new(),
            deps: Vec::new(),
            default_features: true,
            features: Vec::new(),
            panic: crate::metadata::PanicStrategy::Report,
        }
    }

    #[test]
    fn the_architectures_of_a_triple_share_one_compile() {
        let archs = parse_list("gfx90a,host,gfx942", "the test").unwrap();
        let plan = BuildPlan::from_source(&[kernel_crate("k")], &archs).unwrap();
        assert_eq!(
            plan.compiles
                .iter()
                .map(|c| c.target.clone())
                .collect::<Vec<_>>(),
            [
                CompileTarget::Gpu {
                    triple: "amdgcn-amd-amdhsa"
                },
                CompileTarget::Host
            ]
        );
        assert_eq!(plan.compiles[0].dir_name, "amdgcn-amd-amdhsa");
        assert_eq!(
            plan.links
                .iter()
                .map(|l| (l.compile, l.outputs.clone()))
                .collect::<Vec<_>>(),
            [
                (0, LinkOutputs::CodeObject),
                (1, LinkOutputs::SharedObject),
                (0, LinkOutputs::CodeObject)
            ]
        );
        assert_eq!(plan.links_of(0).count(), 2);
    }

    #[test]
    fn a_crate_without_a_bundle_is_built_from_source() {
        let archs = parse_list("host", "the test").unwrap();
        let plan = BuildPlan::new(&[kernel_crate("k")], &archs, Policy::Auto, &|| true).unwrap();
        assert!(matches!(
            plan.kernel_crates[0].source,
            ImageSource::FromSource { note: None }
        ));
        assert_eq!(plan.crates_from_source().count(), 1);
        assert_eq!(plan.links.len(), 1);
        assert!(BuildPlan::new(&[kernel_crate("k")], &archs, Policy::Require, &|| true).is_err());
    }
}
