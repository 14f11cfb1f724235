//! Device images and the bundle that carries them.

use std::borrow::Cow;
use std::collections::HashSet;

use offload_format::offload_binary::{
    KEY_ARCH, KEY_IMAGE_CRC32, KEY_KERNEL_PARAMS, KEY_KERNEL_RESOURCES, KEY_KERNELS, KEY_MODULE,
    KEY_TRIPLE, KernelParams, PtxasKernelInfo, encode_kernel_params, encode_kernel_resources,
    image_crc32, kernel_params_can_name, parse_kernel_params, parse_kernel_resources,
};
use offload_format::{ImageKind, OffloadBinary, OffloadKind};

use crate::arch::OffloadArch;

/// One linked device image of one kernel crate for one architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceImage {
    /// The architecture it was built for.
    pub arch: OffloadArch,
    /// What the bytes are: an object, a cubin, PTX, ….
    pub image_kind: ImageKind,
    /// The programming model recorded in its OffloadBinary.
    pub offload_kind: OffloadKind,
    /// The kernel crate's library name.
    pub module: String,
    /// The names of the kernels it defines, stored under `offload.kernels`.
    pub kernels: Vec<String>,
    /// The parameter sizes of the kernels, where the build knows them (images of CUDA and HIP
    /// sources), stored under `KEY_KERNEL_PARAMS`.
    pub kernel_params: Vec<KernelParams>,
    /// What `ptxas -v` reported for each kernel when the build assembled the image's `sm`
    /// (the cubin and the PTX of an `sm` that gets a cubin), stored under
    /// `KEY_KERNEL_RESOURCES` so that readers need not run `ptxas` again.
    pub kernel_resources: Vec<PtxasKernelInfo>,
    /// The image file's contents.
    pub bytes: Vec<u8>,
}

impl DeviceImage {
    /// An image as [`DeviceImage::to_offload_binary`] wrapped it, with its triple; the text
    /// says what is missing or malformed. `origin` names the file it came from.
    pub fn from_offload_binary(
        b: &OffloadBinary<'_>,
        origin: &str,
    ) -> Result<(String, DeviceImage), String> {
        let key = |k: &str| {
            b.get(k)
                .map(str::to_owned)
                .ok_or_else(|| format!("it lacks the `{k}` key"))
        };
        let triple = key(KEY_TRIPLE)?;
        let arch_name = key(KEY_ARCH)?;
        let arch = crate::arch::parse_arch(&arch_name, origin).map_err(|e| e.to_string())?;
        if arch.is_gpu() && arch.triple() != triple {
            return Err(format!("`{arch_name}` is not an {triple} architecture"));
        }
        let kernel_params = match b.get(KEY_KERNEL_PARAMS) {
            Some(text) => parse_kernel_params(text).map_err(|e| e.to_string())?,
            None => Vec::new(),
        };
        let kernel_resources = match b.get(KEY_KERNEL_RESOURCES) {
            Some(text) => parse_kernel_resources(text).map_err(|e| e.to_string())?,
            None => Vec::new(),
        };
        let image = DeviceImage {
            arch,
            image_kind: b.image_kind,
            offload_kind: b.offload_kind,
            module: key(KEY_MODULE)?,
            kernels: key(KEY_KERNELS)?
                .split(',')
                .filter(|k| !k.is_empty())
                .map(str::to_owned)
                .collect(),
            kernel_params,
            kernel_resources,
            bytes: b.image.to_vec(),
        };
        Ok((triple, image))
    }

    /// The image wrapped as LLVM's tools expect it. `arch` comes before `triple`, the order
    /// `llvm-offload-binary` writes them in; then the kernel crate, its kernels and the
    /// image's CRC-32, which the runtime checks before loading it. `offload.kernel-params` is
    /// written only for an image that has kernel parameter sizes, `offload.kernel-resources`
    /// only for one with `ptxas` figures (a kernel the key cannot name, or a repeated one,
    /// left out).
    pub fn to_offload_binary(&self) -> OffloadBinary<'_> {
        let mut strings = vec![
            (Cow::Borrowed(KEY_ARCH), Cow::Owned(self.arch.name())),
            (Cow::Borrowed(KEY_TRIPLE), Cow::Borrowed(self.arch.triple())),
            (
                Cow::Borrowed(KEY_MODULE),
                Cow::Borrowed(self.module.as_str()),
            ),
            (
                Cow::Owned(KEY_KERNELS.to_owned()),
                Cow::Owned(self.kernels.join(",")),
            ),
        ];
        strings.push((
            Cow::Borrowed(KEY_IMAGE_CRC32),
            Cow::Owned(image_crc32(&self.bytes)),
        ));
        if !self.kernel_params.is_empty() {
            strings.push((
                Cow::Borrowed(KEY_KERNEL_PARAMS),
                Cow::Owned(encode_kernel_params(&self.kernel_params)),
            ));
        }
        let mut named: HashSet<&str> = HashSet::new();
        let resources: Vec<PtxasKernelInfo> = self
            .kernel_resources
            .iter()
            .filter(|k| {
                kernel_params_can_name(&k.name) && !k.name.contains('=') && named.insert(&k.name)
            })
            .cloned()
            .collect();
        if !resources.is_empty() {
            strings.push((
                Cow::Borrowed(KEY_KERNEL_RESOURCES),
                Cow::Owned(encode_kernel_resources(&resources)),
            ));
        }
        OffloadBinary {
            image_kind: self.image_kind,
            offload_kind: self.offload_kind,
            flags: 0,
            strings,
            image: Cow::Borrowed(&self.bytes),
        }
    }

    /// File extension clang's tools use for this kind of image.
    pub fn extension(&self) -> &'static str {
        match self.image_kind {
            ImageKind::Ptx => "s",
            ImageKind::Cubin => "cubin",
            ImageKind::Fatbinary => "fatbin",
            ImageKind::Bitcode => "bc",
            _ => "o",
        }
    }
}

