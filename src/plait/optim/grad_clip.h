#pragma once
// Clipping by the global gradient norm (Pascanu, Mikolov, Bengio 2013; PyTorch
// clip_grad_norm_). Each holder of gradients (a stage, a rank, a shard) contributes the sum of
// squares of its own piece (kernels::sum_of_squares); the pieces are added — across ranks by an
// all-reduce — before the square root, so the norm is the same whatever the layout. A tensor held
// twice (the tied "wte" on the first and last stage, after its gradient all-reduce) must be
// counted once.
#include <span>

namespace plait::optim {

struct ClipResult {
  double norm = 0;    // global L2 norm of the gradients
  double factor = 1;  // multiply every gradient by this: min(1, max_norm / (norm + 1e-6))
};

// From the pieces' sums of squares; max_norm <= 0 disables clipping (factor 1).
ClipResult clip_by_global_norm(std::span<const double> sums_of_squares, double max_norm);

}  // namespace plait::optim
