// The HIP C twin of the attention kernels of examples/attention/kernels on AMD's matrix cores
// (their generic `attention_d64` and `attention_d128`, whose entry points are
// `attention_d64__f16`, …; the twins have their names, so rows line up): the same algorithm as
// the Rust kernels' AMD path, FlashAttention-2's forward pass as a HIP programmer writes it
// with MFMA and no library. O = softmax(Q·Kᵀ·scale)·V per head, row-major [head][row][d] of
// 16-bit floats; `seq` a multiple of 64. Launch: grid (seq / 64, heads), 128 threads: 2
// wavefronts of 64, 32 query rows each.
//
// A block stages its 64×d tile of Q, then K's and V's 64-row tiles, in LDS through registers
// (16 bytes a copy; gfx90a has no asynchronous copy to LDS), K's next tile written while V's is
// used and the reverse. Each wavefront holds its two 16-row tiles of Q as A fragments (one
// 64-bit LDS read a lane), multiplies them by Kᵀ (K's rows read as B, one 64-bit read a lane)
// with `v_mfma_f32_16x16x16` (f16, or bf16's `_1k` form) into 16×64 scores, keeps each row's
// running maximum and sum (each row across its 16 lanes: 4 exchanges), turns the scores into
// probabilities with `v_exp_f32`, moves them into A's layout across lanes (`ds_bpermute`: an
// accumulator's lane holds 4 rows of one column, A's lane 4 columns of one row) and multiplies
// them by V (B's 4 elements of one column, 4 reads of 16 bits). The tiles are swizzled in
// 16-byte chunks (chunk c of row r at c ^ (r % 8)), as the CUDA twin's. Compiled as parity.hip
// is (clang-22's HIP wrapper, -nogpulib).
#include <hip/hip_runtime.h>

// ROCm's __launch_bounds__ (its hip_runtime.h; the minimal header of the build has none).
#define __launch_bounds__(threads) __attribute__((amdgpu_flat_work_group_size(1, threads)))

#define BLOCK_Q 64
#define BLOCK_KV 64
#define THREADS 128
#define KEY_TILES 4

typedef unsigned short elem;
typedef _Float16 half4 __attribute__((ext_vector_type(4)));
typedef short short4_ __attribute__((ext_vector_type(4)));
typedef float float4_ __attribute__((ext_vector_type(4)));
typedef unsigned uint4_ __attribute__((ext_vector_type(4)));
typedef unsigned long long frag;

template <int D>
__device__ inline unsigned tile_offset(unsigned r, unsigned col) {
  return r * D + (((col / 8) ^ (r % 8)) * 8) + col % 8;
}

// c + a·b for one 16×16×16 tile: a lane's 4 halves of A (row lane % 16, k 4·(lane / 16)..),
// of B (k 4·(lane / 16).., column lane % 16) and its 4 floats of C (rows 4·(lane / 16)..,
// column lane % 16).
template <bool BF16>
__device__ inline float4_ mfma(frag a, frag b, float4_ c) {
  if (BF16)
    return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(__builtin_bit_cast(short4_, a),
                                                     __builtin_bit_cast(short4_, b), c, 0, 0, 0);
  return __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(half4, a),
                                               __builtin_bit_cast(half4, b), c, 0, 0, 0);
}

template <bool BF16>
__device__ inline elem narrow(float x) {
  if (BF16) return __builtin_bit_cast(elem, (__bf16)x);
  return __builtin_bit_cast(elem, (_Float16)x);
}

__device__ inline float shuffle(float x, unsigned lane) {
  return __builtin_bit_cast(float, __builtin_amdgcn_ds_bpermute(
                                       (int)(lane * 4), __builtin_bit_cast(int, x)));
}

// The grid's blocks in x: code object V5's hidden argument, as HIP's `gridDim.x` reads it.
__device__ inline unsigned grid_blocks_x() {
  return *(const unsigned*)__builtin_amdgcn_implicitarg_ptr();
}

__device__ inline unsigned lane_id() {
  return __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
}

