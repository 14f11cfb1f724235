// The CUDA C twin of the Hopper GEMM of examples/gemm/kernels (its generic `gemm_tma`, whose
// entry points are `gemm_tma__f16` and `gemm_tma__bf16`; the twins have their names, so rows
// line up): the same algorithm, as a CUDA programmer writes a warp-specialized `wgmma` GEMM
// without a library. C = A·Bᵀ: A m×k and Bᵀ n×k row-major of 16-bit floats, C m×n row-major
// f32; m and n multiples of 128, k of 64. Launch: grid (n / 128, m / 128), 384 threads,
// 132096 bytes of dynamic shared memory; sm_90a.
//
// Warpgroup 0 gives up registers (setmaxnreg 40) and one of its threads fills a ring of 4
// stages (128×64 of A and of Bᵀ each, 128-byte swizzle) with TMA loads completing on each
// stage's `full` mbarrier. Warpgroups 1 and 2 take registers (setmaxnreg 232), wait for a
// stage, multiply their 64 rows by the 128 columns with four wgmma m64n128k16 (descriptors
// straight into the swizzled stage), wait, and release the stage on its `empty` mbarrier.

#define BM 128
#define BN 128
#define BK 64
#define STAGES 4
#define SLICE_BYTES (BM * BK * 2)

struct __align__(64) TensorMap {
  unsigned long long words[16];
};

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx_arrive(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(unsigned bar, unsigned parity) {
  unsigned done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

__device__ __forceinline__ void tma_load(unsigned dst, const TensorMap* map, unsigned bar, int c0,
                                         int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];" ::"r"(dst),
      "l"(map), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

__device__ __forceinline__ unsigned long long descriptor(unsigned address) {
  return (unsigned long long)((address & 0x3ffff) >> 4) | (1ull << 16) |
         ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

template <bool BF16>
__device__ __forceinline__ void wgmma128(float (&d)[64], unsigned long long a,
                                         unsigned long long b) {
#define WGMMA_OPERANDS                                                                        \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),         \
      "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), \
      "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),           \
      "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),           \
      "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),           \
      "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]),           \
      "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),           \
      "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),           \
      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),           \
      "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]),           \
      "+f"(d[62]), "+f"(d[63])
#define WGMMA_REGS                                                                            \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "     \
  "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, " \
  "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, " \
  "%55, %56, %57, %58, %59, %60, %61, %62, %63}"
  if (BF16) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WGMMA_REGS
                 ", %64, %65, 1, 1, 1, 0, 0;"
                 : WGMMA_OPERANDS
                 : "l"(a), "l"(b));
  } else {
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " WGMMA_REGS
                 ", %64, %65, 1, 1, 1, 0, 0;"
                 : WGMMA_OPERANDS
                 : "l"(a), "l"(b));
  }
}

template <bool BF16>
__device__ __forceinline__ void gemm_tma(unsigned n, unsigned k, const TensorMap* a_map,
                                         const TensorMap* b_map, float* c) {
  extern __shared__ unsigned char raw[];
  __shared__ __align__(8) unsigned long long bars[2 * STAGES];
  unsigned base = shared_address(raw);
  unsigned stages = base + (1024 - base % 1024) % 1024;
  unsigned thread = threadIdx.x, group = thread / 128;
  unsigned full = shared_address(bars), empty = full + 8 * STAGES;
  if (thread == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full + 8 * s, 1);
      mbar_init(empty + 8 * s, 2);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  unsigned block_row = blockIdx.y * BM, block_col = blockIdx.x * BN;
  unsigned slices = k / BK;
  if (group == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (thread == 0) {
      unsigned s = 0, phase = 0;
      for (unsigned t = 0; t < slices; ++t) {
        mbar_wait(empty + 8 * s, phase ^ 1);
        mbar_expect_tx_arrive(full + 8 * s, 2 * SLICE_BYTES);
        tma_load(stages + s * SLICE_BYTES, a_map, full + 8 * s, t * BK, block_row);
        tma_load(stages + (STAGES + s) * SLICE_BYTES, b_map, full + 8 * s, t * BK, block_col);
        if (++s == STAGES) {
          s = 0;
          phase ^= 1;
        }
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  unsigned consumer = group - 1;
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  unsigned s = 0, phase = 0;
  for (unsigned t = 0; t < slices; ++t) {
    mbar_wait(full + 8 * s, phase);
    unsigned a_rows = stages + s * SLICE_BYTES + consumer * 64 * 128;
    unsigned b_rows = stages + (STAGES + s) * SLICE_BYTES;
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int step = 0; step < 4; ++step) {
      wgmma128<BF16>(acc, descriptor(a_rows) + 2 * step, descriptor(b_rows) + 2 * step);
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    if (thread % 128 == 0) mbar_arrive(empty + 8 * s);
    if (++s == STAGES) {
      s = 0;
      phase ^= 1;
    }
  }
  unsigned local = thread % 128, warp = local / 32, lane = local % 32;
  unsigned row = block_row + consumer * 64 + 16 * warp + lane / 4;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    unsigned col = block_col + 8 * j + 2 * (lane % 4);
    *reinterpret_cast<float2*>(c + row * n + col) = make_float2(acc[4 * j], acc[4 * j + 1]);
    *reinterpret_cast<float2*>(c + (row + 8) * n + col) =
        make_float2(acc[4 * j + 2], acc[4 * j + 3]);
  }
}

extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_tma__f16(unsigned n, unsigned k, const TensorMap* a_map, const TensorMap* b_map,
                  float* c) {
  gemm_tma<false>(n, k, a_map, b_map, c);
}

extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_tma__bf16(unsigned n, unsigned k, const TensorMap* a_map, const TensorMap* b_map,
                   float* c) {
  gemm_tma<true>(n, k, a_map, b_map, c);
}
