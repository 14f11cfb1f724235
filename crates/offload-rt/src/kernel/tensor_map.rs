//! The tensor memory accelerator's description of a tensor and its tile ([`super::tma`]).

/// A tensor map: the 128 bytes of CUDA's `CUtensorMap`, encoded by the driver
/// (`cuTensorMapEncodeTiled`), read by the copies. A kernel takes it as a pointer to device
/// memory (`*const TensorMap`), where it stays unchanged while kernels use it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct TensorMap {
    /// The driver's encoding.
    pub words: [u64; 16],
}

// SAFETY: 128 bytes of plain words, no padding (128 is a multiple of the alignment), no
// pointers into host memory; every bit pattern is a value (the driver decides what is valid).
unsafe impl super::DeviceCopy for TensorMap {}
