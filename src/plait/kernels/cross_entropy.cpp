#include "plait/kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "plait/core/error.h"
#include "plait/kernels/fast_math.h"
#include "plait/kernels/parallel.h"

namespace plait::kernels {

template <typename T>
double cross_entropy_forward_backward(T* logits, Acc<T>* losses, const std::int32_t* targets, int n,
                                      int v, double loss_scale) {
  for (int i = 0; i < n; ++i) {
    if (targets[i] < 0 || targets[i] >= v) {
      throw Error("cross entropy: target " + std::to_string(targets[i]) + " at row " +
                  std::to_string(i) + " is outside the vocabulary [0, " + std::to_string(v) + ")");
    }
  }
  const T scale = static_cast<T>(loss_scale);
  double total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total) if (parallel_worthwhile(std::int64_t{n} * v))
  for (int i = 0; i < n; ++i) {
    T* row = logits + static_cast<std::size_t>(i) * v;
    const T m = max_of(row, v);
    const T target_logit = row[targets[i]];
    // The normaliser: float partial sums over chunks (vectorised), added in double (a float
    // sum over a 50k vocabulary would lose ~1e-6).
    constexpr int kChunk = 1024;
    double sum = 0;
    for (int j0 = 0; j0 < v; j0 += kChunk) {
      const int j1 = std::min(v, j0 + kChunk);
      T part = 0;
#pragma omp simd reduction(+ : part)
      for (int j = j0; j < j1; ++j) {
        const T e = exp_fast(row[j] - m);
        row[j] = e;
        part += e;
      }
      sum += static_cast<double>(part);
    }
    const double loss = std::log(sum) + static_cast<double>(m) - static_cast<double>(target_logit);
    losses[i] = static_cast<T>(loss);
    total += loss;
    const T g = static_cast<T>(loss_scale / sum);
#pragma omp simd
    for (int j = 0; j < v; ++j) row[j] *= g;
    row[targets[i]] -= scale;
  }
  return total * loss_scale;
}

template double cross_entropy_forward_backward<float>(float*, float*, const std::int32_t*, int,
                                                      int, double);
template double cross_entropy_forward_backward<double>(double*, double*, const std::int32_t*, int,
                                                       int, double);

}  // namespace plait::kernels
