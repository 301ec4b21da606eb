#include "plait/model/parameter_init.h"

#include <cmath>
#include <string_view>

#include "plait/core/splitmix64.h"

namespace plait::model {
namespace {

// FNV-1a, 64-bit.
std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 0x100000001B3ull;
  }
  return h;
}

}  // namespace

void init_tensor(std::span<float> values, const NamedTensor& tensor, std::uint64_t seed) {
  if (tensor.init.kind == TensorInit::Kind::constant) {
    for (float& v : values) v = static_cast<float>(tensor.init.value);
    return;
  }
  const double std = tensor.init.value;
  const std::uint64_t key = splitmix64(seed ^ fnv1a(tensor.name));
  const auto n = static_cast<std::int64_t>(values.size());
  // Box-Muller from two 32-bit uniforms of one counter-based draw per element.
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint64_t r = splitmix64(key + static_cast<std::uint64_t>(i));
    const double u1 = (static_cast<double>(r >> 32) + 1.0) / 4294967296.0;  // (0, 1]
    const double u2 = static_cast<double>(r & 0xFFFFFFFFull) / 4294967296.0;
    values[static_cast<std::size_t>(i)] =
        static_cast<float>(std * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
}

}  // namespace plait::model
