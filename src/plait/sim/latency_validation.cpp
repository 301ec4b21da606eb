#include "plait/sim/latency_validation.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "plait/sim/latency_curve.h"

namespace plait::sim {

double HeldOutErrors::mean(const std::vector<double>& e) const {
  return e.empty() ? 0.0 : std::accumulate(e.begin(), e.end(), 0.0) / static_cast<double>(e.size());
}

double HeldOutErrors::max(const std::vector<double>& e) const {
  return e.empty() ? 0.0 : *std::max_element(e.begin(), e.end());
}

HeldOutErrors DeviceValidation::both() const {
  HeldOutErrors out = forward;
  out.curve.insert(out.curve.end(), backward.curve.begin(), backward.curve.end());
  out.line.insert(out.line.end(), backward.line.begin(), backward.line.end());
  return out;
}

HeldOutErrors held_out_errors(const std::vector<double>& ms, HoldOut hold_out) {
  HeldOutErrors out;
  const int n = static_cast<int>(ms.size());
  if (n < 4) return out;
  std::vector<double> fit_b, fit_s;
  std::vector<int> held;
  for (int b = 1; b <= n; ++b) {
    const bool fit = hold_out == HoldOut::interpolate ? (b % 2 == 1 || b == n) : b <= n / 2;
    if (fit) {
      fit_b.push_back(b);
      fit_s.push_back(ms[b - 1] * 1e-3);
    } else {
      held.push_back(b);
    }
  }
  const LatencyCurve curve = fit_latency_curve(fit_b, fit_s);
  const LatencyCurve straight = fit_straight_curve(fit_b, fit_s);
  for (int b : held) {
    const double measured = ms[b - 1] * 1e-3;
    out.curve.push_back(std::fabs(curve.at(b) - measured) / measured);
    out.line.push_back(std::fabs(straight.at(b) - measured) / measured);
  }
  return out;
}

std::vector<DeviceValidation> validate_latency_curves(const LatencyTable& table, HoldOut hold_out) {
  std::map<std::pair<std::string, std::string>, DeviceValidation> rows;
  for (const LatencyEntry& e : table.entries) {
    if (e.forward_ms.size() < 4 || e.backward_ms.size() < 4) continue;
    DeviceValidation& row = rows[{e.device, e.dtype}];
    row.device = e.device;
    row.dtype = e.dtype;
    ++row.entries;
    for (auto [ms, into] : {std::pair{&e.forward_ms, &row.forward}, std::pair{&e.backward_ms, &row.backward}}) {
      const HeldOutErrors errors = held_out_errors(*ms, hold_out);
      into->curve.insert(into->curve.end(), errors.curve.begin(), errors.curve.end());
      into->line.insert(into->line.end(), errors.line.begin(), errors.line.end());
    }
  }
  std::vector<DeviceValidation> out;
  for (auto& [key, row] : rows) out.push_back(std::move(row));
  return out;
}

std::vector<DeviceValidation> validate_across_sequences(const LatencyTable& table, const nlohmann::json& stats) {
  // The entries of each (model, device, dtype) with samples, the longest sequence first.
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<const LatencyEntry*>> groups;
  for (const LatencyEntry& e : table.entries) {
    if (e.forward_ms.size() < 2 || e.backward_ms.size() < 2) continue;
    if (!stats.contains(e.model) || !stats[e.model].contains("hidden_size") ||
        !stats[e.model].contains("parameters_per_layer")) {
      continue;
    }
    groups[{e.device, e.dtype, e.model}].push_back(&e);
  }
  std::map<std::pair<std::string, std::string>, DeviceValidation> rows;
  for (auto& [key, entries] : groups) {
    if (entries.size() < 2) continue;
    std::sort(entries.begin(), entries.end(), [](const LatencyEntry* a, const LatencyEntry* b) { return a->seq > b->seq; });
    const LatencyEntry& longest = *entries.front();
    const nlohmann::json& s = stats[longest.model];
    const double params = s["parameters_per_layer"].get<double>(), hidden = s["hidden_size"].get<double>();
    auto flops = [&](double seq) { return 2.0 * seq * params + 2.0 * hidden * seq * seq; };
    const LatencyCurve curve[2] = {entry_curve(longest.forward_ms, longest.forward_slope_ms, longest.forward_intercept_ms),
                                   entry_curve(longest.backward_ms, longest.backward_slope_ms, longest.backward_intercept_ms)};
    const LatencyCurve line[2] = {line_curve(longest.forward_slope_ms * 1e-3, longest.forward_intercept_ms * 1e-3),
                                  line_curve(longest.backward_slope_ms * 1e-3, longest.backward_intercept_ms * 1e-3)};
    DeviceValidation& row = rows[{longest.device, longest.dtype}];
    row.device = longest.device;
    row.dtype = longest.dtype;
    for (std::size_t i = 1; i < entries.size(); ++i) {
      const LatencyEntry& e = *entries[i];
      ++row.entries;
      const double ratio = flops(static_cast<double>(e.seq)) / flops(static_cast<double>(longest.seq));
      const std::vector<double>* ms[2] = {&e.forward_ms, &e.backward_ms};
      HeldOutErrors* into[2] = {&row.forward, &row.backward};
      for (int kind = 0; kind < 2; ++kind) {
        for (std::size_t b = 1; b <= ms[kind]->size(); ++b) {
          const double measured = (*ms[kind])[b - 1] * 1e-3, x = static_cast<double>(b) * ratio;
          into[kind]->curve.push_back(std::fabs(curve[kind].at(x) - measured) / measured);
          into[kind]->line.push_back(std::fabs(line[kind].at(x) - measured) / measured);
        }
      }
    }
  }
  std::vector<DeviceValidation> out;
  for (auto& [key, row] : rows) out.push_back(std::move(row));
  return out;
}

std::vector<std::string> devices_without_samples(const LatencyTable& table) {
  std::set<std::string> all(table.devices.begin(), table.devices.end()), with;
  for (const LatencyEntry& e : table.entries) {
    all.insert(e.device);
    if (e.forward_ms.size() >= 4 && e.backward_ms.size() >= 4) with.insert(e.device);
  }
  std::vector<std::string> out;
  std::set_difference(all.begin(), all.end(), with.begin(), with.end(), std::back_inserter(out));
  return out;
}

}  // namespace plait::sim
