// A CUDA kernel launched from Rust through `offload_rt::extern_kernels!`.
extern "C" __global__ void scale(float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
