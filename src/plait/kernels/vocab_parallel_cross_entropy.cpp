#include "plait/kernels/vocab_parallel_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include "plait/core/error.h"
#include "plait/kernels/cross_entropy.h"
#include "plait/kernels/fast_math.h"
#include "plait/kernels/parallel.h"

namespace plait::kernels {

template <typename T>
void cross_entropy_shard_max(const T* logits, const std::int32_t* targets, int n, int v_local, int v_valid,
                             int vocab_begin, int vocab, float* max, float* target_logit) {
  for (int i = 0; i < n; ++i) {
    if ((targets[i] < 0 && targets[i] != kNoTarget) || targets[i] >= vocab) {
      throw Error("cross entropy: target " + std::to_string(targets[i]) + " at row " + std::to_string(i) +
                  " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
  if (v_valid < 0 || v_valid > v_local) {
    throw Error("cross entropy: " + std::to_string(v_valid) + " valid columns of " + std::to_string(v_local));
  }
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * v_local))
  for (int i = 0; i < n; ++i) {
    const T* row = logits + static_cast<std::size_t>(i) * v_local;
    // A rank whose columns are all padding takes no part in the maximum.
    max[i] = v_valid > 0 ? static_cast<float>(max_of(row, v_valid)) : -INFINITY;
    const int local = targets[i] == kNoTarget ? -1 : targets[i] - vocab_begin;
    target_logit[i] = local >= 0 && local < v_valid ? static_cast<float>(to_float(row[local])) : 0.0f;
  }
}

template <typename T>
void cross_entropy_shard_sum(const T* logits, int n, int v_local, int v_valid, const float* max, double* sum) {
  using F = Acc<T>;
#pragma omp parallel for schedule(static) if (parallel_worthwhile(std::int64_t{n} * v_local))
  for (int i = 0; i < n; ++i) {
    const T* row = logits + static_cast<std::size_t>(i) * v_local;
    const F m = static_cast<F>(max[i]);
    constexpr int kChunk = 1024;
    double total = 0;
    for (int j0 = 0; j0 < v_valid; j0 += kChunk) {
      const int j1 = std::min(v_valid, j0 + kChunk);
      F part = 0;
#pragma omp simd reduction(+ : part)
      for (int j = j0; j < j1; ++j) part += exp_fast(to_float(row[j]) - m);
      total += static_cast<double>(part);
    }
    sum[i] = total;
  }
}

template <typename T>
double cross_entropy_shard_finish(T* logits, Acc<T>* losses, const std::int32_t* targets, int n, int v_local,
                                  int v_valid, int vocab_begin, const float* max, const double* sum,
                                  const float* target_logit, double loss_scale) {
  using F = Acc<T>;
  const F scale = static_cast<F>(loss_scale);
  double total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total) if (parallel_worthwhile(std::int64_t{n} * v_local))
  for (int i = 0; i < n; ++i) {
    T* row = logits + static_cast<std::size_t>(i) * v_local;
    if (targets[i] == kNoTarget) {
      losses[i] = F(0);
      std::fill(row, row + v_local, from_float<T>(F{0}));
      continue;
    }
    const F m = static_cast<F>(max[i]);
    const double loss = std::log(sum[i]) + static_cast<double>(m) - static_cast<double>(target_logit[i]);
    losses[i] = static_cast<F>(loss);
    total += loss;
    const F g = static_cast<F>(loss_scale / sum[i]);
    const int local = targets[i] - vocab_begin;
    const bool mine = local >= 0 && local < v_valid;
    // The target's gradient before the others overwrite its logit.
    const F target_gradient = mine ? exp_fast(to_float(row[local]) - m) * g - scale : F{0};
#pragma omp simd
    for (int j = 0; j < v_valid; ++j) row[j] = from_float<T>(exp_fast(to_float(row[j]) - m) * g);
    for (int j = v_valid; j < v_local; ++j) row[j] = from_float<T>(F{0});
    if (mine) row[local] = from_float<T>(target_gradient);
  }
  return total * loss_scale;
}

#define PLAIT_INSTANTIATE(T)                                                                                \
  template void cross_entropy_shard_max<T>(const T*, const std::int32_t*, int, int, int, int, int, float*,   \
                                           float*);                                                          \
  template void cross_entropy_shard_sum<T>(const T*, int, int, int, const float*, double*);                  \
  template double cross_entropy_shard_finish<T>(T*, Acc<T>*, const std::int32_t*, int, int, int, int,        \
                                                const float*, const double*, const float*, double);
PLAIT_INSTANTIATE(float)
PLAIT_INSTANTIATE(bf16)
#undef PLAIT_INSTANTIATE

}  // namespace plait::kernels
