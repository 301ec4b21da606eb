#include "plait/kernels/cuda/matmul.h"

#include <cstddef>

#include "plait/kernels/cuda/device.cuh"
#include "plait/kernels/cuda/gemm.h"

namespace plait::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// out[i, o] = bias[o] + residual[i, o], either term optional (not both absent): the pre-fill the
// GEMM then accumulates onto (CPU matmul_forward's first loop).
template <typename T>
__global__ void prefill_kernel(T* out, const T* bias, const T* residual, int n, int oc) {
  const long long total = static_cast<long long>(n) * oc;
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int o = static_cast<int>(idx % oc);
    float v = 0.0f;
    if (bias) v = to_float(bias[o]);
    if (residual) v = bias ? v + to_float(residual[idx]) : to_float(residual[idx]);
    out[idx] = from_float<T>(v);
  }
}

// dbias[o] += sum_i dout[i, o] (CPU matmul_backward_weight's column sums).
template <typename T>
__global__ void bias_grad_kernel(float* dbias, const T* dout, int n, int oc) {
  float total[1];
  column_sums<1>(
      n, oc,
      [&](int i, int j, float(&t)[1]) {
        t[0] = to_float(dout[static_cast<std::size_t>(i) * oc + j]);
      },
      total);
  const int j = blockIdx.x * kWarp + threadIdx.x;
  if (threadIdx.y == 0 && j < oc) dbias[j] += total[0];
}

}  // namespace

template <typename T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, const T* residual, int n,
                    int c, int oc, const Context& ctx) {
  float beta = 0.0f;
  if (bias != nullptr || residual != nullptr) {
    launch("matmul_forward: bias and residual", prefill_kernel<T>,
           elementwise_grid(static_cast<long long>(n) * oc, kThreads), dim3(kThreads), 0, ctx, out,
           bias, residual, n, oc);
    beta = 1.0f;
  }
  gemm<T, T>(false, true, n, oc, c, 1.0f, inp, c, weight, c, beta, out, oc, ctx);
}

template <typename T>
void matmul_backward_input(T* dinp, const T* dout, const T* weight, int n, int c, int oc,
                           bool accumulate, const Context& ctx) {
  gemm<T, T>(false, false, n, c, oc, 1.0f, dout, oc, weight, c, accumulate ? 1.0f : 0.0f, dinp, c,
             ctx);
}

template <typename T>
void matmul_backward_weight(float* dweight, float* dbias, const T* dout, const T* inp, int n, int c,
                            int oc, const Context& ctx) {
  gemm<T, float>(true, false, oc, c, n, 1.0f, dout, oc, inp, c, 1.0f, dweight, c, ctx);
  if (dbias == nullptr) return;
  launch("matmul_backward_weight: bias", bias_grad_kernel<T>, column_sums_grid(oc),
         column_sums_block(), 0, ctx, dbias, dout, n, oc);
}

#define PLAIT_INSTANTIATE(T)                                                                 \
  template void matmul_forward<T>(T*, const T*, const T*, const T*, const T*, int, int, int, \
                                  const Context&);                                           \
  template void matmul_backward_input<T>(T*, const T*, const T*, int, int, int, bool,        \
                                         const Context&);                                    \
  template void matmul_backward_weight<T>(float*, float*, const T*, const T*, int, int, int, \
                                          const Context&);
PLAIT_INSTANTIATE(float)
PLAIT_INSTANTIATE(bf16)
#undef PLAIT_INSTANTIATE

}  // namespace plait::kernels::cuda
