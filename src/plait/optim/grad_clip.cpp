#include "plait/optim/grad_clip.h"

#include <cmath>

#include "plait/kernels/grad_norm.h"

namespace plait::optim {

ClipResult clip_by_global_norm(std::span<const double> sums_of_squares, double max_norm) {
  double total = 0;
  for (double s : sums_of_squares) total += s;
  ClipResult r;
  r.norm = std::sqrt(total);
  r.factor = kernels::clip_factor(r.norm, max_norm);
  return r;
}

}  // namespace plait::optim
