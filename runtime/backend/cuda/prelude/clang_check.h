// What NVRTC gives the CUDA prelude, declared for clang's CUDA mode, so CI
// can type-check the CUDA rendering of kernels.metal without the CUDA
// toolkit or a GPU (runtime/backend/cuda ClangCheck):
//
//   clang -x cuda --cuda-device-only --cuda-gpu-arch=sm_80 -nocudainc \
//     -nocudalib -fsyntax-only -include clang_check.h unit.cu
//
// Only declarations: nothing is compiled to machine code. NVRTC on the
// device is the real compiler; this catches what the generator or the
// prelude break in between (a missing overload, a vector operator, a
// signature that disagrees with the metadata).
#ifndef STRATA_CLANG_CUDA_CHECK
#define STRATA_CLANG_CUDA_CHECK

#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __host__ __attribute__((host))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#include <__clang_cuda_builtin_vars.h>

// CUDA's math (the overloads kernels.metal calls unqualified).
#define __STRATA_F1(f) __device__ float f(float); __device__ float f##f(float);
__STRATA_F1(exp) __STRATA_F1(exp2) __STRATA_F1(log) __STRATA_F1(sqrt) __STRATA_F1(rsqrt) __STRATA_F1(sin)
__STRATA_F1(cos) __STRATA_F1(fabs) __STRATA_F1(floor)
__device__ float pow(float, float); __device__ float powf(float, float);
__device__ float copysign(float, float); __device__ float copysignf(float, float);
__device__ float fmax(float, float); __device__ float fmaxf(float, float);
__device__ float fmin(float, float); __device__ float fminf(float, float);
__device__ bool isnan(float); __device__ bool isinf(float);
__device__ float abs(float); __device__ int abs(int);
__device__ float min(float, float); __device__ float max(float, float);
__device__ int min(int, int); __device__ int max(int, int);
__device__ unsigned min(unsigned, unsigned); __device__ unsigned max(unsigned, unsigned);
__device__ unsigned long min(unsigned long, unsigned long); __device__ unsigned long max(unsigned long, unsigned long);
__device__ float __int_as_float(int);

// Intrinsics, warp functions, barriers, atomics.
__device__ int __clz(int); __device__ int __popc(unsigned); __device__ int __ffs(int);
__device__ unsigned __activemask();
__device__ int __any_sync(unsigned, int); __device__ int __all_sync(unsigned, int);
template <typename T> __device__ T __shfl_xor_sync(unsigned, T, int, int = 32);
template <typename T> __device__ T __shfl_up_sync(unsigned, T, unsigned, int = 32);
template <typename T> __device__ T __shfl_down_sync(unsigned, T, unsigned, int = 32);
template <typename T> __device__ T __shfl_sync(unsigned, T, int, int = 32);
__device__ void __syncthreads(); __device__ void __syncwarp(unsigned = 0xffffffffu); __device__ void __threadfence();
__device__ unsigned atomicAdd(unsigned *, unsigned); __device__ int atomicAdd(int *, int);
__device__ unsigned atomicMax(unsigned *, unsigned); __device__ int atomicMax(int *, int);
__device__ unsigned atomicMin(unsigned *, unsigned); __device__ int atomicMin(int *, int);
extern "C" __device__ void *memcpy(void *, const void *, unsigned long);

// NVRTC's --device-as-default-execution-space: kernels.metal's helpers.
#define __STRATA_DEFAULT_DEVICE_BEGIN _Pragma("clang force_cuda_host_device begin")
#define __STRATA_DEFAULT_DEVICE_END _Pragma("clang force_cuda_host_device end")

#endif
