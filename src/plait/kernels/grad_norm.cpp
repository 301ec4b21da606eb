#include "plait/kernels/grad_norm.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "plait/kernels/parallel.h"

namespace plait::kernels {

double sum_of_squares(const float* x, std::size_t n) {
  // Per-chunk partial sums added in chunk order: the same result whatever the thread count.
  constexpr std::int64_t kChunk = std::int64_t{1} << 14;
  const auto count = static_cast<std::int64_t>(n);
  const std::int64_t chunks = (count + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<std::size_t>(chunks));
#pragma omp parallel for schedule(static) if (parallel_worthwhile(count))
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t end = std::min(count, (c + 1) * kChunk);
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (std::int64_t i = c * kChunk; i < end; ++i) s += static_cast<double>(x[i]) * x[i];
    partial[static_cast<std::size_t>(c)] = s;
  }
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

void scale_in_place(float* x, std::size_t n, float factor) {
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) if (parallel_worthwhile(count))
  for (std::int64_t i = 0; i < count; ++i) x[i] *= factor;
}

double clip_factor(double norm, double max_norm) {
  if (max_norm <= 0) return 1.0;
  return std::min(1.0, max_norm / (norm + 1e-6));
}

}  // namespace plait::kernels