// The 64×D rows of `src` from `row0` into `tile`, 16 bytes a copy.
template <int D>
__device__ inline void fill(elem* tile, const elem* src, unsigned row0, unsigned t) {
#pragma unroll
  for (unsigned j = 0; j < BLOCK_Q * D / 8 / THREADS; ++j) {
    unsigned i = t + j * THREADS;
    unsigned row = i / (D / 8), col = i % (D / 8) * 8;
    *(uint4_*)(tile + tile_offset<D>(row, col)) = *(const uint4_*)(src + (row0 + row) * D + col);
  }
}

// Each of the lane's 4 rows across the 4 score tiles, joined over the row's 16 lanes.
template <bool MAX>
__device__ inline void rows_reduce(const float4_ (&tiles)[KEY_TILES], float (&out)[4],
                                   unsigned lane) {
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    float v = tiles[0][e];
#pragma unroll
    for (int c = 1; c < KEY_TILES; ++c) v = MAX ? __builtin_fmaxf(v, tiles[c][e]) : v + tiles[c][e];
#pragma unroll
    for (unsigned mask = 1; mask < 16; mask *= 2) {
      float o = shuffle(v, lane ^ mask);
      v = MAX ? __builtin_fmaxf(v, o) : v + o;
    }
    out[e] = v;
  }
}

// An accumulator's probabilities as an A fragment: A's element (row lane % 16, k 4·(lane / 16)
// + e) is the accumulator's element row % 4 of lane k + 16·(row / 4).
template <bool BF16>
__device__ inline frag to_fragment_a(float4_ p, unsigned lane) {
  frag out = 0;
  unsigned row = lane % 16;
#pragma unroll
  for (unsigned e = 0; e < 4; ++e) {
    unsigned source = 4 * (lane / 16) + e + 16 * (row / 4);
    float value = 0.0f;
#pragma unroll
    for (unsigned s = 0; s < 4; ++s) {
      float x = shuffle(p[s], source);
      if (s == row % 4) value = x;
    }
    out |= (frag)narrow<BF16>(value) << (16 * e);
  }
  return out;
}

template <bool BF16, int D>
__device__ inline void attention(unsigned seq, float scale_log2, unsigned causal, const elem* q,
                                 const elem* k, const elem* v, elem* o) {
  __shared__ __attribute__((aligned(16))) elem tiles[3 * BLOCK_Q * D];
  elem* q_tile = tiles;
  elem* k_tile = tiles + BLOCK_Q * D;
  elem* v_tile = tiles + (BLOCK_Q + BLOCK_KV) * D;
  unsigned query_block = grid_blocks_x() - 1 - blockIdx.x;
  unsigned head = blockIdx.y * seq * D;
  unsigned t = threadIdx.x, lane = lane_id();
  unsigned warp_row = t / 64 * 32;
  unsigned key_blocks = causal ? query_block + 1 : seq / BLOCK_KV;
  q += head;
  k += head;
  v += head;
  o += head;

  fill<D>(q_tile, q, query_block * BLOCK_Q, t);
  fill<D>(k_tile, k, 0, t);
  fill<D>(v_tile, v, 0, t);
  __syncthreads();

  frag q_frags[2][D / 16];
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      q_frags[r][kk] = *(const frag*)(q_tile + tile_offset<D>(warp_row + r * 16 + lane % 16,
                                                               kk * 16 + lane / 16 * 4));

  float row_max[2][4], row_sum[2][4];
  float4_ out[2][D / 16];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      row_max[r][e] = -__builtin_inff();
      row_sum[r][e] = 0.0f;
    }
