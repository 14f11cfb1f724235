#include <cuda_fp16.h>
// Twin of the fixture's accumulator_to_tile::<f16>: a 16x16 f32 accumulator in mma.sync's
// layout, rounded to f16, stored with one stmatrix.x4 into a swizzled 16x16 tile (rows of
// two 16-byte chunks, chunk ^= (row / 4) & 1), read back by element.
__device__ __forceinline__ unsigned offset(unsigned row, unsigned col) {
  unsigned chunk = (col / 8) ^ ((row / 4) & 1);
  return row * 16 + chunk * 8 + col % 8;
}
extern "C" __global__ void accumulator_to_tile(const float* values, unsigned short* out) {
  __shared__ __align__(16) unsigned short tile[256];
  unsigned lane = threadIdx.x;
  float acc[8];
  for (int e = 0; e < 8; e++) {
    int half = e >> 2, i = e & 3;
    unsigned row = lane / 4 + 8 * (i >> 1), col = 2 * (lane % 4) + (i & 1) + 8 * half;
    acc[e] = values[row * 16 + col];
  }
  unsigned words[4];
  for (int w = 0; w < 4; w++) {
    __half2 h = __floats2half2_rn(acc[2 * w], acc[2 * w + 1]);
    words[w] = *reinterpret_cast<unsigned*>(&h);
  }
  unsigned i = lane / 8 % 4, r = lane % 8;
  unsigned short* row = &tile[offset(r + 8 * (i % 2), 8 * (i / 2))];
  unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
               :: "r"(addr), "r"(words[0]), "r"(words[1]), "r"(words[2]), "r"(words[3]) : "memory");
  __syncthreads();
  for (int c = 0; c < 8; c++) out[lane * 8 + c] = tile[offset(lane / 2, 8 * (lane % 2) + c)];
}
