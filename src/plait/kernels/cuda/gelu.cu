#include "plait/kernels/cuda/gelu.h"

#include "plait/kernels/cuda/device.cuh"

namespace plait::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kCubic = 0.044715f;
constexpr float kThreeCubic = static_cast<float>(3 * 0.044715);  // as the CPU kernel rounds it

// Grid-stride loops: each element read once and written once by one thread.
template <typename T>
__global__ void forward_kernel(T* out, const T* inp, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const float x = to_float(inp[i]);
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    out[i] = from_float<T>(x / (1.0f + expf(-2.0f * u)));
  }
}

template <typename T>
__global__ void backward_kernel(T* dinp, const T* inp, const T* dout, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const float x = to_float(inp[i]);
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    const float s = 1.0f / (1.0f + expf(-2.0f * u));
    const float du = kSqrt2OverPi * (1.0f + kThreeCubic * x * x);
    dinp[i] = from_float<T>(to_float(dout[i]) * (s + 2.0f * x * s * (1.0f - s) * du));
  }
}

}  // namespace

template <typename T>
void gelu_forward(T* out, const T* inp, std::size_t n, const Context& ctx) {
  const auto count = static_cast<long long>(n);
  launch("gelu_forward", forward_kernel<T>, elementwise_grid(count, kThreads), dim3(kThreads), 0,
         ctx, out, inp, count);
}

template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, std::size_t n, const Context& ctx) {
  const auto count = static_cast<long long>(n);
  launch("gelu_backward", backward_kernel<T>, elementwise_grid(count, kThreads), dim3(kThreads), 0,
         ctx, dinp, inp, dout, count);
}

template void gelu_forward<float>(float*, const float*, std::size_t, const Context&);
template void gelu_forward<bf16>(bf16*, const bf16*, std::size_t, const Context&);
template void gelu_backward<float>(float*, const float*, const float*, std::size_t, const Context&);
template void gelu_backward<bf16>(bf16*, const bf16*, const bf16*, std::size_t, const Context&);

}  // namespace plait::kernels::cuda