#pragma unroll
    for (int d = 0; d < D / 16; ++d) out[r][d] = (float4_){0.0f, 0.0f, 0.0f, 0.0f};
  }

  for (unsigned key_block = 0; key_block < key_blocks; ++key_block) {
    __syncthreads();
    float4_ scores[2][KEY_TILES];
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int c = 0; c < KEY_TILES; ++c) scores[r][c] = (float4_){0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int c = 0; c < KEY_TILES; ++c) {
        frag kt = *(const frag*)(k_tile +
                                 tile_offset<D>(c * 16 + lane % 16, kk * 16 + lane / 16 * 4));
#pragma unroll
        for (int r = 0; r < 2; ++r) scores[r][c] = mfma<BF16>(q_frags[r][kk], kt, scores[r][c]);
      }
    __syncthreads();
    if (key_block + 1 < key_blocks) fill<D>(k_tile, k, (key_block + 1) * BLOCK_KV, t);

    bool diagonal = causal && key_block == query_block;
    float4_ probs[2][KEY_TILES];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      if (diagonal) {
        unsigned first = warp_row + r * 16;
#pragma unroll
        for (int c = 0; c < KEY_TILES; ++c)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (c * 16 + lane % 16 > first + lane / 16 * 4 + e)
              scores[r][c][e] = -__builtin_inff();
      }
      float tile_max[4], new_max[4], rescale[4], tile_sum[4];
      rows_reduce<true>(scores[r], tile_max, lane);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        new_max[e] = __builtin_fmaxf(row_max[r][e], tile_max[e] * scale_log2);
        rescale[e] = __builtin_amdgcn_exp2f(row_max[r][e] - new_max[e]);
      }
#pragma unroll
      for (int c = 0; c < KEY_TILES; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          probs[r][c][e] =
              __builtin_amdgcn_exp2f(__builtin_fmaf(scores[r][c][e], scale_log2, -new_max[e]));
      rows_reduce<false>(probs[r], tile_sum, lane);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        row_sum[r][e] = row_sum[r][e] * rescale[e] + tile_sum[e];
        row_max[r][e] = new_max[e];
      }
#pragma unroll
      for (int d = 0; d < D / 16; ++d)
#pragma unroll
        for (int e = 0; e < 4; ++e) out[r][d][e] *= rescale[e];
    }

    __syncthreads();
#pragma unroll
    for (int c = 0; c < KEY_TILES; ++c) {
      frag p[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) p[r] = to_fragment_a<BF16>(probs[r][c], lane);
#pragma unroll
      for (int d = 0; d < D / 16; ++d) {
        frag vf = 0;
#pragma unroll
        for (unsigned e = 0; e < 4; ++e)
          vf |= (frag)v_tile[tile_offset<D>(c * 16 + lane / 16 * 4 + e, d * 16 + lane % 16)]
                << (16 * e);
#pragma unroll
        for (int r = 0; r < 2; ++r) out[r][d] = mfma<BF16>(p[r], vf, out[r][d]);
      }
    }
    __syncthreads();
    if (key_block + 1 < key_blocks) fill<D>(v_tile, v, (key_block + 1) * BLOCK_KV, t);
  }

  // O's rows divided by their sums, rounded into Q's tile (each wavefront its own rows), then
  // copied out 16 bytes a thread at a time.
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int d = 0; d < D / 16; ++d)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        q_tile[tile_offset<D>(warp_row + r * 16 + lane / 16 * 4 + e, d * 16 + lane % 16)] =
            narrow<BF16>(out[r][d][e] * (1.0f / row_sum[r][e]));
  __syncthreads();
#pragma unroll
  for (unsigned j = 0; j < BLOCK_Q * D / 8 / THREADS; ++j) {
    unsigned i = t + j * THREADS;
    unsigned row = i / (D / 8), col = i % (D / 8) * 8;
    *(uint4_*)(o + (query_block * BLOCK_Q + row) * D + col) =
        *(const uint4_*)(q_tile + tile_offset<D>(row, col));
  }
}

// __launch_bounds__(THREADS): the Rust kernels' `max_threads = 128`.
#define ATTENTION(name, bf16, d)                                                                 \
  extern "C" __global__ void __launch_bounds__(THREADS)                                          \
      name(unsigned seq, float scale_log2, unsigned causal, const elem* q, const elem* k,       \
           const elem* v, elem* o) {                                                             \
    attention<bf16, d>(seq, scale_log2, causal, q, k, v, o);                                     \
  }

ATTENTION(attention_d64__f16, false, 64)
ATTENTION(attention_d64__bf16, true, 64)
ATTENTION(attention_d128__f16, false, 128)
ATTENTION(attention_d128__bf16, true, 128)
