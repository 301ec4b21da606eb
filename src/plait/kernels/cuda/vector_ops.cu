#include "plait/kernels/cuda/vector_ops.h"

#include "plait/kernels/cuda/device.cuh"

namespace plait::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Grid-stride loops: each element written once by one thread.
__global__ void fill_kernel(float* dst, long long n, float value) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    dst[i] = value;
  }
}

__global__ void accumulate_kernel(float* dst, const float* src, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    dst[i] += src[i];
  }
}

// One conversion per element, the storage helpers of device.cuh (to_float is exact, from_float
// rounds to nearest even).
template <typename To, typename From>
__global__ void convert_kernel(To* dst, const From* src, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    dst[i] = from_float<To>(to_float(src[i]));
  }
}

}  // namespace

void fill(float* dst, std::size_t n, float value, const Context& ctx) {
  const auto count = static_cast<long long>(n);
  launch("fill", fill_kernel, elementwise_grid(count, kThreads), dim3(kThreads), 0, ctx, dst,
         count, value);
}

void accumulate(float* dst, const float* src, std::size_t n, const Context& ctx) {
  const auto count = static_cast<long long>(n);
  launch("accumulate", accumulate_kernel, elementwise_grid(count, kThreads), dim3(kThreads), 0,
         ctx, dst, src, count);
}

void convert(bf16* dst, const float* src, std::size_t n, const Context& ctx) {
  const auto count = static_cast<long long>(n);
  launch("convert", convert_kernel<bf16, float>, elementwise_grid(count, kThreads), dim3(kThreads),
         0, ctx, dst, src, count);
}

void convert(float* dst, const bf16* src, std::size_t n, const Context& ctx) {
  const auto count = static_cast<long long>(n);
  launch("convert", convert_kernel<float, bf16>, elementwise_grid(count, kThreads), dim3(kThreads),
         0, ctx, dst, src, count);
}

}  // namespace plait::kernels::cuda
