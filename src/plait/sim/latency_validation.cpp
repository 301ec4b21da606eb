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
