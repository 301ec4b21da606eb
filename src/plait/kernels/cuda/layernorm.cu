#include "plait/kernels/cuda/layernorm.h"

#include <cstddef>

#include "plait/kernels/cuda/device.cuh"

namespace plait::kernels::cuda {
namespace {

template <typename T>
__global__ void forward_kernel(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                               const T* bias, int n, int c, float eps) {
  const int row = warp_row();
  const int lane = threadIdx.x % kWarp;
  if (row >= n) return;  // no barriers below: whole warps leave together
  const T* x = inp + static_cast<std::size_t>(row) * c;
  T* y = out + static_cast<std::size_t>(row) * c;
  // Two passes, as the CPU kernel: the mean, then the centred variance (no E[x^2] - E[x]^2
  // cancellation).
  float sum = 0.0f;
  for (int j = lane; j < c; j += kWarp) sum += to_float(x[j]);
  const float m = warp_sum(sum) / c;
  float var = 0.0f;
  for (int j = lane; j < c; j += kWarp) {
    const float d = to_float(x[j]) - m;
    var += d * d;
  }
  const float s = 1.0f / sqrtf(warp_sum(var) / c + eps);
  for (int j = lane; j < c; j += kWarp) {
    y[j] = from_float<T>((to_float(x[j]) - m) * s * to_float(weight[j]) + to_float(bias[j]));
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

template <typename T>
__global__ void backward_input_kernel(T* dinp, const T* dresidual, const T* dout, const T* inp,
                                      const T* weight, const float* mean, const float* rstd, int n,
                                      int c) {
  const int row = warp_row();
  const int lane = threadIdx.x % kWarp;
  if (row >= n) return;
  const std::size_t off = static_cast<std::size_t>(row) * c;
  const float m = mean[row], s = rstd[row];
  float dnorm_mean = 0.0f, dnorm_xhat_mean = 0.0f;
  for (int j = lane; j < c; j += kWarp) {
    const float dnorm = to_float(dout[off + j]) * to_float(weight[j]);
    dnorm_mean += dnorm;
    dnorm_xhat_mean += dnorm * (to_float(inp[off + j]) - m) * s;
  }
  dnorm_mean = warp_sum(dnorm_mean) / c;
  dnorm_xhat_mean = warp_sum(dnorm_xhat_mean) / c;
  for (int j = lane; j < c; j += kWarp) {
    const float xhat = (to_float(inp[off + j]) - m) * s;
    const float g =
        s * (to_float(dout[off + j]) * to_float(weight[j]) - dnorm_mean - xhat * dnorm_xhat_mean);
    // dinp may alias dresidual: each element is read and then written by the same thread.
    dinp[off + j] = from_float<T>(dresidual ? to_float(dresidual[off + j]) + g : g);
  }
}

template <typename T>
__global__ void backward_weight_kernel(float* dweight, float* dbias, const T* dout, const T* inp,
                                       const float* mean, const float* rstd, int n, int c) {
  float total[2];
  column_sums<2>(
      n, c,
      [&](int i, int j, float(&t)[2]) {
        const std::size_t at = static_cast<std::size_t>(i) * c + j;
        const float dy = to_float(dout[at]);
        t[0] = dy * (to_float(inp[at]) - mean[i]) * rstd[i];
        t[1] = dy;
      },
      total);
  const int j = blockIdx.x * kWarp + threadIdx.x;
  if (threadIdx.y == 0 && j < c) {
    dweight[j] += total[0];
    dbias[j] += total[1];
  }
}

}  // namespace

template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                       const T* bias, int n, int c, double eps, const Context& ctx) {
  launch("layernorm_forward", forward_kernel<T>, warp_per_row_grid(n), dim3(kRowThreads), 0, ctx,
         out, mean, rstd, inp, weight, bias, n, c, static_cast<float>(eps));
}

template <typename T>
void layernorm_backward_input(T* dinp, const T* dresidual, const T* dout, const T* inp,
                              const T* weight, const float* mean, const float* rstd, int n, int c,
                              const Context& ctx) {
  launch("layernorm_backward_input", backward_input_kernel<T>, warp_per_row_grid(n),
         dim3(kRowThreads), 0, ctx, dinp, dresidual, dout, inp, weight, mean, rstd, n, c);
}

template <typename T>
void layernorm_backward_weight(float* dweight, float* dbias, const T* dout, const T* inp,
                               const float* mean, const float* rstd, int n, int c,
                               const Context& ctx) {
  launch("layernorm_backward_weight", backward_weight_kernel<T>, column_sums_grid(c),
         column_sums_block(), 0, ctx, dweight, dbias, dout, inp, mean, rstd, n, c);
}

#define PLAIT_INSTANTIATE(T)                                                                       \
  template void layernorm_forward<T>(T*, float*, float*, const T*, const T*, const T*, int, int,   \
                                     double, const Context&);                                      \
  template void layernorm_backward_input<T>(T*, const T*, const T*, const T*, const T*,            \
                                            const float*, const float*, int, int, const Context&); \
  template void layernorm_backward_weight<T>(float*, float*, const T*, const T*, const float*,     \
                                             const float*, int, int, const Context&);
PLAIT_INSTANTIATE(float)
PLAIT_INSTANTIATE(bf16)
#undef PLAIT_INSTANTIATE

}  // namespace plait::kernels::cuda
