#include "plait/runtime/straggler_detector.h"

#include <algorithm>
#include <cstdio>

#include "plait/core/error.h"
#include "plait/core/median.h"

namespace plait::runtime {

StragglerDetector::StragglerDetector(StragglerConfig config, int ranks)
    : config_(config), ranks_(static_cast<std::size_t>(std::max(0, ranks))) {}

std::vector<StragglerChange> StragglerDetector::observe(std::int64_t step, const std::vector<double>& seconds_per_unit) {
  if (seconds_per_unit.size() != ranks_.size()) {
    throw Error("straggler detector: step " + std::to_string(step) + " has " + std::to_string(seconds_per_unit.size()) +
                " ranks' times, expected " + std::to_string(ranks_.size()));
  }
  std::vector<StragglerChange> changes;
  if (!config_.enabled) return changes;
  const std::size_t n = ranks_.size();
  const auto window = static_cast<std::size_t>(config_.window);
  // Against its own history: only ranks with a full baseline are judged.
  std::vector<bool> judged(n, false);
  for (std::size_t r = 0; r < n; ++r) {
    Rank& k = ranks_[r];
    k.vs_history = 1;
    if (seconds_per_unit[r] <= 0 || k.history.size() < window) continue;
    const double base = median(std::vector<double>(k.history.begin(), k.history.end()));
    if (base <= 0) continue;
    k.vs_history = seconds_per_unit[r] / base;
    judged[r] = true;
  }
  // Against its peers: the other judged ranks' ratios.
  for (std::size_t r = 0; r < n; ++r) {
    Rank& k = ranks_[r];
    k.vs_peers = 1;
    if (!judged[r]) continue;
    std::vector<double> others;
    for (std::size_t j = 0; j < n; ++j) {
      if (j != r && judged[j]) others.push_back(ranks_[j].vs_history);
    }
    k.vs_peers = others.empty() ? k.vs_history : k.vs_history / median(others);
  }
  for (std::size_t r = 0; r < n; ++r) {
    Rank& k = ranks_[r];
    const bool slow = judged[r] && k.vs_history > config_.threshold && k.vs_peers > config_.threshold;
    const bool normal = !judged[r] || (k.vs_history < config_.clear_below || k.vs_peers < config_.clear_below);
    const bool toward_change = k.flagged ? normal && judged[r] : slow;
    k.streak = toward_change ? k.streak + 1 : 0;
    if (k.streak >= config_.consecutive && step >= k.quiet_until) {
      k.flagged = !k.flagged;
      k.streak = 0;
      k.quiet_until = step + 1 + config_.cooldown;
      changes.push_back({step, static_cast<int>(r), k.flagged, k.vs_history, k.vs_peers});
    }
    // The baseline learns only from steps that are neither suspect nor a straggler's.
    if (seconds_per_unit[r] > 0 && !k.flagged && !slow) {
      k.history.push_back(seconds_per_unit[r]);
      if (k.history.size() > window) k.history.pop_front();
    }
  }
  return changes;
}

std::string describe(const StragglerChange& c) {
  char line[200];
  std::snprintf(line, sizeof line, "straggler: step %lld: rank %d %s (%.2fx its history, %.2fx its peers)",
                static_cast<long long>(c.step), c.rank, c.flagged ? "flagged" : "cleared", c.vs_history, c.vs_peers);
  return line;
}

}  // namespace plait::runtime
