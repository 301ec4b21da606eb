#pragma once
// A CPU emulation of the CUDA execution model and of the part of the CUDA runtime and cuBLASLt
// that plait's kernels use, so that their tests run on machines without a GPU (CI, this
// project's build machines) against the same CPU references as on a GPU. It checks the kernels'
// arithmetic, indexing, tiling, masks and barriers; it says nothing of their speed, of memory
// ordering between blocks, or of the GPU's own floating-point functions.
//
// How it runs a launch: blocks one after another; the threads of a block as fibers (ucontext) on
// the calling thread, switched at every __syncthreads, __syncwarp and warp shuffle, so that a
// barrier really waits for every thread of the block (or warp). A barrier that can never complete
// (threads waiting at different barriers, or some returned before a __syncthreads that others
// wait at, which is undefined on a GPU) throws plait::Error naming the kernel. __shared__
// variables become statics (one block runs at a time); dynamic shared memory, cudaMalloc'd memory
// and each block's shared memory start filled with 0xFF bytes (NaN in fp32 and bf16), so a read
// of memory nothing wrote shows up in the results. "Device" memory is host memory: the address
// sanitizer build catches a kernel's out-of-bounds accesses.
//
// The CUDA headers are included for their declarations and types (they compile with a host
// compiler); this emulation defines the functions (cuda_emulation.cpp) and is linked instead of
// libcudart and libcublasLt.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>

// Statics stand in for shared memory because blocks run one at a time.
#undef __shared__
#define __shared__ static
#undef __launch_bounds__
#define __launch_bounds__(...)
#undef __grid_constant__
#define __grid_constant__

namespace plait::cuda_emulation {

// Runs body() once per thread of every block of the grid (see above).
void run_grid(const char* name, dim3 grid, dim3 block, std::size_t shared_bytes,
              const std::function<void()>& body);
// The running block's dynamic shared memory.
void* dynamic_shared();
// Waits for every thread of the block; of the warp.
void sync_block();
void sync_warp(unsigned mask);
// The value `bytes` bytes at `value` of lane src_lane of the calling thread's warp, into `out`.
void exchange(unsigned mask, const void* value, void* out, std::size_t bytes, int src_lane);
// This thread's lane in its warp.
int lane();

}  // namespace plait::cuda_emulation

// The built-in variables of the running thread (set by the emulation before it resumes a thread).
inline uint3 threadIdx;
inline uint3 blockIdx;
inline dim3 blockDim;
inline dim3 gridDim;
inline constexpr int warpSize = 32;

inline void __syncthreads() { plait::cuda_emulation::sync_block(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { plait::cuda_emulation::sync_warp(mask); }

template <typename V>
V __shfl_sync(unsigned mask, V v, int src_lane, int width = warpSize) {
  V out;
  plait::cuda_emulation::exchange(mask, &v, &out, sizeof(V), src_lane % width);
  return out;
}
template <typename V>
V __shfl_xor_sync(unsigned mask, V v, int lane_mask, int width = warpSize) {
  V out;
  plait::cuda_emulation::exchange(mask, &v, &out, sizeof(V),
                                  (plait::cuda_emulation::lane() ^ lane_mask) % width);
  return out;
}

// Device math: the fast intrinsics are the exact functions here.
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
// One thread runs at a time: a read-modify-write is atomic by construction.
inline float atomicAdd(float* address, float value) {
  const float old = *address;
  *address = old + value;
  return old;
}

// The template forms cuda_runtime.h adds to the C API.
template <typename T>
cudaError_t cudaMalloc(T** pointer, std::size_t bytes) {
  return ::cudaMalloc(reinterpret_cast<void**>(pointer), bytes);
}
template <typename T>
cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attribute, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(entry), attribute, value);
}
