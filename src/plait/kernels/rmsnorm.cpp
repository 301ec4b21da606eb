#include "plait/kernels/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "plait/kernels/parallel.h"

namespace plait::kernels {

template <typename T>
void rmsnorm_forward(T* out, Acc<T>* rstd, const T* inp, const T* weight, int n, int c, double eps) {
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * c))
  for (int i = 0; i < n; ++i) {
    const T* x = inp + static_cast<std::size_t>(i) * c;
    T* y = out + static_cast<std::size_t>(i) * c;
    T sum_sq = 0;
#pragma omp simd reduction(+ : sum_sq)
    for (int j = 0; j < c; ++j) sum_sq += x[j] * x[j];
    const T s = T(1) / std::sqrt(sum_sq / c + T(eps));
#pragma omp simd
    for (int j = 0; j < c; ++j) y[j] = x[j] * s * weight[j];
    rstd[i] = s;
  }
}

template <typename T>
void rmsnorm_backward_input(T* dinp, const T* dresidual, const T* dout, const T* inp,
                            const T* weight, const Acc<T>* rstd, int n, int c) {
  // d rstd / d x_k = -rstd^3 x_k / C, so dx_k = rstd * dnorm_k - rstd^3 x_k / C * sum_j dnorm_j x_j
  // = rstd * (dnorm_k - xhat_k * mean(dnorm * xhat)).
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * c))
  for (int i = 0; i < n; ++i) {
    const std::size_t off = static_cast<std::size_t>(i) * c;
    const T* x = inp + off;
    const T* dy = dout + off;
    T* dx = dinp + off;
    const T s = rstd[i];
    T dnorm_xhat_mean = 0;
#pragma omp simd reduction(+ : dnorm_xhat_mean)
    for (int j = 0; j < c; ++j) dnorm_xhat_mean += dy[j] * weight[j] * x[j] * s;
    dnorm_xhat_mean /= c;
    const T* dr = dresidual ? dresidual + off : nullptr;
    for (int j = 0; j < c; ++j) {
      const T g = s * (dy[j] * weight[j] - x[j] * s * dnorm_xhat_mean);
      dx[j] = dr ? dr[j] + g : g;
    }
  }
}

template <typename T>
void rmsnorm_backward_weight(Acc<T>* dweight, const T* dout, const T* inp, const Acc<T>* rstd, int n, int c) {
  // Each thread owns a fixed range of columns and walks the rows in order: deterministic.
  constexpr int kColumnBlock = 128;
  const int blocks = (c + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * c))
  for (int blk = 0; blk < blocks; ++blk) {
    const int j0 = blk * kColumnBlock;
    const int j1 = std::min(c, j0 + kColumnBlock);
    T dw[kColumnBlock] = {};
    for (int i = 0; i < n; ++i) {
      const std::size_t off = static_cast<std::size_t>(i) * c;
      const T s = rstd[i];
      for (int j = j0; j < j1; ++j) dw[j - j0] += dout[off + j] * inp[off + j] * s;
    }
    for (int j = j0; j < j1; ++j) dweight[j] += dw[j - j0];
  }
}

template void rmsnorm_forward<float>(float*, float*, const float*, const float*, int, int, double);
template void rmsnorm_forward<double>(double*, double*, const double*, const double*, int, int,
                                      double);
template void rmsnorm_backward_input<float>(float*, const float*, const float*, const float*,
                                            const float*, const float*, int, int);
template void rmsnorm_backward_input<double>(double*, const double*, const double*, const double*,
                                             const double*, const double*, int, int);
template void rmsnorm_backward_weight<float>(float*, const float*, const float*, const float*, int,
                                             int);
template void rmsnorm_backward_weight<double>(double*, const double*, const double*, const double*,
                                              int, int);

}  // namespace plait::kernels
