// The kernels of the parity benchmark that can panic, written in CUDA C with the checks the
// Rust kernels make, each an `assert`: CUDA C's own way to stop a kernel with a report
// (`__assertfail`, which the driver provides: its code is not in the cubin and not counted).
// Apart from the asserts, each is its twin in parity.cu; each takes the lengths of its
// buffers as a Rust slice carries them. An assert's report holds the expression, file, line
// and function, and the block and thread; the Rust report also holds the index and the
// length, and the launch returns it as a typed error.
#include <assert.h>

extern "C" __global__ void stencil5(int width, int height, const float* __restrict__ input,
                                    long long input_len, float* __restrict__ out) {
  assert((long long)width * height <= input_len);
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= width || y >= height) return;
  int c = y * width + x;
  if (x > 0 && y > 0 && x + 1 < width && y + 1 < height)
    out[c] = 0.5f * input[c] +
             0.125f * (input[c - 1] + input[c + 1] + input[c - width] + input[c + width]);
  else
    out[c] = input[c];
}

extern "C" __global__ void gather(int n, const float* __restrict__ src, int src_len,
                                  const unsigned* __restrict__ idx, int idx_len,
                                  float* __restrict__ out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    assert(i < idx_len);
    unsigned j = idx[i];
    assert(j < (unsigned)src_len);
    out[i] = src[j];
  }
}

extern "C" __global__ void divide(int n, const unsigned* __restrict__ a,
                                  const unsigned* __restrict__ b, unsigned* __restrict__ q) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned d = b[i];
    assert(d != 0);
    q[i] = a[i] / d;
  }
}
