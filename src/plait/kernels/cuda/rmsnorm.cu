#include "plait/kernels/cuda/rmsnorm.h"

#include <cstddef>

#include "plait/kernels/cuda/device.cuh"

namespace plait::kernels::cuda {
namespace {

template <typename T>
__global__ void forward_kernel(T* out, float* rstd, const T* inp, const T* weight, int n, int c,
                               float eps) {
  const int row = warp_row();
  const int lane = threadIdx.x % kWarp;
  if (row >= n) return;
  const T* x = inp + static_cast<std::size_t>(row) * c;
  T* y = out + static_cast<std::size_t>(row) * c;
  float sum_sq = 0.0f;
  for (int j = lane; j < c; j += kWarp) {
    const float v = to_float(x[j]);
    sum_sq += v * v;
  }
  const float s = 1.0f / sqrtf(warp_sum(sum_sq) / c + eps);
  for (int j = lane; j < c; j += kWarp) {
    y[j] = from_float<T>(to_float(x[j]) * s * to_float(weight[j]));
  }
  if (lane == 0) rstd[row] = s;
}

// d rstd / d x_k = -rstd^3 x_k / C, so dx_k = rstd * (dnorm_k - xhat_k * mean(dnorm * xhat)).
template <typename T>
__global__ void backward_input_kernel(T* dinp, const T* dresidual, const T* dout, const T* inp,
                                      const T* weight, const float* rstd, int n, int c) {
  const int row = warp_row();
  const int lane = threadIdx.x % kWarp;
  if (row >= n) return;
  const std::size_t off = static_cast<std::size_t>(row) * c;
  const float s = rstd[row];
  float dnorm_xhat_mean = 0.0f;
  for (int j = lane; j < c; j += kWarp) {
    dnorm_xhat_mean += to_float(dout[off + j]) * to_float(weight[j]) * to_float(inp[off + j]) * s;
  }
  dnorm_xhat_mean = warp_sum(dnorm_xhat_mean) / c;
  for (int j = lane; j < c; j += kWarp) {
    const float g = s * (to_float(dout[off + j]) * to_float(weight[j]) -
                         to_float(inp[off + j]) * s * dnorm_xhat_mean);
    dinp[off + j] = from_float<T>(dresidual ? to_float(dresidual[off + j]) + g : g);
  }
}

template <typename T>
__global__ void backward_weight_kernel(float* dweight, const T* dout, const T* inp,
                                       const float* rstd, int n, int c) {
  float total[1];
  column_sums<1>(
      n, c,
      [&](int i, int j, float(&t)[1]) {
        const std::size_t at = static_cast<std::size_t>(i) * c + j;
        t[0] = to_float(dout[at]) * to_float(inp[at]) * rstd[i];
      },
      total);
  const int j = blockIdx.x * kWarp + threadIdx.x;
  if (threadIdx.y == 0 && j < c) dweight[j] += total[0];
}

}  // namespace

template <typename T>
void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, int n, int c, double eps,
                     const Context& ctx) {
  launch("rmsnorm_forward", forward_kernel<T>, warp_per_row_grid(n), dim3(kRowThreads), 0, ctx, out,
         rstd, inp, weight, n, c, static_cast<float>(eps));
}

template <typename T>
void rmsnorm_backward_input(T* dinp, const T* dresidual, const T* dout, const T* inp,
                            const T* weight, const float* rstd, int n, int c, const Context& ctx) {
  launch("rmsnorm_backward_input", backward_input_kernel<T>, warp_per_row_grid(n),
         dim3(kRowThreads), 0, ctx, dinp, dresidual, dout, inp, weight, rstd, n, c);
}

template <typename T>
void rmsnorm_backward_weight(float* dweight, const T* dout, const T* inp, const float* rstd, int n,
                             int c, const Context& ctx) {
  launch("rmsnorm_backward_weight", backward_weight_kernel<T>, column_sums_grid(c),
         column_sums_block(), 0, ctx, dweight, dout, inp, rstd, n, c);
}

#define PLAIT_INSTANTIATE(T)                                                                   \
  template void rmsnorm_forward<T>(T*, float*, const T*, const T*, int, int, double,           \
                                   const Context&);                                            \
  template void rmsnorm_backward_input<T>(T*, const T*, const T*, const T*, const T*,          \
                                          const float*, int, int, const Context&);             \
  template void rmsnorm_backward_weight<T>(float*, const T*, const T*, const float*, int, int, \
                                           const Context&);
PLAIT_INSTANTIATE(float)
PLAIT_INSTANTIATE(bf16)
#undef PLAIT_INSTANTIATE

}  // namespace plait::kernels::cuda
