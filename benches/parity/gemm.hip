// The HIP C twin of the fast GEMM of examples/gemm/kernels on AMD's matrix cores (its generic
// `gemm`, whose entry points are `gemm__f16` and `gemm__bf16`; the twins have their names, so
// rows line up): the same algorithm as the Rust kernel's AMD path, written as a HIP programmer
// writes an MFMA GEMM without a library. C = A·B, row-major, A m×k and B k×n of 16-bit floats,
// C m×n of f32; m and n multiples of 128, k of 32. Launch: grid (n / 128, m / 128), 256
// threads: 4 wavefronts of 64.
//
// A block computes a 128×128 tile of C from 128×32 slices of A and 32×128 slices of B staged in
// LDS through registers (16 bytes a copy; gfx90a has no asynchronous copy to LDS), in a
// 3-stage ring written two slices ahead of the multiply. Its 4 wavefronts form a 2×2 grid of
// 64×64 wavefront tiles; a wavefront multiplies with `v_mfma_f32_16x16x16` (f16, or bf16's
// `_1k` form): A's fragment one 64-bit LDS read a lane (4 consecutive k), B's 4 reads of 16
// bits (4 consecutive k of one column). LDS is swizzled in 16-byte chunks as the CUDA twin's
// shared memory is. Compiled as parity.hip is (clang-22's HIP wrapper, -nogpulib).
#include <hip/hip_runtime.h>

// ROCm's __launch_bounds__ (its hip_runtime.h; the minimal header of the build has none).
#define __launch_bounds__(threads) __attribute__((amdgpu_flat_work_group_size(1, threads)))

#define BM 128
#define BN 128
#define BK 32
#define STAGES 3
#define THREADS 256

typedef unsigned short elem;
typedef _Float16 half4 __attribute__((ext_vector_type(4)));
typedef short short4_ __attribute__((ext_vector_type(4)));
typedef float float4_ __attribute__((ext_vector_type(4)));
typedef unsigned uint4_ __attribute__((ext_vector_type(4)));

// The offset of element (r, col) of a staged 128×32 slice of A: 4 chunks of 8 per row, the
// chunk index XOR-ed with (r / 2) % 4.
__device__ inline unsigned a_offset(unsigned r, unsigned col) {
  return r * BK + (((col / 8) ^ ((r / 2) % 4)) * 8) + col % 8;
}

// The offset of element (r, col) of a staged 32×128 slice of B: 16 chunks of 8 per row, the
// chunk index XOR-ed with r % 8.
__device__ inline unsigned b_offset(unsigned r, unsigned col) {
  return r * BN + (((col / 8) ^ (r % 8)) * 8) + col % 8;
}

// c + a·b for one 16×16×16 tile: a lane's 4 halves of A (row lane % 16, k 4·(lane / 16)..),
// of B (k 4·(lane / 16).., column lane % 16) and its 4 floats of C.
template <bool BF16>
__device__ inline float4_ mfma(unsigned long long a, unsigned long long b, float4_ c) {
  if (BF16)
    return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(__builtin_bit_cast(short4_, a),
                                                     __builtin_bit_cast(short4_, b), c, 0, 0, 0);
  return __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(half4, a),
                                               __builtin_bit_cast(half4, b), c, 0, 0, 0);
}

// Slice `kt` of the block's rows of A and columns of B into stage `s`: 512 chunks of 16 bytes
// of each, two per thread.
__device__ inline void load_stage(elem* sa, elem* sb, const elem* a, const elem* b, unsigned n,
                                  unsigned k, unsigned block_row, unsigned block_col,
                                  unsigned kt, unsigned t) {
#pragma unroll
  for (unsigned j = 0; j < 2; ++j) {
    unsigned i = t + j * THREADS;
    unsigned row = i / 4, col = i % 4 * 8;
    *(uint4_*)(sa + a_offset(row, col)) =
        *(const uint4_*)(a + (block_row + row) * k + kt * BK + col);
    row = i / 16;
    col = i % 16 * 8;
    *(uint4_*)(sb + b_offset(row, col)) =
        *(const uint4_*)(b + (kt * BK + row) * n + block_col + col);
  }
}

template <bool BF16>
__device__ inline void gemm(unsigned m, unsigned n, unsigned k, const elem* a, const elem* b,
                            float* c) {
  __shared__ __attribute__((aligned(16))) elem sa[STAGES][BM * BK];
  __shared__ __attribute__((aligned(16))) elem sb[STAGES][BK * BN];
  (void)m;
  unsigned t = threadIdx.x, lane = t % 64, w = t / 64;
  unsigned warp_row = w / 2 * 64, warp_col = w % 2 * 64;
  unsigned block_row = blockIdx.y * BM, block_col = blockIdx.x * BN;
  unsigned slices = k / BK;

  float4_ acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = (float4_){0.0f, 0.0f, 0.0f, 0.0f};

#pragma unroll
  for (unsigned s = 0; s < STAGES - 1; ++s)
    if (s < slices) load_stage(sa[s], sb[s], a, b, n, k, block_row, block_col, s, t);

  for (unsigned kt = 0; kt < slices; ++kt) {
    __syncthreads();
    unsigned s = kt % STAGES;
#pragma unroll
    for (unsigned step = 0; step < 2; ++step) {
      unsigned kk = step * 16 + lane / 16 * 4;
      unsigned long long fa[4], fb[4];
#pragma unroll
      for (unsigned i = 0; i < 4; ++i)
        fa[i] = *(const unsigned long long*)(sa[s] + a_offset(warp_row + i * 16 + lane % 16, kk));
#pragma unroll
      for (unsigned j = 0; j < 4; ++j) {
        unsigned col = warp_col + j * 16 + lane % 16;
        fb[j] = 0;
#pragma unroll
        for (unsigned e = 0; e < 4; ++e)
          fb[j] |= (unsigned long long)sb[s][b_offset(kk + e, col)] << (16 * e);
      }
#pragma unroll
      for (unsigned i = 0; i < 4; ++i)
#pragma unroll
        for (unsigned j = 0; j < 4; ++j) acc[i][j] = mfma<BF16>(fa[i], fb[j], acc[i][j]);
    }
    if (kt + STAGES - 1 < slices)
      load_stage(sa[(kt + STAGES - 1) % STAGES], sb[(kt + STAGES - 1) % STAGES], a, b, n, k,
                 block_row, block_col, kt + STAGES - 1, t);
  }

#pragma unroll
  for (unsigned i = 0; i < 4; ++i)
#pragma unroll
    for (unsigned j = 0; j < 4; ++j)
#pragma unroll
      for (unsigned e = 0; e < 4; ++e) {
        unsigned row = block_row + warp_row + i * 16 + lane / 16 * 4 + e;
        unsigned col = block_col + warp_col + j * 16 + lane % 16;
        c[row * n + col] = acc[i][j][e];
      }
}

// __launch_bounds__(THREADS): the Rust kernel's `max_threads = 256`.
extern "C" __global__ void __launch_bounds__(THREADS)
    gemm__f16(unsigned m, unsigned n, unsigned k, const elem* a, const elem* b, float* c) {
  gemm<false>(m, n, k, a, b, c);
}

extern "C" __global__ void __launch_bounds__(THREADS)
    gemm__bf16(unsigned m, unsigned n, unsigned k, const elem* a, const elem* b, float* c) {
  gemm<true>(m, n, k, a, b, c);
}
