#include "plait/kernels/layernorm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "plait/kernels/parallel.h"

namespace plait::kernels {

// T is the storage type of activations and weights; F = Acc<T> is the arithmetic type (T for
// fp32/fp64, fp32 for bf16: inputs widened exactly by to_float, every output rounded once by
// from_float<T>, as Megatron and HF compute norms in fp32 on bf16 tensors).

template <typename T>
void layernorm_forward(T* out, Acc<T>* mean, Acc<T>* rstd, const T* inp, const T* weight, const T* bias,
                       int n, int c, double eps) {
  using F = Acc<T>;
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * c))
  for (int i = 0; i < n; ++i) {
    const T* x = inp + static_cast<std::size_t>(i) * c;
    T* y = out + static_cast<std::size_t>(i) * c;
    // Two passes over the row (it is in L1): mean, then the centred variance, which avoids the
    // cancellation of E[x^2] - E[x]^2.
    F sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < c; ++j) sum += to_float(x[j]);
    const F m = sum / c;
    F var = 0;
#pragma omp simd reduction(+ : var)
    for (int j = 0; j < c; ++j) var += (to_float(x[j]) - m) * (to_float(x[j]) - m);
    const F s = F(1) / std::sqrt(var / c + F(eps));
    for (int j = 0; j < c; ++j) {
      y[j] = from_float<T>((to_float(x[j]) - m) * s * to_float(weight[j]) + to_float(bias[j]));
    }
    mean[i] = m;
    rstd[i] = s;
  }
}

template <typename T>
void layernorm_backward_input(T* dinp, const T* dresidual, const T* dout, const T* inp,
                              const T* weight, const Acc<T>* mean, const Acc<T>* rstd, int n, int c) {
  using F = Acc<T>;
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * c))
  for (int i = 0; i < n; ++i) {
    const std::size_t off = static_cast<std::size_t>(i) * c;
    const T* x = inp + off;
    const T* dy = dout + off;
    T* dx = dinp + off;
    const F m = mean[i];
    const F s = rstd[i];
    F dnorm_mean = 0;
    F dnorm_xhat_mean = 0;
#pragma omp simd reduction(+ : dnorm_mean, dnorm_xhat_mean)
    for (int j = 0; j < c; ++j) {
      const F dnorm = to_float(dy[j]) * to_float(weight[j]);
      dnorm_mean += dnorm;
      dnorm_xhat_mean += dnorm * (to_float(x[j]) - m) * s;
    }
    dnorm_mean /= c;
    dnorm_xhat_mean /= c;
    // The residual's gradient is added in F before the one rounding (dinp may alias it: each
    // element is read before it is written).
    const T* dr = dresidual ? dresidual + off : nullptr;
    for (int j = 0; j < c; ++j) {
      const F xhat = (to_float(x[j]) - m) * s;
      const F g = s * (to_float(dy[j]) * to_float(weight[j]) - dnorm_mean - xhat * dnorm_xhat_mean);
      dx[j] = from_float<T>(dr ? to_float(dr[j]) + g : g);
    }
  }
}

template <typename T>
void layernorm_backward_weight(Acc<T>* dweight, Acc<T>* dbias, const T* dout, const T* inp,
                               const Acc<T>* mean, const Acc<T>* rstd, int n, int c) {
  using F = Acc<T>;
  // Each thread owns a fixed range of columns and walks the rows in order: deterministic.
  constexpr int kColumnBlock = 128;
  const int blocks = (c + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * c))
  for (int blk = 0; blk < blocks; ++blk) {
    const int j0 = blk * kColumnBlock;
    const int j1 = std::min(c, j0 + kColumnBlock);
    F dw[kColumnBlock] = {};
    F db[kColumnBlock] = {};
    for (int i = 0; i < n; ++i) {
      const std::size_t off = static_cast<std::size_t>(i) * c;
      const F m = mean[i];
      const F s = rstd[i];
      for (int j = j0; j < j1; ++j) {
        dw[j - j0] += to_float(dout[off + j]) * (to_float(inp[off + j]) - m) * s;
        db[j - j0] += to_float(dout[off + j]);
      }
    }
    for (int j = j0; j < j1; ++j) {
      dweight[j] += dw[j - j0];
      dbias[j] += db[j - j0];
    }
  }
}

#define PLAIT_INSTANTIATE(T)                                                                     \
  template void layernorm_forward<T>(T*, Acc<T>*, Acc<T>*, const T*, const T*, const T*, int,    \
                                     int, double);                                               \
  template void layernorm_backward_input<T>(T*, const T*, const T*, const T*, const T*,          \
                                            const Acc<T>*, const Acc<T>*, int, int);             \
  template void layernorm_backward_weight<T>(Acc<T>*, Acc<T>*, const T*, const T*, const Acc<T>*, \
                                             const Acc<T>*, int, int);
PLAIT_INSTANTIATE(float)
PLAIT_INSTANTIATE(double)
PLAIT_INSTANTIATE(bf16)
#undef PLAIT_INSTANTIATE

}  // namespace plait::kernels
