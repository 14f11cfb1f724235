// Kernels of the GPU test suite and benchmarks; see regenerate.sh for how the PTX and cubins
// beside this file are made from it.
extern "C" __global__ void empty() {}

extern "C" __global__ void saxpy(unsigned n, float a, const float *x, float *y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// SAXPY over float4s, n a multiple of 4: 16-byte loads, four elements per thread. Memories as
// fast as an H200's need that many bytes in flight per thread to come near a copy's bandwidth.
extern "C" __global__ void saxpy4(unsigned n, float a, const float4 *x, float4 *y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n / 4) {
    float4 u = x[i], v = y[i];
    v.x = a * u.x + v.x;
    v.y = a * u.y + v.y;
    v.z = a * u.z + v.z;
    v.w = a * u.w + v.w;
    y[i] = v;
  }
}

// Writes through `p`: given an address the device never mapped, the launch faults.
extern "C" __global__ void store(int *p, int value) { *p = value; }
