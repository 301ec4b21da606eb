#include "plait/kernels/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "plait/kernels/parallel.h"

namespace plait::kernels {

// T is the storage type, F = Acc<T> the arithmetic (fp32 for bf16: widened inputs, one rounding
// per output), as in layernorm.cpp.

template <typename T>
void rmsnorm_forward(T* out, Acc<T>* rstd, const T* inp, const T* weight, int n, int c, double eps) {
  using F = Acc<T>;
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * c))
  for (int i = 0; i < n; ++i) {
    const T* x = inp + static_cast<std::size_t>(i) * c;
    T* y = out + static_cast<std::size_t>(i) * c;
    F sum_sq = 0;
#pragma omp simd reduction(+ : sum_sq)
    for (int j = 0; j < c; ++j) sum_sq += to_float(x[j]) * to_float(x[j]);
    const F s = F(1) / std::sqrt(sum_sq / c + F(eps));
#pragma omp simd
    for (int j = 0; j < c; ++j) y[j] = from_float<T>(to_float(x[j]) * s * to_float(weight[j]));
    rstd[i] = s;
  }
}

template <typename T>
void rmsnorm_backward_input(T* dinp, const T* dresidual, const T* dout, const T* inp,
                            const T* weight, const Acc<T>* rstd, int n, int c) {
  using F = Acc<T>;
  // d rstd / d x_k = -rstd^3 x_k / C, so dx_k = rstd * dnorm_k - rstd^3 x_k / C * sum_j dnorm_j x_j
  // = rstd * (dnorm_k - xhat_k * mean(dnorm * xhat)).
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * c))
  for (int i = 0; i < n; ++i) {
    const std::size_t off = static_cast<std::size_t>(i) * c;
    const T* x = inp + off;
    const T* dy = dout + off;
    T* dx = dinp + off;
    const F s = rstd[i];
    F dnorm_xhat_mean = 0;
#pragma omp simd reduction(+ : dnorm_xhat_mean)
    for (int j = 0; j < c; ++j) {
      dnorm_xhat_mean += to_float(dy[j]) * to_float(weight[j]) * to_float(x[j]) * s;
    }
    dnorm_xhat_mean /= c;
    // The residual's gradient is added in F before the one rounding (dinp may alias it).
    const T* dr = dresidual ? dresidual + off : nullptr;
    for (int j = 0; j < c; ++j) {
      const F g =
          s * (to_float(dy[j]) * to_float(weight[j]) - to_float(x[j]) * s * dnorm_xhat_mean);
      dx[j] = from_float<T>(dr ? to_float(dr[j]) + g : g);
    }
  }
}

template <typename T>
void rmsnorm_backward_weight(Acc<T>* dweight, const T* dout, const T* inp, const Acc<T>* rstd, int n, int c) {
  using F = Acc<T>;
  // Each thread owns a fixed range of columns and walks the rows in order: deterministic.
  constexpr int kColumnBlock = 128;
  const int blocks = (c + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * c))
  for (int blk = 0; blk < blocks; ++blk) {
    const int j0 = blk * kColumnBlock;
    const int j1 = std::min(c, j0 + kColumnBlock);
    F dw[kColumnBlock] = {};
    for (int i = 0; i < n; ++i) {
      const std::size_t off = static_cast<std::size_t>(i) * c;
      const F s = rstd[i];
      for (int j = j0; j < j1; ++j) {
        dw[j - j0] += to_float(dout[off + j]) * to_float(inp[off + j]) * s;
      }
    }
    for (int j = j0; j < j1; ++j) dweight[j] += dw[j - j0];
  }
}

#define PLAIT_INSTANTIATE(T)                                                                    \
  template void rmsnorm_forward<T>(T*, Acc<T>*, const T*, const T*, int, int, double);          \
  template void rmsnorm_backward_input<T>(T*, const T*, const T*, const T*, const T*,           \
                                          const Acc<T>*, int, int);                             \
  template void rmsnorm_backward_weight<T>(Acc<T>*, const T*, const T*, const Acc<T>*, int, int);
PLAIT_INSTANTIATE(float)
PLAIT_INSTANTIATE(double)
PLAIT_INSTANTIATE(bf16)
#undef PLAIT_INSTANTIATE

}  // namespace plait::kernels
