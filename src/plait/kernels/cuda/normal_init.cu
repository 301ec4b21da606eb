#include "plait/kernels/cuda/normal_init.h"

#include "plait/kernels/cuda/device.cuh"

namespace plait::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// core/splitmix64.h's mixer, repeated here because a constexpr host function cannot be called
// from device code without nvcc's --expt-relaxed-constexpr; the test against the CPU kernel
// pins that the two agree.
__device__ __forceinline__ std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__global__ void normal_init_kernel(float* values, long long n, double std, std::uint64_t key) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const std::uint64_t r = splitmix64(key + static_cast<std::uint64_t>(i));
    const double u1 = (static_cast<double>(r >> 32) + 1.0) / 4294967296.0;  // (0, 1]
    const double u2 = static_cast<double>(r & 0xFFFFFFFFull) / 4294967296.0;
    values[i] = static_cast<float>(std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
  }
}

}  // namespace

void normal_init(float* values, std::size_t n, double std, std::uint64_t key, const Context& ctx) {
  const auto count = static_cast<long long>(n);
  launch("normal_init", normal_init_kernel, elementwise_grid(count, kThreads), dim3(kThreads), 0,
         ctx, values, count, std, key);
}

}  // namespace plait::kernels::cuda
