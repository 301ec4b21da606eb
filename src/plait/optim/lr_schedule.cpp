#include "plait/optim/lr_schedule.h"

#include <cmath>
#include <numbers>

namespace plait::optim {

double LRSchedule::at(int step) const {
  if (step < warmup_steps) return max_lr * (step + 1) / warmup_steps;
  if (step >= total_steps) return min_lr;
  const double r = static_cast<double>(step - warmup_steps) / (total_steps - warmup_steps);
  return min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * r)) * (max_lr - min_lr);
}

}  // namespace plait::optim
