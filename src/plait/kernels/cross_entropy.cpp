#include "plait/kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "plait/core/error.h"
#include "plait/kernels/fast_math.h"
#include "plait/kernels/parallel.h"

namespace plait::kernels {

template <typename T>
double cross_entropy_forward_backward(T* logits, Acc<T>* losses, const std::int32_t* targets, int n,
                                      int v, double loss_scale) {
  // F = Acc<T>: the arithmetic type (fp32 for bf16 logits, widened exactly). In fp32/fp64 the
  // row itself holds the exponentials between the normaliser and the gradient pass; a bf16 row
  // would round them before the scaling (two roundings), so there the gradient pass computes
  // the exponential again and rounds only the final gradient, as the CUDA kernel does.
  using F = Acc<T>;
  constexpr bool kStoresExponentials = std::is_same_v<T, F>;
  for (int i = 0; i < n; ++i) {
    if ((targets[i] < 0 && targets[i] != kNoTarget) || targets[i] >= v) {
      throw Error("cross entropy: target " + std::to_string(targets[i]) + " at row " +
                  std::to_string(i) + " is outside the vocabulary [0, " + std::to_string(v) + ")");
    }
  }
  const F scale = static_cast<F>(loss_scale);
  double total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total) if (parallel_worthwhile(std::int64_t{n} * v))
  for (int i = 0; i < n; ++i) {
    T* row = logits + static_cast<std::size_t>(i) * v;
    if (targets[i] == kNoTarget) {
      losses[i] = F(0);
      std::fill(row, row + v, from_float<T>(F(0)));
      continue;
    }
    const F m = max_of(row, v);
    const F target_logit = to_float(row[targets[i]]);
    // The normaliser: float partial sums over chunks (vectorised), added in double (a float
    // sum over a 50k vocabulary would lose ~1e-6).
    constexpr int kChunk = 1024;
    double sum = 0;
    for (int j0 = 0; j0 < v; j0 += kChunk) {
      const int j1 = std::min(v, j0 + kChunk);
      F part = 0;
#pragma omp simd reduction(+ : part)
      for (int j = j0; j < j1; ++j) {
        const F e = exp_fast(to_float(row[j]) - m);
        if constexpr (kStoresExponentials) row[j] = e;
        part += e;
      }
      sum += static_cast<double>(part);
    }
    const double loss = std::log(sum) + static_cast<double>(m) - static_cast<double>(target_logit);
    losses[i] = static_cast<F>(loss);
    total += loss;
    const F g = static_cast<F>(loss_scale / sum);
    if constexpr (kStoresExponentials) {
#pragma omp simd
      for (int j = 0; j < v; ++j) row[j] *= g;
      row[targets[i]] -= scale;
    } else {
#pragma omp simd
      for (int j = 0; j < v; ++j) row[j] = from_float<T>(exp_fast(to_float(row[j]) - m) * g);
      // The target's -loss_scale enters before its one rounding.
      const F target_gradient = exp_fast(target_logit - m) * g;
      row[targets[i]] = from_float<T>(target_gradient - scale);
    }
  }
  return total * loss_scale;
}

template double cross_entropy_forward_backward<float>(float*, float*, const std::int32_t*, int,
                                                      int, double);
template double cross_entropy_forward_backward<double>(double*, double*, const std::int32_t*, int,
                                                       int, double);
template double cross_entropy_forward_backward<bf16>(bf16*, float*, const std::int32_t*, int, int,
                                                     double);

}  // namespace plait::kernels
