// The CUDA C twin of the fast GEMM of examples/gemm/kernels (its generic `gemm`, whose entry
// points are `gemm__f16` and `gemm__bf16`; the twins have their names, so rows line up): the
// same algorithm, written as a CUDA programmer writes a tensor-core GEMM without a library.
// C = A·B, row-major, A m×k and B k×n of 16-bit floats, C m×n of f32; m and n multiples of
// 128, k of 32. Launch: grid (n / 128, m / 128), 256 threads.
//
// A block computes a 128×128 tile of C from 128×32 slices of A and 32×128 slices of B,
// staged in shared memory by `cp.async` through a 3-stage ring. Its 8 warps form a 2×4 grid
// of 64×32 warp tiles; a warp multiplies with `ldmatrix` (A as stored, B transposed) and
// `mma.sync.m16n8k16`, accumulating in f32. Shared memory is swizzled in 16-byte chunks so
// that the 8 rows an `ldmatrix` reads fall in different banks.
//
// The kernels only move the elements' bits and hand them to `mma` through inline PTX, so
// both element types are `unsigned short` here (the PTX parameters are pointers either way).

#define BM 128
#define BN 128
#define BK 32
#define STAGES 3
#define THREADS 256

typedef unsigned short elem;

// The offset of element (r, col) of a staged 128×32 slice of A: 4 chunks of 8 per row, the
// chunk index XOR-ed with (r / 2) % 4.
__device__ __forceinline__ unsigned a_offset(unsigned r, unsigned col) {
  return r * BK + (((col / 8) ^ ((r / 2) % 4)) * 8) + col % 8;
}

// The offset of element (r, col) of a staged 32×128 slice of B: 16 chunks of 8 per row, the
// chunk index XOR-ed with r % 8.
__device__ __forceinline__ unsigned b_offset(unsigned r, unsigned col) {
  return r * BN + (((col / 8) ^ (r % 8)) * 8) + col % 8;
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

// d = a·b + d for one m16n8k16 tile: `a` four registers of A's fragment, `b` two of B's.
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

// Copies k-tile `kt` of the block's slices of A and B into stage `s`: 512 chunks of 16 bytes
// each, two per thread.
__device__ __forceinline__ void load_stage(unsigned sa, unsigned sb, const elem* a, const elem* b,
                                           unsigned n, unsigned k, unsigned block_row,
                                           unsigned block_col, unsigned kt, unsigned s,
                                           unsigned t) {
#pragma unroll
  for (unsigned j = 0; j < 2; ++j) {
    unsigned i = t + j * THREADS;
    unsigned row = i / 4, chunk = i % 4;
    cp_async16(sa + (s * BM * BK + a_offset(row, chunk * 8)) * 2,
               a + (block_row + row) * k + kt * BK + chunk * 8);
  }
#pragma unroll
  for (unsigned j = 0; j < 2; ++j) {
    unsigned i = t + j * THREADS;
    unsigned row = i / 16, chunk = i % 16;
    cp_async16(sb + (s * BK * BN + b_offset(row, chunk * 8)) * 2,
               b + (kt * BK + row) * n + block_col + chunk * 8);
  }
}

template <bool BF16>
__device__ __forceinline__ void gemm(unsigned m, unsigned n, unsigned k, const elem* a,
                                     const elem* b, float* c) {
  __shared__ __align__(128) elem sa[STAGES][BM * BK];
  __shared__ __align__(128) elem sb[STAGES][BK * BN];
  (void)m;
  unsigned t = threadIdx.x, lane = t % 32, w = t / 32;
  unsigned wm = w / 4, wn = w % 4;
  unsigned block_row = blockIdx.y * BM, block_col = blockIdx.x * BN;
  unsigned sa_base = shared_address(sa), sb_base = shared_address(sb);
  unsigned ktiles = k / BK;

  float acc[4][2][8];
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[mt][nt][e] = 0.0f;

#pragma unroll
  for (unsigned s = 0; s < STAGES - 1; ++s) {
    if (s < ktiles) load_stage(sa_base, sb_base, a, b, n, k, block_row, block_col, s, s, t);
    cp_async_commit();
  }

  for (unsigned kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    unsigned s = kt % STAGES;
    unsigned sa_stage = sa_base + s * BM * BK * 2, sb_stage = sb_base + s * BK * BN * 2;
#pragma unroll
    for (unsigned ks = 0; ks < 2; ++ks) {
      unsigned af[4][4], bf[2][4];
#pragma unroll
      for (unsigned mt = 0; mt < 4; ++mt)
        ldmatrix_x4(af[mt], sa_stage + a_offset(wm * 64 + mt * 16 + lane % 16,
                                                ks * 16 + (lane / 16) * 8) *
                                           2);
#pragma unroll
      for (unsigned nt = 0; nt < 2; ++nt)
        ldmatrix_x4_trans(bf[nt], sb_stage + b_offset(ks * 16 + ((lane / 8) % 2) * 8 + lane % 8,
                                                      wn * 32 + nt * 16 + (lane / 16) * 8) *
                                                 2);
#pragma unroll
      for (unsigned mt = 0; mt < 4; ++mt)
#pragma unroll
        for (unsigned nt = 0; nt < 2; ++nt) {
          mma_m16n8k16<BF16>(&acc[mt][nt][0], af[mt], &bf[nt][0]);
          mma_m16n8k16<BF16>(&acc[mt][nt][4], af[mt], &bf[nt][2]);
        }
    }
    if (kt + STAGES - 1 < ktiles)
      load_stage(sa_base, sb_base, a, b, n, k, block_row, block_col, kt + STAGES - 1,
                 (kt + STAGES - 1) % STAGES, t);
    cp_async_commit();
  }

  unsigned g = lane / 4, tq = lane % 4;
#pragma unroll
  for (unsigned mt = 0; mt < 4; ++mt)
#pragma unroll
    for (unsigned nt = 0; nt < 2; ++nt)
#pragma unroll
      for (unsigned e = 0; e < 8; ++e) {
        unsigned half = e >> 2, i = e & 3;
        unsigned row = wm * 64 + mt * 16 + g + 8 * (i >> 1);
        unsigned col = wn * 32 + nt * 16 + 2 * tq + (i & 1) + 8 * half;
        c[(block_row + row) * n + block_col + col] = acc[mt][nt][e];
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
