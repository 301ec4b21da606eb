#include "plait/kernels/layernorm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "plait/kernels/parallel.h"

namespace plait::kernels {

template <typename T>
void layernorm_forward(T* out, Acc<T>* mean, Acc<T>* rstd, const T* inp, const T* weight, const T* bias,
                       int n, int c, double eps) {
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * c))
  for (int i = 0; i < n; ++i) {
    const T* x = inp + static_cast<std::size_t>(i) * c;
    T* y = out + static_cast<std::size_t>(i) * c;
    // Two passes over the row (it is in L1): mean, then the centred variance, which avoids the
    // cancellation of E[x^2] - E[x]^2.
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < c; ++j) sum += x[j];
    const T m = sum / c;
    T var = 0;
#pragma omp simd reduction(+ : var)
    for (int j = 0; j < c; ++j) var += (x[j] - m) * (x[j] - m);
    const T s = T(1) / std::sqrt(var / c + T(eps));
    for (int j = 0; j < c; ++j) y[j] = (x[j] - m) * s * weight[j] + bias[j];
    mean[i] = m;
    rstd[i] = s;
  }
}

template <typename T>
void layernorm_backward_input(T* dinp, const T* dresidual, const T* dout, const T* inp,
                              const T* weight, const Acc<T>* mean, const Acc<T>* rstd, int n, int c) {
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * c))
  for (int i = 0; i < n; ++i) {
    const std::size_t off = static_cast<std::size_t>(i) * c;
    const T* x = inp + off;
    const T* dy = dout + off;
    T* dx = dinp + off;
    const T m = mean[i];
    const T s = rstd[i];
    T dnorm_mean = 0;
    T dnorm_xhat_mean = 0;
#pragma omp simd reduction(+ : dnorm_mean, dnorm_xhat_mean)
    for (int j = 0; j < c; ++j) {
      const T dnorm = dy[j] * weight[j];
      dnorm_mean += dnorm;
      dnorm_xhat_mean += dnorm * (x[j] - m) * s;
    }
    dnorm_mean /= c;
    dnorm_xhat_mean /= c;
    const T* dr = dresidual ? dresidual + off : nullptr;
    for (int j = 0; j < c; ++j) {
      const T xhat = (x[j] - m) * s;
      const T g = s * (dy[j] * weight[j] - dnorm_mean - xhat * dnorm_xhat_mean);
      dx[j] = dr ? dr[j] + g : g;
    }
  }
}

template <typename T>
void layernorm_backward_weight(Acc<T>* dweight, Acc<T>* dbias, const T* dout, const T* inp,
                               const Acc<T>* mean, const Acc<T>* rstd, int n, int c) {
  // Each thread owns a fixed range of columns and walks the rows in order: deterministic.
  constexpr int kColumnBlock = 128;
  const int blocks = (c + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * c))
  for (int blk = 0; blk < blocks; ++blk) {
    const int j0 = blk * kColumnBlock;
    const int j1 = std::min(c, j0 + kColumnBlock);
    T dw[kColumnBlock] = {};
    T db[kColumnBlock] = {};
    for (int i = 0; i < n; ++i) {
      const std::size_t off = static_cast<std::size_t>(i) * c;
      const T m = mean[i];
      const T s = rstd[i];
      for (int j = j0; j < j1; ++j) {
        dw[j - j0] += dout[off + j] * (inp[off + j] - m) * s;
        db[j - j0] += dout[off + j];
      }
    }
    for (int j = j0; j < j1; ++j) {
      dweight[j] += dw[j - j0];
      dbias[j] += db[j - j0];
    }
  }
}

template void layernorm_forward<float>(float*, float*, float*, const float*, const float*,
                                       const float*, int, int, double);
template void layernorm_forward<double>(double*, double*, double*, const double*, const double*,
                                        const double*, int, int, double);
template void layernorm_backward_input<float>(float*, const float*, const float*, const float*,
                                              const float*, const float*, const float*, int, int);
template void layernorm_backward_input<double>(double*, const double*, const double*,
                                               const double*, const double*, const double*,
                                               const double*, int, int);
template void layernorm_backward_weight<float>(float*, float*, const float*, const float*,
                                               const float*, const float*, int, int);
template void layernorm_backward_weight<double>(double*, double*, const double*, const double*,
                                                const double*, const double*, int, int);

}  // namespace plait::kernels