/// Concatenated OffloadBinaries, as in a `.llvm.offloading` section.
pub fn bundle(images: &[DeviceImage]) -> Vec<u8> {
    let mut out = Vec::new();
    for image in images {
        out.extend_from_slice(&image.to_offload_binary().to_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(kernel: &str, sizes: &[u32]) -> KernelParams {
        KernelParams {
            kernel: kernel.to_owned(),
            sizes: sizes.to_vec(),
        }
    }

    #[test]
    fn kernel_params_are_written_only_when_known() {
        let mut image = DeviceImage {
            arch: OffloadArch::Nvptx(offload_format::Sm::parse("sm_80").unwrap()),
            image_kind: ImageKind::Ptx,
            offload_kind: OffloadKind::Cuda,
            module: "scale".into(),
            kernels: vec!["scale".into(), "_Z9scale_cppPffi".into()],
            kernel_params: Vec::new(),
            kernel_resources: Vec::new(),
            bytes: b"ptx".to_vec(),
        };
        let without = image.to_offload_binary();
        assert_eq!(without.get(KEY_KERNEL_PARAMS), None);
        assert_eq!(without.strings.len(), 5);
        image.kernel_params = vec![
            params("scale", &[8, 4, 4]),
            params("_Z9scale_cppPffi", &[8, 4, 4]),
        ];
        let bytes = image.to_offload_binary().to_bytes();
        let (parsed, _) = OffloadBinary::parse(&bytes).unwrap();
        let text = parsed.get(KEY_KERNEL_PARAMS).unwrap();
        assert_eq!(text, "scale:8,4,4;_Z9scale_cppPffi:8,4,4");
        assert_eq!(
            offload_format::offload_binary::parse_kernel_params(text).unwrap(),
            image.kernel_params
        );
    }

    /// The figures of the build's `ptxas -v` run come back from the packed image as they went
    /// in; a kernel the key cannot name, or a repeated one, is left out rather than making the
    /// value unreadable.
    #[test]
    fn kernel_resources_round_trip_through_the_image() {
        use offload_format::offload_binary::parse_kernel_resources;
        let figures = |name: &str, registers: u32| PtxasKernelInfo {
            name: name.into(),
            registers,
            shared_bytes: 2048,
            stack_bytes: 16,
            spill_store_bytes: 4,
            spill_load_bytes: 8,
            constant_bytes: 380,
        };
        let mut image = DeviceImage {
            arch: OffloadArch::Nvptx(offload_format::Sm::parse("sm_80").unwrap()),
            image_kind: ImageKind::Cubin,
            offload_kind: OffloadKind::Cuda,
            module: "reduce_kernels".into(),
            kernels: vec!["block_sum".into(), "saxpy".into()],
            kernel_params: Vec::new(),
            kernel_resources: Vec::new(),
            bytes: b"\x7fELF cubin".to_vec(),
        };
        assert_eq!(image.to_offload_binary().get(KEY_KERNEL_RESOURCES), None);
        image.kernel_resources = vec![
            figures("block_sum", 12),
            figures("saxpy", 8),
            figures("block_sum", 99),
            figures("a=b", 1),
            figures("a;b", 1),
        ];
        let bytes = bundle(std::slice::from_ref(&image));
        let parsed = offload_format::parse_all(&bytes).unwrap();
        let text = parsed[0].get(KEY_KERNEL_RESOURCES).unwrap();
        assert_eq!(
            parse_kernel_resources(text).unwrap(),
            [figures("block_sum", 12), figures("saxpy", 8)]
        );
    }

    #[test]
    fn offload_binary_carries_the_contract_keys() {
        let image = DeviceImage {
            arch: OffloadArch::Nvptx(offload_format::Sm::parse("sm_80").unwrap()),
            image_kind: ImageKind::Ptx,
            offload_kind: OffloadKind::Cuda,
            module: "saxpy_kernels".into(),
            kernels: vec!["a".into(), "b".into()],
            kernel_params: Vec::new(),
            kernel_resources: Vec::new(),
            bytes: b"ptx".to_vec(),
        };
        let bytes = bundle(std::slice::from_ref(&image));
        let parsed = offload_format::parse_all(&bytes).unwrap();
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].triple(), Some("nvptx64-nvidia-cuda"));
        assert_eq!(parsed[0].arch(), Some("sm_80"));
        assert_eq!(parsed[0].get(KEY_MODULE), Some("saxpy_kernels"));
        assert_eq!(parsed[0].get(KEY_KERNELS), Some("a,b"));
        assert_eq!(
            parsed[0].get(KEY_IMAGE_CRC32),
            Some(image_crc32(b"ptx").as_str())
        );
        assert_eq!(&*parsed[0].image, b"ptx");
    }
}
