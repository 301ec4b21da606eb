#pragma once
// The simulator's cost model fed with this machine's measured engine timings (a SegmentProfile,
// unit_profiler.h): a unit of virtual stage v and segment j costs
//   layers(v) * layer[j] + [v = 0] embedding[j] + [v = last] head[j]
// for its kind (F, B, W; BW = B + W), B (and BW) plus recompute_layers(v) * layer[j].recompute
// (the rebuilds), times the rank's emulated slow-down; a message costs the
// link's latency + bytes / bandwidth. This is how `plait bench runtime speed` predicts a
// measured run's step time.
#include <vector>

#include "plait/runtime/pipeline_plan.h"
#include "plait/runtime/unit_profiler.h"
#include "plait/sim/cost_model.h"
#include "plait/sim/device_profile.h"

namespace plait::runtime {

class ProfileCostModel : public sim::CostModel {
 public:
  // Throws plait::Error if the profile's segments are not the plan's.
  ProfileCostModel(const SegmentProfile& profile, const PipelinePlan& plan, sim::LinkProfile link);

  double compute_seconds(int rank, schedule::ActionKind kind, std::int32_t microbatch,
                         std::int32_t segment, std::int32_t vstage) const override;
  double transfer_seconds(int src_rank, int dst_rank, std::int64_t bytes) const override;

 private:
  int segments_;
  std::vector<UnitTimes> units_;  // [vstage][segment]
  std::vector<double> slowdown_;  // per rank
  sim::LinkProfile link_;
};

}  // namespace plait::runtime
