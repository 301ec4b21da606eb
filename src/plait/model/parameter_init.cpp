#include "plait/model/parameter_init.h"

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

void init_tensor(std::span<float> values, const NamedTensor& tensor, std::uint64_t seed,
                 kernels::Backend& backend) {
  if (tensor.init.kind == TensorInit::Kind::constant) {
    backend.fill(values.data(), values.size(), static_cast<float>(tensor.init.value));
    return;
  }
  // The generator runs where the values live (kernels/normal_init.h), keyed by the tensor's name.
  backend.normal_init(values.data(), values.size(), tensor.init.value,
                      splitmix64(seed ^ fnv1a(tensor.name)));
}

}  // namespace plait::model
