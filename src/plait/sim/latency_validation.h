#pragma once
// Held-out validation of the device curves (latency_curve.h) on a latency table (Zorse's
// model_latencies.json): for every entry with measured samples, fit on some micro-batch sizes and
// predict the others, and collect the relative errors per GPU type and dtype. `plait bench
// profiles` prints them (docs/simulator.md, "Device curves").
#include <string>
#include <vector>

#include "plait/sim/latency_table.h"

namespace plait::sim {

enum class HoldOut {
  // Fit on the odd micro-batch sizes and the largest; predict the even ones below it.
  interpolate,
  // Fit on b <= N/2; predict b > N/2 (the curve continued beyond what it saw).
  extrapolate,
};

// The relative errors |predicted - measured| / measured of one group of held-out points.
struct HeldOutErrors {
  std::vector<double> curve;  // the fitted curve
  std::vector<double> line;   // a straight line fitted the same way (Zorse's form)
  double mean(const std::vector<double>& e) const;
  double max(const std::vector<double>& e) const;
};

struct DeviceValidation {
  std::string device, dtype;
  int entries = 0;  // measurements (model, sequence) with at least four samples of each kind
  HeldOutErrors forward, backward;
  HeldOutErrors both() const;  // forward and backward together
};

// One row per (device, dtype) with held-out points, in name order. Entries with fewer than four
// samples of a kind are left out (too few to fit and hold some out).
std::vector<DeviceValidation> validate_latency_curves(const LatencyTable& table, HoldOut hold_out);

// Across sequence lengths, the case of Seq1F1B's segments (units of less work than the sequence
// measured): for every (model, device, dtype) measured at several sequence lengths, the curves of
// the longest predict every shorter one's measured micro-batch sizes, the work scaled by FLOPs
// (2 * seq * parameters_per_layer + 2 * hidden * seq^2, `stats`: Zorse's model_stats.json);
// "line" is the longest entry's own straight line from the table, as plait read it before these
// curves (a negative intercept proportional below one sample). Models without stats are skipped.
std::vector<DeviceValidation> validate_across_sequences(const LatencyTable& table, const nlohmann::json& stats);

// The devices of `table` none of whose entries carry four or more samples (only fitted lines, or
// no usable entry): they cannot be validated this way.
std::vector<std::string> devices_without_samples(const LatencyTable& table);

// Relative errors on the held-out points of one list of milliseconds at b = 1..N (empty when N < 4).
HeldOutErrors held_out_errors(const std::vector<double>& ms, HoldOut hold_out);

}  // namespace plait::sim
