#include <hip/hip_runtime.h>
// Relocatable device code, device-linked with the Rust kernel crate `mixed-kernels`.
#include "mixed.h"

// Written in Rust (mixed-kernels), called from here.
extern "C" __host__ __device__ float rust_clamp(float v, float lo, float hi);

// Called from the Rust kernel `polynomial`: A*v*v + B, clamped by Rust.
extern "C" __host__ __device__ float foreign_poly(float v) {
  return rust_clamp(POLY_A * v * v + POLY_B, 0.0f, 100.0f);
}
