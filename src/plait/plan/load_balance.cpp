#include "plait/plan/load_balance.h"

#include <cmath>
#include <limits>

namespace plait::plan {

std::vector<int> balance_layers(int layers, int stages, const std::function<double(int, int)>& time,
                                const std::function<bool(int, int)>& fits, int minimum) {
  if (stages < 1 || minimum < 1 || layers < stages * minimum) return {};
  std::vector<int> out(stages, minimum);
  for (int s = 0; s < stages; ++s) {
    if (!fits(s, minimum)) return {};
  }
  for (int placed = stages * minimum; placed < layers; ++placed) {
    int best = -1;
    double best_time = std::numeric_limits<double>::infinity();
    for (int s = 0; s < stages; ++s) {
      if (!fits(s, out[s] + 1)) continue;
      const double t = time(s, out[s] + 1);
      if (t < best_time) {
        best = s;
        best_time = t;
      }
    }
    if (best < 0) return {};
    ++out[best];
  }
  return out;
}

}  // namespace plait::plan
