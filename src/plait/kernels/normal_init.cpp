#include "plait/kernels/normal_init.h"

#include <cmath>

#include "plait/core/splitmix64.h"

namespace plait::kernels {

void normal_init(float* values, std::size_t n, double std, std::uint64_t key) {
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) if (count > (1 << 16))
  for (std::int64_t i = 0; i < count; ++i) {
    const std::uint64_t r = splitmix64(key + static_cast<std::uint64_t>(i));
    const double u1 = (static_cast<double>(r >> 32) + 1.0) / 4294967296.0;  // (0, 1]
    const double u2 = static_cast<double>(r & 0xFFFFFFFFull) / 4294967296.0;
    values[i] =
        static_cast<float>(std * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
}

}  // namespace plait::kernels
