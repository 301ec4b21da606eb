#include "plait/schedule/microbatch_shares.h"

#include <algorithm>
#include <cmath>

namespace plait::schedule {

std::vector<int> microbatch_shares(int total, const std::vector<double>& speed) {
  const int n = static_cast<int>(speed.size());
  if (n == 0 || total < n) return {};
  double sum = 0;
  for (double s : speed) sum += s;
  std::vector<double> ideal(n);
  std::vector<int> out(n);
  int assigned = 0;
  for (int i = 0; i < n; ++i) {
    ideal[i] = total * speed[i] / sum;
    out[i] = std::max(1, static_cast<int>(std::floor(ideal[i])));
    assigned += out[i];
  }
  // Too many (the minimum of one pushed some up): take from those furthest above their ideal.
  while (assigned > total) {
    int best = -1;
    for (int i = 0; i < n; ++i) {
      if (out[i] > 1 && (best < 0 || out[i] - ideal[i] > out[best] - ideal[best])) best = i;
    }
    --out[best];
    --assigned;
  }
  // Too few: give to those furthest below, the fastest on ties.
  while (assigned < total) {
    int best = 0;
    for (int i = 1; i < n; ++i) {
      const double gap = ideal[i] - out[i], best_gap = ideal[best] - out[best];
      if (gap > best_gap + 1e-12 || (std::fabs(gap - best_gap) <= 1e-12 && speed[i] > speed[best])) best = i;
    }
    ++out[best];
    ++assigned;
  }
  return out;
}

}  // namespace plait::schedule
