#pragma once
// The pieces of global gradient-norm clipping on the GPU (Pascanu et al. 2013; PyTorch
// clip_grad_norm_), the CUDA twin of kernels/grad_norm.h: the sum of squares (so that pieces held
// by different stages or ranks add before the square root) and the in-place scaling. The
// clipping factor itself is host arithmetic (kernels::clip_factor).
#include <cstddef>

#include "plait/kernels/cuda/context.h"
#include "plait/kernels/cuda/cuda_api.h"

namespace plait::kernels::cuda {

// Elements per partial sum (the CPU kernel's chunk): the result depends on n only, not on the
// device or the launch.
inline constexpr std::size_t kSumOfSquaresChunk = std::size_t{1} << 14;

// Doubles of workspace sum_of_squares needs for n elements.
inline std::size_t sum_of_squares_workspace(std::size_t n) {
  return n == 0 ? 1 : (n + kSumOfSquaresChunk - 1) / kSumOfSquaresChunk;
}

// *result (one double, device memory) = sum_i x_i^2 over x (N) fp32, accumulated in double,
// deterministic: per-chunk sums in a fixed tree order, then the chunks' sums in a fixed order.
// workspace: sum_of_squares_workspace(n) doubles.
void sum_of_squares(double* result, const float* x, std::size_t n, double* workspace,
                    const Context& ctx);

// x (N) *= factor.
void scale_in_place(float* x, std::size_t n, float factor, const Context& ctx);

}  // namespace plait::kernels::cuda
