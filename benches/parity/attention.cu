// The CUDA C twin of the attention kernels of examples/attention/kernels (their generic
// `attention_d64` and `attention_d128`, whose entry points are `attention_d64__f16`, …; the
// twins have their names, so rows line up): the same algorithm, FlashAttention-2's forward
// pass written as a CUDA programmer writes it without a library.
// O = softmax(Q·Kᵀ·scale)·V per head; Q, K, V, O are [head][seq][D] of 16-bit floats; seq a
// multiple of 64. Launch: grid (seq / 64, heads), 128 threads.
//
// A block takes 64 rows of Q; its 4 warps hold 16 rows each as `mma` fragments for the whole
// walk over the keys. Each step copies 64 rows of K and of V into shared memory with
// `cp.async` (K's next tile while V's is used, and the reverse), multiplies Q by Kᵀ
// (`ldmatrix` of K's rows, `mma.sync.m16n8k16`), keeps each row's running maximum and sum in
// powers of two (`ex2.approx`), and multiplies the probabilities, converted in registers into
// A fragments, by V (`ldmatrix.trans`). The tiles are swizzled in 16-byte chunks (chunk c of
// row r at c ^ (r % 8)); the output goes through Q's tile and leaves 16 bytes at a time.
//
// The kernels only move the elements' bits and hand them to `mma` through inline PTX, so
// both element types are `unsigned short` here; the conversions are PTX's `cvt`.

#define BQ 64
#define BKV 64
#define THREADS 128

typedef unsigned short elem;

template <int D>
__device__ __forceinline__ unsigned tile_offset(unsigned r, unsigned col) {
  return r * D + (((col / 8) ^ (r % 8)) * 8) + col % 8;
}

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

template <bool BF16>
__device__ __forceinline__ void mma_m16n8k16(float* d, const unsigned* a, const unsigned* b) {
  if (BF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// `a` and `b` rounded to the element type, `a` in the low half.
template <bool BF16>
__device__ __forceinline__ unsigned pack(float a, float b) {
  unsigned r;
  if (BF16)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
  return r;
}

// The 64×D rows of `src` from `row0` into the tile at shared address `tile`.
template <int D>
__device__ __forceinline__ void fill(unsigned tile, const elem* src, unsigned row0, unsigned t) {
#pragma unroll
  for (unsigned i = t; i < BQ * D / 8; i += THREADS) {
    unsigned row = i / (D / 8), col = i % (D / 8) * 8;
    cp_async16(tile + tile_offset<D>(row, col) * 2, src + (row0 + row) * D + col);
  }
}

template <bool BF16, int D>
__device__ __forceinline__ void attention(unsigned seq, float scale_log2, unsigned causal,
                                          const elem* q, const elem* k, const elem* v, elem* o) {
  __shared__ __align__(128) elem tiles[3][BQ * D];
  unsigned t = threadIdx.x, lane = t % 32, warp_row = t / 32 * 16;
  unsigned g = lane / 4, tq = lane % 4;
  unsigned query_block = gridDim.x - 1 - blockIdx.x;
  unsigned long long head = (unsigned long long)blockIdx.y * seq * D;
  q += head;
  k += head;
  v += head;
  o += head;
  unsigned qs = shared_address(tiles[0]), ks = shared_address(tiles[1]),
           vs = shared_address(tiles[2]);
  unsigned key_blocks = causal ? query_block + 1 : seq / BKV;

  fill<D>(qs, q, query_block * BQ, t);
  cp_async_commit();
  fill<D>(ks, k, 0, t);
  cp_async_commit();
  fill<D>(vs, v, 0, t);
  cp_async_commit();
  cp_async_wait<2>();
  __syncthreads();

  unsigned qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    ldmatrix_x4(qf[kk], qs + tile_offset<D>(warp_row + lane % 16, kk * 16 + lane / 16 * 8) * 2);

  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
  float out[D / 16][8];
#pragma unroll
  for (int d = 0; d < D / 16; ++d)
#pragma unroll
    for (int e = 0; e < 8; ++e) out[d][e] = 0.0f;

  for (unsigned key_block = 0; key_block < key_blocks; ++key_block) {
    cp_async_wait<1>();
    __syncthreads();
    float s[4][8];
#pragma unroll
    for (int c = 0; c < 4; ++c)
#pragma unroll
      for (int e = 0; e < 8; ++e) s[c][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        unsigned kt[4];
        ldmatrix_x4(kt, ks + tile_offset<D>(c * 16 + lane / 16 * 8 + lane % 8,
                                            kk * 16 + lane / 8 % 2 * 8) *
                                2);
        mma_m16n8k16<BF16>(&s[c][0], qf[kk], &kt[0]);
        mma_m16n8k16<BF16>(&s[c][4], qf[kk], &kt[2]);
      }
    __syncthreads();
    if (key_block + 1 < key_blocks) fill<D>(ks, k, (key_block + 1) * BKV, t);
    cp_async_commit();

    if (causal && key_block == query_block) {
#pragma unroll
      for (int c = 0; c < 4; ++c)
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          unsigned row = g + 8 * ((e >> 1) & 1), col = 2 * tq + (e & 1) + 8 * (e >> 2);
          if (c * 16 + col > warp_row + row) s[c][e] = -INFINITY;
        }
    }
    // Each row's maximum: this lane's elements of both of its rows, then its group of 4.
    float tile_max[2];
#pragma unroll
    for (int c = 0; c < 4; ++c)
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        int slot = (e >> 1) & 1;
        tile_max[slot] = (c == 0 && (e == 0 || e == 2)) ? s[c][e] : __builtin_fmaxf(tile_max[slot], s[c][e]);
      }
    float rescale[2], new_max[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = __builtin_fmaxf(tile_max[r], __shfl_xor_sync(0xffffffff, tile_max[r], 1));
      tile_max[r] = __builtin_fmaxf(tile_max[r], __shfl_xor_sync(0xffffffff, tile_max[r], 2));
      new_max[r] = __builtin_fmaxf(row_max[r], tile_max[r] * scale_log2);
      rescale[r] = exp2_approx(row_max[r] - new_max[r]);
    }
    float tile_sum[2];
#pragma unroll
    for (int c = 0; c < 4; ++c)
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        int slot = (e >> 1) & 1;
        s[c][e] = exp2_approx(__builtin_fmaf(s[c][e], scale_log2, -new_max[slot]));
        tile_sum[slot] = (c == 0 && (e == 0 || e == 2)) ? s[c][e] : tile_sum[slot] + s[c][e];
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_sum[r] += __shfl_xor_sync(0xffffffff, tile_sum[r], 1);
      tile_sum[r] += __shfl_xor_sync(0xffffffff, tile_sum[r], 2);
      row_sum[r] = row_sum[r] * rescale[r] + tile_sum[r];
      row_max[r] = new_max[r];
    }
#pragma unroll
    for (int d = 0; d < D / 16; ++d)
#pragma unroll
      for (int e = 0; e < 8; ++e) out[d][e] *= rescale[(e >> 1) & 1];

    cp_async_wait<1>();
    __syncthreads();
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      // mma's accumulator layout is its A fragment's: each lane packs its own elements.
      unsigned p[4];
#pragma unroll
      for (int w = 0; w < 4; ++w) p[w] = pack<BF16>(s[c][2 * w], s[c][2 * w + 1]);
#pragma unroll
      for (int d = 0; d < D / 16; ++d) {
        unsigned vf[4];
        ldmatrix_x4_trans(vf, vs + tile_offset<D>(c * 16 + lane / 8 % 2 * 8 + lane % 8,
                                                  d * 16 + lane / 16 * 8) *
                                       2);
        mma_m16n8k16<BF16>(&out[d][0], p, &vf[0]);
        mma_m16n8k16<BF16>(&out[d][4], p, &vf[2]);
      }
    }
    __syncthreads();
    if (key_block + 1 < key_blocks) fill<D>(vs, v, (key_block + 1) * BKV, t);
    cp_async_commit();
  }

  // O's rows times the inverses of their sums, rounded into Q's tile, then copied out.
  float inverse[2] = {1.0f / row_sum[0], 1.0f / row_sum[1]};
  elem* qt = tiles[0];
