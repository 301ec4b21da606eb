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

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

void init_tensor(std::span<float> values, const NamedTensor& tensor, const GPTConfig& config,
                 std::uint64_t seed) {
  const std::string_view name = tensor.name;
  const bool layernorm = name.find("ln_") != std::string_view::npos;
  if (ends_with(name, ".bias") || (layernorm && ends_with(name, ".weight"))) {
    const float value = ends_with(name, ".bias") ? 0.0f : 1.0f;
    for (float& v : values) v = value;
    return;
  }
  double std = 0.02;
  if (ends_with(name, "c_proj.weight")) std /= std::sqrt(2.0 * config.layers);
  const std::uint64_t key = splitmix64(seed ^ fnv1a(name));
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
