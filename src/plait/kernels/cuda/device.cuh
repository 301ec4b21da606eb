#pragma once
// Device-side helpers of the CUDA kernels (included by the .cu files only): the launch with its
// error check, fp32 <-> storage-type conversion, warp and block reductions, and the deterministic
// column sums of the weight-gradient kernels. Every kernel computes in fp32 whatever its storage
// type (llm.c's convention: floatX storage, float arithmetic).
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>

#include "plait/core/error.h"
#include "plait/kernels/cuda/context.h"
#include "plait/kernels/cuda/cuda_api.h"
#include "plait/kernels/cuda/cuda_check.h"

namespace plait::kernels::cuda {

inline constexpr int kWarp = 32;
// Shared memory a block gets without opting in (cudaFuncSetAttribute).
inline constexpr std::size_t kDefaultSharedBytes = 48 * 1024;

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
__host__ __device__ constexpr long long ceil_div(long long a, long long b) {
  return (a + b - 1) / b;
}

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(bf16 x) { return __bfloat162float(x); }

// fp32 to the storage type, rounding to nearest even for bf16.
template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float x) {
  return __float2bfloat16(x);
}

// Butterfly reduction over the 32 lanes of a warp: every lane ends with the result, and the
// order of the operations is fixed (deterministic). llm.c warpReduceSum / warpReduceMax.
template <typename V, typename Op>
__device__ __forceinline__ V warp_reduce(V v, Op op) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Reduction over all threads of a one-dimensional block (blockDim.x a multiple of 32, at most
// 1024); every thread gets the result. `partial` is the caller's __shared__ scratch of 32 values
// (one per instantiation: a kernel that reduces twice reuses it, which the first barrier makes
// safe: no thread writes it before every thread has read the previous result). All threads of
// the block must call it.
template <typename V, typename Op>
__device__ V block_reduce(V v, Op op, V identity, V (&partial)[kWarp]) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  v = warp_reduce(v, op);
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : identity;
  return warp_reduce(v, op);
}

struct Plus {
  template <typename V>
  __device__ V operator()(V a, V b) const {
    return a + b;
  }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename V>
__device__ __forceinline__ V warp_sum(V v) {
  return warp_reduce(v, Plus{});
}

template <typename V>
__device__ V block_sum(V v) {
  __shared__ V partial[kWarp];
  return block_reduce(v, Plus{}, V(0), partial);
}

__device__ __forceinline__ float block_max(float v) {
  __shared__ float partial[kWarp];
  return block_reduce(v, Max{}, -INFINITY, partial);
}

// One warp per row, kRowsPerBlock rows per block (llm.c layernorm_forward_kernel3): the lanes of
// a warp stride over a row's columns, 32 consecutive elements at a time.
inline constexpr int kRowsPerBlock = 8;
inline constexpr int kRowThreads = kRowsPerBlock * kWarp;
inline dim3 warp_per_row_grid(int rows) {
  return dim3(static_cast<unsigned>(ceil_div(rows, kRowsPerBlock)));
}
__device__ __forceinline__ int warp_row() {
  return blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
}

// Column sums for weight and bias gradients, deterministic (no atomics; the same bits on every
// run, as the CPU kernels' fixed column ranges): a block of (32, kColumnRows) threads owns the 32
// columns starting at blockIdx.x * 32; thread (x, y) adds term(i, j) for rows i = y, y +
// kColumnRows, ... of column j, then the kColumnRows partials of a column are added in order of
// y. Consecutive x read consecutive columns (coalesced). Returns the totals in threads with
// threadIdx.y == 0 (for other threads, or j >= c, the values are unspecified).
inline constexpr int kColumnRows = 8;
template <int kSums, typename Term>
__device__ void column_sums(int n, int c, Term term, float (&total)[kSums]) {
  __shared__ float partial[kSums][kColumnRows][kWarp + 1];
  const int j = blockIdx.x * kWarp + threadIdx.x;
  float acc[kSums];
  for (int k = 0; k < kSums; ++k) acc[k] = 0.0f;
  if (j < c) {
    for (int i = threadIdx.y; i < n; i += kColumnRows) {
      float t[kSums];
      term(i, j, t);
      for (int k = 0; k < kSums; ++k) acc[k] += t[k];
    }
  }
  for (int k = 0; k < kSums; ++k) partial[k][threadIdx.y][threadIdx.x] = acc[k];
  __syncthreads();
  if (threadIdx.y == 0) {
    for (int k = 0; k < kSums; ++k) {
      float s = 0.0f;
      for (int y = 0; y < kColumnRows; ++y) s += partial[k][y][threadIdx.x];
      total[k] = s;
    }
  }
}
inline dim3 column_sums_grid(int c) { return dim3(static_cast<unsigned>(ceil_div(c, kWarp))); }
inline dim3 column_sums_block() { return dim3(kWarp, kColumnRows); }

// A grid of `threads`-thread blocks covering n elements once (for grid-stride element loops the
// grid is capped: enough blocks to fill the device several times over).
inline dim3 elementwise_grid(long long n, int threads) {
  const long long blocks = ceil_div(n, static_cast<long long>(threads));
  constexpr long long kMaxBlocks = 1 << 16;
  return dim3(static_cast<unsigned>(blocks < kMaxBlocks ? (blocks > 0 ? blocks : 1) : kMaxBlocks));
}

// Launches kernel<<<grid, block, shared_bytes, ctx.stream()>>>(args...) and checks the launch
// (METHOD.md: check the last error after every launch). A kernel that needs more than the default
// 48 KiB of dynamic shared memory opts in first; more than the device allows is a plait::Error
// naming the kernel. An empty grid launches nothing.
template <typename... Params, typename... Args>
void launch(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block,
            std::size_t shared_bytes, const Context& ctx, Args&&... args) {
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
  if (shared_bytes > kDefaultSharedBytes) {
    if (shared_bytes > static_cast<std::size_t>(ctx.max_shared_bytes())) {
      throw Error(std::string(name) + ": needs " + std::to_string(shared_bytes) +
                  " bytes of shared memory per block; the device allows " +
                  std::to_string(ctx.max_shared_bytes()));
    }
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(shared_bytes)),
               std::string(name) + ": cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  }
#if defined(PLAIT_CUDA_EMULATION)
  cuda_emulation::run_grid(name, grid, block, shared_bytes,
                           [&] { kernel(static_cast<Params>(args)...); });
#else
  kernel<<<grid, block, shared_bytes, ctx.stream()>>>(static_cast<Params>(args)...);
#endif
  check_cuda(cudaGetLastError(), name);
}

}  // namespace plait::kernels::cuda

// The block's dynamic shared memory (the launch's shared_bytes), 16-byte aligned, as `type*`.
#if defined(PLAIT_CUDA_EMULATION)
#define PLAIT_DYNAMIC_SHARED(type, name) \
  type* name = reinterpret_cast<type*>(::plait::cuda_emulation::dynamic_shared())
#else
#define PLAIT_DYNAMIC_SHARED(type, name)                       \
  extern __shared__ __align__(16) unsigned char plait_smem_[]; \
  type* name = reinterpret_cast<type*>(plait_smem_)
#endif
