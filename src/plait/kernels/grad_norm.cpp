#include "plait/kernels/grad_norm.h"

#include <algorithm>
#include <cstdint>

#include "plait/kernels/parallel.h"

namespace plait::kernels {

double sum_of_squares(const float* x, std::size_t n) {
  const auto count = static_cast<std::int64_t>(n);
  double total = 0;
#pragma omp parallel for simd schedule(static) reduction(+ : total) if (parallel_worthwhile(count))
  for (std::int64_t i = 0; i < count; ++i) {
    const double v = x[i];
    total += v * v;
  }
  return total;
}

void scale_in_place(float* x, std::size_t n, float factor) {
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for simd schedule(static) if (parallel_worthwhile(count))
  for (std::int64_t i = 0; i < count; ++i) x[i] *= factor;
}

double clip_factor(double norm, double max_norm) {
  if (max_norm <= 0) return 1.0;
  return std::min(1.0, max_norm / (norm + 1e-6));
}

}  // namespace plait::kernels
