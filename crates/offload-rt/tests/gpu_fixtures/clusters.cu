// A kernel that reports each block's place in its thread-block cluster, for the runtime's
// cluster launches on compute capability 9.0 and later (regenerate.sh builds it for sm_90).
extern "C" __global__ void cluster_ranks(unsigned *out) {
  unsigned rank, blocks;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(blocks));
  if (threadIdx.x == 0) {
    out[2 * blockIdx.x] = rank;
    out[2 * blockIdx.x + 1] = blocks;
  }
}
