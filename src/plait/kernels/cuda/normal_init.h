#pragma once
// The counter-based normal initialisation on the GPU, the CUDA twin of kernels/normal_init.h:
// element i is std · N(0, 1) by Box-Muller from the two 32-bit halves of splitmix64(key + i), in
// double like the CPU kernel, so a tensor initialised on the device holds the CPU's values (on
// the CPU emulation bitwise; on a GPU up to the last bit of CUDA's double log/cos, which are
// within 1-2 ulp in double, far below the fp32 rounding that follows).
#include <cstddef>
#include <cstdint>

#include "plait/kernels/cuda/context.h"
#include "plait/kernels/cuda/cuda_api.h"

namespace plait::kernels::cuda {

// values (N) fp32.
void normal_init(float* values, std::size_t n, double std, std::uint64_t key, const Context& ctx);

}  // namespace plait::kernels::cuda