#pragma unroll
  for (int d = 0; d < D / 16; ++d) {
#if __CUDA_ARCH__ >= 900
    unsigned words[4];
#pragma unroll
    for (int w = 0; w < 4; ++w)
      words[w] = pack<BF16>(out[d][2 * w] * inverse[w & 1], out[d][2 * w + 1] * inverse[w & 1]);
    unsigned i = lane / 8, r = lane % 8;
    unsigned address = qs + tile_offset<D>(warp_row + r + 8 * (i % 2), d * 16 + 8 * (i / 2)) * 2;
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                     address),
                 "r"(words[0]), "r"(words[1]), "r"(words[2]), "r"(words[3])
                 : "memory");
#else
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      unsigned row = g + 8 * ((e >> 1) & 1), col = 2 * tq + (e & 1) + 8 * (e >> 2);
      float x = out[d][e] * inverse[(e >> 1) & 1];
      unsigned short h;
      if (BF16)
        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
      else
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
      qt[tile_offset<D>(warp_row + row, d * 16 + col)] = h;
    }
#endif
  }
  __syncthreads();
#pragma unroll
  for (unsigned i = t; i < BQ * D / 8; i += THREADS) {
    unsigned row = i / (D / 8), col = i % (D / 8) * 8;
    *reinterpret_cast<uint4*>(o + (query_block * BQ + row) * D + col) =
        *reinterpret_cast<const uint4*>(qt + tile_offset<D>(row, col));
  }
}

// __launch_bounds__(THREADS): the Rust kernels' `max_threads = 128`.
#define ATTENTION(name, bf16, d)                                                              \
  extern "C" __global__ void __launch_bounds__(THREADS)                                       \
      name(unsigned seq, float scale_log2, unsigned causal, const elem* q, const elem* k,      \
           const elem* v, elem* o) {                                                           \
    attention<bf16, d>(seq, scale_log2, causal, q, k, v, o);                                  \
  }

ATTENTION(attention_d64__f16, false, 64)
ATTENTION(attention_d64__bf16, true, 64)
ATTENTION(attention_d128__f16, false, 128)
ATTENTION(attention_d128__bf16, true, 128)
