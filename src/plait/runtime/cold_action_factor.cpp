#include "plait/runtime/cold_action_factor.h"

#include <algorithm>
#include <string>

#include "plait/core/error.h"
#include "plait/core/median.h"

namespace plait::runtime {

ColdActionFactor::ColdActionFactor(int ranks, int window)
    : window_(static_cast<std::size_t>(std::max(1, window))), factors_(static_cast<std::size_t>(std::max(0, ranks))) {}

double ColdActionFactor::factor(int rank) const {
  const std::deque<double>& f = factors_.at(static_cast<std::size_t>(rank));
  return f.empty() ? 1.0 : median(std::vector<double>(f.begin(), f.end()));
}

std::vector<double> ColdActionFactor::seconds_per_unit(const std::vector<RankStepTimes>& ranks) {
  if (ranks.size() != factors_.size()) {
    throw Error("cold-action factor: " + std::to_string(ranks.size()) + " ranks' times, expected " +
                std::to_string(factors_.size()));
  }
  std::vector<double> out;
  out.reserve(ranks.size());
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const RankStepTimes& t = ranks[r];
    const double warm_units = t.unit_total() - t.first_units;
    if (warm_units > 0 && t.first_units > 0) {
      const double warm = (t.compute_total() - t.first_seconds) / warm_units;
      const double cold = t.first_seconds / t.first_units;
      if (warm > 0 && cold > 0) {
        factors_[r].push_back(cold / warm);
        if (factors_[r].size() > window_) factors_[r].pop_front();
      }
      out.push_back(t.seconds_per_unit());
    } else if (t.unit_total() > 0 && warm_units <= 0) {
      out.push_back(t.seconds_per_unit() / factor(static_cast<int>(r)));  // cold actions only
    } else {
      out.push_back(t.seconds_per_unit());
    }
  }
  return out;
}

}  // namespace plait::runtime
