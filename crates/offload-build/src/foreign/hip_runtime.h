#pragma once
#define __HIP_DEVICE_BUILTIN(DIMENSION, FUNCTION) \
  __declspec(property(get = __get_##DIMENSION)) unsigned int DIMENSION; \
  __device__ __attribute__((always_inline)) unsigned int __get_##DIMENSION(void) const { return FUNCTION; }
struct __offload_hip_thread_idx { __HIP_DEVICE_BUILTIN(x, __builtin_amdgcn_workitem_id_x()) __HIP_DEVICE_BUILTIN(y, __builtin_amdgcn_workitem_id_y()) __HIP_DEVICE_BUILTIN(z, __builtin_amdgcn_workitem_id_z()) };
struct __offload_hip_block_idx { __HIP_DEVICE_BUILTIN(x, __builtin_amdgcn_workgroup_id_x()) __HIP_DEVICE_BUILTIN(y, __builtin_amdgcn_workgroup_id_y()) __HIP_DEVICE_BUILTIN(z, __builtin_amdgcn_workgroup_id_z()) };
struct __offload_hip_block_dim { __HIP_DEVICE_BUILTIN(x, __builtin_amdgcn_workgroup_size_x()) __HIP_DEVICE_BUILTIN(y, __builtin_amdgcn_workgroup_size_y()) __HIP_DEVICE_BUILTIN(z, __builtin_amdgcn_workgroup_size_z()) };
extern const __device__ __attribute__((weak)) __offload_hip_thread_idx threadIdx;
extern const __device__ __attribute__((weak)) __offload_hip_block_idx blockIdx;
extern const __device__ __attribute__((weak)) __offload_hip_block_dim blockDim;
__device__ inline void __syncthreads() { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); }
