fn main() {
    offload_build::Build::new()
        // Kernels of their own: module `scale`, NVIDIA images from the .cu, AMD from the .hip.
        .cuda("cuda/scale.cu")
        .hip("hip/scale.hip")
        // Device functions linked with the Rust kernel crate, which calls them (and which they
        // call back); on the CPU device the CUDA file's host side is linked in.
        .cuda_rdc("cuda/poly.cu")
        .hip_rdc("hip/poly.hip")
        .include("include")
        .compile();
}
