// The kernels of kernels.cu for AMD GPUs, without the HIP headers (see regenerate.sh).
#define KERNEL extern "C" __attribute__((global)) __attribute__((visibility("default")))
KERNEL void empty() {}
KERNEL void saxpy(unsigned n, float a, const float *x, float *y) {
  unsigned i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
  if (i < n) y[i] = a * x[i] + y[i];
}
KERNEL void store(int *p, int value) { *p = value; }
