#pragma once
// What one rank measured in one training step, for the straggler detector (straggler_detector.h)
// and the metrics: its compute time per unit kind, how long it waited, and its sends. Every rank's
// values travel in the step's own reduction of the loss and norm (DistributedTrainer::step), each
// rank in its own slot, so measuring costs no extra synchronisation: kRankStepFields doubles per
// rank added to a reduction that already runs (docs/runtime.md, "Stragglers and restarts").
#include <array>
#include <cstddef>
#include <span>

namespace plait::runtime {

// F, B (and fused BW, which is a B with its W), W: schedule::ActionKind's compute kinds.
inline constexpr std::size_t kUnitKinds = 3;

struct RankStepTimes {
  // Seconds of compute per kind as the rank's device runs it: for an emulated device the time it
  // is padded to (DeviceEmulator::padded_end: slowdown x the action alone on its core), else the
  // wall time of the action.
  std::array<double, kUnitKinds> compute_seconds{};
  std::array<double, kUnitKinds> units{};  // actions run per kind
  double recv_wait_seconds = 0;      // blocked on a stage input that had not arrived
  double collective_wait_seconds = 0;  // the step's barrier and finishing the gradient reductions
  double send_seconds = 0;           // sends open: isend to the first test that saw them done,
                                     // summed (an upper bound, at the granularity of one action)
  double sent_bytes = 0;
  // Of compute_seconds and units: the first action of each (chunk, kind) in the step. It runs
  // cold: the weights the optimizer just changed (or a level-3 gather just brought) come into the
  // caches, and at levels 2-3 the first weight-gradient action touches a freshly committed
  // gradient buffer; measured 3-4x a later action's time on the tiny test jobs.
  double first_seconds = 0;
  double first_units = 0;

  double compute_total() const { return compute_seconds[0] + compute_seconds[1] + compute_seconds[2]; }
  double unit_total() const { return units[0] + units[1] + units[2]; }
  // The rank's speed as the detector and the re-balancer judge it: compute seconds per unit of
  // work, without the cold first actions when there are others (their cost is per step, not per
  // unit: counted in, a rank given fewer micro-batches by a re-balance would look slower per unit
  // than its history; 1.8x at 1 micro-batch of 8 under ZeRO-3 here); 0 without units.
  double seconds_per_unit() const {
    if (unit_total() > first_units) return (compute_total() - first_seconds) / (unit_total() - first_units);
    return unit_total() > 0 ? compute_total() / unit_total() : 0.0;
  }
};

inline constexpr std::size_t kRankStepFields = 2 * kUnitKinds + 6;

// Into / out of kRankStepFields doubles (the reduction's slot of one rank).
void pack(const RankStepTimes& t, std::span<double> out);
RankStepTimes unpack_rank_step_times(std::span<const double> in);

}  // namespace plait::runtime
