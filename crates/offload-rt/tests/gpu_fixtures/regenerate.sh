#!/bin/sh
# Regenerates the PTX and cubins of the GPU test suite from kernels.cu (clang-22 and the
# CUDA toolkit's ptxas). The outputs are kept in the repository because the machines that
# run the suite need not have either tool.
set -eu
cd "$(dirname "$0")"
CUDA_PATH=${CUDA_PATH:-/usr/lib/cuda}
for sm in 52 70; do
  clang-22 --cuda-device-only -S -O3 --cuda-gpu-arch=sm_$sm -nocudalib --cuda-path="$CUDA_PATH" \
    kernels.cu -o kernels.sm_$sm.ptx
done
ptxas -arch=sm_52 kernels.sm_52.ptx -o kernels.sm_52.cubin
for sm in 80 90; do
  ptxas -arch=sm_$sm kernels.sm_70.ptx -o kernels.sm_$sm.cubin
done
for arch in gfx90a gfx942 gfx1100; do
  clang-22 -x hip --offload-arch=$arch -nogpulib -nogpuinc --cuda-device-only --no-gpu-bundle-output \
    -O3 -c kernels.hip -o kernels.$arch.co
done
# Thread-block clusters: PTX 7.8 and sm_90 from the start.
clang-22 --cuda-device-only -S -O3 --cuda-gpu-arch=sm_90 -nocudalib --cuda-path="$CUDA_PATH" \
  clusters.cu -o clusters.sm_90.ptx
ptxas -arch=sm_90 clusters.sm_90.ptx -o clusters.sm_90.cubin
