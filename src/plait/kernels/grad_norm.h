#pragma once
// Global gradient norm and clipping (Pascanu et al. 2013; PyTorch clip_grad_norm_). The norm is
// built from sums of squares so that pieces held by different stages or ranks can be added
// before the square root: ||g|| = sqrt(sum over pieces of sum_of_squares(piece)).
#include <cstddef>

namespace plait::kernels {

// sum_i x_i^2, accumulated in double.
double sum_of_squares(const float* x, std::size_t n);

// x *= factor.
void scale_in_place(float* x, std::size_t n, float factor);

// The clipping factor min(1, max_norm / (norm + 1e-6)) (PyTorch clip_grad_norm_); max_norm <= 0
// disables clipping (factor 1).
double clip_factor(double norm, double max_norm);

}  // namespace plait::kernels
