#pragma once
// Normally distributed initial values from a counter-based generator: element i depends only on
// (key, i), so a tensor gets the same values whatever holds it or how many threads fill it
// (model/parameter_init.h keys it by hash(seed, tensor name)).
#include <cstddef>
#include <cstdint>

namespace plait::kernels {

// values (n) = std · N(0, 1), by Box-Muller from the two 32-bit halves of splitmix64(key + i).
void normal_init(float* values, std::size_t n, double std, std::uint64_t key);

}  // namespace plait::kernels
