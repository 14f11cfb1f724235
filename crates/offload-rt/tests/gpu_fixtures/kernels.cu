// Kernels of the GPU test suite and benchmarks; see regenerate.sh for how the PTX and cubins
// beside this file are made from it.
extern "C" __global__ void empty() {}

extern "C" __global__ void saxpy(unsigned n, float a, const float *x, float *y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// Writes through `p`: given an address the device never mapped, the launch faults.
extern "C" __global__ void store(int *p, int value) { *p = value; }
