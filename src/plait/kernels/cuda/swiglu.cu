#include "plait/kernels/cuda/swiglu.h"

#include "plait/kernels/cuda/device.cuh"

namespace plait::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per output element (i, j) of the (N, F) result, grid-stride; consecutive threads
// read consecutive gate (and up) columns of a row.
template <typename T>
__global__ void forward_kernel(T* out, const T* gate_up, int n, int f) {
  const long long total = static_cast<long long>(n) * f;
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long i = idx / f, j = idx % f;
    const float g = to_float(gate_up[i * 2 * f + j]);
    const float u = to_float(gate_up[i * 2 * f + f + j]);
    out[idx] = from_float<T>(g / (1.0f + expf(-g)) * u);
  }
}

template <typename T>
__global__ void backward_kernel(T* dgate_up, const T* dout, const T* gate_up, int n, int f) {
  const long long total = static_cast<long long>(n) * f;
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long i = idx / f, j = idx % f;
    const float g = to_float(gate_up[i * 2 * f + j]);
    const float u = to_float(gate_up[i * 2 * f + f + j]);
    const float dy = to_float(dout[idx]);
    const float s = 1.0f / (1.0f + expf(-g));
    const float silu = g * s;
    dgate_up[i * 2 * f + j] = from_float<T>(dy * u * s * (1.0f + g * (1.0f - s)));
    dgate_up[i * 2 * f + f + j] = from_float<T>(dy * silu);
  }
}

}  // namespace

template <typename T>
void swiglu_forward(T* out, const T* gate_up, int n, int f, const Context& ctx) {
  launch("swiglu_forward", forward_kernel<T>,
         elementwise_grid(static_cast<long long>(n) * f, kThreads), dim3(kThreads), 0, ctx, out,
         gate_up, n, f);
}

template <typename T>
void swiglu_backward(T* dgate_up, const T* dout, const T* gate_up, int n, int f,
                     const Context& ctx) {
  launch("swiglu_backward", backward_kernel<T>,
         elementwise_grid(static_cast<long long>(n) * f, kThreads), dim3(kThreads), 0, ctx,
         dgate_up, dout, gate_up, n, f);
}

template void swiglu_forward<float>(float*, const float*, int, int, const Context&);
template void swiglu_forward<bf16>(bf16*, const bf16*, int, int, const Context&);
template void swiglu_backward<float>(float*, const float*, const float*, int, int, const Context&);
template void swiglu_backward<bf16>(bf16*, const bf16*, const bf16*, int, int, const Context&);

}  // namespace plait::kernels::cuda
